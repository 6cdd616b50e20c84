"""Per-step latency of one LMU model in every runtime, measured in one run.

    python bench/runtimes.py [--order 64] [--theta 200] [--steps 2000]

Runtimes: LiteRT and TFLite Micro (tflite target, float32 and int8), ONNX
Runtime (onnx target, step model), the numpy reference (lmu_edge.Stream), and
the compiled C model when ``lmu_edge.targets.c`` exists. Each latency is
printed with its ratio to the fastest (or to C when it is there); RAM is
TFLite Micro's arena.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import lmu_edge

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from graphs import chain  # noqa: E402  (needs tests/ on sys.path, set just above)


def per_step(stream, x) -> float:
    stream.reset()
    for x_t in x[:20]:  # warm up
        stream.step(x_t)
    stream.reset()
    t = time.perf_counter()
    for x_t in x:
        stream.step(x_t)
    return (time.perf_counter() - t) / len(x)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--order", type=int, default=64)
    ap.add_argument("--theta", type=float, default=200.0)
    ap.add_argument("--steps", type=int, default=2000)
    a = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    g = lmu_edge.fold(chain(rng, n_in=1, q=a.order, theta=a.theta, units=8), "zoh")
    x = rng.standard_normal((a.steps, 1))
    cal = rng.standard_normal((1, 2000, 1))
    rows, ram = [], {}
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        rows.append(("numpy reference (float64)", per_step(lmu_edge.Stream(g), x)))
        for quant in ("float", "int8"):
            art = lmu_edge.convert(
                g,
                "tflite",
                d / f"tfl_{quant}",
                quantize=quant,
                calibration=cal if quant != "float" else None,
                compare_plain=False,
            )
            rep = json.loads((art.path / "report.json").read_text())
            ram[f"TFLite Micro arena, {quant}"] = rep.get("tflm_arena_bytes")
            for rt, label in (("litert", "LiteRT"), ("tflm", "TFLite Micro")):
                rows.append((f"{label} ({quant})", per_step(art.stream(rt), x)))
        art = lmu_edge.convert(g, "onnx", d / "onnx")
        rows.append(("ONNX Runtime (float32, step model)", per_step(art.stream("onnxruntime"), x)))
        if importlib.util.find_spec("lmu_edge.targets.c") is not None:
            art = lmu_edge.convert(g, "c", d / "c")
            rows.append(("compiled C", per_step(art.stream(), x)))
        else:
            print("C target not available")
    base_name, base = next(((n, t) for n, t in rows if n == "compiled C"), min(rows, key=lambda r: r[1]))
    print(f"model: LMU q={a.order} theta={a.theta:g}, dense ZOH, tanh hidden (8), {a.steps} steps, batch 1")
    print(f"{'runtime':40s} {'us/step':>10s} {'x ' + base_name:>12s}")
    for n, t in rows:
        print(f"{n:40s} {t * 1e6:10.1f} {t / base:12.2f}")
    for k, v in ram.items():
        print(f"{k}: {v} bytes")
    print("(host Python per-step times include the interpreter's Python binding overhead)")


if __name__ == "__main__":
    main()
