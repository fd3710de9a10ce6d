/* cpu_resize.c — resize and resize_grad on f32, one task per run of
 * (n, c) planes. The source indices and weights of every output row and
 * column are tabled once per call in the scratch (kshared.h's float
 * arithmetic, so the pixels match ref and PyTorch); inner loops run along
 * W over the tables. Other dtypes, bicubic and shapes the inference did
 * not make go to ref. */
#include "cpu.h"

#include <string.h>

typedef struct rs_job {
    const float *x;
    float *y;
    int64_t H, W, OH, OW;
    int bilinear;
    const int64_t *h0, *h1, *w0, *w1;   /* per output row / column */
    const float *lh, *lw;
} rs_job;

static size_t tables_bytes(int64_t OH, int64_t OW)
{
    return (size_t)(OH + OW) * (2 * sizeof(int64_t) + sizeof(float)) + 64;
}

static int geom_ok(const mge_tensor *x, const mge_tensor *y)
{
    return x->dtype == MGE_F32 && y->dtype == MGE_F32 && x->ndim == 4 && y->ndim == 4 &&
           x->dims[0] == y->dims[0] && x->dims[1] == y->dims[1] && x->dims[2] > 0 && x->dims[3] > 0 &&
           x->data && y->data && x->nbytes >= (size_t)mge_tensor_numel(x) * 4 &&
           y->nbytes >= (size_t)mge_tensor_numel(y) * 4;
}

/* Fills j's tables from ws (tables_bytes of it). */
static void tables(const mge_node *n, rs_job *j, void *ws)
{
    int align = (int)mge_node_int(n, MGE_KEY_align_corners, 0);
    int64_t *p = ws;
    j->h0 = p, j->h1 = p + j->OH, j->w0 = p + 2 * j->OH, j->w1 = p + 2 * j->OH + j->OW;
    float *f = (float *)(p + 2 * (j->OH + j->OW));
    j->lh = f, j->lw = f + j->OH;
    int64_t *h0 = p, *h1 = p + j->OH, *w0 = p + 2 * j->OH, *w1 = w0 + j->OW;
    float *lh = f, *lw = f + j->OH;
    float sh = mge_resize_step(j->H, j->OH, align, mge_resize_factor(n, 0));
    float sw = mge_resize_step(j->W, j->OW, align, mge_resize_factor(n, 1));
    j->bilinear = mge_node_int(n, MGE_KEY_mode, 0) == MGE_MODE_BILINEAR;
    for (int64_t o = 0; o < j->OH; o++) {
        if (j->bilinear)
            mge_resize_linear(o, j->H, align, sh, &h0[o], &h1[o], &lh[o]);
        else
            h0[o] = h1[o] = mge_resize_nearest(o, j->H, j->OH, sh), lh[o] = 0;
    }
    for (int64_t o = 0; o < j->OW; o++) {
        if (j->bilinear)
            mge_resize_linear(o, j->W, align, sw, &w0[o], &w1[o], &lw[o]);
        else
            w0[o] = w1[o] = mge_resize_nearest(o, j->W, j->OW, sw), lw[o] = 0;
    }
}

static void resize_task(void *a, int64_t p0, int64_t p1, int thread)
{
    (void)thread;
    const rs_job *j = a;
    for (int64_t p = p0; p < p1; p++) {
        const float *x = j->x + p * j->H * j->W;
        float *y = j->y + p * j->OH * j->OW;
        for (int64_t oh = 0; oh < j->OH; oh++, y += j->OW) {
            const float *r0 = x + j->h0[oh] * j->W, *r1 = x + j->h1[oh] * j->W;
            if (!j->bilinear) {
                for (int64_t ow = 0; ow < j->OW; ow++)
                    y[ow] = r0[j->w0[ow]];
                continue;
            }
            float l1 = j->lh[oh], l0 = 1.0f - l1;
            for (int64_t ow = 0; ow < j->OW; ow++) {
                float b1 = j->lw[ow], b0 = 1.0f - b1;
                int64_t a0 = j->w0[ow], a1 = j->w1[ow];
                y[ow] = l0 * (b0 * r0[a0] + b1 * r0[a1]) + l1 * (b0 * r1[a0] + b1 * r1[a1]);
            }
        }
    }
}

/* dx planes: zero, then every dy pixel added into its taps. */
static void grad_task(void *a, int64_t p0, int64_t p1, int thread)
{
    (void)thread;
    const rs_job *j = a;
    for (int64_t p = p0; p < p1; p++) {
        const float *dy = j->x + p * j->OH * j->OW;
        float *dx = j->y + p * j->H * j->W;
        memset(dx, 0, (size_t)(j->H * j->W) * sizeof *dx);
        for (int64_t oh = 0; oh < j->OH; oh++, dy += j->OW) {
            float *r0 = dx + j->h0[oh] * j->W, *r1 = dx + j->h1[oh] * j->W;
            if (!j->bilinear) {
                for (int64_t ow = 0; ow < j->OW; ow++)
                    r0[j->w0[ow]] += dy[ow];
                continue;
            }
            float l1 = j->lh[oh], l0 = 1.0f - l1;
            for (int64_t ow = 0; ow < j->OW; ow++) {
                float b1 = j->lw[ow], b0 = 1.0f - b1, g = dy[ow];
                int64_t a0 = j->w0[ow], a1 = j->w1[ow];
                r0[a0] += l0 * b0 * g;
                r0[a1] += l0 * b1 * g;
                r1[a0] += l1 * b0 * g;
                r1[a1] += l1 * b1 * g;
            }
        }
    }
}

static size_t resize_ws(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, int threads)
{
    (void)n, (void)threads;
    const mge_tensor *big = n->op == MGE_OP_RESIZE_GRAD ? in[0] : out[0];
    return big->ndim == 4 ? tables_bytes(big->dims[2], big->dims[3]) : 0;
}

static mge_status cpu_resize(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                             mge_error *err)
{
    int grad = n->op == MGE_OP_RESIZE_GRAD;
    const mge_tensor *x = grad ? in[1] : in[0], *big = grad ? in[0] : out[0];
    mge_tensor *res = out[0];
    if (!geom_ok(x, big) || (grad && (res->dtype != MGE_F32 || mge_tensor_numel(res) != mge_tensor_numel(x) ||
                                      !res->data || res->nbytes < (size_t)mge_tensor_numel(x) * 4)) ||
        !ctx->ws || ctx->ws_size < tables_bytes(big->dims[2], big->dims[3]) ||
        mge_node_int(n, MGE_KEY_mode, 0) == MGE_MODE_BICUBIC)
        return cpu_fallback(ctx, n, in, out, err);
    rs_job j = {grad ? in[0]->data : x->data, res->data, x->dims[2], x->dims[3], big->dims[2], big->dims[3], 0,
                NULL, NULL, NULL, NULL, NULL, NULL};
    tables(n, &j, ctx->ws);
    int64_t P = x->dims[0] * x->dims[1], per = j.OH * j.OW + j.H * j.W;
    int64_t grain = per ? CPU_GRAIN / per : 1;
    cpu_parallel(ctx, P, grain < 1 ? 1 : grain, grad ? grad_task : resize_task, &j);
    return MGE_OK;
}

void mge_cpu_register_resize(mge_backend *b)
{
    b->k[MGE_OP_RESIZE][MGE_F32] = (mge_kernel){.run = cpu_resize, .ws = resize_ws};
    b->k[MGE_OP_RESIZE_GRAD][MGE_F32] = (mge_kernel){.run = cpu_resize, .ws = resize_ws};
}
