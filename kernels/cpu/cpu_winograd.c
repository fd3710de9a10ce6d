/* cpu_winograd.c — conv2d_winograd (f32): Winograd F(2,3) and F(4,3) on
 * OpenBLAS, with the weight already in the Winograd domain (the mge-opt
 * pass transforms it once; see kshared.h for the matrices).
 *
 * With a = m + 2 and T the output tiles of a chunk of images (tile t =
 * (image * TH + tile row) * TW + tile column), three phases, each a
 * parallel loop over our pool:
 *   1. input transform: per channel, each image's plane is copied
 *      zero-padded into thread scratch so every tile reads in bounds, and
 *      8 horizontally adjacent tiles are transformed at once (one 8-lane
 *      vector per tile element), stored as V[p][c][t] (8 tiles at
 *      consecutive t: one vector store);
 *   2. a*a sgemms M[p] (O x T) = U[p] (O x C) V[p] (C x T), OpenBLAS
 *      single-threaded inside, one call per (p, column block) task;
 *   3. output transform: per (image, output channel) plane, 8 tiles at once
 *      (vector loads of M[p][o][t..t+8]), plus bias, scattered to the
 *      plane, then residual and activation over the plane while it is in
 *      cache.
 * Every element is computed by the same instructions whatever the thread
 * count (the column blocks of phase 2 depend on the shape alone, see
 * cpu_gemm.c on OpenBLAS and blocks), so results are bit-identical for any
 * --threads. Images are processed in chunks so the V and M buffers stay
 * bounded (WG_CHUNK_BYTES) at large batch.
 *
 * winograd_weight: mge_winograd_weight_transform one output channel at a
 * time into thread scratch ([a*a][1][C]), then copied to its rows of U,
 * the channels spread over the pool; the same numbers as the transform of
 * the whole weight (the pass used to store that), whatever the threads. */
#include "cpu_act.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#define WG_LANES 8
#define WG_CHUNK_BYTES (32 << 20)   /* V + M of one chunk of images, unless one image needs more */
#define WG_GEMM_COLS 1024           /* column block of the phase-2 sgemms */

/* 8 float lanes: GCC/clang vector extensions, lowered to AVX in the avx2
 * variants and to SSE pairs in the baseline ones. */
typedef float wg_v8 __attribute__((vector_size(32)));

typedef struct wg_geom {
    int m, a, act;
    float alpha;
    int64_t N, C, H, W, O, OH, OW, ph, pw;
    int64_t TH, TW, TPI;   /* tile rows, tile columns, tiles per image */
    int64_t Hp, Wp;        /* zero-padded input plane (phase 1 scratch) */
    int64_t NB;            /* images per chunk */
} wg_geom;

static void wg_shape(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, wg_geom *g)
{
    const mge_tensor *x = in[0], *y = out[0];
    g->m = (int)mge_node_int(n, MGE_KEY_tile, 4);
    g->a = g->m + 2;
    g->act = (int)mge_node_int(n, MGE_KEY_act, -1);
    g->alpha = (float)mge_node_float(n, MGE_KEY_alpha, 0.01);
    g->N = x->dims[0], g->C = x->dims[1], g->H = x->dims[2], g->W = x->dims[3];
    g->O = y->dims[1], g->OH = y->dims[2], g->OW = y->dims[3];
    g->ph = mge_node_ints(n, MGE_KEY_pad, 0, 0), g->pw = mge_node_ints(n, MGE_KEY_pad, 1, 0);
    g->TH = (g->OH + g->m - 1) / g->m, g->TW = (g->OW + g->m - 1) / g->m;
    g->TPI = g->TH * g->TW;
    /* tile columns rounded up to whole vectors: the last vector's spare
     * lanes read zeros instead of past the row */
    g->Hp = g->TH * g->m + 2;
    g->Wp = (g->TW + WG_LANES - 1) / WG_LANES * WG_LANES * g->m + 2;
    int64_t per_img = (int64_t)g->a * g->a * (g->C + g->O) * g->TPI * (int64_t)sizeof(float);
    g->NB = per_img > 0 ? WG_CHUNK_BYTES / per_img : g->N;
    if (g->NB < 1)
        g->NB = 1;
    if (g->NB > g->N)
        g->NB = g->N;
}

