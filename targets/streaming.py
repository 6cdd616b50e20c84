"""The streaming contract of a step model, written into the model file itself (ONNX ``metadata_props``
and ``doc_string``, TFLite ``metadata`` beside the ``step`` signature; read back by
``lmu-edge inspect FILE``).

A streaming runtime needs to know, without lmu-edge: which inputs and outputs carry state, in which
order, with which shapes and dtypes, what the state starts as, how long the sequences were that the
model was trained on, whether every step's output is an answer or only the last one, and what the
outputs are (probabilities, logits or a regression), how the interface is quantized, and that the
batch is open (dimension 0 of every input and output: one row per stream, each row its own state)."""

from __future__ import annotations

import json
from typing import Optional

from .. import ir
from . import _stepplan

#: the metadata key that holds the contract as JSON
KEY = "lmu_edge.streaming_contract"
FORMAT = "lmu-edge-streaming-contract"


def last_activation(graph: ir.Graph) -> str:
    """The activation that produces the output: the last layer's (linear if it has none)."""
    for layer in reversed(graph.layers):
        act = getattr(layer, "activation", None)
        if act is not None:
            return act if act else "linear"
        if isinstance(layer, (ir.Dense, ir.LMU)):
            return "linear"
    return "linear"


def output_meaning(graph: ir.Graph) -> str:
    """What the output numbers are, in words."""
    act = last_activation(graph)
    if act == "softmax":
        return "class probabilities (softmax over the outputs; argmax is the class)"
    if act == "sigmoid":
        return "independent probabilities in [0, 1] (sigmoid per output)"
    if act == "tanh":
        return "values in [-1, 1] (tanh): a regression or scores"
    return f"unbounded values ({act}): logits or a regression"


def sequence_meaning(graph: ir.Graph) -> str:
    """When an output is meaningful."""
    n = f"{graph.seq_len}-step" if graph.seq_len else "variable-length"
    if graph.output_is_sequence:
        return f"trained on {n} sequences; the output of every step is an answer (a sequence model)"
    return (
        f"trained on {n} sequences; only the output at the last step of a sequence is the answer "
        f"(the model's predict returns that one): reset the state at each sequence's start"
    )


def contract(graph: ir.Graph, quantize: str, *, interface: str, extra: Optional[dict] = None) -> dict:
    """The contract of the step model ``step`` and, where there is one, the sequence model of ``graph``
    (folded, recurrent); ``interface``: how inputs and outputs are typed (e.g. "float32")."""
    spec = _stepplan.state_spec(graph)
    layer_names = [layer.name for layer in graph.layers]
    states = [
        {
            "input": n,
            "output": f"{n}_out",
            "shape": [1, size],
            "dtype": "float32",
            "initial": "zeros",
            "layer": layer_names[i],
            "kind": kind,
        }
        for n, i, kind, size in spec
    ]
    out = {
        "format": FORMAT,
        "version": 1,
        "model": graph.name,
        "quantize": quantize,
        "interface": interface,
        "input": {"name": "x", "shape": [1, graph.input_features], "dtype": "float32"},
        "output": {"name": "y", "shape": [1, graph.output_features], "dtype": "float32"},
        "input_order": ["x"] + [s["input"] for s in states],
        "output_order": ["y"] + [s["output"] for s in states],
        "states": states,
        "seq_len": graph.seq_len,
        "every_step_is_an_answer": bool(graph.output_is_sequence),
        "sequence": sequence_meaning(graph),
        "outputs_are": output_meaning(graph),
        "batch": (
            "dimension 0 of every input and output is open: one row per stream, each row with its own "
            "state rows; shapes here are for one stream"
        ),
        "usage": (
            "feed x and every state input (zeros at a sequence's start); read y and the state outputs; "
            "feed each state output back as the same-named state input at the next step"
        ),
    }
    out.update(extra or {})
    return out


