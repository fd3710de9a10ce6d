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
 * split the rows of W over the threads instead (a task: a chunk of rows
 * over all the columns).
 * Per output row o the constant part of acc is folded into
 * off[o] = bias[o] - corr * rowsum(w[o]); the multipliers and row sums are
 * made in the packing tasks (in parallel). The row-sum pass costs about 1%
 * of an int8 resnet18 (perf, VNNI, weights warm in L3).
 *
 * The levels (mge_cpu_int8()):
 *  - AMX (cpu_qgemm_amx.c): tdpbusd on 2 x 2 tiles of 16 x 16 int32, a
 *    block of 32 rows x 32 columns. tdpbusd takes u8 from its A tile (W)
 *    and s8 from B (the packed X block, read as it is), so W is packed as
 *    u8 w ^ 0x80 in rows of K rounded up to 64 (zeros past K), x stays raw
 *    (corr = x_zero) and each packed block carries one more row of int32
 *    -128 * colsum(x) per column. Inference executors prepare the packed W
 *    and row params once (qconv_prepare, qlin_prepare: ctx->prepared);
 *    other callers pack per call. Every task loads the tile config (it is
 *    per thread) and releases the tiles. Faster than AVX-512 VNNI at every
 *    size measured (7x7 images, qlinear with 4 rows), so no size gate.
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
 *    give wrong sums (vpsignb cannot negate it, pairs may saturate).
 *    AVX2, wide: x - x_zero and W as int16 pairs of taps (a 4-byte unit
 *    holds 2 taps, Kq = K/2 units), vpmaddwd + vpaddd: 8 MACs per ALU
 *    instruction like the sign trick, but fewer on the multiply ports, no
 *    row sums, and exact for any weight. W is repacked as int16 on every
 *    call, so it is used for images of QG_WIDE_MIN_M columns or more and for
 *    weights holding -128 (seen in the sign trick's row-sum pass, at this
 *    level only; the call then packs again); the sign trick reads W in
 *    place for the rest. It reaches about 24
 *    MAC/cycle (16 ALU uops per 128 MACs on 3 ports): the ceiling of
 *    AVX2 integer dot products without VNNI.
 *  - portable: plain C on the same packing (raw x, corr = x_zero).
 * The requantization is vectorized along m: (acc * mult + 2^30) >> 31 from
 * vpmuldq on even and odd lanes (64-bit products) blended back, the
 * rounding shift (t >> s) + ((t >> (s - 1)) & 1), + y_zero, clamp, narrow.
 *
 * Depthwise convs (groups = C = O) use a direct kernel (cpu_qdepthwise.c,
 * no GEMM); other grouped convs a GEMM per group. qlinear with at most
 * QG_GEMV_M rows of x runs as dot products (GEMV, see there).
 * Work is split over (group, column block, row block) tiles, one image
 * after the other; every output is computed by the same code whatever the
 * split, so any thread count gives the same bytes. */
#include "cpu_qint8.h"

#include <stdatomic.h>
#include <stdlib.h>

enum { MR_MAX = 32, NR_MAX = 48 };

/* rows x cols of C (rows <= MR, cols <= NR) from xp [Kq][NR][4] and
 * W (row r, quad q at wp + r * wrs + q * wqs: packed [Kq][MR][4] or W
 * itself), requantized into y (row stride ldy). */
typedef void (*qg_ukr_fn)(const uint8_t *xp, int64_t xs, const int8_t *wp, int64_t wrs, int64_t wqs, int64_t Kq,
                          const qg_row *rp, const qg_epi *e, int rows, int cols, int8_t *y, int64_t ldy);

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

/* AVX2, wide: x - x_zero as int16 pairs of taps ([unit][NR][2]), W packed
 * as int16 pairs ([unit][MR][2]); vpmaddwd sums a pair exactly into int32
 * (|x - xz| <= 255, any weight), so no row sums and no sign trick. 4 rows
 * x 16 columns: 8 accumulators, 2 x, 1 w. The step is written in asm:
 * GCC adds into a fresh register and copies it back (8 extra instructions
 * a step for 22 useful ones), and this kernel is bound by issue. */
