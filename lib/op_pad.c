/* op_pad.c — pad and pad_grad: shape inference and FLOPs.
 *
 * pads lists (begin, end) pairs from the LAST dim backwards, F.pad's
 * order: [b_last, e_last, b_last-1, e_last-1, ...], 2k entries padding the
 * trailing k dims. We take PyTorch's order because the modes' rules (reflect
 * and replicate on the trailing 1 to 3 dims) are stated in it and padding
 * H and W of NCHW takes 4 numbers, not 8; ONNX's [b0..b(r-1), e0..e(r-1)]
 * is the same list with the dims reversed and the pairs interleaved.
 * constant: any rank; a negative pad crops (as ONNX and F.pad allow), down
 *   to at least one element.
 * reflect, replicate: the trailing 1 to 3 dims, pads >= 0; reflect needs
 *   every pad < its dim (PyTorch's rule), replicate a non-empty dim.
 * pad_grad(dy, x) -> like x: dy summed back into the source elements.
 * FLOPs: 0 (data movement); pad_grad 1 per dy element (the sums). */
#include "internal.h"

#include <stdio.h>

static const char *mode_word(int64_t m)
{
    const char *w = mge_key_enum_word(MGE_KEY_mode, m);
    return w ? w : "?";
}

/* The output shape of pad on x into *y. */
static mge_status pad_shape(const mge_node *n, const char *op, const mge_tdesc *x, mge_tdesc *y, mge_error *err)
{
    char b[96];
    const mge_attr *p = mge_node_attr(n, MGE_KEY_pads);
    int64_t mode = mge_node_int(n, MGE_KEY_mode, MGE_MODE_CONSTANT);
    if (mode != MGE_MODE_CONSTANT && mode != MGE_MODE_REFLECT && mode != MGE_MODE_REPLICATE)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: mode=%s: expected constant, reflect or replicate", op,
                             mode_word(mode));
    if (x->dtype == MGE_QS8 || x->dtype == MGE_QS32)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is %s: quantized tensors are not padded", op,
                             mge_tdesc_str(x, b, sizeof b));
    if (!p || p->n % 2)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: pads has %d values: expected (begin, end) pairs", op,
                             p ? p->n : 0);
    int k = p->n / 2;
    if (k > x->ndim)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: pads has %d pairs for x %s of rank %d", op, k,
                             mge_tdesc_str(x, b, sizeof b), x->ndim);
    if (mode != MGE_MODE_CONSTANT && k > 3)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: mode=%s pads the trailing 1 to 3 dims, pads has %d pairs", op,
                             mode_word(mode), k);
    *y = *x;
    y->known = 0;
    for (int j = 0; j < k; j++) {
        int d = x->ndim - 1 - j;
        int64_t pb = p->i[2 * j], pe = p->i[2 * j + 1], len = x->dims[d];
        if (mode != MGE_MODE_CONSTANT && (pb < 0 || pe < 0))
            return mge_error_set(err, MGE_ERR_INVALID, "%s: pads=[%lld,%lld] for dim %d: mode=%s needs pads >= 0", op,
                                 (long long)pb, (long long)pe, d, mode_word(mode));
        if (mode == MGE_MODE_REFLECT && (pb >= len || pe >= len))
            return mge_error_set(err, MGE_ERR_SHAPE,
                                 "%s: pads=[%lld,%lld] for dim %d of size %lld: mode=reflect needs pads < %lld", op,
                                 (long long)pb, (long long)pe, d, (long long)len, (long long)len);
        if (mode == MGE_MODE_REPLICATE && len < 1 && (pb || pe))
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: dim %d is empty: mode=replicate has nothing to repeat", op,
                                 d);
        if (pb < -(INT64_C(1) << 40) || pb > (INT64_C(1) << 40) || pe < -(INT64_C(1) << 40) ||
            pe > (INT64_C(1) << 40))
            return mge_error_set(err, MGE_ERR_INVALID, "%s: pads=[%lld,%lld] for dim %d: out of range", op,
                                 (long long)pb, (long long)pe, d);
        y->dims[d] = len + pb + pe;
        if (y->dims[d] < 1)
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: pads=[%lld,%lld] crop dim %d of size %lld to %lld: expected >= 1",
                                 op, (long long)pb, (long long)pe, d, (long long)len, (long long)y->dims[d]);
    }
    return MGE_OK;
}

mge_status mge_pad_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    if (n->op == MGE_OP_PAD)
        return pad_shape(n, "pad", &in[0], out, err);
    const mge_tdesc *dy = &in[0], *x = &in[1];
    mge_tdesc y;
    char b1[96], b2[96];
    mge_status s = pad_shape(n, "pad_grad", x, &y, err);
    if (s)
        return s;
    if (!mge_dtype_is_float(x->dtype))
        return mge_error_set(err, MGE_ERR_SHAPE, "pad_grad: x is %s: expected a float dtype",
                             mge_tdesc_str(x, b1, sizeof b1));
    int ok = dy->dtype == y.dtype && dy->ndim == y.ndim;
    for (int i = 0; ok && i < y.ndim; i++)
        ok = dy->dims[i] == y.dims[i];
    if (!ok)
        return mge_error_set(err, MGE_ERR_SHAPE, "pad_grad: dy is %s: expected %s", mge_tdesc_str(dy, b1, sizeof b1),
                             mge_tdesc_str(&y, b2, sizeof b2));
    *out = *x;
    out->known = 0;
    return MGE_OK;
}

double mge_pad_flops(const mge_node *n, const mge_tdesc *in, const mge_tdesc *out)
{
    (void)out;
    return n->op == MGE_OP_PAD_GRAD ? mge_tdesc_count(&in[0]) : 0.0;
}
