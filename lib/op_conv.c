/* op_conv.c — conv2d: shape inference, FLOPs and its parameters.
 *
 * conv2d(x[N,C,H,W], weight[out, C/groups, kh, kw], bias[out]?) -> [N,out,OH,OW]
 * with PyTorch's semantics: OH = floor((H + 2*pad - dilation*(kh-1) - 1)/stride) + 1.
 * kernel, stride, pad and dilation take one value (both dims) or two (h, w).
 * `bias` says whether the bias input is present and must agree with it.
 * Float x needs weight and bias of the same dtype; qs8 x takes a qs8 weight
 * and a qs32 bias (the output keeps x's dtype: requantization is the kernel's).
 * FLOPs: 2*N*out*OH*OW*(C/groups)*kh*kw, plus N*out*OH*OW for the bias.
 * conv2d_grad_input(dy, weight, x) and conv2d_grad_weight(dy, x, weight)
 * (autodiff) take the forward's attributes but 'out' and 'bias'; their
 * FLOPs are the forward's without the bias. */
#include "internal.h"

#include <math.h>
#include <stdio.h>

/* Bounds kernel/stride/pad/dilation so size arithmetic cannot overflow. */
#define MAX_WIN (1 << 30)

typedef struct conv_attrs {
    int64_t out, k[2], s[2], p[2], d[2], groups;
    int bias;
} conv_attrs;

/* Reads an INTS attribute of 1 or 2 values into v[2]; lo is the least allowed value. */
static mge_status pair(int nattr, const mge_attr *attrs, int key, int64_t def, int64_t lo, int64_t v[2],
                       mge_error *err)
{
    const mge_attr *a = mge_attrs_find(nattr, attrs, key);
    if (!a) {
        v[0] = v[1] = def;
        return MGE_OK;
    }
    if (a->n < 1 || a->n > 2)
        return mge_error_set(err, MGE_ERR_INVALID, "conv2d: '%s' has %d values: expected 1 or 2 (h, w)",
                             mge_key_name(key), a->n);
    v[0] = a->i[0];
    v[1] = a->i[a->n - 1];
    if (v[0] < lo || v[1] < lo || v[0] > MAX_WIN || v[1] > MAX_WIN)
        return mge_error_set(err, MGE_ERR_INVALID, "conv2d: %s=[%lld,%lld]: expected values in [%lld, %d]",
                             mge_key_name(key), (long long)v[0], (long long)v[1], (long long)lo, MAX_WIN);
    return MGE_OK;
}

/* The gradient ops have no 'out' and 'bias' (want_out = 0): out comes from
 * the weight there, and is set to 1 here so the checks below pass. */
static mge_status get_attrs_for(int nattr, const mge_attr *attrs, int want_out, conv_attrs *c, mge_error *err)
{
    const mge_attr *a = mge_attrs_find(nattr, attrs, MGE_KEY_out);
    if (!a && want_out)
        return mge_error_set(err, MGE_ERR_INVALID, "conv2d: needs attribute 'out'");
    c->out = a ? a->i[0] : 1;
    a = mge_attrs_find(nattr, attrs, MGE_KEY_groups);
    c->groups = a ? a->i[0] : 1;
    a = mge_attrs_find(nattr, attrs, MGE_KEY_bias);
    c->bias = a ? a->i[0] != 0 : 1;
    if (!mge_attrs_find(nattr, attrs, MGE_KEY_kernel))
        return mge_error_set(err, MGE_ERR_INVALID, "conv2d: needs attribute 'kernel'");
    mge_status s;
    if ((s = pair(nattr, attrs, MGE_KEY_kernel, 1, 1, c->k, err)) ||
        (s = pair(nattr, attrs, MGE_KEY_stride, 1, 1, c->s, err)) ||
        (s = pair(nattr, attrs, MGE_KEY_pad, 0, 0, c->p, err)) ||
        (s = pair(nattr, attrs, MGE_KEY_dilation, 1, 1, c->d, err)))
        return s;
    if (c->out < 1)
        return mge_error_set(err, MGE_ERR_INVALID, "conv2d: out=%lld: expected at least 1", (long long)c->out);
    if (c->groups < 1)
        return mge_error_set(err, MGE_ERR_INVALID, "conv2d: groups=%lld: expected at least 1",
                             (long long)c->groups);
    if (want_out && c->out % c->groups)
        return mge_error_set(err, MGE_ERR_INVALID, "conv2d: out=%lld is not divisible by groups=%lld",
                             (long long)c->out, (long long)c->groups);
    return MGE_OK;
}

static mge_status get_attrs(int nattr, const mge_attr *attrs, conv_attrs *c, mge_error *err)
{
    return get_attrs_for(nattr, attrs, 1, c, err);
}

