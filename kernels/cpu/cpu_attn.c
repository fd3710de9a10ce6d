/* cpu_attn.c — fast kernels of group "attn" (f32):
 *
 * embedding: row copies over the pool when large; indices checked first.
 * scaled_dot_product_attention: fused, flash-attention style. A task is
 *   one leading index (batch, head) and one tile of AT_BR queries; it
 *   walks the keys in tiles of AT_BC: S = scale * Q K^T (mge_sgemm), the
 *   mask and causal cut, then an online softmax (running max m and sum l
 *   per row, the output rescaled by exp(m_old - m_new)) and O += P V. So
 *   the Sq x Sk scores are never stored whole, and under causal the tiles
 *   right of the diagonal are skipped.
 * scaled_dot_product_attention_grad: per leading index (one task each),
 *   for each query tile: the forward again for m and l and the output O
 *   (delta = rowsum(dy * O)), then per key tile P = exp(S - m) / l,
 *   dP = dy V^T, dv += P^T dy, dS = P (dP - delta) scale, dq += dS K,
 *   dk += dS^T Q, all products on mge_sgemm. Recomputing the softmax keeps
 *   the forward one output (the backward would otherwise need a per-row
 *   logsumexp kept from it). dk and dv of one leading index are written by
 *   one task only, so no two tasks add into one element.
 * Small heads (all keys in one tile, widths multiples of 16; for the
 *   gradient no dropout) take the same steps on cpu_attn_small.c's
 *   register-blocked products over K^T (and V^T) transposed once per
 *   leading index, instead of mge_sgemm, whose packing dominates at
 *   these sizes; the gradient then reuses the forward's exp(s - m).
 * At precision=bf16, where mge_cpu_bf16() has a level, the forward's two
 *   products run in cpu_attn_bf16.c (Q, K, V and the weights P rounded to
 *   bf16, f32 sums); the rest, dropout in training included, is the same
 *   f32 code. The gradient stays f32 at either precision.
 * Other dtypes and geometry the inference did not make go to ref. */
#include "cpu.h"
#include "kattn.h"

#define AT_BR 64
#define AT_BC 256

/* ---------------------------------------------------------------- embedding */

typedef struct emb_job {
    const char *w;
    char *y;
    const mge_tensor *idx;
    size_t row;
} emb_job;

static void emb_task(void *p, int64_t r0, int64_t r1, int thread)
{
    (void)thread;
    const emb_job *j = p;
    for (int64_t r = r0; r < r1; r++)
        memcpy(j->y + (size_t)r * j->row, j->w + (size_t)kidx_ld(j->idx->dtype, j->idx->data, r) * j->row, j->row);
}

static mge_status cpu_embedding(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *idx = in[0], *w = in[1];
    mge_status st = kattn_emb_shapes(idx, w, out[0], err);
    if (st || (st = kattn_emb_check(idx, w->dims[0], err)))
        return st;
    (void)n;
    emb_job j = {w->data, out[0]->data, idx, (size_t)w->dims[1] * mge_dtype_size(w->dtype)};
    int64_t cnt = mge_tensor_numel(idx), grain = (int64_t)(CPU_GRAIN * 4 / (j.row ? j.row : 1));
    if (j.row && cnt)
        cpu_parallel(ctx, cnt, grain < 1 ? 1 : grain, emb_task, &j);
    return MGE_OK;
}

/* ---------------------------------------------------------------- attention */

typedef struct at_job {
    kattn a;
    const float *q, *k, *v, *dy;
    const void *mask;
    float *y, *dq, *dk, *dv;
    float *ws;
    size_t ws_per;   /* floats per thread */
    int64_t ntile;   /* query tiles per leading index */
    int bf16;        /* the forward's products: 0 f32, else the bf16 level */
    char *bws;       /* bf16 scratch, bws_per bytes per thread, after ws */
    size_t bws_per;
    char *kv;        /* bf16: K and V packed, kv_per bytes per leading index, after bws */
    size_t kv_per;
} at_job;

/* The small path (cpu_attn_small.c): f32 products, all keys in one tile,
 * head widths that are multiples of 16 and, for the gradient, no dropout.
 * Its K^T (and V^T for the gradient) are padded to ld16 columns. */
