import json
import warnings

import numpy as np
import pytest
from graphs import chain

import lmu_edge
from lmu_edge.errors import (
    ArtifactError,
    FoldError,
    LmuEdgeError,
    OutputExistsError,
    QuantizationError,
    ShapeError,
    VerificationError,
)


@pytest.fixture
def model(tmp_path, rng):
    return lmu_edge.save(chain(rng, q=8, theta=12.0, seq_len=None), tmp_path / "m.lmu.npz")


def test_convert_run_stream_and_reopen(model, tmp_path, rng):
    art = lmu_edge.convert(model, target="ir", out_dir=tmp_path / "out")
    assert sorted(p.name for p in art.path.iterdir()) == [
        "artifact.json",
        "lmu-edge-files.json",
        "model.lmu.npz",
        "report.html",
        "report.json",
        "source.lmu.npz",
    ]
    x = rng.standard_normal((2, 130, 2))
    y = art.run(x)
    np.testing.assert_allclose(y, lmu_edge.simulate(lmu_edge.load(model), x), rtol=0, atol=1e-9)
    s = art.stream()
    s.reset()
    ys = np.stack([s.step(x[0, t]) for t in range(130)])
    np.testing.assert_allclose(ys, y[0], atol=1e-12)
    again = lmu_edge.open_artifact(tmp_path / "out")
    np.testing.assert_array_equal(again.run(x), y)
    assert again.verify(x)["passed"]
    y32 = again.run(x, runtime="reference-float32")
    assert y32.dtype == np.float32
    rep = json.loads((art.path / "report.json").read_text())
    assert rep["verification"]["passed"] and rep["layers"][1]["measurement"]["error"] <= 1e-6


def test_convert_takes_a_graph_and_calibration_files(tmp_path, rng):
    g = chain(rng, q=6, theta=8.0)
    cal = tmp_path / "cal.npz"
    np.savez(cal, x=rng.standard_normal((3, 40, 2)))
    art = lmu_edge.convert(g, "ir", tmp_path / "o", calibration=cal)
    assert json.loads((art.path / "report.json").read_text())["verification"]["input_shape"] == [3, 40, 2]
    np.save(tmp_path / "cal.npy", rng.standard_normal((3, 40, 2)))
    lmu_edge.convert(g, "ir", tmp_path / "o2", calibration=tmp_path / "cal.npy")
    np.savez(tmp_path / "two.npz", a=np.zeros(3), b=np.zeros(3))
    with pytest.raises(ShapeError, match="name the input array 'x'"):
        lmu_edge.convert(g, "ir", tmp_path / "o3", calibration=tmp_path / "two.npz")
    assert not (tmp_path / "o3").exists()
    np.save(tmp_path / "wide.npy", np.zeros((40, 3)))  # one sequence (T, F): the error names the shape given
    with pytest.raises(ShapeError, match=r"takes 2 features per step, got 3 \(shape \(40, 3\)\)$"):
        lmu_edge.convert(g, "ir", tmp_path / "o4", calibration=tmp_path / "wide.npy")