/* x must be [N,C,H,W] with C divisible by groups. */
static mge_status check_x(const mge_tdesc *x, const conv_attrs *c, mge_error *err)
{
    char b[96];
    mge_shape_str(x->dtype, x->ndim, x->dims, b, sizeof b);
    if (x->ndim != 4)
        return mge_error_set(err, MGE_ERR_SHAPE, "conv2d: x is %s: expected rank 4 [N,C,H,W]", b);
    if (!mge_dtype_is_float(x->dtype) && x->dtype != MGE_QS8)
        return mge_error_set(err, MGE_ERR_SHAPE, "conv2d: x is %s: expected a float or qs8 dtype", b);
    mge_status s = mge_shape_numel(x->ndim, x->dims, x->dtype, NULL, NULL, err);
    if (s)
        return s;
    if (x->dims[1] < 1 || x->dims[1] % c->groups)
        return mge_error_set(err, MGE_ERR_SHAPE, "conv2d: x is %s: channels %lld not divisible by groups=%lld", b,
                             (long long)x->dims[1], (long long)c->groups);
    return MGE_OK;
}

static mge_status conv2d_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    conv_attrs c;
    mge_status s = get_attrs(n->nattr, n->attrs, &c, err);
    if (s || (s = check_x(&in[0], &c, err)))
        return s;
    const mge_tdesc *x = &in[0], *w = &in[1];
    char bx[96], bw[96], be[96];
    mge_shape_str(x->dtype, x->ndim, x->dims, bx, sizeof bx);
    mge_shape_str(w->dtype, w->ndim, w->dims, bw, sizeof bw);
    if (c.bias != (n->nin == 3))
        return mge_error_set(err, MGE_ERR_INVALID, "conv2d: bias=%s but %d inputs: expected %d (x, weight%s)",
                             c.bias ? "true" : "false", n->nin, c.bias ? 3 : 2, c.bias ? ", bias" : "");
    mge_dtype wdt = x->dtype == MGE_QS8 ? MGE_QS8 : x->dtype;
    int64_t ew[4] = {c.out, x->dims[1] / c.groups, c.k[0], c.k[1]};
    mge_shape_str(wdt, 4, ew, be, sizeof be);
    if (w->dtype != wdt || w->ndim != 4 || w->dims[0] != ew[0] || w->dims[1] != ew[1] || w->dims[2] != ew[2] ||
        w->dims[3] != ew[3])
        return mge_error_set(err, MGE_ERR_SHAPE,
                             "conv2d: weight %s does not fit x %s with out=%lld kernel=[%lld,%lld] groups=%lld: "
                             "expected %s",
                             bw, bx, (long long)c.out, (long long)c.k[0], (long long)c.k[1], (long long)c.groups, be);
    if (c.bias) {
        const mge_tdesc *bi = &in[2];
        mge_dtype bdt = x->dtype == MGE_QS8 ? MGE_QS32 : x->dtype;
        if (bi->dtype != bdt || bi->ndim != 1 || bi->dims[0] != c.out) {
            char bb[96];
            return mge_error_set(err, MGE_ERR_SHAPE, "conv2d: bias %s: expected %s[%lld]",
                                 mge_shape_str(bi->dtype, bi->ndim, bi->dims, bb, sizeof bb), mge_dtype_name(bdt),
                                 (long long)c.out);
        }
    }
    out->dtype = x->dtype;
    out->ndim = 4;
    out->dims[0] = x->dims[0];
    out->dims[1] = c.out;
    for (int i = 0; i < 2; i++) {
        int64_t o = mge_conv_out_dim(x->dims[2 + i], c.k[i], c.s[i], c.p[i], c.d[i], 0);
        if (o <= 0)
            return mge_error_set(err, MGE_ERR_SHAPE,
                                 "conv2d: x %s is too small for kernel=[%lld,%lld] dilation=[%lld,%lld] "
                                 "pad=[%lld,%lld]: output %s would be empty",
                                 bx, (long long)c.k[0], (long long)c.k[1], (long long)c.d[0], (long long)c.d[1],
                                 (long long)c.p[0], (long long)c.p[1], i ? "width" : "height");
        out->dims[2 + i] = o;
    }
    return MGE_OK;
}

/* conv2d_grad_input(dy, weight, x) -> like x; conv2d_grad_weight(dy, x,
 * weight) -> like weight. x and weight must fit the forward conv with the
 * node's attributes (out = weight's first dim) and dy its output. */