static QG_AVX2 void ukr_avx2w(const uint8_t *xp, int64_t xs, const int8_t *wp, int64_t wrs, int64_t wqs, int64_t Kq,
                              const qg_row *rp, const qg_epi *e, int rows, int cols, int8_t *y, int64_t ldy)
{
    Y_DECL;
    for (int64_t q = 0; q < Kq; q++, xp += xs, wp += wqs) {
        __asm__("vmovdqu (%[x]), %%ymm12\n\t"
                "vmovdqu 32(%[x]), %%ymm13\n\t"
                "vpbroadcastd (%[w0]), %%ymm14\n\t"
                "vpmaddwd %%ymm14, %%ymm12, %%ymm15\n\t"
                "vpaddd %%ymm15, %[c00], %[c00]\n\t"
                "vpmaddwd %%ymm14, %%ymm13, %%ymm15\n\t"
                "vpaddd %%ymm15, %[c01], %[c01]\n\t"
                "vpbroadcastd (%[w1]), %%ymm14\n\t"
                "vpmaddwd %%ymm14, %%ymm12, %%ymm15\n\t"
                "vpaddd %%ymm15, %[c10], %[c10]\n\t"
                "vpmaddwd %%ymm14, %%ymm13, %%ymm15\n\t"
                "vpaddd %%ymm15, %[c11], %[c11]\n\t"
                "vpbroadcastd (%[w2]), %%ymm14\n\t"
                "vpmaddwd %%ymm14, %%ymm12, %%ymm15\n\t"
                "vpaddd %%ymm15, %[c20], %[c20]\n\t"
                "vpmaddwd %%ymm14, %%ymm13, %%ymm15\n\t"
                "vpaddd %%ymm15, %[c21], %[c21]\n\t"
                "vpbroadcastd (%[w3]), %%ymm14\n\t"
                "vpmaddwd %%ymm14, %%ymm12, %%ymm15\n\t"
                "vpaddd %%ymm15, %[c30], %[c30]\n\t"
                "vpmaddwd %%ymm14, %%ymm13, %%ymm15\n\t"
                "vpaddd %%ymm15, %[c31], %[c31]\n\t"
                : [c00] "+x"(c00), [c01] "+x"(c01), [c10] "+x"(c10), [c11] "+x"(c11), [c20] "+x"(c20),
                  [c21] "+x"(c21), [c30] "+x"(c30), [c31] "+x"(c31)
                : [x] "r"(xp), [w0] "r"(wp), [w1] "r"(wp + wrs), [w2] "r"(wp + 2 * wrs), [w3] "r"(wp + 3 * wrs)
                : "xmm12", "xmm13", "xmm14", "xmm15", "memory");
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

#if QG_X86
/* The wide level's interleave_row: n columns from 2 source rows as int16
 * pairs (x - xz) at d (4 bytes per column), 16 columns a step; the same
 * junk and read rules as interleave_row. */
static QG_AVX2 void interleave2_row(const int8_t *const *s, int64_t n, uint8_t *d, int32_t xz, const int8_t *lim)
{
    const __m256i z = _mm256_set1_epi16((short)xz);
    for (int64_t i = 0; i < n; i += 16, d += 64) {
        __m128i v0, v1;
        uintptr_t e = (uintptr_t)lim - 16 - (uintptr_t)i;
        if (!lim || i + 16 <= n || ((uintptr_t)s[0] <= e && (uintptr_t)s[1] <= e)) {
            v0 = _mm_loadu_si128((const __m128i *)(s[0] + i));
            v1 = _mm_loadu_si128((const __m128i *)(s[1] + i));
        } else {   /* the end of x: never read past it */
            int8_t b[2][16] = {{0}};
            for (int t = 0; t < 2; t++)
                memcpy(b[t], s[t] + i, (size_t)(n - i));
            v0 = _mm_loadu_si128((const __m128i *)b[0]);
            v1 = _mm_loadu_si128((const __m128i *)b[1]);
        }
        __m256i a = _mm256_sub_epi16(_mm256_cvtepi8_epi16(v0), z), b = _mm256_sub_epi16(_mm256_cvtepi8_epi16(v1), z);
        /* unpacks work per 128-bit lane: lo = columns 0-3, 8-11, hi = 4-7, 12-15 */
        __m256i lo = _mm256_unpacklo_epi16(a, b), hi = _mm256_unpackhi_epi16(a, b);
        _mm256_storeu_si256((__m256i *)d, _mm256_permute2x128_si256(lo, hi, 0x20));
        _mm256_storeu_si256((__m256i *)(d + 32), _mm256_permute2x128_si256(lo, hi, 0x31));
    }
}
#endif

/* ---------------------------------------------------------------- levels */

/* the AMX tile kernel's block: 2 x 2 tiles of 16 x 16 */
enum { QA_MR = 32, QA_NR = 32 };

/* a packed X block: Kq rows of k-quads and one row for the AMX level's
 * column corrections (unused by the others) */
static int64_t qg_brows(int64_t Kq)
{
    return Kq + 1;
}

typedef struct qg_level {
    int mr, nr, flip;   /* flip: x stored as x ^ 0x80 (u8), corr = x_zero + 128 */
    int wide;           /* x - x_zero and W as int16 pairs: a 4-byte unit holds 2 taps, not 4 */
    qg_ukr_fn ukr;
    int tiles;          /* AMX (cpu_qgemm_amx.c): W packed as u8 rows of K rounded up to 64, x raw,
                           a row of column corrections after each packed X block */
} qg_level;

/* AVX2: the wide kernel is the faster one (7-10% from 14x14 images up,
 * 1 thread) but needs W repacked as int16 (twice its bytes) on every call,
 * which images of few columns do not amortize (at 7x7 both run alike):
 * there the sign trick reads W in place. Weights of -128 (which the sign
 * trick cannot take) also go wide. */
enum { QG_WIDE_MIN_M = 150 };

static qg_level qg_pick(int64_t M, int has128)
{
    qg_level l = {BASE_MR, BASE_NR, 0, 0, ukr_base, 0};
#if QG_X86
    switch (mge_cpu_int8()) {
    case MGE_INT8_AMX: l = (qg_level){QA_MR, QA_NR, 0, 0, mge_cpu_qamx_ukr, 1}; break;
    case MGE_INT8_AVX512VNNI: l = (qg_level){Z_MR, Z_NR, 1, 0, ukr_512, 0}; break;
    case MGE_INT8_AVXVNNI: l = (qg_level){Y_MR, V_NR, 1, 0, ukr_vnni, 0}; break;
    case MGE_INT8_AVX2:
        l = M >= QG_WIDE_MIN_M || has128 ? (qg_level){Y_MR, Y_NR, 0, 1, ukr_avx2w, 0}
                                         : (qg_level){Y_MR, Y_NR, 0, 0, ukr_avx2, 0};
        break;
    default: break;
    }
#else
    (void)M, (void)has128;
#endif
    return l;
}

/* taps per 4-byte unit of the packed X and W at this process's level, at
 * the least (scratch is sized with it) */
static int64_t qg_tpu(void)
{
    return QG_X86 && mge_cpu_int8() == MGE_INT8_AVX2 ? 2 : 4;
}

/* units of K (AMX: K rounded up to the A tile's 64 bytes) */
static int64_t qg_units(int64_t K)
{
    if (QG_X86 && mge_cpu_int8() == MGE_INT8_AMX)
        return (K + 63) / 64 * 16;
    int64_t t = qg_tpu();
    return (K + t - 1) / t;
}

/* The tile config is per thread: every task that runs the AMX kernel
 * loads it (and releases the tiles when done). */
static void qg_tiles_begin(const qg_level *l)
{
#if QG_X86
    if (l->tiles)
        mge_cpu_qamx_begin();
#else
    (void)l;
#endif
}

static void qg_tiles_end(const qg_level *l)
{
#if QG_X86
    if (l->tiles)
        mge_cpu_qamx_end();
#else
    (void)l;
#endif
}

/* the largest MR and NR of any level: scratch sized for these fits all */
#if QG_X86
enum { ANY_MR = QA_MR, ANY_NR = Z_NR };
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
    int32_t xz;
    qg_row *rows;               /* [G][Ob * MR] */
    qg_epi e;
} qg_prep;

static size_t qg_prep_bytes(int64_t G, int64_t Og, int64_t K)
{
    /* rows padded to ANY_MR, a multiple of every level's MR */
    int64_t Kq = qg_units(K), rowsp = (Og + ANY_MR - 1) / ANY_MR * ANY_MR;
    return (size_t)(G * rowsp * Kq * 4) + (size_t)(G * rowsp) * sizeof(qg_row) + 128;
}

/* The multiplier of output channel o: x_scale * wscale[o] / y_scale. */
static int qg_qmul(double xs, double ys, const mge_tensor *w, int64_t o, mge_qmul *q)
{
    double wsc = (double)w->q.scale[w->q.axis == 0 ? o : 0];
    return mge_qmul_make(xs * wsc / ys, q);
}

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

/* vpmaddubsw with u8 ones (pairs in int16, |pair| <= 256), vpmaddwd to
 * int32; *has128: whether a weight is -128 (the sign trick's scan, in the
 * same pass) */
static QG_AVX2 int32_t rowsum_avx2(const int8_t *w, int64_t n, int *has128)
{
    __m256i acc = _mm256_setzero_si256(), ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    __m256i m128 = _mm256_set1_epi8(-128), seen = _mm256_setzero_si256();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(w + i));
        seen = _mm256_or_si256(seen, _mm256_cmpeq_epi8(v, m128));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, v), ones16));
    }
    int f = !_mm256_testz_si256(seen, seen);
    __m128i h = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4E));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xB1));
    int32_t t = _mm_cvtsi128_si32(h);
    for (; i < n; i++)
        t += w[i], f |= w[i] == -128;
    *has128 = f;
    return t;
}
#endif

