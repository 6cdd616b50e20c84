"""The layer-option matrix: every matrix model through every target and quantization mode.

    python examples/matrix/matrix.py --full --docs docs/matrix.md   # the full product, writes the table
    python examples/matrix/matrix.py                                 # the pairwise subset CI runs
    python examples/matrix/matrix.py --full --workers 2              # on a local Ray instance
    python examples/matrix/matrix.py --full --address HOST:PORT      # on an existing Ray cluster
    python examples/matrix/matrix.py --model M --target c --mode int8   # only these cells

A cell is ``(model, target, mode)``. It either converts (``lmu_edge.convert``
with the model's calibration inputs), and then its SQNR
``10 log10(sum y^2 / sum (y_q - y)^2)`` against the float64 reference model on
the test inputs (drawn separately from the calibration inputs) must reach the
mode's floor; or it is refused with a one-line :class:`LmuEdgeError`. Anything
else (another exception type, a multi-line message) is a failure.

The cells run through ``lmu_edge.executor.run_tasks``: one after another in this process by default,
on Ray with ``--workers N`` (a local instance) or ``--address`` (a cluster whose every node has this
checkout at the same path and the same environment), each in a temporary directory of its own; the
results are the same and printed in the same order either way.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from train import OPTIONS  # noqa: E402  (train.py beside this script: importable after the sys.path line)

#: (target, mode) -> SQNR floor in dB (None: float, where the bound is the artifact's own tolerance)
CELLS = {
    ("ir", "float"): None,
    ("nengo", "float"): None,
    ("c", "float"): None,
    ("c", "int8"): 30.0,
    ("c", "int16x8"): 45.0,
    ("c", "int16"): 45.0,  # 16-bit activations and weights
    ("tflite", "float"): None,
    ("tflite", "int8"): 30.0,
    ("tflite", "int16x8"): 35.0,
    ("onnx", "float"): None,
    ("onnx", "int8"): 30.0,
    # NIR (exact variant in Rockpool): a first-order simulator step, relative error <= 1e-3 at the default
    # 2500 steps per sample, about 60 dB
    ("nir", "float"): 55.0,
}
FLOAT_FLOOR_DB = 80.0  # float artifacts: within 1e-4 relative of the float64 model is > 80 dB


def pairwise(models=None) -> list:
    """All-pairs subset of (model, target, mode): every pair of values of two axes is run at least once.

    Pairs of axes: each layer option with the target, each layer option with the mode, and the
    target with the mode (every cell). Greedy set cover; deterministic (fixed order, first best).
    """
    models = list(models or OPTIONS)
    cells = list(CELLS)

    def covers(m, c):  # the axes: each layer option, the target, the mode
        opts = list(OPTIONS[m].items()) + [("model", m)]
        return {(k, v, "target", c[0]) for k, v in opts} | {(k, v, "mode", c[1]) for k, v in opts} | {("cell", c)}

    want = set().union(*(covers(m, c) for m in models for c in cells))
    chosen = []
    while want:
        best = max(
            ((m, c) for m in models for c in cells if (m, c) not in chosen), key=lambda mc: len(covers(*mc) & want)
        )
        chosen.append(best)
        want -= covers(*best)
    return sorted(chosen, key=lambda mc: (models.index(mc[0]), cells.index(mc[1])))


def full() -> list:
    return list(itertools.product(OPTIONS, CELLS))


def run_cell(model: str, target: str, mode: str, work: Path, **options) -> dict:
    """Convert one cell (``options``: more of the target's options); returns
    ``{"status": "ok"|"below floor"|"refused"|"error"|"missing", ...}``."""
    import lmu_edge
    from lmu_edge.metrics import sqnr_db

    data = np.load(HERE / f"{model}.npz")
    x_cal, x_test = data["x_cal"], data["x_test"]
    path = HERE / f"{model}.keras"
    if not path.exists():  # a PyTorch-made model (train_torch.py)
        path = HERE / f"{model}.safetensors"
    t0 = time.perf_counter()
    try:
        art = lmu_edge.convert(
            path,
            target,
            work / (f"{model}-{target}-{mode}" + "".join(f"-{k}{v}" for k, v in options.items())),
            quantize=mode,
            calibration=x_cal if mode != "float" else None,
            tolerance=float("inf"),
            **options,
        )
    except lmu_edge.errors.MissingDependencyError as e:
        return {"status": "missing", "reason": str(e), "seconds": time.perf_counter() - t0}
    except (lmu_edge.errors.UnsupportedLayerError, lmu_edge.errors.QuantizationError) as e:
        # a refusal: the target cannot express the model or the mode (decided before anything is written)
        return {"status": "refused", "reason": str(e), "seconds": time.perf_counter() - t0}
    except lmu_edge.LmuEdgeError as e:  # any other error (a bad option, a failed build) is a failure
        return {"status": "error", "reason": f"{type(e).__name__}: {e}", "seconds": time.perf_counter() - t0}
    except Exception as e:  # the matrix reports it: no raw exception may leave convert
        return {
            "status": "error",
            "reason": f"{type(e).__name__}: {e}".splitlines()[0],
            "seconds": time.perf_counter() - t0,
        }
    y_ref = lmu_edge.simulate(lmu_edge.load(path), x_test.astype(np.float64))
    y = art.run(x_test)
    s = sqnr_db(y, y_ref)
    floor = CELLS[(target, mode)]
    floor = FLOAT_FLOOR_DB if floor is None else floor
    return {
        "status": "ok" if s >= floor else "below floor",
        "sqnr": s,
        "floor": floor,
        "seconds": time.perf_counter() - t0,
    }


def cell_task(model: str, target: str, mode: str) -> dict:
    """:func:`run_cell` in a temporary directory of its own: one task of :func:`lmu_edge.executor.run_tasks`."""
    with tempfile.TemporaryDirectory(prefix="lmu-edge-matrix-") as work:
        return run_cell(model, target, mode, Path(work))


def _progress(done: int, total: int, left: float, per_worker: dict) -> None:
    """A progress line on stderr after each finished cell: done / total, time left, per-worker counts."""
    eta = "?" if not math.isfinite(left) else f"{left / 60:.1f} min"
    workers = ", ".join(f"{w} {n}" for w, n in sorted(per_worker.items()))
    print(f"matrix: {done}/{total} cells done, about {eta} left (per worker: {workers})", file=sys.stderr, flush=True)


def int16_state_sqnr(model: str, state_bits: int) -> float:
    """SQNR (dB) of the integer reference of the C int16 mode (16-bit activations and weights) with a
    ``state_bits`` state, against the float64 model on the test inputs (docs/matrix.md, C int16)."""
    import lmu_edge
    from lmu_edge import folding
    from lmu_edge.metrics import sqnr_db

    data = np.load(HERE / f"{model}.npz")
    path = HERE / f"{model}.keras"
    if not path.exists():
        path = HERE / f"{model}.safetensors"
    src = lmu_edge.load(path)
    g = lmu_edge.fold(src, "auto", folding.default_budget(state_bits)[0], target="c", quantized=True)
    qg = lmu_edge.quantize(g, data["x_cal"], weight_bits=16, state_bits=state_bits, activation_bits=16)
    x = data["x_test"].astype(np.float64)
    return sqnr_db(lmu_edge.simulate(qg, x), lmu_edge.simulate(src, x))


def weight_ceiling(model: str) -> float:
    """SQNR (dB) of the float64 model with only its weights quantized as the integer targets do (int8,
    per output channel, symmetric, rounded by error feedback and the biases corrected for the rounding on
    the calibration data, as ``quantize`` does with 16-bit activations): in
    practice the most any mode with int8 weights reaches, whatever its activation and state widths. The
    diagnosis of the C int16x8 column in docs/matrix.md compares against it."""
    import dataclasses

    import lmu_edge
    from lmu_edge import folding, ir, reference, rounding
    from lmu_edge.metrics import sqnr_db

    def q8(w):
        w = np.asarray(w, np.float64)
        s = np.max(np.abs(w), axis=0) / 127
        s = np.where(s > 0, s, 1e-12)
        return np.round(w / s) * s

    def node(n):
        if not dataclasses.is_dataclass(n) or isinstance(n, ir.Graph):
            return n
        ch = {}
        for f in dataclasses.fields(n):
            v = getattr(n, f.name)
            if v is None:
                continue
            # the feed-forward weights are on their grid already (rounding.compensated); the rest:
            if f.name in ("hidden_encoders", "memory_encoders", "recurrent_kernel"):
                ch[f.name] = q8(v)
            elif f.name == "hidden":
                ch[f.name] = node(v)
        return dataclasses.replace(n, **ch) if ch else n

    data = np.load(HERE / f"{model}.npz")
    path = HERE / f"{model}.keras"
    if not path.exists():
        path = HERE / f"{model}.safetensors"
    src = lmu_edge.load(path)
    g = lmu_edge.fold(src, "auto", folding.default_budget(16)[0])
    x_cal = data["x_cal"].astype(np.float64)
    g = rounding.compensated(g, reference.record_ranges(g, x_cal), 8)
    x = data["x_test"].astype(np.float64)
    return sqnr_db(
        lmu_edge.simulate(g.replace(layers=tuple(node(lay) for lay in g.layers)), x), lmu_edge.simulate(src, x)
    )


def table(results: dict) -> str:
    """Markdown: one row per model, one column per (target, mode); SQNR in dB or the refusal."""
    cells = list(CELLS)
    head = "| model | " + " | ".join(f"{t} {m}" for t, m in cells) + " |"
    lines = [head, "|" + " --- |" * (len(cells) + 1)]
    notes = []
    for model in OPTIONS:
        row = [f"`{model}`"]
        for c in cells:
            r = results.get((model,) + c)
            if r is None:
                row.append("")
            elif r["status"] in ("ok", "below floor"):
                v = "inf" if r["sqnr"] == float("inf") else f"{r['sqnr']:.1f}"
                row.append(v if r["status"] == "ok" else f"**{v} < {r['floor']:g}**")
            else:
                notes.append(f"- `{model}` / {c[0]} {c[1]} ({r['status']}): {r['reason']}")
                row.append(r["status"] + f" [{len(notes)}]")
        lines.append("| " + " | ".join(row) + " |")
    return (
        "\n".join(lines)
        + (
            "\n\nRefusals and errors:\n\n" + "\n".join(n.replace("- ", f"{i}. ", 1) for i, n in enumerate(notes, 1))
            if notes
            else ""
        )
        + "\n"
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="every (model, target, mode), not the pairwise subset")
    ap.add_argument("--docs", type=Path, help="write the markdown table into this file (between markers)")
    ap.add_argument("--json", type=Path, help="also write every cell's result to this JSON file")
    ap.add_argument("--weight-ceiling", action="store_true", help="print each model's int8-weights-only SQNR")
    ap.add_argument(
        "--int16-states",
        action="store_true",
        help="print each model's SQNR with int16 weights and a 16-, 24- and 32-bit state (the integer reference)",
    )
    ap.add_argument("--model", action="append", help="only this model's cells (repeatable)")
    ap.add_argument("--target", action="append", help="only this target's cells (repeatable)")
    ap.add_argument("--mode", action="append", help="only this quantization mode's cells (repeatable)")
    ap.add_argument("--workers", type=int, default=0, help="run the cells on a local Ray instance with N workers")
    ap.add_argument("--address", help="run the cells on this existing Ray cluster (HOST:PORT)")
    args = ap.parse_args(argv)
    if args.int16_states:
        for model in OPTIONS:
            print(f"{model:32s} int16 weights, 16 / 24 / 32-bit state: " + " / ".join(
                f"{int16_state_sqnr(model, sb):.1f}" for sb in (16, 24, 32)) + " dB", flush=True)  # fmt: skip
        return 0
    if args.weight_ceiling:
        for model in OPTIONS:
            print(f"{model:32s} int8 weights alone: {weight_ceiling(model):.1f} dB", flush=True)
        return 0
    cells = full() if args.full else pairwise()
    for name, axis, known in (
        ("--model", args.model, set(OPTIONS)),
        ("--target", args.target, {t for t, _ in CELLS}),
        ("--mode", args.mode, {m for _, m in CELLS}),
    ):
        if axis and not set(axis) <= known:
            print(f"matrix: {name} {sorted(set(axis) - known)} is not in the matrix; it has {sorted(known)}")
            return 2
    if args.docs and (args.model or args.target or args.mode):
        print("matrix: --docs writes the whole table; run it without --model, --target or --mode")
        return 2
    cells = [
        (model, (target, mode))
        for model, (target, mode) in cells
        if (not args.model or model in args.model)
        and (not args.target or target in args.target)
        and (not args.mode or mode in args.mode)
    ]
    from lmu_edge import LmuEdgeError
    from lmu_edge.executor import run_tasks

    tasks = [(model, target, mode) for model, (target, mode) in cells]
    try:
        done = run_tasks(cell_task, tasks, workers=args.workers, address=args.address, progress=_progress)
    except LmuEdgeError as e:  # Ray missing, not reachable, a bad --workers: one line, no traceback
        print(f"matrix: {e}")
        return 2
    results = {}
    for (model, target, mode), res in zip(tasks, done, strict=True):
        r = res.value if res.error is None else {"status": "error", "reason": res.error, "seconds": res.seconds}
        results[(model, target, mode)] = r
        shown = f"{r['sqnr']:.1f} dB" if "sqnr" in r else r["reason"]
        print(f"{model:32s} {target:7s} {mode:8s} {r['status']:12s} {shown}  ({r['seconds']:.1f} s)", flush=True)
    md = table(results)
    if args.json:
        import json

        args.json.write_text(
            json.dumps([dict(r, model=k[0], target=k[1], mode=k[2]) for k, r in results.items()], indent=1)
        )
    if args.docs:
        text = args.docs.read_text() if args.docs.exists() else ""
        start, end = "<!-- matrix:begin -->", "<!-- matrix:end -->"
        if start in text and end in text:
            text = text[: text.index(start) + len(start)] + "\n" + md + text[text.index(end) :]
        else:
            text += f"\n{start}\n{md}{end}\n"
        args.docs.write_text(text)
    print(md)
    bad = [k for k, r in results.items() if r["status"] not in ("ok", "refused")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
