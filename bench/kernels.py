"""Cortex-M kernel paths on every runtime: instructions per MAC, optimized against portable, for the whole
step and per layer, with a cycle estimate and the flash each build takes; measured in one run with QEMU
-icount on the bench model (order 64, theta 200) and an order-256 model (theta 1024), both dense ZOH with
int8 weights, a 16-bit state and a Dense(8) hidden layer.

    python bench/kernels.py [--orders 64 256 psmnist] [--modes all8 int8 int16x8 int16] [--runtimes cortex-m4 ...]
                            [--no-portable] [--realization fir] [--statements]

--modes: all8 (every layer 8-bit, the default here), int8 (the default conversion, which widens layers to 16-bit
activations: their int16 x int8 kernels), int16x8, int16. psmnist: an order-468 LMU (theta 784, 346 tanh hidden
units, random weights: not trained, so its widening may differ from a trained model's).

MACs are the report's ``macs_per_step`` (every dense layer and the q x q + q memory update, counted by
the code generator outside the kernels). "optimized" is each core's default kernel path (DSP on M4 / M7 /
M33, Helium on M55, the ARMv6-M assembly partial sums on M0 and micro:bit); "portable" is the same model.c
built with -DLMU_PORTABLE. Every build's int8 outputs are compared with the integer reference (bit-exact
column).

Per layer (--statements also prints each statement of the step as kind:MACs:instructions): the bench copies
the artifact, puts a SysTick read after every statement of ``<prefix>_step_int8`` and charges each statement
the instructions since the previous read, less the cost of one read (measured by two reads in a row).
"dense" sums every int8 dense layer (input, encoder, hidden, output), "memory" is the LMU memory update,
"other" the requantization of the state and copies.

Cycles: instructions x the cycles per instruction of the step's hottest code (the loop, or the straight run
between two branches for a fully unrolled kernel, with the most multiply-accumulate instructions in
``<prefix>_step_int8``), from the cores' published
instruction timings: Cortex-M0 and M4 Technical Reference Manuals (loads 2, MUL/SMLAD/SMLALD 1, taken
branch 3 (1 + pipeline refill of 2), LDRD and LDM 1 + words); Cortex-M33 and M7 use the M4 figures (for
the dual-issue M7 an upper bound); Cortex-M55 (dual-beat Helium): 2 cycles per 128-bit vector
instruction, scalar as on the M4. An estimate, not a measurement: QEMU does not model cycles.
Flash: text + rodata + data of model.o for that core and path (the paths read the same arrays, so any
difference is code). est/QEMU: the C target's estimate of the step (``targets/c_cost.py``, what the widening search
weighs) over the measured count: where a kernel got faster, its rate there is stale. Prints, asserts nothing.
"""

import argparse
import datetime
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

import lmu_edge
from lmu_edge import intsim, toolchain
from lmu_edge.targets import c as c_target
from lmu_edge.targets import c_cost

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from graphs import chain  # noqa: E402  (needs tests/ on sys.path, set just above)

PROF_C = r"""/* bench instrumentation: SysTick ticks charged to each statement of the step */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#define LMU_BENCH_CVR (*(volatile uint32_t *)0xE000E018u)
uint32_t lmu_bench_ticks[%(n)d];
static uint32_t lmu_bench_last;
static int lmu_bench_registered;
static void lmu_bench_print(void) {
    int k;
    printf("lmu-bench:");
    for (k = 0; k < %(n)d; ++k) printf(" t%%d=%%lu", k, (unsigned long)lmu_bench_ticks[k]);
    printf("\n");
}
void lmu_bench_mark(int k);
void lmu_bench_mark(int k) {
    const uint32_t now = LMU_BENCH_CVR;
    if (!lmu_bench_registered) {
        lmu_bench_registered = 1;
        atexit(lmu_bench_print);
    }
    if (k >= 0) lmu_bench_ticks[k] += (lmu_bench_last - now) & 0xFFFFFFu;
    lmu_bench_last = LMU_BENCH_CVR;
}
"""

