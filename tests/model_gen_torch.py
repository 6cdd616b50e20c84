"""The ``lmu_edge.torch`` half of the generated models (issue 52): the same option space through PyTorch.

A quarter of the seeds (:func:`is_torch`, from a stream of its own, so that the keras seeds draw what they
drew before) are ``lmu_edge.torch`` models: an ``nn.Sequential`` of ``Linear`` + activation layers before
and after one to three ``lmu_edge.torch.LMU`` layers, and a ``Linear`` head with every activation. Each LMU
draws what the torch layer has: ``memory_d`` 1-8, ``order`` as the keras draw (most up to 256), ``theta``
0.5q-100q, zoh / euler (an Euler theta whose response stays trainable over the sequence), a Dense hidden
cell of every activation (with or without its bias) or none, ``input_to_hidden``, ``use_bias``,
``trainable_theta`` and ``return_sequences``. The model is trained one epoch in parallel form (float32, as a
user trains it) on the generator's signals and saved the two ways a user hands it to lmu-edge: a known length
as the IR file ``lmu_edge.torch.export`` writes (``model.lmu.npz``, its ``seq_len`` set), an unknown one as
the checkpoint ``save_checkpoint`` writes (``model.safetensors`` and ``model.json``).

Import by path after :mod:`model_gen` (it uses that module's draws, signals and targets).
"""

from __future__ import annotations

import math
import sys
import types
from pathlib import Path

import numpy as np

#: the share of seeds drawn as lmu_edge.torch models
TORCH_SHARE = 0.25


def _mg():
    return sys.modules["model_gen"]


def is_torch(seed: int) -> bool:
    """Whether seed ``seed`` draws an ``lmu_edge.torch`` model (a stream apart from the keras draw's)."""
    return bool(np.random.default_rng([52, int(seed), 1]).random() < TORCH_SHARE)


def _plain(r: np.random.Generator) -> dict:
    if r.random() < 0.35:
        return {"kind": "activation", "act": _mg()._act(r)}
    return {"kind": "dense", "units": int(r.integers(1, 17)), "act": _mg()._act(r)}


def _lmu(r: np.random.Generator, seq: bool, T: int) -> dict:
    mg = _mg()
    order = mg._order(r)
    disc = str(r.choice(["zoh", "euler"]))
    hidden = None
    if r.random() < 0.7:
        hidden = {"kind": "dense", "units": int(r.integers(1, 33)), "act": mg._act(r), "bias": bool(r.random() < 0.8)}
    lo, hi = 0.5 * order, 100.0 * order
    for _ in range(64):
        theta = round(float(np.exp(r.uniform(math.log(lo), math.log(hi)))), 3)
        if disc != "euler" or mg._euler_trainable(order, theta, T):
            break
    else:
        disc = "zoh"
    return {
        "layer": "torch",
        "memory_d": int(r.integers(1, 9)),
        "order": order,
        "theta": theta,
        "discretizer": disc,
        "hidden": hidden,
        "input_to_hidden": bool(r.random() < 0.4),
        "use_bias": bool(r.random() < 0.4),
        "no_kernel": False,
        "return_sequences": seq,
        "hidden_to_memory": False,
        "memory_to_memory": False,
        "trainable_theta": bool(r.random() < 0.3),
    }


def draw(seed: int) -> dict:
    """The spec of generated ``lmu_edge.torch`` model ``seed``."""
    r = np.random.default_rng([52, int(seed), 2])
    n_lmu = int(r.choice([1, 1, 1, 2, 2, 3]))
    known_len = bool(r.random() < 0.6)
    T = int(r.integers(12, 49))
    F = int(r.integers(1, 14))
    last_seq = bool(r.random() < 0.5)
    before = [_plain(r) for _ in range(int(r.choice([0, 0, 1, 1, 2])))]
    lmus = [_lmu(r, i < n_lmu - 1 or last_seq, T) for i in range(n_lmu)]
    after = [_plain(r) for _ in range(int(r.choice([0, 1, 1, 2])))]
    head = {"units": int(r.integers(1, 11)), "act": _mg()._act(r)}
    return _mg().spec_of(seed, "torch", known_len, T, F, before, lmus, after, head)


