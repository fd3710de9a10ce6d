/* grad_resize.c — resize's gradient rule: resize_grad(dy, x[, s]) with
 * the forward attributes and size input; the gradient ops have none. */
#include "internal.h"

#include <stdio.h>

mge_status mge_resize_grad(mge_graph *g, int node, const int *dy, const char *want, int *dx, mge_error *err)
{
    const mge_node *n = &g->nodes[node];
    char base[200];
    snprintf(base, sizeof base, "%s", n->name);
    if (n->op != MGE_OP_RESIZE)
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: %s has no gradient rule", base, mge_op_info(n->op)->name);
    if (dy[0] < 0 || !want[0])
        return MGE_OK; /* the size input is integer: no gradient */
    int in[3] = {dy[0], n->in[0], n->nin > 1 ? n->in[1] : -1};
    mge_attr ga[16];
    int ng = mge_grad_attrs(n, MGE_OP_RESIZE_GRAD, ga);
    dx[0] = mge_grad_emit(g, base, MGE_OP_RESIZE_GRAD, n->nin > 1 ? 3 : 2, in, ng, ga, 1, NULL, err);
    return dx[0] < 0 ? (err && err->code ? err->code : MGE_ERR_INVALID) : MGE_OK;
}
