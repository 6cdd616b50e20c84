"""Read PyTorch checkpoints of :mod:`lmu_edge.torch` models into an IR graph.

A checkpoint is two files with the same stem:

* ``NAME.safetensors`` (recommended) or ``NAME.pt`` / ``NAME.pth``: the weights,
  keyed as ``torch.nn.Sequential.state_dict()`` keys them (``"0.input_encoders"``);
* ``NAME.json``: the layer configuration that :func:`lmu_edge.torch.save_checkpoint`
  writes (``{"format": "lmu-edge-torch", "version": 1, "input_size": F, "layers": [...]}``).

Safetensors files are parsed here with numpy alone (an 8-byte little-endian
header length, a JSON header, raw little-endian tensor bytes): nothing in the
file can run code, and torch is not needed. ``float16`` and ``bfloat16`` tensors
are converted to ``float32``, which holds every one of their values exactly;
integer and boolean tensors are refused. A ``.pt`` file is a pickle: it is read
only through ``torch.load(weights_only=True)`` (torch's restricted unpickler,
which refuses any object but tensors and plain containers), never unpickled
otherwise, and needs torch installed.
"""

from __future__ import annotations

import json
import math
import struct
import zipfile
from pathlib import Path

import numpy as np

from .. import ir, limits, lti
from ..errors import MissingDependencyError, ModelFormatError, ShapeError, UnsupportedLayerError

CONFIG_FORMAT = "lmu-edge-torch"
CONFIG_VERSION = 1
MAX_HEADER = 100 * 1024 * 1024

#: safetensors dtype -> numpy dtype (little endian); BF16 is handled by hand
_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2"}
_ACTIVATIONS = {
    "relu": "relu",
    "relu6": "relu6",
    "tanh": "tanh",
    "sigmoid": "sigmoid",
    "softmax": "softmax",
    "silu": "silu",
    "linear": "linear",
    "identity": "linear",  # torch.nn.Identity (lmu_edge.torch.config_of); "linear" is read as a Linear layer
}

REQUIRED = object()
#: config keys of each layer type -> default (REQUIRED: must be given)
LMU_KEYS = {
    "type": REQUIRED,
    "input_size": REQUIRED,
    "memory_d": REQUIRED,
    "order": REQUIRED,
    "theta": REQUIRED,
    "discretizer": "zoh",
    "trainable_theta": False,
    "use_bias": False,
    "hidden_units": None,
    "hidden_activation": "tanh",
    "hidden_bias": True,
    "input_to_hidden": False,
    "return_sequences": True,
}
LINEAR_KEYS = {"type": REQUIRED, "in_features": REQUIRED, "out_features": REQUIRED, "bias": True}
ACTIVATION_KEYS = {"type": REQUIRED}


def config_path(path) -> Path:
    """The JSON config that goes with a weights file: same folder, same stem, ``.json``."""
    p = Path(path)
    return p.with_suffix(".json")


# --- safetensors ---------------------------------------------------------------------------------


