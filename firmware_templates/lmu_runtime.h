/*
 * lmu_runtime.h -- the lmu-edge runtime: header-only C99, static inline, no malloc, no globals. This header
 * is the one a firmware includes; it includes one header per kernel family:
 *
 *   lmu_config.h          kernel path (portable, DSP, Helium, ARMv6-M), compiler macros, Cortex-M primitives
 *   lmu_fixedpoint.h      saturation, rounding shifts, TFLite-style requantization (lmu_mbqm)
 *   lmu_wx.h              the DSP cores' dense rows of expanded weights (LMU_WX)
 *   lmu_qlinear.h         int8 linear layers (lmu_qlinear), tables, softmax, running-mean pooling
 *   lmu_requant.h         an LMU state requantized into int8 activations
 *   lmu_int16.h           the 16-bit layers (int16x8, int16): lmu_mbqm16, interpolated tables
 *   lmu_memory.h          fixed-point LMU memories: generic dense, Runge-Kutta, FIR
 *   lmu_dense16.h         the 16 x 16 dense memory (the quantizer's default) on every path,
 *   lmu_dense16_blocks.h    and its DSP and Helium row blocks,
 *   lmu_dense16_v6m.h       and its ARMv6-M row sums
 *   lmu_float.h           the float32 path (define LMU_NO_FLOAT to leave it out)
 *
 * Integer path (no floating point at all, so it runs on an FPU-less Cortex-M0):
 *   - int8 activations with zero points, TFLite-style requantization (lmu_mbqm),
 *   - lmu_qlinear: sum over parts of MBQM((x_p - zp_p) . W_p [+ bias]), clamp, optional 256-entry LUT,
 *   - LMU memories in fixed point: dense (delta / direct form), structured Runge-Kutta, FIR ring buffer,
 *   - running-mean pooling and softmax in integers,
 *   - the int16x8 mode (--quantize int16x8, as TFLite's 16x8 and CMSIS-NN's s16 kernels): int16 activations
 *     with zero point 0, int8 weights, int64 row accumulators, TFLite's 64-bit requantization (lmu_mbqm16),
 *     tanh / sigmoid / silu and softmax as 513-entry tables read with linear interpolation (lmu_interp16).
 *     Their dense rows run four at a time on DSP and Helium cores (four rows sharing each input
 *     load) and in two-row portable C elsewhere; the tables, softmax and pooling are portable C on every
 *     core; the LMU memory kernels are shared with int8, chosen by the state width.
 * Every operation mirrors lmu_edge/intsim.py and lmu_edge/fixedpoint.py bit for bit; the tests compare
 * the two. Rounding of state updates is "half_up" ((x + 2^(s-1)) >> s); right shifts of negative
 * values are arithmetic (as gcc and clang define them).
 *
 * Each family header holds its portable, DSP (Cortex-M4, M7, M33), Helium (Cortex-M55) and ARMv6-M
 * (Cortex-M0) paths side by side, chosen at compile time from the ACLE feature macros (lmu_config.h);
 * define LMU_PORTABLE to use the portable loops everywhere.
 */
/* The runtime's version, 10000 * major + 100 * minor + patch of the lmu-edge that wrote it: every generated
 * <prefix>.c checks it, and a second copy of another version in one translation unit stops the build here
 * (the include guard below would otherwise keep the first copy silently). */
#if defined(LMU_RUNTIME_VERSION) && LMU_RUNTIME_VERSION != 100
#error                                                                                                                 \
    "lmu_runtime.h: two lmu-edge runtime versions in one build (this copy is 0.1.0, LMU_RUNTIME_VERSION 100): convert every model with one lmu-edge version, or build each model's kit on its own"
#endif
#ifndef LMU_RUNTIME_H
#define LMU_RUNTIME_H
#define LMU_RUNTIME_VERSION 100
#define LMU_RUNTIME_VERSION_STRING "0.1.0"

#include "lmu_config.h"
#include "lmu_fixedpoint.h"
#include "lmu_wx.h"
#include "lmu_qlinear.h"
#include "lmu_requant.h"
#include "lmu_int16.h"
#include "lmu_memory.h"
#include "lmu_dense16_blocks.h"
#include "lmu_dense16_v6m.h"
#include "lmu_dense16.h"
#include "lmu_float.h"

#endif /* LMU_RUNTIME_H */
