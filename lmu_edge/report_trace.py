"""The report's per-tensor traces: every tensor of the integer graph against the float model's, in data-flow
order (each LMU's encoder output ``u`` and ``state`` before its output, and the integer API's own output where
it is narrower than the last layer's), with the range each used of its type (:func:`tensor_table`), and where
each layer comes from in the user's model (:func:`layer_origins`). :mod:`lmu_edge.report` attributes the error
from them."""

from __future__ import annotations

import math
from typing import Optional

import numpy as np

from . import intsim, ir, qir, reference
from .metrics import relative_error, sqnr_db

_TENSOR_WORDS = {"u": "encoder output u", "state": "memory state", "out": "output", "api": "output at the integer API"}
_LAYER_KINDS = {
    "lmu": "LMU",
    "dense": "Dense",
    "activation": "activation",
    "time_pooling": "time pooling",
    "band_conv": "band convolution",
}


def layer_origins(graph: ir.Graph) -> dict:
    """Each layer's name -> where it comes from in the user's model: the Keras layer of that name, the
    index in the exported ``torch.nn.Sequential`` (lmu-edge names its layers ``lmu_0``, ``dense_1``, ...
    after it), or the IR layer; with its kind (``LMU``, ``Dense (softmax)``, ...)."""
    source = str(graph.metadata.get("source", ""))
    out = {}
    for i, layer in enumerate(graph.layers):
        kind = _LAYER_KINDS.get(layer.TYPE, layer.TYPE)
        act = getattr(layer, "activation", None)
        if act and act != "linear":
            kind += f" ({act})"
        if source == "lmu_edge.torch":
            idx = layer.name.rsplit("_", 1)[-1]
            where = f"torch Sequential[{idx}]" if idx.isdigit() else f"torch layer {layer.name!r}"
        elif source == "keras":
            where = f"Keras layer {layer.name!r}"
        else:
            where = f"layer {i} {layer.name!r}"
        out[layer.name] = f"{where}, {kind}"
    return out


def tensor_label(row: dict) -> str:
    """A tensor of :func:`tensor_table` in words: ``lmu_0 memory state``, ``classifier output (softmax)``."""
    return f"{row['layer']} {_TENSOR_WORDS.get(row['tensor'], row['tensor'])}"


