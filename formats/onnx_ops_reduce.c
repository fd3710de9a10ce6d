/* onnx_ops_reduce.c — ONNX converters for the ops along axes: Softmax,
 * LogSoftmax, Hardmax, the Reduce* family, ArgMax/ArgMin, CumSum and TopK.
 *
 * Softmax before opset 13 coerces x to 2-D at axis ([prod(:axis),
 * prod(axis:)]) and normalizes each row: mge's softmax over the last axis
 * of x flattened from axis, reshaped back to x's shape. From 13 it is one
 * axis, as mge's. Reduce* axes are an attribute up to opset 12 (ReduceSum)
 * or 17 (the others), an optional input after, which mge needs known at
 * import; no axes reduce all, or nothing with noop_with_empty_axes. The
 * reductions mge has no op for are lowered (L1: sum |x|, L2: sqrt sum x^2,
 * LogSum, LogSumExp with the maximum taken out first, SumSquare). */
#include "onnx.h"

#include <math.h>
#include <string.h>

/* onnx_ops_math.c */
int mge_onnx_scalar(mge_onnx_ctx *c, mge_onnx_node *n, mge_dtype dt, double v);

/* ---------------------------------------------------------------- helpers */

static mge_status need_x(mge_onnx_ctx *c, mge_onnx_node *n, int *x)
{
    if ((*x = mge_onnx_in(c, n, 0)) < 0)
        return mge_onnx_fail(c, n, "input 0 is missing");
    return MGE_OK;
}

static int known_dim(int64_t d)
{
    return d >= 0 && !mge_dim_is_symbol(d);
}

static mge_attr cast_attr(mge_dtype dt)
{
    return mge_onnx_ai(MGE_KEY_dtype, dt);
}

/* 0, 1, ..., d-1 along dim ax of a rank-r tensor: i64 [d, 1, ...]. */
static int iota(mge_onnx_ctx *c, mge_onnx_node *n, int64_t d, int ax, int r)
{
    mge_tensor t;
    int64_t dims[MGE_MAX_DIMS];
    for (int i = 0; i < r - ax; i++)
        dims[i] = i ? 1 : d;
    if (mge_tensor_alloc(&t, MGE_I64, r - ax, dims, c->err))
        return -1;
    for (int64_t i = 0; i < d; i++)
        ((int64_t *)t.data)[i] = i;
    return mge_onnx_const(c, n, &t);
}

/* ---------------------------------------------------------------- Softmax, LogSoftmax, Hardmax */

/* Hardmax along axis ax of x (its length known): argmax == index, as x's dtype. */
static int hardmax(mge_onnx_ctx *c, mge_onnx_node *n, int x, int ax, int last)
{
    const mge_value *xv = mge_onnx_value(c, x);
    if (!known_dim(xv->dims[ax])) {
        mge_onnx_unsupported(c, n, "Hardmax along a dim not known at import");
        return -1;
    }
    mge_attr at[2] = {mge_onnx_ai(MGE_KEY_axis, ax), mge_onnx_ab(MGE_KEY_keepdim, 1)};
    int am = mge_onnx_emit_tmp(c, n, MGE_OP_ARGMAX, 1, &x, 2, at);
    int eq = mge_onnx_emit2(c, n, MGE_OP_EQUAL, am, iota(c, n, xv->dims[ax], ax, xv->ndim));
    mge_attr ca[1] = {cast_attr(xv->dtype)};
    if (eq < 0)
        return -1;
    if (last)
        return mge_onnx_emit(c, n, MGE_OP_CAST, 1, &eq, 1, ca, 1) < 0 ? -1 : 0;
    return mge_onnx_emit_tmp(c, n, MGE_OP_CAST, 1, &eq, 1, ca);
}

