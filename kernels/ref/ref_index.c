/* ref_index.c — gather, index_select, gather_elements, scatter, scatter_nd,
 * one_hot and the gradient ops gather_grad, gather_elements_grad. Data moves
 * by bytes (any dtype); every index is checked against its bound first
 * (kernels/kindex.h), so no bad index reads or writes out of bounds. */
#include "ref.h"
#include "kindex.h"

#include <math.h>
#include <string.h>

/* x's dims split around axis ax: outer x dim x inner. */
static void around(const mge_tensor *x, int ax, int64_t *outer, int64_t *inner)
{
    *outer = *inner = 1;
    for (int d = 0; d < ax; d++)
        *outer *= x->dims[d];
    for (int d = ax + 1; d < x->ndim; d++)
        *inner *= x->dims[d];
}

/* Row-major strides of t. */
static void strides(const mge_tensor *t, int64_t *s)
{
    int64_t k = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        s[d] = k;
        k *= t->dims[d];
    }
}

/* The gather output shape x.dims[:ax] + idx.dims + x.dims[ax+1:]; 0 when too long. */
static int gather_dims(const mge_tensor *x, const mge_tensor *idx, int ax, int64_t *yd)
{
    int nd = 0;
    if (x->ndim - 1 + idx->ndim > MGE_MAX_DIMS)
        return -1;
    for (int d = 0; d < ax; d++)
        yd[nd++] = x->dims[d];
    for (int d = 0; d < idx->ndim; d++)
        yd[nd++] = idx->dims[d];
    for (int d = ax + 1; d < x->ndim; d++)
        yd[nd++] = x->dims[d];
    return nd;
}

/* gather and its gradient share the geometry checks: x (data or the
 * forward input), idx, and t (output or dy) of the gathered shape. */
static mge_status gather_setup(const mge_kctx *ctx, const mge_node *n, const mge_tensor *x, const mge_tensor *idx,
                               const mge_tensor *t, const char *what, int *ax, mge_error *err)
{
    mge_status st = ref_check_data(ctx, n, "x", x, err);
    if (st || (st = ref_axis(ctx, n, x, 0, ax, err)) ||
        (st = kidx_check(ref_opname(ctx, n), idx, *ax, x->dims[*ax], err)))
        return st;
    int64_t yd[MGE_MAX_DIMS];
    int nd = gather_dims(x, idx, *ax, yd);
    if (nd < 0)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: output rank over %d", ref_opname(ctx, n), MGE_MAX_DIMS);
    return ref_check(ctx, n, what, t, x->dtype, nd, yd, err);
}

static mge_status gather_any(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                             mge_error *err)
{
    const mge_tensor *x = in[0], *idx = in[1];
    mge_tensor *y = out[0];
    int ax;
    mge_status st = gather_setup(ctx, n, x, idx, y, "output", &ax, err);
    if (st)
        return st;
    int64_t outer, inner, dim = x->dims[ax], k = ref_numel(idx);
    around(x, ax, &outer, &inner);
    size_t row = (size_t)inner * mge_dtype_size(x->dtype);
    const char *xp = x->data;
    char *yp = y->data;
    for (int64_t o = 0; o < outer && row; o++)
        for (int64_t j = 0; j < k; j++)
            memcpy(yp + (size_t)(o * k + j) * row, xp + (size_t)(o * dim + kidx_at(idx, j, dim)) * row, row);
    return MGE_OK;
}

/* gather_grad(dy, idx, x): zeros like x, dy's rows added where gather read. */
static mge_status gather_grad_any(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                  mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *dy = in[0], *idx = in[1], *x = in[2];
    mge_tensor *y = out[0];
    int ax;
    mge_status st = gather_setup(ctx, n, x, idx, dy, "dy", &ax, err);
    if (st || (st = ref_check(ctx, n, "output", y, x->dtype, x->ndim, x->dims, err)))
        return st;
    mge_dtype dt = x->dtype;
    if (!mge_dtype_is_float(dt))
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: no reference kernel for %s", ref_opname(ctx, n),
                             mge_dtype_name(dt));
    int64_t outer, inner, dim = x->dims[ax], k = ref_numel(idx);
    around(x, ax, &outer, &inner);
    memset(y->data, 0, (size_t)ref_numel(y) * mge_dtype_size(dt));
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < k; j++) {
            int64_t to = (o * dim + kidx_at(idx, j, dim)) * inner, from = (o * k + j) * inner;
            for (int64_t i = 0; i < inner; i++)
                ref_st(dt, y->data, to + i, ref_ld(dt, y->data, to + i) + ref_ld(dt, dy->data, from + i));
        }
    return MGE_OK;
}

