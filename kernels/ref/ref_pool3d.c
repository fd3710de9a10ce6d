/* ref_pool3d.c — maxpool3d (with ONNX's Indices output), avgpool3d, their
 * gradients and max_unpool on [N,C,D,H,W] (kernels/kpool3d.h's geometry).
 * Rules as the 2-D pools' (PyTorch's): max ignores padding, the first
 * maximum in scan order wins and so does a NaN; a window with no input
 * position gives -inf (the integer minimum) and index -1. Average sums the
 * window's input positions and divides by their count, or with
 * count_include_pad by the count of its positions inside input + pads; an
 * empty divisor gives NaN. Dilation applies to both. Float dtypes; maxpool3d
 * also i8 and u8. */
#include "ref.h"
#include "kpool3d.h"
#include "kindex.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double p3_ld(mge_dtype dt, const void *p, int64_t i)
{
    return mge_dtype_is_float(dt) ? ref_ld(dt, p, i) : (double)ref_ild(dt, p, i);
}

static void p3_st(mge_dtype dt, void *p, int64_t i, double v)
{
    if (mge_dtype_is_float(dt))
        ref_st(dt, p, i, v);
    else
        ref_ist(dt, p, i, (int64_t)v);
}

/* The geometry from x (rank 5) and, when given, checks t against the pooled shape. */
static mge_status p3_setup(const mge_kctx *ctx, const mge_node *n, const mge_tensor *x, const mge_tensor *t,
                           const char *what, kp3_geom *g, mge_error *err)
{
    const char *op = ref_opname(ctx, n);
    if (x->ndim != 5)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x has rank %d: expected 5 [N,C,D,H,W]", op, x->ndim);
    mge_status st = kp3_geom_of(n, op, x->dims, g, err);
    if (st)
        return st;
    int64_t ey[5] = {g->N, g->C, g->out[0], g->out[1], g->out[2]};
    return t ? ref_check(ctx, n, what, t, t->dtype, 5, ey, err) : MGE_OK;
}

/* Calls f(arg, input offset within the plane) for each window position of
 * output (od, oh, ow) inside the input, in scan order (f may be NULL);
 * returns how many positions lie inside input + pads (count_include_pad's
 * divisor), *real how many inside the input (the other divisor). */
typedef void (*p3_visit)(void *arg, int64_t off);
static int64_t p3_window(const kp3_geom *g, int64_t od, int64_t oh, int64_t ow, p3_visit f, void *arg,
                         int64_t *real)
{
    /* the in-input taps per dim (kp3_span: O(1), so a huge window over a
     * small input costs its input positions only) */
    int64_t o[3] = {od, oh, ow}, p0[3], c[3], pc[3];
    for (int i = 0; i < 3; i++)
        kp3_span(g, i, o[i], &p0[i], &c[i], &pc[i]);
    *real = c[0] * c[1] * c[2];
    if (f)
        for (int64_t a = 0; a < c[0]; a++)
            for (int64_t b = 0; b < c[1]; b++)
                for (int64_t e = 0; e < c[2]; e++)
                    f(arg, ((p0[0] + a * g->d[0]) * g->in[1] + p0[1] + b * g->d[1]) * g->in[2] + p0[2] + e * g->d[2]);
    return pc[0] * pc[1] * pc[2];
}

typedef struct p3_acc {
    mge_dtype dt;
    const void *x;
    int64_t base, best;
    double m, sum;
} p3_acc;

static void visit_max(void *p, int64_t off)
{
    p3_acc *a = p;
    double v = p3_ld(a->dt, a->x, a->base + off);
    if (a->best < 0 || v > a->m || (isnan(v) && !isnan(a->m))) {
        a->m = v;
        a->best = off;
    }
}

static void visit_sum(void *p, int64_t off)
{
    p3_acc *a = p;
    a->sum += p3_ld(a->dt, a->x, a->base + off);
}

/* ONNX's index of plane offset off: the flat index in x, the plane
 * row-major (storage_order 0) or column-major (1). */
static int64_t p3_index(const kp3_geom *g, int64_t nc, int64_t off, int colmajor)
{
    int64_t S = g->in[0] * g->in[1] * g->in[2];
    if (off < 0)
        return -1;
    if (colmajor) {
        int64_t w = off % g->in[2], h = off / g->in[2] % g->in[1], d = off / (g->in[1] * g->in[2]);
        off = w * g->in[1] * g->in[0] + h * g->in[0] + d;
    }
    return nc * S + off;
}

