"""Weight rounding and widening in C int16x8, measured on the layer-option matrix and the README's models.

    python bench/weight_rounding.py            # about two minutes on one core
    python bench/weight_rounding.py --quick    # the matrix models only
    python bench/weight_rounding.py --cost     # also flash and Cortex-M4 instructions of widened models

For each model, the SQNR (dB) against the float64 model on test inputs drawn apart from the calibration
inputs, of the integer reference (bit-exact with the C target) with 16-bit activations and int8
weights rounded to nearest, rounded by GPTQ (``weight_rounding="gptq"``), and the C target's default
(GPTQ, and 16-bit weights for the fewest matrices that reach 48 dB on the calibration data:
``widen_db``), with the parts widened. With ``--cost``, for each model whose parts were widened: its C
artifact's flash and its instructions per step on the Cortex-M4 (QEMU ``-icount``; bit-exact with
the integer reference, checked), with ``--weight-bits 8`` and by default. Prints, asserts nothing;
the numbers in docs/matrix.md and the CHANGELOG come from it.
"""

import argparse
import json
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

import lmu_edge
from lmu_edge import folding
from lmu_edge.metrics import sqnr_db
from lmu_edge.targets.c import WIDEN_DB

ROOT = Path(__file__).resolve().parents[1]
MATRIX = ROOT / "examples" / "matrix"
MODELS = ROOT / "examples" / "models"


def matrix_cases():
    for npz in sorted(MATRIX.glob("*.npz")):
        data = np.load(npz)
        path = npz.with_suffix(".keras")
        yield npz.stem, path if path.exists() else npz.with_suffix(".safetensors"), data["x_cal"], data["x_test"]


def readme_cases():
    """The README's models, calibrated and tested as docs/matrix.md states."""
    x = np.load(MODELS / "keras_mackey_glass_test_x.npy")
    yield "README digits", MODELS / "keras_digits.keras", np.load(MODELS / "digits_calibration_x.npy")[:256], \
        np.load(MODELS / "keras_digits_test_x.npy")[:200]  # fmt: skip
    yield "README Mackey-Glass", MODELS / "keras_mackey_glass.keras", x[:4], x[4:8]
    yield "README GunPoint", MODELS / "gunpoint_lmu.keras", np.load(MODELS / "gunpoint_calibration_x.npy")[:50], \
        np.load(MODELS / "gunpoint_test_x.npy")[:150]  # fmt: skip
    cal, test = np.load(MODELS / "psmnist_calibration_x.npy")[:64], np.load(MODELS / "psmnist_test_x.npy")[:200]
    yield "README psMNIST", MODELS / "psmnist_lmu.keras", cal.reshape(64, -1, 1), test.reshape(200, -1, 1)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the layer-option matrix only")
    ap.add_argument("--cost", action="store_true", help="flash and Cortex-M4 instructions of widened models")
    args = ap.parse_args(argv)
    cases = list(matrix_cases()) + ([] if args.quick else list(readme_cases()))
    widened = []
    print("| model | nearest | GPTQ | default (widened) | parts widened | seconds |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, path, cal, test in cases:
        t0 = time.perf_counter()
        src = lmu_edge.load(path)
        g = lmu_edge.fold(src, "auto", folding.default_budget(16)[0], target="c", quantized=True)
        cal, test = np.asarray(cal, np.float64), np.asarray(test, np.float64)
        y = lmu_edge.simulate(src, test)
        got = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for label, kw in (
                ("nearest", {"weight_rounding": "nearest"}),
                ("gptq", {"weight_rounding": "gptq"}),
                ("default", {"widen_db": WIDEN_DB["int16x8"]}),
            ):
                q = lmu_edge.quantize(g, cal, activation_bits=16, **kw)
                got[label] = (sqnr_db(lmu_edge.simulate(q, test), y), q.metadata["quantization"].get("widened"))
        wide = ", ".join(got["default"][1]) or "none"
        if got["default"][1]:
            widened.append((name, path, cal, test))
        print(
            f"| {name} | {got['nearest'][0]:.1f} | {got['gptq'][0]:.1f} | {got['default'][0]:.1f} | {wide} "
            f"| {time.perf_counter() - t0:.1f} |",
            flush=True,
        )
    if args.cost:
        cost(widened)


def cost(cases):
    """Flash and Cortex-M4 instructions per step, int8 weights against the default's widened ones."""
    from lmu_edge import intsim

    print("\n| model | flash, int8 weights | flash, widened | M4 instructions / step, int8 weights | widened |")
    print("| --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as d:
        for name, path, cal, test in cases:
            row = []
            for label, kw in (("int8", {"weight_bits": 8}), ("widened", {})):
                out_dir = Path(d) / f"{name}-{label}".replace(" ", "_")
                art = lmu_edge.convert(path, "c", out_dir, quantize="int16x8", calibration=cal, **kw)
                qg = lmu_edge.load(art.path / "quantized.lmu.npz")
                xq = intsim.quantize_input(qg, np.asarray(test[:1], np.float64)).astype(np.int16)
                out, stats = art.module.run_native(art, xq, "cortex-m4")
                if not np.array_equal(out.astype(np.int64), intsim.run_int(qg, xq)):
                    raise SystemExit(f"{name} ({label}) on the Cortex-M4: not bit-exact with the integer reference")
                flash = json.loads((art.path / "report.json").read_text())["c"]["flash_bytes_m4"]
                row.append((flash, stats["instructions_per_step"]))
            (f8, i8), (fw, iw) = row
            print(f"| {name} | {f8} B | {fw} B (+{fw - f8}) | {i8:,.0f} | {iw:,.0f} ({iw / i8:.2f}x) |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
