"""``lmu-edge run`` on inputs outside the range a quantized artifact was calibrated on warns as ``verify`` does
(issue 55: run wrote the saturated outputs without a word)."""

import subprocess

import numpy as np
from conftest import ROOT, lmu_edge_cli

import lmu_edge


def test_run_warns_on_inputs_outside_the_calibrated_range_as_verify_does(tmp_path):
    cal = np.load(ROOT / "examples/models/digits_calibration_x.npy")[:16]
    art = lmu_edge.convert(
        ROOT / "examples/models/digits_lmu.lmu.npz",
        "c",
        tmp_path / "c",
        quantize="int8",
        calibration=cal,
        measure=False,
    )
    lo, hi = art.manifest["calibration_range"]
    inside = np.clip(np.load(ROOT / "examples/models/digits_test_x.npy")[:2], lo, hi)
    np.save(tmp_path / "in.npy", inside)
    np.save(tmp_path / "far.npy", inside * 100 + 1)  # almost every value beyond [lo, hi]

    def cli(*args):
        return subprocess.run(lmu_edge_cli() + [str(a) for a in args], capture_output=True, text=True, timeout=300)

    r = cli("run", art.path, "-i", tmp_path / "in.npy", "-o", tmp_path / "y.npy")
    assert r.returncode == 0 and r.stderr == "", r.stderr  # within the range: no warning
    r = cli("run", art.path, "-i", tmp_path / "far.npy", "-o", tmp_path / "y_far.npy")
    assert r.returncode == 0 and (tmp_path / "y_far.npy").exists(), r.stderr  # a warning, not a refusal
    warning = [line for line in r.stderr.splitlines() if line.startswith("warning:")]
    assert len(warning) == 1 and f"lie outside [{lo:.4g}, {hi:.4g}]" in warning[0], r.stderr
    v = cli("verify", art.path, "-i", tmp_path / "far.npy")
    assert warning[0] in v.stderr.splitlines(), v.stderr  # word for word verify's
    # a float artifact has no calibrated range to leave
    flt = lmu_edge.convert(ROOT / "examples/models/digits_lmu.lmu.npz", "c", tmp_path / "f", measure=False)
    r = cli("run", flt.path, "-i", tmp_path / "far.npy", "-o", tmp_path / "y_f.npy")
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
