/* cpu_quant.c — quantize, dequantize and qadd (ops.def) vectorized with
 * AVX-512 and AVX2, bit-exact with lib/quant_math.h:
 *  - quantize: x * inv in f32 (one rounding, like the scalar product),
 *    maxps(v, lo) then minps(v, hi) (maxps returns its second operand for
 *    NaN, so NaN becomes lo as in mge_q_quantize), cvtps2dq rounds to
 *    nearest even like rintf under the default rounding mode, + zero.
 *  - dequantize: (q - zero) converted exactly to f32, one multiply.
 *  - qadd: int32 lanes, (a - za) * ma + (b - zb) * mb (fits, see
 *    mge_qadd_make), the rounding shift, + y_zero, clamp.
 * Tails and the portable level use the scalar formulas themselves. Split
 * over the pool in ranges of elements.
 * Also maxpool2d, avgpool2d and global_avgpool on qs8 (the ref ones are
 * generic loops). */
#include "cpu.h"

#include "quant_math.h"

#include <string.h>

#if CPU_X86 && defined(__GNUC__)
#define QU_X86 1
#include <immintrin.h>
#if defined(__clang__)
#define QU_512 __attribute__((target("avx512f,avx512bw,avx512vl")))
#define QU_AVX2 __attribute__((target("avx2,fma")))
#else
#define QU_512 __attribute__((target("avx512f,avx512bw,avx512vl"), optimize("O3")))
#define QU_AVX2 __attribute__((target("avx2,fma"), optimize("O3")))
#endif
#else
#define QU_X86 0
#endif

/* which vector width: 2 AVX-512, 1 AVX2, 0 scalar */
static int qu_level(void)
{
#if QU_X86
    int l = mge_cpu_isa();
    return l >= MGE_ISA_AVX512 ? 2 : l >= MGE_ISA_AVX2 ? 1 : 0;
#else
    return 0;
#endif
}

typedef struct qu_job {
    const void *a, *b;
    void *y;
    float s;            /* quantize: inv; dequantize: scale */
    int32_t zero;
    mge_qadd qa;
    int32_t za, zb, yz, lo, hi;
    int level;
} qu_job;

/* ---------------------------------------------------------------- quantize */

#if QU_X86
static QU_512 int64_t quantize_512(const float *x, int8_t *y, int64_t n, float inv, int32_t zero)
{
    __m512 vi = _mm512_set1_ps(inv), lo = _mm512_set1_ps((float)(-128 - zero));
    __m512 hi = _mm512_set1_ps((float)(127 - zero));
    __m512i z = _mm512_set1_epi32(zero);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x + i), vi);
        v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
        __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(v), z);
        _mm_storeu_si128((__m128i *)(y + i), _mm512_cvtepi32_epi8(q));
    }
    return i;
}

/* 8 int32 lanes in [-128, 127] to 8 bytes (packs work per 128-bit lane) */
static QU_AVX2 inline __m128i narrow8(__m256i t)
{
    __m256i p = _mm256_permute4x64_epi64(_mm256_packs_epi32(t, t), 0x08);
    return _mm_packs_epi16(_mm256_castsi256_si128(p), _mm256_castsi256_si128(p));
}

static QU_AVX2 int64_t quantize_avx2(const float *x, int8_t *y, int64_t n, float inv, int32_t zero)
{
    __m256 vi = _mm256_set1_ps(inv), lo = _mm256_set1_ps((float)(-128 - zero));
    __m256 hi = _mm256_set1_ps((float)(127 - zero));
    __m256i z = _mm256_set1_epi32(zero);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), vi);
        v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
        _mm_storel_epi64((__m128i *)(y + i), narrow8(_mm256_add_epi32(_mm256_cvtps_epi32(v), z)));
    }
    return i;
}

static QU_512 int64_t dequantize_512(const int8_t *q, float *y, int64_t n, float s, int32_t zero)
{
    __m512 vs = _mm512_set1_ps(s);
    __m512i z = _mm512_set1_epi32(zero);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i v = _mm512_sub_epi32(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(q + i))), z);
        _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_cvtepi32_ps(v), vs));
    }
    return i;
}

