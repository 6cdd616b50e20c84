"""The precision policy: the quantization modes, the widths each gives activations, weights and the LMU
state, and the widening thresholds. Decided here once and carried as data (the quantized graph's metadata
records the widths used); targets declare what they do differently through the target contract
(``state_bits(quantize, options)``, :mod:`lmu_edge.targets`), so no core module reads a target."""

from __future__ import annotations

from typing import Any, Optional

#: every quantization mode; "float32" is accepted as another name for "float"
MODES = ("float", "int8", "int16x8", "int16")
FLOAT_MODES = ("float", "float32")
#: activation width of each integer mode
ACTIVATION_BITS = {"int8": 8, "int16x8": 16, "int16": 16}
#: the weight width of each integer mode when the weight_bits option is not given
WEIGHT_BITS = {"int8": 8, "int16x8": 8, "int16": 16}
#: the LMU state width when neither the user (``state_bits``) nor the mode says otherwise
DEFAULT_STATE_BITS = 16
#: the LMU state width of each integer mode when the state_bits option is not given: int16, the accuracy
#: mode, keeps 32 bits (on the layer-option matrix a 16-bit state cost 2-11 dB against 32 bits there)
STATE_BITS = {"int8": DEFAULT_STATE_BITS, "int16x8": DEFAULT_STATE_BITS, "int16": 32}
#: int16x8 without an explicit ``weight_bits``: the calibration SQNR (dB, against the float model) below
#: which the fewest weight matrices that reach it get 16-bit weights (``quantize(widen_db=)``): 45 dB,
#: the accuracy the project holds 16-bit activations to (docs/matrix.md), plus 3 dB for test inputs
#: beyond the calibration data (the layer-option matrix: test within 2.0 dB of calibration).
#: int8: the calibration SQNR below which the fewest layers (and the input) get 16-bit activations, and
#: within them the fewest weight matrices 16-bit weights, that reach it: the 30 dB floor of 8-bit
#: activations plus the same 3 dB (int8 test SQNR on the matrix: within 2.2 dB of calibration).
#: ``widen_db`` (option): "auto" for these, a number of dB, or None to keep every activation at the
#: mode's width.
WIDEN_DB = {"int16x8": 48.0, "int8": 33.0}


def is_float(quantize: Optional[str]) -> bool:
    """Whether ``quantize`` names a float mode (None included)."""
    return quantize is None or quantize in FLOAT_MODES


def state_bits(quantize: Optional[str], options: Optional[dict] = None, target: Any = None) -> Optional[int]:
    """The width of the LMU state for ``quantize`` (``None`` in float): the ``state_bits`` option where
    given, else what ``target`` (a target module) declares through its optional ``state_bits(quantize,
    options)`` (TFLite's int8 state path keeps 8 bits), else :data:`STATE_BITS`."""
    options = options or {}
    if is_float(quantize):
        return None
    if options.get("state_bits"):
        return int(options["state_bits"])
    declared = getattr(target, "state_bits", None)
    if callable(declared):
        bits = declared(quantize, options)
        if bits:
            return int(bits)
    return STATE_BITS.get(str(quantize), DEFAULT_STATE_BITS)
