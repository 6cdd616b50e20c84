"""The ``nir`` target: the LMU as a NIR graph (Neuromorphic Intermediate Representation).

Output: ``model.nir`` (``nir.write``), a graph of continuous-time primitives. Time is measured in
samples (one input sample lasts 1 time unit; ``theta`` is in samples, as everywhere in lmu-edge).
Each LMU memory, ``dm/dt = A m + B u`` (Legendre ``A, B``; Voelker, Kajic and Eliasmith, "Legendre
Memory Units: Continuous-Time Representation in Recurrent Neural Networks"), is written as

* ``<i>.enc``: ``nir.Affine`` from the layer input to the memory input, ``B kron (x @ enc + bias)``,
  scaled by ``1 / r``;
* ``<i>.mem``: ``nir.LI`` with ``tau = 1``, ``v_leak = 0``, ``r``: ``dv/dt = -v + r * I``;
* ``<i>.rec``: ``nir.Affine`` (zero bias) carrying ``(A + I) / r`` from ``<i>.mem`` back into it,

so ``dv/dt = A v + B u``; a linear hidden Dense or a following linear Dense becomes a
``nir.Affine``. The graph's continuous system held at each sample over one time unit is exactly
the ZOH-discretized memory that :func:`lmu_edge.simulate` steps. ``r`` only rescales weights (the
system is the same for every ``r``); the file is written with ``r = 1`` and the ``rockpool``
runtime rewrites it to the ``r`` from which Rockpool's importer derives the time step it wants.

Only what NIR 1.0.8 and its runtimes can express is accepted: ZOH memories, linear Dense layers, no
hidden cell or a linear hidden Dense, no RNN path (its one-sample delay: NIR's Delay node has no Rockpool
or Sinabs import), no input_to_hidden (a join of two branches, which nirtorch's GraphExecutor, the importer
of both, runs wrongly), no TimePooling. NIR has no tanh, ReLU, sigmoid or softmax node; any other
layer is refused in one line naming it. Names from the model reach the file only as data,
in the ``metadata`` JSON string; node names are generated (``0.enc``, ``1.mem``, ...).

Runtime ``rockpool``: ``rockpool.nn.modules.torch.nir.from_nir``. Rockpool imports ``LI`` as
``ExpSynTorch`` (``v <- exp(-dt/tau) (v + I)``, ``dt = tau / (1 + r)``): an exponential-Euler step
of size ``dt``, first order. Each sample is held for ``steps_per_sample`` steps of ``dt = 1 / steps_per_sample``.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from .. import ir, registry
from ..errors import ArtifactError
from . import _nir_sinabs
from ._nir_graph import (
    adapt_spiking_for_rockpool,
    build_spiking,
    check_lmu,
    finish_graph,
    memory_ab,
    refuse,
    scale_inputs,
)

QUANTIZE = ("float",)
RUNTIMES = ("rockpool", "sinabs")
DEFAULT_RUNTIME = "rockpool"
VARIANTS = ("exact", "spiking")
OPTIONS = {
    # exact (the default): linear memory and readout; spiking: the memory held by integrate-and-fire neurons
    "variant": None,
    "spiking": None,  # True: variant "spiking" (the nengo target's spelling, and the CLI's --spiking)
    # simulator steps per input sample (the time step is 1 / steps_per_sample of a sample); default per variant
    "steps_per_sample": None,
    "neurons_per_dim": 100,  # spiking: neurons per memory dimension (half with encoder +1, half -1)
    "tau": 5,  # spiking: the memory's synaptic time constant, in samples (an integer: Rockpool reads it as one)
    "max_rate": 4.0,  # spiking: the highest firing rate, in spikes per sample, at the edge of a dimension's radius
    "seed": 0,  # spiking: the neurons' gains
    "sinabs_python": "",  # Python with sinabs 3.1.3 (default: $LMU_EDGE_SINABS_PYTHON)
}
DEFAULT_STEPS = {"exact": 2500, "spiking": 10}
SINABS_PYTHON_ENV = "LMU_EDGE_SINABS_PYTHON"
NIR_FILE = "model.nir"
# Relative error of Rockpool's first-order step against the ZOH model, times its time step in samples:
# measured 2.7, 2.2, 2.1 at 10, 40, 160 steps per sample (tests/test_targets_nir.py,
# test_error_falls_as_the_time_step_shrinks); the tolerance is this bound over steps_per_sample (1e-3 at 2500).
ERROR_PER_STEP = 2.5
# The same for Sinabs' exponential-Euler step (targets/_nir_sinabs.py): measured 1.15, 1.11, 1.10, 1.09 at
# 10, 40, 160, 640 steps per sample (test_sinabs_error_falls_as_the_time_step_shrinks); 5e-4 at 2500.
SINABS_ERROR_PER_STEP = 1.25


def tolerance(runtime: str, steps_per_sample: int) -> float:
    """The accepted relative error of ``runtime`` at ``steps_per_sample``: its measured bound over the steps."""
    return {"rockpool": ERROR_PER_STEP, "sinabs": SINABS_ERROR_PER_STEP}[runtime] / int(steps_per_sample)


def _options(options: dict) -> dict:
    o: dict[str, Any] = dict(OPTIONS)
    o.update({k: v for k, v in options.items() if k in OPTIONS})
    spiking = o.pop("spiking")
    if spiking is not None:
        if not isinstance(spiking, bool):
            raise ArtifactError(f"nir target: spiking must be true or false, got {spiking!r}")
        if o["variant"] is not None and (o["variant"] == "spiking") != spiking:
            raise ArtifactError(f"nir target: spiking={spiking} and variant={o['variant']!r} contradict each other")
        o["variant"] = "spiking" if spiking else "exact"
    o["variant"] = o["variant"] or "exact"
    if o["variant"] not in VARIANTS:
        raise ArtifactError(f"nir target: variant must be one of {', '.join(VARIANTS)}, got {o['variant']!r}")
    if o["steps_per_sample"] is None:
        o["steps_per_sample"] = DEFAULT_STEPS[o["variant"]]
    for name, lo in (("steps_per_sample", 2), ("neurons_per_dim", 2), ("tau", 1)):
        v = o[name]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v) or int(v) != v or v < lo:
            raise ArtifactError(f"nir target: {name} must be an integer >= {lo}, got {v!r}")
        o[name] = int(v)
    if o["neurons_per_dim"] % 2:
        raise ArtifactError(
            f"nir target: neurons_per_dim must be even (pairs of +1 / -1 encoders), got {o['neurons_per_dim']}"
        )
    mr = o["max_rate"]
    if isinstance(mr, bool) or not isinstance(mr, (int, float)) or not 0 < mr <= 1e6:
        raise ArtifactError(f"nir target: max_rate must be a positive number of spikes per sample, got {mr!r}")
    return o


def build_graph(graph: ir.Graph, r: float = 1.0):
    """The :class:`nir.NIRGraph` of ``graph`` (see the module docstring), LI inputs scaled by ``1 / r``."""
    nir = registry.require("nir", "nir", "the NIR target")
    nodes = {"input": nir.Input(input_type=np.array([graph.input_features]))}
    edges, prev, layers_meta = [], "input", []
    for i, (layer, _n_in, _n_out, _) in enumerate(graph.shapes()):
        layers_meta.append({"name": layer.name, "type": layer.TYPE})
        if isinstance(layer, ir.Dense):
            if layer.activation != "linear":
                refuse(layer, f"activation {layer.activation!r} has no NIR node")
            b = np.zeros(layer.units) if layer.bias is None else np.asarray(layer.bias)
            nodes[f"{i}.dense"] = nir.Affine(
                weight=np.asarray(layer.kernel, np.float64).T.copy(), bias=b.astype(np.float64)
            )
            edges.append((prev, f"{i}.dense"))
            prev = f"{i}.dense"
            continue
        check_lmu(layer)
        hid = layer.hidden
        if not layer.return_sequences:
            refuse(
                layer,
                "return_sequences=False (the exact variant's graph streams one output per time step)",
                "the spiking variant takes it (--variant spiking), or use the nengo target",
            )
        A, B = memory_ab(layer)
        q, d = layer.order, layer.memory_d
        enc = np.asarray(layer.input_encoders, np.float64)  # (n_in, d)
        bias = np.zeros(d) if layer.encoder_bias is None else np.asarray(layer.encoder_bias, np.float64)
        # state index c * q + j (channel-major, as lmu-edge flattens memory): input B_j * u_c
        W_in = np.kron(enc.T, B.reshape(q, 1))  # (d*q, n_in)
        b_in = np.kron(bias, B)
        n = d * q
        nodes[f"{i}.enc"] = nir.Affine(weight=W_in / r, bias=b_in / r)
        nodes[f"{i}.mem"] = nir.LI(tau=np.ones(n), r=np.full(n, float(r)), v_leak=np.zeros(n))
        # an Affine with zero bias, not a Linear: Sinabs' importer skips nir.Linear without a word
        nodes[f"{i}.rec"] = nir.Affine(weight=np.kron(np.eye(d), A + np.eye(q)) / r, bias=np.zeros(n))
        edges += [(prev, f"{i}.enc"), (f"{i}.enc", f"{i}.mem"), (f"{i}.mem", f"{i}.rec"), (f"{i}.rec", f"{i}.mem")]
        prev = f"{i}.mem"
        layers_meta[-1].update(order=q, theta=float(layer.theta), memory_d=d)
        if hid is not None:
            hb = np.zeros(hid.units) if hid.bias is None else np.asarray(hid.bias, np.float64)
            nodes[f"{i}.hidden"] = nir.Affine(weight=np.asarray(hid.kernel, np.float64).T.copy(), bias=hb)
            edges.append((prev, f"{i}.hidden"))
            prev = f"{i}.hidden"
    return finish_graph(graph, nodes, edges, prev, layers_meta, {"dt": 1.0})


def check_options(quantize: str, options: dict) -> None:
    """Refuse bad options before any work, and settle the variant (``spiking=True`` is variant "spiking"),
    so that the manifest names it for every runtime that reads it."""
    o = _options(options)
    options["variant"], options["spiking"] = o["variant"], o["variant"] == "spiking"


def emit(graph: ir.Graph, out_dir, options: dict) -> dict:
    """Write ``model.nir``. Exact variant: the tolerance follows the measured error of the Rockpool step;
    spiking variant: measured against the float model, not enforced (as the Nengo spiking network)."""
    nir = registry.require("nir", "nir", "the NIR target")
    o = _options(options)
    spiking = o["variant"] == "spiking"
    g = build_spiking(graph, o, options.get("calibration")) if spiking else build_graph(graph)
    nir.write(str(Path(out_dir) / NIR_FILE), g)
    tol = None if spiking else ERROR_PER_STEP / o["steps_per_sample"]
    rep: dict[str, Any] = {
        "variant": o["variant"],
        "nodes": len(g.nodes),
        "edges": len(g.edges),
        "steps_per_sample": o["steps_per_sample"],
        "rockpool_dt": 1.0 / o["steps_per_sample"],
        "tolerance": tol,
    }
    if spiking:
        rep.update(
            tau=o["tau"],
            neurons_per_dim=o["neurons_per_dim"],
            max_rate=o["max_rate"],
            neurons=int(sum(int(n.tau_mem.size) for n in g.nodes.values() if isinstance(n, nir.CubaLIF))),
        )
    return {"files": [NIR_FILE], "tolerance": tol, "report": {"nir": rep}}


def _meta(g) -> dict:
    try:
        return json.loads(g.metadata.get("lmu_edge", "{}"))
    except (TypeError, ValueError):
        return {}


def checked_path(artifact) -> Path:
    """A private copy of the artifact's sealed ``model.nir`` whose every HDF5 link and dataset header passed
    ``check_h5`` (no external links, virtual datasets or over-sized declarations), for any NIR reader."""
    path = Path(artifact.path) / NIR_FILE
    if not path.is_file():
        raise ArtifactError(f"{artifact.path}: {NIR_FILE} is missing; convert the model again")
    path = artifact.data_path(NIR_FILE)  # a private copy of the sealed bytes, its links checked (an HDF5 file)
    import h5py

    from ..converters.keras_files import check_h5

    with h5py.File(path, "r") as h5:
        check_h5(h5, f"{artifact.path}/{NIR_FILE}")
    return path


def read(artifact):
    """``nir.read`` of the artifact's ``model.nir``."""
    nir = registry.require("nir", "nir", "the NIR target")
    path = checked_path(artifact)
    try:
        return nir.read(str(path))
    except AssertionError as e:  # nir checks a node's parameters (their shapes) with assert
        why = " ".join(str(e).split())[:200] or "a node's parameters disagree"
        raise ArtifactError(
            f"{artifact.path}/{NIR_FILE}: not a graph nir accepts ({why}); convert the model again"
        ) from None


