"""Red-team findings on issue 53's artifact checks: what a hostile sender of an artifact tried, that got
through before the fixes here. A manifest must never name a program the receiver starts, and a signature
file is never read whole, however large."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

import lmu_edge
from lmu_edge import outdir, signing
from lmu_edge.artifact import PROGRAM_OPTIONS
from lmu_edge.errors import ArtifactError

sys.path.insert(0, str(Path(__file__).parent))
from conftest import EXAMPLES

DIGITS_IR = EXAMPLES / "digits_lmu.lmu.npz"


@pytest.fixture(scope="module")
def signed_ir(tmp_path_factory):
    """The shipped digits model as an ir artifact (the fastest target), signed by a key made for it."""
    d = tmp_path_factory.mktemp("redteam")
    key, pub = signing.generate(d / "builder")
    lmu_edge.convert(DIGITS_IR, "ir", d / "ir", sign=key)
    return d / "ir", pub


def _reseal(art_dir: Path, edit) -> None:
    """What a hostile sender does without a key: edit the manifest and write the seal again."""
    man = art_dir / "artifact.json"
    m = json.loads(man.read_text())
    edit(m)
    man.write_text(json.dumps(m))
    rec = json.loads((art_dir / outdir.RECORD).read_text())
    rec["files"] = {rel: outdir._sha256(art_dir / rel) for rel in rec["files"]}
    (art_dir / outdir.RECORD).write_text(json.dumps(rec))
    (art_dir / outdir.SIGNATURE).unlink(missing_ok=True)


@pytest.mark.parametrize(
    "target, worker, variable",
    [
        ("tflite", "WorkerSession", "LMU_EDGE_TFLITE_RUNTIME_PYTHON"),
        ("nir", "_SinabsWorker", "LMU_EDGE_SINABS_PYTHON"),
    ],
)
def test_a_received_manifest_never_names_a_program_to_start(signed_ir, tmp_path, monkeypatch, target, worker, variable):
    # the sender's manifest names a program (here a script of theirs; anything on the receiver's path works
    # too) as the Python of the tflite-runtime / sinabs runtime: before, opening and running started it
    payload = tmp_path / "payload.sh"
    payload.write_text(f"#!/bin/sh\ntouch {tmp_path / 'PWNED'}\n")
    payload.chmod(payload.stat().st_mode | stat.S_IXUSR)
    art_dir = tmp_path / "a"
    shutil.copytree(signed_ir[0], art_dir)

    def edit(m):
        m["target"] = target
        m["options"] = {key: str(payload) for key in PROGRAM_OPTIONS}

    _reseal(art_dir, edit)
    monkeypatch.delenv(variable, raising=False)
    art = lmu_edge.open_artifact(art_dir)
    assert not any(art.manifest["options"].get(key) for key in PROGRAM_OPTIONS)
    with pytest.raises(ArtifactError, match=variable):  # only the receiver's own variable names the program
        getattr(lmu_edge.registry.target(target), worker)(art)
    assert not (tmp_path / "PWNED").exists(), "a program the manifest named ran"


def test_a_huge_signature_file_is_never_read_whole(signed_ir, tmp_path):
    art_dir, pub = signed_ir
    shutil.copytree(art_dir, tmp_path / "a")
    with open(tmp_path / "a" / outdir.SIGNATURE, "r+b") as f:  # sparse: 64 MiB on no disk
        f.truncate(64 << 20)
    with pytest.raises(ArtifactError, match="malformed"):  # refused in one line, as before
        lmu_edge.open_artifact(tmp_path / "a", trusted_key=pub)
    record = (tmp_path / "a" / outdir.RECORD).read_bytes()
    signing.load_public_key(pub)  # (its first call imports cryptography)
    tracemalloc.start()
    try:
        with pytest.raises(ArtifactError, match="malformed"):
            signing.check(tmp_path / "a", record, pub)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, f"{peak} bytes allocated to read a signature file"


def test_a_huge_trusted_key_file_is_refused_without_reading_it_whole(signed_ir, tmp_path):
    art_dir, _ = signed_ir
    big = tmp_path / "big.pub"
    with open(big, "wb") as f:
        f.truncate(64 << 20)
    with pytest.raises(ArtifactError, match="too large"):
        lmu_edge.open_artifact(art_dir, trusted_key=big)
    tracemalloc.start()
    try:
        with pytest.raises(ArtifactError, match="too large"):
            signing.load_public_key(big)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, f"{peak} bytes allocated to read a key file"
    assert os.path.getsize(big) == 64 << 20


def test_security_md_says_a_received_artifact_never_chooses_a_program_and_a_resealed_makefile_runs():
    doc = " ".join((EXAMPLES.parents[1] / "docs" / "security.md").read_text().split())
    assert "opening an artifact blanks them in its manifest, so a received artifact never chooses a program" in doc
    assert all(f"`{key}`" in doc for key in PROGRAM_OPTIONS)
    assert "then build and run the edited Makefile (or `network.py`) as they would the builder's" in doc


def test_a_planted_package_is_refused_before_trusted_key_imports_cryptography(signed_ir, tmp_path):
    # a REPL, notebook or python -c started in a received artifact has the folder on sys.path: a planted
    # cryptography/ ran when --trusted-key's check imported the real one, before the seal was looked at
    art_dir, pub = signed_ir
    shutil.copytree(art_dir, tmp_path / "a")
    (tmp_path / "a" / "cryptography").mkdir()
    (tmp_path / "a" / "cryptography" / "__init__.py").write_text(f"open({str(tmp_path / 'PWNED')!r}, 'w')\n")
    code = (
        "import sys, lmu_edge\n"
        "try:\n lmu_edge.open_artifact('.', trusted_key=sys.argv[1])\n"
        "except Exception as e:\n print(e)"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, str(pub)], cwd=tmp_path / "a", capture_output=True, text=True, timeout=120
    )
    assert not (tmp_path / "PWNED").exists(), "a planted package ran"
    assert "holds cryptography/, which lmu-edge did not write" in r.stdout, (r.stdout, r.stderr)


@pytest.mark.parametrize("arena", ["x", 10**15, True, [1], 0])
def test_a_resealed_tflm_arena_size_that_is_no_byte_count_is_refused_on_open(signed_ir, tmp_path, arena):
    # read by the tflm runtime: a string was an internal error, 10**15 a std::bad_alloc from the allocation
    shutil.copytree(signed_ir[0], tmp_path / "a")

    def edit(m):
        m["target"] = "tflite"
        m["report"] = {"tflm_arena_bytes": arena}

    _reseal(tmp_path / "a", edit)
    with pytest.raises(ArtifactError, match="malformed manifest: report.tflm_arena_bytes"):
        lmu_edge.open_artifact(tmp_path / "a")
