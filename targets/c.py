"""The C target: constant-memory streaming C for microcontrollers and hosts.

``emit`` writes the kit ``<prefix>/``, what a firmware compiles: ``<prefix>.c`` / ``<prefix>.h`` (data and
glue), the hand-written runtime headers ``<prefix>.c`` includes (``lmu_runtime.h`` and the kernel family
headers it includes; ``lmu_pade.h``, ``lmu_bandconv.h`` where used), CMakeLists.txt, sources.mk, a Zephyr
module, PlatformIO and Arduino library files and ``examples/main.c``; and in a folder of its own, ``harness/``,
the test harness, the Cortex-M startup and linker scripts and a ``Makefile`` that builds them with the kit
(what ``run``, ``verify`` and ``check`` run: :mod:`lmu_edge.targets.c_harness`).

``quantize="int8"`` emits the integer path (int8 activations, a fixed-point LMU state of ``state_bits``);
``"int16x8"`` the same with int16 activations (zero point 0) and int8 weights, as TFLite's 16x8 mode (16-bit
weights in the fewest matrices that lift the model to 48 dB on the calibration data where int8 ones miss it,
unless ``weight_bits`` is given: ``quantize(widen_db=)``), through ``<prefix>_step_int16`` (portable
activation kernels on every core; the LMU memory kernels are int8's); ``"int16"`` as int16x8 with int16
weights (``weight_bits`` 16 by default; a layer whose int32 bias would not fit at that scale keeps fewer)
and a 32-bit LMU state by default; ``"float"`` emits float32.

Runtimes (:data:`lmu_edge.toolchain.RUNTIMES`; flags, boards and counting live in
:mod:`lmu_edge.toolchain`):

``host``        the harness compiled with the host gcc (-O2), run on the inputs
``cortex-m4``   Cortex-M4 (hard float, DSP kernels) on ``qemu-system-arm -M mps2-an386``
``cortex-m0``   ARMv6-M code (no FPU, integer path only) on the same board: any size
``microbit``    the same ARMv6-M code on QEMU's ``microbit``, a genuine Cortex-M0 with
                16 KB RAM and 256 KB flash (unaligned loads fault there)
``cortex-m7``   Cortex-M7 on ``mps2-an500``; ``cortex-m33`` Cortex-M33 on ``mps2-an505``
                (code at 0x10000000); ``cortex-m55`` Cortex-M55 with Helium on ``mps3-an547``

Integer artifacts are run through their int8 (int16) API: inputs are quantized in
Python exactly as :func:`lmu_edge.intsim.quantize_input` does, and outputs are
compared with the integer reference bit for bit. Instructions per step are
counted with QEMU's ``-icount`` (one instruction = 32 ns of virtual time) and
the board's SysTick counter, so they are deterministic.
"""

from __future__ import annotations

import ctypes
import hashlib
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np

from .. import intsim, irfile, toolchain
from ..errors import ArtifactError, DeviceFitError, QuantizationError
from ..escape import c_comment
from ..precision import ACTIVATION_BITS, DEFAULT_STATE_BITS, STATE_BITS, WEIGHT_BITS, WIDEN_DB  # noqa: F401  (re-exported)
from ..precision import state_bits as state_bits_of
from ..toolchain import ToolMissingError  # noqa: F401  (re-exported: the error a missing tool raises)
from ..version import __version__
from ..widening import SEARCH_STEPS
from . import c_codegen, c_cost
from .c_build import BUILD_DIR, BUILD_OUTPUTS, make, make_what_fits  # noqa: F401  (BUILD_*: the target contract)
from .c_harness import DTYPE_CODES, read_output, run_native, write_input  # noqa: F401  (re-exported)
from .c_kit import RESERVED_PREFIXES, kit_context, write_kit

