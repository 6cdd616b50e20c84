"""``Artifact``: an output directory a target wrote, and how to open, check and run it.

:func:`lmu_edge.conversion.convert` writes one. Every artifact directory holds ``artifact.json`` (the manifest: target,
options, files, tolerance), ``source.lmu.npz`` (the model it came from, as
converted), ``model.lmu.npz`` (the recurrent graph it implements),
``report.json`` (what the conversion measured), and the target's own files.
Opening one checks its manifest and seal before anything in it is read or run.
"""

from __future__ import annotations

import contextlib
import math
import os
import tokenize
import zipfile
from pathlib import Path
from typing import Any, Optional

import numpy as np

from . import ir, irfile, limits, outdir, reference, registry
from .errors import ArtifactError, LmuEdgeError, VerificationError
from .metrics import relative_error
from .targets import CheckedTarget, Target
from .targets import load as load_target

MANIFEST = "artifact.json"
ARTIFACT_FORMAT = "lmu-edge-artifact"
ARTIFACT_VERSION = 1
#: other names users write for a quantization mode (TFLite and ONNX users say float32)
QUANTIZE_ALIASES = {"float32": "float"}
#: target options that name a program to start (a side environment's Python): honoured only in the process
#: that convert was given them in; an opened artifact's manifest never names a program the receiver runs
PROGRAM_OPTIONS = ("tflite_runtime_python", "sinabs_python")
DEFAULT_TOLERANCE = 1e-4  # float artifacts: fold budget 1e-6 on the impulse response, plus float32 rounding
# of dense layers, stays well inside this relative error; quantized targets set their own


