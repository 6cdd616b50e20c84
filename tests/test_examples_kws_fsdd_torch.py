"""examples/kws/train_fsdd_torch.py: the FSDD models trained in PyTorch move into keras-lmu unchanged.

The shipped FSDD fold was trained by this script (on a GPU) and exported to a keras-lmu ``.keras`` file; the
evaluation, the converter and the docs' numbers all read that file. So the export must give keras-lmu the
function torch trained: same weights in the same places (input encoders, the hidden kernel over
``concat(m, x)`` with ``m`` flattened channel-major, the classifier transposed)."""

import hashlib
import os
import sys
from pathlib import Path

import numpy as np
import pytest

import lmu_edge

if os.environ.get("CI") == "true":
    import keras_lmu  # noqa: F401  (under CI a missing keras-lmu or torch is a failure, not a skip)
    import torch  # noqa: F401  (likewise)
torch = pytest.importorskip("torch", reason="torch not installed: pip install 'lmu-edge[torch]'")
pytest.importorskip("keras_lmu", reason="keras-lmu not installed: pip install 'lmu-edge[keras]'")

KWS_DIR = Path(__file__).resolve().parents[1] / "examples" / "kws"
sys.path.insert(0, str(KWS_DIR))
import fsdd  # noqa: E402  (examples/kws: importable after the sys.path line)
import fsdd_runs  # noqa: E402  (likewise)
import train_fsdd  # noqa: E402  (likewise)
import train_fsdd_torch  # noqa: E402  (likewise)


def _keras_twin(net, pool):
    m = train_fsdd.lmu_model(net.lmu.memory_d, net.lmu.order, net.lmu.hidden_units, pool)
    by_name = {w.path.split("/", 1)[1]: w for w in m.weights}
    for k, v in net.keras_weights().items():
        by_name[k].assign(v)
    return m


@pytest.mark.parametrize("pool", [True, False], ids=["pooled", "last-frame"])
def test_torch_weights_give_keras_lmu_the_same_function(pool):
    torch.manual_seed(3)
    net = train_fsdd_torch.torch_lmu(4, 8, 16, pool).eval()
    with torch.no_grad():  # non-zero biases, so a dropped or misplaced bias shows
        net.lmu.hidden_bias.uniform_(-0.5, 0.5)
        net.classifier.bias.uniform_(-0.5, 0.5)
    x = np.random.default_rng(5).uniform(-1, 1, (6, fsdd.T, fsdd.CFG.n_mels)).astype(np.float32)
    with torch.no_grad():
        want = torch.softmax(net(torch.as_tensor(x)), -1).numpy()
    got = _keras_twin(net, pool).predict(x, verbose=0)
    # float32 in both (1e-7 apart here); keras-lmu's impulse response is truncated at 1e-4 of its
    # total, which at theta 80 over 80 frames cuts nothing
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert np.array_equal(np.argmax(got, -1), np.argmax(want, -1))


def _noise_features(path, per_speaker=12):
    rng = np.random.default_rng(0)
    n = per_speaker * len(fsdd.SPEAKERS)
    np.savez(
        path,
        clean=rng.integers(-128, 128, (n, fsdd.T, fsdd.CFG.n_mels), dtype=np.int8),
        aug=rng.integers(-128, 128, (n, 4, fsdd.T, fsdd.CFG.n_mels), dtype=np.int8),
        digits=np.arange(n) % 10,
        speakers=np.repeat(fsdd.SPEAKERS, per_speaker),
    )
    return path


