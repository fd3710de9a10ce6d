/* onnx_ops_loss.c — ONNX converters for NegativeLogLikelihoodLoss and
 * SoftmaxCrossEntropyLoss, lowered onto gather_elements and reductions:
 *
 *   loss[n, d...] = -x[n, t[n, d...], d...] * w[t[n, d...]]   (0 where t == ignore_index)
 *   none: loss;  sum: sum(loss);  mean: sum(loss) / sum(w[t]) over the kept
 *   elements (their count without weights), as ONNX defines it.
 *
 * SoftmaxCrossEntropyLoss is the same over log_softmax(scores, axis 1),
 * whose value is its optional second output. mge's own cross_entropy is
 * not used: it has no per-class weights and only the mean. */
#include "onnx.h"

#include <string.h>

static int emit1(mge_onnx_ctx *c, mge_onnx_node *n, int op, int a, int b, int nattr, const mge_attr *at)
{
    int in[2] = {a, b};
    return mge_onnx_emit_tmp(c, n, op, b >= 0 ? 2 : 1, in, nattr, at);
}

/* The loss of log-probabilities x [N, C, d...] and targets t [N, d...] into
 * the node's output 0. */
static mge_status nll(mge_onnx_ctx *c, mge_onnx_node *n, int x, int t, int w)
{
    const mge_value *xv = mge_onnx_value(c, x), *tv = mge_onnx_value(c, t);
    if (xv->dtype != MGE_F32)
        return mge_onnx_unsupported(c, n, "a loss over %s (mge computes it in f32)", mge_dtype_name(xv->dtype));
    if (tv->dtype != MGE_I32 && tv->dtype != MGE_I64)
        return mge_onnx_fail(c, n, "the target is %s: expected int32 or int64", mge_dtype_name(tv->dtype));
    if (xv->ndim < 2 || tv->ndim != xv->ndim - 1)
        return mge_onnx_fail(c, n, "input of rank %d and target of rank %d: expected [N, C, d...] and [N, d...]",
                             xv->ndim, tv->ndim);
    if (w >= 0 && (mge_onnx_value(c, w)->ndim != 1 || mge_onnx_value(c, w)->dtype != MGE_F32))
        return mge_onnx_fail(c, n, "the weight must be a 1-D float tensor [C]");
    char red[16];
    mge_onnx_attr_s(n, "reduction", "mean", red, sizeof red);
    int mode = strcmp(red, "none") == 0 ? 0 : strcmp(red, "sum") == 0 ? 1 : strcmp(red, "mean") == 0 ? 2 : -1;
    if (mode < 0)
        return mge_onnx_fail(c, n, "reduction '%s': expected none, sum or mean", red);
    const Onnx__AttributeProto *ia = mge_onnx_attr(n, "ignore_index");
    int valid = -1, ts = t;
    if (ia) {
        int64_t ig = mge_onnx_attr_i(n, "ignore_index", 0);
        int k = mge_onnx_const_i64(c, n, 1, &ig);
        mge_attr ca[1] = {mge_onnx_ai(MGE_KEY_dtype, tv->dtype)};
        int kc = k < 0 ? -1 : emit1(c, n, MGE_OP_CAST, k, -1, 1, ca);
        int eq = kc < 0 ? -1 : emit1(c, n, MGE_OP_EQUAL, t, kc, 0, NULL);
        valid = eq < 0 ? -1 : emit1(c, n, MGE_OP_NOT, eq, -1, 0, NULL);
        int64_t zero = 0;
        int z = valid < 0 ? -1 : mge_onnx_const_i64(c, n, 1, &zero);
        int zc = z < 0 ? -1 : emit1(c, n, MGE_OP_CAST, z, -1, 1, ca);
        int in3[3] = {valid, t, zc};
        ts = zc < 0 ? -1 : mge_onnx_emit_tmp(c, n, MGE_OP_WHERE, 3, in3, 0, NULL);
        if (ts < 0)
            return c->err->code;
    }
    int64_t one = 1;
    mge_attr ua[1] = {mge_onnx_ais(MGE_KEY_axis, 1, &one)};
    int idx = emit1(c, n, MGE_OP_UNSQUEEZE, ts, -1, 1, ua);
    mge_attr ga[1] = {mge_onnx_ai(MGE_KEY_axis, 1)};
    int g = idx < 0 ? -1 : emit1(c, n, MGE_OP_GATHER_ELEMENTS, x, idx, 1, ga);
    int picked = g < 0 ? -1 : emit1(c, n, MGE_OP_SQUEEZE, g, -1, 1, ua);
    if (picked < 0)
        return c->err->code;
    /* per-element weights: w[t], 0 where ignored; -1 when all are 1 */
    int wt = -1;
    if (w >= 0) {
        mge_attr wa[1] = {mge_onnx_ai(MGE_KEY_axis, 0)};
        if ((wt = emit1(c, n, MGE_OP_GATHER, w, ts, 1, wa)) < 0)
            return c->err->code;
    }
    if (valid >= 0) {
        mge_attr fa[1] = {mge_onnx_ai(MGE_KEY_dtype, MGE_F32)};
        int vf = emit1(c, n, MGE_OP_CAST, valid, -1, 1, fa);
        wt = vf < 0 ? -1 : wt >= 0 ? emit1(c, n, MGE_OP_MUL, wt, vf, 0, NULL) : vf;
        if (wt < 0)
            return c->err->code;
    }
    int l = wt >= 0 ? emit1(c, n, MGE_OP_MUL, picked, wt, 0, NULL) : picked;
    if (l < 0)
        return c->err->code;
    if (mode == 0)
        return mge_onnx_emit(c, n, MGE_OP_NEG, 1, &l, 0, NULL, 1) < 0 ? c->err->code : MGE_OK;
    int nl = emit1(c, n, MGE_OP_NEG, l, -1, 0, NULL);
    if (nl < 0)
        return c->err->code;
    if (mode == 1)
        return mge_onnx_emit(c, n, MGE_OP_SUM, 1, &nl, 0, NULL, 1) < 0 ? c->err->code : MGE_OK;
    if (wt < 0)
        return mge_onnx_emit(c, n, MGE_OP_MEAN, 1, &nl, 0, NULL, 1) < 0 ? c->err->code : MGE_OK;
    int num = emit1(c, n, MGE_OP_SUM, nl, -1, 0, NULL);
    int den = num < 0 ? -1 : emit1(c, n, MGE_OP_SUM, wt, -1, 0, NULL);
    if (den < 0)
        return c->err->code;
    int in2[2] = {num, den};
    return mge_onnx_emit(c, n, MGE_OP_DIV, 2, in2, 0, NULL, 1) < 0 ? c->err->code : MGE_OK;
}

