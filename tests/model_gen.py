"""Random valid keras-lmu models over the supported option space (issue 52), for the generated-model tests;
a quarter of the seeds draw ``lmu_edge.torch`` models instead (tests/model_gen_torch.py).

A model is a plain JSON-able *spec* (:func:`draw` makes one from an integer seed; the same seed gives the
same spec on every machine), built into a Keras model by :func:`build`, trained briefly on synthetic signals
of several kinds (sines, noise, steps, sparse events) by :func:`make`, which saves ``model.keras`` with its
calibration (>= 64 sequences) and held-out test inputs (>= 32 sequences, drawn from another seed).

The option space is docs/keras.md's: ``LMUFeedforward`` (fft / raw, ``truncate_ir``), ``LMU`` (parallel
path without flags, RNN path with any of ``hidden_to_memory``, ``memory_to_memory``, ``trainable_theta``)
and ``RNN(LMUCell)``; zoh / euler; ``memory_d`` 1-8; ``order`` 1 up to ``limits.MAX_ORDER`` (most draws
up to 256); ``theta`` 0.5q-100q; hidden cell ``Dense`` / ``SimpleRNNCell`` / none with every supported
activation; ``input_to_hidden``, ``use_bias``, ``return_sequences``, known and unknown length; stacks of up
to three LMU layers; ``Dense``, ``TimeDistributed(Dense)``, ``Activation`` and ``GlobalAveragePooling1D``
before and after; every head activation. Where keras-lmu itself needs something (an integer theta for an
impulse response of unknown length, ``input_d`` for ``LMUCell`` without a hidden cell; no ``input_to_hidden``
without a hidden cell on ``LMU``'s RNN path, which never passes ``input_d``), the draw respects it.

Needs TensorFlow and keras-lmu. Import this module by path (scripts/gen_models.py does): it is a helper,
not a test module.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import warnings
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np

ACTIVATIONS = ("linear", "relu", "relu6", "tanh", "sigmoid", "softmax", "silu")
LAYERS = ("ff", "lmu", "cell")  # LMUFeedforward, keras_lmu.LMU, RNN(LMUCell)
FLAGS = ("hidden_to_memory", "memory_to_memory", "trainable_theta")
SIGNALS = ("sines", "noise", "steps", "events")
N_TRAIN, N_CAL, N_TEST = 96, 64, 32
MAX_ORDER = 1024  # lmu_edge.limits.MAX_ORDER (docs/security.md)


def _order(r: np.random.Generator) -> int:
    # most draws up to 256, log-uniform so that small orders are as common as large ones; 1 in 50 above
    if r.random() < 0.02:
        return int(r.integers(257, MAX_ORDER + 1))
    return int(np.round(np.exp(r.uniform(0.0, math.log(256.0)))))


def _euler_trainable(order: int, theta: float, steps: int) -> bool:
    # Euler's step is I + A / theta: its spectral radius may pass 1 (keras-lmu accepts that, and over a
    # short sequence such a model trains, as issue 52's models did); an impulse response growing past 1e4
    # within the sequence does not train (its outputs overflow float32), so such a theta is drawn again
    from lmu_edge import lti

    with np.errstate(all="ignore"):
        h = lti.legendre_impulse_response(order, theta, steps, "euler")
    return bool(np.all(np.isfinite(h)) and np.max(np.abs(h)) < 1e4)


def _act(r: np.random.Generator) -> str:
    return str(r.choice(ACTIVATIONS))


def _lmu(r: np.random.Generator, seq: bool, known_len: bool, T: int) -> dict:
    kind = str(r.choice(LAYERS))
    order = _order(r)
    disc = str(r.choice(["zoh", "euler"]))
    flags = {f: False for f in FLAGS}
    if kind != "ff":
        # the three feedback flags alone and together, and (keras_lmu.LMU) none: the parallel path
        pick = int(r.integers(0, 8))
        for i, f in enumerate(FLAGS):
            flags[f] = bool(pick >> i & 1)
    parallel = kind == "ff" or (kind == "lmu" and not any(flags.values()))
    hidden_kind = str(r.choice(["dense", "simplernn", "none"]))
    if hidden_kind == "none" and flags["hidden_to_memory"]:
        hidden_kind = str(r.choice(["dense", "simplernn"]))  # keras-lmu: hidden_to_memory needs a hidden cell
    hidden = None if hidden_kind == "none" else {"kind": hidden_kind, "units": int(r.integers(1, 33)), "act": _act(r)}
    lo, hi = 0.5 * order, 100.0 * order
    if parallel and not known_len:
        hi = max(lo * 1.01, min(hi, 2000.0))  # keras-lmu builds a 5 * theta step response: at most 10000 steps
    for _ in range(64):
        theta = float(np.exp(r.uniform(math.log(lo), math.log(hi))))
        if parallel and not known_len:
            theta = int(max(1, round(theta)))  # keras-lmu's impulse length is 5 * theta steps: an int (not 5.0 * ...)
        else:
            theta = round(theta, 3)
        if disc != "euler" or _euler_trainable(order, theta, T):
            break
    else:
        disc = "zoh"  # no trainable Euler theta drawn
    spec = {
        "layer": kind,
        "memory_d": int(r.integers(1, 9)),
        "order": order,
        "theta": theta,
        "discretizer": disc,
        "hidden": hidden,
        # keras-lmu's LMU on its RNN path builds its LMUCell without input_d, which input_to_hidden without a
        # hidden cell needs (seed 1005: "input_d must be specified"); RNN(LMUCell) takes it
        "input_to_hidden": bool(r.random() < 0.4) and not (kind == "lmu" and any(flags.values()) and hidden is None),
        "use_bias": bool(r.random() < 0.4),
        # keras-lmu: without a kernel the cell's whole input (x, and h with hidden_to_memory) is u: memory_d wide
        "no_kernel": bool(r.random() < 0.1) and not flags["hidden_to_memory"],
        "return_sequences": seq,
        **flags,
    }
    if kind == "ff":
        spec["conv_mode"] = str(r.choice(["fft", "raw"]))
        spec["truncate_ir"] = None if spec["conv_mode"] == "fft" or r.random() < 0.5 else float(r.choice([1e-4, 1e-3]))
    return spec


def _plain(r: np.random.Generator, per_step: bool) -> dict:
    """A layer before or after the LMUs (``per_step``: on 3-D inputs)."""
    kinds = ["dense", "activation"] + (["td_dense"] if per_step else [])
    k = str(r.choice(kinds))
    if k == "activation":
        return {"kind": k, "act": _act(r)}
    return {"kind": k, "units": int(r.integers(1, 17)), "act": _act(r)}


def _torch_half():
    """tests/model_gen_torch.py, loaded by path beside this module (which it uses)."""
    import importlib.util
    import sys

    if "model_gen_torch" not in sys.modules:
        sys.modules.setdefault("model_gen", sys.modules[__name__])  # what model_gen_torch reads draws from
        spec = importlib.util.spec_from_file_location("model_gen_torch", Path(__file__).with_name("model_gen_torch.py"))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        sys.modules["model_gen_torch"] = mod
    return sys.modules["model_gen_torch"]


def draw(seed: int) -> dict:
    """The spec of generated model ``seed``: a valid keras-lmu model over the supported option space, or (a
    quarter of the seeds, tests/model_gen_torch.py) an ``lmu_edge.torch`` one over the torch layer's."""
    if _torch_half().is_torch(seed):
        return _torch_half().draw(seed)
    r = np.random.default_rng([52, int(seed)])
    n_lmu = int(r.choice([1, 1, 1, 2, 2, 3]))
    known_len = bool(r.random() < 0.6)
    T = int(r.integers(12, 49))
    F = int(r.integers(1, 14))
    last_seq = bool(r.random() < 0.5)
    before = [_plain(r, True) for _ in range(int(r.choice([0, 0, 1, 1, 2])))]
    lmus = [_lmu(r, i < n_lmu - 1 or last_seq, known_len, T) for i in range(n_lmu)]
    after = []
    if last_seq:
        after = [_plain(r, True) for _ in range(int(r.choice([0, 1, 1, 2])))]
        if r.random() < 0.4:
            after.append({"kind": "pool"})
    elif r.random() < 0.4:
        after = [_plain(r, False)]
    head = {"units": int(r.integers(1, 11)), "act": _act(r)}
    return spec_of(seed, "keras", known_len, T, F, before, lmus, after, head)


