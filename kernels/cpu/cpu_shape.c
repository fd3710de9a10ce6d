/* cpu_shape.c — the data movement ops that move big tensors: slice,
 * expand, tile, split and concat, for every dtype, as row copies (memcpy
 * of the innermost run) over the pool when the tensor is large. The ref
 * kernels (kernels/ref/ref_shape.c) copy one element at a time; these
 * compute the same bytes. shape, size, range, constant_of_shape, squeeze,
 * unsqueeze and tile_grad keep the ref kernels on cpu: their outputs are
 * tiny, views or rare (gradients). */
#include "cpu.h"
#include "kshape.h"

#include <stddef.h>

/* below this many bytes one thread copies: the pool's wake-up costs more */
#define PAR_BYTES ((size_t)1 << 18)
/* bytes per task when parallel */
#define TASK_BYTES ((size_t)1 << 16)

static mge_status check_out(const char *op, const mge_tensor *y, mge_dtype dt, int nd, const int64_t *dims,
                            mge_error *err)
{
    int ok = y->dtype == dt && y->ndim == nd;
    size_t m = 1;
    for (int d = 0; ok && d < nd; d++)
        ok = y->dims[d] == dims[d], m *= (size_t)dims[d];
    if (!ok)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: the output's shape is not the one its inputs give", op);
    if (m && (!y->data || y->nbytes < m * mge_dtype_size(dt)))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: the output lacks its data", op);
    return MGE_OK;
}

static mge_status check_in(const char *op, const mge_tensor *x, mge_error *err)
{
    int64_t m;
    size_t nb;
    mge_status st = mge_shape_numel(x->ndim, x->dims, x->dtype, &m, &nb, err);
    if (st)
        return st;
    if (m && (!x->data || x->nbytes < nb))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: an input lacks its data", op);
    return MGE_OK;
}

static int64_t numel(int nd, const int64_t *d)
{
    int64_t m = 1;
    for (int i = 0; i < nd; i++)
        m *= d[i];
    return m;
}

/* Copies cnt elements of es bytes from src (stride sstride elements) to dst. */
static void copy_strided(char *dst, const char *src, int64_t cnt, int64_t sstride, size_t es)
{
    if (sstride == 1) {
        memcpy(dst, src, (size_t)cnt * es);
        return;
    }
    for (int64_t i = 0; i < cnt; i++)
        memcpy(dst + (size_t)i * es, src + (ptrdiff_t)(i * sstride) * (ptrdiff_t)es, es);
}

/* ---------------------------------------------------------------- row jobs
 * y viewed as rows of its last dim; row r's source start (in x elements)
 * comes from its multi-index over the leading dims. */

typedef struct rows_job {
    int op;                          /* SLICE, EXPAND or TILE */
    int nd, xnd;
    int64_t yd[MGE_MAX_DIMS];
    const int64_t *xd;
    const mge_slice_plan *p;
    const char *x;
    char *y;
    size_t es;
    int64_t rows, rlen, per;         /* rows, elements per row, rows per task */
} rows_job;

static void rows_task(void *arg, int64_t task, int thread)
{
    const rows_job *j = arg;
    (void)thread;
    int64_t r0 = task * j->per, r1 = r0 + j->per < j->rows ? r0 + j->per : j->rows;
    int nd = j->nd, last = nd - 1;
    int64_t idx[MGE_MAX_DIMS] = {0};
    for (int64_t r = r0, q = r0; r < r1; r++, q = r) {
        for (int d = last - 1; d >= 0; d--)
            idx[d] = q % j->yd[d], q /= j->yd[d];
        idx[last] = 0;
        char *dst = j->y + (size_t)(r * j->rlen) * j->es;
        if (j->op == MGE_OP_SLICE) {
            int64_t off = mge_slice_offset(j->p, idx);
            copy_strided(dst, j->x + (size_t)off * j->es, j->rlen, j->p->step[last], j->es);
            continue;
        }
        /* expand / tile: the x row this y row reads */
        int64_t off = 0;
        for (int d = 0; d < j->xnd - 1; d++) {
            int64_t i = idx[d + nd - j->xnd], xd = j->xd[d];
            off = off * xd + (j->op == MGE_OP_TILE ? (xd ? i % xd : 0) : xd == 1 ? 0 : i);
        }
        int64_t xl = j->xnd ? j->xd[j->xnd - 1] : 1;
        const char *src = j->x + (size_t)(off * xl) * j->es;
        if (j->op == MGE_OP_EXPAND && xl == 1 && j->rlen > 1) {
            for (int64_t i = 0; i < j->rlen; i++)
                memcpy(dst + (size_t)i * j->es, src, j->es);
        } else {
            /* tile repeats the x row; expand with equal dims copies it once */
            for (int64_t at = 0; at < j->rlen; at += xl)
                memcpy(dst + (size_t)at * j->es, src, (size_t)xl * j->es);
        }
    }
}

