/* cpu_winograd_nchwc.c — conv2d_winograd_nchwc and winograd_weight_nchwc
 * (f32): Winograd F(2,3) / F(4,3) on blocked NCHWc tensors (ops.def; the
 * matrices are kshared.h's).
 *
 * In the blocked layout a vector of c lanes is c channels of one pixel, so
 * the tile transforms are plain vector arithmetic (no shuffles), and the
 * product per tile position p is a 1x1 convolution over the tiles, which
 * takes conv2d_nchwc's register blocking (cpu_blocked.c). Per image, with
 * a = m + 2, T tiles (row-major over the output) and Tp = T rounded up to
 * a whole number of WN_RW-tile strips, three parallel rounds:
 *   1. input transform, tasks (input block, tile row): V[p][cb][t][c] =
 *      (B^T d B)[p] of the a x a input tile (zero outside x); the strip
 *      padding tiles are zero;
 *   2. product, tasks (p, group of WN_NB output blocks): M[p][ob][t][c] =
 *      sum over cb and input lane i of U[p][ob][cb][i][:] * V[p][cb][t][i],
 *      NB x RW vectors in registers, the group's weights (at most 4 * Cb
 *      KiB) staying in cache over every strip;
 *   3. output transform, tasks (output block, tile row): A^T M A + bias,
 *      then residual and activation (relu, relu6 in registers, others with
 *      cpu_act.h's loops) on the m x m outputs, stored straight into y;
 *      lanes past out are zeroed.
 * Each element is computed by the same instructions wherever the task
 * boundaries fall, so results are bit-identical for any --threads. c = 16
 * runs AVX-512 code when the CPU has it (the block the layout pass uses
 * there); any other block, or MGE_CPU_ISA below avx512, takes portable
 * loops with the same order of sums.
 *
 * winograd_weight_nchwc: mge_winograd_weight_transform one output channel
 * at a time into thread scratch, scattered into the blocked layout. */
#include "cpu_act.h"
#include "cpu_relu.h"

#include <string.h>

#if CPU_X86 && defined(__GNUC__)
#define WN_VEC 1
#if defined(__clang__)
#define WN_AVX512 __attribute__((target("avx512f")))
#else
#define WN_AVX512 __attribute__((target("avx512f"), optimize(CPU_OPTS)))
#endif
typedef float wn_v16 __attribute__((vector_size(64)));
#else
#define WN_VEC 0
#endif

/* The product tile: WN_NB output blocks x WN_RW tiles; the 24
 * accumulators, 4 weights and a broadcast fit AVX-512's 32 registers (4 x 7
 * spills one; 2 x 14 measured no faster on resnet18's 196 tiles and slower
 * on its 49). */
#define WN_NB 4   /* output blocks per product tile and per task */
#define WN_RW 6   /* tiles per product tile (and the strip padding of T) */

typedef struct wn_geom {
    int m, a, act, vec;
    float alpha;
    int64_t N, Cb, H, W, c, O, Ob, OH, OW, ph, pw;
    int64_t TH, TW, T, Tp, ngroups;
    const float *x, *u, *bias, *res;   /* x, res, y: the current image */
    float *y, *v, *mm;
} wn_geom;

static void wn_shape(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, wn_geom *g)
{
    memset(g, 0, sizeof *g);
    const mge_tensor *x = in[0], *y = out[0];
    g->m = (int)mge_node_int(n, MGE_KEY_tile, 4);
    g->a = g->m + 2;
    g->act = (int)mge_node_int(n, MGE_KEY_act, -1);
    g->alpha = (float)mge_node_float(n, MGE_KEY_alpha, 0.01);
    g->N = x->dims[0], g->Cb = x->dims[1], g->H = x->dims[2], g->W = x->dims[3], g->c = x->dims[4];
    g->O = mge_node_int(n, MGE_KEY_out, 0), g->Ob = y->dims[1], g->OH = y->dims[2], g->OW = y->dims[3];
    g->ph = mge_node_ints(n, MGE_KEY_pad, 0, 0), g->pw = mge_node_ints(n, MGE_KEY_pad, 1, 0);
    int m = g->m > 0 ? g->m : 1;
    g->TH = (g->OH + m - 1) / m, g->TW = (g->OW + m - 1) / m;
    g->T = g->TH * g->TW;
    g->Tp = (g->T + WN_RW - 1) / WN_RW * WN_RW;
    g->ngroups = (g->Ob + WN_NB - 1) / WN_NB;
}

