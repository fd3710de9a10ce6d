/* ref_resize.c — reference kernels of resize and resize_grad (float
 * dtypes; indices and weights in float as PyTorch computes them,
 * kshared.h, the sums in double). */
#include "ref.h"

#include <stdlib.h>

static mge_status check(const mge_kctx *ctx, const mge_node *n, const mge_tensor *x, const mge_tensor *y,
                        const char *xn, const char *yn, mge_error *err)
{
    mge_status st;
    if (x->ndim != 4 || y->ndim != 4 || !mge_dtype_is_float(x->dtype))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: expected float tensors of rank 4", ref_opname(ctx, n));
    int64_t d[4] = {x->dims[0], x->dims[1], y->dims[2], y->dims[3]};
    if ((st = ref_check(ctx, n, xn, x, x->dtype, 4, x->dims, err)) ||
        (st = ref_check(ctx, n, yn, y, x->dtype, 4, d, err)))
        return st;
    return MGE_OK;
}

/* Visits the source taps of output pixel (oh, ow): nearest one with weight
 * 1, bilinear four, bicubic sixteen. */
typedef struct tap {
    int64_t at[16];
    double w[16];
    int n;
} tap;

static void taps(const mge_node *n, int64_t H, int64_t W, int64_t OH, int64_t OW, int64_t oh, int64_t ow, tap *t)
{
    int align = (int)mge_node_int(n, MGE_KEY_align_corners, 0);
    float sh = mge_resize_step(H, OH, align, mge_resize_factor(n, 0));
    float sw = mge_resize_step(W, OW, align, mge_resize_factor(n, 1));
    if (mge_node_int(n, MGE_KEY_mode, 0) == MGE_MODE_NEAREST) {
        t->n = 1;
        t->at[0] = mge_resize_nearest(oh, H, OH, sh) * W + mge_resize_nearest(ow, W, OW, sw);
        t->w[0] = 1;
        return;
    }
    if (mge_node_int(n, MGE_KEY_mode, 0) == MGE_MODE_BICUBIC) {
        double a = mge_node_float(n, MGE_KEY_cubic_a, -0.75), wh[4], ww[4];
        int ex = (int)mge_node_int(n, MGE_KEY_exclude_outside, 0);
        int64_t ih[4], iw[4];
        mge_resize_cubic(oh, H, align, sh, a, ex, ih, wh);
        mge_resize_cubic(ow, W, align, sw, a, ex, iw, ww);
        t->n = 16;
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++)
                t->at[i * 4 + j] = ih[i] * W + iw[j], t->w[i * 4 + j] = wh[i] * ww[j];
        return;
    }
    int64_t h0, h1, w0, w1;
    float lh, lw;
    mge_resize_linear(oh, H, align, sh, &h0, &h1, &lh);
    mge_resize_linear(ow, W, align, sw, &w0, &w1, &lw);
    float ah = 1.0f - lh, aw = 1.0f - lw;
    t->n = 4;
    t->at[0] = h0 * W + w0, t->w[0] = (double)(ah * aw);
    t->at[1] = h0 * W + w1, t->w[1] = (double)(ah * lw);
    t->at[2] = h1 * W + w0, t->w[2] = (double)(lh * aw);
    t->at[3] = h1 * W + w1, t->w[3] = (double)(lh * lw);
}

static mge_status resize_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                               mge_error *err)
{
    const mge_tensor *x = in[0];
    mge_tensor *y = out[0];
    mge_status st = check(ctx, n, x, y, "x", "output", err);
    if (st)
        return st;
    mge_dtype dt = x->dtype;
    int64_t P = x->dims[0] * x->dims[1], H = x->dims[2], W = x->dims[3], OH = y->dims[2], OW = y->dims[3];
    if (H < 1 || W < 1)
        return P * OH * OW != 0 ? mge_error_set(err, MGE_ERR_SHAPE, "%s: empty input plane", ref_opname(ctx, n)) : MGE_OK;
    for (int64_t oh = 0; oh < OH; oh++)
        for (int64_t ow = 0; ow < OW; ow++) {
            tap t;
            taps(n, H, W, OH, OW, oh, ow, &t);
            for (int64_t p = 0; p < P; p++) {
                double v = 0;
                for (int k = 0; k < t.n; k++)
                    v += t.w[k] * ref_ld(dt, x->data, p * H * W + t.at[k]);
                ref_st(dt, y->data, (p * OH + oh) * OW + ow, v);
            }
        }
    return MGE_OK;
}

/* resize_grad(dy, x): dx[source taps] += weight * dy. */
static mge_status resize_grad_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                    mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *dy = in[0], *x = in[1];
    mge_tensor *dx = out[0];
    mge_status st = check(ctx, n, x, dy, "x", "dy", err);
    if (st || (st = ref_check(ctx, n, "dx", dx, x->dtype, 4, x->dims, err)))
        return st;
    mge_dtype dt = x->dtype;
    int64_t P = x->dims[0] * x->dims[1], H = x->dims[2], W = x->dims[3], OH = dy->dims[2], OW = dy->dims[3];
    int64_t nx = P * H * W;
    if (nx == 0)
        return MGE_OK;
    double *acc = calloc((size_t)nx, sizeof *acc);
    if (!acc)
        return mge_error_set(err, MGE_ERR_NOMEM, "%s: out of memory", ref_opname(ctx, n));
    for (int64_t oh = 0; oh < OH; oh++)
        for (int64_t ow = 0; ow < OW; ow++) {
            tap t;
            taps(n, H, W, OH, OW, oh, ow, &t);
            for (int64_t p = 0; p < P; p++) {
                double g = ref_ld(dt, dy->data, (p * OH + oh) * OW + ow);
                for (int k = 0; k < t.n; k++)
                    acc[p * H * W + t.at[k]] += t.w[k] * g;
            }
        }
    for (int64_t i = 0; i < nx; i++)
        ref_st(dt, dx->data, i, acc[i]);
    free(acc);
    return MGE_OK;
}

void mge_ref_register_resize(mge_backend *b)
{
    REF_EACH_FLOAT(dt) {
        b->k[MGE_OP_RESIZE][dt].run = resize_float;
        b->k[MGE_OP_RESIZE_GRAD][dt].run = resize_grad_float;
    }
}
