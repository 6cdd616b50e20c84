"""Reading user arrays (inputs, calibration data) from arrays or files."""

from __future__ import annotations

import tokenize
import zipfile
import zlib
from pathlib import Path

import numpy as np

from . import limits
from .errors import LmuEdgeError, ShapeError

#: largest magnitude accepted in inputs: far beyond any real signal, small enough that squares stay finite
MAX_ABS_VALUE = 1e15


def load_array(source, what: str = "input") -> np.ndarray:
    """An array, or a ``.npy`` file, or a ``.npz`` file with a single array or the key ``x``.

    Files are read without unpickling; every defect (not a file, not numpy, an object array, a zip bomb)
    is a :class:`~lmu_edge.errors.ShapeError` or :class:`~lmu_edge.errors.LimitError` naming ``what``."""
    if isinstance(source, (str, Path)):
        path = Path(source)
        if not path.exists():
            raise ShapeError(f"{what}: no such file {str(path)!r}")
        limits.check_regular_file(path, what)
        try:
            if zipfile.is_zipfile(path):
                with zipfile.ZipFile(path) as zf:
                    limits.check_zip(zf, f"{what}: {path}")
            else:
                with open(path, "rb") as fh:
                    head = fh.read(6)
                if head != b"\x93NUMPY":  # numpy's own message for this speaks of pickles and allow_pickle
                    raise ShapeError(
                        f"{what}: {path} is neither a .npy nor a .npz file (it starts with {head!r}); "
                        f"save arrays with numpy.save or numpy.savez"
                    )
            data = np.load(path, allow_pickle=False)
            if isinstance(data, np.lib.npyio.NpzFile):
                with data:
                    keys = list(data.files)
                    if "x" in keys:
                        arr = data["x"]
                    elif len(keys) == 1:
                        arr = data[keys[0]]
                    else:
                        shown = ", ".join(k[:40] for k in keys[:8]) + (" ..." if len(keys) > 8 else "")
                        raise ShapeError(
                            f"{what}: {path} holds arrays {shown}; name the input array 'x' or store a single array"
                        )
            else:
                arr = data
        except LmuEdgeError:
            raise
        except MemoryError:
            raise ShapeError(f"{what}: {path} holds an array too large for this machine's memory") from None
        except (
            ValueError,
            OSError,
            EOFError,
            zipfile.BadZipFile,
            zlib.error,
            KeyError,
            RuntimeError,
            NotImplementedError,
            TypeError,
            AttributeError,
            tokenize.TokenError,  # numpy's reading of a damaged .npy header (an unclosed bracket)
        ) as e:
            msg = " ".join(str(e).split())[:160]
            raise ShapeError(
                f"{what}: {path} is not a readable .npy / .npz file of numbers ({type(e).__name__}: "
                f"{msg}); save arrays with numpy.save"
            ) from None
        if not isinstance(arr, np.ndarray):
            raise ShapeError(f"{what}: {path} holds no numpy array; save arrays with numpy.save")
    else:
        try:
            arr = np.asarray(source)
        except (ValueError, TypeError) as e:
            raise ShapeError(f"{what}: not an array of numbers ({e})") from None
    if arr.dtype.kind not in "fiu":
        raise ShapeError(f"{what}: expected a numeric array, got dtype {arr.dtype}")
    if arr.size == 0:
        raise ShapeError(f"{what}: the array is empty (shape {arr.shape}); give at least one sequence of one step")
    if arr.dtype.kind == "f":
        with np.errstate(all="ignore"):
            finite = np.isfinite(arr)
            if not finite.all():
                raise ShapeError(f"{what}: the array holds NaN or infinite values")
    # integers are held to the same cap (int64 extremes broke the calibration's histograms); compared as
    # Python ints, since abs() of the most negative int64 overflows
    top = max(abs(float(arr.max())), abs(float(arr.min()))) if arr.dtype.kind == "f" else None
    if top is None:
        top = max(abs(int(arr.max())), abs(int(arr.min())))
    if top > MAX_ABS_VALUE:
        raise ShapeError(
            f"{what}: values up to {float(top):.3g}, beyond {MAX_ABS_VALUE:g}; scale the data as the model was trained"
        )
    return arr


def check_input(graph, x, what: str = "input") -> tuple[np.ndarray, bool]:
    """``(x as (N, T, F) float64, had_batch_axis)`` for ``graph`` (an :class:`ir.Graph`), or a ShapeError
    that says what to pass. Here, not in ``reference``, so that both simulators use it without importing
    each other."""
    x = np.asarray(x)
    if x.dtype.kind not in "fiu":
        raise ShapeError(f"{what}: expected numbers, got dtype {x.dtype}")
    batched = x.ndim == 3
    given = x.shape  # the errors name the shape the caller gave, not the batched view
    if x.ndim == 2:
        x = x[None]
    if x.ndim != 3:
        raise ShapeError(
            f"{what}: expected shape (N, T, {graph.input_features}) or (T, {graph.input_features}), got {x.shape}"
        )
    if x.shape[2] != graph.input_features:
        hint = ""
        if len(given) == 2 and graph.input_features == 1:  # (N, T) of a one-feature model: psMNIST's (200, 784)
            hint = f"; if these are {given[0]} sequences of {given[1]} steps, add the feature axis: x[..., None]"
        raise ShapeError(
            f"{what}: model {graph.name!r} takes {graph.input_features} features per step, "
            f"got {x.shape[2]} (shape {given}){hint}"
        )
    if x.shape[1] < 1:
        raise ShapeError(f"{what}: the sequence is empty (shape {given})")
    if not np.all(np.isfinite(x)):
        raise ShapeError(f"{what}: holds NaN or infinite values")
    return x.astype(np.float64), batched