def rescale(g, r: float):
    """The same continuous system with every LI's ``r`` set to ``r`` (its input weights divided by it)."""
    nir = registry.require("nir", "nir", "the NIR target")
    nodes = dict(g.nodes)
    for key, node in g.nodes.items():
        if isinstance(node, nir.LI):
            old = float(np.unique(node.r)[0])
            nodes[key] = nir.LI(tau=node.tau, r=np.full_like(node.r, r), v_leak=node.v_leak)
            scale_inputs(g, nodes, key, lambda src, c=old / r: c)
    return nir.NIRGraph(nodes=nodes, edges=list(g.edges), metadata=dict(g.metadata))


class _Stream:
    """Rockpool, one sample per ``step``: ``substeps`` simulator steps with the sample held."""

    def __init__(self, artifact, runtime, substeps=None):
        registry.require("rockpool.nn.modules.torch.nir", "nir", "the rockpool runtime")  # needs nirtorch too
        opts = artifact.manifest["options"]
        variant = opts.get("variant", "exact")
        self.k = int(substeps or opts.get("steps_per_sample") or DEFAULT_STEPS[variant])
        g = read(artifact)
        self.where = f"{artifact.path}/{NIR_FILE}"
        self.softmax = bool(_meta(g).get("host_softmax"))
        if variant == "spiking":
            if int(self.k) != int(_meta(g).get("steps_per_sample", self.k)):
                raise ArtifactError(
                    f"the spiking NIR file is written for {_meta(g)['steps_per_sample']} steps per sample "
                    f"(its weights are for that time step); convert again with steps_per_sample={self.k}"
                )
            self.graph = adapt_spiking_for_rockpool(g, self.k)
        else:
            self.graph = rescale(g, float(self.k - 1))  # Rockpool: dt = tau / (1 + r)
        self.F = artifact.graph.input_features
        self.initial: dict | None = None
        self.reset()

    def reset(self, batch: int = 1) -> None:
        if int(batch) != 1:
            raise ArtifactError(
                "the rockpool runtime streams one sequence at a time (reset(batch=1)); "
                "Rockpool's ExpSynTorch keeps the state of the first batch item only"
            )
        if self.initial is None:
            import warnings

            from rockpool.nn.modules.torch.nir import from_nir

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    self.net = from_nir(self.graph)
                except AssertionError as e:  # nirtorch checks the graph with assert (no input node ...)
                    why = " ".join(str(e).split())[:200] or "its graph is not one nirtorch can run"
                    raise ArtifactError(
                        f"{self.where}: Rockpool cannot build this graph ({why}); convert the model again"
                    ) from None
            drop_zero_recurrence(self.net)
            keep_leak_factors(self.net)
            self.initial = {k: v.clone() for k, v in self.net.state_dict().items()}
        else:  # the imported network's parameters and states, copied back: a new import's, in a tenth of its time
            self.net.load_state_dict(self.initial)
        self.batch = int(batch)
        self.state = None

    def step(self, x_t) -> np.ndarray:
        import torch

        x = np.asarray(x_t, dtype=np.float32)
        single = x.ndim == 1
        x = x.reshape(1, -1) if single else x
        if x.shape != (self.batch, self.F):
            raise ArtifactError(f"step: expected shape ({self.F},) or ({self.batch}, {self.F}), got {np.shape(x_t)}")
        xt = torch.from_numpy(x)
        # one torch thread while stepping: a sample's products (3200 x 32 for the digits model) are too small
        # to share, and two processes on two cores with two threads each stepped 30x slower (spin-waiting
        # OpenMP workers: 47 s a digit against 1.5). The caller's setting comes back after each step.
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            with torch.no_grad():
                for _ in range(self.k):
                    y, self.state = _call(self.net, xt, self.state)
        finally:
            torch.set_num_threads(threads)
        y = y.detach().numpy().astype(np.float64).reshape(self.batch, -1)
        if self.softmax:  # NIR has no softmax node: the spiking file's last Dense gives logits
            y = np.exp(y - y.max(axis=-1, keepdims=True))
            y /= y.sum(axis=-1, keepdims=True)
        return y[0] if single else y


