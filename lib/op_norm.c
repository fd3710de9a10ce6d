/* op_norm.c — batchnorm and layernorm: shape inference, FLOPs, parameters.
 *
 * batchnorm(x[N,C,...], weight[C], bias[C], running_mean[C], running_var[C]
 *           [, num_batches_tracked i64 scalar]) -> x's shape; statistics per
 * channel (dim 1) as PyTorch's BatchNorm1d/2d/3d.
 * layernorm(x, weight, bias) normalizes over dims axis..last; weight and
 * bias have the shape x.dims[axis..].
 * Parameters follow PyTorch's state_dict keys and order, so a state_dict
 * loads by name.
 * batchnorm_grad(dy, x, weight) and layernorm_grad(dy, x, weight) -> dx
 * like x, dweight and dbias like weight (batchnorm: training mode, batch
 * statistics).
 * FLOPs: batchnorm counts inference, 2 per element (scale and shift folded);
 * layernorm 8 per element (mean 1, variance 3, normalize 2, affine 2);
 * the gradients 10 per element (statistics 4, weight/bias sums 3, dx 3). */
#include "internal.h"

#include <stdio.h>

/* in[i] must be dtype dt with shape dims[0..nd). */
static mge_status expect(const char *op, const char *what, const mge_tdesc *t, mge_dtype dt, int nd,
                         const int64_t *dims, mge_error *err)
{
    int ok = t->dtype == dt && t->ndim == nd;
    for (int i = 0; ok && i < nd; i++)
        ok = t->dims[i] == dims[i];
    if (ok)
        return MGE_OK;
    char bt[96], be[96];
    return mge_error_set(err, MGE_ERR_SHAPE, "%s: %s %s: expected %s", op, what, mge_tdesc_str(t, bt, sizeof bt),
                         mge_shape_str(dt, nd, dims, be, sizeof be));
}

static mge_status check_x(const char *op, const mge_tdesc *x, int min_rank, mge_error *err)
{
    char b[96];
    if (x->ndim < min_rank)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is %s: expected rank >= %d%s", op, mge_tdesc_str(x, b, sizeof b),
                             min_rank, min_rank == 2 ? " [N,C,...]" : "");
    if (!mge_dtype_is_float(x->dtype))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is %s: expected a float dtype (f32, f16, bf16, f64)", op,
                             mge_tdesc_str(x, b, sizeof b));
    return MGE_OK;
}

/* layernorm's first normalized dim, from an attribute list. */
static mge_status ln_axis(int nattr, const mge_attr *attrs, const mge_tdesc *x, int *ax, mge_error *err)
{
    const mge_attr *a = mge_attrs_find(nattr, attrs, MGE_KEY_axis);
    int64_t v = a ? a->i[0] : -1;
    if (a && a->n != 1)
        return mge_error_set(err, MGE_ERR_INVALID, "layernorm: axis has %d values: expected one", a->n);
    *ax = mge_axis(v, x->ndim);
    if (*ax < 0) {
        char b[96];
        return mge_error_set(err, MGE_ERR_INVALID, "layernorm: axis=%lld is out of range for x %s", (long long)v,
                             mge_tdesc_str(x, b, sizeof b));
    }
    return MGE_OK;
}

/* batchnorm_grad/layernorm_grad(dy, x, weight) -> dx, dweight, dbias. */
static mge_status grad_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    const mge_tdesc *x = &in[1];
    int bn = n->op == MGE_OP_BATCHNORM_GRAD;
    const char *op = bn ? "batchnorm_grad" : "layernorm_grad";
    mge_status s;
    int ax = 1;
    if ((s = check_x(op, x, bn ? 2 : 1, err)))
        return s;
    if (!bn && (s = ln_axis(n->nattr, n->attrs, x, &ax, err)))
        return s;
    double eps = mge_node_float(n, MGE_KEY_eps, 1e-5);
    if (!(eps > 0))
        return mge_error_set(err, MGE_ERR_INVALID, "%s: eps=%g: expected > 0", op, eps);
    int wnd = bn ? 1 : x->ndim - ax;
    if ((s = expect(op, "dy", &in[0], x->dtype, x->ndim, x->dims, err)) ||
        (s = expect(op, "weight", &in[2], x->dtype, wnd, &x->dims[ax], err)))
        return s;
    out[0] = *x;
    out[1] = in[2];
    out[2] = in[2];
    return MGE_OK;
}

