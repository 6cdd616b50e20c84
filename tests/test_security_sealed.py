"""A received artifact's data files are parsed from the bytes checked against its seal, never read again by path
(a file swapped after the check is not used); ONNX external data and damaged, resealed data files are refused in
one line; damaged .npy headers are refused by every reader (issue 53's leftovers, found by scripts/fuzz.py)."""

from __future__ import annotations

import io
import os
import shutil
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import lmu_edge
from lmu_edge import outdir
from lmu_edge.cli import main
from lmu_edge.errors import ArtifactError, LmuEdgeError

sys.path.insert(0, str(Path(__file__).parent))
import hostile  # noqa: E402  (tests/ on sys.path first)
from conftest import EXAMPLES  # noqa: E402  (tests/ on sys.path first)

DIGITS_IR = EXAMPLES / "digits_lmu.lmu.npz"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The shipped digits model as ir, onnx and nengo artifacts, and each again from a model whose output
    layer is scaled by 3 (the same shapes: the swapped-in files of a local writer)."""
    d = tmp_path_factory.mktemp("sealed")
    other = hostile.edit_ir(DIGITS_IR, d / "other.lmu.npz", _scale_dense)
    for target in ("ir", "onnx", "nengo"):
        lmu_edge.convert(DIGITS_IR, target, d / target)
        lmu_edge.convert(other, target, d / f"{target}.other")
    np.save(d / "x.npy", np.load(EXAMPLES / "digits_test_x.npy")[:2, :16])
    return d


def _scale_dense(header, arrays):
    arrays["g.layers1.kernel"] = arrays["g.layers1.kernel"] * 3.0  # the output Dense layer


def _copy(built, name, tmp_path) -> Path:
    shutil.copytree(built / name, tmp_path / "a", symlinks=True)
    return tmp_path / "a"


DATA_FILE = {"ir": "model.lmu.npz", "onnx": "sequence.onnx", "nengo": "weights.npz"}


@pytest.mark.parametrize("target", sorted(DATA_FILE))
def test_a_data_file_swapped_after_the_seal_check_is_not_used(built, tmp_path, target):
    """Deterministic: the artifact is opened (its seal checked), then its data file is replaced by another
    model's; running it either refuses in one line or gives the sealed model's output, never the other's."""
    x = np.load(built / "x.npy")
    want = lmu_edge.open_artifact(built / target).run(x)
    other = lmu_edge.open_artifact(built / f"{target}.other").run(x)
    assert np.abs(want - other).max() > 1e-3  # the swapped-in file would show
    d = _copy(built, target, tmp_path)
    art = lmu_edge.open_artifact(d)
    rel = DATA_FILE[target]
    os.replace(_staged(built / f"{target}.other" / rel, tmp_path), d / rel)
    try:
        y = art.run(x)
    except ArtifactError as e:
        assert "\n" not in str(e) and rel in str(e)
    else:
        np.testing.assert_array_equal(y, want)


def _staged(src: Path, tmp_path: Path) -> Path:
    dst = tmp_path / f"staged.{os.getpid()}.{threading.get_ident()}"
    shutil.copyfile(src, dst)
    return dst


def test_a_writer_swapping_the_data_file_during_runs_never_gets_its_model_run(built, tmp_path):
    """A real race: a thread keeps replacing model.lmu.npz with another model's and back while the artifact is
    opened and run again and again; every run is refused in one line or gives the sealed model's output."""
    x = np.load(built / "x.npy")
    want = lmu_edge.open_artifact(built / "ir").run(x)
    d = _copy(built, "ir", tmp_path)
    versions = [(built / "ir.other" / "model.lmu.npz").read_bytes(), (built / "ir" / "model.lmu.npz").read_bytes()]
    stop = threading.Event()

    def writer():
        k = 0
        while not stop.is_set():
            tmp = tmp_path / "w.tmp"
            tmp.write_bytes(versions[k % 2])
            os.replace(tmp, d / "model.lmu.npz")
            k += 1

    t = threading.Thread(target=writer)
    t.start()
    outcomes = {"same": 0, "refused": 0}
    try:
        for _ in range(40):
            try:
                y = lmu_edge.open_artifact(d).run(x)
            except ArtifactError as e:
                assert "\n" not in str(e)
                outcomes["refused"] += 1
                continue
            np.testing.assert_array_equal(y, want)
            outcomes["same"] += 1
    finally:
        stop.set()
        t.join()
    assert sum(outcomes.values()) == 40


def _external(d: Path, location: str) -> None:
    """Move sequence.onnx's first initializer to ONNX external data at ``location``, and reseal."""
    import onnx

    m = onnx.load_from_string((d / "sequence.onnx").read_bytes())
    t = m.graph.initializer[0]
    (d / "weights.bin").write_bytes(t.raw_data or np.zeros(64, np.float32).tobytes())
    t.ClearField("raw_data")
    del t.float_data[:]
    t.data_location = onnx.TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", "0"), ("length", "16")):
        e = t.external_data.add()
        e.key, e.value = k, v
    (d / "sequence.onnx").write_bytes(m.SerializeToString())
    (d / outdir.RECORD).unlink()
    outdir.seal(d)


