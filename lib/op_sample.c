/* op_sample.c — grid_sample and grid_sample_grad (F.grid_sample): shape
 * inference and FLOPs.
 *
 * grid_sample(x[N,C,H,W], grid[N,OH,OW,2]) -> [N,C,OH,OW]; the 3-D form
 * x[N,C,D,H,W], grid[N,OD,OH,OW,3] -> [N,C,OD,OH,OW] (nearest and
 * bilinear only, as PyTorch). grid_sample_grad(dy, x, grid) -> dx like x,
 * dgrid like grid.
 * FLOPs per output element: nearest 0; bilinear 3 per tap (weight and
 * multiply-add) with 2^k taps; bicubic 16 taps of 2 and 8 weights of 7;
 * the gradient twice that.
 * roi_align and deform_conv2d (torchvision's ops, ONNX RoiAlign and
 * DeformConv): see lib/ops.def. */
#include "internal.h"

#include <math.h>
#include <stdio.h>

static mge_status check(const mge_node *n, const char *op, const mge_tdesc *x, const mge_tdesc *grid, mge_error *err)
{
    char b1[96], b2[96];
    if (x->ndim != 4 && x->ndim != 5)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is %s: expected rank 4 [N,C,H,W] or 5 [N,C,D,H,W]", op,
                             mge_tdesc_str(x, b1, sizeof b1));
    if (!mge_dtype_is_float(x->dtype))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is %s: expected a float dtype (f32, f16, bf16)", op,
                             mge_tdesc_str(x, b1, sizeof b1));
    int k = x->ndim - 2, ok = grid->dtype == x->dtype && grid->ndim == x->ndim && grid->dims[0] == x->dims[0] &&
                              grid->dims[x->ndim - 1] == k;
    if (!ok)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: grid is %s for x %s: expected %s[%s,%s%d] (x's dtype, its N, "
                             "the last dim %d)", op, mge_tdesc_str(grid, b1, sizeof b1),
                             mge_tdesc_str(x, b2, sizeof b2), mge_dtype_name(x->dtype), "N",
                             k == 2 ? "OH,OW," : "OD,OH,OW,", k, k);
    int64_t mode = mge_node_int(n, MGE_KEY_mode, MGE_MODE_BILINEAR);
    if (mode != MGE_MODE_NEAREST && mode != MGE_MODE_BILINEAR && mode != MGE_MODE_BICUBIC) {
        const char *w = mge_key_enum_word(MGE_KEY_mode, mode);
        return mge_error_set(err, MGE_ERR_INVALID, "%s: mode=%s: expected nearest, bilinear or bicubic", op,
                             w ? w : "?");
    }
    if (mode == MGE_MODE_BICUBIC && k != 2)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: mode=bicubic needs a 4-D x [N,C,H,W] (x is %s)", op,
                             mge_tdesc_str(x, b1, sizeof b1));
    return MGE_OK;
}

/* roi_align(x, rois, batch_indices) -> [R,C,oh,ow] */
static mge_status roi_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    const mge_tdesc *x = &in[0], *r = &in[1], *b = &in[2];
    char b1[96], b2[96];
    if (x->ndim != 4 || !mge_dtype_is_float(x->dtype))
        return mge_error_set(err, MGE_ERR_SHAPE, "roi_align: x is %s: expected a float [N,C,H,W]",
                             mge_tdesc_str(x, b1, sizeof b1));
    if (r->dtype != x->dtype || r->ndim != 2 || r->dims[1] != 4)
        return mge_error_set(err, MGE_ERR_SHAPE, "roi_align: rois is %s: expected %s[R,4] (x1, y1, x2, y2)",
                             mge_tdesc_str(r, b1, sizeof b1), mge_dtype_name(x->dtype));
    if ((b->dtype != MGE_I64 && b->dtype != MGE_I32) || b->ndim != 1 || b->dims[0] != r->dims[0])
        return mge_error_set(err, MGE_ERR_SHAPE, "roi_align: batch_indices is %s: expected i64[%s] or i32 (one per roi "
                             "of %s)", mge_tdesc_str(b, b1, sizeof b1), "R", mge_tdesc_str(r, b2, sizeof b2));
    const mge_attr *os = mge_node_attr(n, MGE_KEY_output_size);
    if (!os || os->n != 2 || os->i[0] < 1 || os->i[1] < 1)
        return mge_error_set(err, MGE_ERR_INVALID, "roi_align: output_size must be [oh,ow], each >= 1");
    double sc = mge_node_float(n, MGE_KEY_spatial_scale, 1);
    if (!(sc > 0) || !isfinite(sc))
        return mge_error_set(err, MGE_ERR_INVALID, "roi_align: spatial_scale=%g: expected > 0", sc);
    if (mge_node_int(n, MGE_KEY_sampling_ratio, 0) < 0)
        return mge_error_set(err, MGE_ERR_INVALID, "roi_align: sampling_ratio=%lld: expected >= 0 (0: adaptive)",
                             (long long)mge_node_int(n, MGE_KEY_sampling_ratio, 0));
    out[0] = *x;
    out[0].known = 0;
    out[0].dims[0] = r->dims[0];
    out[0].dims[2] = os->i[0];
    out[0].dims[3] = os->i[1];
    return MGE_OK;
}