static int at_small(const kattn *a, int bf16, int grad)
{
    return !bf16 && a->Sk <= AT_BC && a->D > 0 && a->D % 16 == 0 && a->Dv > 0 && a->Dv % 16 == 0 &&
           a->D <= 256 && a->Dv <= 256 && !(grad && a->p > 0);
}

static int64_t at_ld16(int64_t Sk)
{
    return (Sk + 15) / 16 * 16;
}

/* Per-thread scratch of the forward: S [BR,BC], O [BR,Dv], m, l [BR];
 * the backward adds dP [BR,BC] and delta [BR]; then room for K^T [D,ld16]
 * and V^T [Dv,ld16] (the small path). */
static size_t at_kt_off(int64_t Dv, int grad)
{
    return (size_t)AT_BR * AT_BC * (grad ? 2 : 1) + (size_t)AT_BR * (size_t)Dv + 3 * AT_BR + 16;
}

static size_t at_ws_floats(int64_t D, int64_t Dv, int64_t Sk, int grad)
{
    size_t t = Sk <= AT_BC ? (size_t)at_ld16(Sk) * (size_t)(D + (grad ? Dv : 0)) : 0;
    return at_kt_off(Dv, grad) + t;
}

/* Scale is folded into the product; here the mask and the causal cut on
 * the br x bc tile at (i0, j0), row stride AT_BC. */
static void at_mask_tile(const at_job *j, int64_t b, int64_t i0, int64_t j0, int64_t br, int64_t bc, float *S)
{
    const kattn *a = &j->a;
    if (a->mask) {
        int64_t mb = kattn_mask_base(a, b);
        for (int64_t r = 0; r < br; r++) {
            int64_t mo = mb + (i0 + r) * a->mq + j0 * a->mk;
            float *s = S + r * AT_BC;
            if (a->mask == 1) {
                const uint8_t *m = (const uint8_t *)j->mask + mo;
                for (int64_t c = 0; c < bc; c++)
                    s[c] = m[c * a->mk] ? s[c] : -INFINITY;
            } else {
                const float *m = (const float *)j->mask + mo;
                for (int64_t c = 0; c < bc; c++)
                    s[c] += m[c * a->mk];
            }
        }
    }
    if (a->causal)
        for (int64_t r = 0; r < br; r++)
            for (int64_t c = i0 + r + 1 - j0 < 0 ? 0 : i0 + r + 1 - j0; c < bc; c++)
                S[r * AT_BC + c] = -INFINITY;
}

/* The online softmax step on one tile: per row, the new max, the weights
 * p = exp(s - m) written over s, l and O (ld dv) rescaled. The max and the
 * sum run in 16 lanes (a float reduction does not vectorize by itself);
 * the max on a vector type with an explicit select, since GCC leaves the
 * select of a 16-float array scalar (the same max: x > mv ? x : mv). */
typedef float at_v16 __attribute__((vector_size(64)));
typedef int32_t at_i16 __attribute__((vector_size(64)));
CPU_MULTI3(at_online, (float *restrict S, int64_t br, int64_t bc, float *restrict m, float *restrict l,
                       float *restrict O, int64_t dv),
           (S, br, bc, m, l, O, dv), {
    for (int64_t r = 0; r < br; r++) {
        float *s = S + r * AT_BC;
        float mv[16], sv[16];
        at_v16 mvv;
        for (int k = 0; k < 16; k++)
            mvv[k] = -INFINITY, sv[k] = 0;
        int64_t c = 0;
        for (; c + 16 <= bc; c += 16) {
            at_v16 x;
            memcpy(&x, s + c, sizeof x);
            at_i16 gt = x > mvv;
            mvv = (at_v16)(((at_i16)x & gt) | ((at_i16)mvv & ~gt));
        }
        memcpy(mv, &mvv, sizeof mv);
        float mx = m[r];
        for (int k = 0; k < 16; k++)
            mx = mv[k] > mx ? mv[k] : mx;
        for (; c < bc; c++)
            mx = s[c] > mx ? s[c] : mx;
        if (mx == -INFINITY) {   /* every key so far masked */
            for (c = 0; c < bc; c++)
                s[c] = 0;
            continue;
        }
        float alpha = cpu_expf(m[r] - mx), sum = 0;
        for (c = 0; c + 16 <= bc; c += 16)
            for (int k = 0; k < 16; k++) {
                float e = cpu_expf(s[c + k] - mx);
                s[c + k] = e;
                sv[k] += e;
            }
        for (; c < bc; c++) {
            float e = cpu_expf(s[c] - mx);
            s[c] = e;
            sum += e;
        }
        for (int k = 0; k < 16; k++)
            sum += sv[k];
        l[r] = l[r] * alpha + sum;
        m[r] = mx;
        if (alpha != 1.0f)
            for (int64_t e = 0; e < dv; e++)
                O[r * dv + e] *= alpha;
    }
})

