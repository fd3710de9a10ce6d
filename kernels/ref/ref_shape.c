/* ref_shape.c — reshape, flatten, transpose, concat, slice and copy for every
 * dtype, by bytes (element size from the dtype). reshape/flatten copy only
 * when the executor did not make the output a view of the input. */
#include "ref.h"

#include <string.h>

/* reshape, flatten: same dtype and element count; the shape is the one the
 * inference gave the output. */
static mge_status reshape_any(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                              mge_error *err)
{
    const mge_tensor *x = in[0];
    mge_tensor *y = out[0];
    mge_status st = ref_check_data(ctx, n, "x", x, err);
    if (st || (st = ref_check_dtype(ctx, n, "output", y, x->dtype, err)))
        return st;
    if (ref_numel(x) != ref_numel(y)) {
        char bx[96], by[96];
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: output %s does not hold the %lld elements of %s",
                             ref_opname(ctx, n), mge_shape_str(y->dtype, y->ndim, y->dims, by, sizeof by),
                             (long long)ref_numel(x), mge_shape_str(x->dtype, x->ndim, x->dims, bx, sizeof bx));
    }
    size_t nb = (size_t)ref_numel(x) * mge_dtype_size(x->dtype);
    if (y->data != x->data && nb)
        memmove(y->data, x->data, nb);
    return MGE_OK;
}

/* transpose: out.dims[i] = in.dims[perm[i]]; perm must be a permutation
 * (negative entries count from the end). */
static mge_status transpose_any(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *x = in[0];
    mge_tensor *y = out[0];
    mge_status st = ref_check_data(ctx, n, "x", x, err);
    if (st)
        return st;
    const mge_attr *a = mge_node_attr(n, MGE_KEY_perm);
    int nd = x->ndim, perm[MGE_MAX_DIMS], seen[MGE_MAX_DIMS] = {0};
    if (!a || a->n != nd)
        return mge_error_set(err, MGE_ERR_INVALID, "transpose: perm has %d entries for rank %d", a ? a->n : 0, nd);
    int64_t ydims[MGE_MAX_DIMS], xstr[MGE_MAX_DIMS], stride = 1;
    for (int i = 0; i < nd; i++) {
        int p = mge_axis(a->i[i], nd);
        if (p < 0 || seen[p])
            return mge_error_set(err, MGE_ERR_INVALID, "transpose: perm is not a permutation of 0..%d", nd - 1);
        seen[p] = 1;
        perm[i] = p;
        ydims[i] = x->dims[p];
    }
    if ((st = ref_check(ctx, n, "output", y, x->dtype, nd, ydims, err)))
        return st;
    if (y->data == x->data && ref_numel(x) > 1)
        return mge_error_set(err, MGE_ERR_INVALID, "transpose: output may not be the input's buffer");
    for (int d = nd - 1; d >= 0; d--) {
        xstr[d] = stride;
        stride *= x->dims[d];
    }
    size_t es = mge_dtype_size(x->dtype);
    const char *xp = x->data;
    char *yp = y->data;
    int64_t cnt = ref_numel(y), idx[MGE_MAX_DIMS] = {0};
    for (int64_t i = 0; i < cnt; i++) {
        int64_t off = 0;
        for (int d = 0; d < nd; d++)
            off += idx[d] * xstr[perm[d]];
        memcpy(yp + (size_t)i * es, xp + (size_t)off * es, es);
        ref_next(nd, ydims, idx);
    }
    return MGE_OK;
}

