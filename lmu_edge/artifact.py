"""``convert`` and ``Artifact``: an output directory a target wrote, and how to run it.

Every artifact directory holds ``artifact.json`` (the manifest: target,
options, files, tolerance), ``source.lmu.npz`` (the model it came from, as
converted), ``model.lmu.npz`` (the recurrent graph it implements),
``report.json`` (what the conversion measured), and the target's own files.
Directories are written next to their final place and renamed into it only
when everything succeeded, so a failed conversion leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import math
import os
import tokenize
import zipfile
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

from . import folding, ir, irfile, limits, outdir, quantization, reference, registry
from .arrays import load_array
from .errors import ArtifactError, DeviceFitError, LmuEdgeError, QuantizationError, VerificationError, os_refusal
from .metrics import relative_error
from .report_html import json_default
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


def _version() -> str:
    from .version import __version__

    return __version__


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
    _refuse_unrecorded(path, [e for e in outdir.unrecorded(path, files, set()) if e != "build/" and e not in files])
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
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


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


def _probe_input(graph: ir.Graph, seed: int = 0) -> np.ndarray:
    """A seeded random input long enough to exercise every memory (:func:`budget.probe_length`: 10 theta, at
    most 4000 steps and the declared length)."""
    from . import budget

    return np.random.default_rng(seed).standard_normal(
        (budget.PROBE_SEQUENCES, budget.probe_length(graph), graph.input_features)
    )


def _describe(model) -> str:
    """A short name for a model in a message: its path, or the graph's name (never a whole repr)."""
    if isinstance(model, ir.Graph):
        return f"graph {model.name!r}"
    return str(model)[:300] if isinstance(model, (str, os.PathLike)) else f"a {type(model).__name__}"


