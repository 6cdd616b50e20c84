"""Specifications of the TFLite target's quantized post-processing: the int8 model spliced with the int16x8
model's state path (targets/_tflite_mixed.py) and the edits of a conversion in targets/_tflite_build.py
(``tie_state_scales``, ``widen_int16_ranges``, ``_rescale_fc_bias``, ``convert_int8_pair``). The covering
command of their generated mutants (docs/testing.md, "Generated mutants"): one pair of conversions of a small
two-LMU model, shared by every test, then exact checks of the flatbuffers and of LiteRT runs.

The model: input -> Dense(relu) -> LMU b (d = 2, no hidden cell, the input passed to its output: the int16x8
converter requantizes one CONCATENATION input that the int8 one does not) -> LMU a (a relu hidden cell
reading its state, not on any state's path) -> Dense(tanh). Two states, one of them reshaped."""

import numpy as np
import pytest
from graphs import lmu

import lmu_edge
from lmu_edge import ir
from lmu_edge.registry import require
from lmu_edge.targets import _stepplan

tf = pytest.importorskip("tensorflow")  # the tflite extra; CI has it (a skip there fails the run)
fb = require("tensorflow.lite.tools.flatbuffer_utils", "tflite", "editing TFLite models")
schema = require("tensorflow.lite.python.schema_py_generated", "tflite", "editing TFLite models")

from lmu_edge.targets import _tflite_build, _tflite_mixed  # noqa: E402  (after the importorskip above)

OPS = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
INT8, INT16 = 9, 7  # schema TensorType
STATES = ["L1_m", "L2_m"]


def _graph():
    rng = np.random.default_rng(3)
    pre = ir.Dense("pre", rng.standard_normal((2, 3)), rng.standard_normal(3) * 0.1, "relu")
    b = lmu(rng, name="b", n_in=3, q=3, theta=6.0, d=2, hidden=None, input_to_hidden=True)
    a = lmu(rng, name="a", n_in=b.out_features(3), q=4, theta=8.0, d=1, units=3)
    a = ir.LMU(**{**a.__dict__, "hidden": ir.HiddenDense(a.hidden.kernel, a.hidden.bias, "relu")})
    post = ir.Dense("post", rng.standard_normal((a.out_features(b.out_features(3)), 2)) * 0.5, np.full(2, 0.1), "tanh")
    g = ir.Graph("two", input_features=2, seq_len=None, layers=(pre, b, a, post))
    return lmu_edge.fold(g, "zoh"), rng.standard_normal((4, 30, 2))


@pytest.fixture(scope="module")
def pair():
    g, cal = _graph()
    rec = _stepplan.record(g, cal, max_samples=200)
    plan = _stepplan.StatePlan(g, rec, balance=True)
    assert [n for n, *_ in plan.spec] == STATES
    rep = {"x": rec["x"], **plan.model_states(rec)}
    return _tflite_build.convert_int8_pair(g, plan, "split", rep)


class M:
    """A flatbuffer as objects, with its operators by name and its tensors by name."""

    def __init__(self, model: bytes):
        self.m = fb.convert_bytearray_to_object(bytearray(model))
        self.sg = self.m.subgraphs[0]
        self.code = [max(c.builtinCode, c.deprecatedBuiltinCode) for c in self.m.operatorCodes]
        sig = self.m.signatureDefs[0]
        self.ins = {t.name.decode(): t.tensorIndex for t in sig.inputs}
        self.outs = {t.name.decode(): t.tensorIndex for t in sig.outputs}

    def name(self, t) -> str:
        return self.sg.tensors[t].name.decode()

    def op(self, o) -> str:
        return OPS[self.code[o.opcodeIndex]]

    def tensor(self, name):
        return next(t for t in self.sg.tensors if t.name.decode() == name)

    def quant(self, t):
        q = self.sg.tensors[t].quantization
        return float(q.scale[0]), int(q.zeroPoint[0])

    def const(self, t) -> bytes | None:
        d = self.m.buffers[self.sg.tensors[t].buffer].data
        return None if d is None or len(d) == 0 else bytes(bytearray(d))

    def by_output(self) -> dict:
        return {self.name(o.outputs[0]): o for o in self.sg.operators}

    def state_path(self, readers=True) -> set:
        """Output names of the operators a next state depends on and (``readers``) the FULLY_CONNECTED ops
        reading a state tensor."""
        made = {t: o for o in self.sg.operators for t in o.outputs}
        todo, out = [self.outs[f"{n}_out"] for n in STATES], set()
        while todo:
            o = made.get(todo.pop())
            if o is not None and self.name(o.outputs[0]) not in out:
                out.add(self.name(o.outputs[0]))
                todo += [t for t in o.inputs if t >= 0]
        st = {self.ins[n] for n in STATES} | {self.outs[f"{n}_out"] for n in STATES}
        if readers:
            out |= {
                self.name(o.outputs[0])
                for o in self.sg.operators
                if self.op(o) == "FULLY_CONNECTED" and set(o.inputs) & st
            }
        return out


def _run(model: bytes, feed: dict) -> dict:
    """Every tensor of one LiteRT step, by name (the inputs by signature name, as integers)."""
    interp = require("ai_edge_litert.interpreter", "tflite", "running TFLite models in LiteRT").Interpreter
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        it = interp(model_content=model, experimental_preserve_all_tensors=True)
    it.allocate_tensors()
    for d in it.get_input_details():
        it.set_tensor(d["index"], feed[d["name"].removeprefix("serving_default_").removesuffix(":0")])
    it.invoke()
    return {d["name"]: it.get_tensor(d["index"]) for d in it.get_tensor_details() if d["dtype"] != np.dtype("O")}