/* Workspace floats: padded bias, V and M of one image. */
static int64_t wn_scratch(const wn_geom *g, int64_t *vfl, int64_t *mfl)
{
    int64_t aa = (int64_t)g->a * g->a;
    *vfl = aa * g->Cb * g->Tp * g->c;
    *mfl = aa * g->Ob * g->Tp * g->c;
    return g->Ob * g->c + *vfl + *mfl + 16;
}

/* ---------------------------------------------------------------- 1-D transforms
 * Rows of B^T and A^T (kshared.h) for a scalar or vector type. */
#define WN_BT4(x, y)                                        \
    do {                                                    \
        y[0] = 4.0f * x[0] - 5.0f * x[2] + x[4];            \
        y[1] = x[3] + x[4] - 4.0f * (x[1] + x[2]);          \
        y[2] = x[4] - x[3] + 4.0f * (x[1] - x[2]);          \
        y[3] = x[4] - x[2] + 2.0f * (x[3] - x[1]);          \
        y[4] = x[4] - x[2] + 2.0f * (x[1] - x[3]);          \
        y[5] = 4.0f * x[1] - 5.0f * x[3] + x[5];            \
    } while (0)
#define WN_BT2(x, y)        \
    do {                    \
        y[0] = x[0] - x[2]; \
        y[1] = x[1] + x[2]; \
        y[2] = x[2] - x[1]; \
        y[3] = x[1] - x[3]; \
    } while (0)
#define WN_AT4(T, x, y)                                   \
    do {                                                  \
        T s12 = x[1] + x[2], d12 = x[1] - x[2];           \
        T s34 = x[3] + x[4], d34 = x[3] - x[4];           \
        y[0] = x[0] + s12 + s34;                          \
        y[1] = d12 + 2.0f * d34;                          \
        y[2] = s12 + 4.0f * s34;                          \
        y[3] = d12 + 8.0f * d34 + x[5];                   \
    } while (0)
#define WN_AT2(T, x, y)            \
    do {                           \
        y[0] = x[0] + x[1] + x[2]; \
        y[1] = x[1] - x[2] - x[3]; \
    } while (0)

/* Input tile d[A][A] -> out[A*A] (row p / A, column p % A), type T; BT is
 * WN_BT4 or WN_BT2 (A = 6 or 4). */
#define WN_IN_TILE(T, A, BT, d, out)                          \
    do {                                                      \
        T t_[A][A], col_[A], r_[A];                           \
        for (int i_ = 0; i_ < A; i_++)                        \
            BT(d[i_], t_[i_]);                                \
        for (int k_ = 0; k_ < A; k_++) {                      \
            for (int i_ = 0; i_ < A; i_++)                    \
                col_[i_] = t_[i_][k_];                        \
            BT(col_, r_);                                     \
            for (int i_ = 0; i_ < A; i_++)                    \
                out[i_ * A + k_] = r_[i_];                    \
        }                                                     \
    } while (0)

/* M tile mt[A*A] -> yv[M*M], type T; AT is WN_AT4 or WN_AT2. */
#define WN_OUT_TILE(T, M, A, AT, mt, yv)                      \
    do {                                                      \
        T s_[A][M], col_[A], r_[M];                           \
        for (int i_ = 0; i_ < A; i_++)                        \
            AT(T, (&mt[i_ * A]), s_[i_]);                     \
        for (int k_ = 0; k_ < M; k_++) {                      \
            for (int i_ = 0; i_ < A; i_++)                    \
                col_[i_] = s_[i_][k_];                        \
            AT(T, col_, r_);                                  \
            for (int i_ = 0; i_ < M; i_++)                    \
                yv[i_ * M + k_] = r_[i_];                     \
        }                                                     \
    } while (0)

/* ---------------------------------------------------------------- portable */

