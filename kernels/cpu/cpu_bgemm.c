/* cpu_bgemm.c — bf16 GEMM (see cpu.h, mge_bgemm): C = A B (+ beta C) with
 * A and B rounded to bf16 (nearest even) while they are packed, products
 * summed in f32, C f32.
 *
 * Packed B (mge_bgemm_pack), one format for both kernels: K padded with
 * zeros to Kp (a multiple of 32), N to Np (a multiple of 32); panels of 16
 * columns, panel q at q * Kp * 16 bf16; inside a panel, k-pair p (k = 2p,
 * 2p+1) is 64 bytes: column c's two bf16 at p*32 + 2c. That is the VNNI
 * pair layout of an AMX B tile (16 pair rows of 16 columns x 2, stride 64
 * bytes: 32 k of one panel) and, per pair, one zmm of vdpbf16ps.
 * Packed A (per call, in the caller's ws): Mp = M rounded up to 32 rows,
 * zero padded, in groups of 16 rows, each Kp/32 blocks of 16 rows x 32 k
 * (bf16 (i, k) at BG_PA(i, k)): an AMX A tile is one contiguous 1 KiB
 * block (row-major rows of A at a stride of Kp * 2 bytes put a tile's 16
 * rows in a few L1 sets when Kp is a power of two).
 *
 * Kernels (mge_cpu_bf16()):
 *   AMX: 32 x 32 blocks of C in 4 tiles (2 A tiles x 2 B tiles per 32 k);
 *   AVX512-BF16: 8 x 32 blocks in 16 zmm, broadcast an A pair, vdpbf16ps
 *     with the two B panels' pair rows;
 *   none: portable loops on the same packed data (exact f32 products of
 *     the bf16 values, summed in f32), so the API works on any CPU.
 * Blocking: K blocks of BG_KC (from K alone) so the A strip of a block (32
 * x BG_KC bf16) stays in L1 and the B block (BG_KC x BG_NC) in L2; C is
 * loaded and stored once per K block. Tasks are (row block, column block)
 * pairs of C; each C element sees the same operations in the same order
 * in any task, so results are bit-identical for any thread count. Edge
 * blocks go through a 32 x 32 buffer (zero outside C).
 * Denormal bf16 inputs count as zero in the AMX and AVX512-BF16 products
 * (the hardware's rule), the portable loops keep them.
 *
 * Where it stands (scripts/bench-gemm --bf16; figures in bench/RESULTS*):
 * the AMX kernel is well short of the tdpbf16ps peak. What was measured:
 * the cache blocks (KC 128..1024, NC/MB 128..1024), a B prefetch and a
 * j-outer order changed little or lost; with every tile load hitting the
 * same L1 lines it still ran at about half of peak, so the 4 tile loads
 * per 4 tdpbf16ps (each waiting for the tile it overwrites) are the limit,
 * not the caches. Next: keep C in tiles over all of K and software-
 * pipeline the loads across two 2x2 blocks. */
#include "cpu.h"

#if CPU_X86 && defined(__GNUC__) && !defined(__clang__)
#define BG_X86 1
#include <immintrin.h>
#define BG_BF16 __attribute__((target("avx512f,avx512bf16,avx512bw,avx512vl"), optimize("O3")))
#define BG_AMX __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw")))
#else
#define BG_X86 0
#endif

#define BG_KC 512   /* k per K block, a multiple of 32 */
#define BG_NC 256   /* columns per task, a multiple of 32 */
#define BG_MB 256   /* rows per task, a multiple of 32 */
#define BG_MR 8     /* AVX512-BF16 rows per block, dividing 16 */
#define BG_PA(Kp, i, k) (((i) / 16) * (Kp) * 16 + ((k) / 32) * 512 + ((i) % 16) * 32 + (k) % 32)

static int64_t up(int64_t x, int64_t m)
{
    return (x + m - 1) / m * m;
}

size_t mge_bgemm_pack_size(int64_t K, int64_t N)
{
    return (size_t)up(K > 0 ? K : 1, 32) * (size_t)up(N > 0 ? N : 1, 32) * 2;
}

