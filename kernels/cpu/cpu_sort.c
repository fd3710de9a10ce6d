/* cpu_sort.c — topk, sort, argsort and cumsum split over the pool by rows
 * (x seen as [outer, len, inner], one row per (outer, inner) pair). topk
 * with a small k keeps the best k by insertion in one pass over the row
 * instead of sorting it; both paths give a stable sort's order (ksort.h),
 * so results match the ref kernels exactly. cumsum accumulates in double
 * (integers in 64 bits) like ref, so it matches too. Geometry the
 * inference did not make goes to the ref kernel, which says what is wrong. */
#include "cpu.h"
#include "ksort.h"

#include <stdlib.h>

typedef struct sort_job {
    const mge_tensor *x;
    char *vals;
    int64_t *idx;
    int64_t len, inner, k;
    int isf, desc, cumsum, excl, rev;
    size_t es;
    _Atomic int nomem;
} sort_job;

/* k up to this, and at most a quarter of the row, selects by insertion */
#define SELECT_MAX_K 32

static void sort_task(void *p, int64_t r0, int64_t r1, int thread)
{
    (void)thread;
    sort_job *j = p;
    int64_t len = j->len, inner = j->inner, k = j->k;
    int sel = k <= SELECT_MAX_K && k * 4 <= len;
    ksort_item *a = malloc((size_t)(len ? len : 1) * (sel ? 1 : 2) * sizeof *a + (size_t)(k + 1) * sizeof *a);
    if (!a) {
        atomic_store(&j->nomem, 1);
        return;
    }
    ksort_item *best = sel ? a + len : a;
    const char *xp = j->x->data;
    for (int64_t r = r0; r < r1; r++) {
        int64_t o = r / inner, i = r % inner, xb = o * len * inner + i, yb = o * k * inner + i;
        for (int64_t t = 0; t < len; t++) {
            ksort_load(j->x->dtype, xp, xb + t * inner, &a[t]);
            a[t].i = t;
        }
        if (sel)
            ksort_select(a, len, k, best, j->isf, j->desc);
        else
            ksort_sort(a, a + len, len, j->isf, j->desc);
        for (int64_t t = 0; t < k; t++) {
            int64_t at = yb + t * inner;
            j->idx[at] = best[t].i;
            if (j->vals)
                memcpy(j->vals + (size_t)at * j->es, xp + (size_t)(xb + best[t].i * inner) * j->es, j->es);
        }
    }
    free(a);
}

static void cumsum_task(void *p, int64_t r0, int64_t r1, int thread)
{
    (void)thread;
    sort_job *j = p;
    const mge_tensor *x = j->x;
    mge_dtype dt = x->dtype;
    int64_t len = j->len, inner = j->inner;
    for (int64_t r = r0; r < r1; r++) {
        int64_t b = (r / inner) * len * inner + r % inner;
        if (dt == MGE_F32) {
            const float *xp = x->data;
            float *yp = (float *)j->vals;
            double acc = 0;
            for (int64_t t = 0; t < len; t++) {
                int64_t at = b + (j->rev ? len - 1 - t : t) * inner;
                double v = xp[at];
                acc += j->excl ? 0 : v;
                yp[at] = (float)acc;
                acc += j->excl ? v : 0;
            }
        } else {
            int64_t acc = 0;
            for (int64_t t = 0; t < len; t++) {
                int64_t at = b + (j->rev ? len - 1 - t : t) * inner;
                ksort_item it = {0};
                ksort_load(dt, x->data, at, &it);
                if (!j->excl)
                    acc = (int64_t)((uint64_t)acc + (uint64_t)it.v);
                switch (dt) {
                case MGE_I8: ((int8_t *)j->vals)[at] = (int8_t)(uint8_t)(uint64_t)acc; break;
                case MGE_U8: ((uint8_t *)j->vals)[at] = (uint8_t)(uint64_t)acc; break;
                case MGE_I32: ((int32_t *)j->vals)[at] = (int32_t)(uint32_t)(uint64_t)acc; break;
                default: ((int64_t *)j->vals)[at] = acc; break;
                }
                if (j->excl)
                    acc = (int64_t)((uint64_t)acc + (uint64_t)it.v);
            }
        }
    }
}

