/* onnx_ops_core.c — ONNX converters for constants, convolution, Gemm and
 * MatMul, BatchNormalization, 2-D pooling, Flatten, Reshape and If with a
 * constant condition; and the padding arithmetic the nn converters share.
 *
 * Conv and pools: ONNX pads are [begin..., end...]; equal begin and end
 * become the layer's pad=, unequal ones a pad node before it (zeros for
 * conv and average pooling that counts padding, -inf for max pooling).
 * auto_pad SAME_* needs the spatial dims known at import. */
#include "onnx.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------- padding */

mge_status mge_onnx_pads(mge_onnx_ctx *c, mge_onnx_node *n, int nsp, const int64_t *in, const int64_t *k,
                         const int64_t *s, const int64_t *d, int64_t *pb, int64_t *pe)
{
    char ap[32];
    mge_onnx_attr_s(n, "auto_pad", "NOTSET", ap, sizeof ap);
    for (int i = 0; i < nsp; i++)
        pb[i] = pe[i] = 0;
    if (strcmp(ap, "NOTSET") == 0) {
        int64_t p[2 * MGE_MAX_DIMS];
        int np = mge_onnx_attr_ints(n, "pads", p, 2 * MGE_MAX_DIMS);
        if (np < 0)
            return MGE_OK;
        if (np != 2 * nsp)
            return mge_onnx_fail(c, n, "pads has %d values: expected %d (begin and end of %d spatial dims)", np,
                                 2 * nsp, nsp);
        for (int i = 0; i < nsp; i++) {
            pb[i] = p[i];
            pe[i] = p[nsp + i];
            if (pb[i] < 0 || pe[i] < 0)
                return mge_onnx_fail(c, n, "pads [%lld, %lld] of dim %d are negative", (long long)pb[i],
                                     (long long)pe[i], i);
        }
        return MGE_OK;
    }
    if (strcmp(ap, "VALID") == 0)
        return MGE_OK;
    int upper = strcmp(ap, "SAME_UPPER") == 0;
    if (!upper && strcmp(ap, "SAME_LOWER") != 0)
        return mge_onnx_fail(c, n, "auto_pad '%s': expected NOTSET, SAME_UPPER, SAME_LOWER or VALID", ap);
    for (int i = 0; i < nsp; i++) {
        if (in[i] < 0 || mge_dim_is_symbol(in[i]))
            return mge_onnx_unsupported(c, n, "auto_pad %s over a spatial dim that is not known at import", ap);
        int64_t o = (in[i] + s[i] - 1) / s[i];
        int64_t tot = (o - 1) * s[i] + (k[i] - 1) * d[i] + 1 - in[i];
        if (tot < 0)
            tot = 0;
        pb[i] = upper ? tot / 2 : tot - tot / 2;
        pe[i] = tot - pb[i];
    }
    return MGE_OK;
}

/* x padded by pb/pe on its trailing nsp dims (a pad node), or x itself. */
int mge_onnx_pad_input(mge_onnx_ctx *c, mge_onnx_node *n, int x, int nsp, const int64_t *pb, const int64_t *pe,
                       double value)
{
    int64_t fp[2 * MGE_MAX_DIMS];
    int any = 0;
    /* F.pad order: the last dim first */
    for (int i = 0; i < nsp; i++) {
        fp[2 * i] = pb[nsp - 1 - i];
        fp[2 * i + 1] = pe[nsp - 1 - i];
        any |= fp[2 * i] || fp[2 * i + 1];
    }
    if (!any)
        return x;
    mge_attr a[3] = {mge_onnx_ais(MGE_KEY_pads, 2 * nsp, fp), mge_onnx_ai(MGE_KEY_mode, mge_key_enum_lookup(MGE_KEY_mode, "constant", 8)), mge_onnx_af(MGE_KEY_value, value)};
    return mge_onnx_emit_tmp(c, n, MGE_OP_PAD, 1, &x, 3, a);
}

/* kernel, strides, dilations of an nsp-d window (kernel from the attribute
 * or, when given, from kdef). */
