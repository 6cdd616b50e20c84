"""The PyTorch psMNIST example, shortened for CI: trains on shipped digits, and its checkpoint converts."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

if os.environ.get("CI") == "true":
    import torch  # noqa: F401  (under CI a missing torch is a failure, not a skip)
pytest.importorskip("torch", reason="torch not installed: pip install 'lmu-edge[torch]'")

import lmu_edge

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_shortened_psmnist_training_learns_and_its_checkpoint_converts_to_int8_c(tmp_path):
    r = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "torch" / "train_psmnist.py"),
            "--shipped",
            "--order",
            "32",
            "--units",
            "32",
            "--epochs",
            "8",
            "--batch",
            "20",
            "--lr",
            "5e-3",
            "--out",
            str(tmp_path),
            "--name",
            "ci",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    info = json.loads((tmp_path / "ci_train.json").read_text())
    assert info["test_accuracy"] > 0.4  # 200 held-out digits; chance is 0.1 (0.625 seen)
    x = np.load(ROOT / "examples" / "models" / "psmnist_test_x.npy")[800:840, :, None].astype(np.float32) / 255
    # bit-exactness is the subject: no Cortex-M builds (flash sizes, QEMU instruction counts), no accuracy report
    art = lmu_edge.convert(
        tmp_path / "ci.safetensors",
        "c",
        tmp_path / "c",
        quantize="int8",
        calibration=x[:20],
        measure=False,
        flash=False,
        accuracy_report=False,
    )
    ref = lmu_edge.simulate(lmu_edge.load(art.path / "quantized.lmu.npz"), x)
    assert np.array_equal(np.asarray(art.run(x)), ref)  # C int8 is bit-exact with the integer reference


@pytest.mark.slow
def test_the_shipped_small_psmnist_model_scores_what_the_readme_says():
    """README: 4811 parameters, 0.744 on the 10000 MNIST test digits (its training record), and on the 1000
    shipped test digits PyTorch, lmu_edge.simulate and C float32 0.710, the integer reference and C int8
    0.708 (708 of 1000: one digit apart from float, the integer reference and its C bit-exact)."""
    sys.path.insert(0, str(ROOT / "examples" / "torch"))
    try:
        import evaluate_psmnist
    finally:
        sys.path.pop(0)
    info = json.loads((ROOT / "examples" / "models" / "torch_psmnist_small_train.json").read_text())
    assert (info["parameters"], info["test_accuracy"], info["test_digits"]) == (4811, 0.744, 10000)
    model = ROOT / "examples" / "models" / "torch_psmnist_small.safetensors"
    from lmu_edge.torch import load_checkpoint

    assert sum(p.numel() for p in load_checkpoint(str(model)).parameters()) == 4811
    got = {name: round(acc * 1000) for name, acc in evaluate_psmnist.evaluate(model, 1000, measure=False)}
    assert got == {
        "PyTorch model (float32, parallel mode)": 710,
        "lmu_edge.simulate (float64)": 710,
        "C float (host)": 710,
        "integer reference": 708,
        "C int8 (host)": 708,
    }


def test_training_benchmark_runs_on_the_cpu_and_prints_both_modes_and_their_ratio():
    # The throughput figures are printed, never asserted (timings are noisy); this checks the benchmark
    # itself still runs both modes on the same model in CI.
    r = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "torch_train.py"), "--quick", "--reps", "1"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    rows = {
        line.split()[0]: float(line.split()[1])
        for line in r.stdout.splitlines()
        if line.startswith(("parallel ", "recurrent ")) and "/" not in line
    }
    assert set(rows) == {"parallel", "recurrent"} and min(rows.values()) > 0, r.stdout
    assert "parallel / recurrent:" in r.stdout and "cpu" in r.stdout
