/* op_pool.c — maxpool2d, avgpool2d and global_avgpool on NCHW.
 *
 * kernel, stride, pad, dilation take one value (both dims) or two (h, w);
 * stride absent means stride = kernel (PyTorch). As in PyTorch, pad may be
 * at most half the kernel (a window must see real input), and with
 * ceil_mode the last window must start inside the input or its left pad.
 * global_avgpool: [N,C,H,W] -> [N,C,1,1].
 * FLOPs: 1 per window element per output (a compare or an add), plus one
 * divide per output for the average pools.
 * maxpool2d_grad, avgpool2d_grad, global_avgpool_grad (dy, x) -> like x
 * (autodiff): the forward's attributes; dy must be the forward's output. */
#include "internal.h"

/* Bounds kernel/stride/pad/dilation so size arithmetic cannot overflow. */
#define MAX_WIN (1 << 30)

static mge_status pair(const mge_node *n, const char *op, int key, int64_t def, int64_t lo, int64_t v[2],
                       mge_error *err)
{
    const mge_attr *a = mge_node_attr(n, key);
    if (!a) {
        v[0] = v[1] = def;
        return MGE_OK;
    }
    if (a->n < 1 || a->n > 2)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: '%s' has %d values: expected 1 or 2 (h, w)", op,
                             mge_key_name(key), a->n);
    v[0] = a->i[0];
    v[1] = a->i[a->n - 1];
    if (v[0] < lo || v[1] < lo || v[0] > MAX_WIN || v[1] > MAX_WIN)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: %s=[%lld,%lld]: expected values in [%lld, %d]", op,
                             mge_key_name(key), (long long)v[0], (long long)v[1], (long long)lo, MAX_WIN);
    return MGE_OK;
}

/* The forward op of a pool gradient op (itself for forward ops). */
static int fwd_op(int op)
{
    switch (op) {
    case MGE_OP_MAXPOOL2D_GRAD: return MGE_OP_MAXPOOL2D;
    case MGE_OP_AVGPOOL2D_GRAD: return MGE_OP_AVGPOOL2D;
    case MGE_OP_GLOBAL_AVGPOOL_GRAD: return MGE_OP_GLOBAL_AVGPOOL;
    default: return op;
    }
}

/* The forward output of op fop (attributes of n) for input x. */
static mge_status pool_fwd_infer(const mge_node *n, int fop, const mge_tdesc *x, mge_tdesc *out, mge_error *err)
{
    const char *op = mge_op_info(n->op)->name;
    char bx[96];
    mge_tdesc_str(x, bx, sizeof bx);
    if (x->ndim != 4)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is %s: expected rank 4 [N,C,H,W]", op, bx);
    int isfloat = mge_dtype_is_float(x->dtype);
    if (n->op == MGE_OP_MAXPOOL2D ? !isfloat && x->dtype != MGE_I8 && x->dtype != MGE_QS8 && x->dtype != MGE_U8
                                  : !isfloat && x->dtype != MGE_QS8)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is %s: expected a float dtype%s", op, bx,
                             n->op == MGE_OP_MAXPOOL2D ? " (or i8, u8, qs8)" : " (or qs8)");
    mge_status st = mge_shape_numel(x->ndim, x->dims, x->dtype, NULL, NULL, err);
    if (st)
        return st;
    *out = *x;
    if (fop == MGE_OP_GLOBAL_AVGPOOL) {
        if (x->dims[2] < 1 || x->dims[3] < 1)
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is %s: expected H, W >= 1", op, bx);
        out->dims[2] = out->dims[3] = 1;
        return MGE_OK;
    }
    int64_t k[2], s[2], p[2], d[2];
    if (!mge_node_attr(n, MGE_KEY_kernel))
        return mge_error_set(err, MGE_ERR_INVALID, "%s: needs attribute 'kernel'", op);
    if ((st = pair(n, op, MGE_KEY_kernel, 1, 1, k, err)) || (st = pair(n, op, MGE_KEY_stride, 0, 1, s, err)) ||
        (st = pair(n, op, MGE_KEY_pad, 0, 0, p, err)) || (st = pair(n, op, MGE_KEY_dilation, 1, 1, d, err)))
        return st;
    if (!mge_node_attr(n, MGE_KEY_stride))
        s[0] = k[0], s[1] = k[1];
    for (int i = 0; i < 2; i++)
        if (p[i] > k[i] / 2)
            return mge_error_set(err, MGE_ERR_INVALID,
                                 "%s: pad=[%lld,%lld] with kernel=[%lld,%lld]: expected pad at most half the kernel",
                                 op, (long long)p[0], (long long)p[1], (long long)k[0], (long long)k[1]);
    int ceil_mode = (int)mge_node_int(n, MGE_KEY_ceil_mode, 0);
    for (int i = 0; i < 2; i++) {
        int64_t o = mge_conv_out_dim(x->dims[2 + i], k[i], s[i], p[i], d[i], ceil_mode);
        if (o <= 0)
            return mge_error_set(err, MGE_ERR_SHAPE,
                                 "%s: x %s is too small for kernel=[%lld,%lld] pad=[%lld,%lld]%s: output %s would "
                                 "be empty",
                                 op, bx, (long long)k[0], (long long)k[1], (long long)p[0], (long long)p[1],
                                 d[0] > 1 || d[1] > 1 ? " with dilation" : "", i ? "width" : "height");
        out->dims[2 + i] = o;
    }
    return MGE_OK;
}

mge_status mge_pool_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    int fop = fwd_op(n->op);
    if (fop == n->op)
        return pool_fwd_infer(n, fop, &in[0], out, err);
    /* (dy, x) -> like x; dy must be the forward's output */
    mge_tdesc y;
    mge_status st = pool_fwd_infer(n, fop, &in[1], &y, err);
    if (st)
        return st;
    const mge_tdesc *dy = &in[0];
    int same = dy->dtype == y.dtype && dy->ndim == y.ndim;
    for (int i = 0; same && i < y.ndim; i++)
        same = dy->dims[i] == y.dims[i];
    if (!same) {
        char bd[96], by[96];
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: dy is %s: expected %s (the forward output)",
                             mge_op_info(n->op)->name, mge_tdesc_str(dy, bd, sizeof bd),
                             mge_tdesc_str(&y, by, sizeof by));
    }
    *out = in[1];
    return MGE_OK;
}

double mge_pool_flops(const mge_node *n, const mge_tdesc *in, const mge_tdesc *out)
{
    if (fwd_op(n->op) != n->op) {
        /* one multiply-add per window element per dy element (the scatter),
         * plus the max's search */
        double dys = mge_tdesc_count(&in[0]);
        if (n->op == MGE_OP_GLOBAL_AVGPOOL_GRAD)
            return mge_tdesc_count(&out[0]) + dys;
        double win = (double)mge_node_ints(n, MGE_KEY_kernel, 0, 1) * (double)mge_node_ints(n, MGE_KEY_kernel, 1, 1);
        return dys * win * (n->op == MGE_OP_MAXPOOL2D_GRAD ? 1.0 : 2.0);
    }
    double outs = mge_tdesc_count(&out[0]);
    if (n->op == MGE_OP_GLOBAL_AVGPOOL)
        return mge_tdesc_count(&in[0]) + outs;
    double win = (double)mge_node_ints(n, MGE_KEY_kernel, 0, 1) * (double)mge_node_ints(n, MGE_KEY_kernel, 1, 1);
    return outs * win + (n->op == MGE_OP_AVGPOOL2D ? outs : 0);
}
