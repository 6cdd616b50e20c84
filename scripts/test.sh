#!/usr/bin/env bash
# Sets up everything the test suite needs on a fresh machine and runs every test.
#   bash scripts/test.sh                 (as root, or with sudo, where Debian packages are missing)
#   bash scripts/test.sh -m "not slow"   extra arguments go to the main pytest run
#   bash scripts/test.sh --fast [ARGS]   the edit loop (about 5 minutes on 2 cores): no set-up where .venv
#                                        exists, lint, then the main environment's tests not marked slow
#                                        (the integer matrix on the host included; its QEMU runtimes, the
#                                        files tests/conftest.py lists as heavy, the numpy<2 and Sinabs
#                                        environments and the serial tests left to the full run)
# Installs: the C toolchains, QEMU and Chromium (Debian); .venv with lmu-edge and the extras whose
# real runtimes the tests run (TensorFlow + keras-lmu build the reference models); then the second
# environment with numpy < 2 (nengo-loihi, legacy tflite-runtime) through scripts/numpy1_tests.sh.
# Runs scripts/lint.sh (ruff, ruff format --check, mypy, clang-format) beside the numpy<2 tests: a finding
# fails the run, after the tests have run. Ends with one line "N passed, N failed" over both environments,
# after the wall time of each phase, set-up and tests apart.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/setup-common.sh
FAST=0
if [ "${1:-}" = "--fast" ]; then
    FAST=1
    shift
fi
START=$SECONDS
SETUP_TIMES=() TEST_TIMES=()
took() {    # took setup|tests NAME T0: note the seconds since T0 under set-up or tests
    if [ "$1" = setup ]; then SETUP_TIMES+=("$2 $((SECONDS - $3))"); else TEST_TIMES+=("$2 $((SECONDS - $3))"); fi
}
timed() {   # timed setup|tests NAME COMMAND...: run it and note its seconds (not in a pipeline: a subshell)
    local kind=$1 name=$2 t=$SECONDS
    shift 2
    "$@"    # (under set -e a failure here still ends the script, as make_venv's pip runs rely on)
    took "$kind" "$name" "$t"
}
# the three environments take about 3.1 GB of disk (docs/torch.md, "Installing torch"); say what there is at the
# start and at the end, for a run that fails on it
disk() { echo "== disk$1: $(df -Ph . | awk 'NR == 2 {print $4}') free here, $(df -Ph "${TMPDIR:-/tmp}" | awk 'NR == 2 {print $4}') in the temporary folder"; }
disk ""
logs=$(mktemp -d)

setup_start=$SECONDS
apt_setup=""
if [ "$FAST" -eq 0 ] || [ ! -x .venv/bin/python ]; then
    # the Debian packages install beside the Python environments (nothing pip installs needs them; on a
    # fresh machine each side takes one to two minutes): waited for, and its log printed, before the tests
    apt_install "${C_TARGET_PACKAGES[@]}" "${REPORT_TEST_PACKAGES[@]}" "${KWS_PACKAGES[@]}" "${LINT_PACKAGES[@]}" \
        >"$logs/apt.out" 2>&1 &
    apt_setup=$!
    apt_t=$SECONDS
fi
numpy1_setup=""
if [ "$FAST" -eq 0 ] && [ -f scripts/numpy1_tests.sh ]; then
    # the numpy<2 environment shares nothing with .venv: it installs beside it (its log is printed after)
    bash scripts/numpy1_tests.sh --setup >"$logs/numpy1-setup.out" 2>&1 &
    numpy1_setup=$!
    numpy1_t=$SECONDS
fi
if [ "$FAST" -eq 0 ] || [ ! -x .venv/bin/python ]; then
    timed setup .venv make_venv "test,keras,nengo,tflite,onnx,torch,nir,sweep"
fi
# issue 19: the second NIR simulator (Sinabs pins nir <= 1.0.4) in its own environment (after .venv: it
# reads .venv's torch)
if [ "$FAST" -eq 0 ] && [ -f scripts/sinabs_venv.sh ]; then
    t=$SECONDS
    bash scripts/sinabs_venv.sh >"$logs/sinabs.out" || true
    took setup .venv-sinabs "$t"
    sinabs_py=$(tail -n 1 "$logs/sinabs.out")
    if [ -x "$sinabs_py" ]; then export LMU_EDGE_SINABS_PYTHON=$sinabs_py; else
        echo "scripts/sinabs_venv.sh failed: the nir target's sinabs tests will fail"; fi
