/* cpu_sgemm.c — mge's own single-precision GEMM (see cpu.h, mge_sgemm).
 *
 * The usual scheme of packed panels around a register-blocked micro-kernel:
 *   for each NC block of columns (jc)
 *     for each KC block of the inner dimension (pc): pack B[pc.., jc..]
 *       into KC x NR panels (k-major, NR floats per k, zero padded)
 *       for each MC block of rows (ic): pack A[ic.., pc..] into MR x KC
 *         panels (MR floats per k, zero padded)
 *         for each NR panel (jr), each MR panel (ir): the micro-kernel
 *           keeps the MR x NR tile of C in registers over the kc steps
 *           (broadcast one A element, FMA it with the B vectors), then
 *           C = alpha * acc + beta' * C with beta' = beta on the first K
 *           block and 1 after it (beta = 0 never reads C, so NaN there
 *           does not propagate).
 * The B micro-panel (KC x NR) stays in L1 while the A block (MC x KC)
 * streams from L2; the B block comes from L2/L3 once per A block.
 *
 * Micro-kernels, picked at run time by mge_cpu_isa() (MGE_CPU_ISA caps it):
 *   AVX-512: 14 x 32 (28 zmm accumulators, A broadcast from memory);
 *   AVX2+FMA: 6 x 16 (12 ymm accumulators);
 *   baseline: plain C, 4 x 16, vectorized by the compiler.
 * Edge tiles use masked loads/stores (rows past m are not stored), so
 * every element of C is computed by the same instructions wherever it lies.
 *
 * Threads: the pool splits C into column chunks (row chunks when C has
 * too few column panels for the threads) of whole micro-tiles; each task packs its own panels. The K
 * blocks depend on K alone and are never split, so each element sees the
 * same operations in the same order at any thread count: results are
 * bit-identical for 1, 2, 3... threads.
 *
 * Scratch: one packing buffer per thread, kept between calls (a pthread
 * key frees it when the thread exits), since small GEMMs called in a loop
 * (Winograd's per-tile-position products) would otherwise pay a malloc
 * and its page faults each call. If it cannot be allocated, the call
 * falls back to OpenBLAS.
 *
 * Where it stands (scripts/bench-gemm, one core of a Xeon with AVX-512,
 * peak about 179 GFLOP/s): 84-86% of peak at 512-1024 and about 80% at
 * 2048, a few percent under OpenBLAS 0.3.21's SkylakeX kernels; the
 * micro-kernel alone runs at 94-99% of peak, the rest is packing (about
 * 6%, bound by reads from L3) and cache traffic. Small or thin shapes
 * (N < 64) lose more: no unpacked small-matrix path, no transposed
 * product for small N. So the conv/linear/Winograd call sites still call
 * OpenBLAS; the AVX2 kernel matches OpenBLAS's Haswell kernels. */
#include "cpu.h"

#include <cblas.h>
#include <pthread.h>

#if CPU_X86 && defined(__GNUC__)
#define SG_VEC 1
#include <immintrin.h>
#if defined(__clang__)
#define SG_AVX512 __attribute__((target("avx512f,fma")))
#define SG_AVX2F __attribute__((target("avx2,fma")))
#else
#define SG_AVX512 __attribute__((target("avx512f,fma"), optimize("O3", "no-trapping-math", "no-math-errno")))
#define SG_AVX2F __attribute__((target("avx2,fma"), optimize("O3", "no-trapping-math", "no-math-errno")))
#endif
#else
#define SG_VEC 0
#endif

/* C = alpha * (A panel x B panel) + beta * C on an m x n (<= MR x NR) tile. */
typedef void (*sg_kern_fn)(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, int m, int n,
                           float alpha, float beta);

typedef struct sg_isa {
    int mr, nr;
    int64_t kc, mc, nc;   /* cache blocks: mc a multiple of mr, nc of nr */
    sg_kern_fn kern;
} sg_isa;

/* ---------------------------------------------------------------- micro-kernels */

#if SG_VEC
#define SG_R14(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13)
#define SG_R6(X) X(0) X(1) X(2) X(3) X(4) X(5)

