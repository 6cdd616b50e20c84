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
