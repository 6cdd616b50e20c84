"""Hostile and malformed model files for the security tests and the fuzzer (written, never shipped)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "models"

#: a name that would close a C comment and add code, a Makefile line, Python and HTML
INJECTION = (
    'x */\nint lmu_pwned(void) { return system("touch PWNED"); }\n/* '
    "\\\n$(shell touch PWNED)"
    '<script>alert(1)</script>\'"; import os; os.system("touch PWNED") #'
)
#: further hostile names: path separators, NUL, control characters, very long, non-ASCII, empty
NAMES = [INJECTION, "../../etc/passwd", "a\x00b", "\r\n\t", "x" * 5000, "ﬁ?*", "", " ", "-rf", ".hidden"]


def rewrite_zip(src: Path, dst: Path, edit) -> Path:
    """Copy the zip ``src`` to ``dst`` with ``edit(name, bytes) -> bytes | None`` applied (None drops it)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            data = edit(info.filename, zin.read(info.filename))
            if data is not None:
                zout.writestr(info.filename, data)
    return dst


def keras_with_names(dst: Path, model_name=None, layer_names=None, src=EXAMPLES / "keras_digits.keras") -> Path:
    """The shipped keras digits model with its model name and / or layer names replaced in config.json."""

    def edit(name, data):
        if name != "config.json":
            return data
        cfg = json.loads(data)
        if model_name is not None:
            cfg["config"]["name"] = model_name
        for layer, new in zip(cfg["config"]["layers"], layer_names or [], strict=False):
            if new is not None:
                layer["config"]["name"] = new
                layer["name"] = new
        return json.dumps(cfg).encode()

    return rewrite_zip(src, dst, edit)


def ir_header(path: Path) -> dict:
    with np.load(path, allow_pickle=False) as z:
        return json.loads(z["header.json"].tobytes())


def write_ir(dst: Path, header, arrays: dict, extra_members: dict = None) -> Path:
    """An IR file with the given header (dict or raw text) and arrays, plus raw extra zip members."""
    text = header if isinstance(header, (str, bytes)) else json.dumps(header)
    raw = text.encode() if isinstance(text, str) else text
    members = {"header.json": np.frombuffer(raw, np.uint8)}
    members.update(arrays)
    np.savez(dst, **members)
    if extra_members:
        with zipfile.ZipFile(dst, "a") as z:
            for k, v in extra_members.items():
                z.writestr(k, v)
    return dst


def ir_arrays(path: Path) -> dict:
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files if k != "header.json"}


def edit_ir(src: Path, dst: Path, edit) -> Path:
    """Copy an IR file with ``edit(header_dict, arrays)`` applied in place."""
    h, a = ir_header(src), ir_arrays(src)
    edit(h, a)
    return write_ir(dst, h, a)


#: HDF5 edits that must be refused when they replace a weight of a .h5 model (no FIFO here: the fuzzer runs
#: in-process under CI, where a regression would hang; tests/test_security_inputs.py has the FIFO case)
H5_EDITS = ("external", "external_missing", "soft_nowhere", "soft_cycle", "vds", "raw", "array", "compound", "bytes")


def h5_edit(path: Path, dataset: str, edit: str) -> Path:
    """Replace ``dataset`` of the HDF5 file ``path`` (in place) by the hostile construct ``edit``."""
    import h5py

    other = path.with_name(path.stem + ".other.h5")
    with h5py.File(other, "w") as f:
        f["x"] = np.ones((32, 10), np.float32)
    with h5py.File(path, "r+") as f:
        shape = f[dataset].shape
        del f[dataset]
        if edit == "external":
            f[dataset] = h5py.ExternalLink(str(other), "/x")
        elif edit == "external_missing":
            f[dataset] = h5py.ExternalLink(str(path.with_name("missing.h5")), "/x")
        elif edit == "soft_nowhere":
            f[dataset] = h5py.SoftLink("/no/such/object")
        elif edit == "soft_cycle":
            f[dataset] = h5py.SoftLink(dataset)
        elif edit == "vds":
            layout = h5py.VirtualLayout(shape=(32, 10), dtype="f4")
            layout[:] = h5py.VirtualSource(str(other), "x", shape=(32, 10))
            f.create_virtual_dataset(dataset, layout)
        elif edit == "raw":
            raw = path.with_name(path.stem + ".raw")
            raw.write_bytes(b"\0" * 1280)
            f.create_dataset(dataset, (32, 10), "f4", external=[(str(raw), 0, 1280)])
        elif edit == "array":
            f.create_dataset(dataset, shape=(2**20,), dtype=np.dtype(("f8", 512)))
        elif edit == "compound":
            f.create_dataset(dataset, shape=shape, dtype=np.dtype([("a", "f4"), ("b", "f4")]))
        else:
            f.create_dataset(dataset, shape=(4096,), dtype="S1048576", chunks=(1,))
    return path


def limit_edge_ir(dst: Path, rng) -> Path:
    """An IR file of one LMU with sizes at the edges of the limits (order, theta, memory_d, declared length),
    small on disk and asking for anything from a second to days of work."""
    from lmu_edge import ir, limits, save

    q = int(rng.choice([4, 16, 64, 256, 512, limits.MAX_ORDER]))
    theta = float(rng.choice([limits.MIN_THETA, q, 10.0 * q, 100.0 * q, limits.MAX_THETA]))
    d = int(rng.choice([1, 8, limits.MAX_MEMORY_D]))
    seq_len = rng.choice([None, 64, 100_000, limits.MAX_SEQ_LEN])
    layer = ir.LMU(
        "lmu",
        memory_d=d,
        order=q,
        theta=theta,
        discretizer="zoh",
        input_encoders=np.ones((1, d)),
        encoder_bias=None,
        hidden_encoders=None,
        memory_encoders=None,
        hidden=None,
        input_to_hidden=False,
        return_sequences=bool(rng.random() < 0.5),
        memory=ir.ImpulseResponse(),
    )
    return save(ir.Graph("edge", input_features=1, seq_len=seq_len, layers=(layer,)), dst)
