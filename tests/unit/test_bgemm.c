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
#include "unit_graph.h"

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


/* ---------------------------------------------------------------- nodes */

/* Node-level: the cpu kernel of a precision=bf16 node against the ref
 * kernel in f32, inputs uniform in [-1, 1): bf16 rounding costs each
 * product about 2^-8 relative, so |cpu - ref| <= 2^-7 sqrt(K) (K the
 * reduction length) plus f32's share; and somewhere the difference is
 * more than f32 would give (the bf16 path ran). Every run also on 2
 * threads, bit-identical. When the kernel has a prepare, its state (x
 * NULL, as an inference executor passes it) gives the same bits. */
static int run_cpu(const mge_node *n, mge_tensor **in, mge_tensor *y, mge_pool *pool, void *prepared)
{
    const mge_kernel *k = mge_backend_kernel(mge_backend_cpu(), n->op, MGE_F32);
    mge_tensor *ys[1] = {y};
    int threads = pool ? mge_pool_size(pool) : 1;
    size_t ws = k->ws ? k->ws(n, in, ys, threads) : 0;
    void *wsp = ws ? mge_aligned_alloc(ws) : NULL;
    mge_kctx ctx = {.pool = pool, .threads = threads, .ws = wsp, .ws_size = ws, .prepared = prepared,
                    .opname = mge_op_info(n->op)->name};
    mge_error err;
    mge_error_clear(&err);
    mge_status s = k->run(&ctx, n, in, ys, &err);
    CHECK_MSG(s == MGE_OK, "%s", err.msg);
    mge_aligned_free(wsp);
    return s == MGE_OK;
}

static void node_case(const char *what, int op, int nin, const int *nd, int64_t (*dims)[MGE_MAX_DIMS], int nattr,
                      const mge_attr *at, double K)
{
    mge_error err;
    mge_error_clear(&err);
    mge_graph *g = ug_one_node(op, nin, nd, dims, nattr, at, &err);
    CHECK_MSG(g, "%s: %s", what, err.msg);
    if (!g)
        return;
    const mge_node *n = &g->nodes[0];
    mge_tensor in[6], *ip[6];
    mge_rng r;
    mge_rng_seed(&r, ug_fnv(what));
    for (int i = 0; i < nin; i++) {
        CHECK_OK(mge_tensor_alloc(&in[i], MGE_F32, nd[i], dims[i], &err), err);
        ug_uniform(&in[i], &r, -1.0f, 1.0f);
        ip[i] = &in[i];
    }
    const mge_value *yv = &g->values[n->out[0]];
    mge_tensor got, got2, want;
    CHECK_OK(mge_tensor_alloc(&got, MGE_F32, yv->ndim, yv->dims, &err), err);
    CHECK_OK(mge_tensor_alloc(&got2, MGE_F32, yv->ndim, yv->dims, &err), err);
    CHECK_OK(ug_run_node(mge_backend_ref(), NULL, g, ip, &want, &err), err);
    mge_pool *p2 = mge_pool_create(2);
    if (run_cpu(n, ip, &got, NULL, NULL) && run_cpu(n, ip, &got2, p2, NULL)) {
        int64_t ne = mge_tensor_numel(&want);
        CHECK_MSG(memcmp(got.data, got2.data, sizeof(float) * (size_t)ne) == 0, "%s: 1 vs 2 threads", what);
        const float *a = got.data, *b = want.data;
        double atol = 0x1p-7 * sqrt(K) + 1e-6 * K, maxd = 0;
        int bad = 0;
        for (int64_t i = 0; i < ne && !bad; i++) {
            double d = fabs((double)a[i] - b[i]);
            maxd = d > maxd ? d : maxd;
            if (!(d <= atol)) {
                fprintf(stderr, "%s: element %ld: cpu %.9g, ref %.9g, atol %g\n", what, (long)i, a[i], b[i], atol);
                bad = 1;
            }
        }
        CHECK(!bad);
        /* f32 would be within about K * 2^-24 here; bf16 is far from it */
        CHECK_MSG(maxd > 64 * K * 0x1p-24, "%s: max diff %g: the bf16 path did not run?", what, maxd);
        const mge_kernel *k = mge_backend_kernel(mge_backend_cpu(), n->op, MGE_F32);
        if (k->prepare) {
            mge_tensor *pin[6];
            for (int i = 0; i < nin; i++)
                pin[i] = i == 0 ? NULL : ip[i];
            void *state = NULL;
            CHECK_OK(k->prepare(n, pin, &state, &err), err);
            CHECK_MSG(state != NULL, "%s: prepare made nothing", what);
            memset(got2.data, 0, sizeof(float) * (size_t)ne);
            if (run_cpu(n, ip, &got2, p2, state))
                CHECK_MSG(memcmp(got.data, got2.data, sizeof(float) * (size_t)ne) == 0, "%s: prepared differs", what);
            if (k->release)
                k->release(state);
        }
    }
    mge_pool_free(p2);
    mge_tensor_free(&got), mge_tensor_free(&got2), mge_tensor_free(&want);
    for (int i = 0; i < nin; i++)
        mge_tensor_free(&in[i]);
    mge_graph_free(g);
}

