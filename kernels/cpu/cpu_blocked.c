/* cpu_blocked.c — the blocked-layout (NCHWc) ops on the CPU: to_nchwc,
 * from_nchwc, maxpool2d_nchwc and conv2d_nchwc (f32, see ops.def).
 *
 * conv2d_nchwc is a direct convolution with register blocking. A tile is NB
 * output blocks (NB*c output channels) by RW consecutive outputs of one row;
 * its NB*RW vectors of c lanes stay in registers while the loop runs over
 * input blocks, taps and input lanes: one weight vector per output block,
 * one broadcast input value per output, NB*RW fused multiply-adds. The
 * packed weight [O/c][Cb][kh][kw][c_in][c_out] is read in order. Padding is
 * copied once into a zero-bordered input (the workspace), so no tap needs a
 * bounds test. Input blocks are taken in chunks whose weights stay in L2;
 * between chunks the partial sums go through the output (which is in cache).
 * The last chunk adds the residual and applies relu/relu6 in registers;
 * other activations, and zeroing the lanes past the real channels, run on
 * the stored strip. The input block may be 1 (a plain NCHW input: the
 * 3-channel stem), read the same way with one lane per block.
 * Depthwise convs need no broadcasts (lane l is channel l throughout) and
 * read the input in place, checking taps only at the row edges.
 *
 * With several threads both split each layer by output rows (cpu.h's
 * cpu_parallel_aff: thread t takes its own band first), so a thread reads
 * mostly the rows it wrote the layer before, from its own L2.
 *
 * Every output element is summed in the same order (input blocks, taps,
 * lanes) whatever the tile or task it falls in, so results are bit-identical
 * for any --threads. c = 16 runs on AVX-512 and c = 8 on AVX2 (the widths the
 * layout pass picks); other blocks, or a CPU without the ISA, take portable
 * loops. GCC's vector extensions give one source for both widths; the tile
 * functions are stamped out per (ISA, NB, RW, stride) by macros, since RW
 * and NB must be constants for the accumulators to live in registers.
 * precision=bf16 nodes (groups 1, blocks of 16 or a plain stem) run cpu_blocked_bf16.c
 * when the CPU has AMX or AVX512-BF16; its prepare packs their weights. */
#include "cpu_act.h"
#include "cpu_relu.h"

#include <math.h>
#include <string.h>

#if CPU_X86 && defined(__GNUC__)
#define BLK_VEC 1
#if defined(__clang__)
#define BLK_AVX512 __attribute__((target("avx512f")))
#else
#define BLK_AVX512 __attribute__((target("avx512f"), optimize(CPU_OPTS)))
#endif
#else
#define BLK_VEC 0
#endif

#if BLK_VEC
typedef float blk_v16 __attribute__((vector_size(64)));
typedef float blk_v8 __attribute__((vector_size(32)));
typedef int32_t blk_i16 __attribute__((vector_size(64)));
/* the intrinsics' type of a vector of 16 or 8 lanes (same bits) */
#define BLK_M16(v) ((__m512)(v))
#define BLK_M8(v) ((__m256)(v))
#endif

/* MGE_CPU_ISA=avx2 keeps AVX-512 off (to test the AVX2 path); kernels/cpu/cpu_isa.c */
static int blk_isa_avx512(void)
{
    return BLK_VEC && mge_cpu_isa() >= MGE_ISA_AVX512;
}

/* ---------------------------------------------------------------- reorders */

typedef struct reorder_job {
    const float *x;
    float *y;
    int64_t C, Cb, HW, c;
} reorder_job;

/* Rows are (image, block) pairs: HW positions of c lanes each; each is a
 * transpose of an HW x c matrix (cpu_transpose: 8 x 8 register blocks;
 * a loop with a stride on every element ran at 11 GB/s). */
static void to_task(void *a, int64_t r0, int64_t r1, int thread)
{
    (void)thread;
    const reorder_job *j = a;
    const int64_t C = j->C, Cb = j->Cb, HW = j->HW, c = j->c;
    for (int64_t r = r0; r < r1; r++) {
        int64_t img = r / Cb, b = r % Cb;
        float *y = j->y + r * HW * c;
        int64_t valid = C - b * c < c ? C - b * c : c;
        cpu_transpose(j->x + (img * C + b * c) * HW, valid, HW, HW, y, c);
        if (valid < c)
            for (int64_t p = 0; p < HW; p++)
                memset(y + p * c + valid, 0, sizeof(float) * (size_t)(c - valid));
    }
}

static void from_task(void *a, int64_t r0, int64_t r1, int thread)
{
    (void)thread;
    const reorder_job *j = a;
    const int64_t C = j->C, Cb = j->Cb, HW = j->HW, c = j->c;
    for (int64_t r = r0; r < r1; r++) {
        int64_t img = r / Cb, b = r % Cb;
        int64_t valid = C - b * c < c ? C - b * c : c;
        cpu_transpose(j->x + r * HW * c, HW, valid, c, j->y + (img * C + b * c) * HW, HW);
    }
}

static mge_status to_nchwc(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                           mge_error *err)
{
    const mge_tensor *x = in[0];
    mge_tensor *y = out[0];
    int64_t c = mge_node_int(n, MGE_KEY_block, 0);
    if (x->dtype != MGE_F32 || x->ndim != 4 || y->ndim != 5 || c < 1 || y->dims[4] != c ||
        y->dims[1] != (x->dims[1] + c - 1) / c)
        return cpu_fallback(ctx, n, in, out, err);
    reorder_job j = {x->data, y->data, x->dims[1], y->dims[1], x->dims[2] * x->dims[3], c};
    int64_t rows = x->dims[0] * j.Cb;
    cpu_parallel(ctx, rows, CPU_GRAIN / (j.HW * c + 1) + 1, to_task, &j);
    return MGE_OK;
}

static mge_status from_nchwc(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                             mge_error *err)
{
    const mge_tensor *x = in[0];
    mge_tensor *y = out[0];
    if (x->dtype != MGE_F32 || x->ndim != 5 || y->ndim != 4 || y->dims[1] != mge_node_int(n, MGE_KEY_channels, 0) ||
        x->dims[1] != (y->dims[1] + x->dims[4] - 1) / x->dims[4])
        return cpu_fallback(ctx, n, in, out, err);
    reorder_job j = {x->data, y->data, y->dims[1], x->dims[1], x->dims[2] * x->dims[3], x->dims[4]};
    int64_t rows = x->dims[0] * j.Cb;
    cpu_parallel(ctx, rows, CPU_GRAIN / (j.HW * j.c + 1) + 1, from_task, &j);
    return MGE_OK;
}

/* ---------------------------------------------------------------- maxpool2d_nchwc */

typedef struct pool_job {
    const float *x;
    float *y;
    int64_t H, W, OH, OW, c, k[2], s[2], p[2], d[2];
} pool_job;

/* Rows are (image*block, output row); each output is the max of its
 * window's real positions, per lane (NaN wins, as maxpool2d). */
