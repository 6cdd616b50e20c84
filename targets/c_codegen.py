"""C code generation: a graph -> the data and glue of <prefix>.c / <prefix>.h.

The generated code holds constant arrays, parameter structs and the sequence of
runtime calls for one step; the algorithms live in ``lmu_runtime.h``. Integer
graphs (from :func:`lmu_edge.quantize`) produce ``<prefix>_step_int8`` (``<prefix>_step_int16``
for an int16x8 graph, whose activations are int16) plus a float32 wrapper; float graphs produce a
float32 ``<prefix>_step``.
"""

from __future__ import annotations

import numpy as np

from .. import ir, lti, qir
from ..escape import c_comment
from .c_code import SIZES, Code, c_float, check_prefix, ctype_bits, expands, wx_layout  # noqa: F401  (re-exported: c.py, tests)
from .c_layers import band_conv_lines, band_pack, pade_memory_call
from .c_proofs import dense_acc32, dense_chunk, dense_step32, dense_wrap32, qlinear_acc_bound  # noqa: F401  (dense_acc32: re-exported for the tests)

ACT_CODES = {
    "linear": "LMU_LINEAR",
    "relu": "LMU_RELU",
    "relu6": "LMU_RELU6",
    "tanh": "LMU_TANH",
    "sigmoid": "LMU_SIGMOID",
    "softmax": "LMU_SOFTMAX",
    "silu": "LMU_SILU",
}

# --- integer graphs -------------------------------------------------------------------------


class _Bufs:
    """Two ping-pong activation buffers; ``next_for(cur)`` never returns the buffer being read."""

    def __init__(self, code, ctype, width):
        self.a = code.state(ctype, "act0", width)
        self.b = code.state(ctype, "act1", width)

    def next_for(self, cur):
        return self.b if cur == self.a else self.a


def _qlinear(code: Code, name: str, q: qir.QLinear) -> str:
    parts = []
    for k, p in enumerate(q.parts):
        wx = code.expand_weights and expands(q, p)
        wide = q.in_bits == 16 and p.kernel.size and int(np.abs(p.kernel).max()) > 127  # int16 weights
        w = code.array(
            f"{name}_p{k}_w",
            "int16_t" if wide else "int8_t",
            p.kernel.T,
            f"{name}: part {k} weights (out, in)",
            guard="!LMU_WX" if wx else None,
        )
        x = "NULL"
        if wx:
            blocks = wx_layout(p.kernel.T, int8_inputs=q.in_bits == 8)
            x = code.array(
                f"{name}_p{k}_wx",
                "int16_t",
                blocks,
                f"{name}: part {k} weights expanded to halfwords, 4 x 4 blocks (DSP cores, lmu_wx.h)",
                guard="LMU_WX",
                count_bytes=False,
            )
            code.wx_bytes += 2 * int(blocks.size) - int(p.kernel.size)
        m = code.array(f"{name}_p{k}_m", "int32_t", p.multiplier, f"{name}: part {k} multipliers")
        s = code.array(f"{name}_p{k}_s", "int32_t", p.shift, f"{name}: part {k} shifts")
        zsum = "NULL"
        fold = q.in_bits == 8 and k == 0 and q.bias is not None  # the bias rides in part 0's zsum
        if q.in_bits == 8 and (int(p.in_zp) != 0 or fold):  # the zero point folded out of the dot product
            z = -int(p.in_zp) * np.asarray(p.kernel, dtype=np.int64).sum(axis=0)
            what = "-zero point x row sums of w"
            if fold:  # bias_j + zsum_j: one load per row instead of two, the same sum modulo 2^32
                z = z + np.asarray(q.bias, dtype=np.int64)
                what = "bias - zero point x row sums of w"
            z = (z + 2**31) % 2**32 - 2**31  # the kernels add it modulo 2^32
            zsum = code.array(f"{name}_p{k}_z", "int32_t", z, f"{name}: part {k} {what}")
        parts.append(
            f"{{.{'w16' if wide else 'w'} = {w}, .n_in = {p.kernel.shape[0]}, .in_zp = {p.in_zp}, .zsum = {zsum}, "
            f".mult = {m}, .shift = {s}" + (f", .wx = {x}" if wx else "") + "}"
        )
        code.macs += int(p.kernel.size)
    bias = "NULL"  # int8 layers: folded into part 0's zsum above
    if q.bias is not None and q.in_bits != 8:
        bias = code.array(f"{name}_bias", "int32_t", q.bias, f"{name}: int32 bias")
    lut, lut16 = "NULL", "NULL"
    if q.lut is not None and q.in_bits == 16:
        lut16 = code.array(f"{name}_lut", "int16_t", q.lut, f"{name}: activation table (513, interpolated)")
    elif q.lut is not None:
        lut = code.array(f"{name}_lut", "int8_t", q.lut, f"{name}: activation table")
    sym = f"{code.prefix}_{name}"
    acc30, bound = _acc30(q)
    if acc30:
        code.objects.append(
            f"/* {c_comment(name)}: one part, right shifts only, every row's |bias + sum (x - zp) w|\n"
            f" * <= {bound} < 2^30 (|bias| + max |x - zp| sum |w|): the 32-bit fast path lmu_qlinear30 */"
        )
    code.objects.append(f"static const lmu_qpart_t {sym}_parts[{len(parts)}] = {{\n    " + ",\n    ".join(parts) + "};")
    code.objects.append(
        f"static const lmu_qlinear_t {sym} = {{\n    .parts = {sym}_parts, .n_parts = {len(parts)}, "
        f".n_out = {q.units}, .bias = {bias},\n    .out_zp = {q.out_zp}, .clamp_min = {q.clamp_min}, "
        f".clamp_max = {q.clamp_max}, .lut = {lut}"
        + (f", .lut16 = {lut16}" if lut16 != "NULL" else "")
        + (", .right_shifts = 1" if _right_shifts(q) else "")
        + (", .acc30 = 1" if acc30 else "")
        + "};"
    )
    return sym


