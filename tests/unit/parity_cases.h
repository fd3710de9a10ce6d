/* parity_cases.h — the case generators of test_parity.c.
 *
 * A generator builds one small valid graph around its op for the dtype it
 * is asked for: random shapes (odd sizes, broadcasting), attributes
 * (stride, pad, dilation, groups, axes, scales) and data, all drawn from the
 * case's own generator c->r, so a case depends only on (seed, op, dtype,
 * index). Helper nodes (to_nchwc before a blocked op, winograd_weight
 * before conv2d_winograd, a neg that lets the op run in place) sit in the
 * same graph and run on the same backend. A generator returns PC_OK, PC_RETRY
 * when the graph refused the random geometry (the harness draws again),
 * or PC_NODT when it cannot make that dtype (the coverage check then fails
 * unless the op x dtype is listed as not covered, with the reason).
 * Variants 0, 10, 20, ... are large: big enough that the cpu kernels take
 * their blocked, vector and multi-thread paths. */
#ifndef MGE_PARITY_CASES_H
#define MGE_PARITY_CASES_H
#include "unit_graph.h"

#define PC_MAXIN 24
#define PC_MAXOUT 8

enum { PC_NODT = -1, PC_RETRY = 0, PC_OK = 1 };
/* every tenth case is a large one (variant 0 first) */
#define PC_BIG(c) ((c)->variant % 10 == 0)

typedef struct pcase {
    mge_graph *g;
    int op, variant;
    mge_dtype dt;
    mge_rng r;
    int nin;
    mge_tensor in[PC_MAXIN];   /* data of g->inputs, in order */
    int nout, outs[PC_MAXOUT]; /* the values compared */
    int training;              /* run in training mode (dropout, batch statistics) */
    int nograd;                /* no gradient graph: ill-conditioned here (the generator says why) */
    int nnames;
} pcase;

typedef int (*pc_gen)(pcase *c);

/* ---------------------------------------------------------------- random draws */

static int64_t pr(pcase *c, int64_t lo, int64_t hi)   /* inclusive */
{
    return lo + (int64_t)(mge_rng_next(&c->r) % (uint64_t)(hi - lo + 1));
}

static double pu(pcase *c, double lo, double hi)
{
    return lo + (hi - lo) * (double)mge_rng_uniform(&c->r);
}

/* A dimension up to hi, mostly odd: sizes that end vector loops early. */
static int64_t pdim(pcase *c, int64_t hi)
{
    static const int64_t sz[] = {1, 2, 3, 5, 7, 8, 9, 13, 16, 17, 31, 33};
    int n = 0;
    while (n < (int)(sizeof sz / sizeof sz[0]) && sz[n] <= hi)
        n++;
    return sz[pr(c, 0, n - 1)];
}

static double ppick(pcase *c, int n, const double *v)
{
    return v[pr(c, 0, n - 1)];
}

/* A random shape of rank lo..hi with dims pdim(maxdim). */
static int pshape(pcase *c, int lo, int hi, int64_t maxdim, int64_t *d)
{
    int nd = (int)pr(c, lo, hi);
    for (int i = 0; i < nd; i++)
        d[i] = pdim(c, maxdim);
    return nd;
}

static int is_float(mge_dtype dt)
{
    return dt == MGE_F32 || dt == MGE_F16 || dt == MGE_BF16 || dt == MGE_F64;
}

/* ---------------------------------------------------------------- values and nodes */

/* Random data in [lo, hi): floats uniform; integers uniform over the
 * integers of the range clamped to the dtype's; bool 0/1. */
static void pc_fill(pcase *c, mge_tensor *t, double lo, double hi)
{
    int64_t n = mge_tensor_numel(t);
    double ilo = ceil(lo), ihi = floor(hi);
    if (t->dtype == MGE_I8 || t->dtype == MGE_QS8)
        ilo = fmax(ilo, -128), ihi = fmin(ihi, 127);
    if (t->dtype == MGE_U8)
        ilo = fmax(ilo, 0), ihi = fmin(ihi, 255);
    if (t->dtype == MGE_I16)
        ilo = fmax(ilo, -32768), ihi = fmin(ihi, 32767);
    if (t->dtype == MGE_U16 || t->dtype == MGE_U32 || t->dtype == MGE_U64)
        ilo = fmax(ilo, 0);
    if (ihi < ilo)
        ihi = ilo;
    for (int64_t i = 0; i < n; i++) {
        double f = pu(c, lo, hi);
        int64_t k = (int64_t)ilo + (int64_t)(mge_rng_next(&c->r) % (uint64_t)(ihi - ilo + 1));
        switch (t->dtype) {
        case MGE_F32: ((float *)t->data)[i] = (float)f; break;
        case MGE_F16: ((uint16_t *)t->data)[i] = mge_f32_to_f16((float)f); break;
        case MGE_BF16: ((uint16_t *)t->data)[i] = mge_f32_to_bf16((float)f); break;
        case MGE_I8:
        case MGE_QS8: ((int8_t *)t->data)[i] = (int8_t)k; break;
        case MGE_U8: ((uint8_t *)t->data)[i] = (uint8_t)k; break;
        case MGE_BOOL: ((uint8_t *)t->data)[i] = (uint8_t)(mge_rng_next(&c->r) & 1); break;
        case MGE_I32:
        case MGE_QS32: ((int32_t *)t->data)[i] = (int32_t)k; break;
        case MGE_I64: ((int64_t *)t->data)[i] = k; break;
        case MGE_F64: ((double *)t->data)[i] = f; break;
        case MGE_I16: ((int16_t *)t->data)[i] = (int16_t)k; break;
        case MGE_U16: ((uint16_t *)t->data)[i] = (uint16_t)k; break;
        case MGE_U32: ((uint32_t *)t->data)[i] = (uint32_t)k; break;
        case MGE_U64: ((uint64_t *)t->data)[i] = (uint64_t)k; break;
        default: break;
        }
    }
}

/* Element i of a float tensor set to v (specials: 0, -0, NaN, inf). */
static void pc_set(mge_tensor *t, int64_t i, float v)
{
    if (t->dtype == MGE_F32)
        ((float *)t->data)[i] = v;
    else if (t->dtype == MGE_F16)
        ((uint16_t *)t->data)[i] = mge_f32_to_f16(v);
    else if (t->dtype == MGE_BF16)
        ((uint16_t *)t->data)[i] = mge_f32_to_bf16(v);
    else if (t->dtype == MGE_F64)
        ((double *)t->data)[i] = v;
}

/* A value of the case's graph with random data: a graph input (data in
 * c->in) or a param, state or const (data bound in the graph). */
static int pc_val(pcase *c, mge_valkind kind, mge_dtype dt, int nd, const int64_t *d, double lo, double hi)
{
    mge_error err;
    char name[32];
    snprintf(name, sizeof name, "%s%d", kind == MGE_VAL_INPUT ? "x" : kind == MGE_VAL_STATE ? "s" : "p",
             c->nnames++);
    if (kind == MGE_VAL_INPUT && c->nin >= PC_MAXIN)
        return -1;
    int v = mge_graph_add_value(c->g, name, kind, dt, nd, d, &err);
    CHECK_MSG(v >= 0, "%s", err.msg);
    if (v < 0)
        return -1;
    mge_tensor *t = kind == MGE_VAL_INPUT ? &c->in[c->nin++] : calloc(1, sizeof *t);
    if (kind != MGE_VAL_INPUT)
        c->g->values[v].data = t;
    CHECK_OK(mge_tensor_alloc(t, dt, nd, d, &err), err);
    pc_fill(c, t, lo, hi);
    return v;
}

static int pc_in(pcase *c, mge_dtype dt, int nd, const int64_t *d, double lo, double hi)
{
    return pc_val(c, MGE_VAL_INPUT, dt, nd, d, lo, hi);
}

/* The data of value v (an input's in c->in, else the bound tensor). */
static mge_tensor *pc_data(pcase *c, int v)
{
    for (int i = 0; i < c->g->ninputs; i++)
        if (c->g->inputs[i] == v)
            return &c->in[i];
    return c->g->values[v].data;
}

/* A few special values at random places of float value v. */
static void pc_specials(pcase *c, int v, int with_inf)
{
    mge_tensor *t = v >= 0 ? pc_data(c, v) : NULL;
    const float sp[] = {0.0f, -0.0f, NAN, INFINITY, -INFINITY};
    if (!t || !is_float(t->dtype) || mge_tensor_numel(t) == 0)
        return;
    int64_t n = mge_tensor_numel(t);
    for (int k = 0; k < 3; k++)
        pc_set(t, pr(c, 0, n - 1), sp[pr(c, 0, with_inf ? 4 : 2)]);
}

/* Adds a node with one output; its output value, or -1 when an input is
 * missing or the graph refuses the node (a geometry to draw again). */
static int pc_node(pcase *c, int op, int nin, const int *in, int nattr, const mge_attr *at)
{
    mge_error err;
    for (int i = 0; i < nin; i++)
        if (in[i] < 0)
            return -1;
    char name[32];
    snprintf(name, sizeof name, "n%d", c->nnames++);
    const char *outn[1] = {name};
    int n = mge_graph_add_node(c->g, name, op, nin, in, nattr, at, 1, outn, &err);
    if (n < 0 && getenv("PARITY_DEBUG"))
        fprintf(stderr, "parity: %s refused: %s\n", mge_op_info(op)->name, err.msg);
    return n < 0 ? -1 : c->g->nodes[n].out[0];
}

static int pc_un(pcase *c, int op, int x, int nattr, const mge_attr *at)
{
    return pc_node(c, op, 1, &x, nattr, at);
}

/* Marks v as compared; PC_OK, or PC_RETRY when v is missing. */
static int pc_out(pcase *c, int v)
{
    if (v < 0 || c->nout >= PC_MAXOUT)
        return PC_RETRY;
    c->outs[c->nout++] = v;
    return PC_OK;
}

static const mge_value *pc_v(pcase *c, int v)
{
    return &c->g->values[v];
}

static mge_attr A2(int key, int64_t a, int64_t b)
{
    int64_t v[2] = {a, b};
    return A_ints(key, 2, v);
}

/* The input of an in-place-able op: with inplace, a neg node's output (in
 * the executor's arena, read once, so the planner may hand its buffer to
 * the op), fed with the negated range; else a plain input. */
static int pc_in_inplace(pcase *c, int inplace, mge_dtype dt, int nd, const int64_t *d, double lo, double hi)
{
    int neg_ok = is_float(dt) || dt == MGE_I8 || dt == MGE_I16 || dt == MGE_I32 || dt == MGE_I64;
    if (!inplace || !neg_ok)
        return pc_in(c, dt, nd, d, lo, hi);
    return pc_un(c, MGE_OP_NEG, pc_in(c, dt, nd, d, -hi, -lo), 0, NULL);
}

/* A random activation of the fused layer ops (-1: none). */
static int64_t pc_act(pcase *c)
{
    static const int acts[] = {-1, -1, MGE_OP_RELU, MGE_OP_RELU6, MGE_OP_LEAKY_RELU, MGE_OP_SIGMOID,
                               MGE_OP_TANH, MGE_OP_GELU, MGE_OP_SILU, MGE_OP_HSWISH, MGE_OP_HSIGMOID,
                               MGE_OP_ELU,  MGE_OP_SELU, MGE_OP_MISH, MGE_OP_SOFTSIGN};
    return acts[pr(c, 0, (int64_t)(sizeof acts / sizeof acts[0]) - 1)];
}

