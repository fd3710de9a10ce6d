/* ref_gnorm.c — reference kernels of group_norm, instance_norm (one group
 * per channel), rms_norm and their gradients; float dtypes, double
 * arithmetic.
 *
 * A group of x[N,C,S...] is sample i's C/G consecutive channels, M =
 * C/G * S contiguous values: xhat = (x - mean) * inv, inv = 1 /
 * sqrt(biased variance + eps). With g = dy * weight[c]:
 *   dx = inv * (g - mean(g) - xhat * mean(g * xhat)) over the group,
 *   dweight[c] = sum dy * xhat, dbias[c] = sum dy.
 * rms_norm rows are the dims axis..last (D values): r = 1 / sqrt(mean(x^2)
 * + eps), y = x * r * w; dx = r * (g - x * r^2 * mean(g * x)), dweight =
 * sum over rows of dy * x * r. */
#include "ref.h"

#include <stdlib.h>

/* x[N,C,S] with G groups: the node's num_groups, or C (instance_norm and
 * group_norm_grad without it). */
typedef struct gn_geom {
    int64_t N, C, S, G, M;
} gn_geom;

static mge_status gn_geom_of(const mge_kctx *ctx, const mge_node *n, const mge_tensor *x, gn_geom *q, mge_error *err)
{
    if (x->ndim < 2 || !mge_dtype_is_float(x->dtype))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x must be a float tensor of rank >= 2 [N,C,...]",
                             ref_opname(ctx, n));
    q->N = x->dims[0];
    q->C = x->dims[1];
    q->S = 1;
    for (int i = 2; i < x->ndim; i++)
        q->S *= x->dims[i];
    q->G = n->op == MGE_OP_INSTANCE_NORM ? q->C : mge_node_int(n, MGE_KEY_num_groups, q->C);
    if (q->G < 1 || q->C % q->G)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: num_groups=%lld does not divide the %lld channels",
                             ref_opname(ctx, n), (long long)q->G, (long long)q->C);
    q->M = q->C / q->G * q->S;
    return MGE_OK;
}

/* group_norm(x, w, b), instance_norm(x[, w, b]) */
static mge_status group_norm_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                   mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *x = in[0], *w = n->nin > 1 ? in[1] : NULL, *b = n->nin > 2 ? in[2] : NULL;
    mge_tensor *y = out[0];
    gn_geom q;
    mge_status st = gn_geom_of(ctx, n, x, &q, err);
    if (st)
        return st;
    mge_dtype dt = x->dtype;
    if ((st = ref_check(ctx, n, "x", x, dt, x->ndim, x->dims, err)) ||
        (st = ref_check(ctx, n, "output", y, dt, x->ndim, x->dims, err)) ||
        (w && (st = ref_check(ctx, n, "weight", w, dt, 1, &q.C, err))) ||
        (b && (st = ref_check(ctx, n, "bias", b, dt, 1, &q.C, err))))
        return st;
    double eps = mge_node_float(n, MGE_KEY_eps, 1e-5);
    if (q.M == 0)
        return MGE_OK;
    for (int64_t r = 0; r < q.N * q.G; r++) {
        int64_t o = r * q.M, c0 = (r % q.G) * (q.C / q.G);
        double mean, inv;
        ref_row_moments(dt, x->data, o, q.M, eps, &mean, &inv);
        for (int64_t j = 0; j < q.M; j++) {
            int64_t c = c0 + j / q.S;
            double v = (ref_ld(dt, x->data, o + j) - mean) * inv;
            if (w)
                v = v * ref_ld(dt, w->data, c) + ref_ld(dt, b->data, c);
            ref_st(dt, y->data, o + j, v);
        }
    }
    return MGE_OK;
}

/* group_norm_grad(dy, x[, w]) -> dx, dweight, dbias */
static mge_status group_norm_grad_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                        mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *dy = in[0], *x = in[1], *w = n->nin > 2 ? in[2] : NULL;
    gn_geom q;
    mge_status st = gn_geom_of(ctx, n, x, &q, err);
    if (st)
        return st;
    mge_dtype dt = x->dtype;
    if ((st = ref_check(ctx, n, "x", x, dt, x->ndim, x->dims, err)) ||
        (st = ref_check(ctx, n, "dy", dy, dt, x->ndim, x->dims, err)) ||
        (st = ref_check(ctx, n, "dx", out[0], dt, x->ndim, x->dims, err)) ||
        (st = ref_check(ctx, n, "dweight", out[1], dt, 1, &q.C, err)) ||
        (st = ref_check(ctx, n, "dbias", out[2], dt, 1, &q.C, err)) ||
        (w && (st = ref_check(ctx, n, "weight", w, dt, 1, &q.C, err))))
        return st;
    double eps = mge_node_float(n, MGE_KEY_eps, 1e-5);
    double *dw = calloc((size_t)(2 * q.C + 1), sizeof *dw), *db = dw ? dw + q.C : NULL;
    if (!dw)
        return mge_error_set(err, MGE_ERR_NOMEM, "%s: out of memory", ref_opname(ctx, n));
    for (int64_t r = 0; q.M && r < q.N * q.G; r++) {
        int64_t o = r * q.M, c0 = (r % q.G) * (q.C / q.G);
        double mean, inv, sg = 0, sgx = 0;
        ref_row_moments(dt, x->data, o, q.M, eps, &mean, &inv);
        for (int64_t j = 0; j < q.M; j++) {
            int64_t c = c0 + j / q.S;
            double d = ref_ld(dt, dy->data, o + j), xh = (ref_ld(dt, x->data, o + j) - mean) * inv;
            double gg = d * (w ? ref_ld(dt, w->data, c) : 1.0);
            sg += gg;
            sgx += gg * xh;
            dw[c] += d * xh;
            db[c] += d;
        }
        sg /= (double)q.M;
        sgx /= (double)q.M;
        for (int64_t j = 0; j < q.M; j++) {
            int64_t c = c0 + j / q.S;
            double xh = (ref_ld(dt, x->data, o + j) - mean) * inv;
            double gg = ref_ld(dt, dy->data, o + j) * (w ? ref_ld(dt, w->data, c) : 1.0);
            ref_st(dt, out[0]->data, o + j, inv * (gg - sg - xh * sgx));
        }
    }
    for (int64_t c = 0; c < q.C; c++) {
        ref_st(dt, out[1]->data, c, dw[c]);
        ref_st(dt, out[2]->data, c, db[c]);
    }
    free(dw);
    return MGE_OK;
}

