/* op_optim.c — optimizer ops: shape inference and FLOPs (stub until written). */
#include "internal.h"

mge_status mge_optim_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    (void)in; (void)err;
    (void)n;
    out->dtype = MGE_F32;
    out->ndim = 0;
    return MGE_OK;
}

double mge_optim_flops(const mge_node *n, const mge_tdesc *in, const mge_tdesc *out)
{
    (void)n; (void)out;
    return 4.0 * mge_tdesc_count(&in[0]);
}
