"""The run folders of ``train_fsdd_torch.py train``: each holds one run (one recipe, seed and budget) as
``results.json`` (a row per held-out speaker, the run's settings under ``_recipe``) beside each fold's
``lmu_<speaker>.npz``. :func:`record_folds` merges folds trained side by side into one folder under a lock;
:func:`summary` compares runs and scores their ensemble."""

import json
import os
from pathlib import Path

import fsdd
import numpy as np


def read_results(path) -> dict:
    """A train command's ``results.json``; anything else is a :class:`fsdd.CommandError` naming the file."""
    try:
        res = json.loads(Path(path).read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise fsdd.CommandError(f"{path}: not a train command's results.json ({e})") from None
    if not isinstance(res, dict):
        raise fsdd.CommandError(f"{path}: not a train command's results.json (no object at its top)")
    return res


def record_folds(path, meta, rows) -> dict:
    """Merge ``rows`` (held-out speaker -> row) into the run's ``results.json`` under an exclusive lock and
    replace the file whole, so train commands running folds side by side into one ``--out`` keep each
    other's rows; returns the merged rows (with no ``rows`` it only checks, or claims a new folder). Refuses
    (:class:`fsdd.CommandError`) a file whose ``_recipe`` differs from ``meta`` in a setting both name: one
    folder holds one run."""
    import fcntl

    path = Path(path)
    lock = os.open(path.parent, os.O_RDONLY)  # the folder itself is the lock: no lock file left behind
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        results = read_results(path) if path.exists() else {}
        old = results.pop("_recipe", {})
        differ = sorted(k for k in meta if k in old and old[k] != meta[k])
        if differ:
            k = differ[0]
            raise fsdd.CommandError(
                f"{path}: holds a run with {k} {old[k]}, this one has {meta[k]}; give this run its own --out"
            )
        if not rows and path.exists():  # only the check (a new folder is claimed for this run's settings)
            return results
        results.update(rows)
        tmp = path.with_name(f".results.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({**results, "_recipe": {**old, **meta}}, indent=1))
        os.replace(tmp, path)
    finally:
        os.close(lock)
    return results


def summary(dirs, models=("lmu",)):
    """Print, per run (a train command's --out folder), each of ``models``' accuracy per held-out speaker,
    mean and worst; over several runs (seeds, say), the mean of the runs and the LMUs' ensemble (their
    probabilities averaged per clip). A folder without a readable results.json is a
    :class:`fsdd.CommandError`."""
    runs = {}
    for d in map(Path, dirs):
        res = read_results(d / "results.json")
        res.pop("_recipe", None)
        runs[str(d)] = res
    speakers = [s for s in fsdd.SPEAKERS if any(s in r for r in runs.values())]
    width = max(8, *map(len, runs))
    print(f"{'run':{width}s} model " + " ".join(f"{s:>8s}" for s in speakers) + "     mean    worst")

    def line(label, model, got):
        cells = " ".join(f"{got[s]:8.3f}" if s in got else f"{'-':>8s}" for s in speakers)
        worst = min(got, key=got.get)
        mean = np.mean(list(got.values()))
        print(f"{label:{width}s} {model:5s} {cells} {mean:8.3f} {got[worst]:.3f} ({worst}, {len(got)} folds)")

    models = [m for m in models if any(m in row for r in runs.values() for row in r.values())]
    for name, r in runs.items():
        for m in models:
            if any(m in row for row in r.values()):
                line(name, m, {s: r[s][m]["accuracy"] for s in speakers if m in r.get(s, {})})
    if len(runs) < 2:
        return
    for m in models:  # folds every run has: a mean over runs of different folds would mix speakers
        both = [s for s in speakers if all(m in r.get(s, {}) for r in runs.values())]
        if both:
            line(
                f"mean of {len(runs)} runs", m, {s: np.mean([r[s][m]["accuracy"] for r in runs.values()]) for s in both}
            )
    ens = {}
    for s in speakers:
        files = [Path(d) / f"lmu_{s}.npz" for d in runs]
        if not all(f.is_file() for f in files):
            continue
        zs = [np.load(f) for f in files]
        if any(not np.array_equal(z["digits"], zs[0]["digits"]) for z in zs):
            raise fsdd.CommandError(
                f"lmu_{s}.npz: the runs scored different held-out clips; compare runs of one dataset"
            )
        prob = np.mean([z["probabilities"] for z in zs], 0)
        ens[s] = float(np.mean(np.argmax(prob, -1) == zs[0]["digits"]))
    if ens:
        line(f"ensemble of {len(runs)}", "lmu", ens)
