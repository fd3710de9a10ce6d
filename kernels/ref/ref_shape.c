/* ref_shape.c — reshape, flatten, transpose, concat, slice, slice_grad,
 * copy and the dynamic shape ops (shape, size, expand, tile, squeeze,
 * unsqueeze, split, range, constant_of_shape, tile_grad) for every dtype,
 * by bytes (element size from the dtype); tile_grad sums, for the float
 * dtypes. reshape/flatten/squeeze/unsqueeze copy only when the executor
 * did not make the output a view of the input. Shape, bounds and repeats
 * inputs are read from their tensors and the outputs checked against what
 * they give (kernels/kshape.h holds the arithmetic inference shares). */
#include "ref.h"
#include "kshape.h"

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

/* slice: the plan's elements of x, one at a time (cpu_shape.c copies rows). */
static mge_status slice_any(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                            mge_error *err)
{
    const mge_tensor *x = in[0];
    mge_tensor *y = out[0];
    mge_slice_plan p;
    mge_status st = ref_check_data(ctx, n, "x", x, err);
    if (st || (st = mge_kshape_slice_plan(ref_opname(ctx, n), n, in, 1, x, &p, err)) ||
        (st = ref_check(ctx, n, "output", y, x->dtype, x->ndim, p.len, err)))
        return st;
    if (y->data == x->data && ref_numel(y) > 0)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: output may not be the input's buffer", ref_opname(ctx, n));
    size_t es = mge_dtype_size(x->dtype);
    int64_t cnt = ref_numel(y), idx[MGE_MAX_DIMS] = {0};
    for (int64_t i = 0; i < cnt; i++) {
        memcpy((char *)y->data + (size_t)i * es, (const char *)x->data + (size_t)mge_slice_offset(&p, idx) * es, es);
        ref_next(x->ndim, p.len, idx);
    }
    return MGE_OK;
}

/* slice_grad(dy, x[, bounds]): zeros of x's shape, dy where slice took its elements. */
static mge_status slice_grad_any(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                 mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *dy = in[0], *x = in[1];
    mge_tensor *dx = out[0];
    mge_slice_plan p;
    mge_status st;
    if (x->ndim < 0 || x->ndim > MGE_MAX_DIMS)
        return mge_error_set(err, MGE_ERR_SHAPE, "slice_grad: x has rank %d", x->ndim);
    if ((st = mge_kshape_slice_plan(ref_opname(ctx, n), n, in, 2, x, &p, err)) ||
        (st = ref_check(ctx, n, "dy", dy, x->dtype, x->ndim, p.len, err)) ||
        (st = ref_check(ctx, n, "output", dx, x->dtype, x->ndim, x->dims, err)))
        return st;
    if (dx->data == dy->data && ref_numel(dy) > 0)
        return mge_error_set(err, MGE_ERR_INVALID, "slice_grad: output may not be dy's buffer");
    size_t es = mge_dtype_size(x->dtype);
    if (ref_numel(x))
        memset(dx->data, 0, (size_t)ref_numel(x) * es);
    int64_t cnt = ref_numel(dy), idx[MGE_MAX_DIMS] = {0};
    for (int64_t i = 0; i < cnt; i++) {
        memcpy((char *)dx->data + (size_t)mge_slice_offset(&p, idx) * es, (const char *)dy->data + (size_t)i * es, es);
        ref_next(x->ndim, p.len, idx);
    }
    return MGE_OK;
}

/* ---------------------------------------------------------------- dynamic shapes */

static mge_status shape_any(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                            mge_error *err)
{
    const mge_tensor *x = in[0];
    int a, b;
    int64_t k = mge_shape_span(n, x->ndim, &a, &b);
    mge_status st = ref_check(ctx, n, "output", out[0], MGE_I64, 1, &k, err);
    for (int i = 0; !st && i < k; i++)
        ((int64_t *)out[0]->data)[i] = x->dims[a + i];
    return st;
}

static mge_status size_any(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                           mge_error *err)
{
    mge_status st = ref_check(ctx, n, "output", out[0], MGE_I64, 0, NULL, err);
    if (!st)
        *(int64_t *)out[0]->data = ref_numel(in[0]);
    return st;
}

/* y's element offset i -> x's (broadcast: dims of 1 stay; tile: modulo). */
static int64_t bcast_off(int nd, const int64_t *ydims, const int64_t *idx, int xnd, const int64_t *xd, int tile)
{
    int64_t off = 0;
    for (int d = 0; d < xnd; d++) {
        int64_t i = idx[d + nd - xnd];
        off = off * xd[d] + (tile ? (xd[d] ? i % xd[d] : 0) : xd[d] == 1 ? 0 : i);
    }
    (void)ydims;
    return off;
}

