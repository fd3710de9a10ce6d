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
 * The dynamic shape ops (shape, size, expand, tile, squeeze, unsqueeze,
 * split, range, constant_of_shape; ops.def says what each computes) and
 * the input forms of reshape and slice read their shape, axes, bounds or
 * repeats from integer inputs known at plan time (mge_tdesc.val). Every
 * op here whose output is small and computable from known inputs
 * computes it too (out->known), so shape arithmetic chains through.
 * FLOPs: 0 (data movement). */
#include "internal.h"
#include "kshape.h"

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

/* "[2,-1,0]" of n numbers into b. */
static const char *vec_str(int n, const int64_t *v, char *b, size_t sz)
{
    mge_attr a;
    memset(&a, 0, sizeof a);
    a.n = n > MGE_MAX_DIMS * 2 ? MGE_MAX_DIMS * 2 : n;
    memcpy(a.i, v, sizeof(int64_t) * (size_t)a.n);
    return ints_str(&a, b, sz);
}

/* Input k of op, an integer vector (or scalar) of at most maxn entries
 * whose values are known at plan time, into v[*cnt]. what names it. */
static mge_status known_ints(const char *op, const char *what, const mge_tdesc *in, int k, int maxn, int64_t *v,
                             int *cnt, mge_error *err)
{
    const mge_tdesc *d = &in[k];
    char b[96];
    if ((d->dtype != MGE_I64 && d->dtype != MGE_I32) || d->ndim > 1)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: its %s input (input %d) is %s: expected an i64 or i32 vector",
                             op, what, k, mge_tdesc_str(d, b, sizeof b));
    int64_t m = d->ndim ? d->dims[0] : 1;
    if (m > maxn)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: its %s input (input %d) has %lld entries: expected at most %d",
                             op, what, k, (long long)m, maxn);
    if (!d->known)
        return mge_error_set(err, MGE_ERR_UNSUPPORTED,
                             "%s: its %s input (input %d) depends on data, not only on shapes and constants: not "
                             "supported",
                             op, what, k);
    for (int i = 0; i < m; i++)
        v[i] = mge_kval_int(d->val[i]);
    *cnt = (int)m;
    return MGE_OK;
}

/* The op's integer list: from input k when the node has it, else from
 * attribute key (absent: *cnt = -1). Both given is an error. */
static mge_status ints_arg(const mge_node *n, const char *op, const char *what, int key, const mge_tdesc *in, int k,
                           int maxn, int64_t *v, int *cnt, mge_error *err)
{
    const mge_attr *a = mge_node_attr(n, key);
    if (n->nin > k) {
        if (a)
            return mge_error_set(err, MGE_ERR_INVALID, "%s: %s given both as attribute '%s' and as input %d", op,
                                 what, mge_key_name(key), k);
        return known_ints(op, what, in, k, maxn, v, cnt, err);
    }
    *cnt = -1;
    if (!a)
        return MGE_OK;
    if (a->n > maxn)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: %s=... has %d entries: expected at most %d", op,
                             mge_key_name(key), a->n, maxn);
    memcpy(v, a->i, sizeof(int64_t) * (size_t)a->n);
    *cnt = a->n;
    return MGE_OK;
}

/* out keeps the values of x in the same order (views, copies). */
static void known_same(const mge_tdesc *x, mge_tdesc *out)
{
    out->known = 0;
    if (x->known && mge_tdesc_numel(out) <= MGE_TDESC_NVAL) {
        out->known = 1;
        memcpy(out->val, x->val, sizeof out->val);
    }
}

