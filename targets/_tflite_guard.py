"""What keeps LiteRT from aborting on a TFLite model lmu-edge built (issue 52).

LiteRT checks some quantization parameters with an abort, not an error: preparing a model whose
FULLY_CONNECTED has an infinite weight scale kills the whole process, so a ``lmu-edge convert`` would die
with no message. :func:`check_scales` refuses such a model in one line before any interpreter sees it, and
:func:`live_states` keeps the converter from making one out of a state that calibrated on a single value,
:func:`quantize_live` out of an activation that is 0 on every sample.
"""

from __future__ import annotations

import numpy as np

from lmu_edge.registry import require

#: the smallest and largest quantization scale :func:`check_scales` passes: float32's normal range (TFLite
#: multiplies scales in float32: a subnormal or huge one makes an op's multiplier 0 or infinite)
SCALE_RANGE = (2.0**-126, 2.0**126)
#: a state that calibrated on one value is sampled this far either side of it too (:func:`live_states`)
LIVE_STEP = 2.0**-16
#: a tensor whose calibrated range lies within this of 0 is 0 on every sample (:func:`live_ranges`)
DEAD_RANGE = 2.0**-100


def live_states(rep: dict, states) -> dict:
    """``rep`` with two samples more where a state in ``states`` holds one value on every sample.

    Issue 52, seed 1002: an LMU whose encoders are 0 keeps its memory at 0; the converter gave that state a
    scale of 3.6e-43, the FULLY_CONNECTED reading it an infinite weight scale (its bias must fit input scale
    * weight scale) with every weight and bias 0, and LiteRT aborted the process preparing the model. The two
    samples put the constant ``c`` at ``c -/+ LIVE_STEP * max(1, |c|)`` (the other inputs at the first
    sample's): a range around the constant (which stays exactly representable on the int16 grid, and close
    on the int8 one), too small to move the ranges of the tensors it reaches."""
    dead = [n for n in states if rep[n].size and float(np.ptp(rep[n])) == 0.0]
    if not dead:
        return rep
    extra = {n: np.repeat(np.asarray(rep[n][:1]), 2, axis=0) for n in ["x", *states]}
    for n in dead:
        c = float(rep[n].flat[0])
        extra[n] = np.stack([np.full(rep[n].shape[1:], c + d * LIVE_STEP * max(1.0, abs(c))) for d in (-1, 1)])
    return {**rep, **{n: np.concatenate([rep[n], e.astype(rep[n].dtype)]) for n, e in extra.items()}}


def _refuse(tensor, s: float):
    from lmu_edge.errors import QuantizationError

    raw = tensor.Name()
    name = raw.decode() if isinstance(raw, bytes) else str(raw)
    lo, hi = SCALE_RANGE
    where = f" (layer part {name.split('/')[0]!r})" if "/" in name else ""
    return QuantizationError(
        f"tensor {name!r}{where} has the quantization scale {s:.3g}, which TFLite cannot take (finite, "
        f"{lo:.3g} to {hi:.3g}): calibration left it no usable range; calibrate on sequences that exercise it"
    )


def check_scales(model: bytes) -> None:
    """Raise :class:`~lmu_edge.errors.QuantizationError` (one line: which tensor of which layer part) where a
    quantized tensor's scale is not finite or not within :data:`SCALE_RANGE`, or a FULLY_CONNECTED's input
    scale * weight scale (TFLite multiplies them in float32) leaves it: LiteRT aborts the whole process
    preparing such a model (issue 52: an infinite weight scale). Reads the flatbuffer in place (the object
    API copies every buffer: 24 ms a model, run once per candidate of the int8 widening search)."""
    schema = require("tensorflow.lite.python.schema_py_generated", "tflite", "editing TFLite models")
    m = schema.Model.GetRootAs(model, 0)
    lo, hi = SCALE_RANGE
    code = [
        max(c.BuiltinCode(), c.DeprecatedBuiltinCode()) for c in map(m.OperatorCodes, range(m.OperatorCodesLength()))
    ]
    for sg in map(m.Subgraphs, range(m.SubgraphsLength())):
        scales = {}
        for i in range(sg.TensorsLength()):
            t = sg.Tensors(i)
            q = t.Quantization()
            if q is not None and q.ScaleLength():
                scales[i] = s = q.ScaleAsNumpy().astype(np.float64)
                worst = s[~np.isfinite(s) | (s < lo) | (s > hi)]
                if worst.size:
                    raise _refuse(t, float(worst[0]))
        for op in map(sg.Operators, range(sg.OperatorsLength())):
            inputs = [op.Inputs(j) for j in range(min(op.InputsLength(), 2))]
            if code[op.OpcodeIndex()] == 0 and op.OutputsLength() == 1:  # ADD (SUB takes any multiplier)
                _check_add(sg, inputs, op.Outputs(0), scales, _pot_scale_int16(schema, op))
            if code[op.OpcodeIndex()] != 9 or len(inputs) < 2 or not {inputs[0], inputs[1]} <= scales.keys():
                continue  # 9: FULLY_CONNECTED
            with np.errstate(over="ignore", under="ignore"):
                p = np.float32(scales[inputs[0]].max()) * scales[inputs[1]].astype(np.float32)
            worst = p[~np.isfinite(p) | (p < lo) | (p > hi)]
            if worst.size:
                raise _refuse(sg.Tensors(inputs[1]), float(worst[0]))


