/* ref_grad_norm.c — reference kernels of batchnorm_grad and layernorm_grad
 * (float dtypes, double arithmetic).
 *
 * With xhat = (x - mean) * inv, inv = 1 / sqrt(var + eps) (biased variance
 * over the M normalized elements) and g = dy * weight:
 *   dbias = sum dy, dweight = sum dy * xhat (over all but the parameter's dims),
 *   dx = inv * (g - mean(g) - xhat * mean(g * xhat)) over each group.
 * batchnorm's groups are channels (dim 1; statistics over N and the spatial
 * dims, training mode); layernorm's are rows (dims axis..last). */
#include "ref.h"

#include <math.h>
#include <stdlib.h>

static mge_status check_common(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                               int wnd, const int64_t *wdims, mge_error *err)
{
    const mge_tensor *x = in[1];
    mge_dtype dt = x->dtype;
    mge_status st;
    if (!mge_dtype_is_float(dt))
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: no reference kernel for %s", ref_opname(ctx, n),
                             mge_dtype_name(dt));
    if ((st = ref_check(ctx, n, "dy", in[0], dt, x->ndim, x->dims, err)) ||
        (st = ref_check(ctx, n, "weight", in[2], dt, wnd, wdims, err)) ||
        (st = ref_check(ctx, n, "dx", out[0], dt, x->ndim, x->dims, err)) ||
        (st = ref_check(ctx, n, "dweight", out[1], dt, wnd, wdims, err)) ||
        (st = ref_check(ctx, n, "dbias", out[2], dt, wnd, wdims, err)))
        return st;
    return MGE_OK;
}

static mge_status batchnorm_grad_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                       mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *dy = in[0], *x = in[1], *w = in[2];
    mge_status st = ref_check_data(ctx, n, "x", x, err);
    if (st)
        return st;
    if (x->ndim < 2)
        return mge_error_set(err, MGE_ERR_SHAPE, "batchnorm_grad: x has rank %d: expected >= 2 [N,C,...]", x->ndim);
    int64_t N = x->dims[0], C = x->dims[1], S = 1;
    for (int i = 2; i < x->ndim; i++)
        S *= x->dims[i];
    if ((st = check_common(ctx, n, in, out, 1, &x->dims[1], err)))
        return st;
    int64_t M = N * S;
    if (M < 1 && C > 0)
        return mge_error_set(err, MGE_ERR_SHAPE, "batchnorm_grad: no values per channel");
    mge_dtype dt = x->dtype;
    double eps = mge_node_float(n, MGE_KEY_eps, 1e-5);
    for (int64_t c = 0; c < C; c++) {
        double sum = 0, sq = 0, sdy = 0, sdyx = 0;
        for (int64_t i = 0; i < N; i++)
            for (int64_t j = 0; j < S; j++)
                sum += ref_ld(dt, x->data, (i * C + c) * S + j);
        double mean = sum / (double)M;
        for (int64_t i = 0; i < N; i++)
            for (int64_t j = 0; j < S; j++) {
                int64_t at = (i * C + c) * S + j;
                double d = ref_ld(dt, x->data, at) - mean, g = ref_ld(dt, dy->data, at);
                sq += d * d;
                sdy += g;
                sdyx += g * d;
            }
        double inv = 1.0 / sqrt(sq / (double)M + eps), wc = ref_ld(dt, w->data, c);
        double dw = sdyx * inv;
        ref_st(dt, out[1]->data, c, dw);
        ref_st(dt, out[2]->data, c, sdy);
        /* mean(g) = wc * sdy / M, mean(g * xhat) = wc * dw / M */
        for (int64_t i = 0; i < N; i++)
            for (int64_t j = 0; j < S; j++) {
                int64_t at = (i * C + c) * S + j;
                double xh = (ref_ld(dt, x->data, at) - mean) * inv;
                double g = ref_ld(dt, dy->data, at);
                ref_st(dt, out[0]->data, at, wc * inv * (g - sdy / (double)M - xh * dw / (double)M));
            }
    }
    return MGE_OK;
}

static mge_status layernorm_grad_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                       mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *dy = in[0], *x = in[1], *w = in[2];
    mge_status st = ref_check_data(ctx, n, "x", x, err);
    if (st)
        return st;
    int ax;
    if ((st = ref_axis(ctx, n, x, -1, &ax, err)) ||
        (st = check_common(ctx, n, in, out, x->ndim - ax, &x->dims[ax], err)))
        return st;
    int64_t rows = 1, D = 1;
    for (int i = 0; i < ax; i++)
        rows *= x->dims[i];
    for (int i = ax; i < x->ndim; i++)
        D *= x->dims[i];
    mge_dtype dt = x->dtype;
    double eps = mge_node_float(n, MGE_KEY_eps, 1e-5);
    double *stat = malloc(sizeof(double) * 2 * (size_t)(rows ? rows : 1));
    if (!stat)
        return mge_error_set(err, MGE_ERR_NOMEM, "layernorm_grad: out of memory");
    for (int64_t r = 0; r < rows && D > 0; r++) {
        int64_t o = r * D;
        double mean, inv, sg = 0, sgx = 0;
        ref_row_moments(dt, x->data, o, D, eps, &mean, &inv);
        stat[2 * r] = mean;
        stat[2 * r + 1] = inv;
        for (int64_t j = 0; j < D; j++) {
            double g = ref_ld(dt, dy->data, o + j) * ref_ld(dt, w->data, j);
            sg += g;
            sgx += g * (ref_ld(dt, x->data, o + j) - mean) * inv;
        }
        for (int64_t j = 0; j < D; j++) {
            double g = ref_ld(dt, dy->data, o + j) * ref_ld(dt, w->data, j);
            double xh = (ref_ld(dt, x->data, o + j) - mean) * inv;
            ref_st(dt, out[0]->data, o + j, inv * (g - sg / (double)D - xh * sgx / (double)D));
        }
    }
    for (int64_t j = 0; j < D; j++) {
        double dw = 0, db = 0;
        for (int64_t r = 0; r < rows; r++) {
            double g = ref_ld(dt, dy->data, r * D + j);
            dw += g * (ref_ld(dt, x->data, r * D + j) - stat[2 * r]) * stat[2 * r + 1];
            db += g;
        }
        ref_st(dt, out[1]->data, j, dw);
        ref_st(dt, out[2]->data, j, db);
    }
    free(stat);
    return MGE_OK;
}

void mge_ref_register_grad_norm(mge_backend *b)
{
    REF_EACH_FLOAT(dt) {
        b->k[MGE_OP_BATCHNORM_GRAD][dt].run = batchnorm_grad_float;
        b->k[MGE_OP_LAYERNORM_GRAD][dt].run = layernorm_grad_float;
    }
}