SG_AVX512 static void sg_kern_avx512(int64_t kc, const float *restrict a, const float *restrict b, float *restrict c,
                                     int64_t ldc, int m, int n, float alpha, float beta)
{
#define SG_Z_DECL(i) __m512 c##i##0 = _mm512_setzero_ps(), c##i##1 = _mm512_setzero_ps();
#define SG_Z_STEP(i)                                  \
    {                                                 \
        __m512 ai = _mm512_set1_ps(a[i]);             \
        c##i##0 = _mm512_fmadd_ps(ai, b0, c##i##0);   \
        c##i##1 = _mm512_fmadd_ps(ai, b1, c##i##1);   \
    }
#define SG_Z_K                                                        \
    {                                                                 \
        _mm_prefetch((const char *)(a + 14 * 12), _MM_HINT_T0);       \
        __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);   \
        SG_R14(SG_Z_STEP)                                             \
        a += 14;                                                      \
        b += 32;                                                      \
    }
    SG_R14(SG_Z_DECL)
    /* C's tile (14 rows, maybe a multiple of 4 KiB apart and then all in
     * one L1 set) comes to L2 now and to L1 just before the end; the A
     * panel streams from L2 a few steps ahead. */
    for (int i = 0; i < 14; i++)
        _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T1), _mm_prefetch((const char *)(c + i * ldc + 16), _MM_HINT_T1);
    int64_t k = 0;
    for (; k < kc - 12; k++)
        SG_Z_K
    for (int i = 0; i < 14; i++)
        _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0), _mm_prefetch((const char *)(c + i * ldc + 16), _MM_HINT_T0);
    for (; k < kc; k++)
        SG_Z_K
    __mmask16 lo = n >= 16 ? 0xffff : (__mmask16)((1u << n) - 1);
    __mmask16 hi = n >= 32 ? 0xffff : n > 16 ? (__mmask16)((1u << (n - 16)) - 1) : 0;
    __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#define SG_Z_STORE(i)                                                           \
    if (i < m) {                                                                \
        float *r = c + (int64_t)i * ldc;                                        \
        __m512 v0 = _mm512_mul_ps(va, c##i##0), v1 = _mm512_mul_ps(va, c##i##1); \
        if (beta != 0.0f) {                                                     \
            v0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(lo, r), v0);         \
            v1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(hi, r + 16), v1);    \
        }                                                                       \
        _mm512_mask_storeu_ps(r, lo, v0);                                       \
        _mm512_mask_storeu_ps(r + 16, hi, v1);                                  \
    }
    SG_R14(SG_Z_STORE)
}

SG_AVX2F static void sg_kern_avx2(int64_t kc, const float *restrict a, const float *restrict b, float *restrict c,
                                  int64_t ldc, int m, int n, float alpha, float beta)
{
#define SG_Y_DECL(i) __m256 c##i##0 = _mm256_setzero_ps(), c##i##1 = _mm256_setzero_ps();
    SG_R6(SG_Y_DECL)
    for (int64_t k = 0; k < kc; k++) {
        __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
#define SG_Y_STEP(i)                                  \
    {                                                 \
        __m256 ai = _mm256_broadcast_ss(a + i);       \
        c##i##0 = _mm256_fmadd_ps(ai, b0, c##i##0);   \
        c##i##1 = _mm256_fmadd_ps(ai, b1, c##i##1);   \
    }
        SG_R6(SG_Y_STEP)
        a += 6;
        b += 16;
    }
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i lo = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), idx);
    __m256i hi = _mm256_cmpgt_epi32(_mm256_set1_epi32(n - 8), idx);
    __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
#define SG_Y_STORE(i)                                                           \
    if (i < m) {                                                                \
        float *r = c + (int64_t)i * ldc;                                        \
        __m256 v0 = _mm256_mul_ps(va, c##i##0), v1 = _mm256_mul_ps(va, c##i##1); \
        if (beta != 0.0f) {                                                     \
            v0 = _mm256_fmadd_ps(vb, _mm256_maskload_ps(r, lo), v0);            \
            v1 = _mm256_fmadd_ps(vb, _mm256_maskload_ps(r + 8, hi), v1);        \
        }                                                                       \
        _mm256_maskstore_ps(r, lo, v0);                                         \
        _mm256_maskstore_ps(r + 8, hi, v1);                                     \
    }
    SG_R6(SG_Y_STORE)
}

