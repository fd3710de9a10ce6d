/* op_linear.c — linear and matmul: shape inference, FLOPs, linear's parameters.
 *
 * linear(x[..., in], weight[out, in], bias[out]?) -> [..., out], y = x W^T + b
 * (PyTorch's nn.Linear). `bias` says whether the bias input is present.
 * matmul(a, b) follows numpy.matmul: 1-D operands are promoted ([k] as a
 * row [1,k] on the left, a column [k,1] on the right) and the added dim is
 * removed from the result; leading (batch) dims broadcast. transpose_a and
 * transpose_b swap the last two dims of a rank >= 2 operand first.
 * FLOPs: a multiply-add counts 2: linear 2*M*in*out (+ M*out for the bias,
 * M = rows of x); matmul 2*batch*M*K*N.
 * linear_grad_input(dy, weight) = dy W and linear_grad_weight(dy, x) = the
 * sum over leading dims of dy^T x (autodiff): 2*M*in*out each. */
#include "internal.h"

#include <math.h>
#include <stdio.h>

static mge_status linear_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    const mge_tdesc *x = &in[0], *w = &in[1];
    char bx[96], bw[96];
    mge_tdesc_str(x, bx, sizeof bx);
    mge_tdesc_str(w, bw, sizeof bw);
    int64_t o = mge_node_int(n, MGE_KEY_out, -1);
    int bias = (int)mge_node_int(n, MGE_KEY_bias, 1);
    if (o < 1)
        return mge_error_set(err, MGE_ERR_INVALID, "linear: out=%lld: expected at least 1", (long long)o);
    if (bias != (n->nin == 3))
        return mge_error_set(err, MGE_ERR_INVALID, "linear: bias=%s but %d inputs: expected %d (x, weight%s)",
                             bias ? "true" : "false", n->nin, bias ? 3 : 2, bias ? ", bias" : "");
    if (x->ndim < 1)
        return mge_error_set(err, MGE_ERR_SHAPE, "linear: x is %s: expected rank >= 1 [..., in]", bx);
    if (!mge_dtype_is_float(x->dtype) && x->dtype != MGE_QS8)
        return mge_error_set(err, MGE_ERR_SHAPE, "linear: x is %s: expected a float or qs8 dtype", bx);
    int64_t k = x->dims[x->ndim - 1];
    mge_dtype wdt = x->dtype;
    if (w->dtype != wdt || w->ndim != 2 || w->dims[0] != o || w->dims[1] != k) {
        char be[96];
        int64_t ew[2] = {o, k};
        return mge_error_set(err, MGE_ERR_SHAPE, "linear: weight %s does not fit x %s with out=%lld: expected %s",
                             bw, bx, (long long)o, mge_shape_str(wdt, 2, ew, be, sizeof be));
    }
    if (bias) {
        const mge_tdesc *b = &in[2];
        mge_dtype bdt = x->dtype == MGE_QS8 ? MGE_QS32 : x->dtype;
        if (b->dtype != bdt || b->ndim != 1 || b->dims[0] != o) {
            char bb[96];
            return mge_error_set(err, MGE_ERR_SHAPE, "linear: bias %s: expected %s[%lld]", mge_tdesc_str(b, bb, sizeof bb),
                                 mge_dtype_name(bdt), (long long)o);
        }
    }
    *out = *x;
    out->dims[x->ndim - 1] = o;
    return MGE_OK;
}