static mge_status window(mge_onnx_ctx *c, mge_onnx_node *n, int nsp, const int64_t *kdef, int64_t *k, int64_t *s,
                         int64_t *d)
{
    int64_t t[MGE_MAX_DIMS];
    int nk = mge_onnx_attr_ints(n, "kernel_shape", t, MGE_MAX_DIMS);
    for (int i = 0; i < nsp; i++)
        k[i] = kdef ? kdef[i] : 0;
    if (nk >= 0) {
        if (nk != nsp)
            return mge_onnx_fail(c, n, "kernel_shape has %d values: expected %d", nk, nsp);
        for (int i = 0; i < nsp; i++) {
            if (kdef && t[i] != kdef[i])
                return mge_onnx_fail(c, n, "kernel_shape disagrees with the weight's shape");
            k[i] = t[i];
        }
    } else if (!kdef)
        return mge_onnx_fail(c, n, "kernel_shape is required");
    int ns = mge_onnx_attr_ints(n, "strides", t, MGE_MAX_DIMS);
    if (ns >= 0 && ns != nsp)
        return mge_onnx_fail(c, n, "strides has %d values: expected %d", ns, nsp);
    for (int i = 0; i < nsp; i++)
        s[i] = ns >= 0 ? t[i] : 1;
    int nd = mge_onnx_attr_ints(n, "dilations", t, MGE_MAX_DIMS);
    if (nd >= 0 && nd != nsp)
        return mge_onnx_fail(c, n, "dilations has %d values: expected %d", nd, nsp);
    for (int i = 0; i < nsp; i++)
        d[i] = nd >= 0 ? t[i] : 1;
    for (int i = 0; i < nsp; i++)
        if (k[i] < 1 || s[i] < 1 || d[i] < 1)
            return mge_onnx_fail(c, n, "kernel %lld, stride %lld, dilation %lld of dim %d: expected >= 1",
                                 (long long)k[i], (long long)s[i], (long long)d[i], i);
    return MGE_OK;
}

/* ---------------------------------------------------------------- constants */

static mge_status conv_constant(mge_onnx_ctx *c, mge_onnx_node *n)
{
    mge_tensor t;
    memset(&t, 0, sizeof t);
    const Onnx__AttributeProto *a;
    if ((a = mge_onnx_attr(n, "value")) && a->t) {
        mge_status s = mge_onnx_tensor(a->t, NULL, &t, c->err);
        if (s == MGE_ERR_UNSUPPORTED)
            return mge_onnx_unsupported(c, n, "%s", c->err->msg);
        if (s)
            return mge_onnx_fail(c, n, "value: %s", c->err->msg);
        if (!(t.flags & MGE_TENSOR_OWNED) && t.nbytes) {
            /* borrowed from the message: keep it so (the graph holds the message) */
        }
    } else if ((a = mge_onnx_attr(n, "value_float"))) {
        float f = a->f;
        if (mge_tensor_alloc(&t, MGE_F32, 0, NULL, c->err))
            return c->err->code;
        *(float *)t.data = f;
    } else if ((a = mge_onnx_attr(n, "value_int"))) {
        if (mge_tensor_alloc(&t, MGE_I64, 0, NULL, c->err))
            return c->err->code;
        *(int64_t *)t.data = a->i;
    } else if ((a = mge_onnx_attr(n, "value_floats"))) {
        int64_t d[1] = {(int64_t)a->n_floats};
        if (mge_tensor_alloc(&t, MGE_F32, 1, d, c->err))
            return c->err->code;
        for (size_t i = 0; i < a->n_floats; i++)
            ((float *)t.data)[i] = a->floats[i];
    } else if ((a = mge_onnx_attr(n, "value_ints"))) {
        int64_t d[1] = {(int64_t)a->n_ints};
        if (mge_tensor_alloc(&t, MGE_I64, 1, d, c->err))
            return c->err->code;
        if (a->n_ints)
            memcpy(t.data, a->ints, sizeof(int64_t) * a->n_ints);
    } else if (mge_onnx_attr(n, "value_string") || mge_onnx_attr(n, "value_strings")) {
        return mge_onnx_unsupported(c, n, "string constants");
    } else if (mge_onnx_attr(n, "sparse_value")) {
        return mge_onnx_unsupported(c, n, "sparse constants");
    } else {
        return mge_onnx_fail(c, n, "no value attribute");
    }
    int v = mge_onnx_const(c, n, &t);
    if (v < 0)
        return c->err->code ? c->err->code : MGE_ERR_INVALID;
    return mge_onnx_alias(c, n, 0, v);
}

