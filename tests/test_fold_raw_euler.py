"""An unstable Euler source layer: its own realization measures exactly, whatever the horizon's growth.

Euler's step of the order-96 Legendre memory is unstable below theta 1265 (``lti.euler_stable_theta``);
at theta 632.411 its response grows to ~3e31 over the 5 * theta horizon, and float64 rounding grows
with it. Computing the reference and a candidate with different powers of the map (``A^512`` against
``A^256``) then left them 5e-6 apart relative to the scale, so the layer's own Euler map was over the
float budget 1e-6 and the fold refused the layer (generated seed 40, order 225, theta 5004.6).
"""

import numpy as np
import pytest

from lmu_edge import folding as fold
from lmu_edge import impulse, ir, lti
from lmu_edge.errors import FoldError

Q, THETA = 96, 632.411


def euler_layer():
    return ir.LMU(
        "lmu",
        memory_d=2,
        order=Q,
        theta=THETA,
        discretizer="euler",
        input_encoders=np.ones((1, 2)),
        memory=ir.ImpulseResponse(),
    )


def test_the_layer_is_an_unstable_euler_source():
    assert THETA < lti.euler_stable_theta(Q)
    ref = impulse.Reference(euler_layer())
    assert ref.rho > 1.0
    assert ref.what == "exact float64 euler response"


def test_the_layers_own_euler_map_measures_zero_and_folds():
    layer = euler_layer()
    folded = fold.fold_layer(layer, "euler")
    assert isinstance(folded.memory, ir.DenseSS) and folded.memory.method == "euler"
    assert folded.measurement.error == 0.0
    assert folded.measurement.horizon >= 5 * THETA


def test_auto_folds_the_unstable_euler_layer_within_budget():
    folded = fold.fold_layer(euler_layer(), "auto")
    assert folded.measurement.error <= fold.DEFAULT_ERROR_BUDGET


def test_an_inaccurate_realization_still_fails_against_it():
    # ZOH of the same system is a different map: its error is real and stays over the budget
    with pytest.raises(FoldError, match="no 'zoh' realization is within the error budget"):
        fold.fold_layer(euler_layer(), "zoh")