/* Workspace floats: V and M of a chunk, then one padded plane per thread.
 * Rows of V and M (one per (p, channel)) hold the chunk's T tiles and
 * WG_LANES more, so 8-lane vectors never need a partial load or store. */
static int64_t wg_scratch(const wg_geom *g, int threads, int64_t *vfl, int64_t *mfl)
{
    int64_t T = g->NB * g->TPI + WG_LANES, aa = (int64_t)g->a * g->a;
    *vfl = aa * g->C * T;
    *mfl = aa * g->O * T;
    return *vfl + *mfl + (int64_t)(threads < 1 ? 1 : threads) * (g->Hp * g->Wp + 16);
}

/* ---------------------------------------------------------------- 1-D transforms
 * Rows of B^T (input, a values in, a out) and A^T (output, a in, m out) as
 * straight-line code on whole vectors. */

#define WG_BT4(x0, x1, x2, x3, x4, x5, y0, y1, y2, y3, y4, y5) \
    do {                                                       \
        y0 = 4.0f * x0 - 5.0f * x2 + x4;                       \
        y1 = x3 + x4 - 4.0f * (x1 + x2);                       \
        y2 = x4 - x3 + 4.0f * (x1 - x2);                       \
        y3 = x4 - x2 + 2.0f * (x3 - x1);                       \
        y4 = x4 - x2 + 2.0f * (x1 - x3);                       \
        y5 = 4.0f * x1 - 5.0f * x3 + x5;                       \
    } while (0)

#define WG_AT4(x0, x1, x2, x3, x4, x5, y0, y1, y2, y3) \
    do {                                               \
        wg_v8 s12 = x1 + x2, d12 = x1 - x2;            \
        wg_v8 s34 = x3 + x4, d34 = x3 - x4;            \
        y0 = x0 + s12 + s34;                           \
        y1 = d12 + 2.0f * d34;                         \
        y2 = s12 + 4.0f * s34;                         \
        y3 = d12 + 8.0f * d34 + x5;                    \
    } while (0)

#define WG_BT2(x0, x1, x2, x3, y0, y1, y2, y3) \
    do {                                       \
        y0 = x0 - x2;                          \
        y1 = x1 + x2;                          \
        y2 = x2 - x1;                          \
        y3 = x1 - x3;                          \
    } while (0)

#define WG_AT2(x0, x1, x2, x3, y0, y1) \
    do {                               \
        y0 = x0 + x1 + x2;             \
        y1 = x1 - x2 - x3;             \
    } while (0)

/* Loads 8 lanes from p (unaligned). */
#define WG_LOAD(dst, p) memcpy(&dst, (p), sizeof dst)

/* Lane shuffles (GCC 12+, clang) de-interleave contiguous loads; older
 * compilers build the vectors element by element (WG_GATHER). */
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12)
#define WG_SHUFFLE 1
#else
#define WG_SHUFFLE 0
#endif

/* Lane l = element at p + l * s: one element of 8 adjacent tiles. */
#define WG_GATHER(p, s) \
    ((wg_v8){(p)[0], (p)[(s)], (p)[2 * (s)], (p)[3 * (s)], (p)[4 * (s)], (p)[5 * (s)], (p)[6 * (s)], (p)[7 * (s)]})

/* Stores all 8 lanes of v at d: lanes past the tile row land on tiles
 * the same task writes later, or in the row's spare lanes (see wg_scratch). */
#define WG_STORE(d, v)                       \
    do {                                     \
        wg_v8 tmp_ = (v);                    \
        memcpy((d), &tmp_, sizeof tmp_);     \
    } while (0)

/* ---------------------------------------------------------------- phase 1 */

/* 8 tiles whose first element is at src (tile l at src + l*4, rows Wp
 * apart) into v + p*ps (p = row*6 + column of the transformed tile). */
