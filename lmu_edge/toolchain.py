"""The Cortex-M toolchain in one place: compiler flags, QEMU boards and instruction counting.

Shared by the C target (``lmu_edge.targets.c``), the audio front end (:mod:`lmu_edge.audio.frontend`),
the examples and the benchmarks, so a runtime added here is built, run and measured the same way
everywhere.

Every Cortex-M runtime is an image built with ``arm-none-eabi-gcc`` (newlib, semihosting through
``--specs=rdimon.specs``) and run on one of QEMU's boards with ``-icount shift=5``: each instruction takes
exactly 2^5 ns of virtual time, so the board's SysTick counter, read before and after a call, gives the
instructions the call executed (``ticks * tick_ns / 32``), the same on every run.

=========== ============== ================ ======================================================
runtime     QEMU machine   kernel path      what it proves
=========== ============== ================ ======================================================
host        (native gcc)   portable         the C99 reference path
cortex-m0   mps2-an386     ARMv6-M          ARMv6-M code of any size (the board is an M4 running
                                            only ARMv6-M instructions; unaligned loads do not fault)
microbit    microbit       ARMv6-M          a genuine Cortex-M0 (nRF51): 16 KB RAM, 256 KB flash,
                                            unaligned loads fault
cortex-m4   mps2-an386     DSP (ARMv7E-M)   SMLAD / SMLALD kernels
cortex-m7   mps2-an500     DSP (ARMv7E-M)   the same kernels on the M7 board
cortex-m33  mps2-an505     DSP (ARMv8-M)    ARMv8-M Mainline with DSP, code at 0x10000000 (Secure)
cortex-m55  mps3-an547     Helium (MVE)     ARMv8.1-M with MVE: code in ITCM, constants in SRAM
=========== ============== ================ ======================================================
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from .errors import LmuEdgeError

#: -icount shift: one instruction = 2^ICOUNT_SHIFT ns of QEMU's virtual clock
ICOUNT_SHIFT = 5
#: warnings every C file of lmu-edge compiles under
WARN = ("-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic")
#: optimization and section flags for every Cortex-M object
ARM_OPT = ("-O2", "-mthumb", "-ffunction-sections", "-fdata-sections")
#: link flags of a Cortex-M test image (the linker script comes from the runtime)
ARM_LINK = ("-nostartfiles", "--specs=rdimon.specs", "-Wl,--gc-sections")
#: QEMU arguments common to every board: no display, semihosting, exact instruction counting
QEMU_COMMON = (
    "-nographic",
    "-monitor",
    "none",
    "-serial",
    "none",
    "-semihosting-config",
    "enable=on,target=native",
    "-icount",
    f"shift={ICOUNT_SHIFT}",
)


class ToolMissingError(LmuEdgeError, FileNotFoundError):
    """A compiler or emulator a runtime needs is not installed."""


@dataclass(frozen=True)
class Runtime:
    """One Cortex-M runtime: how its image is compiled, linked and run, and how its ticks are counted."""

    name: str  #: the runtime's name (``run(..., runtime=name)``)
    tag: str  #: the suffix of its build outputs (``build/model_<tag>.elf``)
    cpu_flags: Tuple[str, ...]  #: -mcpu, float ABI and FPU, and defines
    machine: str  #: qemu-system-arm -M
    linker_script: str  #: file in firmware_templates
    tick_ns: float  #: SysTick period of the board's processor clock, in ns
    integer_only: bool  #: no FPU: the float32 API is left out (LMU_NO_FLOAT)
    kernel_path: str  #: the kernel path lmu_runtime.h picks for it by default
    core: str  #: the core, for cycle estimates (``cortex-m4``, ...)
    ram: int  #: bytes of RAM the linker script gives the image
    flash: int  #: bytes of code memory the linker script gives the image

    @property
    def insn_per_tick(self) -> float:
        """Instructions per SysTick tick under ``-icount shift=ICOUNT_SHIFT``."""
        return self.tick_ns / 2**ICOUNT_SHIFT


_M0 = ("-mcpu=cortex-m0", "-mfloat-abi=soft", "-DLMU_NO_FLOAT")
#: every Cortex-M runtime, by name
ARM_RUNTIMES: Dict[str, Runtime] = {
    r.name: r
    for r in (
        Runtime(
            "cortex-m4",
            "m4",
            ("-mcpu=cortex-m4", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"),
            "mps2-an386",
            "mps2.ld",
            40.0,
            False,
            "dsp",
            "cortex-m4",
            4 << 20,
            4 << 20,
        ),
        Runtime("cortex-m0", "m0", _M0, "mps2-an386", "mps2.ld", 40.0, True, "v6m", "cortex-m0", 4 << 20, 4 << 20),
        Runtime(
            "cortex-m7",
            "m7",
            ("-mcpu=cortex-m7", "-mfloat-abi=hard", "-mfpu=fpv5-d16"),
            "mps2-an500",
            "mps2_an500.ld",
            40.0,
            False,
            "dsp",
            "cortex-m7",
            4 << 20,
            4 << 20,
        ),
        Runtime(
            "cortex-m33",
            "m33",
            ("-mcpu=cortex-m33", "-mfloat-abi=hard", "-mfpu=fpv5-sp-d16"),
            "mps2-an505",
            "mps2_an505.ld",
            50.0,
            False,
            "dsp",
            "cortex-m33",
            4 << 20,
            4 << 20,
        ),
        Runtime(
            "cortex-m55",
            "m55",
            ("-mcpu=cortex-m55", "-mfloat-abi=hard"),
            "mps3-an547",
            "mps3_an547.ld",
            31.25,
            False,
            "mve",
            "cortex-m55",
            512 << 10,
            (512 << 10) + (2 << 20),  # the ITCM's code and the 2 MB SRAM's constants
        ),
        Runtime(
            "microbit",
            "microbit",
            (*_M0, "-DLMU_BOARD_MICROBIT"),
            "microbit",
            "microbit.ld",
            62.5,
            True,
            "v6m",
            "cortex-m0",
            16 << 10,
            256 << 10,
        ),
    )
}
#: every runtime of the C target: the host build, then the Cortex-M images
RUNTIMES: Tuple[str, ...] = ("host", *ARM_RUNTIMES)
#: the linker scripts an artifact carries, one per board
LINKER_SCRIPTS: Tuple[str, ...] = tuple(dict.fromkeys(r.linker_script for r in ARM_RUNTIMES.values()))
#: the object flavours (one per distinct set of compile flags) whose flash the report gives
OBJECT_TAGS: Tuple[str, ...] = ("m4", "m0", "m7", "m33", "m55")


def need(tool: str, package: str) -> str:
    """The path of ``tool``, or :class:`ToolMissingError` naming the Debian ``package`` to install."""
    path = shutil.which(tool)
    if path is None:
        raise ToolMissingError(
            f"{tool} is not installed; install the Debian package {package} (bash scripts/test.sh installs it)"
        )
    return path


def runtime(name: str) -> Runtime:
    """The Cortex-M runtime called ``name``; ``LmuEdgeError`` listing the known ones otherwise."""
    try:
        return ARM_RUNTIMES[name]
    except KeyError:
        raise LmuEdgeError(f"unknown runtime {name!r}; known runtimes: {', '.join(RUNTIMES)}") from None


def arm_gcc() -> str:
    """arm-none-eabi-gcc's path (:class:`ToolMissingError` when it is missing)."""
    return need("arm-none-eabi-gcc", "gcc-arm-none-eabi libnewlib-arm-none-eabi")


