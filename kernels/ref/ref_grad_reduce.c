/* ref_grad_reduce.c — reference kernels of the reduce and shape gradients:
 * sum_grad, mean_grad, max_grad, prod_grad, softmax_grad, log_softmax_grad (float
 * dtypes, double arithmetic) and reshape_as (any dtype, bytes; slice_grad is
 * in ref_shape.c, with slice).
 *
 * max_grad splits dy evenly among the elements equal to the maximum (ties),
 * as PyTorch does for a full max reduction and for amax; when the maximum is
 * NaN no element equals it and the group gets no gradient. */
#include "ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The reduced dims (red[d] = 1) of x from the axis attribute; absent = all. */
static mge_status reduced_dims(const mge_kctx *ctx, const mge_node *n, const mge_tensor *x, int *red, mge_error *err)
{
    const mge_attr *a = mge_node_attr(n, MGE_KEY_axis);
    for (int d = 0; d < x->ndim; d++)
        red[d] = a == NULL;
    for (int i = 0; a && i < a->n && i < MGE_MAX_DIMS; i++) {
        int d = mge_axis(a->i[i], x->ndim);
        if (d < 0 || red[d])
            return mge_error_set(err, MGE_ERR_INVALID, "%s: axis %lld is out of range for rank %d or repeated",
                                 ref_opname(ctx, n), (long long)a->i[i], x->ndim);
        red[d] = 1;
    }
    return MGE_OK;
}

/* Checks sum_grad/mean_grad/max_grad's tensors and fills, per dim of x, the
 * stride of the matching element of dy (0 along reduced dims) and the
 * reduced element count. */
static mge_status bcast_setup(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                              int64_t *ystr, int64_t *rcount, mge_error *err)
{
    const mge_tensor *dy = in[0], *x = in[1];
    mge_dtype dt = x->dtype;
    int red[MGE_MAX_DIMS], keep = (int)mge_node_int(n, MGE_KEY_keepdim, 0), ny = 0;
    mge_status st = ref_check_data(ctx, n, "x", x, err);
    if (st || (st = reduced_dims(ctx, n, x, red, err)))
        return st;
    if (!mge_dtype_is_float(dt))
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: no reference kernel for %s", ref_opname(ctx, n),
                             mge_dtype_name(dt));
    int64_t ydims[MGE_MAX_DIMS], stride = 1;
    for (int d = 0; d < x->ndim; d++)
        if (!red[d] || keep)
            ydims[ny++] = red[d] ? 1 : x->dims[d];
    if ((st = ref_check(ctx, n, "dy", dy, dt, ny, ydims, err)) ||
        (st = ref_check(ctx, n, "output", out[0], dt, x->ndim, x->dims, err)))
        return st;
    if (n->op == MGE_OP_MAX_GRAD && (st = ref_check(ctx, n, "y", in[2], dt, ny, ydims, err)))
        return st;
    *rcount = 1;
    for (int d = x->ndim - 1; d >= 0; d--) {
        if (red[d]) {
            ystr[d] = 0;
            *rcount *= x->dims[d];
        } else {
            ystr[d] = stride;
            stride *= x->dims[d];
        }
    }
    return MGE_OK;
}

/* sum_grad, mean_grad: dx[i] = dy[j(i)] (/ the reduced count). */
static mge_status sum_grad_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                 mge_tensor *const *out, mge_error *err)
{
    int64_t ystr[MGE_MAX_DIMS], rcount;
    mge_status st = bcast_setup(ctx, n, in, out, ystr, &rcount, err);
    if (st)
        return st;
    const mge_tensor *dy = in[0], *x = in[1];
    mge_dtype dt = x->dtype;
    double scale = n->op == MGE_OP_MEAN_GRAD ? 1.0 / (double)rcount : 1.0;
    int64_t nx = ref_numel(x), idx[MGE_MAX_DIMS] = {0};
    for (int64_t i = 0; i < nx; i++) {
        int64_t j = 0;
        for (int d = 0; d < x->ndim; d++)
            j += idx[d] * ystr[d];
        ref_st(dt, out[0]->data, i, ref_ld(dt, dy->data, j) * scale);
        ref_next(x->ndim, x->dims, idx);
    }
    return MGE_OK;
}

/* max_grad(dy, x, y): counts the ties of each group, then shares dy. */
static mge_status max_grad_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                 mge_tensor *const *out, mge_error *err)
{
    int64_t ystr[MGE_MAX_DIMS], rcount;
    mge_status st = bcast_setup(ctx, n, in, out, ystr, &rcount, err);
    if (st)
        return st;
    const mge_tensor *dy = in[0], *x = in[1], *y = in[2];
    mge_dtype dt = x->dtype;
    int64_t nx = ref_numel(x), ny = ref_numel(y), idx[MGE_MAX_DIMS] = {0};
    int64_t *cnt = calloc((size_t)(ny ? ny : 1), sizeof *cnt);
    if (!cnt)
        return mge_error_set(err, MGE_ERR_NOMEM, "max_grad: out of memory");
    for (int pass = 0; pass < 2; pass++) {
        memset(idx, 0, sizeof idx);
        for (int64_t i = 0; i < nx; i++) {
            int64_t j = 0;
            for (int d = 0; d < x->ndim; d++)
                j += idx[d] * ystr[d];
            int hit = ref_ld(dt, x->data, i) == ref_ld(dt, y->data, j);
            if (pass == 0)
                cnt[j] += hit;
            else
                ref_st(dt, out[0]->data, i, hit ? ref_ld(dt, dy->data, j) / (double)cnt[j] : 0.0);
            ref_next(x->ndim, x->dims, idx);
        }
    }
    free(cnt);
    return MGE_OK;
}

