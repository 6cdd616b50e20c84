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
    from importlib.metadata import version as _dist_version

    __version__ = _dist_version("lmu-edge")
except Exception:  # running from a source tree that is not installed
    __version__ = "0.1.0"

from . import errors, ir, lti
from .artifact import Artifact, convert, open_artifact
from .errors import LmuEdgeError
from .folding import candidates, fold
from .irfile import save
from .quantization import quantize
from .reference import Stream, simulate


def load(path) -> "ir.Graph":
    """Read a model file into an :class:`lmu_edge.ir.Graph` (converter chosen by suffix)."""
    import importlib
    import os
    from pathlib import Path

    from . import registry
    from .errors import ModelFormatError
    from .limits import check_regular_file

    p = Path(path)
    if not os.path.lexists(p):
        raise ModelFormatError(f"{p}: no such file")
    if p.is_dir():
        raise ModelFormatError(f"{p}: is a directory, not a model file")
    module = importlib.import_module(registry.converter_for(p))
    check_regular_file(p, "model file")
    try:
        return module.load_ir(p) if module.__name__ == "lmu_edge.irfile" else module.load(p)
    except (LmuEdgeError, KeyboardInterrupt, SystemExit):
        raise
    except MemoryError:
        raise ModelFormatError(
            f"{p}: reading it needs more memory than this machine has; the file is damaged "
            f"or far larger than any supported model"
        ) from None
    except RecursionError:
        raise ModelFormatError(f"{p}: nested too deeply to be a model file") from None
    except Exception as e:  # a reader's own exception (h5py, zipfile, zlib, json, numpy): the file is malformed
        raise ModelFormatError(
            f"{p}: cannot be read as a model file ({type(e).__name__}: "
            f"{' '.join(str(e).split())[:200]}); re-save or re-export the model"
        ) from None


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
