/* kattn.h — what the attention and embedding kernels of ref_attn.c and
 * cpu_attn.c share: the geometry of scaled_dot_product_attention checked
 * from the tensors (so a kernel handed shapes the inference did not make
 * fails with a message, never reads out of bounds), the mask's broadcast
 * strides, the NaN check of a float mask, the dropout draw (a hash of one
 * seed and the score's position, so every backend and thread count keeps
 * the same weights), and embedding's index check. */
#ifndef MGE_KATTN_H
#define MGE_KATTN_H

#include "internal.h"
#include "kindex.h"

#include <math.h>
#include <stdio.h>

typedef struct kattn {
    int64_t lead, Sq, Sk, D, Dv;
    int nlead;
    int64_t ldims[MGE_MAX_DIMS];   /* the leading dims */
    int64_t mls[MGE_MAX_DIMS];     /* the mask's stride per leading dim (0: broadcast) */
    int64_t mq, mk;                /* its strides along Sq and Sk */
    int mask;                      /* 0 none, 1 bool, 2 float */
    int causal;
    double scale, p;               /* p: dropout probability (0 outside training) */
    uint64_t seed;
} kattn;

/* Shapes of q, k, v[, mask] and of out (y, or dq/dk/dv when grad: out[0..3)
 * like q, k, v; dy checked by the caller) against each other. */
static inline mge_status kattn_setup(const char *op, const mge_node *n, mge_tensor *const *in, int nin,
                                     mge_tensor *const *out, int grad, int training, kattn *a, mge_error *err)
{
    const mge_tensor *q = in[0], *k = in[1], *v = in[2], *m = nin > 3 ? in[3] : NULL;
    int r = q->ndim;
    if (!mge_dtype_is_float(q->dtype) || r < 2 || r > MGE_MAX_DIMS || k->dtype != q->dtype ||
        v->dtype != q->dtype || k->ndim != r || v->ndim != r)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: q, k, v: expected float tensors of one dtype and rank >= 2", op);
    for (int d = 0; d < r - 2; d++)
        if (k->dims[d] != q->dims[d] || v->dims[d] != q->dims[d])
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: q, k, v: expected equal leading dims", op);
    a->nlead = r - 2;
    a->lead = 1;
    for (int d = 0; d < r - 2; d++)
        a->lead *= a->ldims[d] = q->dims[d];
    a->Sq = q->dims[r - 2], a->D = q->dims[r - 1], a->Sk = k->dims[r - 2], a->Dv = v->dims[r - 1];
    if (k->dims[r - 1] != a->D || v->dims[r - 2] != a->Sk)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: k or v does not fit q", op);
    const mge_tensor *want[3] = {q, k, v};
    int64_t yd[MGE_MAX_DIMS];
    for (int d = 0; d < r; d++)
        yd[d] = q->dims[d];
    yd[r - 1] = a->Dv;
    for (int o = 0; o < (grad ? 3 : 1); o++) {
        const mge_tensor *t = out[o];
        const int64_t *wd = grad ? want[o]->dims : yd;
        int ok = t->dtype == q->dtype && t->ndim == r;
        for (int d = 0; ok && d < r; d++)
            ok = t->dims[d] == wd[d];
        if (!ok)
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: output %d does not have the shape inferred", op, o + 1);
    }
    mge_tensor *const all[5] = {in[0], in[1], in[2], m ? in[3] : NULL, NULL};
    for (int i = 0; i < 4; i++)
        if (all[i]) {
            int64_t cnt = mge_tensor_numel(all[i]);
            if (cnt > 0 && (!all[i]->data || all[i]->nbytes < (size_t)cnt * mge_dtype_size(all[i]->dtype)))
                return mge_error_set(err, MGE_ERR_SHAPE, "%s: input %d lacks its data", op, i + 1);
        }
    for (int o = 0; o < (grad ? 3 : 1); o++) {
        int64_t cnt = mge_tensor_numel(out[o]);
        if (cnt > 0 && (!out[o]->data || out[o]->nbytes < (size_t)cnt * mge_dtype_size(out[o]->dtype)))
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: output %d lacks its data", op, o + 1);
    }
    a->mask = 0;
    a->mq = a->mk = 0;
    for (int d = 0; d < r - 2; d++)
        a->mls[d] = 0;
    if (m) {
        if (m->dtype != MGE_BOOL && m->dtype != q->dtype)
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: mask is %s: expected bool or %s", op,
                                 mge_dtype_name(m->dtype), mge_dtype_name(q->dtype));
        if (m->ndim > r)
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: mask has rank %d over q's %d", op, m->ndim, r);
        a->mask = m->dtype == MGE_BOOL ? 1 : 2;
        int64_t st = 1;
        for (int d = m->ndim - 1; d >= 0; d--) {
            int td = r - m->ndim + d;   /* the target dim it broadcasts to */
            int64_t want_d = td == r - 1 ? a->Sk : td == r - 2 ? a->Sq : a->ldims[td];
            if (m->dims[d] != 1 && m->dims[d] != want_d)
                return mge_error_set(err, MGE_ERR_SHAPE, "%s: the mask does not broadcast to the scores", op);
            int64_t s = m->dims[d] == 1 ? 0 : st;
            if (td == r - 1)
                a->mk = s;
            else if (td == r - 2)
                a->mq = s;
            else
                a->mls[td] = s;
            st *= m->dims[d];
        }
    }
    a->causal = (int)mge_node_int(n, MGE_KEY_causal, 0);
    const mge_attr *sa = mge_node_attr(n, MGE_KEY_scale);
    a->scale = sa ? sa->f : 1.0 / sqrt((double)(a->D > 0 ? a->D : 1));
    a->p = training ? mge_node_float(n, MGE_KEY_dropout, 0) : 0;
    if (!(a->p >= 0 && a->p < 1))
        return mge_error_set(err, MGE_ERR_INVALID, "%s: dropout=%g: expected a probability in [0, 1)", op, a->p);
    a->seed = 0;
    return MGE_OK;
}