QUANTIZE = ("float", "int8", "int16x8", "int16")
#: target contract (optional): the implicit Pade realization runs here in float and in integers (lmu_pade.h)
PADE_MODES = ("float", "int")
RUNTIMES = toolchain.RUNTIMES
DEFAULT_RUNTIME = "host"
OPTIONS = {
    "prefix": "model",
    "device": None,
    "weight_bits": None,
    "state_bits": None,
    "coeff_bits": None,
    "weight_rounding": None,
    "widen_db": "auto",
    #: the widening search scores candidates on every k-th calibration sequence, at least this many steps
    #: (lmu_edge.widening.Scorer); None: on every sequence
    "search_steps": SEARCH_STEPS,
    #: the widening's choice checked on calibration sequences its ranges did not see (widening.HeldOut)
    "held_out": True,
    "measure": True,
    #: False: no Cortex-M object is compiled for the report's flash figures (a caller that reads none, e.g. a
    #: test of the integer path); a ``device`` measures them all the same, since its fit depends on them
    "flash": True,
}

#: device profiles: flash and RAM in bytes (what the artifact may use of them)
DEVICES: dict[str, dict[str, Any]] = {
    "cortex-m0-32k": {
        "cpu": "cortex-m0",
        "flash": 256 * 1024,
        "ram": 32 * 1024,
        "example": "a Cortex-M0+ part with 256 KB flash / 32 KB RAM",
    },
    "cortex-m4-128k": {
        "cpu": "cortex-m4",
        "flash": 1024 * 1024,
        "ram": 128 * 1024,
        "example": "a Cortex-M4F part with 1 MB flash / 128 KB RAM",
    },
    "cortex-m4-64k": {
        "cpu": "cortex-m4",
        "flash": 256 * 1024,
        "ram": 64 * 1024,
        "example": "a Cortex-M4F part with 256 KB flash / 64 KB RAM",
    },
    "cortex-m0-16k": {
        "cpu": "cortex-m0",
        "flash": 256 * 1024,
        "ram": 16 * 1024,
        "runtime": "microbit",
        "example": "a Cortex-M0 part with 256 KB flash / 16 KB RAM (nRF51822, QEMU's microbit)",
    },
}
ICOUNT_SHIFT = toolchain.ICOUNT_SHIFT
_need = toolchain.need


def widen_db_for(quantize: str, options: dict):
    """The ``quantize(widen_db=)`` of a mode and options: the mode's :data:`WIDEN_DB` for ``"auto"``
    (None where ``weight_bits`` is given: an explicit width is kept), else the option's number or None."""
    from ..widening import widen_db_option

    v = options.get("widen_db", "auto")
    if v == "auto":
        return None if options.get("weight_bits") else WIDEN_DB.get(quantize)
    return widen_db_option(v, "c", WIDEN_DB.get(quantize, 33.0))


def check_options(quantize: str, options: dict) -> None:
    """Refuse, before any work, a weight width the mode cannot take: int8 and int16x8 store int8 weights
    (2..8 bits), int16 int16 ones (2..16); a ``widen_db`` that is no number; a ``prefix`` that cannot start
    C identifiers; an unknown ``device``, or float C for a device without an FPU."""
    try:
        c_codegen.check_prefix(options.get("prefix") or "model")
    except ValueError as e:
        raise ArtifactError(str(e)) from None
    if str(options.get("prefix") or "model").lower() in RESERVED_PREFIXES:
        raise ArtifactError(
            f"--prefix {options.get('prefix')!r} would name the kit folder like the artifact's "
            f"{'build folders' if str(options.get('prefix')).lower() == 'build' else 'harness folder'}; "
            f"choose another prefix"
        )
    device = options.get("device")
    if device is not None and (not isinstance(device, str) or device not in DEVICES):
        raise ArtifactError(f"unknown --device {device!r}; known devices: {', '.join(sorted(DEVICES))}")
    if device is not None and quantize not in ACTIVATION_BITS and DEVICES[device]["cpu"] == "cortex-m0":
        raise ArtifactError(f"--device {device} has no FPU: the float32 C needs one; convert with --quantize int8")
    steps = options.get("search_steps", OPTIONS["search_steps"])
    if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or steps < 1):
        raise ArtifactError(f"c: search_steps={steps!r} is not a number of steps: give a whole number >= 1, or null")
    if not isinstance(options.get("held_out", True), bool):
        raise ArtifactError(f"c: held_out={options.get('held_out')!r} is not true or false")
    widen = widen_db_for(quantize, options)
    if widen is not None and quantize == "int16":
        raise QuantizationError("c: widen_db does not apply to --quantize int16, whose weights are 16-bit already")
    wb = options.get("weight_bits")
    if wb is None or quantize not in WEIGHT_BITS:
        return
    hi = 16 if quantize == "int16" else 8
    if not 2 <= int(wb) <= hi:
        raise QuantizationError(
            f"--weight-bits {wb} does not fit --quantize {quantize}, whose weights take 2..{hi} bits"
            + (
                "; use --quantize int16 for 16-bit weights throughout"
                + (
                    ", or leave --weight-bits out: int16x8 widens the weights that need it"
                    if quantize == "int16x8"
                    else ""
                )
                if int(wb) > 8 and hi == 8
                else ""
            )
        )


