/* cpu_act.h — the activation table (kernels/kact.h) in float for the cpu
 * kernels, and the fused epilogue of the fast kernels: y = act(y + r) over
 * a contiguous strip of an output block that is still in cache (r, the
 * residual, may be absent; act may be none). cpu_gemm.c runs it on each
 * sgemm / depthwise block of fused_conv2d and fused_linear; the blocked
 * and winograd kernels share it.
 *
 * Every cpu loop of a table op (the unary kernels, fused_elemwise, these
 * epilogues) expands the same table expressions with the names below,
 * and the residual add is one float add, as the add kernel does, so a
 * fused node computes the same bits as its unfused chain of conv2d, add
 * and the activation on the same cpu kernels. Vectorized like cpu.h's hot
 * loops: an AVX2+FMA and a baseline copy, picked at run time; exp and
 * expm1, erf and tanh are the branch-free approximations below (elu,
 * selu, mish, sigmoid, silu, gelu, tanh and erf vectorize); log1p, log,
 * sin, cos and the inverse and hyperbolic trigonometric functions call libm. */
#ifndef MGE_CPU_ACT_H
#define MGE_CPU_ACT_H

#include "cpu.h"
#include "kact.h"

#include <math.h>

/* expm1 for vectorized loops (elu, selu): the Taylor series to x^8 for
 * |x| < 0.5 (where exp(x) - 1 would cancel; truncation below 1e-8
 * relative), cpu_expf(x) - 1 elsewhere. Branch-free; keeps -0, NaN and
 * gives -1 at -inf. */
static inline CPU_BASE float cpu_expm1f(float x)
{
    float p = x * (1.0f + x * (0.5f + x * (1.0f / 6 + x * (1.0f / 24 + x * (1.0f / 120 + x * (1.0f / 720 +
              x * (1.0f / 5040 + x * (1.0f / 40320))))))));
    float e = cpu_expf(x) - 1.0f;
    return fabsf(x) < 0.5f ? p : e;
}

/* erf for vectorized loops (gelu, gelu_grad, erf): x P(x^2) for |x| < 1,
 * else 1 - exp(-x^2) Q(1 / (1 + |x|/2)) with the sign put back (least-
 * squares fits in double: 4e-8 and 4e-11 absolute; past |x| = 3.92 erf is
 * 1 in float, so |x| is clamped at 4 to keep every lane finite). Max error
 * against libm's double erf: test_act_approx. Branch-free; keeps -0 and
 * NaN, gives +-1 at +-inf. */
static inline CPU_BASE float cpu_erff(float x)
{
    float a = fabsf(x), s = x * x;
    float p = x * (1.12837915f + s * (-0.376124147f + s * (0.112807889f + s * (-0.0267269875f +
              s * (0.00493451669f + s * -0.000569670552f)))));
    float z = a < 4.0f ? a : 4.0f;
    float t = 1.0f / (1.0f + 0.5f * z);
    float q = 0.00183919502f + t * (0.259557286f + t * (0.397292168f + t * (-0.0652959766f +
              t * (0.637389837f + t * -0.231042242f))));
    float r = 1.0f - cpu_expf(-z * z) * q;
    r = x < 0.0f ? -r : r;
    r = a < 1.0f ? p : r;
    return x != x ? x : r;
}

/* tanh for vectorized loops (tanh, the RNN gates, mish's derivative):
 * x + x^3 P(x^2) for |x| < 0.625 (a least-squares fit, 2e-10 relative),
 * else 1 - 2 / (exp(2|x|) + 1) with the sign put back; |x| is clamped at
 * 10, where tanh is already 1 in float. Exact sign, saturates to +-1,
 * keeps -0 and NaN. */