size_t mge_bgemm_ws(int64_t M, int64_t N, int64_t K, int threads)
{
    (void)N, (void)threads;
    return (size_t)up(M > 0 ? M : 1, 32) * (size_t)up(K > 0 ? K : 1, 32) * 2 + 64;
}

/* ---------------------------------------------------------------- packing */

/* One row of bf16: bf16(src[0..n) at stride s), zero to npad, in chunks
 * of 32: element i at dst[(i / 32) * cs + i % 32]. */
static void bg_row_scalar(const float *src, int64_t s, int64_t n, uint16_t *dst, int64_t npad, int64_t cs)
{
    for (int64_t i = 0; i < npad; i++)
        dst[(i / 32) * cs + i % 32] = i < n ? mge_f32_to_bf16(src[i * s]) : 0;
}

#if BG_X86
/* contiguous row: 32 at a time, masked at the end (vcvtne2ps2bf16 rounds to nearest even) */
static BG_BF16 void bg_row_vec(const float *src, int64_t n, uint16_t *dst, int64_t npad, int64_t cs)
{
    for (int64_t i = 0; i < npad; i += 32) {
        int64_t r = n - i;
        __mmask16 m0 = r >= 16 ? 0xffff : r <= 0 ? 0 : (__mmask16)((1u << r) - 1);
        __mmask16 m1 = r >= 32 ? 0xffff : r <= 16 ? 0 : (__mmask16)((1u << (r - 16)) - 1);
        __m512 x0 = _mm512_maskz_loadu_ps(m0, src + i), x1 = _mm512_maskz_loadu_ps(m1, src + i + 16);
        __m512bh b = _mm512_cvtne2ps_pbh(x1, x0);
        _mm512_storeu_si512((void *)(dst + (i / 32) * cs), (__m512i)b);
    }
}

/* B [K,N] rows 2p, 2p+1, columns n0..n0+16 of one panel into its pair rows */
static BG_BF16 void bg_packb_nt_vec(const float *B, int64_t ldb, int64_t K, int64_t N, int64_t Kp, uint16_t *dst)
{
    const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                                         21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    int64_t Np = up(N, 32);
    for (int64_t n0 = 0; n0 < Np; n0 += 16) {
        int64_t r = N - n0;
        __mmask16 m = r >= 16 ? 0xffff : r <= 0 ? 0 : (__mmask16)((1u << r) - 1);
        uint16_t *pd = dst + (n0 / 16) * Kp * 16;
        for (int64_t p = 0; p < Kp / 2; p++) {
            __m512 x0 = 2 * p < K ? _mm512_maskz_loadu_ps(m, B + 2 * p * ldb + n0) : _mm512_setzero_ps();
            __m512 x1 = 2 * p + 1 < K ? _mm512_maskz_loadu_ps(m, B + (2 * p + 1) * ldb + n0) : _mm512_setzero_ps();
            __m512i b = (__m512i)_mm512_cvtne2ps_pbh(x1, x0);
            _mm512_storeu_si512((void *)(pd + p * 32), _mm512_permutexvar_epi16(idx, b));
        }
    }
}
#endif

static int bg_vec(void)
{
    return BG_X86 && mge_cpu_bf16() >= MGE_BF16_AVX512;
}

