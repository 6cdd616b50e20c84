"""The Cortex-M kernel paths: the DSP path (default on Cortex-M4), the Helium path (default on Cortex-M55)
and the portable path forced with -DLMU_PORTABLE give the integer reference's outputs bit for bit, on sizes
that exercise the four-row blocks, the row tail, the odd-column (DSP) and predicated (Helium) tails, the
16-input int8 vectors and both accumulator widths of the dense memory."""

import dataclasses
import json
import os
import subprocess

import numpy as np
import pytest
from arm_programs import ARM, TEMPLATES
from arm_programs import host_output as _host_output
from arm_programs import run_program as _run_program
from graphs import chain
from quantized_memory import impulse as _impulse

import lmu_edge
from lmu_edge import intsim, qir, toolchain
from lmu_edge.targets import c as c_target
from lmu_edge.targets import c_codegen

needs_arm = pytest.mark.skipif(
    not ARM and os.environ.get("CI") != "true", reason="arm-none-eabi-gcc / qemu-system-arm not installed"
)


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """``shared(key, convert)``: ``convert(folder)`` once per ``key`` in this module. The kernel paths of one
    model share its artifact: each builds its own image from it (``make -B``) and runs that."""
    made: dict = {}

    def get(key, convert):
        if key not in made:
            made[key] = convert(tmp_path_factory.mktemp("shared"))
        return made[key]

    return get


def _run(art_dir, xq, runtime, extra="", opt=None):
    """Build ``runtime``'s image (with extra compiler flags, and -O<opt> instead of -O2 when given) in art_dir
    and run it on QEMU: int8 outputs."""
    rt = toolchain.ARM_RUNTIMES[runtime]
    art_dir = art_dir / "harness"  # the artifact's harness folder: its Makefile builds from the kit, ../model/
    flags = f"FLAGS_{rt.tag}={' '.join(rt.cpu_flags)} {extra}"
    make = ["make", "-s", "-B", f"build/model_{rt.tag}.elf", flags]
    if opt is not None:
        make.append(f"ARMOPT=-O{opt} -mthumb")
    subprocess.run(make, cwd=art_dir, check=True, capture_output=True)
    c_target.write_input(art_dir / "lmu_in.bin", xq.astype(np.int8), 1)
    (art_dir / "lmu_out.bin").unlink(missing_ok=True)  # the artifact is shared: no earlier path's output is read
    subprocess.run(
        toolchain.qemu_command(runtime, f"build/model_{rt.tag}.elf"),
        cwd=art_dir,
        check=True,
        capture_output=True,
        timeout=120,  # seconds; a run takes a few: a kernel mutant that loops forever fails here
    )
    return c_target.read_output(art_dir / "lmu_out.bin", 0).astype(np.int64)


#: kernel path -> (the runtime whose core compiles it, extra compiler flags); the ids select one path
#: (``-k dsp``, ``-k helium``: scripts/mutate.py runs each Cortex-M kernel mutant on its own path)
#: (-O0 builds: the assembly loops need registers an unoptimized build keeps for its frame pointer, so
#: those builds run the same sums in C)
PATHS = {
    "dsp": ("cortex-m4", "", None),
    "portable": ("cortex-m4", "-DLMU_PORTABLE", None),
    "helium": ("cortex-m55", "", None),
    "dsp-O0": ("cortex-m4", "", "0"),
    "helium-O0": ("cortex-m55", "", "0"),
    "v6m": ("cortex-m0", "", None),  # the ARMv6-M assembly partial sums (lmu_v6m_dot2)
}


#: (q, coeff_bits, the accumulator comment); -O0 builds differ from -O2 only in the whole-channel kernels
_SIZES = [
    (7, None, None),
    (13, 16, "64"),
    (64, None, "64"),
    (9, 10, "32"),
    (36, None, "64"),
    (20, None, "64"),
    (18, None, "64"),
]
_CASES = [(path,) + size for size in _SIZES for path in PATHS if PATHS[path][2] is None or size[0] in (18, 36, 64)]


