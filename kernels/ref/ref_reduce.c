/* ref_reduce.c — softmax and log_softmax over one axis (max subtracted
 * first), sum/mean/max over an axis list (absent = all) with keepdim, and
 * argmax (i64, first maximum wins, NaN counts as the maximum as in PyTorch);
 * prod and min like sum and max, argmin like argmax (first minimum, NaN
 * wins too). softmax, log_softmax, mean: float dtypes; the others any
 * numeric. */
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

static mge_status one_axis(const mge_kctx *ctx, const mge_node *n, const mge_tensor *x, int *ax, mge_error *err)
{
    int64_t v = mge_node_ints(n, MGE_KEY_axis, 0, -1);
    *ax = mge_axis(v, x->ndim);
    if (*ax < 0)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: axis=%lld is out of range for rank %d", ref_opname(ctx, n),
                             (long long)v, x->ndim);
    return MGE_OK;
}

/* Reads each element before writing it, so y may be x's buffer. */
static mge_status softmax_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *x = in[0];
    mge_dtype dt = x->dtype;
    int ax;
    mge_status st = ref_check_data(ctx, n, "x", x, err);
    if (st || (st = one_axis(ctx, n, x, &ax, err)) ||
        (st = ref_check(ctx, n, "output", out[0], dt, x->ndim, x->dims, err)))
        return st;
    if (!mge_dtype_is_float(dt))
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: no reference kernel for %s", ref_opname(ctx, n),
                             mge_dtype_name(dt));
    int64_t outer, len, inner;
    split(x, ax, &outer, &len, &inner);
    const void *xp = x->data;
    void *yp = out[0]->data;
    int logsm = n->op == MGE_OP_LOG_SOFTMAX;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * len * inner + i;
            double m = -INFINITY, sum = 0;
            for (int64_t j = 0; j < len; j++) {
                double v = ref_ld(dt, xp, base + j * inner);
                if (v > m || isnan(v))
                    m = v;
            }
            if (isinf(m) && m < 0)
                m = 0; /* all -inf: exp(-inf - 0) = 0, the 0/0 of PyTorch follows */
            for (int64_t j = 0; j < len; j++)
                sum += exp(ref_ld(dt, xp, base + j * inner) - m);
            double lse = log(sum);
            for (int64_t j = 0; j < len; j++) {
                double v = ref_ld(dt, xp, base + j * inner) - m;
                ref_st(dt, yp, base + j * inner, logsm ? v - lse : exp(v) / sum);
            }
        }
    return MGE_OK;
}

/* The reduced dims (red[d] = 1) from the axis attribute; absent = all. */
static mge_status reduced_dims(const mge_kctx *ctx, const mge_node *n, const mge_tensor *x, int *red, mge_error *err)
{
    const mge_attr *a = mge_node_attr(n, MGE_KEY_axis);
    for (int d = 0; d < x->ndim; d++)
        red[d] = a == NULL;
    if (!a)
        return MGE_OK;
    for (int i = 0; i < a->n && i < MGE_MAX_DIMS; i++) {
        int d = mge_axis(a->i[i], x->ndim);
        if (d < 0)
            return mge_error_set(err, MGE_ERR_INVALID, "%s: axis %lld is out of range for rank %d", ref_opname(ctx, n),
                                 (long long)a->i[i], x->ndim);
        if (red[d])
            return mge_error_set(err, MGE_ERR_INVALID, "%s: axis %lld is given twice", ref_opname(ctx, n),
                                 (long long)a->i[i]);
        red[d] = 1;
    }
    return MGE_OK;
}

/* sum, mean, max: for each output element (kept dims), walk the reduced
 * dims. Floats accumulate in double; integers (sum, max) in 64 bits, sums
 * wrapping as the output type does. max of an empty set is an error
 * (PyTorch). */