/* out's values, each taken from x's element at src(i) (out numel <= NVAL). */
typedef int64_t (*src_fn)(const void *arg, const int64_t *idx);
static void known_gather(const mge_tdesc *x, mge_tdesc *out, src_fn src, const void *arg)
{
    out->known = 0;
    int64_t m = mge_tdesc_numel(out);
    if (!x->known || m < 0 || m > MGE_TDESC_NVAL)
        return;
    int64_t idx[MGE_MAX_DIMS] = {0};
    for (int64_t i = 0; i < m; i++) {
        int64_t j = src(arg, idx);
        if (j < 0 || j >= MGE_TDESC_NVAL)
            return;
        out->val[i] = x->val[j];
        for (int d = out->ndim - 1; d >= 0 && ++idx[d] == out->dims[d]; d--)
            idx[d] = 0;
    }
    out->known = 1;
}

static mge_status reshape_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    const mge_tdesc *x = &in[0];
    int64_t sv[MGE_MAX_DIMS];
    int ns;
    char bx[96], bs[160];
    mge_tdesc_str(x, bx, sizeof bx);
    mge_status st = ints_arg(n, "reshape", "shape", MGE_KEY_shape, in, 1, MGE_MAX_DIMS, sv, &ns, err);
    if (st)
        return st;
    if (ns < 0)
        return mge_error_set(err, MGE_ERR_INVALID, "reshape: needs attribute 'shape' or a shape input");
    vec_str(ns, sv, bs, sizeof bs);
    int64_t nx, known = 1;
    if ((st = mge_shape_numel(x->ndim, x->dims, x->dtype, &nx, NULL, err)))
        return st;
    int infer = -1;
    out->dtype = x->dtype;
    out->ndim = ns;
    for (int i = 0; i < ns; i++) {
        int64_t v = sv[i];
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
                                 "reshape: x has %lld elements (%s) but the shape %s cannot hold them: %lld is not a "
                                 "multiple of %lld",
                                 (long long)nx, bx, bs, (long long)nx, (long long)known);
        out->dims[infer] = nx / known;
        known = nx;
    }
    if (known != nx)
        return mge_error_set(err, MGE_ERR_SHAPE, "reshape: x has %lld elements (%s) but the shape %s holds %lld",
                             (long long)nx, bx, bs, (long long)known);
    known_same(x, out);
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
    known_same(x, out);
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
    out->known = 0; /* the values move: not worth tracking */
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
    /* shape vectors: the values in order, row by row */
    out->known = 0;
    int64_t m = mge_tdesc_numel(out), outer = 1, inner = 1, at = 0;
    int all = m >= 0 && m <= MGE_TDESC_NVAL;
    for (int k = 0; k < n->nin && all; k++)
        all = in[k].known;
    if (!all)
        return MGE_OK;
    for (int d = 0; d < ax; d++)
        outer *= out->dims[d];
    for (int d = ax + 1; d < out->ndim; d++)
        inner *= out->dims[d];
    for (int64_t o = 0; o < outer; o++)
        for (int k = 0; k < n->nin; k++) {
            int64_t row = in[k].dims[ax] * inner;
            for (int64_t j = 0; j < row; j++)
                out->val[at++] = in[k].val[o * row + j];
        }
    out->known = 1;
    return MGE_OK;
}

/* slice's plan for x from the attributes (bounds = NULL) or from the
 * bound descs (starts, ends[, axes[, steps]]; nb of them). */
static mge_status slice_plan(const mge_node *n, const char *op, const mge_tdesc *in, int base, mge_slice_plan *p,
                             mge_error *err)
{
    const mge_tdesc *x = &in[base - 1];
    int nb = n->nin - base;
    if (nb == 0)
        return mge_slice_from_attrs(op, n, x->ndim, x->dims, p, err);
    if (nb < 2)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: takes the starts and ends inputs together", op);
    static const char *const what[4] = {"starts", "ends", "axes", "steps"};
    int64_t v[4][MGE_MAX_DIMS];
    int cnt[4] = {0};
    for (int k = 0; k < nb; k++) {
        mge_status st = known_ints(op, what[k], in, base + k, MGE_MAX_DIMS, v[k], &cnt[k], err);
        if (st)
            return st;
        if (k && cnt[k] != cnt[0])
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: %s has %d entries but starts has %d: expected equal counts",
                                 op, what[k], cnt[k], cnt[0]);
    }
    return mge_slice_resolve(op, x->ndim, x->dims, cnt[0], v[0], v[1], nb > 2 ? v[2] : NULL, nb > 3 ? v[3] : NULL, p,
                             err);
}

