/* cpu_pool.c — maxpool2d, avgpool2d and global_avgpool (f32, NCHW),
 * parallel over the N*C planes.
 *
 * The windowed pools are separable: a max (sum) over a kh x kw window is
 * the max (sum) over kw columns of the max (sum) over kh rows. So each
 * output row first folds the window's input rows into one row buffer
 * (rows outside the input are skipped, not padded: only the row range is
 * tested, never an element), whose pw columns before and after the input
 * hold -inf (max) or 0 (average); then folds the kw columns of that buffer
 * into the output row: contiguous at stride 1, on its even/odd halves at
 * stride 2, strided otherwise. Every inner loop is branch-free and
 * contiguous, so GCC vectorizes it; it is compiled for AVX-512, AVX2 and
 * the baseline ISA and picked by mge_cpu_isa().
 * Semantics are PyTorch's (and kernels/ref's): max ignores padding, and a
 * window with any NaN gives NaN (which NaN, when several, is not
 * specified); a window with no input position gives -inf. Average divides
 * by the window clipped to input+pad (count_include_pad) or to the input,
 * and gives NaN for an empty window. The sum is over rows first, so it
 * rounds differently from ref's (double) sum, well within 1e-5. */
#include "cpu.h"

#include <math.h>

typedef cpu_pool_geom pool_geom;


static void pool_geometry(const mge_node *n, const mge_tensor *x, const mge_tensor *y, pool_geom *g)
{
    cpu_pool_geometry(n, x, y, n->op == MGE_OP_MAXPOOL2D, g);
}

/* Floats of per-thread scratch: the row buffer (Wp), its even/odd halves
 * (2 * ceil(Wp/2)) and the column divisors of average pooling (OW). */
static int64_t pool_scratch(const pool_geom *g)
{
    return g->Wp + 2 * ((g->Wp + 1) / 2) + g->OW + 16;
}

/* acc op v: sum, or max where NaN wins (as ref and PyTorch). */
#define POOL_ACC(acc, v) ((avg) ? (acc) + (v) : ((v) > (acc) || (v) != (v) ? (v) : (acc)))

/* mid[w] = the K rows r[0..K) folded, one loop (K constant where inlined). */
static inline __attribute__((always_inline)) CPU_BASE void pool_vfold(const float *const *r, float *restrict mid,
                                                                      int64_t W, int K, int avg)
{
    const float *restrict a = r[0], *restrict b = r[1], *restrict c = r[K > 2 ? 2 : 1];
    for (int64_t w = 0; w < W; w++) {
        float acc = POOL_ACC(a[w], b[w]);
        if (K > 2)
            acc = POOL_ACC(acc, c[w]);
        mid[w] = acc;
    }
}

/* yr[ow] = row[ow*S .. ow*S + K) folded, one loop (K, S constant where
 * inlined; at S = 2 GCC de-interleaves with permutes). */
static inline __attribute__((always_inline)) CPU_BASE void pool_hfold(const float *restrict row, float *restrict yr,
                                                                      int64_t OW, int K, int S, int avg)
{
    for (int64_t ow = 0; ow < OW; ow++) {
        const float *restrict q = row + ow * S;
        float acc = POOL_ACC(q[0], q[1]);
        if (K > 2)
            acc = POOL_ACC(acc, q[2]);
        yr[ow] = acc;
    }
}

/* The calls above with constant K, S and avg: each one branch-free loop. */
#define POOL_VFOLD(K)                          \
    do {                                       \
        if (avg)                               \
            pool_vfold(rr, mid, W, K, 1);      \
        else                                   \
            pool_vfold(rr, mid, W, K, 0);      \
    } while (0)
#define POOL_HFOLD(K, S)                       \
    do {                                       \
        if (avg)                               \
            pool_hfold(row, yr, OW, K, S, 1);  \
        else                                   \
            pool_hfold(row, yr, OW, K, S, 0);  \
    } while (0)

