"""TensorFlow Lite Micro with CMSIS-NN against lmu-edge's C on the Cortex-M4 (QEMU mps2-an386, -icount).

    python bench/tflm_m4.py --tflm TFLM_CHECKOUT --cache BUILD_DIR [--steps 200] [--models digits bench]

Builds TFLite Micro (TFLM) for the Cortex-M4 with its CMSIS-NN kernels from a local checkout (the script
downloads nothing), links lmu-edge's own int8 TFLite export of each model into a small C++ harness and runs
it next to lmu-edge's default C (``--quantize int8 --device cortex-m4-128k``) on the same inputs, both on
QEMU's mps2-an386 board with ``-icount`` (exact instruction counts; SysTick around each step). Prints, per
model and runtime: instructions per step, flash (model + runtime: the text, rodata and data that the
linked image keeps from TFLM's and CMSIS-NN's objects plus the .tflite, or model.o for lmu-edge's C), RAM
(TFLM's arena in use; the C's state struct, its report's ``ram_bytes``), and how many nodes fell back to
TFLM's reference kernels: a node of an op that has a CMSIS-NN kernel in this build (FULLY_CONNECTED, ADD,
MUL, SOFTMAX, MAXIMUM / MINIMUM) that executed no CMSIS-NN ``arm_*`` function, read from QEMU's execution
trace of one step (``-d exec``) of a second image in which each op's invoke is wrapped by a marker call
that starts its node. Ops CMSIS-NN has no kernel for (QUANTIZE, TANH, LOGISTIC, ...) run TFLM's reference
kernels by design and are listed apart. Also checks TFLM's outputs against LiteRT on the same .tflite and
the same inputs (state fed back step by step): the largest difference in output LSBs is printed. Prints,
asserts nothing; not in CI (it needs the checkout).

Getting the sources (no network is used here). TFLM's Makefile looks for its dependencies in
``tensorflow/lite/micro/tools/make/downloads/`` and skips a download when the folder exists, so put each
repository, at the commit TFLM pins (see that folder's ``*_download.sh`` scripts and
``third_party_downloads.inc`` in your checkout), there:

    downloads/cmsis_nn        github.com/ARM-software/CMSIS-NN     (ext_libs/cmsis_nn_download.sh)
    downloads/cmsis           github.com/ARM-software/CMSIS_6      (ext_libs/cmsis_download.sh)
    downloads/cmsis/Cortex_DFP  github.com/ARM-software/Cortex_DFP (ext_libs/cmsis_download.sh)
    downloads/flatbuffers     github.com/google/flatbuffers, tag of flatbuffers_download.sh, with
                              ../flatbuffers.patch applied (patch -p1) and BUILD files removed
    downloads/gemmlowp        github.com/google/gemmlowp           (third_party_downloads.inc)
    downloads/ruy             github.com/google/ruy                (third_party_downloads.inc)
    downloads/kissfft         github.com/mborgerding/kissfft v130, third_party/kissfft/kissfft.patch applied
    downloads/pigweed         pigweed (pigweed_download.sh's commit; its GitHub mirror google/pigweed has it),
                              pigweed.patch applied

Also needed: arm-none-eabi-gcc and newlib (Debian gcc-arm-none-eabi, libnewlib-arm-none-eabi), the C++
library (libstdc++-arm-none-eabi-newlib), qemu-system-arm, and Pillow / numpy for the Python that runs
this script (TFLM's Makefile runs Python generators). The build compiles the TFLM core, the kernels of the
ops lmu-edge's TFLite exports use and CMSIS-NN's sources, with TFLM's own Makefile rules and flags
(TARGET=cortex_m_generic TARGET_ARCH=cortex-m4 OPTIMIZED_KERNEL_DIR=cmsis_nn BUILD_TYPE=release, the
system arm-none-eabi-gcc), into ``--cache``; the checkout is only read.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MAKE_DIR = "tensorflow/lite/micro/tools/make"
DOWNLOADS = ("cmsis_nn", "cmsis", "cmsis/Cortex_DFP", "flatbuffers", "gemmlowp", "ruy", "kissfft", "pigweed")
KERNELS = "tensorflow/lite/micro/kernels/"
#: kernel sources of the ops lmu-edge's TFLite exports use (CMSIS-NN's where the build has one)
KERNEL_SRCS = (
    "cmsis_nn/fully_connected fully_connected_common cmsis_nn/add add_common cmsis_nn/mul mul_common "
    "cmsis_nn/softmax softmax_common cmsis_nn/maximum_minimum quantize quantize_common dequantize "
    "dequantize_common tanh logistic logistic_common concatenation reshape reshape_common kernel_util"
).split()
#: TFLM core sources the interpreter does not need (test helpers, recording allocators, LSTM utilities)
CORE_SKIP = re.compile(
    r"(fake_micro_context|hexdump|mock_micro_graph|recording_|test_helper|internal/.*tensor_utils)\.cc$"
)
#: CMSIS-NN's convolution sources that its FULLY_CONNECTED kernel calls (batched int8 inputs)
CMSIS_NN_FILES = r"/arm_convolve_(1x1_s8_fast|get_buffer_sizes_s8)\.c$"
CMSIS_NN_DIRS = ("FullyConnected", "BasicMath", "NNSupport", "Softmax", "Activation", "Concatenation")
#: ops that have a CMSIS-NN kernel in this build: a node of these that runs no arm_* function fell back
CMSIS_OPS = {"FULLY_CONNECTED", "ADD", "MUL", "SOFTMAX", "MAXIMUM", "MINIMUM"}
#: TFLite op name -> MicroMutableOpResolver method
RESOLVER = {
    "FULLY_CONNECTED": "AddFullyConnected",
    "ADD": "AddAdd",
    "MUL": "AddMul",
    "SUB": "AddSub",
    "SOFTMAX": "AddSoftmax",
    "MAXIMUM": "AddMaximum",
    "MINIMUM": "AddMinimum",
    "QUANTIZE": "AddQuantize",
    "DEQUANTIZE": "AddDequantize",
    "TANH": "AddTanh",
    "LOGISTIC": "AddLogistic",
    "CONCATENATION": "AddConcatenation",
    "RESHAPE": "AddReshape",
    "RELU": "AddRelu",
}

SUBSET_MK = """include {makefile}
WANT := {want}
SUBSET_OBJS := $(filter $(addprefix %/,$(WANT)),$(MICROLITE_LIB_OBJS) $(MICROLITE_KERNEL_OBJS) \\
  $(MICROLITE_THIRD_PARTY_KERNEL_OBJS))
{lib}: $(SUBSET_OBJS)
\t@rm -f $@
\t$(AR) $(ARFLAGS) $@ $^
print_flags:
\t@echo "CXX=$(CXX)"
\t@echo "CXXFLAGS=$(CXXFLAGS) $(INCLUDES)"
\t@echo "LDFLAGS=$(LDFLAGS)"
"""

HARNESS = r"""// lmu-edge bench/tflm_m4.py: one TFLite step model under TFLM, state fed back, SysTick per step
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "tensorflow/lite/micro/micro_interpreter.h"
#include "tensorflow/lite/micro/micro_mutable_op_resolver.h"
#include "tensorflow/lite/schema/schema_generated.h"
#include "bench_data.h"

