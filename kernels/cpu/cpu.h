/* cpu.h — what the fast CPU kernel files share: run-time ISA dispatch,
 * range-splitting over the pool, and the fallback to the ref kernels. */
#ifndef MGE_CPU_H
#define MGE_CPU_H

#include "internal.h"

#include <stdatomic.h>

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* Hot loops are compiled twice: once for AVX2+FMA and once for the baseline
 * ISA; cpu_isa_avx2() picks at run time, so the binary runs on older CPUs
 * and no -march flag is needed. GCC at -O2 only vectorizes loops without a
 * scalar epilogue, and not loops with selects under -ftrapping-math, so
 * the hot functions ask for -O3's vectorizer without FP traps (we never
 * read FP exception flags), and allow FMA contraction. */
#if defined(__x86_64__) || defined(__i386__)
#define CPU_X86 1
#if defined(__clang__)
#define CPU_AVX2 __attribute__((target("avx2,fma")))
#define CPU_BASE
#else
#define CPU_OPTS "O3", "tree-vectorize", "no-trapping-math", "no-math-errno", "fp-contract=fast"
#define CPU_AVX2 __attribute__((target("avx2,fma"), optimize(CPU_OPTS)))
#define CPU_BASE __attribute__((optimize(CPU_OPTS)))
#endif
#else
#define CPU_X86 0
#define CPU_AVX2
#define CPU_BASE
#endif

/* GCC (12) emits no vzeroupper in target("avx2") / target("avx512f")
 * functions, neither before calls nor at returns (it does with -mavx2 on
 * the command line), so after them the upper halves of the vector
 * registers stay dirty, and every legacy-SSE instruction after that (the
 * scalar float code of any function compiled for the baseline) waits on
 * them: measured about 200 ns per call of a 32-add SSE helper from AVX-512
 * code on this Xeon, against 20 ns after a vzeroupper; a helper called
 * per plane made LeNet's batchnorm gradient 3x slower. So the dispatchers
 * below and the AVX drivers clear them on the way back. The clobbers keep
 * the compiler from holding vector values across it. */
