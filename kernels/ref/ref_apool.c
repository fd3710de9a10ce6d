/* ref_apool.c — adaptive average and max pooling (1-D and 2-D) and their
 * gradients, over the last one or two dims of x; bins as PyTorch
 * (kernels/apool_bins.h). f32, f16, bf16; sums in double.
 *
 * max: the bin's first maximum, or its last NaN (PyTorch's rule: a NaN
 * replaces whatever came before); the gradient goes to that element. The
 * average's gradient gathers: input element (ih, iw) takes dy / count from
 * every bin that covers it (a run of consecutive bins on each axis). */
#include "ref.h"

#include "apool_bins.h"

typedef struct apool_geom {
    int nsp;
    int64_t P, H, W, oh, ow;
} apool_geom;

static int fwd_of(int op)
{
    switch (op) {
    case MGE_OP_ADAPTIVE_AVGPOOL2D_GRAD: return MGE_OP_ADAPTIVE_AVGPOOL2D;
    case MGE_OP_ADAPTIVE_MAXPOOL2D_GRAD: return MGE_OP_ADAPTIVE_MAXPOOL2D;
    case MGE_OP_ADAPTIVE_AVGPOOL1D_GRAD: return MGE_OP_ADAPTIVE_AVGPOOL1D;
    case MGE_OP_ADAPTIVE_MAXPOOL1D_GRAD: return MGE_OP_ADAPTIVE_MAXPOOL1D;
    }
    return op;
}

/* x's geometry and the pooled tensor's expected dims (ey) from the node. */
static mge_status geom(const mge_kctx *ctx, const mge_node *n, const mge_tensor *x, apool_geom *g, int64_t *ey,
                       mge_error *err)
{
    int f = fwd_of(n->op);
    g->nsp = f == MGE_OP_ADAPTIVE_AVGPOOL2D || f == MGE_OP_ADAPTIVE_MAXPOOL2D ? 2 : 1;
    if (x->ndim < g->nsp + 1 || x->ndim > g->nsp + 2)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x has rank %d", ref_opname(ctx, n), x->ndim);
    mge_apool_dims(g->nsp, x->ndim, x->dims, &g->P, &g->H, &g->W);
    g->oh = g->nsp == 2 ? mge_node_ints(n, MGE_KEY_output_size, 0, 0) : 1;
    g->ow = mge_node_ints(n, MGE_KEY_output_size, 1, 0);
    if (g->oh < 1 || g->ow < 1 || g->H < 1 || g->W < 1 || g->oh > (1 << 30) || g->ow > (1 << 30) ||
        g->H > ((int64_t)1 << 62) / (g->oh + 1) || g->W > ((int64_t)1 << 62) / (g->ow + 1))
        return mge_error_set(err, MGE_ERR_INVALID, "%s: output_size or input dims out of range", ref_opname(ctx, n));
    for (int i = 0; i < x->ndim; i++)
        ey[i] = x->dims[i];
    if (g->nsp == 2)
        ey[x->ndim - 2] = g->oh;
    ey[x->ndim - 1] = g->ow;
    return MGE_OK;
}

/* The flat index (in the plane) of bin (i, j)'s max; its value in *v. */
static int64_t bin_argmax(mge_dtype dt, const void *xp, int64_t base, const apool_geom *g, int64_t i, int64_t j,
                          double *v)
{
    int64_t h0 = mge_apool_start(i, g->H, g->oh), h1 = mge_apool_end(i, g->H, g->oh);
    int64_t w0 = mge_apool_start(j, g->W, g->ow), w1 = mge_apool_end(j, g->W, g->ow);
    int64_t best = h0 * g->W + w0;
    double m = -INFINITY;
    for (int64_t h = h0; h < h1; h++)
        for (int64_t w = w0; w < w1; w++) {
            double e = ref_ld(dt, xp, base + h * g->W + w);
            if (e > m || isnan(e)) {
                m = e;
                best = h * g->W + w;
            }
        }
    *v = m;
    return best;
}