CPU_MULTI(pool_rows, (const pool_job *j, int64_t r0, int64_t r1), (j, r0, r1), {
    const int64_t c = j->c, H = j->H, W = j->W, OH = j->OH, OW = j->OW;
    for (int64_t r = r0; r < r1; r++) {
        int64_t pl = r / OH, oh = r % OH;
        const float *x = j->x + pl * H * W * c;
        float *restrict y = j->y + (pl * OH + oh) * OW * c;
        for (int64_t ow = 0; ow < OW; ow++) {
            float m[64];
            for (int64_t l = 0; l < c; l++)
                m[l] = -INFINITY;
            for (int64_t i = 0; i < j->k[0]; i++) {
                int64_t ih = oh * j->s[0] - j->p[0] + i * j->d[0];
                if (ih < 0 || ih >= H)
                    continue;
                for (int64_t t = 0; t < j->k[1]; t++) {
                    int64_t iw = ow * j->s[1] - j->p[1] + t * j->d[1];
                    if (iw < 0 || iw >= W)
                        continue;
                    const float *restrict xs = x + (ih * W + iw) * c;
                    for (int64_t l = 0; l < c; l++) {
                        float v = xs[l];
                        m[l] = v > m[l] || v != v ? v : m[l];
                    }
                }
            }
            for (int64_t l = 0; l < c; l++)
                y[ow * c + l] = m[l];
        }
    }
})

#if BLK_VEC
/* The same at c = 16 on AVX-512, the window's max in one register. */
static BLK_AVX512 void pool_rows16(const pool_job *j, int64_t r0, int64_t r1)
{
    const int64_t H = j->H, W = j->W, OH = j->OH, OW = j->OW;
    for (int64_t r = r0; r < r1; r++) {
        int64_t pl = r / OH, oh = r % OH;
        const float *x = j->x + pl * H * W * 16;
        float *y = j->y + (pl * OH + oh) * OW * 16;
        for (int64_t ow = 0; ow < OW; ow++) {
            blk_v16 m;
            for (int l = 0; l < 16; l++)
                m[l] = -INFINITY;
            for (int64_t i = 0; i < j->k[0]; i++) {
                int64_t ih = oh * j->s[0] - j->p[0] + i * j->d[0];
                if (ih < 0 || ih >= H)
                    continue;
                for (int64_t t = 0; t < j->k[1]; t++) {
                    int64_t iw = ow * j->s[1] - j->p[1] + t * j->d[1];
                    if (iw < 0 || iw >= W)
                        continue;
                    blk_v16 v;
                    memcpy(&v, x + (ih * W + iw) * 16, sizeof v);
                    blk_i16 take = (v > m) | (v != v);
                    m = (blk_v16)(((blk_i16)m & ~take) | ((blk_i16)v & take));
                }
            }
            memcpy(y + ow * 16, &m, sizeof m);
        }
    }
}
#endif

static void pool_task(void *a, int64_t r0, int64_t r1, int thread)
{
    (void)thread;
#if BLK_VEC
    if (((const pool_job *)a)->c == 16 && blk_isa_avx512()) {
        pool_rows16(a, r0, r1);
        return;
    }
#endif
    pool_rows(a, r0, r1);
}

static mge_status maxpool_nchwc(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *x = in[0];
    mge_tensor *y = out[0];
    if (x->dtype != MGE_F32 || x->ndim != 5 || y->ndim != 5 || x->dims[4] > 64 || y->dims[4] != x->dims[4])
        return cpu_fallback(ctx, n, in, out, err);
    pool_job j = {x->data, y->data, x->dims[2], x->dims[3], y->dims[2], y->dims[3], x->dims[4], {0}, {0}, {0}, {0}};
    for (int i = 0; i < 2; i++) {
        j.k[i] = mge_node_ints(n, MGE_KEY_kernel, i, 1);
        j.s[i] = mge_node_ints(n, MGE_KEY_stride, i, j.k[i]);
        j.p[i] = mge_node_ints(n, MGE_KEY_pad, i, 0);
        j.d[i] = mge_node_ints(n, MGE_KEY_dilation, i, 1);
    }
    int64_t rows = y->dims[0] * y->dims[1] * j.OH;
    cpu_parallel(ctx, rows, 1 + CPU_GRAIN / (j.OW * j.c * j.k[0] * j.k[1] + 1), pool_task, &j);
    return MGE_OK;
}

/* ---------------------------------------------------------------- conv geometry */

typedef struct blk_conv {
    int64_t N, Cb, H, W, c, O, Ob, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw;
    int64_t ci;               /* the input's block (c, or 1 for a plain NCHW x) */
    int64_t Hp, Wp;           /* the padded input's plane */
    int dw_conv;              /* depthwise */
    int act;
    float alpha;
    const float *x;           /* padded input [N][Cb][Hp][Wp][c] (x itself when there is no pad) */
    const float *w, *res;
    const float *bias;        /* [Ob*c], zero past O */
    float *y;
    /* tasks: (image, group of NB output blocks, chunk of rows) */
    int nb, rw;               /* the tile kind */
    int rw1;                  /* the strip of one-block tiles (short groups) */
    int kind, kind1;          /* their index in kinds16 / kinds8 */
    int rowmajor;             /* dense tasks in (image, row chunk, group) order */
    int64_t dwb, dwnb;        /* depthwise: rows per band, bands per image */
    int64_t ngroups, rows, nrc, cbk;
    int isa;                  /* 2: AVX-512 (c = 16), 1: AVX2 (c = 8), 0: portable */
} blk_conv;

/* Arguments of one tile call, positioned at the tile's first output. */
typedef struct blk_tile {
    const float *x;           /* input at (image, first block of the chunk, oh*sh, ow0*sw) */
    const float *w;           /* weight at (first output block, first block of the chunk) */
    float *y;                 /* output at (image, first output block, oh, ow0) */
    const float *res;         /* residual at the same place, or NULL */
    const float *bias;        /* bias at the first output block */
    int64_t xcb, xrow, wob, wcb, yob;
    int64_t ncb, KH, KW, dh, dw, sw;
    int first, last, nb, rw;
    int act;                  /* relu or relu6 applied in registers at the end, else -1 */
} blk_tile;

/* The tile kinds (NB output blocks, RW outputs), best first: the most
 * blocks per tile (fewest broadcasts per multiply-add), then the widest
 * strip. AVX-512 has 32 vector registers (NB*RW <= 28 accumulators), AVX2
 * 16 (NB*RW <= 12, with the weights and the broadcast beside them). */
static const int kinds16[][2] = {{4, 7}, {2, 14}, {2, 7}, {1, 28}, {1, 14}, {1, 7}};
static const int kinds8[][2] = {{3, 4}, {2, 6}, {1, 12}, {1, 7}, {1, 4}};

/* ---------------------------------------------------------------- epilogue */

/* The activation over n floats of a stored strip (in L1): the table's
 * loops (cpu_act.h), which the compiler vectorizes. */
