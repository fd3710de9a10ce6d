/* onnx_ops_spatial.c — ONNX converters for the spatial sampling ops:
 * GridSample, RoiAlign and DeformConv (onto mge's grid_sample, roi_align
 * and deform_conv2d); CenterCropPad, AffineGrid and Col2Im composed of
 * existing ops (pad; matmul; conv_transpose2d) when their shape inputs
 * are known at import. */
#include "onnx.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- GridSample */

/* GridSample-16: mode bilinear|nearest|bicubic on 4-D input; 20: linear|
 * nearest|cubic on N-D (mge: 4-D and 5-D, cubic 4-D only). */
static mge_status conv_grid_sample(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x = mge_onnx_in(c, n, 0), grid = mge_onnx_in(c, n, 1);
    if (x < 0 || grid < 0)
        return mge_onnx_fail(c, n, "needs X and grid");
    const mge_value *xv = mge_onnx_value(c, x), *gv = mge_onnx_value(c, grid);
    if (!mge_dtype_is_float(xv->dtype))
        return mge_onnx_unsupported(c, n, "X of %s (mge samples float tensors)", mge_dtype_name(xv->dtype));
    if (!mge_dtype_is_float(gv->dtype))
        return mge_onnx_fail(c, n, "grid is %s: expected a float tensor", mge_dtype_name(gv->dtype));
    if (xv->ndim != 4 && !(c->opset >= 20 && xv->ndim == 5))
        return c->opset >= 20 && xv->ndim > 5
                   ? mge_onnx_unsupported(c, n, "a rank-%d X (mge samples 4-D and 5-D)", xv->ndim)
                   : mge_onnx_fail(c, n, "X has rank %d: expected 4%s", xv->ndim, c->opset >= 20 ? " or more" : "");
    if (gv->ndim != xv->ndim)
        return mge_onnx_fail(c, n, "grid has rank %d for X of rank %d", gv->ndim, xv->ndim);
    char mode[24], pad[24];
    int v20 = c->opset >= 20;
    mge_onnx_attr_s(n, "mode", v20 ? "linear" : "bilinear", mode, sizeof mode);
    mge_onnx_attr_s(n, "padding_mode", "zeros", pad, sizeof pad);
    int m = strcmp(mode, "nearest") == 0                  ? MGE_MODE_NEAREST
            : strcmp(mode, v20 ? "linear" : "bilinear") == 0 ? MGE_MODE_BILINEAR
            : strcmp(mode, v20 ? "cubic" : "bicubic") == 0   ? MGE_MODE_BICUBIC
                                                             : -1;
    if (m < 0)
        return mge_onnx_fail(c, n, "mode '%s': expected %s", mode,
                             v20 ? "linear, nearest or cubic" : "bilinear, nearest or bicubic");
    int p = strcmp(pad, "zeros") == 0    ? MGE_PADMODE_ZEROS
            : strcmp(pad, "border") == 0 ? MGE_PADMODE_BORDER
            : strcmp(pad, "reflection") == 0 ? MGE_PADMODE_REFLECTION
                                             : -1;
    if (p < 0)
        return mge_onnx_fail(c, n, "padding_mode '%s': expected zeros, border or reflection", pad);
    if (m == MGE_MODE_BICUBIC && xv->ndim != 4)
        return mge_onnx_unsupported(c, n, "cubic on a rank-%d X (mge's bicubic is 4-D)", xv->ndim);
    if (gv->dtype != xv->dtype) {
        mge_attr ca = mge_onnx_ai(MGE_KEY_dtype, xv->dtype);
        if ((grid = mge_onnx_emit_tmp(c, n, MGE_OP_CAST, 1, &grid, 1, &ca)) < 0)
            return c->err->code;
    }
    mge_attr a[3] = {mge_onnx_ai(MGE_KEY_mode, m), mge_onnx_ai(MGE_KEY_padding_mode, p),
                     mge_onnx_ab(MGE_KEY_align_corners, mge_onnx_attr_i(n, "align_corners", 0) != 0)};
    int in[2] = {x, grid};
    return mge_onnx_finish(c, n, MGE_OP_GRID_SAMPLE, 2, in, 3, a);
}