/* level-taking pack (tests run each level) */
static void bg_pack(int level, int transB, int64_t K, int64_t N, const float *B, int64_t ldb, void *dst)
{
    int64_t Kp = up(K > 0 ? K : 1, 32), Np = up(N > 0 ? N : 1, 32);
    uint16_t *d = dst;
#if BG_X86
    if (level >= MGE_BF16_AVX512 && !transB) {
        bg_packb_nt_vec(B, ldb, K, N, Kp, d);
        CPU_VZEROUPPER();
        return;
    }
#endif
    /* transB (B as [N,K], a weight [out,in]): each column n is a contiguous row of B */
    uint16_t row[32];
    for (int64_t n = 0; n < Np; n++) {
        uint16_t *pd = d + (n / 16) * Kp * 16 + (n % 16) * 2;
        for (int64_t k0 = 0; k0 < Kp; k0 += 32) {
            int64_t kn = n < N ? (K - k0 < 32 ? K - k0 : 32) : 0;
            if (kn < 0)
                kn = 0;
#if BG_X86
            if (level >= MGE_BF16_AVX512 && transB)
                bg_row_vec(B + n * ldb + k0, kn, row, 32, 32);
            else
#endif
                bg_row_scalar(transB ? B + n * ldb + k0 : B + k0 * ldb + n, transB ? 1 : ldb, kn, row, 32, 32);
            for (int64_t t = 0; t < 16; t++)
                memcpy(pd + (k0 / 2 + t) * 32, row + 2 * t, 4);
        }
    }
#if BG_X86
    if (level >= MGE_BF16_AVX512)
        CPU_VZEROUPPER();
#endif
}

void mge_bgemm_pack(int transB, int64_t K, int64_t N, const float *B, int64_t ldb, void *dst)
{
    bg_pack(bg_vec() ? MGE_BF16_AVX512 : MGE_BF16_NONE, transB, K, N, B, ldb, dst);
}

void mge_bgemm_pack_at(int level, int transB, int64_t K, int64_t N, const float *B, int64_t ldb, void *dst)
{
    bg_pack(level, transB, K, N, B, ldb, dst);
}

typedef struct bg_job {
    int level, ta;
    int64_t M, N, K, Mp, Kp, lda, ldc;
    const float *A;
    uint16_t *pa;
    const uint16_t *pb;
    float beta;
    float *C;
    int64_t nbn;   /* column blocks */
} bg_job;

/* rows [r0, r1) (in 32-row blocks) of packed A */
static void bg_packa_rows(void *arg, int64_t b0, int64_t b1, int thread)
{
    (void)thread;
    const bg_job *j = arg;
    for (int64_t i = b0 * 32; i < b1 * 32 && i < j->Mp; i++) {
        uint16_t *d = j->pa + BG_PA(j->Kp, i, 0);
        const float *s = j->ta ? j->A + i : j->A + i * j->lda;
        int64_t kn = i < j->M ? j->K : 0;
#if BG_X86
        if (j->level >= MGE_BF16_AVX512 && !j->ta) {
            bg_row_vec(s, kn, d, j->Kp, 512);
            continue;
        }
#endif
        bg_row_scalar(s, j->ta ? j->lda : 1, kn, d, j->Kp, 512);
    }
#if BG_X86
    if (j->level >= MGE_BF16_AVX512 && !j->ta)
        CPU_VZEROUPPER();
#endif
}

/* transposed A: 32 rows at once, reading 32 contiguous floats per k */
static void bg_packa_trows(void *arg, int64_t b0, int64_t b1, int thread)
{
    (void)thread;
    const bg_job *j = arg;
    for (int64_t b = b0; b < b1; b++) {
        int64_t i0 = b * 32, mi = j->M - i0 < 32 ? j->M - i0 : 32;
        uint16_t *d = j->pa + BG_PA(j->Kp, i0, 0);
        memset(d, 0, sizeof(uint16_t) * (size_t)(32 * j->Kp));   /* the padding */
        for (int64_t k = 0; k < j->K; k++) {
            const float *s = j->A + k * j->lda + i0;
            for (int64_t r = 0; r < mi; r++)
                d[BG_PA(j->Kp, r, k)] = mge_f32_to_bf16(s[r]);
        }
    }
}

/* ---------------------------------------------------------------- kernels */

#if BG_X86
/* C block [m x n] at c (ldc) <-> 32 x 32 buffer, zero outside */
static void bg_get(const float *c, int64_t ldc, int m, int n, float *t)
{
    memset(t, 0, sizeof(float) * 32 * 32);
    for (int r = 0; r < m; r++)
        memcpy(t + r * 32, c + r * ldc, sizeof(float) * (size_t)n);
}

