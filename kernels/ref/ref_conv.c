/* ref_conv.c — conv2d as the direct seven-loop convolution (NCHW, weight
 * OIHW), with stride, pad, dilation, groups and an optional bias; double
 * accumulation so it can judge the fast kernels. f32, f16 and bf16. The
 * geometry and the per-element sum also serve ref_fused.c. */
#include "ref.h"

mge_status mge_ref_conv_geom(const mge_kctx *ctx, const mge_node *n, const mge_tensor *x, const mge_tensor *w,
                             ref_conv_geom *q, mge_error *err)
{
    const char *name = ref_opname(ctx, n);
    for (int i = 0; i < 2; i++) {
        q->s[i] = mge_node_ints(n, MGE_KEY_stride, i, 1);
        q->p[i] = mge_node_ints(n, MGE_KEY_pad, i, 0);
        q->d[i] = mge_node_ints(n, MGE_KEY_dilation, i, 1);
    }
    int64_t g = q->g = mge_node_int(n, MGE_KEY_groups, 1);
    const int64_t *s = q->s, *p = q->p, *d = q->d;
    if (s[0] < 1 || s[1] < 1 || p[0] < 0 || p[1] < 0 || d[0] < 1 || d[1] < 1 || g < 1)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: invalid stride, pad, dilation or groups", name);
    if (x->ndim != 4 || w->ndim != 4)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x and weight must be rank 4 (got %d and %d)", name, x->ndim,
                             w->ndim);
    int64_t C = x->dims[1], O = w->dims[0];
    if (C % g || O % g || C / g != w->dims[1])
        return mge_error_set(err, MGE_ERR_SHAPE,
                             "%s: x has %lld channels, weight is [%lld,%lld,...]: does not fit groups=%lld", name,
                             (long long)C, (long long)O, (long long)w->dims[1], (long long)g);
    q->N = x->dims[0], q->C = C, q->H = x->dims[2], q->W = x->dims[3];
    q->O = O, q->KH = w->dims[2], q->KW = w->dims[3];
    q->OH = mge_conv_out_dim(q->H, q->KH, s[0], p[0], d[0], 0);
    q->OW = mge_conv_out_dim(q->W, q->KW, s[1], p[1], d[1], 0);
    return MGE_OK;
}

/* mge_ref_conv_acc's loops; inlined where dt is a constant so that copy
 * drops the per-element dtype switch. */
static inline __attribute__((always_inline)) double conv_acc(mge_dtype dt, const ref_conv_geom *q, const void *xp,
                                                             const void *wp, int64_t ni, int64_t o, int64_t oh,
                                                             int64_t ow, double acc)
{
    int64_t C = q->C, H = q->H, W = q->W, KH = q->KH, KW = q->KW;
    const int64_t *s = q->s, *p = q->p, *d = q->d;
    int64_t cg = C / q->g, grp = o / (q->O / q->g);
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
                acc += ref_ld(dt, xp, ((ni * C + ci) * H + ih) * W + iw) *
                       ref_ld(dt, wp, ((o * cg + c) * KH + kh) * KW + kw);
            }
        }
    }
    return acc;
}

double mge_ref_conv_acc(mge_dtype dt, const ref_conv_geom *q, const void *x, const void *w, int64_t ni, int64_t o,
                        int64_t oh, int64_t ow, double acc)
{
    if (dt == MGE_F32)
        return conv_acc(MGE_F32, q, x, w, ni, o, oh, ow, acc);
    return conv_acc(dt, q, x, w, ni, o, oh, ow, acc);
}

/* y[n,o,oh,ow] = bias[o] + the sum of mge_ref_conv_acc. */
static inline __attribute__((always_inline)) void conv_loops(mge_dtype dt, const ref_conv_geom *q, const void *xp,
                                                             const void *wp, const void *bp, void *yp)
{
    for (int64_t ni = 0; ni < q->N; ni++)
        for (int64_t o = 0; o < q->O; o++)
            for (int64_t oh = 0; oh < q->OH; oh++)
                for (int64_t ow = 0; ow < q->OW; ow++) {
                    double acc = conv_acc(dt, q, xp, wp, ni, o, oh, ow, bp ? ref_ld(dt, bp, o) : 0.0);
                    ref_st(dt, yp, ((ni * q->O + o) * q->OH + oh) * q->OW + ow, acc);
                }
}

static mge_status conv2d_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                               mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *x = in[0], *w = in[1], *b = n->nin >= 3 ? in[2] : NULL;
    mge_tensor *y = out[0];
    ref_conv_geom q;
    mge_status st = mge_ref_conv_geom(ctx, n, x, w, &q, err);
    if (st)
        return st;
    int64_t ey[4] = {q.N, q.O, q.OH, q.OW}, eb[1] = {q.O};
    mge_dtype dt = x->dtype;
    if (!mge_dtype_is_float(dt))
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "conv2d: no reference kernel for %s", mge_dtype_name(dt));
    if ((st = ref_check(ctx, n, "x", x, dt, 4, x->dims, err)) ||
        (st = ref_check(ctx, n, "weight", w, dt, 4, w->dims, err)) ||
        (b && (st = ref_check(ctx, n, "bias", b, dt, 1, eb, err))) ||
        (st = ref_check(ctx, n, "output", y, dt, 4, ey, err)))
        return st;
    const void *xp = x->data, *wp = w->data, *bp = b ? b->data : NULL;
    void *yp = y->data;
    /* the f32 call has a constant dtype, so the compiler drops the
     * per-element dtype switch from that copy of the loops */
    if (dt == MGE_F32)
        conv_loops(MGE_F32, &q, xp, wp, bp, yp);
    else
        conv_loops(dt, &q, xp, wp, bp, yp);
    return MGE_OK;
}

void mge_ref_register_conv(mge_backend *b)
{
    REF_EACH_FLOAT(dt)
        b->k[MGE_OP_CONV2D][dt].run = conv2d_float;
}
