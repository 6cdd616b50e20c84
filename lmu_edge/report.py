"""The quantization accuracy report: what each choice cost, layer by layer and step by step.

:func:`analyze` compares the source model (parallel form, float64), the folded float recurrence,
the integer reference and every emitted artifact run in its runtime, on the user's data. It
returns a JSON-able dict (schema :data:`SCHEMA_VERSION`, documented in docs/report.md);
:func:`write` stores it as ``report.json`` and renders ``report.html``, one self-contained page
with every plot embedded.

Error attribution: the tensors of the integer graph are listed in data-flow order (each layer's
encoder output ``u`` and LMU ``state`` before its output); the report names the tensor where the
signal-to-quantization-noise ratio drops the most as the main source of error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from . import intsim, ir, lti, reference, registry
from .metrics import relative_error, sqnr_db
from .report_trace import (  # noqa: F401 (re-exported: the report's tables)
    finite_db,
    layer_origins,
    tensor_label,
    tensor_table,
    trace_float,
    trace_int,
)

SCHEMA_VERSION = 1

_finite = finite_db  # (the name artifact and sweep read it by)

#: The SQNR (dB, against the source model) below which a target's verdict is "fail", per (target, mode):
#: the floors of the trained-model matrix (docs/matrix.md), which every shipped model meets on held-out data
FLOORS_DB = {
    ("c", "int8"): 30.0,
    ("c", "int16x8"): 45.0,
    ("c", "int16"): 45.0,
    ("tflite", "int8"): 30.0,
    ("tflite", "int16x8"): 35.0,
    ("onnx", "int8"): 30.0,
    ("nir", "float"): 55.0,
    ("nengo", "float"): None,  # its own tolerance (the spiking form: measured, no verdict)
}
#: float artifacts (within 1e-4 relative of the float64 model is above 80 dB)
FLOAT_FLOOR_DB = 80.0


def floor_db(target: str, quantize: Optional[str]) -> Optional[float]:
    """The verdict's floor for ``target`` in mode ``quantize`` (:data:`FLOORS_DB`; float: 80 dB; another
    quantized mode: 30 dB, the 8-bit one; None: the artifact's tolerance alone decides)."""
    quantize = quantize or "float"
    if (target, quantize) in FLOORS_DB:
        return FLOORS_DB[(target, quantize)]
    return FLOAT_FLOOR_DB if quantize in ("float", "float32") else 30.0


