/* kact.h — the activation table: one line per float unary op of ops.def
 * with the TABLE trait, giving its formula and its derivative once for
 * every kernel (ref in double, the cpu loops and fused epilogues in float).
 *
 * KACT_LIST(ROW) calls ROW(ID, F, WRT, D) for each op MGE_OP_##ID:
 *   F    the value at v (the input element),
 *   WRT  IN or OUT: whether D reads the forward input x or its output y,
 *   D    the derivative at t (that x or y); unary_grad computes dy * D,
 *        or 0 where D is 0 (a mask: NaN or inf in dy stays out, as
 *        PyTorch's where-style backward kernels give).
 * The expressions use only the names below, which each includer defines
 * for its arithmetic before expanding the table (kact_ref_* in double for
 * kernels/ref, kact_cpu_* in float for kernels/cpu, see the bottom):
 *   KC(c)      the constant c in the working type
 *   KEXP KEXPM1 KLOG KLOG1P KTANH KERF KSQRT KFABS KFLOOR KCEIL KRINT KSIN KCOS
 *   KACOS KACOSH KASIN KASINH KATAN KATANH KCOSH KSINH
 *   KA KB KTH KLO KHI   the parameters: alpha, beta, threshold, min, max
 *   KLAMBD KSHIFT       shrink's lambd and shift (ONNX Shrink's bias)
 * No commas inside an expression (they are macro arguments); no function
 * of two arguments. Every expression is branch-free, so the cpu loops
 * vectorize (the libm calls stay scalar: log1p, log, sin, cos; exp,
 * expm1, tanh and erf are cpu_act.h's polynomials). The cpu expressions of the older
 * activations are the exact ones their loops had, so results keep their
 * bits and speed.
 *
 * A new activation: an ops.def line (TABLE, and ACT if the fused layers
 * may apply it), a line here, a line in op_unary.c's dtype rule if it
 * takes integers, and its entry in the man page and the tests. */
#ifndef MGE_KACT_H
#define MGE_KACT_H

#include "mge.h"

#include <math.h>

/* The parameters a table op may read (absent ones: the defaults of
 * kact_par_default). */
typedef struct kact_par {
    double alpha, beta, thr, lo, hi;
    double lambd, shift;
} kact_par;

static inline kact_par kact_par_default(int op, double alpha)
{
    kact_par p = {alpha, 1.0, 20.0, -INFINITY, INFINITY, 0.5, 0.0};
    if (op == MGE_OP_HARDTANH)
        p.lo = -1.0, p.hi = 1.0;
    return p;
}

/* The parameters of node n (a table op, or unary_grad with act = op). */
static inline kact_par kact_par_node(const mge_node *n, int op)
{
    kact_par p = kact_par_default(op, mge_node_float(n, MGE_KEY_alpha, op == MGE_OP_ELU ? 1.0 : 0.01));
    p.beta = mge_node_float(n, MGE_KEY_beta, p.beta);
    p.thr = mge_node_float(n, MGE_KEY_threshold, p.thr);
    p.lo = mge_node_float(n, MGE_KEY_min, p.lo);
    p.hi = mge_node_float(n, MGE_KEY_max, p.hi);
    p.lambd = mge_node_float(n, MGE_KEY_lambd, p.lambd);
    p.shift = mge_node_float(n, MGE_KEY_shift, p.shift);
    return p;
}

/* helpers built from the names above */
#define KRELU6(v) ((v) < KC(0) ? KC(0) : (v) > KC(6) ? KC(6) : (v))
#define KHCLIP(v) KRELU6((v) + KC(3))
#define KSIGM(v) (KC(1) / (KC(1) + KEXP(-(v))))
#define KSOFTPLUS(v) KLOG1P(KEXP(v))
/* mish without tanh and log1p: tanh(log(1 + e)) = n / (n + 2) with
 * n = e (e + 2), e = exp(v) (exact algebra; vectorizes with exp alone);
 * past 20 tanh(softplus(v)) is 1 in float and n would overflow */
#define KMISHN(v) (KEXP(v) * (KEXP(v) + KC(2)))
#define KSELU_S 1.0507009873554804934193349852946
#define KSELU_SA 1.7580993408473768599402175208123 /* scale * alpha */