/* ---------------------------------------------------------------- RoiAlign */

/* RoiAlign-10: output_half_pixel coordinates; 16 adds
 * coordinate_transformation_mode, half_pixel by default. */
static mge_status conv_roi_align(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x = mge_onnx_in(c, n, 0), rois = mge_onnx_in(c, n, 1), bi = mge_onnx_in(c, n, 2);
    if (x < 0 || rois < 0 || bi < 0)
        return mge_onnx_fail(c, n, "needs X, rois and batch_indices");
    const mge_value *xv = mge_onnx_value(c, x), *rv = mge_onnx_value(c, rois);
    if (!mge_dtype_is_float(xv->dtype))
        return mge_onnx_unsupported(c, n, "X of %s (mge pools float tensors)", mge_dtype_name(xv->dtype));
    if (xv->ndim != 4)
        return mge_onnx_fail(c, n, "X has rank %d: expected 4 [N,C,H,W]", xv->ndim);
    if (!mge_dtype_is_float(rv->dtype))
        return mge_onnx_fail(c, n, "rois is %s: expected a float tensor", mge_dtype_name(rv->dtype));
    char mode[16], ctm[32];
    mge_onnx_attr_s(n, "mode", "avg", mode, sizeof mode);
    mge_onnx_attr_s(n, "coordinate_transformation_mode", c->opset >= 16 ? "half_pixel" : "output_half_pixel", ctm,
                    sizeof ctm);
    int pmax = strcmp(mode, "max") == 0;
    if (!pmax && strcmp(mode, "avg") != 0)
        return mge_onnx_fail(c, n, "mode '%s': expected avg or max", mode);
    int half = strcmp(ctm, "half_pixel") == 0;
    if (!half && strcmp(ctm, "output_half_pixel") != 0)
        return mge_onnx_fail(c, n, "coordinate_transformation_mode '%s': expected half_pixel or output_half_pixel",
                             ctm);
    int64_t os[2] = {mge_onnx_attr_i(n, "output_height", 1), mge_onnx_attr_i(n, "output_width", 1)};
    int64_t sr = mge_onnx_attr_i(n, "sampling_ratio", 0);
    double sc = mge_onnx_attr_f(n, "spatial_scale", 1.0);
    if (os[0] < 1 || os[1] < 1)
        return mge_onnx_fail(c, n, "output_height and output_width must be >= 1");
    if (sr < 0)
        return mge_onnx_fail(c, n, "sampling_ratio %lld: expected >= 0", (long long)sr);
    if (!(sc > 0))
        return mge_onnx_fail(c, n, "spatial_scale %g: expected > 0", sc);
    if (rv->dtype != xv->dtype) {
        mge_attr ca = mge_onnx_ai(MGE_KEY_dtype, xv->dtype);
        if ((rois = mge_onnx_emit_tmp(c, n, MGE_OP_CAST, 1, &rois, 1, &ca)) < 0)
            return c->err->code;
    }
    mge_attr a[5] = {mge_onnx_ais(MGE_KEY_output_size, 2, os), mge_onnx_ai(MGE_KEY_pooling, pmax),
                     mge_onnx_ai(MGE_KEY_sampling_ratio, sr), mge_onnx_af(MGE_KEY_spatial_scale, sc),
                     mge_onnx_ab(MGE_KEY_aligned, half)};
    int in[3] = {x, rois, bi};
    return mge_onnx_finish(c, n, MGE_OP_ROI_ALIGN, 3, in, 5, a);
}

/* ---------------------------------------------------------------- DeformConv */

