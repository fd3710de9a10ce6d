/* onnx_ops_pool3d.c — the ONNX pools mge's 2-D pools do not take, on
 * maxpool3d / avgpool3d (lib/op_pool3d.c): 3-D MaxPool, AveragePool and
 * LpPool; 1-D and 2-D ones with dilated averages, MaxPool's Indices output
 * (storage_order 0 or 1) or i8/u8 input, run over [N,C,1,H,W] or
 * [N,C,1,1,L] (unsqueeze, pool, squeeze: the flat indices come out the same). Pads are ONNX's,
 * asymmetric ones included (the pool's 6-value pad); auto_pad as
 * mge_onnx_pads computes it. LpPool is an average of |x|^p counting pads,
 * times the window size, to the power 1/p. MaxUnpool is max_unpool. */
#include "onnx.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

mge_status mge_onnx_fresh_name(mge_onnx_ctx *c, const char *base, char *out, size_t n);

static int wants(mge_onnx_node *n, int k)
{
    return k < (int)n->n_output && n->output[k] && *n->output[k];
}

/* An mge node of nout fresh outputs (a step of the lowering): their values in v[]. */
static mge_status emit_tmps(mge_onnx_ctx *c, mge_onnx_node *n, int op, int nin, const int *in, int nattr,
                            const mge_attr *at, int nout, int *v)
{
    char names[2][256], base[200];
    const char *np[2];
    for (int i = 0; i < nin; i++)
        if (in[i] < 0)
            return c->err->code ? c->err->code : MGE_ERR_INVALID;
    for (int o = 0; o < nout; o++) {
        snprintf(base, sizeof base, "%s_%s%s", wants(n, 0) ? n->output[0] : "tmp", mge_op_info(op)->name,
                 o ? "_indices" : "");
        if (mge_onnx_fresh_name(c, base, names[o], sizeof names[o]))
            return c->err->code ? c->err->code : MGE_ERR_NOMEM;
        np[o] = names[o];
    }
    mge_error e;
    mge_error_clear(&e);
    int k = mge_graph_add_node(c->g, np[0], op, nin, in, nattr, at, nout, np, &e);
    if (k < 0)
        return mge_onnx_fail(c, n, "%s", e.msg);
    for (int o = 0; o < nout; o++)
        v[o] = c->g->nodes[k].out[o];
    return MGE_OK;
}

/* (un)squeeze the 3 - nsp leading spatial dims (axes 2, 3) */
static int unsq(mge_onnx_ctx *c, mge_onnx_node *n, int op, int x, int nsp)
{
    int64_t ax[2] = {2, 3};
    mge_attr a[1] = {mge_onnx_ais(MGE_KEY_axis, 3 - nsp, ax)};
    return mge_onnx_emit_tmp(c, n, op, 1, &x, 1, a);
}

static int scalar(mge_onnx_ctx *c, mge_onnx_node *n, double v)
{
    float f = (float)v;
    return mge_onnx_const_f32(c, n, 0, NULL, &f);
}

