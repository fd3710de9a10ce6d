/* cpu_conv_rows.c — stride-1 convolutions as a GEMM over shifted rows of
 * the zero-padded image, with no im2col matrix (cpu.h, cpu_rows_*).
 *
 * With the input of one image and group padded to [Cg][Hp][Wp] (Wp = W +
 * 2*pw) and the output computed on the padded width too (column q = oh *
 * Wp + ow; columns ow >= OW are junk), row (c, i, j) of the im2col matrix
 * is one contiguous run of the padded plane, starting at c*Hp*Wp + i*dh*Wp
 * + j*dw. mge_sgemm_ptr packs B straight from those row pointers, so the
 * im2col copy (short segments with padding checks, up to a third of a
 * conv's time on 14x14 planes) is gone; the price is the junk columns
 * ((Wp - OW) / OW more multiply-adds: 14% at 14x14, 7% at 28x28), partly
 * paid back by fewer edge tiles (14 x 16 columns fill seven 32-wide panels
 * where 196 leave a 4-wide one).
 *
 *   forward:     Y'[Og][q] = W_g x rows, then cropped (+ bias) into y;
 *   grad input:  the forward of dy with the flipped, transposed weights
 *                and pad (k-1)*d - p, which is dx at stride 1;
 *   grad weight: dW_g^T [K][Og] += rows x dy'^T, dy'^T [q][Og] being dy
 *                transposed onto the padded width with zeros in the junk
 *                columns (so they add nothing), then transposed into dW.
 * Tasks are (image, group, block of output rows); each element of every
 * result comes from one GEMM with K blocks that depend on K alone, so
 * results are the same for any thread count. */
#include "cpu_conv_rows.h"

#include <string.h>

/* Pad plus one row: the last tap's row run (i = kh-1, j = kw-1) ends
 * (kw-1)*dw floats past the padded image, which is less than one row. */
static int64_t rows_hp(const cpu_conv *c)
{
    return c->H + 2 * c->ph + 1;
}

static int64_t rows_wp(const cpu_conv *c)
{
    return c->W + 2 * c->pw;
}

/* Output rows per forward task: the C block (Og x rows*Wp) about 256 KiB. */
static int64_t rows_per_block(const cpu_conv *c)
{
    int64_t wp = rows_wp(c), r = 65536 / (c->Og * wp > 0 ? c->Og * wp : 1);
    r = r < 1 ? 1 : r;
    return r < c->OH ? r : c->OH;
}

/* Floats of a pointer table of n entries, rounded to whole cache lines. */
static int64_t ptr_floats(int64_t n)
{
    return ((int64_t)sizeof(float *) * n / (int64_t)sizeof(float) + 15) / 16 * 16;
}

static int64_t pad_floats(const cpu_conv *c)
{
    return (c->Cg * rows_hp(c) * rows_wp(c) + 15) / 16 * 16;
}

int cpu_rows_ok(const cpu_conv *c)
{
    if (c->sh != 1 || c->sw != 1 || (c->Cg == 1 && c->G > 1) || cpu_conv_1x1(c))
        return 0;
    /* junk columns at most about 1/6 more work; enough tasks by image; and
     * only where our sgemm is the one in use (AVX-512, not MGE_GEMM=openblas) */
    int64_t wp = rows_wp(c);
    if (c->OW <= 0 || 6 * (wp - c->OW) > c->OW || c->N * c->G < 2 || c->K <= 0 || c->Og <= 0)
        return 0;
    if (!mge_sgemm_native())
        return 0;
    /* per-thread scratch within 4M floats (16 MiB) */
    return cpu_rows_fwd_floats(c) <= ((int64_t)1 << 22) && cpu_rows_gw_floats(c) <= ((int64_t)1 << 22);
}

/* Rows [r0, r1) of the padded image pad [Cg][Hp][Wp] from x_g [Cg][H][W]:
 * zero borders and the extra row. */
CPU_MULTI(rows_pad, (const cpu_conv *c, const float *restrict x, float *restrict pad, int64_t r0, int64_t r1),
          (c, x, pad, r0, r1), {
              const int64_t H = c->H, W = c->W, Hp = rows_hp(c), Wp = rows_wp(c), ph = c->ph, pw = c->pw;
              for (int64_t ch = 0; ch < c->Cg; ch++) {
                  const float *restrict xs = x + ch * H * W;
                  float *restrict d = pad + ch * Hp * Wp;
                  for (int64_t hp = r0; hp < r1; hp++) {
                      float *restrict r = d + hp * Wp;
                      int64_t h = hp - ph;
                      if (h < 0 || h >= H) {
                          memset(r, 0, sizeof(float) * (size_t)Wp);
                          continue;
                      }
                      for (int64_t k = 0; k < pw; k++)
                          r[k] = 0.0f, r[pw + W + k] = 0.0f;
                      for (int64_t k = 0; k < W; k++)
                          r[pw + k] = xs[h * W + k];
                  }
              }
          })

