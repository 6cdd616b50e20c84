"""Mixed precision: which weights, activations and LMU states get 16 (or 32) bits, and why.

Every widening search lives here. :func:`search` is :func:`lmu_edge.quantization.quantize`'s: with
16-bit activations (the C target's int16x8) :func:`widen` gives the fewest weight matrices 16-bit
weights that lift the calibration SQNR to ``widen_db``; with 8-bit activations (C int8)
:func:`widen_activations` gives the fewest layers 16-bit activations (and, within them, weights); where
both miss it, 32-bit LMU states are tried. :func:`narrow` is the search for targets whose model is costly
to run (ONNX Runtime, LiteRT); :func:`widen_db_option` checks their ``widen_db``; rounding: :mod:`.rounding`.
"""

from __future__ import annotations

import functools
import math
import time

import numpy as np

from . import ir
from .errors import QuantizationError
from .precision import WIDEN_DB
from .rounding import weight_parts
from .scoring import NEAR_DB, SCORE_FIELDS, SEARCH_STEPS, Scorer, noted  # noqa: F401 (re-exported)

#: int16x8 with ``widen_db``: the weight width of a part :func:`widen` widens
WIDE_BITS = 16
#: ``widen_db``: a part is widened only when that lifts the calibration SQNR by at least this much
WIDEN_MIN_GAIN_DB = 0.5
#: :func:`search`'s ``cost`` (a target's estimate of a graph's instructions per step on its device) decides between
#: two choices that both reach the target where their costs differ by more than this share of the step; within it
#: the estimate's error could decide, and the SQNR does, as it does without a cost
COST_TIE = 0.02


def cheapest_first(items: list, costs: list, step: float) -> list:
    """``items`` (in the order the SQNR ranks them) by their ``costs``, cheapest first, where costs within
    :data:`COST_TIE` of the ``step`` of their group's cheapest are one group that keeps the SQNR's order (not of
    their neighbour's: costs 0, 15, 30, ... would chain into one group however far apart its ends)."""
    ranked = sorted(range(len(items)), key=lambda k: costs[k])
    group, first, keyed = 0, None, {}
    for k in ranked:
        if first is None or costs[k] - costs[first] > COST_TIE * step:
            group, first = group + (first is not None), k
        keyed[k] = group
    return [items[k] for k in sorted(range(len(items)), key=lambda k: (keyed[k], k))]


def check_widen_db(widen_db, weight_bits) -> None:
    """Refuse, in one line, a ``widen_db`` for :func:`lmu_edge.quantization.quantize` that is not a finite
    number of dB, or one given with more than 8 weight bits (there is nothing left to widen)."""
    if widen_db is None:
        return
    if int(weight_bits) > 8:
        raise QuantizationError(
            f"widen_db needs weight_bits <= 8 (it gives some of the 8-bit weights or activations 16 "
            f"bits); got weight_bits={weight_bits}"
        )
    try:
        ok = math.isfinite(float(widen_db))
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise QuantizationError(f"widen_db must be a finite number of dB, got {widen_db!r}")


def window_seen(graph, steps: int) -> bool:
    """Whether calibration sequences of ``steps`` steps show each LMU state at the range it keeps on inputs
    like them: every memory's window ``theta`` fits in them, or the graph's known length does. (A shorter
    calibration of a long window sees a state still growing, as a deployed stream would not.)"""
    if graph.seq_len is not None and graph.seq_len <= steps:
        return True
    return all(float(la.theta) <= steps for la in graph.layers if isinstance(la, ir.LMU))