class Artifact:
    """An emitted model: ``run(x)`` in its real runtime, ``stream()`` one sample at a time."""

    def __init__(self, path, manifest: dict, sealed: Optional[dict] = None):
        self.path = Path(path)
        self.manifest = manifest
        #: the seal's files and SHA-256s as checked when the artifact was opened (None while convert writes it):
        #: code is run only from bytes that match it (:meth:`sealed_bytes`)
        self.sealed = sealed
        self.target = manifest["target"]
        self.module: Target = load_target(self.target)
        self._graph: Optional[ir.Graph] = None
        self._source: Optional[ir.Graph] = None
        self._quantized: Optional[ir.Graph] = None
        self._private: dict = {}  # rel -> the private copy of its sealed bytes (data_path)

    def __repr__(self) -> str:
        return f"Artifact(target={self.target!r}, path={str(self.path)!r})"

    def sealed_bytes(self, rel: str) -> bytes:
        """The bytes of the artifact's file ``rel``, read once and checked against the seal (when opened by
        :func:`open_artifact`); :class:`ArtifactError` if it is missing, a link, or changed since."""
        return outdir.read_sealed(self.path, rel, self.sealed)

    def data_path(self, rel: str) -> Path:
        """Where a reader that takes a path parses the artifact's data file ``rel`` (an IR file, ``model.tflite``,
        ``weights.npz``) from. For an opened artifact: a private copy of the bytes :meth:`sealed_bytes` read once
        and checked, in a folder of this process's (mode 0700, removed with the artifact or at exit), so that a
        file swapped in the artifact after the check is never parsed. While convert writes it: the file itself."""
        if self.sealed is None:
            return self.path / rel
        if rel not in self._private:
            if rel not in self.sealed:
                raise ArtifactError(f"{self.path}: {rel[:80]!r} is not a file lmu-edge wrote; convert the model again")
            data = self.sealed_bytes(rel)
            if not self._private:
                import shutil
                import tempfile
                import weakref

                private = Path(tempfile.mkdtemp(prefix="lmu-edge-sealed-"))  # mode 0700
                self._private[""] = private
                weakref.finalize(self, shutil.rmtree, private, True)
            dst = self._private[""] / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            self._private[rel] = dst
        return self._private[rel]

    @property
    def graph(self) -> ir.Graph:
        """The recurrent graph the artifact implements."""
        if self._graph is None:
            with self._readable():
                self._graph = irfile.load_ir(self.data_path("model.lmu.npz"))
        return self._graph

    @property
    def source(self) -> ir.Graph:
        """The model it was converted from (parallel form, float)."""
        if self._source is None:
            with self._readable():
                self._source = irfile.load_ir(self.data_path("source.lmu.npz"))
        return self._source

    @property
    def quantized(self) -> Optional[ir.Graph]:
        """The integer graph a quantized artifact runs (``quantized.lmu.npz``); None for a float one."""
        rel = "quantized.lmu.npz"
        if self._quantized is None and (rel in self.sealed if self.sealed is not None else (self.path / rel).is_file()):
            with self._readable():
                self._quantized = irfile.load_ir(self.data_path(rel))
        return self._quantized

    @property
    def runtimes(self) -> tuple:
        """The runtimes this artifact runs in (the first is not necessarily the default)."""
        return tuple(self.module.RUNTIMES)

    @property
    def tolerance(self) -> Optional[float]:
        """Largest accepted relative error against the source model (None: measured, not enforced)."""
        t = self.manifest.get("tolerance", DEFAULT_TOLERANCE)
        return None if t is None else float(t)  # a number: open_artifact checked the manifest

    def _runtime(self, runtime: Optional[str]) -> str:
        runtime = runtime or self.module.DEFAULT_RUNTIME
        if runtime not in self.module.RUNTIMES:
            raise ArtifactError(
                f"target {self.target!r} has no runtime {runtime!r}; its runtimes: {', '.join(self.module.RUNTIMES)}"
            )
        return runtime

    def run(self, x, runtime: Optional[str] = None) -> np.ndarray:
        """Float in ``(N, T, F)`` or ``(T, F)``, float out: what the source model's predict returns."""
        x, batched = reference.check_input(self.graph, x)
        with self._readable():
            y = self.module.run(self, x, self._runtime(runtime))
        return y if batched else y[0]

    def stream(self, runtime: Optional[str] = None):
        """An object with ``reset(batch=1)`` and ``step(x_t)``, driving the artifact one sample at a time."""
        with self._readable():
            s = self.module.stream(self, self._runtime(runtime))
        return s if self.sealed is None else _Guarded(s, self._readable)

    @contextlib.contextmanager
    def _readable(self):
        """A received artifact's data files that pass the seal yet cannot be read by their runtime (damaged and
        resealed: the seal catches accidents, not edits) are refused in one line, naming the artifact; while
        convert writes one, such an exception is a bug of lmu-edge's and stays one."""
        try:
            yield
        except LmuEdgeError as e:  # a reader names the private copy it parsed: name the artifact's file instead
            private = str(self._private.get("", ""))
            if not private or private not in str(e):
                raise
            raise type(e)(str(e).replace(private, str(self.path))) from None
        except (KeyboardInterrupt, SystemExit):
            raise
        except _UNREADABLE as e:
            if self.sealed is None:
                raise
            msg = " ".join(str(e).split())
            if self._private:
                msg = msg.replace(str(self._private[""]), str(self.path))
            raise ArtifactError(
                f"{self.path}: its files pass the seal but cannot be run ({type(e).__name__}: {msg[:200]}); "
                f"convert the model again"
            ) from None

    def reference(self, x) -> np.ndarray:
        """The source model's output (float64 reference simulation)."""
        return reference.simulate(self.source, x)

    def verify(self, x, runtime: Optional[str] = None, tolerance: Optional[float] = None) -> dict:
        """Run the artifact and the source model on ``x``; raise :class:`VerificationError` beyond tolerance."""
        tol = self.tolerance if tolerance is None else float(tolerance)
        x, _ = reference.check_input(self.graph, x)
        y, ref = self.run(x, runtime), self.reference(x)
        if np.shape(y) != np.shape(ref):  # model.lmu.npz and source.lmu.npz disagree (damaged and resealed)
            raise ArtifactError(
                f"{self.path}: the artifact's outputs have shape {np.shape(y)}, its source model's "
                f"{np.shape(ref)}: its model.lmu.npz and source.lmu.npz disagree; convert the model again"
            )
        err = relative_error(y, ref)
        result: dict[str, Any] = {
            "error": err,
            "tolerance": tol,
            "passed": bool(tol is None or err <= tol),
            "runtime": self._runtime(runtime),
            "checked": tol is not None,
        }
        lo_hi = self.manifest.get("calibration_range")
        if lo_hi is not None:
            outside = float(np.mean((x < lo_hi[0]) | (x > lo_hi[1])))
            result["outside_calibration_range"] = {"fraction": outside, "range": list(lo_hi)}
        if isinstance(self.module, CheckedTarget) and self.manifest.get("quantize") not in (None, "float"):
            # quantized artifacts: what is checked is the target's own (e.g. bit-exactness with the integer reference)
            extra = self.module.check(self, x)
            result.update({k: v for k, v in extra.items() if k != "passed"})
            if "bit_exact_host" in extra:
                result["checked"] = True
                result["passed"] = result["passed"] and bool(extra["bit_exact_host"])
        if not result["passed"]:
            if tol is not None and not err <= tol:  # NaN too: an output that is not a number differs
                raise VerificationError(
                    f"{self.path}: output differs from the source model by {err:.3g} "
                    f"(relative to the output scale), more than the tolerance {tol:g}"
                )
            raise VerificationError(
                f"{self.path}: the {result['runtime']} build does not match its integer "
                f"reference bit for bit; rebuild it (make clean) and report the model "
                f"if it persists"
            )
        return result


