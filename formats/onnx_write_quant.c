/* onnx_write_quant.c — the ONNX linear quantization ops (group quant-onnx)
 * as opset-17 nodes: quantize_linear, dequantize_linear, matmul_integer and
 * conv_integer one to one; requantize, which ONNX has no node for, as
 * Cast to double, Mul by the multiplier, Round (half to even), Add the
 * zero point, Clip to the dtype's range and Cast back: the same arithmetic
 * as mge's kernel, so the round trip through ONNX is exact. What opset 17
 * cannot say (blocked scales, f16/bf16 scales, per-axis scales without a
 * zero point on i8) is reported with the reason. */
#include "onnx_write.h"

static const mge_value *val(mge_onnx_w *w, int v)
{
    return &w->g->values[v];
}

static int64_t count(const mge_value *v)
{
    int64_t k = 1;
    for (int i = 0; i < v->ndim; i++)
        k *= v->dims[i];
    return k;
}

static const char *in_name(mge_onnx_w *w, const mge_node *n, int i)
{
    return i < n->nin ? mge_onnx_w_name(w, n->in[i]) : "";
}

static const char *out_name(mge_onnx_w *w, const mge_node *n)
{
    return mge_onnx_w_name(w, n->out[0]);
}

static const char *node1(mge_onnx_w *w, Onnx__NodeProto **nd, const char *type, const char *out, int nin,
                         const char *const *in)
{
    if (!out && !(out = mge_onnx_w_tmp(w, type)))
        return NULL;
    *nd = mge_onnx_w_node(w, type, nin, in, 1, &out);
    return *nd ? out : NULL;
}

static const char *cast(mge_onnx_w *w, const char *x, int to)
{
    Onnx__NodeProto *nd;
    const char *r = node1(w, &nd, "Cast", NULL, 1, &x);
    if (r)
        mge_onnx_w_attr_i(w, nd, "to", to);
    return r;
}

/* v (1-D along axis of a rank-r result) shaped to broadcast there. */
static const char *along(mge_onnx_w *w, const char *v, const mge_value *vv, int axis, int r)
{
    if (count(vv) == 1 || axis == r - 1)
        return v;
    int64_t shape[MGE_MAX_DIMS];
    int nd = r - axis;
    shape[0] = -1;
    for (int i = 1; i < nd; i++)
        shape[i] = 1;
    const char *in[2] = {v, mge_onnx_w_i64s(w, nd, shape)};
    Onnx__NodeProto *nn;
    return in[1] ? node1(w, &nn, "Reshape", NULL, 2, in) : NULL;
}

static mge_status scaled(mge_onnx_w *w, const mge_node *n, int q)
{
    const mge_value *x = val(w, n->in[0]), *s = val(w, n->in[1]);
    if (mge_node_int(n, MGE_KEY_block, 0) > 0)
        return mge_onnx_w_unsupported(w, "blocked scales (ONNX has them from opset 21; mge writes opset 17)");
    if (s->dtype != MGE_F32)
        return mge_onnx_w_unsupported(w, "a %s scale (ONNX has them from opset 19; mge writes opset 17)",
                                      mge_dtype_name(s->dtype));
    const char *in[3] = {in_name(w, n, 0), in_name(w, n, 1), in_name(w, n, 2)};
    int nin = n->nin;
    mge_dtype odt = val(w, n->out[0])->dtype;
    if (q && nin == 2 && odt == MGE_I8) {   /* ONNX's default is uint8: an int8 zero point says int8 */
        if (count(s) != 1)
            return mge_onnx_w_unsupported(w, "int8 per-axis quantization without a zero point");
        in[2] = mge_onnx_w_scalar(w, MGE_I8, 0);
        nin = 3;
    }
    const char *out = out_name(w, n);
    Onnx__NodeProto *nd = mge_onnx_w_node(w, q ? "QuantizeLinear" : "DequantizeLinear", nin, in, 1, &out);
    if (!nd)
        return mge_error_set(w->err, MGE_ERR_NOMEM, "out of memory");
    if (count(s) != 1)
        mge_onnx_w_attr_i(w, nd, "axis", mge_axis(mge_node_int(n, MGE_KEY_axis, 1), x->ndim));
    return MGE_OK;
}

