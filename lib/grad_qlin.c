/* grad_qlin.c — the ONNX linear quantization ops (lib/op_qlin.c) have no
 * gradient: their outputs are integers, or floats of integer inputs. */
#include "internal.h"

mge_status mge_qlin_grad(mge_graph *g, int node, const int *dy, const char *want, int *dx, mge_error *err)
{
    (void)dy; (void)want; (void)dx;
    const mge_node *n = &g->nodes[node];
    return mge_error_set(err, MGE_ERR_UNSUPPORTED,
                         "%s (%s): integer quantization ops have no gradient (mge imports them for inference)",
                         n->name, mge_op_info(n->op)->name);
}
