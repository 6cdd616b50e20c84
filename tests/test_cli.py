"""The command line, run as a user runs it: the installed console script in a subprocess."""

import json
import os
import re
import subprocess

import numpy as np
import pytest
from conftest import EXAMPLES, lmu_edge_cli
from graphs import chain

import lmu_edge


def cli(*args, cwd=None):
    return subprocess.run(lmu_edge_cli() + [str(a) for a in args], capture_output=True, text=True, cwd=cwd, timeout=300)


def assert_one_line_error(r, *words):
    assert r.returncode != 0, r.stdout
    assert "Traceback" not in r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, r.stderr
    for w in words:
        assert w in lines[0], lines[0]


def test_help_and_version():
    r = cli("--help")
    assert r.returncode == 0 and "inspect" in r.stdout and "convert" in r.stdout and "verify" in r.stdout
    r = cli("--version")
    assert r.returncode == 0 and lmu_edge.__version__ in r.stdout
    r = cli("convert", "--help")
    assert r.returncode == 0 and "--error-budget" in r.stdout and "--realization" in r.stdout


def test_run_help_names_every_runtime_of_every_target():
    from lmu_edge import registry

    r = cli("run", "--help")
    text = re.sub(r"-\s+", "-", " ".join(r.stdout.split()))  # click wraps the help, also after a hyphen
    for name in registry.TARGETS:
        for runtime in registry.target(name).RUNTIMES:
            assert f"{runtime}" in text, (name, runtime)
        assert f"{name}: " in text, name


def test_inspect_shows_layers_and_measured_candidates():
    r = cli("inspect", EXAMPLES / "digits_lmu.lmu.npz")
    assert r.returncode == 0, r.stderr
    assert "order=32" in r.stdout and "theta=64" in r.stdout
    assert "<- auto" in r.stdout and "rk4" in r.stdout and "ops/step" in r.stdout
    r = cli("inspect", EXAMPLES / "digits_lmu.lmu.npz", "--json")
    info = json.loads(r.stdout)
    cands = info["layers"][0]["candidates"]
    assert {c["name"] for c in cands} == {"zoh", "pade", "rk4"}  # auto measures the implicit step too
    assert all(c["error"] <= 1e-6 for c in cands if c["within_budget"])


def test_convert_run_verify_round_trip(tmp_path):
    out = tmp_path / "out"
    r = cli("convert", EXAMPLES / "digits_lmu.lmu.npz", "--target", "ir", "-o", out, "--quiet")
    assert r.returncode == 0, r.stderr
    assert "error vs source" in r.stdout
    x = np.load(EXAMPLES / "digits_test_x.npy")
    r = cli("run", out, "--input", EXAMPLES / "digits_test_x.npy", "-o", tmp_path / "y.npy")
    assert r.returncode == 0, r.stderr
    y = np.load(tmp_path / "y.npy")
    np.testing.assert_allclose(y, lmu_edge.simulate(lmu_edge.load(EXAMPLES / "digits_lmu.lmu.npz"), x), atol=1e-9)
    labels = np.load(EXAMPLES / "digits_test_y.npy")
    assert np.mean(y.argmax(-1) == labels) > 0.85  # the shipped model really classifies digits
    assert "(NumPy .npy format" not in r.stdout
    r = cli("run", out, "--input", EXAMPLES / "digits_test_x.npy", "-o", tmp_path / "y.txt")  # says what it wrote
    assert r.returncode == 0 and "wrote " in r.stdout and "y.txt (NumPy .npy format" in r.stdout, r.stdout
    np.testing.assert_array_equal(np.load(tmp_path / "y.txt"), y)
    r = cli("verify", out, "--input", EXAMPLES / "digits_test_x.npy")
    assert r.returncode == 0 and r.stdout.startswith("PASS"), r.stdout + r.stderr
    r = cli("verify", out, "--input", EXAMPLES / "digits_test_x.npy", "--tolerance", "0")
    assert r.returncode == 1 and "FAIL" in r.stderr


