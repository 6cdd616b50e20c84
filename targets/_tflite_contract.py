"""The streaming contract (:mod:`.streaming`) inside a TFLite file: the step model's signature is named
``step`` (its inputs ``x`` and the states, its outputs ``y`` and ``<state>_out``), and the contract's JSON
is a ``metadata`` entry of the model, named :data:`.streaming.KEY` (a flatbuffer ``Metadata`` pointing at a
buffer: any TFLite reader lists it; LiteRT and TFLite Micro ignore it when they run the model).

Written at conversion with TensorFlow's flatbuffer tools; read back (``lmu-edge inspect model.tflite``)
by :func:`.streaming.read_file` with the schema that LiteRT ships, without TensorFlow."""

from __future__ import annotations

import json

from lmu_edge.registry import require

from . import streaming

#: the name of the step model's signature (a single function converts as ``serving_default``)
SIGNATURE = "step"


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
