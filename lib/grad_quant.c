/* grad_quant.c — the int8 ops have no gradient: mge-quant writes them into
 * inference models; a model to train keeps its f32 layers. */
#include "internal.h"

mge_status mge_quant_grad(mge_graph *g, int node, const int *dy, const char *want, int *dx, mge_error *err)
{
    (void)dy; (void)want; (void)dx;
    const mge_node *n = &g->nodes[node];
    return mge_error_set(err, MGE_ERR_UNSUPPORTED,
                         "%s (%s): quantized ops have no gradient: train the f32 model and run mge-quant on the "
                         "result",
                         n->name, mge_op_info(n->op)->name);
}
