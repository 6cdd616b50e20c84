"""Checks a quantization makes of its calibration inputs and of the model before any work: inputs that give no
range, and LMU memories whose response grows past what integer scales carry. (Re-exported by
:mod:`lmu_edge.quantization`, where callers reach them.)"""

from __future__ import annotations

import warnings

import numpy as np

from . import ir, lti
from .errors import QuantizationError


def check_calibration(x: np.ndarray, what: str = "calibration") -> None:
    """Refuse calibration inputs (``what``, for the message) that are all 0: every scale would be 0, and
    later layers would fail with advice that does not apply (any target, any mode)."""
    if not np.any(x):
        raise QuantizationError(f"{what}: all {x.size} values are 0, no range to quantize to; give typical inputs")
    top = float(np.max(np.abs(x)))
    if top < MIN_CALIBRATION_RANGE:  # scales below float32's normal range: every later check fails, misleadingly
        raise QuantizationError(
            f"{what}: the largest value is {top:.3g}, below {MIN_CALIBRATION_RANGE:g}: no range a fixed-point "
            f"scale can hold; give typical inputs, scaled as the model was trained"
        )


#: the smallest calibration range accepted: an int8 scale of it stays a normal float32
MIN_CALIBRATION_RANGE = 1e-30


#: an integer conversion refuses an LMU whose response to one input grows past this factor within a sequence
#: (an unstable Euler memory): 8 bits of growth that the state, its 8- or 16-bit view and every layer after it
#: would have to carry (issue 52: 2730x gave C int8 6.6 dB and int16 28 dB; 22x converts at 37 dB)
MAX_GROWTH = 256.0
#: check_growth steps a memory_to_memory loop (memory_d * order states) through a sequence where that costs at
#: most this many multiplications ((d q)^2 d per step); beyond, only the memory's own Euler step is checked
MAX_LOOP_CHECK = 4e9


def check_growth(graph: ir.Graph, steps: int, warn: bool = False) -> None:
    """Refuse, in one line, an integer conversion of a graph whose LMU memory is unstable (an Euler step
    past its stable theta, or a ``memory_to_memory`` feedback loop that diverges) and whose response grows
    more than :data:`MAX_GROWTH` times within ``steps`` (the calibration's length): the source model's
    memory diverges there too, and no fixed-point scale holds both its first input and its last value.
    ``warn`` (the float modes): a warning instead, since float32 is then as far from the float64 model as the
    source's own float32 run (issue 52's infinity_ir: C float 58.1 dB, keras float32 57.2 dB)."""
    for layer in graph.layers:
        if not isinstance(layer, ir.LMU):
            continue
        n = layer.memory_d * layer.order
        loop = layer.memory_encoders is not None and n * n * layer.memory_d * steps <= MAX_LOOP_CHECK
        if not loop and (layer.discretizer != "euler" or layer.theta >= lti.euler_stable_theta(layer.order)):
            continue  # ZOH, and Euler past its stable theta, decay
        A, B = lti.legendre_discrete(layer.order, layer.theta, layer.discretizer)
        if loop and layer.memory_encoders is not None:
            A, B = lti.feedback_system(A, B, layer.memory_encoders)
        if not lti.growth(A, B, steps, stop=MAX_GROWTH) > MAX_GROWTH:
            continue
        g = lti.growth(A, B, steps)  # the whole of it, for the message
        rho = lti.spectral_radius(A)
        what = "memory with its memory_to_memory feedback" if loop else "Euler memory"
        fix = (
            "retrain it (discretizer='zoh', a larger theta, or without memory_to_memory)"
            if loop
            else f"retrain it with discretizer='zoh' or a theta above {lti.euler_stable_theta(layer.order):.4g}, "
            f"where Euler is stable"
        )
        head = (
            f"layer {layer.name!r}: its {what} (order {layer.order}, theta {layer.theta:g}, {layer.discretizer}) "
            f"is unstable (spectral radius {rho:.3f}): within {int(steps)} steps its response to one input "
            f"grows {g:.3g}x (the source model's memory diverges too)"
        )
        if warn:
            warnings.warn(f"{head}; float32 loses precision as the source's float32 run does; {fix}", stacklevel=3)
            continue
        # float converts it exactly where its values stay finite; past FLOAT_CARRIES its float conversions are
        # verified only on the steps before the probe passes it (conversion._stable_probe; issue 52, the chunk's
        # seed 1026: 1e29x within 18 steps; seed 1065: 3.5e32x within 16, keras' float32 run finite there)
        floats = (
            "the float modes convert it exactly"
            if g <= FLOAT_CARRIES
            else "the float modes convert it only as far as float carries its values"
        )
        raise QuantizationError(f"{head}, more than integer scales can carry ({floats}); {fix}")


#: a memory growing more than this within the calibration's length has a float conversion verified only on
#: the first steps of its seeded probe: its values pass what the probe carries (reference.STABLE_LIMIT)
FLOAT_CARRIES = 1e18