#: what a runtime or reader raises on a damaged data file (ONNX Runtime's and LiteRT's errors are RuntimeErrors)
_UNREADABLE = (
    ValueError,
    TypeError,
    KeyError,
    IndexError,
    EOFError,
    RuntimeError,
    zipfile.BadZipFile,
    MemoryError,
    tokenize.TokenError,  # numpy's reading of a damaged .npy header
    OSError,  # zipfile seeking to a damaged member's offset (EINVAL) in the private copy
    AttributeError,  # network.py given a weights.npz entry of another type (bytes where an array was)
    ArithmeticError,  # nengo's simulator raises FloatingPointError on inf / NaN weights
)


class _Guarded:
    """A received artifact's stream, its failures refused as :meth:`Artifact._readable` says."""

    def __init__(self, stream, readable):
        self._stream, self._readable = stream, readable

    def reset(self, batch: int = 1):
        with self._readable():
            return self._stream.reset(batch)

    def step(self, x_t):
        with self._readable():
            return self._stream.step(x_t)

    def __getattr__(self, name):
        return getattr(self._stream, name)


def open_artifact(out_dir, trusted_key=None) -> Artifact:
    """Reopen an output directory written by :func:`convert`.

    An artifact is code (a C artifact's Makefile, a Nengo artifact's ``network.py``), run by ``run``,
    ``verify`` and :class:`Artifact`'s methods. It is refused (:class:`ArtifactError`, before anything in it
    runs) when a file convert wrote there is missing or changed since (each one's SHA-256 is in
    ``lmu-edge-files.json``, the seal), or when it holds a file, folder or link the seal does not record (a
    declared build output or a recorded module's compiled cache aside: lmu-edge never runs or reads those).
    With ``trusted_key`` (the path of an Ed25519 public key, PEM) the seal must also carry that key's
    signature (``convert(sign=...)``): without one the seal only catches accidents, as anyone can write one."""
    path = Path(out_dir)
    man = path / MANIFEST
    if not man.is_file():
        inside = sorted(p.parent.name for p in path.glob(f"*/{MANIFEST}")) if path.is_dir() else []
        if inside:  # e.g. a report's directory: its artifacts are one level down
            todo = f"it holds artifacts in {', '.join(str(path / n) for n in inside[:4])}: give one of those"
        elif not path.exists():
            todo = f"no such directory; create one with 'lmu-edge convert MODEL --target T -o {path}'"
        else:
            todo = "create one with 'lmu-edge convert MODEL --target T -o NEW_DIR'"
        raise ArtifactError(f"{path}: not an lmu-edge output directory (no {MANIFEST}); {todo}")
    try:
        return _open(path, trusted_key)
    except LmuEdgeError:
        raise
    except OSError as e:
        raise ArtifactError(f"{path}: cannot be read ({e.strerror or e}); check the path and its permissions") from None
    except (ValueError, RecursionError, MemoryError) as e:  # a damaged file the checks above did not name
        msg = " ".join(str(e).split())[:200]
        raise ArtifactError(
            f"{path}: unreadable artifact ({type(e).__name__}: {msg}); convert the model again"
        ) from None


def _open(path: Path, trusted_key) -> Artifact:
    sealed = outdir.read_record(path)
    if sealed is None:  # say first what is wrong with the manifest, if anything (read within the JSON limits)
        with open(path / MANIFEST, "rb") as f:
            _read_manifest(path / MANIFEST, f.read(limits.MAX_JSON_BYTES + 1))
        raise ArtifactError(f"{path}: no valid {outdir.RECORD} (the record of the files convert wrote); convert again")
    record_bytes, files = sealed
    # refuse what the seal does not record before anything is imported: with the artifact folder on sys.path
    # (python -c, a REPL or a notebook started there) a planted cryptography/ or nengo.py would run on import.
    # What its build/ holds is checked below, once the manifest names the target and its build outputs; a
    # recorded name that is no longer a regular file is named by the changed files' check.
    _refuse_unrecorded(
        path, [e for e in outdir.unrecorded(path, files, set()) if Path(e).name != "build" and e not in files]
    )
    if trusted_key is not None:
        from . import signing

        signing.check(path, record_bytes, trusted_key)
    changed = outdir.changed_files(path, files)
    if changed:
        more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        todo = "convert the model again"
        if set(changed) <= {"report.json", "report.html"}:  # the model is intact: say why the report counts
            todo = (
                f"the report records the artifact's verification, so it is sealed with the model: restore it or {todo}"
            )
        raise ArtifactError(
            f"{path}: {', '.join(changed[:3])}{more} changed or missing since lmu-edge wrote "
            f"{'it' if len(changed) == 1 else 'them'} (SHA-256 against {outdir.RECORD}); {todo}"
        )
    manifest = _read_manifest(path / MANIFEST, outdir.read_sealed(path, MANIFEST, files))  # the bytes checked
    opts = manifest.get("options", {})  # a dict: _read_manifest checked it
    for key in PROGRAM_OPTIONS:  # a received manifest never chooses a program to start: the user's variable does
        if opts.get(key):
            opts[key] = ""
    _refuse_unrecorded(path, outdir.unrecorded(path, files, _declared_build_outputs(manifest["target"])))
    return Artifact(path, manifest, sealed=files)