@pytest.mark.parametrize(
    "case",
    [
        "missing_model",
        "not_a_model",
        "bad_input_shape",
        "existing_output",
        "over_budget",
        "not_an_artifact",
        "bad_runtime",
        "bad_npy",
    ],
)
def test_errors_are_one_line_with_nonzero_exit(case, tmp_path, rng):
    model = lmu_edge.save(chain(rng, q=6, theta=8.0), tmp_path / "m.lmu.npz")
    good = tmp_path / "good"
    lmu_edge.convert(model, "ir", good)
    if case == "missing_model":
        r = cli("inspect", tmp_path / "nope.lmu.npz")
        assert_one_line_error(r, "nope.lmu.npz")
    elif case == "not_a_model":
        (tmp_path / "junk.npz").write_bytes(b"\x00" * 100)
        r = cli("convert", tmp_path / "junk.npz", "-t", "ir", "-o", tmp_path / "o")
        assert_one_line_error(r, "junk.npz")
        assert not (tmp_path / "o").exists()
    elif case == "bad_input_shape":
        np.save(tmp_path / "x.npy", np.zeros((2, 10, 5)))
        r = cli("run", good, "-i", tmp_path / "x.npy", "-o", tmp_path / "y.npy")
        assert_one_line_error(r, f"--input {tmp_path / 'x.npy'}: model", "takes 2 features")  # names the file
        assert not (tmp_path / "y.npy").exists()
        r = cli("verify", good, "-i", tmp_path / "x.npy")
        assert_one_line_error(r, f"--input {tmp_path / 'x.npy'}: model", "takes 2 features")
    elif case == "existing_output":
        r = cli("convert", model, "-t", "ir", "-o", good)
        assert_one_line_error(r, "not empty", "--force")
    elif case == "over_budget":
        r = cli("convert", model, "-t", "ir", "-o", tmp_path / "o", "--realization", "rk4", "--substeps", "1", "-q")
        assert_one_line_error(r, "error budget")
        assert not (tmp_path / "o").exists()
    elif case == "not_an_artifact":
        r = cli("run", tmp_path, "-i", model, "-o", tmp_path / "y.npy")
        assert_one_line_error(r, "not an lmu-edge output directory")
    elif case == "bad_runtime":
        np.save(tmp_path / "x.npy", np.zeros((1, 10, 2)))
        r = cli("run", good, "-i", tmp_path / "x.npy", "-o", tmp_path / "y.npy", "--runtime", "qemu")
        assert_one_line_error(r, "no runtime 'qemu'")
        # refused before the input is read (a bad --input too is not what this run stops on)
        (tmp_path / "x.npy").write_text("not numpy")
        for cmd in (
            ["run", good, "-i", tmp_path / "x.npy", "-o", tmp_path / "y.npy"],
            ["verify", good, "-i", tmp_path / "x.npy"],
        ):
            assert_one_line_error(cli(*cmd, "--runtime", "qemu"), "no runtime 'qemu'")
    elif case == "bad_npy":
        (tmp_path / "x.npy").write_text("not numpy")
        r = cli("verify", good, "-i", tmp_path / "x.npy")
        assert_one_line_error(r, "x.npy")


def test_usage_errors_exit_nonzero():
    r = cli("convert")
    assert r.returncode == 2 and "Missing argument" in r.stderr


def test_int16x8_says_which_weights_it_widened(tmp_path):
    # docs/matrix.md: the matrix's tanh model misses 48 dB with int8 weights, so two matrices get 16 bits;
    # convert says which and why, and --weight-bits 8 keeps int8 weights (and says nothing)
    here = EXAMPLES.parent / "matrix"
    np.save(tmp_path / "cal.npy", np.load(here / "ff_fft_zoh_tanh_before_dense.npz")["x_cal"])
    args = ["convert", here / "ff_fft_zoh_tanh_before_dense.keras", "-t", "c", "--quantize", "int16x8"]
    args += ["--calibration", tmp_path / "cal.npy", "-q", "-O", "measure=false"]
    r = cli(*args, "-o", tmp_path / "a")
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if "16-bit weights in" in ln)
    assert "16-bit weights in dense.kernel, lmu_feedforward.hidden: int8 weights gave 42.5 dB" in line, line
    assert "below 48 dB (50.0 dB now); --weight-bits 8 keeps int8 weights" in line, line
    r = cli(*args, "--weight-bits", "8", "-o", tmp_path / "b")
    assert r.returncode == 0, r.stderr
    assert "16-bit weights" not in r.stdout