class Ticker:
    """``build_at`` of :func:`search` that says, through ``progress``, how the search goes: each candidate
    built, how many more there may be (``per_width`` for each state width tried: an estimate, since the
    search stops where the SQNR does) and the time that leaves, at most one line every :data:`TICK_S`."""

    def __init__(self, build_at, progress, per_width: int):
        self.build_at, self.progress, self.per_width = build_at, progress, per_width
        self.widths: set = set()
        self.expect, self.done, self.spent = 0, 0, 0.0
        self.last = time.perf_counter()

    def __call__(self, *args, **kw):
        width = (kw.get("sb"), kw.get("measured", False))
        if width not in self.widths:
            self.widths.add(width)
            self.expect = self.done + self.per_width  # a width tried next: the last one's search is over
            if len(self.widths) > 1:
                self.progress(
                    f"quantizing: the same search with {width[0]}-bit LMU states"
                    + " sized by the calibration" * width[1]
                )
        t0 = time.perf_counter()
        out = self.build_at(*args, **kw)
        now = time.perf_counter()
        self.done, self.spent = self.done + 1, self.spent + now - t0
        if now - self.last >= TICK_S:
            self.last = now
            each = self.spent / self.done
            left = max(self.expect - self.done, 0) * each
            self.progress(
                f"quantizing: {self.done} of about {max(self.expect, self.done)} candidates built "
                f"({each:.1f} s each, {out[0]:.1f} dB on the calibration data; about {_duration(left)} left)"
            )
        return out


#: :class:`Ticker`: the least time between two progress lines
TICK_S = 2.0


def _duration(s: float) -> str:
    return f"{s:.0f} s" if s < 90 else f"{s / 60:.1f} min"


def candidates_per_width(graph, tries, widen_db, ab) -> int:
    """About how many candidates :func:`search` builds for one state width: each weight rounding of
    ``tries``, then :func:`widen_activations`' :func:`narrow` (all wide, each candidate alone, a pass) or
    :func:`widen`'s backward elimination (at most n (n + 1) / 2 for n weight parts)."""
    if widen_db is None:
        return len(tries)
    n = len(weight_parts(graph))
    if ab == 16:
        return len(tries) + 1 + n * (n + 1) // 2
    return len(tries) + 1 + 2 * (len(graph.layers) + n + 1)


