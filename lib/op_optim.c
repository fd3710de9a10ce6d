/* op_optim.c — optimizer ops: shape inference and FLOPs.
 *
 * sgd(param, grad, momentum_buffer, hyper[, scale]) and
 * adam(param, grad, exp_avg, exp_avg_sq, hyper[, scale]) update param and
 * state in place and output an f32 scalar (the squared L2 norm of the
 * update). param, grad and the moments are f32 of one shape; hyper is
 * f32[2] {lr, step}; scale an f32 scalar. sgd with momentum=0 never reads
 * its buffer, which may then be any f32 value (mge_optim_build passes the
 * param itself, so plain SGD costs no state).
 * sumsq(a, ...) and clip_coef(s, ...) take float tensors of any shape.
 * Attribute checks follow PyTorch's constructors, so a graph PyTorch would
 * refuse is refused when the node is added, not at run time. */
#include "internal.h"

#include <math.h>

static mge_status expect_like(const char *op, const char *what, const mge_tdesc *t, const mge_tdesc *p,
                              mge_error *err)
{
    int ok = t->dtype == p->dtype && t->ndim == p->ndim;
    for (int i = 0; ok && i < p->ndim; i++)
        ok = t->dims[i] == p->dims[i];
    if (ok)
        return MGE_OK;
    char bt[96], bp[96];
    return mge_error_set(err, MGE_ERR_SHAPE, "%s: %s is %s: expected %s like the param", op, what,
                         mge_tdesc_str(t, bt, sizeof bt), mge_tdesc_str(p, bp, sizeof bp));
}

static mge_status expect_shape(const char *op, const char *what, const mge_tdesc *t, int nd, int64_t d0,
                               mge_error *err)
{
    if (t->dtype == MGE_F32 && t->ndim == nd && (nd == 0 || t->dims[0] == d0))
        return MGE_OK;
    char bt[96], be[96];
    return mge_error_set(err, MGE_ERR_SHAPE, "%s: %s is %s: expected %s", op, what, mge_tdesc_str(t, bt, sizeof bt),
                         mge_shape_str(MGE_F32, nd, &d0, be, sizeof be));
}

/* A finite attribute in [lo, hi] (hi_open: [lo, hi)). */
static mge_status check_range(const char *op, const char *key, double v, double lo, double hi, int hi_open,
                              mge_error *err)
{
    if (isfinite(v) && v >= lo && (hi_open ? v < hi : v <= hi))
        return MGE_OK;
    if (isinf(hi))
        return mge_error_set(err, MGE_ERR_INVALID, "%s: %s=%g: expected >= %g", op, key, v, lo);
    return mge_error_set(err, MGE_ERR_INVALID, "%s: %s=%g: expected in [%g, %g%c", op, key, v, lo, hi,
                         hi_open ? ')' : ']');
}

static mge_status check_update(const mge_node *n, const mge_tdesc *in, mge_error *err)
{
    int sgd = n->op == MGE_OP_SGD;
    const char *op = sgd ? "sgd" : "adam";
    const mge_tdesc *p = &in[0];
    char b[96];
    mge_status s;
    if (p->dtype != MGE_F32)
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: param is %s: only f32 params are supported", op,
                             mge_tdesc_str(p, b, sizeof b));
    if ((s = expect_like(op, "grad", &in[1], p, err)))
        return s;
    double wd = mge_node_float(n, MGE_KEY_weight_decay, 0);
    if ((s = check_range(op, "weight_decay", wd, 0, INFINITY, 0, err)))
        return s;
    int nstate;
    if (sgd) {
        double mom = mge_node_float(n, MGE_KEY_momentum, 0), damp = mge_node_float(n, MGE_KEY_dampening, 0);
        if ((s = check_range(op, "momentum", mom, 0, INFINITY, 0, err)))
            return s;
        if (!isfinite(damp))
            return mge_error_set(err, MGE_ERR_INVALID, "sgd: dampening=%g: expected a finite number", damp);
        if (mge_node_int(n, MGE_KEY_nesterov, 0) && (mom <= 0 || damp != 0))
            return mge_error_set(err, MGE_ERR_INVALID,
                                 "sgd: nesterov=true needs momentum > 0 and dampening=0 (got momentum=%g, "
                                 "dampening=%g), as in PyTorch",
                                 mom, damp);
        if (mom != 0 && (s = expect_like(op, "momentum_buffer", &in[2], p, err)))
            return s;
        if (mom == 0 && in[2].dtype != MGE_F32)
            return mge_error_set(err, MGE_ERR_SHAPE, "sgd: momentum_buffer is %s: expected f32 (unused at momentum=0)",
                                 mge_tdesc_str(&in[2], b, sizeof b));
        nstate = 1;
    } else {
        double b1 = mge_node_float(n, MGE_KEY_beta1, 0.9), b2 = mge_node_float(n, MGE_KEY_beta2, 0.999);
        double eps = mge_node_float(n, MGE_KEY_eps, 1e-8);
        if ((s = check_range(op, "beta1", b1, 0, 1, 1, err)) || (s = check_range(op, "beta2", b2, 0, 1, 1, err)) ||
            (s = check_range(op, "eps", eps, 0, INFINITY, 0, err)))
            return s;
        if ((s = expect_like(op, "exp_avg", &in[2], p, err)) || (s = expect_like(op, "exp_avg_sq", &in[3], p, err)))
            return s;
        nstate = 2;
    }
    if ((s = expect_shape(op, "hyper {lr, step}", &in[2 + nstate], 1, 2, err)))
        return s;
    if (n->nin > 3 + nstate && (s = expect_shape(op, "scale", &in[3 + nstate], 0, 0, err)))
        return s;
    return MGE_OK;
}

