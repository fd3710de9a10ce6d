/* op_logic.c — shape inference and FLOPs of where, the comparisons (equal,
 * less, greater, less_equal, greater_equal) and the boolean ops (not, and,
 * or, xor).
 *
 * numpy broadcasting of all operands. where(cond, a, b): cond bool, a and
 * b of one dtype, the output's. Comparisons take two operands of one
 * dtype (no implicit promotion: insert a cast) and give bool; the boolean
 * ops take and give bool. Quantized dtypes are refused (their integers
 * stand for scaled values). Known operands give known outputs (masks of
 * shape vectors at plan time). FLOPs: 1 per output element. */
#include "internal.h"

#include <string.h>

static int quantized(mge_dtype dt)
{
    return dt == MGE_QS8 || dt == MGE_QS32;
}

/* Offset in t (broadcast into out's shape) of out's flat element i. */
static int64_t bcast_at(const mge_tdesc *t, const mge_tdesc *out, int64_t i)
{
    int64_t off = 0, stride = 1;
    for (int d = out->ndim - 1; d >= 0; d--) {
        int64_t c = i % out->dims[d];
        i /= out->dims[d];
        int td = t->ndim - out->ndim + d;
        if (td >= 0) {
            if (t->dims[td] != 1)
                off += c * stride;
            stride *= t->dims[td];
        }
    }
    return off;
}

static double compare(int op, double a, double b)
{
    switch (op) {
    case MGE_OP_EQUAL: return a == b;
    case MGE_OP_LESS: return a < b;
    case MGE_OP_GREATER: return a > b;
    case MGE_OP_LESS_EQUAL: return a <= b;
    case MGE_OP_GREATER_EQUAL: return a >= b;
    case MGE_OP_AND: return a != 0 && b != 0;
    case MGE_OP_OR: return a != 0 || b != 0;
    case MGE_OP_XOR: return (a != 0) != (b != 0);
    }
    return 0;
}

/* The values of out from known inputs in[0..nin), when all are known and
 * out is small. */
static void propagate(const mge_node *n, const mge_tdesc *in, int nin, mge_tdesc *out)
{
    int64_t cnt = mge_tdesc_numel(out);
    for (int k = 0; k < nin; k++)
        if (!in[k].known)
            return;
    if (cnt < 0 || cnt > MGE_TDESC_NVAL)
        return;
    for (int64_t i = 0; i < cnt; i++) {
        double a = in[0].val[bcast_at(&in[0], out, i)];
        if (n->op == MGE_OP_NOT)
            out->val[i] = a == 0;
        else if (n->op == MGE_OP_WHERE)
            out->val[i] = a != 0 ? in[1].val[bcast_at(&in[1], out, i)] : in[2].val[bcast_at(&in[2], out, i)];
        else
            out->val[i] = compare(n->op, a, in[1].val[bcast_at(&in[1], out, i)]);
    }
    out->known = 1;
}

mge_status mge_logic_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    const char *name = mge_op_info(n->op)->name;
    char b0[96], b1[96], b2[96];
    int op = n->op;
    mge_tdesc t;
    memset(&t, 0, sizeof t);
    if (op == MGE_OP_NOT) {
        if (in[0].dtype != MGE_BOOL)
            return mge_error_set(err, MGE_ERR_SHAPE, "not: x %s: expected bool (compare first)",
                                 mge_tdesc_str(&in[0], b0, sizeof b0));
        *out = in[0];
        out->known = 0;
        propagate(n, in, 1, out);
        return MGE_OK;
    }
    if (op == MGE_OP_WHERE) {
        const mge_tdesc *c = &in[0], *a = &in[1], *b = &in[2];
        mge_tdesc_str(c, b0, sizeof b0);
        mge_tdesc_str(a, b1, sizeof b1);
        mge_tdesc_str(b, b2, sizeof b2);
        if (c->dtype != MGE_BOOL)
            return mge_error_set(err, MGE_ERR_SHAPE, "where: cond %s: expected bool", b0);
        if (a->dtype != b->dtype || quantized(a->dtype))
            return mge_error_set(err, MGE_ERR_SHAPE, "where: a %s and b %s: expected one plain dtype (cast one)", b1,
                                 b2);
        if (!mge_broadcast(a, b, &t) || !mge_broadcast(c, &t, out))
            return mge_error_set(err, MGE_ERR_SHAPE,
                                 "where: cond %s, a %s and b %s do not broadcast: expected each dim (aligned at the "
                                 "right) equal or 1",
                                 b0, b1, b2);
        out->dtype = a->dtype;
        out->known = 0;
        propagate(n, in, 3, out);
        return MGE_OK;
    }
    const mge_tdesc *a = &in[0], *b = &in[1];
    int logical = op == MGE_OP_AND || op == MGE_OP_OR || op == MGE_OP_XOR;
    mge_tdesc_str(a, b0, sizeof b0);
    mge_tdesc_str(b, b1, sizeof b1);
    if (logical && (a->dtype != MGE_BOOL || b->dtype != MGE_BOOL))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: %s and %s: expected bool operands (compare first)", name, b0, b1);
    if (a->dtype != b->dtype)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: dtypes differ: %s and %s: expected the same dtype (cast one)",
                             name, b0, b1);
    if (quantized(a->dtype))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: %s and %s: quantized operands (dequantize first)", name, b0,
                             b1);
    if (!mge_broadcast(a, b, out))
        return mge_error_set(err, MGE_ERR_SHAPE,
                             "%s: %s and %s do not broadcast: expected each dim pair (aligned at the right) equal or "
                             "one of them 1",
                             name, b0, b1);
    out->dtype = MGE_BOOL;
    out->known = 0;
    propagate(n, in, 2, out);
    return MGE_OK;
}

double mge_logic_flops(const mge_node *n, const mge_tdesc *in, const mge_tdesc *out)
{
    return mge_tdesc_count(&out[0]);
}