def search(
    build_at,
    tries,
    graph,
    widen_db,
    wide_layers,
    ab,
    state_bits,
    widen_state,
    measured_ok=False,
    progress=None,
    scorer=None,
    cost=None,
):
    """:func:`lmu_edge.quantization.quantize`'s mixed-precision search: ``build_at(use_gptq, wide, wide_acts,
    sb=state bits)`` builds the integer graph and returns ``(calibration SQNR, graph, warnings)``; ``tries``
    are the weight roundings to build (GPTQ or not), the best kept. With ``widen_db``: :func:`widen`
    (16-bit activations) or :func:`widen_activations` (8-bit); ``wide_layers`` sets the 16-bit layers
    without a search. Where that misses ``widen_db`` and ``widen_state`` holds: with ``measured_ok`` first
    the same search with the 16-bit states sized by the calibration (``build_at(..., measured=True)``,
    :func:`window_seen`), kept where it reaches ``widen_db`` (the fast choice: a 32-bit state has no DSP,
    Helium or ARMv6-M kernel, 5x the instructions of a 16-bit one on the M4); then the same search with
    32-bit LMU states, kept if it does better. Returns ``(built, sqnr, graph, warnings, state bits
    tried last, state bits kept)``; ``built`` holds one result per entry of ``tries``. ``progress``: a
    callback for lines on how the search goes (:class:`Ticker`). ``scorer``: the :class:`Scorer` whose
    subsample ``build_at`` scores on; its near-ties and thresholds are decided on every sequence. ``cost``: the
    target's estimate of a built graph's instructions per step (``cost(graph) -> number``); where two choices
    reach the target, the cheaper is taken where they differ by more than :data:`COST_TIE` of the step and it is no
    less accurate on the calibration data (a near-tie scored on every sequence)."""
    settle, mark = (scorer.settle, scorer.mark) if scorer is not None else (list, lambda db: None)
    if progress is not None:
        build_at = Ticker(build_at, progress, candidates_per_width(graph, tries, widen_db, ab))

    def _at(bits, measured=False, stop_short=False):  # measured passed only when set: a build_at may not take it
        build = (
            functools.partial(build_at, sb=bits, measured=measured)
            if measured
            else functools.partial(build_at, sb=bits)
        )
        built = [build(use_gptq) for use_gptq in tries]
        if stop_short and widen_db is not None and ab == 8 and wide_layers is None:
            # a short search only asks whether every layer at 16 bits reaches the target; where it does not, this
            # state is left (or searched again in full, settled): so the near-tie of the roundings is settled
            # only where it goes on (issue 54: two scorings on every sequence, 14 s of the psMNIST-sized model's).
            # Within NEAR_DB below the target the other rounding might reach it: settled then, as before
            res = _widened(build, built, stop_short)
            if res[1] < float(widen_db) - NEAR_DB:
                return res
        built = settle(built)
        return _widened(build, built, stop_short)

    def _widened(build, built, stop_short):
        sqnr, qg, caught = max(built, key=lambda b: b[0])  # the first of equals: GPTQ
        if widen_db is not None and ab == 16:
            start = (sqnr, qg, caught)
            sqnr, qg, caught = widen(build, tries[0], graph, start, float(widen_db), settle, mark, cost)
        elif widen_db is not None or wide_layers is not None:
            use = next(t for t, b in zip(tries, built, strict=True) if b[1] is qg)
            if wide_layers is not None:
                names = {lay.name: i for i, lay in enumerate(graph.layers)}
                unknown = sorted(set(wide_layers) - set(names) - {"input"})
                if unknown or ab != 8:
                    raise QuantizationError(
                        f"wide_layers: {', '.join(map(repr, unknown))} is no layer of {graph.name!r}"
                        if unknown
                        else "wide_layers needs 8-bit activations"
                    )
                acts = frozenset(names[n] if n != "input" else "x" for n in wide_layers)
                sqnr, qg, caught = build(use, frozenset(), acts)
            elif widen_db is not None:
                start = (sqnr, qg, caught)
                args = (build, use, graph, start, float(widen_db), stop_short, mark, cost, settle)
                sqnr, qg, caught = widen_activations(*args)
        return built, sqnr, qg, caught

    retry = (
        widen_db is not None and widen_state and state_bits < 32 and any(isinstance(la, ir.LMU) for la in graph.layers)
    )
    # where the calibrated 16-bit state may come next, a proven one that misses the target with every layer at
    # 16 bits is not narrowed (issue 54: 10 of the psMNIST-sized model's 27 candidates at 17 s each); its full
    # search runs only where the calibrated state misses too. Its SQNR noted below is then the all-wide one
    short = retry and measured_ok and state_bits == 16 and wide_layers is None
    built, sqnr, qg, caught = _at(state_bits, stop_short=short)
    used = kept = state_bits
    if retry and sqnr < float(widen_db):
        # widening weights and activations missed the target: the state may be what limits it (issue 52: a
        # memory whose proven bound is 37x what calibration reaches keeps ~10 of 16 bits, 28 dB), so the
        # same search with 32-bit states; kept where it does better on the calibration data. First, where the
        # calibration saw the memories' whole windows, the 16-bit state at the range calibration gives it
        # (25% headroom, saturating beyond: the state RK and Pade memories always have); kept where it
        # reaches the target (issue 54: the order-256 bench model, 23.2 dB proven, 36.1 sized this way)
        if measured_ok and state_bits == 16:
            m_built, m_sqnr, m_qg, m_caught = _at(state_bits, measured=True)
            if m_sqnr >= float(widen_db):
                m_qg = noted(
                    m_qg,
                    state_bound="calibrated",
                    state_bits_sqnr_db={str(state_bits): float(sqnr), f"{state_bits} calibrated": float(m_sqnr)},
                )
                return m_built, m_sqnr, m_qg, m_caught, state_bits, state_bits
            if short:  # the proven state's own search, in full: the fallback the 32-bit state is measured against
                built, sqnr, qg, caught = _at(state_bits)
        used = 32  # tried: a warning then suggests no wider state (the one it names is the width kept)
        narrow_sqnr, narrow = sqnr, (built, sqnr, qg, caught)
        built, sqnr, qg, caught = _at(32)
        if sqnr > narrow_sqnr:
            qg = noted(
                qg, widened_state_bits=32, state_bits_sqnr_db={str(state_bits): float(narrow_sqnr), "32": float(sqnr)}
            )
            kept = 32
        else:
            built, sqnr, qg, caught = narrow
    return built, sqnr, qg, caught, used, kept