/* Planes [p0, p1). avg: 0 max, 1 average. buf: pool_scratch floats. */
CPU_MULTI3(pool_planes,
           (const pool_geom *g, int avg, const float *restrict x, float *restrict y, int64_t p0, int64_t p1,
            float *restrict buf),
           (g, avg, x, y, p0, p1, buf), {
               const int64_t H = g->H, W = g->W, OH = g->OH, OW = g->OW, Wp = g->Wp, ph = g->ph, pw = g->pw;
               const int64_t kh = g->kh, kw = g->kw, sh = g->sh, sw = g->sw, dh = g->dh, dw = g->dw;
               const int64_t We = (Wp + 1) / 2;
               const float padv = avg ? 0.0f : -__builtin_inff();
               float *restrict row = buf, *restrict ev = buf + Wp, *restrict od = ev + We, *restrict cdiv = od + We;
               /* the padding columns of the row buffer never change */
               for (int64_t w = 0; w < pw; w++)
                   row[w] = padv;
               for (int64_t w = pw + W; w < Wp; w++)
                   row[w] = padv;
               if (Wp % 2)
                   od[We - 1] = padv;
               float *restrict mid = row + pw;
               if (avg)
                   for (int64_t ow = 0; ow < OW; ow++) {
                       /* columns of the window within input+pad, or within the input */
                       int64_t w0 = ow * sw - pw, w1 = w0 + kw;
                       if (!g->incl && w0 < 0)
                           w0 = 0;
                       if (w1 > W + (g->incl ? pw : 0))
                           w1 = W + (g->incl ? pw : 0);
                       cdiv[ow] = w1 > w0 ? (float)(w1 - w0) : 0.0f;
                   }
               for (int64_t p = p0; p < p1; p++) {
                   const float *restrict xp = x + p * H * W;
                   float *restrict yp = y + p * OH * OW;
                   for (int64_t oh = 0; oh < OH; oh++) {
                       float *restrict yr = yp + oh * OW;
                       const int64_t h0 = oh * sh - ph;
                       /* fold the window's input rows into mid */
                       if ((kh == 2 || kh == 3) && h0 >= 0 && h0 + (kh - 1) * dh < H) {
                           const float *rr[3] = {xp + h0 * W, xp + (h0 + dh) * W, xp + (h0 + (kh - 1) * dh) * W};
                           if (kh == 2)
                               POOL_VFOLD(2);
                           else
                               POOL_VFOLD(3);
                       } else {
                           int nr = 0;
                           for (int64_t i = 0; i < kh; i++) {
                               const int64_t ih = h0 + i * dh;
                               if (ih < 0 || ih >= H)
                                   continue;
                               const float *restrict xr = xp + ih * W;
                               if (nr++ == 0)
                                   for (int64_t w = 0; w < W; w++)
                                       mid[w] = xr[w];
                               else
                                   for (int64_t w = 0; w < W; w++)
                                       mid[w] = POOL_ACC(mid[w], xr[w]);
                           }
                           if (nr == 0)
                               for (int64_t w = 0; w < W; w++)
                                   mid[w] = padv;
                       }
                       /* fold the window's columns of the row buffer into yr */
                       if ((kw == 2 || kw == 3) && (sw == 1 || sw == 2) && dw == 1) {
                           if (kw == 2 && sw == 1)
                               POOL_HFOLD(2, 1);
                           else if (kw == 2)
                               POOL_HFOLD(2, 2);
                           else if (sw == 1)
                               POOL_HFOLD(3, 1);
                           else
                               POOL_HFOLD(3, 2);
                       } else if (sw == 1) {
                           for (int64_t ow = 0; ow < OW; ow++)
                               yr[ow] = row[ow];
                           for (int64_t j = 1; j < kw; j++) {
                               const float *restrict src = row + j * dw;
                               for (int64_t ow = 0; ow < OW; ow++)
                                   yr[ow] = POOL_ACC(yr[ow], src[ow]);
                           }
                       } else if (sw == 2) {
                           /* column 2*ow + t is ev[ow + t/2] for even t, od[ow + t/2] for odd t */
                           for (int64_t k = 0; k < Wp / 2; k++) {
                               ev[k] = row[2 * k];
                               od[k] = row[2 * k + 1];
                           }
                           if (Wp % 2)
                               ev[We - 1] = row[Wp - 1];
                           for (int64_t ow = 0; ow < OW; ow++)
                               yr[ow] = ev[ow];
                           for (int64_t j = 1; j < kw; j++) {
                               const int64_t t = j * dw;
                               const float *restrict src = (t % 2 ? od : ev) + t / 2;
                               for (int64_t ow = 0; ow < OW; ow++)
                                   yr[ow] = POOL_ACC(yr[ow], src[ow]);
                           }
                       } else {
                           for (int64_t ow = 0; ow < OW; ow++)
                               yr[ow] = row[ow * sw];
                           for (int64_t j = 1; j < kw; j++) {
                               const float *restrict src = row + j * dw;
                               for (int64_t ow = 0; ow < OW; ow++)
                                   yr[ow] = POOL_ACC(yr[ow], src[ow * sw]);
                           }
                       }
                       if (avg) {
                           /* rows of the window within input+pad, or within the input; an
                            * empty window sums to exactly 0 and 0/0 is the NaN wanted */
                           int64_t r0 = h0, r1 = h0 + kh;
                           if (!g->incl && r0 < 0)
                               r0 = 0;
                           if (r1 > H + (g->incl ? ph : 0))
                               r1 = H + (g->incl ? ph : 0);
                           const float rdiv = r1 > r0 ? (float)(r1 - r0) : 0.0f;
                           for (int64_t ow = 0; ow < OW; ow++)
                               yr[ow] = yr[ow] / (rdiv * cdiv[ow]);
                       }
                   }
               }
           })

