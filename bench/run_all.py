"""All benchmarks in one run, one table of ratios (tests never assert timings; this only prints).

    python bench/run_all.py            # about 5-10 minutes on 2 cores
    python bench/run_all.py --quick    # fewer steps, no psMNIST

For one model (an LMU of order 64, theta 200, with a Dense(8) hidden cell; dense ZOH) it measures,
in this run: the per-step latency of the compiled C (host gcc -O2, timed inside the harness process
over a long stream, so no Python call is counted) against LiteRT, TFLite Micro and ONNX Runtime (each
stepped from Python, as their Python APIs are used) and the numpy reference; the C's RAM against
TFLite Micro's arena; Cortex-M4 instructions per step against the MAC count; and conversion time
against the order. Then psMNIST accuracy (examples/psmnist/evaluate.py) and the fold table.
"""

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import numpy as np

import lmu_edge
from lmu_edge import intsim
from lmu_edge.registry import TARGETS

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from graphs import chain  # noqa: E402  (needs tests/ on sys.path, set just above)

sys.path.insert(0, str(ROOT / "bench"))
from runtimes import per_step as stepped  # noqa: E402  (needs bench/ on sys.path, set just above)


def c_harness_per_step(art, x, quantized):
    """Seconds per step of the compiled host harness, from the difference of two stream lengths
    (process start-up and file I/O of the header cancel out)."""
    exe = art.module.make(art.path, "harness_host")
    times = []
    for T in (len(x) // 4, len(x)):
        data = x[None, :T]
        if quantized:
            data = intsim.quantize_input(lmu_edge.load(art.path / "quantized.lmu.npz"), data).astype(np.int8)
        else:
            data = data.astype(np.float32)
        with tempfile.TemporaryDirectory() as d:
            art.module.write_input(Path(d) / "in.bin", data, 1 if quantized else 4)
            best = 1e9
            for _ in range(3):
                t = time.perf_counter()
                subprocess.run([str(exe), "in.bin", "out.bin"], cwd=d, check=True, capture_output=True)
                best = min(best, time.perf_counter() - t)
        times.append((T, best))
    (t1, s1), (t2, s2) = times
    return max((s2 - s1) / (t2 - t1), 1e-12)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    steps = 4000 if args.quick else 20000
    rng = np.random.default_rng(0)
    g = lmu_edge.fold(chain(rng, n_in=1, q=64, theta=200.0, units=8), "zoh")
    x = rng.standard_normal((steps, 1))
    cal = rng.standard_normal((2, 2000, 1))
    rows = []  # (section, what, value, unit, ratio text)
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        # C int8 all 8-bit (widen_db=None): this model is 28.6 dB in int8 on cal, below the 33 dB under which
        # the C target's default gives layers 16-bit activations; the figures here are the int8 kernels'
        c = {
            q: lmu_edge.convert(
                g, "c", d / f"c_{q}", quantize=q, calibration=cal, **({"widen_db": None} if q == "int8" else {})
            )
            for q in ("float", "int8")
        }
        c_t = {q: c_harness_per_step(c[q], x, q == "int8") for q in c}
        lat = [
            ("C host -O2, float32", c_t["float"]),
            ("C host -O2, int8", c_t["int8"]),
            ("numpy reference float64 (lmu_edge.Stream)", stepped(lmu_edge.Stream(g), x[:2000])),
        ]
        arena = {}
        if "tflite" in TARGETS:
            for q in ("float", "int8"):
                try:
                    art = lmu_edge.convert(
                        g, "tflite", d / f"tfl_{q}", quantize=q, calibration=cal if q != "float" else None
                    )
                except lmu_edge.LmuEdgeError as e:
                    lat.append((f"TFLite {q}: {e}", None))
                    continue
                rep = json.loads((art.path / "report.json").read_text())
                arena[q] = rep.get("tflm_arena_bytes")
                for rt, label in (("litert", "LiteRT"), ("tflm", "TFLite Micro")):
                    try:
                        lat.append((f"{label} {q} (Python invoke)", stepped(art.stream(runtime=rt), x[:2000])))
                    except lmu_edge.LmuEdgeError as e:
                        lat.append((f"{label} {q}: {str(e)[:50]}", None))
        if "onnx" in TARGETS:
            try:
                art = lmu_edge.convert(g, "onnx", d / "onnx", quantize="float")
                lat.append(("ONNX Runtime float32 step model (Python run)", stepped(art.stream(), x[:2000])))
            except lmu_edge.LmuEdgeError as e:
                lat.append((f"ONNX Runtime: {str(e)[:50]}", None))
        for what, s in lat:
            rows.append(
                (
                    "per-step latency",
                    what,
                    None if s is None else s * 1e6,
                    "us",
                    "" if s is None else f"{s / c_t['float']:.1f}x C float",
                )
            )
        rep_c = {q: json.loads((c[q].path / "report.json").read_text()) for q in c}
        for q in ("float", "int8"):
            rows.append(
                (
                    "RAM",
                    f"C {q}: state + scratch (sizeof state)",
                    rep_c[q]["c"]["ram_bytes"],
                    "B",
                    f"TFLite Micro's arena is {arena[q] / rep_c[q]['c']['ram_bytes']:.1f}x ({arena[q]} B)"
                    if arena.get(q)
                    else "TFLite Micro not measured",
                )
            )
        macs = rep_c["int8"]["c"]["macs_per_step"]
        for q in ("float", "int8"):
            for cpu in ("m4", "m0"):
                n = rep_c[q]["verification"].get(f"instructions_per_step_{cpu}")
                if n:
                    rows.append(
                        (
                            "Cortex-M instructions",
                            f"C {q} on Cortex-{cpu.upper()} (QEMU -icount)",
                            n,
                            "instr/step",
                            f"{n / macs:.2f} per MAC ({macs} MACs)",
                        )
                    )
        base = None
        for q_order in (16, 64, 128) if args.quick else (16, 64, 128, 256):
            gq = chain(np.random.default_rng(1), n_in=1, q=q_order, theta=4.0 * q_order, units=8)
            t = time.perf_counter()
            lmu_edge.convert(
                gq,
                "c",
                d / f"conv_{q_order}",
                quantize="int8",
                calibration=cal[:, :500],
                realization="zoh",
                measure=False,
                widen_db=None,
            )
            s = time.perf_counter() - t
            base = base or s
            rows.append(
                (
                    "conversion time",
                    f"order {q_order} (fold, quantize, emit, build, verify)",
                    s,
                    "s",
                    f"{s / base:.1f}x order 16",
                )
            )
    if not args.quick:
        sys.path.insert(0, str(ROOT / "examples" / "psmnist"))
        import evaluate

        for name, acc, _secs in evaluate.evaluate(1000, verbose=False):
            if acc is not None:
                rows.append(("psMNIST (1000 digits)", name, acc, "accuracy", ""))
    print(
        f"lmu-edge benchmarks, {date.today()}, {platform.machine()}, {platform.processor() or ''} "
        f"python {platform.python_version()}"
    )
    print(f"{'section':<22} {'measurement':<52} {'value':>12} {'unit':<11} ratio")
    for sec, what, v, unit, ratio in rows:
        if v is None:
            val = "-"
        elif unit == "accuracy":
            val = f"{v:.4f}"
        else:
            val = f"{v:.2f}" if isinstance(v, float) else str(v)
        print(f"{sec:<22} {what:<52} {val:>12} {unit:<11} {ratio}")
    print()
    subprocess.run([sys.executable, str(ROOT / "bench" / "fold.py"), "--quick"], check=False)


if __name__ == "__main__":
    main()
