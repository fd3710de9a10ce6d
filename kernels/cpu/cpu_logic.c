/* cpu_logic.c — comparisons and where on the shapes masks usually have:
 * all operands of the output's shape, or (comparisons) one a scalar. The
 * loops are plain selects the compiler vectorizes (CPU_MULTI: AVX2 and
 * baseline), split over the pool when large. not, and, or and xor take
 * the same shapes (bool bytes: any nonzero is true, as in ref); other
 * broadcasts run the ref kernels. */
#include "cpu.h"

#include <string.h>

/* kind 0: a[i] op b[i]; 1: a[i] op b[0]; 2: a[0] op b[i] */
#define CMP_LOOP(T, name)                                                                                   \
    CPU_MULTI(name, (int op, int kind, const T *a, const T *b, unsigned char *y, int64_t n), (op, kind, a, b, y, n), { \
        int64_t sa = kind == 2 ? 0 : 1, sb = kind == 1 ? 0 : 1;                                             \
        switch (op) {                                                                                       \
        case MGE_OP_EQUAL: for (int64_t i = 0; i < n; i++) y[i] = a[i * sa] == b[i * sb]; break;           \
        case MGE_OP_LESS: for (int64_t i = 0; i < n; i++) y[i] = a[i * sa] < b[i * sb]; break;             \
        case MGE_OP_GREATER: for (int64_t i = 0; i < n; i++) y[i] = a[i * sa] > b[i * sb]; break;          \
        case MGE_OP_LESS_EQUAL: for (int64_t i = 0; i < n; i++) y[i] = a[i * sa] <= b[i * sb]; break;      \
        case MGE_OP_GREATER_EQUAL: for (int64_t i = 0; i < n; i++) y[i] = a[i * sa] >= b[i * sb]; break;   \
        default: break;                                                                                     \
        }                                                                                                   \
    })
CMP_LOOP(float, cmp_f32)
CMP_LOOP(int32_t, cmp_i32)
CMP_LOOP(int64_t, cmp_i64)

typedef struct cmp_job {
    int op, kind;
    mge_dtype dt;
    const char *a, *b;
    unsigned char *y;
} cmp_job;

static void cmp_task(void *p, int64_t s0, int64_t s1, int thread)
{
    const cmp_job *j = p;
    size_t es = mge_dtype_size(j->dt);
    const char *a = j->a + (j->kind == 2 ? 0 : (size_t)s0 * es), *b = j->b + (j->kind == 1 ? 0 : (size_t)s0 * es);
    if (j->dt == MGE_F32)
        cmp_f32(j->op, j->kind, (const float *)a, (const float *)b, j->y + s0, s1 - s0);
    else if (j->dt == MGE_I32)
        cmp_i32(j->op, j->kind, (const int32_t *)a, (const int32_t *)b, j->y + s0, s1 - s0);
    else
        cmp_i64(j->op, j->kind, (const int64_t *)a, (const int64_t *)b, j->y + s0, s1 - s0);
}

/* t holds numel elements of its dtype. */
static int holds(const mge_tensor *t, int64_t numel)
{
    return numel == 0 || (t->data && t->nbytes >= (size_t)numel * mge_dtype_size(t->dtype));
}

static mge_status cpu_compare(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                              mge_error *err)
{
    const mge_tensor *a = in[0], *b = in[1], *y = out[0];
    int64_t ny = mge_tensor_numel(y), na = mge_tensor_numel(a), nb = mge_tensor_numel(b);
    int kind = mge_tensor_same_shape(a, y) && mge_tensor_same_shape(b, y) ? 0
               : mge_tensor_same_shape(a, y) && nb == 1                     ? 1
               : mge_tensor_same_shape(b, y) && na == 1                     ? 2
                                                                             : -1;
    if (kind < 0 || a->dtype != b->dtype || y->dtype != MGE_BOOL || !holds(a, na) || !holds(b, nb) || !holds(y, ny))
        return cpu_fallback(ctx, n, in, out, err);
    if (ny == 0)
        return MGE_OK;
    cmp_job j = {n->op, kind, a->dtype, a->data, b->data, y->data};
    cpu_parallel(ctx, ny, CPU_GRAIN, cmp_task, &j);
    return MGE_OK;
}

/* the boolean ops, kinds as CMP_LOOP (not reads a only) */
CPU_MULTI(bool_loop, (int op, int kind, const unsigned char *a, const unsigned char *b, unsigned char *y, int64_t n),
          (op, kind, a, b, y, n), {
    int64_t sa = kind == 2 ? 0 : 1, sb = kind == 1 ? 0 : 1;
    switch (op) {
    case MGE_OP_NOT: for (int64_t i = 0; i < n; i++) y[i] = a[i] == 0; break;
    case MGE_OP_AND: for (int64_t i = 0; i < n; i++) y[i] = (a[i * sa] != 0) & (b[i * sb] != 0); break;
    case MGE_OP_OR: for (int64_t i = 0; i < n; i++) y[i] = (a[i * sa] != 0) | (b[i * sb] != 0); break;
    case MGE_OP_XOR: for (int64_t i = 0; i < n; i++) y[i] = (a[i * sa] != 0) ^ (b[i * sb] != 0); break;
    default: break;
    }
})