@needs_arm
@pytest.mark.parametrize("path,q,coeff_bits,sums", _CASES)
def test_each_kernel_path_is_bit_exact(shared, q, coeff_bits, sums, path):
    """q = 64, 36, 20 and 18 take the whole-channel kernels. DSP: 64, 36 and 20 (multiples of 4, at most 128)
    four rows at a time in one assembly statement (the three-row loop: test_whole_channel_kernels_saturate...);
    18 (even, not a multiple of 4) takes
    the two-row loop of 16-column passes and a 2-column C tail. Helium: blocks of three rows in 32-column
    passes and 8-column passes (36: four), a predicated tail (36, 20, 18) and single rows. 7, 9 and 13 are
    odd (the DSP whole-channel kernel refuses them: four-row blocks and scalar tails), 7 has no full Helium
    vector (the loop runs zero passes)."""

    def convert(d):
        rng = np.random.default_rng(100 + q)
        g = lmu_edge.fold(chain(rng, n_in=5, q=q, theta=3.0 * q, units=11), "zoh")  # hidden: 11 rows of q inputs
        x = rng.standard_normal((2, 60, 5))
        # all-int8 (widen_db=None): these are the int8 kernels' tests
        opts = {"coeff_bits": coeff_bits, "measure": False, "flash": False, "accuracy_report": False, "widen_db": None}
        return x, lmu_edge.convert(g, "c", d / "c", quantize="int8", calibration=x, **opts)

    x, art = shared(("int8", q, coeff_bits), convert)
    src = (art.path / "model" / "model.c").read_text()
    if sums:  # both accumulator widths of the dense memory are exercised
        assert f"/* {sums}-bit sums over C m" in src
    if q in (18, 20, 36, 64):  # the whole-channel kernels run only with the code generator's step32 proof
        assert "the rounded step provably fits 31 bits" in src
    qg = c_target._qgraph(art)
    if sums:  # report.json writes the same proofs as the comment in model.c
        (acc,) = json.loads((art.path / "report.json").read_text())["c"]["accumulators"]
        (mem,) = [lay.memory for lay in qg.layers if hasattr(lay, "memory")]
        assert acc["sum_bits"] == int(sums)
        assert acc["row_sum_fits_int32"] == ("each row's whole sum provably fits int32" in src)
        assert acc["step_fits_int32"] == ("the rounded step provably fits 31 bits" in src)
        assert acc["int32_partial_columns"] == min(c_codegen.dense_chunk(mem.coeffs, 16), q)
    xq = intsim.quantize_input(qg, x)
    ref = intsim.run_int(qg, xq)
    runtime, extra, opt = PATHS[path]
    assert np.array_equal(_run(art.path, xq, runtime, extra, opt), ref)


def test_acc32_is_chosen_only_when_the_bound_proves_it():
    # row sums of |C| times 2^(bits-1): 2^16 * 2^15 = 2^31 overflows, one less fits
    assert c_codegen.dense_acc32(np.array([[2**15, 2**15 - 1]]), 16) == 1
    assert c_codegen.dense_acc32(np.array([[2**15, 2**15]]), 16) == 0
    assert c_codegen.dense_acc32(np.array([[1, -(2**16)], [0, 0]]), 16) == 0


def _qlinear(bias, kernel=((127,), (-128,)), in_zp=-128, shift=-3, parts=1, out_zp=0):
    part = qir.QPart(np.array(kernel), in_zp, np.full(len(kernel[0]), 1 << 30), np.full(len(kernel[0]), shift))
    return qir.QLinear((part,) * parts, out_zp, -128, 127, bias=np.array(bias))


def test_acc30_is_chosen_only_when_the_bound_proves_it():
    # |bias| + max|x - zp| sum|w|: zp = -128 gives max|x - zp| = 255, sum|w| = 255, so 65025 on top of |bias|
    edge = 2**30 - 1 - 255 * 255
    assert c_codegen._acc30(_qlinear([edge])) == (True, 2**30 - 1)
    assert c_codegen._acc30(_qlinear([-edge]))[0]
    assert not c_codegen._acc30(_qlinear([edge + 1]))[0]  # 2^30: SMMULR of 2a could overflow
    assert not c_codegen._acc30(_qlinear([-edge - 1]))[0]
    assert c_codegen.qlinear_acc_bound(_qlinear([0], in_zp=127)) == 255 * 255  # max|x - 127| = 255 too
    assert c_codegen.qlinear_acc_bound(_qlinear([0], in_zp=0)) == 128 * 255
    assert not c_codegen._acc30(_qlinear([0], shift=1))[0]  # a left shift: not lmu_mbqm32_s
    assert not c_codegen._acc30(_qlinear([0], parts=2))[0]  # two parts: the general loop
    assert not c_codegen._acc30(_qlinear([0], out_zp=2**30))[0]


@needs_arm
@pytest.mark.parametrize("path", ["dsp", "portable", "helium", "v6m"])
def test_a_layer_whose_sums_pass_2_to_the_30_keeps_the_general_path(shared, monkeypatch, path):
    """The first dense layer's bias is raised so that one row's exact accumulator lies in [2^30, 2^31) (it
    still fits int32, the quantizer's bound): the code generator must not mark that layer acc30, and every
    path stays bit-exact. Were the fast path taken, SMMULR of 2a would wrap and that row's output flip from
    127 to -128 (the other layers keep the fast path: their comment is in model.c)."""
    from lmu_edge import quantization

    real = quantization.quantize

    def raised(*a, **k):
        qg = real(*a, **k)
        d = qg.layers[1]
        lin = d.linear
        bias = np.array(lin.bias, dtype=np.int64)
        bias[0] = 2**30 + 40000  # + sum (x - zp) w >= 2^30 + 40000 - 255 * 127 > 2^30 for every input
        new = dataclasses.replace(d, linear=dataclasses.replace(lin, bias=bias))
        return dataclasses.replace(qg, layers=[qg.layers[0], new, *qg.layers[2:]])

    monkeypatch.setattr(quantization, "quantize", raised)

    def convert(d):  # once for the four paths (each builds its own image)
        rng = np.random.default_rng(7)
        g = lmu_edge.fold(chain(rng, n_in=1, q=12, theta=20.0, units=8), "zoh")
        x = rng.standard_normal((2, 30, 1))
        opts = {"measure": False, "flash": False, "accuracy_report": False, "widen_db": None}
        return x, lmu_edge.convert(g, "c", d / "c", quantize="int8", calibration=x, **opts)

    x, art = shared(("acc30",), convert)
    src = (art.path / "model" / "model.c").read_text()
    first = src.split("static const lmu_qlinear_t model_l1_dense = {", 1)[1].split("};", 1)[0]
    assert ".acc30" not in first and "l2_hidden: one part" in src
    qg = c_target._qgraph(art)
    assert int(qg.layers[1].linear.bias[0]) == 2**30 + 40000
    xq = intsim.quantize_input(qg, x)
    ref = intsim.run_int(qg, xq)
    runtime, extra, opt = PATHS[path]
    assert np.array_equal(_run(art.path, xq, runtime, extra, opt), ref)


