/* cpu_index.c — gather and index_select as row copies, gather_elements,
 * scatter, scatter_nd and one_hot as element or slice moves: every index is
 * checked first (kernels/kindex.h, ref's messages), then the data moves,
 * split over the pool when large, so that no two tasks write one element
 * (repeated scatter indices still let the last update win, as in ref).
 * Geometry the inference did not make goes to the ref kernel, which says
 * what is wrong. The gradients (gather_grad, gather_elements_grad) run the
 * ref kernels: they accumulate in double, and are not on a hot path. */
#include "cpu.h"
#include "kindex.h"

#include <string.h>

typedef struct gather_job {
    const char *x;
    char *y;
    const mge_tensor *idx;
    int64_t k, dim;
    size_t row;
} gather_job;

/* rows r in [r0, r1) of the output: r = o * k + j reads row (o, idx[j]) of x */
static void gather_task(void *p, int64_t r0, int64_t r1, int thread)
{
    const gather_job *j = p;
    for (int64_t r = r0; r < r1; r++) {
        int64_t o = r / j->k, i = kidx_at(j->idx, r % j->k, j->dim);
        memcpy(j->y + (size_t)r * j->row, j->x + (size_t)(o * j->dim + i) * j->row, j->row);
    }
}

static mge_status cpu_gather(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                             mge_error *err)
{
    const mge_tensor *x = in[0], *idx = in[1];
    mge_tensor *y = out[0];
    int64_t av = mge_node_ints(n, MGE_KEY_axis, 0, 0);
    int ax = mge_axis(av, x->ndim);
    /* shapes the inference did not make go to ref, which says what is wrong */
    if (ax < 0 || x->ndim - 1 + idx->ndim != y->ndim || y->dtype != x->dtype || !x->data || !y->data)
        return cpu_fallback(ctx, n, in, out, err);
    mge_status st = kidx_check(mge_kctx_opname(ctx, n), idx, ax, x->dims[ax], err);
    if (st)
        return st;
    int64_t outer = 1, inner = 1, k = mge_tensor_numel(idx);
    for (int d = 0; d < ax; d++)
        outer *= x->dims[d];
    for (int d = ax + 1; d < x->ndim; d++)
        inner *= x->dims[d];
    size_t es = mge_dtype_size(x->dtype);
    if (outer * k * inner != mge_tensor_numel(y) || y->data == x->data ||
        x->nbytes < (size_t)mge_tensor_numel(x) * es || y->nbytes < (size_t)mge_tensor_numel(y) * es)
        return cpu_fallback(ctx, n, in, out, err);
    gather_job j = {x->data, y->data, idx, k, x->dims[ax], (size_t)inner * es};
    if (j.row == 0 || outer * k == 0)
        return MGE_OK;
    int64_t grain = (int64_t)(CPU_GRAIN * 4 / j.row);   /* about 64 KiB per task */
    cpu_parallel(ctx, outer * k, grain < 1 ? 1 : grain, gather_task, &j);
    return MGE_OK;
}

/* Element k of p <- element j of q, es bytes (1, 2, 4 or 8: constant-size
 * copies the compiler turns into one load and store). */
static inline void put(char *p, int64_t k, const char *q, int64_t j, size_t es)
{
    switch (es) {
    case 1: p[k] = q[j]; break;
    case 2: memcpy(p + k * 2, q + j * 2, 2); break;
    case 4: memcpy(p + k * 4, q + j * 4, 4); break;
    case 8: memcpy(p + k * 8, q + j * 8, 8); break;
    default: memcpy(p + (size_t)k * es, q + (size_t)j * es, es); break;
    }
}

/* t holds its elements. */
static int holds(const mge_tensor *t)
{
    int64_t n = mge_tensor_numel(t);
    return n == 0 || (t->data && t->nbytes >= (size_t)n * mge_dtype_size(t->dtype));
}

/* gather_elements and scatter: idx (of x's rank) split around the axis as
 * outer x K x inner. A line is one (outer, inner) pair: its K elements
 * share every coordinate but the axis', so only elements of one line can
 * land on the same element of x; tasks take whole lines and walk each in
 * order, as ref does. */
typedef struct elem_job {
    const char *src;   /* x (gather_elements) or updates (scatter) */
    char *y;
    const mge_tensor *idx;
    int scatter, ax, nd;
    size_t es;
    int64_t K, inner, dimax;
    int64_t id[MGE_MAX_DIMS], xs[MGE_MAX_DIMS];
} elem_job;

