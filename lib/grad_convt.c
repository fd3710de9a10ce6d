/* grad_convt.c — gradient rules of conv_transpose2d, conv1d and conv3d (x, weight[, bias]):
 *   dx      = <op>_grad_input(dy, weight, x)
 *   dweight = <op>_grad_weight(dy, x, weight)
 *   dbias   = sum(dy) over every dim but the channels
 * each with the forward's attributes, and only the ones asked for. */
#include "internal.h"

#include <stdio.h>

mge_status mge_convt_grad(mge_graph *g, int node, const int *dy, const char *want, int *dx, mge_error *err)
{
    const mge_node *n = &g->nodes[node];
    int gi, gw;
    if (n->op == MGE_OP_CONV_TRANSPOSE2D)
        gi = MGE_OP_CONV_TRANSPOSE2D_GRAD_INPUT, gw = MGE_OP_CONV_TRANSPOSE2D_GRAD_WEIGHT;
    else if (n->op == MGE_OP_CONV1D)
        gi = MGE_OP_CONV1D_GRAD_INPUT, gw = MGE_OP_CONV1D_GRAD_WEIGHT;
    else if (n->op == MGE_OP_CONV3D)
        gi = MGE_OP_CONV3D_GRAD_INPUT, gw = MGE_OP_CONV3D_GRAD_WEIGHT;
    else
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: no gradient rule", mge_op_info(n->op)->name);
    if (dy[0] < 0)
        return MGE_OK;
    /* copies: emitting nodes may move g->nodes */
    char base[256];
    snprintf(base, sizeof base, "%s", n->name);
    int nin = n->nin, x = n->in[0], w = n->in[1], nsp = n->op == MGE_OP_CONV1D ? 1 : n->op == MGE_OP_CONV3D ? 3 : 2;
    mge_attr at[MGE_MAX_DIMS + 8];
    if (n->nattr > (int)(sizeof at / sizeof at[0]))
        return mge_error_set(err, MGE_ERR_INVALID, "%s: too many attributes", base);
    int nat = mge_grad_attrs(n, gi, at);
    if (want[0]) {
        int in[3] = {dy[0], w, x};
        if ((dx[0] = mge_grad_emit(g, base, gi, 3, in, nat, at, 1, NULL, err)) < 0)
            return err ? err->code : MGE_ERR_INVALID;
    }
    if (want[1]) {
        int in[3] = {dy[0], x, w};
        if ((dx[1] = mge_grad_emit(g, base, gw, 3, in, nat, at, 1, NULL, err)) < 0)
            return err ? err->code : MGE_ERR_INVALID;
    }
    if (nin > 2 && want[2]) {
        mge_attr ax = {.key = MGE_KEY_axis, .n = 1 + nsp, .i = {0, 2, 3, 4}};
        if ((dx[2] = mge_grad_emit(g, base, MGE_OP_SUM, 1, &dy[0], 1, &ax, 1, NULL, err)) < 0)
            return err ? err->code : MGE_ERR_INVALID;
    }
    return MGE_OK;
}
