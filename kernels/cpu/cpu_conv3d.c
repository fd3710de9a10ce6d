/* cpu_conv3d.c — conv3d and its gradients (f32): vol2col + OpenBLAS sgemm,
 * in pool tasks (OpenBLAS single-threaded inside them, cpu_blas.c).
 *
 * Per image and group, the vol2col matrix has a row per input channel and
 * tap (K = Cg*kd*kh*kw rows) and a column per output voxel (P); it is
 * built one block of columns (or rows) at a time, about 256 KiB, in the
 * task's own workspace:
 *   forward:      Y_g[:, block] = W_g col(block) (+ bias); tasks: image x
 *                 group x column block;
 *   grad_input:   col = W_g[:, rows]^T dY_g(block), then added back onto
 *                 dx (col2vol); tasks: image x group x block of whole input
 *                 channels, so no two tasks write one element;
 *   grad_weight:  dW_g[:, rows] = sum over images and column blocks of
 *                 dY_g(block) col(rows, block)^T; tasks: group x block of
 *                 rows.
 * Every cut depends on the shapes alone and each result element is summed
 * by one task in a fixed order: bit-identical for any --threads. */
#include "cpu.h"

#include "ref/ref_convt.h"

#include <cblas.h>
#include <string.h>

#define BLOCK_FLOATS 65536

typedef struct c3 {
    ref_conv3d_geom q;
    int64_t P, ksz, K, inv;   /* output voxels, taps, rows, input voxels per channel */
    int64_t pb, nb;           /* columns per block, blocks */
    int64_t rb, nrb;          /* rows per block (whole channels for grad_input), blocks */
} c3;

static int c3_shape(const mge_node *n, const mge_tensor *x, const mge_tensor *w, c3 *c)
{
    mge_error e;
    if (mge_ref_conv3d_geom(NULL, n, x, w, &c->q, &e))
        return 0;
    const ref_conv3d_geom *q = &c->q;
    c->P = q->out[0] * q->out[1] * q->out[2];
    c->ksz = q->k[0] * q->k[1] * q->k[2];
    c->K = q->Cg * c->ksz;
    c->inv = q->in[0] * q->in[1] * q->in[2];
    int64_t pb = BLOCK_FLOATS / (c->K > 0 ? c->K : 1);
    pb = pb < 64 ? 64 : pb;
    c->pb = pb < c->P ? pb : c->P;
    c->nb = (c->P + c->pb - 1) / c->pb;
    int64_t ch = BLOCK_FLOATS / (c->pb * c->ksz);   /* channels per row block */
    ch = ch < 1 ? 1 : ch > q->Cg ? q->Cg : ch;
    c->rb = ch * c->ksz;
    c->nrb = (q->Cg + ch - 1) / ch;
    return cpu_blas_fits(c->K, c->P, q->Og) && cpu_blas_fits(q->O, c->pb, c->rb);
}

static size_t c3_floats(const c3 *c)
{
    int64_t a = c->K * c->pb, b = c->rb * c->pb;
    return (size_t)(a > b ? a : b);
}

/* col[r - r0][p - p0] for rows [r0, r1) and columns [p0, p1) of the
 * vol2col matrix of one image's group (x at its first channel); with add,
 * the transpose: xg[...] += col[...] (col2vol). */
static void vol2col(const c3 *c, float *restrict xg, float *restrict col, int64_t r0, int64_t r1, int64_t p0,
                    int64_t p1, int add)
{
    const ref_conv3d_geom *q = &c->q;
    const int64_t OH = q->out[1], OW = q->out[2], D = q->in[0], H = q->in[1], W = q->in[2], ld = p1 - p0;
    for (int64_t r = r0; r < r1; r++) {
        int64_t ch = r / c->ksz, t = r % c->ksz;
        int64_t a = t / (q->k[1] * q->k[2]), b = (t / q->k[2]) % q->k[1], e = t % q->k[2];
        float *restrict xc = xg + ch * c->inv;
        float *restrict d = col + (r - r0) * ld;
        int64_t od = p0 / (OH * OW), oh = (p0 / OW) % OH, ow = p0 % OW;
        for (int64_t p = 0; p < ld; p++) {
            int64_t id = od * q->s[0] - q->p[0] + a * q->d[0];
            int64_t ih = oh * q->s[1] - q->p[1] + b * q->d[1];
            int64_t iw = ow * q->s[2] - q->p[2] + e * q->d[2];
            int in = id >= 0 && id < D && ih >= 0 && ih < H && iw >= 0 && iw < W;
            if (add) {
                if (in)
                    xc[(id * H + ih) * W + iw] += d[p];
            } else {
                d[p] = in ? xc[(id * H + ih) * W + iw] : 0.0f;
            }
            if (++ow == OW) {
                ow = 0;
                if (++oh == OH)
                    oh = 0, od++;
            }
        }
    }
}

