"""Simulations split over threads (lmu_edge.parallel, issue 54): the sequences cut into blocks by the work
alone, the blocks run on as many threads as LMU_EDGE_THREADS allows, put back in order.

Specification: the integer reference's outputs of a split run are the unsplit run's integers, for drawn
models (every LMU path: stepped, feedback, SimpleRNN, heads) and any block and thread count; the float
reference's do not depend on the thread count; the number of blocks depends on the work, not on the machine.
"""

import json

import numpy as np
import pytest
from graphs import chain, heads
from hypothesis import given, settings
from hypothesis import strategies as st

import lmu_edge
from lmu_edge import intsim, parallel, reference
from lmu_edge.errors import LmuEdgeError


def _model(kind: int, seed: int):
    rng = np.random.default_rng(seed)
    if kind == 0:
        return chain(rng, q=6, theta=9.0)
    if kind == 1:
        return chain(rng, q=5, theta=7.0, hidden="simple_rnn", rnn_path=True, disc="euler")
    if kind == 2:
        return heads(rng)
    return chain(rng, q=4, theta=5.0, hidden=None, input_to_hidden=False, return_sequences=False)


@pytest.fixture
def always_split(monkeypatch):
    """Every run cut into as many blocks as asked: the work thresholds at zero."""
    monkeypatch.setattr(parallel, "MIN_RUN_OPS", 0.0)
    monkeypatch.setattr(parallel, "MIN_STEP_OPS", 0.0)


@settings(max_examples=12, deadline=None)
@given(kind=st.integers(0, 3), seed=st.integers(0, 2**16), n=st.integers(2, 9), blocks=st.integers(2, 5))
def test_split_integer_runs_give_the_unsplit_integers(kind, seed, n, blocks):
    # which bug: blocks concatenated out of order, a block started from another block's state (a runner
    # shared between threads), a short last block dropped
    g = _model(kind, seed)
    x = np.random.default_rng(seed + 1).uniform(-1, 1, (n, 11, 2))
    qg = lmu_edge.quantize(lmu_edge.fold(g), x)
    xq = intsim.quantize_input(qg, x)
    whole = parallel.by_rows(lambda b: _stream(qg, b), xq, 1)
    for threads in ("1", "3"):
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("LMU_EDGE_THREADS", threads)
            np.testing.assert_array_equal(parallel.by_rows(lambda b: _stream(qg, b), xq, blocks), whole)
    # and the state each sequence ends in is the one it ends in alone
    s = intsim.IntStream(qg)
    s.reset(1)
    s.run(xq[-1:])
    alone = [r.m.copy() for r in s.runners if hasattr(r, "m")]
    s2 = intsim.IntStream(qg)
    s2.reset(n)
    s2.run(xq)
    np.testing.assert_array_equal([r.m[-1:] for r in s2.runners if hasattr(r, "m")], alone)


def _stream(qg, xq):
    s = intsim.IntStream(qg)
    s.reset(xq.shape[0])
    return s.run(xq)


def test_run_int_splits_and_keeps_the_integers(always_split, monkeypatch):
    # the library's own entry: run_int cuts a run the thresholds let it cut, and gives the same integers
    g = _model(0, 7)
    x = np.random.default_rng(3).uniform(-1, 1, (7, 13, 2))
    qg = lmu_edge.quantize(lmu_edge.fold(g), x)
    xq = intsim.quantize_input(qg, x)
    calls = []
    real = parallel.map_rows
    monkeypatch.setattr(parallel, "map_rows", lambda run, xx, b: calls.append(b) or real(run, xx, b))
    monkeypatch.setenv("LMU_EDGE_THREADS", "2")
    split = intsim.run_int(qg, xq)
    assert calls and calls[0] == parallel.MAX_BLOCKS
    np.testing.assert_array_equal(split, _stream(qg, xq))


def test_the_float_reference_does_not_depend_on_the_thread_count(always_split, monkeypatch):
    g = lmu_edge.fold(_model(1, 11))
    x = np.random.default_rng(4).uniform(-1, 1, (9, 17, 2))
    outs = []
    for threads in ("1", "2", "4"):
        monkeypatch.setenv("LMU_EDGE_THREADS", threads)
        outs.append(reference.simulate(g, x))
    for y in outs[1:]:
        np.testing.assert_array_equal(y, outs[0])


