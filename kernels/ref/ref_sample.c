/* ref_sample.c — reference kernels of grid_sample and grid_sample_grad
 * (float dtypes), F.grid_sample's arithmetic: source coordinates in float
 * as PyTorch computes them (so nearest rounds the same ties), weights and
 * sums in double.
 *
 * Each output point gets its taps (plane offset, weight, the weight's
 * derivative along each source coordinate); the forward sums them, the
 * gradient scatters dy into dx and gathers d/dgrid through the coordinate
 * transform's derivative (0 where border or reflection clips). */
#include "ref.h"

#include <stdlib.h>

typedef struct gs_taps {
    int n;
    int64_t at[16];
    double w[16], dw[3][16];
} gs_taps;

typedef struct gs_geom {
    int k, mode, pad, align;
    int64_t size[3];   /* x's spatial dims, outermost first (D, H, W or H, W) */
} gs_geom;

/* A coordinate beyond this is outside any plane (and safe to convert). */
#define GS_FAR 1e15f

static float clip_c(float x, int64_t size, double *d)
{
    float lim = (float)(size - 1);
    if (!(x > 0)) {
        *d = 0;
        return x != x ? x : 0; /* NaN stays NaN: no taps */
    }
    if (x >= lim) {
        *d = 0;
        return lim;
    }
    return x;
}

/* Reflects x into [lo2/2, hi2/2] (twice the bounds, as PyTorch). */
static float reflect_c(float x, float lo2, float hi2, double *d)
{
    if (lo2 == hi2) {
        *d = 0;
        return 0;
    }
    float mn = lo2 / 2, span = (hi2 - lo2) / 2;
    x -= mn;
    double s = 1;
    if (x < 0)
        s = -1, x = -x;
    float extra = fmodf(x, span);
    int64_t flips = (int64_t)floorf(fminf(x / span, GS_FAR));
    if (flips % 2 == 0) {
        *d = s;
        return extra + mn;
    }
    *d = -s;
    return span - extra + mn;
}

/* The source coordinate of normalized g along a dim of size, and its
 * derivative in g; pad applies the padding mode (bicubic pads its taps). */
static float source(float g, int64_t size, int align, int pad, double *d)
{
    float x;
    if (align) {
        x = ((g + 1.f) / 2) * (float)(size - 1);
        *d = (double)(size - 1) / 2;
    } else {
        x = ((g + 1.f) * (float)size - 1) / 2;
        *d = (double)size / 2;
    }
    double e = 1;
    if (pad == MGE_PADMODE_BORDER) {
        x = clip_c(x, size, &e);
    } else if (pad == MGE_PADMODE_REFLECTION) {
        double e2 = 1;
        if (align)
            x = reflect_c(x, 0, 2.f * (float)(size - 1), &e);
        else
            x = reflect_c(x, -1, 2.f * (float)size - 1, &e);
        x = clip_c(x, size, &e2);
        e *= e2;
    }
    *d *= e;
    return x;
}

/* A bicubic tap's index along a dim (the padding mode applied to it), or
 * -1 outside. */
static int64_t cubic_tap(double i, int64_t size, int align, int pad)
{
    double e;
    float x = (float)i;
    if (pad == MGE_PADMODE_BORDER)
        x = clip_c(x, size, &e);
    else if (pad == MGE_PADMODE_REFLECTION) {
        x = align ? reflect_c(x, 0, 2.f * (float)(size - 1), &e) : reflect_c(x, -1, 2.f * (float)size - 1, &e);
        x = clip_c(x, size, &e);
    }
    if (!(x > -1 && x < (float)size))
        return -1;
    int64_t r = (int64_t)x;
    return r >= 0 && r < size ? r : -1;
}

/* The taps of the point whose normalized coordinates are g[0..k) (x, y[, z]:
 * innermost dim first); dmul[d] the derivative of source coordinate d. */
