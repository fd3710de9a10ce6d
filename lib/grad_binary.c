/* grad_binary.c — gradient rules of the binary family (stub until written). */
#include "internal.h"

mge_status mge_binary_grad(mge_graph *g, int node, const int *dy, const char *want, int *dx, mge_error *err)
{
    (void)dy; (void)want; (void)dx;
    return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: no gradient rule yet", mge_op_info(g->nodes[node].op)->name);
}
