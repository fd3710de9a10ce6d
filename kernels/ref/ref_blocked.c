/* ref_blocked.c — the blocked-layout (NCHWc) ops as plain loops in double
 * (see ops.def): to_nchwc, from_nchwc, maxpool2d_nchwc and conv2d_nchwc (whose input block
 * may differ from its output block). They define what the cpu kernels
 * must compute; lanes past the real channels are written as zero. */
#include "ref.h"

/* x [N,C,H,W] into y [N,Cb,H,W,c]. */
static mge_status to_nchwc(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                           mge_error *err)
{
    const mge_tensor *x = in[0];
    mge_tensor *y = out[0];
    mge_status st;
    int64_t c = mge_node_int(n, MGE_KEY_block, 0);
    if (x->ndim != 4 || c < 1)
        return mge_error_set(err, MGE_ERR_SHAPE, "to_nchwc: x has rank %d: expected 4", x->ndim);
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3], Cb = (C + c - 1) / c;
    int64_t ey[5] = {N, Cb, H, W, c};
    if ((st = ref_check(ctx, n, "x", x, MGE_F32, 4, x->dims, err)) ||
        (st = ref_check(ctx, n, "output", y, MGE_F32, 5, ey, err)))
        return st;
    const float *xp = x->data;
    float *yp = y->data;
    for (int64_t i = 0; i < N; i++)
        for (int64_t b = 0; b < Cb; b++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t w = 0; w < W; w++)
                    for (int64_t l = 0; l < c; l++) {
                        int64_t ch = b * c + l;
                        yp[(((i * Cb + b) * H + h) * W + w) * c + l] =
                            ch < C ? xp[((i * C + ch) * H + h) * W + w] : 0.0f;
                    }
    return MGE_OK;
}

/* x [N,Cb,H,W,c] into y [N,C,H,W]. */
static mge_status from_nchwc(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                             mge_error *err)
{
    const mge_tensor *x = in[0];
    mge_tensor *y = out[0];
    mge_status st;
    int64_t C = mge_node_int(n, MGE_KEY_channels, 0);
    if (x->ndim != 5 || x->dims[4] < 1 || C < 1 || (C + x->dims[4] - 1) / x->dims[4] != x->dims[1])
        return mge_error_set(err, MGE_ERR_SHAPE, "from_nchwc: x does not hold %lld channels", (long long)C);
    int64_t N = x->dims[0], Cb = x->dims[1], H = x->dims[2], W = x->dims[3], c = x->dims[4];
    int64_t ey[4] = {N, C, H, W};
    if ((st = ref_check(ctx, n, "x", x, MGE_F32, 5, x->dims, err)) ||
        (st = ref_check(ctx, n, "output", y, MGE_F32, 4, ey, err)))
        return st;
    const float *xp = x->data;
    float *yp = y->data;
    for (int64_t i = 0; i < N; i++)
        for (int64_t ch = 0; ch < C; ch++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t w = 0; w < W; w++)
                    yp[((i * C + ch) * H + h) * W + w] = xp[(((i * Cb + ch / c) * H + h) * W + w) * c + ch % c];
    return MGE_OK;
}

/* conv2d_nchwc's inputs checked against its attributes, as the inference
 * (lib/op_blocked.c) checks them but on the tensors themselves: the ref
 * kernel must not read or write out of bounds whatever it is called with.
 * y's shape into yd: [N, Ob, OH, OW, c], c the weight's output block. */