/* the sum of a weight row (int32: exact below 2^24 taps), and whether it
 * holds -128 (the AVX2 levels only; 0 elsewhere) */
static void qg_rowsum(const int8_t *w, int64_t n, int32_t *sum, int *has128)
{
    *has128 = 0;
#if QG_X86
    int l = mge_cpu_int8();
    if (l >= MGE_INT8_AVX512VNNI) {
        *sum = rowsum_512(w, n);
        CPU_VZEROUPPER();   /* cpu.h: GCC leaves the upper halves dirty */
        return;
    }
    if (l >= MGE_INT8_AVX2) {
        *sum = rowsum_avx2(w, n, has128);
        CPU_VZEROUPPER();
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
    const mge_tensor *w;   /* for the multipliers */
    double xs, ys;
    atomic_int *found128;   /* the sign trick: set when a weight is -128 (NULL: no scan) */
} qg_pack_job;

#if QG_X86
/* the wide level's W block: 4 rows (src[r], NULL past O) as int16 pairs
 * [Kq][4][2], zeros past K; 8 units a step (a 4 x 8 transpose of dwords) */
static QG_AVX2 void qg_pack_wide(const int8_t *const *src, int64_t K, int64_t Kq, int8_t *dst)
{
    int64_t q = 0;
    for (; q + 8 <= K / 2; q += 8) {
        __m256i v[4];
        for (int r = 0; r < 4; r++)
            v[r] = src[r] ? _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(src[r] + q * 2)))
                          : _mm256_setzero_si256();
        __m256i t0 = _mm256_unpacklo_epi32(v[0], v[1]), t1 = _mm256_unpacklo_epi32(v[2], v[3]);
        __m256i t2 = _mm256_unpackhi_epi32(v[0], v[1]), t3 = _mm256_unpackhi_epi32(v[2], v[3]);
        __m256i o0 = _mm256_unpacklo_epi64(t0, t1), o1 = _mm256_unpackhi_epi64(t0, t1);
        __m256i o2 = _mm256_unpacklo_epi64(t2, t3), o3 = _mm256_unpackhi_epi64(t2, t3);
        int8_t *d = dst + q * 16;   /* unit u at d + u * 16: units q..q+3 in the low lanes, q+4..q+7 high */
        _mm_storeu_si128((__m128i *)d, _mm256_castsi256_si128(o0));
        _mm_storeu_si128((__m128i *)(d + 16), _mm256_castsi256_si128(o1));
        _mm_storeu_si128((__m128i *)(d + 32), _mm256_castsi256_si128(o2));
        _mm_storeu_si128((__m128i *)(d + 48), _mm256_castsi256_si128(o3));
        _mm_storeu_si128((__m128i *)(d + 64), _mm256_extracti128_si256(o0, 1));
        _mm_storeu_si128((__m128i *)(d + 80), _mm256_extracti128_si256(o1, 1));
        _mm_storeu_si128((__m128i *)(d + 96), _mm256_extracti128_si256(o2, 1));
        _mm_storeu_si128((__m128i *)(d + 112), _mm256_extracti128_si256(o3, 1));
    }
    for (; q < Kq; q++)
        for (int r = 0; r < 4; r++) {
            int16_t t[2] = {0, 0};
            for (int h = 0; h < 2; h++)
                if (src[r] && q * 2 + h < K)
                    t[h] = src[r][q * 2 + h];
            memcpy(dst + (q * 4 + r) * 4, t, 4);
        }
}
#endif

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
            qg_row *row = &p->rows[g * p->Ob * mr + ol];
            mge_qmul qm;
            qg_qmul(j->xs, j->ys, j->w, o, &qm);   /* in range: checked by qg_prepare */
            row->mult = qm.mult, row->shift = qm.shift;
            int32_t sum = 0;
            int f = 0;
            /* the scan for -128 rides on the row sum's pass, in parallel */
            if (j->corr || j->found128)
                qg_rowsum(src[r], K, &sum, &f);
            if (f && j->found128)
                atomic_store_explicit(j->found128, 1, memory_order_relaxed);
            p->rows[g * p->Ob * mr + ol].off = (int32_t)((j->B ? (uint32_t)j->B[o] : 0u) - j->corr * (uint32_t)sum);
        }
        if (p->direct && (ob + 1) * mr <= p->Og)
            continue;   /* read in place */
#if QG_X86
        if (p->lv.tiles) {
            mge_cpu_qamx_pack_w(src, mr, K, Kq * 4, (uint8_t *)dst);
            CPU_VZEROUPPER();
            continue;
        }
        if (p->lv.wide) {
            qg_pack_wide(src, K, Kq, dst);
            CPU_VZEROUPPER();
            continue;
        }
#endif
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


/* Packs W [O][K] (rows of group g at g*Og) and the row params (M: the
 * columns of C per image, for the choice of kernel; wide: force the AVX2
 * level's wide kernel). 0 when a multiplier is out of range (the caller
 * falls back to the ref kernel), 2 when the sign trick met a weight of
 * -128 (the caller packs again, wide). */
