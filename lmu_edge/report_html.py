"""The report's page: its charts (inline SVG, :mod:`lmu_edge.svgplot`), ``report.html`` from
``report_template.html.j2`` and ``report.json``; :mod:`lmu_edge.report` measures what they show."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Optional

import numpy as np


def figures(rep: dict) -> dict:
    """The report's charts, each one inline ``<svg>`` element (:mod:`lmu_edge.svgplot`)."""
    from . import svgplot as sp

    figs = {}
    diag = rep.get("diagnosis", {}).get("tensor")
    if rep.get("tensors"):
        rows = rep["tensors"]
        p = sp.Plot(
            820,
            300,
            title="SQNR of every tensor, integer vs float (red: main error source)",
            ylabel="SQNR (dB)",
            margins=(58, 14, 26, 96),
        )
        vals = [r["sqnr_db"] if r["sqnr_db"] is not None else 0 for r in rows]
        p.bars(
            range(len(rows)),
            vals,
            0.8,
            [sp.color(3) if r["name"] == diag else sp.color(0) for r in rows],
            align="center",
        )
        p.xticks(range(len(rows)), [r.get("label", r["name"]) for r in rows], rotate=30)
        p.xlim = (-0.6, len(rows) - 0.4)
        figs["sqnr"] = sp.compose([[p]], label="SQNR per tensor")
        cols = min(4, len(rows))
        panels = []
        for r in rows:
            e = [float(v) for v in r["hist_edges"]]
            h = sp.Plot(
                260, 190, title=f"{r.get('label', r['name'])} ({r['type']})", margins=(44, 10, 22, 30), font=9.0
            )
            h.bars(e[:-1], r["hist"], [b - a for a, b in zip(e[:-1], e[1:], strict=True)], sp.color(0))
            for v in r["type_range"]:
                h.vline(v, sp.color(3), dash="dashed")
            for v in (-r["bound"], r["bound"]) if "bound" in r else ():
                h.vline(v, sp.color(2), dash="dotted")
            panels.append(h)
        figs["ranges"] = sp.compose(
            [panels[i : i + cols] for i in range(0, len(panels), cols)],
            title="values used (histogram) against the type's range (red, dashed) and the state bound (green, dotted)",
            font=10.0,
        )
    if rep.get("step_errors"):
        p = sp.Plot(
            820,
            260,
            title="error of the quantized model over time",
            xlabel="time step",
            ylabel="|error| / output scale",
            ylog=True,
        )
        for i, key in enumerate(("max", "mean")):
            ys = rep["step_errors"][key]
            p.line(range(len(ys)), ys, sp.color(i), label="max over the batch" if key == "max" else "mean")
        if not p.ys:  # exact at every step: nothing to draw on a log axis
            p.ylim = (1e-9, 1.0)
        figs["steps"] = sp.compose([[p]], label="error per step")
    for m in rep.get("lmu", []):
        a1 = sp.Plot(
            560,
            300,
            title=f"{m['layer']}: impulse response (rel. error {m['impulse_response_error']:.1e})",
            xlabel="step",
            font=10.0,
        )
        for i, (hf, hq) in enumerate(zip(m["h_float"], m["h_quantized"], strict=True)):
            a1.line(range(len(hf)), hf, sp.color(i), width=1.6, label=f"row {m['rows'][i]} float")
            a1.line(range(len(hq)), hq, sp.color(i), width=1.1, dash="dashed", label=f"row {m['rows'][i]} quantized")
        a2 = sp.Plot(
            320,
            300,
            title="poles of Abar and the unit circle" if m["poles_float"] else "FIR: no poles",
            equal=True,
            xlim=(-1.15, 1.15),
            ylim=(-1.15, 1.15),
            margins=(40, 14, 26, 30),
            font=10.0,
        )
        t = [2 * math.pi * k / 200 for k in range(201)]
        a2.line([math.cos(v) for v in t], [math.sin(v) for v in t], "#b3b3b3", width=1.0)
        if m["poles_float"]:
            pf, pq = np.array(m["poles_float"]), np.array(m["poles_quantized"])
            a2.markers(pf[:, 0], pf[:, 1], sp.color(0), label=f"float, radius {m['spectral_radius_float']:.6f}")
            a2.markers(
                pq[:, 0],
                pq[:, 1],
                sp.color(1),
                marker="x",
                label=f"quantized, radius {m['spectral_radius_quantized']:.6f}",
            )
            a2.legend("lower left")
        figs[f"lmu_{m['layer']}"] = sp.compose([[a1, a2]], label="impulse response and poles")
    if rep.get("sweep"):
        figs["sweep"] = _sweep_figure(rep["sweep"], rep.get("sweep_float"))
    return figs