static mge_status nchwc_conv_check(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                   mge_tensor *const *out, int64_t yd[5], mge_error *err)
{
    const char *name = ref_opname(ctx, n);
    int bias = (int)mge_node_int(n, MGE_KEY_bias, 1), res = (int)mge_node_int(n, MGE_KEY_residual, 0);
    if (n->nin != 2 + bias + res)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: bias=%s residual=%s but %d inputs", name,
                             bias ? "true" : "false", res ? "true" : "false", n->nin);
    const mge_attr *at = mge_node_attr(n, MGE_KEY_act);
    if (!at || at->n != 1 || !mge_fused_act_ok(at->i[0]))
        return mge_error_set(err, MGE_ERR_INVALID, "%s: act is not none or an activation", name);
    const mge_tensor *x = in[0], *w = in[1];
    mge_status st;
    if ((st = ref_check_dtype(ctx, n, "x", x, MGE_F32, err)))
        return st;
    if (x->ndim != 5 || x->dims[4] < 1)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x has rank %d: expected 5 [N,Cb,H,W,c]", name, x->ndim);
    int64_t G = mge_node_int(n, MGE_KEY_groups, 1), O = mge_node_int(n, MGE_KEY_out, 0);
    int64_t k[2], s[2], p[2], d[2];
    if (!mge_window_geom(n, 0, k, s, p, d))
        return mge_error_set(err, MGE_ERR_INVALID, "%s: invalid kernel, stride, pad or dilation", name);
    if (O < 1)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: out=%lld", name, (long long)O);
    /* a dense conv may change the block: ci in, c out (from the weight) */
    int64_t ci = x->dims[4], Cb = x->dims[1];
    int64_t c = G == 1 && w->ndim == 6 && w->dims[5] >= 1 ? w->dims[5] : ci, Ob = (O + c - 1) / c;
    if (G == 1) {
        int64_t ew[6] = {Ob, Cb, k[0], k[1], ci, c};
        st = ref_check(ctx, n, "weight", w, MGE_F32, 6, ew, err);
    } else if (G != O || Ob != Cb) {
        return mge_error_set(err, MGE_ERR_INVALID, "%s: groups=%lld: expected 1 or depthwise", name, (long long)G);
    } else {
        int64_t ew[4] = {Ob, k[0], k[1], c};
        st = ref_check(ctx, n, "weight", w, MGE_F32, 4, ew, err);
    }
    int64_t eb[1] = {O};
    if (st || (bias && (st = ref_check(ctx, n, "bias", in[2], MGE_F32, 1, eb, err))))
        return st;
    int64_t OH = mge_conv_out_dim(x->dims[2], k[0], s[0], p[0], d[0], 0);
    int64_t OW = mge_conv_out_dim(x->dims[3], k[1], s[1], p[1], d[1], 0);
    if (OH <= 0 || OW <= 0)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is too small for the kernel", name);
    int64_t e[5] = {x->dims[0], Ob, OH, OW, c};
    memcpy(yd, e, sizeof e);
    if ((st = ref_check_data(ctx, n, "x", x, err)) ||
        (res && (st = ref_check(ctx, n, "residual", in[2 + bias], MGE_F32, 5, yd, err))))
        return st;
    return ref_check(ctx, n, "output", out[0], MGE_F32, 5, yd, err);
}

static mge_status conv2d_nchwc(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                               mge_tensor *const *out, mge_error *err)
{
    int64_t yd[5];
    mge_status st = nchwc_conv_check(ctx, n, in, out, yd, err);
    if (st)
        return st;
    int bias = (int)mge_node_int(n, MGE_KEY_bias, 1), res = (int)mge_node_int(n, MGE_KEY_residual, 0);
    const mge_tensor *x = in[0], *w = in[1], *b = bias ? in[2] : NULL, *r = res ? in[2 + bias] : NULL;
    mge_tensor *y = out[0];
    int64_t N = x->dims[0], Cb = x->dims[1], H = x->dims[2], W = x->dims[3], ci = x->dims[4];
    int64_t Ob = yd[1], OH = yd[2], OW = yd[3], c = yd[4];
    int64_t O = mge_node_int(n, MGE_KEY_out, 0), G = mge_node_int(n, MGE_KEY_groups, 1);
    int64_t KH = mge_node_ints(n, MGE_KEY_kernel, 0, 1), KW = mge_node_ints(n, MGE_KEY_kernel, 1, 1);
    int64_t sh = mge_node_ints(n, MGE_KEY_stride, 0, 1), sw = mge_node_ints(n, MGE_KEY_stride, 1, 1);
    int64_t ph = mge_node_ints(n, MGE_KEY_pad, 0, 0), pw = mge_node_ints(n, MGE_KEY_pad, 1, 0);
    int64_t dh = mge_node_ints(n, MGE_KEY_dilation, 0, 1), dw = mge_node_ints(n, MGE_KEY_dilation, 1, 1);
    int act = (int)mge_node_ints(n, MGE_KEY_act, 0, -1);
    double alpha = mge_node_float(n, MGE_KEY_alpha, 0.01);
    const float *xp = x->data, *wp = w->data, *bp = b ? b->data : NULL, *rp = r ? r->data : NULL;
    float *yp = y->data;
    for (int64_t i = 0; i < N; i++)
        for (int64_t ob = 0; ob < Ob; ob++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++)
                    for (int64_t lo = 0; lo < c; lo++) {
                        int64_t o = ob * c + lo, at = (((i * Ob + ob) * OH + oh) * OW + ow) * c + lo;
                        if (o >= O) {
                            yp[at] = 0.0f;
                            continue;
                        }
                        double acc = bp ? bp[o] : 0.0;
                        for (int64_t kh = 0; kh < KH; kh++) {
                            int64_t ih = oh * sh - ph + kh * dh;
                            if (ih < 0 || ih >= H)
                                continue;
                            for (int64_t kw = 0; kw < KW; kw++) {
                                int64_t iw = ow * sw - pw + kw * dw;
                                if (iw < 0 || iw >= W)
                                    continue;
                                if (G != 1) {
                                    acc += (double)xp[(((i * Cb + ob) * H + ih) * W + iw) * c + lo] *
                                           wp[((ob * KH + kh) * KW + kw) * c + lo];
                                    continue;
                                }
                                for (int64_t cb = 0; cb < Cb; cb++)
                                    for (int64_t li = 0; li < ci; li++)
                                        acc += (double)xp[(((i * Cb + cb) * H + ih) * W + iw) * ci + li] *
                                               wp[((((ob * Cb + cb) * KH + kh) * KW + kw) * ci + li) * c + lo];
                            }
                        }
                        if (rp)
                            acc += rp[at];
                        yp[at] = (float)(act == -1 ? acc : mge_ref_unary(act, acc, alpha));
                    }
    return MGE_OK;
}