#if CPU_X86 && defined(__GNUC__)
#define CPU_VZEROUPPER()                                                                                        \
    __asm__ volatile("vzeroupper" ::: "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",   \
                     "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "memory")
#else
#define CPU_VZEROUPPER() ((void)0)
#endif

/* MGE_CPU_ISA=baseline forces the portable loops (tests use it); see kernels/cpu/cpu_isa.c. */
static inline int cpu_isa_avx2(void)
{
    return CPU_X86 && mge_cpu_isa() >= MGE_ISA_AVX2;
}

/* cpu_plane.c: x[H,W] into pad[Hp,Wp] with ph rows/pw columns of padv
 * before it and padv up to Hp/Wp after it; and each padded row split into
 * its even then odd columns ((Wp+1)/2 each, the odd half padded with padv
 * when Wp is odd), so column 2*k + t of a row is E[k + t/2] for even t and
 * O[k + t/2] for odd t. */
void cpu_plane_pad(const float *restrict x, int64_t H, int64_t W, int64_t ph, int64_t pw, int64_t Hp, int64_t Wp,
                   float padv, float *restrict pad);
void cpu_plane_deinterleave(const float *restrict pad, int64_t Hp, int64_t Wp, float padv, float *restrict de);

/* Defines name##_avx2 and name##_base with the same parameters and body,
 * and name() that calls the one the CPU supports. The body (a braced
 * block, last) may contain commas; the return type is void. CPU_MULTI_AS
 * takes the two variants' attributes (cpu_optim.c's keep FP contraction off). */
#define CPU_MULTI_AS(avx2, base, name, params, args, ...)  \
    static avx2 void name##_avx2 params __VA_ARGS__        \
    static base void name##_base params __VA_ARGS__        \
    static void name params                                \
    {                                                      \
        if (cpu_isa_avx2()) {                              \
            name##_avx2 args;                              \
            CPU_VZEROUPPER();                              \
        } else {                                           \
            name##_base args;                              \
        }                                                  \
    }
#define CPU_MULTI(name, params, args, ...) CPU_MULTI_AS(CPU_AVX2, CPU_BASE, name, params, args, __VA_ARGS__)

/* CPU_MULTI with an AVX-512 variant too: name##_avx512, _avx2, _base,
 * picked by mge_cpu_isa() (loops that run 16 wide: pooling, softmax). */
#if CPU_X86 && defined(__GNUC__)
#if defined(__clang__)
#define CPU_AVX512 __attribute__((target("avx512f")))
#else
#define CPU_AVX512 __attribute__((target("avx512f"), optimize(CPU_OPTS)))
#endif
#define CPU_MULTI3(name, params, args, ...)                   \
    static CPU_AVX512 void name##_avx512 params __VA_ARGS__  \
    static CPU_AVX2 void name##_avx2 params __VA_ARGS__      \
    static CPU_BASE void name##_base params __VA_ARGS__      \
    static void name params                                  \
    {                                                        \
        int isa_ = mge_cpu_isa();                            \
        if (isa_ >= MGE_ISA_AVX512) {                        \
            name##_avx512 args;                              \
            CPU_VZEROUPPER();                                \
        } else if (isa_ >= MGE_ISA_AVX2) {                   \
            name##_avx2 args;                                \
            CPU_VZEROUPPER();                                \
        } else {                                             \
            name##_base args;                                \
        }                                                    \
    }
/* CPU_SPLIT3(name, params, args): name picks name##_avx512 (a function the
 * file writes with CPU_AVX512, inside #if CPU_SPLIT_AVX512) on AVX-512 and
 * name##_v (a CPU_MULTI) otherwise: for loops whose AVX-512 form differs
 * from the AVX2 and baseline one. */
#define CPU_SPLIT_AVX512 1
#define CPU_SPLIT3(name, params, args)            \
    static void name params                       \
    {                                             \
        if (mge_cpu_isa() >= MGE_ISA_AVX512) {    \
            name##_avx512 args;                   \
            CPU_VZEROUPPER();                     \
        } else {                                  \
            name##_v args;                        \
        }                                         \
    }
#else
#define CPU_MULTI3 CPU_MULTI
#define CPU_SPLIT_AVX512 0
#define CPU_SPLIT3(name, params, args) \
    static void name params            \
    {                                  \
        name##_v args;                 \
    }
#endif

/* expf for vectorized loops: exp(x) = 2^n * e^r with |r| <= ln2/2 and a
 * degree-6 polynomial for e^r (relative error about 2e-7). Branch-free so
 * the compiler vectorizes the loop it is inlined into; NaN propagates.
 * Compiled with the hot loops' options, or GCC lowers its selects to
 * branches before inlining. */
static inline CPU_BASE float cpu_expf(float x)
{
    /* clamp so that n is in [-125, 128]; NaN becomes -86.6 here and is
     * put back at the end */
    float c = x > -86.6f ? x : -86.6f;
    c = c < 88.7228394f ? c : 88.7228394f;
    float t = c * 1.44269504088896341f;
    float n = (t + 12582912.0f) - 12582912.0f;   /* round to nearest (1.5 * 2^23) */
    float r = c - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720))))));
    /* 2^n as 2^(n-1) * 2, so n = 128 (x near ln FLT_MAX) needs no inf exponent */
    uint32_t bits = (uint32_t)((int32_t)n + 126) << 23;
    float s;
    memcpy(&s, &bits, sizeof s);
    float e = p * s * 2.0f;
    e = x > 88.7228394f ? __builtin_inff() : e;
    e = x < -103.97f ? 0.0f : e;   /* below the smallest denormal */
    return x != x ? x : e;
}

/* The threads of ctx's pool (1 without a pool or a context). */
static inline int cpu_threads(const mge_kctx *ctx)
{
    return ctx && ctx->pool ? mge_pool_size(ctx->pool) : 1;
}

/* Range over the pool: fn(arg, begin, end, thread) on disjoint chunks of
 * [0, n), at least `grain` items each (the last may be shorter). Small
 * ranges run on the caller alone. */
typedef void (*cpu_range_fn)(void *arg, int64_t begin, int64_t end, int thread);

