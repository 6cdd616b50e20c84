"""Which configuration to deploy: a grid of conversions, each measured on held-out sequences, and its
Pareto front of accuracy against cost.

:func:`sweep` converts every model at every point of a grid (target, quantize mode, state and weight
widths, widening threshold, realization, preference), runs each artifact on sequences that were not
used to calibrate it, and records the task metric (with labels) or the SQNR against the float source
model, the flash, the RAM and, for C, the instructions per step on the chosen core (exact, QEMU
``-icount``). A point that a target does not offer (``--quantize int16`` for TFLite) is listed as such,
not run; options a target or mode does not take are dropped from its point (so a float point has no
state width), and points that become the same are run once.

The work runs on :mod:`lmu_edge.executor` (in this process with ``workers=0``, else on Ray). Results are
cached by content: the model file's bytes, the point, the data, the device, and a hash of lmu-edge's own
source files (not its version string), so a repeated or extended sweep only does new work.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import math
import os
import shlex
import tempfile
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

from .errors import LmuEdgeError

#: the grid's keys, in the order a point and its convert command list them
KEYS = ("target", "quantize", "state_bits", "weight_bits", "widen_db", "realization", "prefer")
#: targets a sweep converts for (each has quantized modes or costs worth comparing)
TARGETS = ("c", "tflite", "onnx", "ir")
#: what ``lmu-edge sweep`` explores without ``--grid``
DEFAULT_GRID = {"target": ["c"], "quantize": ["int8", "int16x8", "int16"], "prefer": ["ops", "flash"]}
#: the cores a C point's instructions are counted on (the device's core, else the M4)
CORES = ("m4", "m0")
#: a point within this much of the best metric among those that fit counts as "as good" (accuracy 1 point or
#: one standard error, NRMSE 2 % relative, SQNR 1 dB): :func:`as_good`
AS_GOOD = {"accuracy": 0.01, "nrmse": 0.02, "sqnr_db": 1.0}


class SweepError(LmuEdgeError, ValueError):
    """A grid, data or option the sweep cannot use."""


# --- the grid ---------------------------------------------------------------------------------------
def _value(key: str, text: str):
    from .folding import PREFERENCES, REALIZATIONS

    t = text.strip()
    if key in ("state_bits", "weight_bits", "widen_db") and t in ("default", ""):
        return None
    if key == "target":
        if t not in TARGETS:
            raise SweepError(f"--grid target={t}: not a target a sweep converts for; choose from {', '.join(TARGETS)}")
        return t
    if key == "quantize":
        if t not in ("float", "int8", "int16x8", "int16"):
            raise SweepError(f"--grid quantize={t}: choose from float, int8, int16x8, int16")
        return t
    if key in ("state_bits", "weight_bits"):
        lo, hi = (8, 32) if key == "state_bits" else (2, 16)
        if not t.isdigit() or not lo <= int(t) <= hi:
            raise SweepError(f"--grid {key}={t}: a whole number from {lo} to {hi}, or default")
        return int(t)
    if key == "widen_db":
        if t in ("null", "none"):
            return "null"
        try:
            v = float(t)
        except ValueError:
            v = float("nan")
        if not math.isfinite(v) or not 0 <= v <= 200:
            raise SweepError(f"--grid widen_db={t}: a number of dB from 0 to 200, null (widen nothing) or default")
        return v
    if key == "realization":
        if t not in REALIZATIONS:
            raise SweepError(f"--grid realization={t}: choose from {', '.join(REALIZATIONS)}")
        return t
    if t not in PREFERENCES:
        raise SweepError(f"--grid prefer={t}: choose from {', '.join(PREFERENCES)}")
    return t


def parse_grid(specs) -> dict:
    """``["quantize=int8,int16x8", "state_bits=12,16"]`` -> ``{key: [values]}`` over :data:`DEFAULT_GRID`.

    Each spec is ``KEY=V1,V2,...``; a key given twice is refused; ``default`` stands for the target's
    own default of a width or threshold."""
    grid = {k: list(v) for k, v in DEFAULT_GRID.items()} if not specs else {}
    seen = set()
    for spec in specs or ():
        key, eq, values = str(spec).partition("=")
        key = key.strip().replace("-", "_")
        if not eq or key not in KEYS:
            raise SweepError(f"--grid {spec!r}: expected KEY=V1,V2,... with KEY one of {', '.join(KEYS)}")
        if key in seen:
            raise SweepError(f"--grid {key} is given twice; list its values once: {key}=V1,V2")
        seen.add(key)
        vals = [_value(key, v) for v in values.split(",")]
        grid[key] = list(dict.fromkeys(vals))  # once each, in the order given
    grid.setdefault("target", ["c"])
    grid.setdefault("quantize", ["int8"])
    return grid


def points(grid: dict) -> tuple:
    """``(points, not_offered)``: the distinct points of ``grid`` each target can convert (options it
    does not take dropped), and the combinations a target does not offer, as ``(point, why)``."""
    from .registry import target as target_module

    out, skipped, seen = [], [], set()
    keys = [k for k in KEYS if k in grid]
    for combo in itertools.product(*(grid[k] for k in keys)):
        p = {k: v for k, v in zip(keys, combo, strict=True) if v is not None}
        mod = target_module(p["target"])
        if p["quantize"] not in mod.QUANTIZE:
            skipped.append((p, f"{p['target']} offers --quantize {', '.join(mod.QUANTIZE)}"))
            continue
        takes = set(getattr(mod, "OPTIONS", {}))
        for k in ("state_bits", "weight_bits", "widen_db"):
            if k in p and (k not in takes or p["quantize"] == "float"):
                del p[k]
        key = json.dumps(p, sort_keys=True)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out, skipped


def command(model, point: dict, device: Optional[str], out: str = "OUT", calibration: str = "calibration.npy") -> str:
    """The ``lmu-edge convert`` command that builds this point's artifact into ``out``, calibrated on the
    sweep's ``calibration.npy``."""
    argv = ["lmu-edge", "convert", str(model), "--target", point["target"], "--quantize", point["quantize"]]
    if point["quantize"] != "float":
        argv += ["--calibration", calibration]
    for k in ("state_bits", "weight_bits"):
        if k in point:
            argv += ["--" + k.replace("_", "-"), str(point[k])]
    if "widen_db" in point:
        argv += ["-O", f"widen_db={point['widen_db']:g}" if point["widen_db"] != "null" else "widen_db=null"]
    for k in ("realization", "prefer"):
        if k in point:
            argv += [f"--{k}", point[k]]
    if device and point["target"] == "c":
        argv += ["--device", device]
    return shlex.join(argv + ["-o", out])


