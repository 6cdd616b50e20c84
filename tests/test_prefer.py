"""``prefer``: what auto minimises (operations, flash or RAM), with the trade-off stated."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import lmu_edge
from lmu_edge import folding as fold
from lmu_edge import ir
from lmu_edge.errors import FoldError


def _graph(q=64, theta=200.0):
    layer = ir.LMU("mem", 1, q, theta, "zoh", np.ones((1, 1)), ir.ImpulseResponse())
    return ir.Graph("p", 1, (layer,))


def test_ops_flash_and_ram_choose_differently_and_say_what_it_costs():
    g = _graph()
    by_ops = lmu_edge.fold(g, prefer="ops")
    by_flash = lmu_edge.fold(g, prefer="flash")
    by_ram = lmu_edge.fold(g, prefer="ram")
    o, f, r = (x.layers[0] for x in (by_ops, by_flash, by_ram))
    # order 64, theta 200: dense ZOH has the fewest operations (and the least RAM), but stores q*q numbers
    assert isinstance(o.memory, ir.DenseSS) and isinstance(r.memory, ir.DenseSS)
    assert not isinstance(f.memory, ir.DenseSS)
    assert f.measurement.coeffs_stored <= fold.FLASH_SMALL * 64 < o.measurement.coeffs_stored
    assert f.measurement.ops_per_step > o.measurement.ops_per_step
    assert f.measurement.error <= 1e-6
    # of the O(q) realizations flash takes the fewest operations: the implicit step beats RK4 here
    rk = fold.candidates(g.layers[0], 1e-6, ["rk4"])[0]
    assert f.measurement.ops_per_step < rk.measurement.ops_per_step
    text = by_flash.metadata["fold"]["tradeoffs"]["mem"]
    assert "prefer flash" in text and "instead of zoh" in text and "fewer" in text and "ops/step" in text
    assert "also the fewest-operations choice" in by_ops.metadata["fold"]["tradeoffs"]["mem"]
    assert by_flash.metadata["fold"]["prefer"] == "flash"


def test_ram_prunes_families_that_cannot_win_and_flash_does_not_prune_by_dense_ops():
    layer = _graph().layers[0]
    ram = {c.name: c for c in fold.candidates(layer, 1e-6, prefer="ram")}
    # dense keeps 2q numbers, a structured step at least 5q: their searches stop at one substep
    assert ram["pade"].memory.substeps == 1 and "under this preference" in ram["pade"].note
    flash = {c.name: c for c in fold.candidates(layer, 1e-6, prefer="flash")}
    assert flash["pade"].ok and not flash["pade"].note
    # RK4 must beat the implicit step's operations to win under flash: its search is capped by them
    assert "cannot beat pade" in flash["rk4"].note


def test_unknown_preference_is_refused():
    with pytest.raises(FoldError, match="unknown preference"):
        lmu_edge.fold(_graph(8, 20.0), prefer="speed")


def test_cli_prefers_flash_with_a_device_and_prints_the_tradeoff(tmp_path):
    lmu_edge.save(_graph(), tmp_path / "m.lmu.npz")

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "lmu_edge.cli", *map(str, args)], capture_output=True, text=True)

    r = cli("convert", tmp_path / "m.lmu.npz", "--target", "ir", "-o", tmp_path / "a", "--prefer", "flash", "-q")
    assert r.returncode == 0, r.stderr
    assert "prefer flash" in r.stdout and "instead of zoh" in r.stdout and "; --prefer flash was given" in r.stdout
    assert "--prefer ops keeps" not in r.stdout  # given, not chosen for the user
    rep = json.loads((tmp_path / "a" / "report.json").read_text())
    assert rep["realization_choice"]["prefer"] == "flash"
    r = cli("convert", tmp_path / "m.lmu.npz", "--target", "ir", "-o", tmp_path / "b", "-q")
    assert r.returncode == 0 and "prefer ops" not in r.stdout  # the default preference goes unsaid
    rep = json.loads((tmp_path / "b" / "report.json").read_text())
    assert rep["realization_choice"]["why"] == "the default"
    assert "also the fewest-operations choice" in rep["realization_choice"]["tradeoffs"]["mem"]
    r = cli("convert", tmp_path / "m.lmu.npz", "--target", "ir", "-o", tmp_path / "c", "--prefer", "speed")
    assert r.returncode != 0 and "Traceback" not in r.stderr


def _need_gcc_and_make():
    import shutil

    if shutil.which("gcc") is None or shutil.which("make") is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("gcc / make missing under CI")
        pytest.skip("gcc / make not installed")


def _convert_chain(path, **kw):
    import warnings

    from graphs import chain

    rng = np.random.default_rng(3)
    g = chain(rng, q=64, theta=200.0)
    x = rng.standard_normal((1, 120, 2))  # short: the integer RK run is slow in Python
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # weight_bits fixed: no search for 16-bit activations (each of its ~20 integer runs of an RK
        # memory with 24 substeps takes seconds in Python), and no accuracy report (it runs them again): the
        # choice and the sizes read below are written without it
        art = lmu_edge.convert(
            g, "c", path, quantize="int8", calibration=x, measure=False, weight_bits=8, accuracy_report=False, **kw
        )
    rep = json.loads((art.path / "report.json").read_text())
    return rep, lmu_edge.load(art.path / "model.lmu.npz").layers[1]


def test_a_device_keeps_the_fewest_operations_where_they_fit_and_else_prefers_flash(tmp_path, monkeypatch):
    """With --device the default is ops while the artifact fits the device, else flash (converted again).
    Catches a device that makes flash the default outright (71x the M0 instructions for 1,296 B of the
    digits model, test below), and a fallback that never happens or keeps the failing preference."""
    from lmu_edge.errors import DeviceFitError
    from lmu_edge.targets import c as c_target

    _need_gcc_and_make()
    rep, mem = _convert_chain(tmp_path / "fits", device="cortex-m0-32k")
    assert rep["realization_choice"]["prefer"] == "ops", rep["realization_choice"]
    assert rep["realization_choice"]["why"] == "it fits --device cortex-m0-32k"
    assert isinstance(mem.memory, ir.DenseSS)
    zoh_flash = rep["c"]["flash_bytes_m0"]
    rep, mem = _convert_chain(tmp_path / "flash", device="cortex-m0-32k", prefer="flash")
    assert rep["realization_choice"]["why"] == "given" and not isinstance(mem.memory, ir.DenseSS)
    small_flash = rep["c"]["flash_bytes_m0"]
    assert small_flash < zoh_flash
    # a part whose flash holds the O(q) realization and not the dense one (a device profile is data)
    part = dict(c_target.DEVICES["cortex-m0-32k"], flash=(small_flash + zoh_flash) // 2, example="a small part")
    monkeypatch.setitem(c_target.DEVICES, "small-m0", part)
    rep, mem = _convert_chain(tmp_path / "small", device="small-m0")
    choice = rep["realization_choice"]
    assert choice["prefer"] == "flash" and not isinstance(mem.memory, ir.DenseSS), choice
    assert choice["why"].startswith("the fewest-operations model does not fit --device small-m0: flash: needs ")
    assert rep["c"]["flash_bytes_m0"] == small_flash and rep["c"]["device"]["fits"]
    assert "instead of zoh" in choice["tradeoffs"]["lmu"]
    # where neither fits, the flash attempt's refusal is what the user gets, and nothing is written
    monkeypatch.setitem(c_target.DEVICES, "small-m0", dict(part, flash=small_flash - 1))
    with pytest.raises(DeviceFitError, match=f"flash: needs {small_flash} bytes"):
        _convert_chain(tmp_path / "none", device="small-m0")
    assert not (tmp_path / "none").exists()


def test_cli_weighs_flash_against_operations_on_a_cortex_m0(tmp_path):
    """README ("Weigh it on a Cortex-M0"): the shipped digits model fits --device cortex-m0-32k with its
    dense ZOH memory, so that is what a device alone gets; --prefer flash gives RK4 x24 and prints the
    trade-off. Both run on the Cortex-M0 under QEMU: the instructions per step, the flash saved and what
    quantization costs each (the RK substeps' guard bits: without them the int8 RK model was off by 0.97
    where ZOH is off by 0.077)."""
    _need_gcc_and_make()
    examples = os.path.join(os.path.dirname(__file__), "..", "examples", "models")
    args = ["convert", os.path.join(examples, "digits_lmu.lmu.npz"), "-t", "c", "--quantize", "int8", "--calibration",
            os.path.join(examples, "digits_calibration_x.npy"), "--device", "cortex-m0-32k", "-q"]  # fmt: skip
    run = [sys.executable, "-m", "lmu_edge.cli", *args]
    r = subprocess.run([*run, "-o", str(tmp_path / "a"), "--prefer", "flash"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "prefer flash: rk4 x24 instead of zoh" in r.stdout and "; --prefer flash was given" in r.stdout, r.stdout
    r = subprocess.run([*run, "-o", str(tmp_path / "b")], capture_output=True, text=True)
    assert r.returncode == 0 and "lmu: dense zoh" in r.stdout and "prefer" not in r.stdout, r.stdout
    rk, zoh = (json.loads((tmp_path / d / "report.json").read_text()) for d in ("a", "b"))
    assert zoh["realization_choice"]["why"] == "it fits --device cortex-m0-32k"
    insn = [round(rep["verification"]["instructions_per_step_m0"]) for rep in (zoh, rk)]
    assert insn == [10313, 733585], insn  # README: exact (QEMU -icount)
    assert "Cortex-M0 (QEMU -icount" in r.stdout and f"{insn[0]:,} on Cortex-M0" in r.stdout, r.stdout
    assert zoh["c"]["flash_bytes_m0"] - rk["c"]["flash_bytes_m0"] == 1296  # README: the flash RK4 saves
    dev = zoh["c"]["device"]  # the fit, on stdout too: the M0 object's flash (not the M4's) and the state
    assert (dev["flash_used"], dev["ram_used"]) == (zoh["c"]["flash_bytes_m0"], zoh["c"]["ram_bytes"]), dev
    assert dev["flash_used"] != zoh["c"]["flash_bytes_m4"]
    fits = f"fits --device cortex-m0-32k: flash {dev['flash_used']:,} of 262,144 bytes, RAM {dev['ram_used']:,} of"
    assert fits + " 32,768" in r.stdout, r.stdout
    assert "fits --device cortex-m0-32k: flash 4,792 of 262,144 bytes, RAM 464 of 32,768" in r.stdout  # firmware.md
    err = [rep["verification"]["error_vs_source"] for rep in (zoh, rk)]
    assert err[1] < 1.5 * err[0], err  # measured 0.110 against 0.077


def test_inspect_marks_the_choice_of_the_preference(tmp_path):
    lmu_edge.save(_graph(), tmp_path / "m.lmu.npz")

    def auto_choice(*extra):
        r = subprocess.run(
            [sys.executable, "-m", "lmu_edge.cli", "inspect", str(tmp_path / "m.lmu.npz"), "--json", *extra],
            capture_output=True,
            text=True,
        )
        assert r.returncode == 0, r.stderr
        cands = json.loads(r.stdout)["layers"][0]["candidates"]
        return [c["name"] for c in cands if c["auto_choice"]]

    assert auto_choice() == ["zoh"]
    assert auto_choice("--prefer", "flash") == ["pade"]


def test_inspect_marks_the_choice_convert_makes_when_quantized(tmp_path):
    """README: quantized, auto leaves Pade out and the budget follows the state, so inspect --quantize marks
    what convert takes (RK4 x24 for the shipped digits model under --prefer flash, where float marks Pade x5);
    Pade is still listed, marked not in auto; TFLite quantized leaves RK out too."""
    model = os.path.join(os.path.dirname(__file__), "..", "examples", "models", "digits_lmu.lmu.npz")

    def inspect(*extra):
        r = subprocess.run(
            [sys.executable, "-m", "lmu_edge.cli", "inspect", model, "--json", *extra], capture_output=True, text=True
        )
        assert r.returncode == 0, r.stderr
        info = json.loads(r.stdout)
        cands = info["layers"][0]["candidates"]
        names = [c["name"] + (f" x{c['substeps']}" if c["substeps"] else "") for c in cands]
        return info, {n: (c["auto_choice"], c["in_auto"]) for n, c in zip(names, cands, strict=True)}

    info, float_c = inspect("--prefer", "flash")
    assert float_c["pade x5"] == (True, True) and info["error_budget"]["value"] == 1e-6
    info, int8_c = inspect("--prefer", "flash", "--quantize", "int8")
    assert info["error_budget"]["value"] == 0.25 * 2.0**-15 and info["auto_for"]["quantize"] == "int8"
    assert int8_c["rk4 x24"] == (True, True) and int8_c["pade x4"] == (False, False), int8_c
    rep_dir = tmp_path / "c"  # the same choice convert makes
    r = subprocess.run(
        [sys.executable, "-m", "lmu_edge.cli", "convert", model, "-t", "c", "--quantize", "int8", "--prefer", "flash",
         "--calibration", os.path.join(os.path.dirname(model), "digits_calibration_x.npy"), "-o", str(rep_dir),
         "-q", "-O", "measure=false"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "prefer flash: rk4 x24 instead of zoh" in r.stdout, r.stdout
    _, tfl = inspect("--quantize", "int8", "-t", "tflite", "--prefer", "flash")
    assert [k for k, (auto, in_auto) in tfl.items() if in_auto] == ["zoh"] and tfl["zoh"][0], tfl


def test_a_device_drops_the_expanded_weights_where_they_overflow_its_flash(tmp_path, monkeypatch):
    """docs/firmware.md (LMU_WX): on a DSP core the dense layers' int8 weights are also stored as halfwords, and a
    --device where they would take the model past half its flash gets model.c without them (the int8 arrays
    alone), converted again. Catches a fallback that never happens or always happens, one that leaves the
    halfwords in, and a report that keeps the first build's flash figure."""
    from lmu_edge.targets import c as c_target

    _need_gcc_and_make()
    part = dict(c_target.DEVICES["cortex-m4-128k"], example="an M4 part")
    monkeypatch.setitem(c_target.DEVICES, "m4-part", part)
    rep, _ = _convert_chain(tmp_path / "roomy", device="m4-part")
    src = (tmp_path / "roomy" / "model" / "model.c").read_text()
    expanded, flash = rep["c"]["expanded_weight_bytes"], rep["c"]["flash_bytes_m4"]
    assert expanded > 0 and "#if LMU_WX" in src and "_wx[" in src, expanded
    assert rep["quantization"].get("weights_expanded", True)
    monkeypatch.setitem(c_target.DEVICES, "m4-part", dict(part, flash=2 * flash))  # half of it: still room
    rep, _ = _convert_chain(tmp_path / "half", device="m4-part")
    assert rep["c"]["expanded_weight_bytes"] == expanded and rep["c"]["flash_bytes_m4"] == flash
    monkeypatch.setitem(c_target.DEVICES, "m4-part", dict(part, flash=2 * flash - 1))
    rep, _ = _convert_chain(tmp_path / "tight", device="m4-part")
    src = (tmp_path / "tight" / "model" / "model.c").read_text()
    assert rep["quantization"]["weights_expanded"] is False and "LMU_WX" not in src
    assert rep["c"]["expanded_weight_bytes"] == 0 and rep["c"]["device"]["fits"]
    assert rep["c"]["flash_bytes_m4"] <= flash - expanded + 64, (rep["c"]["flash_bytes_m4"], flash, expanded)
