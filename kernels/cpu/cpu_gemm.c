/* cpu_gemm.c — conv2d, linear and matmul (f32) on OpenBLAS, and the fused
 * fused_conv2d / fused_linear of mge-opt's fuse-activation pass.
 *
 * conv2d takes one of three paths:
 *   - one input channel per group (depthwise, incl. channel multipliers):
 *     a direct kernel, parallel over output planes, on a zero-padded copy
 *     of each input plane (see dw_plane);
 *   - 1x1, stride 1, no pad: sgemm straight on x;
 *   - otherwise im2col, then sgemm.
 * Each task writes the bias (or zero) into its block of the output and
 * the sgemm accumulates onto it (beta = 1), so the bias costs no extra pass.
 * OpenBLAS runs single-threaded and is called from pool tasks, one call per
 * block of the output (see "gemm blocks" below), so our pool is the only
 * one and results do not depend on --threads. Blocks of shapes where mge's
 * own sgemm measured faster run on it instead, serially in the same task
 * (mge_sgemm_pick; MGE_GEMM=openblas turns that off).
 *
 * The fused ops take the same paths: plain conv2d/linear are the fused
 * ones with no residual and no activation. Each task ends with the
 * epilogue (cpu_act.h: residual add, then the activation) on the block it
 * just computed, while the block is in cache; it is elementwise, so the
 * bits do not depend on --threads either. */
#include "cpu.h"
#include "cpu_act.h"
#include "cpu_conv_rows.h"

#include <cblas.h>
#include <string.h>

/* ---------------------------------------------------------------- shapes */

static void conv_shape(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, cpu_conv *c)
{
    cpu_conv_shape(n, in[0], in[1], out[0], c);
}

static int is_fused(const mge_node *n)
{
    return n->op == MGE_OP_FUSED_CONV2D || n->op == MGE_OP_FUSED_LINEAR;
}

/* The bias (or NULL) and the epilogue of a conv2d/linear or fused node:
 * fused ones read (x, weight[, bias][, residual]) as their bias and
 * residual attributes say. 0 when the inputs do not match them. */
static int layer_io(const mge_node *n, mge_tensor *const *in, const float **b, cpu_epi *e)
{
    e->res = NULL;
    e->act = -1;
    e->alpha = 0.01f;
    if (!is_fused(n)) {
        *b = n->nin > 2 && in[2] ? in[2]->data : NULL;
        return 1;
    }
    int bias = (int)mge_node_int(n, MGE_KEY_bias, 1), res = (int)mge_node_int(n, MGE_KEY_residual, 0);
    const mge_attr *act = mge_node_attr(n, MGE_KEY_act);
    if (n->nin != 2 + bias + res || !act || act->n != 1 || (act->i[0] != -1 && !cpu_act_known((int)act->i[0])))
        return 0;
    *b = bias ? in[2]->data : NULL;
    e->res = res ? in[2 + bias]->data : NULL;
    e->act = (int)act->i[0];
    e->alpha = (float)mge_node_float(n, MGE_KEY_alpha, 0.01);
    return 1;
}

static mge_status bad_inputs(const mge_kctx *ctx, const mge_node *n, mge_error *err)
{
    return mge_error_set(err, MGE_ERR_INVALID, "%s: inputs or act do not match the bias/residual/act attributes",
                         mge_kctx_opname(ctx, n));
}

/* ---------------------------------------------------------------- bias prefill
 * The bias (or zero) goes into C first and BLAS accumulates onto it (beta =
 * 1): OpenBLAS's own beta = 0 pass over C is slower than a plain fill (up
 * to a quarter of the sgemm time on the small-K 1x1 convs of mobilenet).
 * Each task fills its own block of C right before its BLAS call, so the
 * fill runs in parallel and leaves the block in cache. */

/* y[0..n) = v, vectorized (an -O2 build would leave this loop scalar). */
CPU_MULTI(fill_f32, (float *restrict y, int64_t n, float v), (y, n, v), {
    for (int64_t i = 0; i < n; i++)
        y[i] = v;
})

/* Rows [0, rows) of C (leading dimension ldc), columns [0, cols): row r
 * gets rowv[r], or column k gets colv[k], or zero when neither is given. */
static void fill_block(float *c, int64_t ldc, int64_t rows, int64_t cols, const float *rowv, const float *colv)
{
    for (int64_t r = 0; r < rows; r++) {
        float *cr = c + r * ldc;
        if (colv)
            memcpy(cr, colv, sizeof(float) * (size_t)cols);
        else if (rowv)
            fill_f32(cr, cols, rowv[r]);
        else
            memset(cr, 0, sizeof(float) * (size_t)cols);
    }
}

/* ---------------------------------------------------------------- depthwise */

/* Floats of per-thread scratch: the zero-padded input plane, then either
 * the "wide" output of the stride-1 path (rows of the padded width) or the
 * de-interleaved plane of the stride-2 path. */
static int64_t dw_scratch(const cpu_conv *c)
{
    int64_t Hp = c->H + 2 * c->ph, Wp = c->W + 2 * c->pw;
    int64_t wide = c->OH * Wp, de = Hp * (Wp + 1);
    return Hp * Wp + (wide > de ? wide : de) + 16;
}

/* One output plane from one input plane. The plane is first copied into a
 * zero-padded buffer so no tap needs a bounds test. With stride 1 the
 * output is computed "wide": index k = oh*Wp + ow addresses the padded
 * input at k + i*dh*Wp + j*dw for tap (i, j), so each tap is one long
 * contiguous loop over the whole plane (the Wp - OW extra columns per row
 * are discarded), instead of a short loop per row. */
