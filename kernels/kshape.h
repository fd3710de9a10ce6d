/* kshape.h — the index arithmetic of the shape ops that both their
 * inference (lib/op_shape.c, from values known at plan time) and their
 * kernels (kernels/ref, kernels/cpu, from the tensors) need, header only
 * like kshared.h, so the two can never disagree on a bound.
 *
 * slice: ONNX Slice (and Python slicing): per sliced axis a start, end and
 * step (step != 0); negative start/end count from the end; then for step
 * > 0 both clamp to [0, dim], for step < 0 start clamps to [0, dim-1] and
 * end to [-1, dim-1]; len = max(0, ceil((end - start) / step)). Axes not
 * named keep start 0, step 1, len dim. */
#ifndef MGE_KSHAPE_H
#define MGE_KSHAPE_H

#include "kshared.h"

#include <math.h>
#include <string.h>

/* A bound given as a double (known values) as an int64: the ONNX
 * sentinels INT64_MAX / INT64_MIN do not fit a double exactly, and
 * anything past +-2^62 clamps the same as they do. */
static inline int64_t mge_kval_int(double v)
{
    if (v != v)
        return 0;
    if (v >= 4611686018427387904.0)
        return INT64_MAX;
    if (v <= -4611686018427387904.0)
        return INT64_MIN;
    return (int64_t)v;
}

typedef struct mge_slice_plan {
    int nd;
    int64_t dim[MGE_MAX_DIMS], start[MGE_MAX_DIMS], step[MGE_MAX_DIMS], len[MGE_MAX_DIMS];
} mge_slice_plan;

/* Resolves nax (start, end, axis, step) entries against dims[0..nd) into
 * *p; steps NULL means 1 each, axes NULL means 0..nax-1. name prefixes the
 * messages (an axis out of range or given twice, a zero step). */
static inline mge_status mge_slice_resolve(const char *name, int nd, const int64_t *dims, int nax,
                                           const int64_t *starts, const int64_t *ends, const int64_t *axes,
                                           const int64_t *steps, mge_slice_plan *p, mge_error *err)
{
    char seen[MGE_MAX_DIMS] = {0};
    p->nd = nd;
    for (int d = 0; d < nd; d++)
        p->dim[d] = p->len[d] = dims[d], p->start[d] = 0, p->step[d] = 1;
    if (nax > nd)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: %d sliced axes for an input of rank %d", name, nax, nd);
    for (int i = 0; i < nax; i++) {
        int64_t av = axes ? axes[i] : i, step = steps ? steps[i] : 1;
        int ax = mge_axis(av, nd);
        if (ax < 0)
            return mge_error_set(err, MGE_ERR_INVALID, "%s: axis %lld (entry %d) is out of range for rank %d", name,
                                 (long long)av, i, nd);
        if (seen[ax])
            return mge_error_set(err, MGE_ERR_INVALID, "%s: axis %d is sliced twice", name, ax);
        seen[ax] = 1;
        if (step == 0)
            return mge_error_set(err, MGE_ERR_INVALID, "%s: step 0 (entry %d): expected a nonzero step", name, i);
        int64_t dim = dims[ax], s = starts[i], e = ends[i];
        if (s < 0)
            s = s == INT64_MIN ? -1 - dim : s + dim;
        if (e < 0)
            e = e == INT64_MIN ? -1 - dim : e + dim;
        int64_t elo = step > 0 ? 0 : -1, hi = step > 0 ? dim : dim - 1;
        s = s < 0 ? 0 : s > hi ? hi : s;
        e = e < elo ? elo : e > hi ? hi : e;
        int64_t len;
        if (step > 0)
            len = e > s ? (e - s - 1) / step + 1 : 0;
        else
            len = s > e ? (s - e - 1) / -step + 1 : 0;
        p->start[ax] = len ? s : 0;
        p->step[ax] = step;
        p->len[ax] = len;
    }
    return MGE_OK;
}

/* slice's attribute form: one axis (attribute axis), start, end (absent:
 * to the end in the step's direction), step; 0 and *p filled, or an error. */
