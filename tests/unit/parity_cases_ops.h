/* parity_cases_ops.h — the generators of the newer ops (transposed and
 * 1-D/3-D convolution, adaptive pooling, resize, pad, group/instance/rms
 * norm, lstm and gru, sort, scans and reductions, embedding and attention,
 * the elementwise math ops), included by parity_cases.h after the helpers
 * and generators they use; the conventions are that file's. */
#ifndef MGE_PARITY_CASES_OPS_H
#define MGE_PARITY_CASES_OPS_H
/* ---------------------------------------------------------------- transposed and 1-D conv, adaptive pooling */

/* conv_transpose2d: random groups, kernels 1..4, stride 1..3, pad 0..2,
 * dilation 1..2, output_padding below max(stride, dilation) (so some
 * cases take the cpu kernel's ref path: output_padding >= stride); big: a
 * U-Net decoder step (k2 s2, or k4 s2 p1). */
static int gen_conv_transpose2d(pcase *c)
{
    if (!is_float(c->dt))
        return PC_NODT;
    int64_t G = pr(c, 1, 3), cg = pr(c, 1, 4), og = pr(c, 1, 4), k[2], s[2], p[2], d[2], op[2], o[2];
    int64_t N = pr(c, 1, 2), H = pdim(c, 9), W = pdim(c, 9);
    for (int i = 0; i < 2; i++) {
        k[i] = pr(c, 1, 4), s[i] = pr(c, 1, 3), p[i] = pr(c, 0, 2), d[i] = pr(c, 1, 2);
        op[i] = pr(c, 0, (s[i] > d[i] ? s[i] : d[i]) - 1);
    }
    if (PC_BIG(c)) {
        int k4 = (int)pr(c, 0, 1);
        N = 1, G = 1, cg = pr(c, 16, 40), og = pr(c, 8, 24), H = pr(c, 8, 16), W = pr(c, 8, 16);
        for (int i = 0; i < 2; i++)
            k[i] = k4 ? 4 : 2, s[i] = 2, p[i] = k4, d[i] = 1, op[i] = 0;
    }
    int64_t xs[2] = {H, W};
    for (int i = 0; i < 2; i++)
        if ((o[i] = (xs[i] - 1) * s[i] - 2 * p[i] + d[i] * (k[i] - 1) + op[i] + 1) < 1)
            return PC_RETRY;
    int bias = (int)pr(c, 0, 1);
    int64_t xd[4] = {N, G * cg, H, W}, wd[4] = {G * cg, og, k[0], k[1]}, bd[1] = {G * og};
    int in[3] = {pc_in(c, c->dt, 4, xd, -1, 1), pc_in(c, c->dt, 4, wd, -1, 1), pc_in(c, c->dt, 1, bd, -1, 1)};
    mge_attr at[8] = {A(MGE_KEY_out, G * og),         A2(MGE_KEY_kernel, k[0], k[1]),
                      A2(MGE_KEY_stride, s[0], s[1]),  A2(MGE_KEY_pad, p[0], p[1]),
                      A2(MGE_KEY_output_padding, op[0], op[1]), A2(MGE_KEY_dilation, d[0], d[1]),
                      A(MGE_KEY_groups, G),            A(MGE_KEY_bias, bias)};
    return pc_out(c, pc_node(c, MGE_OP_CONV_TRANSPOSE2D, 2 + bias, in, 8, at));
}

/* conv1d: grouped, depthwise or dense; big: a long sequence */
static int gen_conv1d(pcase *c)
{
    if (!is_float(c->dt))
        return PC_NODT;
    int64_t G = pr(c, 1, 3), cg = pr(c, 1, 5), og = pr(c, 1, 4), k = pr(c, 1, 5), s = pr(c, 1, 3);
    int64_t p = pr(c, 0, 2), d = pr(c, 1, 2), N = pr(c, 1, 2), L = pdim(c, 33);
    if (PC_BIG(c))
        N = 1, G = 1, cg = pr(c, 16, 48), og = pr(c, 16, 48), L = pr(c, 200, 400), k = 3, s = 1, p = 1, d = 1;
    if (mge_conv_out_dim(L, k, s, p, d, 0) < 1)
        return PC_RETRY;
    int bias = (int)pr(c, 0, 1);
    int64_t xd[3] = {N, G * cg, L}, wd[3] = {G * og, cg, k}, bd[1] = {G * og};
    int in[3] = {pc_in(c, c->dt, 3, xd, -1, 1), pc_in(c, c->dt, 3, wd, -1, 1), pc_in(c, c->dt, 1, bd, -1, 1)};
    mge_attr at[7] = {A(MGE_KEY_out, G * og), A(MGE_KEY_kernel, k), A(MGE_KEY_stride, s), A(MGE_KEY_pad, p),
                      A(MGE_KEY_dilation, d),  A(MGE_KEY_groups, G), A(MGE_KEY_bias, bias)};
    return pc_out(c, pc_node(c, MGE_OP_CONV1D, 2 + bias, in, 7, at));
}

/* adaptive pooling, 1-D and 2-D, with or without the batch dim, to
 * outputs smaller, equal or larger than the input */
