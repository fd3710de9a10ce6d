/* parity_cases_emath.h — the case generators of the extra math ops (ops.def's
 * area math block): the bitwise ops and shifts on every integer dtype,
 * det, eye_like, lrn and dft (whose gradient graphs run det_grad, lrn_grad
 * and dft_grad). Included by parity_cases.h. */
#ifndef MGE_PARITY_CASES_EMATH_H
#define MGE_PARITY_CASES_EMATH_H

static int pc_bit_dtype(mge_dtype dt)
{
    return dt == MGE_U8 || dt == MGE_I8 || dt == MGE_I32 || dt == MGE_I64 || dt == MGE_I16 || dt == MGE_U16 ||
           dt == MGE_U32 || dt == MGE_U64;
}

/* bitwise_and/or/xor/not, shift_left/right: broadcast operands (dims of b
 * set to 1 at random, b of lower rank at times); shift counts 0 to a few
 * past the width (those shift every bit out). */
static int gen_bitwise(pcase *c)
{
    if (!pc_bit_dtype(c->dt))
        return PC_NODT;
    int64_t d[4], e[4];
    int nd = pshape(c, 0, 4, 9, d);
    if (PC_BIG(c))
        nd = 2, d[0] = 8, d[1] = pr(c, 1000, 3000);
    double lo = c->dt == MGE_U8 ? 0 : c->dt == MGE_I8 ? -128 : -2e9, hi = c->dt == MGE_U8 ? 256 : c->dt == MGE_I8 ? 128 : 2e9;
    if (c->op == MGE_OP_BITWISE_NOT)
        return pc_out(c, pc_un(c, c->op, pc_in_inplace(c, c->variant % 2, c->dt, nd, d, lo, hi), 0, NULL));
    int ne = nd - (nd > 0 && pr(c, 0, 2) == 0 ? 1 : 0);
    for (int i = 0; i < ne; i++)
        e[i] = pr(c, 0, 2) ? d[nd - ne + i] : 1;
    int shift = c->op == MGE_OP_SHIFT_LEFT || c->op == MGE_OP_SHIFT_RIGHT;
    double bits = c->dt == MGE_I64 ? 64 : c->dt == MGE_I32 ? 32 : 8;
    int in[2] = {pc_in(c, c->dt, nd, d, lo, hi), shift ? pc_in(c, c->dt, ne, e, 0, bits + 3) : pc_in(c, c->dt, ne, e, lo, hi)};
    if (pr(c, 0, 1)) {   /* the broadcast operand first */
        int t = in[0];
        in[0] = in[1], in[1] = t;
        if (shift)
            return PC_RETRY;   /* counts stay the second operand */
    }
    return pc_out(c, pc_node(c, c->op, 2, in, 0, NULL));
}

/* det of [..., n, n], n 0 to 6 (0: the empty product, 1), some singular */
static int gen_det(pcase *c)
{
    if (!is_float(c->dt))
        return PC_NODT;
    int64_t d[4];
    int nb = (int)pr(c, 0, 2);
    for (int i = 0; i < nb; i++)
        d[i] = pdim(c, 5);
    int64_t n = pr(c, 0, 6);
    d[nb] = d[nb + 1] = n;
    int x = pc_in(c, c->dt, nb + 2, d, -1.5, 1.5);
    mge_tensor *t = pc_data(c, x);
    if (c->variant % 4 == 3 && n >= 2)   /* a repeated row: singular */
        for (int64_t b = 0; b < mge_tensor_numel(t) / (n * n); b++)
            for (int64_t j = 0; j < n; j++)
                pc_set(t, b * n * n + n + j, (float)(c->dt == MGE_F32 ? ((float *)t->data)[b * n * n + j] : 0.5f));
    return pc_out(c, pc_un(c, MGE_OP_DET, x, 0, NULL));
}

/* eye_like over every dtype, diagonals inside and outside the matrix */
static int gen_eye_like(pcase *c)
{
    static const mge_dtype dts[] = {MGE_F32, MGE_F16, MGE_BF16, MGE_I8, MGE_U8, MGE_I32, MGE_I64, MGE_BOOL};
    int ok = 0;
    for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++)
        ok |= dts[i] == c->dt;
    if (!ok)
        return PC_NODT;
    int64_t d[2] = {pdim(c, 17), pdim(c, 17)};
    mge_attr at[2];
    int na = 0;
    at[na++] = A(MGE_KEY_k, pr(c, -4, 4));
    if (pr(c, 0, 1))
        at[na++] = A(MGE_KEY_dtype, dts[pr(c, 0, 7)]);
    return pc_out(c, pc_un(c, MGE_OP_EYE_LIKE, pc_in(c, c->dt, 2, d, -2, 2), na, at));
}

/* lrn over [N, C, ...] (rank 2 to 4), sizes even and odd, past C at times */
static int gen_lrn(pcase *c)
{
    if (!is_float(c->dt))
        return PC_NODT;
    int64_t d[4];
    int nd = pshape(c, 2, 4, 9, d);
    if (PC_BIG(c))
        nd = 4, d[0] = 2, d[1] = 16, d[2] = 17, d[3] = 33;
    int64_t size = pr(c, 1, 7);
    static const double alpha[] = {1e-4, 0.01, 0.5}, beta[] = {0.75, 0.5, 1.2}, bias[] = {1, 2, 0.5};
    mge_attr at[4] = {A_ints(MGE_KEY_size, 1, &size), A_f(MGE_KEY_alpha, ppick(c, 3, alpha)),
                      A_f(MGE_KEY_beta, ppick(c, 3, beta)), A_f(MGE_KEY_shift, ppick(c, 3, bias))};
    return pc_out(c, pc_un(c, MGE_OP_LRN, pc_in(c, c->dt, nd, d, -3, 3), 4, at));
}

/* dft of real and complex signals along axis 1 or 2, lengths cut, padded
 * or the signal's, onesided and inverse */
static int gen_dft(pcase *c)
{
    if (!is_float(c->dt))
        return PC_NODT;
    int64_t d[4];
    int nd = (int)pr(c, 3, 4);
    for (int i = 0; i < nd - 1; i++)
        d[i] = pdim(c, 13);
    d[nd - 1] = pr(c, 1, 2);
    int64_t ax = pr(c, 1, nd - 2);
    mge_attr at[4];
    int na = 0;
    at[na++] = A_ints(MGE_KEY_axis, 1, &ax);
    at[na++] = A(MGE_KEY_inverse, pr(c, 0, 1));
    at[na++] = A(MGE_KEY_onesided, pr(c, 0, 1));
    if (pr(c, 0, 1))
        at[na++] = A(MGE_KEY_length, pr(c, 1, 20));
    return pc_out(c, pc_un(c, MGE_OP_DFT, pc_in(c, c->dt, nd, d, -1, 1), na, at));
}

#endif