static mge_status conv_identity(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x = mge_onnx_in(c, n, 0);
    if (x < 0)
        return mge_onnx_fail(c, n, "no input");
    return mge_onnx_alias(c, n, 0, x);
}

/* Dropout at inference is the identity; its mask output is not computed. */
static mge_status conv_dropout(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x = mge_onnx_in(c, n, 0);
    if (x < 0)
        return mge_onnx_fail(c, n, "no input");
    int tm = mge_onnx_in(c, n, 2);
    if (tm >= 0) {
        double v[1];
        int cnt;
        mge_status s = mge_onnx_known(c, n, tm, "training_mode", v, 1, &cnt);
        if (s)
            return s;
        if (cnt == 1 && v[0] != 0)
            return mge_onnx_unsupported(c, n, "training_mode = true (mge imports inference graphs; mge-train adds "
                                        "its own dropout)");
    }
    mge_status s = mge_onnx_alias(c, n, 0, x);
    if (s || n->n_output < 2 || !n->output[1] || !*n->output[1])
        return s;
    /* the mask at inference: all true, x's shape */
    int sh = mge_onnx_emit_tmp(c, n, MGE_OP_SHAPE, 1, &x, 0, NULL);
    if (sh < 0)
        return c->err->code;
    mge_attr a[2] = {mge_onnx_af(MGE_KEY_value, 1.0), mge_onnx_ai(MGE_KEY_dtype, MGE_BOOL)};
    int k = mge_onnx_emit_tmp(c, n, MGE_OP_CONSTANT_OF_SHAPE, 1, &sh, 2, a);
    return k < 0 ? c->err->code : mge_onnx_alias(c, n, 1, k);
}

/* ---------------------------------------------------------------- Conv */

static mge_status conv_conv(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x = mge_onnx_in(c, n, 0), w = mge_onnx_in(c, n, 1), b = mge_onnx_in(c, n, 2);
    if (x < 0 || w < 0)
        return mge_onnx_fail(c, n, "expected inputs X and W");
    const mge_value *xv = mge_onnx_value(c, x), *wv = mge_onnx_value(c, w);
    int rank = xv->ndim, nsp = rank - 2;
    if (nsp < 1 || nsp > 3)
        return mge_onnx_unsupported(c, n, "a %d-D convolution (mge has 1-D, 2-D and 3-D)", nsp);
    if (wv->ndim != rank)
        return mge_onnx_fail(c, n, "W has rank %d, X rank %d", wv->ndim, rank);
    for (int i = 0; i < rank; i++)
        if (wv->dims[i] < 1 || mge_dim_is_symbol(wv->dims[i]))
            return mge_onnx_unsupported(c, n, "W's shape is not known at import");
    if (xv->dtype != MGE_F32)
        return mge_onnx_unsupported(c, n, "Conv over %s (mge convolves f32)", mge_dtype_name(xv->dtype));
    int64_t k[3], s[3], d[3], pb[3], pe[3];
    mge_status st;
    if ((st = window(c, n, nsp, wv->dims + 2, k, s, d)) ||
        (st = mge_onnx_pads(c, n, nsp, xv->dims + 2, k, s, d, pb, pe)))
        return st;
    int64_t group = mge_onnx_attr_i(n, "group", 1);
    if (group < 1)
        return mge_onnx_fail(c, n, "group %lld: expected >= 1", (long long)group);
    int sym = 1;
    for (int i = 0; i < nsp; i++)
        sym &= pb[i] == pe[i];
    int xin = x;
    int64_t pad[3];
    for (int i = 0; i < nsp; i++)
        pad[i] = sym ? pb[i] : 0;
    if (!sym && (xin = mge_onnx_pad_input(c, n, x, nsp, pb, pe, 0.0)) < 0)
        return c->err->code;
    mge_onnx_make_param(c, w, 0);
    if (b >= 0)
        mge_onnx_make_param(c, b, 0);
    int op = nsp == 1 ? MGE_OP_CONV1D : nsp == 2 ? MGE_OP_CONV2D : MGE_OP_CONV3D;
    mge_attr a[7] = {mge_onnx_ai(MGE_KEY_out, wv->dims[0]), mge_onnx_ais(MGE_KEY_kernel, nsp, k),
                     mge_onnx_ais(MGE_KEY_stride, nsp, s), mge_onnx_ais(MGE_KEY_pad, nsp, pad),
                     mge_onnx_ais(MGE_KEY_dilation, nsp, d), mge_onnx_ai(MGE_KEY_groups, group),
                     mge_onnx_ab(MGE_KEY_bias, b >= 0)};
    int in[3] = {xin, w, b};
    return mge_onnx_emit(c, n, op, b >= 0 ? 3 : 2, in, 7, a, 1) < 0 ? c->err->code : MGE_OK;
}

