/* cpu_grad_conv.c — conv2d and linear gradients (f32) on OpenBLAS.
 *
 * conv2d_grad_input(dy, weight, x) -> dx:
 *   - one input channel per group, several groups (depthwise): per input
 *     plane, at stride 1 a correlation of the zero-padded dy with the
 *     flipped taps (gathering, contiguous loops), else dy scattered through
 *     each tap into a zero-padded plane, then cropped;
 *   - otherwise per image and group cols = W_g^T dY_g (sgemm), then col2im
 *     adds the columns onto dx, one cache-sized block of columns at a time
 *     (1x1 stride-1 unpadded convs write dx straight from the sgemm).
 *     Channel blocks of a group are tasks of their own when images are few.
 * conv2d_grad_weight(dy, x, weight) -> dw:
 *   - depthwise: per output channel, every tap a dot product of dy with
 *     the shifted padded input plane, over all images;
 *   - otherwise dW_g = sum over images of dY_g im2col(x)^T, one cache-sized
 *     block of pixels at a time (sgemm with beta = 1). Column blocks of dW
 *     are tasks of their own; then the images are cut into batch blocks,
 *     each summed into its own copy of dW (the first into dW itself), and
 *     the copies are added in block order at the end.
 * linear_grad_input = dy W and linear_grad_weight = dy^T x: one sgemm
 * each, cut into blocks of rows or columns of the result.
 * Every cut depends on the shapes alone and every result element is summed
 * by one task in a fixed order, so results are bit-identical for any
 * --threads (OpenBLAS runs single-threaded inside pool tasks, kernels/cpu/cpu_blas.c). */
#include "cpu_conv_rows.h"

#include <cblas.h>
#include <string.h>

/* ---------------------------------------------------------------- shapes */

typedef cpu_conv gconv;

/* dy [N,O,OH,OW], x [N,C,H,W], w [O,Cg,kh,kw] */
static void gconv_shape(const mge_node *n, const mge_tensor *dy, const mge_tensor *x, const mge_tensor *w, gconv *c)
{
    cpu_conv_shape(n, x, w, dy, c);
}

/* The per-plane depthwise paths serve one input channel per group when
 * there are several groups; a single-group conv on one input channel (a
 * network's first layer on grey images) is better served by one sgemm
 * over all its output channels. */
static int gconv_dw(const gconv *c)
{
    return c->Cg == 1 && c->G > 1;
}

static mge_status need_ws(const mge_kctx *ctx, const mge_node *n, size_t need, mge_error *err)
{
    if (need && (!ctx->ws || ctx->ws_size < need))
        return mge_error_set(err, MGE_ERR_INVALID, "%s: workspace of %zu bytes, need %zu", mge_kctx_opname(ctx, n),
                             ctx->ws_size, need);
    return MGE_OK;
}

/* Work below which a task is not worth its own packing (see cpu_gemm.c). */
#define BLOCK_FLOPS 4e6
/* Tasks wanted from one conv gradient before blocks are cut finer. */
#define WANT_TASKS 16
#define MAX_BATCH_BLOCKS 8
/* Bound on the extra dW copies of the batch blocks. */
#define MAX_ACC_BYTES ((size_t)64 << 20)

/* ---------------------------------------------------------------- im2col / col2im */

/* dx += col2im of rows [r0, r1) and pixels [p0, p1) of cols (leading
 * dimension p1 - p0), row by row in order. */
CPU_MULTI(col2im_block,
          (const gconv *c, const float *restrict col, float *restrict dx, int64_t p0, int64_t p1, int64_t r0,
           int64_t r1),
          (c, col, dx, p0, p1, r0, r1), {
              const int64_t OW = c->OW, H = c->H, W = c->W, kw = c->kw, ksz = c->ksz, ld = p1 - p0;
              const int64_t sh = c->sh, sw = c->sw, ph = c->ph, pw = c->pw, dh = c->dh, dw = c->dw;
              for (int64_t r = r0; r < r1; r++) {
                  int64_t ch = r / ksz, i = (r % ksz) / kw, j = r % kw;
                  float *xc = dx + ch * H * W + j * dw - pw;
                  int64_t lo, hi;
                  cpu_valid_range(OW, W, sw, pw, j * dw, &lo, &hi);
                  const float *s = col + (r - r0) * ld - p0;
                  for (int64_t p = p0; p < p1;) {
                      int64_t oh = p / OW, ow0 = p % OW, ow1 = OW - ow0 < p1 - p ? OW : ow0 + (p1 - p);
                      int64_t ih = oh * sh - ph + i * dh;
                      p += ow1 - ow0;
                      if (ih < 0 || ih >= H)
                          continue;
                      int64_t a = lo < ow0 ? ow0 : lo, b = hi > ow1 ? ow1 : hi;
                      float *restrict d = xc + ih * W;
                      const float *restrict sr = s + oh * OW;
                      if (sw == 1)
                          for (int64_t ow = a; ow < b; ow++)
                              d[ow] += sr[ow];
                      else
                          for (int64_t ow = a; ow < b; ow++)
                              d[ow * sw] += sr[ow];
                  }
              }
          })

/* ---------------------------------------------------------------- bf16 */

/* precision=bf16 (mixed-precision training) on a CPU with a bf16 level:
 * the same products on mge_bgemm (cpu_bgemm.c), operands rounded to bf16,
 * sums in f32; the B operand packed per call (no prepared state in
 * training). Convolutions go per image and group, the GEMM itself over
 * the pool; grad_weight sums the images in order into dW (beta = 1). */

