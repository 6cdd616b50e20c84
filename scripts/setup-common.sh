# Shared by scripts/quickstart.sh and scripts/test.sh: Debian packages and the project's virtual environment.
# Source it; it defines apt_install and make_venv.

apt_install() {
    local missing=()
    for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
    [ ${#missing[@]} -eq 0 ] && return 0
    local SUDO=""
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
            echo "missing Debian packages: ${missing[*]}; run this script as root (or install them) first" >&2
            return 1
        fi
    fi
    echo "== apt-get install ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# the C target: host compiler, ARM cross compiler with newlib, and QEMU for Cortex-M
C_TARGET_PACKAGES=(gcc make binutils gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm)
# the report test opens the HTML page in a real browser
REPORT_TEST_PACKAGES=(chromium)
# the keyword-spotting example synthesizes its speech (training: espeak-ng; held-out test: flite; the FSDD
# stream's extra negatives: Festival, one voice here for its test)
KWS_PACKAGES=(espeak-ng flite festival festvox-kdlpc16k)
# scripts/lint.sh and the pre-commit hooks: the C style check of firmware_templates (ruff, mypy come from pip)
LINT_PACKAGES=(clang-format)

make_venv() {   # make_venv EXTRAS   (e.g. "test,keras")
    local PY="${PYTHON:-python3}"
    if [ ! -x .venv/bin/python ]; then
        echo "== creating .venv"
        "$PY" -m venv .venv
    fi
    echo "== installing lmu-edge${1:+[$1]} into .venv"
    .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
    .venv/bin/python -m pip install -q --disable-pip-version-check -c scripts/constraints.txt -e ".${1:+[$1]}"
}
