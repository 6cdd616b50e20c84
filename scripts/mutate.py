#!/usr/bin/env python3
"""Mutation harness: put one small bug at a time into the code, run the tests that cover that file,
and count the bugs the suite catches.

    python scripts/mutate.py                 # every mutation (hours on 2 cores; prints wall time)
    python scripts/mutate.py --ci            # the fixed sample CI runs (ci_sample in mutations.toml)
    python scripts/mutate.py --sample 6      # an evenly spaced sample
    python scripts/mutate.py --list          # list the mutations, run nothing
    python scripts/mutate.py --only ID ...   # these mutations
    python scripts/mutate.py --workers 2     # on a local Ray instance, each mutant in a private copy
    python scripts/mutate.py --address HOST:PORT   # on an existing Ray cluster (every node: same venv)

Mutations come from tests/mutations.toml (hand-written: file, exact original snippet, replacement,
covering tests) and from rules applied to every integer kernel of the C runtime's family headers
(KERNEL_HEADERS: arithmetic operators, shift amounts, rounding constants, saturation bounds, loop bounds),
their portable code and their Cortex-M kernels alike. A Cortex-M kernel mutant is checked to compile for,
and run by the tests on, a core that compiles its path: DSP lines on the Cortex-M4, Helium lines on the
Cortex-M55 (QEMU; the host build never compiles them), ARMv6-M lines on the Cortex-M0. The DSP and Helium
kernels sit in ``#if LMU_PATH_ARM`` blocks (ids ``arm-...``), the rest is ``rt-...``.

Each mutant is applied IN PLACE in the working tree (the package is installed editable from it, and
converters/, targets/, firmware_templates/ are remapped into lmu_edge from there, so the mutated file
is what the tests import and what the C builds include) and restored in a ``finally`` block. A
snippet that no longer applies, or a C mutant that no longer compiles, is a harness ERROR, never a
kill. Exit status: 0 when the score (killed / (killed + survived)) reaches --min-score and no error.

With ``--workers N`` or ``--address``, the mutants run through ``lmu_edge.executor.run_tasks`` on Ray
instead, and nothing is mutated in this working tree: the driver packs the tree's files once (tracked
ones and untracked ones git does not ignore, as they are now), and each task unpacks them into a
temporary directory of its own, builds the installed layout there as links (scripts/typecheck.py's
tree: lmu_edge/, lmu_edge/targets -> targets/, ...) and puts it first on PYTHONPATH, applies its mutant
there, runs the covering tests there with the worker's Python and deletes the directory. The baseline
runs the same way, in this process, before the first mutant.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import importlib.util
import io
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
RUNTIME = "firmware_templates/lmu_runtime.h"
#: the family headers lmu_runtime.h includes that hold integer kernels (the rule mutants run over all of them)
KERNEL_HEADERS = tuple(
    f"firmware_templates/{name}.h"
    for name in (
        "lmu_config",
        "lmu_fixedpoint",
        "lmu_qlinear",
        "lmu_requant",
        "lmu_int16",
        "lmu_memory",
        "lmu_dense16_blocks",
        "lmu_dense16",
    )
)
#: every header of the runtime: a mutant of one is checked to compile before its tests run
RUNTIME_HEADERS = (RUNTIME, *KERNEL_HEADERS, "firmware_templates/lmu_float.h")
# host: fast (the one-rounding requantization is a DSP-path helper, checked on the host against lmu_mbqm32)
C_TESTS = [
    "tests/test_firmware_runtime.py",
    "tests/test_kernels_arm.py::test_one_rounding_requantization_equals_mbqm",
    "tests/test_kernels_arm.py::test_32_bit_multiply_requantization_equals_mbqm",
    "tests/test_int_matrix.py",
    "-k",
    "not cortex",
]
C_TESTS_M4 = [*C_TESTS[:-1], "not cortex or cortex-m4"]
#: path of a DSP / Helium kernel (#if LMU_PATH_ARM) -> (the runtime whose core compiles it, the tests that run
#: that path: the kernel-path tests and that core's matrix image, which holds the cases they lack, such as a
#: 10-bit state)
ARM_PATHS = {
    "dsp": ("cortex-m4", ["tests/test_kernels_arm.py", "tests/test_int_matrix.py", "-k", "dsp or cortex-m4"]),
    "mve": ("cortex-m55", ["tests/test_kernels_arm.py", "tests/test_int_matrix.py", "-k", "helium or cortex-m55"]),
}
#: the Cortex-M-only sections of the portable code (#if LMU_PATH_DSP / MVE / V6M) -> (the runtime whose core
#: compiles them, the kernel-path tests and that core's matrix image)
RUNTIME_PATHS = {
    "dsp": ("cortex-m4", ["tests/test_kernels_arm.py", "tests/test_int_matrix.py", "-k", "dsp or cortex-m4"]),
    "mve": ("cortex-m55", ["tests/test_kernels_arm.py", "tests/test_int_matrix.py", "-k", "helium or cortex-m55"]),
    "v6m": ("cortex-m0", ["tests/test_kernels_arm.py", "tests/test_int_matrix.py", "-k", "v6m or cortex-m0"]),
}

# (name, regex, replacement): applied to each line of each integer kernel, one match at a time
RULES = [
    ("add->sub", r"(?<=[\w)\]]) \+ (?=[\w(])", " - "),
    ("sub->add", r"(?<=[\w)\]]) - (?=[\w(])", " + "),
    ("acc+=->-=", r"\+= ", "-= "),
    ("mul->add", r"(?<=[\w)\]]) \* (?=[\w(])", " + "),
    ("shift+1", r">> (\w+)", r">> (\1 + 1)"),
    ("lshift-1", r"<< \((\w+) - 1\)", r"<< (\1)"),
    ("const-round", r"\(int64_t\)1 << 30", "(int64_t)1 << 29"),
    ("const-16", r", 16\)", ", 15)"),
    ("sat-bound", r"\(bits - 1\)", "(bits)"),
    ("loop-bound", r"(\w) < (q|L|d|r|substeps);", r"\1 < \2 - 1;"),
    ("cmp-strict", r" >= 0 \?", " > 0 ?"),
    ("cmp-off-by-one", r" > hi \?", " >= hi - 1 ?"),
    ("ternary-one", r"\? 1 : 0", "? 0 : 0"),
]


def arm_blocks(lines) -> list:
    """``(start, end)`` of each ``#if LMU_PATH_ARM`` block of a family header: the line of that ``#if`` and
    the line of the ``#elif`` / ``#else`` / ``#endif`` that closes its first branch (the DSP and Helium
    kernels; an ``#elif LMU_PATH_V6M`` or ``#else`` after it is portable or ARMv6-M code)."""
    out, depth, open_at = [], 0, None
    for i, line in enumerate(lines):
        s = line.strip()
        if s.startswith("#if"):
            depth += 1
            if open_at is None and re.match(r"#if LMU_PATH_ARM\b", s):
                open_at = (i, depth)
        elif s.startswith(("#elif", "#else", "#endif")):
            if open_at is not None and depth == open_at[1]:
                out.append((open_at[0], i))
                open_at = None
            if s.startswith("#endif"):
                depth -= 1
    return out


