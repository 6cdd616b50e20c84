"""Independent tasks run in this process or on Ray: the one executor of ``lmu-edge sweep`` and of the
project's long runs (generated models, the layer-option matrix, the mutation list).

:func:`run_tasks` calls a module-level function once per argument tuple and returns one
:class:`TaskResult` per task, in the order given:

* ``workers=0``: in this process, one task after another (tests, small grids; no Ray needed);
* ``workers=N``: on a local Ray instance started for the call with ``N`` worker processes;
* ``address="HOST:PORT"`` (or ``"auto"``): on an existing Ray cluster (``ray start --head`` on one
  machine, ``ray start --address=HOST:PORT`` on the others), which keeps running afterwards.

A task whose worker dies (killed, out of memory, a lost node) is submitted again, up to ``retries``
times, and its result records every attempt: a task is never silently lost. An exception raised *by the
function* is the function's answer: it is not retried, and comes back as the result's ``error``.
"""

from __future__ import annotations

import os
import socket
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

from .errors import LmuEdgeError

#: how many times a task whose worker died is submitted again
RETRIES = 2


class ExecutorError(LmuEdgeError, RuntimeError):
    """Ray could not be started or reached."""


@dataclass
class TaskResult:
    """What one task gave: ``value`` (None when it failed), ``error`` (one line, or None), the
    ``attempts`` it took (1 unless a worker died under it), the ``worker`` (host:pid) that finished it,
    its wall ``seconds`` and, for a retried task, why each earlier attempt ended (``lost``)."""

    value: Any = None
    error: Optional[str] = None
    attempts: int = 1
    worker: str = ""
    seconds: float = 0.0
    lost: list = field(default_factory=list)


def _call(fn: Callable, args: tuple) -> tuple:
    """Run ``fn(*args)`` where a worker runs it: ``(value, error, worker, seconds)``."""
    t0 = time.perf_counter()
    worker = f"{socket.gethostname()}:{os.getpid()}"
    try:
        return fn(*args), None, worker, time.perf_counter() - t0
    except Exception as e:  # the function's own failure is its answer, in one line
        last = traceback.extract_tb(e.__traceback__)[-1:] or None
        where = f" at {os.path.basename(last[0].filename)}:{last[0].lineno}" if last else ""
        msg = " ".join(str(e).split())[:300]
        return None, f"{type(e).__name__}: {msg}{where}", worker, time.perf_counter() - t0


Progress = Callable[[int, int, float, dict], None]


def run_tasks(
    fn: Callable,
    tasks: Sequence[tuple],
    *,
    workers: int = 0,
    address: Optional[str] = None,
    retries: int = RETRIES,
    progress: Optional[Progress] = None,
    on_result: Optional[Callable[[int, TaskResult], None]] = None,
) -> list:
    """Run ``fn(*args)`` for every ``args`` in ``tasks``; one :class:`TaskResult` per task, in order.

    ``progress(done, total, seconds_left, per_worker)`` is called after every finished task
    (``seconds_left`` is an estimate, ``nan`` before the first task ends; ``per_worker`` counts the
    finished tasks of each worker). ``on_result(index, result)`` is called as each task finishes (in the
    order they finish), so a long run can record its results as it goes."""
    tasks = [tuple(t) for t in tasks]
    if workers < 0:
        raise ExecutorError(f"workers must be 0 (in this process) or more, not {workers}")
    if workers == 0 and address is None:
        return _run_here(fn, tasks, progress, on_result)
    return _run_ray(fn, tasks, workers, address, retries, progress, on_result)


def _eta(done: int, total: int, elapsed: float) -> float:
    if done == 0:
        return float("nan")
    return elapsed / done * (total - done)


def _run_here(fn, tasks, progress, on_result=None) -> list:
    out: list = []
    counts: dict = {}
    t0 = time.perf_counter()
    for i, args in enumerate(tasks):
        value, error, worker, seconds = _call(fn, args)
        out.append(TaskResult(value, error, 1, worker, seconds))
        if on_result:
            on_result(i, out[-1])
        counts[worker] = counts.get(worker, 0) + 1
        if progress:
            progress(i + 1, len(tasks), _eta(i + 1, len(tasks), time.perf_counter() - t0), dict(counts))
    return out


def ray_module():
    """Ray, or a one-line error saying how to get it."""
    from .registry import require

    return require("ray", "sweep", "running tasks on Ray (or use --workers 0 to run them in this process)")


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """Refuse an address nothing answers on in one line (``ray.init`` would retry it for minutes)."""
    hostport = address.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise ExecutorError(f"--address {address!r}: expected HOST:PORT of a Ray head (ray start --head), or auto")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as e:
        raise ExecutorError(
            f"--address {address}: nothing answers there ({e.strerror or type(e).__name__}); start the head with "
            f"`ray start --head --port {port}` or check the address"
        ) from None


def _start(ray, workers: int, address: Optional[str]) -> bool:
    """Connect to ``address`` or start a local instance with ``workers`` CPUs; True when started here."""
    if ray.is_initialized():
        return False
    if address and address != "auto":
        _check_reachable(address)
    kw: dict = dict(include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        if address:
            ray.init(address=address, **kw)
        else:
            ray.init(num_cpus=workers, **kw)
    except Exception as e:  # ray raises ConnectionError, RuntimeError, ValueError, ...
        where = f"the Ray cluster at {address!r}" if address else "a local Ray instance"
        msg = " ".join(str(e).split())[:200]
        raise ExecutorError(
            f"could not start or reach {where} ({type(e).__name__}: {msg}); check `ray status`, or run "
            f"in this process with --workers 0"
        ) from None
    return True


def _run_ray(fn, tasks, workers, address, retries, progress, on_result=None) -> list:
    ray = ray_module()
    started = _start(ray, workers, address)
    try:
        remote = ray.remote(num_cpus=1, max_retries=0)(_call)
        fn_ref = ray.put(fn)
        results: list = [None] * len(tasks)
        attempts = [0] * len(tasks)
        lost: list = [[] for _ in tasks]
        pending: dict = {}

        def submit(i):
            attempts[i] += 1
            pending[remote.remote(fn_ref, tasks[i])] = i

        for i in range(len(tasks)):
            submit(i)
        counts: dict = {}
        done, t0 = 0, time.perf_counter()
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            i = pending.pop(ready[0])
            try:
                value, error, worker, seconds = ray.get(ready[0])
            except ray.exceptions.RayError as e:  # the worker died under the task, or the node did
                why = f"{type(e).__name__}: {' '.join(str(e).split())[:160]}"
                lost[i].append(why)
                if attempts[i] <= retries:
                    submit(i)
                    continue
                value, error, worker, seconds = None, f"lost {attempts[i]} times; last: {why}", "", 0.0
            results[i] = TaskResult(value, error, attempts[i], worker, seconds, lost[i])
            if on_result:
                on_result(i, results[i])
            counts[worker] = counts.get(worker, 0) + 1
            done += 1
            if progress:
                progress(done, len(tasks), _eta(done, len(tasks), time.perf_counter() - t0), dict(counts))
        return results
    finally:
        if started:
            ray.shutdown()
