/* grad_reduce.c — gradient rules of the reduce family.
 *
 * sum, mean: dy broadcast back over the reduced dims (mean divided by the
 *   reduced count, taken from the concrete shapes at run time so a reduced
 *   batch counts correctly): sum_grad/mean_grad(dy, x).
 * max: max_grad(dy, x, y): dy goes to the elements equal to the maximum,
 *   split evenly among ties (PyTorch's rule for a full max reduction and
 *   amax); a NaN maximum gets no gradient.
 * softmax, log_softmax: softmax_grad/log_softmax_grad(dy, y) from the
 *   forward output.
 * min: max_grad(dy, x, y) too (the same rule: dy to the elements equal to
 *   the result).
 * prod: prod_grad(dy, x): dy * prod / x where x has no zero in its group;
 *   at a lone zero the product of the others, elsewhere 0 (PyTorch).
 * argmax, argmin: integer output, no gradient (dx stays -1). */
#include "internal.h"

#include <stdio.h>
#include <string.h>

mge_status mge_reduce_grad(mge_graph *g, int node, const int *dy, const char *want, int *dx, mge_error *err)
{
    const mge_node *n = &g->nodes[node];
    char base[200];
    snprintf(base, sizeof base, "%s", n->name);
    int op = n->op, x = n->in[0], y = n->out[0], gop, nin = 2, in[3] = {dy[0], x, y};
    switch (op) {
    case MGE_OP_ARGMAX:
    case MGE_OP_ARGMIN: return MGE_OK;
    case MGE_OP_PROD: gop = MGE_OP_PROD_GRAD; break;
    case MGE_OP_MIN: gop = MGE_OP_MAX_GRAD, nin = 3; break;
    case MGE_OP_SUM: gop = MGE_OP_SUM_GRAD; break;
    case MGE_OP_MEAN: gop = MGE_OP_MEAN_GRAD; break;
    case MGE_OP_MAX: gop = MGE_OP_MAX_GRAD, nin = 3; break;
    case MGE_OP_SOFTMAX: gop = MGE_OP_SOFTMAX_GRAD, in[1] = y; break;
    case MGE_OP_LOG_SOFTMAX: gop = MGE_OP_LOG_SOFTMAX_GRAD, in[1] = y; break;
    default:
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: %s has no gradient rule", base, mge_op_info(op)->name);
    }
    if (dy[0] < 0 || !want[0])
        return MGE_OK;
    mge_attr ga[16];
    int ng = mge_grad_attrs(n, gop, ga);
    dx[0] = mge_grad_emit(g, base, gop, nin, in, ng, ga, 1, NULL, err);
    if (dx[0] < 0)
        return err && err->code ? err->code : MGE_ERR_INVALID;
    return MGE_OK;
}