def read_safetensors(path) -> dict:
    """Tensors of a safetensors file as float32/float64 numpy arrays (fp16/bf16 widened to float32)."""
    p = limits.check_regular_file(path, "model")
    size = p.stat().st_size
    if size > 8 + MAX_HEADER + 8 * limits.MAX_MODEL_ELEMENTS:
        raise limits.LimitError(
            f"{p}: {size} bytes, more than a model within the limits can hold "
            f"({limits.MAX_MODEL_ELEMENTS} weights); see docs/security.md"
        )
    data = p.read_bytes()
    if len(data) < 8:
        raise ModelFormatError(f"{p}: not a safetensors file (shorter than its 8-byte header length)")
    (n,) = struct.unpack("<Q", data[:8])
    if n > min(MAX_HEADER, len(data) - 8):
        raise ModelFormatError(f"{p}: not a safetensors file (header length {n} does not fit the file)")
    try:
        header = limits.load_json(bytes(data[8 : 8 + n]), f"{p}: header")
    except limits.LimitError:
        raise
    except (ValueError, RecursionError) as e:
        raise ModelFormatError(f"{p}: not a safetensors file (header is not JSON: {e})") from None
    if not isinstance(header, dict):
        raise ModelFormatError(f"{p}: not a safetensors file (header is not a JSON object)")
    body = memoryview(data)[8 + n :]
    out = {}
    for key, spec in header.items():
        if key == "__metadata__":
            continue
        where = f"{p}: tensor {key!r}"
        if not isinstance(spec, dict) or set(spec) != {"dtype", "shape", "data_offsets"}:
            raise ModelFormatError(f"{where}: malformed entry (needs dtype, shape, data_offsets)")
        dt, shape, offs = spec["dtype"], spec["shape"], spec["data_offsets"]
        if not (isinstance(shape, list) and all(isinstance(s, int) and s >= 0 for s in shape)):
            raise ModelFormatError(f"{where}: malformed shape {shape!r}")
        if not (
            isinstance(offs, list)
            and len(offs) == 2
            and all(isinstance(o, int) for o in offs)
            and 0 <= offs[0] <= offs[1] <= len(body)
        ):
            raise ModelFormatError(
                f"{where}: data offsets {offs!r} lie outside the file (truncated or damaged); save the weights again"
            )
        raw = body[offs[0] : offs[1]]
        if len(shape) > 8 or any(s > limits.MAX_MODEL_ELEMENTS for s in shape):
            raise ModelFormatError(f"{where}: shape {shape!r} is not a layer's weights")
        count = math.prod(shape)
        if dt == "BF16":
            if len(raw) != 2 * count:
                raise ModelFormatError(f"{where}: {len(raw)} bytes do not hold shape {shape} of BF16")
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            arr = bits.view(np.float32).reshape(shape)
        elif dt in _DTYPES:
            size = np.dtype(_DTYPES[dt]).itemsize
            if len(raw) != size * count:
                raise ModelFormatError(f"{where}: {len(raw)} bytes do not hold shape {shape} of {dt}")
            arr = np.frombuffer(raw, dtype=_DTYPES[dt]).reshape(shape)
            arr = arr.astype(np.float32 if dt == "F16" else arr.dtype.newbyteorder("="))
        else:
            raise ModelFormatError(
                f"{where}: dtype {dt} is not supported; save float64, float32, float16 or "
                f"bfloat16 weights (16-bit ones are widened to float32 exactly)"
            )
        out[key] = np.array(arr, copy=True)
    return out


def write_safetensors(path, tensors: dict) -> None:
    """Write float32/float64 numpy arrays as a safetensors file (the format's own layout)."""
    header, chunks, off = {}, [], 0
    for key, a in tensors.items():
        a = np.array(a, order="C", copy=True)
        code = {np.dtype(np.float64): "F64", np.dtype(np.float32): "F32"}.get(a.dtype)
        if code is None:
            raise ShapeError(f"tensor {key!r}: dtype {a.dtype} cannot be saved; use float32 or float64")
        b = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[key] = {"dtype": code, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        chunks.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    Path(path).write_bytes(struct.pack("<Q", len(h)) + h + b"".join(chunks))


def read_pt(path) -> dict:
    """A ``torch.save``d state dict, read only with ``torch.load(weights_only=True)``."""
    p = Path(path)
    try:
        import torch
    except ImportError:
        raise MissingDependencyError(
            f"{p}: a .pt checkpoint is a pickle and is only read through torch.load(weights_only=True), but torch "
            f"is not installed; install it with: pip install 'lmu-edge[torch]', or save the weights as "
            f".safetensors (lmu_edge.torch.save_checkpoint)"
        ) from None
    limits.check_regular_file(p, "model")
    try:
        with zipfile.ZipFile(p) as z:  # torch.save writes a zip: members checked before torch opens it
            limits.check_zip(z, str(p))
    except zipfile.BadZipFile:
        pass  # the legacy format: torch.load refuses or reads it, as it can
    try:
        sd = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelFormatError(
            f"{p}: refused by torch.load(weights_only=True) (only tensors are allowed; nothing "
            f"in the file was run): {first[:300]}"
        ) from None
    if not isinstance(sd, dict) or not all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in sd.items()):
        raise ModelFormatError(f"{p}: expected a state dict (names -> tensors), got {type(sd).__name__}")
    out = {}
    for k, v in sd.items():
        if not v.is_floating_point():
            raise ModelFormatError(f"{p}: tensor {k!r}: dtype {v.dtype} is not supported; save float weights")
        v = v.detach().cpu()
        if v.dtype in (torch.float16, torch.bfloat16):
            v = v.to(torch.float32)
        out[k] = v.numpy().copy()
    return out