def widen(build, use_gptq, graph, start, target_db, settle=list, mark=lambda db: None, cost=None):
    """:func:`lmu_edge.quantization.quantize`'s ``widen_db``: ``build(use_gptq, wide)`` builds the
    integer graph with the parts ``wide`` 16-bit and returns ``(calibration SQNR, graph, warnings)``;
    ``start`` is that of no part widened. Widening parts one at a time stalls where several int8 parts
    share a feedback loop (none alone lifts the SQNR), so this goes the other way: every part 16-bit,
    then, one at a time, the part whose int8 weights keep the SQNR highest goes back to int8, as long
    as the SQNR stays at ``target_db`` (or, where 16-bit weights everywhere miss it, within
    :data:`WIDEN_MIN_GAIN_DB` of what they reach). ``settle`` and ``mark``: :meth:`Scorer.settle` and
    :meth:`Scorer.mark`, where the search scores on a subsample. With a ``cost`` (:func:`search`) the
    elimination runs again taking first, of the parts whose int8 weights keep the SQNR there, the one that
    saves the most instructions (:func:`cheapest_first`); its choice is kept where it is :func:`faster` and no
    less accurate on the calibration data (the target stays, and no SQNR drops for speed)."""
    keys = weight_parts(graph)
    wide = frozenset(keys) if start[0] < target_db else frozenset()
    best = build(use_gptq, wide) if wide else start
    if best[0] < start[0] + WIDEN_MIN_GAIN_DB:
        wide, best = frozenset(), start  # 16-bit weights do not help: int8 weights everywhere
    # held to the target where every part at 16 bits reaches it, else to within the least gain of what that
    # reaches (min() of the two let a search end below a target it could keep: tests/test_widening_search.py)
    floor = target_db if best[0] >= target_db else best[0] - WIDEN_MIN_GAIN_DB
    mark(floor)
    memo: dict = {}

    def trial(w):
        if w not in memo:
            memo[w] = build(use_gptq, w) if w else start
        return memo[w]

    def eliminate(wide, best, by_cost):
        while wide:
            keys_left = sorted(wide)
            trials = list(zip(settle([trial(wide - {k}) for k in keys_left]), keys_left, strict=True))
            keep = sorted((t for t in trials if t[0][0] >= floor), key=lambda t: -t[0][0])  # stable: first of equals
            if not keep:
                break
            if by_cost:
                keep = cheapest_first(keep, [cost(t[0][1]) for t in keep], cost(best[1]))
            best, wide = keep[0][0], wide - {keep[0][1]}
        return wide, best

    chosen, got = eliminate(wide, best, False)
    if cost is not None and chosen:
        alt, alt_got = eliminate(wide, best, True)
        if faster(cost, alt_got[1], got[1]):
            mine, theirs = settle([got, alt_got])  # near-ties compared on every sequence, as the search's own
            chosen, got = (alt, theirs) if theirs[0] >= mine[0] else (chosen, mine)
    widened = [f"{graph.layers[i].name}.{field}" for i, field in keys if (i, field) in chosen]
    return got[0], noted(got[1], widen_db=target_db, int8_weights_sqnr_db=start[0], widened=widened), got[2]


def faster(cost, a, b) -> bool:
    """Whether ``a`` is faster than ``b`` by ``cost`` by more than :data:`COST_TIE` of ``b``'s step: where the
    widening searches take a choice ordered by cost over the one ordered by SQNR."""
    return float(cost(b)) - float(cost(a)) > COST_TIE * float(cost(b))


