/* ref_norm.c — batchnorm (eval and training, PyTorch's running-statistics
 * rule) and layernorm over dims axis..last; f32, f16 and bf16 (batchnorm's
 * parameters and statistics may stay f32 under an f16/bf16 x). */
#include "ref.h"

#include <math.h>

/* batchnorm(x[N,C,...], weight, bias, running_mean, running_var[, nbt]).
 * Eval: running statistics. Training: the batch's mean and biased variance
 * normalize; the running statistics take the mean and the unbiased
 * variance with weight momentum, in place (PyTorch's BatchNorm). */
static mge_status batchnorm_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
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
    mge_dtype dt = x->dtype;
    if (!mge_dtype_is_float(dt))
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "batchnorm: no reference kernel for %s", mge_dtype_name(dt));
    /* weight, bias and the running statistics are f32 or x's dtype */
    const mge_tensor *pv[4] = {w, b, rm, rv};
    static const char *const pn[4] = {"weight", "bias", "running_mean", "running_var"};
    for (int i = 0; i < 4; i++)
        if ((st = ref_check(ctx, n, pn[i], pv[i], pv[i]->dtype == MGE_F32 ? MGE_F32 : dt, 1, ec, err)))
            return st;
    if ((st = ref_check(ctx, n, "x", x, dt, x->ndim, x->dims, err)) ||
        (st = ref_check(ctx, n, "output", y, dt, x->ndim, x->dims, err)))
        return st;
    if (nbt && ctx->training && ((st = ref_check_dtype(ctx, n, "num_batches_tracked", nbt, MGE_I64, err))))
        return st;
    if (nbt && ctx->training && ref_numel(nbt) != 1)
        return mge_error_set(err, MGE_ERR_SHAPE, "batchnorm: num_batches_tracked must hold one value");
    double eps = mge_node_float(n, MGE_KEY_eps, 1e-5), mom = mge_node_float(n, MGE_KEY_momentum, 0.1);
    const void *xp = x->data;
    void *yp = y->data;
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
                    sum += ref_ld(dt, xp, (i * C + c) * S + j);
            mean = sum / (double)cnt;
            for (int64_t i = 0; i < N; i++)
                for (int64_t j = 0; j < S; j++) {
                    double dlt = ref_ld(dt, xp, (i * C + c) * S + j) - mean;
                    sq += dlt * dlt;
                }
            var = sq / (double)cnt;
            ref_st(rm->dtype, rm->data, c, (1 - mom) * ref_ld(rm->dtype, rm->data, c) + mom * mean);
            ref_st(rv->dtype, rv->data, c, (1 - mom) * ref_ld(rv->dtype, rv->data, c) + mom * sq / (double)(cnt - 1));
        } else {
            mean = ref_ld(rm->dtype, rm->data, c);
            var = ref_ld(rv->dtype, rv->data, c);
        }
        double inv = 1.0 / sqrt(var + eps), sc = ref_ld(w->dtype, w->data, c) * inv, sh = ref_ld(b->dtype, b->data, c);
        for (int64_t i = 0; i < N; i++)
            for (int64_t j = 0; j < S; j++) {
                int64_t at = (i * C + c) * S + j;
                ref_st(dt, yp, at, (ref_ld(dt, xp, at) - mean) * sc + sh);
            }
    }
    if (nbt && ctx->training)
        ((int64_t *)nbt->data)[0] += 1;
    return MGE_OK;
}

/* layernorm(x, weight, bias): each row of the dims axis..last is normalized
 * with its own mean and biased variance, then scaled and shifted. */
static mge_status layernorm_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *x = in[0], *w = in[1], *b = in[2];
    mge_tensor *y = out[0];
    int ax;
    mge_status st = ref_axis(ctx, n, x, -1, &ax, err);
    if (st)
        return st;
    int nd = x->ndim - ax;
    mge_dtype dt = x->dtype;
    if (!mge_dtype_is_float(dt))
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "layernorm: no reference kernel for %s", mge_dtype_name(dt));
    if ((st = ref_check(ctx, n, "x", x, dt, x->ndim, x->dims, err)) ||
        (st = ref_check(ctx, n, "weight", w, dt, nd, x->dims + ax, err)) ||
        (st = ref_check(ctx, n, "bias", b, dt, nd, x->dims + ax, err)) ||
        (st = ref_check(ctx, n, "output", y, dt, x->ndim, x->dims, err)))
        return st;
    int64_t rows = 1, D = 1;
    for (int i = 0; i < ax; i++)
        rows *= x->dims[i];
    for (int i = ax; i < x->ndim; i++)
        D *= x->dims[i];
    double eps = mge_node_float(n, MGE_KEY_eps, 1e-5);
    for (int64_t r = 0; r < rows; r++) {
        int64_t o = r * D;
        double mean, inv;
        ref_row_moments(dt, x->data, o, D, eps, &mean, &inv);
        for (int64_t j = 0; j < D; j++)
            ref_st(dt, y->data, o + j,
                   (ref_ld(dt, x->data, o + j) - mean) * inv * ref_ld(dt, w->data, j) + ref_ld(dt, b->data, j));
    }
    return MGE_OK;
}

void mge_ref_register_norm(mge_backend *b)
{
    REF_EACH_FLOAT(dt) {
        b->k[MGE_OP_BATCHNORM][dt].run = batchnorm_float;
        b->k[MGE_OP_LAYERNORM][dt].run = layernorm_float;
    }
}
