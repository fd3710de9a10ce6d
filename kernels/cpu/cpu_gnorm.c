/* cpu_gnorm.c — group_norm, instance_norm and group_norm_grad on f32,
 * one task per run of (sample, group) rows of M contiguous values
 * (statistics in double as ref); the gradient's dweight and dbias are
 * then summed per channel in a second parallel pass over the channels
 * from the rows' statistics kept in the scratch. rms_norm forward runs
 * one task per run of rows; rms_norm_grad is ref's. */
#include "cpu.h"

#include <math.h>
#include <string.h>

typedef struct gn_job {
    const float *x, *dy, *w, *b;
    float *y, *dw, *db;
    int64_t N, C, S, G, M;
    double eps;
    double *stat;   /* per row: mean, inv */
} gn_job;

static void moments(const float *x, int64_t M, double eps, double *mean, double *inv)
{
    double s = 0, q = 0;
    for (int64_t j = 0; j < M; j++)
        s += x[j];
    double m = s / (double)M;
    for (int64_t j = 0; j < M; j++) {
        double d = x[j] - m;
        q += d * d;
    }
    *mean = m;
    *inv = 1.0 / sqrt(q / (double)M + eps);
}

static void gn_task(void *a, int64_t r0, int64_t r1, int thread)
{
    (void)thread;
    const gn_job *j = a;
    int64_t cg = j->C / j->G;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = j->x + r * j->M;
        float *y = j->y + r * j->M;
        double mean, inv;
        moments(x, j->M, j->eps, &mean, &inv);
        /* (x - mean) first: x * scale + shift would cancel where the
         * variance is small against the mean */
        float m = (float)mean;
        for (int64_t k = 0; k < cg; k++) {
            int64_t c = (r % j->G) * cg + k;
            float sc = (float)(j->w ? inv * j->w[c] : inv), sh = j->w ? j->b[c] : 0.0f;
            const float *xs = x + k * j->S;
            float *ys = y + k * j->S;
            for (int64_t s = 0; s < j->S; s++)
                ys[s] = (xs[s] - m) * sc + sh;
        }
    }
}

/* rows: dx and the statistics */
static void gn_grad_rows(void *a, int64_t r0, int64_t r1, int thread)
{
    (void)thread;
    const gn_job *j = a;
    int64_t cg = j->C / j->G;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = j->x + r * j->M, *dy = j->dy + r * j->M;
        float *dx = j->y + r * j->M;
        double mean, inv, sg = 0, sgx = 0;
        moments(x, j->M, j->eps, &mean, &inv);
        j->stat[2 * r] = mean;
        j->stat[2 * r + 1] = inv;
        for (int64_t k = 0; k < cg; k++) {
            double w = j->w ? j->w[(r % j->G) * cg + k] : 1.0, a1 = 0, a2 = 0;
            for (int64_t s = 0; s < j->S; s++) {
                double d = dy[k * j->S + s];
                a1 += d;
                a2 += d * ((x[k * j->S + s] - mean) * inv);
            }
            sg += w * a1;
            sgx += w * a2;
        }
        sg /= (double)j->M;
        sgx /= (double)j->M;
        for (int64_t k = 0; k < cg; k++) {
            double w = j->w ? j->w[(r % j->G) * cg + k] : 1.0;
            for (int64_t s = 0; s < j->S; s++) {
                int64_t at = k * j->S + s;
                double xh = (x[at] - mean) * inv;
                dx[at] = (float)(inv * (dy[at] * w - sg - xh * sgx));
            }
        }
    }
}

/* channels: dweight, dbias */
static void gn_grad_channels(void *a, int64_t c0, int64_t c1, int thread)
{
    (void)thread;
    const gn_job *j = a;
    int64_t cg = j->C / j->G;
    for (int64_t c = c0; c < c1; c++) {
        double sw = 0, sb = 0;
        for (int64_t i = 0; i < j->N; i++) {
            int64_t r = i * j->G + c / cg;
            double mean = j->stat[2 * r], inv = j->stat[2 * r + 1];
            const float *x = j->x + (i * j->C + c) * j->S, *dy = j->dy + (i * j->C + c) * j->S;
            for (int64_t s = 0; s < j->S; s++) {
                sb += dy[s];
                sw += dy[s] * ((x[s] - mean) * inv);
            }
        }
        j->dw[c] = (float)sw;
        j->db[c] = (float)sb;
    }
}

static int f32_holds(const mge_tensor *t, int64_t n)
{
    return t->dtype == MGE_F32 && mge_tensor_numel(t) == n && (n == 0 || (t->data && t->nbytes >= (size_t)n * 4));
}

/* Geometry of x for the node; 0 when the case is ref's. */
static int gn_geom(const mge_node *n, const mge_tensor *x, gn_job *j)
{
    if (x->ndim < 2 || x->dtype != MGE_F32)
        return 0;
    j->N = x->dims[0];
    j->C = x->dims[1];
    j->S = 1;
    for (int i = 2; i < x->ndim; i++)
        j->S *= x->dims[i];
    j->G = n->op == MGE_OP_INSTANCE_NORM ? j->C : mge_node_int(n, MGE_KEY_num_groups, j->C);
    if (j->G < 1 || j->C % j->G || j->N * j->C * j->S == 0)
        return 0;
    j->M = j->C / j->G * j->S;
    j->eps = mge_node_float(n, MGE_KEY_eps, 1e-5);
    return f32_holds(x, j->N * j->C * j->S);
}