def kernel_lines(text: str):
    """The lines of a family header and the 0-based numbers of its portable integer code: every
    non-comment line past the include guard's ``#define`` and outside the ``#if LMU_PATH_ARM`` blocks (the
    helpers, the qlinear / softmax / pool kernels, the LMU_DEFINE_* memory kernels, their ARMv6-M and
    DSP-only sections)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("#define")) + 1
    arm = {i for a, b in arm_blocks(lines) for i in range(a, b + 1)}
    out = [
        i
        for i in range(start, len(lines))
        if i not in arm and lines[i].strip() and not lines[i].lstrip().startswith(("/*", "*", "//"))
    ]
    return lines, out


def runtime_line_paths(lines, idx) -> dict:
    """For each listed line of a family header's portable code, the Cortex-M path whose sections hold it ("dsp", "mve",
    "v6m"), or None for code the host compiles: ``#if LMU_PATH_DSP`` (also ``&& !LMU_PATH_MVE`` and
    ``|| LMU_PATH_MVE``), ``#if LMU_PATH_MVE``, ``#if LMU_PATH_V6M``; their ``#else`` and ``#if
    !LMU_PATH_DSP`` are host code. A mutant there only changes what that core runs."""
    stack: list = []  # per open #if: "dsp" / "mve" / "v6m" / "host" / None (neutral)
    want = set(idx)
    out = {}
    for i, line in enumerate(lines):
        s = line.strip()
        if s.startswith("#if"):
            m = re.match(r"#if (!?)LMU_PATH_(DSP|MVE|V6M)\b", s)
            stack.append(None if not m else ("host" if m.group(1) else m.group(2).lower()))
        elif s.startswith("#elif"):
            m = re.match(r"#elif LMU_PATH_(DSP|MVE|V6M)\b", s)
            stack[-1] = m.group(1).lower() if m else None
        elif s.startswith("#else"):
            stack[-1] = {"dsp": "host", "mve": "host", "v6m": "host", "host": "dsp"}.get(stack[-1])
        elif s.startswith("#endif"):
            stack.pop()
        elif i in want:
            inner = [p for p in stack if p is not None]
            out[i] = None if not inner or inner[-1] == "host" else inner[-1]
    return out


def arm_kernel_lines(text: str):
    """The lines of a family header and ``(index, path)`` of each code line of its ``#if LMU_PATH_ARM``
    blocks that a Cortex-M path compiles: "dsp" or "mve" inside ``#if LMU_PATH_DSP`` / ``#if LMU_PATH_MVE``
    (not their ``#else``), "dsp" for the code both paths share (the block compiles only when one of them is
    on). Comments and preprocessor lines are left out."""
    lines = text.splitlines()
    out = []
    for start, end in arm_blocks(lines):
        out += _arm_block_lines(lines, start, end)
    return lines, out


def _arm_block_lines(lines, start: int, end: int) -> list:
    stack: list = [None]  # per open #if: the path it selects, or None (the block's own #if, #else branches)
    keep: list = [False]  # per open #if: whether its #else runs on the same path (#ifdef __OPTIMIZE__)
    out = []
    for i in range(start + 1, end):
        s = lines[i].strip()
        if s.startswith("#ifdef __OPTIMIZE__"):  # both branches run on the enclosing path (-O2 and -O0 tests)
            stack.append(stack[-1] if len(stack) > 1 else None)
            keep.append(True)
        elif s.startswith("#if"):
            m = re.match(r"#if LMU_PATH_(DSP|MVE)( && !LMU_PATH_MVE)?$", s)
            stack.append(m.group(1).lower() if m else None)
            keep.append(False)
        elif s.startswith("#elif"):
            m = re.match(r"#elif LMU_PATH_(DSP|MVE)$", s)
            stack[-1] = m.group(1).lower() if m else None
        elif s.startswith("#else"):
            if not keep[-1]:
                stack[-1] = None
        elif s.startswith("#endif"):
            stack.pop()
            keep.pop()
        elif s and not s.startswith(("#", "/*", "*", "//")):
            inner = stack[1:]  # stack[0] is the block's #if LMU_PATH_ARM
            if None in inner:
                continue
            out.append((i, inner[-1] if inner else "dsp"))
    return out


DEFINITION = re.compile(r"^(?:#define\s+(\w+)|[A-Za-z_][^;(=]*?\b(\w+)\s*\()")


def line_keys(lines, idx) -> dict:
    """A name for each listed line that survives edits elsewhere in the file: the function or macro
    whose definition holds it (the last definition starting in column 0 above it), a hash of the
    line's text, and, for a line repeated within that definition, which repeat it is. Mutation ids
    built from it stay put when lines are added above, so [equivalent] entries do not go stale."""
    out, seen, owner = {}, {}, "top"
    want = set(idx)
    for i, line in enumerate(lines):
        m = DEFINITION.match(line)
        if m:
            owner = m.group(1) or m.group(2)
        if i in want:
            h = hashlib.sha1(line.strip().encode()).hexdigest()[:6]
            n = seen[(owner, h)] = seen.get((owner, h), -1) + 1
            out[i] = f"{owner}-{h}" + (f".{n}" if n else "")
    return out


def _rule_mutants(lines, idx, file: str, prefix: str, tests_for, extra, code_only: bool = False):
    """One mutant per rule match on each listed line; ``code_only``: not in a trailing comment (such a
    mutant changes nothing the compiler sees). Ids: ``prefix-<function>-<line hash>-<rule>-<k>``
    (:func:`line_keys`), the line number is only in the record."""
    muts = []
    keys = line_keys(lines, [i for i, _ in idx])
    for i, path in idx:
        line = lines[i]
        comment = line.find("/*") if code_only and "/*" in line else len(line)
        for name, pat, rep in RULES:
            for k, m in enumerate(re.finditer(pat, line)):
                new = line[: m.start()] + m.expand(rep) + line[m.end() :]
                if name == "shift+1" and m.group(1) in ("31", "63"):  # the compiler refuses a full-width shift
                    name_k, new = "shift-1", line[: m.start()] + f">> {int(m.group(1)) - 1}" + line[m.end() :]
                else:
                    name_k = name
                if new != line and m.start() < comment:
                    muts.append(
                        {
                            "id": f"{prefix}-{keys[i]}-{name_k}-{k}",
                            "file": file,
                            "line": i,
                            "original": line,
                            "replacement": new,
                            "tests": tests_for(path),
                            "c": True,
                            **extra(path),
                        }
                    )
    return muts


def generated():
    """The rule mutants of every family header: the portable code on the host (or on the core of its
    Cortex-M-only section), the DSP and Helium kernels on their cores."""
    muts = []
    for file in KERNEL_HEADERS:
        text = (ROOT / file).read_text()
        lines, idx = kernel_lines(text)
        # the generic dense memory's row loop starts past the rows the DSP kernels did (i0 > 0) only on a DSP
        # core: its mutants also run the Cortex-M4 matrix
        start = next((i for i, line in enumerate(lines) if line.startswith("#define LMU_DEFINE_DENSE_MEMORY")), -1)
        end = next((i for i in range(start, len(lines)) if not lines[i].rstrip().endswith("\\")), -1)
        paths = runtime_line_paths(lines, idx)
        muts += _rule_mutants(
            lines,
            [(i, paths.get(i) or ("m4" if start <= i <= end else None)) for i in idx],
            file,
            "rt",
            lambda p: RUNTIME_PATHS[p][1] if p in RUNTIME_PATHS else C_TESTS_M4 if p == "m4" else C_TESTS,
            lambda p: {"core": RUNTIME_PATHS[p][0], "path": p} if p in RUNTIME_PATHS else {},
            code_only=True,
        )
        lines, arm_idx = arm_kernel_lines(text)
        muts += _rule_mutants(
            lines,
            arm_idx,
            file,
            "arm",
            lambda p: ARM_PATHS[p][1],
            lambda p: {"core": ARM_PATHS[p][0], "path": p},
            code_only=True,
        )
    return muts


def load(path: Path):
    data = tomllib.loads(path.read_text())
    muts = data.get("mutation", [])
    for m in muts:
        m["c"] = m["file"].endswith((".h", ".c", ".j2"))
    return muts + generated()


def compiles(path: Path, core: str | None = None) -> str:
    """'' when the mutated runtime still compiles (-Werror), else the first error line: host gcc, or
    arm-none-eabi-gcc with the flags of runtime ``core`` (which compiles that Cortex-M kernel path)."""
    if core is None:
        cmd = ["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-fsyntax-only"]
    else:
        from lmu_edge import toolchain

        try:
            cmd = [toolchain.arm_gcc(), *toolchain.compile_flags(core, ["-fsyntax-only"])]
        except toolchain.ToolMissingError as e:
            return str(e)
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "t.c"
        src.write_text('#include "lmu_runtime.h"\nint main(void) { return 0; }\n')
        r = subprocess.run([*cmd, f"-I{path.parent}", str(src)], capture_output=True, text=True)
        return "" if r.returncode == 0 else (r.stderr.strip().splitlines() or ["?"])[0]


def _pytest(tests, python: str, root: Path, env=None, timeout=None):
    """The covering tests, run in ``root`` with ``-P``: the working directory is not put first on sys.path,
    so a checkout's own lmu_edge/ folder cannot shadow the installed layout that PYTHONPATH (a private
    copy, a clone) or the editable install gives (which remaps targets/, converters/, ... into lmu_edge)."""
    cmd = [python, "-P", "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *tests]
    return subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=timeout)


def run_one(m, python: str, timeout: int, root: Path = ROOT, env=None):
    """Apply mutant ``m`` to the file under ``root``, run its covering tests, restore the file:
    ``(status, why)``."""
    path = root / m["file"]
    orig = path.read_text()
    if "line" in m:  # rule-generated: the line it was made from (the same code may recur, e.g. in macros)
        lines = orig.split("\n")
        if m["line"] >= len(lines) or lines[m["line"]] != m["original"]:
            return "ERROR", f"line {m['line'] + 1} of {m['file']} changed since the list was made"
        lines[m["line"]] = m["replacement"]
        mutated = "\n".join(lines)
    elif orig.count(m["original"]) != 1:
        return "ERROR", f"snippet occurs {orig.count(m['original'])} times (must be once): re-target it"
    else:
        mutated = orig.replace(m["original"], m["replacement"], 1)
    try:
        path.write_text(mutated)
        if m["file"] in RUNTIME_HEADERS:
            err = compiles(path, m.get("core"))
            if err:
                return "ERROR", f"does not compile: {err}"
        try:
            r = _pytest(m["tests"], python, root, env, timeout)
        except subprocess.TimeoutExpired:
            return "KILLED", f"timeout after {timeout}s (counts as a kill: the mutant hangs)"
        if r.returncode == 0:
            return "SURVIVED", ""
        if r.returncode == 1:
            failed = re.findall(r"^((?:FAILED|ERROR) \S+.*)$", r.stdout, re.M)
            return "KILLED", failed[0][:200] if failed else "a test failed"
        return "ERROR", f"pytest exit {r.returncode}: {(r.stdout + r.stderr).strip().splitlines()[-1:]}"
    finally:
        path.write_text(orig)


def pack_tree(root: Path = ROOT) -> bytes:
    """The working tree's files as they are now (tracked, and untracked ones git does not ignore), as a
    gzip'd tar: what each private copy is unpacked from (shipped once to the Ray workers)."""
    ls = ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    names = subprocess.run(ls, cwd=root, capture_output=True, check=True).stdout.decode().split("\0")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as tar:
        for name in sorted(set(names)):
            if name and (root / name).is_file():  # a deleted tracked file is not in the tree either
                tar.add(root / name, arcname=name, recursive=False)
    return buf.getvalue()


