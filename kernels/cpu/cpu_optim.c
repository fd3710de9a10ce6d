/* cpu_optim.c — fast kernels of the optimizer ops (f32 tensors).
 *
 * The same arithmetic as kernels/ref/ref_optim.c, expression for
 * expression (double per element, one rounding per stored tensor), in loops
 * the compiler vectorizes, so cpu and ref give the same bits: IEEE double
 * +, -, *, / and sqrt round the same in vector and scalar code, as long as
 * nothing is contracted into an FMA, which this file forbids (the hot loops
 * get their own compile options, without cpu.h's fp-contract=fast).
 *
 * Work is split into the fixed blocks of OPTIM_BLOCK elements that ref uses
 * for its sums of squares: one pool task per block, block partial sums in a
 * workspace, added in block order by the caller, so every thread count
 * gives the same bits too. Anything unusual (a non-f32 input, a bad hyper)
 * goes to the ref kernel, which reports it. */
#include "cpu.h"

#include <math.h>

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

/* The same partition and lane order as ref_optim.c. */
#define OPTIM_BLOCK 8192
/* Elements updated before their squared differences go into the lanes:
 * a multiple of 8, so the lane of an element is its offset in the block mod 8. */
#define OPTIM_SUB 256

#if CPU_X86 && !defined(__clang__)
#define OPT_OPTS "O3", "tree-vectorize", "no-trapping-math", "no-math-errno", "fp-contract=off"
#define OPT_AVX2 __attribute__((target("avx2,fma"), optimize(OPT_OPTS)))
#define OPT_BASE __attribute__((optimize(OPT_OPTS)))
#else
#define OPT_AVX2 CPU_AVX2
#define OPT_BASE CPU_BASE
#endif

#define OPT_MULTI(name, params, args, ...) CPU_MULTI_AS(OPT_AVX2, OPT_BASE, name, params, args, __VA_ARGS__)

