"""The intermediate representation: one single-input, single-output chain of layers.

Converters produce an :class:`Graph`; passes (:func:`lmu_edge.fold`, later
quantization) return new graphs; targets consume them. Every node is a frozen
dataclass whose arrays are read-only copies, so a graph can be shared freely; the
nodes are defined in :mod:`lmu_edge.layers` and re-exported here.

Tensors flow through the chain one time step at a time: a layer sees the
current sample's features (a vector) and may keep state across steps. The
model's ``predict`` output is the whole output sequence, or only its last step
when the chain ends after an LMU with ``return_sequences=False`` or a pooling
layer (``Graph.output_is_sequence``).

LMU memory has two forms:

* parallel: :class:`ImpulseResponse`, the convolution kernel ``H`` (q, L) with
  its provenance (``analytic``: the exact ZOH / Euler response, unbounded;
  ``truncated``: the first L steps of it, as the source model used;
  ``learned``: a kernel stored in the model that A, B need not reproduce);
* recurrent: a realization, :class:`DenseSS` (dense ``Abar``, ``Bbar``),
  :class:`RungeKutta` (structured, stores no q*q matrix), :class:`Pade` (implicit,
  structured, A-stable) or :class:`FIR` (a
  ring buffer of a finite kernel), with the :class:`Measurement` that proves it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, Optional, Union

import numpy as np

from . import limits
from .errors import LimitError, ShapeError
from .layers import (
    ACTIVATIONS,
    FIR,
    LMU,
    PROVENANCES,
    Activation,
    BandConv,
    BandGeometry,
    Dense,
    DenseSS,
    Hidden,
    HiddenDense,
    HiddenSimpleRNN,
    ImpulseResponse,
    Measurement,
    Memory,
    Pade,
    RungeKutta,
    TimePooling,
)

# the node dataclasses live in lmu_edge.layers; ir is the namespace the converters, passes, targets and docs
# use (ir.LMU, ir.DenseSS, ...)
__all__ = [
    "ACTIVATIONS",
    "PROVENANCES",
    "Activation",
    "BandConv",
    "BandGeometry",
    "Dense",
    "DenseSS",
    "FIR",
    "HiddenDense",
    "Hidden",
    "HiddenSimpleRNN",
    "ImpulseResponse",
    "LMU",
    "Measurement",
    "Memory",
    "Pade",
    "RungeKutta",
    "TimePooling",
    "IR_FORMAT",
    "IR_VERSION",
    "Layer",
    "LAYER_CLASSES",
    "Graph",
    "NODE_TYPES",
    "INT_NODE_TYPES",
    "equal",
    "realization_name",
]


IR_FORMAT = "lmu-edge-ir"
IR_VERSION = 1
Layer = Union[Dense, Activation, TimePooling, BandConv, LMU]

#: every class that may stand in a Graph's layer chain (quantized layers register themselves in lmu_edge.qir)
LAYER_CLASSES = [Dense, Activation, TimePooling, BandConv, LMU]


def _is_layer(layer) -> bool:
    return isinstance(layer, tuple(LAYER_CLASSES))


def _needs_sequence(layer) -> bool:
    """Layers with memory across time need a sequence as input (LMU, pooling, their integer forms)."""
    return bool(getattr(layer, "NEEDS_SEQUENCE", False))


def _returns_last_step(layer) -> bool:
    if getattr(layer, "POOLS", False):
        return True
    return getattr(layer, "NEEDS_SEQUENCE", False) and not getattr(layer, "return_sequences", True)


@dataclass(frozen=True, eq=False)
class Graph:
    """A chain model: ``input (seq_len, input_features) -> layers[0] -> ... -> output``."""

    TYPE: ClassVar[str] = "graph"
    name: str
    input_features: int
    layers: tuple
    seq_len: Optional[int] = None
    metadata: dict = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "layers", tuple(self.layers))
        object.__setattr__(self, "metadata", dict(self.metadata))
        limits.check_name(self.name, "graph")
        if len(self.layers) > limits.MAX_LAYERS:
            raise LimitError(f"graph {self.name!r}: {len(self.layers)} layers, more than the limit {limits.MAX_LAYERS}")
        limits.check_int(self.input_features, 1, limits.MAX_FEATURES, f"graph {self.name!r}: input_features")
        if self.seq_len is not None:
            limits.check_int(self.seq_len, 1, limits.MAX_SEQ_LEN, f"graph {self.name!r}: seq_len")
        for lay in self.layers:
            limits.check_name(getattr(lay, "name", None), f"graph {self.name!r}: a {type(lay).__name__} layer")
        if int(self.input_features) != self.input_features or self.input_features < 1:
            raise ShapeError(
                f"graph {self.name!r}: input_features must be a positive integer, got {self.input_features!r}"
            )
        if self.seq_len is not None and (int(self.seq_len) != self.seq_len or self.seq_len < 1):
            raise ShapeError(f"graph {self.name!r}: seq_len must be None or a positive integer, got {self.seq_len!r}")
        names = [lay.name for lay in self.layers]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ShapeError(f"graph {self.name!r}: layer names must be unique; repeated: {', '.join(sorted(dup))}")
        self.shapes()  # raises ShapeError where the chain does not fit

    def shapes(self) -> list:
        """``[(layer, in_features, out_features, output_is_sequence)]`` along the chain."""
        out, n, seq = [], int(self.input_features), True
        for layer in self.layers:
            if not _is_layer(layer):
                raise ShapeError(f"graph {self.name!r}: {type(layer).__name__} is not a layer type of the IR")
            if _needs_sequence(layer) and not seq:
                raise ShapeError(
                    f"layer {layer.name!r} ({type(layer).__name__}) needs a sequence, but the layer "
                    f"before it returns only the last step"
                )
            m = layer.out_features(n)
            if _returns_last_step(layer):
                seq = False
            out.append((layer, n, m, seq))
            n = m
        return out

    @property
    def output_features(self) -> int:
        """Features of the graph's output."""
        s = self.shapes()
        return s[-1][2] if s else int(self.input_features)

    @property
    def output_is_sequence(self) -> bool:
        """True when the graph returns every step, False when only the last."""
        s = self.shapes()
        return s[-1][3] if s else True

    @property
    def lmu_layers(self) -> list:
        """The graph's LMU layers, in order."""
        return [lay for lay in self.layers if isinstance(lay, LMU)]

    @property
    def quantized(self) -> bool:
        """True for a graph of integer layers (made by :func:`lmu_edge.quantize`)."""
        return any(getattr(lay, "QUANTIZED", False) for lay in self.layers)

    @property
    def form(self) -> str:
        """``"parallel"`` if any LMU memory is an impulse response, ``"quantized"`` for an
        integer graph, else ``"recurrent"``."""
        if self.quantized:
            return "quantized"
        return "parallel" if any(lay.is_parallel for lay in self.lmu_layers) else "recurrent"

    def replace(self, **changes) -> "Graph":
        """A new graph with ``changes`` applied (graphs are immutable)."""
        return dataclasses.replace(self, **changes)

    def layer(self, name: str):
        """The layer called ``name`` (KeyError if there is none)."""
        for lay in self.layers:
            if lay.name == name:
                return lay
        raise KeyError(
            f"graph {self.name!r} has no layer {name!r}; layers: {', '.join(lay.name for lay in self.layers)}"
        )


