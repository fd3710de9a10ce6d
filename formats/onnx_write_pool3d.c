/* onnx_write_pool3d.c — the 3-D pools, max_unpool and conv3d_grad_input
 * as ONNX opset-17 nodes: maxpool3d as MaxPool (with Indices when the node
 * has them), avgpool3d as AveragePool (undilated: opset 17's has no
 * dilations), max_unpool as MaxUnpool, conv3d_grad_input (the transposed
 * convolution the ONNX reader makes of a 3-D ConvTranspose) as
 * ConvTranspose with the output_padding its shape input implies. */
#include "onnx_write.h"

#define IN(i) ((i) < 64 && w->ovin[i] ? w->ovin[i] : mge_onnx_w_name(w, n->in[i]))
#define OUT(k) ((k) < 4 && w->ovout[k] ? w->ovout[k] : mge_onnx_w_name(w, n->out[k]))
#define NOMEM() mge_error_set(w->err, MGE_ERR_NOMEM, "out of memory")

/* Value i of attribute key over nsp dims (1 value: all), def when absent. */
static int64_t at(const mge_node *n, int key, int i, int nsp, int64_t def)
{
    const mge_attr *a = mge_node_attr(n, key);
    if (!a || a->n < 1)
        return def;
    return a->i[a->n == 1 ? 0 : a->n == nsp || a->n == 2 * nsp ? i : 0];
}

/* pads as ONNX's begin..., end... from a 1, nsp or 2*nsp value pad. */
static void pads_of(const mge_node *n, int nsp, int64_t *p)
{
    const mge_attr *a = mge_node_attr(n, MGE_KEY_pad);
    for (int i = 0; i < nsp; i++) {
        p[i] = !a ? 0 : a->i[a->n == 1 ? 0 : i];
        p[nsp + i] = !a ? 0 : a->i[a->n == 1 ? 0 : a->n == 2 * nsp ? nsp + i : i];
    }
}

static mge_status ex_pool(mge_onnx_w *w, const mge_node *n)
{
    int mx = n->op == MGE_OP_MAXPOOL3D;
    int64_t k[3], s[3], d[3], p[6];
    int dil = 0;
    for (int i = 0; i < 3; i++) {
        k[i] = at(n, MGE_KEY_kernel, i, 3, 1);
        s[i] = mge_node_attr(n, MGE_KEY_stride) ? at(n, MGE_KEY_stride, i, 3, 1) : k[i];
        d[i] = at(n, MGE_KEY_dilation, i, 3, 1);
        dil |= d[i] != 1;
    }
    if (!mx && dil)
        return mge_onnx_w_unsupported(w, "a dilated avgpool3d (AveragePool has dilations from opset 19; the "
                                      "writer writes opset 17)");
    pads_of(n, 3, p);
    const char *in[1] = {IN(0)}, *out[2] = {OUT(0), n->nout > 1 ? OUT(1) : NULL};
    Onnx__NodeProto *nd = mge_onnx_w_node(w, mx ? "MaxPool" : "AveragePool", 1, in, mx && n->nout > 1 ? 2 : 1, out);
    mge_onnx_w_attr_ints(w, nd, "kernel_shape", 3, k);
    mge_onnx_w_attr_ints(w, nd, "strides", 3, s);
    mge_onnx_w_attr_ints(w, nd, "pads", 6, p);
    mge_onnx_w_attr_i(w, nd, "ceil_mode", mge_node_int(n, MGE_KEY_ceil_mode, 0));
    if (mx) {
        mge_onnx_w_attr_ints(w, nd, "dilations", 3, d);
        if (mge_node_int(n, MGE_KEY_storage_order, 0))
            mge_onnx_w_attr_i(w, nd, "storage_order", 1);
    } else {
        mge_onnx_w_attr_i(w, nd, "count_include_pad", mge_node_int(n, MGE_KEY_count_include_pad, 1));
    }
    return nd ? MGE_OK : NOMEM();
}

