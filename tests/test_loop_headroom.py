"""A feedback loop's 16-bit values beyond the calibrated range (issue 52, seed 1041; lmu_edge.qlinear.LOOP16_SPAN).

A ReLU SimpleRNN cell whose recurrent matrix has a gain past 1 runs far beyond what the calibration drove it
to, on inputs inside the calibrated range: seed 1041 (recurrent spectral radius 1.048) reached 1.86 on its
64 calibration sequences and 9.85 on 3 of its 32 held-out step sequences, and C int16 gave 4.4 dB. At 16
bits such a loop's h, and what follows it with unbounded activations, is sized to LOOP16_SPAN times its
calibrated range (3 of the 16 bits) instead of RANGE16_HEADROOM's 2x.

The regression graph: the same kind of cell (spectral radius 1.06 along a positive direction), calibrated
on sines and tested on steps of the same amplitude, which drive the loop 4.2x past the calibrated h.
"""

import numpy as np
import pytest

import lmu_edge
from lmu_edge import ir, lti, reference
from lmu_edge.metrics import sqnr_db
from lmu_edge.qlinear import LOOP16_SPAN, RANGE16_HEADROOM

T = 40
_t = np.arange(T)[None, :, None]


def _graph(act="relu", after="linear", hidden="simple_rnn"):
    r = np.random.default_rng(2)
    units, q = 6, 6
    v = np.abs(r.standard_normal(units))
    v /= np.linalg.norm(v)
    U = 0.06 * r.standard_normal((units, units)) + 1.06 * np.outer(v, v)
    W = np.outer(r.standard_normal(q) * 0.3, v) + 0.05 * r.standard_normal((q, units))
    if hidden == "simple_rnn":
        cell = ir.HiddenSimpleRNN(W, U, np.zeros(units), act)
    else:
        cell = ir.HiddenDense(W, np.zeros(units), act)
    lmu = ir.LMU(
        "lmu",
        memory_d=1,
        order=q,
        theta=4.0,
        discretizer="zoh",
        input_encoders=np.array([[1.0], [0.5]]),
        encoder_bias=None,
        hidden=cell,
        memory=ir.DenseSS("zoh", *lti.legendre_discrete(q, 4.0, "zoh")),
    )
    mid = ir.Dense("mid", r.standard_normal((units, 4)) * 0.5, np.zeros(4), after)
    head = ir.Dense("head", r.standard_normal((4, 2)) * 0.5, np.zeros(2), "linear")
    return ir.Graph("loop", input_features=2, seq_len=T, layers=(lmu, mid, head))


def _sines(n, seed):
    r = np.random.default_rng(seed)
    a, f, ph = r.uniform(0.3, 1, (n, 1, 2)), r.uniform(0.05, 0.25, (n, 1, 2)), r.uniform(0, 6.3, (n, 1, 2))
    return a * np.sin(2 * np.pi * f * _t + ph)