static mge_status conv_grad_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    const char *op = mge_op_info(n->op)->name;
    int gi = n->op == MGE_OP_CONV2D_GRAD_INPUT;
    const mge_tdesc *dy = &in[0], *w = gi ? &in[1] : &in[2], *x = gi ? &in[2] : &in[1];
    conv_attrs c;
    mge_status s = get_attrs_for(n->nattr, n->attrs, 0, &c, err);
    if (s)
        return s;
    char bx[96], bw[96], bd[96], be[96];
    mge_tdesc_str(x, bx, sizeof bx);
    mge_tdesc_str(w, bw, sizeof bw);
    mge_tdesc_str(dy, bd, sizeof bd);
    if (x->ndim != 4 || !mge_dtype_is_float(x->dtype))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is %s: expected a float [N,C,H,W]", op, bx);
    if ((s = mge_shape_numel(x->ndim, x->dims, x->dtype, NULL, NULL, err)))
        return s;
    if (x->dims[1] < 1 || x->dims[1] % c.groups)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is %s: channels not divisible by groups=%lld", op, bx,
                             (long long)c.groups);
    if (w->dtype != x->dtype || w->ndim != 4 || w->dims[0] < 1 || w->dims[0] % c.groups ||
        w->dims[1] != x->dims[1] / c.groups || w->dims[2] != c.k[0] || w->dims[3] != c.k[1])
        return mge_error_set(err, MGE_ERR_SHAPE,
                             "%s: weight %s does not fit x %s with kernel=[%lld,%lld] groups=%lld: expected "
                             "%s[out,%lld,%lld,%lld] with out divisible by groups",
                             op, bw, bx, (long long)c.k[0], (long long)c.k[1], (long long)c.groups,
                             mge_dtype_name(x->dtype), (long long)(x->dims[1] / c.groups), (long long)c.k[0],
                             (long long)c.k[1]);
    int64_t ey[4] = {x->dims[0], w->dims[0], 0, 0};
    for (int i = 0; i < 2; i++) {
        ey[2 + i] = mge_conv_out_dim(x->dims[2 + i], c.k[i], c.s[i], c.p[i], c.d[i], 0);
        if (ey[2 + i] <= 0)
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: x %s is too small for the kernel: empty output", op, bx);
    }
    mge_shape_str(x->dtype, 4, ey, be, sizeof be);
    if (dy->dtype != x->dtype || dy->ndim != 4 || dy->dims[0] != ey[0] || dy->dims[1] != ey[1] ||
        dy->dims[2] != ey[2] || dy->dims[3] != ey[3])
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: dy is %s: expected %s (the forward output)", op, bd, be);
    *out = gi ? *x : *w;
    return MGE_OK;
}

mge_status mge_conv_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    if (n->op == MGE_OP_CONV2D_GRAD_INPUT || n->op == MGE_OP_CONV2D_GRAD_WEIGHT)
        return conv_grad_infer(n, in, out, err);
    return conv2d_infer(n, in, out, err);
}

double mge_conv_flops(const mge_node *n, const mge_tdesc *in, const mge_tdesc *out)
{
    if (n->op == MGE_OP_CONV2D_GRAD_INPUT || n->op == MGE_OP_CONV2D_GRAD_WEIGHT) {
        /* the forward's multiply-adds, once: dy [N,O,OH,OW] times Cg*kh*kw */
        const mge_tdesc *dy = &in[0], *w = n->op == MGE_OP_CONV2D_GRAD_INPUT ? &in[1] : &in[2];
        if (dy->ndim != 4 || w->ndim != 4)
            return 0;
        return 2.0 * mge_tdesc_count(dy) * (double)w->dims[1] * (double)w->dims[2] * (double)w->dims[3];
    }
    const mge_tdesc *x = &in[0], *w = &in[1], *y = &out[0];
    if (x->ndim != 4 || w->ndim != 4 || y->ndim != 4)
        return 0;
    double outs = (double)y->dims[0] * (double)y->dims[1] * (double)y->dims[2] * (double)y->dims[3];
    double f = 2.0 * outs * (double)w->dims[1] * (double)w->dims[2] * (double)w->dims[3];
    if (n->nin == 3)
        f += outs;
    return f;
}

mge_status mge_conv_params(int op, int nattr, const mge_attr *attrs, const mge_tdesc *x, mge_param_spec *specs,
                           int *nspecs, mge_error *err)
{
    conv_attrs c;
    mge_attr full[16];
    int nfull;
    mge_status s = mge_attrs_complete(op, nattr, attrs, full, &nfull, err);
    if (s || (s = get_attrs(nfull, full, &c, err)) || (s = check_x(x, &c, err)))
        return s;
    /* PyTorch's default init (kaiming_uniform with a=sqrt(5)) is U(-B, B), B = 1/sqrt(fan_in),
     * and the bias uses the same bound. */
    int64_t cin = x->dims[1] / c.groups;
    double bound = 1.0 / sqrt((double)(cin * c.k[0] * c.k[1]));
    mge_dtype dt = mge_dtype_is_float(x->dtype) ? x->dtype : MGE_F32;
    char init[64];
    snprintf(init, sizeof init, "uniform(%.9g)", bound);
    const int64_t wd[4] = {c.out, cin, c.k[0], c.k[1]};
    mge_param_spec_set(&specs[0], "weight", MGE_VAL_PARAM, dt, 4, wd, init);
    if (c.bias)
        mge_param_spec_set(&specs[1], "bias", MGE_VAL_PARAM, dt, 1, &c.out, init);
    *nspecs = c.bias ? 2 : 1;
    return MGE_OK;
}
