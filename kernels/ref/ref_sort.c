/* ref_sort.c — reference kernels of topk, sort, argsort and cumsum along
 * one axis, for every numeric dtype: each row (x seen as [outer, len,
 * inner]) is loaded, fully sorted by the stable merge sort of ksort.h
 * (PyTorch's order: NaN largest, ties in index order) and its first k (topk)
 * or all elements written back, values as the input's own bytes. cumsum
 * accumulates floats in double and integers in 64 bits, wrapping as the
 * output type does. */
#include "ref.h"
#include "ksort.h"

#include <stdlib.h>

typedef struct rows {
    int ax;
    int64_t outer, len, inner;
} rows;

static mge_status get_rows(const mge_kctx *ctx, const mge_node *n, const mge_tensor *x, rows *r, mge_error *err)
{
    mge_status st = ref_check_data(ctx, n, "x", x, err);
    if (st || (st = ref_axis(ctx, n, x, -1, &r->ax, err)))
        return st;
    if (!ksort_dtype_ok(x->dtype))
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: no reference kernel for %s", ref_opname(ctx, n),
                             mge_dtype_name(x->dtype));
    r->outer = r->inner = 1;
    for (int d = 0; d < r->ax; d++)
        r->outer *= x->dims[d];
    r->len = x->dims[r->ax];
    for (int d = r->ax + 1; d < x->ndim; d++)
        r->inner *= x->dims[d];
    return MGE_OK;
}

/* topk (k from the attribute), sort (k = len) and argsort. */
static mge_status sort_any(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                           mge_error *err)
{
    const mge_tensor *x = in[0];
    rows r;
    mge_status st = get_rows(ctx, n, x, &r, err);
    if (st)
        return st;
    int topk = n->op == MGE_OP_TOPK, argsort = n->op == MGE_OP_ARGSORT;
    int desc = topk ? (int)mge_node_int(n, MGE_KEY_largest, 1) : (int)mge_node_int(n, MGE_KEY_descending, 0);
    int64_t k = topk ? mge_node_int(n, MGE_KEY_k, 0) : r.len;
    if (k < 0 || k > r.len)
        return mge_error_set(err, MGE_ERR_INVALID, "topk: k=%lld is outside [0, %lld] (dim %d)", (long long)k,
                             (long long)r.len, r.ax);
    int64_t yd[MGE_MAX_DIMS];
    memcpy(yd, x->dims, sizeof yd);
    yd[r.ax] = k;
    const mge_tensor *vals = argsort ? NULL : out[0], *idx = argsort ? out[0] : out[1];
    if ((vals && (st = ref_check(ctx, n, "values", vals, x->dtype, x->ndim, yd, err))) ||
        (st = ref_check(ctx, n, "indices", idx, MGE_I64, x->ndim, yd, err)))
        return st;
    if (vals && vals->data == x->data && ref_numel(vals))
        return mge_error_set(err, MGE_ERR_INVALID, "%s: values may not share x's buffer", ref_opname(ctx, n));
    ksort_item *a = malloc((size_t)(r.len ? r.len : 1) * 2 * sizeof *a);
    if (!a)
        return mge_error_set(err, MGE_ERR_NOMEM, "%s: out of memory", ref_opname(ctx, n));
    int isf = mge_dtype_is_float(x->dtype);
    size_t es = mge_dtype_size(x->dtype);
    for (int64_t o = 0; o < r.outer; o++)
        for (int64_t i = 0; i < r.inner; i++) {
            int64_t xb = o * r.len * r.inner + i, yb = o * k * r.inner + i;
            for (int64_t j = 0; j < r.len; j++) {
                ksort_load(x->dtype, x->data, xb + j * r.inner, &a[j]);
                a[j].i = j;
            }
            ksort_sort(a, a + r.len, r.len, isf, desc);
            for (int64_t j = 0; j < k; j++) {
                int64_t at = yb + j * r.inner;
                ((int64_t *)idx->data)[at] = a[j].i;
                if (vals)
                    memcpy((char *)vals->data + (size_t)at * es,
                           (const char *)x->data + (size_t)(xb + a[j].i * r.inner) * es, es);
            }
        }
    free(a);
    return MGE_OK;
}

/* cumsum; reads each element before writing its own output, so y may be x. */
static mge_status cumsum_any(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                             mge_error *err)
{
    const mge_tensor *x = in[0];
    rows r;
    mge_status st = get_rows(ctx, n, x, &r, err);
    if (st || (st = ref_check(ctx, n, "output", out[0], x->dtype, x->ndim, x->dims, err)))
        return st;
    int excl = (int)mge_node_int(n, MGE_KEY_exclusive, 0), rev = (int)mge_node_int(n, MGE_KEY_reverse, 0);
    mge_dtype dt = x->dtype;
    int isf = mge_dtype_is_float(dt);
    for (int64_t o = 0; o < r.outer; o++)
        for (int64_t i = 0; i < r.inner; i++) {
            int64_t b = o * r.len * r.inner + i;
            double acc = 0;
            int64_t iacc = 0;
            for (int64_t t = 0; t < r.len; t++) {
                int64_t at = b + (rev ? r.len - 1 - t : t) * r.inner;
                if (isf) {
                    double v = ref_ld(dt, x->data, at);
                    if (!excl)
                        acc += v;
                    ref_st(dt, out[0]->data, at, acc);
                    if (excl)
                        acc += v;
                } else {
                    int64_t v = ref_ild(dt, x->data, at);
                    if (!excl)
                        iacc = (int64_t)((uint64_t)iacc + (uint64_t)v);
                    ref_ist(dt, out[0]->data, at, iacc);
                    if (excl)
                        iacc = (int64_t)((uint64_t)iacc + (uint64_t)v);
                }
            }
        }
    return MGE_OK;
}

void mge_ref_register_sort(mge_backend *b)
{
    for (int dt = 0; dt < MGE_NDTYPES; dt++) {
        if (!ksort_dtype_ok((mge_dtype)dt))
            continue;
        b->k[MGE_OP_TOPK][dt].run = sort_any;
        b->k[MGE_OP_SORT][dt].run = sort_any;
        b->k[MGE_OP_ARGSORT][dt].run = sort_any;
        b->k[MGE_OP_CUMSUM][dt].run = cumsum_any;
    }
}
