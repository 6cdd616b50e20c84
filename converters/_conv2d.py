"""The 2-D part of a Keras model: a spectrogram front end of convolutions over (time, bands).

A sequence model sees one feature vector per frame. A convolutional front end turns each frame into a
grid of ``bands x channels`` with ``Reshape((-1, bands, channels))``, runs ZeroPadding2D, Conv2D,
BatchNormalization, ReLU and MaxPooling2D blocks on it, and flattens it back with
``Reshape((-1, bands * channels))``. lmu-edge reads each block as one :class:`lmu_edge.ir.BandConv`:
the zero padding in time must be ``(kernel_t - 1, 0)`` (causal: the layer streams frame by frame),
batch norm is folded into the kernel and bias, and pooling may only be over bands.

The handlers keep the grid's shape on the converter (``conv.grid``) and amend the block's layer in place
(``Amend``) as its batch norm, activation and pooling arrive.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from lmu_edge import ir
from lmu_edge.errors import UnsupportedLayerError

from ._keras_common import activation as _activation
from ._keras_common import check_shapes as _check
from ._keras_common import flag as _flag
from .keras_files import layer_name

#: Keras layers lmu-edge reads between the two Reshapes of a convolutional front end
GRID_LAYERS = ("ZeroPadding2D", "Conv2D", "BatchNormalization", "ReLU", "Activation", "MaxPooling2D", "Reshape")


@dataclasses.dataclass(frozen=True)
class Amend:
    """A handler's answer that replaces the chain's last layer (a block growing) instead of adding one."""

    node: ir.BandConv


def _pair(value, what) -> tuple:
    v = list(value) if isinstance(value, (list, tuple)) else [value, value]
    if len(v) != 2 or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        raise UnsupportedLayerError(f"{what}={value!r} is not a pair of integers")
    return int(v[0]), int(v[1])


def _channels_last(cfg):
    if cfg.get("data_format", "channels_last") not in (None, "channels_last"):
        raise UnsupportedLayerError(
            f"data_format={cfg.get('data_format')!r} is not supported; supported: channels_last "
            f"(frames, bands, channels)"
        )


def reshape(conv, layer, cfg, n_in):
    """``Reshape((-1, bands, channels))`` opens the grid; ``Reshape((-1, features))`` closes it."""
    target = list(cfg.get("target_shape") or [])
    shown = tuple(target)
    if target and target[0] in (-1, None):
        target = target[1:]
    if any(not isinstance(t, int) or isinstance(t, bool) or t < 1 for t in target):
        raise UnsupportedLayerError(f"Reshape to {shown} is not supported; the time axis must stay first (-1)")
    if conv.grid is None and len(target) == 2 and target[0] * target[1] == n_in:
        conv.grid = (target[0], target[1])
        return None
    if conv.grid is not None and len(target) == 1 and target[0] == n_in:
        if conv.pad is not None:
            raise UnsupportedLayerError("ZeroPadding2D before the closing Reshape pads nothing lmu-edge can keep")
        conv.grid = None
        return None
    raise UnsupportedLayerError(
        f"Reshape to {shown} of {n_in} features per frame is not supported; supported: "
        f"Reshape((-1, bands, channels)) into a convolutional front end and Reshape((-1, bands * channels)) out"
    )


def _need_grid(conv, what):
    if conv.grid is None:
        raise UnsupportedLayerError(
            f"{what} needs frames shaped as (bands, channels): put Reshape((-1, bands, channels)) before it"
        )


def zero_padding(conv, layer, cfg, n_in):
    """ZeroPadding2D: remembered for the Conv2D that follows."""
    _need_grid(conv, "ZeroPadding2D")
    _channels_last(cfg)
    pad = cfg.get("padding")
    if isinstance(pad, int):
        pad = [[pad, pad], [pad, pad]]
    if not isinstance(pad, (list, tuple)) or len(pad) != 2:
        raise UnsupportedLayerError(f"padding={pad!r} is not supported")
    (t0, t1), (lo, hi) = _pair(pad[0], "padding in time"), _pair(pad[1], "padding in bands")
    if t1 != 0:
        raise UnsupportedLayerError(
            f"padding ({t0}, {t1}) in time pads after the current frame: the layer would look ahead and "
            f"cannot stream; pad only before it, ((kernel_t - 1, 0), ...)"
        )
    if conv.pad is not None:
        raise UnsupportedLayerError("two ZeroPadding2D in a row are not supported; merge them")
    conv.pad = (t0, lo, hi)
    return None


def conv2d(conv, layer, cfg, n_in):
    """Conv2D (valid, stride 1): a new :class:`~lmu_edge.ir.BandConv`, with the padding before it."""
    _need_grid(conv, "Conv2D")
    _channels_last(cfg)
    for key, want in (("strides", (1, 1)), ("dilation_rate", (1, 1))):
        if _pair(cfg.get(key, [1, 1]), key) != want:
            raise UnsupportedLayerError(f"{key}={cfg.get(key)} is not supported; supported: (1, 1)")
    if int(cfg.get("groups", 1) or 1) != 1:
        raise UnsupportedLayerError(f"groups={cfg.get('groups')} is not supported; supported: 1")
    if cfg.get("padding", "valid") != "valid":
        raise UnsupportedLayerError(
            f"padding={cfg.get('padding')!r} is not supported (it pads the future frames too); use padding='valid' "
            f"after ZeroPadding2D(((kernel_t - 1, 0), (pad_lo, pad_hi)))"
        )
    kt, kf = _pair(cfg.get("kernel_size"), "kernel_size")
    t0, lo, hi = conv.pad or (0, 0, 0)
    conv.pad = None
    if t0 != kt - 1:
        raise UnsupportedLayerError(
            f"a {kt}-frame kernel after {t0} frame(s) of padding in time is not causal frame by frame; "
            f"pad exactly {kt - 1} frame(s) before it with ZeroPadding2D(((kernel_t - 1, 0), ...))"
        )
    bands, cin = conv.grid
    filters, use_bias = int(cfg["filters"]), _flag(cfg, "use_bias", True)
    w = conv.weights(layer, ["kernel"] + (["bias"] if use_bias else []))
    _check(w, {"kernel": (kt, kf, cin, filters), "bias": (filters,)})
    node = ir.BandConv(layer_name(layer), bands, w["kernel"], w.get("bias"), lo, hi, _activation(cfg.get("activation")))
    conv.grid = (node.out_bands, node.channels_out)
    return node


def _block(conv, what) -> ir.BandConv:
    """The Conv2D block just read, which ``what`` (batch norm, activation, pooling) amends."""
    last = conv.layers[-1] if conv.layers else None
    if not isinstance(last, ir.BandConv) or conv.pad is not None:
        raise UnsupportedLayerError(f"{what} is supported only right after a Conv2D block")
    return last


def batch_norm(conv, layer, cfg, n_in):
    """BatchNormalization over the channels after a linear Conv2D: folded into its kernel and bias."""
    _need_grid(conv, "BatchNormalization")
    node = _block(conv, "BatchNormalization")
    if node.activation != "linear" or node.pool != 1:
        raise UnsupportedLayerError("BatchNormalization after an activation or pooling cannot be folded")
    axis = cfg.get("axis", -1)
    if axis not in (-1, 3, [-1], [3]):
        raise UnsupportedLayerError(f"axis={axis} is not supported; supported: -1 (the channels)")
    scale, center = bool(cfg.get("scale", True)), bool(cfg.get("center", True))
    names = (["gamma"] if scale else []) + (["beta"] if center else []) + ["moving_mean", "moving_variance"]
    w = conv.weights(layer, names)
    c = node.channels_out
    _check(w, {k: (c,) for k in names})
    eps = float(cfg.get("epsilon", 1e-3))
    g = np.asarray(w.get("gamma", np.ones(c)), np.float64)
    s = g / np.sqrt(np.asarray(w["moving_variance"], np.float64) + eps)
    b = np.zeros(c) if node.bias is None else np.asarray(node.bias, np.float64)
    bias = (b - np.asarray(w["moving_mean"], np.float64)) * s + np.asarray(w.get("beta", np.zeros(c)), np.float64)
    kernel = np.asarray(node.kernel, np.float64) * s
    return Amend(dataclasses.replace(node, kernel=kernel, bias=bias))


def activation(conv, layer, cfg, n_in, act: Optional[str]) -> Amend:
    """ReLU or Activation after a Conv2D block (before its pooling)."""
    node = _block(conv, "an activation in the convolutional front end")
    if node.activation != "linear" or node.pool != 1:
        raise UnsupportedLayerError("a second activation, or one after pooling, is not supported in a block")
    if act not in ("relu", "relu6", "linear", "tanh", "sigmoid", "silu"):
        raise UnsupportedLayerError(f"activation {act!r} is not supported in a convolutional front end")
    return Amend(dataclasses.replace(node, activation=act))


def max_pooling(conv, layer, cfg, n_in):
    """MaxPooling2D ``(1, pool)`` over bands after a Conv2D block."""
    _need_grid(conv, "MaxPooling2D")
    _channels_last(cfg)
    node = _block(conv, "MaxPooling2D")
    size = _pair(cfg.get("pool_size"), "pool_size")
    strides = size if cfg.get("strides") is None else _pair(cfg.get("strides"), "strides")
    if size[0] != 1 or strides != size or cfg.get("padding", "valid") != "valid":
        raise UnsupportedLayerError(
            f"MaxPooling2D pool_size={size}, strides={strides}, padding={cfg.get('padding')!r} is not supported; "
            f"supported: pooling over bands only, (1, p) with strides (1, p), padding='valid'"
        )
    if node.pool != 1:
        raise UnsupportedLayerError("two poolings after one Conv2D are not supported; merge them")
    node = dataclasses.replace(node, pool=size[1])
    conv.grid = (node.out_bands, node.channels_out)
    return Amend(node)
