"""Running a TFLite artifact (:mod:`.tflite`): LiteRT, TFLite Micro's host interpreter, and the legacy
``tflite-runtime`` in a separate Python (:class:`WorkerSession`), each through :mod:`._tflite_session`;
the ``run``, ``stream`` and ``check`` of the target contract, and TFLite Micro's arena size for the report."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from lmu_edge.errors import ArtifactError
from lmu_edge.metrics import relative_error
from lmu_edge.registry import require

from . import _tflite_session

MODEL, IO = "model.tflite", "io.json"
PYTHON_ENV = "LMU_EDGE_TFLITE_RUNTIME_PYTHON"


def litert():
    """LiteRT's interpreter module (a one-line error naming the extra where it is missing)."""
    return require("ai_edge_litert.interpreter", "tflite", "running TFLite models in LiteRT")


def _io(artifact) -> dict:
    return json.loads(artifact.data_path(IO).read_text())


def tflm_arena_size(model: bytes, io: dict) -> int:
    """Bytes of tensor arena TFLite Micro uses for the model (its RecordingMicroAllocator's total)."""
    micro = require("tflite_micro.python.tflite_micro.runtime", "tflite", "running TFLite Micro")
    b = _tflite_session.MicroBackend(micro, model, io, arena_size=max(1 << 16, len(model) * 16), grow=True)
    b.invoke({d["name"]: np.zeros(d["shape"], d["dtype"]) for d in io["inputs"]})
    with tempfile.TemporaryFile() as f:
        with _redirect_stderr(f.fileno()):
            b.interp.print_allocations()
        f.seek(0)
        text = f.read().decode(errors="replace")
    found = re.search(r"Arena allocation total (\d+) bytes", text)
    if not found:
        raise RuntimeError(f"TFLite Micro did not report its arena use: {text[:200]!r}")
    return int(found.group(1))


@contextlib.contextmanager
def _redirect_stderr(fd):
    """Send file descriptor 2 to ``fd`` (TFLite Micro's C++ code writes there directly)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        os.dup2(fd, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


class WorkerSession:
    """The ``tflite-runtime`` runtime: :mod:`._tflite_session` run by another Python, over pipes."""

    def __init__(self, artifact):
        py = artifact.manifest.get("options", {}).get("tflite_runtime_python") or os.environ.get(PYTHON_ENV)
        if not py:
            raise ArtifactError(
                f"the 'tflite-runtime' runtime runs in a separate Python that has the "
                f"tflite-runtime package (numpy < 2); set {PYTHON_ENV}=/path/to/python "
                f"(or the option tflite_runtime_python)"
            )
        script = Path(_tflite_session.__file__)
        model_dir = artifact.data_path(MODEL).parent  # private copies of the sealed bytes (io.json: by _io)
        self.proc = subprocess.Popen(
            [py, str(script), str(model_dir)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )

    def _ask(self, arr):
        try:
            _tflite_session.write_npy(self.proc.stdin, arr)
            return np.lib.format.read_array(_tflite_session.PipeReader(self.proc.stdout))
        except (OSError, EOFError, ValueError):
            assert self.proc.stderr is not None  # Popen(stderr=PIPE)
            err = self.proc.stderr.read().decode(errors="replace").strip().splitlines()[-3:]
            raise ArtifactError(f"the tflite-runtime worker failed: {' | '.join(err)}") from None

    def reset(self, batch: int = 1):
        """Zero the worker's state (one stream: the worker runs batch 1)."""
        self._ask(np.float64(0))

    def step(self, x_t):
        """One step of one stream: ``x_t`` ``(F,)`` in, the output out."""
        return self._ask(np.asarray(x_t, dtype=np.float64).reshape(-1))

    def run(self, x):
        """Whole sequences ``(N, T, F)`` from the zero state; every step's output."""
        return self._ask(x)

    def close(self):
        """End the worker (closing its input ends its loop)."""
        with contextlib.suppress(Exception):
            assert self.proc.stdin is not None  # Popen(stdin=PIPE)
            self.proc.stdin.close()
            self.proc.wait(timeout=10)

    __del__ = close


def _session(artifact, runtime):
    io = _io(artifact)
    if runtime == "litert":
        return _tflite_session.Session(
            io, _tflite_session.SignatureBackend(litert().Interpreter, artifact.data_path(MODEL))
        )
    if runtime == "tflm":
        micro = require("tflite_micro.python.tflite_micro.runtime", "tflite", "running TFLite Micro")
        arena = artifact.manifest.get("report", {}).get("tflm_arena_bytes")
        arena = int(arena) + 1024 if arena else 1 << 16
        return _tflite_session.Session(
            io, _tflite_session.MicroBackend(micro, artifact.sealed_bytes(MODEL), io, arena, grow=True)
        )
    if runtime == "tflite-runtime":
        return WorkerSession(artifact)
    raise ArtifactError(f"tflite: unknown runtime {runtime!r}")


def run(artifact, x, runtime):
    """Run the step model over ``x`` ``(N, T, F)`` in ``runtime``; what the source model's predict returns."""
    s = _session(artifact, runtime)
    if isinstance(s, WorkerSession):
        y = s.run(x)
        s.close()
    else:
        y = _tflite_session.run_sequences(s, x)
    return y if artifact.graph.output_is_sequence else y[:, -1]


class _Stream:
    """``reset(batch)`` / ``step(x_t)``: one session per batch row (every runtime alike: TFLite Micro runs the
    stored batch of 1; LiteRT could take every row in one call, ``tests/test_tflite_contract.py``)."""

    def __init__(self, artifact, runtime):
        self.artifact, self.runtime = artifact, runtime
        self.sessions = []
        self.reset()

    def reset(self, batch: int = 1):
        while len(self.sessions) < batch:
            self.sessions.append(_session(self.artifact, self.runtime))
        self.sessions = self.sessions[:batch]
        for s in self.sessions:
            s.reset()

    def step(self, x_t):
        x = np.asarray(x_t, dtype=np.float64)
        if x.ndim == 1:
            return self.sessions[0].step(x)
        return np.stack([s.step(row) for s, row in zip(self.sessions, x, strict=True)])


def stream(artifact, runtime):
    """The step model in ``runtime``, one sample at a time (``reset(batch)``, ``step(x_t)``)."""
    return _Stream(artifact, runtime)


def check(artifact, x) -> dict:
    """Errors against the source model in each runtime that is installed (LiteRT is checked by convert)."""
    out: dict[str, Any] = {}
    ref = artifact.reference(x[:2])
    for rt in ("tflm",):
        try:
            y = artifact.run(x[:2], runtime=rt)
        except Exception as e:  # a runtime that cannot run the model is reported, not hidden
            out[f"error_vs_source_{rt}"] = f"failed: {e}"
            continue
        out[f"error_vs_source_{rt}"] = relative_error(y, ref)
    return out
