"""The ``tflite`` target: a TFLite step model ``(x_t, state) -> (y_t, state')``.

Files: ``model.tflite`` (the step model) and ``io.json`` (its inputs and outputs
in subgraph order, with their quantization, for runtimes without signatures). The
model carries its streaming contract (:mod:`.streaming`, :mod:`._tflite_contract`):
a ``step`` signature and a metadata entry, read back by ``lmu-edge inspect``.

Variants (option ``variant``):

``external`` (default)
    signature ``step(x, L<i>_m, ...) -> {y, L<i>_m_out, ...}``: the caller
    keeps the state and feeds each ``*_out`` back as the next step's input;
    resetting is passing zeros (the zero point, in quantized models). The batch
    (dimension 0, ``shape_signature`` -1) is open: LiteRT resizes it to the rows
    fed, one row per stream; TFLite Micro runs the stored shape, batch 1.
``internal``
    signature ``step(x) -> {y}`` keeps the state in resource variables
    (VAR_HANDLE / READ_VARIABLE / ASSIGN_VARIABLE); the ``step_reset``
    signature sets them back to zero (named so that it sorts after ``step``:
    the converter orders subgraphs by signature name, and TFLite Micro, which
    runs subgraph 0, must find ``step`` there). In TFLite Micro
    ``MicroInterpreter::Reset()`` (``Interpreter.reset()`` in Python) resets them.

Quantization (``quantize``): ``float`` (float32), ``int8`` (int8 weights and
activations, ``x`` and ``y`` int8; the LMU state path is int16, spliced in from
the int16x8 conversion, see :mod:`._tflite_mixed`; option ``int8_state_path="int8"``
gives the all-int8 model) and ``int16x8`` (int16 activations and state, int8 weights). The
representative data are the inputs and the states the float oracle
(:func:`lmu_edge.simulate`) went through on the calibration data. The LMU
memory is written in the "split" form (option ``form``, see
:mod:`._tflite_build`); ``form="plain"`` is the plain conversion, kept for
comparison: the report of a quantized artifact gives both SQNRs.

Runtimes: ``litert`` (ai-edge-litert, default), ``tflm`` (TFLite Micro's host
interpreter from the ``tflite-micro`` package; the report gives the arena size
it needs), ``tflite-runtime`` (the legacy ``tflite-runtime`` package, run in a
separate Python named by the option ``tflite_runtime_python`` or the variable
``LMU_EDGE_TFLITE_RUNTIME_PYTHON``, because it needs numpy < 2 and cannot share
a process with TensorFlow).
"""

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

from lmu_edge import reference, widening
from lmu_edge.errors import ArtifactError, QuantizationError
from lmu_edge.metrics import relative_error, sqnr_db
from lmu_edge.registry import require

from . import _stepplan, _tflite_session

QUANTIZE = ("float", "int8", "int16x8")
#: target contract (optional): no integer Runge-Kutta state path (TFLite has no 16x8 CUMSUM, two per RK
#: stage); lmu_edge.folding leaves RK out of a quantized ``auto`` and refuses it by name
RK_QUANTIZED = False
RUNTIMES = ("litert", "tflm", "tflite-runtime")
DEFAULT_RUNTIME = "litert"
#: int8 mixed precision, as the ONNX target's (:data:`targets.onnx.WIDEN_DB`): the 30 dB floor on unseen
#: inputs plus margin for the gap between calibration and test data
WIDEN_DB = 36.0
OPTIONS = {
    "variant": "external",  # external | internal
    "form": "auto",  # auto (split when quantized) | split | plain
    "compare_plain": True,  # quantized: also convert the plain form and report its SQNR
    "int8_state_path": "int16",  # quantize=int8, split form: int16 (spliced from int16x8) | int8
    "representative_samples": 1000,  # steps of calibration data given to the converter
    # auto (GPTQ with int16x8, as the C target) | gptq | nearest (the converter's own rounding)
    "weight_rounding": "auto",
    "tflite_runtime_python": "",  # python with tflite-runtime (default: $LMU_EDGE_TFLITE_RUNTIME_PYTHON)
    # int8 (int16 state path): widen more operators to 16 bits where the calibration SQNR misses this
    # (None: no more than the state path); see WIDEN_DB
    "widen_db": WIDEN_DB,
    "widen_steps": 20000,  # the widening search runs the model 2N+ times: on at most this many steps
}