static void test_linear_nodes(void)
{
    static const int64_t sh[][3] = {{1, 17, 33}, {5, 64, 100}, {37, 130, 257}, {300, 70, 64}};   /* M, O, K */
    for (size_t s = 0; s < 4; s++) {
        int64_t M = sh[s][0], O = sh[s][1], K = sh[s][2];
        int nd[4] = {2, 2, 1, 2};
        int64_t dims[4][MGE_MAX_DIMS] = {{M, K}, {O, K}, {O}, {M, O}};
        mge_attr at[5] = {A(MGE_KEY_out, O), A(MGE_KEY_precision, 1)};
        char what[64];
        snprintf(what, sizeof what, "linear %ldx%ldx%ld", (long)M, (long)O, (long)K);
        node_case(what, MGE_OP_LINEAR, 3, nd, dims, 2, at, (double)K);
        mge_attr fa[5] = {A(MGE_KEY_out, O), A(MGE_KEY_precision, 1), A(MGE_KEY_residual, 1), A(MGE_KEY_act, MGE_OP_RELU)};
        snprintf(what, sizeof what, "fused_linear res relu %ld", (long)s);
        node_case(what, MGE_OP_FUSED_LINEAR, 4, nd, dims, 4, fa, (double)K);
        mge_attr fb[5] = {A(MGE_KEY_out, O), A(MGE_KEY_precision, 1), A(MGE_KEY_bias, 0), A(MGE_KEY_act, MGE_OP_SILU)};
        int64_t d2[2][MGE_MAX_DIMS] = {{M, K}, {O, K}};
        snprintf(what, sizeof what, "fused_linear nobias silu %ld", (long)s);
        node_case(what, MGE_OP_FUSED_LINEAR, 2, nd, d2, 4, fb, (double)K);
    }
}

static void test_matmul_nodes(void)
{
    for (int t = 0; t < 4; t++) {
        int ta = t & 1, tb = t >> 1;
        int64_t M = 19, N = 45, K = 71;
        int nd[2] = {3, t == 3 ? 2 : 3};
        int64_t dims[2][MGE_MAX_DIMS] = {{3, ta ? K : M, ta ? M : K}, {3, tb ? N : K, tb ? K : N}};
        if (t == 3)
            dims[1][0] = tb ? N : K, dims[1][1] = tb ? K : N;   /* b broadcast over the batch */
        mge_attr at[3] = {A(MGE_KEY_transpose_a, ta), A(MGE_KEY_transpose_b, tb), A(MGE_KEY_precision, 1)};
        char what[64];
        snprintf(what, sizeof what, "matmul ta %d tb %d", ta, tb);
        node_case(what, MGE_OP_MATMUL, 2, nd, dims, 3, at, (double)K);
    }
}

