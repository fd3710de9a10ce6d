/* ref_convt.c — conv_transpose2d and its gradients as direct loops (NCHW,
 * weight [C, out/groups, kh, kw]), double accumulation; and conv1d with
 * its gradients on the ref conv2d kernels at height 1 (ref_convt.h).
 * f32, f16 and bf16.
 *
 * conv_transpose2d scatters input (ih, iw) through tap (kh, kw) to output
 * (ih*s - p + kh*d, iw*s - p + kw*d); the loops below gather instead, so
 * each output element is one sum in a fixed order. */
#include "ref.h"

#include "ref_convt.h"

#define MAX_ATTR (1 << 30)

/* ---------------------------------------------------------------- conv1d as conv2d */

typedef struct lifted {
    mge_node n;
    mge_attr at[16];
    mge_tensor t[4], o;
    mge_tensor *in[4], *out[1];
} lifted;

static void view4(const mge_tensor *t, mge_tensor *v)
{
    *v = *t;
    if (t->ndim == 3) {
        v->ndim = 4;
        v->dims[3] = t->dims[2];
        v->dims[2] = 1;
    }
}

/* 0 when n has more attributes than fit (no node of ours does). */
static int lift(const mge_node *n, int op2d, mge_tensor *const *in, mge_tensor *const *out, lifted *l)
{
    if (n->nattr > 16 || n->nin > 4)
        return 0;
    l->n = *n;
    l->n.op = op2d;
    l->n.attrs = l->at;
    for (int i = 0; i < n->nattr; i++) {
        mge_attr a = n->attrs[i];
        if ((a.key == MGE_KEY_kernel || a.key == MGE_KEY_stride || a.key == MGE_KEY_pad ||
             a.key == MGE_KEY_dilation) &&
            a.n >= 1) {
            a.i[1] = a.i[0];
            a.i[0] = a.key == MGE_KEY_pad ? 0 : 1;
            a.n = 2;
        }
        l->at[i] = a;
    }
    for (int i = 0; i < n->nin; i++) {
        view4(in[i], &l->t[i]);
        l->in[i] = &l->t[i];
    }
    view4(out[0], &l->o);
    l->out[0] = &l->o;
    return 1;
}

mge_status mge_conv1d_as_2d(const mge_kernel *k, int op2d, const mge_kctx *ctx, const mge_node *n,
                            mge_tensor *const *in, mge_tensor *const *out, mge_error *err)
{
    const char *name = ref_opname(ctx, n);
    for (int i = 0; i < n->nin && i < 3; i++)
        if (in[i]->ndim != (i == 2 && n->op == MGE_OP_CONV1D ? 1 : 3))
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: input %d has rank %d: expected %d", name, i,
                                 in[i]->ndim, i == 2 && n->op == MGE_OP_CONV1D ? 1 : 3);
    if (out[0]->ndim != 3)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: output has rank %d: expected 3", name, out[0]->ndim);
    lifted l;
    if (!k->run || !lift(n, op2d, in, out, &l))
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: no kernel for %s", name, mge_dtype_name(in[0]->dtype));
    return k->run(ctx, &l.n, l.in, l.out, err);
}

size_t mge_conv1d_as_2d_ws(const mge_kernel *k, int op2d, const mge_node *n, mge_tensor *const *in,
                           mge_tensor *const *out, int threads)
{
    lifted l;
    if (!k->ws || out[0]->ndim != 3 || !lift(n, op2d, in, out, &l))
        return 0;
    for (int i = 0; i < n->nin && i < 2; i++)
        if (in[i]->ndim != 3)
            return 0;
    return k->ws(&l.n, l.in, l.out, threads);
}

static int op2d_of(int op)
{
    return op == MGE_OP_CONV1D ? MGE_OP_CONV2D
           : op == MGE_OP_CONV1D_GRAD_INPUT ? MGE_OP_CONV2D_GRAD_INPUT
                                            : MGE_OP_CONV2D_GRAD_WEIGHT;
}

static mge_status conv1d_ref(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                             mge_error *err)
{
    int op2d = op2d_of(n->op);
    return mge_conv1d_as_2d(&mge_backend_ref()->k[op2d][in[0]->dtype], op2d, ctx, n, in, out, err);
}

static size_t conv1d_ref_ws(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, int threads)
{
    int op2d = op2d_of(n->op);
    return mge_conv1d_as_2d_ws(&mge_backend_ref()->k[op2d][in[0]->dtype], op2d, n, in, out, threads);
}

/* ---------------------------------------------------------------- conv_transpose2d */