/* The causal cut: keys past the tile's last query are all hidden. */
static int64_t at_key_end(const kattn *a, int64_t i1)
{
    return a->causal && i1 < a->Sk ? i1 : a->Sk;
}

/* Dropout on the weights of the tile (the sum l keeps the undropped ones). */
static void at_dropout(const kattn *a, int64_t b, int64_t i0, int64_t j0, int64_t br, int64_t bc, float *S)
{
    float keep = (float)(1.0 / (1.0 - a->p));
    for (int64_t r = 0; r < br; r++)
        for (int64_t c = 0; c < bc; c++) {
            uint64_t at = (uint64_t)(((b * a->Sq) + i0 + r) * a->Sk + j0 + c);
            S[r * AT_BC + c] = kattn_keep(a->seed, at, a->p) ? S[r * AT_BC + c] * keep : 0.0f;
        }
}

/* Rows [i0, i0 + br) of leading index b: m, l and the unnormalized O; bw
 * is the thread's bf16 scratch when j->bf16. */
static void at_forward_tile(const at_job *j, int64_t b, int64_t i0, int64_t br, float *S, float *O, float *m,
                            float *l, int dropout, void *bw)
{
    const kattn *a = &j->a;
    const float *q = j->q + (b * a->Sq + i0) * a->D;
    for (int64_t r = 0; r < br; r++)
        m[r] = -INFINITY, l[r] = 0;
    memset(O, 0, sizeof(float) * (size_t)(br * a->Dv));
    const char *kv = j->bf16 ? j->kv + (size_t)b * j->kv_per : NULL;
    if (j->bf16)
        mge_cpu_attn_bf16_q(j->bf16, bw, q, br, a->D, a->Dv);
    int64_t kend = at_key_end(a, i0 + br);
    for (int64_t j0 = 0; j0 < kend; j0 += AT_BC) {
        int64_t bc = kend - j0 < AT_BC ? kend - j0 : AT_BC;
        const float *k = j->k + (b * a->Sk + j0) * a->D, *v = j->v + (b * a->Sk + j0) * a->Dv;
        if (j->bf16)
            mge_cpu_attn_bf16_qk(j->bf16, bw, kv, j0 / AT_BC, br, bc, a->D, a->Dv, (float)a->scale, S, AT_BC);
        else
            mge_sgemm(NULL, 0, 1, br, bc, a->D, (float)a->scale, q, a->D, k, a->D, 0.0f, S, AT_BC);
        at_mask_tile(j, b, i0, j0, br, bc, S);
        at_online(S, br, bc, m, l, O, a->Dv);
        if (dropout)
            at_dropout(a, b, i0, j0, br, bc, S);
        if (j->bf16)
            mge_cpu_attn_bf16_pv(j->bf16, bw, S, AT_BC, kv, j0 / AT_BC, br, bc, a->D, a->Dv, O);
        else
            mge_sgemm(NULL, 0, 0, br, a->Dv, bc, 1.0f, S, AT_BC, v, a->Dv, 1.0f, O, a->Dv);
    }
}

/* K^T of leading index b, zero past Sk (the last 16-wide score block
 * reads there). */
static void at_small_kt(const at_job *j, int64_t b, const float *src, int64_t E, float *dst)
{
    const kattn *a = &j->a;
    int64_t ld = at_ld16(a->Sk);
    cpu_transpose(src + b * a->Sk * E, a->Sk, E, E, dst, ld);
    for (int64_t e = 0; e < E; e++)
        for (int64_t c = a->Sk; c < ld; c++)
            dst[e * ld + c] = 0.0f;
}

