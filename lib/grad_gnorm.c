/* grad_gnorm.c — gradient rules of group_norm, instance_norm, rms_norm.
 *
 * group_norm(x, weight, bias): group_norm_grad(dy, x, weight) -> dx,
 *   dweight, dbias.
 * instance_norm(x[, weight, bias]): group_norm_grad without num_groups (one
 *   group per channel), with the weight when affine.
 * rms_norm(x, weight): rms_norm_grad(dy, x, weight) -> dx, dweight.
 * Each emits one node with all the gradients; unwanted ones go unused. */
#include "internal.h"

#include <stdio.h>

mge_status mge_gnorm_grad(mge_graph *g, int node, const int *dy, const char *want, int *dx, mge_error *err)
{
    const mge_node *n = &g->nodes[node];
    char base[200];
    snprintf(base, sizeof base, "%s", n->name);
    int op = n->op, nin = n->nin, gop, nout;
    if (op == MGE_OP_GROUP_NORM || op == MGE_OP_INSTANCE_NORM)
        gop = MGE_OP_GROUP_NORM_GRAD, nout = 3;
    else if (op == MGE_OP_RMS_NORM)
        gop = MGE_OP_RMS_NORM_GRAD, nout = 2;
    else
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: %s has no gradient rule", base, mge_op_info(op)->name);
    int any = 0;
    for (int k = 0; k < nin; k++)
        any |= want[k];
    if (dy[0] < 0 || !any)
        return MGE_OK;
    int in[3] = {dy[0], n->in[0], nin > 1 ? n->in[1] : -1}, outs[3];
    mge_attr ga[16];
    int ng = mge_grad_attrs(n, gop, ga);
    if (mge_grad_emit(g, base, gop, nin > 1 ? 3 : 2, in, ng, ga, nout, outs, err) < 0)
        return err && err->code ? err->code : MGE_ERR_INVALID;
    for (int k = 0; k < nin && k < nout; k++)
        if (want[k])
            dx[k] = outs[k];
    return MGE_OK;
}