static int gen_adaptive_pool(pcase *c)
{
    if (!is_float(c->dt))
        return PC_NODT;
    int op = c->op, nsp = op == MGE_OP_ADAPTIVE_AVGPOOL2D || op == MGE_OP_ADAPTIVE_MAXPOOL2D ? 2 : 1;
    int nd = nsp + (int)pr(c, 1, 2);
    int64_t xd[4], os[2];
    for (int i = 0; i < nd; i++)
        xd[i] = i < nd - nsp ? pr(c, 1, 3) : pdim(c, 13);
    if (PC_BIG(c)) {
        nd = nsp + 2, xd[0] = 2, xd[1] = 32, xd[2] = nsp == 2 ? 37 : 1500, xd[3] = 29;
    }
    for (int i = 0; i < nsp; i++)
        os[i] = PC_BIG(c) ? 7 : pr(c, 1, 2 * xd[nd - nsp + i] + 1);
    mge_attr at = A_ints(MGE_KEY_output_size, nsp, os);
    return pc_out(c, pc_un(c, op, pc_in(c, c->dt, nd, xd, -1, 1), 1, &at));
}

/* conv3d: grouped, depthwise or dense, kernels 1..3, stride 1..2, pad
 * 0..1, dilation 1..2 per axis; big: a video block (dense 3x3x3) */
static int gen_conv3d(pcase *c)
{
    if (!is_float(c->dt))
        return PC_NODT;
    int64_t G = pr(c, 1, 3), cg = pr(c, 1, 3), og = pr(c, 1, 3), N = pr(c, 1, 2), x[3], k[3], s[3], p[3], d[3];
    for (int i = 0; i < 3; i++)
        x[i] = pdim(c, 7), k[i] = pr(c, 1, 3), s[i] = pr(c, 1, 2), p[i] = pr(c, 0, 1), d[i] = pr(c, 1, 2);
    if (PC_BIG(c)) {
        N = 1, G = 1, cg = pr(c, 8, 16), og = pr(c, 8, 24);
        for (int i = 0; i < 3; i++)
            x[i] = pr(c, 8, 14), k[i] = 3, s[i] = 1, p[i] = 1, d[i] = 1;
    }
    for (int i = 0; i < 3; i++)
        if (mge_conv_out_dim(x[i], k[i], s[i], p[i], d[i], 0) < 1)
            return PC_RETRY;
    int bias = (int)pr(c, 0, 1);
    int64_t xd[5] = {N, G * cg, x[0], x[1], x[2]}, wd[5] = {G * og, cg, k[0], k[1], k[2]}, bd[1] = {G * og};
    int in[3] = {pc_in(c, c->dt, 5, xd, -1, 1), pc_in(c, c->dt, 5, wd, -1, 1), pc_in(c, c->dt, 1, bd, -1, 1)};
    mge_attr at[7] = {A(MGE_KEY_out, G * og), A_ints(MGE_KEY_kernel, 3, k), A_ints(MGE_KEY_stride, 3, s),
                      A_ints(MGE_KEY_pad, 3, p), A_ints(MGE_KEY_dilation, 3, d), A(MGE_KEY_groups, G),
                      A(MGE_KEY_bias, bias)};
    return pc_out(c, pc_node(c, MGE_OP_CONV3D, 2 + bias, in, 7, at));
}
/* lstm, gru (group seq): random S, N, sizes, 1-2 layers, either direction,
 * with or without bias, batch_first and h0/c0; params in [-0.5, 0.5]
 * (PyTorch's range for H = 4). The gradient graphs run lstm_grad and
 * gru_grad (dh_n, dc_n as zero scalars: the node's one output is y). */
static int gen_rnn(pcase *c)
{
    if (!is_float(c->dt))
        return PC_NODT;
    int gru = c->op == MGE_OP_GRU || c->op == MGE_OP_RNN;
    int64_t S = pr(c, 1, 6), N = pdim(c, 5), I = pdim(c, 9), H = pdim(c, 9), L = pr(c, 1, 2), D = pr(c, 1, 2);
    int bias = (int)pr(c, 0, 1), bf = (int)pr(c, 0, 1), state = (int)pr(c, 0, 1);
    if (PC_BIG(c))
        S = 12, N = 8, I = 33, H = 32, L = 2, D = 2, bias = 1;
    int64_t xd[3] = {bf ? N : S, bf ? S : N, I}, sd[3] = {D * L, N, H};
    int in[64], nin = 0;
    in[nin++] = pc_in(c, c->dt, 3, xd, -1, 1);
    for (int k = 0; state && k < (gru ? 1 : 2); k++)
        in[nin++] = pc_in(c, c->dt, 3, sd, -1, 1);
    int64_t G = c->op == MGE_OP_RNN ? 1 : gru ? 3 : 4;
    for (int64_t l = 0; l < L; l++)
        for (int64_t d = 0; d < D; d++)
            for (int k = 0; k < (bias ? 4 : 2); k++) {
                int64_t pd[2] = {G * H, k == 0 ? (l ? D * H : I) : H};
                in[nin++] = pc_val(c, MGE_VAL_PARAM, c->dt, k < 2 ? 2 : 1, pd, -0.5, 0.5);
            }
    /* rnn (inference only) draws its nonlinearity */
    mge_attr at[6] = {A(MGE_KEY_hidden_size, H), A(MGE_KEY_num_layers, L), A(MGE_KEY_bidirectional, D == 2),
                      A(MGE_KEY_batch_first, bf), A(MGE_KEY_bias, bias), A(MGE_KEY_nonlinearity, pr(c, 0, 1))};
    return pc_out(c, pc_node(c, c->op, nin, in, c->op == MGE_OP_RNN ? 6 : 5, at));
}