#define KACT_LIST(ROW)                                                                                           \
    ROW(RELU, v < KC(0) ? KC(0) : v, OUT, t > KC(0) ? KC(1) : KC(0))                                               \
    ROW(RELU6, KRELU6(v), OUT, t > KC(0) && t < KC(6) ? KC(1) : KC(0))                                             \
    ROW(LEAKY_RELU, v < KC(0) ? v * KA : v, IN, t > KC(0) ? KC(1) : KA)                                           \
    ROW(SIGMOID, KC(1) / (KC(1) + KEXP(-v)), OUT, t * (KC(1) - t))                                                 \
    ROW(TANH, KTANH(v), OUT, KC(1) - t * t)                                                                        \
    ROW(GELU, KC(0.5) * v * (KC(1) + KERF(v * KC(0.70710678118654752))), IN,                                      \
      KC(0.5) * (KC(1) + KERF(t * KC(0.70710678118654752))) + t * KEXP(KC(-0.5) * t * t) * KC(0.3989422804014327)) \
    ROW(SILU, v / (KC(1) + KEXP(-v)), IN, KSIGM(t) * (KC(1) + t * (KC(1) - KSIGM(t))))                            \
    ROW(HSWISH, v * KHCLIP(v) * (KC(1) / KC(6)), IN, t < KC(-3) ? KC(0) : t <= KC(3) ? t / KC(3) + KC(0.5) : KC(1)) \
    ROW(HSIGMOID, KHCLIP(v) * (KC(1) / KC(6)), IN, t > KC(-3) && t < KC(3) ? KC(1) / KC(6) : KC(0))               \
    ROW(EXP, KEXP(v), OUT, t)                                                                                      \
    ROW(LOG, KLOG(v), IN, KC(1) / t)                                                                              \
    ROW(SQRT, KSQRT(v), OUT, KC(0.5) / t)                                                                          \
    ROW(NEG, -v, IN, KC(-1))                                                                                      \
    ROW(ABS, KFABS(v), IN, t > KC(0) ? KC(1) : t < KC(0) ? KC(-1) : KC(0))                                        \
    ROW(CLAMP, KCLAMP(v), IN, t >= KLO && t <= KHI ? KC(1) : KC(0))                                               \
    ROW(HARDTANH, KCLAMP(v), IN, t > KLO && t < KHI ? KC(1) : KC(0))                                              \
    ROW(SOFTPLUS, v * KB > KTH ? v : KLOG1P(KEXP(v * KB)) / KB, IN,                                               \
      t * KB > KTH ? KC(1) : KEXP(t * KB) / (KEXP(t * KB) + KC(1)))                                            \
    ROW(ELU, v > KC(0) ? v : KA * KEXPM1(v), IN, t <= KC(0) ? KA * KEXP(t) : KC(1))                               \
    ROW(SELU, v > KC(0) ? KC(KSELU_S) * v : KC(KSELU_SA) * KEXPM1(v), IN,                                         \
      t <= KC(0) ? KC(KSELU_SA) * KEXP(t) : KC(KSELU_S))                                                       \
    ROW(MISH, v > KC(20) ? v : v * KMISHN(v) / (KMISHN(v) + KC(2)), IN,                                          \
      KTANH(KSOFTPLUS(t)) + t * KSIGM(t) * (KC(1) - KTANH(KSOFTPLUS(t)) * KTANH(KSOFTPLUS(t))))                \
    ROW(SOFTSIGN, v / (KC(1) + KFABS(v)), IN, KC(1) / ((KC(1) + KFABS(t)) * (KC(1) + KFABS(t))))                  \
    ROW(ERF, KERF(v), IN, KC(1.1283791670955126) * KEXP(-t * t))                                                  \
    ROW(RSQRT, KC(1) / KSQRT(v), IN, KC(-0.5) / (t * KSQRT(t)))                                                   \
    ROW(RECIPROCAL, KC(1) / v, IN, KC(-1) / (t * t))                                                              \
    ROW(SQUARE, v * v, IN, KC(2) * t)                                                                             \
    ROW(SIN, KSIN(v), IN, KCOS(t))                                                                                \
    ROW(COS, KCOS(v), IN, -KSIN(t))                                                                               \
    ROW(FLOOR, KFLOOR(v), IN, KC(0))                                                                              \
    ROW(CEIL, KCEIL(v), IN, KC(0))                                                                                \
    ROW(ROUND, KRINT(v), IN, KC(0))                                                                               \
    ROW(SIGN, v > KC(0) ? KC(1) : v < KC(0) ? KC(-1) : KC(0), IN, KC(0))                                          \
    ROW(ACOS, KACOS(v), IN, KC(-1) / KSQRT((KC(1) - t) * (KC(1) + t)))                                                  \
    ROW(ACOSH, KACOSH(v), IN, KC(1) / KSQRT((t - KC(1)) * (t + KC(1))))                                                 \
    ROW(ASIN, KASIN(v), IN, KC(1) / KSQRT((KC(1) - t) * (KC(1) + t)))                                                   \
    ROW(ASINH, KASINH(v), IN, KC(1) / KSQRT(t * t + KC(1)))                                                       \
    ROW(ATAN, KATAN(v), IN, KC(1) / (KC(1) + t * t))                                                              \
    ROW(ATANH, KATANH(v), IN, KC(1) / ((KC(1) - t) * (KC(1) + t)))                                                      \
    ROW(COSH, KCOSH(v), IN, KSINH(t))                                                                             \
    ROW(SINH, KSINH(v), IN, KCOSH(t))                                                                             \
    ROW(SHRINK, v < -KLAMBD ? v + KSHIFT : v > KLAMBD ? v - KSHIFT : KC(0), IN,                                   \
      t < -KLAMBD || t > KLAMBD ? KC(1) : KC(0))

