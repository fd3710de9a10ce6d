/* op_shape.c — data movement: reshape, flatten, transpose, concat, slice.
 *
 * reshape(shape): 0 copies the input dim at that position, one -1 is
 *   inferred; element counts must match.
 * flatten(start): dims[0..start) + the product of the rest (start may be
 *   negative: counts from the end).
 * transpose(perm): out.dims[i] = x.dims[perm[i]]; perm is a permutation.
 * concat(axis): inputs of one rank and dtype, equal except along axis.
 * slice(axis, start, end?, step): Python semantics: negative indices count
 *   from the end, out-of-range ones clamp, end absent = to the end, step > 0.
 * reshape_as(dy, x): dy's elements under x's shape (a view; the gradient
 *   of reshape and flatten): same dtype and element count.
 * slice_grad(dy, x; slice's attributes): like x, dy placed where slice took
 *   its elements and zeros elsewhere; dy must have slice(x)'s shape.
 * FLOPs: 0 (data movement). */
#include "internal.h"

#include <stdio.h>
#include <string.h>

/* "[2,-1,0]" into b. */
static const char *ints_str(const mge_attr *a, char *b, size_t n)
{
    size_t k = (size_t)snprintf(b, n, "[");
    for (int i = 0; i < a->n && k < n; i++)
        k += (size_t)snprintf(b + k, n - k, "%s%lld", i ? "," : "", (long long)a->i[i]);
    if (k < n)
        snprintf(b + k, n - k, "]");
    return b;
}

static mge_status reshape_infer(const mge_node *n, const mge_tdesc *x, mge_tdesc *out, mge_error *err)
{
    const mge_attr *a = mge_node_attr(n, MGE_KEY_shape);
    char bx[96], bs[160];
    mge_tdesc_str(x, bx, sizeof bx);
    if (!a)
        return mge_error_set(err, MGE_ERR_INVALID, "reshape: needs attribute 'shape'");
    ints_str(a, bs, sizeof bs);
    int64_t nx, known = 1;
    mge_status st = mge_shape_numel(x->ndim, x->dims, x->dtype, &nx, NULL, err);
    if (st)
        return st;
    int infer = -1;
    out->dtype = x->dtype;
    out->ndim = a->n;
    for (int i = 0; i < a->n; i++) {
        int64_t v = a->i[i];
        if (v == 0) {
            if (i >= x->ndim)
                return mge_error_set(err, MGE_ERR_INVALID,
                                     "reshape: shape=%s: 0 at position %d copies an input dim, but x %s has rank %d",
                                     bs, i, bx, x->ndim);
            v = x->dims[i];
        } else if (v == -1) {
            if (infer >= 0)
                return mge_error_set(err, MGE_ERR_INVALID, "reshape: shape=%s: expected at most one -1", bs);
            infer = i;
            out->dims[i] = 1;
            continue;
        } else if (v < 0) {
            return mge_error_set(err, MGE_ERR_INVALID, "reshape: shape=%s: expected dims >= -1", bs);
        }
        out->dims[i] = v;
    }
    if ((st = mge_shape_numel(out->ndim, out->dims, out->dtype, &known, NULL, err)))
        return st;
    if (infer >= 0) {
        if (known == 0 || nx % known)
            return mge_error_set(err, MGE_ERR_SHAPE,
                                 "reshape: x %s (%lld elements) cannot take shape=%s: %lld is not a multiple of %lld",
                                 bx, (long long)nx, bs, (long long)nx, (long long)known);
        out->dims[infer] = nx / known;
        known = nx;
    }
    if (known != nx) {
        char bo[96];
        return mge_error_set(err, MGE_ERR_SHAPE,
                             "reshape: x %s has %lld elements but shape=%s gives %s with %lld: expected equal counts",
                             bx, (long long)nx, bs, mge_tdesc_str(out, bo, sizeof bo), (long long)known);
    }
    return MGE_OK;
}

