/* cpu_transpose.c — dst[j][i] = src[i][j] for f32 matrices (cpu.h,
 * cpu_transpose): 8 x 8 blocks in AVX2 registers (unpack, shuffle, lane
 * permute), the last block of a row or column moved back to overlap the one
 * before; matrices under 8 on a side one element at a time. Layout changes around GEMMs
 * (cpu_conv_rows.c's dy, cpu_gemm.c's small-batch linear) use it: a plain
 * loop stores (or loads) with a stride on every element. */
#include "cpu.h"

static void tr_base(const float *src, int64_t rows, int64_t cols, int64_t lds, float *dst, int64_t ldd)
{
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            dst[j * ldd + i] = src[i * lds + j];
}

#if CPU_X86 && defined(__GNUC__)
#include <immintrin.h>

/* d[j * ldd + i] = s[i * lds + j] for i, j < 8 */
static inline __attribute__((always_inline, target("avx2"))) void tr8x8(const float *s, int64_t lds, float *d,
                                                                       int64_t ldd)
{
    __m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + lds), r2 = _mm256_loadu_ps(s + 2 * lds);
    __m256 r3 = _mm256_loadu_ps(s + 3 * lds), r4 = _mm256_loadu_ps(s + 4 * lds), r5 = _mm256_loadu_ps(s + 5 * lds);
    __m256 r6 = _mm256_loadu_ps(s + 6 * lds), r7 = _mm256_loadu_ps(s + 7 * lds);
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
    __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
    __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    _mm256_storeu_ps(d, _mm256_permute2f128_ps(u0, u4, 0x20));
    _mm256_storeu_ps(d + ldd, _mm256_permute2f128_ps(u1, u5, 0x20));
    _mm256_storeu_ps(d + 2 * ldd, _mm256_permute2f128_ps(u2, u6, 0x20));
    _mm256_storeu_ps(d + 3 * ldd, _mm256_permute2f128_ps(u3, u7, 0x20));
    _mm256_storeu_ps(d + 4 * ldd, _mm256_permute2f128_ps(u0, u4, 0x31));
    _mm256_storeu_ps(d + 5 * ldd, _mm256_permute2f128_ps(u1, u5, 0x31));
    _mm256_storeu_ps(d + 6 * ldd, _mm256_permute2f128_ps(u2, u6, 0x31));
    _mm256_storeu_ps(d + 7 * ldd, _mm256_permute2f128_ps(u3, u7, 0x31));
}

static __attribute__((target("avx2"))) void tr_avx2(const float *src, int64_t rows, int64_t cols, int64_t lds,
                                                    float *dst, int64_t ldd)
{
    /* the last block of a row or column overlaps the one before (rows,
     * cols >= 8): its elements are written twice with the same values */
    for (int64_t i = 0; i < rows; i += 8) {
        int64_t i8 = i + 8 <= rows ? i : rows - 8;
        for (int64_t j = 0; j < cols; j += 8) {
            int64_t j8 = j + 8 <= cols ? j : cols - 8;
            tr8x8(src + i8 * lds + j8, lds, dst + j8 * ldd + i8, ldd);
        }
    }
}
#endif

void cpu_transpose(const float *src, int64_t rows, int64_t cols, int64_t lds, float *dst, int64_t ldd)
{
#if CPU_X86 && defined(__GNUC__)
    if (cpu_isa_avx2() && rows >= 8 && cols >= 8) {
        tr_avx2(src, rows, cols, lds, dst, ldd);
        CPU_VZEROUPPER();
        return;
    }
#endif
    tr_base(src, rows, cols, lds, dst, ldd);
}
