"""Specifications of the ONNX target that its generated mutants found unchecked (docs/testing.md, "Generated
mutants"): relu6 clips at 6, a stream steps one frame given as a vector, and the mixed-precision search
may widen every 8-bit state but never the states a QDQ model already keeps at 16 bits. One small graph (a
relu6 Dense driven past 6, an LMU with a SimpleRNN cell, a running mean), float, in ONNX Runtime."""

import numpy as np
import pytest
from graphs import lmu

import lmu_edge
from lmu_edge import ir

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")


def _graph():
    rng = np.random.default_rng(57)
    pre = ir.Dense("pre", rng.standard_normal((2, 3)) * 6.0, np.array([3.0, 0.0, -1.0]), "relu6")
    mid = lmu(rng, n_in=3, q=4, theta=6.0, hidden="simple_rnn", units=3)
    post = ir.Dense("post", rng.standard_normal((3, 2)), np.zeros(2), "linear")
    g = ir.Graph("onnx_spec", input_features=2, seq_len=None, layers=(pre, mid, ir.TimePooling("pool"), post))
    return lmu_edge.fold(g, "zoh")


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    g = _graph()
    x = np.random.default_rng(5).standard_normal((2, 20, 2))
    art = lmu_edge.convert(g, "onnx", tmp_path_factory.mktemp("onnx") / "f")
    return g, x, art


def test_relu6_clips_at_six_in_onnx_runtime(model):
    """Spec: a relu6 layer is min(max(x, 0), 6): the ONNX model steps as the float oracle (1e-5 of the output
    scale) with inputs that drive the relu6 past 6."""
    from lmu_edge.metrics import relative_error

    g, x, art = model
    pre = g.layers[0]
    assert (x @ pre.kernel + pre.bias).max() > 6.5  # the premise: the clip at 6 is reached
    assert relative_error(art.run(x), lmu_edge.simulate(g, x)) <= 1e-5


def test_a_stream_steps_one_frame_given_as_a_vector(model):
    """Spec (the target contract's ``stream``): a new stream is reset for one sequence; ``step`` takes one frame
    as ``(F,)`` and returns ``(out,)``, or a batch as ``(N, F)`` and returns ``(N, out)``, the same numbers."""
    g, x, art = model
    one, batch = art.module.stream(art, "onnxruntime"), art.module.stream(art, "onnxruntime")
    batch.reset(1)  # a new stream is already reset for one sequence: ``one`` is stepped as it comes
    for t in range(4):
        y1 = one.step(x[0, t])
        yb = batch.step(x[0, t][None])
        assert y1.shape == (g.output_features,) and yb.shape == (1, g.output_features)
        np.testing.assert_array_equal(y1, yb[0])


def test_widening_may_take_every_8_bit_state_and_never_a_16_bit_one(model):
    """Spec (``Calibration.candidates``): a QDQ model keeps the LMU memory and the running mean's sum and
    count at 16 bits; every other state (a SimpleRNN's h) is 8 bits and is a candidate of the
    mixed-precision search, those are not."""
    from lmu_edge.targets import _stepplan, onnx

    g, x, _ = model
    plan = _stepplan.StatePlan(g)
    cal = onnx.Calibration(g, plan, x)
    kinds = {name: kind for name, _, kind, _ in plan.spec}
    assert sorted(kinds.values()) == ["h", "m", "mean", "n"]  # the premise: both kinds of state
    for name, kind in kinds.items():
        assert (name in cal.candidates) == (kind == "h"), name


def test_the_calibration_counts_a_running_mean_up_to_its_16_bit_range(model):
    """Spec: a running mean's step count is calibrated up to COUNT_RANGE (one more pass starts the count at
    COUNT_RANGE - T), however short the calibration, so that its 16-bit scale counts a long stream exactly."""
    from lmu_edge.targets import _stepplan, onnx

    g, x, _ = model
    plan = _stepplan.StatePlan(g)
    cal = onnx.Calibration(g, plan, x)
    (count,) = _stepplan.pooling_counts(g)
    assert x.shape[1] < _stepplan.COUNT_RANGE  # the premise: the calibration alone counts far less
    assert cal.hi[f"{count}_out"] == _stepplan.COUNT_RANGE


def test_every_weight_matrix_is_a_widening_candidate(model):
    """Spec: each weight matrix of the step model (every 2-D initializer) is a candidate of the mixed-precision
    search, which may store it in int16."""
    from lmu_edge.targets import _stepplan, onnx

    g, x, _ = model
    plan = _stepplan.StatePlan(g)
    cal = onnx.Calibration(g, plan, x)
    step, _, _ = onnx.build(g, plan, expose=True, split=True)  # the model the calibration runs
    matrices = [init.name for init in step.graph.initializer if len(init.dims) == 2]
    assert matrices and sorted(cal.weights) == sorted(matrices)
    assert set(matrices) <= set(cal.candidates)