def scales_ok(model: bytes) -> bool:
    """Whether :func:`check_scales` passes ``model``."""
    from lmu_edge.errors import QuantizationError

    try:
        check_scales(model)
    except QuantizationError:
        return False
    return True


def _pot_scale_int16(schema, op) -> bool:
    """An ADD's ``pot_scale_int16`` option (the schema's default, true, where the op has no options)."""
    table = op.BuiltinOptions()
    if table is None or op.BuiltinOptionsType() != schema.BuiltinOptions.AddOptions:
        return True
    opts = schema.AddOptions()
    opts.Init(table.Bytes, table.Pos)
    return bool(opts.PotScaleInt16())


def _check_add(sg, inputs, out: int, scales: dict, pot_scale_int16: bool = True) -> None:
    """Refuse an int8 / int16 ADD that LiteRT would abort on: its general quantized path (every int8 ADD; an
    int16 one unless its option ``pot_scale_int16`` is set and all three scales are within 1e-3 of a power
    of two in log2, which shifts instead and refuses what it cannot do with an error) requantizes the sum
    with the multiplier 2 max(s1, s2) / (2^k s_out), k = 20 (int8) or 15 (int16), and checks that it is
    below 1 with an abort. SUB takes any multiplier (tests/test_tflite_guard.py asks LiteRT). Issue 52, seed
    23: the int8 widening search gave a memory's ADD an input term of scale 9e-5 and the state's output scale
    2.4e-9 (multiplier 2.3), and the process died in ``allocate_tensors``. Seed 1011: TFLite's int16x8
    quantizer writes ``pot_scale_int16 = false``, so scales of 2^-30, 2^-14 and 2^-30 took the general path
    (multiplier 4) and aborted where this check had taken them for the shifting one."""
    if len(inputs) < 2 or out < 0 or not {*inputs, out} <= scales.keys():
        return
    k = {9: 20, 7: 15}.get(sg.Tensors(out).Type())  # schema TensorType 9: int8, 7: int16
    s1, s2, so = (float(np.float32(scales[t][0])) for t in (*inputs, out))
    shifts = k == 15 and pot_scale_int16
    if k is None or (shifts and all(abs(np.log2(v) - np.round(np.log2(v))) < 1e-3 for v in (s1, s2, so))):
        return
    m = 2.0 * max(s1, s2) / (2.0**k * so)
    if not m < 1.0:
        from lmu_edge.errors import QuantizationError

        raw = sg.Tensors(out).Name()
        name = raw.decode() if isinstance(raw, bytes) else str(raw)
        raise QuantizationError(
            f"tensor {name!r} sums inputs of scales {s1:.3g} and {s2:.3g} at the scale {so:.3g}, finer than "
            f"TFLite's {'int8' if k == 20 else 'int16'} ADD can requantize to (multiplier {m:.3g}, must be below "
            "1): calibrate on sequences that exercise its output"
        )


#: an ADD's output range is widened to this times the least its requantization multiplier allows
#: (:func:`live_ranges`): room for the quantizer's own rounding of the ranges to scales
ADD_ROOM = 1.25


def _width(r, bits: int) -> float:
    """What a calibrated range ``r`` becomes a scale by: the magnitude (int16, symmetric) or the span with 0
    in it (int8, asymmetric), each over the type's steps."""
    lo, hi = r
    return max(abs(lo), abs(hi)) if bits == 16 else max(hi, 0.0) - min(lo, 0.0)


def _add_room(m, sg, op, bits: int) -> bool:
    """Widen the output range of ADD ``op`` so that the sum requantizes (:func:`_check_add`): its general path
    needs the multiplier 2 max(s1, s2) / (2^k s_out) below 1, so the output's width at least 2 max(width of
    the inputs) / 2^k (k = 15 for int16, 20 for int8), :data:`ADD_ROOM` times that here. Issue 52, seeds 1036
    and 1045: a memory term that was 0 on every sample got its op's input range (above) and the sum, as
    small as its other term, a scale 3.3 times finer than that (int16x8 refused in one line). The sum keeps
    every value it had; it is stored 1-2 bits coarser than its own range would allow."""
    code = m.operatorCodes[op.opcodeIndex]
    if max(code.builtinCode, code.deprecatedBuiltinCode) != 0 or len(op.inputs) < 2 or len(op.outputs) != 1:
        return False  # 0: ADD
    r1, r2, ro = (_range(m, sg, t) for t in (op.inputs[0], op.inputs[1], op.outputs[0]))
    if r1 is None or r2 is None or ro is None:
        return False
    need = ADD_ROOM * 2.0 * max(_width(r1, bits), _width(r2, bits)) / 2.0 ** (15 if bits == 16 else 20)
    have = _width(ro, bits)
    if not have < need or not np.isfinite(need):
        return False
    q = sg.tensors[op.outputs[0]].quantization
    if bits == 16:
        q.min, q.max = [-need], [need]
    else:
        grow = 0.5 * (need - have)
        q.min, q.max = [min(ro[0], 0.0) - grow], [max(ro[1], 0.0) + grow]
    return True


