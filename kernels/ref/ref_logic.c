/* ref_logic.c — where, the comparisons and the boolean ops with numpy
 * broadcasting of any ranks, by index arithmetic (stride 0 along broadcast
 * dims, as ref_binary.c). Floats compare in double (every comparison with
 * NaN is false), integers as int64 (u64 as uint64); where moves bytes, so it takes every
 * plain dtype. Element i of each operand is read before element
 * i of the output is written. */
#include "ref.h"

/* The broadcast shape of t[0..k) into yd (rank *nd) and each one's strides
 * in it, st[j * MGE_MAX_DIMS + d] (0 where broadcast). */
static mge_status bcast(const mge_kctx *ctx, const mge_node *n, int k, mge_tensor *const *t, int *nd, int64_t *yd,
                        int64_t *st, mge_error *err)
{
    mge_status s;
    int r = 0;
    for (int j = 0; j < k; j++) {
        if ((s = ref_check_data(ctx, n, "operand", t[j], err)))
            return s;
        r = t[j]->ndim > r ? t[j]->ndim : r;
    }
    for (int d = 0; d < r; d++)
        yd[d] = 1;
    for (int j = 0; j < k; j++)
        for (int d = 0; d < t[j]->ndim; d++) {
            int64_t v = t[j]->dims[d], *o = &yd[r - t[j]->ndim + d];
            if (v != 1 && *o != 1 && v != *o)
                return mge_error_set(err, MGE_ERR_SHAPE, "%s: operand shapes do not broadcast", ref_opname(ctx, n));
            if (v != 1)
                *o = v;
        }
    for (int j = 0; j < k; j++) {
        int64_t acc = 1;
        for (int d = r - 1; d >= 0; d--) {
            int td = t[j]->ndim - r + d;
            int64_t v = td >= 0 ? t[j]->dims[td] : 1;
            st[j * MGE_MAX_DIMS + d] = v == 1 ? 0 : acc;
            acc *= v;
        }
    }
    *nd = r;
    return MGE_OK;
}

static int64_t at(int nd, const int64_t *idx, const int64_t *st)
{
    int64_t o = 0;
    for (int d = 0; d < nd; d++)
        o += idx[d] * st[d];
    return o;
}

static mge_status where_any(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                            mge_error *err)
{
    int64_t yd[MGE_MAX_DIMS], st[3 * MGE_MAX_DIMS], idx[MGE_MAX_DIMS] = {0};
    int nd;
    mge_status s = bcast(ctx, n, 3, in, &nd, yd, st, err);
    if (s)
        return s;
    const mge_tensor *c = in[0], *a = in[1], *b = in[2];
    if (c->dtype != MGE_BOOL || a->dtype != b->dtype)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: cond %s, a %s, b %s: expected bool and one dtype",
                             ref_opname(ctx, n), mge_dtype_name(c->dtype), mge_dtype_name(a->dtype),
                             mge_dtype_name(b->dtype));
    if ((s = ref_check(ctx, n, "output", out[0], a->dtype, nd, yd, err)))
        return s;
    size_t es = mge_dtype_size(a->dtype);
    const unsigned char *cp = c->data;
    char *yp = out[0]->data;
    int64_t cnt = ref_numel(out[0]);
    for (int64_t i = 0; i < cnt; i++) {
        int pick = cp[at(nd, idx, st)] != 0;
        const mge_tensor *src = pick ? a : b;
        int64_t o = at(nd, idx, st + (pick ? 1 : 2) * MGE_MAX_DIMS);
        memmove(yp + (size_t)i * es, (const char *)src->data + (size_t)o * es, es);
        ref_next(nd, yd, idx);
    }
    return MGE_OK;
}

static int cmp_f(int op, double a, double b)
{
    switch (op) {
    case MGE_OP_EQUAL: return a == b;
    case MGE_OP_LESS: return a < b;
    case MGE_OP_GREATER: return a > b;
    case MGE_OP_LESS_EQUAL: return a <= b;
    case MGE_OP_GREATER_EQUAL: return a >= b;
    }
    return 0;
}

static int cmp_i(int op, int64_t a, int64_t b)
{
    switch (op) {
    case MGE_OP_EQUAL: return a == b;
    case MGE_OP_LESS: return a < b;
    case MGE_OP_GREATER: return a > b;
    case MGE_OP_LESS_EQUAL: return a <= b;
    case MGE_OP_GREATER_EQUAL: return a >= b;
    case MGE_OP_AND: return a && b;
    case MGE_OP_OR: return a || b;
    case MGE_OP_XOR: return !a != !b;
    }
    return 0;
}

/* comparisons, and, or, xor, not: bool out. */
static mge_status logic_any(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                            mge_error *err)
{
    int k = n->op == MGE_OP_NOT ? 1 : 2, nd, op = n->op;
    int64_t yd[MGE_MAX_DIMS], st[2 * MGE_MAX_DIMS], idx[MGE_MAX_DIMS] = {0};
    mge_status s = bcast(ctx, n, k, in, &nd, yd, st, err);
    if (s)
        return s;
    mge_dtype dt = in[0]->dtype;
    if (k == 2 && in[1]->dtype != dt)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: operands %s and %s: expected the same dtype", ref_opname(ctx, n),
                             mge_dtype_name(dt), mge_dtype_name(in[1]->dtype));
    if ((s = ref_check(ctx, n, "output", out[0], MGE_BOOL, nd, yd, err)))
        return s;
    int isf = mge_dtype_is_float(dt);
    unsigned char *yp = out[0]->data;
    int64_t cnt = ref_numel(out[0]);
    for (int64_t i = 0; i < cnt; i++) {
        int64_t oa = at(nd, idx, st), ob = k == 2 ? at(nd, idx, st + MGE_MAX_DIMS) : 0;
        int r;
        if (op == MGE_OP_NOT)
            r = !ref_ild(dt, in[0]->data, oa);
        else if (isf)
            r = cmp_f(op, ref_ld(dt, in[0]->data, oa), ref_ld(dt, in[1]->data, ob));
        else {
            /* u64: flipping the top bit maps unsigned order onto signed */
            int64_t fl = dt == MGE_U64 ? INT64_MIN : 0;
            r = cmp_i(op, ref_ild(dt, in[0]->data, oa) ^ fl, ref_ild(dt, in[1]->data, ob) ^ fl);
        }
        yp[i] = (unsigned char)r;
        ref_next(nd, yd, idx);
    }
    return MGE_OK;
}

void mge_ref_register_logic(mge_backend *b)
{
    static const int cmp[] = {MGE_OP_EQUAL, MGE_OP_LESS, MGE_OP_GREATER, MGE_OP_LESS_EQUAL, MGE_OP_GREATER_EQUAL};
    for (size_t i = 0; i < sizeof cmp / sizeof cmp[0]; i++) {
        REF_EACH_FLOAT(dt)
            b->k[cmp[i]][dt].run = logic_any;
        REF_EACH_INT(dt)
            b->k[cmp[i]][dt].run = logic_any;
        b->k[cmp[i]][MGE_BOOL].run = logic_any;
    }
    b->k[MGE_OP_NOT][MGE_BOOL].run = logic_any;
    b->k[MGE_OP_AND][MGE_BOOL].run = logic_any;
    b->k[MGE_OP_OR][MGE_BOOL].run = logic_any;
    b->k[MGE_OP_XOR][MGE_BOOL].run = logic_any;
    b->k[MGE_OP_WHERE][MGE_BOOL].run = where_any;
}
