"""Streaming spoken-digit detection on real speech (FSDD) through the C front end and int8 LMU, host and M4.

A held-out speaker's digits and non-digit audio are streamed sample by sample through the 8 kHz C front
end, the int8 LMU and the detection rule, on the host and on Cortex-M4 under QEMU.

The model answers at every 10 ms frame: silence, "not a digit", or one of the ten digits, for the audio
of the last 0.8 s (theta 80 frames). The detection rule is the synthetic example's (``kws.Detector``:
posteriors summed over 8 frames, threshold, 0.8 s refractory period), in integers, in C and Python.

Test recordings, all from the held-out speaker or from synthesizers the model never heard:

* **digits**: every clip of the speaker, in seeded background noise, 0.9 to 2 s apart;
* **real-voice negatives**: the speaker's clips reversed, or cut and spliced (the second half of one clip
  followed by the first half of another), 0.9 to 2 s apart: real voice, no digit;
* **synthetic negatives**: flite words that are no digit (the synthetic example's 24 words less "zero"
  and "seven": 22 words, 5 voices, 3 speeds; resampled to 8 kHz), 0.9 to 2 s apart.

A detection counts as correct when its frame ends within -0.3..+0.7 s of the end of a not yet matched
digit of the same class; every detection in a negative recording is a false alarm. Commands::

    python examples/kws/fsdd_stream.py data FSDD_FOLDER --speaker george --out DATA.npz   # training set
    python examples/kws/fsdd_stream.py train DATA.npz --front 8,16,32 --schedule cosine --device cuda \
        --out DIR                                                                         # torch, weights
    python examples/kws/fsdd_stream.py to-keras DIR                                       # keras-lmu file
    python examples/kws/fsdd_stream.py evaluate FSDD_FOLDER [--speaker george] [--minutes 30]
                                       [--runtime host cortex-m4]

``data`` builds the fold's training sequences from the other five speakers' clips (digits, their reversed
and spliced versions) and espeak-ng words (needs espeak-ng); ``train`` needs torch only, so it runs on a
GPU machine; ``evaluate`` converts the model to int8 C, builds the streaming C (``stream.c``) and prints
precision, recall and false alarms per hour, with real-voice and synthetic negatives apart.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import evaluate_fsdd
import fsdd
import kws
import train_fsdd
import train_fsdd_torch
import verify
from stream_data import (  # noqa: F401  (the training data, in its own file; tests and scripts read fsdd_stream.X)
    CALIB,
    CLASSES,
    DIGITS,
    FLITE_EXTRA,
    MEMORY_D,
    MODEL,
    ORDER,
    THETA,
    THRESHOLDS,
    UNITS,
    T,
    build_data,
    flite_sequences,
    flite_words,
    frame_end,
    frame_labels,
    ms,
    no_digits,
    noisy,
    not_digits,
    peak_normalized,
    sequence,
    to8k,
)

from lmu_edge.audio import frontend

HERE = Path(__file__).resolve().parent
SR, CFG = fsdd.SR, fsdd.CFG

# --- training (torch) and export --------------------------------------------------------------------


def torch_net(front=()):
    """[convolutional front end, causal in time] -> LMU (parallel, every frame) -> dropout -> Linear(12) at
    every frame; ``front`` as ``train_fsdd_torch.py --front``."""
    return train_fsdd_torch.torch_lmu(
        MEMORY_D, ORDER, UNITS, False, every_frame=True, classes=len(CLASSES), front=front
    )


def keras_model(front=()):
    """The keras-lmu twin of :func:`torch_net` (what the converter reads)."""
    return train_fsdd.lmu_model(MEMORY_D, ORDER, UNITS, every_frame=True, steps=T, classes=len(CLASSES), front=front)


def cmd_train(a):
    try:
        z = np.load(a.data)
        q, y, w = z["q"], z["y"], z["w"]
    except (OSError, ValueError, KeyError, AttributeError) as e:  # missing, not a numpy file, another .npz
        raise fsdd.CommandError(f"{a.data}: not the .npz of fsdd_stream.py data ({e})") from None
    import torch

    dev = a.device
    torch.manual_seed(a.seed)
    net = torch_net(a.front).to(dev)
    opt = torch.optim.Adam(net.parameters(), lr=2e-3, eps=1e-7)
    batches = max(1, len(q) // 64)
    sched = train_fsdd_torch.lr_schedule(opt, a.schedule, a.epochs * batches)
    rng, order = np.random.default_rng(1), np.random.default_rng(a.seed)
    X = torch.as_tensor(q.astype(np.float32) * fsdd.FEATURE_SCALE, device=dev)
    Y = torch.as_tensor(y.astype(np.int64), device=dev)
    W = torch.as_tensor(w.astype(np.float32), device=dev)
    t0 = time.time()
    for ep in range(a.epochs):
        xe = torch.as_tensor(train_fsdd.masked(q, rng).astype(np.float32) * fsdd.FEATURE_SCALE, device=dev)
        net.train()
        total = 0.0
        for idx in np.array_split(order.permutation(len(q)), batches):
            i = torch.as_tensor(idx, device=dev)
            out = net(xe[i])
            loss = (torch.nn.functional.cross_entropy(out.transpose(1, 2), Y[i], reduction="none") * W[i]).sum()
            loss = loss / W[i].sum().clamp(min=1)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if sched is not None:
                sched.step()
            total += loss.item()
        print(f"epoch {ep + 1}: loss {total / batches:.4f} ({time.time() - t0:.0f} s)", flush=True)
    net.eval()
    with torch.no_grad():
        prob = torch.softmax(net(X[:64]), -1).cpu().numpy()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    np.savez(out / "stream_weights.npz", probabilities=prob, x=q[:64], **net.keras_weights())
    pick = np.random.default_rng(2).permutation(len(q))[:32]
    np.save(out / "stream_calib.npy", q[pick].astype(np.int8))
    if "prior" in z:  # trained on speaker-normalized features: the normalizer's prior goes with the model
        np.save(out / "stream_norm.npy", z["prior"])
    print(f"wrote {out / 'stream_weights.npz'}")


def cmd_to_keras(a):
    train_fsdd_torch.export_keras(a.dir, "stream", keras_model)


# --- the test recordings and scoring ----------------------------------------------------------------


def recording(parts, rng, seconds=None, gap=(0.9, 2.0)):
    """int16 audio with ``parts`` (audio, class) at random gaps in seeded noise, repeated until
    ``seconds`` when given; events (start, end, class)."""
    level = 10 ** rng.uniform(np.log10(5), np.log10(60))
    total = int(seconds * SR) if seconds else sum(len(p) + int(gap[1] * SR) for p, _ in parts) + SR
    x = rng.normal(0, level, total)
    events, t, k = [], int(rng.uniform(*gap) * SR), 0
    while k < len(parts) * (1000 if seconds else 1):
        w, cls = parts[k % len(parts)]
        k += 1
        if t + len(w) + SR // 2 > total:
            break
        x[t : t + len(w)] += np.asarray(w, np.float64) * 10 ** (rng.uniform(-6, 6) / 20)
        events.append((t, t + len(w), cls))
        t += len(w) + int(rng.uniform(*gap) * SR)
    n = t if not seconds else total
    return np.clip(np.round(x[:n]), -32768, 32767).astype(np.int16), events


def test_recordings(folder, speaker, minutes=30.0, seed=7, limit=None):
    """``{"digits": (audio, events), "real_negatives": ..., "synthetic_negatives": ...}``."""
    rng = np.random.default_rng(seed)
    clips = [
        (fsdd.read_wav(p), d) for p, d, s, k in fsdd.index(folder) if s == speaker and (limit is None or k < limit)
    ]
    if not clips:
        raise fsdd.AudioFormatError(f"{folder}: no recordings of speaker {speaker!r}")
    digits = [clips[i] for i in rng.permutation(len(clips))]
    real = not_digits(clips, rng)
    real = [real[i] for i in rng.permutation(len(real))]
    words, names = kws.test_words()[0], kws.test_word_names()
    # a permutation of all 24 words, then the digits dropped: the other recordings stay as they were
    order = rng.permutation(len(words))
    order = no_digits(order, [names[i] for i in order])
    synth = [peak_normalized(to8k(words[i]), np.abs(words[i]).max()) for i in order]
    return {
        "digits": recording([(c, 2 + d) for c, d in digits], rng),
        "real_negatives": recording([(c, 1) for c in real], rng, minutes * 60),
        "synthetic_negatives": recording([(c, 1) for c in synth], rng, minutes * 60),
    }


def score(detections, events, n_samples, tol_before=0.3, tol_after=0.7) -> dict:
    """``kws.score`` at 8 kHz (precision / recall against the digit events, classes >= 2) and false
    alarms per hour of audio."""
    precision, recall, correct, _, n_digits = kws.score(detections, events, tol_before, tol_after, SR, frame_end)
    hours = n_samples / SR / 3600
    return {
        "detections": len(detections),
        "correct": correct,
        "digits": n_digits,
        "precision": precision,
        "recall": recall,
        "false_alarms": len(detections) - correct,
        "false_alarms_per_hour": (len(detections) - correct) / hours,
        "minutes": n_samples / SR / 60,
    }


def detector():
    return kws.Detector(names=CLASSES)


def convert(out_dir, model=MODEL, calib=CALIB):
    """int8 C of the streaming model, as ``evaluate_fsdd.convert`` makes the clip model's (its int8 input is
    the front end's int8 output, scale 1/128); the quantized graph."""
    import lmu_edge

    evaluate_fsdd.convert(model, calib, out_dir)
    return lmu_edge.load(Path(out_dir) / "quantized.lmu.npz")