/* at_forward_tile on the small path: kT is K^T of leading index b. */
static void at_small_tile(const at_job *j, int64_t b, int64_t i0, int64_t br, float *S, float *O, float *m,
                          float *l, int dropout, const float *kT)
{
    const kattn *a = &j->a;
    int64_t kend = at_key_end(a, i0 + br);
    for (int64_t r = 0; r < br; r++)
        m[r] = -INFINITY, l[r] = 0;
    memset(O, 0, sizeof(float) * (size_t)(br * a->Dv));
    cpu_attn_scores(j->q + (b * a->Sq + i0) * a->D, a->D, br, a->D, kT, at_ld16(a->Sk), at_ld16(kend),
                    (float)a->scale, S, AT_BC);
    at_mask_tile(j, b, i0, 0, br, kend, S);
    at_online(S, br, kend, m, l, O, a->Dv);
    if (dropout)
        at_dropout(a, b, i0, 0, br, kend, S);
    cpu_attn_pv(S, AT_BC, br, kend, j->v + b * a->Sk * a->Dv, a->Dv, O, 0);
}

static void at_fwd_task(void *p, int64_t t0, int64_t t1, int thread)
{
    const at_job *j = p;
    const kattn *a = &j->a;
    float *S = j->ws + (size_t)thread * j->ws_per, *O = S + AT_BR * AT_BC, *m = O + AT_BR * a->Dv, *l = m + AT_BR;
    float *kT = S + at_kt_off(a->Dv, 0);
    int small = at_small(a, j->bf16, 0);
    int64_t kt_b = -1;
    for (int64_t t = t0; t < t1; t++) {
        int64_t b = t / j->ntile, i0 = t % j->ntile * AT_BR, br = a->Sq - i0 < AT_BR ? a->Sq - i0 : AT_BR;
        if (small) {
            if (kt_b != b)
                at_small_kt(j, b, j->k, a->D, kT), kt_b = b;
            at_small_tile(j, b, i0, br, S, O, m, l, a->p > 0, kT);
        } else
            at_forward_tile(j, b, i0, br, S, O, m, l, a->p > 0,
                            j->bf16 ? j->bws + (size_t)thread * j->bws_per : NULL);
        float *y = j->y + (b * a->Sq + i0) * a->Dv;
        for (int64_t r = 0; r < br; r++) {
            float inv = l[r] > 0 ? 1.0f / l[r] : NAN;   /* every key masked: NaN, as PyTorch */
            for (int64_t e = 0; e < a->Dv; e++)
                y[r * a->Dv + e] = O[r * a->Dv + e] * inv;
        }
    }
}

/* bf16: key tile t % (key tiles) of leading index t / (key tiles), packed. */
static void at_pack_task(void *p, int64_t t0, int64_t t1, int thread)
{
    const at_job *j = p;
    const kattn *a = &j->a;
    int64_t ntk = (a->Sk + AT_BC - 1) / AT_BC;
    for (int64_t t = t0; t < t1; t++) {
        int64_t b = t / ntk;
        mge_cpu_attn_bf16_kv(j->bf16, j->kv + (size_t)b * j->kv_per, j->k + b * a->Sk * a->D,
                             j->v + b * a->Sk * a->Dv, a->Sk, a->D, a->Dv, t % ntk,
                             j->bws + (size_t)thread * j->bws_per);
    }
}

/* f32 inputs, the mask (input 4 of the forward, 5 of the gradient) f32 or bool. */
static int at_fits(const mge_node *n, mge_tensor *const *in, int nin)
{
    int mi = 3 + (n->op == MGE_OP_SDPA_GRAD);
    for (int i = 0; i < nin; i++)
        if (in[i]->dtype != MGE_F32 && !(i == mi && in[i]->dtype == MGE_BOOL))
            return 0;
    return 1;
}

/* The forward's bf16 level: precision=bf16 and a level on this CPU
 * (mge_cpu_bf16 also asks for AMX's tile data, before any pool task runs
 * tile code). */