CPU_MULTI(dw_plane,
          (const cpu_conv *c, const float *restrict x, const float *restrict w, float bias, float *restrict y,
           float *restrict pad, float *restrict wide),
          (c, x, w, bias, y, pad, wide), {
              const int64_t H = c->H, W = c->W, ph = c->ph, pw = c->pw, OH = c->OH, OW = c->OW;
              const int64_t Hp = H + 2 * ph, Wp = W + 2 * pw, kh = c->kh, kw = c->kw, dh = c->dh, dw = c->dw;
              cpu_plane_pad(x, H, W, ph, pw, Hp, Wp, 0.0f, pad);
              const int fused3 = kh == 3 && kw == 3 && dh == 1 && dw == 1;
              if (c->sh == 1 && c->sw == 1) {
                  const int64_t L = (OH - 1) * Wp + OW;
                  if (fused3) {
                      const float *restrict p0 = pad, *restrict p1 = pad + Wp, *restrict p2 = pad + 2 * Wp;
                      for (int64_t k = 0; k < L; k++)
                          wide[k] = bias + w[0] * p0[k] + w[1] * p0[k + 1] + w[2] * p0[k + 2] + w[3] * p1[k] +
                                    w[4] * p1[k + 1] + w[5] * p1[k + 2] + w[6] * p2[k] + w[7] * p2[k + 1] +
                                    w[8] * p2[k + 2];
                  } else {
                      for (int64_t k = 0; k < L; k++)
                          wide[k] = bias;
                      for (int64_t i = 0; i < kh; i++)
                          for (int64_t j = 0; j < kw; j++) {
                              const float wv = w[i * kw + j];
                              const float *restrict src = pad + i * dh * Wp + j * dw;
                              for (int64_t k = 0; k < L; k++)
                                  wide[k] += wv * src[k];
                          }
                  }
                  for (int64_t oh = 0; oh < OH; oh++)
                      for (int64_t ow = 0; ow < OW; ow++)
                          y[oh * OW + ow] = wide[oh * Wp + ow];
                  return;
              }
              const int64_t sh = c->sh, sw = c->sw;
              if (sw == 2) {
                  /* Each padded row split into its even and odd columns, so
                   * the taps read contiguous memory: column 2*ow + t is
                   * E[ow + t/2] for even t, O[ow + t/2] for odd t. */
                  const int64_t We = (Wp + 1) / 2;
                  float *restrict de = wide;   /* de-interleaved rows, 2*We each */
                  cpu_plane_deinterleave(pad, Hp, Wp, 0.0f, de);
                  for (int64_t oh = 0; oh < OH; oh++) {
                      float *restrict yr = y + oh * OW;
                      const float *restrict r0 = de + oh * sh * 2 * We;
                      if (fused3) {
                          const float *restrict e0 = r0, *restrict o0 = r0 + We;
                          const float *restrict e1 = e0 + 2 * We, *restrict o1 = o0 + 2 * We;
                          const float *restrict e2 = e1 + 2 * We, *restrict o2 = o1 + 2 * We;
                          for (int64_t ow = 0; ow < OW; ow++)
                              yr[ow] = bias + w[0] * e0[ow] + w[1] * o0[ow] + w[2] * e0[ow + 1] + w[3] * e1[ow] +
                                       w[4] * o1[ow] + w[5] * e1[ow + 1] + w[6] * e2[ow] + w[7] * o2[ow] +
                                       w[8] * e2[ow + 1];
                          continue;
                      }
                      for (int64_t ow = 0; ow < OW; ow++)
                          yr[ow] = bias;
                      for (int64_t i = 0; i < kh; i++)
                          for (int64_t j = 0; j < kw; j++) {
                              const float wv = w[i * kw + j];
                              int64_t t = j * dw;
                              const float *restrict src = r0 + i * dh * 2 * We + (t % 2 ? We : 0) + t / 2;
                              for (int64_t ow = 0; ow < OW; ow++)
                                  yr[ow] += wv * src[ow];
                          }
                  }
                  return;
              }
              for (int64_t oh = 0; oh < OH; oh++) {
                  float *restrict yr = y + oh * OW;
                  const float *restrict r0 = pad + oh * sh * Wp;
                  for (int64_t ow = 0; ow < OW; ow++)
                      yr[ow] = bias;
                  for (int64_t i = 0; i < kh; i++)
                      for (int64_t j = 0; j < kw; j++) {
                          const float wv = w[i * kw + j];
                          const float *restrict src = r0 + i * dh * Wp + j * dw;
                          for (int64_t ow = 0; ow < OW; ow++)
                              yr[ow] += wv * src[ow * sw];
                      }
              }
          })

typedef struct dw_job {
    const cpu_conv *c;
    const float *x, *w, *b;
    float *y, *ws;
    cpu_epi epi;
} dw_job;

static void dw_task(void *a, int64_t p0, int64_t p1, int thread)
{
    const dw_job *j = a;
    const cpu_conv *c = j->c;
    int64_t plane_in = c->H * c->W, plane_out = c->OH * c->OW, ksz = c->kh * c->kw;
    int64_t Hp = c->H + 2 * c->ph, Wp = c->W + 2 * c->pw;
    float *pad = j->ws + thread * dw_scratch(c);
    for (int64_t p = p0; p < p1; p++) {
        int64_t img = p / c->O, o = p % c->O;
        int64_t ch = o / c->Og;   /* one input channel per group */
        float *y = j->y + p * plane_out;
        dw_plane(c, j->x + (img * c->C + ch) * plane_in, j->w + o * ksz, j->b ? j->b[o] : 0.0f, y, pad,
                 pad + Hp * Wp);
        cpu_epi_block(&j->epi, j->y, y, plane_out, 1, plane_out);   /* the plane is still in cache */
    }
}

