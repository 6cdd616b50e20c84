"""The ``lmu-edge`` command line: inspect, convert, run, verify (mirrors the Python API)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click
import numpy as np

from . import __version__, escape

EPILOG = "Docs: README.md. Errors print one line; set LMU_EDGE_DEBUG=1 to see a traceback."


class _Interrupted(BaseException):
    """Raised by the SIGTERM / SIGHUP / SIGINT handler, so that every ``finally`` and cleanup runs."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


def _on_signal(signum, frame):
    raise _Interrupted(signum)


class _Group(click.Group):
    """Turns every error, usage errors included, into one line on stderr and a non-zero exit code.

    Warnings (numpy's, the converters') are collected while a command runs and printed, one line each,
    only when it succeeds: an error is never preceded by a warning it explains better."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        import signal

        previous = {}
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            try:
                previous[sig] = signal.signal(sig, _on_signal)
            except (ValueError, OSError):  # not the main thread (e.g. a test runner): leave it alone
                pass
        try:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.Exit as e:
            sys.exit(e.exit_code)
        except click.UsageError as e:
            cmd = e.ctx.command_path if e.ctx is not None else "lmu-edge"
            self._fail(f"{e.format_message()} (see '{cmd} --help')", e.exit_code)
        except click.ClickException as e:
            self._fail(e.format_message(), e.exit_code)
        except (click.exceptions.Abort, KeyboardInterrupt):
            self._fail("interrupted; nothing was left half-written", 130)
        except _Interrupted as e:
            what = "interrupted" if e.signum == signal.SIGINT else f"stopped by signal {e.signum}"
            self._fail(f"{what}; nothing was left half-written", 128 + e.signum)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def invoke(self, ctx):
        import warnings

        from .errors import LmuEdgeError

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                result = super().invoke(ctx)
            except (
                click.exceptions.Exit,
                click.exceptions.Abort,
                click.ClickException,
                _Interrupted,
                KeyboardInterrupt,
            ):
                raise
            except BrokenPipeError:  # e.g. "lmu-edge inspect --json | head": not an error
                sys.stderr.close()
                sys.exit(0)
            except LmuEdgeError as e:
                self._fail(e, 1)
            except (OSError, MemoryError) as e:
                self._fail(f"{type(e).__name__}: {e}", 1)
            except Exception as e:  # a bug of ours: still one line, with the way to see more
                self._fail(
                    f"internal error ({type(e).__name__}: {e}); please report it with "
                    f"the command you ran (LMU_EDGE_DEBUG=1 shows the traceback)",
                    70,
                )
        seen = set()
        for w in caught:
            msg = " ".join(str(w.message).split())
            if msg not in seen:
                seen.add(msg)
                click.echo(f"lmu-edge: warning: {msg}", err=True)
        return result

    @staticmethod
    def _fail(msg, code):
        if os.environ.get("LMU_EDGE_DEBUG") and isinstance(msg, BaseException):
            raise msg
        click.echo(f"lmu-edge: error: {' '.join(str(msg).split())}", err=True)
        sys.exit(code)


class _Finite(click.ParamType):
    """A finite float in a range (click's FloatRange accepts inf and nan)."""

    name = "number"

    def __init__(self, lo: float, hi: float, low_open: bool = False):
        self.lo, self.hi, self.low_open = lo, hi, low_open

    def convert(self, value, param, ctx):
        import math

        try:
            v = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        bad_lo = v <= self.lo if self.low_open else v < self.lo
        if not math.isfinite(v) or bad_lo or v > self.hi:
            span = f"{'(' if self.low_open else '['}{self.lo:g}, {self.hi:g}]"
            self.fail(f"{value!r} is not a finite number in {span}", param, ctx)
        return v


BUDGET = _Finite(0.0, 1.0, low_open=True)
TOLERANCE = _Finite(0.0, 1e300)


@click.group(cls=_Group, epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="lmu-edge")
def main():
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


def _progress(quiet):
    return None if quiet else (lambda msg: click.echo(msg, err=True))


def _targets():
    from .registry import TARGETS

    return sorted(TARGETS)


@main.command()
@click.argument("model", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--error-budget",
    type=BUDGET,
    default=1e-6,
    show_default=True,
    help="Largest relative impulse-response error a realization may have.",
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
def inspect(model, error_budget, candidates, as_json, prefer):
    """Describe MODEL: its layers, LMU parameters and, per LMU layer, the candidate
    realizations of its memory with their measured error and per-step cost."""
    import lmu_edge

    from .ir import LMU, realization_name

    g = lmu_edge.load(model)
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
                from .folding import rank

                cs = lmu_edge.candidates(layer, error_budget, prefer=prefer)
                ok = [c for c in cs if c.ok]
                best = min(ok, key=lambda c: rank(c, prefer, layer.order, layer.memory_d)) if ok else None
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
                        note=c.note,
                    )
                    for c in cs
                ]
            elif layer.measurement is not None:
                m = layer.measurement
                row["measurement"] = dict(error=m.error, ops_per_step=m.ops_per_step, reference=m.reference)
        rows.append(row)
    info = {
        "model": str(model),
        "name": g.name,
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
        if r["type"] == "lmu":
            click.echo(
                f"      memory_d={r['memory_d']} order={r['order']} theta={r['theta']:g} "
                f"discretizer={r['discretizer']} memory: {r['memory']}, hidden: {r['hidden'] or 'none'}"
                + (", input_to_hidden" if r["input_to_hidden"] else "")
                + (", RNN path (hidden/memory feed back into the memory)" if r["rnn_path"] else "")
            )
            for c in r.get("candidates", []):
                sub = f" x{c['substeps']}" if c["substeps"] else ""
                mark = "  <- auto" if c["auto_choice"] else ("" if c["within_budget"] else "  (over budget)")
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


@main.command()
@click.argument("model", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--target", "-t", type=click.Choice(_targets()), required=True, help="What to emit.")
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
    help="Number format: float (every target; float32 is another name), int8 (c, tflite, onnx; where 8 bits "
    "cannot carry the model, c gives the fewest layers 16-bit activations that lift it to 33 dB on the "
    "calibration data, onnx the fewest tensors 16 bits and tflite the fewest operators that lift it to 36 dB, "
    "the input among them; --option widen_db=null keeps 8 bits), int16x8 "
    "(16-bit activations, int8 weights: c, tflite; c widens a few to 16 bits where int8 ones cap the accuracy, "
    "see --weight-bits), int16 (16-bit activations and weights: c).",
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
    help="How to run each LMU memory; auto picks the cheapest within the error budget.",
)
@click.option(
    "--error-budget",
    type=BUDGET,
    default=None,
    help="Largest relative impulse-response error a realization may have (default: 1e-6 in float; "
    "a quarter of one state LSB, at least 1e-6, when quantized).",
)
@click.option("--substeps", type=click.IntRange(1, 4096), help="Fix the RK / Pade substep count (default: searched).")
@click.option(
    "--prefer",
    type=click.Choice(["ops", "flash", "ram"]),
    default=None,
    help="What auto minimises: operations per step, flash (the fewest operations among realizations "
    "storing O(q) numbers) or RAM (default: flash with --device, else ops); the trade-off is printed.",
)
@click.option(
    "--tolerance", type=TOLERANCE, help="Largest accepted relative output error against MODEL (default: the target's)."
)
@click.option("--force", is_flag=True, help="Replace a non-empty output directory.")
@click.option("--quiet", "-q", is_flag=True, help="No progress messages.")
@click.option("--prefix", help="[c] Prefix of every C symbol (a C identifier).")
@click.option(
    "--device",
    help="[c] Device profile the artifact must fit: cortex-m0-16k (256 KB flash / 16 KB RAM, run on QEMU's "
    "microbit), cortex-m0-32k (256 KB / 32 KB), cortex-m4-64k (256 KB / 64 KB), cortex-m4-128k (1 MB / 128 KB). "
    "Makes --prefer flash the default.",
)
@click.option(
    "--weight-bits",
    type=click.IntRange(2, 16),
    help="[c] Bits of dense weights: 2..8 (stored in int8; 8 by default), 2..16 with --quantize int16 "
    "(16 by default; stored in int16). Without it, --quantize int16x8 gives 16-bit weights to the fewest "
    "matrices that lift the model to 48 dB against float on the calibration data; --weight-bits 8 keeps all int8.",
)
@click.option(
    "--state-bits",
    type=click.IntRange(8, 32),
    help="[quantized] Bits of the LMU state (16 by default; 32 with --quantize int16).",
)
@click.option("--variant", help="[tflite] 'external' state inputs/outputs or 'internal' resource variables.")
@click.option("--spiking", is_flag=True, default=None, help="[nengo] Build the LMU memory from spiking ensembles.")
@click.option("--neurons-per-dim", type=click.IntRange(min=1), help="[nengo] Neurons per represented dimension.")
@click.option(
    "--neuron-type",
    type=click.Choice(["lif", "spiking-relu", "lif-rate", "direct"]),
    help="[nengo] Neuron model of the spiking memory (lif-rate and direct are non-spiking references).",
)
@click.option("--tau", type=_Finite(0.0, 10.0, low_open=True), help="[nengo] Lowpass synapse time constant (seconds).")
@click.option("--steps-per-sample", type=click.IntRange(min=1), help="[nengo] Simulator steps per input sample.")
@click.option(
    "--option",
    "-O",
    "extra_options",
    multiple=True,
    metavar="KEY=VALUE",
    help="Any other target option (VALUE parsed as JSON when it can be). Repeatable.",
)
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
    extra_options,
    **target_flags,
):
    """Convert MODEL for a target into an output directory, verify it against
    MODEL, and write report.json next to the artifact.

    Options marked [c], [tflite], [nengo] or [quantized] apply to those targets only."""
    import lmu_edge

    options = {k: v for k, v in target_flags.items() if v is not None}
    for item in extra_options:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--option")
        try:
            options[key.strip().replace("-", "_")] = json.loads(value)
        except ValueError:
            options[key.strip().replace("-", "_")] = value
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
        progress=_progress(quiet),
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
        n_w = sum(n.startswith("w_") for n in names)
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
    if target == "c" and qinfo.get("widening_dropped"):  # c int8 on a device the 16-bit parts overfill
        click.echo(f"  {escape.printable(qinfo['widening_dropped'])}")
    budget = rep.get("error_budget", {})
    if budget and not budget["why"].startswith("float target"):  # the float default goes unsaid
        click.echo(f"  error budget {budget['value']:.3g}: {budget['why']}")
    choice = rep.get("realization_choice", {})
    for name, text in (choice.get("tradeoffs", {}) if choice.get("prefer", "ops") != "ops" else {}).items():
        chose_for_you = choice["why"] != "given" and " instead of " in text
        hint = "; --prefer ops keeps the fewest operations" if chose_for_you else ""
        click.echo(f"  {name}: {text} ({choice['prefer']}: {choice['why']}{hint})")
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


