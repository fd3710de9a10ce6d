/* op_unary.c — shape inference and FLOPs of the elementwise unary ops.
 *
 * Output = input shape. Float-only ops (the transcendental ones, leaky_relu,
 * dropout, the table's math ops) need f32/f16/bf16; relu, relu6, neg, abs,
 * sign and square also take i8/i32/i64, and clamp with integer bounds in
 * the dtype's range; isnan/isinf give bool; cast
 * converts to its `dtype` attribute (any pair). Attribute checks: clamp
 * needs min or max (no NaN), hardtanh min <= max, softplus beta != 0.
 * prelu(x, weight): weight f32[num], num 1 or x's dim 1; a layer whose
 * NODE.weight starts at 0.25 (PyTorch).
 * FLOPs: 1 per output element for every op (a transcendental counts 1 too,
 * as in most profilers); cast is data movement and counts 0.
 *
 * Gradient ops (dy, y) / (dy, x): both float, same dtype and shape; the
 * result is like dy. FLOPs per element: 1 for the masks (relu, relu6,
 * leaky_relu, abs, dropout, hsigmoid), 2 for hswish, 3 for sigmoid/tanh
 * (1 - y, two products), 5 for silu and gelu (the activation's terms again),
 * 2 for unary_grad (the derivative and the product), 3 for prelu_grad. */
#include "internal.h"

#include <math.h>

static int int_ok(mge_dtype dt)
{
    return dt == MGE_I8 || dt == MGE_I16 || dt == MGE_I32 || dt == MGE_I64;
}

static int is_grad_op(int op)
{
    switch (op) {
    case MGE_OP_RELU_GRAD: case MGE_OP_RELU6_GRAD: case MGE_OP_LEAKY_RELU_GRAD: case MGE_OP_SIGMOID_GRAD:
    case MGE_OP_TANH_GRAD: case MGE_OP_GELU_GRAD: case MGE_OP_SILU_GRAD: case MGE_OP_HSWISH_GRAD:
    case MGE_OP_HSIGMOID_GRAD: case MGE_OP_ABS_GRAD: case MGE_OP_DROPOUT_GRAD: case MGE_OP_UNARY_GRAD:
        return 1;
    }
    return 0;
}

/* (dy, y or x): same float dtype and shape; like dy. */
static mge_status grad_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    const char *name = mge_op_info(n->op)->name;
    const mge_tdesc *dy = &in[0], *x = &in[1];
    char ba[96], bb[96]; /* formatted on failure only: this runs for every gradient node */
    int same = dy->dtype == x->dtype && dy->ndim == x->ndim;
    for (int i = 0; same && i < dy->ndim; i++)
        same = dy->dims[i] == x->dims[i];
    if (!same)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: dy %s and %s %s: expected the same dtype and shape", name,
                             mge_tdesc_str(dy, ba, sizeof ba),
                             n->op == MGE_OP_RELU_GRAD || n->op == MGE_OP_RELU6_GRAD || n->op == MGE_OP_SIGMOID_GRAD ||
                                     n->op == MGE_OP_TANH_GRAD || n->op == MGE_OP_DROPOUT_GRAD
                                 ? "y"
                                 : "x",
                             mge_tdesc_str(x, bb, sizeof bb));
    if (!mge_dtype_is_float(dy->dtype))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: dy is %s: expected a float dtype (f32, f16, bf16, f64)", name,
                             mge_tdesc_str(dy, ba, sizeof ba));
    if (n->op == MGE_OP_UNARY_GRAD) {
        const mge_attr *a = mge_node_attr(n, MGE_KEY_act);
        if (!a || a->n != 1 || !(mge_op_flags(a->i[0]) & MGE_OPF_TABLE))
            return mge_error_set(err, MGE_ERR_INVALID, "unary_grad: act=%s: expected an op of the activation table",
                                 a && a->n == 1 ? mge_attr_op_name(a->i[0]) : "[...]");
    }
    if (n->op == MGE_OP_DROPOUT_GRAD) {
        double p = mge_node_float(n, MGE_KEY_p, 0.5);
        if (!(p >= 0 && p <= 1))
            return mge_error_set(err, MGE_ERR_INVALID, "dropout_grad: p=%g: expected a probability in [0, 1]", p);
    }
    *out = *dy;
    return MGE_OK;
}