/* The offset in x of coordinates (d < ax from o, d > ax from in) of idx. */
static int64_t elem_base(const elem_job *j, int64_t o, int64_t in)
{
    int64_t off = 0;
    for (int d = j->nd - 1; d > j->ax; d--) {
        off += in % j->id[d] * j->xs[d];
        in /= j->id[d];
    }
    for (int d = j->ax - 1; d >= 0; d--) {
        off += o % j->id[d] * j->xs[d];
        o /= j->id[d];
    }
    return off;
}

/* lines [l0, l1): line l is (outer l / inner, inner l % inner) */
static void elem_task(void *p, int64_t l0, int64_t l1, int thread)
{
    const elem_job *j = p;
    int64_t xa = j->xs[j->ax];
    for (int64_t l = l0; l < l1;) {
        int64_t o = l / j->inner, a = l % j->inner, b = j->inner;
        if (b - a > l1 - l)
            b = a + (l1 - l);   /* inner positions [a, b) of outer row o */
        int64_t base0 = elem_base(j, o, a);
        for (int64_t k = 0; k < j->K; k++) {
            int64_t base = base0, i = (o * j->K + k) * j->inner + a;
            int64_t at[MGE_MAX_DIMS];   /* the inner coordinates of a, counted up */
            int64_t r = a;
            for (int d = j->nd - 1; d > j->ax; d--) {
                at[d] = r % j->id[d];
                r /= j->id[d];
            }
            for (int64_t t = a; t < b; t++, i++) {
                int64_t off = base + kidx_at(j->idx, i, j->dimax) * xa;
                if (j->scatter)
                    put(j->y, off, j->src, i, j->es);
                else
                    put(j->y, i, j->src, off, j->es);
                for (int d = j->nd - 1; d > j->ax; d--) {   /* next inner position */
                    base += j->xs[d];
                    if (++at[d] < j->id[d])
                        break;
                    base -= at[d] * j->xs[d];
                    at[d] = 0;
                }
            }
        }
        l += b - a;
    }
}

typedef struct copy_job {
    const char *x;
    char *y;
} copy_job;

static void copy_task(void *p, int64_t b0, int64_t b1, int thread)
{
    const copy_job *j = p;
    memcpy(j->y + b0, j->x + b0, (size_t)(b1 - b0));
}

/* y = x's bytes over the pool (nothing when y is x's buffer). */
static void copy_all(const mge_kctx *ctx, const mge_tensor *x, mge_tensor *y)
{
    int64_t nb = mge_tensor_numel(x) * (int64_t)mge_dtype_size(x->dtype);
    copy_job j = {x->data, y->data};
    if (nb > 0 && x->data != y->data)
        cpu_parallel(ctx, nb, CPU_GRAIN * 8, copy_task, &j);
}

/* gather_elements(x, idx) and scatter(x, idx, updates). */
static mge_status cpu_elements(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                               mge_error *err)
{
    const mge_tensor *x = in[0], *idx = in[1], *u = n->op == MGE_OP_SCATTER ? in[2] : NULL;
    mge_tensor *y = out[0];
    int ax = mge_axis(mge_node_ints(n, MGE_KEY_axis, 0, 0), x->ndim);
    int ok = ax >= 0 && idx->ndim == x->ndim && (idx->dtype == MGE_I32 || idx->dtype == MGE_I64) && holds(x) &&
             holds(idx) && holds(y) && y->dtype == x->dtype;
    for (int d = 0; ok && d < x->ndim; d++)
        ok = d == ax || idx->dims[d] <= x->dims[d];
    if (ok && u)
        ok = u->dtype == x->dtype && mge_tensor_same_shape(u, idx) && holds(u) && mge_tensor_same_shape(y, x) &&
             (y->data != u->data || mge_tensor_numel(u) == 0);
    else if (ok)
        ok = mge_tensor_same_shape(y, idx) && y->data != x->data;
    /* the reductions are ref's loop: an element's updates combine in index order */
    if (!ok || (u && mge_node_int(n, MGE_KEY_reduction, MGE_SCATTER_NONE) != MGE_SCATTER_NONE))
        return cpu_fallback(ctx, n, in, out, err);
    mge_status st = kidx_check(mge_kctx_opname(ctx, n), idx, ax, x->dims[ax], err);
    if (st)
        return st;
    elem_job j = {u ? u->data : x->data, y->data, idx, u != NULL, ax, x->ndim, mge_dtype_size(x->dtype),
                  idx->dims[ax], 1, x->dims[ax], {0}, {0}};
    int64_t s = 1, outer = 1;
    for (int d = x->ndim - 1; d >= 0; d--) {
        j.id[d] = idx->dims[d];
        j.xs[d] = s;
        s *= x->dims[d];
        if (d > ax)
            j.inner *= idx->dims[d];
        else if (d < ax)
            outer *= idx->dims[d];
    }
    if (u)
        copy_all(ctx, x, y);   /* the pool's tasks are done before the scatter starts */
    int64_t lines = outer * j.inner;
    if (lines == 0 || j.K == 0)
        return MGE_OK;
    int64_t grain = CPU_GRAIN / j.K;
    cpu_parallel(ctx, lines, grain < 1 ? 1 : grain, elem_task, &j);
    return MGE_OK;
}

