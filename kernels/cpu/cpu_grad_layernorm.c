/* cpu_grad_layernorm.c — layernorm_grad (dy, x, weight) -> dx, dweight,
 * dbias for f32, split over the pool by blocks of rows (the normalized
 * rows, dims axis..last). Each block writes its rows' dx and its own
 * partial sums of dweight and dbias; the partials are added in block
 * order afterwards, so the result does not depend on the thread count
 * (mge-train's bit-identical weights at any --threads). Row moments and
 * sums in f32 with fixed-order partial accumulators (vectorized, as the
 * forward), the sums across blocks of rows in double; shapes the inference did not
 * make go to it. */
#include "cpu.h"

#include <math.h>
#include <stdlib.h>

#define LN_BLOCK 32   /* rows per block: the partials stay small */

typedef struct ln_job {
    const float *dy, *x, *w;
    float *dx;
    float *part;    /* per block: dweight[D], then dbias[D] */
    float *xh;      /* per block: one row of xhat */
    int64_t rows, D;
    float eps;
} ln_job;

/* Sums over a row in 8 partial accumulators combined in a fixed order, so
 * the loops vectorize without reassociation flags (cpu_misc.c's layernorm
 * does the same); the result depends on D only, never on the split. */
#define LN_SUM8(acc) (((acc)[0] + (acc)[4]) + ((acc)[1] + (acc)[5])) + (((acc)[2] + (acc)[6]) + ((acc)[3] + (acc)[7]))

/* One row: mean and inverse deviation (two passes, as the forward), the two
 * sums of g = dy * w, then dx; dy * xhat and dy go into the block's
 * dweight and dbias partials (f32 within a block of rows, double across
 * blocks). */
CPU_MULTI3(ln_grad_row,
           (const float *restrict x, const float *restrict dy, const float *restrict w, float *restrict dx,
            float *restrict xh, float *restrict pw, float *restrict pb, int64_t D, float eps),
           (x, dy, w, dx, xh, pw, pb, D, eps), {
               float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
               int64_t i = 0;
               for (; i + 8 <= D; i += 8)
                   for (int k = 0; k < 8; k++)
                       acc[k] += x[i + k];
               float s = LN_SUM8(acc);
               for (; i < D; i++)
                   s += x[i];
               const float mean = s / (float)D;
               float sq[8] = {0, 0, 0, 0, 0, 0, 0, 0};
               for (i = 0; i + 8 <= D; i += 8)
                   for (int k = 0; k < 8; k++) {
                       float d = x[i + k] - mean;
                       sq[k] += d * d;
                   }
               float v = LN_SUM8(sq);
               for (; i < D; i++)
                   v += (x[i] - mean) * (x[i] - mean);
               const float inv = 1.0f / sqrtf(v / (float)D + eps);
               float ag[8] = {0, 0, 0, 0, 0, 0, 0, 0}, agx[8] = {0, 0, 0, 0, 0, 0, 0, 0};
               for (i = 0; i + 8 <= D; i += 8)
                   for (int k = 0; k < 8; k++) {
                       float h = (x[i + k] - mean) * inv, g = dy[i + k] * w[i + k];
                       xh[i + k] = h;
                       ag[k] += g;
                       agx[k] += g * h;
                   }
               float sg = LN_SUM8(ag), sgx = LN_SUM8(agx);
               for (; i < D; i++) {
                   float h = (x[i] - mean) * inv, g = dy[i] * w[i];
                   xh[i] = h;
                   sg += g;
                   sgx += g * h;
               }
               sg /= (float)D;
               sgx /= (float)D;
               for (i = 0; i < D; i++) {
                   float h = xh[i], d = dy[i];
                   dx[i] = inv * (d * w[i] - sg - h * sgx);
                   pw[i] += d * h;
                   pb[i] += d;
               }
           })

static void ln_task(void *p, int64_t b0, int64_t b1, int thread)
{
    (void)thread;
    const ln_job *j = p;
    int64_t D = j->D;
    for (int64_t b = b0; b < b1; b++) {
        float *pw = j->part + b * 2 * D, *pb = pw + D, *xh = j->xh + b * D;
        for (int64_t k = 0; k < 2 * D; k++)
            pw[k] = 0;
        int64_t r1 = (b + 1) * LN_BLOCK < j->rows ? (b + 1) * LN_BLOCK : j->rows;
        for (int64_t r = b * LN_BLOCK; r < r1; r++)
            ln_grad_row(j->x + r * D, j->dy + r * D, j->w, j->dx + r * D, xh, pw, pb, D, j->eps);
    }
}

static mge_status cpu_layernorm_grad(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                     mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *dy = in[0], *x = in[1], *w = in[2];
    int ax = mge_axis(mge_node_ints(n, MGE_KEY_axis, 0, -1), x->ndim);
    if (ax < 0 || x->dtype != MGE_F32)
        return cpu_fallback(ctx, n, in, out, err);
    int64_t rows = 1, D = 1;
    for (int i = 0; i < ax; i++)
        rows *= x->dims[i];
    for (int i = ax; i < x->ndim; i++)
        D *= x->dims[i];
    int ok = dy->dtype == MGE_F32 && w->dtype == MGE_F32 && mge_tensor_numel(dy) == rows * D &&
             mge_tensor_numel(w) == D && mge_tensor_numel(out[0]) == rows * D && mge_tensor_numel(out[1]) == D &&
             mge_tensor_numel(out[2]) == D && dy->ndim == x->ndim && out[0]->ndim == x->ndim;
    for (int i = 0; ok && i < x->ndim; i++)
        ok = dy->dims[i] == x->dims[i] && out[0]->dims[i] == x->dims[i];
    const mge_tensor *all[6] = {dy, x, w, out[0], out[1], out[2]};
    for (int i = 0; ok && i < 6; i++)
        ok = all[i]->dtype == MGE_F32 && (mge_tensor_numel(all[i]) == 0 ||
                                          (all[i]->data && all[i]->nbytes >= (size_t)mge_tensor_numel(all[i]) * 4));
    if (!ok || D < 1 || rows < 1)
        return cpu_fallback(ctx, n, in, out, err);
    int64_t nb = (rows + LN_BLOCK - 1) / LN_BLOCK;
    float *part = malloc((size_t)nb * 2 * (size_t)D * sizeof *part);
    float *xh = malloc((size_t)nb * (size_t)D * sizeof *xh);
    if (!part || !xh) {
        free(part);
        free(xh);
        return cpu_fallback(ctx, n, in, out, err);
    }
    ln_job j = {dy->data, x->data, w->data, out[0]->data, part, xh, rows, D, mge_node_float(n, MGE_KEY_eps, 1e-5)};
    cpu_parallel(ctx, nb, 1 + CPU_GRAIN / (LN_BLOCK * D * 8), ln_task, &j);
    float *dw = out[1]->data, *db = out[2]->data;
    for (int64_t k = 0; k < D; k++) {
        double sw = 0, sb = 0;
        for (int64_t b = 0; b < nb; b++) {
            sw += part[b * 2 * D + k];
            sb += part[b * 2 * D + D + k];
        }
        dw[k] = (float)sw;
        db[k] = (float)sb;
    }
    free(part);
    free(xh);
    return MGE_OK;
}

void mge_cpu_register_grad_layernorm(mge_backend *b)
{
    b->k[MGE_OP_LAYERNORM_GRAD][MGE_F32] = (mge_kernel){.run = cpu_layernorm_grad, .ws = cpu_ref_ws};
}