/* deform_conv2d(x, weight, offset[, bias[, mask]]) -> [N,O,OH,OW] */
static mge_status deform_infer(const mge_node *n, const mge_tdesc *in, int nin, mge_tdesc *out, mge_error *err)
{
    const mge_tdesc *x = &in[0], *w = &in[1], *off = &in[2];
    char b1[96], b2[96];
    if (x->ndim != 4 || !mge_dtype_is_float(x->dtype))
        return mge_error_set(err, MGE_ERR_SHAPE, "deform_conv2d: x is %s: expected a float [N,C,H,W]",
                             mge_tdesc_str(x, b1, sizeof b1));
    int64_t G = mge_node_int(n, MGE_KEY_groups, 1), OG = mge_node_int(n, MGE_KEY_offset_groups, 1);
    if (G < 1 || OG < 1 || x->dims[1] % G || x->dims[1] % OG)
        return mge_error_set(err, MGE_ERR_INVALID, "deform_conv2d: groups=%lld and offset_groups=%lld must divide the "
                             "%lld channels", (long long)G, (long long)OG, (long long)x->dims[1]);
    if (w->dtype != x->dtype || w->ndim != 4 || w->dims[1] * G != x->dims[1] || w->dims[0] % G || w->dims[0] < 1)
        return mge_error_set(err, MGE_ERR_SHAPE, "deform_conv2d: weight is %s for x %s: expected [O,C/groups,kh,kw] "
                             "with groups=%lld dividing O", mge_tdesc_str(w, b1, sizeof b1),
                             mge_tdesc_str(x, b2, sizeof b2), (long long)G);
    int64_t o[2];
    for (int k = 0; k < 2; k++) {
        int64_t s = mge_node_ints(n, MGE_KEY_stride, k, 1), p = mge_node_ints(n, MGE_KEY_pad, k, 0),
                d = mge_node_ints(n, MGE_KEY_dilation, k, 1);
        if (s < 1 || p < 0 || d < 1)
            return mge_error_set(err, MGE_ERR_INVALID, "deform_conv2d: stride and dilation must be >= 1, pad >= 0");
        if ((o[k] = mge_conv_out_dim(x->dims[2 + k], w->dims[2 + k], s, p, d, 0)) < 1)
            return mge_error_set(err, MGE_ERR_SHAPE, "deform_conv2d: the kernel %s does not fit x %s",
                                 mge_tdesc_str(w, b1, sizeof b1), mge_tdesc_str(x, b2, sizeof b2));
    }
    int64_t kk = w->dims[2] * w->dims[3];
    if (off->dtype != x->dtype || off->ndim != 4 || off->dims[0] != x->dims[0] || off->dims[1] != 2 * OG * kk ||
        off->dims[2] != o[0] || off->dims[3] != o[1])
        return mge_error_set(err, MGE_ERR_SHAPE, "deform_conv2d: offset is %s: expected %s[%lld,%lld,%lld,%lld]",
                             mge_tdesc_str(off, b1, sizeof b1), mge_dtype_name(x->dtype), (long long)x->dims[0],
                             (long long)(2 * OG * kk), (long long)o[0], (long long)o[1]);
    if (nin > 3) {
        const mge_tdesc *b = &in[3];
        if (b->dtype != x->dtype || b->ndim != 1 || b->dims[0] != w->dims[0])
            return mge_error_set(err, MGE_ERR_SHAPE, "deform_conv2d: bias is %s: expected %s[%lld]",
                                 mge_tdesc_str(b, b1, sizeof b1), mge_dtype_name(x->dtype), (long long)w->dims[0]);
    }
    if (nin > 4) {
        const mge_tdesc *m = &in[4];
        if (m->dtype != x->dtype || m->ndim != 4 || m->dims[0] != x->dims[0] || m->dims[1] != OG * kk ||
            m->dims[2] != o[0] || m->dims[3] != o[1])
            return mge_error_set(err, MGE_ERR_SHAPE, "deform_conv2d: mask is %s: expected %s[%lld,%lld,%lld,%lld]",
                                 mge_tdesc_str(m, b1, sizeof b1), mge_dtype_name(x->dtype), (long long)x->dims[0],
                                 (long long)(OG * kk), (long long)o[0], (long long)o[1]);
    }
    out[0] = *x;
    out[0].known = 0;
    out[0].dims[1] = w->dims[0];
    out[0].dims[2] = o[0];
    out[0].dims[3] = o[1];
    return MGE_OK;
}