def test_step32_holds_exactly_up_to_its_bound():
    # S = sum |C| 2^15 + |B| u_bound; the proof needs S + 2^cf <= 2^(30 + cf)
    cf = 15
    limit = (1 << (30 + cf)) - (1 << cf)
    c = np.array([[limit >> 15, 0], [1, 1]])
    assert c_codegen.dense_step32(c, [0, 0], 0, cf, 16)
    assert not c_codegen.dense_step32(c, [1, 0], 1, cf, 16)  # one more unit of B u crosses it
    assert not c_codegen.dense_step32(c + [[1, 0], [0, 0]], [0, 0], 0, cf, 16)
    assert c_codegen.dense_step32(np.zeros((2, 2)), [3, -(2**29)], 2**15, cf, 16)  # |B| u: 2^44
    assert not c_codegen.dense_step32(np.zeros((2, 2)), [3, -(2**29)], 2**16, cf, 16)  # 2^45 + 2^15
    assert not c_codegen.dense_step32(np.zeros((2, 2)), [0, 0], 0, 0, 16)  # cf must be 1..31
    assert not c_codegen.dense_step32(np.zeros((2, 2)), [0, 0], 0, cf, 24)  # states of at most 16 bits


def test_wrap32_holds_exactly_up_to_its_bound():
    # |T| <= (K + 1) 2^cf <= 2^31 with K = 2 floor(bound) (delta form) or floor(bound) (direct form)
    assert c_codegen.dense_wrap32(32767.0, True, True, 15, 16)  # 65535 * 2^15 = 2^31 - 2^15
    assert not c_codegen.dense_wrap32(32767.0, True, True, 16, 16)
    assert c_codegen.dense_wrap32(32767.9, True, False, 16, 16)  # (32767 + 1) 2^16 = 2^31: just fits
    assert not c_codegen.dense_wrap32(32767.0, True, False, 17, 16)
    assert c_codegen.dense_wrap32(16383.0, True, True, 16, 16)  # 32767 * 2^16 < 2^31
    assert not c_codegen.dense_wrap32(16384.0, True, True, 16, 16)  # 32769 * 2^16 > 2^31
    assert not c_codegen.dense_wrap32(1000.0, False, True, 15, 16)  # an unproven bound proves nothing
    assert not c_codegen.dense_wrap32(32768.0, True, False, 1, 16)  # a bound past the state's range
    assert not c_codegen.dense_wrap32(1000.0, True, True, 15, 24)  # states of at most 16 bits
    assert not c_codegen.dense_wrap32(1000.0, True, True, 0, 16)  # coeff_frac must be 1..31


@pytest.mark.parametrize("q", [64, 18])
def test_wrap32_is_proven_for_the_bench_model_and_kept_by_its_worst_case_input(q):
    """The bench model's memory (order 64, theta 200) and a direct-form one get the wrap32 proof, and the
    input that drives the state to its proven bound keeps every row's whole sum T inside int32 with room
    to spare (measured: at most 0.29 and 0.41 of 2^31): the proof (|step| <= 2 bound) holds where the
    state is at its extreme. A proof that wrongly accepted would show here as |T| >= 2^31."""
    rng = np.random.default_rng(5)
    g = lmu_edge.fold(chain(rng, n_in=1, q=q, theta=200.0 if q == 64 else 30.0, units=4), "zoh")
    qg = lmu_edge.quantize(g, rng.standard_normal((2, 400, 1)), state_bits=16)
    lmu = next(layer for layer in qg.layers if isinstance(layer, qir.QLMU))
    mem = lmu.memory
    bound = lmu.state_bound * 2.0**lmu.state_type.frac
    assert lmu.bound_proven and (mem.form == "delta") == (q == 64)
    assert c_codegen.dense_wrap32(bound, True, mem.form == "delta", mem.coeff_frac, 16)
    H = _impulse(lmu, int(20 * lmu.theta))
    i = int(np.argmax(np.abs(H).sum(axis=0)))
    u = lmu.u_type.max_int * np.where(H[::-1, i] >= 0, 1, -1)
    u = np.concatenate([u, -u])[:, None]
    m = intsim.memory_response(lmu, u)
    prev = np.vstack([np.zeros((1, q), np.int64), m[:-1]])
    t = prev @ mem.coeffs.astype(np.int64).T + mem.B.astype(np.int64) * u + (1 << (mem.coeff_frac - 1))
    assert np.abs(m).max() >= 0.95 * bound  # the state reaches its bound
    assert np.abs(t).max() < 2**31 * 0.5, np.abs(t).max() / 2**31