def narrow(candidates, score, target_db: float, stop_short: bool = False, mark=lambda db: None, cost=None) -> tuple:
    """Mixed precision for a target whose model is costly to run (ONNX Runtime, LiteRT): the fewest of
    ``candidates`` (tensors or operators) at 16 bits that lift ``score(wide)`` (an SQNR in dB on the
    calibration data, ``wide`` a frozenset of candidates at 16 bits) to ``target_db``, or within
    :data:`WIDEN_MIN_GAIN_DB` of every candidate at 16 bits where that misses it. Returns ``(wide,
    its score, the score with none wide)``.

    Each candidate is scored by the SQNR with every other candidate 16-bit and it alone 8-bit; then,
    from the one whose 8 bits cost least, candidates go back to 8 bits one at a time wherever the SQNR
    stays at the goal, in passes until none can (so that no widened candidate alone could be 8-bit):
    about 2N + 2W runs of the model for N candidates and W widened, not the N^2 of :func:`widen`'s full
    backward elimination, which a runtime's per-run cost makes too slow. ``stop_short``: where every
    candidate at 16 bits misses ``target_db``, return them all at once (the caller tries something else
    first, :func:`search`). ``mark(goal)`` is told the goal the candidates are held to (:meth:`Scorer.mark`).
    ``cost(wide)``: the instructions per step of a set already scored (:func:`search`'s ``cost``): candidates
    then go back to 8 bits in the order of what that saves, of their SQNR among savings alike
    (:func:`cheapest_first`)."""
    candidates = list(candidates)
    start = score(frozenset())
    if start >= target_db or not candidates:
        return frozenset(), start, start
    wide = frozenset(candidates)
    best = score(wide)
    if best < start + WIDEN_MIN_GAIN_DB:
        return frozenset(), start, start  # 16 bits do not help
    if stop_short and best < target_db:
        return wide, best, start
    goal = target_db if best >= target_db else best - WIDEN_MIN_GAIN_DB  # as widen's floor
    mark(goal)
    alone = {n: score(wide - {n}) for n in candidates}
    order = sorted(candidates, key=lambda n: -alone[n])
    if cost is not None:
        order = cheapest_first(order, [cost(wide - {n}) for n in order], cost(wide))
    narrowed = True
    while narrowed:  # until no widened candidate alone can go back to 8 bits (usually two passes)
        narrowed = False
        for n in [n for n in order if n in wide]:
            trial = score(wide - {n})
            if trial >= goal:
                wide, best, narrowed = wide - {n}, trial, True
    return wide, best, start


def widen_db_option(v, target: str, default: float):
    """A target's ``widen_db`` option checked: a finite number of dB, or None (no widening)."""
    if v is None:
        return None
    try:
        ok = not isinstance(v, bool) and bool(np.isfinite(float(v)))
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise QuantizationError(
            f"{target}: widen_db={v!r} is not a number of dB: give the calibration SQNR int8 should reach "
            f"(default {default:g}) or null to widen nothing to 16 bits"
        )
    return float(v)


