#!/usr/bin/env bash
# Sets lmu-edge up and runs the main job on a model shipped in the repository: a keras-lmu digits
# classifier (trained in parallel form) becomes int8 streaming C, which runs on the host and on a
# Cortex-M4 under QEMU, and is compared with the model it came from.
# Needs root (or sudo) the first time, for the C toolchains and QEMU.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/setup-common.sh
apt_install "${C_TARGET_PACKAGES[@]}"
make_venv ""
LMU=.venv/bin/lmu-edge
MODEL=examples/models/keras_digits.keras
X=examples/models/keras_digits_test_x.npy
set -x
$LMU inspect "$MODEL"
$LMU convert "$MODEL" --target c --quantize int8 --calibration examples/models/digits_calibration_x.npy \
    --prefix digits -o out/digits_c --force --quiet
$LMU run out/digits_c --input "$X" -o out/digits_pred_host.npy --force
$LMU run out/digits_c --input "$X" -o out/digits_pred_m4.npy --runtime cortex-m4 --force
set +x
.venv/bin/python - <<'PY'
import json
import numpy as np
import lmu_edge
x = np.load("examples/models/keras_digits_test_x.npy")
labels = np.load("examples/models/keras_digits_test_y.npy")
float_model = lmu_edge.simulate(lmu_edge.load("examples/models/keras_digits.keras"), x)
host, m4 = np.load("out/digits_pred_host.npy"), np.load("out/digits_pred_m4.npy")
rep = json.load(open("out/digits_c/report.json"))
acc = lambda y: np.mean(y.argmax(-1) == labels)
print(f"accuracy on {len(labels)} held-out digits: float model {acc(float_model):.3f}, "
      f"int8 C on the host {acc(host):.3f}, int8 C on Cortex-M4 (QEMU) {acc(m4):.3f}")
print(f"host and Cortex-M4 outputs identical: {np.array_equal(host, m4)}")
c, v = rep["c"], rep["verification"]
print(f"flash {c['flash_bytes_m4']} B (M4), RAM {c['ram_bytes']} B, {c['macs_per_step']} MACs/step, "
      f"{v.get('instructions_per_step_m4')} instructions/step on M4, {v.get('instructions_per_step_m0')} on M0 (means over the steps run)")
PY