static mge_status flatten_infer(const mge_node *n, const mge_tdesc *x, mge_tdesc *out, mge_error *err)
{
    int64_t v = mge_node_int(n, MGE_KEY_start, 1);
    int st = mge_axis(v, x->ndim);
    char bx[96];
    if (st < 0)
        return mge_error_set(err, MGE_ERR_INVALID, "flatten: start=%lld is out of range for x %s (rank %d)",
                             (long long)v, mge_tdesc_str(x, bx, sizeof bx), x->ndim);
    int64_t rest;
    mge_status s = mge_shape_numel(x->ndim - st, &x->dims[st], x->dtype, &rest, NULL, err);
    if (s)
        return s;
    *out = *x;
    out->ndim = st + 1;
    out->dims[st] = rest;
    return MGE_OK;
}

static mge_status transpose_infer(const mge_node *n, const mge_tdesc *x, mge_tdesc *out, mge_error *err)
{
    const mge_attr *a = mge_node_attr(n, MGE_KEY_perm);
    char bx[96], bp[160];
    mge_tdesc_str(x, bx, sizeof bx);
    if (!a)
        return mge_error_set(err, MGE_ERR_INVALID, "transpose: needs attribute 'perm'");
    ints_str(a, bp, sizeof bp);
    if (a->n != x->ndim)
        return mge_error_set(err, MGE_ERR_INVALID, "transpose: perm=%s has %d entries but x %s has rank %d", bp,
                             a->n, bx, x->ndim);
    char seen[MGE_MAX_DIMS] = {0};
    *out = *x;
    for (int i = 0; i < a->n; i++) {
        int k = mge_axis(a->i[i], x->ndim);
        if (k < 0 || seen[k])
            return mge_error_set(err, MGE_ERR_INVALID, "transpose: perm=%s: expected a permutation of 0..%d", bp,
                                 x->ndim - 1);
        seen[k] = 1;
        out->dims[i] = x->dims[k];
    }
    return MGE_OK;
}

static mge_status concat_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    const mge_tdesc *x = &in[0];
    const mge_attr *a = mge_node_attr(n, MGE_KEY_axis);
    int64_t v = a ? a->i[0] : 0;
    char b0[96], bi[96];
    mge_tdesc_str(x, b0, sizeof b0);
    if (a && a->n != 1)
        return mge_error_set(err, MGE_ERR_INVALID, "concat: axis has %d values: expected one", a->n);
    int ax = mge_axis(v, x->ndim);
    if (ax < 0)
        return mge_error_set(err, MGE_ERR_INVALID, "concat: axis=%lld is out of range for %s (rank %d)",
                             (long long)v, b0, x->ndim);
    *out = *x;
    for (int k = 1; k < n->nin; k++) {
        const mge_tdesc *y = &in[k];
        int ok = y->dtype == x->dtype && y->ndim == x->ndim;
        for (int i = 0; ok && i < x->ndim; i++)
            ok = i == ax || y->dims[i] == x->dims[i];
        if (!ok)
            return mge_error_set(err, MGE_ERR_SHAPE,
                                 "concat: input %d is %s but input 0 is %s: expected the same dtype, rank and dims "
                                 "except along axis %d",
                                 k, mge_tdesc_str(y, bi, sizeof bi), b0, ax);
        if (y->dims[ax] < 0 || out->dims[ax] > INT64_MAX / 2 - y->dims[ax])
            return mge_error_set(err, MGE_ERR_SHAPE, "concat: dims along axis %d overflow", ax);
        out->dims[ax] += y->dims[ax];
    }
    return MGE_OK;
}

/* Python's slice.indices() for step > 0: clamps start/end into [0, len]. */
static int64_t clamp_index(int64_t i, int64_t len)
{
    if (i < 0) {
        i += len;
        if (i < 0)
            i = 0;
    } else if (i > len) {
        i = len;
    }
    return i;
}

