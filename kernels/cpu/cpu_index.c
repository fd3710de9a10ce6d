/* cpu_index.c — gather and index_select as row copies: every index is
 * checked first (kernels/kindex.h), then the rows (x's elements past the
 * axis) move by memcpy, split over the pool when there are many bytes.
 * The other indexing ops and the gradients run the ref kernels. */
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

void mge_cpu_register_index(mge_backend *b)
{
    for (int dt = 0; dt < MGE_NDTYPES; dt++) {
        if (dt == MGE_QS8 || dt == MGE_QS32)
            continue;
        b->k[MGE_OP_GATHER][dt] = (mge_kernel){cpu_gather, cpu_ref_ws};
        b->k[MGE_OP_INDEX_SELECT][dt] = (mge_kernel){cpu_gather, cpu_ref_ws};
    }
}
