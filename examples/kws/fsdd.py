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


def one_line_errors(run, cmd: str, missing_file_hint: str) -> int:
    """``run()``'s exit status; a bad WAV or folder, a missing file (``missing_file_hint`` says which step
    makes it) or a missing package becomes one line on stderr and exit status 2, with no traceback."""
    import sys

    try:
        return run() or 0
    except AudioFormatError as e:
        print(f"error: {e}", file=sys.stderr)
    except FileNotFoundError as e:
        print(f"error: {e.filename}: no such file; {missing_file_hint}", file=sys.stderr)
    except ImportError as e:
        print(f"error: {cmd} needs {e.name}: pip install 'lmu-edge[torch,keras]'", file=sys.stderr)
    return 2
