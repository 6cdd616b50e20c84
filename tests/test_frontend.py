"""The integer log-mel front end: numpy reference vs exact float math, and vs the C (host gcc,
Cortex-M4 and Cortex-M0 under QEMU) bit for bit."""

import shutil

import numpy as np
import pytest

from lmu_edge.audio import frontend
from lmu_edge.audio.frontend import FrontendConfig

ARM = shutil.which("arm-none-eabi-gcc") and shutil.which("qemu-system-arm")
needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed (Debian: gcc)")
needs_arm = pytest.mark.skipif(
    not ARM,
    reason="arm-none-eabi-gcc / qemu-system-arm not installed "
    "(Debian: gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm)",
)
CFG = FrontendConfig()


def _signal(seed=0):
    """Seeded test audio covering the cases that stress the integer path: digital silence, quiet and
    loud noise, a loud chirp, a full-scale square wave (clipping of pre-emphasis), tiny values."""
    rng = np.random.default_rng(seed)
    t = np.arange(12000) / 16000.0
    parts = [
        np.zeros(900),
        rng.normal(0, 3000, 6000),
        rng.normal(0, 3, 3000),
        25000 * np.sin(2 * np.pi * (100 + 3000 * t) * t),
        np.tile([32767, -32768], 1500),
        rng.integers(-2, 3, 2000),
        rng.normal(0, 300, 5003),
    ]
    x = np.concatenate(parts)
    return np.clip(np.round(x), -32768, 32767).astype(np.int16)


def test_frame_count_and_shapes():
    x = _signal()
    q = frontend.features(x, CFG)
    assert q.dtype == np.int8
    assert q.shape == ((len(x) - CFG.frame_len) // CFG.hop + 1, CFG.n_mels)
    assert frontend.features(x[: CFG.frame_len - 1], CFG).shape == (0, CFG.n_mels)
    assert frontend.features(x[: CFG.frame_len], CFG).shape == (1, CFG.n_mels)


def test_digital_silence_is_the_floor():
    assert np.all(frontend.features(np.zeros(4000, np.int16), CFG) == -128)


def test_integer_features_follow_the_documented_scale():
    """Against exact float math (numpy FFT, exact logs) on noise-like audio, the integer features are
    within the int8 rounding plus a small fixed-point error: the documented scale is the real one."""
    rng = np.random.default_rng(3)
    from scipy.signal import lfilter

    x = lfilter([1.0], [1.0, -0.9], rng.normal(0, 1, 40000)) * np.repeat(10 ** rng.uniform(0.5, 3.5, 40), 1000)
    x = np.clip(np.round(x), -32768, 32767).astype(np.int16)
    q = frontend.features(x, CFG).astype(np.float64)
    ref = frontend.float_reference(x, CFG)
    ok = (ref > -127) & (ref < 126)
    err = np.abs(q - ref)[ok]
    assert ok.mean() > 0.9
    assert err.mean() < 0.35, err.mean()  # int8 rounding alone gives 0.25
    assert np.percentile(err, 99) < 1.0
    assert err.max() < 2.5


def test_doubling_the_input_adds_exactly_two_log2_units():
    """Block floating point: 2x gives the same mantissas and exponent + 1, so every feature moves by
    2 log2 units = 8 steps exactly (without pre-emphasis, whose rounding is not scale-invariant)."""
    cfg = FrontendConfig(preemph_q15=0)
    x = np.round(np.random.default_rng(4).normal(0, 2000, 8000)).astype(np.int64)
    q1 = frontend.features(x, cfg).astype(int)
    q2 = frontend.features(2 * x, cfg).astype(int)
    inside = (q1 > -128) & (q1 < 127 - 8)
    assert inside.mean() > 0.9
    np.testing.assert_array_equal((q2 - q1)[inside], 2 * 4)


def test_bitlen_matches_python():
    rng = np.random.default_rng(5)
    v = np.concatenate([[0, 1, 2, 3, 2**31, 2**62, 2**63 - 1], rng.integers(0, 2**62, 200, dtype=np.int64)])
    np.testing.assert_array_equal(frontend.bitlen(v), [int(a).bit_length() for a in v])


def test_fft_stays_in_int16_and_matches_numpy():
    cfg = CFG
    rng = np.random.default_rng(6)
    v = rng.integers(-(2**13), 2**13 + 1, (50, cfg.n_fft))
    v[0] = 2**13  # the worst case: a constant at the bound
    v[1] = np.where(np.arange(cfg.n_fft) % 2, -(2**13), 2**13)
    re = np.zeros_like(v)
    re[:, frontend.tables(cfg)["bitrev"]] = v
    r, i, H = frontend.fft_q15(re, np.zeros_like(re), cfg)
    assert max(np.abs(r).max(), np.abs(i).max()) <= 2**14
    X = np.fft.fft(v, axis=1) / 2.0 ** H[:, None]
    # a few LSB of rounding per stage (9 stages) and the Q15 twiddles: well under 0.1 % of full scale
    assert np.abs((r + 1j * i) - X).max() < 1e-3 * 2**14


@pytest.mark.parametrize(
    "bad", [dict(n_fft=500), dict(frame_len=600), dict(hop=0), dict(preemph_q15=40000), dict(f_max=9000.0)]
)
def test_bad_configs_are_refused(bad):
    with pytest.raises(ValueError):
        FrontendConfig(**bad)


def test_emit_c_writes_prefixed_files(tmp_path):
    paths = frontend.emit_c(tmp_path, CFG, "kws")
    assert [p.name for p in paths] == ["kws_frontend.h", "kws_frontend.c", "lmu_frontend.h"]
    h, c = paths[0].read_text(), paths[1].read_text()
    assert "kws_fe_push" in h and "KWS_FE_N_MELS 32" in h
    import re

    for text in (c, paths[2].read_text()):  # no floating point in the code (comments aside)
        code = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
        assert not re.search(r"\b(float|double)\b", code)
    with pytest.raises(ValueError):
        frontend.c_sources(CFG, "not a prefix")


@needs_gcc
@pytest.mark.parametrize(
    "cfg",
    [
        CFG,
        FrontendConfig(n_mels=40, preemph_q15=0, frame_len=480, hop=128, n_fft=512),
        FrontendConfig(n_fft=256, frame_len=256, hop=100, n_mels=20, f_max=4000.0, log_table_bits=4, out_shift=3),
    ],
    ids=["default", "40mel_nopre", "256fft"],
)
def test_c_is_bit_exact_on_the_host(cfg):
    x = _signal(1)
    y, stats = frontend.run_c(x, cfg, "host")
    np.testing.assert_array_equal(y, frontend.features(x, cfg))
    assert stats["frames"] == len(y) == cfg.n_frames(len(x))


@needs_arm
@pytest.mark.parametrize("cpu", ["cortex-m4", "cortex-m0"])
def test_c_is_bit_exact_on_cortex_m_under_qemu(cpu):
    x = _signal(2)
    y, stats = frontend.run_c(x, CFG, cpu)
    np.testing.assert_array_equal(y, frontend.features(x, CFG))
    # deterministic instruction counts (icount): a 512-point FFT frame costs ~1e5 instructions on M4
    assert 2e4 < stats["instructions_per_frame"] < 1e6
