"""The distribution: wheel contents, lazy heavy imports, the editable install's import names."""

import importlib
import importlib.metadata
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import ROOT, lmu_edge_cli

HEAVY = (
    "tensorflow",
    "keras",
    "keras_lmu",
    "ai_edge_litert",
    "tflite_runtime",
    "tflite_micro",
    "onnx",
    "onnxruntime",
    "nengo",
    "nengo_loihi",
    "torch",
)


def test_sub_packages_import_under_lmu_edge():
    for name in ("lmu_edge.converters", "lmu_edge.targets", "lmu_edge.targets.ir", "lmu_edge.firmware_templates"):
        importlib.import_module(name)
    import lmu_edge.firmware_templates as ft

    assert ft.path().name == "firmware_templates"


def test_core_requirements_pull_no_heavy_runtime():
    reqs = importlib.metadata.requires("lmu-edge") or []
    core = [r for r in reqs if "extra ==" not in r]
    names = {r.split(";")[0].split(">")[0].split("=")[0].split("<")[0].strip().lower() for r in core}
    # the report draws its own SVG charts; threadpoolctl (pure Python, no dependencies of its own) holds BLAS to one
    # thread while lmu_edge.parallel's blocks run on threads
    assert names == {"numpy", "scipy", "click", "h5py", "jinja2", "threadpoolctl"}
    extras = importlib.metadata.metadata("lmu-edge").get_all("Provides-Extra")
    assert {"keras", "tflite", "onnx", "nengo", "loihi", "all", "test"} <= set(extras)


def test_importing_the_core_imports_no_heavy_runtime():
    code = (
        "import sys, lmu_edge, lmu_edge.cli, lmu_edge.targets.ir, lmu_edge.folding, lmu_edge.reference;"
        f"bad = [m for m in {HEAVY!r} if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.slow
def test_wheel_holds_the_three_sub_packages(tmp_path):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    wheel = next(tmp_path.glob("lmu_edge-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for f in (
        "lmu_edge/__init__.py",
        "lmu_edge/cli.py",
        "lmu_edge/ir.py",
        "lmu_edge/lti.py",
        "lmu_edge/folding.py",
        "lmu_edge/reference.py",
        "lmu_edge/fixedpoint.py",
        "lmu_edge/converters/__init__.py",
        "lmu_edge/targets/__init__.py",
        "lmu_edge/targets/ir.py",
        "lmu_edge/firmware_templates/__init__.py",
        "lmu_edge/firmware_templates/lmu_runtime.h",
        "lmu_edge/firmware_templates/model.c.j2",
        "lmu_edge/firmware_templates/mps2.ld",
        "lmu_edge/report_template.html.j2",
        "lmu_edge/_cli_docs.py",
    ):
        assert f in names, f
    # every documentation page, for lmu-edge docs (a pip user has no docs/ of the source tree)
    for page in (ROOT / "docs").glob("*.md"):
        assert f"lmu_edge/docs/{page.name}" in names, page.name
    assert not any(n.startswith(("tests/", "converters/", "targets/", "examples/", "bench/")) for n in names)
    meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(meta).decode()
    assert "Requires-Dist: numpy" in text and "tensorflow" not in text.split("Provides-Extra")[0]
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "lmu-edge = lmu_edge.cli:main" in zipfile.ZipFile(wheel).read(entry).decode()


def test_the_test_environments_take_the_scripts_constraints_pins():
    # scripts/test.sh makes .venv (and scripts/sinabs_venv.sh .venv-sinabs) with -c scripts/constraints.txt;
    # without it pip takes PyPI's newest torch, whose CUDA libraries (about 4 GB per environment) once filled
    # CI's disk. Catches a pip call that drops the constraint.
    import os

    pins = dict(
        line.split("==")
        for line in (ROOT / "scripts" / "constraints.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    )
    assert set(pins) == {"torch", "tensorflow-cpu", "ray"}, pins
    r = subprocess.run(
        [sys.executable, "-c", "import importlib.metadata as m; print(m.version('ray'))"],
        capture_output=True,
        text=True,
    )
    assert r.stdout.strip() == pins["ray"], r  # the sweep extra, at the version its tests were run with
    pythons = [sys.executable] + [os.environ[v] for v in ("LMU_EDGE_SINABS_PYTHON",) if os.environ.get(v)]
    if os.environ.get("CI") == "true":
        assert len(pythons) == 2, "scripts/test.sh sets LMU_EDGE_SINABS_PYTHON"
    for py in pythons:
        r = subprocess.run(
            [py, "-c", "import importlib.metadata as m; print(m.version('torch'))"], capture_output=True, text=True
        )
        assert r.returncode == 0 and r.stdout.split("+")[0].strip() == pins["torch"], (py, r.stdout, r.stderr)


def test_the_test_environments_hold_one_copy_of_each_heavy_runtime():
    # docs/torch.md ("Installing torch"): CI machines have had 4.1 GB free, and the three environments take 3.1 GB
    # only with CPU builds and no second copy. Catches make_venv installing the tensorflow wheel (0.6 GB more,
    # or both wheels into one folder) and .venv-sinabs getting a torch of its own (0.8 GB more).
    import os
    import platform
    import sysconfig

    if os.environ.get("CI") != "true" and "LMU_EDGE_SINABS_PYTHON" not in os.environ:
        pytest.skip("checks the environments scripts/test.sh makes (CI=true or LMU_EDGE_SINABS_PYTHON set)")
    if platform.system() == "Linux" and platform.machine() == "x86_64" and os.environ.get("LMU_EDGE_TF_CPU") != "0":
        assert importlib.metadata.version("tensorflow-cpu") == "2.21.0"
        with pytest.raises(importlib.metadata.PackageNotFoundError):
            importlib.metadata.version("tensorflow")
        import keras_lmu  # noqa: F401  (installed --no-deps: the module, not the distribution, is what it needs)

        # and without TensorFlow's C++ headers (287 MB)
        assert not (Path(sysconfig.get_paths()["purelib"]) / "tensorflow" / "include").exists()
    code = "import torch, nir, sinabs; print(torch.__file__); print(nir.__file__); print(nir.__version__)"
    r = subprocess.run([os.environ["LMU_EDGE_SINABS_PYTHON"], "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    torch_file, nir_file, nir_version = r.stdout.split()
    assert torch_file.startswith(sysconfig.get_paths()["purelib"]), torch_file  # .venv's torch, no second copy
    assert not nir_file.startswith(sysconfig.get_paths()["purelib"]) and nir_version == "1.0.4", r.stdout


def test_docs_lists_and_prints_the_shipped_pages():
    """``lmu-edge docs`` lists every page of docs/ with its title and prints one by name; the top-level help
    points to it (it pointed to "README.md and docs/ of the source tree", which a pip user does not have)."""
    r = subprocess.run(lmu_edge_cli() + ["docs"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    listed = {line.split()[0] for line in r.stdout.splitlines()[1:]}
    assert listed == {p.stem for p in (ROOT / "docs").glob("*.md")}, listed
    assert "Dropping a converted model into a firmware project" in r.stdout  # firmware.md's title
    r = subprocess.run(lmu_edge_cli() + ["docs", "firmware"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == (ROOT / "docs" / "firmware.md").read_text(), r.stderr
    r = subprocess.run(lmu_edge_cli() + ["docs", "nope"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "no documentation page 'nope'; the pages: README, " in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run(lmu_edge_cli() + ["--help"], capture_output=True, text=True, timeout=60)
    flat = " ".join(r.stdout.split())
    assert "'lmu-edge docs' lists the pages shipped with lmu-edge" in flat and "source tree" not in flat