static void bg_put(float *c, int64_t ldc, int m, int n, const float *t)
{
    for (int r = 0; r < m; r++)
        memcpy(c + r * ldc, t + r * 32, sizeof(float) * (size_t)n);
}
#endif

/* portable: C[i0.., j0..] (m x n <= 32 x 32) += A B over pairs [p0, p1) */
static void bg_block_scalar(const bg_job *j, int64_t i0, int64_t j0, int m, int n, int64_t p0, int64_t p1, int zero)
{
    for (int r = 0; r < m; r++) {
        int64_t i = i0 + r;
        float *c = j->C + (i0 + r) * j->ldc + j0;
        for (int q = 0; q < n; q++) {
            int64_t col = j0 + q;
            const uint16_t *b = j->pb + (col / 16) * j->Kp * 16 + (col % 16) * 2;
            float s = zero ? 0.0f : c[q];
            for (int64_t p = p0; p < p1; p++) {
                /* vdpbf16ps's order: the pair's two products, then onto the sum */
                const uint16_t *a = j->pa + BG_PA(j->Kp, i, 2 * p);
                float pr = mge_bf16_to_f32(a[0]) * mge_bf16_to_f32(b[p * 32]);
                pr += mge_bf16_to_f32(a[1]) * mge_bf16_to_f32(b[p * 32 + 1]);
                s += pr;
            }
            c[q] = s;
        }
    }
}

#if BG_X86
/* AVX512-BF16: rows MR x 32 columns over pairs [p0, p1) */
static inline BG_BF16 __attribute__((always_inline)) void bg_z(const bg_job *j, int MR, int64_t i0, int64_t j0, int n,
                                                               int64_t p0, int64_t p1, int zero)
{
    __m512 acc[BG_MR][2];
    __mmask16 m0 = n >= 16 ? 0xffff : (__mmask16)((1u << n) - 1);
    __mmask16 m1 = n >= 32 ? 0xffff : n <= 16 ? 0 : (__mmask16)((1u << (n - 16)) - 1);
    float *c = j->C + i0 * j->ldc + j0;
    for (int r = 0; r < MR; r++) {
        if (zero) {
            acc[r][0] = _mm512_setzero_ps();
            acc[r][1] = _mm512_setzero_ps();
        } else {
            acc[r][0] = _mm512_maskz_loadu_ps(m0, c + r * j->ldc);
            acc[r][1] = _mm512_maskz_loadu_ps(m1, c + r * j->ldc + 16);
        }
    }
    const uint16_t *b0 = j->pb + (j0 / 16) * j->Kp * 16, *b1 = b0 + j->Kp * 16;
    const uint16_t *a = j->pa + BG_PA(j->Kp, i0, 0);   /* i0 .. i0 + MR in one group of 16 */
    for (int64_t p = p0; p < p1; p++) {
        __m512bh v0 = (__m512bh)_mm512_loadu_si512((const void *)(b0 + p * 32));
        __m512bh v1 = (__m512bh)_mm512_loadu_si512((const void *)(b1 + p * 32));
        const uint16_t *ap = a + (p / 16) * 512 + (p % 16) * 2;
        for (int r = 0; r < MR; r++) {
            int32_t w;
            memcpy(&w, ap + r * 32, 4);
            __m512bh x = (__m512bh)_mm512_set1_epi32(w);
            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], x, v0);
            acc[r][1] = _mm512_dpbf16_ps(acc[r][1], x, v1);
        }
    }
    for (int r = 0; r < MR; r++) {
        _mm512_mask_storeu_ps(c + r * j->ldc, m0, acc[r][0]);
        _mm512_mask_storeu_ps(c + r * j->ldc + 16, m1, acc[r][1]);
    }
}

#define BG_ZCASE(R) \
    case R: bg_z(j, R, ii, jj, n, p0, p1, zero); break;