static mge_status conv_softmax(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x;
    mge_status s;
    if ((s = need_x(c, n, &x)))
        return s;
    const mge_value *xv = mge_onnx_value(c, x);
    int r = xv->ndim, hard = strcmp(n->op_type, "Hardmax") == 0;
    int op = strcmp(n->op_type, "LogSoftmax") == 0 ? MGE_OP_LOG_SOFTMAX : MGE_OP_SOFTMAX;
    if (!mge_dtype_is_float(xv->dtype))
        return mge_onnx_unsupported(c, n, "%s over %s", n->op_type, mge_dtype_name(xv->dtype));
    if (r < 1)
        return mge_onnx_fail(c, n, "x is a scalar: expected rank >= 1");
    int64_t a = mge_onnx_attr_i(n, "axis", c->opset < 13 ? 1 : -1);
    int ax = mge_onnx_axis(a, r);
    if (ax < 0)
        return mge_onnx_fail(c, n, "axis %lld is out of range for rank %d", (long long)a, r);
    if (c->opset >= 13 || ax == r - 1) {
        if (hard)
            return hardmax(c, n, x, ax, 1) < 0 ? (c->err->code ? c->err->code : MGE_ERR_UNSUPPORTED) : MGE_OK;
        mge_attr at[1] = {mge_onnx_ai(MGE_KEY_axis, ax)};
        return mge_onnx_finish(c, n, op, 1, &x, 1, at);
    }
    /* the 2-D coercion: rows are x flattened from axis */
    mge_attr fa[1] = {mge_onnx_ai(MGE_KEY_start, ax)};
    int f = mge_onnx_emit_tmp(c, n, MGE_OP_FLATTEN, 1, &x, 1, fa), y;
    if (hard) {
        y = f < 0 ? -1 : hardmax(c, n, f, ax, 0);
        if (y < 0)
            return c->err->code ? c->err->code : MGE_ERR_UNSUPPORTED;
    } else {
        mge_attr at[1] = {mge_onnx_ai(MGE_KEY_axis, -1)};
        y = mge_onnx_emit_tmp(c, n, op, 1, &f, 1, at);
    }
    int sh = mge_onnx_emit_tmp(c, n, MGE_OP_SHAPE, 1, &x, 0, NULL);
    int in[2] = {y, sh};
    return mge_onnx_finish(c, n, MGE_OP_RESHAPE, 2, in, 0, NULL);
}

/* ---------------------------------------------------------------- Reduce* */

/* The reduced axes of node n over rank r: *all when every axis, *noop
 * when none (noop_with_empty_axes and no axes). */
static mge_status reduce_axes(mge_onnx_ctx *c, mge_onnx_node *n, int r, int64_t *ax, int *nax, int *all, int *noop)
{
    int from_input = strcmp(n->op_type, "ReduceSum") == 0 ? c->opset >= 13 : c->opset >= 18;
    int64_t v[MGE_MAX_DIMS + 1];
    int cnt = 0;
    *all = *noop = 0;
    if (from_input) {
        int a = mge_onnx_in(c, n, 1);
        if (a >= 0) {
            const mge_value *av = mge_onnx_value(c, a);
            if (av->dtype != MGE_I64 || av->ndim > 1)
                return mge_onnx_fail(c, n, "axes must be a 1-D int64 tensor");
            /* declared [0]: empty whatever its run-time value */
            mge_status s = av->ndim == 1 && av->dims[0] == 0
                               ? MGE_OK
                               : mge_onnx_known_ints(c, n, a, "axes", v, MGE_MAX_DIMS + 1, &cnt);
            if (s)
                return s;
        }
    } else {
        cnt = mge_onnx_attr_ints(n, "axes", v, MGE_MAX_DIMS + 1);
        if (cnt < 0 && mge_onnx_attr(n, "axes"))
            return mge_onnx_fail(c, n, "axes is not a list of integers");
        if (cnt < 0)
            cnt = 0;
    }
    if (cnt > r)
        return mge_onnx_fail(c, n, "%d axes for rank %d", cnt, r);
    if (cnt == 0) {
        if (from_input && mge_onnx_attr_i(n, "noop_with_empty_axes", 0))
            *noop = 1;
        else
            *all = 1;
        *nax = 0;
        return MGE_OK;
    }
    for (int i = 0; i < cnt; i++) {
        int k = mge_onnx_axis(v[i], r);
        if (k < 0)
            return mge_onnx_fail(c, n, "axis %lld is out of range for rank %d", (long long)v[i], r);
        for (int j = 0; j < i; j++)
            if (ax[j] == k)
                return mge_onnx_fail(c, n, "axis %d is given twice", k);
        ax[i] = k;
    }
    *nax = cnt;
    return MGE_OK;
}

