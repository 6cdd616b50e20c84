"""The NIR graphs of the ``nir`` target: the layers NIR can express (shared by both variants), and the
spiking variant's graph and its Rockpool form (see :func:`build_spiking`, docs/neuromorphic.md).

The exact variant's graph is built in :mod:`lmu_edge.targets.nir`; this module holds what would make that
file too long, and what both variants refuse."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from .. import ir, lti, registry
from ..errors import UnsupportedLayerError

#: the spiking variant's neurons: LIF with this time constant and input resistance (in samples), i.e.
#: integrate-and-fire (dv/dt = I - v / IF_TAU) with a leak that moves v by under 1% over 64 samples
IF_TAU = 1e4
#: the spiking neurons' synapse is this many times faster than a simulator step: Rockpool's step passes
#: beta / (1 - beta) of a held input through it (inputs are scaled back), and a synapse as slow as the step
#: delays the recurrence by half a step on average, which made the order-32 digits memory unstable
SYNAPSE_STEPS = 10
RADIUS_MARGIN = 1.1  # spiking: a dimension's radius is 10% above its largest |state| in calibration


def refuse(layer, why: str, instead: str = "use the nengo target for the rest"):
    """Raise the one-line refusal of ``layer`` for the nir target, saying what NIR can express and, last,
    what to do ``instead``."""
    raise UnsupportedLayerError(
        f"layer {layer.name!r} ({type(layer).__name__}): {why}; the nir target expresses only linear "
        f"Dense layers and LMUs with a ZOH memory and no (or a linear Dense) hidden cell "
        f"(NIR 1.0.8 has no tanh, ReLU, sigmoid or softmax node); {instead}"
    )


def memory_ab(layer: ir.LMU):
    """The continuous Legendre ``(A, B)`` of ``layer``'s memory; refuses a memory that is not their ZOH."""
    mem = layer.memory
    A, B = lti.legendre_ab(layer.order, layer.theta)
    if isinstance(mem, ir.ImpulseResponse) and mem.kernel is None and layer.discretizer == "zoh":
        return A, B
    if isinstance(mem, ir.DenseSS) and mem.method == "zoh":
        Abar, Bbar = lti.discretize(A, B, "zoh")
        if np.allclose(Abar, mem.Abar, rtol=1e-9, atol=1e-12) and np.allclose(Bbar, mem.Bbar, rtol=1e-9, atol=1e-12):
            return A, B
    refuse(
        layer,
        f"its memory ({type(mem).__name__}, discretizer {layer.discretizer!r}) is not the ZOH of the "
        f"Legendre system, so it has no continuous-time form; fold it with realization='zoh'",
    )


def check_spiking_layer(graph: ir.Graph, i: int, layer) -> None:
    """What the spiking variant expresses: linear Dense layers, a softmax Dense as the last layer (applied
    on the host: NIR has no softmax node), and LMUs with a ZOH memory and no (or a linear Dense) hidden cell."""
    if isinstance(layer, ir.Dense):
        last = i == len(graph.layers) - 1
        if layer.activation == "linear" or (layer.activation == "softmax" and last):
            return
        refuse(layer, f"activation {layer.activation!r} has no NIR node (a softmax only as the last layer)")
    check_lmu(layer)
    memory_ab(layer)


def check_lmu(layer) -> None:
    """Refuse, in one line, a layer that is not an LMU both variants can write: an LMU with the RNN path,
    input_to_hidden, or a hidden cell other than a linear Dense."""
    if isinstance(layer, ir.BandConv):
        raise UnsupportedLayerError(
            f"layer {layer.name!r} (BandConv): a band convolution reads the last {layer.kernel_t} input frames, a "
            f"history NIR holds only in Delay nodes, which neither Rockpool nor Sinabs imports (nirtorch maps "
            f"none); convert this model for c, tflite or onnx"
        )
    if isinstance(layer, ir.Activation) and layer.activation != "linear":
        refuse(layer, f"activation {layer.activation!r} has no NIR node")
    if isinstance(layer, ir.TimePooling):
        refuse(
            layer,
            "a running mean over time divides the running sum by the step count, a gain that changes every step, "
            "and NIR's nodes are time-invariant",
        )
    if not isinstance(layer, ir.LMU):
        refuse(layer, f"NIR 1.0.8 has no node for a {type(layer).__name__} layer")
    if layer.hidden_encoders is not None or layer.memory_encoders is not None:
        refuse(
            layer,
            "the RNN path (hidden_to_memory, memory_to_memory) feeds the previous sample's h and m back into "
            "u, a one-sample delay: NIR 1.0.8's Delay node has no Rockpool or Sinabs import (nirtorch maps none)",
        )
    if layer.input_to_hidden:
        refuse(
            layer,
            "input_to_hidden joins the layer input to the memory's readout, and Rockpool's and Sinabs' importer "
            "(nirtorch's GraphExecutor) runs nodes depth-first from the input and returns the last one run, so "
            "a graph whose branches meet again gives a wrong output",
        )
    hid = layer.hidden
    if hid is not None and not (isinstance(hid, ir.HiddenDense) and hid.activation == "linear"):
        refuse(layer, f"hidden cell {type(hid).__name__} with activation {hid.activation!r} has no NIR node")