def _describe_widths(qg, int_api: str) -> str:
    """The <prefix>.h line on the integer path's widths: activations, weights, and what took 16 bits."""
    q = qg.metadata["quantization"]
    if q["activation_bits"] == 8 and q.get("widened") is not None:  # int8, mixed precision searched
        acts = "int8 activations" + (
            f" (16-bit in {c_comment(', '.join(q['widened']), 400)}; an {int_api} API)" if q["widened"] else ""
        )
        return f"integer path: {acts}, {q['weight_bits']}-bit weights" + (
            f" (16-bit in {c_comment(', '.join(q['widened_weights']), 400)})" if q.get("widened_weights") else ""
        )
    return f"integer path: {int_api} activations, {q['weight_bits']}-bit weights" + (
        f" (16-bit in {c_comment(', '.join(q['widened']), 400)})" if q.get("widened") else ""
    )


# --- emit ------------------------------------------------------------------------------------


def emit(graph, out_dir, options) -> dict:
    """Write the C sources, runtime headers, harness and Makefile for ``graph`` into ``out_dir``.

    Returns the target's part of the manifest (files, report, ``c`` options); ``options["quantize"]``
    ``"int8"``, ``"int16x8"`` or ``"int16"`` quantizes first and emits the integer path, anything else the
    float32 path."""
    from ..quantization import quantize as _quantize

    out_dir = Path(out_dir)
    mode = str(options.get("quantize"))
    check_options(mode, options)  # the one place the options are checked (convert checks before any work)
    prefix = options.get("prefix") or "model"
    device = options.get("device")
    act_bits = ACTIVATION_BITS.get(mode)
    quantized = act_bits is not None
    int_api = "int16" if act_bits == 16 else "int8"
    report = {}
    if quantized:

        def quantized_code(widen_db):
            qg = _quantize(
                graph,
                options["calibration"],
                weight_bits=int(options.get("weight_bits") or WEIGHT_BITS.get(mode, 8)),
                state_bits=int(state_bits_of(mode, options) or DEFAULT_STATE_BITS),
                coeff_bits=options.get("coeff_bits"),
                activation_bits=int(act_bits or 8),
                weight_rounding=str(options.get("weight_rounding") or "auto"),
                widen_db=widen_db,
                widen_state=not options.get("state_bits"),  # a state width the user chose is kept
                progress=options.get("progress"),
                search_steps=options.get("search_steps", OPTIONS["search_steps"]),
                held_out=options.get("held_out", True) is not False,
                cost=c_cost.Estimate(DEVICES.get(device or "", {}).get("cpu", "cortex-m4")),  # what widening costs
            )
            return qg, c_codegen.generate_int(qg, prefix)

        widen_db = widen_db_for(mode, options)
        qg, code = quantized_code(widen_db)
        info = qg.metadata.get("quantization", {})
        dropped = None
        over = _over_device(device, code) if device is not None and widen_db is not None else None
        if over and (info.get("widened") or info.get("widened_weights")):
            # a device was given: fitting it comes first, and the 16-bit parts only add bytes
            dropped = (
                f"the model with 16 bits in {', '.join(info.get('widened', []) + info.get('widened_weights', []))} "
                f"({info['calibration_sqnr_db']:.1f} dB on the calibration data) {over} of --device {device}, "
                f"so nothing is widened to 16 bits"
            )
            qg, code = quantized_code(None)
        int_api = "int16" if intsim.act_bits(qg) == 16 else "int8"  # int8 with a 16-bit input: an int16 API
        irfile.save(qg, out_dir / "quantized.lmu.npz")
        in_s, in_zp = intsim.input_qparams(qg)
        out_s, out_zp = intsim.output_qparams(qg)
        report["quantization"] = dict(qg.metadata.get("quantization", {}))
        if dropped:
            report["quantization"]["widening_dropped"] = dropped
    else:
        code = c_codegen.generate_float(graph, prefix)
    ctx = {
        "prefix": prefix,
        "PREFIX": prefix.upper(),
        "version": __version__,
        "model_name": c_comment(graph.name),
        "header": f"{prefix}.h",
        "quantized": quantized,
        "int_api": int_api,
        "n_inputs": graph.input_features,
        "n_outputs": graph.output_features,
        "state_bytes": code.state_bytes,
        "state_fields": code.struct_fields(),
        "arrays": code.arrays,
        "objects": code.objects,
        "reset_lines": code.reset_lines,
        "step_lines": code.step_lines,
        "runtimes": toolchain.make_variables(),
        "icount_shift": toolchain.ICOUNT_SHIFT,
        "description": (
            _describe_widths(qg, int_api) + ", "
            f"{qg.metadata['quantization']['state_bits']}-bit fixed-point LMU state, no floating point in "
            f"{prefix}_step_{int_api}"
            if quantized
            else "float32 path"
        ),
    }
    if quantized:
        ctx.update(
            input_scale=c_codegen.c_float(in_s), input_zp=in_zp, output_scale=c_codegen.c_float(out_s), output_zp=out_zp
        )
        # the helpers' double scales: repr round-trips a float64 (the scales intsim quantizes with)
        ctx.update(input_scale_d=repr(float(in_s)), output_scale_d=repr(float(out_s)))
    ctx.update(kit_context(graph, options, prefix, quantized, int_api, qg if quantized else None))
    files = write_kit(out_dir, ctx)
    sizes: dict[str, Any] = {
        "ram_bytes": code.state_bytes,
        "const_data_bytes": code.const_bytes,
        "macs_per_step": code.macs,
    }
    if code.accumulators:  # the bound behind each dense memory's accumulator width (docs/firmware.md)
        sizes["accumulators"] = code.accumulators
    if options.get("flash", True) or device is not None:
        flash = _arm_flash(out_dir, quantized, every_core=bool(options.get("measure", True)))
        dev = DEVICES.get(device or "", {})
        used = flash.get(f"flash_bytes_{dev.get('cpu', '')[-2:]}") or 0
        if quantized and code.wx_bytes and 2 * used > dev.get("flash", 2 * used):
            # the DSP cores' expanded weights (LMU_WX) would take the model past half the device's flash (the
            # other half is the firmware's): the int8 arrays alone
            code = c_codegen.generate_int(qg, prefix, expand_weights=False)
            ctx.update(arrays=code.arrays, objects=code.objects)
            files = write_kit(out_dir, ctx)
            sizes["const_data_bytes"] = code.const_bytes
            flash = _arm_flash(out_dir, quantized, every_core=bool(options.get("measure", True)))
            report.setdefault("quantization", {})["weights_expanded"] = False
    else:
        flash = {"flash_bytes": None, "flash_note": "not measured (flash=False)"}
    sizes.update(flash)
    sizes["expanded_weight_bytes"] = code.wx_bytes  # added on DSP cores by LMU_WX (0: none, or not used)
    report["c"] = {"prefix": prefix, "quantized": quantized, "activation_bits": act_bits, "int_api": int_api, **sizes}
    if device is not None:
        used = _check_fit(
            device, sizes, quantized, graph, int(qg.metadata["quantization"]["state_bits"]) if quantized else 32
        )
        report["c"]["device"] = {
            "name": device,
            **{k: DEVICES[device][k] for k in ("flash", "ram")},
            "fits": True,
            "flash_used": used["flash"],
            "ram_used": used["ram"],
        }
    result: dict[str, Any] = {
        "files": files,
        "report": report,
        "c": {
            "prefix": prefix,
            "kit": prefix,  # the folder a firmware compiles (OUT/<prefix>/); the test harness is in harness/
            "quantized": quantized,
            "activation_bits": act_bits,
            # the widths used (the options say None for "the mode's default")
            "weight_bits": int(qg.metadata["quantization"]["weight_bits"]) if quantized else None,
            "state_bits": int(qg.metadata["quantization"]["state_bits"]) if quantized else None,
            "measure": bool(options.get("measure", True)),
            "state_bytes": code.state_bytes,
        },
    }
    if quantized:
        result["tolerance"] = None  # measured and reported; the integer path is checked bit for bit instead
    return result


