"""The received NIR artifact for scripts/fuzz.py (``artifact:nir``): ``model.nir`` damaged as HDF5 and as a
NIR graph, resealed in most cases so that the seal does not hide the damage, then read by ``run``,
``verify``, the API (Rockpool, or Sinabs where its Python is set) or ``inspect``.

Two seed artifacts: the shipped digits model in the spiking variant (10 neurons per dimension, 2 steps per
sample: ``CubaLIF``, ``LI``, ``Affine`` nodes) and a small exact-variant graph (``LI`` with its recurrent
``Affine``: a cycle in the edges) that the Sinabs runtime also runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
import fuzzing  # noqa: E402  (tests/ joins sys.path first)
import hostile  # noqa: E402  (found through tests/ put on sys.path above)

EX = hostile.EXAMPLES
NIR_CATEGORIES = ["artifact:nir"]
NIR_SEEDS = ("nir", "nir.exact")
#: the node types nir 1.0.8 reads, and some it does not
NODE_TYPES = [
    "Affine", "Linear", "LI", "LIF", "CubaLIF", "IF", "I", "CubaLI", "Delay", "Conv1d", "Conv2d", "Flatten",
    "SumPool2d", "AvgPool2d", "Scale", "Threshold", "Input", "Output", "NIRGraph", "Nope", "", "__class__",
]  # fmt: skip
OPS = [
    "bytes", "truncate", "external", "soft", "virtual", "huge", "array_dtype", "compound", "dtype", "values",
    "shape", "type", "edges", "delete", "add", "nest", "metadata", "rename", "version",
]  # fmt: skip


def build_nir_seeds(seeds: Path, names=NIR_SEEDS) -> None:
    """Convert the seed NIR artifacts ``names`` into ``seeds`` (once each: ``seeds/NAME.done`` marks one built;
    ``seeds`` also holds what ``fuzz_artifacts.build_seeds`` writes whatever its names)."""
    import lmu_edge
    from lmu_edge import ir

    todo = [n for n in names if not (seeds / f"{n}.done").exists()]
    for name in todo:
        shutil.rmtree(seeds / name, ignore_errors=True)
    if "nir" in todo:
        _convert_spiking(seeds)
    if "nir.exact" in todo:
        from graphs import lmu  # the tests' graph builders (tests/ is on sys.path)

        rng = np.random.default_rng(5)
        layer = lmu(rng, n_in=2, d=2, q=4, theta=6.0, hidden=None)
        post = ir.Dense("post", rng.standard_normal((8, 3)) * 0.5, None, "linear")
        x = rng.standard_normal((1, 8, 2))
        g = ir.Graph("lin", 2, (layer, post))
        lmu_edge.convert(g, "nir", seeds / "nir.exact", calibration=x, steps_per_sample=10, tolerance=float("inf"))
        np.save(seeds / "nir.exact.x.npy", x[:, :4])
    for name in todo:
        (seeds / f"{name}.done").write_text("")


def _convert_spiking(seeds: Path) -> None:
    import lmu_edge

    lmu_edge.convert(
        EX / "digits_lmu.lmu.npz",
        "nir",
        seeds / "nir",
        calibration=EX / "digits_calibration_x.npy",
        variant="spiking",
        neurons_per_dim=10,
        steps_per_sample=2,
        tolerance=float("inf"),
    )


def _datasets(h5) -> list:
    out: list = []
    h5.visititems(lambda n, o: out.append(n) if hasattr(o, "shape") else None)
    return sorted(out)


def _nodes(h5) -> list:
    return sorted(h5["node/nodes"].keys()) if "node/nodes" in h5 else []


def _replace(h5, path: str, **kw) -> None:
    del h5[path]
    h5.create_dataset(path, **kw)


def _mutate_h5(rng: random.Random, f: Path, d: Path, op: str) -> str:
    """Edit the HDF5 file ``f`` in place for ``op``; returns what was done."""
    import h5py

    with h5py.File(f, "r+") as h5:
        datasets = [p for p in _datasets(h5) if p.startswith("node/")] or ["version"]
        nodes = _nodes(h5)
        path = rng.choice(datasets)
        if op == "external":
            where = rng.choice(
                ["fifo", "../outside_fifo", "/etc/passwd", "other.h5", "../outside.h5", "model.nir", "/dev/zero"]
            )
            if where.endswith("fifo"):
                os.mkfifo(d / where)
            elif where.endswith("other.h5") or where.endswith("outside.h5"):
                with h5py.File((d / where).resolve(), "w") as o:
                    o["x"] = np.ones((32, 320))
            del h5[path]
            h5[path] = h5py.ExternalLink(where, rng.choice(["/x", "/", "/node"]))
            return f"{path} -> external {where}"
        if op == "soft":
            to = rng.choice(["/nope", "/node", f"/{path}", "/node/nodes", "../../x", "/" + rng.choice(datasets)])
            del h5[path]
            h5[path] = h5py.SoftLink(to)
            return f"{path} -> soft {to}"
        if op == "virtual":
            src = (d.parent / "vds_source.h5").resolve()
            with h5py.File(src, "w") as o:
                o["x"] = np.ones(320)
            layout = h5py.VirtualLayout(shape=(320,), dtype="f8")
            layout[:] = h5py.VirtualSource(str(src), "x", shape=(320,))
            del h5[path]
            h5.create_virtual_dataset(path, layout)
            return f"{path} virtual"
        if op == "huge":
            shape = rng.choice([(2**40,), (2**31, 2**31), (1 << 27,), ((1 << 27) + 1,), (4096, 32768), (0,), ()])
            chunks = None if shape in ((0,), ()) else tuple(min(s, 1024) for s in shape)
            _replace(h5, path, shape=shape, dtype="f8", chunks=chunks)
            return f"{path} shape {shape}"
        if op == "array_dtype":
            _replace(h5, path, shape=(2**20,), dtype=np.dtype(("f8", (512,))), chunks=(16,))
            return f"{path} array dtype"
        if op == "compound":
            _replace(h5, path, shape=(4,), dtype=np.dtype([("a", "f8"), ("b", "i4")]))
            return f"{path} compound"
        if op == "dtype":
            val = h5[path][()]
            new = rng.choice(["i1", "u8", "?", "c16", "f2", "S8", "object"])
            arr = np.asarray(val)
            if new == "object":
                data = np.asarray(arr.astype(str), dtype=h5py.string_dtype())
            else:
                try:
                    data = arr.astype(new)
                except (TypeError, ValueError):
                    data = np.zeros(arr.shape, new)
            _replace(h5, path, data=data)
            return f"{path} as {new}"
        if op == "values":
            arr = np.array(h5[path][()])
            if arr.dtype.kind != "f":
                _replace(h5, path, data=rng.choice([np.float64(np.nan), np.arange(3), np.array(b"x" * 100)]))
                return f"{path} replaced"
            v = rng.choice([np.nan, np.inf, -np.inf, 1e308, -1e308, 0.0, -1.0, 1e-320])
            flat = arr.reshape(-1)
            if flat.size:
                flat[rng.randrange(flat.size) if rng.random() < 0.5 else slice(None)] = v
            h5[path][...] = arr
            return f"{path} = {v}"
        if op == "shape":
            arr = np.array(h5[path][()])
            new = rng.choice([arr.T, arr.reshape(-1), arr[..., :1], np.concatenate([arr.reshape(-1)] * 2), arr[None]])
            _replace(h5, path, data=new)
            return f"{path} shape {np.shape(new)}"
        if op == "type" and nodes:
            n = rng.choice(nodes + ["", ""])
            at = f"node/nodes/{n}/type" if n else "node/type"
            with contextlib.suppress(KeyError):
                del h5[at]
            h5[at] = rng.choice(NODE_TYPES)
            return f"{at} = {h5[at][()]!r}"
        if op == "edges":
            e = [tuple(x.decode() if isinstance(x, bytes) else str(x) for x in row) for row in h5["node/edges"][()]]
            how = rng.choice(["drop", "missing", "self", "dup", "int", "wide", "empty", "reverse"])
            if how == "drop" and e:
                e.pop(rng.randrange(len(e)))
            elif how == "missing":
                e.append((rng.choice(nodes or ["x"]), "nope"))
            elif how == "self" and nodes:
                n = rng.choice(nodes)
                e.append((n, n))
            elif how == "dup" and e:
                e += e
            elif how == "reverse":
                e = [(b, a) for a, b in e]
            del h5["node/edges"]
            if how == "int":
                h5["node/edges"] = np.arange(16).reshape(8, 2)
            elif how == "wide":
                h5["node/edges"] = np.asarray(
                    [list(r) + ["x"] for r in e] or [["a", "b", "c"]], dtype=h5py.string_dtype()
                )
            elif how == "empty" or not e:
                h5.create_dataset("node/edges", shape=(0, 2), dtype=h5py.string_dtype())
            else:
                h5["node/edges"] = np.asarray(e, dtype=h5py.string_dtype())
            return f"edges {how}"
        if op == "delete":
            target = rng.choice([f"node/nodes/{rng.choice(nodes)}" if nodes else "node", path, "node/edges", "node"])
            with contextlib.suppress(KeyError):
                del h5[target]
            return f"deleted {target}"
        if op == "add" and nodes:
            g = h5.create_group(f"node/nodes/{rng.choice(['extra', 'output', '0.mem', '../x', 'a' * 200])}x")
            g["type"] = rng.choice(NODE_TYPES)
            g["weight"] = np.ones(rng.choice([(3, 3), (4096, 4096), (1,)]))
            g["bias"] = np.zeros(3)
            return f"added {g.name}"
        if op == "nest":
            depth = rng.choice([2, 50, 400, 2000])
            g = h5["node/nodes"].create_group("nested")
            for _ in range(depth):
                g["type"] = "NIRGraph"
                g.create_dataset("edges", shape=(0, 2), dtype=h5py.string_dtype())
                g = g.create_group("nodes").create_group("n")
            g["type"] = "Input"
            g["shape"] = np.array([1])
            return f"nested {depth} graphs"
        if op == "metadata":
            at = "node/metadata/lmu_edge"
            raw = h5[at][()] if at in h5 else b"{}"
            with contextlib.suppress(KeyError):
                del h5[at]
            r = rng.random()
            if r < 0.5:
                obj = json.loads(raw.decode() if isinstance(raw, bytes) else raw)
                h5[at] = fuzzing._dumps(fuzzing._mutate_json(rng, obj, rng.randint(1, 4))).decode()
            elif r < 0.7:
                h5[at] = "[" * rng.choice([100, 5000, 200_000])
            elif r < 0.85:
                h5[at] = rng.choice([np.arange(4), np.float64(1.5), np.array([b"a", b"b"])])
            else:
                h5[at] = json.dumps({"host_softmax": "yes", "steps_per_sample": rng.choice([0, -1, 2**62, "2"])})
            return "metadata"
        if op == "rename" and nodes:
            n = rng.choice(nodes)
            h5.move(f"node/nodes/{n}", f"node/nodes/{n}_renamed")
            return f"renamed {n}"
        with contextlib.suppress(KeyError):
            del h5["version"]
        h5["version"] = rng.choice(["0.0.1", "99", "", "1.0.8\n"])
        return "version"


def make_nir_case(rng: random.Random, work: Path, seeds: Path) -> dict:
    """Copy a seed NIR artifact into ``work`` and damage its ``model.nir``; returns how to run it (the
    spec of ``fuzz_artifacts.check_artifact``)."""
    from fuzz_artifacts import PAYLOAD, _reseal

    name = rng.choice([n for n in NIR_SEEDS if (seeds / n).is_dir()])
    d = work / "art"
    shutil.copytree(seeds / name, d, symlinks=True)
    f = d / "model.nir"
    op = rng.choice(OPS)
    if op == "bytes":
        f.write_bytes(fuzzing._mutate_bytes(rng, f.read_bytes()))
        what = op
    elif op == "truncate":
        data = f.read_bytes()
        f.write_bytes(data[: rng.randrange(len(data))])
        what = op
    else:
        try:
            what = _mutate_h5(rng, f, d, op)
        except (ValueError, TypeError, KeyError, IndexError, OSError, RuntimeError) as e:  # a mutation not made
            what = f"{op} (not made: {type(e).__name__})"
    if rng.random() < 0.8 and not (d / "fifo").exists():
        with contextlib.suppress(OSError):
            _reseal(d)
    sinabs = os.environ.get("LMU_EDGE_SINABS_PYTHON")
    runtime = "sinabs" if name == "nir.exact" and sinabs and rng.random() < 0.3 else None
    x = seeds / "nir.exact.x.npy" if name == "nir.exact" else seeds / "x.npy"
    how = ["run", "verify", "api", "stream", "inspect"]
    return {
        "dir": d,
        "trusted_key": None,
        "payload": work / PAYLOAD,
        "name": name,
        "x": x,
        "runtime": runtime,
        "hows": how,
        "planted": what,
    }
