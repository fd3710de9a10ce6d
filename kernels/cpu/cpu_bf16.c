/* cpu_bf16.c — the bf16 layers (precision=bf16, lib/ops.def) on AMX tiles
 * and AVX512-BF16: conv2d_nchwc (dense, blocks of 16) and linear /
 * fused_linear. Both operands are rounded to bf16 (nearest even), the
 * products summed in f32; bias, residual and activation are applied in f32
 * as the f32 kernels apply them.
 *
 * One product shape serves both: C[M, 16 * nob] = A[M, 32 * nsteps] B, the
 * rows of A (output pixels, or the rows of x) taken 32 at a time.
 *   A: per block of 32 rows, packed per call into [nsteps][32 rows][32]
 *      bf16: one K step of a row is 64 bytes, an AMX tile row.
 *   B: the weights, packed once (the kernel's prepare; per call when there
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
 * For conv2d_nchwc the K steps are (tap, 32 input channels), tap-major; a
 * row of A is one output pixel's input at that tap, two NCHW16c blocks
 * converted by one vcvtne2ps2bf16, zero outside the image. The 16 lanes of
 * an output block for consecutive pixels are contiguous in NCHW16c, so one
 * block of C is a contiguous strip of the output.
 *
 * Threads take blocks of 32 rows (each packs its own A and reads all of B);
 * every output element is one sum in one order (steps, then pairs), so
 * results do not depend on --threads. AMX's tile data permission is asked
 * once per process by cpu_isa.c; each task loads the tile configuration
 * on its own thread and releases the tiles after. */
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

/* ---------------------------------------------------------------- conv2d_nchwc */

typedef struct bf_conv {
    const float *x, *res, *bias;   /* bias padded to Ob * 16 */
    float *y;
    int64_t Cb, H, W, Ob, O, OW, KH, KW, sh, sw, ph, pw, dh, dw, nkb;
    int act;
    float alpha;
} bf_conv;

/* ci: the input's block, 16 (NCHW16c) or 1 (a plain NCHW input, the stem:
 * its K is (channel, tap), im2col style, 32 per step). */
int mge_cpu_bf16_conv_ok(const mge_node *n, const mge_tensor *x, const mge_tensor *w, const mge_tensor *y)
{
    return bf_level(n) && mge_node_int(n, MGE_KEY_groups, 1) == 1 && x->dtype == MGE_F32 && x->ndim == 5 &&
           (x->dims[4] == 16 || x->dims[4] == 1) && y->ndim == 5 && y->dims[4] == 16 && w->ndim == 6 &&
           w->dims[4] == x->dims[4] && w->dims[5] == 16;
}

static int64_t conv_nsteps_ci(const mge_node *n, int64_t Cb, int64_t ci)
{
    int64_t taps = mge_node_ints(n, MGE_KEY_kernel, 0, 1) * mge_node_ints(n, MGE_KEY_kernel, 1, 1);
    return ci == 1 ? (Cb * taps + 31) / 32 : taps * ((Cb + 1) / 2);
}


/* w [Ob][Cb][KH][KW][16 in][16 out] -> B [Ob][(tap, kb)][16 pairs][16][2] */
static void conv_packb(const mge_node *n, const mge_tensor *w, uint16_t *B)
{
    const float *wd = w->data;
    int64_t Ob = w->dims[0], Cb = w->dims[1], KH = w->dims[2], KW = w->dims[3], nkb = (Cb + 1) / 2;
    int64_t S = KH * KW * nkb;
    (void)n;
    for (int64_t ob = 0; ob < Ob; ob++)
        for (int64_t t = 0; t < KH * KW; t++)
            for (int64_t kb = 0; kb < nkb; kb++) {
                uint16_t *tile = B + (ob * S + t * nkb + kb) * BF_TILE;
                for (int r = 0; r < 16; r++)
                    for (int j = 0; j < 16; j++)
                        for (int e = 0; e < 2; e++) {
                            int64_t ic = kb * 32 + 2 * r + e, cb = ic / 16;
                            float v = cb < Cb ? wd[(((ob * Cb + cb) * KH * KW + t) * 16 + ic % 16) * 16 + j] : 0.0f;
                            tile[r * 32 + j * 2 + e] = bf_round(v);
                        }
            }
}

