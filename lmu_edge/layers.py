"""The IR's node dataclasses: the plain layers, the LMU layer and the pieces of its memory.

Every node is a frozen dataclass whose arrays are read-only copies, checked in ``__post_init__`` with a
one-line error that names the layer. :mod:`lmu_edge.ir` re-exports every class here and holds what
concerns the chain as a whole (:class:`lmu_edge.ir.Graph`, ``LAYER_CLASSES``, ``NODE_TYPES``,
:func:`lmu_edge.ir.equal`); the layer table of CONTRIBUTING.md says where else a new node goes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Optional, Union

import numpy as np

from . import limits
from .errors import ShapeError

ACTIVATIONS = ("linear", "relu", "relu6", "tanh", "sigmoid", "softmax", "silu")


def _array(value, where: str, ndim: int) -> np.ndarray:
    a = np.array(value, copy=True)
    if a.dtype.kind in "iub":
        a = a.astype(np.float64)
    if a.dtype not in (np.float32, np.float64):
        raise ShapeError(f"{where}: expected a float32 or float64 array, got dtype {a.dtype}")
    if a.ndim != ndim:
        raise ShapeError(f"{where}: expected a {ndim}-D array, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ShapeError(f"{where}: array holds NaN or infinite values")
    a.setflags(write=False)
    return a


def _opt_array(value, where, ndim):
    return None if value is None else _array(value, where, ndim)


def _freeze_arrays(obj, spec: dict):
    for name, ndim in spec.items():
        v = getattr(obj, name)
        where = f"{type(obj).__name__} {getattr(obj, 'name', '')!r}.{name}".replace(" ''", "")
        object.__setattr__(obj, name, _opt_array(v, where, ndim))


def _check_activation(act, where):
    if act not in ACTIVATIONS:
        raise ShapeError(f"{where}: unknown activation {act!r}; known: {', '.join(ACTIVATIONS)}")


def _expect(arr, shape, where):
    if arr is not None and tuple(arr.shape) != tuple(shape):
        raise ShapeError(f"{where}: expected shape {tuple(shape)}, got {tuple(arr.shape)}")


# --- plain layers ---------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Dense:
    """``y = activation(x @ kernel + bias)``, applied to each time step."""

    TYPE: ClassVar[str] = "dense"
    name: str
    kernel: np.ndarray  # (in, units)
    bias: Optional[np.ndarray] = None  # (units,)
    activation: str = "linear"

    def __post_init__(self):
        _freeze_arrays(self, {"kernel": 2, "bias": 1})
        _check_activation(self.activation, f"Dense {self.name!r}")
        _expect(self.bias, (self.units,), f"Dense {self.name!r}.bias")

    @property
    def units(self) -> int:
        """Number of output features (columns of the kernel)."""
        return int(self.kernel.shape[1])

    def out_features(self, n_in: int) -> int:
        """Output features for ``n_in`` input features (checks the kernel's rows)."""
        _expect(self.kernel, (n_in, self.units), f"Dense {self.name!r}.kernel (input has {n_in} features)")
        return self.units


@dataclass(frozen=True, eq=False)
class Activation:
    """An activation function on its own."""

    TYPE: ClassVar[str] = "activation"
    name: str
    activation: str

    def __post_init__(self):
        _check_activation(self.activation, f"Activation {self.name!r}")

    def out_features(self, n_in: int) -> int:
        """Output features: an activation keeps the width."""
        return n_in


@dataclass(frozen=True, eq=False)
class TimePooling:
    """Mean over time (GlobalAveragePooling1D); in streaming form a running mean."""

    TYPE: ClassVar[str] = "time_pooling"
    NEEDS_SEQUENCE: ClassVar[bool] = True
    POOLS: ClassVar[bool] = True
    name: str
    mode: str = "mean"

    def __post_init__(self):
        if self.mode != "mean":
            raise ShapeError(f"TimePooling {self.name!r}: unknown mode {self.mode!r}; known: mean")

    def out_features(self, n_in: int) -> int:
        """Output features: pooling over time keeps the width."""
        return n_in


class BandGeometry:
    """The band counts of a band convolution (float :class:`BandConv` and integer ``qir.QBandConv``), from
    its ``bands``, ``pad_lo``, ``pad_hi``, ``kernel_f`` and ``pool``."""

    @property
    def conv_bands(self) -> int:
        """Bands the convolution produces before pooling."""
        g: Any = self
        return int(g.bands) + int(g.pad_lo) + int(g.pad_hi) - int(g.kernel_f) + 1

    @property
    def out_bands(self) -> int:
        """Bands after pooling (a remainder of fewer than ``pool`` bands is dropped, as Keras's valid pooling)."""
        g: Any = self
        return self.conv_bands // int(g.pool)


@dataclass(frozen=True, eq=False)
class BandConv(BandGeometry):
    """A 2-D convolution over (time, frequency bands), causal in time, applied one frame at a time.

    The layer's input frame holds ``bands`` bands of ``channels_in`` values, band-major
    (``band * channels_in + c``, as Keras's ``Reshape((-1, bands, channels))`` lays them out). Per frame::

        window = the last kernel_t frames (zeros before the first), each padded with
                 pad_lo / pad_hi zero bands
        y[b, o] = activation(bias[o] + sum_{j, k, c} kernel[j, k, c, o] * window[j, b + k, c])
        out[p, o] = max(y[p * pool + i, o] for i < pool)                (pool 1: no pooling)

    ``window[kernel_t - 1]`` is the current frame, ``window[0]`` the oldest. Keras's ZeroPadding2D
    ``((kernel_t - 1, 0), (pad_lo, pad_hi))``, Conv2D (valid, stride 1), BatchNormalization (folded
    into kernel and bias), ReLU and MaxPooling2D ``(1, pool)`` make one such layer. The state is the
    last ``kernel_t - 1`` input frames."""

    TYPE: ClassVar[str] = "band_conv"
    NEEDS_SEQUENCE: ClassVar[bool] = True
    name: str
    bands: int
    kernel: np.ndarray  # (kernel_t, kernel_f, channels_in, channels_out)
    bias: Optional[np.ndarray] = None  # (channels_out,)
    pad_lo: int = 0
    pad_hi: int = 0
    activation: str = "linear"
    pool: int = 1

    def __post_init__(self):
        w = f"BandConv {self.name!r}"
        _freeze_arrays(self, {"kernel": 4, "bias": 1})
        _check_activation(self.activation, w)
        if self.activation == "softmax":
            raise ShapeError(f"{w}: softmax over a convolution's outputs is not a band-wise activation")
        kt, kf, _, _ = self.kernel.shape
        limits.check_int(kt, 1, limits.MAX_CONV_KERNEL, f"{w}: kernel_t")
        limits.check_int(kf, 1, limits.MAX_CONV_KERNEL, f"{w}: kernel_f")
        limits.check_int(self.bands, 1, limits.MAX_FEATURES, f"{w}: bands")
        limits.check_int(self.pad_lo, 0, limits.MAX_CONV_KERNEL - 1, f"{w}: pad_lo")
        limits.check_int(self.pad_hi, 0, limits.MAX_CONV_KERNEL - 1, f"{w}: pad_hi")
        limits.check_int(self.pool, 1, limits.MAX_CONV_KERNEL, f"{w}: pool")
        _expect(self.bias, (self.channels_out,), f"{w}.bias")
        if self.conv_bands < 1 or self.out_bands < 1:
            raise ShapeError(
                f"{w}: {self.bands} bands padded by {self.pad_lo} + {self.pad_hi} leave {self.conv_bands} "
                f"outputs of a {kf}-band kernel, {self.out_bands} after pooling by {self.pool}"
            )

    @property
    def kernel_t(self) -> int:
        """Frames the kernel spans (the current one and ``kernel_t - 1`` before it)."""
        return int(self.kernel.shape[0])

    @property
    def kernel_f(self) -> int:
        """Bands the kernel spans."""
        return int(self.kernel.shape[1])

    @property
    def channels_in(self) -> int:
        """Values per input band."""
        return int(self.kernel.shape[2])

    @property
    def channels_out(self) -> int:
        """Values per output band (filters)."""
        return int(self.kernel.shape[3])

    def out_features(self, n_in: int) -> int:
        """Output features for ``n_in`` input features (checks ``n_in = bands * channels_in``)."""
        if n_in != self.bands * self.channels_in:
            raise ShapeError(
                f"BandConv {self.name!r}: input has {n_in} features, but {self.bands} bands of "
                f"{self.channels_in} channels need {self.bands * self.channels_in}"
            )
        return self.out_bands * self.channels_out

    @property
    def macs(self) -> int:
        """Multiply-accumulates per frame (the bands pooling would drop are not computed)."""
        return self.out_bands * int(self.pool) * self.kernel_t * self.kernel_f * self.channels_in * self.channels_out


# --- LMU pieces -------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class HiddenDense:
    """Hidden cell ``h = activation(z @ kernel + bias)`` (no state of its own)."""

    TYPE: ClassVar[str] = "hidden_dense"
    kernel: np.ndarray
    bias: Optional[np.ndarray] = None
    activation: str = "linear"

    def __post_init__(self):
        _freeze_arrays(self, {"kernel": 2, "bias": 1})
        _check_activation(self.activation, "HiddenDense")
        _expect(self.bias, (self.units,), "HiddenDense.bias")

    @property
    def units(self) -> int:
        """Number of hidden units."""
        return int(self.kernel.shape[1])


@dataclass(frozen=True, eq=False)
class HiddenSimpleRNN:
    """Hidden cell ``h = activation(z @ kernel + h_prev @ recurrent_kernel + bias)``."""

    TYPE: ClassVar[str] = "hidden_simple_rnn"
    kernel: np.ndarray
    recurrent_kernel: np.ndarray
    bias: Optional[np.ndarray] = None
    activation: str = "tanh"

    def __post_init__(self):
        _freeze_arrays(self, {"kernel": 2, "recurrent_kernel": 2, "bias": 1})
        _check_activation(self.activation, "HiddenSimpleRNN")
        _expect(self.recurrent_kernel, (self.units, self.units), "HiddenSimpleRNN.recurrent_kernel")
        _expect(self.bias, (self.units,), "HiddenSimpleRNN.bias")

    @property
    def units(self) -> int:
        """Number of hidden units."""
        return int(self.kernel.shape[1])


PROVENANCES = ("analytic", "truncated", "learned")


@dataclass(frozen=True, eq=False)
class ImpulseResponse:
    """Parallel form of the memory: ``m[t] = sum_k H[:, k] u[t-k]``.

    ``kernel`` is ``None`` for the exact (analytic, unbounded) response of the
    layer's ``(order, theta, discretizer)``; otherwise it is the (q, L) kernel
    the source model convolved with.
    """

    TYPE: ClassVar[str] = "impulse_response"
    kernel: Optional[np.ndarray] = None
    provenance: str = "analytic"
    note: str = ""

    def __post_init__(self):
        _freeze_arrays(self, {"kernel": 2})
        if self.provenance not in PROVENANCES:
            raise ShapeError(
                f"ImpulseResponse: unknown provenance {self.provenance!r}; known: {', '.join(PROVENANCES)}"
            )
        if (self.kernel is None) != (self.provenance == "analytic"):
            raise ShapeError(
                "ImpulseResponse: an 'analytic' response has no kernel; 'truncated' and 'learned' ones need one"
            )
        if self.kernel is not None:
            limits.check_int(self.kernel.shape[1], 1, limits.MAX_KERNEL_LEN, "ImpulseResponse: kernel length")


@dataclass(frozen=True, eq=False)
class DenseSS:
    """Recurrent memory ``m = Abar @ m + Bbar * u`` with dense matrices."""

    TYPE: ClassVar[str] = "dense_ss"
    method: str
    Abar: np.ndarray
    Bbar: np.ndarray

    def __post_init__(self):
        _freeze_arrays(self, {"Abar": 2, "Bbar": 1})
        q = self.Bbar.shape[0]
        _expect(self.Abar, (q, q), f"DenseSS({self.method}).Abar")


@dataclass(frozen=True, eq=False)
class RungeKutta:
    """Recurrent memory stepped by explicit RK of order ``rk_order`` with ``substeps``
    substeps per sample, on the structured O(q) ``A @ m`` (see :mod:`lmu_edge.lti`)."""

    TYPE: ClassVar[str] = "runge_kutta"
    rk_order: int
    substeps: int

    def __post_init__(self):
        if self.rk_order not in (1, 2, 4):
            raise ShapeError(f"RungeKutta: rk_order must be 1, 2 or 4, got {self.rk_order!r}")
        if isinstance(self.substeps, bool) or not isinstance(self.substeps, (int, np.integer)) or self.substeps < 1:
            raise ShapeError(f"RungeKutta: substeps must be a positive integer, got {self.substeps!r}")
        limits.check_int(self.substeps, 1, limits.MAX_SUBSTEPS, "RungeKutta: substeps")


@dataclass(frozen=True, eq=False)
class Pade:
    """Recurrent memory stepped by the implicit, A-stable ``[num/den]`` Pade approximant of the ZOH
    step, ``substeps`` substeps per sample, each one O(q) shifted solve per pole pair
    (see :mod:`lmu_edge.pade`); stores no q*q matrix."""

    TYPE: ClassVar[str] = "pade"
    ORDERS: ClassVar[tuple] = ((1, 1), (2, 2), (2, 3), (3, 4), (4, 4))
    num: int
    den: int
    substeps: int

    def __post_init__(self):
        if (self.num, self.den) not in self.ORDERS:
            raise ShapeError(
                f"Pade: orders [{self.num!r}/{self.den!r}] are not supported; "
                f"supported: {', '.join(f'[{m}/{n}]' for m, n in self.ORDERS)}"
            )
        if isinstance(self.substeps, bool) or not isinstance(self.substeps, (int, np.integer)) or self.substeps < 1:
            raise ShapeError(f"Pade: substeps must be a positive integer, got {self.substeps!r}")
        limits.check_int(self.substeps, 1, limits.MAX_SUBSTEPS, "Pade: substeps")

    @property
    def orders(self) -> tuple:
        """``(num, den)``: the degrees of the approximant's numerator and denominator."""
        return (int(self.num), int(self.den))


@dataclass(frozen=True, eq=False)
class FIR:
    """Recurrent memory as a ring buffer of the last L inputs and a (q, L) kernel."""

    TYPE: ClassVar[str] = "fir"
    kernel: np.ndarray

    def __post_init__(self):
        _freeze_arrays(self, {"kernel": 2})
        limits.check_int(self.kernel.shape[1], 1, limits.MAX_KERNEL_LEN, "FIR: kernel length")


@dataclass(frozen=True, eq=False)
class Measurement:
    """How a realization was proven: its impulse response against the reference."""

    TYPE: ClassVar[str] = "measurement"
    error: float  # max|H - H_ref| / max|H_ref| over the horizon
    horizon: int  # steps compared
    reference: str  # what H_ref was ("analytic zoh", "stored kernel", ...)
    ops_per_step: int  # arithmetic operations per step, whole layer memory
    coeffs_stored: int  # numbers stored for the memory update
    state_size: int  # numbers of state kept between steps, whole layer memory
    spectral_radius: float


Memory = Union[ImpulseResponse, DenseSS, RungeKutta, Pade, FIR]
Hidden = Union[HiddenDense, HiddenSimpleRNN, None]


@dataclass(frozen=True, eq=False)
class LMU:
    """A Legendre Memory Unit layer (the fields keras-lmu's cell and layers need).

    Per step, with ``x`` the layer input, ``h`` the hidden output and ``m`` the
    memory (``memory_d`` channels of ``order`` coefficients, flattened as
    ``d * order + i``)::

        u = x @ input_encoders [+ encoder_bias] [+ h_prev @ hidden_encoders] [+ m_prev @ memory_encoders]
        m[d] = memory step of channel d with input u[d]          (same Abar, Bbar for every channel)
        z = concat(m, x) if input_to_hidden else m      (memory first, as keras-lmu)
        h = hidden(z, h_prev)      (z itself when there is no hidden cell)
    """

    TYPE: ClassVar[str] = "lmu"
    NEEDS_SEQUENCE: ClassVar[bool] = True
    name: str
    memory_d: int
    order: int
    theta: float
    discretizer: str
    input_encoders: np.ndarray  # (F_in, memory_d)
    memory: Memory
    encoder_bias: Optional[np.ndarray] = None  # (memory_d,)
    hidden_encoders: Optional[np.ndarray] = None  # (units, memory_d): hidden_to_memory
    memory_encoders: Optional[np.ndarray] = None  # (memory_d*order, memory_d): memory_to_memory
    hidden: Hidden = None
    input_to_hidden: bool = False
    return_sequences: bool = True
    measurement: Optional[Measurement] = None

    def __post_init__(self):
        _freeze_arrays(self, {"input_encoders": 2, "encoder_bias": 1, "hidden_encoders": 2, "memory_encoders": 2})
        w = f"LMU {self.name!r}"
        for k in ("memory_d", "order"):
            v = getattr(self, k)
            if int(v) != v or v < 1:
                raise ShapeError(f"{w}: {k} must be a positive integer, got {v!r}")
        limits.check_int(self.order, 1, limits.MAX_ORDER, f"{w}: order")
        limits.check_int(self.memory_d, 1, limits.MAX_MEMORY_D, f"{w}: memory_d")
        limits.check_theta(self.theta, self.order, w)
        if self.discretizer not in ("zoh", "euler"):
            raise ShapeError(f"{w}: unknown discretizer {self.discretizer!r}; known: zoh, euler")
        d, q = self.memory_d, self.order
        _expect(self.encoder_bias, (d,), f"{w}.encoder_bias")
        _expect(self.memory_encoders, (d * q, d), f"{w}.memory_encoders")
        if self.hidden_encoders is not None:
            if self.hidden is None:
                raise ShapeError(f"{w}: hidden_encoders (hidden_to_memory) need a hidden cell")
            _expect(self.hidden_encoders, (self.hidden.units, d), f"{w}.hidden_encoders")
        if self.input_encoders.shape[1] != d:
            raise ShapeError(
                f"{w}.input_encoders: expected {d} columns (memory_d), got shape {self.input_encoders.shape}"
            )
        mem = self.memory
        if isinstance(mem, ImpulseResponse) and mem.kernel is not None:
            if mem.kernel.shape[0] != q:
                raise ShapeError(
                    f"{w}: impulse response kernel must have {q} rows (order), got shape {mem.kernel.shape}"
                )
        elif isinstance(mem, DenseSS):
            _expect(mem.Bbar, (q,), f"{w}.memory.Bbar")
        elif isinstance(mem, FIR):
            if mem.kernel.shape[0] != q:
                raise ShapeError(f"{w}: FIR kernel must have {q} rows (order), got shape {mem.kernel.shape}")
        elif not isinstance(mem, (ImpulseResponse, RungeKutta, Pade)):
            raise ShapeError(f"{w}: memory must be an ImpulseResponse or a realization, got {type(mem).__name__}")
        if self.is_parallel and self.is_rnn_path:
            raise ShapeError(
                f"{w}: hidden_to_memory / memory_to_memory make the memory recurrent; "
                f"it cannot be given as an impulse response"
            )

    @property
    def is_parallel(self) -> bool:
        """True while the memory is in parallel form (an impulse response), before folding."""
        return isinstance(self.memory, ImpulseResponse)

    @property
    def is_rnn_path(self) -> bool:
        """True when the memory input depends on the previous hidden state or memory."""
        return self.hidden_encoders is not None or self.memory_encoders is not None

    @property
    def state_size(self) -> int:
        """Numbers of memory state per sequence: ``memory_d * order``."""
        return self.memory_d * self.order

    def hidden_in_features(self, n_in: int) -> int:
        """Input width of the hidden cell: the memory, plus the layer input with input_to_hidden."""
        return self.memory_d * self.order + (n_in if self.input_to_hidden else 0)

    def out_features(self, n_in: int) -> int:
        """Output features for ``n_in`` input features (hidden units, or the memory without a hidden cell)."""
        w = f"LMU {self.name!r}"
        _expect(self.input_encoders, (n_in, self.memory_d), f"{w}.input_encoders (input has {n_in} features)")
        z = self.hidden_in_features(n_in)
        if self.hidden is None:
            return z
        _expect(self.hidden.kernel, (z, self.hidden.units), f"{w}.hidden.kernel")
        return self.hidden.units
