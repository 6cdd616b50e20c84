"""The C artifact as a library a firmware drops in: ``OUT/<prefix>/`` holds ``<prefix>.c``, ``<prefix>.h``,
exactly the runtime headers the source includes, CMake, sources.mk, Zephyr, PlatformIO and Arduino files and
``examples/main.c``; the harness, startup code, linker scripts and Makefile the C target's own runs use go to
a folder of their own, ``OUT/harness/``, which builds from the kit (docs/firmware.md)."""

from __future__ import annotations

import functools
import re
import shutil
from pathlib import Path

import numpy as np

from .. import intsim, toolchain
from ..errors import LmuEdgeError
from ..resources import templates_dir
from .c_code import c_float

TEMPLATES = templates_dir()  # the packaged firmware_templates, in a checkout or an install


@functools.lru_cache(maxsize=None)
def jinja():
    """The Jinja environment of the packaged templates (strict: a missing variable is an error). One per
    process: it keeps each template compiled (and recompiles one whose file changed), where compiling the
    thirteen anew took a quarter of a small model's C conversion."""
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=False,
    )


#: the folder of the artifact holding the test harness, startup code, linker scripts and Makefile (beside the
#: kit folder: a firmware needs none of them); its Makefile builds from ../<prefix>/ into build/ there
HARNESS_DIR = "harness"
HARNESS_FILES = tuple(f"{HARNESS_DIR}/{n}" for n in ("harness.c", "startup.c", *toolchain.LINKER_SCRIPTS, "Makefile"))
#: the names a prefix may not take, any case: the harness folder's, and build (the build's folders are skipped)
RESERVED_PREFIXES = (HARNESS_DIR, "build")
#: the first calibration sequence's steps the kit's examples/main.c streams, at most
EXAMPLE_STEPS = 1000
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.M)


def runtime_version() -> tuple:
    """``(LMU_RUNTIME_VERSION, its string)`` of the packaged ``lmu_runtime.h``."""
    text = (TEMPLATES / "lmu_runtime.h").read_text()
    number = re.search(r"^#define LMU_RUNTIME_VERSION (\d+)$", text, re.M)
    string = re.search(r'^#define LMU_RUNTIME_VERSION_STRING "([^"]+)"$', text, re.M)
    if number is None or string is None:
        raise LmuEdgeError("firmware_templates/lmu_runtime.h defines no LMU_RUNTIME_VERSION; reinstall lmu-edge")
    return int(number.group(1)), string.group(1)


def runtime_headers(source: str) -> list:
    """The runtime headers ``source`` (a generated .c) includes, directly or through one another, in the
    order first met: exactly the packaged headers a firmware needs beside it."""
    found: list = []
    todo = _INCLUDE.findall(source)
    while todo:
        name = todo.pop(0)
        if name in found or not (TEMPLATES / name).is_file():
            continue  # the model's own header (written, not copied) and repeats
        found.append(name)
        todo.extend(_INCLUDE.findall((TEMPLATES / name).read_text()))
    return found


def _output_semantics(graph) -> tuple:
    """``(when, what)``: when an output is the model's answer, and what the outputs are, for <prefix>.h."""
    last = graph.layers[-1] if graph.layers else None
    act = getattr(last, "activation", "linear") if last is not None else "linear"
    if getattr(last, "TYPE", "") == "lmu":
        act = "linear"  # an LMU layer's output is its hidden state (or memory): no classifier activation
    what = {
        "softmax": "probabilities (a softmax: non-negative, they sum to 1; the class is the largest)",
        "sigmoid": "probabilities (a sigmoid per output, each in [0, 1])",
        "linear": "unbounded values: logits if the model was trained as a classifier (the class is the largest), "
        "else the regression's values",
    }.get(act, f"the {act} activations of the last layer")
    if graph.output_is_sequence:
        when = "every step's output is an answer (the model returns a sequence)."
    else:
        when = (
            "only the output after a sequence's last step is the model's answer (it returns the last step only); "
            "the outputs of earlier steps are partial. Call reset before the next sequence."
        )
    return when, what