static QU_AVX2 int64_t dequantize_avx2(const int8_t *q, float *y, int64_t n, float s, int32_t zero)
{
    __m256 vs = _mm256_set1_ps(s);
    __m256i z = _mm256_set1_epi32(zero);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i v = _mm256_sub_epi32(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(q + i))), z);
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_cvtepi32_ps(v), vs));
    }
    return i;
}

static QU_512 int64_t qadd_512(const int8_t *a, const int8_t *b, int8_t *y, int64_t n, const qu_job *j)
{
    __m512i za = _mm512_set1_epi32(j->za), zb = _mm512_set1_epi32(j->zb), ma = _mm512_set1_epi32(j->qa.ma),
            mb = _mm512_set1_epi32(j->qa.mb), yz = _mm512_set1_epi32(j->yz), lo = _mm512_set1_epi32(j->lo),
            hi = _mm512_set1_epi32(j->hi), one = _mm512_set1_epi32(1);
    int s = j->qa.shift;
    __m128i sa = _mm_cvtsi32_si128(s), sb = _mm_cvtsi32_si128(s ? s - 1 : 0);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i va = _mm512_sub_epi32(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(a + i))), za);
        __m512i vb = _mm512_sub_epi32(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b + i))), zb);
        __m512i t = _mm512_add_epi32(_mm512_mullo_epi32(va, ma), _mm512_mullo_epi32(vb, mb));
        if (s)
            t = _mm512_add_epi32(_mm512_sra_epi32(t, sa), _mm512_and_si512(_mm512_sra_epi32(t, sb), one));
        t = _mm512_min_epi32(_mm512_max_epi32(_mm512_add_epi32(t, yz), lo), hi);
        _mm_storeu_si128((__m128i *)(y + i), _mm512_cvtepi32_epi8(t));
    }
    return i;
}

static QU_AVX2 int64_t qadd_avx2(const int8_t *a, const int8_t *b, int8_t *y, int64_t n, const qu_job *j)
{
    __m256i za = _mm256_set1_epi32(j->za), zb = _mm256_set1_epi32(j->zb), ma = _mm256_set1_epi32(j->qa.ma),
            mb = _mm256_set1_epi32(j->qa.mb), yz = _mm256_set1_epi32(j->yz), lo = _mm256_set1_epi32(j->lo),
            hi = _mm256_set1_epi32(j->hi), one = _mm256_set1_epi32(1);
    int s = j->qa.shift;
    __m128i sa = _mm_cvtsi32_si128(s), sb = _mm_cvtsi32_si128(s ? s - 1 : 0);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i va = _mm256_sub_epi32(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(a + i))), za);
        __m256i vb = _mm256_sub_epi32(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b + i))), zb);
        __m256i t = _mm256_add_epi32(_mm256_mullo_epi32(va, ma), _mm256_mullo_epi32(vb, mb));
        if (s)
            t = _mm256_add_epi32(_mm256_sra_epi32(t, sa), _mm256_and_si256(_mm256_sra_epi32(t, sb), one));
        t = _mm256_min_epi32(_mm256_max_epi32(_mm256_add_epi32(t, yz), lo), hi);
        _mm_storel_epi64((__m128i *)(y + i), narrow8(t));
    }
    return i;
}
#endif

static void quantize_range(void *arg, int64_t b, int64_t e, int thread)
{
    const qu_job *j = arg;
    const float *x = (const float *)j->a + b;
    int8_t *y = (int8_t *)j->y + b;
    int64_t n = e - b, i = 0;
#if QU_X86
    if (j->level == 2)
        i = quantize_512(x, y, n, j->s, j->zero);
    else if (j->level == 1)
        i = quantize_avx2(x, y, n, j->s, j->zero);
#endif
    for (; i < n; i++)
        y[i] = mge_q_quantize(x[i], j->s, j->zero);
}

