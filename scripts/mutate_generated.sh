#!/usr/bin/env bash
# Generated mutants over the Python integer path (docs/testing.md, "Generated mutants").
#
#     scripts/mutate_generated.sh [MODULE] [SAMPLE] [SEED]
#
# MODULE  a file of the checkout (default lmu_edge/fixedpoint.py); SAMPLE  how many of its mutants to run,
# drawn with SEED (default 57), 0 for all of them (default 0). cosmic-ray mutates files in place, so this
# script clones the checkout into a work folder of its own (WORK, default a new temporary folder), builds the
# installed layout there as links (scripts/typecheck.py's tree: converters/, targets/, firmware_templates/
# become lmu_edge.converters ...) and runs the tests from it with that tree first on the path. The checkout
# itself is never touched. The session database (WORK/session.sqlite) resumes: run the script again with the
# same WORK to finish an interrupted run. cosmic-ray is not in any extra (no test imports it):
#     .venv/bin/pip install cosmic-ray==8.7.0
# PART (set in the case list for a module sampled in part): the top-level names (functions, constants) whose
# mutants are drawn; the module's other mutants are skipped ("outside PART"), with the sample or without.
# Each test command is the module's covering specification tests (TESTS below), -x, under nice, hypothesis
# derandomized (CI=true, the profile in tests/conftest.py). bash reads a script while it runs it, so in a tree
# others edit, run a copy: ROOT=CHECKOUT bash COPY MODULE ... (an edit under a running script broke one).
set -euo pipefail
ROOT=${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}  # ROOT: the checkout, when this script runs from a copy
PY=${PY:-$ROOT/.venv/bin/python}
MODULE=${1:-lmu_edge/fixedpoint.py}
SAMPLE=${2:-0}
SEED=${3:-57}
WORK=${WORK:-$(mktemp -d)}
TIMEOUT=${TIMEOUT:-60}
PART=""

case "$MODULE" in
  lmu_edge/fixedpoint.py) TESTS="tests/test_specs_fixedpoint.py tests/test_fixedpoint.py tests/test_specs_generated.py" ;;
  lmu_edge/qir.py) TESTS="tests/test_specs_qir_checks.py tests/test_specs_fixedpoint.py tests/test_specs_proofs.py tests/test_specs_saturation.py tests/test_specs_generated.py" ;;
  lmu_edge/quantization.py|lmu_edge/qlinear.py|lmu_edge/widening.py|lmu_edge/rounding.py)
    TESTS="tests/test_specs_quantize_report.py tests/test_specs_quantizer.py tests/test_specs_quantize_choices.py tests/test_specs_quantize_ranges.py tests/test_quantize.py" ;;
  lmu_edge/_quantization_memory.py)
    TESTS="tests/test_specs_state_fit.py tests/test_specs_quantizer.py tests/test_specs_quantize_choices.py tests/test_specs_quantize_ranges.py tests/test_quantize.py" ;;
  lmu_edge/intsim.py) TESTS="tests/test_quantize.py tests/test_specs_saturation.py tests/test_specs_quantize_choices.py tests/test_specs_quantize_ranges.py" ;;
  targets/c_layers.py) TESTS="tests/test_specs_c_layers.py" ;;
  targets/c_codegen.py|targets/c_proofs.py)
    TESTS="tests/test_specs_codegen_flags.py tests/test_specs_codegen_c.py tests/test_specs_proofs.py tests/test_specs_saturation.py tests/test_specs_c_layers.py" ;;
  targets/_tflite_gptq.py) TESTS="tests/test_specs_tflite_gptq.py" ;;
  targets/_tflite_mixed.py) TESTS="tests/test_specs_tflite_mixed.py" ;;
  targets/_tflite_build.py)  # the quantized post-processing of a conversion; the step model is the float tests'
    TESTS="tests/test_specs_tflite_mixed.py"
    PART="convert_int8_pair _SAME_SCALE _FIXED_SCALE widen_int16_ranges _rescale_fc_bias _range tie_state_scales" ;;
  targets/onnx.py) TESTS="tests/test_specs_onnx_qdq.py tests/test_specs_onnx_step.py tests/test_specs_quantize_ranges.py tests/test_onnx_contract.py" ;;
  *) echo "mutate_generated.sh: no covering tests chosen for $MODULE yet: add it to the case list" >&2; exit 2 ;;
