"""The received-artifact half of scripts/fuzz.py: the seed artifacts, their mutations, and the check that
a damaged artifact is run or refused in one line with nothing planted running and nothing written into it.

``scripts/fuzz.py`` deals these categories (``ARTIFACT_CATEGORIES``) beside the model, CLI and data ones;
``tests/test_fuzz.py`` runs a sample of them in CI.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
import fuzzing  # noqa: E402  (tests/ joins sys.path first)
import hostile  # noqa: E402  (found through tests/ put on sys.path above)

EX = hostile.EXAMPLES
ARTIFACT_CATEGORIES = [
    f"artifact:{k}" for k in ("manifest", "seal", "signature", "npz", "tflite", "onnx", "weights", "tree", "signed")
]
#: a refusal must come within this many CPU seconds (the promise of docs/security.md; wall time on a loaded
#: machine running this niced is many times more, and is bounded by --time-limit)
REFUSAL_SECONDS = 10.0
#: the seed artifacts: name -> (target, convert options); every data file kind a received artifact holds
SEED_ARTIFACTS = {
    "ir": ("ir", {}),
    "c": ("c", {"quantize": "int8", "measure": False}),
    "tflite": ("tflite", {}),
    "onnx": ("onnx", {}),
    "nengo": ("nengo", {}),
}
SIGNED = ("ir", "c", "nengo")
PAYLOAD = "PWNED"


class Violation(Exception):
    """A property the run holds every input to was broken."""


# --- seeds -------------------------------------------------------------------------------------------


def build_seeds(seeds: Path, names=tuple(SEED_ARTIFACTS)) -> None:
    """Convert the shipped digits model once per artifact kind in ``names`` (and signed copies) into
    ``seeds``; the artifact categories draw from what is there."""
    import lmu_edge
    from lmu_edge import signing

    done = seeds / "done"  # the names built, one line ("" from before the marker held them: every kind)
    if done.exists() and set(names) <= set(done.read_text().split(",") if done.read_text() else SEED_ARTIFACTS):
        return
    shutil.rmtree(seeds, ignore_errors=True)
    seeds.mkdir(parents=True)
    key, _ = signing.generate(seeds / "builder")
    signing.generate(seeds / "other")
    model, cal = EX / "digits_lmu.lmu.npz", EX / "digits_calibration_x.npy"
    for name in names:
        target, opts = SEED_ARTIFACTS[name]
        opts = dict(opts)
        if opts.get("quantize", "float") != "float":
            opts["calibration"] = cal
        lmu_edge.convert(model, target, seeds / name, **opts)
        if name in SIGNED:
            lmu_edge.convert(model, target, seeds / f"{name}.signed", sign=key, **opts)
    np.save(seeds / "x.npy", np.load(EX / "digits_test_x.npy")[:2, :16])
    # a shared library whose constructor writes the payload file named by LMU_EDGE_FUZZ_PAYLOAD
    src = seeds / "evil.c"
    src.write_text(
        "#include <stdio.h>\n#include <stdlib.h>\n__attribute__((constructor)) static void evil(void) {\n"
        '  const char *p = getenv("LMU_EDGE_FUZZ_PAYLOAD"); if (p) { FILE *f = fopen(p, "w"); if (f) fclose(f); }\n}\n'
    )
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(seeds / "evil.so"), str(src)], check=True)
    (seeds / "done").write_text(",".join(names) or "-")


# --- mutations of a received artifact ----------------------------------------------------------------


def _reseal(d: Path) -> None:
    from lmu_edge import outdir

    (d / outdir.RECORD).unlink(missing_ok=True)
    outdir.seal(d)


def _mutate_npz(rng: random.Random, data: bytes) -> bytes:
    """An ``.npz`` (an IR file, weights.npz): its JSON header, an array's bytes, or the archive itself."""
    try:
        members = {i.filename: z for i, z in _members(data).items()}
    except zipfile.BadZipFile:
        return fuzzing._mutate_bytes(rng, data)
    op = rng.random()
    if op < 0.4 and "header.json.npy" in members:
        header = json.loads(np.load(io.BytesIO(members["header.json.npy"]), allow_pickle=False).tobytes())
        text = fuzzing._dumps(fuzzing._mutate_json(rng, header, rng.randint(1, 4)))
        buf = io.BytesIO()
        np.save(buf, np.frombuffer(text, np.uint8))
        members["header.json.npy"] = buf.getvalue()
    elif op < 0.7:
        k = rng.choice(sorted(members))
        members[k] = _mutate_npy(rng, members[k])
    elif op < 0.85:
        k = rng.choice(sorted(members))
        if rng.random() < 0.5:
            del members[k]
        else:
            members[rng.choice(["evil.pkl", "../x.npy", k + ".npy", "x"])] = members[k]
    else:
        return fuzzing._mutate_bytes(rng, data)
    return fuzzing._rezip(members, rng)


