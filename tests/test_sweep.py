"""``lmu-edge sweep`` (issue 58): the grid, the Pareto front and the recommendation as specifications; a
sweep in this process against the same sweep on a local two-worker Ray cluster (identical results, and
every point back after a worker is killed mid-sweep); the cache; the printed command reproducing the
recommended point."""

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import lmu_edge_cli
from hypothesis import given
from hypothesis import strategies as st

from lmu_edge import sweep as sw
from lmu_edge.executor import run_tasks

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "examples" / "models" / "keras_digits.keras"
X = np.load(ROOT / "examples" / "models" / "keras_digits_test_x.npy")[:40]
Y = np.load(ROOT / "examples" / "models" / "keras_digits_test_y.npy")[:40]
GRID = ["quantize=int8,int16x8", "state_bits=12,16"]  # 4 C points
MEASURED = ("status", "accuracy", "sqnr_db", "flash_bytes", "ram_bytes", "instructions_per_step", "fits")


def _numbers(data):
    return [(json.dumps(r["point"], sort_keys=True), tuple(r.get(k) for k in MEASURED)) for r in data["rows"]]


# --- the grid ----------------------------------------------------------------------------------------
def test_grid_points_drop_options_a_target_does_not_take_and_list_modes_it_does_not_offer():
    g = sw.parse_grid(["target=c,tflite,onnx", "quantize=float,int16", "state_bits=12,16"])
    pts, skipped = sw.points(g)
    assert {json.dumps(p, sort_keys=True) for p in pts} == {
        json.dumps(p, sort_keys=True)
        for p in [
            {"target": "c", "quantize": "float"},  # a float point has no state width: 12 and 16 are one point
            {"target": "c", "quantize": "int16", "state_bits": 12},
            {"target": "c", "quantize": "int16", "state_bits": 16},
            {"target": "tflite", "quantize": "float"},
            {"target": "onnx", "quantize": "float"},
        ]
    }
    assert len(pts) == 5
    assert sorted((p["target"], p["state_bits"]) for p, _ in skipped) == [
        ("onnx", 12),
        ("onnx", 16),
        ("tflite", 12),
        ("tflite", 16),
    ]
    assert all("offers --quantize" in why for _, why in skipped)


@pytest.mark.parametrize(
    "spec, says",
    [
        ("quantize=int4", "choose from float, int8"),
        ("state_bits=7", "8 to 32"),
        ("weight_bits=x", "2 to 16"),
        ("widen_db=inf", "number of dB"),
        ("realization=magic", "choose from auto"),
        ("target=nengo", "choose from c, tflite"),
        ("colour=red", "KEY=V1,V2"),
        ("prefer", "KEY=V1,V2"),
    ],
)
def test_a_bad_grid_is_one_line_naming_the_key_and_the_choices(spec, says):
    with pytest.raises(sw.SweepError) as e:
        sw.parse_grid([spec])
    assert says in str(e.value) and "\n" not in str(e.value)


def test_a_key_given_twice_is_refused():
    with pytest.raises(sw.SweepError, match="given twice"):
        sw.parse_grid(["quantize=int8", "quantize=int16"])


# --- the front and the recommendation, over random rows ----------------------------------------------
row = st.fixed_dictionaries(
    {
        "status": st.sampled_from(["ok", "ok", "ok", "refused"]),
        "accuracy": st.integers(0, 20).map(lambda v: v / 20),
        "sqnr_db": st.floats(0, 60),
        "instructions_per_step": st.integers(1, 50).map(float),
        "flash_bytes": st.integers(100, 9000),
        "fits": st.sampled_from([True, True, False]),
    }
)


@given(st.lists(row, min_size=1, max_size=14))
def test_the_front_is_exactly_the_undominated_points(rows):
    front = set(sw.pareto(rows, "accuracy", True))
    ok = [i for i, r in enumerate(rows) if r["status"] == "ok"]

    def dominates(a, b):
        return (
            a["accuracy"] >= b["accuracy"]
            and a["instructions_per_step"] <= b["instructions_per_step"]
            and (a["accuracy"] > b["accuracy"] or a["instructions_per_step"] < b["instructions_per_step"])
        )

    for i in ok:
        assert (i in front) == (not any(dominates(rows[j], rows[i]) for j in ok)), (i, rows)
    assert front <= set(ok)