static size_t bg_round(size_t n)
{
    return (n + 63) / 64 * 64;
}

/* ws bytes: [cols floats][packed B][bgemm scratch] */
static size_t bg_need(size_t cols, int64_t M, int64_t N, int64_t K, int threads)
{
    return bg_round(sizeof(float) * cols) + bg_round(mge_bgemm_pack_size(K, N)) + mge_bgemm_ws(M, N, K, threads) + 64;
}

static void bg_parts(void *ws, size_t cols, int64_t K, int64_t N, float **col, void **pb, void **rest)
{
    char *p = (char *)(((uintptr_t)ws + 63) & ~(uintptr_t)63);
    *col = (float *)p;
    p += bg_round(sizeof(float) * cols);
    *pb = p;
    *rest = p + bg_round(mge_bgemm_pack_size(K, N));
}

/* the conv gradients' bf16 path: groups of more than one channel */
static int bg_conv(const mge_node *n, const gconv *c)
{
    return cpu_bf16_node(n) && !gconv_dw(c) && c->Cg > 1 && c->K > 0 && c->P > 0 && c->Og > 0;
}

static size_t bg_gi_need(const gconv *c, int threads)
{
    return bg_need(cpu_conv_1x1(c) ? 0 : (size_t)(c->K * c->P), c->K, c->P, c->Og, threads);
}

static size_t bg_gw_need(const gconv *c, int threads)
{
    return bg_need(cpu_conv_1x1(c) ? 0 : (size_t)(c->K * c->P), c->Og, c->K, c->P, threads);
}

typedef struct bg_col_job {
    const gconv *c;
    const float *x;
    float *col;
} bg_col_job;

static void bg_col_rows(void *a, int64_t r0, int64_t r1, int thread)
{
    (void)thread;
    const bg_col_job *j = a;
    cpu_im2col(j->c, j->x, j->col + r0 * j->c->P, 0, j->c->P, r0, r1);
}

/* cols[K, P] = W_g^T dY_g, then col2im onto dx (zeroed first) */
static mge_status bg_grad_input(const mge_kctx *ctx, const mge_node *n, const gconv *c, const float *dy,
                                const float *w, float *dx, mge_error *err)
{
    mge_status st = need_ws(ctx, n, bg_gi_need(c, cpu_threads(ctx)), err);
    if (st)
        return st;
    int direct = cpu_conv_1x1(c);
    float *col;
    void *pb, *rest;
    bg_parts(ctx->ws, direct ? 0 : (size_t)(c->K * c->P), c->Og, c->P, &col, &pb, &rest);
    for (int64_t img = 0; img < c->N; img++)
        for (int64_t g = 0; g < c->G; g++) {
            const float *dyg = dy + (img * c->O + g * c->Og) * c->P, *wg = w + g * c->Og * c->K;
            float *dxg = dx + (img * c->C + g * c->Cg) * c->H * c->W;
            mge_bgemm_pack(0, c->Og, c->P, dyg, c->P, pb);
            if (direct) {
                mge_bgemm(ctx, 1, c->K, c->P, c->Og, wg, c->K, pb, 0.0f, dxg, c->P, rest);
                continue;
            }
            mge_bgemm(ctx, 1, c->K, c->P, c->Og, wg, c->K, pb, 0.0f, col, c->P, rest);
            memset(dxg, 0, sizeof(float) * (size_t)(c->Cg * c->H * c->W));
            col2im_block(c, col, dxg, 0, c->P, 0, c->K);
        }
    return MGE_OK;
}

/* dW_g = sum over images of dY_g im2col(x)^T */
static mge_status bg_grad_weight(const mge_kctx *ctx, const mge_node *n, const gconv *c, const float *dy,
                                 const float *x, float *dw, mge_error *err)
{
    mge_status st = need_ws(ctx, n, bg_gw_need(c, cpu_threads(ctx)), err);
    if (st)
        return st;
    int direct = cpu_conv_1x1(c);
    float *col;
    void *pb, *rest;
    bg_parts(ctx->ws, direct ? 0 : (size_t)(c->K * c->P), c->P, c->K, &col, &pb, &rest);
    if (c->N == 0)
        memset(dw, 0, sizeof(float) * (size_t)(c->O * c->K));
    for (int64_t img = 0; img < c->N; img++)
        for (int64_t g = 0; g < c->G; g++) {
            const float *xg = x + (img * c->C + g * c->Cg) * c->H * c->W, *src = xg;
            if (!direct) {
                bg_col_job j = {c, xg, col};
                cpu_parallel(ctx, c->K, c->P >= 4096 ? 1 : 4096 / c->P, bg_col_rows, &j);
                src = col;
            }
            mge_bgemm_pack(1, c->P, c->K, src, c->P, pb);   /* B = cols^T [P, K] */
            mge_bgemm(ctx, 0, c->Og, c->K, c->P, dy + (img * c->O + g * c->Og) * c->P, c->P, pb,
                      img ? 1.0f : 0.0f, dw + g * c->Og * c->K, c->K, rest);
        }
    return MGE_OK;
}

/* linear grads: gi dx[M,K] = dy[M,O] W[O,K]; gw dW[O,K] = dy^T x[M,K] */
static size_t bg_lin_need(const mge_node *n, int64_t M, int64_t O, int64_t K, int threads)
{
    return n->op == MGE_OP_LINEAR_GRAD_INPUT ? bg_need(0, M, K, O, threads) : bg_need(0, O, K, M, threads);
}