CPU_MULTI(wg_in4, (const float *restrict src, int64_t Wp, float *restrict v, int64_t ps),
          (src, Wp, v, ps), {
              wg_v8 w[6][6];
              for (int i = 0; i < 6; i++) {
                  const float *r = src + i * Wp;
#if WG_SHUFFLE
                  /* 34 contiguous floats, de-interleaved by 4: tile l's
                   * element j is r[4l + j] */
                  wg_v8 a0, a1, a2, a3, a4;
                  WG_LOAD(a0, r), WG_LOAD(a1, r + 8), WG_LOAD(a2, r + 16), WG_LOAD(a3, r + 24), WG_LOAD(a4, r + 32);
                  wg_v8 b0 = __builtin_shufflevector(a0, a1, 0, 4, 8, 12, 1, 5, 9, 13);
                  wg_v8 b1 = __builtin_shufflevector(a0, a1, 2, 6, 10, 14, 3, 7, 11, 15);
                  wg_v8 b2 = __builtin_shufflevector(a2, a3, 0, 4, 8, 12, 1, 5, 9, 13);
                  wg_v8 b3 = __builtin_shufflevector(a2, a3, 2, 6, 10, 14, 3, 7, 11, 15);
                  wg_v8 d0 = __builtin_shufflevector(b0, b2, 0, 1, 2, 3, 8, 9, 10, 11);
                  wg_v8 d1 = __builtin_shufflevector(b0, b2, 4, 5, 6, 7, 12, 13, 14, 15);
                  wg_v8 d2 = __builtin_shufflevector(b1, b3, 0, 1, 2, 3, 8, 9, 10, 11);
                  wg_v8 d3 = __builtin_shufflevector(b1, b3, 4, 5, 6, 7, 12, 13, 14, 15);
                  wg_v8 d4 = __builtin_shufflevector(d0, a4, 1, 2, 3, 4, 5, 6, 7, 8);
                  wg_v8 d5 = __builtin_shufflevector(d1, a4, 1, 2, 3, 4, 5, 6, 7, 9);
#else
                  wg_v8 d0 = WG_GATHER(r, 4), d1 = WG_GATHER(r + 1, 4), d2 = WG_GATHER(r + 2, 4);
                  wg_v8 d3 = WG_GATHER(r + 3, 4), d4 = WG_GATHER(r + 4, 4), d5 = WG_GATHER(r + 5, 4);
#endif
                  WG_BT4(d0, d1, d2, d3, d4, d5, w[i][0], w[i][1], w[i][2], w[i][3], w[i][4], w[i][5]);
              }
              for (int k = 0; k < 6; k++) {
                  wg_v8 y0, y1, y2, y3, y4, y5;
                  WG_BT4(w[0][k], w[1][k], w[2][k], w[3][k], w[4][k], w[5][k], y0, y1, y2, y3, y4, y5);
                  WG_STORE(v + (0 * 6 + k) * ps, y0);
                  WG_STORE(v + (1 * 6 + k) * ps, y1);
                  WG_STORE(v + (2 * 6 + k) * ps, y2);
                  WG_STORE(v + (3 * 6 + k) * ps, y3);
                  WG_STORE(v + (4 * 6 + k) * ps, y4);
                  WG_STORE(v + (5 * 6 + k) * ps, y5);
              }
          })

CPU_MULTI(wg_in2, (const float *restrict src, int64_t Wp, float *restrict v, int64_t ps),
          (src, Wp, v, ps), {
              wg_v8 w[4][4];
              for (int i = 0; i < 4; i++) {
                  const float *r = src + i * Wp;
#if WG_SHUFFLE
                  wg_v8 a0, a1, a2;   /* 18 contiguous floats: tile l's element j is r[2l + j] */
                  WG_LOAD(a0, r), WG_LOAD(a1, r + 8), WG_LOAD(a2, r + 16);
                  wg_v8 d0 = __builtin_shufflevector(a0, a1, 0, 2, 4, 6, 8, 10, 12, 14);
                  wg_v8 d1 = __builtin_shufflevector(a0, a1, 1, 3, 5, 7, 9, 11, 13, 15);
                  wg_v8 d2 = __builtin_shufflevector(d0, a2, 1, 2, 3, 4, 5, 6, 7, 8);
                  wg_v8 d3 = __builtin_shufflevector(d1, a2, 1, 2, 3, 4, 5, 6, 7, 9);
#else
                  wg_v8 d0 = WG_GATHER(r, 2), d1 = WG_GATHER(r + 1, 2), d2 = WG_GATHER(r + 2, 2);
                  wg_v8 d3 = WG_GATHER(r + 3, 2);
#endif
                  WG_BT2(d0, d1, d2, d3, w[i][0], w[i][1], w[i][2], w[i][3]);
              }
              for (int k = 0; k < 4; k++) {
                  wg_v8 y0, y1, y2, y3;
                  WG_BT2(w[0][k], w[1][k], w[2][k], w[3][k], y0, y1, y2, y3);
                  WG_STORE(v + (0 * 4 + k) * ps, y0);
                  WG_STORE(v + (1 * 4 + k) * ps, y1);
                  WG_STORE(v + (2 * 4 + k) * ps, y2);
                  WG_STORE(v + (3 * 4 + k) * ps, y3);
              }
          })