/* ---------------------------------------------------------------- conv geometry */

typedef struct pconv {
    int64_t N, C, H, W, O, k[2], s[2], p[2], d[2], G;
    int bias;
} pconv;

/* Random conv geometry: depthwise (with a channel multiplier), 1x1,
 * grouped or dense; kernels 1..5 (not square at times), stride 1..3, pad
 * 0..2, dilation 1..2. big: a layer large enough for the blocked paths. */
static void pc_conv_geom(pcase *c, pconv *q, int big)
{
    int64_t mode = pr(c, 0, 3), cg = pr(c, 1, 5), og = pr(c, 1, 4);
    q->G = pr(c, 1, 3);
    if (mode == 0)
        q->G = pr(c, 1, 9), cg = 1, og = pr(c, 1, 2);
    q->k[0] = pr(c, 1, 5);
    q->k[1] = pr(c, 0, 2) ? q->k[0] : pr(c, 1, 5);
    for (int i = 0; i < 2; i++) {
        q->s[i] = i && pr(c, 0, 2) ? q->s[0] : pr(c, 1, 3);
        q->p[i] = pr(c, 0, 2);
        q->d[i] = pr(c, 1, 2);
    }
    if (mode == 1)
        q->k[0] = q->k[1] = 1, q->s[0] = q->s[1] = 1, q->p[0] = q->p[1] = 0;
    q->N = pr(c, 1, 2);
    q->C = cg * q->G;
    q->O = og * q->G;
    q->H = pdim(c, 13);
    q->W = pdim(c, 13);
    q->bias = (int)pr(c, 0, 1);
    if (big) {   /* the layers of real nets: dense 3x3, the stem, depthwise, 1x1 */
        int64_t kind = pr(c, 0, 3);
        q->N = 1, q->C = pr(c, 8, 40), q->H = pr(c, 12, 30), q->W = pr(c, 12, 30), q->O = pr(c, 16, 64), q->G = 1;
        q->k[0] = q->k[1] = 3, q->s[0] = q->s[1] = pr(c, 1, 2), q->p[0] = q->p[1] = 1, q->d[0] = q->d[1] = 1;
        if (kind == 1)
            q->C = 3, q->k[0] = q->k[1] = 7, q->s[0] = q->s[1] = 2, q->p[0] = q->p[1] = 3;
        if (kind == 2)
            q->G = q->C, q->O = q->C * pr(c, 1, 2);
        if (kind == 3)
            q->k[0] = q->k[1] = 1, q->p[0] = q->p[1] = 0;
    }
}

static int64_t pc_conv_oh(const pconv *q, int i)
{
    return mge_conv_out_dim(i ? q->W : q->H, q->k[i], q->s[i], q->p[i], q->d[i], 0);
}

/* out kernel stride pad dilation groups bias into at; the count. */
static int pc_conv_attrs(const pconv *q, mge_attr *at)
{
    int na = 0;
    at[na++] = A(MGE_KEY_out, q->O);
    at[na++] = A2(MGE_KEY_kernel, q->k[0], q->k[1]);
    at[na++] = A2(MGE_KEY_stride, q->s[0], q->s[1]);
    at[na++] = A2(MGE_KEY_pad, q->p[0], q->p[1]);
    at[na++] = A2(MGE_KEY_dilation, q->d[0], q->d[1]);
    at[na++] = A(MGE_KEY_groups, q->G);
    at[na++] = A(MGE_KEY_bias, q->bias);
    return na;
}

/* ---------------------------------------------------------------- layers */

static int gen_conv2d(pcase *c)
{
    if (!is_float(c->dt))
        return PC_NODT;
    pconv q;
    pc_conv_geom(c, &q, PC_BIG(c));
    int64_t xd[4] = {q.N, q.C, q.H, q.W}, wd[4] = {q.O, q.C / q.G, q.k[0], q.k[1]}, bd[1] = {q.O};
    int in[3] = {pc_in(c, c->dt, 4, xd, -1, 1), pc_in(c, c->dt, 4, wd, -1, 1), pc_in(c, c->dt, 1, bd, -1, 1)};
    mge_attr at[8];
    int na = pc_conv_attrs(&q, at);
    return pc_out(c, pc_node(c, MGE_OP_CONV2D, 2 + q.bias, in, na, at));
}

static int gen_fused_conv2d(pcase *c)
{
    if (c->dt != MGE_F32)
        return PC_NODT;
    pconv q;
    pc_conv_geom(c, &q, PC_BIG(c));
    int res = (int)pr(c, 0, 1);
    int64_t xd[4] = {q.N, q.C, q.H, q.W}, wd[4] = {q.O, q.C / q.G, q.k[0], q.k[1]}, bd[1] = {q.O};
    int64_t rd[4] = {q.N, q.O, pc_conv_oh(&q, 0), pc_conv_oh(&q, 1)};
    if (rd[2] <= 0 || rd[3] <= 0)
        return PC_RETRY;
    int in[4] = {pc_in(c, c->dt, 4, xd, -1, 1), pc_in(c, c->dt, 4, wd, -1, 1)}, nin = 2;
    if (q.bias)
        in[nin++] = pc_in(c, c->dt, 1, bd, -1, 1);
    if (res)
        in[nin++] = pc_in(c, c->dt, 4, rd, -2, 2);
    mge_attr at[12];
    int na = pc_conv_attrs(&q, at);
    at[na++] = A(MGE_KEY_residual, res);
    at[na++] = A(MGE_KEY_act, pc_act(c));
    at[na++] = A_f(MGE_KEY_alpha, 0.1);
    return pc_out(c, pc_node(c, MGE_OP_FUSED_CONV2D, nin, in, na, at));
}

/* linear and fused_linear: x [..., in] of rank 1..3 */
static int gen_linear_any(pcase *c, int fused)
{
    if (fused ? c->dt != MGE_F32 : !is_float(c->dt))
        return PC_NODT;
    int64_t xd[4], K = pdim(c, 33), O = pdim(c, 17);
    int nd = pshape(c, 1, 3, 9, xd);
    if (PC_BIG(c))
        nd = 2, xd[0] = pr(c, 16, 80), K = pr(c, 100, 400), O = pr(c, 20, 80);
    xd[nd - 1] = K;
    int64_t wd[2] = {O, K}, bd[1] = {O}, rd[4];
    memcpy(rd, xd, sizeof xd);
    rd[nd - 1] = O;
    int bias = (int)pr(c, 0, 1), res = fused && pr(c, 0, 1);
    int in[4] = {pc_in(c, c->dt, nd, xd, -1, 1), pc_in(c, c->dt, 2, wd, -1, 1)}, nin = 2;
    if (bias)
        in[nin++] = pc_in(c, c->dt, 1, bd, -1, 1);
    if (res)
        in[nin++] = pc_in(c, c->dt, nd, rd, -2, 2);
    mge_attr at[6];
    int na = 0;
    at[na++] = A(MGE_KEY_out, O);
    at[na++] = A(MGE_KEY_bias, bias);
    if (fused) {
        at[na++] = A(MGE_KEY_residual, res);
        at[na++] = A(MGE_KEY_act, pc_act(c));
        at[na++] = A_f(MGE_KEY_alpha, 0.2);
    }
    return pc_out(c, pc_node(c, fused ? MGE_OP_FUSED_LINEAR : MGE_OP_LINEAR, nin, in, na, at));
}

static int gen_linear(pcase *c)
{
    return gen_linear_any(c, 0);
}

static int gen_fused_linear(pcase *c)
{
    return gen_linear_any(c, 1);
}

/* matmul: ranks 1..4, broadcast batch dims, transposed operands */
static int gen_matmul(pcase *c)
{
    if (!is_float(c->dt) && c->dt != MGE_I32 && c->dt != MGE_I64)
        return PC_NODT;
    int ta = (int)pr(c, 0, 1), tb = (int)pr(c, 0, 1);
    int64_t M = pdim(c, 17), K = pdim(c, 17), N = pdim(c, 17), batch[2] = {pdim(c, 3), pdim(c, 3)};
    int ra = (int)pr(c, 1, 4), rb = (int)pr(c, 1, 4);
    if (PC_BIG(c))
        ra = 2, rb = pr(c, 2, 3), M = pr(c, 32, 80), K = pr(c, 100, 250), N = pr(c, 40, 120);
    int64_t ad[4], bd[4];
    for (int i = 0; i < ra - 2; i++)
        ad[i] = pr(c, 0, 2) ? batch[2 - (ra - 2) + i] : 1;
    for (int i = 0; i < rb - 2; i++)
        bd[i] = pr(c, 0, 2) ? batch[2 - (rb - 2) + i] : 1;
    if (ra == 1)
        ad[0] = K, ta = 0;
    else
        ad[ra - 2] = ta ? K : M, ad[ra - 1] = ta ? M : K;
    if (rb == 1)
        bd[0] = K, tb = 0;
    else
        bd[rb - 2] = tb ? N : K, bd[rb - 1] = tb ? K : N;
    double r = is_float(c->dt) ? 1 : 6;
    int in[2] = {pc_in(c, c->dt, ra, ad, -r, r), pc_in(c, c->dt, rb, bd, -r, r)};
    mge_attr at[2] = {A(MGE_KEY_transpose_a, ta), A(MGE_KEY_transpose_b, tb)};
    return pc_out(c, pc_node(c, MGE_OP_MATMUL, 2, in, 2, at));
}

/* batchnorm(x, weight, bias, running_mean, running_var): inference, or
 * training (odd variants; the running statistics it updates in place are
 * compared too). */
static int gen_batchnorm(pcase *c)
{
    if (!is_float(c->dt))
        return PC_NODT;
    int64_t xd[4] = {pr(c, 1, 3), pdim(c, 17), pdim(c, 7), pdim(c, 7)};
    int nd = pr(c, 0, 2) ? 4 : 2;
    if (nd == 2)
        xd[0] = pdim(c, 33);
    if (PC_BIG(c))
        xd[0] = 4, xd[1] = 32, xd[2] = 14, xd[3] = 14;
    c->training = c->variant & 1;
    int64_t per = xd[0] * (nd == 4 ? xd[2] * xd[3] : 1);
    if (c->training && per < 2)
        return PC_RETRY;   /* one value per channel: PyTorch refuses it too */
    /* the gradient (batch statistics) of a few values per channel cancels
     * terms scaled by 1/sigma, which may be huge: two correct float
     * computations then differ by far more than rounding */
    c->nograd = per < 8;
    int64_t cd[1] = {xd[1]};
    int in[5] = {pc_in(c, c->dt, nd, xd, -2, 2), pc_in(c, c->dt, 1, cd, 0.5, 1.5), pc_in(c, c->dt, 1, cd, -1, 1),
                 pc_val(c, MGE_VAL_STATE, c->dt, 1, cd, -0.5, 0.5), pc_val(c, MGE_VAL_STATE, c->dt, 1, cd, 0.2, 2)};
    static const double eps[] = {1e-5, 1e-3}, mom[] = {0.1, 0.3};
    mge_attr at[2] = {A_f(MGE_KEY_eps, ppick(c, 2, eps)), A_f(MGE_KEY_momentum, ppick(c, 2, mom))};
    int st = pc_out(c, pc_node(c, MGE_OP_BATCHNORM, 5, in, 2, at));
    if (st == PC_OK && c->training)
        pc_out(c, in[3]), pc_out(c, in[4]);
    return st;
}

