"""The README's first command: scripts/quickstart.sh, run twice as a user would (the second run must
replace the first one's artifact with --force, so nothing it writes may sit inside the artifact)."""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_quickstart_runs_twice_and_prints_what_the_readme_shows():
    outputs = []
    for _ in range(2):
        r = subprocess.run(
            ["bash", str(ROOT / "scripts" / "quickstart.sh")], cwd=ROOT, capture_output=True, text=True, timeout=1200
        )
        assert r.returncode == 0, (r.stdout[-1500:], r.stderr[-1500:])
        outputs.append(r.stdout)
    out = outputs[1]
    m = re.search(r"float model ([0-9.]+), int8 C on the host ([0-9.]+), int8 C on Cortex-M4 \(QEMU\) ([0-9.]+)", out)
    assert m, out[-1500:]
    f, host, m4 = map(float, m.groups())
    assert f >= 0.9 and host == m4 and abs(f - host) <= 0.02  # README: 0.955, 0.950, 0.950
    assert "host and Cortex-M4 outputs identical: True" in out
    assert re.search(r"flash \d+ B \(M4\), RAM \d+ B, \d+ MACs/step, [0-9.]+ instructions/step on M4", out)
    # the README shows these three lines; accuracies, sizes and QEMU instruction counts are exact
    readme = (ROOT / "README.md").read_text()
    block = readme[readme.index("The main job's output") :]
    shown = block[block.index("```\n") + 4 : block.index("\n```", block.index("```\n") + 4)].splitlines()
    printed = [line for line in out.splitlines() if line.strip()][-3:]
    assert printed == shown, (printed, shown)
