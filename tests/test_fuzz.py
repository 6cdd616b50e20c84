"""The fuzzer in CI: hypothesis drives the mutations of tests/fuzzing.py (derandomized under CI, so a
green run is reproducible). The long run (>= 10,000 inputs, each in its own process with time and
memory measured) is `python tests/fuzzing.py --inputs 10000`; its summary is in docs/security.md."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))
import fuzzing  # noqa: E402  (tests/ joins sys.path first)

# the hypothesis profiles (derandomized under CI=true) are registered in conftest.py, for every module


@settings(max_examples=120)
@given(rng=st.randoms(use_true_random=False))
def test_mutated_model_files_load_or_refuse_in_one_line(tmp_path_factory, rng):
    work = tmp_path_factory.mktemp("fuzz")
    (work / "cases").mkdir()
    path = fuzzing.make_case(rng, work / "cases")
    assert fuzzing.check_file(path, rng, work) in ("ok", "refused")


@settings(max_examples=60)
@given(rng=st.randoms(use_true_random=False))
def test_cli_arguments_succeed_or_fail_in_one_line(tmp_path_factory, rng):
    work = tmp_path_factory.mktemp("cli")
    assert fuzzing.check_cli(fuzzing.cli_args(rng, work), work) in ("ok", "refused")


@pytest.mark.parametrize("suffix", sorted({s for s, _ in fuzzing.SEEDS}))
def test_every_reader_has_a_seed_file(suffix):
    import lmu_edge
    from lmu_edge.registry import CONVERTERS

    paths = [p for s, p in fuzzing.SEEDS if s == suffix]
    assert all(p.exists() for p in paths)
    assert all(lmu_edge.load(p) for p in paths)
    assert {Path("m" + s).suffix for s, _ in fuzzing.SEEDS} >= set(CONVERTERS), "a reader the fuzzer never feeds"