def _sweep_figure(sw: list, float_metric: Optional[dict] = None) -> str:
    """The bit-width sweep as a grid: state bits (rows, with the memory each takes) against weight bits
    (columns), each cell the task metric (or the SQNR against float) written in it and coloured by it."""
    from . import svgplot as sp

    key = "metric" if "metric" in sw[0] else "sqnr_db"
    wbs = sorted({r["weight_bits"] for r in sw})
    sbs = sorted({r["state_bits"] for r in sw})
    cell = {(r["state_bits"], r["weight_bits"]): r for r in sw}

    def value(r):
        if key == "metric":
            return r["metric"]["value"]
        return 300.0 if r["sqnr_db"] is None else r["sqnr_db"]  # None: exact

    vals = [value(r) for r in cell.values()]
    lo, hi = min(vals), max(vals)
    higher = sw[0]["metric"].get("higher_is_better", True) if key == "metric" else True
    mem = {}
    for s in sbs:
        b = sorted({cell[(s, w)]["memory_bytes"] for w in wbs if (s, w) in cell})
        mem[s] = f"{b[0]:,} B" if len(b) == 1 else f"{b[0]:,}-{b[-1]:,} B"
    name = sw[0]["metric"]["name"] if key == "metric" else "SQNR against float (dB)"
    ref = f"; float: {float_metric['value']:.3f}" if key == "metric" and float_metric else ""
    both = " (and SQNR against float)" if key == "metric" else ""
    p = sp.Plot(
        max(520, 190 + 90 * len(wbs)),
        60 + 40 * len(sbs),
        title=f"{name}{both} per bit width; memory: constants + state{ref}",
        xlabel="weight bits (stored in int8 whatever their width)",
        xlim=(-0.5, len(wbs) - 0.5),
        ylim=(len(sbs) - 0.5, -0.5),
        margins=(170, 14, 26, 36),
        font=10.0,
    )
    for i, s in enumerate(sbs):
        for j, w in enumerate(wbs):
            if (s, w) not in cell:
                continue
            v = value(cell[(s, w)])
            t = (v - lo) / (hi - lo) if hi > lo else 0.5
            t = t if higher else 1.0 - t
            p.rect(j - 0.5, i - 0.5, j + 0.5, i + 0.5, sp.viridis(t))
            sq = cell[(s, w)]["sqnr_db"]
            db = "exact" if sq is None else f"{sq:.1f} dB"
            text = f"{v:.3f}\n{db}" if key == "metric" else ("exact" if v >= 300 else f"{v:.1f}")
            p.text(j, i, text, fill="#fff" if t < 0.5 else "#000", size=9.0)
    p.xticks(range(len(wbs)), [str(w) for w in wbs])
    p.yticks(range(len(sbs)), [f"{s}-bit state ({mem[s]})" for s in sbs])
    return sp.compose([[p]], label="bit-width sweep")


def write(rep: dict, out_dir, title: Optional[str] = None) -> tuple:
    """Write ``report.json`` and the self-contained ``report.html`` into ``out_dir``."""
    import jinja2

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    describe_evaluation(rep)
    (out_dir / "report.json").write_text(json.dumps(rep, indent=2, sort_keys=True, default=json_default))
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(Path(__file__).parent)), autoescape=True, undefined=jinja2.ChainableUndefined
    )
    html = env.get_template("report_template.html.j2").render(
        rep=rep, figs=figures(rep), title=title or rep.get("model", ""), fmt=_fmt
    )
    (out_dir / "report.html").write_text(html)
    return out_dir / "report.json", out_dir / "report.html"


def describe_evaluation(rep: dict) -> None:
    """Fill in ``rep["evaluation"]`` where :func:`analyze` was not told which data it had: a conversion's
    report (``verification`` present) evaluates a slice of the data that calibrated it, not held out."""
    ev = rep.setdefault("evaluation", {"sequences": (rep.get("data_shape") or [0])[0], "held_out": None})
    ev.setdefault("sequences", (rep.get("data_shape") or [0])[0])
    if ev.get("text"):
        return
    n = ev["sequences"]
    ver = rep.get("verification") or {}
    if ev.get("held_out") is None and ver:
        given = (ver.get("input_shape") or [n])[0]
        what = ver.get("input", "verification input")
        ev["held_out"] = False
        ev["given"] = given
        ev["text"] = (
            f"{'all ' if n == given else f'the first {n} of the '}{given} sequences of the {what} the conversion "
            f"{'calibrated and ' if what.startswith('calibration data') else ''}verified on"
            + (
                ", so NOT held out: the verdict is on data the model was fitted to"
                if what.startswith("calibration data")
                else ""
            )
        )
        ev["held_out_command"] = "lmu-edge report MODEL --data TEST --calibration CALIBRATION"
    elif ev.get("held_out") is None:
        ev["text"] = f"{n} sequences (whether any of them calibrated the model was not said)"


def _fmt(v, spec=".3g"):
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (int, float)):
        return format(v, spec)
    return str(v)


def json_default(o):
    """``json.dumps(default=...)`` for numpy scalars and arrays (as Python numbers and lists)."""
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"cannot write {type(o).__name__} to JSON")
