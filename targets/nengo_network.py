"""A Legendre Memory Unit model as a Nengo network, exact or spiking.

lmu-edge's ``nengo`` target copies this file, as ``network.py``, next to the
``weights.npz`` it reads. It needs numpy and nengo only (nengo-loihi to run on
the Loihi emulator), not lmu-edge::

    import network                                  # this file, in the output directory
    model = network.build_network()                 # the network as converted (exact or spiking)
    y = model.run(x)                                # x (N, T, F) -> (N, T, F_out) or (N, F_out)
    net = model.net                                 # the nengo.Network itself

Timing
------
Input sample ``j`` is held for ``k = steps_per_sample`` simulator steps,
``n = j k ... j k + k - 1`` (``k = 1`` in the exact network). Nengo applies
every connection synapse with a one-step delay, so the identity filter
:data:`DELAY` is an exact one-step delay. Output ``j`` is read at step
``j k + phase``: ``phase`` is 0 for the exact network and grows by ``k - 1``
at each spiking LMU memory. Host-side state that must advance once per sample
(a SimpleRNN hidden cell, a running mean, the RNN path's feedback) lives in
:class:`Clocked` and :class:`Hold` processes that commit only at those steps.

Memory, exact
-------------
A Node ``s`` per LMU with ``s[n] = F s[n-1] + G u[n]`` (the recurrent
connection carries ``F`` through :data:`DELAY`) and the memory ``m = C s``.
``F, G`` is the folded realization's one-sample map: dense ZOH / Euler
``(Abar, Bbar)``, the exact map of the Runge-Kutta step, or a FIR ring buffer
(a shift register, with the kernel as ``C``).

Memory, spiking
---------------
An EnsembleArray of 1-D ensembles holds ``s / r`` (``r``: a radius per state
dimension, from calibration data). ``Fk, Gk`` step the memory by one
simulator step (``Fk^k = F``). Input and recurrence go through
``Lowpass(tau)``, discretized as nengo does (``a = exp(-dt / tau)``), with the
digital-lowpass mapping::

    A' = (Fk - a I) / (1 - a),    B' = Gk / (1 - a)

so that the synaptic state obeys ``x[n] = Fk x[n-1] + Gk u[n]`` when the
neurons are ideal. The readout is that lowpass state right after this step's
update, ``a * Lowpass(v)[n] + (1 - a) v[n]`` with ``v = A' s + B' u``, which is
the value the ensembles will represent at the next step.

Loihi layout
------------
``layout="loihi"`` (what runtime "loihi-emulator" builds) keeps the same
mapping but places it so that no value nengo-loihi carries in spikes leaves
its range, and the loop has one synapse, as in nengo:

* one ensemble, ``neurons_per_dim`` neurons per state dimension (axis-aligned
  encoders), intercepts ``Uniform(-1, 0.5)`` so that no neuron has a huge gain
  (the 8-bit weights of a core are scaled to its largest one), in cores of
  :func:`loihi_block_size` neurons;
* the recurrence ``A'`` as neuron-to-neuron weights (``LstsqL2(weights=True)``):
  a decoded connection would pass ``A' x`` through decode neurons, which
  saturate at 1 (``A' x`` grows like ``tau / dt``) and add a second 5 ms
  lowpass;
* the input as ``u / U`` (``U``: 1.1 x the largest ``|u|`` in calibration,
  ``u_scale``) into the neurons, with ``B' U`` in the on-chip weights and no
  host-side synapse: the chip applies its compartments' Lowpass(tau);
* the readout on the host from the decoded state, with the host's copy of
  ``u`` delayed by :data:`LOIHI_LATENCY` steps (host -> chip -> host transport,
  measured) and the output read that many steps later.

Only nengo-loihi runs this layout as intended (in nengo the input would miss
its synapse). Loihi's neurons reset to zero after a spike and so lag nengo's a
little; that, not the weights, is most of what remains (docs/neuromorphic.md).
"""

from __future__ import annotations

import json
import os

