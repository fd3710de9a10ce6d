/* cpu_pool3d.c — maxpool3d (and its indices), avgpool3d and their
 * gradients in f32, parallel over the N*C planes (each plane one task's,
 * so results do not depend on --threads). The window walk and the rules
 * are ref_pool3d.c's (kernels/kpool3d.h's geometry): the window's range of
 * input positions per dim is computed once, then the loops run over it
 * without tests; the max keeps the first maximum (a NaN wins), the
 * average sums in float (within the parity tolerance of ref's double).
 * Other dtypes and shapes that disagree with the geometry go to ref. */
#include "cpu.h"
#include "kpool3d.h"

#include <math.h>
#include <string.h>

typedef struct p3_job {
    kp3_geom g;
    int op, incl, colmajor;
    const float *x, *dy;
    float *y;
    int64_t *idx;
} p3_job;

static int64_t p3_flat(const kp3_geom *g, int64_t nc, int64_t id, int64_t ih, int64_t iw, int colmajor)
{
    int64_t D = g->in[0], H = g->in[1], W = g->in[2];
    return nc * D * H * W + (colmajor ? (iw * H + ih) * D + id : (id * H + ih) * W + iw);
}

static void p3_task(void *p, int64_t a, int64_t b, int thread)
{
    const p3_job *j = p;
    const kp3_geom *g = &j->g;
    int64_t S = g->in[0] * g->in[1] * g->in[2], O = g->out[0] * g->out[1] * g->out[2], W = g->in[2],
            HW = g->in[1] * g->in[2];
    int grad = j->op == MGE_OP_MAXPOOL3D_GRAD || j->op == MGE_OP_AVGPOOL3D_GRAD;
    int mx = j->op == MGE_OP_MAXPOOL3D || j->op == MGE_OP_MAXPOOL3D_GRAD;
    for (int64_t nc = a; nc < b; nc++) {
        const float *x = j->x + nc * S;
        float *dx = grad ? j->y + nc * S : NULL;
        if (dx)
            memset(dx, 0, sizeof(float) * (size_t)S);
        int64_t o = nc * O;
        for (int64_t od = 0; od < g->out[0]; od++) {
            int64_t d0, dc, dp;
            kp3_span(g, 0, od, &d0, &dc, &dp);
            for (int64_t oh = 0; oh < g->out[1]; oh++) {
                int64_t h0, hc, hp;
                kp3_span(g, 1, oh, &h0, &hc, &hp);
                for (int64_t ow = 0; ow < g->out[2]; ow++, o++) {
                    int64_t w0, wc, wp;
                    kp3_span(g, 2, ow, &w0, &wc, &wp);
                    int64_t best = -1;
                    float m = -INFINITY, sum = 0;
                    for (int64_t q = 0; q < dc; q++) {
                        int64_t id = d0 + q * g->d[0];
                        for (int64_t r = 0; r < hc; r++) {
                            int64_t ih = h0 + r * g->d[1];
                            const float *row = x + id * HW + ih * W;
                            for (int64_t t = 0; t < wc; t++) {
                                int64_t iw = w0 + t * g->d[2];
                                float v = row[iw];
                                if (!mx)
                                    sum += v;
                                else if (best < 0 || v > m || (v != v && m == m)) {
                                    m = v;
                                    best = id * HW + ih * W + iw;
                                }
                            }
                        }
                    }
                    int64_t div = j->incl ? dp * hp * wp : dc * hc * wc;
                    if (grad) {
                        float v = j->dy[o];
                        if (mx) {
                            if (best >= 0)
                                dx[best] += v;
                            continue;
                        }
                        if (div <= 0)
                            continue;
                        float share = v / (float)div;
                        for (int64_t q = 0; q < dc; q++)
                            for (int64_t r = 0; r < hc; r++) {
                                float *row = dx + (d0 + q * g->d[0]) * HW + (h0 + r * g->d[1]) * W;
                                for (int64_t t = 0; t < wc; t++)
                                    row[w0 + t * g->d[2]] += share;
                            }
                        continue;
                    }
                    if (mx) {
                        j->y[o] = best < 0 ? -INFINITY : m;
                        if (j->idx)
                            j->idx[o] = best < 0 ? -1
                                                 : p3_flat(g, nc, best / HW, best / W % g->in[1], best % W, j->colmajor);
                    } else {
                        j->y[o] = div > 0 ? sum / (float)div : NAN;
                    }
                }
            }
        }
    }
}

static int f32_of(const mge_tensor *t, int nd, const int64_t *dims)
{
    if (t->dtype != MGE_F32 || t->ndim != nd || (!t->data && mge_tensor_numel(t)))
        return 0;
    for (int i = 0; i < nd; i++)
        if (t->dims[i] != dims[i])
            return 0;
    return 1;
}

static mge_status cpu_pool3d(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                             mge_error *err)
{
    p3_job j;
    memset(&j, 0, sizeof j);
    j.op = n->op;
    int grad = n->op == MGE_OP_MAXPOOL3D_GRAD || n->op == MGE_OP_AVGPOOL3D_GRAD;
    const mge_tensor *x = grad ? in[1] : in[0];
    mge_error e;
    if (x->ndim != 5 || kp3_geom_of(n, "pool3d", x->dims, &j.g, &e))
        return cpu_fallback(ctx, n, in, out, err);
    int64_t yd[5] = {j.g.N, j.g.C, j.g.out[0], j.g.out[1], j.g.out[2]};
    int ok = f32_of(x, 5, x->dims) && f32_of(grad ? in[0] : out[0], 5, yd) && (!grad || f32_of(out[0], 5, x->dims));
    if (ok && n->op == MGE_OP_MAXPOOL3D && n->nout > 1) {
        const mge_tensor *ix = out[1];
        ok = ix->dtype == MGE_I64 && ix->ndim == 5 && mge_tensor_same_shape(ix, out[0]) &&
             (ix->data || !mge_tensor_numel(ix));
        j.idx = ix->data;
    }
    if (!ok)
        return cpu_fallback(ctx, n, in, out, err);
    j.incl = (int)mge_node_int(n, MGE_KEY_count_include_pad, 1);
    j.colmajor = mge_node_int(n, MGE_KEY_storage_order, 0) != 0;
    j.x = x->data;
    j.dy = grad ? in[0]->data : NULL;
    j.y = out[0]->data;
    int64_t planes = j.g.N * j.g.C, work = j.g.out[0] * j.g.out[1] * j.g.out[2] * j.g.k[0] * j.g.k[1] * j.g.k[2];
    if (planes > 0)
        cpu_parallel(ctx, planes, work >= 4096 ? 1 : 4096 / (work ? work : 1), p3_task, &j);
    return MGE_OK;
}

void mge_cpu_register_pool3d(mge_backend *b)
{
    static const int ops[] = {MGE_OP_MAXPOOL3D, MGE_OP_AVGPOOL3D, MGE_OP_MAXPOOL3D_GRAD, MGE_OP_AVGPOOL3D_GRAD};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        b->k[ops[i]][MGE_F32] = (mge_kernel){.run = cpu_pool3d, .ws = cpu_ref_ws};
}
