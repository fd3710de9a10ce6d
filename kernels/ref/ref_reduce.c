/* ref_reduce.c — softmax and log_softmax over one axis (max subtracted
 * first), sum/mean/max over an axis list (absent = all) with keepdim, and
 * argmax (i64, first maximum wins, NaN counts as the maximum as in PyTorch). */
#include "ref.h"

#include <math.h>
#include <string.h>

/* x seen as [outer, len, inner] around axis ax. */
static void split(const mge_tensor *x, int ax, int64_t *outer, int64_t *len, int64_t *inner)
{
    *outer = *inner = 1;
    for (int i = 0; i < ax; i++)
        *outer *= x->dims[i];
    *len = x->dims[ax];
    for (int i = ax + 1; i < x->ndim; i++)
        *inner *= x->dims[i];
}

static mge_status one_axis(const mge_node *n, const mge_tensor *x, int *ax, mge_error *err)
{
    int64_t v = mge_node_ints(n, MGE_KEY_axis, 0, -1);
    *ax = mge_axis(v, x->ndim);
    if (*ax < 0)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: axis=%lld is out of range for rank %d", ref_opname(n),
                             (long long)v, x->ndim);
    return MGE_OK;
}

/* Reads each element before writing it, so y may be x's buffer. */
static mge_status softmax_f32(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                              mge_error *err)
{
    const mge_tensor *x = in[0];
    int ax;
    mge_status st = ref_check_dtype(n, "x", x, MGE_F32, err);
    if (st || (st = one_axis(n, x, &ax, err)) || (st = ref_check(n, "output", out[0], MGE_F32, x->ndim, x->dims, err)))
        return st;
    int64_t outer, len, inner;
    split(x, ax, &outer, &len, &inner);
    const float *xp = x->data;
    float *yp = out[0]->data;
    int logsm = n->op == MGE_OP_LOG_SOFTMAX;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * len * inner + i;
            double m = -INFINITY, sum = 0;
            for (int64_t j = 0; j < len; j++)
                if (xp[base + j * inner] > m || isnan(xp[base + j * inner]))
                    m = xp[base + j * inner];
            if (isinf(m) && m < 0)
                m = 0; /* all -inf: exp(-inf - 0) = 0, the 0/0 of PyTorch follows */
            for (int64_t j = 0; j < len; j++)
                sum += exp(xp[base + j * inner] - m);
            double lse = log(sum);
            for (int64_t j = 0; j < len; j++) {
                double v = xp[base + j * inner] - m;
                yp[base + j * inner] = (float)(logsm ? v - lse : exp(v) / sum);
            }
        }
    return MGE_OK;
}

/* The reduced dims (red[d] = 1) from the axis attribute; absent = all. */
static mge_status reduced_dims(const mge_node *n, const mge_tensor *x, int *red, mge_error *err)
{
    const mge_attr *a = mge_node_attr(n, MGE_KEY_axis);
    for (int d = 0; d < x->ndim; d++)
        red[d] = a == NULL;
    if (!a)
        return MGE_OK;
    for (int i = 0; i < a->n && i < MGE_MAX_DIMS; i++) {
        int d = mge_axis(a->i[i], x->ndim);
        if (d < 0)
            return mge_error_set(err, MGE_ERR_INVALID, "%s: axis %lld is out of range for rank %d", ref_opname(n),
                                 (long long)a->i[i], x->ndim);
        if (red[d])
            return mge_error_set(err, MGE_ERR_INVALID, "%s: axis %lld is given twice", ref_opname(n),
                                 (long long)a->i[i]);
        red[d] = 1;
    }
    return MGE_OK;
}

/* sum, mean, max: for each output element (kept dims), walk the reduced
 * dims; double accumulation. max of an empty set is an error (PyTorch). */
