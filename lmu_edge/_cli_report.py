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
    from .folding import default_budget
    from .precision import state_bits as state_bits_of
    from .registry import target as target_module

    if given is not None:
        return float(given), "given"
    if quantize == "float":
        return default_budget(None)
    widths = {int(state_bits)}  # the integer reference the report quantizes
    for t in targets:
        module = target_module(t)
        accepts = getattr(module, "OPTIONS", {})
        bits = state_bits_of(quantize, {"state_bits": state_bits} if "state_bits" in accepts else {}, module)
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
    help="Inputs (.npy / .npz), shape (N, T, F); without --calibration the first half calibrates, the rest is tested.",
)
@click.option(
    "--calibration",
    "calibration_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Inputs that calibrate the quantized variants (default: the first half of --data), e.g. an artifact's.",
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
    default=None,
    help="Evaluate on at most this many sequences (default: all that fit the work budget; the page says how many).",
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

    from . import outdir, report_html
    from . import report as rep_mod
    from .arrays import load_array
    from .artifact import QUANTIZE_ALIASES
    from .precision import ACTIVATION_BITS, DEFAULT_STATE_BITS, STATE_BITS, WEIGHT_BITS, WIDEN_DB

    quantize = QUANTIZE_ALIASES.get(quantize, quantize)
    state_bits = state_bits or STATE_BITS.get(quantize, DEFAULT_STATE_BITS)
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
    labels = None
    if labels_path is not None:  # checked against all of --data: the --max-sequences cut could hide a mismatch
        expect = (len(x),) if not source.output_is_sequence else (len(x), x.shape[1])
        labels = _labels(
            load_array(labels_path, f"--labels {labels_path}"), expect, source.output_features, labels_path
        )
    n_data = len(x)
    split = split_data(n_data, quantize, calibration_path is not None)
    cal, cal_what = x[: split["calibration_sequences"]], f"--data {data_path}"
    if calibration_path is not None:
        cal_what = f"--calibration {calibration_path}"
        cal, _ = check_input(source, load_array(calibration_path, cal_what), cal_what)
    elif split["held_out"]:
        cal_what = f"the first {len(cal)} sequences of --data {data_path}"
    if quantize != "float":  # calibrates the integer reference and the quantized artifacts
        lmu_edge.quantization.check_calibration(cal, cal_what)
    first = split["first_evaluated"]
    n_eval, capped_by = evaluation_count(source, n_data - first, x.shape[1], max_sequences)
    x = x[first : first + n_eval]
    labels = None if labels is None else labels[first : first + n_eval]
    evaluation = describe_split(split, n_eval, n_data, capped_by, data_path, calibration_path, len(cal), quantize)
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
            evaluation=evaluation,
        )
        if sweep:
            grid = [(w, s_) for s_ in (8, 12, 16, 24, 32) for w in range(2, 9)]
            n_sweep, n_sweep_cal = min(SWEEP_SEQUENCES, len(x)), min(SWEEP_SEQUENCES, len(cal))
            with click.progressbar(
                length=len(grid), label="bit-width sweep", file=open(os.devnull, "w") if quiet else None, show_pos=True
            ) as bar:
                data["sweep"] = rep_mod.sweep(
                    folded,
                    x[:n_sweep],
                    None if labels is None else labels[:n_sweep],
                    progress=lambda m: bar.update(1),
                    calibration=cal[:n_sweep_cal],
                )
            if labels is not None:  # the float model on the sweep's own sequences: the line to compare with
                data["sweep_float"] = rep_mod.task_metric(lmu_edge.simulate(folded, x[:n_sweep]), labels[:n_sweep])
            data["sweep_data"] = (
                f"calibrated on the first {n_sweep_cal} calibration sequences and evaluated on the first "
                f"{n_sweep} evaluated ones, with 8-bit activations and no widening: compare its cells with each "
                f"other, not with the headline (fewer sequences, other activations)"
            )
        data["data_sequences"] = {"evaluated": len(x), "given": n_data, "max_sequences": max_sequences}
        for t in data["targets"]:  # the artifacts move with the directory
            t["path"] = str(out_dir / Path(t["path"]).name)
        report_html.write(data, tmp, title=f"{source.name} ({quantize})")
    j, h = out_dir / "report.json", out_dir / "report.html"

    click.echo(f"wrote {j} and {h}")
    click.echo(
        f"evaluated on {evaluation['text']}"
        + (f"; calibrated on {evaluation['calibration']}" if evaluation.get("calibration") else "")
    )
    click.echo(f"error budget {error_budget:.3g}: {budget_why}")
    for r in data.get("realizations", []):
        err = "not measured (already recurrent)" if r["error"] is None else f"measured error {r['error']:.2e}"
        click.echo(f"  {r['layer']}: {r['realization']}, {err}")
    if data.get("diagnosis") and data.get("advice"):  # advice only where something misses its floor
        click.echo(data["diagnosis"]["text"])
    for v in data["variants"]:
        metric = f", {v['metric']['name']} {v['metric']['value']:.4f}" if "metric" in v else ""
        sq = "inf" if v["sqnr_db"] is None else f"{v['sqnr_db']:.1f}"
        click.echo(f"  {v['name']:<36} error {v['error_vs_source']:.2e}, SQNR {sq} dB{metric}")
    for t in data["targets"]:
        sq = "exact" if t["sqnr_db"] is None else f"SQNR {t['sqnr_db']:.1f} dB"
        metric = (
            f"; {t['metric']['name']} {t['metric']['value']:.4f} ({t['metric_vs_float']:+.4f} against float)"
            if "metric" in t
            else ""
        )
        click.echo(
            f"{t['target']} ({t['quantize']}): {t['verdict'].upper()}, {sq} against the source, "
            + (f"floor {t['floor_db']:g} dB" if t["floor_db"] is not None else f"tolerance {t['tolerance']}")
            + metric
        )
    failed = [t for t in data["targets"] if not t["passed"]]
    if failed:
        click.echo(
            "FAIL: "
            + ", ".join(f"{t['target']} (error {t['error_vs_source']:.3g} > {t['tolerance']:g})" for t in failed),
            err=True,
        )
        sys.exit(1)


