"""Error measures, stated once. Errors are relative to the output scale everywhere."""

from __future__ import annotations

import numpy as np


def relative_error(y, y_ref) -> float:
    """``max|y - y_ref| / max|y_ref|`` (the absolute error when ``y_ref`` is all zeros)."""
    y = np.asarray(y, dtype=np.float64)
    y_ref = np.asarray(y_ref, dtype=np.float64)
    if y.shape != y_ref.shape:
        raise ValueError(f"cannot compare outputs of shapes {y.shape} and {y_ref.shape}")
    err = float(np.max(np.abs(y - y_ref))) if y.size else 0.0
    scale = float(np.max(np.abs(y_ref))) if y.size else 0.0
    return err / scale if scale > 0 else err


def sqnr_db(y, y_ref) -> float:
    """Signal-to-quantization-noise ratio ``10 log10(sum y_ref^2 / sum (y - y_ref)^2)`` in dB."""
    y = np.asarray(y, dtype=np.float64)
    y_ref = np.asarray(y_ref, dtype=np.float64)
    noise = float(np.sum((y - y_ref) ** 2))
    signal = float(np.sum(y_ref**2))
    if noise == 0:
        return float("inf")
    return 10.0 * np.log10(signal / noise) if signal > 0 else float("-inf")
