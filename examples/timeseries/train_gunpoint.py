"""Train the shipped GunPoint classifier `examples/models/gunpoint_lmu.keras` with keras-lmu.

GunPoint (UCR): 150-sample traces of a hand's x position; class 1 draws a gun, class 2 points a finger.
The data ship inside sktime's wheel (nothing is downloaded). The model is the parallel form of the LMU
papers: LMUFeedforward(order 16, theta 150, fft) with a Dense(16, tanh) hidden cell, then Dense(2,
softmax) on the last step. Writes the model, the test set (150 traces) and a calibration set (the 50
training traces), and prints accuracies.

    pip install 'lmu-edge[keras]' sktime
    python examples/timeseries/train_gunpoint.py
"""

from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parents[1] / "models"


def main():
    import keras
    import keras_lmu  # registers the LMU layers for keras.models.load_model
    from sktime.datasets import load_gunpoint

    keras.utils.set_random_seed(0)
    xtr, ytr = load_gunpoint(split="train", return_X_y=True, return_type="numpy3D")
    xte, yte = load_gunpoint(split="test", return_X_y=True, return_type="numpy3D")
    # (N, 1, T) -> (N, T, 1); standardize with the training statistics; labels '1'/'2' -> 0/1
    mu, sd = xtr.mean(), xtr.std()

    def prep(x):
        return ((x.transpose(0, 2, 1) - mu) / sd).astype(np.float32)

    xtr, xte = prep(xtr), prep(xte)
    ytr, yte = ytr.astype(int) - 1, yte.astype(int) - 1
    T = xtr.shape[1]
    m = keras.Sequential(
        [
            keras.Input((T, 1)),
            keras_lmu.LMUFeedforward(
                memory_d=1,
                order=16,
                theta=T,
                hidden_cell=keras.layers.Dense(16, activation="tanh"),
                return_sequences=False,
            ),
            keras.layers.Dense(2, activation="softmax"),
        ]
    )
    m.compile(keras.optimizers.Adam(1e-2), "sparse_categorical_crossentropy", metrics=["accuracy"])
    m.fit(xtr, ytr, epochs=150, batch_size=10, verbose=0)
    acc_tr = m.evaluate(xtr, ytr, verbose=0)[1]
    acc_te = m.evaluate(xte, yte, verbose=0)[1]
    m.save(OUT / "gunpoint_lmu.keras")
    np.save(OUT / "gunpoint_test_x.npy", xte)
    np.save(OUT / "gunpoint_test_y.npy", yte)
    np.save(OUT / "gunpoint_calibration_x.npy", xtr)
    print(f"train accuracy {acc_tr:.3f}, test accuracy {acc_te:.3f} ({len(yte)} traces)")


if __name__ == "__main__":
    main()
