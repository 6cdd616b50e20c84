"""Classify 8x8 digits (one pixel per step) with the shipped LMU as a spiking Nengo network.

    python examples/nengo_digits.py                      # spiking-relu, 100 neurons per dimension
    python examples/nengo_digits.py --neurons 25 50 100  # accuracy as a function of neurons per dimension
    python examples/nengo_digits.py --runtime loihi-emulator --neurons 30 --limit 16
        (numpy < 2 only; slow, and only 0.31 accurate: docs/neuromorphic.md)

The first 16 held-out digits calibrate the ensembles' radii; the other 48 are
classified by the float model and by the spiking network, which is also
compared with the float model (RMSE of the softmax output, agreement of the
predicted class). Needs ``pip install 'lmu-edge[nengo]'``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

import lmu_edge
from lmu_edge.targets import nengo as nengo_target

MODELS = Path(__file__).resolve().parent / "models"
N_CALIBRATION = 16


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--neurons", type=int, nargs="+", default=[100], help="neurons per memory dimension")
    p.add_argument("--neuron-type", default="spiking-relu", choices=["spiking-relu", "lif", "lif-rate"])
    p.add_argument("--tau", type=float, default=0.05, help="Lowpass synapse time constant (s)")
    p.add_argument("--steps-per-sample", type=int, default=10)
    p.add_argument("--runtime", default="nengo", choices=["nengo", "loihi-emulator"])
    p.add_argument("--limit", type=int, default=None, help="classify only this many test digits")
    p.add_argument("--out", type=Path, default=None, help="where to write the artifact (default: a temp dir)")
    a = p.parse_args(argv)

    x = np.load(MODELS / "digits_test_x.npy")
    labels = np.load(MODELS / "digits_test_y.npy")
    cal, xt, yt = x[:N_CALIBRATION], x[N_CALIBRATION:], labels[N_CALIBRATION:]
    if a.limit:
        xt, yt = xt[: a.limit], yt[: a.limit]
    out = a.out or Path(tempfile.mkdtemp(prefix="nengo_digits_")) / "digits_nengo"
    art = lmu_edge.convert(
        MODELS / "digits_lmu.lmu.npz",
        target="nengo",
        out_dir=out,
        calibration=cal,
        overwrite=True,
        spiking=True,
        neurons_per_dim=a.neurons[0],
        neuron_type=a.neuron_type,
        tau=a.tau,
        steps_per_sample=a.steps_per_sample,
    )
    ref = art.reference(xt)
    float_acc = float(np.mean(np.argmax(ref, -1) == yt))
    print(f"artifact: {art.path}")
    print(f"float model: accuracy {float_acc:.3f} on {len(yt)} held-out digits")
    print(f"spiking network: {a.neuron_type}, tau {a.tau} s, {a.steps_per_sample} steps per pixel, runtime {a.runtime}")
    rows = []
    for n in a.neurons:
        t0 = time.time()
        y = nengo_target.run(art, xt, a.runtime, neurons_per_dim=n)
        m = nengo_target.metrics(y, ref)
        row = dict(neurons_per_dim=n, accuracy=float(np.mean(np.argmax(y, -1) == yt)), seconds=time.time() - t0, **m)
        rows.append(row)
        print(
            f"  {n:4d} neurons/dim: accuracy {row['accuracy']:.3f}, agreement with float "
            f"{m['argmax_agreement']:.3f}, RMSE {m['rmse']:.4f} ({row['seconds']:.1f} s)"
        )
    return {"float_accuracy": float_acc, "rows": rows}


if __name__ == "__main__":
    main()
