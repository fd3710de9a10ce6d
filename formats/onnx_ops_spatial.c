/* onnx_ops_spatial.c — ONNX converters for the spatial sampling ops:
 * GridSample, RoiAlign and DeformConv (onto mge's grid_sample, roi_align
 * and deform_conv2d). */
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

const mge_onnx_op mge_onnx_ops_spatial[] = {
    {"GridSample", conv_grid_sample, 16},
    {"RoiAlign", conv_roi_align, 10},
    {"DeformConv", conv_deform, 19},
    {NULL, NULL, 0},
};