/* cast of values known at plan time, as ref_unary.c's cast converts:
 * float to int truncates toward zero (NaN to 0) and wraps; to bool is != 0. */
static void cast_known(const mge_tdesc *x, mge_tdesc *out)
{
    int64_t m = mge_tdesc_numel(out);
    if (m < 0 || m > MGE_TDESC_NVAL)
        return;
    for (int64_t i = 0; i < m; i++) {
        double v = x->val[i];
        int64_t k = v != v ? 0 : v >= 9.2e18 ? INT64_MAX : v <= -9.2e18 ? INT64_MIN : (int64_t)v;
        switch (out->dtype) {
        case MGE_F32: v = (float)v; break;
        case MGE_F64: break;
        case MGE_I16: v = (int16_t)(uint16_t)(uint64_t)k; break;
        case MGE_U16: v = (uint16_t)(uint64_t)k; break;
        case MGE_U32: v = (uint32_t)(uint64_t)k; break;
        /* [2^63, 2^64) converts, beyond saturates, negatives wrap (as the kernel) */
        case MGE_U64: v = v != v ? 0 : v >= 0x1p64 ? 0x1p64 : v >= 0 ? trunc(v) : (double)(uint64_t)k; break;
        case MGE_F16: v = mge_f16_to_f32(mge_f64_to_f16(v)); break;   /* rounded once, as the kernel */
        case MGE_BF16: v = mge_bf16_to_f32(mge_f64_to_bf16(v)); break;
        case MGE_BOOL: v = v != 0; break;
        case MGE_I8: v = (int8_t)(uint8_t)(uint64_t)k; break;
        case MGE_U8: v = (uint8_t)(uint64_t)k; break;
        case MGE_I32: v = (int32_t)(uint32_t)(uint64_t)k; break;
        case MGE_I64: v = (double)k; break;
        default: return;
        }
        out->val[i] = v;
    }
    out->known = 1;
}

static int bound_ok(const mge_node *n, int key, double *v)
{
    const mge_attr *a = mge_node_attr(n, key);
    if (a)
        *v = a->f;
    return !a || a->f == a->f;
}

/* The attribute checks of clamp, hardtanh and softplus. */
static mge_status attr_check(const mge_node *n, const char *name, mge_error *err)
{
    double lo = -1, hi = 1;
    if (n->op == MGE_OP_CLAMP || n->op == MGE_OP_HARDTANH) {
        if (!bound_ok(n, MGE_KEY_min, &lo) || !bound_ok(n, MGE_KEY_max, &hi))
            return mge_error_set(err, MGE_ERR_INVALID, "%s: min or max is NaN: expected numbers", name);
        if (n->op == MGE_OP_CLAMP && !mge_node_attr(n, MGE_KEY_min) && !mge_node_attr(n, MGE_KEY_max))
            return mge_error_set(err, MGE_ERR_INVALID, "clamp: needs min, max or both");
        if (n->op == MGE_OP_HARDTANH && lo > hi)
            return mge_error_set(err, MGE_ERR_INVALID, "hardtanh: min=%g > max=%g: expected min <= max", lo, hi);
    }
    if (n->op == MGE_OP_SHRINK) {
        double l = mge_node_float(n, MGE_KEY_lambd, 0.5), sh = mge_node_float(n, MGE_KEY_shift, 0);
        if (l != l || sh != sh)
            return mge_error_set(err, MGE_ERR_INVALID, "shrink: lambd or shift is NaN: expected numbers");
    }
    if (n->op == MGE_OP_SOFTPLUS) {
        double b = mge_node_float(n, MGE_KEY_beta, 1);
        if (!(b != 0) || isinf(b))
            return mge_error_set(err, MGE_ERR_INVALID, "softplus: beta=%g: expected a finite nonzero number", b);
    }
    return MGE_OK;
}

/* prelu(x, weight): float x, weight of x's dtype with num values, num 1 or
 * x's channels (dim 1). */