#define KACT_LOOP(EXPR)                   \
    for (int64_t i = 0; i < n; i++) {     \
        float v = y[i];                   \
        y[i] = (EXPR);                    \
    }
static inline __attribute__((always_inline)) void act_strip(float *restrict y, int64_t n, int act, float alpha)
{
    if (act == -1)
        return;
    kact_par p = kact_par_default(act, alpha);
    KACT_CPU_BEGIN(&p);
    switch (act) {
        KACT_CPU_CASES
    default: break;
    }
}
#undef KACT_LOOP

/* After the last chunk: the activation on the NB blocks of a strip of rw
 * outputs, and zero lanes past O (an activation may make them nonzero).
 * Compiled with the vectorizer's options: at plain -O2 the clamps become
 * branches, which mispredict on every other element. */
CPU_MULTI(blk_epilogue, (const blk_conv *q, float *y, int64_t ob0, int nb, int64_t rw, int act),
          (q, y, ob0, nb, rw, act), {
    const int64_t c = q->c;
    for (int j = 0; j < nb; j++) {
        float *yj = y + j * q->OH * q->OW * c;
        act_strip(yj, rw * c, act, q->alpha);
        int64_t valid = q->O - (ob0 + j) * c;
        if (valid < c)
            for (int64_t r = 0; r < rw; r++)
                memset(yj + r * c + valid, 0, sizeof(float) * (size_t)(c - valid));
    }
})

/* ---------------------------------------------------------------- portable tile
 * Any c, nb and rw, one output at a time: the fallback, and the remainder
 * strips of the vector kernels. The order of the sums is the vector tiles'. */
CPU_MULTI(tile_any, (const blk_tile *t, int64_t c, int64_t ci), (t, c, ci), {
    float acc[4 * 64];
    for (int64_t r = 0; r < t->rw; r++) {
        for (int j = 0; j < t->nb; j++)
            for (int64_t l = 0; l < c; l++)
                acc[j * c + l] = t->first ? t->bias[j * c + l] : t->y[j * t->yob + r * c + l];
        for (int64_t cb = 0; cb < t->ncb; cb++)
            for (int64_t kh = 0; kh < t->KH; kh++)
                for (int64_t kw = 0; kw < t->KW; kw++) {
                    const float *xs = t->x + cb * t->xcb + kh * t->dh * t->xrow + (kw * t->dw + r * t->sw) * ci;
                    const float *ws = t->w + cb * t->wcb + (kh * t->KW + kw) * ci * c;
                    for (int64_t li = 0; li < ci; li++) {
                        float xv = xs[li];
                        for (int j = 0; j < t->nb; j++)
                            for (int64_t l = 0; l < c; l++)
                                acc[j * c + l] += ws[j * t->wob + li * c + l] * xv;
                    }
                }
        for (int j = 0; j < t->nb; j++)
            for (int64_t l = 0; l < c; l++) {
                float v = acc[j * c + l];
                if (t->last && t->res)
                    v += t->res[j * t->yob + r * c + l];
                t->y[j * t->yob + r * c + l] = v;
            }
    }
})

/* ---------------------------------------------------------------- vector tiles */

#if BLK_VEC

/* TILE_BODY: the register-blocked tile for vector type VT of CW lanes,
 * NB output blocks, RW outputs, input stride SW (all constants). */
/* The tile's fields are read into locals first: the output stores could
 * alias *t as far as the compiler knows, and it reloaded t->last, t->res,
 * t->act and t->y, with three branches, for every one of the 28 outputs
 * (about 400 instructions a call, as many as the 16 multiply-add steps of
 * a 1x1 conv over one input block). */
#define TILE_BODY(VT, CW, CI, NB, RW, SW)                                                                      \
    {                                                                                                          \
        float *restrict y = t->y;                                                                              \
        const int64_t yob = t->yob, ncb = t->ncb, KH = t->KH, KW = t->KW;                                     \
        const int64_t xcb = t->xcb, xdh = t->dh * t->xrow, xdw = t->dw * CI, wcb = t->wcb, wob = t->wob;       \
        const float *restrict res = t->last ? t->res : NULL;                                                   \
        const int act = t->last ? t->act : -1;                                                                 \
        VT acc[NB][RW];                                                                                        \
        if (t->first) {                                                                                        \
            const float *restrict bias = t->bias;                                                              \
            _Pragma("GCC unroll 8") for (int j = 0; j < NB; j++)                                               \
                _Pragma("GCC unroll 32") for (int r = 0; r < RW; r++)                                          \
                    memcpy(&acc[j][r], bias + j * CW, sizeof(VT));                                             \
        } else {                                                                                               \
            _Pragma("GCC unroll 8") for (int j = 0; j < NB; j++)                                               \
                _Pragma("GCC unroll 32") for (int r = 0; r < RW; r++)                                          \
                    memcpy(&acc[j][r], y + j * yob + r * CW, sizeof(VT));                                      \
        }                                                                                                      \
        for (int64_t cb = 0; cb < ncb; cb++)                                                                   \
            for (int64_t kh = 0; kh < KH; kh++)                                                                \
                for (int64_t kw = 0; kw < KW; kw++) {                                                          \
                    const float *restrict xs = t->x + cb * xcb + kh * xdh + kw * xdw;                          \
                    const float *restrict ws = t->w + cb * wcb + (kh * KW + kw) * CI * CW;                     \
                    for (int li = 0; li < CI; li++) {                                                          \
                        VT wv[NB];                                                                             \
                        _Pragma("GCC unroll 8") for (int j = 0; j < NB; j++)                                   \
                            memcpy(&wv[j], ws + j * wob + li * CW, sizeof(VT));                                \
                        _Pragma("GCC unroll 32") for (int r = 0; r < RW; r++)                                  \
                        {                                                                                      \
                            float xv = xs[r * SW * CI + li];                                                   \
                            _Pragma("GCC unroll 8") for (int j = 0; j < NB; j++)                               \
                                acc[j][r] += wv[j] * xv;                                                       \
                        }                                                                                      \
                    }                                                                                          \
                }                                                                                              \
        if (res)                                                                                               \
            _Pragma("GCC unroll 8") for (int j = 0; j < NB; j++)                                               \
                _Pragma("GCC unroll 32") for (int r = 0; r < RW; r++)                                          \
            {                                                                                                  \
                VT rv;                                                                                         \
                memcpy(&rv, res + j * yob + r * CW, sizeof(VT));                                               \
                acc[j][r] += rv;                                                                               \
            }                                                                                                  \
        if (act >= 0) { /* relu or relu6 (cpu_relu.h) */                                                       \
            const int six = act == MGE_OP_RELU6;                                                               \
            _Pragma("GCC unroll 8") for (int j = 0; j < NB; j++)                                               \
                _Pragma("GCC unroll 32") for (int r = 0; r < RW; r++)                                          \
                    acc[j][r] = (VT)cpu_relu##CW(BLK_M##CW(acc[j][r]), six);                                   \
        }                                                                                                      \
        _Pragma("GCC unroll 8") for (int j = 0; j < NB; j++)                                                   \
            _Pragma("GCC unroll 32") for (int r = 0; r < RW; r++)                                              \
                memcpy(y + j * yob + r * CW, &acc[j][r], sizeof(VT));                                          \
    }