static mge_status reduce_any(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                             mge_error *err)
{
    const mge_tensor *x = in[0];
    mge_dtype dt = x->dtype;
    int red[MGE_MAX_DIMS], isf = mge_dtype_is_float(dt);
    mge_status st = ref_check_data(ctx, n, "x", x, err);
    if (st || (st = reduced_dims(ctx, n, x, red, err)))
        return st;
    if (!isf && (n->op == MGE_OP_MEAN || dt == MGE_BOOL || dt == MGE_QS8 || dt == MGE_QS32))
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: no reference kernel for %s", ref_opname(ctx, n),
                             mge_dtype_name(dt));
    int keep = (int)mge_node_int(n, MGE_KEY_keepdim, 0), nk = 0, nr = 0, ny = 0;
    int64_t kdims[MGE_MAX_DIMS], kstr[MGE_MAX_DIMS], rdims[MGE_MAX_DIMS], rstr[MGE_MAX_DIMS], ydims[MGE_MAX_DIMS];
    int64_t xstr[MGE_MAX_DIMS], stride = 1, rcount = 1;
    for (int d = x->ndim - 1; d >= 0; d--) {
        xstr[d] = stride;
        stride *= x->dims[d];
    }
    /* split the dims, in order, into kept ones (output index) and reduced ones */
    for (int d = 0; d < x->ndim; d++) {
        if (red[d]) {
            rdims[nr] = x->dims[d];
            rstr[nr++] = xstr[d];
            rcount *= x->dims[d];
        } else {
            kdims[nk] = x->dims[d];
            kstr[nk++] = xstr[d];
        }
    }
    for (int d = 0; d < x->ndim; d++)
        if (!red[d] || keep)
            ydims[ny++] = red[d] ? 1 : x->dims[d];
    if ((st = ref_check(ctx, n, "output", out[0], dt, ny, ydims, err)))
        return st;
    int64_t ycount = ref_numel(out[0]);
    int ismax = n->op == MGE_OP_MAX, ismin = n->op == MGE_OP_MIN, isprod = n->op == MGE_OP_PROD;
    /* u64 max/min compare with the top bit flipped: unsigned order as signed */
    int64_t fl = dt == MGE_U64 && (ismax || ismin) ? INT64_MIN : 0;
    if ((ismax || ismin) && rcount == 0 && ycount > 0)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: reduction over an empty dimension", ref_opname(ctx, n));
    const void *xp = x->data;
    void *yp = out[0]->data;
    int64_t kidx[MGE_MAX_DIMS] = {0};
    for (int64_t o = 0; o < ycount; o++) {
        int64_t base = 0, ridx[MGE_MAX_DIMS] = {0};
        for (int i = 0; i < nk; i++)
            base += kidx[i] * kstr[i];
        double acc = ismax ? -INFINITY : ismin ? INFINITY : isprod ? 1.0 : 0.0;
        int64_t iacc = ismax ? INT64_MIN : ismin ? INT64_MAX : isprod ? 1 : 0;
        for (int64_t r = 0; r < rcount; r++) {
            int64_t off = base;
            for (int i = 0; i < nr; i++)
                off += ridx[i] * rstr[i];
            if (isf) {
                double v = ref_ld(dt, xp, off);
                if (isprod)
                    acc *= v;
                else if (ismax) {
                    if (v > acc || isnan(v))
                        acc = v;
                } else if (ismin) {
                    if (v < acc || isnan(v))
                        acc = v;
                }
                else
                    acc += v;
            } else {
                int64_t v = ref_ild(dt, xp, off) ^ fl;
                if (isprod)
                    iacc = (int64_t)((uint64_t)iacc * (uint64_t)v);
                else if (ismax)
                    iacc = v > iacc ? v : iacc;
                else if (ismin)
                    iacc = v < iacc ? v : iacc;
                else
                    iacc = (int64_t)((uint64_t)iacc + (uint64_t)v);
            }
            ref_next(nr, rdims, ridx);
        }
        if (n->op == MGE_OP_MEAN)
            acc = rcount ? acc / (double)rcount : NAN;
        if (isf)
            ref_st(dt, yp, o, acc);
        else
            ref_ist(dt, yp, o, iacc ^ fl);
        ref_next(nk, kdims, kidx);
    }
    return MGE_OK;
}

static mge_status argmax_any(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                             mge_error *err)
{
    const mge_tensor *x = in[0];
    mge_dtype dt = x->dtype;
    int ax, isf = mge_dtype_is_float(dt);
    mge_status st = ref_check_data(ctx, n, "x", x, err);
    if (st || (st = one_axis(ctx, n, x, &ax, err)))
        return st;
    if (dt == MGE_BOOL || dt == MGE_QS8 || dt == MGE_QS32)
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: no reference kernel for %s", ref_opname(ctx, n),
                             mge_dtype_name(dt));
    int keep = (int)mge_node_int(n, MGE_KEY_keepdim, 0), ny = 0;
    int64_t ydims[MGE_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++)
        if (d != ax || keep)
            ydims[ny++] = d == ax ? 1 : x->dims[d];
    if ((st = ref_check(ctx, n, "output", out[0], MGE_I64, ny, ydims, err)))
        return st;
    int64_t outer, len, inner;
    split(x, ax, &outer, &len, &inner);
    if (len == 0 && outer * inner > 0)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: reduction over an empty dimension", ref_opname(ctx, n));
    int64_t *yp = out[0]->data;
    int sgn = n->op == MGE_OP_ARGMIN ? -1 : 1;   /* argmin: the argmax of -x (NaN still wins) */
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * len * inner + i, best = 0;
            if (isf) {
                double bv = sgn * ref_ld(dt, x->data, base);
                for (int64_t j = 1; j < len && !isnan(bv); j++) {
                    double v = sgn * ref_ld(dt, x->data, base + j * inner);
                    if (v > bv || isnan(v)) {
                        bv = v;
                        best = j;
                    }
                }
            } else {
                int64_t fl = dt == MGE_U64 ? INT64_MIN : 0; /* unsigned order as signed */
                int64_t bv = ref_ild(dt, x->data, base) ^ fl;
                for (int64_t j = 1; j < len; j++) {
                    int64_t v = ref_ild(dt, x->data, base + j * inner) ^ fl;
                    if (sgn > 0 ? v > bv : v < bv) {
                        bv = v;
                        best = j;
                    }
                }
            }
            yp[o * inner + i] = best;
        }
    return MGE_OK;
}

void mge_ref_register_reduce(mge_backend *b)
{
    REF_EACH_FLOAT(dt) {
        b->k[MGE_OP_SOFTMAX][dt].run = softmax_float;
        b->k[MGE_OP_LOG_SOFTMAX][dt].run = softmax_float;
        b->k[MGE_OP_MEAN][dt].run = reduce_any;
    }
    static const mge_dtype numeric[] = {MGE_F32, MGE_F16, MGE_BF16, MGE_F64, MGE_I8,  MGE_U8,  MGE_I16,
                                        MGE_U16, MGE_I32, MGE_U32,  MGE_I64, MGE_U64};
    for (size_t i = 0; i < sizeof numeric / sizeof numeric[0]; i++) {
        b->k[MGE_OP_SUM][numeric[i]].run = reduce_any;
        b->k[MGE_OP_MAX][numeric[i]].run = reduce_any;
        b->k[MGE_OP_ARGMAX][numeric[i]].run = argmax_any;
        b->k[MGE_OP_PROD][numeric[i]].run = reduce_any;
        b->k[MGE_OP_MIN][numeric[i]].run = reduce_any;
        b->k[MGE_OP_ARGMIN][numeric[i]].run = argmax_any;
    }
}
