"""The Cortex-M55 image holds a psMNIST-sized model (issue 54).

lmu-edge's mps3-an547 linker script gave code and constants the 512 KB ITCM alone; the psMNIST-sized model
(order 468, 346 hidden units: 612-617 KB of model and runtime) did not link. Constants now go to the
board's 2 MB SRAM. A model with 640 KB of int8 weights links and runs there, bit-exact with the host build.
"""

import subprocess

import numpy as np

import lmu_edge
from lmu_edge import ir, toolchain


def test_a_model_with_more_constants_than_the_itcm_runs_on_the_cortex_m55(tmp_path):
    rng = np.random.default_rng(54)
    big = ir.Dense("big", rng.standard_normal((800, 800)) * 0.05, rng.standard_normal(800) * 0.1, "tanh")
    head = ir.Dense("head", rng.standard_normal((800, 4)) * 0.1, None, "linear")
    g = ir.Graph("wide", input_features=800, seq_len=None, layers=(big, head))
    x = rng.standard_normal((2, 3, 800))
    art = lmu_edge.convert(g, "c", tmp_path / "o", quantize="int8", calibration=x, accuracy_report=False)
    y_host = np.asarray(art.run(x, runtime="host"))
    assert np.array_equal(np.asarray(art.run(x, runtime="cortex-m55")), y_host)
    # the weights alone pass the ITCM's 512 KB: linked into the SRAM region, past 0x11000000
    harness = art.path / "harness"
    subprocess.run(["make", "-s", "m55"], cwd=harness, check=True, capture_output=True)
    elf = harness / "build" / "model_m55.elf"
    sections = subprocess.run(
        [toolchain.need("arm-none-eabi-objdump", "binutils-arm-none-eabi"), "-h", str(elf)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    (rodata,) = [ln.split() for ln in sections.splitlines() if " .rodata " in ln]
    size, vma = int(rodata[2], 16), int(rodata[3], 16)
    assert size > 512 * 1024 and vma == 0x11000000, (hex(size), hex(vma))
