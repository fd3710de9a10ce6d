/* grad_unary.c — gradient rules of the unary family (PyTorch's conventions).
 *
 * Activations emit their own gradient op (ops.def): relu, relu6, sigmoid,
 * tanh and dropout read the forward OUTPUT y (so the forward input may be
 * freed once the forward output exists; relu's y also serves the next
 * layer), the others read the forward input x. The rest are composed of
 * existing ops:
 *   exp:  dy * y           log:  dy / x          sqrt: (dy * 0.5) / y
 *   neg:  -dy              cast: cast(dy) back to the input's dtype; no
 *                                gradient into integer (or bool) inputs.
 * Masks at the kinks follow PyTorch: relu/relu6/abs give 0 at 0 (and relu6
 * at 6), leaky_relu gives alpha at 0, hswish uses x/3 + 1/2 on [-3, 3],
 * hsigmoid 1/6 on (-3, 3). dropout_grad recovers the mask from y != 0
 * (see ref_grad_elem.c).
 * The table ops added since (clamp ... sign, kernels/kact.h) emit the one
 * generic unary_grad(dy, x or y; act=op and the forward's attributes),
 * whose kernels take the derivative from the table: floor, ceil, round and
 * sign give zeros, as in PyTorch. prelu emits prelu_grad (dx and the
 * weight's gradient, summed over the broadcast dims). isnan and isinf
 * have no gradient (their output is bool). */
#include "internal.h"
#include "kact.h"

/* A scalar const v in dtype dt (consts are f32; cast for f16/bf16). */
static int const_as(mge_graph *g, const char *base, float v, mge_dtype dt, mge_error *err)
{
    int c = mge_grad_const(g, v, err);
    if (c < 0 || dt == MGE_F32)
        return c;
    mge_attr a = {0};
    a.key = MGE_KEY_dtype;
    a.n = 1;
    a.i[0] = dt;
    return mge_grad_emit(g, base, MGE_OP_CAST, 1, &c, 1, &a, 1, NULL, err);
}

static int emit2(mge_graph *g, const char *base, int op, int a, int b, mge_error *err)
{
    int in[2] = {a, b};
    return mge_grad_emit(g, base, op, 2, in, 0, NULL, 1, NULL, err);
}

