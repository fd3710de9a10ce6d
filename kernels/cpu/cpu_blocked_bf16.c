/* cpu_blocked_bf16.c — conv2d_nchwc with precision=bf16 (groups 1, input
 * blocks of 16 or a plain stem, output blocks of 16): f32 in and out, input and weights rounded to
 * bf16 (nearest even), products summed in f32; bias, residual and the
 * activation in f32 as cpu_blocked.c's f32 kernel applies them.
 *
 * Layouts shared by both levels:
 *  - the input, converted once per call into a zero-bordered bf16 copy
 *    [N][C32][Hp][Wp][32]: two NCHW16c blocks interleaved so a pixel holds
 *    32 consecutive channels (64 bytes: one AMX A-tile row; 16 channel
 *    pairs for AVX512-BF16 broadcasts);
 *  - the weights, packed per (16-oc block, 32-ic block, tap) into 1 KiB in
 *    the VNNI pair layout [16 ic pairs][16 oc][2] (an AMX B tile, and 16
 *    vdpbf16ps weight rows). Packed once by prepare for inference
 *    executors, else per call into the workspace.
 *
 * A plain NCHW x (block 1, the network's stem) whose channels times the
 * kernel width fit in 32 (and whose K is not tiny) is copied with a row's taps as channels: pixel
 * (h, w) holds x[c][h][w + kw*dw] at channel kw*C + c, so a 7x7 stem on 3
 * channels takes 7 K steps of 21 real channels, not 49 of 3; its weights
 * pack the same way, one B tile per (block, kernel row).
 *
 * Outputs are computed in chunks of 32 "virtual" pixels x 2 output blocks.
 * At stride 1 a chunk runs over whole padded rows (pitch Wp): pixel v reads
 * input pixel v + tap offset at a constant stride, so 7x7 or 14x14 planes
 * fill the 16-row tiles across rows; the Wp - OW columns per row past the
 * real outputs are computed and dropped. At other strides a chunk stays in
 * one output row (input stride s pixels). The chunk's sums go to a stack
 * scratch, and the epilogue adds bias and residual, applies the activation
 * and stores the valid pixels. Rows past the chunk's end read the zeroed
 * slack after the input copy (or the next plane) and are dropped.
 *
 * Each output element is one sum over (32-ic block, tap, pair) in that
 * order whatever chunk, tile row or task it falls in, so results are
 * bit-identical for any thread count; AMX and AVX512-BF16 may differ from
 * each other in the last bits (their internal rounding of the pair sums). */
#include "cpu_act.h"
#include "cpu_relu.h"

#include <stdlib.h>
#include <string.h>

#if CPU_X86 && defined(__GNUC__) && !defined(__clang__)
#define BCV_ON 1
#include <immintrin.h>
#define BCV_AVX __attribute__((target("avx512f,avx512bf16,avx512bw,avx512vl"), optimize(CPU_OPTS)))
#define BCV_AMX __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bf16,avx512bw,avx512vl"), optimize(CPU_OPTS)))
#else
#define BCV_ON 0
#endif

typedef struct bconv {
    int64_t N, Cb, C32, H, W, O, Ob, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw, Hp, Wp;
    int flat;                 /* chunks over whole padded rows (stride 1) */
    int stem;                 /* a plain NCHW x (block 1): the taps of a row are channels */
    int64_t KW0, dw0;         /* the node's kernel width and dilation (KW, dw are 1 for a stem) */
    int act;                  /* -1: none */
    float alpha;
    int level;
    const float *x, *res, *bias;   /* bias padded to Ob*16 */
    float *y;
    uint16_t *xb;             /* [N][C32][Hp][Wp][32] */
    const uint16_t *wb;       /* [Ob][C32][KH][KW][16][16][2] */
    int64_t ngroups, rows, nrc;
} bconv;

