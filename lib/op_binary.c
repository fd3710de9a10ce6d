/* op_binary.c — shape inference and FLOPs of the elementwise binary ops
 * (add, sub, mul, div, pow, maximum, minimum).
 *
 * numpy broadcasting: shapes are aligned at the right; each dim pair must be
 * equal or contain a 1. Both inputs have the same dtype (no implicit
 * promotion: insert a cast), which is the output's dtype. bool is refused;
 * div and pow take float operands only (PyTorch's true division of integers
 * gives a float: cast first).
 * FLOPs: 1 per output element. */
#include "internal.h"

mge_status mge_binary_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    const char *name = mge_op_info(n->op)->name;
    char ba[96], bb[96];
    const mge_tdesc *a = &in[0], *b = &in[1];
    mge_shape_str(a->dtype, a->ndim, a->dims, ba, sizeof ba);
    mge_shape_str(b->dtype, b->ndim, b->dims, bb, sizeof bb);
    if (a->dtype != b->dtype)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: dtypes differ: %s and %s: expected the same dtype (cast one)",
                             name, ba, bb);
    if (a->dtype == MGE_BOOL)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: %s and %s: expected a numeric dtype, not bool", name, ba, bb);
    if ((n->op == MGE_OP_DIV || n->op == MGE_OP_POW) && !mge_dtype_is_float(a->dtype))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: %s and %s: expected a float dtype (cast integers first)", name,
                             ba, bb);
    if (!mge_broadcast(a, b, out))
        return mge_error_set(err, MGE_ERR_SHAPE,
                             "%s: %s and %s do not broadcast: expected each dim pair (aligned at the right) "
                             "equal or one of them 1",
                             name, ba, bb);
    out->dtype = a->dtype;
    return MGE_OK;
}

double mge_binary_flops(const mge_node *n, const mge_tdesc *in, const mge_tdesc *out)
{
    return mge_tdesc_count(&out[0]);
}
