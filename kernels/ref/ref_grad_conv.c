/* ref_grad_conv.c — reference kernels of the conv2d and linear gradients:
 * plain gathering loops (each result element sums its own terms in double),
 * NCHW, weight OIHW, stride/pad/dilation/groups as the forward.
 *   conv2d_grad_input(dy, weight, x) -> dx like x
 *   conv2d_grad_weight(dy, x, weight) -> dweight like weight
 *   linear_grad_input(dy[..., O], weight[O, K]) -> [..., K] = dy W
 *   linear_grad_weight(dy[..., O], x[..., K]) -> [O, K] = sum over rows of dy^T x
 * Float dtypes (f32, f16, bf16, f64). */
#include "ref.h"

#include <string.h>

typedef struct cg_geom {
    int64_t N, C, H, W, O, KH, KW, OH, OW, g, s[2], p[2], d[2];
} cg_geom;

/* Shapes and attributes of a conv gradient node; checks every tensor. */
static mge_status cg_setup(const mge_kctx *ctx, const mge_node *n, const mge_tensor *dy, const mge_tensor *w,
                           const mge_tensor *x, const mge_tensor *res, cg_geom *q, mge_error *err)
{
    for (int i = 0; i < 2; i++) {
        q->s[i] = mge_node_ints(n, MGE_KEY_stride, i, 1);
        q->p[i] = mge_node_ints(n, MGE_KEY_pad, i, 0);
        q->d[i] = mge_node_ints(n, MGE_KEY_dilation, i, 1);
    }
    q->g = mge_node_int(n, MGE_KEY_groups, 1);
    if (q->s[0] < 1 || q->s[1] < 1 || q->p[0] < 0 || q->p[1] < 0 || q->d[0] < 1 || q->d[1] < 1 || q->g < 1)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: invalid stride, pad, dilation or groups", ref_opname(ctx, n));
    if (x->ndim != 4 || w->ndim != 4)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x and weight must be rank 4 (got %d and %d)", ref_opname(ctx, n),
                             x->ndim, w->ndim);
    mge_dtype dt = dy->dtype;
    if (!mge_dtype_is_float(dt))
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: no reference kernel for %s", ref_opname(ctx, n),
                             mge_dtype_name(dt));
    q->N = x->dims[0], q->C = x->dims[1], q->H = x->dims[2], q->W = x->dims[3];
    q->O = w->dims[0], q->KH = w->dims[2], q->KW = w->dims[3];
    if (q->C % q->g || q->O % q->g || q->C / q->g != w->dims[1])
        return mge_error_set(
            err, MGE_ERR_SHAPE, "%s: x has %lld channels, weight is [%lld,%lld,...]: does not fit groups=%lld",
            ref_opname(ctx, n), (long long)q->C, (long long)q->O, (long long)w->dims[1], (long long)q->g);
    q->OH = mge_conv_out_dim(q->H, q->KH, q->s[0], q->p[0], q->d[0], 0);
    q->OW = mge_conv_out_dim(q->W, q->KW, q->s[1], q->p[1], q->d[1], 0);
    int64_t ey[4] = {q->N, q->O, q->OH, q->OW};
    const mge_tensor *like = n->op == MGE_OP_CONV2D_GRAD_INPUT ? x : w;
    mge_status st;
    if ((st = ref_check(ctx, n, "dy", dy, dt, 4, ey, err)) ||
        (st = ref_check(ctx, n, "weight", w, dt, 4, w->dims, err)) ||
        (st = ref_check(ctx, n, "result", res, dt, 4, like->dims, err)))
        return st;
    /* x is read only by the weight gradient */
    return n->op == MGE_OP_CONV2D_GRAD_WEIGHT ? ref_check(ctx, n, "x", x, dt, 4, x->dims, err) : MGE_OK;
}

/* dx[n,c,ih,iw] = sum over o in c's group and taps (kh, kw) with
 * ih = oh*s - p + kh*d for an integer oh in [0, OH) (and the same for w) of
 * dy[n,o,oh,ow] * w[o,c',kh,kw]. */
