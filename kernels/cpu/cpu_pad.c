/* cpu_pad.c — pad as row copies: every output row (all dims but the
 * last) reads one source row of x or is the constant, and within a row
 * the middle is one memcpy, the edges the constant or the mode's elements
 * (kshared.h's mge_pad_source); one task per run of rows. pad_grad runs
 * the ref kernel (sums in double; not on a hot path). */
#include "cpu.h"

#include <string.h>

typedef struct pad_job {
    const char *x;
    char *y;
    int nd, mode;
    int64_t xd[MGE_MAX_DIMS], yd[MGE_MAX_DIMS], b[MGE_MAX_DIMS];
    size_t es;
    unsigned char fill[16];
} pad_job;

static void fill_n(char *p, const unsigned char *v, size_t es, int64_t k)
{
    for (int64_t i = 0; i < k; i++)
        memcpy(p + (size_t)i * es, v, es);
}

static void pad_task(void *a, int64_t r0, int64_t r1, int thread)
{
    (void)thread;
    const pad_job *j = a;
    int L = j->nd - 1;
    int64_t W = j->xd[L], OW = j->yd[L], bl = j->b[L];
    for (int64_t r = r0; r < r1; r++) {
        char *y = j->y + (size_t)(r * OW) * j->es;
        /* the source row, or -1 */
        int64_t rem = r, src = 0, mul = 1;
        for (int d = L - 1; d >= 0 && src >= 0; d--) {
            int64_t o = rem % j->yd[d];
            rem /= j->yd[d];
            int64_t s = mge_pad_source(o, j->xd[d], j->b[d], j->mode);
            src = s < 0 ? -1 : src + s * mul;
            mul *= j->xd[d];
        }
        if (src < 0) {
            fill_n(y, j->fill, j->es, OW);
            continue;
        }
        const char *x = j->x + (size_t)(src * W) * j->es;
        int64_t lo = bl > 0 ? bl : 0, hi = bl + W < OW ? bl + W : OW; /* output span copied straight */
        for (int64_t o = 0; o < lo; o++) {
            int64_t s = mge_pad_source(o, W, bl, j->mode);
            memcpy(y + (size_t)o * j->es, s < 0 ? (const char *)j->fill : x + (size_t)s * j->es, j->es);
        }
        if (hi > lo)
            memcpy(y + (size_t)lo * j->es, x + (size_t)(lo - bl) * j->es, (size_t)(hi - lo) * j->es);
        for (int64_t o = hi > lo ? hi : lo; o < OW; o++) {
            int64_t s = mge_pad_source(o, W, bl, j->mode);
            memcpy(y + (size_t)o * j->es, s < 0 ? (const char *)j->fill : x + (size_t)s * j->es, j->es);
        }
    }
}

static mge_status cpu_pad(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                          mge_error *err)
{
    const mge_tensor *x = in[0];
    mge_tensor *y = out[0];
    const mge_attr *p = mge_node_attr(n, MGE_KEY_pads);
    pad_job j;
    memset(&j, 0, sizeof j);
    j.nd = x->ndim;
    j.mode = (int)mge_node_int(n, MGE_KEY_mode, MGE_MODE_CONSTANT);
    j.es = mge_dtype_size(x->dtype);
    int ok = p && p->n % 2 == 0 && p->n / 2 <= x->ndim && x->ndim >= 1 && y->ndim == x->ndim &&
             y->dtype == x->dtype && j.es <= sizeof j.fill && y->data != x->data;
    for (int d = 0; ok && d < x->ndim; d++) {
        int k = x->ndim - 1 - d;
        j.b[d] = 2 * k < p->n ? p->i[2 * k] : 0;
        int64_t e = 2 * k < p->n ? p->i[2 * k + 1] : 0;
        j.xd[d] = x->dims[d];
        j.yd[d] = y->dims[d];
        ok = j.yd[d] == j.xd[d] + j.b[d] + e && j.yd[d] >= 0 &&
             (j.mode == MGE_MODE_CONSTANT || (j.b[d] >= 0 && e >= 0 && (j.xd[d] > 0 || j.yd[d] == 0))) &&
             (j.mode != MGE_MODE_REFLECT || (j.b[d] < j.xd[d] && e < j.xd[d]) || (j.b[d] == 0 && e == 0));
    }
    int64_t nx = mge_tensor_numel(x), ny = mge_tensor_numel(y);
    if (!ok || (nx && (!x->data || x->nbytes < (size_t)nx * j.es)) || (ny && (!y->data || y->nbytes < (size_t)ny * j.es)))
        return cpu_fallback(ctx, n, in, out, err);
    if (ny == 0)
        return MGE_OK;
    double v = mge_node_float(n, MGE_KEY_value, 0);
    switch (x->dtype) {
    case MGE_F32: { float f = (float)v; memcpy(j.fill, &f, 4); break; }
    case MGE_F16: { uint16_t h = mge_f32_to_f16((float)v); memcpy(j.fill, &h, 2); break; }
    case MGE_BF16: { uint16_t h = mge_f32_to_bf16((float)v); memcpy(j.fill, &h, 2); break; }
    default: return cpu_fallback(ctx, n, in, out, err);
    }
    j.x = x->data;
    j.y = y->data;
    int64_t OW = j.yd[j.nd - 1], rows = OW ? ny / OW : 0;
    int64_t grain = OW ? CPU_GRAIN / OW : 1;
    cpu_parallel(ctx, rows, grain < 1 ? 1 : grain, pad_task, &j);
    return MGE_OK;
}

void mge_cpu_register_pad(mge_backend *b)
{
    b->k[MGE_OP_PAD][MGE_F32] = (mge_kernel){.run = cpu_pad, .ws = cpu_ref_ws};
    b->k[MGE_OP_PAD][MGE_F16] = (mge_kernel){.run = cpu_pad, .ws = cpu_ref_ws};
    b->k[MGE_OP_PAD][MGE_BF16] = (mge_kernel){.run = cpu_pad, .ws = cpu_ref_ws};
}
