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

try:
    from importlib.metadata import PackageNotFoundError, version as _dist_version
    __version__ = _dist_version("lmu-edge")
except Exception:  # running from a source tree that is not installed
    __version__ = "0.1.0"

from . import errors, ir, lti
from .artifact import Artifact, convert, open_artifact
from .errors import LmuEdgeError
from .fold import candidates, fold
from .irfile import save
from .reference import Stream, simulate


def load(path) -> "ir.Graph":
    """Read a model file into an :class:`lmu_edge.ir.Graph` (converter chosen by suffix)."""
    import importlib
    from pathlib import Path

    from . import registry
    from .errors import IRFormatError, ModelFormatError

    p = Path(path)
    if not p.exists():
        raise ModelFormatError(f"{p}: no such file")
    if p.is_dir():
        raise ModelFormatError(f"{p}: is a directory, not a model file")
    module = importlib.import_module(registry.converter_for(p))
    return module.load_ir(p) if module.__name__ == "lmu_edge.irfile" else module.load(p)


__all__ = ["Artifact", "LmuEdgeError", "Stream", "candidates", "convert", "errors", "fold", "ir", "load",
           "lti", "open_artifact", "save", "simulate", "__version__"]

from .quantize import quantize  # noqa: E402

__all__.append("quantize")
