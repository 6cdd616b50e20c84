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
