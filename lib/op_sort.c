/* op_sort.c — shape inference and FLOPs of the ops that order or scan
 * along one axis: topk, sort, argsort and cumsum (see lib/ops.def and
 * mge-ops(7)).
 *
 * x is numeric (f32, f16, bf16, i8, u8, i32, i64); axis is one value,
 * negative from the end. topk: 0 <= k <= x.dims[axis], values like x with
 * that dim k and i64 indices of the same shape; sort: values like x and i64
 * indices; argsort: the indices; cumsum: like x. FLOPs: sort and argsort
 * len * ceil(log2 len) comparisons per row, topk len * ceil(log2 (k + 1)),
 * cumsum 1 per element. */
#include "internal.h"

#include <math.h>

static int sort_dtype(mge_dtype dt)
{
    return dt != MGE_BOOL && dt != MGE_QS8 && dt != MGE_QS32 && (unsigned)dt < MGE_NDTYPES;
}

/* The one axis of n over x, normalized into *ax. */
static mge_status sort_axis(const mge_node *n, const char *op, const mge_tdesc *x, int *ax, mge_error *err)
{
    const mge_attr *a = mge_node_attr(n, MGE_KEY_axis);
    char b[96];
    if (!a && n->op == MGE_OP_CUMSUM)
        return mge_error_set(err, MGE_ERR_INVALID, "cumsum: the axis attribute is required");
    if (a && a->n != 1)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: axis has %d values: expected one", op, a->n);
    int64_t v = a ? a->i[0] : -1;
    *ax = mge_axis(v, x->ndim);
    if (*ax < 0)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: axis=%lld is out of range for x %s (rank %d)", op,
                             (long long)v, mge_tdesc_str(x, b, sizeof b), x->ndim);
    return MGE_OK;
}

mge_status mge_sort_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    const char *op = mge_op_info(n->op)->name;
    const mge_tdesc *x = &in[0];
    char bx[96];
    int ax;
    mge_status s;
    mge_tdesc_str(x, bx, sizeof bx);
    if (!sort_dtype(x->dtype))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is %s: expected a numeric dtype (not bool or quantized)",
                             op, bx);
    if ((s = sort_axis(n, op, x, &ax, err)))
        return s;
    mge_tdesc y = *x;
    y.known = 0;
    switch (n->op) {
    case MGE_OP_TOPK: {
        int64_t k = mge_node_int(n, MGE_KEY_k, 0);
        if (k < 0)
            return mge_error_set(err, MGE_ERR_INVALID, "topk: k=%lld is negative", (long long)k);
        if (k > x->dims[ax])
            return mge_error_set(err, MGE_ERR_INVALID, "topk: k=%lld is larger than dim %d of x %s (%lld)",
                                 (long long)k, ax, bx, (long long)x->dims[ax]);
        y.dims[ax] = k;
        out[0] = y;
        out[1] = y;
        out[1].dtype = MGE_I64;
        return MGE_OK;
    }
    case MGE_OP_SORT:
        out[0] = y;
        out[1] = y;
        out[1].dtype = MGE_I64;
        return MGE_OK;
    case MGE_OP_ARGSORT:
        out[0] = y;
        out[0].dtype = MGE_I64;
        return MGE_OK;
    default: /* cumsum */
        out[0] = y;
        return MGE_OK;
    }
}

double mge_sort_flops(const mge_node *n, const mge_tdesc *in, const mge_tdesc *out)
{
    (void)out;
    const mge_tdesc *x = &in[0];
    double cnt = mge_tdesc_count(x);
    if (n->op == MGE_OP_CUMSUM)
        return cnt;
    int ax = mge_axis(mge_node_int(n, MGE_KEY_axis, -1), x->ndim);
    double len = ax >= 0 ? (double)x->dims[ax] : 1;
    double w = n->op == MGE_OP_TOPK ? (double)mge_node_int(n, MGE_KEY_k, 0) + 1 : len;
    return w > 1 ? cnt * ceil(log2(w)) : 0;
}