static inline CPU_BASE float cpu_tanhf(float x)
{
    float a = fabsf(x), s = x * x;
    float p = x + x * s * (-0.333332852f + s * (0.133315127f + s * (-0.0537446636f + s * (0.0206531408f +
              s * -0.00571897886f))));
    float z = a < 10.0f ? a : 10.0f;
    float r = 1.0f - 2.0f / (cpu_expf(2.0f * z) + 1.0f);
    r = x < 0.0f ? -r : r;
    r = a < 0.625f ? p : r;
    /* tanh(x) is x in float below 2^-12; this also keeps -0 (p gives +0) */
    r = a < 0x1p-12f ? x : r;
    return x != x ? x : r;
}

/* The AVX-512 form of the elementwise activation loops (cpu.h's
 * CPU_SPLIT3): n floats in blocks of 16 through local copies, the last
 * block zero-padded, so every element takes the same vector code whatever
 * its place (a plain loop compiled for AVX-512 peels and versions, and the
 * bits moved with the thread split and with in-place use).
 * CPU_ACT_BLOCKS(X, Y, EXPR): Y[i] = EXPR of v = X[i].
 * CPU_ACT_BLOCKS2(T, G, Y, EXPR): Y[i] = EXPR of t = T[i] and g = G[i].
 * Both need n in scope and <string.h>. */
#define CPU_ACT_LOAD16_(dst, src, m)                                 \
    do {                                                             \
        if ((m) == 16)                                               \
            memcpy(dst, src, 16 * sizeof(float));                    \
        else                                                         \
            memcpy(dst, src, sizeof(float) * (size_t)(m));           \
    } while (0)
#define CPU_ACT_BLOCKS(X, Y, EXPR)                                   \
    for (int64_t b_ = 0; b_ < n; b_ += 16) {                         \
        float xb_[16] = {0}, yb_[16];                                \
        int64_t m_ = n - b_ < 16 ? n - b_ : 16;                      \
        CPU_ACT_LOAD16_(xb_, (X) + b_, m_);                          \
        for (int k_ = 0; k_ < 16; k_++) {                            \
            float v = xb_[k_];                                       \
            yb_[k_] = (EXPR);                                        \
        }                                                            \
        CPU_ACT_LOAD16_((Y) + b_, yb_, m_);                          \
    }
#define CPU_ACT_BLOCKS2(T, G, Y, EXPR)                               \
    for (int64_t b_ = 0; b_ < n; b_ += 16) {                         \
        float tb_[16] = {0}, gb_[16] = {0}, yb_[16];                 \
        int64_t m_ = n - b_ < 16 ? n - b_ : 16;                      \
        CPU_ACT_LOAD16_(tb_, (T) + b_, m_);                          \
        CPU_ACT_LOAD16_(gb_, (G) + b_, m_);                          \
        for (int k_ = 0; k_ < 16; k_++) {                            \
            float t = tb_[k_], g = gb_[k_];                          \
            yb_[k_] = ((void)t, (void)g, (EXPR));                    \
        }                                                            \
        CPU_ACT_LOAD16_((Y) + b_, yb_, m_);                          \
    }

/* kact.h's names in float (the parameters from KACT_CPU_BEGIN's locals) */
#define KC(c) ((float)(c))
#define KEXP cpu_expf
#define KEXPM1 cpu_expm1f
#define KLOG logf
#define KLOG1P log1pf
#define KTANH cpu_tanhf
#define KERF cpu_erff
#define KSQRT sqrtf
#define KFABS fabsf
#define KFLOOR floorf
#define KCEIL ceilf
#define KRINT rintf /* the default rounding mode: half to even */
#define KSIN sinf
#define KCOS cosf
#define KACOS acosf
#define KACOSH acoshf
#define KASIN asinf
#define KASINH asinhf
#define KATAN atanf
#define KATANH atanhf
#define KCOSH coshf
#define KSINH sinhf
#define KLAMBD klambd_
#define KSHIFT kshift_
#define KA ka_
#define KB kb_
#define KTH kth_
#define KLO klo_
#define KHI khi_