static int64_t slice_src(const void *arg, const int64_t *idx)
{
    return mge_slice_offset(arg, idx);
}

static mge_status slice_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    const mge_tdesc *x = &in[0];
    mge_slice_plan p;
    mge_status st = slice_plan(n, "slice", in, 1, &p, err);
    if (st)
        return st;
    *out = *x;
    for (int d = 0; d < x->ndim; d++)
        out->dims[d] = p.len[d];
    known_gather(x, out, slice_src, &p);
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
    known_same(dy, out);
    return MGE_OK;
}

static mge_status slice_grad_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    const mge_tdesc *dy = &in[0], *x = &in[1];
    mge_tdesc y = *x;
    mge_slice_plan p;
    mge_status s = slice_plan(n, "slice_grad", in, 2, &p, err);
    if (s)
        return s;
    for (int d = 0; d < x->ndim; d++)
        y.dims[d] = p.len[d];
    int ok = dy->dtype == y.dtype && dy->ndim == y.ndim;
    for (int i = 0; ok && i < y.ndim; i++)
        ok = dy->dims[i] == y.dims[i];
    if (!ok) {
        char bd[96], by[96];
        return mge_error_set(err, MGE_ERR_SHAPE, "slice_grad: dy is %s: expected %s (the slice of x)",
                             mge_tdesc_str(dy, bd, sizeof bd), mge_tdesc_str(&y, by, sizeof by));
    }
    *out = *x;
    out->known = 0;
    return MGE_OK;
}

/* ---------------------------------------------------------------- dynamic shapes */

static mge_status shape_infer(const mge_node *n, const mge_tdesc *x, mge_tdesc *out)
{
    int a, b, k = mge_shape_span(n, x->ndim, &a, &b);
    out->dtype = MGE_I64;
    out->ndim = 1;
    out->dims[0] = k;
    out->known = 1;
    for (int i = 0; i < k; i++)
        out->val[i] = (double)x->dims[a + i];
    return MGE_OK;
}

static mge_status size_infer(const mge_tdesc *x, mge_tdesc *out, mge_error *err)
{
    int64_t m;
    mge_status st = mge_shape_numel(x->ndim, x->dims, x->dtype, &m, NULL, err);
    if (st)
        return st;
    out->dtype = MGE_I64;
    out->ndim = 0;
    out->known = 1;
    out->val[0] = (double)m;
    return MGE_OK;
}

/* expand and tile: out index -> x index */
typedef struct bcast_map {
    int nd, xnd;
    const int64_t *xd;
} bcast_map;

static int64_t expand_src(const void *arg, const int64_t *idx)
{
    const bcast_map *m = arg;
    int64_t off = 0;
    for (int d = 0; d < m->xnd; d++) {
        int64_t i = idx[d + m->nd - m->xnd];
        off = off * m->xd[d] + (m->xd[d] == 1 ? 0 : i);
    }
    return off;
}

static int64_t tile_src(const void *arg, const int64_t *idx)
{
    const bcast_map *m = arg;
    int64_t off = 0;
    for (int d = 0; d < m->xnd; d++)
        off = off * m->xd[d] + (m->xd[d] ? idx[d] % m->xd[d] : 0);
    return off;
}