static int at_bf16(const mge_node *n)
{
    return n->op == MGE_OP_SDPA && mge_node_int(n, MGE_KEY_precision, 0) == 1 ? mge_cpu_bf16() : MGE_BF16_NONE;
}

/* The scratch: per thread the f32 scratch, then (bf16) per thread
 * cpu_attn_bf16.c's and per leading index the packed K and V. */
static size_t at_ws_all(int64_t lead, int64_t Sk, int64_t D, int64_t Dv, int grad, int bf16, int threads)
{
    size_t t = (size_t)(threads > 0 ? threads : 1), f = sizeof(float) * at_ws_floats(D, Dv, Sk, grad) * t;
    if (!bf16)
        return f;
    return f + mge_cpu_attn_bf16_ws(D, Dv) * t + 64 + mge_cpu_attn_bf16_kv_size(Sk, D, Dv) * (size_t)lead;
}

static size_t at_ws(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, int threads)
{
    int grad = n->op == MGE_OP_SDPA_GRAD;
    const mge_tensor *k = in[1 + grad], *v = in[2 + grad];
    if (!at_fits(n, in, n->nin) || v->ndim < 2 || k->ndim < 2)
        return cpu_ref_ws(n, in, out, threads);
    int64_t lead = 1;
    for (int d = 0; d < k->ndim - 2; d++)
        lead *= k->dims[d];
    return at_ws_all(lead, k->dims[k->ndim - 2], k->dims[k->ndim - 1], v->dims[v->ndim - 1], grad, at_bf16(n),
                     threads);
}

static mge_status cpu_sdpa(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                           mge_error *err)
{
    const char *op = mge_kctx_opname(ctx, n);
    if (!at_fits(n, in, n->nin))
        return cpu_fallback(ctx, n, in, out, err);
    at_job j;
    memset(&j, 0, sizeof j);
    mge_status st = kattn_setup(op, n, in, n->nin, out, 0, ctx->training, &j.a, err);
    if (st || (st = kattn_mask_nan(op, n->nin > 3 ? in[3] : NULL, err)))
        return st;
    j.ws_per = at_ws_floats(j.a.D, j.a.Dv, j.a.Sk, 0);
    j.bf16 = at_bf16(n);
    j.bws_per = j.bf16 ? mge_cpu_attn_bf16_ws(j.a.D, j.a.Dv) : 0;
    j.kv_per = j.bf16 ? mge_cpu_attn_bf16_kv_size(j.a.Sk, j.a.D, j.a.Dv) : 0;
    if (ctx->ws_size < at_ws_all(j.a.lead, j.a.Sk, j.a.D, j.a.Dv, 0, j.bf16, cpu_threads(ctx)))
        return cpu_fallback(ctx, n, in, out, err);
    if (j.a.p > 0) {
        if (!ctx->rng)
            return mge_error_set(err, MGE_ERR_INVALID, "%s: dropout in training needs a random generator", op);
        j.a.seed = kattn_seed(ctx, n, 0);
    }
    j.q = in[0]->data, j.k = in[1]->data, j.v = in[2]->data, j.mask = n->nin > 3 ? in[3]->data : NULL;
    j.y = out[0]->data, j.ws = ctx->ws;
    j.bws = (char *)ctx->ws + sizeof(float) * j.ws_per * (size_t)cpu_threads(ctx);
    j.kv = (char *)(((uintptr_t)(j.bws + j.bws_per * (size_t)cpu_threads(ctx)) + 63) & ~(uintptr_t)63);
    j.ntile = (j.a.Sq + AT_BR - 1) / AT_BR;
    if (j.a.lead * j.ntile * j.a.Dv == 0)
        return MGE_OK;
    if (j.bf16)
        cpu_parallel(ctx, j.a.lead * ((j.a.Sk + AT_BC - 1) / AT_BC), 1, at_pack_task, &j);
    cpu_parallel(ctx, j.a.lead * j.ntile, 1, at_fwd_task, &j);
    return MGE_OK;
}

/* ---------------------------------------------------------------- attention gradient */

/* dS over dP and P over S. S holds the scores, or (have_e) already
 * exp(s - m) from the forward's single key tile: the same expf of the same
 * difference, so the same bits either way. */