static void point_taps(const gs_geom *G, const double *g, gs_taps *t, double *dmul)
{
    int k = G->k;
    float c[3];
    for (int d = 0; d < k; d++)
        c[d] = source((float)g[k - 1 - d], G->size[d], G->align,
                      G->mode == MGE_MODE_BICUBIC ? MGE_PADMODE_ZEROS : G->pad, &dmul[d]);
    t->n = 0;
    for (int d = 0; d < k; d++)
        if (!(fabsf(c[d]) < GS_FAR))
            return; /* NaN or far away: nothing */
    if (G->mode == MGE_MODE_NEAREST) {
        int64_t at = 0;
        for (int d = 0; d < k; d++) {
            float r = nearbyintf(c[d]);
            if (r < 0 || r > (float)(G->size[d] - 1))
                return;
            at = at * G->size[d] + (int64_t)r;
        }
        t->n = 1;
        t->at[0] = at;
        t->w[0] = 1;
        for (int d = 0; d < k; d++)
            t->dw[d][0] = 0;
        return;
    }
    if (G->mode == MGE_MODE_BICUBIC) {
        double f[2], w[2][4], dw[2][4];
        int64_t idx[2][4];
        for (int d = 0; d < 2; d++) {
            f[d] = floor((double)c[d]);
            mge_cubic_weights((double)c[d] - f[d], -0.75, w[d], dw[d]);
            for (int i = 0; i < 4; i++)
                idx[d][i] = cubic_tap(f[d] - 1 + i, G->size[d], G->align, G->pad);
        }
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++) {
                if (idx[0][i] < 0 || idx[1][j] < 0)
                    continue;
                int m = t->n++;
                t->at[m] = idx[0][i] * G->size[1] + idx[1][j];
                t->w[m] = w[0][i] * w[1][j];
                t->dw[0][m] = dw[0][i] * w[1][j];
                t->dw[1][m] = w[0][i] * dw[1][j];
            }
        return;
    }
    /* bilinear / trilinear: 2^k corners */
    int64_t f[3];
    double fr[3];
    for (int d = 0; d < k; d++) {
        float fl = floorf(c[d]);
        f[d] = (int64_t)fl;
        fr[d] = (double)(c[d] - fl);
    }
    for (int b = 0; b < (1 << k); b++) {
        int64_t at = 0;
        int in = 1;
        double wd[3];
        for (int d = 0; d < k; d++) {
            int hi = (b >> (k - 1 - d)) & 1;
            int64_t i = f[d] + hi;
            in &= i >= 0 && i < G->size[d];
            at = at * G->size[d] + i;
            wd[d] = hi ? fr[d] : 1 - fr[d];
        }
        if (!in)
            continue;
        int m = t->n++;
        t->at[m] = at;
        double w = 1;
        for (int d = 0; d < k; d++)
            w *= wd[d];
        t->w[m] = w;
        for (int d = 0; d < k; d++) {
            double p = (b >> (k - 1 - d)) & 1 ? 1 : -1;
            for (int e = 0; e < k; e++)
                if (e != d)
                    p *= wd[e];
            t->dw[d][m] = p;
        }
    }
}

static mge_status setup(const mge_kctx *ctx, const mge_node *n, const mge_tensor *x, const mge_tensor *grid,
                        const mge_tensor *y, const char *yn, gs_geom *G, mge_error *err)
{
    mge_status st;
    if ((x->ndim != 4 && x->ndim != 5) || !mge_dtype_is_float(x->dtype))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: expected a float x of rank 4 or 5", ref_opname(ctx, n));
    int k = x->ndim - 2;
    int64_t gd[5] = {x->dims[0]}, yd[5] = {x->dims[0], x->dims[1]};
    for (int i = 1; i <= k; i++)
        gd[i] = grid->ndim == x->ndim ? grid->dims[i] : 0, yd[i + 1] = gd[i];
    gd[k + 1] = k;
    if ((st = ref_check(ctx, n, "x", x, x->dtype, x->ndim, x->dims, err)) ||
        (st = ref_check(ctx, n, "grid", grid, x->dtype, x->ndim, gd, err)) ||
        (st = ref_check(ctx, n, yn, y, x->dtype, x->ndim, yd, err)))
        return st;
    G->k = k;
    G->mode = (int)mge_node_int(n, MGE_KEY_mode, MGE_MODE_BILINEAR);
    G->pad = (int)mge_node_int(n, MGE_KEY_padding_mode, MGE_PADMODE_ZEROS);
    G->align = (int)mge_node_int(n, MGE_KEY_align_corners, 0);
    if (G->mode != MGE_MODE_NEAREST && G->mode != MGE_MODE_BILINEAR && (G->mode != MGE_MODE_BICUBIC || k != 2))
        return mge_error_set(err, MGE_ERR_INVALID, "%s: unsupported mode for rank %d", ref_opname(ctx, n), x->ndim);
    for (int d = 0; d < k; d++)
        G->size[d] = x->dims[2 + d];
    return MGE_OK;
}

