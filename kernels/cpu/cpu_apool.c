/* cpu_apool.c — adaptive average and max pooling (1-D, 2-D) and their
 * gradients in f32, parallel over planes (each plane is one task's, so
 * results do not depend on --threads). Bins as PyTorch (apool_bins.h); the
 * max keeps the first maximum or the last NaN, as the ref kernel does.
 * The average's gradient scatters dy / count over each bin in bin order
 * (float sums: within the parity tolerance of the ref gather). */
#include "cpu.h"

#include "apool_bins.h"

#include <math.h>
#include <string.h>

typedef struct apool_job {
    int avg;
    int64_t H, W, oh, ow;
    const float *x, *dy;
    float *y;
} apool_job;

static int fwd_of(int op)
{
    switch (op) {
    case MGE_OP_ADAPTIVE_AVGPOOL2D_GRAD: return MGE_OP_ADAPTIVE_AVGPOOL2D;
    case MGE_OP_ADAPTIVE_MAXPOOL2D_GRAD: return MGE_OP_ADAPTIVE_MAXPOOL2D;
    case MGE_OP_ADAPTIVE_AVGPOOL1D_GRAD: return MGE_OP_ADAPTIVE_AVGPOOL1D;
    case MGE_OP_ADAPTIVE_MAXPOOL1D_GRAD: return MGE_OP_ADAPTIVE_MAXPOOL1D;
    }
    return op;
}

/* The flat index in the plane of bin (i, j)'s max. */
static inline int64_t argmax(const apool_job *j, const float *restrict x, int64_t i, int64_t k, float *v)
{
    int64_t h0 = mge_apool_start(i, j->H, j->oh), h1 = mge_apool_end(i, j->H, j->oh);
    int64_t w0 = mge_apool_start(k, j->W, j->ow), w1 = mge_apool_end(k, j->W, j->ow);
    int64_t best = h0 * j->W + w0;
    float m = -INFINITY;
    for (int64_t h = h0; h < h1; h++)
        for (int64_t w = w0; w < w1; w++) {
            float e = x[h * j->W + w];
            if (e > m || isnan(e)) {
                m = e;
                best = h * j->W + w;
            }
        }
    *v = m;
    return best;
}

static void fwd_task(void *a, int64_t p0, int64_t p1, int thread)
{
    (void)thread;
    const apool_job *j = a;
    const int64_t H = j->H, W = j->W;
    for (int64_t p = p0; p < p1; p++) {
        const float *restrict x = j->x + p * H * W;
        float *restrict y = j->y + p * j->oh * j->ow;
        for (int64_t i = 0; i < j->oh; i++) {
            int64_t h0 = mge_apool_start(i, H, j->oh), h1 = mge_apool_end(i, H, j->oh);
            for (int64_t k = 0; k < j->ow; k++) {
                if (!j->avg) {
                    argmax(j, x, i, k, &y[i * j->ow + k]);
                    continue;
                }
                int64_t w0 = mge_apool_start(k, W, j->ow), w1 = mge_apool_end(k, W, j->ow);
                float s = 0.0f;
                for (int64_t h = h0; h < h1; h++)
                    for (int64_t w = w0; w < w1; w++)
                        s += x[h * W + w];
                y[i * j->ow + k] = s / (float)((h1 - h0) * (w1 - w0));
            }
        }
    }
}

static void grad_task(void *a, int64_t p0, int64_t p1, int thread)
{
    (void)thread;
    const apool_job *j = a;
    const int64_t H = j->H, W = j->W;
    for (int64_t p = p0; p < p1; p++) {
        const float *restrict x = j->x + p * H * W, *restrict dy = j->dy + p * j->oh * j->ow;
        float *restrict dx = j->y + p * H * W;
        memset(dx, 0, sizeof(float) * (size_t)(H * W));
        for (int64_t i = 0; i < j->oh; i++) {
            int64_t h0 = mge_apool_start(i, H, j->oh), h1 = mge_apool_end(i, H, j->oh);
            for (int64_t k = 0; k < j->ow; k++) {
                float g = dy[i * j->ow + k], v;
                if (!j->avg) {
                    dx[argmax(j, x, i, k, &v)] += g;
                    continue;
                }
                int64_t w0 = mge_apool_start(k, W, j->ow), w1 = mge_apool_end(k, W, j->ow);
                g /= (float)((h1 - h0) * (w1 - w0));
                for (int64_t h = h0; h < h1; h++)
                    for (int64_t w = w0; w < w1; w++)
                        dx[h * W + w] += g;
            }
        }
    }
}

