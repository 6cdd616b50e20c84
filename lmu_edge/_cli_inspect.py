"""``lmu-edge inspect``: a model's layers and, per LMU layer, the candidate realizations of its memory; or
the streaming contract an ONNX / TFLite artifact carries."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ._cli_base import BUDGET, target_names


@click.command()
@click.argument("model", type=click.Path(path_type=Path))
@click.option(
    "--error-budget",
    type=BUDGET,
    default=None,
    help="Largest relative impulse-response error of a realization (default: convert's for --quantize).",
)
@click.option(
    "--target",
    "-t",
    type=click.Choice(target_names()),
    default="c",
    show_default=True,
    help="The target whose auto choice is marked (realizations it cannot run are left out).",
)
@click.option(
    "--quantize",
    type=click.Choice(["float", "int8", "int16x8", "int16"]),
    default="float",
    show_default=True,
    help="Mark auto's choice for this number format (quantized: no Pade in auto, budget from the state).",
)
@click.option(
    "--candidates/--no-candidates",
    default=True,
    show_default=True,
    help="Measure every candidate realization of each parallel LMU layer (may take seconds for large orders).",
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON description instead of text.")
@click.option(
    "--prefer",
    type=click.Choice(["ops", "flash", "ram"]),
    default="ops",
    show_default=True,
    help="What the marked auto choice minimises: operations per step, flash or RAM.",
)
def inspect(model, error_budget, target, quantize, candidates, as_json, prefer):
    """Describe MODEL: its layers, LMU parameters and, per LMU layer, the candidate
    realizations of its memory with their measured error and per-step cost, marking the one
    `convert --realization auto` would take for --target, --quantize and --prefer. Given an ONNX
    or TFLite artifact (its folder, step.onnx or model.tflite), print the streaming contract the file carries."""
    import lmu_edge

    from .folding import auto_names, default_budget, rank
    from .ir import LMU, BandConv, realization_name

    step = model / "step.onnx" if model.is_dir() else model
    if model.is_dir() and not step.exists() and (model / "model.tflite").exists():
        step = model / "model.tflite"  # a TFLite artifact
    if step.suffix.lower() in (".onnx", ".tflite") and (step.is_file() or not model.is_dir()):
        from .targets import streaming

        c = streaming.read_file(step)  # an ONNX or TFLite artifact: its streaming contract
        click.echo(json.dumps(c, indent=1, sort_keys=True) if as_json else streaming.describe(c))
        return
    g = lmu_edge.load(model)
    quantized = quantize != "float"
    budget_why = "given"
    if error_budget is None:
        from .precision import state_bits
        from .registry import target as target_module

        error_budget, budget_why = default_budget(state_bits(quantize, {}, target_module(target) if target else None))
    rows = []
    for layer, n_in, n_out, seq in g.shapes():
        row = {"name": layer.name, "type": layer.TYPE, "in": n_in, "out": n_out, "sequence": seq}
        if isinstance(layer, LMU):
            row.update(
                memory_d=layer.memory_d,
                order=layer.order,
                theta=layer.theta,
                discretizer=layer.discretizer,
                memory=realization_name(layer.memory),
                hidden=None if layer.hidden is None else layer.hidden.TYPE,
                input_to_hidden=layer.input_to_hidden,
                return_sequences=layer.return_sequences,
                rnn_path=layer.is_rnn_path,
            )
            if candidates and layer.is_parallel:
                names = auto_names(layer, target, quantized)
                left_out = [n for n in auto_names(layer) if n not in names]  # no target: all it measures
                # measured as convert measures them (a substep search stops where it cannot beat the best so
                # far), then what auto leaves out for this target, on its own
                cs = lmu_edge.candidates(layer, error_budget, names, prefer=prefer)
                ok = [c for c in cs if c.ok]
                best = min(ok, key=lambda c: rank(c, prefer, layer.order, layer.memory_d)) if ok else None
                if left_out:
                    cs += lmu_edge.candidates(layer, error_budget, left_out, prefer=prefer)
                row["candidates"] = [
                    dict(
                        name=c.name,
                        substeps=getattr(c.memory, "substeps", None),
                        error=c.measurement.error,
                        ops_per_step=c.measurement.ops_per_step,
                        coeffs_stored=c.measurement.coeffs_stored,
                        state_size=c.measurement.state_size,
                        spectral_radius=c.measurement.spectral_radius,
                        within_budget=c.ok,
                        auto_choice=c is best,
                        in_auto=c.name in names,
                        note=c.note,
                        reference=c.measurement.reference,
                    )
                    for c in cs
                ]
            elif layer.measurement is not None:
                m = layer.measurement
                row["measurement"] = dict(error=m.error, ops_per_step=m.ops_per_step, reference=m.reference)
        elif isinstance(layer, BandConv):
            row.update(
                bands=layer.bands,
                kernel=[layer.kernel_t, layer.kernel_f],
                channels=[layer.channels_in, layer.channels_out],
                pad=[layer.pad_lo, layer.pad_hi],
                activation=layer.activation,
                pool=layer.pool,
                macs=layer.macs,
            )
        rows.append(row)
    info = {
        "model": str(model),
        "name": g.name,
        "auto_for": {"target": target, "quantize": quantize, "prefer": prefer},
        "error_budget": {"value": error_budget, "why": budget_why},
        "form": g.form,
        "input": [g.seq_len, g.input_features],
        "output_is_sequence": g.output_is_sequence,
        "layers": rows,
    }
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return
    T = "any length" if g.seq_len is None else f"{g.seq_len} steps"
    click.echo(f"model {g.name!r} ({model}), {g.form} form")
    click.echo(
        f"input: {T} x {g.input_features} features; output: "
        f"{'every step' if g.output_is_sequence else 'last step only'}, {g.output_features} features"
    )
    for r in rows:
        click.echo(
            f"  {r['name']:<20} {r['type']:<13} {r['in']:>5} -> {r['out']:<5}"
            + ("" if r["sequence"] else " (last step)")
        )
        if r["type"] == "band_conv":
            click.echo(
                f"      {r['bands']} bands x {r['channels'][0]} -> {r['channels'][1]} channels, kernel "
                f"{r['kernel'][0]} frames x {r['kernel'][1]} bands (causal), padding {r['pad'][0]}/{r['pad'][1]} "
                f"bands, {r['activation']}, max pool {r['pool']}; {r['macs']:,} MACs per frame"
            )
        if r["type"] == "lmu":
            click.echo(
                f"      memory_d={r['memory_d']} order={r['order']} theta={r['theta']:g} "
                f"discretizer={r['discretizer']} memory: {r['memory']}, hidden: {r['hidden'] or 'none'}"
                + (", input_to_hidden" if r["input_to_hidden"] else "")
                + (", RNN path (hidden/memory feed back into the memory)" if r["rnn_path"] else "")
            )
            if r.get("candidates"):
                click.echo(
                    f"      candidates within error budget {error_budget:.3g} ({budget_why}); <- auto: the choice of "
                    f"convert -t {target} --quantize {quantize}" + (f" --prefer {prefer}" if prefer != "ops" else "")
                )
                sampled = next((c["reference"] for c in r["candidates"] if "sampled every" in c["reference"]), None)
                if sampled:  # the every-step measurement is over the work budget (lmu_edge.folding.candidates)
                    click.echo(f"      measured against the {sampled} (every step is over the work budget)")
            for c in r.get("candidates", []):
                sub = f" x{c['substeps']}" if c["substeps"] else ""
                mark = "  <- auto" if c["auto_choice"] else ("" if c["within_budget"] else "  (over budget)")
                if not c["in_auto"]:
                    mark += f"  (not in auto for {target} {quantize})"
                mark += f"; {c['note']}" if c.get("note") else ""
                click.echo(
                    f"      {c['name'] + sub:<10} error {c['error']:9.2e}  {c['ops_per_step']:>10} ops/step "
                    f"{c['coeffs_stored']:>9} coeffs  state {c['state_size']}{mark}"
                )
            if "measurement" in r:
                m = r["measurement"]
                click.echo(
                    f"      measured: error {m['error']:.2e} against the {m['reference']}, {m['ops_per_step']} ops/step"
                )