/* 14 rows of A into a 14 x kc panel, 16 k at a time: load 16 floats of
 * each row, transpose 16 x 16 in registers (rows 14, 15 zero), store 14
 * lanes per k. About 4x faster than moving floats one by one. */
SG_AVX512 static void sg_rows14_avx512(const float *s, int64_t lda, int64_t kc, float *restrict d)
{
    int64_t k = 0;
    for (; k + 16 <= kc; k += 16, d += 16 * 14) {
        __m512 r[16], t[16], u[16];
        for (int i = 0; i < 14; i++)
            r[i] = _mm512_loadu_ps(s + i * lda + k);
        r[14] = r[15] = _mm512_setzero_ps();
        for (int i = 0; i < 8; i++) {
            t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
            t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
        }
        /* u[4g + j]: rows 4g..4g+3 at k = j, j+4, j+8, j+12 (one per 128-bit lane) */
        for (int g = 0; g < 4; g++) {
            u[4 * g] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
            u[4 * g + 1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0xee);
            u[4 * g + 2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
            u[4 * g + 3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xee);
        }
        for (int j = 0; j < 4; j++) {
            __m512 a0 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x88), a1 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xdd);
            __m512 b0 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x88);
            __m512 b1 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xdd);
            _mm512_mask_storeu_ps(d + j * 14, 0x3fff, _mm512_shuffle_f32x4(a0, b0, 0x88));
            _mm512_mask_storeu_ps(d + (j + 8) * 14, 0x3fff, _mm512_shuffle_f32x4(a0, b0, 0xdd));
            _mm512_mask_storeu_ps(d + (j + 4) * 14, 0x3fff, _mm512_shuffle_f32x4(a1, b1, 0x88));
            _mm512_mask_storeu_ps(d + (j + 12) * 14, 0x3fff, _mm512_shuffle_f32x4(a1, b1, 0xdd));
        }
    }
    for (; k < kc; k++, d += 14)
        for (int i = 0; i < 14; i++)
            d[i] = s[i * lda + k];
}
#endif

#define SG_BASE_MR 4
#define SG_BASE_NR 16

static CPU_BASE void sg_kern_base(int64_t kc, const float *restrict a, const float *restrict b, float *restrict c,
                                  int64_t ldc, int m, int n, float alpha, float beta)
{
    float acc[SG_BASE_MR][SG_BASE_NR] = {{0}};
    for (int64_t k = 0; k < kc; k++) {
        for (int i = 0; i < SG_BASE_MR; i++)
            for (int j = 0; j < SG_BASE_NR; j++)
                acc[i][j] += a[i] * b[j];
        a += SG_BASE_MR;
        b += SG_BASE_NR;
    }
    for (int i = 0; i < m; i++) {
        float *r = c + (int64_t)i * ldc;
        for (int j = 0; j < n; j++) {
            float v = alpha * acc[i][j];
            r[j] = beta != 0.0f ? beta * r[j] + v : v;
        }
    }
}

static const sg_isa *sg_pick(void)
{
    /* KC: the B micro-panel (KC x NR floats, 32 KiB) fits L1 (48 KiB on
     * the Xeon this was tuned on; L2 2 MiB) with room for the A panel
     * streaming past; the A block (MC x KC, 112 KiB) stays in L2 with the
     * B block (KC x NC, 1 MiB). Measured at 512-2048: MC of 84-112 rows
     * beat 336 by a few percent, and NC of 1024 beat 256, 512 and 2048. */
#if SG_VEC
    static const sg_isa z = {14, 32, 256, 14 * 8, 32 * 32, sg_kern_avx512};
    static const sg_isa y = {6, 16, 256, 6 * 24, 16 * 64, sg_kern_avx2};
#endif
    static const sg_isa p = {SG_BASE_MR, SG_BASE_NR, 256, SG_BASE_MR * 64, 1024, sg_kern_base};
#if SG_VEC
    int l = mge_cpu_isa();
    if (l >= MGE_ISA_AVX512)
        return &z;
    if (l >= MGE_ISA_AVX2)
        return &y;
#endif
    return &p;
}

/* ---------------------------------------------------------------- packing */

