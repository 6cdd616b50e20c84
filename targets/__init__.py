"""Targets: one module per runtime family (installed as ``lmu_edge.targets``).

A target is a module that satisfies :class:`Target`: it defines ``QUANTIZE``
(the quantization modes it emits), ``RUNTIMES`` and ``DEFAULT_RUNTIME``,
``OPTIONS`` (its options and their defaults), ``emit(graph, out_dir, options) ->
dict`` (writes its files and returns manifest entries), ``run(artifact, x,
runtime)`` and ``stream(artifact, runtime)``; a target that can say more than
its output error about a quantized artifact also defines ``check(artifact, x)``
(:class:`CheckedTarget`). Optional capabilities the core reads through the registry
(it imports no target): ``PADE_MODES`` (``"float"`` / ``"int"``: where it runs the implicit Pade
realization; default none), ``RK_QUANTIZED`` (False: no integer Runge-Kutta state path; default True) and
``state_bits(quantize, options)`` (a state width other than :mod:`lmu_edge.precision`'s; default None).
A target that quantizes in ``emit`` may hand :func:`lmu_edge.quantization.quantize` its ``cost``, an estimate
of a candidate's instructions per step on its device, and the widening search weighs it (C: ``c_cost``).
Register it in :data:`lmu_edge.registry.TARGETS`;
:func:`load` imports it and checks the contract. CONTRIBUTING.md walks through
adding one.

This package's ``__init__`` imports no target and no optional dependency.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from lmu_edge import registry
from lmu_edge.errors import LmuEdgeError


@runtime_checkable
class TargetStream(Protocol):
    """What ``stream(artifact, runtime)`` returns: the artifact driven one sample at a time."""

    def reset(self, batch: int = 1) -> None:
        """Start ``batch`` independent streams from the zero state."""

    def step(self, x_t: Any) -> np.ndarray:
        """Feed one sample ``(F,)`` (or ``(batch, F)``); the output for the sequence seen so far."""


@runtime_checkable
class Target(Protocol):
    """The contract every target module fulfils (a module satisfies a Protocol by its attributes)."""

    #: quantization modes ``emit`` accepts as ``options["quantize"]`` ("float" first)
    QUANTIZE: tuple
    #: runtimes ``run`` and ``stream`` accept
    RUNTIMES: tuple
    #: the runtime used when the caller names none (one of RUNTIMES)
    DEFAULT_RUNTIME: str
    #: the target's own options and their defaults (``convert(..., **options)``)
    OPTIONS: dict

    def emit(self, graph: Any, out_dir: Any, options: dict, /) -> dict:
        """Write the artifact's files into ``out_dir`` for the folded graph; returns manifest entries.

        ``options`` holds OPTIONS (with the caller's values), ``quantize`` and ``calibration``
        (an ``(N, T, F)`` array or None). The returned dict may hold ``files``, ``tolerance``
        (None: measured, not enforced) and ``report`` (merged into report.json).
        """

    def run(self, artifact: Any, x: np.ndarray, runtime: str, /) -> np.ndarray:
        """Run the artifact in ``runtime`` on ``x`` ``(N, T, F)``: what the source model's predict returns."""

    def stream(self, artifact: Any, runtime: str, /) -> TargetStream:
        """The artifact in ``runtime``, one sample at a time."""


@runtime_checkable
class CheckedTarget(Target, Protocol):
    """A target with its own verification of quantized artifacts (e.g. bit-exactness with the integer oracle)."""

    def check(self, artifact: Any, x: np.ndarray, /) -> dict:
        """Measurements merged into the verification result; ``bit_exact_host: False`` fails it."""


#: the members :class:`Target` requires, for error messages
MEMBERS = ("QUANTIZE", "RUNTIMES", "DEFAULT_RUNTIME", "OPTIONS", "emit", "run", "stream")


def load(name: str) -> Target:
    """The target module registered as ``name``, checked against :class:`Target`.

    Raises :class:`~lmu_edge.errors.LmuEdgeError` for an unknown name or a module that lacks
    part of the contract (its heavy runtimes are imported later, when used).
    """
    module = registry.target(name)
    if not isinstance(module, Target) or module.DEFAULT_RUNTIME not in module.RUNTIMES:
        missing = [m for m in MEMBERS if not hasattr(module, m)] or ["DEFAULT_RUNTIME among RUNTIMES"]
        raise LmuEdgeError(
            f"target {name!r} ({module.__name__}) does not fulfil the target contract: it lacks "
            f"{', '.join(missing)}; see lmu_edge.targets.Target"
        )
    return module


if TYPE_CHECKING:  # mypy checks every registered target module against the contract; nothing is imported
    from . import c, ir, nengo, nir, onnx, tflite

    _TARGETS: tuple[Target, ...] = (c, ir, nengo, nir, onnx, tflite)
    _CHECKED: tuple[CheckedTarget, ...] = (c, nengo, onnx, tflite)