/* concat: all inputs of one dtype and rank, equal except along axis. */
static mge_status concat_any(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                             mge_error *err)
{
    const mge_tensor *x0 = in[0];
    mge_tensor *y = out[0];
    int64_t av = mge_node_ints(n, MGE_KEY_axis, 0, 0);
    int ax = mge_axis(av, x0->ndim);
    if (ax < 0)
        return mge_error_set(err, MGE_ERR_INVALID, "concat: axis=%lld is out of range for rank %d", (long long)av,
                             x0->ndim);
    int64_t ydims[MGE_MAX_DIMS], outer = 1, inner = 1;
    memcpy(ydims, x0->dims, sizeof ydims);
    ydims[ax] = 0;
    mge_status st;
    for (int k = 0; k < n->nin; k++) {
        const mge_tensor *x = in[k];
        if ((st = ref_check_dtype(ctx, n, "input", x, x0->dtype, err)))
            return st;
        int ok = x->ndim == x0->ndim;
        for (int d = 0; ok && d < x->ndim; d++)
            ok = d == ax || x->dims[d] == x0->dims[d];
        if (!ok) {
            char b0[96], bk[96];
            return mge_error_set(err, MGE_ERR_SHAPE, "concat: input %d is %s, input 0 is %s: they differ off axis %d",
                                 k, mge_shape_str(x->dtype, x->ndim, x->dims, bk, sizeof bk),
                                 mge_shape_str(x0->dtype, x0->ndim, x0->dims, b0, sizeof b0), ax);
        }
        ydims[ax] += x->dims[ax];
    }
    if ((st = ref_check(ctx, n, "output", y, x0->dtype, x0->ndim, ydims, err)))
        return st;
    for (int d = 0; d < ax; d++)
        outer *= x0->dims[d];
    for (int d = ax + 1; d < x0->ndim; d++)
        inner *= x0->dims[d];
    size_t es = mge_dtype_size(x0->dtype), yrow = (size_t)(ydims[ax] * inner) * es;
    for (int k = 0; k < n->nin; k++)
        if (in[k]->data == y->data && ref_numel(y) > 0 && ref_numel(in[k]) > 0)
            return mge_error_set(err, MGE_ERR_INVALID, "concat: output may not be an input's buffer");
    char *yp = y->data;
    size_t at = 0;
    for (int k = 0; k < n->nin; k++) {
        size_t row = (size_t)(in[k]->dims[ax] * inner) * es;
        const char *xp = in[k]->data;
        for (int64_t o = 0; o < outer && row; o++)
            memcpy(yp + (size_t)o * yrow + at, xp + (size_t)o * row, row);
        at += row;
    }
    return MGE_OK;
}

/* Python slicing along one axis: negative start/end count from the end,
 * both clamp to [0, dim]; end absent = dim; step must be positive. */
static mge_status slice_any(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                            mge_error *err)
{
    const mge_tensor *x = in[0];
    mge_tensor *y = out[0];
    mge_status st = ref_check_data(ctx, n, "x", x, err);
    if (st)
        return st;
    ref_slice sl = {0};
    int64_t ydims[MGE_MAX_DIMS];
    if ((st = ref_slice_setup(ctx, n, x, &sl, ydims, err)) ||
        (st = ref_check(ctx, n, "output", y, x->dtype, x->ndim, ydims, err)))
        return st;
    if (y->data == x->data && ref_numel(y) > 0)
        return mge_error_set(err, MGE_ERR_INVALID, "slice: output may not be the input's buffer");
    ref_slice_copy(&sl, x, x->data, y->data, 0);
    return MGE_OK;
}

/* copy on the host (or within one device): reshape's bytes, keeping the
 * layout tag */
static mge_status copy_any(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                           mge_error *err)
{
    mge_status st = reshape_any(ctx, n, in, out, err);
    if (!st)
        out[0]->layout = in[0]->layout;
    return st;
}

void mge_ref_register_shape(mge_backend *b)
{
    for (int dt = 0; dt < MGE_NDTYPES; dt++) {
        b->k[MGE_OP_COPY][dt].run = copy_any;
        b->k[MGE_OP_RESHAPE][dt].run = reshape_any;
        b->k[MGE_OP_FLATTEN][dt].run = reshape_any;
        b->k[MGE_OP_TRANSPOSE][dt].run = transpose_any;
        b->k[MGE_OP_CONCAT][dt].run = concat_any;
        b->k[MGE_OP_SLICE][dt].run = slice_any;
    }
}