def format_detection(frame, cls, S, window=8) -> str:
    """The line stream.c prints for a detection (time of the frame's end in ms, confidence in %)."""
    end = int(frame_end(frame))
    t = end // SR * 1000 + end % SR * 1000 // SR
    return f"{t // 1000}.{(t % 1000) // 10:02d} s: {CLASSES[cls]} (0.{S * 100 // (256 * window):02d})"


def features(audio) -> np.ndarray:
    """The front end's int8 features of ``audio`` (int16 samples), ``(frames, n_mels)`` as int64."""
    return frontend.features(np.asarray(audio, np.int64), CFG).astype(np.int64)


def python_stream(qg, audio, norm=None, q=None) -> tuple:
    """The integer pipeline in Python (front end, [speaker normalization from the prior ``norm``],
    ``intsim.run_int``, detector): what stream.c must print and write. Returns ``(detection lines, int8
    outputs)``. ``q``: ``features(audio)`` where the caller has them (``verify.python_rows`` reads them too)."""
    from lmu_edge import intsim

    q = features(audio) if q is None else q
    if norm is not None:
        q = fsdd.SpeakerNorm(norm).frames(q)
    y = intsim.run_int(qg, q[None])[0]
    det = detector()
    return [format_detection(f, c, S, det.window) for f, c, S in det.run(y)], y


