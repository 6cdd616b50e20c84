"""Leave-one-speaker-out FSDD training in PyTorch (CPU or GPU): the ``train_fsdd.py`` models, exported to keras-lmu.

``train_fsdd.py --recipe v2`` takes about 2.6 hours for the six folds on two CPU cores. This script trains
the same models with the same data and recipe in PyTorch - the LMU as :class:`lmu_edge.torch.LMU` in
parallel form (the FFT convolution with its impulse response, as keras-lmu's ``LMUFeedforward`` runs it),
the GRU baseline as ``torch.nn.GRU`` - in a few minutes on a GPU, then moves each fold's LMU weights into
the keras-lmu model of ``train_fsdd.lmu_model`` (same shapes, same names; the layers compute the same
function) so ``evaluate_fsdd.py`` and the converter read a ``.keras`` file as usual::

    python examples/kws/train_fsdd_torch.py train FSDD_FOLDER [--device cuda] [--speakers george,...]
    python examples/kws/train_fsdd_torch.py to-keras out/kws_fsdd_torch    # needs keras-lmu
    python examples/kws/train_fsdd_torch.py summary out/run_s0 out/run_s1 ...   # runs side by side

``train`` writes ``lmu_<speaker>.npz`` (the weights under their keras names and the held-out clips'
probabilities), ``calib_<speaker>.npy`` and ``results.json``; it needs torch and numpy only (not
TensorFlow). ``to-keras`` writes ``lmu_<speaker>.keras`` and checks that keras-lmu's predictions on the
held-out clips give the same digit as the torch model's for at least 99% of them (float32 FFT
convolutions in two frameworks, and keras-lmu's impulse response is truncated at 1e-4, so a clip whose
two best digits are nearly tied may flip). ``--features`` caches the features (``.npz``) so a GPU
machine needs neither the WAV files nor the front end's time. ``--baselines gru,cnn`` trains a small 2-D
CNN over the whole clip (:func:`torch_cnn`) beside the GRU on the same data (docs/kws.md reports both).
``--units`` widens the LMU's hidden layer; ``--front 8,16,32`` trains it behind a convolutional front end
(an experiment, see :func:`torch_lmu`); ``--shift N`` moves its training sequences by up to N mel bands
(:func:`band_shifted`); ``--schedule cosine`` lowers the learning rate to 0 along a half cosine over the
run (:func:`lr_schedule`). ``summary`` reads several runs' folders (one per seed, say): each
run's accuracy per held-out speaker, the mean of the runs, and the LMUs' ensemble (probabilities averaged).
Folds of one run may train side by side into one ``--out`` (one command per ``--speakers``, on a GPU): each
merges its rows into results.json under a lock; a folder holding a run with other settings is refused.
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fsdd
import fsdd_runs
import train_fsdd

ROOT = Path(__file__).resolve().parents[2]


def load_features(folder, cache, rec, seed=0):
    """``train_fsdd.features`` for the recipe, read from / written to the ``cache`` .npz when given."""
    if cache and Path(cache).exists():
        z = np.load(cache)
        if z["aug"].shape[1] < rec["copies"]:
            raise fsdd.CommandError(f"{cache}: {z['aug'].shape[1]} augmented copies, the recipe needs {rec['copies']}")
        return z["clean"], z["aug"], z["digits"], z["speakers"]
    if folder is None:
        raise fsdd.CommandError("give the FSDD folder (or --features of a cached .npz)")
    out = train_fsdd.features(folder, copies=rec.get("draw", rec["copies"]), seed=seed, speed=rec["speed"])
    if cache:
        np.savez_compressed(cache, clean=out[0], aug=out[1], digits=out[2], speakers=out[3])
    return out


KERAS_NAMES = ("lmu/kernel", "lmu/hidden/kernel", "lmu/hidden/bias", "classifier/kernel", "classifier/bias")


def torch_lmu(memory_d, order, units, pool, dropout=0.3, every_frame=False, classes=10, front=()):
    """``train_fsdd.lmu_model`` in PyTorch: LMU(parallel) -> [mean over frames] -> dropout -> Linear(classes)
    (at every frame with ``every_frame``). ``front`` (channels per block, say ``(8, 16, 32)``) puts a
    convolutional front end before the LMU: per block a 3x3 convolution over (frames x mel bands), causal in
    time (it sees this frame and the two before), batch norm, relu and max pooling over pairs of mel bands
    only, so the LMU still gets one vector per 10 ms frame (channels x remaining bands). ``to-keras`` writes
    it with keras's Conv2D blocks (``train_fsdd.front_layers``), which lmu-edge reads as band convolutions."""
    from torch import nn

    from lmu_edge.torch import LMU

    bands = fsdd.CFG.n_mels
    blocks, cin = [], 1
    for c in front:
        if bands < 2:
            raise fsdd.CommandError(
                f"--front {','.join(map(str, front))}: {len(front)} blocks halve the "
                f"{fsdd.CFG.n_mels} mel bands below one; use at most "
                f"{fsdd.CFG.n_mels.bit_length() - 1} blocks"
            )
        # pad two frames before (causal in time) and one band each side (same in frequency)
        blocks += [nn.ZeroPad2d((1, 1, 2, 0)), nn.Conv2d(cin, c, 3), nn.BatchNorm2d(c), nn.ReLU()]
        blocks += [nn.MaxPool2d((1, 2))]
        cin, bands = c, bands // 2

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.front = nn.Sequential(*blocks) if blocks else None
            self.lmu = LMU(
                cin * bands,
                memory_d,
                order,
                train_fsdd.THETA,
                hidden_units=units,
                hidden_activation="relu",
                input_to_hidden=True,
                return_sequences=pool or every_frame,
            )
            self.drop = nn.Dropout(dropout)
            self.classifier = nn.Linear(units, classes)
            nn.init.xavier_uniform_(self.classifier.weight)
            nn.init.zeros_(self.classifier.bias)

        def forward(self, x):
            if self.front is not None:  # (batch, frames, bands) -> (batch, frames, channels x bands / 2^blocks)
                x = self.front(x[:, None]).permute(0, 2, 1, 3).flatten(2)
            h = self.lmu(x)
            return self.classifier(self.drop(h.mean(1) if pool else h))

        def keras_weights(self):
            """The weights under the names of ``train_fsdd.lmu_model``'s keras weights (``KERAS_NAMES``, and
            with a front end ``front<i>_conv/...``, ``front<i>_bn/...``). Keras flattens the front end's
            output band-major (``band * channels + c``), PyTorch here channel-major (``c * bands + band``):
            the LMU's rows for its input are reordered to match."""

            def t(p):
                return p.detach().cpu().numpy().astype(np.float32)

            enc, hid = t(self.lmu.input_encoders), t(self.lmu.hidden_kernel)
            out = {}
            if self.front is not None:
                perm = np.arange(cin * bands).reshape(cin, bands).T.ravel()  # keras row k <- torch row perm[k]
                n_mem = hid.shape[0] - enc.shape[0]  # input_to_hidden: rows [memory, input]
                enc, hid = enc[perm], np.concatenate([hid[:n_mem], hid[n_mem:][perm]])
                convs = [m for m in self.front if isinstance(m, nn.Conv2d)]
                norms = [m for m in self.front if isinstance(m, nn.BatchNorm2d)]
                for i, (cv, bn) in enumerate(zip(convs, norms, strict=True)):
                    out[f"front{i}_conv/kernel"] = t(cv.weight).transpose(2, 3, 1, 0).copy()  # (t, band, in, out)
                    out[f"front{i}_conv/bias"] = t(cv.bias)
                    out[f"front{i}_bn/gamma"], out[f"front{i}_bn/beta"] = t(bn.weight), t(bn.bias)
                    out[f"front{i}_bn/moving_mean"] = t(bn.running_mean)
                    out[f"front{i}_bn/moving_variance"] = t(bn.running_var)
            return {
                "lmu/kernel": enc,
                "lmu/hidden/kernel": hid,
                "lmu/hidden/bias": t(self.lmu.hidden_bias),
                "classifier/kernel": t(self.classifier.weight).T.copy(),
                "classifier/bias": t(self.classifier.bias),
                **out,
            }

    return Net()