/* ---------------------------------------------------------------- spatial (resize, pad, group/instance/rms norm) */

static mge_attr A_fl2(int key, double a, double b)
{
    mge_attr r = A(key, 0);
    r.n = 2;
    mge_attr_float_set(&r, 0, a);
    mge_attr_float_set(&r, 1, b);
    return r;
}

/* resize: nearest, bilinear or bicubic (align_corners both ways), scales up, down
 * and non-integer, or a size; the big case doubles 32x32 planes. */
static int gen_resize(pcase *c)
{
    if (!is_float(c->dt))
        return PC_NODT;
    int64_t xd[4] = {pr(c, 1, 3), pdim(c, 5), pdim(c, 13), pdim(c, 13)};
    int bil = (int)pr(c, 0, 2), align = bil && pr(c, 0, 1);   /* 2: bicubic */
    static const double sc[] = {0.5, 0.75, 1, 1.5, 2, 2.3, 3};
    double sh = ppick(c, 7, sc), sw = ppick(c, 7, sc);
    int bysize = (int)pr(c, 0, 2) == 0;
    if (PC_BIG(c))
        xd[0] = 2, xd[1] = 16, xd[2] = 32, xd[3] = 32, sh = sw = 2, bysize = 0;
    if (!bysize && ((int64_t)(xd[2] * sh) < 1 || (int64_t)(xd[3] * sw) < 1))
        return PC_RETRY;
    int x = pc_in(c, c->dt, 4, xd, -2, 2);
    mge_attr at[4] = {A(MGE_KEY_mode, bil == 2 ? MGE_MODE_BICUBIC : bil ? MGE_MODE_BILINEAR : MGE_MODE_NEAREST),
                      A(MGE_KEY_align_corners, align),
                      bysize ? A2(MGE_KEY_size, pdim(c, 17), pdim(c, 17)) : A_fl2(MGE_KEY_scales, sh, sw),
                      A(MGE_KEY_exclude_outside, bil == 2 && pr(c, 0, 1))};
    return pc_out(c, pc_node(c, MGE_OP_RESIZE, 1, &x, 4, at));
}

/* pad: constant (any dtype, any rank, crops too), reflect and replicate on
 * the trailing 1 to 3 dims; the big case pads 4x32x56x56 by 1. */
static int gen_pad(pcase *c)
{
    if (!pc_plain(c->dt))
        return PC_NODT;
    int64_t d[4], p[8];
    int nd = pshape(c, 1, 4, 9, d);
    int mode = (int)pr(c, 0, 2), k = (int)pr(c, 1, nd < 3 ? nd : 3);
    mode = mode == 0 ? MGE_MODE_CONSTANT : mode == 1 ? MGE_MODE_REFLECT : MGE_MODE_REPLICATE;
    if (PC_BIG(c))
        nd = 4, d[0] = 4, d[1] = 32, d[2] = 56, d[3] = 56, k = 2;
    for (int j = 0; j < k; j++) {
        int64_t len = d[nd - 1 - j];
        for (int e = 0; e < 2; e++) {
            if (mode == MGE_MODE_REFLECT)
                p[2 * j + e] = pr(c, 0, len - 1);
            else if (mode == MGE_MODE_REPLICATE)
                p[2 * j + e] = pr(c, 0, 4);
            else
                p[2 * j + e] = pr(c, len > 2 ? -1 : 0, 4);
        }
        if (PC_BIG(c))
            p[2 * j] = p[2 * j + 1] = 1;
    }
    int x = pc_in(c, c->dt, nd, d, is_float(c->dt) ? -2 : pc_lo(c->dt), is_float(c->dt) ? 2 : 100);
    mge_attr at[3] = {A_ints(MGE_KEY_pads, 2 * k, p), A(MGE_KEY_mode, mode), A_f(MGE_KEY_value, pr(c, -2, 2))};
    return pc_out(c, pc_node(c, MGE_OP_PAD, 1, &x, 3, at));
}

/* group_norm, instance_norm (affine or not), rms_norm (any axis, eps
 * given or the dtype's); the big cases are 4x32x28x28 (8 groups) and
 * 8x768 rows. */
