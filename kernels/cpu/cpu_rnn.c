/* cpu_rnn.c — lstm, gru and their gradient ops on f32 (other dtypes and
 * shapes the checks here do not accept run the ref kernels).
 *
 * Forward, per layer and direction: the input projection of all steps is
 * one GEMM (S*N x in times in x G*H, biases added after), then each step
 * one N x H times H x G*H GEMM and the gate math fused over the row
 * (sigmoid and tanh from cpu_act.h, the unary kernels' expressions). The
 * recurrences of the two directions run in parallel on the pool.
 * Backward (the gradient ops recompute the forward first, keeping the gate
 * activations): per step the gate gradients and one N x G*H times G*H x H
 * GEMM for dh; then per layer and direction three GEMMs over all steps
 * (dW_ih = DA^T X, dW_hh = DA_h^T H_prev, dX += DA W_ih) and the bias
 * gradients as column sums. */
#include "cpu.h"
#include "cpu_act.h"
#include "krnn.h"

#include <math.h>

typedef struct crnn {
    const mge_kctx *ctx;
    krnn r;
    int64_t S, N, I;
    const float *x;      /* [S*N, I] sequence-major (x itself or xs) */
    const float *h0, *c0;
    const float *w[KRNN_MAX_LD * 4];
    float *xs;           /* x moved to sequence-major (batch_first), or NULL */
    float **Y;           /* per layer [S*N, D*H] */
    float **gate;        /* per layer and direction [S*N, G*H]: activations */
    float **cell;        /* lstm: c_t; gru: W_hn h + b_hn; [S*N, H] */
    float *hn, *cn;      /* [D*L, N, H] */
    float *zeros;        /* [N*H] */
    float *tmp;          /* per direction: hidden products [N, G*H] and a row [H] */
    int64_t l;           /* the layer a parallel section works on */
    /* backward */
    float *dY, *dX, *dhn, *dcn, **DA, **DAH, *dh, *dc;
} crnn;

static float *fal(int64_t n)
{
    return calloc((size_t)(n > 0 ? n : 1), sizeof(float));
}

static void crnn_free(crnn *c)
{
    free(c->xs);
    for (int64_t l = 0; c->Y && l < c->r.L; l++)
        free(c->Y[l]);
    for (int64_t k = 0; c->gate && k < c->r.L * c->r.D; k++) {
        free(c->gate[k]);
        free(c->cell[k]);
    }
    for (int64_t d = 0; c->DA && d < c->r.D; d++) {
        free(c->DA[d]);
        if (c->DAH && c->DAH[d] != c->DA[d])
            free(c->DAH[d]);
    }
    free(c->Y);
    free(c->gate);
    free(c->cell);
    free(c->DA);
    free(c->DAH);
    free(c->hn);
    free(c->cn);
    free(c->zeros);
    free(c->tmp);
    free(c->dY);
    free(c->dX);
    free(c->dh);
    free(c->dc);
}

static int is_f32(const mge_tensor *t, int nd)
{
    return t->dtype == MGE_F32 && t->ndim == nd && (mge_tensor_numel(t) == 0 || t->data);
}

/* Whether this kernel takes the node: f32, every shape as inferred (else
 * the ref kernel runs and says what is wrong). */
