"""Generated models through every target and mode in CI (issue 52), second half: a torch model among them.

CI seeds of ``tests/test_generated_models.py`` (the first seeds that together cover every option value,
chosen by ``python scripts/gen_models.py --ci-seeds 40`` without converting anything) go through every cell
of ``scripts/gen_models.py``: c float / int8 / int16x8 / int16, tflite float / int8 / int16x8, onnx float /
int8, nengo, nir and ir, each at its floor of docs/matrix.md on the 32 held-out sequences, each C cell
compiled without a warning under its seed's quarter of the (compiler or core, level) pairs
(``tests/gen_cells.py``; the models are shipped in ``tests/data/gen_models``).
"""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gen_cells  # noqa: E402  (tests/ joins sys.path first)

SEEDS = (6, 7, 8, 13, 14, 19)


def test_the_seeds_are_ci_seeds_and_their_models_are_shipped():
    gen_cells.check_shipped(SEEDS)


@pytest.mark.slow  # 29-41 s of CPU a model (2026-12-07): every target and mode, C compiles included
@pytest.mark.parametrize("seed", SEEDS)
def test_a_generated_model_converts_in_every_cell_at_its_floor(seed):
    gen_cells.check_cells(seed)
