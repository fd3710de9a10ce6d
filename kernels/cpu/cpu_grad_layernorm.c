/* cpu_grad_layernorm.c — layernorm_grad (dy, x, weight) -> dx, dweight,
 * dbias for f32, split over the pool by blocks of rows (the normalized
 * rows, dims axis..last). Each block writes its rows' dx and its own
 * partial sums of dweight and dbias; the partials are added in block
 * order afterwards, so the result does not depend on the thread count
 * (mge-train's bit-identical weights at any --threads). Moments and sums in
 * double, as the ref kernel; shapes the inference did not make go to it. */
#include "cpu.h"

#include <math.h>
#include <stdlib.h>

#define LN_BLOCK 32   /* rows per block: the partials stay small */

typedef struct ln_job {
    const float *dy, *x, *w;
    float *dx;
    double *part;   /* per block: dweight[D], then dbias[D] */
    int64_t rows, D;
    double eps;
} ln_job;

static void ln_task(void *p, int64_t b0, int64_t b1, int thread)
{
    (void)thread;
    const ln_job *j = p;
    int64_t D = j->D;
    for (int64_t b = b0; b < b1; b++) {
        double *pw = j->part + b * 2 * D, *pb = pw + D;
        for (int64_t k = 0; k < 2 * D; k++)
            pw[k] = 0;
        int64_t r1 = (b + 1) * LN_BLOCK < j->rows ? (b + 1) * LN_BLOCK : j->rows;
        for (int64_t r = b * LN_BLOCK; r < r1; r++) {
            const float *x = j->x + r * D, *dy = j->dy + r * D;
            float *dx = j->dx + r * D;
            double s = 0, ss = 0, sg = 0, sgx = 0;
            for (int64_t k = 0; k < D; k++)
                s += x[k];
            double mean = s / (double)D;
            for (int64_t k = 0; k < D; k++)
                ss += (x[k] - mean) * (x[k] - mean);
            double inv = 1.0 / sqrt(ss / (double)D + j->eps);
            for (int64_t k = 0; k < D; k++) {
                double g = (double)dy[k] * j->w[k], xh = (x[k] - mean) * inv;
                sg += g;
                sgx += g * xh;
                pw[k] += dy[k] * xh;
                pb[k] += dy[k];
            }
            sg /= (double)D;
            sgx /= (double)D;
            for (int64_t k = 0; k < D; k++) {
                double g = (double)dy[k] * j->w[k], xh = (x[k] - mean) * inv;
                dx[k] = (float)(inv * (g - sg - xh * sgx));
            }
        }
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
    double *part = malloc((size_t)nb * 2 * (size_t)D * sizeof *part);
    if (!part)
        return cpu_fallback(ctx, n, in, out, err);
    ln_job j = {dy->data, x->data, w->data, out[0]->data, part, rows, D, mge_node_float(n, MGE_KEY_eps, 1e-5)};
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
    return MGE_OK;
}

void mge_cpu_register_grad_layernorm(mge_backend *b)
{
    b->k[MGE_OP_LAYERNORM_GRAD][MGE_F32] = (mge_kernel){.run = cpu_layernorm_grad, .ws = cpu_ref_ws};
}