/* DeformConv-19 on 2-D images (symmetric pads). */
static mge_status conv_deform(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x = mge_onnx_in(c, n, 0), w = mge_onnx_in(c, n, 1), off = mge_onnx_in(c, n, 2), b = mge_onnx_in(c, n, 3),
        m = mge_onnx_in(c, n, 4);
    if (x < 0 || w < 0 || off < 0)
        return mge_onnx_fail(c, n, "needs X, W and offset");
    const mge_value *xv = mge_onnx_value(c, x), *wv = mge_onnx_value(c, w);
    if (xv->dtype != MGE_F32)
        return mge_onnx_unsupported(c, n, "X of %s (mge's deform_conv2d here is f32)", mge_dtype_name(xv->dtype));
    if (xv->ndim != 4)
        return xv->ndim >= 3 ? mge_onnx_unsupported(c, n, "a rank-%d X (mge's deform_conv2d is 2-D)", xv->ndim)
                             : mge_onnx_fail(c, n, "X has rank %d", xv->ndim);
    if (wv->ndim != 4)
        return mge_onnx_fail(c, n, "W has rank %d: expected 4", wv->ndim);
    int64_t ks[2], st[2] = {1, 1}, dl[2] = {1, 1}, pads[4] = {0, 0, 0, 0};
    int nk = mge_onnx_attr_ints(n, "kernel_shape", ks, 2);
    if (nk >= 0 && (nk != 2 || ks[0] != wv->dims[2] || ks[1] != wv->dims[3]))
        return mge_onnx_fail(c, n, "kernel_shape does not match W's");
    if (mge_onnx_attr_ints(n, "strides", st, 2) == 1 || mge_onnx_attr_ints(n, "dilations", dl, 2) == 1)
        return mge_onnx_fail(c, n, "strides and dilations need 2 values");
    int np = mge_onnx_attr_ints(n, "pads", pads, 4);
    if (np >= 0 && np != 4)
        return mge_onnx_fail(c, n, "pads has %d values: expected 4", np);
    if (pads[0] != pads[2] || pads[1] != pads[3])
        return mge_onnx_unsupported(c, n, "asymmetric pads (mge's deform_conv2d pads both sides alike)");
    int64_t pd[2] = {pads[0], pads[1]};
    if (m >= 0 && b < 0) {
        /* mask without B: a zero bias fills the slot */
        int64_t o = wv->dims[0];
        if (o < 1 || o > (1 << 24))
            return mge_onnx_fail(c, n, "W has %lld output channels", (long long)o);
        float *z = calloc((size_t)o, sizeof *z);
        if (!z)
            return mge_error_set(c->err, MGE_ERR_NOMEM, "out of memory");
        b = mge_onnx_const_f32(c, n, 1, &o, z);
        free(z);
        if (b < 0)
            return c->err->code;
    }
    mge_attr a[5] = {mge_onnx_ais(MGE_KEY_stride, 2, st), mge_onnx_ais(MGE_KEY_pad, 2, pd),
                     mge_onnx_ais(MGE_KEY_dilation, 2, dl), mge_onnx_ai(MGE_KEY_groups, mge_onnx_attr_i(n, "group", 1)),
                     mge_onnx_ai(MGE_KEY_offset_groups, mge_onnx_attr_i(n, "offset_group", 1))};
    int in[5] = {x, w, off, b, m};
    return mge_onnx_finish(c, n, MGE_OP_DEFORM_CONV2D, m >= 0 ? 5 : b >= 0 ? 4 : 3, in, 5, a);
}

/* ---------------------------------------------------------------- CenterCropPad */

static int known_dim(int64_t d)
{
    return d >= 0 && !mge_dim_is_symbol(d);
}

/* CenterCropPad-18: one constant pad whose negative entries crop (mge's pad
 * crops too), the shape known at import: crops start at floor((dim-s)/2),
 * pads put floor((s-dim)/2) before. */
