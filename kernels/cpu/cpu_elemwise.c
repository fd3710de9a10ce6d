/* cpu_elemwise.c — elementwise unary ops (the activation table), their
 * generic gradient unary_grad, prelu, isnan/isinf, and binary ops (f32).
 *
 * Loops are written so the compiler vectorizes them (cpu.h compiles each
 * twice, AVX2+FMA and baseline, picked at run time) and split over the pool
 * for large tensors. Binary ops cover the shapes networks use: same shape,
 * a scalar operand, and one operand that varies over a contiguous block of
 * the output's dims only (per channel [1,C,1,1], per row [W], ...); other
 * broadcasts go to the ref kernel. The output may alias the first input
 * (in place); the loops read element i before writing it, so that is safe. */
#include "cpu_act.h"

#include <math.h>
#include <string.h>

/* ---------------------------------------------------------------- unary */

/* The table ops (kernels/kact.h through cpu_act.h) and dropout outside
 * training (the identity), and unary_grad: dx = dy * f'(t), 0 where f'(t)
 * is 0 (a mask). Two forms of each loop: on AVX-512 cpu_act.h's blocks of
 * 16 (CPU_ACT_BLOCKS), on AVX2 and baseline the plain loop (their vector
 * and remainder code agree, and local blocks would cost them a trip
 * through memory). */
static inline __attribute__((always_inline)) float un_dmask(float d, float g)
{
    return d == 0.0f ? 0.0f : g * d;
}
#define UN_BODY                                                      \
    {                                                                \
        KACT_CPU_BEGIN(p);                                           \
        switch (op) {                                                \
            KACT_CPU_CASES                                           \
        default:   /* dropout outside training: the identity */      \
            if (y != x)                                              \
                memmove(y, x, sizeof(float) * (size_t)n);            \
            break;                                                   \
        }                                                            \
    }
#define UN_DBODY                         \
    {                                    \
        KACT_CPU_BEGIN(p);               \
        switch (op) {                    \
            KACT_CPU_DCASES              \
        default:                         \
            break;                       \
        }                                \
    }
#define UN_PARAMS (int op, const kact_par *p, const float *x, float *y, int64_t n)
#define UN_DPARAMS (int op, const kact_par *p, const float *dy, const float *tt, float *dx, int64_t n)

#if CPU_SPLIT_AVX512
#define KACT_LOOP(EXPR) CPU_ACT_BLOCKS(x, y, EXPR)
#define KACT_DLOOP(EXPR) CPU_ACT_BLOCKS2(tt, dy, dx, un_dmask(EXPR, g))
static CPU_AVX512 void un_loop_avx512 UN_PARAMS UN_BODY
static CPU_AVX512 void un_dloop_avx512 UN_DPARAMS UN_DBODY
#undef KACT_LOOP
#undef KACT_DLOOP
#endif

#define KACT_LOOP(EXPR)                   \
    for (int64_t i = 0; i < n; i++) {     \
        float v = x[i];                   \
        y[i] = (EXPR);                    \
    }
#define KACT_DLOOP(EXPR)                                  \
    for (int64_t i = 0; i < n; i++) {                     \
        float t = tt[i], d = ((void)t, (EXPR));           \
        dx[i] = un_dmask(d, dy[i]);                       \
    }
CPU_MULTI(un_loop_v, UN_PARAMS, (op, p, x, y, n), UN_BODY)
CPU_MULTI(un_dloop_v, UN_DPARAMS, (op, p, dy, tt, dx, n), UN_DBODY)
#undef KACT_LOOP
#undef KACT_DLOOP
CPU_SPLIT3(un_loop, UN_PARAMS, (op, p, x, y, n))
CPU_SPLIT3(un_dloop, UN_DPARAMS, (op, p, dy, tt, dx, n))

typedef struct un_job {
    int op;
    kact_par p;
    const float *x, *t;
    float *y;
} un_job;

static void un_task(void *a, int64_t b, int64_t e, int thread)
{
    const un_job *j = a;
    un_loop(j->op, &j->p, j->x + b, j->y + b, e - b);
}

static void un_dtask(void *a, int64_t b, int64_t e, int thread)
{
    const un_job *j = a;
    un_dloop(j->op, &j->p, j->x + b, j->t + b, j->y + b, e - b);
}

