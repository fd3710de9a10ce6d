/* op_reduce.c — softmax, log_softmax, sum, mean, max, argmax.
 *
 * softmax/log_softmax(axis): same shape, along one axis (negative counts
 * from the end); float only. sum/mean/max(axis list, keepdim): axis absent
 * reduces every axis; each axis at most once; reduced dims are dropped, or
 * kept as 1 with keepdim. argmax(axis, keepdim) -> i64 indices. prod and
 * min are like sum and max, argmin like argmax; prod_grad(dy, x) gives x's
 * shape.
 * Gradients: sum_grad/mean_grad(dy, x) and max_grad(dy, x, y) take the
 * forward op's axis/keepdim, dy (and y) in the forward output's shape, and
 * give x's shape; softmax_grad/log_softmax_grad(dy, y) give y's shape.
 * FLOPs: reductions 1 per input element (mean adds 1 per output for the
 * divide); softmax/log_softmax 5 per element (max, subtract, exp, sum,
 * divide or log); sum_grad/mean_grad 1 per x element, max_grad 3 (compare,
 * count, scale), prod_grad 3 (zero count, product, divide), softmax_grad/log_softmax_grad 4 (product, sum, subtract,
 * scale). */
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

/* The output of sum/mean/max/argmax (op) of x, with n's axis/keepdim. */
static mge_status reduce_shape(const mge_node *n, int op, const char *opname, const mge_tdesc *x, mge_tdesc *out,
                               mge_error *err)
{
    char bx[96];
    mge_tdesc_str(x, bx, sizeof bx);
    char red[MGE_MAX_DIMS] = {0};
    int keep = (int)mge_node_int(n, MGE_KEY_keepdim, 0), ax;
    mge_status s;
    int arg = op == MGE_OP_ARGMAX || op == MGE_OP_ARGMIN;
    if (arg) {
        if ((s = one_axis(n, opname, x, &ax, err)))
            return s;
        if (x->dims[ax] < 1)
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: x %s is empty along axis %d", opname, bx, ax);
        red[ax] = 1;
    } else {
        const mge_attr *a = mge_node_attr(n, MGE_KEY_axis);
        for (int i = 0; i < x->ndim; i++)
            red[i] = a == NULL;
        for (int i = 0; a && i < a->n; i++) {
            int k = mge_axis(a->i[i], x->ndim);
            if (k < 0)
                return mge_error_set(err, MGE_ERR_INVALID, "%s: axis %lld is out of range for x %s (rank %d)",
                                     opname, (long long)a->i[i], bx, x->ndim);
            if (red[k])
                return mge_error_set(err, MGE_ERR_INVALID, "%s: axis %d appears twice", opname, k);
            red[k] = 1;
        }
        if (op == MGE_OP_MAX || op == MGE_OP_MIN)
            for (int i = 0; i < x->ndim; i++)
                if (red[i] && x->dims[i] < 1)
                    return mge_error_set(err, MGE_ERR_SHAPE, "%s: x %s is empty along axis %d", opname, bx, i);
    }
    out->dtype = arg ? MGE_I64 : x->dtype;
    out->ndim = 0;
    for (int i = 0; i < x->ndim; i++) {
        if (!red[i])
            out->dims[out->ndim++] = x->dims[i];
        else if (keep)
            out->dims[out->ndim++] = 1;
    }
    return MGE_OK;
}

/* t must equal want (dtype and dims). */
static mge_status same_desc(const char *op, const char *what, const mge_tdesc *t, const mge_tdesc *want,
                            mge_error *err)
{
    int ok = t->dtype == want->dtype && t->ndim == want->ndim;
    for (int i = 0; ok && i < t->ndim; i++)
        ok = t->dims[i] == want->dims[i];
    if (ok)
        return MGE_OK;
    char bt[96], bw[96];
    return mge_error_set(err, MGE_ERR_SHAPE, "%s: %s is %s: expected %s", op, what, mge_tdesc_str(t, bt, sizeof bt),
                         mge_tdesc_str(want, bw, sizeof bw));
}

