"""A log-mel front end in integer arithmetic: int16 audio in, int8 features per frame out.

The same computation exists twice, defined here (numpy, vectorised over frames) and mirrored
operation for operation in ``firmware_templates/lmu_frontend.h`` (C99, static inline, no floating
point, no malloc, no globals); :func:`emit_c` writes the constant tables next to a model and
:func:`run_c` runs the C on the host or on Cortex-M4 / M0 under QEMU so the two can be compared bit
for bit. One frame (``frame_len`` samples every ``hop``; defaults 25 ms / 10 ms at 16 kHz)::

    pe[n]  = sat16(x[n] - ((alpha * x[n-1] + 2^14) >> 15))          pre-emphasis, alpha in Q15 (0: off)
    xw[n]  = pe[n] * win[n]                                          Hann window in Q15, int32
    e      = bitlen(max |xw|) - 13                                   block exponent of the frame
    v[n]   = e > 0 ? (xw[n] + 2^(e-1)) >> e : xw[n] << -e            |v| <= 2^13, zero-padded to n_fft
    V      = FFT(v) / 2^H                                            radix-2, Q15 twiddles; a stage halves
                                                                     (h = 1) when its input has a component
                                                                     >= 2^12, else h = 0 (block floating point):
                                                                     t = (b w + 2^14) >> 15, (a +- t + h) >> h
    P[k]   = Re V[k]^2 + Im V[k]^2                                   k = 0 .. n_fft/2, uint32 (< 2^28)
    E[m]   = sum_k P[k] * W[m, k]                                    triangular mel weights in Q12, uint64
    L[m]   = (bitlen(E) - 1 + 2 (e + H) + log_bias) * 2^F + T[next T_BITS bits of E]
                                                                     log2 in Q(F) by leading-zero count + table
    q[m]   = clamp((L[m] - offset + 2^(s-1)) >> s, -128, 127)        int8 feature (E == 0: -128)

so that ``log2(E_true) = (offset + q * 2^s) / 2^F`` where ``E_true[m] = sum_k W_real[m, k] |X[k]|^2``
and ``X`` is the DFT of the pre-emphasised int16 samples times the (real, [0, 1]) Hann window:
with the defaults (F = 6, s = 4) one feature step is 1/4 of a log2 of power, 0.753 dB, and
``q = 0`` is ``log2 E_true = offset / 64``. ``log_bias = -30 - mel_bits`` undoes the window's and
weights' Q15 / Q12 scales; ``e + H`` undoes the frame's normalisation and the FFT's halvings. The
exponents keep the FFT at full precision for quiet and loud frames alike, with int16 buffers.

The bound on the FFT values: a butterfly at most doubles the largest magnitude. A stage that does
not halve has components < 2^12 in (magnitudes < 2^12.5), so < 2^13.5 out; a stage that halves has
components < 2^13.5 in (magnitudes < 2^14) and magnitudes <= 2^14 out. Starting from ``|v| <= 2^13``
every component stays <= 2^14, the products ``b * w`` below 2^29 and their sums below 2^30: int32
without overflow, int16 storage.
"""

from __future__ import annotations

import math
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from .. import toolchain
from ..fixedpoint import shift_round
from ..resources import templates_dir

TEMPLATES = templates_dir()  # the packaged firmware_templates, in a checkout or an install
NORM_BITS = 13  # the frame is scaled so that max |v| <= 2^13
MEL_BITS = 12  # mel weights in Q12
TWIDDLE_ONE = 32767  # Q15 "one" (cos 0), so every table entry fits int16
HALVE_AT = 1 << 12  # an FFT stage halves when a component of its input reaches this


