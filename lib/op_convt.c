/* op_convt.c — conv_transpose2d, conv1d and conv3d: shape inference, FLOPs
 * and their parameters (PyTorch's ConvTranspose2d, Conv1d and Conv3d).
 *
 * conv_transpose2d(x[N,C,H,W], weight[C, out/groups, kh, kw], bias[out]?)
 *   -> [N,out,OH,OW], OH = (H-1)*stride - 2*pad + dilation*(kh-1) +
 *   output_padding + 1 (likewise OW); output_padding must be smaller than
 *   the stride or the dilation of its axis, as PyTorch requires.
 * conv1d(x[N,C,L], weight[out, C/groups, k], bias[out]?) -> [N,out,OL],
 *   OL = floor((L + 2*pad - dilation*(k-1) - 1)/stride) + 1; its
 *   attributes take one value each.
 * conv3d(x[N,C,D,H,W], weight[out, C/groups, kd, kh, kw], bias[out]?) ->
 *   [N,out,OD,OH,OW] by conv1d's formula per axis; attributes take 1 or 3
 *   values (d, h, w).
 * The gradient ops (dy, weight, x) / (dy, x, weight) take the forward's
 * attributes but 'out' and 'bias'; out comes from the weight there.
 * FLOPs: a multiply-add per (input element of conv_transpose2d, or output
 * element of conv1d and conv3d) and weight tap of its group, plus the bias. */
#include "internal.h"

#include <math.h>
#include <stdio.h>

/* Bounds kernel/stride/pad/dilation so size arithmetic cannot overflow. */
#define MAX_WIN (1 << 30)

typedef struct ct_attrs {
    int64_t out, k[3], s[3], p[3], op[3], d[3], groups;
    int bias, nsp;   /* nsp: spatial dims, 2 (conv_transpose2d), 1 (conv1d) or 3 (conv3d) */
    int transposed;
} ct_attrs;

static int is_transposed(int op)
{
    return op == MGE_OP_CONV_TRANSPOSE2D || op == MGE_OP_CONV_TRANSPOSE2D_GRAD_INPUT ||
           op == MGE_OP_CONV_TRANSPOSE2D_GRAD_WEIGHT;
}

static int is_forward(int op)
{
    return op == MGE_OP_CONV_TRANSPOSE2D || op == MGE_OP_CONV1D || op == MGE_OP_CONV3D;
}

static int is_3d(int op)
{
    return op == MGE_OP_CONV3D || op == MGE_OP_CONV3D_GRAD_INPUT || op == MGE_OP_CONV3D_GRAD_WEIGHT;
}

/* Writes v[0..nsp) as "3", "[3,2]" or "[3,2,2]" into b. */
static const char *vals(int nsp, const int64_t *v, char *b, size_t n)
{
    if (nsp == 1)
        snprintf(b, n, "%lld", (long long)v[0]);
    else if (nsp == 2)
        snprintf(b, n, "[%lld,%lld]", (long long)v[0], (long long)v[1]);
    else
        snprintf(b, n, "[%lld,%lld,%lld]", (long long)v[0], (long long)v[1], (long long)v[2]);
    return b;
}

/* An INTS attribute of 1 value (conv1d), 1 or 2 (h, w) or 1 or 3 (d, h, w)
 * into v[]; lo is the least allowed value. */
static mge_status ints(const char *op, int nsp, int nattr, const mge_attr *attrs, int key, int64_t def, int64_t lo,
                       int64_t v[3], mge_error *err)
{
    const mge_attr *a = mge_attrs_find(nattr, attrs, key);
    if (!a) {
        v[0] = v[1] = v[2] = def;
        return MGE_OK;
    }
    if (a->n != 1 && a->n != nsp)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: '%s' has %d values: expected %s", op, mge_key_name(key),
                             a->n, nsp == 1 ? "1" : nsp == 2 ? "1 or 2 (h, w)" : "1 or 3 (d, h, w)");
    for (int i = 0; i < 3; i++)
        v[i] = a->i[a->n == 1 ? 0 : i < a->n ? i : a->n - 1];
    for (int i = 0; i < nsp; i++)
        if (v[i] < lo || v[i] > MAX_WIN) {
            char b[64];
            return mge_error_set(err, MGE_ERR_INVALID, "%s: %s=%s: expected values in [%lld, %d]", op,
                                 mge_key_name(key), vals(nsp, v, b, sizeof b), (long long)lo, MAX_WIN);
        }
    return MGE_OK;
}

