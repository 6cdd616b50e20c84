r"""A PyTorch LMU layer in parallel and recurrent form, its export to the IR, and safe checkpoints.

Needs the ``[torch]`` extra; nothing else in lmu-edge imports torch.

The layer follows the IR's LMU (``docs/ir-format.md``) and the conventions of
:mod:`lmu_edge.lti`: with ``u = x @ input_encoders + encoder_bias``, each of the
``memory_d`` channels runs ``m[t] = Abar m[t-1] + Bbar u[t]`` (Legendre A, B of
"Parallelizing Legendre Memory Unit Training", Chilkuri & Eliasmith, 2021,
eq. 8-9, discretized by ZOH or Euler), then ``z = concat(m, x)`` if
``input_to_hidden`` else ``m``, and ``h = act(z @ hidden_kernel + hidden_bias)``
(or ``h = z`` without a hidden cell).

Because the memory is linear and time-invariant, it is a causal convolution
with its impulse response ``H[:, k] = Abar^k Bbar`` (the paper's eq. 14-17):

* ``mode="parallel"``, whole sequence: ``m = irfft(rfft(u) * rfft(H))``, O(T log T);
* ``mode="parallel"``, last step only (``return_sequences=False``):
  ``m[T-1] = sum_k H[:, k] u[T-1-k]``, one (T x q) matrix product per channel;
* ``mode="recurrent"``: the recurrence, one step at a time.

The three give the same numbers (to rounding); the parallel forms train
much faster because no step waits for the one before.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch import nn

from . import lti
from .converters import torch_files
from .errors import ShapeError, UnsupportedLayerError

__all__ = ["LMU", "export", "graph_of", "save_checkpoint", "load_checkpoint", "config_of"]

_ACT = {
    "linear": lambda v: v,
    "relu": torch.relu,
    "relu6": lambda v: torch.clamp(v, 0.0, 6.0),
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "softmax": lambda v: torch.softmax(v, dim=-1),
    "silu": nn.functional.silu,
}
_MODULE_ACT = {nn.ReLU: "relu", nn.ReLU6: "relu6", nn.Tanh: "tanh", nn.Sigmoid: "sigmoid", nn.SiLU: "silu"}


def _legendre_torch(order: int, theta: torch.Tensor, method: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``(Abar, Bbar)`` as differentiable functions of ``theta`` (for a trainable theta)."""
    A0, B0 = lti.legendre_ab(order, 1.0)
    A = torch.as_tensor(A0, dtype=theta.dtype, device=theta.device) / theta
    B = torch.as_tensor(B0, dtype=theta.dtype, device=theta.device) / theta
    if method == "euler":
        return torch.eye(order, dtype=theta.dtype, device=theta.device) + A, B
    top = torch.cat([A, B[:, None]], 1)
    aug = torch.cat([top, torch.zeros(1, order + 1, dtype=theta.dtype, device=theta.device)], 0)
    E = torch.linalg.matrix_exp(aug)
    return E[:order, :order], E[:order, order]


def _impulse(Abar: torch.Tensor, Bbar: torch.Tensor, length: int) -> torch.Tensor:
    """``H`` (q, length), ``H[:, k] = Abar^k Bbar``, by doubling (log2(length) matrix products)."""
    H, P = Bbar[:, None], Abar
    while H.shape[1] < length:
        H = torch.cat([H, P @ H], dim=1)
        P = P @ P
    return H[:, :length]