static mge_status conv_center_crop_pad(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x = mge_onnx_in(c, n, 0), sv = mge_onnx_in(c, n, 1);
    if (x < 0 || sv < 0)
        return mge_onnx_fail(c, n, "needs input_data and shape");
    const mge_value *xv = mge_onnx_value(c, x);
    int r = xv->ndim;
    int64_t axes[MGE_MAX_DIMS], shape[MGE_MAX_DIMS];
    int na = mge_onnx_attr_ints(n, "axes", axes, MGE_MAX_DIMS), ns;
    if (na < 0)
        for (na = 0; na < r; na++)
            axes[na] = na;
    mge_status st = mge_onnx_known_ints(c, n, sv, "shape", shape, MGE_MAX_DIMS, &ns);
    if (st)
        return st;
    if (ns != na)
        return mge_onnx_fail(c, n, "shape has %d values for %d axes", ns, na);
    int64_t pb[MGE_MAX_DIMS] = {0}, pe[MGE_MAX_DIMS] = {0};
    int lo = r;
    for (int i = 0; i < na; i++) {
        int a = mge_onnx_axis(axes[i], r);
        if (a < 0)
            return mge_onnx_fail(c, n, "axis %lld is out of range for rank %d", (long long)axes[i], r);
        if (shape[i] < 1)
            return mge_onnx_fail(c, n, "shape[%d] = %lld: expected >= 1", i, (long long)shape[i]);
        int64_t d = xv->dims[a];
        if (!known_dim(d))
            return mge_onnx_unsupported(c, n, "axis %d of the input has no size known at import", a);
        int64_t diff = shape[i] - d;
        /* crop: -(floor(-diff/2)) before; pad: floor(diff/2) before */
        int64_t before = diff >= 0 ? diff / 2 : -((-diff) / 2);
        pb[a] = before, pe[a] = diff - before;
        if (diff && a < lo)
            lo = a;
    }
    if (lo == r)
        return mge_onnx_alias(c, n, 0, x);
    if (r - lo > 4)
        return mge_onnx_unsupported(c, n, "cropping or padding %d trailing dims (mge's pad takes at most 4)", r - lo);
    int64_t pads[8];
    int np = 0;
    for (int a = r - 1; a >= lo; a--)
        pads[np++] = pb[a], pads[np++] = pe[a];
    mge_attr at[1] = {mge_onnx_ais(MGE_KEY_pads, np, pads)};
    return mge_onnx_finish(c, n, MGE_OP_PAD, 1, &x, 1, at);
}

/* ---------------------------------------------------------------- AffineGrid */

/* AffineGrid-20 with size known at import: the base grid (x, y[, z], 1)
 * of every output point, a constant [P, k+1], times theta^T by one
 * broadcast matmul: [N, P, k], reshaped to [N, (D,) H, W, k]. */