/* ---------------------------------------------------------------- gemm blocks
 *
 * OpenBLAS runs single-threaded (kernels/cpu/cpu_blas.c); every BLAS call here is cut
 * into blocks of rows or columns of C, one cblas call per block, and the
 * blocks run as tasks on our pool. The cut depends on the shape alone,
 * never on the thread count: OpenBLAS 0.3.21 does not compute an element
 * of C the same way at every place in a call (splitting a 64x3136x576
 * sgemm in two changes a few percent of the outputs by an ulp or so, and
 * sgemv is the same), so with the same blocks at any --threads the results
 * are bit-identical and the thread count only decides who runs which
 * block. K is never split (that would change the summation order anyway).
 *
 * Each extra block costs one more packing of the operand it shares with
 * the others (A for column blocks, B for row blocks), about 1/(2*width)
 * of a float per flop. Measured on one thread (scripts/bench-kernels):
 * column blocks of 256 or more cost 0-3% (the resnet18 stem and layer1
 * got faster, as the im2col of a block stays in cache), while row blocks
 * cost 2-3% each on the 7x7 layers, so rows are cut in two at most. */

#define GEMM_BLOCK_FLOPS 4e6   /* at least this much work per block */
#define GEMM_MAX_COL_BLOCKS 8
#define GEMM_MIN_COLS 256
#define GEMM_MAX_ROW_BLOCKS 2
#define GEMM_MIN_ROWS 64
/* 512 KiB of weights per sgemv block at least: a batch-1 classifier
 * (mobilenet_v2, 1280x1000) streams its weights on both threads */
#define GEMV_BLOCK_FLOATS 131072

typedef struct gemm_split {
    int along_n;   /* 1: blocks of columns of C; 0: blocks of rows */
    int64_t bs;    /* block size along that dimension */
    int64_t nb;    /* number of blocks */
} gemm_split;

/* Blocks of D along one side of C: as many as the work and maxb allow,
 * each at least minb wide. */
static gemm_split gemm_cut(int along_n, int64_t D, int64_t minb, int64_t maxb, double flops)
{
    gemm_split s = {along_n, D, 1};
    int64_t nb = 1;
    while (nb < maxb && flops / (double)(2 * nb) >= GEMM_BLOCK_FLOPS && D / (2 * nb) >= minb)
        nb *= 2;
    if (nb > 1) {
        s.bs = ((D + nb - 1) / nb + 15) / 16 * 16;   /* whole micro-tiles */
        s.nb = (D + s.bs - 1) / s.bs;
    }
    return s;
}

/* The blocks of C[M][N] += A[M][K] B[K][N]: columns when they can be cut,
 * else rows. */
static gemm_split gemm_plan(int64_t M, int64_t N, int64_t K)
{
    double flops = 2.0 * (double)M * (double)N * (double)K;
    gemm_split sn = gemm_cut(1, N, GEMM_MIN_COLS, GEMM_MAX_COL_BLOCKS, flops);
    return sn.nb > 1 ? sn : gemm_cut(0, M, GEMM_MIN_ROWS, GEMM_MAX_ROW_BLOCKS, flops);
}

/* Batched C = op(A) op(B) (+ C): task = (batch index, block). Batch index t
 * finds its A and B through broadcast strides over the batch dims. */
typedef struct gemm_job {
    CBLAS_TRANSPOSE ta, tb;
    int64_t M, N, K, lda, ldb, ldc;
    const float *a, *b;
    float *c;
    int64_t sc;                  /* C floats per batch index */
    int nbd;                     /* batch dims (0: one matrix) */
    const int64_t *bdims, *sa, *sb;
    const float *rowv, *colv;    /* C's prefill (see fill_block) */
    cpu_epi epi;                 /* on each block after its sgemm (residual laid out like C) */
    gemm_split s;
} gemm_job;

static void gemm_task(void *arg, int64_t task, int thread)
{
    const gemm_job *j = arg;
    int64_t t = task / j->s.nb, blk = task % j->s.nb;
    const float *a = j->a, *b = j->b;
    float *c = j->c + t * j->sc;
    for (int i = j->nbd - 1; i >= 0; i--) {
        int64_t k = t % j->bdims[i];
        t /= j->bdims[i];
        a += k * j->sa[i];
        b += k * j->sb[i];
    }
    int64_t M = j->M, N = j->N;
    int64_t d0 = blk * j->s.bs, d1 = d0 + j->s.bs;
    const float *rowv = j->rowv, *colv = j->colv;
    if (j->s.along_n) {
        d1 = d1 < N ? d1 : N;
        b += j->tb == CblasNoTrans ? d0 : d0 * j->ldb;
        c += d0;
        colv = colv ? colv + d0 : NULL;
        N = d1 - d0;
    } else {
        d1 = d1 < M ? d1 : M;
        a += j->ta == CblasNoTrans ? d0 * j->lda : d0;
        c += d0 * j->ldc;
        rowv = rowv ? rowv + d0 : NULL;
        M = d1 - d0;
    }
    fill_block(c, j->ldc, M, N, rowv, colv);
    if (j->K > 0 && j->ta == CblasNoTrans && j->tb == CblasNoTrans && mge_sgemm_pick(M, N, j->K))
        mge_sgemm(NULL, 0, 0, M, N, j->K, 1.0f, a, j->lda, b, j->ldb, 1.0f, c, j->ldc);   /* measured: NN only */
    else if (j->K > 0)
        cblas_sgemm(CblasRowMajor, j->ta, j->tb, (blasint)M, (blasint)N, (blasint)j->K, 1.0f, a, (blasint)j->lda,
                    b, (blasint)j->ldb, 1.0f, c, (blasint)j->ldc);
    cpu_epi_block(&j->epi, j->c, c, j->ldc, M, N);
}