static mge_status apool_fwd(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                            mge_error *err)
{
    const mge_tensor *x = in[0];
    apool_geom g;
    int64_t ey[MGE_MAX_DIMS];
    mge_dtype dt = x->dtype;
    mge_status st = geom(ctx, n, x, &g, ey, err);
    if (st || (st = ref_check(ctx, n, "x", x, dt, x->ndim, x->dims, err)) ||
        (st = ref_check(ctx, n, "output", out[0], dt, x->ndim, ey, err)))
        return st;
    int avg = n->op == MGE_OP_ADAPTIVE_AVGPOOL2D || n->op == MGE_OP_ADAPTIVE_AVGPOOL1D;
    const void *xp = x->data;
    void *yp = out[0]->data;
    for (int64_t p = 0; p < g.P; p++)
        for (int64_t i = 0; i < g.oh; i++)
            for (int64_t j = 0; j < g.ow; j++) {
                int64_t base = p * g.H * g.W, o = (p * g.oh + i) * g.ow + j;
                double v;
                if (avg) {
                    int64_t h0 = mge_apool_start(i, g.H, g.oh), h1 = mge_apool_end(i, g.H, g.oh);
                    int64_t w0 = mge_apool_start(j, g.W, g.ow), w1 = mge_apool_end(j, g.W, g.ow);
                    double s = 0;
                    for (int64_t h = h0; h < h1; h++)
                        for (int64_t w = w0; w < w1; w++)
                            s += ref_ld(dt, xp, base + h * g.W + w);
                    v = s / (double)((h1 - h0) * (w1 - w0));
                } else {
                    bin_argmax(dt, xp, base, &g, i, j, &v);
                }
                ref_st(dt, yp, o, v);
            }
    return MGE_OK;
}

static mge_status apool_grad(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                             mge_error *err)
{
    const mge_tensor *dy = in[0], *x = in[1];
    apool_geom g;
    int64_t ey[MGE_MAX_DIMS];
    mge_dtype dt = dy->dtype;
    mge_status st = geom(ctx, n, x, &g, ey, err);
    if (st || (st = ref_check(ctx, n, "dy", dy, dt, x->ndim, ey, err)) ||
        (st = ref_check(ctx, n, "x", x, dt, x->ndim, x->dims, err)) ||
        (st = ref_check(ctx, n, "output", out[0], dt, x->ndim, x->dims, err)))
        return st;
    int avg = fwd_of(n->op) == MGE_OP_ADAPTIVE_AVGPOOL2D || fwd_of(n->op) == MGE_OP_ADAPTIVE_AVGPOOL1D;
    const void *dyp = dy->data, *xp = x->data;
    void *rp = out[0]->data;
    if (!avg) {
        /* dy to each bin's argmax, bins in order */
        for (int64_t k = 0; k < g.P * g.H * g.W; k++)
            ref_st(dt, rp, k, 0.0);
        for (int64_t p = 0; p < g.P; p++)
            for (int64_t i = 0; i < g.oh; i++)
                for (int64_t j = 0; j < g.ow; j++) {
                    double v;
                    int64_t base = p * g.H * g.W, a = base + bin_argmax(dt, xp, base, &g, i, j, &v);
                    ref_st(dt, rp, a, ref_ld(dt, rp, a) + ref_ld(dt, dyp, (p * g.oh + i) * g.ow + j));
                }
        return MGE_OK;
    }
    for (int64_t p = 0; p < g.P; p++) {
        int64_t ilo = 0;
        for (int64_t h = 0; h < g.H; h++) {
            while (mge_apool_end(ilo, g.H, g.oh) <= h)
                ilo++;
            int64_t jlo = 0;
            for (int64_t w = 0; w < g.W; w++) {
                while (mge_apool_end(jlo, g.W, g.ow) <= w)
                    jlo++;
                double s = 0;
                for (int64_t i = ilo; i < g.oh && mge_apool_start(i, g.H, g.oh) <= h; i++) {
                    int64_t ch = mge_apool_end(i, g.H, g.oh) - mge_apool_start(i, g.H, g.oh);
                    for (int64_t j = jlo; j < g.ow && mge_apool_start(j, g.W, g.ow) <= w; j++) {
                        int64_t cw = mge_apool_end(j, g.W, g.ow) - mge_apool_start(j, g.W, g.ow);
                        s += ref_ld(dt, dyp, (p * g.oh + i) * g.ow + j) / (double)(ch * cw);
                    }
                }
                ref_st(dt, rp, (p * g.H + h) * g.W + w, s);
            }
        }
    }
    return MGE_OK;
}

void mge_ref_register_apool(mge_backend *b)
{
    REF_EACH_FLOAT(dt) {
        b->k[MGE_OP_ADAPTIVE_AVGPOOL2D][dt].run = apool_fwd;
        b->k[MGE_OP_ADAPTIVE_MAXPOOL2D][dt].run = apool_fwd;
        b->k[MGE_OP_ADAPTIVE_AVGPOOL1D][dt].run = apool_fwd;
        b->k[MGE_OP_ADAPTIVE_MAXPOOL1D][dt].run = apool_fwd;
        b->k[MGE_OP_ADAPTIVE_AVGPOOL2D_GRAD][dt].run = apool_grad;
        b->k[MGE_OP_ADAPTIVE_MAXPOOL2D_GRAD][dt].run = apool_grad;
        b->k[MGE_OP_ADAPTIVE_AVGPOOL1D_GRAD][dt].run = apool_grad;
        b->k[MGE_OP_ADAPTIVE_MAXPOOL1D_GRAD][dt].run = apool_grad;
    }
}
