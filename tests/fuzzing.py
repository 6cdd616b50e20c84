"""The fuzzer: mutated model files and CLI arguments, and the property every run must keep.

Used by ``tests/test_fuzz.py`` (hypothesis, derandomized in CI) and, for the
long run, as a command (docs/security.md)::

    .venv/bin/python tests/fuzzing.py --inputs 10000 --seed 0 --jobs 2

The long run forks one child per input, so that each input's time and peak
memory are measured on their own (``wait4``); a child that runs past the
time limit is killed and counted. Each input must end in success or in one
:class:`~lmu_edge.errors.LmuEdgeError`, a refusal within 10 s, under 2 GB, with
nothing left on disk after a failure and nothing written outside ``-o``.

Readers and targets join by adding a line to :data:`SEEDS` / :data:`TARGETS`.
"""

from __future__ import annotations

import copy
import io
import json
import os
import random
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import hostile  # noqa: E402  (tests/ joins sys.path first)

EX = hostile.EXAMPLES
#: seed model files, one per reader: (suffix, path)
TORCH_SEED = EX / "torch_psmnist_small.safetensors"  # with torch_psmnist_small.json beside it


def _pt_seed() -> Path:
    """The torch checkpoint as a ``torch.save``d state dict (``.pt``), written once per process tree."""
    import atexit
    import shutil

    import torch

    from lmu_edge.converters.torch_files import read_safetensors

    d = Path(tempfile.mkdtemp(prefix="lmu-edge-fuzz-seed-"))
    pid = os.getpid()
    atexit.register(lambda: os.getpid() == pid and shutil.rmtree(d, ignore_errors=True))
    path = d / "torch_psmnist_small.pt"
    torch.save({k: torch.from_numpy(v) for k, v in read_safetensors(TORCH_SEED).items()}, path)
    shutil.copy(TORCH_SEED.with_suffix(".json"), path.with_suffix(".json"))
    return path


SEEDS = [
    (".lmu.npz", EX / "digits_lmu.lmu.npz"),
    (".keras", EX / "keras_digits.keras"),
    (".h5", EX / "keras_digits.h5"),
    (".keras", EX / "gunpoint_lmu.keras"),
    (".safetensors", TORCH_SEED),
]
try:
    _PT = _pt_seed()
    SEEDS += [(".pt", _PT), (".pth", _PT)]
except ImportError:  # without torch the .pt reader only says that torch is needed (tested elsewhere)
    pass
#: targets an accepted input is converted for (fast ones; the C target is exercised on a sample)
TARGETS = ["ir", "c", "nir"]
#: per target, options that keep one conversion to seconds (the C build is checked on a sample elsewhere;
#: NIR: 2 simulator steps per sample, and the error measured but not enforced)
TARGET_OPTIONS = {"c": {"measure": False}, "nir": {"steps_per_sample": 2, "tolerance": float("inf")}}
#: accepted inputs are converted only when this small (so each converts in about a second)
MAX_CONVERT_ORDER, MAX_CONVERT_THETA, MAX_CONVERT_UNITS = 64, 400.0, 256

HOSTILE_VALUES = [
    0,
    -1,
    1,
    2,
    7,
    10**6,
    10**12,
    2**31,
    -(2**31),
    2**63,
    10**400,
    1e-300,
    1e300,
    1e-3,
    0.5,
    3.7,
    float("nan"),
    float("inf"),
    -float("inf"),
    "",
    "x",
    hostile.INJECTION,
    "zoh",
    "euler",
    "lmu",
    "dense",
    None,
    True,
    False,
    [],
    {},
    [1, 2],
    {"type": "graph"},
    {"array": "nope"},
    [[[[[[]]]]]],
    "a" * 10000,
]


