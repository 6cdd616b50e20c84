"""The fields of a C artifact's ``model_state_t``, read from its ``model.h`` (shared by tests/test_band_conv.py
and tests/test_calibrated_state.py, which compare the state each core wrote with the integer reference's)."""

import re

import numpy as np

_TYPES = {"int64_t": np.int64, "int32_t": np.int32, "float": np.float32, "int16_t": np.int16, "int8_t": np.int8}


def state_fields(header: str) -> dict:
    """``name -> (offset, dtype, count)`` of the fields of ``model_state_t`` (widest first: no padding)."""
    struct = header.split("typedef struct {", 1)[1].split("} model_state_t;", 1)[0]
    out, off = {}, 0
    for t, name, n in re.findall(r"(\w+) (\w+)\[(\d+)\];", struct):
        out[name] = (off, _TYPES[t], int(n))
        off += np.dtype(_TYPES[t]).itemsize * int(n)
    return out
