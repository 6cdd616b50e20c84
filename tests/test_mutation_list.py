"""The mutation list itself: ids unique, every [equivalent] entry names a mutant that exists, every
hand-written snippet still occurs once in its file, and generated ids that do not move when code is added
above their line (scripts/mutate.py)."""

import sys
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import mutate  # noqa: E402  (scripts/ is put on sys.path just above)


def test_ids_are_unique_and_every_equivalent_entry_exists():
    muts = mutate.load(ROOT / "tests" / "mutations.toml")
    ids = [m["id"] for m in muts]
    assert len(ids) == len(set(ids))
    data = tomllib.loads((ROOT / "tests" / "mutations.toml").read_text())
    assert set(data["equivalent"]) <= set(ids)
    assert set(data["ci_sample"]) <= set(ids)


@pytest.mark.parametrize("header", mutate.KERNEL_HEADERS)
def test_generated_ids_survive_lines_added_above(header):
    lines, idx = mutate.kernel_lines((ROOT / header).read_text())
    before = mutate.line_keys(lines, idx)
    shifted = ["/* a new comment */", "static inline int lmu_new_helper(int x) {", "    return x + 1;", "}"]
    after = mutate.line_keys(shifted + lines, [i + len(shifted) for i in idx])
    assert [before[i] for i in idx] == [after[i + len(shifted)] for i in idx]
    assert len(set(before.values())) == len(before)  # a repeated line gets its own name
    assert all(k.startswith("lmu_") or k.startswith("LMU_") for k in before.values())


def test_every_hand_written_snippet_occurs_once_in_its_file():
    # a snippet that no longer matches (the code around it was rewritten) would be reported as an ERROR
    # only when the full list runs; here it fails at once
    data = tomllib.loads((ROOT / "tests" / "mutations.toml").read_text())
    stale = {}
    for m in data["mutation"]:
        n = (ROOT / m["file"]).read_text().count(m["original"])
        if n != 1:
            stale[m["id"]] = n
    assert not stale, f"snippets that do not occur exactly once (id: count): {stale}"