/* min(max(v, lo), hi) with NaN kept: lo > hi gives hi (torch.clamp) */
#define KCLAMP(v) ((v) < KLO ? (KLO > KHI ? KHI : KLO) : (v) > KHI ? KHI : (v))

/* 1 when op is a table op; and whether its derivative reads y. */
#define KACT_IS_(ID, F, W, D) case MGE_OP_##ID:
static inline int kact_has(int64_t op)
{
    switch (op) {
        KACT_LIST(KACT_IS_)
        return 1;
    }
    return 0;
}
#define KACT_WRT_(ID, F, W, D) case MGE_OP_##ID: return KACT_WRT_##W;
#define KACT_WRT_IN 0
#define KACT_WRT_OUT 1
static inline int kact_wrt_y(int64_t op)
{
    switch (op) {
        KACT_LIST(KACT_WRT_)
    }
    return 0;
}

/* The double arithmetic (kernels/ref, and lib/ where it folds known
 * values): f(v) and f'(t). The names are undefined again after them. */
static inline double kact_ref_f(int op, double v, const kact_par *p)
{
#define KC(c) ((double)(c))
#define KEXP exp
#define KEXPM1 expm1
#define KLOG log
#define KLOG1P log1p
#define KTANH tanh
#define KERF erf
#define KSQRT sqrt
#define KFABS fabs
#define KFLOOR floor
#define KCEIL ceil
#define KRINT nearbyint
#define KSIN sin
#define KCOS cos
#define KACOS acos
#define KACOSH acosh
#define KASIN asin
#define KASINH asinh
#define KATAN atan
#define KATANH atanh
#define KCOSH cosh
#define KSINH sinh
#define KLAMBD (p->lambd)
#define KSHIFT (p->shift)
#define KA (p->alpha)
#define KB (p->beta)
#define KTH (p->thr)
#define KLO (p->lo)
#define KHI (p->hi)
#define KACT_F_(ID, F, W, D) case MGE_OP_##ID: return (F);
    switch (op) {
        KACT_LIST(KACT_F_)
    }
    return NAN;
}

static inline double kact_ref_d(int op, double t, const kact_par *p)
{
#define KACT_D_(ID, F, W, D) case MGE_OP_##ID: return (D);
    switch (op) {
        KACT_LIST(KACT_D_)
    }
    return NAN;
}
#undef KC
#undef KEXP
#undef KEXPM1
#undef KLOG
#undef KLOG1P
#undef KTANH
#undef KERF
#undef KSQRT
#undef KFABS
#undef KFLOOR
#undef KCEIL
#undef KRINT
#undef KSIN
#undef KCOS
#undef KACOS
#undef KACOSH
#undef KASIN
#undef KASINH
#undef KATAN
#undef KATANH
#undef KCOSH
#undef KSINH
#undef KLAMBD
#undef KSHIFT
#undef KA
#undef KB
#undef KTH
#undef KLO
#undef KHI

/* The float arithmetic of the cpu loops (kernels/cpu/cpu_act.h defines
 * the names): KACT_CPU_BEGIN(p) inside a function reads the parameters
 * into locals once; then, in a switch on the op, KACT_CPU_CASES expands
 * KACT_LOOP(EXPR) for every op (the file defines it: its loop over the
 * elements, EXPR the new value of the element named v) and
 * KACT_CPU_DCASES expands KACT_DLOOP(EXPR) with the derivative at t. */
#define KACT_CPU_BEGIN(p)                                                                                      \
    const float ka_ = (float)(p)->alpha, kb_ = (float)(p)->beta, kth_ = (float)(p)->thr,                       \
                klo_ = (float)(p)->lo, khi_ = (float)(p)->hi, klambd_ = (float)(p)->lambd,                     \
                kshift_ = (float)(p)->shift;                                                                   \
    (void)ka_, (void)kb_, (void)kth_, (void)klo_, (void)khi_, (void)klambd_, (void)kshift_

#define KACT_CPU_CASE_(ID, F, W, D) case MGE_OP_##ID: KACT_LOOP(F); break;
#define KACT_CPU_CASES KACT_LIST(KACT_CPU_CASE_)
#define KACT_CPU_DCASE_(ID, F, W, D) case MGE_OP_##ID: KACT_DLOOP(D); break;
#define KACT_CPU_DCASES KACT_LIST(KACT_CPU_DCASE_)

#endif