/* scatter_nd: slice j of the updates to the offset its index row names.
 * Tasks take columns of the slices and walk the rows in order, so a
 * repeated row's last update wins, as in ref. */
typedef struct snd_job {
    const char *u;
    char *y;
    const mge_tensor *idx;
    int k;
    size_t es;
    int64_t m, slice;
    const int64_t *dims;
    int64_t xs[MGE_MAX_DIMS];
} snd_job;

static void snd_task(void *p, int64_t c0, int64_t c1, int thread)
{
    const snd_job *j = p;
    size_t es = j->es;
    for (int64_t r = 0; r < j->m; r++) {
        int64_t off = 0;
        for (int c = 0; c < j->k; c++)
            off += kidx_at(j->idx, r * j->k + c, j->dims[c]) * j->xs[c];
        memcpy(j->y + (size_t)(off + c0) * es, j->u + (size_t)(r * j->slice + c0) * es, (size_t)(c1 - c0) * es);
    }
}

static mge_status cpu_scatter_nd(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                 mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *x = in[0], *idx = in[1], *u = in[2];
    mge_tensor *y = out[0];
    int q = idx->ndim, k = q ? (int)idx->dims[q - 1] : 0;
    int ok = q >= 1 && k >= 1 && k <= x->ndim && q - 1 + x->ndim - k <= MGE_MAX_DIMS &&
             (idx->dtype == MGE_I32 || idx->dtype == MGE_I64) && holds(x) && holds(idx) && holds(u) && holds(y) &&
             y->dtype == x->dtype && u->dtype == x->dtype && mge_tensor_same_shape(y, x) &&
             u->ndim == q - 1 + x->ndim - k;
    snd_job j = {u->data, y->data, idx, k, mge_dtype_size(x->dtype), 1, 1, x->dims, {0}};
    for (int d = 0; ok && d < q - 1; d++) {
        ok = u->dims[d] == idx->dims[d];
        j.m *= idx->dims[d];
    }
    for (int d = k; ok && d < x->ndim; d++) {
        ok = u->dims[q - 1 + d - k] == x->dims[d];
        j.slice *= x->dims[d];
    }
    if (!ok || (y->data == u->data && mge_tensor_numel(u) > 0) ||
        mge_node_int(n, MGE_KEY_reduction, MGE_SCATTER_NONE) != MGE_SCATTER_NONE)
        return cpu_fallback(ctx, n, in, out, err);
    const char *name = mge_kctx_opname(ctx, n);
    mge_status st = kidx_check(name, idx, 0, INT64_MAX, err);
    if (st || (st = kidx_check_nd(name, idx, k, x->dims, err)))
        return st;
    for (int64_t d = x->ndim - 1, s = 1; d >= 0; d--) {
        j.xs[d] = s;
        s *= x->dims[d];
    }
    copy_all(ctx, x, y);
    if (j.m == 0 || j.slice == 0)
        return MGE_OK;
    int64_t grain = CPU_GRAIN / j.m;
    cpu_parallel(ctx, j.slice, grain < 1 ? 1 : grain, snd_task, &j);
    return MGE_OK;
}

/* one_hot: index element e = (o, i) owns the depth output elements
 * (o, c, i), so tasks over index elements never share an output. */
typedef struct oh_job {
    const mge_tensor *idx;
    char *y;
    const char *ov;   /* off then on, es bytes each */
    size_t es;
    int64_t depth, inner;
} oh_job;

static void oh_task(void *p, int64_t e0, int64_t e1, int thread)
{
    const oh_job *j = p;
    const char *off = j->ov, *on = j->ov + j->es;
    for (int64_t e = e0; e < e1;) {
        int64_t o = e / j->inner, a = e % j->inner, b = j->inner;
        if (b - a > e1 - e)
            b = a + (e1 - e);
        for (int64_t c = 0; c < j->depth; c++) {
            int64_t row = (o * j->depth + c) * j->inner;
            for (int64_t i = a; i < b; i++) {
                int64_t v = kidx_ld(j->idx->dtype, j->idx->data, o * j->inner + i);
                v = v < 0 ? v + j->depth : v;
                put(j->y, row + i, v == c ? on : off, 0, j->es);
            }
        }
        e += b - a;
    }
}

