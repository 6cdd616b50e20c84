"""lmu_edge.torch: the PyTorch LMU against lmu_edge.simulate of its exported IR, and the checkpoint readers."""

import itertools
import json
import os
import pickle
import struct
import subprocess
import sys

import numpy as np
import pytest

if os.environ.get("CI") == "true":
    import torch  # under CI a missing torch is a failure, not a skip
torch = pytest.importorskip("torch", reason="torch not installed: pip install 'lmu-edge[torch]'")

from conftest import lmu_edge_cli  # noqa: E402  (after the importorskip above)

import lmu_edge  # noqa: E402  (after the importorskip above)
from lmu_edge.converters import torch_files  # noqa: E402  (after the importorskip above)
from lmu_edge.errors import LmuEdgeError, ModelFormatError, ShapeError, UnsupportedLayerError  # noqa: E402  (after the importorskip above)
from lmu_edge.torch import LMU, export, graph_of, load_checkpoint, save_checkpoint  # noqa: E402  (after the importorskip above)

F64 = torch.float64
OPTIONS = list(
    itertools.product(["zoh", "euler"], [False, True], [False, True], [None, 5], [False, True], [True, False])
)


def _model(disc, tt, ub, hu, i2h, rs, dtype=F64, seed=0):
    torch.manual_seed(seed)
    lmu = LMU(
        2,
        3,
        6,
        17.5,
        discretizer=disc,
        trainable_theta=tt,
        use_bias=ub,
        hidden_units=hu,
        input_to_hidden=i2h,
        return_sequences=rs,
        dtype=dtype,
    )
    with torch.no_grad():
        if ub:
            lmu.encoder_bias.normal_()
        if tt:
            lmu.theta.fill_(21.25)  # a "trained" theta, not the initial one
    return torch.nn.Sequential(lmu, torch.nn.Linear(lmu.output_size, 4, dtype=dtype), torch.nn.Tanh())


@pytest.mark.parametrize("disc,tt,ub,hu,i2h,rs", OPTIONS)
def test_parallel_and_recurrent_equal_simulate_of_the_export(disc, tt, ub, hu, i2h, rs, tmp_path):
    seq = _model(disc, tt, ub, hu, i2h, rs)
    x = torch.randn(3, 40, 2, dtype=F64, generator=torch.Generator().manual_seed(7))
    y_par = seq(x).detach().numpy()
    seq[0].mode = "recurrent"
    y_rec = seq(x).detach().numpy()
    g = export(seq, tmp_path / "m.lmu.npz")
    y_sim = lmu_edge.simulate(lmu_edge.load(tmp_path / "m.lmu.npz"), x.numpy())
    assert y_sim.shape == y_par.shape == ((3, 40, 4) if rs else (3, 4))
    assert np.abs(y_par - y_sim).max() < 1e-12
    assert np.abs(y_rec - y_sim).max() < 1e-12
    assert np.abs(y_par - y_rec).max() < 1e-12
    assert g.layers[0].theta == (21.25 if tt else 17.5)


def test_trainable_theta_gets_a_gradient_and_parallel_gradients_match_recurrent():
    seq = _model("zoh", True, True, 5, False, False)
    x = torch.randn(2, 30, 2, dtype=F64, generator=torch.Generator().manual_seed(3))
    grads = []
    for mode in ("parallel", "recurrent"):
        seq.zero_grad()
        seq[0].mode = mode
        seq(x).square().sum().backward()
        grads.append({k: p.grad.clone() for k, p in seq.named_parameters()})
    assert grads[0]["0.theta"].abs() > 0
    for k in grads[0]:
        assert torch.allclose(grads[0][k], grads[1][k], rtol=1e-9, atol=1e-12), k


def test_safetensors_checkpoint_round_trips_and_is_read_by_the_real_library(tmp_path):
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    seq = _model("zoh", True, True, 5, True, False, dtype=torch.float32)
    p = save_checkpoint(seq, tmp_path / "m.safetensors")
    assert sorted(os.listdir(tmp_path)) == ["m.json", "m.safetensors"]
    ref = safetensors_numpy.load_file(str(p))
    ours = torch_files.read_safetensors(p)
    assert sorted(ref) == sorted(ours) and all(np.array_equal(ref[k], ours[k]) for k in ref)
    back = load_checkpoint(p)
    x = torch.randn(2, 25, 2)
    assert torch.equal(back(x), seq(x))
    g = lmu_edge.load(p)
    assert np.abs(lmu_edge.simulate(g, x.numpy().astype(np.float64)) - seq(x).detach().numpy()).max() < 1e-5