#define SYST_CSR (*(volatile uint32_t *)0xE000E010u)
#define SYST_RVR (*(volatile uint32_t *)0xE000E014u)
#define SYST_CVR (*(volatile uint32_t *)0xE000E018u)

extern "C" void __attribute__((noinline)) lmu_node_mark(int k) { __asm__ volatile("" ::"r"(k) : "memory"); }

#if TRACE  // each op's invoke wrapped: a call of lmu_node_mark starts every node in the execution trace
typedef TfLiteStatus (*InvokeFn)(TfLiteContext *, TfLiteNode *);
static InvokeFn orig[N_OPS];
template <int K>
static TfLiteStatus Wrap(TfLiteContext *c, TfLiteNode *n) {
  lmu_node_mark(K);
  return orig[K](c, n);
}
#endif

alignas(16) static uint8_t arena[ARENA_BYTES];

int main(void) {
  const tflite::Model *model = tflite::GetModel(model_tflite);
  tflite::MicroMutableOpResolver<N_OPS> resolver;  // automatic: no static destructors (no __dso_handle)
  RESOLVER_CALLS
#if TRACE
  static const tflite::BuiltinOperator codes[] = {OP_CODES};
  static const InvokeFn wraps[] = {WRAPS};
  for (int k = 0; k < N_OPS; ++k) {
    TFLMRegistration *r = const_cast<TFLMRegistration *>(resolver.FindOp(codes[k]));
    orig[k] = r->invoke;
    r->invoke = wraps[k];
  }
#endif
  tflite::MicroInterpreter interp(model, resolver, arena, sizeof(arena));
  if (interp.AllocateTensors() != kTfLiteOk) { printf("tflm: AllocateTensors failed\n"); return 1; }
  for (int i = 0; i < N_STATES; ++i) memset(interp.input(state_in[i])->data.raw, 0, interp.input(state_in[i])->bytes);
  SYST_RVR = 0xFFFFFFu; SYST_CVR = 0; SYST_CSR = 5u;
  uint64_t ticks = 0;
  for (int t = 0; t < N_STEPS; ++t) {
    memcpy(interp.input(X_INDEX)->data.raw, x_data + t * X_BYTES, X_BYTES);
    const uint32_t t0 = SYST_CVR;
    if (interp.Invoke() != kTfLiteOk) { printf("tflm: Invoke failed\n"); return 1; }
    const uint32_t t1 = SYST_CVR;
    ticks += (t0 - t1) & 0xFFFFFFu;
    for (int i = 0; i < N_STATES; ++i) {
      const TfLiteTensor *s = interp.output(state_out[i]);
      memcpy(interp.input(state_in[i])->data.raw, s->data.raw, s->bytes);
    }
    const TfLiteTensor *y = interp.output(Y_INDEX);
    printf("y");
    for (size_t k = 0; k < y->bytes / Y_ELEM; ++k)
      printf(" %d", Y_ELEM == 1 ? (int)y->data.int8[k] : (int)y->data.i16[k]);
    printf("\n");
  }
  printf("tflm: steps=%d ticks=%lu arena=%u\n", N_STEPS, (unsigned long)ticks, (unsigned)interp.arena_used_bytes());
  return 0;
}
"""


def die(msg: str) -> None:
    print(f"tflm_m4.py: {msg}", file=sys.stderr)
    sys.exit(2)


def run(cmd, cwd=None, env=None, timeout=3600) -> str:
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        die(f"{' '.join(map(str, cmd[:3]))} ... failed ({r.returncode}): {(r.stderr or r.stdout)[-1500:]}")
    return r.stdout


def build_tflm(tflm: Path, cache: Path, jobs: int) -> dict:
    """Compile the TFLM subset with TFLM's own rules into cache; returns the library and the flags."""
    down = tflm / MAKE_DIR / "downloads"
    missing = [d for d in DOWNLOADS if not (down / d).is_dir()]
    if not (tflm / MAKE_DIR / "Makefile").is_file():
        die(f"{tflm} is not a tflite-micro checkout (no {MAKE_DIR}/Makefile); pass --tflm CHECKOUT")
    if missing:
        die(f"{down} lacks {', '.join(missing)}; place them as this script's --help says")
    for tool in ("arm-none-eabi-g++", "qemu-system-arm", "arm-none-eabi-size"):
        if shutil.which(tool) is None:
            die(f"{tool} is not installed (Debian: gcc-arm-none-eabi libstdc++-arm-none-eabi-newlib qemu-system-arm)")
    cache.mkdir(parents=True, exist_ok=True)
    lib = cache / "libtflm_subset.a"
    srcs = [f"{KERNELS}{k}.cc" for k in KERNEL_SRCS]
    want = [re.sub(r"\.(cc|c)$", ".o", s) for s in srcs]
    args = [
        "TARGET=cortex_m_generic",
        "TARGET_ARCH=cortex-m4",
        "OPTIMIZED_KERNEL_DIR=cmsis_nn",
        "BUILD_TYPE=release",
        f"TARGET_TOOLCHAIN_ROOT={Path(shutil.which('arm-none-eabi-gcc')).parent}/",
        f"BASE_GENDIR={cache / 'gen'}",
    ]
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    mk = cache / "subset.mk"
    lists = {}
    for what in ("list_library_sources", "list_third_party_sources"):
        out = run(["make", "-s", "-f", f"{MAKE_DIR}/Makefile", *args, what], cwd=tflm, env=env)
        lists[what] = out.split()
    core = [s for s in lists["list_library_sources"] if not s.startswith(KERNELS) and not s.startswith("signal/")]
    core = [s for s in core if not CORE_SKIP.search(s)]
    nn = [
        s
        for s in lists["list_third_party_sources"]
        if re.search(rf"/({'|'.join(CMSIS_NN_DIRS)})Functions/", s) or re.search(CMSIS_NN_FILES, s)
    ]
    want = [re.sub(r"\.(cc|c)$", ".o", s) for s in core + srcs + nn]
    mk.write_text(SUBSET_MK.format(makefile=f"{MAKE_DIR}/Makefile", want=" ".join(want), lib=lib))
    print(f"building TFLM ({len(want)} sources) into {cache} ...", flush=True)
    run(["make", "-s", "-f", str(mk), *args, f"-j{jobs}", str(lib)], cwd=tflm, env=env, timeout=7200)
    flags = dict(
        ln.split("=", 1)
        for ln in run(["make", "-s", "-f", str(mk), *args, "print_flags"], cwd=tflm, env=env).splitlines()
        if "=" in ln
    )
    return {"lib": lib, **flags}