static int qg_prepare_at(const mge_kctx *ctx, const mge_node *n, const mge_tensor *w, const mge_tensor *bias,
                         int64_t G, int64_t Og, int64_t K, int64_t M, int wide, void *ws, qg_prep *p)
{
    const int8_t *W = w->data;
    p->lv = qg_pick(M, wide);
    int mr = p->lv.mr;
    p->G = G, p->Og = Og, p->K = K, p->Ob = (Og + mr - 1) / mr;
    p->Kq = p->lv.tiles ? (K + 63) / 64 * 16 : p->lv.wide ? (K + 1) / 2 : (K + 3) / 4;
    int64_t rowsp = p->Ob * mr;
    p->wp = ws;
    p->W = W;
    p->direct = !p->lv.wide && !p->lv.tiles && K % 4 == 0;
    p->rows = (qg_row *)(void *)((char *)ws + (((size_t)(G * rowsp * p->Kq * 4) + 63) & ~(size_t)63));
    double xs = mge_node_float(n, MGE_KEY_x_scale, 1), ys = mge_node_float(n, MGE_KEY_y_scale, 1);
    int32_t xz = (int32_t)mge_node_int(n, MGE_KEY_x_zero, 0);
    p->xz = xz;
    p->e.yz = (int32_t)mge_node_int(n, MGE_KEY_y_zero, 0);
    mge_q_act_bounds(mge_node_int(n, MGE_KEY_act, -1), ys, p->e.yz, &p->e.lo, &p->e.hi);
    /* mge_qmul_make's range for every row (the multipliers are made in the tasks) */
    for (int64_t o = 0; o < (w->q.axis == 0 ? G * Og : 1); o++) {
        double m = xs * (double)w->q.scale[o] / ys;
        if (!(m >= 0) || !(m < 1))
            return 0;
    }
    for (int64_t g = 0; g < G; g++)
        for (int64_t ol = Og; ol < rowsp; ol++)   /* rows past O: computed, never stored */
            p->rows[g * rowsp + ol] = (qg_row){0, 0, 0};
    atomic_int found;
    atomic_init(&found, 0);
    int scan = QG_X86 && mge_cpu_int8() == MGE_INT8_AVX2 && !p->lv.wide;   /* the sign trick minds -128 */
    /* wide: x - x_zero is packed, acc needs no correction */
    qg_pack_job j = {p,  W,  bias ? bias->data : NULL, p->lv.wide ? 0u : (uint32_t)(xz + (p->lv.flip ? 128 : 0)),
                     w,  xs, ys, scan ? &found : NULL};
    /* 64 KiB of weights or more per task: small layers pack on the caller */
    cpu_parallel(ctx, G * p->Ob, (65536 + K * mr) / (K * mr + 1), qg_pack_blocks, &j);
    return scan && atomic_load(&found) ? 2 : 1;
}

