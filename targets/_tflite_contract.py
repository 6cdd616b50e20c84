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
    name_tensors(m)
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


def name_tensors(m) -> None:
    """:func:`_name_tensors` on subgraph 0 of the flatbuffer object ``m`` (edited in place)."""
    for sig in m.signatureDefs or []:
        if sig.subgraphIndex == 0:
            _name_tensors(m.subgraphs[0], sig)


def _name_tensors(sg, sig) -> None:
    """Subgraph 0's tensors named as a user reads them (Netron, ``get_tensor_details``): the inputs and
    outputs by their signature names (``x``, ``L1_m``, ``y``, ``L1_m_out``; the converter wrote
    ``serving_default_x:0``, ``PartitionedCall:0``), also where they begin a longer name (an int16 copy:
    ``x_int16``), and a constant the converter made (``arith.constant``) after the operator that reads it
    (``lmu.memory/Reshape.in1``). The other tensors carry their layer's name already
    (:meth:`._tflite_build.TFOps.enter_layer`). Runtimes find the inputs and outputs by the signature
    or by index, never by tensor name."""
    old = {_text(sg.tensors[t.tensorIndex].name): _text(t.name) for t in list(sig.inputs) + list(sig.outputs)}
    prefixes = sorted(old, key=len, reverse=True)

    def renamed(name: str) -> str:
        parts = []
        for part in name.split(";"):  # a fused operator's output names each op it holds
            o = next((o for o in prefixes if part == o or part.startswith(o + "_")), None)
            parts.append(part if o is None else old[o] + part[len(o) :])
        return ";".join(parts)

    for t in sg.tensors:
        t.name = renamed(_text(t.name)).encode()
    readers: dict = {}
    for op in sg.operators:
        for k, i in enumerate(op.inputs):
            readers.setdefault(int(i), (op, k))
    taken = {_text(t.name) for t in sg.tensors}
    for i, t in enumerate(sg.tensors):
        if not _text(t.name).startswith("arith.constant") or i not in readers or not len(readers[i][0].outputs):
            continue
        op, k = readers[i]
        base = f"{_text(sg.tensors[op.outputs[0]].name).split(';')[-1]}.in{k}"
        name, n = base, 1
        while name in taken:
            n += 1
            name = f"{base}_{n}"
        taken.add(name)
        t.name = name.encode()
