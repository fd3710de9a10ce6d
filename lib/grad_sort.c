/* grad_sort.c — gradient rules of the sort family.
 *
 * topk, sort: gather_elements_grad(dy, indices, x; axis): dy's values go
 *   back to the positions they were taken from, zeros elsewhere (PyTorch's
 *   rule; the indices output is integer and gets none).
 * cumsum: the reverse scan of dy, cumsum(dy; axis, exclusive, reverse
 *   flipped): dx[j] is the sum of dy[i] over the outputs i that added x[j].
 * argsort: integer output, no gradient. */
#include "internal.h"

#include <stdio.h>

mge_status mge_sort_grad(mge_graph *g, int node, const int *dy, const char *want, int *dx, mge_error *err)
{
    /* copies first: emitting may move g->nodes */
    const mge_node *n = &g->nodes[node];
    char base[200];
    snprintf(base, sizeof base, "%s", n->name);
    int op = n->op, x = n->in[0], idx = n->nout > 1 ? n->out[1] : -1;
    int64_t axis = mge_node_int(n, MGE_KEY_axis, -1);
    int excl = (int)mge_node_int(n, MGE_KEY_exclusive, 0), rev = (int)mge_node_int(n, MGE_KEY_reverse, 0);
    if (op == MGE_OP_ARGSORT || dy[0] < 0 || !want[0])
        return MGE_OK;
    mge_attr at[3] = {{.key = MGE_KEY_axis, .n = 1, .i = {axis}}};
    switch (op) {
    case MGE_OP_TOPK:
    case MGE_OP_SORT: {
        int in[3] = {dy[0], idx, x};
        dx[0] = mge_grad_emit(g, base, MGE_OP_GATHER_ELEMENTS_GRAD, 3, in, 1, at, 1, NULL, err);
        break;
    }
    case MGE_OP_CUMSUM:
        at[1] = (mge_attr){.key = MGE_KEY_exclusive, .n = 1, .i = {excl}};
        at[2] = (mge_attr){.key = MGE_KEY_reverse, .n = 1, .i = {!rev}};
        dx[0] = mge_grad_emit(g, base, MGE_OP_CUMSUM, 1, dy, 3, at, 1, NULL, err);
        break;
    default:
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: %s has no gradient rule", base, mge_op_info(op)->name);
    }
    return dx[0] < 0 ? (err && err->code ? err->code : MGE_ERR_INVALID) : MGE_OK;
}