def _act_module(name: str):
    from torch import nn

    return {
        "linear": nn.Identity,
        "relu": nn.ReLU,
        "relu6": nn.ReLU6,
        "tanh": nn.Tanh,
        "sigmoid": nn.Sigmoid,
        "silu": nn.SiLU,
        "softmax": lambda: nn.Softmax(dim=-1),
    }[name]()


def build(spec: dict):
    """The ``nn.Sequential`` of ``spec`` (untrained, float32)."""
    from torch import nn

    from lmu_edge.torch import LMU

    mods: list = []
    width = spec["features"]

    def plain(p):
        nonlocal width
        if p["kind"] == "dense":
            mods.append(nn.Linear(width, p["units"]))
            width = p["units"]
        if p["act"] != "linear" or p["kind"] == "activation":
            mods.append(_act_module(p["act"]))

    for p in spec["before"]:
        plain(p)
    for m in spec["lmus"]:
        h = m["hidden"]
        lmu = LMU(
            width,
            m["memory_d"],
            m["order"],
            m["theta"],
            discretizer=m["discretizer"],
            trainable_theta=m["trainable_theta"],
            use_bias=m["use_bias"],
            hidden_units=None if h is None else h["units"],
            hidden_activation="tanh" if h is None else h["act"],
            hidden_bias=True if h is None else h["bias"],
            input_to_hidden=m["input_to_hidden"],
            return_sequences=m["return_sequences"],
        )
        mods.append(lmu)
        width = lmu.output_size
    for p in spec["after"]:
        plain(p)
    mods.append(nn.Linear(width, spec["head"]["units"]))
    mods.append(_act_module(spec["head"]["act"]))
    return nn.Sequential(*mods)


def model_file(spec: dict) -> str:
    """The file a made model is saved as: the IR (known length) or a checkpoint (unknown length)."""
    return "model.lmu.npz" if spec["known_len"] else "model.safetensors"


def make(spec: dict, out: Path) -> Path:
    """Build, train (one epoch, Adam 0.01, batches of 16, float32) and save ``spec`` under ``out``, with
    ``data.npz`` (``x_cal``, ``x_test`` and ``y_test_f32``: the trained model's own float32 outputs) and
    ``spec.json``. Trained again where ``model_gen.unusable`` says why (``model_gen.make``), then raises
    ``model_gen.Discarded``."""
    import json

    import torch

    from lmu_edge import torch as lt

    mg = _mg()
    out.mkdir(parents=True, exist_ok=True)
    T, F = spec["T"], spec["features"]
    x = mg.signals(mg.N_TRAIN, T, F, spec["seed"] * 3 + 0)
    x_cal = mg.signals(mg.N_CAL, T, F, spec["seed"] * 3 + 1)
    x_test = mg.signals(mg.N_TEST, T, F, spec["seed"] * 3 + 2)
    why = ""
    for k in range(mg.TRAIN_TRIES):  # as model_gen.make: another initialization where unusable says why
        torch.manual_seed(mg.train_seed(spec["seed"], k))
        model = build(spec)
        with torch.no_grad():
            shape = tuple(model(torch.as_tensor(x[:1])).shape)
        y = mg._targets(spec, x, types.SimpleNamespace(output_shape=(None, *shape[1:])))
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        xt, yt = torch.as_tensor(x), torch.as_tensor(np.asarray(y, np.float32))
        for i in range(0, len(x), 16):
            opt.zero_grad()
            loss = torch.mean((model(xt[i : i + 16]) - yt[i : i + 16]) ** 2)
            loss.backward()
            opt.step()
        with torch.no_grad():
            y_test = model(torch.as_tensor(x_test)).numpy()
            y_cal = model(torch.as_tensor(x_cal)).numpy()
            finite = all(bool(torch.all(torch.isfinite(p))) for p in model.parameters())
        why = mg.unusable(y_cal, finite and bool(np.all(np.isfinite(y_test))))
        if not why:
            break
    if why:
        raise mg.Discarded(f"{why}, in each of {mg.TRAIN_TRIES} trainings")
    path = out / model_file(spec)
    name = f"gen_{spec['seed']}"
    if spec["known_len"]:
        lt.export(model, path, name=name, seq_len=T)
    else:
        lt.save_checkpoint(model, path)
    np.savez(out / "data.npz", x_cal=x_cal, x_test=x_test, y_test_f32=y_test)
    (out / "spec.json").write_text(json.dumps(spec, indent=1))
    return path