static void dequantize_range(void *arg, int64_t b, int64_t e, int thread)
{
    const qu_job *j = arg;
    const int8_t *q = (const int8_t *)j->a + b;
    float *y = (float *)j->y + b;
    int64_t n = e - b, i = 0;
#if QU_X86
    if (j->level == 2)
        i = dequantize_512(q, y, n, j->s, j->zero);
    else if (j->level == 1)
        i = dequantize_avx2(q, y, n, j->s, j->zero);
#endif
    for (; i < n; i++)
        y[i] = mge_q_dequantize(q[i], j->s, j->zero);
}

static void qadd_range(void *arg, int64_t b, int64_t e, int thread)
{
    const qu_job *j = arg;
    const int8_t *pa = (const int8_t *)j->a + b, *pb = (const int8_t *)j->b + b;
    int8_t *y = (int8_t *)j->y + b;
    int64_t n = e - b, i = 0;
#if QU_X86
    if (j->level == 2)
        i = qadd_512(pa, pb, y, n, j);
    else if (j->level == 1)
        i = qadd_avx2(pa, pb, y, n, j);
#endif
    for (; i < n; i++)
        y[i] = (int8_t)mge_q_clamp(mge_qadd_apply(pa[i] - j->za, pb[i] - j->zb, &j->qa) + j->yz, j->lo, j->hi);
}

static mge_status cpu_quantize(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                               mge_error *err)
{
    qu_job j = {in[0]->data, NULL, out[0]->data, 0, 0, {0, 0, 0}, 0, 0, 0, 0, 0, qu_level()};
    float scale = (float)mge_node_float(n, MGE_KEY_scale, 1);
    j.zero = (int32_t)mge_node_int(n, MGE_KEY_zero, 0);
    j.s = n->op == MGE_OP_QUANTIZE ? 1.0f / scale : scale;
    cpu_parallel(ctx, mge_tensor_numel(in[0]), CPU_GRAIN, n->op == MGE_OP_QUANTIZE ? quantize_range : dequantize_range,
                 &j);
    return MGE_OK;
}

static mge_status cpu_qadd(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                           mge_error *err)
{
    qu_job j = {in[0]->data, in[1]->data, out[0]->data, 0, 0, {0, 0, 0}, 0, 0, 0, 0, 0, qu_level()};
    double xs = mge_node_float(n, MGE_KEY_x_scale, 1), x2s = mge_node_float(n, MGE_KEY_x2_scale, 1),
           ys = mge_node_float(n, MGE_KEY_y_scale, 1);
    if (!mge_qadd_make(xs / ys, x2s / ys, &j.qa))
        return cpu_fallback(ctx, n, in, out, err);   /* the ref kernel says what is wrong */
    j.za = (int32_t)mge_node_int(n, MGE_KEY_x_zero, 0);
    j.zb = (int32_t)mge_node_int(n, MGE_KEY_x2_zero, 0);
    j.yz = (int32_t)mge_node_int(n, MGE_KEY_y_zero, 0);
    mge_q_act_bounds(mge_node_int(n, MGE_KEY_act, -1), ys, j.yz, &j.lo, &j.hi);
    cpu_parallel(ctx, mge_tensor_numel(in[0]), CPU_GRAIN, qadd_range, &j);
    return MGE_OK;
}

/* ---------------------------------------------------------------- pooling on qs8 */

/* maxpool2d: per output row, the max of its kh input rows into a row of
 * Wp bytes padded with -128 (the ref's empty-window value and below every
 * input, so padding never wins), then the max of kw taps at every padded
 * column, then every sw-th of those: three contiguous loops that vectorize,
 * where splitting the plane into column phases first cost a scalar byte
 * gather per input element (resnet18's 3x3/s2 maxpool was 6% of the int8
 * net). */
typedef struct mp_job {
    cpu_pool_geom g;
    const int8_t *x;
    int8_t *y;
    char *ws;
    size_t per;
} mp_job;