static inline __attribute__((always_inline)) void grad_input_loops(mge_dtype dt, const cg_geom *q, const void *dyp,
                                                                   const void *wp, void *dxp)
{
    int64_t cg = q->C / q->g, og = q->O / q->g;
    for (int64_t ni = 0; ni < q->N; ni++)
        for (int64_t c = 0; c < q->C; c++) {
            int64_t grp = c / cg, cl = c % cg;
            for (int64_t ih = 0; ih < q->H; ih++)
                for (int64_t iw = 0; iw < q->W; iw++) {
                    double acc = 0;
                    for (int64_t kh = 0; kh < q->KH; kh++) {
                        int64_t th = ih + q->p[0] - kh * q->d[0];
                        if (th < 0 || th % q->s[0] || th / q->s[0] >= q->OH)
                            continue;
                        int64_t oh = th / q->s[0];
                        for (int64_t kw = 0; kw < q->KW; kw++) {
                            int64_t tw = iw + q->p[1] - kw * q->d[1];
                            if (tw < 0 || tw % q->s[1] || tw / q->s[1] >= q->OW)
                                continue;
                            int64_t ow = tw / q->s[1];
                            for (int64_t ol = 0; ol < og; ol++) {
                                int64_t o = grp * og + ol;
                                acc += ref_ld(dt, dyp, ((ni * q->O + o) * q->OH + oh) * q->OW + ow) *
                                       ref_ld(dt, wp, ((o * cg + cl) * q->KH + kh) * q->KW + kw);
                            }
                        }
                    }
                    ref_st(dt, dxp, ((ni * q->C + c) * q->H + ih) * q->W + iw, acc);
                }
        }
}

/* dw[o,c,kh,kw] = sum over n, oh, ow of dy[n,o,oh,ow] * x[n,ci,oh*s-p+kh*d,ow*s-p+kw*d]
 * (taps in the padding contribute nothing). */
static inline __attribute__((always_inline)) void grad_weight_loops(mge_dtype dt, const cg_geom *q, const void *dyp,
                                                                    const void *xp, void *dwp)
{
    int64_t cg = q->C / q->g, og = q->O / q->g;
    for (int64_t o = 0; o < q->O; o++) {
        int64_t grp = o / og;
        for (int64_t c = 0; c < cg; c++) {
            int64_t ci = grp * cg + c;
            for (int64_t kh = 0; kh < q->KH; kh++)
                for (int64_t kw = 0; kw < q->KW; kw++) {
                    double acc = 0;
                    for (int64_t ni = 0; ni < q->N; ni++)
                        for (int64_t oh = 0; oh < q->OH; oh++) {
                            int64_t ih = oh * q->s[0] - q->p[0] + kh * q->d[0];
                            if (ih < 0 || ih >= q->H)
                                continue;
                            for (int64_t ow = 0; ow < q->OW; ow++) {
                                int64_t iw = ow * q->s[1] - q->p[1] + kw * q->d[1];
                                if (iw < 0 || iw >= q->W)
                                    continue;
                                acc += ref_ld(dt, dyp, ((ni * q->O + o) * q->OH + oh) * q->OW + ow) *
                                       ref_ld(dt, xp, ((ni * q->C + ci) * q->H + ih) * q->W + iw);
                            }
                        }
                    ref_st(dt, dwp, ((o * cg + c) * q->KH + kh) * q->KW + kw, acc);
                }
        }
    }
}

static mge_status conv2d_grad_input_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                          mge_tensor *const *out, mge_error *err)
{
    cg_geom q;
    mge_status st = cg_setup(ctx, n, in[0], in[1], in[2], out[0], &q, err);
    if (st)
        return st;
    if (in[0]->dtype == MGE_F32)
        grad_input_loops(MGE_F32, &q, in[0]->data, in[1]->data, out[0]->data);
    else
        grad_input_loops(in[0]->dtype, &q, in[0]->data, in[1]->data, out[0]->data);
    return MGE_OK;
}

static mge_status conv2d_grad_weight_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                           mge_tensor *const *out, mge_error *err)
{
    cg_geom q;
    mge_status st = cg_setup(ctx, n, in[0], in[2], in[1], out[0], &q, err);
    if (st)
        return st;
    if (in[0]->dtype == MGE_F32)
        grad_weight_loops(MGE_F32, &q, in[0]->data, in[1]->data, out[0]->data);
    else
        grad_weight_loops(in[0]->dtype, &q, in[0]->data, in[1]->data, out[0]->data);
    return MGE_OK;
}