static int gen_layernorm(pcase *c)
{
    if (!is_float(c->dt))
        return PC_NODT;
    int64_t xd[4];
    int nd = pshape(c, 1, 4, 13, xd);
    if (PC_BIG(c))
        nd = 2, xd[0] = 8, xd[1] = 768;
    int ax = (int)pr(c, -nd, nd - 1), a0 = ax < 0 ? ax + nd : ax;
    int in[3] = {pc_in(c, c->dt, nd, xd, -3, 5), pc_in(c, c->dt, nd - a0, xd + a0, 0.5, 1.5),
                 pc_in(c, c->dt, nd - a0, xd + a0, -1, 1)};
    static const double eps[] = {1e-5, 1e-2};
    mge_attr at[2] = {A(MGE_KEY_axis, ax), A_f(MGE_KEY_eps, ppick(c, 2, eps))};
    return pc_out(c, pc_node(c, MGE_OP_LAYERNORM, 3, in, 2, at));
}

/* ---------------------------------------------------------------- elementwise */

/* relu ... abs, leaky_relu, dropout: variant 0 large, 3k+1 with special
 * values, 3k+2 in place; dropout trains on odd variants. */
static int gen_unary(pcase *c)
{
    int op = c->op;
    int int_ok = op == MGE_OP_RELU || op == MGE_OP_RELU6 || op == MGE_OP_NEG || op == MGE_OP_ABS;
    int intdt = c->dt == MGE_I8 || c->dt == MGE_I16 || c->dt == MGE_I32 || c->dt == MGE_I64;
    if (!is_float(c->dt) && !(int_ok && intdt))
        return PC_NODT;
    int64_t d[4];
    int nd = pshape(c, 0, 4, 9, d);
    if (PC_BIG(c))
        nd = 2, d[0] = 4, d[1] = pr(c, 5000, 12000);
    double lo = -8, hi = 8;
    if (op == MGE_OP_LOG || op == MGE_OP_SQRT)
        lo = 0.001, hi = 50;
    if (op == MGE_OP_EXP)
        lo = -90, hi = 90;
    if (c->dt == MGE_I8)
        lo = -128, hi = 128;
    else if (!is_float(c->dt))
        lo = -1000, hi = 1000;
    int x = pc_in_inplace(c, c->variant % 3 == 2, c->dt, nd, d, lo, hi);
    if (c->variant % 3 == 1 && is_float(c->dt))
        pc_specials(c, c->g->inputs[0], 1);
    static const double alpha[] = {0.01, 0.2, 1.5}, p[] = {0.1, 0.5, 0.9};
    mge_attr at[1];
    int na = 0;
    if (op == MGE_OP_LEAKY_RELU)
        at[na++] = A_f(MGE_KEY_alpha, ppick(c, 3, alpha));
    if (op == MGE_OP_DROPOUT) {
        at[na++] = A_f(MGE_KEY_p, ppick(c, 3, p));
        c->training = c->variant & 1;
    }
    return pc_out(c, pc_un(c, op, x, na, at));
}

/* cast to each of the 8 dtypes in turn (variant % 8); floats go to
 * integers within the target's range (out of it C leaves the result
 * undefined, and backends differ), NaN and inf only to floats and bool. */
static int gen_cast(pcase *c)
{
    static const mge_dtype to[] = {MGE_F32, MGE_F16, MGE_BF16, MGE_I8, MGE_U8, MGE_I32, MGE_I64, MGE_BOOL};
    mge_dtype t = to[c->variant % 8];
    double lo = -300, hi = 300;
    if (is_float(c->dt) && t == MGE_I8)
        lo = -128, hi = 127.9;
    if (is_float(c->dt) && t == MGE_U8)
        lo = 0, hi = 255.9;
    if (c->dt == MGE_BOOL || c->dt == MGE_U8)
        lo = 0;
    int64_t d[4];
    int nd = pshape(c, 0, 4, 9, d);
    int x = pc_in(c, c->dt, nd, d, lo, hi);
    mge_tensor *xt = pc_data(c, x);
    if (is_float(c->dt) && mge_tensor_numel(xt) > 2) {
        pc_set(xt, 0, 0.0f);   /* an exact zero: false for bool */
        pc_set(xt, 1, -0.5f);  /* truncates to -0 */
    }
    if (is_float(t) || t == MGE_BOOL)
        pc_specials(c, x, 1);
    mge_attr at[1] = {A(MGE_KEY_dtype, t)};
    return pc_out(c, pc_un(c, MGE_OP_CAST, x, 1, at));
}

/* A broadcast operand of out shape d (rank nd): a suffix of it, some dims 1. */
static int pc_bshape(pcase *c, int nd, const int64_t *d, int64_t *o)
{
    int r = (int)pr(c, 0, nd);
    for (int i = 0; i < r; i++)
        o[i] = pr(c, 0, 2) ? d[nd - r + i] : 1;
    return r;
}

/* Element i of an integer tensor, and the store (the dtypes pc_fill makes). */
static int64_t pc_ild(const mge_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case MGE_I8: return ((const int8_t *)t->data)[i];
    case MGE_U8: return ((const uint8_t *)t->data)[i];
    case MGE_I16: return ((const int16_t *)t->data)[i];
    case MGE_U16: return ((const uint16_t *)t->data)[i];
    case MGE_I32: return ((const int32_t *)t->data)[i];
    case MGE_U32: return ((const uint32_t *)t->data)[i];
    case MGE_I64: return ((const int64_t *)t->data)[i];
    case MGE_U64: return (int64_t)((const uint64_t *)t->data)[i];
    default: return 0;
    }
}

static void pc_ist(mge_tensor *t, int64_t i, int64_t v)
{
    switch (t->dtype) {
    case MGE_I8: ((int8_t *)t->data)[i] = (int8_t)v; break;
    case MGE_U8: ((uint8_t *)t->data)[i] = (uint8_t)v; break;
    case MGE_I16: ((int16_t *)t->data)[i] = (int16_t)v; break;
    case MGE_U16: ((uint16_t *)t->data)[i] = (uint16_t)v; break;
    case MGE_I32: ((int32_t *)t->data)[i] = (int32_t)v; break;
    case MGE_U32: ((uint32_t *)t->data)[i] = (uint32_t)v; break;
    case MGE_I64: ((int64_t *)t->data)[i] = v; break;
    case MGE_U64: ((uint64_t *)t->data)[i] = (uint64_t)v; break;
    default: break;
    }
}

/* add ... minimum: random broadcasting; variant 0 large, 1 per channel,
 * 2 in place, 3 with special values, 4 a scalar operand. */
static int gen_binary(pcase *c)
{
    int op = c->op, fl = is_float(c->dt);
    if (!fl && (c->dt == MGE_BOOL || c->dt == MGE_QS8 || c->dt == MGE_QS32 || op == MGE_OP_POW))
        return PC_NODT;
    int64_t d[4], ad[4], bd[4];
    int nd = pshape(c, 0, 4, 7, d);
    int na = pc_bshape(c, nd, d, ad), nb = pc_bshape(c, nd, d, bd);
    int v = c->variant % 8;
    if (PC_BIG(c))
        nd = na = nb = 2, d[0] = ad[0] = bd[0] = 16, d[1] = ad[1] = bd[1] = pr(c, 900, 1100);
    if (v == 1) {
        int64_t x[4] = {pr(c, 1, 2), pdim(c, 17), pdim(c, 9), pdim(c, 9)}, y[4] = {1, x[1], 1, 1};
        memcpy(ad, x, sizeof x);
        memcpy(bd, y, sizeof y);
        na = 4, nb = pr(c, 3, 4);
        if (nb == 3)
            bd[0] = x[1], bd[1] = bd[2] = 1;
        if (pr(c, 0, 1)) {   /* the channel operand on the left */
            int64_t t[4];
            memcpy(t, ad, sizeof t), memcpy(ad, bd, sizeof t), memcpy(bd, t, sizeof t);
            int tn = na;
            na = nb, nb = tn;
        }
    }
    if (v == 2)
        na = nd, memcpy(ad, d, sizeof d);   /* a has the output's shape: in place */
    if (v == 4)
        nb = 0;
    double alo = -3, ahi = 3, blo = -3, bhi = 3;
    if (op == MGE_OP_DIV)
        blo = 0.5, bhi = 2;
    if (op == MGE_OP_POW)
        alo = 0.1, ahi = 3, blo = -2, bhi = 2;
    if (c->dt == MGE_I8 || c->dt == MGE_U8)
        alo = blo = -128, ahi = bhi = 256;
    else if (!fl)
        alo = blo = -1000, ahi = bhi = 1000;
    int in[2] = {pc_in_inplace(c, v == 2, c->dt, na, ad, alo, ahi), pc_in(c, c->dt, nb, bd, blo, bhi)};
    if (op == MGE_OP_DIV && in[1] >= 0 && pr(c, 0, 1)) {   /* negative denominators too */
        mge_tensor *b = pc_data(c, in[1]);
        for (int64_t i = 0; b && fl && i < mge_tensor_numel(b); i += 2)
            pc_set(b, i, -(float)pu(c, 0.5, 2));
    }
    mge_tensor *bt = !fl && op == MGE_OP_DIV && in[1] >= 0 ? pc_data(c, in[1]) : NULL;
    for (int64_t i = 0; bt && i < mge_tensor_numel(bt); i++)   /* integer div: no zero divisor */
        if (pc_ild(bt, i) == 0)
            pc_ist(bt, i, 1 + (i & 1));
    if (v == 3 && fl)
        pc_specials(c, c->g->inputs[0], op != MGE_OP_POW);
    return pc_out(c, pc_node(c, op, 2, in, 0, NULL));
}

