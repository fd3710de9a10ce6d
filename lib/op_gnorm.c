/* op_gnorm.c — group_norm, instance_norm and rms_norm: shape inference,
 * FLOPs and parameters (PyTorch's names and init: weight ones, bias zeros).
 *
 * group_norm(x[N,C,...], weight[C], bias[C]; num_groups G): C % G == 0,
 *   mean and biased variance per sample over each group's C/G channels
 *   and the spatial dims (nn.GroupNorm).
 * instance_norm(x[N,C,...][, weight, bias]; affine): G = C; weight and
 *   bias exactly when affine (nn.InstanceNorm2d, no running statistics,
 *   so training and inference agree).
 * rms_norm(x, weight; axis, eps): weight has the shape x.dims[axis..].
 * group_norm_grad(dy, x[, weight]) -> dx like x, dweight and dbias [C].
 * rms_norm_grad(dy, x, weight) -> dx, dweight.
 * FLOPs: group/instance norm 8 per element (as layernorm), rms_norm 5
 * (square-sum 2, scale 2, weight 1); gradients 10 per element. */
#include "internal.h"

#include <stdio.h>

static mge_status expect(const char *op, const char *what, const mge_tdesc *t, mge_dtype dt, int nd,
                         const int64_t *dims, mge_error *err)
{
    int ok = t->dtype == dt && t->ndim == nd;
    for (int i = 0; ok && i < nd; i++)
        ok = t->dims[i] == dims[i];
    if (ok)
        return MGE_OK;
    char bt[96], be[96];
    return mge_error_set(err, MGE_ERR_SHAPE, "%s: %s is %s: expected %s", op, what, mge_tdesc_str(t, bt, sizeof bt),
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

static mge_status check_eps(const char *op, const mge_attr *a, mge_error *err)
{
    if (a && !(a->f > 0))
        return mge_error_set(err, MGE_ERR_INVALID, "%s: eps=%g: expected > 0", op, a->f);
    return MGE_OK;
}

/* group_norm's G from an attribute list (absent: C, instance_norm's). */
static mge_status groups(const char *op, const mge_attr *a, const mge_tdesc *x, int64_t *G, mge_error *err)
{
    int64_t C = x->dims[1];
    *G = a ? a->i[0] : C;
    if (a && (*G < 1 || C % *G != 0))
        return mge_error_set(err, MGE_ERR_INVALID, "%s: num_groups=%lld does not divide the %lld channels", op,
                             (long long)*G, (long long)C);
    return MGE_OK;
}

/* rms_norm's first normalized dim. */
static mge_status rms_axis(const char *op, const mge_attr *a, const mge_tdesc *x, int *ax, mge_error *err)
{
    int64_t v = a ? a->i[0] : -1;
    if (a && a->n != 1)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: axis has %d values: expected one", op, a->n);
    *ax = mge_axis(v, x->ndim);
    if (*ax < 0) {
        char b[96];
        return mge_error_set(err, MGE_ERR_INVALID, "%s: axis=%lld is out of range for x %s", op, (long long)v,
                             mge_tdesc_str(x, b, sizeof b));
    }
    return MGE_OK;
}

mge_status mge_gnorm_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    const char *op = mge_op_info(n->op)->name;
    const mge_attr *eps = mge_node_attr(n, MGE_KEY_eps);
    mge_status s;
    int64_t G;
    int ax;
    if ((s = check_eps(op, eps, err)))
        return s;
    switch (n->op) {
    case MGE_OP_GROUP_NORM:
    case MGE_OP_INSTANCE_NORM: {
        const mge_tdesc *x = &in[0];
        if ((s = check_x(op, x, 2, err)) ||
            (s = groups(op, n->op == MGE_OP_GROUP_NORM ? mge_node_attr(n, MGE_KEY_num_groups) : NULL, x, &G, err)))
            return s;
        int affine = n->op == MGE_OP_GROUP_NORM || mge_node_int(n, MGE_KEY_affine, 0);
        if (n->nin != (affine ? 3 : 1))
            return mge_error_set(err, MGE_ERR_INVALID, "%s: %d inputs: expected %s", op, n->nin,
                                 affine ? "(x, weight, bias)" : "x alone (affine=false)");
        if (affine && ((s = expect(op, "weight", &in[1], x->dtype, 1, &x->dims[1], err)) ||
                       (s = expect(op, "bias", &in[2], x->dtype, 1, &x->dims[1], err))))
            return s;
        *out = *x;
        break;
    }
    case MGE_OP_RMS_NORM: {
        const mge_tdesc *x = &in[0];
        if ((s = check_x(op, x, 1, err)) || (s = rms_axis(op, mge_node_attr(n, MGE_KEY_axis), x, &ax, err)) ||
            (s = expect(op, "weight", &in[1], x->dtype, x->ndim - ax, &x->dims[ax], err)))
            return s;
        *out = *x;
        break;
    }
    case MGE_OP_GROUP_NORM_GRAD: {
        const mge_tdesc *x = &in[1];
        if ((s = check_x(op, x, 2, err)) || (s = groups(op, mge_node_attr(n, MGE_KEY_num_groups), x, &G, err)) ||
            (s = expect(op, "dy", &in[0], x->dtype, x->ndim, x->dims, err)) ||
            (n->nin == 3 && (s = expect(op, "weight", &in[2], x->dtype, 1, &x->dims[1], err))))
            return s;
        out[0] = *x;
        for (int k = 1; k < 3; k++) {
            out[k] = *x;
            out[k].ndim = 1;
            out[k].dims[0] = x->dims[1];
        }
        break;
    }
    case MGE_OP_RMS_NORM_GRAD: {
        const mge_tdesc *x = &in[1];
        if ((s = check_x(op, x, 1, err)) || (s = rms_axis(op, mge_node_attr(n, MGE_KEY_axis), x, &ax, err)) ||
            (s = expect(op, "dy", &in[0], x->dtype, x->ndim, x->dims, err)) ||
            (s = expect(op, "weight", &in[2], x->dtype, x->ndim - ax, &x->dims[ax], err)))
            return s;
        out[0] = *x;
        out[1] = in[2];
        break;
    }
    default: return mge_error_set(err, MGE_ERR_INVALID, "%s is not a gnorm op", op);
    }
    for (int k = 0; k < mge_op_info(n->op)->nout; k++)
        out[k].known = 0;
    return MGE_OK;
}

double mge_gnorm_flops(const mge_node *n, const mge_tdesc *in, const mge_tdesc *out)
{
    (void)in;
    if (n->op == MGE_OP_GROUP_NORM_GRAD || n->op == MGE_OP_RMS_NORM_GRAD)
        return 10.0 * mge_tdesc_count(&out[0]);
    return (n->op == MGE_OP_RMS_NORM ? 5.0 : 8.0) * mge_tdesc_count(&out[0]);
}

mge_status mge_gnorm_params(int op, int nattr, const mge_attr *attrs, const mge_tdesc *x, mge_param_spec *specs,
                            int *nspecs, mge_error *err)
{
    mge_attr full[16];
    int nfull, ax;
    mge_status s;
    const mge_opinfo *oi = mge_op_info(op);
    if ((s = mge_attrs_complete(op, nattr, attrs, full, &nfull, err)))
        return s;
    *nspecs = 0;
    if (op == MGE_OP_RMS_NORM) {
        if ((s = check_x(oi->name, x, 1, err)) || (s = rms_axis(oi->name, mge_attrs_find(nfull, full, MGE_KEY_axis), x, &ax, err)))
            return s;
        mge_param_spec_set(&specs[0], "weight", MGE_VAL_PARAM, x->dtype, x->ndim - ax, &x->dims[ax], "ones");
        *nspecs = 1;
        return MGE_OK;
    }
    if (op != MGE_OP_GROUP_NORM && op != MGE_OP_INSTANCE_NORM)
        return mge_error_set(err, MGE_ERR_INVALID, "%s creates no parameters", oi->name);
    /* num_groups is checked by infer: a probe it does not divide must still
     * reach the check that params do not follow a symbolic C */
    if ((s = check_x(oi->name, x, 2, err)))
        return s;
    const mge_attr *af = mge_attrs_find(nfull, full, MGE_KEY_affine);
    if (op == MGE_OP_INSTANCE_NORM && !(af && af->i[0]))
        return MGE_OK;
    mge_param_spec_set(&specs[0], "weight", MGE_VAL_PARAM, x->dtype, 1, &x->dims[1], "ones");
    mge_param_spec_set(&specs[1], "bias", MGE_VAL_PARAM, x->dtype, 1, &x->dims[1], "zeros");
    *nspecs = 2;
    return MGE_OK;
}