static void lin_dims(mge_tensor *const *in, int64_t *M, int64_t *O, int64_t *K)
{
    const mge_tensor *dy = in[0], *o = in[1];
    *O = dy->dims[dy->ndim - 1], *K = o->dims[o->ndim - 1];
    *M = 1;
    for (int i = 0; i < dy->ndim - 1; i++)
        *M *= dy->dims[i];
}

static size_t lin_grad_ws(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, int threads)
{
    size_t ref = cpu_ref_ws(n, in, out, threads);
    if (!cpu_bf16_node(n))
        return ref;
    int64_t M, O, K;
    lin_dims(in, &M, &O, &K);
    size_t own = bg_lin_need(n, M, O, K, threads);
    return own > ref ? own : ref;
}

static mge_status bg_linear_grad(const mge_kctx *ctx, const mge_node *n, const float *dy, const float *o, float *res,
                                 int64_t M, int64_t O, int64_t K, mge_error *err)
{
    mge_status st = need_ws(ctx, n, bg_lin_need(n, M, O, K, cpu_threads(ctx)), err);
    if (st)
        return st;
    float *col;
    void *pb, *rest;
    if (n->op == MGE_OP_LINEAR_GRAD_INPUT) {
        bg_parts(ctx->ws, 0, O, K, &col, &pb, &rest);
        mge_bgemm_pack(0, O, K, o, K, pb);
        mge_bgemm(ctx, 0, M, K, O, dy, O, pb, 0.0f, res, K, rest);
    } else {
        bg_parts(ctx->ws, 0, M, K, &col, &pb, &rest);
        mge_bgemm_pack(0, M, K, o, K, pb);
        mge_bgemm(ctx, 1, O, K, M, dy, O, pb, 0.0f, res, K, rest);
    }
    return MGE_OK;
}

/* Pixels per column block of an im2col/col2im buffer of `rows` rows:
 * about 512 KiB, so the block stays in cache between the sgemm and the
 * copy; whole 16-wide tiles; from the shape alone. */
static int64_t col_block(const gconv *c, int64_t rows)
{
    int64_t b = rows > 0 ? 131072 / rows : c->P;
    b = b < 256 ? 256 : (b + 15) / 16 * 16;
    return b < c->P ? b : c->P;
}

/* ---------------------------------------------------------------- depthwise */

/* Padded plane covering every window: conv output sizes are floors, so
 * H + 2*ph (and W + 2*pw) suffice. */
static int64_t dw_plane_floats(const gconv *c)
{
    return (c->H + 2 * c->ph) * (c->W + 2 * c->pw);
}

/* dx plane of input channel ch of one image: the dy planes of its Og
 * output channels scattered through their taps. */
CPU_MULTI(dw_grad_input_plane,
          (const gconv *c, const float *restrict dy, const float *restrict w, float *restrict dx,
           float *restrict pad),
          (c, dy, w, dx, pad), {
              const int64_t H = c->H, W = c->W, OH = c->OH, OW = c->OW, Wp = W + 2 * c->pw, Hp = H + 2 * c->ph;
              const int64_t kh = c->kh, kw = c->kw, sh = c->sh, sw = c->sw, dh = c->dh, dw = c->dw;
              for (int64_t k = 0; k < Hp * Wp; k++)
                  pad[k] = 0.0f;
              for (int64_t m = 0; m < c->Og; m++) {
                  const float *restrict wm = w + m * kh * kw;
                  const float *restrict dym = dy + m * OH * OW;
                  for (int64_t oh = 0; oh < OH; oh++) {
                      const float *restrict dyr = dym + oh * OW;
                      for (int64_t i = 0; i < kh; i++) {
                          float *restrict row = pad + (oh * sh + i * dh) * Wp;
                          for (int64_t j = 0; j < kw; j++) {
                              const float wv = wm[i * kw + j];
                              float *restrict dst = row + j * dw;
                              if (sw == 1)
                                  for (int64_t ow = 0; ow < OW; ow++)
                                      dst[ow] += wv * dyr[ow];
                              else
                                  for (int64_t ow = 0; ow < OW; ow++)
                                      dst[ow * sw] += wv * dyr[ow];
                          }
                      }
                  }
              }
              for (int64_t ih = 0; ih < H; ih++)
                  memcpy(dx + ih * W, pad + (ih + c->ph) * Wp + c->pw, sizeof(float) * (size_t)W);
          })

/* Stride 1: dx is the correlation of dy, zero-padded, with the flipped
 * taps, so each input element gathers instead of being scattered to. dy
 * goes into a plane with (kh-1)*dh rows and (kw-1)*dw columns of zeros
 * before it (and enough after), of width Wq; the output is computed
 * "wide" (rows of width Wq, the extra columns discarded), so each tap is
 * one contiguous loop over the whole plane, fused for 3x3. */
static void dw_s1_dims(const gconv *c, int64_t *Hq, int64_t *Wq)
{
    int64_t h = c->H + c->ph > c->OH ? c->H + c->ph : c->OH, w = c->W + c->pw > c->OW ? c->W + c->pw : c->OW;
    *Hq = h + (c->kh - 1) * c->dh;
    *Wq = w + (c->kw - 1) * c->dw;
}

static int64_t dw_s1_floats(const gconv *c)
{
    int64_t Hq, Wq;
    dw_s1_dims(c, &Hq, &Wq);
    return Hq * Wq + c->H * Wq + 16;
}