static mge_status requantize(mge_onnx_w *w, const mge_node *n)
{
    const mge_value *x = val(w, n->in[0]), *m = val(w, n->in[1]);
    mge_dtype odt = val(w, n->out[0])->dtype;
    int r = x->ndim, axis = mge_axis(mge_node_int(n, MGE_KEY_axis, 1), r);
    if (count(m) != 1 && axis < 0)
        return mge_onnx_w_unsupported(w, "axis out of range");
    const char *acc = cast(w, in_name(w, n, 0), MGE_ONNX_DOUBLE);
    const char *mul = along(w, cast(w, in_name(w, n, 1), MGE_ONNX_DOUBLE), m, axis, r);
    Onnx__NodeProto *nd;
    const char *in2[2] = {acc, mul};
    const char *y = acc && mul ? node1(w, &nd, "Mul", NULL, 2, in2) : NULL;
    y = y ? node1(w, &nd, "Round", NULL, 1, &y) : NULL;
    if (y && n->nin > 2) {
        const mge_value *z = val(w, n->in[2]);
        const char *zd = along(w, cast(w, in_name(w, n, 2), MGE_ONNX_DOUBLE), z, axis, r);
        const char *in3[2] = {y, zd};
        y = zd ? node1(w, &nd, "Add", NULL, 2, in3) : NULL;
    }
    double lo = odt == MGE_I8 ? -128 : 0, hi = odt == MGE_I8 ? 127 : 255;
    const char *in4[3] = {y, cast(w, mge_onnx_w_scalar(w, MGE_F32, lo), MGE_ONNX_DOUBLE),
                          cast(w, mge_onnx_w_scalar(w, MGE_F32, hi), MGE_ONNX_DOUBLE)};
    y = y && in4[1] && in4[2] ? node1(w, &nd, "Clip", NULL, 3, in4) : NULL;
    const char *out = out_name(w, n);
    if (y && node1(w, &nd, "Cast", out, 1, &y))
        mge_onnx_w_attr_i(w, nd, "to", mge_onnx_dtype_to(odt));
    else
        return mge_error_set(w->err, MGE_ERR_NOMEM, "out of memory");
    return MGE_OK;
}

/* A constant per-channel zero point whose elements are all one value (the
 * symmetric weights quantizers write) as a scalar: onnxruntime's
 * ConvInteger takes only per-tensor ones. NULL: keep it as it is. */
static const char *uniform_zero(mge_onnx_w *w, int v)
{
    const mge_value *z = val(w, v);
    const mge_tensor *t = z->data;
    if (!t || count(z) <= 1 || (t->dtype != MGE_U8 && t->dtype != MGE_I8) || t->nbytes < (size_t)count(z))
        return NULL;
    const uint8_t *p = t->data;
    for (int64_t i = 1; i < count(z); i++)
        if (p[i] != p[0])
            return NULL;
    return mge_onnx_w_scalar(w, t->dtype, t->dtype == MGE_I8 ? (double)(int8_t)p[0] : (double)p[0]);
}

static mge_status conv_integer(mge_onnx_w *w, const mge_node *n)
{
    const char *in[4];
    for (int i = 0; i < n->nin && i < 4; i++)
        in[i] = in_name(w, n, i);
    const char *wz = n->nin > 3 ? uniform_zero(w, n->in[3]) : NULL;
    if (wz)
        in[3] = wz;
    const char *out = out_name(w, n);
    Onnx__NodeProto *nd = mge_onnx_w_node(w, "ConvInteger", n->nin, in, 1, &out);
    if (!nd)
        return mge_error_set(w->err, MGE_ERR_NOMEM, "out of memory");
    int64_t k[2], s[2], d[2], p[4];
    const mge_attr *pa = mge_node_attr(n, MGE_KEY_pad);
    for (int i = 0; i < 2; i++) {
        k[i] = mge_node_ints(n, MGE_KEY_kernel, i, mge_node_ints(n, MGE_KEY_kernel, 0, 1));
        s[i] = mge_node_ints(n, MGE_KEY_stride, i, mge_node_ints(n, MGE_KEY_stride, 0, 1));
        d[i] = mge_node_ints(n, MGE_KEY_dilation, i, mge_node_ints(n, MGE_KEY_dilation, 0, 1));
    }
    for (int i = 0; i < 4; i++)
        p[i] = !pa || !pa->n ? 0 : pa->n == 1 ? pa->i[0] : pa->n == 2 ? pa->i[i % 2] : pa->i[i];
    mge_onnx_w_attr_ints(w, nd, "kernel_shape", 2, k);
    mge_onnx_w_attr_ints(w, nd, "strides", 2, s);
    mge_onnx_w_attr_ints(w, nd, "pads", 4, p);
    mge_onnx_w_attr_ints(w, nd, "dilations", 2, d);
    mge_onnx_w_attr_i(w, nd, "group", mge_node_int(n, MGE_KEY_groups, 1));
    return MGE_OK;
}

mge_status mge_onnx_w_export_qlin(mge_onnx_w *w, const mge_node *n)
{
    switch (n->op) {
    case MGE_OP_QUANTIZE_LINEAR: return scaled(w, n, 1);
    case MGE_OP_DEQUANTIZE_LINEAR: return scaled(w, n, 0);
    case MGE_OP_REQUANTIZE: return requantize(w, n);
    case MGE_OP_CONV_INTEGER: return conv_integer(w, n);
    default: { /* matmul_integer */
        const char *in[4];
        for (int i = 0; i < n->nin && i < 4; i++)
            in[i] = in_name(w, n, i);
        const char *out = out_name(w, n);
        return mge_onnx_w_node(w, "MatMulInteger", n->nin, in, 1, &out)
                   ? MGE_OK
                   : mge_error_set(w->err, MGE_ERR_NOMEM, "out of memory");
    }
    }
}