import nengo
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
FORMAT = "lmu-edge-nengo"
VERSION = 1
#: nengo delays every synapse by one step, so the identity filter is an exact one-step delay
DELAY = nengo.synapses.LinearFilter([1.0], [1.0], analog=False)
#: the "loihi" layout (see the module docstring)
LOIHI_INTERCEPT_MAX = 0.5  # intercepts Uniform(-1, 0.5): bounded gains, so 8-bit weights keep their resolution
LOIHI_LATENCY = 3  # steps from the host's input to the host's decoded state, beyond nengo's
LOIHI_SYNAPSE_BITS = 16384 * 64
LOIHI_MAX_AXONS = 4096
NEURON_TYPES = {
    "lif": nengo.LIF,
    "spiking-relu": nengo.SpikingRectifiedLinear,
    "lif-rate": nengo.LIFRate,
    "direct": nengo.Direct,
}


def activation(name, x):
    """The activations of the IR, on numpy arrays (last axis = features)."""
    if name == "linear":
        return x
    if name == "relu":
        return np.maximum(x, 0)
    if name == "relu6":
        return np.clip(x, 0, 6)
    if name == "tanh":
        return np.tanh(x)
    if name == "sigmoid":
        return 1 / (1 + np.exp(-x))
    if name == "silu":
        return x / (1 + np.exp(-x))
    if name == "softmax":
        e = np.exp(x - np.max(x, axis=-1, keepdims=True))
        return e / np.sum(e, axis=-1, keepdims=True)
    raise ValueError(f"unknown activation {name!r}")


def load_weights(path=None):
    """``(spec, arrays)`` from ``weights.npz`` (by default the one next to this file)."""
    path = os.path.join(HERE, "weights.npz") if path is None else os.fspath(path)
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    spec = json.loads(str(arrays.pop("spec")))
    if spec.get("format") != FORMAT or spec.get("version") != VERSION:
        raise ValueError(f"{path}: not a {FORMAT} version {VERSION} weights file; convert the model again")
    return spec, arrays


def _step_index(t, dt):
    return int(round(t / dt)) - 1  # nengo's first step has t = dt


class Hold(nengo.Process):
    """Sample-and-hold: at steps ``n >= phase`` with ``(n - phase) % k == 0`` pass the
    input through and latch it; between them output the latched value (zero before)."""

    def __init__(self, size, k, phase):
        self.size, self.k, self.phase = int(size), int(k), int(phase)
        super().__init__(default_size_in=self.size, default_size_out=self.size)

    def make_state(self, shape_in, shape_out, dt, dtype=None):
        """Nengo's process state: the latched value (zero)."""
        return {"held": np.zeros(self.size)}

    def make_step(self, shape_in, shape_out, dt, rng, state):
        """Nengo's step function ``step(t, x)``: latch ``x`` on sample steps, output the latched value."""
        held, k, phase = state["held"], self.k, self.phase

        def step(t, x):
            n = _step_index(t, dt)
            if n >= phase and (n - phase) % k == 0:
                held[:] = x
            return held.copy()

        return step


class Clocked(nengo.Process):
    """A host-side cell whose state advances once per sample.

    ``fn(x, state) -> (y, new_state)``; ``new_state`` is kept only at steps
    ``n >= phase`` with ``(n - phase) % k == 0`` (where the input is valid).
    """

    def __init__(self, fn, size_in, size_out, n_state, k, phase):
        self.fn, self.n_state, self.k, self.phase = fn, int(n_state), int(k), int(phase)
        super().__init__(default_size_in=int(size_in), default_size_out=int(size_out))

    def make_state(self, shape_in, shape_out, dt, dtype=None):
        """Nengo's process state: the cell state (zero)."""
        return {"cell": np.zeros(self.n_state)}

    def make_step(self, shape_in, shape_out, dt, rng, state):
        """Nengo's step function ``step(t, x)``: run ``fn``, keep its new state on sample steps only."""
        cell, fn, k, phase = state["cell"], self.fn, self.k, self.phase

        def step(t, x):
            y, new = fn(x, cell)
            n = _step_index(t, dt)
            if n >= phase and (n - phase) % k == 0:
                cell[:] = new
            return y

        return step