/* ---------------------------------------------------------------- Gemm, MatMul */

int mge_onnx_scalar(mge_onnx_ctx *c, mge_onnx_node *n, mge_dtype dt, double v); /* onnx_ops_math.c */

/* alpha * v (a scalar mul node, the scalar in v's dtype), or v when alpha is 1. */
static int scaled(mge_onnx_ctx *c, mge_onnx_node *n, int v, double alpha)
{
    if (alpha == 1.0)
        return v;
    float f = (float)alpha;
    mge_dtype dt = mge_onnx_value(c, v)->dtype;
    int k = dt == MGE_F64 ? mge_onnx_scalar(c, n, dt, alpha) : mge_onnx_const_f32(c, n, 0, NULL, &f);
    if (k < 0)
        return -1;
    int in[2] = {v, k};
    return mge_onnx_emit_tmp(c, n, MGE_OP_MUL, 2, in, 0, NULL);
}

static mge_status conv_gemm(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int a = mge_onnx_in(c, n, 0), b = mge_onnx_in(c, n, 1), cc = mge_onnx_in(c, n, 2);
    if (a < 0 || b < 0)
        return mge_onnx_fail(c, n, "expected inputs A and B");
    double alpha = mge_onnx_attr_f(n, "alpha", 1.0), beta = mge_onnx_attr_f(n, "beta", 1.0);
    int ta = (int)mge_onnx_attr_i(n, "transA", 0), tb = (int)mge_onnx_attr_i(n, "transB", 0);
    const mge_value *av = mge_onnx_value(c, a), *bv = mge_onnx_value(c, b);
    const mge_value *cv = cc >= 0 ? mge_onnx_value(c, cc) : NULL;
    if (av->ndim != 2 || bv->ndim != 2)
        return mge_onnx_fail(c, n, "A and B must be 2-D (ranks %d and %d)", av->ndim, bv->ndim);
    if ((av->dtype != MGE_F32 && av->dtype != MGE_F64) || bv->dtype != av->dtype || (cv && cv->dtype != av->dtype))
        return mge_onnx_unsupported(c, n, "Gemm over %s (mge multiplies f32 and f64)", mge_dtype_name(av->dtype));
    int64_t nout = tb ? bv->dims[0] : bv->dims[1];
    /* A W^T + b: PyTorch's Linear, mge's linear (fast path, trainable names) */
    if (!ta && tb && alpha == 1.0 && (!cv || (beta == 1.0 && cv->ndim == 1 && cv->dims[0] == nout)) && nout > 0 &&
        !mge_dim_is_symbol(nout)) {
        mge_onnx_make_param(c, b, 0);
        if (cc >= 0)
            mge_onnx_make_param(c, cc, 0);
        mge_attr at[2] = {mge_onnx_ai(MGE_KEY_out, nout), mge_onnx_ab(MGE_KEY_bias, cc >= 0)};
        int in[3] = {a, b, cc};
        return mge_onnx_emit(c, n, MGE_OP_LINEAR, cc >= 0 ? 3 : 2, in, 2, at, 1) < 0 ? c->err->code : MGE_OK;
    }
    mge_attr at[2] = {mge_onnx_ab(MGE_KEY_transpose_a, ta), mge_onnx_ab(MGE_KEY_transpose_b, tb)};
    int in[2] = {a, b};
    int y;
    if (cc < 0 || beta == 0.0) {
        if (alpha == 1.0)
            return mge_onnx_emit(c, n, MGE_OP_MATMUL, 2, in, 2, at, 1) < 0 ? c->err->code : MGE_OK;
        if ((y = mge_onnx_emit_tmp(c, n, MGE_OP_MATMUL, 2, in, 2, at)) < 0)
            return c->err->code;
        float f = (float)alpha;
        int k = av->dtype == MGE_F64 ? mge_onnx_scalar(c, n, MGE_F64, alpha) : mge_onnx_const_f32(c, n, 0, NULL, &f);
        int in2[2] = {y, k};
        return k < 0 || mge_onnx_emit(c, n, MGE_OP_MUL, 2, in2, 0, NULL, 1) < 0 ? c->err->code : MGE_OK;
    }
    if ((y = mge_onnx_emit_tmp(c, n, MGE_OP_MATMUL, 2, in, 2, at)) < 0 || (y = scaled(c, n, y, alpha)) < 0)
        return c->err->code;
    int z = scaled(c, n, cc, beta);
    if (z < 0)
        return c->err->code;
    int in2[2] = {y, z};
    return mge_onnx_emit(c, n, MGE_OP_ADD, 2, in2, 0, NULL, 1) < 0 ? c->err->code : MGE_OK;
}

