#!/usr/bin/env bash
# Sets lmu-edge up in .venv and runs the main job on a model shipped in the repository:
# inspect it, convert it, run the artifact on held-out digits and verify it against the model.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e .
LMU=.venv/bin/lmu-edge
MODEL=examples/models/digits_lmu.lmu.npz
set -x
$LMU inspect "$MODEL"
$LMU convert "$MODEL" --target ir -o out/digits --force --quiet
$LMU run out/digits --input examples/models/digits_test_x.npy -o out/digits/predictions.npy
$LMU verify out/digits --input examples/models/digits_test_x.npy
set +x
.venv/bin/python - <<'PY'
import numpy as np
y = np.load("out/digits/predictions.npy")
labels = np.load("examples/models/digits_test_y.npy")
print(f"accuracy of the converted model on {len(labels)} held-out digits: {np.mean(y.argmax(-1) == labels):.3f}")
PY
