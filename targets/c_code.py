"""The C text of one model as data: :class:`Code` collects its constant arrays, parameter structs, state
fields and step lines, which :mod:`.c_codegen` (the layers in the runtime's kernels) and :mod:`.c_layers`
(the layers with their own runtime header) fill and ``model.c.j2`` writes; the C literals and names it
needs (float literals that round-trip, the prefix check) are here too."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import List

import numpy as np

from .. import qir
from ..escape import c_comment

C_KEYWORDS = {
    "auto",
    "break",
    "case",
    "char",
    "const",
    "continue",
    "default",
    "do",
    "double",
    "else",
    "enum",
    "extern",
    "float",
    "for",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "register",
    "restrict",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "struct",
    "switch",
    "typedef",
    "union",
    "unsigned",
    "void",
    "volatile",
    "while",
    "main",
}
SIZES = {"int64_t": 8, "int32_t": 4, "float": 4, "int16_t": 2, "int8_t": 1}


def check_prefix(prefix: str) -> str:
    """Return ``prefix`` if it can start C identifiers; ValueError (what to use instead) if not."""
    if (
        not isinstance(prefix, str)
        or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", prefix)
        or prefix in C_KEYWORDS
        or prefix.startswith("__")
        or prefix.startswith("lmu_")
    ):
        raise ValueError(
            f"--prefix {prefix!r} is not usable as a C identifier prefix: use letters, digits and "
            f"underscores, start with a letter, and avoid C keywords and the runtime's 'lmu_' prefix"
        )
    return prefix


def c_float(v) -> str:
    """A float32 literal that round-trips exactly."""
    f = np.float32(v)
    if not np.isfinite(f):
        raise ValueError(f"cannot write the non-finite value {v!r} into C")
    s = f"{float(f):.9g}"
    if not any(ch in s for ch in ".en"):
        s += ".0"
    return s + "f"


def _body(values, ctype) -> str:
    flat = np.asarray(values).ravel()
    if ctype == "float":
        items = [c_float(v) for v in flat]
    else:
        items = [str(int(v)) for v in flat]
    if not items:
        items = ["0"]
    per = 8 if ctype == "float" else 16
    return "\n".join("    " + ", ".join(items[i : i + per]) + "," for i in range(0, len(items), per))


def ctype_bits(bits: int) -> str:
    """The C integer type of ``bits`` bits (8, 16 or 32)."""
    return "int8_t" if bits <= 8 else ("int16_t" if bits <= 16 else "int32_t")


@dataclass
class Code:
    """One model's C as data: constant arrays, parameter structs, state fields, reset and step lines."""

    prefix: str
    arrays: List[dict] = field(default_factory=list)
    objects: List[str] = field(default_factory=list)
    fields: List[tuple] = field(default_factory=list)  # (ctype, name, count)
    reset_lines: List[str] = field(default_factory=list)
    step_lines: List[str] = field(default_factory=list)
    const_bytes: int = 0
    macs: int = 0
    accumulators: List[dict] = field(default_factory=list)  # the sum-width proof of each dense memory
    #: the int16x8 layers' weights also in the expanded layout for DSP cores (LMU_WX); False: int8 only
    expand_weights: bool = True
    wx_bytes: int = 0  # what the expanded layout adds to the constants of a DSP build

    def array(self, name, ctype, values, comment="", align=False, guard=None, count_bytes=True) -> str:
        """Add a constant array ``<prefix>_<name>`` of ``ctype`` holding ``values``; returns its symbol.
        int16 arrays, and any with ``align``, are word-aligned (``LMU_ALIGN4``: the DSP kernels' LDRD).
        ``guard``: a preprocessor condition under which the array exists; elsewhere its name is ``NULL``.
        ``count_bytes=False`` leaves it out of ``const_bytes`` (the other layout of the same weights)."""
        sym = f"{self.prefix}_{name}"
        vals = np.asarray(values).ravel()
        self.arrays.append(
            {
                "name": sym,
                "ctype": ctype,
                "count": max(vals.size, 1),
                "body": _body(vals, ctype),
                "comment": c_comment(comment or name),
                "align": bool(align) or ctype == "int16_t",
                "guard": guard,
            }
        )
        if count_bytes:
            self.const_bytes += SIZES[ctype] * max(vals.size, 1)
        return sym

    def params(self, ctype, name, fields) -> str:
        """Add ``static const <ctype> <prefix>_<name>`` with designated initializers, one field per line,
        from ``fields``: ``(field, value)`` or ``(field, value, comment)``; returns a pointer to it."""
        sym = f"{self.prefix}_{name}"
        body = []
        for f in fields:
            line = f"    .{f[0]} = {f[1]},"
            body.append(line + (f" /* {c_comment(f[2])} */" if len(f) > 2 and f[2] else ""))
        self.objects.append(f"static const {ctype} {sym} = {{\n" + "\n".join(body) + "\n};")
        return f"&{sym}"

    def state(self, ctype, name, count=1) -> str:
        """Add a field ``ctype name[count]`` to the state struct; returns the C expression ``s->name``."""
        self.fields.append((ctype, name, int(count)))
        return f"s->{name}"

    def struct_fields(self) -> list:
        """The state struct's field declarations, widest type first (no padding between fields)."""
        order = sorted(self.fields, key=lambda f: -SIZES[f[0]])  # widest first: no padding inside
        return [f"{t} {n}[{c}];" for t, n, c in order]

    @property
    def state_bytes(self) -> int:
        """``sizeof`` the state struct: the fields' bytes rounded up to the widest field's alignment."""
        total = sum(SIZES[t] * c for t, _, c in self.fields)
        align = max((SIZES[t] for t, _, _ in self.fields), default=1)
        return -(-total // align) * align


# --- expanded weights (LMU_WX) ----------------------------------------------------------------


def wx_layout(w, int8_inputs: bool = False) -> np.ndarray:
    """The expanded weights' order (``LMU_WX``, lmu_int16.h) of an (n_out, n_in) matrix: blocks of 4 rows by 4
    columns, zero-padded, block b's group g at ((b G + g) 4 + r) 4 + c for row 4b + r and column 4g + c; for
    int8 inputs (lmu_qlinear.h) each group's columns in the order 0, 2, 1, 3 (the pairs SXTB16 makes)."""
    w = np.asarray(w, dtype=np.int64)
    n_out, n_in = w.shape
    b, g = -(-n_out // 4), -(-n_in // 4)
    pad = np.zeros((4 * b, 4 * g), dtype=np.int64)
    pad[:n_out, :n_in] = w
    blocks = pad.reshape(b, 4, g, 4).transpose(0, 2, 1, 3)
    return (blocks[..., [0, 2, 1, 3]] if int8_inputs else blocks).ravel()


#: the fewest inputs of a part whose weights get the expanded layout: four groups (below, the call costs more
#: than the assembly saves: measured on the bench model's 8-input output layer)
WX_MIN_INPUTS = 16


def expands(q: qir.QLinear, p: qir.QPart) -> bool:
    """Whether part ``p`` of a layer also gets the expanded layout (LMU_WX). 16-bit activations: zero point 0
    and int8 weights in every part (lmu_qlinear16_rows' rows of four), and at least WX_MIN_INPUTS inputs in
    this part (below that the int8 rows are cheaper: nothing for the assembly). 8-bit activations: every part
    of the layer has WX_MIN_INPUTS inputs (its kernels take expanded weights for all parts or none)."""
    if q.in_bits == 8:
        return all(int(r.kernel.shape[0]) >= WX_MIN_INPUTS for r in q.parts)
    return (
        q.in_bits == 16
        and int(p.kernel.shape[0]) >= WX_MIN_INPUTS
        and all(int(r.in_zp) == 0 and (not r.kernel.size or int(np.abs(r.kernel).max()) <= 127) for r in q.parts)
    )