static mge_status matmul_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    mge_tdesc a = in[0], b = in[1];
    char ba[96], bb[96];
    mge_tdesc_str(&in[0], ba, sizeof ba);
    mge_tdesc_str(&in[1], bb, sizeof bb);
    if (a.dtype != b.dtype)
        return mge_error_set(err, MGE_ERR_SHAPE, "matmul: dtypes differ: %s and %s: expected the same dtype", ba,
                             bb);
    if (!mge_dtype_is_float(a.dtype) && a.dtype != MGE_I32 && a.dtype != MGE_I64)
        return mge_error_set(err, MGE_ERR_SHAPE, "matmul: %s and %s: expected a float, i32 or i64 dtype", ba, bb);
    if (a.ndim < 1 || b.ndim < 1)
        return mge_error_set(err, MGE_ERR_SHAPE, "matmul: %s and %s: expected operands of rank >= 1", ba, bb);
    int swap_a = (int)mge_node_int(n, MGE_KEY_transpose_a, 0), swap_b = (int)mge_node_int(n, MGE_KEY_transpose_b, 0);
    if (swap_a && a.ndim >= 2) {
        int64_t t = a.dims[a.ndim - 1];
        a.dims[a.ndim - 1] = a.dims[a.ndim - 2];
        a.dims[a.ndim - 2] = t;
    }
    if (swap_b && b.ndim >= 2) {
        int64_t t = b.dims[b.ndim - 1];
        b.dims[b.ndim - 1] = b.dims[b.ndim - 2];
        b.dims[b.ndim - 2] = t;
    }
    int a1 = a.ndim == 1, b1 = b.ndim == 1;
    if (a1) {
        a.ndim = 2;
        a.dims[1] = a.dims[0];
        a.dims[0] = 1;
    }
    if (b1) {
        b.ndim = 2;
        b.dims[1] = 1;
    }
    int64_t m = a.dims[a.ndim - 2], k = a.dims[a.ndim - 1], k2 = b.dims[b.ndim - 2], nn = b.dims[b.ndim - 1];
    if (k != k2)
        return mge_error_set(err, MGE_ERR_SHAPE,
                             "matmul: %s%s and %s%s: inner dims %lld and %lld differ: expected them equal", ba,
                             swap_a ? " (transposed)" : "", bb, swap_b ? " (transposed)" : "", (long long)k,
                             (long long)k2);
    mge_tdesc ab = a, bbt = b, batch;
    ab.ndim = a.ndim - 2;
    bbt.ndim = b.ndim - 2;
    if (!mge_broadcast(&ab, &bbt, &batch))
        return mge_error_set(err, MGE_ERR_SHAPE,
                             "matmul: batch dims of %s and %s do not broadcast: expected each pair equal or 1", ba,
                             bb);
    if (batch.ndim + 2 > MGE_MAX_DIMS)
        return mge_error_set(err, MGE_ERR_SHAPE, "matmul: result rank exceeds %d", MGE_MAX_DIMS);
    out->dtype = a.dtype;
    out->ndim = batch.ndim;
    for (int i = 0; i < batch.ndim; i++)
        out->dims[i] = batch.dims[i];
    if (!a1)
        out->dims[out->ndim++] = m;
    if (!b1)
        out->dims[out->ndim++] = nn;
    return MGE_OK;
}

/* linear_grad_input(dy[..., out], weight[out, in]) -> [..., in];
 * linear_grad_weight(dy[..., out], x[..., in]) -> [out, in]. */
static mge_status linear_grad_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    const char *op = mge_op_info(n->op)->name;
    const mge_tdesc *dy = &in[0], *o = &in[1];
    char bd[96], bo[96];
    mge_tdesc_str(dy, bd, sizeof bd);
    mge_tdesc_str(o, bo, sizeof bo);
    if (dy->ndim < 1 || !mge_dtype_is_float(dy->dtype))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: dy is %s: expected a float [..., out]", op, bd);
    if (o->dtype != dy->dtype)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: dy %s and %s differ in dtype", op, bd, bo);
    if (n->op == MGE_OP_LINEAR_GRAD_INPUT) {
        if (o->ndim != 2 || o->dims[0] != dy->dims[dy->ndim - 1])
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: weight %s does not fit dy %s: expected [%lld, in]", op, bo,
                                 bd, (long long)dy->dims[dy->ndim - 1]);
        *out = *dy;
        out->dims[dy->ndim - 1] = o->dims[1];
        return MGE_OK;
    }
    int same = o->ndim == dy->ndim;
    for (int i = 0; same && i < dy->ndim - 1; i++)
        same = o->dims[i] == dy->dims[i];
    if (!same)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x %s does not fit dy %s: expected the same leading dims", op,
                             bo, bd);
    out->dtype = dy->dtype;
    out->ndim = 2;
    out->dims[0] = dy->dims[dy->ndim - 1];
    out->dims[1] = o->dims[o->ndim - 1];
    return MGE_OK;
}