CPU_MULTI(dw_grad_input_s1,
          (const gconv *c, const float *restrict dy, const float *restrict w, float *restrict dx,
           float *restrict dyp, float *restrict wide),
          (c, dy, w, dx, dyp, wide), {
              const int64_t H = c->H, W = c->W, OH = c->OH, OW = c->OW, kh = c->kh, kw = c->kw;
              const int64_t dh = c->dh, dw = c->dw, T = (kh - 1) * dh, Lm = (kw - 1) * dw;
              int64_t Hq, Wq;
              dw_s1_dims(c, &Hq, &Wq);
              const int64_t L = (H - 1) * Wq + W, base = (c->ph + T) * Wq + c->pw + Lm;
              for (int64_t k = 0; k < Hq * Wq; k++)
                  dyp[k] = 0.0f;
              for (int64_t k = 0; k < L; k++)
                  wide[k] = 0.0f;
              const int fused3 = kh == 3 && kw == 3 && dh == 1 && dw == 1;
              for (int64_t m = 0; m < c->Og; m++) {
                  const float *restrict wm = w + m * kh * kw;
                  for (int64_t oh = 0; oh < OH; oh++)
                      memcpy(dyp + (oh + T) * Wq + Lm, dy + (m * OH + oh) * OW, sizeof(float) * (size_t)OW);
                  const float *restrict p = dyp + base;
                  if (fused3) {
                      const float *restrict p0 = p, *restrict p1 = p - Wq, *restrict p2 = p - 2 * Wq;
                      for (int64_t k = 0; k < L; k++)
                          wide[k] += wm[0] * p0[k] + wm[1] * p0[k - 1] + wm[2] * p0[k - 2] + wm[3] * p1[k] +
                                     wm[4] * p1[k - 1] + wm[5] * p1[k - 2] + wm[6] * p2[k] + wm[7] * p2[k - 1] +
                                     wm[8] * p2[k - 2];
                      continue;
                  }
                  for (int64_t i = 0; i < kh; i++)
                      for (int64_t j = 0; j < kw; j++) {
                          const float wv = wm[i * kw + j];
                          const float *restrict src = p - i * dh * Wq - j * dw;
                          for (int64_t k = 0; k < L; k++)
                              wide[k] += wv * src[k];
                      }
              }
              for (int64_t ih = 0; ih < H; ih++)
                  memcpy(dx + ih * W, wide + ih * Wq, sizeof(float) * (size_t)W);
          })

static int64_t dwi_floats(const gconv *c)
{
    return c->sh == 1 && c->sw == 1 ? dw_s1_floats(c) : dw_plane_floats(c);
}

typedef struct dwi_job {
    const gconv *c;
    const float *dy, *w;
    float *dx, *ws;
} dwi_job;

static void dwi_task(void *a, int64_t p0, int64_t p1, int thread)
{
    const dwi_job *j = a;
    const gconv *c = j->c;
    float *pad = j->ws + (size_t)thread * (size_t)dwi_floats(c);
    int64_t Hq, Wq;
    dw_s1_dims(c, &Hq, &Wq);
    for (int64_t p = p0; p < p1; p++) {
        int64_t img = p / c->C, ch = p % c->C;   /* one input channel per group: ch is the group */
        const float *dy = j->dy + (img * c->O + ch * c->Og) * c->P, *w = j->w + ch * c->Og * c->ksz;
        if (c->sh == 1 && c->sw == 1)
            dw_grad_input_s1(c, dy, w, j->dx + p * c->H * c->W, pad, pad + Hq * Wq);
        else
            dw_grad_input_plane(c, dy, w, j->dx + p * c->H * c->W, pad);
    }
}

/* Sum of a[k] * b[k * sb] over k in [0, n), in 32 lanes: it vectorizes
 * without reassociation flags, as four independent FMA chains. */
static inline CPU_BASE float dot_lanes(const float *restrict a, const float *restrict b, int64_t n, int64_t sb)
{
    float acc[32];
    for (int l = 0; l < 32; l++)
        acc[l] = 0.0f;
    int64_t k = 0;
    if (sb == 1)
        for (; k + 32 <= n; k += 32)
            for (int l = 0; l < 32; l++)
                acc[l] += a[k + l] * b[k + l];
    for (int l = 0; l < 8; l++)
        acc[l] = (acc[l] + acc[l + 8]) + (acc[l + 16] + acc[l + 24]);
    float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (; k < n; k++)
        s += a[k] * b[k * sb];
    return s;
}

/* dw[o] (kh*kw taps) for one output channel: over every image, the dy
 * plane against the shifted padded input plane. At stride 1 dy is laid out
 * "wide" (rows of the padded width, zeros between), so a tap is one dot
 * product over the whole plane. */