def footprint(qgraph) -> tuple:
    """``(constant data bytes, state bytes)`` of the integer C code for the quantized graph ``qgraph``.

    The counts ``emit`` reports as ``const_data_bytes`` and ``ram_bytes`` (the state struct's
    ``sizeof``), from the code generator alone: nothing is written or compiled."""
    code = c_codegen.generate_int(qgraph, "footprint")
    return code.const_bytes, code.state_bytes


def _arm_flash(out_dir: Path, quantized: bool, every_core: bool = True) -> dict:
    """Flash bytes of model.o (text + rodata + data) per Cortex-M core, when the toolchain is here.

    Cortex-M4 and M0 always; M7, M33 and M55 too with ``every_core`` (``measure=True``). The microbit
    runtime compiles the M0 object. RAM is the same on every core: ``ram_bytes``, the state struct."""
    if shutil.which("arm-none-eabi-gcc") is None:
        return {"flash_bytes": None, "flash_note": "arm-none-eabi-gcc not installed"}
    out = {}
    tags = toolchain.OBJECT_TAGS if every_core else ("m4", "m0")
    cpus = tags if quantized else tuple(t for t in tags if t != "m0")
    built = make(out_dir, *(f"model_{cpu}.o" for cpu in cpus)).parent
    for cpu in cpus:
        sec = _sections(built / f"model_{cpu}.o")
        out[f"flash_bytes_{cpu}"] = sec["text"] + sec["rodata"] + sec["data"]
        out[f"sections_{cpu}"] = sec
    out["flash_bytes"] = out["flash_bytes_m4"]
    return out


