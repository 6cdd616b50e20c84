"""The generated C compiles without a warning (issue 52): every compiler and core, at every level.

Models drawn by tests/model_gen.py are converted to C in the four modes, and each mode's ``model.c`` (the
kernels are header-only: the artifact's Makefile compiles this one file, ``lmu_runtime.h`` and its family
headers included) is compiled with ``-c`` under host gcc, host clang and arm-none-eabi-gcc for every core,
at -O0, -O2, -Os and -O3, with lmu-edge's own warning flags (``toolchain.WARN``: -std=c99 -Wall -Wextra
-pedantic -Werror). The (compiler or core, level) pairs are spread over the models so that each pair is
built once per mode: a covering design the test asserts. scripts/gen_models.py builds a quarter of the
pairs on every C cell of a long run, the quarter chosen by the seed (``model_gen.c_pairs``: any four
consecutive seeds build every pair; a warning there is a failed cell of kind "warning").

What makes a warning here is the code's structure (which kernels, which widths, which loop bounds), not
trained weights, so the keras models are built untrained (0.5 s each; the generator's one-epoch training
took 6-10 s a model).
"""

import importlib.util
import shutil
import sys
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import lmu_edge
from lmu_edge import folding
from lmu_edge.precision import state_bits
from lmu_edge.targets import c as c_target

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import graphs  # noqa: E402  (tests/ joins sys.path first)

MODES = ("float", "int8", "int16x8", "int16")
#: CI seeds of tests/test_generated_models.py (``gen_models.py --ci-seeds 40``) whose models convert in every
#: integer mode (8, 14 and 23 hold an unstable Euler memory, which integer modes refuse) in about a second
#: each (1, 3, 4, 6, 7, 13 and 18 search 2-40 s for the parts to widen; 17 has an order-631 memory). Between them:
#: LMUFeedforward (raw and fft), LMU and RNN(LMUCell), stacks of one to three, zoh and euler, orders 1 to 224,
#: Dense and SimpleRNN hidden cells, every feedback flag, pooling, softmax / relu / sigmoid heads
SEEDS = (0, 2, 5, 10)


def model_gen():
    spec = importlib.util.spec_from_file_location("model_gen", ROOT / "tests" / "model_gen.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["model_gen"] = mod
    spec.loader.exec_module(mod)
    return mod


def emit(graph, mode: str, x_cal, out: Path) -> Path:
    """The C kit ``convert(graph, "c", quantize=mode)`` writes (its fold, then the C target's emit), without
    the host build and run that verify it; returns the kit folder."""
    opts = dict(c_target.OPTIONS, flash=False, measure=False)
    budget, _ = folding.default_budget(state_bits(mode, opts, c_target))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unproven state bounds and the like: not what this test checks
        folded = folding.fold(graph, "auto", budget, target="c", quantized=mode != "float", prefer="ops")
        out.mkdir(parents=True)
        c_target.emit(folded, out, dict(opts, quantize=mode, calibration=None if mode == "float" else x_cal))
    return out / opts["prefix"]


def covering(n_models: int, n_pairs: int, shift: int) -> list:
    """Pair ``j`` goes to model ``(j + shift) % n_models``: every pair once, the models' loads within one."""
    return [(j, (j + shift) % n_models) for j in range(n_pairs)]


@pytest.mark.slow  # 112 compiles: 77-87 s of CPU (2026-12-06), most of it arm-none-eabi-gcc at -O2, -Os, -O3
def test_the_generated_c_compiles_without_a_warning_under_every_compiler_core_and_level(tmp_path):
    import keras

    mg = model_gen()
    models = []
    for seed in SEEDS:
        spec = mg.draw(seed)
        keras.backend.clear_session()
        keras.utils.set_random_seed(seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mg.build(spec).save(tmp_path / f"{seed}.keras")
        x_cal = mg.signals(16, spec["T"], spec["features"], seed * 3 + 1)
        models.append((seed, lmu_edge.load(tmp_path / f"{seed}.keras"), x_cal))

    # the shortcut writes the C convert writes (here on one model and mode: 1 s)
    seed, g, x = models[-1]
    opts = {"flash": False, "measure": False, "accuracy_report": False}
    art = lmu_edge.convert(g, "c", tmp_path / "art", quantize="int8", calibration=x, **opts)
    kit = emit(g, "int8", x, tmp_path / "kit")
    assert (kit / "model.c").read_bytes() == (art.path / "model" / "model.c").read_bytes()

    jobs, built = [], {m: set() for m in MODES}
    for i, mode in enumerate(MODES):
        kits = [emit(g, mode, x, tmp_path / f"{seed}-{mode}") for seed, g, x in models]
        ccs = mg.c_compilers(mode)
        pairs = [(cc, lv) for cc in ccs for lv in mg.C_LEVELS]
        for j, k in covering(len(kits), len(pairs), i):
            cc, lv = pairs[j]
            jobs.append((SEEDS[k], mode, kits[k], ccs[cc], lv))
            built[mode].add((cc, lv))
    # the covering design: every (compiler or core, level) pair built in every mode
    want = {
        (cc, lv)
        for cc in ("gcc", "clang", "cortex-m0", "cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55")
        for lv in mg.C_LEVELS
    }
    assert all(built[m] == want for m in MODES), {m: want - built[m] for m in MODES}

    def compile_one(job):
        seed, mode, kit, command, level = job
        said = mg.compile_c(kit, command, level)
        return said and f"seed {seed}, {mode}, in its kit folder: {said}"

    with ThreadPoolExecutor(2) as pool:  # two compilers at a time: CI's worker and the machine's two cores
        failures = [f for f in pool.map(compile_one, jobs) if f]
    assert not failures, "\n".join(failures)


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
