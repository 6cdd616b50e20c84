"""The nengo target's spiking network on nengo-loihi's emulator (numpy < 2 only: scripts/numpy1_tests.sh)."""

import json

import numpy as np
import pytest

pytest.importorskip("nengo_loihi", reason="nengo-loihi not installed: bash scripts/numpy1_tests.sh")

from graphs import chain

import lmu_edge
from lmu_edge.targets import nengo as target


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    rng = np.random.default_rng(11)
    g = chain(rng, q=4, theta=8.0, hidden=None, n_in=1)
    x = rng.standard_normal((3, 30, 1))
    out = tmp_path_factory.mktemp("loihi") / "out"
    art = lmu_edge.convert(
        g, "nengo", out, calibration=x, spiking=True, neurons_per_dim=50, steps_per_sample=10, tau=0.02, seed=3
    )
    return art, x


def test_loihi_emulator_runs_the_spiking_network(artifact):
    art, x = artifact
    ref = art.reference(x)
    y = art.run(x, runtime="loihi-emulator")
    assert y.shape == ref.shape and np.all(np.isfinite(y)) and np.std(y) > 0
    np.testing.assert_array_equal(art.run(x[:1], runtime="loihi-emulator"), y[:1])  # deterministic


def test_loihi_emulator_error_against_the_float_reference(artifact):
    art, x = artifact
    ref = art.reference(x)
    rms = float(np.sqrt(np.mean(ref**2)))
    m = target.metrics(art.run(x, runtime="loihi-emulator"), ref)
    # measured: RMSE 0.032 = 0.19x the output's RMS (nengo's simulator, same neurons: 0.023 = 0.13x)
    assert m["rmse"] < 0.3 * rms, m
    assert m["argmax_agreement"] >= 0.75, m


def test_report_has_loihi_error_and_chip_resources(artifact):
    art, _ = artifact
    rep = json.loads((art.path / "report.json").read_text())["verification"]["loihi_emulator"]
    assert rep["cores"] >= 1 and rep["compartments"] >= 4 * 50 and rep["synapses"] > 0
    assert 0 < rep["max_core_utilization"]["compartments"] <= 1
    assert rep["rmse"] > 0 and "relative_error" in rep