#define TILE_FN(ATTR, VT, CW, CI, NB, RW, SW) \
    static ATTR void tile_##CW##_##CI##_##NB##_##RW##_##SW(const blk_tile *t) TILE_BODY(VT, CW, CI, NB, RW, SW)

/* The tile functions of each kind (NB, RW) of kinds16 / kinds8, for
 * strides 1 and 2 and input blocks of CW lanes or 1 (a plain NCHW input,
 * the network's stem). */
#define TILE_SW(ATTR, VT, CW, CI, NB, RW) \
    TILE_FN(ATTR, VT, CW, CI, NB, RW, 1) TILE_FN(ATTR, VT, CW, CI, NB, RW, 2)
#define TILES16(CI)                                                                                    \
    TILE_SW(BLK_AVX512, blk_v16, 16, CI, 4, 7) TILE_SW(BLK_AVX512, blk_v16, 16, CI, 2, 14) \
    TILE_SW(BLK_AVX512, blk_v16, 16, CI, 2, 7) TILE_SW(BLK_AVX512, blk_v16, 16, CI, 1, 28) \
    TILE_SW(BLK_AVX512, blk_v16, 16, CI, 1, 14) TILE_SW(BLK_AVX512, blk_v16, 16, CI, 1, 7)
#define TILES8(CI)                                                                                 \
    TILE_SW(CPU_AVX2, blk_v8, 8, CI, 3, 4) TILE_SW(CPU_AVX2, blk_v8, 8, CI, 2, 6)   \
    TILE_SW(CPU_AVX2, blk_v8, 8, CI, 1, 12) TILE_SW(CPU_AVX2, blk_v8, 8, CI, 1, 7) \
    TILE_SW(CPU_AVX2, blk_v8, 8, CI, 1, 4)

TILES16(16)
TILES16(1)
TILES8(8)
TILES8(1)

typedef void (*blk_tile_fn)(const blk_tile *t);
#define TILE_PAIR(CW, CI, NB, RW) {tile_##CW##_##CI##_##NB##_##RW##_1, tile_##CW##_##CI##_##NB##_##RW##_2}
#define TILE_KIND(CW, NB, RW) {TILE_PAIR(CW, CW, NB, RW), TILE_PAIR(CW, 1, NB, RW)}
/* [kind][input block c or 1][stride 1 or 2], in the order of kinds16 / kinds8 */
static const blk_tile_fn tiles16[][2][2] = {
    TILE_KIND(16, 4, 7), TILE_KIND(16, 2, 14), TILE_KIND(16, 2, 7),
    TILE_KIND(16, 1, 28), TILE_KIND(16, 1, 14), TILE_KIND(16, 1, 7),
};
static const blk_tile_fn tiles8[][2][2] = {
    TILE_KIND(8, 3, 4), TILE_KIND(8, 2, 6), TILE_KIND(8, 1, 12), TILE_KIND(8, 1, 7), TILE_KIND(8, 1, 4),
};

static blk_tile_fn tile_lookup(int isa, int k, int64_t sw, int64_t ci)
{
    if (!isa || k < 0 || sw < 1 || sw > 2 || (ci != 1 && ci != (isa == 2 ? 16 : 8)))
        return NULL;
    return isa == 2 ? tiles16[k][ci == 1][sw - 1] : tiles8[k][ci == 1][sw - 1];
}
#else
typedef void (*blk_tile_fn)(const blk_tile *t);
static blk_tile_fn tile_lookup(int isa, int k, int64_t sw, int64_t ci)
{
    (void)isa, (void)k, (void)sw, (void)ci;
    return NULL;
}
#endif

/* Depthwise rows are numbered (image, band of q->dwb rows, block, row in
 * the band), with one band per thread (the last rows past OH are no
 * work), so that a thread's share of them (cpu_parallel_aff) is its band
 * of rows across every block: the rows the dense convs before and after
 * give that thread. Within the band it works block by block, each input
 * row read for three output rows while in L1. */
#define DW_ROW(q, t) (((t) / ((q)->Ob * (q)->dwb)) % (q)->dwnb * (q)->dwb + (t) % (q)->dwb)
#define DW_PLANE(q, t) (((t) / ((q)->Ob * (q)->dwb * (q)->dwnb)) * (q)->Ob + ((t) / (q)->dwb) % (q)->Ob)

/* ---------------------------------------------------------------- dense driver */

/* Tasks: (image, group of nb output blocks, chunk of q->rows rows), numbered
 * group-major or, with q->rowmajor, row-chunk-major. Within a task: for
 * each chunk of cbk input blocks (weights in L2), every row and strip of
 * the task. */
static void dense_task(void *a, int64_t t0, int64_t t1, int thread)
{
    (void)thread;
    const blk_conv *q = a;
    const int64_t c = q->c;
    for (int64_t task = t0; task < t1; task++) {
        int64_t img = task / (q->ngroups * q->nrc), rem = task % (q->ngroups * q->nrc);
        int64_t grp = q->rowmajor ? rem % q->ngroups : rem / q->nrc;
        int64_t rc = q->rowmajor ? rem / q->ngroups : rem % q->nrc;
        int64_t ob0 = grp * q->nb;
        int nb = (int)(q->Ob - ob0 < q->nb ? q->Ob - ob0 : q->nb);
        int64_t oh0 = rc * q->rows, oh1 = oh0 + q->rows < q->OH ? oh0 + q->rows : q->OH;
        blk_tile t;
        t.xcb = q->Hp * q->Wp * q->ci;
        t.xrow = q->Wp * q->ci;
        t.wcb = q->KH * q->KW * q->ci * c;
        t.wob = q->Cb * t.wcb;
        t.yob = q->OH * q->OW * c;
        t.KH = q->KH, t.KW = q->KW, t.dh = q->dh, t.dw = q->dw, t.sw = q->sw;
        t.bias = q->bias + ob0 * c;
        t.nb = nb;
        t.act = -1;
        /* the fast tile for this group: the task's kind, or one block at a
         * time with the widest one-block strip */
        int rw = nb == q->nb ? q->rw : q->rw1;
        blk_tile_fn fast = tile_lookup(q->isa, nb == q->nb ? q->kind : q->kind1, q->sw, q->ci);
        for (int64_t cb0 = 0; cb0 < q->Cb; cb0 += q->cbk) {
            t.ncb = q->Cb - cb0 < q->cbk ? q->Cb - cb0 : q->cbk;
            t.first = cb0 == 0;
            t.last = cb0 + t.ncb >= q->Cb;
            for (int64_t oh = oh0; oh < oh1; oh++)
                for (int64_t s0 = 0; s0 < q->OW; s0 += rw) {
                    int64_t w = q->OW - s0 < rw ? q->OW - s0 : rw, ow0 = s0;
                    /* a short last strip is a full one moved left over outputs
                     * already done, when they were done in one chunk: they
                     * are summed again in the same order to the same bits */
                    if (w < rw && fast && q->OW >= rw && t.first && t.last)
                        ow0 = q->OW - rw, w = rw;
                    int64_t yoff = ((img * q->Ob + ob0) * q->OH + oh) * q->OW * c + ow0 * c;
                    t.x = q->x + ((img * q->Cb + cb0) * q->Hp + oh * q->sh) * q->Wp * q->ci + ow0 * q->sw * q->ci;
                    t.w = q->w + ob0 * t.wob + cb0 * t.wcb;
                    t.y = q->y + yoff;
                    t.res = q->res ? q->res + yoff : NULL;
                    t.rw = (int)w;
                    /* relu and relu6 are applied by the vector tiles in registers */
                    int reg = fast && w == rw && (q->act == MGE_OP_RELU || q->act == MGE_OP_RELU6);
                    t.act = reg ? q->act : -1;
                    if (fast && w == rw && nb == q->nb) {
                        fast(&t);
                    } else if (fast && w == rw) {
                        /* a short group: one block at a time */
                        blk_tile one = t;
                        one.nb = 1;
                        for (int j = 0; j < nb; j++) {
                            one.w = t.w + j * t.wob;
                            one.y = t.y + j * t.yob;
                            one.res = t.res ? t.res + j * t.yob : NULL;
                            one.bias = t.bias + j * c;
                            fast(&one);
                        }
                    } else {
                        tile_any(&t, c, q->ci);
                    }
                    if (t.last && (!reg || q->O < (ob0 + nb) * c))
                        blk_epilogue(q, t.y, ob0, nb, w, reg ? -1 : q->act);
                }
        }
    }
}

