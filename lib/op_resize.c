/* op_resize.c — resize (F.interpolate on NCHW) and resize_grad: shape
 * inference and FLOPs.
 *
 * resize(x[N,C,H,W][, s]; mode, align_corners, scales=[sh,sw] | size=[oh,ow])
 *   -> [N,C,OH,OW] with OH = floor(H * sh) (PyTorch's rule) or oh; exactly
 *   one of scales, size and the input s (known at plan time: [oh,ow], or
 *   ONNX's sizes [N,C,oh,ow]). align_corners is bilinear's only (PyTorch
 *   refuses it for nearest too). mode=bicubic: F.interpolate's bicubic
 *   (cubic_a -0.75; exclude_outside as ONNX's).
 * resize_grad(dy, x[, s]) -> like x, dy summed back into the source pixels.
 * FLOPs: nearest 0 (a copy); bilinear 8 per output element (3 lerps of
 * 2 multiply-adds and the weights); bicubic 48; the gradients likewise. */
#include "internal.h"

#include <math.h>
#include <stdio.h>

/* The size input sz: i64/i32 [oh,ow] or [N,C,oh,ow] (ONNX Resize's sizes),
 * known at plan time. */
static mge_status size_input(const char *op, const mge_tdesc *x, const mge_tdesc *sz, int64_t *o, mge_error *err)
{
    char b[96];
    if ((sz->dtype != MGE_I64 && sz->dtype != MGE_I32) || sz->ndim != 1 || (sz->dims[0] != 2 && sz->dims[0] != 4))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: the size input is %s: expected i64[2] [oh,ow] or i64[4] [N,C,oh,ow]",
                             op, mge_tdesc_str(sz, b, sizeof b));
    if (!sz->known)
        return mge_error_set(err, MGE_ERR_UNSUPPORTED,
                             "%s: the size input depends on data, not only on shapes and constants: not supported", op);
    int k = sz->dims[0] == 4 ? 2 : 0;
    if (k && ((int64_t)sz->val[0] != x->dims[0] || (int64_t)sz->val[1] != x->dims[1]))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: the size input [%lld,%lld,...] changes N or C of x %s", op,
                             (long long)sz->val[0], (long long)sz->val[1], mge_tdesc_str(x, b, sizeof b));
    for (int i = 0; i < 2; i++)
        if ((o[i] = (int64_t)sz->val[k + i]) < 1 || sz->val[k + i] > 1e15)
            return mge_error_set(err, MGE_ERR_INVALID, "%s: the size input gives [%.0f,%.0f]: expected sizes >= 1", op,
                                 sz->val[k], sz->val[k + 1]);
    return MGE_OK;
}

