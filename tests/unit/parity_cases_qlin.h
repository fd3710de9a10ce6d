/* parity_cases_qlin.h — generators of the ONNX linear quantization ops
 * (group quant-onnx: quantize_linear, dequantize_linear, requantize,
 * matmul_integer, conv_integer), included by parity_cases.h. Scales and
 * zero points are graph inputs, as in ONNX's node tests: per tensor, per
 * axis or blocked at random. */
#ifndef MGE_PARITY_CASES_QLIN_H
#define MGE_PARITY_CASES_QLIN_H

/* A scale (dtype sdt, in [lo, hi)) and a zero point (zdt; -1: none) over x
 * [nd, d] in one of the layouts; their attributes (axis, block) into at. */
static int pc_qscale(pcase *c, int nd, const int64_t *d, mge_dtype sdt, double lo, double hi, mge_dtype zdt,
                     int allow_block, int *zero, mge_attr *at)
{
    int layout = nd == 0 ? 0 : (int)pr(c, 0, allow_block ? 2 : 1);
    int64_t ax = nd ? pr(c, 0, nd - 1) : 0, block = layout == 2 ? pr(c, 1, 4) : 0, sd[MGE_MAX_DIMS];
    int snd = 0;
    if (layout == 0) {
        snd = (int)pr(c, 0, 1);
        sd[0] = 1;
    } else if (layout == 1) {
        snd = 1;
        sd[0] = d[ax];
    } else {
        snd = nd;
        for (int i = 0; i < nd; i++)
            sd[i] = i == ax ? (d[i] + block - 1) / block : d[i];
    }
    at[0] = A_ints(MGE_KEY_axis, 1, (int64_t[1]){ax - (pr(c, 0, 1) ? nd : 0)});   /* negative at times */
    at[1] = A(MGE_KEY_block, block);
    int s = pc_in(c, sdt, snd, sd, lo, hi);
    *zero = (int)zdt < 0 ? -2 : pc_in(c, zdt, snd, sd, zdt == MGE_I32 ? -300 : -128, zdt == MGE_I32 ? 300 : 256);
    return s;
}

static int gen_quantize_linear(pcase *c)
{
    if (!is_float(c->dt) && c->dt != MGE_I32)
        return PC_NODT;
    int64_t d[4];
    int nd = pshape(c, 0, 4, 17, d);
    if (PC_BIG(c))
        nd = 2, d[0] = 16, d[1] = 1003;
    mge_dtype zdt = pr(c, 0, 1) ? MGE_U8 : MGE_I8;
    int withz = (int)pr(c, 0, 3) != 0, z;
    mge_attr at[3];
    int x = c->dt == MGE_I32 ? pc_in(c, MGE_I32, nd, d, -5000, 5000) : pc_in(c, c->dt, nd, d, -15, 15);
    if (c->dt != MGE_I32)
        pc_specials(c, x, 1);
    int s = pc_qscale(c, nd, d, c->dt == MGE_I32 ? MGE_F32 : c->dt, 0.01, 0.2, withz ? zdt : (mge_dtype)-1, 1, &z,
                      at);
    int na = 2;
    if (!withz)
        at[na++] = A(MGE_KEY_dtype, zdt);
    int in[3] = {x, s, z};
    return pc_out(c, pc_node(c, MGE_OP_QUANTIZE_LINEAR, withz ? 3 : 2, in, na, at));
}

static int gen_dequantize_linear(pcase *c)
{
    if (c->dt != MGE_U8 && c->dt != MGE_I8 && c->dt != MGE_I32)
        return PC_NODT;
    int64_t d[4];
    int nd = pshape(c, 0, 4, 17, d);
    if (PC_BIG(c))
        nd = 2, d[0] = 16, d[1] = 1003;
    static const mge_dtype sdts[] = {MGE_F32, MGE_F16, MGE_BF16};
    int withz = (int)pr(c, 0, 3) != 0, z;
    mge_attr at[2];
    int x = pc_in(c, c->dt, nd, d, c->dt == MGE_I32 ? -100000 : -128, c->dt == MGE_I32 ? 100000 : 256);
    int s = pc_qscale(c, nd, d, sdts[pr(c, 0, 2)], 0.001, 0.5, withz ? c->dt : (mge_dtype)-1, 1, &z, at);
    int in[3] = {x, s, z};
    return pc_out(c, pc_node(c, MGE_OP_DEQUANTIZE_LINEAR, withz ? 3 : 2, in, 2, at));
}

