"""The streaming contract (:mod:`.streaming`) inside a TFLite file: the step model's signature is named
``step`` (its inputs ``x`` and the states, its outputs ``y`` and ``<state>_out``), and the contract's JSON
is a ``metadata`` entry of the model, named :data:`.streaming.KEY` (a flatbuffer ``Metadata`` pointing at a
buffer: any TFLite reader lists it; LiteRT and TFLite Micro ignore it when they run the model).

Written at conversion with TensorFlow's flatbuffer tools; read back (``lmu-edge inspect model.tflite``)
with the schema that LiteRT ships, without TensorFlow."""

from __future__ import annotations

import json
from pathlib import Path

from lmu_edge.registry import require

from . import streaming

#: the name of the step model's signature (a single function converts as ``serving_default``)
SIGNATURE = "step"
#: a TFLite flatbuffer's file identifier (bytes 4-8)
IDENTIFIER = b"TFL3"
#: the largest TFLite file this reader opens (a flatbuffer's 32-bit offsets reach 2 GB)
MAX_BYTES = 2 << 30


def stamp(model: bytes, contract: dict, open_batch: bool = True) -> bytes:
    """``model`` with its step signature named :data:`SIGNATURE`, ``contract`` as a metadata entry
    (replacing one of the same name) and, with ``open_batch``, dimension 0 of subgraph 0's inputs and
    outputs open (``shape_signature`` -1).

    The model is converted at batch 1 and opened here rather than converted with an open batch: the
    converter then stores the shapes of the tensors inside at batch 1 (a ``(-1, q)`` reshape of a
    ``d * q`` state: ``(d, q)``), which TFLite Micro runs as stored, while LiteRT, given more rows, works
    every shape out again from the inputs' when it prepares the ops."""
    fb = require("tensorflow.lite.tools.flatbuffer_utils", "tflite", "editing TFLite models")
    schema = require("tensorflow.lite.python.schema_py_generated", "tflite", "editing TFLite models")
    m = fb.convert_bytearray_to_object(bytearray(model))
    if open_batch:
        sg = m.subgraphs[0]
        for t in list(sg.inputs) + list(sg.outputs):
            shape = [int(v) for v in sg.tensors[t].shape]
            sg.tensors[t].shapeSignature = [-1, *shape[1:]]
    for sig in m.signatureDefs or []:
        key = sig.signatureKey.decode() if isinstance(sig.signatureKey, bytes) else sig.signatureKey
        if sig.subgraphIndex == 0 and key == "serving_default":
            sig.signatureKey = SIGNATURE
    m.metadata = [e for e in (m.metadata or []) if _text(e.name) != streaming.KEY]
    buf = schema.BufferT()
    buf.data = list(json.dumps(contract, sort_keys=True).encode())
    m.buffers.append(buf)
    entry = schema.MetadataT()
    entry.name, entry.buffer = streaming.KEY, len(m.buffers) - 1
    m.metadata.append(entry)
    return bytes(fb.convert_object_to_bytearray(m))


def _text(v) -> str:
    return v.decode(errors="replace") if isinstance(v, bytes) else str(v)


def read_file(path) -> dict:
    """The contract of a ``.tflite`` file, or a one-line :class:`ModelFormatError` saying why there is none
    (the file is untrusted: a regular file of at most :data:`MAX_BYTES`, a TFLite flatbuffer, the JSON
    read with the limits of :func:`lmu_edge.limits.load_json`)."""
    from lmu_edge.errors import ModelFormatError
    from lmu_edge.limits import check_regular_file

    p = check_regular_file(path, "inspect")
    if p.stat().st_size > MAX_BYTES:
        raise ModelFormatError(f"{p}: larger than 2 GB, more than a TFLite flatbuffer can be")
    data = Path(p).read_bytes()
    if len(data) < 8 or data[4:8] != IDENTIFIER:
        raise ModelFormatError(f"{p}: not a TFLite model (no TFL3 identifier); give a model.tflite lmu-edge wrote")
    schema = require("ai_edge_litert.schema_py_generated", "tflite", "reading TFLite files")
    try:
        m = schema.Model.GetRootAs(data, 0)
        found = None
        for k in range(m.MetadataLength()):
            e = m.Metadata(k)
            if _text(e.Name()) == streaming.KEY:
                found = m.Buffers(e.Buffer()).DataAsNumpy().tobytes()
    except Exception as e:  # a damaged flatbuffer: offsets outside the file
        raise ModelFormatError(f"{p}: not a readable TFLite model ({type(e).__name__})") from None
    if found is None:
        raise ModelFormatError(
            f"{p}: no lmu-edge streaming contract in its metadata ({streaming.KEY}); it was not written by "
            "lmu-edge, or by a version before the contract"
        )
    return streaming.parse(found, p)