/* idx of x's rank and each dim but the axis at most x's. */
static mge_status elements_setup(const mge_kctx *ctx, const mge_node *n, const mge_tensor *x, const mge_tensor *idx,
                                 int *ax, mge_error *err)
{
    mge_status st = ref_check_data(ctx, n, "x", x, err);
    if (st || (st = ref_axis(ctx, n, x, 0, ax, err)))
        return st;
    int ok = idx->ndim == x->ndim;
    for (int d = 0; ok && d < x->ndim; d++)
        ok = d == *ax || idx->dims[d] <= x->dims[d];
    if (!ok) {
        char bx[96], bi[96];
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: indices %s do not fit x %s off axis %d", ref_opname(ctx, n),
                             mge_shape_str(idx->dtype, idx->ndim, idx->dims, bi, sizeof bi),
                             mge_shape_str(x->dtype, x->ndim, x->dims, bx, sizeof bx), *ax);
    }
    return kidx_check(ref_opname(ctx, n), idx, *ax, x->dims[*ax], err);
}

/* The offset in x of idx's element at multi-index at, its axis coordinate
 * replaced by the index there. */
static int64_t elem_off(const mge_tensor *x, const mge_tensor *idx, const int64_t *xs, const int64_t *at, int ax,
                        int64_t i)
{
    int64_t off = 0;
    for (int d = 0; d < x->ndim; d++)
        off += (d == ax ? kidx_at(idx, i, x->dims[ax]) : at[d]) * xs[d];
    return off;
}

static mge_status gather_elements_any(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                      mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *x = in[0], *idx = in[1];
    mge_tensor *y = out[0];
    int ax;
    mge_status st = elements_setup(ctx, n, x, idx, &ax, err);
    if (st || (st = ref_check(ctx, n, "output", y, x->dtype, idx->ndim, idx->dims, err)))
        return st;
    int64_t xs[MGE_MAX_DIMS], at[MGE_MAX_DIMS] = {0}, cnt = ref_numel(idx);
    strides(x, xs);
    size_t es = mge_dtype_size(x->dtype);
    for (int64_t i = 0; i < cnt; i++) {
        memcpy((char *)y->data + (size_t)i * es, (const char *)x->data + (size_t)elem_off(x, idx, xs, at, ax, i) * es,
               es);
        ref_next(idx->ndim, idx->dims, at);
    }
    return MGE_OK;
}

/* gather_elements_grad(dy, idx, x): zeros like x, dy added where the forward read. */
static mge_status gather_elements_grad_any(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                           mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *dy = in[0], *idx = in[1], *x = in[2];
    mge_tensor *y = out[0];
    int ax;
    mge_status st = elements_setup(ctx, n, x, idx, &ax, err);
    if (st || (st = ref_check(ctx, n, "dy", dy, x->dtype, idx->ndim, idx->dims, err)) ||
        (st = ref_check(ctx, n, "output", y, x->dtype, x->ndim, x->dims, err)))
        return st;
    mge_dtype dt = x->dtype;
    if (!mge_dtype_is_float(dt))
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: no reference kernel for %s", ref_opname(ctx, n),
                             mge_dtype_name(dt));
    int64_t xs[MGE_MAX_DIMS], at[MGE_MAX_DIMS] = {0}, cnt = ref_numel(idx);
    strides(x, xs);
    memset(y->data, 0, (size_t)ref_numel(y) * mge_dtype_size(dt));
    for (int64_t i = 0; i < cnt; i++) {
        int64_t o = elem_off(x, idx, xs, at, ax, i);
        ref_st(dt, y->data, o, ref_ld(dt, y->data, o) + ref_ld(dt, dy->data, i));
        ref_next(idx->ndim, idx->dims, at);
    }
    return MGE_OK;
}

/* The output starts as a copy of data (unless it is data's buffer). */
static void copy_data(const mge_tensor *x, mge_tensor *y)
{
    size_t nb = (size_t)ref_numel(x) * mge_dtype_size(x->dtype);
    if (y->data != x->data && nb)
        memmove(y->data, x->data, nb);
}

/* y[k] = y[k] red u[i] for the reductions add, mul, max, min (ONNX's
 * ScatterElements/ScatterND, in index order); floats in double, integers
 * in int64 wrapping to the dtype, bool's add and max an or, mul and min an and. */