static mge_status conv_matmul(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int a = mge_onnx_in(c, n, 0), b = mge_onnx_in(c, n, 1);
    if (a < 0 || b < 0)
        return mge_onnx_fail(c, n, "expected inputs A and B");
    const mge_value *av = mge_onnx_value(c, a), *bv = mge_onnx_value(c, b);
    if ((av->dtype != MGE_F32 && av->dtype != MGE_F64) || bv->dtype != av->dtype)
        return mge_onnx_unsupported(c, n, "MatMul over %s and %s (mge multiplies f32 and f64)",
                                    mge_dtype_name(av->dtype), mge_dtype_name(bv->dtype));
    mge_onnx_make_param(c, b, 0);
    int in[2] = {a, b};
    return mge_onnx_emit(c, n, MGE_OP_MATMUL, 2, in, 0, NULL, 1) < 0 ? c->err->code : MGE_OK;
}

/* ---------------------------------------------------------------- BatchNormalization */

static mge_status conv_batchnorm(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int in[5];
    for (int i = 0; i < 5; i++)
        if ((in[i] = mge_onnx_in(c, n, i)) < 0)
            return mge_onnx_fail(c, n, "expected 5 inputs (X, scale, B, input_mean, input_var)");
    if (mge_onnx_attr_i(n, "training_mode", 0))
        return mge_onnx_batchnorm_train(c, n, in);   /* batch statistics, plain ops */
    if (c->opset < 9 && mge_onnx_attr_i(n, "spatial", 1) == 0)
        return mge_onnx_unsupported(c, n, "spatial = 0 (per-element statistics)");
    /* the training outputs of old opsets stay undefined: refused if read */
    const mge_value *xv = mge_onnx_value(c, in[0]);
    if (xv->ndim < 2)
        return mge_onnx_fail(c, n, "X has rank %d: expected at least 2", xv->ndim);
    if (xv->dtype != MGE_F32)
        return mge_onnx_unsupported(c, n, "BatchNormalization over %s", mge_dtype_name(xv->dtype));
    for (int i = 1; i < 5; i++)
        if (mge_onnx_value(c, in[i])->dtype != MGE_F32)
            return mge_onnx_unsupported(c, n, "BatchNormalization with %s statistics",
                                        mge_dtype_name(mge_onnx_value(c, in[i])->dtype));
    mge_onnx_make_param(c, in[1], 0);
    mge_onnx_make_param(c, in[2], 0);
    mge_onnx_make_param(c, in[3], 1);
    mge_onnx_make_param(c, in[4], 1);
    /* ONNX's momentum weighs the running value (0.9); PyTorch's the new one (0.1) */
    double mom = 1.0 - mge_onnx_attr_f(n, "momentum", 0.9);
    mge_attr a[2] = {mge_onnx_af(MGE_KEY_eps, mge_onnx_attr_f(n, "epsilon", 1e-5)), mge_onnx_af(MGE_KEY_momentum, mom)};
    return mge_onnx_emit(c, n, MGE_OP_BATCHNORM, 5, in, 2, a, 1) < 0 ? c->err->code : MGE_OK;
}

