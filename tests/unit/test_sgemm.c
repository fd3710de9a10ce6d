/* test_sgemm.c — mge_sgemm (kernels/cpu/cpu_sgemm.c) against a double
 * precision naive GEMM: odd sizes, every transA/transB, alpha/beta (beta = 0
 * over NaN garbage), padded leading dimensions (the padding must stay
 * untouched), bit-identical results on 1, 2 and 3 threads and in any tile
 * position, and mge_sgemm_pick. The ISA is picked once per process, so
 * main() runs the checks again in a child per level: MGE_CPU_ISA=baseline,
 * avx2, and the CPU's own (twice: MGE_GEMM unset and =openblas).
 *
 * `test_sgemm --bench [--cpu] [sizes...]` instead measures GFLOP/s of
 * mge_sgemm and OpenBLAS's cblas_sgemm on 1 and 2 threads (--cpu: 1 thread
 * only, timed by the thread's CPU clock), and the CPU's peak by a loop of
 * independent FMAs (scripts/bench-gemm). */
#include "unit.h"

#include "cpu/cpu.h"
#include "internal.h"

#include <cblas.h>
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
    /* allocated as the library allocates its arenas and weights (big
     * buffers on huge pages), so the benchmark sees the same TLB */
    float *p = mge_aligned_alloc(n * sizeof *p + 1);
    for (size_t i = 0; i < n; i++)
        p[i] = frand();
    return p;
}

/* op(X)[r][c] of a row-major X with leading dimension ld */
static double at(const float *X, int64_t ld, int t, int64_t r, int64_t c)
{
    return t ? X[c * ld + r] : X[r * ld + c];
}

/* One call, checked element by element: the result within a bound of the
 * rounding error of K float products, and C's padding untouched. */
