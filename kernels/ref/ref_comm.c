/* ref_comm.c — kernels of the distributed ops. allreduce and
 * allreduce_wait hand the gradient to the communicator the executor was
 * given (lib/dist.c keeps the buckets) and take the sum back.
 * sync_batchnorm in training mode sums its per-channel statistics over the
 * ranks (two passes, as batchnorm: the global mean, then the global sum of
 * squared deviations); its gradient sums those and the dy sums the input
 * gradient needs, weighted by this rank's share so a rank's dy (the
 * gradient of its own mean loss) counts as its samples do in the global
 * batch. The cpu table inherits these kernels. */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static mge_status no_comm(const mge_kctx *ctx, const mge_node *n, mge_error *err)
{
    return mge_error_set(err, MGE_ERR_UNSUPPORTED,
                         "%s: no communicator (the op runs inside distributed training, mpirun -np N mge-train)",
                         mge_kctx_opname(ctx, n));
}

static mge_status allreduce_f32(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                mge_tensor *const *out, mge_error *err)
{
    if (!ctx->comm)
        return no_comm(ctx, n, err);
    int64_t cnt = mge_tensor_numel(in[0]);
    mge_status s = ctx->comm->put(ctx->comm->ud, mge_node_int(n, MGE_KEY_bucket, 0), mge_node_int(n, MGE_KEY_offset, 0),
                                  in[0]->data, cnt, err);
    if (!s && out[0]->data != in[0]->data)
        memcpy(out[0]->data, in[0]->data, in[0]->nbytes);
    return s;
}

static mge_status allreduce_wait_f32(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                     mge_tensor *const *out, mge_error *err)
{
    (void)in;
    if (!ctx->comm)
        return no_comm(ctx, n, err);
    return ctx->comm->wait(ctx->comm->ud, mge_node_int(n, MGE_KEY_bucket, 0), mge_node_int(n, MGE_KEY_offset, 0),
                           out[0]->data, mge_tensor_numel(out[0]), err);
}

/* x[N,C,S...] as N, C, S */
static mge_status bn_dims(const mge_kctx *ctx, const mge_node *n, const mge_tensor *x, int64_t *N, int64_t *C,
                          int64_t *S, mge_error *err)
{
    if (x->ndim < 2)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x has rank %d: expected >= 2 [N,C,...]",
                             mge_kctx_opname(ctx, n), x->ndim);
    *N = x->dims[0], *C = x->dims[1], *S = 1;
    for (int i = 2; i < x->ndim; i++)
        *S *= x->dims[i];
    return MGE_OK;
}

/* Global per-channel mean (st[c]) and sum of squared deviations
 * (st[C + c]) of x over every rank's samples; *m gets the global count. */
static mge_status global_stats(const mge_kctx *ctx, const float *x, int64_t N, int64_t C, int64_t S, double *st,
                               double *m, mge_error *err)
{
    for (int64_t c = 0; c <= C; c++)
        st[c] = 0;
    for (int64_t i = 0; i < N; i++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t j = 0; j < S; j++)
                st[c] += x[(i * C + c) * S + j];
    st[C] = (double)(N * S);
    mge_status s = ctx->comm->sum(ctx->comm->ud, st, C + 1, err);
    if (s)
        return s;
    *m = st[C];
    for (int64_t c = 0; c < C; c++)
        st[c] = *m > 0 ? st[c] / *m : 0;
    for (int64_t c = 0; c < C; c++)
        st[C + c] = 0;
    for (int64_t i = 0; i < N; i++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t j = 0; j < S; j++) {
                double d = x[(i * C + c) * S + j] - st[c];
                st[C + c] += d * d;
            }
    return ctx->comm->sum(ctx->comm->ud, st + C, C, err);
}