def assign_keras(model, weights):
    """Put ``weights`` (``Net.keras_weights()``, or an .npz of them) into the keras model of
    ``train_fsdd.lmu_model``; returns the model."""
    by_name = {w.path.split("/", 1)[1]: w for w in model.weights}
    front = sorted(k for k in by_name if k.startswith("front"))
    missing = [k for k in front if k not in weights]
    if missing:
        raise fsdd.CommandError(
            f"the weights have no {missing[0]}: they were saved before the front end's weights were kept; retrain"
        )
    for k in (*KERAS_NAMES, *front):
        by_name[k].assign(weights[k])
    return model


def torch_gru(units=train_fsdd.GRU_UNITS):
    """The GRU(64) baseline: last state -> dropout -> Linear(10)."""
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.gru = nn.GRU(fsdd.CFG.n_mels, units, batch_first=True)
            for k in range(3):  # keras' GRU initializers: glorot-uniform input, orthogonal recurrent, zero bias
                nn.init.xavier_uniform_(self.gru.weight_ih_l0[k * units : (k + 1) * units])
                nn.init.orthogonal_(self.gru.weight_hh_l0[k * units : (k + 1) * units])
            nn.init.zeros_(self.gru.bias_ih_l0)
            nn.init.zeros_(self.gru.bias_hh_l0)
            self.drop = nn.Dropout(0.3)
            self.classifier = nn.Linear(units, 10)

        def forward(self, x):
            return self.classifier(self.drop(self.gru(x)[0][:, -1]))

    return Net()