CPU_MULTI(mp_max_row, (int8_t *restrict m, const int8_t *restrict r, int64_t n), (m, r, n), {
    for (int64_t i = 0; i < n; i++)
        m[i] = r[i] > m[i] ? r[i] : m[i];
})

/* h[i] = max over kx of v[i + kx * dw], i < n */
CPU_MULTI(mp_taps, (int8_t *restrict h, const int8_t *restrict v, int64_t n, int64_t kw, int64_t dw),
          (h, v, n, kw, dw), {
              for (int64_t i = 0; i < n; i++)
                  h[i] = v[i];
              for (int64_t kx = 1; kx < kw; kx++) {
                  const int8_t *r = v + kx * dw;
                  for (int64_t i = 0; i < n; i++)
                      h[i] = r[i] > h[i] ? r[i] : h[i];
              }
          })

static void mp_planes(void *arg, int64_t p0, int64_t p1, int thread)
{
    const mp_job *j = arg;
    const cpu_pool_geom *g = &j->g;
    int8_t *v = (int8_t *)(j->ws + (size_t)thread * j->per), *h = v + g->Wp + 64;
    const int64_t nh = (g->OW - 1) * g->sw + 1; /* columns whose window starts an output */
    for (int64_t pl = p0; pl < p1; pl++) {
        const int8_t *x = j->x + pl * g->H * g->W;
        int8_t *y = j->y + pl * g->OH * g->OW;
        for (int64_t oy = 0; oy < g->OH; oy++) {
            memset(v, -128, (size_t)g->Wp);
            for (int64_t ky = 0; ky < g->kh; ky++) {
                int64_t iy = oy * g->sh - g->ph + ky * g->dh;
                if (iy >= 0 && iy < g->H)
                    mp_max_row(v + g->pw, x + iy * g->W, g->W);
            }
            int8_t *yr = y + oy * g->OW;
            if (g->sw == 1) {
                mp_taps(yr, v, g->OW, g->kw, g->dw);
                continue;
            }
            mp_taps(h, v, nh, g->kw, g->dw);
            for (int64_t ox = 0; ox < g->OW; ox++)
                yr[ox] = h[ox * g->sw];
        }
    }
}

static size_t mp_per(const cpu_pool_geom *g)
{
    return ((size_t)(2 * g->Wp) + 128 + 63) & ~(size_t)63;
}

static size_t maxpool_ws(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, int threads)
{
    if (in[0]->ndim != 4 || out[0]->ndim != 4)
        return cpu_ref_ws(n, in, out, threads);
    cpu_pool_geom g;
    cpu_pool_geometry(n, in[0], out[0], 1, &g);
    return mp_per(&g) * (size_t)(threads > 0 ? threads : 1);
}

static mge_status cpu_maxpool_qs8(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                  mge_tensor *const *out, mge_error *err)
{
    if (in[0]->ndim != 4 || out[0]->ndim != 4 || out[0]->dtype != MGE_QS8 || out[0]->dims[0] != in[0]->dims[0] ||
        out[0]->dims[1] != in[0]->dims[1])
        return cpu_fallback(ctx, n, in, out, err);
    mp_job j;
    cpu_pool_geometry(n, in[0], out[0], 1, &j.g);
    if (j.g.OH <= 0 || j.g.OW <= 0 || j.g.H <= 0 || j.g.W <= 0 || j.g.sh < 1 || j.g.sw < 1)
        return cpu_fallback(ctx, n, in, out, err);
    int threads = cpu_threads(ctx);
    j.per = mp_per(&j.g);
    if (!ctx->ws || ctx->ws_size < j.per * (size_t)threads)
        return mge_error_set(err, MGE_ERR_INVALID, "maxpool2d: scratch of %zu bytes, need %zu", ctx->ws_size,
                             j.per * (size_t)threads);
    j.x = in[0]->data, j.y = out[0]->data, j.ws = ctx->ws;
    int64_t planes = in[0]->dims[0] * in[0]->dims[1];
    cpu_parallel(ctx, planes, CPU_GRAIN / (j.g.H * j.g.W + 1) + 1, mp_planes, &j);
    return MGE_OK;
}

