"""Specifications of the integer IR's own checks (lmu_edge/qir.py), each at its bound and one past it, which
the generated mutants of qir.py found unchecked (docs/testing.md, "Generated mutants"): an integer node
that a file or a caller builds is refused exactly where it could not run as the C does."""

import dataclasses

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from lmu_edge import limits, qir
from lmu_edge.errors import LimitError, ShapeError

REFUSED = (ShapeError, LimitError)  # a shape that cannot run, a size past the limits


def _linear(n_in, units, in_bits=8, w=1):
    part = qir.QPart(np.full((n_in, units), w), 0, np.full(units, 1 << 30), np.full(units, -3))
    return qir.QLinear((part,), 0, -128, 127, in_bits=in_bits)


def _conv(bands=6, kt=2, kf=3, ci=2, units=3, pad=(1, 1), pool=2, n_in=None):
    lin = _linear(kt * kf * ci if n_in is None else n_in, units)
    return qir.QBandConv("c", bands, kt, kf, pad[0], pad[1], pool, lin, 0.1, 0)


def test_a_band_convolution_pads_up_to_one_less_than_the_largest_kernel():
    """Spec: the zero padding on either side is 0 .. MAX_CONV_KERNEL - 1 (a kernel of MAX_CONV_KERNEL bands
    reads at most that many outside the frame); the kernel sizes and the pooling 1 .. MAX_CONV_KERNEL."""
    top = limits.MAX_CONV_KERNEL
    _conv(pad=(top - 1, 0))
    _conv(pad=(0, top - 1))
    for pad in ((top, 0), (0, top), (-1, 0)):
        with pytest.raises(REFUSED):
            _conv(pad=pad)
    _conv(bands=top, kf=top, kt=1, ci=1, pad=(0, 0), pool=1)
    with pytest.raises(REFUSED):
        _conv(bands=top + 1, kf=top + 1, kt=1, ci=1, pad=(0, 0), pool=1)


@given(kt=st.integers(1, 4), kf=st.integers(1, 4), ci=st.integers(1, 4), extra=st.integers(1, 3))
@example(kt=2, kf=3, ci=2, extra=1)
def test_a_band_convolution_takes_kernel_t_times_kernel_f_times_channels_inputs(kt, kf, ci, extra):
    """Spec: the linear part's input count is kernel_t * kernel_f * channels_in for a whole number of channels;
    any count that is not a multiple of kernel_t * kernel_f is refused."""
    c = _conv(bands=8, kt=kt, kf=kf, ci=ci, pad=(0, 0), pool=1)
    assert c.channels_in == ci
    if extra % (kt * kf):
        with pytest.raises(REFUSED):
            _conv(bands=8, kt=kt, kf=kf, ci=ci, pad=(0, 0), pool=1, n_in=kt * kf * ci + extra)


@given(
    bands=st.integers(3, 20),
    kf=st.integers(1, 3),
    pads=st.tuples(st.integers(0, 2), st.integers(0, 2)),
    pool=st.integers(1, 3),
    units=st.integers(1, 7),
)
@example(bands=9, kf=3, pads=(1, 0), pool=3, units=5)
def test_a_band_convolution_outputs_its_output_bands_times_its_units(bands, kf, pads, pool, units):
    """Spec: with (bands + pads - kernel_f + 1) // pool output bands of ``units`` values each, the layer
    outputs their product, for an input of bands * channels_in values (and refuses another input size)."""
    out_bands = (bands + sum(pads) - kf + 1) // pool
    if out_bands < 1:
        return
    c = _conv(bands=bands, kt=2, kf=kf, ci=2, units=units, pad=pads, pool=pool)
    assert c.out_features(2 * bands) == out_bands * units
    with pytest.raises(REFUSED):
        c.out_features(2 * bands + 1)


def test_a_softmax_exp_table_holds_0_to_2_to_the_16():
    """Spec: the softmax's exp table is Q16, exp(0) = 1 = 65536 at most: [0, 65536] accepted, 65537 and -1
    refused."""
    t = np.zeros(256, np.int64)
    t[0] = 1 << 16
    qir.QSoftmax("s", t)
    for bad in ((1 << 16) + 1, -1):
        t[0] = bad
        with pytest.raises(REFUSED):
            qir.QSoftmax("s", t)


@pytest.mark.parametrize("n", [1, 3])
def test_a_part_has_one_multiplier_and_one_shift_per_output(n):
    """Spec: a part's multipliers and shifts have exactly as many entries as its kernel has outputs: one
    more or one fewer is refused."""
    k = np.ones((2, n), np.int64)
    qir.QPart(k, 0, np.full(n, 1 << 30), np.zeros(n, np.int64))
    for m in (n - 1, n + 1):
        with pytest.raises(REFUSED):
            qir.QPart(k, 0, np.full(m, 1 << 30), np.zeros(n, np.int64))
        with pytest.raises(REFUSED):
            qir.QPart(k, 0, np.full(n, 1 << 30), np.zeros(m, np.int64))


def test_a_layer_with_int8_inputs_takes_int8_weights_and_one_with_int16_inputs_int16_weights():
    """Spec: with 8-bit inputs every weight is in [-128, 127] (the C kernel's int8 operands), with 16-bit
    inputs in [-32767, 32767]."""
    for w in (-128, 127):
        _linear(2, 2, 8, w)
    for w in (-129, 128):
        with pytest.raises(REFUSED):
            _linear(2, 2, 8, w)
    for w in (-32767, 32767, 200):
        _linear(2, 2, 16, w)