@given(st.lists(row, min_size=1, max_size=14), st.integers(10, 1000))
def test_the_recommendation_fits_is_as_good_as_the_best_and_is_the_cheapest_such(rows, n):
    pick, why = sw.recommend(rows, "accuracy", True, n)
    fit = [i for i, r in enumerate(rows) if r["status"] == "ok" and r["fits"]]
    if not fit:
        assert pick is None and why
        return
    best = max(rows[i]["accuracy"] for i in fit)
    slack = sw.as_good("accuracy", best, n)
    assert rows[pick]["fits"] and rows[pick]["status"] == "ok"
    assert rows[pick]["accuracy"] >= best - slack - 1e-12
    near = [i for i in fit if rows[i]["accuracy"] >= best - slack - 1e-12]
    assert rows[pick]["instructions_per_step"] <= 1.02 * min(rows[i]["instructions_per_step"] for i in near)


def test_the_slack_is_one_standard_error_of_the_best_accuracy_at_least_a_point():
    assert sw.as_good("accuracy", 0.9, 10000) == 0.01
    assert sw.as_good("accuracy", 0.9, 100) == pytest.approx(0.03)  # sqrt(0.09 / 100)
    assert sw.as_good("sqnr_db", 40.0, 5) == 1.0


def test_the_executor_returns_every_task_in_order_with_its_own_error():
    res = run_tasks(divmod, [(7, 2), (1, 0), (9, 3)])
    assert [r.value for r in res] == [(3, 1), None, (3, 0)]
    assert res[1].error.startswith("ZeroDivisionError") and res[1].attempts == 1


def test_results_are_handed_over_as_each_task_finishes():
    seen = []
    res = run_tasks(divmod, [(7, 2), (9, 3)], on_result=lambda i, r: seen.append((i, r.value)))
    assert seen == [(0, (3, 1)), (1, (3, 0))] and [r.value for r in res] == [(3, 1), (3, 0)]


def test_an_address_nothing_answers_on_is_one_line_at_once():
    import socket
    import time as _time

    from lmu_edge.executor import ExecutorError

    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = _time.perf_counter()
    with pytest.raises(ExecutorError, match="nothing answers there") as e:
        run_tasks(divmod, [(1, 1)], address=f"127.0.0.1:{port}")
    assert _time.perf_counter() - t0 < 10 and "\n" not in str(e.value) and "ray start --head" in str(e.value)
    with pytest.raises(ExecutorError, match="HOST:PORT"):
        run_tasks(divmod, [(1, 1)], address="no-port-here")


# --- real sweeps ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def here(tmp_path_factory):
    """The small grid in this process, its results cached."""
    cache = tmp_path_factory.mktemp("cache")
    data = sw.sweep([MODEL], X, Y, sw.parse_grid(GRID), workers=0, cache_dir=cache)
    return data, cache


@pytest.mark.slow
def test_in_process_sweep_converts_every_point_and_a_repeat_does_no_new_work(here):
    data, cache = here
    assert [r["status"] for r in data["rows"]] == ["ok"] * 4, [r.get("error") for r in data["rows"]]
    assert data["new_work"] == 4 and data["split"] == {"calibration": 20, "evaluation": 20, "seed": 0}
    assert all(r["instructions_per_step"] > 1000 and r["flash_bytes"] > 1000 for r in data["rows"])
    again = sw.sweep([MODEL], X, Y, sw.parse_grid(GRID), workers=0, cache_dir=cache)
    assert again["new_work"] == 0 and all(r["cached"] for r in again["rows"])
    assert _numbers(again) == _numbers(data)
    extended = sw.sweep([MODEL], X, Y, sw.parse_grid(GRID + ["prefer=ops"]), workers=0, cache_dir=cache)
    assert extended["new_work"] == 4  # a new option is a new point: its key differs


def _descends_from_us(pid: int) -> bool:
    """Whether ``pid`` is a descendant of this test process (the local Ray instance it started: raylet and
    its workers), not a worker of some other Ray on the machine."""
    me = os.getpid()
    while pid > 1:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat.rsplit(")", 1)[1].split()[1])  # the parent's pid
        if pid == me:
            return True
    return False


def _kill_a_busy_worker(stop: threading.Event, killed: list):
    """SIGKILL the first worker of this test's Ray seen running a task (its process title is ray::_call)."""
    while not stop.is_set() and not killed:
        ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
        for line in ps.splitlines():
            if "ray::_call" in line and "grep" not in line and _descends_from_us(int(line.split()[0])):
                pid = int(line.split()[0])
                time.sleep(1.0)  # well inside the task (a conversion takes seconds)
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                return
        time.sleep(0.2)