def _load_input(path):
    from .arrays import load_array

    return load_array(path, f"--input {path}")


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
    help="Runtime (default: the target's first): c: host, cortex-m4, cortex-m0, cortex-m7, cortex-m33, "
    "cortex-m55, microbit; tflite: litert, tflm, tflite-runtime; onnx: onnxruntime, onnx-reference; "
    "nengo: nengo, loihi-emulator; nir: rockpool, sinabs; ir: reference, reference-float32.",
)
def run(out_dir, input_path, output_path, runtime):
    """Run the artifact in OUT_DIR on inputs; writes what the source model's predict returns."""
    import lmu_edge

    art = lmu_edge.open_artifact(out_dir)
    y = art.run(_load_input(input_path), runtime=runtime)
    output_path.parent.mkdir(parents=True, exist_ok=True)
    with open(output_path, "wb") as fh:  # the exact name given (np.save would append .npy)
        np.save(fh, y)
    click.echo(f"wrote {output_path}: shape {tuple(y.shape)}, runtime {runtime or art.module.DEFAULT_RUNTIME}")


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
def verify(out_dir, input_path, runtime, tolerance):
    """Run the artifact and its source model on inputs, print the error, and
    exit non-zero when it is beyond the tolerance."""
    import lmu_edge

    from .errors import VerificationError

    art = lmu_edge.open_artifact(out_dir)
    try:
        r = art.verify(_load_input(input_path), runtime=runtime, tolerance=tolerance)
    except VerificationError as e:
        click.echo(f"FAIL: {e}", err=True)
        sys.exit(1)
    exact = " bit-exact with its integer reference;" if r.get("bit_exact_host") else ""
    if r["tolerance"] is None and not r.get("bit_exact_host"):
        click.echo(
            f"MEASURED (nothing enforced): error {r['error']:.3e} against the source model "
            f"[runtime {r['runtime']}]; pass --tolerance E to check a bound"
        )
        return
    bound = "(no tolerance set)" if r["tolerance"] is None else f"<= tolerance {r['tolerance']:g}"
    click.echo(
        f"PASS:{exact} error {r['error']:.3e} against the source model (relative to the output "
        f"scale) {bound} [runtime {r['runtime']}]"
    )


