/* ref_winograd.c — conv2d_winograd, the oracle: per output tile, in
 * double, the textbook steps with the matrices of kshared.h: input
 * tile d (zero outside x), V = B^T d B, M = sum over c of U[c] .* V[c],
 * Y = A^T M A, then bias, residual and the activation. Plain loops, no
 * workspace; the unit tests check it against conv2d's ref kernel on the
 * weight it was transformed from. winograd_weight: U = G g G^T per (o, c)
 * with the same two-sided transform, rounded to f32 once. The _nchwc ops:
 * the same on blocked tensors. */
#include "ref.h"

#include <stdlib.h>

/* r[a][b] = L[a][k] s[k][l] R^T[l][b]: the two-sided transform of one tile
 * (L is la x k, R is lb x k, both row-major; s is k x k). */
static void tile_transform(const double *L, const double *R, int la, int k, const double *s, double *r)
{
    double t[6 * 6];
    for (int i = 0; i < la; i++)
        for (int j = 0; j < k; j++) {
            double acc = 0;
            for (int q = 0; q < k; q++)
                acc += L[i * k + q] * s[q * k + j];
            t[i * k + j] = acc;
        }
    for (int i = 0; i < la; i++)
        for (int j = 0; j < la; j++) {
            double acc = 0;
            for (int q = 0; q < k; q++)
                acc += t[i * k + q] * R[j * k + q];
            r[i * la + j] = acc;
        }
}

/* conv2d_winograd (blocked = 0: x, residual, y NCHW, weight_t [a*a,O,C])
 * and conv2d_winograd_nchwc (blocked: x [N,Cb,H,W,c], weight_t
 * [a*a,Ob,Cb,c,c], residual and y blocked like x; lanes past out are
 * written zero). Plain NCHW is the blocked layout with c = 1, so one loop
 * nest serves both: per tile, V = B^T d B of every channel, then per
 * output channel and tile position M = sum_c U V, then Y = A^T M A plus
 * bias, residual and act, all in double. */
static mge_status winograd_any(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                               int blocked, mge_error *err)
{
    const mge_tensor *x = in[0], *w = in[1], *y = out[0];
    int bias = (int)mge_node_int(n, MGE_KEY_bias, 1), res = (int)mge_node_int(n, MGE_KEY_residual, 0);
    int m = (int)mge_node_int(n, MGE_KEY_tile, 4);
    const double *AT, *BT;
    if (!mge_winograd_matrices(m, &AT, NULL, &BT))
        return mge_error_set(err, MGE_ERR_INVALID, "%s: tile=%d: expected 2 or 4", ref_opname(ctx, n), m);
    if (n->nin != 2 + bias + res)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: %d inputs: expected %d", ref_opname(ctx, n), n->nin,
                             2 + bias + res);
    mge_status st = ref_check_dtype(ctx, n, "x", x, MGE_F32, err);
    if (st)
        return st;
    const int rank = blocked ? 5 : 4;
    if (x->ndim != rank || (blocked && x->dims[4] < 1))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x has rank %d: expected %d", ref_opname(ctx, n), x->ndim, rank);
    const int a = m + 2;
    const int64_t N = x->dims[0], Cb = x->dims[1], H = x->dims[2], W = x->dims[3], c = blocked ? x->dims[4] : 1;
    const int64_t O = mge_node_int(n, MGE_KEY_out, 0), Ob = (O + c - 1) / c, C = Cb * c;
    const int64_t ph = mge_node_ints(n, MGE_KEY_pad, 0, 0), pw = mge_node_ints(n, MGE_KEY_pad, 1, 0);
    const int64_t ew[5] = {(int64_t)a * a, Ob, Cb, c, c}, eb[1] = {O};
    const int64_t ey[5] = {N, Ob, H + 2 * ph - 2, W + 2 * pw - 2, c};
    if ((st = ref_check(ctx, n, "weight_t", w, MGE_F32, blocked ? 5 : 3, ew, err)) ||
        (bias && (st = ref_check(ctx, n, "bias", in[2], MGE_F32, 1, eb, err))) ||
        (res && (st = ref_check(ctx, n, "residual", in[2 + bias], MGE_F32, rank, ey, err))) ||
        (st = ref_check(ctx, n, "output", y, MGE_F32, rank, ey, err)))
        return st;
    const int act = (int)mge_node_int(n, MGE_KEY_act, -1);
    const double alpha = mge_node_float(n, MGE_KEY_alpha, 0.01);
    const int64_t OH = ey[2], OW = ey[3], TH = (OH + m - 1) / m, TW = (OW + m - 1) / m;
    const float *xd = x->data, *u = w->data, *bd = bias ? in[2]->data : NULL;
    const float *rd = res ? in[2 + bias]->data : NULL;
    float *yd = y->data;
    /* V of every channel of one tile: C * a * a doubles */
    double *v = malloc(sizeof(double) * (size_t)(C * a * a + 1));
    if (!v)
        return mge_error_set(err, MGE_ERR_NOMEM, "%s: out of memory", ref_opname(ctx, n));
    for (int64_t img = 0; img < N; img++)
        for (int64_t ti = 0; ti < TH; ti++)
            for (int64_t tj = 0; tj < TW; tj++) {
                const int64_t h0 = ti * m - ph, w0 = tj * m - pw;   /* tile origin in x */
                for (int64_t ch = 0; ch < C; ch++) {
                    double d[6 * 6];
                    for (int i = 0; i < a; i++)
                        for (int j = 0; j < a; j++) {
                            int64_t h = h0 + i, ww = w0 + j;
                            d[i * a + j] = h >= 0 && h < H && ww >= 0 && ww < W
                                               ? xd[(((img * Cb + ch / c) * H + h) * W + ww) * c + ch % c]
                                               : 0.0;
                        }
                    tile_transform(BT, BT, a, a, d, v + ch * a * a);
                }
                for (int64_t o = 0; o < Ob * c; o++) {
                    double mt[6 * 6], yt[4 * 4];
                    for (int p = 0; p < a * a; p++) {
                        double acc = 0;
                        for (int64_t ch = 0; ch < C; ch++)
                            acc += (double)u[((((int64_t)p * Ob + o / c) * Cb + ch / c) * c + ch % c) * c + o % c] *
                                   v[ch * a * a + p];
                        mt[p] = acc;
                    }
                    /* A^T mt A: AT is m x a, so L = AT and R^T = A */
                    tile_transform(AT, AT, m, a, mt, yt);
                    for (int i = 0; i < m; i++)
                        for (int j = 0; j < m; j++) {
                            int64_t oh = ti * m + i, ow = tj * m + j;
                            if (oh >= OH || ow >= OW)
                                continue;
                            int64_t at = (((img * Ob + o / c) * OH + oh) * OW + ow) * c + o % c;
                            if (o >= O) {
                                yd[at] = 0.0f;
                                continue;
                            }
                            double r = yt[i * m + j] + (bd ? bd[o] : 0.0) + (rd ? rd[at] : 0.0);
                            yd[at] = (float)(act == -1 ? r : mge_ref_unary(act, r, alpha));
                        }
                }
            }
    free(v);
    return MGE_OK;
}