def _rnn_cell(U, act):
    def fn(x, h):
        y = activation(act, x + h @ U)
        return y, y

    return fn


def _mean_cell(x, s):
    total, count = s[:-1] + x, s[-1] + 1
    return total / count, np.concatenate([total, [count]])


class _Input:
    """The input node's output: sample ``n // k`` of the sequence set in ``x`` (zero after it)."""

    def __init__(self, features, k, dt):
        self.x, self.k, self.dt = np.zeros((0, features)), int(k), dt
        self.zero = np.zeros(features)

    def __call__(self, t):
        j = _step_index(t, self.dt) // self.k
        return self.x[j] if 0 <= j < len(self.x) else self.zero


def _gate(phase, dt):
    return lambda t: [1.0 if _step_index(t, dt) >= phase else 0.0]


def _blockdiag(blocks):
    rows, cols = sum(b.shape[0] for b in blocks), sum(b.shape[1] for b in blocks)
    out, r, c = np.zeros((rows, cols)), 0, 0
    for b in blocks:
        out[r : r + b.shape[0], c : c + b.shape[1]] = b
        r, c = r + b.shape[0], c + b.shape[1]
    return out


#: a transform at least this large and at most this dense is given to nengo as a Sparse one (:func:`_transform`)
SPARSE_MIN, SPARSE_DENSITY = 4096, 0.05


def _transform(M):
    """A connection's transform: ``M``, or nengo's Sparse transform of it where ``M`` is large and mostly zero.
    An FIR memory's state is its delay line: issue 52's seed 10 (an LMUFeedforward of 7 channels whose
    715-step kernel makes a 5005 x 5005 shift, one nonzero a row, block-diagonal) took 186 s to simulate
    with the dense matrix. The same values either way (tests/test_targets_nengo.py)."""
    M = np.asarray(M, np.float64)
    if M.size < SPARSE_MIN or np.count_nonzero(M) > SPARSE_DENSITY * M.size:
        return M
    rows, cols = np.nonzero(M)
    return nengo.transforms.Sparse(M.shape, indices=np.stack([rows, cols], axis=1), init=M[rows, cols])


def _is_loihi(sim):
    return type(sim).__module__.startswith("nengo_loihi")


class Model:
    """A built network: ``net``, its input, output probe, timing, and how to run it."""

    def __init__(self, net, spec, options, inp, probe, k, phase, state_probes):
        self.net, self.spec, self.options = net, spec, options
        self.input, self.probe, self.k, self.phase = inp, probe, k, phase
        self.state_probes = state_probes  # layer name -> probe of the memory state (exact network)

    @property
    def dt(self):
        """Simulator step in seconds."""
        return float(self.options["dt"])

    def simulator(self, runtime="nengo", progress_bar=False):
        """A simulator for this network: ``nengo.Simulator``, or nengo-loihi's emulator."""
        if runtime == "nengo":
            # no decoder cache: its files (pickles) are shared by every environment and unreadable across
            # numpy major versions; this network's solves take milliseconds
            model = nengo.builder.Model(dt=self.dt, decoder_cache=nengo.cache.NoDecoderCache())
            return nengo.Simulator(self.net, dt=self.dt, model=model, progress_bar=progress_bar, optimize=True)
        if runtime == "loihi-emulator":
            import nengo_loihi

            # passthrough removal mis-wires sliced connections between host nodes; the "loihi" layout
            # has no passthrough node between ensembles, so nothing on the chip depends on it
            return nengo_loihi.Simulator(self.net, dt=self.dt, target="sim", remove_passthrough=False)
        raise ValueError(f"unknown runtime {runtime!r}; known: nengo, loihi-emulator")

    def run(self, x, sim=None, runtime="nengo", states=False):
        """Run sequences ``x (N, T, F)`` one after another (the simulator is reset for each).

        Returns what the source model's predict returns; with ``states=True``
        also ``{layer name: (N, T, state)}`` of the exact network's memories.
        """
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 3 or x.shape[2] != self.spec["input_features"]:
            raise ValueError(f"expected input of shape (N, T, {self.spec['input_features']}), got {x.shape}")
        own = sim is None
        sim = self.simulator(runtime) if own else sim
        try:
            N, T = x.shape[:2]
            idx = np.arange(T) * self.k + self.phase
            ys: list = []
            st: dict[str, list] = {name: [] for name in self.state_probes}
            for i in range(N):
                self.input.x = x[i]
                if _is_loihi(sim):
                    # nengo-loihi's simulators cannot be reset, and with precomputed inputs they read
                    # the input while being built: a new simulator per sequence, after setting it
                    if own:
                        sim.close()
                    sim, own = self.simulator("loihi-emulator"), True
                else:
                    sim.reset()
                sim.run_steps(int(idx[-1]) + 1)
                ys.append(np.asarray(sim.data[self.probe])[idx])
                for name, p in self.state_probes.items():
                    st[name].append(np.asarray(sim.data[p])[idx])
        finally:
            if own:
                sim.close()
        y = np.stack(ys)
        y = y if self.spec["output_is_sequence"] else y[:, -1]
        return (y, {n: np.stack(v) for n, v in st.items()}) if states else y