def diagnose(rows: list, act_bits: int = 8, weight_bits: int = 8, mixed: bool = False) -> dict:
    """The tensor of :func:`tensor_table`'s rows where most of the error appears, and what to do about it
    (``mixed``: an int8 graph whose search gave some layers 16-bit activations)."""
    if not rows:
        return {}
    worst = max(rows, key=lambda r: (r["sqnr_drop_db"], -(r["sqnr_db"] or 300)))
    if rows[0]["sqnr_drop_db"] == 0 and worst["sqnr_drop_db"] == 0:
        worst = min(rows, key=lambda r: r["sqnr_db"] if r["sqnr_db"] is not None else 300)
    where = worst.get("label", worst["name"]) + (f" ({worst['source_layer']})" if worst.get("source_layer") else "")
    base = {"tensor": worst["name"], "label": worst.get("label", worst["name"]), "layer": worst["layer"]}
    base["kind"] = worst["tensor"]
    if worst["sqnr_db"] is None:  # every tensor exact (issue 52, seed 1036: its C int8 conversion died here)
        return {**base, "text": "every tensor followed here matches the float model exactly: nothing to change"}
    text = f"most of the error appears at {where}: SQNR {worst['sqnr_db']:.1f} dB"
    if worst["sqnr_drop_db"] and worst["sqnr_drop_db"] + (worst["sqnr_db"] or 0.0) >= 300.0 - 1e-9:
        text += ", every tensor before it exact"  # (the drop from the exact sentinel, 300 dB, is no figure)
    elif worst["sqnr_drop_db"]:
        text += f", {worst['sqnr_drop_db']:.1f} dB lost there"
    if worst["tensor"] == "state":
        text += (
            f"; the LMU state type {worst['type']} is too narrow for this memory; "
            f"raise --state-bits (or use the delta form / more coefficient bits)"
        )
    elif worst["tensor"] == "api":
        past, bits = worst.get("clipped", 0.0), worst["type"]
        text += (
            (
                f"; the artifact's {bits} output spans the calibrated range of the model's outputs and the data go "
                f"{worst['range_used']:.2f}x past it ({100 * past:.2g}% of outputs clipped): calibrate on data that "
                "covers the outputs' range, or use --quantize int16x8 (a 16-bit output with 2x headroom: c and tflite)"
            )
            if past
            else f"; the artifact's {bits} output rounds the last layer's 16 bits: use --quantize int16x8 (a 16-bit "
            "output: c and tflite)"
        )
    elif worst["tensor"] == "u":
        text += "; the encoder output u loses precision; raise --state-bits (u has the state's width)"
    elif weight_bits < 8:
        text += (
            f"; the layers' weights have {weight_bits} bits: raise --weight-bits (8 is the default; report "
            "--sweep shows what each width costs)"
        )
    elif worst.get("type", f"int{act_bits}") == "int8":
        text += (
            "; an 8-bit activation tensor (the int8 scheme keeps activations at 8 bits); use --quantize int16x8 "
            "(16-bit activations, int8 weights: c and tflite), check that the calibration data covers the "
            "inputs' range, or use float for this model"
        )
    elif mixed:
        text += (
            "; a tensor the int8 scheme already carries in 16 bits (its mixed precision widened this layer "
            "where 8 bits missed widen_db on the calibration data), so its int8 weights or the 8-bit tensors "
            "it reads are the likely limit; use --quantize int16x8 (16-bit activations throughout), check "
            "that the calibration data covers the inputs' range, or use float for this model"
        )
    elif weight_bits <= 8:
        text += (
            "; a 16-bit activation tensor, so the int8 weights feeding it are the likely limit (c's int16x8 "
            "gives weights 16 bits only where int8 ones keep the model below 48 dB on the calibration data, and "
            "never with --weight-bits 8); use --quantize int16 (16-bit weights throughout: c), check that the "
            "calibration data covers the inputs' range, or use float for this model"
        )
    else:
        text += (
            f"; a 16-bit activation tensor with {weight_bits}-bit weights, so what is left is 16-bit rounding "
            "(an LMU's int16 output view spans its state's proven bound, wider than the calibrated range, so "
            "that no input clips it) and the tanh / sigmoid tables' interpolation; no integer mode is wider: "
            "check that the calibration data covers the inputs' range, or use float if this is not enough"
        )
    return {**base, "text": text}


def _verdict(within: bool, sq: Optional[float], floor: Optional[float], tol: Optional[float]) -> str:
    """``pass`` / ``fail`` against the floor and the tolerance; ``measured`` where there is neither."""
    if floor is None and tol is None:
        return "measured"
    return "pass" if within and (sq is None or floor is None or sq >= floor) else "fail"


