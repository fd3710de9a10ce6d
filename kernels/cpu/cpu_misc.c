/* cpu_misc.c — layernorm, softmax and log_softmax (f32), parallel over the
 * pool (batchnorm is cpu_grad_norm.c's). Sums use 8 partial accumulators
 * so the loops vectorize without reassociation flags. The softmax loops
 * are compiled for AVX-512, AVX2 and the baseline ISA (mge_cpu_isa()). */
#include "cpu.h"

#include <math.h>

/* ---------------------------------------------------------------- layernorm */

/* One row: mean, biased variance (two passes), then affine. */
CPU_MULTI(ln_row, (const float *x, float *y, const float *w, const float *b, int64_t D, float eps),
          (x, y, w, b, D, eps), {
              float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
              int64_t i = 0;
              for (; i + 8 <= D; i += 8)
                  for (int k = 0; k < 8; k++)
                      acc[k] += x[i + k];
              float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
              for (; i < D; i++)
                  s += x[i];
              const float mean = s / (float)D;
              float sq[8] = {0, 0, 0, 0, 0, 0, 0, 0};
              for (i = 0; i + 8 <= D; i += 8)
                  for (int k = 0; k < 8; k++) {
                      float d = x[i + k] - mean;
                      sq[k] += d * d;
                  }
              float v = ((sq[0] + sq[4]) + (sq[1] + sq[5])) + ((sq[2] + sq[6]) + (sq[3] + sq[7]));
              for (; i < D; i++)
                  v += (x[i] - mean) * (x[i] - mean);
              const float inv = 1.0f / sqrtf(v / (float)D + eps);
              for (i = 0; i < D; i++)
                  y[i] = (x[i] - mean) * inv * w[i] + b[i];
          })

typedef struct ln_job {
    const float *x, *w, *b;
    float *y;
    int64_t D;
    float eps;
} ln_job;

static void ln_task(void *a, int64_t r0, int64_t r1, int thread)
{
    const ln_job *j = a;
    for (int64_t r = r0; r < r1; r++)
        ln_row(j->x + r * j->D, j->y + r * j->D, j->w, j->b, j->D, j->eps);
}

static mge_status cpu_layernorm(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *x = in[0];
    int ax = mge_axis(mge_node_ints(n, MGE_KEY_axis, 0, -1), x->ndim);
    if (ax < 0)
        return cpu_fallback(ctx, n, in, out, err);
    int64_t rows = 1, D = 1;
    for (int i = 0; i < ax; i++)
        rows *= x->dims[i];
    for (int i = ax; i < x->ndim; i++)
        D *= x->dims[i];
    if (D == 0)
        return MGE_OK;
    ln_job j = {x->data, in[1]->data, in[2]->data, out[0]->data, D, (float)mge_node_float(n, MGE_KEY_eps, 1e-5)};
    cpu_parallel(ctx, rows, D >= CPU_GRAIN / 4 ? 1 : CPU_GRAIN / 4 / D, ln_task, &j);
    return MGE_OK;
}

/* ---------------------------------------------------------------- softmax */


/* 8 floats in GCC's/clang's vector extension: the reductions below are
 * written on it because GCC does not vectorize a max reduction written
 * with a select, or a sum into an 8-float array (it spilled it to the
 * stack). At the baseline ISA the compiler splits each into two SSE
 * operations. */
typedef float sm_v8 __attribute__((vector_size(32)));
typedef int32_t sm_i8 __attribute__((vector_size(32)));

/* v = 8 floats at p (unaligned); a macro, as a function returning a
 * vector would change the ABI between the ISA variants. */
#define SM_LOAD(v, p) memcpy(&(v), (p), sizeof(v))

/* Rows of len contiguous values (softmax over the last axis). As ref: the
 * max is subtracted first and all -inf rows use 0 as max. The max skips
 * NaN, unlike ref's, but a NaN makes the row's sum NaN (cpu_expf keeps
 * NaN), so the whole row is NaN all the same. Three passes: the max,
 * exp(x - max) into y, then the sum of y and the scale (softmax) or
 * x - max - log(sum) (log_softmax). The sum's order is fixed by len alone, so a row's result
 * does not depend on the thread count. */
CPU_MULTI3(sm_rows, (const float *restrict x, float *restrict y, int64_t rows, int64_t len, int logsm),
          (x, y, rows, len, logsm), {
              for (int64_t r = 0; r < rows; r++) {
                  const float *restrict xr = x + r * len;
                  float *restrict yr = y + r * len;
                  const sm_v8 ninf = {-__builtin_inff(), -__builtin_inff(), -__builtin_inff(), -__builtin_inff(),
                                      -__builtin_inff(), -__builtin_inff(), -__builtin_inff(), -__builtin_inff()};
                  sm_v8 vm = ninf;
                  int64_t i = 0;
                  for (; i + 8 <= len; i += 8) {
                      sm_v8 v;
                      SM_LOAD(v, xr + i);
                      sm_i8 gt = v > vm;
                      vm = (sm_v8)(((sm_i8)v & gt) | ((sm_i8)vm & ~gt));
                  }
                  float m = -__builtin_inff();
                  for (int k = 0; k < 8; k++)
                      m = vm[k] > m ? vm[k] : m;
                  for (; i < len; i++)
                      m = xr[i] > m ? xr[i] : m;
                  if (m == -__builtin_inff())
                      m = 0.0f;
                  for (i = 0; i < len; i++)
                      yr[i] = cpu_expf(xr[i] - m);
                  sm_v8 acc = {0, 0, 0, 0, 0, 0, 0, 0};
                  for (i = 0; i + 8 <= len; i += 8) {
                      sm_v8 v;
                      SM_LOAD(v, yr + i);
                      acc += v;
                  }
                  float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
                  for (; i < len; i++)
                      s += yr[i];
                  if (logsm) {
                      /* (x - m) - log(s), not x - (m + log(s)): m + log(s) rounds at the
                       * scale of m (1000 + log 2 keeps only 4 decimals) */
                      const float ls = logf(s);
                      for (i = 0; i < len; i++)
                          yr[i] = (xr[i] - m) - ls;
                  } else {
                      const float inv = 1.0f / s;
                      for (i = 0; i < len; i++)
                          yr[i] *= inv;
                  }
              }
          })

