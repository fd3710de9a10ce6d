/* op_blocked.c — shape inference and FLOPs of the blocked-layout (NCHWc)
 * ops that mge-opt's layout pass writes (see ops.def): to_nchwc,
 * from_nchwc, conv2d_nchwc and maxpool2d_nchwc (maxpool2d's windows).
 *
 * A blocked tensor is f32 [N, Cb, H, W, c] with c in {8, 16} (the vector
 * widths of AVX2 and AVX-512; any c in [1, 64] is accepted so the ref
 * kernels can be tested on odd sizes). conv2d_nchwc checks the packed
 * weight against x's blocks and the attributes: groups=1 (dense) or
 * groups = out = the real input channels (depthwise, which must fit x's
 * blocks); a dense conv may read another block than it writes (block 1
 * is plain NCHW seen as [N,C,H,W,1]: the 3-channel stem of a network).
 * FLOPs count the real output channels and, for dense convs, the padded
 * input channels (the real count is not stored), plus one per output
 * element each for bias, residual and the activation. */
#include "internal.h"

#include <string.h>

#define BLOCK_MAX 64

static mge_status shape_err(const mge_node *n, const char *what, const mge_tdesc *t, const char *expect,
                            mge_error *err)
{
    char b[96];
    return mge_error_set(err, MGE_ERR_SHAPE, "%s: %s is %s: expected %s", mge_op_info(n->op)->name, what,
                         mge_tdesc_str(t, b, sizeof b), expect);
}

static int same_shape(const mge_tdesc *a, const mge_tdesc *b)
{
    return a->dtype == b->dtype && a->ndim == b->ndim &&
           memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->ndim) == 0;
}

static mge_status to_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    int64_t c = mge_node_int(n, MGE_KEY_block, 0);
    if (c < 1 || c > BLOCK_MAX)
        return mge_error_set(err, MGE_ERR_INVALID, "to_nchwc: block=%lld: expected 1..%d", (long long)c, BLOCK_MAX);
    if (in[0].dtype != MGE_F32 || in[0].ndim != 4)
        return shape_err(n, "x", &in[0], "f32[N,C,H,W]", err);
    *out = in[0];
    out->ndim = 5;
    out->dims[1] = (in[0].dims[1] + c - 1) / c;
    out->dims[4] = c;
    return MGE_OK;
}

static mge_status from_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    int64_t ch = mge_node_int(n, MGE_KEY_channels, 0);
    const mge_tdesc *x = &in[0];
    if (x->dtype != MGE_F32 || x->ndim != 5 || x->dims[4] < 1 || x->dims[4] > BLOCK_MAX)
        return shape_err(n, "x", x, "f32[N,Cb,H,W,c]", err);
    if (ch < 1 || (ch + x->dims[4] - 1) / x->dims[4] != x->dims[1])
        return mge_error_set(err, MGE_ERR_INVALID, "from_nchwc: channels=%lld does not fit %lld blocks of %lld",
                             (long long)ch, (long long)x->dims[1], (long long)x->dims[4]);
    *out = *x;
    out->ndim = 4;
    out->dims[1] = ch;
    out->dims[4] = 0;
    return MGE_OK;
}

static mge_status conv_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    int bias, res;
    mge_status st = mge_fused_check_io(n, "conv2d_nchwc", &bias, &res, err);
    if (st)
        return st;
    const mge_tdesc *x = &in[0], *w = &in[1];
    int64_t G = mge_node_int(n, MGE_KEY_groups, 1);
    if (x->dtype != MGE_F32 || x->ndim != 5 || x->dims[4] < 1 || x->dims[4] > BLOCK_MAX)
        return shape_err(n, "x", x, "f32[N,Cb,H,W,c]", err);
    /* dense convs may change the block: ci in, co out (from the weight) */
    int64_t ci = x->dims[4], Cb = x->dims[1];
    int64_t c = G == 1 && w->ndim == 6 && w->dims[5] >= 1 && w->dims[5] <= BLOCK_MAX ? w->dims[5] : ci;
    int64_t O = mge_node_int(n, MGE_KEY_out, 0);
    int64_t k[2], s[2], p[2], d[2];
    if (!mge_window_geom(n, 0, k, s, p, d))
        return mge_error_set(err, MGE_ERR_INVALID, "conv2d_nchwc: invalid kernel, stride, pad or dilation");
    if (O < 1)
        return mge_error_set(err, MGE_ERR_INVALID, "conv2d_nchwc: out=%lld", (long long)O);
    int64_t Ob = (O + c - 1) / c;
    char e[128];
    if (G == 1) {
        int64_t wd[6] = {Ob, Cb, k[0], k[1], ci, c};
        mge_tdesc t = {MGE_F32, 6, {0}, 0, {0}};
        memcpy(t.dims, wd, sizeof wd);
        if (!same_shape(w, &t)) {
            snprintf(e, sizeof e, "f32[%lld,%lld,%lld,%lld,%lld,%lld]", (long long)Ob, (long long)Cb, (long long)k[0],
                     (long long)k[1], (long long)ci, (long long)c);
            return shape_err(n, "weight", w, e, err);
        }
    } else {
        if (G != O || Ob != Cb)
            return mge_error_set(err, MGE_ERR_INVALID,
                                 "conv2d_nchwc: groups=%lld: expected 1 or depthwise (groups = out = channels, "
                                 "%lld blocks of %lld)",
                                 (long long)G, (long long)Cb, (long long)c);
        mge_tdesc t = {MGE_F32, 4, {Ob, k[0], k[1], c}, 0, {0}};
        if (!same_shape(w, &t)) {
            snprintf(e, sizeof e, "f32[%lld,%lld,%lld,%lld]", (long long)Ob, (long long)k[0], (long long)k[1],
                     (long long)c);
            return shape_err(n, "weight", w, e, err);
        }
    }
    if (bias) {
        mge_tdesc t = {MGE_F32, 1, {O}, 0, {0}};
        if (!same_shape(&in[2], &t)) {
            snprintf(e, sizeof e, "f32[%lld]", (long long)O);
            return shape_err(n, "bias", &in[2], e, err);
        }
    }
    int64_t OH = mge_conv_out_dim(x->dims[2], k[0], s[0], p[0], d[0], 0);
    int64_t OW = mge_conv_out_dim(x->dims[3], k[1], s[1], p[1], d[1], 0);
    if (OH <= 0 || OW <= 0)
        return shape_err(n, "x", x, "a spatial size the kernel fits in", err);
    *out = *x;
    out->dims[1] = Ob;
    out->dims[2] = OH;
    out->dims[3] = OW;
    out->dims[4] = c;
    return res ? mge_fused_check_residual("conv2d_nchwc", &in[2 + bias], out, err) : MGE_OK;
}