static mge_status ex_unpool(mge_onnx_w *w, const mge_node *n)
{
    const mge_value *x = &w->g->values[n->in[0]], *ix = &w->g->values[n->in[1]];
    int nsp = x->ndim - 2;
    if (nsp < 1 || nsp > 3 || !mge_node_attr(n, MGE_KEY_kernel))
        return mge_onnx_w_unsupported(w, "max_unpool without kernel or of rank %d", x->ndim);
    if (ix->dtype != MGE_I64)
        return mge_onnx_w_unsupported(w, "max_unpool with %s indices (MaxUnpool takes int64)",
                                      mge_dtype_name(ix->dtype));
    int64_t k[3], s[3], p[6];
    for (int i = 0; i < nsp; i++) {
        k[i] = at(n, MGE_KEY_kernel, i, nsp, 1);
        s[i] = mge_node_attr(n, MGE_KEY_stride) ? at(n, MGE_KEY_stride, i, nsp, 1) : k[i];
    }
    pads_of(n, nsp, p);
    /* mge's indices run over y's shape, given or not; ONNX's over the
     * unpooled size, output_shape only padding after: the two agree when y
     * is the unpooled size, so only that goes out (without output_shape) */
    const mge_value *y = &w->g->values[n->out[0]];
    for (int i = 0; i < nsp; i++) {
        int64_t d = x->dims[2 + i], inf = (d - 1) * s[i] - p[i] - p[nsp + i] + k[i];
        if (d < 0 || y->dims[2 + i] != inf)
            return mge_onnx_w_unsupported(w, "max_unpool to a shape other than the unpooled size (ONNX's MaxUnpool "
                                             "indexes the unpooled size and pads after it)");
    }
    const char *in[2] = {IN(0), IN(1)}, *out[1] = {OUT(0)};
    Onnx__NodeProto *nd = mge_onnx_w_node(w, "MaxUnpool", 2, in, 1, out);
    mge_onnx_w_attr_ints(w, nd, "kernel_shape", nsp, k);
    mge_onnx_w_attr_ints(w, nd, "strides", nsp, s);
    mge_onnx_w_attr_ints(w, nd, "pads", 2 * nsp, p);
    return nd ? MGE_OK : NOMEM();
}

/* conv3d_grad_input(dy, weight, x): ConvTranspose of dy; x gives the
 * output's spatial size, hence output_padding. */
static mge_status ex_convt3d(mge_onnx_w *w, const mge_node *n)
{
    const mge_value *dy = &w->g->values[n->in[0]], *like = &w->g->values[n->in[2]];
    if (dy->ndim != 5 || like->ndim != 5)
        return mge_onnx_w_unsupported(w, "conv3d_grad_input of rank %d", dy->ndim);
    int64_t k[3], s[3], d[3], p[6], op[3];
    for (int i = 0; i < 3; i++) {
        k[i] = at(n, MGE_KEY_kernel, i, 3, 1);
        s[i] = at(n, MGE_KEY_stride, i, 3, 1);
        d[i] = at(n, MGE_KEY_dilation, i, 3, 1);
        p[i] = p[3 + i] = at(n, MGE_KEY_pad, i, 3, 0);
        int64_t in = dy->dims[2 + i], o = like->dims[2 + i];
        if (in < 1 || o < 1 || mge_dim_is_symbol(in) || mge_dim_is_symbol(o))
            return mge_onnx_w_unsupported(w, "conv3d_grad_input over spatial dims not known when writing");
        op[i] = o - ((in - 1) * s[i] - 2 * p[i] + d[i] * (k[i] - 1) + 1);
        if (op[i] < 0 || op[i] >= s[i])
            return mge_onnx_w_unsupported(w, "conv3d_grad_input whose output is not a ConvTranspose's");
    }
    const char *in[2] = {IN(0), IN(1)}, *out[1] = {OUT(0)};
    Onnx__NodeProto *nd = mge_onnx_w_node(w, "ConvTranspose", 2, in, 1, out);
    mge_onnx_w_attr_ints(w, nd, "kernel_shape", 3, k);
    mge_onnx_w_attr_ints(w, nd, "strides", 3, s);
    mge_onnx_w_attr_ints(w, nd, "pads", 6, p);
    mge_onnx_w_attr_ints(w, nd, "dilations", 3, d);
    mge_onnx_w_attr_i(w, nd, "group", mge_node_int(n, MGE_KEY_groups, 1));
    if (op[0] || op[1] || op[2])
        mge_onnx_w_attr_ints(w, nd, "output_padding", 3, op);
    return nd ? MGE_OK : NOMEM();
}

mge_status mge_onnx_w_pool3d(mge_onnx_w *w, const mge_node *n)
{
    switch (n->op) {
    case MGE_OP_MAXPOOL3D: case MGE_OP_AVGPOOL3D: return ex_pool(w, n);
    case MGE_OP_MAX_UNPOOL: return ex_unpool(w, n);
    case MGE_OP_CONV3D_GRAD_INPUT: return ex_convt3d(w, n);
    default: return mge_onnx_w_unsupported(w, "internal: not a 3-D pool");
    }
}
