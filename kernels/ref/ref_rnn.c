/* ref_rnn.c — lstm, gru and their gradient ops (backpropagation through
 * time): clear loops in double over copies of the inputs, for any float
 * dtype. PyTorch's equations:
 *   lstm: i,f,g,o = sig, sig, tanh, sig (W_ih x + b_ih + W_hh h + b_hh),
 *         c' = f c + i g, h' = o tanh(c')
 *   gru:  r,z = sig(W_ih x + b_ih + W_hh h + b_hh) (their rows),
 *         n = tanh(W_in x + b_in + r (W_hn h + b_hn)), h' = (1 - z) n + z h
 *         (linear_before_reset=false, ONNX's default: n = tanh(W_in x + b_in
 *         + W_hn (r h) + b_hn); inference only)
 *         lstm's peepholes (ONNX's P; inference only) add P_i c, P_f c to
 *         the i, f sums and P_o c' to o's
 *   rnn:  h' = act(W_ih x + b_ih + W_hh h + b_hh), act tanh or relu
 *         (nn.RNN; inference only)
 * Direction 1 (reverse) walks the sequence from its end; layer l > 0 reads
 * the concatenated outputs of both directions of layer l - 1. */
#include "ref.h"
#include "krnn.h"

#include <stdlib.h>

typedef struct rnn_ctx {
    krnn r;
    int64_t S, N, I;
    mge_dtype dt;
    double *x;              /* [S][N][I], sequence-major */
    double *h0, *c0;        /* [D*L][N][H] */
    double *w[KRNN_MAX_LD * 4];
    double *peep[KRNN_MAX_LD];  /* lstm's peepholes i, f, o [3H], or NULL */
    double **Y;             /* per layer: [S][N][D*H] */
    double **gate;          /* per layer and direction: [S][N][G*H] after the activations */
    double **cell;          /* lstm: c_t; gru: W_hn h + b_hn; [S][N][H] */
    double *hn, *cn;        /* [D*L][N][H] */
} rnn_ctx;

static double sig(double v)
{
    return 1.0 / (1.0 + exp(-v));
}

/* n zeroed doubles (at least one, so that empty tensors need no case) */
static double *dalloc(int64_t n)
{
    return calloc((size_t)(n > 0 ? n : 1), sizeof(double));
}

static double *load(const mge_tensor *t, int64_t n)
{
    double *p = dalloc(n);
    if (p)
        for (int64_t i = 0; i < n; i++)
            p[i] = ref_ld(t->dtype, t->data, i);
    return p;
}

static void ctx_free(rnn_ctx *c)
{
    free(c->x);
    free(c->h0);
    free(c->c0);
    for (int k = 0; k < KRNN_MAX_LD * 4; k++)
        free(c->w[k]);
    for (int k = 0; k < KRNN_MAX_LD; k++)
        free(c->peep[k]);
    for (int64_t l = 0; c->Y && l < c->r.L; l++)
        free(c->Y[l]);
    for (int64_t k = 0; c->gate && k < c->r.L * c->r.D; k++) {
        free(c->gate[k]);
        free(c->cell[k]);
    }
    free(c->Y);
    free(c->gate);
    free(c->cell);
    free(c->hn);
    free(c->cn);
}

