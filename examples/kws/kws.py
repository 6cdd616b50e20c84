"""Keyword spotting on synthesized speech: data, labels, the integer detection rule, the C build.

Everything here is deterministic: espeak-ng and flite render the same text with the same options
to the same samples, and all randomness (noise, gains, positions) comes from seeded generators.

* **Synthetic speech, not recordings.** Training words come from espeak-ng (many voices, accents,
  speeds, pitches); the held-out test words from flite (other voices, another synthesizer), so
  the test measures generalisation across synthesizers, not to human speakers.
* Audio is 16 kHz int16; espeak-ng's 22.05 kHz output is resampled with ``scipy.signal.resample_poly``.
* Features: :mod:`lmu_edge.audio.frontend` (integer log-mel, 32 bands, 10 ms hop); the model sees
  ``q / 128`` so that its int8 input quantization is the front end's int8 output, unchanged.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import wave
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from lmu_edge.audio import frontend
from lmu_edge.targets import c_kit

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CACHE = ROOT / "out" / "kws_cache"
SR = 16000
CFG = frontend.FrontendConfig()
KEYWORDS = ["yes", "no", "up", "down", "left", "right", "on", "off", "stop", "go"]
CLASSES = ["_silence_", "_unknown_"] + KEYWORDS
N_CLASSES = len(CLASSES)
UNKNOWN_TRAIN = [
    "bed",
    "bird",
    "cat",
    "dog",
    "happy",
    "house",
    "marvin",
    "sheila",
    "tree",
    "wow",
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "learn",
    "follow",
    "forward",
    "backward",
    "visual",
    "apple",
    "water",
    "yellow",
    "window",
    "under",
    "over",
    "little",
    "morning",
    "open",
    "lift",
    "dog",
    "bus",
    "yet",
    "know",
    "top",
]
UNKNOWN_TEST = [
    "bed",
    "cat",
    "happy",
    "house",
    "tree",
    "zero",
    "seven",
    "forward",
    "yellow",
    "morning",
    "lift",
    "top",
    "window",
    "over",
]
ESPEAK_VOICES = [
    "en-us",
    "en-gb",
    "en-gb-scotland",
    "en-gb-x-rp",
    "en-029",
    "en-gb-x-gbclan",
    "en-gb-x-gbcwmd",
    "en-us+m3",
    "en-us+f2",
    "en-gb+f3",
    "en-us+m7",
    "en-gb+m2",
    "en-029+f4",
    "en-us+f5",
]
FLITE_VOICES = ["slt", "rms", "awb", "kal16", "kal"]
FEATURE_SCALE = 1.0 / 128  # model input = q / 128: int8 input scale 1/128, zero point 0


def _need(tool, package):
    if shutil.which(tool) is None:
        raise FileNotFoundError(f"{tool} not installed (Debian: {package})")


# --- synthesis ---------------------------------------------------------------------------------


def _read_wav(raw: bytes) -> tuple:
    """(int16 samples, rate) of a mono 16-bit WAV; tolerates espeak-ng's streamed header (length -1)."""
    rate = int.from_bytes(raw[24:28], "little")
    i = raw.index(b"data") + 8
    return np.frombuffer(raw[i : i + (len(raw) - i) // 2 * 2], "<i2").astype(np.int64), rate


def _read_wav_file(path) -> tuple:
    """(int16 samples, rate) of a mono 16-bit WAV file a synthesizer wrote."""
    with wave.open(str(path)) as w:
        return np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.int64), w.getframerate()


def _to16k(x, rate):
    if rate == SR:
        return x
    from math import gcd

    from scipy.signal import resample_poly

    g = gcd(SR, rate)
    return np.round(resample_poly(x.astype(np.float64), SR // g, rate // g)).astype(np.int64)


def _trim(x, rel=0.02):
    """Drop leading and trailing silence (samples below ``rel`` of the peak, with 10 ms margin)."""
    a = np.abs(x)
    idx = np.nonzero(a > rel * a.max())[0]
    if idx.size == 0:
        return x
    return x[max(0, idx[0] - 160) : idx[-1] + 160]


def espeak(word, voice, speed, pitch) -> np.ndarray:
    _need("espeak-ng", "espeak-ng")
    r = subprocess.run(
        ["espeak-ng", "--stdout", "-v", voice, "-s", str(speed), "-p", str(pitch), word],
        capture_output=True,
        check=True,
    )
    x, rate = _read_wav(r.stdout)
    return _trim(_to16k(x, rate))


def flite(word, voice, stretch) -> np.ndarray:
    _need("flite", "flite")
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "w.wav"
        subprocess.run(
            ["flite", "-voice", voice, "--setf", f"duration_stretch={stretch}", "-t", word, "-o", str(out)],
            capture_output=True,
            check=True,
        )
        x, rate = _read_wav_file(out)
    return _trim(_to16k(x, rate))


def _render(jobs, fn):
    with ThreadPoolExecutor(2) as ex:
        return list(ex.map(lambda j: fn(*j), jobs))


def _cached(name, build):
    path = CACHE / f"{name}.npz"
    if path.exists():
        z = np.load(path, allow_pickle=False)
        lens = z["lens"]
        audio = np.split(z["audio"], np.cumsum(lens)[:-1])
        return audio, z["labels"]
    audio, labels = build()
    CACHE.mkdir(parents=True, exist_ok=True)
    np.savez(
        path,
        audio=np.concatenate(audio).astype(np.int16),
        lens=np.array([len(a) for a in audio]),
        labels=np.array(labels),
    )
    return audio, np.array(labels)


def train_word_names(n_per_keyword=120, n_per_unknown=14) -> list:
    """The word of each rendition :func:`train_words` returns, in its order (the unknown words include
    the digits "zero" to "nine": unknown to this example, digits to the FSDD one)."""
    return [w for w in KEYWORDS for _ in range(n_per_keyword)] + [
        w for w in UNKNOWN_TRAIN for _ in range(n_per_unknown)
    ]


def train_words(n_per_keyword=120, n_per_unknown=14, seed=0):
    """espeak-ng renditions: (list of int16 arrays, class indices)."""

    def build():
        rng = np.random.default_rng(seed)
        jobs, labels = [], []
        for word in train_word_names(n_per_keyword, n_per_unknown):
            jobs.append((word, str(rng.choice(ESPEAK_VOICES)), int(rng.integers(110, 220)), int(rng.integers(20, 90))))
            labels.append(CLASSES.index(word) if word in KEYWORDS else 1)
        return _render(jobs, espeak), labels

    return _cached(f"espeak_{n_per_keyword}_{n_per_unknown}_{seed}_{len(ESPEAK_VOICES)}", build)


def _test_jobs(stretches) -> list:
    """(word, flite voice, stretch) of each rendition :func:`test_words` makes, in its order."""
    return [(w, v, s) for w in KEYWORDS + UNKNOWN_TEST for v in FLITE_VOICES for s in stretches]


def test_word_names(stretches=(0.8, 1.0, 1.25)) -> list:
    """The word of each rendition :func:`test_words` returns, in its order."""
    return [w for w, _, _ in _test_jobs(stretches)]


def test_words(stretches=(0.8, 1.0, 1.25)):
    """flite renditions of every keyword and the held-out unknown words, every voice and stretch."""

    def build():
        jobs = _test_jobs(stretches)
        return _render(jobs, flite), [CLASSES.index(w) if w in KEYWORDS else 1 for w, _, _ in jobs]

    return _cached("flite_" + "_".join(map(str, stretches)), build)


# --- sequences with background noise -----------------------------------------------------------


def background(rng, n) -> np.ndarray:
    """Seeded noise: white noise through a random one-pole filter, a random level (float)."""
    from scipy.signal import lfilter

    a = rng.uniform(-0.2, 0.95)
    x = lfilter([1.0], [1.0, -a], rng.standard_normal(n))
    x /= np.std(x) + 1e-12
    return x * 10 ** rng.uniform(np.log10(5), np.log10(400))


def colour(rng, w) -> np.ndarray:
    """Training augmentation: a random spectral tilt and, one time in three, a random low-pass
    (3.4 to 7 kHz; some test voices are 8 kHz recordings), so the model does not learn one
    synthesizer's spectrum."""
    from scipy.signal import butter, lfilter

    w = lfilter([1.0, -rng.uniform(-0.6, 0.6)], [1.0], w.astype(np.float64))
    if rng.random() < 1 / 3:
        b, a = butter(4, rng.uniform(3400, 7000) / (SR / 2))
        w = lfilter(b, a, w)
    return w


def place(rng, n_samples, word, start, augment=False):
    """Background of ``n_samples`` plus ``word`` at a random gain from ``start``; int16."""
    x = background(rng, n_samples)
    if word is not None:
        if augment:
            word = colour(rng, word)
        w = word.astype(np.float64) / max(1, np.abs(word).max()) * 10 ** rng.uniform(np.log10(2500), np.log10(25000))
        x[start : start + len(w)] += w[: n_samples - start]
    return np.clip(np.round(x), -32768, 32767).astype(np.int16)


def frame_end(i):
    """Sample index just after frame ``i``."""
    return i * CFG.hop + CFG.frame_len


def frame_labels(n_frames, cls, start, end, warmup=30):
    """Per-frame targets and weights for a word in samples [start, end): the class from 50 ms before
    the word's end to 250 ms after it, "don't care" from the start of the word up to that point and
    for 150 ms after the target window, silence (class 0) elsewhere; the first ``warmup`` frames
    are "don't care" (the memory is still filling)."""
    ends = frame_end(np.arange(n_frames))
    y = np.zeros(n_frames, np.int64)
    w = np.ones(n_frames, np.float32)
    if cls is not None:
        on = (ends >= end - 800) & (ends <= end + 4000)
        y[on] = cls
        w[(ends > start + 1600) & (ends < end - 800)] = 0.0
        w[(ends > end + 4000) & (ends <= end + 6400)] = 0.0
    w[:warmup] = 0.0
    return y, w


def sequences(words, labels, n_frames, rng, n_silence=0, copies=1, augment=False):
    """Feature sequences ``(N, n_frames, n_mels)`` int8, targets, weights, word end samples."""
    n_samples = frame_end(n_frames - 1)
    xs, ys, ws, ends = [], [], [], []
    items = [(w, c) for w, c in zip(words, labels, strict=True) for _ in range(copies)] + [(None, None)] * n_silence
    for word, cls in items:
        if word is not None:
            word = word[: n_samples - 3200 - 8000 - 1600]
            start = int(rng.integers(8000, n_samples - len(word) - 3200))
            end = start + len(word)
        else:
            start = end = 0
        audio = place(rng, n_samples, word, start, augment)
        xs.append(frontend.features(audio, CFG))
        y, w = frame_labels(n_frames, None if word is None else int(cls), start, end)
        ys.append(y)
        ws.append(w)
        ends.append(end)
    return np.stack(xs), np.stack(ys), np.stack(ws), np.array(ends)


def utterance_predictions(post):
    """Utterance class from per-frame posteriors ``(N, T, 12)``: the non-silence class with the
    highest posterior at any frame."""
    return 1 + np.argmax(post[:, :, 1:].max(axis=1), axis=1)


# --- the held-out stream -----------------------------------------------------------------------


def make_stream(seconds=40.0, seed=7, gap=(0.9, 2.0)):
    """A long int16 recording: flite keywords (and a few unknown words) at random positions in
    seeded background noise. Returns ``(audio, events)``; events: (start, end, class) in samples."""
    words, labels = test_words()
    rng = np.random.default_rng(seed)
    n = int(seconds * SR)
    noise_level = 10 ** rng.uniform(np.log10(20), np.log10(150))
    from scipy.signal import lfilter

    x = lfilter([1.0], [1.0, -0.7], rng.standard_normal(n))
    x *= noise_level / np.std(x)
    events, t = [], int(rng.uniform(*gap) * SR)
    order = rng.permutation(len(words))
    k = 0
    while True:
        i = order[k % len(order)]
        k += 1
        w = words[i]
        if labels[i] == 1 and rng.random() > 0.3:  # keep some unknown words, mostly keywords
            continue
        if t + len(w) + SR // 2 > n:
            break
        g = 10 ** rng.uniform(np.log10(4000), np.log10(20000)) / max(1, np.abs(w).max())
        x[t : t + len(w)] += w * g
        events.append((t, t + len(w), int(labels[i])))
        t += len(w) + int(rng.uniform(*gap) * SR)
    return np.clip(np.round(x), -32768, 32767).astype(np.int16), events


# --- the detection rule (mirrored in stream.c) ---------------------------------------------------


class Detector:
    """Posterior smoothing, threshold and refractory period, in integers, exactly as ``stream.c``.

    The model's int8 softmax output ``y`` (scale 1/256, zero point -128) gives ``p = y + 128`` in
    0..255. For every class the sum ``S`` of ``p`` over the last ``window`` frames is kept; the
    keyword (classes 2..11) with the largest ``S`` (lowest index on ties) fires when ``S >=
    threshold`` and at least ``refractory`` frames have passed since the last detection. Its
    confidence is ``S / (256 window)``.
    """

    def __init__(self, window=8, threshold=None, refractory=80, n_classes=12, names=None):
        self.window, self.refractory, self.n = int(window), int(refractory), n_classes
        self.names = list(names or CLASSES)  # the C prints these; examples/kws/fsdd_stream.py has its own
        self.threshold = int(threshold if threshold is not None else 0.5 * 256 * window)

    def run(self, y) -> list:
        """int8 outputs ``(T, 12)`` -> detections ``[(frame, class, S)]``."""
        p = np.asarray(y, np.int64) + 128
        cs = np.cumsum(np.vstack([np.zeros((1, p.shape[1]), np.int64), p]), axis=0)
        T = p.shape[0]
        S = cs[1:] - cs[np.maximum(np.arange(1, T + 1) - self.window, 0)]
        out, last = [], -(10**9)
        for t in range(T):
            c = 2 + int(np.argmax(S[t, 2:]))
            if S[t, c] >= self.threshold and t - last >= self.refractory:
                out.append((t, c, int(S[t, c])))
                last = t
        return out

    def header(self, prefix="kws") -> str:
        names = ", ".join(f'"{c}"' for c in self.names)
        P = prefix.upper()
        return (
            f"/* detection rule of examples/kws/kws.py (Detector); generated, do not edit */\n"
            f"#define {P}_DET_WINDOW {self.window}\n#define {P}_DET_THRESHOLD {self.threshold}\n"
            f"#define {P}_DET_REFRACTORY {self.refractory}\n#define {P}_DET_N_CLASSES {self.n}\n"
            f"static const char *const {prefix}_class_names[{self.n}] = {{{names}}};\n"
        )


def format_detection(frame, cls, S, window):
    """The line stream.c prints for a detection (integers only: time in ms and confidence in %)."""
    ms = frame_end(frame) * 1000 // SR
    pct = S * 100 // (256 * window)
    return f"{ms // 1000}.{(ms % 1000) // 10:02d} s: {CLASSES[cls]} (0.{pct:02d})"


def score(detections, events, tol_before=0.3, tol_after=0.7, sr=SR, end_of=None):
    """Precision and recall of detections ``[(frame, class, S)]`` against keyword events: a
    detection is correct when its frame ends within [end - tol_before, end + tol_after] s of a
    not yet matched event of the same class. ``sr`` and ``end_of`` (frame -> its end sample) default
    to this example's 16 kHz front end; fsdd_stream.py passes its 8 kHz ones."""
    end_of = end_of or frame_end
    kw = [(s, e, c) for s, e, c in events if c >= 2]
    used, correct = set(), 0
    for f, c, _ in detections:
        t = int(end_of(f))
        for j, (_, e, ce) in enumerate(kw):
            if j not in used and ce == c and e - tol_before * sr <= t <= e + tol_after * sr:
                used.add(j)
                correct += 1
                break
    precision = correct / len(detections) if detections else 0.0
    recall = len(used) / len(kw) if kw else 0.0
    return precision, recall, correct, len(detections), len(kw)


# --- the streaming C: build and run -----------------------------------------------------------


def build_stream(
    art_dir,
    build_dir,
    detector,
    runtimes=("host", "cortex-m4", "cortex-m0"),
    cfg=CFG,
    norm_header=None,
    verifier=None,
) -> dict:
    """Put the converted model (``art_dir``: model.c/.h and the runtime's headers), the front end
    (``frontend.emit_c``), the detection header, the speaker normalization header (``norm_header``, the
    text of ``fsdd.norm_header``; none by default) and ``stream.c`` into ``build_dir`` and compile them
    for each runtime. ``verifier``: ``(its C artifact folder, prefix kwsv; the text of kws_verify.h)``
    (``verify.header``), the second stage, built from ``build_dir/verify``. Returns ``{runtime: executable}``."""
    art_dir, d = Path(art_dir), Path(build_dir)
    d.mkdir(parents=True, exist_ok=True)
    # every runtime header a model.c may include: a model with a convolutional front end includes
    # lmu_bandconv.h, one with the implicit Pade memory lmu_pade.h
    files = ("model.c", "model.h", *c_kit.runtime_headers('#include "lmu_runtime.h"'), "lmu_pade.h", "lmu_bandconv.h")

    def copy_model(folder: Path, to: Path):  # a C artifact's kit folder (OUT/<prefix>/), or a flat folder
        kit = None
        if (folder / "artifact.json").is_file():
            kit = folder / json.loads((folder / "artifact.json").read_text())["c"]["prefix"]
        for f in files:
            src = folder / f if kit is None else kit / f.replace("model.", f"{kit.name}.")
            if src.is_file() or kit is None:
                shutil.copyfile(src, to / f)
        if kit is not None:  # <prefix>.c includes "<prefix>.h"; stream.c "model.h"
            shutil.copyfile(kit / f"{kit.name}.h", to / f"{kit.name}.h")

    copy_model(art_dir, d)
    sources = ["stream.c", "kws_frontend.c", "model.c"]
    if verifier is not None:  # its own folder: its model.c includes its own "model.h"
        (d / "verify").mkdir(exist_ok=True)
        copy_model(Path(verifier[0]), d / "verify")
        sources.append("verify/model.c")
    (d / "kws_verify.h").write_text(verifier[1] if verifier is not None else "/* no second stage */\n")
    frontend.emit_c(d, cfg, "kws")
    (d / "kws_detect.h").write_text(detector.header("kws"))
    (d / "kws_norm.h").write_text(norm_header or "/* no speaker normalization */\n")
    shutil.copyfile(HERE / "stream.c", d / "stream.c")
    # the keyword firmware is sized for a 256 KB part: the int8 weight arrays only, not the halfwords the DSP
    # cores could read faster (LMU_WX, docs/firmware.md), which would not leave it room
    flags = ("-DLMU_COMPACT_WEIGHTS",)
    return {rt: frontend.build_c(d, sources, rt, "stream_" + rt.replace("-", "_"), flags=flags) for rt in runtimes}


def run_stream(exe, runtime, audio, n_outputs=N_CLASSES) -> tuple:
    """Stream int16 ``audio`` through a built ``stream`` executable. Returns ``(detection lines,
    int8 outputs (frames, n_outputs), stats)``; on Cortex-M stats also has instructions per frame
    for the front end (``fe_insn``) and the model (``net_insn``), and with a verifier per verification
    (``ver_insn``). A build with a verifier: ``stats["verify"]``, the integers of its kws-verify lines
    (frame, class, score, accepted, its int8 outputs) per first-stage detection."""
    import tempfile
    import time

    from lmu_edge import toolchain

    with tempfile.TemporaryDirectory(prefix="kws-stream-") as tmp:
        tmp = Path(tmp)
        (tmp / "stream.raw").write_bytes(np.asarray(audio, "<i2").tobytes())
        t0 = time.perf_counter()
        r = frontend.run_binary(exe, runtime, tmp, ["stream.raw", "stream_out.bin"])
        wall = time.perf_counter() - t0
        y = np.frombuffer((tmp / "stream_out.bin").read_bytes(), np.int8).reshape(-1, n_outputs).copy()
    lines = [ln for ln in r.stdout.splitlines() if " s: " in ln]
    stats = frontend.parse_stats(r.stdout, "kws-stats")
    stats["wall_s"] = wall
    if runtime != "host" and stats.get("frames"):
        stats["fe_insn"] = toolchain.instructions(stats["fe_ticks"], runtime) / stats["frames"]
        stats["net_insn"] = toolchain.instructions(stats["net_ticks"], runtime) / stats["frames"]
        stats["frame_insn_max"] = toolchain.instructions(stats.get("frame_ticks_max", 0), runtime)
        if stats.get("verifications"):
            stats["ver_insn"] = toolchain.instructions(stats["ver_ticks"], runtime) / stats["verifications"]
    rows = [ln.split()[1:] for ln in r.stdout.splitlines() if ln.startswith("kws-verify:")]
    if rows:
        stats["verify"] = np.asarray(rows, np.int64)
    return lines, y, stats


def convert(out_dir, model_path=HERE / "kws_lmu.keras", calibration=HERE / "calibration_q.npy"):
    """The committed model as int8 C (no TensorFlow needed): ``lmu_edge.convert(..., target="c",
    quantize="int8", calibration=q / 128, prefix="kws")``."""
    import lmu_edge
    from lmu_edge import intsim

    calib = np.load(calibration).astype(np.float64)
    calib[0, 0, 0], calib[0, 0, 1] = -128, 127  # the input range is the whole int8 range: scale 1/128, zp 0
    calib *= FEATURE_SCALE
    out_dir = Path(out_dir)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    art = lmu_edge.convert(
        str(model_path),
        target="c",
        out_dir=out_dir,
        quantize="int8",
        calibration=calib,
        prefix="kws",
        measure=False,
        widen_db=None,  # all int8: the front end's features are int8
        accuracy_report=False,  # the example reads the artifact and its integer graph, never the accuracy report
    )
    qg = lmu_edge.load(out_dir / "quantized.lmu.npz")
    scale, zp = intsim.input_qparams(qg)
    if scale != FEATURE_SCALE or zp != 0:
        raise AssertionError(f"the model's int8 input is not the front end's int8 output: scale {scale}, zp {zp}")
    return art, qg


def python_stream(qg, audio, detector) -> tuple:
    """The integer pipeline in Python: frontend.features -> intsim.run_int -> Detector.
    Returns ``(detection lines, int8 outputs)``: what stream.c must print and write."""
    from lmu_edge import intsim

    q = frontend.features(audio, CFG).astype(np.int64)
    y = intsim.run_int(qg, q[None])[0]
    dets = detector.run(y)
    return [format_detection(f, c, s, detector.window) for f, c, s in dets], y, dets


def parse_line(line) -> tuple:
    """ "1.23 s: yes (0.91)" -> (1.23, "yes", 0.91)."""
    t, rest = line.split(" s: ")
    name, conf = rest.split(" (")
    return float(t), name, float(conf.rstrip(")"))