mge_status mge_unary_grad(mge_graph *g, int node, const int *dy, const char *want, int *dx, mge_error *err)
{
    /* copy what we need: emitting moves g->nodes */
    const mge_node *n = &g->nodes[node];
    int op = n->op, x = n->in[0], y = n->out[0], g0 = dy[0];
    mge_attr attrs[8];
    char base[256];
    snprintf(base, sizeof base, "%s", n->name);
    if (g0 < 0 || (!want[0] && !(op == MGE_OP_PRELU && want[1])))
        return MGE_OK;
    mge_dtype xdt = g->values[x].dtype;
    int gop = -1, second = x, nattr = 0, r = -1;
    switch (op) {
    case MGE_OP_RELU: gop = MGE_OP_RELU_GRAD, second = y; break;
    case MGE_OP_RELU6: gop = MGE_OP_RELU6_GRAD, second = y; break;
    case MGE_OP_SIGMOID: gop = MGE_OP_SIGMOID_GRAD, second = y; break;
    case MGE_OP_TANH: gop = MGE_OP_TANH_GRAD, second = y; break;
    case MGE_OP_DROPOUT: gop = MGE_OP_DROPOUT_GRAD, second = y; break;
    case MGE_OP_LEAKY_RELU: gop = MGE_OP_LEAKY_RELU_GRAD; break;
    case MGE_OP_GELU: gop = MGE_OP_GELU_GRAD; break;
    case MGE_OP_SILU: gop = MGE_OP_SILU_GRAD; break;
    case MGE_OP_HSWISH: gop = MGE_OP_HSWISH_GRAD; break;
    case MGE_OP_HSIGMOID: gop = MGE_OP_HSIGMOID_GRAD; break;
    case MGE_OP_ABS: gop = MGE_OP_ABS_GRAD; break;
    case MGE_OP_EXP: r = emit2(g, base, MGE_OP_MUL, g0, y, err); break;
    case MGE_OP_LOG: r = emit2(g, base, MGE_OP_DIV, g0, x, err); break;
    case MGE_OP_SQRT: {
        int half = const_as(g, base, 0.5f, g->values[g0].dtype, err);
        int t = half < 0 ? -1 : emit2(g, base, MGE_OP_MUL, g0, half, err);
        r = t < 0 ? -1 : emit2(g, base, MGE_OP_DIV, t, y, err);
        break;
    }
    case MGE_OP_NEG: r = mge_grad_emit(g, base, MGE_OP_NEG, 1, &g0, 0, NULL, 1, NULL, err); break;
    case MGE_OP_CAST: {
        if (!mge_dtype_is_float(xdt))
            return MGE_OK;   /* no gradient into integers */
        if (g->values[g0].dtype == xdt) {
            dx[0] = g0;
            return MGE_OK;
        }
        mge_attr a = {0};
        a.key = MGE_KEY_dtype;
        a.n = 1;
        a.i[0] = xdt;
        r = mge_grad_emit(g, base, MGE_OP_CAST, 1, &g0, 1, &a, 1, NULL, err);
        break;
    }
    case MGE_OP_PRELU: {
        if (!want[0] && !want[1])
            return MGE_OK;
        int in[3] = {g0, x, g->nodes[node].in[1]}, outs[2];
        if (mge_grad_emit(g, base, MGE_OP_PRELU_GRAD, 3, in, 0, NULL, 2, outs, err) < 0)
            return err ? err->code : MGE_ERR_INVALID;
        if (want[0])
            dx[0] = outs[0];
        if (want[1])
            dx[1] = outs[1];
        return MGE_OK;
    }
    default:
        if (!kact_has(op) || !(mge_op_info(op)->flags & MGE_OPF_DIFF))
            return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: no gradient rule for %s%s", base,
                                 mge_op_info(op)->name,
                                 op == MGE_OP_ISNAN || op == MGE_OP_ISINF ? " (its output is bool)" : "");
        /* unary_grad(dy, x or y): act=op, alpha/beta/threshold/min/max as the forward has them */
        gop = MGE_OP_UNARY_GRAD;
        second = kact_wrt_y(op) ? y : x;
        kact_par p = kact_par_node(&g->nodes[node], op);
        attrs[nattr++] = (mge_attr){.key = MGE_KEY_act, .n = 1, .i = {op}};
        attrs[nattr++] = (mge_attr){.key = MGE_KEY_alpha, .n = 1, .f = p.alpha};
        attrs[nattr++] = (mge_attr){.key = MGE_KEY_beta, .n = 1, .f = p.beta};
        attrs[nattr++] = (mge_attr){.key = MGE_KEY_threshold, .n = 1, .f = p.thr};
        if (isfinite(p.lo))
            attrs[nattr++] = (mge_attr){.key = MGE_KEY_min, .n = 1, .f = p.lo};
        if (isfinite(p.hi))
            attrs[nattr++] = (mge_attr){.key = MGE_KEY_max, .n = 1, .f = p.hi};
        if (op == MGE_OP_SHRINK)   /* its derivative reads lambd (not shift) */
            attrs[nattr++] = (mge_attr){.key = MGE_KEY_lambd, .n = 1, .f = p.lambd};
        break;
    }
    if (gop >= 0) {
        if (gop != MGE_OP_UNARY_GRAD)
            nattr = mge_grad_attrs(&g->nodes[node], gop, attrs);
        int in[2] = {g0, second};
        r = mge_grad_emit(g, base, gop, 2, in, nattr, attrs, 1, NULL, err);
    }
    if (r < 0)
        return err ? err->code : MGE_ERR_INVALID;
    dx[0] = r;
    return MGE_OK;
}