def _mutate_json(rng: random.Random, obj, n_edits: int):
    """Replace values at random places of a JSON tree with hostile ones (and sometimes drop or add keys)."""

    def walk(node, path, paths):
        paths.append(path)
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, path + [k], paths)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, path + [i], paths)

    for _ in range(n_edits):
        paths = []
        walk(obj, [], paths)
        if len(paths) < 2:
            return rng.choice(HOSTILE_VALUES)
        path = rng.choice(paths[1:])
        parent = obj
        for k in path[:-1]:
            parent = parent[k]
        k = path[-1]
        op = rng.random()
        if op < 0.75:
            v = copy.deepcopy(rng.choice(HOSTILE_VALUES))  # shared lists / dicts would make cycles
            if isinstance(parent[k], (int, float)) and not isinstance(parent[k], bool) and rng.random() < 0.5:
                factor = rng.choice([-1, 0, 2, 1000, 1e9, 1e-9])
                try:
                    v = parent[k] * factor
                except OverflowError:  # a huge int times a float: the fuzzer's own limit
                    v = float("inf")
            parent[k] = v
        elif op < 0.9 and isinstance(parent, dict):
            del parent[k]
        elif isinstance(parent, dict):
            parent[rng.choice(["extra", "type", "array", "name", "layers"])] = copy.deepcopy(rng.choice(HOSTILE_VALUES))
        elif isinstance(parent, list) and parent:
            parent.append(copy.deepcopy(parent[0]))
    return obj


def _dumps(obj) -> bytes:
    try:
        return json.dumps(obj).encode()
    except (ValueError, OverflowError):
        return b"{" + b'"a":' * 10 + b"1" + b"}" * 11


