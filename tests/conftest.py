import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "models"


def lmu_edge_cli() -> list:
    """The installed console script, or the module when the script is not on PATH."""
    exe = shutil.which("lmu-edge", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    return [exe] if exe else [sys.executable, "-m", "lmu_edge.cli"]


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


# tests/numpy1/ runs only in the second environment (numpy < 2: nengo-loihi, legacy tflite-runtime),
# which scripts/test.sh creates and runs; the main environment (numpy 2) skips collecting it.
collect_ignore = ["numpy1"] if int(np.__version__.split(".")[0]) >= 2 else []
