"""A received artifact runs nothing planted (issue 53): run, verify and open_artifact(...).run / stream execute
only the files an artifact's seal records, a signed seal names who built it, a damaged manifest is refused in
one line, and --force / the stale-partial sweep delete only what lmu-edge wrote. Each test here failed on the
code before this work (the signing ones for want of --sign / --trusted-key)."""

from __future__ import annotations

import json
import os
import py_compile
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import lmu_edge
from lmu_edge import outdir, signing
from lmu_edge.errors import ArtifactError, LmuEdgeError, OutputExistsError

sys.path.insert(0, str(Path(__file__).parent))
from conftest import EXAMPLES, lmu_edge_cli

DIGITS_IR = EXAMPLES / "digits_lmu.lmu.npz"
CAL = EXAMPLES / "digits_calibration_x.npy"


def cli(*args, timeout=300):
    args = [str(a) for a in args]
    if args[0] == "convert":
        args.insert(1, "-q")
    return subprocess.run(lmu_edge_cli() + args, capture_output=True, text=True, timeout=timeout)


def one_line_error(r, code=1):
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    assert len(lines) == 1 and lines[0].startswith("lmu-edge: error: "), r.stderr
    return lines[0]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The shipped digits model converted once: int8 C (signed by a key made for it), and nengo."""
    d = tmp_path_factory.mktemp("built")
    key, _ = signing.generate(d / "builder")
    assert key.stat().st_mode & 0o077 == 0  # the private key is the user's alone
    lmu_edge.convert(DIGITS_IR, "c", d / "c", quantize="int8", calibration=CAL, measure=False, sign=key)
    lmu_edge.convert(DIGITS_IR, "nengo", d / "nengo")
    np.save(d / "x.npy", np.load(EXAMPLES / "digits_test_x.npy")[:2])
    return d


@pytest.fixture
def c_art(built, tmp_path):
    shutil.copytree(built / "c", tmp_path / "a", symlinks=True)
    return tmp_path / "a"


def _no_payload(tmp_path):
    assert not (tmp_path / "PWNED").exists(), "planted code ran"


# --- 1. a C artifact: only sealed files are built and run --------------------------------------------


def test_a_gnumakefile_next_to_the_sealed_makefile_is_refused_and_never_read(built, c_art, tmp_path):
    (c_art / "harness" / "GNUmakefile").write_text(f"$(shell touch {tmp_path / 'PWNED'})\ninclude Makefile\n")
    err = one_line_error(cli("run", c_art, "-i", built / "x.npy", "-o", tmp_path / "y.npy"))
    assert "GNUmakefile" in err and "did not write" in err
    assert not (tmp_path / "y.npy").exists()
    _no_payload(tmp_path)
    # even the private build call, which skips open_artifact's check, copies and reads the Makefile only
    lmu_edge.registry.target("c").make(c_art, "harness_host")
    _no_payload(tmp_path)


def test_private_build_directories_of_ended_processes_are_removed(built, c_art):
    """A process that ends without its exit handlers (os._exit, as forked workers do; SIGKILL) leaves its
    private build directory; the next process that builds removes it, and never another live one's."""
    from lmu_edge.targets import c, c_build

    code = f"import os; from lmu_edge.targets import c; print(c.make({str(c_art)!r}, 'harness_host')); os._exit(0)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    left = Path(r.stdout.strip()).parents[2]  # <private>/harness/build/harness_host
    assert r.returncode == 0 and left.is_dir() and left.name.startswith("lmu-edge-build-"), r.stderr
    mine = c.make(c_art, "harness_host").parents[2]  # this process's own, alive
    c_build._STALE_SWEPT.clear()
    c_build.sweep_stale_builds()
    assert not left.exists() and mine.is_dir()


def test_a_planted_harness_in_build_is_never_run(built, c_art, tmp_path):
    (c_art / "harness" / "build").mkdir(exist_ok=True)  # where a user's own make in harness/ builds
    exe = c_art / "harness" / "build" / "harness_host"
    exe.write_text(f"#!/bin/sh\ntouch {tmp_path / 'PWNED'}\nexit 1\n")
    exe.chmod(0o755)
    os.utime(exe, (4e9, 4e9))  # newer than every source: make would call it up to date
    r = cli("verify", c_art, "-i", built / "x.npy")
    assert r.returncode == 0 and r.stdout.startswith("PASS"), r.stderr
    assert lmu_edge.open_artifact(c_art).run(np.load(built / "x.npy")).shape == (2, 10)
    _no_payload(tmp_path)
    assert exe.read_text().startswith("#!/bin/sh")  # and nothing was built into the artifact


