"""Train the example keras-lmu digits classifier ``examples/models/keras_digits.{keras,h5}``.

Task: scikit-learn's bundled 8x8 digits read one pixel per step (64 steps, 1
feature), a small-scale sequential MNIST. Model: ``LMUFeedforward`` (order 24,
theta 64 steps, ZOH, FFT convolution over the fixed length 64) whose hidden
``Dense(32, relu)`` sees only the last step's memory, then ``Dense(10,
softmax)``. The split is the one of ``examples/train_digits_ir.py`` (seeded
permutation, 1400 train / 397 test). Writes the model in both formats, the
first 200 test sequences and their labels as ``.npy``, and prints accuracies.

Everything is offline and seeded. Run with a Python that has TensorFlow,
keras-lmu and scikit-learn (``pip install 'lmu-edge[keras]' scikit-learn``)::

    python examples/keras/train_digits.py
"""

import os
import warnings
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import keras_lmu  # registers the LMU layers with Keras
import numpy as np
from sklearn.datasets import load_digits

OUT = Path(__file__).resolve().parents[1] / "models"
ORDER, THETA, UNITS, EPOCHS, N_SAVED = 24, 64, 32, 40, 200


def data():
    digits = load_digits()
    x = (digits.images.reshape(-1, 64, 1) / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    idx = np.random.default_rng(0).permutation(len(x))
    return x[idx[:1400]], y[idx[:1400]], x[idx[1400:]], y[idx[1400:]]


def model():
    return keras.Sequential(
        [
            keras.Input((64, 1)),
            keras_lmu.LMUFeedforward(
                memory_d=1,
                order=ORDER,
                theta=THETA,
                name="lmu",
                hidden_cell=keras.layers.Dense(UNITS, activation="relu", name="hidden"),
            ),
            keras.layers.Dense(10, activation="softmax", name="classifier"),
        ],
        name="keras_digits",
    )


def main():
    keras.utils.set_random_seed(0)
    x_tr, y_tr, x_te, y_te = data()
    m = model()
    m.compile(optimizer=keras.optimizers.Adam(3e-3), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    m.fit(x_tr, y_tr, epochs=EPOCHS, batch_size=32, verbose=0)
    acc_tr = m.evaluate(x_tr, y_tr, verbose=0)[1]
    acc_te = m.evaluate(x_te, y_te, verbose=0)[1]
    acc_saved = float(np.mean(np.argmax(m.predict(x_te[:N_SAVED], verbose=0), -1) == y_te[:N_SAVED]))
    OUT.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Keras calls HDF5 a legacy format
        m.save(OUT / "keras_digits.keras")
        m.save(OUT / "keras_digits.h5")
    np.save(OUT / "keras_digits_test_x.npy", x_te[:N_SAVED])
    np.save(OUT / "keras_digits_test_y.npy", y_te[:N_SAVED])
    print(
        f"train accuracy {acc_tr:.4f}, test accuracy {acc_te:.4f} ({len(y_te)} sequences), "
        f"saved test subset {acc_saved:.4f} ({N_SAVED} sequences)"
    )


if __name__ == "__main__":
    main()
