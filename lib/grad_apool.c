/* grad_apool.c — gradient rules of adaptive pooling:
 * dx = adaptive_<avg|max>pool<1|2>d_grad(dy, x) with the forward's output_size. */
#include "internal.h"

#include <stdio.h>

mge_status mge_apool_grad(mge_graph *g, int node, const int *dy, const char *want, int *dx, mge_error *err)
{
    const mge_node *n = &g->nodes[node];
    int gop;
    switch (n->op) {
    case MGE_OP_ADAPTIVE_AVGPOOL2D: gop = MGE_OP_ADAPTIVE_AVGPOOL2D_GRAD; break;
    case MGE_OP_ADAPTIVE_MAXPOOL2D: gop = MGE_OP_ADAPTIVE_MAXPOOL2D_GRAD; break;
    case MGE_OP_ADAPTIVE_AVGPOOL1D: gop = MGE_OP_ADAPTIVE_AVGPOOL1D_GRAD; break;
    case MGE_OP_ADAPTIVE_MAXPOOL1D: gop = MGE_OP_ADAPTIVE_MAXPOOL1D_GRAD; break;
    default: return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: no gradient rule", mge_op_info(n->op)->name);
    }
    if (dy[0] < 0 || !want[0])
        return MGE_OK;
    char base[256];
    snprintf(base, sizeof base, "%s", n->name);
    mge_attr at[4];
    if (n->nattr > 4)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: too many attributes", base);
    int nat = mge_grad_attrs(n, gop, at);
    int in[2] = {dy[0], n->in[0]};
    if ((dx[0] = mge_grad_emit(g, base, gop, 2, in, nat, at, 1, NULL, err)) < 0)
        return err ? err->code : MGE_ERR_INVALID;
    return MGE_OK;
}
