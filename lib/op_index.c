/* op_index.c — shape inference and FLOPs of the indexing ops: gather,
 * index_select, gather_elements, scatter, scatter_nd, one_hot and the
 * gradient ops gather_grad and gather_elements_grad (see lib/ops.def and
 * mge-ops(7)).
 *
 * Indices are i32 or i64; negative ones count from the end of the axis.
 * When the indices are known at plan time (consts, shape arithmetic) they
 * are checked here, and when the data is known too the output's values are
 * computed, so shape(x) -> gather -> concat -> reshape plans without
 * running anything. FLOPs: 0 (data movement), but for the gradient ops: 1
 * per element of dy (one add each). */
#include "internal.h"

#include <stdio.h>
#include <string.h>

static const char *opname(const mge_node *n)
{
    return mge_op_info(n->op)->name;
}

static mge_status need_index_dtype(const mge_node *n, const char *what, const mge_tdesc *t, mge_error *err)
{
    char b[96];
    if (t->dtype == MGE_I32 || t->dtype == MGE_I64)
        return MGE_OK;
    return mge_error_set(err, MGE_ERR_SHAPE, "%s: %s %s: expected dtype i32 or i64", opname(n), what,
                         mge_tdesc_str(t, b, sizeof b));
}

/* Plain data: a moved qs8 element would need its scale carried along. */
static mge_status need_plain(const mge_node *n, const mge_tdesc *x, mge_error *err)
{
    char b[96];
    if (x->dtype != MGE_QS8 && x->dtype != MGE_QS32)
        return MGE_OK;
    return mge_error_set(err, MGE_ERR_SHAPE, "%s: x %s: quantized data is not supported (dequantize first)",
                         opname(n), mge_tdesc_str(x, b, sizeof b));
}

static mge_status get_axis(const mge_node *n, const mge_tdesc *x, int extra, int *ax, mge_error *err)
{
    int64_t v = mge_node_int(n, MGE_KEY_axis, n->op == MGE_OP_ONE_HOT ? -1 : 0);
    const mge_attr *a = mge_node_attr(n, MGE_KEY_axis);
    char b[96];
    if (a && a->n != 1)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: axis has %d values: expected one", opname(n), a->n);
    *ax = mge_axis(v, x->ndim + extra);
    if (*ax < 0)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: axis=%lld is out of range for %s (rank %d)", opname(n),
                             (long long)v, mge_tdesc_str(x, b, sizeof b), x->ndim);
    return MGE_OK;
}

/* Known indices all in [-bound, bound); a plan-time error naming the first
 * that is not. */
static mge_status check_known(const mge_node *n, const mge_tdesc *idx, int ax, int64_t bound, mge_error *err)
{
    if (!idx->known)
        return MGE_OK;
    int64_t cnt = mge_tdesc_numel(idx);
    for (int64_t i = 0; i < cnt && i < MGE_TDESC_NVAL; i++) {
        double v = idx->val[i];
        if (v < (double)-bound || v >= (double)bound)
            return mge_error_set(err, MGE_ERR_SHAPE,
                                 "%s: index %lld at position %lld is out of range for axis %d of size %lld", opname(n),
                                 (long long)v, (long long)i, ax, (long long)bound);
    }
    return MGE_OK;
}

static int64_t norm_idx(double v, int64_t bound)
{
    int64_t k = (int64_t)v;
    return k < 0 ? k + bound : k;
}

/* outer x bound x inner around axis ax of x. */
static void split_axis(const mge_tdesc *x, int ax, int64_t *outer, int64_t *inner)
{
    *outer = *inner = 1;
    for (int d = 0; d < ax; d++)
        *outer *= x->dims[d];
    for (int d = ax + 1; d < x->ndim; d++)
        *inner *= x->dims[d];
}

static int small(const mge_tdesc *t)
{
    int64_t k = mge_tdesc_numel(t);
    return k >= 0 && k <= MGE_TDESC_NVAL;
}

