/* cpu_sgemm.c — mge's own single-precision GEMM (see cpu.h, mge_sgemm).
 *
 * Packed panels around a register-blocked micro-kernel that keeps an
 * MR x NR tile of C in registers over kc steps (broadcast an A element,
 * FMA it with the B vectors), then C = alpha * acc + beta' * C, beta' =
 * beta on the first K block and 1 after it (beta = 0 never reads C, so
 * NaN there does not propagate). Two loop orders:
 *
 * AVX-512 (sg_block_rows), 14 x 32 tiles (28 zmm accumulators):
 *   for each NC block of columns, each KC block of k: pack B into KC x 32
 *     panels (k-major), the block half of L2;
 *     for each 14-row panel of A: copy it row-major into an L1 buffer
 *       (a plain copy, row stride padded against L1 set conflicts);
 *       for each B panel: the micro-kernel, B streaming from L2.
 *   So A is read once per NC block and B once in all. The packs read
 *   from L2, not memory: the full-tile kernel calls spread prefetches of
 *   the next A panel's source over their k steps, and the first row
 *   panel's calls prefetch the next B panel's source, which is packed
 *   just before its first use (packs that waited on memory cost 5-6% at
 *   1024^3, and prefetching in bursts between calls was no better).
 *   Edge tiles run narrower variants (rows rounded up to even, one or two
 *   vectors), e.g. 2/14 of the work for a 2-row edge.
 * AVX2 (6 x 16) and baseline (portable C, 4 x 16), sg_block: the classic
 *   order, B block packed per (NC, KC), A packed in MC x KC blocks (MR
 *   floats per k) in L2, the B micro-panel in L1.
 * Edge tiles use masked loads/stores (rows past m are not stored), and
 * every element of C sees the same FMAs in the same order whatever tile
 * or kernel variant it falls in.
 *
 * Threads: the pool splits C into column chunks (row chunks when C has
 * too few column panels for the threads) of whole micro-tiles; each task
 * packs its own panels (with column chunks, B is not packed twice). The
 * K blocks depend on K alone and are never split, so results are
 * bit-identical for 1, 2, 3... threads.
 *
 * Scratch: one packing buffer per thread, kept between calls (a pthread
 * key frees it when the thread exits), since small GEMMs called in a loop
 * would otherwise pay a malloc and its page faults each call. If it
 * cannot be allocated, the call falls back to OpenBLAS.
 *
 * Where it stands (scripts/bench-gemm --cpu, one core of a Xeon with
 * AVX-512 at about 179 GFLOP/s, best of many runs on a shared machine):
 * 94% of peak at 512, 91% at 1024, 92% at 2048 (OpenBLAS 0.3.21
 * SkylakeX: 87, 86, 87%). The micro-kernel alone runs at 98%; the rest
 * is mostly the K / 512 passes over C and the packs. Thin products
 * (N < 128, or small M, N and K together) still lose to OpenBLAS: edge tiles and per-call overheads, no transposed
 * product for small N; mge_sgemm_pick says where the call sites use it. */
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
    int rowa;   /* the AVX-512 order (sg_block_rows); kern and mc unused there */
} sg_isa;

/* ---------------------------------------------------------------- micro-kernels */

#if SG_VEC
#define SG_R14(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13)
#define SG_R6(X) X(0) X(1) X(2) X(3) X(4) X(5)

/* Row stride (floats) of a packed AVX-512 A panel: 14 rows of up to KC
 * = 512 floats, copied row-major (a copy, not a transpose, so packing
 * costs little) and padded so that the 14 rows start in different L1
 * sets: 528 floats = 33 cache lines, and 33 i mod 64 differs for i < 14.
 * (Unpacked, a power-of-two lda such as 1024 or 2048 would put all 14
 * rows in one set of the 12-way L1.) */
#define SG_LDS 528
/* The B panel streams from L2 (each is used once per A panel): prefetch
 * it this many floats (8 k steps) ahead. */
#define SG_PFB 256

/* What a full-tile call prefetches to L2 besides its own operands
 * (sg_block_rows): SG_PF_B, a row of 32 floats per k step from b, bld
 * floats apart (the next B panel's source, packed after this call);
 * SG_PF_A, an lines spread over the call, line i at a + (i % arows) * ald
 * + (i / arows) * 16 (this call's share of the next A panel's source). */