/* Checks every input against the geometry and loads them. */
static mge_status ctx_init(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, rnn_ctx *c, mge_error *err)
{
    memset(c, 0, sizeof *c);
    krnn *r = &c->r;
    if (krnn_setup(n, r) || r->H < 1)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: %d inputs do not fit the attributes", ref_opname(ctx, n),
                             n->nin);
    const mge_tensor *x = in[r->xi];
    mge_status s = ref_check_data(ctx, n, "x", x, err);
    if (s)
        return s;
    if (x->ndim != 3 || !mge_dtype_is_float(x->dtype))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x: expected a float tensor of rank 3", ref_opname(ctx, n));
    c->dt = x->dtype;
    c->S = x->dims[r->bf ? 1 : 0];
    c->N = x->dims[r->bf ? 0 : 1];
    c->I = x->dims[2];
    int64_t H = r->H, DL = r->D * r->L, S = c->S, N = c->N, I = c->I;
    int64_t sd[3] = {DL, N, H};
    for (int k = 0; r->has_state && k < r->nstate; k++)
        if ((s = ref_check(ctx, n, k ? "c0" : "h0", in[r->xi + 1 + k], c->dt, 3, sd, err)))
            return s;
    for (int64_t l = 0; l < r->L; l++)
        for (int64_t d = 0; d < r->D; d++)
            for (int k = 0; k < r->np; k++) {
                int kind = krnn_kind(r, k);
                int64_t pd[2] = {kind == 4 ? 3 * H : r->G * H, k == 0 ? krnn_in(r, l, I) : H};
                if ((s = ref_check(ctx, n, krnn_param_name(l, d, kind), in[krnn_param(r, l, d, k)], c->dt,
                                   k < 2 ? 2 : 1, pd, err)))
                    return s;
            }
    c->x = dalloc(S * N * I);
    c->h0 = dalloc(DL * N * H);
    c->c0 = dalloc(DL * N * H);
    c->hn = dalloc(DL * N * H);
    c->cn = dalloc(DL * N * H);
    c->Y = calloc((size_t)r->L, sizeof *c->Y);
    c->gate = calloc((size_t)DL, sizeof *c->gate);
    c->cell = calloc((size_t)DL, sizeof *c->cell);
    if (!c->x || !c->h0 || !c->c0 || !c->hn || !c->cn || !c->Y || !c->gate || !c->cell)
        return mge_error_set(err, MGE_ERR_NOMEM, "%s: out of memory", ref_opname(ctx, n));
    for (int64_t t = 0; t < S; t++)
        for (int64_t b = 0; b < N; b++)
            for (int64_t i = 0; i < I; i++)
                c->x[(t * N + b) * I + i] = ref_ld(c->dt, x->data, ((r->bf ? b * S + t : t * N + b)) * I + i);
    for (int k = 0; r->has_state && k < r->nstate; k++) {
        const mge_tensor *st = in[r->xi + 1 + k];
        for (int64_t i = 0; i < DL * N * H; i++)
            (k ? c->c0 : c->h0)[i] = ref_ld(c->dt, st->data, i);
    }
    for (int64_t l = 0; l < r->L; l++) {
        if (!(c->Y[l] = dalloc(S * N * r->D * H)))
            return mge_error_set(err, MGE_ERR_NOMEM, "%s: out of memory", ref_opname(ctx, n));
        for (int64_t d = 0; d < r->D; d++) {
            int64_t k = l * r->D + d;
            c->gate[k] = dalloc(S * N * r->G * H);
            c->cell[k] = dalloc(S * N * H);
            if (!c->gate[k] || !c->cell[k])
                return mge_error_set(err, MGE_ERR_NOMEM, "%s: out of memory", ref_opname(ctx, n));
            for (int j = 0; j < r->np; j++) {
                const mge_tensor *p = in[krnn_param(r, l, d, j)];
                double **slot = krnn_kind(r, j) == 4 ? &c->peep[k] : &c->w[k * 4 + j];
                if (!(*slot = load(p, ref_numel(p))))
                    return mge_error_set(err, MGE_ERR_NOMEM, "%s: out of memory", ref_opname(ctx, n));
            }
        }
    }
    return MGE_OK;
}

