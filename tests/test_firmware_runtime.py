"""lmu_runtime.h's integer helpers against lmu_edge.fixedpoint, on the same random inputs."""

import shutil
import subprocess

import numpy as np
import pytest

from lmu_edge import fixedpoint as fp
from lmu_edge.firmware_templates import path as templates

PROGRAM = r"""
#include <stdio.h>
#include <inttypes.h>
#include "lmu_runtime.h"
int main(void) {
    int64_t a, b, c;
    char op[8];
    while (scanf("%7s %" SCNd64 " %" SCNd64 " %" SCNd64, op, &a, &b, &c) == 4) {
        if (op[0] == 'M') printf("%" PRId32 "\n", lmu_mbqm(a, (int32_t)b, (int32_t)c));
        else if (op[0] == 'S') printf("%" PRId64 "\n", lmu_shift_round(a, (int)b));
        else if (op[0] == 'H') printf("%" PRId32 "\n", lmu_srdhm((int32_t)a, (int32_t)b));
        else if (op[0] == 'R') printf("%" PRId32 "\n", lmu_rdbpot((int32_t)a, (int)b));
        else if (op[0] == 'D') printf("%" PRId64 "\n", lmu_div_round(a, b));
        else if (op[0] == 'T') printf("%" PRId64 "\n", lmu_sat(a, (int)b));
    }
    return 0;
}
"""


@pytest.fixture(scope="module")
def helper(tmp_path_factory):
    if shutil.which("gcc") is None:
        pytest.skip("gcc not installed (Debian: gcc)")
    d = tmp_path_factory.mktemp("rt")
    (d / "t.c").write_text(PROGRAM)
    subprocess.run(
        [
            "gcc",
            "-std=c99",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
            "-O2",
            f"-I{templates()}",
            str(d / "t.c"),
            "-o",
            str(d / "t"),
            "-lm",
        ],
        check=True,
    )
    return d / "t"


def _run(exe, rows):
    text = "\n".join(" ".join(str(int(v)) for v in r) for r in rows) + "\n"
    out = subprocess.run([str(exe)], input=text, capture_output=True, text=True, check=True).stdout.split()
    return np.array([int(v) for v in out], dtype=np.int64)


def test_c_and_python_integer_helpers_agree(helper):
    rng = np.random.default_rng(7)
    n = 3000
    i32 = rng.integers(fp.INT32_MIN, fp.INT32_MAX, n, endpoint=True)
    i32b = rng.integers(fp.INT32_MIN, fp.INT32_MAX, n, endpoint=True)
    mult = rng.integers(1 << 30, (1 << 31) - 1, n)
    shift = rng.integers(-31, 31, n)
    wide = rng.integers(-(1 << 50), 1 << 50, n)
    s = rng.integers(-8, 40, n)
    e = rng.integers(0, 31, n)
    den = rng.integers(1, 100000, n)
    bits = rng.integers(8, 33, n)
    # and every width's saturation edges: hi - 1, hi, hi + 1, lo - 1, lo, lo + 1 (random values never hit them)
    edge_bits = np.repeat(np.arange(8, 33), 6)
    hi = (np.int64(1) << (edge_bits - 1)) - 1
    base = np.where(np.tile([1, 1, 1, 0, 0, 0], 25) == 1, hi, -hi - 1)
    edges = base + np.tile([-1, 0, 1, -1, 0, 1], 25)
    wide, bits = np.concatenate([wide, edges]), np.concatenate([bits, edge_bits])
    i32[:4] = [fp.INT32_MIN, fp.INT32_MAX, 0, -1]
    i32[4:8], mult[4:8], shift[4:8] = [-3, 3, -5, 5], 1 << 30, 0  # exact ties of the doubling high mul
    i32b[:4] = [fp.INT32_MIN, 1, 0, fp.INT32_MIN]
    rows = (
        [("M", a, m, sh) for a, m, sh in zip(i32, mult, shift, strict=True)]
        + [("S", a, k, 0) for a, k in zip(wide[:n], s, strict=True)]
        + [("H", a, b, 0) for a, b in zip(i32, i32b, strict=True)]
        + [("R", a, k, 0) for a, k in zip(i32, e, strict=True)]
        + [("D", a, d, 0) for a, d in zip(wide[:n] >> 8, den, strict=True)]
        + [("T", a, b, 0) for a, b in zip(wide, bits, strict=True)]
    )
    text = "\n".join(f"{r[0]} {int(r[1])} {int(r[2])} {int(r[3])}" for r in rows) + "\n"
    out = subprocess.run([str(helper)], input=text, capture_output=True, text=True, check=True).stdout.split()
    got = np.array([int(v) for v in out], dtype=np.int64)
    expect = np.concatenate(
        [
            fp.multiply_by_quantized_multiplier(i32, mult, shift),
            np.array([int(fp.shift_round(a, int(k), "half_up")) for a, k in zip(wide[:n], s, strict=True)]),
            fp.saturating_rounding_doubling_high_mul(i32, i32b),
            np.array([int(fp.rounding_divide_by_pot(a, int(k))) for a, k in zip(i32, e, strict=True)]),
            fp.div_round(wide[:n] >> 8, den),
            np.array([int(fp.FixedType(int(b), 0).saturate(a)) for a, b in zip(wide, bits, strict=True)]),
        ]
    )
    np.testing.assert_array_equal(got, expect)