def test_refuses_to_overwrite_unless_asked(model, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(OutputExistsError, match="--force"):
        lmu_edge.convert(model, "ir", out)
    assert (out / "keep.txt").read_text() == "mine"
    # --force replaces earlier lmu-edge output only, never a directory of the user's files
    with pytest.raises(OutputExistsError, match="did not write"):
        lmu_edge.convert(model, "ir", out, overwrite=True)
    assert (out / "keep.txt").read_text() == "mine"
    first = lmu_edge.convert(model, "ir", tmp_path / "earlier")
    before = (first.path / "artifact.json").stat().st_ino
    lmu_edge.convert(model, "ir", first.path, overwrite=True)  # its own earlier output: replaced
    assert (first.path / "artifact.json").stat().st_ino != before
    (first.path / "notes.txt").write_text("mine")  # a file the user added: refused, kept
    with pytest.raises(OutputExistsError, match="notes.txt"):
        lmu_edge.convert(model, "ir", first.path, overwrite=True)
    assert (first.path / "notes.txt").read_text() == "mine"


def test_force_never_replaces_the_working_directory(model, tmp_path, monkeypatch):
    lmu_edge.convert(model, "ir", tmp_path / "o")
    monkeypatch.chdir(tmp_path / "o")
    with pytest.raises(OutputExistsError, match="working directory"):
        lmu_edge.convert(model, "ir", ".", overwrite=True)
    assert (tmp_path / "o" / "artifact.json").exists()


def test_failed_conversion_leaves_nothing_behind(model, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(FoldError):
        lmu_edge.convert(model, "ir", out, realization="euler")
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["m.lmu.npz"]  # no partial directory either


def test_failure_inside_emit_leaves_nothing_behind(model, tmp_path, monkeypatch):
    import lmu_edge.targets.ir as target

    def boom(graph, out_dir, options):
        (out_dir / "half.bin").write_bytes(b"x")
        raise LmuEdgeError("disk full")

    monkeypatch.setattr(target, "emit", boom)
    with pytest.raises(LmuEdgeError, match="disk full"):
        lmu_edge.convert(model, "ir", tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.lmu.npz"]


def test_quantization_requests_are_checked(model, tmp_path):
    with pytest.raises(QuantizationError, match="does not support quantize='int8'"):
        lmu_edge.convert(model, "ir", tmp_path / "o", quantize="int8")


def test_unknown_target_option_and_runtime(model, tmp_path, rng):
    with pytest.raises(LmuEdgeError, match="unknown target 'fpga'"):
        lmu_edge.convert(model, "fpga", tmp_path / "o")
    with pytest.raises(ArtifactError, match="no option"):
        lmu_edge.convert(model, "ir", tmp_path / "o", prefix="x")
    art = lmu_edge.convert(model, "ir", tmp_path / "o")
    with pytest.raises(ArtifactError, match="no runtime 'qemu'"):
        art.run(rng.standard_normal((1, 5, 2)), runtime="qemu")


def test_verify_fails_beyond_tolerance(model, tmp_path, rng):
    art = lmu_edge.convert(model, "ir", tmp_path / "o", realization="rk4", error_budget=1e-2)
    x = rng.standard_normal((2, 100, 2))
    with pytest.raises(VerificationError, match="more than the tolerance 1e-09"):
        art.verify(x, tolerance=1e-9)


def test_conversion_beyond_its_tolerance_writes_nothing(model, tmp_path):
    with pytest.raises(VerificationError, match="nothing was written"):
        lmu_edge.convert(model, "ir", tmp_path / "o", realization="rk4", error_budget=1e-2, tolerance=1e-12)
    assert not (tmp_path / "o").exists()


def test_open_artifact_errors(tmp_path, rng):
    with pytest.raises(ArtifactError, match="not an lmu-edge output directory.*-o NEW_DIR'$"):
        lmu_edge.open_artifact(tmp_path)
    with pytest.raises(ArtifactError, match="no such directory; create one with .* -o .*gone'$"):
        lmu_edge.open_artifact(tmp_path / "gone")
    lmu_edge.convert(chain(rng, q=4, theta=6.0), "ir", tmp_path / "rep" / "ir")  # as report lays them out
    with pytest.raises(ArtifactError, match=r"it holds artifacts in .*rep/ir: give one of those$"):
        lmu_edge.open_artifact(tmp_path / "rep")
    (tmp_path / "artifact.json").write_text("{")
    with pytest.raises(ArtifactError, match="malformed"):
        lmu_edge.open_artifact(tmp_path)
    (tmp_path / "artifact.json").write_text(json.dumps({"format": "lmu-edge-artifact", "version": 7, "target": "ir"}))
    with pytest.raises(ArtifactError, match="version 7"):
        lmu_edge.open_artifact(tmp_path)


def test_load_errors(tmp_path):
    from lmu_edge.errors import ModelFormatError

    with pytest.raises(ModelFormatError, match="no such file"):
        lmu_edge.load(tmp_path / "nope.lmu.npz")
    (tmp_path / "m.onnx").write_text("x")
    with pytest.raises(ModelFormatError, match="supported model files"):
        lmu_edge.load(tmp_path / "m.onnx")


def test_errors_subclass_builtins():
    assert issubclass(ShapeError, ValueError) and issubclass(OutputExistsError, FileExistsError)
    from lmu_edge.errors import MissingDependencyError, UnsupportedLayerError

    assert issubclass(MissingDependencyError, ImportError) and issubclass(UnsupportedLayerError, ValueError)


def test_missing_extra_names_the_extra_to_install():
    from lmu_edge.errors import MissingDependencyError
    from lmu_edge.registry import require

    with pytest.raises(MissingDependencyError, match=r"pip install 'lmu-edge\[onnx\]'"):
        require("lmu_edge_no_such_runtime", "onnx", "the ONNX target")


#: a C conversion without the Cortex-M flash builds, the QEMU count and the report page
FAST_C = {"flash": False, "measure": False, "accuracy_report": False}


def test_a_calibration_of_one_repeated_value_converts_with_a_warning_that_says_so(model, tmp_path):
    # a new user's first try: np.full((4, 32, 2), 0.3) as calibration gave ranges of that one input and an SQNR
    # measured on it that looked fine, without a word; two distinct values are a range and pass silently
    with pytest.warns(UserWarning, match=r"calibration: all 256 values are 0\.3, so every range covers that one"):
        lmu_edge.convert(model, "c", tmp_path / "a", quantize="int8", calibration=np.full((4, 32, 2), 0.3), **FAST_C)
    x = np.full((4, 32, 2), 0.3)
    x[0, 0, 0] = -0.3
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="calibration: all")
        lmu_edge.convert(model, "c", tmp_path / "b", quantize="int8", calibration=x, **FAST_C)


def test_n_sequences_without_their_feature_axis_get_the_fix_in_the_error(tmp_path, rng):
    # psMNIST's (200, 784) for a one-feature model reads as one sequence of 200 steps x 784 features: the
    # error says how to add the axis; a model of 2 features gets no such hint (the shape is not ambiguous)
    one = lmu_edge.save(chain(rng, q=4, theta=8.0, n_in=1), tmp_path / "one.lmu.npz")
    with pytest.raises(ShapeError, match=r"\(shape \(200, 784\)\); if these are 200 sequences of 784 steps, add"):
        lmu_edge.convert(one, "ir", tmp_path / "o", calibration=np.zeros((200, 784)))
    lmu_edge.convert(one, "ir", tmp_path / "o2", calibration=np.zeros((200, 784))[..., None])