def widen_activations(
    build, use_gptq, graph, start, target_db, stop_short=False, mark=lambda db: None, cost=None, settle=list
):
    """``quantize(widen_db=)`` with 8-bit activations (the C target's int8): where the calibration SQNR
    misses ``target_db``, the fewest layers (and the input) given 16-bit activations that lift it there,
    or within :data:`WIDEN_MIN_GAIN_DB` of every layer at 16 bits where that misses it
    (:func:`narrow`: the integer graph is cheap to run, but a layer's 16 bits may only
    help with its neighbour's, as a feedback loop's weights do). With a ``cost`` (:func:`search`) the narrowing
    runs again in the order of what each candidate saves; its choice is kept where it is :func:`faster`, no less
    accurate on the calibration data, and widens the input (the C API's width, the user's interface) no more
    than the first."""
    runs: dict = {(frozenset(), frozenset()): start}

    def split(wide):  # a weight part's 16 bits count only in a 16-bit layer (the int8 kernels take int8 weights)
        acts = frozenset(c for c in wide if not isinstance(c, tuple))
        return acts, frozenset(c for c in wide if isinstance(c, tuple) and c[0] in acts)

    def score(wide):
        acts, parts = key = split(wide)
        if key not in runs:
            runs[key] = build(use_gptq, parts, acts)
        return runs[key][0]

    cands = [*range(len(graph.layers)), *weight_parts(graph), "x"]
    wide, got, first = narrow(cands, score, target_db, stop_short, mark)
    if cost is not None and wide:  # again in the order of what each saves; kept where faster, never for the API

        def step(w):
            return cost(runs[split(w)][1])

        alt, _, _ = narrow(cands, score, target_db, stop_short, cost=step)
        if faster(step, alt, wide) and ("x" in alt) <= ("x" in wide):
            mine, theirs = settle([runs[split(wide)], runs[split(alt)]])  # near-ties on every sequence
            wide = alt if theirs[0] >= mine[0] else wide
    acts, parts = split(wide)
    sqnr, qg, caught = runs[acts, parts]
    widened = ["input"] * ("x" in acts) + [lay.name for i, lay in enumerate(graph.layers) if i in acts]
    weights = [f"{graph.layers[i].name}.{f}" for i, f in weight_parts(graph) if (i, f) in parts]
    qg = noted(qg, widen_db=target_db, int8_sqnr_db=first, widened=widened, widened_weights=weights)
    return sqnr, qg, caught


#: the calibration sequences the held-out check needs (:func:`_held_out`): fewer give no second half worth the name
HELD_OUT_MIN = 16
#: how far below the search's own figure (and the target) the held-out half may score before the search runs again
#: there: the gap between the int8 widening target (33 dB) and the matrix's floor (30)
HELD_OUT_SLACK_DB = 3.0