def live_ranges(calibrated: bytes, bits: int = 16) -> bytes:
    """``calibrated`` (the converter's float model with each tensor's calibrated min / max) with every
    activation that calibrated on 0 alone (the calibrator records [0, 1.2e-38]: within :data:`DEAD_RANGE` of
    0) given the range ``-/+ r`` instead, ``r`` the largest magnitude of its op's activation inputs' ranges
    (as widened so far, in op order), and every ADD's output range widened where the sum could not
    requantize to it (:func:`_add_room`; ``bits``: the activations' width).

    Issue 52, seeds 26 and 30: a Dense(relu) that is 0 on every calibration sample (a unit that died in
    training) calibrated on [0, 0], int16 scale 3.6e-43; the int16x8 quantizer then grew the next
    FULLY_CONNECTED's weight scale until its bias fit ``input scale * weight scale`` (to infinity) and stored
    every weight and bias as 0, so the float values were gone before :func:`live_scales` could help. Given
    this range, the dead tensor quantizes as the op's inputs do (the scale :func:`live_scales` would give
    it) and its 0 stays exact on the zero point."""
    fb = require("tensorflow.lite.tools.flatbuffer_utils", "tflite", "editing TFLite models")
    m = fb.convert_bytearray_to_object(bytearray(calibrated))
    changed = False
    for sg in m.subgraphs:
        for op in sg.operators:
            ins = [r for r in (_range(m, sg, t) for t in op.inputs) if r is not None]
            r = max((max(abs(lo), abs(hi)) for lo, hi in ins), default=0.0)
            for t in op.outputs:
                out = _range(m, sg, t)
                if out is None or max(map(abs, out)) > DEAD_RANGE or not r > DEAD_RANGE or not np.isfinite(r):
                    continue
                q = sg.tensors[t].quantization
                q.min, q.max = [-r], [r]
                changed = True
            changed = _add_room(m, sg, op, bits) or changed
    return bytes(fb.convert_object_to_bytearray(m)) if changed else calibrated


def _range(m, sg, t: int):
    """Tensor ``t``'s calibrated ``(min, max)``; None for a constant, an absent tensor or one without."""
    q = sg.tensors[t].quantization if t >= 0 else None
    if q is None or q.min is None or q.max is None or len(q.min) != 1 or len(q.max) != 1:
        return None
    b = m.buffers[sg.tensors[t].buffer].data
    return None if b is not None and len(b) else (float(q.min[0]), float(q.max[0]))


def quantize_live(conv, result, input_type, output_type, activations_type, bias_type, allow_float, variables, debug):
    """What ``conv._quantize`` does (TF 2.21's ``TFLiteConverter``; the same arguments), with the calibrated
    ranges passed through :func:`live_ranges` before the quantizer reads them. The quantizer itself is not
    fed again: it takes each tensor's min / max from the calibrated model (with no range widened, the bytes
    are the converter's own: checked on generated seed 30, int8 and int16x8). ``_tflite_build.convert``
    converts this way only a model that :func:`check_scales` refuses otherwise, so no model that converted
    before converts differently."""
    tf = require("tensorflow", "tflite", "building TFLite models")
    from tensorflow.lite.python import lite
    from tensorflow.lite.python.optimize import calibrator

    data = conv.representative_dataset
    data = data if isinstance(data, lite.RepresentativeDataset) else lite.RepresentativeDataset(data)
    result = calibrator.add_intermediate_tensors(result)
    bits = 16 if activations_type == tf.int16 else 8
    calibrated = live_ranges(calibrator.Calibrator(result).calibrate(data.input_gen), bits)
    if conv.experimental_new_quantizer and activations_type != tf.int16:
        return lite._mlir_quantize(
            calibrated,
            conv._experimental_disable_per_channel,
            input_data_type=input_type,
            output_data_type=output_type,
            enable_variable_quantization=variables,
            disable_per_channel_for_dense_layers=conv._experimental_disable_per_channel_quantization_for_dense_layers,
            debug_options_str=debug.SerializeToString(),
        )
    return calibrator.Calibrator(calibrated)._calibrator.QuantizeModel(
        np.dtype(input_type.as_numpy_dtype()).num,
        np.dtype(output_type.as_numpy_dtype()).num,
        allow_float,
        np.dtype(activations_type.as_numpy_dtype()).num,
        np.dtype(bias_type.as_numpy_dtype()).num,
        conv._experimental_disable_per_channel,
        conv._experimental_disable_per_channel_quantization_for_dense_layers,
    )
