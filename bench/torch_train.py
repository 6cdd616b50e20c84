"""Training throughput of lmu_edge.torch's LMU: parallel mode against recurrent mode, same model.

    python bench/torch_train.py                    # psMNIST-sized model (order 468, theta 784, 346 units)
    python bench/torch_train.py --quick            # order 64, 196 steps (seconds on a CPU)
    python bench/torch_train.py --device cuda      # on a GPU

One training step (forward, backward, Adam update) on a batch of random
sequences, timed over a few steps after a warm-up, for the parallel mode (the
memory at the last step as one T x q matrix product per sequence, as in
"Parallelizing Legendre Memory Unit Training", Chilkuri & Eliasmith) and the
recurrent mode (one step per sample). Prints sequences per second for each and
the ratio parallel / recurrent, both measured in this run.
"""

import argparse
import time

import torch

from lmu_edge.torch import LMU


def model(order, theta, units, mode, device):
    torch.manual_seed(0)
    return torch.nn.Sequential(
        LMU(1, 1, order, theta, hidden_units=units, hidden_activation="relu", return_sequences=False, mode=mode),
        torch.nn.Linear(units, 10),
    ).to(device)


def throughput(order, theta, units, steps, batch, mode, device, reps):
    m = model(order, theta, units, mode, device)
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    g = torch.Generator(device="cpu").manual_seed(1)
    x = torch.randn(batch, steps, 1, generator=g).to(device)
    y = torch.randint(0, 10, (batch,), generator=g).to(device)

    def one():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(m(x), y).backward()
        opt.step()

    one()  # warm-up
    if device != "cpu":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        one()
    if device != "cpu":
        torch.cuda.synchronize()
    return batch * reps / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="order 64, 196 steps")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    order, theta, steps, units = (64, 196.0, 196, 64) if a.quick else (468, 784.0, 784, 346)
    name = torch.cuda.get_device_name() if a.device.startswith("cuda") else f"cpu ({torch.get_num_threads()} threads)"
    print(
        f"lmu_edge.torch training throughput on {name}: order {order}, theta {theta:g}, {steps} steps, "
        f"{units} hidden units, batch {a.batch}, torch {torch.__version__}"
    )
    par = throughput(order, theta, units, steps, a.batch, "parallel", a.device, a.reps)
    rec = throughput(order, theta, units, steps, a.batch, "recurrent", a.device, max(1, a.reps // 3))
    print(f"{'mode':<10} {'sequences/s':>12}")
    print(f"{'parallel':<10} {par:>12.1f}")
    print(f"{'recurrent':<10} {rec:>12.1f}")
    print(f"parallel / recurrent: {par / rec:.1f}x")


if __name__ == "__main__":
    main()
