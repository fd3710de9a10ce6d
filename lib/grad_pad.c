/* grad_pad.c — pad's gradient rule: pad_grad(dy, x) with the forward
 * attributes (the constant gets none); the gradient op has none. */
#include "internal.h"

#include <stdio.h>

mge_status mge_pad_grad(mge_graph *g, int node, const int *dy, const char *want, int *dx, mge_error *err)
{
    const mge_node *n = &g->nodes[node];
    char base[200];
    snprintf(base, sizeof base, "%s", n->name);
    if (n->op != MGE_OP_PAD)
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: %s has no gradient rule", base, mge_op_info(n->op)->name);
    if (dy[0] < 0 || !want[0])
        return MGE_OK;
    int in[2] = {dy[0], n->in[0]};
    mge_attr ga[16];
    int ng = mge_grad_attrs(n, MGE_OP_PAD_GRAD, ga);
    dx[0] = mge_grad_emit(g, base, MGE_OP_PAD_GRAD, 2, in, ng, ga, 1, NULL, err);
    return dx[0] < 0 ? (err && err->code ? err->code : MGE_ERR_INVALID) : MGE_OK;
}
