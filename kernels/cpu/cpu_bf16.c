/* cpu_bf16.c — linear and fused_linear at precision=bf16 (lib/ops.def) on
 * AMX tiles and AVX512-BF16 (conv2d_nchwc's bf16 kernel is
 * cpu_blocked_bf16.c). Both operands are rounded to bf16 (nearest even),
 * the products summed in f32; bias, residual and activation are applied in
 * f32 as the f32 kernel applies them.
 *
 * The product: C[M, 16 * nob] = A[M, 32 * nsteps] B, the rows of x taken
 * 32 at a time.
 *   A: per block of 32 rows, packed per call into [nsteps][32 rows][32]
 *      bf16: one K step of a row is 64 bytes, an AMX tile row.
 *   B: the weight, packed once (the kernel's prepare; per call when there
 *      is no prepared state) into [nob][nsteps][16 pairs][16 columns][2]:
 *      each (column block, step) is one AMX B tile in the pair layout
 *      tdpbf16ps and vdpbf16ps read alike.
 *   AMX: 2 A tiles x 2 B tiles -> 4 C tiles (32 rows x 32 columns) per
 *      step, every tile 16 x 64 bytes, one tile configuration for all.
 *   AVX512-BF16: 16 rows x 16 columns in registers, a broadcast pair of A
 *      times a 32-lane row of B per vdpbf16ps.
 * The C block goes through a 2 KiB scratch to the epilogue, which writes
 * the output (so edges need no masked tile stores).
 *
 * Threads take blocks of 32 rows (each packs its own A and reads all of B),
 * or, with few rows, pairs of column blocks over all of them; every output
 * element is one sum in one order (steps, then pairs), so results do not
 * depend on --threads. AMX's tile data permission is asked once per process
 * by cpu_isa.c; each task loads the tile configuration on its own thread
 * and releases the tiles after. */
#include "cpu_act.h"

#include <stdlib.h>
#include <string.h>

#if CPU_X86 && defined(__GNUC__)
#define BF_X86 1
#include <immintrin.h>
#if defined(__clang__)
#define BF_512 __attribute__((target("avx512f,avx512bw,avx512bf16,avx512vl")))
#define BF_AMX __attribute__((target("avx512f,avx512bw,avx512bf16,avx512vl,amx-tile,amx-bf16")))
#else
#define BF_512 __attribute__((target("avx512f,avx512bw,avx512bf16,avx512vl"), optimize(CPU_OPTS)))
#define BF_AMX \
    __attribute__((target("avx512f,avx512bw,avx512bf16,avx512vl,amx-tile,amx-bf16"), optimize(CPU_OPTS)))
#endif
#else
#define BF_X86 0
#endif

enum { BF_ROWS = 32, BF_STEP = 32 * 32, BF_TILE = 16 * 32 };   /* bf16 elements */

/* ---------------------------------------------------------------- the product */

typedef struct bf_prod bf_prod;
struct bf_prod {
    int64_t nimg, mimg;      /* images, rows of each */
    int64_t nsteps, nob;
    const uint16_t *B;       /* [nob][nsteps][16][32] */
    /* a [nsteps][32][32]: rows m0.. of image n (zero past mimg) */
    void (*pack)(const bf_prod *p, int64_t n, int64_t m0, uint16_t *a);
    /* rows [m0, m0 + rows) of image n, column block ob: c [32][16] */
    void (*epi)(const bf_prod *p, int64_t n, int64_t m0, int rows, int64_t ob, const float *c);
    char *scratch;           /* per thread: A, then C */
    size_t per_thread;
    int level;
    const void *ud;
};

/* Few row blocks on big weights (resnet18's last stage: 49 pixels, 4.5 MiB
 * of bf16 weights): each task packs all of an image's blocks and takes a
 * pair of column blocks, so B is read once, not once per block; else each
 * task takes one block of rows over all of B. */
static int bf_whole(int64_t mimg, int64_t nsteps)
{
    int64_t nb = (mimg + BF_ROWS - 1) / BF_ROWS;
    return nb <= 4 && nb * nsteps * BF_STEP * 2 <= (1 << 20);
}

static size_t bf_per_thread(int64_t mimg, int64_t nsteps)
{
    int64_t nb = bf_whole(mimg, nsteps) ? (mimg + BF_ROWS - 1) / BF_ROWS : 1;
    return (size_t)(nb * nsteps) * BF_STEP * 2 + 2 * BF_ROWS * 16 * sizeof(float) + 64;
}

#if BF_X86
typedef struct bf_tilecfg {
    uint8_t palette, start;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} bf_tilecfg;