def float_memories(graph: ir.Graph, x: np.ndarray) -> dict:
    """The exact float memory ``m`` (N, T, d, q) of every LMU layer on ``x``, layer by layer (the layers
    the spiking variant accepts)."""
    out = {}
    h = np.asarray(x, np.float64)
    for i, layer in enumerate(graph.layers):
        if isinstance(layer, ir.Dense):
            b = 0.0 if layer.bias is None else np.asarray(layer.bias)
            h = h @ np.asarray(layer.kernel, np.float64) + b
            continue
        A, B = memory_ab(layer)
        Abar, Bbar = lti.discretize(A, B, "zoh")
        bias = 0.0 if layer.encoder_bias is None else np.asarray(layer.encoder_bias, np.float64)
        u = h @ np.asarray(layer.input_encoders, np.float64) + bias  # (N, T, d)
        m = np.zeros((u.shape[0], u.shape[2], layer.order))
        ms = np.empty((u.shape[0], u.shape[1], u.shape[2], layer.order))
        for t in range(u.shape[1]):
            m = m @ Abar.T + u[:, t, :, None] * Bbar[None, None, :]
            ms[:, t] = m
        out[i] = ms
        h = ms.reshape(u.shape[0], u.shape[1], -1)
        if layer.hidden is not None:
            hb = 0.0 if layer.hidden.bias is None else np.asarray(layer.hidden.bias)
            h = h @ np.asarray(layer.hidden.kernel, np.float64) + hb
    return out