/* op (sum, mean, max, min, prod) of x over the axes, keepdim k. */
static int reduce_step(mge_onnx_ctx *c, mge_onnx_node *n, int op, int x, int all, int nax, const int64_t *ax,
                       int keep, int last)
{
    mge_attr at[2];
    int na = 0;
    if (!all)
        at[na++] = mge_onnx_ais(MGE_KEY_axis, nax, ax);
    at[na++] = mge_onnx_ab(MGE_KEY_keepdim, keep);
    if (x < 0)
        return -1;
    if (last)
        return mge_onnx_emit(c, n, op, 1, &x, na, at, 1) < 0 ? -1 : 0;
    return mge_onnx_emit_tmp(c, n, op, 1, &x, na, at);
}

static int has_axis(const int64_t *ax, int nax, int a)
{
    for (int i = 0; i < nax; i++)
        if (ax[i] == a)
            return 1;
    return 0;
}

static mge_status conv_reduce(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x;
    mge_status s;
    if ((s = need_x(c, n, &x)))
        return s;
    const char *t = n->op_type + strlen("Reduce");
    const mge_value *xv = mge_onnx_value(c, x);
    mge_dtype dt = xv->dtype;
    int64_t ax[MGE_MAX_DIMS + 1];
    int nax = 0, all = 0, noop = 0;
    if ((s = reduce_axes(c, n, xv->ndim, ax, &nax, &all, &noop)))
        return s;
    int keep = mge_onnx_attr_i(n, "keepdims", 1) != 0;
    int sq = strcmp(t, "SumSquare") == 0 || strcmp(t, "L2") == 0;
    int flt_only = strcmp(t, "L2") == 0 || strcmp(t, "LogSum") == 0 || strcmp(t, "LogSumExp") == 0 ||
                   strcmp(t, "Mean") == 0;
    int minmax = strcmp(t, "Max") == 0 || strcmp(t, "Min") == 0;
    if (dt == MGE_BOOL && !minmax)
        return mge_onnx_fail(c, n, "%s of bool", n->op_type);
    if (flt_only && !mge_dtype_is_float(dt))
        return mge_onnx_unsupported(c, n, "%s over %s (mge computes it in float dtypes)", n->op_type,
                                    mge_dtype_name(dt));
    if (noop) { /* the function bodies' elementwise part, unreduced (as ONNX Runtime) */
        int op = strcmp(t, "SumSquare") == 0 ? MGE_OP_SQUARE : strcmp(t, "LogSum") == 0 ? MGE_OP_LOG
               : t[0] == 'L' && (t[1] == '1' || t[1] == '2') && dt != MGE_U8 ? MGE_OP_ABS : -1;
        if (op == MGE_OP_SQUARE && dt == MGE_U8) {
            int in[2] = {x, x};
            return mge_onnx_finish(c, n, MGE_OP_MUL, 2, in, 0, NULL);
        }
        return op < 0 ? mge_onnx_alias(c, n, 0, x) : mge_onnx_finish(c, n, op, 1, &x, 0, NULL);
    }
    /* over an empty set mge's max and min refuse; ONNX gives the dtype's lowest
     * (highest) value, -inf for LogSumExp: that added to the sum (0), for the shape */
    int empty = 0;
    for (int i = 0; i < xv->ndim; i++)
        if (xv->dims[i] == 0 && (all || has_axis(ax, nax, i)))
            empty = 1;
    if (empty && dt != MGE_BOOL && (minmax || strcmp(t, "LogSumExp") == 0)) {
        double lo = mge_dtype_is_float(dt) ? -INFINITY : dt == MGE_I8 ? -128 : dt == MGE_U8 ? 0
                  : dt == MGE_I32 ? -2147483648.0 : -9223372036854775808.0;
        double hi = mge_dtype_is_float(dt) ? INFINITY : dt == MGE_I8 ? 127 : dt == MGE_U8 ? 255
                  : dt == MGE_I32 ? 2147483647.0 : 9223372036854775807.0;
        int z = reduce_step(c, n, MGE_OP_SUM, x, all, nax, ax, keep, 0);
        int in[2] = {z, mge_onnx_scalar(c, n, dt, strcmp(t, "Min") == 0 ? hi : lo)};
        return mge_onnx_finish(c, n, MGE_OP_ADD, 2, in, 0, NULL);
    }
    if (strcmp(t, "Sum") == 0 || strcmp(t, "Mean") == 0 || strcmp(t, "Prod") == 0 || minmax) {
        int op = t[1] == 'u' ? MGE_OP_SUM : t[1] == 'e' ? MGE_OP_MEAN : t[1] == 'r' ? MGE_OP_PROD
               : t[1] == 'a' ? MGE_OP_MAX : MGE_OP_MIN;
        if (dt == MGE_BOOL) { /* False < True: over u8 */
            mge_attr ca[1] = {cast_attr(MGE_U8)}, cb[1] = {cast_attr(MGE_BOOL)};
            int u = mge_onnx_emit_tmp(c, n, MGE_OP_CAST, 1, &x, 1, ca);
            int y = reduce_step(c, n, op, u, all, nax, ax, keep, 0);
            return mge_onnx_finish(c, n, MGE_OP_CAST, 1, &y, 1, cb);
        }
        return reduce_step(c, n, op, x, all, nax, ax, keep, 1) < 0 ? c->err->code : MGE_OK;
    }
    if (strcmp(t, "L1") == 0) { /* u8: no sign to drop */
        int a = dt == MGE_U8 ? x : mge_onnx_emit_tmp(c, n, MGE_OP_ABS, 1, &x, 0, NULL);
        return reduce_step(c, n, MGE_OP_SUM, a, all, nax, ax, keep, 1) < 0 ? c->err->code : MGE_OK;
    }
    if (sq) { /* square takes floats, i8, i32, i64; u8 multiplies */
        int q = dt == MGE_U8 ? mge_onnx_emit2(c, n, MGE_OP_MUL, x, x) : mge_onnx_emit_tmp(c, n, MGE_OP_SQUARE, 1, &x, 0, NULL);
        int y = reduce_step(c, n, MGE_OP_SUM, q, all, nax, ax, keep, t[0] == 'S');
        if (t[0] == 'S')
            return y < 0 ? c->err->code : MGE_OK;
        return mge_onnx_finish(c, n, MGE_OP_SQRT, 1, &y, 0, NULL);
    }
    if (strcmp(t, "LogSum") == 0) {
        int y = reduce_step(c, n, MGE_OP_SUM, x, all, nax, ax, keep, 0);
        return mge_onnx_finish(c, n, MGE_OP_LOG, 1, &y, 0, NULL);
    }
    if (strcmp(t, "LogSumExp") == 0) {
        /* log(sum(exp(x - m))) + m, m the maximum (0 where infinite) */
        int m = reduce_step(c, n, MGE_OP_MAX, x, all, nax, ax, 1, 0);
        int in[3] = {mge_onnx_emit_tmp(c, n, MGE_OP_ISINF, 1, &m, 0, NULL), mge_onnx_scalar(c, n, dt, 0), m};
        m = mge_onnx_emit_tmp(c, n, MGE_OP_WHERE, 3, in, 0, NULL);
        int e = mge_onnx_emit2(c, n, MGE_OP_SUB, x, m);
        e = mge_onnx_emit_tmp(c, n, MGE_OP_EXP, 1, &e, 0, NULL);
        int l = reduce_step(c, n, MGE_OP_SUM, e, all, nax, ax, keep, 0);
        l = mge_onnx_emit_tmp(c, n, MGE_OP_LOG, 1, &l, 0, NULL);
        if (!keep && m >= 0) {
            int sh = mge_onnx_emit_tmp(c, n, MGE_OP_SHAPE, 1, &l, 0, NULL);
            int rin[2] = {m, sh};
            m = mge_onnx_emit_tmp(c, n, MGE_OP_RESHAPE, 2, rin, 0, NULL);
        }
        int fi[2] = {l, m};
        return mge_onnx_finish(c, n, MGE_OP_ADD, 2, fi, 0, NULL);
    }
    return mge_onnx_fail(c, n, "no mapping");
}