/* w [Ob][C][KH][KW][1][16] -> B [Ob][K/32][16 pairs][16][2], k = (c, ky, kx) */
static void conv1_packb(const mge_node *n, const mge_tensor *w, uint16_t *B)
{
    const float *wd = w->data;
    int64_t Ob = w->dims[0], K = w->dims[1] * w->dims[2] * w->dims[3], S = (K + 31) / 32;
    (void)n;
    for (int64_t ob = 0; ob < Ob; ob++)
        for (int64_t s = 0; s < S; s++) {
            uint16_t *tile = B + (ob * S + s) * BF_TILE;
            for (int r = 0; r < 16; r++)
                for (int j = 0; j < 16; j++)
                    for (int e = 0; e < 2; e++) {
                        int64_t k = s * 32 + 2 * r + e;
                        tile[r * 32 + j * 2 + e] = bf_round(k < K ? wd[(ob * K + k) * 16 + j] : 0.0f);
                    }
        }
}

#if BF_X86
/* the stem: one pixel's im2col row, gathered and converted 32 at a time */
BF_512 static void conv1_pack(const bf_prod *p, int64_t n, int64_t m0, uint16_t *a)
{
    const bf_conv *q = p->ud;
    const int64_t S = p->nsteps, C = q->Cb, HW = q->H * q->W;
    const float *xn = q->x + n * C * HW;
    float buf[64];
    /* a tap row (KW inputs in a row) as one masked load where the taps are
     * adjacent: lanes outside the image are masked off (and so read nothing) */
    if (q->dw == 1 && q->KW <= 16 && S * 32 + 16 <= 1024) {
        float row_f[1024 + 16];
        for (int i = 0; i < BF_ROWS; i++) {
            int64_t m = m0 + i, k = 0;
            uint16_t *row = a + i * 32;
            if (m < p->mimg) {
                int64_t oy = m / q->OW, ox = m % q->OW, ix0 = ox * q->sw - q->pw;
                uint32_t mk = 0;
                for (int64_t kx = 0; kx < q->KW; kx++)
                    mk |= (uint32_t)(ix0 + kx >= 0 && ix0 + kx < q->W) << kx;
                for (int64_t c = 0; c < C; c++)
                    for (int64_t ky = 0; ky < q->KH; ky++, k += q->KW) {
                        int64_t iy = oy * q->sh - q->ph + ky * q->dh;
                        __m512 v = iy >= 0 && iy < q->H
                                       ? _mm512_maskz_loadu_ps((__mmask16)mk, xn + c * HW + iy * q->W + ix0)
                                       : _mm512_setzero_ps();
                        _mm512_storeu_ps(row_f + k, v);
                    }
            }
            for (int64_t z = k; z < S * 32; z += 16)
                _mm512_storeu_ps(row_f + z, _mm512_setzero_ps());
            for (int64_t s = 0; s < S; s++)
                _mm512_storeu_si512(row + s * BF_STEP, (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(row_f + s * 32 + 16),
                                                                                   _mm512_loadu_ps(row_f + s * 32)));
        }
        return;
    }
    for (int i = 0; i < BF_ROWS; i++) {
        int64_t m = m0 + i, k = 0, s = 0;
        uint16_t *row = a + i * 32;
        int live = m < p->mimg;
        int64_t oy = live ? m / q->OW : 0, ox = live ? m % q->OW : 0;
        for (int64_t c = 0; c < C && live; c++)
            for (int64_t ky = 0; ky < q->KH; ky++) {
                int64_t iy = oy * q->sh - q->ph + ky * q->dh;
                for (int64_t kx = 0; kx < q->KW; kx++) {
                    int64_t ix = ox * q->sw - q->pw + kx * q->dw;
                    buf[k++] = iy >= 0 && iy < q->H && ix >= 0 && ix < q->W ? xn[c * HW + iy * q->W + ix] : 0.0f;
                    if (k == 32) {
                        _mm512_storeu_si512(row + s++ * BF_STEP, (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(buf + 16),
                                                                                             _mm512_loadu_ps(buf)));
                        k = 0;
                    }
                }
            }
        for (; s < S; s++) {
            for (; k < 32; k++)
                buf[k] = 0.0f;
            _mm512_storeu_si512(row + s * BF_STEP,
                                (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(buf + 16), _mm512_loadu_ps(buf)));
            k = 0;
        }
    }
}