/* Phase 1, rows [r0, r1) of (input block, tile row), any c. */
CPU_MULTI(wn_in_any, (const wn_geom *g, int64_t r0, int64_t r1), (g, r0, r1), {
    const int m = g->m, a = g->a;
    const int64_t c = g->c, aa = (int64_t)a * a, ps = g->Cb * g->Tp * c;
    for (int64_t r = r0; r < r1; r++) {
        int64_t cb = r / g->TH, ti = r % g->TH;
        const float *xp = g->x + cb * g->H * g->W * c;
        for (int64_t tj = 0; tj < g->TW; tj++) {
            float *v = g->v + (cb * g->Tp + ti * g->TW + tj) * c;
            for (int64_t l = 0; l < c; l++) {
                float d[6][6], o[36];
                for (int i = 0; i < a; i++)
                    for (int j = 0; j < a; j++) {
                        int64_t h = ti * m - g->ph + i, w = tj * m - g->pw + j;
                        d[i][j] = h >= 0 && h < g->H && w >= 0 && w < g->W ? xp[(h * g->W + w) * c + l] : 0.0f;
                    }
                if (m == 4)
                    WN_IN_TILE(float, 6, WN_BT4, d, o);
                else
                    WN_IN_TILE(float, 4, WN_BT2, d, o);
                for (int64_t p = 0; p < aa; p++)
                    v[p * ps + l] = o[p];
            }
        }
        if (ti == g->TH - 1)   /* the strip padding tiles */
            for (int64_t p = 0; p < aa; p++)
                memset(g->v + p * ps + (cb * g->Tp + g->T) * c, 0, sizeof(float) * (size_t)((g->Tp - g->T) * c));
    }
})

/* Phase 2, tasks [t0, t1) of (p, group), any c; sums in the vector order. */
CPU_MULTI(wn_gemm_any, (const wn_geom *g, int64_t t0, int64_t t1), (g, t0, t1), {
    const int64_t c = g->c, Cb = g->Cb, Tp = g->Tp;
    for (int64_t task = t0; task < t1; task++) {
        int64_t p = task / g->ngroups, ob0 = task % g->ngroups * WN_NB;
        int64_t nb = g->Ob - ob0 < WN_NB ? g->Ob - ob0 : WN_NB;
        for (int64_t j = 0; j < nb; j++) {
            const float *u = g->u + ((p * g->Ob + ob0 + j) * Cb) * c * c;
            float *mm = g->mm + ((p * g->Ob + ob0 + j) * Tp) * c;
            for (int64_t t = 0; t < Tp; t++) {
                float acc[64];
                for (int64_t l = 0; l < c; l++)
                    acc[l] = 0.0f;
                for (int64_t cb = 0; cb < Cb; cb++) {
                    const float *vs = g->v + ((p * Cb + cb) * Tp + t) * c, *ws = u + cb * c * c;
                    for (int64_t i = 0; i < c; i++)
                        for (int64_t l = 0; l < c; l++)
                            acc[l] += ws[i * c + l] * vs[i];
                }
                memcpy(mm + t * c, acc, sizeof(float) * (size_t)c);
            }
        }
    }
})

/* Zero lanes past out in an output block written with c lanes per pixel. */
static void wn_zero_tail(const wn_geom *g, int64_t ob, float *y, int64_t pixels)
{
    int64_t valid = g->O - ob * g->c;
    if (valid >= g->c)
        return;
    for (int64_t q = 0; q < pixels; q++)
        memset(y + q * g->c + valid, 0, sizeof(float) * (size_t)(g->c - valid));
}

/* The epilogue on the rows x cols outputs of a tile at y (plane row
 * length OW*c): residual and activation by cpu_act.h, lanes past out. */
static void wn_tile_epilogue(const wn_geom *g, int64_t ob, float *y, const float *r, int rows, int cols, int act)
{
    const int64_t rowf = g->OW * g->c;
    for (int i = 0; i < rows; i++) {
        cpu_act_apply(act, g->alpha, y + i * rowf, r ? r + i * rowf : NULL, cols * g->c);
        wn_zero_tail(g, ob, y + i * rowf, cols);
    }
}

