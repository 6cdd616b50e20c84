"""Generated models through every target and mode in CI (issue 52).

CI runs 30 seeds (``python scripts/gen_models.py --ci-run-seeds 30``, which runs no conversion: the first
seeds outside ``CI_SKIP`` that together cover every option value but an order above 256, then the lowest of
the rest), split between this module and ``test_generated_cells_b.py`` (one per pytest worker). Each goes
through every cell of ``scripts/gen_models.py``: c float / int8 / int16x8 / int16, tflite float / int8 /
int16x8, onnx float / int8, nengo, nir and ir, each at its floor of docs/matrix.md on the 32 held-out
sequences; each C cell compiled without a warning under its one or two (compiler or core, level) pairs,
which together build all 28 in every C mode (``gen_cells.pairs_of``); every other seed counting the
Cortex-M instructions of one C mode under QEMU as the default conversion does, the modes in turn
(``tests/gen_cells.py``; the models are shipped in ``tests/data/gen_models``).

Left to the long run (``--seeds 0-499`` runs every seed), ``gen_models.CI_SKIP``: the seeds over a minute of
CPU in CI, every early draw of an order above 256 among them (17: 334 s, 24: 288 s, 41: over 12 minutes,
97 and 118 over 3 minutes), seed 7 (its held-out re-search: 144-156 s) and 32 (136 s); and seed 18, an open
failure (C int16x8 44.4 dB held out, under its 45: a linear SimpleRNN loop of spectral radius 1.007;
docs/quantization.md). With a QEMU count on every seed the 30
took 690 s of CPU, 5.8 minutes on two pytest workers (2026-12-07).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gen_cells  # noqa: E402  (tests/ joins sys.path first)

SEEDS = gen_cells.CI_SEEDS[Path(__file__).name]

test_the_seeds_are_ci_seeds_and_their_models_are_shipped, test_a_generated_model_converts_in_every_cell_at_its_floor = (
    gen_cells.tests(SEEDS)
)
