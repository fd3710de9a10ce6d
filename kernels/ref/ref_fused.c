/* ref_fused.c — fused_conv2d and fused_linear (f32), the oracle of the
 * fused kernels: each output element is the plain convolution (or x W^T)
 * summed in double, plus the bias and the residual, then the activation
 * (mge_ref_unary, in double), stored once as f32. Inputs are (x, weight[,
 * bias][, residual]) as the bias and residual attributes say; every shape
 * is checked as ref_conv.c and ref_linear.c check theirs. */
#include "ref.h"

#include <string.h>

/* The tensors of one call (b and r NULL when absent) and the activation. */
typedef struct fused_args {
    const mge_tensor *x, *w, *b, *r;
    mge_tensor *y;
    int act;
    double alpha;
} fused_args;

/* The tensors and activation of node n into *a; an error when the inputs
 * do not match the attributes. */
static mge_status fused_io(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                           fused_args *a, mge_error *err)
{
    int bias = (int)mge_node_int(n, MGE_KEY_bias, 1), res = (int)mge_node_int(n, MGE_KEY_residual, 0);
    if (n->nin != 2 + bias + res)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: bias=%s residual=%s but %d inputs", ref_opname(ctx, n),
                             bias ? "true" : "false", res ? "true" : "false", n->nin);
    const mge_attr *at = mge_node_attr(n, MGE_KEY_act);
    if (!at || at->n != 1 || !mge_fused_act_ok(at->i[0]))
        return mge_error_set(err, MGE_ERR_INVALID, "%s: act is not none or an activation", ref_opname(ctx, n));
    a->x = in[0];
    a->w = in[1];
    a->b = bias ? in[2] : NULL;
    a->r = res ? in[2 + bias] : NULL;
    a->y = out[0];
    a->act = (int)at->i[0];
    a->alpha = mge_node_float(n, MGE_KEY_alpha, 0.01);
    return MGE_OK;
}

/* The bias ([O]), residual and output (both ey[0..nd)) checks, after
 * x's and weight's. */
static mge_status fused_check_out(const mge_kctx *ctx, const mge_node *n, const fused_args *a, int nd,
                                  const int64_t *ey, int64_t O, mge_error *err)
{
    int64_t eb[1] = {O};
    mge_status st;
    if ((a->b && (st = ref_check(ctx, n, "bias", a->b, MGE_F32, 1, eb, err))) ||
        (a->r && (st = ref_check(ctx, n, "residual", a->r, MGE_F32, nd, ey, err))))
        return st;
    return ref_check(ctx, n, "output", a->y, MGE_F32, nd, ey, err);
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
    fused_args a;
    ref_conv_geom q;
    mge_status st;
    if ((st = fused_io(ctx, n, in, out, &a, err)) || (st = mge_ref_conv_geom(ctx, n, a.x, a.w, &q, err)))
        return st;
    int64_t ey[4] = {q.N, q.O, q.OH, q.OW};
    if ((st = ref_check(ctx, n, "x", a.x, MGE_F32, 4, a.x->dims, err)) ||
        (st = ref_check(ctx, n, "weight", a.w, MGE_F32, 4, a.w->dims, err)) ||
        (st = fused_check_out(ctx, n, &a, 4, ey, q.O, err)))
        return st;
    const float *xp = a.x->data, *wp = a.w->data, *bp = a.b ? a.b->data : NULL, *rp = a.r ? a.r->data : NULL;
    float *yp = a.y->data;
    for (int64_t ni = 0; ni < q.N; ni++)
        for (int64_t o = 0; o < q.O; o++)
            for (int64_t oh = 0; oh < q.OH; oh++)
                for (int64_t ow = 0; ow < q.OW; ow++) {
                    double acc = mge_ref_conv_acc(MGE_F32, &q, xp, wp, ni, o, oh, ow, 0.0);
                    if (bp)
                        acc += bp[o];
                    int64_t i = ((ni * q.O + o) * q.OH + oh) * q.OW + ow;
                    yp[i] = finish(acc, rp, i, a.act, a.alpha);
                }
    return MGE_OK;
}

static mge_status fused_linear_f32(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                   mge_tensor *const *out, mge_error *err)
{
    fused_args a;
    mge_status st = fused_io(ctx, n, in, out, &a, err);
    if (st)
        return st;
    const mge_tensor *x = a.x, *w = a.w;
    if (x->ndim < 1 || w->ndim != 2)
        return mge_error_set(err, MGE_ERR_SHAPE, "fused_linear: x rank %d, weight rank %d: expected >= 1 and 2",
                             x->ndim, w->ndim);
    int64_t K = x->dims[x->ndim - 1], O = w->dims[0];
    int64_t ew[2] = {O, K}, ey[MGE_MAX_DIMS];
    memcpy(ey, x->dims, sizeof ey);
    ey[x->ndim - 1] = O;
    if ((st = ref_check(ctx, n, "x", x, MGE_F32, x->ndim, x->dims, err)) ||
        (st = ref_check(ctx, n, "weight", w, MGE_F32, 2, ew, err)) ||
        (st = fused_check_out(ctx, n, &a, x->ndim, ey, O, err)))
        return st;
    int64_t M = 1;
    for (int i = 0; i < x->ndim - 1; i++)
        M *= x->dims[i];
    const float *xp = x->data, *wp = w->data, *bp = a.b ? a.b->data : NULL, *rp = a.r ? a.r->data : NULL;
    float *yp = a.y->data;
    for (int64_t m = 0; m < M; m++)
        for (int64_t o = 0; o < O; o++) {
            double acc = 0;
            for (int64_t k = 0; k < K; k++)
                acc += (double)xp[m * K + k] * wp[o * K + k];
            if (bp)
                acc += bp[o];
            yp[m * O + o] = finish(acc, rp, m * O + o, a.act, a.alpha);
        }
    return MGE_OK;
}

void mge_ref_register_fused(mge_backend *b)
{
    /* no scratch: each output element is computed and stored once */
    b->k[MGE_OP_FUSED_CONV2D][MGE_F32] = (mge_kernel){.run = fused_conv2d_f32, .ws = NULL};
    b->k[MGE_OP_FUSED_LINEAR][MGE_F32] = (mge_kernel){.run = fused_linear_f32, .ws = NULL};
}