def _right_shifts(q: qir.QLinear) -> bool:
    """Whether every requantization of an int8 layer is a right shift with a multiplier lmu_mbqm32_r takes."""
    return q.in_bits == 8 and all(
        int(np.min(p.shift, initial=0)) >= -31
        and int(np.max(p.shift, initial=0)) <= 0
        and int(np.min(p.multiplier, initial=0)) > -(2**31)
        for p in q.parts
    )


def _acc30(q: qir.QLinear) -> tuple:
    """(whether the int8 layer takes the 32-bit fast path lmu_qlinear30, the accumulator bound).

    The fast path needs one part, every shift a right shift (``_right_shifts``), |out_zp| < 2^30 and every
    row's exact accumulator below 2^30 in magnitude (``qlinear_acc_bound``): then the DSP path requantizes
    with lmu_mbqm32_s (SMMULR of 2a, which needs |a| < 2^30), |MBQM| <= 2^30 and out_zp + MBQM fits int32, so
    the row needs no 64-bit total and no 64-bit clamp."""
    if q.in_bits != 8 or len(q.parts) != 1 or not _right_shifts(q):
        return False, None
    bound = qlinear_acc_bound(q)
    return bound < 2**30 and abs(int(q.out_zp)) < 2**30, bound


def act_ctype(graph: ir.Graph) -> str:
    """The C type of a quantized graph's integer API: ``int8_t``, or ``int16_t`` for int16x8 (and a mixed
    int8 graph whose input is 16-bit)."""
    first = graph.layers[0]
    return "int16_t" if getattr(first, "bits", 8) == 16 else "int8_t"