/* ---------------------------------------------------------------- ArgMax, ArgMin */

static mge_status conv_arg(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x;
    mge_status s;
    if ((s = need_x(c, n, &x)))
        return s;
    const mge_value *xv = mge_onnx_value(c, x);
    int mx = strcmp(n->op_type, "ArgMax") == 0;
    if (xv->dtype == MGE_BOOL)
        return mge_onnx_unsupported(c, n, "%s over bool", n->op_type);
    int64_t a = mge_onnx_attr_i(n, "axis", 0);
    int ax = mge_onnx_axis(a, xv->ndim);
    if (ax < 0)
        return mge_onnx_fail(c, n, "axis %lld is out of range for rank %d", (long long)a, xv->ndim);
    int keep = mge_onnx_attr_i(n, "keepdims", 1) != 0;
    if (!mge_onnx_attr_i(n, "select_last_index", 0)) {
        mge_attr at[2] = {mge_onnx_ai(MGE_KEY_axis, ax), mge_onnx_ab(MGE_KEY_keepdim, keep)};
        return mge_onnx_finish(c, n, mx ? MGE_OP_ARGMAX : MGE_OP_ARGMIN, 1, &x, 2, at);
    }
    /* the last index: the largest index where x equals its extreme */
    if (!known_dim(xv->dims[ax]))
        return mge_onnx_unsupported(c, n, "select_last_index = 1 along a dim not known at import");
    int64_t axl[1] = {ax};
    int m = reduce_step(c, n, mx ? MGE_OP_MAX : MGE_OP_MIN, x, 0, 1, axl, 1, 0);
    int in[3] = {mge_onnx_emit2(c, n, MGE_OP_EQUAL, x, m), iota(c, n, xv->dims[ax], ax, xv->ndim),
                 mge_onnx_scalar(c, n, MGE_I64, -1)};
    int w = mge_onnx_emit_tmp(c, n, MGE_OP_WHERE, 3, in, 0, NULL);
    return reduce_step(c, n, MGE_OP_MAX, w, 0, 1, axl, keep, 1) < 0 ? c->err->code : MGE_OK;
}