@pytest.mark.parametrize("location", ["weights.bin", "/etc/passwd", "../../x.bin"])
def test_onnx_external_data_is_refused_in_one_line(built, tmp_path, location):
    """Resealed ONNX models whose weights live in another file: exit 1 with one line, not exit 70; the data is
    never read (ONNX Runtime would read a relative location from the working directory)."""
    d = _copy(built, "onnx", tmp_path)
    _external(d, location)
    r = CliRunner().invoke(main, ["run", str(d), "-i", str(built / "x.npy"), "-o", str(tmp_path / "y.npy")])
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.exit_code == 1, r.stderr
    assert len(lines) == 1 and lines[0].startswith("lmu-edge: error: ") and "external data" in lines[0], r.stderr
    assert not (tmp_path / "y.npy").exists()


def _unclosed_header(raw: bytes) -> bytes:
    """An .npy whose header dict has an unclosed bracket: numpy's reader raised tokenize.TokenError."""
    return raw[:128].replace(b"'descr'", b"('desc'") + raw[128:]


def test_a_damaged_npy_header_is_refused_by_every_reader(tmp_path):
    buf = io.BytesIO()
    np.save(buf, np.load(EXAMPLES / "digits_calibration_x.npy")[:4])
    (tmp_path / "x.npy").write_bytes(_unclosed_header(buf.getvalue()))
    with pytest.raises(LmuEdgeError, match="not a readable") as e:
        lmu_edge.convert(DIGITS_IR, "ir", tmp_path / "out", calibration=tmp_path / "x.npy")
    assert "\n" not in str(e.value)

    def edit(name, data):
        return _unclosed_header(data) if name == "header.json.npy" else data

    model = hostile.rewrite_zip(DIGITS_IR, tmp_path / "m.lmu.npz", edit)
    with pytest.raises(LmuEdgeError, match="not a readable"):
        lmu_edge.load(model)