static int crnn_fits(const mge_node *n, mge_tensor *const *in, crnn *c)
{
    krnn *r = &c->r;
    if (krnn_setup(n, r) || r->H < 1)
        return 0;
    const mge_tensor *x = in[r->xi];
    if (!is_f32(x, 3))
        return 0;
    c->S = x->dims[r->bf ? 1 : 0];
    c->N = x->dims[r->bf ? 0 : 1];
    c->I = x->dims[2];
    if (c->S < 1 || c->N < 1 || c->I < 1)
        return 0;
    for (int k = 0; r->has_state && k < r->nstate; k++) {
        const mge_tensor *s = in[r->xi + 1 + k];
        if (!is_f32(s, 3) || s->dims[0] != r->D * r->L || s->dims[1] != c->N || s->dims[2] != r->H)
            return 0;
    }
    if (r->peep)
        return 0;   /* the peepholes are ref's loop */
    for (int64_t l = 0; l < r->L; l++)
        for (int64_t d = 0; d < r->D; d++)
            for (int k = 0; k < r->np; k++) {
                const mge_tensor *p = in[krnn_param(r, l, d, k)];
                if (!is_f32(p, k < 2 ? 2 : 1) || p->dims[0] != r->G * r->H ||
                    (k < 2 && p->dims[1] != (k == 0 ? krnn_in(r, l, c->I) : r->H)))
                    return 0;
                c->w[(l * r->D + d) * 4 + k] = p->data;
            }
    return 1;
}

static int crnn_alloc(crnn *c, mge_tensor *const *in)
{
    const krnn *r = &c->r;
    int64_t S = c->S, N = c->N, H = r->H, DL = r->D * r->L, SN = S * N;
    const mge_tensor *x = in[r->xi];
    c->x = x->data;
    if (r->bf) {
        if (!(c->xs = fal(SN * c->I)))
            return -1;
        for (int64_t t = 0; t < S; t++)
            for (int64_t b = 0; b < N; b++)
                memcpy(c->xs + (t * N + b) * c->I, (const float *)x->data + (b * S + t) * c->I,
                       sizeof(float) * (size_t)c->I);
        c->x = c->xs;
    }
    c->zeros = fal(DL * N * H);
    c->h0 = r->has_state ? in[r->xi + 1]->data : c->zeros;
    c->c0 = r->has_state && !r->gru ? in[r->xi + 2]->data : c->zeros;
    c->hn = fal(DL * N * H);
    c->cn = fal(DL * N * H);
    c->tmp = fal(r->D * (N * r->G * H + H));
    c->Y = calloc((size_t)r->L, sizeof *c->Y);
    c->gate = calloc((size_t)DL, sizeof *c->gate);
    c->cell = calloc((size_t)DL, sizeof *c->cell);
    if (!c->zeros || !c->hn || !c->cn || !c->tmp || !c->Y || !c->gate || !c->cell)
        return -1;
    for (int64_t l = 0; l < r->L; l++)
        if (!(c->Y[l] = fal(SN * r->D * H)))
            return -1;
    for (int64_t k = 0; k < DL; k++)
        if (!(c->gate[k] = fal(SN * r->G * H)) || !(c->cell[k] = fal(SN * H)))
            return -1;
    return 0;
}

/* The recurrence of layer c->l, direction d, over the projected inputs
 * already in gate[k] (biases included but b_hn). */
