"""Keras models with keras-lmu layers (``.keras`` and legacy ``.h5``) -> :class:`lmu_edge.ir.Graph`.

Reads the file with zipfile, json and h5py only (see
:mod:`lmu_edge.converters.keras_files`); TensorFlow, Keras and keras-lmu are
never imported. One handler per Keras layer class (``_HANDLERS``) turns a
serialized layer into an IR layer, or drops it (Dropout and the like are the
identity at inference).

keras-lmu semantics, as mapped onto the IR (checked against keras-lmu 0.9):

* The memory input is ``u = [x, h_prev] @ kernel + bias + m_prev @ recurrent_kernel``.
  The rows of ``kernel`` for ``x`` are ``LMU.input_encoders`` (F_in, memory_d),
  those for ``h_prev`` (``hidden_to_memory``) ``LMU.hidden_encoders``;
  ``recurrent_kernel`` (``memory_to_memory``) is ``LMU.memory_encoders``.
  ``kernel_initializer=None`` means no kernel: ``u = x`` (identity encoders).
* keras-lmu stores A and B transposed; the IR rebuilds them from ``(order,
  theta, discretizer)`` in float64 (keras-lmu never saves them). Memory is
  flattened ``d * order + i`` in both.
* ``trainable_theta`` keeps the trained value as the weight ``theta_inv``; the
  config's ``theta`` is only the initial one. The IR's ``theta`` is the
  effective one, ``1 / theta_inv``.
* Parallel form (``LMUFeedforward``; ``LMU`` without hidden_to_memory,
  memory_to_memory and trainable_theta): an :class:`~lmu_edge.ir.ImpulseResponse`.
  keras-lmu convolves with the first L steps of the response: L is the
  sequence length when the input shape fixes it, else ``5 * theta``; in raw
  mode with ``truncate_ir`` it then drops the tail whose relative l1 mass is
  below ``truncate_ir`` in every dimension. The IR response is ``analytic``
  when that kernel is the exact response over every input the model accepts,
  else ``truncated`` with the (order, L') kernel, computed in float64 by
  :mod:`lmu_edge.lti` and cut exactly as keras-lmu cuts it.
* Recurrent form (``LMU`` on its RNN path, ``RNN(LMUCell)``): a
  :class:`~lmu_edge.ir.DenseSS` with the float64 discretization.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Optional

import numpy as np

from lmu_edge import ir, limits, lti
from lmu_edge.errors import LmuEdgeError, ModelFormatError, ShapeError, UnsupportedLayerError

from . import _conv2d
from ._keras_common import activation as _activation
from ._keras_common import check_shapes as _check
from ._keras_common import flag as _flag
from .keras_files import KerasModelFile, class_name, layer_name, open_model

__all__ = ["load", "SUPPORTED_LAYERS"]

SUPPORTED_LAYERS = (
    "InputLayer",
    "Dense",
    "TimeDistributed(Dense)",
    "Activation",
    "ReLU",
    "Softmax",
    "Dropout",
    "SpatialDropout1D",
    "GaussianNoise",
    "GaussianDropout",
    "AlphaDropout",
    "Identity",
    "GlobalAveragePooling1D",
    "LMUFeedforward",
    "LMU",
    "RNN(LMUCell)",
    "Reshape, ZeroPadding2D, Conv2D, BatchNormalization, MaxPooling2D (a causal front end: docs/keras.md)",
)
HIDDEN_CELLS = ("Dense", "SimpleRNNCell", "none")
DISCRETIZERS = ("zoh", "euler")
CONV_MODES = ("fft", "raw")
_INFERENCE_IDENTITY = ("Dropout", "SpatialDropout1D", "GaussianNoise", "GaussianDropout", "AlphaDropout", "Identity")


def load(path) -> ir.Graph:
    """Read a Keras model with keras-lmu layers into a parallel-form :class:`~lmu_edge.ir.Graph`.

    Parameters
    ----------
    path : str or Path
        A Keras 3 ``.keras`` file or a legacy ``.h5`` file saved with ``model.save``.

    Raises
    ------
    ModelFormatError
        The file is not a (complete, undamaged) Keras model file.
    UnsupportedLayerError
        The model holds a layer, an option or a topology lmu-edge does not convert.
    ShapeError
        The weights disagree with the config.
    """
    p = Path(path)
    try:
        with open_model(p) as mf:
            return _Converter(mf).graph()
    except LmuEdgeError:
        raise
    except (OSError, KeyError, TypeError, ValueError, AttributeError) as e:  # h5py and malformed configs
        raise ModelFormatError(
            f"{p}: cannot be read as a Keras model ({type(e).__name__}: {e}); "
            f"re-save the model with model.save('model.keras')"
        ) from None


def _safe_names(layers: list) -> list:
    """Layer names as the IR allows them (letters, digits, ``_ . -``): Keras names are data from the file and
    reach generated code, so other characters become ``_``; names made equal that way get a suffix."""
    out, seen = [], set()
    for node in layers:
        name = base = limits.safe_name(node.name, "layer")
        k = 1
        while name in seen:
            k += 1
            name = f"{base[: limits.MAX_NAME_LEN // 2 - 8]}_{k}"
        seen.add(name)
        out.append(node if name == node.name else dataclasses.replace(node, name=name))
    return out


class _Converter:
    def __init__(self, mf: KerasModelFile):
        self.mf = mf
        self.file = mf.path

    def graph(self) -> ir.Graph:
        T, F, chain = self.mf.chain()
        self.seq_len = T
        self.grid, self.pad = None, None  # the 2-D front end's (bands, channels) and pending ZeroPadding2D
        layers: list = []
        n = n_last = F
        self.layers = layers
        for layer in chain:
            cls, name = class_name(layer), layer_name(layer)
            handler = _HANDLERS.get(cls)
            where = f"{self.file}: layer {name!r} ({cls})"
            if handler is None:
                raise UnsupportedLayerError(
                    f"{where} is not supported; supported layers: {', '.join(SUPPORTED_LAYERS)}"
                )
            if self.grid is not None and cls not in _conv2d.GRID_LAYERS + _INFERENCE_IDENTITY:
                raise UnsupportedLayerError(
                    f"{where} is not supported inside a convolutional front end (between Reshape((-1, bands, "
                    f"channels)) and the Reshape that flattens it); supported there: {', '.join(_conv2d.GRID_LAYERS)}"
                )
            try:
                if not isinstance(layer.get("config"), dict):
                    raise ModelFormatError("no config in the file; re-save the model")
                node = handler(self, layer, layer["config"], n)
                if isinstance(node, _conv2d.Amend):
                    node = node.node
                    n = node.out_features(n_last)
                    layers[-1] = node
                    continue
                if node is not None:
                    n_last, n = n, node.out_features(n)
            except LmuEdgeError as e:
                msg = str(e)
                raise type(e)(msg if msg.startswith(str(self.file)) else f"{where}: {msg}") from None
            except (KeyError, TypeError, ValueError) as e:
                raise ModelFormatError(
                    f"{where}: config lmu-edge cannot read ({type(e).__name__}: {e}); re-save the model with keras-lmu"
                ) from None
            if node is not None:
                layers.append(node)
        if self.grid is not None:
            raise UnsupportedLayerError(
                f"{self.file}: the convolutional front end is not flattened back to one vector per frame; "
                f"end it with Reshape((-1, bands * channels))"
            )
        meta = {
            "source": "keras",
            "file": limits.safe_name(self.file.name),
            "container": self.mf.container,
            "keras_version": None if self.mf.keras_version is None else limits.safe_name(self.mf.keras_version),
        }
        layers = _safe_names(layers)
        try:
            cfg = self.mf.config.get("config")
            raw_name = cfg.get("name") if isinstance(cfg, dict) else None
            if isinstance(raw_name, str) and re.fullmatch(r"(sequential|functional|model)(_\d+)?", raw_name):
                raw_name = None  # the name Keras gave an unnamed model: the user knows the file, not this
            return ir.Graph(
                name=limits.safe_name(raw_name or self.file.stem),
                input_features=F,
                layers=tuple(layers),
                seq_len=T,
                metadata=meta,
            )
        except ShapeError as e:
            raise ShapeError(f"{self.file}: {e}") from None

    # --- helpers ------------------------------------------------------------------------------

    def weights(self, layer, names, part="own", hidden=None, shapes=None) -> dict:
        return self.mf.weights(layer, names, part, hidden, shapes)


# --- plain layers -------------------------------------------------------------------------------


def _dense_parts(conv, layer, cfg, n_in, part="own", hidden=None):
    """(kernel, bias, activation) of a serialized Dense, checked against its input size."""
    if cfg.get("lora_rank") or cfg.get("quantization_config"):
        raise UnsupportedLayerError("LoRA and quantized Dense layers are not supported; merge or remove them first")
    units, use_bias = int(cfg["units"]), _flag(cfg, "use_bias", True)
    act = _activation(cfg.get("activation", "linear"))
    names = ["kernel"] + (["bias"] if use_bias else [])
    shapes = {"kernel": (n_in, units), "bias": (units,)}
    w = conv.weights(layer, names, part, hidden, shapes)
    _check(w, shapes)
    return w["kernel"], w.get("bias"), act


def _dense(conv, layer, cfg, n_in):
    k, b, act = _dense_parts(conv, layer, cfg, n_in)
    return ir.Dense(layer_name(layer), k, b, act)


def _time_distributed(conv, layer, cfg, n_in):
    inner = cfg.get("layer") or {}
    if class_name(inner) != "Dense":
        raise UnsupportedLayerError(
            f"TimeDistributed({class_name(inner)}) is not supported; supported: TimeDistributed(Dense)"
        )
    k, b, act = _dense_parts(conv, layer, inner["config"], n_in)
    return ir.Dense(layer_name(layer), k, b, act)


def _activation_layer(conv, layer, cfg, n_in):
    if conv.grid is not None:
        return _conv2d.activation(conv, layer, cfg, n_in, _activation(cfg.get("activation")))
    return ir.Activation(layer_name(layer), _activation(cfg.get("activation")))


def _relu(conv, layer, cfg, n_in):
    mx, slope, thr = cfg.get("max_value"), cfg.get("negative_slope", 0) or 0, cfg.get("threshold", 0) or 0
    act = None
    if slope == 0 and thr == 0 and mx is None:
        act = "relu"
    if slope == 0 and thr == 0 and mx is not None and float(mx) == 6.0:
        act = "relu6"
    if act is not None:
        if conv.grid is not None:
            return _conv2d.activation(conv, layer, cfg, n_in, act)
        return ir.Activation(layer_name(layer), act)
    raise UnsupportedLayerError(
        f"ReLU with max_value={mx}, negative_slope={slope}, threshold={thr} is not supported; "
        f"supported: plain ReLU and ReLU(max_value=6)"
    )


def _softmax(conv, layer, cfg, n_in):
    axis = cfg.get("axis", -1)
    if axis not in (-1, [-1], 2, [2]):
        raise UnsupportedLayerError(f"softmax over axis={axis} is not supported; supported: axis=-1 (the features)")
    return ir.Activation(layer_name(layer), "softmax")


def _identity(conv, layer, cfg, n_in):
    return None  # the identity at inference: dropped


def _pooling(conv, layer, cfg, n_in):
    if cfg.get("data_format", "channels_last") != "channels_last" or cfg.get("keepdims"):
        raise UnsupportedLayerError(
            f"data_format={cfg.get('data_format')!r}, keepdims={cfg.get('keepdims')} is not "
            f"supported; supported: channels_last without keepdims"
        )
    return ir.TimePooling(layer_name(layer), "mean")


# --- LMU layers -----------------------------------------------------------------------------------


def _lmu_feedforward(conv, layer, cfg, n_in):
    mode = str(cfg.get("conv_mode", "fft")).lower()
    if mode not in CONV_MODES:
        raise UnsupportedLayerError(f"conv_mode={mode!r} is not supported; supported: {', '.join(CONV_MODES)}")
    return _lmu(
        conv,
        layer,
        cfg,
        n_in,
        parallel=True,
        return_sequences=_flag(cfg, "return_sequences"),
        conv_mode=mode,
        truncate_ir=cfg.get("truncate_ir", 1e-4),
    )


def _lmu_layer(conv, layer, cfg, n_in):
    rnn = any(_flag(cfg, k) for k in ("hidden_to_memory", "memory_to_memory", "trainable_theta"))
    # keras-lmu's LMU builds an LMUFeedforward (fft) when none of the three flags is set
    return _lmu(
        conv,
        layer,
        cfg,
        n_in,
        parallel=not rnn,
        return_sequences=_flag(cfg, "return_sequences"),
        conv_mode="fft",
        truncate_ir=None,
    )


def _rnn(conv, layer, cfg, n_in):
    cell = cfg.get("cell") or {}
    if class_name(cell) != "LMUCell":
        raise UnsupportedLayerError(
            f"RNN({class_name(cell)}) is not supported; the only supported RNN is RNN(LMUCell) "
            f"(supported layers: {', '.join(SUPPORTED_LAYERS)})"
        )
    for key in ("return_state", "go_backwards", "stateful"):
        if _flag(cfg, key):
            raise UnsupportedLayerError(f"{key}=True is not supported")
    return _lmu(conv, layer, cell["config"], n_in, parallel=False, return_sequences=_flag(cfg, "return_sequences"))


def _hidden_cell(conv, layer, hcfg, z: int):
    """The IR hidden cell of a keras-lmu layer whose hidden input has ``z`` features."""
    if hcfg is None:
        return None, None
    cls, cfg = class_name(hcfg), hcfg.get("config") or {}
    name = cfg.get("name")
    if cls == "Dense":
        k, b, act = _dense_parts(conv, layer, cfg, z, "hidden", name)
        return ir.HiddenDense(k, b, act), name
    if cls == "SimpleRNNCell":
        units, use_bias = int(cfg["units"]), _flag(cfg, "use_bias", True)
        act = _activation(cfg.get("activation", "tanh"), "hidden activation")
        names = ["kernel", "recurrent_kernel"] + (["bias"] if use_bias else [])
        w = conv.weights(layer, names, "hidden", name)
        _check(w, {"kernel": (z, units), "recurrent_kernel": (units, units), "bias": (units,)})
        return ir.HiddenSimpleRNN(w["kernel"], w["recurrent_kernel"], w.get("bias"), act), name
    raise UnsupportedLayerError(
        f"hidden cell of class {cls} is not supported; supported hidden cells: {', '.join(HIDDEN_CELLS)}"
    )


def _lmu(conv, layer, cfg, n_in, *, parallel, return_sequences, conv_mode="fft", truncate_ir=None):
    """An IR LMU from the config of an LMUCell, LMU or LMUFeedforward."""
    d, q = int(cfg["memory_d"]), int(cfg["order"])
    theta0 = float(cfg["theta"])
    disc = str(cfg.get("discretizer", "zoh"))
    if disc not in DISCRETIZERS:
        raise UnsupportedLayerError(f"discretizer={disc!r} is not supported; supported: {', '.join(DISCRETIZERS)}")
    h2m, m2m, tt = (_flag(cfg, k) for k in ("hidden_to_memory", "memory_to_memory", "trainable_theta"))
    i2h, use_bias = _flag(cfg, "input_to_hidden"), _flag(cfg, "use_bias")
    has_kernel = cfg.get("kernel_initializer", "glorot_uniform") is not None
    z = d * q + (n_in if i2h else 0)
    hidden, hidden_name = _hidden_cell(conv, layer, cfg.get("hidden_cell"), z)
    if h2m and hidden is None:
        raise UnsupportedLayerError(
            "hidden_to_memory=True without a hidden cell is not supported (keras-lmu cannot run it either)"
        )
    enc_d = n_in + (hidden.units if h2m else 0)
    names = [
        n for n, on in (("kernel", has_kernel), ("bias", use_bias), ("theta_inv", tt), ("recurrent_kernel", m2m)) if on
    ]
    w = conv.weights(layer, names, "own", hidden_name)
    _check(w, {"kernel": (enc_d, d), "bias": (d,), "theta_inv": (), "recurrent_kernel": (d * q, d)})
    if has_kernel:
        K = w["kernel"]
    elif enc_d == d:
        K = np.eye(d, dtype=np.float32)
    else:
        raise ShapeError(
            f"without an input kernel the input size ({enc_d}) must equal memory_d ({d}); re-save the model"
        )
    theta = theta0
    frozen = False
    if tt:
        tinv = float(w["theta_inv"])
        if not (np.isfinite(tinv) and tinv >= 0):
            raise UnsupportedLayerError(
                f"trained theta_inv = {tinv:g} is not supported: only a finite theta_inv >= 0 is a memory"
            )
        # theta_inv = 0 (issue 52, seed 6: training drove it there): Abar = I and Bbar = 0, so the memory stays
        # at its zero start; exactly that is the initial theta with every encoder zero (u = 0 at every step)
        frozen = tinv == 0
        theta = theta0 if frozen else 1.0 / tinv
    if frozen:
        K = np.zeros_like(K)
        w = {k: (np.zeros_like(v) if k in ("bias", "recurrent_kernel") else v) for k, v in w.items()}
    memory: ir.Memory
    if parallel:
        memory = _impulse_response(conv.seq_len, q, theta, disc, conv_mode, truncate_ir)
    else:
        memory = ir.DenseSS(disc, *lti.legendre_discrete(q, theta, disc))
    return ir.LMU(
        layer_name(layer),
        memory_d=d,
        order=q,
        theta=theta,
        discretizer=disc,
        input_encoders=K[:n_in],
        memory=memory,
        encoder_bias=w.get("bias"),
        hidden_encoders=K[n_in:] if h2m else None,
        memory_encoders=w.get("recurrent_kernel"),
        hidden=hidden,
        input_to_hidden=i2h,
        return_sequences=return_sequences,
    )


def truncation_length(H: np.ndarray, truncate_ir: float) -> int:
    """How many steps of ``H`` (q, L) keras-lmu's raw mode keeps for ``truncate_ir``.

    keras-lmu sums ``|H|`` from each step to the end, relative to the sum from
    the start, per memory dimension, and drops the steps from the first one at
    which this tail is below ``truncate_ir`` in every dimension, provided the
    last step is one of them (else nothing).
    """
    tail = np.cumsum(np.abs(H)[:, ::-1], axis=1)[:, ::-1]
    drop = np.all(tail / tail[:, :1] < truncate_ir, axis=0)
    return int(np.argmax(drop)) if drop[-1] else H.shape[1]


def _impulse_response(
    seq_len: Optional[int], q: int, theta: float, disc: str, mode: str, truncate_ir
) -> ir.ImpulseResponse:
    if seq_len is None:
        if not float(theta).is_integer():
            raise ModelFormatError(
                f"theta={theta:g} with an unknown sequence length is not supported; keras-lmu "
                f"cannot build that (its impulse response has 5*theta steps); re-save with a fixed "
                f"length"
            )
        length, why = (
            5 * int(theta),
            f"the sequence length is unknown, so keras-lmu convolves with the first "
            f"5*theta = {5 * int(theta)} steps of the response",
        )
    else:
        length, why = int(seq_len), None
    if mode == "fft" and seq_len is not None:
        return ir.ImpulseResponse(
            note=f"fft convolution over the whole fixed sequence length ({seq_len} steps): the exact response"
        )
    H = lti.legendre_impulse_response(q, theta, length, disc)
    if mode == "raw" and truncate_ir is not None:
        keep = truncation_length(H, float(truncate_ir))
        if keep < length:
            return ir.ImpulseResponse(
                H[:, :keep],
                "truncated",
                f"raw convolution with truncate_ir={float(truncate_ir):g}: keras-lmu keeps the first {keep} of "
                f"{length} steps of the response" + (f" ({why})" if why else ""),
            )
    if why is None:
        return ir.ImpulseResponse(
            note=f"{mode} convolution over the whole fixed sequence length ({seq_len} steps), "
            f"nothing truncated: the exact response"
        )
    return ir.ImpulseResponse(H, "truncated", f"{mode} convolution; {why}")


_HANDLERS = {
    "Dense": _dense,
    "TimeDistributed": _time_distributed,
    "Activation": _activation_layer,
    "ReLU": _relu,
    "Softmax": _softmax,
    "GlobalAveragePooling1D": _pooling,
    "LMUFeedforward": _lmu_feedforward,
    "LMU": _lmu_layer,
    "RNN": _rnn,
    "Reshape": _conv2d.reshape,
    "ZeroPadding2D": _conv2d.zero_padding,
    "Conv2D": _conv2d.conv2d,
    "BatchNormalization": _conv2d.batch_norm,
    "MaxPooling2D": _conv2d.max_pooling,
    **{c: _identity for c in _INFERENCE_IDENTITY},
}
