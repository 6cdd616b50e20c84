"""``lmu-edge sweep``: which configuration to deploy (:mod:`lmu_edge.sweep` does the work)."""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path

import click

from ._cli_base import quiet_means_quiet


def _devices():
    from .sweep import devices

    return sorted(devices())


def _bar(quiet: bool):
    """The progress callback: a bar with the time left and per-worker counts on a terminal, plain lines
    otherwise, nothing with --quiet."""
    if quiet:
        return None
    tty = sys.stderr.isatty()

    def show(done, total, left, per_worker):
        eta = "?" if not math.isfinite(left) else time.strftime("%M:%S", time.gmtime(left))
        workers = " ".join(f"{w.rsplit(':', 1)[-1]}:{n}" for w, n in sorted(per_worker.items()))
        if tty:
            fill = int(30 * done / max(total, 1))
            click.echo(
                f"\r[{'#' * fill}{'.' * (30 - fill)}] {done}/{total} points, {eta} left, workers {workers} ",
                err=True,
                nl=done == total,
            )
        else:
            click.echo(f"sweep: {done}/{total} points done, about {eta} left (per worker: {workers})", err=True)

    return show


@click.command()
@click.argument("models", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--data",
    "data_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Sequences (N, T, F): half (at most 64) calibrate each point, the others measure it.",
)
@click.option(
    "--labels",
    "labels_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Labels of --data: integer classes give accuracy, targets NRMSE (default: SQNR vs float).",
)
@click.option(
    "--grid",
    "grid",
    multiple=True,
    metavar="KEY=V1,V2",
    help="Values of one option (repeatable): target, quantize, state_bits, weight_bits, widen_db, "
    "realization, prefer. See docs/sweep.md.",
)
@click.option("--device", type=click.Choice(_devices()), help="Mark the points that fit it; count its core.")
@click.option(
    "--workers",
    type=click.IntRange(0, 256),
    default=None,
    help="Ray workers on this machine (default: one per core); 0 runs in this process without Ray.",
)
@click.option("--address", help="An existing Ray cluster (HOST:PORT or auto) instead of a local one.")
@click.option(
    "--cache",
    "cache_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where results are cached by content (default: ~/.cache/lmu-edge/sweep).",
)
@click.option("--no-cache", is_flag=True, help="Convert every point again.")
@click.option("--calibration-count", type=click.IntRange(1), help="Sequences that calibrate (default: half, <= 64).")
@click.option(
    "--output",
    "-o",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory for sweep.json, sweep.html and the calibration / evaluation split.",
)
@click.option("--force", is_flag=True, help="Replace an earlier lmu-edge output directory.")
@click.option("--quiet", "-q", is_flag=True, help="No progress.")
@quiet_means_quiet
def sweep(
    models,
    data_path,
    labels_path,
    grid,
    device,
    workers,
    address,
    cache_dir,
    no_cache,
    calibration_count,
    out_dir,
    force,
    quiet,
):
    """Convert MODEL... at every point of a grid, measure each on held-out sequences, and print the
    configuration to deploy; sweep.html draws the Pareto front of accuracy against cost."""
    import numpy as np

    from . import outdir
    from . import sweep as sw
    from .arrays import load_array
    from .errors import LmuEdgeError
    from .executor import ray_module
    from .sweep_html import page

    outdir.check_replaceable(out_dir, force)
    g = sw.parse_grid(grid)
    x = load_array(data_path, f"--data {data_path}")
    if x.ndim != 3:
        raise sw.SweepError(f"--data {data_path}: shape {x.shape}: expected (N, T, F) sequences")
    labels = load_array(labels_path, f"--labels {labels_path}") if labels_path else None
    if labels is not None and len(labels) != len(x):
        raise sw.SweepError(f"--labels {labels_path}: {len(labels)} labels for {len(x)} sequences of --data")
    if workers is None:
        workers = 0 if address is None and (os.cpu_count() or 1) < 2 else (os.cpu_count() or 1)
    if workers and address is None:
        try:
            ray_module()
        except LmuEdgeError:
            click.echo("sweep: Ray is not installed (pip install 'lmu-edge[sweep]'): running in this process", err=True)
            workers = 0
    cache = None if no_cache else (cache_dir or sw.default_cache_dir())
    t0 = time.perf_counter()
    data = sw.sweep(
        models,
        x,
        labels,
        g,
        device=device,
        workers=workers,
        address=address,
        cache_dir=cache,
        calibration_count=calibration_count,
        progress=_bar(quiet),
        out_dir=out_dir,
    )
    wall = time.perf_counter() - t0
    cal_idx, eval_idx = sw.split(len(x), calibration_count)
    with outdir.writing(out_dir, force) as tmp:
        np.save(tmp / "calibration.npy", x[cal_idx])
        np.save(tmp / "evaluation.npy", x[eval_idx])
        if labels is not None:
            np.save(tmp / "evaluation_labels.npy", np.asarray(labels)[eval_idx])
        (tmp / "sweep.json").write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        (tmp / "sweep.html").write_text(page(data))
    rows = data["rows"]
    n_ok = sum(r["status"] == "ok" for r in rows)
    n_ref = sum(r["status"] == "refused" for r in rows)
    n_fail = sum(r["status"] == "failed" for r in rows)
    retried = sum(r.get("attempts", 1) > 1 for r in rows)
    click.echo(
        f"wrote {out_dir}: {len(rows)} points ({n_ok} converted, {n_ref} refused, {n_fail} failed), "
        f"{data['new_work']} converted now and {len(rows) - data['new_work']} from the cache, in {wall:.0f} s"
        + (f"; {retried} retried after a worker died" if retried else "")
    )
    if data["recommended"] is None:
        click.echo(f"no recommendation: {data['why']}")
    else:
        r = rows[data["recommended"]]
        m = r.get(data["metric"])
        click.echo(
            f"recommended: {', '.join(f'{k}={v}' for k, v in r['point'].items())} ({data['metric']} {m:.4g}, "
            f"flash {r.get('flash_bytes') or '-'} B, RAM {r.get('ram_bytes') or '-'} B, "
            f"{r.get('instructions_per_step') or '-'} instructions/step)"
        )
        click.echo(f"  why: {data['why']}")
        click.echo(f"  reproduce: {r['command']}")
    if n_fail:
        sys.exit(1)
