"""The ``lmu-edge`` command line: inspect, convert, run, verify and report (mirrors the Python API); the
error handling all commands share is in ``_cli_base``; ``inspect``, ``report``, ``sweep`` and ``docs`` in their
``_cli_*`` modules."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click
import numpy as np

from . import escape, outdir
from ._cli_base import BUDGET, EPILOG, TOLERANCE, Finite, Group, progress_printer, quiet_means_quiet, target_names
from ._cli_docs import docs
from ._cli_inspect import inspect
from ._cli_report import report
from ._cli_sweep import sweep
from .version import __version__


@click.group(cls=Group, epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="lmu-edge")
@click.option(
    "--max-work",
    type=click.FloatRange(min=0, min_open=True),
    default=1.0,
    help="Allow N times the default work budget (docs/security.md); before the command.",
)
def main(max_work):
    """Convert Legendre Memory Unit models trained in parallel form into
    constant-memory recurrent models for devices, and check them.

    \b
    Typical session:
      lmu-edge inspect model.lmu.npz
      lmu-edge convert model.keras --target c --quantize int8 --calibration x.npy -o out/model_c
      lmu-edge run out/model_c --input x.npy -o y.npy --runtime cortex-m4
      lmu-edge verify out/model_c --input x.npy
      lmu-edge report model.keras --data x.npy -o out/model_report
    """
    from . import budget

    click.get_current_context().with_resource(budget.allow(max_work))


@main.command()
@click.argument("model", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--target", "-t", type=click.Choice(target_names()), required=True, help="What to emit.")
@click.option(
    "--output",
    "-o",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Output directory (must be empty or new unless --force).",
)
@click.option(
    "--quantize",
    default="float",
    show_default=True,
    type=click.Choice(["float", "float32", "int8", "int16x8", "int16"]),
    help="float (every target), int8 (c, tflite, onnx; 16 bits where 8 fall short), int16x8 (c, tflite) or "
    "int16 (c); docs/quantization.md.",
)
@click.option(
    "--calibration",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Typical inputs (.npy, or .npz with one array or key 'x'), shape (N, T, F); "
    "needed to quantize, and used to verify the artifact.",
)
@click.option(
    "--realization",
    default="auto",
    show_default=True,
    type=click.Choice(["auto", "zoh", "euler", "rk4", "rk2", "rk1", "pade", "pade23", "pade22", "fir"]),
    help="How to run each LMU memory; auto: the cheapest within the error budget (see --prefer). docs/realizations.md.",
)
@click.option(
    "--error-budget",
    type=BUDGET,
    default=None,
    help="Largest relative impulse-response error of a realization (default: 1e-6 float; 1/4 state LSB quantized).",
)
@click.option("--substeps", type=click.IntRange(1, 4096), help="Fix the RK / Pade substep count (default: searched).")
@click.option(
    "--prefer",
    type=click.Choice(["ops", "flash", "ram"]),
    default=None,
    help="What auto minimises: ops per step, flash (O(q) storage) or ram (default: ops; flash if --device needs it).",
)
@click.option(
    "--tolerance",
    type=TOLERANCE,
    help="Largest accepted relative error against MODEL (default: the target's; quantized: measured, not enforced).",
)
@click.option("--force", is_flag=True, help="Replace a non-empty output directory.")
@click.option("--quiet", "-q", is_flag=True, help="No progress messages.")
@click.option(
    "--sign",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Sign the seal with this Ed25519 private key (PEM; see `lmu-edge keygen`); receivers check --trusted-key.",
)
@click.option("--prefix", help="[c] Prefix of every C symbol (a C identifier; default: model).")
@click.option(
    "--device",
    help="[c] Device profile to fit: cortex-m0-16k, cortex-m0-32k, cortex-m4-64k, cortex-m4-128k (docs/cli.md).",
)
@click.option(
    "--weight-bits",
    type=click.IntRange(2, 16),
    help="[c] Bits of dense weights: 2..8 (default 8), 2..16 with int16; given, nothing is widened to 16 bits.",
)
@click.option(
    "--state-bits",
    type=click.IntRange(8, 32),
    help="[quantized] Bits of the LMU state (16 by default; 32 with --quantize int16).",
)
@click.option(
    "--variant",
    type=click.Choice(["external", "internal", "exact", "spiking"]),
    help="[tflite] external (state fed back by the caller) or internal; [nir] exact or spiking. Defaults first.",
)
@click.option(
    "--spiking",
    is_flag=True,
    default=None,
    help="[nengo, nir] Hold the LMU memory in spiking neurons (default: the exact, non-spiking network / graph).",
)
@click.option(
    "--neurons-per-dim",
    type=click.IntRange(min=1),
    help="[nengo, nir] Spiking: neurons per memory dimension (default 100; even for nir).",
)
@click.option(
    "--neuron-type",
    type=click.Choice(["lif", "spiking-relu", "lif-rate", "direct"]),
    help="[nengo] Neuron model of the spiking memory (default spiking-relu; lif-rate and direct are non-spiking "
    "references).",
)
@click.option(
    "--tau",
    type=Finite(0.0, 10.0, low_open=True),
    help="[nengo, nir] Spiking: synaptic time constant; nengo seconds (default 0.05), nir samples (default 5).",
)
@click.option(
    "--steps-per-sample",
    type=click.IntRange(min=1),
    help="[nengo, nir] Simulator steps per input sample (default: nengo 10; nir 10 spiking, 2500 exact).",
)
@click.option(
    "--option",
    "-O",
    "extra_options",
    multiple=True,
    metavar="KEY=VALUE",
    help="Any other target option (VALUE parsed as JSON when it can be). Repeatable.",
)
@quiet_means_quiet
def convert(
    model,
    target,
    out_dir,
    quantize,
    calibration,
    realization,
    error_budget,
    substeps,
    prefer,
    tolerance,
    force,
    quiet,
    sign,
    extra_options,
    **target_flags,
):
    """Convert MODEL for a target into an output directory, verify it against
    MODEL, and write report.json next to the artifact.

    Options marked [c], [tflite], [nengo], [nir] or [quantized] apply to those targets only."""
    import lmu_edge

    options = {k: v for k, v in target_flags.items() if v is not None}
    if target == "nir" and options.get("spiking") and options.get("variant", "spiking") != "spiking":
        raise click.UsageError(f"--spiking and --variant {options['variant']} contradict each other")
    for item in extra_options:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--option")
        try:
            options[key.strip().replace("-", "_")] = json.loads(value)
        except ValueError:
            options[key.strip().replace("-", "_")] = value
    given = [f"--{k.replace('_', '-')}" for k in ("weight_bits", "state_bits") if k in options]
    if given and quantize in ("float", "float32"):  # a float artifact would silently ignore them (-O too)
        raise click.UsageError(
            f"{' and '.join(given)} set the widths of a quantized artifact; add --quantize int8, int16x8 or "
            f"int16 (with --calibration), or leave {'them' if len(given) > 1 else 'it'} out for float"
        )
    art = lmu_edge.convert(
        model,
        target=target,
        out_dir=out_dir,
        quantize=quantize,
        calibration=calibration,
        realization=realization,
        error_budget=error_budget,
        substeps=substeps,
        prefer=prefer,
        tolerance=tolerance,
        overwrite=force,
        progress=progress_printer(quiet),
        sign=sign,
        **options,
    )
    rep = json.loads((art.path / "report.json").read_text())
    v = rep["verification"]
    tol = "measured, not enforced" if v["tolerance"] is None else f"tolerance {v['tolerance']:g}"
    click.echo(
        f"wrote {art.path} (target {target}, {quantize}); error vs source {v['error_vs_source']:.2e} "
        f"on the {v['input']} ({tol})"
    )
    qinfo = rep.get("quantization") or {}
    if target == "c" and qinfo.get("widened") and "int8_sqnr_db" in qinfo:  # c int8: 16-bit layers, and why
        layers = [escape.printable(n) for n in qinfo["widened"]]
        weights = [escape.printable(n) for n in qinfo.get("widened_weights", [])]
        click.echo(
            f"  16-bit activations in {', '.join(layers)}"
            + (f" and 16-bit weights in {', '.join(weights)}" if weights else "")
            + (" (the C API is int16, input and output)" if "input" in qinfo["widened"] else "")
            + f": 8 bits gave {qinfo['int8_sqnr_db']:.1f} dB against the source on the calibration data, below "
            f"{qinfo['widen_db']:g} dB ({qinfo['calibration_sqnr_db']:.1f} dB now); --option widen_db=null keeps "
            f"every layer 8-bit"
        )
    elif qinfo.get("widened") and "int8_sqnr_db" in qinfo:  # onnx / tflite int8: what took 16 bits, and why
        names = qinfo["widened"]
        n_w = len(qinfo.get("widened_weights", ()))  # onnx: the weight matrices among them
        n_a = len(names) - n_w - ("x" in names)

        def count(n, one, many):
            return f"{n} {one if n == 1 else many}"

        if target == "onnx":
            parts = [count(n_a, "activation", "activations")] * bool(n_a)
            parts += [count(n_w, "weight matrix", "weight matrices")] * bool(n_w)
        else:  # tflite: operators, and "input x"
            n_ops = len(names) - ("input x" in names)
            parts = [count(n_ops, "more operator", "more operators") + " than the LMU state path"] * bool(n_ops)
        parts += ["the input"] * ("x" in names or "input x" in names)
        what = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
        click.echo(
            f"  16 bits for {what} "
            f"({', '.join(escape.printable(n) for n in names)}): 8 bits gave {qinfo['int8_sqnr_db']:.1f} dB against "
            f"the source on the calibration data, below {qinfo['widen_db']:g} dB ({qinfo['sqnr_db_vs_float']:.1f} dB "
            f"now); --option widen_db=null keeps them 8-bit"
        )
    elif qinfo.get("widened"):  # c int16x8: the weights that took 16 bits, and why
        click.echo(
            f"  16-bit weights in {', '.join(escape.printable(n) for n in qinfo['widened'])}: int8 weights gave "
            f"{qinfo['int8_weights_sqnr_db']:.1f} dB against the source on the calibration data, below "
            f"{qinfo['widen_db']:g} dB ({qinfo['calibration_sqnr_db']:.1f} dB now); --weight-bits 8 keeps int8 weights"
        )
    cost = qinfo.get("step_instructions") or {}
    if cost.get("chosen") != cost.get("unwidened") and cost.get("core"):  # what the widening costs, estimated
        d, core = cost["chosen"] - cost["unwidened"], escape.printable(cost["core"]).replace("cortex-m", "Cortex-M")
        click.echo(
            f"  widening {'costs' if d > 0 else 'saves'} about {abs(d):,} instructions per step on the {core} "
            f"({cost['unwidened']:,} -> {cost['chosen']:,}, estimated; of two choices that reach the target the "
            f"search takes the faster where no less accurate)"
        )
    held = qinfo.get("held_out") or {}
    if held.get("widened_further"):  # the choice missed on sequences its ranges did not see: widened further
        click.echo(
            f"  held out: the first choice gave {held['sqnr_db']:.1f} dB on half the calibration sequences with "
            f"ranges from the other half, so the search ran again there ({held['searched_again']:.1f} dB) and "
            f"widened what it asked for too; --option held_out=false skips the check"
        )
    elif "searched_again" in held:  # missed there too, and no widening lifts it: the data, not the widths
        click.echo(
            f"  held out: {held['sqnr_db']:.1f} dB on half the calibration sequences with ranges from the other "
            f"half, and no widening lifts that half past {held['searched_again']:.1f} dB: your inputs may go past "
            f"what the calibration data cover; calibrate on more varied sequences"
        )
    if target == "c" and qinfo.get("widening_dropped"):  # c int8 on a device the 16-bit parts overfill
        click.echo(f"  {escape.printable(qinfo['widening_dropped'])}")
    if target == "c":
        click.echo(_c_summary(rep))
    for key, value in (qinfo.get("onnxruntime_session_config") or {}).items():  # onnx int8: what sessions need
        click.echo(
            f"  in your ONNX Runtime sessions set {key} = {value} (so.add_session_config_entry({key!r}, {value!r})): "
            f"the error above was measured so; fused QDQ kernels round differently, on some CPUs far worse"
        )
    dev = (rep.get("c") or {}).get("device")
    if dev and "flash_used" in dev:
        click.echo(
            f"  fits --device {escape.printable(dev['name'])}: flash {dev['flash_used']:,} of {dev['flash']:,} bytes, "
            f"RAM {dev['ram_used']:,} of {dev['ram']:,} (the model alone: code, constants and state)"
        )
    budget = rep.get("error_budget", {})
    if budget and not budget["why"].startswith("float target"):  # the float default goes unsaid
        click.echo(f"  error budget {budget['value']:.3g}: {budget['why']}")
    choice = rep.get("realization_choice", {})
    for name, text in (choice.get("tradeoffs", {}) if choice.get("prefer", "ops") != "ops" else {}).items():
        why = f"--prefer {choice['prefer']} was given" if choice["why"] == "given" else choice["why"]
        click.echo(f"  {name}: {text}; {why}")
    if v["tolerance"] is None and v["error_vs_source"] > 0.1:
        hint = rep.get("diagnosis", {}).get("text", "see report.html")
        click.echo(
            f"warning: the {'quantized model' if quantize != 'float' else 'artifact'} differs from the source by "
            f"{v['error_vs_source']:.2g} "
            f"(relative to the output scale); {hint}",
            err=True,
        )
    for lay in rep["layers"]:
        if "realization" in lay:
            m = lay.get("measurement") or {}
            click.echo(
                f"  {lay['name']}: {lay['realization']}"
                + (f", impulse-response error {m['error']:.2e}, {m['ops_per_step']} ops/step" if m else "")
            )


def _c_summary(rep: dict) -> str:
    """One line on a C artifact: instructions per step on the Cortex-M cores measured, flash, RAM, and the
    host build's bit-exactness with the integer reference."""
    c, v = rep.get("c") or {}, rep["verification"]
    parts = []
    insn = [
        (v[f"instructions_per_step_{k}"], name)
        for k, name in (("m4", "M4"), ("m0", "M0"))
        if v.get(f"instructions_per_step_{k}")
    ]
    if insn:
        steps = v["instructions_measured_steps"]
        parts.append(
            "instructions per step "
            + ", ".join(f"{n:,.0f} on Cortex-{name}" for n, name in insn)
            + f" (QEMU -icount, mean over the first {steps} steps of the first sequence)"
        )
    notes = [
        f"Cortex-{k.upper()}: {v[f'instructions_note_{k}']}" for k in ("m4", "m0") if v.get(f"instructions_note_{k}")
    ]
    if notes:  # a model larger than QEMU's board: converted, not measured there
        parts.append("instructions per step " + "; ".join(notes))
    if c.get("flash_bytes"):
        flash = f"flash {c['flash_bytes']:,} B on the M4"
        flash += f" ({c['flash_bytes_m0']:,} on the M0)" if c.get("flash_bytes_m0") else ""
        parts.append(flash)
    parts.append(f"RAM {c.get('ram_bytes', 0):,} B (state and scratch)")
    if v.get("bit_exact_host"):  # False fails the conversion: nothing is written, nothing printed here
        parts.append("the host build is bit for bit the integer reference")
    return "  C: " + "; ".join(parts)