static mge_status maxpool3d_any(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *x = in[0];
    mge_dtype dt = x->dtype;
    kp3_geom g;
    mge_status st = ref_check_data(ctx, n, "x", x, err);
    if (st || (st = p3_setup(ctx, n, x, out[0], "output", &g, err)))
        return st;
    if (out[0]->dtype != dt)
        return mge_error_set(err, MGE_ERR_SHAPE, "maxpool3d: output is %s: expected x's %s",
                             mge_dtype_name(out[0]->dtype), mge_dtype_name(dt));
    mge_tensor *ix = n->nout > 1 ? out[1] : NULL;
    if (ix && ((st = p3_setup(ctx, n, x, ix, "indices", &g, err)) ||
               (st = ref_check_dtype(ctx, n, "indices", ix, MGE_I64, err))))
        return st;
    int colmajor = mge_node_int(n, MGE_KEY_storage_order, 0) != 0;
    double lowest = dt == MGE_I8 ? INT8_MIN : dt == MGE_U8 ? 0 : -INFINITY;
    int64_t S = g.in[0] * g.in[1] * g.in[2], O = g.out[0] * g.out[1] * g.out[2];
    for (int64_t nc = 0; nc < g.N * g.C; nc++)
        for (int64_t od = 0, o = nc * O; od < g.out[0]; od++)
            for (int64_t oh = 0; oh < g.out[1]; oh++)
                for (int64_t ow = 0; ow < g.out[2]; ow++, o++) {
                    p3_acc a = {dt, x->data, nc * S, -1, lowest, 0};
                    int64_t real;
                    p3_window(&g, od, oh, ow, visit_max, &a, &real);
                    p3_st(dt, out[0]->data, o, a.best < 0 ? lowest : a.m);
                    if (ix)
                        ((int64_t *)ix->data)[o] = p3_index(&g, nc, a.best, colmajor);
                }
    return MGE_OK;
}

static mge_status avgpool3d_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                  mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *x = in[0];
    mge_dtype dt = x->dtype;
    kp3_geom g;
    mge_status st = ref_check_data(ctx, n, "x", x, err);
    if (st || (st = p3_setup(ctx, n, x, out[0], "output", &g, err)) ||
        (st = ref_check_dtype(ctx, n, "output", out[0], dt, err)))
        return st;
    int incl = (int)mge_node_int(n, MGE_KEY_count_include_pad, 1);
    int64_t S = g.in[0] * g.in[1] * g.in[2], O = g.out[0] * g.out[1] * g.out[2];
    for (int64_t nc = 0; nc < g.N * g.C; nc++)
        for (int64_t od = 0, o = nc * O; od < g.out[0]; od++)
            for (int64_t oh = 0; oh < g.out[1]; oh++)
                for (int64_t ow = 0; ow < g.out[2]; ow++, o++) {
                    p3_acc a = {dt, x->data, nc * S, -1, 0, 0};
                    int64_t real, padded = p3_window(&g, od, oh, ow, visit_sum, &a, &real);
                    int64_t div = incl ? padded : real;
                    ref_st(dt, out[0]->data, o, div > 0 ? a.sum / (double)div : NAN);
                }
    return MGE_OK;
}

/* maxpool3d_grad / avgpool3d_grad (dy, x) -> dx like x, summed in a double plane. */
typedef struct p3_grad {
    double *acc, v;
} p3_grad;

static void visit_add(void *p, int64_t off)
{
    p3_grad *a = p;
    a->acc[off] += a->v;
}

