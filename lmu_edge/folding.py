"""Parallel form -> recurrent form: choose a realization of each LMU memory and prove it.

Each candidate realization is measured against the layer's reference impulse
response (:mod:`lmu_edge.impulse`: the error ``max|H - H_ref| / max|H_ref|``
over at least ``5 * theta`` steps, and the spectral radius). ``auto`` picks the
cheapest candidate (operations per step, then numbers stored) whose error is
within the budget and whose spectral radius is below one; substepped
realizations (Runge-Kutta, Pade) are searched for the fewest substeps that meet
the budget. Recurrent layers (already realized, e.g. keras-lmu's RNN path) pass
through unchanged, so ``fold`` is always safe to call.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Optional, Union

from . import budget, ir, limits, lti, pade
from .errors import FoldError, QuantizationError
from .impulse import Candidate, Reference, measure

REALIZATIONS = ("auto", "zoh", "euler", "rk4", "rk2", "rk1", "pade", "pade23", "pade22", "fir")
#: the implicit realizations by name: Pade orders (numerator, denominator); "pade" is [3/4]
PADE_NAMES = {"pade": (3, 4), "pade23": (2, 3), "pade22": (2, 2)}
#: A target declares what it runs through the target contract (:mod:`lmu_edge.targets`), read here by
#: name through the registry: ``PADE_MODES`` ("float", "int": where it runs the implicit realization; the
#: others have no kernel or ops for its per-element recurrence: ``auto`` leaves it out for them, and
#: asking for it is refused), ``RK_QUANTIZED`` (False: see :func:`rk_refusal`).
#: Quantized, ``auto`` leaves the implicit step out (ask for it with realization="pade"): its forward
#: substitution amplifies the integer roundings, and at order 512 (theta 2048, 10 substeps) the bound
#: of a 16-bit state could no longer be proven where dense ZOH's is (the quantizer's noise estimate is
#: about 100 state LSBs per sample against dense ZOH's half LSB).
PADE_IN_INTEGER_AUTO = False


def _declares(target: str, capability: str, default):
    """What the target registered as ``target`` declares as ``capability`` (``default`` where it says
    nothing, or for a name no target has)."""
    from . import registry

    if target not in registry.TARGETS:
        return default
    return getattr(registry.target(target), capability, default)


def _names(target: Union[str, tuple, None]) -> tuple:
    return () if target is None else (target,) if isinstance(target, str) else tuple(target)


def rk_refusal(target: Union[str, tuple, None], quantized: bool) -> Optional[str]:
    """Why a Runge-Kutta realization cannot be used for a quantized ``target``; ``None`` when it can.
    Quantized, a target that declares ``RK_QUANTIZED = False`` (TFLite: no 16x8 CUMSUM, the structured RK
    step's two per stage, so the int16x8 conversion fails and an int8 model loses its int16 state path) has
    the Runge-Kutta realizations left out of ``auto`` when another is measured, and refused by name: the
    shipped digits model converted "successfully" to TFLite int8 at -1.7 dB with it. With the dense Euler
    step instead, the layer-option matrix's PyTorch Euler model converts to int16x8 at 44.6 dB (refused
    with RK) and to int8 at 21.7 dB (13.7 dB with RK)."""
    bad = [t for t in _names(target) if not _declares(t, "RK_QUANTIZED", True)]
    if not quantized or not bad:
        return None
    return (
        f"the Runge-Kutta realization has no integer state path on the {bad[0]!r} target: TFLite has no 16x8 "
        f"op CUMSUM (two per RK stage), so int16x8 cannot be built and int8 runs the state in 8 bits (the shipped "
        f"digits model: -1.7 dB); use --realization auto, zoh or euler (the dense step), --quantize float, "
        f"or --target c"
    )


#: what ``auto`` minimises: operations per step, flash (numbers stored), or RAM (state and scratch)
PREFERENCES = ("ops", "flash", "ram")
#: "flash": a realization storing at most this many numbers per order counts as O(q) (no q*q matrix,
#: no q*L kernel); among those the fewest operations win
FLASH_SMALL = 8


def ram_numbers(memory, q: int, d: int) -> int:
    """Numbers a realization keeps in RAM per step for ``d`` channels of order ``q``: the state plus the
    scratch its kernel needs (dense: a q-vector; RK of order r: r q-vectors; Pade: four; FIR: its
    ring buffer of L inputs per channel)."""
    if isinstance(memory, ir.DenseSS):
        return q * d + q
    if isinstance(memory, ir.RungeKutta):
        return q * d + memory.rk_order * q
    if isinstance(memory, ir.Pade):
        return q * d + 4 * q
    if isinstance(memory, ir.FIR):
        return q * d + memory.kernel.shape[1] * d
    return q * d


def rank(c: "Candidate", prefer: str, q: int, d: int = 1) -> tuple:
    """The sort key ``auto`` minimises under ``prefer`` (see :data:`PREFERENCES`)."""
    m = c.measurement
    base = (m.ops_per_step, m.coeffs_stored)
    if prefer == "flash":
        return (0 if m.coeffs_stored <= FLASH_SMALL * q else m.coeffs_stored,) + base
    if prefer == "ram":
        return (ram_numbers(c.memory, q, d),) + base
    return base


def tradeoff(chosen: "Candidate", cands: list, prefer: str, q: int, d: int = 1) -> str:
    """One line: what ``prefer`` chose against the fewest-operations choice, and what it costs."""
    good = [c for c in cands if c.ok]
    fastest = min(good, key=lambda c: rank(c, "ops", q, d))
    a, b = chosen.measurement, fastest.measurement
    label = (
        f"{chosen.name} x{chosen.memory.substeps}"
        if isinstance(chosen.memory, (ir.RungeKutta, ir.Pade))
        else chosen.name
    )
    if fastest is chosen:
        return (
            f"prefer {prefer}: {label} ({a.ops_per_step} ops/step, {a.coeffs_stored} coefficients, "
            f"{ram_numbers(chosen.memory, q, d)} numbers in RAM) is also the fewest-operations choice"
        )
    flabel = (
        f"{fastest.name} x{fastest.memory.substeps}"
        if isinstance(fastest.memory, (ir.RungeKutta, ir.Pade))
        else fastest.name
    )
    return (
        f"prefer {prefer}: {label} instead of {flabel}: {a.coeffs_stored} coefficients against "
        f"{b.coeffs_stored} ({b.coeffs_stored / max(a.coeffs_stored, 1):.3g}x fewer), "
        f"{ram_numbers(chosen.memory, q, d)} numbers in RAM against {ram_numbers(fastest.memory, q, d)}, "
        f"for {a.ops_per_step} ops/step against {b.ops_per_step} ({a.ops_per_step / max(b.ops_per_step, 1):.3g}x)"
    )


#: the default budget of a quantized target, in LSBs of its state relative to the state's proven range
BUDGET_LSB_FRACTION = 0.25


def default_budget(state_bits: Optional[int]) -> tuple[float, str]:
    """``(error budget, why)``: 1e-6 in float; for a quantized state a quarter of one LSB relative to
    the state's proven range (``0.25 * 2^-(bits-1)``), never below 1e-6.

    A realization more accurate than the state can resolve buys nothing: the state's own rounding
    (half an LSB per step, carried through the memory) is already larger. A quarter LSB keeps the
    realization's error below the state's rounding; 1e-6 is the floor because past it (a 32-bit
    state) float64 measurement is the limit, not the state."""
    if state_bits is None:
        return DEFAULT_ERROR_BUDGET, f"float target: the default {DEFAULT_ERROR_BUDGET:g}"
    lsb = 2.0 ** -(int(state_bits) - 1)
    b = max(DEFAULT_ERROR_BUDGET, BUDGET_LSB_FRACTION * lsb)
    why = (
        f"{state_bits}-bit state: {BUDGET_LSB_FRACTION:g} of one LSB relative to its proven range "
        f"({BUDGET_LSB_FRACTION:g} * 2^-{int(state_bits) - 1} = {BUDGET_LSB_FRACTION * lsb:.3g})"
    )
    if b > BUDGET_LSB_FRACTION * lsb:
        why += f", floored at {DEFAULT_ERROR_BUDGET:g}"
    return b, why


def pade_refusal(target: Union[str, tuple, None], quantized: bool) -> Optional[str]:
    """Why the implicit realization cannot be used for ``target`` (a name, or several that must all
    run the folded graph); ``None`` when it can, or when no target is given (the Python API folds
    for the float reference)."""
    if target is None:
        return None
    from .registry import TARGETS

    kind = "int" if quantized else "float"
    bad = [t for t in _names(target) if kind not in _declares(t, "PADE_MODES", ())]
    if not bad:
        return None
    target = bad[0]
    where = ", ".join(t for t in TARGETS if kind in _declares(t, "PADE_MODES", ())) or "no target yet"
    return (
        f"the implicit 'pade' realization does not run on the {target!r} target "
        f"{'quantized' if quantized else 'in float'} (it runs on: {where}); use --realization rk4 (also O(q) "
        f"per substep) or zoh"
    )


DEFAULT_ERROR_BUDGET = 1e-6
MAX_SUBSTEPS = 4096


def _rk_candidate(layer, r, ref, budget, substeps, max_substeps, progress, incumbent=None) -> Candidate:
    """RK of order ``r``: the smallest substep count within ``budget`` (see :func:`_search`)."""
    return _search(
        layer,
        f"rk{r}",
        lambda s: ir.RungeKutta(r, s),
        lti.rk_cost(layer.order, r, 1)[0],
        ref,
        budget,
        substeps,
        max_substeps,
        progress,
        incumbent,
    )


def _pade_candidate(layer, name, ref, budget, substeps, max_substeps, progress, incumbent=None) -> Candidate:
    """The implicit Pade realization ``name``: the smallest substep count within ``budget``."""
    orders = PADE_NAMES[name]
    return _search(
        layer,
        name,
        lambda s: ir.Pade(*orders, s),
        pade.pade_cost(layer.order, orders, 1)[0],
        ref,
        budget,
        substeps,
        max_substeps,
        progress,
        incumbent,
    )


def _search(layer, name, make, per_substep, ref, budget, substeps, max_substeps, progress, incumbent) -> Candidate:
    """A substepped realization: the smallest substep count within ``budget``, found by doubling then bisecting.

    ``make(s)`` builds the node with ``s`` substeps; ``per_substep`` is its cost
    per channel and substep. With an ``incumbent`` (the cheapest candidate
    already within budget) the search stops at the largest count whose cost
    does not exceed the incumbent's: a count beyond it could not be chosen, so
    it is not measured.
    """
    if substeps is not None:
        return measure(layer, name, make(int(substeps)), ref, budget)
    note = ""
    if incumbent is not None:
        per = per_substep * layer.memory_d
        cap = max(1, incumbent.measurement.ops_per_step // per) if incumbent.ok else 1
        if cap < max_substeps:
            max_substeps = int(cap)
            note = (
                f"search stopped at {cap} substep{'s' if cap != 1 else ''}: more cannot beat {incumbent.name}'s "
                f"{incumbent.measurement.ops_per_step} ops/step"
                if incumbent.ok
                else f"search stopped at 1 substep: no count can beat {incumbent.name} under this preference"
            )
    tried = {}

    def at(s):
        if s not in tried:
            tried[s] = measure(layer, name, make(s), ref, budget)
            if progress:
                progress(f"  {layer.name}: {tried[s].describe()}")
        return tried[s]

    s = 1
    while not at(s).ok:  # grow until the budget is met ...
        if s >= max_substeps:
            return replace(min(tried.values(), key=lambda c: c.measurement.error), note=note)
        s = min(2 * s, max_substeps)
    lo, hi = s // 2, s  # ... then bisect for the smallest count that meets it
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if at(mid).ok:
            hi = mid
        else:
            lo = mid
    return at(hi)


def _fitting_stride(layer, n_names: int, searched: int, horizon) -> int:
    """1 where measuring every step fits the work budget in force, else the smallest power of two (up to the
    measured length) whose sampled measurement does; the largest where none does (the check then refuses)."""
    ops_budget = budget.MAX_WORK_OPS * budget.scale()[0]
    length = budget.measure_length(layer, horizon)
    stride = 1
    while stride < length and budget.fold_estimate(layer, n_names, searched, horizon, stride).ops > ops_budget:
        stride *= 2
    return stride


def candidates(
    layer: ir.LMU,
    error_budget: float = DEFAULT_ERROR_BUDGET,
    names=None,
    *,
    substeps: Optional[int] = None,
    max_substeps: int = MAX_SUBSTEPS,
    horizon: Optional[int] = None,
    progress: Optional[Callable[[str], None]] = None,
    prune: bool = True,
    prefer: str = "ops",
    stride: Optional[int] = None,
) -> list:
    """Measure the realizations ``names`` of one LMU layer (default: those ``auto`` considers).

    ``auto`` considers the dense form of the layer's own discretizer, the
    structured forms (for ZOH the implicit Pade [3/4] and RK4, each with
    searched substeps; for Euler RK1 with one substep, which is Euler exactly),
    and a FIR of the stored kernel when the source model convolved with one.

    With ``prune`` (the default) a substep search stops once more substeps
    could not beat the cheapest candidate already within budget (its
    :attr:`Candidate.note` says so); ``prune=False`` measures each family to
    its own smallest count within budget. Pruning follows ``prefer`` (see
    :func:`rank`): a family that cannot beat the best candidate so far under
    that preference is measured at one substep only.

    ``stride > 1`` measures a sampled error for very long horizons (see
    :func:`lmu_edge.impulse.measure`): every step of the first :data:`lmu_edge.impulse.SAMPLE_HEAD`, then every
    ``stride``-th, then every step around the largest sampled errors. The default (None) compares every
    step where that fits the work budget (:mod:`lmu_edge.budget`), else samples with the smallest power of
    two that does: issue 52's seed 41 (order 780, theta 23419, an unknown length: 117,098 steps) was refused
    at 7.9e12 operations, every target of it; 1 compares every step whatever it costs.
    """
    if not isinstance(layer, ir.LMU):
        raise TypeError(f"candidates() expects an ir.LMU layer, got {type(layer).__name__}")
    if prefer not in PREFERENCES:
        raise FoldError(f"unknown preference {prefer!r}; known: {', '.join(PREFERENCES)}")
    mem = layer.memory
    kernel = mem.kernel if isinstance(mem, ir.ImpulseResponse) else None
    q, L = layer.order, (kernel.shape[1] if kernel is not None else 0)
    planned = 8 * (4 * q * q + 4 * q * 512 + 2 * q * L)  # dense maps, measurement blocks, kernel copies
    if planned > limits.MAX_PLANNED_BYTES:
        raise limits.LimitError(
            f"layer {layer.name!r}: folding it would allocate about {planned >> 20} MiB, more "
            f"than the limit {limits.MAX_PLANNED_BYTES >> 20} MiB (order {q}, kernel length {L})"
        )
    if names is None:
        names = _auto_names(layer)
    searched = 0 if substeps is not None else sum(n in PADE_NAMES or n in ("rk2", "rk4") for n in names)
    searched += "rk1" in names and substeps is None and layer.discretizer != "euler"
    if stride is None:
        stride = _fitting_stride(layer, len(names), searched, horizon)
        if stride > 1 and progress is not None:
            progress(f"layer {layer.name!r}: the realizations' error sampled every {stride} steps past the first")
    budget.check(budget.fold_estimate(layer, len(names), searched, horizon, stride), progress)
    ref = Reference(layer, horizon, stride)
    out = []
    for name in names:
        if progress:
            progress(f"measuring {name} for layer {layer.name!r} over {ref.length} steps against the {ref.what}")
        if name in ("zoh", "euler"):
            A, B = lti.legendre_discrete(layer.order, layer.theta, name)
            out.append(measure(layer, name, ir.DenseSS(name, A, B), ref, error_budget))
        elif name in ("rk1", "rk2", "rk4") or name in PADE_NAMES:
            s = substeps
            if s is None and name == "rk1" and layer.discretizer == "euler":
                s = 1
            best = _incumbent(layer, name, [c for c in out if c.ok], prefer) if prune else None
            if name in PADE_NAMES:
                out.append(_pade_candidate(layer, name, ref, error_budget, s, max_substeps, progress, best))
            else:
                out.append(_rk_candidate(layer, int(name[2]), ref, error_budget, s, max_substeps, progress, best))
        elif name == "fir":
            if kernel is None:
                kernel = lti.legendre_impulse_response(layer.order, layer.theta, ref.length, layer.discretizer)
            out.append(measure(layer, name, ir.FIR(kernel), ref, error_budget))
        else:
            raise FoldError(f"unknown realization {name!r}; known: {', '.join(REALIZATIONS)}")
    return out


def _incumbent(layer, name, good, prefer):
    """The candidate a substep family must beat under ``prefer``, for pruning its search: the best so
    far when the family ties with it on everything but operations (its ops then cap the substeps); a
    copy marked not ok when the family cannot beat it at all; ``None`` when it can beat it anyway."""
    if not good:
        return None
    q, d = layer.order, layer.memory_d
    best = min(good, key=lambda c: rank(c, prefer, q, d))
    if prefer == "ops":
        return best
    probe: object
    if name in PADE_NAMES:
        probe = ir.Pade(*PADE_NAMES[name], 1)
        ops, coeffs = pade.pade_cost(q, PADE_NAMES[name], 1)
    else:
        probe = ir.RungeKutta(int(name[2]), 1)
        ops, coeffs = lti.rk_cost(q, int(name[2]), 1)
    fake = Candidate(name, probe, replace(best.measurement, ops_per_step=ops * d, coeffs_stored=coeffs), True)
    mine, theirs = rank(fake, prefer, q, d)[0], rank(best, prefer, q, d)[0]
    if mine < theirs:
        return None
    return best if mine == theirs else replace(best, ok=False)


def _auto_names(layer: ir.LMU) -> list:
    """The realizations ``auto`` measures for ``layer``, in the order they are measured."""
    mem = layer.memory
    stored = isinstance(mem, ir.ImpulseResponse) and mem.kernel is not None
    return (
        [layer.discretizer] + (["pade", "rk4"] if layer.discretizer == "zoh" else ["rk1"]) + (["fir"] if stored else [])
    )


def auto_names(layer: ir.LMU, target: Union[str, tuple, None] = None, quantized: bool = False) -> list:
    """The realizations ``auto`` measures for ``layer`` folded for ``target`` (a name, or several that
    must all run it; None: the float reference), ``quantized`` or not: the implicit Pade step only where
    the target runs it (and, quantized, never: :data:`PADE_IN_INTEGER_AUTO`), Runge-Kutta not for
    a target that declares ``RK_QUANTIZED = False`` quantized."""
    names = _auto_names(layer)
    if pade_refusal(target, quantized) or (quantized and target is not None and not PADE_IN_INTEGER_AUTO):
        names = [n for n in names if n not in PADE_NAMES]
    if quantized and any(not _declares(t, "RK_QUANTIZED", True) for t in _names(target)):
        names = [n for n in names if not n.startswith("rk")] or names
    return names


def _choose(layer, cands, budget, requested, prefer: str = "ops") -> Candidate:
    good = [c for c in cands if c.ok]
    if not good:
        lines = "; ".join(c.describe() for c in cands)
        hint = (
            "raise the error budget (--error-budget), "
            if requested == "auto"
            else "try --realization auto, raise the error budget (--error-budget), "
        )
        if isinstance(layer.memory, ir.ImpulseResponse) and layer.memory.kernel is not None:
            hint += "or use the 'fir' realization, which reproduces the stored kernel exactly"
        else:
            hint += "or allow more substeps"
        raise FoldError(
            f"layer {layer.name!r}: no {requested!r} realization is within the error budget "
            f"{budget:g} ({lines}); {hint}"
        )
    return min(good, key=lambda c: rank(c, prefer, layer.order, layer.memory_d))


def fold_layer(
    layer: ir.LMU,
    realization: str = "auto",
    error_budget: float = DEFAULT_ERROR_BUDGET,
    *,
    target: Union[str, tuple, None] = None,
    quantized: bool = False,
    prefer: str = "ops",
    tradeoffs: Optional[dict] = None,
    **kw,
) -> ir.LMU:
    """One LMU layer in recurrent form, with the measurement that proves its realization.

    ``prefer`` (:data:`PREFERENCES`) is what ``auto`` minimises; with a ``tradeoffs`` dict the
    choice's trade-off against the fewest-operations candidate is written into it.

    With a ``target``, ``auto`` considers only the realizations that target runs
    (see :func:`pade_refusal`), and asking for one it does not run is refused.
    """
    if not layer.is_parallel:
        return layer
    if realization not in REALIZATIONS:
        raise FoldError(
            f"unknown realization {realization!r} for layer {layer.name!r}; known: {', '.join(REALIZATIONS)}"
        )
    refusal = pade_refusal(target, quantized)
    if realization in PADE_NAMES and refusal:
        raise FoldError(f"layer {layer.name!r}: {refusal}")
    rk = rk_refusal(target, quantized) if realization.startswith("rk") else None
    if rk:
        raise QuantizationError(f"layer {layer.name!r}: {rk}")
    names = auto_names(layer, target, quantized) if realization == "auto" else [realization]
    cands = candidates(layer, error_budget, names, prefer=prefer, **kw)
    chosen = _choose(layer, cands, error_budget, realization, prefer)
    if tradeoffs is not None and realization == "auto":
        tradeoffs[layer.name] = tradeoff(chosen, cands, prefer, layer.order, layer.memory_d)
        if kw.get("progress"):
            kw["progress"](f"  {layer.name}: {tradeoffs[layer.name]}")
    return replace(layer, memory=chosen.memory, measurement=chosen.measurement)


def fold(
    graph: ir.Graph,
    realization="auto",
    error_budget: float = DEFAULT_ERROR_BUDGET,
    *,
    substeps: Optional[int] = None,
    max_substeps: int = MAX_SUBSTEPS,
    progress: Optional[Callable[[str], None]] = None,
    target: Union[str, tuple, None] = None,
    quantized: bool = False,
    prefer: str = "ops",
) -> ir.Graph:
    """Return ``graph`` with every parallel-form LMU memory replaced by a measured realization.

    Parameters
    ----------
    realization : str or dict
        One of :data:`REALIZATIONS` for every layer, or ``{layer_name: name}``
        (layers not named get ``auto``).
    error_budget : float
        Largest accepted ``max|H - H_ref| / max|H_ref|`` of the memory's impulse response.
    substeps : int, optional
        Fix the RK / Pade substep count instead of searching for the smallest that meets the budget.
    target, quantized : optional
        The target the graph is folded for (and whether it will be quantized): realizations the
        target cannot run are left out of ``auto`` and refused when asked for.
    """
    if not isinstance(graph, ir.Graph):
        raise TypeError(f"fold() expects an lmu_edge.ir.Graph, got {type(graph).__name__}")
    if not (error_budget > 0):
        raise FoldError(f"error_budget must be positive, got {error_budget!r}")
    per_layer = dict(realization) if isinstance(realization, dict) else {}
    unknown = set(per_layer) - {lay.name for lay in graph.lmu_layers}
    if unknown:
        raise FoldError(
            f"realization given for unknown LMU layer(s) {', '.join(sorted(unknown))}; "
            f"LMU layers: {', '.join(lay.name for lay in graph.lmu_layers) or 'none'}"
        )
    default = "auto" if isinstance(realization, dict) else realization
    refusal = pade_refusal(target, quantized)
    done = [lay for lay in graph.lmu_layers if isinstance(lay.memory, ir.Pade)]
    if refusal and done:  # folded before, for another target
        raise FoldError(f"layer {done[0].name!r}: {refusal}")
    layers, changed = [], False
    tradeoffs: dict = {}
    for layer in graph.layers:
        if isinstance(layer, ir.LMU) and layer.is_parallel:
            layer = fold_layer(
                layer,
                per_layer.get(layer.name, default),
                error_budget,
                substeps=substeps,
                max_substeps=max_substeps,
                progress=progress,
                target=target,
                quantized=quantized,
                prefer=prefer,
                tradeoffs=tradeoffs,
            )
            changed = True
        layers.append(layer)
    if not changed:
        return graph
    meta = dict(graph.metadata)
    meta["fold"] = {
        "realization": realization if isinstance(realization, str) else dict(realization),
        "error_budget": float(error_budget),
        "prefer": prefer,
        "tradeoffs": tradeoffs,
    }
    return graph.replace(layers=tuple(layers), metadata=meta)
