"""Templates and the hand-written C runtime for the C target (installed as
``lmu_edge.firmware_templates``). :func:`path` gives the folder that holds them."""

from pathlib import Path


def path() -> Path:
    """The folder holding the firmware template files."""
    return Path(__file__).resolve().parent