@dataclass(frozen=True)
class FrontendConfig:
    """Parameters of the integer log-mel front end (all sizes in samples)."""

    sample_rate: int = 16000
    frame_len: int = 400  # 25 ms
    hop: int = 160  # 10 ms
    n_fft: int = 512
    n_mels: int = 32
    f_min: float = 60.0
    f_max: float = 7600.0
    preemph_q15: int = 31785  # round(0.97 * 2^15); 0 turns pre-emphasis off
    log_table_bits: int = 6  # 64-entry table of log2(1 + (i + 1/2) / 64)
    log_frac_bits: int = 6  # L in Q6
    out_shift: int = 4  # one feature step = 2^4 / 2^6 = 1/4 log2 of power (0.753 dB)
    offset_q: int = 22 * 64  # q = 0 at log2 E_true = 22 (speech in noise lands around -80..+60)

    def __post_init__(self):
        if self.n_fft & (self.n_fft - 1) or not 16 <= self.n_fft <= 4096:
            raise ValueError(f"n_fft must be a power of two in 16..4096, got {self.n_fft}")
        if not 1 <= self.frame_len <= self.n_fft:
            raise ValueError(f"frame_len must be in 1..n_fft ({self.n_fft}), got {self.frame_len}")
        if not 1 <= self.hop <= self.frame_len:
            raise ValueError(f"hop must be in 1..frame_len ({self.frame_len}), got {self.hop}")
        if not 0 <= self.preemph_q15 < 32768:
            raise ValueError(f"preemph_q15 must be in 0..32767, got {self.preemph_q15}")
        if not 0 < self.f_min < self.f_max <= self.sample_rate / 2:
            raise ValueError(f"need 0 < f_min < f_max <= sample_rate / 2, got {self.f_min}, {self.f_max}")

    @property
    def log2_n_fft(self) -> int:
        """log2 of the FFT length."""
        return self.n_fft.bit_length() - 1

    @property
    def n_bins(self) -> int:
        """Frequency bins of the real FFT (``n_fft / 2 + 1``)."""
        return self.n_fft // 2 + 1

    @property
    def log_bias(self) -> int:
        """Added to the integer log2 of a mel energy: undoes the window's and mel weights' Q15 / Q12 scales."""
        return -30 - MEL_BITS

    @property
    def feature_step_log2(self) -> float:
        """log2 of power per feature step."""
        return 2.0 ** (self.out_shift - self.log_frac_bits)

    @property
    def feature_step_db(self) -> float:
        """One feature step in decibels of power."""
        return 10 * math.log10(2.0) * self.feature_step_log2

    def log2_energy(self, q) -> np.ndarray:
        """The log2 mel energy (of the int16-scaled signal) an int8 feature stands for."""
        return (self.offset_q + np.asarray(q, np.float64) * 2**self.out_shift) / 2**self.log_frac_bits

    def n_frames(self, n_samples: int) -> int:
        """Frames produced from ``n_samples`` samples (full windows only)."""
        return 0 if n_samples < self.frame_len else (n_samples - self.frame_len) // self.hop + 1

    def to_dict(self) -> dict:
        """The fields as a JSON-ready dict."""
        return asdict(self)


# --- constant tables ----------------------------------------------------------------------------


