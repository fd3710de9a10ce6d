/* cpu_grad_elem.c — fast f32 kernels of the elementwise and loss gradient
 * ops (cross_entropy's forward and gradient are in cpu_loss.c):
 *   - the activation grads and dropout_grad: one vectorized loop (cpu.h's
 *     CPU_MULTI: AVX2+FMA or baseline; gelu_grad and silu_grad also AVX-512,
 *     in blocks of 16), split over the pool by elements;
 *     each element is independent, so any split gives the same bits;
 *   - sum_to where like varies over one contiguous block of x's dims (bias
 *     [N,C] -> [C], conv bias [N,C,H,W] -> [C,1,1], a scalar, ...): partial
 *     sums over blocks whose bounds depend on the shapes only, combined in a
 *     fixed order, so the result does not depend on the thread count;
 *   - mse_grad.
 * Other shapes and dtypes fall back to the ref kernels. */
#include "cpu.h"
#include "cpu_act.h"

#include <math.h>
#include <string.h>

/* ---------------------------------------------------------------- activations */

CPU_MULTI(ag_loop,
          (int op, float alpha, float scale, const float *dy, const float *t, float *o, int64_t n),
          (op, alpha, scale, dy, t, o, n), {
              switch (op) {
              case MGE_OP_RELU_GRAD:
                  for (int64_t i = 0; i < n; i++)
                      o[i] = t[i] > 0.0f ? dy[i] : 0.0f;
                  break;
              case MGE_OP_RELU6_GRAD:
                  for (int64_t i = 0; i < n; i++) {
                      float v = t[i];
                      o[i] = v > 0.0f && v < 6.0f ? dy[i] : 0.0f;
                  }
                  break;
              case MGE_OP_LEAKY_RELU_GRAD:
                  for (int64_t i = 0; i < n; i++) {
                      float g = dy[i];
                      o[i] = t[i] > 0.0f ? g : g * alpha;
                  }
                  break;
              case MGE_OP_SIGMOID_GRAD:
                  for (int64_t i = 0; i < n; i++) {
                      float v = t[i];
                      o[i] = dy[i] * (v * (1.0f - v));
                  }
                  break;
              case MGE_OP_TANH_GRAD:
                  for (int64_t i = 0; i < n; i++) {
                      float v = t[i];
                      o[i] = dy[i] * (1.0f - v * v);
                  }
                  break;
              case MGE_OP_HSWISH_GRAD:
                  for (int64_t i = 0; i < n; i++) {
                      float v = t[i], g = dy[i];
                      o[i] = v < -3.0f ? 0.0f : v <= 3.0f ? g * (v * (1.0f / 3.0f) + 0.5f) : g;
                  }
                  break;
              case MGE_OP_HSIGMOID_GRAD:
                  for (int64_t i = 0; i < n; i++) {
                      float v = t[i];
                      o[i] = v > -3.0f && v < 3.0f ? dy[i] * (1.0f / 6.0f) : 0.0f;
                  }
                  break;
              case MGE_OP_ABS_GRAD:
                  for (int64_t i = 0; i < n; i++) {
                      float v = t[i], g = dy[i];
                      o[i] = v > 0.0f ? g : v < 0.0f ? -g : 0.0f;
                  }
                  break;
              case MGE_OP_DROPOUT_GRAD:   /* training: kept where y != 0 */
                  for (int64_t i = 0; i < n; i++)
                      o[i] = t[i] != 0.0f ? dy[i] * scale : 0.0f;
                  break;
              default:
                  break;
              }
          })

/* gelu_grad and silu_grad (exp and erf: worth 16 lanes): on AVX-512
 * cpu_act.h's blocks of 16 (CPU_ACT_BLOCKS2), elsewhere plain loops. */