/* gather / index_select: x.dims[:ax] + idx.dims + x.dims[ax+1:]. */
static mge_status gather_infer(const mge_node *n, const mge_tdesc *x, const mge_tdesc *idx, mge_tdesc *out,
                               mge_error *err)
{
    char bx[96], bi[96];
    mge_status st;
    int ax;
    if ((st = need_index_dtype(n, "indices", idx, err)) || (st = need_plain(n, x, err)))
        return st;
    if (x->ndim < 1)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x %s is a scalar: expected rank >= 1", opname(n),
                             mge_tdesc_str(x, bx, sizeof bx));
    if (n->op == MGE_OP_INDEX_SELECT && idx->ndim != 1)
        return mge_error_set(err, MGE_ERR_SHAPE, "index_select: indices %s: expected rank 1 (gather takes any rank)",
                             mge_tdesc_str(idx, bi, sizeof bi));
    if (x->ndim - 1 + idx->ndim > MGE_MAX_DIMS)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x %s and indices %s give rank %d: at most %d", opname(n),
                             mge_tdesc_str(x, bx, sizeof bx), mge_tdesc_str(idx, bi, sizeof bi),
                             x->ndim - 1 + idx->ndim, MGE_MAX_DIMS);
    if ((st = get_axis(n, x, 0, &ax, err)) || (st = check_known(n, idx, ax, x->dims[ax], err)))
        return st;
    out->dtype = x->dtype;
    out->ndim = 0;
    for (int d = 0; d < ax; d++)
        out->dims[out->ndim++] = x->dims[d];
    for (int d = 0; d < idx->ndim; d++)
        out->dims[out->ndim++] = idx->dims[d];
    for (int d = ax + 1; d < x->ndim; d++)
        out->dims[out->ndim++] = x->dims[d];
    if (x->known && idx->known && small(out)) {
        int64_t outer, inner, k = mge_tdesc_numel(idx), dim = x->dims[ax], at = 0;
        split_axis(x, ax, &outer, &inner);
        for (int64_t o = 0; o < outer; o++)
            for (int64_t j = 0; j < k; j++)
                for (int64_t i = 0; i < inner; i++)
                    out->val[at++] = x->val[(o * dim + norm_idx(idx->val[j], dim)) * inner + i];
        out->known = 1;
    }
    return MGE_OK;
}

/* idx (of x's rank) fits x off the axis: idx.dims[d] <= x.dims[d]. */
static mge_status elements_fit(const mge_node *n, const mge_tdesc *x, const mge_tdesc *idx, int ax, mge_error *err)
{
    char bx[96], bi[96];
    int ok = idx->ndim == x->ndim;
    for (int d = 0; ok && d < x->ndim; d++)
        ok = d == ax || idx->dims[d] <= x->dims[d];
    if (ok)
        return MGE_OK;
    return mge_error_set(err, MGE_ERR_SHAPE,
                         "%s: indices %s do not fit x %s: expected the same rank and each dim but axis %d at most x's",
                         opname(n), mge_tdesc_str(idx, bi, sizeof bi), mge_tdesc_str(x, bx, sizeof bx), ax);
}

/* Offset in x of position i of idx (both row-major) with the axis replaced. */
static int64_t elem_offset(const mge_tdesc *x, const mge_tdesc *idx, int ax, int64_t i, int64_t a)
{
    int64_t off = 0, stride = 1;
    for (int d = x->ndim - 1; d >= 0; d--) {
        int64_t c = i % idx->dims[d];
        i /= idx->dims[d];
        off += (d == ax ? a : c) * stride;
        stride *= x->dims[d];
    }
    return off;
}

static mge_status gather_elements_infer(const mge_node *n, const mge_tdesc *x, const mge_tdesc *idx, mge_tdesc *out,
                                        mge_error *err)
{
    mge_status st;
    int ax;
    if ((st = need_index_dtype(n, "indices", idx, err)) || (st = need_plain(n, x, err)) ||
        (st = get_axis(n, x, 0, &ax, err)) ||
        (st = elements_fit(n, x, idx, ax, err)) || (st = check_known(n, idx, ax, x->dims[ax], err)))
        return st;
    *out = *idx;
    out->dtype = x->dtype;
    out->known = 0;
    if (x->known && idx->known && small(out)) {
        int64_t k = mge_tdesc_numel(idx);
        for (int64_t i = 0; i < k; i++)
            out->val[i] = x->val[elem_offset(x, idx, ax, i, norm_idx(idx->val[i], x->dims[ax]))];
        out->known = 1;
    }
    return MGE_OK;
}

static int same_shape(const mge_tdesc *a, const mge_tdesc *b)
{
    if (a->ndim != b->ndim)
        return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->dims[d] != b->dims[d])
            return 0;
    return 1;
}

static mge_status scatter_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    const mge_tdesc *x = &in[0], *idx = &in[1], *u = &in[2];
    char bu[96], bi[96];
    mge_status st;
    int ax;
    if ((st = need_index_dtype(n, "indices", idx, err)) || (st = need_plain(n, x, err)) ||
        (st = get_axis(n, x, 0, &ax, err)) ||
        (st = elements_fit(n, x, idx, ax, err)) || (st = check_known(n, idx, ax, x->dims[ax], err)))
        return st;
    if (u->dtype != x->dtype || !same_shape(u, idx))
        return mge_error_set(err, MGE_ERR_SHAPE, "scatter: updates %s: expected the indices' shape %s and x's dtype",
                             mge_tdesc_str(u, bu, sizeof bu), mge_tdesc_str(idx, bi, sizeof bi));
    *out = *x;
    out->known = 0;
    if (x->known && idx->known && u->known && small(out)) {
        memcpy(out->val, x->val, sizeof out->val);
        int64_t k = mge_tdesc_numel(idx);
        for (int64_t i = 0; i < k; i++)
            out->val[elem_offset(x, idx, ax, i, norm_idx(idx->val[i], x->dims[ax]))] = u->val[i];
        out->known = 1;
    }
    return MGE_OK;
}