def describe(c: dict) -> str:
    """The contract as a few lines of text (the ONNX ``doc_string``, ``lmu-edge inspect``)."""
    lines = [
        f"lmu-edge step model of {c['model']!r} ({c['quantize']}; interface {c['interface']}).",
        f"Tensors: {c['input']['name']} {c['input']['shape']} {c['input']['dtype']}"
        + "".join(f", {s['input']} {s['shape']} {s['dtype']}" for s in c["states"])
        + ".",
        f"Inputs, in order: {', '.join(map(str, _listed(c.get('input_order') or [c['input']['name']])))}.",
        f"Outputs, in order: {', '.join(map(str, _listed(c.get('output_order') or [])))}.",
        f"State: {len(c['states'])} vector(s), all zeros at a sequence's start; "
        "feed each <name>_out back as <name> at the next step.",
        f"Batch: {c.get('batch', '1')}.",
        f"Sequence: {c['sequence']}.",
        f"Outputs are {c['outputs_are']}.",
    ]
    quant = [
        f"{e['name']} {e['dtype']} scale {_g(e['scale'])} zero point {e.get('zero_point')}"
        for e in [c["input"], c["output"], *({"name": s["input"], **s} for s in c["states"])]
        if "scale" in e
    ]
    if quant:
        lines.append(f"Quantized interface (real = scale * (q - zero point)): {'; '.join(quant)}.")
    for k in ("sequence_model", "session", "signature", "state_storage"):
        if c.get(k):
            lines.append(f"{k.replace('_', ' ').capitalize()}: {c[k]}.")
    from ..escape import printable

    return "\n".join(printable(line, 4000) for line in lines)  # a file's names reach a terminal: ASCII only


def _listed(v) -> list:
    """``v`` as a list (a damaged file's field may be anything)."""
    return v if isinstance(v, list) else [v]


def _g(v) -> str:
    """A number in 6 significant digits (anything else as it is: the contract of a file is untrusted)."""
    return f"{v:.6g}" if isinstance(v, (int, float)) else str(v)


def with_interface(c: dict, io: list) -> dict:
    """``c`` with the dtype and, for an integer tensor, the quantization of each of its input, output and
    states from ``io``: ``[{"name", "dtype", "scale", "zero_point"}, ...]`` (a TFLite file's interface);
    an integer state starts at its zero point (the real value 0)."""
    by = {e["name"]: e for e in io}

    def fill(entry, name):
        e = by.get(name)
        if e is None:
            return
        entry["dtype"] = e["dtype"]
        if e["dtype"] != "float32":
            entry["scale"], entry["zero_point"] = float(e["scale"]), int(e["zero_point"])

    fill(c["input"], c["input"]["name"])
    fill(c["output"], c["output"]["name"])
    for s in c["states"]:
        fill(s, s["input"])
        if "zero_point" in s:
            s["initial"] = f"zeros: the integer {s['zero_point']} (its zero point) in every entry"
    return c


def read(props: dict) -> Optional[dict]:
    """The contract from a file's key/value metadata (None when it has none)."""
    text = props.get(KEY)
    if text is None:
        return None
    c = json.loads(text)
    return c if isinstance(c, dict) and c.get("format") == FORMAT else None


def read_file(path) -> dict:
    """The contract of a step model file (``.onnx``, ``.tflite``), or a one-line :class:`ModelFormatError` saying why
    there is none. The file is untrusted: a regular file, at most 2 GB (protobuf's own limit), its
    external data never followed, the contract read with the JSON limits."""
    from ..errors import ModelFormatError
    from ..limits import check_regular_file
    from ..registry import require

    p = check_regular_file(path, "inspect")
    if p.suffix.lower() == ".tflite":
        return _read_tflite(p)
    if p.stat().st_size > (2 << 30):
        raise ModelFormatError(f"{p}: larger than 2 GB, more than an ONNX protobuf can be")
    onnx = require("onnx", "onnx", "reading ONNX files")
    try:
        m = onnx.load(str(p), load_external_data=False)
    except Exception as e:  # protobuf's DecodeError and friends: the file is not an ONNX model
        raise ModelFormatError(
            f"{p}: not an ONNX model ({type(e).__name__}); give a step.onnx lmu-edge wrote"
        ) from None
    props = {e.key: e.value for e in m.metadata_props}
    if KEY not in props:
        raise ModelFormatError(
            f"{p}: no lmu-edge streaming contract in its metadata ({KEY}); it was not written by lmu-edge, "
            "or by a version before the contract"
        )
    return parse(props[KEY], p)


