/* cpu_gemm.c — conv2d, linear and matmul (f32) on OpenBLAS.
 *
 * conv2d takes one of three paths:
 *   - one input channel per group (depthwise, incl. channel multipliers):
 *     a direct kernel, parallel over output planes, on a zero-padded copy
 *     of each input plane (see dw_plane);
 *   - 1x1, stride 1, no pad: one sgemm per image and group straight on x;
 *   - otherwise im2col into the workspace (parallel over the pool), then
 *     one sgemm per image and group.
 * The bias (or zero) is written into the output first and the sgemm
 * accumulates onto it (beta = 1), so the bias costs no extra pass.
 * OpenBLAS is only called from the calling thread, never inside a pool
 * task. */
#include "cpu.h"

#include <cblas.h>
#include <limits.h>
#include <string.h>

/* ---------------------------------------------------------------- shapes */

typedef struct cpu_conv {
    int64_t N, C, H, W, O, OH, OW, G, Cg, Og;
    int64_t kh, kw, sh, sw, ph, pw, dh, dw;
} cpu_conv;

static void conv_shape(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, cpu_conv *c)
{
    const mge_tensor *x = in[0], *w = in[1], *y = out[0];
    c->N = x->dims[0], c->C = x->dims[1], c->H = x->dims[2], c->W = x->dims[3];
    c->O = y->dims[1], c->OH = y->dims[2], c->OW = y->dims[3];
    c->G = mge_node_int(n, MGE_KEY_groups, 1);
    c->Cg = c->C / c->G, c->Og = c->O / c->G;
    c->kh = w->dims[2], c->kw = w->dims[3];
    c->sh = mge_node_ints(n, MGE_KEY_stride, 0, 1), c->sw = mge_node_ints(n, MGE_KEY_stride, 1, 1);
    c->ph = mge_node_ints(n, MGE_KEY_pad, 0, 0), c->pw = mge_node_ints(n, MGE_KEY_pad, 1, 0);
    c->dh = mge_node_ints(n, MGE_KEY_dilation, 0, 1), c->dw = mge_node_ints(n, MGE_KEY_dilation, 1, 1);
}

static int conv_is_1x1(const cpu_conv *c)
{
    return c->kh == 1 && c->kw == 1 && c->sh == 1 && c->sw == 1 && c->ph == 0 && c->pw == 0;
}

/* Every size and leading dimension handed to BLAS fits its int. */
static int blas_fits(int64_t a, int64_t b, int64_t c)
{
    return a >= 0 && b >= 0 && c >= 0 && a <= INT_MAX && b <= INT_MAX && c <= INT_MAX;
}

/* ---------------------------------------------------------------- bias prefill */

typedef struct bias_job {
    float *y;
    const float *b;   /* NULL: zero */
    int64_t O, plane;
} bias_job;

static void bias_fill(void *a, int64_t b0, int64_t b1, int thread)
{
    const bias_job *j = a;
    for (int64_t p = b0; p < b1; p++) {
        float v = j->b ? j->b[p % j->O] : 0.0f;
        float *y = j->y + p * j->plane;
        for (int64_t i = 0; i < j->plane; i++)
            y[i] = v;
    }
}

/* Rows of O (linear, or 1x1 output planes): the bias vector (or zeros)
 * copied into each. */
static void bias_rows(void *a, int64_t r0, int64_t r1, int thread)
{
    const bias_job *j = a;
    for (int64_t r = r0; r < r1; r++) {
        if (j->b)
            memcpy(j->y + r * j->O, j->b, sizeof(float) * (size_t)j->O);
        else
            memset(j->y + r * j->O, 0, sizeof(float) * (size_t)j->O);
    }
}

/* y[rows][O][plane] = b[O] broadcast. */
static void prefill_bias(const mge_kctx *ctx, float *y, const float *b, int64_t rows, int64_t O, int64_t plane)
{
    bias_job j = {y, b, O, plane};
    if (plane == 1)
        cpu_parallel(ctx, rows, O >= CPU_GRAIN ? 1 : CPU_GRAIN / O, bias_rows, &j);
    else
        cpu_parallel(ctx, rows * O, plane >= CPU_GRAIN ? 1 : CPU_GRAIN / (plane ? plane : 1), bias_fill, &j);
}

/* ---------------------------------------------------------------- depthwise */

/* Floats of per-thread scratch: the zero-padded input plane, then either
 * the "wide" output of the stride-1 path (rows of the padded width) or the
 * de-interleaved plane of the stride-2 path. */
