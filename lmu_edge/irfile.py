"""The IR file format: one ``.npz`` archive holding a JSON header and plain arrays.

Spec (version 1; see docs/ir-format.md for the full text):

* The file is a zip archive as written by ``numpy.savez`` (uncompressed).
* The member ``header.json.npy`` is a 1-D ``uint8`` array: the UTF-8 bytes of
  a JSON object ``{"format": "lmu-edge-ir", "version": 1, "graph": NODE}``.
* A NODE is a JSON object with a ``"type"`` key (``graph``, ``dense``, ``lmu``,
  ...; one per class of :mod:`lmu_edge.ir`) and one key per field. Scalars and
  strings are plain JSON; a nested node is a NODE; an array is
  ``{"array": KEY, "shape": [...], "dtype": "float32"|"float64"}`` and lives in
  the member ``KEY.npy`` (a standard ``.npy`` file).
* Readers refuse unknown versions, unknown node types, unknown or missing
  fields, missing arrays, arrays whose shape or dtype disagree with the
  header, and any object array. Nothing is ever unpickled.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import tokenize
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from . import ir, limits, qir  # qir also registers the quantized node types
from .errors import IRFormatError, LmuEdgeError

HEADER_KEY = "header.json"
HINT_REEXPORT = "re-export the model with lmu_edge.save(graph, path)"


def _encode(node, prefix: str, arrays: dict) -> dict:
    out = {"type": node.TYPE}
    for f in dataclasses.fields(node):
        v = getattr(node, f.name)
        key = f"{prefix}.{f.name}"
        if isinstance(v, np.ndarray):
            arrays[key] = v
            out[f.name] = {"array": key, "shape": list(v.shape), "dtype": str(v.dtype)}
        elif dataclasses.is_dataclass(v):
            out[f.name] = _encode(v, key, arrays)
        elif isinstance(v, (list, tuple)) and any(dataclasses.is_dataclass(e) for e in v):
            out[f.name] = [_encode(item, f"{key}{i}", arrays) for i, item in enumerate(v)]
        elif isinstance(v, (np.integer, np.floating)):
            out[f.name] = v.item()
        else:
            out[f.name] = v
    return out


def _decode(obj, arrays, where: str):
    if not isinstance(obj, dict) or "type" not in obj:
        raise IRFormatError(f"{where}: expected a node object with a 'type', got {type(obj).__name__}")
    if not isinstance(obj["type"], str):
        raise IRFormatError(f"{where}: a node's 'type' must be a string, got {type(obj['type']).__name__}")
    cls = ir.NODE_TYPES.get(obj["type"])
    if cls is None:
        raise IRFormatError(f"{where}: unknown node type {obj['type']!r}; known: {', '.join(sorted(ir.NODE_TYPES))}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    extra = set(obj) - set(fields) - {"type"}
    if extra:
        raise IRFormatError(f"{where}: unknown field(s) {', '.join(sorted(extra))} for a {obj['type']!r} node")
    kwargs = {}
    for name, f in fields.items():
        w = f"{where}.{name}"
        if name not in obj:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise IRFormatError(f"{w}: required field is missing")
            continue
        v = obj[name]
        if isinstance(v, dict) and "array" in v:
            key = v["array"]
            if not isinstance(key, str) or key not in arrays:
                raise IRFormatError(f"{w}: array {key!r} is missing from the file")
            a = arrays[key]
            shape = v.get("shape", [])  # any JSON value in a damaged header: compared, never iterated
            if not isinstance(shape, list) or list(a.shape) != shape or str(a.dtype) != v.get("dtype"):
                raise IRFormatError(
                    f"{w}: array {key!r} has shape {a.shape} and dtype {a.dtype}, "
                    f"the header says {repr(shape)[:40]} and {repr(v.get('dtype'))[:40]}"
                )
            v = a
        elif isinstance(v, dict) and "type" in v:
            v = _decode(v, arrays, w)
        elif name in ("layers", "parts"):
            if not isinstance(v, list):
                raise IRFormatError(f"{w}: expected a list of nodes")
            v = [_decode(item, arrays, f"{w}[{i}]") for i, item in enumerate(v)]
        kwargs[name] = v
    try:
        return cls(**kwargs)
    except LmuEdgeError as e:
        raise IRFormatError(f"{where}: {e}") from None
    except (
        TypeError,
        ValueError,
        OverflowError,
        AttributeError,
        IndexError,
        KeyError,
        ZeroDivisionError,
        np.linalg.LinAlgError,
    ) as e:
        raise IRFormatError(f"{where}: malformed {obj['type']!r} node ({type(e).__name__}: {e})") from None


def graph_to_header(graph: ir.Graph) -> tuple[dict, dict]:
    """``(header, arrays)`` of a graph, as stored in the file."""
    arrays: dict = {}
    body = _encode(graph, "g", arrays)
    return {"format": ir.IR_FORMAT, "version": ir.IR_VERSION, "graph": body}, arrays


def save(graph: ir.Graph, path) -> Path:
    """Write ``graph`` to ``path`` (an ``.npz`` IR file), atomically."""
    if not isinstance(graph, ir.Graph):
        raise TypeError(f"save() expects an lmu_edge.ir.Graph, got {type(graph).__name__}")
    path = Path(path)
    header, arrays = graph_to_header(graph)
    text = json.dumps(header, indent=1, sort_keys=True)
    members: dict[str, Any] = {HEADER_KEY: np.frombuffer(text.encode("utf-8"), dtype=np.uint8)}
    members.update(arrays)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, **members)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the file the user's usual mode
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def load_ir(path) -> ir.Graph:
    """Read an IR file; every defect is an :class:`IRFormatError` that names the file."""
    path = Path(path)
    hint = "re-export it with lmu_edge.save(graph, path)"
    try:
        limits.check_regular_file(path, "IR file")
        with zipfile.ZipFile(path) as zf:  # sizes checked before anything is decompressed
            limits.check_zip(zf, str(path))
            members = zf.namelist()
        bad = [m for m in members if not m.endswith(".npy")]
        if bad:
            raise IRFormatError(
                f"{path}: member {bad[0][:60]!r} is not a .npy array; an IR file holds only .npy members; {hint}"
            )
        with np.load(path, allow_pickle=False) as z:
            names = list(z.files)
            if HEADER_KEY not in names:
                raise IRFormatError(f"{path}: not an lmu-edge IR file (no {HEADER_KEY} member); {hint}")
            arrays = {k: z[k] for k in names}
    except LmuEdgeError:
        raise
    except FileNotFoundError:
        raise IRFormatError(f"{path}: no such file") from None
    except MemoryError:
        raise IRFormatError(f"{path}: an array is too large to load; {hint}") from None
    except (
        zipfile.BadZipFile,
        ValueError,
        EOFError,
        OSError,
        KeyError,
        NotImplementedError,
        RuntimeError,
        zlib.error,
        tokenize.TokenError,  # numpy's reading of a damaged .npy header (an unclosed bracket)
    ) as e:
        raise IRFormatError(f"{path}: not a readable lmu-edge IR file ({type(e).__name__}: {e}); {hint}") from None
    if sum(int(a.size) for a in arrays.values()) > limits.MAX_MODEL_ELEMENTS:
        raise IRFormatError(
            f"{path}: the arrays hold more than {limits.MAX_MODEL_ELEMENTS} numbers in all, "
            f"more than any supported model"
        )
    raw = arrays.pop(HEADER_KEY)
    try:
        if raw.dtype != np.uint8 or raw.ndim != 1:
            raise ValueError("header is not a byte string")
        header = limits.load_json(raw.tobytes(), f"{path}: the JSON header")
    except LmuEdgeError:
        raise
    except (ValueError, UnicodeDecodeError) as e:
        raise IRFormatError(f"{path}: the JSON header is malformed ({e}); {hint}") from None
    if not isinstance(header, dict) or header.get("format") != ir.IR_FORMAT:
        raise IRFormatError(f"{path}: the header does not say format {ir.IR_FORMAT!r}; {hint}")
    version = header.get("version")
    if version != ir.IR_VERSION:
        raise IRFormatError(
            f"{path}: IR version {version!r} is not supported by this lmu-edge "
            f"(it reads version {ir.IR_VERSION}); upgrade lmu-edge or re-export the model"
        )
    for k, a in arrays.items():
        if a.dtype.kind not in "fiu":
            raise IRFormatError(
                f"{path}: array {k!r} has dtype {a.dtype}; IR arrays are numbers "
                f"(float32 / float64, or integers in quantized layers)"
            )
    graph = _decode(header.get("graph"), arrays, f"{path}: graph")
    if not isinstance(graph, ir.Graph):
        raise IRFormatError(f"{path}: the top node is a {type(graph).__name__}, not a graph")
    limits.check_metadata(graph.metadata, f"{path}: graph metadata")
    for layer in graph.layers:
        if getattr(layer, "QUANTIZED", False):
            try:
                qir.validate(layer, f"layer {layer.name!r}")
            except LmuEdgeError as e:
                raise IRFormatError(f"{path}: {e}; {hint}") from None
    try:
        qir.check_widths(graph.layers)
    except LmuEdgeError as e:
        raise IRFormatError(f"{path}: {e}; {hint}") from None
    return graph
