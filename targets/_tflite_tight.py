"""int16x8's mixed precision for TFLite: less headroom on the LMU memory path, checked on held-out sequences.

Every activation of an int16x8 model is already 16-bit, so the one thing its widening search can give is
precision on the memory path: the ranges there carry 2x headroom (:func:`._tflite_build.widen_int16_ranges`)
and a memory that amplifies its state's rounding wants that bit back. Less headroom clips whatever goes past
the calibrated range, and the calibration data cannot show that: issue 52's seed 175 (an Euler
LMUFeedforward, order 224, theta 5470, on 45-step sequences) reached 39.4 dB on its calibration data with
the memory path's ranges as calibrated (1.0x) and 26.3 on its test sequences, where 216 of its 896 balanced
state coordinates went past their calibrated maximum (up to 1.79x). So each cut the search keeps is checked
with the ranges of one half of the calibration (:func:`lmu_edge.widening.held_out_split`) on the other: it
must score there at least as well as what it replaces and, where 2x meets the floor there, cover the
excursions that half shows (seed 175: 1.47x between the halves, so 2x stays: 36.6 dB on the test sequences,
33.3 at 1.25x). Where 2x misses the floor the model lacks resolution, not room, and the score alone decides
(seed 22's memory, which amplifies its rounding noise, keeps its cut).
"""

from __future__ import annotations

import numpy as np

from lmu_edge import widening
from lmu_edge.qlinear import RANGE16_HEADROOM, TIGHT16_HEADROOM

from . import _stepplan


def tight_memory(graph, plan, form, rep, model: bytes, widen, score_x) -> tuple:
    """The int16x8 conversion ``model`` or, where it misses ``widen["db"]`` on the calibration data, one
    with the memory path's headroom cut to ``TIGHT16_HEADROOM`` (1.25x, the C target's for an unproven
    state), then, if still short, to none, each kept where it does better by
    :data:`lmu_edge.widening.WIDEN_MIN_GAIN_DB`. A memory whose dynamics amplify its state's rounding noise
    (issue 52, seed 22: euler, order 52, theta 296, ~48 dB from a step's rounding to the output): 30.5 dB on
    the calibration data with 2x, 37.4 without (34.7 dB held out at 1.25x, 36.4 at none). A graph with a
    feedback loop first tries the loop's tensors at the activations' 2x instead of LOOP16_SPAN's 8x, as the
    C target does (issue 52, seed 105: two stacked SimpleRNN loops, 27.9 -> 37.6 dB held out; ``loop_span``).

    ``score_x(model, x)``: the SQNR of a model streamed over sequences ``x`` against ``widen["graph"]``.
    ``widen["rep_of"]`` (where the held-out check is on): the representative data of some of the calibration
    sequences, in the plan's coordinates; with it the choice is checked on held-out sequences (the module's
    docstring). Returns ``(model, widening info)``."""
    from . import _tflite_build

    x = widen["x"]
    start = score_x(model, x)
    if start >= widen["db"]:
        return model, {}
    info = {"widen_db": widen["db"], "int16x8_sqnr_db": start}
    tried: list[tuple[float | None, bool, float]] = [
        (None, True, start)
    ]  # (memory room, loops at the activations' span, calibration SQNR)
    best, best_db, room_kept, loops_kept = model, start, None, True
    first = [(None, False)] if _stepplan.loop_tensors(graph) is not None else []
    for room, loops in first + [(TIGHT16_HEADROOM, None), (1.0, None)]:  # none at all only where it gains (it may clip)
        loops = loops_kept if loops is None else loops
        tight = _tflite_build.convert(graph, plan, form, False, "int16x8", rep, memory_room=room, loops=loops)
        got = score_x(tight, x)
        if got >= best_db + widening.WIDEN_MIN_GAIN_DB:
            best, best_db, room_kept, loops_kept = tight, got, room, loops
            tried.append((room, loops, got))
        if best_db >= widen["db"]:
            break
    rep_of = widen.get("rep_of")
    if len(tried) > 1 and rep_of is not None and x.shape[0] >= widening.HELD_OUT_MIN:
        pick, note = _held_out(graph, plan, form, x, tried, rep_of, score_x, widen["floor"])
        info["held_out"] = note
        if pick != len(tried) - 1:  # an earlier choice does better on sequences its ranges did not see
            room_kept, loops_kept = tried[pick][0], tried[pick][1]
            best = (
                model
                if pick == 0
                else _tflite_build.convert(
                    graph, plan, form, False, "int16x8", rep, memory_room=room_kept, loops=loops_kept
                )
            )
    kept = {} if room_kept is None else {"memory_ranges": f"calibrated, {room_kept}x headroom"}
    return best, {**info, **kept, **({} if loops_kept else {"loop_span": RANGE16_HEADROOM})}


