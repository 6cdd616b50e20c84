"""The implicit Pade realization on its targets: float C against the float oracle, integer C against the
integer oracle bit for bit (outputs and state), and the targets without it refusing in one line."""

import os
import shutil
import warnings

import numpy as np
import pytest
from graphs import chain

import lmu_edge
from lmu_edge import intsim, ir, pade
from lmu_edge.errors import LmuEdgeError

CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _need_gcc():
    if shutil.which("gcc") is None or shutil.which("make") is None:
        if CI:
            pytest.fail("gcc / make missing under CI")
        pytest.skip("gcc / make not installed")


def _pade_graph(seed=11, q=12, theta=40.0, substeps=3, name="pade"):
    rng = np.random.default_rng(seed)
    g = chain(rng, q=q, theta=theta)
    # [3/4] at a fixed substep count; the others searched (they need more substeps for 1e-6)
    return lmu_edge.fold(g, name, error_budget=1e-6, substeps=substeps if name == "pade" else None), rng


def test_float_c_runs_the_implicit_step_as_the_float_oracle_does(tmp_path):
    _need_gcc()
    g, rng = _pade_graph()
    assert isinstance(g.layers[1].memory, ir.Pade)
    x = rng.standard_normal((2, 200, 2))
    art = lmu_edge.convert(g, "c", tmp_path / "f", calibration=x, measure=False)
    y = art.run(x)
    ref = lmu_edge.simulate(g, x)
    # float32 arithmetic against the float64 oracle: a few float32 ulps of the output scale
    assert np.max(np.abs(y - ref)) <= 1e-5 * np.max(np.abs(ref))
    assert "lmu_f_pade_memory" in (art.path / "model" / "model.c").read_text()


@pytest.mark.parametrize("state_bits,name", [(8, "pade"), (16, "pade"), (32, "pade"), (16, "pade23"), (16, "pade22")])
def test_integer_c_matches_the_integer_oracle_bit_for_bit(tmp_path, state_bits, name):
    # outputs here; tests/test_int_matrix.py compares the state after every step too
    _need_gcc()
    from lmu_edge.targets import c as c_target

    g, rng = _pade_graph(seed=20 + state_bits, name=name)
    cal = rng.standard_normal((2, 200, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an 8-bit state's bound is calibrated, not proven
        art = lmu_edge.convert(
            g,
            "c",
            tmp_path / "q",
            quantize="int8",
            calibration=cal,
            state_bits=state_bits,
            measure=False,
            widen_db=None,
        )
    qg = lmu_edge.load(art.path / "quantized.lmu.npz")
    assert isinstance(qg.layers[2].memory, pade.QPadeMemory)
    assert art.manifest["c"]["quantized"]
    assert "lmu_pade_memory_s" in (art.path / "model" / "model.c").read_text()
    assert (art.path / "model" / "lmu_pade.h").is_file()  # the kit holds the header the source includes
    x8 = rng.integers(-128, 128, (1, 300, 2))
    x8[0, 100:160] = 127  # long runs at the extremes push the state to its bound
    y, _ = c_target.run_native(art, x8.astype(np.int8), "host")
    np.testing.assert_array_equal(np.asarray(y, np.int64), intsim.run_int(qg, x8))
    # the oracle's state stays within its proven bound (tests/test_int_matrix.py compares the C state
    # with the oracle's after every step)
    s = intsim.IntStream(qg)
    s.reset(1)
    for t in range(x8.shape[1]):
        s.step(x8[:, t])
    assert np.abs(s.runners[2].m).max() > 0
    info = [i for i in qg.metadata["quantization"]["layers"] if i["type"] == "lmu"][0]
    if info["bound_proven"]:
        assert s.state_peaks()[qg.layers[2].name] <= info["state_bound_lsb"]


def test_quantized_pade_stays_close_to_the_float_model():
    g, rng = _pade_graph(seed=5, q=16, theta=60.0, substeps=4)
    x = rng.standard_normal((2, 300, 2))
    qg = lmu_edge.quantize(g, x, state_bits=16)
    err_p = qg.metadata["quantization"]["calibration_error"]
    gz = lmu_edge.fold(chain(np.random.default_rng(5), q=16, theta=60.0), "zoh")
    err_z = lmu_edge.quantize(gz, x, state_bits=16).metadata["quantization"]["calibration_error"]
    # the int8 activations dominate: the implicit step's state adds next to nothing over dense ZOH's
    assert err_p <= 1.2 * err_z + 1e-3


@pytest.mark.parametrize("target", ["tflite", "onnx", "nengo", "nir"])
def test_targets_without_the_implicit_step_refuse_it_in_one_line(tmp_path, target):
    g, _ = _pade_graph()
    with pytest.raises(LmuEdgeError) as e:
        lmu_edge.convert(g, target, tmp_path / target)
    msg = str(e.value)
    assert "\n" not in msg and "'pade'" in msg and "--realization rk4" in msg and "or zoh" in msg and target in msg


@pytest.mark.parametrize("state_bits,max_lsb,max_of_bound", [(16, 100, 5e-3), (32, None, 1e-3)])
def test_integer_step_drifts_little_from_the_float_step(state_bits, max_lsb, max_of_bound):
    # order 64, theta 200, 8 substeps, a +-1 input for 3 theta: the integer state against the float map of
    # the same step. Measured (2026-11-24): 57 LSB at 16 bits (8 guard bits; without them the forward
    # substitution's amplification of its roundings gave thousands); at 32 bits the solve runs at a 24-bit
    # work width (int64 products), so the drift is about 6e-4 of the bound, not 32-bit precision.
    q, theta, s = 64, 200.0, 8
    layer = ir.LMU("lmu", 1, q, theta, "zoh", np.ones((1, 1)), ir.ImpulseResponse())
    g = lmu_edge.fold(ir.Graph("g", 1, (layer,)), "pade", substeps=s)
    x = np.sign(np.random.default_rng(0).standard_normal((1, 600, 1)))
    L = lmu_edge.quantize(g, x, state_bits=state_bits).layers[1]
    st, ut = L.state_type, L.u_type
    u = np.clip(np.round(x[0, :, 0] * 2.0**ut.frac), ut.min_int, ut.max_int).astype(np.int64)
    got = intsim.memory_response(L, u[:, None]) * 2.0**-st.frac
    M, N = pade.pade_map(q, theta, (3, 4), s)
    m, worst = np.zeros(q), 0.0
    for t in range(len(u)):
        m = M @ m + N * (u[t] * 2.0**-ut.frac)
        worst = max(worst, float(np.max(np.abs(got[t] - m))))
    assert worst <= max_of_bound * L.state_bound
    if max_lsb is not None:
        assert worst * 2.0**st.frac <= max_lsb