static void rows_run(const mge_kctx *ctx, rows_job *j)
{
    int64_t total = numel(j->nd, j->yd);
    if (total == 0)
        return;
    if (j->nd == 0) { /* a scalar: one element */
        memcpy(j->y, j->x, j->es);
        return;
    }
    j->rlen = j->yd[j->nd - 1];
    j->rows = total / j->rlen;
    size_t rowb = (size_t)j->rlen * j->es, all = (size_t)total * j->es;
    int par = ctx && ctx->pool && ctx->threads > 1 && all >= PAR_BYTES;
    j->per = par ? (int64_t)(TASK_BYTES / (rowb ? rowb : 1)) : j->rows;
    if (j->per < 1)
        j->per = 1;
    int64_t ntasks = (j->rows + j->per - 1) / j->per;
    if (ntasks == 1)
        rows_task(j, 0, 0);
    else
        mge_pool_run(ctx->pool, ntasks, rows_task, j);
}

static mge_status cpu_slice(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                            mge_error *err)
{
    const mge_tensor *x = in[0];
    mge_tensor *y = out[0];
    const char *op = mge_kctx_opname(ctx, n);
    mge_slice_plan p;
    mge_status st = check_in(op, x, err);
    if (st || (st = mge_kshape_slice_plan(op, n, in, 1, x, &p, err)) ||
        (st = check_out(op, y, x->dtype, x->ndim, p.len, err)))
        return st;
    if (y->data == x->data && numel(x->ndim, p.len) > 0)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: output may not be the input's buffer", op);
    rows_job j = {.op = MGE_OP_SLICE, .nd = x->ndim, .xnd = x->ndim, .xd = x->dims, .p = &p,
                  .x = x->data, .y = y->data, .es = mge_dtype_size(x->dtype)};
    memcpy(j.yd, p.len, sizeof j.yd);
    rows_run(ctx, &j);
    return MGE_OK;
}

static mge_status cpu_expand_tile(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                  mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *x = in[0];
    mge_tensor *y = out[0];
    const char *op = mge_kctx_opname(ctx, n);
    int tile = n->op == MGE_OP_TILE, cnt = -1, nd = 0;
    int64_t v[MGE_MAX_DIMS], yd[MGE_MAX_DIMS];
    mge_status st = check_in(op, x, err);
    if (st || (st = mge_kshape_list(op, n, in, tile ? MGE_KEY_repeats : MGE_KEY_shape, tile ? "repeats" : "shape", v,
                                    &cnt, err)) ||
        (st = mge_kshape_out_dims(op, tile, x, v, cnt, &nd, yd, err)) ||
        (st = check_out(op, y, x->dtype, nd, yd, err)))
        return st;
    if (y->data == x->data && numel(nd, yd) > 0)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: output may not be the input's buffer", op);
    if (x->ndim == 0 || numel(x->ndim, x->dims) == 0) {
        /* a scalar (or empty x with an empty y): every element is x's one */
        size_t es = mge_dtype_size(x->dtype);
        for (int64_t i = 0; i < numel(nd, yd); i++)
            memcpy((char *)y->data + (size_t)i * es, x->data, es);
        return MGE_OK;
    }
    rows_job j = {.op = n->op, .nd = nd, .xnd = x->ndim, .xd = x->dims, .x = x->data, .y = y->data,
                  .es = mge_dtype_size(x->dtype)};
    memcpy(j.yd, yd, sizeof j.yd);
    rows_run(ctx, &j);
    return MGE_OK;
}

/* ---------------------------------------------------------------- concat and split
 * Both copy, per outer index o (the dims before the axis), one contiguous
 * chunk per part: parallel over o. */

typedef struct parts_job {
    int nparts, to_parts;            /* split: whole -> parts; concat: parts -> whole */
    char *whole;
    char *part[64];
    size_t prow[64], wrow, at[64];   /* bytes per outer index: each part's, the whole's; offsets */
    int64_t outer, per;
} parts_job;

static void parts_task(void *arg, int64_t task, int thread)
{
    const parts_job *j = arg;
    (void)thread;
    int64_t o0 = task * j->per, o1 = o0 + j->per < j->outer ? o0 + j->per : j->outer;
    for (int64_t o = o0; o < o1; o++)
        for (int k = 0; k < j->nparts; k++) {
            char *w = j->whole + (size_t)o * j->wrow + j->at[k], *p = j->part[k] + (size_t)o * j->prow[k];
            if (j->prow[k])
                memcpy(j->to_parts ? p : w, j->to_parts ? w : p, j->prow[k]);
        }
}