static mge_status winograd_f32(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                               mge_tensor *const *out, mge_error *err)
{
    return winograd_any(ctx, n, in, out, 0, err);
}

static mge_status nchwc_f32(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                            mge_error *err)
{
    return winograd_any(ctx, n, in, out, 1, err);
}

/* winograd_weight (blocked = 0: u [a*a,O,C]) and winograd_weight_nchwc
 * (u [a*a,Ob,Cb,c,c], lanes past O and C zero): G w G^T of every (o, c),
 * the plain order being the blocked one with c = 1. */
static mge_status weight_any(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                             int blocked, mge_error *err)
{
    const mge_tensor *w = in[0], *u = out[0];
    int m = (int)mge_node_int(n, MGE_KEY_tile, 4);
    int64_t c = blocked ? mge_node_int(n, MGE_KEY_block, 0) : 1;
    const double *G;
    if (!mge_winograd_matrices(m, NULL, &G, NULL) || c < 1)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: tile=%d block=%lld: expected 2 or 4, and at least 1",
                             ref_opname(ctx, n), m, (long long)c);
    mge_status st = ref_check_dtype(ctx, n, "w", w, MGE_F32, err);
    if (st)
        return st;
    if (w->ndim != 4)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: w has rank %d: expected 4", ref_opname(ctx, n), w->ndim);
    const int a = m + 2;
    const int64_t O = w->dims[0], C = w->dims[1], Ob = (O + c - 1) / c, Cb = (C + c - 1) / c;
    const int64_t ew[4] = {O, C, 3, 3}, eu[5] = {(int64_t)a * a, Ob, Cb, c, c};
    if ((st = ref_check(ctx, n, "w", w, MGE_F32, 4, ew, err)) ||
        (st = ref_check(ctx, n, "output", u, MGE_F32, blocked ? 5 : 3, eu, err)))
        return st;
    const float *wd = w->data;
    float *ud = u->data;
    for (int64_t k = 0; k < (int64_t)a * a * Ob * Cb * c * c; k++)
        ud[k] = 0.0f;
    for (int64_t o = 0; o < O; o++)
        for (int64_t i = 0; i < C; i++) {
            double k[9], r[6 * 6];
            for (int q = 0; q < 9; q++)
                k[q] = wd[(o * C + i) * 9 + q];
            tile_transform(G, G, a, 3, k, r);
            for (int p = 0; p < a * a; p++)
                ud[((((int64_t)p * Ob + o / c) * Cb + i / c) * c + i % c) * c + o % c] = (float)r[p];
        }
    return MGE_OK;
}

static mge_status weight_f32(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                             mge_tensor *const *out, mge_error *err)
{
    return weight_any(ctx, n, in, out, 0, err);
}

static mge_status weight_nchwc_f32(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                   mge_tensor *const *out, mge_error *err)
{
    return weight_any(ctx, n, in, out, 1, err);
}

void mge_ref_register_winograd(mge_backend *b)
{
    b->k[MGE_OP_CONV2D_WINOGRAD_NCHWC][MGE_F32].run = nchwc_f32;
    b->k[MGE_OP_WINOGRAD_WEIGHT_NCHWC][MGE_F32].run = weight_nchwc_f32;
    b->k[MGE_OP_CONV2D_WINOGRAD][MGE_F32].run = winograd_f32;
    b->k[MGE_OP_WINOGRAD_WEIGHT][MGE_F32].run = weight_f32;
}