def _steps(n, seed):
    r = np.random.default_rng(seed)
    level, cut = r.uniform(-0.95, 0.95, (n, 1, 2)), r.integers(0, T // 2, (n, 1, 1))
    return np.where(_t >= cut, level, 0.0) + 0.02 * r.standard_normal((n, T, 2))


@pytest.mark.parametrize(
    "target,mode,floor", [("c", "int16", 45.0), ("c", "int16x8", 45.0), ("tflite", "int16x8", 35.0)]
)
def test_a_loop_driven_past_its_calibration_meets_the_floor(tmp_path, target, mode, floor):
    # C: 10.5 dB each before (2026-12-07). TFLite int16x8 (seed 1060's class, a SiLU SimpleRNN cell: 17.2 dB
    # held out where C gave 51) kept the loop's state at 2x; now _stepplan.loop_tensors gives it the 8x
    g, x_cal, x_test = _graph(), _sines(64, 1), _steps(32, 2)
    h_cal = reference.record_ranges(g, x_cal)[0]["out"][1]
    h_test = reference.record_ranges(g, x_test)[0]["out"][1]
    assert np.abs(x_test).max() <= np.abs(x_cal).max() and h_test > 4 * h_cal  # the fault: the loop, not the input
    art = lmu_edge.convert(g, target, tmp_path / mode, quantize=mode, calibration=x_cal)
    assert sqnr_db(art.run(x_test), reference.simulate(g, x_test)) >= floor


def test_tflite_int16x8_gives_the_loop_state_the_loop_span_and_int8_s_int16_half_keeps_2x():
    """Spec (``_stepplan.loop_tensors``, ``widen_int16_ranges(loops=...)``): in the int16x8 step model a
    looping LMU's state ``L<i>_h`` spans LOOP16_SPAN times what the plain 2x gives it (its scale 4x), as
    in C; int8's int16 half (``convert_int8_pair``) keeps 2x, where the widening search weighs the bits
    (issue 52, seed 18: 32.6 -> 29.2 dB with the span)."""
    from lmu_edge.targets import _stepplan, _tflite_build

    g = lmu_edge.fold(_graph())
    x_cal = _sines(16, 1)
    plan = _stepplan.StatePlan(g, _stepplan.record(g, x_cal), balance=True)
    rep = {"x": _stepplan.record(g, x_cal)["x"], **plan.model_states(_stepplan.record(g, x_cal))}
    assert _stepplan.loop_tensors(g).search("L0_h") and not _stepplan.loop_tensors(g).search("L0_m")

    def h_scale(model):
        from ai_edge_litert.interpreter import Interpreter

        (t,) = [t for t in Interpreter(model_content=model).get_tensor_details() if t["name"].endswith("_L0_h:0")]
        return t["quantization_parameters"]["scales"][0]

    wide = _tflite_build.convert(g, plan, "split", False, "int16x8", rep)
    plain = _tflite_build.convert(g, plan, "split", False, "int16x8", rep, loops=False)
    assert h_scale(wide) == pytest.approx(h_scale(plain) * LOOP16_SPAN / RANGE16_HEADROOM, rel=1e-5)


def _covered(qg, name, rec_out):
    """How many times the calibrated largest magnitude a 16-bit tensor's type covers."""
    layer = next(la for la in qg.layers if la.name == name)
    return layer.out_scale * 32767 / max(abs(rec_out[0]), abs(rec_out[1]))


@pytest.mark.parametrize(
    "act,hidden,after,spans",
    [
        ("relu", "simple_rnn", "linear", (LOOP16_SPAN, LOOP16_SPAN)),  # the loop and what follows it
        ("relu", "simple_rnn", "tanh", (LOOP16_SPAN, None)),  # a tanh bounds what follows (its fixed type)
        ("relu", "dense", "linear", (RANGE16_HEADROOM, RANGE16_HEADROOM)),  # no feedback: as before
        ("tanh", "simple_rnn", "linear", (None, RANGE16_HEADROOM)),  # a bounded loop: its fixed type
    ],
)
def test_only_an_unbounded_loop_and_what_follows_it_get_the_loop_span(act, hidden, after, spans):
    g = lmu_edge.fold(_graph(act, after, hidden))
    x_cal = _sines(16, 1)
    recs = reference.record_ranges(g, x_cal)
    qg = lmu_edge.quantize(g, x_cal, weight_bits=16, state_bits=32, activation_bits=16)
    for name, rec, span in zip(("lmu", "mid"), recs[:2], spans, strict=True):
        if span is None:
            continue
        assert _covered(qg, name, rec["out"]) == pytest.approx(span, rel=1e-3), name


@pytest.mark.parametrize("mode", ["int16x8", "int16"])
def test_a_loop_inside_its_calibration_takes_the_narrower_span_where_8x_misses(tmp_path, mode):
    """Issue 52's seed 72 (a SiLU SimpleRNN cell with hidden_to_memory after a slow Euler memory; shipped in
    tests/data/gen_models): at LOOP16_SPAN its C int16x8 gave 43.4 dB held out and int16 44.3 (with the
    16-bit state), below the 45 dB floor. Where the 8x span misses the target, the loops at the activations'
    2x headroom are tried (int16: with both state widths) and kept where they gain (``loop_span``), the
    held-out check passing: 48.6 and 51.8 dB held out."""
    import json
    from pathlib import Path

    folder = Path(__file__).resolve().parent / "data" / "gen_models" / "seed72"
    d = np.load(folder / "data.npz")
    art = lmu_edge.convert(
        folder / "model.keras", "c", tmp_path / "a", quantize=mode, calibration=d["x_cal"], measure=False
    )
    q = json.loads((art.path / "report.json").read_text())["quantization"]
    assert q["loop_span"] == 2.0 and q["held_out"]["sqnr_db"] >= 45.0, q.get("held_out")
    y_ref = lmu_edge.simulate(lmu_edge.load(folder / "model.keras"), d["x_test"].astype(np.float64))
    assert sqnr_db(art.run(d["x_test"]), y_ref) >= 45.0


@pytest.mark.parametrize("mode", ["int16x8", "int16"])
def test_loops_that_miss_the_target_at_2x_take_their_calibrated_range(tmp_path, mode):
    """Issue 52's seed 105 (two stacked SimpleRNN loops, ReLU then linear; shipped in tests/data/gen_models):
    with the loops' 16-bit h at the 2x headroom its C int16x8 gave 42.3 dB held out and int16 41.8, under the
    45 dB floor, every weight 16-bit. Where 2x misses the target too, the loops at their calibrated range
    (LOOP16_TIGHT_SPAN) are tried and kept where they gain, the held-out check deciding whether they clip:
    int16x8 47.9 dB held out; int16 45.0, its calibration figure (46.5) still under the 48 dB target."""
    import json
    from pathlib import Path

    from lmu_edge.qlinear import LOOP16_TIGHT_SPAN

    folder = Path(__file__).resolve().parent / "data" / "gen_models" / "seed105"
    d = np.load(folder / "data.npz")
    art = lmu_edge.convert(
        folder / "model.keras", "c", tmp_path / "a", quantize=mode, calibration=d["x_cal"], measure=False
    )
    q = json.loads((art.path / "report.json").read_text())["quantization"]
    assert q["loop_span"] == LOOP16_TIGHT_SPAN and q["held_out"]["sqnr_db"] >= 45.0, q.get("held_out")
    y_ref = lmu_edge.simulate(lmu_edge.load(folder / "model.keras"), d["x_test"].astype(np.float64))
    assert sqnr_db(art.run(d["x_test"]), y_ref) >= (47.5 if mode == "int16x8" else 44.9)


def test_tflite_int16x8_tries_a_loop_at_2x_where_8x_misses(tmp_path):
    """TFLite int16x8 sizes a feedback loop's int16 tensors at LOOP16_SPAN as C does, and where that misses the
    widening target tries them at the activations' 2x first, as C does: seed 105 (two stacked SimpleRNN
    loops) gave 27.9 dB held out at 8x, under the 35 dB floor; 37.6 at 2x (34.9 with the memory path at 1.25x
    too, which is why the loop comes first)."""
    import json
    from pathlib import Path

    folder = Path(__file__).resolve().parent / "data" / "gen_models" / "seed105"
    d = np.load(folder / "data.npz")
    art = lmu_edge.convert(folder / "model.keras", "tflite", tmp_path / "t", quantize="int16x8", calibration=d["x_cal"])
    assert '"loop_span": 2.0' in json.dumps(json.loads((art.path / "report.json").read_text()), sort_keys=True)
    y_ref = lmu_edge.simulate(lmu_edge.load(folder / "model.keras"), d["x_test"].astype(np.float64))
    assert sqnr_db(art.run(d["x_test"]), y_ref) >= 35.0
