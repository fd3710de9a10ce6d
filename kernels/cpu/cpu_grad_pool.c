/* cpu_grad_pool.c — maxpool2d_grad, avgpool2d_grad and global_avgpool_grad
 * (f32, NCHW), parallel over the N*C planes. Each plane belongs to one task
 * and is summed in scan order, so the result does not depend on the thread
 * count. Semantics are kernels/ref's (PyTorch's): maxpool sends each
 * window's dy to its first maximal real element (a later NaN takes over);
 * the average pools spread dy / divisor over the window's real elements. */
#include "cpu.h"

#include <stdint.h>

typedef cpu_pool_geom pg_geom;

static void pg_geometry(const mge_node *n, const mge_tensor *dy, const mge_tensor *x, pg_geom *g)
{
    cpu_pool_geometry(n, x, dy, n->op == MGE_OP_MAXPOOL2D_GRAD, g);
}

/* Taps t in [lo, hi) of a window starting at o*s - p whose element
 * o*s - p + t*d lies in [0, len). */
static inline void tap_range(int64_t start, int64_t k, int64_t d, int64_t len, int64_t *lo, int64_t *hi)
{
    int64_t l = start < 0 ? (-start + d - 1) / d : 0;
    int64_t h = start + (k - 1) * d < len ? k : (len - 1 - start) / d + 1;
    if (start > len - 1)
        h = 0;
    if (h < l)
        h = l;
    *lo = l, *hi = h;
}

/* Interior windows of one output row, outputs [0, n) starting at xw
 * (their first tap): per output the running max m and the offset of its
 * element from the window start, tap by tap in scan order across the row
 * (so the loop over outputs vectorizes); the first maximum is kept, a
 * later NaN takes over. */
CPU_MULTI(max_row,
          (const pg_geom *g, const float *restrict xw, int64_t n, float *restrict m, int32_t *restrict off),
          (g, xw, n, m, off), {
              const int64_t kh = g->kh, kw = g->kw, sw = g->sw, W = g->W, dh = g->dh, dw = g->dw;
              for (int64_t k = 0; k < n; k++) {
                  m[k] = xw[k * sw];
                  off[k] = 0;
              }
              for (int64_t i = 0; i < kh; i++)
                  for (int64_t j = i ? 0 : 1; j < kw; j++) {
                      const int32_t t = (int32_t)(i * dh * W + j * dw);
                      const float *restrict src = xw + t;
                      if (sw == 1) {
                          for (int64_t k = 0; k < n; k++) {
                              float v = src[k];
                              int take = (v > m[k]) | (v != v);
                              m[k] = take ? v : m[k];
                              off[k] = take ? t : off[k];
                          }
                      } else {
                          for (int64_t k = 0; k < n; k++) {
                              float v = src[k * sw];
                              int take = (v > m[k]) | (v != v);
                              m[k] = take ? v : m[k];
                              off[k] = take ? t : off[k];
                          }
                      }
                  }
          })

/* 2x2 windows at stride 2 without padding (LeNet's, VGG's, ResNet-free
 * nets' usual pooling): every input element belongs to at most one window,
 * so each is written once, dy at the window's first maximum and 0 at the
 * others, with no zero fill and no scatter. Rows and columns no window
 * covers (odd sizes) are zeroed. Same tie and NaN rules as max_row. */