def tables(cfg: FrontendConfig) -> dict:
    """Every constant table of the front end, as the integer arrays the C code stores."""
    n, N = np.arange(cfg.frame_len), cfg.n_fft
    window = np.round(TWIDDLE_ONE * (0.5 - 0.5 * np.cos(2 * np.pi * n / cfg.frame_len))).astype(np.int64)
    k = np.arange(N // 2)
    cos = np.round(TWIDDLE_ONE * np.cos(2 * np.pi * k / N)).astype(np.int64)
    sin = np.round(TWIDDLE_ONE * np.sin(2 * np.pi * k / N)).astype(np.int64)
    bits = cfg.log2_n_fft
    bitrev = np.array([int(format(i, f"0{bits}b")[::-1], 2) for i in range(N)], np.int64)

    # HTK mel scale, triangles between n_mels + 2 equally spaced mel points
    def mel(f):
        return 2595.0 * np.log10(1.0 + np.asarray(f) / 700.0)

    def imel(m):
        return 700.0 * (10 ** (np.asarray(m) / 2595.0) - 1.0)

    edges = imel(np.linspace(mel(cfg.f_min), mel(cfg.f_max), cfg.n_mels + 2))
    freqs = np.arange(cfg.n_bins) * cfg.sample_rate / N
    starts: list[int] = []
    lens: list[int] = []
    offsets: list[int] = []
    weights: list = []
    for m in range(cfg.n_mels):
        lo, c, hi = edges[m], edges[m + 1], edges[m + 2]
        w = np.maximum(0.0, np.minimum((freqs - lo) / (c - lo), (hi - freqs) / (hi - c)))
        wq = np.round(w * (1 << MEL_BITS)).astype(np.int64)
        nz = np.nonzero(wq)[0]
        if nz.size == 0:  # a band narrower than a bin: take the nearest bin
            nz = np.array([int(np.argmin(np.abs(freqs - c)))])
            wq[nz] = 1 << MEL_BITS
        s, e = int(nz[0]), int(nz[-1]) + 1
        starts.append(s)
        lens.append(e - s)
        offsets.append(len(weights))
        weights.extend(int(v) for v in wq[s:e])
    T = 1 << cfg.log_table_bits
    log_table = np.round((1 << cfg.log_frac_bits) * np.log2(1.0 + (np.arange(T) + 0.5) / T)).astype(np.int64)
    return {
        "window": window,
        "cos": cos,
        "sin": sin,
        "bitrev": bitrev,
        "mel_start": np.array(starts, np.int64),
        "mel_len": np.array(lens, np.int64),
        "mel_offset": np.array(offsets, np.int64),
        "mel_weights": np.array(weights, np.int64),
        "log_table": log_table,
    }


_TABLE_CACHE: dict = {}


def _tables(cfg):
    if cfg not in _TABLE_CACHE:
        _TABLE_CACHE[cfg] = tables(cfg)
    return _TABLE_CACHE[cfg]


# --- the numpy reference ------------------------------------------------------------------------


def preemphasis(x, cfg: FrontendConfig) -> np.ndarray:
    """``sat16(x[n] - ((alpha x[n-1] + 2^14) >> 15))`` with ``x[-1] = 0`` (int64 array)."""
    x = np.asarray(x, np.int64)
    if cfg.preemph_q15 == 0:
        return x.copy()
    prev = np.concatenate([[0], x[:-1]])
    return np.clip(x - shift_round(prev * cfg.preemph_q15, 15), -32768, 32767)


def bitlen(v) -> np.ndarray:
    """Number of significant bits of non-negative integers (0 for 0), as the C leading-zero count."""
    v = np.asarray(v, np.uint64)
    out = np.zeros(v.shape, np.int64)
    for b in (32, 16, 8, 4, 2, 1):
        big = (v >> np.uint64(b)) != 0
        out += np.where(big, b, 0)
        v = np.where(big, v >> np.uint64(b), v)
    return out + (v != 0)


def fft_q15(re, im, cfg: FrontendConfig):
    """The fixed-point radix-2 FFT of the C code on rows of int64 arrays (already in bit-reversed
    order). A stage halves a row when that row has a component >= 2^12 (``HALVE_AT``); returns
    ``(re, im, H)``: the result is ``DFT / 2^H`` per row, rounded as the C rounds it."""
    t = _tables(cfg)
    re, im = np.array(re, np.int64), np.array(im, np.int64)
    F, N = re.shape
    H = np.zeros(F, np.int64)
    half = 1
    while half < N:
        h = (np.maximum(np.abs(re).max(axis=1), np.abs(im).max(axis=1)) >= HALVE_AT).astype(np.int64)
        H += h
        h4 = h[:, None, None]
        step = N // (2 * half)
        c = t["cos"][np.arange(half) * step]
        s = t["sin"][np.arange(half) * step]
        r4, i4 = re.reshape(F, N // (2 * half), 2, half), im.reshape(F, N // (2 * half), 2, half)
        ar, ai, br, bi = r4[:, :, 0], i4[:, :, 0], r4[:, :, 1], i4[:, :, 1]
        tr = shift_round(br * c + bi * s, 15)
        ti = shift_round(bi * c - br * s, 15)
        r4 = np.stack([np.right_shift(ar + tr + h4, h4), np.right_shift(ar - tr + h4, h4)], axis=2)
        i4 = np.stack([np.right_shift(ai + ti + h4, h4), np.right_shift(ai - ti + h4, h4)], axis=2)
        re, im = r4.reshape(F, N), i4.reshape(F, N)
        half *= 2
    return re, im, H


def frames_from_preemphasized(pe, cfg: FrontendConfig) -> np.ndarray:
    """int8 features ``(n_frames, n_mels)`` (int64 array) of already pre-emphasised samples."""
    t = _tables(cfg)
    pe = np.asarray(pe, np.int64)
    nf = cfg.n_frames(len(pe))
    if nf == 0:
        return np.zeros((0, cfg.n_mels), np.int64)
    idx = np.arange(nf)[:, None] * cfg.hop + np.arange(cfg.frame_len)[None, :]
    xw = pe[idx] * t["window"][None, :]
    m = np.abs(xw).max(axis=1)
    e = bitlen(m) - NORM_BITS  # (F,)
    half = np.where(e > 0, np.left_shift(np.int64(1), np.maximum(e - 1, 0)), 0)
    v = np.where(
        e[:, None] > 0,
        np.right_shift(xw + half[:, None], np.maximum(e, 0)[:, None]),
        np.left_shift(xw, np.maximum(-e, 0)[:, None]),
    )
    buf = np.zeros((nf, cfg.n_fft), np.int64)
    buf[:, : cfg.frame_len] = v
    re = np.zeros_like(buf)
    re[:, t["bitrev"]] = buf  # re[bitrev[n]] = v[n]
    re, im, H = fft_q15(re, np.zeros_like(re), cfg)
    P = re[:, : cfg.n_bins] ** 2 + im[:, : cfg.n_bins] ** 2
    E = np.zeros((nf, cfg.n_mels), np.int64)
    for b in range(cfg.n_mels):
        s, n, o = t["mel_start"][b], t["mel_len"][b], t["mel_offset"][b]
        E[:, b] = P[:, s : s + n] @ t["mel_weights"][o : o + n]  # < 2^28 * 2^12 * n_bins: int64 is enough
    return log_features(E, e + H, cfg, zero=(m == 0))


def log_features(E, e, cfg: FrontendConfig, zero=None) -> np.ndarray:
    """Mel energies ``E`` (F, n_mels) with frame exponents ``e`` (F,) (normalisation + FFT halvings)
    -> int8 features."""
    t = _tables(cfg)
    E = np.asarray(E, np.int64)
    b = bitlen(E) - 1
    T = cfg.log_table_bits
    mant = np.where(b >= T, np.right_shift(E, np.maximum(b - T, 0)), np.left_shift(E, np.maximum(T - b, 0)))
    frac = np.bitwise_and(mant, (1 << T) - 1)
    L = (b + 2 * np.asarray(e, np.int64)[:, None] + cfg.log_bias) * (1 << cfg.log_frac_bits) + t["log_table"][frac]
    q = np.clip(shift_round(L - cfg.offset_q, cfg.out_shift), -128, 127)
    q = np.where(E == 0, -128, q)
    if zero is not None:
        q = np.where(np.asarray(zero)[:, None], -128, q)
    return q


def features(x, cfg: FrontendConfig = FrontendConfig()) -> np.ndarray:
    """int16 samples (1-D) -> int8 features ``(n_frames, n_mels)`` (as an int8 array).

    Frame ``i`` covers samples ``[i hop, i hop + frame_len)``; it is what the C streaming front end
    returns after its ``(i hop + frame_len)``-th sample."""
    x = np.asarray(x)
    if x.ndim != 1:
        raise ValueError(f"features() takes one 1-D signal, got shape {x.shape}")
    if x.size and (x.min() < -32768 or x.max() > 32767):
        raise ValueError("samples must be int16 values")
    return frames_from_preemphasized(preemphasis(x, cfg), cfg).astype(np.int8)


def float_reference(x, cfg: FrontendConfig = FrontendConfig()) -> np.ndarray:
    """The same features in float64 (numpy FFT, exact logs) before the int8 rounding: what the
    integer front end approximates, to measure its error (in feature steps)."""
    t = _tables(cfg)
    pe = preemphasis(x, cfg).astype(np.float64)
    nf = cfg.n_frames(len(pe))
    idx = np.arange(nf)[:, None] * cfg.hop + np.arange(cfg.frame_len)[None, :]
    win = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(cfg.frame_len) / cfg.frame_len)
    X = np.fft.rfft(pe[idx] * win, n=cfg.n_fft, axis=1)
    P = np.abs(X) ** 2
    W = np.zeros((cfg.n_mels, cfg.n_bins))
    for b in range(cfg.n_mels):
        s, n, o = t["mel_start"][b], t["mel_len"][b], t["mel_offset"][b]
        W[b, s : s + n] = t["mel_weights"][o : o + n] / (1 << MEL_BITS)
    E = P @ W.T
    with np.errstate(divide="ignore"):
        return (np.log2(E) * (1 << cfg.log_frac_bits) - cfg.offset_q) / (1 << cfg.out_shift)


# --- C ------------------------------------------------------------------------------------------


def _c_array(ctype: str, name: str, values, per_line: int = 16) -> str:
    vals = [str(int(v)) for v in values]
    lines = [", ".join(vals[i : i + per_line]) for i in range(0, len(vals), per_line)]
    return f"static const {ctype} {name}[{len(vals)}] = {{\n    " + ",\n    ".join(lines) + "\n};\n"


def c_sources(cfg: FrontendConfig, prefix: str = "model") -> tuple:
    """``(header, source)`` text of ``<prefix>_frontend.h`` / ``.c``."""
    import re as _re

    if not _re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,30}", prefix):
        raise ValueError(f"prefix {prefix!r} is not a C identifier")
    t = tables(cfg)
    P, p = prefix.upper(), prefix
    step_db = f"{cfg.feature_step_db:.4f}"
    header = f"""/* {p}_frontend.h: integer log-mel front end generated by lmu_edge.audio.frontend.emit_c. Do not edit.
 * int16 samples at {cfg.sample_rate} Hz in, one frame of {cfg.n_mels} int8 features every {cfg.hop} samples
 * (window {cfg.frame_len}, FFT {cfg.n_fft}). Feature q stands for
 * log2(mel energy) = ({cfg.offset_q} + q * {1 << cfg.out_shift}) / {1 << cfg.log_frac_bits}
 * (one step = {step_db} dB). Bit-exact with lmu_edge.audio.frontend.features(). No floating point, no malloc.
 * Usage:  {p}_fe_state_t fe;  {p}_fe_reset(&fe);  for every sample: if ({p}_fe_push(&fe, x, feat)) {{ ... }}
 */
#ifndef {P}_FRONTEND_H
#define {P}_FRONTEND_H

#include <stdint.h>

#define {P}_FE_SAMPLE_RATE {cfg.sample_rate}
#define {P}_FE_FRAME_LEN {cfg.frame_len}
#define {P}_FE_HOP {cfg.hop}
#define {P}_FE_N_FFT {cfg.n_fft}
#define {P}_FE_N_MELS {cfg.n_mels}
#define {P}_FE_OFFSET_Q {cfg.offset_q}
#define {P}_FE_STEP_Q {1 << cfg.out_shift}
#define {P}_FE_LOG_ONE {1 << cfg.log_frac_bits}

/* everything the front end keeps between samples, owned by the caller: constant size */
typedef struct {{
    int16_t ring[{P}_FE_FRAME_LEN]; /* the last frame_len pre-emphasised samples */
    int16_t re[{P}_FE_N_FFT];       /* FFT scratch */
    int16_t im[{P}_FE_N_FFT];
    int32_t counters[4];           /* write position, fill, samples since the last frame, previous sample */
}} {p}_fe_state_t;

void {p}_fe_reset({p}_fe_state_t *s);
/* Push one sample; returns 1 (and writes {P}_FE_N_MELS int8 features) when it completes a frame. */
int {p}_fe_push({p}_fe_state_t *s, int16_t sample, int8_t *features);

#endif /* {P}_FRONTEND_H */
"""
    arrays = "".join(
        [
            _c_array("int16_t", f"{p}_fe_window", t["window"]),
            _c_array("int16_t", f"{p}_fe_cos", t["cos"]),
            _c_array("int16_t", f"{p}_fe_sin", t["sin"]),
            _c_array("uint16_t", f"{p}_fe_bitrev", t["bitrev"]),
            _c_array("uint16_t", f"{p}_fe_mel_start", t["mel_start"]),
            _c_array("uint16_t", f"{p}_fe_mel_len", t["mel_len"]),
            _c_array("uint16_t", f"{p}_fe_mel_offset", t["mel_offset"]),
            _c_array("uint16_t", f"{p}_fe_mel_weights", t["mel_weights"]),
            _c_array("int16_t", f"{p}_fe_log_table", t["log_table"]),
        ]
    )
    source = f"""/* {p}_frontend.c: constant tables of the integer log-mel front end (lmu_edge.audio.frontend.emit_c).
 * Configuration: {cfg.to_dict()}
 */
#include "{p}_frontend.h"
#include "lmu_frontend.h"

{arrays}
static const lmu_fe_config_t {p}_fe_config = {{
    {cfg.frame_len}, {cfg.hop}, {cfg.n_fft}, {cfg.log2_n_fft}, {cfg.n_mels}, {cfg.preemph_q15},
    {p}_fe_window, {p}_fe_cos, {p}_fe_sin, {p}_fe_bitrev,
    {p}_fe_mel_start, {p}_fe_mel_len, {p}_fe_mel_offset, {p}_fe_mel_weights,
    {p}_fe_log_table, {cfg.log_table_bits}, {cfg.log_frac_bits}, {cfg.log_bias}, {cfg.offset_q}, {cfg.out_shift}
}};

void {p}_fe_reset({p}_fe_state_t *s) {{
    lmu_fe_reset(&{p}_fe_config, s->ring, s->counters);
}}

int {p}_fe_push({p}_fe_state_t *s, int16_t sample, int8_t *features) {{
    return lmu_fe_push(&{p}_fe_config, s->ring, s->re, s->im, s->counters, sample, features);
}}
"""
    return header, source