mge_status mge_linear_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    switch (n->op) {
    case MGE_OP_LINEAR: return linear_infer(n, in, out, err);
    case MGE_OP_LINEAR_GRAD_INPUT:
    case MGE_OP_LINEAR_GRAD_WEIGHT: return linear_grad_infer(n, in, out, err);
    default: return matmul_infer(n, in, out, err);
    }
}

double mge_linear_flops(const mge_node *n, const mge_tdesc *in, const mge_tdesc *out)
{
    const mge_tdesc *a = &in[0], *b = &in[1];
    if (a->ndim < 1 || b->ndim < 1)
        return 0;
    if (n->op == MGE_OP_LINEAR_GRAD_INPUT || n->op == MGE_OP_LINEAR_GRAD_WEIGHT) {
        /* M*out*in multiply-adds: M*out from dy, in from the result's last dim */
        return 2.0 * mge_tdesc_count(a) * (double)out[0].dims[out[0].ndim - 1];
    }
    if (n->op == MGE_OP_LINEAR) {
        double k = (double)a->dims[a->ndim - 1];
        double rows_out = mge_tdesc_count(&out[0]); /* M * out */
        return 2.0 * rows_out * k + (n->nin == 3 ? rows_out : 0);
    }
    /* out has batch*M*N elements; K is a's contracted dim */
    int ta = (int)mge_node_int(n, MGE_KEY_transpose_a, 0) && a->ndim >= 2;
    double k = (double)(ta ? a->dims[a->ndim - 2] : a->dims[a->ndim - 1]);
    return 2.0 * mge_tdesc_count(&out[0]) * k;
}

mge_status mge_linear_params(int op, int nattr, const mge_attr *attrs, const mge_tdesc *x, mge_param_spec *specs,
                             int *nspecs, mge_error *err)
{
    if (op != MGE_OP_LINEAR)
        return mge_error_set(err, MGE_ERR_INVALID, "%s creates no parameters", mge_op_info(op)->name);
    mge_attr full[16];
    int nfull;
    mge_status s = mge_attrs_complete(op, nattr, attrs, full, &nfull, err);
    if (s)
        return s;
    const mge_attr *a = mge_attrs_find(nfull, full, MGE_KEY_out);
    int64_t o = a ? a->i[0] : 0;
    if (o < 1)
        return mge_error_set(err, MGE_ERR_INVALID, "linear: out=%lld: expected at least 1", (long long)o);
    a = mge_attrs_find(nfull, full, MGE_KEY_bias);
    int bias = a ? a->i[0] != 0 : 1;
    char bx[96];
    if (x->ndim < 1 || x->dims[x->ndim - 1] < 1)
        return mge_error_set(err, MGE_ERR_SHAPE, "linear: x is %s: expected rank >= 1 [..., in] with in >= 1",
                             mge_tdesc_str(x, bx, sizeof bx));
    int64_t k = x->dims[x->ndim - 1];
    double bound = 1.0 / sqrt((double)k); /* PyTorch: kaiming_uniform(a=sqrt(5)) = U(-1/sqrt(in), 1/sqrt(in)) */
    mge_dtype dt = mge_dtype_is_float(x->dtype) ? x->dtype : MGE_F32;
    char init[64];
    snprintf(init, sizeof init, "uniform(%.9g)", bound);
    const int64_t wd[2] = {o, k};
    mge_param_spec_set(&specs[0], "weight", MGE_VAL_PARAM, dt, 2, wd, init);
    if (bias)
        mge_param_spec_set(&specs[1], "bias", MGE_VAL_PARAM, dt, 1, &o, init);
    *nspecs = bias ? 2 : 1;
    return MGE_OK;
}
