"""``sweep.html``: the Pareto front of a sweep as a chart, and every point with its convert command.

Everything that comes from a model file or the command line (paths, errors) is escaped."""

from __future__ import annotations

import html
import math

from . import svgplot

_NAMES = {"accuracy": "accuracy", "nrmse": "NRMSE", "sqnr_db": "SQNR (dB)"}


def chart(data: dict) -> str:
    """The metric against log10 of the cost: every converted point, the Pareto front joined, the points
    that do not fit the device crossed, the recommended one ringed."""
    rows, key, ck = data["rows"], data["metric"], data["cost"]
    use = [i for i, r in enumerate(rows) if r["status"] == "ok" and r.get(key) is not None and r.get(ck)]
    measured = ck == "instructions_per_step"
    what = "instructions per step" if measured else "flash bytes"
    core = f" on Cortex-{data['core'].upper()}" if measured else ""
    p = svgplot.Plot(
        720, 360, title=f"{_NAMES[key]} against cost", xlabel=f"{what}{core} (log scale)", ylabel=_NAMES[key]
    )
    if not use:
        p.text(0.5, 0.5, "no point converted")
        return svgplot.compose([[p]], label="sweep chart: no point converted")

    def xy(i):
        return math.log10(max(float(rows[i][ck]), 1.0)), float(rows[i][key])

    fits = [i for i in use if rows[i].get("fits") is not False]
    over = [i for i in use if rows[i].get("fits") is False]
    front = sorted((i for i in data["pareto"] if i in use), key=lambda i: xy(i)[0])
    if fits:
        p.markers([xy(i)[0] for i in fits], [xy(i)[1] for i in fits], "#999", label="converted, fits")
    if over:
        p.markers([xy(i)[0] for i in over], [xy(i)[1] for i in over], "#d62728", marker="x", label="does not fit")
    if front:
        p.line([xy(i)[0] for i in front], [xy(i)[1] for i in front], svgplot.color(0), label="Pareto front")
        p.markers([xy(i)[0] for i in front], [xy(i)[1] for i in front], svgplot.color(0))
    rec = data.get("recommended")
    if rec is not None and rec in use:
        p.markers([xy(rec)[0]], [xy(rec)[1]], svgplot.color(2), size=7, label="recommended")
    lo = math.floor(min(xy(i)[0] for i in use))
    hi = math.ceil(max(xy(i)[0] for i in use))
    hi = hi if hi > lo else lo + 1
    p.xticks(list(range(lo, hi + 1)), [_short(10**e) for e in range(lo, hi + 1)])
    p.legend("lower right")
    return svgplot.compose([[p]], label=f"sweep chart: {_NAMES[key]} against {what}")


def _short(v: float) -> str:
    """10000 -> '10k', 1e6 -> '1M' (tick labels that fit at the chart's edges)."""
    for div, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if v >= div:
            return f"{v / div:g}{unit}"
    return f"{v:g}"


def _point(p: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in p.items())


def _num(v, spec=",.0f"):
    if v is None:
        return "-"
    return format(v, spec) if isinstance(v, (int, float)) else html.escape(str(v))


def page(data: dict) -> str:
    """The whole ``sweep.html``."""
    e = html.escape
    key = data["metric"]
    rec = data.get("recommended")
    rows_html = []
    for i, r in enumerate(data["rows"]):
        cls = ' class="rec"' if i == rec else (' class="front"' if i in data["pareto"] else "")
        status = r["status"] + (" (cached)" if r.get("cached") else "")
        if r.get("attempts", 1) > 1:
            status += f" after {r['attempts']} attempts"
        fits = {True: "yes", False: "no", None: "not measured"}.get(r.get("fits"), "-")
        m = r.get(key)
        rows_html.append(
            f"<tr{cls}><td>{e(r['model'])}</td><td>{e(_point(r['point']))}</td><td>{e(status)}</td>"
            f"<td>{_num(m, '.4g')}</td><td>{_num(r.get('sqnr_db'), '.1f')}</td>"
            f"<td>{_num(r.get('flash_bytes'))}</td><td>{_num(r.get('ram_bytes'))}</td>"
            f"<td>{_num(r.get('instructions_per_step'))}</td><td>{fits}</td>"
            f"<td>{'yes' if i in data['pareto'] else ''}</td>"
            f"<td><code>{e(r.get('command', ''))}</code>{('<br>' + e(r['error'])) if r.get('error') else ''}</td></tr>"
        )
    skipped = "".join(f"<li>{e(_point(s['point']))}: {e(s['why'])}</li>" for s in data["not_offered"])
    if rec is not None:
        r = data["rows"][rec]
        verdict = (
            f"<p><b>Recommended:</b> {e(r['model'])}, {e(_point(r['point']))}: {e(data['why'])}.</p>"
            f"<p>Reproduce it (calibration.npy is next to this page): <code>{e(r['command'])}</code></p>"
        )
    else:
        verdict = f"<p><b>No recommendation:</b> {e(data['why'])}.</p>"
    sp = data["split"]
    against = "the labels" if key != "sqnr_db" else "the float source model"
    cost_note = (
        "Instructions per step are exact counts under QEMU (-icount) on the device's core (Cortex-M4 without "
        "--device). TFLite and ONNX points have no instruction count: they are in the table, not on the chart "
        "(where no point has one, the chart's cost is flash bytes)."
    )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>lmu-edge sweep</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; max-width: 1200px; }}
table {{ border-collapse: collapse; font-size: 13px; }} td, th {{ border: 1px solid #ccc; padding: 3px 6px; }}
tr.front {{ background: #eef5ff; }} tr.rec {{ background: #dff5df; font-weight: bold; }}
code {{ font-size: 12px; }}
</style></head><body>
<h1>lmu-edge sweep</h1>
<p>{len(data["rows"])} points over {len(data["models"])} model(s); device: {e(str(data["device"] or "none"))}.
Each point was calibrated on {sp["calibration"]} sequences of --data and measured on the other {sp["evaluation"]}
(a seeded split); the metric is {e(_NAMES[key])} against {against}.</p>
{verdict}
{chart(data)}
<p>Points on the Pareto front (blue) have no other point at least as good in both {e(_NAMES[key])} and cost.
{cost_note}</p>
<table><tr><th>model</th><th>point</th><th>status</th><th>{e(_NAMES[key])}</th><th>SQNR dB</th><th>flash B</th>
<th>RAM B</th><th>instructions / step</th><th>fits</th><th>Pareto</th><th>convert command</th></tr>
{"".join(rows_html)}</table>
{"<h2>Not offered by the target</h2><ul>" + skipped + "</ul>" if skipped else ""}
</body></html>
"""