CPU_MULTI(dw_grad_weight_chan,
          (const gconv *c, const float *restrict dy, const float *restrict x, float *restrict dw_out,
           float *restrict pad, float *restrict wide),
          (c, dy, x, dw_out, pad, wide), {
              const int64_t H = c->H, W = c->W, OH = c->OH, OW = c->OW, Wp = W + 2 * c->pw, Hp = H + 2 * c->ph;
              const int64_t kh = c->kh, kw = c->kw, sh = c->sh, sw = c->sw, dh = c->dh, dwl = c->dw;
              const int64_t imgx = c->C * H * W, imgy = c->O * OH * OW;
              for (int64_t t = 0; t < kh * kw; t++)
                  dw_out[t] = 0.0f;
              const int s1 = sh == 1 && sw == 1;
              const int64_t L = (OH - 1) * Wp + OW;
              for (int64_t img = 0; img < c->N; img++) {
                  const float *restrict dyi = dy + img * imgy;
                  cpu_plane_pad(x + img * imgx, H, W, c->ph, c->pw, Hp, Wp, 0.0f, pad);
                  if (s1) {
                      for (int64_t oh = 0; oh < OH; oh++) {
                          memcpy(wide + oh * Wp, dyi + oh * OW, sizeof(float) * (size_t)OW);
                          for (int64_t k = OW; k < Wp && oh < OH - 1; k++)
                              wide[oh * Wp + k] = 0.0f;
                      }
                  }
                  for (int64_t i = 0; i < kh; i++)
                      for (int64_t j = 0; j < kw; j++) {
                          float s = 0.0f;
                          if (s1) {
                              s = dot_lanes(wide, pad + i * dh * Wp + j * dwl, L, 1);
                          } else {
                              for (int64_t oh = 0; oh < OH; oh++)
                                  s += dot_lanes(dyi + oh * OW, pad + (oh * sh + i * dh) * Wp + j * dwl, OW, sw);
                          }
                          dw_out[i * kw + j] += s;
                      }
              }
          })

typedef struct dww_job {
    const gconv *c;
    const float *dy, *x;
    float *dw, *ws;
} dww_job;

static int64_t dww_floats(const gconv *c)
{
    return dw_plane_floats(c) + c->OH * (c->W + 2 * c->pw) + 16;
}

static void dww_task(void *a, int64_t o0, int64_t o1, int thread)
{
    const dww_job *j = a;
    const gconv *c = j->c;
    float *pad = j->ws + (size_t)thread * (size_t)dww_floats(c);
    for (int64_t o = o0; o < o1; o++) {
        int64_t ch = o / c->Og;
        dw_grad_weight_chan(c, j->dy + o * c->P, j->x + ch * c->H * c->W, j->dw + o * c->ksz, pad,
                            pad + dw_plane_floats(c));
    }
}

/* ---------------------------------------------------------------- conv2d_grad_input */

/* Channel blocks per (image, group): more when there are few images. */
static int64_t gi_blocks(const gconv *c)
{
    double f = 2.0 * (double)c->Og * (double)c->P * (double)c->K;
    int64_t nb = 1;
    while (c->N * c->G * nb < WANT_TASKS && c->Cg / (2 * nb) >= 1 && f / (double)(2 * nb) >= BLOCK_FLOPS)
        nb *= 2;
    return nb;
}

static int64_t gi_block_channels(const gconv *c)
{
    int64_t nb = gi_blocks(c);
    return (c->Cg + nb - 1) / nb;
}

typedef struct gi_job {
    const gconv *c;
    const float *dy, *w;
    float *dx, *ws;
    int64_t bc, nb;   /* channels per block, blocks per (image, group) */
    int direct;
} gi_job;

static void gi_task(void *a, int64_t task, int thread)
{
    const gi_job *j = a;
    const gconv *c = j->c;
    int64_t ig = task / j->nb, blk = task % j->nb, img = ig / c->G, g = ig % c->G;
    int64_t c0 = blk * j->bc, c1 = c0 + j->bc < c->Cg ? c0 + j->bc : c->Cg;
    if (c1 <= c0)
        return;
    int64_t r0 = c0 * c->ksz, r1 = c1 * c->ksz, P = c->P;
    const float *dyg = j->dy + (img * c->O + g * c->Og) * P;
    const float *wg = j->w + g * c->Og * c->K;
    float *dxg = j->dx + (img * c->C + g * c->Cg) * c->H * c->W;
    if (c->Og == 0) {
        memset(dxg + c0 * c->H * c->W, 0, sizeof(float) * (size_t)((c1 - c0) * c->H * c->W));
        return;
    }
    if (j->direct) {
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (blasint)(r1 - r0), (blasint)P, (blasint)c->Og, 1.0f,
                    wg + r0, (blasint)c->K, dyg, (blasint)P, 0.0f, dxg + c0 * P, (blasint)P);
        return;
    }
    /* column blocks in order: each one's columns go through the cache once */
    int64_t cb = col_block(c, j->bc * c->ksz);
    float *col = j->ws + (size_t)thread * (size_t)(j->bc * c->ksz * cb);
    memset(dxg + c0 * c->H * c->W, 0, sizeof(float) * (size_t)((c1 - c0) * c->H * c->W));
    for (int64_t p0 = 0; p0 < P; p0 += cb) {
        int64_t p1 = p0 + cb < P ? p0 + cb : P;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (blasint)(r1 - r0), (blasint)(p1 - p0), (blasint)c->Og,
                    1.0f, wg + r0, (blasint)c->K, dyg + p0, (blasint)P, 0.0f, col, (blasint)(p1 - p0));
        col2im_block(c, col, dxg, p0, p1, r0, r1);
    }
}

static size_t gi_ws(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, int threads)
{
    gconv c;
    gconv_shape(n, in[0], in[2], in[1], &c);
    size_t t = (size_t)(threads < 1 ? 1 : threads), own = 0;
    cpu_conv rt;
    if (bg_conv(n, &c))
        own = bg_gi_need(&c, threads);
    else if (!gconv_dw(&c) && cpu_rows_gi_geom(&c, &rt))
        own = sizeof(float) * (size_t)cpu_rows_gi_floats(&rt, threads);
    else if (gconv_dw(&c))
        own = sizeof(float) * (size_t)dwi_floats(&c) * t;
    else if (!cpu_conv_1x1(&c))
        own = sizeof(float) * (size_t)(gi_block_channels(&c) * c.ksz * col_block(&c, gi_block_channels(&c) * c.ksz)) * t;
    size_t ref = cpu_ref_ws(n, in, out, threads);
    return own > ref ? own : ref;
}