def build_spiking(graph: ir.Graph, o: dict, calibration) -> Any:
    """The spiking variant's :class:`nir.NIRGraph` (see docs/neuromorphic.md).

    Each memory dimension ``j`` of channel ``c`` is held as ``v = m / r`` (``r``: its radius from the
    calibration data) by an ``LI`` node (the synapse, ``tau`` samples) and ``neurons_per_dim`` LIF neurons
    that act as integrate-and-fire neurons: half with encoder +1, half -1, each with input current
    ``g (1 + e v)`` (``g`` up to ``max_rate / 2`` spikes per sample), which stays >= 0 inside the radius, so
    no neuron's voltage runs away below zero (NIR neurons have no voltage floor) and the firing rate is
    linear in ``v``. The decoders ``D`` (least squares over ``v`` in [-1, 1]) turn the spikes back into
    ``v``, and the LI's recurrent weights carry the memory's dynamics. Those weights are written for a
    simulator step of ``h = 1 / steps_per_sample`` samples with the input held over it: with ``beta =
    exp(-h / tau)``, ``v <- beta v + (1 - beta) (W_rec v_hat + W_in u)`` equals the exact ZOH step
    ``v <- F_h v + G_h u`` when ``W_rec = (F_h - beta I) / (1 - beta)`` and ``W_in = G_h / (1 - beta)``
    (the digital-lowpass mapping the Nengo spiking network uses), so the simulator's scheme adds no
    integration error beyond the spikes' own."""
    nir = registry.require("nir", "nir", "the NIR target")
    for i, layer in enumerate(graph.layers):
        check_spiking_layer(graph, i, layer)
    k, tau, npd = o["steps_per_sample"], float(o["tau"]), o["neurons_per_dim"]
    h = 1.0 / k
    beta = float(np.exp(-h / tau))
    if calibration is None:
        T = graph.seq_len or int(min(max(10 * max([lay.theta for lay in graph.lmu_layers] or [10.0]), 16), 1000))
        calibration = np.random.default_rng(0).standard_normal((4, T, graph.input_features))
    mems = float_memories(graph, np.asarray(calibration, np.float64))
    rng = np.random.default_rng(int(o["seed"]))
    nodes = {"input": nir.Input(input_type=np.array([graph.input_features]))}
    edges, prev, layers_meta = [], "input", []
    radii: dict = {}  # memory node -> its radius per state dimension
    host_softmax = False
    for i, layer in enumerate(graph.layers):
        layers_meta.append({"name": layer.name, "type": layer.TYPE})
        if isinstance(layer, ir.Dense):
            b = np.zeros(layer.units) if layer.bias is None else np.asarray(layer.bias)
            W = np.asarray(layer.kernel, np.float64).T.copy()
            if prev.endswith(".mem"):  # the memory is held as m / r: the readout takes r back
                W = W * radii[prev][None, :]
            nodes[f"{i}.dense"] = nir.Affine(weight=W, bias=b.astype(np.float64))
            edges.append((prev, f"{i}.dense"))
            prev = f"{i}.dense"
            host_softmax = layer.activation == "softmax"
            continue
        A, B = memory_ab(layer)
        q, d = layer.order, layer.memory_d
        r = RADIUS_MARGIN * np.abs(mems[i]).max(axis=(0, 1))  # (d, q)
        r = np.maximum(r, max(1e-3 * float(r.max()), 1e-12))
        n = d * q
        W_rec = np.zeros((n, n))
        G_in = np.zeros((n, d))
        for c in range(d):
            Ar = A * r[c][None, :] / r[c][:, None]
            Br = B / r[c]
            Fh, Gh = lti.discretize(Ar * h, Br * h, "zoh")
            sl = slice(c * q, (c + 1) * q)
            W_rec[sl, sl] = (Fh - beta * np.eye(q)) / (1 - beta)
            G_in[sl, c] = Gh / (1 - beta)
        enc = np.asarray(layer.input_encoders, np.float64)  # (n_in, d)
        bias = np.zeros(d) if layer.encoder_bias is None else np.asarray(layer.encoder_bias, np.float64)
        # neurons: dimension-major, npd per dimension, encoders alternating +1 / -1
        e = np.tile(np.array([1.0, -1.0]), n * npd // 2)
        g = rng.uniform(o["max_rate"] / 4, o["max_rate"] / 2, n * npd)
        dim = np.repeat(np.arange(n), npd)
        W_ens = np.zeros((n * npd, n))
        W_ens[np.arange(n * npd), dim] = g * e
        xs = np.linspace(-1.0, 1.0, 41)
        D = np.zeros((n, n * npd))
        for j in range(n):
            sel = slice(j * npd, (j + 1) * npd)
            rates = g[sel][None, :] * (1 + e[sel][None, :] * xs[:, None])
            D[j, sel] = np.linalg.lstsq(rates, xs, rcond=None)[0]
        nodes[f"{i}.enc"] = nir.Affine(weight=G_in @ enc.T, bias=G_in @ bias)
        nodes[f"{i}.mem"] = nir.LI(tau=np.full(n, tau), r=np.ones(n), v_leak=np.zeros(n))
        nodes[f"{i}.ens"] = nir.Affine(weight=W_ens, bias=g.copy())
        # CubaLIF (Rockpool 3.1 cannot import nir.LIF: its importer reads a tau_mem field LIF does not have):
        # a synapse much faster than the simulator step, then integrate-and-fire
        nn = n * npd
        nodes[f"{i}.neurons"] = nir.CubaLIF(
            tau_syn=np.full(nn, h / SYNAPSE_STEPS),
            tau_mem=np.full(nn, IF_TAU),
            r=np.full(nn, IF_TAU),
            v_leak=np.zeros(nn),
            v_threshold=np.ones(nn),
        )
        nodes[f"{i}.dec"] = nir.Affine(weight=W_rec @ D, bias=np.zeros(n))
        edges += [
            (prev, f"{i}.enc"),
            (f"{i}.enc", f"{i}.mem"),
            (f"{i}.mem", f"{i}.ens"),
            (f"{i}.ens", f"{i}.neurons"),
            (f"{i}.neurons", f"{i}.dec"),
            (f"{i}.dec", f"{i}.mem"),
        ]
        prev = f"{i}.mem"
        radii[prev] = r.reshape(-1)
        layers_meta[-1].update(order=q, theta=float(layer.theta), memory_d=d, neurons=n * npd)
        if layer.hidden is not None:
            hid = layer.hidden
            hb = np.zeros(hid.units) if hid.bias is None else np.asarray(hid.bias, np.float64)
            W = np.asarray(hid.kernel, np.float64).T * r.reshape(1, -1)
            nodes[f"{i}.hidden"] = nir.Affine(weight=W, bias=hb)
            edges.append((prev, f"{i}.hidden"))
            prev = f"{i}.hidden"
    if prev.endswith(".mem"):  # the memory itself is the output: scale it back
        rr = radii[prev]
        key = f"{len(graph.layers) - 1}.readout"
        nodes[key] = nir.Affine(weight=np.diag(rr), bias=np.zeros(rr.size))
        edges.append((prev, key))
        prev = key
    meta = {
        "variant": "spiking",
        "steps_per_sample": k,
        "dt": h,
        "weights_for": "a simulator step of dt with the input held over it (LI: exponential step)",
        "tau": tau,
        "neurons_per_dim": npd,
        "max_rate": float(o["max_rate"]),
        "host_softmax": host_softmax,
    }
    return finish_graph(graph, nodes, edges, prev, layers_meta, meta)


def finish_graph(graph: ir.Graph, nodes: dict, edges: list, prev: str, layers_meta: list, meta: dict) -> Any:
    """Add the output node after ``prev`` and return the :class:`nir.NIRGraph` with lmu-edge's metadata:
    one JSON string (names from the model are data there, never node names or code)."""
    nir = registry.require("nir", "nir", "the NIR target")
    n_out = graph.shapes()[-1][2] if graph.layers else graph.input_features
    nodes["output"] = nir.Output(output_type=np.array([n_out]))
    edges.append((prev, "output"))
    full = {"format": "lmu-edge-nir", "version": 1, "time_unit": "one input sample", **meta}
    full.update(model_name=graph.name, layers=layers_meta)
    return nir.NIRGraph(nodes=nodes, edges=edges, metadata={"lmu_edge": json.dumps(full)})


def scale_inputs(g, nodes: dict, key: str, factor) -> None:
    """In ``nodes`` (a copy of ``g.nodes``), multiply the weight and bias of every ``Affine`` feeding node
    ``key`` by ``factor(src)``: a number, or one per row."""
    nir = registry.require("nir", "nir", "the NIR target")
    for src, dst in g.edges:
        if dst == key and isinstance(nodes.get(src), nir.Affine):
            w = nodes[src]
            c = np.broadcast_to(np.asarray(factor(src), np.float64), (np.shape(w.weight)[0],))
            nodes[src] = nir.Affine(weight=w.weight * c[:, None], bias=np.asarray(w.bias) * c)


def adapt_spiking_for_rockpool(g, k: int):
    """The spiking file as Rockpool 3.1 steps it: ``ExpSynTorch`` (``isyn <- beta (isyn + I)``, its ``dt``
    from ``tau / (1 + r)``) and ``LIFTorch`` for CubaLIF (``isyn <- beta_syn (isyn + I)``, then ``v <- alpha v
    + isyn + bias``, subtractive reset, several spikes per step). Each LI and CubaLIF gets ``r = tau k - 1``
    (so dt = 1 / k). Inputs into an LI are scaled so that one step is the file's ``v <- beta v + (1 - beta)
    I`` (spike counts divided by dt: the file's spikes are impulses of unit area); inputs into a CubaLIF by
    ``(1 - beta_syn) / beta_syn`` (what its synapse passes of a held input) times ``(1 - alpha) R`` (the
    exponential step of ``tau dv/dt = -v + R I``)."""
    nir = registry.require("nir", "nir", "the NIR target")
    nodes = dict(g.nodes)
    h = 1.0 / k

    def fed_by_neurons(src: str) -> bool:
        return any(isinstance(g.nodes[s0], nir.CubaLIF) for s0, d0 in g.edges if d0 == src)

    for key, node in g.nodes.items():
        if isinstance(node, nir.LI):
            tau = float(np.unique(node.tau)[0])
            beta = np.exp(-h / tau)
            nodes[key] = nir.LI(tau=node.tau, r=np.full_like(node.r, tau * k - 1.0), v_leak=node.v_leak)
            c = (1 - beta) / beta * np.asarray(node.r, np.float64)
            scale_inputs(g, nodes, key, lambda src, c=c: c / (h if fed_by_neurons(src) else 1.0))
        elif isinstance(node, nir.CubaLIF):
            tau_mem = float(np.unique(node.tau_mem)[0])
            alpha = np.exp(-h / tau_mem)
            beta_syn = np.exp(-h / float(np.unique(node.tau_syn)[0]))
            nodes[key] = nir.CubaLIF(
                tau_syn=node.tau_syn,
                tau_mem=node.tau_mem,
                r=np.full_like(node.r, tau_mem * k - 1.0),
                v_leak=node.v_leak,
                v_threshold=node.v_threshold,
            )
            c = (1 - alpha) * np.asarray(node.r, np.float64) * (1 - beta_syn) / beta_syn
            scale_inputs(g, nodes, key, lambda src, c=c: c)
    return nir.NIRGraph(nodes=nodes, edges=list(g.edges), metadata=dict(g.metadata))
