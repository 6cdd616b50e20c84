"""The legacy tflite-runtime (numpy < 2) runs the tflite target's step models.

Runs in the numpy<2 environment (scripts/numpy1_tests.sh). TensorFlow cannot
live in this process (tflite-runtime fails when TensorFlow was imported first,
and TensorFlow needs numpy 2), so the model is converted by the main
environment's Python, named by LMU_EDGE_MAIN_PYTHON, in a subprocess.
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

tflite_runtime = pytest.importorskip(
    "tflite_runtime.interpreter", reason="tflite-runtime not installed: pip install tflite-runtime (numpy < 2)"
)

import lmu_edge  # noqa: E402  (after the importorskip above)
from lmu_edge import irfile  # noqa: E402  (after the importorskip above)
from lmu_edge.metrics import relative_error  # noqa: E402  (after the importorskip above)

TESTS = Path(__file__).resolve().parents[1]


def _convert(tmp_path, variant):
    py = os.environ.get("LMU_EDGE_MAIN_PYTHON")
    if not py:
        pytest.fail("set LMU_EDGE_MAIN_PYTHON to the Python of the main environment (with lmu-edge[tflite])")
    code = textwrap.dedent(f"""
        import sys, numpy as np
        sys.path.insert(0, {str(TESTS)!r})
        import lmu_edge
        from graphs import chain
        g = lmu_edge.fold(chain(np.random.default_rng(5), q=6, theta=10.0, hidden="simple_rnn", rnn_path=True))
        lmu_edge.convert(g, "tflite", {str(tmp_path / variant)!r}, variant={variant!r})
    """)
    subprocess.run([py, "-c", code], check=True, capture_output=True)
    return tmp_path / variant


@pytest.mark.parametrize("variant", ["external", "internal"])
def test_tflite_runtime_runs_the_step_model(tmp_path, variant):
    from lmu_edge.targets import _tflite_session

    d = _convert(tmp_path, variant)
    g = irfile.load_ir(d / "model.lmu.npz")
    io = json.loads((d / "io.json").read_text())
    s = _tflite_session.Session(io, _tflite_session.SignatureBackend(tflite_runtime.Interpreter, d / "model.tflite"))
    x = np.random.default_rng(6).standard_normal((2, 100, 2))
    y = _tflite_session.run_sequences(s, x)
    assert relative_error(y, lmu_edge.simulate(g, x)) < 1e-5


def test_the_artifact_api_runs_it_through_the_worker(tmp_path, monkeypatch):
    d = _convert(tmp_path, "external")
    monkeypatch.setenv("LMU_EDGE_TFLITE_RUNTIME_PYTHON", sys.executable)
    art = lmu_edge.open_artifact(d)
    x = np.random.default_rng(7).standard_normal((1, 50, 2))
    assert relative_error(art.run(x, runtime="tflite-runtime"), art.reference(x)) < 1e-5
    s = art.stream("tflite-runtime")
    s.reset()
    y0 = s.step(x[0, 0])
    s.reset()
    np.testing.assert_array_equal(s.step(x[0, 0]), y0)
