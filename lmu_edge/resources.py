"""Where lmu-edge's packaged files are: one helper for a checkout, an editable and a regular install.

``firmware_templates/`` sits at the repository root and installs as the sub-package
``lmu_edge.firmware_templates`` (pyproject's ``package-dir``), so a path built from ``__file__``
is right in one layout and wrong in the other. Every module finds the templates through
:func:`templates_dir`, which asks the import system where that package is.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path


@functools.lru_cache(maxsize=None)
def templates_dir() -> Path:
    """The directory holding ``lmu_runtime.h``, ``lmu_frontend.h``, the Makefile template, ..."""
    spec = importlib.util.find_spec("lmu_edge.firmware_templates")
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            if (Path(location) / "lmu_runtime.h").is_file():
                return Path(location)
    checkout = Path(__file__).resolve().parent.parent / "firmware_templates"  # a bare checkout on sys.path
    if (checkout / "lmu_runtime.h").is_file():
        return checkout
    raise FileNotFoundError(
        "lmu-edge's firmware templates are missing from this installation "
        "(lmu_edge.firmware_templates); reinstall lmu-edge"
    )


@functools.lru_cache(maxsize=None)
def docs_dir() -> Path:
    """The folder holding the documentation pages (``lmu-edge docs``): ``docs/`` installs as the package data
    of ``lmu_edge.docs``; a checkout (or an editable install made before the pages were packaged) has it at
    the repository root."""
    spec = importlib.util.find_spec("lmu_edge.docs")
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        if (Path(location) / "README.md").is_file():
            return Path(location)
    checkout = Path(__file__).resolve().parent.parent / "docs"
    if (checkout / "README.md").is_file():
        return checkout
    raise FileNotFoundError(
        "lmu-edge's documentation pages are missing from this installation (lmu_edge/docs); reinstall lmu-edge"
    )
