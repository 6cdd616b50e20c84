"""The ``nengo`` target: the recurrent model as a Nengo network, exact or spiking.

Output directory: ``network.py`` (a copy of :mod:`lmu_edge.targets.nengo_network`,
which needs only numpy and nengo) with ``build_network()``, and
``weights.npz`` (its weights and layer list), so the network loads without
lmu-edge. Runtimes:

* ``nengo``: ``nengo.Simulator``, the network as converted. The exact network
  (default) reproduces :func:`lmu_edge.simulate` to float64 rounding; the
  spiking one (``spiking=True``) holds each sample for ``steps_per_sample``
  simulator steps and keeps every LMU memory in an EnsembleArray of
  ``neurons_per_dim`` neurons per state dimension, through ``Lowpass(tau)``
  synapses with the digital-lowpass mapping (see ``network.py``).
* ``loihi-emulator``: the spiking network on ``nengo_loihi.Simulator(target="sim")``
  (8-bit weights, on-chip Lowpass synapses); nengo-loihi 1.1 needs numpy < 2.

The spiking form is measured, not enforced (``tolerance`` None): ``check``
writes its RMSE and output agreement against the float reference, per
``neurons_sweep`` entry, into ``report.json``.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import shutil
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np

from .. import ir, lti, reference, registry
from ..errors import ArtifactError, MissingDependencyError, ShapeError, UnsupportedLayerError

QUANTIZE = ("float",)
RUNTIMES = ("nengo", "loihi-emulator")
DEFAULT_RUNTIME = "nengo"
OPTIONS: dict[str, Any] = {
    "spiking": False,  # memories as spiking ensembles (else the exact, non-spiking network)
    "neurons_per_dim": 100,  # neurons per memory state dimension (spiking)
    "neuron_type": "spiking-relu",  # spiking-relu | lif | lif-rate | direct (ideal ensembles, for testing)
    "tau": 0.05,  # Lowpass synapse time constant in seconds (spiking)
    "steps_per_sample": 10,  # simulator steps each input sample is held for (spiking)
    "dt": 0.001,  # simulator step in seconds
    "seed": 0,  # network seed (neuron parameters)
    "neurons_sweep": [],  # extra neurons_per_dim values measured into report.json (spiking)
}
NEURON_TYPES = ("lif", "spiking-relu", "lif-rate", "direct")
NETWORK_FILE, WEIGHTS_FILE = "network.py", "weights.npz"
RADIUS_MARGIN = 1.1  # ensembles represent s / r with r 10% above the largest |s| seen in calibration
LOIHI_ENV_HINT = (
    "python3 -m venv .venv-loihi && .venv-loihi/bin/pip install 'numpy<2' 'lmu-edge[loihi]' "
    "(from a checkout: bash scripts/numpy1_tests.sh builds .venv-numpy1)"
)


# --- options ----------------------------------------------------------------------------------


def _check_options(options: dict) -> dict:
    o = dict(OPTIONS)
    o.update({k: v for k, v in options.items() if k in OPTIONS})
    if o["neuron_type"] not in NEURON_TYPES:
        raise ArtifactError(f"nengo target: unknown neuron_type {o['neuron_type']!r}; known: {', '.join(NEURON_TYPES)}")
    for key in ("neurons_per_dim", "steps_per_sample"):
        if int(o[key]) != o[key] or o[key] < 1:
            raise ArtifactError(f"nengo target: {key} must be a positive integer, got {o[key]!r}")
        o[key] = int(o[key])
    for key in ("tau", "dt"):
        if not float(o[key]) > 0:
            raise ArtifactError(f"nengo target: {key} must be a positive number of seconds, got {o[key]!r}")
        o[key] = float(o[key])
    sweep = o["neurons_sweep"] or []
    if isinstance(sweep, (int, float)):
        sweep = [sweep]
    if any(int(n) != n or n < 1 for n in sweep):
        raise ArtifactError(f"nengo target: neurons_sweep must list positive integers, got {sweep!r}")
    o["neurons_sweep"] = [int(n) for n in sweep]
    o["spiking"] = bool(o["spiking"])
    o["seed"] = None if o["seed"] is None else int(o["seed"])
    return o


# --- memory maps ------------------------------------------------------------------------------


def memory_map(layer: ir.LMU) -> tuple:
    """``(F, G, C, is_fir)`` per channel: ``s' = F s + G u``, ``m = C s``, one sample per step."""
    mem, q = layer.memory, layer.order
    if isinstance(mem, ir.ImpulseResponse):
        mem = (
            ir.DenseSS(layer.discretizer, *lti.legendre_discrete(q, layer.theta, layer.discretizer))
            if mem.kernel is None
            else ir.FIR(mem.kernel)
        )
    if isinstance(mem, ir.DenseSS):
        return np.array(mem.Abar, dtype=np.float64), np.array(mem.Bbar, dtype=np.float64), np.eye(q), False
    if isinstance(mem, ir.RungeKutta):
        F, G = lti.rk_map(q, layer.theta, mem.rk_order, mem.substeps)
        return F, G, np.eye(q), False
    if isinstance(mem, ir.FIR):
        K = np.array(mem.kernel, dtype=np.float64)
        L = K.shape[1]
        G = np.zeros(L)
        G[0] = 1.0
        return np.eye(L, k=-1), G, K, True
    raise UnsupportedLayerError(f"layer {layer.name!r}: memory {type(mem).__name__} has no Nengo form")