static mge_status pool3d_grad_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                    mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *dy = in[0], *x = in[1];
    mge_dtype dt = dy->dtype;
    int mx = n->op == MGE_OP_MAXPOOL3D_GRAD;
    kp3_geom g;
    mge_status st = ref_check_dtype(ctx, n, "dy", dy, dt, err);
    if (st || (st = p3_setup(ctx, n, x, dy, "dy", &g, err)) ||
        (st = ref_check(ctx, n, "result", out[0], dt, 5, x->dims, err)) ||
        (mx && (st = ref_check(ctx, n, "x", x, dt, 5, x->dims, err))))
        return st;
    int incl = (int)mge_node_int(n, MGE_KEY_count_include_pad, 1);
    int64_t S = g.in[0] * g.in[1] * g.in[2], O = g.out[0] * g.out[1] * g.out[2];
    double *acc = calloc((size_t)(S > 0 ? S : 1), sizeof *acc);
    if (!acc)
        return mge_error_set(err, MGE_ERR_NOMEM, "%s: no memory for a %lld-element plane", ref_opname(ctx, n),
                             (long long)S);
    for (int64_t nc = 0; nc < g.N * g.C; nc++) {
        for (int64_t j = 0; j < S; j++)
            acc[j] = 0;
        for (int64_t od = 0, o = nc * O; od < g.out[0]; od++)
            for (int64_t oh = 0; oh < g.out[1]; oh++)
                for (int64_t ow = 0; ow < g.out[2]; ow++, o++) {
                    double v = ref_ld(dt, dy->data, o);
                    int64_t real;
                    if (mx) {
                        p3_acc a = {dt, x->data, nc * S, -1, -INFINITY, 0};
                        p3_window(&g, od, oh, ow, visit_max, &a, &real);
                        if (a.best >= 0)
                            acc[a.best] += v;
                        continue;
                    }
                    /* the forward's divisor, then dy / divisor to each input position */
                    int64_t padded = p3_window(&g, od, oh, ow, NULL, NULL, &real), div = incl ? padded : real;
                    p3_grad pg = {acc, div > 0 ? v / (double)div : 0};
                    if (div > 0)
                        p3_window(&g, od, oh, ow, visit_add, &pg, &real);
                }
        for (int64_t j = 0; j < S; j++)
            ref_st(dt, out[0]->data, nc * S + j, acc[j]);
    }
    free(acc);
    return MGE_OK;
}

/* max_unpool(x, idx) -> y: zeros with y.flat[idx[i]] = x[i]; y's shape is
 * inference's (the attributes); N and C must be x's. */
static mge_status max_unpool_any(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                 mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *x = in[0], *idx = in[1];
    mge_tensor *y = out[0];
    const char *op = ref_opname(ctx, n);
    mge_status st = ref_check_data(ctx, n, "x", x, err);
    if (st || (st = ref_check(ctx, n, "indices", idx, idx->dtype, x->ndim, x->dims, err)) ||
        (st = ref_check_dtype(ctx, n, "output", y, x->dtype, err)))
        return st;
    if (y->ndim != x->ndim || x->ndim < 3 || y->dims[0] != x->dims[0] || y->dims[1] != x->dims[1])
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: output of rank %d for x of rank %d: expected x's N and C", op,
                             y->ndim, x->ndim);
    int64_t ny = ref_numel(y), nx = ref_numel(x);
    if ((st = kidx_check(op, idx, 0, INT64_MAX, err)))
        return st;
    for (int64_t i = 0; i < nx; i++) {
        int64_t k = kidx_ld(idx->dtype, idx->data, i);
        if (k < 0 || k >= ny) {
            char b[64];
            return mge_error_set(err, MGE_ERR_INVALID, "%s: index %lld at %s is out of range for an output of %lld "
                                 "elements", op, (long long)k, kidx_pos(idx->ndim, idx->dims, i, b, sizeof b),
                                 (long long)ny);
        }
    }
    size_t es = mge_dtype_size(x->dtype);
    memset(y->data, 0, (size_t)ny * es);
    for (int64_t i = 0; i < nx; i++)
        memcpy((char *)y->data + (size_t)kidx_ld(idx->dtype, idx->data, i) * es, (const char *)x->data + (size_t)i * es,
               es);
    return MGE_OK;
}

void mge_ref_register_pool3d(mge_backend *b)
{
    REF_EACH_FLOAT(dt) {
        b->k[MGE_OP_MAXPOOL3D][dt].run = maxpool3d_any;
        b->k[MGE_OP_AVGPOOL3D][dt].run = avgpool3d_float;
        b->k[MGE_OP_MAXPOOL3D_GRAD][dt].run = pool3d_grad_float;
        b->k[MGE_OP_AVGPOOL3D_GRAD][dt].run = pool3d_grad_float;
    }
    b->k[MGE_OP_MAXPOOL3D][MGE_I8].run = maxpool3d_any;
    b->k[MGE_OP_MAXPOOL3D][MGE_U8].run = maxpool3d_any;
    for (int dt = 0; dt < MGE_NDTYPES; dt++)
        if (dt != MGE_QS8 && dt != MGE_QS32)
            b->k[MGE_OP_MAX_UNPOOL][dt].run = max_unpool_any;
}