CPU_MULTI(max2_plane,
          (const pg_geom *g, const float *restrict dy, const float *restrict x, float *restrict dx,
           int64_t (*row16)(const float *, const float *, const float *, float *, float *, int64_t)),
          (g, dy, x, dx, row16), {
              const int64_t W = g->W, OH = g->OH, OW = g->OW;
              for (int64_t oh = 0; oh < OH; oh++) {
                  const float *restrict x0 = x + 2 * oh * W, *restrict x1 = x0 + W;
                  float *restrict d0 = dx + 2 * oh * W, *restrict d1 = d0 + W;
                  const float *restrict dyr = dy + oh * OW;
                  for (int64_t ow = row16 ? row16(x0, x1, dyr, d0, d1, OW) : 0; ow < OW; ow++) {
                      float a = x0[2 * ow], b = x0[2 * ow + 1], c = x1[2 * ow], d = x1[2 * ow + 1];
                      int k = 0;
                      float m = a;
                      int t = (b > m) | (b != b);
                      m = t ? b : m, k = t ? 1 : k;
                      t = (c > m) | (c != c);
                      m = t ? c : m, k = t ? 2 : k;
                      t = (d > m) | (d != d);
                      k = t ? 3 : k;
                      const float v = dyr[ow];
                      d0[2 * ow] = k == 0 ? v : 0.0f;
                      d0[2 * ow + 1] = k == 1 ? v : 0.0f;
                      d1[2 * ow] = k == 2 ? v : 0.0f;
                      d1[2 * ow + 1] = k == 3 ? v : 0.0f;
                  }
                  for (int64_t w = 2 * OW; w < W; w++)
                      d0[w] = d1[w] = 0.0f;
              }
              for (int64_t h = 2 * OH; h < g->H; h++)
                  for (int64_t w = 0; w < W; w++)
                      dx[h * W + w] = 0.0f;
          })

#if CPU_X86 && defined(__GNUC__)
#include <immintrin.h>
#define PG_HAS512 1
/* max2_plane's window loop 16 windows at a time on AVX-512 (GCC does not
 * vectorize the scalar loop's stride-2 loads and interleaved stores): the
 * even and odd columns of both rows are split with permutes, the first
 * maximum is picked with the same compares (a later NaN takes over), and
 * dy goes back interleaved; a row's last (or only) windows go under masks.
 * Returns the windows done (all of them). It was 17% of a LeNet training
 * step. */
__attribute__((target("avx512f"))) static int64_t max2_row_512(const float *x0, const float *x1,
                                                              const float *dyr, float *d0, float *d1, int64_t OW)
{
    const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i od = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    const __m512i il = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i ih = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    for (int64_t ow = 0; ow < OW; ow += 16) {
        /* the last windows of a row (LeNet's rows are 14 and 7 wide) under masks */
        int64_t r = OW - ow < 16 ? OW - ow : 16;
        __mmask16 mw = (__mmask16)((1u << r) - 1), ml = (__mmask16)(r >= 8 ? 0xFFFFu : (1u << (2 * r)) - 1),
                  mh = (__mmask16)(r > 8 ? (1u << (2 * r - 16)) - 1 : 0);
        __m512 r0l = _mm512_maskz_loadu_ps(ml, x0 + 2 * ow), r0h = _mm512_maskz_loadu_ps(mh, x0 + 2 * ow + 16);
        __m512 r1l = _mm512_maskz_loadu_ps(ml, x1 + 2 * ow), r1h = _mm512_maskz_loadu_ps(mh, x1 + 2 * ow + 16);
        __m512 a = _mm512_permutex2var_ps(r0l, ev, r0h), b = _mm512_permutex2var_ps(r0l, od, r0h);
        __m512 c = _mm512_permutex2var_ps(r1l, ev, r1h), d = _mm512_permutex2var_ps(r1l, od, r1h);
        __m512 m = a;
        __mmask16 t1 = _mm512_cmp_ps_mask(b, m, _CMP_GT_OQ) | _mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q);
        m = _mm512_mask_mov_ps(m, t1, b);
        __mmask16 t2 = _mm512_cmp_ps_mask(c, m, _CMP_GT_OQ) | _mm512_cmp_ps_mask(c, c, _CMP_UNORD_Q);
        m = _mm512_mask_mov_ps(m, t2, c);
        __mmask16 t3 = _mm512_cmp_ps_mask(d, m, _CMP_GT_OQ) | _mm512_cmp_ps_mask(d, d, _CMP_UNORD_Q);
        __mmask16 s3 = t3, s2 = (__mmask16)(t2 & ~t3), s1 = (__mmask16)(t1 & ~t2 & ~t3),
                  s0 = (__mmask16)~(t1 | t2 | t3);
        __m512 v = _mm512_maskz_loadu_ps(mw, dyr + ow);
        __m512 oa = _mm512_maskz_mov_ps(s0, v), ob = _mm512_maskz_mov_ps(s1, v);
        __m512 oc = _mm512_maskz_mov_ps(s2, v), odd = _mm512_maskz_mov_ps(s3, v);
        _mm512_mask_storeu_ps(d0 + 2 * ow, ml, _mm512_permutex2var_ps(oa, il, ob));
        _mm512_mask_storeu_ps(d0 + 2 * ow + 16, mh, _mm512_permutex2var_ps(oa, ih, ob));
        _mm512_mask_storeu_ps(d1 + 2 * ow, ml, _mm512_permutex2var_ps(oc, il, odd));
        _mm512_mask_storeu_ps(d1 + 2 * ow + 16, mh, _mm512_permutex2var_ps(oc, ih, odd));
    }
    return OW;
}
#else
#define PG_HAS512 0
#endif