static void parts_run(const mge_kctx *ctx, parts_job *j)
{
    size_t all = (size_t)j->outer * j->wrow;
    if (all == 0)
        return;
    int par = ctx && ctx->pool && ctx->threads > 1 && all >= PAR_BYTES;
    j->per = par ? (int64_t)(TASK_BYTES / j->wrow) : j->outer;
    if (j->per < 1)
        j->per = 1;
    int64_t ntasks = (j->outer + j->per - 1) / j->per;
    if (ntasks == 1)
        parts_task(j, 0, 0);
    else
        mge_pool_run(ctx->pool, ntasks, parts_task, j);
}

/* The parts t[0..k) against the whole w along axis ax: same dtype and rank,
 * equal dims off the axis, and the axis lengths adding up; fills j. */
static mge_status parts_setup(const char *op, const mge_tensor *w, mge_tensor *const *t, int k, int ax, parts_job *j,
                              mge_error *err)
{
    int64_t sum = 0, inner = 1;
    j->nparts = k;
    j->outer = 1;
    for (int d = 0; d < ax; d++)
        j->outer *= w->dims[d];
    for (int d = ax + 1; d < w->ndim; d++)
        inner *= w->dims[d];
    size_t es = mge_dtype_size(w->dtype), at = 0;
    for (int i = 0; i < k; i++) {
        int ok = t[i]->dtype == w->dtype && t[i]->ndim == w->ndim;
        for (int d = 0; ok && d < w->ndim; d++)
            ok = d == ax || t[i]->dims[d] == w->dims[d];
        mge_status st = ok ? check_in(op, t[i], err) : mge_error_set(err, MGE_ERR_SHAPE,
                                                                     "%s: part %d does not match along the axis", op, i);
        if (st)
            return st;
        if (t[i]->data == w->data && numel(t[i]->ndim, t[i]->dims) > 0)
            return mge_error_set(err, MGE_ERR_INVALID, "%s: an output may not share an input's buffer", op);
        sum += t[i]->dims[ax];
        j->part[i] = t[i]->data;
        j->prow[i] = (size_t)(t[i]->dims[ax] * inner) * es;
        j->at[i] = at;
        at += j->prow[i];
    }
    if (sum != w->dims[ax])
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: the parts hold %lld along axis %d of %lld", op, (long long)sum,
                             ax, (long long)w->dims[ax]);
    j->wrow = at;
    return check_in(op, w, err);
}

static mge_status cpu_concat(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                             mge_error *err)
{
    const char *op = mge_kctx_opname(ctx, n);
    mge_tensor *y = out[0];
    int64_t av = mge_node_ints(n, MGE_KEY_axis, 0, 0);
    int ax = mge_axis(av, y->ndim);
    if (ax < 0 || n->nin > 64)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: axis=%lld is out of range for rank %d", op, (long long)av,
                             y->ndim);
    parts_job j = {.to_parts = 0, .whole = y->data};
    mge_status st = parts_setup(op, y, in, n->nin, ax, &j, err);
    if (st)
        return st;
    parts_run(ctx, &j);
    return MGE_OK;
}

static mge_status cpu_split(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                            mge_error *err)
{
    const char *op = mge_kctx_opname(ctx, n);
    const mge_tensor *x = in[0];
    int64_t av = mge_node_int(n, MGE_KEY_axis, 0), v[MGE_MAX_DIMS];
    int ax = mge_axis(av, x->ndim), cnt = -1;
    if (ax < 0)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: axis=%lld is out of range for rank %d", op, (long long)av,
                             x->ndim);
    mge_status st = mge_kshape_list(op, n, in, MGE_KEY_sizes, "sizes", v, &cnt, err);
    if (st)
        return st;
    if (cnt >= 0 && cnt != n->nout)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: %d sizes for %d outputs", op, cnt, n->nout);
    for (int k = 0; k < n->nout && cnt >= 0; k++)
        if (out[k]->ndim != x->ndim || out[k]->dims[ax] != v[k])
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: output %d does not match the sizes", op, k);
    parts_job j = {.to_parts = 1, .whole = x->data};
    if ((st = parts_setup(op, x, out, n->nout, ax, &j, err)))
        return st;
    parts_run(ctx, &j);
    return MGE_OK;
}

void mge_cpu_register_shape(mge_backend *b)
{
    for (int dt = 0; dt < MGE_NDTYPES; dt++) {
        b->k[MGE_OP_SLICE][dt].run = cpu_slice;
        b->k[MGE_OP_EXPAND][dt].run = cpu_expand_tile;
        b->k[MGE_OP_TILE][dt].run = cpu_expand_tile;
        b->k[MGE_OP_CONCAT][dt].run = cpu_concat;
        b->k[MGE_OP_SPLIT][dt].run = cpu_split;
    }
}
