"""The ``ir`` target: the folded recurrent model as an IR file, run by the reference simulator.

Useful on its own (hand the recurrent form to another tool through the
documented IR format) and as the simplest complete target: ``model.lmu.npz``
in the artifact directory is the artifact.
"""

from __future__ import annotations

import numpy as np

from .. import reference

QUANTIZE = ("float",)
#: target contract (optional): the reference simulator runs the implicit Pade realization, float and integer
PADE_MODES = ("float", "int")
RUNTIMES = ("reference", "reference-float32")
DEFAULT_RUNTIME = "reference"
OPTIONS: dict = {}


def emit(graph, out_dir, options) -> dict:
    """Nothing to write: ``model.lmu.npz``, which convert writes for every target, is this target's output."""
    return {"files": ["model.lmu.npz"]}


def _dtype(runtime):
    return np.float32 if runtime == "reference-float32" else np.float64


def run(artifact, x, runtime):
    """``x`` (N, T, F) through the float reference (float64, or float32 for ``reference-float32``)."""
    return reference.simulate(artifact.graph, x, dtype=_dtype(runtime))


def stream(artifact, runtime):
    """A step-at-a-time :class:`lmu_edge.reference.Stream` over the artifact's graph."""
    return reference.Stream(artifact.graph, dtype=_dtype(runtime))
