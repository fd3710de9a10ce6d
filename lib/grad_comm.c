/* grad_comm.c — the distributed ops have no gradient rule: the trainer
 * inserts them after the backward pass, on gradients. */
#include "internal.h"

mge_status mge_comm_grad(mge_graph *g, int node, const int *dy, const char *want, int *dx, mge_error *err)
{
    (void)dy, (void)want, (void)dx;
    return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: no gradient for %s (it sums gradients after the backward pass)",
                         g->nodes[node].name, mge_op_info(g->nodes[node].op)->name);
}