/* fused_elemwise: 1..6 ops, the binary ones with broadcast extra inputs */
static int gen_fused_elemwise(pcase *c)
{
    static const int ops[] = {MGE_OP_RELU, MGE_OP_RELU6,   MGE_OP_LEAKY_RELU, MGE_OP_SIGMOID, MGE_OP_TANH,
                              MGE_OP_GELU, MGE_OP_SILU,    MGE_OP_HSWISH,     MGE_OP_HSIGMOID, MGE_OP_EXP,
                              MGE_OP_LOG,  MGE_OP_SQRT,    MGE_OP_NEG,        MGE_OP_ABS,     MGE_OP_ADD,
                              MGE_OP_SUB,  MGE_OP_MUL,     MGE_OP_DIV,        MGE_OP_POW,     MGE_OP_MAXIMUM,
                              MGE_OP_MINIMUM,
                              /* the smooth table ops of group elem */
                              MGE_OP_ELU, MGE_OP_SELU, MGE_OP_MISH, MGE_OP_SOFTSIGN, MGE_OP_ERF, MGE_OP_SIN, MGE_OP_COS,
                              /* extra math: the ones defined everywhere */
                              MGE_OP_ATAN, MGE_OP_ASINH, MGE_OP_SINH, MGE_OP_COSH};
    if (c->dt != MGE_F32)
        return PC_NODT;
    int64_t d[4], ed[4];
    int nd = pshape(c, 0, 4, 9, d);
    if (PC_BIG(c))
        nd = 2, d[0] = 16, d[1] = 4099;
    int64_t list[MGE_MAX_DIMS];
    int nops = (int)pr(c, 1, 6), in[9];
    in[0] = pc_in_inplace(c, c->variant % 2, MGE_F32, nd, d, -2, 2);
    int nin = 1;
    for (int k = 0; k < nops; k++) {
        /* exp of exp amplifies a rounding of the first by e^x, and log,
         * sqrt and pow of a result that may be a tiny negative (gelu(-6)
         * is -6e-9 on ref, -0 on cpu) jump from NaN to -inf or 0: neither
         * is a parity question, so those come first or not at all */
        int64_t o;
        do
            o = ops[pr(c, 0, (int64_t)(sizeof ops / sizeof ops[0]) - 1)];
        while (k && ((o == MGE_OP_EXP && list[k - 1] == MGE_OP_EXP) || o == MGE_OP_LOG || o == MGE_OP_SQRT ||
                     o == MGE_OP_POW));
        list[k] = o;
        if (!mge_fused_binary_ok(list[k]))
            continue;
        int ne = pc_bshape(c, nd, d, ed);
        int dv = list[k] == MGE_OP_DIV, pw = list[k] == MGE_OP_POW;
        in[nin++] = pc_in(c, MGE_F32, ne, ed, dv ? 0.5 : pw ? 0.5 : -2, dv || pw ? 2 : 2);
    }
    mge_attr at[2] = {A_ints(MGE_KEY_ops, nops, list), A_f(MGE_KEY_alpha, 0.05)};
    return pc_out(c, pc_node(c, MGE_OP_FUSED_ELEMWISE, nin, in, 2, at));
}

/* ---------------------------------------------------------------- pooling */

/* maxpool2d (float, i8, u8, qs8), avgpool2d (float, qs8), global_avgpool */
static int gen_pool(pcase *c)
{
    int op = c->op, mx = op == MGE_OP_MAXPOOL2D;
    int ok = is_float(c->dt) || c->dt == MGE_QS8 || (mx && (c->dt == MGE_I8 || c->dt == MGE_U8));
    if (!ok)
        return PC_NODT;
    int64_t xd[4] = {pr(c, 1, 2), pdim(c, 5), pdim(c, 13), pdim(c, 13)};
    mge_attr at[6];
    int na = 0;
    int64_t k[2] = {pr(c, 1, 4), 0}, p[2];
    k[1] = pr(c, 0, 2) ? k[0] : pr(c, 1, 4);
    p[0] = pr(c, 0, k[0] / 2), p[1] = pr(c, 0, k[1] / 2);
    int64_t s0 = pr(c, 1, 3), s1 = pr(c, 0, 2) ? s0 : pr(c, 1, 3);
    int cip = (int)pr(c, 0, 1);
    if (c->dt == MGE_QS8 && (p[0] || p[1]))
        cip = 0;   /* padded taps have no int8 value (ref_quant.c refuses them) */
    if (PC_BIG(c)) {
        xd[0] = 1, xd[1] = 32, xd[2] = xd[3] = 28;
        k[0] = k[1] = mx ? 3 : 2, p[0] = p[1] = mx, s0 = s1 = 2;
        if (op == MGE_OP_GLOBAL_AVGPOOL)
            xd[0] = 2, xd[1] = 64, xd[2] = xd[3] = 7;
    }
    if (op != MGE_OP_GLOBAL_AVGPOOL) {
        at[na++] = A2(MGE_KEY_kernel, k[0], k[1]);
        if (pr(c, 0, 3) || PC_BIG(c))
            at[na++] = A2(MGE_KEY_stride, s0, s1);
        at[na++] = A2(MGE_KEY_pad, p[0], p[1]);
        at[na++] = A(MGE_KEY_ceil_mode, PC_BIG(c) ? 0 : pr(c, 0, 1));
        if (mx)
            at[na++] = A2(MGE_KEY_dilation, pr(c, 1, 2), PC_BIG(c) ? 1 : pr(c, 1, 2));
        else
            at[na++] = A(MGE_KEY_count_include_pad, cip);
    }
    int x = pc_in(c, c->dt, 4, xd, -3, 3);
    if (!is_float(c->dt))
        pc_fill(c, pc_data(c, x), -128, 256);
    if (c->variant % 4 == 3)
        pc_specials(c, x, 1);
    return pc_out(c, pc_un(c, op, x, na, at));
}

/* ---------------------------------------------------------------- reductions */

static int gen_softmax(pcase *c)
{
    if (!is_float(c->dt))
        return PC_NODT;
    int64_t d[4];
    int nd = pshape(c, 1, 4, 17, d);
    if (PC_BIG(c))
        nd = 2, d[0] = 8, d[1] = 1000;
    int ax = PC_BIG(c) ? -1 : (int)pr(c, -nd, nd - 1);
    int x = pc_in(c, c->dt, nd, d, -10, 10);
    if (c->variant % 4 == 3)
        pc_specials(c, x, 1);
    mge_attr at[1] = {A(MGE_KEY_axis, ax)};
    return pc_out(c, pc_un(c, c->op, x, 1, at));
}

