/* ref_fused.c — fused_conv2d and fused_linear (f32), the oracle of the
 * fused kernels: each output element is the plain convolution (or x W^T)
 * summed in double, plus the bias and the residual, then the activation
 * (mge_ref_unary, in double), stored once as f32. Inputs are (x, weight[,
 * bias][, residual]) as the bias and residual attributes say; every shape
 * is checked as ref_conv.c and ref_linear.c check theirs. */
#include "ref.h"

#include <string.h>

/* The bias and residual tensors (or NULL) and the activation of node n;
 * an error when the inputs do not match the attributes. */
static mge_status fused_io(const mge_node *n, mge_tensor *const *in, const mge_tensor **b, const mge_tensor **r,
                           int *act, double *alpha, mge_error *err)
{
    int bias = (int)mge_node_int(n, MGE_KEY_bias, 1), res = (int)mge_node_int(n, MGE_KEY_residual, 0);
    if (n->nin != 2 + bias + res)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: bias=%s residual=%s but %d inputs", ref_opname(n),
                             bias ? "true" : "false", res ? "true" : "false", n->nin);
    const mge_attr *a = mge_node_attr(n, MGE_KEY_act);
    if (!a || a->n != 1 || !mge_fused_act_ok(a->i[0]))
        return mge_error_set(err, MGE_ERR_INVALID, "%s: act is not none or an activation", ref_opname(n));
    *b = bias ? in[2] : NULL;
    *r = res ? in[2 + bias] : NULL;
    *act = (int)a->i[0];
    *alpha = mge_node_float(n, MGE_KEY_alpha, 0.01);
    return MGE_OK;
}

/* The epilogue of one output element: acc already holds layer + bias. */
static inline float finish(double acc, const float *r, int64_t i, int act, double alpha)
{
    if (r)
        acc += r[i];
    return (float)(act < 0 ? acc : mge_ref_unary(act, acc, alpha));
}

static mge_status fused_conv2d_f32(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                   mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *x = in[0], *w = in[1], *bt, *rt;
    mge_tensor *y = out[0];
    int act;
    double alpha;
    mge_status st = fused_io(n, in, &bt, &rt, &act, &alpha, err);
    if (st)
        return st;
    int64_t s[2], p[2], d[2];
    for (int i = 0; i < 2; i++) {
        s[i] = mge_node_ints(n, MGE_KEY_stride, i, 1);
        p[i] = mge_node_ints(n, MGE_KEY_pad, i, 0);
        d[i] = mge_node_ints(n, MGE_KEY_dilation, i, 1);
    }
    int64_t g = mge_node_int(n, MGE_KEY_groups, 1);
    if (s[0] < 1 || s[1] < 1 || p[0] < 0 || p[1] < 0 || d[0] < 1 || d[1] < 1 || g < 1)
        return mge_error_set(err, MGE_ERR_INVALID, "fused_conv2d: invalid stride, pad, dilation or groups");
    if (x->ndim != 4 || w->ndim != 4)
        return mge_error_set(err, MGE_ERR_SHAPE, "fused_conv2d: x and weight must be rank 4 (got %d and %d)",
                             x->ndim, w->ndim);
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
    int64_t O = w->dims[0], KH = w->dims[2], KW = w->dims[3];
    if (C % g || O % g || C / g != w->dims[1])
        return mge_error_set(err, MGE_ERR_SHAPE,
                             "fused_conv2d: x has %lld channels, weight is [%lld,%lld,...]: does not fit groups=%lld",
                             (long long)C, (long long)O, (long long)w->dims[1], (long long)g);
    int64_t OH = mge_conv_out_dim(H, KH, s[0], p[0], d[0], 0), OW = mge_conv_out_dim(W, KW, s[1], p[1], d[1], 0);
    int64_t ey[4] = {N, O, OH, OW}, eb[1] = {O};
    if ((st = ref_check(n, "x", x, MGE_F32, 4, x->dims, err)) ||
        (st = ref_check(n, "weight", w, MGE_F32, 4, w->dims, err)) ||
        (bt && (st = ref_check(n, "bias", bt, MGE_F32, 1, eb, err))) ||
        (rt && (st = ref_check(n, "residual", rt, MGE_F32, 4, ey, err))) ||
        (st = ref_check(n, "output", y, MGE_F32, 4, ey, err)))
        return st;
    const float *xp = x->data, *wp = w->data, *bp = bt ? bt->data : NULL, *rp = rt ? rt->data : NULL;
    float *yp = y->data;
    int64_t cg = C / g, og = O / g;
    for (int64_t ni = 0; ni < N; ni++)
        for (int64_t o = 0; o < O; o++) {
            int64_t grp = o / og;
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    double acc = 0;
                    for (int64_t c = 0; c < cg; c++) {
                        int64_t ci = grp * cg + c;
                        for (int64_t kh = 0; kh < KH; kh++) {
                            int64_t ih = oh * s[0] - p[0] + kh * d[0];
                            if (ih < 0 || ih >= H)
                                continue;
                            for (int64_t kw = 0; kw < KW; kw++) {
                                int64_t iw = ow * s[1] - p[1] + kw * d[1];
                                if (iw < 0 || iw >= W)
                                    continue;
                                acc += (double)xp[((ni * C + ci) * H + ih) * W + iw] *
                                       wp[((o * cg + c) * KH + kh) * KW + kw];
                            }
                        }
                    }
                    if (bp)
                        acc += bp[o];
                    int64_t i = ((ni * O + o) * OH + oh) * OW + ow;
                    yp[i] = finish(acc, rp, i, act, alpha);
                }
        }
    return MGE_OK;
}