typedef struct cpu_range_job {
    cpu_range_fn fn;
    void *arg;
    int64_t n, chunk;
} cpu_range_job;

static void cpu_range_task(void *a, int64_t task, int thread)
{
    const cpu_range_job *j = a;
    int64_t b = task * j->chunk, e = b + j->chunk;
    if (e > j->n)
        e = j->n;
    j->fn(j->arg, b, e, thread);
}

/* The pool's thread count for a range of n items in chunks of at least
 * *grain (raised to 1), or 1 when the range should run on the caller
 * alone (which it then does: fn(arg, 0, n, 0)). */
static inline int cpu_range_threads(const mge_kctx *ctx, int64_t n, int64_t *grain, int max, cpu_range_fn fn,
                                    void *arg)
{
    if (n <= 0)
        return 1;
    int threads = cpu_threads(ctx);
    if (*grain < 1)
        *grain = 1;
    if (threads <= 1 || threads > max || n < 2 * *grain) {
        fn(arg, 0, n, 0);
        return 1;
    }
    return threads;
}

static inline void cpu_parallel(const mge_kctx *ctx, int64_t n, int64_t grain, cpu_range_fn fn, void *arg)
{
    int threads = cpu_range_threads(ctx, n, &grain, INT_MAX, fn, arg);
    if (threads <= 1)
        return;
    /* A few tasks per thread balance uneven work without much overhead;
     * a count that the threads share evenly, where one exists: 3 equal
     * chunks on 2 threads take as long as 4, and 2 would do. */
    int64_t ntasks = (int64_t)threads * 4;
    if (ntasks > n / grain)
        ntasks = n / grain;
    if (ntasks < threads)
        ntasks = threads;
    int64_t chunk = (n + ntasks - 1) / ntasks;
    for (int64_t t = ntasks; t >= threads; t--) {
        int64_t c = (n + t - 1) / t;
        if (((n + c - 1) / c) % threads == 0) {
            chunk = c;
            break;
        }
    }
    cpu_range_job j = {fn, arg, n, chunk};
    mge_pool_run(ctx->pool, (n + chunk - 1) / chunk, cpu_range_task, &j);
}

/* Range over the pool with affinity: thread t first takes chunks of its
 * own share [t*n/T, (t+1)*n/T) in order, then helps the others with
 * theirs. Kernels that split every layer by output rows this way leave
 * each thread mostly reading rows it wrote itself in the layer before,
 * from its own L2, where dynamic claiming interleaves rows between the
 * threads and half the reads cross cores. */
#define CPU_AFF_MAX 256
typedef struct cpu_aff_job {
    cpu_range_fn fn;
    void *arg;
    int64_t n, chunk;
    int threads;
    _Atomic int64_t next[CPU_AFF_MAX];
} cpu_aff_job;

static void cpu_aff_task(void *a, int64_t task, int thread)
{
    (void)task;
    cpu_aff_job *j = a;
    for (int k = 0; k < j->threads; k++) {
        int t = (thread + k) % j->threads;
        int64_t end = (t + 1) * j->n / j->threads;
        for (;;) {
            int64_t b = atomic_fetch_add_explicit(&j->next[t], j->chunk, memory_order_relaxed);
            if (b >= end)
                break;
            j->fn(j->arg, b, b + j->chunk < end ? b + j->chunk : end, thread);
        }
    }
}

static inline void cpu_parallel_aff(const mge_kctx *ctx, int64_t n, int64_t grain, cpu_range_fn fn, void *arg)
{
    int threads = cpu_range_threads(ctx, n, &grain, CPU_AFF_MAX, fn, arg);
    if (threads <= 1)
        return;
    cpu_aff_job j;
    j.fn = fn, j.arg = arg, j.n = n, j.threads = threads;
    j.chunk = n / ((int64_t)threads * 4);
    if (j.chunk < grain)
        j.chunk = grain;
    for (int t = 0; t < threads; t++)
        atomic_init(&j.next[t], t * n / threads);
    mge_pool_run(ctx->pool, threads, cpu_aff_task, &j);
}