static mge_status slice_infer(const mge_node *n, const mge_tdesc *x, mge_tdesc *out, mge_error *err)
{
    const mge_attr *a = mge_node_attr(n, MGE_KEY_axis);
    char bx[96];
    mge_tdesc_str(x, bx, sizeof bx);
    if (!a)
        return mge_error_set(err, MGE_ERR_INVALID, "slice: needs attribute 'axis'");
    if (a->n != 1)
        return mge_error_set(err, MGE_ERR_INVALID, "slice: axis has %d values: expected one", a->n);
    int ax = mge_axis(a->i[0], x->ndim);
    if (ax < 0)
        return mge_error_set(err, MGE_ERR_INVALID, "slice: axis=%lld is out of range for x %s (rank %d)",
                             (long long)a->i[0], bx, x->ndim);
    int64_t step = mge_node_int(n, MGE_KEY_step, 1);
    if (step < 1)
        return mge_error_set(err, MGE_ERR_INVALID, "slice: step=%lld: expected step >= 1", (long long)step);
    int64_t len = x->dims[ax];
    int64_t s = clamp_index(mge_node_int(n, MGE_KEY_start, 0), len);
    const mge_attr *e = mge_node_attr(n, MGE_KEY_end);
    int64_t en = e ? clamp_index(e->i[0], len) : len;
    *out = *x;
    out->dims[ax] = en > s ? (en - s - 1) / step + 1 : 0;
    return MGE_OK;
}

static mge_status reshape_as_infer(const mge_tdesc *dy, const mge_tdesc *x, mge_tdesc *out, mge_error *err)
{
    int64_t nd, nx;
    mge_status s;
    if ((s = mge_shape_numel(dy->ndim, dy->dims, dy->dtype, &nd, NULL, err)) ||
        (s = mge_shape_numel(x->ndim, x->dims, x->dtype, &nx, NULL, err)))
        return s;
    if (dy->dtype != x->dtype || nd != nx) {
        char bd[96], bx[96];
        return mge_error_set(err, MGE_ERR_SHAPE, "reshape_as: dy %s cannot take the shape of x %s: expected the same "
                             "dtype and element count", mge_tdesc_str(dy, bd, sizeof bd), mge_tdesc_str(x, bx, sizeof bx));
    }
    *out = *x;
    return MGE_OK;
}

static mge_status slice_grad_infer(const mge_node *n, const mge_tdesc *dy, const mge_tdesc *x, mge_tdesc *out,
                                   mge_error *err)
{
    mge_tdesc y;
    mge_status s = slice_infer(n, x, &y, err);
    if (s)
        return s;
    int ok = dy->dtype == y.dtype && dy->ndim == y.ndim;
    for (int i = 0; ok && i < y.ndim; i++)
        ok = dy->dims[i] == y.dims[i];
    if (!ok) {
        char bd[96], by[96];
        return mge_error_set(err, MGE_ERR_SHAPE, "slice_grad: dy is %s: expected %s (the slice of x)",
                             mge_tdesc_str(dy, bd, sizeof bd), mge_tdesc_str(&y, by, sizeof by));
    }
    *out = *x;
    return MGE_OK;
}

mge_status mge_shape_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    switch (n->op) {
    case MGE_OP_RESHAPE: return reshape_infer(n, &in[0], out, err);
    case MGE_OP_FLATTEN: return flatten_infer(n, &in[0], out, err);
    case MGE_OP_TRANSPOSE: return transpose_infer(n, &in[0], out, err);
    case MGE_OP_CONCAT: return concat_infer(n, in, out, err);
    case MGE_OP_SLICE: return slice_infer(n, &in[0], out, err);
    case MGE_OP_RESHAPE_AS: return reshape_as_infer(&in[0], &in[1], out, err);
    case MGE_OP_SLICE_GRAD: return slice_grad_infer(n, &in[0], &in[1], out, err);
    case MGE_OP_COPY: *out = in[0]; return MGE_OK;
    }
    return mge_error_set(err, MGE_ERR_INVALID, "op %d is not a shape op", n->op);
}

double mge_shape_flops(const mge_node *n, const mge_tdesc *in, const mge_tdesc *out)
{
    return 0;
}
