/* cpu_grad_norm.c — fast f32 batchnorm (forward in both modes, and
 * batchnorm_grad) and the sums behind bias gradients, on the pool.
 *
 * Determinism: every per-channel (or per-column) result is computed by one
 * task in a fixed order (planes in batch order, each plane's sum from 32
 * float lanes combined in a fixed tree, planes accumulated in double), so
 * the results do not depend on how many threads split the channels.
 *
 * batchnorm: eval mode folds the running statistics into one scale and
 * shift per channel, applied plane by plane;
 * training mode uses the batch mean and biased variance and updates the
 * running statistics exactly as the ref kernel (in double: momentum
 * blend, unbiased variance). Cases these kernels do not cover (non-f32
 * parameters, a reduction pattern other than per-channel or leading dims)
 * go to the ref kernels. */
#include "cpu.h"

#include <math.h>

/* ---------------------------------------------------------------- plane loops */

/* The reductions keep 32 float lanes (two AVX-512 or four AVX2
 * accumulators, so the adds do not wait on each other's latency: with one
 * 8-lane accumulator the batchnorm gradient ran at 6 GB/s from L2), folded
 * in a fixed tree, then the tail in order. */
static inline __attribute__((always_inline)) float fold32(const float *a)
{
    float h[8];
    for (int k = 0; k < 8; k++)
        h[k] = (a[k] + a[k + 16]) + (a[k + 8] + a[k + 24]);
    return ((h[0] + h[4]) + (h[1] + h[5])) + ((h[2] + h[6]) + (h[3] + h[7]));
}

CPU_MULTI3(plane_sum, (const float *x, int64_t n, float *out), (x, n, out), {
    float acc[32] = {0};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 32; k++)
            acc[k] += x[i + k];
    float s = fold32(acc);
    for (; i < n; i++)
        s += x[i];
    *out = s;
})

/* sum of (x - m)^2 */
CPU_MULTI3(plane_sqdev, (const float *x, int64_t n, float m, float *out), (x, n, m, out), {
    float acc[32] = {0};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 32; k++) {
            float d = x[i + k] - m;
            acc[k] += d * d;
        }
    float s = fold32(acc);
    for (; i < n; i++)
        s += (x[i] - m) * (x[i] - m);
    *out = s;
})

/* plane_sqdev's sum (the same operations in the same order), and the sums
 * of dy and of dy * (x - m), in one pass over x and dy */
CPU_MULTI3(plane_dysums,
           (const float *dy, const float *x, int64_t n, float m, float *sq, float *sdy, float *sdyx),
           (dy, x, n, m, sq, sdy, sdyx), {
               float q[32] = {0}, a[32] = {0}, b[32] = {0};
               int64_t i = 0;
               for (; i + 32 <= n; i += 32)
                   for (int k = 0; k < 32; k++) {
                       float d = x[i + k] - m;
                       q[k] += d * d;
                       a[k] += dy[i + k];
                       b[k] += dy[i + k] * d;
                   }
               float u = fold32(q), s = fold32(a), t = fold32(b);
               for (; i < n; i++) {
                   u += (x[i] - m) * (x[i] - m);
                   s += dy[i];
                   t += dy[i] * (x[i] - m);
               }
               *sq = u;
               *sdy = s;
               *sdyx = t;
           })

CPU_MULTI3(plane_affine, (const float *x, float *y, int64_t n, float sc, float sh), (x, y, n, sc, sh), {
    for (int64_t i = 0; i < n; i++)
        y[i] = x[i] * sc + sh;
})

/* dx = k1 * dy + k2 * x + k0 */
CPU_MULTI3(plane_dx, (const float *dy, const float *x, float *dx, int64_t n, float k1, float k2, float k0),
          (dy, x, dx, n, k1, k2, k0), {
              for (int64_t i = 0; i < n; i++)
                  dx[i] = k1 * dy[i] + k2 * x[i] + k0;
          })

/* Mean of channel c of x[N,C,S]. */
static double channel_mean(const float *x, int64_t N, int64_t C, int64_t S, int64_t c)
{
    double s = 0;
    for (int64_t i = 0; i < N; i++) {
        float p;
        plane_sum(x + (i * C + c) * S, S, &p);
        s += p;
    }
    return s / (double)(N * S);
}

