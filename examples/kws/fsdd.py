"""Spoken digits from the Free Spoken Digit Dataset (FSDD): reading, checking and featurising the clips.

The recordings are 8 kHz mono int16 WAV; the integer front end (:mod:`lmu_edge.audio.frontend`) runs at
8 kHz directly (``CFG``: 25 ms frames of 200 samples, 10 ms hop of 80, 256-point FFT, 32 mel bands
up to 3.8 kHz), so nothing is resampled and the C front end sees the same samples. Splits hold
whole speakers out (leave one speaker out), as the dataset's README asks.

Dataset: Free Spoken Digit Dataset by Zohar Jackson and contributors, CC BY-SA 4.0.
"""

from __future__ import annotations

import re
import wave
from pathlib import Path

import numpy as np

from lmu_edge.audio import frontend
from lmu_edge.errors import LmuEdgeError

SR = 8000
CFG = frontend.FrontendConfig(sample_rate=SR, frame_len=200, hop=80, n_fft=256, n_mels=32, f_min=60.0, f_max=3800.0)
SPEAKERS = ["george", "jackson", "lucas", "nicolas", "theo", "yweweler"]
T = 80  # frames per training sequence: 0.8 s (clips longer than that are cut)
FEATURE_SCALE = 1.0 / 128
NAME = re.compile(r"^(\d)_([a-z]+)_(\d+)\.wav$")


class AudioFormatError(LmuEdgeError, ValueError):
    """A WAV file that is not 8 kHz mono 16-bit PCM, or is empty, truncated or corrupt."""


class CommandError(LmuEdgeError, ValueError):
    """A command that cannot go on: an unknown option value, inputs that do not fit the recipe, or a
    check of its own result that failed."""


