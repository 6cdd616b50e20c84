"""Reading user arrays (inputs, calibration data) from arrays or files."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from .errors import ShapeError


def load_array(source, what: str = "input") -> np.ndarray:
    """An array, or a ``.npy`` file, or a ``.npz`` file with a single array or the key ``x``."""
    if isinstance(source, (str, Path)):
        path = Path(source)
        if not path.is_file():
            raise ShapeError(f"{what}: no such file {str(path)!r}")
        try:
            with open(path, "rb"):
                pass
            data = np.load(path, allow_pickle=False)
        except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:
            raise ShapeError(f"{what}: {path} is not a readable .npy / .npz file ({e}); save arrays with numpy.save") from None
        if isinstance(data, np.lib.npyio.NpzFile):
            with data:
                keys = list(data.files)
                if "x" in keys:
                    arr = data["x"]
                elif len(keys) == 1:
                    arr = data[keys[0]]
                else:
                    raise ShapeError(f"{what}: {path} holds arrays {', '.join(keys)}; name the input array 'x' "
                                     f"or store a single array")
        else:
            arr = data
    else:
        arr = np.asarray(source)
    if arr.dtype.kind not in "fiu":
        raise ShapeError(f"{what}: expected a numeric array, got dtype {arr.dtype}")
    return arr