def prior_for(model):
    """The speaker normalizer's prior that goes with a streaming model (``stream_norm*.npy`` beside
    ``stream*.keras``), or None for a model trained on plain features."""
    p = Path(model)
    p = p.with_name(p.stem.replace("stream", "stream_norm", 1) + ".npy")
    return np.load(p) if p.is_file() else None


def evaluate(
    folder,
    speaker="george",
    minutes=30.0,
    runtimes=("host",),
    work=None,
    limit=None,
    model=MODEL,
    calib=CALIB,
    verifier=None,
    trigger=verify.TRIGGER,
    delay=verify.DELAY,
):
    """Run the three recordings through the C on each runtime; results per recording and runtime. A model
    with a prior beside it (:func:`prior_for`) streams through the speaker normalizer, from the prior at
    the start of each recording. With a ``verifier`` (``verify.py``): the two stages in stream.c, detections
    at the ``trigger`` threshold checked ``delay`` frames later by the verifier's int8 C in the same program
    (``res["verified"]``: scores of the detections it printed, the SHA-256 of the verifier's outputs; over
    :data:`verify.THRESHOLDS` from the first runtime's outputs: ``res["verified_sweep"]``, and under
    ``verify.relabel``'s rule: ``res["relabel_sweep"]``); the per-runtime
    ``lines`` are then its two-stage detection lines, the single-stage scores still those of the streaming
    model's outputs at 0.5."""
    import tempfile

    if verifier is not None:
        verify.check(verifier)  # before any work, as a bad folder below
    recs = test_recordings(folder, speaker, minutes, limit=limit)  # a bad folder fails before any work
    work = Path(work or tempfile.mkdtemp(prefix="fsdd_stream_"))
    stages = None
    if verifier is not None:
        vqg, vprior = verify.load(verifier, work / "verifier_c")
        stages = (work / "verifier_c", verify.header(vqg, vprior, verify.THRESHOLDS[0], delay))
    convert(work / "c", model, calib)
    det = detector()
    first = det if verifier is None else kws.Detector(threshold=trigger * 256 * det.window, names=CLASSES)
    prior = prior_for(model)
    hdr = None if prior is None else fsdd.norm_header(prior)
    exes = kws.build_stream(work / "c", work / "build", first, runtimes, cfg=CFG, norm_header=hdr, verifier=stages)
    res, sweep = {}, {}
    for name, (audio, events) in recs.items():
        res[name] = {}
        for rt in runtimes:  # minutes of work per recording on QEMU: say what runs
            print(f"streaming {name} ({len(audio) / SR / 60:.1f} min of audio) on {rt}", file=sys.stderr, flush=True)
            lines, y, stats = kws.run_stream(exes[rt], rt, audio, len(CLASSES))
            rows = stats.pop("verify", [])
            r = score(det.run(y), events, len(audio))
            r["lines"] = lines
            r["outputs_sha256"] = hashlib.sha256(y.tobytes()).hexdigest()
            r["stats"] = {k: v for k, v in stats.items() if k != "wall_s"}
            res[name][rt] = r
            if verifier is not None:  # what the C decided and printed; the first runtime's rows through each tau
                decided, *swept = verify.scores(vqg, rows, lambda d, a=audio, e=events: score(d, e, len(a)))
                res.setdefault("verified", {}).setdefault(name, {})[rt] = {**decided, "lines": lines}
                if rt == runtimes[0]:
                    for key, by_tau in zip(("verified_sweep", "relabel_sweep"), swept, strict=True):
                        for tau, at in by_tau.items():
                            res.setdefault(key, {}).setdefault(tau, {})[name] = at
            if rt == runtimes[0]:  # the same int8 outputs through other thresholds (operating points)
                for th in THRESHOLDS:
                    d = kws.Detector(threshold=th * 256 * det.window, names=CLASSES)
                    sweep.setdefault(f"{th:.2f}", {})[name] = score(d.run(y), events, len(audio))
    res["threshold_sweep"] = sweep
    return res