def convert(model, target: str = "ir", out_dir=None, **kw) -> "Artifact":
    """Convert a model (a path or an :class:`ir.Graph`) for ``target`` into ``out_dir``.

    See :func:`_convert` for the parameters. Every failure is an :class:`~lmu_edge.errors.LmuEdgeError`
    (a third-party exception that escapes a pass becomes one that says so), and leaves nothing behind.
    """
    try:
        return _convert(model, target, out_dir, **kw)
    except (LmuEdgeError, KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except MemoryError:
        raise ArtifactError(
            f"converting {_describe(model)} for {target!r} needs more memory than this machine has; nothing was written"
        ) from None
    except OSError as e:
        todo = os_refusal(e)
        if todo is None:
            raise _internal(e, model, target) from e
        where = f"{e.filename}: " if e.filename is not None else ""  # a full disk names no file
        raise ArtifactError(
            f"converting {_describe(model)} for {target!r}: {where}{e.strerror}; nothing was written; {todo}"
        ) from None
    except Exception as e:
        raise _internal(e, model, target) from e


def _internal(e: Exception, model, target) -> ArtifactError:
    msg = " ".join(str(e).split())[:300]
    return ArtifactError(
        f"converting {_describe(model)} for {target!r} failed inside lmu-edge ({type(e).__name__}: "
        f"{msg}); nothing was written; please report it with the model"
    )


def _convert(
    model,
    target: str = "ir",
    out_dir=None,
    *,
    quantize: Optional[str] = None,
    calibration=None,
    realization="auto",
    error_budget: Optional[float] = None,
    substeps: Optional[int] = None,
    tolerance: Optional[float] = None,
    overwrite: bool = False,
    progress: Optional[Callable[[str], None]] = None,
    prefer: Optional[str] = None,
    sign=None,
    **target_options,
) -> Artifact:
    """Convert a model (a path or an :class:`ir.Graph`) for ``target`` into ``out_dir``.

    Loads, folds to a recurrent form (:func:`lmu_edge.fold`), quantizes where
    asked, emits the target's files, runs the artifact in its runtime on the
    calibration data (or a seeded probe input) against the source model, and
    writes the manifest and ``report.json``. Returns the :class:`Artifact`.

    ``tolerance`` is the largest accepted relative output error against the
    source model, checked here and stored for ``verify``. By default it is the
    target's own (for float targets ``max(1e-4, 100 * error_budget)``: an
    impulse-response error spreads over the whole window of the memory, so the
    output error of a model can exceed the budget by the window length's order).
    ``float("inf")`` measures and reports the error but never refuses (the
    manifest then holds no tolerance, so ``verify`` does not refuse either).

    ``error_budget`` ``None`` (the default) follows the target's state width
    (:func:`lmu_edge.folding.default_budget`); the report says which and why.
    ``prefer`` is what ``auto`` minimises (``ops``, ``flash`` or ``ram``, see
    :func:`lmu_edge.folding.rank`); by default ``ops``, and with a ``device`` option
    ``ops`` where the artifact fits the device, else ``flash`` (converted again). The
    report holds the preference, why, and the trade-off of each choice.

    ``sign``: the path of an Ed25519 private key (PEM): the seal of the files written is signed with it
    (``lmu-edge-files.sig``), so that a receiver can check who built the artifact
    (``open_artifact(d, trusted_key=PUB)``, ``run`` / ``verify --trusted-key``).
    """
    from .loading import load

    if out_dir is None:
        raise ArtifactError("convert() needs out_dir, the directory to write the artifact to")
    out_dir = Path(out_dir)
    if error_budget is None:
        module_opts = dict(getattr(registry.target(target), "OPTIONS", {}), **target_options)
        qmode = QUANTIZE_ALIASES.get(quantize or "float", quantize or "float")
        from .folding import default_budget
        from .precision import state_bits

        error_budget, budget_why = default_budget(state_bits(qmode, module_opts, registry.target(target)))
    else:
        budget_why = "given"
    error_budget = _check_number(error_budget, "error_budget", 0.0, 1.0, low_open=True)
    if tolerance is not None:
        # +inf is allowed: measure the error and report it, never refuse (stored as "not checked")
        tolerance = tolerance if tolerance == float("inf") else _check_number(tolerance, "tolerance", 0.0, float("inf"))
    if substeps is not None:
        limits.check_int(substeps, 1, limits.MAX_SUBSTEPS, "substeps")
    module = load_target(target)
    modes = tuple(module.QUANTIZE)
    quantize = QUANTIZE_ALIASES.get(quantize or "float", quantize or "float")
    if quantize not in modes:
        others = []
        for name in registry.TARGETS:
            try:
                if name != target and quantize in load_target(name).QUANTIZE:
                    others.append(name)
            except Exception:  # noqa: BLE001 (a target whose extra is missing just is not named here)
                continue
        raise QuantizationError(
            f"target {target!r} does not support quantize={quantize!r}; it supports: {', '.join(modes)}"
            + (f" ({quantize} is the {', '.join(others)} target's)" if others else "")
        )
    unknown = set(target_options) - set(module.OPTIONS)
    if unknown:
        known = ", ".join(sorted(module.OPTIONS)) or "none"
        c_only = sorted(set(unknown) & set(load_target("c").OPTIONS)) if target != "c" else []
        hint = f" ({', '.join(c_only)}: --target c only)" if c_only else ""
        raise ArtifactError(
            f"target {target!r} has no option(s) {', '.join(sorted(unknown))}{hint}; its options: {known}"
        )
    options = dict(module.OPTIONS)
    options.update(target_options)
    check = getattr(module, "check_options", None)
    if check is not None:  # refuse an option the mode cannot take before any work
        check(quantize, options)
    cal = None if calibration is None else load_array(calibration, "calibration")
    if quantize != "float" and cal is None:
        raise QuantizationError(
            f"quantize={quantize!r} needs calibration data: --calibration FILE "
            f"(calibration= in Python): typical inputs, .npy / .npz of shape (N, T, F)"
        )
    outdir.check_replaceable(out_dir, overwrite)  # refuse before any work
    if sign is not None:
        from . import signing

        signing.load_private_key(sign)  # a key that cannot sign is refused before any work

    source = model if isinstance(model, ir.Graph) else load(model)
    if target != "ir" and source.quantized:
        raise ArtifactError(
            f"{_describe(model)} is already quantized (an artifact's quantized.lmu.npz): targets "
            f"convert the float model; convert that with --quantize instead (only the ir "
            f"target copies a quantized graph)"
        )
    if cal is not None:
        cal, _ = reference.check_input(source, cal, "calibration")
        if quantize != "float":
            quantization.check_calibration(cal)
            quantization.check_growth(source, max(cal.shape[1], source.seq_len or 0))  # every target's integers
    if quantize == "float" and (cal is not None or source.seq_len):  # a diverging memory: warned about
        quantization.check_growth(source, cal.shape[1] if cal is not None else int(source.seq_len or 0), warn=True)
    from . import budget  # the verification's simulation, estimated before the fold starts

    budget.check(budget.simulate_estimate(source, *budget.verify_shape(source, cal), "verifying"), progress)
    device = options.get("device")
    if prefer is not None:
        if prefer not in folding.PREFERENCES:
            raise ArtifactError(f"prefer={prefer!r} is not one of {', '.join(folding.PREFERENCES)}")
        attempts = [(prefer, "given")]
    elif device:
        # a device: the fewest operations where they fit it, else the fewest numbers stored. Preferring
        # flash outright cost the shipped digits model 71x the Cortex-M0 instructions per step to save
        # 1,296 of 256 KB of flash (README, "Weigh it on a Cortex-M0").
        attempts = [("ops", f"it fits --device {device}"), ("flash", "")]
    else:
        attempts = [("ops", "the default")]
    for n_try, (prefer, prefer_why) in enumerate(attempts):
        try:
            graph = folding.fold(
                source,
                realization,
                error_budget,
                substeps=substeps,
                progress=progress,
                target=target,
                quantized=quantize != "float",
                prefer=prefer,
            )
            _write(
                model,
                source,
                graph,
                target,
                module,
                out_dir,
                overwrite=overwrite,
                options=options,
                quantize=quantize,
                cal=cal,
                tolerance=tolerance,
                error_budget=error_budget,
                budget_why=budget_why,
                realization_choice={"prefer": prefer, "why": prefer_why},
                progress=progress,
                sign=sign,
            )
        except DeviceFitError as e:
            if n_try + 1 == len(attempts) or not _flash_could_help(graph, source):
                raise
            attempts[n_try + 1] = (
                "flash",
                f"the fewest-operations model does not fit --device {device}: {e.problems}",
            )
            if progress:
                progress(f"the fewest-operations model does not fit --device {device}; folding again for flash")
            continue
        break
    return open_artifact(out_dir)


def _write(
    model,
    source: ir.Graph,
    graph: ir.Graph,
    target: str,
    module,
    out_dir: Path,
    *,
    overwrite: bool,
    options: dict,
    quantize: str,
    cal,
    tolerance: Optional[float],
    error_budget: float,
    budget_why: str,
    realization_choice: dict,
    progress: Optional[Callable[[str], None]],
    sign=None,
) -> None:
    """Emit the folded ``graph`` for ``target``, run and verify it against ``source``, and write the manifest,
    ``report.json`` and the accuracy report into ``out_dir``: all or nothing (:func:`outdir.writing`)."""
    with outdir.writing(out_dir, overwrite, sign=sign) as tmp:
        irfile.save(source, tmp / "source.lmu.npz")
        irfile.save(graph, tmp / "model.lmu.npz")
        extra = dict(module.emit(graph, tmp, dict(options, quantize=quantize, calibration=cal)) or {})
        extra_report = extra.pop("report", {})
        default_tol = max(DEFAULT_TOLERANCE, 100 * float(error_budget))
        tol = tolerance if tolerance is not None else extra.pop("tolerance", default_tol)
        extra.pop("tolerance", None)
        manifest = {
            "format": ARTIFACT_FORMAT,
            "version": ARTIFACT_VERSION,
            "target": target,
            "lmu_edge_version": _version(),
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "source": str(model) if not isinstance(model, ir.Graph) else f"<graph {model.name}>",
            "quantize": quantize,
            "options": {k: v for k, v in options.items()},
            "tolerance": None if tol is None or math.isinf(tol) else float(tol),
        }
        if cal is not None:  # verify warns about inputs beyond it (a quantized input saturates there)
            manifest["calibration_range"] = [float(np.min(cal)), float(np.max(cal))]
        manifest.update(extra)
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True))
        art = Artifact(tmp, manifest)
        x = cal if cal is not None else _probe_input(source)
        y_art = art.run(x)
        err = relative_error(y_art, reference.simulate(source, x))
        from . import budget

        verification = {
            "input": "calibration data" if cal is not None else "seeded random probe",
            "input_shape": list(x.shape),
            **({} if cal is not None else {"probe": budget.probe_note(source)}),
            "runtime": module.DEFAULT_RUNTIME,
            "error_vs_source": err,
            "tolerance": manifest["tolerance"],
            "passed": bool(tol is None or err <= tol),
        }
        if isinstance(module, CheckedTarget):  # target-specific checks, e.g. bit-exactness with the integer reference
            verification.update(module.check(art, x))
        report = {
            "model": source.name,
            "target": target,
            "quantize": quantize,
            "layers": [_layer_report(layer) for layer in graph.layers],
            "verification": verification,
            "error_budget": {"value": float(error_budget), "why": budget_why},
            "realization_choice": {
                **realization_choice,
                "tradeoffs": dict(graph.metadata.get("fold", {}).get("tradeoffs", {})),
            },
        }
        report.update(extra_report)
        (tmp / "report.json").write_text(json.dumps(report, indent=2, sort_keys=True, default=json_default))
        # the accuracy report (report.json + report.html) on a bounded slice of the same data
        from . import report as _report
        from . import report_html

        qpath = tmp / "quantized.lmu.npz"
        qg = irfile.load_ir(qpath) if qpath.exists() else None
        if progress:
            progress("writing the accuracy report")
        same = x.shape[0] <= 16 and x.shape[1] <= 2000  # the report's slice is the verification input itself
        analysis = _report.analyze(
            source, graph, qg, x[:16, :2000], artifacts=(art,), outputs={str(art.path): y_art} if same else None
        )
        for t in analysis.get("targets", []):  # the artifact moves to out_dir when the writing succeeds
            if t.get("path") == str(art.path):
                t["path"] = str(out_dir)
        report.update({k: v for k, v in analysis.items() if k not in report})
        report_html.write(report, tmp, title=f"{source.name} -> {target} ({quantize})")
        if not verification["passed"]:
            why = (
                f"differs from the source by {err:.3g} on the {verification['input']}, more than the tolerance {tol:g}"
                if tol is not None and err > tol
                else "does not match its integer reference bit for bit (a bug: please report the model)"
            )
            raise VerificationError(f"the converted model {why}; nothing was written to {out_dir}")