def spec_of(seed, source, known_len, T, F, before, lmus, after, head) -> dict:
    """A model's spec from its parts, in the one key order every spec has."""
    return {
        "seed": int(seed),
        "source": source,
        "known_len": known_len,
        "T": T,
        "features": F,
        "before": before,
        "lmus": lmus,
        "after": after,
        "head": head,
    }


def options(spec: dict) -> set:
    """The option values a spec exercises, as ``(option, value)`` pairs (the coverage the CI seeds need)."""
    out = {
        ("known_len", spec["known_len"]),
        ("n_lmu", len(spec["lmus"])),
        ("head_act", spec["head"]["act"]),
        ("source", spec["source"]),
    }
    for p in spec["before"]:
        out.add(("before", p["kind"]))
    for p in spec["after"]:
        out.add(("after", p["kind"]))
    for m in spec["lmus"]:
        out |= {
            ("layer", m["layer"]),
            ("discretizer", m["discretizer"]),
            ("memory_d", m["memory_d"]),
            ("order", _bucket(m["order"])),
            ("theta/order", _ratio_bucket(m["theta"] / m["order"])),
            ("hidden", m["hidden"]["kind"] if m["hidden"] else "none"),
            ("input_to_hidden", m["input_to_hidden"]),
            ("use_bias", m["use_bias"]),
            ("return_sequences", m["return_sequences"]),
            ("flags", "+".join(f for f in FLAGS if m[f]) or "none"),
        }
        if m["hidden"]:
            out.add(("hidden_act", m["hidden"]["act"]))
        if m["layer"] == "ff":
            out.add(("conv_mode", m["conv_mode"] + ("+truncate" if m["truncate_ir"] else "")))
    return out