/* One (or `batch`) C = prefill + op(A) op(B) over the pool. */
static void gemm_run(const mge_kctx *ctx, gemm_job *j, int64_t batch)
{
    j->s = gemm_plan(j->M, j->N, j->K);
    mge_pool_run(ctx->pool, batch * j->s.nb, gemm_task, j);
}

/* ---------------------------------------------------------------- im2col */

/* cpu_im2col: cpu_im2col.c */

typedef struct col_job {
    const cpu_conv *c;
    const float *x;   /* the group's first input channel of one image */
    float *col;       /* [Cg*kh*kw][OH*OW] */
} col_job;

static void col_rows(void *a, int64_t r0, int64_t r1, int thread)
{
    const col_job *jb = a;
    int64_t P = jb->c->OH * jb->c->OW;
    cpu_im2col(jb->c, jb->x, jb->col + r0 * P, 0, P, r0, r1);
}

/* ---------------------------------------------------------------- bf16 */

/* Nodes with precision=bf16 on a CPU with a bf16 level (cpu_bf16_node) run
 * on mge_bgemm (cpu_bgemm.c): operands rounded to bf16, sums in f32, then
 * the same bias prefill and epilogue as the f32 paths. A linear node's
 * weight is packed once by bf_prepare when the executor prepares (fixed
 * params), else per call into ws. Convolutions multiply W [Og, K] by the
 * im2col matrix: the weight is the A operand, packed per call (Og * K
 * conversions, small next to the product), the columns the packed B. */

static size_t bf_round(size_t n)
{
    return (n + 63) / 64 * 64;
}

/* ws bytes of one bgemm with B packed per call */
static size_t bf_ws(int64_t M, int64_t N, int64_t K, int threads)
{
    return bf_round(mge_bgemm_pack_size(K, N)) + mge_bgemm_ws(M, N, K, threads) + 64;
}

/* ws split: 64-aligned packed B first, then bgemm's own scratch */
static void *bf_split(void *ws, int64_t K, int64_t N, void **rest)
{
    char *p = (char *)(((uintptr_t)ws + 63) & ~(uintptr_t)63);
    *rest = p + bf_round(mge_bgemm_pack_size(K, N));
    return p;
}

typedef struct bf_prep {
    int64_t K, N;
    void *pb;
} bf_prep;

static void bf_release(void *state)
{
    bf_prep *p = state;
    if (p)
        free(p->pb);
    free(p);
}

/* linear / fused_linear: weight [O, K] packed as B = W^T */
static mge_status bf_prepare(const mge_node *n, mge_tensor *const *in, void **state, mge_error *err)
{
    *state = NULL;
    if (!cpu_bf16_node(n) || !in[1] || in[1]->ndim != 2 || in[1]->dtype != MGE_F32)
        return MGE_OK;
    int64_t O = in[1]->dims[0], K = in[1]->dims[1];
    if (O <= 0 || K <= 0)
        return MGE_OK;
    bf_prep *p = malloc(sizeof *p);
    /* C11's aligned_alloc (kernels take no allocator from the core) */
    size_t bytes = (mge_bgemm_pack_size(K, O) + 63) / 64 * 64;
    void *pb = aligned_alloc(64, bytes);
    if (pb)
        memset(pb, 0, bytes);
    if (!p || !pb) {
        free(p);
        free(pb);
        return mge_error_set(err, MGE_ERR_NOMEM, "linear: no memory for the packed bf16 weight");
    }
    mge_bgemm_pack(1, K, O, in[1]->data, K, pb);
    *p = (bf_prep){K, O, pb};
    *state = p;
    return MGE_OK;
}

static mge_status bf_ws_check(const mge_kctx *ctx, const mge_node *n, size_t need, mge_error *err)
{
    if (!ctx->ws || ctx->ws_size < need)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: workspace of %zu bytes, need %zu", mge_kctx_opname(ctx, n),
                             ctx->ws_size, need);
    return MGE_OK;
}

static mge_status bf_linear(const mge_kctx *ctx, const mge_node *n, const float *x, const float *w, const float *b,
                            float *y, int64_t M, int64_t O, int64_t K, const cpu_epi *epi, mge_error *err)
{
    mge_status s = bf_ws_check(ctx, n, bf_ws(M, O, K, cpu_threads(ctx)), err);
    if (s != MGE_OK)
        return s;
    void *rest;
    void *pb = bf_split(ctx->ws, K, O, &rest);
    const bf_prep *p = ctx->prepared;
    if (p && p->K == K && p->N == O)
        pb = p->pb;
    else
        mge_bgemm_pack(1, K, O, w, K, pb);
    if (b)
        fill_block(y, O, M, O, NULL, b);
    mge_bgemm(ctx, 0, M, O, K, x, K, pb, b ? 1.0f : 0.0f, y, O, rest);
    cpu_epi_block(epi, y, y, O, M, O);
    return MGE_OK;
}

/* conv2d / fused_conv2d with groups of more than one input channel */
static size_t bf_conv_ws(const cpu_conv *c, int threads)
{
    const int64_t P = c->OH * c->OW, K = c->Cg * c->kh * c->kw;
    return (cpu_conv_1x1(c) ? 0 : bf_round(sizeof(float) * (size_t)(K * P))) + bf_ws(c->Og, P, K, threads);
}