static int64_t dw_scratch(const cpu_conv *c)
{
    int64_t Hp = c->H + 2 * c->ph, Wp = c->W + 2 * c->pw;
    int64_t wide = c->OH * Wp, de = Hp * (Wp + 1);
    return Hp * Wp + (wide > de ? wide : de) + 16;
}

/* One output plane from one input plane. The plane is first copied into a
 * zero-padded buffer so no tap needs a bounds test. With stride 1 the
 * output is computed "wide": index k = oh*Wp + ow addresses the padded
 * input at k + i*dh*Wp + j*dw for tap (i, j), so each tap is one long
 * contiguous loop over the whole plane (the Wp - OW extra columns per row
 * are discarded), instead of a short loop per row. */
CPU_MULTI(dw_plane,
          (const cpu_conv *c, const float *restrict x, const float *restrict w, float bias, float *restrict y,
           float *restrict pad, float *restrict wide),
          (c, x, w, bias, y, pad, wide), {
              const int64_t H = c->H, W = c->W, ph = c->ph, pw = c->pw, OH = c->OH, OW = c->OW;
              const int64_t Hp = H + 2 * ph, Wp = W + 2 * pw, kh = c->kh, kw = c->kw, dh = c->dh, dw = c->dw;
              for (int64_t i = 0; i < ph * Wp; i++)
                  pad[i] = 0.0f;
              for (int64_t h = 0; h < H; h++) {
                  float *restrict r = pad + (h + ph) * Wp;
                  for (int64_t j = 0; j < pw; j++)
                      r[j] = r[pw + W + j] = 0.0f;
                  for (int64_t j = 0; j < W; j++)
                      r[pw + j] = x[h * W + j];
              }
              for (int64_t i = (H + ph) * Wp; i < Hp * Wp; i++)
                  pad[i] = 0.0f;
              const int fused3 = kh == 3 && kw == 3 && dh == 1 && dw == 1;
              if (c->sh == 1 && c->sw == 1) {
                  const int64_t L = (OH - 1) * Wp + OW;
                  if (fused3) {
                      const float *restrict p0 = pad, *restrict p1 = pad + Wp, *restrict p2 = pad + 2 * Wp;
                      for (int64_t k = 0; k < L; k++)
                          wide[k] = bias + w[0] * p0[k] + w[1] * p0[k + 1] + w[2] * p0[k + 2] + w[3] * p1[k] +
                                    w[4] * p1[k + 1] + w[5] * p1[k + 2] + w[6] * p2[k] + w[7] * p2[k + 1] +
                                    w[8] * p2[k + 2];
                  } else {
                      for (int64_t k = 0; k < L; k++)
                          wide[k] = bias;
                      for (int64_t i = 0; i < kh; i++)
                          for (int64_t j = 0; j < kw; j++) {
                              const float wv = w[i * kw + j];
                              const float *restrict src = pad + i * dh * Wp + j * dw;
                              for (int64_t k = 0; k < L; k++)
                                  wide[k] += wv * src[k];
                          }
                  }
                  for (int64_t oh = 0; oh < OH; oh++)
                      for (int64_t ow = 0; ow < OW; ow++)
                          y[oh * OW + ow] = wide[oh * Wp + ow];
                  return;
              }
              const int64_t sh = c->sh, sw = c->sw;
              if (sw == 2) {
                  /* Each padded row split into its even and odd columns, so
                   * the taps read contiguous memory: column 2*ow + t is
                   * E[ow + t/2] for even t, O[ow + t/2] for odd t. */
                  const int64_t We = (Wp + 1) / 2;
                  float *restrict de = wide;   /* de-interleaved rows, 2*We each */
                  for (int64_t r = 0; r < Hp; r++) {
                      const float *restrict src = pad + r * Wp;
                      float *restrict e = de + r * 2 * We, *restrict o = e + We;
                      for (int64_t k = 0; k < Wp / 2; k++) {
                          e[k] = src[2 * k];
                          o[k] = src[2 * k + 1];
                      }
                      if (Wp % 2) {
                          e[We - 1] = src[Wp - 1];
                          o[We - 1] = 0.0f;
                      }
                  }
                  for (int64_t oh = 0; oh < OH; oh++) {
                      float *restrict yr = y + oh * OW;
                      const float *restrict r0 = de + oh * sh * 2 * We;
                      if (fused3) {
                          const float *restrict e0 = r0, *restrict o0 = r0 + We;
                          const float *restrict e1 = e0 + 2 * We, *restrict o1 = o0 + 2 * We;
                          const float *restrict e2 = e1 + 2 * We, *restrict o2 = o1 + 2 * We;
                          for (int64_t ow = 0; ow < OW; ow++)
                              yr[ow] = bias + w[0] * e0[ow] + w[1] * o0[ow] + w[2] * e0[ow + 1] + w[3] * e1[ow] +
                                       w[4] * o1[ow] + w[5] * e1[ow + 1] + w[6] * e2[ow] + w[7] * o2[ow] +
                                       w[8] * e2[ow + 1];
                          continue;
                      }
                      for (int64_t ow = 0; ow < OW; ow++)
                          yr[ow] = bias;
                      for (int64_t i = 0; i < kh; i++)
                          for (int64_t j = 0; j < kw; j++) {
                              const float wv = w[i * kw + j];
                              int64_t t = j * dw;
                              const float *restrict src = r0 + i * dh * 2 * We + (t % 2 ? We : 0) + t / 2;
                              for (int64_t ow = 0; ow < OW; ow++)
                                  yr[ow] += wv * src[ow];
                          }
                  }
                  return;
              }
              for (int64_t oh = 0; oh < OH; oh++) {
                  float *restrict yr = y + oh * OW;
                  const float *restrict r0 = pad + oh * sh * Wp;
                  for (int64_t ow = 0; ow < OW; ow++)
                      yr[ow] = bias;
                  for (int64_t i = 0; i < kh; i++)
                      for (int64_t j = 0; j < kw; j++) {
                          const float wv = w[i * kw + j];
                          const float *restrict src = r0 + i * dh * Wp + j * dw;
                          for (int64_t ow = 0; ow < OW; ow++)
                              yr[ow] += wv * src[ow * sw];
                      }
              }
          })

