"""What the implicit step's forward substitution would cost in ONNX Runtime, against dense ZOH's MatMul.

    python bench/pade_onnx.py            # orders 64, 256 and 1024

ONNX has no triangular-solve operator, and the O(q) solve of lmu_edge.pade is a sequential recurrence
(each element needs the running sums of all earlier ones), so in ONNX it can only be a Loop over the
q/2 (even, odd) index pairs. This times one real forward substitution (the cheapest part of one pole's
solve: a Pade [3/4] substep needs two complex solves, each with a rank-one correction) as a Loop in
ONNX Runtime (one thread), and the whole dense ZOH step ``Abar @ m + Bbar * u`` as one MatMul, per
call of a step model with batch 1. It checks that the Loop computes the forward substitution (against
lmu_edge.pade._forward) before timing it.
"""

import datetime
import os
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

from lmu_edge import pade

OPSET = 21


def _loop_model(q: int) -> onnx.ModelProto:
    """``y = L^{-1} b`` with ``L = I - diag(g) T`` as a Loop over the q/2 index pairs (q even)."""
    f = TensorProto.FLOAT
    body = helper.make_graph(
        [
            helper.make_node("Constant", [], ["two"], value=helper.make_tensor("t", TensorProto.INT64, [], [2])),
            helper.make_node("Constant", [], ["one"], value=helper.make_tensor("o", TensorProto.INT64, [], [1])),
            helper.make_node("Mul", ["k", "two"], ["i0"]),
            helper.make_node("Add", ["i0", "one"], ["i1"]),
            helper.make_node("Gather", ["b", "i0"], ["b0"]),
            helper.make_node("Gather", ["g", "i0"], ["g0"]),
            helper.make_node("Mul", ["g0", "odd_in"], ["t0"]),
            helper.make_node("Add", ["b0", "t0"], ["y0"]),
            helper.make_node("Add", ["even_in", "y0"], ["even_out"]),
            helper.make_node("Gather", ["b", "i1"], ["b1"]),
            helper.make_node("Gather", ["g", "i1"], ["g1"]),
            helper.make_node("Mul", ["g1", "even_out"], ["t1"]),
            helper.make_node("Add", ["b1", "t1"], ["y1"]),
            helper.make_node("Add", ["odd_in", "y1"], ["odd_out"]),
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Identity", ["y0"], ["y0_s"]),
            helper.make_node("Identity", ["y1"], ["y1_s"]),
        ],
        "pair",
        [
            helper.make_tensor_value_info("k", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("even_in", f, []),
            helper.make_tensor_value_info("odd_in", f, []),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("even_out", f, []),
            helper.make_tensor_value_info("odd_out", f, []),
            helper.make_tensor_value_info("y0_s", f, []),
            helper.make_tensor_value_info("y1_s", f, []),
        ],
    )
    graph = helper.make_graph(
        [
            helper.make_node("Constant", [], ["n"], value=helper.make_tensor("n", TensorProto.INT64, [], [q // 2])),
            helper.make_node("Constant", [], ["c"], value=helper.make_tensor("c", TensorProto.BOOL, [], [True])),
            helper.make_node("Constant", [], ["z"], value=helper.make_tensor("z", f, [], [0.0])),
            helper.make_node("Loop", ["n", "c", "z", "z"], ["E", "O", "ye", "yo"], body=body),
            helper.make_node("Unsqueeze", ["ye", "ax"], ["ye2"]),
            helper.make_node("Unsqueeze", ["yo", "ax"], ["yo2"]),
            helper.make_node("Concat", ["ye2", "yo2"], ["pairs"], axis=1),
            helper.make_node("Reshape", ["pairs", "shape"], ["y"]),
        ],
        "forward_substitution",
        [helper.make_tensor_value_info("b", f, [q]), helper.make_tensor_value_info("g", f, [q])],
        [helper.make_tensor_value_info("y", f, [q])],
        initializer=[
            helper.make_tensor("ax", TensorProto.INT64, [1], [1]),
            helper.make_tensor("shape", TensorProto.INT64, [1], [q]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    onnx.checker.check_model(model, full_check=True)
    return model


def _dense_model(q: int, rng) -> onnx.ModelProto:
    f = TensorProto.FLOAT
    A = rng.standard_normal((q, q)).astype(np.float32) / q
    B = rng.standard_normal(q).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["m", "At"], ["am"]), helper.make_node("Mul", ["u", "B"], ["bu"])]
        + [helper.make_node("Add", ["am", "bu"], ["m_out"])],
        "dense_zoh",
        [helper.make_tensor_value_info("m", f, [1, q]), helper.make_tensor_value_info("u", f, [1, 1])],
        [helper.make_tensor_value_info("m_out", f, [1, q])],
        initializer=[onnx.numpy_helper.from_array(A.T, "At"), onnx.numpy_helper.from_array(B[None, :], "B")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    onnx.checker.check_model(model, full_check=True)
    return model


def _session(model):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def _time(sess, feed, seconds=1.0):
    sess.run(None, feed)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        sess.run(None, feed)
        n += 1
    return (time.perf_counter() - t0) / n


def main():
    """Print the per-call time of the Loop forward substitution and of the dense ZOH MatMul step."""
    rng = np.random.default_rng(0)
    print(
        f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores, "
        f"onnxruntime {ort.__version__}, one thread, batch 1"
    )
    print(f"{'order':>5} | {'Loop forward substitution us':>28} | {'dense ZOH MatMul step us':>24} | ratio")
    for q in (64, 256, 1024):
        theta = 10.0 * q
        g = (2 * pade.lti.structure_coefficients(q, theta) * 0.3).astype(np.float32)  # 2 c d_i, real c = 0.3
        b = rng.standard_normal(q).astype(np.float32)
        loop = _session(_loop_model(q))
        y = loop.run(None, {"b": b, "g": g})[0]
        want = pade._forward(b.astype(np.float64), g.astype(np.float64) / 2)
        assert np.allclose(y, want, rtol=1e-4, atol=1e-4 * np.max(np.abs(want))), "the Loop is not the solve"
        dense = _session(_dense_model(q, rng))
        m, u = np.zeros((1, q), np.float32), np.ones((1, 1), np.float32)
        t_loop = _time(loop, {"b": b, "g": g})
        t_dense = _time(dense, {"m": m, "u": u})
        print(f"{q:>5} | {t_loop * 1e6:>28.0f} | {t_dense * 1e6:>24.1f} | {t_loop / t_dense:5.0f}x", flush=True)


if __name__ == "__main__":
    main()
