"""The generated C compiles without a warning (issue 52): every compiler and core, at every level.

CI's generated cells (``tests/test_generated_cells*.py``) compile each C cell's ``model.c`` (the kernels are
header-only: the artifact's Makefile compiles this one file, ``lmu_runtime.h`` and its family headers
included) with ``-c`` under host gcc, host clang or arm-none-eabi-gcc for one core, at -O0, -O2, -Os or
-O3, with lmu-edge's own warning flags (``toolchain.WARN``: -std=c99 -Wall -Wextra -pedantic -Werror): one or
two of the 28 (compiler or core, level) pairs a cell, so that the 30 CI models together build every pair
of every C mode (``gen_cells.pairs_of``, whose covering their first test asserts). Until 2026-12-07 a test
here built the covering on four untrained models (112 compiles, a minute of CI). scripts/gen_models.py
builds a quarter of the pairs on every C cell of a long run, the quarter chosen by the seed
(``model_gen.c_pairs``: any four consecutive seeds build every pair; a warning there is a failed cell of kind
"warning"). This module checks the two things around that: a user's conversion reports a warning and goes
on, and the long run's quarters cover.
"""

import importlib.util
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

import lmu_edge

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import graphs  # noqa: E402  (tests/ joins sys.path first)

MODES = ("float", "int8", "int16x8", "int16")


def model_gen():
    spec = importlib.util.spec_from_file_location("model_gen", ROOT / "tests" / "model_gen.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["model_gen"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_a_conversion_build_reports_a_compiler_warning_and_goes_on(tmp_path):
    # a conversion builds its artifact with the Makefile's flags less -Werror: a warning the test above would
    # fail on is, in a user's conversion, a one-line warning naming it, and the build is used
    from lmu_edge.targets import c_build

    g = graphs.chain(np.random.default_rng(52), q=4, theta=8.0)
    art = lmu_edge.convert(g, "c", tmp_path / "art", flash=False, measure=False, accuracy_report=False)
    shutil.copytree(art.path, tmp_path / "warns")
    src = tmp_path / "warns" / "model" / "model.c"
    src.write_text(src.read_text() + "static int lmu_never_called(void) { return 0; }\n")
    with pytest.warns(UserWarning, match=r"harness_host .*warned \(1 x\): .*-Wunused-function.*the build went on"):
        exe = c_build.make(tmp_path / "warns", "harness_host")
    assert exe.is_file()
    # and the check the test above (and gen_models.py) makes catches that warning, at the level that gives it
    mg = model_gen()
    said = mg.compile_c(src.parent, mg.c_compilers("float")["cortex-m4"], "-O0")
    assert said is not None and "unused-function" in said and "-mcpu=cortex-m4 " in said and " -O0 " in said
    assert mg.compile_c(tmp_path / "art" / "model", mg.c_compilers("float")["cortex-m4"], "-O0") is None


def test_four_consecutive_seeds_of_a_long_run_build_every_pair_once_in_every_mode():
    # the long run's share of the compiles (scripts/gen_models.py: seed s builds c_pairs(mode, (s % 4, 4))):
    # any four consecutive seeds build each (compiler or core, level) pair exactly once per C mode
    mg = model_gen()
    for mode in MODES:
        every = mg.c_pairs(mode)
        assert len(every) == len(set(every)) == 7 * len(mg.C_LEVELS)
        for start in range(4):
            shares = [mg.c_pairs(mode, (seed % 4, 4)) for seed in range(start, start + 4)]
            assert sorted(p for share in shares for p in share) == sorted(every), (mode, start)