/* ---------------------------------------------------------------- depthwise
 * One vector per output: each lane is its own channel, no broadcasts, so
 * the input is read in place: taps in the padding are skipped, by row for
 * the whole output row and by column only for the few outputs at the
 * edges (interior outputs [lo, hi) have every column tap inside). */

/* The outputs of a row whose every tap column is inside the input. */
static void dw_interior(const blk_conv *q, int64_t *lo, int64_t *hi)
{
    int64_t l0, h0, l1, h1;
    cpu_valid_range(q->OW, q->W, q->sw, q->pw, 0, &l0, &h0);
    cpu_valid_range(q->OW, q->W, q->sw, q->pw, (q->KW - 1) * q->dw, &l1, &h1);
    *lo = l0 > l1 ? l0 : l1;
    *hi = h0 < h1 ? h0 : h1;
    if (*hi < *lo)
        *hi = *lo;
}

/* One output (lanes [0, c)) with bounds checks on every tap. */
static inline __attribute__((always_inline)) void dw_one(const blk_conv *q, const float *xp, const float *w,
                                                         const float *b, const float *r, float *y, int64_t oh,
                                                         int64_t ow)
{
    const int64_t c = q->c;
    float acc[64];
    for (int64_t l = 0; l < c; l++)
        acc[l] = b[l];
    for (int64_t kh = 0; kh < q->KH; kh++) {
        int64_t ih = oh * q->sh - q->ph + kh * q->dh;
        if (ih < 0 || ih >= q->H)
            continue;
        for (int64_t kw = 0; kw < q->KW; kw++) {
            int64_t iw = ow * q->sw - q->pw + kw * q->dw;
            if (iw < 0 || iw >= q->W)
                continue;
            const float *xs = xp + (ih * q->W + iw) * c, *ws = w + (kh * q->KW + kw) * c;
            for (int64_t l = 0; l < c; l++)
                acc[l] += xs[l] * ws[l];
        }
    }
    if (r)
        for (int64_t l = 0; l < c; l++)
            acc[l] += r[ow * c + l];
    for (int64_t l = 0; l < c; l++)
        y[ow * c + l] = acc[l];
}

CPU_MULTI(dw_rows, (const blk_conv *q, int64_t t0, int64_t t1), (q, t0, t1), {
    const int64_t c = q->c, OW = q->OW;
    int64_t lo, hi;
    dw_interior(q, &lo, &hi);
    for (int64_t task = t0; task < t1; task++) {
        int64_t row = DW_ROW(q, task), plane = DW_PLANE(q, task);   /* plane: image * Ob + block */
        if (row >= q->OH)
            continue;
        int64_t ob = plane % q->Ob;
        const float *xp = q->x + plane * q->H * q->W * c;
        const float *w = q->w + ob * q->KH * q->KW * c, *b = q->bias + ob * c;
        float *y = q->y + (plane * q->OH + row) * OW * c;
        const float *r = q->res ? q->res + (plane * q->OH + row) * OW * c : NULL;
        for (int64_t ow = 0; ow < OW; ow++)
            dw_one(q, xp, w, b, r, y, row, ow);
        blk_epilogue(q, y, ob, 1, OW, q->act);
    }
})

#if BLK_VEC
/* The vector depthwise rows, stamped per lane count L (vector type VT,
 * target ATTR): K = 8 (then 4) interior outputs per step in registers
 * (8 accumulators + weight + input fit AVX2's 16 registers too), the
 * rest one vector at a time with column checks. Each output's taps are
 * summed in the same order whatever the split into tasks. */
