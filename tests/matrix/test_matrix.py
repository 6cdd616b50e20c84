"""The layer-option matrix (examples/matrix): trained keras-lmu models through every target and mode.

CI runs the all-pairs subset (every option value meets every (target, mode)
cell at least once: 61 conversions, about a minute on one core);
``python examples/matrix/matrix.py --full`` runs the full product and writes
docs/matrix.md. A cell passes when it converts and meets its SQNR floor on
test inputs drawn apart from the calibration inputs, or when the target
refuses it up front with a one-line LmuEdgeError.
"""

import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "matrix"))

import matrix  # noqa: E402  (examples/matrix joins sys.path first)

#: cells that convert but miss their floor today, with the SQNR measured when this list was written;
#: strict xfail: the test fails (and this entry must go) the day a cell reaches its floor
BELOW_FLOOR: dict = {}  # every quantized cell meets its floor (2026-11-27; five were listed before)
#: what these tests convert without, as they read none of it: the accuracy report (report.html and its
#: analysis) and, for C, the QEMU instruction counts and the Cortex-M objects compiled for the flash figures
UNREAD = {"accuracy_report": False}
C_UNMEASURED = {**UNREAD, "measure": False, "flash": False}


def test_the_docs_table_lists_exactly_the_expected_failures():
    # docs/matrix.md's table (written by matrix.py --full --docs) and BELOW_FLOOR must agree: a bold cell
    # is a cell below its floor, with the SQNR recorded here; a stale table or list fails
    text = (ROOT / "docs" / "matrix.md").read_text()
    body = text[text.index("<!-- matrix:begin -->") : text.index("<!-- matrix:end -->")]
    rows = [line for line in body.splitlines() if line.startswith("| `")]
    assert [r.split("|")[1].strip().strip("`") for r in rows] == list(matrix.OPTIONS)
    bold = {}
    for r in rows:
        cols = [c.strip() for c in r.split("|")[1:-1]]
        for cell, v in zip(matrix.CELLS, cols[1:], strict=True):
            if v.startswith("**"):
                bold[(cols[0].strip("`"),) + cell] = v.strip("*").split(" <")[0] + " dB"
    assert bold == BELOW_FLOOR


def test_pairwise_covers_every_option_value_with_every_cell():
    chosen = matrix.pairwise()
    assert {c for _, c in chosen} == set(matrix.CELLS)
    targets = {t for t, _ in matrix.CELLS}
    modes = {m for _, m in matrix.CELLS}
    for m in matrix.OPTIONS:
        for k, v in matrix.OPTIONS[m].items():
            with_value = [c for n, c in chosen if matrix.OPTIONS[n].get(k) == v]
            assert {t for t, _ in with_value} == targets, (k, v)
            assert {q for _, q in with_value} == modes, (k, v)
    assert len(chosen) < len(matrix.full())


@pytest.mark.slow
@pytest.mark.parametrize("model,cell", matrix.pairwise(), ids=lambda v: v if isinstance(v, str) else "-".join(v))
def test_cell_converts_and_meets_its_floor_or_is_refused(model, cell, tmp_path, request):
    if (model,) + cell in BELOW_FLOOR:
        request.applymarker(pytest.mark.xfail(strict=True, reason=f"below floor: {BELOW_FLOOR[(model,) + cell]}"))
    r = matrix.run_cell(model, *cell, tmp_path, **(C_UNMEASURED if cell[0] == "c" else UNREAD))
    if r["status"] == "missing":
        if os.environ.get("CI") == "true":
            pytest.fail(r["reason"])
        pytest.skip(r["reason"])
    assert r["status"] in ("ok", "refused"), json.dumps(r)


def test_float32_is_another_name_for_float(tmp_path):
    import lmu_edge

    model = ROOT / "examples" / "matrix" / "ff_fft_zoh_tanh_before_dense.keras"
    art = lmu_edge.convert(model, "ir", tmp_path / "o", quantize="float32")
    assert art.manifest["quantize"] == "float"
    with pytest.raises(lmu_edge.errors.QuantizationError, match="does not support quantize='float64'"):
        lmu_edge.convert(model, "ir", tmp_path / "p", quantize="float64")


def test_tflite_refuses_in_one_line_naming_the_op(tmp_path):
    # TFLite has no 16x8 CUMSUM (the structured Runge-Kutta step): asked for explicitly, a refusal naming the op,
    # not a raw converter error, and nothing written
    import lmu_edge

    name = "ff_relu_i2h_bias_pool_softmax"
    cal = matrix.np.load(ROOT / "examples" / "matrix" / f"{name}.npz")["x_cal"]
    with pytest.raises(lmu_edge.errors.QuantizationError) as e:
        lmu_edge.convert(
            ROOT / "examples" / "matrix" / f"{name}.keras",
            "tflite",
            tmp_path / "o",
            quantize="int16x8",
            calibration=cal,
            realization="rk4",
        )
    assert "op CUMSUM" in str(e.value) and "\n" not in str(e.value) and "--quantize float," in str(e.value)
    assert not (tmp_path / "o").exists() and list(tmp_path.iterdir()) == []