def test_c_int8_says_which_layers_it_widened(tmp_path):
    # the matrix's tanh model: 8-bit activations give C int8 26.2 dB on its calibration data, so two
    # layers get 16-bit activations; convert says which and why, and -O widen_db=null turns it off
    here = EXAMPLES.parent / "matrix"
    np.save(tmp_path / "cal.npy", np.load(here / "ff_fft_zoh_tanh_before_dense.npz")["x_cal"])
    args = ["convert", here / "ff_fft_zoh_tanh_before_dense.keras", "-t", "c", "--quantize", "int8"]
    args += ["--calibration", tmp_path / "cal.npy", "-q", "-O", "measure=false"]
    r = cli(*args, "-o", tmp_path / "a")
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if "16-bit activations in" in ln)
    # the search's own choice (lmu_feedforward, dense_2: 34.7 dB) gave 21.0 dB on a held-out half of the
    # calibration; searched there, the input and the first Dense took 16 bits too (tests/test_held_out.py)
    head = "16-bit activations in input, dense, lmu_feedforward, dense_2 (the C API is int16, input and output)"
    assert head + ": 8 bits gave 26.2 dB against the source" in line, line
    assert "below 33 dB (38.9 dB now); --option widen_db=null keeps every layer 8-bit" in line, line
    held = next(ln for ln in r.stdout.splitlines() if "held out:" in ln)
    assert "the first choice gave 21.0 dB on half the calibration sequences" in held, held
    assert held.endswith("--option held_out=false skips the check"), held
    r = cli(*args, "-O", "held_out=false", "-o", tmp_path / "h")
    assert "16-bit activations in lmu_feedforward, dense_2: 8 bits gave 26.2 dB" in r.stdout, r.stdout
    assert "held out:" not in r.stdout
    r = cli(*args, "-O", "widen_db=null", "-o", tmp_path / "b")
    assert r.returncode == 0, r.stderr
    assert "16-bit activations" not in r.stdout
    r = cli(*args, "-O", "widen_db=high", "-o", tmp_path / "c")
    assert r.returncode != 0 and "widen_db='high' is not a number of dB" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "c").exists()


def test_onnx_int8_says_which_tensors_it_widened(tmp_path):
    # the matrix's tanh model: 8-bit activations give ONNX int8 24.3 dB on its calibration data, so a few
    # tensors get 16 bits; convert says how many and why, and --option widen_db=null turns it off
    here = EXAMPLES.parent / "matrix"
    np.save(tmp_path / "cal.npy", np.load(here / "ff_fft_zoh_tanh_before_dense.npz")["x_cal"])
    args = ["convert", here / "ff_fft_zoh_tanh_before_dense.keras", "-t", "onnx", "--quantize", "int8"]
    args += ["--calibration", tmp_path / "cal.npy", "-q"]
    r = cli(*args, "-o", tmp_path / "a")
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if "16 bits for" in ln)
    widened = r"16 bits for \d+ activations?((, | and )\d+ weight matri(x|ces))?( and the input)? \("
    assert re.search(widened, line), line
    gave = re.search(r"8 bits gave (\d+\.\d) dB against the source on the calibration data, below 36 dB \(", line)
    assert gave and float(gave.group(1)) < 30.0, line  # 24.3 (24.4 while the output was 8-bit too)
    assert line.endswith("dB now); --option widen_db=null keeps them 8-bit"), line
    layers = {layer.name for layer in lmu_edge.load(here / "ff_fft_zoh_tanh_before_dense.keras").layers}
    names = line.split(" (", 1)[1].split("): ", 1)[0].split(", ")  # issue 55: by the Keras layer, not add_24
    assert all(n == "x" or n.split(".")[0] in layers for n in names), (names, layers)
    assert "session" not in r.stdout, r.stdout  # ONNX Runtime's default session options give the error above
    r = cli(*args, "--option", "widen_db=null", "-o", tmp_path / "b")
    assert r.returncode == 0, r.stderr
    assert "16 bits for" not in r.stdout
    # README: verify of a quantized artifact without bit-exactness to check says MEASURED and exits 0; with
    # --tolerance it is a bound (FAIL, exit 1, beyond it); inputs beyond the calibration range get a warning
    r = cli("verify", tmp_path / "a", "-i", tmp_path / "cal.npy")
    assert r.returncode == 0 and r.stdout.startswith("MEASURED (nothing enforced): error "), r.stdout + r.stderr
    assert r.stderr == "", r.stderr
    r = cli("verify", tmp_path / "a", "-i", tmp_path / "cal.npy", "--tolerance", "1e-6")
    assert r.returncode == 1 and r.stderr.startswith("FAIL: "), r.stdout + r.stderr
    np.save(tmp_path / "far.npy", np.load(tmp_path / "cal.npy") * 50)
    r = cli("verify", tmp_path / "a", "-i", tmp_path / "far.npy")
    assert r.returncode == 0 and r.stdout.startswith("MEASURED") and "lie outside [" in r.stderr, r.stderr