/* ---------------------------------------------------------------- pooling */

static mge_status pool2d(mge_onnx_ctx *c, mge_onnx_node *n, int maxp)
{
    int x = mge_onnx_in(c, n, 0);
    if (x < 0)
        return mge_onnx_fail(c, n, "no input");
    const mge_value *xv = mge_onnx_value(c, x);
    if (xv->ndim == 3)
        return mge_onnx_pool1d(c, n, maxp);
    /* MaxPool over uint8/int8 stays here (QDQ models pool quantized values:
     * max commutes with dequantization); 3-D, other dtypes and Indices: the
     * 3-D pools (onnx_ops_pool3d.c) */
    int q8 = maxp && (xv->dtype == MGE_U8 || xv->dtype == MGE_I8);
    if (xv->ndim != 4 || (xv->dtype != MGE_F32 && !q8) || (maxp && n->n_output > 1 && n->output[1] && *n->output[1]) ||
        (maxp && mge_onnx_attr_i(n, "storage_order", 0)))
        return mge_onnx_pool3d(c, n, maxp);
    int64_t k[2], s[2], d[2], pb[2], pe[2];
    mge_status st;
    if ((st = window(c, n, 2, NULL, k, s, d)) || (st = mge_onnx_pads(c, n, 2, xv->dims + 2, k, s, d, pb, pe)))
        return st;
    int ceil_mode = (int)mge_onnx_attr_i(n, "ceil_mode", 0);
    int cip = (int)mge_onnx_attr_i(n, "count_include_pad", 0);
    if (!maxp && (d[0] != 1 || d[1] != 1))
        return mge_onnx_pool3d(c, n, 0);
    int sym = pb[0] == pe[0] && pb[1] == pe[1];
    /* PyTorch's (and mge's) pools take pad <= kernel/2 */
    for (int i = 0; i < 2; i++)
        if (2 * pb[i] > k[i] || 2 * pe[i] > k[i])
            sym = 0;
    int xin = x;
    int64_t pad[2] = {sym ? pb[0] : 0, sym ? pb[1] : 0};
    if (!sym) {
        if (q8)
            return mge_onnx_unsupported(c, n, "asymmetric pads over %s", mge_dtype_name(xv->dtype));
        if (ceil_mode)
            return mge_onnx_unsupported(c, n, "asymmetric pads with ceil_mode");
        if ((xin = mge_onnx_pad_input(c, n, x, 2, pb, pe, maxp ? -INFINITY : 0.0)) < 0)
            return c->err->code;
        if (!maxp && !cip) {
            /* the mean over the window's elements inside x: the padded sums
             * over the padded count of ones */
            int sh = mge_onnx_emit_tmp(c, n, MGE_OP_SHAPE, 1, &x, 0, NULL);
            mge_attr oa[1] = {mge_onnx_af(MGE_KEY_value, 1.0)};
            int ones = sh < 0 ? -1 : mge_onnx_emit_tmp(c, n, MGE_OP_CONSTANT_OF_SHAPE, 1, &sh, 1, oa);
            int cnt = ones < 0 ? -1 : mge_onnx_pad_input(c, n, ones, 2, pb, pe, 0.0);
            mge_attr pa[4] = {mge_onnx_ais(MGE_KEY_kernel, 2, k), mge_onnx_ais(MGE_KEY_stride, 2, s),
                              mge_onnx_ais(MGE_KEY_pad, 2, (int64_t[2]){0, 0}), mge_onnx_ab(MGE_KEY_count_include_pad, 1)};
            int num = cnt < 0 ? -1 : mge_onnx_emit_tmp(c, n, MGE_OP_AVGPOOL2D, 1, &xin, 4, pa);
            int den = num < 0 ? -1 : mge_onnx_emit_tmp(c, n, MGE_OP_AVGPOOL2D, 1, &cnt, 4, pa);
            if (den < 0)
                return c->err->code;
            int in2[2] = {num, den};
            return mge_onnx_emit(c, n, MGE_OP_DIV, 2, in2, 0, NULL, 1) < 0 ? c->err->code : MGE_OK;
        }
    }
    mge_attr a[6];
    int na = 0;
    a[na++] = mge_onnx_ais(MGE_KEY_kernel, 2, k);
    a[na++] = mge_onnx_ais(MGE_KEY_stride, 2, s);
    a[na++] = mge_onnx_ais(MGE_KEY_pad, 2, pad);
    a[na++] = mge_onnx_ab(MGE_KEY_ceil_mode, ceil_mode);
    if (maxp)
        a[na++] = mge_onnx_ais(MGE_KEY_dilation, 2, d);
    else
        a[na++] = mge_onnx_ab(MGE_KEY_count_include_pad, cip);
    return mge_onnx_emit(c, n, maxp ? MGE_OP_MAXPOOL2D : MGE_OP_AVGPOOL2D, 1, &xin, na, a, 1) < 0 ? c->err->code
                                                                                              : MGE_OK;
}

