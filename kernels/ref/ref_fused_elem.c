/* ref_fused_elem.c — fused_elemwise (f32), the oracle: per output element,
 * t = x, then each op of `ops` in order (a unary op t = op(t), a binary op
 * t = op(t, the next extra input)), computed in double and rounded once at
 * the store. All inputs broadcast to the output with numpy rules, by plain
 * index arithmetic (stride 0 along broadcast dims). Every input element an
 * output element needs is read before that element is written, so the
 * output may be x's buffer (MGE_OPF_INPLACE). */
#include "ref.h"

#define FE_MAXIN 9   /* x and up to 8 extra inputs (ops.def) */

/* The ops attribute checked against the inputs, as the inference does (a
 * bad entry by its op id: kernels do not see the op registry; the
 * inference, which runs first, names it). */
static mge_status fe_ops(const mge_node *n, int nin, const mge_attr **ops, mge_error *err)
{
    const mge_attr *a = mge_node_attr(n, MGE_KEY_ops);
    if (!a || a->n < 1 || a->n > MGE_MAX_DIMS)
        return mge_error_set(err, MGE_ERR_INVALID, "fused_elemwise: needs attribute 'ops' (1 to %d ops)",
                             MGE_MAX_DIMS);
    int nbin = 0;
    for (int k = 0; k < a->n; k++) {
        if (mge_fused_binary_ok(a->i[k]))
            nbin++;
        else if (!mge_fused_unary_ok(a->i[k]))
            return mge_error_set(err, MGE_ERR_INVALID,
                                 "fused_elemwise: ops entry %d (op %lld) is not a float unary or a binary op", k,
                                 (long long)a->i[k]);
    }
    if (nin != 1 + nbin || nin > FE_MAXIN)
        return mge_error_set(err, MGE_ERR_INVALID, "fused_elemwise: %d binary ops but %d extra inputs", nbin,
                             nin - 1);
    *ops = a;
    return MGE_OK;
}

static mge_status fused_elem_f32(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                 mge_tensor *const *out, mge_error *err)
{
    const mge_attr *ops = NULL;
    mge_status st = fe_ops(n, n->nin, &ops, err);
    if (st)
        return st;
    int nin = n->nin, nd = 0;
    for (int k = 0; k < nin; k++) {
        char what[32];
        snprintf(what, sizeof what, "input %d", k);
        if ((st = ref_check_dtype(ctx, n, what, in[k], MGE_F32, err)))
            return st;
        if (in[k]->ndim > nd)
            nd = in[k]->ndim;
    }
    /* output dims, and each input's strides in them (0 where broadcast) */
    int64_t dims[MGE_MAX_DIMS], str[FE_MAXIN][MGE_MAX_DIMS], tot[FE_MAXIN];
    for (int k = 0; k < nin; k++)
        tot[k] = 1;
    for (int d = nd - 1; d >= 0; d--) {
        int64_t od = 1;
        for (int k = 0; k < nin; k++) {
            int i = in[k]->ndim - nd + d;
            int64_t dk = i >= 0 ? in[k]->dims[i] : 1;
            if (dk != 1 && od != 1 && dk != od) {
                char b1[96], b2[96];
                return mge_error_set(err, MGE_ERR_SHAPE, "fused_elemwise: input %d %s does not broadcast with %s",
                                     k, mge_shape_str(in[k]->dtype, in[k]->ndim, in[k]->dims, b1, sizeof b1),
                                     mge_shape_str(in[0]->dtype, in[0]->ndim, in[0]->dims, b2, sizeof b2));
            }
            if (dk != 1)
                od = dk;
        }
        dims[d] = od;
        for (int k = 0; k < nin; k++) {
            int i = in[k]->ndim - nd + d;
            int64_t dk = i >= 0 ? in[k]->dims[i] : 1;
            str[k][d] = dk == 1 ? 0 : tot[k];
            tot[k] *= dk;
        }
    }
    mge_tensor *y = out[0];
    if ((st = ref_check(ctx, n, "output", y, MGE_F32, nd, dims, err)))
        return st;
    double alpha = mge_node_float(n, MGE_KEY_alpha, 0.01);
    const float *src[FE_MAXIN];
    for (int k = 0; k < nin; k++)
        src[k] = in[k]->data;
    float *dst = y->data;
    int64_t idx[MGE_MAX_DIMS] = {0}, cnt = ref_numel(y);
    for (int64_t i = 0; i < cnt; i++) {
        int64_t off[FE_MAXIN] = {0};
        for (int k = 0; k < nin; k++)
            for (int d = 0; d < nd; d++)
                off[k] += idx[d] * str[k][d];
        double t = src[0][off[0]];
        int next = 1;
        for (int j = 0; j < ops->n; j++) {
            int op = (int)ops->i[j];
            if (mge_fused_binary_ok(op)) {
                t = mge_ref_binary(op, t, src[next][off[next]]);
                next++;
            } else {
                t = mge_ref_unary(op, t, alpha);
            }
        }
        dst[i] = (float)t;
        ref_next(nd, dims, idx);
    }
    return MGE_OK;
}

void mge_ref_register_fused_elem(mge_backend *b)
{
    b->k[MGE_OP_FUSED_ELEMWISE][MGE_F32].run = fused_elem_f32;
}
