"""The float models the TFLite and ONNX target tests share (no TensorFlow or ONNX needed to build them: a
missing TensorFlow skips only the tests that need it)."""

import numpy as np
from graphs import chain

import lmu_edge
from lmu_edge import ir, lti


def configurations():
    rng = np.random.default_rng(7)
    fir_kernel = lti.legendre_impulse_response(6, 10.0, 25)
    return {
        "memory_d2_dense": lmu_edge.fold(chain(rng, q=8, theta=12.0, d=2)),
        "rnn_path_simple_rnn": lmu_edge.fold(chain(rng, q=6, theta=10.0, d=2, hidden="simple_rnn", rnn_path=True)),
        "rk4": lmu_edge.fold(chain(rng, q=6, theta=10.0), "rk4"),
        "fir": lmu_edge.fold(chain(rng, q=6, theta=10.0, memory=ir.ImpulseResponse(fir_kernel, "truncated")), "fir"),
        "pooling": lmu_edge.fold(
            ir.Graph(
                "pool",
                2,
                chain(rng, q=6, theta=10.0).layers[:2]
                + (ir.TimePooling("pool"), ir.Dense("out", rng.standard_normal((5, 3)), None, "softmax")),
            )
        ),
        "last_step": lmu_edge.fold(chain(rng, q=6, theta=10.0, return_sequences=False, hidden=None)),
    }


CONFIGS = configurations()


def lmu_q64():
    """The issue's model: one q=64, theta=200 LMU (dense ZOH) with a tanh hidden layer."""
    rng = np.random.default_rng(11)
    return lmu_edge.fold(chain(rng, n_in=1, q=64, theta=200.0, units=8), "zoh")