mge_status mge_ref_convt_geom(const mge_kctx *ctx, const mge_node *n, const mge_tensor *x, const mge_tensor *w,
                              ref_convt_geom *q, mge_error *err)
{
    const char *name = ref_opname(ctx, n);
    for (int i = 0; i < 2; i++) {
        q->s[i] = mge_node_ints(n, MGE_KEY_stride, i, 1);
        q->p[i] = mge_node_ints(n, MGE_KEY_pad, i, 0);
        q->d[i] = mge_node_ints(n, MGE_KEY_dilation, i, 1);
        q->op[i] = mge_node_ints(n, MGE_KEY_output_padding, i, 0);
        if (q->s[i] < 1 || q->p[i] < 0 || q->d[i] < 1 || q->op[i] < 0 || q->s[i] > MAX_ATTR ||
            q->p[i] > MAX_ATTR || q->d[i] > MAX_ATTR || q->op[i] > MAX_ATTR)
            return mge_error_set(err, MGE_ERR_INVALID, "%s: invalid stride, pad, dilation or output_padding", name);
    }
    q->G = mge_node_int(n, MGE_KEY_groups, 1);
    if (x->ndim != 4 || w->ndim != 4)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x and weight must be rank 4 (got %d and %d)", name, x->ndim,
                             w->ndim);
    q->N = x->dims[0], q->C = x->dims[1], q->H = x->dims[2], q->W = x->dims[3];
    q->Og = w->dims[1], q->kh = w->dims[2], q->kw = w->dims[3];
    if (q->G < 1 || q->C % q->G || w->dims[0] != q->C || q->kh < 1 || q->kw < 1 || q->kh > MAX_ATTR ||
        q->kw > MAX_ATTR || q->Og > MAX_ATTR)
        return mge_error_set(err, MGE_ERR_SHAPE,
                             "%s: x has %lld channels, weight is [%lld,%lld,%lld,%lld]: does not fit groups=%lld", name,
                             (long long)q->C, (long long)w->dims[0], (long long)w->dims[1], (long long)w->dims[2],
                             (long long)w->dims[3], (long long)q->G);
    q->Cg = q->C / q->G, q->O = q->G * q->Og;
    if ((double)q->H * (double)q->s[0] > 0x1p50 || (double)q->W * (double)q->s[1] > 0x1p50)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: output too large", name);
    q->OH = (q->H - 1) * q->s[0] - 2 * q->p[0] + q->d[0] * (q->kh - 1) + q->op[0] + 1;
    q->OW = (q->W - 1) * q->s[1] - 2 * q->p[1] + q->d[1] * (q->kw - 1) + q->op[1] + 1;
    if (q->H < 1 || q->W < 1 || q->OH < 1 || q->OW < 1)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: empty input or output (%lldx%lld -> %lldx%lld)", name,
                             (long long)q->H, (long long)q->W, (long long)q->OH, (long long)q->OW);
    return MGE_OK;
}

/* The input index (ih) output row oh reads through tap k, or -1. */
static inline int64_t src_of(int64_t o, int64_t k, int64_t s, int64_t p, int64_t d, int64_t H)
{
    int64_t t = o + p - k * d;
    if (t < 0 || t % s)
        return -1;
    t /= s;
    return t < H ? t : -1;
}

static inline __attribute__((always_inline)) void fwd_loops(mge_dtype dt, const ref_convt_geom *q, const void *xp,
                                                            const void *wp, const void *bp, void *yp)
{
    for (int64_t ni = 0; ni < q->N; ni++)
        for (int64_t o = 0; o < q->O; o++) {
            int64_t g = o / q->Og, oo = o % q->Og;
            for (int64_t oh = 0; oh < q->OH; oh++)
                for (int64_t ow = 0; ow < q->OW; ow++) {
                    double acc = bp ? ref_ld(dt, bp, o) : 0.0;
                    for (int64_t c = 0; c < q->Cg; c++) {
                        int64_t ci = g * q->Cg + c;
                        for (int64_t i = 0; i < q->kh; i++) {
                            int64_t ih = src_of(oh, i, q->s[0], q->p[0], q->d[0], q->H);
                            if (ih < 0)
                                continue;
                            for (int64_t j = 0; j < q->kw; j++) {
                                int64_t iw = src_of(ow, j, q->s[1], q->p[1], q->d[1], q->W);
                                if (iw < 0)
                                    continue;
                                acc += ref_ld(dt, xp, ((ni * q->C + ci) * q->H + ih) * q->W + iw) *
                                       ref_ld(dt, wp, ((ci * q->Og + oo) * q->kh + i) * q->kw + j);
                            }
                        }
                    }
                    ref_st(dt, yp, ((ni * q->O + o) * q->OH + oh) * q->OW + ow, acc);
                }
        }
}

static mge_status convt_fwd(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                            mge_error *err)
{
    const mge_tensor *x = in[0], *w = in[1], *b = n->nin >= 3 ? in[2] : NULL;
    ref_convt_geom q;
    mge_status st = mge_ref_convt_geom(ctx, n, x, w, &q, err);
    if (st)
        return st;
    mge_dtype dt = x->dtype;
    int64_t ey[4] = {q.N, q.O, q.OH, q.OW}, eb[1] = {q.O};
    if ((st = ref_check(ctx, n, "x", x, dt, 4, x->dims, err)) ||
        (st = ref_check(ctx, n, "weight", w, dt, 4, w->dims, err)) ||
        (b && (st = ref_check(ctx, n, "bias", b, dt, 1, eb, err))) ||
        (st = ref_check(ctx, n, "output", out[0], dt, 4, ey, err)))
        return st;
    if (dt == MGE_F32)
        fwd_loops(MGE_F32, &q, x->data, w->data, b ? b->data : NULL, out[0]->data);
    else
        fwd_loops(dt, &q, x->data, w->data, b ? b->data : NULL, out[0]->data);
    return MGE_OK;
}