BF_AMX static void bf_block_amx(const bf_prod *p, const uint16_t *a, float *c, int64_t n, int64_t m0, int rows,
                                int64_t ob0, int64_t ob1)
{
    const int64_t S = p->nsteps;
    for (int64_t ob = ob0; ob < ob1; ob += 2) {
        const uint16_t *b0 = p->B + ob * S * BF_TILE;
        int two = ob + 1 < ob1;
        const uint16_t *b1 = two ? b0 + S * BF_TILE : b0;
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        for (int64_t s = 0; s < S; s++) {
            _tile_loadd(4, a + s * BF_STEP, 64);
            _tile_loadd(5, a + s * BF_STEP + BF_TILE, 64);
            _tile_loadd(6, b0 + s * BF_TILE, 64);
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 5, 6);
            if (two) {
                _tile_loadd(7, b1 + s * BF_TILE, 64);
                _tile_dpbf16ps(2, 4, 7);
                _tile_dpbf16ps(3, 5, 7);
            }
        }
        _tile_stored(0, c, 64);
        _tile_stored(1, c + 16 * 16, 64);
        p->epi(p, n, m0, rows, ob, c);
        if (two) {
            _tile_stored(2, c, 64);
            _tile_stored(3, c + 16 * 16, 64);
            p->epi(p, n, m0, rows, ob + 1, c);
        }
    }
}

/* 16 rows of A (pairs broadcast) times one column block of B. */
BF_512 static void bf_half_512(const uint16_t *a, const uint16_t *b, int64_t S, float *c)
{
    __m512 acc[16];
    for (int i = 0; i < 16; i++)
        acc[i] = _mm512_setzero_ps();
    for (int64_t s = 0; s < S; s++) {
        const uint16_t *as = a + s * BF_STEP, *bs = b + s * BF_TILE;
        for (int r = 0; r < 16; r++) {
            __m512bh bv = (__m512bh)_mm512_loadu_si512(bs + r * 32);
            for (int i = 0; i < 16; i++) {
                int32_t pair;
                memcpy(&pair, as + i * 32 + 2 * r, 4);
                acc[i] = _mm512_dpbf16_ps(acc[i], (__m512bh)_mm512_set1_epi32(pair), bv);
            }
        }
    }
    for (int i = 0; i < 16; i++)
        _mm512_storeu_ps(c + i * 16, acc[i]);
}

BF_512 static void bf_block_512(const bf_prod *p, const uint16_t *a, float *c, int64_t n, int64_t m0, int rows,
                                int64_t ob0, int64_t ob1)
{
    for (int64_t ob = ob0; ob < ob1; ob++) {
        const uint16_t *b = p->B + ob * p->nsteps * BF_TILE;
        bf_half_512(a, b, p->nsteps, c);
        if (rows > 16)
            bf_half_512(a + BF_TILE, b, p->nsteps, c + 16 * 16);
        p->epi(p, n, m0, rows, ob, c);
    }
}

/* a global, not a local filled in place: GCC 12 dropped the stores to a
 * local configuration as dead before ldtilecfg read it */
static const bf_tilecfg bf_cfg __attribute__((aligned(64))) = {
    1, 0, {0}, {64, 64, 64, 64, 64, 64, 64, 64}, {16, 16, 16, 16, 16, 16, 16, 16}};

BF_AMX static void bf_tiles_on(void)
{
    _tile_loadconfig(&bf_cfg);
}

BF_AMX static void bf_tiles_off(void)
{
    _tile_release();
}
#endif

static void bf_task(void *arg, int64_t begin, int64_t end, int thread)
{
#if BF_X86
    const bf_prod *p = arg;
    char *base = p->scratch + (size_t)thread * p->per_thread;
    uint16_t *a = (uint16_t *)base;
    float *c = (float *)(base + (size_t)p->nsteps * BF_STEP * 2);
    int64_t nb = (p->mimg + BF_ROWS - 1) / BF_ROWS, npair = (p->nob + 1) / 2;
    int whole = bf_whole(p->mimg, p->nsteps);
    if (whole)
        c = (float *)(base + (size_t)(nb * p->nsteps) * BF_STEP * 2);
    if (p->level == MGE_BF16_AMX)
        bf_tiles_on();
    int64_t packed = -1;   /* the image whose blocks a holds (whole) */
    for (int64_t t = begin; t < end; t++) {
        int64_t n = whole ? t / npair : t / nb, ob0 = 0, ob1 = p->nob;
        if (whole) {
            ob0 = t % npair * 2, ob1 = ob0 + 2 < p->nob ? ob0 + 2 : p->nob;
            if (packed != n)
                for (int64_t k = 0; k < nb; k++)
                    p->pack(p, n, k * BF_ROWS, a + k * p->nsteps * BF_STEP);
            packed = n;
        }
        for (int64_t k = whole ? 0 : t % nb; k < (whole ? nb : t % nb + 1); k++) {
            int64_t m0 = k * BF_ROWS;
            int rows = (int)(p->mimg - m0 < BF_ROWS ? p->mimg - m0 : BF_ROWS);
            const uint16_t *ak = whole ? a + k * p->nsteps * BF_STEP : a;
            if (!whole)
                p->pack(p, n, m0, a);
            if (p->level == MGE_BF16_AMX)
                bf_block_amx(p, ak, c, n, m0, rows, ob0, ob1);
            else
                bf_block_512(p, ak, c, n, m0, rows, ob0, ob1);
        }
    }
    if (p->level == MGE_BF16_AMX)
        bf_tiles_off();
    CPU_VZEROUPPER();
#else
    (void)arg, (void)begin, (void)end, (void)thread;
#endif
}