typedef struct c3_job {
    const c3 *c;
    const float *x, *w, *b, *dy;
    float *y, *ws;
} c3_job;

static void fwd_task(void *arg, int64_t task, int thread)
{
    const c3_job *j = arg;
    const c3 *c = j->c;
    const ref_conv3d_geom *q = &c->q;
    int64_t blk = task % c->nb, g = (task / c->nb) % q->G, img = task / (c->nb * q->G);
    int64_t p0 = blk * c->pb, p1 = p0 + c->pb < c->P ? p0 + c->pb : c->P;
    float *col = j->ws + (size_t)thread * c3_floats(c);
    vol2col(c, (float *)j->x + (img * q->C + g * q->Cg) * c->inv, col, 0, c->K, p0, p1, 0);
    float *y = j->y + (img * q->O + g * q->Og) * c->P + p0;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)q->Og, (blasint)(p1 - p0), (blasint)c->K, 1.0f,
                j->w + g * q->Og * c->K, (blasint)c->K, col, (blasint)(p1 - p0), 0.0f, y, (blasint)c->P);
    if (j->b)
        for (int64_t o = 0; o < q->Og; o++)
            for (int64_t p = 0; p < p1 - p0; p++)
                y[o * c->P + p] += j->b[g * q->Og + o];
}

static void gi_task(void *arg, int64_t task, int thread)
{
    const c3_job *j = arg;
    const c3 *c = j->c;
    const ref_conv3d_geom *q = &c->q;
    int64_t rblk = task % c->nrb, g = (task / c->nrb) % q->G, img = task / (c->nrb * q->G);
    int64_t r0 = rblk * c->rb, r1 = r0 + c->rb < c->K ? r0 + c->rb : c->K;
    float *col = j->ws + (size_t)thread * c3_floats(c);
    float *xg = j->y + (img * q->C + g * q->Cg) * c->inv;
    memset(xg + (r0 / c->ksz) * c->inv, 0, sizeof(float) * (size_t)((r1 - r0) / c->ksz * c->inv));
    const float *dy = j->dy + (img * q->O + g * q->Og) * c->P;
    for (int64_t blk = 0; blk < c->nb; blk++) {
        int64_t p0 = blk * c->pb, p1 = p0 + c->pb < c->P ? p0 + c->pb : c->P;
        /* col[rows][block] = W_g[:, rows]^T dY_g[:, block] */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (blasint)(r1 - r0), (blasint)(p1 - p0), (blasint)q->Og,
                    1.0f, j->w + g * q->Og * c->K + r0, (blasint)c->K, dy + p0, (blasint)c->P, 0.0f, col,
                    (blasint)(p1 - p0));
        vol2col(c, xg, col, r0, r1, p0, p1, 1);
    }
}

