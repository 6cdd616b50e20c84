"""Small keras-lmu models for the converter tests: built, trained briefly on seeded data, saved.

Needs TensorFlow and keras-lmu (``pip install 'lmu-edge[keras]'``); import it
only after ``pytest.importorskip("keras_lmu")``. Every model is tiny (orders
<= 16) so that a model is built, trained and saved in about a second.

Each entry of :data:`MODELS` is ``(builder, seq_len, features, test_len)``:
``seq_len`` is the model's fixed sequence length (``None``: any length), and
``test_len`` the length of the test inputs: at least ``5 * theta`` steps, so an
LMU memory sees its whole window, and longer than ``5 * theta`` for models of
unknown length, where keras-lmu truncates the impulse response there.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import warnings

import keras
import keras_lmu  # registers the LMU layers before Keras loads a model
import numpy as np

L = keras.layers


def _ff(**kw):
    return keras_lmu.LMUFeedforward(**kw)


def _seq(T, F, *layers, name):
    return keras.Sequential([keras.Input((T, F))] + list(layers), name=name)


def ff_fft_zoh_dense(T, F):
    return _seq(
        T,
        F,
        _ff(memory_d=1, order=6, theta=8, hidden_cell=L.Dense(5, activation="tanh")),
        L.Dense(1),
        name="ff_fft_zoh_dense",
    )


def ff_raw_trunc(T, F):
    # truncate_ir=1e-3 keeps 11 of the response's steps: an FIR model, not the exact LTI system
    return _seq(
        T,
        F,
        _ff(
            memory_d=2,
            order=4,
            theta=4,
            hidden_cell=L.Dense(5, activation="tanh"),
            input_to_hidden=True,
            use_bias=True,
            bias_initializer="ones",
            conv_mode="raw",
            truncate_ir=1e-3,
        ),
        L.Dense(1),
        name="ff_raw_trunc",
    )


def ff_raw_notrunc(T, F):
    return _seq(
        T,
        F,
        _ff(memory_d=1, order=6, theta=8, hidden_cell=None, conv_mode="raw", truncate_ir=None, return_sequences=True),
        L.Dense(2),
        name="ff_raw_notrunc",
    )


def ff_raw_dense(T, F):
    return _seq(
        T,
        F,
        _ff(memory_d=1, order=5, theta=6, hidden_cell=L.Dense(4, activation="relu"), conv_mode="raw", truncate_ir=None),
        L.Dense(1),
        name="ff_raw_dense",
    )


def ff_euler_nohidden_seq(T, F):
    return _seq(
        T,
        F,
        _ff(memory_d=2, order=4, theta=8, hidden_cell=None, discretizer="euler", return_sequences=True),
        L.TimeDistributed(L.Dense(2)),
        L.Dropout(0.1),
        L.GlobalAveragePooling1D(),
        L.Activation("sigmoid"),
        name="ff_euler_nohidden_seq",
    )


def ff_nokernel_i2h(T, F):
    return _seq(
        T,
        F,
        _ff(memory_d=F, order=3, theta=5, hidden_cell=None, kernel_initializer=None, dropout=0.2, input_to_hidden=True),
        L.Dense(1),
        name="ff_nokernel_i2h",
    )


def ff_simplernn_hidden(T, F):
    return _seq(
        T,
        F,
        _ff(memory_d=1, order=3, theta=3, hidden_cell=L.SimpleRNNCell(4), return_sequences=True),
        L.TimeDistributed(L.Dense(1)),
        name="ff_simplernn_hidden",
    )


def ff_order16_softmax(T, F):
    return _seq(
        T,
        F,
        _ff(memory_d=1, order=16, theta=16, hidden_cell=L.Dense(8, activation="relu")),
        L.Dense(3, activation="softmax"),
        name="ff_order16_softmax",
    )


def lmu_parallel(T, F):
    return _seq(
        T,
        F,
        keras_lmu.LMU(
            memory_d=1,
            order=6,
            theta=10,
            hidden_cell=L.Dense(4, activation="tanh"),
            input_to_hidden=True,
            return_sequences=True,
        ),
        L.Dense(1),
        name="lmu_parallel",
    )


def lmu_rnn_h2m_m2m_tt(T, F):
    return _seq(
        T,
        F,
        keras_lmu.LMU(
            memory_d=2,
            order=4,
            theta=6,
            hidden_cell=L.SimpleRNNCell(5),
            hidden_to_memory=True,
            memory_to_memory=True,
            trainable_theta=True,
            use_bias=True,
        ),
        L.Dense(1),
        name="lmu_rnn_h2m_m2m_tt",
    )


def lmu_euler_tt_dense(T, F):
    return _seq(
        T,
        F,
        keras_lmu.LMU(
            memory_d=1,
            order=4,
            theta=10,
            hidden_cell=L.Dense(4, activation="tanh"),
            discretizer="euler",
            trainable_theta=True,
        ),
        L.Dense(1),
        name="lmu_euler_tt_dense",
    )


def lmu_rnn_dense_h2m(T, F):
    return _seq(
        T,
        F,
        keras_lmu.LMU(
            memory_d=1,
            order=4,
            theta=6,
            hidden_cell=L.Dense(4, activation="tanh"),
            hidden_to_memory=True,
            return_sequences=True,
        ),
        L.TimeDistributed(L.Dense(1)),
        name="lmu_rnn_dense_h2m",
    )


def rnn_cell_simplernn(T, F):
    cell = keras_lmu.LMUCell(
        memory_d=2,
        order=3,
        theta=5,
        hidden_cell=L.SimpleRNNCell(4),
        memory_to_memory=True,
        input_to_hidden=True,
        use_bias=True,
    )
    return _seq(
        T, F, L.RNN(cell, return_sequences=True), L.GlobalAveragePooling1D(), L.Dense(1), name="rnn_cell_simplernn"
    )


def rnn_cell_nohidden_tt(T, F):
    cell = keras_lmu.LMUCell(
        memory_d=2, order=3, theta=5, hidden_cell=None, input_to_hidden=True, input_d=F, trainable_theta=True
    )
    return _seq(
        T, F, L.RNN(cell, return_sequences=True), L.GlobalAveragePooling1D(), L.Dense(1), name="rnn_cell_nohidden_tt"
    )


def rnn_cell_dense_h2m_euler(T, F):
    cell = keras_lmu.LMUCell(
        memory_d=1,
        order=4,
        theta=8,
        hidden_cell=L.Dense(3, activation="relu"),
        hidden_to_memory=True,
        discretizer="euler",
    )
    return _seq(T, F, L.RNN(cell), L.Dense(2, activation="softmax"), name="rnn_cell_dense_h2m_euler")


def functional_chain(T, F):
    inp = keras.Input((T, F), name="inp")
    x = _ff(memory_d=1, order=4, theta=8, hidden_cell=L.Dense(6), return_sequences=True, name="lmu_ff")(inp)
    x = L.ReLU(name="relu")(x)
    x = L.Dropout(0.2)(x)
    x = L.GaussianNoise(0.1)(x)
    x = L.Dense(4, activation="silu")(x)
    x = L.ReLU(max_value=6.0)(x)
    x = L.GlobalAveragePooling1D()(x)
    x = L.Dense(3)(x)
    out = L.Softmax(name="probs")(x)
    return keras.Model(inp, out, name="functional_chain")


def activations(T, F):
    return _seq(
        T,
        F,
        _ff(memory_d=1, order=4, theta=6, hidden_cell=L.Dense(6, activation="relu6"), return_sequences=True),
        L.Dense(5, activation="sigmoid"),
        L.Activation("swish"),
        L.Activation("tanh"),
        L.Dense(2, use_bias=False),
        L.GlobalAveragePooling1D(),
        L.Activation("softmax"),
        name="activations",
    )


#: name -> (builder, seq_len, features, test_len)
MODELS = {
    "ff_fft_zoh_dense": (ff_fft_zoh_dense, 40, 2, 40),
    "ff_fft_zoh_dense_anylen": (ff_fft_zoh_dense, None, 2, 56),
    "ff_raw_trunc": (ff_raw_trunc, 40, 2, 40),
    "ff_raw_trunc_anylen": (ff_raw_trunc, None, 2, 30),
    "ff_raw_notrunc": (ff_raw_notrunc, 40, 2, 40),
    "ff_raw_dense_anylen": (ff_raw_dense, None, 2, 45),
    "ff_euler_nohidden_seq": (ff_euler_nohidden_seq, 40, 2, 40),
    "ff_nokernel_i2h": (ff_nokernel_i2h, 30, 3, 30),
    "ff_simplernn_hidden_anylen": (ff_simplernn_hidden, None, 2, 24),
    "ff_order16_softmax": (ff_order16_softmax, 80, 1, 80),
    "lmu_parallel": (lmu_parallel, 50, 2, 50),
    "lmu_parallel_anylen": (lmu_parallel, None, 2, 70),
    "lmu_rnn_h2m_m2m_tt": (lmu_rnn_h2m_m2m_tt, 30, 3, 30),
    "lmu_euler_tt_dense": (lmu_euler_tt_dense, None, 2, 60),
    "lmu_rnn_dense_h2m": (lmu_rnn_dense_h2m, 30, 2, 30),
    "rnn_cell_simplernn": (rnn_cell_simplernn, None, 3, 30),
    "rnn_cell_nohidden_tt": (rnn_cell_nohidden_tt, 25, 3, 25),
    "rnn_cell_dense_h2m_euler": (rnn_cell_dense_h2m_euler, 40, 2, 40),
    "functional_chain": (functional_chain, 40, 2, 40),
    "activations": (activations, 30, 2, 30),
}


def build(name: str, seed: int = 0):
    """Build the model ``name`` with seeded weights and train it for one short epoch."""
    builder, T, F, test_len = MODELS[name]
    keras.utils.set_random_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # keras-lmu warns about unknown sequence lengths
        model = builder(T, F)
    rng = np.random.default_rng(seed)
    train_len = T or max(8, test_len // 2)
    x = rng.standard_normal((16, train_len, F)).astype(np.float32)
    y = rng.standard_normal((16,) + tuple(d or train_len for d in model.output_shape[1:])).astype(np.float32)
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    model.fit(x, y, epochs=1, batch_size=8, verbose=0)
    return model


def inputs_for(name: str, n: int = 3, seed: int = 1) -> np.ndarray:
    _, _, F, test_len = MODELS[name]
    return np.random.default_rng(seed).standard_normal((n, test_len, F)).astype(np.float32)


def save_both(model, stem) -> dict:
    """Save ``model`` as ``stem.keras`` and ``stem.h5``; returns ``{"keras": path, "h5": path}``."""
    paths = {"keras": f"{stem}.keras", "h5": f"{stem}.h5"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Keras warns that HDF5 is a legacy format
        model.save(paths["keras"])
        model.save(paths["h5"])
    return paths


def predict(model, x) -> np.ndarray:
    return np.asarray(model.predict(x, verbose=0))