typedef struct sg_pf {
    const float *b, *a;
    int64_t bld, ald;
    int an, arows;
} sg_pf;
#define SG_PF_B 1
#define SG_PF_A 2

/* The AVX-512 kernel on an R x 16V tile (R <= 14 rows, V = 1 or 2
 * vectors): C = alpha * A B + beta C, A a row-major panel (a[i * SG_LDS +
 * k]), B k-major (32 floats per k). Edge tiles run a variant with just
 * the rows and vectors they need (R rounded up to even), so a 2-row edge
 * costs about 2/14 of a full tile; each element of C sees the same FMAs
 * in the same order in every variant, so results do not depend on where
 * a tile falls. */
SG_AVX512 static inline __attribute__((always_inline)) void
sg_z(int64_t kc, const float *restrict a, const float *restrict b, float *restrict c, int64_t ldc, int m, int n,
     float alpha, float beta, const sg_pf *q, const int R, const int V, const int P)
{
#define SG_Z_DECL(i) __m512 c##i##0 = _mm512_setzero_ps(), c##i##1 = _mm512_setzero_ps();
#define SG_Z_STEP(i)                                      \
    if (i < R) {                                          \
        __m512 ai = _mm512_set1_ps(a[(i) * SG_LDS]);      \
        c##i##0 = _mm512_fmadd_ps(ai, b0, c##i##0);       \
        if (V > 1)                                        \
            c##i##1 = _mm512_fmadd_ps(ai, b1, c##i##1);   \
    }
#define SG_Z_K                                                          \
    {                                                                   \
        _mm_prefetch((const char *)(b + SG_PFB), _MM_HINT_T0);          \
        _mm_prefetch((const char *)(b + SG_PFB + 16), _MM_HINT_T0);     \
        if (P & SG_PF_B) {                                              \
            _mm_prefetch((const char *)pf, _MM_HINT_T1);                \
            _mm_prefetch((const char *)(pf + 16), _MM_HINT_T1);         \
            pf += pfld;                                                 \
        }                                                               \
        __m512 b0 = _mm512_load_ps(b), b1 = V > 1 ? _mm512_load_ps(b + 16) : b0; \
        SG_R14(SG_Z_STEP)                                               \
        a++;                                                            \
        b += 32;                                                        \
    }
    SG_R14(SG_Z_DECL)
    const float *pf = P & SG_PF_B ? q->b : NULL;
    const int64_t pfld = P & SG_PF_B ? q->bld : 0;
    /* C's tile (maybe a multiple of 4 KiB a row apart and then all in one
     * L1 set) comes to L2 a line every 4 k steps, then to L1 just before
     * the end. (All at once, 28 misses to DRAM held the L1 fill buffers
     * that the B stream needs.) */
    int64_t k = 0;
    int g = 0;
    for (; g < 2 * R && k + 4 <= kc - 12; g++, k += 4) {
        _mm_prefetch((const char *)(c + (g >> 1) * ldc + (g & 1) * 16), _MM_HINT_T1);
        SG_Z_K SG_Z_K SG_Z_K SG_Z_K
    }
    for (; g < 2 * R; g++)
        _mm_prefetch((const char *)(c + (g >> 1) * ldc + (g & 1) * 16), _MM_HINT_T1);
    if (P & SG_PF_A) {   /* one line every sp steps: a burst would hold the fill buffers */
        int64_t sp = q->an > 0 ? (kc - 12 - k) / q->an : 0;
        for (int i = 0; sp > 0 && i < q->an; i++) {
            _mm_prefetch((const char *)(q->a + (i % q->arows) * q->ald + (i / q->arows) * 16), _MM_HINT_T1);
            for (int64_t e = k + sp; k < e; k++)
                SG_Z_K
        }
    }
    for (; k < kc - 12; k++)
        SG_Z_K
    for (int i = 0; i < R; i++)
        _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0), _mm_prefetch((const char *)(c + i * ldc + 16), _MM_HINT_T0);
    for (; k < kc; k++)
        SG_Z_K
    __mmask16 lo = n >= 16 ? 0xffff : (__mmask16)((1u << n) - 1);
    __mmask16 hi = n >= 32 ? 0xffff : n > 16 ? (__mmask16)((1u << (n - 16)) - 1) : 0;
    __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#define SG_Z_STORE(i)                                                           \
    if (i < R && i < m) {                                                       \
        float *r = c + (int64_t)i * ldc;                                        \
        __m512 v0 = _mm512_mul_ps(va, c##i##0), v1 = _mm512_mul_ps(va, c##i##1); \
        if (beta != 0.0f) {                                                     \
            v0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(lo, r), v0);         \
            if (V > 1)                                                          \
                v1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(hi, r + 16), v1); \
        }                                                                       \
        _mm512_mask_storeu_ps(r, lo, v0);                                       \
        if (V > 1)                                                              \
            _mm512_mask_storeu_ps(r + 16, hi, v1);                              \
    }
    SG_R14(SG_Z_STORE)
}

