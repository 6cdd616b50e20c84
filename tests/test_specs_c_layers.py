"""Specifications of targets/c_layers.py (the C of the band convolutions and of the implicit Pade memory), a
covering command for its generated mutants (docs/testing.md, "Generated mutants"): the packed weights'
layout over every kernel shape, and one small model with both layers compiled for the host (int8,
int16x8 and float32) and for the Cortex-M4 under QEMU (the two-band kernel, which only DSP cores take), stepped
against the integer and the float references."""

import os
import shutil

import numpy as np
import pytest
from graphs import lmu
from hypothesis import example, given
from hypothesis import strategies as st

import lmu_edge
from lmu_edge import intsim, ir, qir
from lmu_edge.metrics import relative_error
from lmu_edge.targets import c_layers

CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _need(*tools):
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        if CI:
            pytest.fail(f"{', '.join(missing)} missing under CI")
        pytest.skip(f"{', '.join(missing)} not installed")


@given(n_in=st.integers(1, 13), n_out=st.integers(1, 9), seed=st.integers(0, 2**16))
@example(n_in=4, n_out=2, seed=0)
@example(n_in=5, n_out=3, seed=1)
def test_band_pack_puts_each_weight_where_the_two_row_kernel_reads_it(n_in, n_out, seed):
    """Spec (``band_pack``): rows in pairs, columns in groups of four; the word pair of row 2r + j, group g is
    (w[4g], w[4g + 2], w[4g + 1], w[4g + 3]) of that row; an odd last row and the columns past n_in are 0."""
    k = np.random.default_rng(seed).integers(-128, 128, (n_in, n_out))
    p = c_layers.band_pack(k)
    groups = -(-n_in // 4)
    assert p.shape == (-(-n_out // 2), groups, 2, 4) and p.dtype == np.int8
    for r in range(p.shape[0]):
        for g in range(groups):
            for j in range(2):
                row = 2 * r + j
                for slot, col in enumerate((4 * g, 4 * g + 2, 4 * g + 1, 4 * g + 3)):
                    want = k[col, row] if row < n_out and col < n_in else 0
                    assert p[r, g, j, slot] == want, (r, g, j, slot)


def _graph() -> ir.Graph:
    """Two band convolutions (the first with a frame history of 2, zero padding both sides and pooling
    2; the second with pooling 3 over an odd band count) -> an LMU with the implicit Pade memory -> Dense."""
    rng = np.random.default_rng(57)
    bands = 9
    a = ir.BandConv("c1", bands, rng.standard_normal((3, 3, 1, 4)) * 0.5, rng.standard_normal(4) * 0.1, 1, 1, "relu", 2)
    n = a.out_features(bands)
    b = ir.BandConv("c2", a.out_bands, rng.standard_normal((2, 3, 4, 5)) * 0.3, None, 1, 0, "linear", 3)
    n = b.out_features(n)
    mem = lmu(rng, "pade", n_in=n, d=2, q=4, theta=12.0, units=3)
    head = ir.Dense("head", rng.standard_normal((mem.out_features(n), 2)) * 0.3, np.zeros(2), "linear")
    g = ir.Graph("bands_pade", bands, (a, b, mem, head))
    return lmu_edge.fold(g, "pade", substeps=3, error_budget=1e-2)  # 3 ** poles != 3 * poles


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    _need("gcc", "make")
    g = _graph()
    assert isinstance(g.layers[2].memory, ir.Pade)  # the premise: fold kept the implicit step
    x = np.random.default_rng(5).standard_normal((2, 12, g.input_features))
    d = tmp_path_factory.mktemp("c_layers")
    kw = dict(calibration=x, widen_db=None, measure=False)  # no widening search: widths fixed
    # a 17-bit state: the Pade step's C type is the next width up (int32_t)
    modes = {"int8": ("int8", 16), "int16x8": ("int16x8", 16), "int8-state17": ("int8", 17)}
    arts = {k: lmu_edge.convert(g, "c", d / k, quantize=m, state_bits=b, **kw) for k, (m, b) in modes.items()}
    return g, x, d, arts


@pytest.mark.parametrize("mode", ["int8", "int16x8", "int8-state17"])
def test_integer_c_of_band_convolutions_and_a_pade_memory_is_the_integer_reference(model, mode):
    """Spec: the integer C (8- and 16-bit activations, a 16- and a 17-bit state) is the integer reference bit
    for bit on the host, where every band takes the linear kernel."""
    g, x, _, arts = model
    art = arts[mode]
    qg = lmu_edge.load(art.path / "quantized.lmu.npz")
    assert sum(isinstance(layer, qir.QBandConv) for layer in qg.layers) == 2
    xq = intsim.quantize_input(qg, x)
    y, _ = art.module.run_native(art, xq.astype(intsim.act_dtype(qg)), "host")
    assert np.array_equal(y.astype(np.int64), intsim.run_int(qg, xq))


def test_float_c_of_band_convolutions_and_a_pade_memory_is_the_float_reference(model):
    """Spec: the float32 C steps as the float64 oracle within float32 rounding (1e-5 of the output scale)."""
    g, x, d, _ = model
    art = lmu_edge.convert(g, "c", d / "float", measure=False)
    assert relative_error(art.run(x), lmu_edge.simulate(g, x)) <= 1e-5


def test_the_two_band_kernel_on_cortex_m4_is_the_integer_reference(model):
    """Spec: on a DSP core (Cortex-M4 under QEMU) an int8 band convolution with a 30-bit accumulator takes
    lmu_band_rows_i8, two bands a call with the packed weights, and the outputs are the integer reference's
    bit for bit."""
    _need("arm-none-eabi-gcc", "qemu-system-arm")
    g, x, _, arts = model
    art = arts["int8"]
    qg = lmu_edge.load(art.path / "quantized.lmu.npz")
    assert "lmu_band_rows_i8(" in (art.path / "model" / "model.c").read_text()  # an 8-bit acc30 layer's path
    xq = intsim.quantize_input(qg, x[:1])
    y, _ = art.module.run_native(art, xq.astype(intsim.act_dtype(qg)), "cortex-m4")
    assert np.array_equal(y.astype(np.int64), intsim.run_int(qg, xq))


def test_the_scratch_buffers_and_mac_counts_are_the_kernels(model):
    """Spec: the generated state gives each kernel the scratch its header asks for (lmu_pade.h: the float step
    3 q floats, the integer one 4 q int64; lmu_bandconv.h: two bands' output rows, 2 channels_out int8), a band
    convolution's frame history kernel_t - 1 input frames; and the reported MACs count 12 q per pole, substep
    and memory dimension for the Pade step, kernel_t kernel_f channels_in channels_out per band computed for a
    band convolution, inputs x outputs for the rest."""
    from lmu_edge import pade
    from lmu_edge.targets import c_codegen

    g, _, _, arts = model
    qg = lmu_edge.load(arts["int8"].path / "quantized.lmu.npz")
    fl, it = c_codegen.generate_float(g, "p"), c_codegen.generate_int(qg, "p")
    i, L = next((i, layer) for i, layer in enumerate(g.layers) if isinstance(layer, ir.LMU))
    j, Q = next((j, layer) for j, layer in enumerate(qg.layers) if isinstance(layer, qir.QLMU))
    d, q, mem = L.memory_d, L.order, L.memory
    assert ("float", f"l{i}_pade_work", 3 * q) in fl.fields
    assert ("int64_t", f"l{j}_pade_work", 4 * q) in it.fields
    packed = [
        k for k, layer in enumerate(qg.layers) if isinstance(layer, qir.QBandConv) and f"l{k}_row2" in str(it.fields)
    ]
    assert packed  # the premise: a two-band layer
    for k in packed:
        assert ("int8_t", f"l{k}_row2", 2 * qg.layers[k].linear.units) in it.fields
    n = g.input_features
    for k, layer in enumerate(g.layers):  # the frame history: kernel_t - 1 input frames
        if isinstance(layer, ir.BandConv):
            assert ("float", f"l{k}_hist", (layer.kernel_t - 1) * n) in fl.fields
        n = layer.out_features(n)
    poles = len(pade.step_constants(q, L.theta, mem.orders, mem.substeps)["gc"])
    assert Q.memory.gc.shape[0] == poles
    want, n = 0, g.input_features
    for layer in g.layers:
        if isinstance(layer, ir.BandConv):
            kt, kf, ci, co = layer.kernel.shape
            want += layer.out_bands * layer.pool * kt * kf * ci * co
        elif isinstance(layer, ir.Dense):
            want += n * layer.kernel.shape[1]
        else:
            units = layer.hidden.units
            want += n * d + d * mem.substeps * poles * 12 * q + d * q * units
        n = layer.out_features(n)
    assert fl.macs == want and it.macs == want