def held_out_split(n: int) -> tuple:
    """``(fit, out)``: the calibration sequences the held-out check fits its ranges on and scores on, a fixed
    shuffle's halves (a calibration set ordered by kind, as the generated models' sines, noise, steps and events,
    would give every other sequence to one half)."""
    order = np.random.default_rng(0).permutation(n)
    return np.sort(order[n // 2 :]), np.sort(order[: n // 2])


def narrower_state(result, build, use_gptq, bits, loops=False, target_db=WIDEN_DB["int16x8"]) -> tuple:
    """The int16 mode's state width and loop span: ``result`` (``(SQNR, graph, warnings)``, built with 32-bit
    LMU states and feedback loops spanning LOOP16_SPAN) or, where it misses ``target_db`` (the 16-bit
    activations' target), the best of the 16-bit state's build and, with ``loops`` (the graph has a feedback
    loop: :func:`lmu_edge.qlinear.loops_back`), both widths with the loops at the activations' 2x headroom
    (:func:`narrower_loops`) and, where the best so far still misses it, at their calibrated range
    (LOOP16_TIGHT_SPAN), each kept only where it does better on the calibration data (the metadata's
    ``narrowed_state_bits``, ``loop_span``). A 32-bit state leaves a high-order memory's coefficients
    62 - 32 - log2(q) bits: issue 52's seed 72 (Euler, order 168, theta 4338) kept 22, an impulse-response
    error of 2.9%, and gave 35.5 dB held out where the 16-bit state's 32-bit coefficients gave 44.3.
    Returns ``(SQNR, graph, warnings, widest state bits tried, kept)``; ``bits``: those of ``result``."""
    from .qlinear import LOOP16_TIGHT_SPAN, RANGE16_HEADROOM

    sqnr, qg, caught = result
    if sqnr >= target_db:
        return (sqnr, qg, caught, *bits)
    tried = {"32": float(sqnr)}
    best, kept = result, bits[1]
    spans = [RANGE16_HEADROOM, LOOP16_TIGHT_SPAN] if loops else []
    for sb, span in [(16, None)] + [(b, s) for s in spans for b in (32, 16)]:
        if span == LOOP16_TIGHT_SPAN and best[0] >= target_db:  # the calibrated range only where 2x misses too
            break
        got = build(use_gptq, sb=sb) if span is None else build(use_gptq, sb=sb, span=span)
        tried[f"{sb}" + ("" if span is None else f", loops {span:g}x")] = float(got[0])
        if got[0] > best[0]:
            best, kept = (got[0], noted(got[1], **({} if span is None else {"loop_span": span})), got[2]), sb
    if best is result:
        return (sqnr, qg, caught, *bits)
    info = {"state_bits_sqnr_db": tried} | ({"narrowed_state_bits": 16} if kept == 16 else {})
    return best[0], noted(best[1], **info), best[2], bits[0], kept


def narrower_loops(result, again, target_db: float) -> tuple:
    """:func:`search`'s ``result`` or, where ``again(span)`` (the search with every feedback loop's 16-bit values
    at the 2x headroom instead of LOOP16_SPAN's 8x; where that misses ``target_db`` too, at their calibrated
    range, LOOP16_TIGHT_SPAN) gains :data:`WIDEN_MIN_GAIN_DB` on the calibration data, that (``loop_span``).
    8x holds loops that run past their calibration (seed 1041: a ReLU SimpleRNN cell at 5.3x on held-out steps)
    at 3 of the 16 bits, and loops that do not lose them (seed 18: C int16x8 36.5 dB held out). Taken only where
    8x misses the target, then held to the held-out check, whose second search (8x) joins where it runs past."""
    from .qlinear import LOOP16_TIGHT_SPAN, RANGE16_HEADROOM

    best, tried, span = result, {"8": float(result[1])}, None
    for s in (RANGE16_HEADROOM, LOOP16_TIGHT_SPAN):  # the calibrated range itself where 2x misses the target too
        alt = again(s)
        tried[f"{s:g}"] = float(alt[1])
        if alt[1] >= best[1] + WIDEN_MIN_GAIN_DB:
            best, span = alt, s
        if best[1] >= target_db:
            break
    if span is None:
        return result
    info = {"loop_span": span, "loop_span_sqnr_db": tried}
    return (best[0], best[1], noted(best[2], **info), *best[3:])


def held_out_rule(n: int, got: float, target_db: float, half, join) -> tuple:
    """The held-out check every target's widening search runs (C: :class:`HeldOut`; ONNX and TFLite int8 in
    their runtimes), its decisions in one place. With ``n`` calibration sequences (none checked under
    :data:`HELD_OUT_MIN`) split by :func:`held_out_split`, the mark is :data:`HELD_OUT_SLACK_DB` below the
    search's figure ``got`` or the target, whichever is lower. ``half(fit, out, mark)`` returns ``(sizes,
    score, search)`` for ranges from ``fit`` scored on ``out``: ``score()`` the choice's SQNR there, ``search()``
    the search run again there, ``(its choice, its SQNR)``, its choice None where it chose the same. Where the
    choice scores at the mark, it stays; else where the search there lifts the half to the mark, ``join(its
    choice)`` (the two choices joined: the split's ranges ask for less where its half saw less) is returned.
    Where no widening lifts the half, the shortfall is the half's ranges, not the widths, and the choice stays.

    Returns ``(joined or None, what was measured: None where nothing was)``."""
    if n < HELD_OUT_MIN:
        return None, None
    fit, out = held_out_split(n)
    mark = min(float(got), float(target_db)) - HELD_OUT_SLACK_DB
    sizes, score, search = half(fit, out, mark)
    db = float(score())
    note = {"sequences": sizes, "sqnr_db": db}
    if db >= mark:
        return None, note
    again, got2 = search()
    note.update(searched_again=float(got2), widened_further=False)
    if again is None or got2 < mark:
        return None, note
    joined = join(again)
    note["widened_further"] = joined is not None
    return joined, note


class HeldOut:
    """The widening search's choice checked on calibration sequences its ranges did not see
    (:func:`lmu_edge.quantization.quantize`'s, with ``widen_db``; :func:`held_out_rule` decides): rebuilt with
    the ranges of one half of the calibration (``record(graph, x)`` gives them) and scored on the other, and
    where the search runs again there, its choice joined with the first built with every sequence's ranges.

    Calibrated ranges clip data that goes past them, and a widening chosen on the data its ranges came from
    cannot see that: issue 52's seed 1060 (64 calibration sequences of four kinds) reached 33.0 dB on its
    calibration with the LMU layer's activations at 16 bits and gave 16.1 on held-out sequences; that choice
    from the ranges of half its calibration scored 15.1 on the other half, and the search there widened the
    layers after the LMU too (43.8 dB held out). The metadata's ``held_out`` says what was measured."""

    def __init__(self, graph, x, y_f, target_db, score, record):
        self.graph, self.x, self.y_f, self.target = graph, x, y_f, float(target_db)
        self.score, self.record = score, record

    def check(self, result, chosen, builder, searched, build):
        """``result`` (``(graph, warnings, state bits tried last, kept)``, the search's) or the wider choice;
        ``chosen`` maps ``id(graph.layers)`` to ``(layers, build arguments)``; ``builder(ranges, scorer)``
        gives a ``build``; ``searched(build, scorer)`` runs the search (:func:`search` under
        :meth:`Scorer.run`); ``build`` builds with every sequence's ranges."""
        qg, caught, used, kept = result
        x, y_f = self.x, self.y_f
        seen = chosen.get(id(qg.layers))
        if seen is None or seen[0] is not qg.layers:
            return result
        args = seen[1]
        res: list = []

        def half(fit, out, mark):
            ranges = self.record(self.graph, x[fit])

            def score():  # as the search scores: on a subsample of the half where it is long, all of it near the mark
                check = Scorer(x[out], y_f[out], self.score, self.target, SEARCH_STEPS)
                check.mark(mark)
                return builder(ranges, check)(*args)[1].metadata["quantization"]["calibration_sqnr_db"]

            def search():
                scorer = Scorer(x[out], y_f[out], self.score, self.target, SEARCH_STEPS)
                res[:] = searched(builder(ranges, scorer), scorer)
                again = chosen.get(id(res[2].layers))
                return (None if again is None or again[1] == args else again[1]), res[1]

            return [len(fit), len(out)], score, search

        def join(again):
            use_gptq, wide, acts, *rest = again  # and the state bits, measured, the loops' span (the second's)
            wide, acts = wide | args[1], acts | args[2]
            return wide, acts, build(use_gptq, wide, acts, *rest)

        cal = float(qg.metadata["quantization"]["calibration_sqnr_db"])
        joined, note = held_out_rule(x.shape[0], cal, self.target, half, join)
        if note is None:
            return result
        if joined is None:
            return noted(qg, held_out=note), caught, used, kept
        wide, acts, (_, qg2, caught2) = joined
        notes = self._notes(qg, res[2], wide, acts)
        return noted(self.score(qg2, x, y_f), **notes, held_out=note), caught2, *res[4:]

    def _notes(self, first, again, wide, acts) -> dict:
        """The search's notes for the joined choice: the first search's figures and target, the state the
        second kept, and the names of what is widened (as :func:`widen` and :func:`widen_activations` write)."""
        one, two = first.metadata["quantization"], again.metadata["quantization"]
        out = {k: one[k] for k in ("widen_db", "int8_sqnr_db", "int8_weights_sqnr_db", "search_on") if k in one}
        out.update({k: two[k] for k in ("state_bound", "widened_state_bits", "state_bits_sqnr_db") if k in two})
        names = [lay.name for lay in self.graph.layers]
        parts = [f"{names[i]}.{f}" for i, f in weight_parts(self.graph) if (i, f) in wide]
        if int(one.get("activation_bits", 8)) == 16:
            return {**out, "widened": parts}
        layers = ["input"] * ("x" in acts) + [n for i, n in enumerate(names) if i in acts]
        return {**out, "widened": layers, "widened_weights": parts}
