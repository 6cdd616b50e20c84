#!/usr/bin/env bash
# Sets up everything the test suite needs on a fresh machine and runs every test.
#   bash scripts/test.sh                 (as root, or with sudo, where Debian packages are missing)
#   bash scripts/test.sh -m "not slow"   extra arguments go to the main pytest run
# Installs: the C toolchains, QEMU and Chromium (Debian); .venv with lmu-edge and the extras whose
# real runtimes the tests run (TensorFlow + keras-lmu build the reference models); then the second
# environment with numpy < 2 (nengo-loihi, legacy tflite-runtime) through scripts/numpy1_tests.sh.
# First runs scripts/lint.sh (ruff, ruff format --check, mypy, clang-format): a finding fails the run, after
# the tests have run. Ends with one line "N passed, N failed" over both environments.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/setup-common.sh
# the three environments take about 3.1 GB of disk (README, "Installing torch"); say what there is at the
# start and at the end, for a run that fails on it
disk() { echo "== disk$1: $(df -Ph . | awk 'NR == 2 {print $4}') free here, $(df -Ph "${TMPDIR:-/tmp}" | awk 'NR == 2 {print $4}') in the temporary folder"; }
disk ""

apt_install "${C_TARGET_PACKAGES[@]}" "${REPORT_TEST_PACKAGES[@]}" "${KWS_PACKAGES[@]}" "${LINT_PACKAGES[@]}"
make_venv "test,keras,nengo,tflite,onnx,torch,nir"

logs=$(mktemp -d)
rc=0
echo "== lint (the checks of .pre-commit-config.yaml)"
lint_rc=0
bash scripts/lint.sh || lint_rc=1
# The numpy<2 environment first: its tflite-runtime worker is used by the main suite too. Its tests
# convert models in the main environment (TensorFlow cannot be imported next to tflite-runtime).
export LMU_EDGE_MAIN_PYTHON="$PWD/.venv/bin/python"
if [ -f scripts/numpy1_tests.sh ]; then
    echo "== tests in the numpy<2 environment (nengo-loihi, tflite-runtime 2.14)"
    set +e
    bash scripts/numpy1_tests.sh 2>&1 | tee "$logs/numpy1.log"
    rc=${PIPESTATUS[0]}
    set -e
    export LMU_EDGE_TFLITE_RUNTIME_PYTHON="$PWD/.venv-numpy1/bin/python"
fi
# issue 19: the second NIR simulator (Sinabs pins nir <= 1.0.4) in its own environment
if [ -f scripts/sinabs_venv.sh ]; then
    LMU_EDGE_SINABS_PYTHON=$(bash scripts/sinabs_venv.sh | tail -n 1) && export LMU_EDGE_SINABS_PYTHON ||
        echo "scripts/sinabs_venv.sh failed: the nir target's sinabs tests will fail"
fi
echo "== pytest"
# two workers (pytest-xdist), one test file each at a time: a file's module fixtures (the integer matrix's
# images, the converted models) are built once; most tests are single-threaded (gcc, QEMU, numpy), so the
# second core would otherwise sit idle. --durations lists the slowest, for whoever trims the suite next.
# Two files run alone after the rest: test_quickstart reinstalls lmu-edge into .venv (scripts/quickstart.sh)
# and test_install builds it in the repository, which would pull the package from under the other worker.
SERIAL=(tests/test_quickstart.py tests/test_install.py)
set +e
if [ $# -eq 0 ]; then
    .venv/bin/python -m pytest -n 2 --dist loadfile --durations=25 "${SERIAL[@]/#/--ignore=}" 2>&1 | tee "$logs/main.log"
    rc_main=${PIPESTATUS[0]}
    echo "== pytest, alone: ${SERIAL[*]}"
    .venv/bin/python -m pytest "${SERIAL[@]}" 2>&1 | tee "$logs/serial.log"
    rc_serial=${PIPESTATUS[0]}
    [ "$rc_main" -ne 0 ] || rc_main=$rc_serial
else
    .venv/bin/python -m pytest -n 2 --dist loadfile --durations=25 "$@" 2>&1 | tee "$logs/main.log"
    rc_main=${PIPESTATUS[0]}
fi
set -e
if [ "$rc_main" -eq 5 ]; then
    echo "pytest collected no tests (exit 5)"
    rc_main=1
fi
[ "$rc" -eq 0 ] && rc=$rc_main
if [ "${CI:-}" = "true" ]; then   # issue 13: the fixed sample of the mutation harness (docs/testing.md)
    echo "== mutation sample"
    if ! .venv/bin/python scripts/mutate.py --ci 2>&1 | tee "$logs/mutate.log"; then
        [ "$rc" -ne 0 ] || rc=1
    fi
fi
# (grep finds nothing when, say, no test failed: the pipelines must not stop the script under set -e)
summary() { { grep -hE "^=+ .*(passed|failed|error)" "$logs"/*.log || true; } | { grep -oE "[0-9]+ $1" || true; } |
            awk '{s += $1} END {print s + 0}'; }
passed=$(summary passed)
failed=$(( $(summary failed) + $(summary error) ))
rm -rf "$logs"
disk " at the end"
echo "== environments: $(du -sm .venv .venv-numpy1 .venv-sinabs 2>/dev/null | awk '{printf "%s%s %s MB", (NR > 1 ? ", " : ""), $2, $1}')"
[ "$lint_rc" -eq 0 ] || { echo "lint: findings (scripts/lint.sh above)"; [ "$rc" -ne 0 ] || rc=1; }
echo "${passed} passed, ${failed} failed"
exit "$rc"