_WRAP32_C = r"""
#include <stdio.h>
#include <string.h>
#include "lmu_runtime.h"
/* Rows whose partial sums wrap int32 many times while the whole sum T = B u + sum C m + 2^(cf-1) fits:
 * columns in pairs (C_j, m_j) and (-C_j, m_j), the positive half first (partial sums up to 2^34), plus one
 * column off by delta (|delta m| < 2^29). The wrap32 kernel (cfg.wrap32 = 1) must give the 64-bit
 * chunked kernel's state (wrap32 = 0, chunk = 1) bit for bit, both forms, 16- and 10-bit saturation. */
static uint32_t st = 88675123u;
static int32_t rnd(int32_t lo, int32_t hi) {
    st ^= st << 13; st ^= st >> 17; st ^= st << 5;
    return lo + (int32_t)(st % (uint32_t)(hi - lo + 1));
}
#define RUN(Q)                                                                                                    \
    {                                                                                                             \
        static int16_t C[Q * Q] LMU_ALIGN4, m0[Q] LMU_ALIGN4, m1[Q] LMU_ALIGN4, m2[Q] LMU_ALIGN4;                 \
        static int32_t B[Q], u[1];                                                                                \
        static int64_t tmp[Q + 1]; /* tmp[Q]: a canary past the q entries the kernel may use */                   \
        int32_t r, j, k, t, f;                                                                                    \
        tmp[Q] = 0x5A5A5A5A5A5A5A5ALL;                                                                           \
        for (t = 0; t < 40; ++t) {                                                                                \
            const int32_t half = Q / 2, bits = t % 4 == 3 ? 10 : 16, delta = t % 2;                               \
            for (j = 0; j < half; ++j) m0[j] = m0[j + half] = (int16_t)rnd(20000, 32767);                         \
            if (Q % 2) m0[Q - 1] = (int16_t)rnd(-32768, 32767);                                                   \
            for (r = 0; r < Q; ++r) {                                                                             \
                for (j = 0; j < half; ++j) {                                                                      \
                    C[r * Q + j] = (int16_t)rnd(14000, 16383);                                                    \
                    C[r * Q + j + half] = (int16_t)-C[r * Q + j];                                                 \
                }                                                                                                 \
                if (Q % 2) C[r * Q + Q - 1] = (int16_t)rnd(-16384, 16383);                                        \
                k = r % half;                                                                                     \
                C[r * Q + k + half] = (int16_t)(C[r * Q + k + half] + rnd(-16384, 16383));                        \
                B[r] = rnd(-4095, 4095);                                                                          \
            }                                                                                                     \
            u[0] = rnd(-32768, 32767);                                                                            \
            for (f = 0; f < 2; ++f) {                                                                             \
                const lmu_dense_memory_c16_t cfg = {.d = 1, .q = Q, .C = C, .B = B, .coeff_frac = 4 + t % 12,     \
                                                    .delta = delta, .bits = bits, .chunk = 1, .step32 = 0,        \
                                                    .wrap32 = f};                                                 \
                int16_t *m = f ? m1 : m2;                                                                         \
                memcpy(m, m0, sizeof m0);                                                                         \
                lmu_dense_memory_s16_c16(&cfg, m, u, tmp);                                                        \
            }                                                                                                     \
            for (j = 0; j < Q; ++j) {                                                                             \
                bad += m1[j] != m2[j];                                                                            \
                h = (h ^ (uint32_t)(uint16_t)m1[j]) * 16777619u;                                                  \
                sat += m1[j] == (1 << (bits - 1)) - 1 || m1[j] == -(1 << (bits - 1));                             \
            }                                                                                                     \
            ++n;                                                                                                  \
        }                                                                                                         \
        bad += tmp[Q] != 0x5A5A5A5A5A5A5A5ALL;                                                                   \
    }
int main(void) {
    uint32_t h = 2166136261u;
    long bad = 0, sat = 0, n = 0;
    RUN(64) RUN(18) RUN(20) RUN(36) RUN(7) RUN(2) RUN(40) RUN(24) RUN(136)
    printf("steps %ld bad %ld saturated %ld hash %lu\n", n, bad, sat, (unsigned long)h);
    return 0;
}
"""


@pytest.mark.parametrize("runtime", ["host", "cortex-m0", "cortex-m0-portable", "cortex-m4", "cortex-m55"])
def test_wrap32_rows_give_the_64_bit_kernel_state_when_partial_sums_wrap(tmp_path, runtime):
    """The wrap32 rows (32-bit sums, c_codegen.dense_wrap32) on crafted rows whose partial sums pass int32
    many times while the whole sum fits: the same state as the 64-bit chunked rows, on the Cortex-M0 (the
    Thumb-1 three-row loop, its four- and two-column passes for q = 64, 40, 20, 36, 18 and 24 and the
    two-row loop; with -DLMU_PORTABLE the C loop of unsigned sums, odd q included), the M55 (q a multiple of
    8: eight unrolled rows of VMLADAV(A) for a compile-time q up to 120, q = 64, 40 and 24; four rows in
    32-column passes and an 8-column rest for q = 136, past the reach of VLDRH's immediate offsets) as on
    the host and the M4 (which sums in 64 bits): the host's hash equals each core's."""
    want = _host_output(tmp_path, _WRAP32_C, runtime)
    w = want.split()
    assert w[0] == "steps" and int(w[1]) == 360 and int(w[3]) == 0 and int(w[5]) > 100, want
    if runtime != "host":
        portable = runtime.endswith("-portable")
        got = _run_program(
            tmp_path, _WRAP32_C, runtime.removesuffix("-portable"), extra=("-DLMU_PORTABLE",) if portable else ()
        )
        assert got == want