static mge_status conv_maxpool(mge_onnx_ctx *c, mge_onnx_node *n)
{
    return pool2d(c, n, 1);
}

static mge_status conv_avgpool(mge_onnx_ctx *c, mge_onnx_node *n)
{
    return pool2d(c, n, 0);
}

/* GlobalAveragePool / GlobalMaxPool: a reduction over dims 2.. kept as 1s. */
static mge_status global_pool(mge_onnx_ctx *c, mge_onnx_node *n, int op)
{
    int x = mge_onnx_in(c, n, 0);
    if (x < 0)
        return mge_onnx_fail(c, n, "no input");
    const mge_value *xv = mge_onnx_value(c, x);
    if (xv->ndim < 3)
        return mge_onnx_fail(c, n, "X has rank %d: expected at least 3", xv->ndim);
    if (op == MGE_OP_MEAN && xv->ndim == 4)
        return mge_onnx_emit(c, n, MGE_OP_GLOBAL_AVGPOOL, 1, &x, 0, NULL, 1) < 0 ? c->err->code : MGE_OK;
    int64_t ax[MGE_MAX_DIMS];
    for (int i = 2; i < xv->ndim; i++)
        ax[i - 2] = i;
    mge_attr a[2] = {mge_onnx_ais(MGE_KEY_axis, xv->ndim - 2, ax), mge_onnx_ab(MGE_KEY_keepdim, 1)};
    return mge_onnx_emit(c, n, op, 1, &x, 2, a, 1) < 0 ? c->err->code : MGE_OK;
}

static mge_status conv_gap(mge_onnx_ctx *c, mge_onnx_node *n)
{
    return global_pool(c, n, MGE_OP_MEAN);
}

static mge_status conv_gmp(mge_onnx_ctx *c, mge_onnx_node *n)
{
    return global_pool(c, n, MGE_OP_MAX);
}

/* ---------------------------------------------------------------- Flatten, Reshape */

static mge_status conv_flatten(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x = mge_onnx_in(c, n, 0);
    if (x < 0)
        return mge_onnx_fail(c, n, "no input");
    const mge_value *xv = mge_onnx_value(c, x);
    int64_t axis = mge_onnx_attr_i(n, "axis", 1);
    if (axis < -xv->ndim || axis > xv->ndim)
        return mge_onnx_fail(c, n, "axis %lld is out of range for rank %d", (long long)axis, xv->ndim);
    if (axis < 0)
        axis += xv->ndim;
    if (axis == 1 && xv->ndim >= 1) {
        mge_attr a[1] = {mge_onnx_ai(MGE_KEY_start, 1)};
        return mge_onnx_emit(c, n, MGE_OP_FLATTEN, 1, &x, 1, a, 1) < 0 ? c->err->code : MGE_OK;
    }
    /* [prod(dims[:axis]), prod(dims[axis:])]: a reshape when the leading
     * dims are known at import, or axis 0 ([1, -1]) */
    int64_t lead = 1;
    for (int i = 0; i < axis; i++) {
        if (xv->dims[i] < 0 || mge_dim_is_symbol(xv->dims[i]))
            return mge_onnx_unsupported(c, n, "axis %lld over leading dims not known at import", (long long)axis);
        lead *= xv->dims[i];
    }
    int64_t sh[2] = {lead, axis == xv->ndim ? 1 : -1};
    mge_attr a[1] = {mge_onnx_ais(MGE_KEY_shape, 2, sh)};
    return mge_onnx_emit(c, n, MGE_OP_RESHAPE, 1, &x, 1, a, 1) < 0 ? c->err->code : MGE_OK;
}

