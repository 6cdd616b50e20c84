"""The C of the layers that bring their own runtime header: band convolutions (``lmu_bandconv.h``: the
patch gathering, the two-band int8 kernel's weight packing, pooling and frame history) and the implicit
Pade memory (``lmu_pade.h``). :mod:`.c_codegen` calls these with its :class:`.c_code.Code` (arrays, state fields and
the step's lines of one model)."""

from __future__ import annotations

import numpy as np

from ..escape import c_comment
from .c_code import SIZES, Code, c_float


def band_pack(kernel) -> np.ndarray:
    """An int8 band convolution's weights ``(n_in, n_out)`` as lmu_band_rows_i8 reads them: for each pair of
    output rows and each group of four input columns c0..c3, the first row's ``w[c0], w[c2], w[c1], w[c3]``
    then the second's (SXTB16 unpacks a word to ``(w[c0], w[c1])`` and ``(w[c2], w[c3])``); an odd last row
    and the columns up to a multiple of 4 are zeros. Shape ``(ceil(n_out / 2), n4 / 4, 2, 4)``, int8."""
    k = np.asarray(kernel, dtype=np.int64)
    n_in, n_out = k.shape
    w = np.zeros((n_out + n_out % 2, -(-n_in // 4) * 4), dtype=np.int8)
    w[:n_out, :n_in] = k.T
    w = w.reshape(w.shape[0] // 2, 2, w.shape[1] // 4, 4)[..., [0, 2, 1, 3]]  # SXTB16 -> (w0, w1), (w2, w3)
    return w.transpose(0, 2, 1, 3)


def band_conv_lines(code: Code, tag: str, layer, x: str, y: str, ct: str, zp: int, cout: int, call: str, packed=None):
    """The step's lines of a band convolution (:class:`lmu_edge.ir.BandConv` or :class:`lmu_edge.qir.QBandConv`,
    ``lmu_bandconv.h``): per output band the patch, ``call`` (patch ``in_[0]`` -> ``row_``), the max pooling;
    then the history keeps ``x``. ``ct``: the activations' C type; ``zp``: the input's zero point.

    ``packed`` (an int8 acc30 layer): ``(lmu_qlinear_t symbol, packed weights)``. The cores with the DSP
    extension and no Helium (``LMU_BAND_ROWS``) then run two bands per lmu_band_rows_i8 call on int16 patches;
    the others keep one linear-kernel call per band (Helium's four-row kernel, ARMv6-M's and the host's
    loops do better on that), so the state holds both paths' scratch."""

    if '#include "lmu_bandconv.h"' not in code.objects:
        code.objects.insert(0, '#include "lmu_bandconv.h"')
    kt, kf, ci = layer.kernel_t, layer.kernel_f, layer.channels_in
    n_in, size, nb = layer.bands * ci, SIZES[ct], layer.out_bands * layer.pool
    hist = code.state(ct, f"{tag}_hist", (kt - 1) * n_in) if kt > 1 else "NULL"
    patch = code.state(ct, f"{tag}_patch", kt * kf * ci)
    row = code.state(ct, f"{tag}_row", cout)
    if kt > 1 and zp != 0:
        code.reset_lines.append(f"memset({hist}, {zp}, {(kt - 1) * n_in});  /* no frames yet: the zero point */")
    suffix = {"int8_t": "i8", "int16_t": "i16", "float": "f"}[ct]
    what = f"{c_comment(layer.name)}: band convolution {kt}x{kf}, {ci} -> {cout} channels, pool {layer.pool}"
    lines = [
        f"{{ int32_t b_; {ct} *row_ = {row}; const {ct} *in_[1]; in_[0] = {patch};  /* {what} */",
        f"    for (b_ = 0; b_ < {nb}; ++b_) {{",
        f"        lmu_band_patch({patch}, {hist}, {x}, b_, {layer.bands}, {ci}, {kt}, {kf}, {layer.pad_lo}, "
        f"{size}, {zp});",
        f"        {call}",
        f"        lmu_band_max_{suffix}({y} + (b_ / {layer.pool}) * {cout}, row_, {cout}, b_ % {layer.pool} == 0);",
        "    }",
    ]
    if packed is not None:
        lin, wp = packed
        k = kt * kf * ci
        n4 = -(-k // 4) * 4
        xx = code.state("int32_t", f"{tag}_pair", n4)  # both patches, interleaved; int32: word-aligned for LDRD
        p16 = f"(int16_t *){xx}"
        row2 = code.state("int8_t", f"{tag}_row2", 2 * cout)
        args = f"{hist}, {x}, {{b}}, {layer.bands}, {ci}, {kt}, {kf}, {layer.pad_lo}, {zp}, {n4}"
        pool = f"{y} + ({{b}} / {layer.pool}) * {cout}, {{r}}, {cout}, {{b}} % {layer.pool} == 0"
        lines = (
            ["#if LMU_BAND_ROWS", f"{{ int32_t b_, c_;  /* {what}, two bands per call */"]
            + [
                f"    for (b_ = 0; b_ < {nb}; b_ += 2) {{",
                f"        c_ = b_ + 1 < {nb} ? b_ + 1 : b_;",
                f"        lmu_band_patch16({p16}, {args.format(b='b_')});",
                f"        lmu_band_patch16({p16} + 4, {args.format(b='c_')});",
                f"        lmu_band_rows_i8(&{lin}, {wp}, {n4}, (const uint32_t *){xx}, {row2}, {row2} + {cout});",
                f"        lmu_band_max_i8({pool.format(b='b_', r=row2)});",
                "        if (c_ != b_) {",
                f"            lmu_band_max_i8({pool.format(b='c_', r=f'{row2} + {cout}')});",
                "        }",
                "    }",
                f"    (void){patch}; (void){row};",
                "#else",
            ]
            + lines
            + [
                f"    (void){wp}; (void){xx}; (void){row2};  /* lmu_band_rows_i8's, on the DSP cores */",
                "#endif",
            ]
        )
    lines.append(f"    lmu_band_push({hist}, {x}, {n_in * size}, {kt}); }}" if kt > 1 else "}")
    text = "\n".join(lines)
    return text.replace("\n", "\n    ")  # the step's body is indented once


def pade_memory_call(code: Code, tag: str, L, m: str, u: str, bits) -> str:
    """The implicit Pade memory: its constants and parameter struct, ``#include "lmu_pade.h"`` once per
    model, and the one call of ``lmu_pade_memory_s<bits>`` (integer :class:`lmu_edge.pade.QPadeMemory`,
    ``bits`` the state width) or ``lmu_f_pade_memory`` (float :class:`lmu_edge.ir.Pade`, ``bits`` None)."""
    from .. import pade

    mem, d, q = L.memory, L.memory_d, L.order
    name = c_comment(L.name)
    if '#include "lmu_pade.h"' not in code.objects:
        code.objects.insert(0, '#include "lmu_pade.h"')
    sym = f"{code.prefix}_{tag}_pade"
    if bits is None:
        k = pade.step_constants(q, L.theta, mem.orders, mem.substeps)

        def pairs(v):
            return np.stack([np.real(v), np.imag(v)], axis=-1)

        arr = {
            n: code.array(f"{tag}_pade_{n}", "float", pairs(k[n]), f"{name}: Pade {n} (re, im)")
            for n in ("gc", "w", "inv", "coef")
        }
        fields = [("poles", len(k["gc"])), ("substeps", mem.substeps)]
        fields += [(n, arr[n]) for n in ("gc", "w", "inv", "coef")] + [("k", c_float(k["k"]))]
        code.params("lmu_f_pade_t", f"{tag}_pade", fields)
        work = code.state("float", f"{tag}_pade_work", 3 * q)
        code.macs += d * mem.substeps * len(k["gc"]) * 12 * q
        return (
            f"lmu_f_pade_memory({m}, {u}, {d}, {q}, &{sym}, {work});  /* pade [{mem.num}/{mem.den}] x{mem.substeps} */"
        )
    gc = code.array(f"{tag}_pade_gc", "int32_t", mem.gc, f"{name}: 2c/theta per pole (re, im), {mem.gc_frac} bits")
    w = code.array(
        f"{tag}_pade_w", "int32_t", mem.w, f"{name}: Sherman-Morrison vectors (pole, i, re/im), {mem.w_frac} bits"
    )
    inv = code.array(f"{tag}_pade_inv", "int32_t", mem.inv, f"{name}: 1/(1 + sum w) per pole, {mem.inv_frac} bits")
    coef = code.array(f"{tag}_pade_coef", "int32_t", mem.coef, f"{name}: output weights per pole, {mem.coef_frac} bits")
    fields = [("poles", mem.gc.shape[0]), ("substeps", mem.substeps), ("guard", mem.guard)]
    fields += [("u_shift", mem.u_shift), ("gc", gc), ("gc_frac", mem.gc_frac), ("w", w), ("w_frac", mem.w_frac)]
    fields += [("inv", inv), ("inv_frac", mem.inv_frac), ("coef", coef), ("coef_frac", mem.coef_frac)]
    code.params("lmu_pade_t", f"{tag}_pade", fields + [("k", mem.k), ("k_frac", mem.k_frac)])
    work = code.state("int64_t", f"{tag}_pade_work", 4 * q)
    code.macs += d * mem.substeps * mem.gc.shape[0] * 12 * q
    width = 8 if bits <= 8 else (16 if bits <= 16 else 32)  # the state's C type
    return (
        f"lmu_pade_memory_s{width}({m}, {u}, {d}, {q}, &{sym}, {bits}, {work});"
        f"  /* pade [{mem.num}/{mem.den}] x{mem.substeps} */"
    )