def _refuse_unrecorded(path: Path, extra: list) -> None:
    if extra:
        more = f" and {len(extra) - 3} more" if len(extra) > 3 else ""
        raise ArtifactError(
            f"{path}: holds {', '.join(extra[:3])}{more}, which lmu-edge did not write (not in {outdir.RECORD}); an "
            f"artifact is code that run and verify execute: remove what was added, or convert the model again"
        )


def _read_manifest(man: Path, text: bytes) -> dict:
    """The manifest parsed within the JSON limits, its fields' types checked, or :class:`ArtifactError`."""
    try:
        manifest = limits.load_json(text, str(man))
    except LmuEdgeError as e:
        raise ArtifactError(f"{e}; convert the model again") from None
    except ValueError as e:
        msg = " ".join(str(e).split())[:200]
        raise ArtifactError(f"{man}: malformed manifest ({msg}); convert the model again") from None
    _check_manifest(manifest, man)
    return manifest


def _declared_build_outputs(target: str) -> set:
    module = registry.target(target)
    build = getattr(module, "BUILD_DIR", "build")
    return {f"{build}/{n}{tmp}" for n in getattr(module, "BUILD_OUTPUTS", ()) for tmp in ("", ".tmp")}


def _finite(v) -> bool:
    """A number a float holds: JSON integers have no bound, and ``math.isfinite(10**400)`` raises."""
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:  # an integer past float's range (the fuzzer's input 1775, seed 4)
        return False


def _check_manifest(manifest, man: Path) -> None:
    """Refuse a manifest whose fields lmu-edge reads are not of the types convert writes."""
    if not isinstance(manifest, dict) or manifest.get("format") != ARTIFACT_FORMAT:
        raise ArtifactError(f"{man}: not an lmu-edge artifact manifest; convert the model again")
    if manifest.get("version") != ARTIFACT_VERSION:
        raise ArtifactError(
            f"{man}: artifact version {manifest.get('version')!r} is not supported "
            f"(this lmu-edge reads version {ARTIFACT_VERSION}); convert the model again"
        )
    target = manifest.get("target")
    if not isinstance(target, str) or target not in registry.TARGETS:
        shown = repr(target)[:60]
        raise ArtifactError(f"{man}: unknown target {shown}; available targets: {', '.join(sorted(registry.TARGETS))}")
    problems = []
    tol = manifest.get("tolerance", DEFAULT_TOLERANCE)
    if tol is not None and not (_finite(tol) and tol >= 0):
        problems.append(f"tolerance {repr(tol)[:40]} (expected a number >= 0 or null)")
    cal = manifest.get("calibration_range")
    if cal is not None and not (isinstance(cal, list) and len(cal) == 2 and all(_finite(v) for v in cal)):
        problems.append(f"calibration_range {repr(cal)[:40]} (expected [low, high], two numbers)")
    for key in ("quantize",):
        if key in manifest and not isinstance(manifest[key], str):
            problems.append(f"{key} {repr(manifest[key])[:40]} (expected a string)")
    for key in ("options", target, "report"):
        if key in manifest and not isinstance(manifest[key], dict):
            problems.append(f"{key} {repr(manifest[key])[:40]} (expected an object)")
    arena = manifest["report"].get("tflm_arena_bytes") if isinstance(manifest.get("report"), dict) else None
    if arena is not None and not (isinstance(arena, int) and not isinstance(arena, bool) and 0 < arena <= 1 << 30):
        problems.append(f"report.tflm_arena_bytes {repr(arena)[:40]} (expected a byte count up to 1 GiB)")
    c = manifest.get("c")
    if target == "c" and isinstance(c, dict):
        if not isinstance(c.get("prefix"), str) or not c["prefix"].isidentifier():
            problems.append(f"c.prefix {repr(c.get('prefix'))[:40]} (expected a C identifier)")
        if not isinstance(c.get("quantized", False), bool):
            problems.append(f"c.quantized {repr(c.get('quantized'))[:40]} (expected true or false)")
    if problems:
        raise ArtifactError(f"{man}: malformed manifest: {'; '.join(problems)}; convert the model again")
