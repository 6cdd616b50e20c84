"""``convert``: a model in, an artifact directory out (:mod:`lmu_edge.artifact` opens and runs it).

Folds and quantizes the model for the target, lets the target emit its files, verifies the artifact
against the source model on a seeded probe (and the calibration data), and writes the manifest, the
report and the seal. Directories are written next to their final place and renamed into it only
when everything succeeded, so a failed conversion leaves nothing behind.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import warnings
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from . import folding, ir, irfile, limits, outdir, quantization, reference, registry
from .arrays import load_array
from .artifact import (
    ARTIFACT_FORMAT,
    ARTIFACT_VERSION,
    DEFAULT_TOLERANCE,
    MANIFEST,
    QUANTIZE_ALIASES,
    Artifact,
    open_artifact,
)
from .errors import ArtifactError, DeviceFitError, LmuEdgeError, QuantizationError, VerificationError, os_refusal
from .metrics import relative_error
from .report_html import json_default
from .targets import CheckedTarget
from .targets import load as load_target


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
    accuracy_report: bool = True,
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

    ``accuracy_report=False`` skips the accuracy report (``report.html`` and the per-tensor analysis in
    ``report.json``), for a caller that reads neither; the verification above still runs and is written.
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
            if float(np.ptp(cal)) == 0.0:  # ranges of one point, and an SQNR measured on that point only
                import warnings

                warnings.warn(
                    f"calibration: all {cal.size} values are {float(cal.flat[0]):.6g}, so every range covers that "
                    f"one input and the SQNR reported on it says nothing about others; give typical inputs",
                    stacklevel=2,
                )
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
                accuracy_report=accuracy_report,
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
    accuracy_report: bool = True,
) -> None:
    """Emit the folded ``graph`` for ``target``, run and verify it against ``source``, and write the manifest,
    ``report.json`` and the accuracy report into ``out_dir``: all or nothing (:func:`outdir.writing`)."""
    with outdir.writing(out_dir, overwrite, sign=sign) as tmp:
        irfile.save(source, tmp / "source.lmu.npz")
        irfile.save(graph, tmp / "model.lmu.npz")
        extra = dict(
            module.emit(graph, tmp, dict(options, quantize=quantize, calibration=cal, progress=progress)) or {}
        )
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
        from . import budget

        if cal is not None:  # large sets: the sequences of budget.verify_rows
            rows = budget.verify_rows(*cal.shape[:2])
            x, probe = (cal, None) if rows is None else (cal[rows], None)
            part = "" if rows is None else f" ({len(rows)} of its {len(cal)} sequences, evenly spaced)"
            on = "calibration data" + part
        else:
            x, probe = _stable_probe(source, _probe_input(source), budget.probe_note(source))
            on = "seeded random probe"
        y_src = reference.simulate(source, x)  # first: an overflow is the source's, said as such
        try:
            y_art = art.run(x)
        except FloatingPointError:  # a runtime that raises on inf / NaN (nengo; issue 52, seed 1065)
            raise VerificationError(
                f"the {target} artifact's run overflowed to inf / NaN on the {on} ({x.shape[1]} steps) where the "
                f"source model's float64 run stays finite: its states pass what the runtime carries (an unstable "
                f"model); verify it on your own inputs with calibration data, or retrain it with a stable memory"
            ) from None
        err = relative_error(y_art, y_src)

        verification = {
            "input": on,
            "input_shape": list(x.shape),
            **({} if probe is None else {"probe": probe}),
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
        if accuracy_report:  # report.json + report.html on a bounded slice of the same data
            _accuracy_report(report, source, graph, art, x, (y_src, y_art), tmp, out_dir, progress)
        if not verification["passed"]:
            on = verification["input"]
            if not math.isfinite(err):  # NaN: the runtime's outputs overflowed (inf - inf), whatever the tolerance
                hint = " (more steps_per_sample may keep it stable)" if "steps_per_sample" in options else ""
                why = f"gives outputs that are not finite on the {on}: its runtime diverges{hint}"
            elif tol is not None and err > tol:
                why = f"differs from the source by {err:.3g} on the {on}, more than the tolerance {tol:g}"
            else:
                why = "does not match its integer reference bit for bit (a bug: please report the model)"
            raise VerificationError(f"the converted model {why}; nothing was written to {out_dir}")


#: the seeded probe stops where the source model's float64 run passes this magnitude (:func:`_stable_probe`)
PROBE_LIMIT = reference.STABLE_LIMIT


def _stable_probe(source: ir.Graph, x: np.ndarray, note: str) -> tuple:
    """The seeded probe ``x`` cut before the first step where the source model's own values pass
    :data:`PROBE_LIMIT` (:func:`reference.stable_cut`), with the probe note saying so and a warning: such a
    model is unstable, and a float32 runtime overflows to inf or NaN further on where float64 does not yet,
    so the steps past it test float's range, not the conversion (issue 52, seeds 5, 32 and 1004: TFLite
    float NaN at step 329 of 471, the hidden state at 4e26 while the outputs stayed within 0.42)."""
    k, part = reference.stable_cut(source, x, PROBE_LIMIT)
    if not part:  # stable, or diverging at once: verified on the whole probe
        return x, note
    warnings.warn(
        f"{source.name!r} is unstable: on a random input {part} passes {PROBE_LIMIT:g} at step {k + 1} (a float32 "
        f"runtime may overflow to inf or NaN on inputs that long); verified on the first {k} steps",
        stacklevel=5,  # the caller of convert()
    )
    cut = f"cut to {k} steps: at step {k + 1} {part} passes {PROBE_LIMIT:g} (an unstable model)"
    return x[:, :k], f"{note}; {cut}"


def _accuracy_report(report: dict, source, graph, art, x, ys: tuple, tmp: Path, out_dir: Path, progress) -> None:
    """Add the accuracy analysis of ``art`` (written in ``tmp``, moving to ``out_dir``) to ``report`` and
    write ``report.json`` and ``report.html`` into ``tmp``; ``ys``: the source model's and the artifact's
    outputs on ``x`` (the verification's), reused where the analysis runs on the same data."""
    y_src, y_art = ys
    from . import report as _report
    from . import report_html

    qpath = tmp / "quantized.lmu.npz"
    qg = irfile.load_ir(qpath) if qpath.exists() else None
    if progress:
        progress("writing the accuracy report")
    from . import budget

    # the verification input itself where it is within the verification's own budget (budget.verify_rows: a
    # large calibration set gives evenly spaced whole sequences), so the artifact's outputs are reused, not
    # run again (issue 54: 3 s of the psMNIST-sized conversion's C host run); else its first 16 x 2000 steps
    same = x.shape[1] <= 2000 and x.shape[0] <= max(16, -(-budget.VERIFY_STEPS // max(1, x.shape[1])))
    analysis = _report.analyze(
        source,
        graph,
        qg,
        x if same else x[:16, :2000],
        artifacts=(art,),
        outputs={str(art.path): y_art} if same else None,
        y_source=y_src if same else None,
    )
    for t in analysis.get("targets", []):  # the artifact moves to out_dir when the writing succeeds
        if t.get("path") == str(art.path):
            t["path"] = str(out_dir)
    report.update({k: v for k, v in analysis.items() if k not in report})
    report_html.write(report, tmp, title=f"{source.name} -> {report['target']} ({report['quantize']})")


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


def _version() -> str:
    from .version import __version__

    return __version__