/* Max over each window's real positions, per lane; NaN wins and an empty
 * window gives -inf, as maxpool2d. */
static mge_status maxpool_nchwc(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *xt = in[0];
    mge_status st = ref_check_dtype(ctx, n, "x", xt, MGE_F32, err);
    if (st)
        return st;
    if (xt->ndim != 5 || xt->dims[4] < 1)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x has rank %d: expected 5 [N,Cb,H,W,c]", ref_opname(ctx, n),
                             xt->ndim);
    ref_pool_geom g;
    if ((st = ref_pool_attrs(ctx, n, 1, &g, err)))
        return st;
    int ceil_mode = (int)mge_node_int(n, MGE_KEY_ceil_mode, 0);
    const int64_t N = xt->dims[0] * xt->dims[1], H = xt->dims[2], W = xt->dims[3], c = xt->dims[4];
    const int64_t OH = mge_conv_out_dim(H, g.k[0], g.s[0], g.p[0], g.d[0], ceil_mode);
    const int64_t OW = mge_conv_out_dim(W, g.k[1], g.s[1], g.p[1], g.d[1], ceil_mode);
    if (OH <= 0 || OW <= 0)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is too small for the window", ref_opname(ctx, n));
    int64_t ey[5] = {xt->dims[0], xt->dims[1], OH, OW, c};
    if ((st = ref_check(ctx, n, "output", out[0], MGE_F32, 5, ey, err)))
        return st;
    const float *x = in[0]->data;
    float *y = out[0]->data;
    for (int64_t pl = 0; pl < N; pl++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++)
                for (int64_t l = 0; l < c; l++) {
                    double m = -INFINITY;
                    for (int64_t i = 0; i < g.k[0]; i++) {
                        int64_t ih = oh * g.s[0] - g.p[0] + i * g.d[0];
                        if (ih < 0 || ih >= H)
                            continue;
                        for (int64_t j = 0; j < g.k[1]; j++) {
                            int64_t iw = ow * g.s[1] - g.p[1] + j * g.d[1];
                            if (iw < 0 || iw >= W)
                                continue;
                            double v = x[((pl * H + ih) * W + iw) * c + l];
                            if (v > m || isnan(v))
                                m = v;
                            if (isnan(m))
                                break;
                        }
                    }
                    y[((pl * OH + oh) * OW + ow) * c + l] = (float)m;
                }
    return MGE_OK;
}

void mge_ref_register_blocked(mge_backend *b)
{
    b->k[MGE_OP_MAXPOOL2D_NCHWC][MGE_F32].run = maxpool_nchwc;
    b->k[MGE_OP_TO_NCHWC][MGE_F32].run = to_nchwc;
    b->k[MGE_OP_FROM_NCHWC][MGE_F32].run = from_nchwc;
    b->k[MGE_OP_CONV2D_NCHWC][MGE_F32].run = conv2d_nchwc;
}
