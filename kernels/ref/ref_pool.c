/* ref_pool.c — maxpool2d, avgpool2d and global_avgpool on NCHW, with
 * PyTorch's rules: max pads with -inf (padding never wins) and has
 * dilation; average windows are clipped to input+pad for the
 * count_include_pad divisor and to the input for the other one; ceil_mode
 * sizes come from mge_conv_out_dim. */
#include "ref.h"

#include <math.h>

typedef struct pool_geom {
    int64_t N, C, H, W, OH, OW, k[2], s[2], p[2], d[2];
} pool_geom;

/* Attributes and shapes; checks x and the output against them. */
static mge_status geom(const mge_node *n, const mge_tensor *x, const mge_tensor *y, pool_geom *g, mge_error *err)
{
    for (int i = 0; i < 2; i++) {
        g->k[i] = mge_node_ints(n, MGE_KEY_kernel, i, 1);
        g->s[i] = mge_node_ints(n, MGE_KEY_stride, i, g->k[i]); /* absent: stride = kernel */
        g->p[i] = mge_node_ints(n, MGE_KEY_pad, i, 0);
        g->d[i] = n->op == MGE_OP_MAXPOOL2D ? mge_node_ints(n, MGE_KEY_dilation, i, 1) : 1;
        if (g->k[i] < 1 || g->s[i] < 1 || g->p[i] < 0 || g->d[i] < 1)
            return mge_error_set(err, MGE_ERR_INVALID, "%s: invalid kernel, stride, pad or dilation", ref_opname(n));
    }
    if (x->ndim != 4)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x has rank %d: expected 4 [N,C,H,W]", ref_opname(n), x->ndim);
    int ceil_mode = (int)mge_node_int(n, MGE_KEY_ceil_mode, 0);
    g->N = x->dims[0];
    g->C = x->dims[1];
    g->H = x->dims[2];
    g->W = x->dims[3];
    g->OH = mge_conv_out_dim(g->H, g->k[0], g->s[0], g->p[0], g->d[0], ceil_mode);
    g->OW = mge_conv_out_dim(g->W, g->k[1], g->s[1], g->p[1], g->d[1], ceil_mode);
    int64_t ey[4] = {g->N, g->C, g->OH, g->OW};
    mge_status st = ref_check_data(n, "x", x, err);
    return st ? st : ref_check(n, "output", y, x->dtype, 4, ey, err);
}

/* Max over the window's real input positions; NaN wins, as in PyTorch.
 * A window with no real position (only when pad is large) gives -inf or
 * the type's minimum. */
#define MAXPOOL(NAME, T, DT, LOWEST, ISNAN)                                                                              \
    static mge_status NAME(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,    \
                           mge_error *err)                                                                           \
    {                                                                                                                \
        pool_geom g;                                                                                                 \
        mge_status st = geom(n, in[0], out[0], &g, err);                                                             \
        if (st || (st = ref_check_dtype(n, "x", in[0], DT, err)))                                                    \
            return st;                                                                                               \
        const T *x = in[0]->data;                                                                                    \
        T *y = out[0]->data;                                                                                         \
        for (int64_t nc = 0; nc < g.N * g.C; nc++)                                                                   \
            for (int64_t oh = 0; oh < g.OH; oh++)                                                                    \
                for (int64_t ow = 0; ow < g.OW; ow++) {                                                              \
                    T m = LOWEST;                                                                                    \
                    for (int64_t kh = 0; kh < g.k[0]; kh++) {                                                        \
                        int64_t ih = oh * g.s[0] - g.p[0] + kh * g.d[0];                                             \
                        if (ih < 0 || ih >= g.H)                                                                     \
                            continue;                                                                                \
                        for (int64_t kw = 0; kw < g.k[1]; kw++) {                                                    \
                            int64_t iw = ow * g.s[1] - g.p[1] + kw * g.d[1];                                         \
                            if (iw < 0 || iw >= g.W)                                                                 \
                                continue;                                                                            \
                            T v = x[(nc * g.H + ih) * g.W + iw];                                                     \
                            if (v > m || ISNAN(v))                                                                   \
                                m = v;                                                                               \
                        }                                                                                            \
                    }                                                                                                \
                    y[(nc * g.OH + oh) * g.OW + ow] = m;                                                             \
                }                                                                                                    \
        return MGE_OK;                                                                                               \
    }