/* one_hot(indices[, depth][, values]) in the inference's input forms; any
 * other is ref's to refuse. */
static mge_status cpu_one_hot(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                              mge_error *err)
{
    const mge_tensor *idx = in[0], *vals = NULL;
    mge_tensor *y = out[0];
    int64_t depth = 0;
    int ok = 1;
    if (mge_node_attr(n, MGE_KEY_depth)) {
        depth = mge_node_int(n, MGE_KEY_depth, 0);
        vals = n->nin == 2 ? in[1] : NULL;
    } else {
        const mge_tensor *dt = n->nin >= 2 ? in[1] : NULL;
        ok = dt && (dt->dtype == MGE_I32 || dt->dtype == MGE_I64) && mge_tensor_numel(dt) == 1 && holds(dt);
        if (ok)
            depth = kidx_ld(dt->dtype, dt->data, 0);
        vals = n->nin == 3 ? in[2] : NULL;
    }
    int ax = mge_axis(mge_node_int(n, MGE_KEY_axis, -1), idx->ndim + 1);
    mge_dtype dt = vals ? vals->dtype : y->dtype;
    size_t es = mge_dtype_size(dt);
    ok = ok && ax >= 0 && depth >= 1 && idx->ndim + 1 <= MGE_MAX_DIMS && y->ndim == idx->ndim + 1 &&
         y->dtype == dt && (idx->dtype == MGE_I32 || idx->dtype == MGE_I64) && holds(idx) && holds(y) &&
         (es == 1 || es == 2 || es == 4 || es == 8) && (!vals || (mge_tensor_numel(vals) == 2 && holds(vals)));
    int64_t outer = 1, inner = 1;
    for (int d = 0, s = 0; ok && d <= idx->ndim; d++) {
        int64_t want = d == ax ? depth : idx->dims[s++];
        ok = y->dims[d] == want;
        if (d < ax)
            outer *= want;
        else if (d > ax)
            inner *= want;
    }
    char ov[16] = {0};
    if (ok && vals) {
        memcpy(ov, vals->data, 2 * es);
    } else if (ok) {   /* 0 and 1 of the output dtype */
        switch (dt) {
        case MGE_F32: memcpy(ov + 4, &(float){1.0f}, 4); break;
        case MGE_F16: memcpy(ov + 2, &(uint16_t){mge_f32_to_f16(1.0f)}, 2); break;
        case MGE_BF16: memcpy(ov + 2, &(uint16_t){mge_f32_to_bf16(1.0f)}, 2); break;
        case MGE_I8: case MGE_U8: case MGE_BOOL: ov[1] = 1; break;
        case MGE_I32: memcpy(ov + 4, &(int32_t){1}, 4); break;
        case MGE_I64: memcpy(ov + 8, &(int64_t){1}, 8); break;
        default: ok = 0; break;
        }
    }
    if (!ok)
        return cpu_fallback(ctx, n, in, out, err);
    mge_status st = kidx_check(mge_kctx_opname(ctx, n), idx, 0, INT64_MAX, err);
    if (st)
        return st;
    oh_job j = {idx, y->data, ov, es, depth, inner};
    int64_t ne = outer * inner, grain = CPU_GRAIN / depth;
    if (ne > 0)
        cpu_parallel(ctx, ne, grain < 1 ? 1 : grain, oh_task, &j);
    return MGE_OK;
}

void mge_cpu_register_index(mge_backend *b)
{
    for (int dt = 0; dt < MGE_NDTYPES; dt++) {
        if (dt == MGE_QS8 || dt == MGE_QS32)
            continue;
        b->k[MGE_OP_GATHER][dt] = (mge_kernel){.run = cpu_gather, .ws = cpu_ref_ws};
        b->k[MGE_OP_INDEX_SELECT][dt] = (mge_kernel){.run = cpu_gather, .ws = cpu_ref_ws};
        b->k[MGE_OP_GATHER_ELEMENTS][dt] = (mge_kernel){.run = cpu_elements, .ws = cpu_ref_ws};
        b->k[MGE_OP_SCATTER][dt] = (mge_kernel){.run = cpu_elements, .ws = cpu_ref_ws};
        b->k[MGE_OP_SCATTER_ND][dt] = (mge_kernel){.run = cpu_scatter_nd, .ws = cpu_ref_ws};
    }
    b->k[MGE_OP_ONE_HOT][MGE_I32] = (mge_kernel){.run = cpu_one_hot, .ws = cpu_ref_ws};
    b->k[MGE_OP_ONE_HOT][MGE_I64] = (mge_kernel){.run = cpu_one_hot, .ws = cpu_ref_ws};
}