/* The mask's offset of leading index b (row 0, column 0). */
static inline int64_t kattn_mask_base(const kattn *a, int64_t b)
{
    int64_t off = 0;
    for (int d = a->nlead - 1; d >= 0; d--) {
        int64_t c = b % a->ldims[d];
        b /= a->ldims[d];
        off += c * a->mls[d];
    }
    return off;
}

/* A float mask holding NaN is an error naming where (any float dtype). */
static inline mge_status kattn_mask_nan(const char *op, const mge_tensor *m, mge_error *err)
{
    if (!m || !mge_dtype_is_float(m->dtype))
        return MGE_OK;
    int64_t cnt = mge_tensor_numel(m);
    for (int64_t i = 0; i < cnt; i++) {
        int nan;
        if (m->dtype == MGE_F32) {
            float x = ((const float *)m->data)[i];
            nan = x != x;
        } else if (m->dtype == MGE_F64) {
            double x = ((const double *)m->data)[i];
            nan = x != x;
        } else {
            uint16_t h = ((const uint16_t *)m->data)[i];
            nan = m->dtype == MGE_F16 ? (h & 0x7c00) == 0x7c00 && (h & 0x03ff)
                                      : (h & 0x7f80) == 0x7f80 && (h & 0x007f);
        }
        if (nan) {
            char b[160];
            return mge_error_set(err, MGE_ERR_INVALID, "%s: the mask holds NaN at %s (a float mask is added to the "
                                 "scores: use -inf to hide a key)",
                                 op, kidx_pos(m->ndim, m->dims, i, b, sizeof b));
        }
    }
    return MGE_OK;
}

/* FNV-1a of a node name: the key of its dropout draws. */
static inline uint64_t kattn_name_key(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; s && *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* The dropout seed of a run: the run's seed (mge_kctx.seed) mixed with the
 * forward node's key, so the gradient node (drop_key = that key) draws the
 * same weights as its forward did in the same run, and two attention nodes
 * draw different ones. */
static inline uint64_t kattn_seed(const mge_kctx *ctx, const mge_node *n, int grad)
{
    uint64_t key = grad ? (uint64_t)mge_node_int(n, MGE_KEY_drop_key, (int64_t)kattn_name_key(n->name))
                        : kattn_name_key(n->name);
    uint64_t z = ctx->seed ^ (key * 0xbf58476d1ce4e5b9ull);
    return z ^ (z >> 29);
}

/* Whether dropout keeps the weight at flat score position i (b*Sq + row)*Sk + col. */
static inline int kattn_keep(uint64_t seed, uint64_t i, double p)
{
    uint64_t z = seed + (i + 1) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 40) * (1.0 / 16777216.0) >= p;
}