/* avgpool2d: the ref's windows and divisors (ref_avg_window), sums in
 * int32 with the padding counted as 0 (so a sum is the sum of the window's
 * inputs): per output row, the column sums of its kh input rows, then kw
 * of them per output, mge_q_div_round. count_include_pad with padding is
 * refused by the ref kernel (it needs a zero point): it runs it for the
 * error. */
typedef struct ap_job {
    cpu_pool_geom g;
    const int8_t *x;
    int8_t *y;
    char *ws;
    size_t per;
} ap_job;

CPU_MULTI(ap_add_row, (int32_t *restrict s, const int8_t *restrict r, int64_t n), (s, r, n), {
    for (int64_t i = 0; i < n; i++)
        s[i] += r[i];
})

/* the divisor of window (oh, ow): ref_avg_window's */
static int64_t ap_div(const cpu_pool_geom *g, int64_t oh, int64_t ow)
{
    int64_t a0 = oh * g->sh - g->ph, b0 = ow * g->sw - g->pw, a1 = a0 + g->kh, b1 = b0 + g->kw;
    a1 = a1 > g->H + g->ph ? g->H + g->ph : a1, b1 = b1 > g->W + g->pw ? g->W + g->pw : b1;
    int64_t padded = (a1 - a0) * (b1 - b0);
    a0 = a0 < 0 ? 0 : a0, b0 = b0 < 0 ? 0 : b0;
    a1 = a1 > g->H ? g->H : a1, b1 = b1 > g->W ? g->W : b1;
    return g->incl ? padded : (a1 > a0 && b1 > b0 ? (a1 - a0) * (b1 - b0) : 0);
}

static void ap_planes(void *arg, int64_t p0, int64_t p1, int thread)
{
    const ap_job *j = arg;
    const cpu_pool_geom *g = &j->g;
    int32_t *cs = (int32_t *)(void *)(j->ws + (size_t)thread * j->per);   /* [Wp]: padded columns */
    for (int64_t pl = p0; pl < p1; pl++) {
        const int8_t *x = j->x + pl * g->H * g->W;
        int8_t *y = j->y + pl * g->OH * g->OW;
        for (int64_t oh = 0; oh < g->OH; oh++) {
            memset(cs, 0, (size_t)g->Wp * 4);
            int64_t r0 = oh * g->sh - g->ph, r1 = r0 + g->kh;
            for (int64_t iy = r0 < 0 ? 0 : r0; iy < r1 && iy < g->H; iy++)
                ap_add_row(cs + g->pw, x + iy * g->W, g->W);
            for (int64_t ow = 0; ow < g->OW; ow++) {
                int64_t div = ap_div(g, oh, ow), c0 = ow * g->sw;
                int32_t sum = 0;
                for (int64_t kx = 0; kx < g->kw && c0 + kx < g->Wp; kx++)
                    sum += cs[c0 + kx];
                y[oh * g->OW + ow] = div > 0 ? (int8_t)mge_q_div_round(sum, (int32_t)div) : 0;
            }
        }
    }
}

static size_t ap_per(const cpu_pool_geom *g)
{
    return ((size_t)(g->Wp + g->pw) * 4 + 64 + 63) & ~(size_t)63;
}

static int ap_ok(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, cpu_pool_geom *g)
{
    if (in[0]->ndim != 4 || out[0]->ndim != 4 || out[0]->dtype != MGE_QS8 || out[0]->dims[0] != in[0]->dims[0] ||
        out[0]->dims[1] != in[0]->dims[1])
        return 0;
    cpu_pool_geometry(n, in[0], out[0], 0, g);
    /* windows far below 2^24 taps keep |sum| <= 128 * taps in int32 */
    return g->OH > 0 && g->OW > 0 && g->H > 0 && g->W > 0 && g->sh >= 1 && g->sw >= 1 && g->kh >= 1 &&
           g->kw >= 1 && g->ph >= 0 && g->pw >= 0 && g->kh * g->kw < (1LL << 24) &&
           !(g->incl && (g->ph > 0 || g->pw > 0));
}