typedef struct dw_job {
    const cpu_conv *c;
    const float *x, *w, *b;
    float *y, *ws;
} dw_job;

static void dw_task(void *a, int64_t p0, int64_t p1, int thread)
{
    const dw_job *j = a;
    const cpu_conv *c = j->c;
    int64_t plane_in = c->H * c->W, plane_out = c->OH * c->OW, ksz = c->kh * c->kw;
    int64_t Hp = c->H + 2 * c->ph, Wp = c->W + 2 * c->pw;
    float *pad = j->ws + thread * dw_scratch(c);
    for (int64_t p = p0; p < p1; p++) {
        int64_t img = p / c->O, o = p % c->O;
        int64_t ch = o / c->Og;   /* one input channel per group */
        dw_plane(c, j->x + (img * c->C + ch) * plane_in, j->w + o * ksz, j->b ? j->b[o] : 0.0f,
                 j->y + p * plane_out, pad, pad + Hp * Wp);
    }
}

/* ---------------------------------------------------------------- im2col */

typedef struct col_job {
    const cpu_conv *c;
    const float *x;   /* the group's first input channel of one image */
    float *col;       /* [Cg*kh*kw][OH*OW] */
} col_job;

static void col_rows(void *a, int64_t r0, int64_t r1, int thread)
{
    const col_job *jb = a;
    const cpu_conv *c = jb->c;
    const int64_t OH = c->OH, OW = c->OW, ksz = c->kh * c->kw;
    for (int64_t r = r0; r < r1; r++) {
        int64_t ch = r / ksz, i = (r % ksz) / c->kw, j = r % c->kw;
        const float *x = jb->x + ch * c->H * c->W;
        float *dst = jb->col + r * OH * OW;
        int64_t lo, hi;
        cpu_valid_range(OW, c->W, c->sw, c->pw, j * c->dw, &lo, &hi);
        for (int64_t oh = 0; oh < OH; oh++, dst += OW) {
            int64_t ih = oh * c->sh - c->ph + i * c->dh;
            if (ih < 0 || ih >= c->H) {
                memset(dst, 0, sizeof(float) * (size_t)OW);
                continue;
            }
            const float *src = x + ih * c->W + j * c->dw - c->pw;
            for (int64_t ow = 0; ow < lo; ow++)
                dst[ow] = 0.0f;
            if (c->sw == 1)
                memcpy(dst + lo, src + lo, sizeof(float) * (size_t)(hi - lo));
            else
                for (int64_t ow = lo; ow < hi; ow++)
                    dst[ow] = src[ow * c->sw];
            for (int64_t ow = hi; ow < OW; ow++)
                dst[ow] = 0.0f;
        }
    }
}