static mge_status cpu_group_norm(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                 mge_tensor *const *out, mge_error *err)
{
    gn_job j;
    memset(&j, 0, sizeof j);
    if (!gn_geom(n, in[0], &j) || !f32_holds(out[0], j.N * j.C * j.S) ||
        (n->nin == 3 && (!f32_holds(in[1], j.C) || !f32_holds(in[2], j.C))) || n->nin == 2)
        return cpu_fallback(ctx, n, in, out, err);
    j.x = in[0]->data;
    j.y = out[0]->data;
    if (n->nin == 3) {
        j.w = in[1]->data;
        j.b = in[2]->data;
    }
    int64_t grain = CPU_GRAIN / j.M;
    cpu_parallel(ctx, j.N * j.G, grain < 1 ? 1 : grain, gn_task, &j);
    return MGE_OK;
}

static size_t gn_grad_ws(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, int threads)
{
    (void)out, (void)threads;
    gn_job j;
    memset(&j, 0, sizeof j);
    return gn_geom(n, in[1], &j) ? (size_t)(2 * j.N * j.G) * sizeof(double) : 0;
}

static mge_status cpu_group_norm_grad(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                      mge_tensor *const *out, mge_error *err)
{
    gn_job j;
    memset(&j, 0, sizeof j);
    int64_t nx = 0;
    if (!gn_geom(n, in[1], &j) || !f32_holds(in[0], nx = j.N * j.C * j.S) || !f32_holds(out[0], nx) ||
        !f32_holds(out[1], j.C) || !f32_holds(out[2], j.C) || (n->nin == 3 && !f32_holds(in[2], j.C)) || !ctx->ws ||
        ctx->ws_size < (size_t)(2 * j.N * j.G) * sizeof(double))
        return cpu_fallback(ctx, n, in, out, err);
    j.dy = in[0]->data;
    j.x = in[1]->data;
    j.w = n->nin == 3 ? in[2]->data : NULL;
    j.y = out[0]->data;
    j.dw = out[1]->data;
    j.db = out[2]->data;
    j.stat = ctx->ws;
    int64_t grain = CPU_GRAIN / j.M;
    cpu_parallel(ctx, j.N * j.G, grain < 1 ? 1 : grain, gn_grad_rows, &j);
    grain = CPU_GRAIN / (j.N * j.S);
    cpu_parallel(ctx, j.C, grain < 1 ? 1 : grain, gn_grad_channels, &j);
    return MGE_OK;
}

typedef struct rms_job {
    const float *x, *w;
    float *y;
    int64_t D;
    double eps;
} rms_job;

static void rms_task(void *a, int64_t r0, int64_t r1, int thread)
{
    (void)thread;
    const rms_job *j = a;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = j->x + r * j->D;
        float *y = j->y + r * j->D;
        double q = 0;
        for (int64_t k = 0; k < j->D; k++)
            q += (double)x[k] * x[k];
        float inv = (float)(1.0 / sqrt(q / (double)j->D + j->eps));
        for (int64_t k = 0; k < j->D; k++)
            y[k] = x[k] * inv * j->w[k];
    }
}

static mge_status cpu_rms_norm(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                               mge_error *err)
{
    const mge_tensor *x = in[0];
    int ax = mge_axis(mge_node_int(n, MGE_KEY_axis, -1), x->ndim);
    if (ax < 0 || x->dtype != MGE_F32)
        return cpu_fallback(ctx, n, in, out, err);
    int64_t D = 1, nx = mge_tensor_numel(x);
    for (int i = ax; i < x->ndim; i++)
        D *= x->dims[i];
    if (D == 0 || !f32_holds(x, nx) || !f32_holds(out[0], nx) || !f32_holds(in[1], D) || in[1]->ndim != x->ndim - ax)
        return cpu_fallback(ctx, n, in, out, err);
    rms_job j = {x->data, in[1]->data, out[0]->data, D, mge_rms_eps(n, MGE_F32)};
    int64_t grain = CPU_GRAIN / D;
    cpu_parallel(ctx, nx / D, grain < 1 ? 1 : grain, rms_task, &j);
    return MGE_OK;
}

void mge_cpu_register_gnorm(mge_backend *b)
{
    b->k[MGE_OP_GROUP_NORM][MGE_F32] = (mge_kernel){.run = cpu_group_norm, .ws = cpu_ref_ws};
    b->k[MGE_OP_INSTANCE_NORM][MGE_F32] = (mge_kernel){.run = cpu_group_norm, .ws = cpu_ref_ws};
    b->k[MGE_OP_GROUP_NORM_GRAD][MGE_F32] = (mge_kernel){.run = cpu_group_norm_grad, .ws = gn_grad_ws};
    b->k[MGE_OP_RMS_NORM][MGE_F32] = (mge_kernel){.run = cpu_rms_norm, .ws = cpu_ref_ws};
}
