/* ref_norm.c — batchnorm (eval and training, PyTorch's running-statistics
 * rule) and layernorm over dims axis..last. */
#include "ref.h"

#include <math.h>

/* batchnorm(x[N,C,...], weight, bias, running_mean, running_var[, nbt]).
 * Eval: running statistics. Training: the batch's mean and biased variance
 * normalize; the running statistics take the mean and the unbiased
 * variance with weight momentum, in place (PyTorch's BatchNorm). */
static mge_status batchnorm_f32(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *x = in[0], *w = in[1], *b = in[2];
    mge_tensor *rm = in[3], *rv = in[4], *nbt = n->nin >= 6 ? in[5] : NULL, *y = out[0];
    mge_status st;
    if (x->ndim < 2)
        return mge_error_set(err, MGE_ERR_SHAPE, "batchnorm: x has rank %d: expected >= 2 [N,C,...]", x->ndim);
    int64_t N = x->dims[0], C = x->dims[1], S = 1, ec[1] = {C};
    for (int i = 2; i < x->ndim; i++)
        S *= x->dims[i];
    if ((st = ref_check(n, "x", x, MGE_F32, x->ndim, x->dims, err)) ||
        (st = ref_check(n, "weight", w, MGE_F32, 1, ec, err)) || (st = ref_check(n, "bias", b, MGE_F32, 1, ec, err)) ||
        (st = ref_check(n, "running_mean", rm, MGE_F32, 1, ec, err)) ||
        (st = ref_check(n, "running_var", rv, MGE_F32, 1, ec, err)) ||
        (st = ref_check(n, "output", y, MGE_F32, x->ndim, x->dims, err)))
        return st;
    if (nbt && ctx->training && ((st = ref_check_dtype(n, "num_batches_tracked", nbt, MGE_I64, err))))
        return st;
    if (nbt && ctx->training && ref_numel(nbt) != 1)
        return mge_error_set(err, MGE_ERR_SHAPE, "batchnorm: num_batches_tracked must hold one value");
    double eps = mge_node_float(n, MGE_KEY_eps, 1e-5), mom = mge_node_float(n, MGE_KEY_momentum, 0.1);
    const float *xp = x->data, *wp = w->data, *bp = b->data;
    float *rmp = rm->data, *rvp = rv->data, *yp = y->data;
    int64_t cnt = N * S;
    if (ctx->training && cnt < 2)
        return mge_error_set(err, MGE_ERR_SHAPE,
                             "batchnorm: training needs more than one value per channel (got %lld)", (long long)cnt);
    for (int64_t c = 0; c < C; c++) {
        double mean, var;
        if (ctx->training) {
            double sum = 0, sq = 0;
            for (int64_t i = 0; i < N; i++)
                for (int64_t j = 0; j < S; j++)
                    sum += xp[(i * C + c) * S + j];
            mean = sum / (double)cnt;
            for (int64_t i = 0; i < N; i++)
                for (int64_t j = 0; j < S; j++) {
                    double dlt = xp[(i * C + c) * S + j] - mean;
                    sq += dlt * dlt;
                }
            var = sq / (double)cnt;
            rmp[c] = (float)((1 - mom) * rmp[c] + mom * mean);
            rvp[c] = (float)((1 - mom) * rvp[c] + mom * sq / (double)(cnt - 1));
        } else {
            mean = rmp[c];
            var = rvp[c];
        }
        double inv = 1.0 / sqrt(var + eps), sc = wp[c] * inv, sh = bp[c];
        for (int64_t i = 0; i < N; i++)
            for (int64_t j = 0; j < S; j++) {
                int64_t at = (i * C + c) * S + j;
                yp[at] = (float)((xp[at] - mean) * sc + sh);
            }
    }
    if (nbt && ctx->training)
        ((int64_t *)nbt->data)[0] += 1;
    return MGE_OK;
}

/* layernorm(x, weight, bias): each row of the dims axis..last is normalized
 * with its own mean and biased variance, then scaled and shifted. */
static mge_status layernorm_f32(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *x = in[0], *w = in[1], *b = in[2];
    mge_tensor *y = out[0];
    mge_status st;
    int64_t av = mge_node_ints(n, MGE_KEY_axis, 0, -1);
    int ax = mge_axis(av, x->ndim);
    if (ax < 0)
        return mge_error_set(err, MGE_ERR_INVALID, "layernorm: axis=%lld is out of range for rank %d",
                             (long long)av, x->ndim);
    int nd = x->ndim - ax;
    if ((st = ref_check(n, "x", x, MGE_F32, x->ndim, x->dims, err)) ||
        (st = ref_check(n, "weight", w, MGE_F32, nd, x->dims + ax, err)) ||
        (st = ref_check(n, "bias", b, MGE_F32, nd, x->dims + ax, err)) ||
        (st = ref_check(n, "output", y, MGE_F32, x->ndim, x->dims, err)))
        return st;
    int64_t rows = 1, D = 1;
    for (int i = 0; i < ax; i++)
        rows *= x->dims[i];
    for (int i = ax; i < x->ndim; i++)
        D *= x->dims[i];
    double eps = mge_node_float(n, MGE_KEY_eps, 1e-5);
    const float *xp = x->data, *wp = w->data, *bp = b->data;
    float *yp = y->data;
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = xp + r * D;
        float *yr = yp + r * D;
        double sum = 0, sq = 0;
        for (int64_t j = 0; j < D; j++)
            sum += xr[j];
        double mean = sum / (double)D;
        for (int64_t j = 0; j < D; j++)
            sq += (xr[j] - mean) * (xr[j] - mean);
        double inv = 1.0 / sqrt(sq / (double)D + eps);
        for (int64_t j = 0; j < D; j++)
            yr[j] = (float)((xr[j] - mean) * inv * wp[j] + bp[j]);
    }
    return MGE_OK;
}

void mge_ref_register_norm(mge_backend *b)
{
    b->k[MGE_OP_BATCHNORM][MGE_F32].run = batchnorm_f32;
    b->k[MGE_OP_LAYERNORM][MGE_F32].run = layernorm_f32;
}
