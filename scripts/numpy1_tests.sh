#!/usr/bin/env bash
# Runs tests/numpy1 (nengo-loihi's emulator, legacy tflite-runtime): packages that work only with numpy < 2.
#   bash scripts/numpy1_tests.sh            extra arguments go to pytest
#   bash scripts/numpy1_tests.sh --setup    only make the environment (scripts/test.sh runs this beside .venv's)
# Creates (once) a second virtual environment .venv-numpy1 at the repository root with numpy<2, nengo,
# nengo-loihi, tflite-runtime 2.14, pytest and lmu-edge (editable); a pip constraint keeps numpy below 2.
# Not the [test] extra: its linters (mypy, ruff, pre-commit: about 100 MB) run in .venv only.
# Exits with pytest's code; "no tests collected" (5) counts as a failure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/setup-common.sh   # editable_locked

PY="${PYTHON:-python3}"
VENV=.venv-numpy1
STAMP="$VENV/.lmu-edge-installed"
PIP=("$VENV/bin/python" -m pip install -q --disable-pip-version-check)  # (compiled: see make_venv)

if [ ! -x "$VENV/bin/python" ]; then
    echo "== creating $VENV (numpy < 2)"
    "$PY" -m venv "$VENV"
fi
# reinstall when pyproject.toml changed since the last install
if [ ! -f "$STAMP" ] || [ pyproject.toml -nt "$STAMP" ]; then
    echo "== installing numpy<2, nengo, nengo-loihi, tflite-runtime, pytest and lmu-edge into $VENV"
    constraint="$VENV/numpy1-constraints.txt"
    log="$VENV/install.log"
    echo "numpy<2" > "$constraint"
    if ! { "${PIP[@]}" --upgrade pip &&
           "${PIP[@]}" -c "$constraint" "numpy<2" "nengo>=4.0" "nengo-loihi>=1.1" "tflite-runtime==2.14.*" &&
           editable_locked "${PIP[@]}" -c "$constraint" "pytest>=8" -e .; } >"$log" 2>&1; then
        tail -n 40 "$log"
        echo "installing into $VENV failed; the whole pip log is in $log"
        exit 1
    fi
    "$VENV/bin/python" - <<'EOF'
import numpy
assert int(numpy.__version__.split(".")[0]) < 2, f"numpy {numpy.__version__} in .venv-numpy1: expected < 2"
EOF
    touch "$STAMP"
fi

[ "${1:-}" != "--setup" ] || exit 0
set +e
"$VENV/bin/python" -m pytest tests/numpy1 -p no:nengo "$@"
rc=$?
set -e
if [ $rc -eq 5 ]; then
    echo "pytest collected no tests in tests/numpy1 (exit 5)"
    exit 1
fi
exit $rc