def build_network(
    weights=None,
    *,
    spiking=None,
    neurons_per_dim=None,
    neuron_type=None,
    tau=None,
    dt=None,
    seed=None,
    layout=None,
    block_size=None,
    probe_states=False,
):
    """Build the model as a ``nengo.Network``; returns a :class:`Model`.

    Parameters
    ----------
    weights : path or ``(spec, arrays)``, optional
        ``weights.npz`` written by lmu-edge (default: the one next to this file).
    spiking : bool, optional
        Memories as spiking ensembles (default: as converted).
    neurons_per_dim, neuron_type, tau, dt, seed : optional
        Override the converted options (``neuron_type``: lif, spiking-relu,
        lif-rate, or direct for ideal ensembles).
    layout : {"array", "loihi"}, optional
        A spiking memory as an EnsembleArray of 1-D ensembles (default), or
        as laid out for nengo-loihi (needs nengo_loihi; runs correctly only on
        its simulator, see "Loihi layout" above).
    block_size : int, optional
        The "loihi" layout: at most this many neurons per core (default: as
        many as a core's synapse memory holds).
    probe_states : bool
        Probe the exact memories' states (used to calibrate the radii).
    """
    spec, arrays = load_weights(weights) if not isinstance(weights, tuple) else weights
    opts = dict(spec["options"])
    for key, val in (
        ("spiking", spiking),
        ("neurons_per_dim", neurons_per_dim),
        ("neuron_type", neuron_type),
        ("tau", tau),
        ("dt", dt),
        ("seed", seed),
        ("layout", layout),
        ("block_size", block_size),
    ):
        if val is not None:
            opts[key] = val
    spiking = bool(opts["spiking"])
    k = int(spec["steps_per_sample"]) if spiking else 1
    dt = float(opts["dt"])
    if spiking and opts["neuron_type"] not in NEURON_TYPES:
        raise ValueError(f"unknown neuron_type {opts['neuron_type']!r}; known: {', '.join(NEURON_TYPES)}")
    net = nengo.Network(label=spec["name"], seed=None if opts.get("seed") is None else int(opts["seed"]))
    state_probes = {}
    with net:
        inp = _Input(spec["input_features"], k, dt)
        sig = nengo.Node(inp, size_out=spec["input_features"], label="input")
        one = nengo.Node([1.0], label="one")
        held, phase = True, 0
        for i, layer in enumerate(spec["layers"]):
            arr = {key.split(".", 1)[1]: v for key, v in arrays.items() if key.startswith(f"{i}.")}
            kind = layer["kind"]
            if kind == "dense":
                sig = _dense(sig, arr["kernel"], arr.get("bias"), layer["activation"], one, layer["name"])
            elif kind == "activation":
                n = sig.size_out
                node = nengo.Node(
                    lambda t, x, a=layer["activation"]: activation(a, x), size_in=n, size_out=n, label=layer["name"]
                )
                nengo.Connection(sig, node, synapse=None)
                sig = node
            elif kind == "time_pooling":
                n = sig.size_out
                node = nengo.Node(Clocked(_mean_cell, n, n, n + 1, k, phase), label=layer["name"])
                nengo.Connection(sig, node, synapse=None)
                sig, held = node, k == 1
            elif kind == "lmu":
                if not spiking and not layer["exact"]:
                    raise ValueError(f"layer {layer['name']!r}: no exact form stored")
                sig, phase, probe = _lmu(layer, arr, sig, held, phase, k, one, opts, spiking)
                held = k == 1
                if probe_states and probe is not None:
                    state_probes[layer["name"]] = probe
            else:
                raise ValueError(f"unknown layer kind {kind!r}")
        probe = nengo.Probe(sig, synapse=None, label="output")
    return Model(net, spec, opts, inp, probe, k, phase, state_probes)


