"""The nengo target: emit, run in nengo's simulator, compare with lmu_edge.simulate."""

import json
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("nengo", reason="nengo not installed: pip install 'lmu-edge[nengo]'")

from conftest import EXAMPLES, ROOT, lmu_edge_cli
from graphs import chain, lmu

import lmu_edge
from lmu_edge import ir, lti
from lmu_edge.errors import ArtifactError, MissingDependencyError, UnsupportedLayerError
from lmu_edge.metrics import relative_error


def _pooled(rng):
    g = chain(rng)
    return g.replace(layers=g.layers[:2] + (ir.TimePooling("pool"),) + g.layers[2:])


def _fir(rng):
    H = lti.legendre_impulse_response(8, 12.0, 24)
    return chain(rng, q=8, theta=12.0, memory=ir.ImpulseResponse(H, "truncated"))


def _stacked(rng):
    a = lmu(rng, name="l1", n_in=2, hidden="dense", units=5)
    b = lmu(rng, name="l2", n_in=5, hidden="simple_rnn", units=4, rnn_path=True, input_to_hidden=True)
    return ir.Graph("stacked", 2, (a, b))


CONFIGS = {  # name -> (graph builder, realization)
    "memory_d3": (lambda r: chain(r, d=3, q=6, theta=10.0), "auto"),
    "hidden_dense_input_to_hidden": (lambda r: chain(r, input_to_hidden=True), "auto"),
    "no_hidden": (lambda r: chain(r, hidden=None, d=2), "auto"),
    "rnn_path_simple_rnn": (lambda r: chain(r, hidden="simple_rnn", rnn_path=True, d=2), "auto"),
    "rk4": (lambda r: chain(r, q=8, theta=12.0), "rk4"),
    "fir_truncated": (_fir, "fir"),
    "return_sequences_false": (lambda r: chain(r, return_sequences=False), "auto"),
    "time_pooling": (_pooled, "auto"),
    "stacked_lmus": (_stacked, "auto"),
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_exact_network_equals_the_float_reference(name, tmp_path):
    rng = np.random.default_rng(7)
    build, realization = CONFIGS[name]
    g = build(rng)
    art = lmu_edge.convert(g, "nengo", tmp_path / "out", realization=realization)
    folded = lmu_edge.fold(g, realization)
    if realization == "rk4":
        assert isinstance(art.graph.lmu_layers[0].memory, ir.RungeKutta)
    x = rng.standard_normal((3, 37, 2))
    y, ref = art.run(x), lmu_edge.simulate(folded, x)
    assert y.shape == ref.shape
    # float64 arithmetic in another order (nengo's transforms): rounding only (the README says 1e-15)
    assert relative_error(y, ref) <= 1e-13


def test_large_sparse_transforms_go_to_nengo_as_sparse_ones():
    """Spec (``nengo_network._transform``): a matrix of at least SPARSE_MIN entries with at most SPARSE_DENSITY
    of them nonzero becomes nengo's Sparse transform of exactly its nonzeros; any other stays the matrix."""
    import nengo

    from lmu_edge.targets import nengo_network as nn

    rng = np.random.default_rng(3)
    shift = np.eye(100, k=-1)  # an FIR memory's delay line
    for M, sparse in [
        (shift, True),
        (nn._blockdiag([shift] * 3), True),
        (np.eye(20), False),  # small
        (rng.standard_normal((100, 100)), False),  # dense
        (np.where(rng.random((100, 100)) < 0.2, 1.0, 0.0), False),  # 20% nonzero
    ]:
        t = nn._transform(M)
        assert isinstance(t, nengo.transforms.Sparse) == sparse
        if sparse:
            m = t.init  # nengo's SparseMatrix: indices (nonzeros x 2) and data
            dense = np.zeros(M.shape)
            dense[m.indices[:, 0], m.indices[:, 1]] = m.data
            assert np.array_equal(dense, M)
        else:
            assert np.array_equal(t, M)


def test_a_long_fir_memory_is_exact_through_sparse_transforms(tmp_path):
    """A 300-step FIR memory of 3 channels (a 900 x 900 shift: Sparse) gives the float reference's outputs
    within float64 rounding, as the dense transforms did (issue 52's seed 10: 186 s dense, 22 s sparse)."""
    rng = np.random.default_rng(11)
    H = lti.legendre_impulse_response(6, 120.0, 300)
    g = chain(rng, d=3, q=6, theta=120.0, memory=ir.ImpulseResponse(H, "truncated"))
    art = lmu_edge.convert(g, "nengo", tmp_path / "out", realization="fir")
    x = rng.standard_normal((2, 40, 2))
    assert relative_error(art.run(x), lmu_edge.simulate(lmu_edge.fold(g, "fir"), x)) <= 1e-13


@pytest.mark.parametrize("name", ["rnn_path_simple_rnn", "stacked_lmus", "time_pooling", "fir_truncated"])
def test_spiking_structure_with_ideal_neurons_is_exact(name, tmp_path):
    """Direct-mode ensembles in place of neurons: the Lowpass mapping, the k-step split of the
    memory and the alignment of every output with its sample, with no neuron error at all."""
    rng = np.random.default_rng(8)
    build, realization = CONFIGS[name]
    g = build(rng)
    art = lmu_edge.convert(
        g,
        "nengo",
        tmp_path / "out",
        realization=realization,
        spiking=True,
        neuron_type="direct",
        steps_per_sample=4,
        tau=0.01,
    )
    x = rng.standard_normal((2, 25, 2))
    assert relative_error(art.run(x), lmu_edge.simulate(lmu_edge.fold(g, realization), x)) <= 1e-9


def test_stream_equals_run(tmp_path, rng):
    g = chain(rng, hidden="simple_rnn", rnn_path=True)
    art = lmu_edge.convert(g, "nengo", tmp_path / "out")
    x = rng.standard_normal((2, 20, 2))
    s = art.stream()
    s.reset(batch=2)
    ys = np.stack([s.step(x[:, t]) for t in range(20)], axis=1)
    np.testing.assert_allclose(ys, art.run(x), rtol=0, atol=1e-12)


def test_spiking_stream_equals_spiking_run(tmp_path, rng):
    art = lmu_edge.convert(
        chain(rng, q=4, theta=6.0), "nengo", tmp_path / "out", spiking=True, neurons_per_dim=20, steps_per_sample=5
    )
    x = rng.standard_normal((1, 12, 2))
    s = art.stream()
    s.reset()
    ys = np.stack([s.step(x[0, t]) for t in range(12)])
    np.testing.assert_allclose(ys, art.run(x)[0], rtol=0, atol=1e-12)  # same seed, same spikes


def test_error_falls_as_neurons_per_dimension_grow(tmp_path):
    rng = np.random.default_rng(11)
    g = chain(rng, q=4, theta=8.0, hidden=None, n_in=1)
    x = rng.standard_normal((4, 40, 1))
    art = lmu_edge.convert(
        g,
        "nengo",
        tmp_path / "out",
        calibration=x,
        spiking=True,
        neurons_per_dim=10,
        neurons_sweep=[40, 160],
        steps_per_sample=10,
        tau=0.05,
        seed=3,
    )
    rows = json.loads((art.path / "report.json").read_text())["verification"]["spiking"]["by_neurons_per_dim"]
    assert [r["neurons_per_dim"] for r in rows] == [10, 40, 160]
    rmse = [r["rmse"] for r in rows]
    assert rmse[0] > 1.5 * rmse[1] > 1.5 * 1.5 * rmse[2], rmse
    assert rows[-1]["relative_error"] < 0.1


def test_report_and_manifest(tmp_path, rng):
    art = lmu_edge.convert(
        chain(rng, q=4, theta=6.0),
        "nengo",
        tmp_path / "out",
        spiking=True,
        neurons_per_dim=20,
        neuron_type="lif",
        steps_per_sample=3,
    )
    assert art.tolerance is None  # spiking: measured, not enforced
    rep = json.loads((art.path / "report.json").read_text())
    assert rep["nengo"]["mode"] == "spiking" and rep["nengo"]["neurons"] == 4 * 20
    v = rep["verification"]
    assert v["exact_network"]["relative_error"] < 1e-9
    assert v["spiking"]["by_neurons_per_dim"][0]["relative_error"] == pytest.approx(v["error_vs_source"])
    assert "numpy < 2" in v["loihi_emulator"]["skipped"]
    exact = lmu_edge.convert(chain(rng, q=4, theta=6.0), "nengo", tmp_path / "exact")
    assert exact.tolerance == pytest.approx(1e-4)
    assert json.loads((exact.path / "report.json").read_text())["verification"]["error_vs_source"] < 1e-6


def test_output_directory_loads_without_lmu_edge(tmp_path, rng):
    g = chain(rng, hidden="simple_rnn", return_sequences=False)
    art = lmu_edge.convert(g, "nengo", tmp_path / "out")
    assert {"network.py", "weights.npz"} <= {p.name for p in art.path.iterdir()}
    x = rng.standard_normal((2, 15, 2))
    np.save(tmp_path / "x.npy", x)
    code = (
        "import sys, numpy as np; sys.path.insert(0, sys.argv[1]); import network; "
        "y = network.build_network().run(np.load(sys.argv[2])); np.save(sys.argv[3], y); "
        "assert not [m for m in sys.modules if m.startswith('lmu_edge')], 'imported lmu_edge'"
    )
    subprocess.run(
        [sys.executable, "-c", code, str(art.path), str(tmp_path / "x.npy"), str(tmp_path / "y.npy")],
        check=True,
        cwd=tmp_path,
    )
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), art.run(x), rtol=0, atol=1e-12)


