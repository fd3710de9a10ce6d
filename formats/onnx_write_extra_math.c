/* onnx_write_extra_math.c — the extra math ops (ops.def's area math block)
 * as ONNX opset-17 nodes: acos ... sinh, shrink, det, lrn and dft one to
 * one; shift_left/right as BitShift on u8 (ONNX shifts unsigned types
 * only). The bitwise ops are opset 18 and eye_like's shape is the input's:
 * reported with the reason. */
#include "onnx_write.h"

#include <string.h>

#define IN(i) ((i) < 64 && w->ovin[i] ? w->ovin[i] : mge_onnx_w_name(w, n->in[i]))
#define OUT(k) ((k) < 4 && w->ovout[k] ? w->ovout[k] : mge_onnx_w_name(w, n->out[k]))

static Onnx__NodeProto *one(mge_onnx_w *w, const mge_node *n, const char *type, int nin, const char *const *in)
{
    const char *out = OUT(0);
    Onnx__NodeProto *nd = mge_onnx_w_node(w, type, nin, in, 1, &out);
    if (!nd)
        mge_error_set(w->err, MGE_ERR_NOMEM, "out of memory");
    return nd;
}

mge_status mge_onnx_w_export_extra_math(mge_onnx_w *w, const mge_node *n, int *done)
{
    static const struct {
        int op;
        const char *onnx;
    } direct[] = {
        {MGE_OP_ACOS, "Acos"}, {MGE_OP_ACOSH, "Acosh"}, {MGE_OP_ASIN, "Asin"}, {MGE_OP_ASINH, "Asinh"},
        {MGE_OP_ATAN, "Atan"}, {MGE_OP_ATANH, "Atanh"}, {MGE_OP_COSH, "Cosh"}, {MGE_OP_SINH, "Sinh"},
        {MGE_OP_DET, "Det"},
    };
    *done = 1;
    const char *in[2] = {n->nin > 0 ? IN(0) : NULL, n->nin > 1 ? IN(1) : NULL};
    for (size_t i = 0; i < sizeof direct / sizeof direct[0]; i++)
        if (direct[i].op == n->op)
            return one(w, n, direct[i].onnx, 1, in) ? MGE_OK : MGE_ERR_NOMEM;
    Onnx__NodeProto *nd;
    switch (n->op) {
    case MGE_OP_SHRINK:
        if (!(nd = one(w, n, "Shrink", 1, in)))
            return MGE_ERR_NOMEM;
        mge_onnx_w_attr_f(w, nd, "lambd", mge_node_float(n, MGE_KEY_lambd, 0.5));
        mge_onnx_w_attr_f(w, nd, "bias", mge_node_float(n, MGE_KEY_shift, 0));
        return MGE_OK;
    case MGE_OP_LRN:
        if (!(nd = one(w, n, "LRN", 1, in)))
            return MGE_ERR_NOMEM;
        mge_onnx_w_attr_i(w, nd, "size", mge_node_ints(n, MGE_KEY_size, 0, 1));
        mge_onnx_w_attr_f(w, nd, "alpha", mge_node_float(n, MGE_KEY_alpha, 1e-4));
        mge_onnx_w_attr_f(w, nd, "beta", mge_node_float(n, MGE_KEY_beta, 0.75));
        mge_onnx_w_attr_f(w, nd, "bias", mge_node_float(n, MGE_KEY_shift, 1));
        return MGE_OK;
    case MGE_OP_DFT: {
        const mge_attr *len = mge_node_attr(n, MGE_KEY_length);
        if (len)
            in[1] = mge_onnx_w_scalar(w, MGE_I64, (double)len->i[0]);   /* dft_length: a scalar */
        if (!(nd = one(w, n, "DFT", len ? 2 : 1, in)))
            return MGE_ERR_NOMEM;
        mge_onnx_w_attr_i(w, nd, "axis", mge_node_ints(n, MGE_KEY_axis, 0, 1));
        mge_onnx_w_attr_i(w, nd, "inverse", mge_node_int(n, MGE_KEY_inverse, 0));
        mge_onnx_w_attr_i(w, nd, "onesided", mge_node_int(n, MGE_KEY_onesided, 0));
        return MGE_OK;
    }
    case MGE_OP_SHIFT_LEFT: case MGE_OP_SHIFT_RIGHT:
        if (w->g->values[n->in[0]].dtype != MGE_U8 && w->g->values[n->in[0]].dtype != MGE_U16 &&
            w->g->values[n->in[0]].dtype != MGE_U32 && w->g->values[n->in[0]].dtype != MGE_U64)
            return mge_onnx_w_unsupported(w, "a shift of %s (ONNX's BitShift takes unsigned types)",
                                          mge_dtype_name(w->g->values[n->in[0]].dtype));
        if (!(nd = one(w, n, "BitShift", 2, in)))
            return MGE_ERR_NOMEM;
        mge_onnx_w_attr_s(w, nd, "direction", n->op == MGE_OP_SHIFT_LEFT ? "LEFT" : "RIGHT");
        return MGE_OK;
    case MGE_OP_BITWISE_AND: case MGE_OP_BITWISE_OR: case MGE_OP_BITWISE_XOR: case MGE_OP_BITWISE_NOT:
        return mge_onnx_w_unsupported(w, "the bitwise ops are ONNX opset 18 (the writer emits opset %d)",
                                      MGE_ONNX_WRITE_OPSET);
    case MGE_OP_EYE_LIKE:
        if (!(nd = one(w, n, "EyeLike", 1, in)))
            return MGE_ERR_NOMEM;
        mge_onnx_w_attr_i(w, nd, "k", mge_node_int(n, MGE_KEY_k, 0));
        mge_onnx_w_attr_i(w, nd, "dtype", mge_onnx_dtype_to(w->g->values[n->out[0]].dtype));
        return MGE_OK;
    default:
        *done = 0;
        return MGE_OK;
    }
}
