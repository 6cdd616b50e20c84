"""The dense memory's form, kept for the widening search's candidates (lmu_edge._quantization_memory._FORMS,
issue 54): a memory quantized after others gives what it gives with nothing kept, whatever came before.

Which bug: a key that misses a setting (coefficient bits, the widest bits, the horizon, theta, another
memory of the same order) hands one memory another's coefficients; notes not replayed leave the report
without the form's lines; a kept array written by a caller changes later results.
"""

import dataclasses

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from lmu_edge import _quantization_memory as qm
from lmu_edge import ir, lti
from lmu_edge.fixedpoint import FixedType

_calls = st.tuples(
    st.integers(2, 10),  # order
    st.sampled_from([4.0, 9.5, 30.0]),  # theta
    st.sampled_from(["zoh", "euler"]),
    st.sampled_from([12, 16, 24]),  # coefficient bits
    st.sampled_from([None, 32]),  # the widest bits (where the user left them open)
    st.sampled_from([16, 32]),  # state bits
    st.sampled_from([40, 200]),  # horizon
)


def _quantize(call):
    q, theta, disc, cb, widest, sb, horizon = call
    mem = ir.DenseSS(disc, *lti.legendre_discrete(q, theta, disc))
    notes: list = []
    out = qm.dense_memory(mem, q, theta, sb, cb, FixedType(32, 24), horizon, notes, qm.Calibrated(1.0), widest)
    node, rest = out[0], out[1:]
    return {f.name: getattr(node, f.name) for f in dataclasses.fields(node)}, rest, notes


@settings(max_examples=25, deadline=None)
@given(calls=st.lists(_calls, min_size=2, max_size=6))
def test_a_kept_form_gives_what_a_fresh_quantization_gives(calls):
    kept = [_quantize(c) for c in calls]  # in sequence: later calls may find earlier forms
    for c, (node, rest, notes) in zip(calls, kept, strict=True):
        qm._FORMS.clear()
        f_node, f_rest, f_notes = _quantize(c)
        assert node.keys() == f_node.keys()
        for k in node:
            np.testing.assert_array_equal(node[k], f_node[k])
        assert rest == f_rest and notes == f_notes
    assert len(qm._FORMS) <= qm._FORMS_KEPT


def test_kept_arrays_are_read_only():
    qm._FORMS.clear()
    call = (6, 9.5, "zoh", 16, None, 16, 40)
    _quantize(call)
    (_, best, *_rest), _notes = next(iter(qm._FORMS.values()))
    assert not best[3].flags.writeable and not best[4].flags.writeable