static int qg_prepare(const mge_kctx *ctx, const mge_node *n, const mge_tensor *w, const mge_tensor *bias,
                      int64_t G, int64_t Og, int64_t K, int64_t M, void *ws, qg_prep *p)
{
    int r = qg_prepare_at(ctx, n, w, bias, G, Og, K, M, 0, ws, p);
    return r == 2 ? qg_prepare_at(ctx, n, w, bias, G, Og, K, M, 1, ws, p) : r;
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
    if (p->lv.tiles)
        *wrs = p->Kq * 4, *wqs = 0;   /* rows of Kp bytes */
    else
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

/* The AMX level's prepared state (mge_kernel.prepare: inference with
 * fixed params): W packed as u8 rows and the row params, made once instead
 * of on every call (at the other levels the per-call packing reads W in
 * place, so they keep no state). */
typedef struct qg_state {
    qg_prep p;
    void *mem;
} qg_state;

static void qg_release(void *state)
{
    qg_state *s = state;
    if (s) {
        free(s->mem);
        free(s);
    }
}

static mge_status qg_make_state(const mge_node *n, mge_tensor *const *in, int64_t G, int64_t Og, int64_t K,
                                void **state, mge_error *err)
{
    *state = NULL;
    if (!QG_X86 || mge_cpu_int8() != MGE_INT8_AMX || !in[1] || !in[1]->data || (n->nin > 2 && !in[2]) ||
        G < 1 || Og < 1 || K < 1 || !qg_supported(n, in, G * Og))
        return MGE_OK;
    qg_state *s = calloc(1, sizeof *s);
    /* C11's aligned_alloc wants a multiple of the alignment (kernels take no
     * allocator from the core, tests/layers) */
    size_t bytes = (qg_prep_bytes(G, Og, K) + 63) / 64 * 64;
    void *mem = aligned_alloc(64, bytes ? bytes : 64);
    if (mem)
        memset(mem, 0, bytes);
    if (!s || !mem) {
        free(s);
        free(mem);
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    }
    mge_kctx one;
    memset(&one, 0, sizeof one);
    one.threads = 1;
    s->mem = mem;
    /* 0: a multiplier out of range, the runs fall back without a state */
    if (qg_prepare(&one, n, in[1], n->nin > 2 ? in[2] : NULL, G, Og, K, 0, mem, &s->p) != 1 || !s->p.lv.tiles) {
        qg_release(s);
        return MGE_OK;
    }
    s->p.W = NULL;   /* in[1]'s data is not ours to keep; the tile level never reads W in place */
    *state = s;
    return MGE_OK;
}

/* the prepared params when they fit this call (W is [G * Og][K]) */
static const qg_prep *qg_prepared(const mge_kctx *ctx, int64_t G, int64_t Og, int64_t K)
{
    const qg_state *s = ctx->prepared;
    if (s && s->p.G == G && s->p.Og == Og && s->p.K == K && QG_X86 && mge_cpu_int8() == MGE_INT8_AMX)
        return &s->p;
    return NULL;
}

/* ---------------------------------------------------------------- qconv2d */

/* Column blocks: NR * QG_NSUB columns at most, so a block's packed X stays
 * in L2 for moderate K. */
enum { QG_NSUB = 4 };

static int64_t qg_mb(int64_t M, int64_t K, int nr)
{
    int64_t nsub = (M + nr - 1) / nr;
    int64_t cap = (256 * 1024) / (qg_units(K) * 4 * nr);
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

/* qconv2d's koff: an entry per tap of the packed K (AMX: up to K + 63) */
static size_t qg_koff_bytes(int64_t K)
{
    return (size_t)(K + 64) * 8;
}

static size_t qg_thread_bytes(int64_t M, int64_t K)
{
    /* the largest block any level picks */
    static const int nrs[] = {ANY_NR, QA_NR, 24, 16};
    int64_t Kq = qg_units(K), mb = 0;
    for (int i = 0; i < 4; i++) {
        int64_t b = qg_mb(M, K, nrs[i]);
        mb = b > mb ? b : mb;
    }
    return (size_t)(qg_brows(Kq) * qg_xstride(mb) + ANY_MR * ANY_NR + 256);
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
    int tpu = p->lv.wide ? 2 : 4;
    for (int64_t q = 0; q < p->Kq; q++) {
        const int64_t *ko = j->koff + q * tpu;
        uint8_t *d = xp + q * xs;
        for (int64_t i = 0; i < nseg; i++) {
            const int8_t *sp[4];
            for (int t = 0; t < tpu; t++)
                sp[t] = ko[t] < 0 ? j->zero : gbase + ko[t] + soff[i];
#if QG_X86
            if (p->lv.wide) {
                interleave2_row(sp, slen[i], d, p->xz, j->xend);
                CPU_VZEROUPPER();
            } else
#endif
                interleave_row(sp, slen[i], d, p->lv.flip, j->xend);
            d += slen[i] * 4;
        }
    }
#if QG_X86
    if (p->lv.tiles) {
        mge_cpu_qamx_colsum(xp, xs, p->Kq, len);
        CPU_VZEROUPPER();
    }
#endif
}

/* blocks [b0, b1) into the shared area */
static void qconv_pack_shared(void *arg, int64_t b0, int64_t b1, int thread)
{
    const qconv_job *j = arg;
    const cpu_conv *c = j->c;
    int64_t xs = qg_xstride(j->mb);
    for (int64_t blk = b0; blk < b1; blk++) {
        int64_t mbi = blk % j->nmb, g = blk / j->nmb, m0 = mbi * j->mb;
        qconv_pack(j, g, m0, c->P - m0 < j->mb ? c->P - m0 : j->mb, j->xsh + blk * qg_brows(j->p->Kq) * xs);
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
    qg_tiles_begin(&p->lv);
    if (j->xsh) {
        /* every block is packed: a task is a chunk of rows of a group over
         * all the column blocks (it was a block and a chunk of rows: the
         * few-column blocks, e.g. 1 of 49 at 7x7, made tasks of very
         * uneven cost, and 2 threads ran resnet18's 512x7x7 3x3 at 330
         * GOP/s; now 450) */
        for (int64_t t = t0; t < t1; t++) {
            int64_t ob = t % j->nob, g = t / j->nob;
            int64_t b0 = ob * j->obper, b1 = b0 + j->obper < p->Ob ? b0 + j->obper : p->Ob;
            int8_t *yg = j->y + g * c->Og * c->P;
            for (int64_t mbi = 0; mbi < j->nmb; mbi++) {
                int64_t m0 = mbi * j->mb, len = c->P - m0 < j->mb ? c->P - m0 : j->mb;
                xp = j->xsh + (g * j->nmb + mbi) * qg_brows(Kq) * xs;
                for (int64_t b = b0; b < b1; b++) {
                    int64_t r0 = b * mr, rows = c->Og - r0 < mr ? c->Og - r0 : mr, wrs, wqs;
                    const int8_t *wb = qg_wblock(p, g, b, &wrs, &wqs);
                    for (int64_t s = 0; s * nr < len; s++) {
                        int64_t mc = m0 + s * nr, cols = c->P - mc < nr ? c->P - mc : nr;
                        p->lv.ukr(xp + s * nr * 4, xs, wb, wrs, wqs, Kq, p->rows + g * p->Ob * mr + r0, &p->e,
                                  (int)rows, (int)cols, yg + r0 * c->P + mc, c->P);
                    }
                }
            }
        }
        qg_tiles_end(&p->lv);
        return;
    }
    for (int64_t t = t0; t < t1; t++) {
        int64_t ob = t % j->nob, blk = t / j->nob;
        int64_t mbi = blk % j->nmb, g = blk / j->nmb;
        int64_t m0 = mbi * j->mb, len = c->P - m0 < j->mb ? c->P - m0 : j->mb;
        if (j->xsh) {
            xp = j->xsh + blk * qg_brows(Kq) * xs;
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
    qg_tiles_end(&p->lv);
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
    return *nob > 1 ? blocks * qg_brows(qg_units(c->K)) * qg_xstride(*mb) : 0;
}

static size_t qconv_xsh_bytes(const cpu_conv *c, int threads)
{
    static const int nrs[][2] = {{ANY_NR, 4}, {QA_NR, 4}, {24, 4}, {16, 4}};
    int64_t mb, nmb, nob, obper, most = 0;
    for (int i = 0; i < 4; i++) {
        int64_t b = qconv_split(c, threads, nrs[i][0], nrs[i][1], &mb, &nmb, &nob, &obper);
        most = b > most ? b : most;
    }
    return (size_t)most;
}

/* scratch of qconv2d: packed W and row params, the padded input of one
 * image and a zero row (GEMM only), then per thread its own part */
static size_t qconv_bytes(const cpu_conv *c, int threads, size_t *prep, size_t *shared, size_t *per)
{
    if (qg_is_dw(c)) {
        *prep = 0;
        mge_cpu_qdw_bytes(c, shared, per);
        *shared = QG_AL(*shared);
    } else {
        *prep = QG_AL(qg_prep_bytes(c->G, c->Og, c->K));
        *shared = QG_AL(qg_src_bytes(c)) + QG_AL((size_t)c->OW + 64) + QG_AL(qg_koff_bytes(c->K)) +
                  QG_AL(qconv_xsh_bytes(c, threads));
        *per = QG_AL(qg_thread_bytes(c->P, c->K));
    }
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
    int threads = cpu_threads(ctx);
    size_t prep, shared, per;
    size_t need = qconv_bytes(&c, threads, &prep, &shared, &per);
    if (!ctx->ws || ctx->ws_size < need)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: scratch of %zu bytes, need %zu", mge_kctx_opname(ctx, n),
                             ctx->ws_size, need);
    const mge_tensor *bias = n->nin > 2 ? in[2] : NULL;
    char *sh = (char *)ctx->ws + prep, *tws = sh + shared;
    int8_t xz = (int8_t)mge_node_int(n, MGE_KEY_x_zero, 0);
    const int8_t *x = in[0]->data;
    if (qg_is_dw(&c))
        return mge_cpu_qdw_run(ctx, n, &c, in, out, sh, tws, per) ? MGE_OK : cpu_fallback(ctx, n, in, out, err);
    qg_prep pl;
    const qg_prep *pp = qg_prepared(ctx, c.G, c.Og, c.K);
    if (!pp) {
        if (!qg_prepare(ctx, n, in[1], bias, c.G, c.Og, c.K, c.P, ctx->ws, &pl))
            return cpu_fallback(ctx, n, in, out, err);
        pp = &pl;
    }
    const qg_prep *const p = pp;
    qconv_job j = {&c, p, {0}, NULL, NULL, NULL, NULL, NULL, tws, per, 0, 0, 1, p->Ob};
    if (qg_src_direct(&c))
        j.xend = x + c.N * c.C * c.H * c.W;
    int8_t *zero = (int8_t *)sh + QG_AL(qg_src_bytes(&c));
    memset(zero, 0, (size_t)c.OW + 64);
    j.zero = zero;
    j.koff = (int64_t *)(void *)(zero + QG_AL((size_t)c.OW + 64));
    int64_t xsh = qconv_split(&c, threads, p->lv.nr, p->lv.mr, &j.mb, &j.nmb, &j.nob, &j.obper);
    int64_t blocks = c.G * j.nmb;
    if (xsh) {
        j.xsh = (uint8_t *)(void *)(j.koff + QG_AL(qg_koff_bytes(c.K)) / 8);
        /* tasks are (group, chunk of rows) over all columns: about 4 per thread */
        int64_t want = (4 * threads + c.G - 1) / c.G;
        want = want > p->Ob ? p->Ob : want;
        j.obper = (p->Ob + want - 1) / want;
        j.nob = (p->Ob + j.obper - 1) / j.obper;
    }
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
            for (; k < p->Kq * (p->lv.wide ? 2 : 4); k++)
                j.koff[k] = -1;
        }
        j.y = (int8_t *)out[0]->data + img * c.O * c.P;
        if (j.xsh) {
            cpu_parallel(ctx, blocks, 1, qconv_pack_shared, &j);
            cpu_parallel(ctx, c.G * j.nob, 1, qconv_tasks, &j);
        } else {
            cpu_parallel(ctx, blocks * j.nob, 1, qconv_tasks, &j);
        }
    }
    return MGE_OK;
}

/* ---------------------------------------------------------------- qlinear, few rows of x */

/* GEMV: x has M <= QG_GEMV_M rows, so the GEMM's column panels would be
 * mostly empty (M = 1 ran 16 columns for 1). Each output is a dot product
 * of x with a weight row: the rows of W are streamed once, 4 at a time
 * against x held in cache, and split over the threads in ranges of rows.
 * VNNI levels: vpdpbusd of u8 x ^ 0x80 (zero-padded to 64) with the row,
 * the row sum from vpdpbusd of ones in the same pass (acc = sum - corr *
 * rowsum as in the GEMM); AVX2: x - x_zero widened to int16 once, the row
 * widened with vpmovsxbw, vpmaddwd (exact: |pair| <= 2 * 255 * 128, any
 * weight, -128 included). Row params (multiplier, bias) are made in the
 * tasks. */
enum { QG_GEMV_M = 3, GV_ROWS = 4 };

typedef struct gemv_job {
    const mge_tensor *w;
    const int8_t *W, *x;
    const int32_t *bias;
    int8_t *y;
    const void *xs;   /* x prepared: u8 [M][Kp] (VNNI), int16 [M][Kp] (AVX2) */
    int64_t M, K, O, Kp;
    int32_t xz;
    double xsc, ysc;
    qg_epi e;
    int level;
} gemv_job;

/* dots[m * GV_ROWS + r]: the exact int32 sum of (x - xz) * w over row r */
#if QG_X86
static QG_512 void gemv_512(const gemv_job *j, const int8_t *const *wr, int nr, uint32_t *dots)
{
    const uint8_t *xs = j->xs;
    int64_t K = j->K, Kf = K / 64 * 64;
    __mmask64 tail = K > Kf ? (__mmask64)((1ULL << (K - Kf)) - 1) : 0;
    const __m512i ones = _mm512_set1_epi8(1);
    __m512i s[GV_ROWS];
    for (int r = 0; r < GV_ROWS; r++)
        s[r] = _mm512_setzero_si512();
    for (int64_t m = 0; m < j->M; m++) {
        const uint8_t *xm = xs + m * j->Kp;
        __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
        int first = m == 0;
#define GV_STEP(LOAD)                                                                  \
    {                                                                                  \
        __m512i xv = _mm512_loadu_si512(xm + k);                                       \
        __m512i w0 = LOAD(wr[0]), w1 = LOAD(wr[1]), w2 = LOAD(wr[2]), w3 = LOAD(wr[3]); \
        a0 = _mm512_dpbusd_epi32(a0, xv, w0), a1 = _mm512_dpbusd_epi32(a1, xv, w1);      \
        a2 = _mm512_dpbusd_epi32(a2, xv, w2), a3 = _mm512_dpbusd_epi32(a3, xv, w3);      \
        if (first) {                                                                   \
            s[0] = _mm512_dpbusd_epi32(s[0], ones, w0), s[1] = _mm512_dpbusd_epi32(s[1], ones, w1); \
            s[2] = _mm512_dpbusd_epi32(s[2], ones, w2), s[3] = _mm512_dpbusd_epi32(s[3], ones, w3); \
        }                                                                              \
    }
        int64_t k = 0;
#define GV_FULL(p) _mm512_loadu_si512((p) + k)
#define GV_TAIL(p) _mm512_maskz_loadu_epi8(tail, (p) + k)
        for (; k < Kf; k += 64)
            GV_STEP(GV_FULL)
        if (tail)
            GV_STEP(GV_TAIL)
#undef GV_FULL
#undef GV_TAIL
#undef GV_STEP
        uint32_t corr = (uint32_t)(j->xz + 128);
        uint32_t acc[4] = {(uint32_t)_mm512_reduce_add_epi32(a0), (uint32_t)_mm512_reduce_add_epi32(a1),
                           (uint32_t)_mm512_reduce_add_epi32(a2), (uint32_t)_mm512_reduce_add_epi32(a3)};
        for (int r = 0; r < nr; r++)
            dots[m * GV_ROWS + r] = acc[r] - corr * (uint32_t)_mm512_reduce_add_epi32(s[r]);
    }
}

/* AVX-VNNI: the same with ymm, the tail past a multiple of 32 in C */
static QG_VNNI void gemv_vnni(const gemv_job *j, const int8_t *const *wr, int nr, uint32_t *dots)
{
    const uint8_t *xs = j->xs;
    int64_t K = j->K, Kf = K / 32 * 32;
    const __m256i ones = _mm256_set1_epi8(1);
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
    uint32_t rs[GV_ROWS] = {0, 0, 0, 0};
    for (int64_t m = 0; m < j->M; m++) {
        const uint8_t *xm = xs + m * j->Kp;
        __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t k = 0; k < Kf; k += 32) {
            __m256i xv = _mm256_loadu_si256((const __m256i *)(xm + k));
            __m256i w0 = _mm256_loadu_si256((const __m256i *)(wr[0] + k));
            __m256i w1 = _mm256_loadu_si256((const __m256i *)(wr[1] + k));
            __m256i w2 = _mm256_loadu_si256((const __m256i *)(wr[2] + k));
            __m256i w3 = _mm256_loadu_si256((const __m256i *)(wr[3] + k));
            a0 = _mm256_dpbusd_avx_epi32(a0, xv, w0), a1 = _mm256_dpbusd_avx_epi32(a1, xv, w1);
            a2 = _mm256_dpbusd_avx_epi32(a2, xv, w2), a3 = _mm256_dpbusd_avx_epi32(a3, xv, w3);
            if (m == 0) {
                s0 = _mm256_dpbusd_avx_epi32(s0, ones, w0), s1 = _mm256_dpbusd_avx_epi32(s1, ones, w1);
                s2 = _mm256_dpbusd_avx_epi32(s2, ones, w2), s3 = _mm256_dpbusd_avx_epi32(s3, ones, w3);
            }
        }
        __m256i av[4] = {a0, a1, a2, a3}, sv[4] = {s0, s1, s2, s3};
        uint32_t corr = (uint32_t)(j->xz + 128);
        for (int r = 0; r < nr; r++) {
            uint32_t t[8], u[8], a = 0;
            _mm256_storeu_si256((__m256i *)t, av[r]);
            if (m == 0) {
                _mm256_storeu_si256((__m256i *)u, sv[r]);
                for (int i = 0; i < 8; i++)
                    rs[r] += u[i];
                for (int64_t k = Kf; k < K; k++)
                    rs[r] += (uint32_t)wr[r][k];
            }
            for (int i = 0; i < 8; i++)
                a += t[i];
            for (int64_t k = Kf; k < K; k++)
                a += (uint32_t)xm[k] * (uint32_t)wr[r][k];
            dots[m * GV_ROWS + r] = a - corr * rs[r];
        }
    }
}

static QG_AVX2 void gemv_avx2(const gemv_job *j, const int8_t *const *wr, int nr, uint32_t *dots)
{
    const int16_t *xs = j->xs;
    int64_t K = j->K, Kf = K / 16 * 16;
    for (int64_t m = 0; m < j->M; m++) {
        const int16_t *xm = xs + m * j->Kp;
        __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t k = 0; k < Kf; k += 16) {
            __m256i xv = _mm256_loadu_si256((const __m256i *)(xm + k));
#define GV_W(r) _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(wr[r] + k)))
            a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(xv, GV_W(0)));
            a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(xv, GV_W(1)));
            a2 = _mm256_add_epi32(a2, _mm256_madd_epi16(xv, GV_W(2)));
            a3 = _mm256_add_epi32(a3, _mm256_madd_epi16(xv, GV_W(3)));
#undef GV_W
        }
        __m256i av[4] = {a0, a1, a2, a3};
        for (int r = 0; r < nr; r++) {
            uint32_t t[8], a = 0;
            _mm256_storeu_si256((__m256i *)t, av[r]);
            for (int i = 0; i < 8; i++)
                a += t[i];
            for (int64_t k = Kf; k < K; k++)
                a += (uint32_t)(xm[k] * wr[r][k]);
            dots[m * GV_ROWS + r] = a;
        }
    }
}
#endif