/* Output indices o in [0, n) whose input index o*s - p + off lies in
 * [0, len): the columns (or rows) of a conv/pool tap that need no padding. */
static inline void cpu_valid_range(int64_t n, int64_t len, int64_t s, int64_t p, int64_t off, int64_t *lo,
                                   int64_t *hi)
{
    int64_t a = p - off;   /* need o*s >= a */
    int64_t l = a <= 0 ? 0 : (a + s - 1) / s;
    int64_t b = len - 1 + p - off;   /* need o*s <= b */
    int64_t h = b < 0 ? 0 : b / s + 1;
    if (h > n)
        h = n;
    if (l > h)
        l = h;
    *lo = l, *hi = h;
}

/* Every size and leading dimension handed to BLAS fits its int. */
static inline int cpu_blas_fits(int64_t a, int64_t b, int64_t c)
{
    return a >= 0 && b >= 0 && c >= 0 && a <= INT_MAX && b <= INT_MAX && c <= INT_MAX;
}

/* conv2d geometry (x [N,C,H,W], w [O,Cg,kh,kw], y or dy [N,O,OH,OW]), for
 * the forward (cpu_gemm.c) and the gradients (cpu_grad_conv.c). */
typedef struct cpu_conv {
    int64_t N, C, H, W, O, OH, OW, G, Cg, Og;
    int64_t P, ksz, K;   /* OH*OW, kh*kw, Cg*kh*kw */
    int64_t kh, kw, sh, sw, ph, pw, dh, dw;
} cpu_conv;

static inline void cpu_conv_shape(const mge_node *n, const mge_tensor *x, const mge_tensor *w, const mge_tensor *y,
                                  cpu_conv *c)
{
    c->N = x->dims[0], c->C = x->dims[1], c->H = x->dims[2], c->W = x->dims[3];
    c->O = y->dims[1], c->OH = y->dims[2], c->OW = y->dims[3];
    c->G = mge_node_int(n, MGE_KEY_groups, 1);
    c->Cg = c->C / c->G, c->Og = c->O / c->G;
    c->kh = w->dims[2], c->kw = w->dims[3];
    c->sh = mge_node_ints(n, MGE_KEY_stride, 0, 1), c->sw = mge_node_ints(n, MGE_KEY_stride, 1, 1);
    c->ph = mge_node_ints(n, MGE_KEY_pad, 0, 0), c->pw = mge_node_ints(n, MGE_KEY_pad, 1, 0);
    c->dh = mge_node_ints(n, MGE_KEY_dilation, 0, 1), c->dw = mge_node_ints(n, MGE_KEY_dilation, 1, 1);
    c->P = c->OH * c->OW, c->ksz = c->kh * c->kw, c->K = c->Cg * c->ksz;
}

/* 1x1, stride 1, no pad: the input is its own im2col matrix. */
static inline int cpu_conv_1x1(const cpu_conv *c)
{
    return c->kh == 1 && c->kw == 1 && c->sh == 1 && c->sw == 1 && c->ph == 0 && c->pw == 0;
}

/* cpu_transpose.c: dst[j * ldd + i] = src[i * lds + j] for i < rows, j < cols. */
void cpu_transpose(const float *src, int64_t rows, int64_t cols, int64_t lds, float *dst, int64_t ldd);

/* cpu_attn_small.c: one head's products when its keys fit one tile (cpu_attn.c).
 * scores: C[r][j] = alpha sum_e X[r][e] YT[e][j], j < ncol (a multiple of 16);
 * pv: C[r][e] (+)= sum_j P[r][j] Y[j][e]; ptx: C[j][e] += sum_r P[r][j] X[r][e]
 * (Y, X and C W wide, W a multiple of 16). */
void cpu_attn_scores(const float *X, int64_t ldx, int64_t rows, int64_t E, const float *YT, int64_t ldy,
                     int64_t ncol, float alpha, float *C, int64_t ldc);
void cpu_attn_pv(const float *P, int64_t ldp, int64_t rows, int64_t kn, const float *Y, int64_t W, float *C,
                 int accumulate);
void cpu_attn_ptx(const float *P, int64_t ldp, int64_t rows, int64_t kn, const float *X, int64_t W, float *C);

