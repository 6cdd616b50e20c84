"""Per-10-ms-frame cost of the FSDD spotter on Cortex-M4 (QEMU ``-icount``, exact instruction counts).

Converts the shipped fold with the ``cortex-m4-64k`` device profile (256 KB flash / 64 KB RAM; the
conversion fails if it does not fit), measures the model's instructions per step and the 8 kHz front
end's instructions per frame under QEMU, and prints RAM, flash and the real-time factor at 64 and
168 MHz assuming CPI (cycles per instruction) = 1.25 on a Cortex-M4 (an assumption: QEMU counts
instructions, not cycles; flash wait states and multi-cycle loads make a real part slower than
1 cycle per instruction)::

    python examples/kws/footprint_fsdd.py [--json FILE]

``--verifier`` measures the stream's second stage instead (``verify.py``: the same per-step model with an
11th class, run over the 80 frames up to 10 after each detection): instructions per step and per detection.
"""

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fsdd

HERE = Path(__file__).resolve().parent
CPI = 1.25


def measure(work, model=HERE / "fsdd_model" / "lmu_george.keras", calib=HERE / "fsdd_model" / "calib_george.npy"):
    """``(conversion report, front end numbers)`` of ``model`` (default: the shipped fold) converted for
    the ``cortex-m4-64k`` profile and run under QEMU (the report holds its instructions per step)."""
    import lmu_edge
    from lmu_edge.audio import frontend

    calib = np.load(calib).astype(np.float64)
    calib[0, 0, 0], calib[0, 0, 1] = -128, 127
    out = Path(work) / "c"
    lmu_edge.convert(
        str(model),
        target="c",
        out_dir=out,
        quantize="int8",
        calibration=calib * fsdd.FEATURE_SCALE,
        prefix="kws",
        device="cortex-m4-64k",
        # with a device the realization choice prefers flash by default; this model fits the profile
        # with room to spare, and a flash-smaller realization of the memory saves little of the dense
        # layers' flash for several times the memory's instructions, so operations decide here
        prefer="ops",
        overwrite=True,
        widen_db=None,  # all int8, as evaluate_fsdd.convert
        accuracy_report=False,  # the sizes and counts read below are the C target's, not the accuracy report's
    )
    rep = json.loads((out / "report.json").read_text())
    x = fsdd.read_wav(HERE / "fsdd_george" / "recordings" / "7_george_3.wav")
    _, fe = frontend.run_c(x, fsdd.CFG, "cortex-m4")
    return rep, fe


def summary(rep, fe, verifier=False) -> dict:
    """The printed table of :func:`measure`'s results: instructions, RAM, flash and the real-time factors
    (``verifier``: the second stage's numbers per detection instead of the front end's and the real-time
    factors)."""
    c, v = rep["c"], rep["verification"]
    model = v.get("instructions_per_step_m4")
    if model is None:
        raise SystemExit("error: no Cortex-M4 instruction count (needs arm-none-eabi-gcc and qemu-system-arm)")
    fe_insn = fe["instructions_per_frame"]
    total = model + fe_insn
    row = {
        "frontend_instructions_per_frame": round(fe_insn),
        "model_instructions_per_frame": round(model),
        "model_macs_per_frame": c["macs_per_step"],
        "model_ram_bytes": c["ram_bytes"],
        "frontend_state_bytes": fe["state_bytes"],
        "model_flash_bytes_m4": c["flash_bytes_m4"],
        "device_profile": c["device"]["name"],
        "fits": c["device"]["fits"],
        "cpi_assumed": CPI,
    }
    if verifier:  # once per detection, over its window up to 10 frames after it; the front end is the stream's
        import verify

        n = verify.WINDOW
        row = {k: v for k, v in row.items() if not k.startswith("frontend")}
        row["window_bytes"] = n * fsdd.CFG.n_mels  # the int8 normalized frames a device keeps for it
        row["instructions_per_detection"] = round(n * model)
        for mhz in (64, 168):
            row[f"milliseconds_per_detection_{mhz}mhz"] = round(n * model * CPI / (mhz * 1e3), 1)
    else:
        for mhz in (64, 168):
            row[f"real_time_factor_{mhz}mhz"] = round(total * CPI / (mhz * 1e6 * 0.010), 3)
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=None)
    ap.add_argument("--verifier", action="store_true", help="measure the second stage (verify.py) instead")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kws_fp_") as tmp:
        if a.verifier:
            import verify

            rep, fe = measure(tmp, verify.MODEL, verify.companion(verify.MODEL, "calib"))
        else:
            rep, fe = measure(tmp)
    row = summary(rep, fe, a.verifier)
    for k, val in row.items():
        print(f"{k:34s} {val}")
    if a.json:
        Path(a.json).write_text(json.dumps(row, indent=1))


if __name__ == "__main__":
    main()