static mge_status pool_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    const mge_tdesc *x = &in[0];
    if (x->dtype != MGE_F32 || x->ndim != 5 || x->dims[4] < 1 || x->dims[4] > BLOCK_MAX)
        return shape_err(n, "x", x, "f32[N,Cb,H,W,c]", err);
    int64_t k[2], s[2], p[2], d[2];
    if (!mge_window_geom(n, 1, k, s, p, d))   /* stride defaults to the kernel */
        return mge_error_set(err, MGE_ERR_INVALID, "maxpool2d_nchwc: invalid kernel, stride, pad or dilation");
    int ceil_mode = (int)mge_node_int(n, MGE_KEY_ceil_mode, 0);
    int64_t OH = mge_conv_out_dim(x->dims[2], k[0], s[0], p[0], d[0], ceil_mode);
    int64_t OW = mge_conv_out_dim(x->dims[3], k[1], s[1], p[1], d[1], ceil_mode);
    if (OH <= 0 || OW <= 0)
        return shape_err(n, "x", x, "a spatial size the window fits in", err);
    *out = *x;
    out->dims[2] = OH;
    out->dims[3] = OW;
    return MGE_OK;
}

mge_status mge_blocked_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    switch (n->op) {
    case MGE_OP_MAXPOOL2D_NCHWC: return pool_infer(n, in, out, err);
    case MGE_OP_TO_NCHWC: return to_infer(n, in, out, err);
    case MGE_OP_FROM_NCHWC: return from_infer(n, in, out, err);
    case MGE_OP_CONV2D_NCHWC: return conv_infer(n, in, out, err);
    }
    return mge_error_set(err, MGE_ERR_INVALID, "blocked: unknown op %d", n->op);
}

double mge_blocked_flops(const mge_node *n, const mge_tdesc *in, const mge_tdesc *out)
{
    if (n->op == MGE_OP_MAXPOOL2D_NCHWC) /* one comparison per window position */
        return mge_tdesc_count(&out[0]) * (double)mge_node_ints(n, MGE_KEY_kernel, 0, 1) *
               (double)mge_node_ints(n, MGE_KEY_kernel, 1, 1);
    if (n->op != MGE_OP_CONV2D_NCHWC || out[0].ndim != 5 || in[1].ndim < 4)
        return 0; /* the reorders move memory only */
    int64_t O = mge_node_int(n, MGE_KEY_out, 0), G = mge_node_int(n, MGE_KEY_groups, 1);
    double outs = (double)out[0].dims[0] * (double)O * (double)out[0].dims[2] * (double)out[0].dims[3];
    double taps = (double)mge_node_ints(n, MGE_KEY_kernel, 0, 1) * (double)mge_node_ints(n, MGE_KEY_kernel, 1, 1);
    double cin = G == 1 ? (double)in[0].dims[1] * (double)in[0].dims[4] : 1.0;
    int bias = (int)mge_node_int(n, MGE_KEY_bias, 1), res = (int)mge_node_int(n, MGE_KEY_residual, 0);
    const mge_attr *act = mge_node_attr(n, MGE_KEY_act);
    return 2.0 * outs * cin * taps + outs * (bias + res + (act && act->n == 1 && act->i[0] != -1));
}