CPU_MULTI3(at_bwd_ds, (float *restrict P, float *restrict dP, int64_t br, int64_t bc, const float *restrict m,
                       const float *restrict l, const float *restrict delta, float scale, int have_e),
           (P, dP, br, bc, m, l, delta, scale, have_e), {
    for (int64_t r = 0; r < br; r++) {
        float *s = P + r * AT_BC;
        float *g = dP + r * AT_BC;
        float mr = m[r], inv = l[r] > 0 ? 1.0f / l[r] : NAN, dr = delta[r];
        if (have_e)
            for (int64_t c = 0; c < bc; c++) {
                float pw = s[c] * inv;
                s[c] = pw;
                g[c] = pw * (g[c] - dr) * scale;
            }
        else
            for (int64_t c = 0; c < bc; c++) {
                float pw = cpu_expf(s[c] - mr) * inv;
                s[c] = pw;                          /* P, for dv */
                g[c] = pw * (g[c] - dr) * scale;   /* dS, over dP */
            }
    }
})

static void at_bwd_task(void *p, int64_t b0, int64_t b1, int thread)
{
    const at_job *j = p;
    const kattn *a = &j->a;
    float *S = j->ws + (size_t)thread * j->ws_per, *dP = S + AT_BR * AT_BC, *O = dP + AT_BR * AT_BC;
    float *m = O + AT_BR * a->Dv, *l = m + AT_BR, *delta = l + AT_BR;
    float *kT = S + at_kt_off(a->Dv, 1), *vT = kT + at_ld16(a->Sk) * a->D;
    int small = at_small(a, 0, 1);
    for (int64_t b = b0; b < b1; b++) {
        float *dk = j->dk + b * a->Sk * a->D, *dv = j->dv + b * a->Sk * a->Dv;
        memset(dk, 0, sizeof(float) * (size_t)(a->Sk * a->D));
        memset(dv, 0, sizeof(float) * (size_t)(a->Sk * a->Dv));
        if (small) {
            at_small_kt(j, b, j->k, a->D, kT);
            at_small_kt(j, b, j->v, a->Dv, vT);
        }
        for (int64_t i0 = 0; i0 < a->Sq; i0 += AT_BR) {
            int64_t br = a->Sq - i0 < AT_BR ? a->Sq - i0 : AT_BR;
            const float *q = j->q + (b * a->Sq + i0) * a->D, *dy = j->dy + (b * a->Sq + i0) * a->Dv;
            float *dq = j->dq + (b * a->Sq + i0) * a->D;
            /* O with the forward's dropout: delta = rowsum(P dP) is dy . y either way */
            if (small)
                at_small_tile(j, b, i0, br, S, O, m, l, 0, kT);
            else
                at_forward_tile(j, b, i0, br, S, O, m, l, a->p > 0, NULL);
            for (int64_t r = 0; r < br; r++) {
                double acc = 0;
                for (int64_t e = 0; e < a->Dv; e++)
                    acc += (double)dy[r * a->Dv + e] * O[r * a->Dv + e];
                delta[r] = l[r] > 0 ? (float)(acc / l[r]) : NAN;
            }
            int64_t kend = at_key_end(a, i0 + br);
            if (small) {   /* the forward left exp(s - m) in S (one key tile) */
                cpu_attn_scores(dy, a->Dv, br, a->Dv, vT, at_ld16(a->Sk), at_ld16(kend), 1.0f, dP, AT_BC);
                at_bwd_ds(S, dP, br, kend, m, l, delta, (float)a->scale, 1);
                cpu_attn_ptx(S, AT_BC, br, kend, dy, a->Dv, dv);
                cpu_attn_pv(dP, AT_BC, br, kend, j->k + b * a->Sk * a->D, a->D, dq, 0);
                cpu_attn_ptx(dP, AT_BC, br, kend, q, a->D, dk);
                continue;
            }
            memset(dq, 0, sizeof(float) * (size_t)(br * a->D));
            /* one key tile and no dropout: the forward left exp(s - m) with
             * the final m in S, so the scores need not be made again */
            int have_e = kend <= AT_BC && !(a->p > 0);
            for (int64_t j0 = 0; j0 < kend; j0 += AT_BC) {
                int64_t bc = kend - j0 < AT_BC ? kend - j0 : AT_BC;
                const float *k = j->k + (b * a->Sk + j0) * a->D, *v = j->v + (b * a->Sk + j0) * a->Dv;
                if (!have_e) {
                    mge_sgemm(NULL, 0, 1, br, bc, a->D, (float)a->scale, q, a->D, k, a->D, 0.0f, S, AT_BC);
                    at_mask_tile(j, b, i0, j0, br, bc, S);
                }
                mge_sgemm(NULL, 0, 1, br, bc, a->Dv, 1.0f, dy, a->Dv, v, a->Dv, 0.0f, dP, AT_BC);
                if (a->p > 0)
                    at_dropout(a, b, i0, j0, br, bc, dP);   /* dP = (dy v^T) D */
                at_bwd_ds(S, dP, br, bc, m, l, delta, (float)a->scale, have_e);
                if (a->p > 0)
                    at_dropout(a, b, i0, j0, br, bc, S);    /* P D, for dv */
                mge_sgemm(NULL, 1, 0, bc, a->Dv, br, 1.0f, S, AT_BC, dy, a->Dv, 1.0f, dv + j0 * a->Dv, a->Dv);
                mge_sgemm(NULL, 0, 0, br, a->D, bc, 1.0f, dP, AT_BC, k, a->D, 1.0f, dq, a->D);
                mge_sgemm(NULL, 1, 0, bc, a->D, br, 1.0f, dP, AT_BC, q, a->D, 1.0f, dk + j0 * a->D, a->D);
            }
        }
    }
}

