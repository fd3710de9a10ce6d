/* grad_optim.c — gradient rules of the optim family: there are none. The
 * optimizer ops end a training step (they update params in place after the
 * backward pass), so autodiff never walks through them; a loss that depends
 * on one is a malformed training graph and is refused with this message. */
#include "internal.h"

mge_status mge_optim_grad(mge_graph *g, int node, const int *dy, const char *want, int *dx, mge_error *err)
{
    (void)dy; (void)want; (void)dx;
    const mge_node *n = &g->nodes[node];
    return mge_error_set(err, MGE_ERR_UNSUPPORTED,
                         "%s (%s): optimizer ops have no gradient: they update parameters in place at the end of a "
                         "training step, and the loss cannot depend on them",
                         n->name, mge_op_info(n->op)->name);
}