@pytest.mark.parametrize("recipe,seed", [("v2", 0), ("v3", 0), ("v3", 1)])
def test_train_then_to_keras_writes_a_keras_lmu_model_that_decides_as_torch(tmp_path, recipe, seed):
    # v3 trains on speaker-normalized features: the held-out clips the torch model was scored on must be
    # the ones evaluate_fsdd.normalized makes from the fold's prior (what evaluate_fsdd.py feeds the C),
    # whatever --seed (it seeds the weights and the batch order, not the order the clips are heard in)
    feats = _noise_features(tmp_path / "feat.npz")  # 12 clips per speaker: this checks plumbing, not learning
    out = tmp_path / "out"
    argv = ["train_fsdd_torch.py", "train", "--features", str(feats), "--epochs", "1", "--speakers", "theo"]
    argv += ["--recipe", recipe, "--seed", str(seed)]
    assert train_fsdd_torch.main(argv[1:] + ["--out", str(out)]) == 0
    assert np.load(out / "calib_theo.npy").dtype == np.int8
    assert train_fsdd_torch.main(["to-keras", str(out)]) == 0
    import keras

    m = keras.models.load_model(out / "lmu_theo.keras")
    z = np.load(out / "lmu_theo.npz")
    q = np.load(feats)["clean"][np.repeat(fsdd.SPEAKERS, 12) == "theo"]
    if recipe == "v3":
        import evaluate_fsdd

        prior = np.load(out / "norm_theo.npy")
        assert prior.shape == (fsdd.CFG.n_mels,)
        q = evaluate_fsdd.normalized(q, out / "norm_theo.npy", "theo")
        assert not np.array_equal(q, np.load(feats)["clean"][np.repeat(fsdd.SPEAKERS, 12) == "theo"])
    else:
        assert not (out / "norm_theo.npy").exists()
    x = q * fsdd.FEATURE_SCALE
    assert m.get_layer("lmu").get_config()["return_sequences"]  # recipes v2 and v3: the pooled head
    np.testing.assert_allclose(m.predict(x, verbose=0), z["probabilities"], atol=1e-5)


def test_a_bad_folder_or_missing_output_gets_one_line_and_a_non_zero_exit(tmp_path, capsys):
    assert train_fsdd_torch.main(["train", str(tmp_path / "nowhere")]) == 2
    assert train_fsdd_torch.main(["to-keras", str(tmp_path)]) == 2  # no results.json: train was not run
    assert train_fsdd_torch.main(["train", "--out", str(tmp_path / "o")]) == 2  # neither folder nor features
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and "not a folder" in err[0] and "results.json: no such file" in err[1]
    assert err[2] == "error: give the FSDD folder (or --features of a cached .npz)"
    assert not (tmp_path / "o").exists()