NODE_TYPES = {
    c.TYPE: c
    for c in (
        Dense,
        Activation,
        TimePooling,
        BandConv,
        HiddenDense,
        HiddenSimpleRNN,
        ImpulseResponse,
        DenseSS,
        RungeKutta,
        Pade,
        FIR,
        Measurement,
        LMU,
        Graph,
    )
}
INT_NODE_TYPES: set = set()  # node types whose arrays are integers (the quantized layers of lmu_edge.qir)


def equal(a: Any, b: Any) -> bool:
    """Deep equality of IR nodes, arrays compared exactly (values, shape and dtype)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (
            isinstance(a, np.ndarray)
            and isinstance(b, np.ndarray)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and np.array_equal(a, b)
        )
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return type(a) is type(b) and all(equal(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float) and np.isnan(a) and np.isnan(b):
        return True
    return type(a) is type(b) and a == b


def realization_name(memory) -> str:
    """A short name of an LMU memory's realization for reports: ``dense zoh``, ``rk4 x2``, ``fir 25``."""
    if isinstance(memory, DenseSS):
        return f"dense {memory.method}"
    if isinstance(memory, RungeKutta):
        return f"rk{memory.rk_order} x{memory.substeps}"
    if isinstance(memory, Pade):
        return f"pade [{memory.num}/{memory.den}] x{memory.substeps}"
    if isinstance(memory, FIR):
        return f"fir {memory.kernel.shape[1]}"
    if isinstance(memory, ImpulseResponse):
        return f"parallel ({memory.provenance})"
    return type(memory).__name__