def state_bits(quantize, options) -> int | None:
    """Target contract (optional): the LMU state width this target keeps where ``lmu_edge.precision`` would
    choose another: 8 bits on the int8 model's int8 state path (``int8_state_path="int8"``)."""
    return 8 if quantize == "int8" and options.get("int8_state_path") == "int8" else None


MODEL, IO = "model.tflite", "io.json"
PYTHON_ENV = "LMU_EDGE_TFLITE_RUNTIME_PYTHON"
#: a quantized model's running mean counts at least this many steps (its 16-bit count spans twice it)
#: before it becomes an exponential mean; calibrated on shorter sequences, the count used to stop at twice
#: their length. Not more: TFLite's int16 RSQRT (1 / n = rsqrt(n)^2) loses accuracy at small counts when
#: the count's range is wide (the matrix's pooling model, calibrated on 40 steps, in int16x8 at 40 / 200 /
#: 1,000 steps: 68.6 / 30.4 / 22.0 dB before, 69.1 / 72.2 / 31.4 with 127, 48.7 / 62.4 / 52.4 with 511)
COUNT_RANGE = 127


def _bool(v) -> bool:
    return v if isinstance(v, bool) else str(v).lower() in ("1", "true", "yes", "on")


# --- building ------------------------------------------------------------------------------


def _litert():
    return require("ai_edge_litert.interpreter", "tflite", "running TFLite models in LiteRT")


def _io_description(model_path: Path, variant: str, spec) -> dict:
    """Names, shapes and quantization of subgraph 0's inputs and outputs, from LiteRT."""
    interp = _litert().Interpreter(model_path=str(model_path))
    runner = interp.get_signature_runner(_tflite_session.step_key(interp.get_signature_list()))

    def desc(details, sig_details):
        by_index = {d["index"]: n for n, d in sig_details.items()}
        out = []
        for d in details:
            qp = d["quantization_parameters"]
            out.append(
                {
                    "name": by_index[d["index"]],
                    "shape": [int(s) for s in d["shape"]],
                    "dtype": np.dtype(d["dtype"]).name,
                    "scale": float(qp["scales"][0]) if len(qp["scales"]) else 0.0,
                    "zero_point": int(qp["zero_points"][0]) if len(qp["zero_points"]) else 0,
                }
            )
        return out

    ops = sorted({o["op_name"] for o in interp._get_ops_details()})
    return {
        "model": MODEL,
        "variant": variant,
        "states": [n for n, *_ in spec] if variant == "external" else [],
        "inputs": desc(interp.get_input_details(), runner.get_input_details()),
        "outputs": desc(interp.get_output_details(), runner.get_output_details()),
        "ops": ops,
    }


def _stream_error(model_bytes: bytes, io, graph, x: np.ndarray, spec=None) -> tuple:
    """(relative error, SQNR dB) of the step model against the float oracle over whole sequences; with
    ``io`` None the model's io description is read from the same temporary file (``spec``: the states)."""
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / MODEL
        p.write_bytes(model_bytes)
        io = _io_description(p, "external", spec) if io is None else io
        s = _tflite_session.Session(io, _tflite_session.SignatureBackend(_litert().Interpreter, p))
        y = _tflite_session.run_sequences(s, x)
    ref = reference.simulate(graph, x)
    y = y if graph.output_is_sequence else y[:, -1]
    return relative_error(y, ref), sqnr_db(y, ref)


def _widen_ops(m8: bytes, m16: bytes, plan, widen) -> tuple:
    """int8 with an int16 state path and, where its calibration SQNR misses ``widen["db"]``, the fewest
    more operators taken into the int16 path (:func:`lmu_edge.widening.narrow`) that lift it there.
    Returns ``(model, {"widened": [...], "int8_sqnr_db": ...} or {})``."""
    from . import _tflite_mixed, _tflite_tflm

    states = [n for n, *_ in plan.spec]
    cands: dict = _tflite_mixed.candidate_ops(m8, m16, states)
    cands["x"] = "input x"  # last: an int16 input where 8 bits of it hold the model under the target

    def build(wide):
        ops = sorted(k for k in wide if k != "x")
        return _tflite_tflm.conform(
            _tflite_mixed.widen_state_path(
                m8, m16, states, extra=ops, output_range=widen["y_range"], wide_input="x" in wide
            )
        )

    def score(wide):
        m = build(wide)
        return _stream_error(m, None, widen["graph"], widen["x"], plan.spec)[1]

    wide, _, start = widening.narrow(cands, score, widen["db"])
    info = {"widen_db": widen["db"], "int8_sqnr_db": start, "widened": [v for k, v in cands.items() if k in wide]}
    return build(wide), info