def _warn_outside_calibration(art, fraction: float, lo_hi) -> None:
    """run's and verify's warning when a quantized artifact gets inputs beyond its calibration data's range."""
    if fraction > 0 and art.manifest.get("quantize") not in (None, "float"):
        lo, hi = lo_hi
        click.echo(
            f"warning: {100 * fraction:.3g}% of the input values lie outside [{lo:.4g}, {hi:.4g}], the "
            f"range of the data the artifact was calibrated on; a quantized input saturates beyond it (convert "
            f"again with --calibration data that covers these inputs)",
            err=True,
        )


def _load_input(path, graph=None):
    """``--input``'s array; checked against ``graph``'s input shape here, so that an error names the file."""
    from .arrays import load_array
    from .reference import check_input

    x = load_array(path, f"--input {path}")
    if graph is not None:
        check_input(graph, x, f"--input {path}")
    return x


@main.command()
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--input",
    "-i",
    "input_path",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Inputs (.npy or .npz), shape (N, T, F) or (T, F).",
)
@click.option(
    "--output",
    "-o",
    "output_path",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Where to write the outputs (.npy).",
)
@click.option(
    "--runtime",
    "-r",
    help="Runtime to run it in (default: the target's first; the runtimes of each target are listed above).",
)
@click.option("--force", is_flag=True, help="Replace an existing --output file.")
@click.option(
    "--trusted-key",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Run it only if this Ed25519 public key (PEM) signed its seal (convert --sign).",
)
@click.option("--quiet", "-q", is_flag=True, help="No native runtime notices (e.g. LiteRT's delegate line) on stderr.")
@quiet_means_quiet
def run(out_dir, input_path, output_path, runtime, force, trusted_key, quiet):
    """Run the artifact in OUT_DIR on inputs; writes what the source model's predict returns.

    An artifact is code from its builder, like a downloaded Makefile: run it only if you trust them. Only
    files its seal records run; --trusted-key checks who signed it.

    \b
    Runtimes (--runtime), the default first:
      c: host, cortex-m4, cortex-m0, cortex-m7, cortex-m33, cortex-m55, microbit
      tflite: litert, tflm, tflite-runtime
      onnx: onnxruntime, onnx-reference
      nengo: nengo, loihi-emulator
      nir: rockpool, sinabs
      ir: reference, reference-float32"""
    import lmu_edge

    from .errors import ArtifactError, OutputExistsError

    art = lmu_edge.open_artifact(out_dir, trusted_key=trusted_key)
    art._runtime(runtime)  # a runtime the target lacks is refused before the input is read or warned about
    o = output_path.resolve()
    if o == input_path.resolve():
        raise OutputExistsError(f"--output {output_path} is the --input file; choose another name")
    if o.is_relative_to(out_dir.resolve()):
        raise ArtifactError(f"--output {output_path} lies inside the artifact {out_dir}; write it elsewhere")
    if os.path.lexists(output_path) and not (force and o.is_file()):
        how = "pass --force to replace it, or " if o.is_file() else ""
        raise OutputExistsError(f"--output {output_path} exists; {how}choose another name")
    outdir.check_writable(output_path)
    x = _load_input(input_path, art.graph)
    lo_hi = art.manifest.get("calibration_range")  # verify's warning: a quantized input saturates beyond it
    if lo_hi is not None:
        _warn_outside_calibration(art, float(np.mean((x < lo_hi[0]) | (x > lo_hi[1]))), lo_hi)
    y = art.run(x, runtime=runtime)
    output_path.parent.mkdir(parents=True, exist_ok=True)
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix=f".{output_path.name}.", suffix=".partial", dir=output_path.parent)
    try:  # written whole, then renamed over the name given (np.save would append .npy to it)
        with os.fdopen(fd, "wb") as fh:
            np.save(fh, y)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; the user's usual mode
        if force:
            os.replace(tmp, output_path)
        else:  # a link fails if the name appeared while the artifact ran: never replace a file unasked
            try:
                os.link(tmp, output_path)
                os.unlink(tmp)
            except FileExistsError:
                raise OutputExistsError(
                    f"--output {output_path} appeared while the artifact ran; pass --force to replace it, or "
                    "choose another name"
                ) from None
            except OSError:  # a file system without hard links: the check before the run must do
                os.replace(tmp, output_path)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise
    fmt = "" if output_path.suffix == ".npy" else " (NumPy .npy format, whatever the name: np.load reads it)"
    click.echo(f"wrote {output_path}{fmt}: shape {tuple(y.shape)}, runtime {runtime or art.module.DEFAULT_RUNTIME}")