static void gemv_tasks(void *arg, int64_t b0, int64_t b1, int thread)
{
    const gemv_job *j = arg;
    for (int64_t b = b0; b < b1; b++) {
        int64_t o0 = b * GV_ROWS;
        int nr = (int)(j->O - o0 < GV_ROWS ? j->O - o0 : GV_ROWS);
        const int8_t *wr[GV_ROWS];
        for (int r = 0; r < GV_ROWS; r++)   /* past O: row 0 again, its sums unused */
            wr[r] = j->W + (o0 + (r < nr ? r : 0)) * j->K;
        uint32_t dots[QG_GEMV_M * GV_ROWS];
#if QG_X86
        if (j->level >= MGE_INT8_AVX2) {
            if (j->level >= MGE_INT8_AVX512VNNI)
                gemv_512(j, wr, nr, dots);
            else if (j->level >= MGE_INT8_AVXVNNI)
                gemv_vnni(j, wr, nr, dots);
            else
                gemv_avx2(j, wr, nr, dots);
            CPU_VZEROUPPER();
        } else
#endif
            for (int64_t m = 0; m < j->M; m++)
                for (int r = 0; r < nr; r++) {
                    uint32_t a = 0;
                    const int8_t *xm = j->x + m * j->K;
                    for (int64_t k = 0; k < j->K; k++)
                        a += (uint32_t)((xm[k] - j->xz) * wr[r][k]);
                    dots[m * GV_ROWS + r] = a;
                }
        for (int r = 0; r < nr; r++) {
            mge_qmul q;
            qg_qmul(j->xsc, j->ysc, j->w, o0 + r, &q);   /* in range: checked before the tasks */
            qg_row row = {j->bias ? j->bias[o0 + r] : 0, q.mult, q.shift};
            for (int64_t m = 0; m < j->M; m++)
                j->y[m * j->O + o0 + r] = qg_out((int32_t)(dots[m * GV_ROWS + r] + (uint32_t)row.off), &row, &j->e);
        }
    }
}

