/* quant_math.h — the int8 arithmetic of the quantized ops (lib/ops.def),
 * shared by mge-quant (lib/quantize.c), the ref kernels and the cpu
 * kernels, so that every kernel gives the ref kernel's result to the bit.
 * Everything here is integer arithmetic or a single f32 operation, so it
 * has one exact answer; the SIMD kernels compute the same expressions. */
#ifndef MGE_QUANT_MATH_H
#define MGE_QUANT_MATH_H

#include "mge.h"

#include <math.h>
#include <stdint.h>

/* A real multiplier 0 <= m < 1 as mult * 2^-(31 + shift): mult in
 * [2^30, 2^31) (0 when m is 0 or below 2^-62), 0 <= shift <= 31. */
typedef struct mge_qmul {
    int32_t mult;
    int32_t shift;
} mge_qmul;

/* 0 when m is not in [0, 1) (NaN included). */
static inline int mge_qmul_make(double m, mge_qmul *q)
{
    q->mult = 0;
    q->shift = 0;
    if (!(m >= 0) || !(m < 1))
        return 0;
    if (m == 0)
        return 1;
    int e;
    double f = frexp(m, &e); /* m = f * 2^e, f in [0.5, 1), e <= 0 */
    int64_t mult = llround(f * 2147483648.0);
    if (mult == 2147483648LL) { /* f rounded up to 1 */
        mult = 1LL << 30;
        e++;
    }
    int shift = -e;
    if (shift < 0) { /* m within 2^-32 of 1 */
        mult = 2147483647LL;
        shift = 0;
    }
    if (shift > 31) { /* tiny m: give up low bits of mult, keep shift in range */
        int drop = shift - 31;
        mult = drop >= 31 ? 0 : (mult + (1LL << (drop - 1))) >> drop;
        shift = 31;
    }
    q->mult = (int32_t)mult;
    q->shift = shift;
    return 1;
}

/* t / 2^s rounded half up (s in [0, 31]), with no overflow:
 * floor(t / 2^s) plus the bit below the cut. */
static inline int32_t mge_q_rshift(int32_t t, int s)
{
    return s ? (t >> s) + ((t >> (s - 1)) & 1) : t;
}

/* round(acc * m): first (acc * mult + 2^30) >> 31 (round half up; fits in
 * int32 since mult < 2^31), then mge_q_rshift by shift. */
static inline int32_t mge_qmul_apply(int32_t acc, mge_qmul q)
{
    int64_t p = (int64_t)acc * q.mult + (1LL << 30);
    int32_t t = (int32_t)(p >> 31);
    return mge_q_rshift(t, q.shift);
}

/* qadd's multipliers Ma = x_scale / y_scale and Mb = x2_scale / y_scale as
 * integers ma, mb over one shift: the largest shift in [0, 31] with both
 * below 2^22, so (a - za) * ma + (b - zb) * mb (|a - za| <= 255) fits in
 * int32. 0 when a multiplier is negative, not finite, or 2^22 or more. */
typedef struct mge_qadd {
    int32_t ma, mb;
    int32_t shift;
} mge_qadd;

static inline int mge_qadd_make(double ma, double mb, mge_qadd *q)
{
    q->ma = q->mb = 0;
    q->shift = 0;
    if (!(ma >= 0) || !(mb >= 0) || !(ma < 4194304.0) || !(mb < 4194304.0))
        return 0;
    double mx = ma > mb ? ma : mb;
    int s = 31;
    while (s > 0 && llround(mx * ldexp(1.0, s)) >= (1LL << 22))
        s--;
    if (llround(mx * ldexp(1.0, s)) >= (1LL << 22))
        return 0;
    q->ma = (int32_t)llround(ma * ldexp(1.0, s));
    q->mb = (int32_t)llround(mb * ldexp(1.0, s));
    q->shift = s;
    return 1;
}

static inline int32_t mge_qadd_apply(int32_t a, int32_t b, const mge_qadd *q)
{
    return mge_q_rshift(a * q->ma + b * q->mb, q->shift);
}

/* Output clamp of act (-1 none, MGE_OP_RELU or MGE_OP_RELU6; anything else
 * is rejected by shape inference) for an output at y_scale, y_zero. */
static inline void mge_q_act_bounds(int64_t act, double y_scale, int32_t y_zero, int32_t *lo, int32_t *hi)
{
    *lo = -128;
    *hi = 127;
    if (act == MGE_OP_RELU || act == MGE_OP_RELU6)
        *lo = y_zero > -128 ? y_zero : -128;
    if (act == MGE_OP_RELU6) {
        double h = (double)y_zero + nearbyint(6.0 / y_scale);
        *hi = h < 127 ? (int32_t)h : 127;
        if (*hi < *lo)
            *hi = *lo;
    }
}

static inline int32_t mge_q_clamp(int32_t v, int32_t lo, int32_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* quantize: x * inv (inv = 1.0f / (float)scale) clamped to the float bounds
 * [-128 - zero, 127 - zero] (NaN becomes the lower one: maxps does the same),
 * rounded to nearest even (cvtps2dq), plus zero. */
static inline int8_t mge_q_quantize(float x, float inv, int32_t zero)
{
    float lo = (float)(-128 - zero), hi = (float)(127 - zero);
    float v = x * inv;
    v = v > lo ? v : lo;
    v = v < hi ? v : hi;
    return (int8_t)((int32_t)rintf(v) + zero);
}

static inline float mge_q_dequantize(int8_t q, float scale, int32_t zero)
{
    return (float)((int32_t)q - zero) * scale;
}

/* s / d rounded half away from zero (d > 0): average pooling. */
static inline int32_t mge_q_div_round(int32_t s, int32_t d)
{
    return s >= 0 ? (s + d / 2) / d : -((-s + d / 2) / d);
}

#endif