def test_an_identity_module_round_trips_through_export_and_checkpoint(tmp_path):
    # issue 52's torch draws: nn.Identity was written as {"type": "linear"}, which the reader takes for a
    # Linear layer ("missing config key(s) 'in_features', 'out_features'"): no model with one read back
    seq = torch.nn.Sequential(
        torch.nn.Linear(2, 3), torch.nn.Identity(), LMU(3, 1, 4, 8.0, hidden_units=2), torch.nn.Identity()
    )
    x = torch.randn(2, 9, 2)
    for g in (export(seq, tmp_path / "m.lmu.npz"), lmu_edge.load(save_checkpoint(seq, tmp_path / "m.safetensors"))):
        assert [type(layer).__name__ for layer in g.layers] == ["Dense", "Activation", "LMU", "Activation"]
        assert np.abs(lmu_edge.simulate(g, x.numpy().astype(np.float64)) - seq(x).detach().numpy()).max() < 1e-5
    back = load_checkpoint(tmp_path / "m.safetensors")
    assert isinstance(back[1], torch.nn.Identity) and torch.equal(back(x), seq(x))


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_a_checkpoint_gets_the_mode_open_would_give_it(tmp_path, umask):
    """mkstemp makes its files 0600; a saved checkpoint is an ordinary file and follows the umask."""
    seq = _model("zoh", True, True, 5, True, False, dtype=torch.float32)
    old = os.umask(umask)
    try:
        p = save_checkpoint(seq, tmp_path / "m.safetensors")
    finally:
        os.umask(old)
    for f in (p, tmp_path / "m.json"):
        assert f.stat().st_mode & 0o777 == 0o666 & ~umask, (f.name, oct(f.stat().st_mode))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_tensors_are_widened_to_float32_exactly(dtype, tmp_path):
    from safetensors.torch import save_file

    seq = _model("zoh", False, True, 5, False, True, dtype=torch.float32)
    save_checkpoint(seq, tmp_path / "m.safetensors")
    half = {k: v.to(getattr(torch, dtype)) for k, v in seq.state_dict().items()}
    save_file(half, str(tmp_path / "h.safetensors"))
    (tmp_path / "h.json").write_text((tmp_path / "m.json").read_text())
    g = lmu_edge.load(tmp_path / "h.safetensors")
    assert g.layers[0].input_encoders.dtype == np.float32
    assert np.array_equal(g.layers[0].input_encoders, half["0.input_encoders"].float().numpy())
    torch.save(half, tmp_path / "h.pt")  # h.json serves the .pt too
    assert np.array_equal(
        lmu_edge.load(tmp_path / "h.pt").layers[0].hidden.kernel, half["0.hidden_kernel"].float().numpy()
    )


class _Evil:
    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_malicious_pickle_in_a_pt_file_is_refused_and_never_runs(tmp_path):
    marker = tmp_path / "pwned"
    evil = _Evil()
    evil.marker = marker
    seq = _model("zoh", False, False, None, False, True, dtype=torch.float32)
    save_checkpoint(seq, tmp_path / "m.safetensors")
    (tmp_path / "m.pt").write_bytes(pickle.dumps({"0.input_encoders": evil}))
    with pytest.raises(ModelFormatError, match="refused by torch.load\\(weights_only=True\\)"):
        lmu_edge.load(tmp_path / "m.pt")
    assert not marker.exists()
    # the same bytes do run code when unpickled: the test would catch a plain pickle.load
    pickle.loads((tmp_path / "m.pt").read_bytes())
    assert marker.exists()


def test_cli_refuses_a_malicious_pt_with_one_line_and_no_traceback(tmp_path):
    evil = _Evil()
    evil.marker = tmp_path / "pwned"
    (tmp_path / "m.pt").write_bytes(pickle.dumps(evil))
    (tmp_path / "m.json").write_text(
        json.dumps({"format": "lmu-edge-torch", "version": 1, "input_size": 1, "layers": [{"type": "relu"}]})
    )
    r = subprocess.run(lmu_edge_cli() + ["inspect", str(tmp_path / "m.pt")], capture_output=True, text=True)
    assert r.returncode != 0 and "Traceback" not in r.stderr and "weights_only" in r.stderr
    assert not (tmp_path / "pwned").exists()


def _saved(tmp_path):
    seq = _model("zoh", False, True, 5, False, True, dtype=torch.float32)
    p = save_checkpoint(seq, tmp_path / "m.safetensors")
    return p, json.loads((tmp_path / "m.json").read_text()), torch_files.read_safetensors(p)