@given(n=st.integers(0, 500), t=st.integers(1, 5000), ops=st.floats(0, 1e7), env=st.sampled_from(["1", "2", "16"]))
def test_the_blocks_depend_on_the_work_alone(n, t, ops, env):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LMU_EDGE_THREADS", env)
        b = parallel.blocks_for(n, t, ops)
    assert b == parallel.blocks_for(n, t, ops)  # the same without the variable
    assert 1 <= b <= max(1, min(parallel.MAX_BLOCKS, n))
    if b > 1:  # cut only where every block's share of a step and the whole run are large enough
        assert n / b * ops >= parallel.MIN_STEP_OPS and n * t * ops >= parallel.MIN_RUN_OPS


def test_a_block_that_fails_raises_its_error(always_split, monkeypatch):
    monkeypatch.setenv("LMU_EDGE_THREADS", "2")

    def run(block):
        if block[0, 0] >= 5:
            raise OverflowError("block past 5")
        return block

    with pytest.raises(OverflowError, match="block past 5"):
        parallel.by_rows(run, np.arange(10).reshape(10, 1), 3)


def test_the_thread_count_is_the_variable_or_the_cpus(monkeypatch):
    monkeypatch.setenv("LMU_EDGE_THREADS", "3")
    assert parallel.threads_available() == 3
    monkeypatch.delenv("LMU_EDGE_THREADS")
    assert 1 <= parallel.threads_available() <= parallel.MAX_THREADS


@pytest.mark.parametrize("bad", ["0", "-2", "two", "1.5"])
def test_a_bad_thread_count_is_refused_in_one_line(monkeypatch, bad):
    monkeypatch.setenv("LMU_EDGE_THREADS", bad)
    with pytest.raises(LmuEdgeError, match="LMU_EDGE_THREADS") as e:
        parallel.threads_available()
    assert "\n" not in str(e.value)


def test_the_quantized_model_does_not_depend_on_the_thread_count(always_split, monkeypatch):
    # the float reference the search compares with and the integer runs it scores are split; the choice and
    # every integer of the result must not change with the threads (a block count taken from the threads,
    # or a float result that did, would show here on some model)
    g = lmu_edge.fold(_model(0, 5))
    x = np.random.default_rng(6).uniform(-1, 1, (12, 20, 2))
    got = []
    for threads in ("1", "3"):
        monkeypatch.setenv("LMU_EDGE_THREADS", threads)
        qg = lmu_edge.quantize(g, x)
        got.append((qg.metadata["quantization"], [parallel.numbers_in(la) for la in qg.layers], _arrays(qg.layers)))
    assert got[0][0] == got[1][0] and got[0][1] == got[1][1]
    for a, b in zip(got[0][2], got[1][2], strict=True):
        np.testing.assert_array_equal(a, b)


def _arrays(v) -> list:
    import dataclasses

    if isinstance(v, np.ndarray):
        return [v]
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return [a for f in dataclasses.fields(v) for a in _arrays(getattr(v, f.name))]
    return [a for e in v for a in _arrays(e)] if isinstance(v, (tuple, list)) else []


def test_a_split_host_run_gives_the_one_run_s_outputs_and_the_report_reuses_it(tmp_path, monkeypatch):
    # the C host harness on blocks of sequences in processes side by side: the same integers and summed
    # steps as one process (a block out of order, or stats of one block only, would show); and the
    # conversion's report evaluates the very input the verification ran (every one of its 40 sequences)
    from lmu_edge.targets import c_harness

    g = _model(2, 3)
    x = np.random.default_rng(8).uniform(-1, 1, (40, 10, 2))
    art = lmu_edge.convert(g, "c", tmp_path / "c", quantize="int8", calibration=x)
    rep = json.loads((tmp_path / "c" / "report.json").read_text())
    assert rep["evaluation"]["sequences"] == rep["verification"]["input_shape"][0] == 40
    xq = intsim.quantize_input(art.quantized, x).astype(intsim.act_dtype(art.quantized))
    monkeypatch.setattr(c_harness, "HOST_SPLIT_STEPS", 10**9)
    one, one_stats = c_harness.run_native(art, xq, "host")
    monkeypatch.setattr(c_harness, "HOST_SPLIT_STEPS", 1)
    for threads in ("2", "3"):
        monkeypatch.setenv("LMU_EDGE_THREADS", threads)
        split, stats = c_harness.run_native(art, xq, "host")
        np.testing.assert_array_equal(split, one)
        assert stats["steps"] == one_stats["steps"] == 400 and stats["state_bytes"] == one_stats["state_bytes"]