/* The forward over all layers, keeping what the backward needs. */
static int forward(rnn_ctx *c)
{
    const krnn *r = &c->r;
    int64_t H = r->H, G = r->G, GH = G * H, S = c->S, N = c->N, D = r->D;
    double *pre = malloc(sizeof(double) * (size_t)(2 * GH + H));
    if (!pre)
        return -1;
    for (int64_t l = 0; l < r->L; l++) {
        int64_t in = krnn_in(r, l, c->I);
        const double *X = l == 0 ? c->x : c->Y[l - 1];
        for (int64_t d = 0; d < D; d++) {
            int64_t k = l * D + d;
            const double *Wi = c->w[k * 4], *Wh = c->w[k * 4 + 1], *bi = r->bias ? c->w[k * 4 + 2] : NULL,
                         *bh = r->bias ? c->w[k * 4 + 3] : NULL;
            double *hs = c->hn + k * N * H, *cs = c->cn + k * N * H;
            memcpy(hs, c->h0 + k * N * H, sizeof(double) * (size_t)(N * H));
            memcpy(cs, c->c0 + k * N * H, sizeof(double) * (size_t)(N * H));
            for (int64_t s = 0; s < S; s++) {
                int64_t t = d ? S - 1 - s : s;
                for (int64_t b = 0; b < N; b++) {
                    const double *xt = X + (t * N + b) * in;
                    double *h = hs + b * H, *cc = cs + b * H;
                    double *ai = pre, *ah = pre + GH; /* input and hidden parts */
                    for (int64_t j = 0; j < GH; j++) {
                        double u = bi ? bi[j] : 0, v = bh ? bh[j] : 0;
                        for (int64_t q = 0; q < in; q++)
                            u += Wi[j * in + q] * xt[q];
                        for (int64_t q = 0; q < H; q++)
                            v += Wh[j * H + q] * h[q];
                        ai[j] = u;
                        ah[j] = v;
                    }
                    if (r->gru && !r->rnn && !r->lbr) {
                        /* linear_before_reset = 0: the n rows' hidden part is W_hn (r h) + b_hn */
                        double *rh = pre + 2 * GH;
                        for (int64_t q = 0; q < H; q++)
                            rh[q] = sig(ai[q] + ah[q]) * h[q];
                        for (int64_t j = 2 * H; j < 3 * H; j++) {
                            double v = bh ? bh[j] : 0;
                            for (int64_t q = 0; q < H; q++)
                                v += Wh[j * H + q] * rh[q];
                            ah[j] = v;
                        }
                    }
                    double *gt = c->gate[k] + (t * N + b) * GH, *ct = c->cell[k] + (t * N + b) * H;
                    for (int64_t j = 0; j < H; j++) {
                        if (r->rnn) {
                            double v = ai[j] + ah[j];
                            gt[j] = r->act ? (v > 0 ? v : 0) : tanh(v);
                        } else if (!r->gru) {
                            /* peepholes (ONNX): i, f see c_{t-1}, o sees c_t */
                            const double *P = c->peep[k];
                            double ig = sig(ai[j] + ah[j] + (P ? P[j] * cc[j] : 0));
                            double fg = sig(ai[H + j] + ah[H + j] + (P ? P[H + j] * cc[j] : 0));
                            double gg = tanh(ai[2 * H + j] + ah[2 * H + j]);
                            cc[j] = fg * cc[j] + ig * gg;
                            double og = sig(ai[3 * H + j] + ah[3 * H + j] + (P ? P[2 * H + j] * cc[j] : 0));
                            gt[j] = ig, gt[H + j] = fg, gt[2 * H + j] = gg, gt[3 * H + j] = og;
                            ct[j] = cc[j];
                        } else {
                            double rg = sig(ai[j] + ah[j]), zg = sig(ai[H + j] + ah[H + j]);
                            double ng = tanh(ai[2 * H + j] + (r->lbr ? rg * ah[2 * H + j] : ah[2 * H + j]));
                            gt[j] = rg, gt[H + j] = zg, gt[2 * H + j] = ng;
                            ct[j] = ah[2 * H + j];
                        }
                    }
                    /* h is read above for every j: update it after */
                    for (int64_t j = 0; j < H; j++) {
                        double hv = r->rnn ? gt[j] : !r->gru ? gt[3 * H + j] * tanh(cc[j])
                                            : (1 - gt[H + j]) * gt[2 * H + j] + gt[H + j] * h[j];
                        h[j] = hv;
                        c->Y[l][(t * N + b) * D * H + d * H + j] = hv;
                    }
                }
            }
        }
    }
    free(pre);
    return 0;
}