def emit_c(out_dir, config: FrontendConfig = FrontendConfig(), prefix: str = "model") -> list:
    """Write ``<prefix>_frontend.h``, ``<prefix>_frontend.c`` and ``lmu_frontend.h`` into ``out_dir``.

    Returns the paths written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    h, c = c_sources(config, prefix)
    paths = [out / f"{prefix}_frontend.h", out / f"{prefix}_frontend.c", out / "lmu_frontend.h"]
    paths[0].write_text(h)
    paths[1].write_text(c)
    shutil.copyfile(TEMPLATES / "lmu_frontend.h", paths[2])
    return paths


# --- running the C (host gcc; Cortex-M4 / M0 under QEMU) -----------------------------------------

_HARNESS = r"""/* feature dump harness: raw int16 samples in, int8 features out (host: argv; QEMU: semihosting) */
#include <stdio.h>
#include "fe_frontend.h"
#if defined(__arm__)
#define SYST_CSR (*(volatile uint32_t *)0xE000E010u)
#define SYST_RVR (*(volatile uint32_t *)0xE000E014u)
#define SYST_CVR (*(volatile uint32_t *)0xE000E018u)
static void ticks_start(void) { SYST_RVR = 0xFFFFFFu; SYST_CVR = 0u; SYST_CSR = 5u; }
static uint32_t ticks_now(void) { return SYST_CVR; }
static uint32_t ticks_since(uint32_t t0) { return (t0 - SYST_CVR) & 0xFFFFFFu; }
#else
static void ticks_start(void) {}
static uint32_t ticks_now(void) { return 0u; }
static uint32_t ticks_since(uint32_t t0) { return t0 * 0u; }
#endif
static fe_fe_state_t fe;
int main(int argc, char **argv) {
    FILE *fi = fopen(argc > 2 ? argv[1] : "fe_in.raw", "rb");
    FILE *fo = fopen(argc > 2 ? argv[2] : "fe_out.bin", "wb");
    int16_t buf[256];
    int8_t feat[FE_FE_N_MELS];
    unsigned long frames = 0, samples = 0;
    unsigned long long ticks = 0;
    size_t n, i;
    if (!fi || !fo) { printf("fe harness: cannot open files\n"); return 2; }
    fe_fe_reset(&fe);
    ticks_start();
    while ((n = fread(buf, sizeof(int16_t), 256, fi)) > 0) {
        for (i = 0; i < n; ++i) {
            uint32_t t0 = ticks_now();
            int got = fe_fe_push(&fe, buf[i], feat);
            ticks += ticks_since(t0);
            ++samples;
            if (got) { fwrite(feat, 1, sizeof(feat), fo); ++frames; }
        }
    }
    fclose(fi);
    fclose(fo);
    printf("lmu-fe: samples=%lu frames=%lu ticks=%lu state_bytes=%lu\n", samples, frames, (unsigned long)ticks,
           (unsigned long)sizeof(fe));
    return 0;
}
"""

WARN = list(toolchain.WARN)
ARM_FLAGS = [*toolchain.ARM_OPT, *toolchain.ARM_LINK]
CPU_FLAGS = {name: list(r.cpu_flags) for name, r in toolchain.ARM_RUNTIMES.items()}


def build_c(directory, sources, runtime: str, exe: str, includes=(), flags=()) -> Path:
    """Compile C ``sources`` in ``directory`` for ``runtime`` (``host`` or a Cortex-M runtime of
    :mod:`lmu_edge.toolchain`) with ``-std=c99 -Wall -Wextra -Werror -pedantic -O2`` (the integer-only
    Cortex-M0 builds define LMU_NO_FLOAT)."""
    d = Path(directory)
    inc = [f"-I{i}" for i in includes]
    if runtime == "host":
        cmd = [toolchain.need("gcc", "gcc"), *WARN, "-O2", *flags, *inc, *map(str, sources), "-o", exe]
    elif runtime in toolchain.ARM_RUNTIMES:
        script = toolchain.ARM_RUNTIMES[runtime].linker_script
        for f in ("startup.c", script):
            if not (d / f).exists():
                shutil.copyfile(TEMPLATES / f, d / f)
        cmd = [
            toolchain.arm_gcc(),
            *toolchain.compile_flags(runtime, flags),
            *toolchain.link_flags(runtime),
            *inc,
            *map(str, sources),
            "startup.c",
            "-o",
            exe,
        ]
    else:
        raise ValueError(f"unknown runtime {runtime!r}; known: {', '.join(toolchain.RUNTIMES)}")
    r = subprocess.run(cmd, cwd=d, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"compiling {exe} for {runtime} failed: {(r.stderr or r.stdout)[-2000:]}")
    return d / exe


def run_binary(exe, runtime: str, cwd, args=(), timeout: int = 900) -> subprocess.CompletedProcess:
    """Run a host executable, or a Cortex-M image on its QEMU board with semihosting and ``-icount``
    (files are opened relative to ``cwd``)."""
    if runtime == "host":
        cmd = [str(exe), *args]
    else:
        cmd = toolchain.qemu_command(runtime, exe)
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"{runtime} run of {exe} failed (exit {r.returncode}): {(r.stdout + r.stderr)[-1000:]}")
    return r


def parse_stats(stdout: str, tag: str) -> dict:
    """The ``key=value`` integers of the first ``TAG: ...`` line of a run's output (empty when none)."""
    for line in stdout.splitlines():
        if line.startswith(tag + ":"):
            return {k: int(v) for k, v in (kv.split("=") for kv in line.split()[1:])}
    return {}