static int is_max2(const pg_geom *g)
{
    return g->kh == 2 && g->kw == 2 && g->sh == 2 && g->sw == 2 && g->ph == 0 && g->pw == 0 && g->dh == 1 &&
           g->dw == 1 && 2 * g->OH <= g->H && 2 * g->OW <= g->W;
}

/* Floats (and int32s) of per-thread scratch of maxpool2d_grad. */
static int64_t max_scratch(const pg_geom *g)
{
    return 2 * g->OW + 16;
}

/* One plane of maxpool2d_grad. Windows inside the input go through
 * max_row; border windows take clipped scalar loops. Every window is
 * scanned row by row, left to right, keeping the first maximum, so ties go
 * where the ref kernel (and PyTorch) sends them. */
static void maxpool_grad_plane(const pg_geom *g, const float *restrict dy, const float *restrict x,
                               float *restrict dx, float *restrict scratch)
{
    const int64_t H = g->H, W = g->W, OH = g->OH, OW = g->OW, kh = g->kh, kw = g->kw;
    const int64_t sh = g->sh, sw = g->sw, dh = g->dh, dw = g->dw;
    float *m = scratch;
    int32_t *off = (int32_t *)(scratch + OW + 8);
    memset(dx, 0, sizeof(float) * (size_t)(H * W));
    /* outputs whose window columns all lie in [0, W) */
    int64_t wlo = 0, whi = 0;
    if (W - (kw - 1) * dw > 0)
        cpu_valid_range(OW, W - (kw - 1) * dw, sw, g->pw, 0, &wlo, &whi);
    for (int64_t oh = 0; oh < OH; oh++) {
        int64_t h0 = oh * sh - g->ph, ilo, ihi;
        tap_range(h0, kh, dh, H, &ilo, &ihi);
        const float *dyr = dy + oh * OW;
        int full_rows = ilo == 0 && ihi == kh;
        int64_t a = full_rows ? wlo : OW, b = full_rows ? whi : OW;
        if (a < b) {
            const float *xw = x + h0 * W + a * sw - g->pw;
            max_row(g, xw, b - a, m, off);
            float *dxw = dx + h0 * W + a * sw - g->pw;
            for (int64_t k = 0; k < b - a; k++)
                dxw[k * sw + off[k]] += dyr[a + k];
        }
        for (int64_t ow = 0; ow < OW; ow++) {
            if (ow == a && b > a) {
                ow = b - 1;
                continue;
            }
            int64_t w0 = ow * sw - g->pw, jlo, jhi;
            tap_range(w0, kw, dw, W, &jlo, &jhi);
            int64_t best = -1;
            float mv = -__builtin_inff();
            for (int64_t i = ilo; i < ihi; i++) {
                const float *xr = x + (h0 + i * dh) * W + w0;
                for (int64_t j = jlo; j < jhi; j++) {
                    float v = xr[j * dw];
                    if (best < 0 || v > mv || v != v) {
                        mv = v;
                        best = (h0 + i * dh) * W + w0 + j * dw;
                    }
                }
            }
            if (best >= 0)
                dx[best] += dyr[ow];
        }
    }
}

