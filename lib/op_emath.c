/* op_emath.c — shape inference and FLOPs of the extra math ops (group
 * emath, ops.def): the bitwise ops and shifts, det, eye_like, lrn, dft.
 *
 * The bitwise ops take one integer dtype for both operands (no implicit
 * promotion, as the comparisons) and broadcast as numpy; det, lrn and dft
 * take floats. Quantized dtypes are refused everywhere: their integers
 * stand for scaled values. */
#include "internal.h"

#include <string.h>

/* The integer dtypes the bitwise kernels (kernels/ref/ref_bitwise.c) take;
 * a new integer dtype is a line here and one there. */
static int bit_dtype(mge_dtype dt)
{
    switch (dt) {
    case MGE_U8: case MGE_I8: case MGE_I32: case MGE_I64:
    case MGE_I16: case MGE_U16: case MGE_U32: case MGE_U64:
        return 1;
    default:
        return 0;
    }
}

static mge_status bitwise_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    const char *name = mge_op_info(n->op)->name;
    char b0[96], b1[96];
    if (n->op == MGE_OP_BITWISE_NOT) {
        if (!bit_dtype(in[0].dtype))
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: x %s: expected an integer dtype (u8, i8, i32, i64)", name,
                                 mge_tdesc_str(&in[0], b0, sizeof b0));
        *out = in[0];
        out->known = 0;
        return MGE_OK;
    }
    mge_tdesc_str(&in[0], b0, sizeof b0);
    mge_tdesc_str(&in[1], b1, sizeof b1);
    if (!bit_dtype(in[0].dtype) || in[0].dtype != in[1].dtype)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: %s and %s: expected one integer dtype (u8, i8, i32, i64)", name,
                             b0, b1);
    if (!mge_broadcast(&in[0], &in[1], out))
        return mge_error_set(err, MGE_ERR_SHAPE,
                             "%s: %s and %s do not broadcast: expected each dim pair (aligned at the right) equal or "
                             "one of them 1",
                             name, b0, b1);
    out->dtype = in[0].dtype;
    out->known = 0;
    return MGE_OK;
}

static mge_status float_in(const mge_node *n, const mge_tdesc *x, mge_error *err)
{
    char b[96];
    if (mge_dtype_is_float(x->dtype))
        return MGE_OK;
    return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is %s: expected a float dtype (f32, f16, bf16)",
                         mge_op_info(n->op)->name, mge_tdesc_str(x, b, sizeof b));
}

static mge_status det_infer(const mge_node *n, const mge_tdesc *x, mge_tdesc *out, mge_error *err)
{
    char b[96];
    mge_status s = float_in(n, x, err);
    if (s)
        return s;
    if (x->ndim < 2 || x->dims[x->ndim - 1] != x->dims[x->ndim - 2])
        return mge_error_set(err, MGE_ERR_SHAPE, "det: x is %s: expected [..., n, n] (square matrices)",
                             mge_tdesc_str(x, b, sizeof b));
    out->dtype = x->dtype;
    out->ndim = x->ndim - 2;
    memcpy(out->dims, x->dims, sizeof(int64_t) * (size_t)out->ndim);
    return MGE_OK;
}

static mge_status eye_infer(const mge_node *n, const mge_tdesc *x, mge_tdesc *out, mge_error *err)
{
    char b[96];
    if (x->ndim != 2)
        return mge_error_set(err, MGE_ERR_SHAPE, "eye_like: x is %s: expected rank 2", mge_tdesc_str(x, b, sizeof b));
    const mge_attr *a = mge_node_attr(n, MGE_KEY_dtype);
    mge_dtype dt = a ? (mge_dtype)a->i[0] : x->dtype;
    if (a && (a->i[0] < 0 || a->i[0] >= MGE_NDTYPES))
        return mge_error_set(err, MGE_ERR_INVALID, "eye_like: dtype %lld is not a dtype", (long long)a->i[0]);
    if (dt == MGE_QS8 || dt == MGE_QS32)
        return mge_error_set(err, MGE_ERR_INVALID, "eye_like: dtype %s: quantized dtypes carry a scale",
                             mge_dtype_name(dt));
    *out = *x;
    out->dtype = dt;
    out->known = 0;
    return MGE_OK;
}

static mge_status lrn_infer(const mge_node *n, const mge_tdesc *x, mge_tdesc *out, mge_error *err)
{
    char b[96];
    mge_status s = float_in(n, x, err);
    if (s)
        return s;
    if (x->ndim < 2)
        return mge_error_set(err, MGE_ERR_SHAPE, "lrn: x is %s: expected [N, C, ...]", mge_tdesc_str(x, b, sizeof b));
    int64_t size = mge_node_ints(n, MGE_KEY_size, 0, 0);
    if (size < 1)
        return mge_error_set(err, MGE_ERR_INVALID, "lrn: size=%lld: expected a positive channel count",
                             (long long)size);
    *out = *x;
    out->known = 0;
    return MGE_OK;
}