def drop_zero_recurrence(net) -> int:
    """Drop the recurrent matrix of each Rockpool ``LIFTorch`` imported without recurrence; return how many.

    Rockpool keeps a zero ``w_rec`` (N x N) in a feed-forward ``LIFTorch`` and still multiplies the spikes
    by it at every simulator step, where it checks ``hasattr(self, "w_rec")``: for the shipped digits model's
    3200 neurons that product was more than half of the run time. Adding its zeros to the finite synaptic
    current changes no bit, so the outputs are those of the plain import (``tests/test_targets_nir.py``
    compares them exactly)."""
    import torch

    dropped = 0
    for m in net.modules():
        if type(m).__name__ == "LIFTorch" and not bool(getattr(m, "_has_rec", True)) and hasattr(m, "w_rec"):
            if torch.count_nonzero(torch.as_tensor(m.w_rec)) == 0:
                del m.w_rec
                dropped += 1
    return dropped


def keep_leak_factors(net) -> int:
    """Keep the decay factors of each Rockpool ``LIFTorch`` with time constants (``leak_mode`` "taus") on the
    module; return how many.

    ``LIFTorch`` derives its ``alpha`` and ``beta`` from ``tau_mem``, ``tau_syn`` and ``dt`` on every read, and
    its step reads both: about a quarter of the digits model's Rockpool time (cProfile). Its own
    ``_get_all_leak_params`` computes them here once, from the same constant parameters, so each step
    multiplies by the same tensors (``tests/test_targets_nir.py`` compares the outputs exactly)."""
    kept = 0
    for m in net.modules():
        if type(m).__name__ == "LIFTorch" and getattr(m, "leak_mode", None) == "taus":
            params = m._get_all_leak_params()
            for name in ("alpha", "beta"):  # the instance's own attribute, found before Rockpool's __getattr__
                object.__setattr__(m, name, params[name].detach())
            kept += 1
    return kept