static mge_status reduce_f32(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                             mge_error *err)
{
    const mge_tensor *x = in[0];
    int red[MGE_MAX_DIMS];
    mge_status st = ref_check_dtype(n, "x", x, MGE_F32, err);
    if (st || (st = reduced_dims(n, x, red, err)))
        return st;
    int keep = (int)mge_node_int(n, MGE_KEY_keepdim, 0), nk = 0, nr = 0, ny = 0;
    int64_t kdims[MGE_MAX_DIMS], kstr[MGE_MAX_DIMS], rdims[MGE_MAX_DIMS], rstr[MGE_MAX_DIMS], ydims[MGE_MAX_DIMS];
    int64_t stride = 1, rcount = 1;
    for (int d = x->ndim - 1; d >= 0; d--) {
        if (red[d]) {
            rdims[nr] = x->dims[d];
            rstr[nr++] = stride;
            rcount *= x->dims[d];
        } else {
            kdims[nk] = x->dims[d];
            kstr[nk++] = stride;
        }
        stride *= x->dims[d];
    }
    /* collected innermost first: reverse to row-major order */
    for (int i = 0; i < nk / 2; i++) {
        int64_t t = kdims[i]; kdims[i] = kdims[nk - 1 - i]; kdims[nk - 1 - i] = t;
        t = kstr[i]; kstr[i] = kstr[nk - 1 - i]; kstr[nk - 1 - i] = t;
    }
    for (int i = 0; i < nr / 2; i++) {
        int64_t t = rdims[i]; rdims[i] = rdims[nr - 1 - i]; rdims[nr - 1 - i] = t;
        t = rstr[i]; rstr[i] = rstr[nr - 1 - i]; rstr[nr - 1 - i] = t;
    }
    for (int d = 0; d < x->ndim; d++)
        if (!red[d] || keep)
            ydims[ny++] = red[d] ? 1 : x->dims[d];
    if ((st = ref_check(n, "output", out[0], MGE_F32, ny, ydims, err)))
        return st;
    int64_t ycount = ref_numel(out[0]);
    if (n->op == MGE_OP_MAX && rcount == 0 && ycount > 0)
        return mge_error_set(err, MGE_ERR_SHAPE, "max: reduction over an empty dimension");
    const float *xp = x->data;
    float *yp = out[0]->data;
    int64_t kidx[MGE_MAX_DIMS] = {0};
    for (int64_t o = 0; o < ycount; o++) {
        int64_t base = 0, ridx[MGE_MAX_DIMS] = {0};
        for (int i = 0; i < nk; i++)
            base += kidx[i] * kstr[i];
        double acc = n->op == MGE_OP_MAX ? -INFINITY : 0.0;
        for (int64_t r = 0; r < rcount; r++) {
            int64_t off = base;
            for (int i = 0; i < nr; i++)
                off += ridx[i] * rstr[i];
            double v = xp[off];
            if (n->op != MGE_OP_MAX)
                acc += v;
            else if (v > acc || isnan(v))
                acc = v;
            ref_next(nr, rdims, ridx);
        }
        if (n->op == MGE_OP_MEAN)
            acc = rcount ? acc / (double)rcount : NAN;
        yp[o] = (float)acc;
        ref_next(nk, kdims, kidx);
    }
    return MGE_OK;
}

#define ARGMAX(NAME, T, DT, ISNAN)                                                                                   \
    static mge_status NAME(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,    \
                           mge_error *err)                                                                           \
    {                                                                                                                \
        const mge_tensor *x = in[0];                                                                                 \
        int ax;                                                                                                      \
        mge_status st = ref_check_dtype(n, "x", x, DT, err);                                                         \
        if (st || (st = one_axis(n, x, &ax, err)))                                                                   \
            return st;                                                                                               \
        int keep = (int)mge_node_int(n, MGE_KEY_keepdim, 0), ny = 0;                                                 \
        int64_t ydims[MGE_MAX_DIMS];                                                                                 \
        for (int d = 0; d < x->ndim; d++)                                                                            \
            if (d != ax || keep)                                                                                     \
                ydims[ny++] = d == ax ? 1 : x->dims[d];                                                              \
        if ((st = ref_check(n, "output", out[0], MGE_I64, ny, ydims, err)))                                          \
            return st;                                                                                               \
        int64_t outer, len, inner;                                                                                   \
        split(x, ax, &outer, &len, &inner);                                                                          \
        if (len == 0 && outer * inner > 0)                                                                           \
            return mge_error_set(err, MGE_ERR_SHAPE, "argmax: reduction over an empty dimension");                   \
        const T *xp = x->data;                                                                                       \
        int64_t *yp = out[0]->data;                                                                                  \
        for (int64_t o = 0; o < outer; o++)                                                                          \
            for (int64_t i = 0; i < inner; i++) {                                                                    \
                const T *row = xp + o * len * inner + i;                                                             \
                int64_t best = 0;                                                                                    \
                for (int64_t j = 1; j < len && !ISNAN(row[best * inner]); j++)                                       \
                    if (row[j * inner] > row[best * inner] || ISNAN(row[j * inner]))                                 \
                        best = j;                                                                                    \
                yp[o * inner + i] = best;                                                                            \
            }                                                                                                        \
        return MGE_OK;                                                                                               \
    }

#define NOT_NAN(v) 0
ARGMAX(argmax_f32, float, MGE_F32, isnan)
ARGMAX(argmax_i32, int32_t, MGE_I32, NOT_NAN)
ARGMAX(argmax_i64, int64_t, MGE_I64, NOT_NAN)

void mge_ref_register_reduce(mge_backend *b)
{
    b->k[MGE_OP_SOFTMAX][MGE_F32].run = softmax_f32;
    b->k[MGE_OP_LOG_SOFTMAX][MGE_F32].run = softmax_f32;
    b->k[MGE_OP_SUM][MGE_F32].run = reduce_f32;
    b->k[MGE_OP_MEAN][MGE_F32].run = reduce_f32;
    b->k[MGE_OP_MAX][MGE_F32].run = reduce_f32;
    b->k[MGE_OP_ARGMAX][MGE_F32].run = argmax_f32;
    b->k[MGE_OP_ARGMAX][MGE_I32].run = argmax_i32;
    b->k[MGE_OP_ARGMAX][MGE_I64].run = argmax_i64;
}
