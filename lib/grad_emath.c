/* grad_emath.c — gradient rules of the emath family.
 *
 * det, lrn and dft emit their own gradient op, det_grad(dy, x),
 * lrn_grad(dy, x) and dft_grad(dy, x), with the forward's attributes
 * (kernels/ref/ref_emath.c computes them). The bitwise ops, shifts and
 * eye_like give integers or constants: they have no rule (ops.def gives
 * them no DIFF) and, asked for one, fail naming the op. */
#include "internal.h"

#include <stdio.h>

mge_status mge_emath_grad(mge_graph *g, int node, const int *dy, const char *want, int *dx, mge_error *err)
{
    const mge_node *n = &g->nodes[node];
    int gop = n->op == MGE_OP_DET ? MGE_OP_DET_GRAD
              : n->op == MGE_OP_LRN ? MGE_OP_LRN_GRAD
              : n->op == MGE_OP_DFT ? MGE_OP_DFT_GRAD
                                    : -1;
    char base[256];
    snprintf(base, sizeof base, "%s", n->name);
    if (gop < 0)
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: no gradient rule for %s", base, mge_op_info(n->op)->name);
    if (dy[0] < 0 || !want[0])
        return MGE_OK;
    mge_attr at[8];
    if (n->nattr > 8)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: too many attributes", base);
    int nat = mge_grad_attrs(n, gop, at);
    int in[2] = {dy[0], n->in[0]};
    if ((dx[0] = mge_grad_emit(g, base, gop, 2, in, nat, at, 1, NULL, err)) < 0)
        return err ? err->code : MGE_ERR_INVALID;
    return MGE_OK;
}
