/* op_sample.c — grid_sample and grid_sample_grad (F.grid_sample): shape
 * inference and FLOPs.
 *
 * grid_sample(x[N,C,H,W], grid[N,OH,OW,2]) -> [N,C,OH,OW]; the 3-D form
 * x[N,C,D,H,W], grid[N,OD,OH,OW,3] -> [N,C,OD,OH,OW] (nearest and
 * bilinear only, as PyTorch). grid_sample_grad(dy, x, grid) -> dx like x,
 * dgrid like grid.
 * FLOPs per output element: nearest 0; bilinear 3 per tap (weight and
 * multiply-add) with 2^k taps; bicubic 16 taps of 2 and 8 weights of 7;
 * the gradient twice that. */
#include "internal.h"

#include <stdio.h>

static mge_status check(const mge_node *n, const char *op, const mge_tdesc *x, const mge_tdesc *grid, mge_error *err)
{
    char b1[96], b2[96];
    if (x->ndim != 4 && x->ndim != 5)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is %s: expected rank 4 [N,C,H,W] or 5 [N,C,D,H,W]", op,
                             mge_tdesc_str(x, b1, sizeof b1));
    if (!mge_dtype_is_float(x->dtype))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is %s: expected a float dtype (f32, f16, bf16)", op,
                             mge_tdesc_str(x, b1, sizeof b1));
    int k = x->ndim - 2, ok = grid->dtype == x->dtype && grid->ndim == x->ndim && grid->dims[0] == x->dims[0] &&
                              grid->dims[x->ndim - 1] == k;
    if (!ok)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: grid is %s for x %s: expected %s[%s,%s%d] (x's dtype, its N, "
                             "the last dim %d)", op, mge_tdesc_str(grid, b1, sizeof b1),
                             mge_tdesc_str(x, b2, sizeof b2), mge_dtype_name(x->dtype), "N",
                             k == 2 ? "OH,OW," : "OD,OH,OW,", k, k);
    int64_t mode = mge_node_int(n, MGE_KEY_mode, MGE_MODE_BILINEAR);
    if (mode != MGE_MODE_NEAREST && mode != MGE_MODE_BILINEAR && mode != MGE_MODE_BICUBIC) {
        const char *w = mge_key_enum_word(MGE_KEY_mode, mode);
        return mge_error_set(err, MGE_ERR_INVALID, "%s: mode=%s: expected nearest, bilinear or bicubic", op,
                             w ? w : "?");
    }
    if (mode == MGE_MODE_BICUBIC && k != 2)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: mode=bicubic needs a 4-D x [N,C,H,W] (x is %s)", op,
                             mge_tdesc_str(x, b1, sizeof b1));
    return MGE_OK;
}

mge_status mge_sample_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    int grad = n->op == MGE_OP_GRID_SAMPLE_GRAD;
    const char *op = grad ? "grid_sample_grad" : "grid_sample";
    const mge_tdesc *x = &in[grad ? 1 : 0], *grid = &in[grad ? 2 : 1];
    mge_status s = check(n, op, x, grid, err);
    if (s)
        return s;
    mge_tdesc y = *x;
    y.known = 0;
    for (int i = 2; i < x->ndim; i++)
        y.dims[i] = grid->dims[i - 1];
    if (!grad) {
        out[0] = y;
        return MGE_OK;
    }
    const mge_tdesc *dy = &in[0];
    int ok = dy->dtype == y.dtype && dy->ndim == y.ndim;
    for (int i = 0; ok && i < y.ndim; i++)
        ok = dy->dims[i] == y.dims[i];
    if (!ok) {
        char b1[96], b2[96];
        return mge_error_set(err, MGE_ERR_SHAPE, "grid_sample_grad: dy is %s: expected %s",
                             mge_tdesc_str(dy, b1, sizeof b1), mge_tdesc_str(&y, b2, sizeof b2));
    }
    out[0] = *x;
    out[0].known = 0;
    out[1] = *grid;
    out[1].known = 0;
    return MGE_OK;
}

double mge_sample_flops(const mge_node *n, const mge_tdesc *in, const mge_tdesc *out)
{
    int grad = n->op == MGE_OP_GRID_SAMPLE_GRAD;
    const mge_tdesc *y = grad ? &in[0] : &out[0];
    int64_t mode = mge_node_int(n, MGE_KEY_mode, MGE_MODE_BILINEAR);
    double per = mode == MGE_MODE_NEAREST ? 0 : mode == MGE_MODE_BICUBIC ? 88 : 3.0 * (1 << (y->ndim - 2));
    return (grad ? 2 : 1) * per * mge_tdesc_count(y);
}