#define AG_GELU(v) (0.5f * (1.0f + cpu_erff((v) * 0.70710678118654752f)) + (v) * (cpu_expf(-0.5f * (v) * (v)) * 0.39894228040143268f))
#define AG_SILU(v) ((1.0f / (1.0f + cpu_expf(-(v)))) * (1.0f + (v) * (1.0f - 1.0f / (1.0f + cpu_expf(-(v))))))
#if CPU_SPLIT_AVX512
static CPU_AVX512 void ag_trans_avx512(int op, const float *dy, const float *x, float *o, int64_t n)
{
    if (op == MGE_OP_GELU_GRAD)
        CPU_ACT_BLOCKS2(x, dy, o, g * AG_GELU(t))
    else
        CPU_ACT_BLOCKS2(x, dy, o, g * AG_SILU(t))
}
#endif
CPU_MULTI(ag_trans_v, (int op, const float *dy, const float *x, float *o, int64_t n), (op, dy, x, o, n), {
    if (op == MGE_OP_GELU_GRAD)
        for (int64_t i = 0; i < n; i++)
            o[i] = dy[i] * AG_GELU(x[i]);
    else
        for (int64_t i = 0; i < n; i++)
            o[i] = dy[i] * AG_SILU(x[i]);
})
CPU_SPLIT3(ag_trans, (int op, const float *dy, const float *x, float *o, int64_t n), (op, dy, x, o, n))

typedef struct ag_job {
    int op;
    float alpha, scale;
    const float *dy, *t;
    float *o;
} ag_job;

static void ag_task(void *a, int64_t b, int64_t e, int thread)
{
    const ag_job *j = a;
    if (j->op == MGE_OP_GELU_GRAD || j->op == MGE_OP_SILU_GRAD)
        ag_trans(j->op, j->dy + b, j->t + b, j->o + b, e - b);
    else
        ag_loop(j->op, j->alpha, j->scale, j->dy + b, j->t + b, j->o + b, e - b);
}

static mge_status cpu_act_grad(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                               mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *dy = in[0], *t = in[1], *o = out[0];
    int64_t cnt = mge_tensor_numel(dy);
    /* the second input as the output's buffer would be overwritten early */
    if (t->dtype != MGE_F32 || o->dtype != MGE_F32 || mge_tensor_numel(t) != cnt || mge_tensor_numel(o) != cnt ||
        (o->data == t->data && t->data != dy->data && cnt > 0))
        return cpu_fallback(ctx, n, in, out, err);
    ag_job j = {n->op, (float)mge_node_float(n, MGE_KEY_alpha, 0.01), 1.0f, dy->data, t->data, o->data};
    if (n->op == MGE_OP_DROPOUT_GRAD) {
        double p = mge_node_float(n, MGE_KEY_p, 0.5);
        if (!(p >= 0 && p <= 1))
            return cpu_fallback(ctx, n, in, out, err);   /* the ref kernel says why */
        if (!ctx->training || p == 0) {
            if (o->data != dy->data && cnt > 0)
                memmove(o->data, dy->data, sizeof(float) * (size_t)cnt);
            return MGE_OK;
        }
        j.scale = p < 1 ? (float)(1.0 / (1.0 - p)) : 0.0f;
    }
    int cheap = n->op != MGE_OP_SILU_GRAD && n->op != MGE_OP_GELU_GRAD;
    cpu_parallel(ctx, cnt, cheap ? CPU_GRAIN : CPU_GRAIN / 8, ag_task, &j);
    return MGE_OK;
}

/* ---------------------------------------------------------------- sum_to */

/* like (padded to x's rank) as x viewed as outer x mid x inner, like
 * varying along mid only (mid == 1: like is one element). 0 when like's
 * non-1 dims are not one block of x's dims. */
static int st_split(const mge_tensor *x, const mge_tensor *like, int64_t *outer, int64_t *mid, int64_t *inner)
{
    int nd = x->ndim, off = x->ndim - like->ndim;
    if (off < 0)
        return 0;
    int lo = -1, hi = -1;
    for (int i = 0; i < nd; i++) {
        int64_t d = i < off ? 1 : like->dims[i - off];
        if (d == 1)
            continue;
        if (d != x->dims[i])
            return 0;
        if (lo < 0)
            lo = i;
        else
            for (int k = hi + 1; k < i; k++)   /* a gap of 1s inside: fine only where x is 1 too */
                if (x->dims[k] != 1)
                    return 0;
        hi = i;
    }
    int64_t o = 1, m = 1, in = 1;
    for (int i = 0; i < nd; i++) {
        if (lo >= 0 && i >= lo && i <= hi)
            m *= x->dims[i];
        else if (lo >= 0 && i > hi)
            in *= x->dims[i];
        else
            o *= x->dims[i];
    }
    if (lo < 0) {   /* like is one element: one row of everything */
        in = o;
        o = 1;
    }
    *outer = o, *mid = m, *inner = in;
    return 1;
}