typedef struct wg_job {
    const wg_geom *g;
    const float *x, *u, *b, *r;   /* x, r, y: the chunk's first image */
    float *y, *v, *mm, *pad;
    int64_t nimg, T, ld;          /* images and tiles in this chunk, row length of V and M */
    int64_t bs, nb;               /* phase 2: column blocks */
} wg_job;

/* Channels [b, e) of every image of the chunk, in increasing tile order
 * (a vector's spare lanes are overwritten by the next one). */
static void wg_input_task(void *arg, int64_t b, int64_t e, int thread)
{
    const wg_job *j = arg;
    const wg_geom *g = j->g;
    float *pad = j->pad + (int64_t)thread * (g->Hp * g->Wp + 16);
    const int m = g->m;
    const int64_t ps = g->C * j->ld;
    for (int64_t c = b; c < e; c++)
        for (int64_t img = 0; img < j->nimg; img++) {
            cpu_plane_pad(j->x + (img * g->C + c) * g->H * g->W, g->H, g->W, g->ph, g->pw, g->Hp, g->Wp, 0.0f,
                          pad);
            for (int64_t ti = 0; ti < g->TH; ti++)
                for (int64_t tj = 0; tj < g->TW; tj += WG_LANES) {
                    const float *src = pad + ti * m * g->Wp + tj * m;
                    float *v = j->v + c * j->ld + img * g->TPI + ti * g->TW + tj;
                    if (m == 4)
                        wg_in4(src, g->Wp, v, ps);
                    else
                        wg_in2(src, g->Wp, v, ps);
                }
        }
}

/* ---------------------------------------------------------------- phase 2 */

static void wg_gemm_task(void *arg, int64_t task, int thread)
{
    (void)thread;
    const wg_job *j = arg;
    const wg_geom *g = j->g;
    int64_t p = task / j->nb, blk = task % j->nb;
    int64_t t0 = blk * j->bs, t1 = t0 + j->bs < j->T ? t0 + j->bs : j->T;
    const float *u = j->u + p * g->O * g->C;
    const float *v = j->v + p * g->C * j->ld + t0;
    float *mm = j->mm + p * g->O * j->ld + t0;
    if (g->C > 0)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)g->O, (blasint)(t1 - t0), (blasint)g->C,
                    1.0f, u, (blasint)g->C, v, (blasint)j->ld, 0.0f, mm, (blasint)j->ld);
    else
        for (int64_t o = 0; o < g->O; o++)
            memset(mm + o * j->ld, 0, sizeof(float) * (size_t)(t1 - t0));
    if (t1 == j->T)   /* the spare lanes the output transform reads: zeros, not stale bits */
        for (int64_t o = 0; o < g->O; o++)
            memset(mm + o * j->ld + (t1 - t0), 0, sizeof(float) * (size_t)(j->ld - j->T));
}

/* ---------------------------------------------------------------- phase 3 */