def _report_budget(given, targets, quantize, state_bits) -> tuple:
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


@main.command()
@click.argument("model", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--data",
    "data_path",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Inputs to evaluate on (.npy / .npz), shape (N, T, F); also the calibration data.",
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
    help="Targets to emit and run (repeatable).",
)
@click.option(
    "--quantize",
    default="int8",
    show_default=True,
    help="Number format of the artifacts and of the integer graph the report traces: int8 (with c among the "
    "targets, the fewest layers given 16-bit activations that lift the model to 33 dB, as the c target "
    "does), int16x8 (16-bit activations, int8 weights; with c among the targets, some widened to 16 bits "
    "as the c target does) or int16 (16-bit activations and weights, 32-bit state; c only).",
)
@click.option(
    "--weight-bits",
    type=click.IntRange(2, 16),
    help="Bits of dense weights: 2..8 (8 by default), 2..16 with --quantize int16 (16 by default). Without it, "
    "int16x8 with c among the targets widens the fewest matrices to 16 bits that lift the model to 48 dB on "
    "the data, and int8 the fewest layers to 16-bit activations (33 dB), as the c target does; with it, "
    "nothing is widened.",
)
@click.option(
    "--state-bits", type=click.IntRange(8, 32), help="Bits of the LMU state (default 16; 32 with --quantize int16)."
)
@click.option(
    "--realization",
    default="auto",
    show_default=True,
    type=click.Choice(["auto", "zoh", "euler", "rk4", "rk2", "rk1", "pade", "pade23", "pade22", "fir"]),
)
@click.option(
    "--error-budget",
    type=BUDGET,
    default=None,
    help="Largest relative impulse-response error a realization may have (default: 1e-6 in float; "
    "a quarter of one LSB of the widest state among the targets and the integer reference, at least 1e-6).",
)
@click.option("--tolerance", type=TOLERANCE, help="Pass / fail bound on each target's error against the source model.")
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
def report(
    model,
    data_path,
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

    for t in targets:  # an option the mode cannot take is refused before any work
        check = getattr(target_module(t), "check_options", None)
        if check is not None and quantize in getattr(target_module(t), "QUANTIZE", ()):
            check(quantize, {"weight_bits": weight_bits})

    outdir.check_replaceable(out_dir, force)
    source = lmu_edge.load(model)
    x, _ = check_input(source, load_array(data_path, f"--data {data_path}"), f"--data {data_path}")
    x = x[:max_sequences]
    labels = None
    if labels_path is not None:
        labels = load_array(labels_path, f"--labels {labels_path}")[:max_sequences]
        expect = (len(x),) if not source.output_is_sequence else (len(x), x.shape[1])
        if labels.shape[: len(expect)] != expect:
            raise ShapeError(
                f"--labels {labels_path}: shape {labels.shape} does not match the data: expected "
                f"class indices of shape {expect} or targets of shape "
                f"{expect + (source.output_features,)}"
            )
    say = _progress(quiet)
    error_budget, budget_why = _report_budget(error_budget, targets, quantize, state_bits)
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
                x,
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
                    calibration=x if quantize != "float" else None,
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
            data["sweep_data"] = f"calibrated and evaluated on the first {n_sweep} sequences of --data"
        for t in data["targets"]:  # the artifacts move with the directory
            t["path"] = str(out_dir / Path(t["path"]).name)
        rep_mod.write(data, tmp, title=f"{source.name} ({quantize})")
    j, h = out_dir / "report.json", out_dir / "report.html"

    click.echo(f"wrote {j} and {h}")
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


if __name__ == "__main__":  # pragma: no cover
    main()
