"""Evaluate FSDD spoken-digit models on held-out speakers: float reference vs int8 C, one command.

For each held-out speaker with a trained model (``lmu_<speaker>.keras`` + ``calib_<speaker>.npy``
in ``--models``, written by ``train_fsdd.py``; the repository ships george's), the model is
converted with ``lmu_edge.convert(..., target="c", quantize="int8")`` and run on that speaker's
clips, featurised by the 8 kHz integer front end (and speaker-normalized when the fold's prior
``norm_<speaker>.npy`` sits beside its model, recipe v3): accuracy of the float64 reference of the keras
model and of the int8 C build (host gcc, or Cortex-M4 under QEMU with ``--runtime cortex-m4``).
Prints one line per speaker and the mean and worst, and writes ``--json``::

    python examples/kws/evaluate_fsdd.py FSDD_FOLDER [--models DIR] [--runtime host|cortex-m4]
"""

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fsdd

HERE = Path(__file__).resolve().parent


def convert(model, calib_path, out_dir, prefix="kws"):
    """int8 C artifact of a trained fold (C symbols ``prefix``_...); the int8 input is the front end's int8
    output (scale 1/128)."""
    import lmu_edge
    from lmu_edge import intsim

    calib = np.load(calib_path).astype(np.float64)
    calib[0, 0, 0], calib[0, 0, 1] = -128, 127  # the whole int8 range: input scale 1/128, zero point 0
    art = lmu_edge.convert(
        str(model),
        target="c",
        out_dir=out_dir,
        quantize="int8",
        calibration=calib * fsdd.FEATURE_SCALE,
        prefix=prefix,
        measure=False,
        overwrite=True,
        # all int8: the front end hands the model int8 features, and these numbers are int8's (the C
        # target's default widening would give the stream model 16-bit layers: 15.6 dB in int8)
        widen_db=None,
        accuracy_report=False,  # the examples read the artifact and its integer graph, never the accuracy report
    )
    scale, zp = intsim.input_qparams(lmu_edge.load(Path(out_dir) / "quantized.lmu.npz"))
    if scale != fsdd.FEATURE_SCALE or zp != 0:
        raise AssertionError(f"int8 input scale {scale}, zero point {zp}: not the front end's int8 output")
    return art


def held_out(folder, speaker, limit=None):
    """int8 features and digits of ``speaker``'s clips (the first ``limit`` takes of each digit)."""
    items = [(p, d) for p, d, s, k in fsdd.index(folder) if s == speaker and (limit is None or k < limit)]
    if not items:
        raise fsdd.AudioFormatError(f"{folder}: no recordings of speaker {speaker!r}")
    q = np.asarray([fsdd.clip_features(fsdd.read_wav(p)) for p, _ in items])
    return q, np.asarray([d for _, d in items])


def normalized(q, prior, speaker):
    """The clips ``q`` through :class:`fsdd.SpeakerNorm` from ``prior``, heard in a seeded order (for all 500
    of a speaker's clips the order ``train_fsdd.normalize_fold`` uses; for a subset, a permutation of the
    subset): each clip normalized by the running mean as it stood before the clip."""
    order = np.random.default_rng(10 + fsdd.SPEAKERS.index(speaker)).permutation(len(q))
    return fsdd.SpeakerNorm(np.load(prior)).clips(q, order)[0]


def evaluate(folder, model, calib, speaker, runtime="host", limit=None, work=None):
    """{'float': accuracy, 'int8': accuracy, 'agree': fraction of equal decisions, 'n': clips}; a model with a
    ``norm_<speaker>.npy`` beside it (recipe v3) sees speaker-normalized features."""
    q, y = held_out(folder, speaker, limit)
    prior = Path(model).parent / f"norm_{speaker}.npy"
    if prior.is_file():
        q = normalized(q, prior, speaker)
    x = q.astype(np.float64) * fsdd.FEATURE_SCALE
    tmp = Path(work or tempfile.mkdtemp(prefix="kws_fsdd_"))
    try:
        art = convert(model, calib, tmp / f"c_{speaker}")
        pf = np.argmax(np.asarray(art.reference(x)).reshape(len(x), -1, 10)[:, -1], -1)
        pq = np.argmax(np.asarray(art.run(x, runtime)).reshape(len(x), -1, 10)[:, -1], -1)
    finally:
        if work is None:
            shutil.rmtree(tmp, ignore_errors=True)
    return {
        "float": float(np.mean(pf == y)),
        "int8": float(np.mean(pq == y)),
        "agree": float(np.mean(pf == pq)),
        "n": int(len(y)),
        "int8_predictions": pq.tolist(),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", help="FSDD folder (with recordings/), or the shipped subset examples/kws/fsdd_george")
    ap.add_argument(
        "--models",
        default=str(HERE / "fsdd_model"),
        help="folder with lmu_<speaker>.keras files (and norm_<speaker>.npy for v3 folds)",
    )
    ap.add_argument("--runtime", default="host", choices=["host", "cortex-m4"], help="where the int8 C runs")
    ap.add_argument(
        "--limit",
        type=int,
        default=None,
        help="only takes 0..LIMIT-1 of each digit (a quick look: with speaker normalization the subset is "
        "heard in its own order, so its scores are not those of the same clips within a full run)",
    )
    ap.add_argument("--json", default=None, help="write the results here")
    a = ap.parse_args(argv)
    try:
        models = Path(a.models)
        rows = {}
        for s in fsdd.SPEAKERS:
            if not (models / f"lmu_{s}.keras").is_file():
                continue
            if not any(sp == s for _, _, sp, _ in fsdd.index(a.folder)):
                continue
            r = evaluate(a.folder, models / f"lmu_{s}.keras", models / f"calib_{s}.npy", s, a.runtime, a.limit)
            rows[s] = r
            print(
                f"{s:9s} float {r['float']:.3f}  int8 C ({a.runtime}) {r['int8']:.3f}  "
                f"agree {r['agree']:.3f}  ({r['n']} clips)",
                flush=True,
            )
        if not rows:
            raise fsdd.AudioFormatError(f"{models}: no lmu_<speaker>.keras for a speaker in {a.folder}")
        for k in ("float", "int8"):
            v = [r[k] for r in rows.values()]
            print(
                f"{k}: mean {np.mean(v):.3f} over {len(v)} held-out speakers, worst {min(v):.3f} "
                f"({min(rows, key=lambda s: rows[s][k])})"
            )
        if a.json:
            Path(a.json).write_text(json.dumps(rows, indent=1))
    except fsdd.AudioFormatError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