def kit_context(graph, options, prefix: str, quantized: bool, int_api: str, qg) -> dict:
    """What the kit's templates need besides the model's code: sequence semantics, names, the example's data."""
    cal = options.get("calibration")
    if cal is not None:
        seq = np.asarray(cal, np.float64)[0]
        origin = "the first calibration sequence"
    else:  # a float conversion without calibration data: a seeded probe, as convert's check uses
        T = graph.seq_len or 64
        seq = np.random.default_rng(0).standard_normal((T, graph.input_features))
        origin = "a seeded random sequence (no calibration data was given)"
    cal_steps = int(seq.shape[0])
    seq = seq[:EXAMPLE_STEPS]
    if graph.seq_len:
        seq_text = f"the model was trained on sequences of {graph.seq_len} steps"
    else:
        seq_text = f"the model fixes no sequence length (the calibration sequences had {cal_steps} steps)"
    when, what = _output_semantics(graph)
    if quantized:
        values = intsim.quantize_input(qg, seq[None])[0].astype(np.int64)
        body = ",\n".join("    {" + ", ".join(str(int(v)) for v in row) + "}" for row in values)
    else:
        body = ",\n".join("    {" + ", ".join(c_float(v) for v in row) + "}" for row in seq)
    bits = 16 if int_api == "int16" else 8
    number, string = runtime_version()
    library_name = prefix if prefix[0].isalpha() else f"lmu{prefix}"
    return {
        "seq_len": graph.seq_len,
        "seq_text": seq_text,
        "output_when": when,
        "output_kind": what,
        "output_is_sequence": graph.output_is_sequence,
        "int_min": -(1 << (bits - 1)),
        "int_max": (1 << (bits - 1)) - 1,
        "runtime_version": number,
        "runtime_version_string": string,
        "library_name": library_name,
        "sentence": f"The lmu-edge model {prefix} as C99 for microcontrollers.",
        "json_description": f"lmu-edge model {prefix}: constant-memory streaming C99 (generated)",
        "steps": int(seq.shape[0]),
        "steps_note": f" of {cal_steps}, {origin}" if cal_steps > seq.shape[0] else f", {origin}",
        "sequence_body": body,
        "in_ctype": f"{int_api}_t" if quantized else "float",
        "out_ctype": f"{int_api}_t" if quantized else "float",
    }


def write_kit(out_dir: Path, ctx: dict) -> list:
    """Write the kit ``out_dir/<prefix>/`` (the model's source and header, the runtime headers it includes,
    CMakeLists.txt, sources.mk, a Zephyr module, library.json, library.properties, examples/main.c) and the
    harness, startup code, linker scripts and Makefile in ``out_dir/harness/``. Returns the files written,
    relative."""
    env = jinja()
    prefix = ctx["prefix"]
    kit = Path(out_dir) / prefix
    (kit / "zephyr").mkdir(parents=True, exist_ok=True)
    (kit / "examples").mkdir(exist_ok=True)
    source = env.get_template("model.c.j2").render(**ctx)
    headers = runtime_headers(source)
    ctx = dict(ctx, headers=[f"{prefix}.h", *headers])
    kit_files = [f"{prefix}.c", f"{prefix}.h", *headers]
    ctx["kit_files"] = kit_files
    written = {
        f"{prefix}.c": source,
        f"{prefix}.h": env.get_template("model.h.j2").render(**ctx),
        "CMakeLists.txt": env.get_template("kit/CMakeLists.txt.j2").render(**ctx),
        "sources.mk": env.get_template("kit/sources.mk.j2").render(**ctx),
        "zephyr/module.yml": env.get_template("kit/zephyr_module.yml.j2").render(**ctx),
        "zephyr/CMakeLists.txt": env.get_template("kit/zephyr_CMakeLists.txt.j2").render(**ctx),
        "zephyr/Kconfig": env.get_template("kit/zephyr_Kconfig.j2").render(**ctx),
        "library.json": env.get_template("kit/library.json.j2").render(**ctx),
        "library.properties": env.get_template("kit/library.properties.j2").render(**ctx),
        "examples/main.c": env.get_template("kit/main.c.j2").render(**ctx),
    }
    for name, text in written.items():
        (kit / name).write_text(text)
    for name in headers:
        shutil.copyfile(TEMPLATES / name, kit / name)
    harness = Path(out_dir) / HARNESS_DIR
    harness.mkdir(exist_ok=True)
    for name, template in (("harness.c", "harness.c.j2"), ("Makefile", "Makefile.j2")):
        (harness / name).write_text(env.get_template(template).render(**ctx))
    for name in ("startup.c", *toolchain.LINKER_SCRIPTS):
        shutil.copyfile(TEMPLATES / name, harness / name)
    names = [*kit_files[:2], *headers, *(n for n in written if n not in kit_files)]
    return [f"{prefix}/{n}" for n in names] + list(HARNESS_FILES)