static int gen_gnorm(pcase *c)
{
    if (!is_float(c->dt))
        return PC_NODT;
    int64_t xd[4];
    int nd;
    if (c->op == MGE_OP_RMS_NORM) {
        nd = pshape(c, 1, 4, 13, xd);
        if (PC_BIG(c))
            nd = 2, xd[0] = 8, xd[1] = 768;
        int ax = (int)pr(c, -nd, nd - 1), a0 = ax < 0 ? ax + nd : ax;
        int in[2] = {pc_in(c, c->dt, nd, xd, -3, 5), pc_in(c, c->dt, nd - a0, xd + a0, 0.5, 1.5)};
        mge_attr at[2] = {A(MGE_KEY_axis, ax), A_f(MGE_KEY_eps, 1e-5)};
        return pc_out(c, pc_node(c, MGE_OP_RMS_NORM, 2, in, pr(c, 0, 1) ? 2 : 1, at));
    }
    static const int64_t gs[] = {1, 2, 3, 4};
    int64_t G = gs[pr(c, 0, 3)];
    nd = (int)pr(c, 2, 4);
    xd[0] = pr(c, 1, 3), xd[1] = G * pr(c, 1, 4);
    for (int i = 2; i < nd; i++)
        xd[i] = pdim(c, 9);
    if (PC_BIG(c))
        nd = 4, xd[0] = 4, xd[1] = 32, xd[2] = 28, xd[3] = 28, G = 8;
    int inst = c->op == MGE_OP_INSTANCE_NORM, affine = !inst || pr(c, 0, 1);
    int64_t M = (inst ? 1 : xd[1] / G);
    for (int i = 2; i < nd; i++)
        M *= xd[i];
    /* a group of a few values cancels terms scaled by 1/sigma (as batchnorm's) */
    c->nograd = M < 8;
    int64_t cd[1] = {xd[1]};
    int in[3] = {pc_in(c, c->dt, nd, xd, -2, 2), pc_in(c, c->dt, 1, cd, 0.5, 1.5), pc_in(c, c->dt, 1, cd, -1, 1)};
    mge_attr at[2] = {A_f(MGE_KEY_eps, 1e-5), inst ? A(MGE_KEY_affine, affine) : A(MGE_KEY_num_groups, G)};
    return pc_out(c, pc_node(c, c->op, affine ? 3 : 1, in, 2, at));
}

/* ---------------------------------------------------------------- gpt group: sort, scans, more reductions */

static int pc_sortable(mge_dtype dt)
{
    return dt != MGE_BOOL && dt != MGE_QS8 && dt != MGE_QS32;
}

/* Adds a node with nout outputs and compares them all. */
static int pc_multi(pcase *c, int op, int x, int nattr, const mge_attr *at, int nout)
{
    char names[2][16];
    const char *outn[2];
    for (int i = 0; i < nout; i++) {
        snprintf(names[i], sizeof names[i], "n%d", c->nnames++);
        outn[i] = names[i];
    }
    mge_error err;
    if (x < 0)
        return PC_RETRY;
    int nn = mge_graph_add_node(c->g, outn[0], op, 1, &x, nattr, at, nout, outn, &err);
    if (nn < 0)
        return PC_RETRY;
    for (int i = 0; i < nout; i++)
        if (pc_out(c, c->g->nodes[nn].out[i]) != PC_OK)
            return PC_RETRY;
    return PC_OK;
}

/* topk, sort, argsort: ties (small integer data) keep index order and NaN
 * sorts last, so every backend gives the same bits. The big cases sort
 * rows of 1000 (cpu: topk with k <= 32 selects by insertion, larger k
 * sorts), split over the pool. */
static int gen_sort(pcase *c)
{
    if (!pc_sortable(c->dt))
        return PC_NODT;
    int64_t d[4];
    int nd = pshape(c, 1, 4, 17, d);
    int ax = (int)pr(c, -nd, nd - 1), a = ax < 0 ? ax + nd : ax;
    if (PC_BIG(c))
        nd = 2, d[0] = 48, d[1] = 1000, ax = a = pr(c, 0, 3) ? 1 : 0;
    int x = pc_in(c, c->dt, nd, d, pc_lo(c->dt), 100);
    if (x >= 0 && pr(c, 0, 1))   /* ties */
        pc_fill(c, pc_data(c, x), -3, 3);
    if (c->variant % 4 == 3)
        pc_specials(c, x, 1);
    mge_attr at[3];
    int na = 0;
    at[na++] = A(MGE_KEY_axis, ax);
    if (c->op == MGE_OP_TOPK) {
        int64_t k = pr(c, 0, 3) ? pr(c, 0, d[a] < 40 ? d[a] : 40) : pr(c, 0, d[a]);
        at[na++] = A(MGE_KEY_k, k);
        at[na++] = A(MGE_KEY_largest, pr(c, 0, 1));
        return pc_multi(c, c->op, x, na, at, 2);
    }
    at[na++] = A(MGE_KEY_descending, pr(c, 0, 1));
    return pc_multi(c, c->op, x, na, at, c->op == MGE_OP_SORT ? 2 : 1);
}

/* cumsum: floats and integers (wrapping), exclusive and reverse; the big
 * cases scan rows of 1003 and columns of 64. */
static int gen_cumsum(pcase *c)
{
    if (!pc_sortable(c->dt))
        return PC_NODT;
    int64_t d[4];
    int nd = pshape(c, 1, 4, 17, d);
    int ax = (int)pr(c, -nd, nd - 1);
    if (PC_BIG(c))
        nd = 2, d[0] = 64, d[1] = 1003, ax = (int)pr(c, 0, 1);
    int fl = is_float(c->dt);
    int x = pc_in(c, c->dt, nd, d, fl ? -1 : pc_lo(c->dt), fl ? 1 : 100);
    mge_attr at[3] = {A(MGE_KEY_axis, ax), A(MGE_KEY_exclusive, pr(c, 0, 1)), A(MGE_KEY_reverse, pr(c, 0, 1))};
    return pc_out(c, pc_un(c, MGE_OP_CUMSUM, x, 3, at));
}

