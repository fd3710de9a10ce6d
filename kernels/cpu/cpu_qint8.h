/* cpu_qint8.h — what the int8 kernels of cpu_qgemm.c and cpu_qdepthwise.c
 * share: per-output-row requantization parameters, the vector epilogues
 * (acc + off -> requant -> + y_zero -> clamp -> int8, lane by lane as in
 * lib/quant_math.h) and the depthwise entry points. */
#ifndef MGE_CPU_QINT8_H
#define MGE_CPU_QINT8_H

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

#define QG_AL(v) (((v) + 63) & ~(size_t)63)

/* Per output row: off = bias - corr * rowsum, the multiplier and shift. */
typedef struct qg_row {
    int32_t off, mult, shift;
} qg_row;

typedef struct qg_epi {
    int32_t yz, lo, hi;
} qg_epi;

static inline int8_t qg_out(int32_t acc, const qg_row *r, const qg_epi *e)
{
    mge_qmul q = {r->mult, r->shift};
    return (int8_t)mge_q_clamp(mge_qmul_apply(acc, q) + e->yz, e->lo, e->hi);
}
#if QG_X86
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

static inline __mmask16 zmask(int n)
{
    return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}
#endif

#if QG_X86
/* the AMX level's GEMM pieces, cpu_qgemm_amx.c (see there) */
void mge_cpu_qamx_begin(void);
void mge_cpu_qamx_end(void);
void mge_cpu_qamx_pack_w(const int8_t *const *src, int rows, int64_t K, int64_t Kp, uint8_t *dst);
void mge_cpu_qamx_colsum(uint8_t *blk, int64_t xs, int64_t Kq, int64_t len);
void mge_cpu_qamx_ukr(const uint8_t *xp, int64_t xs, const int8_t *wp, int64_t wrs, int64_t wqs, int64_t Kq,
                      const qg_row *rp, const qg_epi *e, int rows, int cols, int8_t *y, int64_t ldy);
#endif

/* depthwise qconv2d (groups = C = O), cpu_qdepthwise.c: the scratch it
 * needs (shared part and per thread), and the run; 0 when a multiplier is
 * out of range (the caller falls back to the ref kernel) */
void mge_cpu_qdw_bytes(const cpu_conv *c, size_t *shared, size_t *per);
int mge_cpu_qdw_run(const mge_kctx *ctx, const mge_node *n, const cpu_conv *c, mge_tensor *const *in,
                    mge_tensor *const *out, char *shared, char *tws, size_t per);

#endif