/* Phase 3, rows [r0, r1) of (output block, tile row), any c. */
CPU_MULTI(wn_out_any, (const wn_geom *g, int64_t r0, int64_t r1), (g, r0, r1), {
    const int m = g->m, a = g->a;
    const int64_t c = g->c, aa = (int64_t)a * a, ps = g->Ob * g->Tp * c;
    for (int64_t r = r0; r < r1; r++) {
        int64_t ob = r / g->TH, ti = r % g->TH;
        int rows = (int)(g->OH - ti * m < m ? g->OH - ti * m : m);
        for (int64_t tj = 0; tj < g->TW; tj++) {
            int cols = (int)(g->OW - tj * m < m ? g->OW - tj * m : m);
            const float *mm = g->mm + (ob * g->Tp + ti * g->TW + tj) * c;
            int64_t yoff = ((ob * g->OH + ti * m) * g->OW + tj * m) * c;
            float *y = g->y + yoff;
            for (int64_t l = 0; l < c; l++) {
                float mt[36], yt[16];
                for (int64_t p = 0; p < aa; p++)
                    mt[p] = mm[p * ps + l];
                if (m == 4)
                    WN_OUT_TILE(float, 4, 6, WN_AT4, mt, yt);
                else
                    WN_OUT_TILE(float, 2, 4, WN_AT2, mt, yt);
                float b = g->bias[ob * c + l];
                for (int i = 0; i < rows; i++)
                    for (int k = 0; k < cols; k++)
                        y[(i * g->OW + k) * c + l] = yt[i * m + k] + b;
            }
            wn_tile_epilogue(g, ob, y, g->res ? g->res + yoff : NULL, rows, cols, g->act);
        }
    }
})

/* ---------------------------------------------------------------- AVX-512, c = 16 */

#if WN_VEC
#define WN_LOAD(dst, p) memcpy(&(dst), (p), sizeof(wn_v16))
#define WN_STORE(p, v)                   \
    do {                                 \
        wn_v16 t__ = (v);                \
        memcpy((p), &t__, sizeof t__);   \
    } while (0)

/* Phase 1 at c = 16 for tile size M (A = M + 2). */
#define WN_IN16(M, A, BT)                                                                                        \
    static WN_AVX512 void wn_in16_##M(const wn_geom *g, int64_t r0, int64_t r1)                                \
    {                                                                                                          \
        const int64_t ps = g->Cb * g->Tp * 16;                                                                 \
        const wn_v16 zero = {0};                                                                               \
        for (int64_t r = r0; r < r1; r++) {                                                                    \
            int64_t cb = r / g->TH, ti = r % g->TH;                                                            \
            const float *xp = g->x + cb * g->H * g->W * 16;                                                    \
            for (int64_t tj = 0; tj < g->TW; tj++) {                                                           \
                int64_t h0 = ti * M - g->ph, w0 = tj * M - g->pw;                                              \
                wn_v16 d[A][A], o[A * A];                                                                      \
                if (h0 >= 0 && w0 >= 0 && h0 + A <= g->H && w0 + A <= g->W) {                                 \
                    for (int i = 0; i < A; i++)                                                                \
                        for (int j = 0; j < A; j++)                                                            \
                            WN_LOAD(d[i][j], xp + ((h0 + i) * g->W + w0 + j) * 16);                            \
                } else {                                                                                       \
                    for (int i = 0; i < A; i++)                                                                \
                        for (int j = 0; j < A; j++) {                                                          \
                            int64_t h = h0 + i, w = w0 + j;                                                    \
                            if (h >= 0 && h < g->H && w >= 0 && w < g->W)                                      \
                                WN_LOAD(d[i][j], xp + (h * g->W + w) * 16);                                    \
                            else                                                                               \
                                d[i][j] = zero;                                                                \
                        }                                                                                      \
                }                                                                                              \
                WN_IN_TILE(wn_v16, A, BT, d, o);                                                                \
                float *v = g->v + (cb * g->Tp + ti * g->TW + tj) * 16;                                         \
                for (int p = 0; p < A * A; p++)                                                                \
                    WN_STORE(v + p * ps, o[p]);                                                                \
            }                                                                                                  \
            if (ti == g->TH - 1)                                                                               \
                for (int p = 0; p < A * A; p++)                                                                \
                    memset(g->v + p * ps + (cb * g->Tp + g->T) * 16, 0,                                        \
                           sizeof(float) * (size_t)((g->Tp - g->T) * 16));                                     \
        }                                                                                                      \
    }
