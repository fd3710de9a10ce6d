/* grad_emath.c — gradient rules of the emath family: none yet. The
 * bitwise ops, shifts and eye_like give integers or constants; det, lrn
 * and dft are inference ops for now (ops.def gives them no DIFF trait),
 * so autodiff reports them by name. */
#include "internal.h"

#include <stdio.h>

mge_status mge_emath_grad(mge_graph *g, int node, const int *dy, const char *want, int *dx, mge_error *err)
{
    (void)want, (void)dx;
    if (dy[0] < 0)
        return MGE_OK;
    return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: no gradient rule for %s", g->nodes[node].name,
                         mge_op_info(g->nodes[node].op)->name);
}
