"""The project's long runs on the executor (docs/testing.md section 3): scripts/mutate.py's private
copies. On Ray each mutant is applied in a copy of the tree and tested there; the copy must be what its
interpreters import, the remapped sub-packages (lmu_edge.targets & co.) included, and never the main
checkout, which other work uses while the mutants run."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import mutate  # noqa: E402  (scripts/ is put on sys.path just above)

IMPORT = "import lmu_edge.fixedpoint as f, lmu_edge.targets.c as c; print(f.MARK, c.MARK, f.__file__, c.__file__)"


# slow: packs the tree and starts two interpreters that import lmu_edge (about 3 s of CPU, more on a busy
# machine); it is the only check of the private copies, which CI's in-place mutation sample never makes
@pytest.mark.slow
def test_a_private_copy_imports_its_own_mutated_files_and_leaves_the_checkout_alone(tmp_path):
    before = {p: (ROOT / p).read_bytes() for p in ("lmu_edge/fixedpoint.py", "targets/c.py")}
    root, env = mutate.private_tree(mutate.pack_tree(), tmp_path)
    # what a mutant does: edit files of the copy, one of them in a folder the install remaps (targets/)
    for rel, mark in (("lmu_edge/fixedpoint.py", "f"), ("targets/c.py", "c")):
        with open(root / rel, "a") as out:
            out.write(f"\nMARK = {mark!r}\n")
    # how the harness runs the covering tests there: -P, working directory the copy
    r = subprocess.run([sys.executable, "-P", "-c", IMPORT], cwd=root, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-800:]
    mark_f, mark_c, file_f, file_c = r.stdout.split()
    assert (mark_f, mark_c) == ("f", "c")
    assert Path(file_f).resolve() == root / "lmu_edge" / "fixedpoint.py"
    assert Path(file_c).resolve() == root / "targets" / "c.py"
    # without -P the copy's own lmu_edge/ comes first; the editable install would then give the checkout's
    # targets/: it must fail to import instead of testing the unmutated tree
    r = subprocess.run([sys.executable, "-c", IMPORT], cwd=root, env=env, capture_output=True, text=True)
    assert r.returncode != 0 and "No module named 'lmu_edge.targets'" in r.stderr, r.stdout + r.stderr[-800:]
    assert {p: (ROOT / p).read_bytes() for p in before} == before
