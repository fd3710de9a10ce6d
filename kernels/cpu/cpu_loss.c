/* cpu_loss.c — cross_entropy and cross_entropy_grad on f32 logits [N,C] or
 * [N,C,d...] (labels [N,d...], i32 or i64), with ignore_index and
 * label_smoothing as in ref_loss.c / ref_grad_elem.c: the labels are
 * checked first (the ref message), then the positions split over the
 * pool. A position's classes are contiguous for [N,C] (vector loops) and
 * S apart otherwise. The forward keeps per-position losses in double and
 * adds them in order, so the loss does not depend on the thread count.
 * Registered after cpu_grad_elem.c's [N,C]-only kernels, which it replaces. */
#include "cpu.h"
#include "kindex.h"

#include <math.h>

typedef struct ce2_job {
    const float *x;
    const mge_tensor *lab;
    int64_t C, S, ignore;
    double eps;
    double *loss;   /* forward: per position */
    float *y;       /* grad: output */
    double scale;   /* grad: dy / count */
} ce2_job;

/* Max (NaN wins, as in ref), sum of exp(x - max) and sum of x over a row. */
CPU_MULTI3(ce2_row, (const float *x, int64_t C, float *mx, double *sum, double *tot), (x, C, mx, sum, tot), {
    /* 16 lanes of max (vmaxps); a NaN among the x makes the sums below NaN
     * (cpu_expf keeps it), and m is set NaN from them, as "NaN wins" in ref */
    float mk[16], m = -INFINITY;
    for (int k = 0; k < 16; k++)
        mk[k] = -INFINITY;
    int64_t j = 0;
    for (; j + 16 <= C; j += 16)
        for (int k = 0; k < 16; k++)
            mk[k] = x[j + k] > mk[k] ? x[j + k] : mk[k];
    for (int k = 0; k < 16; k++)
        m = mk[k] > m ? mk[k] : m;
    for (; j < C; j++)
        m = x[j] > m ? x[j] : m;
    float acc[16] = {0}, t[16] = {0};
    j = 0;
    for (; j + 16 <= C; j += 16)
        for (int k = 0; k < 16; k++) {
            acc[k] += cpu_expf(x[j + k] - m);
            t[k] += x[j + k];
        }
    double s = 0, tt = 0;
    for (int k = 0; k < 16; k++)
        s += acc[k], tt += t[k];
    for (; j < C; j++)
        s += (double)cpu_expf(x[j] - m), tt += x[j];
    *mx = s != s ? NAN : m;
    *sum = s;
    *tot = tt;
})

CPU_MULTI3(ce2_grad_row, (const float *x, int64_t C, float m, float a, float b, float *y), (x, C, m, a, b, y), {
    for (int64_t j = 0; j < C; j++)
        y[j] = cpu_expf(x[j] - m) * a - b;
})

static void ce2_stats(const ce2_job *j, int64_t pos, float *m, double *sum, double *tot)
{
    int64_t i = pos / j->S, s = pos % j->S;
    const float *x = j->x + i * j->C * j->S + s;
    if (j->S == 1) {
        ce2_row(x, j->C, m, sum, tot);
        return;
    }
    float mx = -INFINITY;
    for (int64_t c = 0; c < j->C; c++) {
        float v = x[c * j->S];
        mx = v > mx || v != v ? v : mx;
    }
    double su = 0, t = 0;
    for (int64_t c = 0; c < j->C; c++) {
        su += exp((double)x[c * j->S] - mx);
        t += x[c * j->S];
    }
    *m = mx, *sum = su, *tot = t;
}

static void ce2_fwd_task(void *p, int64_t p0, int64_t p1, int thread)
{
    (void)thread;
    const ce2_job *j = p;
    for (int64_t pos = p0; pos < p1; pos++) {
        int64_t c = kidx_ld(j->lab->dtype, j->lab->data, pos);
        if (c == j->ignore) {
            j->loss[pos] = 0;
            continue;
        }
        float m;
        double sum, tot;
        ce2_stats(j, pos, &m, &sum, &tot);
        double lse = (double)m + log(sum);
        const float *x = j->x + pos / j->S * j->C * j->S + pos % j->S;
        double loss = -(1 - j->eps) * ((double)x[c * j->S] - lse);
        if (j->eps != 0)
            loss -= j->eps / (double)j->C * (tot - (double)j->C * lse);
        j->loss[pos] = loss;
    }
}

static void ce2_grad_task(void *p, int64_t p0, int64_t p1, int thread)
{
    (void)thread;
    const ce2_job *j = p;
    for (int64_t pos = p0; pos < p1; pos++) {
        int64_t c = kidx_ld(j->lab->dtype, j->lab->data, pos), off = pos / j->S * j->C * j->S + pos % j->S;
        float *y = j->y + off;
        const float *x = j->x + off;
        if (c == j->ignore) {
            for (int64_t k = 0; k < j->C; k++)
                y[k * j->S] = 0;
            continue;
        }
        float m;
        double sum, tot;
        ce2_stats(j, pos, &m, &sum, &tot);
        float a = (float)(j->scale / sum), b = (float)(j->eps / (double)j->C * j->scale);
        if (j->S == 1)
            ce2_grad_row(x, j->C, m, a, b, y);
        else
            for (int64_t k = 0; k < j->C; k++)
                y[k * j->S] = (float)(exp((double)x[k * j->S] - m) * (j->scale / sum) - j->eps / (double)j->C * j->scale);
        y[c * j->S] -= (float)((1 - j->eps) * j->scale);
    }
}