static size_t avgpool_ws(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, int threads)
{
    cpu_pool_geom g;
    size_t ref = cpu_ref_ws(n, in, out, threads);
    if (!ap_ok(n, in, out, &g))
        return ref;
    size_t need = ap_per(&g) * (size_t)(threads > 0 ? threads : 1);
    return need > ref ? need : ref;
}

static mge_status cpu_avgpool_qs8(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                  mge_tensor *const *out, mge_error *err)
{
    ap_job j;
    if (!ap_ok(n, in, out, &j.g))
        return cpu_fallback(ctx, n, in, out, err);
    int threads = cpu_threads(ctx);
    j.per = ap_per(&j.g);
    if (!ctx->ws || ctx->ws_size < j.per * (size_t)threads)
        return mge_error_set(err, MGE_ERR_INVALID, "avgpool2d: scratch of %zu bytes, need %zu", ctx->ws_size,
                             j.per * (size_t)threads);
    j.x = in[0]->data, j.y = out[0]->data, j.ws = ctx->ws;
    cpu_parallel(ctx, in[0]->dims[0] * in[0]->dims[1], CPU_GRAIN / (j.g.H * j.g.W + 1) + 1, ap_planes, &j);
    return MGE_OK;
}

/* global_avgpool: the plane's int32 sum, mge_q_div_round */
typedef struct gap_job {
    const int8_t *x;
    int8_t *y;
    int64_t S;
} gap_job;

CPU_MULTI(gap_sum, (const int8_t *restrict x, int64_t n, int32_t *sum), (x, n, sum), {
    int32_t t = 0;
    for (int64_t i = 0; i < n; i++)
        t += x[i];
    *sum = t;
})

static void gap_planes(void *arg, int64_t p0, int64_t p1, int thread)
{
    const gap_job *j = arg;
    for (int64_t pl = p0; pl < p1; pl++) {
        int32_t sum;
        gap_sum(j->x + pl * j->S, j->S, &sum);
        j->y[pl] = (int8_t)mge_q_div_round(sum, (int32_t)j->S);
    }
}

static mge_status cpu_global_avgpool_qs8(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                         mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *x = in[0];
    /* the ref kernel checks shapes and refuses planes of 2^24 or more */
    if (x->ndim != 4 || out[0]->dtype != MGE_QS8 || x->dims[2] * x->dims[3] <= 0 ||
        x->dims[2] * x->dims[3] >= (1LL << 24) || mge_tensor_numel(out[0]) != x->dims[0] * x->dims[1])
        return cpu_fallback(ctx, n, in, out, err);
    gap_job j = {x->data, out[0]->data, x->dims[2] * x->dims[3]};
    cpu_parallel(ctx, x->dims[0] * x->dims[1], CPU_GRAIN / j.S + 1, gap_planes, &j);
    return MGE_OK;
}

void mge_cpu_register_quant(mge_backend *b)
{
    mge_cpu_isa();   /* decided once, before any kernel runs on pool threads */
    b->k[MGE_OP_QUANTIZE][MGE_F32] = (mge_kernel){.run = cpu_quantize, .ws = NULL};
    b->k[MGE_OP_DEQUANTIZE][MGE_QS8] = (mge_kernel){.run = cpu_quantize, .ws = NULL};
    b->k[MGE_OP_QADD][MGE_QS8] = (mge_kernel){.run = cpu_qadd, .ws = NULL};
    b->k[MGE_OP_MAXPOOL2D][MGE_QS8] = (mge_kernel){.run = cpu_maxpool_qs8, .ws = maxpool_ws};
    b->k[MGE_OP_AVGPOOL2D][MGE_QS8] = (mge_kernel){.run = cpu_avgpool_qs8, .ws = avgpool_ws};
    b->k[MGE_OP_GLOBAL_AVGPOOL][MGE_QS8] = (mge_kernel){.run = cpu_global_avgpool_qs8, .ws = NULL};
}
