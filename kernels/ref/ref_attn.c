/* ref_attn.c — reference kernels of group "attn": embedding (row copies),
 * scaled_dot_product_attention and its gradient as the plain formulas in
 * double, one query row at a time (the oracle the fused cpu kernels are
 * compared with). Shapes and indices are checked first (kernels/kattn.h).
 * A row whose keys are all masked has weights 0/0: NaN, as PyTorch's
 * softmax gives. */
#include "ref.h"
#include "kattn.h"

#include <stdlib.h>

static mge_status embedding_ref(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                mge_tensor *const *out, mge_error *err)
{
    (void)ctx, (void)n;
    const mge_tensor *idx = in[0], *w = in[1];
    mge_tensor *y = out[0];
    mge_status st = kattn_emb_shapes(idx, w, y, err);
    if (st || (st = kattn_emb_check(idx, w->dims[0], err)))
        return st;
    size_t row = (size_t)w->dims[1] * mge_dtype_size(w->dtype);
    int64_t cnt = mge_tensor_numel(idx);
    for (int64_t i = 0; i < cnt && row; i++)
        memcpy((char *)y->data + (size_t)i * row, (const char *)w->data + (size_t)kidx_ld(idx->dtype, idx->data, i) * row,
               row);
    return MGE_OK;
}

/* Scores of query row i of leading index b into s[0..Sk) (-inf where
 * masked); returns the row's max. */
static double ref_scores(const kattn *a, mge_dtype dt, const mge_tensor *q, const mge_tensor *k, const mge_tensor *m,
                         int64_t b, int64_t i, double *s)
{
    double mx = -INFINITY;
    int64_t mb = a->mask ? kattn_mask_base(a, b) + i * a->mq : 0;
    for (int64_t j = 0; j < a->Sk; j++) {
        double acc = 0;
        for (int64_t d = 0; d < a->D; d++)
            acc += ref_ld(dt, q->data, (b * a->Sq + i) * a->D + d) * ref_ld(dt, k->data, (b * a->Sk + j) * a->D + d);
        acc *= a->scale;
        if (a->mask == 1 && !((const uint8_t *)m->data)[mb + j * a->mk])
            acc = -INFINITY;
        else if (a->mask == 2)
            acc += ref_ld(dt, m->data, mb + j * a->mk);
        if (a->causal && j > i)
            acc = -INFINITY;
        s[j] = acc;
        if (acc > mx)
            mx = acc;
    }
    return mx;
}

/* s[] to softmax weights in place (NaN when every key is masked). */
static void ref_softmax(int64_t Sk, double mx, double *s)
{
    double sum = 0;
    for (int64_t j = 0; j < Sk; j++)
        sum += s[j] = mx == -INFINITY ? 0 : exp(s[j] - mx);
    for (int64_t j = 0; j < Sk; j++)
        s[j] = mx == -INFINITY ? NAN : s[j] / sum;
}

static mge_status sdpa_ref(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                           mge_error *err)
{
    const char *op = ref_opname(ctx, n);
    kattn a;
    mge_status st = kattn_setup(op, n, in, n->nin, out, 0, ctx && ctx->training, &a, err);
    const mge_tensor *q = in[0], *k = in[1], *v = in[2], *m = n->nin > 3 ? in[3] : NULL;
    if (st || (st = kattn_mask_nan(op, m, err)))
        return st;
    if (a.p > 0) {
        if (!ctx->rng)
            return mge_error_set(err, MGE_ERR_INVALID, "%s: dropout in training needs a random generator", op);
        a.seed = kattn_seed(ctx, n, 0);
    }
    mge_dtype dt = q->dtype;
    double *s = malloc(sizeof(double) * (size_t)(a.Sk + a.Dv + 1));
    if (!s)
        return mge_error_set(err, MGE_ERR_NOMEM, "%s: out of memory", op);
    double *o = s + a.Sk;
    for (int64_t b = 0; b < a.lead; b++)
        for (int64_t i = 0; i < a.Sq; i++) {
            ref_softmax(a.Sk, ref_scores(&a, dt, q, k, m, b, i, s), s);
            for (int64_t e = 0; e < a.Dv; e++)
                o[e] = 0;
            for (int64_t j = 0; j < a.Sk; j++) {
                double w = s[j];
                if (a.p > 0)
                    w = kattn_keep(a.seed, (uint64_t)((b * a.Sq + i) * a.Sk + j), a.p) ? w / (1 - a.p) : 0;
                for (int64_t e = 0; e < a.Dv; e++)
                    o[e] += w * ref_ld(dt, v->data, (b * a.Sk + j) * a.Dv + e);
            }
            for (int64_t e = 0; e < a.Dv; e++)
                ref_st(dt, out[0]->data, (b * a.Sq + i) * a.Dv + e, o[e]);
        }
    free(s);
    return MGE_OK;
}

