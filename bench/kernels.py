"""Cortex-M kernel paths: whole-step instructions per MAC, optimized (DSP) against portable, measured in
one run with QEMU -icount on the bench model (order 64) and an order-256 model, both dense ZOH with int8
weights and a 16-bit state.

    python bench/kernels.py [--orders 64 256]

MACs are the report's ``macs_per_step`` (every dense layer and the q x q memory update, counted by the
code generator outside the kernels). The portable row is the same model.c built with -DLMU_PORTABLE.
Prints ratios, asserts nothing.
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

import lmu_edge
from lmu_edge import intsim
from lmu_edge.targets import c as c_target

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from graphs import chain  # noqa: E402

M4 = "-mcpu=cortex-m4 -mfloat-abi=hard -mfpu=fpv4-sp-d16"


def m4_run(art, xq, extra):
    """Instructions per step and model.o flash bytes of the M4 build with extra flags; bit-exactness."""
    d = art.path
    subprocess.run(["make", "-s", "-B", "build/model_m4.elf", "build/model_m4.o", f"FLAGS_m4={M4} {extra}"], cwd=d,
                   check=True, capture_output=True)
    c_target._write_input(d / "lmu_in.bin", xq.astype(np.int8), 1)
    r = subprocess.run(["qemu-system-arm", *c_target.QEMU_ARGS, "-kernel", "build/model_m4.elf"], cwd=d, check=True,
                       capture_output=True, text=True)
    stats = next({k: int(v) for k, v in (kv.split("=") for kv in line.split()[1:])}
                 for line in r.stdout.splitlines() if line.startswith("lmu-edge:"))
    y = c_target._read_output(d / "lmu_out.bin", 0).astype(np.int64)
    sec = c_target._sections(d / "build" / "model_m4.o")
    return stats["ticks"] * c_target.INSN_PER_TICK / stats["steps"], sec["text"] + sec["rodata"] + sec["data"], y


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--orders", type=int, nargs="+", default=[64, 256])
    a = ap.parse_args()
    print(f"{'model':<28} {'path':<22} {'MACs':>7} {'M4 insn/step':>13} {'per MAC':>8} {'flash B':>8} "
          f"{'bit-exact':>9} ratio")
    with tempfile.TemporaryDirectory() as tmp:
        for q in a.orders:
            rng = np.random.default_rng(0)
            theta = 200.0 if q == 64 else 4.0 * q
            g = lmu_edge.fold(chain(rng, n_in=1, q=q, theta=theta, units=8), "zoh")
            cal = rng.standard_normal((2, 2000, 1))
            x = rng.standard_normal((1, 40, 1))
            art = lmu_edge.convert(g, "c", Path(tmp) / f"q{q}", quantize="int8", calibration=cal, measure=False)
            qg = c_target._qgraph(art)
            xq = intsim.quantize_input(qg, x)
            ref = intsim.run_int(qg, xq)
            macs = json.loads((art.path / "report.json").read_text())["c"]["macs_per_step"]
            res = {}
            for path, extra in (("portable (-DLMU_PORTABLE)", "-DLMU_PORTABLE"), ("DSP (default on M4)", "")):
                res[path] = m4_run(art, xq, extra)
            base = res["portable (-DLMU_PORTABLE)"][0]
            for path, (n, flash, y) in res.items():
                print(f"{f'order {q}, theta {theta:g}, 16-bit':<28} {path:<22} {macs:7d} {n:13.0f} {n / macs:8.2f} "
                      f"{flash:8d} {str(bool(np.array_equal(y, ref))):>9} {base / n:.2f}x fewer than portable")
    print("instruction counts are exact (QEMU -icount); the DSP path reads the same arrays, so flash differs "
          "only by code size")


if __name__ == "__main__":
    main()