#define SG_ZV(R, V)                                                                                             \
    SG_AVX512 static void sg_z##R##_##V(int64_t kc, const float *restrict a, const float *restrict b,          \
                                        float *restrict c, int64_t ldc, int m, int n, float alpha, float beta) \
    {                                                                                                           \
        sg_z(kc, a, b, c, ldc, m, n, alpha, beta, NULL, R, V, 0);                                               \
    }
#define SG_ZR(R) SG_ZV(R, 1) SG_ZV(R, 2)
SG_ZR(2) SG_ZR(4) SG_ZR(6) SG_ZR(8) SG_ZR(10) SG_ZR(12) SG_ZR(14)

/* the full tile with prefetches (sg_pf) */
SG_AVX512 static void sg_z14_2a(int64_t kc, const float *restrict a, const float *restrict b, float *restrict c,
                                int64_t ldc, float alpha, float beta, const sg_pf *q)
{
    sg_z(kc, a, b, c, ldc, 14, 32, alpha, beta, q, 14, 2, SG_PF_A);
}
SG_AVX512 static void sg_z14_2ab(int64_t kc, const float *restrict a, const float *restrict b, float *restrict c,
                                 int64_t ldc, float alpha, float beta, const sg_pf *q)
{
    sg_z(kc, a, b, c, ldc, 14, 32, alpha, beta, q, 14, 2, SG_PF_A | SG_PF_B);
}

/* [(m + 1) / 2 - 1][n > 16] */
static const sg_kern_fn sg_zk[7][2] = {{sg_z2_1, sg_z2_2},   {sg_z4_1, sg_z4_2},   {sg_z6_1, sg_z6_2},
                                       {sg_z8_1, sg_z8_2},   {sg_z10_1, sg_z10_2}, {sg_z12_1, sg_z12_2},
                                       {sg_z14_1, sg_z14_2}};

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
    /* AVX-512 (sg_block_rows): the A panel (14 x KC, 28 KiB at KC = 512)
     * stays in L1 (48 KiB on the Xeon this was tuned on), the B block
     * (KC x NC, 1 MiB) in L2 (2 MiB); KC = 512 beat 256 and 384 by 1-3%
     * (fewer passes over C); NC = 512 beat 256, 384, 768 and 1024 by 1-2%
     * once the A panels were prefetched (a 2 MiB block filled L2). MC is
     * unused there. AVX2 and baseline (sg_block): the B micro-panel (KC x
     * NR) in L1, the A block (MC x KC) in L2 with the B block; MC of 84-112
     * rows beat 336 by a few percent, NC of 1024 beat 256, 512 and 2048. */
#if SG_VEC
    static const sg_isa z = {14, 32, 512, 14, 512, sg_z14_2, 1};
    static const sg_isa y = {6, 16, 256, 6 * 24, 16 * 64, sg_kern_avx2, 0};