def _held_out(graph, plan, form, x, tried, rep_of, score_x, floor) -> tuple:
    """``(index into tried, what was measured)``: each choice the calibration search kept (``tried[0]``: the 2x
    it started from), converted with the ranges of one half of ``x`` and scored on the other. Where 2x meets
    ``floor`` there, a cut headroom must also cover that half's excursions: every memory state coordinate's
    largest magnitude there over its largest on the fitted half, which is what the cut would clip (seed 175:
    1.47 between the halves, 1.79 on its test sequences, where the clipped 1.25x scored 2 dB above 2x on the
    held-out half and 3.3 dB below on the test set). Where 2x misses ``floor`` too, resolution is what the
    model lacks and the best held-out score decides (ties to the later choice: it did better where the
    ranges came from)."""
    from . import _tflite_build

    fit, out = widening.held_out_split(x.shape[0])
    rep = rep_of(plan, x[fit])
    scores = []
    for room, loops, _ in tried:
        kw = {} if room is None and loops else {"memory_room": room, "loops": loops}
        scores.append(score_x(_tflite_build.convert(graph, plan, form, False, "int16x8", rep, **kw), x[out]))
    reach = _excursion(plan, rep_of(plan, x[fit], full=True), rep_of(plan, x[out], full=True))
    pick = choose(scores, [room for room, _, _ in tried], reach, floor)
    note = {
        "sequences": [len(fit), len(out)],
        "sqnr_db": {_label(r, lo): round(float(s), 2) for (r, lo, _), s in zip(tried, scores, strict=True)},
        "state_excursion": round(float(reach), 3),
        "kept": _label(*tried[pick][:2]),
    }
    return pick, note


def choose(scores, rooms, reach: float, floor: float) -> int:
    """The index of the choice :func:`_held_out` keeps: ``scores[i]`` the held-out SQNR of the choice whose
    memory headroom is ``rooms[i]`` (None: the 2x, ``rooms[0]`` always), ``reach`` the held-out half's
    state excursion. Where ``scores[0]`` meets ``floor``, only a choice whose headroom covers ``reach`` may
    replace it; else any may. The highest score among those, ties to the later."""
    covered = [i for i, room in enumerate(rooms) if room is None or room >= reach]
    allowed = covered if scores[0] >= floor else range(len(rooms))
    return max(allowed, key=lambda i: (scores[i], i))


def _excursion(plan, fitted: dict, held: dict) -> float:
    """The largest ratio, over every memory state coordinate, of its magnitude in ``held`` to its largest in
    ``fitted`` (representative data by state name, in the plan's coordinates; 1 where there is no memory)."""
    worst = 1.0
    for name, _, kind, _ in plan.spec:
        if kind != "m":
            continue
        a, b = np.abs(fitted[name]).max(axis=0), np.abs(held[name]).max(axis=0)
        top = float(a.max()) if a.size else 0.0
        # a coordinate the fitted half never moved counts against the state's whole range (the one scale)
        worst = max(worst, float((b / np.maximum(a, max(top, 1e-12) * 1e-3)).max(initial=1.0)))
    return worst


def _label(room, loops) -> str:
    """A choice as the report names it: the memory path's headroom, and the loops' where they were narrowed."""
    return f"memory {RANGE16_HEADROOM if room is None else room}x" + ("" if loops else f", loops {RANGE16_HEADROOM}x")
