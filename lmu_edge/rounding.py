"""Weight rounding: the per-channel grid, GPTQ with bias correction, and which parts get 16 bits.

:func:`lmu_edge.quantization.quantize` stores what this module decides: each weight matrix rounded to
its symmetric per-output-channel grid, to nearest or by GPTQ (:func:`compensated`), the biases
corrected for the rounding's mean; the parts a widening search gives 16-bit weights
(:mod:`lmu_edge.widening`) are left as they are. The TFLite target rounds its step model's weights
with :func:`gptq` too.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from . import ir

#: the weight parts of an LMU layer, by field (a part's key is ``(layer index, field)``; a Dense layer's
#: one part is ``"kernel"``); ``"hidden"`` and ``"recurrent_kernel"`` are the hidden cell's kernels
LMU_PARTS = ("input_encoders", "hidden_encoders", "memory_encoders", "hidden", "recurrent_kernel")


def per_channel(W, bits, scale=None):
    """Per-output-channel symmetric quantization: ``(int8 array, scales)``, int16 for ``bits > 8``.
    ``scale``: the channels' scales, where ``W`` was rounded onto a grid already (:func:`compensated`)."""
    W = np.asarray(W, np.float64)
    qmax = (1 << (bits - 1)) - 1
    s = grid_scale(W, bits) if scale is None else np.asarray(scale, np.float64)
    return np.clip(np.round(W / s), -qmax, qmax).astype(np.int16 if bits > 8 else np.int8), s


def grid_scale(W, bits):
    """The per-output-channel scale of ``W`` on the symmetric ``bits`` grid: ``max |W| / qmax``."""
    s = np.max(np.abs(np.asarray(W, np.float64)), axis=0) / ((1 << (bits - 1)) - 1)
    return np.where(s > 0, s, 1e-12)


def on_grid(W, bits):
    """``W`` rounded to nearest on the grid :func:`per_channel` uses, as float64."""
    Wq, sw = per_channel(W, bits)
    return Wq.astype(np.float64) * sw


def shifted_bias(bias, W, Q, in_mean):
    """``bias + in_mean @ (W - Q)``: the bias that gives the layer with rounded weights ``Q`` the float
    layer's mean output over inputs of mean ``in_mean``."""
    shift = np.asarray(in_mean, np.float64) @ (np.asarray(W, np.float64) - Q)
    return shift if bias is None else np.asarray(bias, np.float64) + shift


#: GPTQ's damping: this fraction of the mean input power is added to the diagonal of the inputs' second
#: moment, so that inputs which never vary (or vary together) do not make it singular
GPTQ_DAMP = 0.01
#: the scales each output channel tries, as multiples of ``max |w| / qmax`` (:func:`gptq`)
GPTQ_SCALES = np.linspace(0.8, 1.2, 41)
#: inputs rounded per block in :func:`gptq` (their errors reach the later inputs as one matrix product)
GPTQ_BLOCK = 128


def inverse_upper_factor(H):
    """The upper triangular ``U`` with ``U^T U = H^-1`` (positive diagonal) for a symmetric positive
    definite ``H``, or None where ``H`` is not. Without forming the inverse: with ``J`` the reversal,
    ``J H J = L L^T`` gives ``H^-1 = (J L^-T J)(J L^-1 J)``, so ``U = J L^-1 J``; one Cholesky and one
    triangular inverse (2/3 n^3 operations, where inverting and factoring took about 3 n^3: 6400 inputs,
    14.4 s -> 5.0 s on two cores)."""
    from scipy.linalg import lapack

    try:
        L = np.linalg.cholesky(H[::-1, ::-1])
    except np.linalg.LinAlgError:
        return None
    Li, info = lapack.dtrtri(L, lower=1)
    if info != 0 or not np.all(np.isfinite(Li)):
        return None
    return np.ascontiguousarray(np.triu(Li[::-1, ::-1]))


def gptq_hessian(gram, centered: bool) -> np.ndarray:
    """GPTQ's damped Hessian ``E[x x^T]`` (the covariance where ``centered``) from ``gram`` = ``(sum x x^T,
    sum x, count)`` with ``count > 0``: an input that never varies gets 1 on its diagonal, and every
    diagonal :data:`GPTQ_DAMP` times the mean diagonal more, so the factorisation below always exists."""
    G, total, n = gram
    H = np.asarray(G, np.float64) / n
    if centered:
        mu = np.asarray(total, np.float64) / n
        H = H - np.outer(mu, mu)
    dead = np.diag(H) <= 0
    H[dead, dead] = 1.0
    return H + GPTQ_DAMP * max(float(np.mean(np.diag(H))), 1e-30) * np.eye(len(H))