def _model(name: str, steps: int):
    """The graph, calibration data and one input stream ``(1, steps, F)`` of one model.

    bench: bench/kernels.py's bench model (order 64, theta 200, Dense(8) hidden, dense ZOH), seeded normal
    calibration and input; digits: the shipped Keras digits model, its calibration set (the first 64
    sequences) and its test digits played one after the other."""
    import lmu_edge

    rng = np.random.default_rng(0)
    if name == "bench":
        sys.path.insert(0, str(ROOT / "tests"))
        from graphs import chain

        g = lmu_edge.fold(chain(rng, n_in=1, q=64, theta=200.0, units=8), "zoh")
        cal = rng.standard_normal((2, 2000, 1))
        return g, cal, np.random.default_rng(1).standard_normal((1, steps, 1))
    models = ROOT / "examples" / "models"
    g = lmu_edge.load(models / "keras_digits.keras")
    test = np.load(models / "keras_digits_test_x.npy")
    x = test.reshape(-1, test.shape[-1])[:steps][None].astype(np.float64)
    return g, np.load(models / "digits_calibration_x.npy")[:64], x


def _header(model: bytes, xq: np.ndarray, io: dict, ops: list, trace: bool) -> str:
    """bench_data.h: the model, the quantized inputs and the tensor indices the harness uses."""
    names = [t["name"] for t in io["inputs"]]
    outs = [t["name"] for t in io["outputs"]]
    states = io.get("states", [])
    x_index = next(i for i, n in enumerate(names) if n not in states)
    y_index = next(i for i, n in enumerate(outs) if n not in {f"{s}_out" for s in states})
    y_elem = 1 if io["outputs"][y_index]["dtype"] == "int8" else 2
    calls = " ".join(f"resolver.{RESOLVER[op]}();" for op in ops)
    arr = lambda b: ",".join(str(v) for v in b)  # noqa: E731  (one line beside its only use)
    return "\n".join(
        [
            f"#define N_STEPS {xq.shape[0]}",
            f"#define X_BYTES {xq[0].nbytes}",
            f"#define X_INDEX {x_index}",
            f"#define Y_INDEX {y_index}",
            f"#define Y_ELEM {y_elem}",
            f"#define N_STATES {len(states)}",
            f"#define N_OPS {len(ops)}",
            "#define ARENA_BYTES (256 * 1024)",
            f"#define TRACE {int(trace)}",
            f"#define RESOLVER_CALLS {calls}",
            f"#define OP_CODES {', '.join(f'tflite::BuiltinOperator_{op}' for op in ops)}",
            f"#define WRAPS {', '.join(f'Wrap<{k}>' for k in range(len(ops)))}",
            f"static const int state_in[] = {{{arr([names.index(s) for s in states]) or 0}}};",
            f"static const int state_out[] = {{{arr([outs.index(f'{s}_out') for s in states]) or 0}}};",
            f"alignas(16) static const unsigned char model_tflite[] = {{{arr(model)}}};",
            f"static const unsigned char x_data[] = {{{arr(np.ascontiguousarray(xq).view(np.uint8).ravel())}}};",
            "",
        ]
    )