/* The geometry when the node and tensors agree with it (else the ref
 * kernel reports what is wrong). */
static int job_of(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, apool_job *j)
{
    int f = fwd_of(n->op), grad = f != n->op, nsp = f == MGE_OP_ADAPTIVE_AVGPOOL2D || f == MGE_OP_ADAPTIVE_MAXPOOL2D ? 2 : 1;
    const mge_tensor *x = grad ? in[1] : in[0], *y = grad ? in[0] : out[0];
    if (x->ndim != y->ndim || x->ndim < nsp + 1 || x->dtype != MGE_F32 || y->dtype != MGE_F32 ||
        (grad && (out[0]->dtype != MGE_F32 || out[0]->ndim != x->ndim)))
        return 0;
    for (int i = 0; grad && i < x->ndim; i++)
        if (out[0]->dims[i] != x->dims[i])
            return 0;
    int64_t P, Py;
    mge_apool_dims(nsp, x->ndim, x->dims, &P, &j->H, &j->W);
    mge_apool_dims(nsp, y->ndim, y->dims, &Py, &j->oh, &j->ow);
    int64_t eo = nsp == 2 ? mge_node_ints(n, MGE_KEY_output_size, 0, 0) : 1;
    if (P != Py || j->oh != eo || j->ow != mge_node_ints(n, MGE_KEY_output_size, 1, 0) || j->H < 1 || j->W < 1 ||
        j->oh < 1 || j->ow < 1 || j->oh > (1 << 30) || j->ow > (1 << 30) ||
        j->H > ((int64_t)1 << 62) / (j->oh + 1) || j->W > ((int64_t)1 << 62) / (j->ow + 1))
        return 0;
    j->avg = f == MGE_OP_ADAPTIVE_AVGPOOL2D || f == MGE_OP_ADAPTIVE_AVGPOOL1D;
    j->x = x->data;
    j->dy = grad ? in[0]->data : NULL;
    j->y = out[0]->data;
    return 1;
}

static mge_status cpu_apool(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                            mge_error *err)
{
    apool_job j;
    if (!job_of(n, in, out, &j))
        return cpu_fallback(ctx, n, in, out, err);
    int grad = fwd_of(n->op) != n->op;
    int64_t P = mge_tensor_numel(grad ? in[1] : in[0]) / (j.H * j.W);
    /* per plane: about the larger of the input and output planes' elements */
    int64_t work = j.H * j.W > j.oh * j.ow ? j.H * j.W : j.oh * j.ow;
    cpu_parallel(ctx, P, work >= 4096 ? 1 : 4096 / (work ? work : 1), grad ? grad_task : fwd_task, &j);
    return MGE_OK;
}

void mge_cpu_register_apool(mge_backend *b)
{
    static const int ops[] = {MGE_OP_ADAPTIVE_AVGPOOL2D,      MGE_OP_ADAPTIVE_MAXPOOL2D,
                              MGE_OP_ADAPTIVE_AVGPOOL1D,      MGE_OP_ADAPTIVE_MAXPOOL1D,
                              MGE_OP_ADAPTIVE_AVGPOOL2D_GRAD, MGE_OP_ADAPTIVE_MAXPOOL2D_GRAD,
                              MGE_OP_ADAPTIVE_AVGPOOL1D_GRAD, MGE_OP_ADAPTIVE_MAXPOOL1D_GRAD};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        b->k[ops[i]][MGE_F32] = (mge_kernel){.run = cpu_apool, .ws = cpu_ref_ws};
}