def parse(text, p) -> dict:
    """The contract from the metadata text of file ``p`` (untrusted: read with the JSON limits), or a
    one-line :class:`ModelFormatError`."""
    from ..errors import LmuEdgeError, ModelFormatError
    from ..limits import load_json

    try:
        c = load_json(text, f"{p}: {KEY}")
    except LmuEdgeError:
        raise
    except ValueError as e:
        raise ModelFormatError(f"{p}: {KEY} is not valid JSON ({e})") from None
    # every key describe() reads (a damaged or foreign file gets the one-line error, not a KeyError)
    ok = isinstance(c, dict) and c.get("format") == FORMAT and isinstance(c.get("states"), list)
    ok = ok and {"model", "quantize", "interface", "sequence", "outputs_are"} <= set(c)
    ok = ok and all(isinstance(c.get(k), dict) and {"name", "shape", "dtype"} <= set(c[k]) for k in ("input", "output"))
    ok = ok and all(isinstance(s, dict) and {"input", "output", "shape", "dtype"} <= set(s) for s in c["states"])
    if not ok:
        raise ModelFormatError(f"{p}: {KEY} is not an lmu-edge streaming contract")
    return c


#: a TFLite flatbuffer's file identifier (bytes 4-8)
TFLITE_IDENTIFIER = b"TFL3"
#: the largest TFLite file read_file opens (a flatbuffer's 32-bit offsets reach 2 GB)
TFLITE_MAX_BYTES = 2 << 30


def _name(v) -> str:
    return v.decode(errors="replace") if isinstance(v, bytes) else str(v)


def _read_tflite(p) -> dict:
    """The contract of a ``.tflite`` file (a regular file, checked by the caller): a TFLite flatbuffer of at
    most :data:`TFLITE_MAX_BYTES` whose metadata entry :data:`KEY` holds the contract (written by
    ``targets._tflite_contract.stamp``), the JSON read with the limits of :func:`lmu_edge.limits.load_json`."""
    from ..errors import ModelFormatError
    from ..registry import require

    if p.stat().st_size > TFLITE_MAX_BYTES:
        raise ModelFormatError(f"{p}: larger than 2 GB, more than a TFLite flatbuffer can be")
    data = p.read_bytes()  # a Path from check_regular_file
    if len(data) < 8 or data[4:8] != TFLITE_IDENTIFIER:
        raise ModelFormatError(f"{p}: not a TFLite model (no TFL3 identifier); give a model.tflite lmu-edge wrote")
    schema = require("ai_edge_litert.schema_py_generated", "tflite", "reading TFLite files")
    try:
        m = schema.Model.GetRootAs(data, 0)
        found = None
        for k in range(m.MetadataLength()):
            e = m.Metadata(k)
            if _name(e.Name()) == KEY:
                found = m.Buffers(e.Buffer()).DataAsNumpy().tobytes()
    except Exception as e:  # a damaged flatbuffer: offsets outside the file
        raise ModelFormatError(f"{p}: not a readable TFLite model ({type(e).__name__})") from None
    if found is None:
        raise ModelFormatError(
            f"{p}: no lmu-edge streaming contract in its metadata ({KEY}); it was not written by "
            "lmu-edge, or by a version before the contract"
        )
    return parse(found, p)
