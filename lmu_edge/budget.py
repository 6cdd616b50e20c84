"""A work budget for every input, checked before the work starts.

The size limits (:mod:`lmu_edge.limits`) bound each number a file declares; inside them a small file can
still ask for days of work or terabytes of memory (an LMU of order 1024 with theta 102400 measured over
5 theta steps; a last-step model declaring a million steps). Before a fold measures realizations and
before a simulation runs, the work is estimated from the shapes alone (operations and peak memory,
upper-bound formulas written next to each estimate) and refused in one line, naming the estimate and the
option that raises the budget, when it is over :data:`MAX_WORK_OPS` / :data:`MAX_WORK_BYTES` times the
scale in force (``--max-work`` on the command line; :func:`allow` in Python). docs/security.md lists the
estimates and the peak memory measured for the shipped models.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from dataclasses import dataclass
from typing import Callable, Iterator, Optional

from . import ir
from .errors import LimitError

#: operations (multiply-adds count two) one input may ask for at the default budget: about 20 minutes of
#: numpy on one core; the psMNIST conversion with 200 calibration sequences estimates 1.6e11
MAX_WORK_OPS = 2e12
#: memory one input may plan at the default budget
MAX_WORK_BYTES = 4 << 30
#: the interpreter, numpy and lmu-edge themselves, counted in every memory estimate (measured: 120-150 MB)
BASE_BYTES = 256 << 20
#: operations per second a progress line assumes (numpy, one core of a laptop, pessimistic)
OPS_PER_SECOND = 2e9
#: work estimated to take longer than this many seconds prints a progress line first
PROGRESS_SECONDS = 5.0

_SCALE: contextvars.ContextVar[tuple] = contextvars.ContextVar("lmu_edge_work_scale", default=(1.0, 1.0))


@contextlib.contextmanager
def allow(scale: float, memory: Optional[float] = None) -> Iterator[None]:
    """Within this block the work budget is ``scale`` times the default (``--max-work SCALE``): its
    operations, and its memory too unless ``memory`` gives that scale on its own."""
    s, m = float(scale), float(scale if memory is None else memory)
    if not all(math.isfinite(v) and v > 0 for v in (s, m)):
        raise LimitError(f"--max-work must be a positive finite number, got {scale!r}")
    token = _SCALE.set((s, m))
    try:
        yield
    finally:
        _SCALE.reset(token)


def scale() -> tuple:
    """The budget scales in force, ``(operations, memory)``; ``(1, 1)`` by default."""
    return _SCALE.get()


@dataclass(frozen=True)
class Estimate:
    """Upper-bound estimate of one piece of work: ``ops`` operations and ``bytes`` of peak memory."""

    what: str
    ops: float
    bytes: float

    @property
    def seconds(self) -> float:
        """The estimate's time at :data:`OPS_PER_SECOND` (for the progress line, not a promise)."""
        return self.ops / OPS_PER_SECOND


def check(est: Estimate, progress: Optional[Callable[[str], None]] = None) -> Estimate:
    """Refuse ``est`` in one line when over the budget; with ``progress``, say what is coming when it is
    long."""
    s, m = scale()
    over = []
    if est.ops > MAX_WORK_OPS * s:
        over.append(f"{est.ops:.2g} operations (budget {MAX_WORK_OPS * s:.2g})")
    if est.bytes > MAX_WORK_BYTES * m:
        over.append(f"{est.bytes / 2**30:.3g} GiB of memory (budget {MAX_WORK_BYTES * m / 2**30:.3g} GiB)")
    if over:
        need = max(est.ops / MAX_WORK_OPS, est.bytes / MAX_WORK_BYTES)
        raise LimitError(
            f"{est.what} is estimated at {' and '.join(over)}; refused before starting; to allow it run "
            f"'lmu-edge --max-work {_round_up(need)} COMMAND ...' (Python: with "
            f"lmu_edge.budget.allow({_round_up(need)})) (docs/security.md)"
        )
    if progress is not None and est.seconds > PROGRESS_SECONDS:
        progress(
            f"{est.what}: about {est.ops:.2g} operations and {est.bytes / 2**20:.0f} MiB "
            f"(up to {est.seconds / 60:.1f} min at {OPS_PER_SECOND:.0e} operations/s)"
        )
    return est