def _mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        op = rng.random()
        pos = rng.randrange(max(len(b), 1))
        if op < 0.5 and b:
            b[pos] = rng.randrange(256)
        elif op < 0.7:
            b[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
        elif op < 0.9 and b:
            del b[pos : pos + rng.randint(1, 64)]
        else:
            b = b[:pos]
    return bytes(b)


def _rezip(src_members: dict, rng: random.Random) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", rng.choice([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])) as z:
        for k, v in src_members.items():
            z.writestr(k, v)
    return out.getvalue()


def _zip_members(path: Path) -> dict:
    with zipfile.ZipFile(path) as z:
        return {i.filename: z.read(i.filename) for i in z.infolist()}


def make_case(rng: random.Random, directory: Path, suffix: str = None) -> Path:
    """Write one mutated model file into ``directory`` and return its path (of a reader with ``suffix``, or
    of any reader)."""
    suffix, seed = rng.choice([s for s in SEEDS if suffix in (None, s[0])])
    dst = directory / f"m{rng.randrange(10**6)}{suffix}"
    kind = rng.random()
    if suffix == ".h5":
        raw = seed.read_bytes()
        if kind < 0.3:  # links, virtual datasets, dtypes and sizes in place of a weight
            import h5py

            dst.write_bytes(raw)
            with h5py.File(dst, "r") as h:
                names: list = []
                h.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
            return hostile.h5_edit(dst, rng.choice(sorted(names)), rng.choice(hostile.H5_EDITS))
        if kind < 0.7:
            import h5py

            dst.write_bytes(raw)
            with h5py.File(dst, "r+") as h:
                cfg = json.loads(h.attrs["model_config"])
                h.attrs["model_config"] = _dumps(_mutate_json(rng, cfg, rng.randint(1, 4))).decode()
        else:
            dst.write_bytes(_mutate_bytes(rng, raw))
        return dst
    if suffix in (".safetensors", ".pt", ".pth"):
        return _torch_case(rng, seed, dst, kind)
    if suffix == ".lmu.npz" and kind < 0.15:  # limit-edge work: sizes at the limits, small on disk
        return hostile.limit_edge_ir(dst, rng)
    members = _zip_members(seed)
    if kind < 0.65:  # structured: the JSON the reader parses
        if suffix == ".lmu.npz":
            header = json.loads(np.load(io.BytesIO(members["header.json.npy"]), allow_pickle=False).tobytes())
            text = _dumps(_mutate_json(rng, header, rng.randint(1, 4)))
            buf = io.BytesIO()
            np.save(buf, np.frombuffer(text, np.uint8))
            members["header.json.npy"] = buf.getvalue()
        else:
            cfg = json.loads(members["config.json"])
            members["config.json"] = _dumps(_mutate_json(rng, cfg, rng.randint(1, 4)))
        dst.write_bytes(_rezip(members, rng))
    elif kind < 0.8:  # arrays / weights: corrupted bytes inside a member
        k = rng.choice(sorted(members))
        members[k] = _mutate_bytes(rng, members[k])
        dst.write_bytes(_rezip(members, rng))
    elif kind < 0.9:  # archive structure: members dropped, added, renamed
        k = rng.choice(sorted(members))
        op = rng.random()
        if op < 0.4:
            del members[k]
        elif op < 0.7:
            members[rng.choice(["evil.pkl", "../escape.npy", "/abs.npy", k + ".npy", "x"])] = members[k]
        else:
            members[k.upper()] = members.pop(k)
        dst.write_bytes(_rezip(members, rng))
    else:  # raw bytes of the whole file
        dst.write_bytes(_mutate_bytes(rng, seed.read_bytes()))
    return dst


def _torch_case(rng: random.Random, seed: Path, dst: Path, kind: float) -> Path:
    """A torch checkpoint: weights file plus the JSON config beside it; either may be damaged."""
    import struct

    cfg = json.loads(seed.with_suffix(".json").read_text())
    raw = seed.read_bytes()
    cfg_bytes = _dumps(cfg)
    if kind < 0.45:  # the config the reader parses
        cfg_bytes = _dumps(_mutate_json(rng, cfg, rng.randint(1, 4)))
    elif kind < 0.7 and seed.suffix == ".safetensors":  # the safetensors header (dtypes, shapes, offsets)
        (n,) = struct.unpack("<Q", raw[:8])
        header = json.loads(raw[8 : 8 + n])
        text = _dumps(_mutate_json(rng, header, rng.randint(1, 4)))
        raw = struct.pack("<Q", len(text)) + text + raw[8 + n :]
    elif kind < 0.7:  # a .pt is a zip: its members, as for the other zips
        members = _zip_members(seed)
        k = rng.choice(sorted(members))
        members[k] = _mutate_bytes(rng, members[k])
        raw = _rezip(members, rng)
    elif kind < 0.75:
        cfg_bytes = None  # the config is missing
    elif kind < 0.85:
        cfg_bytes = _mutate_bytes(rng, cfg_bytes)
    else:
        raw = _mutate_bytes(rng, raw)
    dst.write_bytes(raw)
    if cfg_bytes is not None:
        dst.with_suffix(".json").write_bytes(cfg_bytes)
    return dst


def _small(graph) -> bool:
    for layer in graph.layers:
        if getattr(layer, "order", 0) > MAX_CONVERT_ORDER or getattr(layer, "theta", 0) > MAX_CONVERT_THETA:
            return False
        for name in ("kernel", "input_encoders"):
            a = getattr(layer, name, None)
            if a is not None and max(a.shape) > MAX_CONVERT_UNITS:
                return False
    return (graph.seq_len or 0) <= 2000


def _snapshot(root: Path) -> set:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


#: the work budget (operations) an accepted input too large to convert in about a second runs under
WORK_SCALE = 0.0005


def cpu_seconds() -> float:
    """CPU time of this process and its finished children: what a refusal costs, whatever else the machine runs
    (a niced long run beside other work takes many times its CPU time in wall time)."""
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return sum(u.ru_utime + u.ru_stime for u in r)


def check_file(path: Path, rng: random.Random, work: Path) -> str:
    """The property for one model file. Returns ``"ok"`` / ``"refused"``; raises AssertionError otherwise."""
    import lmu_edge
    from lmu_edge import budget
    from lmu_edge.errors import LmuEdgeError, VerificationError

    before = _snapshot(work)
    t = cpu_seconds()
    try:
        g = lmu_edge.load(path)
    except LmuEdgeError as e:
        assert "\n" not in str(e), f"multi-line error: {e!r}"
        assert cpu_seconds() - t < 10, f"refusal took {cpu_seconds() - t:.1f} CPU s"
        assert _snapshot(work) == before, "a refused load wrote files"
        return "refused"
    small = _small(g)
    target = rng.choice(TARGETS) if small and rng.random() < 0.3 else "ir"
    out = work / "out"
    opts = TARGET_OPTIONS.get(target, {})
    t = cpu_seconds()
    try:
        # a large accepted input converts under a budget of about a second's work: refused at once from
        # its estimate, or done in seconds (the estimates are upper bounds)
        with budget.allow(1.0 if small else WORK_SCALE, memory=1.0 if small else 0.5):
            lmu_edge.convert(g, target, out, **opts)
        status = "ok"
    except LmuEdgeError as e:
        assert "\n" not in str(e), f"multi-line error: {e!r}"
        # a refusal is quick; a verification failure is not a refusal of the input but the end of a conversion
        # that ran inside its budget (input 8772 of seed 5: 22 CPU s of Rockpool, then outputs not finite)
        slow_ok = out.exists() or isinstance(e, VerificationError)
        assert cpu_seconds() - t < 10 or slow_ok, f"refusal took {cpu_seconds() - t:.1f} CPU s"
        assert not out.exists(), "a failed convert left its output"
        status = "refused"
    after = _snapshot(work) - before
    allowed = {"out"} | {a for a in after if a.startswith("out/")}
    assert after <= allowed, f"files written outside -o: {sorted(after - allowed)[:5]}"
    left = [a for a in after if a.endswith((".partial", ".old"))]
    assert not left, f"leftovers: {left}"
    if out.exists():
        import shutil

        shutil.rmtree(out)
    return status


#: CLI argument pools: (option, values) with valid and invalid values mixed
CLI_OPTIONS = [
    ("--target", ["ir", "c", "onnx", "nope", "", hostile.INJECTION]),
    ("--quantize", ["float", "int8", "int16x8", "int16", "float32", "bad"]),
    ("--error-budget", ["1e-6", "0", "-1", "inf", "nan", "1e-300", "2", "x"]),
    ("--tolerance", ["0", "1e-4", "nan", "inf", "-1", "1e300"]),
    ("--substeps", ["1", "0", "-5", "4096", "4097", "1e9", "x"]),
    ("--realization", ["auto", "zoh", "rk4", "fir", "nope"]),
    ("--state-bits", ["8", "16", "32", "7", "64"]),
    ("--weight-bits", ["2", "8", "1", "9", "16", "17"]),
    ("--prefix", ["model", "int", "2x", hostile.INJECTION, "a" * 300]),
    ("--device", ["cortex-m4-64k", "nope"]),
    ("-O", ["measure=false", "x", "=1", "a=" + hostile.INJECTION]),
]


def cli_args(rng: random.Random, work: Path) -> list:
    model = str(rng.choice(SEEDS)[1])
    args = ["convert", model, "-q", "-o", str(work / rng.choice(["out", "a/b/out", "f"]))]
    for opt, values in rng.sample(CLI_OPTIONS, rng.randint(0, 4)):
        args += [opt, rng.choice(values)]
    if "--target" not in args:
        args += ["--target", "ir"]
    if rng.random() < 0.3:
        args += ["--calibration", str(EX / rng.choice(["digits_calibration_x.npy", "digits_test_y.npy", "nope.npy"]))]
    return args


def check_cli(args: list, work: Path) -> str:
    """Run the CLI in-process on ``args``: exit 0, or one 'lmu-edge: error:' line and exit 1 / 2."""
    from click.testing import CliRunner

    from lmu_edge.cli import main

    (work / "f").write_text("a file where a directory is expected")
    before = _snapshot(work)
    r = CliRunner().invoke(main, args, catch_exceptions=True)
    err = r.stderr if hasattr(r, "stderr") else r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), f"{args}: raised {r.exception!r}"
    assert r.exit_code in (0, 1, 2), f"{args}: exit {r.exit_code}: {err}"
    if r.exit_code:
        lines = [line for line in err.splitlines() if line.strip()]  # no warning may precede an error
        assert len(lines) == 1 and lines[0].startswith("lmu-edge: error: "), f"{args}: {err!r}"
        assert "internal error" not in err and "Traceback" not in err, f"{args}: {err}"
        assert _snapshot(work) == before, f"{args}: a failed run left {_snapshot(work) - before}"
    import shutil

    for p in work.iterdir():
        if p.name != "f":
            shutil.rmtree(p) if p.is_dir() else p.unlink()
    return "ok" if r.exit_code == 0 else "refused"


