"""Every memory realization x state width x coefficient width, in C on every runtime, state compared
with the integer reference after every step.

All cases are converted once (each with its own C prefix) and linked into ONE image per runtime. Its
harness feeds the same int8 stream to every case and, after every step, folds the int8 outputs and
the persistent state (each LMU layer's memory ``m`` and hidden ``h`` arrays, bytes as they are in
``<prefix>_state_t``) into a running FNV-1a 64 hash that it writes out. The same hash is computed from
:class:`lmu_edge.intsim.IntStream`'s state in Python, so the first step where one state LSB differs
is named. The input holds long runs at the int8 extremes: 8-bit states whose bound cannot be proven
are driven into saturation (asserted), so the saturation bounds are checked too.

The same check runs for ``--quantize int16x8`` (int16 activations, int8 weights) on a smaller set of
cases: dense ZOH (both coefficient widths, 16- and 32-bit states), RK4, Pade, FIR, and the RNN path
(SimpleRNN hidden cell, hidden_to_memory, memory_to_memory), plus three ``--quantize int16`` cases
(int16 weights too), in one image fed an int16 stream with runs at the int16 extremes.

The runtimes come from ``lmu_edge.targets.c.RUNTIMES``: a runtime added there joins this test.
"""

import os
import re
import shutil
import subprocess
import types
import warnings
from pathlib import Path

import numpy as np
import pytest
from graphs import chain
from graphs import heads as heads_graph

import lmu_edge
from lmu_edge import intsim, ir, lti, qir, toolchain
from lmu_edge.targets import c as c_target
from lmu_edge.targets import c_codegen, c_kit

T = 240  # steps per case: 15 windows of the short cases
N_IN = 2
FNV_OFFSET, FNV_PRIME, MASK = 0xCBF29CE484222325, 0x100000001B3, (1 << 64) - 1
REALIZATIONS = ("zoh", "euler", "rk1", "rk2", "rk4", "pade", "fir")  # every realization fold can choose
STATE_BITS = (8, 16, 32)
COEFF_BITS = (16, 32)
CTYPE = {8: "<i1", 16: "<i2", 32: "<i4"}
CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _cases():
    out = []
    for real in REALIZATIONS:
        for sb in STATE_BITS:
            for cb in (None,) if real.startswith(("rk", "pade")) else COEFF_BITS:
                out.append((real, sb, cb, 6, 16.0))
    for real in ("zoh", "euler", "fir"):  # long windows: an unprovable 8-bit bound saturates (not FIR's)
        out.append((real, 8, None, 16, 200.0))
    # a 10-bit state (stored as int16) whose bound cannot be proven: it saturates, through the int16
    # state's row finish (lmu_dense_finish), which the DSP kernels share with the portable loop
    out.append(("zoh", 10, 16, 16, 1000.0))
    return out


#: memory_d > 1 (each channel's state block) and an odd order (the odd last row of the two-row loops)
SHAPE_CASES = [
    ("zoh", 8, 16, 6, 16.0, {"d": 2}),
    ("zoh", 16, 16, 6, 16.0, {"d": 2}),
    ("zoh", 32, 32, 6, 16.0, {"d": 2}),
    ("rk4", 16, None, 6, 16.0, {"d": 2}),
    ("fir", 16, None, 6, 16.0, {"d": 2}),
    ("zoh", 16, 16, 7, 16.0, {}),
    ("zoh", 32, 16, 7, 16.0, {}),
    # rows summed in 32-bit chunks of 5 columns on ARMv6-M (its last chunk is the one column q - 1)
    ("zoh", 16, 16, 16, 8.0, {}),
    # a FIR whose kernel is the source's own 12 taps (a trained fixed-length convolution): its last tap is
    # not zero, unlike the folded 5-theta kernels, whose tails quantize to 0
    ("fir", 16, 16, 6, 16.0, {"fir_taps": 12}),
]


