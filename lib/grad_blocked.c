/* grad_blocked.c — the blocked-layout ops have no gradient: mge-opt's
 * layout pass writes them into inference models only, and a model to
 * train keeps the plain NCHW ops. */
#include "internal.h"

mge_status mge_blocked_grad(mge_graph *g, int node, const int *dy, const char *want, int *dx, mge_error *err)
{
    (void)dy; (void)want; (void)dx;
    const mge_node *n = &g->nodes[node];
    return mge_error_set(err, MGE_ERR_UNSUPPORTED,
                         "%s (%s): blocked-layout ops have no gradient: train the unoptimized model and run mge-opt "
                         "on the result",
                         n->name, mge_op_info(n->op)->name);
}
