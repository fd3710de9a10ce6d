/* ref_grad_pool.c — reference kernels of the pool gradients (dy, x) -> dx
 * like x, NCHW, float dtypes, PyTorch's rules:
 *   maxpool2d_grad: each window's dy goes to its first maximal real input
 *     element in scan order (a later NaN takes over, as in the forward);
 *   avgpool2d_grad: each window's dy / divisor goes to every real input
 *     element of the window, the divisor being the forward's
 *     (count_include_pad: the window clipped to input+pad; else to the input);
 *   global_avgpool_grad: dy / (H*W) everywhere.
 * One plane at a time, summed in a double plane (the workspace). */
#include "ref.h"

#include <math.h>
#include <string.h>

typedef struct pg_geom {
    ref_pool_geom g;
    int incl;
} pg_geom;

static mge_status pg_setup(const mge_kctx *ctx, const mge_node *n, const mge_tensor *dy, const mge_tensor *x,
                           const mge_tensor *dx, pg_geom *pg, mge_error *err)
{
    int mx = n->op == MGE_OP_MAXPOOL2D_GRAD, glob = n->op == MGE_OP_GLOBAL_AVGPOOL_GRAD;
    ref_pool_geom *g = &pg->g;
    mge_status st = glob ? MGE_OK : ref_pool_attrs(ctx, n, mx, g, err);
    if (st)
        return st;
    pg->incl = (int)mge_node_int(n, MGE_KEY_count_include_pad, 1);
    mge_dtype dt = dy->dtype;
    if (!mge_dtype_is_float(dt))
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: no reference kernel for %s", ref_opname(ctx, n),
                             mge_dtype_name(dt));
    if (x->ndim != 4)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x has rank %d: expected 4 [N,C,H,W]", ref_opname(ctx, n),
                             x->ndim);
    g->N = x->dims[0], g->C = x->dims[1], g->H = x->dims[2], g->W = x->dims[3];
    if (glob) {
        g->OH = g->OW = 1;
    } else {
        int ceil_mode = (int)mge_node_int(n, MGE_KEY_ceil_mode, 0);
        g->OH = mge_conv_out_dim(g->H, g->k[0], g->s[0], g->p[0], g->d[0], ceil_mode);
        g->OW = mge_conv_out_dim(g->W, g->k[1], g->s[1], g->p[1], g->d[1], ceil_mode);
    }
    int64_t ey[4] = {g->N, g->C, g->OH, g->OW};
    if ((st = ref_check(ctx, n, "dy", dy, dt, 4, ey, err)) ||
        (st = ref_check(ctx, n, "result", dx, dt, 4, x->dims, err)))
        return st;
    /* maxpool reads x's values; the average pools its shape only */
    return mx ? ref_check(ctx, n, "x", x, dt, 4, x->dims, err) : MGE_OK;
}

static size_t pg_ws(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, int threads)
{
    (void)n, (void)out, (void)threads;
    const mge_tensor *x = in[1];
    return x->ndim == 4 ? sizeof(double) * (size_t)(x->dims[2] * x->dims[3]) : 0;
}

static mge_status pool_grad_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                  mge_tensor *const *out, mge_error *err)
{
    pg_geom pg = {0};
    const mge_tensor *dy = in[0], *x = in[1];
    mge_status st = pg_setup(ctx, n, dy, x, out[0], &pg, err);
    if (st)
        return st;
    const ref_pool_geom g = pg.g;
    mge_dtype dt = dy->dtype;
    int64_t HW = g.H * g.W;
    if (n->op == MGE_OP_GLOBAL_AVGPOOL_GRAD) {
        for (int64_t nc = 0; nc < g.N * g.C; nc++) {
            double v = HW > 0 ? ref_ld(dt, dy->data, nc) / (double)HW : NAN;
            for (int64_t j = 0; j < HW; j++)
                ref_st(dt, out[0]->data, nc * HW + j, v);
        }
        return MGE_OK;
    }
    if (HW == 0)
        return MGE_OK;
    if (!ctx || !ctx->ws || ctx->ws_size < sizeof(double) * (size_t)HW)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: workspace of %zu bytes, need %zu", ref_opname(ctx, n),
                             ctx ? ctx->ws_size : 0, sizeof(double) * (size_t)HW);
    double *acc = ctx->ws;
    int mx = n->op == MGE_OP_MAXPOOL2D_GRAD;
    for (int64_t nc = 0; nc < g.N * g.C; nc++) {
        for (int64_t j = 0; j < HW; j++)
            acc[j] = 0;
        for (int64_t oh = 0; oh < g.OH; oh++)
            for (int64_t ow = 0; ow < g.OW; ow++) {
                double gy = ref_ld(dt, dy->data, (nc * g.OH + oh) * g.OW + ow);
                if (mx) {
                    int64_t best = -1;
                    double m = -INFINITY;
                    for (int64_t kh = 0; kh < g.k[0]; kh++) {
                        int64_t ih = oh * g.s[0] - g.p[0] + kh * g.d[0];
                        if (ih < 0 || ih >= g.H)
                            continue;
                        for (int64_t kw = 0; kw < g.k[1]; kw++) {
                            int64_t iw = ow * g.s[1] - g.p[1] + kw * g.d[1];
                            if (iw < 0 || iw >= g.W)
                                continue;
                            double v = ref_ld(dt, x->data, nc * HW + ih * g.W + iw);
                            if (best < 0 || v > m || isnan(v))
                                best = ih * g.W + iw, m = v;
                        }
                    }
                    if (best >= 0)
                        acc[best] += gy;
                    continue;
                }
                int64_t h0, h1, w0, w1, div = ref_avg_window(&g, oh, ow, pg.incl, &h0, &h1, &w0, &w1);
                if (div <= 0)
                    continue;
                double v = gy / (double)div;
                for (int64_t ih = h0; ih < h1; ih++)
                    for (int64_t iw = w0; iw < w1; iw++)
                        acc[ih * g.W + iw] += v;
            }
        for (int64_t j = 0; j < HW; j++)
            ref_st(dt, out[0]->data, nc * HW + j, acc[j]);
    }
    return MGE_OK;
}

void mge_ref_register_grad_pool(mge_backend *b)
{
    REF_EACH_FLOAT(dt) {
        b->k[MGE_OP_MAXPOOL2D_GRAD][dt] = (mge_kernel){.run = pool_grad_float, .ws = pg_ws};
        b->k[MGE_OP_AVGPOOL2D_GRAD][dt] = (mge_kernel){.run = pool_grad_float, .ws = pg_ws};
        b->k[MGE_OP_GLOBAL_AVGPOOL_GRAD][dt] = (mge_kernel){.run = pool_grad_float, .ws = NULL};
    }
}
