/* op_attn.c — shape inference, FLOPs and parameters of group "attn":
 * embedding, scaled_dot_product_attention and its gradient op (see
 * lib/ops.def and mge-ops(7)).
 *
 * embedding(idx, weight[num,dim]) -> idx.dims + [dim]; FLOPs 0 (row copies).
 * scaled_dot_product_attention(q, k, v[, mask]) -> q.dims[:-1] + [Dv];
 *   FLOPs 2*Sq*Sk*(D + Dv) per leading index (the two products) plus 5 per
 *   score (scale, mask, max, exp, sum).
 * scaled_dot_product_attention_grad(dy, q, k, v[, mask]) -> dq, dk, dv;
 *   FLOPs: the forward's recomputation plus three products (dP = dy v^T,
 *   dq, dk), dv, and 4 per score. */
#include "internal.h"

#include <math.h>
#include <stdio.h>

static const char *opname(const mge_node *n)
{
    return mge_op_info(n->op)->name;
}

static mge_status embedding_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    char bi[96], bw[96];
    const mge_tdesc *idx = &in[0];
    int64_t num = mge_node_int(n, MGE_KEY_num, 0), dim = mge_node_int(n, MGE_KEY_dim, 0);
    if (num < 1 || dim < 1)
        return mge_error_set(err, MGE_ERR_INVALID, "embedding: num=%lld dim=%lld: expected both at least 1",
                             (long long)num, (long long)dim);
    if (idx->dtype != MGE_I32 && idx->dtype != MGE_I64)
        return mge_error_set(err, MGE_ERR_SHAPE, "embedding: indices %s: expected dtype i32 or i64",
                             mge_tdesc_str(idx, bi, sizeof bi));
    if (n->nin < 2)
        return mge_error_set(err, MGE_ERR_INVALID, "embedding: expected the table as input 2");
    const mge_tdesc *w = &in[1];
    if (w->ndim != 2 || w->dims[0] != num || w->dims[1] != dim || !mge_dtype_is_float(w->dtype))
        return mge_error_set(err, MGE_ERR_SHAPE, "embedding: weight %s: expected a float [%lld,%lld] (num, dim)",
                             mge_tdesc_str(w, bw, sizeof bw), (long long)num, (long long)dim);
    if (idx->ndim + 1 > MGE_MAX_DIMS)
        return mge_error_set(err, MGE_ERR_SHAPE, "embedding: indices %s: the output would have rank over %d",
                             mge_tdesc_str(idx, bi, sizeof bi), MGE_MAX_DIMS);
    out->dtype = w->dtype;
    out->ndim = idx->ndim + 1;
    for (int d = 0; d < idx->ndim; d++)
        out->dims[d] = idx->dims[d];
    out->dims[idx->ndim] = dim;
    return MGE_OK;
}

/* q, k, v and the mask of scaled_dot_product_attention (in[0..nin)). */
static mge_status sdpa_check(const mge_node *n, const mge_tdesc *in, int nin, mge_error *err)
{
    const char *name = opname(n);
    const mge_tdesc *q = &in[0], *k = &in[1], *v = &in[2];
    char bq[96], bk[96], bv[96], bm[96];
    mge_tdesc_str(q, bq, sizeof bq);
    mge_tdesc_str(k, bk, sizeof bk);
    mge_tdesc_str(v, bv, sizeof bv);
    if (!mge_dtype_is_float(q->dtype) || q->ndim < 2)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: q %s: expected a float [..., Sq, D]", name, bq);
    if (k->dtype != q->dtype || v->dtype != q->dtype || k->ndim != q->ndim || v->ndim != q->ndim)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: q %s, k %s, v %s: expected one dtype and one rank", name, bq,
                             bk, bv);
    int r = q->ndim;
    for (int d = 0; d < r - 2; d++)
        if (k->dims[d] != q->dims[d] || v->dims[d] != q->dims[d])
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: q %s, k %s, v %s: expected equal leading dims", name, bq,
                                 bk, bv);
    if (k->dims[r - 1] != q->dims[r - 1])
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: q %s and k %s: expected the same D (last dim)", name, bq, bk);
    if (v->dims[r - 2] != k->dims[r - 2])
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: k %s and v %s: expected the same Sk (dim %d)", name, bk, bv,
                             r - 2);
    if (k->dims[r - 2] < 1)   /* softmax over no keys: PyTorch's empty product gives 0, ours would be NaN */
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: k %s: expected at least one key", name, bk);
    if (nin > 3) {
        const mge_tdesc *m = &in[3];
        mge_tdesc_str(m, bm, sizeof bm);
        if (m->dtype != MGE_BOOL && m->dtype != q->dtype)
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: mask %s: expected bool or %s (q's dtype)", name, bm,
                                 mge_dtype_name(q->dtype));
        int ok = m->ndim <= r;
        for (int d = 0; ok && d < m->ndim; d++) {
            int64_t md = m->dims[m->ndim - 1 - d];
            int64_t want = d == 0 ? k->dims[r - 2] : q->dims[r - 1 - d];
            ok = md == 1 || md == want;
        }
        if (!ok)
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: mask %s does not broadcast to the scores [..., %lld, %lld]",
                                 name, bm, (long long)q->dims[r - 2], (long long)k->dims[r - 2]);
    }
    double p = mge_node_float(n, MGE_KEY_dropout, 0);
    if (!(p >= 0 && p < 1))
        return mge_error_set(err, MGE_ERR_INVALID, "%s: dropout=%g: expected a probability in [0, 1)", name, p);
    const mge_attr *sa = mge_node_attr(n, MGE_KEY_scale);
    if (sa && !isfinite(sa->f))
        return mge_error_set(err, MGE_ERR_INVALID, "%s: scale=%g: expected a finite number", name, sa->f);
    return MGE_OK;
}