/* MR whole rows of A (s: the first, at its first k) into one MR x kc
 * panel; MR a constant so that the row loop unrolls (a loop over a
 * variable row count cost 3 cycles a float, 10-15% of the GEMM). */
#define SG_ROWS(MR)                                                                                 \
    static CPU_BASE void sg_rows##MR(const float *s, int64_t lda, int64_t kc, float *restrict d)    \
    {                                                                                               \
        for (int64_t k = 0; k < kc; k++, d += MR)                                                   \
            for (int i = 0; i < MR; i++)                                                            \
                d[i] = s[i * lda + k];                                                              \
    }
SG_ROWS(6)
SG_ROWS(4)

/* rows [i0, i0+mc) x k [p0, p0+kc) of op(A) into MR x kc panels */
static CPU_BASE void sg_pack_a(int ta, const float *A, int64_t lda, int64_t i0, int64_t mc, int64_t p0, int64_t kc,
                               int mr, float *restrict dst)
{
    for (int64_t ir = 0; ir < mc; ir += mr, dst += mr * kc) {
        int64_t m = mc - ir < mr ? mc - ir : mr;
        if (ta) {   /* op(A)[i][k] = A[k][i]: MR contiguous floats per k */
            const float *s = A + p0 * lda + i0 + ir;
            for (int64_t k = 0; k < kc; k++, s += lda) {
                float *d = dst + k * mr;
                int64_t i = 0;
                for (; i < m; i++)
                    d[i] = s[i];
                for (; i < mr; i++)
                    d[i] = 0.0f;
            }
        } else if (m == mr && (mr == 14 || mr == 6 || mr == SG_BASE_MR)) {
            const float *s = A + (i0 + ir) * lda + p0;
            if (mr == 14)
                sg_rows14_avx512(s, lda, kc, dst);   /* mr = 14: the AVX-512 kernel's */
            else if (mr == 6)
                sg_rows6(s, lda, kc, dst);
            else
                sg_rows4(s, lda, kc, dst);
        } else {   /* an edge panel: rows past m are zero */
            for (int64_t i = 0; i < mr; i++) {
                const float *s = A + (i0 + ir + i) * lda + p0;
                for (int64_t k = 0; k < kc; k++)
                    dst[k * mr + i] = i < m ? s[k] : 0.0f;
            }
        }
    }
}

#if SG_VEC
SG_AVX512 static void sg_copy32_avx512(const float *s, int64_t ld, int64_t kc, float *restrict d)
{
    for (int64_t k = 0; k < kc; k++, s += ld, d += 32) {
        _mm512_store_ps(d, _mm512_loadu_ps(s));
        _mm512_store_ps(d + 16, _mm512_loadu_ps(s + 16));
    }
}

SG_AVX2F static void sg_copy16_avx2(const float *s, int64_t ld, int64_t kc, float *restrict d)
{
    for (int64_t k = 0; k < kc; k++, s += ld, d += 16) {
        _mm256_store_ps(d, _mm256_loadu_ps(s));
        _mm256_store_ps(d + 8, _mm256_loadu_ps(s + 8));
    }
}
#endif

/* kc rows of w floats at stride ld into one contiguous panel; inlined
 * with a constant w (a memcpy call per 128 bytes cost more than the copy) */
static inline __attribute__((always_inline)) void sg_copy_rows(const float *s, int64_t ld, int64_t kc,
                                                                float *restrict d, int w)
{
    for (int64_t k = 0; k < kc; k++, s += ld, d += w)
        for (int j = 0; j < w; j++)
            d[j] = s[j];
}