def _sections(obj: Path) -> dict:
    r = subprocess.run(
        [_need("arm-none-eabi-size", "binutils-arm-none-eabi"), "-A", str(obj)],
        capture_output=True,
        text=True,
        check=True,
    )
    sec = {"text": 0, "rodata": 0, "data": 0, "bss": 0}
    for line in r.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[1].isdigit():
            name = parts[0]
            for k in sec:
                if name.startswith("." + k):
                    sec[k] += int(parts[1])
    return sec


def _over_device(device: str, code) -> str | None:
    """What of the device generated ``code`` exceeds before it is built: its RAM (the state and scratch,
    exact) or its flash (the constant data alone, a lower bound); None when neither does."""
    dev = DEVICES[device]
    if code.state_bytes > dev["ram"]:
        return f"needs {code.state_bytes} bytes of RAM, over the {dev['ram']}"
    if code.const_bytes > dev["flash"]:
        return f"needs {code.const_bytes} bytes of constants, over the {dev['flash']} bytes of flash"
    return None


def _check_fit(device: str, sizes: dict, quantized: bool, graph, state_bits: int = 32) -> dict:
    """Raise :class:`DeviceFitError` when the built model exceeds ``device``; else return the bytes it
    takes there: ``{"flash": ..., "ram": ...}`` (the model's code and constants on the device's core, and
    its state struct; the firmware around it comes on top)."""
    dev = DEVICES[device]
    flash = sizes.get(f"flash_bytes_{dev['cpu'][-2:]}") or sizes.get("flash_bytes") or sizes["const_data_bytes"]
    problems = []
    if flash > dev["flash"]:
        problems.append(f"flash: needs {flash} bytes, the device has {dev['flash']} (over by {flash - dev['flash']})")
    if sizes["ram_bytes"] > dev["ram"]:
        problems.append(
            f"RAM: needs {sizes['ram_bytes']} bytes, the device has {dev['ram']} "
            f"(over by {sizes['ram_bytes'] - dev['ram']})"
        )
    if problems:
        hints = []
        if not quantized:
            hints.append("--quantize int8 (4x smaller weights)")
        dense = any(getattr(getattr(lay, "memory", None), "TYPE", "") == "dense_ss" for lay in graph.lmu_layers)
        if dense and flash > dev["flash"]:  # an O(q) realization stores less, but keeps more scratch in RAM
            hints.append("--prefer flash or --realization rk4 (store O(q) numbers instead of a q*q matrix)")
        if quantized and state_bits > 16:
            hints.append("--state-bits 16 or fewer")
        hints.append("a smaller model (lower order, fewer units)")
        raise DeviceFitError(
            f"the model does not fit --device {device} ({dev['example']}): {'; '.join(problems)}; "
            f"try {', '.join(hints)}",
            problems="; ".join(problems),
        )
    return {"flash": int(flash), "ram": int(sizes["ram_bytes"])}