def _sizes_from_map(map_text: str, lib: Path) -> int:
    """Flash (text + rodata + data) the image keeps from TFLM's library objects, read from the link map."""
    total = 0
    name = lib.name
    for mt in re.finditer(
        r"^ (\.text|\.rodata|\.data)\S*\s*(?:\n\s+)?0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+(\S+)", map_text, re.M
    ):
        if name in mt.group(4) and int(mt.group(2), 16) != 0:
            total += int(mt.group(3), 16)
    return total


def run_tflm(build: dict, tflm: Path, work: Path, tfl_art, xq: np.ndarray, startup: Path, ldscript: Path, trace: bool):
    """Compile, link and run the TFLM harness; returns outputs, stats and (traced) the executed PCs by node."""
    from lmu_edge import toolchain

    io = json.loads((tfl_art.path / "io.json").read_text())
    model = (tfl_art.path / "model.tflite").read_bytes()
    ops = sorted(set(io["ops"]))
    unknown = [o for o in ops if o not in RESOLVER]
    if unknown:
        die(f"the export uses {', '.join(unknown)}, which this harness does not register; add it to RESOLVER")
    tag = "trace" if trace else "time"
    d = work / tag
    d.mkdir(parents=True, exist_ok=True)
    (d / "bench_data.h").write_text(_header(model, xq, io, ops, trace))
    (d / "harness.cc").write_text(HARNESS)
    cxx = build["CXX"]
    cxxflags = build["CXXFLAGS"].split()
    cpu = [f for f in cxxflags if f.startswith(("-mcpu", "-mfloat-abi", "-mfpu", "-mthumb"))]
    run([cxx, *cxxflags, f"-I{d}", "-c", str(d / "harness.cc"), "-o", str(d / "harness.o")], cwd=tflm)
    run(["arm-none-eabi-gcc", *cpu, "-O2", "-c", str(startup), "-o", str(d / "startup.o")])
    elf = d / "tflm.elf"
    run(
        [
            cxx, *cpu, *toolchain.ARM_LINK, "-T", str(ldscript), f"-Wl,-Map={d / 'tflm.map'}",
            str(d / "harness.o"), str(d / "startup.o"), str(build["lib"]), "-lm", "-o", str(elf),
        ]
    )  # fmt: skip
    extra = ["-d", "exec,nochain", "-D", str(d / "exec.log")] if trace else []
    cmd = toolchain.qemu_command("cortex-m4", elf)
    out = run(cmd[:-2] + extra + cmd[-2:], cwd=d, timeout=3600)
    ys = [[int(v) for v in ln.split()[1:]] for ln in out.splitlines() if ln.startswith("y")]
    stats = next(
        {k: int(v) for k, v in (kv.split("=") for kv in ln.split()[1:])}
        for ln in out.splitlines()
        if ln.startswith("tflm:")
    )
    res = {
        "y": np.array(ys),
        "insn": toolchain.instructions(stats["ticks"], "cortex-m4") / stats["steps"],
        "arena": stats["arena"],
        "flash": _sizes_from_map((d / "tflm.map").read_text(), build["lib"]) + len(model),
        "elf": elf,
    }
    if trace:
        res["nodes"] = _functions_by_node(elf, d / "exec.log")
    return res