static mge_status prelu_infer(const mge_node *n, const mge_tdesc *x, const mge_tdesc *w, mge_error *err)
{
    char b[96], bw[96];
    /* prelu_grad has no num: the weight's length */
    int64_t num = n->op == MGE_OP_PRELU_GRAD && w->ndim == 1 ? w->dims[0] : mge_node_int(n, MGE_KEY_num, 1);
    if (!mge_dtype_is_float(x->dtype))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is %s: expected a float dtype (f32, f16, bf16, f64)",
                             mge_op_info(n->op)->name, mge_tdesc_str(x, b, sizeof b));
    if (num < 1)
        return mge_error_set(err, MGE_ERR_INVALID, "prelu: num=%lld: expected 1 or the channels", (long long)num);
    if (num > 1 && (x->ndim < 2 || x->dims[1] != num))
        return mge_error_set(err, MGE_ERR_SHAPE, "prelu: num=%lld but x is %s: expected num 1 or x's dim 1",
                             (long long)num, mge_tdesc_str(x, b, sizeof b));
    if (w->dtype != x->dtype || w->ndim != 1 || w->dims[0] != num)
        return mge_error_set(err, MGE_ERR_SHAPE, "prelu: weight is %s: expected %s[%lld] (num=%lld)",
                             mge_tdesc_str(w, bw, sizeof bw), mge_dtype_name(x->dtype), (long long)num,
                             (long long)num);
    return MGE_OK;
}

mge_status mge_unary_params(int op, int nattr, const mge_attr *attrs, const mge_tdesc *x, mge_param_spec *specs,
                            int *nspecs, mge_error *err)
{
    if (op != MGE_OP_PRELU)
        return mge_error_set(err, MGE_ERR_INVALID, "%s creates no parameters", mge_op_info(op)->name);
    const mge_attr *a = mge_attrs_find(nattr, attrs, MGE_KEY_num);
    int64_t num = a ? a->i[0] : 1;
    if (num < 1)
        return mge_error_set(err, MGE_ERR_INVALID, "prelu: num=%lld: expected 1 or the channels", (long long)num);
    mge_dtype dt = mge_dtype_is_float(x->dtype) ? x->dtype : MGE_F32;
    mge_param_spec_set(&specs[0], "weight", MGE_VAL_PARAM, dt, 1, &num, "value(0.25)");
    *nspecs = 1;
    return MGE_OK;
}

/* The float-only ops: their attributes, then the dtype. */
static mge_status float_only(const mge_node *n, const mge_tdesc *x, const char *name, mge_error *err)
{
    char b[96];
    if (n->op == MGE_OP_DROPOUT) {
        double p = mge_node_float(n, MGE_KEY_p, 0.5);
        if (!(p >= 0 && p <= 1))
            return mge_error_set(err, MGE_ERR_INVALID, "dropout: p=%g: expected a probability in [0, 1]", p);
    }
    mge_status s = attr_check(n, name, err);
    if (s)
        return s;
    if (mge_dtype_is_float(x->dtype))
        return MGE_OK;
    return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is %s: expected a float dtype (f32, f16, bf16, f64)", name,
                         mge_shape_str(x->dtype, x->ndim, x->dims, b, sizeof b));
}

/* clamp of an integer tensor keeps its dtype (torch.clamp with integer
 * bounds): the bounds must be integers in the dtype's range. */
static mge_status int_bounds(const mge_node *n, mge_dtype dt, mge_error *err)
{
    double lo = dt == MGE_I8 ? -128 : dt == MGE_I16 ? -32768 : dt == MGE_I32 ? -2147483648.0 : -9223372036854775808.0;
    double hi = dt == MGE_I8 ? 127 : dt == MGE_I16 ? 32767 : dt == MGE_I32 ? 2147483647.0
                                                              : 9223372036854774784.0; /* < 2^63 */
    static const int keys[2] = {MGE_KEY_min, MGE_KEY_max};
    for (int k = 0; k < 2; k++) {
        const mge_attr *a = mge_node_attr(n, keys[k]);
        if (a && (a->f != floor(a->f) || a->f < lo || a->f > hi))
            return mge_error_set(err, MGE_ERR_INVALID,
                                 "clamp: %s=%g on %s: expected an integer in the dtype's range (cast x to a float "
                                 "first for a float bound)",
                                 k ? "max" : "min", a->f, mge_dtype_name(dt));
    }
    return MGE_OK;
}

