"""Specifications of the C code generator (targets/c_codegen.py) that its generated mutants found
unchecked (docs/testing.md, "Generated mutants"): one small model whose three LMUs hold every memory form
with d > 1 (so d * q, d + q, d % q, d ** q and d / q differ), compiled with the host gcc as float32 (against
the float oracle), int8 and int16x8 (against the integer reference, bit for bit), and the
multiply-accumulate count both generators report, band convolutions included."""

import shutil

import numpy as np
import pytest
from graphs import lmu

import lmu_edge
from lmu_edge import intsim, ir, lti
from lmu_edge.metrics import relative_error
from lmu_edge.targets import c_codegen


def _graph() -> ir.Graph:
    """input(2) -> LMU RK4 x 3 substeps (d=2, q=4, a Dense cell) -> LMU dense memory (d=2, q=3; input, hidden
    and memory encoders, the input to the hidden layer, a simple RNN) -> LMU FIR (d=2, q=3, no hidden layer:
    its memory is its output) -> Dense. Each layer's state follows the one before it in the C state struct,
    so a buffer written past its end changes the next layer's memory."""
    rng = np.random.default_rng(57)
    a = lmu(rng, "rk", n_in=2, d=2, q=4, theta=7.0, units=3, memory=ir.RungeKutta(4, 3))
    b = lmu(
        rng,
        "dense",
        n_in=3,
        d=2,
        q=3,
        theta=5.0,
        hidden="simple_rnn",
        units=4,
        input_to_hidden=True,
        rnn_path=True,
    )
    kernel = lti.legendre_impulse_response(3, 6.0, 9)
    c = lmu(rng, "fir", n_in=4, d=2, q=3, theta=6.0, hidden=None, memory=ir.FIR(kernel))
    n = c.out_features(4)
    head = ir.Dense("head", rng.standard_normal((n, 2)), rng.standard_normal(2) * 0.1, "linear")
    return ir.Graph("c_spec", input_features=2, seq_len=None, layers=(a, b, c, head))


def _macs(g: ir.Graph) -> int:
    """Multiply-accumulates per step, by definition: a matrix (n, m) times a vector n * m; a dense memory d q^2
    (Abar) + d q (Bbar); a FIR memory d q L; RK the operations of lti.rk_cost halved (a multiply-add each)."""
    total, n_in = 0, g.input_features
    for layer in g.layers:
        if isinstance(layer, ir.Dense):
            total += n_in * layer.kernel.shape[1]
        else:
            d, q, mem = layer.memory_d, layer.order, layer.memory
            units = layer.hidden.units if layer.hidden is not None else 0
            total += n_in * d + (units * d if layer.hidden_encoders is not None else 0)
            total += d * q * d if layer.memory_encoders is not None else 0
            if isinstance(mem, ir.DenseSS):
                total += d * q * q + d * q
            elif isinstance(mem, ir.FIR):
                total += d * q * mem.kernel.shape[1]
            else:
                total += d * lti.rk_cost(q, mem.rk_order, mem.substeps)[0] // 2
            if layer.hidden is not None:
                z = d * q + (n_in if layer.input_to_hidden else 0)
                total += z * units + (units * units if isinstance(layer.hidden, ir.HiddenSimpleRNN) else 0)
        n_in = layer.out_features(n_in)
    return total


@pytest.fixture(scope="module")
def folded():
    g = lmu_edge.fold(_graph())
    kinds = [type(layer.memory) for layer in g.lmu_layers]
    assert kinds == [ir.RungeKutta, ir.DenseSS, ir.FIR]  # the premise: fold kept each memory's form
    return g


def test_float_c_of_every_memory_form_with_several_dimensions_is_the_float_oracle(folded, tmp_path):
    """Spec: the float32 C steps as the float64 oracle, within float32 rounding (1e-5 of the output scale),
    for a dense, an RK (several substeps) and a FIR memory with d = 2, encoders from the input, the hidden
    state and the memory, the input passed to the hidden layer and a memory read as the layer's output."""
    if shutil.which("gcc") is None or shutil.which("make") is None:
        pytest.fail("gcc / make not installed (Debian: gcc make)")
    x = np.random.default_rng(5).standard_normal((2, 40, 2))
    art = lmu_edge.convert(folded, "c", tmp_path / "f", measure=False)
    ref = lmu_edge.simulate(folded, x)
    assert relative_error(art.run(x), ref) <= 1e-5


def test_both_c_generators_count_the_multiply_accumulates_of_the_definition(folded):
    """Spec: the MAC count of a step (the report's figure) is the definition's, for the float C and for the
    integer C of the same model (the integer parts hold the same matrices)."""
    want = _macs(folded)
    assert c_codegen.generate_float(folded, "p").macs == want
    x = np.random.default_rng(6).standard_normal((2, 30, 2))
    qg = lmu_edge.quantize(folded, x, state_bits=32)
    assert c_codegen.generate_int(qg, "p").macs == want


@pytest.mark.parametrize("mode", ["int8", "int16x8"])
def test_integer_c_of_every_memory_form_with_several_dimensions_is_the_integer_reference(folded, mode, tmp_path):
    """Spec: the integer C (8- and 16-bit activations, 16-bit states: the dense memory's delta or direct form
    as the quantizer chose it) is the integer reference bit for bit."""
    if shutil.which("gcc") is None or shutil.which("make") is None:
        pytest.fail("gcc / make not installed (Debian: gcc make)")
    x = np.random.default_rng(7).standard_normal((2, 30, 2))
    kw = dict(quantize=mode, calibration=x, state_bits=16, widen_db=None, measure=False)  # no widening search
    art = lmu_edge.convert(folded, "c", tmp_path / mode, **kw)
    qg = lmu_edge.load(art.path / "quantized.lmu.npz")
    xq = intsim.quantize_input(qg, x)
    y, _ = art.module.run_native(art, xq.astype(intsim.act_dtype(qg)), "host")
    assert np.array_equal(y.astype(np.int64), intsim.run_int(qg, xq))


def test_a_band_convolution_counts_every_band_it_computes():
    """Spec: a band convolution computes (bands + pads - kernel_f + 1) // pool * pool output bands of kernel_t
    kernel_f channels_in x channels_out MACs each; the float and the integer C report that, plus the Dense
    head's inputs x outputs."""
    rng = np.random.default_rng(8)
    bands, kt, kf, ci, co, pool = 9, 2, 3, 1, 4, 3
    conv = ir.BandConv("c", bands, rng.standard_normal((kt, kf, ci, co)), None, 1, 0, "relu", pool)
    n = conv.out_features(bands * ci)
    g = ir.Graph("b", bands * ci, (conv, ir.Dense("head", rng.standard_normal((n, 2)), None, "linear")))
    out_bands = (bands + 1 - kf + 1) // pool
    want = out_bands * pool * kt * kf * ci * co + n * 2
    assert c_codegen.generate_float(g, "p").macs == want
    qg = lmu_edge.quantize(g, rng.standard_normal((2, 12, bands * ci)))
    assert c_codegen.generate_int(qg, "p").macs == want