static void bf_run(const mge_kctx *ctx, bf_prod *p)
{
    int64_t nb = (p->mimg + BF_ROWS - 1) / BF_ROWS;
    int64_t per = bf_whole(p->mimg, p->nsteps) ? (p->nob + 1) / 2 : nb;
    cpu_parallel(ctx, p->nimg * per, 1, bf_task, p);
}

/* ---------------------------------------------------------------- shared */

/* What prepare keeps: the packed weights. */
typedef struct bf_state {
    uint16_t *B;
    int64_t nob, nsteps;
} bf_state;

void mge_cpu_bf16_release(void *state)
{
    bf_state *st = state;
    if (!st)
        return;
    free(st->B);
    free(st);
}

static size_t bf_b_bytes(int64_t nob, int64_t nsteps)
{
    return (size_t)nob * (size_t)nsteps * BF_TILE * 2;
}

/* The level this node computes at: 0 when it computes in f32. */
static int bf_level(const mge_node *n)
{
    if (mge_node_int(n, MGE_KEY_precision, 0) != 1)
        return 0;
    return BF_X86 ? mge_cpu_bf16() : 0;
}

/* Scratch: the per-call B (when not prepared), then each thread's A and C. */
static size_t bf_ws(int64_t mimg, int64_t nob, int64_t nsteps, int threads)
{
    return bf_b_bytes(nob, nsteps) + (size_t)(threads > 0 ? threads : 1) * bf_per_thread(mimg, nsteps) + 64;
}

static mge_status bf_prepare_with(const mge_node *n, int64_t nob, int64_t nsteps,
                                  void (*packb)(const mge_node *, const mge_tensor *, uint16_t *),
                                  const mge_tensor *w, void **state, mge_error *err)
{
    bf_state *st = calloc(1, sizeof *st);
    /* C11's aligned_alloc: the size is a multiple of the 1 KiB tiles */
    if (!st || !(st->B = aligned_alloc(64, bf_b_bytes(nob, nsteps)))) {
        free(st);
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory packing bf16 weights");
    }
    st->nob = nob, st->nsteps = nsteps;
    packb(n, w, st->B);
    *state = st;
    return MGE_OK;
}

static uint16_t bf_round(float f)
{
    return mge_f32_to_bf16(f);
}

/* ---------------------------------------------------------------- linear */

typedef struct bf_lin {
    const float *x, *bias, *res;
    float *y;
    int64_t K, O;
    int act;
    float alpha;
} bf_lin;

int mge_cpu_bf16_linear_ok(const mge_node *n, const mge_tensor *x, const mge_tensor *w)
{
    return bf_level(n) && x->dtype == MGE_F32 && w->dtype == MGE_F32 && w->ndim == 2 && w->dims[1] > 0 &&
           w->dims[0] > 0;
}

/* w [O][K] -> B [O/16][K/32][16 pairs][16][2] */
static void lin_packb(const mge_node *n, const mge_tensor *w, uint16_t *B)
{
    const float *wd = w->data;
    int64_t O = w->dims[0], K = w->dims[1], nob = (O + 15) / 16, S = (K + 31) / 32;
    (void)n;
    for (int64_t ob = 0; ob < nob; ob++)
        for (int64_t s = 0; s < S; s++) {
            uint16_t *tile = B + (ob * S + s) * BF_TILE;
            for (int r = 0; r < 16; r++)
                for (int j = 0; j < 16; j++)
                    for (int e = 0; e < 2; e++) {
                        int64_t o = ob * 16 + j, k = s * 32 + 2 * r + e;
                        tile[r * 32 + j * 2 + e] = bf_round(o < O && k < K ? wd[o * K + k] : 0.0f);
                    }
        }
}

