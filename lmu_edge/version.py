"""The installed version of lmu-edge (``lmu_edge.__version__``), in a module of its own so that the targets
and the artifact writer can record it without importing the package's ``__init__`` (which imports them)."""

from __future__ import annotations

try:
    from importlib.metadata import version as _dist_version

    __version__ = _dist_version("lmu-edge")
except Exception:  # running from a source tree that is not installed
    __version__ = "0.1.0"
