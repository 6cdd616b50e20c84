"""A model trained with lmu_edge.torch converts to every target like a keras-lmu model does."""

import importlib.util
import os

import numpy as np
import pytest

if os.environ.get("CI") == "true":
    import torch  # under CI a missing torch is a failure, not a skip
torch = pytest.importorskip("torch", reason="torch not installed: pip install 'lmu-edge[torch]'")

import lmu_edge  # noqa: E402  (after the importorskip above)
from lmu_edge.torch import LMU, save_checkpoint  # noqa: E402  (after the importorskip above)

# target -> (quantize modes, python modules its runtime needs)
TARGETS = {
    "ir": (["float"], []),
    "c": (["float", "int8"], []),
    "onnx": (["float", "int8"], ["onnxruntime"]),
    "tflite": (["float", "int8"], ["tensorflow"]),
    "nengo": (["float"], ["nengo"]),
}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A small LMU classifier trained for a few Adam steps on a seeded task (sign of a delayed input)."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(64, 50, 1, generator=g)
    y = (x[:, 20, 0] > 0).long()
    seq = torch.nn.Sequential(
        LMU(
            1,
            1,
            12,
            40.0,
            hidden_units=16,
            hidden_activation="relu",
            use_bias=True,
            trainable_theta=True,
            return_sequences=False,
        ),
        torch.nn.Linear(16, 2),
    )
    opt = torch.optim.Adam(seq.parameters(), lr=1e-2)
    for _ in range(30):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(seq(x), y)
        loss.backward()
        opt.step()
    assert seq[0].theta_value() != 40.0  # theta was trained
    p = save_checkpoint(seq, tmp_path_factory.mktemp("torch") / "clf.safetensors")
    return p, seq, x.numpy().astype(np.float64)


@pytest.mark.parametrize("target,quant", [(t, q) for t, (qs, _) in TARGETS.items() for q in qs])
def test_trained_torch_model_converts_to_every_target(trained, target, quant, tmp_path):
    p, seq, x = trained
    for mod in TARGETS[target][1]:
        if importlib.util.find_spec(mod) is None:
            if os.environ.get("CI") == "true":
                pytest.fail(f"{mod} is needed for the {target} target under CI")
            pytest.skip(f"{mod} not installed")
    kw = {"quantize": quant, "calibration": x[:16]} if quant != "float" else {}
    if target == "c":  # the outputs are the subject: no Cortex-M builds for flash sizes or QEMU instruction counts
        kw.update(measure=False, flash=False)
    art = lmu_edge.convert(p, target, tmp_path / "out", accuracy_report=False, **kw)
    y_art = np.asarray(art.run(x[:8]))
    y_torch = seq(torch.tensor(x[:8], dtype=torch.float32)).detach().numpy()
    err = np.abs(y_art - y_torch).max() / np.abs(y_torch).max()
    assert err < (1e-4 if quant == "float" else 0.1), (target, quant, err)