def read_wav(path, rate: int = SR) -> np.ndarray:
    """The int16 samples (as int64) of a mono 16-bit PCM WAV at ``rate``; one-line error otherwise."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise AudioFormatError(f"{path}: cannot read ({e.strerror}); give an existing WAV file") from None
    if len(raw) < 44:
        raise AudioFormatError(f"{path}: {len(raw)} bytes is no WAV file (header is 44); re-export it as WAV")
    try:
        with wave.open(str(path), "rb") as w:
            ch, width, fr, n = w.getnchannels(), w.getsampwidth(), w.getframerate(), w.getnframes()
            data = w.readframes(n)
    except (wave.Error, EOFError) as e:
        raise AudioFormatError(f"{path}: corrupt WAV ({e}); re-export it as 16-bit PCM WAV") from None
    if ch != 1:
        raise AudioFormatError(f"{path}: {ch} channels, need mono; mix down to one channel")
    if width != 2:
        raise AudioFormatError(f"{path}: {8 * width}-bit samples, need 16-bit PCM; convert it")
    if fr != rate:
        raise AudioFormatError(f"{path}: sample rate {fr} Hz, need {rate} Hz; resample it")
    if n == 0:
        raise AudioFormatError(f"{path}: no samples; give a non-empty recording")
    if len(data) != n * ch * width:
        raise AudioFormatError(
            f"{path}: truncated, header says {n} samples but {len(data) // 2} are present; re-export it"
        )
    return np.frombuffer(data, "<i2").astype(np.int64)


def index(folder) -> list:
    """(path, digit, speaker, take) of every recording in an FSDD folder (or its ``recordings/``)."""
    folder = Path(folder)
    rec = folder / "recordings" if (folder / "recordings").is_dir() else folder
    if not rec.is_dir():
        raise AudioFormatError(f"{folder}: not a folder; give the FSDD folder (with recordings/)")
    out = []
    for p in sorted(rec.iterdir()):
        m = NAME.match(p.name)
        if m:
            out.append((p, int(m.group(1)), m.group(2), int(m.group(3))))
    if not out:
        raise AudioFormatError(f"{folder}: no {{digit}}_{{speaker}}_{{index}}.wav files; give the FSDD folder")
    return out


def place(x, n, offset) -> np.ndarray:
    """``x`` placed at ``offset`` in ``n`` zero samples (cut at the end)."""
    out = np.zeros(n, np.int64)
    x = x[: max(0, n - offset)]
    out[offset : offset + len(x)] = x
    return out


def clip_features(x, rng=None, noise_db=None) -> np.ndarray:
    """int8 features (T x n_mels) of one clip padded / cut to T frames; with ``rng``: random shift,
    gain and background noise (augmentation), else the clip starts after 50 ms of silence."""
    n = (T - 1) * CFG.hop + CFG.frame_len
    x = np.asarray(x, np.float64)
    if rng is None:
        y = place(np.round(x).astype(np.int64), n, 400)
        y = y + np.random.default_rng(len(x)).normal(0, 2.0, n).round().astype(np.int64)
    else:
        x = x * 10 ** (rng.uniform(-12, 6) / 20)
        room = max(0, n - len(x))
        y = place(np.round(x).astype(np.int64), n, int(rng.integers(0, min(room, 2400) + 1)))
        lvl = 10 ** (rng.uniform(-60, -25) / 20) * 32767
        y = y + np.round(rng.normal(0, lvl, n)).astype(np.int64)
    y = np.clip(y, -32768, 32767)
    return frontend.features(y, CFG)[:T]


#: speaker normalization (``SpeakerNorm``): a frame is speech when its 32 features sum above this (a mean of
#: -40: 14 steps, about 10 dB, over the clips' noise floor of -54; 43-67% of each speaker's frames, padded
#: to 0.8 s, are above it)
SPEECH_GATE = -40 * 32
#: the running mean of the speech frames moves 2^-k of the way to the n-th speech frame, k = min(bitlen(n),
#: NORM_SHIFT): fast while it has heard little, then an average over the last ~2^NORM_SHIFT speech frames
NORM_SHIFT = 9


class SpeakerNorm:
    """Per-band running mean of the speech frames, subtracted from every frame (cepstral mean normalization,
    in integers, causal: what a device does while it listens to its user).

    State ``mu`` (int32 per band, Q8 feature steps), starting at ``prior`` (the training speakers' mean).
    Per frame ``f`` (int8 features)::

        out[b] = clamp(f[b] - ((mu[b] + 128) >> 8), -128, 127)
        if sum(f) > SPEECH_GATE:  n = min(n + 1, 2^NORM_SHIFT)
                                  mu[b] += ((f[b] << 8) - mu[b]) >> min(bitlen(n), NORM_SHIFT)   (after out)

    Shifts are arithmetic (floor), as gcc's ``>>`` on int32. Speakers and microphones differ most in the
    long-term shape of the spectrum; on a development split (train lucas, nicolas, theo, yweweler; test
    jackson; george unused; 15 epochs) this took the LMU from 0.56 to 0.88 (0.84 with a fixed 2^-7 step).
    """

    def __init__(self, prior):
        self.prior = np.asarray(prior, np.int64).copy()
        self.reset()

    def reset(self):
        self.mu, self.n = self.prior.copy(), 0

    @staticmethod
    def apply(q, mu) -> np.ndarray:
        """Frames ``q`` (... x n_mels) normalized by a fixed ``mu``."""
        return np.clip(np.asarray(q, np.int64) - ((np.asarray(mu, np.int64) + 128) >> 8), -128, 127)

    def frames(self, q, update=True) -> np.ndarray:
        """Normalized int8 features of the frames ``q`` (T x n_mels), in order; updates ``mu`` when ``update``."""
        q = np.asarray(q, np.int64)
        out = np.empty_like(q)
        mu, n = self.mu.copy(), self.n
        for t in range(len(q)):
            out[t] = self.apply(q[t], mu)
            if update and q[t].sum() > SPEECH_GATE:
                n = min(n + 1, 1 << NORM_SHIFT)
                mu += ((q[t] << 8) - mu) >> min(int(n).bit_length(), NORM_SHIFT)
        if update:
            self.mu, self.n = mu, n
        return out

    def clips(self, qs, order=None) -> tuple:
        """``(normalized clips, mu before each clip)``: each clip (N x T x n_mels) normalized with ``mu`` as it
        stood before the clip, the clips heard in ``order`` (default: as given); ``mu`` learns from each clip
        after it is normalized."""
        qs = np.asarray(qs, np.int64)
        mus = np.empty((len(qs), qs.shape[-1]), np.int64)
        for i in range(len(qs)) if order is None else order:
            mus[i] = self.mu
            self.frames(qs[i])
        return self.apply(qs, mus[:, None, :]), mus


def norm_header(prior, prefix="kws") -> str:
    """The C of :class:`SpeakerNorm` for ``stream.c`` (``<prefix>_norm.h``): gate, shift and prior."""
    P = prefix.upper()
    vals = ", ".join(str(int(v)) for v in np.asarray(prior, np.int64))
    return (
        "/* speaker normalization of examples/kws/fsdd.py (SpeakerNorm); generated, do not edit */\n"
        f"#define {P}_NORM_GATE ({SPEECH_GATE})\n#define {P}_NORM_SHIFT {NORM_SHIFT}\n"
        f"static const int32_t {prefix}_norm_prior[{len(prior)}] = {{{vals}}};\n"
    )


def speech_mean(qs) -> np.ndarray:
    """Q8 per-band mean of the speech frames (sum above ``SPEECH_GATE``) of the clips ``qs``: a prior for
    :class:`SpeakerNorm`."""
    f = np.asarray(qs, np.int64).reshape(-1, np.shape(qs)[-1])
    f = f[f.sum(1) > SPEECH_GATE]
    return np.round(f.mean(0) * 256).astype(np.int64)


def count(text) -> int:
    """argparse type: a whole number >= 0."""
    import argparse

    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 0")
    return int(text)


def one_line_errors(run, cmd: str, missing_file_hint: str) -> int:
    """``run()``'s exit status; a bad WAV or folder, a :class:`CommandError`, a missing file
    (``missing_file_hint`` says which step makes it) or a missing package becomes one line on stderr
    and exit status 2, with no traceback."""
    import sys

    try:
        return run() or 0
    except (AudioFormatError, CommandError) as e:
        print(f"error: {e}", file=sys.stderr)
    except FileNotFoundError as e:
        if e.filename is None:  # a missing tool (kws._need): its message says what to install
            print(f"error: {e}", file=sys.stderr)
        else:
            print(f"error: {e.filename}: no such file; {missing_file_hint}", file=sys.stderr)
    except ImportError as e:
        print(f"error: {cmd} needs {e.name}: pip install 'lmu-edge[torch,keras]'", file=sys.stderr)
    return 2
