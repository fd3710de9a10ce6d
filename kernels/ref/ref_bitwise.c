/* ref_bitwise.c — bitwise_and/or/xor/not and shift_left/right on the
 * integer dtypes, with numpy broadcasting of any ranks (stride 0 along
 * broadcast dims).
 *
 * Every element goes through int64 (ref_ild sign-extends signed dtypes and
 * zero-extends unsigned ones) and back with its low bits (ref_ist), so one
 * loop serves every width: a new integer dtype is a line of int_dts (and
 * its load and store in ref.h). Shifts: a count at or beyond the width, or
 * negative, shifts every bit out (0; a negative signed value shifted right
 * gives -1, numpy's arithmetic shift). Element i of each operand is read
 * before element i of the output is written. */
#include "ref.h"

static const struct {
    mge_dtype dt;
    int bits, is_signed;
} int_dts[] = {
    {MGE_U8, 8, 0},
    {MGE_I8, 8, 1},
    {MGE_I32, 32, 1},
    {MGE_I64, 64, 1},
    {MGE_I16, 16, 1},
    {MGE_U16, 16, 0},
    {MGE_U32, 32, 0},
    {MGE_U64, 64, 0},
};

static int dt_bits(mge_dtype dt, int *is_signed)
{
    for (size_t i = 0; i < sizeof int_dts / sizeof int_dts[0]; i++)
        if (int_dts[i].dt == dt) {
            *is_signed = int_dts[i].is_signed;
            return int_dts[i].bits;
        }
    return 0;
}

static int64_t bit_op(int op, int64_t a, int64_t b, int bits, int is_signed)
{
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    switch (op) {
    case MGE_OP_BITWISE_AND: return (int64_t)(ua & ub);
    case MGE_OP_BITWISE_OR: return (int64_t)(ua | ub);
    case MGE_OP_BITWISE_XOR: return (int64_t)(ua ^ ub);
    case MGE_OP_SHIFT_LEFT:
        return b < 0 || b >= bits ? 0 : (int64_t)(ua << b);
    case MGE_OP_SHIFT_RIGHT:
        if (is_signed) /* arithmetic: >> of a negative int64 is implementation-defined in C, so spelled out */
            return b < 0 || b >= bits ? (a < 0 ? -1 : 0) : a < 0 ? (int64_t) ~(~ua >> b) : (int64_t)(ua >> b);
        return b < 0 || b >= bits ? 0 : (int64_t)(ua >> b);
    }
    return 0;
}

static mge_status bitwise_not(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                              mge_error *err)
{
    mge_dtype dt = in[0]->dtype;
    mge_status st = ref_check_dtype(ctx, n, "x", in[0], dt, err);
    if (st || (st = ref_check(ctx, n, "output", out[0], dt, in[0]->ndim, in[0]->dims, err)))
        return st;
    int64_t cnt = ref_numel(in[0]);
    for (int64_t i = 0; i < cnt; i++)
        ref_ist(dt, out[0]->data, i, ~ref_ild(dt, in[0]->data, i));
    return MGE_OK;
}

static mge_status bitwise_bin(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                              mge_error *err)
{
    const mge_tensor *a = in[0], *b = in[1];
    mge_dtype dt = a->dtype;
    int is_signed = 0, bits = dt_bits(dt, &is_signed);
    mge_status st;
    if ((st = ref_check_dtype(ctx, n, "a", a, dt, err)) || (st = ref_check_dtype(ctx, n, "b", b, dt, err)))
        return st;
    if (!bits)
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: no reference kernel for %s", ref_opname(ctx, n),
                             mge_dtype_name(dt));
    /* the broadcast shape and each operand's strides in it (0 where stretched) */
    int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    int64_t yd[MGE_MAX_DIMS], sa[MGE_MAX_DIMS], sb[MGE_MAX_DIMS], idx[MGE_MAX_DIMS] = {0};
    int64_t acc_a = 1, acc_b = 1;
    for (int d = nd - 1; d >= 0; d--) {
        int da = a->ndim - nd + d, db = b->ndim - nd + d;
        int64_t va = da >= 0 ? a->dims[da] : 1, vb = db >= 0 ? b->dims[db] : 1;
        if (va != vb && va != 1 && vb != 1)
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: operand shapes do not broadcast", ref_opname(ctx, n));
        yd[d] = va == 1 ? vb : va;
        sa[d] = va == 1 ? 0 : acc_a;
        sb[d] = vb == 1 ? 0 : acc_b;
        acc_a *= va;
        acc_b *= vb;
    }
    if ((st = ref_check(ctx, n, "output", out[0], dt, nd, yd, err)))
        return st;
    int64_t cnt = ref_numel(out[0]);
    for (int64_t i = 0; i < cnt; i++) {
        int64_t oa = 0, ob = 0;
        for (int d = 0; d < nd; d++)
            oa += idx[d] * sa[d], ob += idx[d] * sb[d];
        int64_t r = bit_op(n->op, ref_ild(dt, a->data, oa), ref_ild(dt, b->data, ob), bits, is_signed);
        ref_ist(dt, out[0]->data, i, r);
        ref_next(nd, yd, idx);
    }
    return MGE_OK;
}

void mge_ref_register_bitwise(mge_backend *b)
{
    static const int bin[] = {MGE_OP_BITWISE_AND, MGE_OP_BITWISE_OR, MGE_OP_BITWISE_XOR, MGE_OP_SHIFT_LEFT,
                              MGE_OP_SHIFT_RIGHT};
    for (size_t d = 0; d < sizeof int_dts / sizeof int_dts[0]; d++) {
        for (size_t i = 0; i < sizeof bin / sizeof bin[0]; i++)
            b->k[bin[i]][int_dts[d].dt].run = bitwise_bin;
        b->k[MGE_OP_BITWISE_NOT][int_dts[d].dt].run = bitwise_not;
    }
}
