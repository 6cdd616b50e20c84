"""The long fuzz run over every input kind lmu-edge reads, resumable, one budgeted process per input.

Categories (inputs are dealt round-robin over the chosen ones, ``--category``; all 17 by default)::

    model:.lmu.npz model:.keras model:.h5 model:.safetensors model:.pt   mutated model files (tests/fuzzing.py)
    cli                                                                  mutated convert command lines
    data                                                                 mutated input / calibration arrays
    artifact:manifest artifact:seal artifact:signature artifact:npz      a received artifact with one part
    artifact:tflite artifact:onnx artifact:weights artifact:tree         damaged (resealed or not), run or
    artifact:signed                                                      verified: nothing planted may run
    artifact:nir                                                         model.nir damaged (scripts/fuzz_nir.py)

Each input runs in a forked child with its budget set before any work: an address-space limit
(``RLIMIT_AS``: the parent's size at the fork plus ``--memory-mb``) and a wall-clock limit
(``--time-limit``; the child is killed past it and counted as a hang). The child reports one outcome:

    accepted        success (a model converted, an artifact ran)
    refused         one one-line LmuEdgeError (CLI: one ``lmu-edge: error:`` line, exit 1 or 2)
    internal        any other exception, exit 70, a traceback or a multi-line error
    violation       a property broken: a planted payload ran, files left or written outside the output,
                    a refusal slower than 10 s
    crash           the child died on a signal or exited without reporting (a runtime's segfault)
    hang            killed at the time limit

Every finished input is one line of ``--state`` (JSON), so a run stopped at any point continues where it
was (``--inputs`` is the total). Run it in the background, niced::

    nohup nice -n 15 .venv/bin/python scripts/fuzz.py --inputs 10000 --state fuzz.jsonl &
    .venv/bin/python scripts/fuzz.py --state fuzz.jsonl --table     # the counts so far
    .venv/bin/python scripts/fuzz.py --state fuzz.jsonl --replay 123  # one input again, unforked

The script lowers its own priority to nice 15 when started at a higher one. The received-artifact categories
(seed artifacts, their mutations, the check) are in ``scripts/fuzz_artifacts.py``.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import json
import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
import fuzzing  # noqa: E402  (tests/ joins sys.path first)
import hostile  # noqa: E402  (found through tests/ put on sys.path above)

sys.path.insert(0, str(Path(__file__).resolve().parent))  # (run as a script, scripts/ is there already)
from fuzz_artifacts import (  # noqa: E402  (the received-artifact categories, in their own file)
    ARTIFACT_CATEGORIES,
    SEED_ARTIFACTS,
    Violation,
    _cli_outcome,
    _Internal,
    _mutate_npy,
    _mutate_npz,
    build_seeds,
    check_artifact,
    make_artifact_case,
)
from fuzz_nir import NIR_CATEGORIES, build_nir_seeds, make_nir_case  # noqa: E402  (scripts/ is on sys.path)

EX = hostile.EXAMPLES
MODEL_CATEGORIES = [f"model:{s}" for s in (".lmu.npz", ".keras", ".h5", ".safetensors", ".pt")]
CATEGORIES = MODEL_CATEGORIES + ["cli", "data"] + ARTIFACT_CATEGORIES + NIR_CATEGORIES
OUTCOMES = ("accepted", "refused", "internal", "violation", "crash", "hang")

# --- data files --------------------------------------------------------------------------------------


def make_data_case(rng: random.Random, work: Path) -> Path:
    """A mutated ``.npy`` / ``.npz`` input array (the digits inputs and labels, and an npz of them)."""
    src = rng.choice([EX / "digits_calibration_x.npy", EX / "digits_test_x.npy", EX / "digits_test_y.npy"])
    raw = src.read_bytes()
    if rng.random() < 0.3:
        buf = io.BytesIO()
        np.savez(buf, **{rng.choice(["x", "arr_0", "a"]): np.load(src)[:8]})
        if rng.random() < 0.5:
            buf.seek(0, 2)
            with zipfile.ZipFile(buf, "a") as z:
                z.writestr(rng.choice(["y.npy", "evil.pkl", "../x.npy"]), raw[:200])
        dst = work / "data.npz"
        dst.write_bytes(_mutate_npz(rng, buf.getvalue()) if rng.random() < 0.7 else buf.getvalue())
    else:
        dst = work / "data.npy"
        dst.write_bytes(_mutate_npy(rng, raw[: 128 + 8 * 64 * 40]))
    return dst


def check_data(path: Path, rng: random.Random, work: Path, seeds: Path) -> str:
    from click.testing import CliRunner

    from lmu_edge.cli import main

    if rng.random() < 0.5:
        args = ["run", str(seeds / "ir"), "-i", str(path), "-o", str(work / "y.npy"), "-q"]
    else:
        args = ["convert", str(EX / "digits_lmu.lmu.npz"), "-q", "-t", "ir", "-o", str(work / "out")]
        args += ["--calibration", str(path)] + (["--quantize", "int8"] if rng.random() < 0.3 else [])
    r = CliRunner().invoke(main, args, catch_exceptions=True)
    return _cli_outcome(r, args)


# --- one input ---------------------------------------------------------------------------------------


def one_input(index: int, seed: int, seeds: Path, work: Path, categories=CATEGORIES) -> tuple:
    """Run input ``index`` of a run over ``categories``; returns ``(category, outcome, detail)`` (never raises)."""
    category = categories[index % len(categories)]
    rng = random.Random(seed * 1_000_003 + index)
    try:
        if category.startswith("model:"):
            (work / "cases").mkdir()
            path = fuzzing.make_case(rng, work / "cases", category.split(":", 1)[1])
            status = fuzzing.check_file(path, rng, work)
            return category, "accepted" if status == "ok" else "refused", ""
        if category == "cli":
            status = fuzzing.check_cli(fuzzing.cli_args(rng, work), work)
            return category, "accepted" if status == "ok" else "refused", ""
        if category == "data":
            return category, check_data(make_data_case(rng, work), rng, work, seeds), ""
        if category in NIR_CATEGORIES:
            spec = make_nir_case(rng, work, seeds)
        else:
            spec = make_artifact_case(rng, category, work, seeds)
        return category, check_artifact(spec, rng, work, seeds), spec.get("planted", "")
    except (Violation, AssertionError) as e:
        return category, "violation", " ".join(str(e).split())[:400]
    except _Internal as e:
        return category, "internal", str(e)[:400]
    except BaseException as e:  # noqa: BLE001 (anything but success or an LmuEdgeError is a finding)
        from lmu_edge.errors import LmuEdgeError

        if isinstance(e, LmuEdgeError) and "\n" not in str(e):
            return category, "refused", ""
        return category, "internal", f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"


def _vm_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _child(index, seed, seeds, work, memory_mb, wfd, categories):
    os.setpgid(0, 0)  # its own process group: a hang is killed with whatever it started (make, gcc)
    limit = _vm_bytes() + memory_mb * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.chdir(work)  # relative paths a mutation names land in the input's own folder
    cat, outcome, detail = one_input(index, seed, seeds, work, categories)
    os.write(wfd, json.dumps([cat, outcome, detail]).encode())
    os._exit(0)


def start_one(index: int, seed: int, seeds: Path, tmp: Path, memory_mb: int, categories=CATEGORIES) -> dict:
    """Fork the child for input ``index``; returns what :func:`poll` needs."""
    work = tmp / f"w{index}"
    work.mkdir()
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(rfd)
            _child(index, seed, seeds, work, memory_mb, wfd, categories)
        finally:
            os._exit(99)
    os.close(wfd)
    os.set_blocking(rfd, False)
    job = {"i": index, "pid": pid, "fd": rfd, "start": time.time(), "chunks": [], "killed": False, "work": work}
    return job | {"category": categories[index % len(categories)]}


def poll(job: dict, time_limit: float):
    """The input's record once its child ended (killed past ``time_limit``), else None."""
    with contextlib.suppress(BlockingIOError):
        while c := os.read(job["fd"], 1 << 16):
            job["chunks"].append(c)
    wpid, status, usage = os.wait4(job["pid"], os.WNOHANG)
    if not wpid:
        if not job["killed"] and time.time() - job["start"] > time_limit:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(job["pid"], signal.SIGKILL)
            job["killed"] = True
        return None
    with contextlib.suppress(BlockingIOError):
        while c := os.read(job["fd"], 1 << 16):
            job["chunks"].append(c)
    os.close(job["fd"])
    with contextlib.suppress(ProcessLookupError):  # what the child started and left behind
        os.killpg(job["pid"], signal.SIGKILL)
    secs = time.time() - job["start"]
    index = job["i"]
    category = job["category"]
    try:
        category, outcome, detail = json.loads(b"".join(job["chunks"]))
    except ValueError:
        code = os.waitstatus_to_exitcode(status)
        outcome = "hang" if job["killed"] else "crash"
        detail = f"killed at {time_limit:g} s" if job["killed"] else f"exit {code}"
    subprocess.run(["rm", "-rf", str(job["work"])], check=False)
    return {
        "i": index,
        "category": category,
        "outcome": outcome,
        "seconds": round(secs, 3),
        "cpu": round(usage.ru_utime + usage.ru_stime, 3),
        "rss_mb": round(usage.ru_maxrss / 1024, 1),
        "detail": detail,
    }


