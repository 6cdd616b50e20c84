"""A chunk of the generated-model long run, serially and on local Ray workers: the same results, two wall times.

    python bench/gen_chunk.py                          # seeds 1000-1049, every cell, serial vs 2 workers
    python bench/gen_chunk.py --seeds 1000-1003 --cell c:int8 --cell onnx:int8   # a small check

Makes each seed's model once (``gen_models.py --make-only --models DIR``, on the Ray workers; its wall time
printed apart), then runs ``scripts/gen_models.py`` twice over the same seeds and the same saved models,
each time into a results file of its own: first in one process (``--workers 0``), then on a local Ray
instance (``--workers N``, lmu_edge.executor); each seed in a fresh process of its own on both sides
(``--isolate``). The models are shared because one-epoch Keras training is not reproducible from a seed on
this machine (docs/sweep.md), and the question here is the executor's, not TensorFlow's. Prints
both wall times, their ratio and the CPU seconds the seeds report, and checks that every seed's record is
the same in both runs (model, cells, statuses, SQNR, reasons; the seconds aside; an SQNR of 200 dB or more,
float round-off, as such). ``--compare A B`` compares two kept results files only. Exits non-zero when any
seed differs or a run fails to produce every seed. Issue 58: the long runs go to Ray with one flag.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIMING_KEYS = {"seconds", "cpu_seconds"}
#: what differs between two runs of the same seed in an error message: the seed's temporary folder and
#: the private partial output folder convert names with its process id (.c-int8.12788.q065olt8.partial)
VOLATILE = (
    (re.compile(r"lmu_gen_[A-Za-z0-9_]+"), "lmu_gen_*"),
    (re.compile(r"\.([A-Za-z0-9_.-]+?)\.\d+\.[A-Za-z0-9_]+\.partial"), r".\1.*.partial"),
)


#: an SQNR at or above this is float64 round-off, compared as such, not digit by digit: nengo's simulator
#: merges operators until its reduction rate per second falls (nengo.builder.optimizer), so the load of
#: the machine decides how it sums (2026-12-07: seed 1010's nengo float cell 294.36 dB idle, 292.79 beside
#: two busy loops; 19 of 50 seeds' nengo cells differed between the serial and the Ray run, 240-340 dB)
ROUNDOFF_DB = 200.0


def _strip(v, key=None):
    """A record without its timings (they differ from run to run, nothing else may) and with every SQNR of
    at least :data:`ROUNDOFF_DB` read as round-off."""
    if key == "sqnr" and isinstance(v, (int, float)) and v >= ROUNDOFF_DB:
        return f"round-off (>= {ROUNDOFF_DB:g} dB)"
    if isinstance(v, dict):
        return {k: _strip(x, k) for k, x in v.items() if k not in TIMING_KEYS}
    if isinstance(v, list):
        return [_strip(x) for x in v]
    if isinstance(v, str):
        for pattern, repl in VOLATILE:
            v = pattern.sub(repl, v)
        return v[:300]  # a message cut at 400 characters before its names were made equal
    return v


class _Load:
    """The machine's 1-minute load average sampled every 5 s while a run goes (others' work included)."""

    def __init__(self):
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._sample, daemon=True)

    def _sample(self):
        while not self._stop.wait(5.0 if self.samples else 0.0):
            self.samples.append(os.getloadavg()[0])

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()

    def __str__(self):
        s = self.samples or [0.0]
        return f"load {min(s):.1f} to {max(s):.1f}, mean {sum(s) / len(s):.1f}"


def _run(seeds: str, cells: list[str], workers: int, out: Path, models: Path) -> tuple[float, _Load]:
    cmd = [sys.executable, str(ROOT / "scripts" / "gen_models.py"), "--seeds", seeds, "--out", str(out)]
    # --isolate on both sides: a native abort costs one seed, not the run, and both pay the same start-up
    cmd += [f"--cell={c}" for c in cells] if cells is not None else ["--make-only"]
    cmd += ["--workers", str(workers), "--isolate", "--models", str(models)]
    print(f"$ {' '.join(cmd[1:])}", flush=True)
    t0 = time.perf_counter()
    # gen_models exits 1 when a cell fails its floor: a result, recorded, not a failure of this benchmark
    with _Load() as load:
        r = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL)
    if r.returncode not in (0, 1):
        raise SystemExit(f"gen_chunk: {' '.join(cmd[1:3])} exited {r.returncode}")
    return time.perf_counter() - t0, load


def _records(path: Path) -> dict:
    return {rec["seed"]: rec for rec in map(json.loads, path.read_text().splitlines()) if rec}


def _differ(s: dict, p: dict) -> list:
    """The seeds whose records differ between two runs (:func:`_strip`), or that one run lacks."""
    return sorted(k for k in s.keys() | p.keys() if _strip(s.get(k)) != _strip(p.get(k)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="1000-1049", help="seed ranges (default 1000-1049: 50 models)")
    ap.add_argument("--workers", type=int, default=2, help="Ray workers of the parallel run (default 2)")
    ap.add_argument("--cell", action="append", default=[], help="target:mode (repeatable; default every cell)")
    ap.add_argument("--keep", type=Path, help="move the two results files (per-cell seconds) here")
    ap.add_argument("--models", type=Path, help="folder of made models (kept; default: a temporary one)")
    ap.add_argument("--compare", type=Path, nargs=2, metavar="JSONL", help="only compare two kept results files")
    a = ap.parse_args(argv)
    if a.compare:
        s, p = map(_records, a.compare)
        differ = _differ(s, p)
        print(f"{len(s)} and {len(p)} seeds; " + (f"DIFFERENT: {differ}" if differ else "identical results"))
        return 1 if differ else 0
    if a.workers < 1:
        ap.error(f"--workers must be at least 1, not {a.workers}")
    with tempfile.TemporaryDirectory(prefix="gen_chunk_") as tmp:
        serial, parallel = Path(tmp) / "serial.jsonl", Path(tmp) / f"workers{a.workers}.jsonl"
        models = a.models or Path(tmp) / "models"
        try:
            t_make, _ = _run(a.seeds, None, a.workers, Path(tmp) / "made.jsonl", models)
            t_serial, load_serial = _run(a.seeds, a.cell, 0, serial, models)
            t_parallel, load_parallel = _run(a.seeds, a.cell, a.workers, parallel, models)
            s, p = _records(serial), _records(parallel)
        finally:  # a run that fails keeps what it recorded (2026-12-06: 22 seeds lost to an abort)
            if a.keep:
                a.keep.mkdir(parents=True, exist_ok=True)
                for f in (serial, parallel):
                    if f.exists():
                        shutil.move(f, a.keep / f.name)
    differ = _differ(s, p)
    cpu = sum(r.get("cpu_seconds", 0.0) for r in s.values())
    cpu_parallel = sum(r.get("cpu_seconds", 0.0) for r in p.values())
    nice = os.nice(0)
    print(f"\ngenerated-model chunk, seeds {a.seeds} ({len(s)} models), cells: {', '.join(a.cell) or 'every cell'}")
    print(f"{datetime.date.today()}, {os.cpu_count()} cores, nice {nice}")
    print(f"  the models made once, shared by both runs ({a.workers} workers): wall {t_make:.1f} s")
    print(f"  serial (--workers 0)        wall {t_serial:8.1f} s   (the seeds' CPU: {cpu:.0f} s; {load_serial})")
    print(
        f"  Ray (--workers {a.workers})           wall {t_parallel:8.1f} s   ratio {t_serial / t_parallel:.2f}x   "
        f"(CPU {cpu_parallel:.0f} s; {load_parallel})"
    )
    if differ:
        print(f"  DIFFERENT results for seeds {differ}")
        return 1
    print(f"  identical results: {len(s)} of {len(s)} seeds (every cell's status, SQNR and reason)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
