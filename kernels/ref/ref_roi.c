/* ref_roi.c — the reference kernel of roi_align (float dtypes):
 * torchvision's roi_align / ONNX RoiAlign. Each output bin averages (or,
 * pooling=max, takes the largest of) sampling_ratio^2 bilinear samples
 * (adaptive: ceil(roi size / bins) per dim); samples more than a pixel
 * outside read 0. Coordinates and sums in double. roi_align_grad
 * scatters dy back along the same samples. */
#include "ref.h"

#include <stdlib.h>

/* More samples per bin than this is a roi no one means (a far coordinate):
 * refused rather than looped over. */
#define ROI_MAX_SAMPLES (1 << 20)

/* The four corners (plane offsets) and weights of the sample at (sy, sx);
 * all weights 0 when it is more than a pixel outside. */
static void corners(double sy, double sx, int64_t H, int64_t W, int64_t *at, double *w)
{
    at[0] = at[1] = at[2] = at[3] = 0;
    w[0] = w[1] = w[2] = w[3] = 0;
    if (H < 1 || W < 1 || sy < -1.0 || sy > (double)H || sx < -1.0 || sx > (double)W)
        return; /* an empty plane has no corners to read */
    double yy = sy > 0 ? sy : 0, xx = sx > 0 ? sx : 0;
    int64_t y0 = (int64_t)yy, x0 = (int64_t)xx, y1, x1;
    if (y0 >= H - 1)
        y0 = y1 = H - 1, yy = (double)y0;
    else
        y1 = y0 + 1;
    if (x0 >= W - 1)
        x0 = x1 = W - 1, xx = (double)x0;
    else
        x1 = x0 + 1;
    double ly = yy - (double)y0, lx = xx - (double)x0;
    w[0] = (1 - ly) * (1 - lx), w[1] = (1 - ly) * lx, w[2] = ly * (1 - lx), w[3] = ly * lx;
    at[0] = y0 * W + x0, at[1] = y0 * W + x1, at[2] = y1 * W + x0, at[3] = y1 * W + x1;
}

/* One roi's geometry: start (x, y), bin sizes, samples per bin. */
typedef struct roi_geom {
    double x0, y0, bh, bw, gh, gw, count;
    int64_t nh, nw, b;
} roi_geom;

static mge_status roi_geometry(const mge_kctx *ctx, const mge_node *n, const mge_tensor *rois, const mge_tensor *bi,
                               int64_t r, int64_t N, int64_t OH, int64_t OW, roi_geom *G, mge_error *err)
{
    const char *op = ref_opname(ctx, n);
    int aligned = (int)mge_node_int(n, MGE_KEY_aligned, 0);
    int64_t sr = mge_node_int(n, MGE_KEY_sampling_ratio, 0);
    double scale = mge_node_float(n, MGE_KEY_spatial_scale, 1), off = aligned ? 0.5 : 0;
    int64_t b = bi->dtype == MGE_I64 ? ((const int64_t *)bi->data)[r] : ((const int32_t *)bi->data)[r];
    if (b < 0 || b >= N)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: batch_indices[%lld] = %lld: expected 0..%lld", op,
                             (long long)r, (long long)b, (long long)(N - 1));
    double c[4];
    for (int k = 0; k < 4; k++)
        if (!isfinite(c[k] = ref_ld(rois->dtype, rois->data, r * 4 + k) * scale - off))
            return mge_error_set(err, MGE_ERR_INVALID, "%s: roi %lld has a coordinate that is not finite", op,
                                 (long long)r);
    double rw = c[2] - c[0], rh = c[3] - c[1];
    if (!aligned) /* the legacy mode makes every roi at least 1x1 */
        rw = rw > 1 ? rw : 1, rh = rh > 1 ? rh : 1;
    G->b = b, G->x0 = c[0], G->y0 = c[1];
    G->bh = rh / (double)OH, G->bw = rw / (double)OW;
    G->gh = sr > 0 ? (double)sr : ceil(rh / (double)OH);
    G->gw = sr > 0 ? (double)sr : ceil(rw / (double)OW);
    if (G->gh * G->gw > ROI_MAX_SAMPLES)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: roi %lld needs %.0f samples per bin (at most %d)", op,
                             (long long)r, G->gh * G->gw, ROI_MAX_SAMPLES);
    G->nh = G->gh > 0 ? (int64_t)G->gh : 0, G->nw = G->gw > 0 ? (int64_t)G->gw : 0;
    G->count = G->gh * G->gw >= 1 ? G->gh * G->gw : 1;
    return MGE_OK;
}