/* Blocking, from the shapes only. inner == 1: row blocks of rb rows times
 * column blocks of ST_COLS; partial[rb][m]. inner > 1: each of the outer x
 * mid rows cut into nseg segments of ST_SEG; partial[row][seg]. */
#define ST_SEG 16384
#define ST_COLS 4096

typedef struct st_plan {
    int fits;
    int64_t outer, mid, inner;
    int64_t rb, nrb, ncb;    /* inner == 1 */
    int64_t nseg;            /* inner > 1 */
    size_t ws;
} st_plan;

static st_plan st_make(const mge_tensor *x, const mge_tensor *like)
{
    st_plan p;
    memset(&p, 0, sizeof p);
    if (x->dtype != MGE_F32 || like->dtype != MGE_F32 || !st_split(x, like, &p.outer, &p.mid, &p.inner))
        return p;
    p.fits = 1;
    if (p.inner == 1) {
        p.rb = p.mid >= CPU_GRAIN ? 1 : CPU_GRAIN / p.mid;
        p.nrb = (p.outer + p.rb - 1) / p.rb;
        p.ncb = (p.mid + ST_COLS - 1) / ST_COLS;
        p.ws = sizeof(double) * (size_t)(p.nrb * p.mid);
    } else {
        p.nseg = (p.inner + ST_SEG - 1) / ST_SEG;
        p.ws = sizeof(double) * (size_t)(p.outer * p.mid * p.nseg);
    }
    return p;
}

/* Sum of x[0..n) in double: eight lanes, then the lanes and the tail in order. */
CPU_MULTI(st_rowsum, (const float *x, int64_t n, double *res), (x, n, res), {
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            acc[k] += (double)x[i + k];
    double s = 0;
    for (int k = 0; k < 8; k++)
        s += acc[k];
    for (; i < n; i++)
        s += (double)x[i];
    *res = s;
})

/* acc[0..n) += x[0..n) */
CPU_MULTI(st_addrow, (double *acc, const float *x, int64_t n), (acc, x, n), {
    for (int64_t i = 0; i < n; i++)
        acc[i] += (double)x[i];
})

typedef struct st_job {
    const st_plan *p;
    const float *x;
    float *y;
    double *part;
} st_job;

/* inner == 1: task = (row block, column block) */
static void st_cols_task(void *a, int64_t t0, int64_t t1, int thread)
{
    const st_job *j = a;
    const st_plan *p = j->p;
    for (int64_t t = t0; t < t1; t++) {
        int64_t rb = t / p->ncb, cb = t % p->ncb;
        int64_t c0 = cb * ST_COLS, c1 = c0 + ST_COLS < p->mid ? c0 + ST_COLS : p->mid;
        int64_t r0 = rb * p->rb, r1 = r0 + p->rb < p->outer ? r0 + p->rb : p->outer;
        double *acc = j->part + rb * p->mid + c0;
        memset(acc, 0, sizeof(double) * (size_t)(c1 - c0));
        for (int64_t r = r0; r < r1; r++)
            st_addrow(acc, j->x + r * p->mid + c0, c1 - c0);
    }
}

/* inner > 1: unit = (row, segment) */
static void st_seg_task(void *a, int64_t u0, int64_t u1, int thread)
{
    const st_job *j = a;
    const st_plan *p = j->p;
    for (int64_t u = u0; u < u1; u++) {
        int64_t row = u / p->nseg, sg = u % p->nseg;
        int64_t b = sg * ST_SEG, e = b + ST_SEG < p->inner ? b + ST_SEG : p->inner;
        st_rowsum(j->x + row * p->inner + b, e - b, &j->part[u]);
    }
}

/* y[m] from the partials, in a fixed order */
static void st_combine_task(void *a, int64_t m0, int64_t m1, int thread)
{
    const st_job *j = a;
    const st_plan *p = j->p;
    for (int64_t m = m0; m < m1; m++) {
        double s = 0;
        if (p->inner == 1)
            for (int64_t rb = 0; rb < p->nrb; rb++)
                s += j->part[rb * p->mid + m];
        else
            for (int64_t o = 0; o < p->outer; o++)
                for (int64_t sg = 0; sg < p->nseg; sg++)
                    s += j->part[(o * p->mid + m) * p->nseg + sg];
        j->y[m] = (float)s;
    }
}