static void gw_task(void *arg, int64_t task, int thread)
{
    const c3_job *j = arg;
    const c3 *c = j->c;
    const ref_conv3d_geom *q = &c->q;
    int64_t rblk = task % c->nrb, g = task / c->nrb;
    int64_t r0 = rblk * c->rb, r1 = r0 + c->rb < c->K ? r0 + c->rb : c->K;
    float *col = j->ws + (size_t)thread * c3_floats(c);
    float *dw = j->y + g * q->Og * c->K + r0;
    float beta = 0.0f;
    for (int64_t img = 0; img < q->N; img++) {
        const float *dy = j->dy + (img * q->O + g * q->Og) * c->P;
        for (int64_t blk = 0; blk < c->nb; blk++) {
            int64_t p0 = blk * c->pb, p1 = p0 + c->pb < c->P ? p0 + c->pb : c->P;
            vol2col(c, (float *)j->x + (img * q->C + g * q->Cg) * c->inv, col, r0, r1, p0, p1, 0);
            /* dW_g[:, rows] (+)= dY_g[:, block] col[rows][block]^T */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)q->Og, (blasint)(r1 - r0),
                        (blasint)(p1 - p0), 1.0f, dy + p0, (blasint)c->P, col, (blasint)(p1 - p0), beta, dw,
                        (blasint)c->K);
            beta = 1.0f;
        }
    }
    if (beta == 0.0f)   /* no images: zero */
        for (int64_t o = 0; o < q->Og; o++)
            memset(dw + o * c->K, 0, sizeof(float) * (size_t)(r1 - r0));
}

/* x and w of the op's inputs: conv3d(x, w, b), _grad_input(dy, w, x), _grad_weight(dy, x, w) */
static void xw(const mge_node *n, mge_tensor *const *in, const mge_tensor **x, const mge_tensor **w)
{
    int gi = n->op == MGE_OP_CONV3D_GRAD_INPUT, gw = n->op == MGE_OP_CONV3D_GRAD_WEIGHT;
    *x = gi ? in[2] : gw ? in[1] : in[0];
    *w = gi ? in[1] : gw ? in[2] : in[1];
}

static size_t conv3d_ws(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, int threads)
{
    const mge_tensor *x, *w;
    xw(n, in, &x, &w);
    c3 c;
    size_t ref = cpu_ref_ws(n, in, out, threads);
    if (!c3_shape(n, x, w, &c))
        return ref;
    size_t own = sizeof(float) * c3_floats(&c) * (size_t)(threads < 1 ? 1 : threads);
    return own > ref ? own : ref;
}

static mge_status cpu_conv3d(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                             mge_error *err)
{
    const mge_tensor *x, *w;
    xw(n, in, &x, &w);
    c3 c;
    if (!c3_shape(n, x, w, &c) || x->dtype != MGE_F32 || w->dtype != MGE_F32)
        return cpu_fallback(ctx, n, in, out, err);
    const ref_conv3d_geom *q = &c.q;
    if (mge_tensor_numel(out[0]) == 0)
        return MGE_OK;
    size_t need = sizeof(float) * c3_floats(&c) * (size_t)cpu_threads(ctx);
    if (!ctx->ws || ctx->ws_size < need)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: workspace of %zu bytes, need %zu", mge_kctx_opname(ctx, n),
                             ctx->ws_size, need);
    c3_job j = {&c, x->data, w->data, NULL, NULL, out[0]->data, ctx->ws};
    if (n->op == MGE_OP_CONV3D) {
        j.b = n->nin >= 3 ? in[2]->data : NULL;
        mge_pool_run(ctx->pool, q->N * q->G * c.nb, fwd_task, &j);
    } else if (n->op == MGE_OP_CONV3D_GRAD_INPUT) {
        j.dy = in[0]->data;
        mge_pool_run(ctx->pool, q->N * q->G * c.nrb, gi_task, &j);
    } else {
        j.dy = in[0]->data;
        mge_pool_run(ctx->pool, q->G * c.nrb, gw_task, &j);
    }
    return MGE_OK;
}

void mge_cpu_register_conv3d(mge_backend *b)
{
    b->k[MGE_OP_CONV3D][MGE_F32] = (mge_kernel){.run = cpu_conv3d, .ws = conv3d_ws};
    b->k[MGE_OP_CONV3D_GRAD_INPUT][MGE_F32] = (mge_kernel){.run = cpu_conv3d, .ws = conv3d_ws};
    b->k[MGE_OP_CONV3D_GRAD_WEIGHT][MGE_F32] = (mge_kernel){.run = cpu_conv3d, .ws = conv3d_ws};
}
