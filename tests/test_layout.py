"""README's Layout section names every module and every top-level folder of the tree (issue 17)."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _layout() -> str:
    text = (ROOT / "README.md").read_text()
    return text[text.index("## Layout"):text.index("## License")]


def test_every_module_is_named_in_the_layout():
    layout = _layout()
    named = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", layout))
    for package in ("lmu_edge", "converters", "targets"):
        for f in (ROOT / package).glob("*.py"):
            if f.stem.startswith("_"):
                continue                     # private helpers are covered by the sentence about them
            assert f.stem in named, f"{package}/{f.name} is not named in README's Layout section"


def test_every_tracked_top_level_folder_is_named():
    layout = _layout()
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    folders = {line.split("/")[0] for line in files.splitlines() if "/" in line}
    for folder in sorted(folders):
        assert f"`{folder}/" in layout or f"`{folder}`" in layout, f"{folder}/ is not named in README's Layout"


def _core_imports() -> dict:
    """lmu_edge module -> the lmu_edge modules it imports, function-level imports included."""
    import ast
    mods = {p.stem: p for p in (ROOT / "lmu_edge").glob("*.py") if p.stem != "__init__"}
    graph = {m: set() for m in mods}
    for m, p in mods.items():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                names = [node.module.split(".")[0]] if node.module else [a.name for a in node.names]
                graph[m] |= {n for n in names if n in mods and n != m}
    return graph


def test_the_core_modules_import_each_other_without_cycles():
    # A cycle hidden by a function-level import (reference <-> intsim used to be one) makes the import order
    # matter and the modules impossible to read alone.
    graph = _core_imports()
    done, active = set(), []

    def visit(m):
        assert m not in active, f"import cycle: {' -> '.join(active[active.index(m):] + [m])}"
        if m in done:
            return
        active.append(m)
        for n in sorted(graph[m]):
            visit(n)
        active.pop()
        done.add(m)

    for m in sorted(graph):
        visit(m)
