"""Leave-one-speaker-out training on FSDD: an LMU (keras-lmu, parallel form) and a GRU baseline.

For each of the six speakers: train both models on the other five speakers' 2,500 clips (plus one
augmented copy each: random shift, gain -12..+6 dB, white noise at -60..-25 dBFS), pick nothing
on the held-out speaker, and report its 500 clips' accuracy. Features: the 8 kHz integer front end
(``fsdd.CFG``), 80 frames of 10 ms, fed as ``q / 128``. Both models see the same arrays in the same
run. Writes ``out/kws_fsdd/results.json`` and each fold's LMU as ``out/kws_fsdd/lmu_<speaker>.keras``
(with ``calib_<speaker>.npy``, 32 training sequences of int8 features, for the int8 conversion)::

    python examples/kws/train_fsdd.py FSDD_FOLDER [--epochs 12] [--speakers george,...] [--recipe v1|v2]

``--recipe v1`` (the default here) is the first round's recipe. ``--recipe v2`` is the one docs/kws.md
reports and the shipped model's: four augmented copies per clip that are also speed-perturbed (resampled
by 0.85-1.15, so pitch and formants move as between speakers), SpecAugment-style masks redrawn every
epoch (up to 6 mel bands and 10 frames zeroed), a wider memory (memory_d 32, order 16, hidden 128) whose
hidden output at every frame is averaged (``GlobalAveragePooling1D``: in C a running mean from reset)
before the classifier, and 30 epochs, for both models. It is about 5x slower than v1 per fold (about 20
minutes on 2 cores); ``train_fsdd_torch.py`` trains the same recipe in PyTorch on a GPU in minutes and
exports keras-lmu models.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import fsdd
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
ORDER, THETA, MEMORY_D, UNITS, GRU_UNITS = 32, 80, 8, 96, 64
RECIPES = {
    # copies: augmented copies per clip; speed: resampling range (None: none); mask: SpecAugment masks;
    # lmu: memory_d, order, hidden units, pool (average the hidden output over every frame)
    "v1": {"copies": 1, "speed": None, "mask": False, "lmu": (MEMORY_D, ORDER, UNITS, False), "epochs": 12},
    "v2": {"copies": 4, "speed": (0.85, 1.15), "mask": True, "lmu": (32, 16, 128, True), "epochs": 30},
    # v3: v2's models and augmentation on speaker-normalized features (fsdd.SpeakerNorm), sized for a CPU
    # (two augmented copies, 15 epochs: about 15 minutes for the six folds and both models on 2 cores with
    # train_fsdd_torch.py; keras-lmu here is about 10x slower). draw:
    # the copies are drawn as for v2's four (the random draws per clip depend on the count) and two are used
    "v3": {
        "copies": 2,
        "draw": 4,
        "speed": (0.85, 1.15),
        "mask": True,
        "lmu": (32, 16, 128, True),
        "epochs": 15,
        "norm": True,
    },
}


def front_layers(front) -> list:
    """The keras layers of a convolutional front end (``train_fsdd_torch.py --front``, channels per block):
    frames -> (bands, 1), per block ZeroPadding2D two frames before (causal) and one band each side, a 3x3
    Conv2D, BatchNormalization (PyTorch's epsilon), ReLU and MaxPooling2D over pairs of bands, then one
    vector per frame again (band-major: ``band * channels + channel``). lmu-edge reads each block as a band
    convolution."""
    import keras

    L = keras.layers
    if not front:
        return []
    bands, cin = fsdd.CFG.n_mels, 1
    out = [L.Reshape((-1, bands, 1), name="front_grid")]
    for i, c in enumerate(front):
        out += [
            L.ZeroPadding2D(((2, 0), (1, 1)), name=f"front{i}_pad"),
            L.Conv2D(c, 3, name=f"front{i}_conv"),
            L.BatchNormalization(epsilon=1e-5, name=f"front{i}_bn"),
            L.ReLU(name=f"front{i}_relu"),
            L.MaxPooling2D((1, 2), name=f"front{i}_pool"),
        ]
        cin, bands = c, bands // 2
    return out + [L.Reshape((-1, cin * bands), name="front_flat")]


def lmu_model(
    memory_d=MEMORY_D, order=ORDER, units=UNITS, pool=False, every_frame=False, steps=fsdd.T, classes=10, front=()
):
    """LMUFeedforward in parallel form over 0.8 s (theta 80 frames) with a Dense(units, relu) hidden cell;
    the last frame's hidden output (or, with ``pool``, its mean over every frame; with ``every_frame``,
    each frame's) -> ``classes`` (the digits; fsdd_stream.py's per-frame model adds silence and "not a
    digit"). ``front``: a convolutional front end before the LMU (:func:`front_layers`)."""
    import keras
    import keras_lmu

    head = [keras.layers.GlobalAveragePooling1D(name="pool")] if pool else []
    return keras.Sequential(
        [
            keras.Input((steps, fsdd.CFG.n_mels)),
            *front_layers(front),
            keras_lmu.LMUFeedforward(
                memory_d=memory_d,
                order=order,
                theta=THETA,
                input_to_hidden=True,
                hidden_cell=keras.layers.Dense(units, activation="relu", name="hidden"),
                return_sequences=pool or every_frame,
                name="lmu",
            ),
            *head,
            keras.layers.Dropout(0.3, name="dropout"),
            keras.layers.Dense(classes, activation="softmax", name="classifier"),
        ],
        name="kws_fsdd_stream" if every_frame else "kws_fsdd_lmu",
    )


def gru_model():
    """Baseline: one GRU(64) over the same features, last state -> 10 digits."""
    import keras

    return keras.Sequential(
        [
            keras.Input((fsdd.T, fsdd.CFG.n_mels)),
            keras.layers.GRU(GRU_UNITS, name="gru"),
            keras.layers.Dropout(0.3),
            keras.layers.Dense(10, activation="softmax"),
        ],
        name="kws_fsdd_gru",
    )


def resample(x, factor):
    """``x`` played ``factor`` times faster (linear interpolation): speed perturbation."""
    n = int(round(len(x) / factor))
    return np.interp(np.arange(n) * factor, np.arange(len(x)), np.asarray(x, np.float64))


def features(folder, copies=2, seed=0, speed=None):
    """Clean features of every clip and ``copies`` augmented ones (speed-perturbed by a factor drawn
    from the range ``speed`` when given); labels and speakers."""
    items = fsdd.index(folder)
    rng = np.random.default_rng(seed)
    clean, aug, digits, spk = [], [], [], []
    for p, d, s, _ in items:
        x = fsdd.read_wav(p)
        clean.append(fsdd.clip_features(x))
        aug.append([fsdd.clip_features(resample(x, rng.uniform(*speed)) if speed else x, rng) for _ in range(copies)])
        digits.append(d)
        spk.append(s)
    return np.asarray(clean), np.asarray(aug), np.asarray(digits), np.asarray(spk)


def normalize_fold(clean, aug, spk, train, seed=0):
    """Speaker-normalized copies of ``clean`` (N x T x F) and ``aug`` (N x copies x T x F) for a fold whose
    training clips are ``train`` (a mask), and the prior (the training clips' speech mean, Q8).

    Each speaker's clips are heard in a seeded random order through one :class:`fsdd.SpeakerNorm` starting
    at the prior; a clip (and its augmented copies) is normalized by the running mean as it stood before
    the clip, as on a device that has listened to the speaker's earlier words. The held-out speaker is
    treated the same way (nothing of his is used before it is heard)."""
    prior = fsdd.speech_mean(clean[train])
    clean, aug = np.array(clean, np.int64), np.array(aug, np.int64)
    for i, s in enumerate(fsdd.SPEAKERS):
        sel = np.flatnonzero(spk == s)
        if len(sel):
            order = np.random.default_rng(seed + 10 + i).permutation(len(sel))
            clean[sel], mus = fsdd.SpeakerNorm(prior).clips(clean[sel], order)
            aug[sel] = fsdd.SpeakerNorm.apply(aug[sel], mus[:, None, None, :])
    return clean, aug, prior


def masked(x, rng):
    """SpecAugment-style: per sequence, up to 6 consecutive mel bands and up to 10 frames set to 0."""
    x = x.copy()
    n_mels = x.shape[2]
    for i in range(len(x)):
        f0, t0 = rng.integers(0, n_mels - 6), rng.integers(0, x.shape[1] - 10)
        x[i, :, f0 : f0 + rng.integers(0, 7)] = 0
        x[i, t0 : t0 + rng.integers(0, 11), :] = 0
    return x


def n_params(m):
    return int(sum(np.prod(w.shape) for w in m.weights))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", help="FSDD folder (with recordings/)")
    ap.add_argument("--recipe", choices=sorted(RECIPES), default="v1", help="training recipe (see above)")
    ap.add_argument("--epochs", type=int, help="epochs (default: the recipe's, 12 for v1, 30 for v2, 15 for v3)")
    ap.add_argument("--speakers", default=",".join(fsdd.SPEAKERS), help="held-out speakers to run")
    ap.add_argument("--out", default=str(ROOT / "out" / "kws_fsdd"))
    a = ap.parse_args()
    import keras

    rec = RECIPES[a.recipe]
    epochs = a.epochs or rec["epochs"]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    clean0, aug0, y, spk = features(a.folder, copies=rec.get("draw", rec["copies"]), speed=rec["speed"])
    aug0 = aug0[:, : rec["copies"]]
    print(f"features of {len(y)} clips in {time.time() - t0:.0f} s", flush=True)
    res_path = out / "results.json"
    results = json.loads(res_path.read_text()) if res_path.exists() else {}
    for held in a.speakers.split(","):
        tr = spk != held
        if rec.get("norm"):
            clean, aug, prior = normalize_fold(clean0, aug0, spk, tr)
            np.save(out / f"norm_{held}.npy", prior)
        else:
            clean, aug = clean0, aug0
        xtr = np.concatenate([clean[tr]] + [aug[tr][:, k] for k in range(rec["copies"])]) * fsdd.FEATURE_SCALE
        ytr = np.concatenate([y[tr]] * (1 + rec["copies"]))
        xte, yte = clean[~tr] * fsdd.FEATURE_SCALE, y[~tr]
        row = {}
        for name, make in (("lmu", lambda: lmu_model(*rec["lmu"])), ("gru", gru_model)):
            keras.utils.set_random_seed(0)
            m = make()
            m.compile(
                optimizer=keras.optimizers.Adam(2e-3), loss="sparse_categorical_crossentropy", metrics=["accuracy"]
            )
            t1 = time.time()
            if rec["mask"]:  # fresh masks every epoch
                rng = np.random.default_rng(1)
                for _ in range(epochs):
                    m.fit(masked(xtr, rng), ytr, epochs=1, batch_size=64, verbose=0, shuffle=True)
            else:
                m.fit(xtr, ytr, epochs=epochs, batch_size=64, verbose=0, shuffle=True)
            acc = float(np.mean(np.argmax(m.predict(xte, verbose=0), -1) == yte))
            row[name] = {
                "accuracy": acc,
                "params": n_params(m),
                "train_s": round(time.time() - t1),
                "recipe": a.recipe,
                "epochs": epochs,
            }
            print(f"{held}: {name} accuracy {acc:.3f} ({n_params(m)} params, {time.time() - t1:.0f} s)", flush=True)
            if name == "lmu":
                m.save(out / f"lmu_{held}.keras")
                pick = np.random.default_rng(2).permutation(int(tr.sum()))[:32]
                np.save(out / f"calib_{held}.npy", clean[tr][pick].astype(np.int8))
        results[held] = row
        res_path.write_text(json.dumps(results, indent=1))
    done = [results[s] for s in fsdd.SPEAKERS if s in results]
    for name in ("lmu", "gru"):
        accs = [r[name]["accuracy"] for r in done]
        print(f"{name}: mean {np.mean(accs):.3f} over {len(accs)} folds, worst {min(accs):.3f}")


if __name__ == "__main__":
    main()
