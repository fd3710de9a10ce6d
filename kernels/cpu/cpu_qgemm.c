/* cpu_qgemm.c — int8 qconv2d and qlinear (ops.def, lib/quant_math.h) on an
 * int8 GEMM: C[O][M] = W[O][K] x X[K][M], M the output pixels of one image
 * (NCHW rows come out contiguous) or the rows of qlinear's x. Bit-exact with
 * the ref kernels: every level computes acc in int32 (wrapping, which is
 * exact mod 2^32) and the requantization of quant_math.h lane by lane.
 *
 * Packing: the micro-kernels read W in place (4-byte broadcasts from MR
 * rows) when K % 4 == 0; other blocks (K % 4 != 0, the last rows of O) are
 * packed per call as [K/4][MR][4] with zeros past O and K. Row sums come
 * from W on every call (there is no place to keep them between calls; a
 * preprocessing op could). X is packed in blocks of up to 4 panels
 * of NR columns, as rows of k-quads: block[q][m][4] = x[4q..4q+3][m], the
 * layout vpdpbusd reads, with a row stride a little over the block width
 * (the micro-kernel steps through it). The input of an image is first
 * padded with x_zero and split into stride phases (qg_src), so each tap of
 * an output row is a contiguous run; 4 runs are interleaved with SSE2
 * unpacks, 16 columns at a time (the junk past a run's end is overwritten
 * by the next run). 1x1 stride-1 convs without padding read x in place.
 * Small images (few blocks) pack every block once into a shared area and
 * split the rows of W over the threads instead.
 * Per output row o the constant part of acc is folded into
 * off[o] = bias[o] - corr * rowsum(w[o]).
 *
 * The levels (mge_cpu_int8()):
 *  - AVX-512 VNNI: vpdpbusd zmm, 8 rows x 48 columns (24 accumulators),
 *    W as 4-byte broadcasts; 8 x 16 and 8 x 32 kernels for the last
 *    columns of small images. vpdpbusd multiplies u8 by s8, so x is stored
 *    as u8 = x ^ 0x80 = x + 128 and corr = x_zero + 128:
 *    sum (x - xz) w = sum (x + 128) w - (xz + 128) rowsum(w). Exact for any
 *    weight, -128 included (no saturation in vpdpbusd).
 *  - AVX-VNNI: the same with ymm (VEX vpdpbusd), 4 rows x 24 columns.
 *  - AVX2 without VNNI: vpmaddubsw (u8 x s8 -> s16 pairs, saturating)
 *    cannot take u8 = x + 128: 255 * 127 * 2 = 64770 saturates. We use the
 *    sign trick instead: |x| as u8 (<= 128) times sign(x) * w (vpsignb),
 *    so a pair is at most 2 * 128 * 127 = 32512 < 32767 and exact; then
 *    vpmaddwd by ones and vpaddd. x is stored raw (s8), corr = x_zero.
 *    It needs |w| <= 127 (mge-quant guarantees it): a weight of -128 would
 *    give wrong sums (vpsignb cannot negate it, pairs may saturate), so a
 *    call whose weights hold -128 takes the portable loops instead (a
 *    vectorized scan, at this level only): exact either way.
 *  - portable: plain C on the same packing (raw x, corr = x_zero).
 * The requantization is vectorized along m: (acc * mult + 2^30) >> 31 from
 * vpmuldq on even and odd lanes (64-bit products) blended back, the
 * rounding shift (t >> s) + ((t >> (s - 1)) & 1), + y_zero, clamp, narrow.
 *
 * Depthwise convs (groups = C = O) use a direct kernel on an int16 padded
 * plane of x - x_zero (no GEMM); other grouped convs a GEMM per group.
 * Work is split over (group, column block, row block) tiles, one image
 * after the other; every output is computed by the same code whatever the
 * split, so any thread count gives the same bytes. */
#include "cpu.h"

#include "quant_math.h"

#include <string.h>

#if CPU_X86 && defined(__GNUC__)
#define QG_X86 1
#include <immintrin.h>
#if defined(__clang__)
#define QG_512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
#define QG_VNNI __attribute__((target("avx2,fma,avxvnni")))
#define QG_AVX2 __attribute__((target("avx2,fma")))
#else
#define QG_512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"), optimize("O3")))
#define QG_VNNI __attribute__((target("avx2,fma,avxvnni"), optimize("O3")))
#define QG_AVX2 __attribute__((target("avx2,fma"), optimize("O3")))
#endif
#else
#define QG_X86 0
#endif

enum { MR_MAX = 8, NR_MAX = 48 };

#define QG_AL(v) (((v) + 63) & ~(size_t)63)

/* Per output row: off = bias - corr * rowsum, the multiplier and shift. */
typedef struct qg_row {
    int32_t off, mult, shift;
} qg_row;

typedef struct qg_epi {
    int32_t yz, lo, hi;
} qg_epi;

/* rows x cols of C (rows <= MR, cols <= NR) from xp [Kq][NR][4] and
 * W (row r, quad q at wp + r * wrs + q * wqs: packed [Kq][MR][4] or W
 * itself), requantized into y (row stride ldy). */
typedef void (*qg_ukr_fn)(const uint8_t *xp, int64_t xs, const int8_t *wp, int64_t wrs, int64_t wqs, int64_t Kq,
                          const qg_row *rp, const qg_epi *e, int rows, int cols, int8_t *y, int64_t ldy);

static inline int8_t qg_out(int32_t acc, const qg_row *r, const qg_epi *e)
{
    mge_qmul q = {r->mult, r->shift};
    return (int8_t)mge_q_clamp(mge_qmul_apply(acc, q) + e->yz, e->lo, e->hi);
}

/* ---------------------------------------------------------------- portable */

enum { BASE_MR = 4, BASE_NR = 16 };

static CPU_BASE void ukr_base(const uint8_t *xp, int64_t xs, const int8_t *wp, int64_t wrs, int64_t wqs, int64_t Kq,
                              const qg_row *rp, const qg_epi *e, int rows, int cols, int8_t *y, int64_t ldy)
{
    uint32_t acc[BASE_MR][BASE_NR];   /* wrapping, like the definition's int32 sum */
    const int8_t *x = (const int8_t *)xp;
    for (int r = 0; r < BASE_MR; r++)
        for (int j = 0; j < BASE_NR; j++)
            acc[r][j] = 0;
    for (int64_t q = 0; q < Kq; q++, x += xs, wp += wqs)
        for (int r = 0; r < BASE_MR; r++)
            for (int j = 0; j < BASE_NR; j++)
                acc[r][j] += (uint32_t)(x[j * 4] * wp[r * wrs] + x[j * 4 + 1] * wp[r * wrs + 1] +
                                        x[j * 4 + 2] * wp[r * wrs + 2] + x[j * 4 + 3] * wp[r * wrs + 3]);
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++)
            y[r * ldy + j] = qg_out((int32_t)(acc[r][j] + (uint32_t)rp[r].off), &rp[r], e);
}

#if QG_X86
/* ---------------------------------------------------------------- AVX2 / AVX-VNNI (ymm) */

enum { Y_MR = 4, Y_NR = 16 };

/* requantizes 8 lanes of acc (off already added) and stores cols of them */
static QG_AVX2 inline void epi_ymm(__m256i v, const qg_row *r, const qg_epi *e, int8_t *y, int cols)
{
    __m256i m = _mm256_set1_epi32(r->mult), half = _mm256_set1_epi64x(1LL << 30);
    __m256i pe = _mm256_add_epi64(_mm256_mul_epi32(v, m), half);
    __m256i po = _mm256_add_epi64(_mm256_mul_epi32(_mm256_srli_epi64(v, 32), m), half);
    /* bits 31..62 of each product: the low dword of pe >> 31, the high dword of po << 1 */
    __m256i t = _mm256_blend_epi32(_mm256_srli_epi64(pe, 31), _mm256_slli_epi64(po, 1), 0xAA);
    if (r->shift) {
        __m256i a = _mm256_sra_epi32(t, _mm_cvtsi32_si128(r->shift));
        __m256i b = _mm256_sra_epi32(t, _mm_cvtsi32_si128(r->shift - 1));
        t = _mm256_add_epi32(a, _mm256_and_si256(b, _mm256_set1_epi32(1)));
    }
    t = _mm256_add_epi32(t, _mm256_set1_epi32(e->yz));
    t = _mm256_max_epi32(t, _mm256_set1_epi32(e->lo));
    t = _mm256_min_epi32(t, _mm256_set1_epi32(e->hi));
    /* packs work within 128-bit lanes: [0-3 0-3 | 4-7 4-7] -> qwords 0, 2 */
    __m256i p = _mm256_permute4x64_epi64(_mm256_packs_epi32(t, t), 0x08);
    __m128i b8 = _mm_packs_epi16(_mm256_castsi256_si128(p), _mm256_castsi256_si128(p));
    if (cols >= 8) {
        _mm_storel_epi64((__m128i *)y, b8);
    } else if (cols > 0) {
        int8_t tmp[16];
        _mm_storeu_si128((__m128i *)tmp, b8);
        memcpy(y, tmp, (size_t)cols);
    }
}

