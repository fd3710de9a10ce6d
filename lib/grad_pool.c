/* grad_pool.c — gradient rules of the pools: dx = <pool>_grad(dy, x) with
 * the forward's attributes (maxpool routes dy to the first maximal element
 * of each window, as PyTorch; the average pools spread it over the window
 * with the forward's divisor). */
#include "internal.h"

#include <stdio.h>

mge_status mge_pool_grad(mge_graph *g, int node, const int *dy, const char *want, int *dx, mge_error *err)
{
    const mge_node *n = &g->nodes[node];
    int gop;
    switch (n->op) {
    case MGE_OP_MAXPOOL2D: gop = MGE_OP_MAXPOOL2D_GRAD; break;
    case MGE_OP_AVGPOOL2D: gop = MGE_OP_AVGPOOL2D_GRAD; break;
    case MGE_OP_GLOBAL_AVGPOOL: gop = MGE_OP_GLOBAL_AVGPOOL_GRAD; break;
    default: return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: no gradient rule", mge_op_info(n->op)->name);
    }
    if (dy[0] < 0 || !want[0])
        return MGE_OK;
    char base[256];
    snprintf(base, sizeof base, "%s", n->name);
    mge_attr at[16];
    if (n->nattr > 16)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: too many attributes", base);
    int nat = mge_grad_attrs(n, gop, at);
    int in[2] = {dy[0], n->in[0]};
    if ((dx[0] = mge_grad_emit(g, base, gop, 2, in, nat, at, 1, NULL, err)) < 0)
        return err ? err->code : MGE_ERR_INVALID;
    return MGE_OK;
}