#: every option value :func:`options` can report (the theta/order bucket above 100 only by rounding, left out)
ALL_OPTIONS = (
    {("known_len", v) for v in (True, False)}
    | {("n_lmu", n) for n in (1, 2, 3)}
    | {("head_act", a) for a in ACTIVATIONS}
    | {("hidden_act", a) for a in ACTIVATIONS}
    | {("source", k) for k in ("keras", "torch")}
    | {("before", k) for k in ("dense", "td_dense", "activation")}
    | {("after", k) for k in ("dense", "td_dense", "activation", "pool")}
    | {("layer", k) for k in (*LAYERS, "torch")}
    | {("discretizer", k) for k in ("zoh", "euler")}
    | {("memory_d", d) for d in range(1, 9)}
    | {("order", b) for b in ("<=4", "<=16", "<=64", "<=256", ">256")}
    | {("theta/order", b) for b in ("<=2", "<=10", "<=100")}
    | {("hidden", k) for k in ("dense", "simplernn", "none")}
    | {(k, v) for k in ("input_to_hidden", "use_bias", "return_sequences") for v in (True, False)}
    | {("flags", "+".join(f for i, f in enumerate(FLAGS) if c >> i & 1) or "none") for c in range(8)}
    | {("conv_mode", k) for k in ("fft", "raw", "raw+truncate")}
)


def _bucket(q: int) -> str:
    for hi in (4, 16, 64, 256):
        if q <= hi:
            return f"<={hi}"
    return ">256"


def _ratio_bucket(r: float) -> str:
    for hi in (2, 10, 100):
        if r <= hi * 1.0001:
            return f"<={hi}"
    return ">100"


def _activation(name: str):
    import keras

    return keras.activations.get(name) if name == "relu6" else name