def test_a_16_bit_softmax_table_has_the_16_bit_size_and_an_8_bit_one_256_entries():
    """Spec: the exp table of a 16-bit softmax has LUT16_SIZE entries, of an 8-bit one 256; the other size is
    refused."""
    qir.QSoftmax("s", np.zeros(qir.LUT16_SIZE, np.int64), 1 / 32768, 0, bits=16)
    qir.QSoftmax("s", np.zeros(256, np.int64))
    with pytest.raises(REFUSED):
        qir.QSoftmax("s", np.zeros(256, np.int64), 1 / 32768, 0, bits=16)
    with pytest.raises(REFUSED):
        qir.QSoftmax("s", np.zeros(qir.LUT16_SIZE, np.int64))


def test_each_layer_reads_the_width_the_one_before_writes_unless_converted():
    """Spec (``check_widths``): an 8-bit table after a 16-bit one, or a 16-bit one after an 8-bit one, is
    refused; a QConvert between them changes the width; a running-mean pool is 8-bit unless it says so."""

    def lut(bits):
        n = 256 if bits == 8 else qir.LUT16_SIZE
        return qir.QLut(f"t{bits}", np.zeros(n, np.int64), 0.1, 0, bits)

    for a, b in ((8, 16), (16, 8)):
        with pytest.raises(REFUSED):
            qir.check_widths([lut(a), lut(b)])
        conv = qir.QConvert("c", 0, 1 << 30, 0, 0.1, 0, 8) if b == 8 else qir.QConvert("c", 0, 0, 0, 0.1, 0, 16)
        qir.check_widths([lut(a), conv, lut(b)])
    pool = qir.QPool("p", 0, 1 << 30, 0, 0.1, 0)  # a pool's default width: 8 bits
    qir.check_widths([lut(8), pool])
    with pytest.raises(REFUSED):
        qir.check_widths([lut(16), pool])


def test_an_lmu_realization_name_is_known_or_a_short_plain_name():
    """Spec (``validate``): an LMU's realization is one of the known ones or a name of at most 32 letters,
    digits, '-' and '_' (what the report prints); 33 characters, or another character, are refused."""
    from graphs import chain

    import lmu_edge

    rng = np.random.default_rng(3)
    qg = lmu_edge.quantize(lmu_edge.fold(chain(rng, q=4, theta=6.0), "zoh"), rng.standard_normal((1, 20, 2)))
    node = next(layer for layer in qg.layers if isinstance(layer, qir.QLMU))
    for ok in ("dense", "pade-3_4", "x" * 32):
        qir.validate(dataclasses.replace(node, realization=ok), "l")
    for bad in ("x" * 33, "pade 3/4"):
        with pytest.raises(REFUSED):
            qir.validate(dataclasses.replace(node, realization=bad), "l")


def test_a_dense_memory_holds_int32_coefficients():
    """Spec: a dense memory's coefficients are int32: -2^31 and 2^31 - 1 accepted, one past either refused."""
    B = np.zeros(2, np.int64)
    for ok in (-(1 << 31), (1 << 31) - 1):
        qir.QDenseMemory("direct", np.full((2, 2), ok, np.int64), 30, 32, B, 0)
    for bad in (-(1 << 31) - 1, 1 << 31):
        with pytest.raises(REFUSED):
            qir.QDenseMemory("direct", np.full((2, 2), bad, np.int64), 30, 32, B, 0)


def test_a_fixed_point_type_read_from_a_file_is_8_to_32_bits():
    """Spec (``validate``): the integer runtime holds fixed-point values of 8 to 32 bits with fractions in
    [-64, 64]; 7 or 33 bits, or a fraction of 65, are refused."""
    from lmu_edge.fixedpoint import FixedType

    for ok in ((8, 0), (32, 64), (16, -64)):
        qir.validate(FixedType(*ok), "t")
    for bad in ((7, 0), (33, 0), (16, 65), (16, -65)):
        with pytest.raises(REFUSED):
            qir.validate(FixedType(*bad), "t")


def test_a_hidden_softmax_is_a_softmax_of_the_lmu_s_width_after_its_hidden_cell():
    """Spec: a QLMU's ``hidden_softmax`` is a :class:`qir.QSoftmax` of the layer's activation width, and only
    with a hidden cell; another node, another width, or no hidden cell is refused (a file could otherwise
    hand the runtime a table it reads as an exp table)."""
    from graphs import chain

    import lmu_edge

    rng = np.random.default_rng(3)
    qg = lmu_edge.quantize(lmu_edge.fold(chain(rng, q=4, theta=6.0), "zoh"), rng.standard_normal((1, 20, 2)))
    node = next(layer for layer in qg.layers if isinstance(layer, qir.QLMU))
    sm8 = qir.QSoftmax("s", np.zeros(256, np.int64))
    dataclasses.replace(node, hidden_softmax=sm8)
    bad = (
        {"hidden_softmax": qir.QSoftmax("s", np.zeros(qir.LUT16_SIZE, np.int64), 1 / 32768, 0, bits=16)},
        {"hidden_softmax": qir.QLut("t", np.zeros(256, np.int64), 0.1, 0)},
        {"hidden_softmax": sm8, "hidden": None},
    )
    for kw in bad:
        with pytest.raises(REFUSED, match="hidden_softmax"):
            dataclasses.replace(node, **kw)
