#!/usr/bin/env bash
# Sets up everything the test suite needs on a fresh machine and runs every test.
#   bash scripts/test.sh                 (as root, or with sudo, where Debian packages are missing)
#   bash scripts/test.sh -m "not slow"   extra arguments go to the main pytest run
# Installs: the C toolchains and QEMU (Debian), .venv with lmu-edge[test,keras] (TensorFlow and
# keras-lmu build the models the converter is checked against), then runs pytest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/setup-common.sh

apt_install "${C_TARGET_PACKAGES[@]}" "${REPORT_TEST_PACKAGES[@]}"
make_venv "test,keras,nengo"

echo "== pytest"
set +e
.venv/bin/python -m pytest "$@"
rc=$?
set -e
if [ $rc -eq 5 ]; then
    echo "pytest collected no tests (exit 5)"
    exit 1
fi
if [ $rc -eq 0 ] && [ -f scripts/numpy1_tests.sh ]; then
    echo "== tests in the numpy<2 environment"
    bash scripts/numpy1_tests.sh || rc=$?
fi
exit $rc
