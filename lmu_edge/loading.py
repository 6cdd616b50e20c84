"""``lmu_edge.load``: a model file into an :class:`lmu_edge.ir.Graph`, its converter chosen by the file's
suffix (``registry``). A module of its own so that the artifact writer and the sweep can call it without
importing the package's ``__init__``, which imports them."""

from __future__ import annotations

from . import ir
from .errors import LmuEdgeError


def load(path) -> ir.Graph:
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