def _members(data: bytes) -> dict:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return {i: z.read(i.filename) for i in z.infolist()}


def _mutate_npy(rng: random.Random, data: bytes) -> bytes:
    """An ``.npy``: its header (dtype, shape, order) edited, or its bytes."""
    if rng.random() < 0.5 and data.startswith(b"\x93NUMPY"):
        try:
            a = np.load(io.BytesIO(data), allow_pickle=False)
        except Exception:  # noqa: BLE001 (already damaged: damage it further)
            return fuzzing._mutate_bytes(rng, data)
        header = {"descr": np.lib.format.dtype_to_descr(a.dtype), "fortran_order": False, "shape": a.shape}
        key = rng.choice(sorted(header))
        header[key] = rng.choice(
            {
                "descr": ["|O", "<U4", "<c16", [("a", "<f4")], "<f2", "|b1", ">f8", "<i8", "<M8[s]", "|V8"],
                "fortran_order": [True, 1],
                "shape": [(), (0,), (10**11,), (-1,), (2**62, 2**62), a.shape[::-1], (1,) * 40, (3, 0, 5)],
            }[key]
        )
        buf = io.BytesIO()
        try:
            np.lib.format.write_array_header_1_0(buf, header)
        except Exception:  # noqa: BLE001 (numpy refuses to write it: write the dict's text by hand)
            return data
        return buf.getvalue() + data[len(data) - a.nbytes :]
    return fuzzing._mutate_bytes(rng, data)


def _mutate_onnx(rng: random.Random, data: bytes, d: Path) -> bytes:
    """An ONNX model: an initializer moved to external data (a file, a FIFO, outside the artifact), its
    dims, dtype or bytes changed, a node's operator or attribute changed, or raw bytes."""
    import onnx

    op = rng.random()
    if op < 0.75:
        m = onnx.load_from_string(data)
        inits = list(m.graph.initializer)
        if op < 0.3 and inits:
            t = rng.choice(inits)
            where = rng.choice(["weights.bin", "../../x.bin", "/etc/passwd", "fifo", "missing.bin", "model.lmu.npz"])
            if where == "fifo":
                os.mkfifo(d / "fifo")
            elif where == "weights.bin":
                (d / where).write_bytes(t.raw_data or b"\0" * 64)
            t.ClearField("raw_data")
            del t.float_data[:]
            t.data_location = onnx.TensorProto.EXTERNAL
            del t.external_data[:]
            for k, v in (("location", where), ("offset", rng.choice(["0", "-1", "9" * 30])), ("length", "64")):
                e = t.external_data.add()
                e.key, e.value = k, v
        elif op < 0.5 and inits:
            t = rng.choice(inits)
            if rng.random() < 0.5:
                del t.dims[:]
                t.dims.extend(rng.choice([[], [0], [2**40], [-1], [1] * 30, [3, 5]]))
            else:
                t.data_type = rng.choice([0, 8, 13, 16, 99])
        elif op < 0.65 and m.graph.node:
            n = rng.choice(list(m.graph.node))
            if rng.random() < 0.5:
                n.op_type = rng.choice(["Loop", "Scan", "Nope", "Identity", "Gemm", "If"])
            elif n.input:
                n.input[rng.randrange(len(n.input))] = rng.choice(["", "nope", n.output[0] if n.output else "x"])
        else:
            m.ir_version = rng.choice([0, 1, 3, 99, 2**40])
            if m.opset_import:
                m.opset_import[0].version = rng.choice([0, 1, 7, 99, 2**40])
        return m.SerializeToString()
    return fuzzing._mutate_bytes(rng, data)