static void scatter_combine(mge_dtype dt, int red, void *y, int64_t k, const void *u, int64_t i)
{
    if (mge_dtype_is_float(dt)) {
        double a = ref_ld(dt, y, k), b = ref_ld(dt, u, i);
        double r = red == MGE_SCATTER_ADD ? a + b : red == MGE_SCATTER_MUL ? a * b
                 : red == MGE_SCATTER_MAX ? (b > a || isnan(b) ? b : a)
                                          : (b < a || isnan(b) ? b : a);
        ref_st(dt, y, k, r);
        return;
    }
    int64_t a = ref_ild(dt, y, k), b = ref_ild(dt, u, i);
    int64_t r = red == MGE_SCATTER_ADD ? (int64_t)((uint64_t)a + (uint64_t)b)
              : red == MGE_SCATTER_MUL ? (int64_t)((uint64_t)a * (uint64_t)b)
              : red == MGE_SCATTER_MAX ? (b > a ? b : a)
                                       : (b < a ? b : a);
    if (dt == MGE_BOOL && red == MGE_SCATTER_ADD)
        r = a || b;
    ref_ist(dt, y, k, r);
}

/* The node's reduction, checked against the kernels' list. */
static mge_status scatter_red(const mge_kctx *ctx, const mge_node *n, int *red, mge_error *err)
{
    *red = (int)mge_node_int(n, MGE_KEY_reduction, MGE_SCATTER_NONE);
    if (*red < MGE_SCATTER_NONE || *red > MGE_SCATTER_MIN)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: reduction %d: expected none, add, mul, max or min",
                             ref_opname(ctx, n), *red);
    return MGE_OK;
}

/* scatter(data, idx, updates): ONNX ScatterElements; with reduction none
 * and repeated indices the last update wins. */
static mge_status scatter_any(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                              mge_error *err)
{
    const mge_tensor *x = in[0], *idx = in[1], *u = in[2];
    mge_tensor *y = out[0];
    int ax;
    mge_status st = elements_setup(ctx, n, x, idx, &ax, err);
    if (st || (st = ref_check(ctx, n, "updates", u, x->dtype, idx->ndim, idx->dims, err)) ||
        (st = ref_check(ctx, n, "output", y, x->dtype, x->ndim, x->dims, err)))
        return st;
    if (y->data == u->data && ref_numel(u) > 0)
        return mge_error_set(err, MGE_ERR_INVALID, "scatter: output may not be the updates' buffer");
    int red;
    if ((st = scatter_red(ctx, n, &red, err)))
        return st;
    copy_data(x, y);
    int64_t xs[MGE_MAX_DIMS], at[MGE_MAX_DIMS] = {0}, cnt = ref_numel(idx);
    strides(x, xs);
    size_t es = mge_dtype_size(x->dtype);
    for (int64_t i = 0; i < cnt; i++) {
        int64_t k = elem_off(x, idx, xs, at, ax, i);
        if (red == MGE_SCATTER_NONE)
            memcpy((char *)y->data + (size_t)k * es, (const char *)u->data + (size_t)i * es, es);
        else
            scatter_combine(x->dtype, red, y->data, k, u->data, i);
        ref_next(idx->ndim, idx->dims, at);
    }
    return MGE_OK;
}

/* scatter_nd(data[r], idx[..., k], updates[idx.dims[:-1] + data.dims[k:]]). */
static mge_status scatter_nd_any(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                 mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *x = in[0], *idx = in[1], *u = in[2];
    mge_tensor *y = out[0];
    const char *name = ref_opname(ctx, n);
    mge_status st = ref_check_data(ctx, n, "data", x, err);
    if (st || (st = kidx_check(name, idx, 0, INT64_MAX, err)) ||
        (st = ref_check(ctx, n, "output", y, x->dtype, x->ndim, x->dims, err)))
        return st;
    int q = idx->ndim, k = q ? (int)idx->dims[q - 1] : 0;
    if (q < 1 || k < 1 || k > x->ndim || q - 1 + x->ndim - k > MGE_MAX_DIMS)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: indices of rank %d with last dim %d for data of rank %d", name,
                             q, k, x->ndim);
    int64_t ud[MGE_MAX_DIMS], xs[MGE_MAX_DIMS], m = 1, slice = 1;
    int nd = 0;
    for (int d = 0; d < q - 1; d++)
        m *= ud[nd++] = idx->dims[d];
    for (int d = k; d < x->ndim; d++)
        slice *= ud[nd++] = x->dims[d];
    if ((st = ref_check(ctx, n, "updates", u, x->dtype, nd, ud, err)))
        return st;
    if (y->data == u->data && ref_numel(u) > 0)
        return mge_error_set(err, MGE_ERR_INVALID, "scatter_nd: output may not be the updates' buffer");
    strides(x, xs);
    if ((st = kidx_check_nd(name, idx, k, x->dims, err)))   /* every component in its own axis' range first */
        return st;
    int red;
    if ((st = scatter_red(ctx, n, &red, err)))
        return st;
    copy_data(x, y);
    size_t es = mge_dtype_size(x->dtype), row = (size_t)slice * es;
    for (int64_t j = 0; j < m && row; j++) {
        int64_t off = 0;
        for (int c = 0; c < k; c++)
            off += kidx_at(idx, j * k + c, x->dims[c]) * xs[c];
        if (red == MGE_SCATTER_NONE)
            memcpy((char *)y->data + (size_t)off * es, (const char *)u->data + (size_t)j * row, row);
        else
            for (int64_t e = 0; e < slice; e++)
                scatter_combine(x->dtype, red, y->data, off + e, u->data, j * slice + e);
    }
    return MGE_OK;
}

