"""The realization choice's measurement under the work budget (issue 52's seed 41: a torch LMU of order 780,
theta 23419 and unknown length, whose every target was refused at 7.9e12 operations of measuring): where
comparing every step of the impulse response does not fit the budget, the fold samples it with the smallest
power-of-two stride that does (every step of the first 1024, then every stride-th, then every step around the
largest sampled errors), and says so."""

import numpy as np
import pytest
from graphs import lmu

from lmu_edge import budget, folding
from lmu_edge.errors import LimitError


def _layer(q, theta, disc="zoh"):
    return lmu(np.random.default_rng(q), q=q, theta=theta, disc=disc)


def _full_ops(layer):
    names = folding.auto_names(layer)
    searched = sum(n in ("pade", "rk2", "rk4") for n in names) + ("rk1" in names and layer.discretizer != "euler")
    return budget.fold_estimate(layer, len(names), searched).ops


@pytest.mark.parametrize(("q", "theta", "disc"), [(48, 4000.0, "zoh"), (32, 6000.0, "euler")])
def test_a_measurement_over_the_budget_is_sampled_not_refused(q, theta, disc):
    """Under a budget a quarter of the full measurement's: stride 1 is refused in one line, the default samples
    (a progress line names the stride) and picks the realization the full measurement picks, its error within
    2x of the full one's (the sampled steps are a subset, refined around the largest; at float64's rounding,
    where the sampled powers round apart, within 1e-12)."""
    layer = _layer(q, theta, disc)
    full = folding.candidates(layer)
    scale = _full_ops(layer) / budget.MAX_WORK_OPS / 4
    lines: list = []
    with budget.allow(scale, memory=1.0):
        with pytest.raises(LimitError, match="refused before starting"):
            folding.candidates(layer, stride=1)
        sampled = folding.candidates(layer, progress=lines.append)
    assert any("sampled every" in ln for ln in lines), lines
    best = {c.name: c for c in full}
    for c in sampled:
        assert c.name in best
        e, f = c.measurement.error, best[c.name].measurement.error
        assert 0.5 * f <= e <= 2 * f or max(e, f) < 1e-12, (c.name, e, f)

    def choice(cands):
        ok = [c for c in cands if c.ok]
        return min(ok, key=lambda c: folding.rank(c, "ops", layer.order, layer.memory_d)).name if ok else None

    assert choice(sampled) == choice(full)


def test_the_full_measurement_is_kept_where_it_fits():
    """Within the budget nothing is sampled: no progress line about it, the same errors as stride 1."""
    layer = _layer(16, 300.0)
    lines: list = []
    auto = folding.candidates(layer, progress=lines.append)
    full = folding.candidates(layer, stride=1)
    assert not any("sampled every" in ln for ln in lines)
    assert [c.measurement.error for c in auto] == [c.measurement.error for c in full]