/* cpu_gemm.c: rows [r0, r1) and columns (output pixels) [p0, p1) of the
 * im2col matrix of one image and group (x: its first channel), row r at
 * col + (r - r0) * (p1 - p0); row r is channel r / ksz at tap r % ksz. */
void cpu_im2col(const cpu_conv *c, const float *x, float *col, int64_t p0, int64_t p1, int64_t r0, int64_t r1);

/* pool2d geometry (x [N,C,H,W], y or dy [N,C,OH,OW]); dilation only when
 * dil (maxpool). */
typedef struct cpu_pool_geom {
    int64_t H, W, OH, OW, kh, kw, sh, sw, ph, pw, dh, dw;
    int64_t Hp, Wp;   /* padded plane: covers the input and every window */
    int incl;
} cpu_pool_geom;

static inline void cpu_pool_geometry(const mge_node *n, const mge_tensor *x, const mge_tensor *y, int dil,
                                     cpu_pool_geom *g)
{
    g->H = x->dims[2], g->W = x->dims[3], g->OH = y->dims[2], g->OW = y->dims[3];
    g->kh = mge_node_ints(n, MGE_KEY_kernel, 0, 1), g->kw = mge_node_ints(n, MGE_KEY_kernel, 1, 1);
    g->sh = mge_node_ints(n, MGE_KEY_stride, 0, g->kh), g->sw = mge_node_ints(n, MGE_KEY_stride, 1, g->kw);
    g->ph = mge_node_ints(n, MGE_KEY_pad, 0, 0), g->pw = mge_node_ints(n, MGE_KEY_pad, 1, 0);
    g->dh = dil ? mge_node_ints(n, MGE_KEY_dilation, 0, 1) : 1;
    g->dw = dil ? mge_node_ints(n, MGE_KEY_dilation, 1, 1) : 1;
    g->incl = (int)mge_node_int(n, MGE_KEY_count_include_pad, 1);
    /* with ceil_mode the last window may reach past the right/bottom pad */
    int64_t hr = (g->OH - 1) * g->sh + (g->kh - 1) * g->dh + 1, wr = (g->OW - 1) * g->sw + (g->kw - 1) * g->dw + 1;
    g->Hp = g->H + g->ph > hr ? g->H + g->ph : hr;
    g->Wp = g->W + g->pw > wr ? g->W + g->pw : wr;
}

/* Runs the ref kernel for cases a fast kernel does not cover. */
static inline mge_status cpu_fallback(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                      mge_tensor *const *out, mge_error *err)
{
    const mge_kernel *k = &mge_backend_ref()->k[n->op][in[0]->dtype];
    if (!k->run)
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: no kernel for %s", mge_kctx_opname(ctx, n),
                             mge_dtype_name(in[0]->dtype));
    return k->run(ctx, n, in, out, err);
}

/* Workspace of the ref kernel, for fast kernels that may fall back to it. */
static inline size_t cpu_ref_ws(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, int threads)
{
    const mge_kernel *k = &mge_backend_ref()->k[n->op][in[0]->dtype];
    return k->ws ? k->ws(n, in, out, threads) : 0;
}

/* Elements per task below which a pass over memory is not worth splitting. */
#define CPU_GRAIN 16384

/* cpu_blocked_bf16.c: conv2d_nchwc at precision=bf16 (groups 1, blocks of
 * 16 or a plain NCHW stem, a CPU with AVX512-BF16 or AMX); _level says
 * which level a node runs at (MGE_BF16_NONE: the f32 kernel). */
mge_status mge_cpu_conv_nchwc_bf16(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                   mge_tensor *const *out, int level, mge_error *err);
int mge_cpu_conv_nchwc_bf16_level(const mge_node *n, const mge_tensor *x, const mge_tensor *w, const mge_tensor *y);
size_t mge_cpu_conv_nchwc_bf16_ws(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, int threads);
mge_status mge_cpu_conv_nchwc_bf16_prepare(const mge_node *n, mge_tensor *const *in, void **state, mge_error *err);
void mge_cpu_conv_nchwc_bf16_release(void *state);