def _functions_by_node(elf: Path, log: Path) -> list:
    """The functions each node of the last Invoke executed, from QEMU's -d exec trace (marks split nodes)."""
    syms = []
    for ln in run(["arm-none-eabi-nm", "-S", "-n", "-C", str(elf)]).splitlines():
        parts = ln.split(None, 3)
        if len(parts) == 4 and parts[2].lower() == "t":
            syms.append((int(parts[0], 16), int(parts[1], 16), parts[3]))
    starts = [s[0] for s in syms]
    mark = next(a for a, _, n in syms if n.startswith("lmu_node_mark"))
    import bisect

    nodes: list = []
    for mt in re.finditer(r"Trace \d+: \S+ \[[0-9a-f]+/([0-9a-f]+)/", log.read_text()):
        pc = int(mt.group(1), 16) & ~1
        if pc == mark:
            nodes.append(set())
            continue
        if nodes:
            i = bisect.bisect_right(starts, pc) - 1
            if i >= 0 and pc < syms[i][0] + max(syms[i][1], 2):
                nodes[-1].add(syms[i][2])
    return nodes


def _litert(tfl_art, xq: np.ndarray) -> np.ndarray:
    """LiteRT's outputs of the same .tflite on the same quantized inputs, state fed back step by step."""
    from lmu_edge.registry import require

    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        Interpreter = require("tensorflow", "tflite", "running LiteRT").lite.Interpreter
    io = json.loads((tfl_art.path / "io.json").read_text())
    it = Interpreter(model_path=str(tfl_art.path / "model.tflite"))
    it.allocate_tensors()
    ins, outs = it.get_input_details(), it.get_output_details()
    names = [t["name"] for t in io["inputs"]]
    onames = [t["name"] for t in io["outputs"]]
    states = io.get("states", [])
    for k, t in enumerate(io["inputs"]):  # io.json's order is the subgraph's (checked by shape and dtype)
        if list(ins[k]["shape"]) != t["shape"] or np.dtype(ins[k]["dtype"]).name != t["dtype"]:
            die(f"io.json's input {t['name']} does not match the model's input {k}; the harness would mix them")
    x_index = next(i for i, n in enumerate(names) if n not in states)
    y_index = next(i for i, n in enumerate(onames) if n not in {f"{s}_out" for s in states})
    state = {s: np.zeros(ins[names.index(s)]["shape"], ins[names.index(s)]["dtype"]) for s in states}
    ys = []
    for x_t in xq:
        it.set_tensor(ins[x_index]["index"], x_t.reshape(ins[x_index]["shape"]))
        for s in states:
            it.set_tensor(ins[names.index(s)]["index"], state[s])
        it.invoke()
        for s in states:
            state[s] = it.get_tensor(outs[onames.index(f"{s}_out")]["index"]).copy()
        ys.append(it.get_tensor(outs[y_index]["index"]).ravel().astype(np.int64))
    return np.array(ys)