/* 8 tiles of M (element p at mm + p*ps) into out[i*4 + j][lane], + bias. */
CPU_MULTI(wg_out4, (const float *restrict mm, int64_t ps, float bias, float (*restrict out)[WG_LANES]),
          (mm, ps, bias, out), {
              wg_v8 s[6][4];
              for (int i = 0; i < 6; i++) {
                  wg_v8 x0, x1, x2, x3, x4, x5;
                  WG_LOAD(x0, mm + (i * 6 + 0) * ps);
                  WG_LOAD(x1, mm + (i * 6 + 1) * ps);
                  WG_LOAD(x2, mm + (i * 6 + 2) * ps);
                  WG_LOAD(x3, mm + (i * 6 + 3) * ps);
                  WG_LOAD(x4, mm + (i * 6 + 4) * ps);
                  WG_LOAD(x5, mm + (i * 6 + 5) * ps);
                  WG_AT4(x0, x1, x2, x3, x4, x5, s[i][0], s[i][1], s[i][2], s[i][3]);
              }
              for (int k = 0; k < 4; k++) {
                  wg_v8 y0, y1, y2, y3;
                  WG_AT4(s[0][k], s[1][k], s[2][k], s[3][k], s[4][k], s[5][k], y0, y1, y2, y3);
                  y0 += bias, y1 += bias, y2 += bias, y3 += bias;
                  memcpy(out[0 * 4 + k], &y0, sizeof y0);
                  memcpy(out[1 * 4 + k], &y1, sizeof y1);
                  memcpy(out[2 * 4 + k], &y2, sizeof y2);
                  memcpy(out[3 * 4 + k], &y3, sizeof y3);
              }
          })

CPU_MULTI(wg_out2, (const float *restrict mm, int64_t ps, float bias, float (*restrict out)[WG_LANES]),
          (mm, ps, bias, out), {
              wg_v8 s[4][2];
              for (int i = 0; i < 4; i++) {
                  wg_v8 x0, x1, x2, x3;
                  WG_LOAD(x0, mm + (i * 4 + 0) * ps);
                  WG_LOAD(x1, mm + (i * 4 + 1) * ps);
                  WG_LOAD(x2, mm + (i * 4 + 2) * ps);
                  WG_LOAD(x3, mm + (i * 4 + 3) * ps);
                  WG_AT2(x0, x1, x2, x3, s[i][0], s[i][1]);
              }
              for (int k = 0; k < 2; k++) {
                  wg_v8 y0, y1;
                  WG_AT2(s[0][k], s[1][k], s[2][k], s[3][k], y0, y1);
                  y0 += bias, y1 += bias;
                  memcpy(out[0 * 2 + k], &y0, sizeof y0);
                  memcpy(out[1 * 2 + k], &y1, sizeof y1);
              }
          })

/* 8 whole tiles of out (element [i*m + k][lane]) into the output plane at
 * y (rows OW apart): tile l's row i is y[i*OW + l*m .. + m), so each
 * output row takes 8*m contiguous floats. */
CPU_MULTI(wg_put4, (const float (*restrict out)[WG_LANES], float *restrict y, int64_t OW), (out, y, OW), {
    for (int i = 0; i < 4; i++) {
        float *restrict yr = y + i * OW;
        for (int l = 0; l < WG_LANES; l++)
            for (int k = 0; k < 4; k++)
                yr[l * 4 + k] = out[i * 4 + k][l];
    }
})

CPU_MULTI(wg_put2, (const float (*restrict out)[WG_LANES], float *restrict y, int64_t OW), (out, y, OW), {
    for (int i = 0; i < 2; i++) {
        float *restrict yr = y + i * OW;
        for (int l = 0; l < WG_LANES; l++)
            for (int k = 0; k < 2; k++)
                yr[l * 2 + k] = out[i * 2 + k][l];
    }
})

/* y = act(y + r) over n values (r may be NULL); act -1 is none. The
 * table's loops (cpu_act.h), as the unfused kernels. */
#define KACT_LOOP(EXPR)                   \
    for (int64_t i = 0; i < n; i++) {     \
        float v = y[i];                   \
        y[i] = (EXPR);                    \
    }
CPU_MULTI(wg_epilogue, (float *restrict y, const float *restrict r, int64_t n, int act, float alpha),
          (y, r, n, act, alpha), {
              if (r)
                  for (int64_t i = 0; i < n; i++)
                      y[i] += r[i];
              kact_par p = kact_par_default(act, alpha);
              KACT_CPU_BEGIN(&p);
              switch (act) {
                  KACT_CPU_CASES
              default: break;
              }
          })
#undef KACT_LOOP