#define DW_ROWS(L, VT, ATTR)                                                                                   \
    /* relu and relu6 in registers, as the dense tiles apply them */                                          \
    static inline __attribute__((always_inline)) ATTR VT dw_act##L(VT v, int act)                             \
    {                                                                                                          \
        if (act != MGE_OP_RELU && act != MGE_OP_RELU6)                                                         \
            return v;                                                                                          \
        return (VT)cpu_relu##L(BLK_M##L(v), act == MGE_OP_RELU6);                                              \
    }                                                                                                          \
    /* K outputs from ow: the residual, the activation, the store */                                          \
    static inline __attribute__((always_inline)) ATTR void dw_store##L(const blk_conv *q, VT *acc,            \
                                                                       const float *r, float *y, int64_t ow,  \
                                                                       const int K)                           \
    {                                                                                                          \
        const int act = q->act; /* read once: the stores may alias *q for all the compiler knows */           \
        _Pragma("GCC unroll 8") for (int k = 0; k < K; k++)                                                    \
        {                                                                                                      \
            if (r) {                                                                                           \
                VT rv;                                                                                         \
                memcpy(&rv, r + (ow + k) * L, sizeof rv);                                                      \
                acc[k] += rv;                                                                                  \
            }                                                                                                  \
            acc[k] = dw_act##L(acc[k], act);                                                                   \
        }                                                                                                      \
        _Pragma("GCC unroll 8") for (int k = 0; k < K; k++) memcpy(y + (ow + k) * L, &acc[k], sizeof acc[k]);  \
    }                                                                                                          \
    /* One output, tap rows [kh0, kh1), the tap columns inside the input. */                                   \
    static inline __attribute__((always_inline)) ATTR void dw_one##L(const blk_conv *q, const float *xp,      \
                                                                     const float *w, VT bv, const float *r,   \
                                                                     float *y, int64_t oh, int64_t ow,        \
                                                                     int64_t kh0, int64_t kh1)                \
    {                                                                                                          \
        VT acc = bv;                                                                                           \
        /* the taps whose column is inside the input: one range, found once */                               \
        int64_t iw0 = ow * q->sw - q->pw, kw0 = 0, kw1 = q->KW;                                                \
        while (kw0 < kw1 && iw0 + kw0 * q->dw < 0)                                                             \
            kw0++;                                                                                             \
        while (kw1 > kw0 && iw0 + (kw1 - 1) * q->dw >= q->W)                                                   \
            kw1--;                                                                                             \
        for (int64_t kh = kh0; kh < kh1; kh++) {                                                               \
            const float *xr = xp + ((oh * q->sh - q->ph + kh * q->dh) * q->W + iw0) * L;                      \
            for (int64_t kw = kw0; kw < kw1; kw++) {                                                           \
                VT xv, wv;                                                                                     \
                memcpy(&xv, xr + kw * q->dw * L, sizeof xv);                                                   \
                memcpy(&wv, w + (kh * q->KW + kw) * L, sizeof wv);                                             \
                acc += xv * wv;                                                                                \
            }                                                                                                  \
        }                                                                                                      \
        if (r) {                                                                                               \
            VT rv;                                                                                             \
            memcpy(&rv, r + ow * L, sizeof rv);                                                                \
            acc += rv;                                                                                         \
        }                                                                                                      \
        acc = dw_act##L(acc, q->act);                                                                          \
        memcpy(y + ow * L, &acc, sizeof acc);                                                                  \
    }                                                                                                          \
    /* K (8 or 4, a constant at each call so the loops unroll) interior                                      \
     * outputs from ow, all columns inside the input. */                                                      \
    static inline __attribute__((always_inline)) ATTR void dw_strip##L(                                       \
        const blk_conv *q, const float *xp, const float *w, VT bv, const float *r, float *y, int64_t oh,      \
        int64_t ow, int64_t kh0, int64_t kh1, const int K)                                                    \
    {                                                                                                          \
        const int64_t KW = q->KW, W = q->W, sx = q->sw * L;                                                    \
        VT acc[8];                                                                                             \
        _Pragma("GCC unroll 8") for (int k = 0; k < K; k++) acc[k] = bv;                                       \
        for (int64_t kh = kh0; kh < kh1; kh++) {                                                               \
            const float *xr = xp + ((oh * q->sh - q->ph + kh * q->dh) * W + ow * q->sw - q->pw) * L;           \
            for (int64_t kw = 0; kw < KW; kw++) {                                                              \
                const float *xs = xr + kw * q->dw * L;                                                         \
                VT wv;                                                                                         \
                memcpy(&wv, w + (kh * KW + kw) * L, sizeof wv);                                                \
                _Pragma("GCC unroll 8") for (int k = 0; k < K; k++)                                            \
                {                                                                                              \
                    VT xv;                                                                                     \
                    memcpy(&xv, xs + k * sx, sizeof xv);                                                       \
                    acc[k] += xv * wv;                                                                         \
                }                                                                                              \
            }                                                                                                  \
        }                                                                                                      \
        dw_store##L(q, acc, r, y, ow, K);                                                                      \
    }                                                                                                          \
    /* dw_strip for 3 taps per row at stride S (1 or 2) without dilation:                                   \
     * each input vector of a tap row is loaded once for all K outputs (at                                   \
     * stride 1, 10 loads where dw_strip makes 24); the same FMAs in the                                      \
     * same order per output, so the same bits. */                                                           \
    static inline __attribute__((always_inline)) ATTR void dw_strip3##L(                                      \
        const blk_conv *q, const float *xp, const float *w, VT bv, const float *r, float *y, int64_t oh,      \
        int64_t ow, int64_t kh0, int64_t kh1, const int K, const int S)                                       \
    {                                                                                                          \
        const int64_t W = q->W;                                                                                \
        VT acc[8];                                                                                             \
        _Pragma("GCC unroll 8") for (int k = 0; k < K; k++) acc[k] = bv;                                       \
        for (int64_t kh = kh0; kh < kh1; kh++) {                                                               \
            const float *xr = xp + ((oh * q->sh - q->ph + kh * q->dh) * W + ow * S - q->pw) * L;               \
            VT xv[17], w0, w1, w2;                                                                             \
            _Pragma("GCC unroll 17") for (int j = 0; j < (K - 1) * S + 3; j++)                                 \
                memcpy(&xv[j], xr + j * L, sizeof xv[j]);                                                      \
            memcpy(&w0, w + (kh * 3) * L, sizeof w0);                                                          \
            memcpy(&w1, w + (kh * 3 + 1) * L, sizeof w1);                                                      \
            memcpy(&w2, w + (kh * 3 + 2) * L, sizeof w2);                                                      \
            _Pragma("GCC unroll 8") for (int k = 0; k < K; k++)                                                \
            {                                                                                                  \
                acc[k] += xv[k * S] * w0;                                                                      \
                acc[k] += xv[k * S + 1] * w1;                                                                  \
                acc[k] += xv[k * S + 2] * w2;                                                                  \
            }                                                                                                  \
        }                                                                                                      \
        dw_store##L(q, acc, r, y, ow, K);                                                                      \
    }                                                                                                          \
    /* The interior outputs [ow, hi) in 3-tap strips of 8, then 4, 2, 1; returns hi. */                      \
    static inline __attribute__((always_inline)) ATTR int64_t dw_run3##L(                                     \
        const blk_conv *q, const float *xp, const float *w, VT bv, const float *r, float *y, int64_t oh,      \
        int64_t ow, int64_t hi, int64_t kh0, int64_t kh1, const int S)                                        \
    {                                                                                                          \
        for (; ow + 8 <= hi; ow += 8)                                                                          \
            dw_strip3##L(q, xp, w, bv, r, y, oh, ow, kh0, kh1, 8, S);                                          \
        if (ow + 4 <= hi) {                                                                                    \
            dw_strip3##L(q, xp, w, bv, r, y, oh, ow, kh0, kh1, 4, S);                                          \
            ow += 4;                                                                                           \
        }                                                                                                      \
        if (ow + 2 <= hi) {                                                                                    \
            dw_strip3##L(q, xp, w, bv, r, y, oh, ow, kh0, kh1, 2, S);                                          \
            ow += 2;                                                                                           \
        }                                                                                                      \
        if (ow < hi) {                                                                                         \
            dw_strip3##L(q, xp, w, bv, r, y, oh, ow, kh0, kh1, 1, S);                                          \
            ow++;                                                                                              \
        }                                                                                                      \
        return ow;                                                                                             \
    }                                                                                                          \
    static ATTR void dw_rows##L(const blk_conv *q, int64_t t0, int64_t t1)                                     \
    {                                                                                                          \
        const int64_t OW = q->OW, KH = q->KH, KW = q->KW, W = q->W;                                            \
        int64_t lo, hi;                                                                                        \
        dw_interior(q, &lo, &hi);                                                                              \
        for (int64_t task = t0; task < t1; task++) {                                                           \
            int64_t row = DW_ROW(q, task), plane = DW_PLANE(q, task);                                          \
            if (row >= q->OH)                                                                                  \
                continue;                                                                                      \
            int64_t ob = plane % q->Ob;                                                                        \
            const float *xp = q->x + plane * q->H * W * L;                                                     \
            const float *w = q->w + ob * KH * KW * L, *b = q->bias + ob * L;                                   \
            float *y = q->y + (plane * q->OH + row) * OW * L;                                                  \
            const float *r = q->res ? q->res + (plane * q->OH + row) * OW * L : NULL;                          \
            /* the tap rows inside the input */                                                               \
            int64_t kh0 = 0, kh1 = KH;                                                                         \
            while (kh0 < KH && row * q->sh - q->ph + kh0 * q->dh < 0)                                          \
                kh0++;                                                                                         \
            while (kh1 > kh0 && row * q->sh - q->ph + (kh1 - 1) * q->dh >= q->H)                               \
                kh1--;                                                                                         \
            VT bv;                                                                                             \
            memcpy(&bv, b, sizeof bv);                                                                         \
            for (int64_t ow = 0; ow < lo; ow++)                                                                \
                dw_one##L(q, xp, w, bv, r, y, row, ow, kh0, kh1);                                              \
            int64_t ow = lo;                                                                                   \
            if (KW == 3 && q->dw == 1 && q->sw == 1)                                                           \
                ow = dw_run3##L(q, xp, w, bv, r, y, row, ow, hi, kh0, kh1, 1);                                 \
            else if (KW == 3 && q->dw == 1 && q->sw == 2)                                                      \
                ow = dw_run3##L(q, xp, w, bv, r, y, row, ow, hi, kh0, kh1, 2);                                 \
            for (; ow + 8 <= hi; ow += 8)                                                                      \
                dw_strip##L(q, xp, w, bv, r, y, row, ow, kh0, kh1, 8);                                         \
            for (; ow + 4 <= hi; ow += 4)                                                                      \
                dw_strip##L(q, xp, w, bv, r, y, row, ow, kh0, kh1, 4);                                         \
            for (; ow < OW; ow++)                                                                              \
                dw_one##L(q, xp, w, bv, r, y, row, ow, kh0, kh1);                                              \
            if ((q->act != MGE_OP_RELU && q->act != MGE_OP_RELU6) || q->O < (ob + 1) * L)                       \
                blk_epilogue(q, y, ob, 1, OW, q->act == MGE_OP_RELU || q->act == MGE_OP_RELU6 ? -1 : q->act); \
        }                                                                                                      \
    }

