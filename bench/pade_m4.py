"""Cortex-M instructions per step of the portable implicit Pade C step against dense ZOH and RK4.

    python bench/pade_m4.py                  # order 256, theta 25600 (where Pade has the fewest operations)
    python bench/pade_m4.py --order 64 --theta 6400

One model (input -> Dense -> LMU (d=1) -> Dense, tests/graphs.py's ``chain``) is folded three times, with
dense ZOH, RK4 and Pade [3/4] (each with the smallest substep count within the budget), converted to
int8 C with a 16-bit state (budget: a quarter LSB of the state, lmu_edge.folding.default_budget) and to
float C, checked bit-exact on the host against the integer reference, and run on Cortex-M4 (and M0 for
the integer build) under QEMU with -icount (lmu_edge.toolchain). The Dense layers are the same in all
three, so the differences between rows are the memory's. Needs gcc, arm-none-eabi-gcc and
qemu-system-arm. Prints, asserts nothing.
"""

import argparse
import datetime
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import lmu_edge
from lmu_edge import folding as fold

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from graphs import chain  # noqa: E402  (needs tests/ on sys.path, set just above)


def main():
    """Fold, convert, check and count instructions per step for dense ZOH, RK4 and Pade."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--order", type=int, default=256)
    ap.add_argument("--theta", type=float, default=25600.0)
    ap.add_argument("--steps", type=int, default=64, help="steps run under QEMU")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    g = chain(rng, q=args.order, theta=args.theta, units=8)
    x = rng.standard_normal((2, 300, 2))
    budget, why = fold.default_budget(16)
    print(
        f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores; order "
        f"{args.order}, theta {args.theta:g}; int8 with a 16-bit state at budget {budget:.3g} ({why}); "
        f"float at 1e-6; {args.steps} steps under QEMU -icount"
    )
    print(
        f"{'kind':<6} {'realization':<12} {'error':>8} {'ops/step':>9} {'coeffs':>7} {'bit-exact':>9} "
        f"{'M4 insn':>10} {'M4/op':>6} {'M0 insn':>10} {'secs':>5}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for kind, b in (("int8", budget), ("float", 1e-6)):
            for real in ("zoh", "rk4", "pade"):
                t0 = time.perf_counter()
                f = lmu_edge.fold(g, real, error_budget=b, target="c", quantized=kind != "float")
                lay = f.layers[1]
                m = lay.measurement
                sub = getattr(lay.memory, "substeps", None)
                label = real + (f" x{sub}" if sub else "")
                out = Path(tmp) / f"{kind}-{real}"
                art = lmu_edge.convert(f, "c", out, quantize=kind, calibration=x, measure=False)
                measured = art.__class__(art.path, {**art.manifest, "c": {**art.manifest["c"], "measure": True}})
                rep = art.module.check(measured, x[:, : args.steps])
                m4, m0 = rep.get("instructions_per_step_m4"), rep.get("instructions_per_step_m0")
                exact = rep.get("bit_exact_host", "-")
                print(
                    f"{kind:<6} {label:<12} {m.error:8.1e} {m.ops_per_step:>9} {m.coeffs_stored:>7} {exact!s:>9} "
                    f"{m4 if m4 is not None else '-':>10} {(m4 / m.ops_per_step if m4 else float('nan')):6.2f} "
                    f"{m0 if m0 is not None else '-':>10} {time.perf_counter() - t0:5.0f}",
                    flush=True,
                )
                size = json.loads((out / "report.json").read_text()).get("c", {}).get("flash_bytes")
                if size:
                    print(f"{'':<19} flash {size} bytes")


if __name__ == "__main__":
    main()