static mge_status cpu_conv2d_grad_input(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                        mge_tensor *const *out, mge_error *err)
{
    gconv c;
    gconv_shape(n, in[0], in[2], in[1], &c);
    const float *dy = in[0]->data, *w = in[1]->data;
    float *dx = out[0]->data;
    int threads = cpu_threads(ctx);
    if (c.N * c.C * c.H * c.W == 0)
        return MGE_OK;
    mge_status st;
    if (bg_conv(n, &c))
        return bg_grad_input(ctx, n, &c, dy, w, dx, err);
    if (gconv_dw(&c)) {
        if ((st = need_ws(ctx, n, sizeof(float) * (size_t)dwi_floats(&c) * (size_t)threads, err)))
            return st;
        dwi_job j = {&c, dy, w, dx, ctx->ws};
        int64_t work = c.Og * c.P * c.ksz + c.H * c.W;
        cpu_parallel(ctx, c.N * c.C, work >= 4096 ? 1 : 4096 / work, dwi_task, &j);
        return MGE_OK;
    }
    cpu_conv rt;
    if (cpu_rows_gi_geom(&c, &rt)) {
        if ((st = need_ws(ctx, n, sizeof(float) * (size_t)cpu_rows_gi_floats(&rt, threads), err)))
            return st;
        cpu_rows_grad_input(ctx, &c, &rt, dy, w, dx, ctx->ws);
        return MGE_OK;
    }
    if (!cpu_blas_fits(c.K, c.P, c.Og) || !cpu_blas_fits(c.O * c.K, 0, 0))
        return cpu_fallback(ctx, n, in, out, err);
    int direct = cpu_conv_1x1(&c);
    gi_job j = {&c, dy, w, dx, ctx->ws, gi_block_channels(&c), 0, direct};
    j.nb = (c.Cg + j.bc - 1) / j.bc;
    if (!direct && (st = need_ws(ctx, n, sizeof(float) * (size_t)(j.bc * c.ksz * col_block(&c, j.bc * c.ksz)) *
                                             (size_t)threads, err)))
        return st;
    mge_pool_run(ctx->pool, c.N * c.G * j.nb, gi_task, &j);
    return MGE_OK;
}

/* ---------------------------------------------------------------- conv2d_grad_weight */

typedef struct gw_plan {
    int64_t nbb, ipb;   /* batch blocks, images per block */
    int64_t nkb, kbs;   /* column blocks of dW_g, columns per block */
} gw_plan;

/* Column blocks of dW first (they cost one more packing of dY each, and
 * im2col only their own rows); then batch blocks, which cost a copy of dW
 * each and a final sum, while tasks are few. */
static gw_plan gw_split(const gconv *c)
{
    gw_plan s;
    double total = 2.0 * (double)c->Og * (double)c->P * (double)c->K * (double)c->N * (double)c->G;
    size_t wbytes = sizeof(float) * (size_t)(c->O * c->K);
    int64_t nkb = 1;
    while (c->G * nkb < WANT_TASKS && c->K / (2 * nkb) >= 128 && total / (double)(c->G * 2 * nkb) >= BLOCK_FLOPS)
        nkb *= 2;
    s.kbs = nkb > 1 ? ((c->K + nkb - 1) / nkb + 15) / 16 * 16 : c->K;
    s.nkb = s.kbs ? (c->K + s.kbs - 1) / s.kbs : 1;
    int64_t nbb = 1;
    while (2 * nbb <= MAX_BATCH_BLOCKS && 2 * nbb <= c->N && c->G * s.nkb * nbb < WANT_TASKS &&
           total / (double)(c->G * s.nkb * 2 * nbb) >= BLOCK_FLOPS && wbytes * (size_t)(2 * nbb - 1) <= MAX_ACC_BYTES)
        nbb *= 2;
    s.ipb = c->N > 0 ? (c->N + nbb - 1) / nbb : 1;
    s.nbb = c->N > 0 ? (c->N + s.ipb - 1) / s.ipb : 1;
    return s;
}

typedef struct gw_job {
    const gconv *c;
    gw_plan s;
    const float *dy, *x;
    float *dw, *acc, *cols;   /* acc: dW copies of batch blocks 1..; cols: per thread */
    int direct, rows;         /* rows: cpu_conv_rows.c's way, cols its scratch */
} gw_job;