#endif
    static const sg_isa p = {SG_BASE_MR, SG_BASE_NR, 256, SG_BASE_MR * 64, 1024, sg_kern_base, 0};
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
static CPU_BASE void sg_pack_a(int ta, const float *A, int64_t lda, const float *const *Ar, int64_t i0, int64_t mc,
                               int64_t p0, int64_t kc, int mr, float *restrict dst)
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
        } else if (m == mr && (mr == 6 || mr == SG_BASE_MR) && !Ar) {
            const float *s = A + (i0 + ir) * lda + p0;
            if (mr == 6)
                sg_rows6(s, lda, kc, dst);
            else
                sg_rows4(s, lda, kc, dst);
        } else {   /* an edge panel: rows past m are zero */
            for (int64_t i = 0; i < mr; i++) {
                if (i >= m) {
                    for (int64_t k = 0; k < kc; k++)
                        dst[k * mr + i] = 0.0f;
                    continue;
                }
                const float *s = (Ar ? Ar[i0 + ir + i] : A + (i0 + ir + i) * lda) + p0;
                for (int64_t k = 0; k < kc; k++)
                    dst[k * mr + i] = s[k];
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

/* The whole 32-column panels of a kc x w block of B, a row of B at a
 * time: reading B along its rows keeps the hardware prefetcher streaming
 * (down a column, each 128-byte piece is a new stream, and at a large ldb
 * a new page). */
SG_AVX512 static void sg_rows32_avx512(const float *s, int64_t ld, int64_t kc, int64_t w, float *restrict d)
{
    for (int64_t k = 0; k < kc; k++, s += ld, d += 32) {
        float *q = d;
        for (int64_t j = 0; j + 32 <= w; j += 32, q += 32 * kc) {
            _mm512_store_ps(q, _mm512_loadu_ps(s + j));
            _mm512_store_ps(q + 16, _mm512_loadu_ps(s + j + 16));
        }
    }
}

/* sg_rows32_avx512 with B given by row pointers (row k at r[k] + j0) */
SG_AVX512 static void sg_rows32p_avx512(const float *const *r, int64_t j0, int64_t kc, int64_t w, float *restrict d)
{
    for (int64_t k = 0; k < kc; k++, d += 32) {
        const float *s = r[k] + j0;
        float *q = d;
        for (int64_t j = 0; j + 32 <= w; j += 32, q += 32 * kc) {
            _mm512_store_ps(q, _mm512_loadu_ps(s + j));
            _mm512_store_ps(q + 16, _mm512_loadu_ps(s + j + 16));
        }
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
static CPU_BASE void sg_pack_b(int tb, const float *B, int64_t ldb, const float *const *Br, int64_t p0, int64_t kc,
                               int64_t j0, int64_t nc, int nr, float *restrict dst)
{
    int64_t jr = 0;
#if SG_VEC
    if (!tb && nr == 32 && nc >= 32) {
        if (Br)
            sg_rows32p_avx512(Br + p0, j0, kc, nc, dst);
        else
            sg_rows32_avx512(B + p0 * ldb + j0, ldb, kc, nc, dst);
        CPU_VZEROUPPER();   /* cpu.h: before this function's SSE loops */
        jr = nc / 32 * 32;
        dst += jr * kc;
    }
#endif
    for (; jr < nc; jr += nr, dst += nr * kc) {
        int64_t n = nc - jr < nr ? nc - jr : nr;
        if (!tb && n == nr && !Br) {   /* NR contiguous floats per k, NR a constant so the copy inlines */
            const float *s = B + p0 * ldb + j0 + jr;
#if SG_VEC
            if (nr == 32) {
                sg_copy32_avx512(s, ldb, kc, dst);   /* nr = 32: the AVX-512 kernel's */
                CPU_VZEROUPPER();
            } else if (nr == 16) {
                sg_copy16_avx2(s, ldb, kc, dst);
                CPU_VZEROUPPER();
            } else
#endif
                sg_copy_rows(s, ldb, kc, dst, nr);
        } else if (!tb) {   /* an edge panel, or B as row pointers (row k at Br[k]) */
            for (int64_t k = 0; k < kc; k++) {
                const float *s = (Br ? Br[p0 + k] : B + (p0 + k) * ldb) + j0 + jr;
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
    const float *const *Ar, *const *Br;   /* row pointers instead of A, B (mge_sgemm_ptr) */
    float *C;
    int along_n;
    int64_t chunk;   /* columns (along_n) or rows per task, whole micro-tiles */
} sg_job;

/* OpenBLAS on one block, when the scratch cannot be had. */
static void sg_blas(const sg_job *j, int64_t m0, int64_t m1, int64_t n0, int64_t n1)
{
    if (j->Ar || j->Br) {   /* row pointers: no BLAS form; plain loops (only without memory) */
        for (int64_t i = m0; i < m1; i++)
            for (int64_t n = n0; n < n1; n++) {
                float acc = 0.0f;
                for (int64_t k = 0; k < j->K; k++)
                    acc += (j->Ar ? j->Ar[i][k] : j->A[i * j->lda + k]) *
                           (j->Br ? j->Br[k][n] : j->B[k * j->ldb + n]);
                float *c = j->C + i * j->ldc + n;
                *c = j->alpha * acc + (j->beta == 0.0f ? 0.0f : j->beta * *c);
            }
        return;
    }
    if (!cpu_blas_fits(m1 - m0, n1 - n0, j->K) || !cpu_blas_fits(j->lda, j->ldb, j->ldc))
        return;   /* unreachable in practice: the sizes our kernels pass fit an int */
    const float *a = j->A + (j->ta ? m0 : m0 * j->lda), *b = j->B + (j->tb ? n0 * j->ldb : n0);
    cblas_sgemm(CblasRowMajor, j->ta ? CblasTrans : CblasNoTrans, j->tb ? CblasTrans : CblasNoTrans,
                (blasint)(m1 - m0), (blasint)(n1 - n0), (blasint)j->K, j->alpha, a, (blasint)j->lda, b,
                (blasint)j->ldb, j->beta, j->C + m0 * j->ldc + n0, (blasint)j->ldc);
}

#if SG_VEC
/* 14 rows [i0, i0+m) x k [p0, p0+kc) of op(A) into a row-major panel of
 * row stride SG_LDS; rows past m are zero. */
static void sg_pack_a_rows(int ta, const float *A, int64_t lda, const float *const *Ar, int64_t i0, int m,
                           int64_t p0, int64_t kc, float *restrict dst)
{
    if (ta) {   /* op(A)[i][k] = A[k][i]: m contiguous floats per k */
        const float *s = A + p0 * lda + i0;
        for (int64_t k = 0; k < kc; k++, s += lda)
            for (int i = 0; i < m; i++)
                dst[i * SG_LDS + k] = s[i];
    } else {
        for (int i = 0; i < m; i++)
            memcpy(dst + i * SG_LDS, (Ar ? Ar[i0 + i] : A + (i0 + i) * lda) + p0, sizeof(float) * (size_t)kc);
    }
    for (int i = m; i < 14; i++)
        memset(dst + i * SG_LDS, 0, sizeof(float) * (size_t)kc);
}
#endif

/* The size of the K block that starts at p */
static int64_t sg_kblock(const sg_job *j, int64_t p)
{
    return j->K - p < j->kcb ? j->K - p : j->kcb;
}

/* The AVX-512 order: for each NC x KC block of B (packed, L2-resident),
 * for each 14-row panel of A (packed into L1), the micro-kernel along the
 * block's B panels, which stream from L2 while the A panel and the C tile
 * rows stay in L1. Packing an A panel is a plain row copy, and every
 * A element is packed once per NC block. */
static void sg_block_rows(const sg_job *j, int64_t m0, int64_t m1, int64_t n0, int64_t n1, int64_t nc, float *pa,
                          float *pb)
{
#if SG_VEC
    for (int64_t jc = n0; jc < n1; jc += nc) {
        int64_t nb_ = n1 - jc < nc ? n1 - jc : nc;
        for (int64_t pc = 0; pc < j->K; pc += j->kcb) {
            int64_t kb = sg_kblock(j, pc);
            float beta = pc == 0 ? j->beta : 1.0f;
            /* Plain B: each panel is packed just before the first row
             * panel's kernel uses it, its source prefetched to L2 by the
             * kernel before (a whole block packed at once waited on
             * memory: 3% of 1024^3). Otherwise, the block at once. */
            int jit = !j->tb && !j->Br && m1 - m0 >= 14;
            const float *bsrc = jit ? j->B + pc * j->ldb + jc : NULL;
            sg_pack_b(j->tb, j->B, j->ldb, j->Br, pc, kb, jc, jit && nb_ > 32 ? 32 : nb_, 32, pb);
            for (int64_t ir = m0; ir < m1; ir += 14) {
                int m = m1 - ir < 14 ? (int)(m1 - ir) : 14;
                sg_pack_a_rows(j->ta, j->A, j->lda, j->Ar, ir, m, pc, kb, pa);
                float *c = j->C + ir * j->ldc + jc;
                /* the next A panel's source, to L2 a share per full-tile
                 * call, chunk-major (each row of A starts pages that the
                 * hardware prefetcher does not run into) */
                int64_t nir = ir + 14 < m1 ? ir + 14 : m0, npc = ir + 14 < m1 ? pc : pc + kb;
                int nm = npc < j->K && !j->ta && !j->Ar ? (int)(m1 - nir < 14 ? m1 - nir : 14) : 0;
                int64_t nch = (sg_kblock(j, npc) + 15) / 16, calls = nb_ / 32;   /* 16-float chunks a row */
                int64_t cpc = calls ? (nch + calls - 1) / calls : 0;                /* chunks per call */
                const float *anext = nm ? j->A + nir * j->lda + npc : NULL;
                sg_pf q = {.ald = j->lda, .arows = nm};
                for (int64_t jr = 0; jr < nb_; jr += 32) {
                    int n = nb_ - jr < 32 ? (int)(nb_ - jr) : 32;
                    int b_pf = 0;
                    if (jit && ir == m0) {
                        if (jr > 0)
                            sg_pack_b(0, j->B, j->ldb, NULL, pc, kb, jc + jr, n, 32, pb + jr * kb);
                        b_pf = jr + 32 < nb_;
                        q.b = bsrc + jr + 32, q.bld = j->ldb;
                    }
                    if (m == 14 && n == 32) {
                        int64_t ch = jr / 32 * cpc, chn = nch - ch;
                        q.an = nm && chn > 0 ? nm * (int)(chn < cpc ? chn : cpc) : 0;
                        q.a = q.an ? anext + ch * 16 : NULL;
                        (b_pf ? sg_z14_2ab : sg_z14_2a)(kb, pa, pb + jr * kb, c + jr, j->ldc, j->alpha, beta, &q);
                        CPU_VZEROUPPER();
                        continue;
                    }
                    sg_zk[(m + 1) / 2 - 1][n > 16](kb, pa, pb + jr * kb, c + jr, j->ldc, m, n, j->alpha, beta);
                    CPU_VZEROUPPER();
                }
            }
        }
    }
#else
    (void)j, (void)m0, (void)m1, (void)n0, (void)n1, (void)nc, (void)pa, (void)pb;
#endif
}

static void sg_block(const sg_job *j, int64_t m0, int64_t m1, int64_t n0, int64_t n1)
{
    const sg_isa *is = j->isa;
    const int mr = is->mr, nr = is->nr;
    int64_t mc = is->mc < m1 - m0 ? is->mc : (m1 - m0 + mr - 1) / mr * mr;
    int64_t nc = is->nc < n1 - n0 ? is->nc : (n1 - n0 + nr - 1) / nr * nr;
    size_t na = (size_t)(is->rowa ? 14 * SG_LDS : mc * j->kcb), nb = (size_t)(nc * j->kcb);
    float *buf = sg_scratch(na + nb + 16);
    if (!buf) {
        sg_blas(j, m0, m1, n0, n1);
        return;
    }
    float *pa = buf, *pb = buf + (na + 15) / 16 * 16;
    if (is->rowa) {
        sg_block_rows(j, m0, m1, n0, n1, nc, pa, pb);
        return;
    }
    for (int64_t jc = n0; jc < n1; jc += nc) {
        int64_t nb_ = n1 - jc < nc ? n1 - jc : nc;
        for (int64_t pc = 0; pc < j->K; pc += j->kcb) {
            int64_t kb = sg_kblock(j, pc);
            float beta = pc == 0 ? j->beta : 1.0f;
            sg_pack_b(j->tb, j->B, j->ldb, j->Br, pc, kb, jc, nb_, nr, pb);
            for (int64_t ic = m0; ic < m1; ic += mc) {
                int64_t mb = m1 - ic < mc ? m1 - ic : mc;
                sg_pack_a(j->ta, j->A, j->lda, j->Ar, ic, mb, pc, kb, mr, pa);
                for (int64_t jr = 0; jr < nb_; jr += nr) {
                    int n = nb_ - jr < nr ? (int)(nb_ - jr) : nr;
                    const float *b = pb + jr * kb;
                    float *c = j->C + ic * j->ldc + jc + jr;
                    for (int64_t ir = 0; ir < mb; ir += mr) {
                        int m = mb - ir < mr ? (int)(mb - ir) : mr;
                        is->kern(kb, pa + ir * kb, b, c + ir * j->ldc, j->ldc, m, n, j->alpha, beta);
                        CPU_VZEROUPPER();
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

static void sg_run(const mge_kctx *ctx, sg_job j)
{
    const int64_t M = j.M, N = j.N, K = j.K;
    if (M <= 0 || N <= 0)
        return;
    if (K <= 0 || j.alpha == 0.0f) {
        sg_scale(M, N, j.beta, j.C, j.ldc);
        return;
    }
    j.isa = sg_pick();
    /* K blocks of near-equal size from K alone (never the thread count) */
    int64_t nkb = (K + j.isa->kc - 1) / j.isa->kc;
    j.kcb = (K + nkb - 1) / nkb;
    int threads = cpu_threads(ctx);
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

void mge_sgemm(const mge_kctx *ctx, int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
               const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc)
{
    sg_run(ctx, (sg_job){.ta = transA != 0, .tb = transB != 0, .M = M, .N = N, .K = K, .lda = lda, .ldb = ldb,
                         .ldc = ldc, .alpha = alpha, .beta = beta, .A = A, .B = B, .C = C});
}

void mge_sgemm_ptr(const mge_kctx *ctx, int64_t M, int64_t N, int64_t K, float alpha, const float *const *Ar,
                   const float *A, int64_t lda, const float *const *Br, const float *B, int64_t ldb, float beta,
                   float *C, int64_t ldc)
{
    sg_run(ctx, (sg_job){.M = M, .N = N, .K = K, .lda = lda, .ldb = ldb, .ldc = ldc, .alpha = alpha, .beta = beta,
                         .A = A, .B = B, .Ar = Ar, .Br = Br, .C = C});
}


/* ---------------------------------------------------------------- call-site choice */

static int sg_env_blas;
static pthread_once_t sg_env_once = PTHREAD_ONCE_INIT;

static void sg_env_init(void)
{
    const char *e = getenv("MGE_GEMM");
    sg_env_blas = e && strcmp(e, "openblas") == 0;
}

/* Measured one product at a time on one core against OpenBLAS 0.3.21's
 * SkylakeX kernels (scripts/bench-gemm with the shapes of resnet18's and
 * mobilenet_v2's convolutions): ours won by 2-35% with N >= 128 columns,
 * K <= 1024 and at least 2^21 multiply-adds (im2col conv1 64x12544x147,
 * pointwise 96x12544x16, 144x3136x24, 384x196x64, 128x784x576) and lost
 * on small or thin products (64x196x64, 128x49x128, 512x49x2304: edge
 * tiles and per-call overheads) and on M = 1 (a GEMV). */
int mge_sgemm_native(void)
{
    pthread_once(&sg_env_once, sg_env_init);
    return !sg_env_blas && sg_pick()->rowa;
}

int mge_sgemm_pick_n(int64_t M, int64_t N, int64_t K, int64_t nmin)
{
    pthread_once(&sg_env_once, sg_env_init);
    if (sg_env_blas || !sg_pick()->rowa)
        return 0;
    return M >= 14 && N >= nmin && K <= 1024 && (double)M * (double)N * (double)K >= 2097152.0;
}

int mge_sgemm_pick(int64_t M, int64_t N, int64_t K)
{
    return mge_sgemm_pick_n(M, N, K, 128);
}
