"""Dense ZOH, structured RK4 and the implicit Pade [3/4] step side by side, measured in one run.

    python bench/fold.py            # orders 64-1024, theta 2q, 10q and 100q (tens of minutes)
    python bench/fold.py --quick    # orders 64 and 128 (about a minute)

For each (order, theta) the substep count of RK4 and of Pade is the smallest that meets the error
budget (1e-6, the float budget), each family searched on its own (no pruning), and the error is the
measured impulse-response error over 5 theta steps against exact ZOH (lmu_edge.folding). Operations
and coefficients are per memory channel and step, as counted in lmu_edge.lti and lmu_edge.pade.

The last columns are the budget by state width: a 16-bit state resolves 2^-15 of its proven range, so
its default budget is a quarter of that LSB (7.6e-6, lmu_edge.folding.default_budget); they give the
substeps each structured family needs there and what ``auto`` (fewest operations) picks.

A point whose every-step measurement would cost more than --max-work (q^2 * theta, the dense impulse
response over 5 theta) is measured with a stride t = ceil(q^2 * theta / max-work) (the last column,
``every`` or ``1/t``): every step of the first 1024, then every t-th step (powers of M^t), then every
step around the largest sampled errors (lmu_edge.impulse). tests/test_fold.py checks
that this gives the every-step error within 1e-4 relative; the sampled reference is kept in
memory up to 1 GiB.
"""

import argparse
import datetime
import math
import os
import time

import numpy as np

from lmu_edge import folding as fold
from lmu_edge import impulse, ir, lti

RATIOS = (2, 10, 100)
FULL = (64, 128, 256, 512, 1024)
QUICK = (64, 128)


def _fmt(c):
    if not c.ok:
        return f"{'>' + str(c.memory.substeps):>6} {'-':>8} {'-':>9}"
    return f"{c.memory.substeps:>6} {c.measurement.error:8.1e} {c.measurement.ops_per_step:>9}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="orders 64 and 128 only")
    ap.add_argument("--budget", type=float, default=1e-6, help="impulse-response error budget (float)")
    ap.add_argument("--state-bits", type=int, default=16, help="state width of the budget-by-width columns")
    ap.add_argument("--max-work", type=float, default=2.2e9, help="sample points with q^2 * theta above this")
    args = ap.parse_args()
    impulse.CACHE_BYTES = 1 << 30  # keep the (sampled) reference of the long horizons in memory
    wide, why = fold.default_budget(args.state_bits)
    print(
        f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores; "
        f"float budget {args.budget:g}; {args.state_bits}-bit budget {wide:.3g} ({why}); horizon 5*theta"
    )
    head = (
        f"{'order':>5} {'theta':>6} | {'dense ops':>9} {'coeffs':>7} | {'rk4 s':>6} {'error':>8} {'ops':>9} "
        f"{'coeffs':>6} | {'pade s':>6} {'error':>8} {'ops':>9} {'coeffs':>6} | {'auto':>9} | "
        f"{'rk4 s':>5} {'pade s':>6} {'auto':>9} | {'steps':>5} {'secs':>5}"
    )
    print(
        f"{'':>13} | {'dense ZOH':^17} | {'RK4 at ' + format(args.budget, 'g'):^33} | "
        f"{'Pade [3/4] at ' + format(args.budget, 'g'):^33} | {'':>9} | {str(args.state_bits) + '-bit budget':^24} |"
    )
    print(head)
    print("-" * len(head))
    for q in QUICK if args.quick else FULL:
        for r in RATIOS:
            theta = float(r * q)
            stride = max(1, math.ceil(q * q * theta / args.max_work))
            t0 = time.perf_counter()
            layer = ir.LMU("lmu", 1, q, theta, "zoh", np.ones((1, 1)), ir.ImpulseResponse())
            names = ["zoh", "rk4", "pade"]
            cs = {c.name: c for c in fold.candidates(layer, args.budget, names, prune=False, stride=stride)}
            good = [c for c in cs.values() if c.ok]
            best = min(good, key=lambda c: fold.rank(c, "ops", q)).name if good else "-"
            cw = {c.name: c for c in fold.candidates(layer, wide, names, prune=False, stride=stride)}
            gw = [c for c in cw.values() if c.ok]
            bw = min(gw, key=lambda c: fold.rank(c, "ops", q)) if gw else None
            d_ops, d_coeffs = lti.dense_cost(q)
            rk, pd = cs["rk4"], cs["pade"]

            def sub(c):
                return str(c.memory.substeps) if c.ok else f">{c.memory.substeps}"

            auto_w = "-" if bw is None else (bw.name + (f" x{bw.memory.substeps}" if bw.name != "zoh" else ""))
            auto_f = best + (f" x{cs[best].memory.substeps}" if best not in ("zoh", "-") else "")
            print(
                f"{q:>5} {theta:>6g} | {d_ops:>9} {d_coeffs:>7} | {_fmt(rk)} {rk.measurement.coeffs_stored:>6} | "
                f"{_fmt(pd)} {pd.measurement.coeffs_stored:>6} | {auto_f:>9} | {sub(cw['rk4']):>5} "
                f"{sub(cw['pade']):>6} {auto_w:>9} | {'every' if stride == 1 else '1/' + str(stride):>5} "
                f"{time.perf_counter() - t0:5.0f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