/* sum_grad/mean_grad(dy, x), max_grad(dy, x, y) -> like x;
 * softmax_grad/log_softmax_grad(dy, y) -> like y. */
static mge_status grad_infer(const mge_node *n, const char *op, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    char b[96];
    mge_status s;
    int ax;
    if (n->op == MGE_OP_SOFTMAX_GRAD || n->op == MGE_OP_LOG_SOFTMAX_GRAD) {
        const mge_tdesc *y = &in[1];
        if (!mge_dtype_is_float(y->dtype))
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: y is %s: expected a float dtype (f32, f16, bf16, f64)", op,
                                 mge_tdesc_str(y, b, sizeof b));
        if ((s = one_axis(n, op, y, &ax, err)) || (s = same_desc(op, "dy", &in[0], y, err)))
            return s;
        *out = *y;
        return MGE_OK;
    }
    const mge_tdesc *x = &in[1];
    if (!mge_dtype_is_float(x->dtype))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is %s: expected a float dtype (f32, f16, bf16, f64)", op,
                             mge_tdesc_str(x, b, sizeof b));
    int fwd = n->op == MGE_OP_SUM_GRAD    ? MGE_OP_SUM
              : n->op == MGE_OP_MEAN_GRAD ? MGE_OP_MEAN
              : n->op == MGE_OP_PROD_GRAD ? MGE_OP_PROD
                                          : MGE_OP_MAX;
    mge_tdesc y;
    if ((s = reduce_shape(n, fwd, op, x, &y, err)) || (s = same_desc(op, "dy", &in[0], &y, err)))
        return s;
    if (n->op == MGE_OP_MAX_GRAD && (s = same_desc(op, "y", &in[2], &y, err)))
        return s;
    *out = *x;
    return MGE_OK;
}

mge_status mge_reduce_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    const char *op = mge_op_info(n->op)->name;
    const mge_tdesc *x = &in[0];
    char bx[96];
    int ax;
    mge_status s;
    switch (n->op) {
    case MGE_OP_SUM_GRAD:
    case MGE_OP_MEAN_GRAD:
    case MGE_OP_MAX_GRAD:
    case MGE_OP_PROD_GRAD:
    case MGE_OP_SOFTMAX_GRAD:
    case MGE_OP_LOG_SOFTMAX_GRAD: return grad_infer(n, op, in, out, err);
    }
    mge_tdesc_str(x, bx, sizeof bx);
    int need_float = n->op == MGE_OP_SOFTMAX || n->op == MGE_OP_LOG_SOFTMAX || n->op == MGE_OP_MEAN;
    if (need_float ? !mge_dtype_is_float(x->dtype) : !numeric(x->dtype))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is %s: expected a %s dtype", op, bx,
                             need_float ? "float (f32, f16, bf16, f64)" : "numeric, non-quantized");
    if (n->op == MGE_OP_SOFTMAX || n->op == MGE_OP_LOG_SOFTMAX) {
        if ((s = one_axis(n, op, x, &ax, err)))
            return s;
        *out = *x;
        return MGE_OK;
    }
    return reduce_shape(n, n->op, op, x, out, err);
}

double mge_reduce_flops(const mge_node *n, const mge_tdesc *in, const mge_tdesc *out)
{
    double ni = mge_tdesc_count(&in[0]);
    switch (n->op) {
    case MGE_OP_SOFTMAX:
    case MGE_OP_LOG_SOFTMAX: return 5.0 * ni;
    case MGE_OP_MEAN: return ni + mge_tdesc_count(&out[0]);
    case MGE_OP_SUM_GRAD:
    case MGE_OP_MEAN_GRAD: return mge_tdesc_count(&out[0]);
    case MGE_OP_MAX_GRAD:
    case MGE_OP_PROD_GRAD: return 3.0 * mge_tdesc_count(&out[0]);
    case MGE_OP_SOFTMAX_GRAD:
    case MGE_OP_LOG_SOFTMAX_GRAD: return 4.0 * mge_tdesc_count(&out[0]);
    default: return ni;
    }
}