/* The bf16 level this node runs at, or MGE_BF16_NONE: f32's path. */
int mge_cpu_conv_nchwc_bf16_level(const mge_node *n, const mge_tensor *x, const mge_tensor *w, const mge_tensor *y)
{
    if (!BCV_ON || mge_node_int(n, MGE_KEY_precision, 0) != 1 || mge_node_int(n, MGE_KEY_groups, 1) != 1)
        return MGE_BF16_NONE;
    /* a plain x (block 1) when its channels times the kernel width fit one
     * pixel's 32, and the sums are long enough to pay for the copy (a 3x3
     * stem on 3 channels, K = 27, ran slower than in f32; 7x7, K = 147, faster) */
    const int64_t C = x ? x->dims[1] : w ? w->dims[1] : 0, KW = mge_node_ints(n, MGE_KEY_kernel, 1, 1);
    const int stem_ok = C * KW <= 32 && C * KW * mge_node_ints(n, MGE_KEY_kernel, 0, 1) >= 96;
    if ((x && (x->ndim != 5 || (x->dims[4] != 16 && (x->dims[4] != 1 || !stem_ok)))) ||
        (y && (y->ndim != 5 || y->dims[4] != 16)) ||
        (w && (w->ndim != 6 || (w->dims[4] != 16 && (w->dims[4] != 1 || !stem_ok)) || w->dims[5] != 16)))
        return MGE_BF16_NONE;
    return mge_cpu_bf16();
}

static void geom(bconv *q, const mge_node *n, const mge_tensor *x, const mge_tensor *y)
{
    memset(q, 0, sizeof *q);
    q->N = x->dims[0], q->Cb = x->dims[1], q->H = x->dims[2], q->W = x->dims[3];
    q->C32 = (q->Cb + 1) / 2;
    q->O = mge_node_int(n, MGE_KEY_out, 0), q->Ob = y ? y->dims[1] : 0;
    q->OH = y ? y->dims[2] : 0, q->OW = y ? y->dims[3] : 0;
    q->KH = mge_node_ints(n, MGE_KEY_kernel, 0, 1), q->KW = mge_node_ints(n, MGE_KEY_kernel, 1, 1);
    q->sh = mge_node_ints(n, MGE_KEY_stride, 0, 1), q->sw = mge_node_ints(n, MGE_KEY_stride, 1, 1);
    q->ph = mge_node_ints(n, MGE_KEY_pad, 0, 0), q->pw = mge_node_ints(n, MGE_KEY_pad, 1, 0);
    q->dh = mge_node_ints(n, MGE_KEY_dilation, 0, 1), q->dw = mge_node_ints(n, MGE_KEY_dilation, 1, 1);
    q->Hp = q->H + 2 * q->ph, q->Wp = q->W + 2 * q->pw;
    q->KW0 = q->KW, q->dw0 = q->dw;
    if (x->dims[4] == 1) {   /* pixel (h, w) of the copy holds x[c][h][w + kw*dw] at channel kw*C + c */
        q->stem = 1;
        q->C32 = 1;
        q->KW = 1, q->dw = 1;
    }
}

/* bf16 elements of the input copy, with the slack a chunk may read past it:
 * at most 31 pixels at the chunk's stride beyond the last plane. */
static int64_t xb_elems(const bconv *q)
{
    int64_t s = q->sw > 1 ? q->sw : 1;
    return q->N * q->C32 * q->Hp * q->Wp * 32 + (32 * s + 2) * 32;
}

static int64_t wb_elems(int64_t Ob, int64_t C32, int64_t KH, int64_t KW)
{
    return Ob * C32 * KH * KW * 512;
}

static size_t up64(size_t b)
{
    return (b + 63) & ~(size_t)63;
}

size_t mge_cpu_conv_nchwc_bf16_ws(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, int threads)
{
    (void)threads;
    bconv q;
    geom(&q, n, in[0], out[0]);
    return 64 + up64(2 * (size_t)xb_elems(&q)) + up64(2 * (size_t)wb_elems(q.Ob, q.C32, q.KH, q.KW)) +
           up64(sizeof(float) * (size_t)(q.Ob * 16));
}