static mge_status cpu_sdpa_grad(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                mge_tensor *const *out, mge_error *err)
{
    const char *op = mge_kctx_opname(ctx, n);
    if (!at_fits(n, in, n->nin))
        return cpu_fallback(ctx, n, in, out, err);
    at_job j;
    memset(&j, 0, sizeof j);
    mge_status st = kattn_setup(op, n, in + 1, n->nin - 1, out, 1, ctx->training, &j.a, err);
    if (st || (st = kattn_mask_nan(op, n->nin > 4 ? in[4] : NULL, err)))
        return st;
    if (j.a.p > 0)
        j.a.seed = kattn_seed(ctx, n, 1);
    const mge_tensor *dy = in[0];
    int ok = dy->dtype == MGE_F32 && dy->ndim == in[1]->ndim && dy->data &&
             mge_tensor_numel(dy) == j.a.lead * j.a.Sq * j.a.Dv && dy->dims[dy->ndim - 1] == j.a.Dv;
    j.ws_per = at_ws_floats(j.a.D, j.a.Dv, j.a.Sk, 1);
    if (!ok || ctx->ws_size < sizeof(float) * j.ws_per * (size_t)cpu_threads(ctx))
        return cpu_fallback(ctx, n, in, out, err);
    j.dy = dy->data, j.q = in[1]->data, j.k = in[2]->data, j.v = in[3]->data;
    j.mask = n->nin > 4 ? in[4]->data : NULL;
    j.dq = out[0]->data, j.dk = out[1]->data, j.dv = out[2]->data, j.ws = ctx->ws;
    if (j.a.lead == 0)
        return MGE_OK;
    if (j.a.Sq == 0 || j.a.D == 0 || j.a.Dv == 0 || j.a.Sk == 0)
        return cpu_fallback(ctx, n, in, out, err);   /* empty products: ref writes the zeros */
    cpu_parallel(ctx, j.a.lead, 1, at_bwd_task, &j);
    return MGE_OK;
}

void mge_cpu_register_attn(mge_backend *b)
{
    b->k[MGE_OP_EMBEDDING][MGE_I32] = (mge_kernel){.run = cpu_embedding, .ws = NULL};
    b->k[MGE_OP_EMBEDDING][MGE_I64] = (mge_kernel){.run = cpu_embedding, .ws = NULL};
    b->k[MGE_OP_SDPA][MGE_F32] = (mge_kernel){.run = cpu_sdpa, .ws = at_ws};
    b->k[MGE_OP_SDPA_GRAD][MGE_F32] = (mge_kernel){.run = cpu_sdpa_grad, .ws = at_ws};
}