static mge_status cpu_unary(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                            mge_error *err)
{
    if (n->op == MGE_OP_DROPOUT && ctx->training)
        return cpu_fallback(ctx, n, in, out, err);
    if (in[0]->dtype != MGE_F32 || out[0]->dtype != MGE_F32 || !mge_tensor_same_shape(in[0], out[0]))
        return cpu_fallback(ctx, n, in, out, err);   /* ref explains */
    un_job j = {n->op, kact_par_node(n, n->op), in[0]->data, NULL, out[0]->data};
    /* Transcendentals cost more per element: smaller chunks pay off. */
    int64_t grain = cpu_act_cheap(n->op) || n->op == MGE_OP_DROPOUT ? CPU_GRAIN : CPU_GRAIN / 8;
    cpu_parallel(ctx, mge_tensor_numel(out[0]), grain, un_task, &j);
    return MGE_OK;
}

/* unary_grad(dy, t): the derivative of the table op act; the output may be
 * dy's (or t's) buffer: element i is read before it is written. */
static mge_status cpu_unary_grad(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                 mge_tensor *const *out, mge_error *err)
{
    int op = (int)mge_node_int(n, MGE_KEY_act, -1);
    const mge_tensor *dy = in[0], *t = in[1], *dx = out[0];
    if (!kact_has(op) || dy->dtype != MGE_F32 || t->dtype != MGE_F32 || dx->dtype != MGE_F32 ||
        !mge_tensor_same_shape(dy, t) || !mge_tensor_same_shape(dy, dx))
        return cpu_fallback(ctx, n, in, out, err);
    un_job j = {op, kact_par_node(n, op), dy->data, t->data, dx->data};
    cpu_parallel(ctx, mge_tensor_numel(dx), cpu_act_cheap(op) ? CPU_GRAIN : CPU_GRAIN / 8, un_dtask, &j);
    return MGE_OK;
}

/* prelu(x, w): x < 0 ? w * x : x, one weight per plane (image, channel)
 * of `inner` elements; the product is one float multiply, as ref's
 * (rounded once) gives. */
CPU_MULTI(prelu_loop, (const float *x, float w, float *y, int64_t n), (x, w, y, n), {
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        y[i] = v < 0.0f ? w * v : v;
    }
})

typedef struct prelu_job {
    const float *x, *w;
    float *y;
    int64_t C, inner;
    int per;   /* one weight per channel (else w[0]) */
} prelu_job;

static void prelu_task(void *a, int64_t b, int64_t e, int thread)
{
    const prelu_job *j = a;
    for (int64_t p = b; p < e; p++)
        prelu_loop(j->x + p * j->inner, j->w[j->per ? p % j->C : 0], j->y + p * j->inner, j->inner);
}

static mge_status cpu_prelu(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                            mge_error *err)
{
    const mge_tensor *x = in[0], *w = in[1], *y = out[0];
    int64_t num = mge_tensor_numel(w), cnt = mge_tensor_numel(x);
    if (x->dtype != MGE_F32 || w->dtype != MGE_F32 || y->dtype != MGE_F32 || w->ndim != 1 ||
        !mge_tensor_same_shape(x, y) || !(num == 1 || (x->ndim >= 2 && x->dims[1] == num)) || cnt <= 0 ||
        y->data == w->data)
        return cpu_fallback(ctx, n, in, out, err);   /* ref explains (or has nothing to do) */
    prelu_job j = {x->data, w->data, y->data, x->ndim >= 2 ? x->dims[1] : 1, 1, num > 1};
    for (int d = 2; d < x->ndim; d++)
        j.inner *= x->dims[d];
    if (x->ndim < 2)
        j.inner = cnt;
    cpu_parallel(ctx, cnt / j.inner, 1 + CPU_GRAIN / j.inner, prelu_task, &j);
    return MGE_OK;
}

/* isnan, isinf: f32 -> bool */
CPU_MULTI(isclass_loop, (int inf, const float *x, uint8_t *y, int64_t n), (inf, x, y, n), {
    if (inf)
        for (int64_t i = 0; i < n; i++)
            y[i] = fabsf(x[i]) == __builtin_inff();
    else
        for (int64_t i = 0; i < n; i++)
            y[i] = x[i] != x[i];
})

typedef struct isclass_job {
    int inf;
    const float *x;
    uint8_t *y;
} isclass_job;

static void isclass_task(void *a, int64_t b, int64_t e, int thread)
{
    const isclass_job *j = a;
    isclass_loop(j->inf, j->x + b, j->y + b, e - b);
}