/* The cost of a table op, for the grain of a parallel loop: 1 for the
 * compares and sign flips, else 0 (transcendentals, divisions). */
static inline int cpu_act_cheap(int op)
{
    switch (op) {
    case MGE_OP_RELU: case MGE_OP_RELU6: case MGE_OP_LEAKY_RELU: case MGE_OP_NEG: case MGE_OP_ABS:
    case MGE_OP_CLAMP: case MGE_OP_HARDTANH: case MGE_OP_SQUARE: case MGE_OP_SIGN: case MGE_OP_FLOOR:
    case MGE_OP_CEIL: case MGE_OP_ROUND:
        return 1;
    }
    return 0;
}

/* What runs after the layer on each output block. */
typedef struct cpu_epi {
    const float *res;   /* residual laid out like the output, or NULL */
    int act;            /* activation op (an ACT op), or -1: none */
    float alpha;        /* its alpha (leaky_relu, elu) */
} cpu_epi;

/* 1 when op is an activation the epilogue applies (fused_conv2d's act
 * but none). */
static inline int cpu_act_known(int op)
{
    return op != -1 && mge_fused_act_ok(op);
}

/* 1 when the epilogue does anything (plain conv2d/linear: nothing). */
static inline int cpu_epi_on(const cpu_epi *e)
{
    return e && (e->res || cpu_act_known(e->act));
}

/* The loop of one activation: v is y[i] (+ r[i]), EXPR its new value. */
#define KACT_LOOP(EXPR)                          \
    do {                                         \
        if (r)                                   \
            for (int64_t i = 0; i < n; i++) {    \
                float v = y[i] + r[i];           \
                y[i] = (EXPR);                   \
            }                                    \
        else                                     \
            for (int64_t i = 0; i < n; i++) {    \
                float v = y[i];                  \
                y[i] = (EXPR);                   \
            }                                    \
    } while (0)

#define CPU_ACT_BODY                                                               \
    {                                                                              \
        kact_par p_ = kact_par_default(op, alpha);                                 \
        KACT_CPU_BEGIN(&p_);                                                       \
        switch (op) {                                                              \
            KACT_CPU_CASES                                                         \
        default:                                                                   \
            if (r)                                                                 \
                for (int64_t i = 0; i < n; i++)                                    \
                    y[i] += r[i];                                                  \
            break;                                                                 \
        }                                                                          \
    }

static inline CPU_AVX2 void cpu_act_apply_avx2(int op, float alpha, float *restrict y, const float *restrict r,
                                               int64_t n) CPU_ACT_BODY
static inline CPU_BASE void cpu_act_apply_base(int op, float alpha, float *restrict y, const float *restrict r,
                                               int64_t n) CPU_ACT_BODY
#undef KACT_LOOP

/* y[i] = act(y[i] + r[i]) for i in [0, n); r may be NULL, op -1 (none). */
static inline void cpu_act_apply(int op, float alpha, float *y, const float *r, int64_t n)
{
    if (n <= 0 || (!r && !cpu_act_known(op)))
        return;
    if (cpu_isa_avx2()) {
        cpu_act_apply_avx2(op, alpha, y, r, n);
        CPU_VZEROUPPER();
    } else {
        cpu_act_apply_base(op, alpha, y, r, n);
    }
}

/* The epilogue on rows [0, rows) x columns [0, cols) of a block at y with
 * leading dimension ld; the residual is at the same offset from e->res as
 * the block from `base` (the start of the output). */
static inline void cpu_epi_block(const cpu_epi *e, const float *base, float *y, int64_t ld, int64_t rows,
                                 int64_t cols)
{
    if (!cpu_epi_on(e))
        return;
    const float *r = e->res ? e->res + (y - base) : NULL;
    for (int64_t i = 0; i < rows; i++)
        cpu_act_apply(e->act, e->alpha, y + i * ld, r ? r + i * ld : NULL, cols);
}

#endif