def finite_db(v):
    """JSON has no infinity: an exact match (infinite SQNR) is written as null and shown as 'exact'."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


# --- traces --------------------------------------------------------------------------------


def trace_float(graph: ir.Graph, x: np.ndarray) -> dict:
    """Per layer: its output, and for LMU layers ``u`` and ``state``, every step ``(N, T, ...)``."""
    N, T = x.shape[:2]
    stream = reference.Stream(graph, np.float64)
    stream.reset(N)
    runners = stream.runners
    out: dict[str, dict[str, list]] = {layer.name: {"out": []} for layer in graph.layers}
    for t in range(T):
        v = x[:, t]
        for layer, r in zip(graph.layers, runners, strict=True):
            v = r.step(v)
            rec = out[layer.name]
            rec["out"].append(v)
            if isinstance(layer, ir.LMU):
                rec.setdefault("u", []).append(r.last["u"])
                rec.setdefault("state", []).append(r.last["state"])
    return {k: {kk: np.stack(vv, axis=1) for kk, vv in d.items()} for k, d in out.items()}


def trace_int(qg: ir.Graph, x: np.ndarray) -> dict:
    """As :func:`trace_float` for an integer graph, dequantized to real values."""
    xq = intsim.quantize_input(qg, x)
    N, T = x.shape[:2]
    stream = intsim.IntStream(qg)
    stream.reset(N)
    runners = stream.runners
    out: dict[str, dict[str, list]] = {layer.name: {"out": []} for layer in qg.layers}
    for t in range(T):
        v = xq[:, t]
        for layer, r in zip(qg.layers, runners, strict=True):
            v = r.step(v)
            rec = out[layer.name]
            rec["out"].append((v - layer.out_zp) * layer.out_scale)
            if isinstance(layer, qir.QLMU):
                rec.setdefault("u", []).append(layer.u_type.dequantize(r.last["u"]))
                rec.setdefault("state", []).append(layer.state_type.dequantize(r.last["state"]))
    return {k: {kk: np.stack(vv, axis=1) for kk, vv in d.items()} for k, d in out.items()}


def _q_name(layer, qg) -> Optional[str]:
    names = {q.name for q in qg.layers}
    if isinstance(layer, ir.Dense) and layer.activation == "softmax" and layer.name + "_softmax" in names:
        return layer.name + "_softmax"
    return layer.name if layer.name in names else None


def _type_range(qlayer, key, bits=8) -> list:
    if key == "state":
        return [qlayer.state_type.min, qlayer.state_type.max]
    if key == "u":
        return [qlayer.u_type.min, qlayer.u_type.max]
    lo, hi = qir.act_range(bits)
    return [(lo - qlayer.out_zp) * qlayer.out_scale, (hi - qlayer.out_zp) * qlayer.out_scale]


def tensor_table(graph: ir.Graph, qg: ir.Graph, x: np.ndarray) -> list:
    """Per tensor, in data-flow order: SQNR, errors, the range used against the type's range."""
    tf, ti = trace_float(graph, x), trace_int(qg, x)
    qlayers = {q.name: q for q in qg.layers}
    origins = layer_origins(graph)
    rows = []
    for layer in graph.layers:
        qn = _q_name(layer, qg)
        if qn is None:
            continue
        keys = (["u", "state"] if isinstance(layer, ir.LMU) else []) + ["out"]
        for key in keys:
            a, b = ti[qn][key], tf[layer.name][key]
            src = ti[layer.name][key] if key != "out" else a
            ql = qlayers[layer.name if key != "out" else qn]
            bits = intsim.layer_bits(ql)  # per layer: an int8 graph may have 16-bit layers (mixed precision)
            rng = _type_range(ql, key, bits)
            hi = max(abs(float(b.min())), abs(float(b.max())), 1e-30)
            row = {
                "layer": layer.name,
                "tensor": key,
                "name": f"{layer.name}.{key}",
                "label": f"{layer.name} {_TENSOR_WORDS[key]}",
                "source_layer": origins[layer.name],
                "sqnr_db": finite_db(sqnr_db(src, b)),
                "max_error": float(np.max(np.abs(src - b))),
                "relative_error": relative_error(src, b),
                "float_range": [float(b.min()), float(b.max())],
                "type_range": [float(v) for v in rng],
                "range_used": hi / max(abs(rng[0]), abs(rng[1]), 1e-30),
                "type": str(ql.state_type) if key == "state" else (str(ql.u_type) if key == "u" else f"int{bits}"),
                "hist": np.histogram(b, bins=40)[0].tolist(),
                "hist_edges": np.histogram(b, bins=40)[1].tolist(),
            }
            if key == "state":
                row["bound"] = float(ql.state_bound)
                row["saturated"] = bool(np.max(np.abs(ti[layer.name]["state"])) >= ql.state_type.max * (1 - 1e-12))
            rows.append(row)
    rows += _api_output(graph, qg, tf, ti)
    # attribution: the largest SQNR drop from one tensor to the next
    prev = None
    for row in rows:
        s = row["sqnr_db"] if row["sqnr_db"] is not None else 300.0  # null: exact
        row["sqnr_drop_db"] = 0.0 if prev is None else max(0.0, prev - s)
        prev = min(s, prev) if prev is not None else s
    return rows


def _api_output(graph: ir.Graph, qg: ir.Graph, tf: dict, ti: dict) -> list:
    """The row of the integer API's output where it is a conversion of its own (an int8 API after a last
    layer the widening search gave 16 bits: :class:`qir.QConvert`), which no float layer matches: an 8-bit
    output at its calibrated range clips what goes past it (issue 52, seed 175: test outputs 1.39x the
    calibrated range, 36.5 dB at the last layer and 23.5 at the API). Empty where the API is the last layer's."""
    last = qg.layers[-1]
    if not isinstance(last, qir.QConvert) or last.name in {lay.name for lay in graph.layers}:
        return []
    name = graph.layers[-1].name
    a, b = ti[last.name]["out"], tf[name]["out"]
    bits = intsim.layer_bits(last)
    lo, hi = _type_range(last, "out", bits)
    top = max(abs(float(b.min())), abs(float(b.max())), 1e-30)
    return [
        {
            "layer": name,
            "tensor": "api",
            "name": f"{name}.api",
            "label": f"model output at the int{bits} API",
            "source_layer": f"the artifact's int{bits} output, converted from {name}'s 16 bits at its calibrated range",
            "sqnr_db": finite_db(sqnr_db(a, b)),
            "max_error": float(np.max(np.abs(a - b))),
            "relative_error": relative_error(a, b),
            "float_range": [float(b.min()), float(b.max())],
            "type_range": [float(lo), float(hi)],
            "range_used": top / max(abs(lo), abs(hi), 1e-30),
            "clipped": float(np.mean((b < lo) | (b > hi))),
            "type": f"int{bits}",
            "hist": np.histogram(b, bins=40)[0].tolist(),
            "hist_edges": np.histogram(b, bins=40)[1].tolist(),
        }
    ]