def build(spec: dict):
    """The Keras model of ``spec`` (untrained)."""
    import keras
    import keras_lmu

    L = keras.layers
    T = spec["T"] if spec["known_len"] else None
    F = spec["features"]
    layers: list = [keras.Input((T, F))]
    width = F

    def plain(p, per_step):
        nonlocal width
        if p["kind"] == "activation":
            return L.Activation(_activation(p["act"]))
        if p["kind"] == "pool":
            return L.GlobalAveragePooling1D()
        width = p["units"]
        d = L.Dense(p["units"], activation=_activation(p["act"]))
        return L.TimeDistributed(d) if p["kind"] == "td_dense" else d

    for p in spec["before"]:
        layers.append(plain(p, True))
    for m in spec["lmus"]:
        hidden = None
        if m["hidden"] is not None:
            h = m["hidden"]
            cls = L.Dense if h["kind"] == "dense" else L.SimpleRNNCell
            hidden = cls(h["units"], activation=_activation(h["act"]))
        kw = {
            "memory_d": width if m["no_kernel"] else m["memory_d"],
            "order": m["order"],
            "theta": m["theta"],
            "hidden_cell": hidden,
            "input_to_hidden": m["input_to_hidden"],
            "discretizer": m["discretizer"],
            "use_bias": m["use_bias"],
            "kernel_initializer": None if m["no_kernel"] else "glorot_uniform",
        }
        if m["layer"] == "ff":
            layers.append(
                keras_lmu.LMUFeedforward(
                    **kw, conv_mode=m["conv_mode"], truncate_ir=m["truncate_ir"], return_sequences=m["return_sequences"]
                )
            )
        else:
            flags = {f: m[f] for f in FLAGS}
            if m["layer"] == "lmu":
                layers.append(keras_lmu.LMU(**kw, **flags, return_sequences=m["return_sequences"]))
            else:
                cell = keras_lmu.LMUCell(**kw, **flags, input_d=width)
                layers.append(L.RNN(cell, return_sequences=m["return_sequences"]))
        if hidden is not None:
            width = m["hidden"]["units"]
        else:
            width = kw["memory_d"] * m["order"] + (width if m["input_to_hidden"] else 0)
    for p in spec["after"]:
        layers.append(plain(p, True))
    layers.append(L.Dense(spec["head"]["units"], activation=_activation(spec["head"]["act"])))
    return keras.Sequential(layers, name=f"gen_{spec['seed']}")


def signals(n: int, T: int, F: int, seed: int) -> np.ndarray:
    """``n`` input sequences (T steps, F features), each of one kind: sines, noise, steps or sparse events."""
    r = np.random.default_rng(seed)
    t = np.arange(T)[:, None]
    x = np.empty((n, T, F))
    for i in range(n):
        kind = SIGNALS[i % len(SIGNALS)]
        if kind == "sines":
            f = r.uniform(0.01, 0.25, F)
            x[i] = r.uniform(0.3, 1.0, F) * np.sin(2 * np.pi * f * t + r.uniform(0, 2 * np.pi, F))
        elif kind == "noise":
            x[i] = 0.5 * r.standard_normal((T, F))
        elif kind == "steps":
            cuts = np.sort(r.integers(0, T, (3, F)), axis=0)
            levels = r.uniform(-1, 1, (4, F))
            idx = (t >= cuts[0]).astype(int) + (t >= cuts[1]) + (t >= cuts[2])
            x[i] = np.take_along_axis(levels, idx, 0)
        else:
            x[i] = (r.random((T, F)) < 0.08) * r.uniform(-1.5, 1.5, (T, F))
        x[i] += 0.05 * r.standard_normal((T, F))  # a little noise on every kind
    return x.astype(np.float32)


