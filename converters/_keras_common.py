"""Helpers both Keras readers share (:mod:`lmu_edge.converters.keras_lmu` and its convolutional front end)."""

from __future__ import annotations

from lmu_edge.errors import ShapeError, UnsupportedLayerError

#: Keras activation names -> IR activation names
ACTIVATIONS = {
    None: "linear",
    "linear": "linear",
    "relu": "relu",
    "relu6": "relu6",
    "tanh": "tanh",
    "sigmoid": "sigmoid",
    "softmax": "softmax",
    "silu": "silu",
    "swish": "silu",
}


def activation(value, what="activation") -> str:
    """The IR name of a serialized Keras activation (a name or a serialized function), or a one-line
    :class:`UnsupportedLayerError` naming what is supported."""
    if isinstance(value, dict):  # a serialized function: {"class_name": "function", "config": "relu"}
        value = value.get("config") if isinstance(value.get("config"), str) else value.get("class_name")
    if value not in ACTIVATIONS:
        known = ", ".join(k for k in ACTIVATIONS if k)
        raise UnsupportedLayerError(f"{what} {value!r} is not supported; supported: {known}")
    return ACTIVATIONS[value]


def check_shapes(arrays: dict, shapes: dict) -> None:
    """:class:`ShapeError` where a weight read from the file has another shape than its config implies."""
    for k, shape in shapes.items():
        if k in arrays and tuple(arrays[k].shape) != tuple(shape):
            raise ShapeError(
                f"weight {k!r} has shape {tuple(arrays[k].shape)}, but the config implies "
                f"{tuple(shape)}; the weights do not belong to this config; re-save the model"
            )


def flag(cfg, key, default=False) -> bool:
    """A boolean option of a layer's config."""
    return bool(cfg.get(key, default))
