/* op_pool3d.c — maxpool3d, avgpool3d, their gradients and max_unpool
 * (family pool3d; the window geometry is kernels/kpool3d.h's).
 * maxpool3d(x[N,C,D,H,W]) -> y[, indices i64] (ONNX MaxPool's Indices:
 *   flat indices into x, the plane row-major, or column-major with
 *   storage_order=1); avgpool3d(x) -> y. Float dtypes (maxpool3d also i8,
 *   u8); the ONNX reader runs 2-D pools with dilation, asymmetric pads or
 *   indices on them over [N,C,1,H,W].
 * maxpool3d_grad, avgpool3d_grad (dy, x) -> like x.
 * max_unpool(x, idx[, shape]) -> y: zeros with y.flat[idx] = x (ONNX
 *   MaxUnpool); y's spatial dims are (in-1)*stride - pad_begin - pad_end +
 *   kernel, or the attribute shape, or the input shape (known at plan time).
 * FLOPs: 1 per window element per output, plus a divide for the average;
 * the gradients twice that; max_unpool moves data only. */
#include "internal.h"
#include "kpool3d.h"

static int fwd_op(int op)
{
    switch (op) {
    case MGE_OP_MAXPOOL3D_GRAD: return MGE_OP_MAXPOOL3D;
    case MGE_OP_AVGPOOL3D_GRAD: return MGE_OP_AVGPOOL3D;
    default: return op;
    }
}

static mge_status pool_fwd(const mge_node *n, int fop, const mge_tdesc *x, mge_tdesc *out, mge_error *err)
{
    const char *op = mge_op_info(n->op)->name;
    char bx[96];
    mge_tdesc_str(x, bx, sizeof bx);
    if (x->ndim != 5)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is %s: expected rank 5 [N,C,D,H,W]", op, bx);
    int isf = mge_dtype_is_float(x->dtype);
    if (fop == MGE_OP_MAXPOOL3D ? !isf && x->dtype != MGE_I8 && x->dtype != MGE_U8 : !isf)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is %s: expected a float dtype%s", op, bx,
                             fop == MGE_OP_MAXPOOL3D ? " (or i8, u8)" : "");
    mge_status st = mge_shape_numel(x->ndim, x->dims, x->dtype, NULL, NULL, err);
    kp3_geom g;
    if (st || (st = kp3_geom_of(n, op, x->dims, &g, err)))
        return st;
    out[0] = *x;
    for (int i = 0; i < 3; i++)
        out[0].dims[2 + i] = g.out[i];
    /* pads up to 2^30 can make the output's count overflow: refused */
    if ((st = mge_shape_numel(5, out[0].dims, x->dtype, NULL, NULL, err)))
        return st;
    if (n->op == MGE_OP_MAXPOOL3D && n->nout > 1) {
        out[1] = out[0];
        out[1].dtype = MGE_I64;
    }
    return MGE_OK;
}