def _dense(sig, W, b, act, one, label):
    units = W.shape[1]
    fn = None if act == "linear" else (lambda t, x, a=act: activation(a, x))
    node = nengo.Node(fn, size_in=units, size_out=units if fn else None, label=label)
    nengo.Connection(sig, node, transform=W.T, synapse=None)
    if b is not None:
        nengo.Connection(one, node, transform=b[:, None], synapse=None)
    return node


def _lmu(layer, arr, x, held, phase, k, one, opts, spiking):
    """Build one LMU layer; returns ``(output node, output phase, state probe or None)``."""
    name, d, q = layer["name"], int(layer["memory_d"]), int(layer["order"])
    dt = float(opts["dt"])
    if not held:  # the memory input must be held over each sample
        h = nengo.Node(Hold(x.size_out, k, phase), label=f"{name}.hold")
        nengo.Connection(x, h, synapse=None)
        x = h
    u = nengo.Node(size_in=d, label=f"{name}.u")
    nengo.Connection(x, u, transform=arr["enc"].T, synapse=None)
    if "enc_bias" in arr:
        gate = one if phase == 0 else nengo.Node(_gate(phase, dt), size_out=1, label=f"{name}.gate")
        nengo.Connection(gate, u, transform=arr["enc_bias"][:, None], synapse=None)
    m = nengo.Node(size_in=d * q, label=f"{name}.m")
    probe = None
    if not spiking:
        F, G, C = arr["F"], arr["G"], arr["C"]
        s = nengo.Node(size_in=d * F.shape[0], label=f"{name}.state")
        nengo.Connection(u, s, transform=_transform(_blockdiag([G[:, None]] * d)), synapse=None)
        nengo.Connection(s, s, transform=_transform(_blockdiag([F] * d)), synapse=DELAY)
        nengo.Connection(s, m, transform=_transform(_blockdiag([C] * d)), synapse=None)
        probe = nengo.Probe(s, synapse=None)
        out_phase = phase
    else:
        lat = _spiking_memory(layer, arr, u, m, opts) or 0
        out_phase = phase + k - 1 + lat
    # hidden_to_memory / memory_to_memory: last sample's h and m into this sample's input
    fb = None
    if "henc" in arr or "menc" in arr:
        fb = nengo.Node(size_in=d, label=f"{name}.feedback")
        if "menc" in arr:
            nengo.Connection(m, fb, transform=arr["menc"].T, synapse=None)
        if k == 1:
            nengo.Connection(fb, u, synapse=DELAY)
        else:
            hold = nengo.Node(Hold(d, k, phase + k), label=f"{name}.feedback_hold")
            nengo.Connection(fb, hold, synapse=DELAY)
            nengo.Connection(hold, u, synapse=None)
    # hidden cell on z = concat(m, x)
    hid = layer["hidden"]
    nz = d * q + (x.size_out if layer["input_to_hidden"] else 0)
    if hid is None:
        out = nengo.Node(size_in=nz, label=f"{name}.h")
        nengo.Connection(m, out[: d * q], synapse=None)
        if layer["input_to_hidden"]:
            nengo.Connection(x, out[d * q :], synapse=None)
    else:
        W, act = arr["hW"], layer["hidden_activation"]
        units = W.shape[1]
        if hid == "dense":
            out = pre = nengo.Node(
                None if act == "linear" else (lambda t, v, a=act: activation(a, v)),
                size_in=units,
                size_out=units if act != "linear" else None,
                label=f"{name}.h",
            )
        else:
            pre = nengo.Node(size_in=units, label=f"{name}.h_pre")
            if k == 1:
                out = nengo.Node(lambda t, v, a=act: activation(a, v), size_in=units, size_out=units, label=f"{name}.h")
                nengo.Connection(pre, out, synapse=None)
                nengo.Connection(out, pre, transform=arr["hU"].T, synapse=DELAY)
            else:
                out = nengo.Node(
                    Clocked(_rnn_cell(arr["hU"], act), units, units, units, k, out_phase), label=f"{name}.h"
                )
                nengo.Connection(pre, out, synapse=None)
        nengo.Connection(m, pre, transform=W[: d * q].T, synapse=None)
        if layer["input_to_hidden"]:
            nengo.Connection(x, pre, transform=W[d * q :].T, synapse=None)
        if "hb" in arr:
            nengo.Connection(one, pre, transform=arr["hb"][:, None], synapse=None)
    if fb is not None and "henc" in arr:
        nengo.Connection(out, fb, transform=arr["henc"].T, synapse=None)
    return out, out_phase, probe