static int gen_requantize(pcase *c)
{
    if (c->dt != MGE_I32)
        return PC_NODT;
    int64_t d[4];
    int nd = pshape(c, 0, 4, 17, d);
    if (PC_BIG(c))
        nd = 2, d[0] = 16, d[1] = 1003;
    mge_dtype zdt = pr(c, 0, 1) ? MGE_U8 : MGE_I8;
    int z;
    mge_attr at[3];
    int x = pc_in(c, MGE_I32, nd, d, -40000, 40000);
    int s = pc_qscale(c, nd, d, MGE_F32, 0.0005, 0.01, zdt, 0, &z, at);
    at[1] = A(MGE_KEY_dtype, zdt);   /* requantize has no block */
    int in[3] = {x, s, z};
    return pc_out(c, pc_node(c, MGE_OP_REQUANTIZE, 3, in, 2, at));
}

/* a zero point of dtype dt: one element or a 1-D [len] */
static int pc_izero(pcase *c, mge_dtype dt, int64_t len)
{
    int64_t one = 1, n = pr(c, 0, 1) ? len : one;
    return pc_in(c, dt, (int)pr(c, 0, 1) || n != 1 ? 1 : 0, &n, -128, 256);
}

static int gen_matmul_integer(pcase *c)
{
    if (c->dt != MGE_U8 && c->dt != MGE_I8)
        return PC_NODT;
    mge_dtype bdt = pr(c, 0, 1) ? MGE_U8 : MGE_I8;
    int64_t M = PC_BIG(c) ? 64 : pdim(c, 17), K = PC_BIG(c) ? 300 : pdim(c, 33), N = PC_BIG(c) ? 48 : pdim(c, 17);
    int64_t ad[5], bd[5];
    int bat = (int)pr(c, 0, 2), an = 0, bn = 0;
    for (int i = 0; i < bat; i++) {   /* batch dims, broadcast at random */
        int64_t e = pdim(c, 3);
        ad[an++] = pr(c, 0, 2) ? e : 1;
        bd[bn++] = pr(c, 0, 2) ? e : 1;
    }
    if (bat && pr(c, 0, 2) == 0)
        bn = 0;   /* b without batch dims */
    int a1 = bat == 0 && pr(c, 0, 5) == 0, b1 = bat == 0 && !a1 && pr(c, 0, 5) == 0;   /* 1-D operands */
    if (!a1)
        ad[an++] = M;
    ad[an++] = K;
    bd[bn++] = K;
    if (!b1)
        bd[bn++] = N;
    int nz = (int)pr(c, 0, 2);
    int in[4] = {pc_in(c, c->dt, an, ad, -128, 256), pc_in(c, bdt, bn, bd, -128, 256), -2, -2};
    if (nz > 0)
        in[2] = pc_izero(c, c->dt, a1 ? 1 : M);
    if (nz > 1)
        in[3] = pc_izero(c, bdt, b1 ? 1 : N);
    return pc_out(c, pc_node(c, MGE_OP_MATMUL_INTEGER, 2 + nz, in, 0, NULL));
}

static int gen_conv_integer(pcase *c)
{
    if (c->dt != MGE_U8 && c->dt != MGE_I8)
        return PC_NODT;
    pconv q;
    pc_conv_geom(c, &q, PC_BIG(c));
    mge_dtype wdt = pr(c, 0, 1) ? MGE_U8 : MGE_I8;
    int64_t xd[4] = {q.N, q.C, q.H, q.W}, wd[4] = {q.O, q.C / q.G, q.k[0], q.k[1]};
    int64_t pad[4] = {q.p[0], q.p[1], pr(c, 0, 2), pr(c, 0, 2)};   /* asymmetric at times */
    int nz = (int)pr(c, 0, 2);
    int in[4] = {pc_in(c, c->dt, 4, xd, -128, 256), pc_in(c, wdt, 4, wd, -128, 256), -2, -2};
    if (nz > 0)
        in[2] = pc_izero(c, c->dt, 1);
    if (nz > 1)
        in[3] = pc_izero(c, wdt, q.O);
    mge_attr at[5] = {A2(MGE_KEY_kernel, q.k[0], q.k[1]), A2(MGE_KEY_stride, q.s[0], q.s[1]),
                      A_ints(MGE_KEY_pad, 4, pad), A2(MGE_KEY_dilation, q.d[0], q.d[1]), A(MGE_KEY_groups, q.G)};
    return pc_out(c, pc_node(c, MGE_OP_CONV_INTEGER, 2 + nz, in, 5, at));
}

#endif