def test_dense_chunk_is_the_longest_run_of_columns_the_bound_proves():
    # limit for a 16-bit state: (2^31 - 1) >> 15 = 65535 per chunk of |C|
    c = np.array([[30000, 30000, 30000, 5535, 1]])
    assert c_codegen.dense_chunk(c, 16) == 2  # three columns: 90000 > 65535; pairs fit
    assert c_codegen.dense_chunk(np.array([[1, 2, 3]]), 16) == 3  # the whole row: acc32's proof
    assert c_codegen.dense_chunk(np.array([[65535, 1]]), 16) == 1
    assert c_codegen.dense_chunk(np.array([[40000, 25535, 40000, 25535]]), 16) == 2  # aligned pairs
    assert c_codegen.dense_chunk(np.array([[40000, 25535, 40000, 25536]]), 16) == 1


_MBQM_C = r"""
#include <stdio.h>
#include "lmu_runtime.h"
int main(void) {
    static const int32_t v[] = {INT32_MIN, INT32_MIN + 1, -1073741825, -1073741824, -1073741823, -32768, -257,
                                -2, -1, 0, 1, 2, 255, 32767, 1073741823, 1073741824, INT32_MAX - 1, INT32_MAX};
    uint64_t st = 88172645463325252u;
    long bad = 0;
    int e, i, j, k;
    for (e = 0; e <= 31; ++e) {
        for (i = 0; i < 18; ++i)
            for (j = 1; j < 18; ++j) bad += lmu_mbqm32_r(v[i], v[j], e) != lmu_mbqm32(v[i], v[j], -e);
        for (k = 0; k < 200000; ++k) {
            int32_t x, m;
            st ^= st << 13; st ^= st >> 7; st ^= st << 17;
            x = (int32_t)(uint32_t)st >> (k % 32);
            m = k % 3 == 0 ? (int32_t)(1u << (k % 31)) : (int32_t)((uint32_t)(st >> 32) | 0x40000000u);
            if (k % 2) m = (int32_t)(uint32_t)(st >> 32);
            if (m == INT32_MIN) continue;
            bad += lmu_mbqm32_r(x, m, e) != lmu_mbqm32(x, m, -e);
            if (e == 2 && k < 64) printf("%d %d %d\n", x, m, lmu_mbqm32_r(x, m, e));
        }
    }
    printf("bad %ld\n", bad);
    return 0;
}
"""


