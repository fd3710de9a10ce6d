/* ref_pad.c — reference kernels of pad (every dtype but the quantized
 * ones: elements are copied as bytes) and pad_grad (float dtypes, sums in
 * double). One output element at a time, its source through
 * mge_pad_source per padded dim. */
#include "ref.h"

#include <stdlib.h>

/* The pads of dim d (begin *b, end *e); 0, 0 for dims pads leaves alone. */
static void dim_pads(const mge_node *n, int ndim, int d, int64_t *b, int64_t *e)
{
    const mge_attr *p = mge_node_attr(n, MGE_KEY_pads);
    int j = ndim - 1 - d;
    *b = *e = 0;
    if (p && 2 * j + 1 < p->n) {
        *b = p->i[2 * j];
        *e = p->i[2 * j + 1];
    }
}

/* Checks y = pad(x) for the node's pads and mode, and x's data. */
static mge_status check(const mge_kctx *ctx, const mge_node *n, const mge_tensor *x, const mge_tensor *y,
                        const char *yn, mge_error *err)
{
    int64_t d[MGE_MAX_DIMS];
    int mode = (int)mge_node_int(n, MGE_KEY_mode, MGE_MODE_CONSTANT);
    mge_status st;
    if (x->ndim < 1 || x->ndim > MGE_MAX_DIMS)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x has rank %d", ref_opname(ctx, n), x->ndim);
    for (int i = 0; i < x->ndim; i++) {
        int64_t b, e;
        dim_pads(n, x->ndim, i, &b, &e);
        d[i] = x->dims[i] + b + e;
        if (d[i] < 0 || (mode != MGE_MODE_CONSTANT && (b < 0 || e < 0 || (x->dims[i] < 1 && d[i] > 0))) ||
            (mode == MGE_MODE_REFLECT && (b >= x->dims[i] || e >= x->dims[i]) && (b || e)))
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: pads [%lld,%lld] do not fit dim %d of size %lld",
                                 ref_opname(ctx, n), (long long)b, (long long)e, i, (long long)x->dims[i]);
    }
    if ((st = ref_check(ctx, n, "x", x, x->dtype, x->ndim, x->dims, err)) ||
        (st = ref_check(ctx, n, yn, y, x->dtype, x->ndim, d, err)))
        return st;
    return MGE_OK;
}

/* The flat source index in x of output multi-index o, or -1 (the constant). */
static int64_t source(const mge_node *n, const mge_tensor *x, const int64_t *o, int mode)
{
    int64_t at = 0;
    for (int i = 0; i < x->ndim; i++) {
        int64_t b, e;
        dim_pads(n, x->ndim, i, &b, &e);
        int64_t s = mge_pad_source(o[i], x->dims[i], b, mode);
        if (s < 0)
            return -1;
        at = at * x->dims[i] + s;
    }
    return at;
}

static mge_status pad_any(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                          mge_error *err)
{
    const mge_tensor *x = in[0];
    mge_tensor *y = out[0];
    mge_status st = check(ctx, n, x, y, "output", err);
    if (st)
        return st;
    int mode = (int)mge_node_int(n, MGE_KEY_mode, MGE_MODE_CONSTANT);
    size_t es = mge_dtype_size(x->dtype);
    unsigned char fill[16] = {0};
    double v = mge_node_float(n, MGE_KEY_value, 0);
    if (mge_dtype_is_float(x->dtype))
        ref_st(x->dtype, fill, 0, v);
    else
        ref_ist(x->dtype, fill, 0, (int64_t)v);
    int64_t ny = ref_numel(y), o[MGE_MAX_DIMS] = {0};
    for (int64_t k = 0; k < ny; k++, ref_next(y->ndim, y->dims, o)) {
        int64_t s = source(n, x, o, mode);
        memcpy((unsigned char *)y->data + (size_t)k * es, s < 0 ? fill : (const unsigned char *)x->data + (size_t)s * es,
               es);
    }
    return MGE_OK;
}

/* pad_grad(dy, x): dx[source(o)] += dy[o]. */
static mge_status pad_grad_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                 mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *dy = in[0], *x = in[1];
    mge_tensor *dx = out[0];
    mge_status st = check(ctx, n, x, dy, "dy", err);
    if (st || (st = ref_check(ctx, n, "dx", dx, x->dtype, x->ndim, x->dims, err)))
        return st;
    int mode = (int)mge_node_int(n, MGE_KEY_mode, MGE_MODE_CONSTANT);
    mge_dtype dt = x->dtype;
    int64_t nx = ref_numel(x), ny = ref_numel(dy), o[MGE_MAX_DIMS] = {0};
    double *acc = calloc((size_t)(nx ? nx : 1), sizeof *acc);
    if (!acc)
        return mge_error_set(err, MGE_ERR_NOMEM, "%s: out of memory", ref_opname(ctx, n));
    for (int64_t k = 0; k < ny; k++, ref_next(dy->ndim, dy->dims, o)) {
        int64_t s = source(n, x, o, mode);
        if (s >= 0)
            acc[s] += ref_ld(dt, dy->data, k);
    }
    for (int64_t i = 0; i < nx; i++)
        ref_st(dt, dx->data, i, acc[i]);
    free(acc);
    return MGE_OK;
}

void mge_ref_register_pad(mge_backend *b)
{
    for (int dt = 0; dt < MGE_NDTYPES; dt++)
        if (dt != MGE_QS8 && dt != MGE_QS32)
            b->k[MGE_OP_PAD][dt].run = pad_any;
    REF_EACH_FLOAT(dt) b->k[MGE_OP_PAD_GRAD][dt].run = pad_grad_float;
}