def _close(a, b) -> bool:
    return bool(np.max(np.abs(a - b)) <= 1e-9 * max(np.max(np.abs(b)), 1e-300))


def substep_map(layer: ir.LMU, k: int) -> tuple:
    """``(Fk, Gk, Ck)``: the memory stepped once per simulator step, input held for ``k`` steps,
    so that ``k`` steps give the one-sample map exactly (``Fk^k = F``)."""
    F, G, C, fir = memory_map(layer)
    if k == 1:
        return F, G, C
    if fir:  # a delay line at the simulator rate; tap l*k holds the input of l samples ago
        L = F.shape[0]
        n = (L - 1) * k + 1
        Gk = np.zeros(n)
        Gk[0] = 1.0
        Ck = np.zeros((C.shape[0], n))
        Ck[:, ::k] = C
        return np.eye(n, k=-1), Gk, Ck
    mem, q = layer.memory, layer.order
    candidates = []
    if isinstance(mem, ir.DenseSS) and mem.method == "zoh":  # ZOH over 1/k of a sample: theta * k
        candidates.append(lti.legendre_discrete(q, layer.theta * k, "zoh"))
    if isinstance(mem, ir.RungeKutta) and mem.substeps % k == 0:  # the same substeps, k per simulator step
        candidates.append(lti.rk_map(q, layer.theta * k, mem.rk_order, mem.substeps // k))
    candidates.append(_root_map(F, G, k))
    for cand in candidates:
        if cand is None:
            continue
        Fk, Gk = cand
        P, acc = np.eye(F.shape[0]), np.zeros_like(G)
        for _ in range(k):
            acc = P @ Gk + acc
            P = Fk @ P
        if _close(P, F) and _close(acc, G):
            return Fk, Gk, C
    raise UnsupportedLayerError(
        f"layer {layer.name!r}: its memory's one-sample map has no real {k}-th root, so it cannot be "
        f"spread over steps_per_sample={k} simulator steps; use steps_per_sample=1 or fold with zoh or rk4"
    )


def _root_map(F, G, k):
    import warnings

    import scipy.linalg

    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # accuracy is checked by the caller
        try:
            Lg = scipy.linalg.logm(F)
        except ValueError:  # logm's error estimate overflowed (issue 52, seed 2: ZOH order 224): no root here
            return None
    if np.iscomplexobj(Lg):
        if np.max(np.abs(Lg.imag)) > 1e-9 * max(np.max(np.abs(Lg.real)), 1.0):
            return None
        Lg = Lg.real
    if not np.all(np.isfinite(Lg)):
        return None
    Fk = scipy.linalg.expm(Lg / k)
    S = sum(np.linalg.matrix_power(Fk, i) for i in range(k))
    return Fk, np.linalg.solve(S, G)


# --- emit ------------------------------------------------------------------------------------


def _layer_spec(i: int, layer, n_in: int, options: dict, arrays: dict) -> dict:
    def put(name, value):
        if value is not None:
            arrays[f"{i}.{name}"] = np.array(value, dtype=np.float64)

    if isinstance(layer, ir.Dense):
        put("kernel", layer.kernel)
        put("bias", layer.bias)
        return {"kind": "dense", "name": layer.name, "activation": layer.activation}
    if isinstance(layer, ir.Activation):
        return {"kind": "activation", "name": layer.name, "activation": layer.activation}
    if isinstance(layer, ir.TimePooling):
        return {"kind": "time_pooling", "name": layer.name}
    if isinstance(layer, ir.BandConv):
        raise UnsupportedLayerError(
            f"layer {layer.name!r} (BandConv): a band convolution has no Nengo form here; "
            f"convert this model for c, tflite or onnx"
        )
    if not isinstance(layer, ir.LMU):
        raise UnsupportedLayerError(f"layer {layer.name!r} ({type(layer).__name__}) has no Nengo form")
    put("enc", layer.input_encoders)
    put("enc_bias", layer.encoder_bias)
    put("henc", layer.hidden_encoders)
    put("menc", layer.memory_encoders)
    F, G, C, fir = memory_map(layer)
    put("F", F)
    put("G", G)
    put("C", C)
    hid = layer.hidden
    spec = {
        "kind": "lmu",
        "name": layer.name,
        "memory_d": layer.memory_d,
        "order": layer.order,
        "input_to_hidden": bool(layer.input_to_hidden),
        "exact": True,
        "fir": fir,
        "hidden": None if hid is None else ("dense" if isinstance(hid, ir.HiddenDense) else "simple_rnn"),
        "hidden_activation": None if hid is None else hid.activation,
    }
    if hid is not None:
        put("hW", hid.kernel)
        put("hb", hid.bias)
        if isinstance(hid, ir.HiddenSimpleRNN):
            put("hU", hid.recurrent_kernel)
    try:
        Fk, Gk, Ck = substep_map(layer, options["steps_per_sample"])
        put("Fk", Fk)
        put("Gk", Gk)
        put("Ck", Ck)
    except UnsupportedLayerError as e:
        if options["spiking"]:
            raise
        spec["spiking_error"] = str(e)
    return spec


def _save_weights(path: Path, spec: dict, arrays: dict) -> None:
    np.savez(path, spec=np.array(json.dumps(spec)), **arrays)


def _calibration_input(graph: ir.Graph, calibration, seed: int = 0) -> np.ndarray:
    if calibration is not None:
        return np.asarray(calibration, dtype=np.float64)
    T = graph.seq_len or int(min(max(10 * max([layer.theta for layer in graph.lmu_layers] or [10.0]), 16), 1000))
    x = np.random.default_rng(seed).standard_normal((4, T, graph.input_features))
    # an unstable model's state grows past what float64 carries on a long probe (issue 52, seed 1026: the
    # radii's run failed inside nengo with an invalid dot); its radii come from the steps before that
    from lmu_edge.reference import stable_cut

    return x[:, : stable_cut(graph, x)[0]]


def _radii(graph, spec, arrays, x) -> None:
    """Per state dimension, the largest |s| of each exact memory on ``x`` (times a margin)."""
    net = _network_module_from(Path(__file__).with_name("nengo_network.py"))
    model = net.build_network((spec, arrays), spiking=False, probe_states=True)
    from nengo.exceptions import SimulationError

    try:
        _, states = model.run(x, states=True)
    except (FloatingPointError, SimulationError):  # nengo's on inf / NaN (issue 52, seed 1026: 1e300 in 12 steps)
        raise ShapeError(
            f"graph {graph.name!r}: its states overflow float64 on the {x.shape[1]}-step input the nengo target "
            f"sizes its ensembles' radii on: an unstable model (a memory or hidden recurrence whose gain exceeds "
            f"1); retrain it with a ZOH memory, a larger theta or a stable hidden cell"
        ) from None
    for i, (layer_spec, layer) in enumerate(zip(spec["layers"], graph.layers, strict=True)):
        if layer_spec["kind"] != "lmu" or f"{i}.Fk" not in arrays:
            continue
        d = layer.memory_d
        s = np.abs(states[layer.name]).reshape(-1, d, arrays[f"{i}.F"].shape[0])
        n = arrays[f"{i}.Fk"].shape[0]
        if layer_spec["fir"]:  # every tap of a delay line holds the same input signal
            r = np.repeat(s.max(axis=(0, 2))[:, None], n, axis=1)
        else:
            r = s.max(axis=0)
        r = RADIUS_MARGIN * np.maximum(r, max(1e-3 * float(r.max()), 1e-9))
        arrays[f"{i}.radius"] = r
        # the memory's input u, recovered from the states (s[n] = F s[n-1] + G u[n]): its scale for Loihi
        F, G = arrays[f"{i}.F"], arrays[f"{i}.G"]
        s = states[layer.name].reshape(*states[layer.name].shape[:2], d, F.shape[0])
        prev = np.concatenate([np.zeros_like(s[:, :1]), s[:, :-1]], axis=1)
        u = np.einsum("ntdi,i->ntd", s - np.einsum("ij,ntdj->ntdi", F, prev), G) / float(G @ G)
        umax = np.abs(u).max(axis=(0, 1))
        arrays[f"{i}.u_scale"] = RADIUS_MARGIN * np.maximum(umax, max(1e-3 * float(umax.max()), 1e-9))


def emit(graph: ir.Graph, out_dir, options: dict) -> dict:
    """Write ``network.py`` and ``weights.npz``; see the module docstring."""
    registry.require("nengo", "nengo", "the Nengo target")
    o = _check_options(options)
    out_dir = Path(out_dir)
    arrays: dict[str, np.ndarray] = {}
    layers: list[dict] = []
    for i, (layer, n_in, _, _) in enumerate(graph.shapes()):
        layers.append(_layer_spec(i, layer, n_in, o, arrays))
    run_options = {k: o[k] for k in ("spiking", "neurons_per_dim", "neuron_type", "tau", "dt", "seed")}
    spec = {
        "format": "lmu-edge-nengo",
        "version": 1,
        "name": graph.name,
        "input_features": int(graph.input_features),
        "output_is_sequence": bool(graph.output_is_sequence),
        "steps_per_sample": o["steps_per_sample"],
        "options": run_options,
        "layers": layers,
    }
    if any(f"{i}.Fk" in arrays for i in range(len(layers))):
        _radii(graph, spec, arrays, _calibration_input(graph, options.get("calibration")))
    _save_weights(out_dir / WEIGHTS_FILE, spec, arrays)
    shutil.copyfile(Path(__file__).with_name("nengo_network.py"), out_dir / NETWORK_FILE)
    lmus = [spec_ for spec_ in layers if spec_["kind"] == "lmu"]
    dims = sum(
        int(spec_["memory_d"]) * arrays[f"{i}.Fk"].shape[0]
        for i, spec_ in enumerate(layers)
        if spec_["kind"] == "lmu" and f"{i}.Fk" in arrays
    )
    nengo_report = {"mode": "spiking" if o["spiking"] else "exact", "dt": o["dt"], "lmu_layers": len(lmus)}
    if o["spiking"]:
        nengo_report.update(
            steps_per_sample=o["steps_per_sample"],
            tau=o["tau"],
            neuron_type=o["neuron_type"],
            neurons_per_dim=o["neurons_per_dim"],
            ensembles=int(dims),
            neurons=int(dims * o["neurons_per_dim"]),
        )
    out: dict[str, Any] = {"files": [NETWORK_FILE, WEIGHTS_FILE], "report": {"nengo": nengo_report}}
    if o["spiking"]:
        out["tolerance"] = None  # measured against the float reference in check(), not enforced
    return out


# --- running ----------------------------------------------------------------------------------

_MODULES: dict = {}
_MODELS: dict = {}  # (artifact, runtime, options) -> (built network, its open simulator)


@atexit.register
def _close_simulators() -> None:
    """Close the cached simulators at exit: nengo warns (ResourceWarning) about one collected while open."""
    while _MODELS:
        _, (_, sim) = _MODELS.popitem()
        sim.close()


def _network_module_from(path: Path, source: bytes | None = None):
    """A ``network.py`` as a module, run from its source text (``source``, else ``path``'s bytes), each text
    once. Not imported: the import system would run a compiled ``__pycache__/*.pyc`` beside the file instead
    of its text (an unchecked-hash ``.pyc`` even when the text differs), and an artifact's sealed bytes are
    the only code of it that runs."""
    path = Path(path).resolve()
    if source is None:
        source = path.read_bytes()
    digest = hashlib.sha256(source).hexdigest()[:16]
    key = (str(path), digest)
    if key not in _MODULES:
        registry.require("nengo", "nengo", "the Nengo target")
        name = f"_lmu_edge_nengo_network_{digest}_{len(_MODULES)}"
        try:
            code = compile(source, str(path), "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as e:
            raise ArtifactError(f"{path}: not valid Python ({e}); convert the model again") from None
        mod = types.ModuleType(name)
        mod.__file__ = str(path)
        sys.modules[name] = mod  # dataclasses and nengo's pickling look the module up by name
        try:
            exec(code, mod.__dict__)  # noqa: S102 (the sealed text of network.py: see the docstring)
        except BaseException:
            del sys.modules[name]
            raise
        _MODULES[key] = mod
    return _MODULES[key]


def network_module(artifact):
    """The artifact's ``network.py`` as a module, run from its sealed text (:meth:`Artifact.sealed_bytes`)."""
    path = Path(artifact.path) / NETWORK_FILE
    if not path.is_file():
        raise ArtifactError(f"{artifact.path}: {NETWORK_FILE} is missing; convert the model again")
    sealed = getattr(artifact, "sealed_bytes", None)
    return _network_module_from(path, sealed(NETWORK_FILE) if sealed is not None else None)


def require_loihi():
    """Import nengo_loihi, or say exactly how to get an environment where it works."""
    major = int(np.__version__.split(".")[0])
    if major >= 2:
        raise MissingDependencyError(
            f"runtime 'loihi-emulator' needs nengo-loihi 1.1, which works only with numpy < 2 (this environment "
            f"has numpy {np.__version__}); make an environment for it: {LOIHI_ENV_HINT}"
        )
    return registry.require("nengo_loihi", "loihi", "the Loihi emulator runtime")


def _model(artifact, runtime, **overrides):
    """A built network and its simulator, cached per artifact, runtime and options."""
    weights = artifact.data_path(WEIGHTS_FILE)  # a private copy of the sealed bytes (Artifact.data_path)
    key = (str(Path(artifact.path).resolve()), weights.stat().st_mtime_ns, runtime, tuple(sorted(overrides.items())))
    if key not in _MODELS:
        if runtime == "loihi-emulator":
            # the memory laid out for nengo-loihi: see "Loihi layout" in network.py
            require_loihi()
            overrides.setdefault("spiking", True)
            overrides.setdefault("layout", "loihi")
        net = network_module(artifact)
        model = net.build_network(weights, **overrides)
        sim = model.simulator(runtime)
        while len(_MODELS) >= 4:
            _, (_, old) = _MODELS.popitem()
            old.close()
        _MODELS[key] = (model, sim)
    return _MODELS[key]


def run(artifact, x, runtime, **overrides):
    """Run ``x (N, T, F)`` in ``runtime``; ``overrides`` as ``network.build_network``'s options. The exact
    network's last run is kept: its verification and :func:`check`'s exact-network figure run the same
    network on the same input (a third of a nengo conversion: issue 52's generated models in CI)."""
    model, sim = _model(artifact, runtime, **overrides)
    if runtime != "nengo" or model.options.get("spiking"):
        return model.run(x, sim)
    x = np.asarray(x, dtype=np.float64)
    key = (id(model), x.shape, hashlib.blake2b(np.ascontiguousarray(x).tobytes(), digest_size=16).digest())
    if _LAST_RUN.get("key") != key:
        _LAST_RUN.update(key=key, y=model.run(x, sim), model=model)  # (the model kept: its id stays its own)
    return np.array(_LAST_RUN["y"])


_LAST_RUN: dict = {}  # the exact network's last run: {"key", "y", "model"} (run)


class _Stream:
    """One simulator per batch item; each ``step`` runs ``steps_per_sample`` simulator steps."""

    def __init__(self, artifact, runtime):
        self.artifact, self.runtime = artifact, runtime
        self.model, _ = _model(artifact, runtime)
        if self.model.phase >= self.model.k:
            raise UnsupportedLayerError(
                f"{artifact.path}: the spiking network's output lags the input by more than one sample "
                f"(stacked spiking LMUs, or the Loihi emulator's transport latency), so it cannot be streamed; "
                f"use run() on whole sequences"
            )
        self.sims = []
        self.reset()

    def reset(self, batch: int = 1) -> None:
        for s in self.sims:
            s.close()
        self.sims = [self.model.simulator(self.runtime) for _ in range(int(batch))]
        self.batch = int(batch)

    def step(self, x_t) -> np.ndarray:
        F = self.model.spec["input_features"]
        x = np.asarray(x_t, dtype=np.float64)
        single = x.ndim == 1
        x = x.reshape(1, -1) if single else x
        if x.shape != (self.batch, F):
            raise reference.ShapeError(f"step: expected shape ({F},) or ({self.batch}, {F}), got {np.shape(x_t)}")
        k, back = self.model.k, self.model.k - self.model.phase
        out = []
        for b, sim in enumerate(self.sims):
            self.model.input.x = np.repeat(x[b : b + 1], sim.n_steps // k + 1, axis=0)  # sample n // k is x_t
            sim.run_steps(k)
            out.append(np.array(sim.data[self.model.probe][-back]))
            sim.clear_probes()
        y = np.stack(out)
        return y[0] if single else y


def stream(artifact, runtime):
    """A step-at-a-time session over the artifact's Nengo network (``reset``, ``step``)."""
    return _Stream(artifact, runtime)


# --- measurements -----------------------------------------------------------------------------


def metrics(y, ref) -> dict:
    """RMSE, relative error and (for vector outputs) argmax agreement of ``y`` against ``ref``."""
    from ..metrics import relative_error

    y, ref = np.asarray(y, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    out = {"rmse": float(np.sqrt(np.mean((y - ref) ** 2))), "relative_error": float(relative_error(y, ref))}
    if ref.shape[-1] > 1:
        out["argmax_agreement"] = float(np.mean(np.argmax(y, -1) == np.argmax(ref, -1)))
    return out


def loihi_resources(sim) -> dict:
    """Chip resources of a ``nengo_loihi.Simulator``'s model: one block per core."""
    blocks = list(sim.model.blocks)
    syn = [s for b in blocks for s in b.synapses]
    util = [b.utilization() for b in blocks]
    return {
        "cores": len(blocks),
        "compartments": int(sum(b.compartment.n_compartments for b in blocks)),
        "synapses": int(sum(sum(int(np.count_nonzero(w)) for w in s.weights) for s in syn)),
        "synapse_memory_bits": int(sum(s.bits() for s in syn)),
        "max_core_utilization": {k: float(max(u[k][0] / u[k][1] for u in util)) for k in util[0]} if util else {},
    }


def check(artifact, x) -> dict:
    """Spiking networks: error against the float reference per neurons_per_dim (and on the Loihi
    emulator where nengo-loihi works); the exact network's error in every case."""
    opts = artifact.manifest["options"]
    ref = reference.simulate(artifact.source, x)
    exact = {"spiking": False} if opts.get("spiking") else {}  # (non-spiking: the verification's own run)
    out = {"exact_network": metrics(run(artifact, x, "nengo", **exact), ref)}
    if not opts.get("spiking"):
        return out
    rows, own = [], int(opts["neurons_per_dim"])
    for n in sorted({own, *[int(v) for v in opts.get("neurons_sweep") or []]}):
        kw = {} if n == own else {"neurons_per_dim": n}  # the artifact's own: the network built for its verification
        rows.append(dict(neurons_per_dim=n, **metrics(run(artifact, x, "nengo", **kw), ref)))
    out["spiking"] = {
        "against": "float reference (source model)",
        "neuron_type": opts["neuron_type"],
        "tau": opts["tau"],
        "steps_per_sample": opts["steps_per_sample"],
        "by_neurons_per_dim": rows,
    }
    try:
        require_loihi()
    except MissingDependencyError as e:
        out["loihi_emulator"] = {"skipped": str(e)}
        return out
    model, sim = _model(artifact, "loihi-emulator")
    out["loihi_emulator"] = dict(metrics(model.run(x, sim), ref), **loihi_resources(sim))
    return out
