/* op_quant.c — the int8 ops mge-quant writes (see ops.def): shape
 * inference and operation counts.
 *
 * quantize(x f32) -> qs8, dequantize(x qs8) -> f32: same shape.
 * qconv2d(x qs8 [N,C,H,W], weight qs8, bias qs32?) and qlinear: conv2d's and
 * linear's shapes (lib/op_conv.c, op_linear.c check them), qs8 out.
 * qadd(a qs8, b qs8): the same shape for both, no broadcasting.
 * Every scale must be finite and positive, every zero point in [-128, 127];
 * act is none, relu or relu6 (folded into the output clamp).
 * "FLOPs" count integer operations the same way (a multiply-add is 2), so
 * mge-prof's op/s compare with the f32 model's FLOP/s. */
#include "internal.h"

#include <math.h>
#include <string.h>

static mge_status check_scale(const mge_node *n, const char *name, int key, mge_error *err)
{
    double s = mge_node_float(n, key, NAN);
    if (!(s > 0) || !isfinite(s) || s < 1e-30)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: %s=%g: expected a finite scale > 1e-30", name,
                             mge_key_name(key), s);
    return MGE_OK;
}

static mge_status check_zero(const mge_node *n, const char *name, int key, mge_error *err)
{
    int64_t z = mge_node_int(n, key, 0);
    if (z < -128 || z > 127)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: %s=%lld: expected a zero point in [-128, 127]", name,
                             mge_key_name(key), (long long)z);
    return MGE_OK;
}

static mge_status check_act(const mge_node *n, const char *name, mge_error *err)
{
    const mge_attr *a = mge_node_attr(n, MGE_KEY_act);
    if (!a || a->n != 1 || (a->i[0] != -1 && a->i[0] != MGE_OP_RELU && a->i[0] != MGE_OP_RELU6))
        return mge_error_set(err, MGE_ERR_INVALID, "%s: act=%s: expected none, relu or relu6", name,
                             a && a->n == 1 ? mge_attr_op_name(a->i[0]) : "[...]");
    return MGE_OK;
}

static mge_status expect(const char *name, const char *what, const mge_tdesc *t, mge_dtype dt, mge_error *err)
{
    if (t->dtype == dt)
        return MGE_OK;
    char b[96];
    return mge_error_set(err, MGE_ERR_SHAPE, "%s: %s is %s: expected %s", name, what, mge_tdesc_str(t, b, sizeof b),
                         mge_dtype_name(dt));
}

mge_status mge_quant_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    const char *name = mge_op_info(n->op)->name;
    mge_status s;
    switch (n->op) {
    case MGE_OP_QUANTIZE:
    case MGE_OP_DEQUANTIZE: {
        int q = n->op == MGE_OP_QUANTIZE;
        if ((s = check_scale(n, name, MGE_KEY_scale, err)) || (s = check_zero(n, name, MGE_KEY_zero, err)) ||
            (s = expect(name, "x", &in[0], q ? MGE_F32 : MGE_QS8, err)))
            return s;
        *out = in[0];
        out->dtype = q ? MGE_QS8 : MGE_F32;
        return mge_shape_numel(out->ndim, out->dims, out->dtype, NULL, NULL, err);
    }
    case MGE_OP_QADD:
        if ((s = check_act(n, name, err)) || (s = check_scale(n, name, MGE_KEY_x_scale, err)) ||
            (s = check_zero(n, name, MGE_KEY_x_zero, err)) || (s = check_scale(n, name, MGE_KEY_x2_scale, err)) ||
            (s = check_zero(n, name, MGE_KEY_x2_zero, err)) || (s = check_scale(n, name, MGE_KEY_y_scale, err)) ||
            (s = check_zero(n, name, MGE_KEY_y_zero, err)) || (s = expect(name, "a", &in[0], MGE_QS8, err)) ||
            (s = expect(name, "b", &in[1], MGE_QS8, err)))
            return s;
        if (in[0].ndim != in[1].ndim || memcmp(in[0].dims, in[1].dims, sizeof(int64_t) * (size_t)in[0].ndim)) {
            char ba[96], bb[96];
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: a is %s but b is %s: expected the same shape", name,
                                 mge_tdesc_str(&in[0], ba, sizeof ba), mge_tdesc_str(&in[1], bb, sizeof bb));
        }
        *out = in[0];
        return mge_shape_numel(out->ndim, out->dims, out->dtype, NULL, NULL, err);
    default: { /* qconv2d, qlinear */
        int conv = n->op == MGE_OP_QCONV2D;
        if ((s = check_act(n, name, err)) || (s = check_scale(n, name, MGE_KEY_x_scale, err)) ||
            (s = check_zero(n, name, MGE_KEY_x_zero, err)) || (s = check_scale(n, name, MGE_KEY_y_scale, err)) ||
            (s = check_zero(n, name, MGE_KEY_y_zero, err)) || (s = expect(name, "x", &in[0], MGE_QS8, err)))
            return s;
        mge_node plain = *n;
        plain.op = conv ? MGE_OP_CONV2D : MGE_OP_LINEAR;
        s = conv ? mge_conv_infer(&plain, in, out, err) : mge_linear_infer(&plain, in, out, err);
        if (s) { /* "conv2d: ..." -> "qconv2d: conv2d: ..." says which op */
            mge_error_prefix(err, "%s", name);
            return s;
        }
        return MGE_OK;
    }
    }
}

double mge_quant_flops(const mge_node *n, const mge_tdesc *in, const mge_tdesc *out)
{
    switch (n->op) {
    case MGE_OP_QCONV2D: {
        mge_node plain = *n;
        plain.op = MGE_OP_CONV2D;
        return mge_conv_flops(&plain, in, out);
    }
    case MGE_OP_QLINEAR: {
        mge_node plain = *n;
        plain.op = MGE_OP_LINEAR;
        return mge_linear_flops(&plain, in, out);
    }
    default: return mge_tdesc_count(&out[0]) * (n->op == MGE_OP_QADD ? 3 : 1);
    }
}
