"""Classify 8x8 digits (one pixel per step) with the shipped LMU as a spiking NIR graph, run in Rockpool.

    python examples/nir_digits.py                  # 100 neurons per dimension, 10 steps per pixel (the test runs this)
    python examples/nir_digits.py --limit 8        # the first 8 held-out digits only

The same split as examples/nengo_digits.py: the first 16 held-out digits calibrate the memory's radii,
the other 48 are classified by the float model and by the spiking graph (``--target nir``,
``variant="spiking"``), stepped one simulator step at a time by Rockpool's NIR importer. The memory is
held by 3200 integrate-and-fire neurons (docs/neuromorphic.md); the classifier's softmax runs on the
host (NIR has no softmax node). Needs ``pip install 'lmu-edge[nir]'``; about 1.2 s per digit on two cores.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

import lmu_edge
from lmu_edge.targets import nir as nir_target

MODELS = Path(__file__).resolve().parent / "models"
N_CALIBRATION = 16


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--neurons", type=int, default=100, help="neurons per memory dimension (even)")
    p.add_argument("--tau", type=int, default=5, help="the memory's synaptic time constant, in pixels")
    p.add_argument("--steps-per-sample", type=int, default=10, help="simulator steps per pixel")
    p.add_argument("--limit", type=int, default=None, help="classify only this many test digits")
    p.add_argument("--out", type=Path, default=None, help="where to write the artifact (default: a temp dir)")
    a = p.parse_args(argv)

    x = np.load(MODELS / "digits_test_x.npy")
    labels = np.load(MODELS / "digits_test_y.npy")
    cal, xt, yt = x[:N_CALIBRATION], x[N_CALIBRATION:], labels[N_CALIBRATION:]
    if a.limit:
        xt, yt = xt[: a.limit], yt[: a.limit]
    out = a.out or Path(tempfile.mkdtemp(prefix="nir_digits_")) / "digits_nir"
    t0 = time.time()
    art = lmu_edge.convert(
        MODELS / "digits_lmu.lmu.npz",
        target="nir",
        out_dir=out,
        calibration=cal,
        overwrite=True,
        variant="spiking",
        neurons_per_dim=a.neurons,
        tau=a.tau,
        steps_per_sample=a.steps_per_sample,
    )
    rep = json.loads((art.path / "report.json").read_text()).get("nir", {})
    print(f"artifact: {art.path} ({time.time() - t0:.0f} s, verified on the calibration digits)")
    ref = art.reference(xt)
    float_acc = float(np.mean(np.argmax(ref, -1) == yt))
    print(f"float model: accuracy {float_acc:.3f} on {len(yt)} held-out digits")
    t0 = time.time()
    y = nir_target.run(art, xt, "rockpool")
    acc = float(np.mean(np.argmax(y, -1) == yt))
    agree = float(np.mean(np.argmax(y, -1) == np.argmax(ref, -1)))
    print(
        f"spiking NIR graph in Rockpool ({a.neurons} neurons/dim, {rep.get('neurons', '?')} neurons, tau {a.tau}, "
        f"{a.steps_per_sample} steps per pixel): accuracy {acc:.3f}, agreement with float {agree:.3f} "
        f"({time.time() - t0:.0f} s)"
    )
    return {"float_accuracy": float_acc, "accuracy": acc, "agreement": agree, "n": int(len(yt))}


if __name__ == "__main__":
    main()