WN_IN16(4, 6, WN_BT4)
WN_IN16(2, 4, WN_BT2)

/* NB output blocks x RW tiles of M[p] from t, in registers; u at the
 * first block's weights (blocks Cb*256 floats apart), v at (p, cb 0, t). */
#define WN_GEMM16(NB, RW)                                                                                      \
    static inline __attribute__((always_inline)) WN_AVX512 void wn_mm16_##NB(                                  \
        const float *u, const float *v, float *mm, int64_t Cb, int64_t Tp)                                     \
    {                                                                                                          \
        wn_v16 acc[NB][RW];                                                                                    \
        _Pragma("GCC unroll 4") for (int j = 0; j < NB; j++)                                                   \
            _Pragma("GCC unroll 16") for (int r = 0; r < RW; r++) acc[j][r] = (wn_v16){0};                     \
        for (int64_t cb = 0; cb < Cb; cb++) {                                                                  \
            const float *restrict vs = v + cb * Tp * 16, *restrict ws = u + cb * 256;                          \
            for (int i = 0; i < 16; i++) {                                                                     \
                wn_v16 wv[NB];                                                                                 \
                _Pragma("GCC unroll 4") for (int j = 0; j < NB; j++) WN_LOAD(wv[j], ws + j * Cb * 256 + i * 16); \
                _Pragma("GCC unroll 16") for (int r = 0; r < RW; r++)                                          \
                {                                                                                              \
                    float xv = vs[r * 16 + i];                                                                 \
                    _Pragma("GCC unroll 4") for (int j = 0; j < NB; j++) acc[j][r] += wv[j] * xv;              \
                }                                                                                              \
            }                                                                                                  \
        }                                                                                                      \
        _Pragma("GCC unroll 4") for (int j = 0; j < NB; j++)                                                   \
            _Pragma("GCC unroll 16") for (int r = 0; r < RW; r++) WN_STORE(mm + (j * Tp + r) * 16, acc[j][r]); \
    }
WN_GEMM16(4, WN_RW)
WN_GEMM16(2, WN_RW)
WN_GEMM16(1, WN_RW)

static WN_AVX512 void wn_gemm16(const wn_geom *g, int64_t t0, int64_t t1)
{
    const int64_t Cb = g->Cb, Tp = g->Tp;
    for (int64_t task = t0; task < t1; task++) {
        int64_t p = task / g->ngroups, ob0 = task % g->ngroups * WN_NB;
        int64_t nb = g->Ob - ob0 < WN_NB ? g->Ob - ob0 : WN_NB;
        const float *v = g->v + p * Cb * Tp * 16;
        for (int64_t j = 0; j < nb;) {
            const float *u = g->u + (p * g->Ob + ob0 + j) * Cb * 256;
            float *mm = g->mm + (p * g->Ob + ob0 + j) * Tp * 16;
            int step = nb - j >= 4 ? 4 : nb - j >= 2 ? 2 : 1;   /* a short last group: 2 and 1 blocks */
            for (int64_t t = 0; t < Tp; t += WN_RW) {
                if (step == 4)
                    wn_mm16_4(u, v + t * 16, mm + t * 16, Cb, Tp);
                else if (step == 2)
                    wn_mm16_2(u, v + t * 16, mm + t * 16, Cb, Tp);
                else
                    wn_mm16_1(u, v + t * 16, mm + t * 16, Cb, Tp);
            }
            j += step;
        }
    }
}

/* relu / relu6 on a vector (cpu_relu.h), as conv2d_nchwc's tiles. */
static inline __attribute__((always_inline)) WN_AVX512 wn_v16 wn_clamp(wn_v16 v, int act)
{
    return (wn_v16)cpu_relu16((__m512)v, act == MGE_OP_RELU6);
}