/* one_hot(indices[, depth][, values]): the inference's input forms; indices
 * outside [-depth, depth) give an all-off row, as ONNX says. */
static mge_status one_hot_any(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                              mge_error *err)
{
    const mge_tensor *idx = in[0], *vals = NULL;
    mge_tensor *y = out[0];
    const char *name = ref_opname(ctx, n);
    mge_status st = kidx_check(name, idx, 0, INT64_MAX, err);
    if (st)
        return st;
    int64_t depth;
    if (mge_node_attr(n, MGE_KEY_depth)) {
        depth = mge_node_int(n, MGE_KEY_depth, 0);
        vals = n->nin == 2 ? in[1] : NULL;
    } else {
        if (n->nin < 2 || (st = kidx_check(name, in[1], 0, INT64_MAX, err)))
            return st ? st : mge_error_set(err, MGE_ERR_INVALID, "%s: no depth", name);
        if (ref_numel(in[1]) != 1)
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: depth has %lld elements: expected one", name,
                                 (long long)ref_numel(in[1]));
        depth = kidx_ld(in[1]->dtype, in[1]->data, 0);
        vals = n->nin == 3 ? in[2] : NULL;
    }
    if (vals && ((st = ref_check_data(ctx, n, "values", vals, err)) || ref_numel(vals) != 2))
        return st ? st : mge_error_set(err, MGE_ERR_SHAPE, "%s: values: expected two elements", name);
    int64_t av = mge_node_int(n, MGE_KEY_axis, -1);
    int ax = mge_axis(av, idx->ndim + 1);
    if (ax < 0 || depth < 1 || idx->ndim + 1 > MGE_MAX_DIMS)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: axis=%lld, depth %lld for indices of rank %d", name,
                             (long long)av, (long long)depth, idx->ndim);
    int64_t yd[MGE_MAX_DIMS];
    for (int d = 0, s = 0; d <= idx->ndim; d++)
        yd[d] = d == ax ? depth : idx->dims[s++];
    mge_dtype dt = vals ? vals->dtype : y->dtype;
    if ((st = ref_check(ctx, n, "output", y, dt, idx->ndim + 1, yd, err)))
        return st;
    size_t es = mge_dtype_size(dt);
    unsigned char ov[2][8];
    if (vals) {
        memcpy(ov[0], vals->data, es);
        memcpy(ov[1], (const char *)vals->data + es, es);
    } else {
        for (int k = 0; k < 2; k++) {
            if (mge_dtype_is_float(dt))
                ref_st(dt, ov[k], 0, k);
            else
                ref_ist(dt, ov[k], 0, k);
        }
    }
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < ax; d++)
        outer *= yd[d];
    for (int d = ax + 1; d <= idx->ndim; d++)
        inner *= yd[d];
    char *yp = y->data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t c = 0; c < depth; c++)
            for (int64_t i = 0; i < inner; i++) {
                int64_t v = kidx_ld(idx->dtype, idx->data, o * inner + i);
                v = v < 0 ? v + depth : v;
                memcpy(yp + (size_t)((o * depth + c) * inner + i) * es, ov[v == c], es);
            }
    return MGE_OK;
}

void mge_ref_register_index(mge_backend *b)
{
    for (int dt = 0; dt < MGE_NDTYPES; dt++) {
        if (dt == MGE_QS8 || dt == MGE_QS32)
            continue; /* a gathered qs8 would need its scale carried: not yet */
        b->k[MGE_OP_GATHER][dt].run = gather_any;
        b->k[MGE_OP_INDEX_SELECT][dt].run = gather_any;
        b->k[MGE_OP_GATHER_ELEMENTS][dt].run = gather_elements_any;
        b->k[MGE_OP_SCATTER][dt].run = scatter_any;
        b->k[MGE_OP_SCATTER_ND][dt].run = scatter_nd_any;
    }
    REF_EACH_FLOAT(dt) {
        b->k[MGE_OP_GATHER_GRAD][dt].run = gather_grad_any;
        b->k[MGE_OP_GATHER_ELEMENTS_GRAD][dt].run = gather_elements_grad_any;
    }
    b->k[MGE_OP_ONE_HOT][MGE_I32].run = one_hot_any;
    b->k[MGE_OP_ONE_HOT][MGE_I64].run = one_hot_any;
}