static mge_status conv_affine_grid(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int th = mge_onnx_in(c, n, 0), sv = mge_onnx_in(c, n, 1);
    if (th < 0 || sv < 0)
        return mge_onnx_fail(c, n, "needs theta and size");
    const mge_value *tv = mge_onnx_value(c, th);
    if (tv->dtype != MGE_F32)
        return mge_onnx_unsupported(c, n, "theta of %s (mge builds the grid in f32)", mge_dtype_name(tv->dtype));
    int64_t sz[5];
    int ns;
    mge_status st = mge_onnx_known_ints(c, n, sv, "size", sz, 5, &ns);
    if (st)
        return st;
    if (ns != 4 && ns != 5)
        return mge_onnx_fail(c, n, "size has %d values: expected [N,C,H,W] or [N,C,D,H,W]", ns);
    int k = ns - 2;
    if (tv->ndim != 3 || tv->dims[1] != k || tv->dims[2] != k + 1 ||
        (known_dim(tv->dims[0]) && tv->dims[0] != sz[0]))
        return mge_onnx_fail(c, n, "theta must be [N,%d,%d] with N = size[0]", k, k + 1);
    int64_t P = 1;
    for (int i = 2; i < ns; i++) {
        if (sz[i] < 1 || sz[i] > (1 << 20))
            return mge_onnx_fail(c, n, "size[%d] = %lld: expected 1 to 2^20", i, (long long)sz[i]);
        P *= sz[i];
    }
    if (P > (1 << 24))
        return mge_onnx_unsupported(c, n, "a grid of %lld points (mge builds it as a constant; at most 2^24)",
                                    (long long)P);
    int align = mge_onnx_attr_i(n, "align_corners", 0) != 0;
    for (int i = 2; align && i < ns; i++)
        if (sz[i] == 1)
            return mge_onnx_unsupported(c, n, "align_corners with a dim of size 1 (where its one point goes, "
                                        "implementations disagree: PyTorch 0, ONNX's reference -1, onnxruntime 1)");
    float *base = malloc((size_t)P * (size_t)(k + 1) * sizeof *base);
    if (!base)
        return mge_error_set(c->err, MGE_ERR_NOMEM, "out of memory");
    for (int64_t p = 0; p < P; p++) {
        int64_t rest = p;
        /* component j of (x, y, z) runs along dim ns-1-j */
        for (int j = 0; j < k; j++) {
            int64_t d = sz[ns - 1 - j], i = rest % d;
            rest /= d;
            double v = align ? -1.0 + (double)i * 2.0 / (double)(d - 1)
                             : -1.0 + (2.0 * (double)i + 1.0) / (double)d;
            base[p * (k + 1) + j] = (float)v;
        }
        base[p * (k + 1) + k] = 1.0f;
    }
    int64_t bd[2] = {P, k + 1};
    int b = mge_onnx_const_f32(c, n, 2, bd, base);
    free(base);
    mge_attr ma[1] = {mge_onnx_ab(MGE_KEY_transpose_b, 1)};
    int in[2] = {b, th};
    int g = b < 0 ? -1 : mge_onnx_emit_tmp(c, n, MGE_OP_MATMUL, 2, in, 1, ma);
    if (g < 0)
        return c->err->code;
    int64_t shp[5] = {0};
    for (int i = 2; i < ns; i++)
        shp[i - 1] = sz[i];
    shp[ns - 1] = k;
    mge_attr ra[1] = {mge_onnx_ais(MGE_KEY_shape, ns, shp)};
    return mge_onnx_finish(c, n, MGE_OP_RESHAPE, 1, &g, 1, ra);
}

/* ---------------------------------------------------------------- Col2Im */

/* Col2Im-18 on 2-D images: the columns [N, C*kh*kw, L] as a [N, C*kh*kw,
 * LH, LW] map through conv_transpose2d with one-hot weights, C groups
 * (each column's value lands on its pixel; sums are exact). */