def _round_up(x: float) -> str:
    e = 10 ** math.floor(math.log10(x)) if x > 0 else 1
    return f"{math.ceil(x / e) * e:g}"


# --- folding ------------------------------------------------------------------------------------


def measure_length(layer: ir.LMU, horizon: Optional[int] = None) -> int:
    """Steps a fold measures ``layer`` over (:class:`lmu_edge.impulse.Reference`)."""
    base = max(int(math.ceil(5 * layer.theta)), 32)
    mem = layer.memory
    length = base
    if isinstance(mem, ir.ImpulseResponse) and mem.kernel is not None:
        length = max(base, mem.kernel.shape[1] + (base if mem.provenance == "truncated" else 0))
    return max(length, int(horizon or 0))


def fold_estimate(
    layer: ir.LMU, n_names: int, searched: int, horizon: Optional[int] = None, stride: int = 1
) -> Estimate:
    """Measuring ``n_names`` realizations of ``layer``, ``searched`` of them by a substep search (at most
    2 log2(MAX_SUBSTEPS) + 1 measurements each): every measurement builds its map (at most 2 q^3 per
    squaring, log2(MAX_SUBSTEPS) squarings) and compares its impulse response over the measured steps
    (2 q^2 per step, BLAS-3 in blocks); one eigenvalue problem per layer (25 q^3)."""
    from .limits import MAX_SUBSTEPS

    q = layer.order
    L = measure_length(layer, horizon)
    steps = L if stride <= 1 else min(L, 1024) + L // stride + 8 * stride
    per_search = 2 * math.ceil(math.log2(MAX_SUBSTEPS)) + 1
    n = (n_names - searched) + searched * per_search
    squarings = math.ceil(math.log2(MAX_SUBSTEPS)) + 1
    ops = n * (2.0 * q * q * steps + 2.0 * q**3 * squarings) + 25.0 * q**3
    from .limits import CACHE_BYTES

    cache = min(8.0 * q * L, CACHE_BYTES)
    nbytes = BASE_BYTES + 8.0 * (6 * q * q + 4 * q * 512) + 2 * cache
    return Estimate(f"layer {layer.name!r}: measuring {n_names} realization(s) over {L} steps", ops, nbytes)


# --- simulating ---------------------------------------------------------------------------------


def lmu_step_ops(layer: ir.LMU, n_in: int, units: int) -> float:
    """Floating-point operations (two per multiply-add) of one step of one sequence of an LMU layer."""
    q, d = layer.order, layer.memory_d
    mem = layer.memory
    if isinstance(mem, ir.RungeKutta) and not (mem.substeps > 64 and 7 * mem.rk_order * mem.substeps > 2 * q):
        m = 7.0 * mem.rk_order * mem.substeps * q * d
    elif isinstance(mem, ir.FIR):
        m = 2.0 * mem.kernel.shape[1] * q * d
    else:
        m = 2.0 * q * q * d
    z = d * q + (n_in if layer.input_to_hidden else 0)
    h = 0.0 if layer.hidden is None else 2.0 * z * units
    h += 2.0 * units * units if isinstance(layer.hidden, ir.HiddenSimpleRNN) else 0.0
    return m + 2.0 * n_in * d + (2.0 * units * d + 2.0 * q * d * d if layer.is_rnn_path else 0) + h