/* Mean and biased sum of squared deviations of channel c of x[N,C,S]. */
static void channel_stats(const float *x, int64_t N, int64_t C, int64_t S, int64_t c, double *mean, double *sq)
{
    double m = channel_mean(x, N, C, S, c), q = 0;
    for (int64_t i = 0; i < N; i++) {
        float p;
        plane_sqdev(x + (i * C + c) * S, S, (float)m, &p);
        q += p;
    }
    *mean = m;
    *sq = q;
}

/* x[N,C,S...] as N, C, S; 0 when x has rank < 2. */
static int ncs(const mge_tensor *x, int64_t *N, int64_t *C, int64_t *S)
{
    if (x->ndim < 2)
        return 0;
    *N = x->dims[0], *C = x->dims[1], *S = 1;
    for (int i = 2; i < x->ndim; i++)
        *S *= x->dims[i];
    return 1;
}

/* Channels per task: about CPU_GRAIN elements. */
static int64_t chan_grain(int64_t N, int64_t S)
{
    int64_t per = N * S;
    return per >= CPU_GRAIN ? 1 : CPU_GRAIN / (per ? per : 1);
}

/* ---------------------------------------------------------------- batchnorm forward */

typedef struct bnf_job {
    const float *x, *w, *b;
    float *rm, *rv, *y;
    int64_t N, C, S;
    double eps, mom;
    int training;
} bnf_job;

static void bnf_train_task(void *a, int64_t c0, int64_t c1, int thread)
{
    const bnf_job *j = a;
    int64_t cnt = j->N * j->S;
    for (int64_t c = c0; c < c1; c++) {
        double mean, sq;
        channel_stats(j->x, j->N, j->C, j->S, c, &mean, &sq);
        double var = sq / (double)cnt;
        j->rm[c] = (float)((1 - j->mom) * (double)j->rm[c] + j->mom * mean);
        j->rv[c] = (float)((1 - j->mom) * (double)j->rv[c] + j->mom * sq / (double)(cnt - 1));
        double inv = 1.0 / sqrt(var + j->eps), sc = j->w[c] * inv, sh = j->b[c] - mean * sc;
        for (int64_t i = 0; i < j->N; i++) {
            int64_t off = (i * j->C + c) * j->S;
            plane_affine(j->x + off, j->y + off, j->S, (float)sc, (float)sh);
        }
    }
}

/* eval: one plane (n, c) per item */
static void bnf_eval_task(void *a, int64_t p0, int64_t p1, int thread)
{
    const bnf_job *j = a;
    for (int64_t p = p0; p < p1; p++) {
        int64_t c = p % j->C;
        double inv = 1.0 / sqrt((double)j->rv[c] + j->eps);
        double sc = j->w[c] * inv, sh = j->b[c] - j->rm[c] * sc;
        plane_affine(j->x + p * j->S, j->y + p * j->S, j->S, (float)sc, (float)sh);
    }
}

static int all_f32(mge_tensor *const *t, int n)
{
    for (int i = 0; i < n; i++)
        if (t[i]->dtype != MGE_F32)
            return 0;
    return 1;
}

static mge_status cpu_batchnorm_fwd(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                    mge_tensor *const *out, mge_error *err)
{
    int64_t N, C, S;
    const mge_tensor *x = in[0];
    mge_tensor *nbt = n->nin >= 6 ? in[5] : NULL;
    if (!ncs(x, &N, &C, &S) || !all_f32(in, 5) || out[0]->dtype != MGE_F32)
        return cpu_fallback(ctx, n, in, out, err);
    for (int i = 1; i < 5; i++)
        if (in[i]->ndim != 1 || in[i]->dims[0] != C)
            return cpu_fallback(ctx, n, in, out, err);
    /* the ref kernel reports these */
    if (ctx->training && (N * S < 2 || (nbt && (nbt->dtype != MGE_I64 || mge_tensor_numel(nbt) != 1))))
        return cpu_fallback(ctx, n, in, out, err);
    bnf_job j = {x->data, in[1]->data, in[2]->data, in[3]->data, in[4]->data, out[0]->data, N, C, S,
                 mge_node_float(n, MGE_KEY_eps, 1e-5), mge_node_float(n, MGE_KEY_momentum, 0.1), ctx->training};
    if (N * C * S == 0 && !ctx->training)
        return MGE_OK;
    if (ctx->training) {
        cpu_parallel(ctx, C, chan_grain(N, S), bnf_train_task, &j);
        if (nbt)
            ((int64_t *)nbt->data)[0] += 1;
    } else {
        cpu_parallel(ctx, N * C, S >= CPU_GRAIN ? 1 : CPU_GRAIN / (S ? S : 1), bnf_eval_task, &j);
    }
    return MGE_OK;
}