static mge_status conv_col2im(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x = mge_onnx_in(c, n, 0), iv = mge_onnx_in(c, n, 1), bv = mge_onnx_in(c, n, 2);
    if (x < 0 || iv < 0 || bv < 0)
        return mge_onnx_fail(c, n, "needs input, image_shape and block_shape");
    const mge_value *xv = mge_onnx_value(c, x);
    if (xv->dtype != MGE_F32)
        return mge_onnx_unsupported(c, n, "input of %s (mge's transposed convolution here is f32)",
                                    mge_dtype_name(xv->dtype));
    int64_t img[4], blk[4];
    int ni, nb;
    mge_status st;
    if ((st = mge_onnx_known_ints(c, n, iv, "image_shape", img, 4, &ni)) ||
        (st = mge_onnx_known_ints(c, n, bv, "block_shape", blk, 4, &nb)))
        return st;
    if (ni != nb || ni < 1)
        return mge_onnx_fail(c, n, "image_shape and block_shape have %d and %d values", ni, nb);
    if (ni != 2)
        return mge_onnx_unsupported(c, n, "%d spatial dims (mge's Col2Im is 2-D)", ni);
    int64_t dl[2] = {1, 1}, sd[2] = {1, 1}, pads[4] = {0, 0, 0, 0};
    if (mge_onnx_attr_ints(n, "dilations", dl, 2) == 1 || mge_onnx_attr_ints(n, "strides", sd, 2) == 1)
        return mge_onnx_fail(c, n, "dilations and strides need 2 values");
    int np = mge_onnx_attr_ints(n, "pads", pads, 4);
    if (np >= 0 && np != 4)
        return mge_onnx_fail(c, n, "pads has %d values: expected 4", np);
    if (pads[0] != pads[2] || pads[1] != pads[3])
        return mge_onnx_unsupported(c, n, "asymmetric pads (mge's transposed convolution pads both sides alike)");
    int64_t kk = 1, L[2], op[2], p2[2] = {pads[0], pads[1]};
    for (int i = 0; i < 2; i++) {
        if (img[i] < 1 || blk[i] < 1 || dl[i] < 1 || sd[i] < 1 || p2[i] < 0)
            return mge_onnx_fail(c, n, "image_shape, block_shape, dilations and strides must be >= 1, pads >= 0");
        int64_t span = img[i] + 2 * p2[i] - dl[i] * (blk[i] - 1) - 1;
        if (span < 0)
            return mge_onnx_fail(c, n, "the block does not fit the padded image");
        L[i] = span / sd[i] + 1;
        op[i] = span - (L[i] - 1) * sd[i];
        kk *= blk[i];
    }
    if (xv->ndim != 3 || !known_dim(xv->dims[1]) || !known_dim(xv->dims[2]) || xv->dims[1] % kk ||
        xv->dims[1] < kk || xv->dims[2] != L[0] * L[1])
        return mge_onnx_fail(c, n, "input must be [N, C*%lld, %lld] for these shapes", (long long)kk,
                             (long long)(L[0] * L[1]));
    int64_t C = xv->dims[1] / kk;
    if (C * kk * kk > (1 << 24))
        return mge_onnx_unsupported(c, n, "a one-hot weight of %lld values", (long long)(C * kk * kk));
    float *w = calloc((size_t)(C * kk * kk), sizeof *w);
    if (!w)
        return mge_error_set(c->err, MGE_ERR_NOMEM, "out of memory");
    for (int64_t ch = 0; ch < C * kk; ch++)
        w[ch * kk + ch % kk] = 1.0f;
    int64_t wd[4] = {C * kk, 1, blk[0], blk[1]}, xs[4] = {0, 0, L[0], L[1]};
    int wc = mge_onnx_const_f32(c, n, 4, wd, w);
    free(w);
    int xr = wc < 0 ? -1 : mge_onnx_reshape_tmp(c, n, x, 4, xs);
    if (xr < 0)
        return c->err->code;
    mge_attr a[8] = {mge_onnx_ai(MGE_KEY_out, C),           mge_onnx_ais(MGE_KEY_kernel, 2, blk),
                     mge_onnx_ais(MGE_KEY_stride, 2, sd),   mge_onnx_ais(MGE_KEY_pad, 2, p2),
                     mge_onnx_ais(MGE_KEY_output_padding, 2, op), mge_onnx_ais(MGE_KEY_dilation, 2, dl),
                     mge_onnx_ai(MGE_KEY_groups, C),        mge_onnx_ab(MGE_KEY_bias, 0)};
    int in[2] = {xr, wc};
    return mge_onnx_finish(c, n, MGE_OP_CONV_TRANSPOSE2D, 2, in, 8, a);
}

const mge_onnx_op mge_onnx_ops_spatial[] = {
    {"GridSample", conv_grid_sample, 16},
    {"RoiAlign", conv_roi_align, 10},
    {"DeformConv", conv_deform, 19},
    {"CenterCropPad", conv_center_crop_pad, 18},
    {"AffineGrid", conv_affine_grid, 20},
    {"Col2Im", conv_col2im, 18},
    {NULL, NULL, 0},
};