/* Phase 3 at c = 16 for tile size M (A = M + 2). */
#define WN_OUT16(M, A, AT)                                                                                       \
    static WN_AVX512 void wn_out16_##M(const wn_geom *g, int64_t r0, int64_t r1)                               \
    {                                                                                                          \
        const int64_t ps = g->Ob * g->Tp * 16;                                                                 \
        const int reg = g->act == -1 || g->act == MGE_OP_RELU || g->act == MGE_OP_RELU6;                       \
        for (int64_t r = r0; r < r1; r++) {                                                                    \
            int64_t ob = r / g->TH, ti = r % g->TH;                                                            \
            int rows = (int)(g->OH - ti * M < M ? g->OH - ti * M : M);                                         \
            wn_v16 bv;                                                                                         \
            WN_LOAD(bv, g->bias + ob * 16);                                                                    \
            for (int64_t tj = 0; tj < g->TW; tj++) {                                                           \
                int cols = (int)(g->OW - tj * M < M ? g->OW - tj * M : M);                                     \
                const float *mm = g->mm + (ob * g->Tp + ti * g->TW + tj) * 16;                                 \
                wn_v16 mt[A * A], yt[M * M];                                                                   \
                for (int p = 0; p < A * A; p++)                                                                \
                    WN_LOAD(mt[p], mm + p * ps);                                                               \
                WN_OUT_TILE(wn_v16, M, A, AT, mt, yt);                                                         \
                int64_t yoff = ((ob * g->OH + ti * M) * g->OW + tj * M) * 16;                                  \
                float *y = g->y + yoff;                                                                        \
                const float *res = g->res ? g->res + yoff : NULL;                                              \
                for (int i = 0; i < rows; i++)                                                                 \
                    for (int k = 0; k < cols; k++) {                                                           \
                        wn_v16 o = yt[i * M + k] + bv;                                                         \
                        if (reg) {                                                                             \
                            if (res) {                                                                         \
                                wn_v16 rv;                                                                     \
                                WN_LOAD(rv, res + (i * g->OW + k) * 16);                                       \
                                o += rv;                                                                       \
                            }                                                                                  \
                            if (g->act != -1)                                                                  \
                                o = wn_clamp(o, g->act);                                                       \
                        }                                                                                      \
                        WN_STORE(y + (i * g->OW + k) * 16, o);                                                 \
                    }                                                                                          \
                if (!reg)                                                                                      \
                    wn_tile_epilogue(g, ob, y, res, rows, cols, g->act);                                       \
                else if (ob * 16 + 16 > g->O)                                                                  \
                    for (int i = 0; i < rows; i++)                                                             \
                        wn_zero_tail(g, ob, y + i * g->OW * 16, cols);                                         \
            }                                                                                                  \
        }                                                                                                      \
    }
WN_OUT16(4, 6, WN_AT4)
WN_OUT16(2, 4, WN_AT2)
#endif

/* ---------------------------------------------------------------- tasks */

static void wn_in_task(void *arg, int64_t r0, int64_t r1, int thread)
{
    (void)thread;
    const wn_geom *g = arg;
#if WN_VEC
    if (g->vec) {
        if (g->m == 4)
            wn_in16_4(g, r0, r1);
        else
            wn_in16_2(g, r0, r1);
        return;
    }
#endif
    wn_in_any(g, r0, r1);
}

static void wn_gemm_task(void *arg, int64_t t0, int64_t t1, int thread)
{
    (void)thread;
    const wn_geom *g = arg;
#if WN_VEC
    if (g->vec) {
        wn_gemm16(g, t0, t1);
        return;
    }
#endif
    wn_gemm_any(g, t0, t1);
}

static void wn_out_task(void *arg, int64_t r0, int64_t r1, int thread)
{
    (void)thread;
    const wn_geom *g = arg;
#if WN_VEC
    if (g->vec) {
        if (g->m == 4)
            wn_out16_4(g, r0, r1);
        else
            wn_out16_2(g, r0, r1);
        return;
    }
#endif
    wn_out_any(g, r0, r1);
}

/* ---------------------------------------------------------------- the kernel */

