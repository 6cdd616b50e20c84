"""The FSDD stream's training data (examples/kws/fsdd_stream.py ``data``): per-frame labels, the non-digit
audio (reversed and spliced clips, flite and espeak-ng words), and the fold's training sequences.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fsdd
import kws
import negatives
import train_fsdd

from lmu_edge.audio import frontend

HERE = Path(__file__).resolve().parent
SR, CFG = fsdd.SR, fsdd.CFG

DIGITS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
CLASSES = ["_silence_", "_not_a_digit_"] + DIGITS
T = 150  # frames per training sequence (1.5 s)
UNITS, MEMORY_D, ORDER, THETA = 128, 32, 16, 80
THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95)  # mean posterior over the window that fires
MODEL = HERE / "fsdd_model" / "stream_george.keras"
CALIB = HERE / "fsdd_model" / "stream_calib_george.npy"


def ms(v) -> int:
    """Milliseconds as a number of 8 kHz samples."""
    return int(v * SR // 1000)


def frame_end(i):
    """Sample index just after frame ``i``."""
    return np.asarray(i) * CFG.hop + CFG.frame_len


def frame_labels(n_frames, cls, start, end, warmup=30):
    """Per-frame targets and weights for a word in samples [start, end): the class from 50 ms before the
    word's end to 250 ms after it, "don't care" from 100 ms into the word up to that point and for 150 ms
    after it, silence (class 0) elsewhere; the first ``warmup`` frames (memory filling) are "don't care"."""
    ends = frame_end(np.arange(n_frames))
    y = np.zeros(n_frames, np.int64)
    w = np.ones(n_frames, np.float32)
    if cls is not None:
        y[(ends >= end - ms(50)) & (ends <= end + ms(250))] = cls
        w[(ends > start + ms(100)) & (ends < end - ms(50))] = 0.0
        w[(ends > end + ms(250)) & (ends <= end + ms(400))] = 0.0
    w[:warmup] = 0.0
    return y, w


def to8k(x) -> np.ndarray:
    """16 kHz synthesizer output at 8 kHz (polyphase, anti-aliased)."""
    from scipy.signal import resample_poly

    return resample_poly(np.asarray(x, np.float64), 1, 2)


def not_digits(clips, rng) -> list:
    """Real voice, no digit: each clip reversed, and as many splices (second half of one clip, first
    half of another of a different digit)."""
    out = [np.asarray(c)[::-1] for c, _ in clips]
    for _ in range(len(clips)):
        (a, da), (b, db) = clips[rng.integers(len(clips))], clips[rng.integers(len(clips))]
        if da != db:
            out.append(np.concatenate([np.asarray(a)[len(a) // 2 :], np.asarray(b)[: len(b) // 2]]))
    return out


def peak_normalized(a, peak=None) -> np.ndarray:
    """``a`` (float) scaled so that ``peak`` (default: its own peak) becomes 8000, as the synthetic words are
    heard in the recordings and in training."""
    return a * (8000 / max(1, np.abs(a).max() if peak is None else peak))


def no_digits(items, names) -> list:
    """The ``items`` (synthesized words) whose name is no digit: the synthetic example's unknown words
    include "zero" to "nine", which here are digits, not negatives."""
    return [w for w, name in zip(items, names, strict=True) if name not in DIGITS]


FLITE_EXTRA = ["hello", "music", "coffee", "table", "paper", "garden", "river", "summer", "winter", "money",
               "people", "letter", "again", "never", "maybe", "often", "sister", "window"]  # fmt: skip


def flite_words() -> list:
    """``data --flite-words`` (an experiment: the test's voices in training): the synthetic example's
    training unknown words and :data:`FLITE_EXTRA`, less the test words, the digits and "know" (sounds as
    "no"); 33 words."""
    test = set(kws.KEYWORDS + kws.UNKNOWN_TEST) | set(DIGITS) | {"know"}
    return sorted({w for w in kws.UNKNOWN_TRAIN + FLITE_EXTRA if w not in test})


def flite_sequences(seed=5):
    """Every :func:`flite_words` word in flite's 5 voices at 3 speeds, peak-normalized, twice (every other
    sequence speed-perturbed), as "not a digit" training sequences: (features, targets, weights)."""
    rng = np.random.default_rng(seed)
    items = []
    for w in flite_words():
        for v in kws.FLITE_VOICES:
            for s in (0.8, 1.0, 1.25):
                a = to8k(kws.flite(w, v, s))
                items.append(peak_normalized(a))
    return zip(*(sequence(rng, a, 1, speed=bool(i % 2)) for i, a in enumerate(items + items)), strict=True)


def noisy(rng, n) -> np.ndarray:
    """Background: white noise at -60..-25 dBFS (the clip models' augmentation) or coloured noise."""
    if rng.random() < 0.5:
        return rng.normal(0, 10 ** (rng.uniform(-60, -25) / 20) * 32767, n)
    return kws.background(rng, n)


def sequence(rng, word, cls, speed=False):
    """One training sequence: ``word`` (or silence) at a random position and gain in noise; features,
    targets, weights."""
    n = int(frame_end(T - 1))
    x = noisy(rng, n)
    start = end = 0
    if word is not None:
        w = np.asarray(word, np.float64)
        if speed:
            w = train_fsdd.resample(w, rng.uniform(0.85, 1.15))
        w = w[: n - ms(300) - ms(400)] * 10 ** (rng.uniform(-12, 6) / 20)
        start = int(rng.integers(ms(300), n - len(w) - ms(400) + 1))
        end = start + len(w)
        x[start:end] += w
    q = frontend.features(np.clip(np.round(x), -32768, 32767).astype(np.int64), CFG)[:T]
    y, wt = frame_labels(T, None if word is None else cls, start, end)
    return q, y, wt


def build_data(folder, speaker, seed=0, drop=(), cuts=False, norm=False, more_espeak=0, more_festival=0, flite=False):
    """The fold's training set: every other speaker's clip twice (once speed-perturbed) as its digit,
    their reversed / spliced versions and espeak-ng's words that are no digit as "not a digit", and
    silence. ``drop``: speakers also left out (development splits); ``cuts``: also each clip's first or
    last 40% as "not a digit" (a partial word must not fire); ``more_espeak`` / ``more_festival``: as many
    :func:`negatives.espeak_renditions` / :func:`negatives.festival_renditions` per word
    of ``negative_words.txt`` as "not a digit"; ``flite``: :func:`flite_sequences` appended (an experiment:
    the synthetic negatives' voices heard in training). Returns ``(q, y, w, prior)``; ``prior`` is None
    without ``norm``.

    ``norm``: speaker-normalized features (:class:`fsdd.SpeakerNorm`, as ``stream.c`` with a
    ``kws_norm.h``). The sequences of one voice (a speaker's digits and his reversed and spliced clips,
    which then splice within the speaker; espeak-ng's words as one voice; silence with a random speaker)
    are heard in a seeded random order through one normalizer starting at the prior (the speech mean of
    the training speakers' digit sequences), each normalized by what was heard before it."""
    if flite and norm:
        raise fsdd.CommandError("--flite-words with --norm: give one of them")
    rng = np.random.default_rng(seed)
    index = [(p, d, s) for p, d, s, _ in fsdd.index(folder) if s != speaker and s not in drop]
    if not index:
        raise fsdd.CommandError(f"{folder}: no recordings of any speaker but {speaker!r} to train on")
    clips = [(fsdd.read_wav(p), d) for p, d, _ in index]
    voice = [s for _, _, s in index]
    items = [(c, 2 + d, False) for c, d in clips] + [(c, 2 + d, True) for c, d in clips]
    groups = voice + voice
    if norm:
        for s in sorted(set(voice)):
            mine = [c for c, v in zip(clips, voice, strict=True) if v == s]
            neg = not_digits(mine, rng)
            items += [(c, 1, False) for c in neg]
            groups += [s] * len(neg)
    else:
        items += [(c, 1, False) for c in not_digits(clips, rng)]
    if cuts:
        items += [(c[: len(c) * 2 // 5] if rng.random() < 0.5 else c[-(len(c) * 2 // 5) :], 1, False) for c, _ in clips]
        groups += voice
    words = no_digits(kws.train_words()[0], kws.train_word_names())
    items += [(to8k(w), 1, False) for w in words]
    groups += ["espeak"] * len(words)
    if more_espeak:
        extra = negatives.espeak_renditions(more_espeak)
        items += [(to8k(w), 1, False) for w in extra]
        groups += ["espeak"] * len(extra)
    if more_festival:
        extra = negatives.festival_renditions(more_festival)
        items += [(to8k(w), 1, False) for w in extra]
        groups += ["festival"] * len(extra)
    n_sil = len(clips) // 5
    items += [(None, 0, False)] * n_sil
    groups += [sorted(set(voice))[int(i)] for i in rng.integers(0, len(set(voice)), n_sil)]
    qs, ys, ws = zip(*(sequence(rng, w, c, sp) for w, c, sp in items), strict=True)
    q, y, w = np.stack(qs), np.stack(ys), np.stack(ws)
    if flite:
        fq, fy, fw = (np.stack(v) for v in flite_sequences())
        q, y, w = np.concatenate([q, fq]), np.concatenate([y, fy]), np.concatenate([w, fw])
    if not norm:
        return q, y, w, None
    prior = fsdd.speech_mean(q[: 2 * len(clips)])
    groups = np.asarray(groups)
    out = q.astype(np.int64)
    for g in sorted(set(groups)):
        idx = np.flatnonzero(groups == g)
        out[idx] = fsdd.SpeakerNorm(prior).clips(q[idx], rng.permutation(len(idx)))[0]
    return out, y, w, prior