static void fwd_dir(void *arg, int64_t d, int thread)
{
    (void)thread;
    crnn *c = arg;
    const krnn *r = &c->r;
    int64_t l = c->l, k = l * r->D + d, H = r->H, GH = r->G * H, S = c->S, N = c->N, W = r->D * H;
    const float *Wh = c->w[k * 4 + 1], *bhn = r->gru && r->bias ? c->w[k * 4 + 3] + 2 * H : NULL;
    /* one direction alone may use the whole pool; two share it */
    const mge_kctx *gctx = r->D == 1 ? c->ctx : NULL;
    float *hg = c->tmp + d * (N * GH + H), *row = hg + N * GH;
    float *hs = c->hn + k * N * H, *cs = c->cn + k * N * H;
    memcpy(hs, c->h0 + k * N * H, sizeof(float) * (size_t)(N * H));
    memcpy(cs, c->c0 + k * N * H, sizeof(float) * (size_t)(N * H));
    for (int64_t s = 0; s < S; s++) {
        int64_t t = d ? S - 1 - s : s;
        mge_sgemm(gctx, 0, 1, N, GH, H, 1.0f, hs, H, Wh, H, 0.0f, hg, GH);
        for (int64_t b = 0; b < N; b++) {
            float *g = c->gate[k] + (t * N + b) * GH, *ct = c->cell[k] + (t * N + b) * H, *hb = hg + b * GH;
            float *h = hs + b * H, *cc = cs + b * H, *y = c->Y[l] + (t * N + b) * W + d * H;
            if (!r->gru) {
                for (int64_t j = 0; j < GH; j++)
                    g[j] += hb[j];
                cpu_act_apply(MGE_OP_SIGMOID, 0, g, NULL, 2 * H);
                cpu_act_apply(MGE_OP_TANH, 0, g + 2 * H, NULL, H);
                cpu_act_apply(MGE_OP_SIGMOID, 0, g + 3 * H, NULL, H);
                for (int64_t j = 0; j < H; j++)
                    cc[j] = g[H + j] * cc[j] + g[j] * g[2 * H + j];
                memcpy(ct, cc, sizeof(float) * (size_t)H);
                memcpy(row, cc, sizeof(float) * (size_t)H);
                cpu_act_apply(MGE_OP_TANH, 0, row, NULL, H);
                for (int64_t j = 0; j < H; j++)
                    h[j] = y[j] = g[3 * H + j] * row[j];
            } else {
                for (int64_t j = 0; j < 2 * H; j++)
                    g[j] += hb[j];
                cpu_act_apply(MGE_OP_SIGMOID, 0, g, NULL, 2 * H);
                for (int64_t j = 0; j < H; j++) {
                    ct[j] = hb[2 * H + j] + (bhn ? bhn[j] : 0.0f);
                    g[2 * H + j] += g[j] * ct[j];
                }
                cpu_act_apply(MGE_OP_TANH, 0, g + 2 * H, NULL, H);
                for (int64_t j = 0; j < H; j++)
                    h[j] = y[j] = (1.0f - g[H + j]) * g[2 * H + j] + g[H + j] * h[j];
            }
        }
    }
}

static void forward(crnn *c)
{
    const krnn *r = &c->r;
    int64_t H = r->H, GH = r->G * H, SN = c->S * c->N;
    for (int64_t l = 0; l < r->L; l++) {
        int64_t in = krnn_in(r, l, c->I);
        const float *X = l == 0 ? c->x : c->Y[l - 1];
        for (int64_t d = 0; d < r->D; d++) {
            int64_t k = l * r->D + d;
            float *P = c->gate[k];
            mge_sgemm(c->ctx, 0, 1, SN, GH, in, 1.0f, X, in, c->w[k * 4], in, 0.0f, P, GH);
            if (r->bias) {
                const float *bi = c->w[k * 4 + 2], *bh = c->w[k * 4 + 3];
                /* gru's b_hn is inside r * (W_hn h + b_hn): added per step */
                int64_t nb = r->gru ? 2 * H : GH;
                for (int64_t i = 0; i < SN; i++) {
                    float *p = P + i * GH;
                    for (int64_t j = 0; j < GH; j++)
                        p[j] += bi[j] + (j < nb ? bh[j] : 0.0f);
                }
            }
        }
        c->l = l;
        if (r->D == 2 && c->ctx && c->ctx->pool && cpu_threads(c->ctx) >= 2)
            mge_pool_run(c->ctx->pool, 2, fwd_dir, c);
        else
            for (int64_t d = 0; d < r->D; d++)
                fwd_dir(c, d, 0);
    }
}