CASES = _cases()
#: int16x8 cases: (realization, state bits, coeff bits, order, theta, graph options)
CASES16 = [
    ("zoh", 16, 16, 6, 16.0, {}),
    ("zoh", 16, 32, 6, 16.0, {}),
    ("zoh", 32, None, 6, 16.0, {}),
    ("rk4", 16, None, 6, 16.0, {}),
    ("pade", 16, None, 6, 16.0, {}),
    ("fir", 16, None, 6, 16.0, {}),
    ("zoh", 16, None, 6, 16.0, {"hidden": "simple_rnn", "rnn_path": True}),
    # --quantize int16: int16 weights too (the bias of every layer fits at the 16-bit weight scale here),
    # with the mode's default 32-bit state and a 16-bit one; the RNN path reads int16 weights in three parts
    ("zoh", None, None, 6, 16.0, {"mode": "int16"}),
    ("rk4", 16, None, 6, 16.0, {"mode": "int16"}),
    ("zoh", None, None, 6, 16.0, {"hidden": "simple_rnn", "rnn_path": True, "mode": "int16"}),
]


#: the layers around the memory (not the memory itself): a standalone activation (its lookup table), a
#: running mean over time and a softmax with an odd number of outputs (the row tail of the int8 Dense)
HEADS_CASE = ("zoh", 16, 16, 6, 16.0, {"heads": True})


def _stimulus(bits=8):
    """int8 (int16) stream: random, then long runs at the extremes (drives states to their bound)."""
    rng = np.random.default_rng(1313)
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    x = rng.integers(lo, hi + 1, (T, N_IN))
    x[60:120] = hi
    x[120:150] = lo
    x[150:170, 0], x[150:170, 1] = hi, lo
    return x.astype(np.int8 if bits == 8 else np.int16)


def _fnv(h, data: bytes) -> int:
    for b in data:
        h = ((h ^ b) * FNV_PRIME) & MASK
    return h


def _state_fields(header: str, prefix: str):
    """``[(layer index, 'm'|'h', bits)]`` of the persistent LMU state in ``<prefix>_state_t``, in layer order."""
    struct = header.split("typedef struct {", 1)[1].split(f"}} {prefix}_state_t;", 1)[0]
    found = [(int(i), kind, int(bits)) for bits, i, kind in re.findall(r"int(\d+)_t l(\d+)_(m|h)\[\d+\];", struct)]
    return sorted(found, key=lambda f: (f[0], f[1] != "m"))


def _python_hashes(qg, fields, x, out_ctype="<i1") -> np.ndarray:
    s = intsim.IntStream(qg)
    s.reset(1)
    h, out = FNV_OFFSET, []
    peak = 0
    for t in range(T):
        y = s.step(x[None, t].astype(np.int64))
        h = _fnv(h, y.astype(out_ctype).tobytes())
        for i, kind, bits in fields:
            r = s.runners[i]
            v = r.m.reshape(-1) if kind == "m" else r.h.reshape(-1)
            h = _fnv(h, v.astype(CTYPE[bits]).tobytes())
            if kind == "m":
                peak = max(peak, int(np.abs(r.m).max()), int(-r.m.min()))
        out.append(h)
    return np.array(out, dtype=np.uint64), peak


HARNESS = r"""/* lmu-edge state-matrix harness: every case on one stream; per step one running FNV-1a 64 hash
 * of the int8 outputs and the persistent state per case, written as the step's "output". */
#include <stdio.h>
#include <string.h>
#include "model.h"

/* not inlined: inlined into every case block, the 64-bit hashing took main a 4.8 KB frame, which on the
 * microbit (16 KB RAM) ran into the heap newlib had grown for the FILE structures, and the run faulted at exit */
static __attribute__((noinline)) uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = (const unsigned char *)p;
    size_t i;
    for (i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001B3ull;
    return h;
}

static __attribute__((noinline)) void put64(unsigned char *o, uint64_t h) {
    int k;
    for (k = 0; k < 8; ++k) o[k] = (unsigned char)(h >> (8 * k));
}

%(states)s

int main(int argc, char **argv) {
    const char *in_path = argc > 2 ? argv[1] : "lmu_in.bin";
    const char *out_path = argc > 2 ? argv[2] : "lmu_out.bin";
    static %(ctype)s x[%(T)d][%(N_IN)d];
    uint64_t h[%(n)d];
    unsigned char o[%(n)d * 8];
    char magic[4];
    int32_t hdr[4];
    int32_t t;
    FILE *fi, *fo;
    setvbuf(stdout, NULL, _IONBF, 0);  /* no stdio buffers: the genuine M0 (microbit) has 16 KB of RAM */
    fi = fopen(in_path, "rb");
    if (fi) setvbuf(fi, NULL, _IONBF, 0);
    if (!fi || fread(magic, 1, 4, fi) != 4 || fread(hdr, 4, 4, fi) != 4 || hdr[2] != %(T)d || hdr[3] != %(N_IN)d
        || fread(x, 1, sizeof(x), fi) != sizeof(x)) {
        printf("lmu-edge harness error: bad matrix input\n");
        return 2;
    }
    fclose(fi);
    fo = fopen(out_path, "wb");
    if (!fo) return 2;
    setvbuf(fo, NULL, _IONBF, 0);
    fwrite("LMUY", 1, 4, fo);
    hdr[0] = 1; hdr[1] = 1; hdr[3] = %(n)d * 8;
    fwrite(hdr, 4, 4, fo);
    memset(o, 0, sizeof(o));
%(resets)s
    for (t = 0; t < %(T)d; ++t) {
%(steps)s
        fwrite(o, 1, sizeof(o), fo);
    }
    fclose(fo);
    printf("lmu-edge: steps=%%lu ticks=0 state_bytes=0\n", (unsigned long)%(T)d);
    return 0;
}
"""


