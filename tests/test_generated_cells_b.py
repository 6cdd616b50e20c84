"""Generated models through every target and mode in CI (issue 52): the second half of the seeds, in a module
of its own so that the two halves run on the two pytest workers (``--dist loadfile``). What each checks:
tests/test_generated_cells.py and tests/gen_cells.py.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gen_cells  # noqa: E402  (tests/ joins sys.path first)

SEEDS = gen_cells.CI_SEEDS[Path(__file__).name]

test_the_seeds_are_ci_seeds_and_their_models_are_shipped, test_a_generated_model_converts_in_every_cell_at_its_floor = (
    gen_cells.tests(SEEDS)
)