/* The weight [Ob][Cb][KH][KW][16 in][16 out] in pairs of input channels. */
static void pack_w(uint16_t *restrict d, const float *restrict w, int64_t Ob, int64_t Cb, int64_t KH, int64_t KW,
                   int64_t ci)
{
    if (ci == 1) {   /* a stem [Ob][C][KH][KW][1][16]: B tile per (block, kh), ic = kw*C + c */
        for (int64_t ob = 0; ob < Ob; ob++)
            for (int64_t kh = 0; kh < KH; kh++) {
                uint16_t *dt = d + (ob * KH + kh) * 512;
                for (int64_t ic = 0; ic < 32; ic++) {
                    int64_t kw = ic / Cb, c = ic % Cb;
                    const float *src = w + (((ob * Cb + c) * KH + kh) * KW + kw) * 16;
                    for (int64_t o = 0; o < 16; o++)
                        dt[(ic / 2) * 32 + o * 2 + ic % 2] = kw < KW ? mge_f32_to_bf16(src[o]) : 0;
                }
            }
        return;
    }
    const int64_t C32 = (Cb + 1) / 2, T = KH * KW;
    for (int64_t ob = 0; ob < Ob; ob++)
        for (int64_t c = 0; c < C32; c++)
            for (int64_t t = 0; t < T; t++) {
                uint16_t *dt = d + ((ob * C32 + c) * T + t) * 512;
                for (int64_t p = 0; p < 16; p++)
                    for (int64_t e = 0; e < 2; e++) {
                        int64_t ic = 2 * p + e, cb = 2 * c + ic / 16, li = ic % 16;
                        const float *src = w + (((ob * Cb + cb) * T + t) * 16 + li) * 16;
                        for (int64_t o = 0; o < 16; o++)
                            dt[p * 32 + o * 2 + e] = cb < Cb ? mge_f32_to_bf16(src[o]) : 0;
                    }
            }
}

typedef struct bprep {
    uint16_t *wb;
} bprep;

mge_status mge_cpu_conv_nchwc_bf16_prepare(const mge_node *n, mge_tensor *const *in, void **state, mge_error *err)
{
    *state = NULL;
    const mge_tensor *w = in[1];
    if (!w || !w->data || mge_cpu_conv_nchwc_bf16_level(n, in[0], w, NULL) == MGE_BF16_NONE)
        return MGE_OK;
    const int64_t Ob = w->dims[0], Cb = w->dims[1], KH = w->dims[2], KW = w->dims[3];
    bprep *p = malloc(sizeof *p);
    const int64_t ci = w->dims[4];
    /* C11's aligned_alloc (kernels take no allocator from the core): whole 1 KiB tiles */
    size_t bytes = 2 * (size_t)wb_elems(Ob, ci == 1 ? 1 : (Cb + 1) / 2, KH, ci == 1 ? 1 : KW);
    uint16_t *wb = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p || !wb) {
        free(p);
        free(wb);
        return mge_error_set(err, MGE_ERR_NOMEM, "conv2d_nchwc: out of memory packing bf16 weights");
    }
    memset(wb, 0, bytes);
    pack_w(wb, w->data, Ob, Cb, KH, KW, ci);
    p->wb = wb;
    *state = p;
    return MGE_OK;
}

void mge_cpu_conv_nchwc_bf16_release(void *state)
{
    bprep *p = state;
    if (!p)
        return;
    free(p->wb);
    free(p);
}

#if BCV_ON

/* ---------------------------------------------------------------- input copy */

/* Rows (image*C32 + c32, padded row) of the bf16 copy. */
static BCV_AVX void cvt_task(void *a, int64_t r0, int64_t r1, int thread)
{
    (void)thread;
    const bconv *q = a;
    const int64_t Wp = q->Wp, HW = q->H * q->W;
    for (int64_t r = r0; r < r1; r++) {
        int64_t plane = r / q->Hp, hp = r % q->Hp, h = hp - q->ph;
        int64_t img = plane / q->C32, c = plane % q->C32;
        uint16_t *d = q->xb + r * Wp * 32;
        if (h < 0 || h >= q->H) {
            memset(d, 0, sizeof(uint16_t) * 32 * (size_t)Wp);
            continue;
        }
        memset(d, 0, sizeof(uint16_t) * 32 * (size_t)q->pw);
        memset(d + (q->pw + q->W) * 32, 0, sizeof(uint16_t) * 32 * (size_t)(Wp - q->pw - q->W));
        const float *lo = q->x + ((img * q->Cb + 2 * c) * HW + h * q->W) * 16;
        const float *hi = 2 * c + 1 < q->Cb ? lo + HW * 16 : NULL;
        d += q->pw * 32;
        for (int64_t w = 0; w < q->W; w++) {
            __m512 l = _mm512_loadu_ps(lo + w * 16);
            __m512 h2 = hi ? _mm512_loadu_ps(hi + w * 16) : _mm512_setzero_ps();
            _mm512_storeu_si512((void *)(d + w * 32), (__m512i)_mm512_cvtne2ps_pbh(h2, l));
        }
    }
}