/* dq, dk, dv with P the softmax weights: dv = P^T dy, dP = dy v^T,
 * dS = P (dP - rowsum(P dP)), dq = scale dS k, dk = scale dS^T q; with
 * dropout P D stands for P in dv and dP is dy v^T D (D the forward's
 * draws, replayed). */
static mge_status sdpa_grad_ref(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                mge_tensor *const *out, mge_error *err)
{
    const char *op = ref_opname(ctx, n);
    kattn a;
    mge_status st = kattn_setup(op, n, in + 1, n->nin - 1, out, 1, ctx && ctx->training, &a, err);
    const mge_tensor *dy = in[0], *q = in[1], *k = in[2], *v = in[3], *m = n->nin > 4 ? in[4] : NULL;
    if (st || (st = kattn_mask_nan(op, m, err)))
        return st;
    if (a.p > 0)
        a.seed = kattn_seed(ctx, n, 1);
    int64_t yd[MGE_MAX_DIMS];
    for (int d = 0; d < q->ndim; d++)
        yd[d] = q->dims[d];
    yd[q->ndim - 1] = a.Dv;
    if ((st = ref_check(ctx, n, "dy", dy, q->dtype, q->ndim, yd, err)))
        return st;
    mge_dtype dt = q->dtype;
    size_t nd = (size_t)(2 * a.Sk + a.D + a.Sk * a.D + a.Sk * a.Dv + 1);
    double *p = malloc(sizeof(double) * nd);
    if (!p)
        return mge_error_set(err, MGE_ERR_NOMEM, "%s: out of memory", op);
    double *dp = p + a.Sk, *dq = dp + a.Sk, *dk = dq + a.D, *dv = dk + a.Sk * a.D;
    for (int64_t b = 0; b < a.lead; b++) {
        for (int64_t j = 0; j < a.Sk * a.D; j++)
            dk[j] = 0;
        for (int64_t j = 0; j < a.Sk * a.Dv; j++)
            dv[j] = 0;
        for (int64_t i = 0; i < a.Sq; i++) {
            ref_softmax(a.Sk, ref_scores(&a, dt, q, k, m, b, i, p), p);
            const int64_t yo = (b * a.Sq + i) * a.Dv, qo = (b * a.Sq + i) * a.D;
            double delta = 0;
            for (int64_t j = 0; j < a.Sk; j++) {
                /* dropout: the weights are p D with D = keep / (1 - p) */
                double dj = 1;
                if (a.p > 0)
                    dj = kattn_keep(a.seed, (uint64_t)((b * a.Sq + i) * a.Sk + j), a.p) ? 1 / (1 - a.p) : 0;
                double acc = 0;
                for (int64_t e = 0; e < a.Dv; e++) {
                    double g = ref_ld(dt, dy->data, yo + e);
                    acc += g * ref_ld(dt, v->data, (b * a.Sk + j) * a.Dv + e);
                    dv[j * a.Dv + e] += p[j] * dj * g;
                }
                dp[j] = acc * dj;
                delta += p[j] * dp[j];
            }
            for (int64_t d = 0; d < a.D; d++)
                dq[d] = 0;
            for (int64_t j = 0; j < a.Sk; j++) {
                double ds = p[j] * (dp[j] - delta) * a.scale;
                if (ds == 0)
                    continue;   /* masked keys: no contribution (and no 0 * inf) */
                for (int64_t d = 0; d < a.D; d++) {
                    dq[d] += ds * ref_ld(dt, k->data, (b * a.Sk + j) * a.D + d);
                    dk[j * a.D + d] += ds * ref_ld(dt, q->data, qo + d);
                }
            }
            for (int64_t d = 0; d < a.D; d++)
                ref_st(dt, out[0]->data, qo + d, dq[d]);
        }
        for (int64_t j = 0; j < a.Sk * a.D; j++)
            ref_st(dt, out[1]->data, b * a.Sk * a.D + j, dk[j]);
        for (int64_t j = 0; j < a.Sk * a.Dv; j++)
            ref_st(dt, out[2]->data, b * a.Sk * a.Dv + j, dv[j]);
    }
    free(p);
    return MGE_OK;
}

void mge_ref_register_attn(mge_backend *b)
{
    REF_EACH_FLOAT(dt) {
        b->k[MGE_OP_SDPA][dt].run = sdpa_ref;
        b->k[MGE_OP_SDPA_GRAD][dt].run = sdpa_grad_ref;
    }
    b->k[MGE_OP_EMBEDDING][MGE_I32].run = embedding_ref;
    b->k[MGE_OP_EMBEDDING][MGE_I64].run = embedding_ref;
}