/* y in x's layout (batch_first or not). */
static void store_y(const rnn_ctx *c, mge_tensor *y)
{
    int64_t S = c->S, N = c->N, W = c->r.D * c->r.H;
    const double *Y = c->Y[c->r.L - 1];
    for (int64_t t = 0; t < S; t++)
        for (int64_t b = 0; b < N; b++)
            for (int64_t j = 0; j < W; j++)
                ref_st(c->dt, y->data, (c->r.bf ? b * S + t : t * N + b) * W + j, Y[(t * N + b) * W + j]);
}

static mge_status check_outs(const mge_kctx *ctx, const mge_node *n, const rnn_ctx *c, mge_tensor *const *out,
                             int nout, mge_error *err)
{
    int64_t W = c->r.D * c->r.H, yd[3] = {c->S, c->N, W}, yb[3] = {c->N, c->S, W};
    int64_t sd[3] = {c->r.D * c->r.L, c->N, c->r.H};
    mge_status s = ref_check(ctx, n, "y", out[0], c->dt, 3, c->r.bf ? yb : yd, err);
    for (int o = 1; !s && o < nout; o++)
        s = ref_check(ctx, n, o == 1 ? "h_n" : "c_n", out[o], c->dt, 3, sd, err);
    return s;
}

static mge_status rnn_forward(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                              mge_error *err)
{
    rnn_ctx c;
    mge_status s = ctx_init(ctx, n, in, &c, err);
    if (!s)
        s = check_outs(ctx, n, &c, out, n->nout, err);
    if (!s && forward(&c))
        s = mge_error_set(err, MGE_ERR_NOMEM, "%s: out of memory", ref_opname(ctx, n));
    if (!s) {
        store_y(&c, out[0]);
        int64_t m = c.r.D * c.r.L * c.N * c.r.H;
        for (int64_t i = 0; i < m; i++) {
            if (n->nout > 1)
                ref_st(c.dt, out[1]->data, i, c.hn[i]);
            if (n->nout > 2)
                ref_st(c.dt, out[2]->data, i, c.cn[i]);
        }
    }
    ctx_free(&c);
    return s;
}

/* A gradient input: zeros when a scalar, else loaded. */
static double *load_grad(const mge_tensor *t, int64_t n)
{
    if (t->ndim == 0)
        return dalloc(n);
    return load(t, n);
}