/* mge_f32_to_bf16 inline (nearest even, NaN kept quiet) */
static inline uint16_t to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
}

/* Rows (image, padded row) of a stem's copy: only the columns a chunk
 * reads (multiples of the stride), each its KW0 taps x C channels, picked
 * from the row's channels converted once into a zero-bordered line. */
static BCV_AVX void cvt_stem_task(void *a, int64_t r0, int64_t r1, int thread)
{
    (void)thread;
    const bconv *q = a;
    const int64_t C = q->Cb, H = q->H, W = q->W, L = q->Wp + q->KW0 * q->dw0;
    uint16_t line[8192];
    const int lined = C * L <= (int64_t)(sizeof line / sizeof line[0]);
    for (int64_t r = r0; r < r1; r++) {
        int64_t img = r / q->Hp, h = r % q->Hp - q->ph;
        uint16_t *d = q->xb + r * q->Wp * 32;
        if (h < 0 || h >= H) {
            memset(d, 0, sizeof(uint16_t) * 32 * (size_t)q->Wp);
            continue;
        }
        const float *xr = q->x + (img * C * H + h) * W;
        if (lined) {
            for (int64_t c = 0; c < C; c++) {
                uint16_t *lc = line + c * L;
                for (int64_t j = 0; j < L; j++) {
                    int64_t iw = j - q->pw;
                    lc[j] = iw >= 0 && iw < W ? to_bf16(xr[c * H * W + iw]) : 0;
                }
            }
        }
        /* written in place (a copy of a local pixel stalled on its 21 stores) */
        for (int64_t wp = 0; wp < q->Wp; wp += q->sw) {
            uint16_t *restrict px = d + wp * 32;
            _mm512_storeu_si512((void *)px, _mm512_setzero_si512());
            for (int64_t kw = 0; kw < q->KW0; kw++) {
                int64_t j = wp + kw * q->dw0, iw = j - q->pw;
                if (lined) {
                    for (int64_t c = 0; c < C; c++)
                        px[kw * C + c] = line[c * L + j];
                } else if (iw >= 0 && iw < W) {
                    for (int64_t c = 0; c < C; c++)
                        px[kw * C + c] = to_bf16(xr[c * H * W + iw]);
                }
            }
        }
    }
}

/* ---------------------------------------------------------------- epilogue */

#define KACT_LOOP(EXPR)                   \
    for (int64_t i = 0; i < n; i++) {     \
        float v = y[i];                   \
        y[i] = (EXPR);                    \
    }
static inline __attribute__((always_inline)) void act_any(float *restrict y, int64_t n, int act, float alpha)
{
    kact_par p = kact_par_default(act, alpha);
    KACT_CPU_BEGIN(&p);
    switch (act) {
        KACT_CPU_CASES
    default: break;
    }
}
#undef KACT_LOOP

/* The chunk's sums sc[j][r][16] (nob blocks from ob0, cnt pixels from
 * virtual pixel v0 of row oh, or of the flat plane when oh < 0; none at or
 * past vend) to y, a run of pixels of one output row at a time. */