static mge_status expand_tile_any(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                  mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *x = in[0];
    mge_tensor *y = out[0];
    int tile = n->op == MGE_OP_TILE, cnt = -1, nd = x->ndim;
    int64_t v[MGE_MAX_DIMS], yd[MGE_MAX_DIMS];
    mge_status st = ref_check_data(ctx, n, "x", x, err);
    if (st || (st = mge_kshape_list(ref_opname(ctx, n), n, in, tile ? MGE_KEY_repeats : MGE_KEY_shape, tile ? "repeats" : "shape", v, &cnt,
                             err)))
        return st;
    if ((st = mge_kshape_out_dims(ref_opname(ctx, n), tile, x, v, cnt, &nd, yd, err)))
        return st;
    if ((st = ref_check(ctx, n, "output", y, x->dtype, nd, yd, err)))
        return st;
    if (y->data == x->data && ref_numel(y) > 0)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: output may not be the input's buffer", ref_opname(ctx, n));
    size_t es = mge_dtype_size(x->dtype);
    int64_t m = ref_numel(y), idx[MGE_MAX_DIMS] = {0};
    for (int64_t i = 0; i < m; i++) {
        int64_t o = bcast_off(nd, yd, idx, x->ndim, x->dims, tile);
        memcpy((char *)y->data + (size_t)i * es, (const char *)x->data + (size_t)o * es, es);
        ref_next(nd, yd, idx);
    }
    return MGE_OK;
}

/* tile_grad(dy, x): dx[i] = the sum of dy over the copies of x[i], in double. */
static mge_status tile_grad_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                  mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *dy = in[0], *x = in[1];
    mge_tensor *dx = out[0];
    mge_status st = ref_check_data(ctx, n, "dy", dy, err);
    if (st || (st = ref_check(ctx, n, "output", dx, dy->dtype, x->ndim, x->dims, err)))
        return st;
    int nd = x->ndim, ok = dy->ndim == nd;
    int64_t r[MGE_MAX_DIMS], ystr[MGE_MAX_DIMS], s = 1;
    for (int d = 0; ok && d < nd; d++) {
        ok = x->dims[d] ? dy->dims[d] % x->dims[d] == 0 : dy->dims[d] == 0;
        r[d] = x->dims[d] ? dy->dims[d] / x->dims[d] : 0;
    }
    if (!ok)
        return mge_error_set(err, MGE_ERR_SHAPE, "tile_grad: dy is not a tiling of x");
    for (int d = nd - 1; d >= 0; d--)
        ystr[d] = s, s *= dy->dims[d];
    int64_t m = ref_numel(dx), xi[MGE_MAX_DIMS] = {0};
    if (ref_numel(dy) == 0) { /* repeated 0 times: no copies to sum */
        for (int64_t i = 0; i < m; i++)
            ref_st(dx->dtype, dx->data, i, 0);
        return MGE_OK;
    }
    for (int64_t i = 0; i < m; i++) {
        double acc = 0;
        int64_t ri[MGE_MAX_DIMS] = {0};
        do {
            int64_t off = 0;
            for (int d = 0; d < nd; d++)
                off += (ri[d] * x->dims[d] + xi[d]) * ystr[d];
            acc += ref_ld(dy->dtype, dy->data, off);
        } while (ref_next(nd, r, ri));
        ref_st(dx->dtype, dx->data, i, acc);
        ref_next(nd, x->dims, xi);
    }
    return MGE_OK;
}

/* split: outputs of x's shape but along the axis, whose sizes add up to
 * x's (and equal the sizes given, when given). */
static mge_status split_any(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                            mge_error *err)
{
    const mge_tensor *x = in[0];
    int ax, cnt = -1;
    int64_t v[MGE_MAX_DIMS];
    mge_status st = ref_check_data(ctx, n, "x", x, err);
    if (st || (st = ref_axis(ctx, n, x, 0, &ax, err)) ||
        (st = mge_kshape_list(ref_opname(ctx, n), n, in, MGE_KEY_sizes, "sizes", v, &cnt, err)))
        return st;
    if (cnt >= 0 && cnt != n->nout)
        return mge_error_set(err, MGE_ERR_SHAPE, "split: %d sizes for %d outputs", cnt, n->nout);
    int64_t sum = 0, outer = 1, inner = 1, yd[MGE_MAX_DIMS];
    memcpy(yd, x->dims, sizeof yd);
    for (int k = 0; k < n->nout; k++) {
        yd[ax] = out[k]->ndim == x->ndim ? out[k]->dims[ax] : -1;
        if (yd[ax] < 0 || (cnt >= 0 && v[k] != yd[ax]))
            return mge_error_set(err, MGE_ERR_SHAPE, "split: output %d does not match the sizes", k);
        if ((st = ref_check(ctx, n, "output", out[k], x->dtype, x->ndim, yd, err)))
            return st;
        sum += yd[ax];
    }
    if (sum != x->dims[ax])
        return mge_error_set(err, MGE_ERR_SHAPE, "split: the outputs hold %lld along axis %d of %lld",
                             (long long)sum, ax, (long long)x->dims[ax]);
    for (int d = 0; d < ax; d++)
        outer *= x->dims[d];
    for (int d = ax + 1; d < x->ndim; d++)
        inner *= x->dims[d];
    size_t es = mge_dtype_size(x->dtype), xrow = (size_t)(x->dims[ax] * inner) * es, at = 0;
    for (int k = 0; k < n->nout; k++) {
        size_t row = (size_t)(out[k]->dims[ax] * inner) * es;
        for (int64_t o = 0; o < outer && row; o++)
            memcpy((char *)out[k]->data + (size_t)o * row, (const char *)x->data + (size_t)o * xrow + at, row);
        at += row;
    }
    return MGE_OK;
}

