/* cpu_pool.c — maxpool2d, avgpool2d and global_avgpool (f32, NCHW),
 * parallel over the N*C planes.
 *
 * The windowed pools first copy each plane into a padded buffer (-inf for
 * max, 0 for average, whose divisor is computed apart), so no tap needs a
 * bounds test, then fold every tap of the window into the output with one
 * contiguous loop: over the whole plane at stride 1 ("wide" rows of the
 * padded width, as the depthwise conv), over each output row on even/odd
 * de-interleaved rows at stride 2, strided otherwise.
 * Semantics are PyTorch's (and kernels/ref's): max ignores padding and lets
 * NaN win; average divides by the window clipped to input+pad
 * (count_include_pad) or to the input. */
#include "cpu.h"

#include <math.h>

typedef cpu_pool_geom pool_geom;

static void pool_geometry(const mge_node *n, const mge_tensor *x, const mge_tensor *y, pool_geom *g)
{
    cpu_pool_geometry(n, x, y, n->op == MGE_OP_MAXPOOL2D, g);
}

/* Floats of per-thread scratch: the padded plane, then the wide output
 * (stride 1) or the de-interleaved plane (stride 2). */
static int64_t pool_scratch(const pool_geom *g)
{
    int64_t wide = g->OH * g->Wp, de = g->Hp * (g->Wp + 1);
    return g->Hp * g->Wp + (wide > de ? wide : de) + 16;
}

/* acc op v: sum, or max where NaN wins (as ref and PyTorch). */
#define POOL_ACC(acc, v) ((avg) ? (acc) + (v) : ((v) > (acc) || (v) != (v) ? (v) : (acc)))

/* One output plane. avg: 0 max, 1 average. */
CPU_MULTI(pool_plane,
          (const pool_geom *g, int avg, const float *restrict x, float *restrict y, float *restrict pad,
           float *restrict wide),
          (g, avg, x, y, pad, wide), {
              const int64_t H = g->H, W = g->W, OH = g->OH, OW = g->OW, Hp = g->Hp, Wp = g->Wp;
              const int64_t kh = g->kh, kw = g->kw, sh = g->sh, sw = g->sw, dh = g->dh, dw = g->dw;
              const float padv = avg ? 0.0f : -__builtin_inff();
              cpu_plane_pad(x, H, W, g->ph, g->pw, Hp, Wp, padv, pad);
              if (sh == 1 && sw == 1) {
                  const int64_t L = (OH - 1) * Wp + OW;
                  for (int64_t k = 0; k < L; k++)
                      wide[k] = pad[k];   /* tap (0, 0) */
                  for (int64_t i = 0; i < kh; i++)
                      for (int64_t j = i ? 0 : 1; j < kw; j++) {
                          const float *restrict src = pad + i * dh * Wp + j * dw;
                          for (int64_t k = 0; k < L; k++)
                              wide[k] = POOL_ACC(wide[k], src[k]);
                      }
                  for (int64_t oh = 0; oh < OH; oh++)
                      for (int64_t ow = 0; ow < OW; ow++)
                          y[oh * OW + ow] = wide[oh * Wp + ow];
              } else if (sw == 2) {
                  /* column 2*ow + t is E[ow + t/2] for even t, O[ow + t/2] for odd t */
                  const int64_t We = (Wp + 1) / 2;
                  cpu_plane_deinterleave(pad, Hp, Wp, padv, wide);
                  for (int64_t oh = 0; oh < OH; oh++) {
                      float *restrict yr = y + oh * OW;
                      const float *restrict r0 = wide + oh * sh * 2 * We;
                      for (int64_t ow = 0; ow < OW; ow++)
                          yr[ow] = r0[ow];   /* tap (0, 0) */
                      for (int64_t i = 0; i < kh; i++)
                          for (int64_t j = i ? 0 : 1; j < kw; j++) {
                              int64_t t = j * dw;
                              const float *restrict src = r0 + i * dh * 2 * We + (t % 2 ? We : 0) + t / 2;
                              for (int64_t ow = 0; ow < OW; ow++)
                                  yr[ow] = POOL_ACC(yr[ow], src[ow]);
                          }
                  }
              } else {
                  for (int64_t oh = 0; oh < OH; oh++) {
                      float *restrict yr = y + oh * OW;
                      const float *restrict r0 = pad + oh * sh * Wp;
                      for (int64_t ow = 0; ow < OW; ow++)
                          yr[ow] = r0[ow * sw];
                      for (int64_t i = 0; i < kh; i++)
                          for (int64_t j = i ? 0 : 1; j < kw; j++) {
                              const float *restrict src = r0 + i * dh * Wp + j * dw;
                              for (int64_t ow = 0; ow < OW; ow++)
                                  yr[ow] = POOL_ACC(yr[ow], src[ow * sw]);
                          }
                  }
              }
              if (!avg)
                  return;
              /* divisor: the window clipped to input+pad, or to the input */
              for (int64_t oh = 0; oh < OH; oh++) {
                  float *restrict yr = y + oh * OW;
                  int64_t h0 = oh * sh - g->ph, h1 = h0 + kh;
                  if (h1 > H + g->ph)
                      h1 = H + g->ph;
                  int64_t hp = h1 - h0;
                  if (h0 < 0)
                      h0 = 0;
                  if (h1 > H)
                      h1 = H;
                  int64_t hc = h1 > h0 ? h1 - h0 : 0;
                  for (int64_t ow = 0; ow < OW; ow++) {
                      int64_t w0 = ow * sw - g->pw, w1 = w0 + kw;
                      if (w1 > W + g->pw)
                          w1 = W + g->pw;
                      int64_t wp = w1 - w0;
                      if (w0 < 0)
                          w0 = 0;
                      if (w1 > W)
                          w1 = W;
                      int64_t wc = w1 > w0 ? w1 - w0 : 0;
                      int64_t div = g->incl ? hp * wp : hc * wc;
                      yr[ow] = div > 0 ? yr[ow] / (float)div : __builtin_nanf("");
                  }
              }
          })