/* cpu_sgemm.c: mge's own sgemm. C[M,N] = alpha * op(A) op(B) + beta * C,
 * row-major, lda/ldb/ldc in elements, op(X) = X^T when transX. Runs on
 * ctx's pool (ctx or its pool may be NULL: serial); bit-identical at any
 * thread count. beta = 0 never reads C. Picks its AVX-512, AVX2 or
 * portable micro-kernel by mge_cpu_isa(). */
void mge_sgemm(const mge_kctx *ctx, int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
               const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc);

/* mge_sgemm without transposes, where A and/or B may be given as row
 * pointers instead (Ar/Br non-NULL; A/B and lda/ldb are then unused):
 * row i of A is Ar[i][0..K), row k of B is Br[k][0..N). Convolutions use
 * it to read shifted rows of a padded image as B (cpu_conv_rows.c). */
void mge_sgemm_ptr(const mge_kctx *ctx, int64_t M, int64_t N, int64_t K, float alpha, const float *const *Ar,
                   const float *A, int64_t lda, const float *const *Br, const float *B, int64_t ldb, float beta,
                   float *C, int64_t ldc);

/* Whether a GEMM call site (cpu_gemm.c) should run this M x N x K product
 * on mge_sgemm rather than OpenBLAS: only with the AVX-512 kernels and on
 * the shapes where they measured faster (see cpu_sgemm.c; only products
 * without transposes were measured). MGE_GEMM=openblas in the environment
 * (read once) says never. */
int mge_sgemm_pick(int64_t M, int64_t N, int64_t K);
/* the same with the least N given (mge_sgemm_pick: 128) */
int mge_sgemm_pick_n(int64_t M, int64_t N, int64_t K, int64_t nmin);
/* Whether mge_sgemm runs its own AVX-512 kernels (not OpenBLAS, not the
 * AVX2 or portable ones): where the convolutions built on it pay off. */
int mge_sgemm_native(void);

/* cpu_bgemm.c: bf16 GEMM. C[M,N] (f32, row-major, ldc) = op(A) B + beta*C,
 * op(A) = A [M,K] (lda) or, transA, A^T with A [K,M]; A and B rounded to
 * bf16 (nearest even), products summed in f32 (AMX tdpbf16ps or
 * AVX512-BF16 vdpbf16ps by mge_cpu_bf16(); portable loops at "none").
 * B is packed first by mge_bgemm_pack (B [K,N] (ldb) or, transB, [N,K] as
 * a weight [out,in] is) into mge_bgemm_pack_size(K, N) bytes (64-byte
 * aligned dst is best); one packed format serves every level, so a
 * kernel's prepare may pack weights once. ws: mge_bgemm_ws(M, N, K,
 * threads) bytes of scratch (any alignment; the packed bf16 A). Runs on
 * ctx's pool (ctx or pool may be NULL), bit-identical at any thread count;
 * beta = 0 never reads C. mge_bgemm_at/_pack_at take the level explicitly
 * (tests and benches; a level above the CPU's is undefined). */
size_t mge_bgemm_pack_size(int64_t K, int64_t N);
void mge_bgemm_pack(int transB, int64_t K, int64_t N, const float *B, int64_t ldb, void *dst);
size_t mge_bgemm_ws(int64_t M, int64_t N, int64_t K, int threads);
void mge_bgemm(const mge_kctx *ctx, int transA, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
               const void *Bpacked, float beta, float *C, int64_t ldc, void *ws);
void mge_bgemm_at(int level, const mge_kctx *ctx, int transA, int64_t M, int64_t N, int64_t K, const float *A,
                  int64_t lda, const void *Bpacked, float beta, float *C, int64_t ldc, void *ws);
void mge_bgemm_pack_at(int level, int transB, int64_t K, int64_t N, const float *B, int64_t ldb, void *dst);
/* Whether a node asks for bf16 (precision attribute) and this CPU has a bf16 level. */
static inline int cpu_bf16_node(const mge_node *n)
{
    return mge_node_int(n, MGE_KEY_precision, 0) == 1 && mge_cpu_bf16() != MGE_BF16_NONE;
}


#endif