BF_512 static void conv_pack(const bf_prod *p, int64_t n, int64_t m0, uint16_t *a)
{
    const bf_conv *q = p->ud;
    const int64_t S = p->nsteps, HW = q->H * q->W;
    const float *xn = q->x + n * q->Cb * HW * 16;
    for (int i = 0; i < BF_ROWS; i++) {
        int64_t m = m0 + i;
        uint16_t *row = a + i * 32;
        if (m >= p->mimg) {
            for (int64_t s = 0; s < S; s++)
                _mm512_storeu_si512(row + s * BF_STEP, _mm512_setzero_si512());
            continue;
        }
        int64_t oy = m / q->OW, ox = m % q->OW;
        for (int64_t ky = 0, s = 0; ky < q->KH; ky++) {
            int64_t iy = oy * q->sh - q->ph + ky * q->dh;
            for (int64_t kx = 0; kx < q->KW; kx++) {
                int64_t ix = ox * q->sw - q->pw + kx * q->dw;
                int in = iy >= 0 && iy < q->H && ix >= 0 && ix < q->W;
                const float *px = xn + (iy * q->W + ix) * 16;
                for (int64_t kb = 0; kb < q->nkb; kb++, s++) {
                    __m512i v = _mm512_setzero_si512();
                    if (in) {
                        __m512 lo = _mm512_loadu_ps(px + 2 * kb * HW * 16);
                        __m512 hi = 2 * kb + 1 < q->Cb ? _mm512_loadu_ps(px + (2 * kb + 1) * HW * 16)
                                                      : _mm512_setzero_ps();
                        v = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
                    }
                    _mm512_storeu_si512(row + s * BF_STEP, v);
                }
            }
        }
    }
}

BF_512 static void conv_epi(const bf_prod *p, int64_t n, int64_t m0, int rows, int64_t ob, const float *c)
{
    const bf_conv *q = p->ud;
    int64_t off = ((n * q->Ob + ob) * p->mimg + m0) * 16;
    float *y = q->y + off;
    __m512 b = _mm512_loadu_ps(q->bias + ob * 16);
    for (int i = 0; i < rows; i++)
        _mm512_storeu_ps(y + i * 16, _mm512_add_ps(_mm512_loadu_ps(c + i * 16), b));
    cpu_act_apply(q->act, q->alpha, y, q->res ? q->res + off : NULL, (int64_t)rows * 16);
    /* lanes past the real channels stay zero whatever the activation */
    int64_t live = q->O - ob * 16;
    if (live < 16)
        for (int i = 0; i < rows; i++)
            memset(y + i * 16 + live, 0, sizeof(float) * (size_t)(16 - live));
}
#endif

size_t mge_cpu_bf16_conv_ws(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, int threads)
{
    if (!mge_cpu_bf16_conv_ok(n, in[0], in[1], out[0]))
        return 0;
    return bf_ws(out[0]->dims[2] * out[0]->dims[3], out[0]->dims[1], conv_nsteps_ci(n, in[0]->dims[1], in[0]->dims[4]),
                 threads) +
           sizeof(float) * (size_t)out[0]->dims[1] * 16;
}