# --- running -------------------------------------------------------------------------------


def _is_quantized(art) -> bool:
    return bool(art.manifest.get("c", {}).get("quantized"))


def _qgraph(art):
    qg = art.quantized  # the artifact's integer graph, read once from its sealed bytes
    if qg is None:
        raise ArtifactError(f"{art.path}: quantized.lmu.npz is missing; convert the model again")
    return qg


def run(art, x, runtime):
    """Run the compiled C of ``art`` on ``x`` ``(N, T, F)`` under ``runtime`` (host or a QEMU core).

    Returns the dequantized (or float) outputs; ``run_native`` also returns the harness's statistics."""
    g = art.graph
    if _is_quantized(art):
        qg = _qgraph(art)
        xq = intsim.quantize_input(qg, x).astype(intsim.act_dtype(qg))
        yq, _ = _host_run(art, xq) if runtime == "host" else run_native(art, xq, runtime)
        y = intsim.dequantize_output(qg, yq)
    else:
        y, _ = run_native(art, x.astype(np.float32), runtime)
        y = y.astype(np.float64)
    return y if g.output_is_sequence else y[:, -1]


def _host_run(art, xq: np.ndarray) -> tuple:
    """``run_native(art, xq, "host")``, kept on ``art`` for the next call on the same input and the same
    build: convert's verification runs the artifact, then ``check`` compares the same host outputs with the
    integer reference (the build folder is named by the hash of its sources: an edited source is another
    build, run again)."""
    exe = make(art.path, "harness_host", sealed=getattr(art, "sealed", None))
    key = (str(exe), xq.dtype.str, xq.shape, hashlib.sha256(np.ascontiguousarray(xq).tobytes()).digest())
    last = getattr(art, "_c_host_run", None)
    if last is not None and last[0] == key:
        return last[1], dict(last[2])
    y, stats = run_native(art, xq, "host", exe=exe)
    art._c_host_run = (key, y, dict(stats))
    return y, stats


#: the steps of the first sequence over which ``check`` counts instructions per step under QEMU
MEASURED_STEPS = 200


def check(art, x) -> dict:
    """Bit-exactness of the host build against the integer reference (integer artifacts), and
    instructions per step on Cortex-M under QEMU when the toolchain is installed."""
    out: dict[str, Any] = {}
    man = art.manifest.get("c", {})
    measure = man.get("measure") and shutil.which("qemu-system-arm") and shutil.which("arm-none-eabi-gcc")
    cores = ("cortex-m4", "cortex-m0") if man.get("quantized") else ("cortex-m4",)
    # every image this check runs, in one make run (as many at once as there are cores)
    images = [f"model_{toolchain.ARM_RUNTIMES[rt].tag}.elf" for rt in cores] if measure else []
    if man.get("quantized"):
        images.insert(0, "harness_host")
    left = make_what_fits(art.path, images, sealed=getattr(art, "sealed", None)) if images else {}
    if man.get("quantized"):
        qg = _qgraph(art)
        xq = intsim.quantize_input(qg, x)
        y_ref = intsim.run_int(qg, xq)
        y_c, stats = _host_run(art, xq.astype(intsim.act_dtype(qg)))  # run's, when it ran this input
        out["bit_exact_host"] = bool(np.array_equal(y_c.astype(np.int64), y_ref))
        out["state_bytes_reported_by_c"] = stats.get("state_bytes")
        if not out["bit_exact_host"]:
            out["passed"] = False
    if measure:
        probe = x[:1, : min(x.shape[1], MEASURED_STEPS)]
        out["instructions_measured_steps"] = int(probe.shape[1])
        for rt in cores:
            image = f"model_{toolchain.ARM_RUNTIMES[rt].tag}.elf"
            if image in left:  # larger than QEMU's board: converted all the same, not measured there
                out[f"instructions_note_{rt.replace('cortex-', '')}"] = f"not measured: {left[image]}"
                continue
            data = (
                intsim.quantize_input(_qgraph(art), probe).astype(intsim.act_dtype(_qgraph(art)))
                if man.get("quantized")
                else probe.astype(np.float32)
            )
            _, stats = run_native(art, data, rt)
            out[f"instructions_per_step_{rt.replace('cortex-', '')}"] = round(stats["instructions_per_step"], 1)
    return out