@pytest.mark.slow
def test_tflite_int8_says_which_operators_it_widened(tmp_path):
    pytest.importorskip("tensorflow", reason="tensorflow not installed: pip install 'lmu-edge[tflite]'")
    here = EXAMPLES.parent / "matrix"
    np.save(tmp_path / "cal.npy", np.load(here / "ff_sigmoid_anylen_activation.npz")["x_cal"])
    args = ["convert", here / "ff_sigmoid_anylen_activation.keras", "-t", "tflite", "--quantize", "int8"]
    r = cli(*args, "--calibration", tmp_path / "cal.npy", "-q", "-o", tmp_path / "a")
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if "16 bits for" in ln)
    assert re.search(r"16 bits for \d+ more operators than the LMU state path( and the input)? \(.*TANH", line), line
    layers = {layer.name for layer in lmu_edge.load(here / "ff_sigmoid_anylen_activation.keras").layers}
    ops = line.split(" (", 1)[1].split("): ", 1)[0].split(", ")  # issue 55: "TANH -> lmu.hidden/Tanh"
    written = [o.split(" -> ")[1] for o in ops if o != "input x"]  # by its layer, or the contract's y
    assert all(w == "y" or w.split("/")[0].split(".")[0] in layers for w in written), ops
    assert "8 bits gave 27.8 dB against the source on the calibration data, below 36 dB (" in line, line