def test_missing_and_misshaped_tensors_name_the_tensor(tmp_path):
    p, cfg, t = _saved(tmp_path)
    t.pop("0.hidden_kernel")
    torch_files.write_safetensors(p, t)
    with pytest.raises(ModelFormatError, match="tensor '0.hidden_kernel' is missing"):
        lmu_edge.load(p)
    t["0.hidden_kernel"] = np.zeros((17, 5), np.float32)
    torch_files.write_safetensors(p, t)
    with pytest.raises(ShapeError, match=r"'0.hidden_kernel' has shape \(17, 5\), expected \(18, 5\)"):
        lmu_edge.load(p)


def test_unknown_config_key_missing_config_and_stray_tensor_are_errors(tmp_path):
    p, cfg, t = _saved(tmp_path)
    cfg["layers"][0]["memory_to_memory"] = True
    (tmp_path / "m.json").write_text(json.dumps(cfg))
    with pytest.raises(ModelFormatError, match="unknown config key.*'memory_to_memory'"):
        lmu_edge.load(p)
    del cfg["layers"][0]["memory_to_memory"]
    (tmp_path / "m.json").write_text(json.dumps(cfg))
    t["9.weight"] = np.zeros(2, np.float32)
    torch_files.write_safetensors(p, t)
    with pytest.raises(ModelFormatError, match="'9.weight' are not used"):
        lmu_edge.load(p)
    (tmp_path / "m.json").unlink()
    with pytest.raises(ModelFormatError, match="m.json is missing"):
        lmu_edge.load(p)


@pytest.mark.parametrize("mutate", ["truncate", "header_len", "offsets", "int_dtype", "not_json"])
def test_broken_safetensors_files_give_one_line_errors(mutate, tmp_path):
    p, _, _ = _saved(tmp_path)
    data = bytearray(p.read_bytes())
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    if mutate == "truncate":
        data = data[:-7]
    elif mutate == "header_len":
        data[:8] = struct.pack("<Q", 1 << 40)
    elif mutate in ("offsets", "int_dtype"):
        k = "0.input_encoders"
        if mutate == "offsets":
            header[k]["data_offsets"] = [0, 1 << 30]
        else:
            header[k]["dtype"] = "I32"
        h = json.dumps(header).encode().ljust(n)
        data = data[:8] + h[:n] + data[8 + n :] if len(h) == n else struct.pack("<Q", len(h)) + h + data[8 + n :]
    else:
        data[8] = ord("!")
    p.write_bytes(bytes(data))
    with pytest.raises(LmuEdgeError) as e:
        lmu_edge.load(p)
    assert "\n" not in str(e.value) and str(p) in str(e.value)


def test_pt_without_torch_is_a_missing_dependency_error(tmp_path):
    p, _, _ = _saved(tmp_path)
    torch.save({}, tmp_path / "m.pt")
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import lmu_edge\n"
        "from lmu_edge.errors import MissingDependencyError\n"
        f"try:\n    lmu_edge.load({str(tmp_path / 'm.pt')!r})\n"
        "except MissingDependencyError as e:\n    print('OK', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.startswith("OK") and "lmu-edge[torch]" in out.stdout, out.stderr


def test_export_refuses_unsupported_modules(tmp_path):
    with pytest.raises(UnsupportedLayerError, match=r"layer 1 \(GRU\) is not supported"):
        export(torch.nn.Sequential(LMU(1, 1, 4, 10.0), torch.nn.GRU(4, 4)), tmp_path / "m.lmu.npz")
    with pytest.raises(UnsupportedLayerError, match=r"Softmax\(dim=1\)"):
        graph_of(torch.nn.Sequential(LMU(1, 1, 4, 10.0), torch.nn.Softmax(dim=1)))
    with pytest.raises(UnsupportedLayerError, match="Conv1d is not supported"):
        graph_of(torch.nn.Conv1d(1, 1, 3))
    assert not (tmp_path / "m.lmu.npz").exists()


def test_cli_inspect_and_convert_read_a_safetensors_checkpoint(tmp_path):
    p, _, _ = _saved(tmp_path)
    r = subprocess.run(lmu_edge_cli() + ["inspect", str(p)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "lmu_0" in r.stdout


def test_a_safetensors_checkpoint_converts_without_torch(tmp_path):
    p, _, _ = _saved(tmp_path)
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import numpy as np, lmu_edge\n"
        f"g = lmu_edge.load({str(p)!r})\n"
        "y = lmu_edge.simulate(lmu_edge.fold(g), np.ones((5, 2)))\n"
        "print('OK', y.shape)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.startswith("OK (5, 4)"), out.stdout + out.stderr
