"""psMNIST, reduced: the keras-lmu model converted to float32 and int8 C, evaluated on 1000 real test digits.

Prints the accuracy of the source model (parallel form, float64), the integer reference, and the
compiled C on the host (int8 and float32), with the C's flash, RAM and Cortex-M4 / M0 instructions
per step (Cortex-M0: int8 only). Run by `python bench/run_all.py`; `tests/test_converters_keras_lmu.py` holds
the accuracies the README quotes (about 50 s: 784 steps per digit).

    python examples/psmnist/evaluate.py [--n 1000]
"""

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

import lmu_edge

MODELS = Path(__file__).resolve().parents[1] / "models"


def evaluate(n=1000, verbose=True, measure=True):
    """Rows ``(what, accuracy or None, seconds or None)``; ``measure=False`` leaves out the Cortex-M builds:
    their flash sizes and QEMU instruction counts (the accuracies are the same)."""
    x = np.load(MODELS / "psmnist_test_x.npy")[:n, :, None].astype(np.float32) / 255.0
    y = np.load(MODELS / "psmnist_test_y.npy")[:n]
    cal = np.load(MODELS / "psmnist_calibration_x.npy")[:, :, None].astype(np.float32) / 255.0
    src = lmu_edge.load(MODELS / "psmnist_lmu.keras")

    def acc(out):
        return float(np.mean(np.argmax(out, -1) == y))

    rows = [("source model (parallel form, float64)", acc(lmu_edge.simulate(src, x)), None)]
    with tempfile.TemporaryDirectory() as tmp:
        for q in ("float", "int8"):
            art = lmu_edge.convert(  # in a temporary folder: no accuracy report, which nobody would read
                src,
                "c",
                Path(tmp) / q,
                quantize=q,
                calibration=cal,
                measure=measure,
                flash=measure,
                accuracy_report=False,
            )
            if q == "int8":
                qg = lmu_edge.load(art.path / "quantized.lmu.npz")
                t0 = time.perf_counter()
                rows.append(("integer reference (numpy)", acc(lmu_edge.simulate(qg, x)), time.perf_counter() - t0))
            t0 = time.perf_counter()
            rows.append((f"C {q} (host, -O2)", acc(art.run(x)), time.perf_counter() - t0))
            rep = json.loads((art.path / "report.json").read_text())
            c, v = rep["c"], rep["verification"]
            rows.append(
                (
                    f"  C {q}: flash {c.get('flash_bytes_m4')} B, RAM {c['ram_bytes']} B, "
                    f"{c['macs_per_step']} MACs/step, instructions/step: M4 {v.get('instructions_per_step_m4')}"
                    + (f" / M0 {v['instructions_per_step_m0']}" if v.get("instructions_per_step_m0") else ""),
                    None,
                    None,
                )
            )
    if verbose:
        print(f"psMNIST (reduced model: order 64, hidden 64), {n} test digits, 784 steps each")
        for name, a, secs in rows:
            print(
                f"  {name:<44} "
                + (f"accuracy {a:.4f}" if a is not None else "")
                + (f"  ({secs:.1f} s)" if secs is not None else "")
            )
    return rows


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1000)
    evaluate(ap.parse_args().n)