def _quantize_x(tfl_art, x: np.ndarray) -> np.ndarray:
    io = json.loads((tfl_art.path / "io.json").read_text())
    states = io.get("states", [])
    t = next(t for t in io["inputs"] if t["name"] not in states)
    dt = np.dtype(t["dtype"])
    info = np.iinfo(dt)
    q = np.round(x / t["scale"]) + t["zero_point"]
    return np.clip(q, info.min, info.max).astype(dt).reshape(x.shape[0], *t["shape"][1:])


def measure(name: str, build: dict, tflm: Path, work: Path, steps: int) -> dict:
    """One model: lmu-edge's default int8 C and its int8 TFLite export under TFLM, on the same inputs."""
    import lmu_edge
    from lmu_edge import intsim
    from lmu_edge.targets import c as c_target

    g, cal, x = _model(name, steps)
    c_art = lmu_edge.convert(
        g, "c", work / f"{name}_c", quantize="int8", calibration=cal, device="cortex-m4-128k", overwrite=True
    )
    qg = c_target._qgraph(c_art)
    xq_c = intsim.quantize_input(qg, x).astype(intsim.act_dtype(qg))
    y_c, stats = c_target.run_native(c_art, xq_c, "cortex-m4")
    ref = intsim.run_int(qg, intsim.quantize_input(qg, x))
    rep = json.loads((c_art.path / "report.json").read_text())["c"]
    c_row = {
        "insn": stats["instructions_per_step"],
        "flash": rep["flash_bytes_m4"],
        "ram": rep["ram_bytes"],
        "exact": bool(np.array_equal(np.asarray(y_c).reshape(-1), np.asarray(ref).reshape(-1))),
        "widened": json.loads((c_art.path / "report.json").read_text())["quantization"].get("widened", []),
    }
    t_art = lmu_edge.convert(g, "tflite", work / f"{name}_tfl", quantize="int8", calibration=cal, overwrite=True)
    xq = _quantize_x(t_art, x[0])
    startup, ld = c_art.path / "harness" / "startup.c", c_art.path / "harness" / "mps2.ld"
    if not startup.is_file():
        startup, ld = ROOT / "firmware_templates" / "startup.c", ROOT / "firmware_templates" / "mps2.ld"
    timed = run_tflm(build, tflm, work / f"{name}_run", t_art, xq, startup, ld, trace=False)
    traced = run_tflm(build, tflm, work / f"{name}_run", t_art, xq[:1], startup, ld, trace=True)
    lite = _litert(t_art, xq)
    ops = _node_ops(t_art)
    nodes = traced["nodes"][-len(ops) :]
    on_nn = [any(f.startswith("arm_") for f in fs) for fs in nodes]
    fell = [op for op, nn in zip(ops, on_nn, strict=True) if op in CMSIS_OPS and not nn]
    t_row = {
        "insn": timed["insn"],
        "flash": timed["flash"],
        "ram": timed["arena"],
        "nodes": len(ops),
        "cmsis": sum(on_nn),
        "fallback": fell,
        "reference_by_design": sorted({op for op in ops if op not in CMSIS_OPS}),
        "max_lsb_vs_litert": int(np.abs(timed["y"] - lite).max()),
        "steps_differing": int((np.abs(timed["y"] - lite).max(axis=1) > 0).sum()),
        "steps_over_1_lsb": int((np.abs(timed["y"] - lite).max(axis=1) > 1).sum()),
        "sqnr_db": json.loads((t_art.path / "report.json").read_text())["quantization"].get("sqnr_db_vs_float"),
    }
    return {"c": c_row, "tflm": t_row}