# imported by every interpreter started in a private copy (it is first on PYTHONPATH): the editable
# install's finder maps lmu_edge.targets & co. to the main checkout; without it, an lmu_edge picked up
# from a copy's own folder fails to import instead of quietly testing the unmutated tree
_SITECUSTOMIZE = """import sys
sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")]
"""


def private_tree(tree: bytes, where: Path):
    """Unpack ``tree`` into ``where``/tree and build the installed layout as links in ``where``/site:
    ``(root, environment)`` for running Python on the copy."""
    root, site = where / "tree", where / "site"
    with tarfile.open(fileobj=io.BytesIO(tree)) as tar:
        tar.extractall(root, filter="data")
    spec = importlib.util.spec_from_file_location("_typecheck", root / "scripts" / "typecheck.py")
    typecheck = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(typecheck)
    typecheck.build_tree(root, site)
    (site / "sitecustomize.py").write_text(_SITECUSTOMIZE)
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    return root, dict(os.environ, PYTHONPATH=path)


def run_private(tree: bytes, cache: str, timeout: int, m):
    """One task on a worker: ``tree`` unpacked into a temporary directory, mutant ``m`` applied there and
    its covering tests run there with this interpreter; the directory is deleted. ``m`` a list of
    tests instead of a mutant: run them unmutated (the baseline), ``("PASSED"|"FAILED", output)``."""
    Path(cache).mkdir(parents=True, exist_ok=True)  # on another node of a cluster: its own cache
    with tempfile.TemporaryDirectory(prefix="lmu-edge-mutant-") as d:
        root, env = private_tree(tree, Path(d))
        env["LMU_EDGE_TEST_CACHE"] = cache
        if isinstance(m, list):
            r = _pytest(m, sys.executable, root, env)
            return ("PASSED", "") if r.returncode == 0 else ("FAILED", (r.stdout + r.stderr).strip()[-2000:])
        return run_one(m, sys.executable, timeout, root, env)