/* prod_grad(dy, x): per group the count of zeros and the product of the
 * other elements; dx = dy * prod / x with no zero, dy * (product of the
 * others) at a lone zero, 0 elsewhere (PyTorch's rule). */
static mge_status prod_grad_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                  mge_tensor *const *out, mge_error *err)
{
    int64_t ystr[MGE_MAX_DIMS], rcount;
    mge_status st = bcast_setup(ctx, n, in, out, ystr, &rcount, err);
    if (st)
        return st;
    const mge_tensor *dy = in[0], *x = in[1];
    mge_dtype dt = x->dtype;
    int64_t nx = ref_numel(x), ny = ref_numel(dy), idx[MGE_MAX_DIMS] = {0};
    int64_t *zeros = calloc((size_t)(ny ? ny : 1), sizeof *zeros);
    double *nz = malloc((size_t)(ny ? ny : 1) * sizeof *nz);
    if (!zeros || !nz) {
        free(zeros);
        free(nz);
        return mge_error_set(err, MGE_ERR_NOMEM, "prod_grad: out of memory");
    }
    for (int64_t j = 0; j < ny; j++)
        nz[j] = 1.0;
    for (int pass = 0; pass < 2; pass++) {
        memset(idx, 0, sizeof idx);
        for (int64_t i = 0; i < nx; i++) {
            int64_t j = 0;
            for (int d = 0; d < x->ndim; d++)
                j += idx[d] * ystr[d];
            double v = ref_ld(dt, x->data, i);
            if (pass == 0) {
                if (v == 0)
                    zeros[j]++;
                else
                    nz[j] *= v;
            } else {
                double g = ref_ld(dt, dy->data, j), r = 0;
                if (v != 0 && zeros[j] == 0)
                    r = g * nz[j] / v;
                else if (v == 0 && zeros[j] == 1)
                    r = g * nz[j];
                ref_st(dt, out[0]->data, i, r);
            }
            ref_next(x->ndim, x->dims, idx);
        }
    }
    free(zeros);
    free(nz);
    return MGE_OK;
}

/* softmax_grad(dy, y): dx = y * (dy - sum(dy * y));
 * log_softmax_grad(dy, y): dx = dy - exp(y) * sum(dy); sums along the axis. */
static mge_status softmax_grad_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                     mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *dy = in[0], *y = in[1];
    mge_dtype dt = y->dtype;
    mge_status st = ref_check_data(ctx, n, "y", y, err);
    if (st)
        return st;
    if (!mge_dtype_is_float(dt))
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: no reference kernel for %s", ref_opname(ctx, n),
                             mge_dtype_name(dt));
    int64_t av = mge_node_ints(n, MGE_KEY_axis, 0, -1);
    int ax = mge_axis(av, y->ndim);
    if (ax < 0)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: axis=%lld is out of range for rank %d", ref_opname(ctx, n),
                             (long long)av, y->ndim);
    if ((st = ref_check(ctx, n, "dy", dy, dt, y->ndim, y->dims, err)) ||
        (st = ref_check(ctx, n, "output", out[0], dt, y->ndim, y->dims, err)))
        return st;
    int64_t outer = 1, len = y->dims[ax], inner = 1;
    for (int d = 0; d < ax; d++)
        outer *= y->dims[d];
    for (int d = ax + 1; d < y->ndim; d++)
        inner *= y->dims[d];
    int logsm = n->op == MGE_OP_LOG_SOFTMAX_GRAD;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t b = o * len * inner + i;
            double s = 0;
            for (int64_t j = 0; j < len; j++) {
                double g = ref_ld(dt, dy->data, b + j * inner);
                s += logsm ? g : g * ref_ld(dt, y->data, b + j * inner);
            }
            for (int64_t j = 0; j < len; j++) {
                int64_t at = b + j * inner;
                double g = ref_ld(dt, dy->data, at), v = ref_ld(dt, y->data, at);
                ref_st(dt, out[0]->data, at, logsm ? g - exp(v) * s : v * (g - s));
            }
        }
    return MGE_OK;
}

/* reshape_as is a view (the executor runs no kernel); this copy serves
 * callers that run kernels directly. */
static mge_status reshape_as_any(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                 mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *dy = in[0];
    mge_tensor *y = out[0];
    mge_status st = ref_check_data(ctx, n, "dy", dy, err);
    if (st || (st = ref_check(ctx, n, "output", y, dy->dtype, in[1]->ndim, in[1]->dims, err)))
        return st;
    if (ref_numel(dy) != ref_numel(y))
        return mge_error_set(err, MGE_ERR_SHAPE, "reshape_as: %lld elements into %lld", (long long)ref_numel(dy),
                             (long long)ref_numel(y));
    size_t nb = (size_t)ref_numel(dy) * mge_dtype_size(dy->dtype);
    if (y->data != dy->data && nb)
        memmove(y->data, dy->data, nb);
    return MGE_OK;
}

void mge_ref_register_grad_reduce(mge_backend *b)
{
    REF_EACH_FLOAT(dt) {
        b->k[MGE_OP_SUM_GRAD][dt].run = sum_grad_float;
        b->k[MGE_OP_MEAN_GRAD][dt].run = sum_grad_float;
        b->k[MGE_OP_MAX_GRAD][dt].run = max_grad_float;
        b->k[MGE_OP_PROD_GRAD][dt].run = prod_grad_float;
        b->k[MGE_OP_SOFTMAX_GRAD][dt].run = softmax_grad_float;
        b->k[MGE_OP_LOG_SOFTMAX_GRAD][dt].run = softmax_grad_float;
    }
    for (int dt = 0; dt < MGE_NDTYPES; dt++) {
        b->k[MGE_OP_RESHAPE_AS][dt].run = reshape_as_any;
    }
}