def _c_case(k, prefix, fields, api="int8"):
    n_out = f"{prefix.upper()}_N_OUTPUTS"
    lines = [f"        {{ {api}_t y[{n_out}]; {prefix}_step_{api}(&s{k}, x[t], y); h[{k}] = fnv(h[{k}], y, sizeof(y));"]
    for i, kind, _ in fields:
        lines.append(f"          h[{k}] = fnv(h[{k}], s{k}.l{i}_{kind}, sizeof(s{k}.l{i}_{kind}));")
    lines.append(f"          put64(o + {8 * k}, h[{k}]); }}")
    return "\n".join(lines)


#: int8 with some layers at 16-bit activations (the C target's int8 widening, quantize(widen_db=)): the
#: widening target picked so that the search widens some layers and not others. In the int8 image, an
#: int8 API: the softmax head at 16 bits (int8 -> int16 before it, int16 -> int8 after it), and the
#: RNN-path LMU at 16 bits between int8 Dense layers; in the int16 image, the input at 16 bits (an int16
#: API) with the layers after it int8 and the softmax head 16-bit again
MIXED8 = [
    ("zoh", 16, 16, 6, 16.0, {"heads": True, "widen_db": 45.0}),
    ("zoh", 16, 16, 6, 16.0, {"hidden": "simple_rnn", "rnn_path": True, "widen_db": 36.0}),
]
MIXED16 = [("zoh", 16, 16, 6, 16.0, {"heads": True, "widen_db": 60.0, "mode": "int8"})]
#: RK's short 8-bit cases have a provable bound since the substeps round at the working precision (guard
#: bits), so this long window's unprovable 8-bit bound saturates the RK kernel: the working value's bound
#: (bits + guard) and the state's, compared with the reference step by step. Last in the image, so the
#: cases before it keep their seeds (4000 + their index).
SATURATING8 = [("rk4", 8, None, 16, 200.0, {})]


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    cases = [c + ({},) for c in CASES] + SHAPE_CASES + [HEADS_CASE] + MIXED8 + SATURATING8
    return _build(tmp_path_factory, cases, "int8")


@pytest.fixture(scope="module")
def matrix16(tmp_path_factory):
    return _build(tmp_path_factory, CASES16 + [HEADS_CASE] + MIXED16, "int16x8")


def _cache_key(mode: str) -> str:
    """Hash of everything the matrix's Python side depends on: every ``.py`` and ``.j2`` file of the
    package (C headers, startup code and linker scripts are not part of it: they are re-copied from the
    package on every use of the cache), this test, its graphs and numpy's version."""
    import hashlib

    top = Path(__file__).resolve().parents[1]
    h = hashlib.sha256(f"{mode} {np.__version__}".encode())
    files = [Path(__file__).resolve(), top / "tests" / "graphs.py"]
    for sub in ("lmu_edge", "targets", "converters", "firmware_templates"):
        files += sorted(f for f in (top / sub).rglob("*") if f.suffix in (".py", ".j2"))
    for f in files:
        h.update(f.relative_to(top).as_posix().encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:20]


