/* grad_logic.c — gradient rules of the logic family.
 *
 * where(cond, a, b): da = sum_to(where(cond, dy, 0), a) and db =
 *   sum_to(where(cond, 0, dy), b); sum_to only where broadcasting
 *   stretched the operand. cond is bool and gets none.
 * The comparisons and boolean ops give bool, which carries no gradient:
 * autodiff never asks them for one; asked with a gradient, they fail
 * naming the op. */
#include "internal.h"

#include <stdio.h>
#include <string.h>

static int emit_fail(const mge_error *err)
{
    return err && err->code ? err->code : MGE_ERR_INVALID;
}

/* where(cond, dy, 0) (first) or where(cond, 0, dy), summed to like's shape. */
static int masked(mge_graph *g, const char *base, int cond, int dy, int zero, int first, int like, mge_error *err)
{
    int in[3] = {cond, first ? dy : zero, first ? zero : dy};
    int m = mge_grad_emit(g, base, MGE_OP_WHERE, 3, in, 0, NULL, 1, NULL, err);
    if (m < 0)
        return -1;
    const mge_value *vm = &g->values[m], *vl = &g->values[like];
    int same = vm->ndim == vl->ndim;
    for (int d = 0; same && d < vm->ndim; d++)
        same = vm->dims[d] == vl->dims[d];
    if (same)
        return m;
    int s[2] = {m, like};
    return mge_grad_emit(g, base, MGE_OP_SUM_TO, 2, s, 0, NULL, 1, NULL, err);
}

mge_status mge_logic_grad(mge_graph *g, int node, const int *dy, const char *want, int *dx, mge_error *err)
{
    const mge_node *n = &g->nodes[node];
    char base[200];
    snprintf(base, sizeof base, "%s", n->name);
    int op = n->op, in[3] = {n->in[0], n->nin > 1 ? n->in[1] : -1, n->nin > 2 ? n->in[2] : -1};
    if (dy[0] < 0)
        return MGE_OK;
    if (op != MGE_OP_WHERE)
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: %s has no gradient rule (its output is bool)", base,
                             mge_op_info(op)->name);
    if (!want[1] && !want[2])
        return MGE_OK;
    mge_dtype dt = g->values[dy[0]].dtype;
    int zero = mge_grad_const(g, 0.0f, err);
    if (zero >= 0 && dt != MGE_F32) {
        mge_attr a;
        memset(&a, 0, sizeof a);
        a.key = MGE_KEY_dtype, a.n = 1, a.i[0] = dt;
        zero = mge_grad_emit(g, base, MGE_OP_CAST, 1, &zero, 1, &a, 1, NULL, err);
    }
    if (zero < 0)
        return emit_fail(err);
    for (int k = 1; k <= 2; k++)
        if (want[k] && (dx[k] = masked(g, base, in[0], dy[0], zero, k == 1, in[k], err)) < 0)
            return emit_fail(err);
    return MGE_OK;
}
