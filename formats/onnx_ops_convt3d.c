/* onnx_ops_convt3d.c — 3-D ConvTranspose (nn's converter hands it here
 * with its parsed attributes): the transposed convolution is conv3d's
 * input gradient, conv3d_grad_input(X, W, like) with W [C_in, C_out/g,
 * k...] as conv3d's weight [out, in/g, k...], like only giving the output
 * shape (an expand of a per-sample scalar: N may be a symbol); then the
 * bias. Symmetric pads and output_padding below the stride only (the
 * output is then the one whose conv3d is X); inference only (the gradient
 * op has no gradient). */
#include "onnx.h"

mge_status mge_onnx_convtranspose3d(mge_onnx_ctx *c, mge_onnx_node *n, int x, int w, int b, int64_t M, int64_t group,
                                    const int64_t *k, const int64_t *s, const int64_t *d, const int64_t *op,
                                    const int64_t *pb, const int64_t *pe)
{
    const mge_value *xv = mge_onnx_value(c, x);
    int64_t od[5] = {1, M}, pad[3];
    for (int i = 0; i < 3; i++) {
        if (pb[i] != pe[i] || op[i] >= s[i])
            return mge_onnx_unsupported(c, n, "3-D ConvTranspose with asymmetric pads or output_padding >= stride");
        int64_t in = xv->dims[2 + i];
        if (in < 1 || mge_dim_is_symbol(in))
            return mge_onnx_unsupported(c, n, "3-D ConvTranspose over a spatial dim not known at import");
        od[2 + i] = (in - 1) * s[i] - 2 * pb[i] + d[i] * (k[i] - 1) + 1 + op[i];
        if (od[2 + i] < 1)
            return mge_onnx_fail(c, n, "pads %lld leave an empty output along spatial dim %d", (long long)pb[i], i);
        pad[i] = pb[i];
    }
    int64_t ax[4] = {1, 2, 3, 4}, bs[5] = {1, M, 1, 1, 1};
    mge_attr ra[2] = {mge_onnx_ais(MGE_KEY_axis, 4, ax), mge_onnx_ab(MGE_KEY_keepdim, 1)};
    mge_attr ea[1] = {mge_onnx_ais(MGE_KEY_shape, 5, od)};
    int r = mge_onnx_emit_tmp(c, n, MGE_OP_MEAN, 1, &x, 2, ra);
    int like = r < 0 ? -1 : mge_onnx_emit_tmp(c, n, MGE_OP_EXPAND, 1, &r, 1, ea);
    mge_attr ca[5] = {mge_onnx_ais(MGE_KEY_kernel, 3, k), mge_onnx_ais(MGE_KEY_stride, 3, s),
                      mge_onnx_ais(MGE_KEY_pad, 3, pad), mge_onnx_ais(MGE_KEY_dilation, 3, d),
                      mge_onnx_ai(MGE_KEY_groups, group)};
    int in[3] = {x, w, like};
    if (b < 0)
        return mge_onnx_finish(c, n, MGE_OP_CONV3D_GRAD_INPUT, 3, in, 5, ca);
    int y = mge_onnx_emit_tmp(c, n, MGE_OP_CONV3D_GRAD_INPUT, 3, in, 5, ca);
    int bb = mge_onnx_reshape_tmp(c, n, b, 5, bs);
    int sum[2] = {y, bb};
    return mge_onnx_finish(c, n, MGE_OP_ADD, 2, sum, 0, NULL);
}
