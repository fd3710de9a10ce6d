/* grad_comm.c — gradient rules of the distributed ops. sync_batchnorm:
 * sync_batchnorm_grad(dy, x, weight), like batchnorm's rule. allreduce and
 * allreduce_wait have none: the trainer inserts them after the backward
 * pass, on gradients. */
#include "internal.h"

#include <stdio.h>

mge_status mge_comm_grad(mge_graph *g, int node, const int *dy, const char *want, int *dx, mge_error *err)
{
    const mge_node *n = &g->nodes[node];
    if (n->op != MGE_OP_SYNC_BATCHNORM)
        return mge_error_set(err, MGE_ERR_UNSUPPORTED,
                             "%s: no gradient for %s (it sums gradients after the backward pass)", n->name,
                             mge_op_info(n->op)->name);
    if (dy[0] < 0 || !(want[0] || want[1] || want[2]))
        return MGE_OK;
    char base[200];
    snprintf(base, sizeof base, "%s", n->name);
    int in[3] = {dy[0], n->in[0], n->in[1]}, outs[3];
    mge_attr ga[16];
    int ng = mge_grad_attrs(n, MGE_OP_SYNC_BATCHNORM_GRAD, ga);
    if (mge_grad_emit(g, base, MGE_OP_SYNC_BATCHNORM_GRAD, 3, in, ng, ga, 3, outs, err) < 0)
        return err && err->code ? err->code : MGE_ERR_INVALID;
    for (int k = 0; k < 3; k++)
        if (want[k])
            dx[k] = outs[k];
    return MGE_OK;
}
