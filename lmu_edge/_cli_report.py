"""``lmu-edge report``: the quantization accuracy report of a model on data (``lmu_edge.report`` writes it)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from ._cli_base import BUDGET, TOLERANCE, progress_printer, quiet_means_quiet, target_names


def report_budget(given, targets, quantize, state_bits) -> tuple:
    """``(error budget, why)`` of the ``report`` command: the given one, or the strictest default among
    the targets and the integer reference (the widest state decides, :func:`lmu_edge.folding.default_budget`)."""
    from .folding import default_budget, state_bits_for
    from .registry import target as target_module

    if given is not None:
        return float(given), "given"
    if quantize == "float":
        return default_budget(None)
    widths = {int(state_bits)}  # the integer reference the report quantizes
    for t in targets:
        accepts = getattr(target_module(t), "OPTIONS", {})
        bits = state_bits_for(t, quantize, {"state_bits": state_bits} if "state_bits" in accepts else {})
        if bits is not None:
            widths.add(bits)
    budget, why = default_budget(max(widths))
    if len(widths) > 1:
        why += f" (the widest of the states: {', '.join(f'{b}-bit' for b in sorted(widths))})"
    return budget, why


@click.command()
@click.argument("model", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--data",
    "data_path",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Inputs to evaluate on (.npy / .npz), shape (N, T, F); also the calibration data unless --calibration.",
)
@click.option(
    "--calibration",
    "calibration_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Inputs that calibrate the quantized variants (default: --data), e.g. a deployed artifact's.",
)
@click.option(
    "--labels",
    "labels_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Labels (.npy): integer classes give accuracy, anything else NRMSE.",
)
@click.option(
    "--output",
    "-o",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Directory for report.json, report.html and the artifacts.",
)
@click.option(
    "--target",
    "-t",
    "targets",
    multiple=True,
    default=["c"],
    show_default=True,
    type=click.Choice(target_names()),
    help="Targets to emit and run (repeatable).",
)
@click.option(
    "--quantize",
    default="int8",
    show_default=True,
    type=click.Choice(["float", "float32", "int8", "int16x8", "int16"]),
    help="Number format of the artifacts and the traced integer graph: int8, int16x8, int16 (c) or float.",
)
@click.option(
    "--weight-bits",
    type=click.IntRange(2, 16),
    help="Bits of dense weights: 2..8 (default 8), 2..16 with int16; given, nothing is widened.",
)
@click.option(
    "--state-bits", type=click.IntRange(8, 32), help="Bits of the LMU state (default 16; 32 with --quantize int16)."
)
@click.option(
    "--realization",
    default="auto",
    show_default=True,
    type=click.Choice(["auto", "zoh", "euler", "rk4", "rk2", "rk1", "pade", "pade23", "pade22", "fir"]),
    help="How to run each LMU memory (see convert --help); auto picks the cheapest within the error budget.",
)
@click.option(
    "--error-budget",
    type=BUDGET,
    default=None,
    help="Largest relative impulse-response error of a realization (default: from the widest state).",
)
@click.option(
    "--tolerance",
    type=TOLERANCE,
    help="Pass / fail bound on each target's error against the source model (default: none; the errors are "
    "reported, and the exit is 0).",
)
@click.option(
    "--sweep",
    is_flag=True,
    help="Also sweep weight bits 2..8 against state bits 8..32, with 8-bit activations whatever --quantize (slow).",
)
@click.option(
    "--max-sequences",
    type=click.IntRange(min=1),
    default=64,
    show_default=True,
    help="Evaluate on at most this many sequences of --data.",
)
@click.option("--force", is_flag=True, help="Replace a non-empty output directory.")
@click.option("--quiet", "-q", is_flag=True, help="No progress messages or bars.")
@quiet_means_quiet
def report(
    model,
    data_path,
    calibration_path,
    labels_path,
    out_dir,
    targets,
    quantize,
    weight_bits,
    state_bits,
    realization,
    error_budget,
    tolerance,
    sweep,
    max_sequences,
    force,
    quiet,
):
    """Quantization accuracy report for MODEL on --data: every tensor's error, the error over time,
    each LMU memory's impulse response and poles, task metrics, per-target cost, and with --sweep a
    bit-width sweep. Writes report.json and a self-contained report.html."""
    import warnings

    import lmu_edge

    from . import outdir
    from . import report as rep_mod
    from .arrays import load_array
    from .artifact import QUANTIZE_ALIASES
    from .targets.c import ACTIVATION_BITS, STATE_BITS, WEIGHT_BITS, WIDEN_DB  # the report traces the C target's graph

    quantize = QUANTIZE_ALIASES.get(quantize, quantize)
    state_bits = state_bits or STATE_BITS.get(quantize, 16)
    from .errors import ShapeError
    from .reference import check_input
    from .registry import target as target_module

    for t in targets:  # a mode or an option the target cannot take is refused before any work
        modes = getattr(target_module(t), "QUANTIZE", ())
        if modes and quantize not in modes:
            raise ShapeError(
                f"-t {t} does not take --quantize {quantize} (report's default is int8); it takes "
                f"{', '.join(modes)}: pass --quantize {modes[0]} (in a report run of its own if other targets "
                f"need {quantize})"
            )
        check = getattr(target_module(t), "check_options", None)
        if check is not None and quantize in getattr(target_module(t), "QUANTIZE", ()):
            check(quantize, {"weight_bits": weight_bits})

    outdir.check_replaceable(out_dir, force)
    source = lmu_edge.load(model)
    x, _ = check_input(source, load_array(data_path, f"--data {data_path}"), f"--data {data_path}")
    cal, cal_what = x, f"--data {data_path}"
    if calibration_path is not None:
        cal_what = f"--calibration {calibration_path}"
        cal, _ = check_input(source, load_array(calibration_path, cal_what), cal_what)
    if quantize != "float":  # calibrates the integer reference and the quantized artifacts
        lmu_edge.quantization.check_calibration(cal, cal_what)
    labels = None
    if labels_path is not None:  # checked against all of --data: the --max-sequences cut could hide a mismatch
        expect = (len(x),) if not source.output_is_sequence else (len(x), x.shape[1])
        labels = _labels(
            load_array(labels_path, f"--labels {labels_path}"), expect, source.output_features, labels_path
        )
        labels = labels[:max_sequences]
    n_data = len(x)
    x = x[:max_sequences]
    say = progress_printer(quiet)
    error_budget, budget_why = report_budget(error_budget, targets, quantize, state_bits)
    if say:
        say(f"error budget {error_budget:.3g}: {budget_why}")
    folded = lmu_edge.fold(
        source, realization, error_budget, progress=say, target=tuple(targets), quantized=quantize != "float"
    )
    qg = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if quantize != "float":  # the integer reference the C target would build for this mode
            # int8's widened layers and int16x8's widened weights are the C target's: traced only with c
            widen = None if weight_bits or "c" not in targets else WIDEN_DB.get(quantize)
            qg = lmu_edge.quantize(
                folded,
                cal,
                weight_bits=weight_bits or WEIGHT_BITS.get(quantize, 8),
                state_bits=state_bits,
                activation_bits=ACTIVATION_BITS.get(quantize, 8),
                widen_db=widen,
            )
    for w in caught:
        if say:
            say(f"warning: {w.message}")
    with outdir.writing(out_dir, force) as tmp:
        arts = []
        for t in targets:
            accepts = getattr(target_module(t), "OPTIONS", {})
            opts = {
                k: v
                for k, v in (("weight_bits", weight_bits), ("state_bits", state_bits))
                if k in accepts and quantize != "float" and v is not None
            }
            arts.append(
                lmu_edge.convert(
                    folded if t != "ir" else source,
                    t,
                    tmp / t,
                    quantize=quantize,
                    calibration=cal if quantize != "float" else None,
                    realization=realization,
                    error_budget=error_budget,
                    progress=None,
                    **opts,
                )
            )
        data = rep_mod.analyze(
            source,
            folded,
            qg,
            x,
            labels=labels,
            artifacts=tuple(arts),
            tolerance=tolerance,
            progress=say,
            budget_why=budget_why,
        )
        if sweep:
            grid = [(w, s_) for s_ in (8, 12, 16, 24, 32) for w in range(2, 9)]
            n_sweep = min(16, len(x))
            with click.progressbar(
                length=len(grid), label="bit-width sweep", file=open(os.devnull, "w") if quiet else None, show_pos=True
            ) as bar:
                data["sweep"] = rep_mod.sweep(
                    folded, x[:n_sweep], None if labels is None else labels[:n_sweep], progress=lambda m: bar.update(1)
                )
            if labels is not None:  # the float model on the sweep's own sequences: the line to compare with
                data["sweep_float"] = rep_mod.task_metric(lmu_edge.simulate(folded, x[:n_sweep]), labels[:n_sweep])
            data["sweep_data"] = (
                f"calibrated and evaluated on the first {n_sweep} sequences of --data, with 8-bit activations "
                f"and no widening: compare its cells with each other (its ranges fit {n_sweep} sequences, "
                f"tighter than the headline's calibration on more data, so its SQNRs run higher)"
            )
        data["data_sequences"] = {"evaluated": len(x), "given": n_data, "max_sequences": max_sequences}
        for t in data["targets"]:  # the artifacts move with the directory
            t["path"] = str(out_dir / Path(t["path"]).name)
        rep_mod.write(data, tmp, title=f"{source.name} ({quantize})")
    j, h = out_dir / "report.json", out_dir / "report.html"

    click.echo(f"wrote {j} and {h}")
    click.echo(
        f"evaluated {len(x)} of the {n_data} sequences of --data"
        + (f" (--max-sequences {max_sequences})" if len(x) < n_data else "")
        + (
            (
                "; they calibrate the quantized variants too"
                if calibration_path is None
                else f"; calibrated on {cal_what}"
            )
            if quantize != "float"
            else ""
        )
    )
    click.echo(f"error budget {error_budget:.3g}: {budget_why}")
    for r in data.get("realizations", []):
        err = "not measured (already recurrent)" if r["error"] is None else f"measured error {r['error']:.2e}"
        click.echo(f"  {r['layer']}: {r['realization']}, {err}")
    if data.get("diagnosis"):
        click.echo(data["diagnosis"]["text"])
    for v in data["variants"]:
        metric = f", {v['metric']['name']} {v['metric']['value']:.4f}" if "metric" in v else ""
        sq = "inf" if v["sqnr_db"] is None else f"{v['sqnr_db']:.1f}"
        click.echo(f"  {v['name']:<36} error {v['error_vs_source']:.2e}, SQNR {sq} dB{metric}")
    failed = [t for t in data["targets"] if not t["passed"]]
    if failed:
        click.echo(
            "FAIL: "
            + ", ".join(f"{t['target']} (error {t['error_vs_source']:.3g} > {t['tolerance']:g})" for t in failed),
            err=True,
        )
        sys.exit(1)


def _labels(labels, expect: tuple, n_out: int, path):
    """``--labels`` as class indices of shape ``expect`` (int64) or targets of shape ``expect + (n_out,)``,
    or a one-line ShapeError. Whole-number floats and a trailing axis of one are class indices too (a
    model with one output reads both shapes as its targets)."""
    import numpy as np

    from .errors import ShapeError

    where = f"--labels {path}"
    targets = expect + (n_out,)
    if n_out == 1 and labels.shape in (expect, targets):
        return labels.reshape(targets).astype(np.float64)
    if labels.shape == targets:
        return labels
    if labels.shape == expect + (1,):
        labels = labels.reshape(expect)
    if labels.shape != expect:
        raise ShapeError(
            f"{where}: shape {labels.shape} does not match --data's {expect[0]} sequences: expected class "
            f"indices of shape {expect} or targets of shape {targets}"
        )
    if labels.dtype.kind == "f" and not np.all(labels == np.round(labels)):
        raise ShapeError(
            f"{where}: shape {labels.shape} reads as class indices, but they are not whole numbers; give "
            f"targets of shape {targets} for NRMSE"
        )
    bad = labels[(labels < 0) | (labels >= n_out)]
    if bad.size:
        raise ShapeError(
            f"{where}: class {bad.flat[0]:g} is outside 0..{n_out - 1} (the model has {n_out} outputs); "
            f"{bad.size} of {labels.size} labels are"
        )
    return labels.astype(np.int64)
