"""Time-series models streamed one sample at a time through the compiled C (and other targets).

* GunPoint (UCR, bundled in sktime's wheel): classify a 150-sample hand trace, gun vs point.
* Mackey-Glass (generated): predict the series 15 samples ahead at every step.

Both models were trained in parallel form with keras-lmu (examples/timeseries/train_gunpoint.py,
examples/keras/train_mackey_glass.py). Each is converted to float32 and int8 C, the test sequences
are streamed through the host build and through the Cortex-M4 build under QEMU, and the task metric
of every variant is printed with the per-step cost.

    python examples/timeseries/stream.py [--targets c,tflite,onnx] [--no-qemu]
"""

import argparse
import json
import shutil
import tempfile
from pathlib import Path

import numpy as np

import lmu_edge
from lmu_edge.registry import TARGETS

MODELS = Path(__file__).resolve().parents[1] / "models"


def metric(task, y, target):
    if task == "classification":
        return "accuracy", float(np.mean(np.argmax(y, -1) == target))
    skip = 32  # the first theta steps have no history yet
    err = y[:, skip:] - target[:, skip:]
    return "NRMSE", float(np.sqrt(np.mean(err**2)) / np.std(target[:, skip:]))


TASKS = {
    "gunpoint": (
        "classification",
        "gunpoint_lmu.keras",
        "gunpoint_test_x.npy",
        "gunpoint_test_y.npy",
        "gunpoint_calibration_x.npy",
    ),
    "mackey_glass": (
        "regression",
        "keras_mackey_glass.keras",
        "keras_mackey_glass_test_x.npy",
        "keras_mackey_glass_test_y.npy",
        None,
    ),
}


def run(targets=("c",), qemu=True, out_root=None, verbose=True):
    rows = []
    out_root = Path(out_root or tempfile.mkdtemp(prefix="lmu-edge-ts-"))
    for name, (task, model, xs, ys, cal) in TASKS.items():
        x, y_true = np.load(MODELS / xs), np.load(MODELS / ys)
        calib = np.load(MODELS / cal) if cal else x[: max(2, len(x) // 2)]
        src = lmu_edge.load(MODELS / model)
        rows.append((name, "source model (float64)", *metric(task, lmu_edge.simulate(src, x), y_true), None, None))
        for target in targets:
            if target not in TARGETS:
                continue
            for q in ("float", "int8"):
                out = out_root / f"{name}_{target}_{q}"
                try:
                    art = lmu_edge.convert(src, target, out, quantize=q, calibration=calib, overwrite=True)
                except lmu_edge.LmuEdgeError as e:
                    rows.append((name, f"{target} {q}", "skipped", str(e)[:60], None, None))
                    continue
                runtimes = [art.module.DEFAULT_RUNTIME]
                if target == "c" and qemu and shutil.which("qemu-system-arm"):
                    runtimes.append("cortex-m4")
                rep = json.loads((out / "report.json").read_text())
                outs = {}
                for rt in runtimes:
                    outs[rt] = art.run(x, runtime=rt)
                    m, v = metric(task, outs[rt], y_true)
                    cost = rep.get("verification", {}).get("instructions_per_step_m4") if rt == "cortex-m4" else None
                    rows.append((name, f"{target} {q} ({rt})", m, v, cost, rep.get("c", {}).get("ram_bytes")))
                if len(outs) == 2:
                    a, b = outs.values()
                    same = (
                        np.array_equal(a, b) if q == "int8" else bool(np.max(np.abs(a - b)) <= 1e-5 * np.max(np.abs(a)))
                    )
                    rows.append(
                        (
                            name,
                            f"{target} {q}: host == cortex-m4",
                            "identical" if same else "DIFFERENT",
                            None,
                            None,
                            None,
                        )
                    )
    if verbose:
        print(f"{'task':<13} {'variant':<34} {'metric':<10} {'value':>8} {'M4 instr/step':>14} {'RAM B':>7}")
        for r in rows:
            val = f"{r[3]:.4f}" if isinstance(r[3], float) else (r[3] or "")
            print(f"{r[0]:<13} {r[1]:<34} {r[2]:<10} {val:>8} {r[4] if r[4] else '':>14} {r[5] if r[5] else '':>7}")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--targets", default="c", help="comma-separated targets (c, tflite, onnx, ...)")
    ap.add_argument("--no-qemu", action="store_true", help="skip the Cortex-M4 runs")
    args = ap.parse_args()
    run(tuple(args.targets.split(",")), qemu=not args.no_qemu)


if __name__ == "__main__":
    main()