def _better_all_int8(graph, plan, form, rep, model: bytes, widen) -> tuple:
    """``(model, state path note)``: ``model`` (int16 state path, widened) where it meets ``widen["db"]`` on
    the calibration data or beats the all-int8 conversion there, else the all-int8 model. A state path
    that only a concatenation's history holds (the band convolution's, spliced since issue 52 matched the
    two conversions' structure) read at 16 bits through per-tensor weights gave 25.1 dB where the
    all-int8 model gives 31.9 (``tests/test_band_conv.py``)."""
    from . import _tflite_build, _tflite_tflm

    wide = _stream_error(_tflite_tflm.conform(model), None, widen["graph"], widen["x"], plan.spec)[1]
    if wide >= widen["db"]:
        return model, "int16"
    all8 = _tflite_build.convert(graph, plan, form, False, "int8", rep)
    s8 = _stream_error(_tflite_tflm.conform(all8), None, widen["graph"], widen["x"], plan.spec)[1]
    if s8 <= wide:
        return model, "int16"
    return all8, f"int8 (the all-int8 model: {s8:.1f} dB on the calibration data, the int16 state path {wide:.1f})"


def _widen_x(options, cal):
    """The calibration sequences the widening search runs on (at most ``widen_steps`` steps)."""
    return cal[: max(1, int(options.get("widen_steps", 20000)) // cal.shape[1])]


def _widen_db(v):
    return widening.widen_db_option(v, "tflite", WIDEN_DB)


def _emit_one(graph, out_dir: Path, plan, form, variant, quantize, rep, wide: bool = False, widen=None) -> tuple:
    """``(model bytes, io description, state path note, widening info)``; ``wide``: int8 with an int16
    state path; ``widen`` (with ``wide``): ``{"db", "graph", "x"}``, widen more operators to 16 bits
    where the SQNR against ``graph`` on ``x`` misses ``db``, the output's int8 range ``y_range`` where
    they write it (:func:`_widen_ops`)."""
    from . import _tflite_build, _tflite_mixed, _tflite_tflm

    state_path, info = None, {}
    try:
        if wide:
            try:
                m8, m16 = _tflite_build.convert_int8_pair(graph, plan, form, rep)
                if widen is None:
                    model = _tflite_mixed.widen_state_path(m8, m16, [n for n, *_ in plan.spec])
                else:
                    model, info = _widen_ops(m8, m16, plan, widen)
                state_path = "int16"
                if widen is not None:  # below the target after widening: keep the all-int8 model if it is better
                    model, state_path = _better_all_int8(graph, plan, form, rep, model, widen)
                    info = info if state_path == "int16" else {}
            except _tflite_mixed.SpliceError as e:  # fall back to all-int8, and say so in the report
                model = _tflite_build.convert(graph, plan, form, False, quantize, rep)
                state_path = f"int8 (the int16 state path could not be built: {e})"
        else:
            model = _tflite_build.convert(graph, plan, form, variant == "internal", quantize, rep)
            if quantize != "float":
                state_path = "int16" if quantize == "int16x8" else "int8"
        if quantize != "float":  # what lmu-edge's edits of the conversion may break (:mod:`._tflite_tflm`)
            model = _tflite_tflm.conform(model)
    except Exception as e:  # the converter's errors are long MLIR dumps: keep the line that names the op
        raise QuantizationError(
            f"the TFLite converter failed on the {variant} {quantize} step model "
            f"of {graph.name!r}: {_one_line(e)}; {_instead(quantize)}"
        ) from e
    path = out_dir / MODEL
    path.write_bytes(model)
    try:
        io = _io_description(path, variant, plan.spec)
    except Exception as e:  # LiteRT cannot prepare the model (e.g. an op's scale constraint)
        raise QuantizationError(
            f"LiteRT cannot prepare the {quantize} TFLite model of {graph.name!r}: {_one_line(e)}; {_instead(quantize)}"
        ) from e
    return model, io, state_path, info


def _with_contract(model: bytes, io: dict, graph, quantize: str) -> bytes:
    """``model`` with the streaming contract (:mod:`.streaming`) in its metadata and its signature named
    ``step`` (:mod:`._tflite_contract`); the interface's dtypes and quantization come from ``io``."""
    from . import _tflite_contract, streaming

    kinds = sorted({d["dtype"] for d in io["inputs"] + io["outputs"]})
    extra = {
        "file": MODEL,
        "signature": (
            f"{_tflite_contract.SIGNATURE!r}, inputs and outputs by the names above (TFLite Micro, which has no "
            "signatures: by index, in the orders above)"
        ),
    }
    if io["variant"] == "internal":
        extra["state_storage"] = (
            "internal: resource variables inside the model (batch 1); the step_reset signature zeroes them"
        )
    c = streaming.contract(
        graph,
        quantize,
        interface=" and ".join(kinds) + (" (scale and zero point per tensor)" if kinds != ["float32"] else ""),
        extra=extra,
    )
    if io["variant"] == "internal":
        c["states"], c["batch"] = [], "1 (the state is inside the model)"
    # subgraph 0's order: what a runtime without signatures (TFLite Micro) indexes by
    c["input_order"] = [d["name"] for d in io["inputs"]]
    c["output_order"] = [d["name"] for d in io["outputs"]]
    streaming.with_interface(c, io["inputs"] + io["outputs"])
    return _tflite_contract.stamp(model, c, open_batch=io["variant"] == "external")


def _instead(quantize: str) -> str:
    """What to do instead: the other quantization modes of this target, or another target."""
    others = [m for m in ("float", "int8", "int16x8") if m != quantize]
    return f"convert with --quantize {' or '.join(others)}, or use the c or onnx target"


def _one_line(e: BaseException) -> str:
    """The line of a converter or interpreter error that names the op (they are long multi-line dumps)."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    for pattern in (r"\(([A-Z][A-Z0-9_]+)\) failed to prepare", r"for op: '?([A-Z][A-Z0-9_]+)"):
        for ln in lines:
            m = re.search(pattern, ln)
            if m:
                return f"op {m.group(1)}: {ln[:200].rstrip('.')}"
    return lines[0][:200].rstrip(".") if lines else type(e).__name__


def _construction(form: str, quantize: str, state_path: str) -> str:
    """The report's one-line description of how the quantized LMU memory is built."""
    mem = (
        "split form: balanced state coordinates, Abar (and the weights of any feedback loop) split into an "
        "int8-exact high part and a 254x finer low part (two FULLY_CONNECTED + ADD)"
        if form == "split"
        else "plain conversion: Abar as one FULLY_CONNECTED with 8-bit weights"
    )
    if state_path == "int16" and quantize == "int8":
        state = (
            "int16 state path in an int8 model: every op the next state depends on, and the "
            "FULLY_CONNECTED ops reading the state, spliced from the int16x8 conversion, with QUANTIZE "
            "int8<->int16 at its borders"
        )
    elif state_path == "int16":
        state = "int16 state"
    else:
        state = f"{state_path} state: rounded to 8 bits every step"
    return f"{mem}; {state}"


def gptq_per_tensor(W, gram, centered: bool):
    """``W`` (``(inputs, outputs)``) rounded by GPTQ (:func:`lmu_edge.rounding.gptq`, the same error
    feedback in blocks and the same scale search) on **one** int8 scale for the whole matrix, as a
    converter that quantizes the weights per tensor stores them (:data:`._tflite_build.PER_TENSOR`); the
    largest weight sits at 127 steps of the chosen scale, so that the converter's ``max |w| / 127``
    finds it and keeps the values."""
    from lmu_edge import rounding as qz

    W = np.asarray(W, np.float64)
    qmax = 127
    base = max(float(np.abs(W).max()), 1e-30) / qmax
    n = gram[2]  # the count of calibration inputs
    nearest = np.clip(np.round(W / base), -qmax, qmax) * base
    if n == 0 or W.shape[0] == 1:
        return nearest
    H = qz.gptq_hessian(gram, centered)
    order = np.argsort(-np.diag(H), kind="stable")
    U = qz.inverse_upper_factor(H[np.ix_(order, order)])
    if U is None:
        return nearest
    f, cols = len(qz.GPTQ_SCALES), W.shape[1]
    scale = np.repeat(base * qz.GPTQ_SCALES, cols)  # candidate c at columns c*cols .. c*cols+cols-1
    X = np.tile(W[order], f)
    pi, pj = np.unravel_index(np.argmax(np.abs(W[order])), W.shape)
    Q = np.empty_like(X)
    for a in range(0, len(X), qz.GPTQ_BLOCK):
        b = min(a + qz.GPTQ_BLOCK, len(X))
        E = np.empty((b - a, X.shape[1]))
        for i in range(a, b):
            Q[i] = np.clip(np.round(X[i] / scale), -qmax, qmax) * scale
            if i == pi:  # the peak at +-qmax steps: the converter finds the scale
                cj = pj + cols * np.arange(f)
                Q[i, cj] = np.sign(W[order][pi, pj]) * qmax * scale[cj]
            E[i - a] = (X[i] - Q[i]) / U[i, i]
            X[i + 1 : b] -= np.outer(U[i, i + 1 : b], E[i - a])
        X[b:] -= U[a:b, b:].T @ E
    Q = Q[np.argsort(order)]
    R = Q - np.tile(W, f)
    cost = np.sum(R * (H @ R), axis=0).reshape(f, cols).sum(axis=1)
    c = int(np.argmin(cost))
    return Q[:, c * cols : (c + 1) * cols]


def gptq_weights(graph, plan, cal, correct_bias: bool, per_tensor: bool = False):
    """``graph`` with the weights TFLite's converter quantizes per output channel (Dense kernels, LMU input
    encoders, the hidden kernel's memory and input blocks) rounded by GPTQ
    (:func:`lmu_edge.rounding.gptq`) in the coordinates the step model holds them in (the hidden
    kernel's memory rows scaled by the plan's state balance), each channel's largest weight at 127 steps
    of the chosen scale, so that the converter's own ``max |w| / 127`` finds that scale and keeps the
    values. ``correct_bias``: the biases take out the rounding's mean (as ``quantize`` with 16-bit
    activations). The weights of a feedback loop are left alone (``quantization.compensated``).
    ``per_tensor``: one scale per matrix (:func:`gptq_per_tensor`), for the modes whose weights TFLite
    Micro's CMSIS-NN kernels take per tensor only (:data:`._tflite_build.PER_TENSOR`)."""
    import dataclasses

    from lmu_edge import ir
    from lmu_edge import rounding as qz

    from ._floatstep import uneven

    recs = reference.record_ranges(graph, np.asarray(cal, np.float64))

    def rounded(W, gram, rows):
        G, total, n = gram
        if per_tensor and uneven(W * rows[:, None]):  # split into hi + lo instead (FloatStep(split_uneven))
            return np.asarray(W, np.float64)
        if per_tensor:
            return (
                gptq_per_tensor(W * rows[:, None], (G / np.outer(rows, rows), total / rows, n), correct_bias)
                / rows[:, None]
            )
        Qb, _ = qz.gptq(W * rows[:, None], (G / np.outer(rows, rows), total / rows, n), 8, correct_bias, True)
        return Qb / rows[:, None]

    def fix(W, gram, bias, mean, rows=None):
        W = np.asarray(W, np.float64)
        rows = np.ones(len(W)) if rows is None else rows
        Q = rounded(W, gram, rows)
        return Q, (qz.shifted_bias(bias, W, Q, mean) if correct_bias else bias)

    layers = []
    for i, (layer, rec) in enumerate(zip(graph.layers, recs, strict=True)):
        if isinstance(layer, ir.Dense):
            k, b = fix(layer.kernel, rec["in_gram"], layer.bias, rec["in_mean"])
            layer = dataclasses.replace(layer, kernel=k, bias=b)
        elif isinstance(layer, ir.LMU):
            enc, eb = fix(layer.input_encoders, rec["in_gram"], layer.encoder_bias, rec["in_mean"])
            ch: dict = {"input_encoders": enc, "encoder_bias": eb}
            if layer.hidden is not None and layer.hidden_encoders is None:
                G, total, n = rec["z_gram"]
                W = np.asarray(layer.hidden.kernel, np.float64)
                dq = layer.memory_d * layer.order
                sig = plan.sigma.get(i)
                fir = sig is None or isinstance(layer.memory, ir.FIR)  # as FloatStep scales the memory's rows
                rows = np.ones(dq) if fir else np.tile(sig, layer.memory_d)
                Q = np.empty_like(W)
                Q[:dq] = rounded(W[:dq], (G[:dq, :dq], total[:dq], n), rows)
                if len(W) > dq:
                    Q[dq:] = rounded(W[dq:], (G[dq:, dq:], total[dq:], n), np.ones(len(W) - dq))
                bias = qz.shifted_bias(layer.hidden.bias, W, Q, total / n) if correct_bias else layer.hidden.bias
                ch["hidden"] = dataclasses.replace(layer.hidden, kernel=Q, bias=bias)
            layer = dataclasses.replace(layer, **ch)
        layers.append(layer)
    return graph.replace(layers=tuple(layers))


def check_options(quantize: str, options: dict) -> None:
    """Refuse, before any work, a ``variant`` or ``form`` this target does not have."""
    if (options.get("variant") or "external") not in ("external", "internal"):
        raise ArtifactError(f"tflite: unknown variant {options.get('variant')!r}; known: external, internal")
    if options.get("form", "auto") not in ("auto", "split", "plain"):
        raise ArtifactError(f"tflite: unknown form {options.get('form')!r}; known: auto, split, plain")
    if options.get("variant") == "internal" and quantize != "float":
        # TF 2.21's calibrator cannot load a model whose step_reset signature has no inputs
        # ("NULL SignatureDef inputs for exported method step_reset")
        raise QuantizationError(
            "tflite: the internal-state variant is float32 only for now; quantize the "
            "external variant (variant='external') and keep the state on the device"
        )


def emit(graph, out_dir, options) -> dict:
    """Write ``model.tflite`` and ``io.json`` for the folded graph (see the module docstring)."""
    out_dir = Path(out_dir)
    quantize = options.get("quantize", "float")
    check_options(quantize, options)  # the one place the options are checked (convert checks before any work)
    variant = options.get("variant") or "external"
    form = options.get("form", "auto")
    if form == "auto":
        form = "plain" if quantize == "float" else "split"
    require("tensorflow", "tflite", "building TFLite models")
    cal = options.get("calibration")
    rep: dict | None = None
    rec: dict | None = None
    report: dict[str, Any] = {"variant": variant, "form": form}
    if quantize != "float":
        n_rep = int(options.get("representative_samples", 1000))
        if variant == "internal":  # the variables must follow real trajectories: whole sequences in order
            T = cal.shape[1]
            rec = _stepplan.record(graph, cal[: max(1, n_rep // T)])
        else:
            rec = _stepplan.record(graph, cal, max_samples=n_rep)
    plan = _stepplan.StatePlan(graph, rec, balance=(form == "split"))
    if rec is not None:
        rep = {"x": rec["x"], **plan.model_states(rec)}
        if variant == "external":  # the internal variant's calibration replays whole sequences in order
            rep = _stepplan.with_long_counts(graph, rep, COUNT_RANGE)
    state8 = options.get("int8_state_path") or "int16"
    if state8 not in ("int16", "int8"):
        raise ArtifactError(f"tflite: unknown int8_state_path {state8!r}; known: int16, int8")
    wide = quantize == "int8" and form == "split" and state8 == "int16"
    rounding = options.get("weight_rounding") or "auto"
    if rounding not in ("auto", "gptq", "nearest"):
        raise ArtifactError(f"tflite: unknown weight_rounding {rounding!r}; known: auto, gptq, nearest")
    # with 16-bit activations the weights' rounding is the main error, as in the C target (docs/matrix.md)
    use_gptq = quantize != "float" and (rounding == "gptq" or (rounding == "auto" and quantize == "int16x8"))
    if use_gptq:
        from ._tflite_build import PER_TENSOR

        built = gptq_weights(graph, plan, cal, correct_bias=quantize == "int16x8", per_tensor=quantize in PER_TENSOR)
    else:
        built = graph
    widen_db = _widen_db(options.get("widen_db", WIDEN_DB))
    widen = None
    if widen_db is not None and wide and rec is not None:  # the output's range: every step's output
        y_range = (float(rec["y"].min()), float(rec["y"].max()))
        widen = {"db": widen_db, "graph": graph, "x": _widen_x(options, cal), "y_range": y_range}
    model, io, state_path, widening = _emit_one(built, out_dir, plan, form, variant, quantize, rep, wide, widen)
    model = _with_contract(model, io, graph, quantize)
    (out_dir / MODEL).write_bytes(model)
    (out_dir / IO).write_text(json.dumps(io, indent=2))
    report.update(model_bytes=len(model), ops=io["ops"], state_names=io["states"] or [n for n, *_ in plan.spec])
    with contextlib.suppress(Exception):
        report["tflm_arena_bytes"] = tflm_arena_size(model, io)
    if quantize != "float":  # the TFLite Micro kernel sets that can prepare it (docs/tflite_onnx.md)
        from . import _tflite_tflm

        breaks = _tflite_tflm.violations(model)
        report["tflm_kernels"] = {
            "cmsis_nn": "accepted" if not breaks else "refused: " + "; ".join(breaks[:3]),
            "reference_fallbacks": _tflite_tflm.reference_fallbacks(model),  # prepared, run on reference kernels
        }
    if quantize != "float":
        err, sq = _stream_error(model, io, graph, cal)
        q = {
            "error_vs_float": err,
            "sqnr_db_vs_float": sq,
            "weight_rounding": "gptq" if use_gptq else "nearest",
            "form": form,
            "state_path": state_path,
            **widening,
            "note": (
                "measured against the float oracle on the calibration data, streamed step by step; "
                "no integer reference of TFLite's kernels exists in lmu-edge, so outputs are not "
                "compared within 1 LSB"
            ),
        }
        q["construction"] = _construction(form, quantize, state_path)
        if widening.get("widened"):
            q["construction"] += f"; 16-bit too, where 8 bits missed {widening['widen_db']:g} dB: " + ", ".join(
                widening["widened"]
            )
        if _bool(options.get("compare_plain", True)) and form != "plain" and rec is not None:
            plain_plan = _stepplan.StatePlan(graph, rec, balance=False)
            prep = _stepplan.with_long_counts(graph, {"x": rec["x"], **plain_plan.model_states(rec)}, COUNT_RANGE)
            with tempfile.TemporaryDirectory() as d:
                pm, pio, _, _ = _emit_one(graph, Path(d), plain_plan, "plain", variant, quantize, prep)
            perr, psq = _stream_error(pm, pio, graph, cal)
            q["plain"] = {"error_vs_float": perr, "sqnr_db_vs_float": psq}
        report["quantization"] = q
    return {"files": [MODEL, IO], "tolerance": None if quantize != "float" else 1e-4, "report": report}


# --- running -------------------------------------------------------------------------------


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


class _WorkerSession:
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
        self._ask(np.float64(0))

    def step(self, x_t):
        return self._ask(np.asarray(x_t, dtype=np.float64).reshape(-1))

    def run(self, x):
        return self._ask(x)

    def close(self):
        with contextlib.suppress(Exception):
            assert self.proc.stdin is not None  # Popen(stdin=PIPE)
            self.proc.stdin.close()
            self.proc.wait(timeout=10)

    __del__ = close


def _session(artifact, runtime):
    io = _io(artifact)
    if runtime == "litert":
        return _tflite_session.Session(
            io, _tflite_session.SignatureBackend(_litert().Interpreter, artifact.data_path(MODEL))
        )
    if runtime == "tflm":
        micro = require("tflite_micro.python.tflite_micro.runtime", "tflite", "running TFLite Micro")
        arena = artifact.manifest.get("report", {}).get("tflm_arena_bytes")
        arena = int(arena) + 1024 if arena else 1 << 16
        return _tflite_session.Session(
            io, _tflite_session.MicroBackend(micro, artifact.sealed_bytes(MODEL), io, arena, grow=True)
        )
    if runtime == "tflite-runtime":
        return _WorkerSession(artifact)
    raise ArtifactError(f"tflite: unknown runtime {runtime!r}")


def run(artifact, x, runtime):
    """Run the step model over ``x`` ``(N, T, F)`` in ``runtime``; what the source model's predict returns."""
    s = _session(artifact, runtime)
    if isinstance(s, _WorkerSession):
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