static inline mge_status mge_slice_from_attrs(const char *name, const mge_node *n, int nd, const int64_t *dims,
                                              mge_slice_plan *p, mge_error *err)
{
    const mge_attr *a = mge_node_attr(n, MGE_KEY_axis);
    if (!a || a->n != 1)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: needs one 'axis' attribute (or the starts and ends inputs)",
                             name);
    int64_t step = mge_node_int(n, MGE_KEY_step, 1), start = mge_node_int(n, MGE_KEY_start, 0);
    int64_t end = mge_node_attr(n, MGE_KEY_end) ? mge_node_int(n, MGE_KEY_end, 0) : step < 0 ? INT64_MIN : INT64_MAX;
    int64_t ax = a->i[0];
    return mge_slice_resolve(name, nd, dims, 1, &start, &end, &ax, &step, p, err);
}

/* shape's start/end attributes against rank nd (ONNX Shape: negative
 * counts from the end, both clamp to [0, nd]); the count, into [*s, *e). */
static inline int mge_shape_span(const mge_node *n, int nd, int *s, int *e)
{
    int64_t a = mge_node_int(n, MGE_KEY_start, 0);
    int64_t b = mge_node_attr(n, MGE_KEY_end) ? mge_node_int(n, MGE_KEY_end, nd) : nd;
    a = a < 0 ? a + nd : a;
    b = b < 0 ? b + nd : b;
    a = a < 0 ? 0 : a > nd ? nd : a;
    b = b < 0 ? 0 : b > nd ? nd : b;
    *s = (int)a;
    *e = (int)(b > a ? b : a);
    return *e - *s;
}

/* range's length from start, limit, delta (ONNX Range: max(ceil((limit -
 * start) / delta), 0)); -1 when delta is 0 or the length is absurd. */
static inline int64_t mge_range_len(int is_int, double start, double limit, double delta)
{
    const double big = 4611686018427387904.0; /* 2^62: no overflow below */
    if (delta == 0 || !(fabs(start) < big && fabs(limit) < big && fabs(delta) < big))
        return -1;
    double n;
    if (is_int) {
        /* exact in integers: the doubles hold integers */
        int64_t a = (int64_t)start, b = (int64_t)limit, d = (int64_t)delta;
        int64_t span = b - a;
        if ((d > 0 && span <= 0) || (d < 0 && span >= 0))
            return 0;
        return d > 0 ? (span + d - 1) / d : (-span + -d - 1) / -d;
    }
    n = ceil((limit - start) / delta);
    if (!(n <= 4e18))
        return -1;
    return n > 0 ? (int64_t)n : 0;
}

/* The element offset in the full tensor of slice element idx (row-major). */
static inline int64_t mge_slice_offset(const mge_slice_plan *p, const int64_t *idx)
{
    int64_t off = 0;
    for (int d = 0; d < p->nd; d++)
        off = off * p->dim[d] + p->start[d] + idx[d] * p->step[d];
    return off;
}

/* expand: numpy broadcasting of x's dims with a target shape s (ONNX
 * Expand: a 1 on either side takes the other's dim); 0 when they do not
 * broadcast. */
static inline int mge_expand_dims(int xnd, const int64_t *xd, int snd, const int64_t *sd, int *ond, int64_t *od)
{
    int nd = xnd > snd ? xnd : snd;
    if (nd > MGE_MAX_DIMS)
        return 0;
    for (int i = 0; i < nd; i++) {
        int64_t a = i - (nd - xnd) >= 0 ? xd[i - (nd - xnd)] : 1;
        int64_t b = i - (nd - snd) >= 0 ? sd[i - (nd - snd)] : 1;
        if (a != b && a != 1 && b != 1)
            return 0;
        od[i] = a == 1 ? b : a;
    }
    *ond = nd;
    return 1;
}

/* ---- for the kernels: the same lists read from tensors. */

