"""The proven state bound, tested from the other side: a worst-case input reaches it.

The bound the quantizer proves for a memory is ``G * max|u| + noise``, with ``G`` the largest l1 norm
of one state component's impulse response. The input that maximizes that component at step T is the
encoder output at its clamp, with the signs of the impulse response read backwards:
``u[t] = max|u| * sign(h_i[T - t])``. Driving the integer memory update with it must reach >= 90% of
the bound for the dense and FIR realizations (else the bound is loose, or wrong), and never exceed it.
A quantizer that computed the bound too small fails the second assertion; one that computed it too
large (or a test that never came near it) fails the first.
"""

import numpy as np
import pytest
from graphs import chain
from quantized_memory import impulse as _impulse

import lmu_edge
from lmu_edge import intsim, lti, qir

# (realization, order, theta, state bits, RK substeps, least fraction of the bound reached)
CASES = [
    ("zoh", 8, 12.0, 16, None, 0.9),
    ("zoh", 16, 200.0, 16, None, 0.9),
    ("zoh", 6, 10.0, 32, None, 0.9),
    ("euler", 8, 40.0, 16, None, 0.9),
    ("fir", 6, 8.0, 16, None, 0.9),
    ("fir", 12, 30.0, 32, None, 0.9),
    ("rk4", 8, 12.0, 16, 2, 0.9),
    ("rk2", 6, 10.0, 32, 2, 0.9),
    ("rk4", 32, 64.0, 16, 2, 0.9),
    # many substeps: the bound's rounding-noise term (2 roundings per stage per substep, each at
    # its worst) grows with the substeps while an input cannot provoke it; measured 61.4%
    ("rk4", 32, 64.0, 16, 16, 0.6),
]


def _worst_case(lmu: qir.QLMU, T: int):
    """Peak |state| in LSB reached by the worst-case input, and the proven bound in LSB."""
    H = _impulse(lmu, T)
    i = int(np.argmax(np.abs(H).sum(axis=0)))
    u = lmu.u_type.max_int * np.where(H[::-1, i] >= 0, 1, -1)
    peak = 0
    for sign in (1, -1):
        states = intsim.memory_response(lmu, sign * u[:, None])
        peak = max(peak, int(np.abs(states).max()))
    return peak, lmu.state_bound * 2.0**lmu.state_type.frac


@pytest.mark.parametrize("real,q,theta,bits,substeps,least", CASES)
def test_worst_case_input_reaches_but_never_exceeds_the_proven_bound(real, q, theta, bits, substeps, least):
    rng = np.random.default_rng(1300 + q)
    memory = ir_fir(q, theta) if real == "fir" else None
    g = lmu_edge.fold(
        chain(rng, q=q, theta=theta, disc="euler" if real == "euler" else "zoh", memory=memory),
        real,
        error_budget=2.0,
        substeps=substeps,
    )
    qg = lmu_edge.quantize(g, rng.standard_normal((2, int(4 * theta), 2)), state_bits=bits)
    lmu = next(layer for layer in qg.layers if isinstance(layer, qir.QLMU))
    T = int(20 * theta) if not isinstance(lmu.memory, qir.QFIRMemory) else lmu.memory.kernel.shape[1] + 2
    peak, bound = _worst_case(lmu, T)
    assert peak <= bound <= lmu.state_type.max_int, (peak, bound)
    assert peak / bound >= least, peak / bound


def ir_fir(q, theta):
    from lmu_edge import ir

    return ir.ImpulseResponse(lti.legendre_impulse_response(q, theta, int(2.5 * theta)), "truncated")