# --- one point ---------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def source_hash() -> str:
    """SHA-256 over lmu-edge's own source files (Python, templates, C headers), read once per process
    (when its code was imported): a cached result is reused only by the same code, whatever its version
    string says, and a worker whose source differs from the driver's refuses its tasks."""
    import importlib

    names = ("lmu_edge", "lmu_edge.converters", "lmu_edge.targets", "lmu_edge.firmware_templates")
    return tree_hash((name, Path(root)) for name in names for root in importlib.import_module(name).__path__)


def tree_hash(packages) -> str:
    """SHA-256 over the source files under each ``(name, root)`` of ``packages``, at every depth: sub-packages
    (lmu_edge/audio) and template folders (firmware_templates/kit) too. Under ``lmu_edge`` the three packages
    an install puts inside it are skipped (hashed under their own names), so a checkout and an install of
    the same source hash alike."""
    h = hashlib.sha256()
    for name, root in packages:
        for f in sorted(root.rglob("*")):
            rel = f.relative_to(root)
            if name == "lmu_edge" and rel.parts[0] in ("converters", "targets", "firmware_templates"):
                continue
            if f.is_file() and f.suffix in (".py", ".j2", ".h", ".c", ".ld"):
                h.update(f"{name}/{rel.as_posix()}\0".encode())
                h.update(f.read_bytes())
    return h.hexdigest()


def devices() -> dict:
    """The device profiles (flash, RAM, core) the C target declares, asked through the registry."""
    from .registry import target

    return target("c").DEVICES


def _core(device: Optional[str]) -> str:
    if device is None:
        return "m4"
    DEVICES = devices()

    return "m0" if DEVICES[device]["cpu"] == "cortex-m0" else "m4"


