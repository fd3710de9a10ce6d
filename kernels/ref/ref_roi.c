/* ref_roi.c — the reference kernel of roi_align (float dtypes):
 * torchvision's roi_align / ONNX RoiAlign. Each output bin averages (or,
 * pooling=max, takes the largest of) sampling_ratio^2 bilinear samples
 * (adaptive: ceil(roi size / bins) per dim); samples more than a pixel
 * outside read 0. Coordinates and sums in double. */
#include "ref.h"

/* More samples per bin than this is a roi no one means (a far coordinate):
 * refused rather than looped over. */
#define ROI_MAX_SAMPLES (1 << 20)

static double bilinear_max(const double *v, const double *w, int pooling_max)
{
    if (!pooling_max)
        return w[0] * v[0] + w[1] * v[1] + w[2] * v[2] + w[3] * v[3];
    double m = w[0] * v[0];
    for (int k = 1; k < 4; k++)
        if (w[k] * v[k] > m)
            m = w[k] * v[k];
    return m;
}

static mge_status roi_align_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                  mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *x = in[0], *rois = in[1], *bi = in[2];
    mge_tensor *y = out[0];
    mge_status st;
    const char *op = ref_opname(ctx, n);
    if (x->ndim != 4 || !mge_dtype_is_float(x->dtype) || rois->ndim != 2 || bi->ndim != 1)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: expected x[N,C,H,W], rois[R,4], batch_indices[R]", op);
    mge_dtype dt = x->dtype;
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3], R = rois->dims[0];
    int64_t OH = mge_node_ints(n, MGE_KEY_output_size, 0, 1), OW = mge_node_ints(n, MGE_KEY_output_size, 1, 1);
    int64_t rd[2] = {R, 4}, yd[4] = {R, C, OH, OW};
    if ((st = ref_check(ctx, n, "x", x, dt, 4, x->dims, err)) || (st = ref_check(ctx, n, "rois", rois, dt, 2, rd, err)) ||
        (st = ref_check(ctx, n, "batch_indices", bi, bi->dtype, 1, &R, err)) ||
        (st = ref_check(ctx, n, "output", y, dt, 4, yd, err)))
        return st;
    if (bi->dtype != MGE_I64 && bi->dtype != MGE_I32)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: batch_indices must be i64 or i32", op);
    int pmax = mge_node_int(n, MGE_KEY_pooling, 0) == 1, aligned = (int)mge_node_int(n, MGE_KEY_aligned, 0);
    int64_t sr = mge_node_int(n, MGE_KEY_sampling_ratio, 0);
    double scale = mge_node_float(n, MGE_KEY_spatial_scale, 1), off = aligned ? 0.5 : 0;
    for (int64_t r = 0; r < R; r++) {
        int64_t b = bi->dtype == MGE_I64 ? ((const int64_t *)bi->data)[r] : ((const int32_t *)bi->data)[r];
        if (b < 0 || b >= N)
            return mge_error_set(err, MGE_ERR_INVALID, "%s: batch_indices[%lld] = %lld: expected 0..%lld", op,
                                 (long long)r, (long long)b, (long long)(N - 1));
        double c[4];
        for (int k = 0; k < 4; k++)
            if (!isfinite(c[k] = ref_ld(dt, rois->data, r * 4 + k) * scale - off))
                return mge_error_set(err, MGE_ERR_INVALID, "%s: roi %lld has a coordinate that is not finite", op,
                                     (long long)r);
        double rw = c[2] - c[0], rh = c[3] - c[1];
        if (!aligned) /* the legacy mode makes every roi at least 1x1 */
            rw = rw > 1 ? rw : 1, rh = rh > 1 ? rh : 1;
        double bh = rh / (double)OH, bw = rw / (double)OW;
        double gh = sr > 0 ? (double)sr : ceil(rh / (double)OH), gw = sr > 0 ? (double)sr : ceil(rw / (double)OW);
        if (gh * gw > ROI_MAX_SAMPLES)
            return mge_error_set(err, MGE_ERR_INVALID, "%s: roi %lld needs %.0f samples per bin (at most %d)", op,
                                 (long long)r, gh * gw, ROI_MAX_SAMPLES);
        int64_t nh = gh > 0 ? (int64_t)gh : 0, nw = gw > 0 ? (int64_t)gw : 0;
        double count = gh * gw >= 1 ? gh * gw : 1;
        for (int64_t ch = 0; ch < C; ch++) {
            int64_t base = (b * C + ch) * H * W;
            for (int64_t ph = 0; ph < OH; ph++)
                for (int64_t pw = 0; pw < OW; pw++) {
                    double acc = 0;
                    int first = 1;
                    for (int64_t iy = 0; iy < nh; iy++) {
                        double sy = c[1] + (double)ph * bh + ((double)iy + 0.5) * bh / gh;
                        for (int64_t ix = 0; ix < nw; ix++) {
                            double sx = c[0] + (double)pw * bw + ((double)ix + 0.5) * bw / gw;
                            double v[4] = {0, 0, 0, 0}, w[4] = {0, 0, 0, 0};
                            if (!(sy < -1.0 || sy > (double)H || sx < -1.0 || sx > (double)W)) {
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
                                v[0] = ref_ld(dt, x->data, base + y0 * W + x0);
                                v[1] = ref_ld(dt, x->data, base + y0 * W + x1);
                                v[2] = ref_ld(dt, x->data, base + y1 * W + x0);
                                v[3] = ref_ld(dt, x->data, base + y1 * W + x1);
                            }
                            double s = bilinear_max(v, w, pmax);
                            if (!pmax)
                                acc += s;
                            else if (first || s > acc)
                                acc = s;
                            first = 0;
                        }
                    }
                    ref_st(dt, y->data, ((r * C + ch) * OH + ph) * OW + pw, pmax ? acc : acc / count);
                }
        }
    }
    return MGE_OK;
}

void mge_ref_register_roi(mge_backend *b)
{
    REF_EACH_FLOAT(dt) {
        b->k[MGE_OP_ROI_ALIGN][dt].run = roi_align_float;
    }
}
