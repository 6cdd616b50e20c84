"""lmu-edge installed the regular way (a wheel, not editable) finds its packaged files.

Issue 17: from a regular install the audio front end looked for its C template next to site-packages
(``Path(__file__).parent.parent / "firmware_templates"``), a path that exists only in a checkout.
"""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = r"""
import sys, pathlib
import lmu_edge, lmu_edge.audio.frontend as fe, lmu_edge.targets.c_kit as c
site = pathlib.Path(sys.argv[1]).resolve()
assert pathlib.Path(lmu_edge.__file__).resolve().is_relative_to(site), lmu_edge.__file__
for t in (fe.TEMPLATES, c.TEMPLATES):
    assert t.resolve().is_relative_to(site), t
out = pathlib.Path(sys.argv[2])
print(len(fe.emit_c(out / "fe")))
from lmu_edge._cli_docs import docs_dir, pages
assert docs_dir().resolve().is_relative_to(site) and "firmware" in pages(), docs_dir()  # lmu-edge docs
art = lmu_edge.convert(sys.argv[3], "c", out / "art", measure=False)
print(sorted(p.name for p in art.path.rglob("*") if p.suffix in (".h", ".c")))
"""


def test_a_wheel_installed_in_a_fresh_venv_finds_its_templates(tmp_path):
    """Build a wheel, install it (not editable) into a fresh virtual environment, and from another folder
    run the front end's C emitter and a C conversion. The venv sees the test environment's third-party
    packages through a path file (no download), but not its editable lmu_edge."""
    wheels = tmp_path / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--disable-pip-version-check",
            "-w",
            str(wheels),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    (wheel,) = wheels.glob("lmu_edge-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    deps = subprocess.run(
        [sys.executable, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (site / "zz_test_dependencies.pth").write_text(deps + "\n")  # a plain path: its .pth files stay inactive
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(py),
            "install",
            "-q",
            "--no-deps",
            "--disable-pip-version-check",
            str(wheel),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    work = tmp_path / "elsewhere"
    work.mkdir()
    r = subprocess.run(
        [str(py), "-c", PROBE, str(site), str(work), str(ROOT / "examples" / "models" / "digits_lmu.lmu.npz")],
        cwd=work,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.split("\n")
    assert lines[0] == "3" and "lmu_runtime.h" in lines[1] and "model.c" in lines[1], r.stdout


def test_a_regular_install_finds_its_templates(tmp_path):
    site = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--disable-pip-version-check",
            "--target",
            str(site),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    env = dict(os.environ, PYTHONPATH=str(site))
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            PROBE,
            str(site),
            str(tmp_path),
            str(ROOT / "examples" / "models" / "digits_lmu.lmu.npz"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.split("\n")
    assert lines[0] == "3" and "lmu_runtime.h" in lines[1] and "model.c" in lines[1], r.stdout