static mge_status get_attrs(int opid, int nattr, const mge_attr *attrs, ct_attrs *c, mge_error *err)
{
    const char *op = mge_op_info(opid)->name;
    int fwd = is_forward(opid);
    c->transposed = is_transposed(opid);
    c->nsp = c->transposed ? 2 : is_3d(opid) ? 3 : 1;
    const mge_attr *a = mge_attrs_find(nattr, attrs, MGE_KEY_out);
    if (!a && fwd)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: needs attribute 'out'", op);
    c->out = a && fwd ? a->i[0] : 1;
    a = mge_attrs_find(nattr, attrs, MGE_KEY_groups);
    c->groups = a ? a->i[0] : 1;
    a = mge_attrs_find(nattr, attrs, MGE_KEY_bias);
    c->bias = a && fwd ? a->i[0] != 0 : fwd;
    if (!mge_attrs_find(nattr, attrs, MGE_KEY_kernel))
        return mge_error_set(err, MGE_ERR_INVALID, "%s: needs attribute 'kernel'", op);
    mge_status s;
    if ((s = ints(op, c->nsp, nattr, attrs, MGE_KEY_kernel, 1, 1, c->k, err)) ||
        (s = ints(op, c->nsp, nattr, attrs, MGE_KEY_stride, 1, 1, c->s, err)) ||
        (s = ints(op, c->nsp, nattr, attrs, MGE_KEY_pad, 0, 0, c->p, err)) ||
        (s = ints(op, c->nsp, nattr, attrs, MGE_KEY_dilation, 1, 1, c->d, err)))
        return s;
    c->op[0] = c->op[1] = c->op[2] = 0;
    if (c->transposed && (s = ints(op, 2, nattr, attrs, MGE_KEY_output_padding, 0, 0, c->op, err)))
        return s;
    for (int i = 0; i < 2 && c->transposed; i++)
        if (c->op[i] >= c->s[i] && c->op[i] >= c->d[i]) {
            char b0[64], b1[64], b2[64];
            return mge_error_set(err, MGE_ERR_INVALID,
                                 "%s: output_padding=%s must be smaller than stride=%s or dilation=%s (axis %s: %lld "
                                 "against stride %lld, dilation %lld)",
                                 op, vals(2, c->op, b0, sizeof b0), vals(2, c->s, b1, sizeof b1),
                                 vals(2, c->d, b2, sizeof b2), i ? "w" : "h", (long long)c->op[i],
                                 (long long)c->s[i], (long long)c->d[i]);
        }
    if (c->out < 1)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: out=%lld: expected at least 1", op, (long long)c->out);
    if (c->groups < 1 || c->groups > MAX_WIN)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: groups=%lld: expected at least 1", op, (long long)c->groups);
    if (fwd && c->out % c->groups)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: out=%lld is not divisible by groups=%lld", op,
                             (long long)c->out, (long long)c->groups);
    return MGE_OK;
}

/* x must be float [N,C,H,W] (conv_transpose2d), [N,C,L] (conv1d) or [N,C,D,H,W] (conv3d) with C divisible by groups. */
static mge_status check_x(const char *op, const mge_tdesc *x, const ct_attrs *c, mge_error *err)
{
    char b[96];
    mge_tdesc_str(x, b, sizeof b);
    if (x->ndim != 2 + c->nsp)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is %s: expected rank %d %s", op, b, 2 + c->nsp,
                             c->nsp == 2 ? "[N,C,H,W]" : c->nsp == 3 ? "[N,C,D,H,W]" : "[N,C,L]");
    if (!mge_dtype_is_float(x->dtype))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is %s: expected a float dtype", op, b);
    mge_status s = mge_shape_numel(x->ndim, x->dims, x->dtype, NULL, NULL, err);
    if (s)
        return s;
    if (x->dims[1] < 1 || x->dims[1] % c->groups)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is %s: channels %lld not divisible by groups=%lld", op, b,
                             (long long)x->dims[1], (long long)c->groups);
    return MGE_OK;
}

/* The weight's expected shape for x and c into e[]. */
static void weight_dims(const mge_tdesc *x, const ct_attrs *c, int64_t *e)
{
    if (c->transposed) {
        e[0] = x->dims[1], e[1] = c->out / c->groups, e[2] = c->k[0], e[3] = c->k[1];
    } else {
        e[0] = c->out, e[1] = x->dims[1] / c->groups;
        for (int i = 0; i < c->nsp; i++)
            e[2 + i] = c->k[i];
    }
}