/* ---------------------------------------------------------------- conv2d */

static size_t conv_ws(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, int threads)
{
    cpu_conv c;
    conv_shape(n, in, out, &c);
    size_t own = 0;
    if (c.Cg == 1)
        own = sizeof(float) * (size_t)dw_scratch(&c) * (size_t)(threads < 1 ? 1 : threads);
    else if (!conv_is_1x1(&c))
        own = sizeof(float) * (size_t)(c.Cg * c.kh * c.kw) * (size_t)(c.OH * c.OW);
    size_t ref = cpu_ref_ws(n, in, out, threads);   /* shapes too large for BLAS fall back */
    return own > ref ? own : ref;
}

static mge_status cpu_conv2d(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                             mge_error *err)
{
    cpu_conv c;
    conv_shape(n, in, out, &c);
    const float *x = in[0]->data, *w = in[1]->data;
    const float *b = n->nin > 2 && in[2] ? in[2]->data : NULL;
    float *y = out[0]->data;
    if (c.Cg == 1) {
        int threads = ctx->pool ? mge_pool_size(ctx->pool) : 1;
        size_t need = sizeof(float) * (size_t)dw_scratch(&c) * (size_t)threads;
        if (!ctx->ws || ctx->ws_size < need)
            return mge_error_set(err, MGE_ERR_INVALID, "conv2d: workspace of %zu bytes, need %zu", ctx->ws_size,
                                 need);
        dw_job j = {&c, x, w, b, y, ctx->ws};
        int64_t plane = c.OH * c.OW * c.kh * c.kw;
        cpu_parallel(ctx, c.N * c.O, plane >= 4096 ? 1 : 4096 / (plane ? plane : 1), dw_task, &j);
        return MGE_OK;
    }
    const int64_t P = c.OH * c.OW, K = c.Cg * c.kh * c.kw;
    if (!blas_fits(c.Og, P, K))
        return cpu_fallback(ctx, n, in, out, err);
    /* Always prefilled (bias or zeros) with beta = 1: OpenBLAS's own beta = 0
     * pass over C is slower than a plain fill (up to a quarter of the sgemm
     * time on the small-K 1x1 convs of mobilenet). */
    const float beta = 1.0f;
    prefill_bias(ctx, y, b, c.N, c.O, P);
    int direct = conv_is_1x1(&c);
    if (!direct && ctx->ws_size < sizeof(float) * (size_t)(K * P))
        return mge_error_set(err, MGE_ERR_INVALID, "conv2d: workspace of %zu bytes, need %zu", ctx->ws_size,
                             sizeof(float) * (size_t)(K * P));
    for (int64_t img = 0; img < c.N; img++)
        for (int64_t g = 0; g < c.G; g++) {
            const float *xg = x + (img * c.C + g * c.Cg) * c.H * c.W;
            const float *src = xg;
            if (!direct) {
                col_job j = {&c, xg, ctx->ws};
                cpu_parallel(ctx, K, P >= 4096 ? 1 : 4096 / P, col_rows, &j);
                src = ctx->ws;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)c.Og, (blasint)P, (blasint)K, 1.0f,
                        w + g * c.Og * K, (blasint)K, src, (blasint)P, beta, y + (img * c.O + g * c.Og) * P,
                        (blasint)P);
        }
    return MGE_OK;
}

/* ---------------------------------------------------------------- linear */

static mge_status cpu_linear(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                             mge_error *err)
{
    const mge_tensor *x = in[0], *w = in[1];
    const float *b = n->nin > 2 && in[2] ? in[2]->data : NULL;
    int64_t O = w->dims[0], K = w->dims[1];
    int64_t M = K ? mge_tensor_numel(x) / K : 0;
    if (M == 0 || O == 0)
        return MGE_OK;
    if (!blas_fits(M, O, K))
        return cpu_fallback(ctx, n, in, out, err);
    float *y = out[0]->data;
    const float beta = 1.0f;   /* prefilled, see cpu_conv2d */
    if (b)
        prefill_bias(ctx, y, b, M, O, 1);
    else
        memset(y, 0, sizeof(float) * (size_t)(M * O));
    if (K == 0)
        return MGE_OK;
    const float *xd = x->data;
    if (M <= 4) {
        /* A few rows (batch-1 classifier heads): sgemv streams the weight
         * once per row, while sgemm would first pack all of it. */
        for (int64_t m = 0; m < M; m++)
            cblas_sgemv(CblasRowMajor, CblasNoTrans, (blasint)O, (blasint)K, 1.0f, w->data, (blasint)K, xd + m * K, 1,
                        beta, y + m * O, 1);
        return MGE_OK;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)M, (blasint)O, (blasint)K, 1.0f, xd, (blasint)K,
                w->data, (blasint)K, beta, y, (blasint)O);
    return MGE_OK;
}