def compile_flags(name: str, extra: Sequence[str] = ()) -> List[str]:
    """Flags that compile one C file of runtime ``name`` to an object (warnings, CPU, -O2, sections)."""
    if name == "host":
        return [*WARN, "-O2", *extra]
    return [*WARN, *runtime(name).cpu_flags, *ARM_OPT, *extra]


def link_flags(name: str) -> List[str]:
    """Flags that link a semihosted test image of runtime ``name`` (startup.c is one of the sources)."""
    return [*ARM_LINK, "-T", runtime(name).linker_script]


def qemu_command(name: str, kernel, qemu: Optional[str] = None) -> List[str]:
    """The ``qemu-system-arm`` command line that runs image ``kernel`` of runtime ``name``."""
    qemu = qemu or need("qemu-system-arm", "qemu-system-arm")
    return [qemu, "-M", runtime(name).machine, *QEMU_COMMON, "-kernel", str(kernel)]


def instructions(ticks: float, name: str) -> float:
    """Instructions executed in ``ticks`` SysTick ticks of runtime ``name`` (exact under -icount)."""
    return ticks * runtime(name).insn_per_tick


def make_variables() -> List[dict]:
    """The Cortex-M runtimes as the artifact Makefile template wants them (tag, flags, script, machine)."""
    return [
        {
            "name": r.name,
            "tag": r.tag,
            "flags": " ".join(r.cpu_flags),
            "ld": r.linker_script,
            "machine": r.machine,
            "float": not r.integer_only,
        }
        for r in ARM_RUNTIMES.values()
    ]