/* f32 logits of rank >= 2 with labels of the matching shape; 0 sends the
 * case to ref (which says what is wrong). Sets N*S into *np. */
static int ce2_fits(const mge_tensor *x, const mge_tensor *lab, int64_t *np)
{
    int ok = x->dtype == MGE_F32 && x->ndim >= 2 && x->dims[1] >= 1 && (lab->dtype == MGE_I32 || lab->dtype == MGE_I64) &&
             lab->ndim == x->ndim - 1 && lab->dims[0] == x->dims[0] && x->data && lab->data;
    for (int d = 2; ok && d < x->ndim; d++)
        ok = lab->dims[d - 1] == x->dims[d];
    *np = ok ? mge_tensor_numel(lab) : 0;
    return ok && x->nbytes >= sizeof(float) * (size_t)mge_tensor_numel(x) &&
           lab->nbytes >= mge_dtype_size(lab->dtype) * (size_t)*np;
}

/* Labels in [0, C) or ignore (the ref message); the count not ignored. */
static mge_status ce2_labels(const mge_kctx *ctx, const mge_node *n, const mge_tensor *lab, int64_t C,
                             int64_t ignore, int64_t *cnt, mge_error *err)
{
    int64_t np = mge_tensor_numel(lab);
    *cnt = 0;
    for (int64_t i = 0; i < np; i++) {
        int64_t c = kidx_ld(lab->dtype, lab->data, i);
        if (c == ignore)
            continue;
        ++*cnt;
        if (c < 0 || c >= C) {
            char b[160];
            return mge_error_set(err, MGE_ERR_INVALID, "%s: label%s = %lld is outside the classes [0, %lld)",
                                 mge_kctx_opname(ctx, n), kidx_pos(lab->ndim, lab->dims, i, b, sizeof b),
                                 (long long)c, (long long)C);
        }
    }
    return MGE_OK;
}

static void ce2_setup(const mge_node *n, const mge_tensor *x, const mge_tensor *lab, ce2_job *j)
{
    j->x = x->data, j->lab = lab, j->C = x->dims[1], j->S = 1;
    for (int d = 2; d < x->ndim; d++)
        j->S *= x->dims[d];
    j->ignore = mge_node_int(n, MGE_KEY_ignore_index, -100);
    j->eps = mge_node_float(n, MGE_KEY_label_smoothing, 0);
}

/* From the shapes alone: the planner asks before any data is bound (a
 * data check here sent every forward to ref for want of workspace). */
static size_t ce2_ws(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, int threads)
{
    const mge_tensor *x = in[0], *lab = in[1];
    int ok = x->dtype == MGE_F32 && x->ndim >= 2 && (lab->dtype == MGE_I32 || lab->dtype == MGE_I64) &&
             lab->ndim == x->ndim - 1;
    if (ok) {
        int64_t np = mge_tensor_numel(lab);
        size_t want = sizeof(double) * (size_t)(np > 0 ? np : 1), ref = cpu_ref_ws(n, in, out, threads);
        return want > ref ? want : ref;
    }
    return cpu_ref_ws(n, in, out, threads);
}

static mge_status cpu_ce2(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                          mge_error *err)
{
    const mge_tensor *x = in[0], *lab = in[1];
    int64_t np, cnt;
    if (!ce2_fits(x, lab, &np) || out[0]->dtype != MGE_F32 || mge_tensor_numel(out[0]) != 1 ||
        ctx->ws_size < sizeof(double) * (size_t)np)
        return cpu_fallback(ctx, n, in, out, err);
    ce2_job j = {0};
    ce2_setup(n, x, lab, &j);
    mge_status st = ce2_labels(ctx, n, lab, j.C, j.ignore, &cnt, err);
    if (st)
        return st;
    j.loss = ctx->ws;
    cpu_parallel(ctx, np, j.C >= CPU_GRAIN / 8 ? 1 : CPU_GRAIN / 8 / j.C, ce2_fwd_task, &j);
    double total = 0;
    for (int64_t i = 0; i < np; i++)
        total += j.loss[i];
    ((float *)out[0]->data)[0] = (float)(cnt ? total / (double)cnt : NAN);
    return MGE_OK;
}

static mge_status cpu_ce2_grad(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                               mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *dy = in[0], *x = in[1], *lab = in[2];
    int64_t np, cnt;
    if (!ce2_fits(x, lab, &np) || dy->dtype != MGE_F32 || mge_tensor_numel(dy) != 1 || !dy->data ||
        out[0]->dtype != MGE_F32 || !mge_tensor_same_shape(out[0], x) || !out[0]->data)
        return cpu_fallback(ctx, n, in, out, err);
    ce2_job j = {0};
    ce2_setup(n, x, lab, &j);
    mge_status st = ce2_labels(ctx, n, lab, j.C, j.ignore, &cnt, err);
    if (st)
        return st;
    j.y = out[0]->data;
    j.scale = cnt ? (double)((const float *)dy->data)[0] / (double)cnt : 0;
    cpu_parallel(ctx, np, j.C >= CPU_GRAIN / 8 ? 1 : CPU_GRAIN / 8 / j.C, ce2_grad_task, &j);
    return MGE_OK;
}

void mge_cpu_register_loss(mge_backend *b)
{
    b->k[MGE_OP_CROSS_ENTROPY][MGE_F32] = (mge_kernel){.run = cpu_ce2, .ws = ce2_ws};
    b->k[MGE_OP_CROSS_ENTROPY_GRAD][MGE_F32] = (mge_kernel){.run = cpu_ce2_grad, .ws = cpu_ref_ws};
}