/* kind: 0 AveragePool, 1 MaxPool, 2 LpPool; X of rank 4 or 5. */
mge_status mge_onnx_pool3d(mge_onnx_ctx *c, mge_onnx_node *n, int kind)
{
    int x = mge_onnx_in(c, n, 0);
    if (x < 0)
        return mge_onnx_fail(c, n, "no input");
    const mge_value *xv = mge_onnx_value(c, x);
    int nsp = xv->ndim - 2;
    if (nsp < 1 || nsp > 3)
        return mge_onnx_unsupported(c, n, "%d-D pooling (mge pools 1-D, 2-D and 3-D windows)", nsp);
    mge_dtype dt = xv->dtype;
    if (!mge_dtype_is_float(dt) && !(kind == 1 && (dt == MGE_U8 || dt == MGE_I8)))
        return mge_onnx_unsupported(c, n, "%s over %s", n->op_type, mge_dtype_name(dt));
    if (kind != 1 && wants(n, 1))
        return mge_onnx_fail(c, n, "%s has one output", n->op_type);
    int64_t t[8], k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, d[3] = {1, 1, 1}, pb[3] = {0}, pe[3] = {0};
    int off = 3 - nsp, cnt;
    if ((cnt = mge_onnx_attr_ints(n, "kernel_shape", t, 8)) != nsp)
        return mge_onnx_fail(c, n, "kernel_shape must have %d values", nsp);
    for (int i = 0; i < nsp; i++)
        k[off + i] = t[i];
    if ((cnt = mge_onnx_attr_ints(n, "strides", t, 8)) >= 0) {
        if (cnt != nsp)
            return mge_onnx_fail(c, n, "strides has %d values: expected %d", cnt, nsp);
        for (int i = 0; i < nsp; i++)
            s[off + i] = t[i];
    }
    if ((cnt = mge_onnx_attr_ints(n, "dilations", t, 8)) >= 0) {
        if (cnt != nsp)
            return mge_onnx_fail(c, n, "dilations has %d values: expected %d", cnt, nsp);
        for (int i = 0; i < nsp; i++)
            d[off + i] = t[i];
    }
    for (int i = 0; i < 3; i++)
        if (k[i] < 1 || s[i] < 1 || d[i] < 1)
            return mge_onnx_fail(c, n, "kernel %lld, stride %lld, dilation %lld: expected >= 1", (long long)k[i],
                                 (long long)s[i], (long long)d[i]);
    mge_status st = mge_onnx_pads(c, n, nsp, xv->dims + 2, k + off, s + off, d + off, pb + off, pe + off);
    if (st)
        return st;
    int ceil_mode = (int)mge_onnx_attr_i(n, "ceil_mode", 0);
    int64_t p = kind == 2 ? mge_onnx_attr_i(n, "p", 2) : 0;
    if (kind == 2 && p < 1)
        return mge_onnx_fail(c, n, "p %lld: expected >= 1", (long long)p);
    if (kind == 2 && ceil_mode)
        return mge_onnx_unsupported(c, n, "LpPool with ceil_mode = 1");
    int cip = kind == 2 || (int)mge_onnx_attr_i(n, "count_include_pad", 0);
    if (kind == 0 && cip && ceil_mode)
        for (int i = off; i < 3; i++) {
            /* a ceil-mode window past the end pad: ONNX's reference counts
             * the overhang in the divisor, PyTorch (and mge) do not */
            int64_t in = xv->dims[2 + i - off], win = d[i] * (k[i] - 1) + 1, span = in + pb[i] + pe[i] - win;
            if (in < 0)
                return mge_onnx_unsupported(c, n, "ceil_mode with count_include_pad over a symbolic dim");
            int64_t o = span < 0 ? 0 : (span + s[i] - 1) / s[i] + 1;
            if (o > 0 && (o - 1) * s[i] >= in + pb[i])
                o--;
            if (o > 0 && (o - 1) * s[i] - pb[i] + win > in + pe[i])
                return mge_onnx_unsupported(c, n,
                                            "ceil_mode with count_include_pad where the last window overhangs the "
                                            "end pad (ONNX counts the overhang in the divisor, mge as PyTorch not)");
        }
    int64_t so = kind == 1 ? mge_onnx_attr_i(n, "storage_order", 0) : 0;
    if (so != 0 && so != 1)
        return mge_onnx_fail(c, n, "storage_order %lld: expected 0 or 1", (long long)so);
    int y = x;
    if (kind == 2) {
        /* |x|^p */
        int a = p == 2 ? x : mge_onnx_emit_tmp(c, n, MGE_OP_ABS, 1, &x, 0, NULL);
        if (p == 2)
            y = mge_onnx_emit2(c, n, MGE_OP_MUL, x, x);
        else if (p > 1)
            y = mge_onnx_emit2(c, n, MGE_OP_POW, a, scalar(c, n, (double)p));
        else
            y = a;
    }
    if (nsp < 3)
        y = unsq(c, n, MGE_OP_UNSQUEEZE, y, nsp);
    if (y < 0)
        return c->err->code;
    int64_t pad[6] = {pb[0], pb[1], pb[2], pe[0], pe[1], pe[2]};
    mge_attr a[6] = {mge_onnx_ais(MGE_KEY_kernel, 3, k), mge_onnx_ais(MGE_KEY_stride, 3, s),
                     mge_onnx_ais(MGE_KEY_pad, 6, pad), mge_onnx_ais(MGE_KEY_dilation, 3, d),
                     mge_onnx_ab(MGE_KEY_ceil_mode, ceil_mode),
                     kind == 1 ? mge_onnx_ai(MGE_KEY_storage_order, so)
                               : mge_onnx_ab(MGE_KEY_count_include_pad, cip)};
    int v[2] = {-1, -1}, nout = kind == 1 && wants(n, 1) ? 2 : 1;
    if ((st = emit_tmps(c, n, kind == 1 ? MGE_OP_MAXPOOL3D : MGE_OP_AVGPOOL3D, 1, &y, 6, a, nout, v)))
        return st;
    if (nsp < 3) {
        for (int o = 0; o < nout; o++)
            if ((v[o] = unsq(c, n, MGE_OP_SQUEEZE, v[o], nsp)) < 0)
                return c->err->code;
    }
    if (nout == 2 && (st = mge_onnx_alias(c, n, 1, v[1])))
        return st;
    y = v[0];
    if (kind != 2)
        return mge_onnx_alias(c, n, 0, y);
    /* the mean counting pads times the window: the sum; then the p-th root */
    y = mge_onnx_emit2(c, n, MGE_OP_MUL, y, scalar(c, n, (double)(k[0] * k[1] * k[2])));
    if (p == 1)
        return y < 0 ? c->err->code : mge_onnx_alias(c, n, 0, y);
    if (p == 2)
        return mge_onnx_finish(c, n, MGE_OP_SQRT, 1, &y, 0, NULL);
    int in[2] = {y, scalar(c, n, 1.0 / (double)p)};
    return mge_onnx_finish(c, n, MGE_OP_POW, 2, in, 0, NULL);
}

