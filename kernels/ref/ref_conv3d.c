/* ref_conv3d.c — conv3d and its gradients as direct loops (NCDHW, weight
 * [O, C/groups, kd, kh, kw]), with stride, pad, dilation and groups per
 * axis; double accumulation, one sum per result element in a fixed order.
 * f32, f16 and bf16. */
#include "ref.h"

#include "ref_convt.h"

#define MAX_ATTR (1 << 30)

mge_status mge_ref_conv3d_geom(const mge_kctx *ctx, const mge_node *n, const mge_tensor *x, const mge_tensor *w,
                               ref_conv3d_geom *q, mge_error *err)
{
    const char *name = ref_opname(ctx, n);
    for (int i = 0; i < 3; i++) {
        q->s[i] = mge_node_ints(n, MGE_KEY_stride, i, 1);
        q->p[i] = mge_node_ints(n, MGE_KEY_pad, i, 0);
        q->d[i] = mge_node_ints(n, MGE_KEY_dilation, i, 1);
        if (q->s[i] < 1 || q->p[i] < 0 || q->d[i] < 1 || q->s[i] > MAX_ATTR || q->p[i] > MAX_ATTR || q->d[i] > MAX_ATTR)
            return mge_error_set(err, MGE_ERR_INVALID, "%s: invalid stride, pad or dilation", name);
    }
    q->G = mge_node_int(n, MGE_KEY_groups, 1);
    if (x->ndim != 5 || w->ndim != 5)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x and weight must be rank 5 (got %d and %d)", name, x->ndim,
                             w->ndim);
    q->N = x->dims[0], q->C = x->dims[1], q->O = w->dims[0];
    if (q->G < 1 || q->C % q->G || q->O % q->G || w->dims[1] != q->C / q->G)
        return mge_error_set(err, MGE_ERR_SHAPE,
                             "%s: x has %lld channels, weight is [%lld,%lld,...]: does not fit groups=%lld", name,
                             (long long)q->C, (long long)q->O, (long long)w->dims[1], (long long)q->G);
    q->Cg = q->C / q->G, q->Og = q->O / q->G;
    for (int i = 0; i < 3; i++) {
        q->in[i] = x->dims[2 + i], q->k[i] = w->dims[2 + i];
        if (q->k[i] < 1 || q->k[i] > MAX_ATTR)
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: weight kernel dim %lld", name, (long long)q->k[i]);
        q->out[i] = mge_conv_out_dim(q->in[i], q->k[i], q->s[i], q->p[i], q->d[i], 0);
        if (q->out[i] < 1)
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: empty output", name);
    }
    return MGE_OK;
}

/* The input position output o reads through tap t on axis a, or -1 (padding). */
static inline int64_t src(const ref_conv3d_geom *q, int a, int64_t o, int64_t t)
{
    int64_t i = o * q->s[a] - q->p[a] + t * q->d[a];
    return i >= 0 && i < q->in[a] ? i : -1;
}

#define XI(ni, c, a, b, e) ((((ni) * q->C + (c)) * q->in[0] + (a)) * q->in[1] + (b)) * q->in[2] + (e)
#define YI(ni, o, a, b, e) ((((ni) * q->O + (o)) * q->out[0] + (a)) * q->out[1] + (b)) * q->out[2] + (e)
#define WI(o, c, a, b, e) ((((o) * q->Cg + (c)) * q->k[0] + (a)) * q->k[1] + (b)) * q->k[2] + (e)

static void fwd(mge_dtype dt, const ref_conv3d_geom *q, const void *xp, const void *wp, const void *bp, void *yp)
{
    for (int64_t ni = 0; ni < q->N; ni++)
        for (int64_t o = 0; o < q->O; o++) {
            int64_t g = o / q->Og;
            for (int64_t od = 0; od < q->out[0]; od++)
                for (int64_t oh = 0; oh < q->out[1]; oh++)
                    for (int64_t ow = 0; ow < q->out[2]; ow++) {
                        double acc = bp ? ref_ld(dt, bp, o) : 0.0;
                        for (int64_t c = 0; c < q->Cg; c++)
                            for (int64_t a = 0; a < q->k[0]; a++) {
                                int64_t id = src(q, 0, od, a);
                                for (int64_t b = 0; id >= 0 && b < q->k[1]; b++) {
                                    int64_t ih = src(q, 1, oh, b);
                                    for (int64_t e = 0; ih >= 0 && e < q->k[2]; e++) {
                                        int64_t iw = src(q, 2, ow, e);
                                        if (iw >= 0)
                                            acc += ref_ld(dt, xp, XI(ni, g * q->Cg + c, id, ih, iw)) *
                                                   ref_ld(dt, wp, WI(o, c, a, b, e));
                                    }
                                }
                            }
                        ref_st(dt, yp, YI(ni, o, od, oh, ow), acc);
                    }
        }
}