static inline __attribute__((always_inline)) double lanes_sum(const double *a)
{
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

/* acc[k] += d2[j] for j % 8 == k, j in [0, m). */
#define LANES_ADD(acc, d2, m)                              \
    do {                                                   \
        int64_t c_ = 0;                                    \
        for (; c_ + 8 <= (m); c_ += 8)                     \
            for (int k_ = 0; k_ < 8; k_++)                 \
                (acc)[k_] += (d2)[c_ + k_];                \
        for (int k_ = 0; c_ + k_ < (m); k_++)              \
            (acc)[k_] += (d2)[c_ + k_];                    \
    } while (0)

/* ---------------------------------------------------------------- sgd */

typedef struct sgd_args {
    float *p, *buf;
    const float *g;
    double lr, sc, wd, mom, c1;
    int nesterov, first;
} sgd_args;

OPT_MULTI(sgd_block, (const sgd_args *a, int64_t b0, int64_t len, double *part), (a, b0, len, part), {
    float *restrict p = a->p + b0;
    float *restrict buf = a->buf ? a->buf + b0 : NULL;
    const float *restrict g = a->g + b0;
    const double lr = a->lr, sc = a->sc, wd = a->wd, mom = a->mom, c1 = a->c1;
    const int nesterov = a->nesterov, first = a->first, hasmom = mom != 0, haswd = wd != 0;
    double acc[8] = {0}, d2[OPTIM_SUB];
    for (int64_t s0 = 0; s0 < len; s0 += OPTIM_SUB) {
        int64_t m = len - s0 < OPTIM_SUB ? len - s0 : OPTIM_SUB;
        float *restrict ps = p + s0;
        const float *restrict gs = g + s0;
        if (!hasmom) {
            for (int64_t j = 0; j < m; j++) {
                double pv = ps[j], gr = (double)gs[j] * sc;
                if (haswd)
                    gr = gr + wd * pv;
                float pn = (float)(pv - lr * gr);
                double d = (double)pn - pv;
                ps[j] = pn;
                d2[j] = d * d;
            }
        } else {
            float *restrict bs = buf + s0;
            for (int64_t j = 0; j < m; j++) {
                double pv = ps[j], gr = (double)gs[j] * sc;
                if (haswd)
                    gr = gr + wd * pv;
                float bf = (float)(first ? gr : mom * (double)bs[j] + c1 * gr);
                bs[j] = bf;
                gr = nesterov ? gr + mom * (double)bf : (double)bf;
                float pn = (float)(pv - lr * gr);
                double d = (double)pn - pv;
                ps[j] = pn;
                d2[j] = d * d;
            }
        }
        LANES_ADD(acc, d2, m);
    }
    *part = lanes_sum(acc);
})

/* ---------------------------------------------------------------- adam */

typedef struct adam_args {
    float *p, *m, *v;
    const float *g;
    double sc, wdg, decay, b1, b2, w1, c2, eps, bc2s, step_size;
} adam_args;

/* t[j] = sqrt(t[j]). GCC keeps sqrt() a libm call that may set errno
 * (so the loop around it does not vectorize) unless the whole file is built
 * with -fno-math-errno: the optimize attribute does not reach it. The
 * intrinsics are the same correctly rounded IEEE sqrt. */
#if CPU_X86
#include <immintrin.h>
static OPT_AVX2 void sqrt_avx2(double *t, int64_t n)
{
    int64_t j = 0;
    for (; j + 4 <= n; j += 4)
        _mm256_storeu_pd(t + j, _mm256_sqrt_pd(_mm256_loadu_pd(t + j)));
    for (; j < n; j++)
        t[j] = _mm_cvtsd_f64(_mm_sqrt_pd(_mm_set_sd(t[j])));
}

static OPT_BASE void sqrt_base(double *t, int64_t n)
{
    int64_t j = 0;
    for (; j + 2 <= n; j += 2)
        _mm_storeu_pd(t + j, _mm_sqrt_pd(_mm_loadu_pd(t + j)));
    for (; j < n; j++)
        t[j] = _mm_cvtsd_f64(_mm_sqrt_pd(_mm_set_sd(t[j])));
}

static void sqrt_arr(double *t, int64_t n)
{
    if (cpu_isa_avx2()) {
        sqrt_avx2(t, n);
        CPU_VZEROUPPER();
    } else {
        sqrt_base(t, n);
    }
}
#else
static void sqrt_arr(double *t, int64_t n)
{
    for (int64_t j = 0; j < n; j++)
        t[j] = sqrt(t[j]);
}
#endif

/* Three passes over each sub-block, so the two loops vectorize: moments
 * (with sqrt(v) staged in t), the square roots, then the param. */
OPT_MULTI(adam_block, (const adam_args *a, int64_t b0, int64_t len, double *part), (a, b0, len, part), {
    float *restrict p = a->p + b0, *restrict mm = a->m + b0, *restrict vv = a->v + b0;
    const float *restrict g = a->g + b0;
    const double sc = a->sc, wdg = a->wdg, decay = a->decay, b1 = a->b1, b2 = a->b2, w1 = a->w1, c2 = a->c2;
    const double eps = a->eps, bc2s = a->bc2s, step_size = a->step_size;
    const int haswd = wdg != 0, lerp_lo = w1 < 0.5;
    double acc[8] = {0}, t[OPTIM_SUB];
    for (int64_t s0 = 0; s0 < len; s0 += OPTIM_SUB) {
        int64_t n = len - s0 < OPTIM_SUB ? len - s0 : OPTIM_SUB;
        float *restrict ps = p + s0, *restrict ms = mm + s0, *restrict vs = vv + s0;
        const float *restrict gs = g + s0;
        for (int64_t j = 0; j < n; j++) {
            double p0 = ps[j], gr = (double)gs[j] * sc;
            if (haswd)
                gr = gr + wdg * p0;
            double mv = ms[j];
            float mf = (float)(lerp_lo ? mv + w1 * (gr - mv) : gr - (gr - mv) * b1);
            float vf = (float)(b2 * (double)vs[j] + c2 * (gr * gr));
            ms[j] = mf;
            vs[j] = vf;
            t[j] = (double)vf;
        }
        sqrt_arr(t, n);
        for (int64_t j = 0; j < n; j++) {
            double p0 = ps[j], pv = p0 * decay;
            double denom = t[j] / bc2s + eps;
            float pn = (float)(pv - step_size * ((double)ms[j] / denom));
            double d = (double)pn - p0;
            ps[j] = pn;
            t[j] = d * d;
        }
        LANES_ADD(acc, t, n);
    }
    *part = lanes_sum(acc);
})

/* ---------------------------------------------------------------- sumsq */

OPT_MULTI(sumsq_block, (const float *x, int64_t len, double *part), (x, len, part), {
    double acc[8] = {0};
    int64_t j = 0;
    for (; j + 8 <= len; j += 8)
        for (int k = 0; k < 8; k++) {
            double v = x[j + k];
            acc[k] += v * v;
        }
    for (int k = 0; j + k < len; k++) {
        double v = x[j + k];
        acc[k] += v * v;
    }
    *part = lanes_sum(acc);
})

/* ---------------------------------------------------------------- blocks over the pool */

typedef struct blk_job {
    int op;
    const void *args;        /* sgd_args or adam_args */
    mge_tensor *const *in;   /* sumsq inputs */
    int nin;
    const int64_t *first;    /* sumsq: first block of input k, k in [0, nin] */
    int64_t numel;           /* sgd/adam: param elements */
    double *part;            /* per block */
} blk_job;

static int64_t nblocks(int64_t numel)
{
    return (numel + OPTIM_BLOCK - 1) / OPTIM_BLOCK;
}

/* The partial sum of block t. */
static double blk_run(const blk_job *j, int64_t t)
{
    double part;
    if (j->op == MGE_OP_SUMSQ) {
        int k = 0;
        while (t >= j->first[k + 1])
            k++;
        int64_t b0 = (t - j->first[k]) * OPTIM_BLOCK, n = mge_tensor_numel(j->in[k]);
        sumsq_block((const float *)j->in[k]->data + b0, n - b0 < OPTIM_BLOCK ? n - b0 : OPTIM_BLOCK, &part);
        return part;
    }
    int64_t b0 = t * OPTIM_BLOCK, len = j->numel - b0 < OPTIM_BLOCK ? j->numel - b0 : OPTIM_BLOCK;
    if (j->op == MGE_OP_SGD)
        sgd_block(j->args, b0, len, &part);
    else
        adam_block(j->args, b0, len, &part);
    return part;
}

static void blk_task(void *arg, int64_t t, int thread)
{
    const blk_job *j = arg;
    j->part[t] = blk_run(j, t);
}

/* Runs every block and returns the sum of their partials, in block order.
 * Without room for the partials (or a pool) the caller runs the blocks in
 * order itself: the same sum. */
static double run_blocks(const mge_kctx *ctx, blk_job *j, int64_t nb)
{
    double total = 0;
    int threads = cpu_threads(ctx);
    if (threads > 1 && nb > 1 && ctx->ws && ctx->ws_size >= sizeof(double) * (size_t)nb) {
        j->part = ctx->ws;
        mge_pool_run(ctx->pool, nb, blk_task, j);
        for (int64_t t = 0; t < nb; t++)
            total += j->part[t];
        return total;
    }
    for (int64_t t = 0; t < nb; t++)
        total += blk_run(j, t);
    return total;
}

/* ---------------------------------------------------------------- kernels */

static int f32_like(const mge_tensor *t, const mge_tensor *p)
{
    return t->dtype == MGE_F32 && t->data && mge_tensor_same_shape(t, p);
}

/* hyper and scale as the ref kernel reads them; 0 when ref must report. */
static int fast_hyper(const mge_node *n, mge_tensor *const *in, int ih, double *lr, double *step, double *sc)
{
    const mge_tensor *h = in[ih];
    if (h->dtype != MGE_F32 || h->ndim != 1 || h->dims[0] != 2 || !h->data)
        return 0;
    *lr = ((const float *)h->data)[0];
    *step = ((const float *)h->data)[1];
    if (!(isfinite(*lr) && *lr >= 0) || !(*step >= 1 && *step <= 16777216.0 && *step == floor(*step)))
        return 0;
    *sc = 1.0;
    if (n->nin > ih + 1) {
        const mge_tensor *s = in[ih + 1];
        if (s->dtype != MGE_F32 || s->ndim != 0 || !s->data)
            return 0;
        *sc = ((const float *)s->data)[0];
    }
    return 1;
}

static mge_status cpu_sgd(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                          mge_error *err)
{
    sgd_args a;
    double step;
    a.mom = mge_node_float(n, MGE_KEY_momentum, 0);
    mge_tensor *p = in[0];
    int64_t numel = mge_tensor_numel(p);
    if (p->dtype != MGE_F32 || (numel && !p->data) || !f32_like(in[1], p) || (a.mom != 0 && !f32_like(in[2], p)) ||
        out[0]->dtype != MGE_F32 || out[0]->ndim != 0 || !out[0]->data || !fast_hyper(n, in, 3, &a.lr, &step, &a.sc))
        return cpu_fallback(ctx, n, in, out, err);
    a.p = p->data;
    a.buf = a.mom != 0 ? in[2]->data : NULL;
    a.g = in[1]->data;
    a.wd = mge_node_float(n, MGE_KEY_weight_decay, 0);
    a.c1 = 1 - mge_node_float(n, MGE_KEY_dampening, 0);
    a.nesterov = (int)mge_node_int(n, MGE_KEY_nesterov, 0);
    a.first = step == 1;
    blk_job j = {MGE_OP_SGD, &a, NULL, 0, NULL, numel, NULL};
    *(float *)out[0]->data = (float)run_blocks(ctx, &j, nblocks(numel));
    return MGE_OK;
}

static mge_status cpu_adam(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                           mge_error *err)
{
    adam_args a;
    double lr, step;
    mge_tensor *p = in[0];
    int64_t numel = mge_tensor_numel(p);
    if (p->dtype != MGE_F32 || (numel && !p->data) || !f32_like(in[1], p) || !f32_like(in[2], p) ||
        !f32_like(in[3], p) || out[0]->dtype != MGE_F32 || out[0]->ndim != 0 || !out[0]->data ||
        !fast_hyper(n, in, 4, &lr, &step, &a.sc))
        return cpu_fallback(ctx, n, in, out, err);
    /* the scalars exactly as ref_optim.c computes them */
    a.b1 = mge_node_float(n, MGE_KEY_beta1, 0.9);
    a.b2 = mge_node_float(n, MGE_KEY_beta2, 0.999);
    a.eps = mge_node_float(n, MGE_KEY_eps, 1e-8);
    double wd = mge_node_float(n, MGE_KEY_weight_decay, 0);
    int decoupled = (int)mge_node_int(n, MGE_KEY_decoupled, 0);
    a.decay = decoupled ? 1 - lr * wd : 1;
    a.wdg = decoupled ? 0 : wd;
    a.w1 = 1 - a.b1;
    a.c2 = 1 - a.b2;
    double bc1 = 1 - pow(a.b1, step);
    a.bc2s = sqrt(1 - pow(a.b2, step));
    a.step_size = lr / bc1;
    a.p = p->data;
    a.m = in[2]->data;
    a.v = in[3]->data;
    a.g = in[1]->data;
    blk_job j = {MGE_OP_ADAM, &a, NULL, 0, NULL, numel, NULL};
    *(float *)out[0]->data = (float)run_blocks(ctx, &j, nblocks(numel));
    return MGE_OK;
}

static mge_status cpu_sumsq(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                            mge_error *err)
{
    int64_t first[65];
    first[0] = 0;
    if (n->nin > 64 || out[0]->dtype != MGE_F32 || out[0]->ndim != 0 || !out[0]->data)
        return cpu_fallback(ctx, n, in, out, err);
    for (int k = 0; k < n->nin; k++) {
        int64_t numel = mge_tensor_numel(in[k]);
        if (in[k]->dtype != MGE_F32 || (numel && !in[k]->data))
            return cpu_fallback(ctx, n, in, out, err);
        first[k + 1] = first[k] + nblocks(numel);
    }
    blk_job j = {MGE_OP_SUMSQ, NULL, in, n->nin, first, 0, NULL};
    *(float *)out[0]->data = (float)run_blocks(ctx, &j, first[n->nin]);
    return MGE_OK;
}

/* One double per block, for the block partial sums. */
static size_t optim_ws(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, int threads)
{
    if (threads <= 1)
        return 0;
    int64_t nb = 0;
    int k1 = n->op == MGE_OP_SUMSQ ? n->nin : 1;
    for (int k = 0; k < k1; k++)
        nb += nblocks(mge_tensor_numel(in[k]));
    return nb > 1 ? sizeof(double) * (size_t)nb : 0;
}

void mge_cpu_register_optim(mge_backend *b)
{
    cpu_isa_avx2();   /* decided once, before any kernel runs on pool threads */
    b->k[MGE_OP_SGD][MGE_F32] = (mge_kernel){.run = cpu_sgd, .ws = optim_ws};
    b->k[MGE_OP_ADAM][MGE_F32] = (mge_kernel){.run = cpu_adam, .ws = optim_ws};
    b->k[MGE_OP_SUMSQ][MGE_F32] = (mge_kernel){.run = cpu_sumsq, .ws = optim_ws};
    /* clip_coef adds a handful of scalars: the ref kernel is the fast one */
}