class LMU(nn.Module):
    """A Legendre Memory Unit layer; input ``(batch, T, input_size)``.

    Parameters mirror the IR's LMU: ``memory_d`` channels of ``order`` Legendre
    coefficients over a window of ``theta`` steps (``trainable_theta`` learns it),
    ``discretizer`` ``"zoh"`` or ``"euler"``, an encoder bias if ``use_bias``, a
    Dense hidden cell of ``hidden_units`` (``None``: no hidden cell, the memory is
    the output) with ``hidden_activation``, ``input_to_hidden`` and
    ``return_sequences``. ``mode`` is ``"parallel"`` (FFT, or one matrix product
    when only the last step is returned) or ``"recurrent"``; both compute the
    same function and share the weights, so a model trained in one runs in the other.
    """

    _Abar: torch.Tensor  # buffers (fixed theta only), declared so their type is known
    _Bbar: torch.Tensor

    def __init__(
        self,
        input_size: int,
        memory_d: int,
        order: int,
        theta: float,
        *,
        discretizer: str = "zoh",
        trainable_theta: bool = False,
        use_bias: bool = False,
        hidden_units: int | None = None,
        hidden_activation: str = "tanh",
        hidden_bias: bool = True,
        input_to_hidden: bool = False,
        return_sequences: bool = True,
        mode: str = "parallel",
        dtype=None,
    ):
        super().__init__()
        if discretizer not in lti.DISCRETIZERS:
            raise ShapeError(f"LMU: unknown discretizer {discretizer!r}; known: {', '.join(lti.DISCRETIZERS)}")
        if hidden_activation not in _ACT:
            raise ShapeError(f"LMU: unknown hidden_activation {hidden_activation!r}; known: {', '.join(_ACT)}")
        for k, v in (("input_size", input_size), ("memory_d", memory_d), ("order", order)):
            if int(v) != v or v < 1:
                raise ShapeError(f"LMU: {k} must be a positive integer, got {v!r}")
        if not (np.isfinite(theta) and theta > 0):
            raise ShapeError(f"LMU: theta must be a positive number of steps, got {theta!r}")
        self.input_size, self.memory_d, self.order = int(input_size), int(memory_d), int(order)
        self.theta0, self.discretizer, self.trainable_theta = float(theta), discretizer, bool(trainable_theta)
        self.use_bias, self.hidden_units, self.hidden_activation = bool(use_bias), hidden_units, hidden_activation
        self.hidden_bias_on, self.input_to_hidden = bool(hidden_bias), bool(input_to_hidden)
        self.return_sequences = bool(return_sequences)
        self.mode = mode
        dt = dtype or torch.get_default_dtype()
        d, q = self.memory_d, self.order
        self.input_encoders = nn.Parameter(torch.empty(self.input_size, d, dtype=dt))
        self.encoder_bias = nn.Parameter(torch.zeros(d, dtype=dt)) if use_bias else None
        if trainable_theta:
            self.theta = nn.Parameter(torch.tensor(float(theta), dtype=dt))
        else:
            Ab, Bb = lti.legendre_discrete(q, float(theta), discretizer)
            self.register_buffer("_Abar", torch.as_tensor(Ab, dtype=dt), persistent=False)
            self.register_buffer("_Bbar", torch.as_tensor(Bb, dtype=dt), persistent=False)
        self.z_size = d * q + (self.input_size if input_to_hidden else 0)
        if hidden_units is not None:
            self.hidden_kernel = nn.Parameter(torch.empty(self.z_size, int(hidden_units), dtype=dt))
            self.hidden_bias = nn.Parameter(torch.zeros(int(hidden_units), dtype=dt)) if hidden_bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Glorot-uniform encoders and hidden kernel, zero biases."""
        nn.init.xavier_uniform_(self.input_encoders)
        if self.hidden_units is not None:
            nn.init.xavier_uniform_(self.hidden_kernel)

    @property
    def mode(self) -> str:
        """``"parallel"`` or ``"recurrent"``; settable, the weights stay the same."""
        return self._mode

    @mode.setter
    def mode(self, value: str) -> None:
        """Switch between ``"parallel"`` and ``"recurrent"`` (anything else: :class:`ShapeError`)."""
        if value not in ("parallel", "recurrent"):
            raise ShapeError(f"LMU: mode must be 'parallel' or 'recurrent', got {value!r}")
        self._mode = value

    @property
    def output_size(self) -> int:
        """Features per step of the output: the hidden units, or the memory (and input) without a hidden cell."""
        return self.z_size if self.hidden_units is None else int(self.hidden_units)

    def theta_value(self) -> float:
        """The window in steps (the trained one when theta is trainable)."""
        return float(self.theta.detach()) if self.trainable_theta else self.theta0

    def system(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(Abar, Bbar)`` in the layer's dtype, differentiable in theta when it is trainable."""
        if self.trainable_theta:
            return _legendre_torch(self.order, self.theta, self.discretizer)
        return self._Abar, self._Bbar

    def impulse_response(self, length: int) -> torch.Tensor:
        """``H`` (order, length); with a fixed theta computed once per length (float64) and cached."""
        if self.trainable_theta:
            return _impulse(*self.system(), length)
        cache = self.__dict__.setdefault("_h_cache", {})
        key = (int(length), self._Abar.dtype, self._Abar.device)
        if key not in cache:
            H = lti.legendre_impulse_response(self.order, self.theta0, int(length), self.discretizer)
            cache.clear()
            cache[key] = torch.as_tensor(H, dtype=self._Abar.dtype, device=self._Abar.device)
        return cache[key]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(batch, T, input_size)`` to ``(batch, T, output_size)`` (the last step only without
        ``return_sequences``)."""
        if x.dim() != 3 or x.shape[-1] != self.input_size:
            raise ShapeError(f"LMU: expected input (batch, steps, {self.input_size}), got {tuple(x.shape)}")
        N, T, _ = x.shape
        d, q = self.memory_d, self.order
        u = x @ self.input_encoders
        if self.encoder_bias is not None:
            u = u + self.encoder_bias
        Abar, Bbar = self.system()
        if self.mode == "recurrent":
            m, ms = u.new_zeros(N, d, q), []
            AT = Abar.T
            for t in range(T):
                m = m @ AT + u[:, t, :, None] * Bbar
                ms.append(m)
            m = torch.stack(ms, 1) if self.return_sequences else m[:, None]
        elif not self.return_sequences:
            H = self.impulse_response(T)  # (q, T)
            m = torch.einsum("ntd,qt->ndq", u.flip(1), H)[:, None]  # one (T x q) product per channel
        else:
            H = self.impulse_response(T)
            n = 2 * T
            U = torch.fft.rfft(u, n=n, dim=1)  # (N, F, d)
            Hf = torch.fft.rfft(H, n=n, dim=1).T  # (F, q)
            m = torch.fft.irfft(U[..., None] * Hf[None, :, None, :], n=n, dim=1)[:, :T]
        z = m.reshape(N, m.shape[1], d * q)
        if self.input_to_hidden:
            z = torch.cat([z, x if self.return_sequences else x[:, -1:]], dim=-1)
        if self.hidden_units is not None:
            z = z @ self.hidden_kernel
            if self.hidden_bias is not None:
                z = z + self.hidden_bias
            z = _ACT[self.hidden_activation](z)
        return z if self.return_sequences else z[:, 0]

    def config(self) -> dict:
        """The layer's entry in a checkpoint's JSON config."""
        return {
            "type": "lmu",
            "input_size": self.input_size,
            "memory_d": self.memory_d,
            "order": self.order,
            "theta": self.theta0,
            "discretizer": self.discretizer,
            "trainable_theta": self.trainable_theta,
            "use_bias": self.use_bias,
            "hidden_units": self.hidden_units,
            "hidden_activation": self.hidden_activation,
            "hidden_bias": self.hidden_bias_on,
            "input_to_hidden": self.input_to_hidden,
            "return_sequences": self.return_sequences,
        }


def _modules(module: nn.Module) -> list:
    if isinstance(module, nn.Sequential):
        return list(module)
    if isinstance(module, LMU):
        return [module]
    raise UnsupportedLayerError(
        f"export: {type(module).__name__} is not supported; export a torch.nn.Sequential "
        f"of lmu_edge.torch.LMU, Linear and activation layers (or one LMU)"
    )


def config_of(module: nn.Module) -> tuple:
    """``(config, tensors)``: the JSON config and the numpy weights (keyed like a Sequential's state dict)."""
    layers, tensors, n = [], {}, None
    for i, m in enumerate(_modules(module)):
        if isinstance(m, LMU):
            layers.append(m.config())
            names = (
                ["input_encoders"] + (["encoder_bias"] if m.use_bias else []) + (["theta"] if m.trainable_theta else [])
            )
            if m.hidden_units is not None:
                names += ["hidden_kernel"] + (["hidden_bias"] if m.hidden_bias is not None else [])
            n = m.input_size if n is None else n
        elif isinstance(m, nn.Linear):
            layers.append(
                {
                    "type": "linear",
                    "in_features": m.in_features,
                    "out_features": m.out_features,
                    "bias": m.bias is not None,
                }
            )
            names = ["weight"] + (["bias"] if m.bias is not None else [])
            n = m.in_features if n is None else n
        elif type(m) in _MODULE_ACT:
            layers.append({"type": _MODULE_ACT[type(m)]})
            names = []
        elif isinstance(m, nn.Softmax) and m.dim in (-1, 2):
            layers.append({"type": "softmax"})
            names = []
        elif isinstance(m, nn.Identity):  # "linear" is the Linear layer's type (issue 52's torch draws)
            layers.append({"type": "identity"})
            names = []
        else:
            what = f"Softmax(dim={m.dim})" if isinstance(m, nn.Softmax) else type(m).__name__
            raise UnsupportedLayerError(
                f"export: layer {i} ({what}) is not supported; supported: lmu_edge.torch.LMU, Linear, ReLU, ReLU6, "
                f"Tanh, Sigmoid, SiLU, Softmax(dim=-1), Identity"
            )
        for name in names:
            t = getattr(m, name).detach().cpu()
            if t.dtype in (torch.float16, torch.bfloat16):
                t = t.to(torch.float32)
            tensors[f"{i}.{name}"] = t.numpy().copy()
    if n is None:
        raise UnsupportedLayerError("export: the model needs an LMU or Linear layer to know its input size")
    return {
        "format": torch_files.CONFIG_FORMAT,
        "version": torch_files.CONFIG_VERSION,
        "input_size": n,
        "layers": layers,
    }, tensors


def graph_of(module: nn.Module, name: str = "torch_model", seq_len: int | None = None):
    """The :class:`lmu_edge.ir.Graph` (parallel form) of a module."""
    cfg, tensors = config_of(module)
    cfg.update(name=name, seq_len=seq_len)
    return torch_files.build_graph(cfg, tensors, where=f"export of {type(module).__name__}", name=name)


def export(module: nn.Module, path, name: str | None = None, seq_len: int | None = None):
    """Write the IR file (``NAME.lmu.npz``) of a Sequential of LMU / Linear / activation layers.

    Returns the graph. Any lmu-edge target can then be made with ``lmu-edge convert path``.
    """
    from .irfile import save

    p = Path(path)
    g = graph_of(module, name or p.name.split(".")[0], seq_len)
    save(g, p)
    return g


def save_checkpoint(module: nn.Module, path) -> Path:
    """Write ``NAME.safetensors`` and its config ``NAME.json`` (both or neither); returns the weights path."""
    p = Path(path)
    if p.suffix.lower() != ".safetensors":
        raise ShapeError(f"{p}: a checkpoint is written as NAME.safetensors (with NAME.json beside it)")
    cfg, tensors = config_of(module)
    cfg["name"] = p.stem
    torch_files.build_graph(cfg, tensors, where=str(p))  # refuse what the reader would refuse
    c = torch_files.config_path(p)
    umask = os.umask(0)
    os.umask(umask)
    tmp = []
    try:
        for target, write in (
            (p, lambda f: torch_files.write_safetensors(f, tensors)),
            (c, lambda f: Path(f).write_text(json.dumps(cfg, indent=1))),
        ):
            fd, t = tempfile.mkstemp(dir=p.parent, prefix=f".{target.name}.")
            os.close(fd)
            tmp.append((t, target))
            write(t)
            os.chmod(t, 0o666 & ~umask)  # mkstemp makes 0600: give the files the mode open() would
        for t, target in tmp:
            os.replace(t, target)
    finally:
        for t, _ in tmp:
            if os.path.exists(t):
                os.unlink(t)
    return p


def load_checkpoint(path, mode: str = "parallel", dtype=None) -> nn.Sequential:
    """Rebuild the ``nn.Sequential`` saved by :func:`save_checkpoint` (or a ``.pt`` state dict + config)."""
    p = Path(path)
    g = torch_files.load(p)  # validates config and tensors
    cfg = torch_files.read_config(p)
    tensors = torch_files.read_pt(p) if p.suffix.lower() in (".pt", ".pth") else torch_files.read_safetensors(p)
    dt = dtype or torch.get_default_dtype()
    mods: list[nn.Module] = []
    activations = {v: k for k, v in _MODULE_ACT.items()}
    for spec in cfg["layers"]:
        spec = {k: v for k, v in spec.items() if k != "type"} if spec["type"] in ("lmu", "linear") else spec
        if "memory_d" in spec:
            mods.append(LMU(**spec, mode=mode, dtype=dt))
        elif "in_features" in spec:
            mods.append(nn.Linear(spec["in_features"], spec["out_features"], bias=spec.get("bias", True), dtype=dt))
        else:
            act = activations.get(spec["type"])
            if act is not None:
                mods.append(act())
            else:
                mods.append(nn.Softmax(dim=-1) if spec["type"] == "softmax" else nn.Identity())
    seq = nn.Sequential(*mods)
    seq.load_state_dict({k: torch.as_tensor(v, dtype=dt) for k, v in tensors.items()}, strict=True)
    assert g is not None
    return seq