def generate_int(graph: ir.Graph, prefix: str, expand_weights: bool = True) -> Code:
    """The integer C (data, state fields, reset and step lines) for a quantized graph (int8, int16x8, or
    int8 with some layers at 16 bits: :class:`lmu_edge.qir.QConvert` between them). ``expand_weights``:
    the dense layers' weights also as halfwords for the DSP cores (LMU_WX, docs/firmware.md)."""
    from lmu_edge import intsim

    code = Code(prefix, expand_weights=expand_weights)
    at = act_ctype(graph)
    shapes = graph.shapes()
    widths = [n_in for _, n_in, _, _ in shapes] + [n_out for _, _, n_out, _ in shapes]
    units = [lay.linear.units for lay in graph.layers if isinstance(lay, (qir.QDense, qir.QBandConv))]
    for lay in graph.layers:
        if isinstance(lay, qir.QLMU):
            units += [lay.encoder.units] + ([lay.hidden.units] if lay.hidden is not None else [])
    # the two activation buffers: int16_t where any layer is 16-bit (an 8-bit layer reads them as int8_t)
    wide = any(intsim.layer_bits(lay) == 16 for lay in graph.layers)
    bt = "int16_t" if wide else "int8_t"
    bufs = _Bufs(code, bt, max(widths))
    acc = code.state("int32_t", "acc", max(units + [1]))

    def view(p, bits):
        t = "int16_t" if bits == 16 else "int8_t"
        return f"(({t} *){p})" if p in (bufs.a, bufs.b) and t != bt else p

    cur = "x"
    for i, (layer, n_in, _n_out, _) in enumerate(shapes):
        tag = f"l{i}"
        if isinstance(layer, qir.QInput):
            continue
        nxt = bufs.next_for(cur)
        lb = intsim.layer_bits(layer)
        w16 = lb == 16
        lt = "int16_t" if w16 else "int8_t"
        if isinstance(layer, qir.QConvert):
            src, dst = view(cur, 8 if w16 else 16), view(nxt, lb)
            if w16:
                expr = f"(int16_t)(((int32_t){src}[k_] - ({layer.in_zp})) * 128)"
            else:
                expr = f"lmu_requant8((int32_t){src}[k_], {layer.multiplier}, {layer.shift}, {layer.out_zp})"
            code.step_lines.append(
                f"{{ int32_t k_; for (k_ = 0; k_ < {n_in}; ++k_) {dst}[k_] = {expr}; }}  "
                f"/* {c_comment(layer.name)}: to {lb} bits */"
            )
            cur = nxt
        elif isinstance(layer, qir.QDense):
            lin = _qlinear(code, f"{tag}_dense", layer.linear)
            code.step_lines.append(
                f"{{ const {lt} *in_[1]; in_[0] = {view(cur, lb)}; lmu_qlinear_i{lb}(&{lin}, in_, {acc}, "
                f"{view(nxt, lb)}); }}  /* {c_comment(layer.name)} */"
            )
            cur = nxt
        elif isinstance(layer, qir.QBandConv):
            paired = lb == 8 and _acc30(layer.linear)[0]  # lmu_band_rows_i8: two bands per call, packed weights
            lin = _qlinear(code, f"{tag}_conv", layer.linear)
            code.macs += int(layer.linear.parts[0].kernel.size) * (layer.out_bands * layer.pool - 1)
            zp = int(layer.linear.parts[0].in_zp)
            assert not w16 or zp == 0, f"{layer.name}: an int16 activation has zero point 0"
            call = f"lmu_qlinear_i{lb}(&{lin}, in_, {acc}, row_);"
            packed = None
            if paired:
                wp = code.array(
                    f"{tag}_conv_wp",
                    "int8_t",
                    band_pack(layer.linear.parts[0].kernel),
                    f"{c_comment(layer.name)}: int8 weights packed for lmu_band_rows_i8 (row pair, 4 columns)",
                    align=True,
                )
                packed = (lin, wp)
            code.step_lines.append(
                band_conv_lines(
                    code, tag, layer, view(cur, lb), view(nxt, lb), lt, zp, layer.linear.units, call, packed
                )
            )
            cur = nxt
        elif isinstance(layer, qir.QLut):
            lut = code.array(f"{tag}_lut", lt, layer.lut, f"{c_comment(layer.name)}: activation table")
            fn = "lmu_qlut16" if w16 else "lmu_qlut"
            code.step_lines.append(
                f"{fn}({lut}, {view(cur, lb)}, {view(nxt, lb)}, {n_in});  /* {c_comment(layer.name)} */"
            )
            cur = nxt
        elif isinstance(layer, qir.QSoftmax):
            lut = code.array(f"{tag}_exp", "int32_t", layer.exp_lut, f"{c_comment(layer.name)}: exp table (Q16)")
            fn = "lmu_qsoftmax16" if w16 else "lmu_qsoftmax"
            code.step_lines.append(
                f"{fn}({lut}, {view(cur, lb)}, {view(nxt, lb)}, {n_in});  /* {c_comment(layer.name)} */"
            )
            cur = nxt
        elif isinstance(layer, qir.QPool):
            sm = code.state("int64_t", f"{tag}_sum", n_in)
            cnt = code.state("int32_t", f"{tag}_count", 1)
            code.step_lines.append(
                f"lmu_qpool{16 if w16 else ''}({sm}, {cnt}, {view(cur, lb)}, {view(nxt, lb)}, {n_in}, {layer.in_zp}, "
                f"{layer.multiplier}, {layer.shift}, {layer.out_zp});  /* {c_comment(layer.name)} */"
            )
            cur = nxt
        elif isinstance(layer, qir.QLMU):
            cur = _int_lmu(code, tag, layer, n_in, view(cur, lb), acc)
        else:  # pragma: no cover - quantize() makes only these
            raise TypeError(f"no C generator for {type(layer).__name__}")
    n_out = graph.output_features
    code.step_lines.append(f"memcpy(y, {cur}, {n_out * (2 if at == 'int16_t' else 1)});")
    return code