/* 2x2 max pooling at stride 2 without padding, 16 outputs at a time on
 * AVX-512: two rows' pairs of vectors, their max, then the max of even and
 * odd lanes. The generic loops above spent most of their time in scalar
 * loop tails on short rows (LeNet's 28 and 14 columns: 1.2 ms for 64x32
 * planes of 28x28, against about 0.25 ms here). */
static int pool_max2(const pool_geom *g, int avg)
{
    return !avg && g->kh == 2 && g->kw == 2 && g->sh == 2 && g->sw == 2 && g->ph == 0 && g->pw == 0 && g->dh == 1 &&
           g->dw == 1 && 2 * g->OH <= g->H && 2 * g->OW <= g->W && mge_cpu_isa() >= MGE_ISA_AVX512;
}

#if CPU_X86 && defined(__GNUC__)
#include <immintrin.h>

/* max(a, b) where a NaN in either wins (vmaxps alone returns b when either is NaN) */
static inline __attribute__((always_inline, target("avx512f"))) __m512 max2_nan(__m512 a, __m512 b)
{
    return _mm512_mask_mov_ps(_mm512_max_ps(a, b), _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), a);
}

static inline __attribute__((always_inline)) __mmask16 max2_m(int64_t k)
{
    return k >= 16 ? (__mmask16)0xFFFF : k <= 0 ? (__mmask16)0 : (__mmask16)((1u << k) - 1);
}

__attribute__((target("avx512f"))) static void pool_max2_planes(const pool_geom *g, const float *x, float *y,
                                                                int64_t p0, int64_t p1)
{
    const int64_t H = g->H, W = g->W, OH = g->OH, OW = g->OW;
    const __m512i ev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i od = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    for (int64_t p = p0; p < p1; p++)
        for (int64_t oh = 0; oh < OH; oh++) {
            const float *a = x + p * H * W + 2 * oh * W, *b = a + W;
            float *yr = y + (p * OH + oh) * OW;
            for (int64_t ow = 0; ow < OW; ow += 16) {
                int64_t in = 2 * (OW - ow);   /* inputs left from column 2*ow */
                __mmask16 m0 = max2_m(in), m1 = max2_m(in - 16);
                __m512 v0 = max2_nan(_mm512_maskz_loadu_ps(m0, a + 2 * ow), _mm512_maskz_loadu_ps(m0, b + 2 * ow));
                __m512 v1 = max2_nan(_mm512_maskz_loadu_ps(m1, a + 2 * ow + 16),
                                     _mm512_maskz_loadu_ps(m1, b + 2 * ow + 16));
                __m512 r = max2_nan(_mm512_permutex2var_ps(v0, ev, v1), _mm512_permutex2var_ps(v0, od, v1));
                _mm512_mask_storeu_ps(yr + ow, max2_m(OW - ow), r);
            }
        }
}
#else
static void pool_max2_planes(const pool_geom *g, const float *x, float *y, int64_t p0, int64_t p1)
{
    (void)g, (void)x, (void)y, (void)p0, (void)p1;   /* pool_max2 is never true here */
}
#endif

typedef struct pool_job {
    const pool_geom *g;
    int avg, max2;
    const float *x;
    float *y, *ws;
} pool_job;

static void pool_task(void *a, int64_t p0, int64_t p1, int thread)
{
    const pool_job *j = a;
    if (j->max2) {
        pool_max2_planes(j->g, j->x, j->y, p0, p1);
        CPU_VZEROUPPER();
    } else
        pool_planes(j->g, j->avg, j->x, j->y, p0, p1, j->ws + thread * pool_scratch(j->g));
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
    int threads = cpu_threads(ctx);
    size_t need = sizeof(float) * (size_t)pool_scratch(&g) * (size_t)threads;
    if (!ctx->ws || ctx->ws_size < need)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: workspace of %zu bytes, need %zu", mge_kctx_opname(ctx, n),
                             ctx->ws_size, need);
    int avg = n->op == MGE_OP_AVGPOOL2D;
    pool_job j = {&g, avg, pool_max2(&g, avg), x->data, y->data, ctx->ws};
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
    b->k[MGE_OP_MAXPOOL2D][MGE_F32] = (mge_kernel){.run = cpu_pool2d, .ws = pool_ws};
    b->k[MGE_OP_AVGPOOL2D][MGE_F32] = (mge_kernel){.run = cpu_pool2d, .ws = pool_ws};
    b->k[MGE_OP_GLOBAL_AVGPOOL][MGE_F32] = (mge_kernel){.run = cpu_global_avgpool, .ws = NULL};
}