def _targets(spec: dict, x: np.ndarray, model) -> np.ndarray:
    """A learnable target of the model's output shape: a random projection of the input delayed by a few
    steps, squashed into the head's range."""
    r = np.random.default_rng([spec["seed"], 1])
    out_shape = model.output_shape
    k = out_shape[-1]
    d = int(min(x.shape[1] - 1, max(1, spec["lmus"][0]["theta"] // 2)))
    z = np.roll(x, d, axis=1)
    z[:, :d] = 0
    z = z @ r.standard_normal((x.shape[2], k)) / math.sqrt(x.shape[2])
    if len(out_shape) == 2:
        z = z.mean(axis=1) * 3
    act = spec["head"]["act"]
    if act == "softmax":
        z = np.exp(z - z.max(-1, keepdims=True))
        z /= z.sum(-1, keepdims=True)
    elif act == "sigmoid":
        z = 1 / (1 + np.exp(-z))
    elif act in ("relu", "relu6"):
        z = np.clip(z, 0, 6)
    elif act == "tanh":
        z = np.tanh(z)
    return z.astype(np.float32)


class Discarded(Exception):
    """The draw does not give a usable model (its training diverged, or its output is the same on every
    calibration sequence in each of :data:`TRAIN_TRIES` trainings): counted, not a converter failure."""


#: trainings of a draw (each from another initialization; the data stay the draw's) before it is discarded
TRAIN_TRIES = 3


def train_seed(seed: int, k: int) -> int:
    """The initialization seed of training ``k`` of draw ``seed``: the draw's own first (every model made
    before retries existed is the same), then others."""
    return int(seed) + 1_000_003 * int(k)


def unusable(y_cal, weights_finite: bool) -> str:
    """Why a trained model cannot be measured ("" where it can): training diverged, or its output is the
    same on every calibration sequence and step (seed 105: a ReLU head 0 on all 64, 1.53 once on 32 held
    out; no quantizer sizes a range the calibration never drives, and the SQNR was one value's)."""
    y = np.asarray(y_cal, np.float64)
    if not (weights_finite and np.all(np.isfinite(y))):
        return "training diverged (non-finite weights or outputs)"
    if np.ptp(y) == 0.0:
        return "the trained model's output is constant on the calibration data"
    return ""


def model_file(spec: dict) -> str:
    """The name a made model of ``spec`` is saved under (:func:`make`)."""
    return _torch_half().model_file(spec) if spec["source"] == "torch" else "model.keras"


def make(spec: dict, out: Path) -> Path:
    """Build, train (one epoch) and save ``spec`` under ``out``: ``model.keras`` (or the torch model's
    files: tests/model_gen_torch.py), ``data.npz`` (``x_cal``, ``x_test`` and ``y_test_f32``, the trained
    model's own float32 outputs on ``x_test``) and ``spec.json``. Trained again from another initialization
    where :func:`unusable` says why not, up to :data:`TRAIN_TRIES` times; then raises :class:`Discarded`."""
    if spec["source"] == "torch":
        return _torch_half().make(spec, out)
    import keras

    out.mkdir(parents=True, exist_ok=True)
    T, F = spec["T"], spec["features"]
    x = signals(N_TRAIN, T, F, spec["seed"] * 3 + 0)
    x_cal = signals(N_CAL, T, F, spec["seed"] * 3 + 1)
    x_test = signals(N_TEST, T, F, spec["seed"] * 3 + 2)
    why = ""
    for k in range(TRAIN_TRIES):
        # Keras numbers unnamed layers per process (dense, dense_1, ...): without this a seed's layer names,
        # and the reasons that cite them, depended on the seeds made before it in the same process
        keras.backend.clear_session()
        keras.utils.set_random_seed(train_seed(spec["seed"], k))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = build(spec)
            model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
            model.fit(x, _targets(spec, x, model), epochs=1, batch_size=16, verbose=0)
            y = model.predict(x_test, verbose=0)
            y_cal = model.predict(x_cal, verbose=0)
        finite = all(np.all(np.isfinite(w)) for w in model.get_weights()) and bool(np.all(np.isfinite(y)))
        why = unusable(y_cal, finite)
        if not why:
            break
    if why:
        raise Discarded(f"{why}, in each of {TRAIN_TRIES} trainings")
    model.save(out / "model.keras")
    np.savez(out / "data.npz", x_cal=x_cal, x_test=x_test, y_test_f32=y)
    (out / "spec.json").write_text(json.dumps(spec, indent=1))
    return out / "model.keras"


#: the optimization levels the generated C compiles at without a warning (issue 52)
C_LEVELS = ("-O0", "-O2", "-Os", "-O3")


def c_compilers(mode: str) -> dict:
    """``{name: command prefix}`` that compile a C kit's ``model.c`` of ``mode``: host gcc and clang, and
    arm-none-eabi-gcc with each core's flags as the artifact's Makefile has them (``lmu_edge.toolchain``), but
    the optimization level. The Cortex-M0 runtime is integer-only (``-DLMU_NO_FLOAT``); a float model
    compiles for it in soft float without that define."""
    from lmu_edge import toolchain

    arm_opt = [f for f in toolchain.ARM_OPT if not f.startswith("-O")]
    out = {"gcc": [toolchain.need("gcc", "gcc")], "clang": [toolchain.need("clang", "clang")]}
    for r in toolchain.ARM_RUNTIMES.values():
        if r.tag in toolchain.OBJECT_TAGS:  # one per core (the microbit builds the M0's object)
            flags = [f for f in r.cpu_flags if not (mode == "float" and f == "-DLMU_NO_FLOAT")]
            out[r.name] = [toolchain.arm_gcc(), *flags, *arm_opt]
    return out


def compile_c(kit: Path, command: list, level: str) -> str | None:
    """Compile ``kit/model.c`` with ``-c`` under ``command`` at ``level`` with lmu-edge's warning flags
    (-Werror among them): ``None`` when it builds without a word, else one line with the command and what
    the compiler said."""
    from lmu_edge import toolchain

    cmd = [*command, level, *toolchain.WARN, "-I.", "-c", "model.c", "-o", os.devnull]
    r = subprocess.run(cmd, cwd=kit, capture_output=True, text=True)
    if r.returncode == 0 and not r.stderr:
        return None
    said = [ln.strip() for ln in r.stderr.splitlines() if "warning" in ln or "error" in ln] or [r.stderr.strip()]
    return f"{' '.join(cmd)}: {said[0][:300]}"


def c_pairs(mode: str, share: tuple[int, int] | list | None = None) -> list:
    """The (compiler or core, level) pairs of ``mode`` in a fixed order, as ``(name, level)``; with ``share
    = (k, n)`` every n-th of them from the k-th on, so that n consecutive shares build every pair once; with
    a list, the pairs at those indices."""
    pairs = [(name, level) for name in c_compilers(mode) for level in C_LEVELS]
    if isinstance(share, list):
        return [pairs[i] for i in share]
    return pairs if share is None else pairs[share[0] % share[1] :: share[1]]


def c_warnings(kit: Path, mode: str, share: tuple[int, int] | list | None = None) -> list:
    """What each (compiler or core, level) pair of :func:`c_pairs` (all of them, or ``share``) says compiling
    the C kit ``kit`` of ``mode``: one line per pair that warns or fails (:func:`compile_c`), none when all
    build cleanly."""
    commands = c_compilers(mode)
    found = []
    for name, level in c_pairs(mode, share):
        line = compile_c(kit, commands[name], level)
        if line:
            found.append(line)
    return found


def _ff_spec(**kw) -> dict:
    base = {
        "layer": "ff",
        "memory_d": 1,
        "discretizer": "zoh",
        "hidden": None,
        "input_to_hidden": False,
        "use_bias": False,
        "no_kernel": False,
        "return_sequences": False,
        "conv_mode": "fft",
        "truncate_ir": None,
        **{f: False for f in FLAGS},
    }
    return {**base, **kw}


def _model(name: str, T: int, F: int, before: list, lmus: list, head: dict, after=()) -> dict:
    return {
        "seed": sum(map(ord, name)),
        "name": name,
        "source": "keras",
        "known_len": True,
        "T": T,
        "features": F,
        "before": before,
        "lmus": lmus,
        "after": list(after),
        "head": head,
    }


def _dense(units, act="linear"):
    return {"kind": "dense", "units": units, "act": act}


#: the models issue 52 reported, as specs (the regression tests build, train and convert them)
REPRODUCTIONS = {
    "qdot16_loop": _model(
        "qdot16_loop",
        240,
        1,
        [_dense(8, "relu")],
        [_ff_spec(memory_d=8, order=12, theta=60, input_to_hidden=True, use_bias=True, discretizer="euler")],
        {"units": 5, "act": "softmax"},
    ),
    "stacked_ff_nan": _model(
        "stacked_ff_nan",
        40,
        2,
        [_dense(4, "sigmoid")],
        [
            _ff_spec(order=16, theta=16, hidden=_dense(32, "tanh"), return_sequences=True),
            _ff_spec(order=12, theta=12, discretizer="euler", return_sequences=True),
        ],
        {"units": 5, "act": "linear"},
    ),
    "rnn_h2m_m2m_degenerate": _model(
        "rnn_h2m_m2m_degenerate",
        40,
        13,
        [],
        [
            _ff_spec(
                layer="cell",
                memory_d=3,
                order=32,
                theta=128,
                discretizer="euler",
                hidden={"kind": "simplernn", "units": 8, "act": "tanh"},
                input_to_hidden=True,
                hidden_to_memory=True,
                memory_to_memory=True,
            )
        ],
        {"units": 3, "act": "softmax"},
    ),
    "rnn_euler_state_bound": _model(
        "rnn_euler_state_bound",
        40,
        2,
        [_dense(8, "sigmoid")],
        [_ff_spec(layer="cell", order=24, theta=96, discretizer="euler", hidden=_dense(8, "tanh"))],
        {"units": 3, "act": "softmax"},
    ),
    "m55_asm": _model(
        "m55_asm",
        40,
        2,
        [_dense(8)],
        [
            _ff_spec(order=48, theta=48, hidden=_dense(16, "tanh"), return_sequences=True),
            _ff_spec(layer="lmu", order=16, theta=64, memory_d=2, discretizer="euler", hidden=_dense(16, "tanh")),
        ],
        {"units": 1, "act": "softmax"},
    ),
    "infinity_ir": _model(
        "infinity_ir",
        40,
        2,
        [],
        [_ff_spec(order=48, theta=192, discretizer="euler", hidden=_dense(16, "tanh"), return_sequences=True)],
        {"units": 3, "act": "softmax"},
    ),
    "softmax_hidden_cell": _model(  # seeds 9 and 17: the quantizer dropped a hidden cell's softmax (C int8 4.6 dB)
        "softmax_hidden_cell",
        24,
        3,
        [],
        [
            _ff_spec(
                layer="cell",
                memory_d=2,
                order=4,
                theta=12,
                hidden={"kind": "simplernn", "units": 6, "act": "softmax"},
                input_to_hidden=True,
                use_bias=True,
                return_sequences=True,
                memory_to_memory=True,
                trainable_theta=True,
            )
        ],
        {"units": 2, "act": "relu"},
        after=[_dense(4, "silu") | {"kind": "td_dense"}],
    ),
    # seed 22: an euler LMUCell (order 52, theta 296) whose dynamics amplify its state's rounding noise ~48 dB:
    # its memory path's 16-bit ranges with 2x headroom held TFLite int16x8 at 29.4 dB, TFLite int8 at 29.6,
    # ONNX int8 at 28.3 (C int8 36.4); tests/test_generated_floors.py has a small graph with the same fault
    "euler_noise_gain": {
        "seed": 22,
        "name": "euler_noise_gain",
        "source": "keras",
        "known_len": True,
        "T": 17,
        "features": 2,
        "before": [],
        "lmus": [
            _ff_spec(
                layer="lmu",
                memory_d=4,
                order=1,
                theta=3.329,
                hidden=_dense(15),
                input_to_hidden=True,
                return_sequences=True,
                memory_to_memory=True,
                trainable_theta=True,
            ),
            _ff_spec(
                layer="cell",
                memory_d=7,
                order=52,
                theta=295.975,
                discretizer="euler",
                input_to_hidden=True,
                use_bias=True,
                return_sequences=True,
            ),
        ],
        "after": [],
        "head": {"units": 2, "act": "sigmoid"},
    },
    # seed 18: TFLite int8's int16 state path (the int16x8 conversion's) had per-tensor weights rounded to
    # nearest: 26.0 dB with every operator widened; with int16x8's GPTQ weights 32.6 (C int8 31.8)
    "int16_path_weights": {
        "seed": 18,
        "name": "int16_path_weights",
        "source": "keras",
        "known_len": False,
        "T": 24,
        "features": 2,
        "before": [{"kind": "activation", "act": "relu6"}, {"kind": "activation", "act": "softmax"}],
        "lmus": [
            _ff_spec(
                layer="lmu",
                order=3,
                theta=4.314,
                hidden={"kind": "simplernn", "units": 12, "act": "linear"},
                input_to_hidden=True,
                return_sequences=True,
                trainable_theta=True,
            ),
            _ff_spec(layer="cell", memory_d=4, order=19, theta=480.559, hidden=_dense(15), trainable_theta=True),
        ],
        "after": [_dense(9, "relu")],
        "head": {"units": 1, "act": "linear"},
    },
}
