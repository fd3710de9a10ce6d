/* op_apool.c — adaptive pooling: shape inference and FLOPs.
 *
 * adaptive_avgpool2d / adaptive_maxpool2d(x[N,C,H,W] or [C,H,W]) ->
 *   [..., oh, ow], output_size one value (both) or [oh, ow];
 * adaptive_avgpool1d / adaptive_maxpool1d(x[N,C,L] or [C,L]) -> [..., ol];
 *   bins as PyTorch (kernels/apool_bins.h), any output size, also larger
 *   than the input. Float dtypes.
 * *_grad(dy, x) -> like x; dy must be the forward's output.
 * FLOPs: one per element of every bin (the max's compare, the mean's add)
 * plus a divide per output for the mean; the gradients the same. */
#include "internal.h"

#include "apool_bins.h"

#include <stdio.h>

#define MAX_OUT (1 << 30)

static int fwd_op(int op)
{
    switch (op) {
    case MGE_OP_ADAPTIVE_AVGPOOL2D_GRAD: return MGE_OP_ADAPTIVE_AVGPOOL2D;
    case MGE_OP_ADAPTIVE_MAXPOOL2D_GRAD: return MGE_OP_ADAPTIVE_MAXPOOL2D;
    case MGE_OP_ADAPTIVE_AVGPOOL1D_GRAD: return MGE_OP_ADAPTIVE_AVGPOOL1D;
    case MGE_OP_ADAPTIVE_MAXPOOL1D_GRAD: return MGE_OP_ADAPTIVE_MAXPOOL1D;
    }
    return op;
}

static int nspatial(int op)
{
    op = fwd_op(op);
    return op == MGE_OP_ADAPTIVE_AVGPOOL2D || op == MGE_OP_ADAPTIVE_MAXPOOL2D ? 2 : 1;
}

/* The output of the forward op for x into y. */
static mge_status fwd_shape(const mge_node *n, const mge_tdesc *x, mge_tdesc *y, mge_error *err)
{
    const char *op = mge_op_info(n->op)->name;
    int nsp = nspatial(n->op);
    const mge_attr *a = mge_node_attr(n, MGE_KEY_output_size);
    if (!a)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: needs attribute 'output_size'", op);
    if (a->n < 1 || a->n > nsp)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: output_size has %d values: expected %s", op, a->n,
                             nsp == 2 ? "1 or 2 (h, w)" : "1");
    int64_t os[2] = {a->i[0], a->i[a->n - 1]};
    for (int i = 0; i < nsp; i++)
        if (os[i] < 1 || os[i] > MAX_OUT) {
            char b[64];
            if (nsp == 2)
                snprintf(b, sizeof b, "[%lld,%lld]", (long long)os[0], (long long)os[1]);
            else
                snprintf(b, sizeof b, "%lld", (long long)os[0]);
            return mge_error_set(err, MGE_ERR_INVALID, "%s: output_size=%s: expected values in [1, %d]", op, b,
                                 MAX_OUT);
        }
    char bx[96];
    mge_tdesc_str(x, bx, sizeof bx);
    if (x->ndim != nsp + 1 && x->ndim != nsp + 2)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is %s: expected rank %d or %d (%s)", op, bx, nsp + 1,
                             nsp + 2, nsp == 2 ? "[N,C,H,W] or [C,H,W]" : "[N,C,L] or [C,L]");
    if (!mge_dtype_is_float(x->dtype))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is %s: expected a float dtype", op, bx);
    mge_status s = mge_shape_numel(x->ndim, x->dims, x->dtype, NULL, NULL, err);
    if (s)
        return s;
    *y = *x;
    for (int i = 0; i < nsp; i++) {
        int64_t L = x->dims[x->ndim - nsp + i];
        if (L < 1)
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is %s: the pooled dims must not be empty", op, bx);
        if (L > ((int64_t)1 << 62) / (os[i] + 1))
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: x %s with output_size %lld: too large to bin", op, bx,
                                 (long long)os[i]);
        y->dims[x->ndim - nsp + i] = os[i];
    }
    if (mge_shape_numel(y->ndim, y->dims, y->dtype, NULL, NULL, NULL)) {
        char by[96];
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: output %s of x %s is too large (more than 2^48 elements)", op,
                             mge_tdesc_str(y, by, sizeof by), bx);
    }
    return MGE_OK;
}

mge_status mge_apool_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    if (fwd_op(n->op) == n->op)
        return fwd_shape(n, &in[0], out, err);
    const char *op = mge_op_info(n->op)->name;
    mge_tdesc y;
    mge_status s = fwd_shape(n, &in[1], &y, err);
    if (s)
        return s;
    const mge_tdesc *dy = &in[0];
    int ok = dy->dtype == y.dtype && dy->ndim == y.ndim;
    for (int i = 0; ok && i < y.ndim; i++)
        ok = dy->dims[i] == y.dims[i];
    if (!ok) {
        char bd[96], be[96];
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: dy is %s: expected %s (the forward output)", op,
                             mge_tdesc_str(dy, bd, sizeof bd), mge_tdesc_str(&y, be, sizeof be));
    }
    *out = in[1];
    return MGE_OK;
}

/* Sum of the bin lengths of n outputs over L. */
static double bins_len(int64_t L, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += (double)(mge_apool_end(i, L, n) - mge_apool_start(i, L, n));
    return s;
}

double mge_apool_flops(const mge_node *n, const mge_tdesc *in, const mge_tdesc *out)
{
    int grad = fwd_op(n->op) != n->op, nsp = nspatial(n->op);
    const mge_tdesc *x = grad ? &in[1] : &in[0], *y = grad ? &in[0] : &out[0];
    if (x->ndim < nsp + 1 || y->ndim != x->ndim)
        return 0;
    int64_t P, H, W, oh, ow;
    mge_apool_dims(nsp, x->ndim, x->dims, &P, &H, &W);
    mge_apool_dims(nsp, y->ndim, y->dims, &P, &oh, &ow);
    if (oh < 1 || ow < 1 || oh > MAX_OUT || ow > MAX_OUT)
        return 0;
    double f = (double)P * bins_len(H, oh) * bins_len(W, ow);
    int avg = fwd_op(n->op) == MGE_OP_ADAPTIVE_AVGPOOL2D || fwd_op(n->op) == MGE_OP_ADAPTIVE_AVGPOOL1D;
    return avg ? f + mge_tdesc_count(y) : f;
}
