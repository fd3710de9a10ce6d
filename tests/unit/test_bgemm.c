/* test_bgemm.c — mge_bgemm (kernels/cpu/cpu_bgemm.c) at every bf16 level
 * this CPU has (portable, AVX512-BF16, AMX, through mge_bgemm_at), against
 * a double-precision product of the bf16-rounded operands: the only error
 * left is f32 summation, so the tolerance is K * 2^-23 * sum|a*b| (a
 * bound on recursive f32 summation, loose by the sqrt(K) a random walk
 * would give); odd shapes, transposes, beta, threads.
 *
 * `test_bgemm --bench [sizes...]` instead measures one thread's AMX peak
 * (a loop of tdpbf16ps on 4 C tiles) and mge_bgemm's GFLOP/s at the AMX
 * and AVX512-BF16 levels (scripts/bench-gemm --bf16). */
#include "unit.h"

#include "cpu/cpu.h"
#include "internal.h"

#include <stdint.h>
#include <time.h>

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static float frand(void)
{
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (float)((double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static float *rand_buf(size_t n)
{
    float *p = mge_aligned_alloc(n * sizeof *p + 64);
    for (size_t i = 0; i < n; i++)
        p[i] = frand();
    return p;
}

static double bf(float x)
{
    return (double)mge_bf16_to_f32(mge_f32_to_bf16(x));
}

/* C = op(A) op(B) + beta C0 at level lv on ctx; 0 on failure (printed) */
static int check_one(int lv, const mge_kctx *ctx, int ta, int tb, int64_t M, int64_t N, int64_t K, float beta,
                     float **out)
{
    float *A = rand_buf((size_t)(M * K)), *B = rand_buf((size_t)(K * N)), *C = rand_buf((size_t)(M * N));
    float *C0 = malloc(sizeof(float) * (size_t)(M * N));
    memcpy(C0, C, sizeof(float) * (size_t)(M * N));
    void *pb = mge_aligned_alloc(mge_bgemm_pack_size(K, N));
    void *ws = malloc(mge_bgemm_ws(M, N, K, 2));
    int64_t lda = ta ? M : K, ldb = tb ? K : N;
    mge_bgemm_pack_at(lv, tb, K, N, B, ldb, pb);
    mge_bgemm_at(lv, ctx, ta, M, N, K, A, lda, pb, beta, C, N, ws);
    int ok = 1;
    for (int64_t i = 0; i < M && ok; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = beta == 0.0f ? 0.0 : (double)beta * C0[i * N + j], mag = fabs(s);
            for (int64_t k = 0; k < K; k++) {
                double p = bf(ta ? A[k * lda + i] : A[i * lda + k]) * bf(tb ? B[j * ldb + k] : B[k * ldb + j]);
                s += p, mag += fabs(p);
            }
            double tol = (double)(K + 2) * 0x1p-23 * mag + 1e-30;
            if (!(fabs(C[i * N + j] - s) <= tol)) {
                fprintf(stderr, "level %d ta %d tb %d %ldx%ldx%ld beta %g: C[%ld][%ld] = %.9g, want %.9g (tol %g)\n",
                        lv, ta, tb, (long)M, (long)N, (long)K, beta, (long)i, (long)j, C[i * N + j], s, tol);
                ok = 0;
                break;
            }
        }
    if (out)
        *out = C;
    else
        mge_aligned_free(C);
    mge_aligned_free(A), mge_aligned_free(B), mge_aligned_free(pb), free(ws), free(C0);
    return ok;
}

static int levels(void)
{
    return mge_cpu_bf16();
}

static void test_shapes(void)
{
    static const int64_t sz[][3] = {{1, 1, 1},   {1, 1, 2},    {1, 33, 7},   {3, 1, 31},  {17, 16, 32},
                                    {32, 32, 32}, {33, 31, 33}, {15, 47, 65}, {64, 96, 513}, {45, 70, 1025},
                                    {300, 270, 37}, {31, 300, 600}};
    for (int lv = 0; lv <= levels(); lv++)
        for (size_t s = 0; s < sizeof sz / sizeof sz[0]; s++)
            for (int t = 0; t < 4; t++) {
                float beta = t == 0 ? 0.0f : t == 1 ? 1.0f : 0.5f;
                CHECK_MSG(check_one(lv, NULL, t & 1, (t >> 1) & 1, sz[s][0], sz[s][1], sz[s][2], beta, NULL),
                          "level %d shape %zu", lv, s);
            }
}

static void test_random(void)
{
    for (int lv = 0; lv <= levels(); lv++)
        for (int r = 0; r < 12; r++) {
            int64_t M = 1 + (int64_t)((frand() + 1) * 60), N = 1 + (int64_t)((frand() + 1) * 60);
            int64_t K = 1 + (int64_t)((frand() + 1) * 200);
            CHECK(check_one(lv, NULL, r & 1, (r >> 1) & 1, M, N, K, r % 3 == 0 ? 0.0f : 1.0f, NULL));
        }
}

static void test_k0(void)
{
    float C[6] = {1, 2, 3, 4, 5, 6};
    char ws[128];
    mge_bgemm(NULL, 0, 2, 3, 0, NULL, 0, NULL, 2.0f, C, 3, ws);
    CHECK(C[0] == 2 && C[5] == 12);
    mge_bgemm(NULL, 0, 2, 3, 0, NULL, 0, NULL, 0.0f, C, 3, ws);
    CHECK(C[0] == 0 && C[5] == 0);
}

/* 1, 2 and 3 threads give the same bits (shapes with several tasks) */
static void test_threads(void)
{
    mge_pool *p2 = mge_pool_create(2), *p3 = mge_pool_create(3);
    mge_kctx c2 = {.pool = p2, .threads = 2}, c3 = {.pool = p3, .threads = 3};
    static const int64_t sz[][3] = {{600, 530, 700}, {40, 900, 300}, {513, 33, 1100}};
    for (int lv = 0; lv <= levels(); lv++)
        for (size_t s = 0; s < 3; s++)
            for (int ta = 0; ta < 2; ta++) {
                if (lv == 0 && s == 0)
                    continue;   /* slow in portable loops */
                float *c1, *cb, *cc;
                int64_t M = sz[s][0], N = sz[s][1], K = sz[s][2];
                uint64_t seed = rng_state;
                CHECK(check_one(lv, NULL, ta, 1, M, N, K, 1.0f, &c1));
                rng_state = seed;
                CHECK(check_one(lv, &c2, ta, 1, M, N, K, 1.0f, &cb));
                rng_state = seed;
                CHECK(check_one(lv, &c3, ta, 1, M, N, K, 1.0f, &cc));
                CHECK_MSG(memcmp(c1, cb, sizeof(float) * (size_t)(M * N)) == 0, "level %d shape %zu 2 threads", lv, s);
                CHECK_MSG(memcmp(c1, cc, sizeof(float) * (size_t)(M * N)) == 0, "level %d shape %zu 3 threads", lv, s);
                mge_aligned_free(c1), mge_aligned_free(cb), mge_aligned_free(cc);
            }
    mge_pool_free(p2);
    mge_pool_free(p3);
}

/* the packs round to nearest even and put each element where the format says */
static void test_pack(void)
{
    float B[3 * 2] = {1.0f + 0x1p-8f, 1.0f + 0x3p-8f, -2.0f, 3.5f, 1.0f + 0x1p-9f, 7.0f};   /* [K=3][N=2] */
    for (int lv = 0; lv <= levels() && lv <= MGE_BF16_AVX512; lv++)
        for (int tb = 0; tb < 2; tb++) {
            float Bt[6];
            for (int k = 0; k < 3; k++)
                for (int n = 0; n < 2; n++)
                    Bt[n * 3 + k] = B[k * 2 + n];
            uint16_t *p = mge_aligned_alloc(mge_bgemm_pack_size(3, 2));
            mge_bgemm_pack_at(lv, tb, 3, 2, tb ? Bt : B, tb ? 3 : 2, p);
            for (int k = 0; k < 32; k++)
                for (int n = 0; n < 32; n++) {
                    uint16_t want = k < 3 && n < 2 ? mge_f32_to_bf16(B[k * 2 + n]) : 0;
                    uint16_t got = p[(n / 16) * 32 * 16 + (k / 2) * 32 + (n % 16) * 2 + k % 2];
                    CHECK_MSG(got == want, "level %d tb %d k %d n %d: %04x want %04x", lv, tb, k, n, got, want);
                }
            CHECK(mge_f32_to_bf16(1.0f + 0x1p-8f) == 0x3f80);   /* tie to even: down */
            CHECK(mge_f32_to_bf16(1.0f + 0x3p-8f) == 0x3f82);   /* tie to even: up */
            mge_aligned_free(p);
        }
}

/* ---------------------------------------------------------------- bench */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
/* one thread's AMX bf16 peak: 4 independent C tiles, A and B fixed in tiles */
__attribute__((target("amx-tile,amx-bf16"))) static double amx_peak(void)
{
    struct {
        uint8_t palette, start, pad[14];
        uint16_t colsb[16];
        uint8_t rows[16];
    } cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++)
        cfg.colsb[t] = 64, cfg.rows[t] = 16;
    /* gcc 12's _tile_loadconfig tells the compiler it reads 8 bytes only: keep the stores */
    __asm__ volatile("" : : "r"(&cfg) : "memory");
    _tile_loadconfig(&cfg);
    static uint16_t buf[16 * 32] __attribute__((aligned(64)));
    _tile_loadd(4, buf, 64);
    _tile_loadd(5, buf, 64);
    _tile_loadd(6, buf, 64);
    _tile_loadd(7, buf, 64);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        long n = 2000000;
        double t0 = now();
        for (long i = 0; i < n; i++) {
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
        double t = now() - t0, g = 4.0 * n * 16 * 16 * 32 * 2 / t / 1e9;
        best = g > best ? g : best;
    }
    _tile_release();
    return best;
}
#else
static double amx_peak(void)
{
    return 0;
}
#endif

static int bench(int argc, char **argv)
{
    int64_t sizes[16], ns = 0;
    for (int i = 0; i < argc && ns < 16; i++)
        sizes[ns++] = atoll(argv[i]);
    if (!ns)
        sizes[0] = 1024, sizes[1] = 2048, sizes[2] = 4096, ns = 3;
    double peak = mge_cpu_bf16() == MGE_BF16_AMX ? amx_peak() : 0;
    printf("bf16 level %s; AMX peak (1 thread, tdpbf16ps on 4 C tiles): %.0f GFLOP/s\n",
           mge_cpu_bf16_name(mge_cpu_bf16()), peak);
    for (int64_t s = 0; s < ns; s++) {
        int64_t n = sizes[s];
        float *A = rand_buf((size_t)(n * n)), *B = rand_buf((size_t)(n * n)), *C = rand_buf((size_t)(n * n));
        void *pb = mge_aligned_alloc(mge_bgemm_pack_size(n, n)), *ws = mge_aligned_alloc(mge_bgemm_ws(n, n, n, 1));
        printf("%5ld^3:", (long)n);
        for (int lv = mge_cpu_bf16(); lv >= MGE_BF16_AVX512; lv--) {
            double best = 1e30, bestp = 1e30;
            for (int r = 0; r < (n >= 4096 ? 3 : 5); r++) {
                double t0 = now();
                mge_bgemm_pack_at(lv, 0, n, n, B, n, pb);
                double t1 = now();
                mge_bgemm_at(lv, NULL, 0, n, n, n, A, n, pb, 0.0f, C, n, ws);
                double t2 = now();
                best = t2 - t1 < best ? t2 - t1 : best;
                bestp = t2 - t0 < bestp ? t2 - t0 : bestp;
            }
            double g = 2.0 * n * n * n / best / 1e9, gp = 2.0 * n * n * n / bestp / 1e9;
            printf("  %s %.0f GFLOP/s", lv == MGE_BF16_AMX ? "amx" : "avx512-bf16", g);
            if (peak > 0)
                printf(" (%.0f%% of AMX peak)", 100 * g / peak);
            printf(", with B's pack %.0f;", gp);
        }
        printf("\n");
        mge_aligned_free(A), mge_aligned_free(B), mge_aligned_free(C), mge_aligned_free(pb), mge_aligned_free(ws);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--bench") == 0)
        return bench(argc - 2, argv + 2);
    printf("test_bgemm: bf16 levels 0..%d (%s)\n", levels(), mge_cpu_bf16_name(levels()));
    RUN(test_pack);
    RUN(test_shapes);
    RUN(test_random);
    RUN(test_k0);
    RUN(test_threads);
    return unit_done();
}
