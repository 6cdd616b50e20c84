"""Train the example keras-lmu time-series model ``examples/models/keras_mackey_glass.keras``.

Task: Mackey-Glass chaotic series (tau = 17, beta = 0.2, gamma = 0.1, n = 10,
integrated here with RK4 at dt = 0.1 and sampled every time unit, then
standardized), predicting the value ``HORIZON`` = 15 samples ahead at every
step of windows of 128 samples. Model: ``LMUFeedforward`` (order 16, theta 32
steps, ZOH, FFT over the fixed length 128, ``return_sequences=True``) with a
``Dense(16, tanh)`` hidden cell, then ``Dense(1)`` on every step: a streaming
predictor once folded to its recurrent form.

The first 70 % of the series trains, the last 30 % tests. The metric is the
NRMSE (RMSE / standard deviation of the target) over steps ``>= THETA`` of each
window (the memory has seen a whole window by then), next to the persistence
baseline (predict ``x[t + 15] = x[t]``). Writes the model, 8 test windows and
their targets as ``.npy``. Offline and seeded; run with a Python that has
TensorFlow and keras-lmu::

    python examples/keras/train_mackey_glass.py
"""

import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import keras_lmu  # registers the LMU layers with Keras
import numpy as np

OUT = Path(__file__).resolve().parents[1] / "models"
ORDER, THETA, UNITS, T, HORIZON, EPOCHS, N_SAVED = 16, 32, 16, 128, 15, 30, 8


def mackey_glass(
    n: int,
    tau: float = 17.0,
    beta: float = 0.2,
    gamma: float = 0.1,
    power: int = 10,
    dt: float = 0.1,
    every: int = 10,
    discard: int = 1000,
) -> np.ndarray:
    """``n`` samples (one per time unit) of the Mackey-Glass series, after ``discard`` transient ones."""
    lag = int(round(tau / dt))
    steps = (n + discard) * every
    x = np.empty(steps + lag + 1)
    x[: lag + 1] = 1.2  # constant history

    def f(xt, xd):
        return beta * xd / (1 + xd**power) - gamma * xt

    for k in range(lag, steps + lag):
        xd0, xd1 = x[k - lag], x[k - lag + 1]
        xdm = 0.5 * (xd0 + xd1)  # delayed value at the half step, interpolated
        k1 = f(x[k], xd0)
        k2 = f(x[k] + 0.5 * dt * k1, xdm)
        k3 = f(x[k] + 0.5 * dt * k2, xdm)
        k4 = f(x[k] + dt * k3, xd1)
        x[k + 1] = x[k] + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return x[lag::every][discard : discard + n]


def windows(s: np.ndarray, stride: int):
    starts = range(0, len(s) - T - HORIZON + 1, stride)
    x = np.stack([s[i : i + T] for i in starts])[..., None]
    y = np.stack([s[i + HORIZON : i + T + HORIZON] for i in starts])[..., None]
    return x.astype(np.float32), y.astype(np.float32)


def nrmse(pred, y):
    p, t = pred[:, THETA:], y[:, THETA:]
    return float(np.sqrt(np.mean((p - t) ** 2)) / np.std(t))


def main():
    keras.utils.set_random_seed(0)
    s = mackey_glass(6000)
    s = (s - s.mean()) / s.std()
    cut = int(0.7 * len(s))
    x_tr, y_tr = windows(s[:cut], stride=8)
    x_te, y_te = windows(s[cut:], stride=T)
    m = keras.Sequential(
        [
            keras.Input((T, 1)),
            keras_lmu.LMUFeedforward(
                memory_d=1,
                order=ORDER,
                theta=THETA,
                return_sequences=True,
                name="lmu",
                hidden_cell=keras.layers.Dense(UNITS, activation="tanh", name="hidden"),
            ),
            keras.layers.Dense(1, name="readout"),
        ],
        name="keras_mackey_glass",
    )
    m.compile(optimizer=keras.optimizers.Adam(3e-3), loss="mse")
    m.fit(x_tr, y_tr, epochs=EPOCHS, batch_size=32, verbose=0)
    p_te = m.predict(x_te, verbose=0)
    OUT.mkdir(parents=True, exist_ok=True)
    m.save(OUT / "keras_mackey_glass.keras")
    np.save(OUT / "keras_mackey_glass_test_x.npy", x_te[:N_SAVED])
    np.save(OUT / "keras_mackey_glass_test_y.npy", y_te[:N_SAVED])
    print(
        f"test NRMSE {nrmse(p_te, y_te):.4f} over {len(x_te)} windows "
        f"(saved subset {nrmse(p_te[:N_SAVED], y_te[:N_SAVED]):.4f}); "
        f"persistence baseline {nrmse(x_te, y_te):.4f}"
    )


if __name__ == "__main__":
    main()