/* scatter_nd(data[r], idx[q] with idx.dims[q-1] = k <= r, updates
 * idx.dims[:q-1] + data.dims[k:]). */
static mge_status scatter_nd_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    const mge_tdesc *x = &in[0], *idx = &in[1], *u = &in[2];
    char bx[96], bi[96], bu[96];
    mge_status st;
    if ((st = need_index_dtype(n, "indices", idx, err)) || (st = need_plain(n, x, err)))
        return st;
    int q = idx->ndim, k = q ? (int)idx->dims[q - 1] : -1;
    if (q < 1 || k < 1 || k > x->ndim)
        return mge_error_set(err, MGE_ERR_SHAPE,
                             "scatter_nd: indices %s for data %s: expected rank >= 1 and a last dim in 1..%d",
                             mge_tdesc_str(idx, bi, sizeof bi), mge_tdesc_str(x, bx, sizeof bx), x->ndim);
    mge_tdesc want = {.dtype = x->dtype, .ndim = 0};
    for (int d = 0; d < q - 1; d++)
        want.dims[want.ndim++] = idx->dims[d];
    for (int d = k; d < x->ndim && want.ndim < MGE_MAX_DIMS; d++)
        want.dims[want.ndim++] = x->dims[d];
    if (q - 1 + x->ndim - k > MGE_MAX_DIMS || u->dtype != x->dtype || !same_shape(u, &want))
        return mge_error_set(err, MGE_ERR_SHAPE, "scatter_nd: updates %s: expected %s", mge_tdesc_str(u, bu, sizeof bu),
                             mge_tdesc_str(&want, bx, sizeof bx));
    if (idx->known) {
        int64_t cnt = mge_tdesc_numel(idx);
        for (int64_t i = 0; i < cnt && i < MGE_TDESC_NVAL; i++) {
            int64_t b = x->dims[i % k];
            if (idx->val[i] < (double)-b || idx->val[i] >= (double)b)
                return mge_error_set(err, MGE_ERR_SHAPE,
                                     "scatter_nd: index %lld at position %lld is out of range for axis %d of size %lld",
                                     (long long)idx->val[i], (long long)i, (int)(i % k), (long long)b);
        }
    }
    *out = *x;
    out->known = 0;
    return MGE_OK;
}

/* one_hot(indices[, depth][, values]; depth?, axis, dtype?): with the
 * depth attribute the inputs are (indices[, values]), without it
 * (indices, depth[, values]) and depth must be known at plan time. */
