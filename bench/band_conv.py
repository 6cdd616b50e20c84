"""Cortex-M instructions per frame of the shipped FSDD fold's C with the two-band convolution kernel against
one linear-kernel call per band (the same C built with -DLMU_BAND_PER_BAND), in the same run.

    python bench/band_conv.py [--frames 12]

The fold (examples/kws/fsdd_model/lmu_george.keras: three int8 convolution blocks over the mel bands, then
the LMU) is converted once to int8 C; each core's image is built twice from it, run on the same random
int8 frames under QEMU with -icount (exact instruction counts) and the two builds' outputs compared bit
for bit. Also prints each image's flash (.text + .rodata + .data, the QEMU harness and newlib included). Needs
arm-none-eabi-gcc and qemu-system-arm. Prints, asserts nothing.
"""

import argparse
import datetime
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

import lmu_edge
from lmu_edge import toolchain
from lmu_edge.targets import c as c_target

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples" / "kws"))
import fsdd  # noqa: E402  (examples/kws: importable after the sys.path line)

CORES = {"cortex-m4": "m4", "cortex-m7": "m7", "cortex-m33": "m33"}


def run(out: Path, core: str, extra: str, frames: np.ndarray) -> tuple:
    """Build ``core``'s image with ``extra`` added to its flags, run ``frames``: (outputs, instr/step, flash)."""
    tag = CORES[core]
    flags = " ".join(toolchain.runtime(core).cpu_flags) + " " + extra
    elf = out / "harness" / "build" / f"model_{tag}.elf"  # the artifact's harness folder builds it
    elf.unlink(missing_ok=True)
    subprocess.run(
        ["make", "-s", "-C", str(out / "harness"), tag, f"FLAGS_{tag}={flags}"], check=True, capture_output=True
    )
    with tempfile.TemporaryDirectory() as tmp:
        c_target.write_input(Path(tmp) / "lmu_in.bin", frames)
        r = subprocess.run(toolchain.qemu_command(core, elf), cwd=tmp, capture_output=True, text=True, check=True)
        y = (Path(tmp) / "lmu_out.bin").read_bytes()
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("lmu-edge:"))
    stats = {k: int(v) for k, v in (kv.split("=") for kv in line.split()[1:])}
    size = subprocess.run(["arm-none-eabi-size", "-A", str(elf)], capture_output=True, text=True, check=True).stdout
    sec = {p[0]: int(p[1]) for p in (ln.split() for ln in size.splitlines()) if len(p) >= 2 and p[1].isdigit()}
    flash = sec.get(".text", 0) + sec.get(".rodata", 0) + sec.get(".data", 0)
    return y, toolchain.instructions(stats["ticks"], core) / stats["steps"], flash


def main():
    """Convert the fold, build and run each core both ways, print the table."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frames", type=int, default=12, help="frames run under QEMU (default 12)")
    a = ap.parse_args()
    model = ROOT / "examples" / "kws" / "fsdd_model"
    calib = np.load(model / "calib_george.npy").astype(np.float64) * fsdd.FEATURE_SCALE
    frames = np.random.default_rng(0).integers(-128, 128, size=(1, a.frames, 32)).astype(np.int8)
    print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; {model.name}/lmu_george.keras, int8 C")
    head = f"{'core':<11} {'per band':>10} {'two bands':>10} {'ratio':>6} {'image per band':>15} {'two bands':>10}"
    print(head + "  same")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "c"
        lmu_edge.convert(
            str(model / "lmu_george.keras"),
            target="c",
            out_dir=out,
            quantize="int8",
            calibration=calib,
            prefix="kws",
            measure=False,
            widen_db=None,
        )
        for core in CORES:
            y1, n1, f1 = run(out, core, "-DLMU_BAND_PER_BAND", frames)
            y2, n2, f2 = run(out, core, "", frames)
            print(f"{core:<11} {n1:>10,.0f} {n2:>10,.0f} {n1 / n2:>5.3f}x {f1:>15,} {f2:>10,}  {y1 == y2}")


if __name__ == "__main__":
    main()
