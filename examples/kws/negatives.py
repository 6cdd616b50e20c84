"""Synthesized words that are no digit, as "not a digit" in the FSDD stream's training (``fsdd_stream.py
data --more-negatives N --festival-negatives N``).

The words are ``negative_words.txt``'s; espeak-ng says them in English accents and other languages'
voices with its voice variants, Festival in voices made from human recordings. flite's voices, the
synthetic test negatives', are in neither. Renditions are 16 kHz int16, silence trimmed, and cached in
``out/kws_cache`` like the other examples' (keyed by the word and voice lists).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import tempfile
from pathlib import Path

import fsdd
import kws
import numpy as np

NEGATIVE_WORDS = Path(__file__).resolve().parent / "negative_words.txt"
# voices for the extra negatives: espeak-ng's English accents and other languages reading English text,
# each with a random voice variant or none ("": in 13 of the 40 places, so the documented data is drawn
# as measured); flite's voices, the test's, are not among them
ESPEAK_VOICES = ["en-us", "en-gb", "en-gb-scotland", "en-gb-x-rp", "en-029", "en-gb-x-gbclan", "en-gb-x-gbcwmd",
               "en-us-nyc", "de", "fr-fr", "es", "it", "nl", "pl", "sv", "pt", "ro", "cs", "hu", "fi"]  # fmt: skip
ESPEAK_VARIANTS = ["", "m1", "m2", "m3", "m4", "m5", "m6", "m7", "f1", "f2", "f3", "f4", "f5", "klatt", "klatt2",
                 "klatt4", "Andy", "Annie", "", "", "", "Diogo", "Gene", "Henrique", "Jacky", "Lee", "",
                 "Michael", "Mike", "", "", "", "", "Storm", "grandpa", "", "", "Alicia", "", ""]  # fmt: skip


def negative_words() -> list:
    """The words of ``negative_words.txt`` (one per line, ``#`` comments)."""
    lines = NEGATIVE_WORDS.read_text().splitlines()
    return [w.strip() for w in lines if w.strip() and not w.startswith("#")]


def espeak_renditions(per_word, seed=0) -> list:
    """``per_word`` espeak-ng renditions of every word of ``negative_words.txt`` (none a digit), each in a
    seeded random voice, variant, speed and pitch; 16 kHz int16, cached like the other renditions."""
    words = negative_words()
    key = hashlib.sha256(json.dumps([words, ESPEAK_VOICES, ESPEAK_VARIANTS]).encode()).hexdigest()[:10]

    def build():
        rng = np.random.default_rng(seed)
        jobs = []
        for w in words:
            for _ in range(per_word):
                v, var = str(rng.choice(ESPEAK_VOICES)), str(rng.choice(ESPEAK_VARIANTS))
                jobs.append((w, v + ("+" + var if var else ""), int(rng.integers(110, 220)), int(rng.integers(20, 90))))
        return kws._render(jobs, kws.espeak), [1] * len(jobs)

    return kws._cached(f"espeak_more_{per_word}_{seed}_{key}", build)[0]


# Festival's voices that read English text (Debian festvox-* packages): diphone, cluster-unit and HTS voices
# made from human recordings, nearer a real voice than espeak-ng's formants; kal and slt (flite's, the
# test's speakers) are not among them, the Indian-language voices crash on Latin text
FESTIVAL_VOICES = {
    "ked_diphone": "festvox-kdlpc16k",
    "pc_diphone": "festvox-itapc16k",
    "lp_diphone": "festvox-italp16k",
    "suo_fi_lj_diphone": "festvox-suopuhe-lj",
    "hy_fi_mv_diphone": "festvox-suopuhe-mv",
    "upc_ca_ona_hts": "festvox-ca-ona-hts",
    "msu_ru_nsh_clunits": "festvox-ru",
    "czech_dita": "festvox-czech-dita",
    "czech_krb": "festvox-czech-krb",
    "czech_machac": "festvox-czech-machac",
    "czech_ph": "festvox-czech-ph",
}


def festival(jobs) -> list:
    """Festival renditions of ``jobs`` ((word, voice, duration stretch), in order): one ``festival``
    process per voice; 16 kHz int16, silence trimmed."""
    kws._need("festival", "festival and " + ", ".join(sorted(set(FESTIVAL_VOICES.values()))))
    out = [None] * len(jobs)
    with tempfile.TemporaryDirectory() as tmp:
        for voice in sorted({v for _, v, _ in jobs}):
            mine = [i for i, (_, v, _) in enumerate(jobs) if v == voice]
            lines = [f"(voice_{voice})"]
            for i in mine:
                word, _, stretch = jobs[i]
                lines += [
                    f"(Parameter.set 'Duration_Stretch {stretch})",
                    f'(utt.save.wave (SynthText "{word}") "{tmp}/{i}.wav" \'riff)',
                ]
            script = Path(tmp) / f"{voice}.scm"
            script.write_text("\n".join(lines) + "\n")
            r = subprocess.run(["festival", "-b", str(script)], capture_output=True, text=True)
            for i in mine:
                f = Path(tmp) / f"{i}.wav"
                if not f.exists():
                    raise fsdd.CommandError(
                        f"festival voice {voice} did not say {jobs[i][0]!r} (exit {r.returncode}): is "
                        f"{FESTIVAL_VOICES.get(voice, 'its voice package')} installed?"
                    )
                out[i] = kws._trim(kws._to16k(*kws._read_wav_file(f)))
    return out


def festival_renditions(per_word, seed=0) -> list:
    """``per_word`` Festival renditions of every word of ``negative_words.txt``, each in a seeded random
    :data:`FESTIVAL_VOICES` voice and duration stretch (0.85..1.2); 16 kHz int16, cached."""
    words = negative_words()
    key = hashlib.sha256(json.dumps([words, sorted(FESTIVAL_VOICES)]).encode()).hexdigest()[:10]

    def build():
        rng = np.random.default_rng(seed)
        voices = sorted(FESTIVAL_VOICES)
        jobs = [
            (w, str(rng.choice(voices)), round(float(rng.uniform(0.85, 1.2)), 2))
            for w in words
            for _ in range(per_word)
        ]
        return festival(jobs), [1] * len(jobs)

    return kws._cached(f"festival_more_{per_word}_{seed}_{key}", build)[0]
