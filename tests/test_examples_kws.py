"""The keyword-spotting example end to end (examples/kws): the committed keras-lmu model as int8 C,
fed by the integer front end, detects flite keywords in a held-out synthetic stream, and the host
and Cortex-M builds print the same detections as the Python integer pipeline.

No TensorFlow: the committed .keras model is read by lmu-edge. The held-out audio is regenerated
with flite (deterministic), so those tests need it installed."""

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

KWS_DIR = Path(__file__).resolve().parents[1] / "examples" / "kws"
sys.path.insert(0, str(KWS_DIR))
import kws  # noqa: E402  (examples/kws: importable after the sys.path line)

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed (Debian: gcc)")
needs_flite = pytest.mark.skipif(shutil.which("flite") is None, reason="flite not installed (Debian: flite)")
needs_arm = pytest.mark.skipif(
    not (shutil.which("arm-none-eabi-gcc") and shutil.which("qemu-system-arm")),
    reason="arm-none-eabi-gcc / qemu-system-arm not installed "
    "(Debian: gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm)",
)

STREAM_SECONDS, STREAM_SEED = 40.0, 11


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    d = tmp_path_factory.mktemp("kws")
    art, qg = kws.convert(d / "c")  # also asserts: model int8 input == front end int8 output
    return d, art, qg


@pytest.fixture(scope="module")
def stream():
    if shutil.which("flite") is None:
        pytest.skip("flite not installed (Debian: flite)")
    return kws.make_stream(STREAM_SECONDS, STREAM_SEED)


@pytest.fixture(scope="module")
def python_run(converted, stream):
    _, _, qg = converted
    det = kws.Detector()
    lines, y, dets = kws.python_stream(qg, stream[0], det)
    return det, lines, y, dets


@pytest.fixture(scope="module")
def builds(converted, python_run):
    d, _, _ = converted
    rts = ["host"] + (["cortex-m4", "cortex-m0"] if shutil.which("arm-none-eabi-gcc") else [])
    return kws.build_stream(d / "c", d / "build", python_run[0], rts)


def test_detection_rule_on_a_made_up_posterior():
    det = kws.Detector(window=4, threshold=4 * 200, refractory=10)
    y = np.full((40, 12), -128)
    y[5:12, 4] = 100  # class 4 ("up") high for 7 frames: fires once, at the 4th frame
    y[12:18, 7] = 127  # class 7 within the refractory period (frames 15..17): suppressed
    y[30:36, 9] = 127  # later: fires
    dets = det.run(y)
    assert [(f, c) for f, c, _ in dets] == [(8, 4), (33, 9)]
    assert kws.format_detection(8, 4, 912, 4) == "0.10 s: up (0.89)"


@needs_flite
@pytest.mark.slow
def test_int8_pipeline_detects_held_out_keywords(stream, python_run):
    audio, events = stream
    _, lines, _, dets = python_run
    precision, recall, correct, n_det, n_kw = kws.score(dets, events)
    # README and docs/kws.md: precision 0.82 and recall 0.53 on this stream (9 of 11 detections right, 17
    # keywords); the stream and the integer pipeline are deterministic, so the counts are exact
    assert (correct, n_det, n_kw) == (9, 11, 17), (precision, recall, lines)


@needs_gcc
@needs_flite
@pytest.mark.slow
def test_host_c_prints_what_the_python_integer_pipeline_computes(stream, python_run, builds):
    _, lines_py, y_py, _ = python_run
    lines, y, stats = kws.run_stream(builds["host"], "host", stream[0])
    assert lines and lines == lines_py
    np.testing.assert_array_equal(y.astype(np.int64), y_py)
    assert stats["frames"] == kws.CFG.n_frames(len(stream[0]))


@needs_arm
@needs_flite
@pytest.mark.slow
@pytest.mark.parametrize("cpu", ["cortex-m4", "cortex-m0"])
def test_cortex_m_detections_equal_the_host(stream, python_run, builds, cpu):
    _, lines_py, y_py, _ = python_run
    lines, y, stats = kws.run_stream(builds[cpu], cpu, stream[0])
    assert lines == lines_py
    np.testing.assert_array_equal(y.astype(np.int64), y_py)
    # README and docs/kws.md: 3,992 B of RAM (front end 2,864, model 976, detector 152); instructions per frame
    # as measured on the demo's stream (2026-11-29). This stream is other audio, and the per-frame counts depend
    # a little on the audio: here M4 141,592 + 21,048, M0 254,361 + 63,867
    assert (stats["fe_bytes"], stats["net_bytes"], stats["det_bytes"]) == (2864, 976, 152), stats
    fe, net = {"cortex-m4": (141589, 21048), "cortex-m0": (254364, 63951)}[cpu]
    assert stats["fe_insn"] == pytest.approx(fe, rel=2e-3) and stats["net_insn"] == pytest.approx(net, rel=2e-3), stats


@needs_flite
@pytest.mark.slow
def test_int8_utterance_accuracy_on_held_out_flite_words(converted):
    import lmu_edge
    from lmu_edge import intsim

    _, _, qg = converted
    words, labels = kws.test_words()
    x, _, _, _ = kws.sequences(words, labels, 150, np.random.default_rng(1))
    post = intsim.dequantize_output(qg, intsim.run_int(qg, x.astype(np.int64)))
    acc = float(np.mean(kws.utterance_predictions(post) == labels))
    post_f = lmu_edge.simulate(lmu_edge.load(kws.HERE / "kws_lmu.keras"), x * kws.FEATURE_SCALE)
    acc_f = float(np.mean(kws.utterance_predictions(post_f) == labels))
    # README and docs/kws.md: float 0.564 and int8 0.569 on the 360 held-out words (12 classes, chance
    # ~0.08); flite and the seeded sequences are deterministic, so the counts are exact
    assert len(labels) == 360 and (round(acc_f * 360), round(acc * 360)) == (203, 205), (acc_f, acc)


@needs_arm
@needs_flite
@pytest.mark.slow
def test_cortex_m4_timestamps_stay_right_past_four_and_a_half_minutes(converted, stream, builds):
    """stream.c formed samples * 1000 in a 32-bit unsigned long (64 bits on the host, 32 on Cortex-M),
    which wrapped after about 268 s of 16 kHz audio: the test's stream placed after 280 s of digital
    silence must print, on Cortex-M4, the Python pipeline's lines."""
    _, _, qg = converted
    audio = np.concatenate([np.zeros(280 * kws.SR, np.int16), stream[0]])
    lines_py, _, _ = kws.python_stream(qg, audio, kws.Detector())
    lines, _, _ = kws.run_stream(builds["cortex-m4"], "cortex-m4", audio)
    assert lines_py and min(kws.parse_line(line)[0] for line in lines_py) > 280.0
    assert lines == lines_py