def _spiking_memory(layer, arr, u, m, opts):
    """The memory of ``s / r`` through Lowpass(tau) (see the module docstring); returns the readout's
    extra latency in simulator steps (0 except in the "loihi" layout)."""
    if "Fk" not in arr:
        raise ValueError(f"layer {layer['name']!r}: {layer.get('spiking_error', 'no spiking form stored')}")
    d = int(layer["memory_d"])
    dt, tau = float(opts["dt"]), float(opts["tau"])
    a = float(np.exp(-dt / tau))
    Fk, Gk, Ck, r = arr["Fk"], arr["Gk"], arr["Ck"], arr["radius"]  # r: (d, n_state)
    n = Fk.shape[0]
    eye = np.eye(n)
    An = _blockdiag([(Fk - a * eye) / (1 - a) * r[c][None, :] / r[c][:, None] for c in range(d)])
    Bn = _blockdiag([(Gk / (1 - a) / r[c])[:, None] for c in range(d)])
    Cn = _blockdiag([Ck * r[c][None, :] for c in range(d)])
    neuron = NEURON_TYPES[opts["neuron_type"]]()
    syn = nengo.Lowpass(tau)
    npd, dims = int(opts["neurons_per_dim"]), d * n
    layout = opts.get("layout") or "array"
    if layout == "loihi":
        return _loihi_memory(layer, arr, u, m, opts, neuron, An, Bn, Cn, a, syn)
    if layout != "array":
        raise ValueError(f"unknown layout {layout!r}; known: array, loihi")
    ea = nengo.networks.EnsembleArray(
        npd, dims, ens_dimensions=1, radius=1.0, neuron_type=neuron, label=f"{layer['name']}.memory"
    )
    nengo.Connection(u, ea.input, transform=Bn, synapse=syn)
    nengo.Connection(ea.output, ea.input, transform=An, synapse=syn)
    lag = nengo.Node(size_in=m.size_in, label=f"{layer['name']}.readout_lag")
    nengo.Connection(u, lag, transform=Cn @ Bn, synapse=syn)
    nengo.Connection(ea.output, lag, transform=Cn @ An, synapse=syn)
    nengo.Connection(lag, m, transform=a, synapse=None)
    nengo.Connection(u, m, transform=(1 - a) * (Cn @ Bn), synapse=None)
    nengo.Connection(ea.output, m, transform=(1 - a) * (Cn @ An), synapse=None)
    return 0


