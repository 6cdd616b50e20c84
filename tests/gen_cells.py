"""Run a generated model's seed through every cell of scripts/gen_models.py (issue 52), for the CI tests
``tests/test_generated_cells*.py``; a helper, not a test module.

The models are the generator's own, made once (``python scripts/gen_models.py --seed N --models
tests/data/gen_models --make-only``) and shipped: Keras training is not reproducible from a seed on every
machine (docs/sweep.md), and a cell near its floor would then pass or fail with the machine.
"""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "tests" / "data" / "gen_models"
C_MODES = ("float", "int8", "int16x8", "int16")


def gen_models():
    """scripts/gen_models.py, loaded by path."""
    spec = importlib.util.spec_from_file_location("gen_models", ROOT / "scripts" / "gen_models.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gen_models"] = mod
    spec.loader.exec_module(mod)
    return mod


def check_shipped(seeds) -> None:
    """Each seed is among the CI seeds, in their order, and its shipped model is its draw's."""
    gm = gen_models()
    ci = gm.ci_seeds(40)
    assert list(seeds) == [s for s in ci if s in seeds], (seeds, ci)
    mg = gm.model_gen()
    for seed in seeds:
        folder = MODELS / f"seed{seed}"
        shipped = json.loads((folder / "spec.json").read_text())
        remake = f"python scripts/gen_models.py --seed {seed} --models tests/data/gen_models --make-only"
        assert shipped == mg.draw(seed), f"seed {seed}'s draw changed: {remake}"
        made = (folder / mg.model_file(shipped)).is_file() and (folder / "data.npz").is_file()
        assert made or (folder / "discarded.txt").is_file(), remake


def check_cells(seed: int) -> None:
    """Seed ``seed`` through every cell: none failed (an internal error, a build failure or warning, a NaN,
    an output below its floor, a refusal by c, tflite or onnx; a warning where its C compiles under the seed's
    pair); a refusal only by nengo or nir, or by an
    integer mode of a source whose memory diverges, in one line. A discarded draw (its training diverged)
    is the generator's outcome, not a converter's: it is counted in the long run and passes here."""
    gm = gen_models()
    spec = gm.model_gen().draw(seed)
    assert json.loads((MODELS / f"seed{seed}" / "spec.json").read_text()) == spec  # else: check_shipped
    # one C mode a seed counts its Cortex-M instructions under QEMU, in turn (the other three convert with
    # measure=False): the counts took 4-6 s of a C cell's 5-12 (seed 4, 2026-12-07); every C mode is still
    # built and verified on the host. Each C cell compiles one (compiler or core, level) pair, the seed's (the
    # seed mod 28), not a long-run cell's quarter (28 compiles a model: 12 s of seed 6's 75, 2026-12-07); every
    # pair of every mode is built by tests/test_generated_c_warnings.py's covering design
    measured = {C_MODES[seed % len(C_MODES)]}
    pairs = len(gm.model_gen().c_pairs("int8"))
    rec = gm.run_spec(spec, list(gm.CELLS), models=MODELS, measured=measured, shares=pairs)
    if "discarded" in rec:
        assert rec["discarded"].startswith("training diverged"), rec
        return
    assert "load_error" not in rec, rec
    cells = {(c["target"], c["mode"]): c for c in rec["cells"]}
    assert set(cells) == set(gm.CELLS)
    failed = [f"{t}:{m} {c.get('kind')}: {c.get('reason')}" for (t, m), c in cells.items() if c["status"] == "failed"]
    assert not failed, f"seed {seed}: " + "; ".join(failed)
    for (t, m), c in cells.items():
        if c["status"] == "refused":
            assert t in gm.MAY_REFUSE or gm.DIVERGES in c["reason"], (t, m, c["reason"])
            assert "\n" not in c["reason"] and "inside lmu-edge" not in c["reason"], c["reason"]
        else:
            assert c["sqnr"] >= gm.floor_of(t, m, rec.get("source_f32_db")), (t, m, c)


def tests(seeds) -> tuple:
    """The two tests of a CI module over ``seeds``: its seeds are CI seeds with their models shipped, and each
    converts in every cell at its floor (one module per pytest worker: ``--dist loadfile``)."""

    def test_the_seeds_are_ci_seeds_and_their_models_are_shipped():
        check_shipped(seeds)

    @pytest.mark.slow  # 20-60 s of CPU a model (2026-12-07): every target and mode, C compiles included
    @pytest.mark.parametrize("seed", seeds)
    def test_a_generated_model_converts_in_every_cell_at_its_floor(seed):
        check_cells(seed)

    return (
        test_the_seeds_are_ci_seeds_and_their_models_are_shipped,
        test_a_generated_model_converts_in_every_cell_at_its_floor,
    )
