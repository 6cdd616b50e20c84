"""Train the psMNIST-sized LMU briefly, so that bench/kernels.py measures a model with trained activations.

    python bench/psmnist_sized.py [--out build/bench/psmnist_sized.keras] [--epochs 1]
    python bench/kernels.py --orders psmnist --psmnist-model build/bench/psmnist_sized.keras ...

The parallel-LMU paper's psMNIST sizes (order 468, theta 784, 346 hidden units; 385,227 multiply-adds per
step), as bench/kernels.py's random-weight psmnist graph: keras-lmu's LMUFeedforward (ZOH, FFT) with a
Dense(346, tanh) hidden cell on every step, then Dense(10) on every step; the loss reads the last step. Trained
(seeded) on the 1000 permuted MNIST digits shipped in examples/models (psmnist_test_x.npy), scored on the 200
calibration digits there (psmnist_calibration_x.npy, which it never trains on: their labels are not shipped,
so the score is the agreement with examples/models/psmnist_lmu.keras's predictions). Brief on purpose: the
kernels need realistic activation ranges, not a good classifier. Writes the model and prints its accuracy.
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "examples" / "models"


def build(keras, keras_lmu):
    """The psMNIST-sized model: every step's 10 outputs (what the C step computes)."""
    return keras.Sequential(
        [
            keras.Input((784, 1)),
            keras_lmu.LMUFeedforward(
                memory_d=1,
                order=468,
                theta=784,
                hidden_cell=keras.layers.Dense(346, activation="tanh"),
                return_sequences=True,
            ),
            keras.layers.Dense(10),
        ],
        name="psmnist_sized",
    )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "bench" / "psmnist_sized.keras")
    ap.add_argument("--epochs", type=int, default=1)
    a = ap.parse_args(argv)
    import keras
    import keras_lmu

    keras.utils.set_random_seed(0)
    x = np.load(MODELS / "psmnist_test_x.npy").astype(np.float32)[:, :, None] / 255.0
    y = np.load(MODELS / "psmnist_test_y.npy")
    x_cal = np.load(MODELS / "psmnist_calibration_x.npy").astype(np.float32)[:, :, None] / 255.0
    m = build(keras, keras_lmu)
    last = keras.Sequential([m, keras.layers.Lambda(lambda s: s[:, -1])])
    last.compile(
        keras.optimizers.Adam(1e-3), keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"]
    )
    t = time.perf_counter()
    last.fit(x, y, epochs=a.epochs, batch_size=5, verbose=2)
    ref = keras.models.load_model(MODELS / "psmnist_lmu.keras")
    agree = float(
        np.mean(np.argmax(last.predict(x_cal, verbose=0), -1) == np.argmax(ref.predict(x_cal, verbose=0), -1))
    )
    a.out.parent.mkdir(parents=True, exist_ok=True)
    m.save(a.out)
    print(
        f"psmnist_sized: trained {a.epochs} epoch(s) on 1000 digits in {time.perf_counter() - t:.0f} s; on the 200 "
        f"calibration digits it agrees with examples/models/psmnist_lmu.keras on {agree:.3f}; wrote {a.out}"
    )


if __name__ == "__main__":
    sys.exit(main())
