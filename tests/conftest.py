import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

# The suite loads TensorFlow and PyTorch into one process. PyPI's Linux torch wheel depends on triton (GPU
# kernel compiler), and importing triton after TensorFlow crashes the process (SIGSEGV in its LLVM; seen
# with TF 2.21 and triton from torch 2.14's dependencies). torch imports triton only to ask whether it can
# compile GPU kernels (first optimizer step), which CPU tests never do: make that import fail instead.
sys.modules.setdefault("triton", None)

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "models"


def matrix_model(name: str) -> tuple:
    """A model of the layer-option matrix (examples/matrix): ``(source graph, x_cal, x_test as float64,
    the float64 source's outputs on x_test)``."""
    import lmu_edge

    here = ROOT / "examples" / "matrix"
    data = np.load(here / f"{name}.npz")
    path = here / f"{name}.keras"
    src = lmu_edge.load(path if path.exists() else here / f"{name}.safetensors")
    x_test = data["x_test"].astype(np.float64)
    return src, data["x_cal"], x_test, lmu_edge.simulate(src, x_test)


def lmu_edge_cli() -> list:
    """The installed console script, or the module when the script is not on PATH."""
    exe = shutil.which("lmu-edge", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    return [exe] if exe else [sys.executable, "-m", "lmu_edge.cli"]


# hypothesis: derandomized under CI (CI=true), so a green run is reproducible; every module's property tests
# get it here, not only those of a module that registers the profile itself (tests/test_fuzz.py does too)
def _hypothesis_profiles() -> None:
    # the numpy<2 environment (tests/numpy1, scripts/numpy1_tests.sh) has no hypothesis: none of its tests
    # uses it, so the profiles are registered where it is installed (the main environment, where the test
    # extra requires it and a property test fails without it)
    try:
        from hypothesis import HealthCheck, settings
    except ImportError:
        return
    settings.register_profile(
        "ci",
        derandomize=True,
        deadline=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    settings.register_profile(
        "dev", deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
    )
    ci = os.environ.get("CI", "").lower() in ("1", "true", "yes")
    settings.load_profile("ci" if ci else os.environ.get("HYPOTHESIS_PROFILE", "dev"))


_hypothesis_profiles()


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


# tests/numpy1/ runs only in the second environment (numpy < 2: nengo-loihi, legacy tflite-runtime),
# which scripts/test.sh creates and runs; the main environment (numpy 2) skips collecting it.
collect_ignore = ["numpy1"] if int(np.__version__.split(".")[0]) >= 2 else []


# Under CI (CI=true) a test that would skip because a tool or package is missing FAILS instead, so a
# green CI always means the claim was checked. Skips for other reasons (e.g. the numpy-1 environment's
# own tests) still skip.
CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
_MISSING = ("not installed", "not set", "missing")


def _missing_tool(report) -> bool:
    if not report.skipped or hasattr(report, "wasxfail"):  # an expected failure is no missing tool
        return False
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return any(m in reason for m in _MISSING)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if CI and _missing_tool(report):
        report.outcome = "failed"
        report.longrepr = f"CI=true and a required tool is missing: {report.longrepr}"


def pytest_collectreport(report):
    if CI and _missing_tool(report):
        report.outcome = "failed"
        report.longrepr = f"CI=true and a required package is missing: {report.longrepr}"


# scripts/test.sh runs the main suite on two workers, a file at a time (--dist loadfile) in collection order
# (--no-loadscope-reorder): these files take minutes each (module fixtures that convert and build, QEMU and
# simulator runs; --durations of full runs), so they start first and the last files on either worker are
# short ones. xdist's default order, most tests first, put test_torch_examples (3 tests, about 2 minutes)
# and test_readme (2 tests) among the last. The rest keep that default order.
HEAVY_FIRST = (
    # the 30 generated models, about 5 minutes a worker (2026-12-07): first, one per worker, so that
    # neither is left with one of them at the end
    "test_generated_cells.py",
    "test_generated_cells_b.py",
    "test_int_matrix.py",
    "test_examples_kws_verify.py",
    "test_targets_c.py",
    "test_targets_nir.py",
    "test_converters_keras_lmu.py",
    "test_torch_examples.py",
    "test_examples_kws_fsdd_stream.py",
    "test_examples_kws_fsdd_torch.py",
    "test_kernels_arm.py",
    "test_readme.py",
    # few tests, each long (Ray, CMake and QEMU, conversions with widening searches; CI's --durations,
    # 2026-12-06): sorted by their count they would come late, where one worker could be left with them alone
    "test_sweep.py",
    "test_examples_kws.py",
    "test_c_kit.py",
    "test_prefer.py",
    "test_tflite_cmsis.py",
    "test_tflite_regressions.py",
    "test_pade_targets.py",
    "test_cli.py",
)


# scripts/test.sh --fast (the edit loop, about 5 minutes on 2 cores): the files of HEAVY_FIRST are left to the
# full run, except the integer matrix (its host runtime: the bit-exactness of C against the integer reference)
FAST_KEEPS = ("test_int_matrix.py",)


def pytest_collection_modifyitems(config, items):
    if os.environ.get("LMU_EDGE_FAST_TESTS") == "1":
        left = [it for it in items if it.path.name in HEAVY_FIRST and it.path.name not in FAST_KEEPS]
        if left:
            config.hook.pytest_deselected(items=left)
            items[:] = [it for it in items if not (it.path.name in HEAVY_FIRST and it.path.name not in FAST_KEEPS)]
    count: dict = {}
    for item in items:
        count[item.path] = count.get(item.path, 0) + 1
    rank = {name: i for i, name in enumerate(HEAVY_FIRST)}
    # stable: a file's tests stay together and in their order (its module fixtures are built once)
    items.sort(key=lambda it: (rank.get(it.path.name, len(rank)), -count[it.path], str(it.path)))
