"""Integer layers: the recurrent graph after :func:`lmu_edge.quantize`.

Every quantized layer maps int8 activations (``real = scale * (q - zero_point)``)
to int8 activations, or, in the ``int16x8`` mode (as TFLite's 16x8 and CMSIS-NN's
s16 kernels), int16 activations with zero point 0 to int16 activations (weights
stay int8; in the ``int16`` mode they are int16 too); the LMU state is a :class:`FixedType` (power-of-two scale, 8..32
bits). The integer arithmetic of each node is defined in :mod:`lmu_edge.intsim`
and mirrored, operation for operation, by the C runtime
``firmware_templates/lmu_runtime.h``.

:class:`QLinear` is the one multiply-accumulate node: ``y = clamp(out_zp +
sum_p MBQM(acc_p, M_p, S_p))`` with ``acc_p = sum_i (x_p[i] - zp_p) W_p[i, :]``
(plus the int32 bias in the first part's accumulator), then an optional 256-entry
lookup table for tanh / sigmoid / silu. With ``in_bits=16`` the inputs are int16, ``acc_p`` is int64
and MBQM is TFLite's 64-bit form with the multiplier rounded to 16 bits
(:func:`mbqm16`); the table then has 513 int16 entries, read with linear interpolation
(:func:`lut16`). Several parts let a layer read inputs
of different scales (input and previous hidden state, ...) without a
requantizing concatenation; MBQM is TFLite's fixed-point multiplier and shift.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional, cast

import numpy as np

from . import ir
from .errors import ShapeError
from .fixedpoint import FixedType


def _int_array(obj, name, ndim, lo=None, hi=None):
    a = getattr(obj, name)
    if a is None:
        return
    a = np.array(a, copy=True)
    where = f"{type(obj).__name__} {getattr(obj, 'name', '')}.{name}".replace(" .", ".")
    if a.dtype.kind not in "iu":
        raise ShapeError(f"{where}: expected an integer array, got dtype {a.dtype}")
    if a.ndim != ndim:
        raise ShapeError(f"{where}: expected a {ndim}-D array, got shape {a.shape}")
    if a.size and ((lo is not None and a.min() < lo) or (hi is not None and a.max() > hi)):
        raise ShapeError(f"{where}: values outside [{lo}, {hi}]")
    a.setflags(write=False)
    object.__setattr__(obj, name, a)


I32 = (-(1 << 31), (1 << 31) - 1)
I16 = (-(1 << 15), (1 << 15) - 1)
#: entries of an int16 activation table: one per 128 input values, both ends included
LUT16_SIZE = 513


def act_range(bits: int) -> tuple:
    """``(lo, hi)`` of an activation of ``bits`` (8 or 16) bits."""
    return (-128, 127) if bits == 8 else I16


def mbqm16(acc, multiplier, shift):
    """TFLite's 64-bit ``MultiplyByQuantizedMultiplier`` of the 16x8 kernels: the multiplier is rounded to
    16 bits (``(m + 2^15) >> 16``, at most 0x7FFF), then ``(acc m16 + 2^(t-1)) >> t`` with ``t = 15 - shift``,
    clamped to int32. Exact in int64 for ``|acc| < 2^47`` (the quantizer proves ``|acc| <= n 2^22``, or
    ``n 2^30`` with int16 weights, plus an int32 bias, stays below it)."""
    acc = np.asarray(acc, np.int64)
    m = np.asarray(multiplier, np.int64)
    s = np.asarray(shift, np.int64)
    m16 = np.where(m < 0x7FFF0000, (m + (1 << 15)) >> 16, 0x7FFF)
    t = 15 - s
    r = (acc * m16 + np.left_shift(np.int64(1), t - 1)) >> t
    return np.clip(r, *I32)


def lut16(table, x):
    """Read an int16 activation table (513 entries, one per 128 input values from -32768) at int16 ``x``:
    ``y = T[i] + ((T[i+1] - T[i]) f + 64) >> 7`` with ``i = (x + 32768) >> 7``, ``f = (x + 32768) & 127``."""
    t = np.asarray(table, np.int64)
    v = np.asarray(x, np.int64) + 32768
    i = v >> 7
    v &= 127  # f
    y = (t[1:] - t[:-1])[i]  # two gathers, in place after (the integer reference reads whole sequences)
    y *= v
    y += 64
    y >>= 7
    y += t[i]
    return y


@dataclass(frozen=True, eq=False)
class QPart:
    """One input of a :class:`QLinear`: int8 weights (n_in, n_out) (int16 in a layer with int16
    inputs, the ``int16`` mode), the input's zero point, and the per-output requantization
    ``(multiplier, shift)`` to the output scale."""

    TYPE: ClassVar[str] = "q_part"
    kernel: np.ndarray
    in_zp: int
    multiplier: np.ndarray
    shift: np.ndarray

    def __post_init__(self):
        _int_array(self, "kernel", 2, -32767, 32767)
        _int_array(self, "multiplier", 1, 0, I32[1])
        _int_array(self, "shift", 1, -31, 30)
        n = self.kernel.shape[1]
        if self.multiplier.shape != (n,) or self.shift.shape != (n,):
            raise ShapeError(f"QPart: multiplier and shift need shape ({n},)")


@dataclass(frozen=True, eq=False)
class QLinear:
    """``clamp(out_zp + sum_p MBQM(acc_p, M_p, S_p), lo, hi)``, then ``lut`` when given."""

    TYPE: ClassVar[str] = "q_linear"
    parts: tuple
    out_zp: int
    clamp_min: int
    clamp_max: int
    bias: Optional[np.ndarray] = None
    lut: Optional[np.ndarray] = None
    in_bits: int = 8  # 16: int16 inputs, int64 accumulators, mbqm16, a 513-entry int16 table

    def __post_init__(self):
        object.__setattr__(self, "parts", tuple(self.parts))
        if self.in_bits not in (8, 16):
            raise ShapeError(f"QLinear.in_bits: expected 8 or 16, got {self.in_bits!r}")
        _int_array(self, "bias", 1, *I32)
        _int_array(self, "lut", 1, *act_range(self.in_bits))
        n = self.units
        if any(p.kernel.shape[1] != n for p in self.parts):
            raise ShapeError("QLinear: every part must have the same number of outputs")
        if self.in_bits == 8 and any(
            p.kernel.size and (p.kernel.min() < -128 or p.kernel.max() > 127) for p in self.parts
        ):
            raise ShapeError("QLinear: a layer with int8 inputs takes int8 weights: values outside [-128, 127]")
        if self.bias is not None and self.bias.shape != (n,):
            raise ShapeError(f"QLinear.bias: expected shape ({n},)")
        if self.in_bits == 16 and any(int(p.shift.max(initial=0)) > 14 for p in self.parts):
            raise ShapeError("QLinear: a 16x8 requantization needs shifts <= 14 (real multipliers below 2^14)")
        size = 256 if self.in_bits == 8 else LUT16_SIZE
        if self.lut is not None and self.lut.shape != (size,):
            raise ShapeError(f"QLinear.lut: expected {size} entries")

    @property
    def units(self) -> int:
        """Output width (columns of the kernels)."""
        return int(self.parts[0].kernel.shape[1])

    @property
    def in_sizes(self) -> list:
        """Input width of each part, in order."""
        return [int(p.kernel.shape[0]) for p in self.parts]


class _QLayer:
    QUANTIZED: ClassVar[bool] = True


@dataclass(frozen=True, eq=False)
class QInput(_QLayer):
    """Float input -> int8 (int16 with ``bits=16``): ``q = clamp(round(x / scale) + zero_point)``."""

    TYPE: ClassVar[str] = "q_input"
    name: str
    out_scale: float
    out_zp: int
    bits: int = 8

    def out_features(self, n_in):
        """Output width for ``n_in`` inputs (unchanged)."""
        return n_in


@dataclass(frozen=True, eq=False)
class QDense(_QLayer):
    TYPE: ClassVar[str] = "q_dense"
    name: str
    linear: QLinear
    out_scale: float
    out_zp: int

    def out_features(self, n_in):
        """Output width for ``n_in`` inputs, or :class:`ShapeError` when the kernel does not take ``n_in``."""
        if self.linear.in_sizes != [n_in]:
            raise ShapeError(f"QDense {self.name!r}: kernel takes {self.linear.in_sizes} inputs, the layer gets {n_in}")
        return self.linear.units


@dataclass(frozen=True, eq=False)
class QBandConv(_QLayer, ir.BandGeometry):
    """Integer :class:`lmu_edge.ir.BandConv`: per output band ``b``, the patch of the last ``kernel_t``
    frames (oldest first) by ``kernel_f`` bands from ``b - pad_lo`` by all channels, ordered
    ``(frame, band, channel)``, goes through ``linear`` (one part; a band outside the frame, and every
    frame before the first, reads the input zero point); then the maximum over each ``pool`` bands.
    The state is the last ``kernel_t - 1`` input frames."""

    TYPE: ClassVar[str] = "q_band_conv"
    NEEDS_SEQUENCE: ClassVar[bool] = True
    name: str
    bands: int
    kernel_t: int
    kernel_f: int
    pad_lo: int
    pad_hi: int
    pool: int
    linear: QLinear
    out_scale: float
    out_zp: int

    def __post_init__(self):
        from . import limits

        w = f"QBandConv {self.name!r}"
        for f in ("kernel_t", "kernel_f", "pool"):
            limits.check_int(getattr(self, f), 1, limits.MAX_CONV_KERNEL, f"{w}: {f}")
        for f in ("pad_lo", "pad_hi"):
            limits.check_int(getattr(self, f), 0, limits.MAX_CONV_KERNEL - 1, f"{w}: {f}")
        limits.check_int(self.bands, 1, limits.MAX_FEATURES, f"{w}: bands")
        if len(self.linear.parts) != 1 or self.linear.in_sizes[0] % (self.kernel_t * self.kernel_f):
            raise ShapeError(f"{w}: the kernel takes {self.linear.in_sizes} inputs, not kernel_t * kernel_f * channels")
        if self.conv_bands < 1 or self.out_bands < 1:
            raise ShapeError(f"{w}: no output band ({self.conv_bands} before pooling by {self.pool})")

    @property
    def channels_in(self) -> int:
        """Values per input band."""
        return self.linear.in_sizes[0] // (self.kernel_t * self.kernel_f)

    def out_features(self, n_in):
        """Output width for ``n_in`` inputs (``bands * channels_in`` of them, else :class:`ShapeError`)."""
        if n_in != self.bands * self.channels_in:
            raise ShapeError(f"QBandConv {self.name!r}: takes {self.bands * self.channels_in} inputs, gets {n_in}")
        return self.out_bands * self.linear.units


@dataclass(frozen=True, eq=False)
class QLut(_QLayer):
    """An activation as a table from the 256 int8 inputs to int8 outputs, or (``bits=16``) a 513-entry
    int16 table read with linear interpolation (:func:`lut16`)."""

    TYPE: ClassVar[str] = "q_lut"
    name: str
    lut: np.ndarray
    out_scale: float
    out_zp: int
    bits: int = 8

    def __post_init__(self):
        _int_array(self, "lut", 1, *act_range(self.bits))
        if self.lut.shape != ((256,) if self.bits == 8 else (LUT16_SIZE,)):
            raise ShapeError(f"QLut {self.name!r}: a {self.bits}-bit table has the wrong number of entries")

    def out_features(self, n_in):
        """Output width for ``n_in`` inputs (unchanged: the table maps each value)."""
        return n_in


@dataclass(frozen=True, eq=False)
class QSoftmax(_QLayer):
    """Integer softmax: ``e_i = exp_lut[max - x_i]`` (Q16), ``y_i = clamp(round(256 e_i / sum e) - 128)``;
    output scale 1/256, zero point -128 (as TFLite). With ``bits=16``: ``exp_lut`` has 513 entries read
    with linear interpolation at ``max - x_i`` (0..65535, :func:`lut16` shifted to start at 0),
    ``y_i = clamp(round(32768 e_i / sum e), 0, 32767)``, scale 1/32768, zero point 0."""

    TYPE: ClassVar[str] = "q_softmax"
    name: str
    exp_lut: np.ndarray
    out_scale: float = 1.0 / 256
    out_zp: int = -128
    bits: int = 8

    def __post_init__(self):
        _int_array(self, "exp_lut", 1, 0, 1 << 16)
        if self.exp_lut.shape != ((256,) if self.bits == 8 else (LUT16_SIZE,)):
            raise ShapeError(f"QSoftmax {self.name!r}: a {self.bits}-bit exp table has the wrong number of entries")

    def out_features(self, n_in):
        """Output width for ``n_in`` inputs (unchanged)."""
        return n_in


@dataclass(frozen=True, eq=False)
class QPool(_QLayer):
    """Running mean: ``y = clamp(out_zp + div_round(MBQM(sum_t (x_t - in_zp), M, S), n))``."""

    TYPE: ClassVar[str] = "q_pool"
    NEEDS_SEQUENCE: ClassVar[bool] = True
    POOLS: ClassVar[bool] = True
    name: str
    in_zp: int
    multiplier: int
    shift: int
    out_scale: float
    out_zp: int
    bits: int = 8  # the activations' width (the output clamp)

    def out_features(self, n_in):
        """Output width for ``n_in`` inputs (unchanged: pooling is over time)."""
        return n_in


@dataclass(frozen=True, eq=False)
class QDenseMemory:
    """``acc = B u + C m`` (int64), then ``m = sat(m + round(acc >> coeff_frac))`` (form ``delta``,
    ``C = Abar - I``) or ``m = sat(round(acc >> coeff_frac))`` (form ``direct``, ``C = Abar``).
    ``B`` carries ``b_frac = coeff_frac + state.frac - u.frac`` fractional bits."""

    TYPE: ClassVar[str] = "q_dense_memory"
    form: str
    coeffs: np.ndarray
    coeff_frac: int
    coeff_bits: int
    B: np.ndarray
    b_frac: int

    def __post_init__(self):
        _int_array(self, "coeffs", 2, -(1 << 31), (1 << 31) - 1)
        _int_array(self, "B", 1, -(1 << 31), (1 << 31) - 1)
        if self.form not in ("delta", "direct"):
            raise ShapeError(f"QDenseMemory: unknown form {self.form!r}; known: delta, direct")


@dataclass(frozen=True, eq=False)
class QRKMemory:
    """Structured RK in integers on the state with ``guard`` more fractional bits (``x = m << guard``, a
    ``bits + guard``-bit working value): per substep ``w1 = rnd(hc * (P - T + alt (u_x - S)))``,
    ``w_{k+1} = rnd(hc * (P(w_k) - T(w_k) - alt S(w_k)))`` (``rnd`` drops ``hc_frac`` bits), then
    Horner ``acc = w_k + rnd16(acc * inv[k+1])`` and ``x = sat(x + acc)``; after the last substep
    ``m = sat(rnd(x >> guard))``. ``u_x`` is u at the working scale. Without the guard bits every substep's
    increment was rounded to one LSB of the state: many substeps then drowned a 16-bit state in its own
    rounding (the digits model with RK4 x24: SQNR 22.5 dB at the state)."""

    TYPE: ClassVar[str] = "q_rk_memory"
    rk_order: int
    substeps: int
    hc: np.ndarray
    hc_frac: int
    guard: int = 0

    def __post_init__(self):
        _int_array(self, "hc", 1, 0, (1 << 31) - 1)


#: Horner constants 1/k with 16 fractional bits (1/2 and 1/4 exact)
RK_INV16 = {2: 32768, 3: 21845, 4: 16384}


@dataclass(frozen=True, eq=False)
class QFIRMemory:
    """``m = sat(round(sum_k K[:, k] u[t-k] >> (kernel_frac + u.frac - state.frac)))`` over a ring buffer."""

    TYPE: ClassVar[str] = "q_fir_memory"
    kernel: np.ndarray
    kernel_frac: int
    coeff_bits: int

    def __post_init__(self):
        _int_array(self, "kernel", 2, -(1 << 31), (1 << 31) - 1)


@dataclass(frozen=True, eq=False)
class QLMU(_QLayer):
    """An LMU layer in integers; see the module docstring of :mod:`lmu_edge.intsim` for the step."""

    TYPE: ClassVar[str] = "q_lmu"
    NEEDS_SEQUENCE: ClassVar[bool] = True
    name: str
    memory_d: int
    order: int
    theta: float
    realization: str
    encoder: QLinear  # parts: x [, h_prev] [, m_prev as z]; output u (zp 0) in u_type
    state_type: FixedType
    u_type: FixedType
    memory: object  # QDenseMemory | QRKMemory | QFIRMemory
    z_scale: float  # int8 view of the memory (and of x when input_to_hidden)
    z_zp: int
    m_to_z: tuple  # (multiplier, shift): state -> z
    state_bound: float  # proven bound on |m| (real units)
    out_scale: float
    out_zp: int
    x_to_z: Optional[tuple] = None  # (multiplier, shift, in_zp) when input_to_hidden
    hidden: Optional[QLinear] = None  # parts: z [, h_prev]
    hidden_recurrent: bool = False  # SimpleRNN hidden: h_prev is the second part
    hidden_to_memory: bool = False
    memory_to_memory: bool = False
    input_to_hidden: bool = False
    return_sequences: bool = True
    act_bits: int = 8  # width of z, h and the layer's input/output activations (8 or 16)
    #: the quantizer proved state_bound for every input (no saturation): the C target then sums a dense
    #: memory's rows in 32 bits where the bound proves the sum fits (c_codegen.dense_wrap32); False for
    #: an unproven bound (a state the calibration sized) and for files written before the field existed
    bound_proven: bool = False
    #: a softmax hidden cell: its exp table, applied to the hidden linear part's output; ``h`` (the output,
    #: and what a SimpleRNN cell and hidden_to_memory read back) is then the softmax at its fixed type
    hidden_softmax: Optional[QSoftmax] = None

    def __post_init__(self):
        object.__setattr__(self, "m_to_z", tuple(int(v) for v in self.m_to_z))
        if self.x_to_z is not None:
            object.__setattr__(self, "x_to_z", tuple(int(v) for v in self.x_to_z))
        sm = self.hidden_softmax
        if sm is not None and (not isinstance(sm, QSoftmax) or self.hidden is None or sm.bits != self.act_bits):
            raise ShapeError(
                f"QLMU {self.name!r}: hidden_softmax is a {self.act_bits}-bit q_softmax after a hidden cell"
            )

    def out_features(self, n_in):
        """Output width for ``n_in`` inputs (hidden units, or the memory), or :class:`ShapeError`."""
        if self.encoder.in_sizes[0] != n_in:
            raise ShapeError(
                f"QLMU {self.name!r}: encoder takes {self.encoder.in_sizes[0]} inputs, the layer gets {n_in}"
            )
        z = self.memory_d * self.order + (n_in if self.input_to_hidden else 0)
        return self.hidden.units if self.hidden is not None else z


def h_reset_zp(layer: QLMU) -> int:
    """The integer a reset puts in a QLMU's hidden state ``h``: 0 in the layer's output type (the hidden cell's,
    after its table or softmax), read back as ``h_prev``; 0 with no hidden cell."""
    return int(layer.out_zp) if layer.hidden is not None else 0


@dataclass(frozen=True, eq=False)
class QConvert(_QLayer):
    """An activation's width changed between layers of a mixed-precision int8 graph (the C target's
    int8 with some layers at 16 bits). To 16 bits (``bits=16``): ``y = (x - in_zp) * 128``, exact (the
    int16 scale is the int8 one / 128, zero point 0; ``multiplier`` and ``shift`` are 0). To 8 bits
    (``bits=8``, from int16 with zero point 0): ``y = clamp(out_zp + MBQM(x, multiplier, shift))``."""

    TYPE: ClassVar[str] = "q_convert"
    name: str
    in_zp: int
    multiplier: int
    shift: int
    out_scale: float
    out_zp: int
    bits: int

    def __post_init__(self):
        if self.bits == 16 and (self.out_zp != 0 or self.multiplier != 0 or self.shift != 0):
            raise ShapeError(f"QConvert {self.name!r}: to 16 bits is exact: zero point, multiplier and shift 0")
        if self.bits == 8 and self.in_zp != 0:
            raise ShapeError(f"QConvert {self.name!r}: to 8 bits reads an int16 activation (zero point 0)")

    def out_features(self, n_in):
        """Output width for ``n_in`` inputs (unchanged)."""
        return n_in


QLAYERS = (QInput, QDense, QBandConv, QLut, QSoftmax, QPool, QLMU, QConvert)
# ir.NODE_TYPES's type is inferred from the float node classes; the registry is open to these as well
_node_types = cast("dict[str, type]", ir.NODE_TYPES)
for _c in QLAYERS + (QPart, QLinear, QDenseMemory, QRKMemory, QFIRMemory, FixedType):
    _node_types[_c.TYPE] = _c
ir.LAYER_CLASSES.extend(QLAYERS)


def check_widths(layers) -> None:
    """The activation widths of a quantized graph's layers in order agree: each layer reads the width
    the one before it writes, a :class:`QConvert` changes it (8 <-> 16) and nothing else does;
    :class:`ShapeError` names the first layer that breaks it (a file could otherwise feed a 16-bit value
    to an 8-bit table)."""

    def bits(lay):
        if isinstance(lay, (QDense, QBandConv)):
            return lay.linear.in_bits
        if isinstance(lay, QLMU):
            return lay.act_bits
        return getattr(lay, "bits", 8)

    cur = None
    for lay in layers:
        if not getattr(lay, "QUANTIZED", False):
            continue
        b = bits(lay)
        if isinstance(lay, QConvert):
            if cur is not None and cur == b:
                raise ShapeError(f"layer {lay.name!r}: converts {cur}-bit activations to {b} bits")
        elif isinstance(lay, QInput):
            pass
        elif cur is not None and b != cur:
            raise ShapeError(f"layer {lay.name!r}: reads {b}-bit activations, the layer before writes {cur}-bit ones")
        cur = b
    first = next((lay for lay in layers if isinstance(lay, QInput)), None)
    if first is not None and cur != first.bits:  # the integer API: input and output of one width
        raise ShapeError(f"the graph takes {first.bits}-bit inputs and writes {cur}-bit outputs; they must agree")


# --- validation of quantized layers read from files ---------------------------------------------

_I8 = (-128, 127)
#: integer fields: name -> (lo, hi); float fields that are scales: positive and finite
_INT_FIELDS = {
    "out_zp": _I8,
    "in_zp": _I8,
    "z_zp": _I8,
    "clamp_min": I32,
    "clamp_max": I32,
    "memory_d": (1, 1024),
    "order": (1, 1024),
    "rk_order": (1, 4),
    "substeps": (1, 4096),
    "coeff_frac": (0, 62),
    "coeff_bits": (2, 32),
    "b_frac": (-62, 62),
    "hc_frac": (0, 62),
    "guard": (-32, 32),
    "kernel_frac": (0, 62),
    "multiplier": (0, I32[1]),
    "shift": (-31, 30),
    "bits": (8, 16),
    "in_bits": (8, 16),
    "act_bits": (8, 16),
}
_SCALE_FIELDS = ("out_scale", "z_scale", "state_bound", "theta")


def _check_value(v, lo, hi, where):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not lo <= int(v) <= hi:
        raise ShapeError(f"{where}: expected an integer in [{lo}, {hi}], got {v!r}")


def validate(node, where: str) -> None:
    """Check every integer and scale field of a quantized node (and of the nodes inside it) against the
    ranges the integer runtime supports; :class:`ShapeError` names the first bad field."""
    import dataclasses
    import math

    if isinstance(node, FixedType):
        if not 8 <= node.width <= 32 or not -64 <= node.frac <= 64:
            raise ShapeError(
                f"{where}: fixed-point type with {node.width} bits and {node.frac} fractional bits; "
                f"the integer runtime supports 8..32 bits and fractions in [-64, 64]"
            )
        return
    if not dataclasses.is_dataclass(node):
        return
    for f in dataclasses.fields(node):
        v = getattr(node, f.name)
        w = f"{where}.{f.name}"
        if f.name in _INT_FIELDS and not isinstance(v, np.ndarray) and v is not None:
            _check_value(v, *_INT_FIELDS[f.name], w)
        elif f.name in _SCALE_FIELDS and v is not None:
            if (
                isinstance(v, bool)
                or not isinstance(v, (int, float, np.number))
                or not (math.isfinite(float(v)) and float(v) > 0 and 1e-30 < float(v) < 1e30)
            ):
                raise ShapeError(f"{w}: expected a positive finite scale, got {v!r}")
        elif f.name == "bound_proven" and not isinstance(v, (bool, np.bool_)):
            raise ShapeError(f"{w}: expected true or false, got {v!r}")
        elif f.name in ("m_to_z", "x_to_z") and v is not None:
            if len(v) not in (2, 3):
                raise ShapeError(f"{w}: expected (multiplier, shift[, zero point])")
            _check_value(v[0], 0, I32[1], w + "[0]")
            _check_value(v[1], -31, 30, w + "[1]")
            if len(v) == 3:
                _check_value(v[2], *_I8, w + "[2]")
        elif (
            f.name == "realization"
            and v not in ("dense", "delta", "direct", "rk", "fir")
            and not (isinstance(v, str) and len(v) <= 32 and v.replace("_", "").replace("-", "").isalnum())
        ):
            raise ShapeError(f"{w}: unknown realization {v!r}")
        elif isinstance(v, (tuple, list)):
            for i, e in enumerate(v):
                validate(e, f"{w}[{i}]")
        else:
            validate(v, w)
    for name in ("bits", "in_bits", "act_bits"):
        if isinstance(getattr(node, name, None), (int, np.integer)) and getattr(node, name) not in (8, 16):
            raise ShapeError(f"{where}.{name}: activations are 8 or 16 bits, got {getattr(node, name)!r}")
    if isinstance(node, QLinear) and node.clamp_min > node.clamp_max:
        raise ShapeError(f"{where}: clamp_min {node.clamp_min} > clamp_max {node.clamp_max}")