esac

CLONE=$WORK/clone
[ -d "$CLONE" ] || git clone -q "$ROOT" "$CLONE"
TREE=$CLONE/build/mut-tree
(cd "$CLONE" && "$PY" -c "import sys; from pathlib import Path; sys.path.insert(0, 'scripts'); import typecheck; typecheck.build_tree(Path('.').resolve(), Path('$TREE'))")
# PYTHONSAFEPATH: the clone's own lmu_edge/ (no targets/ inside) must not shadow the tree, and nothing may fall
# back to the editable install; no bytecode: a same-size mutant written within a second must not reuse a .pyc.
ENVS="CI=true PYTHONSAFEPATH=1 PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$TREE"
(cd "$CLONE" && env $ENVS "$PY" -c "import lmu_edge.targets.c as c, sys; sys.exit(not c.__file__.startswith('$TREE'))") \
  || { echo "mutate_generated.sh: lmu_edge does not import from the clone's tree" >&2; exit 1; }

CONFIG=$WORK/cosmic-ray.toml
cat > "$CONFIG" <<TOML
[cosmic-ray]
module-path = "$MODULE"
timeout = $TIMEOUT.0
excluded-modules = []
test-command = "env $ENVS nice -n 19 $PY -m pytest -x -q -p no:nengo -p no:cacheprovider $TESTS"
[cosmic-ray.distributor]
name = "local"
TOML
DB=$WORK/session.sqlite
CR=$(dirname "$PY")
cd "$CLONE"
if [ ! -f "$DB" ]; then
  "$CR/cosmic-ray" init "$CONFIG" "$DB"
  if [ "$SAMPLE" != 0 ] || [ -n "$PART" ]; then
    "$PY" - "$DB" "$SAMPLE" "$SEED" "$MODULE" "$PART" <<'PYEOF'
import ast
import random
import sys

from cosmic_ray.work_db import WorkDB, use_db
from cosmic_ray.work_item import WorkerOutcome, WorkResult

db_path, n, seed, module, part = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5].split()
spans = []  # the lines of PART's top-level definitions
for node in ast.parse(open(module).read()).body:
    names = [node.name] if hasattr(node, "name") else [t.id for t in getattr(node, "targets", []) if hasattr(t, "id")]
    if set(names) & set(part):
        spans.append((node.lineno, node.end_lineno))
if part and len(spans) != len(part):
    sys.exit(f"mutate_generated.sh: PART names {len(part)} definitions, {len(spans)} found in {module}")
with use_db(db_path, WorkDB.Mode.open) as db:
    # job ids are random (uuid4): draw from the mutants in source order, so a seed names the same sample
    items = sorted(db.pending_work_items, key=lambda w: [(str(m.module_path), m.start_pos, m.operator_name, m.occurrence) for m in w.mutations])
    total = len(items)
    inside = [w for w in items if not part or any(a <= w.mutations[0].start_pos[0] <= b for a, b in spans)]
    ids = [item.job_id for item in inside]
    for job in {w.job_id for w in items} - set(ids):
        db.set_result(job, WorkResult(worker_outcome=WorkerOutcome.SKIPPED, output="outside PART"))
    keep = set(random.Random(seed).sample(ids, min(n, len(ids)))) if n else set(ids)
    for job in ids:
        if job not in keep:
            db.set_result(job, WorkResult(worker_outcome=WorkerOutcome.SKIPPED, output="not in the seeded sample"))
print(f"sampled {len(keep)} of {len(ids)} mutants (seed {seed})" + (f", PART: {len(ids)} of the module's {total}" if part else ""))
PYEOF
  fi
fi
time nice -n 19 "$CR/cosmic-ray" exec "$CONFIG" "$DB"
"$CR/cr-report" "$DB" --show-output | tail -n 4
echo "session: $DB (cr-report $DB --show-output lists every survivor with its diff)"
