"""Escaping of untrusted text for the files lmu-edge generates.

Names and strings read from model files are validated where they enter the IR
(:func:`lmu_edge.limits.check_name`), and escaped again here wherever text
reaches a generated file, as a second line of defence: a C comment cannot be
closed, a Makefile comment cannot continue onto the next line, nothing becomes
code. HTML is escaped by the report template engine (Jinja2 autoescape) and
JSON by the JSON encoder; Python sources are never generated from model data.
"""

from __future__ import annotations

import re

_UNPRINTABLE = re.compile(r"[^\x20-\x7e]")


def printable(text, limit: int = 200) -> str:
    """One line of printable ASCII: other characters become ``?``, cut to ``limit`` characters."""
    s = _UNPRINTABLE.sub("?", str(text))
    return s if len(s) <= limit else s[: limit - 3] + "..."


def c_comment(text, limit: int = 200) -> str:
    """Text safe inside a C block comment ``/* ... */`` (and idempotent): one printable line in which no
    comment delimiter, trigraph or line splice can appear."""
    s = printable(text, limit).replace("\\", "/")
    while "*/" in s or "/*" in s or "??" in s:
        s = s.replace("*/", "*_").replace("/*", "_*").replace("??", "?_")
    return s


def c_string(text, limit: int = 200) -> str:
    """A C string literal (with the quotes) holding ``text`` as printable ASCII."""
    s = printable(text, limit).replace("\\", "\\\\").replace('"', '\\"').replace("??", "?\\?")
    return f'"{s}"'


def make_comment(text, limit: int = 200) -> str:
    """Text safe in a Makefile comment: one line, no backslash (a trailing one would continue the comment)
    and no ``$`` (never expanded in a comment, but kept out all the same)."""
    return printable(text, limit).replace("\\", "/").replace("$", "_")