/* rows[k] for k = (c, i, j): the tap's run in the padded image, from
 * padded row oh0 + i*dh. */
static void rows_table(const cpu_conv *c, const float *pad, int64_t oh0, const float **rows)
{
    const int64_t Hp = rows_hp(c), Wp = rows_wp(c);
    int64_t k = 0;
    for (int64_t ch = 0; ch < c->Cg; ch++)
        for (int64_t i = 0; i < c->kh; i++)
            for (int64_t j = 0; j < c->kw; j++)
                rows[k++] = pad + ch * Hp * Wp + (oh0 + i * c->dh) * Wp + j * c->dw;
}

/* ---------------------------------------------------------------- forward */

int64_t cpu_rows_fwd_floats(const cpu_conv *c)
{
    return ptr_floats(c->K) + pad_floats(c) + (c->Og * rows_per_block(c) * rows_wp(c) + 15) / 16 * 16;
}

typedef struct rows_job {
    const cpu_conv *c;
    const float *x, *w, *b;
    float *y, *ws;
    int64_t rb, nrb;   /* output rows per block, blocks per image */
    cpu_epi epi;
} rows_job;

/* Y'[o][r*Wp + ow] into y[o][oh0 + r][ow], plus the bias. */
CPU_MULTI(rows_crop,
          (const cpu_conv *c, const float *restrict yp, float *restrict y, const float *restrict b, int64_t oh0,
           int64_t nr),
          (c, yp, y, b, oh0, nr), {
              const int64_t Wp = rows_wp(c), OW = c->OW, P = c->P;
              for (int64_t o = 0; o < c->Og; o++) {
                  float bv = b ? b[o] : 0.0f;
                  for (int64_t r = 0; r < nr; r++) {
                      const float *restrict s = yp + (o * nr + r) * Wp;
                      float *restrict d = y + o * P + (oh0 + r) * OW;
                      for (int64_t k = 0; k < OW; k++)
                          d[k] = s[k] + bv;
                  }
              }
          })

static void rows_fwd_task(void *arg, int64_t task, int thread)
{
    const rows_job *j = arg;
    const cpu_conv *c = j->c;
    int64_t ig = task / j->nrb, blk = task % j->nrb, img = ig / c->G, g = ig % c->G;
    int64_t oh0 = blk * j->rb, nr = c->OH - oh0 < j->rb ? c->OH - oh0 : j->rb;
    float *ws = j->ws + (size_t)thread * (size_t)cpu_rows_fwd_floats(c);
    const float **rows = (const float **)(void *)ws;
    float *pad = ws + ptr_floats(c->K), *yp = pad + pad_floats(c);
    /* the padded rows this block reads (through the run past its last row) */
    int64_t r1 = oh0 + nr + (c->kh - 1) * c->dh + 1, hp = rows_hp(c);
    rows_pad(c, j->x + (img * c->C + g * c->Cg) * c->H * c->W, pad, oh0, r1 < hp ? r1 : hp);
    rows_table(c, pad, oh0, rows);
    const int64_t Wp = rows_wp(c);
    mge_sgemm_ptr(NULL, c->Og, nr * Wp, c->K, 1.0f, NULL, j->w + g * c->Og * c->K, c->K, rows, NULL, 0, 0.0f, yp,
                  nr * Wp);
    float *y = j->y + (img * c->O + g * c->Og) * c->P;
    rows_crop(c, yp, y, j->b ? j->b + g * c->Og : NULL, oh0, nr);
    cpu_epi_block(&j->epi, j->y, y + oh0 * c->OW, c->P, c->Og, nr * c->OW);
}

void cpu_rows_conv(const mge_kctx *ctx, const cpu_conv *c, const float *x, const float *w, const float *b, float *y,
                   const cpu_epi *epi, float *ws)
{
    rows_job j = {c, x, w, b, y, ws, rows_per_block(c), 0, *epi};
    j.nrb = (c->OH + j.rb - 1) / j.rb;
    mge_pool_run(ctx->pool, c->N * c->G * j.nrb, rows_fwd_task, &j);
}

