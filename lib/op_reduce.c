/* op_reduce.c — softmax, log_softmax, sum, mean, max, argmax.
 *
 * softmax/log_softmax(axis): same shape, along one axis (negative counts
 * from the end); float only. sum/mean/max(axis list, keepdim): axis absent
 * reduces every axis; each axis at most once; reduced dims are dropped, or
 * kept as 1 with keepdim. argmax(axis, keepdim) -> i64 indices.
 * FLOPs: reductions 1 per input element (mean adds 1 per output for the
 * divide); softmax/log_softmax 5 per element (max, subtract, exp, sum,
 * divide or log). */
#include "internal.h"

static int numeric(mge_dtype dt)
{
    return dt != MGE_BOOL && dt != MGE_QS8 && dt != MGE_QS32;
}

/* The single axis of softmax/log_softmax/argmax, normalized. */
static mge_status one_axis(const mge_node *n, const char *op, const mge_tdesc *x, int *ax, mge_error *err)
{
    const mge_attr *a = mge_node_attr(n, MGE_KEY_axis);
    int64_t v = a ? a->i[0] : -1;
    char b[96];
    if (a && a->n != 1)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: axis has %d values: expected one", op, a->n);
    *ax = mge_axis(v, x->ndim);
    if (*ax < 0)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: axis=%lld is out of range for x %s (rank %d)", op,
                             (long long)v, mge_tdesc_str(x, b, sizeof b), x->ndim);
    return MGE_OK;
}

mge_status mge_reduce_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    const char *op = mge_op_info(n->op)->name;
    const mge_tdesc *x = &in[0];
    char bx[96];
    mge_tdesc_str(x, bx, sizeof bx);
    int need_float = n->op == MGE_OP_SOFTMAX || n->op == MGE_OP_LOG_SOFTMAX || n->op == MGE_OP_MEAN;
    if (need_float ? !mge_dtype_is_float(x->dtype) : !numeric(x->dtype))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is %s: expected a %s dtype", op, bx,
                             need_float ? "float (f32, f16, bf16)" : "numeric, non-quantized");
    char red[MGE_MAX_DIMS] = {0};
    int keep = (int)mge_node_int(n, MGE_KEY_keepdim, 0), ax;
    mge_status s;
    switch (n->op) {
    case MGE_OP_SOFTMAX:
    case MGE_OP_LOG_SOFTMAX:
        if ((s = one_axis(n, op, x, &ax, err)))
            return s;
        *out = *x;
        return MGE_OK;
    case MGE_OP_ARGMAX:
        if ((s = one_axis(n, op, x, &ax, err)))
            return s;
        if (x->dims[ax] < 1)
            return mge_error_set(err, MGE_ERR_SHAPE, "argmax: x %s is empty along axis %d", bx, ax);
        red[ax] = 1;
        break;
    default: {
        const mge_attr *a = mge_node_attr(n, MGE_KEY_axis);
        if (!a) {
            for (int i = 0; i < x->ndim; i++)
                red[i] = 1;
            break;
        }
        for (int i = 0; i < a->n; i++) {
            int k = mge_axis(a->i[i], x->ndim);
            if (k < 0)
                return mge_error_set(err, MGE_ERR_INVALID, "%s: axis %lld is out of range for x %s (rank %d)", op,
                                     (long long)a->i[i], bx, x->ndim);
            if (red[k])
                return mge_error_set(err, MGE_ERR_INVALID, "%s: axis %d appears twice", op, k);
            red[k] = 1;
        }
        if (n->op == MGE_OP_MAX)
            for (int i = 0; i < x->ndim; i++)
                if (red[i] && x->dims[i] < 1)
                    return mge_error_set(err, MGE_ERR_SHAPE, "max: x %s is empty along axis %d", bx, i);
    }
    }
    out->dtype = n->op == MGE_OP_ARGMAX ? MGE_I64 : x->dtype;
    out->ndim = 0;
    for (int i = 0; i < x->ndim; i++) {
        if (!red[i])
            out->dims[out->ndim++] = x->dims[i];
        else if (keep)
            out->dims[out->ndim++] = 1;
    }
    return MGE_OK;
}

double mge_reduce_flops(const mge_node *n, const mge_tdesc *in, const mge_tdesc *out)
{
    double ni = mge_tdesc_count(&in[0]);
    switch (n->op) {
    case MGE_OP_SOFTMAX:
    case MGE_OP_LOG_SOFTMAX: return 5.0 * ni;
    case MGE_OP_MEAN: return ni + mge_tdesc_count(&out[0]);
    default: return ni;
    }
}
