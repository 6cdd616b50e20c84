"""A model file never runs code, --force never deletes a user's files, concurrent runs never lose work,
and malformed input gets a one-line error. Each test here failed on the code before the security work."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import lmu_edge
from lmu_edge import escape, ir, limits, registry
from lmu_edge.errors import LimitError, LmuEdgeError, OutputExistsError

sys.path.insert(0, str(Path(__file__).parent))
import hostile
from conftest import lmu_edge_cli

EX = hostile.EXAMPLES
DIGITS_IR = EX / "digits_lmu.lmu.npz"
CAL = EX / "digits_calibration_x.npy"


def cli(*args, cwd=None, timeout=300):
    args = [str(a) for a in args]
    if args and args[0] in ("convert", "report") and "-q" not in args:
        args.insert(1, "-q")  # progress messages off: stderr then holds only what went wrong
    return subprocess.run(lmu_edge_cli() + args, capture_output=True, text=True, cwd=cwd, timeout=timeout)


def one_line_error(r, code=None):
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode != 0 and (code is None or r.returncode == code), (r.returncode, r.stderr)
    assert len(lines) == 1 and lines[0].startswith("lmu-edge: error: "), r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    return lines[0]


# --- 1. names from model files never become code --------------------------------------------------


@pytest.mark.parametrize("where", ["model name", "dense layer", "lmu layer"])
def test_hostile_keras_names_cannot_inject_code_into_c(tmp_path, where):
    names = {
        "model name": dict(model_name=hostile.INJECTION),
        "dense layer": dict(layer_names=[None, None, hostile.INJECTION]),
        "lmu layer": dict(layer_names=[None, hostile.INJECTION, None]),
    }[where]
    model = hostile.keras_with_names(tmp_path / "m.keras", **names)
    x = np.load(EX / "keras_digits_test_x.npy")[:8]
    np.save(tmp_path / "cal.npy", x)
    r = cli(
        "convert",
        model,
        "-t",
        "c",
        "--quantize",
        "int8",
        "--calibration",
        tmp_path / "cal.npy",
        "-o",
        tmp_path / "out",
        "-O",
        "measure=false",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    src = (tmp_path / "out" / "model" / "model.c").read_text() + (tmp_path / "out" / "model" / "model.h").read_text()
    assert "lmu_pwned" not in src.replace("lmu_pwned_void", "")  # the name survives only as a safe token
    assert "system(" not in src and "$(shell" not in src and "<script>" not in src
    assert not (tmp_path / "PWNED").exists() and not (tmp_path / "out" / "PWNED").exists()
    man = json.loads((tmp_path / "out" / "artifact.json").read_text())
    assert all(
        limits.NAME_PATTERN.match(layer["name"])
        for layer in json.loads((tmp_path / "out" / "report.json").read_text())["layers"]
    ), man


@pytest.mark.parametrize("name", hostile.NAMES)
def test_ir_files_with_hostile_names_are_refused(tmp_path, name):
    def graph_name(h, a):
        h["graph"]["name"] = name

    def layer_name(h, a):
        h["graph"]["layers"][0]["name"] = name

    for i, edit in enumerate((graph_name, layer_name)):
        bad = hostile.edit_ir(DIGITS_IR, tmp_path / f"bad{i}.lmu.npz", edit)
        with pytest.raises(LmuEdgeError, match="name"):
            lmu_edge.load(bad)
        r = cli("convert", bad, "-t", "c", "-o", tmp_path / f"o{i}")
        assert "name" in one_line_error(r, 1) and not (tmp_path / f"o{i}").exists()


@pytest.mark.parametrize("name", hostile.NAMES)
def test_graphs_with_hostile_names_cannot_be_built(name):
    g = lmu_edge.load(DIGITS_IR)
    with pytest.raises(LimitError):
        g.replace(name=name)
    with pytest.raises(LimitError):
        g.replace(layers=(ir.Activation(name, "relu"),) + tuple(g.layers))


@pytest.mark.parametrize("suffix", [".safetensors", ".pt"])
def test_hostile_names_in_a_torch_checkpoint_cannot_inject_code(tmp_path, suffix):
    # The torch reader names the graph from its config (or the file's stem): neither may reach code.
    import shutil

    src = EX / "torch_psmnist_small.safetensors"
    weights = tmp_path / ("m" + suffix)
    if suffix == ".pt":
        import torch

        from lmu_edge.converters.torch_files import read_safetensors

        torch.save({k: torch.from_numpy(v) for k, v in read_safetensors(src).items()}, weights)
    else:
        shutil.copy(src, weights)
    cfg = json.loads(src.with_suffix(".json").read_text())
    cfg["name"] = hostile.INJECTION
    weights.with_suffix(".json").write_text(json.dumps(cfg))
    g = lmu_edge.load(weights)
    assert limits.NAME_PATTERN.match(g.name) and "\n" not in g.name
    r = cli("convert", weights, "-t", "c", "-o", tmp_path / "out", "-O", "measure=false", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    src_c = (tmp_path / "out" / "model" / "model.c").read_text()
    assert "system(" not in src_c and "$(shell" not in src_c and not list(tmp_path.rglob("PWNED"))
    cfg["layers"] = [{"type": "relu"}] * (limits.MAX_LAYERS + 1)
    weights.with_suffix(".json").write_text(json.dumps(cfg))
    with pytest.raises(LmuEdgeError, match="more than the limit"):
        lmu_edge.load(weights)


@pytest.mark.parametrize("target", sorted(registry.TARGETS))
def test_every_target_keeps_a_smuggled_name_as_data(tmp_path, target):
    """Second line of defence: a graph whose name got past validation (set behind the dataclass's back)
    still produces outputs in which the name is inert data, and for C a program that compiles and runs."""
    g = lmu_edge.fold(lmu_edge.load(DIGITS_IR))
    object.__setattr__(g, "name", hostile.INJECTION)
    object.__setattr__(g.layers[0], "name", hostile.INJECTION)
    module = registry.target(target)
    out = tmp_path / "o"
    out.mkdir()
    try:
        module.emit(g, out, dict(getattr(module, "OPTIONS", {}), quantize="float", calibration=None, measure=False))
    except LmuEdgeError:
        pass  # refusing is fine too; running code is not
    import ast

    for f in out.rglob("*"):
        if not f.is_file():
            continue
        text = f.read_bytes().decode("utf-8", "replace")
        if f.name == "Makefile":  # the name may only stand in comment lines
            assert all(line.lstrip().startswith("#") for line in text.splitlines() if "PWNED" in line), text
        elif f.suffix == ".py":  # never as code: no call to system() anywhere in the module
            calls = [n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Attribute) and n.attr == "system"]
            assert not calls, f
    if target == "c":
        subprocess.run(["make", "-s", "build/harness_host"], cwd=out / "harness", check=True, capture_output=True)
        nm = subprocess.run(
            ["nm", str(out / "harness" / "build" / "harness_host")], capture_output=True, text=True
        ).stdout
        assert "lmu_pwned" not in nm and "system" not in nm  # the name stayed inside a comment
        assert not list(tmp_path.rglob("PWNED"))


@pytest.mark.parametrize("text", hostile.NAMES + ["*/", "/*", "??/", "a\\", "*\\\n/"])
def test_escapers_close_nothing(text):
    c = escape.c_comment(text)
    assert "*/" not in c and "/*" not in c and "\n" not in c and "??" not in c and "\\" not in c
    assert escape.c_comment(c) == c
    m = escape.make_comment(text)
    assert "\n" not in m and "\\" not in m and "$" not in m
    s = escape.c_string(text)
    assert s.startswith('"') and s.endswith('"') and "\n" not in s


def test_escaped_text_compiles_as_inert_comments(tmp_path):
    body = "".join(
        f"/* {escape.c_comment(t)} */\nstatic const char *s{i} = {escape.c_string(t)};\n"
        for i, t in enumerate(hostile.NAMES)
    )
    src = tmp_path / "t.c"
    src.write_text("#include <stdio.h>\n" + body + "int main(void) { puts(s0); return 0; }\n")
    subprocess.run(
        [
            "gcc",
            "-std=c99",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
            "-Wno-unused-variable",
            str(src),
            "-o",
            str(tmp_path / "t"),
        ],
        check=True,
        capture_output=True,
    )
    r = subprocess.run([str(tmp_path / "t")], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0 and not (tmp_path / "PWNED").exists()


# --- 2. --force never deletes a user's files ----------------------------------------------------------


def test_force_refuses_a_directory_that_only_looks_like_output(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    (d / "thesis.tex").write_text("years of work")
    (d / "report.json").write_text("{}")
    (d / "artifact.json").write_text("{}")
    r = cli("convert", DIGITS_IR, "-t", "ir", "-o", d, "--force")
    assert "did not write" in one_line_error(r, 1)
    assert (d / "thesis.tex").read_text() == "years of work"


def test_force_refuses_added_or_changed_files_and_accepts_build_outputs(tmp_path):
    out = tmp_path / "out"
    assert cli("convert", DIGITS_IR, "-t", "c", "-o", out, "-O", "measure=false").returncode == 0
    np.save(tmp_path / "x.npy", np.load(EX / "digits_test_x.npy")[:2])
    assert cli("run", out, "-i", tmp_path / "x.npy", "-o", tmp_path / "y.npy").returncode == 0
    assert not (out / "harness" / "build").exists()  # lmu-edge builds in a private directory, never in the artifact
    subprocess.run(["make", "-s", "build/harness_host"], cwd=out / "harness", check=True, capture_output=True)
    assert cli("convert", DIGITS_IR, "-t", "c", "-o", out, "--force", "-O", "measure=false").returncode == 0
    (out / "my_notes.txt").write_text("mine")
    r = cli("convert", DIGITS_IR, "-t", "c", "-o", out, "--force")
    assert "my_notes.txt" in one_line_error(r, 1) and (out / "my_notes.txt").read_text() == "mine"
    (out / "my_notes.txt").unlink()
    (out / "model" / "model.c").write_text((out / "model" / "model.c").read_text() + "/* my tuning */\n")
    r = cli("convert", DIGITS_IR, "-t", "c", "-o", out, "--force")
    assert "model.c" in one_line_error(r, 1) and "my tuning" in (out / "model" / "model.c").read_text()
    (out / "harness" / "build").mkdir(exist_ok=True)
    (out / "harness" / "build" / "thesis.tex").write_text("mine")
    assert "thesis.tex" in one_line_error(cli("convert", DIGITS_IR, "-t", "c", "-o", out, "--force"), 1)


def test_report_output_is_owned_too(tmp_path):
    out = tmp_path / "rep"
    r = cli("report", DIGITS_IR, "--data", CAL, "-o", out, "-t", "ir", "--quantize", "float", "-q")
    assert r.returncode == 0, r.stderr
    (out / "extra.txt").write_text("mine")
    r = cli("report", DIGITS_IR, "--data", CAL, "-o", out, "-t", "ir", "--quantize", "float", "-q", "--force")
    assert "extra.txt" in one_line_error(r, 1) and (out / "extra.txt").exists()


# --- 3. concurrent and interrupted runs -----------------------------------------------------------


def _leftovers(parent: Path) -> list:
    return [p.name for p in parent.iterdir() if p.name.endswith((".partial", ".old"))]


def test_two_writers_to_one_new_output_give_one_success_and_one_refusal(tmp_path):
    """Started together without --force, one run publishes and the other is refused, whichever way they
    interleave: overlapping, the later one finds the output changed while it worked ("another run");
    one after the other, the second finds it not empty."""
    for round_ in range(3):
        out = tmp_path / f"out{round_}"
        args = lmu_edge_cli() + ["convert", str(DIGITS_IR), "-t", "ir", "-q", "-o", str(out)]
        procs = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
        results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
        codes = sorted(c for c, _ in results)
        assert codes == [0, 1], results
        err = next(e for c, e in results if c == 1)
        assert err.count("\n") == 1 and ("another run" in err or "not empty" in err or "refusing" in err), err
        lmu_edge.open_artifact(out)
        assert not _leftovers(tmp_path)


def test_a_forced_writer_overtaken_by_another_keeps_nothing(tmp_path):
    """--force lets a run replace an output, not another run's work published while it was writing. This
    process holds a write to a new output open (as a conversion does while it works), a real
    ``convert --force`` publishes there meanwhile, and the held write must then be refused in one line,
    keep nothing and leave the other run's artifact whole. (Two CLI runs with --force started together
    interleave by chance: done one after the other, both rightly succeed.)"""
    from lmu_edge import outdir

    out = tmp_path / "out"
    with pytest.raises(OutputExistsError, match="another run wrote there while this one was working"):
        with outdir.writing(out, overwrite=True) as tmp:
            (tmp / "mine.txt").write_text("the held run's file")
            r = subprocess.run(
                lmu_edge_cli() + ["convert", str(DIGITS_IR), "-t", "ir", "-q", "-o", str(out), "--force"],
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert r.returncode == 0, r.stderr
    assert not (out / "mine.txt").exists() and not _leftovers(tmp_path)
    lmu_edge.open_artifact(out)  # the other run's artifact, sealed and whole


def _slow_convert_args(tmp_path, out):
    # an int8 C conversion with QEMU measurement: seconds of work, long enough to be interrupted
    return lmu_edge_cli() + [
        "convert",
        str(DIGITS_IR),
        "-t",
        "c",
        "--quantize",
        "int8",
        "--calibration",
        str(CAL),
        "-q",
        "-o",
        str(out),
    ]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signalled_convert_leaves_nothing_behind(tmp_path, sig):
    out = tmp_path / "a" / "b" / "out"
    p = subprocess.Popen(_slow_convert_args(tmp_path, out), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not (out.parent.exists() and _leftovers(out.parent)):
        time.sleep(0.05)
    assert out.parent.exists(), "the conversion never started writing"
    time.sleep(0.3)
    p.send_signal(sig)
    code = p.wait(timeout=120)
    err = p.stderr.read()
    assert code != 0 and err.count("\n") == 1 and "nothing was left half-written" in err, (code, err)
    assert not (tmp_path / "a").exists(), list((tmp_path / "a").rglob("*"))


def test_a_killed_convert_is_cleaned_up_by_the_next_run(tmp_path):
    out = tmp_path / "out"
    p = subprocess.Popen(_slow_convert_args(tmp_path, out), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while time.time() < deadline and not _leftovers(tmp_path):
        time.sleep(0.05)
    p.kill()
    p.wait()
    assert _leftovers(tmp_path)
    assert cli("convert", DIGITS_IR, "-t", "ir", "-o", out).returncode == 0
    assert not _leftovers(tmp_path)


def test_concurrent_runs_of_one_artifact_all_succeed_and_write_nothing_into_it(tmp_path):
    out = tmp_path / "out"
    assert cli("convert", DIGITS_IR, "-t", "c", "-o", out, "-O", "measure=false").returncode == 0
    np.save(tmp_path / "x.npy", np.load(EX / "digits_test_x.npy")[:2])
    procs = [
        subprocess.Popen(
            lmu_edge_cli() + ["run", str(out), "-i", str(tmp_path / "x.npy"), "-o", str(tmp_path / f"y{i}.npy")],
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(6)
    ]
    errs = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    assert all(c == 0 for c, _ in errs), errs
    ys = [np.load(tmp_path / f"y{i}.npy") for i in range(6)]
    assert all(np.array_equal(ys[0], y) for y in ys)
    assert not (out / "harness" / "build").exists()  # each run builds in its own private directory
    lmu_edge.open_artifact(out)


def test_a_failed_convert_into_a_nested_path_leaves_no_parents(tmp_path):
    r = cli("convert", DIGITS_IR, "-t", "c", "-o", tmp_path / "a" / "b" / "out", "--prefix", "int")
    one_line_error(r, 1)
    assert not (tmp_path / "a").exists()


def test_stale_check_refuses_quickly_before_work(tmp_path):
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "f").write_text("x")
    t = time.time()
    with pytest.raises(OutputExistsError):
        lmu_edge.convert(EX / "psmnist_lmu.keras", "c", tmp_path / "o")
    assert time.time() - t < 5


# --- 4. usage errors and malformed input: one line -----------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["convert", DIGITS_IR, "-t", "nope", "-o", "OUT"],
        ["convert", DIGITS_IR, "-t", "ir", "-o", "OUT", "--error-budget", "inf"],
        ["convert", DIGITS_IR, "-t", "ir", "-o", "OUT", "--error-budget", "nan"],
        ["convert", DIGITS_IR, "-t", "ir", "-o", "OUT", "--error-budget", "0"],
        ["convert", DIGITS_IR, "-t", "ir", "-o", "OUT", "--tolerance", "nan"],
        ["convert", DIGITS_IR, "-t", "ir", "-o", "OUT", "--substeps", "0"],
        ["convert", DIGITS_IR, "-t", "ir", "-o", "OUT", "--substeps", "1000000"],
        ["convert", DIGITS_IR, "-t", "ir", "-o", "FILE"],
        ["convert", DIGITS_IR, "-t", "ir"],
        ["convrt"],
        ["verify", "OUT", "-i", "x.npy", "--tolerance", "-1"],
    ],
)
def test_usage_errors_are_one_line(tmp_path, args):
    (tmp_path / "FILE").write_text("x")
    r = cli(*[a if a not in ("OUT", "FILE") else tmp_path / a for a in args], cwd=tmp_path)
    one_line_error(r, 2)
    assert not (tmp_path / "OUT").exists()


def _ir_with(tmp_path, edit, name="m.lmu.npz"):
    return hostile.edit_ir(DIGITS_IR, tmp_path / name, edit)


def _set_lmu(**kw):
    def edit(h, a):
        h["graph"]["layers"][0].update(kw)

    return edit


def _quantized_ir(tmp_path):
    cal = np.load(CAL)[:4]
    q = lmu_edge.quantize(lmu_edge.fold(lmu_edge.load(DIGITS_IR)), cal)
    lmu_edge.save(q, tmp_path / "q.lmu.npz")
    return tmp_path / "q.lmu.npz"


def _find(node, key):
    if isinstance(node, dict):
        if key in node:
            yield node
        for v in node.values():
            yield from _find(v, key)
    elif isinstance(node, list):
        for v in node:
            yield from _find(v, key)


def _set_everywhere(key, value):
    def edit(h, a):
        for n in _find(h, key):
            n[key] = value

    return edit


MALFORMED = {
    "theta 1e-3": lambda t: _ir_with(t, _set_lmu(theta=1e-3)),
    "theta 1e9": lambda t: _ir_with(t, _set_lmu(theta=1e9)),
    "theta 1e300": lambda t: _ir_with(t, _set_lmu(theta=1e300)),
    "order 1e6": lambda t: _ir_with(t, _set_lmu(order=1_000_000)),
    "order inf": lambda t: hostile.write_ir(
        t / "m.lmu.npz",
        json.dumps(hostile.ir_header(DIGITS_IR)).replace('"order": 32', '"order": Infinity'),
        hostile.ir_arrays(DIGITS_IR),
    ),
    "unhashable type": lambda t: _ir_with(t, lambda h, a: h["graph"]["layers"][0].update(type=["lmu"])),
    "unhashable array key": lambda t: _ir_with(
        t, lambda h, a: h["graph"]["layers"][0]["input_encoders"].update(array=["x"])
    ),
    "nested 5000 deep": lambda t: hostile.write_ir(t / "m.lmu.npz", "[" * 5000 + "]" * 5000, {}),
    "extra non-npy member": lambda t: hostile.write_ir(
        t / "m.lmu.npz", hostile.ir_header(DIGITS_IR), hostile.ir_arrays(DIGITS_IR), {"evil.pkl": b"cos\nsystem\n"}
    ),
    "object array": lambda t: (
        np.savez(t / "m.lmu.npz", **{"header.json": np.array([{"a": 1}], dtype=object)}),
        t / "m.lmu.npz",
    )[1],
    "huge shape": lambda t: _ir_with(
        t, lambda h, a: h["graph"]["layers"][0]["input_encoders"].update(shape=[10**12, 10**12])
    ),
    "zip bomb": lambda t: _zip_bomb(t / "m.lmu.npz"),
    "rk substeps 1e6": lambda t: _ir_with(
        t,
        lambda h, a: h["graph"]["layers"][0].update(
            memory={"type": "runge_kutta", "rk_order": 4, "substeps": 1_000_000}
        ),
    ),
    "rk substeps 0": lambda t: _ir_with(
        t, lambda h, a: h["graph"]["layers"][0].update(memory={"type": "runge_kutta", "rk_order": 4, "substeps": 0})
    ),
    "rk substeps -1": lambda t: _ir_with(
        t, lambda h, a: h["graph"]["layers"][0].update(memory={"type": "runge_kutta", "rk_order": 4, "substeps": -1})
    ),
    "truncated": lambda t: _write(t / "m.lmu.npz", DIGITS_IR.read_bytes()[:500]),
    "empty keras": lambda t: _write(t / "m.keras", b""),
    "keras without layers": lambda t: hostile.rewrite_zip(
        EX / "keras_digits.keras",
        t / "m.keras",
        lambda n, d: (
            json.dumps({"class_name": "Sequential", "config": {"name": "s", "layers": []}}).encode()
            if n == "config.json"
            else d
        ),
    ),
    "keras corrupt hdf5": lambda t: hostile.rewrite_zip(
        EX / "keras_digits.keras",
        t / "m.keras",
        lambda n, d: d[:64] + bytes(len(d) - 64) if n == "model.weights.h5" else d,
    ),
    "h5 corrupt": lambda t: _write(t / "m.h5", (EX / "keras_digits.h5").read_bytes()[:4096]),
    "keras deep json": lambda t: hostile.rewrite_zip(
        EX / "keras_digits.keras",
        t / "m.keras",
        lambda n, d: b'{"a":' * 5000 + b"1" + b"}" * 5000 if n == "config.json" else d,
    ),
}


def _write(path, data: bytes):
    path.write_bytes(data)
    return path


class _RepeatedDeflate:
    """A compressor for zipfile that deflates each 1 MiB of zeros it is given to one precomputed block:
    a deflate stream flushed in full after a block is that block again for the same input (nothing
    refers back past it), so 3 GiB of zeros cost the CRC, not 15 s of zlib. The stream is a valid one:
    the test below inflates it."""

    def __init__(self, block: bytes):
        import zlib

        c = zlib.compressobj(6, zlib.DEFLATED, -15)  # raw deflate, as a zip member holds it
        self.src, self.block = block, c.compress(block) + c.flush(zlib.Z_FULL_FLUSH)
        self.end = c.flush()

    def compress(self, data) -> bytes:
        assert data == self.src  # only the block it was made for
        return self.block

    def flush(self) -> bytes:
        return self.end


def _zip_bomb(path):
    import zipfile

    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("header.json.npy", bytes(1 << 20))
        with z.open("big.npy", "w", force_zip64=True) as f:
            block = bytes(1 << 20)
            f._compressor = _RepeatedDeflate(block)  # the same bytes zlib writes for it, at once
            for _ in range(3 << 10):  # 3 GiB of zeros, a few MB compressed
                f.write(block)
    return path


def test_the_zip_bomb_is_a_valid_archive_of_three_gib_of_zeros(tmp_path):
    # the fast bomb above must be a real one: zipfile reads its sizes and inflates its start as zeros, and
    # its blocks in a row and its end are a whole deflate stream (inflating all 3 GiB would take seconds)
    import zipfile
    import zlib

    with zipfile.ZipFile(_zip_bomb(tmp_path / "b.zip")) as z:
        big = z.getinfo("big.npy")
        assert big.file_size == 3 << 30 and big.compress_size < (3 << 30) // 1000
        with z.open(big) as f:
            assert f.read(4 << 20) == bytes(4 << 20)
    r, d = _RepeatedDeflate(bytes(1 << 20)), zlib.decompressobj(-15)
    assert d.decompress(r.block * 3 + r.end) == bytes(3 << 20) and d.eof and not d.unused_data


def _unstable(t):
    g = lmu_edge.fold(lmu_edge.load(DIGITS_IR), "zoh")
    lmu_edge.save(g, t / "f.lmu.npz")

    def edit(h, a):
        for k in a:
            if k.endswith("Abar"):
                a[k] = a[k] * 1e30

    return hostile.edit_ir(t / "f.lmu.npz", t / "m.lmu.npz", edit)


QUANTIZED = {
    "state width 1": ("width", 1),
    "state width 64": ("width", 64),
    "scale 0": ("out_scale", 0.0),
    "scale inf": ("out_scale", 1e309),
    "zero point 1000": ("out_zp", 1000),
    "shift 99": ("shift", 99),
}


@pytest.fixture(scope="module")
def bomb_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("bomb")


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_model_files_get_one_line_errors_quickly(tmp_path, case):
    path = MALFORMED[case](tmp_path)
    t = time.time()
    with pytest.raises(LmuEdgeError):
        lmu_edge.load(path)
    assert time.time() - t < 10
    r = cli("convert", path, "-t", "ir", "-o", tmp_path / "out")
    one_line_error(r, 1)
    assert not (tmp_path / "out").exists() and not _leftovers(tmp_path)


def test_a_state_that_overflows_is_refused_in_one_line(tmp_path):
    # An unstable recurrence is a model (an Euler LMU with a small theta is one), so it loads; but a run whose
    # state stops being finite is refused, and nothing is written.
    path = _unstable(tmp_path)
    lmu_edge.load(path)
    with pytest.raises(LmuEdgeError, match="overflowed to inf"):
        lmu_edge.simulate(lmu_edge.load(path), np.ones((64, 1)))
    r = cli("convert", path, "-t", "ir", "-o", tmp_path / "out")
    one_line_error(r, 1)
    assert not (tmp_path / "out").exists() and not _leftovers(tmp_path)


@pytest.mark.parametrize("case", sorted(QUANTIZED))
def test_quantized_ir_fields_are_validated(tmp_path, case):
    key, value = QUANTIZED[case]
    src = _quantized_ir(tmp_path)
    text = json.dumps(hostile.ir_header(src))
    bad = hostile.edit_ir(src, tmp_path / "bad.lmu.npz", _set_everywhere(key, value))
    assert json.dumps(hostile.ir_header(bad)) != text
    with pytest.raises(LmuEdgeError):
        lmu_edge.load(bad)


def test_a_quantized_graph_whose_widths_disagree_is_refused(tmp_path):
    # an int16 input feeding the int8 layers after it with no conversion between (a mixed-precision graph
    # changes width only through a q_convert layer): the 8-bit tables would be indexed by 16-bit values
    src = _quantized_ir(tmp_path)

    def edit(h, a):
        for n in _find(h, "bits"):
            if n.get("type") == "q_input":
                n["bits"] = 16

    bad = hostile.edit_ir(src, tmp_path / "bad.lmu.npz", edit)
    with pytest.raises(LmuEdgeError, match="reads 8-bit activations, the layer before writes 16-bit ones"):
        lmu_edge.load(bad)
    r = cli("convert", bad, "-t", "ir", "-o", tmp_path / "out")
    one_line_error(r, 1)
    assert not (tmp_path / "out").exists()


def test_fifo_named_like_a_model_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "m.keras"
    os.mkfifo(fifo)
    r = cli("inspect", fifo, timeout=30)
    assert "regular file" in one_line_error(r, 1)


@pytest.mark.parametrize("case", ["object", "nan", "huge", "empty", "no file", "fifo", "text", "zeros"])
def test_bad_input_arrays_get_one_line_errors(tmp_path, case):
    out = tmp_path / "out"
    assert cli("convert", DIGITS_IR, "-t", "ir", "-o", out).returncode == 0
    x = tmp_path / "x.npz"
    if case == "object":
        np.savez(x, x=np.array([object(), 1], dtype=object))
    elif case == "nan":
        np.savez(x, x=np.full((1, 64, 1), np.nan))
    elif case == "huge":
        np.savez(x, x=np.full((1, 64, 1), 1e30))
    elif case == "empty":
        np.savez(x, x=np.zeros((0, 64, 1)))
    elif case == "fifo":
        os.mkfifo(x)
    elif case == "text":
        x.write_text("hi")
    elif case == "zeros":
        np.savez(x, x=np.zeros((4, 64, 1)))
    r = cli("run", out, "-i", x, "-o", tmp_path / "y.npy", timeout=60)
    if case == "zeros":  # fine to run on
        assert r.returncode == 0, r.stderr
        (tmp_path / "y.npy").unlink()
    else:
        err = one_line_error(r, 1)
    if case == "text":  # not numpy's advice to load it with allow_pickle: it is no pickle, and that is unsafe
        assert "is neither a .npy nor a .npz file (it starts with b'hi')" in err and "pickle" not in err
    r = cli(
        "convert", DIGITS_IR, "-t", "c", "--quantize", "int8", "--calibration", x, "-o", tmp_path / "o2", timeout=60
    )
    err = one_line_error(r, 1)
    if case == "zeros":  # not "the bias does not fit int32 ...; use --quantize int8" when int8 was asked for
        assert err == "lmu-edge: error: calibration: all 256 values are 0, no range to quantize to; give typical inputs"
        for t in ("onnx", "tflite"):  # the targets that calibrate in their own toolchain are refused alike
            r = cli("convert", DIGITS_IR, "-t", t, "--quantize", "int8", "--calibration", x, "-o", tmp_path / "o3")
            assert one_line_error(r, 1) == err and not (tmp_path / "o3").exists()
    assert not (tmp_path / "y.npy").exists() and not (tmp_path / "o2").exists()


def test_limits_admit_the_largest_legitimate_models():
    big = ir.LMU(
        "big",
        memory_d=4,
        order=limits.MAX_ORDER,
        theta=100.0 * limits.MAX_ORDER,
        discretizer="zoh",
        input_encoders=np.ones((3, 4)),
        memory=ir.ImpulseResponse(),
    )
    g = ir.Graph("g", 3, (big,))
    assert g.layers[0].order == 1024
    for p in sorted(EX.glob("*.keras")) + sorted(EX.glob("*.h5")) + sorted(EX.glob("*.lmu.npz")):
        lmu_edge.load(p)


def test_docs_state_the_limits_the_code_enforces():
    doc = (hostile.ROOT / "docs" / "security.md").read_text()
    for name in (
        "MAX_ORDER",
        "MAX_MEMORY_D",
        "MIN_THETA",
        "MAX_THETA",
        "MAX_FEATURES",
        "MAX_SEQ_LEN",
        "MAX_SUBSTEPS",
        "MAX_KERNEL_LEN",
        "MAX_CONV_KERNEL",
        "MAX_LAYERS",
        "MAX_MODEL_ELEMENTS",
        "MAX_PLANNED_BYTES",
        "MAX_JSON_BYTES",
        "MAX_JSON_DEPTH",
        "MAX_ZIP_MEMBERS",
        "MAX_ZIP_BYTES",
        "MAX_ZIP_RATIO",
        "MAX_NAME_LEN",
        "MAX_METADATA_BYTES",
    ):
        value = getattr(limits, name)
        shown = f"{value:,}".replace(",", " ") if isinstance(value, int) else f"{value:g}"
        assert f"`{name}`" in doc and shown in doc, (name, shown)


def test_every_error_message_is_one_printable_line():
    # Names quoted from a model file must not break a message up or put escape sequences on a console.
    from lmu_edge.errors import ModelFormatError

    e = ModelFormatError("layer 'x */\nint f(void);\r\x1b[2J' is bad")
    assert str(e).isprintable() and "\n" not in str(e) and "\\n" in str(e) and "\\x1b" in str(e)


def test_tolerance_inf_measures_without_refusing_and_nan_is_refused(tmp_path):
    # The layer-option matrix converts with tolerance=inf to measure every cell; refusing it hid 10 cells.
    art = lmu_edge.convert(DIGITS_IR, "ir", tmp_path / "a", tolerance=float("inf"))
    assert art.manifest["tolerance"] is None
    with pytest.raises(LmuEdgeError, match="tolerance"):
        lmu_edge.convert(DIGITS_IR, "ir", tmp_path / "b", tolerance=float("nan"))
    with pytest.raises(LmuEdgeError, match="tolerance"):
        lmu_edge.convert(DIGITS_IR, "ir", tmp_path / "c", tolerance=-1.0)
    assert not (tmp_path / "b").exists() and not (tmp_path / "c").exists()


def test_a_quantized_graph_is_refused_by_name_not_by_repr(tmp_path):
    # Converting an artifact's quantized.lmu.npz again used to die with a bare KeyError / a message holding
    # the whole graph's repr (every weight); now: one short line that says what to do.
    cal = np.load(EX / "digits_calibration_x.npy")[:8]
    art = lmu_edge.convert(DIGITS_IR, "c", tmp_path / "a", quantize="int8", calibration=cal, measure=False)
    for model in (art.path / "quantized.lmu.npz", lmu_edge.load(art.path / "quantized.lmu.npz")):
        for target in ("c", "onnx", "tflite", "nengo"):
            with pytest.raises(lmu_edge.errors.ArtifactError, match="already quantized") as e:
                lmu_edge.convert(model, target, tmp_path / "b")
            assert len(str(e.value)) < 400 and "array(" not in str(e.value)
            assert not (tmp_path / "b").exists()


def test_an_artifact_whose_files_changed_since_convert_is_refused_in_one_line(tmp_path):
    # a damaged step.onnx used to pass verify (only sequence.onnx was run) and a damaged sequence.onnx was
    # an "internal error" (exit 70): the record's SHA-256s are checked whenever an artifact is opened
    out = tmp_path / "out"
    assert cli("convert", DIGITS_IR, "-t", "onnx", "-o", out, "-q").returncode == 0
    np.save(tmp_path / "x.npy", np.load(EX / "digits_test_x.npy")[:2])
    assert cli("verify", out, "-i", tmp_path / "x.npy").returncode == 0
    step = out / "step.onnx"
    good = step.read_bytes()
    step.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))  # one bit
    for command in (
        ["verify", out, "-i", tmp_path / "x.npy"],
        ["run", out, "-i", tmp_path / "x.npy", "-o", tmp_path / "y.npy"],
    ):
        err = one_line_error(cli(*command), 1)
        assert "step.onnx changed or missing since lmu-edge wrote it" in err and "convert the model again" in err
    assert not (tmp_path / "y.npy").exists()
    with pytest.raises(lmu_edge.errors.ArtifactError, match="step.onnx changed or missing"):
        lmu_edge.open_artifact(out)
    step.unlink()
    assert "step.onnx changed or missing" in one_line_error(cli("verify", out, "-i", tmp_path / "x.npy"), 1)
    step.write_bytes(good)
    (out / "report.html").unlink()  # the report is sealed too (it records the verification), and says so
    err = one_line_error(cli("verify", out, "-i", tmp_path / "x.npy"), 1)
    assert "report.html changed or missing" in err and "sealed with the model: restore it or convert" in err, err
    assert cli("convert", DIGITS_IR, "-t", "onnx", "-o", out, "-q", "--force").returncode == 0
    (out / "my_notes.txt").write_text("an artifact is code: a file lmu-edge did not write stops a run")
    assert "my_notes.txt, which lmu-edge did not write" in one_line_error(cli("verify", out, "-i", tmp_path / "x.npy"))
    (out / "my_notes.txt").unlink()
    (out / "lmu-edge-files.json").write_text("{}")
    assert "no valid lmu-edge-files.json" in one_line_error(cli("verify", out, "-i", tmp_path / "x.npy"), 1)


def test_a_copied_nengo_artifact_still_opens_where_python_writes_bytecode(tmp_path):
    # importing network.py wrote __pycache__/*.pyc into the artifact before it was sealed, and Python
    # rewrites that file whenever network.py's times change (cp -r, touch, git checkout): the record check
    # then refused the artifact. The suite's own environment may set PYTHONDONTWRITEBYTECODE: not here.
    import shutil

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

    def run(*args):
        argv = lmu_edge_cli() + [str(a) for a in args]
        return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)

    r = run("convert", DIGITS_IR, "-t", "nengo", "-o", tmp_path / "n", "-q")
    assert r.returncode == 0, r.stderr
    assert "__pycache__" not in (tmp_path / "n" / "lmu-edge-files.json").read_text()
    shutil.copytree(tmp_path / "n", tmp_path / "n2")
    os.utime(tmp_path / "n2" / "network.py", (1e9, 1e9))
    np.save(tmp_path / "x.npy", np.load(EX / "digits_test_x.npy")[:1])
    for i in range(2):
        r = run("run", tmp_path / "n2", "-i", tmp_path / "x.npy", "-o", tmp_path / f"y{i}.npy")
        assert r.returncode == 0, r.stderr