static mge_status bf_conv(const mge_kctx *ctx, const mge_node *n, const cpu_conv *c, const float *x, const float *w,
                          const float *b, float *y, const cpu_epi *epi, mge_error *err)
{
    const int64_t P = c->OH * c->OW, K = c->Cg * c->kh * c->kw;
    mge_status s = bf_ws_check(ctx, n, bf_conv_ws(c, cpu_threads(ctx)), err);
    if (s != MGE_OK)
        return s;
    int direct = cpu_conv_1x1(c);
    float *col = ctx->ws;
    void *rest, *pb = bf_split((char *)ctx->ws + (direct ? 0 : bf_round(sizeof(float) * (size_t)(K * P))), K, P,
                               &rest);
    for (int64_t img = 0; img < c->N; img++)
        for (int64_t g = 0; g < c->G; g++) {
            const float *xg = x + (img * c->C + g * c->Cg) * c->H * c->W, *src = xg;
            if (!direct) {
                col_job j = {c, xg, col};
                cpu_parallel(ctx, K, P >= 4096 ? 1 : 4096 / P, col_rows, &j);
                src = col;
            }
            mge_bgemm_pack(0, K, P, src, P, pb);
            float *yg = y + (img * c->O + g * c->Og) * P;
            if (b)
                fill_block(yg, P, c->Og, P, b + g * c->Og, NULL);
            mge_bgemm(ctx, 0, c->Og, P, K, w + g * c->Og * K, K, pb, b ? 1.0f : 0.0f, yg, P, rest);
        }
    cpu_epi_block(epi, y, y, P, c->N * c->O, P);
    return MGE_OK;
}

/* matmul: b packed per batch index (once when b has no batch) */
static size_t mm_ws(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, int threads)
{
    size_t ref = cpu_ref_ws(n, in, out, threads);
    const mge_tensor *a = in[0], *y = out[0];
    if (!cpu_bf16_node(n) || a->ndim < 2 || y->ndim < 2)
        return ref;
    int ta = (int)mge_node_int(n, MGE_KEY_transpose_a, 0);
    int64_t M = y->dims[y->ndim - 2], N = y->dims[y->ndim - 1];
    int64_t K = ta ? a->dims[a->ndim - 2] : a->dims[a->ndim - 1];
    size_t own = bf_ws(M, N, K, threads);
    return own > ref ? own : ref;
}

static mge_status bf_matmul(const mge_kctx *ctx, const mge_node *n, const mge_tensor *a, const mge_tensor *bt,
                            const mge_tensor *y, int ta, int tb, int64_t M, int64_t N, int64_t K, mge_error *err)
{
    mge_status s = bf_ws_check(ctx, n, bf_ws(M, N, K, cpu_threads(ctx)), err);
    if (s != MGE_OK)
        return s;
    void *rest, *pb = bf_split(ctx->ws, K, N, &rest);
    int64_t lda = a->dims[a->ndim - 1], ldb = bt->dims[bt->ndim - 1];
    int nb = y->ndim - 2;
    int64_t batch = 1;
    for (int i = 0; i < nb; i++)
        batch *= y->dims[i];
    /* broadcast strides of a and b over y's batch dims (aligned at the right) */
    int64_t sa[MGE_MAX_DIMS] = {0}, sb[MGE_MAX_DIMS] = {0};
    int64_t st = M * K;
    for (int i = a->ndim - 3; i >= 0; i--) {
        sa[i + (nb - (a->ndim - 2))] = a->dims[i] == 1 ? 0 : st;
        st *= a->dims[i];
    }
    st = K * N;
    for (int i = bt->ndim - 3; i >= 0; i--) {
        sb[i + (nb - (bt->ndim - 2))] = bt->dims[i] == 1 ? 0 : st;
        st *= bt->dims[i];
    }
    const float *last = NULL;
    for (int64_t t = 0; t < batch; t++) {
        const float *ap = a->data, *bp = bt->data;
        for (int64_t i = nb - 1, r = t; i >= 0; i--) {
            int64_t k = r % y->dims[i];
            r /= y->dims[i];
            ap += k * sa[i];
            bp += k * sb[i];
        }
        if (bp != last)
            mge_bgemm_pack(tb, K, N, bp, ldb, pb);
        last = bp;
        mge_bgemm(ctx, ta, M, N, K, ap, lda, pb, 0.0f, (float *)y->data + t * M * N, N, rest);
    }
    return MGE_OK;
}

/* ---------------------------------------------------------------- conv2d */

/* Column blocks of one image and group: each task builds the im2col
 * columns of its own block in its thread's scratch (they stay in cache for
 * the sgemm that follows) or, for 1x1 stride-1 convs, reads x directly. */
typedef struct conv_job {
    const cpu_conv *c;
    const float *x, *w, *b;
    float *y, *ws;
    int direct;
    gemm_split s;
    cpu_epi epi;
} conv_job;

static void conv_cols_task(void *arg, int64_t task, int thread)
{
    const conv_job *j = arg;
    const cpu_conv *c = j->c;
    const int64_t P = c->OH * c->OW, K = c->Cg * c->kh * c->kw;
    int64_t ig = task / j->s.nb, blk = task % j->s.nb;   /* ig = image * G + group */
    int64_t img = ig / c->G, g = ig % c->G;
    int64_t p0 = blk * j->s.bs, p1 = p0 + j->s.bs < P ? p0 + j->s.bs : P;
    const float *xg = j->x + (img * c->C + g * c->Cg) * c->H * c->W;
    const float *src = xg + p0;
    float *y = j->y + (img * c->O + g * c->Og) * P + p0;
    int64_t ldb = P;
    fill_block(y, P, c->Og, p1 - p0, j->b ? j->b + g * c->Og : NULL, NULL);
    if (!j->direct) {
        float *col = j->ws + (size_t)thread * (size_t)(K * j->s.bs);
        cpu_im2col(c, xg, col, p0, p1, 0, K);
        src = col;
        ldb = p1 - p0;
    }
    if (K > 0 && mge_sgemm_pick(c->Og, p1 - p0, K))
        mge_sgemm(NULL, 0, 0, c->Og, p1 - p0, K, 1.0f, j->w + g * c->Og * K, K, src, ldb, 1.0f, y, P);
    else if (K > 0)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)c->Og, (blasint)(p1 - p0), (blasint)K, 1.0f,
                    j->w + g * c->Og * K, (blasint)K, src, (blasint)ldb, 1.0f, y, (blasint)P);
    cpu_epi_block(&j->epi, j->y, y, P, c->Og, p1 - p0);
}