def test_int16_mode_from_the_command_line(tmp_path, rng):
    # --quantize int16 (c only): 16-bit weights and a 32-bit state by default; 9+ weight bits need it
    model = lmu_edge.save(chain(rng, q=6, theta=8.0), tmp_path / "m.lmu.npz")
    np.save(tmp_path / "x.npy", rng.standard_normal((2, 30, 2)))
    r = cli(
        "convert", model, "-t", "c", "--quantize", "int16", "--calibration", tmp_path / "x.npy", "-o", tmp_path / "c",
        "-O", "measure=false",  # the widths are the subject, not the Cortex-M counts
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    q = lmu_edge.load(tmp_path / "c" / "quantized.lmu.npz").metadata["quantization"]
    assert (q["activation_bits"], q["weight_bits"], q["state_bits"]) == (16, 16, 32)
    r = cli(
        "convert",
        model,
        "-t",
        "tflite",
        "--quantize",
        "int16",
        "--calibration",
        tmp_path / "x.npy",
        "-o",
        tmp_path / "t",
        "-q",
    )
    assert_one_line_error(r, "does not support quantize='int16'", "c")
    assert not (tmp_path / "t").exists()
    r = cli(
        "convert", model, "-t", "c", "--quantize", "int8", "--weight-bits", "12", "--calibration", tmp_path / "x.npy",
        "-o", tmp_path / "w", "-q",
    )  # fmt: skip
    assert_one_line_error(r, "--weight-bits 12 does not fit --quantize int8", "--quantize int16")
    assert not (tmp_path / "w").exists()
    r = cli(
        "convert",
        model,
        "-t",
        "c",
        "--quantize",
        "int16x8",
        "--weight-bits",
        "16",
        "--calibration",
        tmp_path / "x.npy",
        "-o",
        tmp_path / "w",
    )  # fmt: skip  (int16x8 keeps int8 weights: refused before any work, so without -q still one line)
    assert_one_line_error(
        r, "--weight-bits 16 does not fit --quantize int16x8", "int16x8 widens the weights that need it"
    )
    assert not (tmp_path / "w").exists()
    r = cli("convert", "--help")
    text = " ".join(r.stdout.split())
    assert "int16 (c)" in text and "--quantize [float|float32|int8|int16x8|int16]" in text  # a choice, listed


def test_no_arguments_print_the_help_as_it_reads():
    # the first command a newcomer types: the help over many lines (exit 2, as click's), not one error line
    r = cli()
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.splitlines()
    assert lines[0].startswith("Usage: lmu-edge") and "Commands:" in lines and len(lines) > 15


def test_run_never_replaces_a_file_unasked_nor_its_input_nor_the_artifact(tmp_path):
    out = tmp_path / "out"
    assert cli("convert", EXAMPLES / "digits_lmu.lmu.npz", "-t", "ir", "-o", out, "-q").returncode == 0
    x = tmp_path / "x.npy"
    np.save(x, np.load(EXAMPLES / "digits_test_x.npy")[:3])
    keep = x.read_bytes()
    mine = tmp_path / "notes.npy"
    mine.write_bytes(b"a user's file")
    r = cli("run", out, "-i", x, "-o", mine)
    assert_one_line_error(r, f"--output {mine} exists", "--force")
    assert mine.read_bytes() == b"a user's file"
    r = cli("run", out, "-i", x, "-o", x, "--force")
    assert_one_line_error(r, "is the --input file")
    assert x.read_bytes() == keep
    record = (out / "lmu-edge-files.json").read_bytes()
    for inside in (out / "lmu-edge-files.json", out / "y.npy"):
        r = cli("run", out, "-i", x, "-o", inside, "--force")
        assert_one_line_error(r, "lies inside the artifact")
    assert (out / "lmu-edge-files.json").read_bytes() == record and not (out / "y.npy").exists()
    r = cli("run", out, "-i", x, "-o", mine, "--force")
    assert r.returncode == 0, r.stderr
    assert np.load(mine).shape == (3, 10)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.npy", "out", "x.npy"]  # no .partial left
    (tmp_path / "adir").mkdir()
    assert_one_line_error(cli("run", out, "-i", x, "-o", tmp_path / "adir", "--force"), "is a directory")


@pytest.mark.parametrize("command", ["convert", "report", "run"])
def test_an_output_place_that_cannot_be_written_is_one_line_before_any_work(command, tmp_path):
    # /sys refuses new directories to root too (EPERM; EACCES to a user; EROFS where it is mounted read-only)
    where = "/sys/lmu-edge-test"
    model, x = EXAMPLES / "digits_lmu.lmu.npz", EXAMPLES / "digits_test_x.npy"
    if command == "convert":
        r = cli("convert", model, "-t", "c", "-o", f"{where}/out")
    elif command == "report":
        r = cli("report", model, "--data", x, "-o", f"{where}/rep")
    else:
        assert cli("convert", model, "-t", "ir", "-o", tmp_path / "a", "-q").returncode == 0
        r = cli("run", tmp_path / "a", "-i", x, "-o", f"{where}/y.npy")
    assert_one_line_error(r, "cannot write in /sys (", "choose another path")
    assert r.stdout == ""  # refused before any work: no measuring, no "wrote"


@pytest.mark.parametrize(
    "args,words",
    [
        (["-t", "c", "--prefix", "1bad"], "--prefix '1bad' is not usable"),
        (["-t", "c", "--device", "foo"], "unknown --device 'foo'"),
        (["-t", "c", "--device", "cortex-m0-16k"], "has no FPU"),
        (["-t", "tflite", "-O", "variant=foo"], "unknown variant 'foo'"),
        (["-t", "tflite", "-O", "form=foo"], "unknown form 'foo'"),
        (["-t", "c", "-O", "device=[1]"], "unknown --device [1]"),
        (["-t", "ir", "--device", "cortex-m0-16k"], "(device: --target c only)"),
        (
            [
                "-t",
                "tflite",
                "--variant",
                "internal",
                "--quantize",
                "int8",
                "--calibration",
                EXAMPLES / "digits_test_x.npy",
            ],
            "internal-state variant is float32 only",
        ),
    ],
)
def test_option_values_a_target_cannot_take_are_refused_before_any_work(args, words, tmp_path):
    # without --quiet: a refusal after the fold would follow its progress lines on stderr
    r = cli("convert", EXAMPLES / "digits_lmu.lmu.npz", *args, "-o", tmp_path / "o")
    assert_one_line_error(r, words)
    assert r.returncode == 1 and "inside lmu-edge" not in r.stderr and not (tmp_path / "o").exists()


@pytest.mark.parametrize("target", ["tflite", "nengo"])
def test_quiet_means_nothing_on_stderr(target, tmp_path):
    # TensorFlow's C++ logs, an AutoGraph "please report this" warning, TF's own deprecation of the
    # interpreter its calibrator builds, nengo's numpy.core notice and its unclosed simulators all used to
    # reach the terminal of a user who asked for --quiet
    args = ["--quantize", "int8", "--calibration", EXAMPLES / "digits_calibration_x.npy"] if target == "tflite" else []
    r = cli("convert", EXAMPLES / "keras_digits.h5", "-t", target, *args, "-o", tmp_path / "o", "-q")
    assert r.returncode == 0 and r.stdout.startswith(f"wrote {tmp_path / 'o'} (target {target}"), r.stderr
    assert r.stderr == ""
    # run and verify too (LiteRT printed its XNNPACK delegate notice on every run)
    x = EXAMPLES / "keras_digits_test_x.npy"
    r = cli("run", tmp_path / "o", "-i", x, "-o", tmp_path / "y.npy", "-q")
    assert r.returncode == 0 and r.stdout.startswith("wrote ") and r.stderr == "", r.stderr
    r = cli("verify", tmp_path / "o", "-i", x, "-q")
    assert r.returncode == 0 and r.stdout.split(":")[0] in ("PASS", "MEASURED (nothing enforced)"), r.stdout
    assert r.stderr == "", r.stderr


def test_lmu_edge_debug_shows_the_traceback_and_keeps_native_logs(tmp_path):
    # README: "LMU_EDGE_DEBUG=1 shows the traceback" and, with --quiet, "keeps" TensorFlow's native logs
    env = dict(os.environ, LMU_EDGE_DEBUG="1")
    r = subprocess.run(lmu_edge_cli() + ["inspect", str(tmp_path / "nope.lmu.npz")], capture_output=True, text=True,
                       timeout=300, env=env)  # fmt: skip
    assert r.returncode != 0 and "Traceback (most recent call last)" in r.stderr
    assert r.stderr.rstrip().splitlines()[-1].endswith("nope.lmu.npz: no such file"), r.stderr
    # the converter's native log is printed by its first int8 conversion: the widening search and the plain
    # form's comparison (more conversions of the same model) are left out (-O), they add nothing here
    args = ["convert", EXAMPLES / "keras_digits.h5", "-t", "tflite", "--quantize", "int8", "--calibration",
            EXAMPLES / "digits_calibration_x.npy", "-o", tmp_path / "o", "-q",
            "-O", "widen_db=null", "-O", "compare_plain=false"]  # fmt: skip
    r = subprocess.run(lmu_edge_cli() + [str(a) for a in args], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0 and r.stdout.startswith("wrote "), r.stderr
    # the TFLite converter's native log, silenced without the variable (test above); not absl's "InitializeLog"
    # notice, which the tensorflow wheel prints and tensorflow-cpu (the suite's, scripts/setup-common.sh) does not
    assert "fully_quantize: 0" in r.stderr, r.stderr


@pytest.mark.parametrize("quantize", ["float", "float32"])
def test_bit_widths_without_a_quantized_mode_are_refused_not_ignored(quantize, tmp_path):
    r = cli(
        "convert",
        EXAMPLES / "digits_lmu.lmu.npz",
        "-t",
        "c",
        "--quantize",
        quantize,
        "--state-bits",
        "8",
        "-o",
        tmp_path / "o",
    )
    assert_one_line_error(r, "--state-bits set the widths of a quantized artifact", "--quantize int8")
    assert r.returncode == 2
    r = cli(
        "convert",
        EXAMPLES / "digits_lmu.lmu.npz",
        "-t",
        "c",
        "--weight-bits",
        "4",
        "--state-bits",
        "8",
        "-o",
        tmp_path / "o",
    )
    assert_one_line_error(r, "--weight-bits and --state-bits set", "leave them out for float")
    assert not (tmp_path / "o").exists()
    r = cli("convert", EXAMPLES / "digits_lmu.lmu.npz", "-t", "c", "-O", "weight_bits=4", "-o", tmp_path / "o")
    assert_one_line_error(r, "--weight-bits set the widths")  # given through -O, the same


def test_quiet_keeps_lmu_edges_own_lines_and_works_with_stderr_closed(tmp_path):
    # --quiet silences native logs, not the command's verdict: report's FAIL line must still show
    r = cli(
        "report", EXAMPLES / "digits_lmu.lmu.npz", "--data", EXAMPLES / "digits_test_x.npy", "-t", "ir",
        "--quantize", "float", "--tolerance", "0", "-q", "-o", tmp_path / "rep",
    )  # fmt: skip
    assert r.returncode == 1 and r.stderr.startswith("FAIL: ir (error "), r.stderr
    argv = lmu_edge_cli() + [
        "convert",
        str(EXAMPLES / "digits_lmu.lmu.npz"),
        "-t",
        "ir",
        "-o",
        str(tmp_path / "o"),
        "-q",
    ]
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=None, text=True, timeout=300, pass_fds=(), close_fds=True,
                       preexec_fn=lambda: os.close(2))  # fmt: skip
    assert r.returncode == 0 and r.stdout.startswith("wrote "), r.returncode