static BG_BF16 void bg_block_avx(const bg_job *j, int64_t i0, int64_t i1, int64_t j0, int64_t j1, int64_t p0,
                                 int64_t p1, int zero)
{
    for (int64_t jj = j0; jj < j1; jj += 32) {
        int n = (int)(j1 - jj < 32 ? j1 - jj : 32);
        for (int64_t ii = i0; ii < i1; ii += BG_MR) {
            int m = (int)(i1 - ii < BG_MR ? i1 - ii : BG_MR);
            switch (m) {
                BG_ZCASE(1) BG_ZCASE(2) BG_ZCASE(3) BG_ZCASE(4) BG_ZCASE(5) BG_ZCASE(6) BG_ZCASE(7) BG_ZCASE(8)
            default: break;
            }
        }
    }
}

typedef struct bg_tilecfg {
    uint8_t palette, start;
    uint8_t pad[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} bg_tilecfg;

static BG_AMX void bg_amx_config(void)
{
    bg_tilecfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++)
        cfg.colsb[t] = 64, cfg.rows[t] = 16;   /* every tile 16 x 64 bytes */
    /* gcc 12's _tile_loadconfig tells the compiler it reads 8 bytes only: keep the stores */
    __asm__ volatile("" : : "r"(&cfg) : "memory");
    _tile_loadconfig(&cfg);
}

/* AMX: rows [i0, i1) (i0 a multiple of 32), columns [j0, j1), pairs [p0, p1) (multiples of 16) */
static BG_AMX void bg_block_amx(const bg_job *j, int64_t i0, int64_t i1, int64_t j0, int64_t j1, int64_t p0,
                                int64_t p1, int zero)
{
    float tbuf[32 * 32] __attribute__((aligned(64)));
    for (int64_t ii = i0; ii < i1; ii += 32) {
        int m = (int)(i1 - ii < 32 ? i1 - ii : 32);
        const uint16_t *a0 = j->pa + BG_PA(j->Kp, ii, 0), *a1 = a0 + 16 * j->Kp;
        for (int64_t jj = j0; jj < j1; jj += 32) {
            int n = (int)(j1 - jj < 32 ? j1 - jj : 32);
            float *c = j->C + ii * j->ldc + jj, *cb = c;
            int64_t sc = j->ldc * 4;
            if (m < 32 || n < 32) {
                if (!zero)
                    bg_get(c, j->ldc, m, n, tbuf);
                cb = tbuf, sc = 128;
            }
            if (zero) {
                _tile_zero(0);
                _tile_zero(1);
                _tile_zero(2);
                _tile_zero(3);
            } else {
                _tile_loadd(0, cb, sc);
                _tile_loadd(1, cb + 16, sc);
                _tile_loadd(2, (const char *)cb + 16 * sc, sc);
                _tile_loadd(3, (const char *)cb + 16 * sc + 64, sc);
            }
            const uint16_t *b0 = j->pb + (jj / 16) * j->Kp * 16, *b1 = b0 + j->Kp * 16;
            for (int64_t p = p0; p < p1; p += 16) {
                /* each load just before its first use */
                _tile_loadd(4, a0 + p * 32, 64);
                _tile_loadd(6, b0 + p * 32, 64);
                _tile_dpbf16ps(0, 4, 6);
                _tile_loadd(7, b1 + p * 32, 64);
                _tile_dpbf16ps(1, 4, 7);
                _tile_loadd(5, a1 + p * 32, 64);
                _tile_dpbf16ps(2, 5, 6);
                _tile_dpbf16ps(3, 5, 7);
            }
            _tile_stored(0, cb, sc);
            _tile_stored(1, cb + 16, sc);
            _tile_stored(2, (char *)cb + 16 * sc, sc);
            _tile_stored(3, (char *)cb + 16 * sc + 64, sc);
            if (cb == tbuf)
                bg_put(c, j->ldc, m, n, tbuf);
        }
    }
}
#endif