#if BF_X86
BF_512 static void lin_pack(const bf_prod *p, int64_t n, int64_t m0, uint16_t *a)
{
    const bf_lin *q = p->ud;
    (void)n;
    for (int i = 0; i < BF_ROWS; i++) {
        int64_t m = m0 + i;
        uint16_t *row = a + i * 32;
        const float *xr = q->x + m * q->K;
        for (int64_t s = 0; s < p->nsteps; s++) {
            __m512i v = _mm512_setzero_si512();
            if (m < p->mimg) {
                int64_t k0 = s * 32, left = q->K - k0;
                __mmask16 ml = left >= 16 ? 0xffff : (__mmask16)((1u << left) - 1);
                __mmask16 mh = left >= 32 ? 0xffff : left <= 16 ? 0 : (__mmask16)((1u << (left - 16)) - 1);
                __m512 lo = _mm512_maskz_loadu_ps(ml, xr + k0), hi = _mm512_maskz_loadu_ps(mh, xr + k0 + 16);
                v = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
            }
            _mm512_storeu_si512(row + s * BF_STEP, v);
        }
    }
}

BF_512 static void lin_epi(const bf_prod *p, int64_t n, int64_t m0, int rows, int64_t ob, const float *c)
{
    const bf_lin *q = p->ud;
    (void)n;
    int64_t o0 = ob * 16, cols = q->O - o0 < 16 ? q->O - o0 : 16;
    __mmask16 mk = cols >= 16 ? 0xffff : (__mmask16)((1u << cols) - 1);
    __m512 b = q->bias ? _mm512_maskz_loadu_ps(mk, q->bias + o0) : _mm512_setzero_ps();
    for (int i = 0; i < rows; i++) {
        float *y = q->y + (m0 + i) * q->O + o0;
        _mm512_mask_storeu_ps(y, mk, _mm512_add_ps(_mm512_loadu_ps(c + i * 16), b));
        cpu_act_apply(q->act, q->alpha, y, q->res ? q->res + (y - q->y) : NULL, cols);
    }
}
#endif

size_t mge_cpu_bf16_linear_ws(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, int threads)
{
    (void)out;
    if (!mge_cpu_bf16_linear_ok(n, in[0], in[1]))
        return 0;
    return bf_ws(mge_tensor_numel(in[0]) / in[1]->dims[1], (in[1]->dims[0] + 15) / 16, (in[1]->dims[1] + 31) / 32,
                 threads);
}

mge_status mge_cpu_bf16_linear_prepare(const mge_node *n, mge_tensor *const *in, void **state, mge_error *err)
{
    *state = NULL;
    if (!bf_level(n) || !in[1] || in[1]->ndim != 2 || in[1]->dtype != MGE_F32 || !in[1]->data || !in[1]->dims[0] ||
        !in[1]->dims[1])
        return MGE_OK;
    return bf_prepare_with(n, (in[1]->dims[0] + 15) / 16, (in[1]->dims[1] + 31) / 32, lin_packb, in[1], state, err);
}

mge_status mge_cpu_bf16_linear(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                               mge_tensor *const *out, const float *bias, const float *res, int act, float alpha,
                               mge_error *err)
{
#if BF_X86
    const mge_tensor *x = in[0], *w = in[1];
    bf_lin q = {x->data, bias, res, out[0]->data, w->dims[1], w->dims[0], act, alpha};
    int64_t M = mge_tensor_numel(x) / q.K, nob = (q.O + 15) / 16, S = (q.K + 31) / 32;
    if (M == 0)
        return MGE_OK;
    int threads = cpu_threads(ctx);
    size_t need = bf_ws(M, nob, S, threads);
    if (!ctx->ws || ctx->ws_size < need)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: bf16 workspace of %zu bytes, need %zu",
                             mge_kctx_opname(ctx, n), ctx->ws_size, need);
    char *ws = (char *)(((uintptr_t)ctx->ws + 63) & ~(uintptr_t)63);
    const bf_state *st = ctx->prepared;
    const uint16_t *B;
    if (st && st->nob == nob && st->nsteps == S) {
        B = st->B;
    } else {
        lin_packb(n, w, (uint16_t *)ws);
        B = (const uint16_t *)ws;
    }
    ws += bf_b_bytes(nob, S);
    bf_prod p = {1, M, S, nob, B, lin_pack, lin_epi, ws, bf_per_thread(M, S), mge_cpu_bf16(), &q};
    bf_run(ctx, &p);
    return MGE_OK;
#else
    (void)bias, (void)res, (void)act, (void)alpha;
    return cpu_fallback(ctx, n, in, out, err);
#endif
}