def _mutate_flatbuffer(rng: random.Random, data: bytes) -> bytes:
    """A TFLite file: 32-bit words overwritten with hostile values (offsets, sizes, indices), or raw bytes."""
    if rng.random() < 0.6 and len(data) > 16:
        b = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            pos = rng.randrange(0, len(b) - 4) & ~3
            v = rng.choice([0, 1, 0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, len(b), len(b) + 4, rng.randrange(2**32)])
            b[pos : pos + 4] = int(v).to_bytes(4, "little")
        return bytes(b)
    return fuzzing._mutate_bytes(rng, data)


def _plant(rng: random.Random, d: Path, seeds: Path, payload: Path) -> str:
    """Put something that would write ``payload`` if it ran into the artifact ``d``; returns what."""
    kind = rng.choice(
        ["gnumakefile", "harness", "libmodel", "pyc", "module", "package", "link_build", "link_file", "fifo", "extra"]
    )
    sh = f"#!/bin/sh\ntouch '{payload}'\n"
    mk = d / "harness" if (d / "harness").is_dir() else d  # a C artifact's Makefile folder (harness/)
    if kind == "gnumakefile":
        (mk / "GNUmakefile").write_text(f"$(shell touch '{payload}')\nall:\n\ttouch '{payload}'\n")
    elif kind == "harness":
        (mk / "build").mkdir(exist_ok=True)
        h = mk / "build" / "harness_host"
        h.write_text(sh)
        h.chmod(0o755)
        os.utime(h, (time.time() + 10**6, time.time() + 10**6))
    elif kind == "libmodel":
        (mk / "build").mkdir(exist_ok=True)
        shutil.copy(seeds / "evil.so", mk / "build" / "libmodel.so")
    elif kind == "pyc":
        import py_compile

        src = d / "evil_network.py"
        src.write_text(f"open({str(payload)!r}, 'w').close()\n")
        tag = sys.implementation.cache_tag
        (d / "__pycache__").mkdir(exist_ok=True)
        py_compile.compile(
            str(src),
            cfile=str(d / "__pycache__" / f"network.{tag}.pyc"),
            invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
        )
        src.unlink()
    elif kind == "module":
        name = rng.choice(["nengo.py", "numpy.py", "onnxruntime.py", "sitecustomize.py", "network_extra.py"])
        (d / name).write_text(f"open({str(payload)!r}, 'w').close()\n")
    elif kind == "package":
        pkg = d / rng.choice(["cryptography", "nengo", "ai_edge_litert"])
        pkg.mkdir(exist_ok=True)
        (pkg / "__init__.py").write_text(f"open({str(payload)!r}, 'w').close()\n")
    elif kind == "link_build":
        outside = d.parent / "elsewhere"
        outside.mkdir(exist_ok=True)
        shutil.rmtree(mk / "build", ignore_errors=True)
        (mk / "build").symlink_to(outside)
    elif kind == "link_file":
        files = [p for p in d.iterdir() if p.is_file() and p.name != "lmu-edge-files.json"]
        victim = rng.choice(files)
        copy = d.parent / ("outside-" + victim.name)
        shutil.copy(victim, copy)
        victim.unlink()
        victim.symlink_to(copy)
    elif kind == "fifo":
        os.mkfifo(d / rng.choice(["fifo", "Makefile.d", "model.lmu.npz.part"]))
    else:
        (d / rng.choice(["notes.txt", "build/extra.o", "sub/dir/file"])).parent.mkdir(parents=True, exist_ok=True)
        (d / rng.choice(["notes.txt"])).write_text("a user's file")
    return kind


