"""Limits on untrusted input, checked before any work is done.

Model files, IR files and input arrays come from elsewhere. Every size read
from one is checked here against a documented bound (docs/security.md) before
anything is allocated or computed, so a hostile or damaged file is refused in
milliseconds with a one-line :class:`~lmu_edge.errors.LimitError` instead of
hanging, exhausting memory or overflowing. The bounds admit every legitimate
model: orders up to 1024, theta up to 100 times the largest order, kernels up to the
longest window a parallel-form model trains with.

Names read from files reach generated code (C comments, Makefiles, Python,
HTML, JSON), so they are held to a strict pattern as well (:func:`check_name`).
"""

from __future__ import annotations

import json
import math
import numbers
import os
import re
import stat
import zipfile
from pathlib import Path

from .errors import LimitError

#: LMU memory order q (Legendre polynomials per memory dimension)
MAX_ORDER = 1024
#: LMU memory dimensions d
MAX_MEMORY_D = 1024
#: theta, in steps: at least half a step, at most 100 x the largest order (long windows of low orders
#: are legitimate: order 8 with theta 2000 is a smooth summary of 2000 steps)
MIN_THETA = 0.5
MAX_THETA = 102_400.0
#: features of any tensor (input, dense units, hidden units)
MAX_FEATURES = 65_536
#: sequence length a model declares
MAX_SEQ_LEN = 1_000_000
#: Runge-Kutta substeps per sample
MAX_SUBSTEPS = 4096
#: length of a stored impulse-response or FIR kernel
MAX_KERNEL_LEN = 100_000
#: a convolution kernel's extent in frames or bands, its band padding and pooling
MAX_CONV_KERNEL = 64
#: layers in a chain
MAX_LAYERS = 256
#: elements of all arrays of one model (float64: 1 GiB)
MAX_MODEL_ELEMENTS = 1 << 27
#: bytes a conversion may plan to allocate for one LMU layer's realizations
MAX_PLANNED_BYTES = 1 << 30
#: the fold keeps a layer's reference impulse response in memory up to this size (folding, budget)
CACHE_BYTES = 256 << 20
#: JSON text read from a model file, and its nesting depth
MAX_JSON_BYTES = 64 << 20
MAX_JSON_DEPTH = 64
#: zip archives (.keras, .npz): members and their total uncompressed size
MAX_ZIP_MEMBERS = 4096
MAX_ZIP_BYTES = 512 << 20
MAX_ZIP_RATIO = 1000  # a member may expand at most this much (zip bombs expand 1000x and more)
#: names of graphs and layers
MAX_NAME_LEN = 128
NAME_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*\Z")
#: free-form metadata of a graph, as JSON
MAX_METADATA_BYTES = 64 << 10


def check_name(name, where: str) -> str:
    """``name`` if it is a safe identifier-like string (letters, digits, ``_ . -``), else :class:`LimitError`."""
    if not isinstance(name, str):
        raise LimitError(f"{where}: a name must be a string, got {type(name).__name__}")
    if not name or len(name) > MAX_NAME_LEN or not NAME_PATTERN.match(name):
        shown = name if len(name) <= 40 else name[:40] + "..."
        raise LimitError(
            f"{where}: name {shown!r} is not allowed: names are 1-{MAX_NAME_LEN} characters of letters, "
            f"digits, '_', '.' and '-' (not starting with '.' or '-'); rename it in the model"
        )
    return name


def safe_name(raw, fallback: str = "model") -> str:
    """A name that passes :func:`check_name`, made from ``raw`` (for converters of foreign formats, whose
    names may hold any character): other characters become ``_``, and it is cut to half the allowed length
    (passes derive names such as ``NAME_softmax`` from it)."""
    s = re.sub(r"[^A-Za-z0-9_.\-]", "_", str(raw) if raw is not None else "")[: MAX_NAME_LEN // 2]
    s = s.lstrip(".-")
    return s or fallback


def check_int(value, lo: int, hi: int, what: str) -> int:
    """An integer in ``[lo, hi]``, or :class:`LimitError` naming the limit."""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not isinstance(value, numbers.Integral)
        and (not math.isfinite(float(value)) or float(value) != math.floor(value))
    ):
        raise LimitError(f"{what}: expected an integer in [{lo}, {hi}], got {value!r}")
    v = int(value) if isinstance(value, numbers.Integral) else int(math.floor(value))  # floor: exact for Fraction
    if not lo <= v <= hi:
        raise LimitError(f"{what} = {v} is outside the supported range [{lo}, {hi}] (limits: docs/security.md)")
    return v


def check_theta(theta, order: int, what: str) -> float:
    """theta within ``[MIN_THETA, MAX_THETA]``, or :class:`LimitError`."""
    try:
        t = float(theta)
    except (TypeError, ValueError):
        raise LimitError(f"{what}: theta must be a number, got {theta!r}") from None
    hi = MAX_THETA
    if not math.isfinite(t) or not MIN_THETA <= t <= hi:
        raise LimitError(
            f"{what}: theta = {theta!r} steps is outside the supported range [{MIN_THETA:g}, {hi:g}] (docs/security.md)"
        )
    return t