static mge_status cpu_isclass(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                              mge_error *err)
{
    if (in[0]->dtype != MGE_F32 || out[0]->dtype != MGE_BOOL || !mge_tensor_same_shape(in[0], out[0]))
        return cpu_fallback(ctx, n, in, out, err);
    isclass_job j = {n->op == MGE_OP_ISINF, in[0]->data, out[0]->data};
    cpu_parallel(ctx, mge_tensor_numel(out[0]), CPU_GRAIN, isclass_task, &j);
    return MGE_OK;
}

/* ---------------------------------------------------------------- binary */

/* kind: 0 y = a op b elementwise, 1 y = a op s, 2 y = s op b (s a scalar). */
#define BIN_CASE(OPID, EXPR)                              \
    case OPID:                                            \
        if (kind == 0)                                    \
            for (int64_t i = 0; i < n; i++) {             \
                float u = a[i], v = b[i];                 \
                y[i] = (EXPR);                            \
            }                                             \
        else if (kind == 1)                               \
            for (int64_t i = 0; i < n; i++) {             \
                float u = a[i], v = s;                    \
                y[i] = (EXPR);                            \
            }                                             \
        else                                              \
            for (int64_t i = 0; i < n; i++) {             \
                float u = s, v = b[i];                    \
                y[i] = (EXPR);                            \
            }                                             \
        break;

CPU_MULTI(bin_loop, (int op, int kind, const float *a, const float *b, float s, float *y, int64_t n),
          (op, kind, a, b, s, y, n), {
              switch (op) {
                  BIN_CASE(MGE_OP_ADD, u + v)
                  BIN_CASE(MGE_OP_SUB, u - v)
                  BIN_CASE(MGE_OP_MUL, u * v)
                  BIN_CASE(MGE_OP_DIV, u / v)
                  BIN_CASE(MGE_OP_MAXIMUM, u > v || u != u ? u : v)   /* NaN propagates */
                  BIN_CASE(MGE_OP_MINIMUM, u < v || u != u ? u : v)
                  BIN_CASE(MGE_OP_POW, powf(u, v))
              default:
                  break;
              }
          })

/* The output split into outer x mid x inner, where the small operand
 * (index `small`, or -1 when both have the output's shape) varies only along
 * mid. mid == 1 means a scalar operand. */
typedef struct bin_job {
    int op, small;
    const float *a, *b;
    float *y;
    int64_t mid, inner;
} bin_job;

/* Same shape or scalar: a range of output elements. */
static void bin_flat_task(void *p, int64_t s0, int64_t s1, int thread)
{
    const bin_job *j = p;
    if (j->small < 0)
        bin_loop(j->op, 0, j->a + s0, j->b + s0, 0.0f, j->y + s0, s1 - s0);
    else if (j->small == 1)
        bin_loop(j->op, 1, j->a + s0, NULL, j->b[0], j->y + s0, s1 - s0);
    else
        bin_loop(j->op, 2, NULL, j->b + s0, j->a[0], j->y + s0, s1 - s0);
}

/* inner > 1: a range of rows r = (outer, mid) of `inner` elements, each
 * combined with the small operand's element r % mid. */
static void bin_rows_task(void *p, int64_t r0, int64_t r1, int thread)
{
    const bin_job *j = p;
    int64_t w = j->inner;
    for (int64_t r = r0; r < r1; r++) {
        int64_t m = r % j->mid;
        if (j->small == 1)
            bin_loop(j->op, 1, j->a + r * w, NULL, j->b[m], j->y + r * w, w);
        else
            bin_loop(j->op, 2, NULL, j->b + r * w, j->a[m], j->y + r * w, w);
    }
}

/* inner == 1: a range of outer rows of `mid` elements, combined with the
 * whole small operand. */
static void bin_vec_task(void *p, int64_t r0, int64_t r1, int thread)
{
    const bin_job *j = p;
    int64_t w = j->mid;
    for (int64_t r = r0; r < r1; r++) {
        if (j->small == 1)
            bin_loop(j->op, 0, j->a + r * w, j->b, 0.0f, j->y + r * w, w);
        else
            bin_loop(j->op, 0, j->a, j->b + r * w, 0.0f, j->y + r * w, w);
    }
}

/* Fits the small operand t (padded to the output's rank) as outer x mid x
 * inner; 0 when it varies along non-adjacent dims or a dim it has differs. */