/* Scratch floats of the im2col path: per thread one column block, or one
 * whole im2col matrix when the split is along output channels. */
static gemm_split conv_split(const cpu_conv *c)
{
    const int64_t P = c->OH * c->OW, K = c->Cg * c->kh * c->kw;
    gemm_split s = gemm_plan(c->Og, P, K);
    if (s.nb == 1)   /* uncut: one task per image and group */
        s = (gemm_split){1, P, 1};
    return s;
}

static int64_t conv_col_scratch(const cpu_conv *c, int threads)
{
    const int64_t P = c->OH * c->OW, K = c->Cg * c->kh * c->kw;
    gemm_split s = conv_split(c);
    return s.along_n ? K * s.bs * (threads < 1 ? 1 : threads) : K * P;
}

static size_t conv_ws(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, int threads)
{
    cpu_conv c;
    conv_shape(n, in, out, &c);
    size_t own = 0;
    if (cpu_bf16_node(n) && c.Cg > 1 && cpu_blas_fits(c.Og, c.OH * c.OW, c.K))
        own = bf_conv_ws(&c, threads);
    else if (cpu_rows_ok(&c))
        own = sizeof(float) * (size_t)cpu_rows_fwd_floats(&c) * (size_t)(threads < 1 ? 1 : threads);
    else if (c.Cg == 1)
        own = sizeof(float) * (size_t)dw_scratch(&c) * (size_t)(threads < 1 ? 1 : threads);
    else if (!cpu_conv_1x1(&c))
        own = sizeof(float) * (size_t)conv_col_scratch(&c, threads);
    size_t ref = cpu_ref_ws(n, in, out, threads);   /* shapes too large for BLAS fall back */
    return own > ref ? own : ref;
}

/* conv2d and fused_conv2d. */
static mge_status cpu_conv2d(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                             mge_error *err)
{
    const float *b;
    cpu_epi epi;
    if (!layer_io(n, in, &b, &epi))
        return bad_inputs(ctx, n, err);
    cpu_conv c;
    conv_shape(n, in, out, &c);
    const float *x = in[0]->data, *w = in[1]->data;
    float *y = out[0]->data;
    int threads = cpu_threads(ctx);
    if (cpu_bf16_node(n) && c.Cg > 1 && cpu_blas_fits(c.Og, c.OH * c.OW, c.K))
        return bf_conv(ctx, n, &c, x, w, b, y, &epi, err);
    if (cpu_rows_ok(&c)) {
        size_t need = sizeof(float) * (size_t)cpu_rows_fwd_floats(&c) * (size_t)threads;
        if (!ctx->ws || ctx->ws_size < need)
            return mge_error_set(err, MGE_ERR_INVALID, "%s: workspace of %zu bytes, need %zu", mge_kctx_opname(ctx, n),
                                 ctx->ws_size, need);
        cpu_rows_conv(ctx, &c, x, w, b, y, &epi, ctx->ws);
        return MGE_OK;
    }
    if (c.Cg == 1) {
        size_t need = sizeof(float) * (size_t)dw_scratch(&c) * (size_t)threads;
        if (!ctx->ws || ctx->ws_size < need)
            return mge_error_set(err, MGE_ERR_INVALID, "%s: workspace of %zu bytes, need %zu", mge_kctx_opname(ctx, n),
                                 ctx->ws_size, need);
        dw_job j = {&c, x, w, b, y, ctx->ws, epi};
        int64_t plane = c.OH * c.OW * c.kh * c.kw;
        cpu_parallel(ctx, c.N * c.O, plane >= 4096 ? 1 : 4096 / (plane ? plane : 1), dw_task, &j);
        return MGE_OK;
    }
    const int64_t P = c.OH * c.OW, K = c.Cg * c.kh * c.kw;
    if (!cpu_blas_fits(c.Og, P, K))
        return cpu_fallback(ctx, n, in, out, err);
    int direct = cpu_conv_1x1(&c);
    size_t need = direct ? 0 : sizeof(float) * (size_t)conv_col_scratch(&c, threads);
    if (need && (!ctx->ws || ctx->ws_size < need))
        return mge_error_set(err, MGE_ERR_INVALID, "%s: workspace of %zu bytes, need %zu", mge_kctx_opname(ctx, n),
                             ctx->ws_size, need);
    conv_job cj = {&c, x, w, b, y, ctx->ws, direct, conv_split(&c), epi};
    if (cj.s.along_n) {
        /* every image, group and column block is a task of its own */
        mge_pool_run(ctx->pool, c.N * c.G * cj.s.nb, conv_cols_task, &cj);
        return MGE_OK;
    }
    /* Few output pixels (late layers): one im2col per image and group,
     * shared by row blocks (output channels) of the sgemm. */
    for (int64_t img = 0; img < c.N; img++)
        for (int64_t g = 0; g < c.G; g++) {
            const float *xg = x + (img * c.C + g * c.Cg) * c.H * c.W;
            const float *src = xg;
            if (!direct) {
                col_job j = {&c, xg, ctx->ws};
                cpu_parallel(ctx, K, P >= 4096 ? 1 : 4096 / P, col_rows, &j);
                src = ctx->ws;
            }
            int64_t off = (img * c.O + g * c.Og) * P;
            cpu_epi ge = epi;
            ge.res = epi.res ? epi.res + off : NULL;
            gemm_job gj = {.ta = CblasNoTrans, .tb = CblasNoTrans, .M = c.Og, .N = P, .K = K, .lda = K, .ldb = P,
                           .ldc = P, .a = w + g * c.Og * K, .b = src, .c = y + off, .rowv = b ? b + g * c.Og : NULL,
                           .epi = ge};
            gemm_run(ctx, &gj, 1);
        }
    return MGE_OK;
}

