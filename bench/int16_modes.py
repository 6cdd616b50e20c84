"""The 16-bit integer modes of the C target on Cortex-M: instructions per step and accuracy, in one run.

    python bench/int16_modes.py

For one model (an LMU of order 64, theta 200, 4 inputs, a Dense(32) tanh hidden cell; dense ZOH) it
converts int16x8 (int8 weights throughout, 16-bit state), int16 with a 16-bit state and int16 with its default
32-bit state, checks each against the integer reference bit for bit on every Cortex-M runtime with
the DSP or Helium extension, and prints instructions per step (QEMU -icount) as ratios against
int16x8 measured in the same run, with each mode's SQNR against the float64 model on fresh inputs.
Needs arm-none-eabi-gcc and qemu-system-arm. Prints, asserts nothing.
"""

import sys
import tempfile
from pathlib import Path

import numpy as np

import lmu_edge
from lmu_edge import intsim
from lmu_edge.metrics import sqnr_db

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from graphs import chain  # noqa: E402  (needs tests/ on sys.path, set just above)

MODES = (("int16x8", 16), ("int16", 16), ("int16", None))
CPUS = ("cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55")


def main():
    rng = np.random.default_rng(5)
    g = lmu_edge.fold(chain(rng, n_in=4, q=64, theta=200.0, units=32), "zoh")
    cal, test = rng.standard_normal((4, 400, 4)), rng.standard_normal((4, 400, 4))
    y = lmu_edge.simulate(g, test)
    rows = {}
    with tempfile.TemporaryDirectory() as d:
        for mode, sb in MODES:
            name = f"{mode}, {'32' if sb is None else sb}-bit state"
            # int16x8 with int8 weights throughout (--weight-bits 8: no widening), the scheme compared here
            wb = 8 if mode == "int16x8" else None
            art = lmu_edge.convert(g, "c", Path(d) / name.replace(" ", "_"), quantize=mode, calibration=cal,
                                   state_bits=sb, weight_bits=wb, measure=False)  # fmt: skip
            qg = lmu_edge.load(art.path / "quantized.lmu.npz")
            xq = intsim.quantize_input(qg, test[:1, :40]).astype(np.int16)
            ref = intsim.run_int(qg, xq)
            counts = {}
            for cpu in CPUS:
                out, stats = art.module.run_native(art, xq, cpu)
                if not np.array_equal(out.astype(np.int64), ref):
                    raise SystemExit(f"{name} on {cpu}: not bit-exact with the integer reference")
                counts[cpu] = stats["instructions_per_step"]
            rows[name] = (sqnr_db(art.run(test), y), counts, art.manifest["c"]["state_bytes"])
    base = rows["int16x8, 16-bit state"][1]
    print("| mode | SQNR vs float64 | RAM (state) | " + " | ".join(f"{c} instr/step (x int16x8)" for c in CPUS) + " |")
    print("| --- | --- | --- | " + " | ".join("---" for _ in CPUS) + " |")
    for name, (s, counts, ram) in rows.items():
        cells = " | ".join(f"{counts[c]:,.0f} ({counts[c] / base[c]:.2f}x)" for c in CPUS)
        print(f"| {name} | {s:.1f} dB | {ram} B | {cells} |")


if __name__ == "__main__":
    main()