static void test_conv_nodes(void)
{
    /* N, C, H, W, O, k, stride, pad, groups */
    static const int64_t cs[][9] = {{2, 8, 11, 9, 12, 3, 1, 1, 1}, {1, 6, 14, 14, 10, 3, 2, 0, 2},
                                    {2, 16, 7, 7, 24, 1, 1, 0, 1}, {1, 3, 20, 20, 33, 5, 1, 2, 1}};
    for (size_t s = 0; s < 4; s++) {
        const int64_t *c = cs[s];
        int64_t N = c[0], C = c[1], H = c[2], W = c[3], O = c[4], k = c[5], st = c[6], pd = c[7], G = c[8];
        int64_t OH = (H + 2 * pd - k) / st + 1, OW = (W + 2 * pd - k) / st + 1;
        int64_t kk[2] = {k, k}, ss[2] = {st, st}, pp[2] = {pd, pd};
        double K = (double)(C / G * k * k);
        mge_attr at[8] = {A(MGE_KEY_out, O), A_ints(MGE_KEY_kernel, 2, kk), A_ints(MGE_KEY_stride, 2, ss),
                          A_ints(MGE_KEY_pad, 2, pp), A(MGE_KEY_groups, G), A(MGE_KEY_precision, 1),
                          A(MGE_KEY_residual, 1), A(MGE_KEY_act, MGE_OP_RELU)};
        int nd[4] = {4, 4, 1, 4};
        int64_t dims[4][MGE_MAX_DIMS] = {{N, C, H, W}, {O, C / G, k, k}, {O}, {N, O, OH, OW}};
        char what[64];
        snprintf(what, sizeof what, "conv2d case %zu", s);
        node_case(what, MGE_OP_CONV2D, 3, nd, dims, 6, at, K);
        snprintf(what, sizeof what, "fused_conv2d case %zu", s);
        node_case(what, MGE_OP_FUSED_CONV2D, 4, nd, dims, 8, at, K);
        /* gradients: grad_input(dy, w, x) sums over O/G * k * k, grad_weight(dy, x, w) over N * OH * OW */
        mge_attr ga[6] = {A_ints(MGE_KEY_kernel, 2, kk), A_ints(MGE_KEY_stride, 2, ss), A_ints(MGE_KEY_pad, 2, pp),
                          A(MGE_KEY_groups, G), A(MGE_KEY_precision, 1)};
        int gnd[3] = {4, 4, 4};
        int64_t gi[3][MGE_MAX_DIMS] = {{N, O, OH, OW}, {O, C / G, k, k}, {N, C, H, W}};
        snprintf(what, sizeof what, "conv2d_grad_input case %zu", s);
        node_case(what, MGE_OP_CONV2D_GRAD_INPUT, 3, gnd, gi, 5, ga, (double)(O / G * k * k));
        int64_t gw[3][MGE_MAX_DIMS] = {{N, O, OH, OW}, {N, C, H, W}, {O, C / G, k, k}};
        snprintf(what, sizeof what, "conv2d_grad_weight case %zu", s);
        node_case(what, MGE_OP_CONV2D_GRAD_WEIGHT, 3, gnd, gw, 5, ga, (double)(N * OH * OW));
    }
}