@pytest.mark.parametrize(
    "target, rel, damage",
    [
        ("nengo", "weights.npz", "truncate"),
        ("nengo", "weights.npz", "header"),
        ("onnx", "sequence.onnx", "truncate"),
        ("ir", "model.lmu.npz", "header"),
    ],
)
def test_a_damaged_resealed_data_file_is_refused_in_one_line(built, tmp_path, target, rel, damage):
    """The seal catches accidents, not edits: a data file damaged and resealed runs into its reader, which must
    refuse it in one line naming the artifact (the fuzzer found a truncated weights.npz and an unclosed .npy
    header escaping as ValueError / TokenError)."""
    d = _copy(built, target, tmp_path)
    p = d / rel
    raw = p.read_bytes()
    if damage == "truncate":
        p.write_bytes(raw[: len(raw) // 2])
    else:
        members = hostile.rewrite_zip(p, tmp_path / "z.npz", lambda n, b: _unclosed_header(b))
        shutil.copyfile(members, p)
    (d / outdir.RECORD).unlink()
    outdir.seal(d)
    with pytest.raises(LmuEdgeError) as e:
        lmu_edge.open_artifact(d).run(np.load(built / "x.npy"))
    assert "\n" not in str(e.value) and str(d) in str(e.value)


@pytest.mark.parametrize("shape", [3.7, 1, None, "ab", {"a": 1}])
def test_an_ir_header_array_shape_of_any_json_type_is_refused_in_one_line(tmp_path, shape):
    """The fuzzer's resealed model.lmu.npz with ``"shape": 1e-300``: a TypeError (exit 70) before."""

    def edit(header, arrays):
        header["graph"]["layers"][0]["input_encoders"]["shape"] = shape

    path = hostile.edit_ir(DIGITS_IR, tmp_path / "m.lmu.npz", edit)
    with pytest.raises(LmuEdgeError, match="the header says") as e:
        lmu_edge.load(path)
    assert "\n" not in str(e.value)


def test_a_weights_archive_placing_members_before_its_start_is_refused_in_one_line(built, tmp_path):
    """The fuzzer's resealed weights.npz whose end record places the central directory 1000 bytes further on,
    so that zipfile puts the members before the file's start: its seek raised OSError (EINVAL) from the
    stream's first step."""
    d = _copy(built, "nengo", tmp_path)
    p = d / "weights.npz"
    raw = bytearray(p.read_bytes())
    end = raw.rfind(b"PK\x05\x06")  # the end of central directory record: the directory's offset at +16
    offset = int.from_bytes(raw[end + 16 : end + 20], "little")
    raw[end + 16 : end + 20] = (offset + 1000).to_bytes(4, "little")
    p.write_bytes(bytes(raw))
    (d / outdir.RECORD).unlink()
    outdir.seal(d)
    with pytest.raises(LmuEdgeError) as e:
        s = lmu_edge.open_artifact(d).stream()
        s.reset(1)
        s.step(np.zeros(1))
    assert "\n" not in str(e.value) and str(d) in str(e.value)


def test_a_weights_member_that_is_not_npy_is_refused_in_one_line(built, tmp_path):
    """The fuzzer's resealed weights.npz with a member cut to 3 bytes: numpy hands a member without the .npy
    magic back as raw bytes, and network.py's ``.T`` on them raised AttributeError (exit 70 from run)."""
    d = _copy(built, "nengo", tmp_path)
    cut = lambda n, b: b[:3] if n == "0.enc.npy" else b  # noqa: E731  (one line beside its only use)
    hostile.rewrite_zip(built / "nengo" / "weights.npz", d / "weights.npz", cut)
    (d / outdir.RECORD).unlink()
    outdir.seal(d)
    r = CliRunner().invoke(main, ["run", str(d), "-i", str(built / "x.npy"), "-o", str(tmp_path / "y.npy")])
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.exit_code == 1 and len(lines) == 1 and "internal error" not in r.stderr, r.stderr
    assert str(d) in lines[0]


def test_infinite_weights_in_a_resealed_nengo_artifact_are_refused_in_one_line(built, tmp_path):
    """Nengo's simulator raises FloatingPointError on the inf * 0 of an infinite weight: exit 70 from verify
    (long fuzz run, inputs 3981 and 5325 of seed 2)."""
    d = _copy(built, "nengo", tmp_path)
    z = dict(np.load(built / "nengo" / "weights.npz"))
    z["1.kernel"] = np.full_like(z["1.kernel"], np.inf)
    np.savez(d / "weights.npz", **z)
    (d / outdir.RECORD).unlink()
    outdir.seal(d)
    r = CliRunner().invoke(main, ["verify", str(d), "-i", str(built / "x.npy")])
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.exit_code == 1 and "internal error" not in r.stderr, r.stderr
    assert len(lines) == 1 and str(d) in lines[0], r.stderr


def test_an_artifact_whose_model_and_source_disagree_on_the_output_is_refused_by_verify(built, tmp_path):
    """model.lmu.npz resealed with return_sequences flipped: verify compared outputs of shapes (2, 10) and
    (2, 16, 10) and raised ValueError, exit 70 (long fuzz run, input 4106 of seed 2)."""
    d = _copy(built, "ir", tmp_path)

    def flip(header, arrays):
        header["graph"]["layers"][0]["return_sequences"] = True

    hostile.edit_ir(built / "ir" / "model.lmu.npz", d / "model.lmu.npz", flip)
    (d / outdir.RECORD).unlink()
    outdir.seal(d)
    with pytest.raises(ArtifactError, match="disagree") as e:
        lmu_edge.open_artifact(d).verify(np.load(built / "x.npy"))
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("rel", ["sequence.onnx", "step.onnx"])
def test_an_onnx_model_that_loads_but_cannot_run_is_refused_in_one_line_by_run_and_by_stream(built, tmp_path, rel):
    """Fuzz seed 6, input 2562 generalized: a model edited and the artifact resealed so that ONNX Runtime loads it
    and fails only when it runs (here a Reshape's target asks for two rows where one is fed; its exceptions are
    no RuntimeError). ``run`` (sequence.onnx) and a stream's ``step`` (step.onnx) both refuse it in one line naming
    the artifact's file; before, the stream's step let ONNX Runtime's exception through (an internal error)."""
    import onnx

    d = _copy(built, "onnx", tmp_path)
    m = onnx.load(d / rel)
    graphs = [m.graph] + [a.g for node in m.graph.node for a in node.attribute if a.g.name]  # Scan's body
    shape = next(t for g in graphs for t in g.initializer if t.name.endswith(".shape"))  # a Reshape's target
    dims = onnx.numpy_helper.to_array(shape).copy()
    dims[0] = 2  # two rows where one is fed: consistent shapes when the model loads, a wrong count when it runs
    shape.CopyFrom(onnx.numpy_helper.from_array(dims, shape.name))
    onnx.save(m, d / rel)
    (d / outdir.RECORD).unlink()
    outdir.seal(d)
    x = np.load(built / "x.npy")
    with pytest.raises(LmuEdgeError) as e:
        if rel == "sequence.onnx":
            lmu_edge.open_artifact(d).run(x)
        else:
            s = lmu_edge.open_artifact(d).stream()
            s.reset(1)
            s.step(x[0, 0])
    assert "\n" not in str(e.value) and f"{d}/{rel}: onnxruntime cannot" in str(e.value), str(e.value)