# --- config + tensors -> IR -----------------------------------------------------------------------


def read_config(path) -> dict:
    """The JSON config beside a weights file."""
    c = config_path(path)
    if not c.exists():
        raise ModelFormatError(
            f"{path}: its config {c.name} is missing; write it with "
            f"lmu_edge.torch.save_checkpoint, which saves both files"
        )
    limits.check_regular_file(c, f"{path}: config")
    if c.stat().st_size > limits.MAX_JSON_BYTES:
        raise limits.LimitError(f"{c}: {c.stat().st_size} bytes of JSON, more than the limit {limits.MAX_JSON_BYTES}")
    try:
        cfg = limits.load_json(c.read_bytes(), str(c))
    except limits.LimitError:
        raise
    except (ValueError, RecursionError) as e:
        raise ModelFormatError(f"{c}: not a JSON file ({e})") from None
    return cfg


def _fields(spec: dict, keys: dict, where: str) -> dict:
    unknown = sorted(set(spec) - set(keys))
    if unknown:
        raise ModelFormatError(
            f"{where}: unknown config key(s) {', '.join(map(repr, unknown))}; known: {', '.join(sorted(keys))}"
        )
    missing = [k for k, v in keys.items() if v is REQUIRED and k not in spec]
    if missing:
        raise ModelFormatError(f"{where}: missing config key(s) {', '.join(map(repr, missing))}")
    return {k: spec.get(k, v) for k, v in keys.items()}


def _int(v, where, name, minimum=1):
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise ModelFormatError(f"{where}: {name} must be an integer >= {minimum}, got {v!r}")
    return v


def _bool(v, where, name):
    if not isinstance(v, bool):
        raise ModelFormatError(f"{where}: {name} must be true or false, got {v!r}")
    return v


class _Tensors:
    def __init__(self, tensors: dict, where: str):
        self.t, self.where = tensors, where
        self.used: set[str] = set()

    def get(self, key, shape):
        if key not in self.t:
            raise ModelFormatError(f"{self.where}: tensor {key!r} is missing (expected shape {tuple(shape)})")
        a = self.t[key]
        if tuple(a.shape) != tuple(shape):
            raise ShapeError(f"{self.where}: tensor {key!r} has shape {tuple(a.shape)}, expected {tuple(shape)}")
        self.used.add(key)
        return a


def build_graph(cfg, tensors: dict, where: str = "checkpoint", name: str = "torch_model") -> ir.Graph:
    """An IR graph (parallel form) from a config and its tensors (numpy, keyed ``"i.param"``)."""
    if not isinstance(cfg, dict):
        raise ModelFormatError(f"{where}: config must be a JSON object")
    top = _fields(
        cfg,
        {
            "format": REQUIRED,
            "version": REQUIRED,
            "input_size": REQUIRED,
            "layers": REQUIRED,
            "name": name,
            "seq_len": None,
        },
        where,
    )
    if top["format"] != CONFIG_FORMAT:
        raise ModelFormatError(f"{where}: config format is {top['format']!r}, expected {CONFIG_FORMAT!r}")
    if top["version"] != CONFIG_VERSION:
        raise ModelFormatError(
            f"{where}: config version {top['version']!r} is not supported (this reader knows "
            f"{CONFIG_VERSION}); upgrade lmu-edge"
        )
    if not isinstance(top["layers"], list) or not top["layers"]:
        raise ModelFormatError(f"{where}: 'layers' must be a non-empty list")
    if len(top["layers"]) > limits.MAX_LAYERS:
        raise limits.LimitError(f"{where}: {len(top['layers'])} layers, more than the limit {limits.MAX_LAYERS}")
    n = n0 = _int(top["input_size"], where, "input_size")
    seq_len = top["seq_len"] if top["seq_len"] is None else _int(top["seq_len"], where, "seq_len")
    T = _Tensors(tensors, where)
    layers: list[ir.Layer] = []
    for i, spec in enumerate(top["layers"]):
        w = f"{where}: layer {i}"
        if not isinstance(spec, dict) or "type" not in spec:
            raise ModelFormatError(f"{w}: each layer must be a JSON object with a 'type'")
        kind = spec["type"]
        layer: ir.Layer
        if kind == "lmu":
            layer = _lmu(i, _fields(spec, LMU_KEYS, w), n, T, w)
        elif kind == "linear":
            f = _fields(spec, LINEAR_KEYS, w)
            fi, fo = _int(f["in_features"], w, "in_features"), _int(f["out_features"], w, "out_features")
            if fi != n:
                raise ShapeError(f"{w}: in_features is {fi} but the layer before gives {n} features")
            K = T.get(f"{i}.weight", (fo, fi)).T
            b = T.get(f"{i}.bias", (fo,)) if _bool(f["bias"], w, "bias") else None
            layer = ir.Dense(f"dense_{i}", K, b)
        elif kind in _ACTIVATIONS:
            _fields(spec, ACTIVATION_KEYS, w)
            layer = ir.Activation(f"{kind}_{i}", _ACTIVATIONS[kind])
        else:
            raise UnsupportedLayerError(
                f"{w}: unknown layer type {kind!r}; known: lmu, linear, {', '.join(_ACTIVATIONS)}"
            )
        layers.append(layer)
        n = layer.out_features(n)
    extra = sorted(set(tensors) - T.used)
    if extra:
        raise ModelFormatError(
            f"{where}: tensor(s) {', '.join(map(repr, extra[:5]))} are not used by any layer "
            f"of the config; the config and the weights do not belong together"
        )
    return ir.Graph(
        limits.safe_name(top["name"], "torch_model"), n0, tuple(layers), seq_len, {"source": "lmu_edge.torch"}
    )


