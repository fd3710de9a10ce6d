/* grad_index.c — gradient rules of the indexing family.
 *
 * gather, index_select: gather_grad(dy, idx, x) adds dy's slices into zeros
 *   of x's shape where the forward op read (repeated indices sum), the
 *   embedding lookup's gradient.
 * gather_elements: gather_elements_grad(dy, idx, x), likewise per element.
 * Indices are integers and get no gradient. scatter and scatter_nd are for
 * inference and one_hot's values input has no rule: they fail naming the
 * op; the gradient ops themselves have none either. */
#include "internal.h"

#include <stdio.h>

mge_status mge_index_grad(mge_graph *g, int node, const int *dy, const char *want, int *dx, mge_error *err)
{
    /* copies first: emitting may move g->nodes */
    const mge_node *n = &g->nodes[node];
    char base[200];
    snprintf(base, sizeof base, "%s", n->name);
    int op = n->op, in[3] = {n->in[0], n->nin > 1 ? n->in[1] : -1, n->nin > 2 ? n->in[2] : -1};
    mge_attr ax = {.key = MGE_KEY_axis, .n = 1, .i = {mge_node_int(n, MGE_KEY_axis, 0)}};
    if (dy[0] < 0)
        return MGE_OK;
    switch (op) {
    case MGE_OP_GATHER:
    case MGE_OP_INDEX_SELECT:
    case MGE_OP_GATHER_ELEMENTS: {
        if (!want[0])
            return MGE_OK;
        int a[3] = {dy[0], in[1], in[0]};
        int gop = op == MGE_OP_GATHER_ELEMENTS ? MGE_OP_GATHER_ELEMENTS_GRAD : MGE_OP_GATHER_GRAD;
        dx[0] = mge_grad_emit(g, base, gop, 3, a, 1, &ax, 1, NULL, err);
        return dx[0] < 0 ? (err && err->code ? err->code : MGE_ERR_INVALID) : MGE_OK;
    }
    case MGE_OP_ONE_HOT: {
        int wanted = 0;
        for (int k = 0; k < g->nodes[node].nin; k++)
            wanted |= want[k];
        if (!wanted)
            return MGE_OK; /* integer indices and depth need none */
        break;
    }
    }
    return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: %s has no gradient rule%s", base, mge_op_info(op)->name,
                         op == MGE_OP_SCATTER || op == MGE_OP_SCATTER_ND ? " (inference only)" : "");
}