mge_status mge_unary_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    if (is_grad_op(n->op))
        return grad_infer(n, in, out, err);
    if (n->op == MGE_OP_PRELU_GRAD) {
        mge_status s = prelu_infer(n, &in[1], &in[2], err);
        if (s)
            return s;
        char ba[96], bb[96];
        int same = in[0].dtype == in[1].dtype && in[0].ndim == in[1].ndim;
        for (int i = 0; same && i < in[0].ndim; i++)
            same = in[0].dims[i] == in[1].dims[i];
        if (!same)
            return mge_error_set(err, MGE_ERR_SHAPE, "prelu_grad: dy %s and x %s: expected the same dtype and shape",
                                 mge_tdesc_str(&in[0], ba, sizeof ba), mge_tdesc_str(&in[1], bb, sizeof bb));
        out[0] = in[1];
        out[0].known = 0;
        out[1] = in[2];
        out[1].known = 0;
        return MGE_OK;
    }

    const char *name = mge_op_info(n->op)->name;
    const mge_tdesc *x = &in[0];
    char b[96];
    *out = *x;
    out->known = 0; /* only cast keeps (converted) values */
    switch (n->op) {
    case MGE_OP_CAST: {
        const mge_attr *a = mge_node_attr(n, MGE_KEY_dtype);
        if (!a || a->i[0] < 0 || a->i[0] >= MGE_NDTYPES)
            return mge_error_set(err, MGE_ERR_INVALID, "cast: needs a valid 'dtype' attribute");
        if (x->dtype == MGE_QS8 || x->dtype == MGE_QS32 || a->i[0] == MGE_QS8 || a->i[0] == MGE_QS32)
            return mge_error_set(err, MGE_ERR_INVALID,
                                 "cast: %s to %s: quantized dtypes carry a scale; use quantize/dequantize",
                                 mge_dtype_name(x->dtype), mge_dtype_name((mge_dtype)a->i[0]));
        out->dtype = (mge_dtype)a->i[0];
        if (x->known)
            cast_known(x, out);
        return MGE_OK;
    }
    case MGE_OP_PRELU:
        return prelu_infer(n, x, &in[1], err);
    case MGE_OP_ISNAN:
    case MGE_OP_ISINF:
        if (!mge_dtype_is_float(x->dtype))
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is %s: expected a float dtype (f32, f16, bf16, f64)", name,
                                 mge_shape_str(x->dtype, x->ndim, x->dims, b, sizeof b));
        out->dtype = MGE_BOOL;
        return MGE_OK;
    case MGE_OP_CLAMP:
        if (int_ok(x->dtype)) {
            mge_status s = attr_check(n, name, err);
            if (s)
                return s;
            return int_bounds(n, x->dtype, err);
        }
        return float_only(n, x, name, err);
    case MGE_OP_RELU:
    case MGE_OP_RELU6:
    case MGE_OP_NEG:
    case MGE_OP_ABS:
    case MGE_OP_SIGN:
    case MGE_OP_SQUARE:
        if (mge_dtype_is_float(x->dtype) || int_ok(x->dtype))
            return MGE_OK;
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is %s: expected a float (f32, f16, bf16, f64) or i8/i16/i32/i64 dtype",
                             name, mge_shape_str(x->dtype, x->ndim, x->dims, b, sizeof b));
    default:
        return float_only(n, x, name, err);
    }
}

double mge_unary_flops(const mge_node *n, const mge_tdesc *in, const mge_tdesc *out)
{
    double k = 1;
    switch (n->op) {
    case MGE_OP_CAST: k = 0; break;
    case MGE_OP_HSWISH_GRAD: k = 2; break;
    case MGE_OP_SIGMOID_GRAD: case MGE_OP_TANH_GRAD: k = 3; break;
    case MGE_OP_SILU_GRAD: case MGE_OP_GELU_GRAD: k = 5; break;
    case MGE_OP_UNARY_GRAD: k = 2; break;
    case MGE_OP_PRELU_GRAD: k = 3; break;
    default: break;
    }
    return k * mge_tdesc_count(&out[0]);
}