def gptq(W, gram, bits, centered, keep_peaks=False):
    """``(Q, scales)``: ``W`` (``(inputs, outputs)``) rounded to ``bits`` per output channel by error
    feedback (GPTQ: Frantar et al. 2022, after Optimal Brain Quantization), ``Q = k * scales`` with
    integer ``|k| <= qmax``. The inputs are rounded one at a time, most powerful first, and each one's
    rounding error is carried into the weights not yet rounded, in the proportion that minimises
    ``E[(x @ (Q - W))^2]`` over the calibration inputs ``x`` (``gram`` = ``(sum x x^T, sum x, count)``);
    ``centered``: the error's variance only (for a layer whose bias is corrected for the mean
    afterwards). Each channel tries every scale of :data:`GPTQ_SCALES` (times ``max |w| / qmax``; above 1
    its largest weight takes fewer than ``qmax`` steps, below 1 it clips) and keeps the one of least
    error. On the layer-option matrix's int8-weight ceiling the scale search added up to 7.9 dB to GPTQ
    at the fixed scale (+28 dB over the ten models), and holding each channel's largest weight at
    ``+-qmax`` cost 4.4 dB on one model; :func:`per_channel` reproduces ``Q`` given these scales.
    ``keep_peaks``: each channel's largest weight is set to ``+-qmax`` times the channel's scale (its
    error fed back as any other's), so a converter that takes the scale from ``max |Q| / qmax`` (TFLite's)
    finds the chosen scale and stores ``Q`` exactly."""
    W = np.array(W, np.float64)
    qmax = (1 << (bits - 1)) - 1
    base = grid_scale(W, bits)
    n = gram[2]  # the count of calibration inputs
    if n == 0 or W.shape[0] == 1:  # one input: each channel's one weight is exact at max |w| / qmax
        return on_grid(W, bits), base
    H = gptq_hessian(gram, centered)
    order = np.argsort(-np.diag(H), kind="stable")
    U = inverse_upper_factor(H[np.ix_(order, order)])
    if U is None:
        return on_grid(W, bits), base
    f = len(GPTQ_SCALES)
    scale = np.outer(base, GPTQ_SCALES).ravel()  # channel j's candidates at columns j*f .. j*f+f-1
    X = np.repeat(W[order], f, axis=1)
    peak = np.argmax(np.abs(X), axis=0)
    top = np.sign(X[peak, np.arange(X.shape[1])]) * qmax * scale
    Q = np.empty_like(X)
    # inputs in blocks of GPTQ_BLOCK: each rounding's error goes at once to the rest of its block, and a
    # block's errors go to the inputs after it in one matrix product (the same sums as one outer product
    # per input, in another order; 6400 inputs: 32 s -> 3 s)
    for a in range(0, len(X), GPTQ_BLOCK):
        b = min(a + GPTQ_BLOCK, len(X))
        E = np.empty((b - a, X.shape[1]))
        for i in range(a, b):
            Q[i] = np.clip(np.round(X[i] / scale), -qmax, qmax) * scale
            if keep_peaks:
                Q[i, peak == i] = top[peak == i]
            E[i - a] = (X[i] - Q[i]) / U[i, i]
            X[i + 1 : b] -= np.outer(U[i, i + 1 : b], E[i - a])
        X[b:] -= U[a:b, b:].T @ E
    Q = Q[np.argsort(order)]
    R = Q - np.repeat(W, f, axis=1)
    cost = np.sum(R * (H @ R), axis=0).reshape(W.shape[1], f)  # r^T H r per column (one BLAS product)
    best = np.argmin(cost, axis=1) + np.arange(W.shape[1]) * f
    return Q[:, best], scale[best]