def test_tflite_running_mean_converts_to_int16x8_and_keeps_the_int16_state_path_in_int8(tmp_path):
    # GlobalAveragePooling1D's running mean divides by the step count; TFLite has no 16x8 DIV, so the step
    # writes it as x * rsqrt(n)^2. Before: int16x8 refused (op DIV) and int8 fell back to an 8-bit LMU state
    # (11.9 dB); measured 68.2 and 48.4 dB. Both run the same in TFLite Micro as in LiteRT.
    name = "ff_relu_i2h_bias_pool_softmax"
    for mode, floor in (("int16x8", 35.0), ("int8", 30.0)):
        r = matrix.run_cell(name, "tflite", mode, tmp_path)
        assert r["status"] == "ok" and r["sqnr"] >= floor + 10, r


def test_interpreter_errors_are_cut_to_the_line_naming_the_op():
    from lmu_edge.targets.tflite import _one_line

    dump = (
        "tensorflow/lite/kernels/concatenation.cc:158 input->params.scale != output_tensor->params.scale\n"
        "Node number 12 (CONCATENATION) failed to prepare.\n"
    )
    assert _one_line(RuntimeError(dump)) == "op CONCATENATION: Node number 12 (CONCATENATION) failed to prepare"
    assert _one_line(RuntimeError("")) == "RuntimeError"


@pytest.mark.parametrize("model", ["ff_fft_zoh_tanh_before_dense", "rnn_h2m_m2m_simplernn"])
def test_c_int16x8_reaches_the_int8_weight_ceiling(model, tmp_path):
    # the diagnosis of the C int16x8 column (docs/matrix.md): with 16-bit activations the int8 weights are
    # what is left, so with int8 weights throughout (--weight-bits 8) the cell is within 1 dB of the
    # float64 model with int8 weights alone, and far above C int8; the default widens past it
    ceiling = matrix.weight_ceiling(model)
    r16 = matrix.run_cell(model, "c", "int16x8", tmp_path, weight_bits=8, **C_UNMEASURED)
    r8 = matrix.run_cell(model, "c", "int8", tmp_path, widen_db=None, **C_UNMEASURED)  # all 8-bit (default widens)
    assert abs(r16["sqnr"] - ceiling) <= 1.0, (r16["sqnr"], ceiling)
    assert r16["sqnr"] >= r8["sqnr"] + 8, (r8["sqnr"], r16["sqnr"])  # measured 24.8 -> 41.6, 18.7 -> 28.5 dB (GPTQ)
    wide = matrix.run_cell(model, "c", "int16x8", tmp_path, **C_UNMEASURED)
    assert wide["sqnr"] >= max(45.0, ceiling + 5.0), (wide["sqnr"], ceiling)  # measured 51.7, 48.7 dB


def test_c_int16_clears_the_floor_on_the_rnn_path_model_with_its_32_bit_state(tmp_path):
    # docs/matrix.md, C int16: on the RNN-path model (the feedback loop carries the state's rounding) int16
    # weights with a 16-bit state reach 48.7 dB; the mode's default 32-bit state 50.6 dB
    import lmu_edge
    from lmu_edge.metrics import sqnr_db

    name = "rnn_h2m_m2m_simplernn"
    data = matrix.np.load(ROOT / "examples" / "matrix" / f"{name}.npz")
    path = ROOT / "examples" / "matrix" / f"{name}.keras"
    y = lmu_edge.simulate(lmu_edge.load(path), data["x_test"].astype(matrix.np.float64))
    got = {}
    for sb in (16, None):
        art = lmu_edge.convert(
            path, "c", tmp_path / str(sb), quantize="int16", calibration=data["x_cal"], state_bits=sb, **C_UNMEASURED
        )
        got[sb] = sqnr_db(art.run(data["x_test"]), y)
    assert 45.0 <= got[None] and got[None] >= got[16] + 1.0, got  # the default is the 32-bit state
    # the integer reference behind --int16-states gives the C artifacts' numbers (docs/matrix.md's table)
    assert matrix.int16_state_sqnr(name, 16) == pytest.approx(got[16], abs=0.05)
    assert matrix.int16_state_sqnr(name, 32) == pytest.approx(got[None], abs=0.05)
    ceiling = matrix.weight_ceiling(name)  # and int16 is far above what int8 weights allow
    assert got[None] >= ceiling + 20, (ceiling, got)