static mge_status rnn_forward(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                              mge_error *err)
{
    crnn c;
    memset(&c, 0, sizeof c);
    c.ctx = ctx;
    /* gru's linear_before_reset=false is ref's loop */
    if (!crnn_fits(n, in, &c) || !c.r.lbr)
        return cpu_fallback(ctx, n, in, out, err);
    const krnn *r = &c.r;
    int64_t S = c.S, N = c.N, W = r->D * r->H, DL = r->D * r->L;
    int ok = is_f32(out[0], 3) && mge_tensor_numel(out[0]) == S * N * W;
    for (int o = 1; o < n->nout; o++)
        ok = ok && is_f32(out[o], 3) && mge_tensor_numel(out[o]) == DL * N * r->H;
    if (!ok) {
        crnn_free(&c);
        return cpu_fallback(ctx, n, in, out, err);
    }
    if (crnn_alloc(&c, in)) {
        crnn_free(&c);
        return mge_error_set(err, MGE_ERR_NOMEM, "%s: out of memory", mge_kctx_opname(ctx, n));
    }
    forward(&c);
    float *y = out[0]->data;
    const float *Y = c.Y[r->L - 1];
    if (!r->bf)
        memcpy(y, Y, sizeof(float) * (size_t)(S * N * W));
    else
        for (int64_t t = 0; t < S; t++)
            for (int64_t b = 0; b < N; b++)
                memcpy(y + (b * S + t) * W, Y + (t * N + b) * W, sizeof(float) * (size_t)W);
    if (n->nout > 1)
        memcpy(out[1]->data, c.hn, sizeof(float) * (size_t)(DL * N * r->H));
    if (n->nout > 2)
        memcpy(out[2]->data, c.cn, sizeof(float) * (size_t)(DL * N * r->H));
    crnn_free(&c);
    return MGE_OK;
}

/* h_{t-1} of step t (walk order) of layer l, direction d, batch row b. */
static const float *hprev(const crnn *c, int64_t l, int64_t d, int64_t t, int64_t b)
{
    const krnn *r = &c->r;
    int64_t first = d ? c->S - 1 : 0, tp = d ? t + 1 : t - 1;
    if (t == first)
        return c->h0 + ((l * r->D + d) * c->N + b) * r->H;
    return c->Y[l] + (tp * c->N + b) * r->D * r->H + d * r->H;
}

/* The backward recurrence of layer c->l, direction d: DA (and DAH) for
 * every step, dh0 and dc0 into hn/cn's places. */
static void bwd_dir(void *arg, int64_t d, int thread)
{
    (void)thread;
    crnn *c = arg;
    const krnn *r = &c->r;
    int64_t l = c->l, k = l * r->D + d, H = r->H, GH = r->G * H, S = c->S, N = c->N, W = r->D * H;
    const float *Wh = c->w[k * 4 + 1];
    const mge_kctx *gctx = r->D == 1 ? c->ctx : NULL;
    float *dh = c->dh + d * N * H, *dc = c->dc + d * N * H;
    memcpy(dh, c->dhn + k * N * H, sizeof(float) * (size_t)(N * H));
    memcpy(dc, c->dcn + k * N * H, sizeof(float) * (size_t)(N * H));
    int64_t first = d ? S - 1 : 0;
    for (int64_t s = S - 1; s >= 0; s--) {
        int64_t t = d ? S - 1 - s : s;
        for (int64_t b = 0; b < N; b++) {
            const float *g = c->gate[k] + (t * N + b) * GH, *ct = c->cell[k] + (t * N + b) * H;
            const float *dy = c->dY + (t * N + b) * W + d * H, *hp = hprev(c, l, d, t, b);
            const float *cp = t == first ? c->c0 + (k * N + b) * H : c->cell[k] + ((d ? t + 1 : t - 1) * N + b) * H;
            float *da = c->DA[d] + (t * N + b) * GH, *dah = c->DAH[d] + (t * N + b) * GH;
            float *dhb = dh + b * H, *dcb = dc + b * H;
            for (int64_t j = 0; j < H; j++) {
                float dhv = dhb[j] + dy[j];
                if (!r->gru) {
                    float ig = g[j], fg = g[H + j], gg = g[2 * H + j], og = g[3 * H + j];
                    float tc = cpu_tanhf(ct[j]);
                    float dct = dcb[j] + dhv * og * (1.0f - tc * tc);
                    da[j] = dct * gg * ig * (1.0f - ig);
                    da[H + j] = dct * cp[j] * fg * (1.0f - fg);
                    da[2 * H + j] = dct * ig * (1.0f - gg * gg);
                    da[3 * H + j] = dhv * tc * og * (1.0f - og);
                    dcb[j] = dct * fg;
                } else {
                    float rg = g[j], zg = g[H + j], ng = g[2 * H + j];
                    float dn = dhv * (1.0f - zg), dz = dhv * (hp[j] - ng), dan = dn * (1.0f - ng * ng);
                    da[j] = dah[j] = dan * ct[j] * rg * (1.0f - rg);
                    da[H + j] = dah[H + j] = dz * zg * (1.0f - zg);
                    da[2 * H + j] = dan;
                    dah[2 * H + j] = dan * rg;
                    dhb[j] = dhv * zg; /* the direct path; W_hh^T da_h added below */
                }
            }
        }
        /* dh_{t-1} = DA_h(t) W_hh (+ gru's direct path) */
        mge_sgemm(gctx, 0, 0, N, H, GH, 1.0f, c->DAH[d] + t * N * GH, GH, Wh, H, r->gru ? 1.0f : 0.0f, dh, H);
    }
    memcpy(c->hn + k * N * H, dh, sizeof(float) * (size_t)(N * H));
    memcpy(c->cn + k * N * H, dc, sizeof(float) * (size_t)(N * H));
}

