"""The ``onnx`` target: an ONNX step model and a whole-sequence Scan model, built with onnx.helper.

Files:

``step.onnx``
    ``(x [B, F], L<i>_m [B, size], ...) -> (y [B, F_out], L<i>_m_out, ...)``: the
    state is explicit, the caller feeds each ``*_out`` back (zeros to reset); the
    batch ``B`` is a symbolic dimension, one row per stream.
``sequence.onnx``
    ``x_seq [T, B, F], <state>_init [B or 1, size] -> y_seq [T, B, F_out], <state>_final``:
    the same step as the body of a ``Scan`` whose carried values are the states
    (starting at ``<state>_init``, zeros by default).

The step is :class:`._floatstep.FloatStep` (the same description the TFLite
target converts), written as ONNX nodes by :class:`OnnxOps`.

Opset 21 (QuantizeLinear / DequantizeLinear with per-axis scales and int16), no TensorFlow.
``quantize="int8"`` writes QDQ models: weights as int8 initializers (symmetric, per output channel;
7-bit where an 8-bit activation reads them, int16 where a 16-bit one does, so that ONNX Runtime's
default session computes them as written: :data:`ORT_SESSION_CONFIG`) behind DequantizeLinear, every
activation behind an int8 QuantizeLinear / DequantizeLinear pair, and the LMU's input ``u``, its memory
update and its state (which integrate over theta steps) behind int16 pairs (symmetric), each pair's
scale from lmu_edge's own calibration (the ranges every tensor of the float step model takes when it
is run over the calibration data). The LMU weights use the split form of the TFLite target (``Abar =
hi + lo``; int16, as the state reads them).

int8 is mixed precision where 8 bits cannot carry the model (option ``widen_db``, default
:data:`WIDEN_DB`): when the QDQ model's SQNR against the float oracle on the calibration data is below
it, :func:`widen` makes the fewest activations and weight matrices 16-bit that lift it there (the
output is always 16-bit, with 2x headroom: the interface is float32), or gives the LMU memory path its
calibrated ranges with less headroom (:data:`TIGHT`).
The layer-option matrix needs it: five of its ten models were at 17-29 dB with 8 bits everywhere but
the LMU state, 8-bit activations and, on the RNN-path model, 8-bit weights in its feedback loop being
the limit (docs/tflite_onnx.md). ``widen_db=None`` keeps every tensor but the LMU state path and the output
8-bit.

Runtimes: ``onnxruntime`` (default; runs ``sequence.onnx``), ``onnx-reference``
(``onnx.reference.ReferenceEvaluator`` on ``sequence.onnx``); ``stream`` steps ``step.onnx``.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from lmu_edge import reference, widening
from lmu_edge.errors import ArtifactError
from lmu_edge.metrics import relative_error, sqnr_db
from lmu_edge.qlinear import TIGHT16_HEADROOM

from . import _stepplan
from ._onnx_ops import BATCH, OPSET, ORT_SESSION_CONFIG, SAFE_INT8, TIGHT, WIDE, OnnxOps, build  # noqa: F401  (re-exported)
from ._onnx_ops import is_state as _is_state  # noqa: F401  (re-exported: the target's own name)
from ._onnx_ops import onnx_module as _onnx
from ._onnx_ops import ort_session as _ort_session
from ._onnx_quant import Calibration, held_out, widen  # noqa: F401  (re-exported)
from ._onnx_quant import calibrate as _calibrate  # noqa: F401  (re-exported: the target's own name)
from ._onnx_quant import qdq_sqnr as _sqnr  # noqa: F401  (re-exported: the target's own name)

QUANTIZE = ("float", "int8")
RUNTIMES = ("onnxruntime", "onnx-reference")
DEFAULT_RUNTIME = "onnxruntime"
#: int8's mixed precision (option ``widen_db``; None: int8 everywhere but the LMU state path and the output): where the
#: calibration SQNR misses this, activations and weight matrices are made 16-bit (:func:`widen`). The
#: floor is 30 dB on unseen inputs; on the layer-option matrix the test SQNR sat up to 3.1 dB below the
#: calibration SQNR, hence 6 dB of margin.
WIDEN_DB = 36.0
OPTIONS: dict = {"calibration_steps": 2000, "widen_db": WIDEN_DB, "widen_steps": 20000, "held_out": True}
STEP, SEQ = "step.onnx", "sequence.onnx"


def _widen_db(v):
    return widening.widen_db_option(v, "onnx", WIDEN_DB)


def emit(graph, out_dir, options) -> dict:
    """Write ``step.onnx`` and ``sequence.onnx`` (float or int8 QDQ) for the folded graph."""
    onnx = _onnx()
    out_dir = Path(out_dir)
    quantize = options.get("quantize", "float")
    plan = _stepplan.StatePlan(graph)
    qdq = None
    report: dict[str, Any] = {"opset": OPSET}
    widening: dict[str, Any] = {}
    if quantize == "int8":
        cal = options["calibration"]
        steps = int(options.get("calibration_steps", 2000))
        cal = cal[: max(1, steps // cal.shape[1])]
        rec = _stepplan.record(graph, cal)
        plan = _stepplan.StatePlan(graph, rec, balance=True)
        calib = Calibration(graph, plan, cal, inputs=options["calibration"])
        qdq = calib.qdq()
        widen_db = _widen_db(options.get("widen_db", WIDEN_DB))
        if widen_db is not None:
            x = options["calibration"]  # the search runs the model 2N+ times: on at most widen_steps steps
            x = x[: max(1, int(options.get("widen_steps", 20000)) // x.shape[1])]
            widened, got, before = widen(graph, plan, calib, x, widen_db)
            held: dict = {}
            if options.get("held_out", True) is not False:  # checked on sequences its ranges did not see
                widened, held = held_out(graph, plan, options["calibration"], options, widened, got, widen_db)
            qdq = calib.qdq(widened)
            widening = {
                "widen_db": widen_db,
                "int8_sqnr_db": before,
                "widened": [n for n in calib.candidates if n in widened and n != TIGHT],
                **({"memory_ranges": f"calibrated, {TIGHT16_HEADROOM}x headroom"} if TIGHT in widened else {}),
                "widened_weights": [n for n in calib.weights if n in widened],  # the weight matrices among them
                **({"held_out": held} if held else {}),
            }
    step, seq, _ = build(graph, plan, qdq)
    _write_contract(step, seq, graph, quantize)
    for m in (step, seq):
        onnx.checker.check_model(m, full_check=True)
    (out_dir / STEP).write_bytes(step.SerializeToString())
    (out_dir / SEQ).write_bytes(seq.SerializeToString())
    report["nodes"] = {"step": len(step.graph.node), "scan_body": len(seq.graph.node[0].attribute[0].g.node)}
    if quantize != "float":
        x = options["calibration"]
        y = _run_seq(_ort_session(seq.SerializeToString()), x)
        y = y if graph.output_is_sequence else y[:, -1]
        ref = reference.simulate(graph, x)
        report["quantization"] = {
            "onnxruntime_session_config": dict(ORT_SESSION_CONFIG),  # what a user's sessions need too
            "error_vs_float": relative_error(y, ref),
            "sqnr_db_vs_float": sqnr_db(y, ref),
            "note": (
                "int8 QDQ (int16 LMU input and state) with calibrated per-tensor activations and "
                "per-channel weights (int16 where a 16-bit activation reads them), measured against the "
                "float oracle on the calibration data in ONNX Runtime with its default session options "
                "(QDQ fusion on)"
            ),
            **widening,
        }
    return {"files": [STEP, SEQ], "tolerance": None if quantize != "float" else 1e-4, "report": report}


def _write_contract(step, seq, graph, quantize) -> None:
    """The streaming contract (:mod:`.streaming`) as both models' ``doc_string`` and ``metadata_props``."""
    from . import streaming

    session = (
        "ONNX Runtime: default session options (its QDQ fusions compute this placement as written; "
        "no session config entry is needed)"
        if quantize != "float"
        else ""
    )
    c = streaming.contract(
        graph,
        quantize,
        interface="float32 (quantization, if any, is inside the model as QuantizeLinear / DequantizeLinear)",
        extra={
            "file": STEP,
            "sequence_model": (
                f"{SEQ} takes x_seq [T, batch, F] and optional initial states <name>_init [batch or 1, size] "
                "(default zeros) and returns y_seq [T, batch, outputs] and the final states <name>_final: "
                "feed them as the next chunk's <name>_init to resume a stream"
            ),
            "session": session,
        },
    )
    for m in (step, seq):
        m.doc_string = streaming.describe(c)
        entry = m.metadata_props.add()
        entry.key, entry.value = streaming.KEY, json.dumps(c, sort_keys=True)