static mge_status dft_infer(const mge_node *n, const mge_tdesc *x, mge_tdesc *out, mge_error *err)
{
    char b[96];
    mge_status s = float_in(n, x, err);
    if (s)
        return s;
    mge_tdesc_str(x, b, sizeof b);
    if (x->ndim < 2 || (x->dims[x->ndim - 1] != 1 && x->dims[x->ndim - 1] != 2))
        return mge_error_set(err, MGE_ERR_SHAPE, "dft: x is %s: expected [..., 1] (real) or [..., 2] (complex)", b);
    int64_t av = mge_node_ints(n, MGE_KEY_axis, 0, 1);
    int ax = mge_axis(av, x->ndim);
    if (ax < 0 || ax == x->ndim - 1)
        return mge_error_set(err, MGE_ERR_INVALID, "dft: axis=%lld on x %s: expected a signal axis (not the last)",
                             (long long)av, b);
    int64_t len = mge_node_int(n, MGE_KEY_length, x->dims[ax]);
    if (len < 1)
        return mge_error_set(err, MGE_ERR_INVALID, "dft: length=%lld: expected a positive length", (long long)len);
    int onesided = mge_node_int(n, MGE_KEY_onesided, 0) != 0;
    *out = *x;
    out->known = 0;
    out->dims[ax] = onesided ? len / 2 + 1 : len;
    out->dims[x->ndim - 1] = 2;
    return MGE_OK;
}

/* det_grad, lrn_grad, dft_grad (dy, x): like x, float; dy's shape is what
 * the forward op gives for x. */
static mge_status grad_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    char b0[96], b1[96];
    int fwd = n->op == MGE_OP_DET_GRAD ? MGE_OP_DET : n->op == MGE_OP_LRN_GRAD ? MGE_OP_LRN : MGE_OP_DFT;
    mge_node f = *n;
    f.op = fwd;
    mge_tdesc y;
    memset(&y, 0, sizeof y);
    mge_status s = mge_emath_infer(&f, &in[1], &y, err);
    if (s)
        return s;
    int same = in[0].dtype == y.dtype && in[0].ndim == y.ndim;
    for (int d = 0; same && d < y.ndim; d++)
        same = in[0].dims[d] == y.dims[d];
    if (!same)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: dy is %s: expected %s (the forward's output)",
                             mge_op_info(n->op)->name, mge_tdesc_str(&in[0], b0, sizeof b0),
                             mge_tdesc_str(&y, b1, sizeof b1));
    *out = in[1];
    out->known = 0;
    return MGE_OK;
}

mge_status mge_emath_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    switch (n->op) {
    case MGE_OP_DET_GRAD: case MGE_OP_LRN_GRAD: case MGE_OP_DFT_GRAD: return grad_infer(n, in, out, err);
    case MGE_OP_DET: return det_infer(n, &in[0], out, err);
    case MGE_OP_EYE_LIKE: return eye_infer(n, &in[0], out, err);
    case MGE_OP_LRN: return lrn_infer(n, &in[0], out, err);
    case MGE_OP_DFT: return dft_infer(n, &in[0], out, err);
    default: return bitwise_infer(n, in, out, err);
    }
}

double mge_emath_flops(const mge_node *n, const mge_tdesc *in, const mge_tdesc *out)
{
    double m = mge_tdesc_count(&out[0]);
    switch (n->op) {
    case MGE_OP_DET: {
        double k = (double)in[0].dims[in[0].ndim - 1];
        return m * 2.0 / 3.0 * k * k * k;
    }
    case MGE_OP_DET_GRAD: {   /* a determinant of order k - 1 per element */
        double k = (double)in[1].dims[in[1].ndim - 1] - 1;
        return m * 2.0 / 3.0 * k * k * k;
    }
    case MGE_OP_LRN: return m * (2.0 * (double)mge_node_ints(n, MGE_KEY_size, 0, 1) + 4);
    case MGE_OP_LRN_GRAD: return m * (4.0 * (double)mge_node_ints(n, MGE_KEY_size, 0, 1) + 8);
    case MGE_OP_DFT: {
        int ax = mge_axis(mge_node_ints(n, MGE_KEY_axis, 0, 1), in[0].ndim);
        return ax < 0 ? 0 : m * 4.0 * (double)in[0].dims[ax];   /* O(n^2): a complex multiply-add per term */
    }
    case MGE_OP_DFT_GRAD: {
        int ax = mge_axis(mge_node_ints(n, MGE_KEY_axis, 0, 1), in[0].ndim);
        return ax < 0 ? 0 : m * 4.0 * (double)in[0].dims[ax];
    }
    case MGE_OP_EYE_LIKE: return 0;
    default: return m;
    }
}