/* ---------------------------------------------------------------- batchnorm_grad */

typedef struct bng_job {
    const float *dy, *x, *w;
    float *dx, *dw, *db;
    int64_t N, C, S;
    double eps;
} bng_job;

static void bng_task(void *a, int64_t c0, int64_t c1, int thread)
{
    const bng_job *j = a;
    double M = (double)(j->N * j->S);
    for (int64_t c = c0; c < c1; c++) {
        /* the variance comes with the dy sums (one pass fewer over x),
         * computed as channel_stats computes it for the forward */
        double mean = channel_mean(j->x, j->N, j->C, j->S, c), sq = 0, sdy = 0, sdyx = 0;
        for (int64_t i = 0; i < j->N; i++) {
            float u, p, q;
            int64_t off = (i * j->C + c) * j->S;
            plane_dysums(j->dy + off, j->x + off, j->S, (float)mean, &u, &p, &q);
            sq += u;
            sdy += p;
            sdyx += q;
        }
        double inv = 1.0 / sqrt(sq / M + j->eps), dw = sdyx * inv, wi = j->w[c] * inv;
        j->dw[c] = (float)dw;
        j->db[c] = (float)sdy;
        /* dx = wi * (dy - sdy/M - (x - mean) * inv * dw/M) */
        double k2 = -wi * inv * dw / M, k0 = -wi * sdy / M - k2 * mean;
        for (int64_t i = 0; i < j->N; i++) {
            int64_t off = (i * j->C + c) * j->S;
            plane_dx(j->dy + off, j->x + off, j->dx + off, j->S, (float)wi, (float)k2, (float)k0);
        }
    }
}

static mge_status cpu_batchnorm_grad(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                     mge_tensor *const *out, mge_error *err)
{
    int64_t N, C, S;
    const mge_tensor *x = in[1];
    if (!ncs(x, &N, &C, &S) || !all_f32(in, 3) || !all_f32(out, 3) || N * S < 1 ||
        !mge_tensor_same_shape(in[0], x) || !mge_tensor_same_shape(out[0], x) || in[2]->ndim != 1 ||
        in[2]->dims[0] != C || mge_tensor_numel(out[1]) != C || mge_tensor_numel(out[2]) != C)
        return cpu_fallback(ctx, n, in, out, err);
    bng_job j = {in[0]->data, x->data, in[2]->data, out[0]->data, out[1]->data, out[2]->data, N, C, S,
                 mge_node_float(n, MGE_KEY_eps, 1e-5)};
    cpu_parallel(ctx, C, chan_grain(N, S), bng_task, &j);
    return MGE_OK;
}

/* ---------------------------------------------------------------- sum, mean */

/* Per-channel sums: x[N,C,S] reduced over N and S. */
typedef struct chs_job {
    const float *x;
    float *y;
    int64_t N, C, S;
    double scale;
} chs_job;

static void chs_task(void *a, int64_t c0, int64_t c1, int thread)
{
    const chs_job *j = a;
    for (int64_t c = c0; c < c1; c++) {
        double s = 0;
        for (int64_t i = 0; i < j->N; i++) {
            float p;
            plane_sum(j->x + (i * j->C + c) * j->S, j->S, &p);
            s += p;
        }
        j->y[c] = (float)(s * j->scale);
    }
}

/* Leading-dims sums: x[R,D] reduced over R, columns in blocks. */
#define COLS_BLOCK 256