/* MaxUnpool(X, I[, output_shape]): max_unpool; output_shape a constant. */
static mge_status conv_maxunpool(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x = mge_onnx_in(c, n, 0), idx = mge_onnx_in(c, n, 1), sh = mge_onnx_in(c, n, 2);
    if (x < 0 || idx < 0)
        return mge_onnx_fail(c, n, "expected inputs X and I");
    const mge_value *xv = mge_onnx_value(c, x);
    int nsp = xv->ndim - 2;
    if (nsp < 1 || nsp > 3)
        return mge_onnx_unsupported(c, n, "MaxUnpool over rank %d (mge unpools 1-D to 3-D)", xv->ndim);
    if (mge_onnx_value(c, idx)->dtype != MGE_I64)
        return mge_onnx_fail(c, n, "I is %s: expected int64", mge_dtype_name(mge_onnx_value(c, idx)->dtype));
    int64_t t[8], k[3], s[3], pb[3], pe[3];
    if (mge_onnx_attr_ints(n, "kernel_shape", t, 8) != nsp)
        return mge_onnx_fail(c, n, "kernel_shape must have %d values", nsp);
    for (int i = 0; i < nsp; i++)
        k[i] = t[i];
    int cnt = mge_onnx_attr_ints(n, "strides", t, 8);
    if (cnt >= 0 && cnt != nsp)
        return mge_onnx_fail(c, n, "strides has %d values: expected %d", cnt, nsp);
    for (int i = 0; i < nsp; i++)
        s[i] = cnt >= 0 ? t[i] : 1;
    cnt = mge_onnx_attr_ints(n, "pads", t, 8);
    if (cnt >= 0 && cnt != 2 * nsp)
        return mge_onnx_fail(c, n, "pads has %d values: expected %d", cnt, 2 * nsp);
    for (int i = 0; i < nsp; i++)
        pb[i] = cnt >= 0 ? t[i] : 0, pe[i] = cnt >= 0 ? t[nsp + i] : 0;
    int64_t pad[6];
    for (int i = 0; i < nsp; i++)
        pad[i] = pb[i], pad[nsp + i] = pe[i];
    mge_attr a[3] = {mge_onnx_ais(MGE_KEY_kernel, nsp, k), mge_onnx_ais(MGE_KEY_stride, nsp, s),
                     mge_onnx_ais(MGE_KEY_pad, 2 * nsp, pad)};
    int in[2] = {x, idx};
    if (sh < 0)
        return mge_onnx_finish(c, n, MGE_OP_MAX_UNPOOL, 2, in, 3, a);
    /* output_shape: ONNX unpools into the inferred shape (the indices are
     * flat over it) and puts that at the origin of zeros of output_shape */
    double v[8];
    int cnt2;
    mge_status st = mge_onnx_known(c, n, sh, "output_shape", v, 8, &cnt2);
    if (st)
        return st;
    if (cnt2 != xv->ndim)
        return mge_onnx_fail(c, n, "output_shape has %d values: expected %d", cnt2, xv->ndim);
    int64_t zero[3] = {0, 0, 0}, grow[3];
    for (int i = 0; i < nsp; i++) {
        int64_t d = xv->dims[2 + i];
        if (d < 0)
            return mge_onnx_unsupported(c, n, "output_shape over symbolic spatial dims");
        int64_t inf = (d - 1) * s[i] - pb[i] - pe[i] + k[i];
        grow[i] = (int64_t)v[2 + i] - inf;
        if (grow[i] < 0)
            return mge_onnx_fail(c, n, "output_shape[%d] = %lld is smaller than the unpooled size %lld", 2 + i,
                                 (long long)v[2 + i], (long long)inf);
    }
    int y = mge_onnx_emit_tmp(c, n, MGE_OP_MAX_UNPOOL, 2, in, 3, a);
    int yp = y < 0 ? -1 : mge_onnx_pad_input(c, n, y, nsp, zero, grow, 0.0);
    if (yp < 0)
        return c->err->code;
    return mge_onnx_alias(c, n, 0, yp);
}

const mge_onnx_op mge_onnx_ops_pool3d[] = {
    {"MaxUnpool", conv_maxunpool, 9},
    {NULL, NULL, 0},
};
