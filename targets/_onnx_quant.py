"""The ``onnx`` target's int8 quantization: the calibrated ranges of every tensor of the float step model
(:class:`Calibration`), the widening search over them (:func:`widen`) and its held-out check
(:func:`_held_out`). Split from :mod:`.onnx`, whose builder, session and constants it uses."""

from __future__ import annotations

import numpy as np

from lmu_edge import reference, widening
from lmu_edge.metrics import sqnr_db
from lmu_edge.qlinear import RANGE16_HEADROOM, TIGHT16_HEADROOM

from . import _stepplan
from ._onnx_ops import TIGHT, WIDE, build, is_state, ort_session


class Calibration:
    """The range of every activation of the float step model over the calibration data, and from them
    the QDQ model's quantization (:meth:`qdq`), with any of :attr:`candidates` made 16-bit."""

    def __init__(self, graph, plan, x, inputs=None):
        """Run the float step model over ``x``; the input ``x`` of the model takes the range of ``inputs``
        (default ``x``: the whole calibration data, where ``x`` is a part). It is built with the QDQ model's structure
        (``split=True``): tensors are named by their position in the graph, and a split memory adds
        nodes, so a float model without the split would hand every tensor after the first dense memory
        another tensor's range (fixed: it cost 10-37 dB on the layer-option matrix)."""
        step, _, builder = build(graph, plan, expose=True, split=True)
        sess = ort_session(step.SerializeToString())
        self.names = [o.name for o in sess.get_outputs()]
        lo = {n: np.inf for n in self.names}
        hi = {n: -np.inf for n in self.names}
        self.spec = spec = plan.spec
        counts = _stepplan.pooling_counts(graph)
        T = x.shape[1]
        # a running mean's count: one more pass that counts up to COUNT_RANGE sets its 16-bit scale to 1
        starts = [{}] * len(x) + ([{n: max(_stepplan.COUNT_RANGE - T, 0) for n in counts}] if counts else [])
        for seq, start in zip(list(x) + list(x[:1]) * bool(counts), starts, strict=True):
            st = {n: np.full((1, s), start.get(n, 0), np.float32) for n, _, _, s in spec}
            for x_t in seq:
                res = dict(zip(self.names, sess.run(None, {"x": x_t[None].astype(np.float32), **st}), strict=True))
                st = {n: res[f"{n}_out"] for n, *_ in spec}
                for n, v in res.items():
                    lo[n], hi[n] = min(lo[n], float(v.min())), max(hi[n], float(v.max()))
        # the model input: int8 like every target's (it fed the first MatMul as float until 2026-11-26)
        inputs = np.asarray(x if inputs is None else inputs)
        self.names.append("x")
        lo["x"], hi["x"] = float(inputs.min()), float(inputs.max())
        self.lo, self.hi, self.wide_values = lo, hi, builder.wide_values
        # what widening may make 16-bit: the 8-bit activations inside the model, the 8-bit states (a
        # SimpleRNN's h, quantized as its update), the weight matrices, and last the model input x: where
        # 8 bits of input alone hold a model under the target (the matrix's RNN-path LMU: 24.9 dB on its
        # test data), its Q/DQ pair becomes int16. The interface stays float32 either way, so the output is
        # always int16 with 2x headroom: an int8 output clipped at its calibrated range lost what held-out
        # data drove past it (issue 52's seed 170, a ReLU head: 1.33x on its test sequences, 19.1 dB)
        made = set(builder.values)
        self.output = builder.output
        self.weights = list(builder.weights)
        self.candidates = (
            [n for n in self.names if n in made and n not in self.wide_values and n not in ("x", builder.output)]
            + [n for n, *_ in spec if not is_state(n)]
            + list(builder.weights)
            + ["x"]
            + [TIGHT]
        )

    def _wide(self, n, room=RANGE16_HEADROOM):
        r = max(-self.lo[n], self.hi[n], 0.0) * room
        return (np.float32(r / 32767.0 if r > 0 else 1.0), 0, 16)

    def qdq(self, widened=frozenset()) -> dict:
        """Scale, zero point and bits of every activation: int8 asymmetric, except the LMU input and state
        and the ``widened`` activations (int16, symmetric, zero point 0, with headroom: less on the LMU's
        with :data:`TIGHT`); a ``widened`` weight matrix maps to :data:`WIDE`."""
        qdq, room = {}, TIGHT16_HEADROOM if TIGHT in widened else RANGE16_HEADROOM
        for n in self.names:
            if n in self.wide_values or n in widened or n == self.output:
                qdq[n] = self._wide(n, room if n in self.wide_values else RANGE16_HEADROOM)
                continue
            a, b = min(self.lo[n], 0.0), max(self.hi[n], 0.0)
            s = (b - a) / 255.0 if b > a else 1.0
            qdq[n] = (np.float32(s), int(np.clip(round(-128 - a / s), -128, 127)), 8)
        for n, *_ in self.spec:  # a state is quantized as its update was (the same values, one step later)
            wide = is_state(n) or n in widened
            qdq[n] = self._wide(f"{n}_out", room if is_state(n) else RANGE16_HEADROOM) if wide else qdq[f"{n}_out"]
        qdq.update({n: WIDE for n in widened if n not in qdq and n != TIGHT})
        return qdq