def _lmu(i, f, n_in, T, w) -> ir.LMU:
    if _int(f["input_size"], w, "input_size") != n_in:
        raise ShapeError(f"{w}: input_size is {f['input_size']} but the layer before gives {n_in} features")
    d, q = _int(f["memory_d"], w, "memory_d"), _int(f["order"], w, "order")
    disc = f["discretizer"]
    if disc not in lti.DISCRETIZERS:
        raise ModelFormatError(f"{w}: discretizer {disc!r} is not supported; known: {', '.join(lti.DISCRETIZERS)}")
    theta = f["theta"]
    if _bool(f["trainable_theta"], w, "trainable_theta"):
        theta = float(T.get(f"{i}.theta", ()))
    if isinstance(theta, bool) or not isinstance(theta, (int, float)) or not (np.isfinite(theta) and theta > 0):
        raise ModelFormatError(f"{w}: theta must be a positive number of steps, got {theta!r}")
    enc = T.get(f"{i}.input_encoders", (n_in, d))
    bias = T.get(f"{i}.encoder_bias", (d,)) if _bool(f["use_bias"], w, "use_bias") else None
    i2h = _bool(f["input_to_hidden"], w, "input_to_hidden")
    hidden = None
    if f["hidden_units"] is not None:
        units = _int(f["hidden_units"], w, "hidden_units")
        act = f["hidden_activation"]
        if act not in _ACTIVATIONS:
            raise ModelFormatError(f"{w}: hidden_activation {act!r} is not supported; known: {', '.join(_ACTIVATIONS)}")
        z = d * q + (n_in if i2h else 0)
        hb = T.get(f"{i}.hidden_bias", (units,)) if _bool(f["hidden_bias"], w, "hidden_bias") else None
        hidden = ir.HiddenDense(T.get(f"{i}.hidden_kernel", (z, units)), hb, act)
    return ir.LMU(
        f"lmu_{i}",
        memory_d=d,
        order=q,
        theta=float(theta),
        discretizer=disc,
        input_encoders=enc,
        memory=ir.ImpulseResponse(note="lmu_edge.torch layer: the exact (analytic) response"),
        encoder_bias=bias,
        hidden=hidden,
        input_to_hidden=i2h,
        return_sequences=_bool(f["return_sequences"], w, "return_sequences"),
    )


def load(path) -> ir.Graph:
    """Read ``NAME.safetensors`` (or ``NAME.pt`` / ``.pth``) and ``NAME.json`` into an IR graph."""
    p = Path(path)
    cfg = read_config(p)
    tensors = read_pt(p) if p.suffix.lower() in (".pt", ".pth") else read_safetensors(p)
    stem = p.name[: -len(p.suffix)] if p.suffix else p.name
    return build_graph(cfg, tensors, where=str(p), name=stem)
