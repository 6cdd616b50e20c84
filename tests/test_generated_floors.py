"""Floors the generated-model long run (issue 52) found missed on some targets while others met them.

Each regression is a small hand-built graph that shows the same fault as the generated model it comes
from (named in its test), so that it runs in seconds; the generated model itself is in
``tests/model_gen.py``'s REPRODUCTIONS (``scripts/gen_models.py --repro NAME``).
"""

import json

import numpy as np
import pytest

import lmu_edge
from lmu_edge import ir, lti
from lmu_edge.metrics import sqnr_db

#: docs/matrix.md: held-out SQNR against the float64 reference
FLOORS = {("tflite", "int8"): 30.0, ("tflite", "int16x8"): 35.0, ("onnx", "int8"): 30.0}


def _euler_noise_gain():
    """An euler memory of order 52, theta 296 (spectral radius 1.018, non-normal): a state-rounding error
    grows ~48 dB more than the signal does over 24 steps, read whole by a sigmoid head (seed 22's LMUCell:
    REPRODUCTIONS["euler_noise_gain"]). Smooth inputs: two noisy sines per sequence."""
    rng = np.random.default_rng(5)
    q, theta, d, T = 52, 296.0, 2, 24
    memory = ir.DenseSS("euler", *lti.legendre_discrete(q, theta, "euler"))
    lmu = ir.LMU(
        "lmu",
        memory_d=d,
        order=q,
        theta=theta,
        discretizer="euler",
        input_encoders=rng.standard_normal((2, d)),
        encoder_bias=rng.standard_normal(d) * 0.1,
        input_to_hidden=True,
        memory=memory,
    )
    head = ir.Dense("head", rng.standard_normal((d * q + 2, 2)) * 0.05, np.zeros(2), "sigmoid")
    g = ir.Graph("euler_noise_gain", input_features=2, seq_len=T, layers=(lmu, head))
    t = np.arange(T)[None, :, None]

    def data(n, seed):
        r = np.random.default_rng(seed)
        f, ph = r.uniform(0.02, 0.2, (n, 1, 2)), r.uniform(0.0, 2 * np.pi, (n, 1, 2))
        return (np.sin(2 * np.pi * f * t + ph) + 0.3 * r.standard_normal((n, T, 2))).astype(np.float32)

    return g, data(64, 1), data(32, 2)


@pytest.mark.parametrize("target,mode", sorted(FLOORS))
def test_a_memory_that_amplifies_its_rounding_noise_meets_its_floors(tmp_path, target, mode):
    """Seed 22 of the long run: TFLite int8 29.5, int16x8 29.3 and ONNX int8 28.3 dB where C int8 met
    30. Every activation 16-bit did not help: the memory path's 16-bit ranges carried 2x headroom (and
    TFLite's state its update's range, which this growing memory makes the larger), and each rounding
    at the state's scale came out ~48 dB louder. Where the calibration SQNR misses its goal, the
    widening search now tries the memory path at its calibrated ranges (the bit of headroom back as
    resolution), on every target. Measured on this graph (2026-12-06): 29.6 / 29.1 / 28.1 dB before,
    35.3 / 37.7 / 35.4 after (TFLite int8, int16x8, ONNX int8); on seed 22 itself 34.8 / 36.4 / 35.3."""
    g, x_cal, x_test = _euler_noise_gain()
    art = lmu_edge.convert(g, target, tmp_path / "a", quantize=mode, calibration=x_cal, tolerance=float("inf"))
    got = sqnr_db(art.run(x_test), lmu_edge.simulate(g, x_test.astype(np.float64)))
    q = json.loads((art.path / "report.json").read_text())["quantization"]
    assert got >= FLOORS[target, mode], (got, q)
    # what the search chose, said in the report: 1.25x headroom, or (int16x8's last try) none
    assert q["memory_ranges"] in ("calibrated, 1.25x headroom", "calibrated, 1.0x headroom"), q


@pytest.mark.slow
def test_tflite_int8_state_path_gets_int16x8_weights_where_nearest_ones_miss(tmp_path):
    """Seed 18 of the long run (REPRODUCTIONS["int16_path_weights"], trained as the generator trains it):
    TFLite int8 26.0 dB with every operator the search could widen at 16 bits, where ONNX int8 gave 33.8
    and TFLite int16x8 35.6. The int8 model's int16 state path is the int16x8 conversion's, whose
    weights are per tensor (TFLite Micro's CMSIS-NN kernels), and int8 rounded them to nearest; int16x8
    rounds them by GPTQ and corrects the biases. Where the int8 model misses widen_db after widening,
    it is now built with int16x8's weights too, kept where better on the calibration data: 32.6 dB."""
    import model_gen

    path = model_gen.make(model_gen.REPRODUCTIONS["int16_path_weights"], tmp_path / "model")
    data = np.load(tmp_path / "model" / "data.npz")
    src = lmu_edge.load(path)
    art = lmu_edge.convert(src, "tflite", tmp_path / "a", quantize="int8", calibration=data["x_cal"])
    got = sqnr_db(art.run(data["x_test"]), lmu_edge.simulate(src, data["x_test"].astype(np.float64)))
    q = json.loads((art.path / "report.json").read_text())["quantization"]
    assert got >= FLOORS["tflite", "int8"] and q["weight_rounding"] == "gptq", (got, q)


def test_tflite_int16x8_converts_an_order_1_memory_of_one_channel(tmp_path):
    """Seeds 107 and 155 of the long run: TFLite int16x8 refused by the TF converter ("Expected bias tensor
    to be a vector"). An order-1 memory of one channel multiplied its (1, 1) encoder output by Bbar as a
    (1, q) row; the converter folded that product into the encoder's FULLY_CONNECTED, whose bias became the
    (1, 1) matrix the int16x8 quantizer refuses. Bbar is now a (q,) vector (the same broadcast): the fold
    keeps a vector bias. Floors as docs/matrix.md."""
    import graphs

    rng = np.random.default_rng(107)
    g = ir.Graph(
        "order1",
        input_features=8,
        seq_len=None,
        layers=(
            graphs.lmu(rng, n_in=8, q=1, theta=43.1, units=1, input_to_hidden=True, return_sequences=False),
            ir.Dense("head", rng.standard_normal((1, 4)), rng.standard_normal(4) * 0.1, "softmax"),
        ),
    )
    x = rng.standard_normal((96, 39, 8))
    art = lmu_edge.convert(g, "tflite", tmp_path / "a", quantize="int16x8", calibration=x[:64])
    got = sqnr_db(art.run(x[64:]), lmu_edge.simulate(g, x[64:]))
    assert got >= FLOORS["tflite", "int16x8"], got
