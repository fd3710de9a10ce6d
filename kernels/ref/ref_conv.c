/* ref_conv.c — conv2d as the direct seven-loop convolution (NCHW, weight
 * OIHW), with stride, pad, dilation, groups and an optional bias; double
 * accumulation so it can judge the fast kernels. f32, f16 and bf16. */
#include "ref.h"

/* An INTS attribute's h (idx 0) and w (idx 1) value; one value serves both. */
static void pair(const mge_node *n, int key, int64_t def, int64_t v[2])
{
    v[0] = mge_node_ints(n, key, 0, def);
    v[1] = mge_node_ints(n, key, 1, def);
}

/* Shapes of one call, checked by the caller. */
typedef struct conv_geom {
    int64_t N, C, H, W, O, KH, KW, OH, OW, g, s[2], p[2], d[2];
} conv_geom;

/* y[n,o,oh,ow] = bias[o] + sum over c in o's group, kh, kw of
 * x[n,c,oh*s-p+kh*d, ow*s-p+kw*d] * w[o,c,kh,kw], taps in the padding skipped. */
static inline __attribute__((always_inline)) void conv_loops(mge_dtype dt, const conv_geom *q, const void *xp,
                                                             const void *wp, const void *bp, void *yp)
{
    int64_t N = q->N, C = q->C, H = q->H, W = q->W, O = q->O, KH = q->KH, KW = q->KW, OH = q->OH, OW = q->OW;
    const int64_t *s = q->s, *p = q->p, *d = q->d;
    int64_t g = q->g;
    int64_t cg = C / g, og = O / g;
    for (int64_t ni = 0; ni < N; ni++)
        for (int64_t o = 0; o < O; o++) {
            int64_t grp = o / og;
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    double acc = bp ? ref_ld(dt, bp, o) : 0.0;
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
                    ref_st(dt, yp, ((ni * O + o) * OH + oh) * OW + ow, acc);
                }
        }
}

static mge_status conv2d_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                               mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *x = in[0], *w = in[1], *b = n->nin >= 3 ? in[2] : NULL;
    mge_tensor *y = out[0];
    int64_t s[2], p[2], d[2];
    pair(n, MGE_KEY_stride, 1, s);
    pair(n, MGE_KEY_pad, 0, p);
    pair(n, MGE_KEY_dilation, 1, d);
    int64_t g = mge_node_int(n, MGE_KEY_groups, 1);
    if (s[0] < 1 || s[1] < 1 || p[0] < 0 || p[1] < 0 || d[0] < 1 || d[1] < 1 || g < 1)
        return mge_error_set(err, MGE_ERR_INVALID, "conv2d: invalid stride, pad, dilation or groups");
    mge_status st;
    if (x->ndim != 4 || w->ndim != 4)
        return mge_error_set(err, MGE_ERR_SHAPE, "conv2d: x and weight must be rank 4 (got %d and %d)", x->ndim,
                             w->ndim);
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
    int64_t O = w->dims[0], KH = w->dims[2], KW = w->dims[3];
    if (C % g || O % g || C / g != w->dims[1])
        return mge_error_set(err, MGE_ERR_SHAPE,
                             "conv2d: x has %lld channels, weight is [%lld,%lld,...]: does not fit groups=%lld",
                             (long long)C, (long long)O, (long long)w->dims[1], (long long)g);
    int64_t OH = mge_conv_out_dim(H, KH, s[0], p[0], d[0], 0), OW = mge_conv_out_dim(W, KW, s[1], p[1], d[1], 0);
    int64_t ey[4] = {N, O, OH, OW}, eb[1] = {O};
    mge_dtype dt = x->dtype;
    if (!mge_dtype_is_float(dt))
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "conv2d: no reference kernel for %s", mge_dtype_name(dt));
    if ((st = ref_check(n, "x", x, dt, 4, x->dims, err)) || (st = ref_check(n, "weight", w, dt, 4, w->dims, err)) ||
        (b && (st = ref_check(n, "bias", b, dt, 1, eb, err))) || (st = ref_check(n, "output", y, dt, 4, ey, err)))
        return st;
    const void *xp = x->data, *wp = w->data, *bp = b ? b->data : NULL;
    void *yp = y->data;
    conv_geom cgm = {N, C, H, W, O, KH, KW, OH, OW, g, {s[0], s[1]}, {p[0], p[1]}, {d[0], d[1]}};
    /* the f32 call has a constant dtype, so the compiler drops the
     * per-element dtype switch from that copy of the loops */
    if (dt == MGE_F32)
        conv_loops(MGE_F32, &cgm, xp, wp, bp, yp);
    else
        conv_loops(dt, &cgm, xp, wp, bp, yp);
    return MGE_OK;
}

void mge_ref_register_conv(mge_backend *b)
{
    REF_EACH_FLOAT(dt)
        b->k[MGE_OP_CONV2D][dt].run = conv2d_float;
}