static BCV_AVX void epilogue(const bconv *q, const float *sc, int64_t img, int64_t ob0, int nob, int64_t oh,
                             int64_t v0, int64_t cnt, int64_t vend)
{
    const int relu = q->act == MGE_OP_RELU || q->act == MGE_OP_RELU6, six = q->act == MGE_OP_RELU6;
    const int other = q->act >= 0 && !relu;
    if (v0 + cnt > vend)
        cnt = vend - v0;
    for (int j = 0; j < nob; j++) {
        const int64_t ob = ob0 + j;
        const __m512 b = _mm512_loadu_ps(q->bias + ob * 16);
        const int64_t plane = (img * q->Ob + ob) * q->OH;
        const int zero = other && q->O < (ob + 1) * 16;
        const __mmask16 keep = zero ? (__mmask16)((1u << (q->O - ob * 16)) - 1) : 0xffff;
        const float *sj = sc + j * 32 * 16;
        for (int64_t r = 0; r < cnt;) {
            int64_t v = v0 + r, row = oh, col = v, len = cnt - r;
            if (oh < 0) {
                row = v / q->Wp, col = v - row * q->Wp;
                if (col >= q->OW) {   /* the padded columns between rows */
                    r += q->Wp - col;
                    continue;
                }
                if (len > q->OW - col)
                    len = q->OW - col;
            }
            const int64_t off = ((plane + row) * q->OW + col) * 16;
            float *restrict yp = q->y + off;
            const float *restrict rp = q->res ? q->res + off : NULL;
            const float *restrict sp = sj + r * 16;
            if (rp) {
                for (int64_t i = 0; i < len; i++) {
                    __m512 a = _mm512_add_ps(_mm512_add_ps(_mm512_loadu_ps(sp + i * 16), b),
                                             _mm512_loadu_ps(rp + i * 16));
                    _mm512_storeu_ps(yp + i * 16, relu ? cpu_relu16(a, six) : a);
                }
            } else {
                for (int64_t i = 0; i < len; i++) {
                    __m512 a = _mm512_add_ps(_mm512_loadu_ps(sp + i * 16), b);
                    _mm512_storeu_ps(yp + i * 16, relu ? cpu_relu16(a, six) : a);
                }
            }
            if (other) {
                act_any(yp, len * 16, q->act, q->alpha);
                if (zero)
                    for (int64_t i = 0; i < len; i++)
                        _mm512_storeu_ps(yp + i * 16, _mm512_maskz_mov_ps(keep, _mm512_loadu_ps(yp + i * 16)));
            }
            r += len;
        }
    }
}

/* ---------------------------------------------------------------- AVX512-BF16 */

/* 8 pixels (from input pixel p, stride s) x NOB blocks over all of K. */
static inline __attribute__((always_inline)) BCV_AVX void avx_px8(const bconv *q, const uint16_t *xp,
                                                                   const uint16_t *wp, int64_t wob, float *sc,
                                                                   const int NOB)
{
    const int64_t s16 = q->sw * 16, HpWp = q->Hp * q->Wp, T = q->KH * q->KW;
    __m512 acc[2][8];
    for (int j = 0; j < NOB; j++)
        for (int r = 0; r < 8; r++)
            acc[j][r] = _mm512_setzero_ps();
    for (int64_t c = 0; c < q->C32; c++)
        for (int64_t kh = 0; kh < q->KH; kh++)
            for (int64_t kw = 0; kw < q->KW; kw++) {
                const int32_t *a = (const int32_t *)(xp + (c * HpWp + kh * q->dh * q->Wp + kw * q->dw) * 32);
                const uint16_t *b = wp + (c * T + kh * q->KW + kw) * 512;
                for (int pr = 0; pr < 16; pr++) {
                    __m512bh w0 = (__m512bh)_mm512_loadu_si512((const void *)(b + pr * 32));
                    __m512bh w1 = NOB > 1 ? (__m512bh)_mm512_loadu_si512((const void *)(b + wob + pr * 32)) : w0;
                    for (int r = 0; r < 8; r++) {
                        __m512bh xv = (__m512bh)_mm512_set1_epi32(a[r * s16 + pr]);
                        acc[0][r] = _mm512_dpbf16_ps(acc[0][r], xv, w0);
                        if (NOB > 1)
                            acc[1][r] = _mm512_dpbf16_ps(acc[1][r], xv, w1);
                    }
                }
            }
    for (int j = 0; j < NOB; j++)
        for (int r = 0; r < 8; r++)
            _mm512_storeu_ps(sc + (j * 32 + r) * 16, acc[j][r]);
}

