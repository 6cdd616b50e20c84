"""Names -> converters and targets, imported lazily.

Heavy runtimes (TensorFlow, LiteRT, ONNX, Nengo, ...) are optional extras;
nothing here imports them. :func:`require` turns a missing one into an error
that says which extra to install.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from .errors import LmuEdgeError, MissingDependencyError, ModelFormatError

#: target name -> (module, extra that provides its build-time dependencies, one-line description)
TARGETS = {
    "ir": (
        "lmu_edge.targets.ir",
        None,
        "the folded recurrent model as an lmu-edge IR file, run by the reference simulator",
    ),
    "c": (
        "lmu_edge.targets.c",
        None,
        "constant-memory streaming C (float32 or integer), run on the host or on Cortex-M4/M0 under QEMU",
    ),
    "nengo": (
        "lmu_edge.targets.nengo",
        "nengo",
        "a Nengo network (exact or spiking), run in Nengo or on the Loihi emulator",
    ),
    "tflite": (
        "lmu_edge.targets.tflite",
        "tflite",
        "a TFLite step model (float32, int8, int16x8), run in LiteRT or TFLite Micro",
    ),
    "onnx": (
        "lmu_edge.targets.onnx",
        "onnx",
        "an ONNX step model and a Scan sequence model (float32, int8 QDQ), run in ONNX Runtime",
    ),
    "nir": (
        "lmu_edge.targets.nir",
        "nir",
        "a NIR graph (LI + recurrent Linear memory, linear readout), run in Rockpool",
    ),
}

#: file suffix -> (module with a ``load(path) -> ir.Graph`` function, description)
CONVERTERS = {
    ".npz": ("lmu_edge.irfile", "lmu-edge IR file"),
    ".keras": ("lmu_edge.converters.keras_lmu", "Keras 3 model with keras-lmu layers"),
    ".h5": ("lmu_edge.converters.keras_lmu", "legacy Keras HDF5 model with keras-lmu layers"),
    ".safetensors": (
        "lmu_edge.converters.torch_files",
        "lmu_edge.torch checkpoint (weights; NAME.json config beside it)",
    ),
    ".pt": (
        "lmu_edge.converters.torch_files",
        "lmu_edge.torch state dict via torch.load(weights_only=True); NAME.json beside it",
    ),
    ".pth": (
        "lmu_edge.converters.torch_files",
        "lmu_edge.torch state dict via torch.load(weights_only=True); NAME.json beside it",
    ),
}


def require(module: str, extra: str, purpose: str = ""):
    """Import an optional dependency or raise :class:`MissingDependencyError` naming the extra."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        what = f" for {purpose}" if purpose else ""
        raise MissingDependencyError(
            f"the Python package {module.split('.')[0]!r} is needed{what} but cannot be imported ({e}); "
            f"install it with: pip install 'lmu-edge[{extra}]'"
        ) from None


def target(name: str):
    """The target module called ``name`` (its heavy runtimes are imported later, when used)."""
    if name not in TARGETS:
        raise LmuEdgeError(f"unknown target {name!r}; available targets: {', '.join(sorted(TARGETS))}")
    return importlib.import_module(TARGETS[name][0])


def converter_for(path) -> str:
    """The module that reads ``path``, chosen by its suffix."""
    suffix = Path(path).suffix.lower()
    if suffix not in CONVERTERS:
        known = ", ".join(f"{s} ({d})" for s, (_, d) in sorted(CONVERTERS.items()))
        raise ModelFormatError(
            f"{path}: no converter reads {repr(suffix) + ' files' if suffix else 'a file without a suffix'}; "
            f"supported model files: {known}"
        )
    return CONVERTERS[suffix][0]
