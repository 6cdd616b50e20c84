"""Simulations of many sequences split over threads: the sequences are independent, numpy and BLAS release
the GIL for the large array operations a step of a big model is made of, so two threads on two cores run the
integer reference of the psMNIST-sized model 2.3x as fast as one (issue 54: 100 sequences of 784 steps,
6.3 s against 2.8 s).

The sequences are cut into contiguous blocks by the size of the work alone (:func:`blocks_for`), never by
the number of threads, and each block runs from a fresh state; the blocks are put back in order. So a
result does not depend on the thread count: the integer reference gives the same integers as one unsplit
run, and the float reference the same floats on every machine with the same BLAS (a block's products may
round otherwise than the whole batch's: BLAS sums by blocks of the matrix it is given).

``LMU_EDGE_THREADS`` sets the most threads (``1`` runs the blocks one after the other); by default as many
as the process may use CPUs for, at most :data:`MAX_THREADS`. Small work stays in one block: where a
block's share of one step is a few thousand operations, Python's own per-step overhead (which holds the
GIL) is most of the time and a second thread only contends for it."""

from __future__ import annotations

import dataclasses
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import numpy as np
from threadpoolctl import threadpool_limits

from .errors import LmuEdgeError

#: the most threads by default (``LMU_EDGE_THREADS`` may set more)
MAX_THREADS = 4
#: the most blocks a run is cut into (so at most this many threads work on one run)
MAX_BLOCKS = 4
#: a run is cut only into blocks whose share of one step is at least this many multiply-adds
MIN_STEP_OPS = 200_000
#: ... and the whole run at least this many (below it, a run takes well under a second anyway)
MIN_RUN_OPS = 2e9


def threads_available() -> int:
    """The threads a simulation may use: ``LMU_EDGE_THREADS`` if set (a positive integer), else the CPUs this
    process may run on, at most :data:`MAX_THREADS`."""
    env = os.environ.get("LMU_EDGE_THREADS", "").strip()
    if env:
        try:
            n = int(env)
        except ValueError:
            n = 0
        if n < 1:
            raise LmuEdgeError(
                f"LMU_EDGE_THREADS={env!r} is not a positive integer: unset it, "
                "or give 1 to run every simulation in one thread"
            )
        return n
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(MAX_THREADS, cpus))


def numbers_in(v) -> int:
    """How many numbers the arrays of ``v`` hold (a dataclass's fields, tuples, arrays, recursively): for a
    quantized graph's layers, about the multiply-adds of one step (every weight is read once a step)."""
    if isinstance(v, np.ndarray):
        return int(v.size)
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return sum(numbers_in(getattr(v, f.name)) for f in dataclasses.fields(v))
    return sum(numbers_in(e) for e in v) if isinstance(v, (tuple, list)) else 0


def blocks_for(n_seq: int, n_steps: int, step_ops: float) -> int:
    """How many blocks to cut ``n_seq`` sequences of ``n_steps`` steps into, where one step of one sequence
    costs about ``step_ops`` multiply-adds: 1 for small work (see the module's text); at most
    :data:`MAX_BLOCKS`. Depends on the work alone, not on the machine."""
    if n_seq < 2 or n_seq * n_steps * step_ops < MIN_RUN_OPS:
        return 1
    n = min(MAX_BLOCKS, n_seq)
    while n > 1 and n_seq / n * step_ops < MIN_STEP_OPS:
        n -= 1
    return n


def map_rows(run: Callable[[np.ndarray], Any], x: np.ndarray, blocks: int) -> list:
    """``[run(block) for block in blocks of x]``: ``x`` of shape ``(N, ...)`` cut into ``blocks`` contiguous
    blocks of sequences, run on up to :func:`threads_available` threads, the results in the blocks' order.
    An exception in a block is raised here."""
    cuts = [b for b in np.array_split(np.arange(x.shape[0]), max(1, blocks)) if b.size] if x.shape[0] else []
    parts = [x[b[0] : b[-1] + 1] for b in cuts] or [x]
    threads = min(len(parts), threads_available())
    if threads <= 1:
        return [run(p) for p in parts]
    # one BLAS thread per block while the blocks run: BLAS's own threads beside them oversubscribed the cores
    # and spin-waited (the psMNIST-sized conversion took 53-69 s with them, 52-54 s without)
    with (
        threadpool_limits(limits=1, user_api="blas"),
        ThreadPoolExecutor(threads, thread_name_prefix="lmu-edge-sim") as pool,
    ):
        return list(pool.map(run, parts))


def by_rows(run: Callable[[np.ndarray], np.ndarray], x: np.ndarray, blocks: int) -> np.ndarray:
    """``run(x)`` computed as :func:`map_rows` of ``blocks`` blocks, concatenated along the first axis (``run``
    must treat sequences independently and start each call from a fresh state)."""
    if blocks <= 1 or x.shape[0] < 2:
        return run(x)
    return np.concatenate(map_rows(run, x, blocks), axis=0)
