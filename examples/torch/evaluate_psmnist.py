"""Accuracy of a psMNIST checkpoint trained with lmu_edge.torch, and of each artifact made from it.

Reads NAME.safetensors + NAME.json (default: the shipped small model), and prints the accuracy on the
1000 test digits shipped in examples/models (psmnist_test_x.npy, already permuted) of: the PyTorch
model (float32, parallel mode), lmu_edge.simulate of the converted graph (float64), the integer
reference, and the compiled C (float32 and int8) on the host. Needs gcc and the [torch] extra.

    python examples/torch/evaluate_psmnist.py [--model examples/models/torch_psmnist_small.safetensors] [--n 1000]
"""

import argparse
import tempfile
from pathlib import Path

import numpy as np

import lmu_edge

MODELS = Path(__file__).resolve().parents[1] / "models"


def evaluate(model=MODELS / "torch_psmnist_small.safetensors", n=1000, measure=True) -> list:
    """``[(what, accuracy), ...]`` on the first ``n`` shipped test digits: PyTorch (when installed),
    ``lmu_edge.simulate``, the integer reference and the C builds (float32 and int8) on the host.
    ``measure=False``: no Cortex-M builds (flash sizes, QEMU instruction counts) in the conversions (accuracies
    only)."""
    x = np.load(MODELS / "psmnist_test_x.npy")[:n, :, None].astype(np.float32) / 255.0
    y = np.load(MODELS / "psmnist_test_y.npy")[:n]
    cal = np.load(MODELS / "psmnist_calibration_x.npy")[:, :, None].astype(np.float32) / 255.0

    def acc(out):
        return float(np.mean(np.argmax(out, -1) == y))

    rows = []
    try:
        import torch

        from lmu_edge.torch import load_checkpoint

        with torch.no_grad():
            y_torch = load_checkpoint(str(model))(torch.tensor(x)).numpy()
            rows.append(("PyTorch model (float32, parallel mode)", acc(y_torch)))
    except ImportError:
        pass
    g = lmu_edge.load(model)
    rows.append(("lmu_edge.simulate (float64)", acc(lmu_edge.simulate(g, x))))
    with tempfile.TemporaryDirectory() as tmp:
        for q in ("float", "int8"):
            art = lmu_edge.convert(  # in a temporary folder: no accuracy report, which nobody would read
                g,
                "c",
                Path(tmp) / q,
                quantize=q,
                calibration=cal,
                measure=measure,
                flash=measure,
                accuracy_report=False,
            )
            if q == "int8":
                quantized = lmu_edge.load(art.path / "quantized.lmu.npz")
                rows.append(("integer reference", acc(lmu_edge.simulate(quantized, x))))
            rows.append((f"C {q} (host)", acc(art.run(x))))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=str(MODELS / "torch_psmnist_small.safetensors"))
    ap.add_argument("--n", type=int, default=1000)
    a = ap.parse_args()
    rows = evaluate(a.model, a.n)
    print(f"{Path(a.model).name}: {a.n} psMNIST test digits")
    for name, v in rows:
        print(f"  {name:<42} accuracy {v:.4f}")


if __name__ == "__main__":
    main()