/* k [p0, p0+kc) x columns [j0, j0+nc) of op(B) into kc x NR panels */
static CPU_BASE void sg_pack_b(int tb, const float *B, int64_t ldb, int64_t p0, int64_t kc, int64_t j0, int64_t nc,
                               int nr, float *restrict dst)
{
    for (int64_t jr = 0; jr < nc; jr += nr, dst += nr * kc) {
        int64_t n = nc - jr < nr ? nc - jr : nr;
        if (!tb && n == nr) {   /* NR contiguous floats per k, NR a constant so the copy inlines */
            const float *s = B + p0 * ldb + j0 + jr;
#if SG_VEC
            if (nr == 32)
                sg_copy32_avx512(s, ldb, kc, dst);   /* nr = 32: the AVX-512 kernel's */
            else if (nr == 16)
                sg_copy16_avx2(s, ldb, kc, dst);
            else
#endif
                sg_copy_rows(s, ldb, kc, dst, nr);
        } else if (!tb) {
            const float *s = B + p0 * ldb + j0 + jr;
            for (int64_t k = 0; k < kc; k++, s += ldb) {
                float *d = dst + k * nr;
                int64_t j = 0;
                for (; j < n; j++)
                    d[j] = s[j];
                for (; j < nr; j++)
                    d[j] = 0.0f;
            }
        } else {   /* op(B)[k][j] = B[j][k] */
            for (int64_t j = 0; j < nr; j++) {
                if (j < n) {
                    const float *s = B + (j0 + jr + j) * ldb + p0;
                    for (int64_t k = 0; k < kc; k++)
                        dst[k * nr + j] = s[k];
                } else {
                    for (int64_t k = 0; k < kc; k++)
                        dst[k * nr + j] = 0.0f;
                }
            }
        }
    }
}

/* ---------------------------------------------------------------- scratch */

typedef struct sg_buf {
    float *p;
    size_t n;
} sg_buf;

static pthread_key_t sg_key;
static pthread_once_t sg_once = PTHREAD_ONCE_INIT;
static int sg_key_ok;

static void sg_buf_free(void *v)
{
    sg_buf *b = v;
    free(b->p);
    free(b);
}

static void sg_key_init(void)
{
    sg_key_ok = pthread_key_create(&sg_key, sg_buf_free) == 0;
}

/* This thread's scratch of at least n floats, 64-byte aligned; NULL when
 * out of memory. */
static float *sg_scratch(size_t n)
{
    pthread_once(&sg_once, sg_key_init);
    if (!sg_key_ok)
        return NULL;
    sg_buf *b = pthread_getspecific(sg_key);
    if (!b) {
        b = calloc(1, sizeof *b);
        if (!b || pthread_setspecific(sg_key, b) != 0) {
            free(b);
            return NULL;
        }
    }
    if (b->n < n) {
        free(b->p);
        size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
        b->p = aligned_alloc(64, bytes);
        b->n = b->p ? n : 0;
    }
    return b->p;
}

/* ---------------------------------------------------------------- driver */

typedef struct sg_job {
    const sg_isa *isa;
    int ta, tb;
    int64_t M, N, K, lda, ldb, ldc, kcb;
    float alpha, beta;
    const float *A, *B;
    float *C;
    int along_n;
    int64_t chunk;   /* columns (along_n) or rows per task, whole micro-tiles */
} sg_job;

/* OpenBLAS on one block, when the scratch cannot be had. */
static void sg_blas(const sg_job *j, int64_t m0, int64_t m1, int64_t n0, int64_t n1)
{
    if (!cpu_blas_fits(m1 - m0, n1 - n0, j->K) || !cpu_blas_fits(j->lda, j->ldb, j->ldc))
        return;   /* unreachable in practice: the sizes our kernels pass fit an int */
    const float *a = j->A + (j->ta ? m0 : m0 * j->lda), *b = j->B + (j->tb ? n0 * j->ldb : n0);
    cblas_sgemm(CblasRowMajor, j->ta ? CblasTrans : CblasNoTrans, j->tb ? CblasTrans : CblasNoTrans,
                (blasint)(m1 - m0), (blasint)(n1 - n0), (blasint)j->K, j->alpha, a, (blasint)j->lda, b,
                (blasint)j->ldb, j->beta, j->C + m0 * j->ldc + n0, (blasint)j->ldc);
}