/* C *= beta on rows [i0, i1), columns [j0, j1) */
static void bg_scale(const bg_job *j, int64_t i0, int64_t i1, int64_t j0, int64_t j1)
{
    for (int64_t i = i0; i < i1; i++) {
        float *c = j->C + i * j->ldc;
        for (int64_t q = j0; q < j1; q++)
            c[q] *= j->beta;
    }
}

static void bg_task(void *arg, int64_t task, int thread)
{
    (void)thread;
    const bg_job *j = arg;
    int64_t bi = task / j->nbn, bj = task % j->nbn;
    int64_t i0 = bi * BG_MB, i1 = i0 + BG_MB < j->M ? i0 + BG_MB : j->M;
    int64_t j0 = bj * BG_NC, j1 = j0 + BG_NC < j->N ? j0 + BG_NC : j->N;
    int beta0 = j->beta == 0.0f;
    if (!beta0 && j->beta != 1.0f)
        bg_scale(j, i0, i1, j0, j1);
#if BG_X86
    if (j->level == MGE_BF16_AMX)
        bg_amx_config();   /* per thread */
#endif
    int64_t P = j->Kp / 2;
    for (int64_t p0 = 0; p0 < P; p0 += BG_KC / 2) {
        int64_t p1 = p0 + BG_KC / 2 < P ? p0 + BG_KC / 2 : P;
        int zero = beta0 && p0 == 0;
#if BG_X86
        if (j->level == MGE_BF16_AMX) {
            bg_block_amx(j, i0, i1, j0, j1, p0, p1, zero);
            continue;
        }
        if (j->level == MGE_BF16_AVX512) {
            bg_block_avx(j, i0, i1, j0, j1, p0, p1, zero);
            continue;
        }
#endif
        for (int64_t ii = i0; ii < i1; ii += 32)
            for (int64_t jj = j0; jj < j1; jj += 32)
                bg_block_scalar(j, ii, jj, (int)(i1 - ii < 32 ? i1 - ii : 32), (int)(j1 - jj < 32 ? j1 - jj : 32),
                                p0, p1, zero);
    }
#if BG_X86
    if (j->level >= MGE_BF16_AVX512)
        CPU_VZEROUPPER();
#endif
}

void mge_bgemm_at(int level, const mge_kctx *ctx, int transA, int64_t M, int64_t N, int64_t K, const float *A,
                  int64_t lda, const void *Bpacked, float beta, float *C, int64_t ldc, void *ws)
{
    if (M <= 0 || N <= 0)
        return;
    bg_job j = {.level = BG_X86 ? level : MGE_BF16_NONE, .ta = transA != 0, .M = M, .N = N, .K = K,
                .Mp = up(M, 32), .Kp = up(K > 0 ? K : 1, 32), .lda = lda, .ldc = ldc, .A = A,
                .pb = Bpacked, .beta = beta, .C = C};
    if (K <= 0) {
        for (int64_t i = 0; i < M; i++)
            for (int64_t q = 0; q < N; q++)
                C[i * ldc + q] = beta == 0.0f ? 0.0f : beta * C[i * ldc + q];
        return;
    }
    j.pa = (uint16_t *)(((uintptr_t)ws + 63) & ~(uintptr_t)63);
    cpu_parallel(ctx, j.Mp / 32, 1 + 4096 / (j.Kp > 0 ? j.Kp : 1), j.ta ? bg_packa_trows : bg_packa_rows, &j);
    j.nbn = (N + BG_NC - 1) / BG_NC;
    int64_t tasks = (M + BG_MB - 1) / BG_MB * j.nbn;
    if (tasks <= 1 || cpu_threads(ctx) <= 1) {
        for (int64_t t = 0; t < tasks; t++)
            bg_task(&j, t, 0);
        return;
    }
    mge_pool_run(ctx->pool, tasks, bg_task, &j);
}

void mge_bgemm(const mge_kctx *ctx, int transA, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
               const void *Bpacked, float beta, float *C, int64_t ldc, void *ws)
{
    mge_bgemm_at(mge_cpu_bf16(), ctx, transA, M, N, K, A, lda, Bpacked, beta, C, ldc, ws);
}