#define NOT_NAN(v) 0
MAXPOOL(maxpool_f32, float, MGE_F32, -INFINITY, isnan)
MAXPOOL(maxpool_i8, int8_t, MGE_I8, INT8_MIN, NOT_NAN)
MAXPOOL(maxpool_u8, uint8_t, MGE_U8, 0, NOT_NAN)

static mge_status avgpool_f32(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                              mge_error *err)
{
    pool_geom g;
    mge_status st = geom(n, in[0], out[0], &g, err);
    if (st || (st = ref_check_dtype(n, "x", in[0], MGE_F32, err)))
        return st;
    int incl = (int)mge_node_int(n, MGE_KEY_count_include_pad, 1);
    const float *x = in[0]->data;
    float *y = out[0]->data;
    for (int64_t nc = 0; nc < g.N * g.C; nc++)
        for (int64_t oh = 0; oh < g.OH; oh++)
            for (int64_t ow = 0; ow < g.OW; ow++) {
                /* the window clipped to the padded input, then to the input */
                int64_t h0 = oh * g.s[0] - g.p[0], w0 = ow * g.s[1] - g.p[1];
                int64_t h1 = h0 + g.k[0], w1 = w0 + g.k[1];
                if (h1 > g.H + g.p[0])
                    h1 = g.H + g.p[0];
                if (w1 > g.W + g.p[1])
                    w1 = g.W + g.p[1];
                int64_t padded = (h1 - h0) * (w1 - w0);
                if (h0 < 0)
                    h0 = 0;
                if (w0 < 0)
                    w0 = 0;
                if (h1 > g.H)
                    h1 = g.H;
                if (w1 > g.W)
                    w1 = g.W;
                double sum = 0;
                for (int64_t ih = h0; ih < h1; ih++)
                    for (int64_t iw = w0; iw < w1; iw++)
                        sum += x[(nc * g.H + ih) * g.W + iw];
                int64_t div = incl ? padded : (h1 > h0 && w1 > w0 ? (h1 - h0) * (w1 - w0) : 0);
                y[(nc * g.OH + oh) * g.OW + ow] = (float)(div > 0 ? sum / (double)div : NAN);
            }
    return MGE_OK;
}

static mge_status global_avgpool_f32(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                     mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *x = in[0];
    mge_status st = ref_check_dtype(n, "x", x, MGE_F32, err);
    if (st)
        return st;
    if (x->ndim != 4)
        return mge_error_set(err, MGE_ERR_SHAPE, "global_avgpool: x has rank %d: expected 4 [N,C,H,W]", x->ndim);
    int64_t ey[4] = {x->dims[0], x->dims[1], 1, 1}, S = x->dims[2] * x->dims[3];
    if ((st = ref_check(n, "output", out[0], MGE_F32, 4, ey, err)))
        return st;
    const float *xp = x->data;
    float *yp = out[0]->data;
    for (int64_t nc = 0; nc < x->dims[0] * x->dims[1]; nc++) {
        double sum = 0;
        for (int64_t j = 0; j < S; j++)
            sum += xp[nc * S + j];
        yp[nc] = (float)(S > 0 ? sum / (double)S : NAN);
    }
    return MGE_OK;
}

void mge_ref_register_pool(mge_backend *b)
{
    b->k[MGE_OP_MAXPOOL2D][MGE_F32].run = maxpool_f32;
    b->k[MGE_OP_MAXPOOL2D][MGE_I8].run = maxpool_i8;
    b->k[MGE_OP_MAXPOOL2D][MGE_U8].run = maxpool_u8;
    b->k[MGE_OP_AVGPOOL2D][MGE_F32].run = avgpool_f32;
    b->k[MGE_OP_GLOBAL_AVGPOOL][MGE_F32].run = global_avgpool_f32;
}
