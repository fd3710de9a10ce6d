/* op_binary.c — shape inference and FLOPs of the elementwise binary ops
 * (add, sub, mul, div, pow, maximum, minimum).
 *
 * numpy broadcasting: shapes are aligned at the right; each dim pair must be
 * equal or contain a 1. Both inputs have the same dtype (no implicit
 * promotion: insert a cast), which is the output's dtype. bool is refused;
 * pow takes float operands only; div of integers truncates toward zero
 * (ONNX Div; PyTorch's true division gives a float: cast first for that).
 * Known integer operands (shape arithmetic) give known outputs.
 * FLOPs: 1 per output element.
 *
 * Gradient ops:
 * sum_to(x, like): like must broadcast to x's shape (x's shape is the
 *   broadcast of the two); float dtypes; the result has like's shape and
 *   dtype. FLOPs: 1 per element of x (one add each).
 * maximum_grad/minimum_grad(dy, a, b): a and b (same float dtype as dy)
 *   broadcast to exactly dy's shape; two results like dy. FLOPs: 2 per
 *   element of dy. */
#include "internal.h"

#include <math.h>

static mge_status sum_to_infer(const mge_tdesc *x, const mge_tdesc *like, mge_tdesc *out, mge_error *err)
{
    char bx[96], bl[96]; /* formatted on failure only: this runs for every node */
    if (!mge_dtype_is_float(x->dtype) || !mge_dtype_is_float(like->dtype))
        return mge_error_set(err, MGE_ERR_SHAPE, "sum_to: x %s and like %s: expected float dtypes",
                             mge_tdesc_str(x, bx, sizeof bx), mge_tdesc_str(like, bl, sizeof bl));
    mge_tdesc b;
    int ok = like->ndim <= x->ndim && mge_broadcast(x, like, &b) && b.ndim == x->ndim;
    for (int i = 0; ok && i < x->ndim; i++)
        ok = b.dims[i] == x->dims[i];
    if (!ok)
        return mge_error_set(err, MGE_ERR_SHAPE,
                             "sum_to: like %s does not broadcast to x %s: expected each dim of like (aligned at "
                             "the right) equal to x's or 1",
                             mge_tdesc_str(like, bl, sizeof bl), mge_tdesc_str(x, bx, sizeof bx));
    *out = *like;
    return MGE_OK;
}

/* maximum_grad/minimum_grad(dy, a, b): a and b broadcast to dy's shape. */
static mge_status minmax_grad_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    const char *name = mge_op_info(n->op)->name;
    char bd[96], ba[96], bb[96];
    mge_tdesc o;
    int dt_ok = mge_dtype_is_float(in[0].dtype) && in[1].dtype == in[0].dtype && in[2].dtype == in[0].dtype;
    int ok = dt_ok && mge_broadcast(&in[1], &in[2], &o) && o.ndim == in[0].ndim;
    for (int i = 0; ok && i < o.ndim; i++)
        ok = o.dims[i] == in[0].dims[i];
    if (!ok) {
        mge_tdesc_str(&in[0], bd, sizeof bd);
        mge_tdesc_str(&in[1], ba, sizeof ba);
        mge_tdesc_str(&in[2], bb, sizeof bb);
        if (!dt_ok)
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: dy %s, a %s, b %s: expected one float dtype", name, bd, ba,
                                 bb);
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: a %s and b %s do not broadcast to dy %s", name, ba, bb, bd);
    }
    out[0] = in[0];
    out[1] = in[0];
    return MGE_OK;
}

/* The values of an integer op's output from known operands (small ones:
 * shape arithmetic at plan time), as the kernels compute them. */
static void binary_values(int op, const mge_tdesc *a, const mge_tdesc *b, mge_tdesc *out)
{
    int64_t cnt = mge_tdesc_numel(out);
    if (!a->known || !b->known || mge_dtype_is_float(out->dtype) || cnt < 0 || cnt > MGE_TDESC_NVAL)
        return;
    for (int64_t i = 0; i < cnt; i++) {
        int64_t ia = 0, ib = 0, r = i, sa = 1, sb = 1;
        for (int d = out->ndim - 1; d >= 0; d--) {
            int64_t c = r % out->dims[d];
            r /= out->dims[d];
            int da = a->ndim - out->ndim + d, db = b->ndim - out->ndim + d;
            if (da >= 0)
                ia += (a->dims[da] == 1 ? 0 : c) * sa, sa *= a->dims[da];
            if (db >= 0)
                ib += (b->dims[db] == 1 ? 0 : c) * sb, sb *= b->dims[db];
        }
        double x = a->val[ia], y = b->val[ib], v;
        switch (op) {
        case MGE_OP_ADD: v = x + y; break;
        case MGE_OP_SUB: v = x - y; break;
        case MGE_OP_MUL: v = x * y; break;
        case MGE_OP_DIV:
            if (y == 0)
                return; /* the kernel reports it */
            v = trunc(x / y);
            break;
        case MGE_OP_MAXIMUM: v = x > y ? x : y; break;
        case MGE_OP_MINIMUM: v = x < y ? x : y; break;
        default: return;
        }
        out->val[i] = v;
    }
    out->known = 1;
}

mge_status mge_binary_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    if (n->op == MGE_OP_SUM_TO)
        return sum_to_infer(&in[0], &in[1], out, err);
    if (n->op == MGE_OP_MAXIMUM_GRAD || n->op == MGE_OP_MINIMUM_GRAD)
        return minmax_grad_infer(n, in, out, err);
    const char *name = mge_op_info(n->op)->name;
    char ba[96], bb[96];
    const mge_tdesc *a = &in[0], *b = &in[1];
    int bad = a->dtype != b->dtype || a->dtype == MGE_BOOL || (n->op == MGE_OP_POW && !mge_dtype_is_float(a->dtype)) ||
              !mge_broadcast(a, b, out);
    if (!bad) {
        out->dtype = a->dtype;
        out->known = 0;
        binary_values(n->op, a, b, out);
        return MGE_OK;
    }
    mge_shape_str(a->dtype, a->ndim, a->dims, ba, sizeof ba); /* on failure only: this runs for every node */
    mge_shape_str(b->dtype, b->ndim, b->dims, bb, sizeof bb);
    if (a->dtype != b->dtype)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: dtypes differ: %s and %s: expected the same dtype (cast one)",
                             name, ba, bb);
    if (a->dtype == MGE_BOOL)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: %s and %s: expected a numeric dtype, not bool", name, ba, bb);
    if (n->op == MGE_OP_POW && !mge_dtype_is_float(a->dtype))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: %s and %s: expected a float dtype (cast integers first)", name,
                             ba, bb);
    return mge_error_set(err, MGE_ERR_SHAPE,
                         "%s: %s and %s do not broadcast: expected each dim pair (aligned at the right) "
                         "equal or one of them 1",
                         name, ba, bb);
}

double mge_binary_flops(const mge_node *n, const mge_tdesc *in, const mge_tdesc *out)
{
    if (n->op == MGE_OP_SUM_TO)
        return mge_tdesc_count(&in[0]);
    if (n->op == MGE_OP_MAXIMUM_GRAD || n->op == MGE_OP_MINIMUM_GRAD)
        return 2 * mge_tdesc_count(&in[0]);
    return mge_tdesc_count(&out[0]);
}