static BCV_AVX void avx_chunk(const bconv *q, const uint16_t *xp, const uint16_t *wp, int64_t wob, int nob,
                              int64_t cnt, float *sc)
{
    for (int64_t r = 0; r < cnt; r += 8) {
        const uint16_t *x8 = xp + r * q->sw * 32;
        if (nob == 2)
            avx_px8(q, x8, wp, wob, sc + r * 16, 2);
        else
            avx_px8(q, x8, wp, wob, sc + r * 16, 1);
    }
}

/* ---------------------------------------------------------------- AMX */

typedef struct amx_cfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_cfg;

/* tiles 0-3: C (px tile t, block j) at 2t + j; 4, 5: A per px tile; 6, 7:
 * B per block. A constant object: gcc 12's _tile_loadconfig tells the
 * compiler it reads only 8 bytes, so stores to a local config were dropped. */
static const amx_cfg amx_cfg8 = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

static BCV_AMX void amx_config(void)
{
    _tile_loadconfig(&amx_cfg8);
}

static BCV_AMX void amx_chunk(const bconv *q, const uint16_t *xp, const uint16_t *wp, int64_t wob, int nob,
                              int64_t cnt, float *sc)
{
    const int64_t HpWp = q->Hp * q->Wp, T = q->KH * q->KW, astr = q->sw * 64, a1 = 16 * q->sw * 32;
    const int two = cnt > 16;
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int64_t c = 0; c < q->C32; c++)
        for (int64_t kh = 0; kh < q->KH; kh++)
            for (int64_t kw = 0; kw < q->KW; kw++) {
                const uint16_t *a = xp + (c * HpWp + kh * q->dh * q->Wp + kw * q->dw) * 32;
                const uint16_t *b = wp + (c * T + kh * q->KW + kw) * 512;
                _tile_loadd(4, a, astr);
                _tile_loadd(6, b, 64);
                _tile_dpbf16ps(0, 4, 6);
                if (nob > 1) {
                    _tile_loadd(7, b + wob, 64);
                    _tile_dpbf16ps(1, 4, 7);
                }
                if (two) {
                    _tile_loadd(5, a + a1, astr);
                    _tile_dpbf16ps(2, 5, 6);
                    if (nob > 1)
                        _tile_dpbf16ps(3, 5, 7);
                }
            }
    _tile_stored(0, sc, 64);
    _tile_stored(1, sc + 32 * 16, 64);
    _tile_stored(2, sc + 16 * 16, 64);
    _tile_stored(3, sc + 48 * 16, 64);
}

/* ---------------------------------------------------------------- tasks */

/* One task: (image, row chunk, group of 2 output blocks), rows [oh0, oh1). */
static void bconv_task(void *arg, int64_t t0, int64_t t1, int thread)
{
    (void)thread;
    const bconv *q = arg;
    float sc[2 * 32 * 16] __attribute__((aligned(64)));
    const int amx = q->level == MGE_BF16_AMX;
    if (amx)
        amx_config();
    const int64_t T = q->KH * q->KW, wob = q->C32 * T * 512;
    for (int64_t t = t0; t < t1; t++) {
        int64_t g = t % q->ngroups, rc = t / q->ngroups % q->nrc, img = t / q->ngroups / q->nrc;
        int64_t oh0 = rc * q->rows, oh1 = oh0 + q->rows < q->OH ? oh0 + q->rows : q->OH;
        int64_t ob0 = 2 * g;
        int nob = ob0 + 1 < q->Ob ? 2 : 1;
        const uint16_t *wp = q->wb + ob0 * wob;
        const uint16_t *xi = q->xb + img * q->C32 * q->Hp * q->Wp * 32;
        int64_t nseg = q->flat ? 1 : oh1 - oh0;
        for (int64_t sg = 0; sg < nseg; sg++) {
            int64_t oh = q->flat ? -1 : oh0 + sg;
            int64_t vbeg = q->flat ? oh0 * q->Wp : 0, vend = q->flat ? (oh1 - 1) * q->Wp + q->OW : q->OW;
            for (int64_t v0 = vbeg; v0 < vend; v0 += 32) {
                int64_t cnt = vend - v0 < 32 ? vend - v0 : 32;
                const uint16_t *xp = q->flat ? xi + v0 * 32 : xi + (oh * q->sh * q->Wp + v0 * q->sw) * 32;
                if (amx)
                    amx_chunk(q, xp, wp, wob, nob, cnt, sc);
                else
                    avx_chunk(q, xp, wp, wob, nob, cnt, sc);
                epilogue(q, sc, img, ob0, nob, oh, v0, cnt, vend);
            }
        }
    }
}

