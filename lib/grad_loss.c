/* grad_loss.c — gradient rules of the losses.
 *   cross_entropy(logits, label): cross_entropy_grad(dy, logits, label)
 *     = (softmax(logits) - (1 - eps) onehot(label) - eps / C) / count * dy
 *     for the logits (zero where the label is ignore_index; the forward's
 *     attributes passed on); no gradient into the integer labels.
 *   mse(a, b): mse_grad(dy, a, b) = 2 (a - b) / numel * dy for a, and
 *     mse_grad(dy, b, a) for b (the same formula with the roles swapped). */
#include "internal.h"

mge_status mge_loss_grad(mge_graph *g, int node, const int *dy, const char *want, int *dx, mge_error *err)
{
    const mge_node *n = &g->nodes[node];
    int op = n->op, a = n->in[0], b = n->in[1], d = dy[0];
    char base[256];
    snprintf(base, sizeof base, "%s", n->name);
    if (d < 0)
        return MGE_OK;
    if (op == MGE_OP_CROSS_ENTROPY) {
        if (!want[0])
            return MGE_OK;
        int in[3] = {d, a, b};
        mge_attr at[4];
        int nat = mge_grad_attrs(n, MGE_OP_CROSS_ENTROPY_GRAD, at);   /* ignore_index, label_smoothing */
        int r = mge_grad_emit(g, base, MGE_OP_CROSS_ENTROPY_GRAD, 3, in, nat, at, 1, NULL, err);
        if (r < 0)
            return err ? err->code : MGE_ERR_INVALID;
        dx[0] = r;
        return MGE_OK;
    }
    if (op == MGE_OP_MSE) {
        for (int k = 0; k < 2; k++) {
            if (!want[k])
                continue;
            int in[3] = {d, k ? b : a, k ? a : b};
            int r = mge_grad_emit(g, base, MGE_OP_MSE_GRAD, 3, in, 0, NULL, 1, NULL, err);
            if (r < 0)
                return err ? err->code : MGE_ERR_INVALID;
            dx[k] = r;
        }
        return MGE_OK;
    }
    return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: no gradient rule for %s", base, mge_op_info(op)->name);
}