/* ---------------------------------------------------------------- linear */

/* A few rows (batch-1 classifier heads): sgemv streams the weight once per
 * row, while sgemm would first pack all of it. Blocks of output features. */
typedef struct gemv_job {
    const float *w, *x, *b;
    float *y;
    int64_t M, O, K, bs;
    cpu_epi epi;
} gemv_job;

static void gemv_task(void *arg, int64_t blk, int thread)
{
    const gemv_job *j = arg;
    int64_t o0 = blk * j->bs, o1 = o0 + j->bs < j->O ? o0 + j->bs : j->O;
    fill_block(j->y + o0, j->O, j->M, o1 - o0, NULL, j->b ? j->b + o0 : NULL);
    for (int64_t m = 0; m < j->M; m++)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, (blasint)(o1 - o0), (blasint)j->K, 1.0f, j->w + o0 * j->K,
                    (blasint)j->K, j->x + m * j->K, 1, 1.0f, j->y + m * j->O + o0, 1);
    cpu_epi_block(&j->epi, j->y, j->y + o0, j->O, j->M, o1 - o0);
}

/* Small batches (LIN_T_MIN..LIN_T_MAX rows of x) on our sgemm: y^T = W x^T
 * is a plain product with W as A (no transpose to pack) and the batch as
 * its columns, one 32-wide panel at batch 32, cut over the pool by rows of
 * W. x^T and y^T are transposed in and out (a few percent of the work).
 * The y = x W^T sgemm of OpenBLAS ran MLP layers at batch 32 at about 70
 * GFLOP/s on one thread, and unsplit: 32 rows are too few to cut. */
#define LIN_T_MIN 16
#define LIN_T_MAX 64

static int lin_t(int64_t M, int64_t O, int64_t K)
{
    return M >= LIN_T_MIN && M <= LIN_T_MAX && O >= 14 && K > 0 && mge_sgemm_native();
}

/* rows of x (M) for the shapes of a linear node: 0 if x's numel does not divide */
static int64_t lin_rows(mge_tensor *const *in, int64_t K)
{
    return K ? mge_tensor_numel(in[0]) / K : 0;
}

static size_t lin_ws(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, int threads)
{
    size_t ref = cpu_ref_ws(n, in, out, threads), own = 0;
    if (in[1]->ndim == 2) {
        int64_t O = in[1]->dims[0], K = in[1]->dims[1], M = lin_rows(in, K);
        if (cpu_bf16_node(n) && K > 0)
            own = bf_ws(M, O, K, threads);
        else if (lin_t(M, O, K))
            own = sizeof(float) * (size_t)((K * M + 15) / 16 * 16 + O * M);
    }
    return own > ref ? own : ref;
}

/* y[m][o] += b[o] */
CPU_MULTI(lin_bias, (const float *restrict b, float *restrict y, int64_t M, int64_t O), (b, y, M, O), {
              for (int64_t m = 0; m < M; m++)
                  for (int64_t o = 0; o < O; o++)
                      y[m * O + o] += b[o];
          })

/* linear and fused_linear. */
static mge_status cpu_linear(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                             mge_error *err)
{
    const float *b;
    cpu_epi epi;
    if (!layer_io(n, in, &b, &epi))
        return bad_inputs(ctx, n, err);
    const mge_tensor *x = in[0], *w = in[1];
    int64_t O = w->dims[0], K = w->dims[1];
    int64_t M = K ? mge_tensor_numel(x) / K : 0;
    if (K == 0)   /* x [..., 0]: M is the output's rows */
        M = O ? mge_tensor_numel(out[0]) / O : 0;
    if (M == 0 || O == 0)
        return MGE_OK;
    if (!cpu_blas_fits(M, O, K))
        return cpu_fallback(ctx, n, in, out, err);
    float *y = out[0]->data;
    if (K == 0) {
        fill_block(y, O, M, O, NULL, b);
        cpu_epi_block(&epi, y, y, O, M, O);
        return MGE_OK;
    }
    const float *xd = x->data;
    if (cpu_bf16_node(n))
        return bf_linear(ctx, n, xd, w->data, b, y, M, O, K, &epi, err);
    if (M <= 4) {
        /* Memory-bound and nothing to re-pack: blocks of output features
         * (rows of w) of GEMV_BLOCK_FLOATS of w or more, GEMM_MIN_ROWS rows
         * or more; the cut depends on the shape alone, as above. */
        int64_t nb = 1;
        while (nb < GEMM_MAX_COL_BLOCKS && O * K / (2 * nb) >= GEMV_BLOCK_FLOATS && O / (2 * nb) >= GEMM_MIN_ROWS)
            nb *= 2;
        int64_t bs = ((O + nb - 1) / nb + 15) / 16 * 16;
        gemv_job j = {w->data, xd, b, y, M, O, K, bs, epi};
        mge_pool_run(ctx->pool, (O + bs - 1) / bs, gemv_task, &j);
        return MGE_OK;
    }
    if (lin_t(M, O, K)) {
        size_t need = sizeof(float) * (size_t)((K * M + 15) / 16 * 16 + O * M);
        if (!ctx->ws || ctx->ws_size < need)
            return mge_error_set(err, MGE_ERR_INVALID, "%s: workspace of %zu bytes, need %zu", mge_kctx_opname(ctx, n),
                                 ctx->ws_size, need);
        float *xt = ctx->ws, *yt = xt + (K * M + 15) / 16 * 16;
        cpu_transpose(xd, M, K, K, xt, M);
        mge_sgemm(ctx, 0, 0, O, M, K, 1.0f, w->data, K, xt, M, 0.0f, yt, M);
        cpu_transpose(yt, O, M, M, y, O);
        if (b)
            lin_bias(b, y, M, O);
        cpu_epi_block(&epi, y, y, O, M, O);
        return MGE_OK;
    }
    gemm_job gj = {.ta = CblasNoTrans, .tb = CblasTrans, .M = M, .N = O, .K = K, .lda = K, .ldb = K, .ldc = O,
                   .a = xd, .b = w->data, .c = y, .colv = b /* bias per column of y */, .epi = epi};
    gemm_run(ctx, &gj, 1);
    return MGE_OK;
}