# --- streaming through ctypes -------------------------------------------------------------------


class CStream:
    """Drive the compiled C one sample at a time (host build, through ctypes)."""

    def __init__(self, art):
        self.art = art
        lib_path = make(art.path, "libmodel.so", sealed=getattr(art, "sealed", None))
        p = art.manifest["c"]["prefix"]
        self.quantized = _is_quantized(art)
        self.int_dtype = intsim.act_dtype(_qgraph(art)) if self.quantized else np.int8
        api = "int16" if self.int_dtype == np.int16 else "int8"
        try:
            self.lib = ctypes.CDLL(str(lib_path))
            self._size = getattr(self.lib, f"{p}_state_size")
            self._reset = getattr(self.lib, f"{p}_reset")
            self._step = getattr(self.lib, f"{p}_step_{api}" if self.quantized else f"{p}_step")
        except (OSError, AttributeError) as e:
            raise ArtifactError(
                f"{art.path}: the library built from it cannot be used ({' '.join(str(e).split())[:160]}); "
                f"convert the model again"
            ) from None
        self._size.restype = ctypes.c_size_t
        self.n_in, self.n_out = art.graph.input_features, art.graph.output_features
        self.reset()

    def reset(self, batch: int = 1):
        """Zero (reset) ``batch`` independent states through the model's ``_reset``."""
        self.batch = int(batch)
        size = self._size()
        self.states = [ctypes.create_string_buffer(size) for _ in range(self.batch)]
        for s in self.states:
            self._reset(s)

    def step(self, x_t):
        """One step on float inputs ``(F,)`` or ``(batch, F)``; returns float outputs of the same rank."""
        x = np.asarray(x_t, np.float64)
        single = x.ndim == 1
        x = x.reshape(-1, self.n_in)
        if x.shape[0] != self.batch:
            raise ArtifactError(f"step: expected {self.batch} samples (the batch given to reset), got {x.shape[0]}")
        out = np.empty((self.batch, self.n_out))
        for b, s in enumerate(self.states):
            if self.quantized:
                qg = _qgraph(self.art)
                xq = intsim.quantize_input(qg, x[b][None, None])[0, 0].astype(self.int_dtype)
                yq = np.zeros(self.n_out, self.int_dtype)
                self._step(s, xq.ctypes.data_as(ctypes.c_void_p), yq.ctypes.data_as(ctypes.c_void_p))
                out[b] = intsim.dequantize_output(qg, yq)
            else:
                xf = np.ascontiguousarray(x[b], np.float32)
                yf = np.zeros(self.n_out, np.float32)
                self._step(s, xf.ctypes.data_as(ctypes.c_void_p), yf.ctypes.data_as(ctypes.c_void_p))
                out[b] = yf
        return out[0] if single else out

    def step_int8(self, xq):
        """One step of the integer API on int8 inputs ``(batch, F)`` (int16 for an int16x8 or int16 artifact);
        returns the integer outputs."""
        dt = self.int_dtype
        xq = np.ascontiguousarray(np.asarray(xq, dt).reshape(self.batch, self.n_in))
        out = np.zeros((self.batch, self.n_out), dt)
        for b, s in enumerate(self.states):
            row = np.ascontiguousarray(xq[b])
            y = np.zeros(self.n_out, dt)
            self._step(s, row.ctypes.data_as(ctypes.c_void_p), y.ctypes.data_as(ctypes.c_void_p))
            out[b] = y
        return out


def stream(art, runtime):
    """A :class:`CStream` over the host build of ``art``; other runtimes run whole sequences only."""
    if runtime != "host":
        raise ArtifactError(
            f"stream() drives the host build through ctypes; runtime {runtime!r} runs whole sequences only (use run())"
        )
    return CStream(art)
