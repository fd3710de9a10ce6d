/* onnx_ops_bntrain.c — BatchNormalization with training_mode = 1 (opset
 * 14 on; core's converter hands it here), lowered onto plain ops as the
 * spec computes it: Y normalized with the batch statistics (mean and
 * biased variance over every axis but 1), and the running statistics
 * input_mean * momentum + batch_mean * (1 - momentum) (the same for the
 * variance) as outputs 1 and 2. The graph computes them; nothing updates
 * state in place (mge-train trains its own batchnorm). */
#include "onnx.h"

#include <string.h>

static int scalar(mge_onnx_ctx *c, mge_onnx_node *n, double v)
{
    float f = (float)v;
    return mge_onnx_const_f32(c, n, 0, NULL, &f);
}

static int wants(mge_onnx_node *n, int k)
{
    return k < (int)n->n_output && n->output[k] && *n->output[k];
}

mge_status mge_onnx_batchnorm_train(mge_onnx_ctx *c, mge_onnx_node *n, const int *in)
{
    const mge_value *xv = mge_onnx_value(c, in[0]);
    int r = xv->ndim;
    if (r < 2)
        return mge_onnx_fail(c, n, "X has rank %d: expected at least 2", r);
    for (int i = 0; i < 5; i++)
        if (mge_onnx_value(c, in[i])->dtype != MGE_F32)
            return mge_onnx_unsupported(c, n, "training-mode BatchNormalization over %s",
                                        mge_dtype_name(mge_onnx_value(c, in[i])->dtype));
    int64_t ax[MGE_MAX_DIMS], nax = 0, cs[MGE_MAX_DIMS], c1 = -1;
    for (int i = 0; i < r; i++) {
        if (i != 1)
            ax[nax++] = i;
        cs[i] = i == 1 ? -1 : 1;
    }
    double eps = mge_onnx_attr_f(n, "epsilon", 1e-5), mom = mge_onnx_attr_f(n, "momentum", 0.9);
    mge_attr ka[2] = {mge_onnx_ais(MGE_KEY_axis, (int)nax, ax), mge_onnx_ab(MGE_KEY_keepdim, 1)};
    int x = in[0];
    int m = mge_onnx_emit_tmp(c, n, MGE_OP_MEAN, 1, &x, 2, ka);
    int dm = mge_onnx_emit2(c, n, MGE_OP_SUB, x, m);
    int sq = mge_onnx_emit2(c, n, MGE_OP_MUL, dm, dm);
    int v = sq < 0 ? -1 : mge_onnx_emit_tmp(c, n, MGE_OP_MEAN, 1, &sq, 2, ka);
    int den = mge_onnx_emit2(c, n, MGE_OP_ADD, v, scalar(c, n, eps));
    den = den < 0 ? -1 : mge_onnx_emit_tmp(c, n, MGE_OP_SQRT, 1, &den, 0, NULL);
    int sc = mge_onnx_reshape_tmp(c, n, in[1], r, cs), b = mge_onnx_reshape_tmp(c, n, in[2], r, cs);
    int y = mge_onnx_emit2(c, n, MGE_OP_MUL, mge_onnx_emit2(c, n, MGE_OP_DIV, dm, den), sc);
    y = mge_onnx_emit2(c, n, MGE_OP_ADD, y, b);
    if (y < 0)
        return c->err->code ? c->err->code : MGE_ERR_INVALID;
    mge_status st = mge_onnx_alias(c, n, 0, y);
    int stat[2] = {m, v};
    for (int k = 0; !st && k < 2; k++) {
        if (!wants(n, 1 + k))
            continue;
        int s1 = mge_onnx_reshape_tmp(c, n, stat[k], 1, &c1);
        int run = mge_onnx_emit2(c, n, MGE_OP_MUL, in[3 + k], scalar(c, n, mom));
        int now = mge_onnx_emit2(c, n, MGE_OP_MUL, s1, scalar(c, n, 1.0 - mom));
        int o = mge_onnx_emit2(c, n, MGE_OP_ADD, run, now);
        st = o < 0 ? (c->err->code ? c->err->code : MGE_ERR_INVALID) : mge_onnx_alias(c, n, 1 + k, o);
    }
    return st;
}