/* prod, min, argmin: like gen_reduce; prod's floats near 1 (products of
 * hundreds stay finite), sometimes with zeros (its gradient's special
 * cases). */
static int gen_reduce_more(pcase *c)
{
    int op = c->op, fl = is_float(c->dt);
    if (!pc_sortable(c->dt))
        return PC_NODT;
    int64_t d[4];
    int nd = pshape(c, 1, 4, 13, d);
    if (PC_BIG(c))
        nd = 2, d[0] = 64, d[1] = 301;
    mge_attr at[2];
    int na = 0;
    if (op == MGE_OP_ARGMIN) {
        at[na++] = A(MGE_KEY_axis, pr(c, -nd, nd - 1));
    } else if (pr(c, 0, 3)) {
        int64_t ax[4];
        int n = 0;
        for (int i = 0; i < nd; i++)
            if (pr(c, 0, 1))
                ax[n++] = pr(c, 0, 1) ? i : i - nd;
        if (n == 0)
            ax[n++] = pr(c, 0, nd - 1);
        at[na++] = A_ints(MGE_KEY_axis, n, ax);
    }
    at[na++] = A(MGE_KEY_keepdim, pr(c, 0, 1));
    int x;
    if (op == MGE_OP_PROD && fl) {
        x = pc_in(c, c->dt, nd, d, 0.9, 1.1);
        mge_tensor *t = x >= 0 ? pc_data(c, x) : NULL;
        for (int k = 0; t && k < (int)pr(c, 0, 2); k++)
            pc_set(t, pr(c, 0, mge_tensor_numel(t) - 1), pr(c, 0, 1) ? -1.0f : 0.0f);
    } else {
        x = pc_in(c, c->dt, nd, d, pc_lo(c->dt), 100);
        if (x >= 0 && (!fl || pr(c, 0, 1)))
            pc_fill(c, pc_data(c, x), op == MGE_OP_PROD ? -2 : -3, op == MGE_OP_PROD ? 2 : 3);
        if (c->variant % 4 == 3 && op != MGE_OP_PROD)
            pc_specials(c, x, 1);
    }
    return pc_out(c, pc_un(c, op, x, na, at));
}

/* ---------------------------------------------------------------- group "attn" */

/* embedding: i32/i64 indices of rank 0..3 into an f32 table; the big case
 * a token batch into a table of 3000 rows. */
static int gen_embedding(pcase *c)
{
    if (c->dt != MGE_I32 && c->dt != MGE_I64)
        return PC_NODT;
    int64_t id[3], wd[2] = {pdim(c, 33), pdim(c, 17)};
    int ni = pshape(c, 0, 3, 9, id);
    if (PC_BIG(c))
        ni = 2, id[0] = 8, id[1] = 100, wd[0] = 3000, wd[1] = 64;
    int idx = pc_in(c, c->dt, ni, id, 0, (double)wd[0] - 0.5);
    int w = pc_val(c, MGE_VAL_PARAM, MGE_F32, 2, wd, -1, 1);
    mge_attr at[2] = {A(MGE_KEY_num, wd[0]), A(MGE_KEY_dim, wd[1])};
    return pc_out(c, pc_node(c, MGE_OP_EMBEDDING, 2, (int[]){idx, w}, 2, at));
}

/* scaled_dot_product_attention: 0..2 leading dims, Sq != Sk, no mask, a
 * bool or a float one of a random broadcast shape, causal or not, the
 * default or a given scale. Key 0 is never masked, so no row is fully
 * masked (NaN). The big cases span several query and key tiles. */
static int gen_sdpa(pcase *c)
{
    if (!is_float(c->dt))
        return PC_NODT;
    int nl = (int)pr(c, 0, 2);
    int64_t d[4] = {pdim(c, 3), pdim(c, 3), 0, 0}, Sq = pdim(c, 17), Sk = pdim(c, 17), D = pdim(c, 17),
            Dv = pdim(c, 9);
    if (PC_BIG(c))
        nl = 2, d[0] = 2, d[1] = 3, Sq = 150, Sk = 300, D = 32, Dv = 24;
    int64_t qd[4], kd[4], vd[4], md[4];
    for (int i = 0; i < nl; i++)
        qd[i] = kd[i] = vd[i] = d[i];
    qd[nl] = Sq, qd[nl + 1] = D, kd[nl] = Sk, kd[nl + 1] = D, vd[nl] = Sk, vd[nl + 1] = Dv;
    int in[4] = {pc_in(c, c->dt, nl + 2, qd, -1, 1), pc_in(c, c->dt, nl + 2, kd, -1, 1),
                 pc_in(c, c->dt, nl + 2, vd, -1, 1), -1};
    int kind = (int)pr(c, 0, 2), nin = 3;
    if (kind) {
        int mr = (int)pr(c, 1, nl + 2);   /* the mask's rank, aligned right */
        for (int i = 0; i < mr; i++) {
            int td = nl + 2 - mr + i;   /* the score dim it broadcasts to */
            int64_t f = td == nl + 1 ? Sk : td == nl ? Sq : d[td];
            md[i] = pr(c, 0, 2) ? f : 1;
        }
        if (mr == 1 || md[mr - 1] == 1)
            md[mr - 1] = Sk;   /* keys vary: keep key 0 for every row */
        in[3] = pc_in(c, kind == 1 ? MGE_BOOL : c->dt, mr, md, -2, 2);
        mge_tensor *t = pc_data(c, in[3]);
        int64_t n = mge_tensor_numel(t);
        for (int64_t i = 0; i < n; i++)
            if (i % Sk == 0) {
                if (kind == 1)
                    ((uint8_t *)t->data)[i] = 1;
            } else if (kind == 2 && pr(c, 0, 5) == 0) {
                pc_set(t, i, -INFINITY);
            }
        nin = 4;
    }
    mge_attr at[3];
    int na = 0;
    if (pr(c, 0, 1))
        at[na++] = A(MGE_KEY_causal, 1);
    if (pr(c, 0, 2) == 0)
        at[na++] = A_f(MGE_KEY_scale, pu(c, 0.05, 0.6));
    /* every fourth variant in training with dropout: forward and grad
     * draw the same weights on every backend (one seed per run) */
    if (c->variant % 4 == 1) {
        c->training = 1;
        at[na++] = A_f(MGE_KEY_dropout, pu(c, 0.1, 0.5));
    }
    return pc_out(c, pc_node(c, MGE_OP_SDPA, nin, in, na, at));
}