def compensated(
    graph: ir.Graph, recs: list, weight_bits: int = 8, *, gptq: bool = True, correct_bias: bool = True
) -> ir.Graph:
    """``graph`` with the weights of every Dense layer, LMU input encoder and LMU hidden kernel rounded
    for ``weight_bits`` against the calibration inputs (``recs`` of
    :func:`lmu_edge.reference.record_ranges`), as :func:`quantize` stores them (:func:`compensate`).

    ``gptq``: rounded by error feedback with a scale search (:func:`gptq`), not to nearest.
    Layer-option matrix, the float64 model with int8 weights alone (its ceiling with int8 weights): up
    to +12.7 dB, +57 dB over the ten models (docs/matrix.md). ``correct_bias``: the mean of
    ``x @ (W - Q)`` over the calibration inputs is taken out of each bias (bias correction; the layer
    gets a bias where it had none), and GPTQ then minimises the error's variance alone. The weights in
    a feedback loop are rounded to nearest: the recurrent weights of a SimpleRNN and the hidden and
    memory encoders (uncorrected), and the hidden kernel of an LMU with ``hidden_to_memory``: their
    inputs depend on the rounding itself (GPTQ on the RNN-path model's memory encoders cost it 8 dB).
    :func:`quantize` corrects biases with 16-bit activations only: with 8-bit activations their
    rounding errs in the mean as much, and correcting the weights' part alone lost up to 2.2 dB (the
    digits model; docs/matrix.md)."""
    return compensate(graph, recs, weight_bits, gptq, correct_bias)[0]


def weight_parts(graph: ir.Graph) -> list:
    """The keys ``(layer index, field)`` of every weight matrix :func:`quantize` rounds, in graph order."""
    keys = []
    for i, layer in enumerate(graph.layers):
        if isinstance(layer, ir.Dense):
            keys.append((i, "kernel"))
        elif isinstance(layer, ir.LMU):
            hidden = layer.hidden
            present = {
                "input_encoders": True,
                "hidden_encoders": layer.hidden_encoders is not None,
                "memory_encoders": layer.memory_encoders is not None,
                "hidden": hidden is not None,
                "recurrent_kernel": isinstance(hidden, ir.HiddenSimpleRNN),
            }
            keys.extend((i, f) for f in LMU_PARTS if present[f])
    return keys


def compensate(graph, recs, weight_bits, use_gptq, correct_bias, wide=frozenset(), memo=None):
    """:func:`compensated`, and the per-channel scales of the weights it rounded by GPTQ:
    ``{(layer index, "kernel" | "input_encoders" | "hidden"): scales}`` (empty without ``use_gptq``).
    The parts in ``wide`` (same keys) are left as they are: they get 16-bit weights (:func:`lmu_edge.widening.widen`).
    ``memo`` (a dict kept across calls on the same graph and ``recs``): each part is rounded once. A
    part's rounding depends on the float model's inputs to it alone, not on how the other parts are
    rounded, so the widening searches, which try many sets of 16-bit parts, round each matrix once (GPTQ
    of a 6400-input hidden kernel takes about 8 s, 28 s before it ran in blocks)."""
    scales: dict = {}

    def rounded(key, W, gram, bias, mean, in_loop=False):
        if key in wide:
            return W, bias
        tag = (key, weight_bits, bool(use_gptq), bool(correct_bias))
        if memo is not None and tag in memo:
            Q, b, sc = memo[tag]
        else:
            W = np.asarray(W, np.float64)
            sc = None
            if use_gptq and not in_loop:
                Q, sc = gptq(W, gram, weight_bits, correct_bias)
            else:
                Q = on_grid(W, weight_bits)
            Q, b = (Q if use_gptq else W), (shifted_bias(bias, W, Q, mean) if correct_bias else bias)
            if memo is not None:
                memo[tag] = Q, b, sc
        if sc is not None:
            scales[key] = sc
        return Q, b

    layers = []
    for i, (layer, rec) in enumerate(zip(graph.layers, recs, strict=True)):
        if isinstance(layer, ir.Dense):
            kernel, bias = rounded((i, "kernel"), layer.kernel, rec["in_gram"], layer.bias, rec["in_mean"])
            layer = dataclasses.replace(layer, kernel=kernel, bias=bias)
        elif isinstance(layer, ir.LMU):
            enc, enc_bias = rounded(
                (i, "input_encoders"), layer.input_encoders, rec["in_gram"], layer.encoder_bias, rec["in_mean"]
            )
            ch: dict = {"input_encoders": enc, "encoder_bias": enc_bias}
            if layer.hidden is not None:
                _, z_total, z_n = rec["z_gram"]
                # hidden_to_memory puts the hidden kernel inside the loop h -> u -> m -> z -> h: its inputs
                # depend on its own rounding (GPTQ there: the matrix's RNN-path model -0.9 dB in C int16x8)
                loop = layer.hidden_encoders is not None
                kernel, bias = rounded(
                    (i, "hidden"), layer.hidden.kernel, rec["z_gram"], layer.hidden.bias, z_total / z_n, loop
                )
                ch["hidden"] = dataclasses.replace(layer.hidden, kernel=kernel, bias=bias)
            layer = dataclasses.replace(layer, **ch)
        layers.append(layer)
    return graph.replace(layers=tuple(layers)), scales