/* ---------------------------------------------------------------- matmul */

static mge_status cpu_matmul(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                             mge_error *err)
{
    const mge_tensor *a = in[0], *bt = in[1], *y = out[0];
    if (a->ndim < 2 || bt->ndim < 2 || y->ndim < 2)
        return cpu_fallback(ctx, n, in, out, err);
    int ta = (int)mge_node_int(n, MGE_KEY_transpose_a, 0), tb = (int)mge_node_int(n, MGE_KEY_transpose_b, 0);
    int64_t M = y->dims[y->ndim - 2], N = y->dims[y->ndim - 1];
    int64_t K = ta ? a->dims[a->ndim - 2] : a->dims[a->ndim - 1];
    int64_t lda = a->dims[a->ndim - 1], ldb = bt->dims[bt->ndim - 1];
    int nb = y->ndim - 2;
    int64_t batch = 1;
    for (int i = 0; i < nb; i++)
        batch *= y->dims[i];
    if (batch == 0 || M == 0 || N == 0)
        return MGE_OK;
    if (!blas_fits(batch * M, N, K) || !blas_fits(lda, ldb, 0))
        return cpu_fallback(ctx, n, in, out, err);
    float *yd = y->data;
    memset(yd, 0, sizeof(float) * (size_t)(batch * M * N));   /* beta = 1 below, see cpu_conv2d */
    if (K == 0)
        return MGE_OK;
    int64_t bbatch = 1;
    for (int i = 0; i < bt->ndim - 2; i++)
        bbatch *= bt->dims[i];
    const float *ad = a->data, *bd = bt->data;
    /* b shared by every batch and a contiguous rows: one tall sgemm. */
    if (bbatch == 1 && !ta && mge_tensor_numel(a) == batch * M * K) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (blasint)(batch * M), (blasint)N,
                    (blasint)K, 1.0f, ad, (blasint)lda, bd, (blasint)ldb, 1.0f, yd, (blasint)N);
        return MGE_OK;
    }
    /* Per batch index: broadcast offsets of a and b (dims aligned at the right). */
    int64_t sa[MGE_MAX_DIMS] = {0}, sb[MGE_MAX_DIMS] = {0};
    int64_t st = M * K;
    for (int i = a->ndim - 3; i >= 0; i--) {
        int yi = i + (nb - (a->ndim - 2));
        sa[yi] = a->dims[i] == 1 ? 0 : st;
        st *= a->dims[i];
    }
    st = K * N;
    for (int i = bt->ndim - 3; i >= 0; i--) {
        int yi = i + (nb - (bt->ndim - 2));
        sb[yi] = bt->dims[i] == 1 ? 0 : st;
        st *= bt->dims[i];
    }
    int64_t idx[MGE_MAX_DIMS] = {0};
    for (int64_t t = 0; t < batch; t++) {
        int64_t oa = 0, ob = 0;
        for (int i = 0; i < nb; i++)
            oa += idx[i] * sa[i], ob += idx[i] * sb[i];
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (blasint)M,
                    (blasint)N, (blasint)K, 1.0f, ad + oa, (blasint)lda, bd + ob, (blasint)ldb, 1.0f,
                    yd + t * M * N, (blasint)N);
        for (int i = nb - 1; i >= 0; i--) {
            if (++idx[i] < y->dims[i])
                break;
            idx[i] = 0;
        }
    }
    return MGE_OK;
}

void mge_cpu_register_gemm(mge_backend *b)
{
    cpu_isa_avx2();   /* decided once, before any kernel runs on pool threads */
    b->k[MGE_OP_CONV2D][MGE_F32] = (mge_kernel){cpu_conv2d, conv_ws};
    b->k[MGE_OP_LINEAR][MGE_F32] = (mge_kernel){cpu_linear, cpu_ref_ws};
    b->k[MGE_OP_MATMUL][MGE_F32] = (mge_kernel){cpu_matmul, cpu_ref_ws};
}
