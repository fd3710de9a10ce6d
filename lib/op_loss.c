/* op_loss.c — losses: a scalar f32 (ndim 0), the mean over the batch.
 *
 * cross_entropy(logits[N,C,d...] float, label[N,d...] i32 or i64;
 *   ignore_index=-100, label_smoothing=0): PyTorch's F.cross_entropy with
 *   class indices and reduction='mean' (over the positions whose label is
 *   not ignore_index; NaN when all are). A label outside [0, C) other than
 *   ignore_index is a run-time error naming it and its position.
 * mse(a, b): same dtype (float) and shape; the mean of (a - b)^2 over all
 *   elements (F.mse_loss).
 * FLOPs: cross_entropy 5 per logit (log_softmax) + 2 per row (pick, mean);
 * mse 3 per element (subtract, square, add).
 *
 * Gradient ops: dy is the loss's gradient, one f32 (rank 0).
 * cross_entropy_grad(dy, logits, label): logits and label as in the
 *   forward; like logits. FLOPs 6 per logit (softmax again, subtract, scale).
 * mse_grad(dy, a, b): a and b as in the forward; like a (d/da). FLOPs 3 per
 *   element. */
#include "internal.h"

mge_status mge_loss_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    const char *name = mge_op_info(n->op)->name;
    int grad = n->op == MGE_OP_CROSS_ENTROPY_GRAD || n->op == MGE_OP_MSE_GRAD;
    if (grad) {
        const mge_tdesc *dy = &in[0];
        int64_t k = 1;
        for (int i = 0; i < dy->ndim; i++)
            k *= dy->dims[i];
        if (dy->dtype != MGE_F32 || k != 1) {
            char bd[96];
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: dy %s: expected the loss's gradient, one f32",
                                 mge_op_info(n->op)->name, mge_tdesc_str(dy, bd, sizeof bd));
        }
        in++;   /* the rest is checked as the forward's inputs */
    }
    const mge_tdesc *a = &in[0], *b = &in[1];
    char ba[96], bb[96];
    mge_tdesc_str(a, ba, sizeof ba);
    mge_tdesc_str(b, bb, sizeof bb);
    if (n->op == MGE_OP_CROSS_ENTROPY || n->op == MGE_OP_CROSS_ENTROPY_GRAD) {
        if (a->ndim < 2 || !mge_dtype_is_float(a->dtype))
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: logits %s: expected a float [N,C] or [N,C,d...]", name, ba);
        if (a->dims[1] < 1)
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: logits %s: expected at least one class", name, ba);
        int fits = (b->dtype == MGE_I32 || b->dtype == MGE_I64) && b->ndim == a->ndim - 1 && b->dims[0] == a->dims[0];
        for (int d = 2; fits && d < a->ndim; d++)
            fits = b->dims[d - 1] == a->dims[d];
        if (!fits) {
            mge_tdesc want = *a;
            want.dtype = MGE_I64;
            want.ndim = a->ndim - 1;
            for (int d = 2; d < a->ndim; d++)
                want.dims[d - 1] = a->dims[d];
            char bw[96];
            return mge_error_set(err, MGE_ERR_SHAPE,
                                 "%s: label %s does not fit logits %s: expected %s (or i32) class indices", name, bb,
                                 ba, mge_tdesc_str(&want, bw, sizeof bw));
        }
        double eps = mge_node_float(n, MGE_KEY_label_smoothing, 0);
        if (!(eps >= 0 && eps <= 1))
            return mge_error_set(err, MGE_ERR_INVALID, "%s: label_smoothing=%g: expected a value in [0, 1]", name, eps);
    } else {
        int same = a->dtype == b->dtype && a->ndim == b->ndim;
        for (int i = 0; same && i < a->ndim; i++)
            same = a->dims[i] == b->dims[i];
        if (!same)
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: %s and %s: expected the same dtype and shape", name, ba, bb);
        if (!mge_dtype_is_float(a->dtype))
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: %s: expected a float dtype", name, ba);
    }
    if (grad) {
        *out = *a;
        return MGE_OK;
    }
    out->dtype = MGE_F32;
    out->ndim = 0;
    return MGE_OK;
}

double mge_loss_flops(const mge_node *n, const mge_tdesc *in, const mge_tdesc *out)
{
    if (n->op == MGE_OP_CROSS_ENTROPY_GRAD)
        return 6.0 * mge_tdesc_count(&in[1]);
    if (n->op == MGE_OP_MSE_GRAD)
        return 3.0 * mge_tdesc_count(&in[1]);
    double na = mge_tdesc_count(&in[0]);
    if (n->op == MGE_OP_CROSS_ENTROPY)
        return 5.0 * na + 2.0 * (in[0].ndim >= 2 && in[0].dims[1] > 0 ? na / (double)in[0].dims[1] : 0);
    return 3.0 * na;
}
