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