def _int_lmu(code: Code, tag: str, L: qir.QLMU, n_in: int, cur: str, acc: str) -> str:
    d, q = L.memory_d, L.order
    st = ctype_bits(L.state_type.width)
    bits = L.state_type.width
    w16 = L.act_bits == 16
    at = "int16_t" if w16 else "int8_t"
    rq = "lmu_requant16" if w16 else "lmu_requant8"
    m = code.state(st, f"{tag}_m", d * q)
    u = code.state("int32_t", f"{tag}_u", d)
    h: str | None = None
    if L.hidden is not None:
        h = code.state(at, f"{tag}_h", L.hidden.units)
        h_zp = qir.h_reset_zp(L)
        if w16:  # zero point 0: the struct's memset already zeroed it
            assert h_zp == 0, f"{L.name}: an int16 activation has zero point 0"
        else:
            code.reset_lines.append(f"memset({h}, {h_zp}, {L.hidden.units});  /* h = 0 (its zero point) */")
    zlen = d * q + (n_in if L.input_to_hidden else 0)
    z = code.state(at, f"{tag}_z", zlen)
    mz_m, mz_s = L.m_to_z
    ins = [cur]
    lines = [f"/* {c_comment(L.name)}: LMU, memory_d={d}, order={q}, theta={L.theta:g}, state {L.state_type} */"]
    if L.hidden_to_memory:
        assert h is not None, f"{L.name}: hidden_to_memory without a hidden layer"
        ins.append(h)
    if L.memory_to_memory:
        mzp = code.state(at, f"{tag}_mzp", d * q)
        lines.append(_requant_state(rq, st, m, mzp, d * q, mz_m, mz_s, L.z_zp))
        ins.append(mzp)
    enc = _qlinear(code, f"{tag}_enc", L.encoder)
    lines.append(
        f"{{ const {at} *in_[{len(ins)}]; "
        + " ".join(f"in_[{k}] = {v};" for k, v in enumerate(ins))
        + f" lmu_qlinear{'16' if w16 else ''}(&{enc}, in_, {u}); }}"
    )
    mem = L.memory
    if isinstance(mem, qir.QDenseMemory):
        ct = "int16_t" if mem.coeff_bits <= 16 else "int32_t"
        C = code.array(
            f"{tag}_coeffs",
            ct,
            mem.coeffs,
            f"{c_comment(L.name)}: {mem.form} coefficients, {mem.coeff_frac} fractional bits",
        )
        B = code.array(f"{tag}_B", "int32_t", mem.B, f"{c_comment(L.name)}: Bbar, {mem.b_frac} fractional bits")
        tmp = code.state("int64_t", f"{tag}_tmp", q)
        chunk = dense_chunk(mem.coeffs, bits)
        sums = "32-bit sums over C m" if chunk >= q else "64-bit sums over C m"
        if 0 < chunk < q:
            sums += f", 32-bit partial sums of {chunk} columns"
        c16 = 16 if ct == "int16_t" else 32
        kernel = f"lmu_dense_memory_s{bits_tag(st)}_c{c16}"
        step32, why = False, "not read by this kernel (only the 16 x 16 one)"
        wrap32, wrap_why = False, why
        if kernel == "lmu_dense_memory_s16_c16":
            u_bound = max(abs(int(L.encoder.clamp_min)), abs(int(L.encoder.clamp_max)))
            if L.encoder.lut is not None:
                u_bound = int(np.abs(np.asarray(L.encoder.lut, dtype=np.int64)).max(initial=0))
            step32 = dense_step32(mem.coeffs, mem.B, u_bound, mem.coeff_frac, bits)
            why = "the rounded step provably fits 31 bits" if step32 else "not proven"
            wrap32 = dense_wrap32(
                L.state_bound * 2.0**L.state_type.frac, L.bound_proven, mem.form == "delta", mem.coeff_frac, bits
            )
            cores = "ARMv6-M and Helium" if q % 8 == 0 else "ARMv6-M"  # Helium's wrap32 rows: q % 8 == 0
            wrap_why = f"each row's whole sum provably fits int32: 32-bit sums on {cores}" if wrap32 else "not proven"
            if wrap32 and chunk < q:
                sums += f" (elsewhere; {cores}: wrap32)"
        cfg = code.params(
            f"lmu_dense_memory_c{c16}_t",
            f"{tag}_memory",
            [
                ("d", d),
                ("q", q),
                ("C", C),
                ("B", B),
                ("coeff_frac", mem.coeff_frac),
                ("delta", 1 if mem.form == "delta" else 0, f"{mem.form} form"),
                ("bits", bits),
                ("chunk", chunk, sums),
                ("step32", int(step32), why),
                ("wrap32", int(wrap32), wrap_why),
            ],
        )
        lines.append(f"{kernel}({cfg}, {m}, {u}, {tmp});")
        code.accumulators.append(
            {
                "layer": L.name,
                "sum_bits": 32 if chunk >= q else 64,  # for any state; row_sum_fits_int32: reachable ones
                "int32_partial_columns": min(chunk, q),
                "step_fits_int32": bool(step32),
                "row_sum_fits_int32": bool(wrap32),
            }
        )
        code.macs += d * (q * q + q)
    elif isinstance(mem, qir.QRKMemory):
        hc = code.array(
            f"{tag}_hc", "int32_t", mem.hc, f"{c_comment(L.name)}: h*(2i+1)/theta, {mem.hc_frac} fractional bits"
        )
        w = code.state("int64_t", f"{tag}_w", mem.rk_order * q)
        x = code.state("int32_t", f"{tag}_x", q)  # the state at the working precision (bits + guard <= 32)
        cfg = code.params(
            "lmu_rk_memory_t",
            f"{tag}_memory",
            [
                ("d", d),
                ("q", q),
                ("hc", hc),
                ("hc_frac", mem.hc_frac),
                ("r", mem.rk_order, f"RK{mem.rk_order}"),
                ("substeps", mem.substeps),
                ("u_shift", L.u_type.frac - L.state_type.frac - mem.guard),
                ("bits", bits),
                ("guard", mem.guard),
            ],
        )
        lines.append(f"lmu_rk_memory_s{bits_tag(st)}({cfg}, {m}, {u}, {w}, {x});")
        code.macs += d * lti.rk_cost(q, mem.rk_order, mem.substeps)[0] // 2
    elif getattr(mem, "TYPE", None) == "q_pade_memory":
        lines.append(pade_memory_call(code, tag, L, m, u, bits))
    else:
        if not isinstance(mem, qir.QFIRMemory):
            raise TypeError(f"layer {L.name!r}: no C for memory {type(mem).__name__}")
        ct = "int16_t" if mem.coeff_bits <= 16 else "int32_t"
        Lk = mem.kernel.shape[1]
        K = code.array(
            f"{tag}_kernel",
            ct,
            mem.kernel,
            f"{c_comment(L.name)}: FIR kernel (order, {Lk}), {mem.kernel_frac} fractional bits",
        )
        buf = code.state(st, f"{tag}_buf", d * Lk)
        head = code.state("int32_t", f"{tag}_head", 1)
        shift = mem.kernel_frac + L.u_type.frac - L.state_type.frac
        c16 = 16 if ct == "int16_t" else 32
        cfg = code.params(
            f"lmu_fir_memory_c{c16}_t",
            f"{tag}_memory",
            [("d", d), ("q", q), ("K", K), ("L", Lk), ("shift", shift), ("bits", bits)],
        )
        lines.append(f"lmu_fir_memory_s{bits_tag(st)}_c{c16}({cfg}, {m}, {u}, {buf}, {head});")
        code.macs += d * q * Lk
    lines.append(_requant_state(rq, st, m, z, d * q, mz_m, mz_s, L.z_zp))
    if L.input_to_hidden:
        assert L.x_to_z is not None, f"{L.name}: input_to_hidden without x_to_z"
        xm, xs, xzp = L.x_to_z
        lines.append(
            f"{{ int32_t k_; for (k_ = 0; k_ < {n_in}; ++k_) {z}[{d * q} + k_] = "
            f"{rq}((int32_t){cur}[k_] - ({xzp}), {xm}, {xs}, {L.z_zp}); }}"
        )
    out = z
    if L.hidden is not None:
        assert h is not None
        hid = _qlinear(code, f"{tag}_hidden", L.hidden)
        hins = [z, h] if L.hidden_recurrent else [z]
        lines.append(
            f"{{ const {at} *in_[{len(hins)}]; "
            + " ".join(f"in_[{k}] = {v};" for k, v in enumerate(hins))
            + f" lmu_qlinear_i{16 if w16 else 8}(&{hid}, in_, {acc}, {h}); }}"
        )
        sm = L.hidden_softmax
        if sm is not None:  # in place: each output reads only its own input, after the max and the sum
            exp = code.array(
                f"{tag}_hidden_exp", "int32_t", sm.exp_lut, f"{c_comment(L.name)}: hidden softmax exp table"
            )
            fn = "lmu_qsoftmax16" if w16 else "lmu_qsoftmax"
            lines.append(f"{fn}({exp}, {h}, {h}, {L.hidden.units});  /* the hidden cell's softmax */")
        out = h
    code.step_lines.extend(lines)
    return out