/* Small per-image problems: three pool rounds per image would cost more
 * than they share, so each image runs on one thread; with several images
 * the images are the tasks (each thread with its own V and M). The choice
 * depends on the shape alone and an image's sums do not depend on it. */
static int wn_small(const wn_geom *g)
{
    const int64_t aa = (int64_t)g->a * g->a;
    return (double)aa * (double)g->Ob * (double)g->Cb * 256.0 * (double)g->Tp < 2e6;
}

static size_t wn_ws(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, int threads)
{
    if (in[0]->ndim != 5 || out[0]->ndim != 5)
        return cpu_ref_ws(n, in, out, threads);
    wn_geom g;
    wn_shape(n, in, out, &g);
    int64_t vfl, mfl, one = wn_scratch(&g, &vfl, &mfl);
    if (wn_small(&g) && g.N > 1 && threads > 1)
        one += (vfl + mfl) * (threads - 1);
    return sizeof(float) * (size_t)one;
}

typedef struct wn_img_job {
    const wn_geom *g;
    const float *x, *res;
    float *y, *scratch;
    int64_t vfl, mfl;
} wn_img_job;

static void wn_img_task(void *arg, int64_t img, int thread)
{
    const wn_img_job *j = arg;
    wn_geom g = *j->g;
    const int64_t aa = (int64_t)g.a * g.a;
    const int64_t inimg = g.Cb * g.H * g.W * g.c, outimg = g.Ob * g.OH * g.OW * g.c;
    g.v = j->scratch + (size_t)thread * (size_t)(j->vfl + j->mfl);
    g.mm = g.v + j->vfl;
    g.x = j->x + img * inimg;
    g.y = j->y + img * outimg;
    g.res = j->res ? j->res + img * outimg : NULL;
    wn_in_task(&g, 0, g.Cb * g.TH, thread);
    wn_gemm_task(&g, 0, aa * g.ngroups, thread);
    wn_out_task(&g, 0, g.Ob * g.TH, thread);
}

static mge_status cpu_wino_nchwc(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                 mge_tensor *const *out, mge_error *err)
{
    int bias = (int)mge_node_int(n, MGE_KEY_bias, 1), res = (int)mge_node_int(n, MGE_KEY_residual, 0);
    if (in[0]->dtype != MGE_F32 || in[0]->ndim != 5 || out[0]->ndim != 5 || in[1]->ndim != 5 ||
        n->nin != 2 + bias + res || in[0]->dims[4] > 64)
        return cpu_fallback(ctx, n, in, out, err);
    wn_geom g;
    wn_shape(n, in, out, &g);
    if ((g.m != 2 && g.m != 4) || g.c < 1)
        return cpu_fallback(ctx, n, in, out, err);
    if (g.N == 0 || g.Ob == 0)
        return MGE_OK;
    int64_t vfl, mfl;
    size_t need = sizeof(float) * (size_t)wn_scratch(&g, &vfl, &mfl);
    if (!ctx->ws || ctx->ws_size < need)
        return mge_error_set(err, MGE_ERR_INVALID, "conv2d_winograd_nchwc: workspace of %zu bytes, need %zu",
                             ctx->ws_size, need);
    float *ws = ctx->ws, *bp = ws;
    memset(bp, 0, sizeof(float) * (size_t)(g.Ob * g.c));
    if (bias)
        memcpy(bp, in[2]->data, sizeof(float) * (size_t)g.O);
    g.bias = bp;
    g.v = ws + g.Ob * g.c;
    g.mm = g.v + vfl;
    g.u = in[1]->data;
#if WN_VEC
    g.vec = g.c == 16 && mge_cpu_isa() >= MGE_ISA_AVX512;
#endif
    const int64_t aa = (int64_t)g.a * g.a;
    int threads = cpu_threads(ctx);
    if (wn_small(&g) && g.N > 1 && threads > 1) {
        if (ctx->ws_size < need + sizeof(float) * (size_t)((vfl + mfl) * (threads - 1)))
            return mge_error_set(err, MGE_ERR_INVALID, "conv2d_winograd_nchwc: workspace of %zu bytes too small",
                                 ctx->ws_size);
        wn_img_job j = {&g, in[0]->data, res ? in[2 + bias]->data : NULL, out[0]->data, g.v, vfl, mfl};
        mge_pool_run(ctx->pool, g.N, wn_img_task, &j);
        return MGE_OK;
    }
    mge_kctx serial = *ctx;
    serial.pool = NULL;
    if (wn_small(&g))
        ctx = &serial;
    const int64_t inimg = g.Cb * g.H * g.W * g.c, outimg = g.Ob * g.OH * g.OW * g.c;
    for (int64_t img = 0; img < g.N; img++) {
        g.x = (const float *)in[0]->data + img * inimg;
        g.y = (float *)out[0]->data + img * outimg;
        g.res = res ? (const float *)in[2 + bias]->data + img * outimg : NULL;
        cpu_parallel(ctx, g.Cb * g.TH, 1, wn_in_task, &g);
        cpu_parallel(ctx, aa * g.ngroups, 1, wn_gemm_task, &g);
        cpu_parallel(ctx, g.Ob * g.TH, 1, wn_out_task, &g);
    }
    return MGE_OK;
}