/* (in-1)*stride - pad_begin - pad_end + kernel per spatial dim, or the shape. */
static mge_status unpool_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    const mge_tdesc *x = &in[0], *idx = &in[1];
    char bx[96], bi[96];
    mge_tdesc_str(x, bx, sizeof bx);
    int nsp = x->ndim - 2;
    if (nsp < 1 || nsp > 3)
        return mge_error_set(err, MGE_ERR_SHAPE, "max_unpool: x is %s: expected rank 3 to 5 [N,C,spatial...]", bx);
    int same = idx->ndim == x->ndim && (idx->dtype == MGE_I64 || idx->dtype == MGE_I32);
    for (int i = 0; same && i < x->ndim; i++)
        same = idx->dims[i] == x->dims[i];
    if (!same)
        return mge_error_set(err, MGE_ERR_SHAPE, "max_unpool: indices are %s: expected i32 or i64 of x's shape %s",
                             mge_tdesc_str(idx, bi, sizeof bi), bx);
    out[0] = *x;
    const mge_attr *sa = mge_node_attr(n, MGE_KEY_shape);
    if (n->nin > 2 || sa) {
        const mge_tdesc *s = n->nin > 2 ? &in[2] : NULL;
        if (s && (!s->known || s->ndim != 1 || s->dims[0] != x->ndim))
            return mge_error_set(err, MGE_ERR_SHAPE,
                                 "max_unpool: shape must be a %d-element vector known at plan time", x->ndim);
        if (!s && sa->n != x->ndim)
            return mge_error_set(err, MGE_ERR_INVALID, "max_unpool: shape has %d values: expected %d", sa->n,
                                 x->ndim);
        for (int i = 0; i < x->ndim; i++) {
            int64_t v = s ? (int64_t)s->val[i] : sa->i[i];
            if (i < 2 ? v != x->dims[i] : v < 1 || v > KP3_MAX)
                return mge_error_set(err, MGE_ERR_SHAPE, "max_unpool: shape[%d] = %lld for x %s: expected %s", i,
                                     (long long)v, bx, i < 2 ? "x's N and C" : "a size in [1, 2^30]");
            out[0].dims[i] = v;
        }
        return mge_shape_numel(out[0].ndim, out[0].dims, x->dtype, NULL, NULL, err);
    }
    const mge_attr *ka = mge_node_attr(n, MGE_KEY_kernel), *sta = mge_node_attr(n, MGE_KEY_stride),
                   *pa = mge_node_attr(n, MGE_KEY_pad);
    if (!ka || (ka->n != 1 && ka->n != nsp) || (sta && sta->n != 1 && sta->n != nsp) ||
        (pa && pa->n != 1 && pa->n != nsp && pa->n != 2 * nsp))
        return mge_error_set(err, MGE_ERR_INVALID,
                             "max_unpool: needs kernel (1 or %d values), stride (1 or %d) and pad (1, %d or %d)", nsp,
                             nsp, nsp, 2 * nsp);
    for (int i = 0; i < nsp; i++) {
        int64_t k = ka->i[ka->n == 1 ? 0 : i], s = sta ? sta->i[sta->n == 1 ? 0 : i] : k;
        int64_t pb = pa ? pa->i[pa->n == 1 ? 0 : i] : 0, pe = pa ? pa->i[pa->n == 1 ? 0 : pa->n == nsp ? i : nsp + i] : 0;
        if (k < 1 || s < 1 || pb < 0 || pe < 0 || k > KP3_MAX || s > KP3_MAX || pb > KP3_MAX || pe > KP3_MAX)
            return mge_error_set(err, MGE_ERR_INVALID, "max_unpool: kernel %lld, stride %lld, pads %lld+%lld: "
                                 "expected kernel, stride >= 1 and pads >= 0", (long long)k, (long long)s,
                                 (long long)pb, (long long)pe);
        if (x->dims[2 + i] < 0) {
            out[0].dims[2 + i] = x->dims[2 + i];
            continue;
        }
        int64_t o = (x->dims[2 + i] - 1) * s - pb - pe + k;
        if (o < 1 || x->dims[2 + i] > KP3_MAX)
            return mge_error_set(err, MGE_ERR_SHAPE, "max_unpool: x %s with kernel %lld, stride %lld, pads %lld+%lld "
                                 "gives an empty output", bx, (long long)k, (long long)s, (long long)pb, (long long)pe);
        out[0].dims[2 + i] = o;
    }
    return mge_shape_numel(out[0].ndim, out[0].dims, x->dtype, NULL, NULL, err);
}

mge_status mge_pool3d_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    if (n->op == MGE_OP_MAX_UNPOOL)
        return unpool_infer(n, in, out, err);
    int fop = fwd_op(n->op);
    if (fop == n->op)
        return pool_fwd(n, fop, &in[0], out, err);
    mge_tdesc y[2];
    mge_status st = pool_fwd(n, fop, &in[1], y, err);
    if (st)
        return st;
    const mge_tdesc *dy = &in[0];
    int same = dy->dtype == y[0].dtype && dy->ndim == y[0].ndim;
    for (int i = 0; same && i < y[0].ndim; i++)
        same = dy->dims[i] == y[0].dims[i];
    if (!same) {
        char bd[96], by[96];
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: dy is %s: expected %s (the forward output)",
                             mge_op_info(n->op)->name, mge_tdesc_str(dy, bd, sizeof bd),
                             mge_tdesc_str(&y[0], by, sizeof by));
    }
    out[0] = in[1];
    return MGE_OK;
}

double mge_pool3d_flops(const mge_node *n, const mge_tdesc *in, const mge_tdesc *out)
{
    if (n->op == MGE_OP_MAX_UNPOOL)
        return 0;
    double win = 1;
    for (int i = 0; i < 3; i++)
        win *= (double)mge_node_ints(n, MGE_KEY_kernel, i, mge_node_ints(n, MGE_KEY_kernel, 0, 1));
    if (fwd_op(n->op) != n->op)
        return mge_tdesc_count(&in[0]) * win * 2;
    double outs = mge_tdesc_count(&out[0]);
    return outs * win + (n->op == MGE_OP_AVGPOOL3D ? outs : 0);
}
