"""lmu-edge: Legendre Memory Units trained in parallel form, deployed as recurrences.

The public API::

    g = lmu_edge.load(path)                        # ir.Graph from a model file
    lmu_edge.save(g, path)                         # the documented .npz IR format
    r = lmu_edge.fold(g, realization="auto", error_budget=1e-6)
    y = lmu_edge.simulate(r, x)                    # what the source model's predict returns
    art = lmu_edge.convert(path_or_graph, target="ir", out_dir="out")
    y_dev = art.run(x); s = art.stream(); s.reset(); y_t = s.step(x_t)
    art = lmu_edge.open_artifact("out")
"""

from __future__ import annotations

from . import errors, ir, lti
from .artifact import Artifact, open_artifact
from .conversion import convert
from .errors import LmuEdgeError
from .folding import candidates, fold
from .irfile import save
from .loading import load
from .quantization import quantize
from .reference import Stream, simulate
from .version import __version__

__all__ = [
    "Artifact",
    "LmuEdgeError",
    "Stream",
    "candidates",
    "convert",
    "errors",
    "fold",
    "ir",
    "load",
    "lti",
    "open_artifact",
    "quantize",
    "save",
    "simulate",
    "__version__",
]
