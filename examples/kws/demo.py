"""Keyword spotting end to end: synthesized speech -> integer log-mel -> int8 LMU in C -> detections.

1. Converts the committed keras-lmu model ``kws_lmu.keras`` to int8 C (``lmu_edge.convert``,
   prefix ``kws``; no TensorFlow needed) with the committed calibration features.
2. Held-out words (flite voices, never seen in training, which used espeak-ng): utterance accuracy of
   the float model and of the int8 integer reference (which the C reproduces bit for bit).
3. Synthesizes a long held-out recording (flite keywords and unknown words at random positions in
   noise), streams it through ``stream.c`` (front end + model + detection rule, one frame at a time,
   constant memory) on the host and on Cortex-M4 / M0 under QEMU, checks that every build prints the
   same detections and the same per-frame outputs as the Python integer pipeline, and scores the
   detections (precision / recall).
4. Prints the cost per 10 ms frame: front end and model instructions on M4 and M0, host time; RAM
   and flash.

Needs gcc, espeak-ng / flite (the test words), and for Cortex-M arm-none-eabi-gcc + qemu-system-arm::

    python examples/kws/demo.py [--seconds 40] [--runtimes host,cortex-m4,cortex-m0]
"""

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import kws
import numpy as np

import lmu_edge
from lmu_edge import intsim, toolchain

T = 150


def utterance_accuracy(qg, model_path):
    words, labels = kws.test_words()
    x, _, _, _ = kws.sequences(words, labels, T, np.random.default_rng(1))
    post_f = lmu_edge.simulate(lmu_edge.load(model_path), x * kws.FEATURE_SCALE)
    post_q = intsim.dequantize_output(qg, intsim.run_int(qg, x.astype(np.int64)))

    def acc(p):
        return float(np.mean(kws.utterance_predictions(p) == labels))

    return acc(post_f), acc(post_q), len(labels)


def float_stream_detections(model_path, audio, detector):
    """The float model on the same features, its softmax mapped to the int8 grid (p = round(256 y)),
    through the same detection rule: precision and recall of the float model, for comparison."""
    q = kws.frontend.features(audio, kws.CFG).astype(np.float64)
    post = lmu_edge.simulate(lmu_edge.load(model_path), q[None] * kws.FEATURE_SCALE)[0]
    y = np.clip(np.round(post * 256) - 128, -128, 127).astype(np.int64)
    return detector.run(y)


def flash_bytes(build_dir, source, cpu):
    obj = Path(build_dir) / f"{Path(source).stem}_{cpu}.o"
    flags = list(toolchain.ARM_RUNTIMES[{"m4": "cortex-m4", "m0": "cortex-m0"}[cpu]].cpu_flags)
    subprocess.run(
        ["arm-none-eabi-gcc", "-std=c99", "-O2", "-mthumb", *flags, "-c", source, "-o", str(obj)],
        cwd=build_dir,
        check=True,
    )
    r = subprocess.run(["arm-none-eabi-size", "-A", str(obj)], capture_output=True, text=True, check=True)
    total = 0
    for line in r.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[1].isdigit() and parts[0].startswith((".text", ".rodata", ".data")):
            total += int(parts[1])
    return total


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=40.0, help="length of the held-out stream")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--runtimes", default="host,cortex-m4,cortex-m0")
    ap.add_argument("--out", default=str(kws.ROOT / "out" / "kws"))
    args = ap.parse_args(argv)
    out = Path(args.out)
    runtimes = args.runtimes.split(",")
    model_path = kws.HERE / "kws_lmu.keras"
    det = kws.Detector()
    res = {"seconds": args.seconds, "seed": args.seed, "detector": vars(det)}

    t0 = time.perf_counter()
    art, qg = kws.convert(out / "c")
    print(f"converted {model_path.name} to int8 C in {time.perf_counter() - t0:.1f} s: {out / 'c'}")

    acc_f, acc_q, n = utterance_accuracy(qg, model_path)
    res.update(accuracy_float=acc_f, accuracy_int8=acc_q, n_words=n)
    print(
        f"held-out flite words ({n}: 10 keywords + unknown words, 5 voices x 3 speeds): "
        f"utterance accuracy float {acc_f:.3f}, int8 {acc_q:.3f}"
    )

    audio, events = kws.make_stream(args.seconds, args.seed)
    n_kw = sum(c >= 2 for _, _, c in events)
    print(
        f"held-out stream: {len(audio) / kws.SR:.1f} s, {n_kw} keywords and {len(events) - n_kw} unknown words "
        f"(flite) in noise"
    )
    lines_py, y_py, dets = kws.python_stream(qg, audio, det)
    p, r, correct, n_det, _ = kws.score(dets, events)
    pf, rf, *_ = kws.score(float_stream_detections(model_path, audio, det), events)
    res.update(precision_int8=p, recall_int8=r, precision_float=pf, recall_float=rf, detections=n_det, keywords=n_kw)

    exes = kws.build_stream(out / "c", out / "build", det, runtimes)
    same = {}
    for rt in runtimes:
        lines, y, st = kws.run_stream(exes[rt], rt, audio)
        same[rt] = bool(lines == lines_py and np.array_equal(y.astype(np.int64), y_py))
        res[rt] = st
        if rt == runtimes[0]:
            print("\n".join(f"  {ln}" for ln in lines))
    res["identical"] = same
    print(
        f"detections: int8 C precision {p:.2f}, recall {r:.2f} ({correct} of {n_det} detections correct, "
        f"{n_kw} keywords); float model with the same rule: precision {pf:.2f}, recall {rf:.2f}"
    )
    print(
        "identical detections and per-frame outputs as the Python integer pipeline: "
        + ", ".join(f"{rt} {v}" for rt, v in same.items())
    )
    if "host" in res:
        h = res["host"]
        print(
            f"host: {h['wall_s'] / h['frames'] * 1e6:.1f} us per 10 ms frame (front end + model + detection, "
            f"incl. file I/O)"
        )
    for rt in ("cortex-m4", "cortex-m0"):
        if rt in res:
            s = res[rt]
            print(
                f"{rt}: front end {s['fe_insn']:.0f} + model {s['net_insn']:.0f} instructions per frame "
                f"({(s['fe_insn'] + s['net_insn']) * 100 / 1e6:.1f} MIPS at 100 frames/s)"
            )
    if any(rt.startswith("cortex") for rt in runtimes):
        st = res[[rt for rt in runtimes if rt.startswith("cortex")][0]]
        b = out / "build"
        res["flash"] = {
            cpu: {"frontend": flash_bytes(b, "kws_frontend.c", cpu), "model": flash_bytes(b, "model.c", cpu)}
            for cpu in ("m4", "m0")
        }
        res["ram"] = {"frontend": st["fe_bytes"], "model": st["net_bytes"], "detector": st["det_bytes"]}
        print(
            f"RAM {sum(res['ram'].values())} B (front end {st['fe_bytes']}, model {st['net_bytes']}, detection "
            f"{st['det_bytes']}); flash M4: front end {res['flash']['m4']['frontend']} B, model "
            f"{res['flash']['m4']['model']} B; M0: {res['flash']['m0']['frontend']} B + "
            f"{res['flash']['m0']['model']} B"
        )
    (out / "demo.json").write_text(json.dumps(res, indent=1, default=str))
    return 0 if all(same.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