def _call(net, x, state):
    out = net(x) if state is None else net(x, state)
    return out if isinstance(out, tuple) else (out, None)


class _SinabsWorker:
    """The ``sinabs`` runtime: :mod:`._nir_sinabs` run by the Python that has Sinabs, over pipes."""

    def __init__(self, artifact, substeps=None):
        if artifact.manifest["options"].get("variant", "exact") != "exact":
            raise ArtifactError(
                "the sinabs runtime runs the exact variant only (Sinabs 3.1.3's nir 1.0.4 cannot read CubaLIF's "
                "v_reset, and its importer drops CubaLIF nodes); run the spiking variant with runtime 'rockpool'"
            )
        py = artifact.manifest.get("options", {}).get("sinabs_python") or os.environ.get(SINABS_PYTHON_ENV)
        if not py:
            raise ArtifactError(
                f"the 'sinabs' runtime runs in a separate Python with sinabs 3.1.3 (it pins "
                f"nir <= 1.0.4); make one with scripts/sinabs_venv.sh and set "
                f"{SINABS_PYTHON_ENV}=/path/to/python (or the option sinabs_python)"
            )
        self.k = int(substeps or artifact.manifest["options"].get("steps_per_sample") or DEFAULT_STEPS["exact"])
        path = checked_path(artifact)  # the Sinabs Python's nir.read follows whatever links the file holds
        self.F = artifact.graph.input_features
        # its stderr into a file, not a pipe: a worker that writes more than a pipe holds (a traceback of a
        # graph nested 400 deep) while this process waits on its stdout would block both for ever
        self._err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [py, _nir_sinabs.__file__, str(path), str(self.k)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,
        )

    def _ask(self, arr):
        try:
            _nir_sinabs.write_npy(self.proc.stdin, arr)
            return np.lib.format.read_array(_nir_sinabs.Pipe(self.proc.stdout), allow_pickle=False)
        except (OSError, EOFError, ValueError):
            with contextlib.suppress(Exception):
                self.proc.kill()
                self.proc.wait(timeout=10)
            self._err.seek(max(0, self._err.seek(0, os.SEEK_END) - 4096))
            err = self._err.read().decode(errors="replace").strip().splitlines()[-2:]
            raise ArtifactError(f"the sinabs worker failed: {' | '.join(err)[:300]}") from None

    def reset(self, batch: int = 1) -> None:
        """Start a new sequence (one at a time)."""
        if int(batch) != 1:
            raise ArtifactError("the sinabs runtime streams one sequence at a time (reset(batch=1))")
        self._ask(np.float64(0))

    def step(self, x_t) -> np.ndarray:
        """The output after one input sample."""
        x = np.asarray(x_t, dtype=np.float64)
        if x.shape not in ((self.F,), (1, self.F)):
            raise ArtifactError(f"step: expected shape ({self.F},) or (1, {self.F}), got {np.shape(x_t)}")
        y = self._ask(x.reshape(-1))
        return y if x.ndim == 1 else y.reshape(1, -1)

    def run(self, x) -> np.ndarray:
        """Whole sequences ``(N, T, F)``, each from a fresh state, one sample at a time."""
        return self._ask(np.asarray(x, dtype=np.float64))

    def close(self) -> None:
        """End the worker."""
        with contextlib.suppress(Exception):
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        with contextlib.suppress(Exception):
            self._err.close()

    __del__ = close


def stream(artifact, runtime):
    """A stepping session of ``runtime`` (``reset(batch=1)``, ``step(x_t)``)."""
    return _SinabsWorker(artifact) if runtime == "sinabs" else _Stream(artifact, runtime)


def run(artifact, x, runtime, substeps=None):
    """Run ``x (N, T, F)`` one sample at a time in Rockpool or Sinabs (one network per sequence: Rockpool's
    ``ExpSynTorch`` keeps the state of the first batch item only)."""
    if runtime == "sinabs":
        w = _SinabsWorker(artifact, substeps)
        try:
            y = w.run(x)
        finally:
            w.close()
        return y if artifact.graph.output_is_sequence else y[:, -1]
    s = _Stream(artifact, runtime, substeps)
    ys = []
    for seq in x:
        s.reset()
        ys.append(np.stack([s.step(seq[t]) for t in range(x.shape[1])]))
    y = np.stack(ys)
    return y if artifact.graph.output_is_sequence else y[:, -1]
