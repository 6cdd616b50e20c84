"""How long the default conversion takes with a real calibration set: the psMNIST-sized model (issue 54).

    python bench/convert_time.py [--sequences 200] [--steps 784] [--search-steps N | --full-search]

Converts the psMNIST-sized graph of bench/kernels.py (order 468, theta 784, 346 tanh hidden units, a Dense(10)
head; random weights) to the C target's default ``--quantize int8`` with a calibration set of 200 sequences
of 784 steps (uniform in [-1, 1], seeded), as ``lmu-edge convert`` would, and prints the wall and CPU time
of the whole conversion and of its phases, read from the conversion's own progress lines (until the
quantizer's first line: the fold, the calibration ranges and the float reference; the widening search; after
it: the code, its builds, the verification and the report), with the QEMU instruction counts (the
``cortex-m4`` / ``cortex-m0`` runs of the C target's check) stated on their own. ``--full-search`` scores
every candidate on every calibration sequence (``-O search_steps=null``), the conversion before the
subsampled search, for the comparison. Prints what the quantizer chose, so that two runs can be compared.
Prints, asserts nothing.
"""

import argparse
import datetime
import json
import os
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "tests")]

import lmu_edge  # noqa: E402 (after the sys.path lines: kernels and graphs live in bench/ and tests/)
from lmu_edge.targets import c as c_target  # noqa: E402 (the same)


class _Clock:
    """Wall seconds at each progress line, and the seconds spent in QEMU runs of the C target."""

    def __init__(self):
        self.t0 = time.perf_counter()
        self.lines: list = []
        self.qemu = 0.0
        self._run_native = c_target.run_native

    def progress(self, line: str) -> None:
        self.lines.append((time.perf_counter() - self.t0, line))

    def timed_run_native(self, art, x, runtime, *a, **kw):
        t = time.perf_counter()
        try:
            return self._run_native(art, x, runtime, *a, **kw)
        finally:
            if runtime != "host":
                self.qemu += time.perf_counter() - t

    def first(self, prefix: str, default: float) -> float:
        return next((t for t, line in self.lines if line.startswith(prefix)), default)

    def last(self, prefix: str, default: float) -> float:
        return max((t for t, line in self.lines if line.startswith(prefix)), default=default)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sequences", type=int, default=200, help="calibration sequences (default 200)")
    ap.add_argument("--steps", type=int, default=784, help="steps per sequence (default 784, psMNIST's)")
    g2 = ap.add_mutually_exclusive_group()
    g2.add_argument("--search-steps", type=int, help="-O search_steps (default: the C target's)")
    g2.add_argument("--full-search", action="store_true", help="-O search_steps=null: every sequence")
    a = ap.parse_args(argv)

    import kernels

    graph, _, _ = kernels._model("psmnist", np.random.default_rng(0), "auto")
    cal = np.random.default_rng(1).uniform(-1, 1, (a.sequences, a.steps, 1))
    opts = {}
    if a.full_search:
        opts["search_steps"] = None
    elif a.search_steps is not None:
        opts["search_steps"] = a.search_steps
    print(
        f"lmu-edge bench/convert_time.py, {datetime.date.today().isoformat()}, {os.cpu_count()} cores; "
        f"psMNIST-sized graph (order 468, theta 784, 346 hidden), C --quantize int8, calibration "
        f"{a.sequences} x {a.steps} steps, search_steps {opts.get('search_steps', c_target.OPTIONS['search_steps'])}"
    )
    clock = _Clock()
    c_target.run_native = clock.timed_run_native
    out = Path(tempfile.mkdtemp(prefix="lmu_convert_time_")) / "c"
    c0 = time.process_time()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            art = lmu_edge.convert(graph, "c", out, quantize="int8", calibration=cal, progress=clock.progress, **opts)
        wall = time.perf_counter() - clock.t0
        cpu = time.process_time() - c0
        report = json.loads((art.path / "report.json").read_text())
    finally:
        c_target.run_native = clock._run_native
        shutil.rmtree(out.parent, ignore_errors=True)
    q_start = clock.first("quantizing", wall)
    search_end = clock.last("quantizing", q_start)
    print(f"  whole conversion            wall {wall:7.1f} s   (this process's CPU {cpu:.1f} s)")
    print(f"  to the search's first line  wall {q_start:7.1f} s   (fold, ranges, float reference, 1st candidate)")
    print(f"  the widening search         wall {search_end - q_start:7.1f} s   (to its last progress line)")
    print(f"  after it                    wall {wall - search_end:7.1f} s   (the choice on every sequence, C, checks)")
    print(f"    of which QEMU counting    wall {clock.qemu:7.1f} s   (cortex-m4 and cortex-m0 instruction counts)")
    print(f"  without the QEMU counting   wall {wall - clock.qemu:7.1f} s")
    info = report.get("quantization", {})
    keys = ("widened", "weight_rounding", "state_bound", "calibration_sqnr_db", "search_on")
    print("  chosen: " + "; ".join(f"{k} {info.get(k)!r}" for k in keys))
    ver = report.get("verification", {})
    print(
        f"  verified: bit-exact host {ver.get('bit_exact_host')}, M4 {ver.get('instructions_per_step_m4')} "
        f"instructions per step"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
