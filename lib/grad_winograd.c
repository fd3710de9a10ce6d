/* grad_winograd.c — conv2d_winograd and winograd_weight have no gradient:
 * mge-opt writes them into inference models only (the pass skips graphs
 * with a loss), and a model to train keeps the plain conv2d. */
#include "internal.h"

mge_status mge_winograd_grad(mge_graph *g, int node, const int *dy, const char *want, int *dx, mge_error *err)
{
    (void)dy; (void)want; (void)dx;
    const mge_node *n = &g->nodes[node];
    return mge_error_set(err, MGE_ERR_UNSUPPORTED,
                         "%s (%s): winograd ops have no gradient: train the unoptimized model and run mge-opt on "
                         "the result",
                         n->name, mge_op_info(n->op)->name);
}
