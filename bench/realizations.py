"""Dense ZOH, structured RK4 and the implicit Pade step side by side, measured in one run.

    python bench/realizations.py            # orders 64-1024, theta 2q, 10q, 100q (long)
    python bench/realizations.py --quick    # orders 64-256, theta 2q and 10q
    python bench/realizations.py --points 512x1024,512x5120

For each (order, theta): operations per step and stored coefficients of each
realization (as counted in lmu_edge.lti and lmu_edge.pade), the smallest substep
count that meets the error budget (doubling, then bisection) and its
impulse-response error over 5*theta steps against exact float64 ZOH.

Pade maps are built here with dense solves of ``I - (h/p) A`` (the same
rational function of A the structured O(q) step computes); the structured
solve's own rounding grows with |h/p| q/theta and is measured by
tests/test_pade.py, not here. Budget by state width: the error budget a
quantized state of that many bits implies (a quarter of one LSB over the
state's range, 2**-(bits+1)), printed for reference.
"""

import argparse
import datetime
import time

import numpy as np

from lmu_edge import ir, lti, pade

from lmu_edge import folding as fold

FULL = [(q, k * q) for q in (64, 128, 256, 512, 1024) for k in (2, 10, 100)]
QUICK = [(q, k * q) for q in (64, 128, 256) for k in (2, 10)]
ORDERS = (3, 4)


def pade_dense_map(q, theta, orders, s):
    k, rho, p = pade.pade_fractions(*orders)
    A, B = lti.legendre_ab(q, theta)
    aug = np.zeros((q + 1, q + 1))
    aug[:q, :q], aug[:q, q] = A / s, B / s
    E = k * np.eye(q + 1, dtype=complex)
    for rj, pj in zip(rho, p):
        E += rj * np.linalg.solve(aug - pj * np.eye(q + 1), np.eye(q + 1))
    E = np.linalg.matrix_power(E.real, s)
    return E[:q, :q], E[:q, q]


def search(measure, cap=4096):
    tried = {}

    def at(s):
        if s not in tried:
            tried[s] = measure(s)
        return tried[s]

    s = 1
    while not at(s)[0]:
        if s >= cap:
            return None, tried[s][1]
        s *= 2
    lo, hi = s // 2, s
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if at(mid)[0] else (mid, hi)
    return hi, at(hi)[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--budget", type=float, default=1e-6)
    ap.add_argument("--points", help="comma-separated ORDERxTHETA, e.g. 512x1024,1024x2048")
    args = ap.parse_args()
    grid = QUICK if args.quick else FULL
    if args.points:
        grid = [tuple(int(v) for v in p.split("x")) for p in args.points.split(",")]
    print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; error budget {args.budget:g}; "
          f"horizon 5*theta; pade [{ORDERS[0]}/{ORDERS[1]}]; budget by state width: "
          + ", ".join(f"{b}-bit {2.0 ** -(b + 1):.1e}" for b in (8, 16, 32)))
    head = (f"{'order':>5} {'theta':>6} | {'dense ops':>9} {'coeffs':>7} | {'rk4 s':>5} {'error':>8} {'ops':>8} | "
            f"{'pade s':>6} {'error':>8} {'ops':>8} {'coeffs':>6} | {'cheapest':>8} {'secs':>5}")
    print(head)
    print("-" * len(head))
    for q, theta in grid:
        t0 = time.perf_counter()
        layer = ir.LMU("lmu", 1, q, float(theta), "zoh", np.ones((1, 1)), ir.ImpulseResponse())
        ref = fold._Reference(layer)
        d_ops, d_coeffs = lti.dense_cost(q)

        def rk(s):
            err, rho = fold._map_error(*lti.rk_map(q, theta, 4, s), ref, ref.length, args.budget)
            return err <= args.budget and rho < 1, err

        def pd(s):
            err, rho = fold._map_error(*pade_dense_map(q, theta, ORDERS, s), ref, ref.length, args.budget)
            return err <= args.budget and rho < 1, err

        rs, rerr = search(rk, cap=max(1, d_ops // lti.rk_cost(q, 4, 1)[0]) * 4)
        ps, perr = search(pd, cap=256)
        r_ops = lti.rk_cost(q, 4, rs)[0] if rs else None
        p_ops, p_coeffs = pade.pade_cost(q, ORDERS, ps) if ps else (None, None)
        costs = {"dense": d_ops, "rk4": r_ops, "pade": p_ops}
        best = min((v, k) for k, v in costs.items() if v is not None)[1]
        f = lambda v: "-" if v is None else v
        print(f"{q:>5} {theta:>6} | {d_ops:>9} {d_coeffs:>7} | {f(rs):>5} {rerr:8.1e} {f(r_ops):>8} | "
              f"{f(ps):>6} {perr:8.1e} {f(p_ops):>8} {f(p_coeffs):>6} | {best:>8} {time.perf_counter() - t0:5.1f}",
              flush=True)


if __name__ == "__main__":
    main()