/* sum, mean, max (axis list or all, keepdim) and argmax (one axis) */
static int gen_reduce(pcase *c)
{
    int op = c->op, fl = is_float(c->dt);
    if (c->dt == MGE_BOOL || c->dt == MGE_QS8 || c->dt == MGE_QS32 || (op == MGE_OP_MEAN && !fl))
        return PC_NODT;
    int64_t d[4];
    int nd = pshape(c, 1, 4, 13, d);
    if (PC_BIG(c)) {   /* the bias-gradient shapes training made fast */
        nd = pr(c, 0, 1) ? 2 : 4;
        int64_t big[4] = {nd == 2 ? 64 : 4, nd == 2 ? 1001 : 32, 14, 14};
        memcpy(d, big, sizeof big);
    }
    mge_attr at[2];
    int na = 0;
    if (op == MGE_OP_ARGMAX) {
        at[na++] = A(MGE_KEY_axis, pr(c, -nd, nd - 1));
    } else if (PC_BIG(c)) {
        int64_t ax[3] = {0, 2, 3};
        at[na++] = nd == 2 ? A(MGE_KEY_axis, 0) : A_ints(MGE_KEY_axis, 3, ax);
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
    double r = fl ? 3 : c->dt == MGE_I8 || c->dt == MGE_U8 ? 256 : 1000;
    int x = pc_in(c, c->dt, nd, d, c->dt == MGE_I8 || c->dt == MGE_U8 ? -128 : -r, r);
    if (!fl && op != MGE_OP_SUM && pr(c, 0, 1))   /* ties: the first index must win */
        pc_fill(c, pc_data(c, x), -2, 2);
    if (c->variant % 4 == 3 && op != MGE_OP_SUM)
        pc_specials(c, x, 1);
    return pc_out(c, pc_un(c, op, x, na, at));
}

/* ---------------------------------------------------------------- data movement (every dtype) */

static double pc_lo(mge_dtype dt)
{
    return dt == MGE_U8 || dt == MGE_BOOL ? 0 : -100;
}

/* A shape with n elements: dims of n's factors, ranks 1..4, some -1 or 0
 * (copy the input's dim) in place of the real value when ref_dims is given. */
static int pc_factor_shape(pcase *c, int64_t n, int64_t *o, int ref_nd, const int64_t *ref_dims)
{
    int nd = (int)pr(c, 1, 4);
    for (int i = 0; i < nd; i++)
        o[i] = 1;
    for (int64_t f = 2, m = n; m > 1;) {
        if (m % f) {
            f++;
            continue;
        }
        o[pr(c, 0, nd - 1)] *= f;
        m /= f;
    }
    if (n == 0)
        o[0] = 0;
    if (ref_dims) {
        for (int i = 0; i < nd && i < ref_nd; i++)
            if (o[i] == ref_dims[i] && pr(c, 0, 2) == 0)
                o[i] = 0;
        if (pr(c, 0, 1)) {
            int i = (int)pr(c, 0, nd - 1);
            if (o[i] != 0)
                o[i] = -1;
        }
    }
    return nd;
}

static int gen_reshape(pcase *c)
{
    int64_t d[4], s[4];
    int nd = pshape(c, 0, 4, 9, d);
    int x = pc_in(c, c->dt, nd, d, pc_lo(c->dt), 100);
    if (x < 0)
        return PC_RETRY;
    int ns = pc_factor_shape(c, mge_tensor_numel(pc_data(c, x)), s, nd, d);
    mge_attr at[1] = {A_ints(MGE_KEY_shape, ns, s)};
    return pc_out(c, pc_un(c, MGE_OP_RESHAPE, x, 1, at));
}

static int gen_flatten(pcase *c)
{
    int64_t d[5];
    int nd = pshape(c, 1, 5, 7, d);
    mge_attr at[1] = {A(MGE_KEY_start, pr(c, -nd, nd - 1))};
    return pc_out(c, pc_un(c, MGE_OP_FLATTEN, pc_in(c, c->dt, nd, d, pc_lo(c->dt), 100), 1, at));
}

static int gen_transpose(pcase *c)
{
    int64_t d[5], perm[5];
    int nd = pshape(c, 1, 5, 7, d);
    if (PC_BIG(c))
        nd = 3, d[0] = 64, d[1] = 3, d[2] = 57;
    for (int i = 0; i < nd; i++)
        perm[i] = i;
    for (int i = nd - 1; i > 0; i--) {
        int j = (int)pr(c, 0, i);
        int64_t t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    mge_attr at[1] = {A_ints(MGE_KEY_perm, nd, perm)};
    return pc_out(c, pc_un(c, MGE_OP_TRANSPOSE, pc_in(c, c->dt, nd, d, pc_lo(c->dt), 100), 1, at));
}

/* copy, in either direction: on the host (and within a device) the bytes */
static int gen_copy(pcase *c)
{
    int64_t d[4];
    int nd = pshape(c, 0, 4, 9, d);
    mge_attr at[1] = {A(MGE_KEY_to, c->variant & 1)};
    return pc_out(c, pc_un(c, MGE_OP_COPY, pc_in(c, c->dt, nd, d, pc_lo(c->dt), 100), 1, at));
}

static int gen_concat(pcase *c)
{
    int64_t d[4];
    int nd = pshape(c, 1, 4, 7, d), k = (int)pr(c, 1, 4), in[4];
    int ax = (int)pr(c, -nd, nd - 1);
    for (int i = 0; i < k; i++) {
        d[ax < 0 ? ax + nd : ax] = pdim(c, 5);
        in[i] = pc_in(c, c->dt, nd, d, pc_lo(c->dt), 100);
    }
    mge_attr at[1] = {A(MGE_KEY_axis, ax)};
    return pc_out(c, pc_node(c, MGE_OP_CONCAT, k, in, 1, at));
}

/* slice attributes (Python semantics: negative and out-of-range indices) */
static int pc_slice_attrs(pcase *c, int nd, const int64_t *d, mge_attr *at)
{
    int na = 0, ax = (int)pr(c, -nd, nd - 1);
    int64_t n = d[ax < 0 ? ax + nd : ax];
    /* mostly non-empty: start in the axis (as given or from the end),
     * end past it or absent; now and then indices out of range */
    int64_t st = pr(c, 0, n - 1), en = pr(c, st + 1, n + 2);
    if (pr(c, 0, 5) == 0)
        st = pr(c, -n - 2, n + 2), en = pr(c, -n - 2, n + 2);
    at[na++] = A(MGE_KEY_axis, ax);
    at[na++] = A(MGE_KEY_start, st < n && pr(c, 0, 2) == 0 ? st - n : st);
    if (pr(c, 0, 2))
        at[na++] = A(MGE_KEY_end, en < n && pr(c, 0, 2) == 0 ? en - n : en);
    at[na++] = A(MGE_KEY_step, pr(c, 1, 3));
    return na;
}

static int gen_slice(pcase *c)
{
    int64_t d[4];
    int nd = pshape(c, 1, 4, 9, d);
    mge_attr at[4];
    int na = pc_slice_attrs(c, nd, d, at);
    return pc_out(c, pc_un(c, MGE_OP_SLICE, pc_in(c, c->dt, nd, d, pc_lo(c->dt), 100), na, at));
}

/* The gradient-only shape ops for the dtypes gradient graphs never reach. */
static int gen_reshape_as(pcase *c)
{
    int64_t d[4], s[4];
    int nd = pshape(c, 0, 4, 9, d);
    int x = pc_in(c, c->dt, nd, d, pc_lo(c->dt), 100);
    if (x < 0)
        return PC_RETRY;
    int ns = pc_factor_shape(c, mge_tensor_numel(pc_data(c, x)), s, 0, NULL);
    int in[2] = {pc_in(c, c->dt, ns, s, pc_lo(c->dt), 100), x};
    return pc_out(c, pc_node(c, MGE_OP_RESHAPE_AS, 2, in, 0, NULL));
}

static int gen_slice_grad(pcase *c)
{
    int64_t d[4];
    int nd = pshape(c, 1, 4, 9, d);
    mge_attr at[4];
    int na = pc_slice_attrs(c, nd, d, at);
    int x = pc_in(c, c->dt, nd, d, pc_lo(c->dt), 100);
    int y = pc_un(c, MGE_OP_SLICE, x, na, at);   /* for dy's shape; not run */
    if (y < 0)
        return PC_RETRY;
    int in[2] = {pc_in(c, c->dt, pc_v(c, y)->ndim, pc_v(c, y)->dims, pc_lo(c->dt), 100), x};
    return pc_out(c, pc_node(c, MGE_OP_SLICE_GRAD, 2, in, na, at));
}

/* ---------------------------------------------------------------- dynamic shapes */

/* An i64 const vector (or scalar when n < 0) holding v: the shape, bounds
 * or repeats input the dynamic shape ops read at plan time. */
static int pc_ivec(pcase *c, int n, const int64_t *v)
{
    int64_t d[1] = {n};
    int k = pc_val(c, MGE_VAL_CONST, MGE_I64, n < 0 ? 0 : 1, d, 0, 1);
    if (k < 0)
        return -1;
    mge_tensor *t = pc_data(c, k);
    for (int i = 0; i < (n < 0 ? 1 : n); i++)
        ((int64_t *)t->data)[i] = v[i];
    return k;
}

static int gen_shape_of(pcase *c)
{
    int64_t d[5];
    int nd = pshape(c, 0, 5, 9, d);
    int x = pc_in(c, c->dt, nd, d, pc_lo(c->dt), 100);
    if (c->op == MGE_OP_SIZE)
        return pc_out(c, pc_un(c, MGE_OP_SIZE, x, 0, NULL));
    mge_attr at[2] = {A(MGE_KEY_start, pr(c, -6, 6)), A(MGE_KEY_end, pr(c, -6, 6))};
    return pc_out(c, pc_un(c, MGE_OP_SHAPE, x, (int)pr(c, 0, 2), at));
}

/* expand and tile, with the shape or repeats as attribute or const input */
static int gen_expand_tile(pcase *c)
{
    int tile = c->op == MGE_OP_TILE;
    int64_t d[4], s[5];
    int nd = pshape(c, 0, 4, 7, d), ns = nd;
    if (PC_BIG(c))
        nd = 2, d[0] = tile ? 37 : 1, d[1] = tile ? 301 : 1003;
    for (int i = 0; i < nd; i++)
        s[i] = tile ? pr(c, 0, 3) : (d[i] == 1 ? pdim(c, 9) : d[i]);
    if (PC_BIG(c))
        s[0] = tile ? 3 : 64, s[1] = tile ? 2 : 1003;
    if (!tile && pr(c, 0, 2) == 0) { /* a leading new dim */
        memmove(s + 1, s, sizeof(int64_t) * (size_t)ns);
        s[0] = pdim(c, 5), ns++;
    }
    int x = pc_in(c, c->dt, nd, d, pc_lo(c->dt), 100);
    int key = tile ? MGE_KEY_repeats : MGE_KEY_shape;
    if (pr(c, 0, 1)) {
        int in[2] = {x, pc_ivec(c, ns, s)};
        return pc_out(c, pc_node(c, c->op, 2, in, 0, NULL));
    }
    mge_attr at[1] = {A_ints(key, ns, s)};
    return pc_out(c, pc_un(c, c->op, x, 1, at));
}

static int gen_squeeze(pcase *c)
{
    int unsq = c->op == MGE_OP_UNSQUEEZE;
    int64_t d[6], ax[3];
    int nd = pshape(c, 1, 4, 7, d), na = 0;
    if (unsq) {
        na = (int)pr(c, 1, 2);
        int r = nd + na;
        ax[0] = pr(c, 0, r - 1);
        ax[1] = ax[0] + 1;
        if (ax[1] >= r)
            na = 1, r = nd + 1, ax[0] = pr(c, 0, r - 1);
        for (int i = 0; i < na; i++) /* negative: from the end of the output */
            ax[i] -= pr(c, 0, 1) ? r : 0;
    } else {
        int k = (int)pr(c, 0, nd - 1);
        d[k] = 1;
        ax[na++] = pr(c, 0, 1) ? k : k - nd;
    }
    int x = pc_in(c, c->dt, nd, d, pc_lo(c->dt), 100);
    if (!unsq && pr(c, 0, 3) == 0) /* no axes: every dim of 1 */
        return pc_out(c, pc_un(c, c->op, x, 0, NULL));
    if (pr(c, 0, 1)) {
        int in[2] = {x, pc_ivec(c, na, ax)};
        return pc_out(c, pc_node(c, c->op, 2, in, 0, NULL));
    }
    mge_attr at[1] = {A_ints(MGE_KEY_axis, na, ax)};
    return pc_out(c, pc_un(c, c->op, x, 1, at));
}

static int gen_split(pcase *c)
{
    int64_t d[4], sz[4];
    int nd = pshape(c, 1, 4, 9, d), k = (int)pr(c, 1, 4);
    int ax = (int)pr(c, 0, nd - 1);
    if (PC_BIG(c))
        nd = 2, d[0] = 64, d[1] = 1003, ax = (int)pr(c, 0, 1);
    int given = (int)pr(c, 0, 2), nat = 0;
    mge_attr at[2];
    at[nat++] = A(MGE_KEY_axis, pr(c, 0, 1) ? ax : ax - nd);
    int64_t left = d[ax];
    for (int i = 0; i < k; i++) {
        sz[i] = i + 1 < k ? pr(c, 0, left) : left;
        left -= sz[i];
    }
    int in[2] = {pc_in(c, c->dt, nd, d, pc_lo(c->dt), 100)}, nin = 1;
    if (given == 1)
        at[nat++] = A_ints(MGE_KEY_sizes, k, sz);
    if (given == 2)
        in[nin++] = pc_ivec(c, k, sz);
    if (!given && (d[ax] + k - 1) / k * (k - 1) > d[ax])
        return PC_RETRY;
    char names[4][16];
    const char *outn[4];
    for (int i = 0; i < k; i++) {
        snprintf(names[i], sizeof names[i], "n%d", c->nnames++);
        outn[i] = names[i];
    }
    mge_error err;
    for (int i = 0; i < nin; i++)
        if (in[i] < 0)
            return PC_RETRY;
    int nn = mge_graph_add_node(c->g, outn[0], MGE_OP_SPLIT, nin, in, nat, at, k, outn, &err);
    if (nn < 0)
        return PC_RETRY;
    for (int i = 0; i < k; i++)
        if (pc_out(c, c->g->nodes[nn].out[i]) != PC_OK)
            return PC_RETRY;
    return PC_OK;
}

/* slice's input form: starts, ends, axes, steps as const inputs (ONNX
 * Slice: negative steps, out-of-range bounds clamp) */
static int gen_slice_inputs(pcase *c)
{
    int64_t d[4], st[4], en[4], ax[4], sp[4];
    int nd = pshape(c, 1, 4, 9, d), na = (int)pr(c, 1, nd);
    if (PC_BIG(c))
        nd = 2, d[0] = 64, d[1] = 1003, na = 2;
    int64_t perm[4] = {0, 1, 2, 3};
    for (int i = nd - 1; i > 0; i--) {
        int j = (int)pr(c, 0, i);
        int64_t t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    for (int i = 0; i < na; i++) {
        int64_t n = d[perm[i]];
        ax[i] = pr(c, 0, 1) ? perm[i] : perm[i] - nd;
        sp[i] = pr(c, 0, 2) ? pr(c, 1, 3) : -pr(c, 1, 3);
        st[i] = pr(c, -n - 2, n + 2);
        en[i] = pr(c, -n - 2, n + 2);
        if (pr(c, 0, 4) == 0)
            en[i] = sp[i] > 0 ? INT64_MAX : INT64_MIN;
    }
    int nb = (int)pr(c, 2, 4);
    int in[5] = {pc_in(c, c->dt, nd, d, pc_lo(c->dt), 100), pc_ivec(c, na, st), pc_ivec(c, na, en)};
    if (nb < 4 && nb == 3) /* without steps: they are 1 */
        for (int i = 0; i < na; i++)
            sp[i] = 1;
    if (nb >= 3)
        in[3] = pc_ivec(c, na, ax);
    if (nb >= 4)
        in[4] = pc_ivec(c, na, sp);
    if (nb == 2 && na != nd)
        return PC_RETRY;
    return pc_out(c, pc_node(c, MGE_OP_SLICE, nb + 1, in, 0, NULL));
}

static int gen_range(pcase *c)
{
    if (c->dt != MGE_F32 && c->dt != MGE_I32 && c->dt != MGE_I64)
        return PC_NODT;
    double st = (double)pr(c, -20, 20), dl = (double)(pr(c, 0, 1) ? pr(c, 1, 4) : -pr(c, 1, 4));
    double lim = st + dl * (double)pr(c, -1, PC_BIG(c) ? 5000 : 30);
    if (c->dt == MGE_F32)
        st += 0.25, dl *= 0.5;
    int64_t d0[1] = {0};
    int in[3];
    double v[3] = {st, lim, dl};
    for (int k = 0; k < 3; k++) {
        in[k] = pc_val(c, MGE_VAL_CONST, c->dt, 0, d0, 0, 1);
        if (in[k] < 0)
            return PC_RETRY;
        mge_tensor *t = pc_data(c, in[k]);
        if (c->dt == MGE_F32)
            *(float *)t->data = (float)v[k];
        else if (c->dt == MGE_I32)
            *(int32_t *)t->data = (int32_t)v[k];
        else
            *(int64_t *)t->data = (int64_t)v[k];
    }
    return pc_out(c, pc_node(c, MGE_OP_RANGE, 3, in, 0, NULL));
}

static int gen_constant_of_shape(pcase *c)
{
    if (c->dt != MGE_I64 && c->dt != MGE_I32)
        return PC_NODT;
    static const mge_dtype dts[] = {MGE_F32, MGE_F16, MGE_BF16, MGE_I8, MGE_U8, MGE_I32, MGE_I64, MGE_BOOL};
    int64_t d[4];
    int nd = pshape(c, 0, 4, 9, d);
    if (PC_BIG(c))
        nd = 2, d[0] = 64, d[1] = 1003;
    mge_attr at[2] = {A_f(MGE_KEY_value, ppick(c, 4, (const double[]){0, 1, -3, 2.5})),
                      A(MGE_KEY_dtype, dts[pr(c, 0, 7)])};
    int s = pc_ivec(c, nd, d);
    if (s >= 0 && c->dt == MGE_I32) { /* the shape as i32 */
        int64_t n1[1] = {nd};
        int s32 = pc_val(c, MGE_VAL_CONST, MGE_I32, 1, n1, 0, 1);
        for (int i = 0; s32 >= 0 && i < nd; i++)
            ((int32_t *)pc_data(c, s32)->data)[i] = (int32_t)d[i];
        s = s32;
    }
    return pc_out(c, pc_un(c, MGE_OP_CONSTANT_OF_SHAPE, s, 2, at));
}

/* slice: its attribute form and its input form, in turn */
static int gen_slice_any(pcase *c)
{
    return c->variant % 2 ? gen_slice_inputs(c) : gen_slice(c);
}

/* ---------------------------------------------------------------- losses */

static int gen_cross_entropy(pcase *c)
{
    if (!is_float(c->dt))
        return PC_NODT;
    int64_t d[5] = {pdim(c, 9), pdim(c, 17), 1, 1, 1};
    int nd = 2 + (int)pr(c, 0, 2);   /* trailing dims [N,C,d...] */
    for (int i = 2; i < nd; i++)
        d[i] = pdim(c, 5);
    if (PC_BIG(c))
        nd = 2, d[0] = 64, d[1] = 1000;
    int64_t ld[4] = {d[0], d[2], d[3], d[4]};
    mge_dtype lt = pr(c, 0, 1) ? MGE_I32 : MGE_I64;
    int in[2] = {pc_in(c, c->dt, nd, d, -5, 5), pc_in(c, lt, nd - 1, ld, 0, (double)d[1] - 0.5)};
    mge_attr at[2];
    int na = 0;
    if (pr(c, 0, 1))   /* a class as ignore_index: some positions drop out */
        at[na++] = A(MGE_KEY_ignore_index, pr(c, 0, d[1] - 1));
    if (pr(c, 0, 1))
        at[na++] = A_f(MGE_KEY_label_smoothing, pu(c, 0, 0.4));
    return pc_out(c, pc_node(c, MGE_OP_CROSS_ENTROPY, 2, in, na, at));
}

static int gen_mse(pcase *c)
{
    if (!is_float(c->dt))
        return PC_NODT;
    int64_t d[4];
    int nd = pshape(c, 0, 4, 9, d);
    int in[2] = {pc_in(c, c->dt, nd, d, -2, 2), pc_in(c, c->dt, nd, d, -2, 2)};
    return pc_out(c, pc_node(c, MGE_OP_MSE, 2, in, 0, NULL));
}

/* ---------------------------------------------------------------- optimizers */

/* sgd(param, grad, buf, hyper[, scale]) and adam(param, grad, m, v, hyper[,
 * scale]): param, moments and hyper {lr, step} are graph state updated in
 * place; the update's squared norm and the updated state are compared. */
static int gen_optim(pcase *c)
{
    int sgd = c->op == MGE_OP_SGD;
    if (c->dt != MGE_F32)
        return PC_NODT;
    int64_t d[4], two = 2;
    int nd = pshape(c, 1, 3, 17, d);
    if (PC_BIG(c))
        nd = 1, d[0] = 10007;
    c->training = 1;
    int in[6], nin = 0, scale = (int)pr(c, 0, 1);
    in[nin++] = pc_val(c, MGE_VAL_PARAM, MGE_F32, nd, d, -1, 1);
    in[nin++] = pc_in(c, MGE_F32, nd, d, -1, 1);
    in[nin++] = pc_val(c, MGE_VAL_STATE, MGE_F32, nd, d, -0.1, 0.1);
    if (!sgd)
        in[nin++] = pc_val(c, MGE_VAL_STATE, MGE_F32, nd, d, 0, 0.01);
    int hyper = in[nin++] = pc_val(c, MGE_VAL_STATE, MGE_F32, 1, &two, 0, 1);
    if (scale)
        in[nin++] = pc_in(c, MGE_F32, 0, NULL, 0.5, 1);
    if (hyper < 0)
        return PC_RETRY;
    float *h = pc_data(c, hyper)->data;
    h[0] = (float)pu(c, 0.01, 0.1);
    h[1] = (float)pr(c, 1, 5);
    mge_attr at[5];
    int na = 0;
    if (sgd) {
        static const double mom[] = {0, 0.9}, damp[] = {0, 0.1};
        double m = ppick(c, 2, mom), dp = ppick(c, 2, damp);
        at[na++] = A_f(MGE_KEY_momentum, m);
        at[na++] = A_f(MGE_KEY_dampening, dp);
        at[na++] = A(MGE_KEY_nesterov, m > 0 && dp == 0 && pr(c, 0, 1));
    } else {
        static const double b1[] = {0.9, 0.5}, b2[] = {0.999, 0.9}, eps[] = {1e-8, 1e-3};
        at[na++] = A_f(MGE_KEY_beta1, ppick(c, 2, b1));
        at[na++] = A_f(MGE_KEY_beta2, ppick(c, 2, b2));
        at[na++] = A_f(MGE_KEY_eps, ppick(c, 2, eps));
        at[na++] = A(MGE_KEY_decoupled, pr(c, 0, 1));
    }
    static const double wd[] = {0, 0.01};
    at[na++] = A_f(MGE_KEY_weight_decay, ppick(c, 2, wd));
    int st = pc_out(c, pc_node(c, c->op, nin, in, na, at));
    if (st == PC_OK) {
        pc_out(c, in[0]);
        pc_out(c, in[2]);
        if (!sgd)
            pc_out(c, in[3]);
    }
    return st;
}

static int gen_sumsq(pcase *c)
{
    if (!is_float(c->dt))
        return PC_NODT;
    int clip = c->op == MGE_OP_CLIP_COEF, k = (int)pr(c, 1, 5), in[5];
    for (int i = 0; i < k; i++) {
        int64_t d[4];
        int nd = pshape(c, 0, 3, 17, d);
        if (PC_BIG(c) && i == 0)
            nd = 1, d[0] = 100003;
        in[i] = pc_in(c, c->dt, nd, d, clip ? 0 : -2, clip ? 3 : 2);
    }
    static const double mx[] = {0.5, 1, 10};
    mge_attr at[1] = {A_f(MGE_KEY_max_norm, ppick(c, 3, mx))};
    return pc_out(c, pc_node(c, c->op, k, in, clip, at));
}

/* ---------------------------------------------------------------- winograd and blocked layout */

static int64_t pc_block(pcase *c)
{
    return pr(c, 0, 1) ? 8 : 16;
}

static int gen_winograd_weight(pcase *c)
{
    if (c->dt != MGE_F32)
        return PC_NODT;
    int nchwc = c->op == MGE_OP_WINOGRAD_WEIGHT_NCHWC;
    int64_t wd[4] = {pdim(c, 33), pdim(c, 17), 3, 3};
    mge_attr at[2] = {A(MGE_KEY_tile, pr(c, 0, 1) ? 2 : 4), A(MGE_KEY_block, pc_block(c))};
    return pc_out(c, pc_un(c, c->op, pc_in(c, MGE_F32, 4, wd, -1, 1), 1 + nchwc, at));
}

/* x plain [N,C,H,W] -> to_nchwc (block c) */
static int pc_blocked(pcase *c, int64_t N, int64_t C, int64_t H, int64_t W, int64_t blk, double lo, double hi)
{
    int64_t d[4] = {N, C, H, W};
    mge_attr at[1] = {A(MGE_KEY_block, blk)};
    return pc_un(c, MGE_OP_TO_NCHWC, pc_in(c, MGE_F32, 4, d, lo, hi), 1, at);
}

/* conv2d_winograd (plain) and conv2d_winograd_nchwc (blocked x, residual
 * and output), with the weight transform of its own op in the graph */
static int gen_conv2d_winograd(pcase *c)
{
    if (c->dt != MGE_F32)
        return PC_NODT;
    int nchwc = c->op == MGE_OP_CONV2D_WINOGRAD_NCHWC;
    int64_t N = pr(c, 1, 2), C = pdim(c, 17), O = pdim(c, 33), H = pdim(c, 17), W = pdim(c, 17);
    int64_t ph = pr(c, 0, 2), pw = pr(c, 0, 2), tile = pr(c, 0, 1) ? 2 : 4, blk = pc_block(c);
    if (PC_BIG(c))
        N = 1, C = 16, O = 32, H = W = 28, ph = pw = 1;
    int64_t OH = H + 2 * ph - 2, OW = W + 2 * pw - 2;
    if (OH < 1 || OW < 1)
        return PC_RETRY;
    int bias = (int)pr(c, 0, 1), res = (int)pr(c, 0, 1);
    int64_t wd[4] = {O, C, 3, 3}, bd[1] = {O}, rd[4] = {N, O, OH, OW}, xd[4] = {N, C, H, W};
    mge_attr wa[2] = {A(MGE_KEY_tile, tile), A(MGE_KEY_block, blk)};
    int in[4], nin = 2;
    in[0] = nchwc ? pc_blocked(c, N, C, H, W, blk, -1, 1) : pc_in(c, MGE_F32, 4, xd, -1, 1);
    in[1] = pc_un(c, nchwc ? MGE_OP_WINOGRAD_WEIGHT_NCHWC : MGE_OP_WINOGRAD_WEIGHT, pc_in(c, MGE_F32, 4, wd, -1, 1),
                  1 + nchwc, wa);
    if (bias)
        in[nin++] = pc_in(c, MGE_F32, 1, bd, -1, 1);
    if (res)
        in[nin++] = nchwc ? pc_blocked(c, N, O, OH, OW, blk, -2, 2) : pc_in(c, MGE_F32, 4, rd, -2, 2);
    mge_attr at[7] = {A(MGE_KEY_out, O),        A(MGE_KEY_tile, tile),      A2(MGE_KEY_pad, ph, pw),
                      A(MGE_KEY_bias, bias),    A(MGE_KEY_residual, res),   A(MGE_KEY_act, pc_act(c)),
                      A_f(MGE_KEY_alpha, 0.1)};
    int y = pc_node(c, c->op, nin, in, 7, at);
    if (y < 0)
        return PC_RETRY;
    pc_out(c, in[1]);   /* the transformed weight too */
    return pc_out(c, y);
}

static int gen_to_nchwc(pcase *c)
{
    if (c->dt != MGE_F32)
        return PC_NODT;
    return pc_out(c, pc_blocked(c, pr(c, 1, 2), pdim(c, 33), pdim(c, 9), pdim(c, 9), pc_block(c), -1, 1));
}

/* from_nchwc of a random blocked tensor: lanes past `channels` hold noise
 * the kernel must not copy */
static int gen_from_nchwc(pcase *c)
{
    if (c->dt != MGE_F32)
        return PC_NODT;
    int64_t blk = pc_block(c), d[5] = {pr(c, 1, 2), pr(c, 1, 3), pdim(c, 9), pdim(c, 9), blk};
    mge_attr at[1] = {A(MGE_KEY_channels, pr(c, (d[1] - 1) * blk + 1, d[1] * blk))};
    return pc_out(c, pc_un(c, MGE_OP_FROM_NCHWC, pc_in(c, MGE_F32, 5, d, -1, 1), 1, at));
}

/* conv2d_nchwc: x blocked by to_nchwc (ci = 8 or 16) or a plain x seen
 * as [N,C,H,W,1] (ci = 1, the stem); the weight packed from a plain one
 * (zero lanes past the channels); dense or depthwise */
static int gen_conv2d_nchwc(pcase *c)
{
    if (c->dt != MGE_F32)
        return PC_NODT;
    int64_t co = pc_block(c), N = pr(c, 1, 2), C = pdim(c, 33), H = pdim(c, 13), W = pdim(c, 13), O = pdim(c, 33);
    int dw = pr(c, 0, 2) == 0 && C > 1, stem = !dw && pr(c, 0, 3) == 0;   /* one channel: groups = 1, dense */
    int64_t ci = stem ? 1 : dw ? co : pc_block(c);
    int64_t k[2] = {pr(c, 1, 5), 0}, s[2] = {pr(c, 1, 2), 0}, p[2] = {pr(c, 0, 2), pr(c, 0, 2)};
    int64_t dl[2] = {pr(c, 0, 3) ? 1 : 2, 1};
    k[1] = pr(c, 0, 2) ? k[0] : pr(c, 1, 5);
    s[1] = s[0], dl[1] = dl[0];
    if (PC_BIG(c))
        N = 1, C = 32, O = 64, H = W = 28, k[0] = k[1] = 3, s[0] = s[1] = 1, p[0] = p[1] = 1, dl[0] = dl[1] = 1;
    if (dw)
        O = C;
    int64_t Cb = (C + ci - 1) / ci, Ob = (O + co - 1) / co, G = dw ? C : 1;
    int64_t OH = mge_conv_out_dim(H, k[0], s[0], p[0], dl[0], 0), OW = mge_conv_out_dim(W, k[1], s[1], p[1], dl[1], 0);
    if (OH <= 0 || OW <= 0)
        return PC_RETRY;
    int x;
    if (stem) {
        int64_t xd[4] = {N, C, H, W}, x5[5] = {N, C, H, W, 1};
        mge_attr ra[1] = {A_ints(MGE_KEY_shape, 5, x5)};
        x = pc_un(c, MGE_OP_RESHAPE, pc_in(c, MGE_F32, 4, xd, -1, 1), 1, ra);
    } else {
        x = pc_blocked(c, N, C, H, W, ci, -1, 1);
    }
    /* the plain weight [O, C/G, kh, kw] packed into a zeroed blocked one */
    int64_t wd6[6] = {Ob, Cb, k[0], k[1], ci, co}, wd4[4] = {Ob, k[0], k[1], co};
    int w = dw ? pc_in(c, MGE_F32, 4, wd4, 0, 0) : pc_in(c, MGE_F32, 6, wd6, 0, 0);
    if (w < 0)
        return PC_RETRY;
    float *wp = pc_data(c, w)->data;
    for (int64_t o = 0; o < O; o++)
        for (int64_t i = 0; i < C / G; i++)
            for (int64_t a = 0; a < k[0]; a++)
                for (int64_t b = 0; b < k[1]; b++)
                    wp[mge_nchwc_weight_at(G, o, i, a, b, Cb, ci, co, k[0], k[1])] = (float)pu(c, -1, 1);
    int bias = (int)pr(c, 0, 1), res = (int)pr(c, 0, 1), in[4] = {x, w}, nin = 2;
    int64_t bd[1] = {O};
    if (bias)
        in[nin++] = pc_in(c, MGE_F32, 1, bd, -1, 1);
    if (res)
        in[nin++] = pc_blocked(c, N, O, OH, OW, co, -2, 2);
    mge_attr at[11] = {A(MGE_KEY_out, O),
                       A2(MGE_KEY_kernel, k[0], k[1]),
                       A2(MGE_KEY_stride, s[0], s[1]),
                       A2(MGE_KEY_pad, p[0], p[1]),
                       A2(MGE_KEY_dilation, dl[0], dl[1]),
                       A(MGE_KEY_groups, G),
                       A(MGE_KEY_bias, bias),
                       A(MGE_KEY_residual, res),
                       A(MGE_KEY_act, pc_act(c)),
                       A_f(MGE_KEY_alpha, 0.1)};
    return pc_out(c, pc_node(c, MGE_OP_CONV2D_NCHWC, nin, in, 10, at));
}

static int gen_maxpool2d_nchwc(pcase *c)
{
    if (c->dt != MGE_F32)
        return PC_NODT;
    int64_t k[2] = {pr(c, 1, 4), 0};
    k[1] = pr(c, 0, 2) ? k[0] : pr(c, 1, 4);
    mge_attr at[5];
    int na = 0;
    at[na++] = A2(MGE_KEY_kernel, k[0], k[1]);
    if (pr(c, 0, 3))
        at[na++] = A(MGE_KEY_stride, pr(c, 1, 3));
    at[na++] = A2(MGE_KEY_pad, pr(c, 0, k[0] / 2), pr(c, 0, k[1] / 2));
    at[na++] = A(MGE_KEY_dilation, pr(c, 1, 2));
    at[na++] = A(MGE_KEY_ceil_mode, pr(c, 0, 1));
    int64_t H = PC_BIG(c) ? 56 : pdim(c, 13), C = PC_BIG(c) ? 64 : pdim(c, 33);
    return pc_out(c, pc_un(c, MGE_OP_MAXPOOL2D_NCHWC, pc_blocked(c, pr(c, 1, 2), C, H, H, pc_block(c), -3, 3), na, at));
}

/* ---------------------------------------------------------------- indexing and logic */

/* Random indices of idt (i32 or i64) in [-bound, bound): negative ones too. */
static int pc_index(pcase *c, mge_dtype idt, int nd, const int64_t *d, int64_t bound)
{
    return pc_in(c, idt, nd, d, (double)-bound, (double)(bound - 1));
}

static mge_dtype pc_idt(pcase *c)
{
    return pr(c, 0, 1) ? MGE_I64 : MGE_I32;
}

static int pc_plain(mge_dtype dt)
{
    return dt != MGE_QS8 && dt != MGE_QS32;
}

/* gather / index_select: x of any dtype, indices of rank 0..2 (1 for
 * index_select); the big case gathers rows of a table (an embedding). */
static int gen_gather(pcase *c)
{
    if (!pc_plain(c->dt))
        return PC_NODT;
    int64_t d[4], id[2];
    int nd = pshape(c, 1, 4, 9, d), sel = c->op == MGE_OP_INDEX_SELECT;
    int ni = sel ? 1 : (int)pr(c, 0, 2);
    for (int i = 0; i < ni; i++)
        id[i] = pdim(c, 7);
    int ax = (int)pr(c, -nd, nd - 1);
    if (PC_BIG(c))
        nd = 2, d[0] = 3000, d[1] = 64, ni = 1, id[0] = 700, ax = 0;
    int x = pc_in(c, c->dt, nd, d, pc_lo(c->dt), 100);
    mge_attr at[1] = {A(MGE_KEY_axis, ax)};
    int in[2] = {x, pc_index(c, pc_idt(c), ni, id, d[ax < 0 ? ax + nd : ax])};
    return pc_out(c, pc_node(c, c->op, 2, in, 1, at));
}

/* gather_elements and scatter: indices (and updates) of x's rank, each dim
 * at most x's off the axis. The big cases split over the pool: the last
 * axis, and the first with more indices than x has rows (repeated scatter
 * indices: the last update wins) and smaller dims off it. */
static int gen_elements(pcase *c)
{
    if (!pc_plain(c->dt))
        return PC_NODT;
    int64_t d[4], id[4];
    int nd = pshape(c, 1, 4, 7, d);
    int ax = (int)pr(c, -nd, nd - 1), a = ax < 0 ? ax + nd : ax;
    for (int i = 0; i < nd; i++)
        id[i] = i == a ? pdim(c, 9) : pr(c, 1, d[i]);
    if (PC_BIG(c) && c->variant % 20 == 0)
        nd = 2, d[0] = id[0] = 300, d[1] = 200, id[1] = 150, ax = a = 1;
    else if (PC_BIG(c))
        nd = 3, d[0] = 64, d[1] = id[1] = 40, d[2] = 33, id[0] = 100, id[2] = 20, ax = a = 0;
    mge_attr at[1] = {A(MGE_KEY_axis, ax)};
    int in[3] = {pc_in(c, c->dt, nd, d, pc_lo(c->dt), 100), pc_index(c, pc_idt(c), nd, id, d[a]),
                 pc_in(c, c->dt, nd, id, pc_lo(c->dt), 100)};
    return pc_out(c, pc_node(c, c->op, c->op == MGE_OP_SCATTER ? 3 : 2, in, 1, at));
}

/* scatter_nd: indices [m, k] into data of rank r >= k, updates [m] + data.dims[k:].
 * The big cases (k = 1 and 2, rows repeated) split the slices over the pool. */
static int gen_scatter_nd(pcase *c)
{
    if (!pc_plain(c->dt))
        return PC_NODT;
    int64_t d[4], ud[4];
    int nd = pshape(c, 1, 4, 7, d), k = (int)pr(c, 1, nd), nu = 1;
    int64_t id[2] = {pdim(c, 5), k};
    if (PC_BIG(c) && c->variant % 20 == 0)
        nd = 2, d[0] = 300, d[1] = 256, k = 1, id[0] = 200, id[1] = 1;
    else if (PC_BIG(c))
        nd = 3, d[0] = 20, d[1] = 30, d[2] = 400, k = 2, id[0] = 300, id[1] = 2;
    ud[0] = id[0];
    for (int i = k; i < nd; i++)
        ud[nu++] = d[i];
    int x = pc_in(c, c->dt, nd, d, pc_lo(c->dt), 100);
    int ix = pc_in(c, pc_idt(c), 2, id, 0, 0);
    if (ix < 0)
        return PC_RETRY;
    mge_tensor *t = pc_data(c, ix);
    for (int64_t j = 0; j < id[0] * k; j++) {   /* component j % k in its own axis */
        int64_t b = d[j % k], v = pr(c, -b, b - 1);
        if (t->dtype == MGE_I64)
            ((int64_t *)t->data)[j] = v;
        else
            ((int32_t *)t->data)[j] = (int32_t)v;
    }
    int in[3] = {x, ix, pc_in(c, c->dt, nu, ud, pc_lo(c->dt), 100)};
    return pc_out(c, pc_node(c, MGE_OP_SCATTER_ND, 3, in, 0, NULL));
}

/* one_hot (the kernel is the indices'): values or not, indices partly out
 * of range (all-off rows). depth is the attribute: sim's placement copies
 * consts to the device without their values, so a depth input is not
 * known there at plan time (test_index.c runs that form on ref and cpu).
 * The big cases split over the pool: the last axis and a middle one. */
static int gen_one_hot(pcase *c)
{
    if (c->dt != MGE_I32 && c->dt != MGE_I64)
        return PC_NODT;
    int64_t d[3], depth = pdim(c, 17), two[1] = {2};
    int nd = pshape(c, 0, 3, 7, d);
    int64_t ax = pr(c, -nd - 1, nd);
    if (PC_BIG(c) && c->variant % 20 == 0)
        nd = 1, d[0] = 3000, depth = 20, ax = -1;
    else if (PC_BIG(c))
        nd = 2, d[0] = 40, d[1] = 300, depth = 10, ax = 1;
    int in[2] = {pc_in(c, c->dt, nd, d, (double)(-depth - 1), (double)depth)}, nin = 1;
    mge_attr at[2] = {A(MGE_KEY_axis, ax), A(MGE_KEY_depth, depth)};
    if (pr(c, 0, 1))
        in[nin++] = pc_in(c, pr(c, 0, 1) ? MGE_F32 : MGE_I64, 1, two, -5, 5);
    return pc_out(c, pc_node(c, MGE_OP_ONE_HOT, nin, in, 2, at));
}

/* where (the kernel is cond's, bool): a and b of a random dtype, all of one
 * shape (the cpu path) or broadcast. */
static int gen_where(pcase *c)
{
    if (c->dt != MGE_BOOL)
        return PC_NODT;
    static const mge_dtype dts[] = {MGE_F32, MGE_F32, MGE_I64, MGE_I32, MGE_F16, MGE_U8, MGE_BOOL};
    mge_dtype dt = dts[pr(c, 0, 6)];
    int64_t d[4], cd[4], ad[4], bd[4];
    int nd = pshape(c, 0, 4, 9, d), nc = nd, na = nd, nb = nd;
    memcpy(cd, d, sizeof d), memcpy(ad, d, sizeof d), memcpy(bd, d, sizeof d);
    if (PC_BIG(c))
        nd = nc = na = nb = 1, d[0] = cd[0] = ad[0] = bd[0] = pr(c, 40000, 70000);
    else if (c->variant % 2)
        nc = pc_bshape(c, nd, d, cd), na = pc_bshape(c, nd, d, ad), nb = pc_bshape(c, nd, d, bd);
    int in[3] = {pc_in(c, MGE_BOOL, nc, cd, 0, 1), pc_in(c, dt, na, ad, pc_lo(dt), 100),
                 pc_in(c, dt, nb, bd, pc_lo(dt), 100)};
    return pc_out(c, pc_node(c, MGE_OP_WHERE, 3, in, 0, NULL));
}

/* comparisons (any plain dtype) and the boolean ops (bool): same shapes,
 * a scalar operand, or broadcast; small ranges so equal happens often. */
static int gen_compare(pcase *c)
{
    int op = c->op, logical = op == MGE_OP_NOT || op == MGE_OP_AND || op == MGE_OP_OR || op == MGE_OP_XOR;
    if (!pc_plain(c->dt) || (logical && c->dt != MGE_BOOL))
        return PC_NODT;
    int64_t d[4], ad[4], bd[4];
    int nd = pshape(c, 0, 4, 9, d), na = nd, nb = nd, v = c->variant % 3;
    memcpy(ad, d, sizeof d), memcpy(bd, d, sizeof d);
    if (PC_BIG(c))   /* variant 10: b a scalar */
        nd = na = nb = 1, d[0] = ad[0] = bd[0] = pr(c, 40000, 70000), nb = v == 1 ? 0 : 1;
    else if (v == 1)
        nb = 0;
    else if (v == 2)
        na = pc_bshape(c, nd, d, ad), nb = pc_bshape(c, nd, d, bd);
    double lo = c->dt == MGE_BOOL || c->dt == MGE_U8 ? 0 : -3, hi = c->dt == MGE_BOOL ? 1 : 3;
    int in[2] = {pc_in(c, c->dt, na, ad, lo, hi), op == MGE_OP_NOT ? -2 : pc_in(c, c->dt, nb, bd, lo, hi)};
    if (is_float(c->dt) && in[0] >= 0 && c->variant % 4 == 3)
        pc_specials(c, in[0], 1);
    return pc_out(c, pc_node(c, op, op == MGE_OP_NOT ? 1 : 2, in, 0, NULL));
}

/* ---------------------------------------------------------------- int8 */

static int gen_quantize(pcase *c)
{
    int q = c->op == MGE_OP_QUANTIZE;
    if (c->dt != (q ? MGE_F32 : MGE_QS8))
        return PC_NODT;
    int64_t d[4];
    int nd = pshape(c, 0, 4, 17, d);
    if (PC_BIG(c))
        nd = 2, d[0] = 16, d[1] = 1003;
    double sc = pu(c, 0.005, 0.1);
    int x = pc_in(c, c->dt, nd, d, q ? -150 * sc : -128, q ? 150 * sc : 128);
    if (q)
        pc_specials(c, x, 1);
    mge_attr at[2] = {A_f(MGE_KEY_scale, sc), A(MGE_KEY_zero, pr(c, -128, 127))};
    return pc_out(c, pc_un(c, c->op, x, 2, at));
}

/* A qs8 weight [O, ...] with per-channel (or one) symmetric scales in the
 * tensor, values in [-127, 127]; the mean scale in *wmean. */
static int pc_qweight(pcase *c, int nd, const int64_t *d, double *wmean)
{
    int w = pc_in(c, MGE_QS8, nd, d, -127, 127);
    if (w < 0)
        return -1;
    mge_tensor *t = pc_data(c, w);
    int per = (int)pr(c, 0, 2) != 0;
    t->q.axis = per ? 0 : -1;
    t->q.nscale = per ? (int)d[0] : 1;
    t->q.scale = malloc(sizeof(float) * (size_t)t->q.nscale);
    double s = 0;
    for (int i = 0; i < t->q.nscale; i++)
        s += t->q.scale[i] = (float)pu(c, 0.004, 0.014);
    *wmean = s / t->q.nscale;
    return w;
}

/* qconv2d / qlinear: scales as test_quant_kernels.c picks them, so the
 * outputs spread over the int8 range instead of saturating */
static int gen_qlayer(pcase *c)
{
    if (c->dt != MGE_QS8)
        return PC_NODT;
    int lin = c->op == MGE_OP_QLINEAR;
    pconv q;
    pc_conv_geom(c, &q, PC_BIG(c));
    int64_t K = (q.C / q.G) * q.k[0] * q.k[1];
    int64_t xd[4] = {q.N, q.C, q.H, q.W}, wd[4] = {q.O, q.C / q.G, q.k[0], q.k[1]}, bd[1] = {q.O};
    int xnd = 4, wnd = 4;
    if (lin) {
        K = q.C = PC_BIG(c) ? 300 : pdim(c, 33);
        xnd = pr(c, 2, 3);
        xd[0] = PC_BIG(c) ? 32 : pdim(c, 9), xd[1] = pdim(c, 5), xd[xnd - 1] = q.C;
        q.O = PC_BIG(c) ? 100 : pdim(c, 33);
        wd[0] = bd[0] = q.O, wd[1] = q.C, wnd = 2;
    }
    double wm = 1, xs = 0.05;
    int in[3] = {pc_in(c, MGE_QS8, xnd, xd, -128, 128), pc_qweight(c, wnd, wd, &wm),
                 pc_in(c, MGE_QS32, 1, bd, -40000, 40000)};
    double m = 60.0 / (73.0 * 74.0 * sqrt((double)K));
    static const int64_t acts[] = {-1, MGE_OP_RELU, MGE_OP_RELU6};
    mge_attr at[16];
    int na = 0;
    if (lin) {
        at[na++] = A(MGE_KEY_out, q.O);
        at[na++] = A(MGE_KEY_bias, q.bias);
    } else {
        na = pc_conv_attrs(&q, at);
    }
    at[na++] = A(MGE_KEY_act, acts[pr(c, 0, 2)]);
    at[na++] = A_f(MGE_KEY_x_scale, xs);
    at[na++] = A(MGE_KEY_x_zero, pr(c, -128, 127));
    at[na++] = A_f(MGE_KEY_y_scale, xs * wm / m);
    at[na++] = A(MGE_KEY_y_zero, pr(c, -20, 20));
    return pc_out(c, pc_node(c, c->op, 2 + q.bias, in, na, at));
}

static int gen_qadd(pcase *c)
{
    if (c->dt != MGE_QS8)
        return PC_NODT;
    int64_t d[4];
    int nd = pshape(c, 0, 4, 17, d);
    if (PC_BIG(c))
        nd = 2, d[0] = 16, d[1] = 1003;
    int in[2] = {pc_in(c, MGE_QS8, nd, d, -128, 128), pc_in(c, MGE_QS8, nd, d, -128, 128)};
    static const int64_t acts[] = {-1, MGE_OP_RELU, MGE_OP_RELU6};
    mge_attr at[7] = {A(MGE_KEY_act, acts[pr(c, 0, 2)]),    A_f(MGE_KEY_x_scale, pu(c, 0.01, 0.1)),
                      A(MGE_KEY_x_zero, pr(c, -128, 127)),  A_f(MGE_KEY_x2_scale, pu(c, 0.01, 0.1)),
                      A(MGE_KEY_x2_zero, pr(c, -128, 127)), A_f(MGE_KEY_y_scale, pu(c, 0.02, 0.2)),
                      A(MGE_KEY_y_zero, pr(c, -20, 20))};
    return pc_out(c, pc_node(c, MGE_OP_QADD, 2, in, 7, at));
}

#include "parity_cases_ops.h"   /* the generators of the op set of issue 20 (layers, sequences, attention, math) */
#include "parity_cases_emath.h" /* the extra math ops (bitwise, det, eye_like, lrn, dft) */
#include "parity_cases_qlin.h"   /* the ONNX linear quantization ops (group quant-onnx) */
#endif