elif [ -x .venv-sinabs/bin/python ]; then
    export LMU_EDGE_SINABS_PYTHON="$PWD/.venv-sinabs/bin/python"
fi
if [ -n "$apt_setup" ]; then
    apt_ok=1
    wait "$apt_setup" || apt_ok=0
    took setup "apt (beside the above)" "$apt_t"
    cat "$logs/apt.out"
    [ "$apt_ok" -eq 1 ] || { echo "installing the Debian packages failed (above)"; exit 1; }
fi
numpy1_ok=1
if [ -n "$numpy1_setup" ]; then
    wait "$numpy1_setup" || numpy1_ok=0
    took setup ".venv-numpy1 (beside the above)" "$numpy1_t"
    cat "$logs/numpy1-setup.out"
fi
SETUP=$((SECONDS - setup_start))

tests_start=$SECONDS
rc=0
lint_rc=0
export LMU_EDGE_MAIN_PYTHON="$PWD/.venv/bin/python"
# The integer matrix keeps its conversions and reference hashes in the clone (keyed by a hash of the
# package's Python; tests/test_int_matrix.py): the mutation sample after the main run, a second run, or one
# after an edit of the C runtime reuses them. The newest six entries stay (two matrices a version).
export LMU_EDGE_TEST_CACHE="${LMU_EDGE_TEST_CACHE:-$PWD/build/test-cache}"
mkdir -p "$LMU_EDGE_TEST_CACHE"
# shellcheck disable=SC2012  # (the names are ours: int_matrix-MODE-HASH)
ls -1t "$LMU_EDGE_TEST_CACHE" | tail -n +7 | while read -r old; do rm -rf "${LMU_EDGE_TEST_CACHE:?}/$old"; done
# One thread per process for OpenMP (torch, OpenBLAS): two pytest workers share the two cores, and a
# second thread each only spin-waits (the KWS torch tests took 55 s of CPU with two threads, 33 s with one)
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
# and one thread for lmu-edge's own split of long simulations (lmu_edge/parallel.py): the blocks still run,
# one after the other (tests/test_parallel.py runs them on several threads itself)
export LMU_EDGE_THREADS="${LMU_EDGE_THREADS:-1}"
if [ "$FAST" -eq 0 ] && [ -f scripts/numpy1_tests.sh ]; then
    # lint (one core: mypy) beside the numpy<2 environment's tests (one process): its output after theirs.
    # The numpy<2 environment runs first: its tflite-runtime worker is used by the main suite too. Its
    # tests convert models in the main environment (TensorFlow cannot be imported next to tflite-runtime).
    lint_t=$SECONDS
    bash scripts/lint.sh >"$logs/lint.out" 2>&1 &
    lint_pid=$!
    echo "== tests in the numpy<2 environment (nengo-loihi, tflite-runtime 2.14)"
    set +e
    if [ "$numpy1_ok" -eq 1 ]; then
        t=$SECONDS
        bash scripts/numpy1_tests.sh 2>&1 | tee "$logs/numpy1.log"
        rc=${PIPESTATUS[0]}
        took tests numpy1 "$t"
    else
        echo "scripts/numpy1_tests.sh --setup failed (above): the numpy<2 tests did not run"
        rc=1
    fi
    wait "$lint_pid"
    lint_rc=$?
    set -e
    took tests "lint (beside numpy1)" "$lint_t"
    echo "== lint (the checks of .pre-commit-config.yaml)"
    cat "$logs/lint.out"
    export LMU_EDGE_TFLITE_RUNTIME_PYTHON="$PWD/.venv-numpy1/bin/python"
else
    echo "== lint (the checks of .pre-commit-config.yaml)"
    t=$SECONDS
    bash scripts/lint.sh || lint_rc=1
    took tests lint "$t"
