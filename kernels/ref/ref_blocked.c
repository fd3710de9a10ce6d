/* ref_blocked.c — the blocked-layout (NCHWc) ops as plain loops in double
 * (see ops.def): to_nchwc, from_nchwc, maxpool2d_nchwc and conv2d_nchwc (whose input block
 * may differ from its output block). They define what the cpu kernels
 * must compute; lanes past the real channels are written as zero. */
#include "ref.h"

/* x [N,C,H,W] into y [N,Cb,H,W,c]. */
static mge_status to_nchwc(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                           mge_error *err)
{
    (void)ctx;
    const mge_tensor *x = in[0];
    mge_tensor *y = out[0];
    mge_status st;
    int64_t c = mge_node_int(n, MGE_KEY_block, 0);
    if (x->ndim != 4 || c < 1)
        return mge_error_set(err, MGE_ERR_SHAPE, "to_nchwc: x has rank %d: expected 4", x->ndim);
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3], Cb = (C + c - 1) / c;
    int64_t ey[5] = {N, Cb, H, W, c};
    if ((st = ref_check(n, "x", x, MGE_F32, 4, x->dims, err)) || (st = ref_check(n, "output", y, MGE_F32, 5, ey, err)))
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
    (void)ctx;
    const mge_tensor *x = in[0];
    mge_tensor *y = out[0];
    mge_status st;
    int64_t C = mge_node_int(n, MGE_KEY_channels, 0);
    if (x->ndim != 5 || x->dims[4] < 1 || C < 1 || (C + x->dims[4] - 1) / x->dims[4] != x->dims[1])
        return mge_error_set(err, MGE_ERR_SHAPE, "from_nchwc: x does not hold %lld channels", (long long)C);
    int64_t N = x->dims[0], Cb = x->dims[1], H = x->dims[2], W = x->dims[3], c = x->dims[4];
    int64_t ey[4] = {N, C, H, W};
    if ((st = ref_check(n, "x", x, MGE_F32, 5, x->dims, err)) || (st = ref_check(n, "output", y, MGE_F32, 4, ey, err)))
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

static mge_status conv2d_nchwc(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                               mge_tensor *const *out, mge_error *err)
{
    (void)ctx;
    mge_tdesc td[4], yd;
    for (int i = 0; i < n->nin && i < 4; i++) {
        td[i].dtype = in[i]->dtype;
        td[i].ndim = in[i]->ndim;
        memcpy(td[i].dims, in[i]->dims, sizeof td[i].dims);
    }
    mge_status st = mge_blocked_infer(n, td, &yd, err);
    if (st)
        return st;
    int bias = (int)mge_node_int(n, MGE_KEY_bias, 1), res = (int)mge_node_int(n, MGE_KEY_residual, 0);
    const mge_tensor *x = in[0], *w = in[1], *b = bias ? in[2] : NULL, *r = res ? in[2 + bias] : NULL;
    mge_tensor *y = out[0];
    for (int i = 0; i < n->nin; i++)
        if ((st = ref_check_data(n, "an input", in[i], err)))
            return st;
    if ((st = ref_check(n, "output", y, MGE_F32, 5, yd.dims, err)))
        return st;
    int64_t N = x->dims[0], Cb = x->dims[1], H = x->dims[2], W = x->dims[3], ci = x->dims[4];
    int64_t Ob = yd.dims[1], OH = yd.dims[2], OW = yd.dims[3], c = yd.dims[4];
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
    (void)ctx;
    mge_tdesc xd = {in[0]->dtype, in[0]->ndim, {0}}, yd;
    memcpy(xd.dims, in[0]->dims, sizeof xd.dims);
    mge_status st = mge_blocked_infer(n, &xd, &yd, err);
    if (st || (st = ref_check_data(n, "x", in[0], err)) ||
        (st = ref_check(n, "output", out[0], MGE_F32, 5, yd.dims, err)))
        return st;
    ref_pool_geom g;
    if ((st = ref_pool_attrs(n, 1, &g, err)))
        return st;
    const int64_t N = xd.dims[0] * xd.dims[1], H = xd.dims[2], W = xd.dims[3], c = xd.dims[4];
    const int64_t OH = yd.dims[2], OW = yd.dims[3];
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