/* The average gradient's padded plane is g->Hp x g->Wp (no dilation). */
static int64_t avg_scratch(const pg_geom *g)
{
    return g->Hp * g->Wp + g->OW + 16;
}

/* An average window along one axis, starting at a (= o*s - p), k wide:
 * its length clipped to the input+pad (padded) and to the input (real). */
static inline CPU_BASE void avg_span(int64_t a, int64_t k, int64_t len, int64_t p, int64_t *padded, int64_t *real)
{
    int64_t b = a + k;
    if (b > len + p)
        b = len + p;
    *padded = b - a;
    a = a < 0 ? 0 : a;
    b = b > len ? len : b;
    *real = b > a ? b - a : 0;
}

/* One plane of avgpool2d_grad: each row of dy divided by its windows'
 * divisors, then added through every tap into a padded plane (contiguous
 * loops at stride 1), which is cropped into dx. */
CPU_MULTI(avgpool_grad_plane,
          (const pg_geom *g, const float *restrict dy, float *restrict dx, float *restrict pad, float *restrict q),
          (g, dy, dx, pad, q), {
              const int64_t H = g->H, W = g->W, OH = g->OH, OW = g->OW, kh = g->kh, kw = g->kw;
              const int64_t sh = g->sh, sw = g->sw, ph = g->ph, pw = g->pw;
              const int64_t Hp = g->Hp, Wp = g->Wp;
              for (int64_t k = 0; k < Hp * Wp; k++)
                  pad[k] = 0.0f;
              for (int64_t oh = 0; oh < OH; oh++) {
                  int64_t hp, hc, wp, wc;
                  avg_span(oh * sh - ph, kh, H, ph, &hp, &hc);
                  for (int64_t ow = 0; ow < OW; ow++) {
                      avg_span(ow * sw - pw, kw, W, pw, &wp, &wc);
                      int64_t div = g->incl ? hp * wp : hc * wc;
                      /* a window with no real element passes nothing on */
                      q[ow] = hc * wc > 0 ? dy[oh * OW + ow] / (float)div : 0.0f;
                  }
                  for (int64_t i = 0; i < kh; i++) {
                      float *restrict row = pad + (oh * sh + i) * Wp;
                      for (int64_t j = 0; j < kw; j++) {
                          float *restrict d = row + j;
                          if (sw == 1)
                              for (int64_t ow = 0; ow < OW; ow++)
                                  d[ow] += q[ow];
                          else
                              for (int64_t ow = 0; ow < OW; ow++)
                                  d[ow * sw] += q[ow];
                      }
                  }
              }
              for (int64_t ih = 0; ih < H; ih++)
                  memcpy(dx + ih * W, pad + (ih + ph) * Wp + pw, sizeof(float) * (size_t)W);
          })

typedef struct pg_job {
    const pg_geom *g;
    int max;
    const float *dy, *x;
    float *dx, *ws;
} pg_job;

static void pg_task(void *a, int64_t p0, int64_t p1, int thread)
{
    const pg_job *j = a;
    const pg_geom *g = j->g;
    int64_t in = g->H * g->W, on = g->OH * g->OW;
    for (int64_t p = p0; p < p1; p++) {
        if (j->max && is_max2(g))
            max2_plane(g, j->dy + p * on, j->x + p * in, j->dx + p * in,
#if PG_HAS512
                       mge_cpu_isa() >= MGE_ISA_AVX512 ? max2_row_512 : NULL);
#else
                       NULL);
#endif
        else if (j->max)
            maxpool_grad_plane(g, j->dy + p * on, j->x + p * in, j->dx + p * in,
                               j->ws + (size_t)thread * (size_t)max_scratch(g));
        else {
            float *pad = j->ws + (size_t)thread * (size_t)avg_scratch(g);
            avgpool_grad_plane(g, j->dy + p * on, j->dx + p * in, pad, pad + g->Hp * g->Wp);
        }
    }
}