typedef struct pool_job {
    const pool_geom *g;
    int avg;
    const float *x;
    float *y, *ws;
} pool_job;

static void pool_task(void *a, int64_t p0, int64_t p1, int thread)
{
    const pool_job *j = a;
    const pool_geom *g = j->g;
    float *pad = j->ws + thread * pool_scratch(g);
    for (int64_t p = p0; p < p1; p++)
        pool_plane(g, j->avg, j->x + p * g->H * g->W, j->y + p * g->OH * g->OW, pad, pad + g->Hp * g->Wp);
}

static size_t pool_ws(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, int threads)
{
    pool_geom g;
    pool_geometry(n, in[0], out[0], &g);
    return sizeof(float) * (size_t)pool_scratch(&g) * (size_t)(threads < 1 ? 1 : threads);
}

static mge_status cpu_pool2d(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                             mge_error *err)
{
    const mge_tensor *x = in[0], *y = out[0];
    pool_geom g;
    pool_geometry(n, x, y, &g);
    int threads = ctx->pool ? mge_pool_size(ctx->pool) : 1;
    size_t need = sizeof(float) * (size_t)pool_scratch(&g) * (size_t)threads;
    if (!ctx->ws || ctx->ws_size < need)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: workspace of %zu bytes, need %zu", mge_op_info(n->op)->name,
                             ctx->ws_size, need);
    pool_job j = {&g, n->op == MGE_OP_AVGPOOL2D, x->data, y->data, ctx->ws};
    int64_t work = g.OH * g.OW * g.kh * g.kw;
    cpu_parallel(ctx, x->dims[0] * x->dims[1], work >= CPU_GRAIN ? 1 : CPU_GRAIN / (work ? work : 1), pool_task, &j);
    return MGE_OK;
}

/* ---------------------------------------------------------------- global average */

/* Sum of n floats with 8 partial sums, so the loop vectorizes without
 * reassociation flags. */
CPU_MULTI(sum_planes, (const float *restrict x, float *restrict y, int64_t planes, int64_t S),
          (x, y, planes, S), {
              for (int64_t p = 0; p < planes; p++) {
                  const float *xp = x + p * S;
                  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
                  int64_t i = 0;
                  for (; i + 8 <= S; i += 8)
                      for (int k = 0; k < 8; k++)
                          acc[k] += xp[i + k];
                  float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
                  for (; i < S; i++)
                      s += xp[i];
                  y[p] = S > 0 ? s / (float)S : __builtin_nanf("");
              }
          })

typedef struct gap_job {
    const float *x;
    float *y;
    int64_t S;
} gap_job;

static void gap_task(void *a, int64_t p0, int64_t p1, int thread)
{
    const gap_job *j = a;
    sum_planes(j->x + p0 * j->S, j->y + p0, p1 - p0, j->S);
}

static mge_status cpu_global_avgpool(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                     mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *x = in[0];
    int64_t S = x->dims[2] * x->dims[3];
    gap_job j = {x->data, out[0]->data, S};
    cpu_parallel(ctx, x->dims[0] * x->dims[1], S >= CPU_GRAIN ? 1 : CPU_GRAIN / (S ? S : 1), gap_task, &j);
    return MGE_OK;
}

void mge_cpu_register_pool(mge_backend *b)
{
    cpu_isa_avx2();   /* decided once, before any kernel runs on pool threads */
    b->k[MGE_OP_MAXPOOL2D][MGE_F32] = (mge_kernel){cpu_pool2d, pool_ws};
    b->k[MGE_OP_AVGPOOL2D][MGE_F32] = (mge_kernel){cpu_pool2d, pool_ws};
    b->k[MGE_OP_GLOBAL_AVGPOOL][MGE_F32] = (mge_kernel){cpu_global_avgpool, NULL};
}
