"""How long the realization choice takes on a paper-scale model: inspect and convert, timed.

    python bench/choice.py                  # order 468, theta 784 (the psMNIST LMU)
    python bench/choice.py --order 512 --theta 1024
    python bench/choice.py --table          # orders 64, 128, 256, 468, 512 (theta 4q; 784 for 468)
    python bench/choice.py --blas-threads 1 # single-threaded BLAS in the timed commands

Builds a seeded IR model (input -> Dense -> LMU(order, theta) -> Dense), then
times, each in a fresh process, ``lmu-edge inspect``, ``inspect --candidates``
(which measures every realization auto considers) and ``convert --target c
--quantize int8`` (fold, quantize, emit, host build, verify; no QEMU). Prints
wall and CPU seconds with the date: on a shared machine wall time includes
waiting for a core, CPU time does not. On a loaded 2-core machine a multithreaded
BLAS spins while it waits for its second thread (CPU time then grows too);
``--blas-threads 1`` sets OPENBLAS_NUM_THREADS / OMP_NUM_THREADS / MKL_NUM_THREADS
for the timed commands, and the header says what was used.
"""

import argparse
import datetime
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from graphs import chain  # noqa: E402  (tests/ joins sys.path first)

from lmu_edge import irfile  # noqa: E402  (grouped after the sys.path line on purpose)

ENV = dict(os.environ)


def timed(args):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "lmu_edge.cli", *args], capture_output=True, text=True, env=ENV)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if r.returncode:
        raise SystemExit(f"{' '.join(args[:2])} failed:\n{r.stderr[-2000:]}")
    return wall, cpu, r.stdout


def one(tmp, order, theta):
    """``[(command, wall, cpu)]`` and the realization convert chose, for one model."""
    g = chain(np.random.default_rng(0), n_in=1, q=order, theta=theta, units=16)
    model = irfile.save(g, tmp / f"model{order}.lmu.npz")
    np.save(tmp / "cal.npy", np.random.default_rng(1).standard_normal((4, 200, 1)).astype(np.float32))
    rows, chosen = [], "?"
    for name, cmd in [
        ("inspect", ["inspect", str(model)]),
        ("inspect --candidates", ["inspect", str(model), "--candidates"]),
        (
            "convert -t c --quantize int8",
            [
                "convert",
                str(model),
                "-t",
                "c",
                "-o",
                str(tmp / f"c{order}"),
                "--quantize",
                "int8",
                "--calibration",
                str(tmp / "cal.npy"),
                "-q",
            ],
        ),
    ]:
        wall, cpu, out = timed(cmd)
        rows.append((name, wall, cpu))
        if name.startswith("convert"):
            chosen = next(
                (
                    ln.split(":", 1)[1].split(",")[0].strip()
                    for ln in out.splitlines()
                    if ln.startswith("  lmu:") and "impulse-response" in ln
                ),
                "?",
            )
    return rows, chosen


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--order", type=int, default=468)
    ap.add_argument("--theta", type=float, default=784.0)
    ap.add_argument("--table", action="store_true", help="orders 64, 128, 256, 468 and 512 in one table")
    ap.add_argument("--blas-threads", type=int, default=None, help="BLAS threads of the timed commands")
    args = ap.parse_args()
    if args.blas_threads is not None:
        for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            ENV[k] = str(args.blas_threads)
    blas = ENV.get("OPENBLAS_NUM_THREADS", "default")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        head = (
            f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores, "
            f"BLAS threads {blas}, load average {os.getloadavg()[0]:.1f}"
        )
        if not args.table:
            print(f"{head}; order {args.order}, theta {args.theta:g}")
            print(f"{'command':<34} {'wall s':>7} {'cpu s':>7}")
            rows, chosen = one(tmp, args.order, args.theta)
            for name, wall, cpu in rows:
                print(f"{name:<34} {wall:7.1f} {cpu:7.1f}", flush=True)
            print(f"convert chose: {chosen}")
            return
        print(head)
        print(f"{'order':>5} {'theta':>6} | {'inspect wall/cpu s':>18} | {'convert int8 C wall/cpu s':>25} | chosen")
        for order, theta in ((64, 256.0), (128, 512.0), (256, 1024.0), (468, 784.0), (512, 2048.0)):
            rows, chosen = one(tmp, order, theta)
            (_, iw, ic), _, (_, cw, cc) = rows
            print(f"{order:>5} {theta:>6g} | {iw:8.1f} / {ic:7.1f} | {cw:14.1f} / {cc:8.1f} | {chosen}", flush=True)


if __name__ == "__main__":
    main()