static void wg_output_task(void *arg, int64_t b, int64_t e, int thread)
{
    (void)thread;
    const wg_job *j = arg;
    const wg_geom *g = j->g;
    const int m = g->m;
    const int64_t ps = g->O * j->ld, plane = g->OH * g->OW;
    float out[16][WG_LANES];
    for (int64_t it = b; it < e; it++) {
        int64_t img = it / g->O, o = it % g->O;
        float *y = j->y + it * plane;
        float bias = j->b ? j->b[o] : 0.0f;
        for (int64_t ti = 0; ti < g->TH; ti++) {
            int rows = (int)(g->OH - ti * m < m ? g->OH - ti * m : m);
            for (int64_t tj = 0; tj < g->TW; tj += WG_LANES) {
                int cnt = (int)(g->TW - tj < WG_LANES ? g->TW - tj : WG_LANES);
                const float *mm = j->mm + o * j->ld + img * g->TPI + ti * g->TW + tj;
                if (m == 4)
                    wg_out4(mm, ps, bias, out);
                else
                    wg_out2(mm, ps, bias, out);
                /* Whole vectors of 8 tiles go out as contiguous rows; so does
                 * a tile row of at most 8 tiles that is not the last one: its
                 * spare lanes spill at most one row into output rows that are
                 * written after them by this same task. */
                int whole = cnt == WG_LANES && rows == m && (tj + WG_LANES) * m <= g->OW;
                int spill = tj == 0 && cnt == g->TW && ti + 1 < g->TH && WG_LANES * m <= 2 * g->OW;
                if (whole || spill) {
                    float *yt = y + ti * m * g->OW + tj * m;
                    if (m == 4)
                        wg_put4((const float(*)[WG_LANES])out, yt, g->OW);
                    else
                        wg_put2((const float(*)[WG_LANES])out, yt, g->OW);
                    continue;
                }
                for (int l = 0; l < cnt; l++) {   /* borders: clipped tiles */
                    int64_t ow0 = (tj + l) * m;
                    int cols = (int)(g->OW - ow0 < m ? g->OW - ow0 : m);
                    for (int i = 0; i < rows; i++) {
                        float *yr = y + (ti * m + i) * g->OW + ow0;
                        for (int k = 0; k < cols; k++)
                            yr[k] = out[i * m + k][l];
                    }
                }
            }
        }
        if (j->r || g->act != -1)
            wg_epilogue(y, j->r ? j->r + it * plane : NULL, plane, g->act, g->alpha);
    }
}

/* ---------------------------------------------------------------- the kernel */

static size_t wg_ws(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, int threads)
{
    wg_geom g;
    wg_shape(n, in, out, &g);
    int64_t vfl, mfl;
    return sizeof(float) * (size_t)wg_scratch(&g, threads, &vfl, &mfl);
}

static mge_status cpu_winograd(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                               mge_tensor *const *out, mge_error *err)
{
    wg_geom g;
    wg_shape(n, in, out, &g);
    int bias = (int)mge_node_int(n, MGE_KEY_bias, 1), res = (int)mge_node_int(n, MGE_KEY_residual, 0);
    if ((g.m != 2 && g.m != 4) || n->nin != 2 + bias + res || in[0]->ndim != 4 || out[0]->ndim != 4 ||
        !cpu_blas_fits(g.O, g.NB * g.TPI + WG_LANES, g.C))
        return cpu_fallback(ctx, n, in, out, err);
    if (g.N == 0 || g.O == 0)
        return MGE_OK;
    int threads = cpu_threads(ctx);
    int64_t vfl, mfl;
    size_t need = sizeof(float) * (size_t)wg_scratch(&g, threads, &vfl, &mfl);
    if (!ctx->ws || ctx->ws_size < need)
        return mge_error_set(err, MGE_ERR_INVALID, "conv2d_winograd: workspace of %zu bytes, need %zu",
                             ctx->ws_size, need);
    float *ws = ctx->ws;
    /* Small problems run on the caller alone: three pool rounds would cost
     * more than they share (the results are the same either way). */
    mge_kctx serial = *ctx;
    serial.pool = NULL;
    if ((double)g.a * g.a * (double)g.O * (double)g.C * (double)(g.NB * g.TPI) < 1e6)
        ctx = &serial;
    const int64_t aa = (int64_t)g.a * g.a, inplane = g.H * g.W, outplane = g.OH * g.OW;
    for (int64_t i0 = 0; i0 < g.N; i0 += g.NB) {
        int64_t nimg = g.N - i0 < g.NB ? g.N - i0 : g.NB;
        wg_job j = {&g,
                    (const float *)in[0]->data + i0 * g.C * inplane,
                    in[1]->data,
                    bias ? in[2]->data : NULL,
                    res ? (const float *)in[2 + bias]->data + i0 * g.O * outplane : NULL,
                    (float *)out[0]->data + i0 * g.O * outplane,
                    ws,
                    ws + vfl,
                    ws + vfl + mfl,
                    nimg,
                    nimg * g.TPI,
                    nimg * g.TPI + WG_LANES,
                    0,
                    0};
        /* blocks of columns from the shape alone (see the header comment) */
        j.nb = (j.T + WG_GEMM_COLS - 1) / WG_GEMM_COLS;
        j.bs = (j.T + j.nb - 1) / j.nb;
        j.nb = (j.T + j.bs - 1) / j.bs;
        int64_t work = nimg * inplane * aa;   /* per channel, roughly */
        cpu_parallel(ctx, g.C, work >= 8192 ? 1 : 8192 / (work ? work : 1), wg_input_task, &j);
        mge_pool_run(ctx->pool, aa * j.nb, wg_gemm_task, &j);
        cpu_parallel(ctx, nimg * g.O, outplane * 4 >= 8192 ? 1 : 8192 / (outplane * 4 + 1), wg_output_task, &j);
    }
    return MGE_OK;
}