def summary(r) -> str:
    return (
        f"detections {r['detections']:4d}  precision {r['precision']:.3f}  recall {r['recall']:.3f}  "
        f"false alarms {r['false_alarms']} ({r['false_alarms_per_hour']:.1f} per hour)"
    )


def print_sweep(what, sweep):
    """One line per operating point ``what`` of ``evaluate``'s results on the first runtime."""
    print(f"{what:>9s}  precision  recall  false alarms per hour (real-voice / synthetic negatives), first runtime")
    for k, r in sorted(sweep.items(), key=lambda kv: float(kv[0])):
        d, fa = r["digits"], [r[n]["false_alarms_per_hour"] for n in ("real_negatives", "synthetic_negatives")]
        print(f"{k:>9s}  {d['precision']:9.3f}  {d['recall']:6.3f}  {fa[0]:.1f} / {fa[1]:.1f}")


def cmd_evaluate(a):
    for opt in ("trigger", "delay"):
        if getattr(a, opt) is not None and a.verifier is None:
            raise fsdd.CommandError(f"--{opt} sets the second stage: give --verifier too")
    a.trigger = verify.TRIGGER if a.trigger is None else a.trigger
    a.delay = verify.DELAY if a.delay is None else a.delay
    most = min(detector().refractory, verify.WINDOW)
    if a.delay >= most:
        raise fsdd.CommandError(
            f"--delay {a.delay}: give fewer frames than the detector's refractory period and the verifier's "
            f"window ({most})"
        )
    if not 0 < a.trigger <= 1:
        raise fsdd.CommandError(f"--trigger {a.trigger}: give a mean posterior in (0, 1]")
    args = (a.speaker, a.minutes, tuple(a.runtime), a.work, a.limit, a.model, a.calib, a.verifier, a.trigger, a.delay)
    res = evaluate(a.folder, *args)
    for name, per in res.items():
        if name in ("threshold_sweep", "verified", "verified_sweep", "relabel_sweep"):
            continue
        for rt, r in per.items():
            print(f"{name:20s} {rt:9s} {r['minutes']:6.1f} min  digits {r['digits']:4d}  {summary(r)}")
        same = len({(r["outputs_sha256"], tuple(r["lines"])) for r in per.values()}) == 1
        print(f"{name:20s} model outputs and detections identical on {', '.join(per)}: {same}")
    print_sweep("threshold", res["threshold_sweep"])
    if "verified" in res:
        print(f"two stages: trigger {a.trigger}, the verifier {a.delay} frames later: its digit's probability >= tau")
        for name, per in res["verified"].items():
            print(f"{name:20s} tau {verify.THRESHOLDS[0]}  {summary(per[a.runtime[0]])}")
            same = len({(r["rows_sha256"], tuple(r["lines"])) for r in per.values()}) == 1
            print(f"{name:20s} two-stage detections and verifier outputs identical on {', '.join(per)}: {same}")
        print_sweep("tau", res["verified_sweep"])
        print("the same detections if the verifier named the digit (its top digit, probability >= tau; not adopted):")
        print_sweep("tau", res["relabel_sweep"])
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="steps: data -> train -> to-keras -> evaluate (evaluate alone runs the shipped model); "
        "FSDD: github.com/Jakobovski/free-spoken-digit-dataset (the shipped subset: examples/kws/fsdd_george)",
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("data", help="the fold's training sequences (features, targets, weights) as .npz")
    d.add_argument("folder", help="FSDD folder (with its recordings/ of WAV files)")
    d.add_argument("--speaker", default="george", help="held-out speaker (left out of training)")
    d.add_argument("--out", required=True, help="the .npz to write")
    d.add_argument("--drop", default="", help="speakers also left out of training (development splits)")
    d.add_argument("--cuts", action="store_true", help="add each clip's first or last 40%% as 'not a digit'")
    d.add_argument("--norm", action="store_true", help="speaker-normalized features (fsdd.SpeakerNorm)")
    d.add_argument(
        "--more-negatives",
        type=fsdd.count,
        default=0,
        metavar="N",
        help="also N espeak-ng renditions of each word of negative_words.txt (315 words, 20 accents and "
        "languages, 27 voice variants) as 'not a digit' (default 0: none)",
    )
    d.add_argument(
        "--festival-negatives",
        type=fsdd.count,
        default=0,
        metavar="N",
        help="also N Festival renditions of each word of negative_words.txt (11 voices from human "
        "recordings; needs festival and its festvox voices) as 'not a digit' (default 0: none)",
    )
    d.add_argument(
        "--flite-words",
        action="store_true",
        help="an experiment: also 33 words that are no test word in flite's voices (the synthetic "
        "negatives' voices) as 'not a digit' (needs flite)",
    )
    t = sub.add_parser("train", help="train the per-frame LMU in torch")
    t.add_argument("data", help="the .npz of the data step")
    t.add_argument("--epochs", type=int, default=30, help="training epochs (the shipped model: 30)")
    t.add_argument("--seed", type=int, default=0, help="torch and numpy seed (default 0, the shipped model's)")
    t.add_argument(
        "--front",
        type=train_fsdd_torch.channels,
        default=(),
        help="a convolutional front end before the LMU, channels per block (e.g. 8,16,32; causal in time, "
        "as train_fsdd_torch.py's; to-keras reads it from the weights); default none; the shipped model: 8,16,32",
    )
    t.add_argument(
        "--schedule",
        choices=train_fsdd_torch.SCHEDULES,
        default="constant",
        help="learning rate: 2e-3 throughout (constant) or falling to 0 along a half cosine over the run's "
        "batches (cosine, the shipped model's; as train_fsdd_torch.py's)",
    )
    t.add_argument("--device", default="cpu", help="torch device, e.g. cuda (default cpu)")
    t.add_argument("--out", default=str(kws.ROOT / "out" / "kws_fsdd_stream"), help="folder for the weights")
    k = sub.add_parser("to-keras", help="write the trained weights as a keras-lmu model (stream.keras)")
    k.add_argument("dir", help="the train step's --out folder")
    e = sub.add_parser("evaluate", help="stream the held-out speaker's recordings through the int8 C")
    e.add_argument("folder", help="FSDD folder (or the shipped subset examples/kws/fsdd_george)")
    e.add_argument("--speaker", default="george", help="held-out speaker whose digits are streamed (default george)")
    e.add_argument("--minutes", type=float, default=30.0, help="length of each negative recording (default 30)")
    e.add_argument("--limit", type=int, default=None, help="only recordings 0..LIMIT-1 of each digit")
    e.add_argument(
        "--runtime",
        nargs="+",
        default=["host", "cortex-m4"],
        choices=["host", "cortex-m4", "cortex-m0"],
        help="where the int8 C runs (default: host cortex-m4; the detections must be the same on each)",
    )
    e.add_argument("--model", default=str(MODEL), help="the streaming model (.keras; default: the shipped one)")
    e.add_argument("--calib", default=str(CALIB), help="its int8 calibration sequences (.npy)")
    e.add_argument(
        "--verifier",
        default=None,
        help="also check each detection with this verify.py model (.keras; its verify_norm / verify_calib .npy "
        f"beside it; the shipped one: {MODEL.parent.name}/{verify.MODEL.name})",
    )
    e.add_argument(
        "--trigger", type=float, help=f"with --verifier: the streaming model's threshold (default {verify.TRIGGER})"
    )
    e.add_argument(
        "--delay", type=fsdd.count, help=f"with --verifier: frames it waits after a detection (default {verify.DELAY})"
    )
    e.add_argument("--work", default=None, help="keep the C build here")
    e.add_argument("--json", default=None, help="also write every result (per recording and runtime) here")
    a = ap.parse_args(argv)

    def run():
        if a.cmd == "data":
            t0 = time.time()
            q, y, w, prior = build_data(
                a.folder,
                a.speaker,
                drop=[d for d in a.drop.split(",") if d],
                cuts=a.cuts,
                norm=a.norm,
                more_espeak=a.more_negatives,
                more_festival=a.festival_negatives,
                flite=a.flite_words,
            )
            extra = {} if prior is None else {"prior": prior}
            np.savez_compressed(a.out, q=q, y=y.astype(np.int8), w=w.astype(np.uint8), **extra)  # weights are 0 / 1
            print(f"{len(q)} sequences in {time.time() - t0:.0f} s -> {a.out}")
            return 0
        return {"train": cmd_train, "to-keras": cmd_to_keras, "evaluate": cmd_evaluate}[a.cmd](a)

    return fsdd.one_line_errors(run, a.cmd, "give the output of the previous step")


if __name__ == "__main__":
    sys.exit(main())