mge_status mge_sample_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    if (n->op == MGE_OP_ROI_ALIGN)
        return roi_infer(n, in, out, err);
    if (n->op == MGE_OP_ROI_ALIGN_GRAD) {
        mge_tdesc y;
        mge_status s = roi_infer(n, in + 1, &y, err);
        if (s)
            return s;
        const mge_tdesc *dy = &in[0];
        int ok = dy->dtype == y.dtype && dy->ndim == 4;
        for (int i = 0; ok && i < 4; i++)
            ok = dy->dims[i] == y.dims[i];
        if (!ok) {
            char b1[96], b2[96];
            return mge_error_set(err, MGE_ERR_SHAPE, "roi_align_grad: dy is %s: expected %s",
                                 mge_tdesc_str(dy, b1, sizeof b1), mge_tdesc_str(&y, b2, sizeof b2));
        }
        out[0] = in[1];
        out[0].known = 0;
        return MGE_OK;
    }
    if (n->op == MGE_OP_DEFORM_CONV2D)
        return deform_infer(n, in, n->nin, out, err);
    if (n->op == MGE_OP_DEFORM_CONV2D_GRAD) {
        mge_tdesc y;
        mge_status s = deform_infer(n, in + 1, n->nin - 1, &y, err);
        if (s)
            return s;
        const mge_tdesc *dy = &in[0];
        int ok = dy->dtype == y.dtype && dy->ndim == 4;
        for (int i = 0; ok && i < 4; i++)
            ok = dy->dims[i] == y.dims[i];
        if (!ok) {
            char b1[96], b2[96];
            return mge_error_set(err, MGE_ERR_SHAPE, "deform_conv2d_grad: dy is %s: expected %s",
                                 mge_tdesc_str(dy, b1, sizeof b1), mge_tdesc_str(&y, b2, sizeof b2));
        }
        for (int k = 0; k < 3; k++)
            out[k] = in[1 + k], out[k].known = 0;
        out[3] = y;
        out[3].dims[1] = mge_node_int(n, MGE_KEY_offset_groups, 1) * in[2].dims[2] * in[2].dims[3];
        return MGE_OK;
    }
    int grad = n->op == MGE_OP_GRID_SAMPLE_GRAD;
    const char *op = grad ? "grid_sample_grad" : "grid_sample";
    const mge_tdesc *x = &in[grad ? 1 : 0], *grid = &in[grad ? 2 : 1];
    mge_status s = check(n, op, x, grid, err);
    if (s)
        return s;
    mge_tdesc y = *x;
    y.known = 0;
    for (int i = 2; i < x->ndim; i++)
        y.dims[i] = grid->dims[i - 1];
    if (!grad) {
        out[0] = y;
        return MGE_OK;
    }
    const mge_tdesc *dy = &in[0];
    int ok = dy->dtype == y.dtype && dy->ndim == y.ndim;
    for (int i = 0; ok && i < y.ndim; i++)
        ok = dy->dims[i] == y.dims[i];
    if (!ok) {
        char b1[96], b2[96];
        return mge_error_set(err, MGE_ERR_SHAPE, "grid_sample_grad: dy is %s: expected %s",
                             mge_tdesc_str(dy, b1, sizeof b1), mge_tdesc_str(&y, b2, sizeof b2));
    }
    out[0] = *x;
    out[0].known = 0;
    out[1] = *grid;
    out[1].known = 0;
    return MGE_OK;
}

double mge_sample_flops(const mge_node *n, const mge_tdesc *in, const mge_tdesc *out)
{
    if (n->op == MGE_OP_ROI_ALIGN || n->op == MGE_OP_ROI_ALIGN_GRAD) {
        /* 4 corners of a multiply-add per sample; the adaptive count is data-dependent: 4 samples assumed */
        int64_t sr = mge_node_int(n, MGE_KEY_sampling_ratio, 0);
        return 8.0 * (double)(sr > 0 ? sr * sr : 4) * mge_tdesc_count(n->op == MGE_OP_ROI_ALIGN ? &out[0] : &in[0]);
    }
    if (n->op == MGE_OP_DEFORM_CONV2D || n->op == MGE_OP_DEFORM_CONV2D_GRAD) {
        /* per output: C/groups*kh*kw taps of a bilinear sample (~10) and a
         * multiply-add; the gradient about three times that */
        int gr = n->op == MGE_OP_DEFORM_CONV2D_GRAD;
        const mge_tdesc *w = &in[gr ? 2 : 1];
        double taps = (double)w->dims[1] * (double)w->dims[2] * (double)w->dims[3];
        return (gr ? 36.0 : 12.0) * taps * mge_tdesc_count(gr ? &in[0] : &out[0]);
    }
    int grad = n->op == MGE_OP_GRID_SAMPLE_GRAD;
    const mge_tdesc *y = grad ? &in[0] : &out[0];
    int64_t mode = mge_node_int(n, MGE_KEY_mode, MGE_MODE_BILINEAR);
    double per = mode == MGE_MODE_NEAREST ? 0 : mode == MGE_MODE_BICUBIC ? 88 : 3.0 * (1 << (y->ndim - 2));
    return (grad ? 2 : 1) * per * mge_tdesc_count(y);
}