static int check_one(const mge_kctx *ctx, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, float beta,
                     int pad, int nan_c)
{
    int64_t ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    int64_t lda = ac + pad, ldb = bc + pad * 2, ldc = N + pad * 3;
    float *A = rand_buf((size_t)(ar * lda)), *B = rand_buf((size_t)(br * ldb));
    float *C = rand_buf((size_t)(M * ldc)), *C0 = malloc(sizeof(float) * (size_t)(M * ldc) + 1);
    if (nan_c)
        for (int64_t i = 0; i < M * ldc; i++)
            C[i] = (i % ldc) < N ? (i % 2 ? NAN : INFINITY) : 7.0f;
    memcpy(C0, C, sizeof(float) * (size_t)(M * ldc));
    mge_sgemm(ctx, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    int bad = 0;
    for (int64_t i = 0; i < M && bad < 3; i++) {
        for (int64_t j = 0; j < ldc && bad < 3; j++) {
            float got = C[i * ldc + j];
            if (j >= N) {
                if (memcmp(&got, &C0[i * ldc + j], sizeof got) != 0) {
                    fprintf(stderr, "padding C[%lld][%lld] written\n", (long long)i, (long long)j);
                    bad++;
                }
                continue;
            }
            double s = 0, sa = 0;
            for (int64_t k = 0; k < K; k++) {
                double p = at(A, lda, ta, i, k) * at(B, ldb, tb, k, j);
                s += p;
                sa += fabs(p);
            }
            double cterm = beta != 0.0f ? beta * (double)C0[i * ldc + j] : 0.0;   /* NaN there only if beta != 0 */
            double want = alpha * s + cterm;
            double tol = 1.2e-7 * ((double)K + 4) * (fabs(alpha) * sa + fabs(cterm)) + 1e-30;
            if (!(fabs(got - want) <= tol)) {
                fprintf(stderr, "ta=%d tb=%d M=%lld N=%lld K=%lld alpha=%g beta=%g: C[%lld][%lld] = %.9g, want %.9g\n",
                        ta, tb, (long long)M, (long long)N, (long long)K, alpha, beta, (long long)i, (long long)j,
                        got, want);
                bad++;
            }
        }
    }
    free(A), free(B), free(C), free(C0);
    return bad == 0;
}

static const int64_t sizes[] = {1, 3, 7, 17, 33, 100, 257};
#define NS (int)(sizeof sizes / sizeof sizes[0])

/* Every M x N pair from the list at every transpose, K running through the
 * list too; beta = 0 over NaN/inf garbage on every other shape. */
static void test_shapes(void)
{
    for (int t = 0; t < 4; t++)
        for (int im = 0; im < NS; im++)
            for (int in = 0; in < NS; in++) {
                int64_t K = sizes[(im + 2 * in + t) % NS];
                int nan_c = (im + in) % 2;
                CHECK_MSG(check_one(NULL, t & 1, t >> 1, sizes[im], sizes[in], K, 1.0f, nan_c ? 0.0f : 1.0f,
                                    (im + in) % 3, nan_c),
                          "t=%d M=%lld N=%lld K=%lld", t, (long long)sizes[im], (long long)sizes[in], (long long)K);
            }
}

/* K across the list (and past one K block) with the other sizes fixed. */
static void test_k(void)
{
    static const int64_t ks[] = {1, 3, 7, 17, 33, 100, 257, 300, 700};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        for (int t = 0; t < 4; t++)
            CHECK(check_one(NULL, t & 1, t >> 1, 33, 45, ks[i], 1.0f, 0.0f, 1, 1));
    /* every block boundary at once: 3 K blocks, 3 column blocks (the last
     * with an edge panel), 4 full row panels and an edge, so the packing
     * of B panel by panel and the prefetches of the next A and B panels
     * (AVX-512) run across each boundary */
    for (int t = 0; t < 2; t++)
        CHECK(check_one(NULL, t, 0, 60, 1100, 1100, 1.0f, 0.5f, 1, 0));
}

static void test_alpha_beta(void)
{
    static const float ab[][2] = {{1, 0}, {0.5f, -2}, {1, 1}, {-1.25f, 0.75f}, {2, 0}};
    for (size_t i = 0; i < sizeof ab / sizeof ab[0]; i++)
        for (int t = 0; t < 4; t++) {
            CHECK(check_one(NULL, t & 1, t >> 1, 29, 70, 300, ab[i][0], ab[i][1], 2, ab[i][1] == 0));
            CHECK(check_one(NULL, t & 1, t >> 1, 5, 3, 9, ab[i][0], ab[i][1], 0, ab[i][1] == 0));
        }
}

/* K = 0 and alpha = 0: C = beta * C, no NaN from C when beta = 0. */
static void test_degenerate(void)
{
    float A[4] = {NAN, NAN, NAN, NAN}, B[4] = {1, 2, 3, 4};
    float C[6] = {1, 2, NAN, 3, 4, NAN};
    mge_sgemm(NULL, 0, 0, 2, 2, 0, 1.0f, A, 1, B, 2, 2.0f, C, 3);
    CHECK(C[0] == 2 && C[1] == 4 && C[3] == 6 && C[4] == 8 && isnan(C[2]));
    mge_sgemm(NULL, 0, 0, 2, 2, 2, 0.0f, A, 2, B, 2, 0.5f, C, 3);
    CHECK(C[0] == 1 && C[1] == 2 && C[3] == 3 && C[4] == 4);
    C[0] = NAN;
    mge_sgemm(NULL, 0, 0, 2, 2, 2, 0.0f, A, 2, B, 2, 0.0f, C, 3);
    CHECK(C[0] == 0 && C[1] == 0 && C[3] == 0 && C[4] == 0 && isnan(C[5]));
    mge_sgemm(NULL, 0, 0, 0, 2, 2, 1.0f, A, 2, B, 2, 0.0f, NULL, 3);   /* M = 0: touches nothing */
}

/* The same call on 1, 2 and 3 threads, bit for bit; shapes that split by
 * columns, by rows, and with edge tiles, and checked against the reference. */
static void test_threads(void)
{
    mge_pool *p2 = mge_pool_create(2), *p3 = mge_pool_create(3);
    mge_kctx c2 = {.pool = p2, .threads = 2}, c3 = {.pool = p3, .threads = 3};
    static const int64_t shp[][3] = {{300, 200, 130}, {37, 900, 70}, {500, 20, 300}, {257, 257, 257}, {64, 3136, 33}};
    for (size_t s = 0; s < sizeof shp / sizeof shp[0]; s++)
        for (int t = 0; t < 4; t++) {
            int ta = t & 1, tb = t >> 1;
            int64_t M = shp[s][0], N = shp[s][1], K = shp[s][2];
            int64_t lda = (ta ? M : K) + 1, ldb = tb ? K : N, ldc = N + 5;
            float *A = rand_buf((size_t)((ta ? K : M) * lda)), *B = rand_buf((size_t)((tb ? N : K) * ldb));
            float *C0 = rand_buf((size_t)(M * ldc));
            size_t cb = sizeof(float) * (size_t)(M * ldc);
            float *C1 = malloc(cb), *C2 = malloc(cb), *C3 = malloc(cb);
            memcpy(C1, C0, cb), memcpy(C2, C0, cb), memcpy(C3, C0, cb);
            mge_sgemm(NULL, ta, tb, M, N, K, 0.75f, A, lda, B, ldb, 0.5f, C1, ldc);
            mge_sgemm(&c2, ta, tb, M, N, K, 0.75f, A, lda, B, ldb, 0.5f, C2, ldc);
            mge_sgemm(&c3, ta, tb, M, N, K, 0.75f, A, lda, B, ldb, 0.5f, C3, ldc);
            CHECK_MSG(memcmp(C1, C2, cb) == 0 && memcmp(C1, C3, cb) == 0, "%lldx%lldx%lld t=%d", (long long)M,
                      (long long)N, (long long)K, t);
            free(A), free(B), free(C0), free(C1), free(C2), free(C3);
            if (s < 3)
                CHECK(check_one(t % 2 ? &c2 : &c3, ta, tb, M, N, K, 1.0f, 0.0f, 1, 1));
        }
    mge_pool_free(p2);
    mge_pool_free(p3);
}

/* mge_sgemm_ptr: A and/or B as row pointers (rows stored in reverse order
 * with gaps, so only the pointers find them) give the same bits as
 * mge_sgemm on the plain matrices, serially and on 2 threads. */
static void test_ptr(void)
{
    mge_pool *p2 = mge_pool_create(2);
    mge_kctx c2 = {.pool = p2, .threads = 2};
    static const int64_t shp[][3] = {{1, 1, 1}, {7, 33, 17}, {32, 224, 288}, {100, 257, 3}, {288, 64, 224},
                                     {15, 100, 600}};
    for (size_t s = 0; s < sizeof shp / sizeof shp[0]; s++)
        for (int mode = 1; mode < 4; mode++) {
            int64_t M = shp[s][0], N = shp[s][1], K = shp[s][2];
            float *A = rand_buf((size_t)(M * K)), *B = rand_buf((size_t)(K * N));
            float *As = malloc(sizeof(float) * (size_t)(M * (K + 3))), *Bs = malloc(sizeof(float) * (size_t)(K * (N + 5)));
            const float **ar = malloc(sizeof *ar * (size_t)M), **br = malloc(sizeof *br * (size_t)K);
            for (int64_t i = 0; i < M; i++) {
                ar[i] = As + (M - 1 - i) * (K + 3);
                memcpy((float *)ar[i], A + i * K, sizeof(float) * (size_t)K);
            }
            for (int64_t k = 0; k < K; k++) {
                br[k] = Bs + (K - 1 - k) * (N + 5);
                memcpy((float *)br[k], B + k * N, sizeof(float) * (size_t)N);
            }
            size_t cb = sizeof(float) * (size_t)(M * N);
            float *C0 = rand_buf((size_t)(M * N)), *C1 = malloc(cb), *C2 = malloc(cb), *C3 = malloc(cb);
            memcpy(C1, C0, cb), memcpy(C2, C0, cb), memcpy(C3, C0, cb);
            mge_sgemm(NULL, 0, 0, M, N, K, 0.75f, A, K, B, N, 0.5f, C1, N);
            mge_sgemm_ptr(NULL, M, N, K, 0.75f, mode & 1 ? ar : NULL, A, K, mode & 2 ? br : NULL, B, N, 0.5f, C2, N);
            mge_sgemm_ptr(&c2, M, N, K, 0.75f, mode & 1 ? ar : NULL, A, K, mode & 2 ? br : NULL, B, N, 0.5f, C3, N);
            CHECK_MSG(memcmp(C1, C2, cb) == 0 && memcmp(C1, C3, cb) == 0, "ptr %lldx%lldx%lld mode %d", (long long)M,
                      (long long)N, (long long)K, mode);
            free(A), free(B), free(As), free(Bs), free(ar), free(br), free(C0), free(C1), free(C2), free(C3);
        }
    mge_pool_free(p2);
}

/* A block of C computed alone (so in edge tiles of other sizes, which run
 * narrower kernel variants) equals the same block of the whole product,
 * bit for bit, for every block height 1..15 and widths across 16 and 32. */
static void test_tiles(void)
{
    const int64_t M = 31, N = 75, K = 530;   /* K: two K blocks */
    float *A = rand_buf((size_t)(M * K)), *B = rand_buf((size_t)(K * N));
    float *C = malloc(sizeof(float) * (size_t)(M * N)), *D = malloc(sizeof(float) * (size_t)(M * N));
    mge_sgemm(NULL, 0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, C, N);
    static const int64_t ws[] = {1, 5, 16, 17, 31, 32, 33, 50};
    int bad = 0;
    for (int64_t m = 1; m <= 15; m++)
        for (size_t w = 0; w < sizeof ws / sizeof ws[0]; w++) {
            int64_t i0 = (m * 7) % (M - m + 1), j0 = (int64_t)(w * 3) % (N - ws[w] + 1);
            mge_sgemm(NULL, 0, 0, m, ws[w], K, 1.0f, A + i0 * K, K, B + j0, N, 0.0f, D, ws[w]);
            for (int64_t i = 0; i < m; i++)
                bad += memcmp(D + i * ws[w], C + (i0 + i) * N + j0, sizeof(float) * (size_t)ws[w]) != 0;
        }
    CHECK_MSG(bad == 0, "%d block rows differ from the whole product", bad);
    free(A), free(B), free(C), free(D);
}

/* The call sites' choice: never for a GEMV or a small product, and for a
 * large one exactly when the AVX-512 kernels run and MGE_GEMM is not
 * "openblas" (main runs a child with it set). */
static void test_pick(void)
{
    const char *e = getenv("MGE_GEMM");
    int want = mge_cpu_isa() >= MGE_ISA_AVX512 && !(e && strcmp(e, "openblas") == 0);
    CHECK(mge_sgemm_pick(512, 512, 512) == want);
    CHECK(mge_sgemm_pick(64, 12544, 147) == want);
    CHECK(!mge_sgemm_pick(1, 1000, 512));
    CHECK(!mge_sgemm_pick(64, 196, 64));
    CHECK(!mge_sgemm_pick(512, 49, 2304));
}

static int child(void)
{
    static const char *names[] = {"baseline", "avx2", "avx512"};
    int l = mge_cpu_isa();
    printf("test_sgemm: MGE_CPU_ISA=%s -> %s kernels\n", getenv("MGE_CPU_ISA") ? getenv("MGE_CPU_ISA") : "(unset)",
           l >= 0 && l <= 2 ? names[l] : "?");
    RUN(test_degenerate);
    RUN(test_shapes);
    RUN(test_k);
    RUN(test_alpha_beta);
    RUN(test_threads);
    RUN(test_tiles);
    RUN(test_ptr);
    RUN(test_pick);
    return unit_done();
}

/* ---------------------------------------------------------------- benchmark */

/* --cpu: time by this thread's CPU clock, so that time the scheduler gives
 * other jobs on a shared machine does not count (1-thread columns only) */
static int bench_cpu;

static double now(void)
{
    struct timespec ts;
    clock_gettime(bench_cpu ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
/* 24 independent FMA chains (more than 2 units x 4 cycles of latency). */
__attribute__((target("avx512f,fma"))) static float peak_loop512(int64_t iters, float x)
{
    __m512 m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-7f);
#define P_D(i) __m512 r##i = _mm512_set1_ps(x + (float)i);
#define P_S(i) r##i = _mm512_fmadd_ps(r##i, m, a);
#define P_24(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15) X(16) \
    X(17) X(18) X(19) X(20) X(21) X(22) X(23)
    P_24(P_D)
    for (int64_t i = 0; i < iters; i++) {
        P_24(P_S)
        __asm__ volatile("" ::: "memory");
    }
    __m512 s = _mm512_setzero_ps();
#define P_A(i) s = _mm512_add_ps(s, r##i);
    P_24(P_A)
    return _mm512_reduce_add_ps(s);
}
/* one dependent chain: FMA latency (4 cycles on Intel since Skylake) */
__attribute__((target("avx512f,fma"))) static float lat_loop(int64_t iters, float x)
{
    __m512 m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-7f), r = _mm512_set1_ps(x);
    for (int64_t i = 0; i < iters; i++) {
        r = _mm512_fmadd_ps(r, m, a);
        __asm__ volatile("" : "+v"(r));
    }
    return _mm512_reduce_add_ps(r);
}
#endif

static double measure_peak(double *ghz)
{
    *ghz = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f"))
        return 0;
    volatile float sink = 0;
    double best = 0, bl = 1e9;
    for (int r = 0; r < 300; r++) {   /* best of many short runs: the machine may be shared */
        int64_t it = 200000;
        double t0 = now();
        sink += peak_loop512(it, 1.0f);
        double t = now() - t0;
        double f = (double)it * 24 * 16 * 2 / t;
        best = f > best ? f : best;
        t0 = now();
        sink += lat_loop(it, 1.0f);
        t = now() - t0;
        bl = t / (double)it < bl ? t / (double)it : bl;
    }
    *ghz = 4.0 / bl / 1e9;
    (void)sink;
    return best;
#else
    return 0;
#endif
}

typedef struct shape {
    int64_t m, n, k;
} shape;

typedef void (*gemm_fn)(const mge_kctx *ctx, shape s, const float *A, const float *B, float *C);

static void run_mge(const mge_kctx *ctx, shape s, const float *A, const float *B, float *C)
{
    mge_sgemm(ctx, 0, 0, s.m, s.n, s.k, 1.0f, A, s.k, B, s.n, 0.0f, C, s.n);
}

static void run_blas(const mge_kctx *ctx, shape s, const float *A, const float *B, float *C)
{
    (void)ctx;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)s.m, (blasint)s.n, (blasint)s.k, 1.0f, A,
                (blasint)s.k, B, (blasint)s.n, 0.0f, C, (blasint)s.n);
}

