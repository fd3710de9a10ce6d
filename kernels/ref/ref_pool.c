/* ref_pool.c — maxpool2d, avgpool2d and global_avgpool on NCHW, with
 * PyTorch's rules: max pads with -inf (padding never wins) and has
 * dilation; average windows are clipped to input+pad for the
 * count_include_pad divisor and to the input for the other one; ceil_mode
 * sizes come from mge_conv_out_dim. Float dtypes; maxpool also i8, u8, qs8. */
#include "ref.h"

#include <math.h>

typedef ref_pool_geom pool_geom;

/* Attributes and shapes; checks x and the output against them. */
static mge_status geom(const mge_kctx *ctx, const mge_node *n, const mge_tensor *x, const mge_tensor *y, pool_geom *g,
                       mge_error *err)
{
    mge_status st = ref_pool_attrs(ctx, n, n->op == MGE_OP_MAXPOOL2D, g, err);
    if (st)
        return st;
    if (x->ndim != 4)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x has rank %d: expected 4 [N,C,H,W]", ref_opname(ctx, n),
                             x->ndim);
    int ceil_mode = (int)mge_node_int(n, MGE_KEY_ceil_mode, 0);
    g->N = x->dims[0];
    g->C = x->dims[1];
    g->H = x->dims[2];
    g->W = x->dims[3];
    g->OH = mge_conv_out_dim(g->H, g->k[0], g->s[0], g->p[0], g->d[0], ceil_mode);
    g->OW = mge_conv_out_dim(g->W, g->k[1], g->s[1], g->p[1], g->d[1], ceil_mode);
    int64_t ey[4] = {g->N, g->C, g->OH, g->OW};
    st = ref_check_data(ctx, n, "x", x, err);
    return st ? st : ref_check(ctx, n, "output", y, x->dtype, 4, ey, err);
}

/* maxpool takes i8, u8 and qs8 too: their values are exact in a double,
 * and max commutes with a quantized tensor's positive scale, so qs8 is
 * pooled on its integers (the output keeps the input's scale). */
static double pool_ld(mge_dtype dt, const void *p, int64_t i)
{
    if (dt == MGE_I8 || dt == MGE_QS8)
        return ((const int8_t *)p)[i];
    if (dt == MGE_U8)
        return ((const uint8_t *)p)[i];
    return ref_ld(dt, p, i);
}

static void pool_st(mge_dtype dt, void *p, int64_t i, double v)
{
    if (dt == MGE_I8 || dt == MGE_QS8)
        ((int8_t *)p)[i] = (int8_t)v;
    else if (dt == MGE_U8)
        ((uint8_t *)p)[i] = (uint8_t)v;
    else
        ref_st(dt, p, i, v);
}

/* Max over the window's real input positions; NaN wins, as in PyTorch.
 * A window with no real position (only when pad is large) gives -inf, or
 * the type's minimum for integers. */
static mge_status maxpool_any(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                              mge_error *err)
{
    pool_geom g;
    mge_dtype dt = in[0]->dtype;
    mge_status st = geom(ctx, n, in[0], out[0], &g, err);
    if (st)
        return st;
    if (!mge_dtype_is_float(dt) && dt != MGE_I8 && dt != MGE_U8 && dt != MGE_QS8)
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "maxpool2d: no reference kernel for %s", mge_dtype_name(dt));
    double lowest = dt == MGE_I8 || dt == MGE_QS8 ? INT8_MIN : dt == MGE_U8 ? 0 : -INFINITY;
    const void *x = in[0]->data;
    void *y = out[0]->data;
    for (int64_t nc = 0; nc < g.N * g.C; nc++)
        for (int64_t oh = 0; oh < g.OH; oh++)
            for (int64_t ow = 0; ow < g.OW; ow++) {
                double m = lowest;
                for (int64_t kh = 0; kh < g.k[0]; kh++) {
                    int64_t ih = oh * g.s[0] - g.p[0] + kh * g.d[0];
                    if (ih < 0 || ih >= g.H)
                        continue;
                    for (int64_t kw = 0; kw < g.k[1]; kw++) {
                        int64_t iw = ow * g.s[1] - g.p[1] + kw * g.d[1];
                        if (iw < 0 || iw >= g.W)
                            continue;
                        double v = pool_ld(dt, x, (nc * g.H + ih) * g.W + iw);
                        if (v > m || isnan(v))
                            m = v;
                    }
                }
                pool_st(dt, y, (nc * g.OH + oh) * g.OW + ow, m);
            }
    return MGE_OK;
}

static mge_status avgpool_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                mge_tensor *const *out, mge_error *err)
{
    pool_geom g;
    mge_dtype dt = in[0]->dtype;
    mge_status st = geom(ctx, n, in[0], out[0], &g, err);
    if (st)
        return st;
    if (!mge_dtype_is_float(dt))
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "avgpool2d: no reference kernel for %s", mge_dtype_name(dt));
    int incl = (int)mge_node_int(n, MGE_KEY_count_include_pad, 1);
    const void *x = in[0]->data;
    void *y = out[0]->data;
    for (int64_t nc = 0; nc < g.N * g.C; nc++)
        for (int64_t oh = 0; oh < g.OH; oh++)
            for (int64_t ow = 0; ow < g.OW; ow++) {
                int64_t h0, h1, w0, w1, div = ref_avg_window(&g, oh, ow, incl, &h0, &h1, &w0, &w1);
                double sum = 0;
                for (int64_t ih = h0; ih < h1; ih++)
                    for (int64_t iw = w0; iw < w1; iw++)
                        sum += ref_ld(dt, x, (nc * g.H + ih) * g.W + iw);
                ref_st(dt, y, (nc * g.OH + oh) * g.OW + ow, div > 0 ? sum / (double)div : NAN);
            }
    return MGE_OK;
}

static mge_status global_avgpool_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                       mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *x = in[0];
    mge_dtype dt = x->dtype;
    mge_status st = ref_check_data(ctx, n, "x", x, err);
    if (st)
        return st;
    if (!mge_dtype_is_float(dt))
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "global_avgpool: no reference kernel for %s",
                             mge_dtype_name(dt));
    if (x->ndim != 4)
        return mge_error_set(err, MGE_ERR_SHAPE, "global_avgpool: x has rank %d: expected 4 [N,C,H,W]", x->ndim);
    int64_t ey[4] = {x->dims[0], x->dims[1], 1, 1}, S = x->dims[2] * x->dims[3];
    if ((st = ref_check(ctx, n, "output", out[0], dt, 4, ey, err)))
        return st;
    for (int64_t nc = 0; nc < x->dims[0] * x->dims[1]; nc++) {
        double sum = 0;
        for (int64_t j = 0; j < S; j++)
            sum += ref_ld(dt, x->data, nc * S + j);
        ref_st(dt, out[0]->data, nc, S > 0 ? sum / (double)S : NAN);
    }
    return MGE_OK;
}

void mge_ref_register_pool(mge_backend *b)
{
    REF_EACH_FLOAT(dt) {
        b->k[MGE_OP_MAXPOOL2D][dt].run = maxpool_any;
        b->k[MGE_OP_AVGPOOL2D][dt].run = avgpool_float;
        b->k[MGE_OP_GLOBAL_AVGPOOL][dt].run = global_avgpool_float;
    }
    b->k[MGE_OP_MAXPOOL2D][MGE_I8].run = maxpool_any;
    b->k[MGE_OP_MAXPOOL2D][MGE_U8].run = maxpool_any;
    b->k[MGE_OP_MAXPOOL2D][MGE_QS8].run = maxpool_any;
}