static mge_status cpu_pool2d_grad(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                  mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *dy = in[0], *x = in[1];
    pg_geom g;
    pg_geometry(n, dy, x, &g);
    int mx = n->op == MGE_OP_MAXPOOL2D_GRAD;
    if (mx && g.H * g.W > INT32_MAX)   /* window offsets are int32 */
        return cpu_fallback(ctx, n, in, out, err);
    int threads = cpu_threads(ctx);
    size_t need = sizeof(float) * (size_t)(mx ? max_scratch(&g) : avg_scratch(&g)) * (size_t)threads;
    if (need && (!ctx->ws || ctx->ws_size < need))
        return mge_error_set(err, MGE_ERR_INVALID, "%s: workspace of %zu bytes, need %zu", mge_kctx_opname(ctx, n),
                             ctx->ws_size, need);
    pg_job j = {&g, mx, dy->data, x->data, out[0]->data, ctx->ws};
    int64_t work = g.H * g.W + g.OH * g.OW * g.kh * g.kw;
    cpu_parallel(ctx, x->dims[0] * x->dims[1], work >= CPU_GRAIN ? 1 : CPU_GRAIN / (work ? work : 1), pg_task, &j);
    return MGE_OK;
}

/* ---------------------------------------------------------------- global average */

typedef struct gap_job {
    const float *dy;
    float *dx;
    int64_t S;
} gap_job;

CPU_MULTI(fill_planes, (const float *restrict dy, float *restrict dx, int64_t planes, int64_t S), (dy, dx, planes, S), {
    for (int64_t p = 0; p < planes; p++) {
        const float v = dy[p] / (float)S;
        float *restrict d = dx + p * S;
        for (int64_t i = 0; i < S; i++)
            d[i] = v;
    }
})

static void gap_task(void *a, int64_t p0, int64_t p1, int thread)
{
    (void)thread;
    const gap_job *j = a;
    fill_planes(j->dy + p0, j->dx + p0 * j->S, p1 - p0, j->S);
}

static mge_status cpu_global_avgpool_grad(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                          mge_tensor *const *out, mge_error *err)
{
    (void)n, (void)err;
    const mge_tensor *x = in[1];
    int64_t S = x->dims[2] * x->dims[3];
    if (S == 0)
        return MGE_OK;
    gap_job j = {in[0]->data, out[0]->data, S};
    cpu_parallel(ctx, x->dims[0] * x->dims[1], S >= CPU_GRAIN ? 1 : CPU_GRAIN / S, gap_task, &j);
    return MGE_OK;
}

static size_t pg_ws(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, int threads)
{
    pg_geom g;
    pg_geometry(n, in[0], in[1], &g);
    int64_t per = n->op == MGE_OP_MAXPOOL2D_GRAD ? max_scratch(&g) : avg_scratch(&g);
    size_t own = sizeof(float) * (size_t)per * (size_t)(threads < 1 ? 1 : threads);
    size_t ref = cpu_ref_ws(n, in, out, threads);   /* planes too large for int32 offsets fall back */
    return own > ref ? own : ref;
}

void mge_cpu_register_grad_pool(mge_backend *b)
{
    cpu_isa_avx2();   /* decided once, before any kernel runs on pool threads */
    b->k[MGE_OP_MAXPOOL2D_GRAD][MGE_F32] = (mge_kernel){.run = cpu_pool2d_grad, .ws = pg_ws};
    b->k[MGE_OP_AVGPOOL2D_GRAD][MGE_F32] = (mge_kernel){.run = cpu_pool2d_grad, .ws = pg_ws};
    b->k[MGE_OP_GLOBAL_AVGPOOL_GRAD][MGE_F32] = (mge_kernel){.run = cpu_global_avgpool_grad, .ws = NULL};
}