# --- the long run ------------------------------------------------------------------------------


def _child(seed: int, work: Path) -> None:
    rng = random.Random(seed)
    try:
        if rng.random() < 0.15:
            status = check_cli(cli_args(rng, work), work)
        else:
            case_dir = work / "cases"
            case_dir.mkdir(exist_ok=True)
            path = make_case(rng, case_dir)
            status = check_file(path, rng, work)
        os._exit(0 if status == "ok" else 3)
    except AssertionError as e:
        sys.stderr.write(f"seed {seed}: PROPERTY VIOLATED: {e}\n")
        os._exit(4)
    except BaseException as e:  # anything but success or LmuEdgeError
        sys.stderr.write(f"seed {seed}: {type(e).__name__}: {' '.join(str(e).split())[:300]}\n")
        os._exit(5)


def long_run(n: int, seed: int, time_limit: float = 10.0, mem_limit_mb: int = 2048) -> dict:
    """Fork one child per input; returns the summary counts."""
    import lmu_edge  # noqa: F401  (imported once in the parent, shared by every forked child)
    import lmu_edge.targets.c  # noqa: F401  (imported before forking, not used here)
    import lmu_edge.targets.ir  # noqa: F401  (imported before forking, not used here)
    from lmu_edge.cli import main  # noqa: F401  (imported before forking, not used here)

    counts = {
        "inputs": 0,
        "accepted": 0,
        "refused": 0,
        "violations": 0,
        "other_exceptions": 0,
        "slow": 0,
        "over_memory": 0,
        "max_seconds": 0.0,
        "max_rss_mb": 0.0,
    }
    failures = []
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="lmu-edge-fuzz-") as tmp:
        for i in range(n):
            s = seed * 1_000_003 + i
            work = Path(tmp) / f"w{i}"
            work.mkdir()
            start = time.time()
            pid = os.fork()
            if pid == 0:
                _child(s, work)
            killed = False
            while True:
                wpid, status, usage = os.wait4(pid, os.WNOHANG)
                if wpid:
                    break
                if time.time() - start > 10 * time_limit:
                    os.kill(pid, 9)
                    killed = True
                time.sleep(0.002)
            secs, rss = time.time() - start, usage.ru_maxrss / 1024
            code = os.waitstatus_to_exitcode(status)
            counts["inputs"] += 1
            counts["max_seconds"] = max(counts["max_seconds"], secs)
            counts["max_rss_mb"] = max(counts["max_rss_mb"], rss)
            if code == 0:
                counts["accepted"] += 1
            elif code == 3:
                counts["refused"] += 1
                if secs > time_limit:
                    counts["slow"] += 1
                    failures.append((s, f"refusal took {secs:.1f} s"))
            elif code == 4:
                counts["violations"] += 1
                failures.append((s, "property violated"))
            else:
                counts["other_exceptions"] += 1
                failures.append((s, "killed (hang)" if killed else f"exit {code}"))
            if rss > mem_limit_mb:
                counts["over_memory"] += 1
                failures.append((s, f"{rss:.0f} MB"))
            import shutil

            shutil.rmtree(work, ignore_errors=True)
            if (i + 1) % 500 == 0:
                print(f"  {i + 1}/{n} inputs, {time.time() - t0:.0f} s, {counts}", flush=True)
    counts["wall_seconds"] = round(time.time() - t0, 1)
    counts["failures"] = failures[:50]
    return counts


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="lmu-edge's fuzzer: the long run (see docs/security.md)")
    ap.add_argument("--inputs", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--replay", type=int, metavar="INPUT_SEED", help="run one input again, unforked (a seed the long run printed)"
    )
    args = ap.parse_args()
    if args.replay is not None:
        with tempfile.TemporaryDirectory(prefix="lmu-edge-fuzz-") as tmp:
            _child(args.replay, Path(tmp))
    summary = long_run(args.inputs, args.seed)
    print(json.dumps(summary, indent=1))
    bad = summary["violations"] + summary["other_exceptions"] + summary["slow"] + summary["over_memory"]
    sys.exit(1 if bad else 0)