#: sequences the bit-width sweep calibrates on and evaluates on (35 quantizations: kept short)
SWEEP_SEQUENCES = 32
#: passes over the evaluated data a report makes (source, two float recurrences, the integer reference,
#: the artifacts, two traces of every tensor), for the work budget
REPORT_PASSES = 8


def split_data(n: int, quantize: str, calibration_given: bool) -> dict:
    """Which sequences of --data calibrate and which are evaluated: with --calibration (or in float, where
    nothing is calibrated) all of them are evaluated; else the first half calibrates and the second half,
    never seen by the calibration, is evaluated (one sequence: it does both, and the page says so)."""
    if calibration_given or quantize == "float":
        return {"calibration_sequences": n, "first_evaluated": 0, "held_out": True}
    if n < 2:
        return {"calibration_sequences": n, "first_evaluated": 0, "held_out": False}
    return {"calibration_sequences": n // 2, "first_evaluated": n // 2, "held_out": True}


def evaluation_count(source, n: int, steps: int, max_sequences) -> tuple:
    """``(sequences evaluated, why fewer than n or None)``: all ``n``, or as many as ``--max-sequences``
    allows, or as many as the work budget (:mod:`lmu_edge.budget`) allows for the report's passes."""
    from . import budget

    ops_scale, mem_scale = budget.scale()

    def fits(k):
        e = budget.simulate_estimate(source, k, steps)
        return e.ops * REPORT_PASSES <= budget.MAX_WORK_OPS * ops_scale and (
            e.bytes * 2 <= budget.MAX_WORK_BYTES * mem_scale
        )

    want = n if max_sequences is None else min(n, max_sequences)
    why = f"--max-sequences {max_sequences}" if want < n else None
    if fits(want):
        return want, why
    lo, hi = 1, want  # the largest count that fits, by bisection
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo, "the work budget (lmu-edge --max-work N report ... allows N times more)"


def describe_split(split, n_eval, n_data, capped_by, data_path, calibration_path, n_cal, quantize) -> dict:
    """``report.json``'s ``evaluation``: which sequences were evaluated and which calibrated, in words."""
    first = split["first_evaluated"]
    span = f"sequences {first}..{first + n_eval - 1}" if n_eval > 1 else f"sequence {first}"
    text = f"{n_eval} of the {n_data} sequences of --data {data_path.name} ({span})"
    if capped_by:
        text += f", capped by {capped_by}"
    ev = {"sequences": n_eval, "given": n_data, "first": first, "held_out": split["held_out"], "capped_by": capped_by}
    if quantize == "float":
        text += "; nothing is calibrated in float"
    elif calibration_path is not None:
        ev["calibration"] = f"--calibration {calibration_path.name} ({n_cal} sequences), apart from these"
    elif split["held_out"]:
        ev["calibration"] = f"sequences 0..{n_cal - 1} of --data, none of them evaluated (the first half calibrates)"
    else:
        ev["calibration"] = "the same single sequence (NOT held out: give more sequences or --calibration)"
    ev["text"] = text
    return ev


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