/* ---------------------------------------------------------------- elementwise math (group elem) */

/* The table ops added with kernels/kact.h, isnan/isinf: random shapes
 * (variant % 10 == 0 large enough for the pool), a third of the cases
 * with 0, -0, NaN and inf at random places, random attributes. sign,
 * square and clamp (integer bounds) also on integers. */
static int gen_elem_math(pcase *c)
{
    int op = c->op;
    int intdt = c->dt == MGE_I8 || c->dt == MGE_I16 || c->dt == MGE_I32 || c->dt == MGE_I64;
    if (!is_float(c->dt) && !((op == MGE_OP_SIGN || op == MGE_OP_SQUARE || op == MGE_OP_CLAMP) && intdt))
        return PC_NODT;
    int64_t d[4];
    int nd = pshape(c, 0, 4, 9, d);
    if (PC_BIG(c))
        nd = 2, d[0] = 4, d[1] = pr(c, 5000, 12000);
    double lo = -8, hi = 8;
    if (op == MGE_OP_RSQRT)
        lo = 0.001, hi = 50;
    if (op == MGE_OP_SOFTPLUS || op == MGE_OP_MISH || op == MGE_OP_ELU || op == MGE_OP_SELU)
        lo = -30, hi = 30;
    if (op == MGE_OP_ROUND)
        lo = -4, hi = 4;   /* many halves after the f16/bf16 rounding of the inputs */
    if (op == MGE_OP_ACOS || op == MGE_OP_ASIN || op == MGE_OP_ATANH)
        lo = -1.1, hi = 1.1;   /* the domain, and a little NaN past it */
    if (op == MGE_OP_ACOSH)
        lo = 0.9, hi = 8;
    if (c->dt == MGE_I8)
        lo = -128, hi = 128;
    else if (intdt)
        lo = -1000, hi = 1000;
    int x = pc_in_inplace(c, c->variant % 3 == 2 && op != MGE_OP_ISNAN && op != MGE_OP_ISINF, c->dt, nd, d, lo, hi);
    if ((c->variant % 3 == 1 || op == MGE_OP_ISNAN || op == MGE_OP_ISINF) && is_float(c->dt))
        pc_specials(c, c->g->inputs[0], 1);
    mge_attr at[2];
    int na = 0;
    static const double bounds[] = {-2, -0.5, 0, 0.25, 1, 3}, ibounds[] = {-100, -3, 0, 2, 50, 120};
    const double *bs = intdt ? ibounds : bounds;
    switch (op) {
    case MGE_OP_CLAMP: {
        int which = (int)pr(c, 0, 2);
        if (which != 1)
            at[na++] = A_f(MGE_KEY_min, ppick(c, 6, bs));
        if (which != 0)
            at[na++] = A_f(MGE_KEY_max, ppick(c, 6, bs));   /* at times below min */
        break;
    }
    case MGE_OP_HARDTANH: {
        double a = ppick(c, 6, bounds), b = ppick(c, 6, bounds);
        at[na++] = A_f(MGE_KEY_min, a < b ? a : b);
        at[na++] = A_f(MGE_KEY_max, a < b ? b : a);
        break;
    }
    case MGE_OP_SOFTPLUS: {
        static const double beta[] = {1, 0.5, 2, -1}, thr[] = {20, 1, 5};
        at[na++] = A_f(MGE_KEY_beta, ppick(c, 4, beta));
        at[na++] = A_f(MGE_KEY_threshold, ppick(c, 3, thr));
        break;
    }
    case MGE_OP_ELU: {
        static const double alpha[] = {1, 0.5, 1.7};
        at[na++] = A_f(MGE_KEY_alpha, ppick(c, 3, alpha));
        break;
    }
    case MGE_OP_SHRINK: {
        static const double lambd[] = {0.5, 0, 2, -1}, shift[] = {0, 0.5, 2, -1};
        at[na++] = A_f(MGE_KEY_lambd, ppick(c, 4, lambd));
        at[na++] = A_f(MGE_KEY_shift, ppick(c, 4, shift));
        break;
    }
    }
    return pc_out(c, pc_un(c, op, x, na, at));
}