static size_t gemv_bytes(int64_t M, int64_t K)
{
    return (size_t)(M * ((K + 63) / 64 * 64) * 2) + 64;
}

static void qlin_gemv(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                      int64_t M, int64_t K, int64_t O, void *ws)
{
    gemv_job j = {in[1], in[1]->data, in[0]->data, n->nin > 2 ? in[2]->data : NULL, out[0]->data, ws, M, K, O,
                  (K + 63) / 64 * 64, (int32_t)mge_node_int(n, MGE_KEY_x_zero, 0),
                  mge_node_float(n, MGE_KEY_x_scale, 1), mge_node_float(n, MGE_KEY_y_scale, 1), {0, 0, 0},
                  QG_X86 ? mge_cpu_int8() : 0};
    j.e.yz = (int32_t)mge_node_int(n, MGE_KEY_y_zero, 0);
    mge_q_act_bounds(mge_node_int(n, MGE_KEY_act, -1), j.ysc, j.e.yz, &j.e.lo, &j.e.hi);
    for (int64_t m = 0; m < M; m++) {
        const int8_t *xm = j.x + m * K;
        if (j.level >= MGE_INT8_AVXVNNI) {
            uint8_t *d = (uint8_t *)ws + m * j.Kp;
            for (int64_t k = 0; k < j.Kp; k++)
                d[k] = k < K ? (uint8_t)xm[k] ^ 0x80 : 0;
        } else if (j.level >= MGE_INT8_AVX2) {
            int16_t *d = (int16_t *)ws + m * j.Kp;
            for (int64_t k = 0; k < j.Kp; k++)
                d[k] = (int16_t)(k < K ? xm[k] - j.xz : 0);
        }
    }
    /* 16 KiB of weights or more per task */
    cpu_parallel(ctx, (O + GV_ROWS - 1) / GV_ROWS, 16384 / (K * GV_ROWS) + 1, gemv_tasks, &j);
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
    int8_t *tile = (int8_t *)ws + qg_brows(Kq) * xs;
    uint8_t f = p->lv.flip ? 0x80 : 0;
    int64_t packed = -1;
    qg_tiles_begin(&p->lv);
    for (int64_t t = t0; t < t1; t++) {
        int64_t ob = t % j->nob, mbi = t / j->nob;
        int64_t m0 = mbi * j->mb, len = j->M - m0 < j->mb ? j->M - m0 : j->mb;
        if (packed != mbi) {
            /* column m of X^T is row m of x: quads are 4 consecutive bytes */
            for (int64_t i = 0; i < len; i++) {
                uint8_t *d = xp + i * 4;
                const uint8_t *sx = (const uint8_t *)j->x + (m0 + i) * K;
                if (p->lv.wide) {   /* int16 pairs of x - x_zero */
                    for (int64_t q = 0; q < Kq; q++) {
                        int16_t pr[2];
                        for (int b = 0; b < 2; b++)
                            pr[b] = (int16_t)(q * 2 + b < K ? (int8_t)sx[q * 2 + b] - p->xz : 0);
                        memcpy(d + q * xs, pr, 4);
                    }
                    continue;
                }
                for (int64_t q = 0; q < Kq; q++)
                    for (int b = 0; b < 4; b++)
                        d[q * xs + b] = q * 4 + b < K ? sx[q * 4 + b] ^ f : 0;
            }
#if QG_X86
            if (p->lv.tiles) {
                mge_cpu_qamx_colsum(xp, xs, Kq, len);
                CPU_VZEROUPPER();
            }
#endif
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
    qg_tiles_end(&p->lv);
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
    if (M <= QG_GEMV_M && gemv_bytes(M, K) > need)
        need = gemv_bytes(M, K);
    return need > ref ? need : ref;
}

static mge_status cpu_qlinear(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                              mge_error *err)
{
    int64_t M, K, O;
    qlin_dims(in, &M, &K, &O);
    if (!qg_supported(n, in, O) || M == 0 || K == 0 || in[1]->ndim != 2 || in[1]->dims[1] != K)
        return cpu_fallback(ctx, n, in, out, err);
    if (M <= QG_GEMV_M) {
        if (!ctx->ws || ctx->ws_size < gemv_bytes(M, K))
            return mge_error_set(err, MGE_ERR_INVALID, "%s: scratch of %zu bytes, need %zu", mge_kctx_opname(ctx, n),
                                 ctx->ws_size, gemv_bytes(M, K));
        mge_qmul q;
        double xs = mge_node_float(n, MGE_KEY_x_scale, 1), ys = mge_node_float(n, MGE_KEY_y_scale, 1);
        for (int64_t o = 0; o < (in[1]->q.axis == 0 ? O : 1); o++)
            if (!qg_qmul(xs, ys, in[1], o, &q))
                return cpu_fallback(ctx, n, in, out, err);
        qlin_gemv(ctx, n, in, out, M, K, O, ctx->ws);
        return MGE_OK;
    }
    int threads = cpu_threads(ctx);
    size_t prep = qg_prep_bytes(1, O, K), per = (qg_thread_bytes(M, K) + 63) & ~(size_t)63;
    size_t need = prep + (size_t)threads * per + 128;
    if (!ctx->ws || ctx->ws_size < need)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: scratch of %zu bytes, need %zu", mge_kctx_opname(ctx, n),
                             ctx->ws_size, need);
    qg_prep p;
    const qg_prep *sp = qg_prepared(ctx, 1, O, K);
    if (sp)
        p = *sp;
    else if (!qg_prepare(ctx, n, in[1], n->nin > 2 ? in[2] : NULL, 1, O, K, M, ctx->ws, &p))
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

/* W [O][Cg][kh][kw]; depthwise convs (cpu_qdepthwise.c) keep no state */
static mge_status qconv_prepare(const mge_node *n, mge_tensor *const *in, void **state, mge_error *err)
{
    *state = NULL;
    const mge_tensor *w = in[1];
    if (!w || w->ndim != 4)
        return MGE_OK;
    int64_t G = mge_node_int(n, MGE_KEY_groups, 1), O = w->dims[0], Cg = w->dims[1];
    if (G < 1 || O % G || (G > 1 && Cg == 1 && O == G))
        return MGE_OK;
    return qg_make_state(n, in, G, O / G, Cg * w->dims[2] * w->dims[3], state, err);
}

static mge_status qlin_prepare(const mge_node *n, mge_tensor *const *in, void **state, mge_error *err)
{
    *state = NULL;
    const mge_tensor *w = in[1];
    if (!w || w->ndim != 2)
        return MGE_OK;
    return qg_make_state(n, in, 1, w->dims[0], w->dims[1], state, err);
}

void mge_cpu_register_qgemm(mge_backend *b)
{
    mge_cpu_int8();   /* decided once, before any kernel runs on pool threads */
    b->k[MGE_OP_QCONV2D][MGE_QS8] =
        (mge_kernel){.run = cpu_qconv2d, .ws = qconv_ws, .prepare = qconv_prepare, .release = qg_release};
    b->k[MGE_OP_QLINEAR][MGE_QS8] =
        (mge_kernel){.run = cpu_qlinear, .ws = qlin_ws, .prepare = qlin_prepare, .release = qg_release};
}