def _run_seq(sess_or_ref, x):
    with np.errstate(over="ignore", invalid="ignore"):  # onnx.reference: numpy's exp on a sigmoid's large input
        out = [np.asarray(sess_or_ref.run(None, {"x_seq": s[:, None, :].astype(np.float32)})[0], np.float64) for s in x]
    return np.stack([y[:, 0] for y in out])


@contextlib.contextmanager
def _received(artifact, runtime, model, doing):
    """A received model that fails to load or to run (fuzz seed 6, input 2562: dims edited and resealed) is
    refused in one line; while convert writes one (``sealed`` None) the exception is a bug of ours and stays one."""
    try:
        yield
    except Exception as e:
        if getattr(artifact, "sealed", None) is None:
            raise
        msg = " ".join(str(e).split())[:160]
        raise ArtifactError(
            f"{artifact.path}/{model}: {runtime} cannot {doing} it ({msg}); convert the model again"
        ) from None


def _runner(artifact, runtime, model=SEQ):
    from lmu_edge import limits  # parsed from the bytes checked against the seal, external data refused

    data = artifact.sealed_bytes(model)
    limits.check_onnx(data, f"{artifact.path}/{model}")
    with _received(artifact, runtime, model, "load"):
        if runtime == "onnxruntime":
            return _ort_session(data)
        if runtime == "onnx-reference":
            onnx = _onnx()
            from onnx.reference import ReferenceEvaluator

            return ReferenceEvaluator(onnx.load_from_string(data))
    raise ArtifactError(f"onnx: unknown runtime {runtime!r}")


