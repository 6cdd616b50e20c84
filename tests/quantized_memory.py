"""The impulse response of a quantized LMU memory (shared by tests/test_state_bounds.py and
tests/test_kernels_arm.py)."""

import numpy as np

from lmu_edge import qir
from lmu_edge._quantization_memory import rk_map_coeffs


def impulse(lmu: qir.QLMU, T: int) -> np.ndarray:
    """``(T, q)`` impulse response (real units per unit of u) of the QUANTIZED realization."""
    mem, q = lmu.memory, lmu.order
    if isinstance(mem, qir.QFIRMemory):
        K = mem.kernel.astype(np.float64) * 2.0**-mem.kernel_frac  # (q, L)
        H = np.zeros((T, q))
        H[: K.shape[1]] = K.T[:T]
        return H
    if isinstance(mem, qir.QDenseMemory):
        A = mem.coeffs * 2.0**-mem.coeff_frac + (np.eye(q) if mem.form == "delta" else 0)
        B = mem.B * 2.0**-mem.b_frac  # real state per real u
    else:
        A, B = rk_map_coeffs(q, mem.hc * 2.0**-mem.hc_frac * mem.substeps, mem.rk_order, mem.substeps)
    H, v = np.zeros((T, q)), np.asarray(B, np.float64)
    for k in range(T):
        H[k] = v
        v = A @ v
    return H