def _requant_state(rq: str, st: str, m: str, dst: str, n: int, mult: int, shift: int, zp: int) -> str:
    """The step line that requantizes the n state values m into activations dst: one call for an int16
    state (lmu_requant8_s16 / lmu_requant16_s16: vector kernels on Helium, SMLAWB pairs on DSP cores), a loop of
    ``rq`` otherwise."""
    if rq in ("lmu_requant8", "lmu_requant16") and st == "int16_t":  # lmu_requant8_s16 / lmu_requant16_s16
        call = f"{rq}_s16({m}, {dst}, {n}, {mult}, {shift}, {zp});"
    else:
        call = f"{{ int32_t k_; for (k_ = 0; k_ < {n}; ++k_) {dst}[k_] = {rq}({m}[k_], {mult}, {shift}, {zp}); }}"
    return call + "  /* state -> activations: multiplier, shift, zero point */"


def bits_tag(ctype: str) -> int:
    """The width in bits of an integer C type name (``int16_t`` -> 16)."""
    return {"int8_t": 8, "int16_t": 16, "int32_t": 32}[ctype]


# --- float graphs ---------------------------------------------------------------------------


def generate_float(graph: ir.Graph, prefix: str) -> Code:
    """The float32 C (data, state fields, reset and step lines) for a folded float graph."""
    code = Code(prefix)
    shapes = graph.shapes()
    widths = [n_in for _, n_in, _, _ in shapes] + [n_out for _, _, n_out, _ in shapes]
    bufs = _Bufs(code, "float", max(widths))
    cur = "x"
    for i, (layer, n_in, n_out, _) in enumerate(shapes):
        tag = f"l{i}"
        nxt = bufs.next_for(cur)
        if isinstance(layer, ir.Dense):
            W = code.array(
                f"{tag}_kernel", "float", np.asarray(layer.kernel).T, f"{c_comment(layer.name)}: kernel (out, in)"
            )
            b = (
                code.array(f"{tag}_bias", "float", layer.bias, f"{c_comment(layer.name)}: bias")
                if layer.bias is not None
                else "NULL"
            )
            code.step_lines += [
                f"lmu_f_matvec({W}, {cur}, {nxt}, {n_in}, {n_out}, 0);  /* {c_comment(layer.name)} */",
                f"lmu_f_add_bias({nxt}, {b}, {n_out});",
                f"lmu_f_activation({ACT_CODES[layer.activation]}, {nxt}, {n_out});",
            ]
            code.macs += n_in * n_out
        elif isinstance(layer, ir.BandConv):
            co = layer.channels_out
            W = np.asarray(layer.kernel).reshape(-1, co).T  # (out, patch)
            W = code.array(
                f"{tag}_kernel", "float", W, f"{c_comment(layer.name)}: kernel (out, frame x band x channel)"
            )
            b = "NULL" if layer.bias is None else code.array(f"{tag}_bias", "float", layer.bias, "bias")
            k = layer.kernel_t * layer.kernel_f * layer.channels_in
            call = (
                f"lmu_f_matvec({W}, in_[0], row_, {k}, {co}, 0); lmu_f_add_bias(row_, {b}, {co}); "
                f"lmu_f_activation({ACT_CODES[layer.activation]}, row_, {co});"
            )
            code.step_lines.append(band_conv_lines(code, tag, layer, cur, nxt, "float", 0, co, call))
            code.macs += layer.macs
        elif isinstance(layer, ir.Activation):
            code.step_lines += [
                f"memcpy({nxt}, {cur}, sizeof(float) * {n_in});  /* {c_comment(layer.name)} */",
                f"lmu_f_activation({ACT_CODES[layer.activation]}, {nxt}, {n_in});",
            ]
        elif isinstance(layer, ir.TimePooling):
            sm = code.state("float", f"{tag}_sum", n_in)
            cnt = code.state("int32_t", f"{tag}_count", 1)
            code.step_lines.append(f"lmu_f_pool({sm}, {cnt}, {cur}, {nxt}, {n_in});  /* {c_comment(layer.name)} */")
        elif isinstance(layer, ir.LMU):
            nxt = _float_lmu(code, tag, layer, n_in, cur)
        else:  # pragma: no cover
            raise TypeError(f"no C generator for {type(layer).__name__}")
        cur = nxt
    code.step_lines.append(f"memcpy(y, {cur}, sizeof(float) * {graph.output_features});")
    return code


