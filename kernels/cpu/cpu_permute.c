/* cpu_permute.c — transpose (any rank, any plain dtype) split over the
 * pool. Size-1 dims are dropped and input dims that stay neighbours are
 * merged first, so attention's [N,S,H,D] -> [N,H,S,D] becomes a copy of
 * D-element runs, and [B,A,C] -> [B,C,A] f32 the blocked 2-D transpose of
 * cpu_transpose.c per batch; anything else moves one element at a time
 * from a precomputed stride per output dim. Geometry the inference did not
 * make goes to the ref kernel, which says what is wrong. */
#include "cpu.h"

typedef struct perm_job {
    const char *x;
    char *y;
    size_t es;
    int r;                       /* reduced rank */
    int64_t yd[MGE_MAX_DIMS];    /* output dims */
    int64_t xs[MGE_MAX_DIMS];    /* input stride (elements) per output dim */
    int64_t run;                 /* elements copied as one run (last dim kept), else 1 */
    int64_t rows, cols;          /* 2-D case: per batch, x [rows, cols] -> y [cols, rows] */
} perm_job;

/* Output positions [i0, i1) in units of runs: the multi-index of the
 * first, then advanced like an odometer. */
static void run_task(void *p, int64_t i0, int64_t i1, int thread)
{
    (void)thread;
    const perm_job *j = p;
    int nd = j->run > 1 ? j->r - 1 : j->r;
    int64_t idx[MGE_MAX_DIMS], rem = i0, off = 0;
    for (int d = nd - 1; d >= 0; d--) {
        idx[d] = rem % j->yd[d];
        rem /= j->yd[d];
        off += idx[d] * j->xs[d];
    }
    size_t rb = (size_t)j->run * j->es;
    for (int64_t i = i0; i < i1; i++) {
        memcpy(j->y + (size_t)i * rb, j->x + (size_t)off * j->es, rb);
        for (int d = nd - 1; d >= 0; d--) {
            off += j->xs[d];
            if (++idx[d] < j->yd[d])
                break;
            off -= idx[d] * j->xs[d];
            idx[d] = 0;
        }
    }
}

static void tr2_task(void *p, int64_t b0, int64_t b1, int thread)
{
    (void)thread;
    const perm_job *j = p;
    int64_t m = j->rows * j->cols;
    for (int64_t b = b0; b < b1; b++)
        cpu_transpose((const float *)j->x + b * m, j->rows, j->cols, j->cols, (float *)j->y + b * m, j->rows);
}

static mge_status cpu_permute(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                              mge_error *err)
{
    const mge_tensor *x = in[0];
    mge_tensor *y = out[0];
    const mge_attr *a = mge_node_attr(n, MGE_KEY_perm);
    int nd = x->ndim, perm[MGE_MAX_DIMS], seen[MGE_MAX_DIMS] = {0}, ok = a && a->n == nd && y->ndim == nd &&
                                                                       y->dtype == x->dtype;
    for (int i = 0; ok && i < nd; i++) {
        int p = mge_axis(a->i[i], nd);
        ok = p >= 0 && !seen[p] && y->dims[i] == x->dims[p];
        if (ok)
            seen[p] = 1, perm[i] = p;
    }
    size_t es = mge_dtype_size(x->dtype);
    int64_t cnt = mge_tensor_numel(x);
    if (!ok || (cnt && (!x->data || !y->data || y->data == x->data)) || x->nbytes < (size_t)cnt * es ||
        y->nbytes < (size_t)cnt * es)
        return cpu_fallback(ctx, n, in, out, err);
    if (cnt == 0)
        return MGE_OK;
    /* input strides; then the output dims in order, size 1 dropped, merged
     * with the one before when they are neighbours in x too */
    int64_t xstr[MGE_MAX_DIMS], s = 1;
    for (int d = nd - 1; d >= 0; d--) {
        xstr[d] = s;
        s *= x->dims[d];
    }
    perm_job j = {.x = x->data, .y = y->data, .es = es, .run = 1};
    int src[MGE_MAX_DIMS];   /* the input dim of the last merged dim of each output dim */
    for (int i = 0; i < nd; i++) {
        int p = perm[i];
        if (x->dims[p] == 1)
            continue;
        if (j.r > 0 && src[j.r - 1] == p - 1 && xstr[p - 1] == xstr[p] * x->dims[p]) {
            /* p follows the previous output dim's input dim: one dim */
            j.yd[j.r - 1] *= x->dims[p];
            j.xs[j.r - 1] = xstr[p];
            src[j.r - 1] = p;
            continue;
        }
        j.yd[j.r] = x->dims[p];
        j.xs[j.r] = xstr[p];
        src[j.r++] = p;
    }
    if (j.r <= 1) {
        memcpy(j.y, j.x, (size_t)cnt * es);
        return MGE_OK;
    }
    if (j.xs[j.r - 1] == 1) {   /* the last output dim is contiguous in x: copy runs */
        j.run = j.yd[j.r - 1];
        int64_t grain = CPU_GRAIN / j.run;
        cpu_parallel(ctx, cnt / j.run, grain < 1 ? 1 : grain, run_task, &j);
        return MGE_OK;
    }
    /* [B, A, C] -> [B, C, A] in f32: the blocked 2-D transpose per batch */
    int64_t batch = cnt / (j.yd[j.r - 1] * j.yd[j.r - 2]);
    if (x->dtype == MGE_F32 && j.xs[j.r - 2] == 1 && j.xs[j.r - 1] == j.yd[j.r - 2] &&
        (j.r == 2 || j.xs[j.r - 3] == j.yd[j.r - 1] * j.yd[j.r - 2])) {
        int contiguous = 1;   /* the batch dims must walk x in order */
        for (int d = j.r - 3; d > 0 && contiguous; d--)
            contiguous = j.xs[d - 1] == j.xs[d] * j.yd[d];
        if (contiguous) {
            j.rows = j.yd[j.r - 1];
            j.cols = j.yd[j.r - 2];
            int64_t grain = CPU_GRAIN / (j.rows * j.cols);
            cpu_parallel(ctx, batch, grain < 1 ? 1 : grain, tr2_task, &j);
            return MGE_OK;
        }
    }
    cpu_parallel(ctx, cnt, CPU_GRAIN, run_task, &j);
    return MGE_OK;
}

void mge_cpu_register_permute(mge_backend *b)
{
    for (int dt = 0; dt < MGE_NDTYPES; dt++)
        if (dt != MGE_QS8 && dt != MGE_QS32)
            b->k[MGE_OP_TRANSPOSE][dt] = (mge_kernel){.run = cpu_permute, .ws = cpu_ref_ws};
}
