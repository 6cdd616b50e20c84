"""What an integer graph's step costs on a core, estimated: the C target's answer to the widening search's
question "which of two choices that reach the target is faster" (:func:`lmu_edge.widening.search`'s ``cost``).

The search builds dozens of candidates; compiling each and counting its instructions under QEMU would take
seconds apiece, so this walks the integer graph and prices every kernel call by the rates below: instructions
per multiply-accumulate of the kernel the C code generator picks for that layer's widths (activation bits,
weight bits, expanded weights), per output row (requantization, tables) and per converted value, and per
multiply-accumulate of the LMU memory for its state (a 16-bit state proven to fit 32-bit row sums, one sized by
its calibration, a 32-bit one). The rates are those ``bench/kernels.py`` measured (QEMU ``-icount``, gcc 12
-O2) on the bench models; ``bench/kernels.py`` prints this estimate beside every count it takes, so a kernel
that gets faster shows where the table is stale. The estimate ranks widenings (a 16-bit weight matrix on the
Cortex-M0 costs twelve times its int8 one; a 16-bit activation's rows on Helium 1.2 times, on the DSP cores, with
expanded weights, about the same), it is no substitute for the measured count in the report. Validated on dense
memories (ZOH, Euler): the Runge-Kutta, Pade and FIR memories are priced at the dense kernels' rates per the code
generator's own MAC counts, and a softmax hidden cell, the input_to_hidden view and a band convolution's max-pool
per value; the DSP cores' rates assume the expanded weights, which ``--device`` may drop where flash is tight.
"""

from __future__ import annotations

import numpy as np

from lmu_edge import lti, qir
from lmu_edge.pade import QPadeMemory

from .c_code import expands
from .c_proofs import dense_wrap32

#: runtime (``--device``'s core) -> kernel family
FAMILY = {
    "cortex-m0": "v6m",
    "microbit": "v6m",
    "cortex-m4": "dsp",
    "cortex-m7": "dsp",
    "cortex-m33": "dsp",
    "cortex-m55": "mve",
}

#: instructions per multiply-accumulate of a dense layer's rows: family -> (activation bits, expanded weights) ->
#: rate (DSP: expanded 4 x 4 blocks or SXTB16 + SMLAD; ARMv6-M: the two-row Thumb-1 loop; Helium: VMLADAVA)
MAC = {
    "dsp": {(8, True): 0.876, (8, False): 1.45, (16, True): 0.75, (16, False): 1.65},
    "v6m": {(8, False): 4.5, (16, False): 6.67},
    "mve": {(8, False): 0.26, (16, False): 0.31},
}
#: the same with 16-bit weights (the int16 mode, a widened weight matrix: 64-bit sums on ARMv6-M)
MAC16 = {"dsp": 2.5, "v6m": 55.5, "mve": 0.5}
#: instructions per output row beside its products (bias, requantization, clamp or table, store): family ->
#: (8-bit activations, 16-bit activations, 16-bit weights); and per kernel call
ROW = {"dsp": (30.0, 44.0, 47.0), "v6m": (70.0, 40.0, 40.0), "mve": (4.0, 23.0, 52.0)}
CALL = 20.0
#: the LMU memory: family -> (per multiply-accumulate, per row) for a 16-bit state whose row sums provably fit
#: 32 bits, one sized by its calibration (64-bit sums, or proven chunks), a 32-bit state
MEMORY = {
    "dsp": ((0.91, 3.0), (0.91, 3.0), (5.0, 28.0)),
    "v6m": ((3.83, 32.0), (7.0, 130.0), (53.0, 25.0)),
    "mve": ((0.316, 1.0), (0.3, 20.0), (4.0, 35.0)),
}
#: instructions per state value of its view for the hidden layer (z): family -> (16-bit z, 8-bit z, from a 32-bit
#: state)
VIEW = {"dsp": (4.3, 6.8, 20.0), "v6m": (14.0, 26.0, 49.0), "mve": (1.4, 2.3, 19.7)}
#: instructions per value of a width conversion, a table, a softmax or a pool
VALUE = {"dsp": 4.5, "v6m": 14.0, "mve": 2.0}


def _family(core: str) -> str:
    return FAMILY.get(core, "dsp")