def test_cli_convert_and_run(tmp_path, rng):
    """`convert --target nengo --spiking ...` in this process (click's runner: the same parsing and errors,
    without a command's start), then `run --runtime nengo` as a command."""
    from click.testing import CliRunner

    from lmu_edge.cli import main

    model = lmu_edge.save(chain(rng, q=4, theta=6.0), tmp_path / "m.lmu.npz")
    x = rng.standard_normal((2, 10, 2))
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "out"
    r = CliRunner().invoke(
        main,
        [
            "convert",
            str(model),
            "--target",
            "nengo",
            "-o",
            str(out),
            "--spiking",
            "--neurons-per-dim",
            "30",
            "--steps-per-sample",
            "4",
            "--tau",
            "0.02",
            "-q",
        ],
    )
    assert r.exit_code == 0, r.stderr
    r = subprocess.run(  # a command of its own: its network is built apart from the one art.run uses below
        lmu_edge_cli()
        + ["run", str(out), "-i", str(tmp_path / "x.npy"), "-o", str(tmp_path / "y.npy"), "--runtime", "nengo"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    art = lmu_edge.open_artifact(out)
    assert art.manifest["options"]["neurons_per_dim"] == 30 and art.manifest["options"]["spiking"] is True
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), art.run(x), rtol=0, atol=1e-12)