CPU_MULTI(cols_acc, (const float *x, int64_t R, int64_t D, int64_t j0, int64_t nb, double *acc),
          (x, R, D, j0, nb, acc), {
              for (int64_t k = 0; k < nb; k++)
                  acc[k] = 0;
              for (int64_t r = 0; r < R; r++) {
                  const float *row = x + r * D + j0;
                  for (int64_t k = 0; k < nb; k++)
                      acc[k] += row[k];
              }
          })

typedef struct cols_job {
    const float *x;
    float *y;
    int64_t R, D;
    double scale;
} cols_job;

static void cols_task(void *a, int64_t b0, int64_t b1, int thread)
{
    const cols_job *j = a;
    double acc[COLS_BLOCK];
    for (int64_t b = b0; b < b1; b++) {
        int64_t j0 = b * COLS_BLOCK, nb = j->D - j0 < COLS_BLOCK ? j->D - j0 : COLS_BLOCK;
        cols_acc(j->x, j->R, j->D, j0, nb, acc);
        for (int64_t k = 0; k < nb; k++)
            j->y[j0 + k] = (float)(acc[k] * j->scale);
    }
}

static mge_status cpu_sum(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                          mge_error *err)
{
    const mge_tensor *x = in[0];
    mge_tensor *y = out[0];
    const mge_attr *a = mge_node_attr(n, MGE_KEY_axis);
    int red[MGE_MAX_DIMS] = {0}, nd = x->ndim;
    if (!a || nd < 2 || nd > MGE_MAX_DIMS || y->dtype != MGE_F32)
        return cpu_fallback(ctx, n, in, out, err);
    for (int i = 0; i < a->n; i++) {
        int d = mge_axis(a->i[i], nd);
        if (d < 0 || red[d])
            return cpu_fallback(ctx, n, in, out, err);
        red[d] = 1;
    }
    /* per channel: every dim but 1; leading: dims 0..k-1 */
    int perchan = nd >= 3 && !red[1] && red[0], lead = 0;
    for (int d = 2; d < nd && perchan; d++)
        perchan = red[d];
    if (!perchan) {
        int k = 0;
        while (k < nd && red[k])
            k++;
        lead = k >= 1 && k < nd;
        for (int d = k; d < nd && lead; d++)
            lead = !red[d];
        if (!lead)
            return cpu_fallback(ctx, n, in, out, err);
    }
    int64_t nx = mge_tensor_numel(x), ny = mge_tensor_numel(y);
    if (perchan) {
        int64_t N = 0, C = 0, S = 0;
        if (!ncs(x, &N, &C, &S) || ny != C)
            return cpu_fallback(ctx, n, in, out, err);
        chs_job j = {x->data, y->data, N, C, S, 1.0};
        if (n->op == MGE_OP_MEAN)
            j.scale = N * S != 0 ? 1.0 / (double)(N * S) : NAN;
        cpu_parallel(ctx, C, chan_grain(N, S), chs_task, &j);
        return MGE_OK;
    }
    int64_t D = ny, R = D ? nx / D : 0;
    if (D == 0 || R * D != nx)
        return cpu_fallback(ctx, n, in, out, err);
    cols_job j = {x->data, y->data, R, D, 1.0};
    if (n->op == MGE_OP_MEAN)
        j.scale = R ? 1.0 / (double)R : NAN;
    int64_t nblocks = (D + COLS_BLOCK - 1) / COLS_BLOCK, per = R * COLS_BLOCK;
    cpu_parallel(ctx, nblocks, per >= CPU_GRAIN ? 1 : CPU_GRAIN / per, cols_task, &j);
    return MGE_OK;
}

void mge_cpu_register_grad_norm(mge_backend *b)
{
    cpu_isa_avx2();   /* decided once, before any kernel runs on pool threads */
    b->k[MGE_OP_BATCHNORM][MGE_F32] = (mge_kernel){.run = cpu_batchnorm_fwd, .ws = cpu_ref_ws};
    b->k[MGE_OP_BATCHNORM_GRAD][MGE_F32] = (mge_kernel){.run = cpu_batchnorm_grad, .ws = cpu_ref_ws};
    b->k[MGE_OP_SUM][MGE_F32] = (mge_kernel){.run = cpu_sum, .ws = cpu_ref_ws};
    b->k[MGE_OP_MEAN][MGE_F32] = (mge_kernel){.run = cpu_sum, .ws = cpu_ref_ws};
}