def test_one_rounding_requantization_equals_mbqm(tmp_path):
    """lmu_mbqm32_r (the DSP path's requantization) gives lmu_mbqm32's integers for every shift 0..31 on edge
    values (INT32_MIN, ties, negative products) and random ones, and both agree with lmu_edge.fixedpoint."""
    from lmu_edge import fixedpoint

    (tmp_path / "t.c").write_text(_MBQM_C)
    tpl = TEMPLATES
    subprocess.run(["cc", "-O2", "-std=c99", f"-I{tpl}", "t.c", "-o", "t"], cwd=tmp_path, check=True)
    out = subprocess.run([str(tmp_path / "t")], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[-2] == "bad 0"
    rows = np.array([[int(w) for w in ln.split()] for ln in out[:-2]], dtype=np.int64)
    assert len(rows) == 64
    want = fixedpoint.multiply_by_quantized_multiplier(rows[:, 0], rows[:, 1], -2)
    np.testing.assert_array_equal(np.asarray(want, dtype=np.int64), rows[:, 2])


_MBQM_S_C = r"""
#include <stdio.h>
#include "lmu_runtime.h"
int main(void) {
    static const int32_t ms[] = {INT32_MIN, INT32_MIN + 1, -1073741824, -3, 1, 2, 1073741823, 1073741824,
                                 1128624491, 1518500250, 2147483646, INT32_MAX};
    uint32_t st = 2463534242u;
    long bad = 0, n = 0;
    int e, i, k;
    int32_t x;
    for (e = 0; e <= 31; ++e) {
        for (i = 0; i < 12; ++i) {
            for (x = -32768; x <= 32767; x += (e % 4 == 0 ? 1 : 7)) {
                bad += lmu_mbqm32_s(x, ms[i], e) != lmu_mbqm32(x, ms[i], -e);
                ++n;
            }
        }
        for (k = 0; k < 4000; ++k) {
            int32_t m;
            st ^= st << 13; st ^= st >> 17; st ^= st << 5;
            m = (int32_t)st;
            x = (int32_t)(st % 65536u) - 32768;
            bad += lmu_mbqm32_s(x, m, e) != lmu_mbqm32(x, m, -e);
            ++n;
        }
    }
    printf("n %ld bad %ld\n", n, bad);
    return 0;
}
"""


@needs_arm
def test_dsp_smmulr_requantization_equals_mbqm_on_the_cortex_m4(tmp_path):
    """lmu_mbqm32_s (the DSP path's requantization of a 16-bit state: SMMULR, an add and a shift) gives
    lmu_mbqm32's integers for every shift 0..31, every 16-bit input (every seventh for most shifts) and edge
    and random multipliers, INT32_MIN included: run on the Cortex-M4 under QEMU (SMMULR is an ARM
    instruction)."""
    out = _run_program(tmp_path, _MBQM_S_C, "cortex-m4")
    n, bad = (int(w) for w in out.split()[1::2])
    assert n > 5_000_000 and bad == 0, out


_REQUANT16_C = r"""
#include <stdio.h>
#include "lmu_runtime.h"
int main(void) {
    static const int32_t ms[] = {INT32_MIN, -1073741824, -3, 1, 1073741823, 1073741824, 1128624491, 1518500250,
                                 2147483646, INT32_MAX};
    static const int32_t es[] = {0, 1, 2, 7, 15, 22, 23, 31};
    static const int32_t zps[] = {-128, -5, 0, 127};
    static int16_t v[65536 + 3 + 16];
    static int8_t z[65536 + 3 + 16]; /* 16 canary bytes past the end: nothing may write there */
    long bad = 0, n = 0;
    int32_t i, a, b, c;
    for (i = 0; i < 65536 + 3 + 16; ++i) v[i] = (int16_t)(i - 32768 + (i >= 65536 ? -3 : 0));
    for (a = 0; a < 10; ++a)
        for (b = 0; b < 8; ++b)
            for (c = 0; c < 4; ++c) {
                for (i = 65536 + 3; i < 65536 + 3 + 16; ++i) z[i] = 0x5A;
                lmu_requant8_s16(v, z, 65536 + 3, ms[a], -es[b], zps[c]); /* + 3: a predicated tail */
                for (i = 0; i < 65536 + 3; ++i, ++n)
                    bad += z[i] != lmu_clamp8(zps[c] + (int64_t)lmu_mbqm32(v[i], ms[a], -es[b]));
                for (; i < 65536 + 3 + 16; ++i) bad += z[i] != 0x5A;
            }
    printf("n %ld bad %ld\n", n, bad);
    return 0;
}
"""


@needs_arm
@pytest.mark.parametrize("path", ["dsp", "helium", "portable-v6m"])
def test_state_requantization_equals_mbqm_on_every_path(tmp_path, path):
    """lmu_requant8_s16 (the 16-bit state into int8: Helium four values per vector with the zero point riding on
    the rounding term, the DSP path's SMMULR, the 32-bit-multiply form on ARMv6-M) gives lmu_mbqm32's
    integers for every 16-bit input, shifts 0..31 (the vector kernel takes 0..22), zero points at both ends
    and edge multipliers, with a predicated tail and nothing written past the end: run under QEMU on the
    core that compiles each path."""
    runtime = {"dsp": "cortex-m4", "helium": "cortex-m55", "portable-v6m": "cortex-m0"}[path]
    out = _run_program(tmp_path, _REQUANT16_C, runtime)
    n, bad = (int(w) for w in out.split()[1::2])
    assert n == 320 * 65539 and bad == 0, out


_MBQM16_C = r"""
#include <stdio.h>
#include "lmu_runtime.h"
int main(void) {
    static const int32_t ms[] = {INT32_MIN, INT32_MIN + 1, -1073741824, -65536, -65535, -3, 0, 1, 65535, 65536,
                                 1073741823, 1073741824, 1128624491, 1518500250, 2147483646, INT32_MAX};
    uint32_t st = 2463534242u;
    long bad = 0, n = 0;
    int e, i, k;
    int32_t x;
    for (e = 0; e <= 31; ++e) {
        for (i = 0; i < 16; ++i)
            for (x = -32768; x <= 32768; ++x, ++n) bad += lmu_mbqm32_16(x, ms[i], e) != lmu_mbqm32(x, ms[i], -e);
        for (k = 0; k < 100000; ++k, ++n) {
            st ^= st << 13; st ^= st >> 17; st ^= st << 5;
            x = (int32_t)(st % 65537u) - 32768;
            bad += lmu_mbqm32_16(x, (int32_t)(st * 2654435761u), e) != lmu_mbqm32(x, (int32_t)(st * 2654435761u), -e);
        }
    }
    printf("n %ld bad %ld\n", n, bad);
    return 0;
}
"""


_MBQM_H16_C = r"""
#include <stdio.h>
#include "lmu_runtime.h"
int main(void) {
    /* acc30 rows: |x| < 2^30, multipliers in [0, 2^31) (the quantizer's), shifts 0..31 */
    static const int32_t xs[] = {-1073741823, -1073741822, -536870912, -65537, -65536, -65535, -32769, -1, 0, 1,
                                 65535, 65536, 65537, 536870911, 1073741822, 1073741823};
    static const int32_t ms[] = {0, 1, 65535, 65536, 65537, 1073741823, 1073741824, 1128624491, 1518500250,
                                 2147418112, 2147483646, INT32_MAX};
    uint32_t st = 2463534242u;
    long bad = 0, n = 0;
    int e, i, j, k;
    for (e = 0; e <= 31; ++e) {
        for (i = 0; i < 16; ++i)
            for (j = 0; j < 12; ++j, ++n) bad += lmu_mbqm32_h16(xs[i], ms[j], e) != lmu_mbqm32(xs[i], ms[j], -e);
        for (k = 0; k < 200000; ++k, ++n) {
            int32_t x, m;
            st ^= st << 13; st ^= st >> 17; st ^= st << 5;
            x = (int32_t)(st % 2147483647u) - 1073741823;
            st ^= st << 13; st ^= st >> 17; st ^= st << 5;
            m = (int32_t)(st >> 1);
            bad += lmu_mbqm32_h16(x, m, e) != lmu_mbqm32(x, m, -e);
        }
    }
    printf("n %ld bad %ld\n", n, bad);
    return 0;
}
"""


@pytest.mark.parametrize("runtime", ["host", "cortex-m0"])
def test_acc30_rows_requantize_without_a_64_bit_multiply_as_mbqm(tmp_path, runtime):
    """lmu_mbqm32_h16 (ARMv6-M's requantization of an acc30 row: four 32-bit multiplies of 16-bit halves, no
    64-bit multiply helper) gives lmu_mbqm32's integers for |x| < 2^30, multipliers in [0, 2^31) (edges of
    the 16-bit split included) and every shift 0..31, on the host and on the Cortex-M0."""
    if runtime != "host" and not ARM and os.environ.get("CI") != "true":
        pytest.skip("arm-none-eabi-gcc / qemu-system-arm not installed")
    if runtime == "host":
        (tmp_path / "t.c").write_text(_MBQM_H16_C)
        subprocess.run(["cc", "-O2", "-std=c99", f"-I{TEMPLATES}", "t.c", "-o", "t"], cwd=tmp_path, check=True)
        out = subprocess.run([str(tmp_path / "t")], capture_output=True, text=True, check=True).stdout
    else:
        out = _run_program(tmp_path, _MBQM_H16_C.replace("200000", "3000"), runtime)
    n, bad = (int(w) for w in out.split()[1::2])
    assert n == 32 * (16 * 12 + (200000 if runtime == "host" else 3000)) and bad == 0, out


def test_32_bit_multiply_requantization_equals_mbqm(tmp_path):
    """lmu_mbqm32_16 (the portable and ARMv6-M requantization of a 16-bit state, 32-bit multiplies only) gives
    lmu_mbqm32's integers for every input in [-2^15, 2^15], every shift 0..31, edge multipliers (INT32_MIN,
    the 2^16 boundaries of the split) and random ones."""
    (tmp_path / "t.c").write_text(_MBQM16_C)
    tpl = TEMPLATES
    subprocess.run(["cc", "-O2", "-std=c99", f"-I{tpl}", "t.c", "-o", "t"], cwd=tmp_path, check=True)
    out = subprocess.run([str(tmp_path / "t")], capture_output=True, text=True, check=True).stdout
    n, bad = (int(w) for w in out.split()[1::2])
    assert n == 32 * (16 * 65537 + 100000) and bad == 0, out


_SATURATE_C = r"""
#include <stdio.h>
#include "lmu_runtime.h"
/* the dense memory on crafted values that drive a 16-bit (and a 10-bit) state into saturation every step:
 * |C| < 2^10, |B u| < 2^22, cf = 10, so the rounded step reaches 2^19 and the step32 proof holds
 * (sum |C| 2^15 + |B u| + 2^cf < 2^40 = 2^(30 + cf), q <= 132); chunk = min(q, 64): every 32-bit partial
 * sum fits (64 * 1023 * 2^15 < 2^31) */
static uint32_t st = 2463534242u;
static int32_t rnd(int32_t lo, int32_t hi) {
    st ^= st << 13; st ^= st >> 17; st ^= st << 5;
    return lo + (int32_t)(st % (uint32_t)(hi - lo + 1));
}
/* bits and delta as constants take the DSP one-statement kernel (lmu_dsp_channel4_s16) where q % 4 == 0
 * and q <= 128 (16, 20, 12, 28: its state copy's 32-, 8-, 16 + 8- and 32 + 16 + 8-byte moves); read through a
 * volatile, or with q = 132, the three-row loop; 18: two rows */
static volatile int32_t opaque_v;
static int32_t opaque(int32_t x) {
    opaque_v = x;
    return opaque_v;
}
#define RUN1(Q, BITS, DELTA)                                                                                      \
    {                                                                                                             \
        const int32_t bits = (BITS), delta = (DELTA), lim = (1 << (bits - 1)) - 1;                                \
        for (i = 0; i < Q * Q; ++i) C[i] = (int16_t)rnd(-1023, 1023);                                             \
        for (i = 0; i < Q; ++i) B[i] = rnd(-4095, 4095), m[i] = (int16_t)rnd(-lim - 1, lim);                      \
        for (t = 0; t < 6; ++t) {                                                                                 \
            u[0] = rnd(-1023, 1023);                                                                              \
            memset((char *)tmp + 2 * Q, 0x5A, 6 * Q); /* the whole-channel kernels use 2q bytes */                \
            const lmu_dense_memory_c16_t cfg = {.d = 1, .q = Q, .C = C, .B = B, .coeff_frac = 10,                 \
                                                .delta = delta, .bits = bits, .chunk = Q < 64 ? Q : 64,           \
                                                .step32 = 1};                                                     \
            lmu_dense_memory_s16_c16(&cfg, m, u, tmp);                                                            \
            for (i = 2 * Q; fast && i < 8 * Q; ++i) canary += ((unsigned char *)tmp)[i] != 0x5A;                  \
            for (i = 0; i < Q; ++i) {                                                                             \
                h = (h ^ (uint32_t)(uint16_t)m[i]) * 16777619u;                                                   \
                sat += m[i] == lim || m[i] == -lim - 1;                                                           \
            }                                                                                                     \
        }                                                                                                         \
    }
#define RUN(Q)                                                                                                    \
    {                                                                                                             \
        static int16_t C[Q * Q] LMU_ALIGN4, m[Q] LMU_ALIGN4;                                                      \
        static int32_t B[Q], u[1];                                                                                \
        static int64_t tmp[Q];                                                                                    \
        const int fast = LMU_PATH_MVE || (LMU_PATH_DSP && Q % 2 == 0);                                            \
        RUN1(Q, 10, 0) RUN1(Q, 10, 1) RUN1(Q, 16, 0) RUN1(Q, 16, 1)                                               \
        RUN1(Q, opaque(10), opaque(0)) RUN1(Q, opaque(16), opaque(1))                                             \
    }
int main(void) {
    uint32_t h = 2166136261u;
    long sat = 0, canary = 0;
    int32_t i, t;
    RUN(16) RUN(18) RUN(20) RUN(7) RUN(132) RUN(12) RUN(28) RUN(144) RUN(256)
    printf("hash %lu saturated %ld scratch-past-2q %ld\n", (unsigned long)h, sat, canary);
    return 0;
}
"""


@pytest.mark.parametrize("runtime", ["host", "cortex-m4", "cortex-m55", "cortex-m0"])
def test_whole_channel_kernels_saturate_as_the_portable_loop(tmp_path, runtime):
    """The dense memory on values that drive 16- and 10-bit states into saturation (both forms, q = 16 and 20
    for the DSP one-statement kernel with constant bits and delta and the three-row loop with them read at run
    time, 132 (over 128, not a multiple of 16) for the three-row loop, 144 and 256 for the DSP two-row
    one-statement kernel (lmu_dsp_channel2_s16; with bits and delta read at run time, the three-row and the
    two-row loops), 18 for the two-row loop, 7 for the odd fallback): the DSP
    (Cortex-M4), Helium (Cortex-M55) and ARMv6-M kernels give the host's portable states bit for bit. The test
    models' states keep far from their bounds, so only crafted values reach the saturating finish of a 16-bit
    state. The whole-channel kernels keep to the first 2q bytes of their scratch (a loop running rows past q would
    write beyond them and change no state)."""
    want = _host_output(tmp_path, _SATURATE_C, runtime)
    assert int(want.split()[3]) > 1000, want  # the states saturate, at both widths
    if runtime != "host":
        assert _run_program(tmp_path, _SATURATE_C, runtime) == want


@needs_arm
@pytest.mark.parametrize("mode", ["int16", "int16x8"])
@pytest.mark.parametrize("path", ["dsp", "portable", "helium", "dsp-O0", "v6m"])
@pytest.mark.parametrize("q", [7, 13, 20])
def test_int16_weight_rows_are_bit_exact_on_each_path(shared, q, path, mode):
    """16-bit activations: the hidden layer's 11 rows of q products, int16 x int16 (--quantize int16,
    lmu_qdot16w_arm: SMLALD pairs) or int16 x int8 (int16x8, lmu_qdot16_arm: SMLALD on PKHBT / SXTB16 pairs
    of four inputs; the int16x8 rows in blocks of four, two and one: lmu_qdot16_run, SMLAD / VMLADAVA.S16, two
    rows at a time on ARMv6-M). 7: no full Helium vector, DSP blocks and a scalar tail; 13: one 8-input vector,
    DSP blocks, a tail; 20: two vectors and DSP blocks. The input stream holds runs at the int16 extremes."""

    def convert(d):
        rng = np.random.default_rng(200 + q)
        g = lmu_edge.fold(chain(rng, n_in=5, q=q, theta=3.0 * q, units=11), "zoh")
        x = rng.standard_normal((2, 60, 5))
        # int16x8 with int8 weights throughout (--weight-bits 8: no widening), the rows this test is about
        wb = 8 if mode == "int16x8" else None
        opts = {"weight_bits": wb, "measure": False, "flash": False, "accuracy_report": False}
        return x, lmu_edge.convert(g, "c", d / "c", quantize=mode, calibration=x, **opts)

    x, art = shared((mode, q), convert)
    assert (".w16 = " in (art.path / "model" / "model.c").read_text()) == (mode == "int16")
    qg = c_target._qgraph(art)
    xq = intsim.quantize_input(qg, np.concatenate([x, 40 * np.sign(x[:, :20])], axis=1))
    assert xq.min() == -32768 and xq.max() == 32767
    ref = intsim.run_int(qg, xq)
    runtime, extra, opt = PATHS[path]
    rt = toolchain.ARM_RUNTIMES[runtime]
    make = ["make", "-s", "-B", f"build/model_{rt.tag}.elf", f"FLAGS_{rt.tag}={' '.join(rt.cpu_flags)} {extra}"]
    if opt is not None:
        make.append(f"ARMOPT=-O{opt} -mthumb")
    subprocess.run(make, cwd=art.path / "harness", check=True, capture_output=True)
    c_target.write_input(art.path / "harness" / "lmu_in.bin", xq.astype(np.int16), c_target.DTYPE_CODES[np.int16])
    (art.path / "harness" / "lmu_out.bin").unlink(missing_ok=True)  # shared: no earlier path's output is read
    subprocess.run(
        toolchain.qemu_command(runtime, f"build/model_{rt.tag}.elf"),
        cwd=art.path / "harness",
        check=True,
        capture_output=True,
        timeout=120,
    )
    got = c_target.read_output(art.path / "harness" / "lmu_out.bin", 0).astype(np.int64)
    assert np.array_equal(got, ref)