static mge_status one_hot_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    const mge_tdesc *idx = &in[0], *vals = NULL;
    char b[96];
    mge_status st;
    int64_t depth;
    if ((st = need_index_dtype(n, "indices", idx, err)))
        return st;
    if (mge_node_attr(n, MGE_KEY_depth)) {
        depth = mge_node_int(n, MGE_KEY_depth, 0);
        if (n->nin > 2)
            return mge_error_set(err, MGE_ERR_INVALID,
                                 "one_hot: depth is an attribute and an input: expected (indices[, values]) with it");
        vals = n->nin == 2 ? &in[1] : NULL;
    } else {
        if (n->nin < 2)
            return mge_error_set(err, MGE_ERR_INVALID, "one_hot: needs the depth attribute or a depth input");
        const mge_tdesc *dt = &in[1];
        if ((st = need_index_dtype(n, "depth", dt, err)))
            return st;
        if (mge_tdesc_numel(dt) != 1)
            return mge_error_set(err, MGE_ERR_SHAPE, "one_hot: depth %s: expected one element",
                                 mge_tdesc_str(dt, b, sizeof b));
        if (!dt->known)
            return mge_error_set(err, MGE_ERR_SHAPE,
                                 "one_hot: the depth input is not known at plan time: expected a const or a value "
                                 "computed from shapes (or the depth attribute)");
        depth = (int64_t)dt->val[0];
        vals = n->nin == 3 ? &in[2] : NULL;
    }
    if (depth < 1)
        return mge_error_set(err, MGE_ERR_INVALID, "one_hot: depth %lld: expected >= 1", (long long)depth);
    if (idx->ndim + 1 > MGE_MAX_DIMS)
        return mge_error_set(err, MGE_ERR_SHAPE, "one_hot: indices of rank %d: at most %d", idx->ndim,
                             MGE_MAX_DIMS - 1);
    const mge_attr *da = mge_node_attr(n, MGE_KEY_dtype);
    if (da && (da->i[0] < 0 || da->i[0] >= MGE_NDTYPES))
        return mge_error_set(err, MGE_ERR_INVALID, "one_hot: dtype=%lld is not a dtype", (long long)da->i[0]);
    mge_dtype odt = da ? (mge_dtype)da->i[0] : MGE_F32;
    if (vals) {
        if (mge_tdesc_numel(vals) != 2 || vals->ndim != 1)
            return mge_error_set(err, MGE_ERR_SHAPE, "one_hot: values %s: expected [off, on], two elements",
                                 mge_tdesc_str(vals, b, sizeof b));
        if (da && odt != vals->dtype)
            return mge_error_set(err, MGE_ERR_INVALID, "one_hot: dtype=%s but values are %s: expected one dtype",
                                 mge_dtype_name(odt), mge_dtype_name(vals->dtype));
        odt = vals->dtype;
    }
    if (odt == MGE_QS8 || odt == MGE_QS32)
        return mge_error_set(err, MGE_ERR_INVALID, "one_hot: dtype %s: expected a plain dtype", mge_dtype_name(odt));
    int ax;
    if ((st = get_axis(n, idx, 1, &ax, err)))
        return st;
    out->dtype = odt;
    out->ndim = idx->ndim + 1;
    for (int d = 0, s = 0; d < out->ndim; d++)
        out->dims[d] = d == ax ? depth : idx->dims[s++];
    if (idx->known && (!vals || vals->known) && small(out)) {
        double off = vals ? vals->val[0] : 0, on = vals ? vals->val[1] : 1;
        int64_t outer, inner;
        split_axis(out, ax, &outer, &inner);
        for (int64_t o = 0, at = 0; o < outer; o++)
            for (int64_t c = 0; c < depth; c++)
                for (int64_t i = 0; i < inner; i++) {
                    double v = idx->val[o * inner + i];
                    int64_t k = v < 0 ? (int64_t)v + depth : (int64_t)v;
                    out->val[at++] = k == c ? on : off;   /* out of range: all off, as ONNX */
                }
        out->known = 1;
    }
    return MGE_OK;
}

/* gather_grad(dy, idx, x) and gather_elements_grad(dy, idx, x): like x;
 * dy must have the forward output's shape. */
static mge_status grad_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    const mge_tdesc *dy = &in[0], *idx = &in[1], *x = &in[2];
    mge_tdesc y;
    memset(&y, 0, sizeof y);
    mge_node fw = *n;
    fw.op = n->op == MGE_OP_GATHER_GRAD ? MGE_OP_GATHER : MGE_OP_GATHER_ELEMENTS;
    mge_tdesc xi = *x, ii = *idx;
    xi.known = ii.known = 0;
    mge_status st = fw.op == MGE_OP_GATHER ? gather_infer(&fw, &xi, &ii, &y, err)
                                           : gather_elements_infer(&fw, &xi, &ii, &y, err);
    if (st)
        return st;
    if (!mge_dtype_is_float(x->dtype) || dy->dtype != x->dtype || !same_shape(dy, &y)) {
        char bd[96], by[96];
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: dy %s: expected %s (the forward output, a float dtype)",
                             opname(n), mge_tdesc_str(dy, bd, sizeof bd), mge_tdesc_str(&y, by, sizeof by));
    }
    *out = *x;
    out->known = 0;
    return MGE_OK;
}

mge_status mge_index_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    switch (n->op) {
    case MGE_OP_GATHER:
    case MGE_OP_INDEX_SELECT: return gather_infer(n, &in[0], &in[1], out, err);
    case MGE_OP_GATHER_ELEMENTS: return gather_elements_infer(n, &in[0], &in[1], out, err);
    case MGE_OP_SCATTER: return scatter_infer(n, in, out, err);
    case MGE_OP_SCATTER_ND: return scatter_nd_infer(n, in, out, err);
    case MGE_OP_ONE_HOT: return one_hot_infer(n, in, out, err);
    case MGE_OP_GATHER_GRAD:
    case MGE_OP_GATHER_ELEMENTS_GRAD: return grad_infer(n, in, out, err);
    }
    return mge_error_set(err, MGE_ERR_INVALID, "op %d is not an indexing op", n->op);
}

double mge_index_flops(const mge_node *n, const mge_tdesc *in, const mge_tdesc *out)
{
    if (n->op == MGE_OP_GATHER_GRAD || n->op == MGE_OP_GATHER_ELEMENTS_GRAD)
        return mge_tdesc_count(&in[0]);
    return 0;
}