static void gw_task(void *a, int64_t task, int thread)
{
    const gw_job *j = a;
    const gconv *c = j->c;
    int64_t kb = task % j->s.nkb, t = task / j->s.nkb;
    int64_t bb = t % j->s.nbb, g = t / j->s.nbb;
    int64_t k0 = kb * j->s.kbs, k1 = k0 + j->s.kbs < c->K ? k0 + j->s.kbs : c->K;
    int64_t i0 = bb * j->s.ipb, i1 = i0 + j->s.ipb < c->N ? i0 + j->s.ipb : c->N;
    const int64_t P = c->P, K = c->K;
    float *dst = (bb == 0 ? j->dw : j->acc + (size_t)(bb - 1) * (size_t)(c->O * K)) + g * c->Og * K + k0;
    for (int64_t r = 0; r < c->Og; r++)
        memset(dst + r * K, 0, sizeof(float) * (size_t)(k1 - k0));
    if (k1 <= k0 || P == 0)
        return;
    if (j->rows) {
        cpu_rows_grad_weight(c, j->x, j->dy, g, i0, i1, k0, k1, dst,
                             j->cols + (size_t)thread * (size_t)cpu_rows_gw_floats(c));
        return;
    }
    int64_t cb = col_block(c, j->s.kbs);
    float *col = j->cols + (size_t)thread * (size_t)(j->s.kbs * cb);
    for (int64_t img = i0; img < i1; img++) {
        const float *xg = j->x + (img * c->C + g * c->Cg) * c->H * c->W;
        const float *dyg = j->dy + (img * c->O + g * c->Og) * P;
        if (j->direct) {   /* 1x1: rows of x are the columns */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)c->Og, (blasint)(k1 - k0), (blasint)P,
                        1.0f, dyg, (blasint)P, xg + k0 * P, (blasint)P, 1.0f, dst, (blasint)K);
            continue;
        }
        /* pixel blocks in order, each im2col'd into cache then contracted */
        for (int64_t p0 = 0; p0 < P; p0 += cb) {
            int64_t p1 = p0 + cb < P ? p0 + cb : P;
            cpu_im2col(c, xg, col, p0, p1, k0, k1);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)c->Og, (blasint)(k1 - k0), (blasint)(p1 - p0),
                        1.0f, dyg + p0, (blasint)P, col, (blasint)(p1 - p0), 1.0f, dst, (blasint)K);
        }
    }
}

typedef struct gw_sum_job {
    float *dw;
    const float *acc;
    int64_t n, copies;
} gw_sum_job;

/* dw[i] += acc[0][i] + ... in block order (left to right). */
CPU_MULTI(sum_copies, (float *restrict dw, const float *restrict acc, int64_t n, int64_t copies, int64_t b, int64_t e),
          (dw, acc, n, copies, b, e), {
              for (int64_t k = 0; k < copies; k++) {
                  const float *restrict a = acc + k * n;
                  for (int64_t i = b; i < e; i++)
                      dw[i] += a[i];
              }
          })

static void gw_sum_task(void *a, int64_t b, int64_t e, int thread)
{
    (void)thread;
    const gw_sum_job *j = a;
    sum_copies(j->dw, j->acc, j->n, j->copies, b, e);
}

/* The im2col-free way (cpu_conv_rows.c) where it suits the shape. */
static int gw_rows(const gconv *c)
{
    /* K rows of A: a few 14-row tiles at least (conv1 on grey images, K =
     * 9, ran 2.5x slower this way than with im2col and OpenBLAS) */
    return c->K >= 64 && cpu_rows_ok(c);
}

static size_t gw_floats(const gconv *c, const gw_plan *s, int threads, int direct)
{
    size_t acc = (size_t)(s->nbb - 1) * (size_t)(c->O * c->K), t = (size_t)(threads < 1 ? 1 : threads);
    if (gw_rows(c))
        return acc + (size_t)cpu_rows_gw_floats(c) * t;
    return acc + (direct ? 0 : (size_t)(s->kbs * col_block(c, s->kbs)) * t);
}

static size_t gw_ws(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, int threads)
{
    gconv c;
    gconv_shape(n, in[0], in[1], in[2], &c);
    size_t own;
    if (bg_conv(n, &c)) {
        own = bg_gw_need(&c, threads);
    } else if (gconv_dw(&c)) {
        own = sizeof(float) * (size_t)dww_floats(&c) * (size_t)(threads < 1 ? 1 : threads);
    } else {
        gw_plan s = gw_split(&c);
        own = sizeof(float) * gw_floats(&c, &s, threads, cpu_conv_1x1(&c));
    }
    size_t ref = cpu_ref_ws(n, in, out, threads);
    return own > ref ? own : ref;
}

static mge_status cpu_conv2d_grad_weight(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                         mge_tensor *const *out, mge_error *err)
{
    gconv c;
    gconv_shape(n, in[0], in[1], in[2], &c);
    const float *dy = in[0]->data, *x = in[1]->data;
    float *dw = out[0]->data;
    int threads = cpu_threads(ctx);
    if (c.O * c.K == 0)
        return MGE_OK;
    mge_status st;
    if (bg_conv(n, &c))
        return bg_grad_weight(ctx, n, &c, dy, x, dw, err);
    if (gconv_dw(&c)) {
        if ((st = need_ws(ctx, n, sizeof(float) * (size_t)dww_floats(&c) * (size_t)threads, err)))
            return st;
        dww_job j = {&c, dy, x, dw, ctx->ws};
        int64_t work = c.N * (c.P * c.ksz + c.H * c.W);
        cpu_parallel(ctx, c.O, work >= 4096 ? 1 : 4096 / (work ? work : 1), dww_task, &j);
        return MGE_OK;
    }
    if (!cpu_blas_fits(c.Og, c.K, c.P))
        return cpu_fallback(ctx, n, in, out, err);
    int direct = cpu_conv_1x1(&c);
    gw_plan s = gw_split(&c);
    if ((st = need_ws(ctx, n, sizeof(float) * gw_floats(&c, &s, threads, direct), err)))
        return st;
    float *acc = ctx->ws;
    float *cols = acc + (size_t)(s.nbb - 1) * (size_t)(c.O * c.K);
    gw_job j = {&c, s, dy, x, dw, acc, cols, direct, gw_rows(&c)};
    mge_pool_run(ctx->pool, c.G * s.nbb * s.nkb, gw_task, &j);
    if (s.nbb > 1) {
        gw_sum_job sj = {dw, acc, c.O * c.K, s.nbb - 1};
        cpu_parallel(ctx, c.O * c.K, CPU_GRAIN, gw_sum_task, &sj);
    }
    return MGE_OK;
}