mge_status mge_attn_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    if (n->op == MGE_OP_EMBEDDING)
        return embedding_infer(n, in, out, err);
    int grad = n->op == MGE_OP_SDPA_GRAD;
    const mge_tdesc *f = in + grad;
    mge_status s = sdpa_check(n, f, n->nin - grad, err);
    if (s)
        return s;
    int r = f[0].ndim;
    mge_tdesc y = f[0];
    y.known = 0;
    y.dims[r - 1] = f[2].dims[r - 1];
    if (!grad) {
        out[0] = y;
        return MGE_OK;
    }
    const mge_tdesc *dy = &in[0];
    int same = dy->dtype == y.dtype && dy->ndim == y.ndim;
    for (int d = 0; same && d < r; d++)
        same = dy->dims[d] == y.dims[d];
    if (!same) {
        char bd[96], by[96];
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: dy %s: expected the forward output's %s", opname(n),
                             mge_tdesc_str(dy, bd, sizeof bd), mge_tdesc_str(&y, by, sizeof by));
    }
    for (int i = 0; i < 3; i++) {
        out[i] = f[i];
        out[i].known = 0;
    }
    return MGE_OK;
}

double mge_attn_flops(const mge_node *n, const mge_tdesc *in, const mge_tdesc *out)
{
    (void)out;
    if (n->op == MGE_OP_EMBEDDING)
        return 0;
    const mge_tdesc *f = in + (n->op == MGE_OP_SDPA_GRAD);
    int r = f[0].ndim;
    double lead = 1;
    for (int d = 0; d < r - 2; d++)
        lead *= (double)f[0].dims[d];
    double sq = (double)f[0].dims[r - 2], sk = (double)f[1].dims[r - 2];
    double D = (double)f[0].dims[r - 1], Dv = (double)f[2].dims[r - 1];
    double scores = lead * sq * sk;
    double fwd = scores * (2 * D + 2 * Dv + 5);
    if (n->op == MGE_OP_SDPA)
        return fwd;
    return fwd + scores * (2 * Dv + 4 * D + 2 * Dv + 4);
}

mge_status mge_attn_params(int op, int nattr, const mge_attr *attrs, const mge_tdesc *x, mge_param_spec *specs,
                           int *nspecs, mge_error *err)
{
    (void)x;
    if (op != MGE_OP_EMBEDDING)
        return mge_error_set(err, MGE_ERR_INVALID, "%s creates no parameters", mge_op_info(op)->name);
    mge_attr full[16];
    int nfull;
    mge_status s = mge_attrs_complete(op, nattr, attrs, full, &nfull, err);
    if (s)
        return s;
    const mge_attr *a = mge_attrs_find(nfull, full, MGE_KEY_num), *b = mge_attrs_find(nfull, full, MGE_KEY_dim);
    int64_t wd[2] = {a ? a->i[0] : 0, b ? b->i[0] : 0};
    if (wd[0] < 1 || wd[1] < 1)
        return mge_error_set(err, MGE_ERR_INVALID, "embedding: num=%lld dim=%lld: expected both at least 1",
                             (long long)wd[0], (long long)wd[1]);
    mge_param_spec_set(&specs[0], "weight", MGE_VAL_PARAM, MGE_F32, 2, wd, "normal(1)"); /* nn.Embedding: N(0,1) */
    *nspecs = 1;
    return MGE_OK;
}