static mge_status expand_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    const mge_tdesc *x = &in[0];
    int64_t sv[MGE_MAX_DIMS];
    int ns;
    mge_status st = ints_arg(n, "expand", "shape", MGE_KEY_shape, in, 1, MGE_MAX_DIMS, sv, &ns, err);
    if (st)
        return st;
    if (ns < 0)
        return mge_error_set(err, MGE_ERR_INVALID, "expand: needs attribute 'shape' or a shape input");
    for (int i = 0; i < ns; i++)
        if (sv[i] < 0) {
            char bs[160];
            return mge_error_set(err, MGE_ERR_SHAPE, "expand: the shape %s has a negative dim",
                                 vec_str(ns, sv, bs, sizeof bs));
        }
    *out = *x;
    if (!mge_expand_dims(x->ndim, x->dims, ns, sv, &out->ndim, out->dims)) {
        char bx[96], bs[160];
        return mge_error_set(err, MGE_ERR_SHAPE, "expand: x %s does not broadcast to the shape %s",
                             mge_tdesc_str(x, bx, sizeof bx), vec_str(ns, sv, bs, sizeof bs));
    }
    bcast_map m = {out->ndim, x->ndim, x->dims};
    known_gather(x, out, expand_src, &m);
    return MGE_OK;
}

static mge_status tile_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    const mge_tdesc *x = &in[0];
    int64_t rv[MGE_MAX_DIMS];
    int nr;
    char bx[96], br[160];
    mge_status st = ints_arg(n, "tile", "repeats", MGE_KEY_repeats, in, 1, MGE_MAX_DIMS, rv, &nr, err);
    if (st)
        return st;
    if (nr < 0)
        return mge_error_set(err, MGE_ERR_INVALID, "tile: needs attribute 'repeats' or a repeats input");
    mge_tdesc_str(x, bx, sizeof bx);
    vec_str(nr, rv, br, sizeof br);
    if (nr != x->ndim)
        return mge_error_set(err, MGE_ERR_SHAPE, "tile: repeats %s has %d entries but x %s has rank %d", br, nr, bx,
                             x->ndim);
    *out = *x;
    for (int d = 0; d < nr; d++) {
        if (rv[d] < 0)
            return mge_error_set(err, MGE_ERR_SHAPE, "tile: repeats %s: expected counts >= 0", br);
        if (x->dims[d] && rv[d] > INT64_MAX / 4 / x->dims[d])
            return mge_error_set(err, MGE_ERR_SHAPE, "tile: x %s repeated %s overflows", bx, br);
        out->dims[d] = x->dims[d] * rv[d];
    }
    int64_t m;
    if ((st = mge_shape_numel(out->ndim, out->dims, out->dtype, &m, NULL, err)))
        return st;
    bcast_map bm = {out->ndim, x->ndim, x->dims};
    known_gather(x, out, tile_src, &bm);
    return MGE_OK;
}

static mge_status tile_grad_infer(const mge_tdesc *dy, const mge_tdesc *x, mge_tdesc *out, mge_error *err)
{
    int ok = dy->dtype == x->dtype && dy->ndim == x->ndim;
    for (int d = 0; ok && d < x->ndim; d++)
        ok = x->dims[d] ? dy->dims[d] % x->dims[d] == 0 : dy->dims[d] == 0;
    if (!ok) {
        char bd[96], bx[96];
        return mge_error_set(err, MGE_ERR_SHAPE, "tile_grad: dy %s is not a tiling of x %s",
                             mge_tdesc_str(dy, bd, sizeof bd), mge_tdesc_str(x, bx, sizeof bx));
    }
    *out = *x;
    out->known = 0;
    return MGE_OK;
}