def _float_lmu(code: Code, tag: str, L: ir.LMU, n_in: int, cur: str) -> str:
    d, q = L.memory_d, L.order
    m = code.state("float", f"{tag}_m", d * q)
    u = code.state("float", f"{tag}_u", d)
    units = L.hidden.units if L.hidden is not None else 0
    h = code.state("float", f"{tag}_h", max(units, 1)) if L.hidden is not None else None
    lines = [f"/* {c_comment(L.name)}: LMU, memory_d={d}, order={q}, theta={L.theta:g} */"]
    enc = code.array(
        f"{tag}_enc", "float", np.asarray(L.input_encoders).T, f"{c_comment(L.name)}: input encoders (d, in)"
    )
    lines.append(f"lmu_f_matvec({enc}, {cur}, {u}, {n_in}, {d}, 0);")
    code.macs += n_in * d
    if L.encoder_bias is not None:
        b = code.array(f"{tag}_enc_bias", "float", L.encoder_bias, f"{c_comment(L.name)}: encoder bias")
        lines.append(f"lmu_f_add_bias({u}, {b}, {d});")
    if L.hidden_encoders is not None:
        he = code.array(
            f"{tag}_henc", "float", np.asarray(L.hidden_encoders).T, f"{c_comment(L.name)}: hidden encoders (d, units)"
        )
        lines.append(f"lmu_f_matvec({he}, {h}, {u}, {units}, {d}, 1);")
        code.macs += units * d
    if L.memory_encoders is not None:
        me = code.array(
            f"{tag}_menc",
            "float",
            np.asarray(L.memory_encoders).T,
            f"{c_comment(L.name)}: memory encoders (d, d*order)",
        )
        lines.append(f"lmu_f_matvec({me}, {m}, {u}, {d * q}, {d}, 1);")
        code.macs += d * q * d
    mem = L.memory
    if isinstance(mem, ir.DenseSS):
        A = code.array(f"{tag}_Abar", "float", mem.Abar, f"{c_comment(L.name)}: Abar ({mem.method})")
        B = code.array(f"{tag}_Bbar", "float", mem.Bbar, f"{c_comment(L.name)}: Bbar")
        tmp = code.state("float", f"{tag}_tmp", q)
        lines.append(f"lmu_f_dense_memory({m}, {u}, {d}, {q}, {A}, {B}, {tmp});")
        code.macs += d * (q * q + q)
    elif isinstance(mem, ir.RungeKutta):
        hc = code.array(
            f"{tag}_hc",
            "float",
            lti.structure_coefficients(q, L.theta) / mem.substeps,
            f"{c_comment(L.name)}: (2i+1)/theta/substeps",
        )
        w = code.state("float", f"{tag}_w", mem.rk_order * q)
        lines.append(f"lmu_f_rk_memory({m}, {u}, {d}, {q}, {hc}, {mem.rk_order}, {mem.substeps}, {w});")
        code.macs += d * lti.rk_cost(q, mem.rk_order, mem.substeps)[0] // 2
    elif isinstance(mem, ir.Pade):
        lines.append(pade_memory_call(code, tag, L, m, u, None))
    elif isinstance(mem, ir.FIR):
        Lk = mem.kernel.shape[1]
        K = code.array(f"{tag}_kernel", "float", mem.kernel, f"{c_comment(L.name)}: FIR kernel (order, {Lk})")
        buf = code.state("float", f"{tag}_buf", d * Lk)
        head = code.state("int32_t", f"{tag}_head", 1)
        lines.append(f"lmu_f_fir_memory({m}, {u}, {d}, {q}, {K}, {Lk}, {buf}, {head});")
        code.macs += d * q * Lk
    else:
        raise TypeError(f"layer {L.name!r} is in parallel form: fold the graph first")
    zlen = d * q + (n_in if L.input_to_hidden else 0)
    if L.hidden is None and not L.input_to_hidden:
        code.step_lines.extend(lines)
        return m
    z = code.state("float", f"{tag}_z", zlen)
    lines.append(f"memcpy({z}, {m}, sizeof(float) * {d * q});")
    if L.input_to_hidden:
        lines.append(f"memcpy({z} + {d * q}, {cur}, sizeof(float) * {n_in});")
    if L.hidden is None:
        code.step_lines.extend(lines)
        return z
    assert h is not None
    acc = code.state("float", f"{tag}_hacc", units)
    W = code.array(
        f"{tag}_hidden", "float", np.asarray(L.hidden.kernel).T, f"{c_comment(L.name)}: hidden kernel (units, in)"
    )
    lines.append(f"lmu_f_matvec({W}, {z}, {acc}, {zlen}, {units}, 0);")
    code.macs += zlen * units
    if isinstance(L.hidden, ir.HiddenSimpleRNN):
        U = code.array(
            f"{tag}_recurrent",
            "float",
            np.asarray(L.hidden.recurrent_kernel).T,
            f"{c_comment(L.name)}: recurrent kernel (units, units)",
        )
        lines.append(f"lmu_f_matvec({U}, {h}, {acc}, {units}, {units}, 1);")
        code.macs += units * units
    if L.hidden.bias is not None:
        hb = code.array(f"{tag}_hidden_bias", "float", L.hidden.bias, f"{c_comment(L.name)}: hidden bias")
        lines.append(f"lmu_f_add_bias({acc}, {hb}, {units});")
    lines.append(f"lmu_f_activation({ACT_CODES[L.hidden.activation]}, {acc}, {units});")
    lines.append(f"memcpy({h}, {acc}, sizeof(float) * {units});")
    code.step_lines.extend(lines)
    return h
