"""How long the realization choice takes on a paper-scale model: inspect and convert, timed.

    python bench/choice.py                  # order 468, theta 784 (the psMNIST LMU)
    python bench/choice.py --order 512 --theta 1024

Builds a seeded IR model (input -> Dense -> LMU(order, theta) -> Dense), then
times, each in a fresh process, ``lmu-edge inspect``, ``inspect --candidates``
(which measures every realization auto considers) and ``convert --target c
--quantize int8`` (fold, quantize, emit, host build, verify; no QEMU). Prints
wall and CPU seconds with the date: on a shared machine wall time includes
waiting for a core, CPU time does not.
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
from graphs import chain  # noqa: E402

from lmu_edge import irfile  # noqa: E402


def timed(args):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "lmu_edge.cli", *args], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if r.returncode:
        raise SystemExit(f"{' '.join(args[:2])} failed:\n{r.stderr[-2000:]}")
    return wall, cpu, r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--order", type=int, default=468)
    ap.add_argument("--theta", type=float, default=784.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        g = chain(np.random.default_rng(0), n_in=1, q=args.order, theta=args.theta, units=16)
        model = irfile.save(g, tmp / "model.lmu.npz")
        np.save(tmp / "cal.npy", np.random.default_rng(1).standard_normal((4, 200, 1)).astype(np.float32))
        print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores; "
              f"order {args.order}, theta {args.theta:g}")
        print(f"{'command':<34} {'wall s':>7} {'cpu s':>7}")
        for name, cmd in [("inspect", ["inspect", str(model)]),
                          ("inspect --candidates", ["inspect", str(model), "--candidates"]),
                          ("convert -t c --quantize int8", ["convert", str(model), "-t", "c", "-o", str(tmp / "c"),
                                                            "--quantize", "int8", "--calibration",
                                                            str(tmp / "cal.npy"), "-q"])]:
            wall, cpu, out = timed(cmd)
            print(f"{name:<34} {wall:7.1f} {cpu:7.1f}", flush=True)


if __name__ == "__main__":
    main()
