/* onnx_ops_spatial.c — ONNX converters for the spatial sampling ops:
 * GridSample (onto mge's grid_sample). */
#include "onnx.h"

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

const mge_onnx_op mge_onnx_ops_spatial[] = {
    {"GridSample", conv_grid_sample, 16},
    {NULL, NULL, 0},
};