/* An integer vector (or scalar) tensor of at most max entries into v[*cnt]. */
static inline mge_status mge_kshape_ints(const char *op, const char *what, const mge_tensor *t, int max, int64_t *v,
                                         int *cnt, mge_error *err)
{
    int64_t m = 1;
    for (int d = 0; d < t->ndim && t->ndim <= 1; d++)
        m *= t->dims[d];
    if ((t->dtype != MGE_I64 && t->dtype != MGE_I32) || t->ndim > 1 || m < 0 || m > max)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: %s is %s of rank %d: expected an i64 or i32 vector of at most %d",
                             op, what, mge_dtype_name(t->dtype), t->ndim, max);
    if (m && (!t->data || t->nbytes < (size_t)m * mge_dtype_size(t->dtype)))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: %s lacks its data", op, what);
    for (int64_t i = 0; i < m; i++)
        v[i] = t->dtype == MGE_I64 ? ((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i];
    *cnt = (int)m;
    return MGE_OK;
}

/* The list of expand (shape), tile (repeats), split (sizes): input 1 when
 * given, else the attribute; *cnt -1 when neither. */
static inline mge_status mge_kshape_list(const char *op, const mge_node *n, mge_tensor *const *in, int key,
                                         const char *what, int64_t *v, int *cnt, mge_error *err)
{
    if (n->nin > 1)
        return mge_kshape_ints(op, what, in[1], MGE_MAX_DIMS, v, cnt, err);
    const mge_attr *a = mge_node_attr(n, key);
    *cnt = a ? a->n : -1;
    if (a)
        memcpy(v, a->i, sizeof(int64_t) * (size_t)a->n);
    return MGE_OK;
}

/* slice's (and slice_grad's) plan for x from the attributes or from the
 * bound tensors in[base..nin). */
static inline mge_status mge_kshape_slice_plan(const char *op, const mge_node *n, mge_tensor *const *in, int base,
                                               const mge_tensor *x, mge_slice_plan *p, mge_error *err)
{
    int nb = n->nin - base;
    if (nb == 0)
        return mge_slice_from_attrs(op, n, x->ndim, x->dims, p, err);
    static const char *const what[4] = {"starts", "ends", "axes", "steps"};
    int64_t v[4][MGE_MAX_DIMS];
    int cnt[4] = {0};
    if (nb < 2 || nb > 4)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: %d bound inputs: expected starts, ends[, axes[, steps]]", op,
                             nb);
    for (int k = 0; k < nb; k++) {
        mge_status st = mge_kshape_ints(op, what[k], in[base + k], MGE_MAX_DIMS, v[k], &cnt[k], err);
        if (st)
            return st;
        if (cnt[k] != cnt[0])
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: %s has %d entries, starts %d", op, what[k], cnt[k], cnt[0]);
    }
    return mge_slice_resolve(op, x->ndim, x->dims, cnt[0], v[0], v[1], nb > 2 ? v[2] : NULL, nb > 3 ? v[3] : NULL, p,
                             err);
}

/* expand's (tile 0) or tile's output dims for x and the list v[cnt]. */
static inline mge_status mge_kshape_out_dims(const char *op, int tile, const mge_tensor *x, const int64_t *v, int cnt,
                                             int *nd, int64_t *yd, mge_error *err)
{
    int ok = cnt >= 0;
    *nd = x->ndim;
    if (ok && tile) {
        ok = cnt == x->ndim;
        for (int d = 0; ok && d < x->ndim; d++) {
            ok = v[d] >= 0 && (!x->dims[d] || v[d] <= INT64_MAX / 4 / x->dims[d]);
            yd[d] = x->dims[d] * v[d];
        }
    } else if (ok) {
        for (int d = 0; ok && d < cnt; d++)
            ok = v[d] >= 0;
        ok = ok && mge_expand_dims(x->ndim, x->dims, cnt, v, nd, yd);
    }
    if (!ok)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x of rank %d cannot take these %s", op, x->ndim,
                             tile ? "repeats" : "shape");
    return MGE_OK;
}

#endif
