"""scripts/gen_models.py's long-run table (issue 52): how it counts a results file that spans commits."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gen_cells  # noqa: E402  (tests/ joins sys.path first)


def test_the_long_run_table_counts_a_seed_run_again_by_its_last_record(tmp_path):
    """A long run spans commits, and a seed run again at newer code (after a fix) appends a second record:
    the table counts each seed once, by its last record, and says how many earlier ones it left out."""
    gm = gen_cells.gen_models()
    mg = gm.model_gen()

    def rec(seed, status):
        cell = {"target": "c", "mode": "float", "status": status, "seconds": 1.0}
        cell |= {"sqnr": 120.0} if status == "converted" else {"kind": "internal error", "reason": "x"}
        return {"seed": seed, "spec": mg.draw(seed), "cells": [cell], "source": "h", "seconds": 1.0}

    path = tmp_path / "runs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (rec(5, "failed"), rec(6, "converted"), rec(5, "converted"))))
    text = gm.table(path)
    assert text.splitlines()[0].startswith("2 seeds,") and "1 earlier records of seeds run again left out" in text
    assert "| c float | 2 | 0 | 0 |" in text