# --- the run and its table ---------------------------------------------------------------------------


def _done(state: Path) -> dict:
    done = {}
    if state.exists():
        for line in state.read_text().splitlines():
            with contextlib.suppress(ValueError, KeyError):
                r = json.loads(line)
                done[r["i"]] = r
    return done


def table(state: Path) -> str:
    rows = list(_done(state).values())
    by = collections.defaultdict(collections.Counter)
    slow = collections.defaultdict(float)
    wall = collections.defaultdict(float)
    for r in rows:
        by[r["category"]][r["outcome"]] += 1
        if r["outcome"] == "refused":
            slow[r["category"]] = max(slow[r["category"]], r.get("cpu", r["seconds"]))
            wall[r["category"]] = max(wall[r["category"]], r["seconds"])
    head = "| category | inputs | " + " | ".join(OUTCOMES) + " | slowest refusal (CPU / wall) | peak RSS |"
    lines = [head, "| --- " * (len(OUTCOMES) + 4) + "|"]
    total = collections.Counter()
    for cat in [c for c in CATEGORIES if c in by]:
        c = by[cat]
        rss = max((r["rss_mb"] for r in rows if r["category"] == cat), default=0)
        n = sum(c.values())
        total.update(c)
        lines.append(
            f"| {cat} | {n} | "
            + " | ".join(str(c[o]) for o in OUTCOMES)
            + f" | {slow[cat]:.1f} / {wall[cat]:.1f} s | {rss:.0f} MB |"
        )
    rss = max((r["rss_mb"] for r in rows), default=0)
    lines.append(
        f"| **all** | **{sum(total.values())}** | "
        + " | ".join(f"**{total[o]}**" for o in OUTCOMES)
        + f" | {max(slow.values(), default=0):.1f} / {max(wall.values(), default=0):.1f} s | {rss:.0f} MB |"
    )
    findings = [r for r in rows if r["outcome"] not in ("accepted", "refused")]
    for r in sorted(findings, key=lambda r: r["i"])[:40]:
        lines.append(f"<!-- {r['i']} {r['category']} {r['outcome']}: {r['detail'][:200]} -->")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--inputs", type=int, default=10000, help="total inputs (a resumed run continues to this)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--state", type=Path, default=Path("fuzz-state.jsonl"), help="one JSON line per input")
    ap.add_argument("--time-limit", type=float, default=60.0, help="seconds per input before it is killed")
    ap.add_argument("--memory-mb", type=int, default=3072, help="address space per input above the parent's")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--table", action="store_true", help="print the counts of --state and exit")
    ap.add_argument("--replay", type=int, metavar="INDEX", help="run one input again, unforked, and print it")
    ap.add_argument("--category", action="append", choices=CATEGORIES, help="deal only these (repeatable)")
    args = ap.parse_args()
    categories = args.category or CATEGORIES
    if args.table:
        print(table(args.state))
        return 0
    if os.nice(0) < 15:
        os.nice(15 - os.nice(0))
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    seeds = args.state.with_name(args.state.name + ".seeds").resolve()
    build_seeds(seeds, names=() if set(categories) <= set(NIR_CATEGORIES) else tuple(SEED_ARTIFACTS))
    if set(categories) & set(NIR_CATEGORIES):
        build_nir_seeds(seeds)
    if args.replay is not None:
        # the category --state recorded for it (runs before artifact:nir dealt over 16 categories)
        cat = _done(args.state).get(args.replay, {}).get("category")
        categories = [cat] if cat in CATEGORIES else categories
        if set(categories) & set(NIR_CATEGORIES):
            build_nir_seeds(seeds)
        with tempfile.TemporaryDirectory(prefix="lmu-edge-fuzz-") as tmp:
            print(one_input(args.replay, args.seed, seeds, Path(tmp), categories))
        return 0
    # everything a child needs, imported once before forking (children share it)
    import lmu_edge.cli  # noqa: F401  (imported once before forking, shared by the children)
    import lmu_edge.targets.c  # noqa: F401  (imported before forking)
    import lmu_edge.targets.nengo  # noqa: F401  (imported before forking)
    import lmu_edge.targets.nir  # noqa: F401  (imported before forking)
    import lmu_edge.targets.onnx  # noqa: F401  (imported before forking)
    import lmu_edge.targets.tflite  # noqa: F401  (imported before forking)

    if set(categories) & set(NIR_CATEGORIES):  # Rockpool and torch: seconds of import saved per input
        import rockpool.nn.modules.torch.nir  # noqa: F401  (imported before forking)

    done = _done(args.state)
    todo = [i for i in range(args.inputs) if i not in done]
    print(
        f"fuzz: {len(done)} done, {len(todo)} to go; per input: {args.time_limit:g} s, address space "
        f"+{args.memory_mb} MiB over the parent's {_vm_bytes() / 2**30:.1f} GiB; nice {os.nice(0)}",
        flush=True,
    )
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="lmu-edge-fuzz-") as tmp, open(args.state, "a") as out:
        running: list = []
        n = 0
        while todo or running:
            while todo and len(running) < args.jobs:
                running.append(start_one(todo.pop(0), args.seed, seeds, Path(tmp), args.memory_mb, categories))
            for job in list(running):
                r = poll(job, args.time_limit)
                if r is None:
                    continue
                running.remove(job)
                out.write(json.dumps(r) + "\n")
                out.flush()
                n += 1
                if r["outcome"] not in ("accepted", "refused"):
                    print(f"  input {r['i']} {r['category']}: {r['outcome']}: {r['detail']}", flush=True)
                if n % 200 == 0:
                    print(f"  {n} more done in {time.time() - t0:.0f} s", flush=True)
            time.sleep(0.005)
    print(table(args.state))
    return 0


if __name__ == "__main__":
    sys.exit(main())