/* ---------------------------------------------------------------- linear */

/* C[M][N] = op(A) op(B), cut into blocks of columns (or else rows) of C,
 * at least BLOCK_FLOPS each, 8 at most, whole 16-wide tiles; the cut
 * depends on the shape alone. */
typedef struct lg_job {
    CBLAS_TRANSPOSE ta, tb;
    int64_t M, N, K, lda, ldb;
    const float *a, *b;
    float *c;
    int along_n;
    int64_t bs;
} lg_job;

static void lg_task(void *arg, int64_t blk, int thread)
{
    (void)thread;
    const lg_job *j = arg;
    const float *a = j->a, *b = j->b;
    float *c = j->c;
    int64_t M = j->M, N = j->N, d0 = blk * j->bs;
    if (j->along_n) {
        N = d0 + j->bs < N ? j->bs : N - d0;
        b += j->tb == CblasNoTrans ? d0 : d0 * j->ldb;
        c += d0;
    } else {
        M = d0 + j->bs < M ? j->bs : M - d0;
        a += j->ta == CblasNoTrans ? d0 * j->lda : d0;
        c += d0 * j->N;
    }
    /* mge's sgemm for linear_grad_input's NN product, from 64 columns (it
     * was faster than OpenBLAS there on gpt-tiny's shapes); the
     * transposed dweight product stays on OpenBLAS */
    if (j->ta == CblasNoTrans && j->tb == CblasNoTrans && j->K > 0 && mge_sgemm_pick_n(M, N, j->K, 64))
        mge_sgemm(NULL, 0, 0, M, N, j->K, 1.0f, a, j->lda, b, j->ldb, 0.0f, c, j->N);
    else
        cblas_sgemm(CblasRowMajor, j->ta, j->tb, (blasint)M, (blasint)N, (blasint)j->K, 1.0f, a, (blasint)j->lda,
                    b, (blasint)j->ldb, 0.0f, c, (blasint)j->N);
}

static int64_t lg_cut(int64_t D, int64_t minb, double flops)
{
    int64_t nb = 1;
    while (nb < 8 && flops / (double)(2 * nb) >= BLOCK_FLOPS && D / (2 * nb) >= minb)
        nb *= 2;
    return nb;
}

static void lg_run(const mge_kctx *ctx, lg_job *j)
{
    double flops = 2.0 * (double)j->M * (double)j->N * (double)j->K;
    int64_t nb = lg_cut(j->N, 128, flops);
    j->along_n = 1;
    if (nb == 1) {
        nb = lg_cut(j->M, 64, flops);
        j->along_n = nb == 1;
    }
    int64_t D = j->along_n ? j->N : j->M;
    j->bs = nb > 1 ? ((D + nb - 1) / nb + 15) / 16 * 16 : D;
    mge_pool_run(ctx->pool, (D + j->bs - 1) / j->bs, lg_task, j);
}

static mge_status cpu_linear_grad(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                  mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *dy = in[0], *o = in[1];
    mge_tensor *res = out[0];
    int64_t O = dy->dims[dy->ndim - 1], K = o->dims[o->ndim - 1];
    int64_t M = 1;
    for (int i = 0; i < dy->ndim - 1; i++)
        M *= dy->dims[i];
    int gi = n->op == MGE_OP_LINEAR_GRAD_INPUT;
    int64_t numel = gi ? M * K : O * K;
    if (numel == 0)
        return MGE_OK;
    if (!cpu_blas_fits(M, O, K))
        return cpu_fallback(ctx, n, in, out, err);
    if ((gi ? O : M) == 0) {
        memset(res->data, 0, sizeof(float) * (size_t)numel);
        return MGE_OK;
    }
    if (cpu_bf16_node(n))
        return bg_linear_grad(ctx, n, dy->data, o->data, res->data, M, O, K, err);
    lg_job j;
    if (gi)   /* dx[M][K] = dy[M][O] W[O][K] */
        j = (lg_job){CblasNoTrans, CblasNoTrans, M, K, O, O, K, dy->data, o->data, res->data, 1, 0};
    else      /* dW[O][K] = dy[M][O]^T x[M][K] */
        j = (lg_job){CblasTrans, CblasNoTrans, O, K, M, O, K, dy->data, o->data, res->data, 1, 0};
    lg_run(ctx, &j);
    return MGE_OK;
}

void mge_cpu_register_grad_conv(mge_backend *b)
{
    cpu_isa_avx2();   /* decided once, before any kernel runs on pool threads */
    mge_cpu_bf16();   /* and the AMX permission asked for */
    b->k[MGE_OP_CONV2D_GRAD_INPUT][MGE_F32] = (mge_kernel){.run = cpu_conv2d_grad_input, .ws = gi_ws};
    b->k[MGE_OP_CONV2D_GRAD_WEIGHT][MGE_F32] = (mge_kernel){.run = cpu_conv2d_grad_weight, .ws = gw_ws};
    b->k[MGE_OP_LINEAR_GRAD_INPUT][MGE_F32] = (mge_kernel){.run = cpu_linear_grad, .ws = lin_grad_ws};
    b->k[MGE_OP_LINEAR_GRAD_WEIGHT][MGE_F32] = (mge_kernel){.run = cpu_linear_grad, .ws = lin_grad_ws};
}