/* ---------------------------------------------------------------- grad input */

/* dx = conv(dy, w'), w'[g][c][o][i][j] = w[g][o][c][kh-1-i][kw-1-j] */
int cpu_rows_gi_geom(const cpu_conv *c, cpu_conv *t)
{
    if (c->sh != 1 || c->sw != 1)
        return 0;
    *t = *c;
    t->C = c->O, t->H = c->OH, t->W = c->OW;
    t->O = c->C, t->OH = c->H, t->OW = c->W;
    t->Cg = c->Og, t->Og = c->Cg;
    t->ph = (c->kh - 1) * c->dh - c->ph, t->pw = (c->kw - 1) * c->dw - c->pw;
    t->P = c->H * c->W, t->K = t->Cg * c->ksz;
    return t->ph >= 0 && t->pw >= 0 && cpu_rows_ok(t);
}

int64_t cpu_rows_gi_floats(const cpu_conv *t, int threads)
{
    return (t->O * t->K + 15) / 16 * 16 + cpu_rows_fwd_floats(t) * (threads < 1 ? 1 : threads);
}

void cpu_rows_grad_input(const mge_kctx *ctx, const cpu_conv *c, const cpu_conv *t, const float *dy, const float *w,
                         float *dx, float *ws)
{
    /* the flipped weights: [G][Cg][Og][kh][kw] */
    float *wf = ws;
    const int64_t ksz = c->ksz;
    for (int64_t g = 0; g < c->G; g++)
        for (int64_t ch = 0; ch < c->Cg; ch++)
            for (int64_t o = 0; o < c->Og; o++) {
                const float *s = w + ((g * c->Og + o) * c->Cg + ch) * ksz;
                float *d = wf + ((g * c->Cg + ch) * c->Og + o) * ksz;
                for (int64_t k = 0; k < ksz; k++)
                    d[k] = s[ksz - 1 - k];
            }
    cpu_epi none = {0};
    cpu_rows_conv(ctx, t, dy, wf, NULL, dx, &none, ws + (t->O * t->K + 15) / 16 * 16);
}

/* ---------------------------------------------------------------- grad weight */

int64_t cpu_rows_gw_floats(const cpu_conv *c)
{
    const int64_t Q = c->OH * rows_wp(c);
    return ptr_floats(c->K) + pad_floats(c) + (Q * c->Og + 15) / 16 * 16 + (c->K * c->Og + 15) / 16 * 16;
}

/* dy_g [Og][OH][OW] into dt [OH*Wp][Og], zeros in the junk columns: one
 * transpose per output row. */
static void rows_dyt(const cpu_conv *c, const float *dy, float *dt)
{
    const int64_t Wp = rows_wp(c), OW = c->OW, Og = c->Og;
    for (int64_t oh = 0; oh < c->OH; oh++) {
        cpu_transpose(dy + oh * OW, Og, OW, c->P, dt + oh * Wp * Og, Og);
        memset(dt + (oh * Wp + OW) * Og, 0, sizeof(float) * (size_t)((Wp - OW) * Og));
    }
}

void cpu_rows_grad_weight(const cpu_conv *c, const float *x, const float *dy, int64_t g, int64_t i0, int64_t i1,
                          int64_t k0, int64_t k1, float *dst, float *ws)
{
    const int64_t Q = c->OH * rows_wp(c), Og = c->Og, K = c->K;
    const float **rows = (const float **)(void *)ws;
    float *pad = ws + ptr_floats(K), *dt = pad + pad_floats(c), *acc = dt + (Q * Og + 15) / 16 * 16;
    rows_table(c, pad, 0, rows);   /* the same runs of pad for every image */
    for (int64_t img = i0; img < i1; img++) {
        rows_pad(c, x + (img * c->C + g * c->Cg) * c->H * c->W, pad, 0, rows_hp(c));
        rows_dyt(c, dy + (img * c->O + g * Og) * c->P, dt);
        mge_sgemm_ptr(NULL, k1 - k0, Og, Q, 1.0f, rows + k0, NULL, 0, NULL, dt, Og, img == i0 ? 0.0f : 1.0f, acc, Og);
    }
    for (int64_t o = 0; o < Og; o++)
        for (int64_t k = k0; k < k1; k++)
            dst[o * K + k - k0] = i1 > i0 ? acc[(k - k0) * Og + o] : 0.0f;
}
