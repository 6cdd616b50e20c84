"""bench/gen_chunk.py's comparison of two runs of the generated-model chunk (issue 58): what may differ
between the serial and the Ray run, and what may not."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _gen_chunk():
    spec = importlib.util.spec_from_file_location("gen_chunk", ROOT / "bench" / "gen_chunk.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _rec(seed, sqnr, seconds=1.0, reason=None):
    cell = {"target": "nengo", "mode": "float", "status": "converted", "sqnr": sqnr, "seconds": seconds}
    if reason:
        cell.update(status="failed", reason=reason)
    return {"seed": seed, "cells": [cell], "seconds": seconds, "cpu_seconds": seconds}


def test_runs_agree_up_to_timings_and_float_round_off_and_nothing_else():
    g = _gen_chunk()
    a = {1: _rec(1, 294.36), 2: _rec(2, 57.81), 3: _rec(3, 999.0), 4: _rec(4, 12.0, reason="x /tmp/lmu_gen_ab12/y")}
    b = {
        1: _rec(1, 292.79, 9.0),
        2: _rec(2, 57.81, 3.0),
        3: _rec(3, 338.16),
        4: _rec(4, 12.0, reason="x /tmp/lmu_gen_zz9/y"),
    }
    assert g._differ(a, b) == []  # nengo's load-dependent round-off (>= 200 dB), timings, temporary names
    assert g._differ(a, {**b, 2: _rec(2, 57.82)}) == [2]  # 0.01 dB of an integer cell is a result
    assert g._differ(a, {**b, 1: _rec(1, 199.9)}) == [1]  # below the round-off line: digit by digit
    assert g._differ(a, {k: v for k, v in b.items() if k != 3}) == [3]  # a seed one run lacks
    assert g._differ(a, {**b, 4: _rec(4, 12.0, reason="y")}) == [4]
