"""Type-check the whole lmu_edge package with mypy, sub-packages that live outside lmu_edge/ included.

    python scripts/typecheck.py                  # every module, exit 1 on any error
    python scripts/typecheck.py targets/c.py     # the same run, errors shown (and counted) for these files only
    python scripts/typecheck.py --root DIR ...   # check another checkout with this script's configuration

pyproject.toml's package-dir installs converters/, targets/ and firmware_templates/ as lmu_edge.converters,
lmu_edge.targets and lmu_edge.firmware_templates. mypy maps a file to its module name by its folders, so
`mypy lmu_edge` never sees them and `mypy targets/c.py` checks a module called `targets.c`. This script builds
the installed layout as a tree of relative symbolic links (build/mypy-tree/lmu_edge/...), points mypy at it
(`mypy_path` in [tool.mypy]) and writes the errors back with the paths of the checkout.

mypy comes from the running interpreter when it has one (the `test` extra installs it); otherwise from
`mypy` on PATH, told to read the running interpreter's packages (`--python-executable`).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]  # the checkout whose pyproject.toml configures mypy
LINE = re.compile(r"^(?P<path>[^:\s]+\.pyi?)(?P<rest>:.*)$")


def _package_dirs(root: Path) -> dict[str, str]:
    """Package name -> folder, as pyproject.toml's [tool.setuptools.package-dir] states it."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    config = tomllib.loads((root / "pyproject.toml").read_text())
    return dict(config["tool"]["setuptools"]["package-dir"])


def build_tree(root: Path, tree: Path | None = None) -> Path:
    """(Re)build ``tree`` (default ROOT/build/mypy-tree): the package as it installs, as relative links into
    the checkout ``root``."""
    dirs = _package_dirs(root)
    tree = root / "build" / "mypy-tree" if tree is None else tree
    shutil.rmtree(tree, ignore_errors=True)
    for package in sorted(dirs, key=lambda p: p.count(".")):
        target = tree.joinpath(*package.split("."))
        source = root / dirs[package]
        depth = package.count(".") + 1
        remapped = {p.split(".")[-1] for p in dirs if p.startswith(package + ".") and p.count(".") == depth}
        if package.count(".") == 0 or remapped:
            target.mkdir(parents=True)  # a real folder: its remapped children are links beside the rest
            for child in sorted(source.iterdir()):
                if child.name in remapped or child.name == "__pycache__":
                    continue
                (target / child.name).symlink_to(os.path.relpath(child, target))
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(os.path.relpath(source, target.parent), target_is_directory=True)
    return tree


def _checkout_path(path: str, root: Path, tree: Path) -> str:
    """A path mypy printed (inside the link tree) as the checkout's own relative path."""
    full = root / path
    try:
        full.relative_to(tree)
    except ValueError:
        return path
    return os.path.relpath(os.path.realpath(full), root)


def _mypy_command() -> list[str]:
    try:
        import mypy  # noqa: F401  (only asks whether this interpreter has mypy)
    except ModuleNotFoundError:
        exe = shutil.which("mypy")
        if exe is None:
            sys.exit("typecheck: mypy is not installed; pip install -e '.[test]' (or put mypy on PATH)")
        command = [exe, "--python-executable", sys.executable]
    else:
        command = [sys.executable, "-m", "mypy"]
    return command + ["--config-file", str(HERE / "pyproject.toml")]


def main(argv: list[str]) -> int:
    """Run mypy over the package; print its findings with checkout paths; 1 when any (selected) file has one."""
    root = HERE
    if argv[:1] == ["--root"]:
        root, argv = Path(argv[1]).resolve(), argv[2:]
    wanted = {os.path.normpath(os.path.relpath(Path(a).resolve(), root)) for a in argv}
    tree = build_tree(root)
    run = subprocess.run(_mypy_command(), cwd=root, capture_output=True, text=True)
    if run.returncode not in (0, 1):  # 2: mypy itself failed (bad configuration, crash)
        sys.stdout.write(run.stdout)
        sys.stderr.write(run.stderr)
        return run.returncode
    errors = 0
    files = set()
    for line in run.stdout.splitlines():
        m = LINE.match(line)
        if m is None:
            if not wanted and not line.startswith(("Found ", "Success")):
                print(line)
            continue
        path = _checkout_path(m["path"], root, tree)
        if wanted and os.path.normpath(path) not in wanted:
            continue
        print(path + m["rest"])
        if ": error:" in m["rest"]:
            errors += 1
            files.add(path)
    scope = "the given files" if wanted else "the package"
    print(f"typecheck: {errors} error(s) in {len(files)} file(s) of {scope}" if errors else f"typecheck: {scope} clean")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
