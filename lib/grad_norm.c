/* grad_norm.c — gradient rules of the norm family.
 *
 * batchnorm(x, weight, bias, running_mean, running_var[, nbt]): gradients
 *   for x, weight and bias by batchnorm_grad(dy, x, weight) with the
 *   training-mode formula (batch statistics, biased variance), since a
 *   training step runs batchnorm in training mode; the running statistics
 *   are state and get none.
 * layernorm(x, weight, bias): layernorm_grad(dy, x, weight).
 * Both emit one node with the three gradients; unwanted ones go unused. */
#include "internal.h"

#include <stdio.h>

mge_status mge_norm_grad(mge_graph *g, int node, const int *dy, const char *want, int *dx, mge_error *err)
{
    const mge_node *n = &g->nodes[node];
    char base[200];
    snprintf(base, sizeof base, "%s", n->name);
    int op = n->op, gop;
    if (op == MGE_OP_BATCHNORM)
        gop = MGE_OP_BATCHNORM_GRAD;
    else if (op == MGE_OP_LAYERNORM)
        gop = MGE_OP_LAYERNORM_GRAD;
    else
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: %s has no gradient rule", base, mge_op_info(op)->name);
    if (dy[0] < 0 || !(want[0] || want[1] || want[2]))
        return MGE_OK;
    int in[3] = {dy[0], n->in[0], n->in[1]}, outs[3];
    mge_attr ga[16];
    int ng = mge_grad_attrs(n, gop, ga);
    if (mge_grad_emit(g, base, gop, 3, in, ng, ga, 3, outs, err) < 0)
        return err && err->code ? err->code : MGE_ERR_INVALID;
    for (int k = 0; k < 3; k++)
        if (want[k])
            dx[k] = outs[k];
    return MGE_OK;
}