mge_status mge_cpu_bf16_conv_prepare(const mge_node *n, mge_tensor *const *in, void **state, mge_error *err)
{
    *state = NULL;
    if (!bf_level(n) || !in[1] || in[1]->ndim != 6 || (in[1]->dims[4] != 16 && in[1]->dims[4] != 1) ||
        in[1]->dims[5] != 16 || mge_node_int(n, MGE_KEY_groups, 1) != 1 || !in[1]->data)
        return MGE_OK;
    int ci = (int)in[1]->dims[4];
    return bf_prepare_with(n, in[1]->dims[0], conv_nsteps_ci(n, in[1]->dims[1], ci), ci == 1 ? conv1_packb : conv_packb,
                           in[1], state, err);
}

mge_status mge_cpu_bf16_conv(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                             mge_error *err)
{
#if BF_X86
    const mge_tensor *x = in[0], *w = in[1];
    mge_tensor *y = out[0];
    int bias = (int)mge_node_int(n, MGE_KEY_bias, 1), res = (int)mge_node_int(n, MGE_KEY_residual, 0);
    bf_conv q;
    memset(&q, 0, sizeof q);
    q.Cb = x->dims[1], q.H = x->dims[2], q.W = x->dims[3];
    q.Ob = y->dims[1], q.O = mge_node_int(n, MGE_KEY_out, 0), q.OW = y->dims[3];
    q.KH = mge_node_ints(n, MGE_KEY_kernel, 0, 1), q.KW = mge_node_ints(n, MGE_KEY_kernel, 1, 1);
    q.sh = mge_node_ints(n, MGE_KEY_stride, 0, 1), q.sw = mge_node_ints(n, MGE_KEY_stride, 1, 1);
    q.ph = mge_node_ints(n, MGE_KEY_pad, 0, 0), q.pw = mge_node_ints(n, MGE_KEY_pad, 1, 0);
    q.dh = mge_node_ints(n, MGE_KEY_dilation, 0, 1), q.dw = mge_node_ints(n, MGE_KEY_dilation, 1, 1);
    q.nkb = (q.Cb + 1) / 2;
    q.act = (int)mge_node_ints(n, MGE_KEY_act, 0, -1);
    q.alpha = (float)mge_node_float(n, MGE_KEY_alpha, 0.01);
    q.x = x->data, q.y = y->data, q.res = res ? in[2 + bias]->data : NULL;
    if (w->dims[0] != q.Ob || w->dims[1] != q.Cb)
        return mge_error_set(err, MGE_ERR_SHAPE, "conv2d_nchwc: packed weight does not fit (bf16)");
    int ci = (int)x->dims[4];
    int64_t S = conv_nsteps_ci(n, q.Cb, ci);
    int threads = cpu_threads(ctx);
    size_t need = mge_cpu_bf16_conv_ws(n, in, out, threads);
    if (!ctx->ws || ctx->ws_size < need)
        return mge_error_set(err, MGE_ERR_INVALID, "conv2d_nchwc: bf16 workspace of %zu bytes, need %zu",
                             ctx->ws_size, need);
    char *ws = (char *)(((uintptr_t)ctx->ws + 63) & ~(uintptr_t)63);
    float *bp = (float *)ws;
    memset(bp, 0, sizeof(float) * (size_t)q.Ob * 16);
    if (bias)
        memcpy(bp, in[2]->data, sizeof(float) * (size_t)(q.O < q.Ob * 16 ? q.O : q.Ob * 16));
    q.bias = bp;
    char *rest = ws + sizeof(float) * (size_t)q.Ob * 16;
    const bf_state *st = ctx->prepared;
    const uint16_t *B;
    if (st && st->nob == q.Ob && st->nsteps == S) {
        B = st->B;
    } else {
        (ci == 1 ? conv1_packb : conv_packb)(n, w, (uint16_t *)rest);
        B = (const uint16_t *)rest;
    }
    rest += bf_b_bytes(q.Ob, S);
    bf_prod p = {x->dims[0], y->dims[2] * y->dims[3], S, q.Ob, B, ci == 1 ? conv1_pack : conv_pack, conv_epi, rest,
                 bf_per_thread(y->dims[2] * y->dims[3], S), mge_cpu_bf16(), &q};
    bf_run(ctx, &p);
    return MGE_OK;
#else
    return cpu_fallback(ctx, n, in, out, err);
#endif
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