/* dx[n,ci,id,ih,iw]: the sum over the group's outputs and taps that read it */
static void grad_input(mge_dtype dt, const ref_conv3d_geom *q, const void *dyp, const void *wp, void *rp)
{
    for (int64_t ni = 0; ni < q->N; ni++)
        for (int64_t ci = 0; ci < q->C; ci++) {
            int64_t g = ci / q->Cg, c = ci % q->Cg;
            for (int64_t id = 0; id < q->in[0]; id++)
                for (int64_t ih = 0; ih < q->in[1]; ih++)
                    for (int64_t iw = 0; iw < q->in[2]; iw++) {
                        double acc = 0;
                        int64_t ii[3] = {id, ih, iw}, oo[3];
                        for (int64_t o = g * q->Og; o < (g + 1) * q->Og; o++)
                            for (int64_t a = 0; a < q->k[0]; a++)
                                for (int64_t b = 0; b < q->k[1]; b++)
                                    for (int64_t e = 0; e < q->k[2]; e++) {
                                        int64_t t[3] = {a, b, e}, ok = 1;
                                        for (int x = 0; x < 3 && ok; x++) {
                                            int64_t v = ii[x] + q->p[x] - t[x] * q->d[x];
                                            ok = v >= 0 && v % q->s[x] == 0 && v / q->s[x] < q->out[x];
                                            oo[x] = ok ? v / q->s[x] : 0;
                                        }
                                        if (ok)
                                            acc += ref_ld(dt, dyp, YI(ni, o, oo[0], oo[1], oo[2])) *
                                                   ref_ld(dt, wp, WI(o, c, a, b, e));
                                    }
                        ref_st(dt, rp, XI(ni, ci, id, ih, iw), acc);
                    }
        }
}

/* dw[o,c,a,b,e]: the sum over images and outputs of dy times the input that tap read */
static void grad_weight(mge_dtype dt, const ref_conv3d_geom *q, const void *dyp, const void *xp, void *rp)
{
    for (int64_t o = 0; o < q->O; o++) {
        int64_t g = o / q->Og;
        for (int64_t c = 0; c < q->Cg; c++)
            for (int64_t a = 0; a < q->k[0]; a++)
                for (int64_t b = 0; b < q->k[1]; b++)
                    for (int64_t e = 0; e < q->k[2]; e++) {
                        double acc = 0;
                        for (int64_t ni = 0; ni < q->N; ni++)
                            for (int64_t od = 0; od < q->out[0]; od++) {
                                int64_t id = src(q, 0, od, a);
                                for (int64_t oh = 0; id >= 0 && oh < q->out[1]; oh++) {
                                    int64_t ih = src(q, 1, oh, b);
                                    for (int64_t ow = 0; ih >= 0 && ow < q->out[2]; ow++) {
                                        int64_t iw = src(q, 2, ow, e);
                                        if (iw >= 0)
                                            acc += ref_ld(dt, dyp, YI(ni, o, od, oh, ow)) *
                                                   ref_ld(dt, xp, XI(ni, g * q->Cg + c, id, ih, iw));
                                    }
                                }
                            }
                        ref_st(dt, rp, WI(o, c, a, b, e), acc);
                    }
    }
}

static mge_status conv3d_ref(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                             mge_error *err)
{
    int gi = n->op == MGE_OP_CONV3D_GRAD_INPUT, gw = n->op == MGE_OP_CONV3D_GRAD_WEIGHT;
    const mge_tensor *x = gi ? in[2] : gw ? in[1] : in[0], *w = gi ? in[1] : gw ? in[2] : in[1];
    ref_conv3d_geom q;
    mge_status st = mge_ref_conv3d_geom(ctx, n, x, w, &q, err);
    if (st)
        return st;
    mge_dtype dt = in[0]->dtype;
    int64_t ey[5] = {q.N, q.O, q.out[0], q.out[1], q.out[2]}, eb[1] = {q.O};
    if (!gi && !gw) {
        const mge_tensor *b = n->nin >= 3 ? in[2] : NULL;
        if ((st = ref_check(ctx, n, "x", x, dt, 5, x->dims, err)) ||
            (st = ref_check(ctx, n, "weight", w, dt, 5, w->dims, err)) ||
            (b && (st = ref_check(ctx, n, "bias", b, dt, 1, eb, err))) ||
            (st = ref_check(ctx, n, "output", out[0], dt, 5, ey, err)))
            return st;
        fwd(dt, &q, x->data, w->data, b ? b->data : NULL, out[0]->data);
        return MGE_OK;
    }
    if ((st = ref_check(ctx, n, "dy", in[0], dt, 5, ey, err)) ||
        (st = ref_check(ctx, n, gi ? "weight" : "x", gi ? w : x, dt, 5, gi ? w->dims : x->dims, err)) ||
        (st = ref_check(ctx, n, "output", out[0], dt, 5, gi ? x->dims : w->dims, err)))
        return st;
    if (gi)
        grad_input(dt, &q, in[0]->data, w->data, out[0]->data);
    else
        grad_weight(dt, &q, in[0]->data, x->data, out[0]->data);
    return MGE_OK;
}

void mge_ref_register_conv3d(mge_backend *b)
{
    REF_EACH_FLOAT(dt) {
        b->k[MGE_OP_CONV3D][dt].run = conv3d_ref;
        b->k[MGE_OP_CONV3D_GRAD_INPUT][dt].run = conv3d_ref;
        b->k[MGE_OP_CONV3D_GRAD_WEIGHT][dt].run = conv3d_ref;
    }
}
