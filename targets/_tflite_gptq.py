"""GPTQ weight rounding for the TFLite target: the weights are rounded here, in the coordinates the step
model holds them in, onto the grid TFLite's converter then finds (each channel's, or with
``per_tensor`` the matrix's, largest weight at 127 steps of the chosen scale), so that the converter keeps
the values. :func:`gptq_weights` is what :func:`.tflite.emit` calls (option ``weight_rounding``)."""

from __future__ import annotations

import numpy as np

from lmu_edge import reference


def gptq_per_tensor(W, gram, centered: bool):
    """``W`` (``(inputs, outputs)``) rounded by GPTQ (:func:`lmu_edge.rounding.gptq`, the same error
    feedback in blocks and the same scale search) on **one** int8 scale for the whole matrix, as a
    converter that quantizes the weights per tensor stores them (:data:`._tflite_build.PER_TENSOR`); the
    largest weight sits at 127 steps of the chosen scale, so that the converter's ``max |w| / 127``
    finds it and keeps the values."""
    from lmu_edge import rounding as qz

    W = np.asarray(W, np.float64)
    qmax = 127
    base = max(float(np.abs(W).max()), 1e-30) / qmax
    n = gram[2]  # the count of calibration inputs
    nearest = np.clip(np.round(W / base), -qmax, qmax) * base
    if n == 0 or W.shape[0] == 1:
        return nearest
    H = qz.gptq_hessian(gram, centered)
    order = np.argsort(-np.diag(H), kind="stable")
    U = qz.inverse_upper_factor(H[np.ix_(order, order)])
    if U is None:
        return nearest
    f, cols = len(qz.GPTQ_SCALES), W.shape[1]
    scale = np.repeat(base * qz.GPTQ_SCALES, cols)  # candidate c at columns c*cols .. c*cols+cols-1
    X = np.tile(W[order], f)
    pi, pj = np.unravel_index(np.argmax(np.abs(W[order])), W.shape)
    Q = np.empty_like(X)
    for a in range(0, len(X), qz.GPTQ_BLOCK):
        b = min(a + qz.GPTQ_BLOCK, len(X))
        E = np.empty((b - a, X.shape[1]))
        for i in range(a, b):
            Q[i] = np.clip(np.round(X[i] / scale), -qmax, qmax) * scale
            if i == pi:  # the peak at +-qmax steps: the converter finds the scale
                cj = pj + cols * np.arange(f)
                Q[i, cj] = np.sign(W[order][pi, pj]) * qmax * scale[cj]
            E[i - a] = (X[i] - Q[i]) / U[i, i]
            X[i + 1 : b] -= np.outer(U[i, i + 1 : b], E[i - a])
        X[b:] -= U[a:b, b:].T @ E
    Q = Q[np.argsort(order)]
    R = Q - np.tile(W, f)
    cost = np.sum(R * (H @ R), axis=0).reshape(f, cols).sum(axis=1)
    c = int(np.argmin(cost))
    return Q[:, c * cols : (c + 1) * cols]


def gptq_weights(graph, plan, cal, correct_bias: bool, per_tensor: bool = False):
    """``graph`` with the weights TFLite's converter quantizes per output channel (Dense kernels, LMU input
    encoders, the hidden kernel's memory and input blocks) rounded by GPTQ
    (:func:`lmu_edge.rounding.gptq`) in the coordinates the step model holds them in (the hidden
    kernel's memory rows scaled by the plan's state balance), each channel's largest weight at 127 steps
    of the chosen scale, so that the converter's own ``max |w| / 127`` finds that scale and keeps the
    values. ``correct_bias``: the biases take out the rounding's mean (as ``quantize`` with 16-bit
    activations). The weights of a feedback loop are left alone (``rounding.compensated``).
    ``per_tensor``: one scale per matrix (:func:`gptq_per_tensor`), for the modes whose weights TFLite
    Micro's CMSIS-NN kernels take per tensor only (:data:`._tflite_build.PER_TENSOR`)."""
    import dataclasses

    from lmu_edge import ir
    from lmu_edge import rounding as qz

    from ._floatstep import uneven

    recs = reference.record_ranges(graph, np.asarray(cal, np.float64))

    def rounded(W, gram, rows):
        G, total, n = gram
        if per_tensor and uneven(W * rows[:, None]):  # split into hi + lo instead (FloatStep(split_uneven))
            return np.asarray(W, np.float64)
        if per_tensor:
            return (
                gptq_per_tensor(W * rows[:, None], (G / np.outer(rows, rows), total / rows, n), correct_bias)
                / rows[:, None]
            )
        Qb, _ = qz.gptq(W * rows[:, None], (G / np.outer(rows, rows), total / rows, n), 8, correct_bias, True)
        return Qb / rows[:, None]

    def fix(W, gram, bias, mean, rows=None):
        W = np.asarray(W, np.float64)
        rows = np.ones(len(W)) if rows is None else rows
        Q = rounded(W, gram, rows)
        return Q, (qz.shifted_bias(bias, W, Q, mean) if correct_bias else bias)

    layers = []
    for i, (layer, rec) in enumerate(zip(graph.layers, recs, strict=True)):
        if isinstance(layer, ir.Dense):
            k, b = fix(layer.kernel, rec["in_gram"], layer.bias, rec["in_mean"])
            layer = dataclasses.replace(layer, kernel=k, bias=b)
        elif isinstance(layer, ir.LMU):
            enc, eb = fix(layer.input_encoders, rec["in_gram"], layer.encoder_bias, rec["in_mean"])
            ch: dict = {"input_encoders": enc, "encoder_bias": eb}
            if layer.hidden is not None and layer.hidden_encoders is None:
                G, total, n = rec["z_gram"]
                W = np.asarray(layer.hidden.kernel, np.float64)
                dq = layer.memory_d * layer.order
                sig = plan.sigma.get(i)
                fir = sig is None or isinstance(layer.memory, ir.FIR)  # as FloatStep scales the memory's rows
                rows = np.ones(dq) if fir else np.tile(sig, layer.memory_d)
                Q = np.empty_like(W)
                Q[:dq] = rounded(W[:dq], (G[:dq, :dq], total[:dq], n), rows)
                if len(W) > dq:
                    Q[dq:] = rounded(W[dq:], (G[dq:, dq:], total[dq:], n), np.ones(len(W) - dq))
                bias = qz.shifted_bias(layer.hidden.bias, W, Q, total / n) if correct_bias else layer.hidden.bias
                ch["hidden"] = dataclasses.replace(layer.hidden, kernel=Q, bias=bias)
            layer = dataclasses.replace(layer, **ch)
        layers.append(layer)
    return graph.replace(layers=tuple(layers))