/* ---------------------------------------------------------------- CumSum, TopK */

static mge_status conv_cumsum(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x, a;
    mge_status s;
    if ((s = need_x(c, n, &x)))
        return s;
    if ((a = mge_onnx_in(c, n, 1)) < 0)
        return mge_onnx_fail(c, n, "no axis input");
    int64_t v[2];
    int cnt;
    if ((s = mge_onnx_known_ints(c, n, a, "axis", v, 2, &cnt)))
        return s;
    if (cnt != 1)
        return mge_onnx_fail(c, n, "axis has %d elements: expected one", cnt);
    const mge_value *xv = mge_onnx_value(c, x);
    int ax = mge_onnx_axis(v[0], xv->ndim);
    if (ax < 0)
        return mge_onnx_fail(c, n, "axis %lld is out of range for rank %d", (long long)v[0], xv->ndim);
    if (xv->dtype == MGE_BOOL)
        return mge_onnx_fail(c, n, "CumSum of bool");
    mge_attr at[3] = {mge_onnx_ai(MGE_KEY_axis, ax), mge_onnx_ab(MGE_KEY_exclusive, mge_onnx_attr_i(n, "exclusive", 0)),
                      mge_onnx_ab(MGE_KEY_reverse, mge_onnx_attr_i(n, "reverse", 0))};
    return mge_onnx_finish(c, n, MGE_OP_CUMSUM, 1, &x, 3, at);
}

