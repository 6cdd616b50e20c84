#!/usr/bin/env bash
# Makes (once) .venv-sinabs at the repository root: Sinabs 3.1.3, the second NIR simulator the nir
# target's tests run (runtime "sinabs"). Sinabs pins nir <= 1.0.4 while lmu-edge writes with nir 1.0.8,
# so it cannot share .venv. lmu-edge is not installed there: targets/_nir_sinabs.py, run by this
# Python, imports only numpy, nir, torch and sinabs. Prints the path of its Python last.
# Where .venv exists (scripts/test.sh makes it first), a .pth file puts .venv's packages after this
# environment's own: torch, numpy and matplotlib come from there (27 MB here against 1.1 GB with its own
# torch; CI machines have had 4.1 GB free), and nir 1.0.4, installed here, wins over .venv's 1.0.8.
#   export LMU_EDGE_SINABS_PYTHON=$(bash scripts/sinabs_venv.sh | tail -n 1)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PY="${PYTHON:-python3}"
VENV=.venv-sinabs
STAMP="$VENV/.installed-sinabs-3.1.3"
if [ ! -f "$STAMP" ]; then
    [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
    if [ -x .venv/bin/python ]; then
        main=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
        own=$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
        echo "$main" > "$own/zz-lmu-edge-main-venv.pth"
    fi
    log="$VENV/install.log"
    echo "== installing sinabs 3.1.3 into $VENV" >&2
    if ! "$VENV/bin/python" -m pip install -q --disable-pip-version-check -c scripts/constraints.txt "sinabs==3.1.3" "numpy" >"$log" 2>&1; then
        tail -n 40 "$log" >&2
        echo "installing sinabs into $VENV failed; the whole pip log is in $log" >&2
        exit 1
    fi
    touch "$STAMP"
fi
# every time: .venv (whose torch this environment may use) can have changed since the install
"$VENV/bin/python" -c "import sinabs.nir, nir, torch; assert nir.__version__ == '1.0.4', nir.__version__" >&2
echo "$PWD/$VENV/bin/python"