def evaluate_point(model, point, x_cal, x_eval, y_ref, labels, device, src) -> dict:
    """Convert ``model`` at ``point`` (calibrated on ``x_cal``), run it on ``x_eval`` and measure it
    against ``y_ref`` (the float source model's outputs) and ``labels``. Runs where a worker runs it."""
    from .conversion import convert
    from .metrics import sqnr_db
    from .report import task_metric

    if src != source_hash():
        return {"status": "failed", "error": "this worker runs other lmu-edge source than the driver: install the same"}
    opts: dict = {k: point[k] for k in ("state_bits", "weight_bits", "realization", "prefer") if k in point}
    if "widen_db" in point:
        opts["widen_db"] = None if point["widen_db"] == "null" else point["widen_db"]
    if device and point["target"] == "c":
        opts["device"] = device
    if point["target"] == "c":
        opts["prefix"] = "sweep"
    with tempfile.TemporaryDirectory(prefix="lmu-edge-sweep-") as tmp:
        try:
            art = convert(
                model,
                target=point["target"],
                out_dir=Path(tmp) / "a",
                quantize=point["quantize"],
                calibration=x_cal if point["quantize"] != "float" else None,
                **opts,
            )
            y = np.asarray(art.run(x_eval), np.float64)
        except LmuEdgeError as e:
            msg = " ".join(str(e).split())
            status = "failed" if "failed inside lmu-edge" in msg else "refused"
            return {"status": status, "error": msg[:400]}
        rep = json.loads((Path(tmp) / "a" / "report.json").read_text())
    row: dict = next((t for t in rep.get("targets", []) if t.get("target") == point["target"]), {})
    core = _core(device)
    c = rep.get("c") or {}
    res: dict[str, Any] = {
        "status": "ok",
        "sqnr_db": _finite(sqnr_db(y, y_ref)),
        "metric": task_metric(y, labels)["value"] if labels is not None else None,
        "flash_bytes": c.get(f"flash_bytes_{core}", row.get("flash_bytes")),
        "ram_bytes": row.get("ram_bytes", c.get("ram_bytes")),
        "instructions_per_step": row.get(f"instructions_per_step_{core}"),
        "core": core if point["target"] == "c" else None,
        "realizations": sorted({str(r.get("realization")) for r in rep.get("realizations", []) if isinstance(r, dict)}),
    }
    if not np.all(np.isfinite(y)):
        res.update(status="failed", error="the artifact's outputs are not finite")
    return res


def _finite(v) -> Optional[float]:
    v = float(v)
    return v if math.isfinite(v) else (999.0 if v > 0 else None)


# --- the whole sweep ---------------------------------------------------------------------------------
def _digest(*parts) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else json.dumps(p, sort_keys=True).encode())
        h.update(b"\0")
    return h.hexdigest()


def _array_digest(a) -> bytes:
    if a is None:
        return b"none"
    a = np.ascontiguousarray(a)
    return hashlib.sha256(str((a.dtype.str, a.shape)).encode() + a.tobytes()).digest()