def check_regular_file(path, what: str) -> Path:
    """``path`` if it names a regular file (not a FIFO, device, socket or directory), else :class:`LimitError`."""
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise LimitError(f"{what}: no such file {str(p)!r}") from None
    except OSError as e:
        raise LimitError(f"{what}: {str(p)!r} cannot be read ({e.strerror or e})") from None
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file (a FIFO, device or socket)"
        raise LimitError(f"{what}: {str(p)!r} is {kind}; give the path of a model or data file")
    return p


def check_zip(z: zipfile.ZipFile, where: str) -> None:
    """Refuse archives with too many members, members that expand too much, or too much data in all."""
    infos = z.infolist()
    if len(infos) > MAX_ZIP_MEMBERS:
        raise LimitError(f"{where}: the archive has {len(infos)} members, more than the limit {MAX_ZIP_MEMBERS}")
    total = 0
    for info in infos:
        total += info.file_size
        if info.file_size > MAX_ZIP_RATIO * max(info.compress_size, 1024):
            raise LimitError(
                f"{where}: member {info.filename[:60]!r} expands from {info.compress_size} to "
                f"{info.file_size} bytes (a zip bomb?); refusing it"
            )
    if total > MAX_ZIP_BYTES:
        raise LimitError(f"{where}: the archive expands to {total} bytes, more than the limit {MAX_ZIP_BYTES}")


def json_depth(text: str) -> int:
    """Deepest nesting of ``[`` / ``{`` in JSON text (strings skipped), without recursion."""
    depth = deepest = 0
    in_str = esc = False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_JSON_DEPTH:
                    return deepest
        elif ch in "]}":
            depth -= 1
    return deepest


def _no_constants(name):
    raise ValueError(f"{name} is not valid JSON")


def load_json(data, where: str):
    """Parse JSON from a model file within the size and depth limits; NaN / Infinity are refused.
    Errors are :class:`LimitError` (limits) or ``ValueError`` (malformed) for the caller to word."""
    if isinstance(data, (bytes, bytearray)):
        if len(data) > MAX_JSON_BYTES:
            raise LimitError(f"{where}: {len(data)} bytes of JSON, more than the limit {MAX_JSON_BYTES}")
        data = bytes(data).decode("utf-8")
    if len(data) > MAX_JSON_BYTES:
        raise LimitError(f"{where}: {len(data)} characters of JSON, more than the limit {MAX_JSON_BYTES}")
    if json_depth(data) > MAX_JSON_DEPTH:
        raise LimitError(f"{where}: JSON nested deeper than {MAX_JSON_DEPTH} levels; refusing it")
    return json.loads(data, parse_constant=_no_constants)


def check_metadata(meta, where: str) -> dict:
    """Graph metadata must be a small JSON object (it is data, written to JSON files only)."""
    if not isinstance(meta, dict):
        raise LimitError(f"{where}: metadata must be a JSON object, got {type(meta).__name__}")
    try:
        text = json.dumps(meta, allow_nan=False, default=_plain)
    except (TypeError, ValueError, RecursionError) as e:
        raise LimitError(f"{where}: metadata is not plain JSON ({e})") from None
    if len(text) > MAX_METADATA_BYTES:
        raise LimitError(f"{where}: metadata is {len(text)} bytes of JSON, more than the limit {MAX_METADATA_BYTES}")
    return meta


def _plain(o):
    import numpy as np

    if isinstance(o, (np.integer, np.floating, np.bool_)):
        return o.item()
    if isinstance(o, (tuple, set, frozenset)):
        return list(o)
    raise TypeError(f"{type(o).__name__} is not JSON")


def check_onnx(data: bytes, where: str):
    """Parse an ONNX model from ``data`` (bytes already read and checked) and refuse in one line what lmu-edge
    never writes and a runtime would follow out of those bytes: tensors whose data lives in another file
    (``data_location`` EXTERNAL: ONNX Runtime reads them from the working directory or any path the model
    names), in the graph, its sparse initializers, node attributes and sub-graphs. Returns the model."""
    from .errors import ArtifactError

    try:
        import onnx
    except ImportError:  # the runtime that needs the check is missing too: its own error says so
        return None
    try:
        model = onnx.load_from_string(data)
    except Exception as e:  # noqa: BLE001 (protobuf's DecodeError, onnx's ValueError: damaged bytes)
        raise ArtifactError(f"{where}: not a readable ONNX model ({' '.join(str(e).split())[:120]})") from None

    def tensors(graph):
        yield from graph.initializer
        for sparse in graph.sparse_initializer:
            yield from (sparse.values, sparse.indices)
        for node in graph.node:
            for a in node.attribute:
                if a.HasField("t"):
                    yield a.t
                yield from a.tensors
                for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                    yield from tensors(g)

    for t in tensors(model.graph):
        if t.data_location == onnx.TensorProto.EXTERNAL or len(t.external_data):
            raise ArtifactError(
                f"{where}: tensor {t.name[:60]!r} keeps its data in another file (ONNX external data), which "
                f"lmu-edge never writes and does not follow; convert the model again"
            )
    return model