static mge_status rnn_backward(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                               mge_tensor *const *out, mge_error *err)
{
    rnn_ctx c;
    mge_status s = ctx_init(ctx, n, in, &c, err);
    const krnn *r = &c.r;
    double *dY = NULL, *dX = NULL, *dhn = NULL, *dcn = NULL, *dW = NULL, *da = NULL, *dh = NULL, *dc = NULL;
    int64_t H = r->H, G = r->G, GH = G * H, S = c.S, N = c.N, D = r->D, DL = D * r->L, W = D * H;
    int64_t total = 0;
    if (s)
        goto done;
    if ((r->gru && !r->lbr) || r->peep) {
        s = mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: %s is inference only", ref_opname(ctx, n),
                          r->peep ? "peephole=true" : "linear_before_reset=false");
        goto done;
    }
    for (int k = r->pi; k < n->nin; k++)
        total += ref_numel(in[k]);
    {
        int64_t yd[3] = {r->bf ? N : S, r->bf ? S : N, W}, sd[3] = {DL, N, H};
        const char *nm[3] = {"dy", "dh_n", "dc_n"};
        for (int k = 0; k < (r->gru ? 2 : 3) && !s; k++)
            if (in[k]->ndim != 0)
                s = ref_check(ctx, n, nm[k], in[k], c.dt, 3, k ? sd : yd, err);
            else
                s = ref_check_data(ctx, n, nm[k], in[k], err);
        const mge_tensor *x = in[r->xi];
        if (!s)
            s = ref_check(ctx, n, "dx", out[0], c.dt, 3, x->dims, err);
        for (int k = 1; k < (r->gru ? 2 : 3) && !s; k++)
            s = ref_check(ctx, n, k == 1 ? "dh0" : "dc0", out[k], c.dt, 3, sd, err);
        if (!s)
            s = ref_check(ctx, n, "dparams", out[r->gru ? 2 : 3], c.dt, 1, &total, err);
        if (s)
            goto done;
    }
    if (forward(&c)) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "%s: out of memory", ref_opname(ctx, n));
        goto done;
    }
    dY = load_grad(in[0], S * N * W);
    dhn = load_grad(in[1], DL * N * H);
    dcn = r->gru ? dalloc(DL * N * H) : load_grad(in[2], DL * N * H);
    dW = dalloc(total);
    da = malloc(sizeof(double) * (size_t)(2 * GH));
    dh = dalloc(N * H);
    dc = dalloc(N * H);
    if (!dY || !dhn || !dcn || !dW || !da || !dh || !dc) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "%s: out of memory", ref_opname(ctx, n));
        goto done;
    }
    if (in[0]->ndim != 0 && r->bf) { /* dy to sequence-major */
        for (int64_t t = 0; t < S; t++)
            for (int64_t b = 0; b < N; b++)
                for (int64_t j = 0; j < W; j++)
                    dY[(t * N + b) * W + j] = ref_ld(c.dt, in[0]->data, (b * S + t) * W + j);
    }
    /* offsets of each param's gradient in dparams */
    int64_t poff[KRNN_MAX_LD * 4], off = 0;
    for (int k = 0; k < r->nparams; k++) {
        poff[k] = off;
        off += ref_numel(in[r->pi + k]);
    }
    for (int64_t l = r->L - 1; l >= 0; l--) {
        int64_t in_l = krnn_in(r, l, c.I);
        const double *X = l == 0 ? c.x : c.Y[l - 1];
        dX = dalloc(S * N * in_l);
        if (!dX) {
            s = mge_error_set(err, MGE_ERR_NOMEM, "%s: out of memory", ref_opname(ctx, n));
            goto done;
        }
        for (int64_t d = 0; d < D; d++) {
            int64_t k = l * D + d;
            const double *Wi = c.w[k * 4], *Wh = c.w[k * 4 + 1];
            double *gWi = dW + poff[k * r->np], *gWh = dW + poff[k * r->np + 1];
            double *gbi = r->bias ? dW + poff[k * r->np + 2] : NULL, *gbh = r->bias ? dW + poff[k * r->np + 3] : NULL;
            memcpy(dh, dhn + k * N * H, sizeof(double) * (size_t)(N * H));
            memcpy(dc, dcn + k * N * H, sizeof(double) * (size_t)(N * H));
            for (int64_t s2 = S - 1; s2 >= 0; s2--) {
                int64_t t = d ? S - 1 - s2 : s2, tp = d ? t + 1 : t - 1; /* the step before, in walk order */
                for (int64_t b = 0; b < N; b++) {
                    const double *gt = c.gate[k] + (t * N + b) * GH, *ct = c.cell[k] + (t * N + b) * H;
                    const double *hp = s2 == 0 ? c.h0 + (k * N + b) * H : c.Y[l] + (tp * N + b) * W + d * H;
                    const double *cp = s2 == 0 ? c.c0 + (k * N + b) * H : c.cell[k] + (tp * N + b) * H;
                    const double *xt = X + (t * N + b) * in_l;
                    double *dhb = dh + b * H, *dcb = dc + b * H, *dai = da, *dah = da + GH;
                    for (int64_t j = 0; j < H; j++)
                        dhb[j] += dY[(t * N + b) * W + d * H + j];
                    for (int64_t j = 0; j < H; j++) {
                        if (!r->gru) {
                            double ig = gt[j], fg = gt[H + j], gg = gt[2 * H + j], og = gt[3 * H + j];
                            double tc = tanh(ct[j]);
                            double dct = dcb[j] + dhb[j] * og * (1 - tc * tc);
                            dai[j] = dct * gg * ig * (1 - ig);
                            dai[H + j] = dct * cp[j] * fg * (1 - fg);
                            dai[2 * H + j] = dct * ig * (1 - gg * gg);
                            dai[3 * H + j] = dhb[j] * tc * og * (1 - og);
                            dcb[j] = dct * fg;
                        } else {
                            double rg = gt[j], zg = gt[H + j], ng = gt[2 * H + j];
                            double dn = dhb[j] * (1 - zg), dz = dhb[j] * (hp[j] - ng);
                            double dan = dn * (1 - ng * ng);
                            dai[j] = dan * ct[j] * rg * (1 - rg);
                            dai[H + j] = dz * zg * (1 - zg);
                            dai[2 * H + j] = dan;
                            dah[2 * H + j] = dan * rg;
                            dhb[j] = dhb[j] * zg; /* the direct path; W_hh^T da_h added below */
                        }
                    }
                    for (int64_t j = 0; j < 2 * H && r->gru; j++)
                        dah[j] = dai[j];
                    const double *dh_a = r->gru ? dah : dai;
                    if (!r->gru)
                        for (int64_t j = 0; j < H; j++)
                            dhb[j] = 0;
                    for (int64_t j = 0; j < GH; j++) {
                        for (int64_t q = 0; q < in_l; q++) {
                            gWi[j * in_l + q] += dai[j] * xt[q];
                            dX[(t * N + b) * in_l + q] += Wi[j * in_l + q] * dai[j];
                        }
                        for (int64_t q = 0; q < H; q++) {
                            gWh[j * H + q] += dh_a[j] * hp[q];
                            dhb[q] += Wh[j * H + q] * dh_a[j];
                        }
                        if (gbi) {
                            gbi[j] += dai[j];
                            gbh[j] += dh_a[j];
                        }
                    }
                }
            }
            /* dh0 (and dc0) also without h0: zeros stood in for it */
            for (int64_t i = 0; i < N * H; i++) {
                ref_st(c.dt, out[1]->data, k * N * H + i, dh[i]);
                if (!r->gru)
                    ref_st(c.dt, out[2]->data, k * N * H + i, dc[i]);
            }
        }
        free(dY);
        dY = dX; /* the gradient of layer l - 1's output */
        dX = NULL;
    }
    for (int64_t t = 0; t < S; t++)
        for (int64_t b = 0; b < N; b++)
            for (int64_t i = 0; i < c.I; i++)
                ref_st(c.dt, out[0]->data, (r->bf ? b * S + t : t * N + b) * c.I + i, dY[(t * N + b) * c.I + i]);
    for (int64_t i = 0; i < total; i++)
        ref_st(c.dt, out[r->gru ? 2 : 3]->data, i, dW[i]);
done:
    free(dY);
    free(dX);
    free(dhn);
    free(dcn);
    free(dW);
    free(da);
    free(dh);
    free(dc);
    ctx_free(&c);
    return s;
}

void mge_ref_register_rnn(mge_backend *b)
{
    REF_EACH_FLOAT(dt) {
        b->k[MGE_OP_LSTM][dt].run = rnn_forward;
        b->k[MGE_OP_GRU][dt].run = rnn_forward;
        b->k[MGE_OP_LSTM_GRAD][dt].run = rnn_backward;
        b->k[MGE_OP_GRU_GRAD][dt].run = rnn_backward;
        b->k[MGE_OP_RNN][dt].run = rnn_forward;
    }
}
