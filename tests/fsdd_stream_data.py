"""What the FSDD stream tests share (tests/test_examples_kws_fsdd_stream.py, tests/test_examples_kws_verify.py):
the shipped held-out speaker's clips, the negative recordings' length, and the tool check."""

import os
import shutil
from pathlib import Path

import pytest

KWS_DIR = Path(__file__).resolve().parents[1] / "examples" / "kws"
SUBSET = KWS_DIR / "fsdd_george"
MINUTES = 1.0


def need(*tools):
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        debian = "gcc gcc-arm-none-eabi qemu-system-arm flite espeak-ng festival festvox-kdlpc16k"
        msg = f"{', '.join(missing)} not installed (Debian: {debian})"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