/* ---------------------------------------------------------------- winograd_weight */

typedef struct ww_job {
    const float *w;
    float *u, *ws;   /* ws: a*a*C floats per thread */
    int64_t O, C;
    int m;
} ww_job;

static void ww_task(void *arg, int64_t o0, int64_t o1, int thread)
{
    const ww_job *j = arg;
    const int64_t aa = (int64_t)(j->m + 2) * (j->m + 2);
    float *t = j->ws + (int64_t)thread * aa * j->C;
    for (int64_t o = o0; o < o1; o++) {
        mge_winograd_weight_transform(j->w + o * j->C * 9, 1, j->C, j->m, t);
        for (int64_t p = 0; p < aa; p++)
            memcpy(j->u + (p * j->O + o) * j->C, t + p * j->C, sizeof(float) * (size_t)j->C);
    }
}

static size_t ww_ws(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, int threads)
{
    (void)out;
    int64_t a = mge_node_int(n, MGE_KEY_tile, 4) + 2;
    int64_t C = in[0]->ndim == 4 ? in[0]->dims[1] : 0;
    return sizeof(float) * (size_t)(a * a * C * (threads < 1 ? 1 : threads));
}

static mge_status cpu_winograd_weight(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                      mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *w = in[0];
    int m = (int)mge_node_int(n, MGE_KEY_tile, 4);
    if ((m != 2 && m != 4) || w->ndim != 4 || w->dims[2] != 3 || w->dims[3] != 3 || out[0]->ndim != 3)
        return cpu_fallback(ctx, n, in, out, err);
    ww_job j = {w->data, out[0]->data, ctx->ws, w->dims[0], w->dims[1], m};
    if (j.O == 0 || j.C == 0)
        return MGE_OK;
    int threads = cpu_threads(ctx);
    size_t need = sizeof(float) * (size_t)((int64_t)(m + 2) * (m + 2) * j.C * threads);
    if (!ctx->ws || ctx->ws_size < need)
        return mge_error_set(err, MGE_ERR_INVALID, "winograd_weight: workspace of %zu bytes, need %zu",
                             ctx->ws_size, need);
    /* about 300 flops per (o, c) */
    cpu_parallel(ctx, j.O, 1 + CPU_GRAIN / (j.C * 300 + 1), ww_task, &j);
    return MGE_OK;
}

/* also the blocked-layout Winograd ops (cpu_winograd_nchwc.c) */
void mge_cpu_register_winograd(mge_backend *b)
{
    mge_cpu_register_winograd_nchwc(b);
    cpu_isa_avx2();   /* decided once, before any kernel runs on pool threads */
    b->k[MGE_OP_CONV2D_WINOGRAD][MGE_F32] = (mge_kernel){.run = cpu_winograd, .ws = wg_ws};
    b->k[MGE_OP_WINOGRAD_WEIGHT][MGE_F32] = (mge_kernel){.run = cpu_winograd_weight, .ws = ww_ws};
}