def calibrate(graph, plan, x) -> dict:
    """The QDQ model's quantization from the float step model's ranges on ``x`` (:class:`Calibration`)."""
    return Calibration(graph, plan, x).qdq()


def qdq_sqnr(graph, plan, qdq, x, ref) -> float:
    """SQNR (dB) of the QDQ model ``qdq`` on ``x`` against ``ref``, in ONNX Runtime as one batch (50x faster)."""
    sess, xs = ort_session(build(graph, plan, qdq)[1].SerializeToString()), np.swapaxes(x, 0, 1).astype(np.float32)
    y = np.swapaxes(sess.run(None, {"x_seq": xs})[0], 0, 1)  # ORT's batched kernels may round an element apart
    return sqnr_db(y if graph.output_is_sequence else y[:, -1], ref)


def widen(graph, plan, cal: Calibration, x, target_db: float) -> tuple:
    """Mixed precision: the fewest activations and weight matrices made 16-bit that lift the QDQ
    model's SQNR on ``x`` to ``target_db`` (:func:`lmu_edge.widening.narrow`). Returns ``(widened, sqnr
    of the result, sqnr with none widened)``."""
    ref = reference.simulate(graph, x)
    seen: dict = {}

    def score(wide):
        if wide not in seen:
            seen[wide] = qdq_sqnr(graph, plan, cal.qdq(wide), x, ref)
        return seen[wide]

    # TIGHT narrows ranges where every other candidate widens them: in the set the search starts from (every
    # candidate at once) it can hold that start below the target (issue 52, seed 1060: 26.5 dB on held-out
    # sequences with it, 69.8 without), so it is tried only where the widening alone misses the target
    plain = widening.narrow([c for c in cal.candidates if c != TIGHT], score, target_db)
    if plain[1] >= target_db or TIGHT not in cal.candidates:
        return plain
    return max(plain, widening.narrow(cal.candidates, score, target_db), key=lambda r: r[1])


def held_out(graph, plan, x, options, widened, got, target_db) -> tuple:
    """The widening's choice checked on calibration sequences its ranges did not see
    (:func:`lmu_edge.widening.held_out_rule` decides, as for C): ranges from one half of ``x``, the QDQ model
    scored on the other, the search run again on that split where it falls short. Returns ``(widened, what
    was measured)`` (``{}`` where too few sequences)."""

    def half(fit, out, _mark):
        fit_x = x[fit][: max(1, int(options.get("calibration_steps", 2000)) // x.shape[1])]
        out_x = x[out][: max(1, int(options.get("widen_steps", 20000)) // x.shape[1])]
        cal = Calibration(graph, plan, fit_x, inputs=x[fit])
        y_out = reference.simulate(graph, out_x)

        def search():
            again, got2, _ = widen(graph, plan, cal, out_x, target_db)
            return again, got2

        return [len(fit_x), len(out_x)], lambda: qdq_sqnr(graph, plan, cal.qdq(widened), out_x, y_out), search

    def join(again):  # with what the first search widened: the split's ranges ask for less where its half saw less
        both = frozenset(again) | (frozenset(widened) - {TIGHT} if TIGHT not in again else frozenset(widened))
        return both if both != frozenset(widened) else None

    joined, note = widening.held_out_rule(x.shape[0], got, target_db, half, join)
    return (widened if joined is None else joined), (note or {})