/* rows x D of x for rms_norm's axis, weight checked against the dims. */
static mge_status rms_geom(const mge_kctx *ctx, const mge_node *n, const mge_tensor *x, const mge_tensor *w,
                           int64_t *rows, int64_t *D, mge_error *err)
{
    int ax;
    mge_status st = ref_axis(ctx, n, x, -1, &ax, err);
    if (st)
        return st;
    if (!mge_dtype_is_float(x->dtype))
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: no reference kernel for %s", ref_opname(ctx, n),
                             mge_dtype_name(x->dtype));
    if ((st = ref_check(ctx, n, "x", x, x->dtype, x->ndim, x->dims, err)) ||
        (st = ref_check(ctx, n, "weight", w, x->dtype, x->ndim - ax, x->dims + ax, err)))
        return st;
    *rows = 1;
    *D = 1;
    for (int i = 0; i < x->ndim; i++)
        *(i < ax ? rows : D) *= x->dims[i];
    return MGE_OK;
}

static double rms_inv(mge_dtype dt, const void *x, int64_t o, int64_t D, double eps)
{
    double sq = 0;
    for (int64_t j = 0; j < D; j++) {
        double v = ref_ld(dt, x, o + j);
        sq += v * v;
    }
    return 1.0 / sqrt(sq / (double)D + eps);
}

static mge_status rms_norm_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                 mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *x = in[0], *w = in[1];
    int64_t rows, D;
    mge_status st = rms_geom(ctx, n, x, w, &rows, &D, err);
    if (st || (st = ref_check(ctx, n, "output", out[0], x->dtype, x->ndim, x->dims, err)))
        return st;
    mge_dtype dt = x->dtype;
    double eps = mge_rms_eps(n, dt);
    for (int64_t r = 0; D && r < rows; r++) {
        int64_t o = r * D;
        double inv = rms_inv(dt, x->data, o, D, eps);
        for (int64_t j = 0; j < D; j++)
            ref_st(dt, out[0]->data, o + j, ref_ld(dt, x->data, o + j) * inv * ref_ld(dt, w->data, j));
    }
    return MGE_OK;
}

static mge_status rms_norm_grad_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                      mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *dy = in[0], *x = in[1], *w = in[2];
    int64_t rows, D;
    mge_status st = rms_geom(ctx, n, x, w, &rows, &D, err);
    if (st || (st = ref_check(ctx, n, "dy", dy, x->dtype, x->ndim, x->dims, err)) ||
        (st = ref_check(ctx, n, "dx", out[0], x->dtype, x->ndim, x->dims, err)) ||
        (st = ref_check(ctx, n, "dweight", out[1], x->dtype, w->ndim, w->dims, err)))
        return st;
    mge_dtype dt = x->dtype;
    double eps = mge_rms_eps(n, dt);
    double *dw = calloc((size_t)(D + 1), sizeof *dw);
    if (!dw)
        return mge_error_set(err, MGE_ERR_NOMEM, "%s: out of memory", ref_opname(ctx, n));
    for (int64_t r = 0; D && r < rows; r++) {
        int64_t o = r * D;
        double inv = rms_inv(dt, x->data, o, D, eps), sgx = 0;
        for (int64_t j = 0; j < D; j++) {
            double d = ref_ld(dt, dy->data, o + j), xv = ref_ld(dt, x->data, o + j);
            sgx += d * ref_ld(dt, w->data, j) * xv;
            dw[j] += d * xv * inv;
        }
        sgx /= (double)D;
        for (int64_t j = 0; j < D; j++) {
            double xv = ref_ld(dt, x->data, o + j);
            double gg = ref_ld(dt, dy->data, o + j) * ref_ld(dt, w->data, j);
            ref_st(dt, out[0]->data, o + j, inv * (gg - xv * inv * inv * sgx));
        }
    }
    for (int64_t j = 0; j < D; j++)
        ref_st(dt, out[1]->data, j, dw[j]);
    free(dw);
    return MGE_OK;
}

void mge_ref_register_gnorm(mge_backend *b)
{
    REF_EACH_FLOAT(dt) {
        b->k[MGE_OP_GROUP_NORM][dt].run = group_norm_float;
        b->k[MGE_OP_INSTANCE_NORM][dt].run = group_norm_float;
        b->k[MGE_OP_GROUP_NORM_GRAD][dt].run = group_norm_grad_float;
        b->k[MGE_OP_RMS_NORM][dt].run = rms_norm_float;
        b->k[MGE_OP_RMS_NORM_GRAD][dt].run = rms_norm_grad_float;
    }
}