/* ---------------------------------------------------------------- winograd_weight_nchwc */

typedef struct wnw_job {
    const float *w;
    float *u, *ws;   /* ws: a*a*C floats per thread */
    int64_t O, C, Ob, Cb, c;
    int m;
} wnw_job;

static void wnw_task(void *arg, int64_t o0, int64_t o1, int thread)
{
    const wnw_job *j = arg;
    const int64_t aa = (int64_t)(j->m + 2) * (j->m + 2), c = j->c;
    float *t = j->ws + (int64_t)thread * aa * j->C;
    for (int64_t o = o0; o < o1; o++) {
        mge_winograd_weight_transform(j->w + o * j->C * 9, 1, j->C, j->m, t);
        for (int64_t p = 0; p < aa; p++)
            for (int64_t i = 0; i < j->C; i++)
                j->u[(((p * j->Ob + o / c) * j->Cb + i / c) * c + i % c) * c + o % c] = t[p * j->C + i];
    }
}

static size_t wnw_ws(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, int threads)
{
    (void)out;
    int64_t a = mge_node_int(n, MGE_KEY_tile, 4) + 2;
    int64_t C = in[0]->ndim == 4 ? in[0]->dims[1] : 0;
    return sizeof(float) * (size_t)(a * a * C * (threads < 1 ? 1 : threads) + 1);
}

static mge_status cpu_wino_weight_nchwc(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                        mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *w = in[0];
    int m = (int)mge_node_int(n, MGE_KEY_tile, 4);
    int64_t c = mge_node_int(n, MGE_KEY_block, 0);
    if ((m != 2 && m != 4) || c < 1 || w->ndim != 4 || w->dims[2] != 3 || w->dims[3] != 3 || out[0]->ndim != 5)
        return cpu_fallback(ctx, n, in, out, err);
    wnw_job j = {w->data, out[0]->data, ctx->ws, w->dims[0], w->dims[1], out[0]->dims[1], out[0]->dims[2], c, m};
    memset(j.u, 0, out[0]->nbytes);   /* lanes past out and in */
    if (j.O == 0 || j.C == 0)
        return MGE_OK;
    int threads = cpu_threads(ctx);
    size_t need = sizeof(float) * (size_t)((int64_t)(m + 2) * (m + 2) * j.C * threads);
    if (!ctx->ws || ctx->ws_size < need)
        return mge_error_set(err, MGE_ERR_INVALID, "winograd_weight_nchwc: workspace of %zu bytes, need %zu",
                             ctx->ws_size, need);
    cpu_parallel(ctx, j.O, 1 + CPU_GRAIN / (j.C * 300 + 1), wnw_task, &j);
    return MGE_OK;
}


void mge_cpu_register_winograd_nchwc(mge_backend *b)
{
    b->k[MGE_OP_CONV2D_WINOGRAD_NCHWC][MGE_F32] = (mge_kernel){.run = cpu_wino_nchwc, .ws = wn_ws};
    b->k[MGE_OP_WINOGRAD_WEIGHT_NCHWC][MGE_F32] = (mge_kernel){.run = cpu_wino_weight_nchwc, .ws = wnw_ws};
}