DW_ROWS(16, blk_v16, BLK_AVX512)
DW_ROWS(8, blk_v8, CPU_AVX2)
#endif

static void dw_task(void *a, int64_t t0, int64_t t1, int thread)
{
    (void)thread;
    const blk_conv *q = a;
#if BLK_VEC
    if (q->isa == 2) {
        dw_rows16(q, t0, t1);
        return;
    }
    if (q->isa == 1) {
        dw_rows8(q, t0, t1);
        return;
    }
#endif
    dw_rows(q, t0, t1);
}

/* ---------------------------------------------------------------- padding */

typedef struct pad_job {
    const blk_conv *q;
    const float *src;
    float *dst;
} pad_job;

/* Rows of the padded input: (image*block, padded row). */
static void pad_task(void *a, int64_t r0, int64_t r1, int thread)
{
    (void)thread;
    const pad_job *j = a;
    const blk_conv *q = j->q;
    const int64_t c = q->ci, rowf = q->Wp * c;
    for (int64_t r = r0; r < r1; r++) {
        int64_t plane = r / q->Hp, hp = r % q->Hp, h = hp - q->ph;
        float *d = j->dst + r * rowf;
        if (h < 0 || h >= q->H) {
            memset(d, 0, sizeof(float) * (size_t)rowf);
            continue;
        }
        memset(d, 0, sizeof(float) * (size_t)(q->pw * c));
        memcpy(d + q->pw * c, j->src + (plane * q->H + h) * q->W * c, sizeof(float) * (size_t)(q->W * c));
        memset(d + (q->pw + q->W) * c, 0, sizeof(float) * (size_t)((q->Wp - q->pw - q->W) * c));
    }
}

/* ---------------------------------------------------------------- conv2d_nchwc */

/* Floats of the zero-bordered input copy (dense convs with padding). */
static int64_t pad_floats(const mge_tensor *x, const mge_node *n)
{
    int64_t ph = mge_node_ints(n, MGE_KEY_pad, 0, 0), pw = mge_node_ints(n, MGE_KEY_pad, 1, 0);
    if ((!ph && !pw) || mge_node_int(n, MGE_KEY_groups, 1) != 1)
        return 0;
    return x->dims[0] * x->dims[1] * (x->dims[2] + 2 * ph) * (x->dims[3] + 2 * pw) * x->dims[4];
}

static size_t conv_ws(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, int threads)
{
    if (in[0]->ndim != 5 || out[0]->ndim != 5)
        return cpu_ref_ws(n, in, out, threads);
    if (mge_cpu_conv_nchwc_bf16_level(n, in[0], in[1], out[0]) != MGE_BF16_NONE)
        return mge_cpu_conv_nchwc_bf16_ws(n, in, out, threads);
    return sizeof(float) * (size_t)(pad_floats(in[0], n) + out[0]->dims[1] * out[0]->dims[4] + 16);
}

/* The kind of at most maxnb blocks whose strips cover the row with the
 * least waste (ties: the first, with more blocks). */
static int pick_kind(const blk_conv *q, int maxnb)
{
    const int(*kinds)[2] = q->isa == 1 ? kinds8 : kinds16;
    int n = q->isa == 1 ? (int)(sizeof kinds8 / sizeof kinds8[0]) : (int)(sizeof kinds16 / sizeof kinds16[0]);
    int best = -1;
    int64_t bestw = 0;
    for (int k = 0; k < n; k++) {
        int nb = kinds[k][0], rw = kinds[k][1];
        if (nb > maxnb)
            continue;
        int64_t padded = (q->OW + rw - 1) / rw * rw;
        if (best < 0 || padded < bestw) {
            best = k;
            bestw = padded;
        }
    }
    return best;
}

/* The tile kind for a dense conv: the task's (at most 4 blocks), and the
 * one-block kind for a group of fewer blocks. */
static void pick_tile(blk_conv *q)
{
    const int(*kinds)[2] = q->isa == 1 ? kinds8 : kinds16;
    q->kind = pick_kind(q, q->Ob < 4 ? (int)q->Ob : 4);
    q->kind1 = pick_kind(q, 1);
    q->nb = kinds[q->kind][0];
    q->rw = kinds[q->kind][1];
    q->rw1 = kinds[q->kind1][1];
}