def lmu_memories(graph: ir.Graph, qg: ir.Graph) -> list:
    """Per LMU layer: float vs quantized impulse response (first, middle, last row) and poles."""
    out = []
    qlayers = {q.name: q for q in qg.layers}
    for layer in graph.lmu_layers:
        ql = qlayers.get(layer.name)
        if ql is None:
            continue
        q = layer.order
        L = int(min(max(5 * layer.theta, 32), 4000))
        Mf, Nf, Mq, Nq = _maps(layer, ql)
        if Mf is None:  # FIR: kernels directly
            Hf = np.asarray(layer.memory.kernel, np.float64)
            Hq = ql.memory.kernel * 2.0**-ql.memory.kernel_frac
            poles_f = poles_q = []
            rho_f = rho_q = 0.0
        else:
            Hf, Hq = lti.impulse_response(Mf, Nf, L), lti.impulse_response(Mq, Nq, L)
            pf, pq = np.linalg.eigvals(Mf), np.linalg.eigvals(Mq)
            poles_f = [[float(z.real), float(z.imag)] for z in pf]
            poles_q = [[float(z.real), float(z.imag)] for z in pq]
            rho_f, rho_q = float(np.max(np.abs(pf))), float(np.max(np.abs(pq)))
        rows = sorted({0, q // 2, q - 1})
        out.append(
            {
                "layer": layer.name,
                "order": q,
                "theta": layer.theta,
                "realization": ir.realization_name(layer.memory),
                "impulse_response_error": relative_error(Hq, Hf),
                "rows": rows,
                "h_float": Hf[rows].tolist(),
                "h_quantized": Hq[rows].tolist(),
                "poles_float": poles_f,
                "poles_quantized": poles_q,
                "spectral_radius_float": rho_f,
                "spectral_radius_quantized": rho_q,
                "state_type": str(ql.state_type),
                "state_bound": ql.state_bound,
            }
        )
    return out


def realizations(folded: ir.Graph) -> list:
    """Per LMU layer of a folded graph: its realization's name and the measured impulse-response error
    that proved it (``None`` for a layer that came already recurrent, without a measurement)."""

    out = []
    for layer in folded.lmu_layers:
        m = layer.measurement
        out.append(
            {
                "layer": layer.name,
                "realization": ir.realization_name(layer.memory),
                "error": None if m is None else float(m.error),
                "ops_per_step": None if m is None else int(m.ops_per_step),
            }
        )
    return out


def _maps(layer, ql):
    q = layer.order
    mem, qm = layer.memory, ql.memory
    if isinstance(mem, ir.DenseSS):
        Aq = qm.coeffs * 2.0**-qm.coeff_frac + (np.eye(q) if qm.form == "delta" else 0)
        return (np.asarray(mem.Abar, np.float64), np.asarray(mem.Bbar, np.float64), Aq, qm.B * 2.0**-qm.b_frac)
    if isinstance(mem, ir.RungeKutta):
        Mf, Nf = lti.rk_map(q, layer.theta, mem.rk_order, mem.substeps)
        Mq, Nq = _rk_map(q, qm.hc * 2.0**-qm.hc_frac * mem.substeps, mem.rk_order, mem.substeps)
        return Mf, Nf, Mq, Nq
    if isinstance(mem, ir.Pade):  # the implicit realization: its maps come from lmu_edge.pade
        from .pade import quantized_maps

        return quantized_maps(q, layer.theta, qm)
    return None, None, None, None


def _rk_map(q, coeffs, rk_order, substeps):
    """``lti.rk_map`` for the structure coefficients ``coeffs`` (the quantized ones) instead of theta's."""
    M = lti.rk_step(np.eye(q), np.zeros(q), 1.0, rk_order, substeps, coeffs=coeffs).T
    N = lti.rk_step(np.zeros((1, q)), np.ones(1), 1.0, rk_order, substeps, coeffs=coeffs)[0]
    return M, N


def step_errors(y: np.ndarray, y_ref: np.ndarray) -> dict:
    """Error per time step (max and mean over the batch), relative to the output scale."""
    scale = max(float(np.max(np.abs(y_ref))), 1e-30)
    d = np.abs(np.asarray(y) - np.asarray(y_ref)) / scale
    d = d.reshape(d.shape[0], d.shape[1], -1)
    return {"max": d.max(axis=(0, 2)).tolist(), "mean": d.mean(axis=(0, 2)).tolist()}


def task_metric(y: np.ndarray, labels: np.ndarray) -> dict:
    """Accuracy for integer class labels, NRMSE (RMSE / std of the targets) otherwise."""
    labels = np.asarray(labels)
    if labels.dtype.kind in "iu" and y.ndim >= 2 and y.shape[-1] > 1 and labels.shape == y.shape[:-1]:
        return {"name": "accuracy", "value": float(np.mean(np.argmax(y, -1) == labels)), "higher_is_better": True}
    if y.shape != labels.shape:
        raise ValueError(f"labels of shape {labels.shape} do not match outputs of shape {y.shape}")
    rmse = float(np.sqrt(np.mean((y - labels) ** 2)))
    return {"name": "nrmse", "value": rmse / max(float(np.std(labels)), 1e-30), "higher_is_better": False}


def analyze(
    source: ir.Graph,
    folded: ir.Graph,
    qg: Optional[ir.Graph],
    x: np.ndarray,
    labels=None,
    artifacts: tuple = (),
    tolerance: Optional[float] = None,
    progress: Optional[Callable[[str], None]] = None,
    budget_why: Optional[str] = None,
    outputs: Optional[dict] = None,
    evaluation: Optional[dict] = None,
    y_source: Optional[np.ndarray] = None,
) -> dict:
    """Compare every variant of a model on ``x``; see the module docstring.

    ``outputs`` maps an artifact's path to its output on exactly this ``x``, already computed (convert
    passes the verification run's, so a slow runtime is not run twice on the same data); ``y_source``, the
    source model's (float64) on it, likewise.

    The report keeps the error budget the realizations were chosen under (``folded``'s fold metadata)
    with ``budget_why``, the reason it was used (``"given"`` when none is said), and each LMU layer's
    realization with its measured impulse-response error.

    Each target gets a verdict: ``pass`` when its SQNR against the source reaches :func:`floor_db` (and its
    error is within ``tolerance`` when one is given), else ``fail``; with labels, its task metric and the
    difference from the float model's. ``evaluation`` says which sequences ``x`` is (``held_out``: none
    of them calibrated the quantized variants; ``text``: the sentence the page shows); ``advice`` is true
    when some target misses, and only then does the page show the diagnosis as advice."""
    say = progress or (lambda m: None)
    x, _ = reference.check_input(source, x, "data")
    say("running the source model (parallel form)")
    y_src = reference.simulate(source, x) if y_source is None else np.asarray(y_source, np.float64)
    variants = {"source (parallel, float64)": y_src}
    say("running the folded recurrence")
    variants["recurrent float64"] = reference.simulate(folded, x)
    variants["recurrent float32"] = reference.simulate(folded, x, dtype=np.float32)
    if qg is not None:
        say("running the integer reference")
        variants["integer reference"] = reference.simulate(qg, x)
    targets = []
    for art in artifacts:
        if outputs is not None and str(art.path) in outputs:
            y = outputs[str(art.path)]
        else:
            say(f"running the {art.target} artifact in {art.module.DEFAULT_RUNTIME}")
            y = art.run(x)
        variants[f"{art.target} ({art.manifest.get('quantize')}, {art.module.DEFAULT_RUNTIME})"] = y
        rep = json.loads((art.path / "report.json").read_text()) if (art.path / "report.json").exists() else {}
        err = relative_error(y, y_src)
        tol = tolerance if tolerance is not None else art.tolerance
        c = rep.get("c", {})
        ver = rep.get("verification", {})
        sq = _finite(sqnr_db(y, y_src))
        floor = floor_db(art.target, art.manifest.get("quantize"))
        within = bool(tol is None or err <= tol)
        targets.append(
            {
                "target": art.target,
                "quantize": art.manifest.get("quantize"),
                "path": str(art.path),
                "error_vs_source": err,
                "sqnr_db": _finite(sqnr_db(y, y_src)),
                # C: model.o's flash and the state; TFLite: the .tflite file and TFLite Micro's arena
                "flash_bytes": c.get("flash_bytes", rep.get("model_bytes")),
                "ram_bytes": c.get("ram_bytes", rep.get("tflm_arena_bytes")),
                "macs_per_step": c.get("macs_per_step"),
                "instructions_per_step_m4": ver.get("instructions_per_step_m4"),
                "instructions_per_step_m0": ver.get("instructions_per_step_m0"),
                "bit_exact_host": ver.get("bit_exact_host"),
                "tolerance": tol,
                "passed": within,
                "floor_db": floor,
                "verdict": _verdict(within, sq, floor, tol),
                "variant": f"{art.target} ({art.manifest.get('quantize')}, {art.module.DEFAULT_RUNTIME})",
                "files": artifact_files(art.path, art.target, art.manifest),
            }
        )
    rep = {
        "schema_version": SCHEMA_VERSION,
        "model": source.name,
        "data_shape": list(x.shape),
        "variants": [
            {"name": k, "error_vs_source": relative_error(v, y_src), "sqnr_db": _finite(sqnr_db(v, y_src))}
            for k, v in variants.items()
        ],
        "targets": targets,
    }
    fold_meta = folded.metadata.get("fold", {})
    if qg is None:
        rep["advice"] = any(t["verdict"] == "fail" for t in targets)
    if "error_budget" in fold_meta:
        rep["error_budget"] = {"value": float(fold_meta["error_budget"]), "why": budget_why or "given"}
    rep["realizations"] = realizations(folded)
    rep["evaluation"] = dict(evaluation or {"sequences": int(x.shape[0]), "held_out": None})
    if labels is not None:
        labels = np.asarray(labels)
        for v in rep["variants"]:
            v["metric"] = task_metric(variants[v["name"]], labels)
        ref = rep["variants"][0]["metric"]  # the source model, in float64
        for t in targets:
            m = next(v["metric"] for v in rep["variants"] if v["name"] == t["variant"])
            t["metric"] = m
            t["metric_vs_float"] = m["value"] - ref["value"]
    out_y = variants.get("integer reference", variants["recurrent float32"])
    if source.output_is_sequence:
        rep["step_errors"] = step_errors(out_y, y_src)
    if qg is not None:
        say("tracing every tensor (float and integer)")
        rows = tensor_table(folded, qg, x)
        rep["tensors"] = rows
        rep["diagnosis"] = diagnose(
            rows,
            intsim.act_bits(qg),
            int(qg.metadata.get("quantization", {}).get("weight_bits", 8)),
            intsim.mixed(qg),
        )
        ref_sq = next(v["sqnr_db"] for v in rep["variants"] if v["name"] == "integer reference")
        reach = 45.0 if intsim.act_bits(qg) == 16 else 30.0  # without targets: the integer reference's floor
        rep["advice"] = (
            any(t["verdict"] == "fail" for t in targets) if targets else bool(ref_sq is not None and ref_sq < reach)
        )
        rep["lmu"] = lmu_memories(folded, qg)
        rep["quantization"] = qg.metadata.get("quantization", {})
        if not source.output_is_sequence:
            # error over time of a last-step model: its streamed output at every step
            rep["step_errors"] = step_errors(
                trace_int(qg, x)[qg.layers[-1].name]["out"], trace_float(folded, x)[folded.layers[-1].name]["out"]
            )
    return rep


#: what a user copies out of each target's artifact: (file names or folder, the docs page)
_DEPLOY = {
    "c": ("firmware", "firmware.md"),
    "tflite": ("tflite_onnx", "tflite_onnx.md"),
    "onnx": ("tflite_onnx", "tflite_onnx.md"),
    "nengo": ("neuromorphic", "neuromorphic.md"),
    "nir": ("neuromorphic", "neuromorphic.md"),
}
_SKIP = {"manifest.json", "report.json", "report.html", "source.lmu.npz", "model.lmu.npz", "lmu-edge-files.sig"}


def artifact_files(path, target: str, manifest: dict) -> dict:
    """What to copy out of an artifact into a product, and the docs page on using it: for the C target
    the kit folder ``OUT/<prefix>/`` when the artifact has one (what a firmware compiles), else its
    ``.c`` and ``.h`` files; for the others the model files. ``docs``: the page (``lmu-edge docs PAGE``)."""
    path = Path(path)
    page, doc = _DEPLOY.get(target, ("cli", "cli.md"))
    kit = (manifest.get("c") or {}).get("kit") if target == "c" else None
    if kit and (path / kit).is_dir():
        names = [f"{kit}/"]
        inside = sorted(p.relative_to(path).as_posix() for p in (path / kit).rglob("*") if p.is_file())
    else:
        files = [str(f) for f in manifest.get("files", [])]
        if not files and path.is_dir():
            files = sorted(p.name for p in path.iterdir() if p.is_file())
        if target == "c":
            files = [f for f in files if f.endswith((".c", ".h")) and "/" not in f]
        names = [f for f in files if Path(f).name not in _SKIP and not f.endswith((".npz", ".ld"))]
        inside = []
    from .resources import docs_dir

    try:  # a link the page can open where lmu-edge is installed (the page is read on the machine that made it)
        uri = (docs_dir() / doc).as_uri() if (docs_dir() / doc).is_file() else None
    except FileNotFoundError:
        uri = None
    return {"names": names, "inside": inside, "docs": doc, "docs_command": f"lmu-edge docs {page}", "docs_uri": uri}


def c_footprint(qg: ir.Graph) -> tuple:
    """``(constant data bytes, state bytes)`` of the integer C code for ``qg``.

    Asked of the C target through :mod:`lmu_edge.registry` (the core imports no target): its
    public ``footprint(qgraph)``.
    """
    return tuple(registry.target("c").footprint(qg))


def sweep(
    folded: ir.Graph,
    x: np.ndarray,
    labels=None,
    weight_bits=range(2, 9),
    state_bits=(8, 12, 16, 24, 32),
    progress: Optional[Callable[[str], None]] = None,
    footprint: Optional[Callable[[ir.Graph], tuple]] = None,
    calibration: Optional[np.ndarray] = None,
) -> list:
    """Metric (or SQNR) against memory for a grid of weight and state bit widths.

    ``footprint(qgraph) -> (constant bytes, state bytes)`` measures the memory of one integer
    graph; by default the C target's (:func:`c_footprint`). Each cell is calibrated on ``calibration``
    (default: ``x`` itself) and evaluated on ``x``.
    """
    import warnings

    from .quantization import quantize

    footprint = footprint or c_footprint
    y_f = reference.simulate(folded, x)
    out = []
    for sb in state_bits:
        for wb in weight_bits:
            if progress:
                progress(f"sweep: weight bits {wb}, state bits {sb}")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                qg = quantize(folded, x if calibration is None else calibration, weight_bits=wb, state_bits=sb)
            y = reference.simulate(qg, x)
            const_bytes, state_bytes = footprint(qg)
            row = {
                "weight_bits": wb,
                "state_bits": sb,
                "sqnr_db": _finite(sqnr_db(y, y_f)),
                "flash_data_bytes": const_bytes,
                "ram_bytes": state_bytes,
                "memory_bytes": const_bytes + state_bytes,
            }
            if labels is not None:
                row["metric"] = task_metric(y, labels)
            out.append(row)
    return out


# --- output ----------------------------------------------------------------------------------