static size_t cpu_sum_to_ws(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, int threads)
{
    st_plan p = st_make(in[0], in[1]);
    return p.fits ? p.ws : cpu_ref_ws(n, in, out, threads);
}

static mge_status cpu_sum_to(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                             mge_error *err)
{
    st_plan p = st_make(in[0], in[1]);
    if (!p.fits || out[0]->dtype != MGE_F32 || mge_tensor_numel(out[0]) != p.mid || ctx->ws_size < p.ws)
        return cpu_fallback(ctx, n, in, out, err);
    if (p.mid == 0)
        return MGE_OK;
    st_job j = {&p, in[0]->data, out[0]->data, ctx->ws};
    if (p.outer * p.inner == 0) {
        memset(j.y, 0, sizeof(float) * (size_t)p.mid);
        return MGE_OK;
    }
    if (p.inner == 1) {
        int64_t per = p.rb * (p.mid < ST_COLS ? p.mid : ST_COLS);   /* elements per task */
        cpu_parallel(ctx, p.nrb * p.ncb, per >= CPU_GRAIN ? 1 : CPU_GRAIN / per, st_cols_task, &j);
    } else {
        int64_t per = p.inner < ST_SEG ? p.inner : ST_SEG;
        cpu_parallel(ctx, p.outer * p.mid * p.nseg, per >= CPU_GRAIN ? 1 : CPU_GRAIN / per, st_seg_task, &j);
    }
    int64_t work = p.inner == 1 ? p.nrb : p.outer * p.nseg;
    cpu_parallel(ctx, p.mid, work >= CPU_GRAIN ? 1 : CPU_GRAIN / work, st_combine_task, &j);
    return MGE_OK;
}

/* ---------------------------------------------------------------- mse_grad */

CPU_MULTI(mse_loop, (const float *a, const float *b, float s, float *y, int64_t n), (a, b, s, y, n), {
    for (int64_t i = 0; i < n; i++)
        y[i] = (a[i] - b[i]) * s;
})

typedef struct mse_job {
    const float *a, *b;
    float s, *y;
} mse_job;

static void mse_task(void *p, int64_t b, int64_t e, int thread)
{
    const mse_job *j = p;
    mse_loop(j->a + b, j->b + b, j->s, j->y + b, e - b);
}

static mge_status cpu_mse_grad(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                               mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *dy = in[0], *a = in[1], *b = in[2];
    if (dy->dtype != MGE_F32 || mge_tensor_numel(dy) != 1 || a->dtype != MGE_F32 || b->dtype != MGE_F32 ||
        out[0]->dtype != MGE_F32 || !mge_tensor_same_shape(a, b) || !mge_tensor_same_shape(a, out[0]))
        return cpu_fallback(ctx, n, in, out, err);
    int64_t cnt = mge_tensor_numel(a);
    mse_job j = {a->data, b->data, cnt ? (float)(2.0 * ((const float *)dy->data)[0] / (double)cnt) : 0.0f,
                 out[0]->data};
    cpu_parallel(ctx, cnt, CPU_GRAIN, mse_task, &j);
    return MGE_OK;
}

void mge_cpu_register_grad_elem(mge_backend *b)
{
    cpu_isa_avx2();   /* decided once, before any kernel runs on pool threads */
    static const int acts[] = {MGE_OP_RELU_GRAD,     MGE_OP_RELU6_GRAD, MGE_OP_LEAKY_RELU_GRAD, MGE_OP_SIGMOID_GRAD,
                               MGE_OP_TANH_GRAD,     MGE_OP_GELU_GRAD,  MGE_OP_SILU_GRAD,       MGE_OP_HSWISH_GRAD,
                               MGE_OP_HSIGMOID_GRAD, MGE_OP_ABS_GRAD,   MGE_OP_DROPOUT_GRAD};
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++)
        b->k[acts[i]][MGE_F32] = (mge_kernel){.run = cpu_act_grad, .ws = cpu_ref_ws};
    b->k[MGE_OP_SUM_TO][MGE_F32] = (mge_kernel){.run = cpu_sum_to, .ws = cpu_sum_to_ws};
    b->k[MGE_OP_MSE_GRAD][MGE_F32] = (mge_kernel){.run = cpu_mse_grad, .ws = cpu_ref_ws};
}