def _flash_could_help(graph: ir.Graph, source: ir.Graph) -> bool:
    """Whether folding ``source`` again preferring flash can store fewer numbers than ``graph`` does:
    this conversion folded some memory by ``auto`` to a realization storing more than O(q) numbers."""
    if graph is source:  # folded before: the preference changes nothing
        return False
    auto = graph.metadata.get("fold", {}).get("tradeoffs", {})
    return any(
        lay.name in auto
        and lay.measurement is not None
        and lay.measurement.coeffs_stored > folding.FLASH_SMALL * lay.order
        for lay in graph.lmu_layers
    )


def _check_number(value, name: str, lo: float, hi: float, low_open: bool = False) -> float:
    """A finite number in ``[lo, hi]`` (``(lo, hi]`` with ``low_open``), or :class:`ArtifactError`."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ArtifactError(f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(v) or v < lo or v > hi or (low_open and v == lo):
        span = f"{'(' if low_open else '['}{lo:g}, {hi:g}]"
        raise ArtifactError(f"{name} = {value!r} is not a finite number in {span}")
    return v


def _layer_report(layer) -> dict:
    d = {"name": layer.name, "type": layer.TYPE}
    if isinstance(layer, ir.LMU):
        d.update(
            order=layer.order,
            theta=layer.theta,
            memory_d=layer.memory_d,
            discretizer=layer.discretizer,
            realization=ir.realization_name(layer.memory),
        )
        if layer.measurement is not None:
            m = layer.measurement
            d["measurement"] = {
                k: getattr(m, k)
                for k in (
                    "error",
                    "horizon",
                    "reference",
                    "ops_per_step",
                    "coeffs_stored",
                    "state_size",
                    "spectral_radius",
                )
            }
    return d