static mge_status grid_sample_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                    mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *x = in[0], *grid = in[1];
    mge_tensor *y = out[0];
    gs_geom G;
    mge_status st = setup(ctx, n, x, grid, y, "output", &G, err);
    if (st)
        return st;
    mge_dtype dt = x->dtype;
    int64_t N = x->dims[0], C = x->dims[1], S = 1, P = 1;
    for (int d = 0; d < G.k; d++)
        S *= x->dims[2 + d], P *= grid->dims[1 + d];
    for (int64_t b = 0; b < N; b++)
        for (int64_t p = 0; p < P; p++) {
            double g[3], dmul[3];
            for (int d = 0; d < G.k; d++)
                g[d] = ref_ld(dt, grid->data, (b * P + p) * G.k + d);
            gs_taps t;
            point_taps(&G, g, &t, dmul);
            for (int64_t ch = 0; ch < C; ch++) {
                double v = 0;
                for (int m = 0; m < t.n; m++)
                    v += t.w[m] * ref_ld(dt, x->data, (b * C + ch) * S + t.at[m]);
                ref_st(dt, y->data, (b * C + ch) * P + p, v);
            }
        }
    return MGE_OK;
}

/* grid_sample_grad(dy, x, grid) -> dx, dgrid. */
static mge_status grid_sample_grad_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                         mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *dy = in[0], *x = in[1], *grid = in[2];
    mge_tensor *dx = out[0], *dgrid = out[1];
    gs_geom G;
    mge_status st = setup(ctx, n, x, grid, dy, "dy", &G, err);
    if (st || (st = ref_check(ctx, n, "dx", dx, x->dtype, x->ndim, x->dims, err)) ||
        (st = ref_check(ctx, n, "dgrid", dgrid, x->dtype, grid->ndim, grid->dims, err)))
        return st;
    mge_dtype dt = x->dtype;
    int64_t N = x->dims[0], C = x->dims[1], S = 1, P = 1;
    for (int d = 0; d < G.k; d++)
        S *= x->dims[2 + d], P *= grid->dims[1 + d];
    int64_t nx = N * C * S;
    double *acc = calloc((size_t)(nx > 0 ? nx : 1), sizeof *acc);
    if (!acc)
        return mge_error_set(err, MGE_ERR_NOMEM, "%s: out of memory", ref_opname(ctx, n));
    for (int64_t b = 0; b < N; b++)
        for (int64_t p = 0; p < P; p++) {
            double g[3], dmul[3], gs[3] = {0, 0, 0};
            for (int d = 0; d < G.k; d++)
                g[d] = ref_ld(dt, grid->data, (b * P + p) * G.k + d);
            gs_taps t;
            point_taps(&G, g, &t, dmul);
            for (int64_t ch = 0; ch < C; ch++) {
                double gy = ref_ld(dt, dy->data, (b * C + ch) * P + p);
                int64_t o = (b * C + ch) * S;
                for (int m = 0; m < t.n; m++) {
                    acc[o + t.at[m]] += t.w[m] * gy;
                    double xv = ref_ld(dt, x->data, o + t.at[m]);
                    for (int d = 0; d < G.k; d++)
                        gs[d] += t.dw[d][m] * xv * gy;
                }
            }
            /* grid component j moves source dim k-1-j */
            for (int d = 0; d < G.k; d++)
                ref_st(dt, dgrid->data, (b * P + p) * G.k + (G.k - 1 - d), gs[d] * dmul[d]);
        }
    for (int64_t i = 0; i < nx; i++)
        ref_st(dt, dx->data, i, acc[i]);
    free(acc);
    return MGE_OK;
}

void mge_ref_register_sample(mge_backend *b)
{
    REF_EACH_FLOAT(dt) {
        b->k[MGE_OP_GRID_SAMPLE][dt].run = grid_sample_float;
        b->k[MGE_OP_GRID_SAMPLE_GRAD][dt].run = grid_sample_grad_float;
    }
}