/* conv_transpose2d_grad_input(dy, weight, x): dx[n,ci,ih,iw] = the sum over
 * the group's output channels and taps of dy at the element it wrote times
 * the weight; conv_transpose2d_grad_weight(dy, x, weight): dw[ci,oo,i,j] =
 * the sum over images and input pixels of x times dy where it wrote. */
static mge_status convt_grad(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                             mge_error *err)
{
    int gi = n->op == MGE_OP_CONV_TRANSPOSE2D_GRAD_INPUT;
    const mge_tensor *dy = in[0], *w = gi ? in[1] : in[2], *x = gi ? in[2] : in[1];
    ref_convt_geom q;
    mge_status st = mge_ref_convt_geom(ctx, n, x, w, &q, err);
    if (st)
        return st;
    mge_dtype dt = dy->dtype;
    int64_t ey[4] = {q.N, q.O, q.OH, q.OW};
    if ((st = ref_check(ctx, n, "dy", dy, dt, 4, ey, err)) ||
        (st = ref_check(ctx, n, gi ? "weight" : "x", gi ? w : x, dt, 4, gi ? w->dims : x->dims, err)) ||
        (st = ref_check(ctx, n, "output", out[0], dt, 4, gi ? x->dims : w->dims, err)))
        return st;
    const void *dyp = dy->data, *op = gi ? w->data : x->data;
    void *rp = out[0]->data;
    if (gi) {
        for (int64_t ni = 0; ni < q.N; ni++)
            for (int64_t ci = 0; ci < q.C; ci++) {
                int64_t g = ci / q.Cg;
                for (int64_t ih = 0; ih < q.H; ih++)
                    for (int64_t iw = 0; iw < q.W; iw++) {
                        double acc = 0;
                        for (int64_t oo = 0; oo < q.Og; oo++)
                            for (int64_t i = 0; i < q.kh; i++) {
                                int64_t oh = ih * q.s[0] - q.p[0] + i * q.d[0];
                                if (oh < 0 || oh >= q.OH)
                                    continue;
                                for (int64_t j = 0; j < q.kw; j++) {
                                    int64_t ow = iw * q.s[1] - q.p[1] + j * q.d[1];
                                    if (ow < 0 || ow >= q.OW)
                                        continue;
                                    acc += ref_ld(dt, dyp, ((ni * q.O + g * q.Og + oo) * q.OH + oh) * q.OW + ow) *
                                           ref_ld(dt, op, ((ci * q.Og + oo) * q.kh + i) * q.kw + j);
                                }
                            }
                        ref_st(dt, rp, ((ni * q.C + ci) * q.H + ih) * q.W + iw, acc);
                    }
            }
        return MGE_OK;
    }
    for (int64_t ci = 0; ci < q.C; ci++) {
        int64_t g = ci / q.Cg;
        for (int64_t oo = 0; oo < q.Og; oo++)
            for (int64_t i = 0; i < q.kh; i++)
                for (int64_t j = 0; j < q.kw; j++) {
                    double acc = 0;
                    for (int64_t ni = 0; ni < q.N; ni++)
                        for (int64_t ih = 0; ih < q.H; ih++) {
                            int64_t oh = ih * q.s[0] - q.p[0] + i * q.d[0];
                            if (oh < 0 || oh >= q.OH)
                                continue;
                            for (int64_t iw = 0; iw < q.W; iw++) {
                                int64_t ow = iw * q.s[1] - q.p[1] + j * q.d[1];
                                if (ow < 0 || ow >= q.OW)
                                    continue;
                                acc += ref_ld(dt, op, ((ni * q.C + ci) * q.H + ih) * q.W + iw) *
                                       ref_ld(dt, dyp, ((ni * q.O + g * q.Og + oo) * q.OH + oh) * q.OW + ow);
                            }
                        }
                    ref_st(dt, rp, ((ci * q.Og + oo) * q.kh + i) * q.kw + j, acc);
                }
    }
    return MGE_OK;
}

void mge_ref_register_convt(mge_backend *b)
{
    mge_ref_register_conv3d(b);
    REF_EACH_FLOAT(dt) {
        b->k[MGE_OP_CONV_TRANSPOSE2D][dt].run = convt_fwd;
        b->k[MGE_OP_CONV_TRANSPOSE2D_GRAD_INPUT][dt].run = convt_grad;
        b->k[MGE_OP_CONV_TRANSPOSE2D_GRAD_WEIGHT][dt].run = convt_grad;
        b->k[MGE_OP_CONV1D][dt] = (mge_kernel){.run = conv1d_ref, .ws = conv1d_ref_ws};
        b->k[MGE_OP_CONV1D_GRAD_INPUT][dt] = (mge_kernel){.run = conv1d_ref, .ws = conv1d_ref_ws};
        b->k[MGE_OP_CONV1D_GRAD_WEIGHT][dt] = (mge_kernel){.run = conv1d_ref, .ws = conv1d_ref_ws};
    }
}