def _linear(f: str, q: qir.QLinear, expand: bool) -> float:
    total, w16 = CALL, False
    for p in q.parts:
        n = int(p.kernel.size)
        if q.in_bits == 16 and n and int(np.abs(p.kernel).max()) > 127:
            total, w16 = total + n * MAC16[f], True
            continue
        wx = f == "dsp" and expand and expands(q, p)
        total += n * MAC[f].get((int(q.in_bits), wx), MAC[f][(int(q.in_bits), False)])
    return total + int(q.units) * ROW[f][2 if w16 else int(q.in_bits) // 16]


def _memory(f: str, layer: qir.QLMU) -> float:
    mem, d, q = layer.memory, int(layer.memory_d), int(layer.order)
    if isinstance(mem, qir.QDenseMemory):  # the code generator's counts (c_codegen, c_layers)
        macs = d * (q * q + q)
    elif isinstance(mem, qir.QFIRMemory):
        macs = d * q * int(np.asarray(mem.kernel).shape[-1])
    elif isinstance(mem, qir.QRKMemory):
        macs = d * lti.rk_cost(q, mem.rk_order, mem.substeps)[0] // 2
    elif isinstance(mem, QPadeMemory):
        macs = d * int(mem.substeps) * int(mem.gc.shape[0]) * 12 * q
    else:  # pragma: no cover - quantize() makes only these
        macs = d * (q * q + q)
    bits = int(layer.state_type.width)
    rate, row = MEMORY[f][memory_kind(f, layer)]
    view = VIEW[f][2 if bits > 16 else 0 if layer.act_bits == 16 else 1]
    return macs * rate + d * q * (row + view)


def memory_kind(f: str, layer: qir.QLMU) -> int:
    """Which of :data:`MEMORY`'s kernels kernel family ``f`` runs for the layer's memory: 0 (32-bit row sums, as
    c_codegen emits where it proves them, on Helium for q a multiple of 8), 1 (64-bit sums or proven chunks), 2
    (a 32-bit state)."""
    bits = int(layer.state_type.width)
    if bits > 16:
        return 2
    if _wrap32(layer, bits) and (f != "mve" or int(layer.order) % 8 == 0):
        return 0
    return 1


def _wrap32(layer: qir.QLMU, bits: int) -> bool:
    mem = layer.memory
    if not isinstance(mem, qir.QDenseMemory) or bits != 16 or mem.coeff_bits > 16:
        return bool(layer.bound_proven)
    bound = layer.state_bound * 2.0**layer.state_type.frac
    return dense_wrap32(bound, layer.bound_proven, mem.form == "delta", mem.coeff_frac, bits)


def step_instructions(qg, core: str = "cortex-m4", expand: bool = True) -> float:
    """Estimated instructions of one step of the integer graph ``qg`` on ``core`` (a runtime name of
    :mod:`lmu_edge.toolchain`; DSP rates for one it does not know), with the DSP cores' expanded weights
    (``LMU_WX``) where ``expand``."""
    f = _family(core)
    total = 0.0
    for layer, _, n_out, _ in qg.shapes():
        if isinstance(layer, qir.QDense):
            total += _linear(f, layer.linear, expand)
        elif isinstance(layer, qir.QBandConv):
            total += _linear(f, layer.linear, expand) * int(layer.conv_bands)  # the patch's rows per band
        elif isinstance(layer, qir.QLMU):
            total += _linear(f, layer.encoder, expand) + _memory(f, layer)
            if layer.hidden is not None:
                total += _linear(f, layer.hidden, expand)
        else:  # conversions, tables, softmax, pooling: per value
            total += VALUE[f] * int(n_out)
    return total


class Estimate:
    """``cost`` for :func:`lmu_edge.quantization.quantize`: :func:`step_instructions` on one core, named by
    :attr:`core` (what the metadata's ``step_instructions`` says it is for)."""

    def __init__(self, core: str = "cortex-m4", expand: bool = True):
        self.core, self.expand = core, expand
        self._seen: dict = {}

    def __call__(self, qg) -> int:
        key = id(qg.layers)
        got = self._seen.get(key)
        if got is None or got[0] is not qg.layers:
            got = self._seen[key] = (qg.layers, int(round(step_instructions(qg, self.core, self.expand))))
        return got[1]