/* ---------------------------------------------------------------- linear */

static mge_status linear_grad_input_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                          mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *dy = in[0], *w = in[1];
    mge_tensor *dx = out[0];
    mge_dtype dt = dy->dtype;
    if (!mge_dtype_is_float(dt))
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: no reference kernel for %s", ref_opname(ctx, n),
                             mge_dtype_name(dt));
    if (dy->ndim < 1 || w->ndim != 2)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: dy rank %d, weight rank %d: expected >= 1 and 2",
                             ref_opname(ctx, n), dy->ndim, w->ndim);
    int64_t O = dy->dims[dy->ndim - 1], K = w->dims[1];
    int64_t ew[2] = {O, K}, ex[MGE_MAX_DIMS];
    memcpy(ex, dy->dims, sizeof ex);
    ex[dy->ndim - 1] = K;
    mge_status st;
    if ((st = ref_check(ctx, n, "dy", dy, dt, dy->ndim, dy->dims, err)) ||
        (st = ref_check(ctx, n, "weight", w, dt, 2, ew, err)) ||
        (st = ref_check(ctx, n, "result", dx, dt, dy->ndim, ex, err)))
        return st;
    int64_t M = 1;
    for (int i = 0; i < dy->ndim - 1; i++)
        M *= dy->dims[i];
    for (int64_t m = 0; m < M; m++)
        for (int64_t k = 0; k < K; k++) {
            double acc = 0;
            for (int64_t o = 0; o < O; o++)
                acc += ref_ld(dt, dy->data, m * O + o) * ref_ld(dt, w->data, o * K + k);
            ref_st(dt, dx->data, m * K + k, acc);
        }
    return MGE_OK;
}

static mge_status linear_grad_weight_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                           mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *dy = in[0], *x = in[1];
    mge_tensor *dw = out[0];
    mge_dtype dt = dy->dtype;
    if (!mge_dtype_is_float(dt))
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: no reference kernel for %s", ref_opname(ctx, n),
                             mge_dtype_name(dt));
    if (dy->ndim < 1 || x->ndim != dy->ndim)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: dy rank %d, x rank %d: expected equal ranks >= 1",
                             ref_opname(ctx, n), dy->ndim, x->ndim);
    int64_t O = dy->dims[dy->ndim - 1], K = x->dims[x->ndim - 1];
    int64_t ex[MGE_MAX_DIMS], ew[2] = {O, K};
    memcpy(ex, dy->dims, sizeof ex);
    ex[dy->ndim - 1] = K;
    mge_status st;
    if ((st = ref_check(ctx, n, "dy", dy, dt, dy->ndim, dy->dims, err)) ||
        (st = ref_check(ctx, n, "x", x, dt, x->ndim, ex, err)) ||
        (st = ref_check(ctx, n, "result", dw, dt, 2, ew, err)))
        return st;
    int64_t M = 1;
    for (int i = 0; i < dy->ndim - 1; i++)
        M *= dy->dims[i];
    for (int64_t o = 0; o < O; o++)
        for (int64_t k = 0; k < K; k++) {
            double acc = 0;
            for (int64_t m = 0; m < M; m++)
                acc += ref_ld(dt, dy->data, m * O + o) * ref_ld(dt, x->data, m * K + k);
            ref_st(dt, dw->data, o * K + k, acc);
        }
    return MGE_OK;
}

void mge_ref_register_grad_conv(mge_backend *b)
{
    REF_EACH_FLOAT(dt) {
        b->k[MGE_OP_CONV2D_GRAD_INPUT][dt].run = conv2d_grad_input_float;
        b->k[MGE_OP_CONV2D_GRAD_WEIGHT][dt].run = conv2d_grad_weight_float;
        b->k[MGE_OP_LINEAR_GRAD_INPUT][dt].run = linear_grad_input_float;
        b->k[MGE_OP_LINEAR_GRAD_WEIGHT][dt].run = linear_grad_weight_float;
    }
}