static void test_linear_grads(void)
{
    static const int64_t sh[][3] = {{1, 17, 33}, {37, 130, 257}, {300, 70, 64}};   /* M, O, K */
    for (size_t s = 0; s < 3; s++) {
        int64_t M = sh[s][0], O = sh[s][1], K = sh[s][2];
        mge_attr at[1] = {A(MGE_KEY_precision, 1)};
        int nd[2] = {2, 2};
        int64_t gi[2][MGE_MAX_DIMS] = {{M, O}, {O, K}}, gw[2][MGE_MAX_DIMS] = {{M, O}, {M, K}};
        char what[64];
        snprintf(what, sizeof what, "linear_grad_input %zu", s);
        node_case(what, MGE_OP_LINEAR_GRAD_INPUT, 2, nd, gi, 1, at, (double)O);
        snprintf(what, sizeof what, "linear_grad_weight %zu", s);
        node_case(what, MGE_OP_LINEAR_GRAD_WEIGHT, 2, nd, gw, 1, at, (double)M);
    }
}


/* Through the executor: a bf16 linear with const weights gives the same
 * bits with preprocess (its weight packed once by the kernel's prepare)
 * as without, over several runs and batches, on 2 threads. */
static void exec_run(const mge_graph *g, int pre, float *out, int64_t K, int64_t O)
{
    mge_error err;
    mge_error_clear(&err);
    mge_exec_opts o = {.threads = 2, .preprocess = pre};
    mge_exec *e = NULL;
    CHECK_OK(mge_exec_create(g, &o, &e, &err), err);
    if (!e)
        return;
    static const int64_t bs[] = {3, 40, 3};
    for (int k = 0; k < 3; k++) {
        int64_t dims[2] = {bs[k], K};
        mge_tensor x;
        CHECK_OK(mge_tensor_alloc(&x, MGE_F32, 2, dims, &err), err);
        for (int64_t i = 0; i < bs[k] * K; i++)
            ((float *)x.data)[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
        const mge_tensor *ins[1] = {&x};
        CHECK_OK(mge_exec_run(e, ins, &err), err);
        const mge_tensor *y = mge_exec_result(e, 0);
        if (y && y->data)
            memcpy(out + (k ? (k == 1 ? 3 : 43) : 0) * O, y->data, sizeof(float) * (size_t)(bs[k] * O));
        mge_tensor_free(&x);
    }
    mge_exec_free(e);
}

static void test_exec_prepared(void)
{
    enum { K = 45, O = 21 };
    size_t cap = 64 * K * O + 4096, len = 0;
    char *src = malloc(cap);
    len += (size_t)snprintf(src + len, cap - len, "input x : f32[N,%d]\nconst w : f32[%d,%d] = [", K, O, K);
    for (int i = 0; i < O * K; i++)
        len += (size_t)snprintf(src + len, cap - len, "%s%.6f", i ? ", " : "", (double)frand());
    len += (size_t)snprintf(src + len, cap - len,
                            "]\nconst b : f32[%d] = [", O);
    for (int i = 0; i < O; i++)
        len += (size_t)snprintf(src + len, cap - len, "%s%.6f", i ? ", " : "", (double)frand());
    snprintf(src + len, cap - len, "]\ny = fused_linear(x, w, b, out=%d, act=relu, precision=bf16)\noutput y\n", O);
    mge_graph *g = ug_parse(src);
    free(src);
    if (!g)
        return;
    float a[46 * O], b[46 * O];
    memset(a, 0, sizeof a), memset(b, 0xff, sizeof b);
    exec_run(g, 0, a, K, O);
    exec_run(g, 1, b, K, O);
    CHECK(memcmp(a, b, sizeof a) == 0);
    mge_graph_free(g);
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
    if (mge_cpu_bf16() != MGE_BF16_NONE) {   /* else the nodes run their f32 kernels */
        RUN(test_linear_nodes);
        RUN(test_matmul_nodes);
        RUN(test_conv_nodes);
        RUN(test_linear_grads);
        RUN(test_exec_prepared);
    }
    int rc = unit_done();
    /* the nodes again on AVX512-BF16 (the bf16 level is picked once per process) */
    if (!getenv("MGE_CPU_ISA") && mge_cpu_bf16() == MGE_BF16_AMX && unit_rerun_isa(argv, "test_bgemm", "avx512-bf16"))
        rc = 1;
    return rc;
}
