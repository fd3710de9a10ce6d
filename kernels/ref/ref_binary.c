/* ref_binary.c — add, sub, mul, div, pow, maximum, minimum with numpy
 * broadcasting of any ranks, by plain index arithmetic: each output index
 * maps to an offset in a and in b with stride 0 along broadcast dims.
 * Element i of a is read before element i of the output is written, so the
 * output may be a's buffer (MGE_OPF_INPLACE; then a has the output's shape).
 * Float dtypes compute in double; the integers (i8 ... u64) take all but
 * pow, in their own width with wraparound, and their div truncates toward
 * zero (ONNX Div), refusing a zero divisor. */
#include "ref.h"

#include <math.h>

/* Output shape and the strides of a and b in it (0 where broadcast). */
static mge_status bcast(const mge_kctx *ctx, const mge_node *n, const mge_tensor *a, const mge_tensor *b,
                        const mge_tensor *y, int64_t *sa, int64_t *sb, mge_error *err)
{
    mge_status st;
    if ((st = ref_check_data(ctx, n, "a", a, err)) || (st = ref_check_data(ctx, n, "b", b, err)))
        return st;
    if (b->dtype != a->dtype) {
        char ba[96], bb[96];
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: operands %s and %s: expected the same dtype", ref_opname(ctx, n),
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
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: shapes %s and %s do not broadcast", ref_opname(ctx, n),
                                 mge_shape_str(a->dtype, a->ndim, a->dims, ba, sizeof ba),
                                 mge_shape_str(b->dtype, b->ndim, b->dims, bb, sizeof bb));
        }
        dims[i] = da == 1 ? db : da;
        sa[i] = da == 1 ? 0 : ta;
        sb[i] = db == 1 ? 0 : tb;
        ta *= da;
        tb *= db;
    }
    return ref_check(ctx, n, "output", y, a->dtype, nd, dims, err);
}

double mge_ref_binary(int op, double x, double y)
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

/* Integer ops are computed on 64 bits (add/sub/mul in unsigned arithmetic,
 * so they wrap instead of overflowing) and stored keeping the low bits:
 * the same wrap-around numpy and PyTorch give for the narrow type. */
static int64_t iop(mge_dtype dt, int op, int64_t x, int64_t y)
{
    if (dt == MGE_U64) { /* the rest agree for every other dtype's values */
        uint64_t ux = (uint64_t)x, uy = (uint64_t)y;
        switch (op) {
        case MGE_OP_DIV: return (int64_t)(ux / uy);
        case MGE_OP_MAXIMUM: return (int64_t)(ux > uy ? ux : uy);
        case MGE_OP_MINIMUM: return (int64_t)(ux < uy ? ux : uy);
        }
    }
    switch (op) {
    case MGE_OP_ADD: return (int64_t)((uint64_t)x + (uint64_t)y);
    case MGE_OP_SUB: return (int64_t)((uint64_t)x - (uint64_t)y);
    case MGE_OP_MUL: return (int64_t)((uint64_t)x * (uint64_t)y);
    /* C's / truncates toward zero; INT64_MIN / -1 would trap: it wraps */
    case MGE_OP_DIV: return y == -1 ? (int64_t)(0 - (uint64_t)x) : x / y;
    case MGE_OP_MAXIMUM: return x > y ? x : y;
    case MGE_OP_MINIMUM: return x < y ? x : y;
    }
    return 0;
}

static mge_status binary_any(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                             mge_error *err)
{
    const mge_tensor *a = in[0], *b = in[1];
    mge_tensor *y = out[0];
    int64_t sa[MGE_MAX_DIMS], sb[MGE_MAX_DIMS], idx[MGE_MAX_DIMS] = {0};
    mge_status st = bcast(ctx, n, a, b, y, sa, sb, err);
    if (st)
        return st;
    mge_dtype dt = a->dtype;
    int isf = mge_dtype_is_float(dt), op = n->op, nd = y->ndim;
    if (!isf && (op == MGE_OP_POW || dt == MGE_BOOL || dt == MGE_QS8 || dt == MGE_QS32))
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: no reference kernel for %s", ref_opname(ctx, n),
                             mge_dtype_name(dt));
    for (int64_t i = 0; !isf && op == MGE_OP_DIV && i < ref_numel(b); i++)
        if (ref_ild(dt, b->data, i) == 0)   /* checked first: the output may be a's buffer */
            return mge_error_set(err, MGE_ERR_INVALID, "%s: integer division by zero (b's element %lld is 0)",
                                 ref_opname(ctx, n), (long long)i);
    int64_t cnt = ref_numel(y);
    for (int64_t i = 0; i < cnt; i++) {
        int64_t oa = 0, ob = 0;
        for (int d = 0; d < nd; d++) {
            oa += idx[d] * sa[d];
            ob += idx[d] * sb[d];
        }
        if (isf)
            ref_st(dt, y->data, i, mge_ref_binary(op, ref_ld(dt, a->data, oa), ref_ld(dt, b->data, ob)));
        else
            ref_ist(dt, y->data, i, iop(dt, op, ref_ild(dt, a->data, oa), ref_ild(dt, b->data, ob)));
        ref_next(nd, y->dims, idx);
    }
    return MGE_OK;
}

void mge_ref_register_binary(mge_backend *b)
{
    static const int all[] = {MGE_OP_ADD, MGE_OP_SUB,     MGE_OP_MUL,    MGE_OP_DIV,
                              MGE_OP_POW, MGE_OP_MAXIMUM, MGE_OP_MINIMUM};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        REF_EACH_FLOAT(dt)
            b->k[all[i]][dt].run = binary_any;
        if (all[i] == MGE_OP_POW)
            continue; /* float only, as the inference says */
        REF_EACH_INT(dt)
            b->k[all[i]][dt].run = binary_any;
    }
}
