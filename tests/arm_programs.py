"""Build and run small C programs that include lmu_runtime.h (and so its family headers): on a Cortex-M core
under QEMU, and on the host for the reference output (shared by tests/test_kernels_arm.py and
tests/test_kernels_dense.py)."""

import os
import shutil
import subprocess

import pytest

from lmu_edge import toolchain
from lmu_edge.targets import c_kit

ARM = shutil.which("arm-none-eabi-gcc") and shutil.which("qemu-system-arm")
#: the C runtime headers where lmu_edge installs them (the checkout's folder in an editable install, the
#: package's own in a built tree such as a mutation harness's private copy)
TEMPLATES = str(c_kit.TEMPLATES)


def run_program(tmp_path, source: str, runtime: str, timeout: int = 600, extra: tuple = ()) -> str:
    """Build the C program ``source`` (it includes lmu_runtime.h) for ``runtime`` with that core's flags at
    -O2 (and the ``extra`` flags) and run it under QEMU (semihosting): its standard output."""
    rt = toolchain.ARM_RUNTIMES[runtime]
    for f in (*c_kit.runtime_headers('#include "lmu_runtime.h"'), "startup.c", rt.linker_script):
        shutil.copy(os.path.join(TEMPLATES, f), tmp_path / f)
    (tmp_path / "t.c").write_text(source)
    subprocess.run(
        ["arm-none-eabi-gcc", "-std=c99", "-Wall", "-Werror", "-O2", "-mthumb", *rt.cpu_flags, *extra, "-nostartfiles",
         "--specs=rdimon.specs", "-T", rt.linker_script, "t.c", "startup.c", "-o", "t.elf"],
        cwd=tmp_path, check=True, capture_output=True,
    )  # fmt: skip
    return subprocess.run(
        toolchain.qemu_command(runtime, "t.elf"), cwd=tmp_path, capture_output=True, text=True, timeout=timeout
    ).stdout


def host_output(tmp_path, source: str, runtime: str) -> str:
    """The standard output of the C program ``source`` built for the host, the reference a core's run of
    the same program must print (skips a Cortex-M ``runtime`` where the ARM tools are missing, outside CI)."""
    if runtime != "host" and not ARM and os.environ.get("CI") != "true":
        pytest.skip("arm-none-eabi-gcc / qemu-system-arm not installed")
    (tmp_path / "t.c").write_text(source)
    (tmp_path / "host").mkdir()
    subprocess.run(["cc", "-O2", "-std=c99", f"-I{TEMPLATES}", "t.c", "-o", "host/t"], cwd=tmp_path, check=True)
    return subprocess.run([str(tmp_path / "host" / "t")], capture_output=True, text=True, check=True).stdout