static mge_status conv_topk(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x;
    mge_status s;
    if ((s = need_x(c, n, &x)))
        return s;
    int64_t k;
    if (c->opset < 10) {
        if (!mge_onnx_attr(n, "k"))
            return mge_onnx_fail(c, n, "no k attribute");
        k = mge_onnx_attr_i(n, "k", 0);
    } else {
        int kv = mge_onnx_in(c, n, 1), cnt;
        int64_t v[2];
        if (kv < 0)
            return mge_onnx_fail(c, n, "no K input");
        if ((s = mge_onnx_known_ints(c, n, kv, "K", v, 2, &cnt)))
            return s;
        if (cnt != 1)
            return mge_onnx_fail(c, n, "K has %d elements: expected one", cnt);
        k = v[0];
    }
    const mge_value *xv = mge_onnx_value(c, x);
    int64_t a = mge_onnx_attr_i(n, "axis", -1);
    int ax = mge_onnx_axis(a, xv->ndim);
    if (ax < 0)
        return mge_onnx_fail(c, n, "axis %lld is out of range for rank %d", (long long)a, xv->ndim);
    if (k < 0)
        return mge_onnx_fail(c, n, "K = %lld is negative", (long long)k);
    if (xv->dtype == MGE_BOOL)
        return mge_onnx_fail(c, n, "TopK of bool");
    if (n->n_output != 2)
        return mge_onnx_fail(c, n, "%zu outputs: expected Values and Indices", n->n_output);
    /* sorted = 0 leaves the order open: mge's sorted order is one */
    mge_attr at[4] = {mge_onnx_ai(MGE_KEY_k, k), mge_onnx_ai(MGE_KEY_axis, ax),
                      mge_onnx_ab(MGE_KEY_largest, c->opset < 11 || mge_onnx_attr_i(n, "largest", 1)),
                      mge_onnx_ab(MGE_KEY_sorted, 1)};
    return mge_onnx_emit(c, n, MGE_OP_TOPK, 1, &x, 4, at, 2) < 0 ? c->err->code : MGE_OK;
}

const mge_onnx_op mge_onnx_ops_reduce[] = {
    {"Softmax", conv_softmax, 1},
    {"LogSoftmax", conv_softmax, 1},
    {"Hardmax", conv_softmax, 1},
    {"ReduceSum", conv_reduce, 1},
    {"ReduceMean", conv_reduce, 1},
    {"ReduceMax", conv_reduce, 1},
    {"ReduceMin", conv_reduce, 1},
    {"ReduceProd", conv_reduce, 1},
    {"ReduceL1", conv_reduce, 1},
    {"ReduceL2", conv_reduce, 1},
    {"ReduceLogSum", conv_reduce, 1},
    {"ReduceLogSumExp", conv_reduce, 1},
    {"ReduceSumSquare", conv_reduce, 1},
    {"ArgMax", conv_arg, 1},
    {"ArgMin", conv_arg, 1},
    {"CumSum", conv_cumsum, 11},
    {"TopK", conv_topk, 1},
    {NULL, NULL, 0},
};