static mge_status conv_reshape(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x = mge_onnx_in(c, n, 0), s = mge_onnx_in(c, n, 1);
    if (x < 0 || s < 0)
        return mge_onnx_fail(c, n, "expected inputs data and shape");
    const mge_value *sv = mge_onnx_value(c, s);
    if (sv->dtype != MGE_I64 || sv->ndim != 1)
        return mge_onnx_fail(c, n, "shape must be a 1-D int64 tensor");
    if (mge_onnx_attr_i(n, "allowzero", 0)) {
        /* allowzero: a 0 means an empty dim, not "copy": mge reads 0 as copy */
        int64_t v[MGE_MAX_DIMS];
        int cnt;
        mge_status st = mge_onnx_known_ints(c, n, s, "shape", v, MGE_MAX_DIMS, &cnt);
        if (st)
            return st;
        for (int i = 0; i < cnt; i++)
            if (v[i] == 0)
                return mge_onnx_unsupported(c, n, "allowzero = 1 with a 0 in the shape (an empty dim)");
    }
    int in[2] = {x, s};
    return mge_onnx_emit(c, n, MGE_OP_RESHAPE, 2, in, 0, NULL, 1) < 0 ? c->err->code : MGE_OK;
}

/* ---------------------------------------------------------------- If */

/* If whose condition is known at import becomes the chosen branch, inline;
 * other control flow is not supported. */
static mge_status conv_if(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int cond = mge_onnx_in(c, n, 0);
    double v[1];
    int cnt = 0;
    if (cond < 0)
        return mge_onnx_fail(c, n, "no condition");
    if (!mge_onnx_data(c, cond)) {
        mge_onnx_note_needs(c, cond);
        return mge_onnx_unsupported(c, n, "a condition computed at run time (control flow)");
    }
    mge_status s = mge_onnx_known(c, n, cond, "condition", v, 1, &cnt);
    if (s)
        return s;
    if (cnt != 1)
        return mge_onnx_fail(c, n, "the condition has %d elements: expected 1", cnt);
    const Onnx__AttributeProto *a = mge_onnx_attr(n, v[0] != 0 ? "then_branch" : "else_branch");
    if (!a || !a->g)
        return mge_onnx_fail(c, n, "no %s", v[0] != 0 ? "then_branch" : "else_branch");
    const Onnx__GraphProto *sg = a->g;
    if (sg->n_output != n->n_output)
        return mge_onnx_fail(c, n, "the branch has %zu outputs, the node %zu", sg->n_output, n->n_output);
    if ((s = mge_onnx_add_initializers(c, sg->n_initializer, sg->initializer)) ||
        (s = mge_onnx_nodes(c, sg->n_node, sg->node)))
        return s;
    for (size_t o = 0; o < sg->n_output; o++) {
        int y = mge_onnx_lookup(c, sg->output[o]->name);
        if (y < 0)
            return mge_onnx_unsupported(c, n, "branch output '%s' is not computed", sg->output[o]->name);
        if ((s = mge_onnx_alias(c, n, (int)o, y)))
            return s;
    }
    return MGE_OK;
}

static mge_status conv_loop(mge_onnx_ctx *c, mge_onnx_node *n)
{
    return mge_onnx_unsupported(c, n, "control flow (%s) is not supported", n->op_type);
}

const mge_onnx_op mge_onnx_ops_core[] = {
    {"Constant", conv_constant, 9},
    {"Identity", conv_identity, 1},
    {"Dropout", conv_dropout, 7},
    {"Conv", conv_conv, 1},
    {"Gemm", conv_gemm, 7},
    {"MatMul", conv_matmul, 1},
    {"BatchNormalization", conv_batchnorm, 7},
    {"MaxPool", conv_maxpool, 1},
    {"AveragePool", conv_avgpool, 7},
    {"GlobalAveragePool", conv_gap, 1},
    {"GlobalMaxPool", conv_gmp, 1},
    {"Flatten", conv_flatten, 1},
    {"Reshape", conv_reshape, 5},
    {"If", conv_if, 1},
    {"Loop", conv_loop, 1},
    {"Scan", conv_loop, 1},
    {NULL, NULL, 0},
};
