"""Specifications of the C code generator's choices that the generated mutants of targets/c_codegen.py
found unchecked (docs/testing.md, "Generated mutants"), read from the code it writes
(``c_codegen.generate_int``)."""

import re

import numpy as np
import pytest
from graphs import chain

import lmu_edge
from lmu_edge import qir
from lmu_edge.targets import c_codegen


def _linears(qg) -> dict:
    """The C symbol of every int8 fixed-point linear layer of ``qg`` and its ``QLinear``."""
    out = {}
    for i, layer in enumerate(qg.layers):
        if isinstance(layer, qir.QDense):
            out[f"p_l{i}_dense"] = layer.linear
        elif isinstance(layer, qir.QLMU):
            out[f"p_l{i}_enc"] = layer.encoder
            if layer.hidden is not None:
                out[f"p_l{i}_hidden"] = layer.hidden
    return out


def test_right_shifts_and_the_32_bit_fast_path_are_flagged_exactly_where_they_hold():
    """Spec: an int8 layer whose every requantization is a right shift (shift in [-31, 0], multiplier above
    -2^31) says so (``.right_shifts = 1``, lmu_mbqm32_r). One of one part with right shifts only takes the
    32-bit fast path (``.acc30 = 1``, lmu_qlinear30) iff every row's |bias| + max(127 - zp, zp + 128) sum |w|
    is below 2^30 and |out_zp| < 2^30, which every int8 zero point is: a layer whose output zero point is
    -128 (a relu) too."""
    rng = np.random.default_rng(18)
    g = lmu_edge.fold(chain(rng, q=4, theta=6.0))
    qg = lmu_edge.quantize(g, rng.standard_normal((2, 30, 2)))
    text = "\n".join(c_codegen.generate_int(qg, "p").objects)
    structs = dict(re.findall(r"static const lmu_qlinear_t (\w+) = \{(.*?)\};", text, re.S))
    linears = _linears(qg)
    assert set(linears) <= set(structs) and len(linears) >= 3
    zero_points = set()
    for sym, q in linears.items():
        body = structs[sym]
        (part,) = q.parts
        w = np.abs(np.asarray(part.kernel, np.int64)).sum(axis=0)
        b = np.abs(np.asarray(q.bias, np.int64)) if q.bias is not None else 0
        bound = int(np.max(b + max(127 - int(part.in_zp), int(part.in_zp) + 128) * w))
        right = q.in_bits == 8 and all(
            -31 <= int(np.min(p.shift)) and int(np.max(p.shift)) <= 0 and int(np.min(p.multiplier)) > -(2**31)
            for p in q.parts
        )
        assert (".right_shifts = 1" in body) == right, sym
        want = right and bound < 2**30 and abs(int(q.out_zp)) < 2**30
        assert (".acc30 = 1" in body) == want, sym
        if want:
            zero_points.add(int(q.out_zp))
    assert -128 in zero_points  # the premise: a fast-path layer whose output zero point is far from 0


@pytest.mark.parametrize("coeff_bits", [16, 32])
def test_an_lmu_state_holds_d_times_q_values_and_a_fir_kernel_its_coefficient_width(coeff_bits):
    """Spec: each LMU's state buffer (``l<i>_m``) holds d q values of its state width, all d q requantized to
    activations at every step, and a FIR kernel is an array of int16_t for coefficients of up to 16 bits,
    int32_t beyond (a 24-bit tap in int16_t wraps)."""
    rng = np.random.default_rng(20)
    d, q = 2, 5
    g = lmu_edge.fold(chain(rng, q=q, theta=8.0, d=d), "fir")
    qg = lmu_edge.quantize(g, rng.standard_normal((2, 30, 2)), state_bits=32, coeff_bits=coeff_bits)
    code = c_codegen.generate_int(qg, "p")
    (i,) = [k for k, layer in enumerate(qg.layers) if isinstance(layer, qir.QLMU)]
    mem = qg.layers[i].memory
    assert (f"int{qg.layers[i].state_type.width}_t", f"l{i}_m", d * q) in code.fields
    (requant,) = [line for line in code.step_lines if "state -> activations" in line and f"s->l{i}_m" in line]
    assert re.search(rf"k_ < {d * q};|lmu_requant8_s16\(s->l{i}_m, s->l{i}_z, {d * q},", requant), requant
    (kernel,) = [a for a in code.arrays if a["name"] == f"p_l{i}_kernel"]
    assert kernel["ctype"] == ("int16_t" if mem.coeff_bits <= 16 else "int32_t") and kernel["count"] == mem.kernel.size
    assert (mem.coeff_bits > 16) == (coeff_bits > 16)  # the premise: both widths occur


def test_every_state_value_reaches_the_memory_encoders_each_step():
    """Spec (an LMU whose memory feeds its encoder, ``memory_to_memory``): the d q state values are
    requantized into their own buffer (``l<i>_mzp``, d q values) at every step, all of them."""
    rng = np.random.default_rng(23)
    d, q = 2, 5
    g = lmu_edge.fold(chain(rng, q=q, theta=8.0, d=d, rnn_path=True))
    qg = lmu_edge.quantize(g, rng.standard_normal((2, 30, 2)))
    code = c_codegen.generate_int(qg, "p")
    (i,) = [k for k, layer in enumerate(qg.layers) if isinstance(layer, qir.QLMU)]
    assert qg.layers[i].memory_to_memory
    assert any(name == f"l{i}_mzp" and n == d * q for _, name, n in code.fields)
    (requant,) = [line for line in code.step_lines if "state -> activations" in line and f"s->l{i}_mzp" in line]
    assert re.search(rf"k_ < {d * q};|lmu_requant8_s16\(s->l{i}_m, s->l{i}_mzp, {d * q},", requant), requant
