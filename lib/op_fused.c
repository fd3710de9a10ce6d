/* op_fused.c — shape inference and FLOPs of the fused ops that mge-opt's
 * fuse passes write (see ops.def): fused_conv2d, fused_linear and
 * fused_elemwise.
 *
 * fused_conv2d and fused_linear check x, weight and bias exactly as conv2d
 * and linear do (the same attributes, minus the trailing residual input),
 * then the residual (same dtype and shape as the output) and the activation
 * (an op with the ACT trait, ops.def).
 * fused_elemwise broadcasts all its inputs (numpy rules); each op of `ops`
 * must be a TABLE op whose only attribute is alpha (mge_fused_unary_ok)
 * or an elementwise binary op, and the
 * binary ones consume the extra inputs in order, so there are exactly as
 * many extra inputs as binary ops.
 * FLOPs: the layer's, plus one per output element for the residual and
 * one for the activation; fused_elemwise one per op per output element. */
#include "internal.h"

#include <stdio.h>
#include <string.h>

/* The checks every fused layer op makes (also conv2d_winograd and
 * conv2d_nchwc): see internal.h. */
mge_status mge_fused_check_io(const mge_node *n, const char *name, int *bias, int *res, mge_error *err)
{
    int b = (int)mge_node_int(n, MGE_KEY_bias, 1), r = (int)mge_node_int(n, MGE_KEY_residual, 0);
    if (n->nin != 2 + b + r)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: bias=%s residual=%s but %d inputs: expected %d", name,
                             b ? "true" : "false", r ? "true" : "false", n->nin, 2 + b + r);
    const mge_attr *act = mge_node_attr(n, MGE_KEY_act);
    if (!act || act->n != 1 || !mge_fused_act_ok(act->i[0])) {
        /* "none, relu, ..., mish or softsign": the ACT ops of ops.def */
        char list[512];
        size_t k = (size_t)snprintf(list, sizeof list, "none");
        int last = -1;
        for (int op = 0; op < MGE_NOPS; op++)
            if (mge_op_flags(op) & MGE_OPF_ACT)
                last = op;
        for (int op = 0; op < MGE_NOPS && k < sizeof list; op++)
            if (mge_op_flags(op) & MGE_OPF_ACT)
                k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", op == last ? " or " : ", ",
                                      mge_op_info(op)->name);
        return mge_error_set(err, MGE_ERR_INVALID, "%s: act=%s: expected %s", name,
                             act && act->n == 1 ? mge_attr_op_name(act->i[0]) : "[...]", list);
    }
    *bias = b;
    *res = r;
    return MGE_OK;
}

mge_status mge_fused_check_residual(const char *name, const mge_tdesc *r, const mge_tdesc *out, mge_error *err)
{
    if (r->dtype != out->dtype || r->ndim != out->ndim ||
        memcmp(r->dims, out->dims, sizeof(int64_t) * (size_t)out->ndim) != 0) {
        char br[96], bo[96];
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: residual %s: expected the output's shape %s", name,
                             mge_tdesc_str(r, br, sizeof br), mge_tdesc_str(out, bo, sizeof bo));
    }
    return MGE_OK;
}

/* The layer part: the node seen as conv2d/linear without the residual. */
static mge_status layer_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    const char *name = mge_op_info(n->op)->name;
    int conv = n->op == MGE_OP_FUSED_CONV2D;
    int bias, res;
    mge_status s = mge_fused_check_io(n, name, &bias, &res, err);
    if (s)
        return s;
    mge_node plain = *n;
    plain.op = conv ? MGE_OP_CONV2D : MGE_OP_LINEAR;
    plain.nin = 2 + bias;
    s = conv ? mge_conv_infer(&plain, in, out, err) : mge_linear_infer(&plain, in, out, err);
    if (s)
        return s;
    if (out->dtype != MGE_F32) {
        char b[96];
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is %s: expected f32", name,
                             mge_tdesc_str(&in[0], b, sizeof b));
    }
    return res ? mge_fused_check_residual(name, &in[2 + bias], out, err) : MGE_OK;
}

static mge_status elemwise_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    const mge_attr *ops = mge_node_attr(n, MGE_KEY_ops);
    if (!ops)
        return mge_error_set(err, MGE_ERR_INVALID, "fused_elemwise: needs attribute 'ops'");
    int nbin = 0;
    for (int k = 0; k < ops->n; k++) {
        if (mge_fused_binary_ok(ops->i[k]))
            nbin++;
        else if (!mge_fused_unary_ok(ops->i[k]))
            return mge_error_set(err, MGE_ERR_INVALID,
                                 "fused_elemwise: ops entry %d is %s: expected a float unary or an elementwise "
                                 "binary op",
                                 k, mge_attr_op_name(ops->i[k]));
    }
    if (n->nin != 1 + nbin)
        return mge_error_set(err, MGE_ERR_INVALID,
                             "fused_elemwise: %d binary ops take %d extra inputs, but the node has %d", nbin, nbin,
                             n->nin - 1);
    mge_tdesc acc = in[0];
    for (int k = 0; k < n->nin; k++) {
        char b[96];
        if (in[k].dtype != MGE_F32)
            return mge_error_set(err, MGE_ERR_SHAPE, "fused_elemwise: input %d is %s: expected f32", k,
                                 mge_tdesc_str(&in[k], b, sizeof b));
        mge_tdesc t;
        if (k && !mge_broadcast(&acc, &in[k], &t)) {
            char ba[96];
            return mge_error_set(err, MGE_ERR_SHAPE, "fused_elemwise: input %d %s does not broadcast with %s", k,
                                 mge_tdesc_str(&in[k], b, sizeof b), mge_tdesc_str(&acc, ba, sizeof ba));
        }
        if (k)
            acc = t;
    }
    *out = acc;
    return MGE_OK;
}

mge_status mge_fused_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    if (n->op == MGE_OP_FUSED_ELEMWISE)
        return elemwise_infer(n, in, out, err);
    return layer_infer(n, in, out, err);
}

double mge_fused_flops(const mge_node *n, const mge_tdesc *in, const mge_tdesc *out)
{
    double outs = mge_tdesc_count(&out[0]);
    if (n->op == MGE_OP_FUSED_ELEMWISE) {
        const mge_attr *ops = mge_node_attr(n, MGE_KEY_ops);
        return outs * (ops ? ops->n : 0);
    }
    int bias = (int)mge_node_int(n, MGE_KEY_bias, 1), res = (int)mge_node_int(n, MGE_KEY_residual, 0);
    const mge_attr *act = mge_node_attr(n, MGE_KEY_act);
    mge_node plain = *n;
    plain.op = n->op == MGE_OP_FUSED_CONV2D ? MGE_OP_CONV2D : MGE_OP_LINEAR;
    plain.nin = 2 + bias;
    double f = n->op == MGE_OP_FUSED_CONV2D ? mge_conv_flops(&plain, in, out) : mge_linear_flops(&plain, in, out);
    return f + outs * (res + (act && act->n == 1 && act->i[0] != -1));
}