/* The output must be what the inference made: dtype, dims, data. */
static int fits(const mge_tensor *t, mge_dtype dt, const mge_tensor *x, int ax, int64_t k)
{
    if (t->dtype != dt || t->ndim != x->ndim || (mge_tensor_numel(t) && !t->data))
        return 0;
    for (int d = 0; d < x->ndim; d++)
        if (t->dims[d] != (d == ax ? k : x->dims[d]))
            return 0;
    return t->nbytes >= (size_t)mge_tensor_numel(t) * mge_dtype_size(dt);
}

static mge_status cpu_sort(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                           mge_error *err)
{
    const mge_tensor *x = in[0];
    int ax = mge_axis(mge_node_ints(n, MGE_KEY_axis, 0, -1), x->ndim);
    if (ax < 0 || !ksort_dtype_ok(x->dtype) || (mge_tensor_numel(x) && !x->data) ||
        x->nbytes < (size_t)mge_tensor_numel(x) * mge_dtype_size(x->dtype))
        return cpu_fallback(ctx, n, in, out, err);
    sort_job j = {.x = x, .len = x->dims[ax], .inner = 1, .isf = mge_dtype_is_float(x->dtype),
                  .es = mge_dtype_size(x->dtype)};
    atomic_init(&j.nomem, 0);
    int64_t outer = 1;
    for (int d = 0; d < ax; d++)
        outer *= x->dims[d];
    for (int d = ax + 1; d < x->ndim; d++)
        j.inner *= x->dims[d];
    int64_t nrows = outer * j.inner;
    if (n->op == MGE_OP_CUMSUM) {
        if ((j.isf && x->dtype != MGE_F32) || !fits(out[0], x->dtype, x, ax, j.len))
            return cpu_fallback(ctx, n, in, out, err);
        j.vals = out[0]->data;
        j.excl = (int)mge_node_int(n, MGE_KEY_exclusive, 0);
        j.rev = (int)mge_node_int(n, MGE_KEY_reverse, 0);
        int64_t grain = CPU_GRAIN / (j.len ? j.len : 1);
        if (nrows && j.len)
            cpu_parallel(ctx, nrows, grain < 1 ? 1 : grain, cumsum_task, &j);
        return MGE_OK;
    }
    int topk = n->op == MGE_OP_TOPK, argsort = n->op == MGE_OP_ARGSORT;
    j.k = topk ? mge_node_int(n, MGE_KEY_k, 0) : j.len;
    j.desc = topk ? (int)mge_node_int(n, MGE_KEY_largest, 1) : (int)mge_node_int(n, MGE_KEY_descending, 0);
    mge_tensor *v = argsort ? NULL : out[0], *ix = argsort ? out[0] : out[1];
    int bad_v = v && (!fits(v, x->dtype, x, ax, j.k) || (v->data == x->data && mge_tensor_numel(v)));
    if (j.k < 0 || j.k > j.len || bad_v || !fits(ix, MGE_I64, x, ax, j.k))
        return cpu_fallback(ctx, n, in, out, err);
    j.vals = v ? v->data : NULL;
    j.idx = ix->data;
    if (nrows == 0 || j.k == 0)
        return MGE_OK;
    int64_t grain = CPU_GRAIN / 4 / (j.len ? j.len : 1);
    cpu_parallel(ctx, nrows, grain < 1 ? 1 : grain, sort_task, &j);
    if (atomic_load(&j.nomem))
        return mge_error_set(err, MGE_ERR_NOMEM, "%s: out of memory", mge_kctx_opname(ctx, n));
    return MGE_OK;
}

void mge_cpu_register_sort(mge_backend *b)
{
    for (int dt = 0; dt < MGE_NDTYPES; dt++) {
        /* the dtypes cpu_sort's cumsum stores; the rest (f64, i16, u16, u32,
         * u64) fall back to ref */
        if (!ksort_dtype_ok((mge_dtype)dt) || dt == MGE_F64 || dt == MGE_I16 || dt == MGE_U16 || dt == MGE_U32 ||
            dt == MGE_U64)
            continue;
        b->k[MGE_OP_TOPK][dt] = (mge_kernel){.run = cpu_sort, .ws = cpu_ref_ws};
        b->k[MGE_OP_SORT][dt] = (mge_kernel){.run = cpu_sort, .ws = cpu_ref_ws};
        b->k[MGE_OP_ARGSORT][dt] = (mge_kernel){.run = cpu_sort, .ws = cpu_ref_ws};
        if (!mge_dtype_is_float((mge_dtype)dt) || dt == MGE_F32)   /* f16, bf16: ref */
            b->k[MGE_OP_CUMSUM][dt] = (mge_kernel){.run = cpu_sort, .ws = cpu_ref_ws};
    }
}