static mge_status squeeze_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    const mge_tdesc *x = &in[0];
    int unsq = n->op == MGE_OP_UNSQUEEZE;
    const char *op = unsq ? "unsqueeze" : "squeeze";
    int64_t av[MGE_MAX_DIMS];
    int na;
    char bx[96], ba[160];
    mge_status st = ints_arg(n, op, "axes", MGE_KEY_axis, in, 1, MGE_MAX_DIMS, av, &na, err);
    if (st)
        return st;
    mge_tdesc_str(x, bx, sizeof bx);
    int rank = unsq ? x->ndim + (na < 0 ? 0 : na) : x->ndim;
    char mark[MGE_MAX_DIMS] = {0};
    if (unsq && na < 0)
        return mge_error_set(err, MGE_ERR_INVALID, "unsqueeze: needs attribute 'axis' or an axes input");
    if (rank > MGE_MAX_DIMS)
        return mge_error_set(err, MGE_ERR_SHAPE, "unsqueeze: x %s with %d more dims exceeds rank %d", bx, na,
                             MGE_MAX_DIMS);
    for (int i = 0; i < na; i++) {
        int a = mge_axis(av[i], rank);
        if (a < 0 || mark[a])
            return mge_error_set(err, MGE_ERR_INVALID, "%s: axes %s: axis %lld is out of range for rank %d or repeated",
                                 op, vec_str(na, av, ba, sizeof ba), (long long)av[i], rank);
        if (!unsq && x->dims[a] != 1)
            return mge_error_set(err, MGE_ERR_SHAPE, "squeeze: axis %lld of x %s has size %lld: expected 1",
                                 (long long)av[i], bx, (long long)x->dims[a]);
        mark[a] = 1;
    }
    *out = *x;
    out->ndim = 0;
    for (int d = 0, j = 0; d < rank; d++) {
        if (unsq)
            out->dims[out->ndim++] = mark[d] ? 1 : x->dims[j++];
        else if (!(na < 0 ? x->dims[d] == 1 : mark[d]))
            out->dims[out->ndim++] = x->dims[d];
    }
    known_same(x, out);
    return MGE_OK;
}

/* split: the sizes along the axis (given, or ceil(dim / k) with the rest last). */
static mge_status split_sizes(const mge_node *n, const mge_tdesc *in, int *axp, int64_t *sz, mge_error *err)
{
    const mge_tdesc *x = &in[0];
    int64_t sv[4], k = n->nout;
    int ns;
    char bx[96], bs[160];
    mge_tdesc_str(x, bx, sizeof bx);
    int64_t av = mge_node_int(n, MGE_KEY_axis, 0);
    int ax = mge_axis(av, x->ndim);
    if (ax < 0)
        return mge_error_set(err, MGE_ERR_INVALID, "split: axis=%lld is out of range for x %s (rank %d)",
                             (long long)av, bx, x->ndim);
    mge_status st = ints_arg(n, "split", "sizes", MGE_KEY_sizes, in, 1, 4, sv, &ns, err);
    if (st)
        return st;
    int64_t dim = x->dims[ax], sum = 0;
    if (ns >= 0) {
        vec_str(ns, sv, bs, sizeof bs);
        if (ns != k)
            return mge_error_set(err, MGE_ERR_SHAPE, "split: sizes %s has %d entries for %lld outputs", bs, ns,
                                 (long long)k);
        for (int i = 0; i < ns; i++) {
            if (sv[i] < 0)
                return mge_error_set(err, MGE_ERR_SHAPE, "split: sizes %s: expected sizes >= 0", bs);
            sum += sv[i];
            sz[i] = sv[i];
        }
        if (sum != dim)
            return mge_error_set(err, MGE_ERR_SHAPE, "split: sizes %s add up to %lld but axis %d of x %s has %lld", bs,
                                 (long long)sum, ax, bx, (long long)dim);
    } else {
        int64_t c = (dim + k - 1) / k;
        if (c * (k - 1) > dim)
            return mge_error_set(err, MGE_ERR_SHAPE,
                                 "split: axis %d of x %s has %lld: too few for %lld parts of %lld (give sizes)", ax,
                                 bx, (long long)dim, (long long)k, (long long)c);
        for (int i = 0; i < k; i++)
            sz[i] = i + 1 < k ? c : dim - c * (k - 1);
    }
    *axp = ax;
    return MGE_OK;
}

