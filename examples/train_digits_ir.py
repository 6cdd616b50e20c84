"""Train the shipped example `examples/models/digits_lmu.lmu.npz` without any ML framework.

Task: scikit-learn's bundled 8x8 digits read one pixel per step (64 steps, 1
feature), as the sequential-MNIST task of the LMU papers at a small scale. The
model is an LMU memory (order 32, theta 64 steps, ZOH) whose final state feeds a
softmax layer; the memory is fixed (as in the LMU papers, the Legendre memory
needs no training) and the softmax layer is fit by full-batch gradient descent
on the memory states computed by lmu-edge's reference simulator. Writes the IR
file and prints train / test accuracy.

Needs scikit-learn (for its bundled data only): pip install scikit-learn
"""

from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits

import lmu_edge
from lmu_edge import ir

ORDER, THETA = 32, 64.0
HERE = Path(__file__).resolve().parent


def main():
    digits = load_digits()
    x = (digits.images.reshape(-1, 64, 1) / 16.0).astype(np.float32)
    y = digits.target
    rng = np.random.default_rng(0)
    idx = rng.permutation(len(x))
    train, test = idx[:1400], idx[1400:]

    memory = ir.LMU(
        "lmu",
        memory_d=1,
        order=ORDER,
        theta=THETA,
        discretizer="zoh",
        input_encoders=np.ones((1, 1), np.float32),
        memory=ir.ImpulseResponse(),
        return_sequences=False,
    )
    feats_graph = ir.Graph("digits_memory", input_features=1, seq_len=64, layers=(memory,))
    feats = lmu_edge.simulate(feats_graph, x)  # (N, ORDER): final memory
    mu, sd = feats[train].mean(0), feats[train].std(0) + 1e-8
    z = (feats - mu) / sd
    W = np.zeros((ORDER, 10))
    b = np.zeros(10)
    onehot = np.eye(10)[y]
    for _ in range(3000):  # softmax regression, gradient descent
        logits = z[train] @ W + b
        p = np.exp(logits - logits.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        g = (p - onehot[train]) / len(train)
        W -= 0.5 * (z[train].T @ g + 1e-4 * W)
        b -= 0.5 * g.sum(0)
    # fold the standardisation into the dense layer: (m - mu)/sd @ W + b
    kernel = (W / sd[:, None]).astype(np.float32)
    bias = (b - (mu / sd) @ W).astype(np.float32)
    model = ir.Graph(
        "digits_lmu",
        input_features=1,
        seq_len=64,
        layers=(memory, ir.Dense("classifier", kernel, bias, "softmax")),
        metadata={"task": "sklearn 8x8 digits, one pixel per step", "trained_by": "examples/train_digits_ir.py"},
    )
    out = HERE / "models" / "digits_lmu.lmu.npz"
    lmu_edge.save(model, out)
    np.save(HERE / "models" / "digits_test_x.npy", x[test][:64])
    # calibration data for quantization: typical inputs from the training split, never the test split
    np.save(HERE / "models" / "digits_calibration_x.npy", x[train[:256]])
    np.save(HERE / "models" / "digits_test_y.npy", y[test][:64])
    pred = lmu_edge.simulate(model, x).argmax(-1)
    print(f"wrote {out.relative_to(HERE.parent)}")
    print(f"train accuracy {np.mean(pred[train] == y[train]):.3f}, test accuracy {np.mean(pred[test] == y[test]):.3f}")


if __name__ == "__main__":
    main()