/* The forward output of x under c into y (x and c checked). */
static mge_status out_shape(const char *op, const mge_tdesc *x, const ct_attrs *c, mge_tdesc *y, mge_error *err)
{
    char bx[96];
    mge_tdesc_str(x, bx, sizeof bx);
    y->dtype = x->dtype;
    y->ndim = x->ndim;
    y->dims[0] = x->dims[0];
    y->dims[1] = c->out;
    for (int i = 0; i < c->nsp; i++) {
        int64_t in = x->dims[2 + i];
        if (c->transposed) {
            /* attributes are at most 2^30, so only (in - 1) * stride can overflow */
            if ((double)(in - 1) * (double)c->s[i] > 0x1p50)
                return mge_error_set(err, MGE_ERR_SHAPE, "%s: x %s with stride=%lld: the output is too large", op, bx,
                                     (long long)c->s[i]);
            int64_t o = (in - 1) * c->s[i] - 2 * c->p[i] + c->d[i] * (c->k[i] - 1) + c->op[i] + 1;
            if (o <= 0)
                return mge_error_set(err, MGE_ERR_SHAPE,
                                     "%s: x %s with stride=%lld pad=%lld dilation=%lld kernel=%lld "
                                     "output_padding=%lld gives output %s %lld: expected at least 1",
                                     op, bx, (long long)c->s[i], (long long)c->p[i], (long long)c->d[i],
                                     (long long)c->k[i], (long long)c->op[i], i ? "width" : "height", (long long)o);
            y->dims[2 + i] = o;
        } else {
            int64_t o = mge_conv_out_dim(in, c->k[i], c->s[i], c->p[i], c->d[i], 0);
            if (o <= 0)
                return mge_error_set(err, MGE_ERR_SHAPE,
                                     "%s: %skernel=%lld with dilation=%lld spans %lld, larger than the padded input "
                                     "length %lld (x %s, pad=%lld): the output would be empty",
                                     op, c->nsp == 3 ? (i == 0 ? "axis d: " : i == 1 ? "axis h: " : "axis w: ") : "",
                                     (long long)c->k[i], (long long)c->d[i],
                                     (long long)(c->d[i] * (c->k[i] - 1) + 1), (long long)(in + 2 * c->p[i]), bx,
                                     (long long)c->p[i]);
            y->dims[2 + i] = o;
        }
    }
    if (mge_shape_numel(y->ndim, y->dims, y->dtype, NULL, NULL, NULL)) {
        char by[96];
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: output %s of x %s is too large (more than 2^48 elements)", op,
                             mge_shape_str(y->dtype, y->ndim, y->dims, by, sizeof by), bx);
    }
    return MGE_OK;
}

static mge_status check_weight(const char *op, const mge_tdesc *x, const mge_tdesc *w, const ct_attrs *c,
                               mge_error *err)
{
    int64_t e[5];
    weight_dims(x, c, e);
    int nd = 2 + c->nsp, ok = w->dtype == x->dtype && w->ndim == nd;
    for (int i = 0; ok && i < nd; i++)
        ok = w->dims[i] == e[i];
    if (ok)
        return MGE_OK;
    char bx[96], bw[96], be[96], bk[64];
    mge_tdesc_str(x, bx, sizeof bx);
    mge_tdesc_str(w, bw, sizeof bw);
    mge_shape_str(x->dtype, nd, e, be, sizeof be);
    return mge_error_set(err, MGE_ERR_SHAPE,
                         "%s: weight %s does not fit x %s with out=%lld kernel=%s groups=%lld: expected %s", op, bw,
                         bx, (long long)c->out, vals(c->nsp, c->k, bk, sizeof bk), (long long)c->groups, be);
}

static mge_status fwd_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    const char *op = mge_op_info(n->op)->name;
    ct_attrs c;
    mge_status s = get_attrs(n->op, n->nattr, n->attrs, &c, err);
    if (s || (s = check_x(op, &in[0], &c, err)))
        return s;
    if (c.bias != (n->nin == 3))
        return mge_error_set(err, MGE_ERR_INVALID, "%s: bias=%s but %d inputs: expected %d (x, weight%s)", op,
                             c.bias ? "true" : "false", n->nin, c.bias ? 3 : 2, c.bias ? ", bias" : "");
    if ((s = check_weight(op, &in[0], &in[1], &c, err)))
        return s;
    if (c.bias) {
        const mge_tdesc *bi = &in[2];
        if (bi->dtype != in[0].dtype || bi->ndim != 1 || bi->dims[0] != c.out) {
            char bb[96];
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: bias %s: expected %s[%lld]", op,
                                 mge_tdesc_str(bi, bb, sizeof bb), mge_dtype_name(in[0].dtype), (long long)c.out);
        }
    }
    return out_shape(op, &in[0], &c, out, err);
}