typedef struct split_map {
    int ax;
    int64_t off;
    const int64_t *xd;
    int nd;
} split_map;

static int64_t split_src(const void *arg, const int64_t *idx)
{
    const split_map *m = arg;
    int64_t off = 0;
    for (int d = 0; d < m->nd; d++)
        off = off * m->xd[d] + idx[d] + (d == m->ax ? m->off : 0);
    return off;
}

static mge_status split_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    int64_t sz[4];
    int ax = 0;
    mge_status st = split_sizes(n, in, &ax, sz, err);
    if (st)
        return st;
    int64_t off = 0;
    for (int i = 0; i < n->nout; i++) {
        out[i] = in[0];
        out[i].dims[ax] = sz[i];
        split_map m = {ax, off, in[0].dims, in[0].ndim};
        known_gather(&in[0], &out[i], split_src, &m);
        off += sz[i];
    }
    return MGE_OK;
}

/* A scalar (or one-element) input's value, known at plan time. */
static mge_status known_scalar(const char *op, const char *what, const mge_tdesc *in, int k, double *v,
                               mge_error *err)
{
    const mge_tdesc *d = &in[k];
    char b[96];
    if (mge_tdesc_numel(d) != 1 || d->ndim > 1)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: %s (input %d) is %s: expected a scalar", op, what, k,
                             mge_tdesc_str(d, b, sizeof b));
    if (!d->known)
        return mge_error_set(err, MGE_ERR_UNSUPPORTED,
                             "%s: %s (input %d) depends on data, not only on shapes and constants: not supported", op,
                             what, k);
    *v = d->val[0];
    return MGE_OK;
}

static int range_dtype_ok(mge_dtype dt)
{
    return dt == MGE_F32 || dt == MGE_I32 || dt == MGE_I64;
}

static mge_status range_infer(const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    static const char *const what[3] = {"start", "limit", "delta"};
    double v[3];
    char b[96];
    for (int k = 0; k < 3; k++) {
        if (in[k].dtype != in[0].dtype || !range_dtype_ok(in[k].dtype))
            return mge_error_set(err, MGE_ERR_SHAPE, "range: %s is %s: expected f32, i32 or i64 like start", what[k],
                                 mge_tdesc_str(&in[k], b, sizeof b));
        mge_status st = known_scalar("range", what[k], in, k, &v[k], err);
        if (st)
            return st;
    }
    int64_t len = mge_range_len(in[0].dtype != MGE_F32, v[0], v[1], v[2]);
    if (len < 0)
        return mge_error_set(err, MGE_ERR_SHAPE, "range: start %g, limit %g, delta %g: expected a nonzero delta and "
                             "a finite length", v[0], v[1], v[2]);
    out->dtype = in[0].dtype;
    out->ndim = 1;
    out->dims[0] = len;
    if (len <= MGE_TDESC_NVAL) {
        out->known = 1;
        for (int64_t i = 0; i < len; i++) {
            double x = v[0] + (double)i * v[2];
            out->val[i] = in[0].dtype == MGE_F32 ? (double)(float)x : x;
        }
    }
    return MGE_OK;
}

/* constant_of_shape's value in its dtype, as the kernel stores it. */
static double cos_value(mge_dtype dt, double v)
{
    switch (dt) {
    case MGE_F32: return (float)v;
    case MGE_F16: return mge_f16_to_f32(mge_f32_to_f16((float)v));
    case MGE_BF16: return mge_bf16_to_f32(mge_f32_to_bf16((float)v));
    case MGE_BOOL: return v != 0;
    case MGE_I8: return (int8_t)(uint8_t)(uint64_t)mge_kval_int(v);
    case MGE_U8: return (uint8_t)(uint64_t)mge_kval_int(v);
    case MGE_I32: return (int32_t)(uint32_t)(uint64_t)mge_kval_int(v);
    case MGE_F64: return v;
    case MGE_I16: return (int16_t)(uint16_t)(uint64_t)mge_kval_int(v);
    case MGE_U16: return (uint16_t)(uint64_t)mge_kval_int(v);
    case MGE_U32: return (uint32_t)(uint64_t)mge_kval_int(v);
    case MGE_U64: return (double)(uint64_t)mge_kval_int(v);
    default: return (double)mge_kval_int(v);
    }
}