mge_status mge_optim_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    mge_status s;
    const char *op = n->op == MGE_OP_SUMSQ ? "sumsq" : "clip_coef";
    switch (n->op) {
    case MGE_OP_SGD:
    case MGE_OP_ADAM:
        if ((s = check_update(n, in, err)))
            return s;
        break;
    case MGE_OP_CLIP_COEF: {
        double mx = mge_node_float(n, MGE_KEY_max_norm, 1);
        if (!(isfinite(mx) && mx > 0))
            return mge_error_set(err, MGE_ERR_INVALID, "clip_coef: max_norm=%g: expected a finite number > 0", mx);
    }
        /* fall through */
    case MGE_OP_SUMSQ:
        for (int i = 0; i < n->nin; i++)
            if (!mge_dtype_is_float(in[i].dtype)) {
                char b[96];
                return mge_error_set(err, MGE_ERR_SHAPE, "%s: input %d is %s: expected a float dtype (f32, f16, bf16, f64)",
                                     op, i, mge_tdesc_str(&in[i], b, sizeof b));
            }
        break;
    default:
        return mge_error_set(err, MGE_ERR_INVALID, "optim: op %d is not an optimizer op", n->op);
    }
    out->dtype = MGE_F32;
    out->ndim = 0;
    return MGE_OK;
}

/* Per element: sgd 2 (p -= lr*g) + 3 (update norm), + 1 scale, + 2 weight
 * decay, + 3 momentum, + 2 nesterov; adam 2 + 3 (m) + 4 (v) + 4 (sqrt,
 * divide, add eps, divide) + 2 (update) + 3 (norm), + 1 scale, + 2 weight
 * decay (1 decoupled); sumsq 2; clip_coef 1 (sums) plus a few. */
double mge_optim_flops(const mge_node *n, const mge_tdesc *in, const mge_tdesc *out)
{
    double total = 0;
    switch (n->op) {
    case MGE_OP_SGD: {
        double per = 5 + (n->nin > 4 ? 1 : 0);
        per += mge_node_float(n, MGE_KEY_weight_decay, 0) != 0 ? 2 : 0;
        if (mge_node_float(n, MGE_KEY_momentum, 0) != 0)
            per += 3 + (mge_node_int(n, MGE_KEY_nesterov, 0) ? 2 : 0);
        return per * mge_tdesc_count(&in[0]);
    }
    case MGE_OP_ADAM: {
        double per = 16 + (n->nin > 5 ? 1 : 0);
        if (mge_node_float(n, MGE_KEY_weight_decay, 0) != 0)
            per += mge_node_int(n, MGE_KEY_decoupled, 0) ? 1 : 2;
        return per * mge_tdesc_count(&in[0]);
    }
    case MGE_OP_SUMSQ:
        for (int i = 0; i < n->nin; i++)
            total += 2 * mge_tdesc_count(&in[i]);
        return total;
    case MGE_OP_CLIP_COEF:
        for (int i = 0; i < n->nin; i++)
            total += mge_tdesc_count(&in[i]);
        return total + 4;
    default:
        return 0;
    }
}
