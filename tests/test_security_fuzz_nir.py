"""A received NIR artifact (``model.nir``, HDF5) damaged and resealed: refused in one line or run, by every NIR
reader lmu-edge has (Rockpool in process, the Sinabs worker in its own Python). The long run's ``artifact:nir``
category (scripts/fuzz_nir.py) draws the same damage; its findings are tested here."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

if os.environ.get("CI") != "true":
    pytest.importorskip("nir", reason="nir not installed: pip install 'lmu-edge[nir]'")
    pytest.importorskip("rockpool", reason="rockpool not installed: pip install 'lmu-edge[nir]'")

import h5py

import lmu_edge
from lmu_edge import outdir
from lmu_edge.errors import LmuEdgeError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import fuzz_artifacts  # noqa: E402  (scripts/ joins sys.path first)
import fuzz_nir  # noqa: E402  (scripts/ joins sys.path first)


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    """The exact-variant seed artifact (the spiking digits one takes minutes to convert: the long run has it)."""
    d = tmp_path_factory.mktemp("nir_seeds")
    fuzz_artifacts.build_seeds(d, names=())
    fuzz_nir.build_nir_seeds(d, names=("nir.exact",))
    return d


def _received(seeds, tmp_path, edit):
    """A copy of the seed artifact with ``edit(h5, tmp_path)`` made to its model.nir, then resealed."""
    d = tmp_path / "art"
    import shutil

    shutil.copytree(seeds / "nir.exact", d)
    with h5py.File(d / "model.nir", "r+") as h5:
        edit(h5, tmp_path)
    (d / outdir.RECORD).unlink()
    outdir.seal(d)
    return d


def _outside_link(h5, tmp_path):
    with h5py.File(tmp_path / "outside.h5", "w") as o:
        o["x"] = np.ones((8, 8))
    path = "node/nodes/0.rec/weight" if "node/nodes/0.rec/weight" in h5 else sorted(_datasets(h5))[0]
    del h5[path]
    h5[path] = h5py.ExternalLink(str(tmp_path / "outside.h5"), "/x")


def _datasets(h5):
    out = []
    h5.visititems(lambda n, o: out.append(n) if isinstance(o, h5py.Dataset) else None)
    return out


def test_sinabs_worker_checks_the_nir_file_links_before_its_python_reads_it(seeds, tmp_path, monkeypatch):
    """Fuzz finding (artifact:nir): the Sinabs runtime handed the sealed model.nir to its own Python's
    nir.read without the HDF5 link check the Rockpool path makes, so an external link to another HDF5 file
    (or to a FIFO, which hung the worker) was followed. Any Python stands for Sinabs' here: the refusal
    comes before the worker starts."""
    monkeypatch.setenv("LMU_EDGE_SINABS_PYTHON", sys.executable)
    d = _received(seeds, tmp_path, _outside_link)
    x = np.load(seeds / "nir.exact.x.npy")
    for runtime in ("sinabs", "rockpool"):
        with pytest.raises(LmuEdgeError, match="is an external link") as e:
            lmu_edge.open_artifact(d).run(x, runtime)
        assert "\n" not in str(e.value)


def test_a_node_whose_parameters_disagree_in_shape_is_refused_in_one_line(seeds, tmp_path):
    """Fuzz finding (artifact:nir, input 39 of the first run): nir checks a node's parameter shapes with
    ``assert``, and the AssertionError escaped ``run`` as an internal error (exit 70)."""

    def short_tau(h5, _):
        del h5["node/nodes/0.mem/tau"]
        h5["node/nodes/0.mem/tau"] = np.ones(1)

    d = _received(seeds, tmp_path, short_tau)
    with pytest.raises(LmuEdgeError, match="not a graph nir accepts") as e:
        lmu_edge.open_artifact(d).run(np.load(seeds / "nir.exact.x.npy"))
    assert "\n" not in str(e.value)


def test_a_graph_whose_input_node_feeds_itself_is_refused_in_one_line(seeds, tmp_path):
    """Fuzz finding (artifact:nir, input 8737 of the clean run, seed 4): an edge from the input node to
    itself left nirtorch no node without an incoming edge, and its ``assert`` ("No input nodes found")
    escaped ``run`` as an internal error (exit 70)."""

    def self_edge(h5, _):
        e = h5["node/edges"][()]
        del h5["node/edges"]
        h5["node/edges"] = np.concatenate([e, np.array([[b"input", b"input"]], dtype=e.dtype)])

    d = _received(seeds, tmp_path, self_edge)
    with pytest.raises(LmuEdgeError, match="Rockpool cannot build this graph") as e:
        lmu_edge.open_artifact(d).run(np.load(seeds / "nir.exact.x.npy"))
    assert "\n" not in str(e.value) and "No input nodes" in str(e.value)


def test_a_sinabs_worker_that_fails_loudly_is_refused_not_waited_for(seeds, tmp_path):
    """Fuzz finding (artifact:nir, input 8516 of the clean run, seed 5): a graph nested 400 deep made the
    Sinabs worker's Python write a traceback larger than a pipe holds to its stderr pipe, while lmu-edge
    waited on its stdout: both blocked until the fuzzer killed them at 120 s. Its stderr is a file now."""
    if not os.environ.get("LMU_EDGE_SINABS_PYTHON"):
        pytest.fail("LMU_EDGE_SINABS_PYTHON is not set: make the Sinabs environment with scripts/sinabs_venv.sh")

    def nest(h5, _):
        g = h5["node/nodes"].create_group("nested")
        for _ in range(400):
            g["type"] = "NIRGraph"
            g.create_dataset("edges", shape=(0, 2), dtype=h5py.string_dtype())
            g = g.create_group("nodes").create_group("n")
        g["type"] = "Input"
        g["shape"] = np.array([1])

    d = _received(seeds, tmp_path, nest)
    x = np.load(seeds / "nir.exact.x.npy")

    def hung(*_):
        raise TimeoutError("the Sinabs worker and lmu-edge still wait on each other after 90 s")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(90)  # the old code blocked for ever; the refusal takes a few seconds (torch's import)
    try:
        with pytest.raises(LmuEdgeError) as e:
            lmu_edge.open_artifact(d).run(x, "sinabs")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert "\n" not in str(e.value) and "the sinabs worker failed" in str(e.value)


@settings(max_examples=12, deadline=None)
@given(rng=st.randoms(use_true_random=False))
def test_damaged_nir_artifacts_run_or_are_refused_in_one_line(seeds, tmp_path_factory, rng):
    """The long run's artifact:nir damage (truncation, bytes, links, virtual datasets, huge or array-typed
    declarations, node types, edges, nesting, metadata) on the exact seed: success or one line, nothing
    written into the artifact (fuzz_artifacts.check_artifact raises otherwise). In Rockpool only (the
    Sinabs worker costs seconds per start; the long run draws it, and the test above its link check)."""
    os.environ.pop("LMU_EDGE_SINABS_PYTHON", None)
    work = tmp_path_factory.mktemp("nir_case")
    spec = fuzz_nir.make_nir_case(rng, work, seeds)
    assert fuzz_artifacts.check_artifact(spec, rng, work, seeds) in ("accepted", "refused")