def split(n: int, calibration: Optional[int] = None, seed: int = 0) -> tuple:
    """Indices ``(calibration, evaluation)`` of ``n`` sequences: a seeded permutation, the first
    ``calibration`` (default half, at most 64) calibrate, all the others evaluate."""
    if n < 2:
        raise SweepError(f"--data has {n} sequence(s): a sweep needs at least 2 (calibration and evaluation)")
    k = min(n // 2, 64) if calibration is None else int(calibration)
    if not 1 <= k < n:
        raise SweepError(f"--calibration-count {k}: give 1 to {n - 1} of the {n} sequences")
    order = np.random.default_rng(seed).permutation(n)
    return np.sort(order[:k]), np.sort(order[k:])


def _cost_key(rows: list) -> str:
    """What the front and the recommendation weigh a point by: instructions per step where any point
    has them measured (C), else flash bytes."""
    measured = any(r.get("status") == "ok" and r.get("instructions_per_step") for r in rows)
    return "instructions_per_step" if measured else "flash_bytes"


def pareto(rows: list, metric_key: str, higher_is_better: bool) -> list:
    """Indices of the converted rows not dominated in (metric, cost): no other row is at least as good in
    both and better in one. The cost is :func:`_cost_key`'s; rows without it (TFLite and ONNX, where
    instructions are not measured) are not on the front."""
    ck = _cost_key(rows)

    def good(r):
        return r[metric_key] if higher_is_better else -r[metric_key]

    ok = [i for i, r in enumerate(rows) if r["status"] == "ok" and r.get(metric_key) is not None and r.get(ck)]
    front = []
    for i in ok:
        a = rows[i]
        dominated = any(
            good(rows[j]) >= good(a) and rows[j][ck] <= a[ck] and (good(rows[j]) > good(a) or rows[j][ck] < a[ck])
            for j in ok
        )
        if not dominated:
            front.append(i)
    return front


def as_good(metric_key: str, best: float, n: int) -> float:
    """How far below the best a point may be and still count as good as it: :data:`AS_GOOD`, or one
    standard error of the best accuracy on ``n`` sequences where that is larger (a difference the
    held-out set cannot tell from chance is no reason to pay for it)."""
    if metric_key == "accuracy":
        return max(AS_GOOD["accuracy"], math.sqrt(max(best * (1 - best), 0.0) / max(n, 1)))
    if metric_key == "nrmse":
        return AS_GOOD["nrmse"] * abs(best)
    return AS_GOOD[metric_key]


def recommend(rows: list, metric_key: str, higher_is_better: bool, n_eval: int = 0) -> tuple:
    """``(index, why)``: among the points that fit the device (all, without one) and have a cost, those
    whose metric is within :func:`as_good` of the best; of these the cheapest, and among points within 2 %
    of the cheapest cost the one with the highest SQNR. ``(None, why)`` when no point qualifies."""
    ck = _cost_key(rows)
    ok = [i for i, r in enumerate(rows) if r["status"] == "ok" and r.get(metric_key) is not None and r.get(ck)]
    fit = [i for i in ok if rows[i].get("fits") is not False]
    if not fit:
        return None, "no point converted" if not ok else "no converted point fits the device"
    sign = 1 if higher_is_better else -1
    best = max(fit, key=lambda i: sign * rows[i][metric_key])
    slack = as_good(metric_key, rows[best][metric_key], n_eval)
    near = [i for i in fit if sign * (rows[best][metric_key] - rows[i][metric_key]) <= slack + 1e-12]
    cheapest = min(rows[i][ck] for i in near)
    close = [i for i in near if rows[i][ck] <= 1.02 * cheapest]
    pick = max(close, key=lambda i: (rows[i].get("sqnr_db") or -math.inf, -rows[i][ck]))
    name = {"accuracy": "accuracy", "nrmse": "NRMSE", "sqnr_db": "SQNR"}[metric_key]
    cost = {"instructions_per_step": "instructions per step", "flash_bytes": "flash"}[ck]
    why = (
        f"the fewest {cost} among the {len(near)} point(s) whose {name} is within {slack:.3g} of the best that "
        f"fits ({rows[best][metric_key]:.4g})"
        + (f", then the highest SQNR of the {len(close)} within 2 % of that cost" if len(close) > 1 else "")
    )
    return pick, why


def sweep(
    models,
    x,
    labels=None,
    grid: Optional[dict] = None,
    *,
    device: Optional[str] = None,
    workers: int = 0,
    address: Optional[str] = None,
    cache_dir=None,
    calibration_count: Optional[int] = None,
    progress: Optional[Callable] = None,
    out_dir=None,
) -> dict:
    """Sweep ``models`` (paths) over ``grid`` (:func:`parse_grid`'s dict; default :data:`DEFAULT_GRID`) on
    the sequences ``x`` (N, T, F), split by :func:`split`. Returns the ``sweep.json`` dict: one row per
    model and point (status, metric, SQNR, flash, RAM, instructions, fits, the convert command), the
    Pareto front, and the recommendation with its reason. ``out_dir``: where the sweep's files go (the
    commands name its ``calibration.npy`` and write point ``i`` to ``OUT.point<i>``)."""
    from .executor import run_tasks
    from .loading import load
    from .reference import simulate

    grid = parse_grid(None) if grid is None else grid
    if device is not None:
        DEVICES = devices()

        if device not in DEVICES:
            raise SweepError(f"--device {device}: choose from {', '.join(sorted(DEVICES))}")
    x = np.asarray(x, np.float64)
    cal_idx, eval_idx = split(len(x), calibration_count)
    x_cal, x_eval = x[cal_idx], x[eval_idx]
    lab = None if labels is None else np.asarray(labels)[eval_idx]
    pts, not_offered = points(grid)
    src = source_hash()
    cache = Path(cache_dir) if cache_dir else None
    rows: list = []
    todo: list = []
    for model in models:
        mbytes = Path(model).read_bytes()
        y_ref = np.asarray(simulate(load(model), x_eval), np.float64)
        for p in pts:
            key = _digest(
                hashlib.sha256(mbytes).digest(),
                p,
                _array_digest(x_cal),
                _array_digest(x_eval),
                _array_digest(lab),
                device or "",
                src,
            )
            out = f"{out_dir}.point{len(rows)}" if out_dir else f"OUT.point{len(rows)}"
            cal = str(Path(out_dir) / "calibration.npy") if out_dir else "calibration.npy"
            row = {"model": str(model), "point": p, "key": key, "command": command(model, p, device, out, cal)}
            hit = _cached(cache, key)
            if hit is not None:
                row.update(hit, cached=True)
            else:
                todo.append((len(rows), (str(model), p, x_cal, x_eval, y_ref, lab, device, src)))
            rows.append(row)
    results = run_tasks(evaluate_point, [t for _, t in todo], workers=workers, address=address, progress=progress)
    for (i, _), r in zip(todo, results, strict=True):
        val = r.value if r.value is not None else {"status": "failed", "error": r.error}
        rows[i].update(val, cached=False, attempts=r.attempts, worker=r.worker, seconds=round(r.seconds, 2))
        if r.lost:
            rows[i]["lost"] = r.lost
        if val["status"] in ("ok", "refused"):
            _store(cache, rows[i]["key"], val)
    metric_key = "sqnr_db"
    higher = True
    if lab is not None:
        from .report import task_metric

        probe = task_metric(np.zeros(y_ref.shape), lab)  # which metric the labels give
        metric_key, higher = probe["name"], probe["higher_is_better"]
    _fits(rows, device)
    for r in rows:
        if lab is not None and r.get("status") == "ok":
            r[metric_key] = r.get("metric")
    front = pareto(rows, metric_key, higher)
    pick, why = recommend(rows, metric_key, higher, len(eval_idx))
    return {
        "format": "lmu-edge-sweep",
        "version": 1,
        "models": [str(m) for m in models],
        "grid": grid,
        "device": device,
        "core": _core(device),
        "metric": metric_key,
        "cost": _cost_key(rows),
        "higher_is_better": higher,
        "split": {"calibration": len(cal_idx), "evaluation": len(eval_idx), "seed": 0},
        "rows": rows,
        "not_offered": [{"point": p, "why": w} for p, w in not_offered],
        "pareto": front,
        "recommended": pick,
        "why": why,
        "source_hash": src,
        "new_work": len(todo),
    }


def _fits(rows: list, device: Optional[str]) -> None:
    """``fits`` of every converted row: True / False for C on a device, None where not measured."""
    DEVICES = devices()

    for r in rows:
        if r.get("status") != "ok":
            continue
        if device is None:
            r["fits"] = True
        elif r["point"]["target"] != "c":
            r["fits"] = None
        else:
            d = DEVICES[device]
            r["fits"] = bool((r.get("flash_bytes") or 0) <= d["flash"] and (r.get("ram_bytes") or 0) <= d["ram"])


def _cached(cache: Optional[Path], key: str) -> Optional[dict]:
    if cache is None:
        return None
    f = cache / f"{key}.json"
    try:
        if f.stat().st_size > 1 << 20:
            return None
        v = json.loads(f.read_text())
    except (OSError, ValueError):
        return None
    return v if isinstance(v, dict) and v.get("status") in ("ok", "refused") else None


def _store(cache: Optional[Path], key: str, value: dict) -> None:
    if cache is None:
        return
    cache.mkdir(parents=True, exist_ok=True)
    tmp = cache / f".{key}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(value, sort_keys=True))
    os.replace(tmp, cache / f"{key}.json")


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/lmu-edge/sweep`` (``~/.cache/lmu-edge/sweep``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "lmu-edge" / "sweep"