fi
echo "== pytest"
# two workers (pytest-xdist), one test file each at a time: a file's module fixtures (the integer matrix's
# images, the converted models) are built once; most tests are single-threaded (gcc, QEMU, numpy), so the
# second core would otherwise sit idle. --durations lists the slowest, for whoever trims the suite next.
# Two files run alone after the rest: test_quickstart reinstalls lmu-edge into .venv (scripts/quickstart.sh)
# and test_install builds it in the repository, which would pull the package from under the other worker.
SERIAL=(tests/test_quickstart.py tests/test_install.py)
# --no-loadscope-reorder: the files in tests/conftest.py's order, the longest first (xdist's own order is the
# most tests first, which left some of the longest files for the end, on one worker)
PYTEST=(.venv/bin/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder --durations=40)
set +e
t=$SECONDS
if [ "$FAST" -eq 1 ]; then
    # the integer matrix's QEMU images (both matrices on the Cortex-M runtimes) are the full run's, and so
    # are the files tests/conftest.py lists as heavy (examples, simulators, target-wide conversions)
    LMU_EDGE_FAST_TESTS=1 "${PYTEST[@]}" -m "not slow" "${SERIAL[@]/#/--ignore=}" \
        -k "not (test_every_case_matches or test_every_int16x8_case_matches) or host" "$@" 2>&1 | tee "$logs/main.log"
    rc_main=${PIPESTATUS[0]}
    took tests pytest "$t"
elif [ $# -eq 0 ]; then
    "${PYTEST[@]}" "${SERIAL[@]/#/--ignore=}" 2>&1 | tee "$logs/main.log"
    rc_main=${PIPESTATUS[0]}
    took tests pytest "$t"
    echo "== pytest, alone: ${SERIAL[*]}"
    t=$SECONDS
    .venv/bin/python -m pytest "${SERIAL[@]}" 2>&1 | tee "$logs/serial.log"
    rc_serial=${PIPESTATUS[0]}
    took tests "pytest alone" "$t"
    [ "$rc_main" -ne 0 ] || rc_main=$rc_serial
else
    "${PYTEST[@]}" "$@" 2>&1 | tee "$logs/main.log"
    rc_main=${PIPESTATUS[0]}
    took tests pytest "$t"
fi
set -e
if [ "$rc_main" -eq 5 ]; then
    echo "pytest collected no tests (exit 5)"
    rc_main=1
fi
[ "$rc" -eq 0 ] && rc=$rc_main
if [ "${CI:-}" = "true" ] && [ "$FAST" -eq 0 ]; then   # issue 13: the fixed sample of the mutation harness (docs/testing.md)
    echo "== mutation sample"
    t=$SECONDS
    set +e
    # after a green main run the sample's covering tests have just passed on this tree: no second baseline
    base=(); [ "$rc" -ne 0 ] || base=(--baseline-passed)
    .venv/bin/python scripts/mutate.py --ci "${base[@]}" 2>&1 | tee "$logs/mutate.log"
    rc_mut=${PIPESTATUS[0]}
    set -e
    took tests "mutation sample" "$t"
    [ "$rc_mut" -eq 0 ] || [ "$rc" -ne 0 ] || rc=1
fi
TESTS=$((SECONDS - tests_start))
# (grep finds nothing when, say, no test failed: the pipelines must not stop the script under set -e)
summary() { { grep -hE "^=+ .*(passed|failed|error)" "$logs"/*.log || true; } | { grep -oE "[0-9]+ $1" || true; } |
            awk '{s += $1} END {print s + 0}'; }
passed=$(summary passed)
failed=$(( $(summary failed) + $(summary error) ))
rm -rf "$logs"
disk " at the end"
echo "== environments: $(du -sm .venv .venv-numpy1 .venv-sinabs 2>/dev/null | awk '{printf "%s%s %s MB", (NR > 1 ? ", " : ""), $2, $1}')"
[ "$lint_rc" -eq 0 ] || { echo "lint: findings (scripts/lint.sh above)"; [ "$rc" -ne 0 ] || rc=1; }
join() { [ $# -eq 0 ] || { local IFS=,; echo " ($*)" | sed -e 's/,/ s, /g' -e 's/)$/ s)/'; }; }
echo "== wall time: set-up ${SETUP} s$(join "${SETUP_TIMES[@]}"), tests ${TESTS} s$(join "${TEST_TIMES[@]}"); total $((SECONDS - START)) s$([ "$FAST" -eq 0 ] || echo " (--fast)")"
echo "${passed} passed, ${failed} failed"
exit "$rc"