static void bool_task(void *p, int64_t s0, int64_t s1, int thread)
{
    const cmp_job *j = p;
    const unsigned char *a = (const unsigned char *)j->a + (j->kind == 2 ? 0 : s0);
    const unsigned char *b = j->b ? (const unsigned char *)j->b + (j->kind == 1 ? 0 : s0) : NULL;
    bool_loop(j->op, j->kind, a, b, j->y + s0, s1 - s0);
}

/* not(a), and/or/xor(a, b): bool operands of the output's shape, or (binary)
 * one a scalar. */
static mge_status cpu_bool(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                           mge_error *err)
{
    int un = n->op == MGE_OP_NOT;
    const mge_tensor *a = in[0], *b = un ? NULL : in[1], *y = out[0];
    int64_t ny = mge_tensor_numel(y), na = mge_tensor_numel(a), nb = b ? mge_tensor_numel(b) : 0;
    int kind = un ? (mge_tensor_same_shape(a, y) ? 0 : -1)
               : mge_tensor_same_shape(a, y) && mge_tensor_same_shape(b, y) ? 0
               : mge_tensor_same_shape(a, y) && nb == 1                     ? 1
               : mge_tensor_same_shape(b, y) && na == 1                     ? 2
                                                                             : -1;
    if (kind < 0 || a->dtype != MGE_BOOL || (b && b->dtype != MGE_BOOL) || y->dtype != MGE_BOOL || !holds(a, na) ||
        (b && !holds(b, nb)) || !holds(y, ny))
        return cpu_fallback(ctx, n, in, out, err);
    if (ny == 0)
        return MGE_OK;
    cmp_job j = {n->op, kind, MGE_BOOL, a->data, b ? b->data : NULL, y->data};
    cpu_parallel(ctx, ny, CPU_GRAIN, bool_task, &j);
    return MGE_OK;
}

CPU_MULTI(sel32, (const unsigned char *c, const uint32_t *a, const uint32_t *b, uint32_t *y, int64_t n), (c, a, b, y, n), {
    for (int64_t i = 0; i < n; i++)
        y[i] = c[i] ? a[i] : b[i];
})
CPU_MULTI(sel64, (const unsigned char *c, const uint64_t *a, const uint64_t *b, uint64_t *y, int64_t n), (c, a, b, y, n), {
    for (int64_t i = 0; i < n; i++)
        y[i] = c[i] ? a[i] : b[i];
})

typedef struct where_job {
    const unsigned char *c;
    const char *a, *b;
    char *y;
    size_t es;
} where_job;

static void where_task(void *p, int64_t s0, int64_t s1, int thread)
{
    const where_job *j = p;
    size_t o = (size_t)s0 * j->es;
    if (j->es == 4)
        sel32(j->c + s0, (const uint32_t *)(j->a + o), (const uint32_t *)(j->b + o), (uint32_t *)(j->y + o), s1 - s0);
    else
        sel64(j->c + s0, (const uint64_t *)(j->a + o), (const uint64_t *)(j->b + o), (uint64_t *)(j->y + o), s1 - s0);
}

/* where(cond, a, b) with all three of the output's shape, 4- or 8-byte elements. */
static mge_status cpu_where(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                            mge_error *err)
{
    const mge_tensor *c = in[0], *a = in[1], *b = in[2], *y = out[0];
    int64_t ny = mge_tensor_numel(y);
    size_t es = mge_dtype_size(y->dtype);
    int fast = (es == 4 || es == 8) && c->dtype == MGE_BOOL && a->dtype == y->dtype && b->dtype == y->dtype &&
               mge_tensor_same_shape(c, y) && mge_tensor_same_shape(a, y) && mge_tensor_same_shape(b, y) &&
               holds(c, ny) && holds(a, ny) && holds(b, ny) && holds(y, ny);
    if (!fast)
        return cpu_fallback(ctx, n, in, out, err);
    if (ny == 0)
        return MGE_OK;
    where_job j = {c->data, a->data, b->data, y->data, es};
    cpu_parallel(ctx, ny, CPU_GRAIN, where_task, &j);
    return MGE_OK;
}

void mge_cpu_register_logic(mge_backend *b)
{
    static const int cmp[] = {MGE_OP_EQUAL, MGE_OP_LESS, MGE_OP_GREATER, MGE_OP_LESS_EQUAL, MGE_OP_GREATER_EQUAL};
    static const mge_dtype dts[] = {MGE_F32, MGE_I32, MGE_I64};
    for (size_t i = 0; i < sizeof cmp / sizeof cmp[0]; i++)
        for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++)
            b->k[cmp[i]][dts[k]] = (mge_kernel){.run = cpu_compare, .ws = cpu_ref_ws};
    b->k[MGE_OP_WHERE][MGE_BOOL] = (mge_kernel){.run = cpu_where, .ws = cpu_ref_ws};
    static const int bop[] = {MGE_OP_NOT, MGE_OP_AND, MGE_OP_OR, MGE_OP_XOR};
    for (size_t i = 0; i < sizeof bop / sizeof bop[0]; i++)
        b->k[bop[i]][MGE_BOOL] = (mge_kernel){.run = cpu_bool, .ws = cpu_ref_ws};
}