static void sample_pos(const roi_geom *G, int64_t ph, int64_t pw, int64_t iy, int64_t ix, double *sy, double *sx)
{
    *sy = G->y0 + (double)ph * G->bh + ((double)iy + 0.5) * G->bh / G->gh;
    *sx = G->x0 + (double)pw * G->bw + ((double)ix + 0.5) * G->bw / G->gw;
}

static mge_status check_all(const mge_kctx *ctx, const mge_node *n, const mge_tensor *x, const mge_tensor *rois,
                            const mge_tensor *bi, const mge_tensor *y, const char *yn, mge_error *err)
{
    if (x->ndim != 4 || !mge_dtype_is_float(x->dtype) || rois->ndim != 2 || bi->ndim != 1)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: expected x[N,C,H,W], rois[R,4], batch_indices[R]",
                             ref_opname(ctx, n));
    int64_t R = rois->dims[0];
    int64_t rd[2] = {R, 4}, yd[4] = {R, x->dims[1], mge_node_ints(n, MGE_KEY_output_size, 0, 1),
                                     mge_node_ints(n, MGE_KEY_output_size, 1, 1)};
    mge_status st;
    if ((st = ref_check(ctx, n, "x", x, x->dtype, 4, x->dims, err)) ||
        (st = ref_check(ctx, n, "rois", rois, x->dtype, 2, rd, err)) ||
        (st = ref_check(ctx, n, "batch_indices", bi, bi->dtype, 1, &R, err)) ||
        (st = ref_check(ctx, n, yn, y, x->dtype, 4, yd, err)))
        return st;
    if (bi->dtype != MGE_I64 && bi->dtype != MGE_I32)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: batch_indices must be i64 or i32", ref_opname(ctx, n));
    return MGE_OK;
}

/* pooling=max: the sample's value (the largest weighted corner) and which corner. */
static double corner_max(const double *v, const double *w, int *arg)
{
    int a = 0;
    for (int k = 1; k < 4; k++)
        if (w[k] * v[k] > w[a] * v[a])
            a = k;
    *arg = a;
    return w[a] * v[a];
}

static mge_status roi_align_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                  mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *x = in[0], *rois = in[1], *bi = in[2];
    mge_tensor *y = out[0];
    mge_status st = check_all(ctx, n, x, rois, bi, y, "output", err);
    if (st)
        return st;
    mge_dtype dt = x->dtype;
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3], R = rois->dims[0], OH = y->dims[2],
            OW = y->dims[3];
    int pmax = mge_node_int(n, MGE_KEY_pooling, 0) == 1;
    for (int64_t r = 0; r < R; r++) {
        roi_geom G;
        if ((st = roi_geometry(ctx, n, rois, bi, r, N, OH, OW, &G, err)))
            return st;
        for (int64_t ch = 0; ch < C; ch++) {
            int64_t base = (G.b * C + ch) * H * W;
            for (int64_t ph = 0; ph < OH; ph++)
                for (int64_t pw = 0; pw < OW; pw++) {
                    double acc = 0;
                    int first = 1;
                    for (int64_t iy = 0; iy < G.nh; iy++)
                        for (int64_t ix = 0; ix < G.nw; ix++) {
                            double sy, sx, w[4], v[4];
                            int64_t at[4];
                            sample_pos(&G, ph, pw, iy, ix, &sy, &sx);
                            corners(sy, sx, H, W, at, w);
                            for (int k = 0; k < 4; k++)
                                v[k] = ref_ld(dt, x->data, base + at[k]);
                            int a;
                            double s = pmax ? corner_max(v, w, &a) : w[0] * v[0] + w[1] * v[1] + w[2] * v[2] + w[3] * v[3];
                            if (!pmax)
                                acc += s;
                            else if (first || s > acc)
                                acc = s;
                            first = 0;
                        }
                    ref_st(dt, y->data, ((r * C + ch) * OH + ph) * OW + pw, pmax ? acc : acc / G.count);
                }
        }
    }
    return MGE_OK;
}

