#!/usr/bin/env bash
# Sets up everything the test suite needs on a fresh machine and runs every test.
#   bash scripts/test.sh            (as root, or with sudo available, where apt packages are missing)
#   bash scripts/test.sh -m "not slow"  extra arguments go to pytest
# It installs: the Debian packages the target tests run (none needed yet beyond python3-venv),
# a virtual environment .venv with lmu-edge and its test extras.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

APT_PACKAGES=()   # toolchains, QEMU and chromium join here as their targets land

apt_install() {
    local missing=()
    for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
    [ ${#missing[@]} -eq 0 ] && return 0
    local SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    echo "== apt-get install ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
if [ ${#APT_PACKAGES[@]} -gt 0 ]; then apt_install "${APT_PACKAGES[@]}"; fi

PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    echo "== creating .venv"
    "$PY" -m venv .venv
fi
echo "== installing lmu-edge[test] into .venv"
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[test]"

echo "== pytest"
set +e
.venv/bin/python -m pytest "$@"
rc=$?
set -e
if [ $rc -eq 5 ]; then
    echo "pytest collected no tests (exit 5)"
    exit 1
fi
exit $rc