def make_artifact_case(rng: random.Random, category: str, work: Path, seeds: Path) -> dict:
    """Copy a seed artifact into ``work`` and damage it for ``category``; returns how to run it."""
    from lmu_edge import outdir, signing

    kind = category.split(":", 1)[1]
    payload = work / PAYLOAD
    choices = {
        "tflite": ["tflite"],
        "onnx": ["onnx"],
        "weights": ["nengo"],
        "signature": [f"{n}.signed" for n in SIGNED],
        "signed": [f"{n}.signed" for n in SIGNED],
    }.get(kind, list(SEED_ARTIFACTS))
    name = rng.choice([n for n in choices if (seeds / n).is_dir()])
    d = work / "art"
    shutil.copytree(seeds / name, d, symlinks=True)
    spec = {"dir": d, "trusted_key": None, "payload": payload, "name": name}
    reseal = rng.random() < 0.8
    if kind == "manifest":
        raw = (d / "artifact.json").read_bytes()
        op = rng.random()
        if op < 0.7:
            text = fuzzing._dumps(fuzzing._mutate_json(rng, json.loads(raw), rng.randint(1, 4)))
        elif op < 0.8:
            text = b"[" * rng.choice([65, 5000, 200_000]) + b"]" * rng.choice([0, 65])
        else:
            text = fuzzing._mutate_bytes(rng, raw)
        (d / "artifact.json").write_bytes(text)
    elif kind == "seal":
        raw = (d / outdir.RECORD).read_bytes()
        rec = json.loads(raw)
        op = rng.random()
        if op < 0.3:  # a file named outside the artifact, or a recorded file dropped or renamed
            files = rec["files"]
            k = rng.choice(sorted(files))
            new = rng.choice(["../outside", "/etc/passwd", "", ".", "build", "a/../../b", k + "/x", "GNUmakefile"])
            files[new] = files.pop(k) if rng.random() < 0.5 else files[k]
            text = json.dumps(rec).encode()
        elif op < 0.8:
            text = fuzzing._dumps(fuzzing._mutate_json(rng, rec, rng.randint(1, 3)))
        else:
            text = fuzzing._mutate_bytes(rng, raw)
        (d / outdir.RECORD).write_bytes(text)
        reseal = False
    elif kind == "signature":
        spec["trusted_key"] = seeds / rng.choice(["builder.pub", "builder.pub", "other.pub", "builder.key"])
        sig = d / signing.SIGNATURE
        op = rng.random()
        if op < 0.4:
            sig.write_bytes(fuzzing._dumps(fuzzing._mutate_json(rng, json.loads(sig.read_bytes()), rng.randint(1, 3))))
        elif op < 0.6:
            sig.write_bytes(fuzzing._mutate_bytes(rng, sig.read_bytes()))
        elif op < 0.7:
            sig.unlink()
        elif op < 0.8:  # a mutated key file given as trusted
            key = work / "mutated.pub"
            key.write_bytes(fuzzing._mutate_bytes(rng, (seeds / "builder.pub").read_bytes()))
            spec["trusted_key"] = key
        elif op < 0.9:
            with open(sig, "r+b") as f:  # sparse: huge on disk, nothing in it
                f.truncate(rng.choice([1 << 20, 3 << 30]))
        # else: intact (accepted under the builder's key, refused under another)
        reseal = False
    elif kind in ("npz", "weights"):
        pool = ["weights.npz"] if kind == "weights" else [p.name for p in d.glob("*.lmu.npz")]
        f = d / rng.choice(pool)
        f.write_bytes(_mutate_npz(rng, f.read_bytes()))
    elif kind == "tflite":
        if rng.random() < 0.75:
            f = d / "model.tflite"
            f.write_bytes(_mutate_flatbuffer(rng, f.read_bytes()))
        else:
            f = d / "io.json"
            f.write_bytes(fuzzing._dumps(fuzzing._mutate_json(rng, json.loads(f.read_bytes()), rng.randint(1, 3))))
    elif kind == "onnx":
        f = d / rng.choice(["sequence.onnx", "step.onnx"])
        f.write_bytes(_mutate_onnx(rng, f.read_bytes(), d))
        reseal = reseal and not (d / "fifo").exists()  # a seal cannot hash a FIFO: it stays unrecorded
    elif kind == "tree":
        spec["planted"] = _plant(rng, d, seeds, payload)
        reseal = rng.random() < 0.3 and spec["planted"] in ("gnumakefile", "harness", "libmodel", "extra")
    elif kind == "signed":
        spec["trusted_key"] = seeds / "builder.pub"
        op = rng.random()
        mk = d / "harness" / "Makefile"  # the builder's Makefile made to run the payload
        if op < 0.4 and mk.exists():
            mk.write_text(f"$(shell touch '{payload}')\n" + mk.read_text())
        elif op < 0.4 and (d / "network.py").exists():
            with open(d / "network.py", "a") as fh:
                fh.write(f"\nopen({str(payload)!r}, 'w').close()\n")
        elif op < 0.7:
            spec["planted"] = _plant(rng, d, seeds, payload)
        else:
            files = sorted(p for p in d.rglob("*") if p.is_file() and not p.name.startswith("lmu-edge-files"))
            f = rng.choice(files)
            f.write_bytes(fuzzing._mutate_bytes(rng, f.read_bytes()))
        reseal = rng.random() < 0.8 and not any(not p.is_file() and not p.is_dir() for p in d.rglob("*"))
    if reseal:
        with contextlib.suppress(OSError):
            _reseal(d)
    if kind == "signed":  # the seal or a file it records changed: the builder's key must refuse it
        changed = []
        for p in sorted((seeds / name).rglob("*")):
            q = d / p.relative_to(seeds / name)
            if p.is_file() and p.name != signing.SIGNATURE and (not q.is_file() or q.read_bytes() != p.read_bytes()):
                changed.append(p.name)
        spec["must_refuse"] = ", ".join(changed[:3])
    return spec


