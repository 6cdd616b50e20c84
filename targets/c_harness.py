"""Running a C artifact's test harness (``OUT/harness/``): the input and output files it reads and writes, and
the harness built for a runtime (the host gcc, or a Cortex-M image under QEMU) run on them. Streaming through
ctypes and the checks ``verify`` makes are in :mod:`lmu_edge.targets.c`."""

from __future__ import annotations

import functools
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from .. import parallel, toolchain
from ..errors import ArtifactError, LmuEdgeError
from .c_build import make

#: the input file's dtype codes of the integer APIs (4: float32)
DTYPE_CODES = {np.int8: 1, np.int16: 2}


def write_input(path, data: np.ndarray, dtype_code: int | None = None):
    """Write the harness's input file: ``"LMUX"``, int32 dtype code (1 int8, 2 int16, 4 float32), N, T, F, data.

    ``data`` is int8 / int16 (quantized models' integer API) or float32, shape ``(N, T, F)``."""
    data = np.asarray(data)
    if dtype_code is None:
        dtype_code = DTYPE_CODES.get(data.dtype.type, 4)
        data = data if dtype_code != 4 else data.astype(np.float32)
    N, T, F = data.shape
    with open(path, "wb") as f:
        f.write(b"LMUX")
        f.write(np.array([dtype_code, N, T, F], dtype="<i4").tobytes())
        f.write(np.ascontiguousarray(data).tobytes())


def read_output(path: Path, n_out: int) -> np.ndarray:
    """The harness's output file: ``"LMUY"``, the same header as the input's, the outputs ``(N, T, F)``."""
    raw = Path(path).read_bytes()
    if raw[:4] != b"LMUY":
        raise LmuEdgeError(f"{path}: the harness wrote no output (bad magic)")
    code, N, T, F = np.frombuffer(raw[4:20], dtype="<i4")
    dt = {1: np.int8, 2: np.int16}.get(int(code), np.float32)
    return np.frombuffer(raw[20:], dtype=dt).reshape(N, T, F)


#: host runs of at least this many steps (sequences times steps) run their sequences in several processes
HOST_SPLIT_STEPS = 4096


def _exec(cmd_prefix: list, runtime: str, code: int, n_out: int, data: np.ndarray) -> tuple:
    """One run of the harness on ``data``: ``(outputs, raw states or None, its stdout)``."""
    with tempfile.TemporaryDirectory(prefix="lmu-edge-c-") as tmp_name:
        tmp = Path(tmp_name)
        write_input(tmp / "lmu_in.bin", data, code)
        cmd = cmd_prefix + (["lmu_in.bin", "lmu_out.bin"] if runtime == "host" else [])
        r = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=1800)
        if r.returncode != 0:
            raise LmuEdgeError(
                f"the {runtime} harness failed (exit {r.returncode}): "
                f"{' / '.join((r.stdout + r.stderr).strip().splitlines()[-3:])}"
            )
        y = read_output(tmp / "lmu_out.bin", n_out)
        states = np.fromfile(tmp / "lmu_state.bin", np.uint8) if code & 0x100 else None
    return y, states, r.stdout


def run_native(art, data: np.ndarray, runtime: str, with_state: bool = False, exe: Path | None = None) -> tuple:
    """Run int8 / int16 (quantized artifacts: int8, int16x8, int16) or float32 data ``(N, T, F)`` through the
    compiled harness.

    Returns ``(outputs (N, T, F_out), stats)``; stats has ``steps``, ``ticks`` and ``state_bytes``. With
    ``with_state`` also the raw state struct after every step, ``(N, T, state_bytes)`` uint8, as written by
    that runtime (the harness's 0x100 flag): ``(outputs, stats, states)``. ``exe``: the host harness where the
    caller built it already (:func:`make`'s path)."""
    code = DTYPE_CODES.get(data.dtype.type, 4)
    if runtime == "host":
        exe = exe or make(art.path, "harness_host", sealed=getattr(art, "sealed", None))
        cmd_prefix = [str(exe)]
    elif runtime in toolchain.ARM_RUNTIMES:
        rt = toolchain.ARM_RUNTIMES[runtime]
        if rt.integer_only and not art.manifest.get("c", {}).get("quantized"):
            raise ArtifactError(f"runtime {runtime} runs the integer path only (no FPU): convert with --quantize int8")
        qemu = toolchain.need("qemu-system-arm", "qemu-system-arm")
        exe = make(art.path, f"model_{rt.tag}.elf", sealed=getattr(art, "sealed", None))
        cmd_prefix = toolchain.qemu_command(runtime, exe, qemu)
    else:
        raise ArtifactError(f"target 'c' has no runtime {runtime!r}; its runtimes: {', '.join(toolchain.RUNTIMES)}")
    parts = [data]
    if (
        runtime == "host"
        and not with_state
        and data.shape[0] >= 2
        and data.shape[0] * data.shape[1] >= HOST_SPLIT_STEPS
    ):
        # the host build runs each sequence from its own reset: blocks of sequences in processes side by side
        # give the same outputs (issue 54: 4 s of the psMNIST-sized conversion's verification, one core)
        cuts = np.array_split(np.arange(data.shape[0]), min(parallel.threads_available(), data.shape[0]))
        parts = [data[c[0] : c[-1] + 1] for c in cuts if c.size]
    run = functools.partial(_exec, cmd_prefix, runtime, code | (0x100 if with_state else 0), art.graph.output_features)
    if len(parts) == 1:
        done = [run(data)]
    else:
        with ThreadPoolExecutor(len(parts)) as pool:
            done = list(pool.map(run, parts))
    y = np.concatenate([d[0] for d in done], axis=0) if len(done) > 1 else done[0][0]
    states = done[0][1]
    stats: dict[str, float] = {}
    for _, _, out in done:
        got: dict[str, int] = {}
        for line in out.splitlines():
            if line.startswith("lmu-edge:"):
                got = {k: int(v) for k, v in (kv.split("=") for kv in line.split()[1:])}
        for k, v in got.items():  # steps and ticks add up over the blocks; the state's size is one
            stats[k] = v if k == "state_bytes" else stats.get(k, 0) + v
    if runtime != "host" and stats.get("steps"):
        stats["instructions_per_step"] = toolchain.instructions(stats["ticks"], runtime) / stats["steps"]
    if states is not None:
        return y, stats, states.reshape(y.shape[0], y.shape[1], -1)
    return y, stats