static mge_status rnn_backward(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                               mge_tensor *const *out, mge_error *err)
{
    crnn c;
    memset(&c, 0, sizeof c);
    c.ctx = ctx;
    if (!crnn_fits(n, in, &c))
        return cpu_fallback(ctx, n, in, out, err);
    const krnn *r = &c.r;
    int64_t S = c.S, N = c.N, H = r->H, GH = r->G * H, W = r->D * H, DL = r->D * r->L, SN = S * N;
    int64_t total = 0;
    for (int k = r->pi; k < n->nin; k++)
        total += mge_tensor_numel(in[k]);
    int nd = r->gru ? 2 : 3, ok = 1;
    for (int k = 0; k < nd; k++)
        ok = ok && in[k]->dtype == MGE_F32 &&
             (in[k]->ndim == 0 || (is_f32(in[k], 3) && mge_tensor_numel(in[k]) == (k ? DL * N * H : SN * W)));
    ok = ok && is_f32(out[0], 3) && mge_tensor_numel(out[0]) == SN * c.I;
    for (int k = 1; k < nd; k++)
        ok = ok && is_f32(out[k], 3) && mge_tensor_numel(out[k]) == DL * N * H;
    ok = ok && is_f32(out[nd], 1) && mge_tensor_numel(out[nd]) == total;
    if (!ok) {
        crnn_free(&c);
        return cpu_fallback(ctx, n, in, out, err);
    }
    mge_status st = MGE_OK;
    if (crnn_alloc(&c, in))
        goto nomem;
    forward(&c);
    c.dY = fal(SN * W);
    c.dhn = in[1]->ndim ? in[1]->data : c.zeros;
    c.dcn = !r->gru && in[2]->ndim ? in[2]->data : c.zeros;
    c.dh = fal(r->D * N * H);
    c.dc = fal(r->D * N * H);
    c.DA = calloc((size_t)r->D, sizeof *c.DA);
    c.DAH = calloc((size_t)r->D, sizeof *c.DAH);
    if (!c.dY || !c.dh || !c.dc || !c.DA || !c.DAH)
        goto nomem;
    for (int64_t d = 0; d < r->D; d++) {
        if (!(c.DA[d] = fal(SN * GH)))
            goto nomem;
        c.DAH[d] = r->gru ? fal(SN * GH) : c.DA[d];
        if (!c.DAH[d])
            goto nomem;
    }
    if (in[0]->ndim) {
        const float *dy = in[0]->data;
        if (!r->bf)
            memcpy(c.dY, dy, sizeof(float) * (size_t)(SN * W));
        else
            for (int64_t t = 0; t < S; t++)
                for (int64_t b = 0; b < N; b++)
                    memcpy(c.dY + (t * N + b) * W, dy + (b * S + t) * W, sizeof(float) * (size_t)W);
    }
    float *dW = out[nd]->data, *hp = fal(SN * H);
    int64_t poff[KRNN_MAX_LD * 4], off = 0;
    for (int k = 0; k < r->nparams; k++) {
        poff[k] = off;
        off += mge_tensor_numel(in[r->pi + k]);
    }
    if (!hp)
        goto nomem;
    for (int64_t l = r->L - 1; l >= 0; l--) {
        int64_t in_l = krnn_in(r, l, c.I);
        const float *X = l == 0 ? c.x : c.Y[l - 1];
        free(c.dX);
        if (!(c.dX = fal(SN * in_l))) {
            free(hp);
            goto nomem;
        }
        c.l = l;
        if (r->D == 2 && ctx && ctx->pool && cpu_threads(ctx) >= 2)
            mge_pool_run(ctx->pool, 2, bwd_dir, &c);
        else
            for (int64_t d = 0; d < r->D; d++)
                bwd_dir(&c, d, 0);
        for (int64_t d = 0; d < r->D; d++) {
            int64_t k = l * r->D + d;
            float *gWi = dW + poff[k * r->np], *gWh = dW + poff[k * r->np + 1];
            mge_sgemm(ctx, 1, 0, GH, in_l, SN, 1.0f, c.DA[d], GH, X, in_l, 0.0f, gWi, in_l);
            for (int64_t t = 0; t < S; t++)
                for (int64_t b = 0; b < N; b++)
                    memcpy(hp + (t * N + b) * H, hprev(&c, l, d, t, b), sizeof(float) * (size_t)H);
            mge_sgemm(ctx, 1, 0, GH, H, SN, 1.0f, c.DAH[d], GH, hp, H, 0.0f, gWh, H);
            if (r->bias) {
                float *gbi = dW + poff[k * r->np + 2], *gbh = dW + poff[k * r->np + 3];
                memset(gbi, 0, sizeof(float) * (size_t)GH);
                memset(gbh, 0, sizeof(float) * (size_t)GH);
                for (int64_t i = 0; i < SN; i++)
                    for (int64_t j = 0; j < GH; j++) {
                        gbi[j] += c.DA[d][i * GH + j];
                        gbh[j] += c.DAH[d][i * GH + j];
                    }
            }
            mge_sgemm(ctx, 0, 0, SN, in_l, GH, 1.0f, c.DA[d], GH, c.w[k * 4], in_l, d ? 1.0f : 0.0f, c.dX, in_l);
        }
        float *t = c.dY;
        c.dY = c.dX; /* the gradient of layer l - 1's output */
        c.dX = t;
    }
    free(hp);
    float *dx = out[0]->data;
    if (!r->bf)
        memcpy(dx, c.dY, sizeof(float) * (size_t)(SN * c.I));
    else
        for (int64_t t = 0; t < S; t++)
            for (int64_t b = 0; b < N; b++)
                memcpy(dx + (b * S + t) * c.I, c.dY + (t * N + b) * c.I, sizeof(float) * (size_t)c.I);
    memcpy(out[1]->data, c.hn, sizeof(float) * (size_t)(DL * N * H));
    if (!r->gru)
        memcpy(out[2]->data, c.cn, sizeof(float) * (size_t)(DL * N * H));
    crnn_free(&c);
    return st;
nomem:
    crnn_free(&c);
    return mge_error_set(err, MGE_ERR_NOMEM, "%s: out of memory", mge_kctx_opname(ctx, n));
}

void mge_cpu_register_rnn(mge_backend *b)
{
    b->k[MGE_OP_LSTM][MGE_F32].run = rnn_forward;
    b->k[MGE_OP_GRU][MGE_F32].run = rnn_forward;
    b->k[MGE_OP_LSTM_GRAD][MGE_F32].run = rnn_backward;
    b->k[MGE_OP_GRU_GRAD][MGE_F32].run = rnn_backward;
}