def simulate_estimate(graph: ir.Graph, n: int, t: int, what: str = "simulating") -> Estimate:
    """Running ``graph`` on ``n`` sequences of ``t`` steps in the float reference: per step and layer its
    multiply-adds; memory: every layer's whole output sequence twice (the list of steps and the stacked
    array), a parallel memory's ``(N, T, d, q)`` and its FFT buffers."""
    ops, nbytes = 0.0, BASE_BYTES + 8.0 * n * t * graph.input_features
    peak = 0.0
    for layer, n_in, n_out, _ in graph.shapes():
        out = 2 * 8.0 * n * t * n_out
        if isinstance(layer, ir.LMU):
            q, d = layer.order, layer.memory_d
            if layer.is_parallel:
                fft = 1 << max(1, math.ceil(math.log2(max(2 * t - 1, 1))))
                ops += n * (5.0 * fft * math.log2(fft) * (d * q + d + q)) + lmu_step_ops(layer, n_in, n_out) * n * t
                out += 8.0 * n * t * d * q * 2 + 16.0 * (fft // 2 + 1) * d * q * 3
            else:
                ops += lmu_step_ops(layer, n_in, n_out) * n * t
                out += 8.0 * n * d * q * 4
        elif isinstance(layer, ir.Dense):
            ops += 2.0 * n_in * n_out * n * t
        elif isinstance(layer, ir.BandConv):
            ops += 2.0 * n_in * n_out * layer.kernel_t * n * t
        else:
            ops += 4.0 * n_in * n * t
        peak = max(peak, out)
    return Estimate(f"{what} model {graph.name!r} on {n} sequence(s) of {t} steps", ops, nbytes + peak)


#: the seeded probe a conversion without calibration data verifies on: this many sequences of
#: :func:`probe_length` steps
PROBE_SEQUENCES = 4
#: the probe's longest sequence, whatever length the model declares
PROBE_MAX_STEPS = 4000


def probe_length(graph: ir.Graph) -> int:
    """Steps of the seeded probe: 10 theta of the longest memory (a memory's window is theta steps, so the
    probe runs through it whole several times), at least 16 and at most :data:`PROBE_MAX_STEPS`, and never
    more than the declared length. Not the declared length itself: a file declaring 1,000,000 steps is
    verified on 4000 (the report says so, ``verification.probe``)."""
    thetas = [layer.theta for layer in graph.lmu_layers] or [10.0]
    t = int(min(max(10 * max(thetas), 16), PROBE_MAX_STEPS))
    return min(t, int(graph.seq_len)) if graph.seq_len else t


def probe_note(graph: ir.Graph) -> str:
    """What :func:`probe_length` chose, and why, for the report."""
    t = probe_length(graph)
    why = f"10 theta of the longest memory, at least 16 and at most {PROBE_MAX_STEPS} steps"
    if graph.seq_len and t < graph.seq_len:
        return f"{t} steps ({why}), shorter than the declared {graph.seq_len}"
    return f"{t} steps ({why}{', capped at the declared length' if graph.seq_len == t else ''})"


def verify_shape(graph: ir.Graph, cal=None) -> tuple[int, int]:
    """``(N, T)`` a conversion verifies ``graph`` on: the calibration data (the sequences of :func:`verify_rows`),
    else the seeded probe (:func:`lmu_edge.conversion._probe_input`: :data:`PROBE_SEQUENCES` of
    :func:`probe_length` steps), without making it."""
    if cal is not None:
        rows = verify_rows(int(cal.shape[0]), int(cal.shape[1]))
        return int(cal.shape[0] if rows is None else len(rows)), int(cal.shape[1])
    return PROBE_SEQUENCES, probe_length(graph)


#: a conversion verifies its artifact on about this many calibration steps at most, whole sequences evenly
#: spaced (:func:`verify_rows`): the psMNIST-sized model's 200 x 784 calibration steps took 45 s of host C,
#: 11 s of integer reference and 10 s of float reference to verify (issue 54), and its choice of widths was
#: already scored on every sequence by the quantizer
VERIFY_STEPS = 16384


def spread_rows(n: int, steps: int, budget_steps: Optional[int]):
    """The fewest of ``n`` sequences of ``steps`` steps, evenly spaced from the first to the last, that hold at
    least ``budget_steps`` steps (a sorted int array); None where that is every one, or ``budget_steps`` is
    None."""
    import numpy as np

    k = n if budget_steps is None else max(1, -(-int(budget_steps) // max(1, int(steps))))
    return None if k >= n else np.unique(np.linspace(0, n - 1, k).round().astype(np.int64))


def verify_rows(n: int, steps: int):
    """The calibration sequences a conversion verifies on (:data:`VERIFY_STEPS`); None: every one."""
    return spread_rows(n, steps, VERIFY_STEPS)