/* roi_align_grad(dy, x, rois, batch_indices) -> dx: avg spreads dy/count
 * over every sample's corners by their weights; max gives dy to the
 * winning sample's winning corner (times its weight), the first on ties. */
static mge_status roi_align_grad_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                       mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *dy = in[0], *x = in[1], *rois = in[2], *bi = in[3];
    mge_tensor *dx = out[0];
    mge_status st = check_all(ctx, n, x, rois, bi, dy, "dy", err);
    if (st || (st = ref_check(ctx, n, "dx", dx, x->dtype, 4, x->dims, err)))
        return st;
    mge_dtype dt = x->dtype;
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3], R = rois->dims[0], OH = dy->dims[2],
            OW = dy->dims[3], nx = N * C * H * W;
    int pmax = mge_node_int(n, MGE_KEY_pooling, 0) == 1;
    double *acc = calloc((size_t)(nx > 0 ? nx : 1), sizeof *acc);
    if (!acc)
        return mge_error_set(err, MGE_ERR_NOMEM, "%s: out of memory", ref_opname(ctx, n));
    for (int64_t r = 0; r < R && !st; r++) {
        roi_geom G;
        if ((st = roi_geometry(ctx, n, rois, bi, r, N, OH, OW, &G, err)))
            break;
        for (int64_t ch = 0; ch < C; ch++) {
            int64_t base = (G.b * C + ch) * H * W;
            for (int64_t ph = 0; ph < OH; ph++)
                for (int64_t pw = 0; pw < OW; pw++) {
                    double g = ref_ld(dt, dy->data, ((r * C + ch) * OH + ph) * OW + pw), best = 0, bw = 0;
                    int64_t bat = -1;
                    for (int64_t iy = 0; iy < G.nh; iy++)
                        for (int64_t ix = 0; ix < G.nw; ix++) {
                            double sy, sx, w[4], v[4];
                            int64_t at[4];
                            sample_pos(&G, ph, pw, iy, ix, &sy, &sx);
                            corners(sy, sx, H, W, at, w);
                            if (!pmax) {
                                for (int k = 0; k < 4; k++)
                                    acc[base + at[k]] += g * w[k] / G.count;
                                continue;
                            }
                            for (int k = 0; k < 4; k++)
                                v[k] = ref_ld(dt, x->data, base + at[k]);
                            int a;
                            double s = corner_max(v, w, &a);
                            if (bat < 0 || s > best)
                                best = s, bat = base + at[a], bw = w[a];
                        }
                    if (pmax && bat >= 0)
                        acc[bat] += g * bw;
                }
        }
    }
    for (int64_t i = 0; !st && i < nx; i++)
        ref_st(dt, dx->data, i, acc[i]);
    free(acc);
    return st;
}

void mge_ref_register_roi(mge_backend *b)
{
    REF_EACH_FLOAT(dt) {
        b->k[MGE_OP_ROI_ALIGN][dt].run = roi_align_float;
        b->k[MGE_OP_ROI_ALIGN_GRAD][dt].run = roi_align_grad_float;
    }
}