/* prelu(x[N,C,...], weight[1 or C]); the weight a param (its gradient is compared). */
static int gen_prelu(pcase *c)
{
    if (!is_float(c->dt))
        return PC_NODT;
    int64_t d[4];
    int nd = pshape(c, 2, 4, 9, d);
    if (PC_BIG(c))
        nd = 3, d[0] = 2, d[1] = 4, d[2] = pr(c, 2000, 5000);
    int x = pc_in_inplace(c, 0, c->dt, nd, d, -4, 4);
    if (c->variant % 3 == 1)
        pc_specials(c, c->g->inputs[0], 1);
    int64_t num = pr(c, 0, 1) ? d[1] : 1;
    int in[2] = {x, pc_val(c, MGE_VAL_PARAM, c->dt, 1, &num, -1, 1)};
    mge_attr at[1] = {A(MGE_KEY_num, num)};
    return pc_out(c, pc_node(c, MGE_OP_PRELU, 2, in, 1, at));
}

/* ---------------------------------------------------------------- spatial sampling */

/* grid_sample: 4-D (every mode) or 5-D (nearest, bilinear), every padding
 * mode, align_corners both ways, the grid past [-1, 1]; the big case
 * samples 4x16x32x32 at 48x48 points. */
static int gen_grid_sample(pcase *c)
{
    if (!is_float(c->dt))
        return PC_NODT;
    int k = pr(c, 0, 2) ? 2 : 3;
    int64_t xd[5] = {pr(c, 1, 3), pdim(c, 4)}, gd[5];
    gd[0] = xd[0];
    for (int i = 0; i < k; i++)
        xd[2 + i] = pdim(c, k == 2 ? 9 : 5), gd[1 + i] = pdim(c, k == 2 ? 7 : 4);
    gd[k + 1] = k;
    if (PC_BIG(c)) {
        k = 2, xd[0] = gd[0] = 4, xd[1] = 16, xd[2] = xd[3] = 32, gd[1] = gd[2] = 48, gd[3] = 2;
    }
    int mode = (int)pr(c, 0, k == 2 ? 2 : 1);
    static const int modes[3] = {MGE_MODE_BILINEAR, MGE_MODE_NEAREST, MGE_MODE_BICUBIC};
    int in[2] = {pc_in(c, c->dt, k + 2, xd, -2, 2), pc_in(c, c->dt, k + 2, gd, -1.2, 1.2)};
    mge_attr at[3] = {A(MGE_KEY_mode, modes[mode]), A(MGE_KEY_padding_mode, pr(c, 0, 2)),
                      A(MGE_KEY_align_corners, pr(c, 0, 1))};
    return pc_out(c, pc_node(c, MGE_OP_GRID_SAMPLE, 2, in, 3, at));
}

/* roi_align: rois partly outside the image, either pooling, aligned both
 * ways, fixed or adaptive sampling; the big case pools 64 rois of a
 * 2x32x40x40 map to 7x7. */
static int gen_roi_align(pcase *c)
{
    if (!is_float(c->dt))
        return PC_NODT;
    int64_t xd[4] = {pr(c, 1, 3), pdim(c, 4), pdim(c, 12), pdim(c, 12)}, R = pr(c, 1, 6);
    int64_t os[2] = {pdim(c, 4), pdim(c, 4)};
    if (PC_BIG(c))
        xd[0] = 2, xd[1] = 32, xd[2] = xd[3] = 40, R = 64, os[0] = os[1] = 7;
    int64_t rd[2] = {R, 4};
    int in[3] = {pc_in(c, c->dt, 4, xd, -2, 2), pc_in(c, c->dt, 2, rd, -2, (double)xd[3] + 2),
                 pc_in(c, pc_idt(c), 1, &R, 0, (double)(xd[0] - 1))};
    mge_attr at[5] = {A2(MGE_KEY_output_size, os[0], os[1]), A(MGE_KEY_pooling, pr(c, 0, 1)),
                      A(MGE_KEY_sampling_ratio, pr(c, 0, 3)), A_f(MGE_KEY_spatial_scale, pr(c, 0, 1) ? 1 : 0.5),
                      A(MGE_KEY_aligned, pr(c, 0, 1))};
    return pc_out(c, pc_node(c, MGE_OP_ROI_ALIGN, 3, in, 5, at));
}

/* deform_conv2d: groups and offset groups, stride, pad, dilation, offsets
 * of a few pixels, with or without bias and mask. */