/* One [len, inner] block (softmax over a middle axis): per column, with
 * column vectors mx and sum from the workspace. */
CPU_MULTI3(sm_block, (const float *x, float *y, int64_t len, int64_t inner, int logsm, float *mx, float *sum),
          (x, y, len, inner, logsm, mx, sum), {
              for (int64_t i = 0; i < inner; i++) {
                  mx[i] = -__builtin_inff();
                  sum[i] = 0.0f;
              }
              for (int64_t j = 0; j < len; j++)
                  for (int64_t i = 0; i < inner; i++) {
                      float v = x[j * inner + i];
                      mx[i] = v > mx[i] || v != v ? v : mx[i];
                  }
              for (int64_t i = 0; i < inner; i++)
                  mx[i] = mx[i] == -__builtin_inff() ? 0.0f : mx[i];
              for (int64_t j = 0; j < len; j++)
                  for (int64_t i = 0; i < inner; i++) {
                      float e = cpu_expf(x[j * inner + i] - mx[i]);
                      if (!logsm)
                          y[j * inner + i] = e;
                      sum[i] += e;
                  }
              if (logsm) {
                  for (int64_t i = 0; i < inner; i++)
                      sum[i] = logf(sum[i]);   /* (x - m) - log(s), as sm_rows */
                  for (int64_t j = 0; j < len; j++)
                      for (int64_t i = 0; i < inner; i++)
                          y[j * inner + i] = (x[j * inner + i] - mx[i]) - sum[i];
              } else {
                  for (int64_t i = 0; i < inner; i++)
                      sum[i] = 1.0f / sum[i];
                  for (int64_t j = 0; j < len; j++)
                      for (int64_t i = 0; i < inner; i++)
                          y[j * inner + i] *= sum[i];
              }
          })

typedef struct sm_job {
    const float *x;
    float *y;
    int64_t len, inner;
    int logsm;
    float *ws;   /* 2 * inner floats per thread */
} sm_job;

static void sm_task(void *a, int64_t r0, int64_t r1, int thread)
{
    const sm_job *j = a;
    if (j->inner == 1) {
        sm_rows(j->x + r0 * j->len, j->y + r0 * j->len, r1 - r0, j->len, j->logsm);
        return;
    }
    float *mx = j->ws + (int64_t)thread * 2 * j->inner;
    for (int64_t r = r0; r < r1; r++) {
        int64_t off = r * j->len * j->inner;
        sm_block(j->x + off, j->y + off, j->len, j->inner, j->logsm, mx, mx + j->inner);
    }
}

static int sm_split(const mge_node *n, const mge_tensor *x, int64_t *outer, int64_t *len, int64_t *inner)
{
    int ax = mge_axis(mge_node_ints(n, MGE_KEY_axis, 0, -1), x->ndim);
    if (ax < 0)
        return 0;
    *outer = *inner = 1;
    for (int i = 0; i < ax; i++)
        *outer *= x->dims[i];
    *len = x->dims[ax];
    for (int i = ax + 1; i < x->ndim; i++)
        *inner *= x->dims[i];
    return 1;
}

static size_t sm_ws(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, int threads)
{
    int64_t outer, len, inner;
    if (!sm_split(n, in[0], &outer, &len, &inner))
        return cpu_ref_ws(n, in, out, threads);
    if (inner == 1)
        return 0;
    return sizeof(float) * 2 * (size_t)inner * (size_t)(threads < 1 ? 1 : threads);
}

static mge_status cpu_softmax(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                              mge_error *err)
{
    int64_t outer, len, inner;
    if (!sm_split(n, in[0], &outer, &len, &inner))
        return cpu_fallback(ctx, n, in, out, err);
    if (outer * len * inner == 0)
        return MGE_OK;
    int threads = cpu_threads(ctx);
    if (inner > 1 && (!ctx->ws || ctx->ws_size < sizeof(float) * 2 * (size_t)inner * (size_t)threads))
        return mge_error_set(err, MGE_ERR_INVALID, "%s: workspace of %zu bytes is too small", mge_kctx_opname(ctx, n),
                             ctx->ws_size);
    sm_job j = {in[0]->data, out[0]->data, len, inner, n->op == MGE_OP_LOG_SOFTMAX, ctx->ws};
    int64_t row = len * inner;
    cpu_parallel(ctx, outer, row >= CPU_GRAIN / 4 ? 1 : CPU_GRAIN / 4 / row, sm_task, &j);
    return MGE_OK;
}

void mge_cpu_register_misc(mge_backend *b)
{
    cpu_isa_avx2();   /* decided once, before any kernel runs on pool threads */
    b->k[MGE_OP_LAYERNORM][MGE_F32] = (mge_kernel){.run = cpu_layernorm, .ws = cpu_ref_ws};
    b->k[MGE_OP_SOFTMAX][MGE_F32] = (mge_kernel){.run = cpu_softmax, .ws = sm_ws};
    b->k[MGE_OP_LOG_SOFTMAX][MGE_F32] = (mge_kernel){.run = cpu_softmax, .ws = sm_ws};
}