static mge_status constant_of_shape_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    int64_t sv[MGE_MAX_DIMS];
    int ns;
    char bs[160];
    mge_status st = known_ints("constant_of_shape", "shape", in, 0, MGE_MAX_DIMS, sv, &ns, err);
    if (st)
        return st;
    int64_t dt = mge_node_int(n, MGE_KEY_dtype, MGE_F32);
    if (dt < 0 || dt >= MGE_NDTYPES || dt == MGE_QS8 || dt == MGE_QS32)
        return mge_error_set(err, MGE_ERR_INVALID, "constant_of_shape: dtype %s: expected a plain dtype",
                             dt >= 0 && dt < MGE_NDTYPES ? mge_dtype_name((mge_dtype)dt) : "?");
    out->dtype = (mge_dtype)dt;
    out->ndim = ns;
    for (int i = 0; i < ns; i++) {
        if (sv[i] < 0)
            return mge_error_set(err, MGE_ERR_SHAPE, "constant_of_shape: the shape %s has a negative dim",
                                 vec_str(ns, sv, bs, sizeof bs));
        out->dims[i] = sv[i];
    }
    int64_t m;
    if ((st = mge_shape_numel(out->ndim, out->dims, out->dtype, &m, NULL, err)))
        return st;
    if (m <= MGE_TDESC_NVAL) {
        double v = cos_value(out->dtype, mge_node_float(n, MGE_KEY_value, 0));
        out->known = 1;
        for (int64_t i = 0; i < m; i++)
            out->val[i] = v;
    }
    return MGE_OK;
}

mge_status mge_shape_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    switch (n->op) {
    case MGE_OP_RESHAPE: return reshape_infer(n, in, out, err);
    case MGE_OP_FLATTEN: return flatten_infer(n, &in[0], out, err);
    case MGE_OP_TRANSPOSE: return transpose_infer(n, &in[0], out, err);
    case MGE_OP_CONCAT: return concat_infer(n, in, out, err);
    case MGE_OP_SLICE: return slice_infer(n, in, out, err);
    case MGE_OP_RESHAPE_AS: return reshape_as_infer(&in[0], &in[1], out, err);
    case MGE_OP_SLICE_GRAD: return slice_grad_infer(n, in, out, err);
    case MGE_OP_COPY: *out = in[0]; return MGE_OK;
    case MGE_OP_SHAPE: return shape_infer(n, &in[0], out);
    case MGE_OP_SIZE: return size_infer(&in[0], out, err);
    case MGE_OP_EXPAND: return expand_infer(n, in, out, err);
    case MGE_OP_TILE: return tile_infer(n, in, out, err);
    case MGE_OP_TILE_GRAD: return tile_grad_infer(&in[0], &in[1], out, err);
    case MGE_OP_SQUEEZE:
    case MGE_OP_UNSQUEEZE: return squeeze_infer(n, in, out, err);
    case MGE_OP_SPLIT: return split_infer(n, in, out, err);
    case MGE_OP_RANGE: return range_infer(in, out, err);
    case MGE_OP_CONSTANT_OF_SHAPE: return constant_of_shape_infer(n, in, out, err);
    }
    return mge_error_set(err, MGE_ERR_INVALID, "op %d is not a shape op", n->op);
}

double mge_shape_flops(const mge_node *n, const mge_tdesc *in, const mge_tdesc *out)
{
    (void)n, (void)in, (void)out;
    return 0;
}