def torch_cnn(channels=(16, 32, 64)):
    """A second baseline, a small 2-D CNN over the (frames x mel bands) image: three blocks of 3x3
    convolution, batch norm, relu and 2x2 max pooling, the last block's map averaged -> dropout ->
    Linear(10) (24,170 parameters). It sees a whole clip at once, as the keyword-spotting CNNs of the
    literature do (the MLPerf Tiny DS-CNN), so it is not a streaming model; it is here to judge the
    LMU's accuracy against a different kind of model on the same folds."""
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            layers, cin = [], 1
            for c in channels:
                layers += [nn.Conv2d(cin, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU(), nn.MaxPool2d(2)]
                cin = c
            self.features = nn.Sequential(*layers)
            self.drop = nn.Dropout(0.3)
            self.classifier = nn.Linear(cin, 10)

        def forward(self, x):
            return self.classifier(self.drop(self.features(x[:, None]).mean((2, 3))))

    return Net()


#: the models ``train`` can fit on each fold (the LMU always; --baselines picks the others)
BASELINES = {"gru": torch_gru, "cnn": torch_cnn}


def front_channels(weights) -> tuple:
    """The ``--front`` channels of saved weights (``Net.keras_weights()``): each block's conv filters."""
    out, i = [], 0
    while f"front{i}_conv/kernel" in weights:
        out.append(int(weights[f"front{i}_conv/kernel"].shape[-1]))
        i += 1
    return tuple(out)


def export_keras(folder, stem, model, inputs="training sequences") -> Path:
    """``<stem>_weights.npz`` of ``folder`` (``Net.keras_weights()``, the probabilities torch gave and the int8
    ``x`` they came from) put into the keras model ``model`` (or ``model(front)``, ``front`` the weights'
    :func:`front_channels`) and saved as ``<stem>.keras``, once keras-lmu gives torch's probabilities within
    1e-3 (else a one-line error naming the ``inputs``)."""
    folder = Path(folder)
    z = np.load(folder / f"{stem}_weights.npz")
    m = assign_keras(model(front_channels(z)) if callable(model) else model, z)
    got = m.predict(z["x"].astype(np.float32) * fsdd.FEATURE_SCALE, verbose=0)
    err = float(np.abs(got - z["probabilities"]).max())
    if err > 1e-3:
        raise fsdd.CommandError(f"keras-lmu and torch differ by {err:.2g} on the {inputs}")
    m.save(folder / f"{stem}.keras")
    print(f"wrote {folder / f'{stem}.keras'} (keras-lmu within {err:.1e} of torch)")
    return folder / f"{stem}.keras"


def band_shifted(x, most, rng):
    """Each sequence of ``x`` (sequences x frames x mel bands) moved by a random whole number of mel bands
    in ``-most..most`` (bands moved past an edge are dropped, the ones moved in are 0): one band is about
    8-14% in frequency over 0.5-2 kHz, so this stands in for speakers' different vocal tract lengths
    (VTLP-style augmentation) without a layer the converter lacks."""
    out = np.zeros_like(x)
    shifts = rng.integers(-most, most + 1, len(x))
    for s in range(-most, most + 1):
        i = shifts == s
        if s >= 0:
            out[i, :, s:] = x[i, :, : x.shape[2] - s]
        else:
            out[i, :, :s] = x[i, :, -s:]
    return out


#: the learning-rate schedules of :func:`lr_schedule` (the trainers' ``--schedule`` choices)
SCHEDULES = ("constant", "cosine")


def lr_schedule(opt, schedule, steps):
    """The learning-rate schedule :func:`fit` steps once per batch: None for "constant", for "cosine" the
    optimizer's rate falling to 0 along a half cosine over ``steps`` batches."""
    import torch

    if schedule == "constant":
        return None
    if schedule == "cosine":
        return torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    raise ValueError(f"no learning-rate schedule {schedule!r}")


def fit(net, xtr, ytr, xte, epochs, mask, device, seed=0, lr=2e-3, batch=64, shift=0, schedule="constant"):
    """Adam, cross-entropy, fresh SpecAugment masks every epoch when ``mask`` (and mel bands moved by up to
    ``shift``, :func:`band_shifted`), the rate from ``lr`` as :func:`lr_schedule` says; the held-out
    probabilities."""
    import torch

    torch.manual_seed(seed)
    net.to(device)
    opt = torch.optim.Adam(net.parameters(), lr=lr, eps=1e-7)  # keras' Adam defaults
    sched = lr_schedule(opt, schedule, epochs * max(1, len(xtr) // batch))
    rng, order_rng, shift_rng = np.random.default_rng(1), np.random.default_rng(seed), np.random.default_rng(3)
    yt = torch.as_tensor(ytr, device=device)
    for _ in range(epochs):
        xe = train_fsdd.masked(xtr, rng) if mask else xtr
        xe = band_shifted(xe, shift, shift_rng) if shift else xe
        xe = torch.as_tensor(xe, dtype=torch.float32, device=device)
        net.train()
        for idx in np.array_split(order_rng.permutation(len(xe)), max(1, len(xe) // batch)):
            i = torch.as_tensor(idx, device=device)
            loss = torch.nn.functional.cross_entropy(net(xe[i]), yt[i])
            opt.zero_grad()
            loss.backward()
            opt.step()
            if sched is not None:
                sched.step()
    net.eval()
    with torch.no_grad():
        xt = torch.as_tensor(xte, dtype=torch.float32, device=device)
        return torch.softmax(net(xt), -1).cpu().numpy()


def cmd_train(a):
    import torch

    baselines = [b for b in a.baselines.split(",") if b]
    unknown = [b for b in baselines if b not in BASELINES]
    if unknown:
        raise fsdd.CommandError(
            f"--baselines {a.baselines}: no baseline {unknown[0]!r}; choose from {', '.join(BASELINES)}"
        )
    rec = dict(train_fsdd.RECIPES[a.recipe])
    rec["copies"] = min(a.copies or rec["copies"], rec.get("draw", rec["copies"]))
    epochs = a.epochs or rec["epochs"]
    md, q, units, pool = rec["lmu"]
    units = a.units or units
    torch_lmu(md, q, units, pool, front=a.front)  # a --front too deep for the bands fails before any output
    t0 = time.time()
    clean0, aug0, y, spk = load_features(a.folder, a.features, rec)  # a bad folder fails before any output
    drop = set(a.drop.split(",")) if a.drop else set()
    for held in a.speakers.split(","):  # before any output
        if held not in set(spk):
            raise fsdd.CommandError(
                f"--speakers {a.speakers}: no clips of {held!r} (the features hold {', '.join(sorted(set(spk)))})"
            )
        if not np.any((spk != held) & ~np.isin(spk, list(drop))):
            raise fsdd.CommandError(
                f"holding {held} out leaves no training clips (the features hold {', '.join(sorted(set(spk)))} "
                "only); train on the whole FSDD"
            )
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    aug0 = aug0[:, : rec["copies"]]
    print(f"features of {len(y)} clips ({time.time() - t0:.0f} s), device {a.device}", flush=True)
    meta = {"recipe": a.recipe, "dropped": sorted(drop), "lmu": [md, q, units, pool]}
    meta.update(seed=a.seed, epochs=epochs, copies=rec["copies"], front=list(a.front), shift=a.shift)
    meta["schedule"] = a.schedule  # a folder from before --schedule takes either
    res_path = out / "results.json"
    results = fsdd_runs.record_folds(res_path, meta, {})  # a folder holding another run's results fails before training
    for held in a.speakers.split(","):
        tr = (spk != held) & ~np.isin(spk, list(drop))
        if rec.get("norm"):  # speaker normalization: the prior from this fold's training clips
            # the order each speaker is heard in is seed 0's whatever --seed is: evaluate_fsdd.normalized
            # (evaluation, to-keras) hears the held-out speaker in that order
            clean, aug, prior = train_fsdd.normalize_fold(clean0, aug0, spk, tr)
            np.save(out / f"norm_{held}.npy", prior)
        else:
            clean, aug = clean0, aug0
        xtr = np.concatenate([clean[tr]] + [aug[tr][:, k] for k in range(rec["copies"])]) * fsdd.FEATURE_SCALE
        ytr = np.concatenate([y[tr]] * (1 + rec["copies"]))
        xte, yte = clean[spk == held] * fsdd.FEATURE_SCALE, y[spk == held]
        row = {}
        for name in ("lmu", *baselines):
            torch.manual_seed(a.seed)
            net = torch_lmu(md, q, units, pool, front=a.front) if name == "lmu" else BASELINES[name]()
            t1 = time.time()
            shift = a.shift if name == "lmu" else 0
            prob = fit(
                net,
                xtr.astype(np.float32),
                ytr,
                xte,
                epochs,
                rec["mask"],
                a.device,
                a.seed,
                shift=shift,
                schedule=a.schedule,
            )
            acc = float(np.mean(np.argmax(prob, -1) == yte))
            n = int(sum(p.numel() for p in net.parameters()))
            row[name] = {"accuracy": acc, "params": n, "train_s": round(time.time() - t1), "recipe": a.recipe}
            row[name].update(epochs=epochs, seed=a.seed, framework="torch", device=str(a.device))
            if name == "lmu" and a.front:
                row[name]["front"] = list(a.front)
            if shift:
                row[name]["shift"] = shift
            if a.schedule != "constant":
                row[name]["schedule"] = a.schedule
            print(f"{held}: {name} accuracy {acc:.3f} ({n} params, {time.time() - t1:.0f} s)", flush=True)
            if name == "lmu":
                np.savez(out / f"lmu_{held}.npz", probabilities=prob, digits=yte, **net.keras_weights())
                pick = np.random.default_rng(2).permutation(int(tr.sum()))[:32]
                np.save(out / f"calib_{held}.npy", clean[tr][pick].astype(np.int8))
        results = fsdd_runs.record_folds(res_path, meta, {held: row})
    done = [results[s] for s in fsdd.SPEAKERS if s in results]
    for name in ("lmu", *baselines):
        accs = [r[name]["accuracy"] for r in done if name in r]
        print(f"{name}: mean {np.mean(accs):.3f} over {len(accs)} folds, worst {min(accs):.3f}")


def cmd_to_keras(a):
    folder = Path(a.dir)
    meta = fsdd_runs.read_results(folder / "results.json").get("_recipe", {})
    md, q, units, pool = meta.get("lmu") or train_fsdd.RECIPES[meta.get("recipe", "v2")]["lmu"]
    for npz in sorted(folder.glob("lmu_*.npz")):
        z = np.load(npz)
        m = assign_keras(train_fsdd.lmu_model(md, q, units, pool, front=tuple(meta.get("front") or ())), z)
        held = npz.stem.split("_", 1)[1]
        if a.folder:
            items = [p for p, d, s, k in fsdd.index(a.folder) if s == held]
            feats = np.asarray([fsdd.clip_features(fsdd.read_wav(p)) for p in items])
            prior = folder / f"norm_{held}.npy"
            if prior.is_file():  # recipe v3: the features the model was trained on
                import evaluate_fsdd

                feats = evaluate_fsdd.normalized(feats, prior, held)
            x = feats * fsdd.FEATURE_SCALE
            agree = float(np.mean(np.argmax(m.predict(x, verbose=0), -1) == np.argmax(z["probabilities"], -1)))
            print(f"{held}: keras-lmu and torch give the same digit for {agree:.3f} of {len(x)} clips")
            if agree < 0.99:
                raise fsdd.CommandError(f"{npz}: keras-lmu disagrees with torch on {1 - agree:.3f} of the clips")
        m.save(folder / f"lmu_{held}.keras")
        print(f"wrote {folder / f'lmu_{held}.keras'}")


def cmd_summary(a):
    """Per run (a train command's --out folder): :func:`fsdd_runs.summary` over the LMU and the baselines."""
    fsdd_runs.summary(a.dirs, ("lmu", *BASELINES))


def positive(text) -> int:
    """argparse type: a whole number >= 1 (0 would silently mean "the recipe's")."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number >= 1")
    return n


def channels(text) -> tuple:
    """argparse type: comma-separated whole numbers >= 1 (``--front 8,16,32``)."""
    try:
        out = tuple(int(c) for c in text.split(","))
    except ValueError:
        out = (0,)
    if not out or min(out) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give channels per block, e.g. 8,16,32")
    return out


def main(argv=None):
    Help = argparse.RawDescriptionHelpFormatter
    ap = argparse.ArgumentParser(description=__doc__.split("``train`` writes")[0], formatter_class=Help)
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser(
        "train", formatter_class=Help, help="train the LMU and its baselines on each held-out speaker's fold (torch)"
    )
    t.add_argument("folder", nargs="?", help="FSDD folder (with recordings/); not needed with a cached --features")
    t.add_argument(
        "--recipe",
        choices=sorted(train_fsdd.RECIPES),
        default="v2",
        help="v3: speaker-normalized features (fsdd.SpeakerNorm), two augmented copies, 15 epochs (about 15 "
        "minutes for six folds on 2 CPU cores; the shipped model's); v2: plain features, four copies, 30 epochs; "
        "v1: the first (one copy, no masks, last-frame readout); default v2",
    )
    t.add_argument("--epochs", type=positive, help="epochs (default: the recipe's)")
    t.add_argument(
        "--copies", type=positive, help="augmented copies per clip (default: the recipe's; at most the copies it draws)"
    )
    t.add_argument("--units", type=positive, help="the LMU's hidden units (default: the recipe's, 128 for v2 and v3)")
    t.add_argument(
        "--speakers",
        default=",".join(fsdd.SPEAKERS),
        help="held-out speakers to run, comma-separated (default: all six)",
    )
    t.add_argument("--drop", default="", help="speakers left out of training too (development splits)")
    t.add_argument("--features", help="cache of the features (.npz): read if it exists, else written")
    t.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the initial weights and the batch order, not of the data (default 0)",
    )
    t.add_argument(
        "--baselines",
        default="gru",
        help="comma-separated non-LMU models trained on the same data in the same run: gru (GRU(64), "
        "the default), cnn (a 2-D CNN over the whole clip); empty for the LMU alone",
    )
    t.add_argument(
        "--front",
        type=channels,
        default=(),
        help="experiment: a convolutional front end before the LMU, channels per block (e.g. 8,16,32): 3x3 "
        "convolutions causal in time, batch norm, relu, pooling over mel bands only (to-keras writes it as Conv2D "
        "blocks lmu-edge converts)",
    )
    t.add_argument(
        "--shift",
        type=int,
        default=0,
        choices=range(0, 5),
        metavar="{0..4}",
        help="augmentation: move each LMU training sequence by up to this many mel bands each epoch (default 0)",
    )
    t.add_argument(
        "--schedule",
        choices=SCHEDULES,
        default="constant",
        help="learning rate: 2e-3 throughout (constant, the default) or falling to 0 along a half cosine "
        "over the run (cosine; the shipped fold's, with --front 8,16,32 --epochs 25)",
    )
    t.add_argument("--device", default="cpu", help="torch device: cpu (the default) or cuda")
    t.add_argument(
        "--out",
        default=str(ROOT / "out" / "kws_fsdd_torch"),
        help="run folder (default: out/kws_fsdd_torch in the repository)",
    )
    k = sub.add_parser("to-keras", help="write each fold's LMU as a keras-lmu .keras file")
    k.add_argument("dir", help="the train command's --out folder")
    k.add_argument("--folder", help="FSDD folder: check keras-lmu's decisions against torch's on the held-out clips")
    m = sub.add_parser(
        "summary",
        help="accuracy per held-out speaker, mean and worst of each train run; over several runs (seeds) "
        "the mean of the runs and the LMUs' ensemble (their probabilities averaged)",
    )
    m.add_argument("dirs", nargs="+", help="train command --out folders, one per run")
    a = ap.parse_args(argv)
    run = {"train": cmd_train, "to-keras": cmd_to_keras, "summary": cmd_summary}[a.cmd]
    return fsdd.one_line_errors(lambda: run(a), a.cmd, "give the train command's --out folder")


if __name__ == "__main__":
    sys.exit(main())