def loihi_block_size(n_neurons, cap=None):
    """Neurons per Loihi core for a memory of ``n_neurons`` with dense recurrent weights: each core
    stores ``n_neurons`` synapses per neuron in its 1 Mbit of synapse memory (about 9-10 bits each,
    12 assumed), and has 4096 input axons."""
    if n_neurons + 64 > LOIHI_MAX_AXONS:
        raise ValueError(
            f"a Loihi memory of {n_neurons} neurons needs {n_neurons} input axons per core "
            f"(at most {LOIHI_MAX_AXONS}); use fewer neurons_per_dim"
        )
    per = max(1, LOIHI_SYNAPSE_BITS // (12 * n_neurons))
    return int(min(per, cap or per, 1024, n_neurons))


def _loihi_memory(layer, arr, u, m, opts, neuron, An, Bn, Cn, a, syn):
    """The memory as nengo-loihi places it well (see "Loihi layout" in the module docstring)."""
    d, name = int(layer["memory_d"]), layer["name"]
    npd, dims = int(opts["neurons_per_dim"]), An.shape[0]
    U = np.asarray(arr["u_scale"], dtype=np.float64).reshape(d) if "u_scale" in arr else np.ones(d)
    BU = Bn * U[None, :]
    signs = np.where(np.arange(npd) % 2 == 0, 1.0, -1.0)
    enc = np.zeros((npd * dims, dims))
    for i in range(dims):
        enc[i * npd : (i + 1) * npd, i] = signs
    ens = nengo.Ensemble(
        npd * dims,
        dims,
        encoders=enc,
        radius=1.0,
        neuron_type=neuron,
        intercepts=nengo.dists.Uniform(-1.0, LOIHI_INTERCEPT_MAX),
        eval_points=nengo.dists.Uniform(-1, 1),
        n_eval_points=max(1000, 2 * npd * dims),
        label=f"{name}.memory",
    )
    import nengo_loihi

    net = nengo.Network.context[0]
    nengo_loihi.add_params(net)
    per = loihi_block_size(npd * dims, opts.get("block_size"))
    net.config[ens].block_shape = nengo_loihi.BlockShape((per,), (npd * dims,))
    # input: u / U (within [-1, 1]) to the neurons; B' lives in the on-chip weights. No host-side
    # synapse: the chip filters it with the memory's compartment filter, Lowpass(tau)
    us = nengo.Node(size_in=d, label=f"{name}.u_scaled")
    nengo.Connection(u, us, transform=np.diag(1 / U), synapse=None)
    nengo.Connection(us, ens.neurons, transform=enc @ BU, synapse=None)
    # recurrence: neuron-to-neuron weights (no decode neurons), Lowpass(tau) on the chip
    nengo.Connection(ens, ens, transform=An, synapse=syn, solver=nengo.solvers.LstsqL2(weights=True))
    # readout on the host from the decoded state (within radius 1), aligned with the chip's latency
    xh = nengo.Node(size_in=dims, label=f"{name}.state")
    nengo.Connection(ens, xh, synapse=None)
    ud = nengo.Node(size_in=d, label=f"{name}.u_delayed")
    nengo.Connection(
        us, ud, synapse=nengo.synapses.LinearFilter([1.0], [1.0] + [0.0] * (LOIHI_LATENCY - 1), analog=False)
    )
    lag = nengo.Node(size_in=m.size_in, label=f"{name}.readout_lag")
    nengo.Connection(ud, lag, transform=Cn @ BU, synapse=syn)
    nengo.Connection(xh, lag, transform=Cn @ An, synapse=syn)
    nengo.Connection(lag, m, transform=a, synapse=None)
    nengo.Connection(ud, m, transform=(1 - a) * (Cn @ BU), synapse=None)
    nengo.Connection(xh, m, transform=(1 - a) * (Cn @ An), synapse=None)
    return LOIHI_LATENCY


def run(x, weights=None, runtime="nengo", **options):
    """Build the network (``options`` as :func:`build_network`) and run ``x (N, T, F)``.

    ``runtime="loihi-emulator"`` builds the spiking network in the "loihi"
    layout and runs it on nengo-loihi's emulator.
    """
    if runtime == "loihi-emulator":
        options = dict({"spiking": True, "layout": "loihi"}, **options)
    return build_network(weights, **options).run(x, runtime=runtime)