static void sg_block(const sg_job *j, int64_t m0, int64_t m1, int64_t n0, int64_t n1)
{
    const sg_isa *is = j->isa;
    const int mr = is->mr, nr = is->nr;
    int64_t mc = is->mc < m1 - m0 ? is->mc : (m1 - m0 + mr - 1) / mr * mr;
    int64_t nc = is->nc < n1 - n0 ? is->nc : (n1 - n0 + nr - 1) / nr * nr;
    size_t na = (size_t)(mc * j->kcb), nb = (size_t)(nc * j->kcb);
    float *buf = sg_scratch(na + nb + 16);
    if (!buf) {
        sg_blas(j, m0, m1, n0, n1);
        return;
    }
    float *pa = buf, *pb = buf + (na + 15) / 16 * 16;
    for (int64_t jc = n0; jc < n1; jc += nc) {
        int64_t nb_ = n1 - jc < nc ? n1 - jc : nc;
        for (int64_t pc = 0; pc < j->K; pc += j->kcb) {
            int64_t kb = j->K - pc < j->kcb ? j->K - pc : j->kcb;
            float beta = pc == 0 ? j->beta : 1.0f;
            sg_pack_b(j->tb, j->B, j->ldb, pc, kb, jc, nb_, nr, pb);
            for (int64_t ic = m0; ic < m1; ic += mc) {
                int64_t mb = m1 - ic < mc ? m1 - ic : mc;
                sg_pack_a(j->ta, j->A, j->lda, ic, mb, pc, kb, mr, pa);
                for (int64_t jr = 0; jr < nb_; jr += nr) {
                    int n = nb_ - jr < nr ? (int)(nb_ - jr) : nr;
                    const float *b = pb + jr * kb;
                    float *c = j->C + ic * j->ldc + jc + jr;
                    for (int64_t ir = 0; ir < mb; ir += mr) {
                        int m = mb - ir < mr ? (int)(mb - ir) : mr;
                        is->kern(kb, pa + ir * kb, b, c + ir * j->ldc, j->ldc, m, n, j->alpha, beta);
                    }
                }
            }
        }
    }
}

static void sg_task(void *arg, int64_t task, int thread)
{
    (void)thread;
    const sg_job *j = arg;
    int64_t d0 = task * j->chunk, d1 = d0 + j->chunk;
    if (j->along_n)
        sg_block(j, 0, j->M, d0, d1 < j->N ? d1 : j->N);
    else
        sg_block(j, d0, d1 < j->M ? d1 : j->M, 0, j->N);
}

/* C = beta * C when there is no product to add (K = 0 or alpha = 0). */
static void sg_scale(int64_t M, int64_t N, float beta, float *C, int64_t ldc)
{
    for (int64_t i = 0; i < M; i++) {
        float *r = C + i * ldc;
        for (int64_t k = 0; k < N; k++)
            r[k] = beta == 0.0f ? 0.0f : beta * r[k];
    }
}

#define SG_TASK_FLOPS 2e6   /* below this per thread, one thread does it all */

void mge_sgemm(const mge_kctx *ctx, int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
               const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc)
{
    if (M <= 0 || N <= 0)
        return;
    if (K <= 0 || alpha == 0.0f) {
        sg_scale(M, N, beta, C, ldc);
        return;
    }
    sg_job j = {.isa = sg_pick(), .ta = transA != 0, .tb = transB != 0, .M = M, .N = N, .K = K, .lda = lda,
                .ldb = ldb, .ldc = ldc, .alpha = alpha, .beta = beta, .A = A, .B = B, .C = C};
    /* K blocks of near-equal size from K alone (never the thread count) */
    int64_t nkb = (K + j.isa->kc - 1) / j.isa->kc;
    j.kcb = (K + nkb - 1) / nkb;
    int threads = ctx && ctx->pool ? mge_pool_size(ctx->pool) : 1;
    double flops = 2.0 * (double)M * (double)N * (double)K;
    if (flops < SG_TASK_FLOPS * 2)
        threads = 1;
    else if (threads > flops / SG_TASK_FLOPS)
        threads = (int)(flops / SG_TASK_FLOPS);
    /* columns when there are enough NR panels for every thread, else rows */
    int64_t pn = (N + j.isa->nr - 1) / j.isa->nr, pm = (M + j.isa->mr - 1) / j.isa->mr;
    j.along_n = pn >= 2 * threads || pn >= pm;
    int64_t panels = j.along_n ? pn : pm, unit = j.along_n ? j.isa->nr : j.isa->mr;
    int64_t tasks = threads < panels ? threads : panels;
    j.chunk = (panels + tasks - 1) / tasks * unit;
    tasks = ((j.along_n ? N : M) + j.chunk - 1) / j.chunk;
    if (tasks <= 1) {
        sg_task(&j, 0, 0);
        return;
    }
    mge_pool_run(ctx->pool, tasks, sg_task, &j);
}