def test_baselines_are_trained_on_the_same_fold_and_reported_beside_the_lmu(tmp_path, capsys):
    # docs/kws.md's CNN column comes from --baselines gru,cnn: each model gets a row in results.json and
    # a line in the summary; an unknown name is refused before any training
    feats = _noise_features(tmp_path / "feat.npz")
    out = tmp_path / "out"
    argv = ["train", "--features", str(feats), "--epochs", "1", "--speakers", "theo", "--recipe", "v3"]
    assert train_fsdd_torch.main(argv + ["--baselines", "gru,cnn", "--out", str(out)]) == 0
    import json

    row = json.loads((out / "results.json").read_text())["theo"]
    assert sorted(row) == ["cnn", "gru", "lmu"]
    assert row["cnn"]["params"] == 24170 and row["gru"]["params"] == 19466
    summary = capsys.readouterr().out
    assert "cnn: mean" in summary and "gru: mean" in summary
    assert train_fsdd_torch.main(argv + ["--baselines", "dscnn", "--out", str(tmp_path / "other")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: --baselines dscnn: no baseline 'dscnn'; choose from gru, cnn"]
    assert not (tmp_path / "other").exists()


def test_units_sizes_the_hidden_layer_and_to_keras_builds_that_size(tmp_path):
    # docs/kws.md's 256-unit rows come from --units: the trained width must reach results.json and the
    # .keras file (to-keras building the recipe's 128 units would fail to take the weights)
    feats = _noise_features(tmp_path / "feat.npz")
    out = tmp_path / "out"
    argv = ["train", "--features", str(feats), "--epochs", "1", "--speakers", "theo", "--recipe", "v3"]
    assert train_fsdd_torch.main(argv + ["--units", "24", "--baselines", "", "--out", str(out)]) == 0
    import json

    res = json.loads((out / "results.json").read_text())
    assert res["_recipe"]["lmu"] == [32, 16, 24, True]
    assert res["theo"]["lmu"]["params"] == 32 * 32 + (32 * 16 + 32) * 24 + 24 + 24 * 10 + 10
    assert train_fsdd_torch.main(["to-keras", str(out)]) == 0
    import keras

    m = keras.models.load_model(out / "lmu_theo.keras")
    assert m.get_layer("classifier").get_weights()[0].shape == (24, 10)
    assert m.count_params() == res["theo"]["lmu"]["params"]
    for bad in ("0", "-3", "two"):  # argparse: one usage line and exit 2, before any work
        with pytest.raises(SystemExit) as e:
            train_fsdd_torch.main(argv + ["--units", bad, "--out", str(tmp_path / "bad")])
        assert e.value.code == 2
    assert not (tmp_path / "bad").exists()


def _run(folder, accs, probs, digits):
    import json

    folder.mkdir()
    res = {s: {m: {"accuracy": a} for m, a in row.items()} for s, row in accs.items()}
    (folder / "results.json").write_text(json.dumps({**res, "_recipe": {"recipe": "v3"}}))
    for s, p in probs.items():
        np.savez(folder / f"lmu_{s}.npz", probabilities=p, digits=digits)
    return str(folder)


def test_summary_gives_each_run_the_mean_of_runs_and_the_ensemble(tmp_path, capsys):
    # four clips of digits 0-3; each run right on three, wrong on a different one, so the average of
    # their probabilities is right on all four: the ensemble row must score the averaged probabilities,
    # not average the runs' accuracies (0.75)
    digits = np.arange(4)
    right = np.eye(10)[digits] * 0.6 + 0.04
    wrong = [right.copy(), right.copy()]
    wrong[0][0] = np.eye(10)[5] * 0.5 + 0.05
    wrong[1][1] = np.eye(10)[6] * 0.5 + 0.05
    runs = [
        _run(tmp_path / f"s{k}", {"george": {"lmu": 0.75, "gru": g}, "theo": {"lmu": t}}, {"george": w}, digits)
        for k, (w, g, t) in enumerate(zip(wrong, (0.5, 0.7), (0.9, 0.8), strict=True))
    ]
    assert train_fsdd_torch.main(["summary", *runs]) == 0
    rows = [r.split() for r in capsys.readouterr().out.strip().splitlines()]
    assert rows[0] == ["run", "model", "george", "theo", "mean", "worst"]  # only the speakers run
    assert rows[1][1:] == ["lmu", "0.750", "0.900", "0.825", "0.750", "(george,", "2", "folds)"]
    assert rows[2][1:] == ["gru", "0.500", "-", "0.500", "0.500", "(george,", "1", "folds)"]
    assert rows[5][4:9] == ["lmu", "0.750", "0.850", "0.800", "0.750"]
    assert rows[6][:5] == ["mean", "of", "2", "runs", "gru"] and rows[6][5] == "0.600"
    assert rows[7][:4] == ["ensemble", "of", "2", "lmu"] and rows[7][4] == "1.000"  # theo has no npz: no cell
    assert rows[7][-3:] == ["(george,", "1", "folds)"]
    other = _run(tmp_path / "other", {"george": {"lmu": 0.75}}, {"george": right}, digits[::-1])
    assert train_fsdd_torch.main(["summary", runs[0], other]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "scored different held-out clips" in err[0]
    assert train_fsdd_torch.main(["summary", str(tmp_path / "none")]) == 2
    assert "results.json: no such file" in capsys.readouterr().err
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "results.json").write_text("[1, 2")  # cut short
    assert train_fsdd_torch.main(["summary", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "results.json: not a train command's results.json" in err[0]


def test_front_end_is_causal_in_time_and_pools_over_bands_only():
    # the --front experiment must stay a streaming model: one LMU input per 10 ms frame, and what the LMU
    # gets at frame t depends on frames t-6..t only (three causal 3-frame blocks), never on later frames
    torch.manual_seed(0)
    net = train_fsdd_torch.torch_lmu(32, 16, 128, True, front=(8, 16, 32)).eval()
    assert sum(p.numel() for p in net.parameters()) == 93434  # docs/kws.md's count for 8,16,32
    convs = [m for m in net.front if isinstance(m, torch.nn.Conv2d)]
    bands = [fsdd.CFG.n_mels >> k for k in range(3)]  # each block's output bands, before its pooling
    macs = [c.out_channels * c.in_channels * 9 * b for c, b in zip(convs, bands, strict=True)]
    assert macs == [2304, 18432, 36864]  # docs/kws.md's multiply-accumulates per frame
    x = torch.as_tensor(np.random.default_rng(1).uniform(-1, 1, (1, 40, fsdd.CFG.n_mels)), dtype=torch.float32)
    with torch.no_grad():
        h = net.front(x[:, None]).permute(0, 2, 1, 3).flatten(2)
        assert h.shape == (1, 40, 32 * fsdd.CFG.n_mels // 8)
        later = x.clone()
        later[:, 20:] = 0
        h2 = net.front(later[:, None]).permute(0, 2, 1, 3).flatten(2)
        assert torch.equal(h[:, :20], h2[:, :20])  # frames 20.. changed, frames before them did not
        assert not torch.equal(h[:, 20:], h2[:, 20:])
        earlier = x.clone()
        earlier[:, 13] += 1
        h3 = net.front(earlier[:, None]).permute(0, 2, 1, 3).flatten(2)
        moved = (h3 - h).abs().amax(-1)[0] > 0
        assert moved[13:20].all() and not moved[:13].any() and not moved[20:].any()


def _train_theo(tmp_path, *flags):
    """One epoch of theo's fold on noise features with ``flags``: (argv without the flags, --out, results)."""
    import json

    feats = _noise_features(tmp_path / "feat.npz")
    out = tmp_path / "out"
    argv = ["train", "--features", str(feats), "--epochs", "1", "--speakers", "theo", "--recipe", "v3"]
    assert train_fsdd_torch.main(argv + [*flags, "--out", str(out)]) == 0
    return argv, out, json.loads((out / "results.json").read_text())


def test_front_exports_to_keras_and_lmu_edge_reads_it_as_band_convolutions(tmp_path):
    # the torch front end (NCHW, channel-major flattening) -> keras Conv2D blocks (NHWC, band-major): the
    # transposes and the LMU rows' reordering must give the same outputs, and lmu-edge must read the file
    import lmu_edge
    from lmu_edge import ir
    from lmu_edge.converters import keras_lmu

    torch.manual_seed(2)
    net = train_fsdd_torch.torch_lmu(8, 4, 16, True, front=(3, 5)).eval()
    rs = np.random.default_rng(2)
    for bn in [m for m in net.front if isinstance(m, torch.nn.BatchNorm2d)]:  # not the identity statistics
        c = bn.num_features
        bn.running_mean.copy_(torch.as_tensor(rs.standard_normal(c)))
        bn.running_var.copy_(torch.as_tensor(rs.uniform(0.5, 2.0, c)))
        bn.weight.data.copy_(torch.as_tensor(rs.uniform(0.5, 1.5, c)))
    x = rs.uniform(-1, 1, (2, fsdd.T, fsdd.CFG.n_mels)).astype(np.float32)
    with torch.no_grad():
        want = torch.softmax(net(torch.as_tensor(x)), -1).numpy()
    m = train_fsdd_torch.assign_keras(train_fsdd.lmu_model(8, 4, 16, True, front=(3, 5)), net.keras_weights())
    np.testing.assert_allclose(m.predict(x, verbose=0), want, atol=2e-5)
    m.save(tmp_path / "front.keras")
    g = keras_lmu.load(tmp_path / "front.keras")
    assert [type(lay).__name__ for lay in g.layers[:3]] == ["BandConv", "BandConv", "LMU"]
    assert [lay.out_bands for lay in g.layers[:2]] == [fsdd.CFG.n_mels // 2, fsdd.CFG.n_mels // 4]
    assert isinstance(g.layers[0], ir.BandConv) and g.layers[0].activation == "relu" and g.layers[0].pool == 2
    np.testing.assert_allclose(lmu_edge.simulate(lmu_edge.fold(g), x.astype(np.float64)), want, atol=2e-5)


def test_front_trains_records_itself_and_to_keras_writes_it(tmp_path, capsys):
    argv, out, res = _train_theo(tmp_path, "--front", "2,4", "--baselines", "")
    assert res["_recipe"]["front"] == [2, 4] and res["theo"]["lmu"]["front"] == [2, 4]
    # 2 and 4 channels leave 4 x 8 = 32 values per frame, the plain model's 32 mel bands: only the front's
    # own weights (3x3 convolutions and batch norm scale / shift) differ in the count
    front = (9 * 1 * 2 + 2 + 2 * 2) + (9 * 2 * 4 + 4 + 2 * 4)
    assert res["theo"]["lmu"]["params"] == 32 * 32 + (32 * 16 + 32) * 128 + 128 + 128 * 10 + 10 + front
    capsys.readouterr()
    assert train_fsdd_torch.main(["to-keras", str(out)]) == 0
    from lmu_edge.converters import keras_lmu

    g = keras_lmu.load(out / "lmu_theo.keras")
    assert [lay.channels_out for lay in g.layers[:2]] == [2, 4]  # the run's --front 2,4
    z = dict(np.load(out / "lmu_theo.npz"))
    del z["front1_bn/moving_variance"]  # weights saved before the front end's were kept
    np.savez(out / "lmu_theo.npz", **z)
    assert train_fsdd_torch.main(["to-keras", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "front1_bn/moving_variance" in err[0] and "retrain" in err[0]
    assert train_fsdd_torch.main(argv + ["--front", "8,8,8,8,8,8", "--out", str(tmp_path / "deep")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "use at most 5 blocks" in err[0] and not (tmp_path / "deep").exists()
    for bad in ("0", "8,,16", "eight", "8,-1"):  # argparse: one usage line and exit 2, before any work
        with pytest.raises(SystemExit) as e:
            train_fsdd_torch.main(argv + ["--front", bad, "--out", str(tmp_path / "bad")])
        assert e.value.code == 2
    assert not (tmp_path / "bad").exists()


def _record_many(path, speaker, n):
    meta = {"recipe": "v3", "seed": 0}
    for k in range(n):
        fsdd_runs.record_folds(path, meta, {f"{speaker}{k}": {"lmu": {"accuracy": k / n}}})


def test_folds_trained_side_by_side_into_one_folder_keep_each_others_rows(tmp_path, capsys):
    # a GPU sweep runs one train command per held-out speaker into one --out: read-modify-write without the
    # lock loses rows (each process writes back what it read before the other's write)
    import json
    import multiprocessing

    path = tmp_path / "results.json"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_record_many, args=(path, s, 40)) for s in fsdd.SPEAKERS]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    assert all(p.exitcode == 0 for p in procs)
    res = json.loads(path.read_text())
    assert res.pop("_recipe") == {"recipe": "v3", "seed": 0}
    assert sorted(res) == sorted(f"{s}{k}" for s in fsdd.SPEAKERS for k in range(40))
    assert not list(tmp_path.glob(".results.*.tmp"))
    # another run's settings in the same folder: one line, exit 2, and the folder's rows untouched
    feats = _noise_features(tmp_path / "feat.npz")
    argv = ["train", "--features", str(feats), "--epochs", "1", "--speakers", "theo", "--recipe", "v3"]
    before = path.read_text()
    capsys.readouterr()
    assert train_fsdd_torch.main(argv + ["--seed", "1", "--baselines", "", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {path}: holds a run with seed 0, this one has 1; give this run its own --out"]
    assert path.read_text() == before and not (tmp_path / "lmu_theo.npz").exists()


def test_band_shift_moves_whole_sequences_by_at_most_the_given_bands():
    x = np.random.default_rng(0).integers(1, 100, (400, 5, fsdd.CFG.n_mels)).astype(np.float32)
    got = train_fsdd_torch.band_shifted(x, 2, np.random.default_rng(1))
    seen = set()
    for a, b in zip(x, got, strict=True):  # each is its input moved by one s in -2..2, the bands moved in 0
        fits = [s for s in range(-2, 3) if np.array_equal(b, np.roll(a, s, 1) * _kept(s, a.shape[1]))]
        assert len(fits) == 1
        seen.add(fits[0])
    assert seen == {-2, -1, 0, 1, 2}
    again = train_fsdd_torch.band_shifted(x, 2, np.random.default_rng(1))
    assert np.array_equal(got, again)  # seeded: a run's augmentation is repeatable


def _kept(s, n):
    keep = np.ones(n, np.float32)
    if s > 0:
        keep[:s] = 0
    elif s < 0:
        keep[s:] = 0
    return keep


def test_shift_reaches_results_and_a_run_without_it_is_another_run(tmp_path, capsys):
    argv, out, res = _train_theo(tmp_path, "--shift", "2", "--baselines", "gru")
    assert res["_recipe"]["shift"] == 2 and res["theo"]["lmu"]["shift"] == 2
    assert "shift" not in res["theo"]["gru"]  # the baseline trains on the data as before
    capsys.readouterr()
    assert train_fsdd_torch.main(argv + ["--shift", "1", "--out", str(out)]) == 2
    assert "holds a run with shift 2, this one has 1" in capsys.readouterr().err
    assert train_fsdd_torch.main(argv + ["--out", str(out)]) == 2  # no --shift is shift 0: another run too
    assert "holds a run with shift 2, this one has 0" in capsys.readouterr().err
    for bad in ("5", "-1", "x"):
        with pytest.raises(SystemExit) as e:
            train_fsdd_torch.main(argv + ["--shift", bad, "--out", str(tmp_path / "bad")])
        assert e.value.code == 2


def test_cosine_schedule_falls_from_the_rate_to_zero_once_per_batch():
    opt = torch.optim.Adam(torch.nn.Linear(2, 2).parameters(), lr=2e-3)
    sched = train_fsdd_torch.lr_schedule(opt, "cosine", 10)
    rates = []
    for _ in range(10):
        rates.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert rates[0] == pytest.approx(2e-3) and rates[5] == pytest.approx(1e-3)  # half way: half the rate
    assert all(a > b for a, b in zip(rates, rates[1:], strict=False))
    assert opt.param_groups[0]["lr"] == pytest.approx(0, abs=1e-12)  # 0 after the last batch
    assert train_fsdd_torch.lr_schedule(opt, "constant", 10) is None


def test_fit_steps_the_schedule():
    # fit must step the schedule: a cosine fit that never stepped it would equal the constant one
    x = np.random.default_rng(0).standard_normal((32, 6, fsdd.CFG.n_mels)).astype(np.float32)
    y = np.arange(32) % 10
    probs = {}
    for schedule in ("constant", "cosine"):
        torch.manual_seed(0)
        net = train_fsdd_torch.torch_lmu(4, 4, 8, True)
        probs[schedule] = train_fsdd_torch.fit(net, x, y, x, 2, False, "cpu", batch=8, schedule=schedule)
    assert not np.allclose(probs["constant"], probs["cosine"])
    torch.manual_seed(0)
    net = train_fsdd_torch.torch_lmu(4, 4, 8, True)
    again = train_fsdd_torch.fit(net, x, y, x, 2, False, "cpu", batch=8, schedule="cosine")
    assert np.array_equal(again, probs["cosine"])  # seeded: the difference is the schedule's


def test_schedule_reaches_results_and_a_constant_run_is_another_run(tmp_path, capsys):
    argv, out, res = _train_theo(tmp_path, "--schedule", "cosine", "--baselines", "gru")
    assert res["_recipe"]["schedule"] == "cosine" and res["theo"]["lmu"]["schedule"] == "cosine"
    assert res["theo"]["gru"]["schedule"] == "cosine"  # the baselines train with it too
    capsys.readouterr()
    assert train_fsdd_torch.main(argv + ["--out", str(out)]) == 2
    assert "holds a run with schedule cosine, this one has constant" in capsys.readouterr().err


def test_unknown_or_untrainable_held_out_speakers_are_one_line_before_any_output(tmp_path, capsys):
    feats = _noise_features(tmp_path / "feat.npz")
    argv = ["train", "--features", str(feats), "--epochs", "1", "--recipe", "v3", "--out", str(tmp_path / "o")]
    capsys.readouterr()
    assert train_fsdd_torch.main(argv + ["--speakers", "theo,bob"]) == 2  # a typo used to train on no test clips
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no clips of 'bob'" in err[0] and "george, jackson" in err[0]
    z = dict(np.load(feats))
    one = tmp_path / "one.npz"  # a folder of one speaker (the shipped fsdd_george, say): nothing to train on
    np.savez(one, **{k: v[z["speakers"] == "george"] for k, v in z.items()})
    argv[2] = str(one)
    assert train_fsdd_torch.main(argv + ["--speakers", "george"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "error: holding george out leaves no training clips (the features hold george only); train on the whole FSDD"
    ]
    assert not (tmp_path / "o").exists()


def test_a_new_folder_is_claimed_for_one_runs_settings_before_training(tmp_path):
    # two runs with other settings starting together into one new folder: the second is refused before it
    # trains (not after, with its lmu_*.npz already beside the first run's)
    path = tmp_path / "results.json"
    assert fsdd_runs.record_folds(path, {"seed": 0}, {}) == {}
    with pytest.raises(fsdd.CommandError, match="holds a run with seed 0, this one has 1"):
        fsdd_runs.record_folds(path, {"seed": 1}, {})


def test_a_stream_model_with_a_front_end_and_a_cosine_rate_trains_exports_and_streams_in_c(tmp_path):
    # fsdd_stream.py train --front / --schedule: the weights carry the blocks, the schedule changes the
    # run (same seed and data), to-keras reads the channels from the weights, and the host C streams the
    # model (band convolutions with their frame history) as the Python integer pipeline, bit for bit, and
    # the Cortex-M4 as the host
    import shutil

    missing = [t for t in ("gcc", "arm-none-eabi-gcc", "qemu-system-arm", "flite") if shutil.which(t) is None]
    if missing:
        (pytest.fail if os.environ.get("CI") == "true" else pytest.skip)(f"{', '.join(missing)} not installed")
    import fsdd_stream

    rng = np.random.default_rng(0)
    data = tmp_path / "d.npz"
    n, frames = 8, fsdd_stream.T
    np.savez(
        data,
        q=rng.integers(-100, 20, (n, frames, fsdd.CFG.n_mels)).astype(np.int8),
        y=rng.integers(0, len(fsdd_stream.CLASSES), (n, frames)).astype(np.int8),
        w=np.ones((n, frames), np.uint8),
    )
    runs = {}
    for name, schedule in (("constant", "constant"), ("cosine", "cosine"), ("again", "cosine")):
        argv = ["train", str(data), "--front", "2,3", "--epochs", "2", "--schedule", schedule]
        assert fsdd_stream.main([*argv, "--out", str(tmp_path / name)]) == 0
        runs[name] = dict(np.load(tmp_path / name / "stream_weights.npz"))
    assert train_fsdd_torch.front_channels(runs["cosine"]) == (2, 3)
    assert all(np.array_equal(v, runs["again"][k]) for k, v in runs["cosine"].items())  # seeded, on a CPU
    assert not np.allclose(runs["cosine"]["lmu/kernel"], runs["constant"]["lmu/kernel"])  # the rate fell
    folder = tmp_path / "cosine"
    assert fsdd_stream.main(["to-keras", str(folder)]) == 0
    from lmu_edge.converters import keras_lmu

    g = keras_lmu.load(folder / "stream.keras")
    assert [getattr(lay, "channels_out", None) for lay in g.layers[:2]] == [2, 3]
    model, calib, subset = folder / "stream.keras", folder / "stream_calib.npy", KWS_DIR / "fsdd_george"
    runtimes = ("host", "cortex-m4")
    res = fsdd_stream.evaluate(subset, "george", 0.1, runtimes, work=tmp_path / "w", limit=1, model=model, calib=calib)
    qg = lmu_edge.load(tmp_path / "w" / "c" / "quantized.lmu.npz")
    assert any(type(lay).__name__ == "QBandConv" for lay in qg.layers)
    for name, (audio, _) in fsdd_stream.test_recordings(subset, "george", 0.1, limit=1).items():
        lines, y = fsdd_stream.python_stream(qg, audio)
        assert hashlib.sha256(np.asarray(y, np.int8).tobytes()).hexdigest() == res[name]["host"]["outputs_sha256"]
        assert lines == res[name]["host"]["lines"], name
        m4 = res[name]["cortex-m4"]
        assert (m4["outputs_sha256"], m4["lines"]) == (res[name]["host"]["outputs_sha256"], lines), name


def test_verify_train_steps_the_schedule_it_is_given(tmp_path):
    # verify.py train --schedule cosine reaches fit: the same seed and data with the constant rate is
    # another run, the same schedule twice the same run (on a CPU)
    import verify

    rng = np.random.default_rng(1)
    data = tmp_path / "d.npz"
    n, frames = 4, 150
    q = rng.integers(-100, 20, (n, frames, fsdd.CFG.n_mels)).astype(np.int8)
    np.savez(data, q=q, y=np.zeros((n, frames), np.int8), w=np.ones((n, frames), np.uint8), prior=np.zeros(32))
    got = {}
    for name, schedule in (("constant", "constant"), ("cosine", "cosine"), ("again", "cosine")):
        argv = ["train", str(data), "--epochs", "2", "--schedule", schedule, "--out", str(tmp_path / name)]
        assert verify.main(argv) == 0
        got[name] = np.load(tmp_path / name / "verify_weights.npz")["lmu/kernel"]
    assert np.array_equal(got["cosine"], got["again"]) and not np.allclose(got["cosine"], got["constant"])