def run(artifact, x, runtime):
    """Run ``sequence.onnx`` over ``x`` ``(N, T, F)`` in ``runtime``; what the source model's predict returns."""
    sess = _runner(artifact, runtime)
    with _received(artifact, runtime, SEQ, "run"):
        y = _run_seq(sess, x)
    return y if artifact.graph.output_is_sequence else y[:, -1]


class _Stream:
    """Steps ``step.onnx`` with explicit state: every batch row in one call (the model's batch is open)."""

    def __init__(self, artifact, runtime):
        self.sess, self.artifact, self.runtime = _runner(artifact, runtime, STEP), artifact, runtime
        self.spec = _stepplan.state_spec(artifact.graph)
        self.names = ["y"] + [f"{n}_out" for n, *_ in self.spec]
        self.reset()

    def reset(self, batch: int = 1):
        self.batch = batch
        self.st = {n: np.zeros((batch, s), np.float32) for n, _, _, s in self.spec}

    def step(self, x_t):
        x = np.asarray(x_t, dtype=np.float32)
        rows = x.reshape(-1, x.shape[-1])
        with _received(self.artifact, self.runtime, STEP, "run"):
            res = dict(zip(self.names, self.sess.run(self.names, {"x": rows, **self.st}), strict=True))
        self.st = {n: res[f"{n}_out"] for n, *_ in self.spec}
        y = np.asarray(res["y"], np.float64)
        return y[0] if x.ndim == 1 else y


def stream(artifact, runtime):
    """``step.onnx`` in ``runtime`` with explicit state, one sample at a time."""
    return _Stream(artifact, runtime)


def check(artifact, x) -> dict:
    """The error against the source model in ``onnx.reference`` too (ONNX Runtime is checked by convert)."""
    y = artifact.run(x[:1], runtime="onnx-reference")
    return {"error_vs_source_onnx-reference": relative_error(y, artifact.reference(x[:1]))}
