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
# the report test opens the HTML page in a real browser; the C kit's tests (tests/test_c_kit.py) build with
# CMake and clang, and for Linux on aarch64 run under qemu-user (these are installed by scripts/test.sh only)
REPORT_TEST_PACKAGES=(chromium cmake clang gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)
# the keyword-spotting example synthesizes its speech (training: espeak-ng; held-out test: flite; the FSDD
# stream's extra negatives: Festival, one voice here for its test)
KWS_PACKAGES=(espeak-ng flite festival festvox-kdlpc16k)
# scripts/lint.sh and the pre-commit hooks: the C style check of firmware_templates (ruff, mypy come from pip)
LINT_PACKAGES=(clang-format)

# lmu-edge's editable install writes lmu_edge.egg-info in the checkout: scripts/test.sh makes .venv and
# .venv-numpy1 at the same time, so the two installs take turns (flock, where there is one)
editable_locked() {
    mkdir -p build
    if command -v flock >/dev/null 2>&1; then flock build/.editable-install.lock "$@"; else "$@"; fi
}

make_venv() {   # make_venv EXTRAS   (e.g. "test,keras")
    local PY="${PYTHON:-python3}" extras="$1"
    # (pip byte-compiles what it installs: about half of the install time, but CI machines set
    # PYTHONDONTWRITEBYTECODE=1, so without it every process compiled TensorFlow again: CI 2026-12-06, --no-compile
    # saved 52 s of set-up and cost 150 s of tests)
    local PIP=(.venv/bin/python -m pip install -q --disable-pip-version-check)
    if [ ! -x .venv/bin/python ]; then
        echo "== creating .venv"
        "$PY" -m venv .venv
    fi
    echo "== installing lmu-edge${extras:+[$extras]} into .venv"
    "${PIP[@]}" --upgrade pip
    # Disk: CI machines have had as little as 4.1 GB free. On Linux x86-64 the keras and tflite extras get
    # TensorFlow's CPU-only wheel (tensorflow-cpu: 1.3 GB installed, against 1.9 GB for the tensorflow wheel,
    # whose GPU kernels no test uses) and keras-lmu without its dependency on the "tensorflow" distribution
    # (it needs only the module, which tensorflow-cpu provides). LMU_EDGE_TF_CPU=0 keeps the plain extras.
    # (an existing .venv that holds the tensorflow wheel keeps it: both wheels write the same package folder)
    if [ "${LMU_EDGE_TF_CPU:-1}" = 1 ] && [ "$(uname -s)-$(uname -m)" = Linux-x86_64 ] &&
        [[ ",$extras," == *,keras,* || ",$extras," == *,tflite,* ]] &&
        ! .venv/bin/python -c "import importlib.metadata as m; m.version('tensorflow')" 2>/dev/null; then
        local lmu=""
        [[ ",$extras," == *,keras,* ]] && lmu="keras-lmu>=0.8"
        extras=$(echo ",$extras," | sed -e 's/,keras,/,/' -e 's/,tflite,/,tflite-runtimes,/' -e 's/^,//' -e 's/,$//')
        editable_locked "${PIP[@]}" -c scripts/constraints.txt tensorflow-cpu -e ".${extras:+[$extras]}"
        # TensorFlow's C++ headers (287 MB) serve only to compile custom operators, which nothing here does
        rm -rf "$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/tensorflow/include"
        # last, and with --no-deps, so that no pip run after it reports the "tensorflow" it does not see
        [ -z "$lmu" ] || "${PIP[@]}" -c scripts/constraints.txt --no-deps "$lmu"
        return 0
    fi
    editable_locked "${PIP[@]}" -c scripts/constraints.txt -e ".${extras:+[$extras]}"
}