static mge_status out_dims(const mge_node *n, const char *op, const mge_tdesc *x, const mge_tdesc *szin, int64_t *oh,
                           int64_t *ow, mge_error *err)
{
    char b[96];
    if (x->ndim != 4)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is %s: expected rank 4 [N,C,H,W]", op,
                             mge_tdesc_str(x, b, sizeof b));
    if (!mge_dtype_is_float(x->dtype))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is %s: expected a float dtype (f32, f16, bf16, f64)", op,
                             mge_tdesc_str(x, b, sizeof b));
    int64_t mode = mge_node_int(n, MGE_KEY_mode, MGE_MODE_NEAREST);
    if (mode != MGE_MODE_NEAREST && mode != MGE_MODE_BILINEAR && mode != MGE_MODE_BICUBIC) {
        const char *w = mge_key_enum_word(MGE_KEY_mode, mode);
        return mge_error_set(err, MGE_ERR_INVALID, "%s: mode=%s: expected nearest, bilinear or bicubic", op,
                             w ? w : "?");
    }
    if (mode == MGE_MODE_NEAREST && mge_node_int(n, MGE_KEY_align_corners, 0))
        return mge_error_set(err, MGE_ERR_INVALID, "%s: align_corners=true needs mode=bilinear or bicubic", op);
    double ca = mge_node_float(n, MGE_KEY_cubic_a, -0.75);
    if (mode != MGE_MODE_BICUBIC && (ca != -0.75 || mge_node_int(n, MGE_KEY_exclude_outside, 0)))
        return mge_error_set(err, MGE_ERR_INVALID, "%s: cubic_a and exclude_outside need mode=bicubic", op);
    if (!isfinite(ca))
        return mge_error_set(err, MGE_ERR_INVALID, "%s: cubic_a=%g: expected a finite number", op, ca);
    const mge_attr *sc = mge_node_attr(n, MGE_KEY_scales), *sz = mge_node_attr(n, MGE_KEY_size);
    if ((!!sc + !!sz + !!szin) != 1)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: needs exactly one of scales=[sh,sw], size=[oh,ow] and a size input%s",
                             op, sc || sz || szin ? ", found more than one" : "");
    int64_t o[2];
    mge_status s;
    if (szin) {
        if ((s = size_input(op, x, szin, o, err)))
            return s;
    } else if (sz) {
        if (sz->n != 2)
            return mge_error_set(err, MGE_ERR_INVALID, "%s: size has %d values: expected 2 [oh,ow]", op, sz->n);
        for (int k = 0; k < 2; k++)
            if ((o[k] = sz->i[k]) < 1)
                return mge_error_set(err, MGE_ERR_INVALID, "%s: size=[%lld,%lld]: expected sizes >= 1", op,
                                     (long long)sz->i[0], (long long)sz->i[1]);
    } else {
        if (sc->n != 2)
            return mge_error_set(err, MGE_ERR_INVALID, "%s: scales has %d values: expected 2 [sh,sw]", op, sc->n);
        for (int k = 0; k < 2; k++) {
            double f = mge_attr_float_at(sc, k);
            if (!(f > 0) || !isfinite(f))
                return mge_error_set(err, MGE_ERR_INVALID, "%s: scales=[%g,%g]: expected scales > 0", op,
                                     mge_attr_float_at(sc, 0), mge_attr_float_at(sc, 1));
            double v = floor((double)x->dims[2 + k] * f);
            if (v > 1e15)
                return mge_error_set(err, MGE_ERR_INVALID, "%s: scales=[%g,%g] make an output too large", op,
                                     mge_attr_float_at(sc, 0), mge_attr_float_at(sc, 1));
            o[k] = (int64_t)v;
            if (o[k] < 1 && x->dims[2 + k] > 0)
                return mge_error_set(err, MGE_ERR_SHAPE, "%s: scales=[%g,%g] make an empty output from x %s", op,
                                     mge_attr_float_at(sc, 0), mge_attr_float_at(sc, 1),
                                     mge_tdesc_str(x, b, sizeof b));
        }
    }
    *oh = o[0];
    *ow = o[1];
    return MGE_OK;
}

mge_status mge_resize_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    int grad = n->op == MGE_OP_RESIZE_GRAD;
    const char *op = grad ? "resize_grad" : "resize";
    const mge_tdesc *x = &in[grad ? 1 : 0];
    int64_t oh = 0, ow = 0;
    mge_status s = out_dims(n, op, x, n->nin > (grad ? 2 : 1) ? &in[grad ? 2 : 1] : NULL, &oh, &ow, err);
    if (s)
        return s;
    if (grad) {
        const mge_tdesc *dy = &in[0];
        if (dy->dtype != x->dtype || dy->ndim != 4 || dy->dims[0] != x->dims[0] || dy->dims[1] != x->dims[1] ||
            dy->dims[2] != oh || dy->dims[3] != ow) {
            char b1[96], b2[96];
            int64_t e[4] = {x->dims[0], x->dims[1], oh, ow};
            return mge_error_set(err, MGE_ERR_SHAPE, "resize_grad: dy is %s: expected %s", mge_tdesc_str(dy, b1, sizeof b1),
                                 mge_shape_str(x->dtype, 4, e, b2, sizeof b2));
        }
        *out = *x;
        out->known = 0;
        return MGE_OK;
    }
    *out = *x;
    out->known = 0;
    out->dims[2] = oh;
    out->dims[3] = ow;
    return MGE_OK;
}

double mge_resize_flops(const mge_node *n, const mge_tdesc *in, const mge_tdesc *out)
{
    const mge_tdesc *big = n->op == MGE_OP_RESIZE_GRAD ? &in[0] : &out[0];
    int64_t mode = mge_node_int(n, MGE_KEY_mode, 0);
    /* bicubic: 16 taps of a multiply-add and the 8 weights' few each */
    return mode == MGE_MODE_BILINEAR ? 8.0 * mge_tdesc_count(big)
           : mode == MGE_MODE_BICUBIC ? 48.0 * mge_tdesc_count(big) : 0.0;
}