/* *_grad_input(dy, weight, x) -> like x; *_grad_weight(dy, x, weight) -> like weight. */
static mge_status grad_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    const char *op = mge_op_info(n->op)->name;
    int gi = n->op == MGE_OP_CONV_TRANSPOSE2D_GRAD_INPUT || n->op == MGE_OP_CONV1D_GRAD_INPUT ||
             n->op == MGE_OP_CONV3D_GRAD_INPUT;
    const mge_tdesc *dy = &in[0], *w = gi ? &in[1] : &in[2], *x = gi ? &in[2] : &in[1];
    ct_attrs c;
    mge_status s = get_attrs(n->op, n->nattr, n->attrs, &c, err);
    if (s || (s = check_x(op, x, &c, err)))
        return s;
    if (w->ndim == 2 + c.nsp)   /* out from the weight */
        c.out = c.transposed ? w->dims[1] * c.groups : w->dims[0];
    if (c.out < 1) {
        char bw[96];
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: weight %s has no output channels", op,
                             mge_tdesc_str(w, bw, sizeof bw));
    }
    if ((s = check_weight(op, x, w, &c, err)))
        return s;
    mge_tdesc y;
    if ((s = out_shape(op, x, &c, &y, err)))
        return s;
    int ok = dy->dtype == y.dtype && dy->ndim == y.ndim;
    for (int i = 0; ok && i < y.ndim; i++)
        ok = dy->dims[i] == y.dims[i];
    if (!ok) {
        char bd[96], be[96];
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: dy is %s: expected %s (the forward output)", op,
                             mge_tdesc_str(dy, bd, sizeof bd), mge_tdesc_str(&y, be, sizeof be));
    }
    *out = gi ? *x : *w;
    return MGE_OK;
}

mge_status mge_convt_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    if (is_forward(n->op))
        return fwd_infer(n, in, out, err);
    return grad_infer(n, in, out, err);
}

double mge_convt_flops(const mge_node *n, const mge_tdesc *in, const mge_tdesc *out)
{
    int gi = n->op == MGE_OP_CONV_TRANSPOSE2D_GRAD_INPUT || n->op == MGE_OP_CONV1D_GRAD_INPUT ||
             n->op == MGE_OP_CONV3D_GRAD_INPUT;
    const mge_tdesc *x = &in[0], *w = &in[1], *y = &out[0];
    if (!is_forward(n->op))
        x = gi ? &in[2] : &in[1], w = gi ? &in[1] : &in[2], y = &in[0];
    int tr = is_transposed(n->op);
    if (x->ndim < 3 || w->ndim < 3 || w->ndim != x->ndim || y->ndim != x->ndim)
        return 0;
    double taps = (double)w->dims[1];
    for (int i = 2; i < w->ndim; i++)
        taps *= (double)w->dims[i];
    /* conv_transpose2d: each input element meets out/groups * kh * kw
     * weights; conv1d: each output element C/groups * k */
    double f = 2.0 * (double)mge_tdesc_count(tr ? x : y) * taps;
    if (is_forward(n->op) && n->nin == 3)
        f += (double)mge_tdesc_count(y);
    return f;
}

mge_status mge_convt_params(int op, int nattr, const mge_attr *attrs, const mge_tdesc *x, mge_param_spec *specs,
                            int *nspecs, mge_error *err)
{
    ct_attrs c;
    mge_attr full[16];
    int nfull;
    const char *name = mge_op_info(op)->name;
    mge_status s = mge_attrs_complete(op, nattr, attrs, full, &nfull, err);
    if (s || (s = get_attrs(op, nfull, full, &c, err)))
        return s;
    if ((s = check_x(name, x, &c, err)))
        return s;
    int64_t wd[5];
    weight_dims(x, &c, wd);
    /* PyTorch's init: kaiming_uniform(a=sqrt(5)) = U(-B, B) with B =
     * 1/sqrt(fan_in), fan_in = weight.size(1) * the kernel's taps (for
     * ConvTranspose2d that is out/groups, its layout's second dim); the
     * bias uses the same bound. */
    double fan_in = (double)wd[1];
    for (int i = 0; i < c.nsp; i++)
        fan_in *= (double)c.k[i];
    char init[64];
    snprintf(init, sizeof init, "uniform(%.9g)", 1.0 / sqrt(fan_in));
    mge_dtype dt = mge_dtype_is_float(x->dtype) ? x->dtype : MGE_F32;
    mge_param_spec_set(&specs[0], "weight", MGE_VAL_PARAM, dt, 2 + c.nsp, wd, init);
    if (c.bias)
        mge_param_spec_set(&specs[1], "bias", MGE_VAL_PARAM, dt, 1, &c.out, init);
    *nspecs = c.bias ? 2 : 1;
    return MGE_OK;
}