/* embedding: idx i32/i64 holding its data, every index in [0, rows). */
static inline mge_status kattn_emb_check(const mge_tensor *idx, int64_t rows, mge_error *err)
{
    if (idx->dtype != MGE_I32 && idx->dtype != MGE_I64)
        return mge_error_set(err, MGE_ERR_SHAPE, "embedding: indices are %s: expected i32 or i64",
                             mge_dtype_name(idx->dtype));
    int64_t cnt = mge_tensor_numel(idx);
    if (cnt > 0 && (!idx->data || idx->nbytes < (size_t)cnt * mge_dtype_size(idx->dtype)))
        return mge_error_set(err, MGE_ERR_SHAPE, "embedding: indices lack their data");
    for (int64_t i = 0; i < cnt; i++) {
        int64_t v = kidx_ld(idx->dtype, idx->data, i);
        if (v < 0 || v >= rows) {
            char b[160];
            return mge_error_set(err, MGE_ERR_SHAPE, "embedding: index %lld at %s is out of range for a table of %lld rows",
                                 (long long)v, kidx_pos(idx->ndim, idx->dims, i, b, sizeof b), (long long)rows);
        }
    }
    return MGE_OK;
}

/* embedding's table and output against idx: w [num, dim] of a float dtype,
 * y idx.dims + [dim] of w's dtype, both holding their data. */
static inline mge_status kattn_emb_shapes(const mge_tensor *idx, const mge_tensor *w, const mge_tensor *y,
                                          mge_error *err)
{
    int ok = w->ndim == 2 && mge_dtype_is_float(w->dtype) && y->dtype == w->dtype && y->ndim == idx->ndim + 1 &&
             y->dims[idx->ndim] == w->dims[1];
    for (int d = 0; ok && d < idx->ndim; d++)
        ok = y->dims[d] == idx->dims[d];
    size_t es = mge_dtype_size(w->dtype);
    ok = ok && (mge_tensor_numel(w) == 0 || (w->data && w->nbytes >= (size_t)mge_tensor_numel(w) * es)) &&
         (mge_tensor_numel(y) == 0 || (y->data && y->nbytes >= (size_t)mge_tensor_numel(y) * es));
    if (!ok)
        return mge_error_set(err, MGE_ERR_SHAPE, "embedding: the table or output does not have the shape inferred");
    return MGE_OK;
}

/* cpu_attn_bf16.c: cpu_attn.c's two products at precision=bf16 (operands
 * rounded to bf16, f32 sums) at bf16 level `level` (MGE_BF16_AMX or
 * MGE_BF16_AVX512), for tiles of up to 64 queries and 256 keys, on one
 * thread's scratch ws of mge_cpu_attn_bf16_ws(D, Dv) bytes. kv: one leading
 * index's K and V packed, mge_cpu_attn_bf16_kv_size bytes (64-aligned), key
 * tile t by _kv from k [Sk, D] and v [Sk, Dv]. _q rounds the query tile
 * q [br, D] into ws; _qk: S [br, bc] (ld lds) = scale * q k^T for key tile
 * t; _pv: O [br, Dv] += P v, P [br, bc] (ld lds) the f32 weights. */
size_t mge_cpu_attn_bf16_ws(int64_t D, int64_t Dv);
size_t mge_cpu_attn_bf16_kv_size(int64_t Sk, int64_t D, int64_t Dv);
void mge_cpu_attn_bf16_kv(int level, void *kv, const float *k, const float *v, int64_t Sk, int64_t D, int64_t Dv,
                          int64_t t, void *ws);
void mge_cpu_attn_bf16_q(int level, void *ws, const float *q, int64_t br, int64_t D, int64_t Dv);
void mge_cpu_attn_bf16_qk(int level, void *ws, const void *kv, int64_t t, int64_t br, int64_t bc, int64_t D,
                          int64_t Dv, float scale, float *S, int64_t lds);
void mge_cpu_attn_bf16_pv(int level, void *ws, const float *P, int64_t lds, const void *kv, int64_t t, int64_t br,
                          int64_t bc, int64_t D, int64_t Dv, float *O);

#endif
