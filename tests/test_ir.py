import dataclasses
import io
import json
import zipfile

import numpy as np
import pytest
from graphs import chain, lmu

import lmu_edge
from lmu_edge import ir
from lmu_edge.errors import IRFormatError, ShapeError


def every_node_graph(rng):
    q = 6
    layers = (
        ir.Dense("d0", rng.standard_normal((2, 3)), rng.standard_normal(3).astype(np.float32), "relu"),
        lmu(rng, "par", n_in=3, d=2, q=q, hidden="dense", input_to_hidden=True),
        ir.Activation("act", "tanh"),
        lmu(
            rng,
            "trunc",
            n_in=5,
            q=q,
            hidden=None,
            memory=ir.ImpulseResponse(rng.standard_normal((q, 17)), "truncated", "raw mode, truncate_ir"),
        ),
        lmu(
            rng,
            "dense_ss",
            n_in=q,
            q=q,
            hidden="simple_rnn",
            rnn_path=True,
            memory=ir.DenseSS("zoh", *lmu_edge.lti.legendre_discrete(q, 12.0)),
        ),
        lmu(rng, "rk", n_in=5, q=q, hidden="dense", memory=ir.RungeKutta(4, 7)),
        lmu(rng, "fir", n_in=5, q=q, hidden="dense", memory=ir.FIR(rng.standard_normal((q, 9)))),
        ir.TimePooling("pool"),
        ir.Dense("out", rng.standard_normal((5, 3)).astype(np.float32), None, "softmax"),
    )
    return ir.Graph("every", input_features=2, layers=layers, seq_len=40, metadata={"k": [1, "two", 3.5]})


def test_save_load_round_trips_exactly(tmp_path, rng):
    g = every_node_graph(rng)
    p = lmu_edge.save(g, tmp_path / "m.lmu.npz")
    back = lmu_edge.load(p)
    assert ir.equal(g, back)
    assert back.layers[0].bias.dtype == np.float32 and back.layers[0].kernel.dtype == np.float64
    x = rng.standard_normal((2, 40, 2))
    assert np.array_equal(lmu_edge.simulate(g, x), lmu_edge.simulate(back, x))


def test_folded_graph_round_trips_with_its_measurements(tmp_path, rng):
    g = lmu_edge.fold(chain(rng, q=8, theta=12.0))
    back = lmu_edge.load(lmu_edge.save(g, tmp_path / "f.lmu.npz"))
    assert ir.equal(g, back)
    assert back.layers[1].measurement.error == g.layers[1].measurement.error
    x = rng.standard_normal((3, 50, 2))
    assert np.array_equal(lmu_edge.simulate(g, x), lmu_edge.simulate(back, x))


def test_ir_nodes_are_immutable(rng):
    g = chain(rng)
    with pytest.raises(ValueError):
        g.layers[0].kernel[0, 0] = 1.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.layers[0].name = "x"


def test_chain_shape_errors_name_the_layer(rng):
    bad = ir.Dense("post", np.zeros((7, 2)))
    with pytest.raises(ShapeError, match="post"):
        ir.Graph("g", 3, (bad,))
    with pytest.raises(ShapeError, match="unique"):
        ir.Graph("g", 2, (ir.Activation("a", "relu"), ir.Activation("a", "relu")))
    with pytest.raises(ShapeError, match="needs a sequence"):
        ir.Graph("g", 2, (ir.TimePooling("p"), ir.TimePooling("p2")))
    with pytest.raises(ShapeError, match="unknown activation"):
        ir.Activation("a", "gelu_fancy")


def _rewrite(src, dst, mutate_header=None, drop=None, replace=None):
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if drop and info.filename == drop:
                continue
            if info.filename == "header.json.npy" and mutate_header:
                arr = np.load(io.BytesIO(data))
                h = json.loads(arr.tobytes().decode())
                mutate_header(h)
                buf = io.BytesIO()
                np.save(buf, np.frombuffer(json.dumps(h).encode(), np.uint8))
                data = buf.getvalue()
            if replace and info.filename in replace:
                buf = io.BytesIO()
                np.save(buf, replace[info.filename], allow_pickle=True)
                data = buf.getvalue()
            zout.writestr(info, data)