/* ---------------------------------------------------------------- matmul */

static mge_status cpu_matmul(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                             mge_error *err)
{
    const mge_tensor *a = in[0], *bt = in[1], *y = out[0];
    if (a->ndim < 2 || bt->ndim < 2 || y->ndim < 2)
        return cpu_fallback(ctx, n, in, out, err);
    int ta = (int)mge_node_int(n, MGE_KEY_transpose_a, 0), tb = (int)mge_node_int(n, MGE_KEY_transpose_b, 0);
    int64_t M = y->dims[y->ndim - 2], N = y->dims[y->ndim - 1];
    int64_t K = ta ? a->dims[a->ndim - 2] : a->dims[a->ndim - 1];
    int64_t lda = a->dims[a->ndim - 1], ldb = bt->dims[bt->ndim - 1];
    int nb = y->ndim - 2;
    int64_t batch = 1;
    for (int i = 0; i < nb; i++)
        batch *= y->dims[i];
    if (batch == 0 || M == 0 || N == 0)
        return MGE_OK;
    if (!cpu_blas_fits(batch * M, N, K) || !cpu_blas_fits(lda, ldb, 0))
        return cpu_fallback(ctx, n, in, out, err);
    float *yd = y->data;
    if (K == 0) {
        memset(yd, 0, sizeof(float) * (size_t)(batch * M * N));
        return MGE_OK;
    }
    if (cpu_bf16_node(n))
        return bf_matmul(ctx, n, a, bt, y, ta, tb, M, N, K, err);
    int64_t bbatch = 1;
    for (int i = 0; i < bt->ndim - 2; i++)
        bbatch *= bt->dims[i];
    gemm_job j = {.ta = ta ? CblasTrans : CblasNoTrans, .tb = tb ? CblasTrans : CblasNoTrans, .M = M, .N = N, .K = K,
                  .lda = lda, .ldb = ldb, .ldc = N, .a = a->data, .b = bt->data, .c = yd, .sc = M * N,
                  .epi = {NULL, -1, 0.0f}};   /* zero prefill, no epilogue */
    /* b shared by every batch and a contiguous rows: one tall sgemm. */
    if (bbatch == 1 && !ta && mge_tensor_numel(a) == batch * M * K) {
        j.M = batch * M;
        gemm_run(ctx, &j, 1);
        return MGE_OK;
    }
    /* Per batch index: broadcast strides of a and b (dims aligned at the right). */
    int64_t sa[MGE_MAX_DIMS] = {0}, sb[MGE_MAX_DIMS] = {0};
    int64_t st = M * K;
    for (int i = a->ndim - 3; i >= 0; i--) {
        int yi = i + (nb - (a->ndim - 2));
        sa[yi] = a->dims[i] == 1 ? 0 : st;
        st *= a->dims[i];
    }
    st = K * N;
    for (int i = bt->ndim - 3; i >= 0; i--) {
        int yi = i + (nb - (bt->ndim - 2));
        sb[yi] = bt->dims[i] == 1 ? 0 : st;
        st *= bt->dims[i];
    }
    j.nbd = nb;
    j.bdims = y->dims;
    j.sa = sa;
    j.sb = sb;
    gemm_run(ctx, &j, batch);
    return MGE_OK;
}

void mge_cpu_register_gemm(mge_backend *b)
{
    cpu_isa_avx2();   /* decided once, before any kernel runs on pool threads */
    mge_cpu_bf16();   /* and the AMX permission asked for */
    b->k[MGE_OP_CONV2D][MGE_F32] = (mge_kernel){.run = cpu_conv2d, .ws = conv_ws};
    b->k[MGE_OP_LINEAR][MGE_F32] =
        (mge_kernel){.run = cpu_linear, .ws = lin_ws, .prepare = bf_prepare, .release = bf_release};
    b->k[MGE_OP_MATMUL][MGE_F32] = (mge_kernel){.run = cpu_matmul, .ws = mm_ws};
    b->k[MGE_OP_FUSED_CONV2D][MGE_F32] = (mge_kernel){.run = cpu_conv2d, .ws = conv_ws};
    b->k[MGE_OP_FUSED_LINEAR][MGE_F32] =
        (mge_kernel){.run = cpu_linear, .ws = lin_ws, .prepare = bf_prepare, .release = bf_release};
    mge_cpu_bf16();   /* decided (and AMX permitted) before pool threads run tile code */
}