@main.command()
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--input",
    "-i",
    "input_path",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Inputs (.npy or .npz), shape (N, T, F) or (T, F).",
)
@click.option("--runtime", "-r", help="Runtime to run the artifact in (default: the target's).")
@click.option("--tolerance", type=TOLERANCE, help="Largest accepted relative error (default: the artifact's).")
@click.option(
    "--trusted-key",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Run it only if this Ed25519 public key (PEM) signed its seal (convert --sign).",
)
@click.option("--quiet", "-q", is_flag=True, help="No native runtime notices (e.g. LiteRT's delegate line) on stderr.")
@quiet_means_quiet
def verify(out_dir, input_path, runtime, tolerance, trusted_key, quiet):
    """Run the artifact and its source model on inputs, print the error, and
    exit non-zero when it is beyond the tolerance (it runs the artifact's code: see run --help)."""
    import lmu_edge

    from .errors import VerificationError

    art = lmu_edge.open_artifact(out_dir, trusted_key=trusted_key)
    art._runtime(runtime)  # before the input is read
    try:
        r = art.verify(_load_input(input_path, art.graph), runtime=runtime, tolerance=tolerance)
    except VerificationError as e:
        click.echo(f"FAIL: {e}", err=True)
        sys.exit(1)
    out = r.get("outside_calibration_range") or {}
    if out:
        _warn_outside_calibration(art, out["fraction"], out["range"])
    exact = " the build is bit for bit its integer reference;" if r.get("bit_exact_host") else ""
    if r["tolerance"] is None and not r.get("bit_exact_host"):
        click.echo(
            f"MEASURED (nothing enforced): error {r['error']:.3e} against the source model "
            f"[runtime {r['runtime']}]; pass --tolerance E to check a bound"
        )
        return
    if r["tolerance"] is None:  # bit-exact: the error is the quantization's, measured
        click.echo(
            f"PASS:{exact} error {r['error']:.3e} against the source model (relative to the output scale; "
            f"quantization, measured: no tolerance set, --tolerance E bounds it) [runtime {r['runtime']}]"
        )
        return
    click.echo(
        f"PASS:{exact} error {r['error']:.3e} against the source model (relative to the output "
        f"scale) <= tolerance {r['tolerance']:g} [runtime {r['runtime']}]"
    )


@main.command()
@click.argument("name", type=click.Path(dir_okay=False, path_type=Path))
def keygen(name):
    """Make an Ed25519 key pair for signing artifacts: NAME.key (private, keep it) and NAME.pub (give it to
    those who run your artifacts: run / verify --trusted-key NAME.pub). Never replaces a file."""
    from . import signing

    priv, pub = signing.generate(name)
    click.echo(f"wrote {priv} (private: convert --sign {priv}) and {pub} (public: run --trusted-key {pub})")


main.add_command(inspect)
main.add_command(report)
main.add_command(docs)
main.add_command(sweep)

if __name__ == "__main__":  # pragma: no cover
    main()