/* The micro-kernels name every accumulator: with an array GCC keeps a
 * copy in memory and stores it on every iteration. */
#define Y_ROW(r, DP)                                                              \
    {                                                                             \
        int32_t w4;                                                               \
        memcpy(&w4, wp + (r) * wrs, 4);                                             \
        __m256i w = _mm256_set1_epi32(w4);                                        \
        DP(c##r##0, x0, w);                                                       \
        DP(c##r##1, x1, w);                                                       \
    }
#define Y_EPI(r)                                                                              \
    if (rows > (r)) {                                                                         \
        __m256i o = _mm256_set1_epi32(rp[r].off);                                             \
        epi_ymm(_mm256_add_epi32(c##r##0, o), &rp[r], e, y + (r) * ldy, cols);                \
        epi_ymm(_mm256_add_epi32(c##r##1, o), &rp[r], e, y + (r) * ldy + 8, cols - 8);        \
    }
#define Y_DECL                                                                                \
    __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, \
            c30 = c00, c31 = c00

/* the sign trick (see the top): |x| times w with x's sign, pairs in int16, then int32 */
#define DP_AVX2(c, x, w) \
    c = _mm256_add_epi32(c, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(x), _mm256_sign_epi8(w, x)), ones))
#define DP_VNNI(c, x, w) c = _mm256_dpbusd_avx_epi32(c, x, w)

static QG_AVX2 void ukr_avx2(const uint8_t *xp, int64_t xs, const int8_t *wp, int64_t wrs, int64_t wqs, int64_t Kq,
                             const qg_row *rp, const qg_epi *e, int rows, int cols, int8_t *y, int64_t ldy)
{
    Y_DECL;
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t q = 0; q < Kq; q++, xp += xs, wp += wqs) {
        __m256i x0 = _mm256_loadu_si256((const __m256i *)xp), x1 = _mm256_loadu_si256((const __m256i *)(xp + 32));
        Y_ROW(0, DP_AVX2) Y_ROW(1, DP_AVX2) Y_ROW(2, DP_AVX2) Y_ROW(3, DP_AVX2)
    }
    Y_EPI(0) Y_EPI(1) Y_EPI(2) Y_EPI(3)
}

/* AVX-VNNI: 4 rows x 24 columns (12 accumulators, 3 x, 1 w: all 16 ymm) */
enum { V_NR = 24 };

static QG_VNNI void ukr_vnni(const uint8_t *xp, int64_t xs, const int8_t *wp, int64_t wrs, int64_t wqs, int64_t Kq,
                             const qg_row *rp, const qg_epi *e, int rows, int cols, int8_t *y, int64_t ldy)
{
    Y_DECL;
    __m256i c02 = c00, c12 = c00, c22 = c00, c32 = c00;
    for (int64_t q = 0; q < Kq; q++, xp += xs, wp += wqs) {
        __m256i x0 = _mm256_loadu_si256((const __m256i *)xp), x1 = _mm256_loadu_si256((const __m256i *)(xp + 32));
        __m256i x2 = _mm256_loadu_si256((const __m256i *)(xp + 64));
#define V_ROW(r)                                    \
    {                                               \
        int32_t w4;                                 \
        memcpy(&w4, wp + (r) * wrs, 4);             \
        __m256i w = _mm256_set1_epi32(w4);          \
        DP_VNNI(c##r##0, x0, w);                    \
        DP_VNNI(c##r##1, x1, w);                    \
        DP_VNNI(c##r##2, x2, w);                    \
    }
        V_ROW(0) V_ROW(1) V_ROW(2) V_ROW(3)
#undef V_ROW
    }
#define V_EPI(r)                                                                              \
    if (rows > (r)) {                                                                         \
        __m256i o = _mm256_set1_epi32(rp[r].off);                                             \
        epi_ymm(_mm256_add_epi32(c##r##0, o), &rp[r], e, y + (r) * ldy, cols);                \
        epi_ymm(_mm256_add_epi32(c##r##1, o), &rp[r], e, y + (r) * ldy + 8, cols - 8);        \
        epi_ymm(_mm256_add_epi32(c##r##2, o), &rp[r], e, y + (r) * ldy + 16, cols - 16);      \
    }
    V_EPI(0) V_EPI(1) V_EPI(2) V_EPI(3)
#undef V_EPI
}

/* ---------------------------------------------------------------- AVX-512 VNNI */

enum { Z_MR = 8, Z_NR = 48 };

static QG_512 inline void epi_zmm(__m512i v, const qg_row *r, const qg_epi *e, int8_t *y, __mmask16 mk)
{
    const __m512i half = _mm512_set1_epi64(1LL << 30), m = _mm512_set1_epi32(r->mult);
    v = _mm512_add_epi32(v, _mm512_set1_epi32(r->off));
    __m512i pe = _mm512_add_epi64(_mm512_mul_epi32(v, m), half);
    __m512i po = _mm512_add_epi64(_mm512_mul_epi32(_mm512_srli_epi64(v, 32), m), half);
    /* bits 31..62 of each product: the low dword of pe >> 31, the high dword of po << 1 */
    __m512i t = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(pe, 31), _mm512_slli_epi64(po, 1));
    if (r->shift) {
        __m512i a = _mm512_sra_epi32(t, _mm_cvtsi32_si128(r->shift));
        __m512i b = _mm512_sra_epi32(t, _mm_cvtsi32_si128(r->shift - 1));
        t = _mm512_add_epi32(a, _mm512_and_si512(b, _mm512_set1_epi32(1)));
    }
    t = _mm512_add_epi32(t, _mm512_set1_epi32(e->yz));
    t = _mm512_min_epi32(_mm512_max_epi32(t, _mm512_set1_epi32(e->lo)), _mm512_set1_epi32(e->hi));
    _mm512_mask_cvtsepi32_storeu_epi8(y, mk, t);
}

/* 16 (or the n left, masked) int32 from memory through epi_zmm */
static QG_512 void epi_zmm_at(const int32_t *acc, const qg_row *r, const qg_epi *e, int8_t *y, int64_t n)
{
    __mmask16 mk = n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1);
    epi_zmm(_mm512_maskz_loadu_epi32(mk, acc), r, e, y, mk);
}

static QG_AVX2 void epi_ymm_at(const int32_t *acc, const qg_row *r, const qg_epi *e, int8_t *y)
{
    __m256i v = _mm256_loadu_si256((const __m256i *)acc);
    epi_ymm(_mm256_add_epi32(v, _mm256_set1_epi32(r->off)), r, e, y, 8);
}

#define Z_ROW(r)                                     \
    {                                                \
        int32_t w4;                                  \
        memcpy(&w4, wp + (r) * wrs, 4);                \
        __m512i w = _mm512_set1_epi32(w4);           \
        c##r##0 = _mm512_dpbusd_epi32(c##r##0, x0, w); \
        c##r##1 = _mm512_dpbusd_epi32(c##r##1, x1, w); \
        c##r##2 = _mm512_dpbusd_epi32(c##r##2, x2, w); \
    }
#define Z_EPI(r)                                                  \
    if (rows > (r)) {                                             \
        epi_zmm(c##r##0, &rp[r], e, y + (r) * ldy, mk0);          \
        epi_zmm(c##r##1, &rp[r], e, y + (r) * ldy + 16, mk1);     \
        epi_zmm(c##r##2, &rp[r], e, y + (r) * ldy + 32, mk2);     \
    }

static inline __mmask16 zmask(int n)
{
    return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}

/* Narrower kernels for a panel's last columns (small images: 7x7 = 49
 * columns would otherwise run as 96) */
#define Z1_ROW(r)                                       \
    {                                                   \
        int32_t w4;                                     \
        memcpy(&w4, wp + (r) * wrs, 4);                   \
        __m512i w = _mm512_set1_epi32(w4);              \
        c##r##0 = _mm512_dpbusd_epi32(c##r##0, x0, w);  \
        NV2(c##r##1 = _mm512_dpbusd_epi32(c##r##1, x1, w);) \
    }
#define Z1_EPI(r)                                                     \
    if (rows > (r)) {                                                 \
        epi_zmm(c##r##0, &rp[r], e, y + (r) * ldy, mk0);              \
        NV2(epi_zmm(c##r##1, &rp[r], e, y + (r) * ldy + 16, mk1);)    \
    }
#define ZN_KERNEL(name)                                                                                          \
    static QG_512 void name(const uint8_t *xp, int64_t xs, const int8_t *wp, int64_t wrs, int64_t wqs, int64_t Kq, \
                            const qg_row *rp, const qg_epi *e, int rows, int cols, int8_t *y, int64_t ldy)     \
    {                                                                                                            \
        __m512i c00 = _mm512_setzero_si512(), c10 = c00, c20 = c00, c30 = c00, c40 = c00, c50 = c00, c60 = c00, \
                c70 = c00;                                                                                       \
        NV2(__m512i c01 = c00, c11 = c00, c21 = c00, c31 = c00, c41 = c00, c51 = c00, c61 = c00, c71 = c00;)     \
        for (int64_t q = 0; q < Kq; q++, xp += xs, wp += wqs) {                                           \
            __m512i x0 = _mm512_loadu_si512(xp);                                                                 \
            NV2(__m512i x1 = _mm512_loadu_si512(xp + 64);)                                                       \
            Z1_ROW(0) Z1_ROW(1) Z1_ROW(2) Z1_ROW(3) Z1_ROW(4) Z1_ROW(5) Z1_ROW(6) Z1_ROW(7)                      \
        }                                                                                                        \
        __mmask16 mk0 = zmask(cols);                                                                             \
        NV2(__mmask16 mk1 = zmask(cols - 16);)                                                                   \
        Z1_EPI(0) Z1_EPI(1) Z1_EPI(2) Z1_EPI(3) Z1_EPI(4) Z1_EPI(5) Z1_EPI(6) Z1_EPI(7)                          \
    }
#define NV2(...)
ZN_KERNEL(ukr_512_16)
#undef NV2
#define NV2(...) __VA_ARGS__
ZN_KERNEL(ukr_512_32)
#undef NV2

static QG_512 void ukr_512(const uint8_t *xp, int64_t xs, const int8_t *wp, int64_t wrs, int64_t wqs, int64_t Kq,
                           const qg_row *rp, const qg_epi *e, int rows, int cols, int8_t *y, int64_t ldy)
{
    __m512i c00 = _mm512_setzero_si512(), c01 = c00, c02 = c00, c10 = c00, c11 = c00, c12 = c00, c20 = c00,
            c21 = c00, c22 = c00, c30 = c00, c31 = c00, c32 = c00, c40 = c00, c41 = c00, c42 = c00, c50 = c00,
            c51 = c00, c52 = c00, c60 = c00, c61 = c00, c62 = c00, c70 = c00, c71 = c00, c72 = c00;
    if (cols <= 32) {
        (cols <= 16 ? ukr_512_16 : ukr_512_32)(xp, xs, wp, wrs, wqs, Kq, rp, e, rows, cols, y, ldy);
        return;
    }
    for (int64_t q = 0; q < Kq; q++, xp += xs, wp += wqs) {
        __m512i x0 = _mm512_loadu_si512(xp), x1 = _mm512_loadu_si512(xp + 64), x2 = _mm512_loadu_si512(xp + 128);
        Z_ROW(0) Z_ROW(1) Z_ROW(2) Z_ROW(3) Z_ROW(4) Z_ROW(5) Z_ROW(6) Z_ROW(7)
    }
    __mmask16 mk0 = zmask(cols), mk1 = zmask(cols - 16), mk2 = zmask(cols - 32);
    Z_EPI(0) Z_EPI(1) Z_EPI(2) Z_EPI(3) Z_EPI(4) Z_EPI(5) Z_EPI(6) Z_EPI(7)
}

#endif

/* n columns from 4 source rows (column i is s[t][i]) as quads at d
 * (4 bytes per column, one per row), flipped to u8 when flip. Writes whole
 * runs of 16 (the last one 8 when it can): up to 15 columns past n get
 * junk, which the next run overwrites or nothing reads (d has room). Reads
 * up to 15 bytes past a row's n when that stays below lim (NULL: always;
 * the padded planes have the room), else copies the last bytes. */
static void interleave_row(const int8_t *const *s, int64_t n, uint8_t *d, int flip, const int8_t *lim)
{
#if QG_X86
    const __m128i f = _mm_set1_epi8(flip ? (char)0x80 : 0);
    int64_t i = 0;
    for (; i < n; i += 16, d += 64) {
        if (n - i <= 8)
            break;   /* short rows (small images): 8 at a time below */
        __m128i v0, v1, v2, v3;
        /* as integers: the zero row is another object than x */
        uintptr_t e = (uintptr_t)lim - 16 - (uintptr_t)i;
        if (!lim || i + 16 <= n ||
            ((uintptr_t)s[0] <= e && (uintptr_t)s[1] <= e && (uintptr_t)s[2] <= e && (uintptr_t)s[3] <= e)) {
            v0 = _mm_loadu_si128((const __m128i *)(s[0] + i));
            v1 = _mm_loadu_si128((const __m128i *)(s[1] + i));
            v2 = _mm_loadu_si128((const __m128i *)(s[2] + i));
            v3 = _mm_loadu_si128((const __m128i *)(s[3] + i));
        } else {   /* the end of x: never read past it */
            int8_t b[4][16] = {{0}};
            for (int t = 0; t < 4; t++)
                memcpy(b[t], s[t] + i, (size_t)(n - i));
            v0 = _mm_loadu_si128((const __m128i *)b[0]);
            v1 = _mm_loadu_si128((const __m128i *)b[1]);
            v2 = _mm_loadu_si128((const __m128i *)b[2]);
            v3 = _mm_loadu_si128((const __m128i *)b[3]);
        }
        v0 = _mm_xor_si128(v0, f), v1 = _mm_xor_si128(v1, f), v2 = _mm_xor_si128(v2, f), v3 = _mm_xor_si128(v3, f);
        __m128i ab0 = _mm_unpacklo_epi8(v0, v1), ab1 = _mm_unpackhi_epi8(v0, v1);
        __m128i dg0 = _mm_unpacklo_epi8(v2, v3), dg1 = _mm_unpackhi_epi8(v2, v3);
        _mm_storeu_si128((__m128i *)d, _mm_unpacklo_epi16(ab0, dg0));
        _mm_storeu_si128((__m128i *)(d + 16), _mm_unpackhi_epi16(ab0, dg0));
        _mm_storeu_si128((__m128i *)(d + 32), _mm_unpacklo_epi16(ab1, dg1));
        _mm_storeu_si128((__m128i *)(d + 48), _mm_unpackhi_epi16(ab1, dg1));
    }
    if (i < n) {   /* the last 1..8 columns, 8 bytes a row */
        uintptr_t e = (uintptr_t)lim - 8 - (uintptr_t)i;
        __m128i v0, v1, v2, v3;
        if (!lim || i + 8 <= n ||
            ((uintptr_t)s[0] <= e && (uintptr_t)s[1] <= e && (uintptr_t)s[2] <= e && (uintptr_t)s[3] <= e)) {
            v0 = _mm_loadl_epi64((const __m128i *)(s[0] + i));
            v1 = _mm_loadl_epi64((const __m128i *)(s[1] + i));
            v2 = _mm_loadl_epi64((const __m128i *)(s[2] + i));
            v3 = _mm_loadl_epi64((const __m128i *)(s[3] + i));
        } else {
            int8_t b[4][8] = {{0}};
            for (int t = 0; t < 4; t++)
                memcpy(b[t], s[t] + i, (size_t)(n - i));
            v0 = _mm_loadl_epi64((const __m128i *)b[0]);
            v1 = _mm_loadl_epi64((const __m128i *)b[1]);
            v2 = _mm_loadl_epi64((const __m128i *)b[2]);
            v3 = _mm_loadl_epi64((const __m128i *)b[3]);
        }
        v0 = _mm_xor_si128(v0, f), v1 = _mm_xor_si128(v1, f), v2 = _mm_xor_si128(v2, f), v3 = _mm_xor_si128(v3, f);
        __m128i ab = _mm_unpacklo_epi8(v0, v1), dg = _mm_unpacklo_epi8(v2, v3);
        _mm_storeu_si128((__m128i *)d, _mm_unpacklo_epi16(ab, dg));
        _mm_storeu_si128((__m128i *)(d + 16), _mm_unpackhi_epi16(ab, dg));
    }
#else
    (void)lim;
    uint8_t fb = flip ? 0x80 : 0;
    for (int64_t i = 0; i < n; i++, d += 4)
        d[0] = (uint8_t)s[0][i] ^ fb, d[1] = (uint8_t)s[1][i] ^ fb, d[2] = (uint8_t)s[2][i] ^ fb,
        d[3] = (uint8_t)s[3][i] ^ fb;
#endif
}

/* ---------------------------------------------------------------- levels */

typedef struct qg_level {
    int mr, nr, flip;   /* flip: x stored as x ^ 0x80 (u8), corr = x_zero + 128 */
    qg_ukr_fn ukr;
} qg_level;

static qg_level qg_pick(int safe)
{
    qg_level l = {BASE_MR, BASE_NR, 0, ukr_base};
#if QG_X86
    switch (mge_cpu_int8()) {
    case MGE_INT8_AVX512VNNI: l = (qg_level){Z_MR, Z_NR, 1, ukr_512}; break;
    case MGE_INT8_AVXVNNI: l = (qg_level){Y_MR, V_NR, 1, ukr_vnni}; break;
    case MGE_INT8_AVX2:
        if (safe)
            l = (qg_level){Y_MR, Y_NR, 0, ukr_avx2};
        break;
    default: break;
    }
#else
    (void)safe;
#endif
    return l;
}

/* the largest MR and NR of any level: scratch sized for these fits all */
#if QG_X86
enum { ANY_MR = Z_MR, ANY_NR = Z_NR };
#else
enum { ANY_MR = BASE_MR, ANY_NR = BASE_NR };
#endif

/* ---------------------------------------------------------------- shared setup */

/* What a qconv2d / qlinear call needs, built once before the parallel part:
 * packed W (per group), per-row params. */
typedef struct qg_prep {
    qg_level lv;
    int64_t G, Og, K, Kq, Ob;   /* Ob: row blocks per group */
    int8_t *wp;                 /* [G][Ob][Kq][MR][4] (only blocks qg_wblock does not read in place) */
    const int8_t *W;            /* the weight [O][K] */
    int direct;                 /* K % 4 == 0: full row blocks are read from W in place */
    qg_row *rows;               /* [G][Ob * MR] */
    qg_epi e;
} qg_prep;

static size_t qg_prep_bytes(int64_t G, int64_t Og, int64_t K)
{
    /* rows padded to ANY_MR, a multiple of every level's MR */
    int64_t Kq = (K + 3) / 4, rowsp = (Og + ANY_MR - 1) / ANY_MR * ANY_MR;
    return (size_t)(G * rowsp * Kq * 4) + (size_t)(G * rowsp) * sizeof(qg_row) + 128;
}

/* The multiplier of output channel o: x_scale * wscale[o] / y_scale. */
static int qg_qmul(double xs, double ys, const mge_tensor *w, int64_t o, mge_qmul *q)
{
    double wsc = (double)w->q.scale[w->q.axis == 0 ? o : 0];
    return mge_qmul_make(xs * wsc / ys, q);
}

CPU_MULTI(qg_scan, (const int8_t *restrict w, int64_t n, int *found), (w, n, found), {
    int f = 0;
    for (int64_t i = 0; i < n; i++)
        f |= w[i] == -128;
    *found = f;
})

#if QG_X86
/* sum of w[0..n): vpdpbusd with u8 ones, 64 bytes an instruction */
static QG_512 int32_t rowsum_512(const int8_t *w, int64_t n)
{
    __m512i acc = _mm512_setzero_si512(), ones = _mm512_set1_epi8(1);
    int64_t i = 0;
    for (; i + 64 <= n; i += 64)
        acc = _mm512_dpbusd_epi32(acc, ones, _mm512_loadu_si512(w + i));
    int32_t t = _mm512_reduce_add_epi32(acc);
    for (; i < n; i++)
        t += w[i];
    return t;
}

/* vpmaddubsw with u8 ones (pairs in int16, |pair| <= 256), vpmaddwd to int32 */
static QG_AVX2 int32_t rowsum_avx2(const int8_t *w, int64_t n)
{
    __m256i acc = _mm256_setzero_si256(), ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        acc = _mm256_add_epi32(
            acc, _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, _mm256_loadu_si256((const __m256i *)(w + i))), ones16));
    __m128i h = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4E));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xB1));
    int32_t t = _mm_cvtsi128_si32(h);
    for (; i < n; i++)
        t += w[i];
    return t;
}
#endif

/* the sum of a weight row (int32: exact below 2^24 taps) */
static void qg_rowsum(const int8_t *w, int64_t n, int32_t *sum)
{
#if QG_X86
    int l = mge_cpu_int8();
    if (l >= MGE_INT8_AVX512VNNI) {
        *sum = rowsum_512(w, n);
        return;
    }
    if (l >= MGE_INT8_AVX2) {
        *sum = rowsum_avx2(w, n);
        return;
    }
#endif
    int32_t t = 0;
    for (int64_t i = 0; i < n; i++)
        t += w[i];
    *sum = t;
}

typedef struct qg_pack_job {
    qg_prep *p;
    const int8_t *W;
    const int32_t *B;
    uint32_t corr;
} qg_pack_job;

/* row blocks [b0, b1) over all groups: W's rows as [Kq][MR][4] (zeros past
 * Og and K), and off = bias - corr * rowsum */
static void qg_pack_blocks(void *arg, int64_t b0, int64_t b1, int thread)
{
    const qg_pack_job *j = arg;
    qg_prep *p = j->p;
    int mr = p->lv.mr;
    int64_t K = p->K, Kq = p->Kq, Kf = K / 4;
    for (int64_t blk = b0; blk < b1; blk++) {
        int64_t g = blk / p->Ob, ob = blk % p->Ob;
        int8_t *dst = p->wp + blk * Kq * mr * 4;
        const int8_t *src[MR_MAX];
        for (int r = 0; r < mr; r++) {
            int64_t ol = ob * mr + r, o = g * p->Og + ol;
            src[r] = ol < p->Og ? j->W + o * K : NULL;
            if (!src[r])
                continue;
            int32_t sum;
            qg_rowsum(src[r], K, &sum);
            p->rows[g * p->Ob * mr + ol].off = (int32_t)((j->B ? (uint32_t)j->B[o] : 0u) - j->corr * (uint32_t)sum);
        }
        if (p->direct && (ob + 1) * mr <= p->Og)
            continue;   /* read in place */
        int64_t q = 0;
#if QG_X86
        /* 4 rows x 4 quads at a time: a 4x4 transpose of int32 */
        for (; q + 4 <= Kf; q += 4)
            for (int r = 0; r < mr; r += 4) {
                __m128i v[4];
                for (int t = 0; t < 4; t++)
                    v[t] = src[r + t] ? _mm_loadu_si128((const __m128i *)(src[r + t] + q * 4)) : _mm_setzero_si128();
                __m128i t0 = _mm_unpacklo_epi32(v[0], v[1]), t1 = _mm_unpacklo_epi32(v[2], v[3]);
                __m128i t2 = _mm_unpackhi_epi32(v[0], v[1]), t3 = _mm_unpackhi_epi32(v[2], v[3]);
                int8_t *d = dst + (q * mr + r) * 4;
                _mm_storeu_si128((__m128i *)d, _mm_unpacklo_epi64(t0, t1));
                _mm_storeu_si128((__m128i *)(d + mr * 4), _mm_unpackhi_epi64(t0, t1));
                _mm_storeu_si128((__m128i *)(d + mr * 8), _mm_unpacklo_epi64(t2, t3));
                _mm_storeu_si128((__m128i *)(d + mr * 12), _mm_unpackhi_epi64(t2, t3));
            }
#endif
        for (int r = 0; r < mr; r++) {
            for (int64_t k = q; k < Kq; k++) {
                int8_t t4[4] = {0, 0, 0, 0};
                if (src[r])
                    memcpy(t4, src[r] + k * 4, (size_t)(k < Kf ? 4 : K - Kf * 4));
                memcpy(dst + (k * mr + r) * 4, t4, 4);
            }
        }
    }
}

/* Packs W [O][K] (rows of group g at g*Og) and the row params. 0 when a
 * multiplier is out of range (the caller falls back to the ref kernel). */
static int qg_prepare(const mge_kctx *ctx, const mge_node *n, const mge_tensor *w, const mge_tensor *bias,
                      int64_t G, int64_t Og, int64_t K, void *ws, qg_prep *p)
{
    const int8_t *W = w->data;
    int64_t O = G * Og;
    int has128 = 0;
    if (mge_cpu_int8() == MGE_INT8_AVX2)   /* the only level that minds -128 */
        qg_scan(W, O * K, &has128);
    p->lv = qg_pick(!has128);
    int mr = p->lv.mr;
    p->G = G, p->Og = Og, p->K = K, p->Kq = (K + 3) / 4, p->Ob = (Og + mr - 1) / mr;
    int64_t rowsp = p->Ob * mr;
    p->wp = ws;
    p->W = W;
    p->direct = K % 4 == 0;
    p->rows = (qg_row *)(void *)((char *)ws + (((size_t)(G * rowsp * p->Kq * 4) + 63) & ~(size_t)63));
    double xs = mge_node_float(n, MGE_KEY_x_scale, 1), ys = mge_node_float(n, MGE_KEY_y_scale, 1);
    int32_t xz = (int32_t)mge_node_int(n, MGE_KEY_x_zero, 0);
    p->e.yz = (int32_t)mge_node_int(n, MGE_KEY_y_zero, 0);
    mge_q_act_bounds(mge_node_int(n, MGE_KEY_act, -1), ys, p->e.yz, &p->e.lo, &p->e.hi);
    for (int64_t g = 0; g < G; g++)
        for (int64_t ol = 0; ol < rowsp; ol++) {
            qg_row *row = &p->rows[g * rowsp + ol];
            row->off = row->mult = row->shift = 0;
            mge_qmul q;
            if (ol < Og) {
                if (!qg_qmul(xs, ys, w, g * Og + ol, &q))
                    return 0;
                row->mult = q.mult, row->shift = q.shift;
            }
        }
    qg_pack_job j = {p, W, bias ? bias->data : NULL, (uint32_t)(xz + (p->lv.flip ? 128 : 0))};
    /* 64 KiB of weights or more per task: small layers pack on the caller */
    cpu_parallel(ctx, G * p->Ob, (65536 + K * mr) / (K * mr + 1), qg_pack_blocks, &j);
    return 1;
}

/* Row block b of group g for the micro-kernel: W in place when rows of
 * whole quads are there (no per-call packing), else the packed copy. */
static inline const int8_t *qg_wblock(const qg_prep *p, int64_t g, int64_t b, int64_t *wrs, int64_t *wqs)
{
    int mr = p->lv.mr;
    if (p->direct && (b + 1) * mr <= p->Og) {
        *wrs = p->K, *wqs = 4;
        return p->W + (g * p->Og + b * mr) * p->K;
    }
    *wrs = 4, *wqs = mr * 4;
    return p->wp + ((g * p->Ob + b) * p->Kq) * mr * 4;
}

/* the quantization the kernels here handle: weight scales per channel
 * (axis 0) or per tensor, a qs32 bias of O entries or none */
static int qg_supported(const mge_node *n, mge_tensor *const *in, int64_t O)
{
    const mge_tensor *w = in[1];
    if (!w->q.scale || !((w->q.axis == 0 && w->q.nscale == O) || (w->q.axis == -1 && w->q.nscale == 1)))
        return 0;
    if (n->nin > 2 && (in[2]->dtype != MGE_QS32 || mge_tensor_numel(in[2]) != O))
        return 0;
    return 1;
}

/* ---------------------------------------------------------------- qconv2d */

/* Column blocks: NR * QG_NSUB columns at most, so a block's packed X stays
 * in L2 for moderate K. */
enum { QG_NSUB = 4 };

static int64_t qg_mb(int64_t M, int64_t K, int nr)
{
    int64_t nsub = (M + nr - 1) / nr;
    int64_t cap = (256 * 1024) / (((K + 3) / 4) * 4 * nr);
    if (cap < 1)
        cap = 1;
    if (cap > QG_NSUB)
        cap = QG_NSUB;
    if (nsub > cap)
        nsub = cap;
    return nsub * nr;
}

/* per-thread scratch: a packed X block and an output tile (qlinear) */
/* bytes between the k-quads of a packed block of mb columns: 16 columns
 * of room for interleave_row, a multiple of 64 */
static int64_t qg_xstride(int64_t mb)
{
    return ((mb + 16) * 4 + 63) / 64 * 64;
}

static size_t qg_thread_bytes(int64_t M, int64_t K)
{
    /* the largest block any level picks */
    static const int nrs[] = {ANY_NR, 24, 16};
    int64_t Kq = (K + 3) / 4, mb = 0;
    for (int i = 0; i < 3; i++) {
        int64_t b = qg_mb(M, K, nrs[i]);
        mb = b > mb ? b : mb;
    }
    return (size_t)(Kq * qg_xstride(mb) + ANY_MR * ANY_NR + 256);
}

/* depthwise: an int16 padded plane and an int32 row */
/* depthwise: x - x_zero as int16, padded with 0 (= x_zero) and split into
 * sw column phases (as qg_src), Hp rows of Wq; then the int32 row and the
 * tap offsets */
static void dw_dims(const cpu_conv *c, int64_t *Hp, int64_t *Wq)
{
    int64_t hr = (c->OH - 1) * c->sh + (c->kh - 1) * c->dh + 1, wr = (c->OW - 1) * c->sw + (c->kw - 1) * c->dw + 1;
    int64_t Wp = c->W + c->pw > wr ? c->W + c->pw : wr;
    *Hp = c->H + c->ph > hr ? c->H + c->ph : hr;
    *Wq = (Wp + c->sw - 1) / c->sw;
}

/* the plane's int16 count, with room for 32-lane loads past a row's end */
static int64_t dw_plane(const cpu_conv *c)
{
    int64_t Hp, Wq;
    dw_dims(c, &Hp, &Wq);
    return c->sw * Hp * Wq + 64;
}

static size_t dw_thread_bytes(const cpu_conv *c)
{
    return QG_AL((size_t)dw_plane(c) * 2) + QG_AL((size_t)c->OW * 4 + 64) + (size_t)(c->ksz + 1) * 8 +
           (size_t)(c->ksz / 2 + 1) * 4 + 64;
}

static int qg_is_dw(const cpu_conv *c)
{
    return c->G > 1 && c->G == c->C && c->O == c->C;
}

/* The input of one image as the packing reads it: per channel, sw phase
 * planes of Hp rows by Wq columns, phase p holding columns p, p + sw, ...
 * of x padded with x_zero; tap (ky, kx) of output row oy is then the
 * contiguous run at row oy * sh + ky * dh, column ox + (kx * dw) / sw of
 * phase (kx * dw) % sw. Without padding and stride 1 that is x itself. */
typedef struct qg_src {
    const int8_t *base;   /* channel 0, phase 0 */
    int64_t cstride, pstride, Hp, Wq;
} qg_src;

static void qg_src_dims(const cpu_conv *c, int64_t *Hp, int64_t *Wq)
{
    *Hp = (c->OH - 1) * c->sh + (c->kh - 1) * c->dh + 1;
    int64_t Wp = (c->OW - 1) * c->sw + (c->kw - 1) * c->dw + 1;
    *Wq = (Wp + c->sw - 1) / c->sw;
}

static int qg_src_direct(const cpu_conv *c)
{
    return c->ph == 0 && c->pw == 0 && c->sw == 1;
}

static size_t qg_src_bytes(const cpu_conv *c)
{
    if (qg_src_direct(c))
        return 0;
    int64_t Hp, Wq;
    qg_src_dims(c, &Hp, &Wq);
    return (size_t)(c->C * c->sw * Hp * Wq) + 64;
}

typedef struct src_job {
    const cpu_conv *c;
    const int8_t *x;   /* the image */
    int8_t *dst;
    int64_t Hp, Wq;
    int8_t xz;
} src_job;

/* d[q] = x[q * 2 + p] for q in [lo, hi): the stride-2 gather of a phase row */
CPU_MULTI(src_gather2, (int8_t *restrict d, const int8_t *restrict x, int64_t lo, int64_t hi), (d, x, lo, hi), {
    for (int64_t q = lo; q < hi; q++)
        d[q] = x[q * 2];
})

static void src_channels(void *arg, int64_t c0, int64_t c1, int thread)
{
    const src_job *j = arg;
    const cpu_conv *c = j->c;
    int64_t sw = c->sw;
    /* only the phases and rows some tap reads (a 1x1 stride-2 conv reads a quarter) */
    unsigned phases = 0;
    for (int64_t kx = 0; kx < c->kw && kx < 64; kx++)
        phases |= 1u << ((kx * c->dw) % sw % 32);
    for (int64_t ch = c0; ch < c1; ch++) {
        const int8_t *xc = j->x + ch * c->H * c->W;
        for (int64_t p = 0; p < sw; p++) {
            if (sw <= 32 && !(phases >> p & 1))
                continue;
            for (int64_t i = 0; i < j->Hp; i++) {
                int need = c->sh == 1;
                for (int64_t ky = 0; ky < c->kh && !need; ky++) {
                    int64_t r = i - ky * c->dh;
                    need = r >= 0 && r % c->sh == 0 && r / c->sh < c->OH;
                }
                if (!need)
                    continue;
                int8_t *d = j->dst + ((ch * sw + p) * j->Hp + i) * j->Wq;
                int64_t iy = i - c->ph;
                if (iy < 0 || iy >= c->H) {
                    memset(d, j->xz, (size_t)j->Wq);
                    continue;
                }
                const int8_t *xr = xc + iy * c->W;
                /* column q of phase p is padded column q * sw + p, input column that - pw */
                int64_t lo, hi;
                cpu_valid_range(j->Wq, c->W, sw, c->pw, p, &lo, &hi);
                if (lo > 0)
                    memset(d, j->xz, (size_t)lo);
                if (sw == 1)
                    memcpy(d + lo, xr + lo - c->pw, (size_t)(hi - lo));
                else if (sw == 2)
                    src_gather2(d, xr + p - c->pw, lo, hi);
                else
                    for (int64_t q = lo; q < hi; q++)
                        d[q] = xr[q * sw + p - c->pw];
                if (hi < j->Wq)
                    memset(d + hi, j->xz, (size_t)(j->Wq - hi));
            }
        }
    }
}

typedef struct qconv_job {
    const cpu_conv *c;
    const qg_prep *p;
    qg_src src;
    const int8_t *zero;   /* a row of zeros: the taps past K */
    int64_t *koff;        /* [Kq * 4]: see qconv_pack */
    const int8_t *xend;   /* the end of x when the packing reads it directly, else NULL */
    uint8_t *xsh;         /* small images: every block packed once, shared by the tasks (NULL: per task) */
    int8_t *y;            /* this image's output */
    char *tws;            /* per-thread scratch */
    size_t tbytes;
    int64_t mb, nmb, nob, obper;   /* column block size and count, row-block chunks */
} qconv_job;

/* Packs columns [m0, m0 + len) of group g into xp. koff[k]: where tap k
 * (channel of the group, ky, kx) starts relative to the group's first
 * channel, or -1 past K. */
static void qconv_pack(const qconv_job *j, int64_t g, int64_t m0, int64_t len, uint8_t *xp)
{
    const cpu_conv *c = j->c;
    const qg_prep *p = j->p;
    int64_t end = m0 + len;
    /* the block's runs along output rows: start offset in a tap's plane, length */
    enum { MAXSEG = QG_NSUB * NR_MAX + 2 };
    int64_t soff[MAXSEG], slen[MAXSEG], nseg = 0, rowstep = c->sh * j->src.Wq;
    for (int64_t m = m0; m < end && nseg < MAXSEG;) {
        int64_t oy = m / c->OW, ox = m % c->OW, n = c->OW - ox;
        if (n > end - m)
            n = end - m;
        soff[nseg] = oy * rowstep + ox, slen[nseg++] = n;
        m += n;
    }
    const int8_t *gbase = j->src.base + g * c->Cg * j->src.cstride;
    int64_t xs = qg_xstride(j->mb);
    for (int64_t q = 0; q < p->Kq; q++) {
        const int64_t *ko = j->koff + q * 4;
        uint8_t *d = xp + q * xs;
        for (int64_t i = 0; i < nseg; i++) {
            const int8_t *sp[4];
            for (int t = 0; t < 4; t++)
                sp[t] = ko[t] < 0 ? j->zero : gbase + ko[t] + soff[i];
            interleave_row(sp, slen[i], d, p->lv.flip, j->xend);
            d += slen[i] * 4;
        }
    }
}

/* blocks [b0, b1) into the shared area */
static void qconv_pack_shared(void *arg, int64_t b0, int64_t b1, int thread)
{
    const qconv_job *j = arg;
    const cpu_conv *c = j->c;
    int64_t xs = qg_xstride(j->mb);
    for (int64_t blk = b0; blk < b1; blk++) {
        int64_t mbi = blk % j->nmb, g = blk / j->nmb, m0 = mbi * j->mb;
        qconv_pack(j, g, m0, c->P - m0 < j->mb ? c->P - m0 : j->mb, j->xsh + blk * j->p->Kq * xs);
    }
}

static void qconv_tasks(void *arg, int64_t t0, int64_t t1, int thread)
{
    const qconv_job *j = arg;
    const cpu_conv *c = j->c;
    const qg_prep *p = j->p;
    uint8_t *own = (uint8_t *)(j->tws + (size_t)thread * j->tbytes), *xp = own;
    int64_t Kq = p->Kq, nr = p->lv.nr, mr = p->lv.mr, xs = qg_xstride(j->mb);
    int64_t packed = -1;   /* (group, column block) whose X is in xp */
    for (int64_t t = t0; t < t1; t++) {
        int64_t ob = t % j->nob, blk = t / j->nob;
        int64_t mbi = blk % j->nmb, g = blk / j->nmb;
        int64_t m0 = mbi * j->mb, len = c->P - m0 < j->mb ? c->P - m0 : j->mb;
        if (j->xsh) {
            xp = j->xsh + blk * Kq * xs;
        } else if (packed != blk) {
            qconv_pack(j, g, m0, len, xp);
            packed = blk;
        }
        int64_t b0 = ob * j->obper, b1 = b0 + j->obper < p->Ob ? b0 + j->obper : p->Ob;
        int8_t *yg = j->y + g * c->Og * c->P;
        for (int64_t s = 0; s * nr < len; s++) {
            int64_t mc = m0 + s * nr, cols = c->P - mc < nr ? c->P - mc : nr;
            const uint8_t *xsub = xp + s * nr * 4;
            for (int64_t b = b0; b < b1; b++) {
                int64_t r0 = b * mr, rows = c->Og - r0 < mr ? c->Og - r0 : mr, wrs, wqs;
                const int8_t *wb = qg_wblock(p, g, b, &wrs, &wqs);
                p->lv.ukr(xsub, xs, wb, wrs, wqs, Kq, p->rows + g * p->Ob * mr + r0, &p->e,
                          (int)rows, (int)cols, yg + r0 * c->P + mc, c->P);
            }
        }
    }
}

/* ---------------------------------------------------------------- depthwise */

typedef struct dw_job {
    const cpu_conv *c;
    const int8_t *x, *w;
    int8_t *y;
    char *tws;
    size_t tbytes;
    int32_t xz;
    const qg_row *rows;   /* channel ch at rows[ch * rstride] */
    int64_t rstride;
    qg_epi e;
} dw_job;

CPU_MULTI(dw_acc_row,
          (int32_t *restrict acc, const int16_t *restrict r, int64_t n, int64_t s, int32_t wv), (acc, r, n, s, wv), {
              if (s == 1)
                  for (int64_t i = 0; i < n; i++)
                      acc[i] += r[i] * wv;
              else
                  for (int64_t i = 0; i < n; i++)
                      acc[i] += r[i * s] * wv;
          })

/* d[i] = x[i] - xz */
CPU_MULTI(dw_widen, (int16_t *restrict d, const int8_t *restrict x, int64_t n, int32_t xz), (d, x, n, xz), {
    for (int64_t i = 0; i < n; i++)
        d[i] = (int16_t)(x[i] - xz);
})

/* y[i] from acc[i] + off, requantized: the micro-kernels' epilogues */
static void qg_requant_row(const int32_t *acc, int64_t n, const qg_row *r, const qg_epi *e, int8_t *y)
{
    int64_t i = 0;
#if QG_X86
    int l = mge_cpu_int8();
    if (l >= MGE_INT8_AVX512VNNI) {
        for (; i < n; i += 16)
            epi_zmm_at(acc + i, r, e, y + i, n - i);
        return;
    }
    if (l >= MGE_INT8_AVX2)
        for (; i + 8 <= n; i += 8)
            epi_ymm_at(acc + i, r, e, y + i);
#endif
    for (; i < n; i++)
        y[i] = qg_out((int32_t)((uint32_t)acc[i] + (uint32_t)r->off), r, e);
}

#if QG_X86
/* One output row of a depthwise conv, 16 (AVX2) or 32 (AVX-512) outputs at
 * a time kept in registers over all taps: taps in pairs through vpmaddwd
 * on interleaved int16 (|x - xz| <= 255, |w| <= 128: a pair sum fits
 * int32). tap[t]: the tap's start in the plane for this row; w2[t / 2]:
 * the pair's weights as two int16. Reads up to 31 int16 past a row's OW
 * (the plane has room). */
static QG_AVX2 void dw_row_avx2(const int16_t *pad, const int64_t *tap, const int32_t *w2, int64_t ntap, int64_t OW,
                                const qg_row *rp, const qg_epi *e, int8_t *y)
{
    const __m256i off = _mm256_set1_epi32(rp->off);
    for (int64_t x0 = 0; x0 < OW; x0 += 16) {
        __m256i lo = _mm256_setzero_si256(), hi = lo;
        for (int64_t t = 0; t < ntap; t += 2) {
            __m256i va = _mm256_loadu_si256((const __m256i *)(pad + tap[t] + x0));
            __m256i vb = _mm256_loadu_si256((const __m256i *)(pad + tap[t + 1] + x0));
            __m256i wv = _mm256_set1_epi32(w2[t / 2]);
            lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_unpacklo_epi16(va, vb), wv));
            hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_unpackhi_epi16(va, vb), wv));
        }
        /* unpacks work within 128-bit lanes: lo = outputs 0-3, 8-11, hi = 4-7, 12-15 */
        __m256i o0 = _mm256_permute2x128_si256(lo, hi, 0x20), o1 = _mm256_permute2x128_si256(lo, hi, 0x31);
        epi_ymm(_mm256_add_epi32(o0, off), rp, e, y + x0, (int)(OW - x0 < 8 ? OW - x0 : 8));
        epi_ymm(_mm256_add_epi32(o1, off), rp, e, y + x0 + 8, (int)(OW - x0 - 8));
    }
}

static QG_512 void dw_row_512(const int16_t *pad, const int64_t *tap, const int32_t *w2, int64_t ntap, int64_t OW,
                              const qg_row *rp, const qg_epi *e, int8_t *y)
{
    const __m512i i0 = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0), i1 = _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4);
    for (int64_t x0 = 0; x0 < OW; x0 += 32) {
        __m512i lo = _mm512_setzero_si512(), hi = lo;
        for (int64_t t = 0; t < ntap; t += 2) {
            __m512i va = _mm512_loadu_si512(pad + tap[t] + x0), vb = _mm512_loadu_si512(pad + tap[t + 1] + x0);
            __m512i wv = _mm512_set1_epi32(w2[t / 2]);
            lo = _mm512_add_epi32(lo, _mm512_madd_epi16(_mm512_unpacklo_epi16(va, vb), wv));
            hi = _mm512_add_epi32(hi, _mm512_madd_epi16(_mm512_unpackhi_epi16(va, vb), wv));
        }
        /* per 128-bit lane k: lo holds outputs 8k..8k+3, hi 8k+4..8k+7 */
        __m512i o0 = _mm512_permutex2var_epi64(lo, i0, hi), o1 = _mm512_permutex2var_epi64(lo, i1, hi);
        int64_t n = OW - x0;
        epi_zmm(o0, rp, e, y + x0, zmask((int)(n < 16 ? n : 16)));
        epi_zmm(o1, rp, e, y + x0 + 16, zmask((int)(n - 16 < 16 ? n - 16 : 16)));
    }
}
#endif

static void dw_tasks(void *arg, int64_t t0, int64_t t1, int thread)
{
    const dw_job *j = arg;
    const cpu_conv *c = j->c;
    char *ws = j->tws + (size_t)thread * j->tbytes;
    int16_t *pad = (int16_t *)(void *)ws;
    int64_t Hp, Wq, sw = c->sw;
    dw_dims(c, &Hp, &Wq);
    int32_t *acc = (int32_t *)(void *)(ws + QG_AL((size_t)dw_plane(c) * 2));
    int64_t *tap = (int64_t *)(void *)((char *)acc + QG_AL((size_t)c->OW * 4 + 64));
    int32_t *w2 = (int32_t *)(void *)(tap + c->ksz + 1);
    int vec = QG_X86 ? mge_cpu_int8() : 0;
    (void)vec;
    for (int64_t t = t0; t < t1; t++) {
        int64_t ch = t % c->C, img = t / c->C;
        const int8_t *xc = j->x + (img * c->C + ch) * c->H * c->W;
        for (int64_t p = 0; p < sw; p++)
            for (int64_t i = 0; i < Hp; i++) {
                int16_t *d = pad + (p * Hp + i) * Wq;
                int64_t iy = i - c->ph, lo, hi;
                if (iy < 0 || iy >= c->H) {
                    memset(d, 0, (size_t)Wq * 2);
                    continue;
                }
                const int8_t *xr = xc + iy * c->W;
                cpu_valid_range(Wq, c->W, sw, c->pw, p, &lo, &hi);
                memset(d, 0, (size_t)lo * 2);
                memset(d + hi, 0, (size_t)(Wq - hi) * 2);
                if (sw == 1)
                    dw_widen(d + lo, xr + lo - c->pw, hi - lo, j->xz);
                else
                    for (int64_t q = lo; q < hi; q++)
                        d[q] = (int16_t)(xr[q * sw + p - c->pw] - j->xz);
            }
        memset(pad + sw * Hp * Wq, 0, 64 * 2);   /* the room past the end: read, never used */
        const int8_t *wc = j->w + ch * c->ksz;
        const qg_row *rp = &j->rows[ch * j->rstride];
        /* the taps in pairs (the odd last one with a zero partner) */
        for (int64_t k = 0; k < c->ksz; k += 2) {
            uint32_t hiw = k + 1 < c->ksz ? (uint32_t)(uint16_t)(int16_t)wc[k + 1] << 16 : 0;
            w2[k / 2] = (int32_t)((uint32_t)(uint16_t)(int16_t)wc[k] | hiw);
        }
        int8_t *yc = j->y + (img * c->O + ch) * c->P;
        for (int64_t oy = 0; oy < c->OH; oy++) {
            for (int64_t ky = 0; ky < c->kh; ky++)
                for (int64_t kx = 0; kx < c->kw; kx++) {
                    int64_t cx = kx * c->dw;
                    tap[ky * c->kw + kx] = ((cx % sw) * Hp + oy * c->sh + ky * c->dh) * Wq + cx / sw;
                }
            tap[c->ksz] = tap[0];   /* the zero-weight partner of an odd last tap */
#if QG_X86
            if (vec >= MGE_INT8_AVX512VNNI) {
                dw_row_512(pad, tap, w2, c->ksz, c->OW, rp, &j->e, yc + oy * c->OW);
                continue;
            }
            if (vec >= MGE_INT8_AVX2) {
                dw_row_avx2(pad, tap, w2, c->ksz, c->OW, rp, &j->e, yc + oy * c->OW);
                continue;
            }
#endif
            for (int64_t ox = 0; ox < c->OW; ox++)
                acc[ox] = 0;
            for (int64_t k = 0; k < c->ksz; k++)
                dw_acc_row(acc, pad + tap[k], c->OW, 1, wc[k]);
            qg_requant_row(acc, c->OW, rp, &j->e, yc + oy * c->OW);
        }
    }
}

/* ---------------------------------------------------------------- entry points */

/* Column blocks of one image, and the split of the rows when they are
 * few (small images): then every block is packed once into a shared area
 * (its bytes; 0 when not shared). */
static int64_t qconv_split(const cpu_conv *c, int threads, int nr, int mr, int64_t *mb, int64_t *nmb, int64_t *nob,
                           int64_t *obper)
{
    *mb = qg_mb(c->P, c->K, nr);
    *nmb = (c->P + *mb - 1) / *mb;
    int64_t blocks = c->G * *nmb, Ob = (c->Og + mr - 1) / mr;
    *nob = 1, *obper = Ob;
    if (blocks >= 4 * threads || Ob <= 1)
        return 0;
    int64_t want = (4 * threads + blocks - 1) / blocks;
    if (want > Ob)
        want = Ob;
    *obper = (Ob + want - 1) / want;
    *nob = (Ob + *obper - 1) / *obper;
    return *nob > 1 ? blocks * ((c->K + 3) / 4) * qg_xstride(*mb) : 0;
}

static size_t qconv_xsh_bytes(const cpu_conv *c, int threads)
{
    static const int nrs[][2] = {{ANY_NR, ANY_MR}, {24, 4}, {16, 4}};
    int64_t mb, nmb, nob, obper, most = 0;
    for (int i = 0; i < 3; i++) {
        int64_t b = qconv_split(c, threads, nrs[i][0], nrs[i][1], &mb, &nmb, &nob, &obper);
        most = b > most ? b : most;
    }
    return (size_t)most;
}

/* scratch of qconv2d: packed W and row params, the padded input of one
 * image and a zero row (GEMM only), then per thread its own part */
static size_t qconv_bytes(const cpu_conv *c, int threads, size_t *prep, size_t *shared, size_t *per)
{
    int dw = qg_is_dw(c);
    *prep = QG_AL(qg_prep_bytes(c->G, c->Og, c->K));
    *shared = dw ? 0 : QG_AL(qg_src_bytes(c)) + QG_AL((size_t)c->OW + 64) + QG_AL((size_t)(c->K + 4) * 8);
    if (!dw)
        *shared += QG_AL(qconv_xsh_bytes(c, threads));
    *per = QG_AL(dw ? dw_thread_bytes(c) : qg_thread_bytes(c->P, c->K));
    return *prep + *shared + (size_t)(threads > 0 ? threads : 1) * *per + 64;
}

static size_t qconv_ws(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, int threads)
{
    cpu_conv c;
    cpu_conv_shape(n, in[0], in[1], out[0], &c);
    size_t ref = cpu_ref_ws(n, in, out, threads), a, b, d;
    size_t need = qconv_bytes(&c, threads, &a, &b, &d);
    return need > ref ? need : ref;
}

static mge_status cpu_qconv2d(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                              mge_error *err)
{
    cpu_conv c;
    cpu_conv_shape(n, in[0], in[1], out[0], &c);
    if (!qg_supported(n, in, c.O) || c.P == 0 || c.K == 0)
        return cpu_fallback(ctx, n, in, out, err);
    int threads = ctx->pool ? mge_pool_size(ctx->pool) : 1;
    size_t prep, shared, per;
    size_t need = qconv_bytes(&c, threads, &prep, &shared, &per);
    if (!ctx->ws || ctx->ws_size < need)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: scratch of %zu bytes, need %zu", mge_op_info(n->op)->name,
                             ctx->ws_size, need);
    const mge_tensor *bias = n->nin > 2 ? in[2] : NULL;
    char *sh = (char *)ctx->ws + prep, *tws = sh + shared;
    int8_t xz = (int8_t)mge_node_int(n, MGE_KEY_x_zero, 0);
    const int8_t *x = in[0]->data;
    if (qg_is_dw(&c)) {
        /* the row params only: K = ksz, one row per channel (MR rows per block) */
        qg_prep p;
        if (!qg_prepare(ctx, n, in[1], bias, c.G, 1, c.ksz, ctx->ws, &p))
            return cpu_fallback(ctx, n, in, out, err);
        /* qg_prepare's off holds the packing's correction; the direct kernel
         * subtracts x_zero itself, so off is the bias alone */
        int64_t rs = p.Ob * p.lv.mr;
        for (int64_t ch = 0; ch < c.C; ch++)
            p.rows[ch * rs].off = bias ? ((const int32_t *)bias->data)[ch] : 0;
        dw_job j = {&c, x, in[1]->data, out[0]->data, tws, per, xz, p.rows, rs, p.e};
        cpu_parallel(ctx, c.N * c.C, 1, dw_tasks, &j);
        return MGE_OK;
    }
    qg_prep p;
    if (!qg_prepare(ctx, n, in[1], bias, c.G, c.Og, c.K, ctx->ws, &p))
        return cpu_fallback(ctx, n, in, out, err);
    qconv_job j = {&c, &p, {0}, NULL, NULL, NULL, NULL, NULL, tws, per, 0, 0, 1, p.Ob};
    if (qg_src_direct(&c))
        j.xend = x + c.N * c.C * c.H * c.W;
    int8_t *zero = (int8_t *)sh + QG_AL(qg_src_bytes(&c));
    memset(zero, 0, (size_t)c.OW + 64);
    j.zero = zero;
    j.koff = (int64_t *)(void *)(zero + QG_AL((size_t)c.OW + 64));
    int64_t xsh = qconv_split(&c, threads, p.lv.nr, p.lv.mr, &j.mb, &j.nmb, &j.nob, &j.obper);
    int64_t blocks = c.G * j.nmb;
    if (xsh)
        j.xsh = (uint8_t *)(void *)(j.koff + QG_AL((size_t)(c.K + 4) * 8) / 8);
    int64_t Hp, Wq;
    qg_src_dims(&c, &Hp, &Wq);
    for (int64_t img = 0; img < c.N; img++) {
        const int8_t *xi = x + img * c.C * c.H * c.W;
        if (qg_src_direct(&c)) {
            j.src = (qg_src){xi, c.H * c.W, 0, c.H, c.W};
        } else {
            src_job sj = {&c, xi, (int8_t *)sh, Hp, Wq, xz};
            cpu_parallel(ctx, c.C, (65536 + Hp * Wq * c.sw) / (Hp * Wq * c.sw + 1), src_channels, &sj);
            j.src = (qg_src){(const int8_t *)sh, c.sw * Hp * Wq, Hp * Wq, Hp, Wq};
        }
        if (img == 0) {   /* tap k = (channel, ky, kx) of the group: its start (no divisions per k) */
            int64_t k = 0;
            for (int64_t kx = 0; kx < c.kw; kx++) {   /* the first channel's taps, column part */
                int64_t cx = kx * c.dw;
                for (int64_t ky = 0; ky < c.kh; ky++)
                    j.koff[ky * c.kw + kx] = (cx % c.sw) * j.src.pstride + ky * c.dh * j.src.Wq + cx / c.sw;
            }
            for (k = c.ksz; k < c.K; k++)
                j.koff[k] = j.koff[k - c.ksz] + j.src.cstride;
            for (; k < p.Kq * 4; k++)
                j.koff[k] = -1;
        }
        j.y = (int8_t *)out[0]->data + img * c.O * c.P;
        if (j.xsh)
            cpu_parallel(ctx, blocks, 1, qconv_pack_shared, &j);
        cpu_parallel(ctx, blocks * j.nob, 1, qconv_tasks, &j);
    }
    return MGE_OK;
}

/* ---------------------------------------------------------------- qlinear */

typedef struct qlin_job {
    const qg_prep *p;
    const int8_t *x;
    int8_t *y;
    char *tws;
    size_t tbytes;
    int64_t M, O, mb, nmb, nob, obper;
} qlin_job;

static void qlin_tasks(void *arg, int64_t t0, int64_t t1, int thread)
{
    const qlin_job *j = arg;
    const qg_prep *p = j->p;
    char *ws = j->tws + (size_t)thread * j->tbytes;
    int64_t Kq = p->Kq, K = p->K, nr = p->lv.nr, mr = p->lv.mr, xs = qg_xstride(j->mb);
    uint8_t *xp = (uint8_t *)ws;
    int8_t *tile = (int8_t *)ws + Kq * xs;
    uint8_t f = p->lv.flip ? 0x80 : 0;
    int64_t packed = -1;
    for (int64_t t = t0; t < t1; t++) {
        int64_t ob = t % j->nob, mbi = t / j->nob;
        int64_t m0 = mbi * j->mb, len = j->M - m0 < j->mb ? j->M - m0 : j->mb;
        if (packed != mbi) {
            /* column m of X^T is row m of x: quads are 4 consecutive bytes */
            for (int64_t i = 0; i < len; i++) {
                uint8_t *d = xp + i * 4;
                const uint8_t *sx = (const uint8_t *)j->x + (m0 + i) * K;
                for (int64_t q = 0; q < Kq; q++)
                    for (int b = 0; b < 4; b++)
                        d[q * xs + b] = q * 4 + b < K ? sx[q * 4 + b] ^ f : 0;
            }
            packed = mbi;
        }
        int64_t b0 = ob * j->obper, b1 = b0 + j->obper < p->Ob ? b0 + j->obper : p->Ob;
        for (int64_t s = 0; s * nr < len; s++) {
            int64_t mc = m0 + s * nr, cols = j->M - mc < nr ? j->M - mc : nr;
            for (int64_t b = b0; b < b1; b++) {
                int64_t r0 = b * mr, rows = j->O - r0 < mr ? j->O - r0 : mr, wrs, wqs;
                const int8_t *wb = qg_wblock(p, 0, b, &wrs, &wqs);
                p->lv.ukr(xp + s * nr * 4, xs, wb, wrs, wqs, Kq, p->rows + r0, &p->e, (int)rows,
                          (int)cols, tile, nr);
                for (int64_t r = 0; r < rows; r++)
                    for (int64_t i = 0; i < cols; i++)
                        j->y[(mc + i) * j->O + r0 + r] = tile[r * nr + i];
            }
        }
    }
}

static void qlin_dims(mge_tensor *const *in, int64_t *M, int64_t *K, int64_t *O)
{
    const mge_tensor *x = in[0];
    *K = x->ndim ? x->dims[x->ndim - 1] : 1;
    *O = in[1]->dims[0];
    *M = *K ? mge_tensor_numel(x) / *K : 0;
}

static size_t qlin_ws(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, int threads)
{
    int64_t M, K, O;
    qlin_dims(in, &M, &K, &O);
    size_t ref = cpu_ref_ws(n, in, out, threads);
    size_t need = qg_prep_bytes(1, O, K) + (size_t)(threads > 0 ? threads : 1) *
                                               ((qg_thread_bytes(M, K) + 63) & ~(size_t)63) + 128;
    return need > ref ? need : ref;
}

static mge_status cpu_qlinear(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                              mge_error *err)
{
    int64_t M, K, O;
    qlin_dims(in, &M, &K, &O);
    if (!qg_supported(n, in, O) || M == 0 || K == 0 || in[1]->ndim != 2 || in[1]->dims[1] != K)
        return cpu_fallback(ctx, n, in, out, err);
    int threads = ctx->pool ? mge_pool_size(ctx->pool) : 1;
    size_t prep = qg_prep_bytes(1, O, K), per = (qg_thread_bytes(M, K) + 63) & ~(size_t)63;
    size_t need = prep + (size_t)threads * per + 128;
    if (!ctx->ws || ctx->ws_size < need)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: scratch of %zu bytes, need %zu", mge_op_info(n->op)->name,
                             ctx->ws_size, need);
    qg_prep p;
    if (!qg_prepare(ctx, n, in[1], n->nin > 2 ? in[2] : NULL, 1, O, K, ctx->ws, &p))
        return cpu_fallback(ctx, n, in, out, err);
    qlin_job j = {&p, in[0]->data, out[0]->data, (char *)ctx->ws + ((prep + 63) & ~(size_t)63), per, M, O, 0, 0, 1,
                  p.Ob};
    j.mb = qg_mb(M, K, p.lv.nr);
    j.nmb = (M + j.mb - 1) / j.mb;
    if (j.nmb < 4 * threads && p.Ob > 1) {
        int64_t want = (4 * threads + j.nmb - 1) / j.nmb;
        if (want > p.Ob)
            want = p.Ob;
        j.obper = (p.Ob + want - 1) / want;
        j.nob = (p.Ob + j.obper - 1) / j.obper;
    }
    cpu_parallel(ctx, j.nmb * j.nob, 1, qlin_tasks, &j);
    return MGE_OK;
}

void mge_cpu_register_qgemm(mge_backend *b)
{
    mge_cpu_int8();   /* decided once, before any kernel runs on pool threads */
    b->k[MGE_OP_QCONV2D][MGE_QS8] = (mge_kernel){cpu_qconv2d, qconv_ws};
    b->k[MGE_OP_QLINEAR][MGE_QS8] = (mge_kernel){cpu_qlinear, qlin_ws};
}