def _progress(done: int, total: int, left: float, per_worker: dict) -> None:
    """A progress line on stderr after each finished mutant: done / total, time left, per-worker counts."""
    eta = "?" if not math.isfinite(left) else f"{left / 60:.1f} min"
    workers = ", ".join(f"{w} {n}" for w, n in sorted(per_worker.items()))
    print(f"mutate: {done}/{total} done, about {eta} left (per worker: {workers})", file=sys.stderr, flush=True)


def _terminate(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")  # so the finally block restores the mutated file


def main(argv=None) -> int:
    signal.signal(signal.SIGTERM, _terminate)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--sample", type=int, help="run a fixed, evenly spaced sample of N mutations")
    ap.add_argument("--only", nargs="+", help="run these mutation ids")
    ap.add_argument("--ci", action="store_true", help="run the fixed CI sample (ci_sample in the list file)")
    ap.add_argument(
        "--baseline-passed",
        action="store_true",
        help="skip the unmutated run of the covering tests: they just passed on this same tree (scripts/test.sh "
        "passes it after a green main run)",
    )
    ap.add_argument("--file", default=str(ROOT / "tests" / "mutations.toml"))
    ap.add_argument("--timeout", type=int, default=1800)
    ap.add_argument("--min-score", type=float, default=0.95)
    ap.add_argument(
        "--workers",
        type=int,
        default=0,
        help="run the mutants on a local Ray instance with N workers, each in a private copy (0: here, in place)",
    )
    ap.add_argument("--address", help="run the mutants on this Ray cluster (HOST:PORT), each in a private copy")
    a = ap.parse_args(argv)
    if a.workers < 0:
        ap.error(f"--workers must be 0 (in this process, in place) or more, not {a.workers}")
    muts = load(Path(a.file))
    if a.ci:
        a.only = tomllib.loads(Path(a.file).read_text())["ci_sample"]
    if a.only:
        muts = [m for m in muts if m["id"] in set(a.only)]
    elif a.sample:
        hand = [m for m in muts if not m["id"].startswith(("rt-", "arm-"))]
        gen = [m for m in muts if m["id"].startswith(("rt-", "arm-"))]
        step = max(1, len(gen) // max(1, a.sample - len(hand[: a.sample // 2])))
        muts = hand[: a.sample // 2] + gen[::step][: a.sample - len(hand[: a.sample // 2])]
    if a.list:
        for m in muts:
            core = f"  core: {m['core']}" if m.get("core") else ""
            print(f"{m['id']:50s} {m['file']}  tests: {' '.join(m['tests'])}{core}")
        print(f"{len(muts)} mutations")
        return 0
    # mutants shown to compute the same integers as the original (a reason each, in the list file): run
    # like the rest; if one survives it is printed with its reason and left out of the score
    equivalent = tomllib.loads(Path(a.file).read_text()).get("equivalent", {})
    unknown = sorted(set(equivalent) - {m["id"] for m in load(Path(a.file))})
    if unknown:
        print(f"harness error: [equivalent] names mutations that do not exist (re-target them): {unknown}")
        return 1
    counts = {"KILLED": 0, "SURVIVED": 0, "EQUIVALENT": 0, "ERROR": 0}
    t0 = time.time()
    # tests/test_int_matrix.py keeps its conversions and Python reference hashes here, keyed by a hash of
    # the package's Python and templates: a mutant of a C header then rebuilds only the C (5 s, not 65 s)
    cache = tempfile.TemporaryDirectory(prefix="lmu-edge-mutate-")
    seed = os.environ.get("LMU_EDGE_TEST_CACHE")  # scripts/test.sh's: its main run's conversions, reused here
    if seed and Path(seed).is_dir():
        shutil.copytree(seed, cache.name, dirs_exist_ok=True)
    os.environ["LMU_EDGE_TEST_CACHE"] = cache.name
    private = a.workers > 0 or a.address is not None
    tree = pack_tree() if private else b""  # the tree every private copy is made from, as it is now
    # every distinct set of covering tests must pass on the unmutated tree first (a mutant "killed" by a
    # test that fails anyway would be a false kill); this also fills the cache above
    for tests in dict.fromkeys(tuple(m["tests"]) for m in muts):
        if a.baseline_passed:
            break
        if private:
            ok, out = run_private(tree, cache.name, a.timeout, list(tests))
        else:
            r = _pytest(tests, sys.executable, ROOT)
            ok, out = ("PASSED" if r.returncode == 0 else "FAILED"), (r.stdout + r.stderr).strip()[-2000:]
        if ok != "PASSED":
            print(f"harness error: the unmutated tree fails {' '.join(tests)}:")
            print(out)
            return 1
    sets = len(set(tuple(m["tests"]) for m in muts))
    if a.baseline_passed:
        print(f"baseline: {sets} test sets passed unmutated in the main run (--baseline-passed)")
    else:
        print(f"baseline: {sets} test sets pass unmutated ({time.time() - t0:.0f}s)")
    from lmu_edge import LmuEdgeError
    from lmu_edge.executor import run_tasks

    if private:  # the packed tree travels once, with the function (the executor puts it in Ray's store once)
        fn = functools.partial(run_private, tree, cache.name, a.timeout)
    else:
        fn = functools.partial(run_one, python=sys.executable, timeout=a.timeout)
    try:
        results = run_tasks(fn, [(m,) for m in muts], workers=a.workers, address=a.address, progress=_progress)
    except LmuEdgeError as e:  # Ray missing, not reachable, a bad --workers: one line, no traceback
        print(f"harness error: {e}")
        return 1
    for n, (m, res) in enumerate(zip(muts, results, strict=True), 1):
        status, why = res.value if res.error is None else ("ERROR", f"the task failed: {res.error}")
        if res.attempts > 1:
            why += f" ({res.attempts} attempts: a worker was lost)"
        if m["id"] in equivalent:
            if status == "SURVIVED":
                status, why = "EQUIVALENT", equivalent[m["id"]]
            elif status == "KILLED":
                why += " (listed as equivalent, yet killed: correct its reason)"
        counts[status] += 1
        print(f"[{n}/{len(muts)}] {status:8s} {m['id']}  {why}  ({res.seconds:.0f}s)", flush=True)
    scored = counts["KILLED"] + counts["SURVIVED"]
    score = counts["KILLED"] / scored if scored else 0.0
    print(
        f"mutation score {score:.1%}: {counts['KILLED']} killed, {counts['SURVIVED']} survived, "
        f"{counts['EQUIVALENT']} equivalent (not scored), {counts['ERROR']} harness errors; "
        f"wall time {time.time() - t0:.0f}s"
    )
    cache.cleanup()
    return 0 if score >= a.min_score and counts["ERROR"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
