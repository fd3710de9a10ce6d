/* ref_binary.c — add, sub, mul, div, pow, maximum, minimum with numpy
 * broadcasting of any ranks, by plain index arithmetic: each output index
 * maps to an offset in a and in b with stride 0 along broadcast dims.
 * Element i of a is read before element i of the output is written, so the
 * output may be a's buffer (MGE_OPF_INPLACE; then a has the output's shape). */
#include "ref.h"

#include <math.h>

/* Output shape and the strides of a and b in it (0 where broadcast). */
static mge_status bcast(const mge_node *n, const mge_tensor *a, const mge_tensor *b, const mge_tensor *y,
                        int64_t *sa, int64_t *sb, mge_error *err)
{
    mge_status st;
    if ((st = ref_check_data(n, "a", a, err)) || (st = ref_check_data(n, "b", b, err)))
        return st;
    if (b->dtype != a->dtype) {
        char ba[96], bb[96];
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: operands %s and %s: expected the same dtype", ref_opname(n),
                             mge_shape_str(a->dtype, a->ndim, a->dims, ba, sizeof ba),
                             mge_shape_str(b->dtype, b->ndim, b->dims, bb, sizeof bb));
    }
    int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    int64_t dims[MGE_MAX_DIMS], ta = 1, tb = 1;
    for (int i = nd - 1; i >= 0; i--) {
        int ia = a->ndim - nd + i, ib = b->ndim - nd + i;
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1) {
            char ba[96], bb[96];
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: shapes %s and %s do not broadcast", ref_opname(n),
                                 mge_shape_str(a->dtype, a->ndim, a->dims, ba, sizeof ba),
                                 mge_shape_str(b->dtype, b->ndim, b->dims, bb, sizeof bb));
        }
        dims[i] = da == 1 ? db : da;
        sa[i] = da == 1 ? 0 : ta;
        sb[i] = db == 1 ? 0 : tb;
        ta *= da;
        tb *= db;
    }
    return ref_check(n, "output", y, a->dtype, nd, dims, err);
}

static double fop(int op, double x, double y)
{
    switch (op) {
    case MGE_OP_ADD: return x + y;
    case MGE_OP_SUB: return x - y;
    case MGE_OP_MUL: return x * y;
    case MGE_OP_DIV: return x / y;
    case MGE_OP_POW: return pow(x, y);
    case MGE_OP_MAXIMUM: return isnan(x) || isnan(y) ? NAN : x > y ? x : y; /* NaN propagates, as numpy */
    case MGE_OP_MINIMUM: return isnan(x) || isnan(y) ? NAN : x < y ? x : y;
    }
    return NAN;
}

/* Integer add/sub/mul wrap (unsigned arithmetic) instead of overflowing. */
#define IOP(T, UT, op, x, y)                                                                                         \
    ((op) == MGE_OP_ADD ? (T)((UT)(x) + (UT)(y)) : (op) == MGE_OP_SUB ? (T)((UT)(x) - (UT)(y))                       \
     : (op) == MGE_OP_MUL ? (T)((UT)(x) * (UT)(y)) : (op) == MGE_OP_MAXIMUM ? ((x) > (y) ? (x) : (y))                 \
     : ((x) < (y) ? (x) : (y)))

#define BINARY(NAME, T, EXPR)                                                                                        \
    static mge_status NAME(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,    \
                           mge_error *err)                                                                           \
    {                                                                                                                \
        const mge_tensor *a = in[0], *b = in[1];                                                                     \
        mge_tensor *y = out[0];                                                                                      \
        int64_t sa[MGE_MAX_DIMS], sb[MGE_MAX_DIMS], idx[MGE_MAX_DIMS] = {0};                                         \
        mge_status st = bcast(n, a, b, y, sa, sb, err);                                                              \
        if (st)                                                                                                      \
            return st;                                                                                               \
        const T *ap = a->data, *bp = b->data;                                                                        \
        T *yp = y->data;                                                                                             \
        int nd = y->ndim, op = n->op;                                                                                \
        int64_t cnt = ref_numel(y);                                                                                  \
        for (int64_t i = 0; i < cnt; i++) {                                                                          \
            int64_t oa = 0, ob = 0;                                                                                  \
            for (int d = 0; d < nd; d++) {                                                                           \
                oa += idx[d] * sa[d];                                                                                \
                ob += idx[d] * sb[d];                                                                                \
            }                                                                                                        \
            T x_ = ap[oa], y_ = bp[ob];                                                                              \
            yp[i] = (T)(EXPR);                                                                                       \
            ref_next(nd, y->dims, idx);                                                                              \
        }                                                                                                            \
        return MGE_OK;                                                                                               \
    }

BINARY(binary_f32, float, fop(op, x_, y_))
BINARY(binary_i32, int32_t, IOP(int32_t, uint32_t, op, x_, y_))
BINARY(binary_i64, int64_t, IOP(int64_t, uint64_t, op, x_, y_))

void mge_ref_register_binary(mge_backend *b)
{
    static const int all[] = {MGE_OP_ADD, MGE_OP_SUB, MGE_OP_MUL, MGE_OP_DIV, MGE_OP_POW, MGE_OP_MAXIMUM, MGE_OP_MINIMUM};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        b->k[all[i]][MGE_F32].run = binary_f32;
    static const int ints[] = {MGE_OP_ADD, MGE_OP_SUB, MGE_OP_MUL, MGE_OP_MAXIMUM, MGE_OP_MINIMUM};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        b->k[ints[i]][MGE_I32].run = binary_i32;
        b->k[ints[i]][MGE_I64].run = binary_i64;
    }
}
