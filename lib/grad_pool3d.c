/* grad_pool3d.c — gradient rules of maxpool3d and avgpool3d: dx =
 * <pool>3d_grad(dy, x) with the forward's attributes (the max routes dy to
 * the first maximal element of each window; the indices output has none).
 * max_unpool has no rule (inference only). */
#include "internal.h"

#include <stdio.h>

mge_status mge_pool3d_grad(mge_graph *g, int node, const int *dy, const char *want, int *dx, mge_error *err)
{
    const mge_node *n = &g->nodes[node];
    int gop;
    switch (n->op) {
    case MGE_OP_MAXPOOL3D: gop = MGE_OP_MAXPOOL3D_GRAD; break;
    case MGE_OP_AVGPOOL3D: gop = MGE_OP_AVGPOOL3D_GRAD; break;
    default:
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s has no gradient rule%s", mge_op_info(n->op)->name,
                             n->op == MGE_OP_MAX_UNPOOL ? " (inference only)" : "");
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