def _node_ops(tfl_art) -> list:
    """The op of every node of the TFLite model's main subgraph, in execution order."""
    from lmu_edge.registry import require

    tf = require("tensorflow", "tflite", "reading TFLite models")
    it = tf.lite.Interpreter(model_path=str(tfl_art.path / "model.tflite"))
    return [o["op_name"] for o in it._get_ops_details()]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__.split("\n", 3)[3],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--tflm", type=Path, required=True, help="a tflite-micro checkout with its downloads in place")
    ap.add_argument("--cache", type=Path, required=True, help="build folder (outside this repository)")
    ap.add_argument("--models", nargs="+", default=["digits", "bench"], choices=["digits", "bench"])
    ap.add_argument("--steps", type=int, default=200, help="steps of the seeded input sequence")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    a = ap.parse_args(argv)
    tflm, cache = a.tflm.resolve(), a.cache.resolve()
    if not tflm.is_dir():
        die(f"--tflm {a.tflm}: no such folder; see --help for how to get the checkout")
    build = build_tflm(tflm, cache, a.jobs)
    rev = (tflm / ".git").is_dir() and run(["git", "-C", str(tflm), "rev-parse", "--short", "HEAD"]).strip()
    print(
        f"lmu-edge bench/tflm_m4.py, {datetime.date.today().isoformat()}, QEMU mps2-an386 -icount (exact), "
        f"arm-none-eabi-gcc {run(['arm-none-eabi-gcc', '-dumpversion']).strip()}, tflite-micro {rev or '(no git)'} "
        f"+ CMSIS-NN, {a.steps} steps"
    )
    print(
        f"{'model':<7} {'runtime':<26} {'insn/step':>9} {'x C':>6} {'flash B':>8} {'x C':>5} {'RAM B':>6} {'x C':>5} "
        f"{'fell back':>9}  notes"
    )
    results = {}
    for name in a.models:
        r = measure(name, build, tflm, cache / "runs", a.steps)
        results[name] = r
        c, t = r["c"], r["tflm"]
        print(
            f"{name:<7} {'lmu-edge C (int8 default)':<26} {c['insn']:9.0f} {1:6.2f} {c['flash']:8d} {1:5.1f} "
            f"{c['ram']:6d} {1:5.1f} {'-':>9}  bit-exact vs integer reference: {c['exact']}; widened: "
            f"{', '.join(c['widened']) or 'none'}"
        )
        print(
            f"{'':<7} {'TFLM + CMSIS-NN (int8 tfl)':<26} {t['insn']:9.0f} {t['insn'] / c['insn']:6.2f} {t['flash']:8d} "
            f"{t['flash'] / c['flash']:5.1f} {t['ram']:6d} {t['ram'] / c['ram']:5.1f} {len(t['fallback']):>9}  "
            f"{t['cmsis']} of {t['nodes']} nodes on CMSIS-NN; reference by design: "
            f"{', '.join(t['reference_by_design']) or 'none'}; max |TFLM - LiteRT| {t['max_lsb_vs_litert']} LSB "
            f"({t['steps_differing']} of {a.steps} steps differ, {t['steps_over_1_lsb']} by more than 1 LSB)"
        )
        if t["fallback"]:
            print(f"{'':<7} fell back to reference kernels: {', '.join(t['fallback'])}")
    print(
        "flash: lmu-edge C = model.o (text + rodata + data, M4); TFLM = what the linked image keeps from TFLM's "
        "and CMSIS-NN's objects + the .tflite. RAM: C = the state struct; TFLM = arena_used_bytes()."
    )
    return results


if __name__ == "__main__":
    main()
