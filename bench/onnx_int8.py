"""int8 ONNX against float ONNX in ONNX Runtime: file size, time per stream step, and the int8 model's SQNR
against the source model under ONNX Runtime's default session options and with its QDQ fusions off.

    python bench/onnx_int8.py                        # the digits model and the layer-option matrix
    python bench/onnx_int8.py digits ff_linear_td_before

Each model (``digits``: examples/models/keras_digits.keras; otherwise a model of examples/matrix/) is
converted to float and int8 ONNX (calibration: the model's calibration inputs); ``sequence.onnx`` runs the
held-out inputs in one session with one thread, as a batch of all sequences and one sequence at a time
(best of 5 runs). Prints, asserts nothing (the floors are checked by tests/test_onnx_contract.py and the
matrix).
"""

import argparse
import datetime
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import lmu_edge
from lmu_edge.metrics import sqnr_db

ROOT = Path(__file__).resolve().parents[1]
MATRIX = ROOT / "examples" / "matrix"


def data(name):
    if name == "digits":
        m = ROOT / "examples" / "models"
        return (
            m / "keras_digits.keras",
            np.load(m / "digits_calibration_x.npy")[:32],
            np.load(m / "keras_digits_test_x.npy")[:64],
        )
    d = np.load(MATRIX / f"{name}.npz")
    src = MATRIX / f"{name}.keras"
    return (src if src.exists() else MATRIX / f"{name}.safetensors"), d["x_cal"], d["x_test"]


def session(path, fused=True):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level, so.intra_op_num_threads = 3, 1
    if not fused:
        so.add_session_config_entry("session.disable_quant_qdq", "1")
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def best(fn, n=5):
    fn()
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return min(ts)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", help="digits and/or matrix model names (default: all)")
    names = ap.parse_args().models or ["digits"] + sorted(p.stem for p in MATRIX.glob("*.npz"))
    import onnxruntime

    print(f"# {datetime.date.today()}, onnxruntime {onnxruntime.__version__}, {os.cpu_count()} CPUs")
    head = ["model", "float bytes", "int8 bytes", "float us/step (batch, 1)", "int8 us/step (batch, 1)"]
    print(" | ".join(head + ["int8 dB default", "int8 dB unfused"]))
    for name in names:
        src, xc, xt = data(name)
        ref = lmu_edge.simulate(lmu_edge.load(src), xt.astype(np.float64))
        row = [name]
        times, db = [], []
        with tempfile.TemporaryDirectory() as d:
            for q in ("float", "int8"):
                kw = {"calibration": xc} if q == "int8" else {}
                a = lmu_edge.convert(src, "onnx", Path(d) / q, quantize=q, tolerance=float("inf"), **kw)
                row.append(str((a.path / "step.onnx").stat().st_size))
                x = xt.transpose(1, 0, 2).astype(np.float32)
                s = session(a.path / "sequence.onnx")
                tb = best(lambda s=s, x=x: s.run(None, {"x_seq": x})) / (x.shape[0] * x.shape[1]) * 1e6
                t1 = best(lambda s=s, x=x: s.run(None, {"x_seq": x[:, :1]})) / x.shape[0] * 1e6
                times.append(f"{tb:.2f}, {t1:.1f}")
                if q == "int8":
                    for fused in (True, False):
                        y = session(a.path / "sequence.onnx", fused).run(None, {"x_seq": x})[0].transpose(1, 0, 2)
                        y = y if a.graph.output_is_sequence else y[:, -1]
                        db.append(f"{sqnr_db(y.astype(np.float64), ref):.1f}")
        print(" | ".join(row + times + db), flush=True)


if __name__ == "__main__":
    sys.exit(main())
