"""Per-step cost of the compiled C: host time against the numpy reference, and Cortex-M4 / M0
instructions against the multiply-accumulate count, measured in one run.

    python bench/c_step.py

Needs gcc (host) and, for the instruction counts, arm-none-eabi-gcc and qemu-system-arm.
Prints ratios, asserts nothing.
"""

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import lmu_edge
from lmu_edge import intsim

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from graphs import chain  # noqa: E402  (needs tests/ on sys.path, set just above)


def per_step_seconds(fn, steps):
    """Seconds per step of ``fn()``, which runs ``steps`` steps."""
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) / steps


def main():
    """Print host time and Cortex-M instructions per step for three models, int8 and float."""
    rng = np.random.default_rng(0)
    cases = {
        "digits (keras, q=24)": (
            lmu_edge.fold(lmu_edge.load(ROOT / "examples/models/keras_digits.keras")),
            np.load(ROOT / "examples/models/digits_calibration_x.npy"),
        ),
        "q=64, theta=200, dense": (
            lmu_edge.fold(chain(rng, q=64, theta=200.0, units=16), "zoh"),
            rng.standard_normal((4, 400, 2)),
        ),
        "q=64, theta=200, rk4": (
            lmu_edge.fold(chain(rng, q=64, theta=200.0, units=16), "rk4", error_budget=1e-4),
            rng.standard_normal((4, 400, 2)),
        ),
    }
    print(
        f"{'model':<24} {'kind':<6} {'C host us':>10} {'numpy us':>10} {'numpy/C':>8} "
        f"{'MACs':>7} {'M4 insn':>9} {'M4/MAC':>7} {'M0 insn':>9} {'M0/MAC':>7}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for name, (g, x) in cases.items():
            for kind in ("int8", "float"):
                out = Path(tmp) / f"{len(list(Path(tmp).iterdir()))}"
                opts = {"widen_db": None} if kind == "int8" else {}  # all-int8: the int8 kernels are what is timed
                art = lmu_edge.convert(g, "c", out, quantize=kind, calibration=x, measure=False, **opts)
                xs = x[:1, :200]
                s = art.stream()
                steps = xs.shape[1]
                if kind == "int8":
                    qg = lmu_edge.load(out / "quantized.lmu.npz")
                    xq = intsim.quantize_input(qg, xs)[0].astype(np.int8)
                    s.reset()
                    c_t = per_step_seconds(lambda s=s, xq=xq, n=steps: [s.step_int8(xq[t]) for t in range(n)], steps)
                    ref = intsim.IntStream(qg)
                    np_t = per_step_seconds(
                        lambda r=ref, xq=xq, n=steps: [r.step(xq[t : t + 1].astype(np.int64)) for t in range(n)], steps
                    )
                else:
                    s.reset()
                    c_t = per_step_seconds(lambda s=s, xs=xs, n=steps: [s.step(xs[0, t]) for t in range(n)], steps)
                    fref = lmu_edge.Stream(g)
                    np_t = per_step_seconds(lambda r=fref, xs=xs, n=steps: [r.step(xs[0, t]) for t in range(n)], steps)
                measured = art.__class__(art.path, {**art.manifest, "c": {**art.manifest["c"], "measure": True}})
                rep = art.module.check(measured, xs)
                macs = __import__("json").loads((out / "report.json").read_text())["c"]["macs_per_step"]
                m4, m0 = rep.get("instructions_per_step_m4"), rep.get("instructions_per_step_m0")
                print(
                    f"{name:<24} {kind:<6} {c_t * 1e6:10.2f} {np_t * 1e6:10.1f} {np_t / c_t:8.1f} {macs:7d} "
                    f"{m4 if m4 is not None else '-':>9} {(m4 / macs if m4 else float('nan')):7.2f} "
                    f"{m0 if m0 is not None else '-':>9} {(m0 / macs if m0 else float('nan')):7.2f}",
                    flush=True,
                )
    print("C host time includes the ctypes call (about a microsecond); instruction counts are exact (QEMU -icount).")


if __name__ == "__main__":
    main()
