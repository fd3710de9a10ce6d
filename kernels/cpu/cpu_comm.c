/* cpu_comm.c — sync_batchnorm and its gradient on the pool (f32, [N,C,S]).
 *
 * The plane loops are those of cpu_grad_norm.c (the same operations in the
 * same order, compiled the same way): one rank's share of a statistic is
 * then, bit for bit, the part a single process computes over those samples,
 * and the ranks' parts are added in double as the single process adds its
 * planes. So N ranks give what one process gives over the global batch up
 * to that last addition, which keeps --sync-bn runs within rounding of a
 * single process (a batchnorm output that lands on the other side of a
 * relu or a max-pool tie would otherwise make a visible difference). Each
 * kernel runs its channels in parallel between its sums over the ranks. */
#include "cpu.h"

#include <math.h>
#include <stdlib.h>

static inline __attribute__((always_inline)) float fold32(const float *a)
{
    float h[8];
    for (int k = 0; k < 8; k++)
        h[k] = (a[k] + a[k + 16]) + (a[k + 8] + a[k + 24]);
    return ((h[0] + h[4]) + (h[1] + h[5])) + ((h[2] + h[6]) + (h[3] + h[7]));
}

CPU_MULTI3(sbn_sum, (const float *x, int64_t n, float *out), (x, n, out), {
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

CPU_MULTI3(sbn_sqdev, (const float *x, int64_t n, float m, float *out), (x, n, m, out), {
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

CPU_MULTI3(sbn_dysums,
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

CPU_MULTI3(sbn_affine, (const float *x, float *y, int64_t n, float sc, float sh), (x, y, n, sc, sh), {
    for (int64_t i = 0; i < n; i++)
        y[i] = x[i] * sc + sh;
})

CPU_MULTI3(sbn_dx, (const float *dy, const float *x, float *dx, int64_t n, float k1, float k2, float k0),
           (dy, x, dx, n, k1, k2, k0), {
               for (int64_t i = 0; i < n; i++)
                   dx[i] = k1 * dy[i] + k2 * x[i] + k0;
           })

typedef struct sbn_job {
    const float *x, *dy, *w, *b;
    float *y, *rm, *rv, *dx, *dw, *db;
    int64_t N, C, S;
    double eps, mom, m, share;
    double *st;              /* [0,C) sums, then means; [C,2C) squared deviations; [2C,3C) and [3C,4C)
                              * the share-weighted sums of dy and dy * (x - mean) */
} sbn_job;

static void task_sums(void *a, int64_t c0, int64_t c1, int thread)
{
    const sbn_job *j = a;
    for (int64_t c = c0; c < c1; c++) {
        double s = 0;
        for (int64_t i = 0; i < j->N; i++) {
            float p;
            sbn_sum(j->x + (i * j->C + c) * j->S, j->S, &p);
            s += p;
        }
        j->st[c] = s;
    }
}

static void task_sqdev(void *a, int64_t c0, int64_t c1, int thread)
{
    const sbn_job *j = a;
    for (int64_t c = c0; c < c1; c++) {
        double q = 0;
        for (int64_t i = 0; i < j->N; i++) {
            float p;
            sbn_sqdev(j->x + (i * j->C + c) * j->S, j->S, (float)j->st[c], &p);
            q += p;
        }
        j->st[j->C + c] = q;
    }
}

static void task_apply(void *a, int64_t c0, int64_t c1, int thread)
{
    const sbn_job *j = a;
    for (int64_t c = c0; c < c1; c++) {
        double mean = j->st[c], sq = j->st[j->C + c];
        j->rm[c] = (float)((1 - j->mom) * (double)j->rm[c] + j->mom * mean);
        j->rv[c] = (float)((1 - j->mom) * (double)j->rv[c] + j->mom * sq / (j->m - 1));
        double inv = 1.0 / sqrt(sq / j->m + j->eps), sc = j->w[c] * inv, sh = j->b[c] - mean * sc;
        for (int64_t i = 0; i < j->N; i++) {
            int64_t off = (i * j->C + c) * j->S;
            sbn_affine(j->x + off, j->y + off, j->S, (float)sc, (float)sh);
        }
    }
}

static void task_dysums(void *a, int64_t c0, int64_t c1, int thread)
{
    const sbn_job *j = a;
    int64_t C = j->C;
    for (int64_t c = c0; c < c1; c++) {
        double sq = 0, sdy = 0, sdyx = 0;
        for (int64_t i = 0; i < j->N; i++) {
            float u, p, q;
            int64_t off = (i * C + c) * j->S;
            sbn_dysums(j->dy + off, j->x + off, j->S, (float)j->st[c], &u, &p, &q);
            sq += u;
            sdy += p;
            sdyx += q;
        }
        j->st[C + c] = sq;
        j->db[c] = (float)sdy;
        j->st[2 * C + c] = sdy * j->share;
        j->st[3 * C + c] = sdyx * j->share;
        j->dw[c] = (float)sdyx;   /* this rank's sum; times the global inv in task_dx */
    }
}

static void task_dx(void *a, int64_t c0, int64_t c1, int thread)
{
    const sbn_job *j = a;
    int64_t C = j->C;
    double M = j->m;
    for (int64_t c = c0; c < c1; c++) {
        double mean = j->st[c], inv = 1.0 / sqrt(j->st[C + c] / M + j->eps), wi = j->w[c] * inv;
        /* the global sums in this rank's scale (its dy is the gradient of its own mean loss) */
        double sdy = j->st[2 * C + c] / j->share, dw = j->st[3 * C + c] / j->share * inv;
        j->dw[c] = (float)((double)j->dw[c] * inv);
        double k2 = -wi * inv * dw / M, k0 = -wi * sdy / M - k2 * mean;
        for (int64_t i = 0; i < j->N; i++) {
            int64_t off = (i * C + c) * j->S;
            sbn_dx(j->dy + off, j->x + off, j->dx + off, j->S, (float)wi, (float)k2, (float)k0);
        }
    }
}

static int64_t grain(int64_t N, int64_t S)
{
    int64_t per = N * S;
    return per >= CPU_GRAIN ? 1 : CPU_GRAIN / (per ? per : 1);
}

/* The global means of x's channels into st[0, C), m the global count. */
static mge_status global_means(const mge_kctx *ctx, sbn_job *j, mge_error *err)
{
    cpu_parallel(ctx, j->C, grain(j->N, j->S), task_sums, j);
    j->st[j->C] = (double)(j->N * j->S);   /* the count rides along (st[C] is free until the variances) */
    mge_status s = ctx->comm->sum(ctx->comm->ud, j->st, j->C + 1, err);
    if (s)
        return s;
    j->m = j->st[j->C];
    for (int64_t c = 0; c < j->C; c++)
        j->st[c] = j->m > 0 ? j->st[c] / j->m : 0;
    return MGE_OK;
}

static int is_ncs_f32(mge_tensor *const *t, int n, int64_t *N, int64_t *C, int64_t *S)
{
    const mge_tensor *x = t[0];
    if (x->ndim < 2)
        return 0;
    *N = x->dims[0], *C = x->dims[1], *S = 1;
    for (int i = 2; i < x->ndim; i++)
        *S *= x->dims[i];
    for (int i = 0; i < n; i++)
        if (t[i]->dtype != MGE_F32)
            return 0;
    return 1;
}

static mge_status cpu_sync_bn(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                              mge_error *err)
{
    int64_t N, C, S;
    if (!ctx->training || !ctx->comm || !ctx->comm->sum || !is_ncs_f32(in, 5, &N, &C, &S) ||
        out[0]->dtype != MGE_F32)
        return cpu_fallback(ctx, n, in, out, err);
    for (int i = 1; i < 5; i++)
        if (in[i]->ndim != 1 || in[i]->dims[0] != C)
            return cpu_fallback(ctx, n, in, out, err);
    mge_tensor *nbt = n->nin >= 6 ? in[5] : NULL;
    if (nbt && (nbt->dtype != MGE_I64 || mge_tensor_numel(nbt) != 1))
        return cpu_fallback(ctx, n, in, out, err);
    sbn_job j = {.x = in[0]->data, .w = in[1]->data, .b = in[2]->data, .rm = in[3]->data, .rv = in[4]->data,
                 .y = out[0]->data, .N = N, .C = C, .S = S, .eps = mge_node_float(n, MGE_KEY_eps, 1e-5),
                 .mom = mge_node_float(n, MGE_KEY_momentum, 0.1)};
    if (!(j.st = malloc(sizeof(double) * (size_t)(4 * C + 1))))
        return mge_error_set(err, MGE_ERR_NOMEM, "sync_batchnorm: out of memory");
    mge_status s = global_means(ctx, &j, err);
    if (!s) {
        cpu_parallel(ctx, C, grain(N, S), task_sqdev, &j);
        s = ctx->comm->sum(ctx->comm->ud, j.st + C, C, err);
    }
    if (!s && j.m < 2)
        s = mge_error_set(err, MGE_ERR_SHAPE, "sync_batchnorm: %g values per channel over all ranks: the variance "
                          "needs 2", j.m);
    if (!s) {
        cpu_parallel(ctx, C, grain(N, S), task_apply, &j);
        if (nbt)
            ((int64_t *)nbt->data)[0] += 1;
    }
    free(j.st);
    return s;
}

static mge_status cpu_sync_bn_grad(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                   mge_tensor *const *out, mge_error *err)
{
    int64_t N, C, S;
    mge_tensor *xin[3] = {in[1], in[0], in[2]};
    if (!ctx->comm || !ctx->comm->sum || !is_ncs_f32(xin, 3, &N, &C, &S) || !mge_tensor_same_shape(in[0], in[1]) ||
        in[2]->ndim != 1 || in[2]->dims[0] != C || out[0]->dtype != MGE_F32 || out[1]->dtype != MGE_F32 ||
        out[2]->dtype != MGE_F32)
        return cpu_fallback(ctx, n, in, out, err);
    sbn_job j = {.dy = in[0]->data, .x = in[1]->data, .w = in[2]->data, .dx = out[0]->data, .dw = out[1]->data,
                 .db = out[2]->data, .N = N, .C = C, .S = S, .eps = mge_node_float(n, MGE_KEY_eps, 1e-5),
                 .share = ctx->comm->share(ctx->comm->ud)};
    if (!(j.st = malloc(sizeof(double) * (size_t)(4 * C + 1))))
        return mge_error_set(err, MGE_ERR_NOMEM, "sync_batchnorm_grad: out of memory");
    mge_status s = global_means(ctx, &j, err);
    if (!s) {
        cpu_parallel(ctx, C, grain(N, S), task_dysums, &j);
        s = ctx->comm->sum(ctx->comm->ud, j.st + C, 3 * C, err);
    }
    if (!s)
        cpu_parallel(ctx, C, grain(N, S), task_dx, &j);
    free(j.st);
    return s;
}

void mge_cpu_register_comm(mge_backend *b)
{
    b->k[MGE_OP_SYNC_BATCHNORM][MGE_F32].run = cpu_sync_bn;
    b->k[MGE_OP_SYNC_BATCHNORM_GRAD][MGE_F32].run = cpu_sync_bn_grad;
}