def run_c(x, cfg: FrontendConfig = FrontendConfig(), runtime: str = "host") -> tuple:
    """Stream int16 samples ``x`` through the C front end; returns ``(features int8 (F, n_mels), stats)``.

    ``stats``: samples, frames, state_bytes and, on Cortex-M, ``instructions_per_frame`` (every
    ``push`` call counted, divided by the frames it produced)."""
    x = np.asarray(x)
    with tempfile.TemporaryDirectory(prefix="lmu-fe-") as tmp:
        d = Path(tmp)
        emit_c(d, cfg, "fe")
        (d / "fe_harness.c").write_text(_HARNESS)
        exe = build_c(d, ["fe_harness.c", "fe_frontend.c"], runtime, "fe_" + runtime.replace("-", "_"))
        (d / "fe_in.raw").write_bytes(np.asarray(x, "<i2").tobytes())
        r = run_binary(exe, runtime, d, ["fe_in.raw", "fe_out.bin"])
        y = np.frombuffer((d / "fe_out.bin").read_bytes(), np.int8).reshape(-1, cfg.n_mels).copy()
    stats = parse_stats(r.stdout, "lmu-fe")
    if runtime != "host" and stats.get("frames"):
        stats["instructions_per_frame"] = toolchain.instructions(stats["ticks"], runtime) / stats["frames"]
    return y, stats