@pytest.mark.slow
def test_two_ray_workers_give_the_in_process_results_even_when_one_is_killed(here):
    import ray  # noqa: F401 - imported to fail here when the test extra lacks ray

    data, _ = here
    stop, killed = threading.Event(), []
    t = threading.Thread(target=_kill_a_busy_worker, args=(stop, killed))
    t.start()
    try:
        hurt = sw.sweep([MODEL], X, Y, sw.parse_grid(GRID), workers=2, cache_dir=None)
    finally:
        stop.set()
        t.join()
    assert killed, "no Ray worker was seen running a task"
    assert _numbers(hurt) == _numbers(data)  # every point, the same numbers as in this process
    assert len({r["worker"] for r in hurt["rows"]}) >= 2  # the points ran on more than one worker process
    retried = [r for r in hurt["rows"] if r["attempts"] > 1]
    assert len(retried) == 1 and "WorkerCrashedError" in retried[0]["lost"][0], [r.get("lost") for r in hurt["rows"]]


@pytest.mark.slow
def test_the_printed_command_reproduces_the_recommended_point(tmp_path, here):
    x, y = tmp_path / "x.npy", tmp_path / "y.npy"
    np.save(x, X)
    np.save(y, Y)
    out = tmp_path / "sweep"
    r = subprocess.run(
        lmu_edge_cli()
        + ["sweep", str(MODEL), "--data", str(x), "--labels", str(y), "--workers", "0", "-o", str(out), "-q"]
        + [a for g in GRID for a in ("--grid", g)]
        + ["--cache", str(here[1])],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    assert "4 points (4 converted, 0 refused, 0 failed), 0 converted now and 4 from the cache" in r.stdout
    data = json.loads((out / "sweep.json").read_text())
    best = data["rows"][data["recommended"]]
    cmd = next(line for line in r.stdout.splitlines() if "reproduce:" in line).split("reproduce: ", 1)[1]
    assert cmd == best["command"] and cmd.startswith("lmu-edge convert ")
    c = subprocess.run(lmu_edge_cli() + cmd.split()[1:] + ["-q"], capture_output=True, text=True, timeout=600)
    assert c.returncode == 0, c.stderr
    art = cmd.split(" -o ")[1]
    run = subprocess.run(
        lmu_edge_cli() + ["run", art, "--input", str(out / "evaluation.npy"), "-o", str(tmp_path / "yhat.npy"), "-q"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr
    yhat = np.load(tmp_path / "yhat.npy")
    labels = np.load(out / "evaluation_labels.npy")
    assert float(np.mean(np.argmax(yhat, -1) == labels)) == best["accuracy"]
    html = (out / "sweep.html").read_text()
    assert "Recommended:" in html and "<svg" in html and best["command"].split(" -o ")[0] in html.replace("&#x27;", "'")


def test_the_source_hash_sees_every_depth_and_only_source(tmp_path):
    # a cached sweep point is reused only by the same source: an edit in a sub-package or in a template folder
    # (firmware_templates/kit, lmu_edge/audio) must change the hash; bytecode and other files must not
    from lmu_edge.sweep import tree_hash

    pkg, fw = tmp_path / "lmu_edge", tmp_path / "fw"
    for path, text in (
        (pkg / "a.py", "a = 1\n"),
        (pkg / "audio" / "b.py", "b = 2\n"),
        (fw / "lmu_runtime.h", "/* rt */\n"),
        (fw / "kit" / "CMakeLists.txt.j2", "project()\n"),
    ):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    packages = [("lmu_edge", pkg), ("lmu_edge.firmware_templates", fw)]
    base = tree_hash(packages)
    assert tree_hash(packages) == base  # deterministic
    (pkg / "audio" / "__pycache__").mkdir()
    (pkg / "audio" / "__pycache__" / "b.cpython-311.pyc").write_bytes(b"\0")
    (fw / "kit" / "notes.md").write_text("not source\n")
    assert tree_hash(packages) == base
    # an install puts the templates inside lmu_edge too: hashed under their own name only, as in a checkout
    (pkg / "firmware_templates").mkdir()
    (pkg / "firmware_templates" / "lmu_runtime.h").write_text("/* rt */\n")
    assert tree_hash(packages) == base
    for path in (pkg / "audio" / "b.py", fw / "kit" / "CMakeLists.txt.j2"):
        before = path.read_text()
        path.write_text(before + "# edited\n")
        assert tree_hash(packages) != base, path
        path.write_text(before)
    assert tree_hash(packages) == base