static mge_status fused_linear_f32(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                   mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *x = in[0], *w = in[1], *bt, *rt;
    mge_tensor *y = out[0];
    int act;
    double alpha;
    mge_status st = fused_io(n, in, &bt, &rt, &act, &alpha, err);
    if (st)
        return st;
    if (x->ndim < 1 || w->ndim != 2)
        return mge_error_set(err, MGE_ERR_SHAPE, "fused_linear: x rank %d, weight rank %d: expected >= 1 and 2",
                             x->ndim, w->ndim);
    int64_t K = x->dims[x->ndim - 1], O = w->dims[0];
    int64_t ew[2] = {O, K}, eb[1] = {O}, ey[MGE_MAX_DIMS];
    memcpy(ey, x->dims, sizeof ey);
    ey[x->ndim - 1] = O;
    if ((st = ref_check(n, "x", x, MGE_F32, x->ndim, x->dims, err)) ||
        (st = ref_check(n, "weight", w, MGE_F32, 2, ew, err)) ||
        (bt && (st = ref_check(n, "bias", bt, MGE_F32, 1, eb, err))) ||
        (rt && (st = ref_check(n, "residual", rt, MGE_F32, x->ndim, ey, err))) ||
        (st = ref_check(n, "output", y, MGE_F32, x->ndim, ey, err)))
        return st;
    int64_t M = 1;
    for (int i = 0; i < x->ndim - 1; i++)
        M *= x->dims[i];
    const float *xp = x->data, *wp = w->data, *bp = bt ? bt->data : NULL, *rp = rt ? rt->data : NULL;
    float *yp = y->data;
    for (int64_t m = 0; m < M; m++)
        for (int64_t o = 0; o < O; o++) {
            double acc = 0;
            for (int64_t k = 0; k < K; k++)
                acc += (double)xp[m * K + k] * wp[o * K + k];
            if (bp)
                acc += bp[o];
            yp[m * O + o] = finish(acc, rp, m * O + o, act, alpha);
        }
    return MGE_OK;
}

void mge_ref_register_fused(mge_backend *b)
{
    /* no scratch: each output element is computed and stored once */
    b->k[MGE_OP_FUSED_CONV2D][MGE_F32] = (mge_kernel){fused_conv2d_f32, NULL};
    b->k[MGE_OP_FUSED_LINEAR][MGE_F32] = (mge_kernel){fused_linear_f32, NULL};
}