# cycles per instruction class, from the cores' published instruction timings (see the module docstring)
SCALAR_CYCLES = {"load": 2, "load2": 3, "store": 2, "branch": 3, "mac": 1, "alu": 1}
VECTOR_CYCLES = 2  # Cortex-M55: one 128-bit vector instruction in two beats


def _classify(mnemonic: str) -> str:
    m = mnemonic.split(".")[0]
    if m.startswith("v"):
        return "vector"
    if m in ("ldrd", "strd") or m.startswith("ldm") or m.startswith("pop"):
        return "load2"
    if m.startswith("ldr"):
        return "load"
    if m.startswith("str") or m.startswith("push") or m.startswith("stm"):
        return "store"
    if (
        m
        in (
            "b",
            "bne",
            "beq",
            "blt",
            "bge",
            "bgt",
            "ble",
            "bhi",
            "bls",
            "bcc",
            "bcs",
            "bmi",
            "bpl",
            "le",
            "letp",
            "cbz",
            "cbnz",
        )
        or m.startswith("b")
        and len(m) == 3
    ):
        return "branch"
    if m.startswith(("smla", "smul", "mul", "mla", "umla", "umul", "sdiv")):
        return "mac"
    return "alu"


def hot_loop_cpi(elf: Path, symbol: str, mve: bool = False) -> float:
    """Cycles per instruction of the hottest code of ``symbol`` in ``elf`` (see the module docstring); ``mve``:
    disassemble as ARMv8.1-M (without it objdump does not decode the Helium instructions)."""
    arch = ["-m", "armv8.1-m.main"] if mve else []
    out = subprocess.run(
        ["arm-none-eabi-objdump", "-d", "--no-show-raw-insn", *arch, str(elf)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    body = out.split(f"<{symbol}>:", 1)[1].split("\n\n", 1)[0]
    insns = []
    for line in body.splitlines():
        mt = re.match(r"\s*([0-9a-f]+):\s+(\S+)\s*(.*)", line)
        if mt:
            insns.append((int(mt.group(1), 16), mt.group(2), mt.group(3)))
    regions, run = [], []
    for i, (addr, mn, ops) in enumerate(insns):
        target = re.match(r"([0-9a-f]+) <", ops)
        if _classify(mn) == "branch" and target and int(target.group(1), 16) < addr:
            regions.append([x for x in insns[: i + 1] if x[0] >= int(target.group(1), 16)])
        run.append((addr, mn, ops))
        if _classify(mn) == "branch":  # a straight run ends here (unrolled kernels have no loop)
            regions.append(run)
            run = []
    regions.append(run)
    best, best_macs = None, -1
    for region in regions:
        macs = sum(1 for x in region if _classify(x[1]) == "mac" or x[1].startswith("vmla"))
        if macs > best_macs:
            best, best_macs = region, macs
    if not best:
        return 1.0
    cycles = sum(VECTOR_CYCLES if _classify(mn) == "vector" else SCALAR_CYCLES[_classify(mn)] for _, mn, _ in best)
    return cycles / len(best)


def _step_name(src: str, prefix: str) -> str:
    """The integer step's name: ``<prefix>_step_int16`` where a layer has 16-bit activations, else ``_int8``."""
    return f"{prefix}_step_int16" if f"void {prefix}_step_int16(" in src else f"{prefix}_step_int8"


def _step_lines(src: str, prefix: str):
    head = f"void {_step_name(src, prefix)}("
    start = src.index(head)
    open_ = src.index("{", start) + 1
    close = src.index("\n}\n", open_)
    return open_, close, src[open_:close].split("\n")


def _macs_of(line: str, src: str) -> tuple:
    """(kind, MACs) of one statement of the step."""
    mt = re.search(r"lmu_qlinear(?:_i8|_i16|16)?\(&(\w+),", line)
    if mt:
        sizes = re.findall(rf"static const int(?:8|16)_t {mt.group(1)}_p\d+_w\[(\d+)\]", src)
        return "dense", sum(int(s) for s in sizes)
    mt = re.search(r"lmu_(?:dense|rk|fir)_memory\w*\(&(\w+),", line)
    if mt:  # the memory's sizes are fields of its const parameter struct
        struct = re.search(rf"{mt.group(1)} = \{{(.*?)\}};", src, re.S).group(1)
        d, q = (int(re.search(rf"\.{f} = (\d+)", struct).group(1)) for f in ("d", "q"))
        if "lmu_fir_memory" in line:  # q rows of L taps
            return "memory", d * q * int(re.search(r"\.L = (\d+)", struct).group(1))
        return "memory", d * (q * q + q)
    return "other", 0


def instrument(d: Path, prefix: str) -> list:
    """Put a SysTick read after every statement of the step in ``d/<prefix>/<prefix>.c`` (the kit's source);
    returns the statements' kinds."""
    src = (d / prefix / f"{prefix}.c").read_text()
    open_, close, lines = _step_lines(src, prefix)
    kinds, out = [], ["    lmu_bench_mark(-1);"]
    for line in lines:
        if not line.strip() or line.strip().startswith("/*"):
            out.append(line)
            continue
        out.append(line)
        out.append(f"    lmu_bench_mark({len(kinds)});")
        kinds.append(_macs_of(line, src))
    out.append(f"    lmu_bench_mark(-1); lmu_bench_mark({len(kinds)});   /* the cost of one read */")
    new = src[:open_] + "\n".join(out) + src[close:]
    step = _step_name(src, prefix)
    new = new.replace(f"void {step}(", f"void lmu_bench_mark(int k);\nvoid {step}(", 1)
    (d / prefix / f"{prefix}.c").write_text(new)
    (d / "harness" / "bench_prof.c").write_text(PROF_C % {"n": len(kinds) + 1})  # built with the harness
    return kinds


def _qemu(d: Path, rt, elf: str) -> str:
    r = subprocess.run(
        toolchain.qemu_command(rt.name, elf), cwd=d, capture_output=True, text=True, timeout=1800, check=True
    )
    return r.stdout


def measure(art, xq, ref, rt, portable: bool, work: Path) -> dict:
    """Whole-step and per-layer instructions, flash and bit-exactness of one runtime and path."""
    flags = f"FLAGS_{rt.tag}={' '.join(rt.cpu_flags)}{' -DLMU_PORTABLE' if portable else ''}"
    d = work / f"{rt.tag}_{'p' if portable else 'o'}"
    p = art.manifest["c"]["prefix"]  # the kit folder d/<p>/ holds the model's source
    shutil.copytree(art.path, d)
    h = d / "harness"  # the artifact's harness folder: its Makefile builds from the kit, ../<p>/
    c_target.write_input(h / "lmu_in.bin", xq, c_target.DTYPE_CODES[xq.dtype.type])
    elf, obj = f"build/model_{rt.tag}.elf", f"build/model_{rt.tag}.o"
    subprocess.run(["make", "-s", "-B", elf, obj, flags], cwd=h, check=True, capture_output=True)
    out = _qemu(h, rt, elf)
    stats = next(
        {k: int(v) for k, v in (kv.split("=") for kv in ln.split()[1:])}
        for ln in out.splitlines()
        if ln.startswith("lmu-edge:")
    )
    y = c_target.read_output(h / "lmu_out.bin", 0).astype(np.int64)
    sec = c_target._sections(h / obj)
    res = {
        "insn": toolchain.instructions(stats["ticks"], rt.name) / stats["steps"],
        "flash": sec["text"] + sec["rodata"] + sec["data"],
        "exact": bool(np.array_equal(y, ref)),
        "cpi": hot_loop_cpi(
            h / elf,
            _step_name((d / p / f"{p}.c").read_text(), p),
            "cortex-m55" in " ".join(rt.cpu_flags),
        ),
    }
    kinds = instrument(d, p)
    subprocess.run(
        ["make", "-s", "-B", elf, flags, f"SRC=../{p}/{p}.c harness.c bench_prof.c"],
        cwd=h,
        check=True,
        capture_output=True,
    )
    prof = _qemu(h, rt, elf)
    ticks = next(
        {k: int(v) for k, v in (kv.split("=") for kv in ln.split()[1:])}
        for ln in prof.splitlines()
        if ln.startswith("lmu-bench:")
    )
    mark = ticks[f"t{len(kinds)}"] / stats["steps"]
    per = {"dense": [0.0, 0], "memory": [0.0, 0], "other": [0.0, 0]}
    res["statements"] = []
    for k, (kind, macs) in enumerate(kinds):
        n = toolchain.instructions(ticks[f"t{k}"] / stats["steps"] - mark, rt.name)
        per[kind][0] += n
        per[kind][1] += macs
        res["statements"].append((kind, macs, n))
    res["per"] = per
    return res


# --quantize modes: (label, convert keywords). "int8" is the default conversion, which widens layers to 16-bit
# activations where 8 bits fall short (their int16 x int8 kernels); "all8" keeps every layer 8-bit.
MODES = {
    "int8": {"quantize": "int8"},
    "all8": {"quantize": "int8", "widen_db": None},
    "int16x8": {"quantize": "int16x8"},
    "int16": {"quantize": "int16"},
}


#: --psmnist-model: a trained psMNIST-sized model to measure instead of the random-weight graph
PSMNIST_MODEL = None


def _model(name: str, rng, realization: str):
    """(graph, calibration, inputs) of a bench model: ``64`` / ``256`` (the chain of the kernel issue: Dense(3)
    -> LMU of that order with a Dense(8) hidden layer -> Dense(4)) or ``psmnist`` (an LMU of order 468, theta
    784, 346 tanh hidden units and a Dense(10) head, the parallel-LMU paper's psMNIST sizes; random weights,
    not trained)."""
    if name == "psmnist" and PSMNIST_MODEL:  # trained (bench/psmnist_sized.py): the shipped digits calibrate
        g = lmu_edge.load(PSMNIST_MODEL)
        digits = np.load(ROOT / "examples" / "models" / "psmnist_calibration_x.npy").astype(np.float64) / 255.0
        return lmu_edge.fold(g, realization), digits[:16, :, None], digits[16:17, :40, None]
    if name == "psmnist":
        from graphs import lmu

        mid = lmu(rng, n_in=1, q=468, theta=784.0, units=346, return_sequences=True)
        head = lmu_edge.ir.Dense("head", rng.standard_normal((346, 10)) * 0.1, None, "linear")
        g = lmu_edge.ir.Graph("psmnist", input_features=1, seq_len=None, layers=(mid, head))
    else:
        q = int(name)
        g = chain(rng, n_in=1, q=q, theta=200.0 if q == 64 else 4.0 * q, units=8)
    return lmu_edge.fold(g, realization), rng.standard_normal((2, 2000, 1)), rng.standard_normal((1, 40, 1))


def main(argv=None):
    """Print the table for the given models, modes and runtimes; returns its rows."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--orders", nargs="+", default=["64", "256"], help="64, 256 and / or psmnist (see _model)")
    ap.add_argument(
        "--modes", nargs="+", default=["all8"], choices=list(MODES), help="int8: the default (widened) conversion"
    )
    ap.add_argument(
        "--runtimes", nargs="+", default=[r for r in toolchain.ARM_RUNTIMES], choices=list(toolchain.ARM_RUNTIMES)
    )
    ap.add_argument("--no-portable", action="store_true", help="measure the optimized path only")
    ap.add_argument(
        "--statements", action="store_true", help="also print each statement of the step: kind, MACs, instructions"
    )
    ap.add_argument(
        "--realization",
        default="zoh",
        help="the memory's realization (zoh: the kernel issue's bench models; fir: the ring-buffer memory, its "
        "memory column then per tap MAC, the whole-step column still per dense-ZOH MAC)",
    )
    ap.add_argument(
        "--psmnist-model",
        type=Path,
        help="psmnist: this trained model (bench/psmnist_sized.py) instead of random weights, calibrated on 16 "
        "shipped digits",
    )
    a = ap.parse_args(argv)
    global PSMNIST_MODEL
    PSMNIST_MODEL = a.psmnist_model
    print(
        f"lmu-edge bench/kernels.py, {datetime.date.today().isoformat()}, QEMU -icount (exact instruction "
        f"counts), arm-none-eabi-gcc -O2"
    )
    print(
        f"{'model':<18} {'runtime':<11} {'path':<9} {'insn/step':>9} {'insn/MAC':>8} {'cyc/MAC~':>8} {'dense':>6} "
        f"{'memory':>6} {'other insn':>10} {'flash B':>8} {'exact':>5} {'vs portable':>11} {'est/QEMU':>8}"
    )
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for q in a.orders:
            for mode in a.modes:
                rng = np.random.default_rng(0)
                g, cal, x = _model(q, rng, a.realization)
                label = f"{q} {mode}"
                art = lmu_edge.convert(
                    g, "c", Path(tmp) / f"q{q}_{mode}", calibration=cal, measure=False, **MODES[mode]
                )  # all8: the int8 kernels, as TFLM int8 runs them
                qg = c_target._qgraph(art)
                xq = intsim.quantize_input(qg, x)
                ref = intsim.run_int(qg, xq)
                if "_step_int16(" in (art.path / "model" / "model.c").read_text():
                    xq = xq.astype(np.int16)
                else:
                    xq = xq.astype(np.int8)
                macs = json.loads((art.path / "report.json").read_text())["c"]["macs_per_step"]
                for name in a.runtimes:
                    rt = toolchain.ARM_RUNTIMES[name]
                    work = Path(tmp) / f"w{q}_{mode}_{rt.tag}"
                    work.mkdir()
                    res = {}
                    paths = (True,) if rt.kernel_path == "portable" else (False,) if a.no_portable else (True, False)
                    for portable in paths:
                        try:
                            res[portable] = measure(art, xq, ref, rt, portable, work)
                        except subprocess.CalledProcessError as e:
                            print(f"{label:<18} {name:<11} does not build or run here: {(e.stderr or b'')[-200:]!r}")
                            break
                    base = res.get(True)
                    for portable, r in res.items():
                        per = r["per"]
                        path = "portable" if portable else rt.kernel_path
                        dense = per["dense"][0] / max(per["dense"][1], 1)
                        mem = per["memory"][0] / max(per["memory"][1], 1)
                        vs = f"{base['insn'] / r['insn']:10.2f}x" if base else f"{'-':>11}"
                        est = c_cost.step_instructions(qg, name) / r["insn"] if not portable else float("nan")
                        print(
                            f"{label:<18} {name:<11} {path:<9} {r['insn']:9.0f} {r['insn'] / macs:8.3f} "
                            f"{r['insn'] * r['cpi'] / macs:8.2f} {dense:6.2f} {mem:6.2f} {per['other'][0]:10.0f} "
                            f"{r['flash']:8d} {str(r['exact']):>5} {vs} {est:8.2f}"
                        )
                        if a.statements:
                            print("    " + "  ".join(f"{k}:{m}:{n:.0f}" for k, m, n in r["statements"]))
                        rows.append({"order": q, "mode": mode, "runtime": name, "path": path, "macs": macs, **r})
    print(
        "dense / memory: instructions per MAC of those layers; other: instructions per step outside them; "
        "cyc/MAC~: estimate (see the docstring); flash: model.o text + rodata + data; est/QEMU: the widening search's "
        "estimate of the step (targets/c_cost.py) over the count"
    )
    return rows


if __name__ == "__main__":
    main()