def _refresh_templates(root: Path) -> None:
    """Overwrite every copy of a verbatim firmware template under ``root`` with the package's current one
    (a cached tree then builds with the C runtime as it is now: the mutation harness mutates it)."""
    names = {
        *c_kit.runtime_headers('#include "lmu_runtime.h"'),
        "lmu_pade.h",
        "lmu_bandconv.h",
        "startup.c",
        *toolchain.LINKER_SCRIPTS,
    }
    for f in root.rglob("*"):
        if f.name in names and f.is_file():
            shutil.copyfile(c_kit.TEMPLATES / f.name, f)


def _build(tmp_path_factory, case_list, mode):
    """The matrix image's source tree and the reference hashes. With ``LMU_EDGE_TEST_CACHE`` set (the
    mutation harness sets it), the converted cases and their Python hashes are kept there, keyed by
    :func:`_cache_key`: a mutant of the C runtime then rebuilds only the C, not 30 conversions."""
    cache_dir = os.environ.get("LMU_EDGE_TEST_CACHE")
    cached = Path(cache_dir) / f"int_matrix-{mode}-{_cache_key(mode)}" if cache_dir else None
    if cached is not None and (cached / "done").exists():
        root = tmp_path_factory.mktemp("matrix" + mode)
        shutil.copytree(cached / "tree", root, dirs_exist_ok=True)
        _refresh_templates(root)
        ref = np.load(cached / "ref.npz")
        x8 = ref["x"]
        cases = []
        for k, case in enumerate(case_list):
            qg = lmu_edge.load(root / f"mx{k}" / "quantized.lmu.npz")
            cases.append(
                {
                    "case": tuple(case[:5]) + ((case[5],) if case[5] else ()),
                    "hashes": ref["hashes"][k],
                    "peak": int(ref["peaks"][k]),
                    "layer": next(lay for lay in qg.layers if isinstance(lay, qir.QLMU)),
                    "info": qg.metadata["quantization"],
                    "widths": _widths(qg),
                }
            )
        return _image(root / "all", len(case_list)), x8, cases
    image, x8, cases = _convert_all(tmp_path_factory, case_list, mode)
    if cached is not None:
        tmp = cached.with_name(cached.name + f".tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(image.path.parent, tmp / "tree")
        np.savez(
            tmp / "ref.npz",
            x=x8,
            hashes=np.stack([c["hashes"] for c in cases]),
            peaks=np.array([c["peak"] for c in cases], dtype=np.int64),
        )
        (tmp / "done").write_text("")
        shutil.rmtree(cached, ignore_errors=True)
        os.replace(tmp, cached)
    return image, x8, cases


def _widths(qg):
    """``[(layer type, activation bits)]`` of a quantized graph, in order."""
    return [(lay.TYPE, intsim.layer_bits(lay)) for lay in qg.layers]


def _image(d: Path, n: int):
    return types.SimpleNamespace(
        path=d, graph=types.SimpleNamespace(output_features=8 * n), manifest={"c": {"quantized": True}}
    )


def _convert_all(tmp_path_factory, case_list, mode):
    if shutil.which("gcc") is None or shutil.which("make") is None:
        if CI:
            pytest.fail("gcc / make missing under CI")
        pytest.skip("gcc / make not installed")
    bits = 16 if mode == "int16x8" else 8
    api, out_ctype = ("int16", "<i2") if bits == 16 else ("int8", "<i1")
    root = tmp_path_factory.mktemp("matrix" + mode)
    x8 = _stimulus(bits)
    cases, wrapper, headers, states, resets, steps = [], [], [], [], [], []
    for k, (real, sb, cb, q, theta, kw) in enumerate(case_list):
        rng = np.random.default_rng(4000 + k)
        kw = dict(kw)
        heads = kw.pop("heads", False)
        case_mode = kw.pop("mode", mode)
        # int8 cases are all-int8 (the int8 kernels) unless they ask for the widening; int16x8 its default
        widen = kw.pop("widen_db", None if case_mode == "int8" else "auto")
        taps = kw.pop("fir_taps", None)
        if taps:
            H = lti.legendre_impulse_response(q, theta, taps)
            kw["memory"] = ir.ImpulseResponse(kernel=H, provenance="learned")
        g = lmu_edge.fold(
            heads_graph(rng, q, theta)
            if heads
            else chain(rng, q=q, theta=theta, disc="euler" if real == "euler" else "zoh", **kw),
            real,
            error_budget=2.0,
            substeps=2 if real.startswith(("rk", "pade")) else None,
        )
        calib = rng.standard_normal((2, int(5 * theta), N_IN)) * 0.5
        prefix = f"mx{k}"
        # the C target's emit, not convert: the same quantized graph and C, without what the matrix never reads
        # (convert's verification on the calibration data, which the step-by-step comparison below subsumes,
        # its report, and the Cortex-M objects compiled for the report's flash figures: about half of each
        # case's conversion time)
        opts = dict(c_target.OPTIONS, quantize=case_mode, calibration=calib, flash=False)
        opts.update(state_bits=sb, coeff_bits=cb, prefix=prefix, measure=False, widen_db=widen)
        (root / prefix).mkdir()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # 8-bit states warn that their bound is calibrated
            c_target.emit(g, root / prefix, opts)
        qg = lmu_edge.load(root / prefix / "quantized.lmu.npz")
        header = (root / prefix / prefix / f"{prefix}.h").read_text()
        fields = _state_fields(header, prefix)
        assert any(kind == "m" for _, kind, _ in fields), f"{prefix}: no LMU state array found in model.h"
        py, peak = _python_hashes(qg, fields, x8, out_ctype)
        lmu = next(lay for lay in qg.layers if isinstance(lay, qir.QLMU))
        cases.append(
            {
                "case": (real, sb, cb, q, theta) + ((case_list[k][5],) if case_list[k][5] else ()),
                "hashes": py,
                "peak": peak,
                "layer": lmu,
                "info": qg.metadata["quantization"],
                "widths": _widths(qg),
            }
        )
        wrapper.append(f'#include "{prefix}/{prefix}/{prefix}.c"')  # the artifact's kit folder
        headers.append(f'#include "{prefix}/{prefix}/{prefix}.h"')
        states.append(f"static {prefix}_state_t s{k};")
        resets.append(f"    {prefix}_reset(&s{k}); h[{k}] = 0xCBF29CE484222325ull;")
        steps.append(_c_case(k, prefix, fields, api))
    d = root / "all"
    d.mkdir()
    for name in (
        *c_kit.runtime_headers('#include "lmu_runtime.h"'),
        "lmu_pade.h",
        "lmu_bandconv.h",
        "startup.c",
        *toolchain.LINKER_SCRIPTS,
    ):
        shutil.copyfile(c_kit.TEMPLATES / name, d / name)
    # the harness builds model.c (the wrapper) from this folder, not the first artifact's kit
    makefile = (root / "mx0" / "harness" / "Makefile").read_text()  # the first case's harness folder
    (d / "Makefile").write_text("LMU_KIT = .\nLMU_MODEL_SRC = model.c\n" + makefile)
    for k in range(len(case_list)):
        shutil.copytree(root / f"mx{k}", d / f"mx{k}")
    (d / "model.h").write_text(
        "#ifndef MATRIX_H\n#define MATRIX_H\n#include <stdint.h>\n" + "\n".join(headers) + "\n#endif\n"
    )
    (d / "model.c").write_text("\n".join(wrapper) + "\n")
    (d / "harness.c").write_text(
        HARNESS
        % {
            "states": "\n".join(states),
            "T": T,
            "N_IN": N_IN,
            "n": len(case_list),
            "ctype": f"{api}_t",
            "resets": "\n".join(resets),
            "steps": "\n".join(steps),
        }
    )
    return _image(d, len(case_list)), x8, cases


def _kind(mem):
    if isinstance(mem, qir.QDenseMemory):
        return f"dense-{mem.form}"
    if mem.TYPE == "q_pade_memory":
        return "pade"
    return "rk" if isinstance(mem, qir.QRKMemory) else "fir"


def test_the_matrix_covers_every_realization_form_and_width(matrix):
    _, _, cases = matrix
    mems = [c["layer"].memory for c in cases]
    assert {_kind(m) for m in mems} >= {"rk", "pade", "fir", "dense-delta"}
    assert {c["layer"].state_type.width for c in cases} >= set(STATE_BITS)
    for kind in ("dense", "fir"):
        assert {m.coeff_bits for m in mems if _kind(m).startswith(kind)} >= set(COEFF_BITS)
    assert {m.rk_order for m in mems if _kind(m) == "rk"} == {1, 2, 4}
    # some int16 x int16 dense memory sums its rows in 32-bit chunks shorter than a row (ARMv6-M's loop),
    # with a last chunk of one column
    chunks = [
        (m.coeffs.shape[1], c_codegen.dense_chunk(m.coeffs, 16))
        for m, c in zip(mems, cases, strict=True)
        if isinstance(m, qir.QDenseMemory) and c["case"][1] == 16 and m.coeff_bits == 16
    ]
    assert any(k < q and (q - 1) % k == 0 for q, k in chunks), chunks
    # some FIR kernel's oldest tap is not zero (the folded ones end in zeros: their tails round away)
    assert any(np.any(m.kernel[:, -1]) for m in mems if _kind(m) == "fir")


def test_eight_bit_states_are_driven_into_saturation(matrix):
    _, _, cases = matrix
    saturated = {_kind(c["layer"].memory).split("-")[0] for c in cases if c["case"][1] == 8 and c["peak"] >= 127}
    # dense and RK 8-bit states reach their saturation bound on this stream (so the C saturation
    # bounds are compared with the reference's, step by step, in the tests below). FIR cannot: one
    # rounding per output, so its 8-bit bound is always proven and its saturation never fires.
    assert saturated >= {"dense", "rk"}
    ten = [c for c in cases if c["case"][1] == 10]
    assert ten and all(c["peak"] >= 511 for c in ten), "the 10-bit dense state never reaches its saturation bound"
    for c in cases:
        proven = [lay for lay in c["info"]["layers"] if lay["type"] == "lmu"][0]["bound_proven"]
        if proven:
            assert c["peak"] <= c["layer"].state_bound * 2.0 ** c["layer"].state_type.frac, c["case"]


def test_the_mixed_precision_cases_change_width_in_both_directions(matrix, matrix16):
    """The int8 widening's cases (MIXED8, MIXED16) run what the search chose: in the int8 image an int8
    API with 16-bit layers inside, converted up and down; in the int16 image an int16 input whose int8
    layers follow a conversion down. Every other int8 case is all-int8 (their kernels are the point)."""
    cases8, cases16 = matrix[2], matrix16[2]
    cases8 = cases8[: -len(SATURATING8)]
    for c in cases8[: -len(MIXED8)] + matrix[2][-len(SATURATING8) :]:
        assert {b for _, b in c["widths"]} == {8} and not c["info"].get("widened"), c["case"]
    for c in cases8[-len(MIXED8) :]:
        w = c["widths"]
        assert w[0] == ("q_input", 8) and w[-1][1] == 8, (c["case"], w)  # the int8 API
        assert ("q_convert", 16) in w and ("q_convert", 8) in w, (c["case"], w)
        assert c["info"]["widened"] and "input" not in c["info"]["widened"], c["info"]["widened"]
    assert ("q_softmax", 16) in cases8[-2]["widths"] and ("q_lmu", 16) in cases8[-1]["widths"]
    w = cases16[-1]["widths"]
    assert w[0] == ("q_input", 16) and w[1] == ("q_convert", 8) and w[-1][1] == 16, w  # the int16 API
    assert ("q_lmu", 8) in w and ("q_convert", 16) in w, w
    assert cases16[-1]["info"]["activation_bits"] == 8 and "input" in cases16[-1]["info"]["widened"]


def _compare(image, x8, cases, runtime):
    if runtime != "host" and not (shutil.which("arm-none-eabi-gcc") and shutil.which("qemu-system-arm")):
        if CI:
            pytest.fail("arm-none-eabi-gcc / qemu-system-arm missing under CI")
        pytest.skip("arm-none-eabi-gcc / qemu-system-arm not installed")
    y, _ = c_target.run_native(image, x8[None], runtime)
    got = np.ascontiguousarray(y[0]).view("<u8")  # (T, n_cases)
    assert got.shape == (T, len(cases))
    bad = []
    for k, c in enumerate(cases):
        diff = np.nonzero(got[:, k] != c["hashes"])[0]
        if diff.size:
            bad.append(f"{c['case']} first differs at step {diff[0]}")
    assert not bad, f"{runtime}: C state/outputs differ from lmu_edge.intsim: " + "; ".join(bad)


@pytest.mark.parametrize("runtime", c_target.RUNTIMES)
def test_every_case_matches_the_integer_reference_state_after_every_step(matrix, runtime):
    _compare(*matrix, runtime)


def _parts(L) -> list:
    """``(field, QPart)`` of a QLMU's encoder and hidden cell, named as ``quantization.LMU_PARTS``."""
    enc = ["input_encoders"] + ["hidden_encoders"] * L.hidden_to_memory + ["memory_encoders"] * L.memory_to_memory
    hid = [] if L.hidden is None else ["hidden"] + ["recurrent_kernel"] * L.hidden_recurrent
    out = list(zip(enc, L.encoder.parts, strict=True))
    return out + ([] if L.hidden is None else list(zip(hid, L.hidden.parts, strict=True)))


def test_the_int16x8_matrix_is_int16_throughout(matrix16):
    _, x16, cases = matrix16
    assert x16.dtype == np.int16 and x16.min() == -32768 and x16.max() == 32767
    assert {_kind(c["layer"].memory) for c in cases} >= {"dense-delta", "rk", "pade", "fir"}
    for c in cases[: -len(MIXED16)]:
        L = c["layer"]
        assert L.act_bits == 16 and L.encoder.in_bits == 16 and L.z_zp == 0
        assert c["info"]["activation_bits"] == 16
        # the int16 mode's cases: every weight part int16, full range; int16x8's: int8, but for the
        # parts its widening gave 16 bits (quantize(widen_db=): random weights miss 48 dB in int8)
        int16 = c["info"]["weight_bits"] == 16
        widened = set(c["info"].get("widened", ()))
        for field, p in _parts(L):
            assert (int(np.abs(p.kernel).max()) == 32767) == (int16 or f"{L.name}.{field}" in widened), c["case"]
        if int16 and c["case"][1] is None:
            assert L.state_type.width == 32  # the int16 mode's default state
    assert sum(c["info"]["weight_bits"] == 16 for c in cases) == 3
    # mixed widths are exercised: an int16x8 case with a widened part beside an int8 one in one layer,
    # and one with none widened
    mixed = [c for c in cases if c["info"]["weight_bits"] == 8 and c["info"].get("widened")]
    assert any(0 < len(c["info"]["widened"]) < len(_parts(c["layer"])) for c in mixed), [c["case"] for c in mixed]
    assert any(c["info"]["weight_bits"] == 8 and not c["info"].get("widened") for c in cases)
    rnn = [c["layer"] for c in cases if c["layer"].hidden_recurrent]
    assert rnn and rnn[0].hidden_to_memory and rnn[0].memory_to_memory


@pytest.mark.parametrize("runtime", c_target.RUNTIMES)
def test_every_int16x8_case_matches_the_integer_reference_state_after_every_step(matrix16, runtime):
    _compare(*matrix16, runtime)


def _sanitized(image, x, cases, tmp_path):
    """Build the host image with AddressSanitizer and UndefinedBehaviorSanitizer (any finding aborts the
    run) and compare every case's hashes: an out-of-bounds read or a signed overflow in a kernel fails
    even where it does not change a result."""
    if shutil.which("gcc") is None:
        pytest.fail("gcc missing") if CI else pytest.skip("gcc not installed")
    d = tmp_path / "asan"
    shutil.copytree(image.path, d, ignore=shutil.ignore_patterns("build"))
    flags = "CFLAGS=-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all"
    r = subprocess.run(["make", "-s", "-B", "build/harness_host", flags], cwd=d, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    c_target.write_input(d / "lmu_in.bin", x[None], c_target.DTYPE_CODES[x.dtype.type])
    r = subprocess.run(
        [str(d / "build" / "harness_host"), "lmu_in.bin", "lmu_out.bin"], cwd=d, capture_output=True, text=True
    )
    assert r.returncode == 0, f"sanitizer finding: {(r.stdout + r.stderr).strip()[-2000:]}"
    got = np.ascontiguousarray(c_target.read_output(d / "lmu_out.bin", 8 * len(cases))[0]).view("<u8")
    for k, c in enumerate(cases):
        assert np.array_equal(got[:, k], c["hashes"]), c["case"]


def test_host_build_is_clean_under_the_address_and_undefined_sanitizers(matrix, matrix16, tmp_path):
    _sanitized(*matrix, tmp_path / "int8")
    _sanitized(*matrix16, tmp_path / "int16x8")
