"""Dense ZOH against structured RK4: per-step cost and stored bytes, at the substep count
that meets the error budget, measured for a grid of (order, theta).

    python bench/fold.py            # the full grid, up to (1024, 16000); takes minutes
    python bench/fold.py --quick    # a small grid

Costs are per memory channel and step (operations as counted in lmu_edge.lti);
bytes are the float32 coefficients the update stores. RK4's substep count is
found by measurement (lmu_edge.fold), never assumed. Ratios are RK4 / dense.
"""

import argparse
import time

import numpy as np

from lmu_edge import ir, lti

from lmu_edge import folding as fold

FULL = [(64, 100), (64, 1000), (128, 10000), (256, 784), (256, 4000), (256, 16000), (1024, 4000), (1024, 16000)]
QUICK = [(64, 100), (64, 1000), (128, 10000), (256, 784)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a small grid (seconds)")
    ap.add_argument("--budget", type=float, default=1e-6, help="impulse-response error budget")
    args = ap.parse_args()
    grid = QUICK if args.quick else FULL
    head = (f"{'order':>6} {'theta':>6} | {'dense ops':>10} {'dense bytes':>12} | {'rk4 s':>6} {'rk4 error':>9} "
            f"{'rk4 ops':>10} {'rk4 bytes':>9} | {'ops ratio':>9} {'bytes ratio':>11} | {'cheaper':>7} {'secs':>5}")
    print(f"error budget {args.budget:g}; horizon 5*theta steps")
    print(head)
    print("-" * len(head))
    for q, theta in grid:
        t0 = time.perf_counter()
        layer = ir.LMU("lmu", 1, q, float(theta), "zoh", np.ones((1, 1)), ir.ImpulseResponse())
        rk = fold.candidates(layer, args.budget, ["rk4"])[0]
        d_ops, d_coeffs = lti.dense_cost(q)
        secs = time.perf_counter() - t0
        if rk.ok:
            r_ops, r_bytes = rk.measurement.ops_per_step, 4 * rk.measurement.coeffs_stored
            s, err = rk.memory.substeps, f"{rk.measurement.error:9.2e}"
            ratio_ops, ratio_bytes = f"{r_ops / d_ops:9.3f}", f"{r_bytes / (4 * d_coeffs):11.5f}"
            cheaper = "rk4" if r_ops < d_ops else "dense"
        else:
            r_ops = r_bytes = "-"
            s, err, ratio_ops, ratio_bytes, cheaper = f">{fold.MAX_SUBSTEPS}", "   n/a   ", "      n/a", "        n/a", "dense"
        print(f"{q:>6} {theta:>6} | {d_ops:>10} {4 * d_coeffs:>12} | {s:>6} {err} {r_ops:>10} {r_bytes:>9} | "
              f"{ratio_ops} {ratio_bytes} | {cheaper:>7} {secs:5.1f}", flush=True)


if __name__ == "__main__":
    main()
