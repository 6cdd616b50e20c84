"""The target contract (lmu_edge.targets.Target) and the float step shared by the TFLite and ONNX targets."""

import sys
import types

import numpy as np
import pytest
from graphs import chain

import lmu_edge
from lmu_edge import ir, lti, qir, registry, targets
from lmu_edge.errors import LmuEdgeError, UnsupportedLayerError
from lmu_edge.targets import _stepplan
from lmu_edge.targets._floatstep import FloatStep, StepOps


@pytest.mark.parametrize("name", sorted(registry.TARGETS))
def test_every_registered_target_fulfils_the_contract(name):
    module = targets.load(name)
    assert isinstance(module, targets.Target)
    assert module.DEFAULT_RUNTIME in module.RUNTIMES
    assert module.QUANTIZE[0] == "float"


def test_an_incomplete_target_is_refused_with_what_it_lacks(monkeypatch):
    fake = types.ModuleType("lmu_edge_fake_target")
    fake.QUANTIZE, fake.RUNTIMES, fake.DEFAULT_RUNTIME, fake.OPTIONS = ("float",), ("x",), "x", {}
    fake.emit = lambda graph, out_dir, options: {}
    monkeypatch.setitem(sys.modules, fake.__name__, fake)
    monkeypatch.setitem(registry.TARGETS, "fake", (fake.__name__, None, "a target without run and stream"))
    with pytest.raises(LmuEdgeError, match="lacks run, stream"):
        targets.load("fake")
    fake.run = lambda artifact, x, runtime: x
    fake.stream = lambda artifact, runtime: None
    assert targets.load("fake") is fake
    assert not isinstance(fake, targets.CheckedTarget)


class NumpyOps:
    """A third StepOps backend, in float64 numpy: the shared step description itself, with no runtime."""

    def const(self, a):
        return np.asarray(a, dtype=np.float64)

    def matmul(self, x, W, b=None):
        y = x @ np.asarray(W, np.float64)
        return y if b is None else y + np.asarray(b, np.float64)

    def add(self, a, b):
        return a + b

    def sub(self, a, b):
        return a - b

    def mul(self, a, b):
        return a * b

    def div(self, a, b):
        return a / b

    def unary(self, name, x):
        if name == "softmax":
            e = np.exp(x - x.max(axis=-1, keepdims=True))
            return e / e.sum(axis=-1, keepdims=True)
        return {
            "relu": lambda v: np.maximum(v, 0),
            "relu6": lambda v: np.clip(v, 0, 6),
            "tanh": np.tanh,
            "sigmoid": lambda v: 1 / (1 + np.exp(-v)),
        }[name](x)

    def reshape(self, x, shape):
        return np.reshape(x, shape)

    def concat(self, xs, axis):
        return np.concatenate(xs, axis=axis)

    def cols(self, x, start, stop):
        return x[:, start:stop]

    def cumsum(self, x):
        return np.cumsum(x, axis=1)

    def memory_path(self, on):
        pass


def _graphs():
    rng = np.random.default_rng(7)
    fir_kernel = lti.legendre_impulse_response(6, 10.0, 25)
    return {
        "dense_d2": lmu_edge.fold(chain(rng, q=8, theta=12.0, d=2)),
        "euler_input_to_output": lmu_edge.fold(
            chain(rng, q=6, theta=10.0, disc="euler", hidden=None, input_to_hidden=True)
        ),
        "simple_rnn": lmu_edge.fold(chain(rng, q=6, theta=10.0, d=2, hidden="simple_rnn", rnn_path=True)),
        "rk2x3": lmu_edge.fold(chain(rng, q=6, theta=10.0), "rk2", 1.0, substeps=3),
        "fir": lmu_edge.fold(chain(rng, q=6, theta=10.0, memory=ir.ImpulseResponse(fir_kernel, "truncated")), "fir"),
        "fir_rnn_path": chain(rng, q=6, theta=10.0, hidden="simple_rnn", rnn_path=True, memory=ir.FIR(fir_kernel)),
        "pooling": lmu_edge.fold(
            ir.Graph(
                "pool",
                2,
                chain(rng, q=6, theta=10.0).layers[:2]
                + (ir.TimePooling("pool"), ir.Dense("out", rng.standard_normal((5, 3)), None, "softmax")),
            )
        ),
    }


GRAPHS = _graphs()


@pytest.mark.parametrize("name", list(GRAPHS))
@pytest.mark.parametrize("quantized_form", [False, True])
def test_the_shared_float_step_is_the_oracle_in_float64(name, quantized_form):
    # The step both targets emit, run by a numpy backend: equal to the float64 oracle up to round-off, for
    # every layer and realization. The quantized targets' form (Abar split in two, the state in balanced
    # coordinates m = sigma * mt) is exact in real arithmetic, so it must match too.
    graph = GRAPHS[name]
    x = np.random.default_rng(1).standard_normal((1, 40, graph.input_features))
    plan = _stepplan.StatePlan(graph, _stepplan.record(graph, x), balance=quantized_form)
    if quantized_form and any(
        isinstance(layer, ir.LMU) and isinstance(layer.memory, ir.DenseSS) for layer in graph.layers
    ):
        assert any(np.ptp(s) > 0 for s in plan.sigma.values())  # the coordinates really change
    ops: StepOps = NumpyOps()
    fstep = FloatStep(graph, plan, split=quantized_form)
    states = {n: np.zeros((1, s)) for n, _, _, s in plan.spec}
    ys = []
    for t in range(x.shape[1]):
        y, new = fstep.step(ops, x[:, t], states)
        assert set(new) == set(states)
        states = new
        ys.append(y[0])
    stream = lmu_edge.reference.Stream(graph)
    ref = np.stack([stream.step(x[0, t]) for t in range(x.shape[1])])
    np.testing.assert_allclose(np.stack(ys), ref, rtol=0, atol=1e-11 * max(1.0, float(np.abs(ref).max())))


def test_a_layer_without_a_float_step_is_named():
    with pytest.raises(UnsupportedLayerError, match="layer .bad.*supported layers: Dense, Activation, TimePooling"):
        FloatStep(types.SimpleNamespace(layers=(types.SimpleNamespace(name="bad"),)), None)


def test_mypy_checks_every_registered_target_against_the_contract():
    # targets/__init__.py lists the target modules under TYPE_CHECKING so that mypy checks their signatures
    # against Target / CheckedTarget; the lists must follow the registry
    import re
    from pathlib import Path

    src = Path(targets.__file__).read_text()

    def names(kind):
        m = re.search(rf"_\w+: tuple\[{kind}, \.\.\.\] = \(([^)]*)\)", src)
        return set(m.group(1).replace(" ", "").split(","))

    assert names("Target") == set(registry.TARGETS)
    assert names("CheckedTarget") == {n for n in registry.TARGETS if isinstance(targets.load(n), targets.CheckedTarget)}


def test_the_float_step_knows_every_layer_and_recurrent_memory_of_the_ir():
    # a layer added to lmu_edge.ir fails here until TFLite and ONNX can write it (or refuse it on purpose)
    assert set(FloatStep.LAYERS) == set(ir.LAYER_CLASSES) - set(qir.QLAYERS)  # float layers (qir adds its own)
    assert set(FloatStep.MEMORIES) | {ir.FIR} == {ir.DenseSS, ir.RungeKutta, ir.FIR}