@pytest.fixture
def saved(tmp_path, rng):
    return lmu_edge.save(chain(rng), tmp_path / "good.lmu.npz")


def test_truncated_file_is_a_clear_error(saved, tmp_path):
    bad = tmp_path / "trunc.lmu.npz"
    bad.write_bytes(saved.read_bytes()[: saved.stat().st_size // 2])
    with pytest.raises(IRFormatError, match="trunc.lmu.npz"):
        lmu_edge.load(bad)


def test_tampered_bytes_are_caught_by_the_checksum(saved, tmp_path):
    data = bytearray(saved.read_bytes())
    with zipfile.ZipFile(saved) as z:
        info = z.getinfo("g.layers0.kernel.npy")
    pos = info.header_offset + 30 + len(info.filename) + 128 + 3  # inside the array's data
    data[pos] ^= 0xFF
    bad = tmp_path / "tampered.lmu.npz"
    bad.write_bytes(bytes(data))
    with pytest.raises(IRFormatError, match="tampered.lmu.npz"):
        lmu_edge.load(bad)


def test_unknown_version_is_a_clear_error(saved, tmp_path):
    bad = tmp_path / "v99.lmu.npz"
    _rewrite(saved, bad, mutate_header=lambda h: h.update(version=99))
    with pytest.raises(IRFormatError, match="version 99 is not supported"):
        lmu_edge.load(bad)


def test_missing_array_is_a_clear_error(saved, tmp_path):
    bad = tmp_path / "missing.lmu.npz"
    _rewrite(saved, bad, drop="g.layers0.kernel.npy")
    with pytest.raises(IRFormatError, match="missing"):
        lmu_edge.load(bad)


def test_array_disagreeing_with_header_is_a_clear_error(saved, tmp_path):
    bad = tmp_path / "shape.lmu.npz"
    _rewrite(saved, bad, replace={"g.layers0.kernel.npy": np.zeros((5, 5))})
    with pytest.raises(IRFormatError, match="shape"):
        lmu_edge.load(bad)


def test_header_shapes_that_break_the_chain_are_a_clear_error(saved, tmp_path):
    def both(h):
        h["graph"]["layers"][0]["kernel"]["shape"] = [5, 5]

    bad = tmp_path / "chain.lmu.npz"
    _rewrite(saved, bad, mutate_header=both, replace={"g.layers0.kernel.npy": np.zeros((5, 5))})
    with pytest.raises(IRFormatError, match="pre"):
        lmu_edge.load(bad)


def test_object_arrays_are_never_unpickled(saved, tmp_path):
    bad = tmp_path / "pickle.lmu.npz"
    _rewrite(saved, bad, replace={"g.layers0.kernel.npy": np.array([{"a": 1}], dtype=object)})
    with pytest.raises(IRFormatError):
        lmu_edge.load(bad)


def test_unknown_node_type_and_field_are_clear_errors(saved, tmp_path):
    bad = tmp_path / "type.lmu.npz"
    _rewrite(saved, bad, mutate_header=lambda h: h["graph"]["layers"][0].update(type="conv2d"))
    with pytest.raises(IRFormatError, match="unknown node type 'conv2d'"):
        lmu_edge.load(bad)
    bad2 = tmp_path / "field.lmu.npz"
    _rewrite(saved, bad2, mutate_header=lambda h: h["graph"]["layers"][0].update(stride=2))
    with pytest.raises(IRFormatError, match="unknown field"):
        lmu_edge.load(bad2)


def test_not_an_ir_file(tmp_path):
    p = tmp_path / "x.npz"
    np.savez(p, a=np.zeros(3))
    with pytest.raises(IRFormatError, match="not an lmu-edge IR file"):
        lmu_edge.load(p)
    p2 = tmp_path / "text.npz"
    p2.write_text("hello")
    with pytest.raises(IRFormatError, match="not a readable"):
        lmu_edge.load(p2)


def test_save_is_atomic_and_leaves_no_temporary_files(tmp_path, rng):
    lmu_edge.save(chain(rng), tmp_path / "a.lmu.npz")
    assert [p.name for p in tmp_path.iterdir()] == ["a.lmu.npz"]