/* A scalar input's value as a double (f32, i32, i64). */
static mge_status ref_scalar(const mge_kctx *ctx, const mge_node *n, const char *what, const mge_tensor *t, double *v,
                             mge_error *err)
{
    mge_status st = ref_check_data(ctx, n, what, t, err);
    if (st)
        return st;
    if (ref_numel(t) != 1 || (t->dtype != MGE_F32 && t->dtype != MGE_I32 && t->dtype != MGE_I64))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: %s: expected one f32, i32 or i64 value", ref_opname(ctx, n),
                             what);
    *v = t->dtype == MGE_F32 ? ref_ld(t->dtype, t->data, 0) : (double)ref_ild(t->dtype, t->data, 0);
    return MGE_OK;
}

static mge_status range_any(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                            mge_error *err)
{
    double v[3];
    static const char *const what[3] = {"start", "limit", "delta"};
    mge_status st = MGE_OK;
    for (int k = 0; k < 3 && !st; k++) {
        st = ref_scalar(ctx, n, what[k], in[k], &v[k], err);
        if (!st && in[k]->dtype != in[0]->dtype)
            st = mge_error_set(err, MGE_ERR_SHAPE, "range: %s's dtype differs from start's", what[k]);
    }
    if (st)
        return st;
    int isint = in[0]->dtype != MGE_F32;
    int64_t len = mge_range_len(isint, v[0], v[1], v[2]);
    if (len < 0)
        return mge_error_set(err, MGE_ERR_SHAPE, "range: delta 0 or an unbounded length");
    if ((st = ref_check(ctx, n, "output", out[0], in[0]->dtype, 1, &len, err)))
        return st;
    for (int64_t i = 0; i < len; i++) {
        if (isint)
            ref_ist(in[0]->dtype, out[0]->data, i, (int64_t)v[0] + i * (int64_t)v[2]);
        else
            ref_st(MGE_F32, out[0]->data, i, v[0] + (double)i * v[2]);
    }
    return MGE_OK;
}

static mge_status constant_of_shape_any(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                        mge_tensor *const *out, mge_error *err)
{
    int64_t sv[MGE_MAX_DIMS];
    int ns = 0;
    int64_t dt = mge_node_int(n, MGE_KEY_dtype, MGE_F32);
    mge_status st = mge_kshape_ints(ref_opname(ctx, n), "shape", in[0], MGE_MAX_DIMS, sv, &ns, err);
    if (st)
        return st;
    if (dt < 0 || dt >= MGE_NDTYPES || dt == MGE_QS8 || dt == MGE_QS32)
        return mge_error_set(err, MGE_ERR_INVALID, "constant_of_shape: dtype %lld is not a plain dtype",
                             (long long)dt);
    mge_tensor *y = out[0];
    if ((st = ref_check(ctx, n, "output", y, (mge_dtype)dt, ns, sv, err)))
        return st;
    double v = mge_node_float(n, MGE_KEY_value, 0);
    size_t es = mge_dtype_size(y->dtype);
    int64_t m = ref_numel(y);
    if (m == 0)
        return MGE_OK;
    /* one element, then doubling copies */
    if (mge_dtype_is_float(y->dtype))
        ref_st(y->dtype, y->data, 0, v);
    else
        ref_ist(y->dtype, y->data, 0, mge_kval_int(v));
    for (int64_t have = 1; have < m;) {
        int64_t c = have < m - have ? have : m - have;
        memcpy((char *)y->data + (size_t)have * es, y->data, (size_t)c * es);
        have += c;
    }
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
        b->k[MGE_OP_SLICE_GRAD][dt].run = slice_grad_any;
        b->k[MGE_OP_SHAPE][dt].run = shape_any;
        b->k[MGE_OP_SIZE][dt].run = size_any;
        b->k[MGE_OP_EXPAND][dt].run = expand_tile_any;
        b->k[MGE_OP_TILE][dt].run = expand_tile_any;
        b->k[MGE_OP_SQUEEZE][dt].run = reshape_any;
        b->k[MGE_OP_UNSQUEEZE][dt].run = reshape_any;
        b->k[MGE_OP_SPLIT][dt].run = split_any;
    }
    b->k[MGE_OP_CONSTANT_OF_SHAPE][MGE_I64].run = constant_of_shape_any;
    b->k[MGE_OP_CONSTANT_OF_SHAPE][MGE_I32].run = constant_of_shape_any;
    b->k[MGE_OP_RANGE][MGE_F32].run = range_any;
    b->k[MGE_OP_RANGE][MGE_I32].run = range_any;
    b->k[MGE_OP_RANGE][MGE_I64].run = range_any;
    REF_EACH_FLOAT(dt)
        b->k[MGE_OP_TILE_GRAD][dt].run = tile_grad_float;
}