static int bin_split(const mge_tensor *t, const mge_tensor *y, int64_t *outer, int64_t *mid, int64_t *inner)
{
    int nd = y->ndim, off = y->ndim - t->ndim;
    if (off < 0)
        return 0;
    int lo = -1, hi = -1;
    for (int i = 0; i < nd; i++) {
        int64_t d = i < off ? 1 : t->dims[i - off];
        if (d != 1) {
            if (d != y->dims[i])
                return 0;
            if (lo < 0)
                lo = i;
            else if (hi != i - 1) {
                /* a gap of 1s inside: only fine if those output dims are 1 too */
                for (int k = hi + 1; k < i; k++)
                    if (y->dims[k] != 1)
                        return 0;
            }
            hi = i;
        }
    }
    int64_t o = 1, m = 1, in = 1;
    for (int i = 0; i < nd; i++) {
        if (lo < 0 || i < lo)
            o *= y->dims[i];
        else if (i <= hi)
            m *= y->dims[i];
        else
            in *= y->dims[i];
    }
    if (lo < 0) {   /* a scalar: everything is "outer"; report it as mid 1 */
        in = o;
        o = 1;
    }
    *outer = o, *mid = m, *inner = in;
    return 1;
}

static mge_status cpu_binary(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                             mge_error *err)
{
    const mge_tensor *a = in[0], *b = in[1], *y = out[0];
    int64_t ny = mge_tensor_numel(y), na = mge_tensor_numel(a), nb = mge_tensor_numel(b);
    /* The output aliasing b (only a may be reused in place) is left to ref. */
    if (ny == 0 || (y->data == b->data && b->data != a->data))
        return ny == 0 ? MGE_OK : cpu_fallback(ctx, n, in, out, err);
    bin_job j = {n->op, -1, a->data, b->data, y->data, 1, 1};
    int64_t grain = n->op == MGE_OP_POW ? CPU_GRAIN / 8 : CPU_GRAIN;
    if (na == ny && nb == ny) {
        if (y->data == b->data)   /* x op x in place on x: both operands alias y */
            return cpu_fallback(ctx, n, in, out, err);
        cpu_parallel(ctx, ny, grain, bin_flat_task, &j);
        return MGE_OK;
    }
    const mge_tensor *full = na == ny ? a : b, *small = na == ny ? b : a;
    if (mge_tensor_numel(full) != ny || !mge_tensor_same_shape(full, y))
        return cpu_fallback(ctx, n, in, out, err);
    int64_t outer, mid, inner;
    if (!bin_split(small, y, &outer, &mid, &inner))
        return cpu_fallback(ctx, n, in, out, err);
    if (y->data == small->data)
        return cpu_fallback(ctx, n, in, out, err);
    j.small = small == b ? 1 : 2;
    j.mid = mid, j.inner = inner;
    if (mid == 1)
        cpu_parallel(ctx, ny, grain, bin_flat_task, &j);
    else if (inner > 1)
        cpu_parallel(ctx, outer * mid, inner >= grain ? 1 : grain / inner, bin_rows_task, &j);
    else
        cpu_parallel(ctx, outer, mid >= grain ? 1 : grain / mid, bin_vec_task, &j);
    return MGE_OK;
}

void mge_cpu_register_elemwise(mge_backend *b)
{
    cpu_isa_avx2();   /* decided once, before any kernel runs on pool threads */
#define UN_REG_(ID, F, W, D) b->k[MGE_OP_##ID][MGE_F32] = (mge_kernel){.run = cpu_unary, .ws = cpu_ref_ws};
    KACT_LIST(UN_REG_)
#undef UN_REG_
    b->k[MGE_OP_DROPOUT][MGE_F32] = (mge_kernel){.run = cpu_unary, .ws = cpu_ref_ws};
    b->k[MGE_OP_UNARY_GRAD][MGE_F32] = (mge_kernel){.run = cpu_unary_grad, .ws = cpu_ref_ws};
    b->k[MGE_OP_PRELU][MGE_F32] = (mge_kernel){.run = cpu_prelu, .ws = cpu_ref_ws};
    b->k[MGE_OP_ISNAN][MGE_F32] = (mge_kernel){.run = cpu_isclass, .ws = cpu_ref_ws};
    b->k[MGE_OP_ISINF][MGE_F32] = (mge_kernel){.run = cpu_isclass, .ws = cpu_ref_ws};
    static const int bi[] = {MGE_OP_ADD, MGE_OP_SUB, MGE_OP_MUL, MGE_OP_DIV,
                             MGE_OP_POW, MGE_OP_MAXIMUM, MGE_OP_MINIMUM};
    for (size_t i = 0; i < sizeof bi / sizeof bi[0]; i++)
        b->k[bi[i]][MGE_F32] = (mge_kernel){.run = cpu_binary, .ws = cpu_ref_ws};
}