mge_status mge_norm_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    const mge_tdesc *x = &in[0];
    mge_status s;
    if (n->op == MGE_OP_BATCHNORM_GRAD || n->op == MGE_OP_LAYERNORM_GRAD)
        return grad_infer(n, in, out, err);
    if (n->op == MGE_OP_BATCHNORM) {
        if ((s = check_x("batchnorm", x, 2, err)))
            return s;
        double eps = mge_node_float(n, MGE_KEY_eps, 1e-5), mom = mge_node_float(n, MGE_KEY_momentum, 0.1);
        if (!(eps > 0))
            return mge_error_set(err, MGE_ERR_INVALID, "batchnorm: eps=%g: expected > 0", eps);
        if (!(mom >= 0 && mom <= 1))
            return mge_error_set(err, MGE_ERR_INVALID, "batchnorm: momentum=%g: expected in [0, 1]", mom);
        static const char *const what[4] = {"weight", "bias", "running_mean", "running_var"};
        for (int i = 0; i < 4; i++)
            if ((s = expect("batchnorm", what[i], &in[1 + i], x->dtype, 1, &x->dims[1], err)))
                return s;
        if (n->nin == 6 && (s = expect("batchnorm", "num_batches_tracked", &in[5], MGE_I64, 0, NULL, err)))
            return s;
    } else {
        if ((s = check_x("layernorm", x, 1, err)))
            return s;
        int ax;
        if ((s = ln_axis(n->nattr, n->attrs, x, &ax, err)))
            return s;
        double eps = mge_node_float(n, MGE_KEY_eps, 1e-5);
        if (!(eps > 0))
            return mge_error_set(err, MGE_ERR_INVALID, "layernorm: eps=%g: expected > 0", eps);
        if ((s = expect("layernorm", "weight", &in[1], x->dtype, x->ndim - ax, &x->dims[ax], err)) ||
            (s = expect("layernorm", "bias", &in[2], x->dtype, x->ndim - ax, &x->dims[ax], err)))
            return s;
    }
    *out = *x;
    return MGE_OK;
}

double mge_norm_flops(const mge_node *n, const mge_tdesc *in, const mge_tdesc *out)
{
    if (n->op == MGE_OP_BATCHNORM_GRAD || n->op == MGE_OP_LAYERNORM_GRAD)
        return 10.0 * mge_tdesc_count(&out[0]);
    return (n->op == MGE_OP_BATCHNORM ? 2.0 : 8.0) * mge_tdesc_count(&out[0]);
}

mge_status mge_norm_params(int op, int nattr, const mge_attr *attrs, const mge_tdesc *x, mge_param_spec *specs,
                           int *nspecs, mge_error *err)
{
    mge_attr full[16];
    int nfull;
    mge_status s;
    if (op != MGE_OP_BATCHNORM && op != MGE_OP_LAYERNORM)
        return mge_error_set(err, MGE_ERR_INVALID, "%s creates no parameters", mge_op_info(op)->name);
    if ((s = mge_attrs_complete(op, nattr, attrs, full, &nfull, err)))
        return s;
    if (op == MGE_OP_BATCHNORM) {
        if ((s = check_x("batchnorm", x, 2, err)))
            return s;
        const int64_t *c = &x->dims[1];
        mge_param_spec_set(&specs[0], "weight", MGE_VAL_PARAM, x->dtype, 1, c, "ones");
        mge_param_spec_set(&specs[1], "bias", MGE_VAL_PARAM, x->dtype, 1, c, "zeros");
        mge_param_spec_set(&specs[2], "running_mean", MGE_VAL_STATE, x->dtype, 1, c, "zeros");
        mge_param_spec_set(&specs[3], "running_var", MGE_VAL_STATE, x->dtype, 1, c, "ones");
        mge_param_spec_set(&specs[4], "num_batches_tracked", MGE_VAL_STATE, MGE_I64, 0, NULL, "zeros");
        *nspecs = 5;
        return MGE_OK;
    }
    int ax;
    if ((s = check_x("layernorm", x, 1, err)) || (s = ln_axis(nfull, full, x, &ax, err)))
        return s;
    mge_param_spec_set(&specs[0], "weight", MGE_VAL_PARAM, x->dtype, x->ndim - ax, &x->dims[ax], "ones");
    mge_param_spec_set(&specs[1], "bias", MGE_VAL_PARAM, x->dtype, x->ndim - ax, &x->dims[ax], "zeros");
    *nspecs = 2;
    return MGE_OK;
}