static mge_status sync_bn_f32(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                              mge_error *err)
{
    int64_t N = 0, C = 0, S = 0;
    const mge_tensor *x = in[0];
    mge_status s = bn_dims(ctx, n, x, &N, &C, &S, err);
    if (s)
        return s;
    for (int i = 1; i < 5; i++)
        if (in[i]->dtype != MGE_F32 || mge_tensor_numel(in[i]) != C)
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: input %d must be f32[%lld]", mge_kctx_opname(ctx, n), i,
                                 (long long)C);
    const float *xp = x->data, *w = in[1]->data, *b = in[2]->data;
    float *rm = in[3]->data, *rv = in[4]->data, *y = out[0]->data;
    double eps = mge_node_float(n, MGE_KEY_eps, 1e-5), mom = mge_node_float(n, MGE_KEY_momentum, 0.1);
    if (!ctx->training) {
        for (int64_t i = 0; i < N; i++)
            for (int64_t c = 0; c < C; c++) {
                double inv = 1.0 / sqrt((double)rv[c] + eps);
                for (int64_t j = 0; j < S; j++) {
                    int64_t at = (i * C + c) * S + j;
                    y[at] = (float)((xp[at] - rm[c]) * inv * w[c] + b[c]);
                }
            }
        return MGE_OK;
    }
    if (!ctx->comm || !ctx->comm->sum)
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: no communicator (it runs inside distributed training)",
                             mge_kctx_opname(ctx, n));
    mge_tensor *nbt = n->nin >= 6 ? in[5] : NULL;
    if (nbt && (nbt->dtype != MGE_I64 || mge_tensor_numel(nbt) != 1))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: num_batches_tracked must be i64[1]", mge_kctx_opname(ctx, n));
    double *st = malloc(sizeof(double) * (size_t)(2 * C + 1)), m;
    if (!st)
        return mge_error_set(err, MGE_ERR_NOMEM, "%s: out of memory", mge_kctx_opname(ctx, n));
    if ((s = global_stats(ctx, xp, N, C, S, st, &m, err))) {
        free(st);
        return s;
    }
    if (m < 2) {
        free(st);
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: %g values per channel over all ranks: the variance needs 2",
                             mge_kctx_opname(ctx, n), m);
    }
    for (int64_t c = 0; c < C; c++) {
        double mean = st[c], sq = st[C + c], inv = 1.0 / sqrt(sq / m + eps);
        rm[c] = (float)((1 - mom) * (double)rm[c] + mom * mean);
        rv[c] = (float)((1 - mom) * (double)rv[c] + mom * sq / (m - 1));
        for (int64_t i = 0; i < N; i++)
            for (int64_t j = 0; j < S; j++) {
                int64_t at = (i * C + c) * S + j;
                y[at] = (float)((xp[at] - mean) * inv * w[c] + b[c]);
            }
    }
    if (nbt)
        ((int64_t *)nbt->data)[0] += 1;
    free(st);
    return MGE_OK;
}

static mge_status sync_bn_grad_f32(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                   mge_tensor *const *out, mge_error *err)
{
    int64_t N = 0, C = 0, S = 0;
    const mge_tensor *x = in[1];
    mge_status s = bn_dims(ctx, n, x, &N, &C, &S, err);
    if (s)
        return s;
    if (!ctx->comm || !ctx->comm->sum)
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: no communicator (it runs inside distributed training)",
                             mge_kctx_opname(ctx, n));
    const float *dy = in[0]->data, *xp = x->data, *w = in[2]->data;
    float *dx = out[0]->data, *dw = out[1]->data, *db = out[2]->data;
    double eps = mge_node_float(n, MGE_KEY_eps, 1e-5), share = ctx->comm->share(ctx->comm->ud);
    double *st = malloc(sizeof(double) * (size_t)(4 * C + 1)), m;
    if (!st)
        return mge_error_set(err, MGE_ERR_NOMEM, "%s: out of memory", mge_kctx_opname(ctx, n));
    if ((s = global_stats(ctx, xp, N, C, S, st, &m, err))) {
        free(st);
        return s;
    }
    /* this rank's dy sums, then the share-weighted global ones */
    double *loc = st + 2 * C;
    for (int64_t k = 0; k < 2 * C; k++)
        loc[k] = 0;
    for (int64_t i = 0; i < N; i++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t j = 0; j < S; j++) {
                int64_t at = (i * C + c) * S + j;
                loc[c] += dy[at];
                loc[C + c] += dy[at] * (xp[at] - st[c]);
            }
    for (int64_t c = 0; c < C; c++) {
        double inv = 1.0 / sqrt(st[C + c] / m + eps);
        dw[c] = (float)(loc[C + c] * inv);
        db[c] = (float)loc[c];
    }
    for (int64_t k = 0; k < 2 * C; k++)
        loc[k] *= share;
    if ((s = ctx->comm->sum(ctx->comm->ud, loc, 2 * C, err))) {
        free(st);
        return s;
    }
    for (int64_t c = 0; c < C; c++) {
        double mean = st[c], inv = 1.0 / sqrt(st[C + c] / m + eps), wi = w[c] * inv;
        /* in this rank's scale: the global means of dy and dy * xhat over its share */
        double mdy = loc[c] / m / share, mdyx = loc[C + c] * inv / m / share;
        for (int64_t i = 0; i < N; i++)
            for (int64_t j = 0; j < S; j++) {
                int64_t at = (i * C + c) * S + j;
                double xh = (xp[at] - mean) * inv;
                dx[at] = (float)(wi * (dy[at] - mdy - xh * mdyx));
            }
    }
    free(st);
    return MGE_OK;
}

void mge_ref_register_comm(mge_backend *b)
{
    b->k[MGE_OP_SYNC_BATCHNORM][MGE_F32].run = sync_bn_f32;
    b->k[MGE_OP_SYNC_BATCHNORM_GRAD][MGE_F32].run = sync_bn_grad_f32;
    b->k[MGE_OP_ALLREDUCE][MGE_F32].run = allreduce_f32;
    b->k[MGE_OP_ALLREDUCE_WAIT][MGE_F32].run = allreduce_wait_f32;
}