static mge_status conv_nll(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x = mge_onnx_in(c, n, 0), t = mge_onnx_in(c, n, 1), w = mge_onnx_in(c, n, 2);
    if (x < 0 || t < 0)
        return mge_onnx_fail(c, n, "expected inputs input and target");
    return nll(c, n, x, t, w);
}

static mge_status conv_sce(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x = mge_onnx_in(c, n, 0), t = mge_onnx_in(c, n, 1), w = mge_onnx_in(c, n, 2);
    if (x < 0 || t < 0)
        return mge_onnx_fail(c, n, "expected inputs scores and labels");
    const mge_value *xv = mge_onnx_value(c, x);
    if (xv->ndim < 2)
        return mge_onnx_fail(c, n, "scores of rank %d: expected [N, C, d...]", xv->ndim);
    if (xv->dtype != MGE_F32)
        return mge_onnx_unsupported(c, n, "a loss over %s (mge computes it in f32)", mge_dtype_name(xv->dtype));
    mge_attr a[1] = {mge_onnx_ais(MGE_KEY_axis, 1, (int64_t[1]){1})};
    int lp = emit1(c, n, MGE_OP_LOG_SOFTMAX, x, -1, 1, a);
    if (lp < 0)
        return c->err->code;
    mge_status s = nll(c, n, lp, t, w);
    if (s)
        return s;
    return mge_onnx_alias(c, n, 1, lp);
}

const mge_onnx_op mge_onnx_ops_loss[] = {
    {"NegativeLogLikelihoodLoss", conv_nll, 12},
    {"SoftmaxCrossEntropyLoss", conv_sce, 12},
    {NULL, NULL, 0},
};