static mge_status conv2d_nchwc(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                               mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *x = in[0], *w = in[1];
    mge_tensor *y = out[0];
    int bias = (int)mge_node_int(n, MGE_KEY_bias, 1), res = (int)mge_node_int(n, MGE_KEY_residual, 0);
    int64_t G = mge_node_int(n, MGE_KEY_groups, 1);
    if (x->dtype != MGE_F32 || x->ndim != 5 || y->ndim != 5 || n->nin != 2 + bias + res || x->dims[4] > 64 ||
        y->dims[4] > 64 || (G != 1 && (w->ndim != 4 || y->dims[4] != x->dims[4])) || (G == 1 && w->ndim != 6))
        return cpu_fallback(ctx, n, in, out, err);
    int bf16 = mge_cpu_conv_nchwc_bf16_level(n, x, w, y);
    if (bf16 != MGE_BF16_NONE)
        return mge_cpu_conv_nchwc_bf16(ctx, n, in, out, bf16, err);
    blk_conv q;
    memset(&q, 0, sizeof q);
    q.N = x->dims[0], q.Cb = x->dims[1], q.H = x->dims[2], q.W = x->dims[3], q.ci = x->dims[4], q.c = y->dims[4];
    q.O = mge_node_int(n, MGE_KEY_out, 0), q.Ob = y->dims[1], q.OH = y->dims[2], q.OW = y->dims[3];
    q.KH = mge_node_ints(n, MGE_KEY_kernel, 0, 1), q.KW = mge_node_ints(n, MGE_KEY_kernel, 1, 1);
    q.sh = mge_node_ints(n, MGE_KEY_stride, 0, 1), q.sw = mge_node_ints(n, MGE_KEY_stride, 1, 1);
    q.ph = mge_node_ints(n, MGE_KEY_pad, 0, 0), q.pw = mge_node_ints(n, MGE_KEY_pad, 1, 0);
    q.dh = mge_node_ints(n, MGE_KEY_dilation, 0, 1), q.dw = mge_node_ints(n, MGE_KEY_dilation, 1, 1);
    q.Hp = q.H + 2 * q.ph, q.Wp = q.W + 2 * q.pw;
    q.dw_conv = G != 1;
    q.act = (int)mge_node_ints(n, MGE_KEY_act, 0, -1);
    q.alpha = (float)mge_node_float(n, MGE_KEY_alpha, 0.01);
    q.w = w->data;
    q.res = res ? in[2 + bias]->data : NULL;
    q.y = y->data;
    q.isa = q.c == 16 && blk_isa_avx512() ? 2 : q.c == 8 && cpu_isa_avx2() ? 1 : 0;

    float *ws = ctx->ws;
    int64_t padn = pad_floats(x, n), nbias = q.Ob * q.c;
    if (!ws || ctx->ws_size < sizeof(float) * (size_t)(padn + nbias))
        return mge_error_set(err, MGE_ERR_INVALID, "conv2d_nchwc: workspace too small");
    float *bp = ws + padn;
    memset(bp, 0, sizeof(float) * (size_t)nbias);
    if (bias)
        memcpy(bp, in[2]->data, sizeof(float) * (size_t)(q.O < nbias ? q.O : nbias));
    q.bias = bp;
    if (padn) {
        pad_job pj = {&q, x->data, ws};
        cpu_parallel(ctx, q.N * q.Cb * q.Hp, 1 + CPU_GRAIN / (q.Wp * q.ci + 1), pad_task, &pj);
        q.x = ws;
    } else {
        q.x = x->data;
    }
    const int threads = cpu_threads(ctx);
    if (q.dw_conv) {
        q.dwb = (q.OH + threads - 1) / threads;
        q.dwnb = (q.OH + q.dwb - 1) / q.dwb;
        cpu_parallel_aff(ctx, q.N * q.dwnb * q.Ob * q.dwb, 1 + CPU_GRAIN / (q.OW * q.c * q.KH * q.KW + 1), dw_task,
                         &q);
        return MGE_OK;
    }
    pick_tile(&q);
    q.ngroups = (q.Ob + q.nb - 1) / q.nb;
    /* enough tasks for the pool, but rows stay together so each task reuses
     * its chunk of weights over many outputs; any split gives the same sums */
    int64_t want = 16, base = q.N * q.ngroups;
    q.nrc = base >= want ? 1 : (want + base - 1) / base;
    if (q.nrc > q.OH)
        q.nrc = q.OH;
    q.rows = (q.OH + q.nrc - 1) / q.nrc;
    q.nrc = (q.OH + q.rows - 1) / q.rows;
    /* weights of one chunk: nb blocks x cbk blocks x taps x c x c floats, ~256 KiB */
    int64_t per_cb = (int64_t)q.nb * q.KH * q.KW * q.ci * q.c * 4;
    q.cbk = (256 * 1024) / (per_cb > 0 ? per_cb : 1);
    if (q.cbk < 1)
        q.cbk = 1;
    /* Tasks in order (image, row chunk, group) when all the weights fit in
     * L2 with room to spare: each thread's share is then a band of rows
     * over every output block, as in the layers around it, so it reads
     * mostly what it wrote (mobilenet_v2's projections ran 1.3-1.6x faster
     * on 2 threads than on 1, the same rows claimed by either thread).
     * Bigger weights keep (image, group, row chunk): read once per group,
     * not once per row chunk (resnet18's 9 MiB layer4 convs: 7% slower on
     * one thread in row order); one thread keeps the group order too. The
     * tasks are few and heavy: shares of about n / (4 x threads) tasks
     * balance them (chunks of 2-3 had left 7 chunks for 2 threads, one
     * thread idle a seventh of the node). */
    q.rowmajor = threads > 1 && (int64_t)sizeof(float) * q.Ob * q.Cb * q.KH * q.KW * q.ci * q.c <= 512 * 1024;
    cpu_parallel_aff(ctx, q.N * q.ngroups * q.nrc, 1, dense_task, &q);
    return MGE_OK;
}

void mge_cpu_register_blocked(mge_backend *b)
{
    b->k[MGE_OP_TO_NCHWC][MGE_F32].run = to_nchwc;
    b->k[MGE_OP_FROM_NCHWC][MGE_F32].run = from_nchwc;
    b->k[MGE_OP_CONV2D_NCHWC][MGE_F32].run = conv2d_nchwc;
    b->k[MGE_OP_CONV2D_NCHWC][MGE_F32].ws = conv_ws;
    b->k[MGE_OP_CONV2D_NCHWC][MGE_F32].prepare = mge_cpu_conv_nchwc_bf16_prepare;
    b->k[MGE_OP_CONV2D_NCHWC][MGE_F32].release = mge_cpu_conv_nchwc_bf16_release;
    mge_cpu_bf16();   /* decided (and AMX permitted) before pool threads run tile code */
    b->k[MGE_OP_MAXPOOL2D_NCHWC][MGE_F32].run = maxpool_nchwc;
}