@pytest.mark.skipif(int(np.__version__.split(".")[0]) < 2, reason="the numpy-2 message; tests/numpy1 runs Loihi")
def test_loihi_under_numpy2_says_how_to_get_an_environment(tmp_path, rng):
    art = lmu_edge.convert(chain(rng, q=4, theta=6.0), "nengo", tmp_path / "out")
    with pytest.raises(MissingDependencyError, match=r"numpy < 2.*pip install 'numpy<2' 'lmu-edge\[loihi\]'"):
        art.run(rng.standard_normal((1, 5, 2)), runtime="loihi-emulator")


def test_bad_options_and_unsplittable_memories(tmp_path, rng):
    g = chain(rng, q=4, theta=6.0)
    with pytest.raises(ArtifactError, match="unknown neuron_type 'izhikevich'"):
        lmu_edge.convert(g, "nengo", tmp_path / "a", neuron_type="izhikevich")
    with pytest.raises(ArtifactError, match="steps_per_sample must be a positive integer"):
        lmu_edge.convert(g, "nengo", tmp_path / "b", steps_per_sample=0)
    # Euler with theta small against the order: I + A has negative eigenvalues, no real k-th root
    bad = chain(rng, q=8, theta=3.0, disc="euler", rnn_path=True)
    with pytest.raises(UnsupportedLayerError, match="no real 2-th root.*steps_per_sample=1"):
        lmu_edge.convert(bad, "nengo", tmp_path / "c", spiking=True, steps_per_sample=2)
    assert not (tmp_path / "c").exists()
    lmu_edge.convert(bad, "nengo", tmp_path / "d")  # the exact network needs no root


@pytest.mark.slow
def test_digits_example_reaches_its_stated_accuracy():
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import nengo_digits
    finally:
        sys.path.pop(0)
    res = nengo_digits.main(["--neurons", "100"])
    assert res["float_accuracy"] >= 0.95
    # README and docs/neuromorphic.md: 0.958 (46 of 48) for spiking-relu, 100 neurons per dimension,
    # 10 steps per pixel; the network is seeded, so the count is exact
    assert round(res["rows"][0]["accuracy"] * 48) == 46, res["rows"][0]
    assert res["rows"][0]["argmax_agreement"] >= 0.97
    assert (EXAMPLES / "digits_lmu.lmu.npz").exists()


def test_the_exact_networks_kept_run_answers_only_its_own_input(tmp_path):
    # the exact network's last run is kept (the verification and check's exact-network figure share it): a
    # key that missed the values (a shape only), or a kept array handed out to be written, would answer
    # another input with it
    rng = np.random.default_rng(3)
    g = chain(rng)
    art = lmu_edge.convert(g, "nengo", tmp_path / "n", accuracy_report=False)
    x1, x2 = rng.standard_normal((2, 3, 30, 2))
    y1, y2 = art.run(x1), art.run(x2)
    assert relative_error(y2, lmu_edge.simulate(g, x2)) < 1e-6 and relative_error(y1, y2) > 0.1
    y2[...] = 0.0
    assert relative_error(art.run(x2), lmu_edge.simulate(g, x2)) < 1e-6
    x2[1, 5] += 1.0  # the same array, one value changed
    assert relative_error(art.run(x2), lmu_edge.simulate(g, x2)) < 1e-6
