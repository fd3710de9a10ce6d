/* cpu_act.h — the fused epilogue of the fast kernels: y = act(y + r) over
 * a contiguous strip of an output block that is still in cache (r, the
 * residual, may be absent; act may be none). cpu_gemm.c runs it on each
 * sgemm / depthwise block of fused_conv2d and fused_linear; other kernel
 * files may share it.
 *
 * The expressions are the ones cpu_elemwise.c's unary loops use (and the
 * residual add is one float add, as the add kernel does), so a fused node
 * computes the same bits as its unfused chain of conv2d, add and the
 * activation on the same cpu kernels. Vectorized like cpu.h's hot loops:
 * an AVX2+FMA and a baseline copy, picked at run time; tanh and gelu call
 * libm (tanhf, erff), as the unary kernels do. */
#ifndef MGE_CPU_ACT_H
#define MGE_CPU_ACT_H

#include "cpu.h"

#include <math.h>

/* What runs after the layer on each output block. */
typedef struct cpu_epi {
    const float *res;   /* residual laid out like the output, or NULL */
    int act;            /* activation op (relu ... hsigmoid), or -1: none */
    float alpha;        /* leaky_relu's slope */
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
#define CPU_ACT_LOOP(EXPR)                       \
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

/* relu6(v + 3) for hswish and hsigmoid */
static inline CPU_BASE float cpu_act_hclip(float v)
{
    float t = v + 3.0f;
    return t < 0.0f ? 0.0f : t > 6.0f ? 6.0f : t;
}

#define CPU_ACT_BODY                                                               \
    {                                                                              \
        switch (op) {                                                              \
        case MGE_OP_RELU: CPU_ACT_LOOP(v < 0.0f ? 0.0f : v); break;                \
        case MGE_OP_RELU6: CPU_ACT_LOOP(v < 0.0f ? 0.0f : v > 6.0f ? 6.0f : v); break; \
        case MGE_OP_LEAKY_RELU: CPU_ACT_LOOP(v < 0.0f ? v * alpha : v); break;     \
        case MGE_OP_SIGMOID: CPU_ACT_LOOP(1.0f / (1.0f + cpu_expf(-v))); break;    \
        case MGE_OP_SILU: CPU_ACT_LOOP(v / (1.0f + cpu_expf(-v))); break;          \
        case MGE_OP_HSWISH: CPU_ACT_LOOP(v * cpu_act_hclip(v) * (1.0f / 6.0f)); break; \
        case MGE_OP_HSIGMOID: CPU_ACT_LOOP(cpu_act_hclip(v) * (1.0f / 6.0f)); break; \
        case MGE_OP_TANH: CPU_ACT_LOOP(tanhf(v)); break;                           \
        case MGE_OP_GELU: CPU_ACT_LOOP(0.5f * v * (1.0f + erff(v * 0.70710678118654752f))); break; \
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