def test_a_planted_library_in_build_is_never_loaded(built, c_art, tmp_path):
    (c_art / "harness" / "build").mkdir(exist_ok=True)
    src = tmp_path / "evil.c"
    src.write_text(
        "#include <stdio.h>\n__attribute__((constructor)) static void pwn(void) "
        f'{{ FILE *f = fopen("{tmp_path / "PWNED"}", "w"); if (f) fclose(f); }}\n'
    )
    lib = c_art / "harness" / "build" / "libmodel.so"
    subprocess.run(["gcc", "-shared", "-fPIC", str(src), "-o", str(lib)], check=True)
    os.utime(lib, (4e9, 4e9))
    s = lmu_edge.open_artifact(c_art).stream()
    y = s.step(np.load(built / "x.npy")[0, 0])
    assert y.shape == (10,) and np.all(np.isfinite(y))
    _no_payload(tmp_path)


def test_a_build_link_out_of_the_artifact_is_refused_and_nothing_is_written_there(built, c_art, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.rmtree(c_art / "harness" / "build", ignore_errors=True)
    (c_art / "harness" / "build").symlink_to(elsewhere)
    err = one_line_error(cli("run", c_art, "-i", built / "x.npy", "-o", tmp_path / "y.npy"))
    assert "build" in err and "did not write" in err
    assert not list(elsewhere.iterdir())


def test_an_edited_makefile_with_a_recomputed_seal_is_refused_under_the_builders_key(built, c_art, tmp_path):
    """The seal alone is unkeyed (anyone can recompute it: it catches accidents, docs/security.md says so);
    the builder's signature is what a resealed edit cannot forge."""
    mk = c_art / "harness" / "Makefile"
    mk.write_text(f"$(shell touch {tmp_path / 'PWNED'})\n" + mk.read_text())
    outdir.seal(c_art)
    err = one_line_error(cli("verify", c_art, "-i", built / "x.npy", "--trusted-key", built / "builder.pub"))
    assert "signature does not verify" in err and "changed since it was signed" in err
    with pytest.raises(ArtifactError, match="signature does not verify"):
        lmu_edge.open_artifact(c_art, trusted_key=built / "builder.pub")
    _no_payload(tmp_path)


def test_fifos_in_an_artifact_are_refused_without_blocking(built, c_art):
    """A FIFO where a recorded file was, or named artifact.json in a folder of its own, would block a read."""
    good = (c_art / "harness" / "harness.c").read_bytes()
    (c_art / "harness" / "harness.c").unlink()
    os.mkfifo(c_art / "harness" / "harness.c")
    (c_art / "sub").mkdir()
    os.mkfifo(c_art / "sub" / "artifact.json")
    err = one_line_error(cli("verify", c_art, "-i", built / "x.npy", timeout=60))
    assert "holds sub/, which lmu-edge did not write" in err  # refused before any file in it is read
    shutil.rmtree(c_art / "sub")
    with pytest.raises(ArtifactError, match="harness/harness.c changed or missing"):
        lmu_edge.open_artifact(c_art)
    (c_art / "sub").mkdir()
    os.mkfifo(c_art / "sub" / "artifact.json")
    (c_art / "harness" / "harness.c").unlink()
    (c_art / "harness" / "harness.c").write_bytes(good)
    with pytest.raises(ArtifactError, match="holds sub/, which lmu-edge did not write"):
        lmu_edge.open_artifact(c_art)


# --- 2. a nengo artifact runs its sealed source text, never a planted .pyc ----------------------------


def test_a_planted_unchecked_pyc_beside_the_sealed_network_py_never_runs(built, tmp_path):
    art_dir = tmp_path / "n"
    shutil.copytree(built / "nengo", art_dir)
    payload = tmp_path / "payload.py"
    payload.write_text((art_dir / "network.py").read_text() + f"\nopen({str(tmp_path / 'PWNED')!r}, 'w').close()\n")
    cache = art_dir / "__pycache__" / f"network.{sys.implementation.cache_tag}.pyc"
    cache.parent.mkdir()
    py_compile.compile(
        str(payload), cfile=str(cache), doraise=True, invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH
    )
    art = lmu_edge.open_artifact(art_dir)  # network.py is byte-identical to the sealed one
    y = art.run(np.load(built / "x.npy"))
    assert y.shape == (2, 10)
    _no_payload(tmp_path)


# --- 6. a damaged manifest: one line, never an internal error -----------------------------------------


def _reseal_manifest(art_dir: Path, edit) -> None:
    man = json.loads((art_dir / "artifact.json").read_text())
    edit(man)
    (art_dir / "artifact.json").write_text(json.dumps(man))
    outdir.seal(art_dir)


@pytest.mark.parametrize(
    "edit, what",
    [
        (lambda m: m.update(tolerance="abc"), "tolerance"),
        (lambda m: m.update(tolerance=-1), "tolerance"),
        (lambda m: m.update(calibration_range=["a", "b"]), "calibration_range"),
        (lambda m: m.update(calibration_range=[0.0]), "calibration_range"),
        # JSON integers have no bound; math.isfinite(10**400) raised OverflowError (the fuzzer, seed 4)
        (lambda m: m.update(tolerance=10**400), "tolerance"),
        (lambda m: m.update(calibration_range=[0, 10**400]), "calibration_range"),
        (lambda m: m.update(target=["c"]), "unknown target"),
        (lambda m: m["c"].update(prefix=7), "prefix"),
        (lambda m: m["c"].update(quantized="yes"), "quantized"),
        (lambda m: m.update(options="x"), "options"),
    ],
)
def test_a_resealed_manifest_with_wrong_field_types_is_refused(c_art, edit, what):
    _reseal_manifest(c_art, edit)
    with pytest.raises(ArtifactError, match=what) as e:
        lmu_edge.open_artifact(c_art)
    assert "artifact.json" in str(e.value) and "\n" not in str(e.value)


def test_a_resealed_manifest_with_a_string_tolerance_is_one_line_not_an_internal_error(built, c_art):
    _reseal_manifest(c_art, lambda m: m.update(tolerance="abc"))
    assert "tolerance 'abc'" in one_line_error(cli("verify", c_art, "-i", built / "x.npy"))


def test_a_deeply_nested_manifest_is_refused_in_one_line(built, c_art):
    (c_art / "artifact.json").write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(ArtifactError, match="artifact.json changed"):  # the seal is checked before the manifest
        lmu_edge.open_artifact(c_art)
    outdir.seal(c_art)
    assert "nested deeper" in one_line_error(cli("verify", c_art, "-i", built / "x.npy"))


# --- 7. --force and the stale-partial sweep delete only what lmu-edge wrote ----------------------------


def test_force_keeps_a_users_file_in_pycache(tmp_path):
    out = tmp_path / "out"
    lmu_edge.convert(DIGITS_IR, "ir", out)
    (out / "__pycache__").mkdir()
    (out / "__pycache__" / "notes.txt").write_text("mine")
    with pytest.raises(OutputExistsError, match="notes.txt"):
        lmu_edge.convert(DIGITS_IR, "ir", out, overwrite=True)
    assert (out / "__pycache__" / "notes.txt").read_text() == "mine"


def test_a_users_directory_named_like_a_stale_partial_is_kept(tmp_path):
    mine = tmp_path / ".out.99999.mine.partial"
    mine.mkdir()
    (mine / "data.txt").write_text("mine")
    lmu_edge.convert(DIGITS_IR, "ir", tmp_path / "out")
    assert (mine / "data.txt").read_text() == "mine"


def test_a_partial_left_by_a_killed_run_is_marked_and_swept(tmp_path):
    """The other side of the marker: a directory lmu-edge made and a killed run left is still removed."""
    out = tmp_path / "out"
    left = tmp_path / ".out.99999.x1y2.partial"  # pid 99999: no such process on a test machine
    left.mkdir()
    outdir._mark(left)
    (left / "model.lmu.npz").write_bytes(b"half")
    assert outdir.sweep_stale(out) == [left.name] and not left.exists()


# --- signing -----------------------------------------------------------------------------------------


def test_a_signed_artifact_verifies_with_its_builders_key(built, c_art):
    r = cli("verify", c_art, "-i", built / "x.npy", "--trusted-key", built / "builder.pub")
    assert r.returncode == 0 and r.stdout.startswith("PASS"), r.stderr


def test_a_changed_byte_an_added_file_or_a_wrong_key_is_refused_in_one_line(built, c_art, tmp_path):
    x, pub = built / "x.npy", built / "builder.pub"
    from click.testing import CliRunner

    from lmu_edge.cli import main

    r = CliRunner().invoke(main, ["keygen", str(tmp_path / "other")])  # in process: a second's start saved
    assert r.exit_code == 0 and (tmp_path / "other.pub").is_file(), r.output
    err = one_line_error(cli("verify", c_art, "-i", x, "--trusted-key", tmp_path / "other.pub"))
    assert "signed by another key" in err

    def refused(match):
        with pytest.raises(ArtifactError, match=match) as e:
            lmu_edge.open_artifact(c_art, trusted_key=pub)
        assert "\n" not in str(e.value)

    (c_art / "extra.txt").write_text("added")
    refused("extra.txt")
    (c_art / "extra.txt").unlink()
    model = c_art / "model" / "model.c"
    good = model.read_bytes()
    model.write_bytes(good[:100] + bytes([good[100] ^ 1]) + good[101:])
    refused("model.c changed")
    outdir.seal(c_art)  # the changed byte resealed: the signature no longer matches the seal
    refused("changed since it was signed")
    (c_art / "lmu-edge-files.sig").unlink()
    refused("not signed")
    with pytest.raises(LmuEdgeError, match="not a PEM public key"):
        lmu_edge.open_artifact(c_art, trusted_key=x)


def test_run_help_the_readme_and_security_md_say_that_an_artifact_is_code():
    from click.testing import CliRunner

    from lmu_edge.cli import main

    text = " ".join(CliRunner().invoke(main, ["run", "--help"]).output.split())
    assert "An artifact is code from its builder, like a downloaded Makefile" in text and "--trusted-key" in text
    root = EXAMPLES.parents[1]
    assert "code from whoever built it, like a downloaded Makefile" in " ".join(
        (root / "README.md").read_text().split()
    )
    doc = (root / "docs" / "security.md").read_text()
    assert "## Artifacts are code" in doc and "**The seal alone catches accidents, not an attacker.**" in doc
