/* op_loss.c — losses: a scalar f32 (ndim 0), the mean over the batch.
 *
 * cross_entropy(logits[N,C] float, label[N] i32 or i64): PyTorch's
 *   F.cross_entropy with class indices and reduction='mean'.
 * mse(a, b): same dtype (float) and shape; the mean of (a - b)^2 over all
 *   elements (F.mse_loss).
 * FLOPs: cross_entropy 5 per logit (log_softmax) + 2 per row (pick, mean);
 * mse 3 per element (subtract, square, add). */
#include "internal.h"

mge_status mge_loss_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    const mge_tdesc *a = &in[0], *b = &in[1];
    char ba[96], bb[96];
    mge_tdesc_str(a, ba, sizeof ba);
    mge_tdesc_str(b, bb, sizeof bb);
    if (n->op == MGE_OP_CROSS_ENTROPY) {
        if (a->ndim != 2 || !mge_dtype_is_float(a->dtype))
            return mge_error_set(err, MGE_ERR_SHAPE, "cross_entropy: logits %s: expected a float [N,C]", ba);
        if (a->dims[1] < 1)
            return mge_error_set(err, MGE_ERR_SHAPE, "cross_entropy: logits %s: expected at least one class", ba);
        if ((b->dtype != MGE_I32 && b->dtype != MGE_I64) || b->ndim != 1 || b->dims[0] != a->dims[0])
            return mge_error_set(err, MGE_ERR_SHAPE,
                                 "cross_entropy: label %s does not fit logits %s: expected i32[%lld] or i64[%lld] "
                                 "class indices",
                                 bb, ba, (long long)a->dims[0], (long long)a->dims[0]);
    } else {
        int same = a->dtype == b->dtype && a->ndim == b->ndim;
        for (int i = 0; same && i < a->ndim; i++)
            same = a->dims[i] == b->dims[i];
        if (!same)
            return mge_error_set(err, MGE_ERR_SHAPE, "mse: %s and %s: expected the same dtype and shape", ba, bb);
        if (!mge_dtype_is_float(a->dtype))
            return mge_error_set(err, MGE_ERR_SHAPE, "mse: %s: expected a float dtype", ba);
    }
    out->dtype = MGE_F32;
    out->ndim = 0;
    return MGE_OK;
}

double mge_loss_flops(const mge_node *n, const mge_tdesc *in, const mge_tdesc *out)
{
    double na = mge_tdesc_count(&in[0]);
    if (n->op == MGE_OP_CROSS_ENTROPY)
        return 5.0 * na + 2.0 * (in[0].ndim >= 1 ? (double)in[0].dims[0] : 0);
    return 3.0 * na;
}