def _feeds(m: M, n, seed):
    """``n`` random integer inputs over each input's whole range."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        f = {}
        for name, t in m.ins.items():
            ten = m.sg.tensors[t]
            dt = np.int8 if ten.type == INT8 else np.int16
            f[name] = rng.integers(np.iinfo(dt).min, np.iinfo(dt).max, size=list(ten.shape), endpoint=True).astype(dt)
        out.append(f)
    return out


# ---------------------------------------------------------------- targets/_tflite_mixed.py


def test_the_spliced_model_takes_exactly_the_state_path_from_the_int16x8_conversion(pair):
    """Spec (``widen_state_path``): every operator a next state depends on, and every FULLY_CONNECTED reading
    a state, writes int16 with the int16x8 model's quantization and reads the int16x8 model's constants; every
    other operator keeps the int8 model's types, quantization and constants. x and y stay int8 (the int8
    model's), the states are int16 (the int16x8 model's); a QUANTIZE joins the two: ``*_int16`` copies with
    the int16x8 model's quantization of the tensor they copy, ``*_int8`` copies with the int8 model's. Opcode
    versions are at least the int16x8 model's; no tensor or buffer is left that nothing uses; every operator
    comes after the operators that make its inputs."""
    m8, m16 = pair
    a, b = M(m8), M(m16)
    w = M(_tflite_mixed.widen_state_path(m8, m16, STATES))
    R = a.state_path()
    assert {"PartitionedCall:0", "b.out/concat", "a.hidden/MatMul;a.hidden/add"} <= R  # the premise
    assert "post/MatMul;post/add" not in R
    ops_a, ops_b, seen = a.by_output(), b.by_output(), set()
    for o in w.sg.operators:
        out = w.name(o.outputs[0])
        if w.op(o) == "QUANTIZE" and (out.endswith("_int16") or out.endswith("_int8")):
            wide = out.endswith("_int16")
            src, base = (b, out.removesuffix("_int16")) if wide else (a, out.removesuffix("_int8"))
            assert w.sg.tensors[o.outputs[0]].type == (INT16 if wide else INT8)
            assert w.quant(o.outputs[0]) == src.quant(_idx(src, base)), out
            continue
        if out in ops_b and (out in R or out not in ops_a):
            src, oo, ty = b, ops_b[out], INT16
        else:
            src, oo, ty = a, ops_a[out], INT8
        seen.add(out)
        assert w.op(o) == src.op(oo), out
        assert w.sg.tensors[o.outputs[0]].type == ty, out
        assert w.quant(o.outputs[0]) == src.quant(oo.outputs[0]), out
        for tw, ts in zip(o.inputs, oo.inputs, strict=True):
            assert (tw < 0) == (ts < 0)
            if ts >= 0 and src.const(ts) is not None:
                assert w.const(tw) == src.const(ts), out
                qw, qs = w.sg.tensors[tw].quantization, src.sg.tensors[ts].quantization
                assert (qw is None) == (qs is None) and (qs is None or np.array_equal(qw.scale, qs.scale)), out
    assert seen == set(ops_a) | {"pre/Relu;pre/add_1_requantized"}
    # the model's inputs and outputs
    for n in STATES:
        assert w.sg.tensors[w.ins[n]].type == INT16 and w.quant(w.ins[n]) == b.quant(b.ins[n])
        t = w.outs[f"{n}_out"]
        assert w.sg.tensors[t].type == INT16 and w.quant(t) == b.quant(b.outs[f"{n}_out"])
    assert w.sg.tensors[w.ins["x"]].type == INT8 and w.quant(w.ins["x"]) == a.quant(a.ins["x"])
    assert w.sg.tensors[w.outs["y"]].type == INT8 and w.quant(w.outs["y"]) == a.quant(a.outs["y"])
    assert sorted(w.name(t) for t in w.sg.inputs) == sorted(a.name(t) for t in a.sg.inputs)
    # opcode versions, nothing unused, topological order
    vb = {}
    for c in b.m.operatorCodes:
        k = max(c.builtinCode, c.deprecatedBuiltinCode)
        vb[k] = max(vb.get(k, 1), c.version)
    for c in w.m.operatorCodes:
        assert c.version >= vb.get(max(c.builtinCode, c.deprecatedBuiltinCode), 1)
    assert w.m.operatorCodes[w.code.index(schema.BuiltinOperator.QUANTIZE)].version == 2  # an int16 output
    used = {t for o in w.sg.operators for t in [*o.inputs, *o.outputs] if t >= 0} | set(w.sg.inputs) | set(w.sg.outputs)
    assert used == set(range(len(w.sg.tensors)))
    meta = {md.buffer for md in w.m.metadata or []}
    assert {t.buffer for t in w.sg.tensors} | meta | {0} == set(range(len(w.m.buffers)))
    made = set(w.sg.inputs)
    for o in w.sg.operators:
        assert all(t < 0 or t in made or w.const(t) is not None for t in o.inputs)
        made |= set(o.outputs)


def _idx(m: M, name):
    return next(i for i, t in enumerate(m.sg.tensors) if t.name.decode() == name)


def test_the_spliced_state_path_runs_bit_for_bit_as_the_int16x8_model(pair):
    """Spec: fed the same int16 states and, for x, the int16 copy its QUANTIZE makes, the spliced model's state
    outputs (and every int16 tensor of its state path) equal the int16x8 model's, bit for bit, in LiteRT; the
    int8 copies the int8 operators read are the int16 tensors requantized to the int8 model's quantization
    (within the one step of a requantization's rounding); y is the int8 model's tail on them."""
    m8, m16 = pair
    a, b = M(m8), M(m16)
    spliced = _tflite_mixed.widen_state_path(m8, m16, STATES)
    w = M(spliced)
    R = a.state_path()
    for f in _feeds(w, 3, seed=5):
        tw = _run(spliced, f)
        tb = _run(m16, {**f, "x": tw["serving_default_x:0_int16"]})
        for n in STATES:
            np.testing.assert_array_equal(tw[w.name(w.outs[f"{n}_out"])], tb[b.name(b.outs[f"{n}_out"])])
        for name in R:
            np.testing.assert_array_equal(tw[name], tb[name], err_msg=name)
        for name, v in tw.items():
            if name.endswith("_int8") and name.removesuffix("_int8") in tb:
                s16, z16 = b.quant(_idx(b, name[:-5]))
                s8, z8 = a.quant(_idx(a, name[:-5]))
                want = np.clip(np.round((tb[name[:-5]].astype(np.float64) - z16) * s16 / s8) + z8, -128, 127)
                assert np.abs(v.astype(np.int64) - want).max() <= 1, name
        y = tw[w.name(w.outs["y"])]
        assert y.dtype == np.int8


def test_every_candidate_widened_gives_the_int16x8_model_with_int8_io(pair):
    """Spec (``candidate_ops``, ``extra``, ``output_range``): the candidates are exactly the operators off
    the state path, each named "OPNAME -> output", y by its name, and each, taken alone as ``extra``, takes
    into R the operator it names (its index counts the QUANTIZE the splice inserts to match the int16x8
    model's operators: it did not, and named the operator after the one it widened); with all of them taken into R the
    spliced model is the int16x8 model with an int8 x and y: its y's int16 copy equals the int16x8 model's y
    bit for bit, and the int8 y takes the calibrated ``output_range`` (8 bits over [lo, hi], 0 included)
    instead of the int8 model's."""
    m8, m16 = pair
    a, b = M(m8), M(m16)
    cands = _tflite_mixed.candidate_ops(m8, m16, STATES)
    R = a.state_path()
    off = [o for o in a.sg.operators if a.name(o.outputs[0]) not in R]
    want = [f"{a.op(o)} -> {'y' if o.outputs[0] == a.outs['y'] else a.name(o.outputs[0])}" for o in off]
    assert sorted(cands.values()) == sorted(want) and len(cands) == 3
    for k, v in cands.items():  # each one alone takes into R the operator it names, and only that one
        w = M(_tflite_mixed.widen_state_path(m8, m16, STATES, extra=(k,)))
        made16 = {
            w.name(o.outputs[0]).removesuffix("_int16")
            for o in w.sg.operators
            if w.op(o) != "QUANTIZE" and w.sg.tensors[o.outputs[0]].type == INT16
        }
        name = v.split(" -> ")[1]
        assert made16 - R == {a.name(a.outs["y"]) if name == "y" else name}, v
    lo, hi = -0.2, 0.55
    spliced = _tflite_mixed.widen_state_path(m8, m16, STATES, extra=sorted(cands), output_range=(lo, hi))
    w = M(spliced)
    assert all(
        w.sg.tensors[o.outputs[0]].type == INT16 for o in w.sg.operators if w.op(o) != "QUANTIZE"
    )  # every operator int16
    s = (hi - lo) / 255
    assert w.quant(w.outs["y"]) == (pytest.approx(s, rel=1e-6), round(-128 - lo / s))
    assert w.sg.tensors[w.outs["y"]].type == INT8
    for f in _feeds(w, 2, seed=6):
        tw = _run(spliced, f)
        tb = _run(m16, {**f, "x": tw["serving_default_x:0_int16"]})
        np.testing.assert_array_equal(tw[w.name(w.outs["y"]) + "_int16"], tb[b.name(b.outs["y"])])
        for n in STATES:
            np.testing.assert_array_equal(tw[w.name(w.outs[f"{n}_out"])], tb[b.name(b.outs[f"{n}_out"])])
    # without output_range, y keeps the int8 model's quantization
    plain = M(_tflite_mixed.widen_state_path(m8, m16, STATES, extra=sorted(cands)))
    assert plain.quant(plain.outs["y"]) == a.quant(a.outs["y"])


def test_state_readers_and_a_wide_input(pair):
    """Spec: without ``state_readers`` the hidden cell's FULLY_CONNECTED ops (off every state's path) stay
    int8 and read an int8 copy of the state; with ``wide_input`` x is int16 with the int16x8 model's
    quantization, read by R directly (no QUANTIZE of x)."""
    m8, m16 = pair
    a, b = M(m8), M(m16)
    w = M(_tflite_mixed.widen_state_path(m8, m16, STATES, state_readers=False))
    readers = a.state_path() - a.state_path(readers=False)
    assert readers == {"a.hidden/MatMul;a.hidden/add", "a.hidden/MatMul_11"}
    for o in w.sg.operators:
        if w.name(o.outputs[0]) in readers:
            assert w.sg.tensors[o.outputs[0]].type == INT8
            assert w.name(o.inputs[0]).endswith("_int8")
    xm = _tflite_mixed.widen_state_path(m8, m16, STATES, wide_input=True)
    x = M(xm)
    assert x.sg.tensors[x.ins["x"]].type == INT16 and x.quant(x.ins["x"]) == b.quant(b.ins["x"])
    assert not any(x.op(o) == "QUANTIZE" and o.inputs[0] == x.ins["x"] for o in x.sg.operators)
    f = _feeds(x, 1, seed=7)[0]
    tx, tb = _run(xm, f), _run(m16, f)
    for n in STATES:
        np.testing.assert_array_equal(tx[x.name(x.outs[f"{n}_out"])], tb[b.name(b.outs[f"{n}_out"])])


def test_conversions_that_differ_are_refused(pair):
    """Spec: two models whose operators differ (in number, kind or the tensors they share), or whose state
    path is not int8 / int16, are refused with a SpliceError (the target then falls back to all-int8),
    never spliced wrong."""
    m8, m16 = pair
    with pytest.raises(_tflite_mixed.SpliceError, match="not int8 / int16"):
        _tflite_mixed.widen_state_path(m8, m8, STATES)
    c = fb.convert_bytearray_to_object(bytearray(m16))
    del c.subgraphs[0].operators[3]
    with pytest.raises(_tflite_mixed.SpliceError, match="differ"):
        _tflite_mixed.widen_state_path(m8, bytes(fb.convert_object_to_bytearray(c)), STATES)
    for k in (3, -1):  # one operator fewer in the int8 model, in the middle or at the end
        c = fb.convert_bytearray_to_object(bytearray(m8))
        del c.subgraphs[0].operators[k]
        with pytest.raises(_tflite_mixed.SpliceError, match="differ"):
            _tflite_mixed.widen_state_path(bytes(fb.convert_object_to_bytearray(c)), m16, STATES)
    # an int8 tensor (0: the state L2_m) read where the int16x8 model reads another (x)
    c = fb.convert_bytearray_to_object(bytearray(m16))
    k = next(k for k, o in enumerate(M(m8).sg.operators) if o.inputs[0] == 0)
    c.subgraphs[0].operators[k].inputs[0] = M(m16).ins["x"]
    with pytest.raises(_tflite_mixed.SpliceError, match="maps to two"):
        _tflite_mixed.widen_state_path(m8, bytes(fb.convert_object_to_bytearray(c)), STATES)
    c = fb.convert_bytearray_to_object(bytearray(m8))
    ops = c.subgraphs[0].operators
    k = next(k for k, o in enumerate(ops) if max(c.operatorCodes[o.opcodeIndex].builtinCode, 0) == 9)
    j = next(j for j, o in enumerate(ops) if c.operatorCodes[o.opcodeIndex].builtinCode == 0)  # an ADD
    ops[k].opcodeIndex, ops[j].opcodeIndex = ops[j].opcodeIndex, ops[k].opcodeIndex
    with pytest.raises(_tflite_mixed.SpliceError, match="differ at operator"):
        _tflite_mixed.widen_state_path(bytes(fb.convert_object_to_bytearray(c)), m8, STATES)


# ---------------------------------------------------------------- targets/_tflite_build.py


def _union(qa, qb, dt):
    lo = min((np.iinfo(dt).min - z) * s for s, z in (qa, qb))
    hi = max((np.iinfo(dt).max - z) * s for s, z in (qa, qb))
    return lo, hi


@pytest.mark.parametrize("wide", [False, True])
def test_tie_state_scales_gives_a_state_and_its_update_the_union_of_their_ranges(pair, wide):
    """Spec (``tie_state_scales``, ``_range``, ``_rescale_fc_bias``): a state input and its ``*_out`` (and every
    tensor a RESHAPE ties to them) get one quantization covering both ranges: int8 [lo, hi] over 255 steps
    with the zero point that puts lo at -128, int16 symmetric, max(-lo, hi) / 32767 with zero point 0; a
    FULLY_CONNECTED bias reading one of them is requantized to the new input scale (its integers divided by
    the ratio, rounded). On a model already tied it changes no other tensor, and an int8 state's
    quantization neither; an int16 state's scale grows by 32768 / 32767 (its range reaches -32768 steps)."""
    model = pair[1] if wide else pair[0]
    dt = np.int16 if wide else np.int8
    base = M(model)
    for n in STATES:  # the conversion tied them already: both ends share one quantization
        assert base.quant(base.ins[n]) == base.quant(base.outs[f"{n}_out"])
    again = M(_tflite_build.tie_state_scales(model, STATES))
    for i in range(len(base.sg.tensors)):
        q = base.sg.tensors[i].quantization
        if not wide and q is not None and q.scale is not None and len(q.scale):
            assert again.sg.tensors[i].quantization.scale == pytest.approx(q.scale, rel=1e-7), base.name(i)
            assert list(again.sg.tensors[i].quantization.zeroPoint) == list(q.zeroPoint)
    for n in STATES:
        for t in (base.ins[n], base.outs[f"{n}_out"]):
            grow = 32768 / 32767 if wide else 1.0
            assert (
                again.quant(t)[0] == pytest.approx(base.quant(t)[0] * grow, rel=1e-7)
                and again.quant(t)[1] == base.quant(t)[1]
            )
    # untie: the update of L1_m (reshaped, d = 2) and of L2_m (read by a biased FULLY_CONNECTED) get other ranges
    m = fb.convert_bytearray_to_object(bytearray(model))
    sg = m.subgraphs[0]
    moved = {}
    for n, k, z in (("L1_m", 1.37, -20), ("L2_m", 0.61, 9)):  # a negative zero point where it sets hi
        t = sg.tensors[base.outs[f"{n}_out"]]
        t.quantization.scale = [float(t.quantization.scale[0]) * k]
        if not wide:
            t.quantization.zeroPoint = [z]
        moved[n] = (float(t.quantization.scale[0]), int(t.quantization.zeroPoint[0]))
    untied = M(bytes(fb.convert_object_to_bytearray(m)))
    tied = M(_tflite_build.tie_state_scales(bytes(fb.convert_object_to_bytearray(m)), STATES))
    for n in STATES:
        lo, hi = _union(base.quant(base.ins[n]), moved[n], dt)
        if wide:
            want = (max(-lo, hi) / 32767, 0)
        else:
            s = (hi - lo) / 255
            want = (s, int(np.clip(round(-128 - lo / s), -128, 127)))
        group = {untied.ins[n], untied.outs[f"{n}_out"]}
        for o in untied.sg.operators:  # RESHAPE ties
            if untied.op(o) == "RESHAPE" and (o.inputs[0] in group or o.outputs[0] in group):
                group |= {o.inputs[0], o.outputs[0]}
        assert len(group) == (4 if n == "L1_m" else 2)  # L1_m: LMU b's (d, q) state, reshaped
        for t in group:
            s, z = tied.quant(t)
            assert s == pytest.approx(want[0], rel=1e-6) and z == want[1]
        for o_u, o_t in zip(untied.sg.operators, tied.sg.operators, strict=True):
            if untied.op(o_u) == "FULLY_CONNECTED" and o_u.inputs[0] in group and o_u.inputs[2] >= 0:
                ratio = want[0] / untied.quant(o_u.inputs[0])[0]
                bdt = np.int64 if wide else np.int32
                old = np.frombuffer(untied.const(o_u.inputs[2]), bdt)
                new = np.frombuffer(tied.const(o_t.inputs[2]), bdt)
                np.testing.assert_array_equal(new, np.round(old / ratio).astype(bdt))
                bs = untied.sg.tensors[o_u.inputs[2]].quantization.scale
                np.testing.assert_allclose(tied.sg.tensors[o_t.inputs[2]].quantization.scale, np.asarray(bs) * ratio)
                moved[n] = None  # the premise: a biased reader was checked
    assert moved["L2_m"] is None


def test_widen_int16_ranges_widens_every_free_int16_activation_by_the_factor(pair):
    """Spec (``widen_int16_ranges``): every int16 activation's scale is multiplied by the factor, zero point
    0 kept, except those tied (through RESHAPE / CONCATENATION, or a state and its update) to a constant or
    to a TANH (its output, or an input no other op reads); tied tensors keep one scale; weights keep theirs;
    each FULLY_CONNECTED bias reading a widened tensor has its integers divided by the factor (rounded) and
    its scale multiplied by it; LiteRT runs the result, its states within 2 steps of the unwidened model's on
    the same real inputs."""
    m16 = pair[1]
    f = 1.75
    a = M(m16)
    out = _tflite_build.widen_int16_ranges(m16, f)
    w = M(out)
    parent = list(range(len(a.sg.tensors)))

    def find(t):
        while parent[t] != t:
            t = parent[t]
        return t

    def join(ts):
        for t in ts[1:]:
            parent[find(t)] = find(ts[0])

    fixed = set()
    read_else = {t for o in a.sg.operators if a.op(o) not in ("TANH", "RESHAPE", "CONCATENATION") for t in o.inputs}
    for o in a.sg.operators:
        if a.op(o) == "RESHAPE":
            join([o.inputs[0], o.outputs[0]])
        if a.op(o) == "CONCATENATION":
            join([*o.inputs, *o.outputs])
        if a.op(o) == "TANH":  # its fixed output scale, and what only it reads (read by another op too, it widens)
            fixed |= {*o.outputs} | {t for t in o.inputs if t not in read_else}
    for n in STATES:
        join([a.ins[n], a.outs[f"{n}_out"]])
    keep = {find(t) for t in fixed} | {find(t) for t in range(len(a.sg.tensors)) if a.const(t) is not None}
    widened = set()
    for i, t in enumerate(a.sg.tensors):
        if t.type != INT16 or t.quantization is None or t.quantization.scale is None:
            continue
        s0, z0 = a.quant(i)
        s1, z1 = w.quant(i)
        assert z1 == z0 == 0
        if find(i) in keep:
            assert s1 == s0, a.name(i)
        else:
            assert s1 == pytest.approx(s0 * f, rel=1e-6), a.name(i)
            widened.add(i)
    assert {a.ins["x"], a.ins["L1_m"], a.ins["L2_m"]} <= widened
    assert a.outs["y"] not in widened
    checked = 0
    for oa, ow in zip(a.sg.operators, w.sg.operators, strict=True):
        if a.op(oa) == "FULLY_CONNECTED" and oa.inputs[2] >= 0:
            old = np.frombuffer(a.const(oa.inputs[2]), np.int64)
            new = np.frombuffer(w.const(ow.inputs[2]), np.int64)
            sa = np.asarray(a.sg.tensors[oa.inputs[2]].quantization.scale)
            sw = np.asarray(w.sg.tensors[ow.inputs[2]].quantization.scale)
            r = f if oa.inputs[0] in widened else 1.0
            np.testing.assert_array_equal(new, np.round(old / r).astype(np.int64))
            np.testing.assert_allclose(sw, sa * r, rtol=1e-12)
            checked += oa.inputs[0] in widened
        for ta, tw in zip(oa.inputs, ow.inputs, strict=True):  # weights unchanged
            if ta >= 0 and a.const(ta) is not None and a.sg.tensors[ta].type == INT8:
                assert w.const(tw) == a.const(ta) and w.quant(tw) == a.quant(ta)
    assert checked >= 3
    rng = np.random.default_rng(8)
    for _ in range(3):  # the same real inputs, within the unwidened ranges halved
        feed_w, feed_a = {}, {}
        for n, t in a.ins.items():
            s0, s1 = a.quant(t)[0], w.quant(t)[0]
            k = rng.integers(-16383, 16383, size=list(a.sg.tensors[t].shape))
            real = k * s0
            feed_a[n] = k.astype(np.int16)
            feed_w[n] = np.round(real / s1).astype(np.int16)
        ra, rw = _run(m16, feed_a), _run(out, feed_w)
        for n in STATES:
            t = a.outs[f"{n}_out"]
            got = rw[a.name(t)] * w.quant(t)[0]
            ref = ra[a.name(t)] * a.quant(t)[0]
            assert np.abs(got - ref).max() <= 2 * w.quant(t)[0] + 2 * f * 2 * a.quant(a.ins[n])[0]


def test_the_int8_pair_has_one_structure_and_the_int16x8_model_is_widened(pair):
    """Spec (``convert_int8_pair``): the int8 conversion (all int8: x, y, states) has the int16x8
    conversion's operators, in order, but for the QUANTIZE ops only the int16x8 converter inserts; the
    int16x8 model is all int16 with its ranges widened by RANGE16_HEADROOM (a second widening by 1 changes
    nothing; its x range is then past the calibration data's)."""
    m8, m16 = pair
    a, b = M(m8), M(m16)
    assert all(a.sg.tensors[t].type == INT8 for t in [*a.ins.values(), *a.outs.values()])
    assert all(b.sg.tensors[t].type == INT16 for t in [*b.ins.values(), *b.outs.values()])
    ob = [b.op(o) for o in b.sg.operators]
    oa = [a.op(o) for o in a.sg.operators]
    assert len(ob) == len(oa) + 1
    k = next(k for k, o in enumerate(b.sg.operators) if b.op(o) == "QUANTIZE")
    assert ob[:k] + ob[k + 1 :] == oa
    from lmu_edge.qlinear import RANGE16_HEADROOM

    g, cal = _graph()
    rec = _stepplan.record(g, cal, max_samples=200)
    s_x = b.quant(b.ins["x"])[0]
    assert s_x * 32767 == pytest.approx(RANGE16_HEADROOM * np.abs(rec["x"]).max(), rel=0.02)


def _edit(model: bytes, fn) -> bytes:
    m = fb.convert_bytearray_to_object(bytearray(model))
    fn(m)
    return bytes(fb.convert_object_to_bytearray(m))


def _set_version(text: bytes):
    def fn(m):
        md = next(md for md in m.metadata if md.name == b"min_runtime_version")
        m.buffers[md.buffer].data = np.frombuffer(text.ljust(16, b"\0"), np.uint8)

    return fn


def _version(model: bytes) -> bytes:
    m = fb.convert_bytearray_to_object(bytearray(model))
    md = next(md for md in m.metadata if md.name == b"min_runtime_version")
    return bytes(bytearray(m.buffers[md.buffer].data)).rstrip(b"\0")


def test_the_splice_needs_the_newer_runtime_and_adds_its_own_quantize_code(pair):
    """Spec: the spliced model's ``min_runtime_version`` is the newer of the two conversions' (its other
    metadata the int8 model's); where neither model has a QUANTIZE operator code the splice adds one (version
    2, int16 outputs) and every operator it inserts is a QUANTIZE."""
    m8, m16 = pair

    def reverse(m):  # the metadata in the other order: the version is found by its name
        m.metadata = m.metadata[::-1]

    cases = [(b"1.5.0", b"1.14.0", b"1.14.0"), (b"2.3.0", b"1.14.0", b"2.3.0")]
    for (v8, v16, want), turn in [(c, t) for c in cases for t in (False, True)]:
        e8, e16 = _edit(m8, _set_version(v8)), _edit(m16, _set_version(v16))
        if turn:
            e8, e16 = _edit(e8, reverse), _edit(e16, reverse)
        w = _tflite_mixed.widen_state_path(e8, e16, STATES)
        assert _version(w) == want
        meta = {md.name: md for md in fb.convert_bytearray_to_object(bytearray(w)).metadata}
        assert set(meta) == {b"min_runtime_version", b"CONVERSION_METADATA"}
    a = M(m8)
    assert "QUANTIZE" not in {a.op(o) for o in a.sg.operators}  # the premise

    def unrequantize(m):  # the int16x8 model without its requantizing QUANTIZE: the counts agree as they are
        sg = m.subgraphs[0]
        k = next(k for k, o in enumerate(sg.operators) if m.operatorCodes[o.opcodeIndex].builtinCode == 114)
        src, dst = sg.operators[k].inputs[0], sg.operators[k].outputs[0]
        del sg.operators[k]
        for o in sg.operators:
            o.inputs = [src if t == dst else t for t in o.inputs]

    w = M(_tflite_mixed.widen_state_path(m8, _edit(m16, unrequantize), STATES))
    inserted = [o for o in w.sg.operators if w.name(o.outputs[0]).endswith(("_int16", "_int8"))]
    assert len(inserted) == 3 and all(w.op(o) == "QUANTIZE" for o in inserted)
    assert sum(w.op(o) == "QUANTIZE" for o in w.sg.operators) == 3
    assert w.m.operatorCodes[w.code.index(schema.BuiltinOperator.QUANTIZE)].version == 2


def test_an_int8_requantization_writes_the_quantization_its_concatenation_reads(pair):
    """Spec (``_match_requantize``): where only the int16x8 converter requantizes a CONCATENATION input, the
    int8 model gets a QUANTIZE there too, off the state path (R of the state L1_m alone) int8 and in the
    CONCATENATION's output quantization (the int8 kernel reads its inputs in it), whatever its input's is
    (here moved off it), and read by another operator its input's; LiteRT runs the spliced model, that
    QUANTIZE's output the input requantized (within one step of rounding)."""
    m8, m16 = pair
    a = M(m8)
    src = _idx(a, "pre/Relu;pre/add_1")

    def move(m):
        q = m.subgraphs[0].tensors[src].quantization
        q.scale, q.zeroPoint = [float(q.scale[0]) * 1.5], [int(q.zeroPoint[0]) + 2]

    spliced = _tflite_mixed.widen_state_path(_edit(m8, move), m16, ["L1_m"])
    w = M(spliced)
    req = [o for o in w.sg.operators if w.name(o.outputs[0]).endswith("_requantized")]
    assert len(req) == 1 and w.op(req[0]) == "QUANTIZE"
    (cat,) = [o for o in w.sg.operators if w.op(o) == "CONCATENATION"]
    assert req[0].outputs[0] in cat.inputs and w.sg.tensors[cat.outputs[0]].type == INT8
    assert w.sg.tensors[req[0].outputs[0]].type == INT8
    assert w.quant(req[0].outputs[0]) == w.quant(cat.outputs[0]) == a.quant(_idx(a, w.name(cat.outputs[0])))
    assert w.quant(req[0].outputs[0]) != w.quant(req[0].inputs[0])  # the premise: it rescales

    # read by another operator (the CONCATENATION's code made an ADD's in both models), it keeps its input's
    def to_add(m):
        sg = m.subgraphs[0]
        o = next(o for o in sg.operators if m.operatorCodes[o.opcodeIndex].builtinCode == 2)
        o.opcodeIndex = next(i for i, c in enumerate(m.operatorCodes) if c.builtinCode == 0)

    w2 = M(_tflite_mixed.widen_state_path(_edit(_edit(m8, move), to_add), _edit(m16, to_add), ["L1_m"]))
    (r2,) = [o for o in w2.sg.operators if w2.name(o.outputs[0]).endswith("_requantized")]
    assert w2.quant(r2.outputs[0]) == w2.quant(r2.inputs[0]) == w.quant(req[0].inputs[0])
    for f in _feeds(w, 2, seed=9):
        t = _run(spliced, f)
        (si, zi), (so, zo) = w.quant(req[0].inputs[0]), w.quant(req[0].outputs[0])
        v = t[w.name(req[0].inputs[0])].astype(np.float64)
        want = np.clip(np.round((v - zi) * si / so) + zo, -128, 127)
        assert np.abs(t[w.name(req[0].outputs[0])] - want).max() <= 1


def test_the_splice_orders_operators_so_every_tensor_is_made_before_it_is_read():
    """Spec (``_topological``): each operator comes after those that make its inputs, tensor 0 included;
    graph inputs, constants (made by no operator) and omitted inputs (-1) are ready at once; the order is
    kept where it already holds; a cycle is refused with a SpliceError."""
    from types import SimpleNamespace as Op

    ops = [Op(inputs=[0, -1], outputs=[1]), Op(inputs=[5, 7], outputs=[0]), Op(inputs=[1, 0], outputs=[2])]
    order = _tflite_mixed._topological(ops, {5})
    assert [o.outputs[0] for o in order] == [0, 1, 2]
    assert _tflite_mixed._topological(order, {5}) == order
    with pytest.raises(_tflite_mixed.SpliceError, match="cycle"):
        _tflite_mixed._topological([Op(inputs=[1], outputs=[0]), Op(inputs=[0], outputs=[1])], set())


def _tiny_int16_model() -> bytes:
    """A hand-built int16 model, no conversion: FULLY_CONNECTED(x, W, bias) with its bias at tensor 0;
    CONCATENATION(x2, a constant); RESHAPE(x3) -> TANH; QUANTIZE(x8, int8) -> q; MAXIMUM(x4, a constant)."""
    T = schema.TensorType

    def tensor(name, shape, ttype, scale, buffer=0):
        t = schema.TensorT()
        t.name, t.shape, t.type, t.buffer = name.encode(), list(shape), ttype, buffer
        q = schema.QuantizationParametersT()
        q.scale, q.zeroPoint = [scale], [0]
        t.quantization = q if scale else None
        return t

    m = schema.ModelT()
    m.version, m.description = 3, b"tiny"
    bufs = [b"", np.array([1000, -2500, 7], np.int64).tobytes(), np.arange(-6, 6, dtype=np.int8).tobytes()]
    bufs += [np.array([300, -300], np.int16).tobytes(), np.array([1, 4], np.int32).tobytes()]
    bufs += [np.array([0, 0], np.int16).tobytes()]
    m.buffers = []
    for b in bufs:
        buf = schema.BufferT()
        buf.data = np.frombuffer(b, np.uint8) if b else None
        m.buffers.append(buf)
    tens = [
        tensor("bias", [3], T.INT64, 0.01 * 0.02, 1),
        tensor("x", [1, 4], T.INT16, 0.01),
        tensor("W", [3, 4], T.INT8, 0.02, 2),
        tensor("fc", [1, 3], T.INT16, 0.05),
        tensor("c", [1, 2], T.INT16, 0.004, 3),
        tensor("x2", [1, 2], T.INT16, 0.004),
        tensor("cat", [1, 4], T.INT16, 0.004),
        tensor("shape", [2], T.INT32, None, 4),
        tensor("x3", [1, 4], T.INT16, 0.003),
        tensor("r", [1, 4], T.INT16, 0.003),
        tensor("t", [1, 4], T.INT16, 1 / 32768),
        tensor("x8", [1, 2], T.INT8, 0.05),
        tensor("q", [1, 2], T.INT16, 0.002),
        tensor("x4", [1, 2], T.INT16, 0.006),
        tensor("zero", [1, 2], T.INT16, 0.006, 5),
        tensor("mx", [1, 2], T.INT16, 0.006),
    ]
    codes = []
    for c in (9, 2, 22, 28, 114, 55):  # FULLY_CONNECTED, CONCATENATION, RESHAPE, TANH, QUANTIZE, MAXIMUM
        oc = schema.OperatorCodeT()
        oc.builtinCode, oc.deprecatedBuiltinCode, oc.version = c, c, 1
        codes.append(oc)
    m.operatorCodes = codes

    def op(k, ins, outs):
        o = schema.OperatorT()
        o.opcodeIndex, o.inputs, o.outputs = k, ins, outs
        if k == 0:
            o.builtinOptionsType = schema.BuiltinOptions.FullyConnectedOptions
            o.builtinOptions = schema.FullyConnectedOptionsT()
            o.builtinOptions.quantizedBiasType = T.INT64
        if k == 1:
            o.builtinOptionsType = schema.BuiltinOptions.ConcatenationOptions
            o.builtinOptions = schema.ConcatenationOptionsT()
            o.builtinOptions.axis = 1
        return o

    sg = schema.SubGraphT()
    sg.tensors, sg.inputs, sg.outputs = tens, [1, 5, 8, 11, 13], [3, 6, 10, 12, 15]
    sg.operators = [op(0, [1, 2, 0], [3]), op(1, [5, 4], [6]), op(2, [8, 7], [9]), op(3, [9], [10])]
    sg.operators += [op(4, [11], [12]), op(5, [13, 14], [15])]
    m.subgraphs, m.signatureDefs = [sg], []
    return bytes(fb.convert_object_to_bytearray(m))


def test_widening_keeps_a_group_joined_to_a_constant_or_a_tanh_and_rescales_a_bias_at_tensor_0():
    """Spec (``widen_int16_ranges`` on a model built by hand): x2, joined by a CONCATENATION to a constant,
    x3, joined by a RESHAPE to the input of a TANH that alone reads it, and x4, joined by a MAXIMUM to a
    constant, keep their ranges, and so do the int8 x8 and the TANH's fixed output t; x, the
    FULLY_CONNECTED's output and q (int16, made from x8) widen, and the bias (tensor 0) is divided by the
    factor (rounded) with its scale multiplied."""
    model = _tiny_int16_model()
    out = _tflite_build.widen_int16_ranges(model, 2.0)
    assert out != model  # LiteRT prepared it: not the unchanged fallback
    m = fb.convert_bytearray_to_object(bytearray(out))
    sg = m.subgraphs[0]
    scale = {t.name.decode(): float(t.quantization.scale[0]) for t in sg.tensors if t.quantization is not None}
    want = {"x": 0.02, "fc": 0.1, "x2": 0.004, "cat": 0.004, "c": 0.004, "x3": 0.003, "r": 0.003, "x8": 0.05}
    want |= {"q": 0.004, "x4": 0.006, "mx": 0.006, "zero": 0.006}
    assert {k: scale[k] for k in want} == pytest.approx(want, rel=1e-6)
    assert scale["t"] == 1 / 32768 and scale["bias"] == pytest.approx(2 * 0.01 * 0.02, rel=1e-6)
    bias = np.frombuffer(bytes(bytearray(m.buffers[sg.tensors[0].buffer].data)), np.int64)
    np.testing.assert_array_equal(bias, [500, -1250, 4])  # 7 / 2 = 3.5 rounds to even


def test_tie_state_scales_ties_what_an_expand_dims_makes_of_a_state():
    """Spec (``tie_state_scales`` on a model built by hand): a tensor an EXPAND_DIMS makes of a state gets the
    state's tied quantization too (it moves bytes: one quantization on both sides)."""
    T = schema.TensorType
    m = schema.ModelT()
    m.version = 3
    m.buffers = [schema.BufferT(), schema.BufferT()]
    m.buffers[1].data = np.frombuffer(np.array([1], np.int32).tobytes(), np.uint8)
    tens = []
    for name, shape, ttype, scale, zp, buf in (
        ("s", [1, 2], T.INT8, 0.1, 0, 0),
        ("axis", [1], T.INT32, None, 0, 1),
        ("e", [1, 1, 2], T.INT8, 0.1, 0, 0),
        ("s_out", [1, 2], T.INT8, 0.2, 3, 0),
    ):
        t = schema.TensorT()
        t.name, t.shape, t.type, t.buffer = name.encode(), shape, ttype, buf
        if scale:
            t.quantization = schema.QuantizationParametersT()
            t.quantization.scale, t.quantization.zeroPoint = [scale], [zp]
        tens.append(t)
    codes = []
    for c in (70, 114):  # EXPAND_DIMS, QUANTIZE
        oc = schema.OperatorCodeT()
        oc.builtinCode, oc.deprecatedBuiltinCode, oc.version = c, c, 1
        codes.append(oc)
    ops = []
    for k, ins, outs in ((0, [0, 1], [2]), (1, [0], [3])):
        o = schema.OperatorT()
        o.opcodeIndex, o.inputs, o.outputs = k, ins, outs
        ops.append(o)
    sg = schema.SubGraphT()
    sg.tensors, sg.operators, sg.inputs, sg.outputs = tens, ops, [0], [3, 2]

    def io(name, t):
        v = schema.TensorMapT()
        v.name, v.tensorIndex = name.encode(), t
        return v

    sig = schema.SignatureDefT()
    sig.signatureKey, sig.subgraphIndex = b"serving_default", 0
    sig.inputs, sig.outputs = [io("s", 0)], [io("s_out", 3), io("e", 2)]
    m.operatorCodes, m.subgraphs, m.signatureDefs = codes, [sg], [sig]
    tied = M(_tflite_build.tie_state_scales(bytes(fb.convert_object_to_bytearray(m)), ["s"]))
    lo, hi = _union((0.1, 0), (0.2, 3), np.int8)
    s = (hi - lo) / 255
    want = (pytest.approx(s, rel=1e-6), int(np.clip(round(-128 - lo / s), -128, 127)))
    for t in (0, 2, 3):
        assert tied.quant(t) == want, tied.name(t)
