"""Specifications of the float C code generator and of the multiply-accumulate count both C generators
report, which the generated mutants of targets/c_codegen.py found unchecked (docs/testing.md, "Generated
mutants"): one small model whose three LMUs hold every memory form with d > 1 (so d * q, d + q, d % q and
d / q differ), compiled once with the host gcc and stepped against the float oracle."""

import shutil

import numpy as np
import pytest
from graphs import lmu

import lmu_edge
from lmu_edge import ir, lti
from lmu_edge.metrics import relative_error
from lmu_edge.targets import c_codegen


def _graph() -> ir.Graph:
    """input(2) -> LMU dense memory (d=2, q=3; input, hidden and memory encoders, the input to the hidden
    layer, a simple RNN) -> LMU RK4 x 3 substeps (d=2, q=4) -> LMU FIR (d=2, q=3, no hidden layer: its
    memory is its output) -> Dense."""
    rng = np.random.default_rng(57)
    a = lmu(
        rng,
        "dense",
        n_in=2,
        d=2,
        q=3,
        theta=5.0,
        hidden="simple_rnn",
        units=4,
        input_to_hidden=True,
        rnn_path=True,
    )
    b = lmu(rng, "rk", n_in=4, d=2, q=4, theta=7.0, units=3, memory=ir.RungeKutta(4, 3))
    kernel = lti.legendre_impulse_response(3, 6.0, 9)
    c = lmu(rng, "fir", n_in=3, d=2, q=3, theta=6.0, hidden=None, memory=ir.FIR(kernel))
    n = c.out_features(3)
    head = ir.Dense("head", rng.standard_normal((n, 2)), rng.standard_normal(2) * 0.1, "linear")
    return ir.Graph("float_spec", input_features=2, seq_len=None, layers=(a, b, c, head))


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
    assert kinds == [ir.DenseSS, ir.RungeKutta, ir.FIR]  # the premise: fold kept each memory's form
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
