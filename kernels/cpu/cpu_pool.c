/* cpu_pool.c — maxpool2d, avgpool2d and global_avgpool (f32, NCHW),
 * parallel over the N*C planes.
 *
 * The windowed pools work row by row like the depthwise conv: for each
 * output row, every tap of the window is folded into the row with a
 * contiguous (or fixed-stride) inner loop over the output columns whose
 * input column is real, so the loops vectorize and padding costs no tests.
 * Semantics are PyTorch's (and kernels/ref's): max ignores padding and lets
 * NaN win; average divides by the window clipped to input+pad
 * (count_include_pad) or to the input. */
#include "cpu.h"

#include <math.h>

typedef struct pool_geom {
    int64_t H, W, OH, OW, kh, kw, sh, sw, ph, pw, dh, dw;
    int incl;
} pool_geom;

static void pool_geometry(const mge_node *n, const mge_tensor *x, const mge_tensor *y, pool_geom *g)
{
    g->H = x->dims[2], g->W = x->dims[3], g->OH = y->dims[2], g->OW = y->dims[3];
    g->kh = mge_node_ints(n, MGE_KEY_kernel, 0, 1), g->kw = mge_node_ints(n, MGE_KEY_kernel, 1, 1);
    g->sh = mge_node_ints(n, MGE_KEY_stride, 0, g->kh), g->sw = mge_node_ints(n, MGE_KEY_stride, 1, g->kw);
    g->ph = mge_node_ints(n, MGE_KEY_pad, 0, 0), g->pw = mge_node_ints(n, MGE_KEY_pad, 1, 0);
    int dil = n->op == MGE_OP_MAXPOOL2D;
    g->dh = dil ? mge_node_ints(n, MGE_KEY_dilation, 0, 1) : 1;
    g->dw = dil ? mge_node_ints(n, MGE_KEY_dilation, 1, 1) : 1;
    g->incl = (int)mge_node_int(n, MGE_KEY_count_include_pad, 1);
}

/* One output plane. avg: 0 max, 1 average. */
CPU_MULTI(pool_plane, (const pool_geom *g, int avg, const float *restrict x, float *restrict y),
          (g, avg, x, y), {
              const int64_t OW = g->OW, sw = g->sw;
              for (int64_t oh = 0; oh < g->OH; oh++) {
                  float *restrict yr = y + oh * OW;
                  const float init = avg ? 0.0f : -__builtin_inff();
                  for (int64_t ow = 0; ow < OW; ow++)
                      yr[ow] = init;
                  for (int64_t i = 0; i < g->kh; i++) {
                      int64_t ih = oh * g->sh - g->ph + i * g->dh;
                      if (ih < 0 || ih >= g->H)
                          continue;
                      for (int64_t j = 0; j < g->kw; j++) {
                          int64_t lo, hi;
                          cpu_valid_range(OW, g->W, sw, g->pw, j * g->dw, &lo, &hi);
                          const float *xs = x + ih * g->W + j * g->dw - g->pw;
                          if (avg) {
                              if (sw == 1)
                                  for (int64_t ow = lo; ow < hi; ow++)
                                      yr[ow] += xs[ow];
                              else
                                  for (int64_t ow = lo; ow < hi; ow++)
                                      yr[ow] += xs[ow * sw];
                          } else if (sw == 1) {
                              for (int64_t ow = lo; ow < hi; ow++) {
                                  float v = xs[ow], m = yr[ow];
                                  yr[ow] = v > m || v != v ? v : m;
                              }
                          } else if (sw == 2) {
                              for (int64_t ow = lo; ow < hi; ow++) {
                                  float v = xs[2 * ow], m = yr[ow];
                                  yr[ow] = v > m || v != v ? v : m;
                              }
                          } else {
                              for (int64_t ow = lo; ow < hi; ow++) {
                                  float v = xs[ow * sw], m = yr[ow];
                                  yr[ow] = v > m || v != v ? v : m;
                              }
                          }
                      }
                  }
                  if (!avg)
                      continue;
                  /* divisor: the window clipped to input+pad, or to the input */
                  int64_t h0 = oh * g->sh - g->ph, h1 = h0 + g->kh;
                  if (h1 > g->H + g->ph)
                      h1 = g->H + g->ph;
                  int64_t hp = h1 - h0;
                  if (h0 < 0)
                      h0 = 0;
                  if (h1 > g->H)
                      h1 = g->H;
                  int64_t hc = h1 > h0 ? h1 - h0 : 0;
                  for (int64_t ow = 0; ow < OW; ow++) {
                      int64_t w0 = ow * sw - g->pw, w1 = w0 + g->kw;
                      if (w1 > g->W + g->pw)
                          w1 = g->W + g->pw;
                      int64_t wp = w1 - w0;
                      if (w0 < 0)
                          w0 = 0;
                      if (w1 > g->W)
                          w1 = g->W;
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
    float *y;
} pool_job;

static void pool_task(void *a, int64_t p0, int64_t p1, int thread)
{
    const pool_job *j = a;
    const pool_geom *g = j->g;
    for (int64_t p = p0; p < p1; p++)
        pool_plane(g, j->avg, j->x + p * g->H * g->W, j->y + p * g->OH * g->OW);
}

static mge_status cpu_pool2d(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                             mge_error *err)
{
    const mge_tensor *x = in[0], *y = out[0];
    pool_geom g;
    pool_geometry(n, x, y, &g);
    pool_job j = {&g, n->op == MGE_OP_AVGPOOL2D, x->data, y->data};
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
    b->k[MGE_OP_MAXPOOL2D][MGE_F32] = (mge_kernel){cpu_pool2d, NULL};
    b->k[MGE_OP_AVGPOOL2D][MGE_F32] = (mge_kernel){cpu_pool2d, NULL};
    b->k[MGE_OP_GLOBAL_AVGPOOL][MGE_F32] = (mge_kernel){cpu_global_avgpool, NULL};
}