mge_status mge_cpu_conv_nchwc_bf16(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                   mge_tensor *const *out, int level, mge_error *err)
{
    const mge_tensor *x = in[0], *w = in[1];
    mge_tensor *y = out[0];
    int bias = (int)mge_node_int(n, MGE_KEY_bias, 1), res = (int)mge_node_int(n, MGE_KEY_residual, 0);
    bconv q;
    geom(&q, n, x, y);
    if (w->ndim != 6 || w->dims[0] != q.Ob || w->dims[1] != q.Cb || w->dims[2] != q.KH || w->dims[3] != q.KW0 ||
        w->dims[4] != x->dims[4])
        return mge_error_set(err, MGE_ERR_INVALID, "conv2d_nchwc: bf16: weight does not match the node");
    q.flat = q.sw == 1 && q.sh == 1;
    q.act = (int)mge_node_ints(n, MGE_KEY_act, 0, -1);
    q.alpha = (float)mge_node_float(n, MGE_KEY_alpha, 0.01);
    q.level = level;
    q.x = x->data;
    q.res = res ? in[2 + bias]->data : NULL;
    q.y = y->data;
    size_t need = mge_cpu_conv_nchwc_bf16_ws(n, in, out, cpu_threads(ctx));
    if (!ctx->ws || ctx->ws_size < need)
        return mge_error_set(err, MGE_ERR_INVALID, "conv2d_nchwc: workspace too small");
    char *p = (char *)(((uintptr_t)ctx->ws + 63) & ~(uintptr_t)63);
    q.xb = (uint16_t *)p;
    p += up64(2 * (size_t)xb_elems(&q));
    uint16_t *wpk = (uint16_t *)p;
    p += up64(2 * (size_t)wb_elems(q.Ob, q.C32, q.KH, q.KW));
    float *bp = (float *)p;
    memset(bp, 0, sizeof(float) * (size_t)(q.Ob * 16));
    if (bias)
        memcpy(bp, in[2]->data, sizeof(float) * (size_t)(q.O < q.Ob * 16 ? q.O : q.Ob * 16));
    q.bias = bp;
    const bprep *pr = ctx->prepared;
    if (pr && pr->wb) {
        q.wb = pr->wb;
    } else {
        pack_w(wpk, w->data, q.Ob, q.Cb, q.KH, q.KW0, x->dims[4]);
        q.wb = wpk;
    }
    int64_t planes = q.N * q.C32 * q.Hp;
    memset(q.xb + planes * q.Wp * 32, 0, 2 * (size_t)(xb_elems(&q) - planes * q.Wp * 32));
    cpu_parallel(ctx, planes, 1 + CPU_GRAIN / (q.Wp * 32 + 1), q.stem ? cvt_stem_task : cvt_task, &q);

    const int threads = cpu_threads(ctx);
    q.ngroups = (q.Ob + 1) / 2;
    int64_t want = threads > 1 ? 8 * threads : 1, base = q.N * q.ngroups;
    q.nrc = base >= want ? 1 : (want + base - 1) / base;
    if (q.nrc > q.OH)
        q.nrc = q.OH;
    if (q.nrc < 1)
        q.nrc = 1;
    q.rows = (q.OH + q.nrc - 1) / q.nrc;
    q.nrc = q.rows ? (q.OH + q.rows - 1) / q.rows : 1;
    if (q.OH > 0 && q.OW > 0)
        cpu_parallel_aff(ctx, q.N * q.nrc * q.ngroups, 1, bconv_task, &q);
    return MGE_OK;
}

#else

mge_status mge_cpu_conv_nchwc_bf16(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                   mge_tensor *const *out, int level, mge_error *err)
{
    (void)ctx, (void)n, (void)in, (void)out, (void)level;
    return mge_error_set(err, MGE_ERR_INVALID, "conv2d_nchwc: bf16 is not built for this CPU");
}

#endif
