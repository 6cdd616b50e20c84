#!/usr/bin/env bash
# The checks of .pre-commit-config.yaml, read-only; exit 1 when any reports a finding (every check runs).
#   bash scripts/lint.sh
# ruff check, ruff format --check, mypy (scripts/typecheck.py: the whole package, converters and targets
# included) and clang-format --dry-run -Werror on firmware_templates/*.h, *.c (style: .clang-format).
# Tools: ruff and mypy from .venv (the `test` extra) when it has them, else from PATH; clang-format from
# Debian (scripts/setup-common.sh). A missing tool is a finding, not a skip.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=.venv/bin/python
[ -x "$PY" ] || PY=python3
tool() { if [ -x ".venv/bin/$1" ]; then echo ".venv/bin/$1"; else echo "$1"; fi; }
rc=0
check() {
    echo "== $*"
    "$@" || { echo "!! failed: $*"; rc=1; }
}
check "$(tool ruff)" check .
check "$(tool ruff)" format --check .
check "$PY" scripts/typecheck.py
check clang-format --dry-run -Werror firmware_templates/*.h firmware_templates/*.c
[ "$rc" -eq 0 ] && echo "lint: clean" || echo "lint: findings (see above)"
exit "$rc"