/* best GFLOP/s over at least 5 runs and 1 s in all (the host this was
 * tuned on takes whole milliseconds from a run now and then: the best of
 * a few more runs is the kernel's, the rest is the host's) */
static double gflops(gemm_fn fn, const mge_kctx *ctx, shape s, const float *A, const float *B, float *C)
{
    double fl = 2.0 * (double)s.m * (double)s.n * (double)s.k, best = 0, total = 0;
    fn(ctx, s, A, B, C);
    for (int r = 0; r < 2000 && (total < 1.0 || r < 5); r++) {
        double t0 = now();
        fn(ctx, s, A, B, C);
        double t = now() - t0;
        total += t;
        best = fl / t > best ? fl / t : best;
    }
    return best / 1e9;
}

static int bench(int argc, char **argv)
{
    if (!getenv("OPENBLAS_CORETYPE")) {   /* as the tools do (cmd/cli.c) */
        const char *core = mge_blas_better_coretype();
        if (core && setenv("OPENBLAS_CORETYPE", core, 1) == 0)
            execv("/proc/self/exe", argv);
    }
    openblas_set_num_threads(1);
    for (int i = 2; i < argc; i++)
        bench_cpu |= strcmp(argv[i], "--cpu") == 0;
    double ghz, peak = measure_peak(&ghz) / 1e9;
    static const char *names[] = {"baseline", "avx2", "avx512"};
    int l = mge_cpu_isa();
    printf("peak (1 core): %.1f GFLOP/s measured by 24 independent 16-lane FMA chains; FMA latency loop says "
           "%.2f GHz (x 2 units x 16 lanes x 2 = %.1f)\n",
           peak, ghz, ghz * 64);
    printf("mge kernels: %s; OpenBLAS core: %s (OPENBLAS_CORETYPE=%s)\n", l >= 0 && l <= 2 ? names[l] : "?",
           openblas_get_corename(), getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "");
    /* N (N x N x N) or MxNxK, row-major, no transposes */
    static const shape def[] = {{64, 64, 64}, {128, 128, 128}, {256, 256, 256}, {512, 512, 512},
                                {1024, 1024, 1024}, {2048, 2048, 2048}};
    shape list[32];
    int ns = 0;
    for (int i = 2; i < argc && ns < 32; i++) {
        if (strcmp(argv[i], "--cpu") == 0)
            continue;
        long long m = 0, n = 0, k = 0;
        int got = sscanf(argv[i], "%lldx%lldx%lld", &m, &n, &k);
        list[ns++] = got == 3 ? (shape){m, n, k} : (shape){m, m, m};
    }
    if (!ns)
        for (ns = 0; ns < 6; ns++)
            list[ns] = def[ns];
    mge_pool *p2 = mge_pool_create(2);
    mge_kctx c2 = {.pool = p2, .threads = 2};
    if (bench_cpu)
        printf("%16s | %9s %9s %6s %6s   (GFLOP/s by thread CPU time, %% of peak)\n", "MxNxK", "mge-1t", "blas-1t",
               "%mge", "%blas");
    else
        printf("%16s | %9s %9s %6s %6s | %9s %9s %6s %6s   (GFLOP/s, %% of 1 or 2 x peak)\n", "MxNxK", "mge-1t",
               "blas-1t", "%mge", "%blas", "mge-2t", "blas-2t", "%mge", "%blas");
    for (int i = 0; i < ns; i++) {
        shape sh = list[i];
        float *A = rand_buf((size_t)(sh.m * sh.k)), *B = rand_buf((size_t)(sh.k * sh.n));
        float *C = rand_buf((size_t)(sh.m * sh.n));
        /* OpenBLAS's own threads run only for its 2-thread number: idle,
         * they spin and yield and would slow whatever runs next */
        double m1 = gflops(run_mge, NULL, sh, A, B, C), b1 = gflops(run_blas, NULL, sh, A, B, C);
        double pk = peak > 0 ? peak : 1e300;
        char name[64];
        snprintf(name, sizeof name, "%lldx%lldx%lld", (long long)sh.m, (long long)sh.n, (long long)sh.k);
        if (bench_cpu) {
            printf("%16s | %9.1f %9.1f %5.1f%% %5.1f%%\n", name, m1, b1, 100 * m1 / pk, 100 * b1 / pk);
            fflush(stdout);
            free(A), free(B), free(C);
            continue;
        }
        double m2 = gflops(run_mge, &c2, sh, A, B, C);
        openblas_set_num_threads(2);
        double b2 = gflops(run_blas, NULL, sh, A, B, C);
        openblas_set_num_threads(1);
        printf("%16s | %9.1f %9.1f %5.1f%% %5.1f%% | %9.1f %9.1f %5.1f%% %5.1f%%\n", name, m1, b1, 100 * m1 / pk,
               100 * b1 / pk, m2, b2, 50 * m2 / pk, 50 * b2 / pk);
        fflush(stdout);
        free(A), free(B), free(C);
    }
    openblas_set_num_threads(1);
    mge_pool_free(p2);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--bench") == 0)
        return bench(argc, argv);
    if (getenv("MGE_SGEMM_CHILD"))
        return child();
    static const char *levels[] = {"baseline", "avx2", NULL, NULL};
    int fail = 0;
    for (int i = 0; i < 4; i++) {   /* the last: the CPU's own level with MGE_GEMM=openblas */
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            setenv("MGE_SGEMM_CHILD", "1", 1);
            if (levels[i])
                setenv("MGE_CPU_ISA", levels[i], 1);
            else
                unsetenv("MGE_CPU_ISA");
            if (i == 3)
                setenv("MGE_GEMM", "openblas", 1);
            else
                unsetenv("MGE_GEMM");
            execv("/proc/self/exe", argv);
            _exit(127);
        }
        int st = 0;
        if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "test_sgemm: the run with MGE_CPU_ISA=%s failed\n", levels[i] ? levels[i] : "(unset)");
            fail = 1;
        }
    }
    printf("test_sgemm: %s\n", fail ? "FAILED" : "all levels passed");
    return fail;
}