static int gen_deform_conv2d(pcase *c)
{
    if (!is_float(c->dt))
        return PC_NODT;
    int64_t g = pr(c, 1, 2), og = pr(c, 1, 2), C = g * og * pr(c, 1, 2), O = g * pr(c, 1, 3);
    int64_t xd[4] = {pr(c, 1, 2), C, pr(c, 3, 9), pr(c, 3, 9)}, k[2] = {pr(c, 1, 3), pr(c, 1, 3)};
    int64_t s[2] = {pr(c, 1, 2), pr(c, 1, 2)}, p[2] = {pr(c, 0, 1), pr(c, 0, 1)}, d[2] = {pr(c, 1, 2), pr(c, 1, 2)};
    int64_t o[2];
    for (int i = 0; i < 2; i++)
        if ((o[i] = mge_conv_out_dim(xd[2 + i], k[i], s[i], p[i], d[i], 0)) < 1)
            return PC_RETRY;
    int64_t wd[4] = {O, C / g, k[0], k[1]}, od[4] = {xd[0], 2 * og * k[0] * k[1], o[0], o[1]},
            md[4] = {xd[0], og * k[0] * k[1], o[0], o[1]};
    int nin = 3 + (int)pr(c, 0, 2);
    int in[5] = {pc_in(c, c->dt, 4, xd, -2, 2), pc_in(c, c->dt, 4, wd, -1, 1), pc_in(c, c->dt, 4, od, -2.5, 2.5)};
    if (nin > 3)
        in[3] = pc_in(c, c->dt, 1, &O, -1, 1);
    if (nin > 4)
        in[4] = pc_in(c, c->dt, 4, md, 0, 1);
    mge_attr at[5] = {A2(MGE_KEY_stride, s[0], s[1]), A2(MGE_KEY_pad, p[0], p[1]), A2(MGE_KEY_dilation, d[0], d[1]),
                      A(MGE_KEY_groups, g), A(MGE_KEY_offset_groups, og)};
    return pc_out(c, pc_node(c, MGE_OP_DEFORM_CONV2D, nin, in, 5, at));
}

/* maxpool3d (float, i8, u8; with the indices output half the time),
 * avgpool3d (float): random windows, strides, dilations, asymmetric pads
 * up to the window, ceil_mode, both divisors. max_unpool: indices drawn
 * over the output (repeats: the last wins on every backend, ref's loop). */
static int gen_pool3d(pcase *c)
{
    int mx = c->op == MGE_OP_MAXPOOL3D;
    if (!is_float(c->dt) && !(mx && (c->dt == MGE_I8 || c->dt == MGE_U8)))
        return PC_NODT;
    int64_t xd[5] = {pr(c, 1, 2), pdim(c, 3), pdim(c, 6), pdim(c, 7), pdim(c, 7)}, k[3], s[3], d[3], p[6];
    for (int i = 0; i < 3; i++) {
        k[i] = pr(c, 1, 3), s[i] = pr(c, 1, 2), d[i] = pr(c, 1, 2);
        p[i] = pr(c, 0, k[i] - 1), p[3 + i] = pr(c, 0, k[i] - 1);
    }
    if (PC_BIG(c)) {
        xd[0] = 1, xd[1] = 8, xd[2] = 8, xd[3] = xd[4] = 16;
        for (int i = 0; i < 3; i++)
            k[i] = 3, s[i] = 2, d[i] = 1, p[i] = p[3 + i] = 1;
    }
    mge_attr at[6] = {A_ints(MGE_KEY_kernel, 3, k), A_ints(MGE_KEY_stride, 3, s), A_ints(MGE_KEY_pad, 6, p),
                      A_ints(MGE_KEY_dilation, 3, d), A(MGE_KEY_ceil_mode, pr(c, 0, 1)),
                      mx ? A(MGE_KEY_storage_order, pr(c, 0, 1)) : A(MGE_KEY_count_include_pad, pr(c, 0, 1))};
    int x = pc_in(c, c->dt, 5, xd, is_float(c->dt) ? -3 : -128, is_float(c->dt) ? 3 : 255);
    if (c->variant % 4 == 3)
        pc_specials(c, x, 1);
    if (!mx || pr(c, 0, 1))
        return pc_out(c, pc_un(c, c->op, x, 6, at));
    /* both outputs compared */
    char name[32], iname[40];
    snprintf(name, sizeof name, "n%d", c->nnames++);
    snprintf(iname, sizeof iname, "%s_i", name);
    const char *outn[2] = {name, iname};
    mge_error e;
    int n = x < 0 ? -1 : mge_graph_add_node(c->g, name, c->op, 1, &x, 6, at, 2, outn, &e);
    if (n < 0)
        return PC_RETRY;
    int y = c->g->nodes[n].out[0], yi = c->g->nodes[n].out[1];
    return pc_out(c, y) == PC_OK ? pc_out(c, yi) : PC_RETRY;
}

static int gen_max_unpool(pcase *c)
{
    if (!pc_plain(c->dt))
        return PC_NODT;
    int nsp = (int)pr(c, 1, 3);
    int64_t xd[5] = {pr(c, 1, 2), pdim(c, 3)}, k[3], s[3], p[6] = {0}, yn = xd[0] * xd[1];
    for (int i = 0; i < nsp; i++) {
        xd[2 + i] = pdim(c, 4), k[i] = pr(c, 1, 3), s[i] = pr(c, 1, 3);
        yn *= (xd[2 + i] - 1) * s[i] + k[i];
    }
    mge_attr at[3] = {A_ints(MGE_KEY_kernel, nsp, k), A_ints(MGE_KEY_stride, nsp, s), A_ints(MGE_KEY_pad, nsp, p)};
    int in[2] = {pc_in(c, c->dt, 2 + nsp, xd, pc_lo(c->dt), 100), pc_in(c, pc_idt(c), 2 + nsp, xd, 0, (double)(yn - 1))};
    return pc_out(c, pc_node(c, MGE_OP_MAX_UNPOOL, 2, in, 3, at));
}
#endif