def check_artifact(spec: dict, rng: random.Random, work: Path, seeds: Path) -> str:
    """Run a damaged artifact through ``run``, ``verify`` or the Python API: success or one line, and nothing
    planted ran, nothing written into the artifact."""
    from click.testing import CliRunner

    import lmu_edge
    from lmu_edge.cli import main
    from lmu_edge.errors import LmuEdgeError

    d, payload = spec["dir"], spec["payload"]
    before = {str(p.relative_to(d)) for p in d.rglob("*")}
    os.environ["LMU_EDGE_FUZZ_PAYLOAD"] = str(payload)
    how = rng.choice(spec.get("hows", ["run", "verify", "api", "stream"]))
    t = fuzzing.cpu_seconds()
    key = ["--trusted-key", str(spec["trusted_key"])] if spec["trusted_key"] else []
    x_path, runtime = spec.get("x", seeds / "x.npy"), spec.get("runtime")
    if how in ("run", "verify", "inspect"):
        out = work / "y.npy"
        args = [how, str(d), "-i", str(x_path), *key, "-q"] + (["-o", str(out)] if how == "run" else [])
        args += ["-r", runtime] if runtime else []
        if how == "inspect":  # the artifact folder, or its data file given as a model
            args = [how, str(d / rng.choice(["", "model.nir"]))]
        r = CliRunner().invoke(main, args, catch_exceptions=True)
        status = _cli_outcome(r, args)
    else:
        try:
            art = lmu_edge.open_artifact(d, trusted_key=spec["trusted_key"])
            x = np.load(x_path)
            if how == "api":
                art.run(x, runtime)
            else:
                s = art.stream(runtime)
                s.reset(1)
                for x_t in x[0, :4]:
                    s.step(x_t)
            status = "accepted"
        except LmuEdgeError as e:
            if "\n" in str(e):
                raise Violation(f"multi-line error: {e!r}") from None
            status = "refused"
    if status == "refused" and fuzzing.cpu_seconds() - t > REFUSAL_SECONDS:
        raise Violation(f"refusal took {fuzzing.cpu_seconds() - t:.1f} CPU s")
    if payload.exists():
        raise Violation(f"a planted payload ran ({spec.get('planted', 'an edit')} in {spec['name']})")
    if status == "accepted" and spec.get("must_refuse"):
        raise Violation(f"a changed signed artifact ran under its builder's key ({spec['must_refuse']})")
    after = {str(p.relative_to(d)) for p in d.rglob("*")} if d.is_dir() else set()
    if after - before:
        raise Violation(f"written into the artifact: {sorted(after - before)[:3]}")
    return status


def _cli_outcome(r, args) -> str:
    err = r.stderr if hasattr(r, "stderr") else r.output
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise _Internal(f"{' '.join(args[:1])}: raised {type(r.exception).__name__}: {r.exception}")
    if r.exit_code == 0:
        return "accepted"
    lines = [line for line in err.splitlines() if line.strip()]
    if args[0] == "verify" and r.exit_code == 1 and not lines:
        return "refused"  # verify's FAIL verdict (on stdout) on an artifact that runs but differs from its source
    if r.exit_code == 70 or "Traceback" in err or "internal error" in err:
        raise _Internal(f"exit {r.exit_code}: {' '.join(err.split())[:300]}")
    if r.exit_code not in (1, 2) or len(lines) != 1 or not lines[0].startswith("lmu-edge: error: "):
        raise Violation(f"exit {r.exit_code}, {len(lines)} lines: {' '.join(err.split())[:300]}")
    return "refused"


class _Internal(Exception):
    """The CLI reported an internal error (exit 70) or a traceback."""
