/* test_grad_conv.c — gradient rules and kernels of conv2d, linear, matmul
 * and the pools: finite differences through gc_check (unit_grad.h), the
 * fast cpu kernels against the ref kernels, bit-identical at 1 and 3
 * threads, maxpool's tie rule, and the shape checks of the new ops. */
#include "internal.h"
#include "unit.h"
#include "unit_grad.h"
#include "unit_graph.h"

/* key = [a, b] (INTS of two values) */
static mge_attr A2(int key, int64_t a, int64_t b)
{
    mge_attr x = A(key, a);
    x.n = 2;
    x.i[1] = b;
    return x;
}

static int input(mge_graph *g, const char *name, int nd, const int64_t *d)
{
    int v = mge_graph_add_value(g, name, MGE_VAL_INPUT, MGE_F32, nd, d, &gc_err);
    CHECK_MSG(v >= 0, "%s", gc_err.msg);
    return v;
}

/* ---------------------------------------------------------------- conv2d FD */

typedef struct conv_case {
    int64_t N, C, H, W, O, kh, kw, sh, sw, ph, pw, dh, dw, groups;
    int bias;
} conv_case;

static void conv_fd(const conv_case *c)
{
    mge_graph *g = mge_graph_new();
    int64_t xd[4] = {c->N, c->C, c->H, c->W};
    int x = input(g, "x", 4, xd);
    mge_attr at[7] = {A(MGE_KEY_out, c->O),          A2(MGE_KEY_kernel, c->kh, c->kw), A2(MGE_KEY_stride, c->sh, c->sw),
                      A2(MGE_KEY_pad, c->ph, c->pw), A2(MGE_KEY_dilation, c->dh, c->dw), A(MGE_KEY_groups, c->groups),
                      A(MGE_KEY_bias, c->bias)};
    int y = layer(g, "conv", MGE_OP_CONV2D, x, 7, at);
    CHECK(y >= 0);
    if (y >= 0) {
        double w = gc_check(g, y, NULL, 1e-2, 0);
        CHECK_MSG(w < 1e-2, "conv N%lld C%lld %lldx%lld O%lld k%lldx%lld s%lldx%lld p%lldx%lld d%lldx%lld g%lld b%d: %g",
                  (long long)c->N, (long long)c->C, (long long)c->H, (long long)c->W, (long long)c->O, (long long)c->kh,
                  (long long)c->kw, (long long)c->sh, (long long)c->sw, (long long)c->ph, (long long)c->pw,
                  (long long)c->dh, (long long)c->dw, (long long)c->groups, c->bias, w);
    }
    mge_graph_free(g);
}

static void test_conv_fd_cases(void)
{
    static const conv_case cases[] = {
        /* N  C  H  W  O  kh kw sh sw ph pw dh dw g bias */
        {2, 3, 5, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},   /* 3x3 pad 1, non-square */
        {1, 2, 7, 5, 3, 3, 3, 2, 2, 0, 0, 1, 1, 1, 0},   /* stride 2, pad 0, no bias */
        {2, 2, 6, 7, 2, 3, 2, 2, 1, 2, 1, 1, 1, 1, 1},   /* pad 2, mixed stride, rect kernel */
        {1, 3, 8, 8, 2, 3, 3, 1, 1, 2, 2, 2, 2, 1, 1},   /* dilation 2 */
        {2, 4, 5, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1, 4, 1},   /* depthwise */
        {1, 4, 7, 6, 8, 3, 3, 2, 2, 1, 1, 1, 1, 4, 0},   /* depthwise x2 multiplier, stride 2 */
        {2, 4, 6, 5, 6, 3, 3, 1, 2, 1, 0, 1, 1, 2, 1},   /* groups 2 */
        {2, 3, 4, 5, 5, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1},   /* 1x1 */
        {1, 4, 6, 6, 3, 1, 1, 2, 2, 0, 0, 1, 1, 1, 0},   /* 1x1 stride 2 */
        {1, 2, 9, 7, 2, 3, 3, 2, 3, 1, 2, 2, 1, 2, 1},   /* everything at once */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        conv_fd(&cases[i]);
}

/* Random shapes, seeded. */
static void test_conv_fd_random(void)
{
    mge_rng r;
    mge_rng_seed(&r, 77);
    for (int t = 0; t < 6; t++) {
        conv_case c;
        c.groups = 1 + (int64_t)(mge_rng_next(&r) % 3);
        c.C = c.groups * (1 + (int64_t)(mge_rng_next(&r) % 2));
        c.O = c.groups * (1 + (int64_t)(mge_rng_next(&r) % 3));
        c.N = 1 + (int64_t)(mge_rng_next(&r) % 2);
        c.kh = 1 + (int64_t)(mge_rng_next(&r) % 3), c.kw = 1 + (int64_t)(mge_rng_next(&r) % 3);
        c.sh = 1 + (int64_t)(mge_rng_next(&r) % 2), c.sw = 1 + (int64_t)(mge_rng_next(&r) % 2);
        c.ph = (int64_t)(mge_rng_next(&r) % 3), c.pw = (int64_t)(mge_rng_next(&r) % 3);
        c.dh = 1 + (int64_t)(mge_rng_next(&r) % 2), c.dw = 1 + (int64_t)(mge_rng_next(&r) % 2);
        c.H = c.dh * (c.kh - 1) + 1 + (int64_t)(mge_rng_next(&r) % 5);
        c.W = c.dw * (c.kw - 1) + 1 + (int64_t)(mge_rng_next(&r) % 5);
        c.bias = (int)(mge_rng_next(&r) % 2);
        conv_fd(&c);
    }
}

/* ---------------------------------------------------------------- linear / matmul FD */

static void linear_fd(int nd, const int64_t *xd, int64_t out, int bias)
{
    mge_graph *g = mge_graph_new();
    int x = input(g, "x", nd, xd);
    mge_attr at[2] = {A(MGE_KEY_out, out), A(MGE_KEY_bias, bias)};
    int y = layer(g, "fc", MGE_OP_LINEAR, x, 2, at);
    CHECK(y >= 0);
    if (y >= 0)
        CHECK(gc_check(g, y, NULL, 1e-2, 0) < 1e-2);
    mge_graph_free(g);
}

static void test_linear_fd(void)
{
    linear_fd(2, (const int64_t[]){4, 5}, 3, 1);
    linear_fd(2, (const int64_t[]){3, 7}, 6, 0);
    linear_fd(3, (const int64_t[]){2, 3, 4}, 5, 1);
    linear_fd(3, (const int64_t[]){2, 3, 4}, 2, 0);
    linear_fd(1, (const int64_t[]){6}, 4, 1);   /* no leading dims */
    linear_fd(4, (const int64_t[]){2, 1, 2, 3}, 3, 1);
}

static void matmul_fd(int na, const int64_t *ad, int nb, const int64_t *bd, int ta, int tb)
{
    mge_graph *g = mge_graph_new();
    int a = input(g, "a", na, ad), b = input(g, "b", nb, bd);
    mge_attr at[2] = {A(MGE_KEY_transpose_a, ta), A(MGE_KEY_transpose_b, tb)};
    int in[2] = {a, b};
    int y = node(g, "mm", MGE_OP_MATMUL, 2, in, 2, at);
    CHECK(y >= 0);
    if (y >= 0)
        CHECK_MSG(gc_check(g, y, NULL, 1e-2, 0) < 1e-2, "matmul rank %d x rank %d ta=%d tb=%d", na, nb, ta, tb);
    mge_graph_free(g);
}

static void test_matmul_fd(void)
{
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            /* a is [M,K] or [K,M], b is [K,N] or [N,K]: M=3, K=4, N=5 */
            int64_t a2[2] = {ta ? 4 : 3, ta ? 3 : 4}, b2[2] = {tb ? 5 : 4, tb ? 4 : 5};
            matmul_fd(2, a2, 2, b2, ta, tb);
            int64_t a3[3] = {2, a2[0], a2[1]}, b3[3] = {2, b2[0], b2[1]};
            matmul_fd(3, a3, 3, b3, ta, tb);
        }
}

/* Batch dims that broadcast: the operand's gradient is summed back (sum_to). */
static void test_matmul_fd_broadcast(void)
{
    matmul_fd(3, (const int64_t[]){2, 3, 4}, 2, (const int64_t[]){4, 5}, 0, 0);
    matmul_fd(2, (const int64_t[]){4, 3}, 3, (const int64_t[]){2, 5, 4}, 1, 1);
    matmul_fd(4, (const int64_t[]){2, 1, 3, 4}, 3, (const int64_t[]){3, 4, 2}, 0, 0);
    matmul_fd(3, (const int64_t[]){1, 4, 3}, 3, (const int64_t[]){2, 4, 2}, 1, 0);
}

/* 1-D operands (numpy promotion). */
static void test_matmul_fd_vector(void)
{
    matmul_fd(1, (const int64_t[]){4}, 2, (const int64_t[]){4, 3}, 0, 0);
    matmul_fd(1, (const int64_t[]){4}, 2, (const int64_t[]){3, 4}, 1, 1);
    matmul_fd(2, (const int64_t[]){3, 4}, 1, (const int64_t[]){4}, 0, 0);
    matmul_fd(2, (const int64_t[]){4, 3}, 1, (const int64_t[]){4}, 1, 0);
    matmul_fd(1, (const int64_t[]){5}, 1, (const int64_t[]){5}, 0, 0);
    matmul_fd(1, (const int64_t[]){4}, 3, (const int64_t[]){2, 4, 3}, 0, 0);
    matmul_fd(3, (const int64_t[]){2, 3, 4}, 1, (const int64_t[]){4}, 0, 0);
}

/* ---------------------------------------------------------------- pools FD */

typedef struct pool_case {
    int op;
    int64_t N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw;
    int ceil_mode, incl, nostride;
} pool_case;

static void pool_fd(const pool_case *c)
{
    mge_graph *g = mge_graph_new();
    int64_t xd[4] = {c->N, c->C, c->H, c->W};
    int x = input(g, "x", 4, xd);
    mge_attr at[8];
    int na = 0;
    if (c->op != MGE_OP_GLOBAL_AVGPOOL) {
        at[na++] = A2(MGE_KEY_kernel, c->kh, c->kw);
        if (!c->nostride)
            at[na++] = A2(MGE_KEY_stride, c->sh, c->sw);
        at[na++] = A2(MGE_KEY_pad, c->ph, c->pw);
        at[na++] = A(MGE_KEY_ceil_mode, c->ceil_mode);
        if (c->op == MGE_OP_MAXPOOL2D)
            at[na++] = A2(MGE_KEY_dilation, c->dh, c->dw);
        else
            at[na++] = A(MGE_KEY_count_include_pad, c->incl);
    }
    int y = node(g, "pool", c->op, 1, &x, na, at);
    CHECK(y >= 0);
    if (y >= 0)
        CHECK_MSG(gc_check(g, y, NULL, 1e-2, 0) < 1e-2,
                  "%s %lldx%lld k%lldx%lld s%lldx%lld p%lldx%lld d%lldx%lld ceil %d incl %d", mge_op_info(c->op)->name,
                  (long long)c->H, (long long)c->W, (long long)c->kh, (long long)c->kw, (long long)c->sh,
                  (long long)c->sw, (long long)c->ph, (long long)c->pw, (long long)c->dh, (long long)c->dw,
                  c->ceil_mode, c->incl);
    mge_graph_free(g);
}

static void test_pool_fd(void)
{
    const int MX = MGE_OP_MAXPOOL2D, AV = MGE_OP_AVGPOOL2D;
    const pool_case cases[] = {
        /* op N C H W kh kw sh sw ph pw dh dw ceil incl nostride */
        {MX, 2, 2, 6, 6, 2, 2, 2, 2, 0, 0, 1, 1, 0, 1, 1},
        {MX, 1, 2, 7, 5, 3, 3, 2, 2, 1, 1, 1, 1, 0, 1, 0},
        {MX, 1, 2, 7, 6, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0},   /* ceil_mode */
        {MX, 1, 2, 9, 8, 3, 2, 1, 2, 1, 1, 2, 2, 0, 1, 0},   /* dilation */
        {MX, 1, 1, 8, 9, 3, 3, 2, 3, 1, 0, 2, 1, 1, 1, 0},   /* dilation + ceil_mode */
        {MX, 2, 1, 5, 5, 3, 3, 1, 1, 1, 1, 1, 1, 0, 1, 0},   /* overlapping windows */
        {AV, 2, 2, 6, 6, 2, 2, 2, 2, 0, 0, 1, 1, 0, 1, 1},
        {AV, 1, 2, 7, 5, 3, 3, 2, 2, 1, 1, 1, 1, 0, 1, 0},
        {AV, 1, 2, 7, 5, 3, 3, 2, 2, 1, 1, 1, 1, 0, 0, 0},   /* count_include_pad=false */
        {AV, 1, 2, 7, 6, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0},   /* ceil_mode */
        {AV, 1, 2, 7, 6, 3, 3, 2, 2, 1, 1, 1, 1, 1, 0, 0},   /* ceil_mode, exclude pad */
        {AV, 1, 2, 8, 7, 2, 3, 3, 2, 1, 1, 1, 1, 1, 1, 0},   /* window past the pad (ceil) */
        {AV, 2, 1, 5, 6, 3, 3, 1, 1, 1, 1, 1, 1, 0, 1, 0},
        {MGE_OP_GLOBAL_AVGPOOL, 2, 3, 4, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        pool_fd(&cases[i]);
}

/* maxpool2d_grad on backend be (0 ref, 1 cpu) of dy = 1, 2, ... [1,1,OH,OW]
 * over an all-equal x [1,1,H,W] (ties everywhere); dx into r (H*W
 * floats). 0 when the graph or the run failed. */
static int maxpool_ties_run(int be, int64_t OH, int64_t OW, int64_t H, int64_t W, int nattr, const mge_attr *at,
                            float *r)
{
    const int64_t dyd[4] = {1, 1, OH, OW}, xd[4] = {1, 1, H, W};
    mge_graph *g = mge_graph_new();
    int in[2];
    in[0] = input(g, "dy", 4, dyd);   /* declaration order = the run's input order */
    in[1] = input(g, "x", 4, xd);
    int dx = node(g, "dx", MGE_OP_MAXPOOL2D_GRAD, 2, in, nattr, at), ok = 0;
    CHECK(dx >= 0);
    mge_tensor tdy, tx;
    CHECK_OK(mge_tensor_alloc(&tdy, MGE_F32, 4, dyd, &gc_err), gc_err);
    CHECK_OK(mge_tensor_alloc(&tx, MGE_F32, 4, xd, &gc_err), gc_err);
    for (int64_t i = 0; i < OH * OW; i++)
        ((float *)tdy.data)[i] = (float)(i + 1);
    for (int64_t i = 0; i < H * W; i++)
        ((float *)tx.data)[i] = 0.5f;
    mge_exec_opts o = {.backend = be ? "cpu" : "ref", .threads = 2, .noutputs = 1, .outputs = &dx};
    mge_exec *e = NULL;
    CHECK_OK(mge_exec_create(g, &o, &e, &gc_err), gc_err);
    const mge_tensor *ins[2] = {&tdy, &tx};
    mge_status s = e ? mge_exec_run(e, ins, &gc_err) : MGE_ERR_INVALID;
    if (e)
        CHECK_OK(s, gc_err);
    if (s == MGE_OK) {
        memcpy(r, mge_exec_result(e, 0)->data, sizeof(float) * (size_t)(H * W));
        ok = 1;
    }
    mge_exec_free(e);
    mge_tensor_free(&tdy);
    mge_tensor_free(&tx);
    mge_graph_free(g);
    return ok;
}

/* Ties: the whole gradient of a window goes to its first maximal element
 * in scan order (PyTorch). All-equal input, kernel 2 stride 1: window
 * (oh, ow) sends dy to (oh, ow). */
static void test_maxpool_ties(void)
{
    for (int be = 0; be < 2; be++) {
        mge_attr at[2] = {A(MGE_KEY_kernel, 2), A(MGE_KEY_stride, 1)};
        float r[16];
        if (maxpool_ties_run(be, 3, 3, 4, 4, 2, at, r))
            for (int h = 0; h < 4; h++)
                for (int w = 0; w < 4; w++)
                    CHECK_NEAR(r[h * 4 + w], h < 3 && w < 3 ? (float)(h * 3 + w + 1) : 0.0f, 0);
    }
}

/* ---------------------------------------------------------------- kernels: cpu == ref, thread-count independent */

/* One gradient op on random inputs of the given shapes, run on ref and on
 * cpu at 1 and 3 threads. */
static void kernel_check(const char *what, int op, int nin, const int *nds, const int64_t (*dims)[4], int nattr,
                         const mge_attr *at)
{
    mge_graph *g = mge_graph_new();
    int in[4];
    mge_tensor t[4];
    const mge_tensor *ins[4];
    mge_rng r;
    mge_rng_seed(&r, 99 + (uint64_t)op);
    for (int i = 0; i < nin; i++) {
        char name[16];
        snprintf(name, sizeof name, "i%d", i);
        in[i] = input(g, name, nds[i], dims[i]);
        CHECK_OK(mge_tensor_alloc(&t[i], MGE_F32, nds[i], dims[i], &gc_err), gc_err);
        gc_fill(&t[i], &r, -1, 1);
        ins[i] = &t[i];
    }
    int y = node(g, "y", op, nin, in, nattr, at);
    CHECK_MSG(y >= 0, "%s", what);
    if (y < 0) {
        mge_graph_free(g);
        return;
    }
    mge_exec *e[3] = {NULL, NULL, NULL};
    const char *be[3] = {"ref", "cpu", "cpu"};
    int th[3] = {1, 1, 3};
    for (int k = 0; k < 3; k++) {
        mge_exec_opts o = {.backend = be[k], .threads = th[k], .noutputs = 1, .outputs = &y};
        CHECK_OK(mge_exec_create(g, &o, &e[k], &gc_err), gc_err);
        if (e[k])
            CHECK_OK(mge_exec_run(e[k], ins, &gc_err), gc_err);
    }
    if (e[0] && e[1] && e[2]) {
        const mge_tensor *a = mge_exec_result(e[0], 0), *b = mge_exec_result(e[1], 0), *c = mge_exec_result(e[2], 0);
        int64_t n = mge_tensor_numel(a);
        double amax = 0, d = 0;
        for (int64_t i = 0; i < n; i++)
            amax = fmax(amax, fabs(((const float *)a->data)[i]));
        for (int64_t i = 0; i < n; i++)
            d = fmax(d, fabs((double)((const float *)a->data)[i] - ((const float *)b->data)[i]));
        CHECK_MSG(d <= 1e-5 * (amax + 1), "%s: cpu differs from ref by %g (max %g)", what, d, amax);
        CHECK_MSG(memcmp(b->data, c->data, sizeof(float) * (size_t)n) == 0, "%s: 1 and 3 threads differ", what);
    }
    for (int k = 0; k < 3; k++)
        mge_exec_free(e[k]);
    for (int i = 0; i < nin; i++)
        mge_tensor_free(&t[i]);
    mge_graph_free(g);
}

static int64_t odim(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, int ceil_mode)
{
    return mge_conv_out_dim(in, k, s, p, d, ceil_mode);
}

static void conv_kernels(const conv_case *c)
{
    int64_t OH = odim(c->H, c->kh, c->sh, c->ph, c->dh, 0), OW = odim(c->W, c->kw, c->sw, c->pw, c->dw, 0);
    int64_t dy[4] = {c->N, c->O, OH, OW}, x[4] = {c->N, c->C, c->H, c->W}, w[4] = {c->O, c->C / c->groups, c->kh, c->kw};
    mge_attr at[5] = {A2(MGE_KEY_kernel, c->kh, c->kw), A2(MGE_KEY_stride, c->sh, c->sw), A2(MGE_KEY_pad, c->ph, c->pw),
                      A2(MGE_KEY_dilation, c->dh, c->dw), A(MGE_KEY_groups, c->groups)};
    int nds[3] = {4, 4, 4};
    char what[160];
    snprintf(what, sizeof what, "conv grads N%lld C%lld %lldx%lld O%lld k%lld s%lld p%lld d%lld g%lld", (long long)c->N,
             (long long)c->C, (long long)c->H, (long long)c->W, (long long)c->O, (long long)c->kh, (long long)c->sh,
             (long long)c->ph, (long long)c->dh, (long long)c->groups);
    const int64_t gi[3][4] = {{dy[0], dy[1], dy[2], dy[3]}, {w[0], w[1], w[2], w[3]}, {x[0], x[1], x[2], x[3]}};
    kernel_check(what, MGE_OP_CONV2D_GRAD_INPUT, 3, nds, gi, 5, at);
    const int64_t gw[3][4] = {{dy[0], dy[1], dy[2], dy[3]}, {x[0], x[1], x[2], x[3]}, {w[0], w[1], w[2], w[3]}};
    kernel_check(what, MGE_OP_CONV2D_GRAD_WEIGHT, 3, nds, gw, 5, at);
}

static void test_conv_kernels(void)
{
    static const conv_case cases[] = {
        /* N  C   H   W   O  kh kw sh sw ph pw dh dw g bias */
        {2, 3, 9, 11, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0},
        {3, 8, 16, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0},    /* enough work to split */
        {2, 16, 14, 14, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1, 0},
        {2, 16, 12, 12, 8, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0},    /* 1x1 */
        {2, 8, 12, 12, 16, 1, 1, 2, 2, 0, 0, 1, 1, 1, 0},    /* 1x1 stride 2 */
        {2, 8, 13, 10, 8, 3, 3, 1, 1, 1, 1, 1, 1, 8, 0},     /* depthwise */
        {2, 8, 13, 10, 16, 3, 3, 2, 2, 1, 1, 1, 1, 8, 0},    /* depthwise x2, stride 2 */
        {1, 4, 11, 9, 6, 3, 2, 2, 1, 2, 1, 2, 1, 2, 0},      /* groups, dilation, pad 2 */
        {1, 3, 40, 40, 24, 5, 5, 1, 1, 2, 2, 1, 1, 1, 0},    /* large column count */
        {16, 32, 4, 4, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0},    /* many images, few pixels */
        {1, 32, 24, 24, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0},   /* channel blocks (grad_input) */
        {8, 1, 28, 28, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0},    /* one input channel, one group */
        {2, 16, 48, 40, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0},    /* pixel blocks, cut mid-row */
        {1, 24, 41, 37, 8, 5, 5, 2, 2, 2, 2, 1, 1, 1, 0},    /* pixel blocks, stride 2 */
        {2, 6, 15, 14, 6, 5, 3, 1, 1, 2, 1, 2, 1, 6, 0},     /* depthwise, dilation */
        {2, 6, 15, 14, 6, 3, 3, 3, 2, 1, 0, 1, 2, 6, 0},     /* depthwise, stride 3 */
        {2, 4, 9, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 4, 0},       /* depthwise x2, stride 1 */
        {1, 3, 6, 7, 3, 3, 3, 1, 1, 2, 2, 1, 1, 3, 0},       /* depthwise, pad 2 */
        {1, 2, 5, 5, 2, 2, 2, 1, 1, 2, 1, 1, 1, 2, 0},       /* depthwise, pad > kernel - 1 */
        {2, 32, 40, 40, 32, 3, 3, 1, 1, 1, 1, 1, 1, 32, 0},  /* depthwise, long dots */
        {4, 32, 24, 24, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0},   /* batch and column blocks (grad_weight) */
        {3, 64, 16, 16, 64, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0},   /* 1x1, blocks */
        {2, 4, 11, 60, 6, 3, 5, 1, 1, 2, 2, 2, 2, 2, 0},     /* shifted rows: groups, dilation, 3x5 */
        {2, 2, 8, 300, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0},    /* shifted rows: blocks of output rows */
        {3, 5, 9, 40, 7, 2, 2, 1, 1, 0, 1, 1, 1, 1, 0},      /* shifted rows: pad < kernel - 1, even kernel */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        conv_kernels(&cases[i]);
}

static void test_linear_kernels(void)
{
    static const int64_t shapes[][3] = {{4, 5, 3}, {128, 300, 200}, {1, 50, 7}, {130, 17, 260}, {3, 1, 2}, {1024, 100, 64}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int64_t M = shapes[i][0], K = shapes[i][1], O = shapes[i][2];
        int nds[2] = {2, 2};
        const int64_t gi[2][4] = {{M, O}, {O, K}};
        kernel_check("linear_grad_input", MGE_OP_LINEAR_GRAD_INPUT, 2, nds, gi, 0, NULL);
        const int64_t gw[2][4] = {{M, O}, {M, K}};
        kernel_check("linear_grad_weight", MGE_OP_LINEAR_GRAD_WEIGHT, 2, nds, gw, 0, NULL);
    }
    /* 3-D x */
    int nds[2] = {3, 3};
    const int64_t gw[2][4] = {{2, 33, 40}, {2, 33, 70}};
    kernel_check("linear_grad_weight 3-D", MGE_OP_LINEAR_GRAD_WEIGHT, 2, nds, gw, 0, NULL);
    int nds2[2] = {3, 2};
    const int64_t gi[2][4] = {{2, 33, 40}, {40, 70}};
    kernel_check("linear_grad_input 3-D", MGE_OP_LINEAR_GRAD_INPUT, 2, nds2, gi, 0, NULL);
}

/* Ties in 2x2 windows at stride 2 (the cpu kernel's special path): all
 * equal, so each window's dy goes to its top-left element. Also 18 windows
 * a row, so the AVX-512 loop (16 windows at a time) meets ties too. */
static void test_maxpool2_ties(void)
{
    for (int be = 0; be < 2; be++) {
        mge_attr at[1] = {A(MGE_KEY_kernel, 2)};
        float r[4 * 36];
        if (maxpool_ties_run(be, 2, 18, 4, 36, 1, at, r)) {
            for (int h = 0; h < 4; h++)
                for (int w = 0; w < 36; w++) {
                    float want = h % 2 == 0 && w % 2 == 0 ? (float)((h / 2) * 18 + w / 2 + 1) : 0.0f;
                    CHECK_MSG(r[h * 36 + w] == want, "%s: dx[%d][%d] = %g, want %g", be ? "cpu" : "ref", h, w,
                              r[h * 36 + w], want);
                }
        } else {
            CHECK(0);
        }
    }
    for (int be = 0; be < 2; be++) {
        mge_attr at[1] = {A(MGE_KEY_kernel, 2)};
        float r[20];
        if (maxpool_ties_run(be, 2, 2, 5, 4, 1, at, r)) {
            for (int h = 0; h < 5; h++)
                for (int w = 0; w < 4; w++) {
                    float want = h < 4 && h % 2 == 0 && w % 2 == 0 ? (float)((h / 2) * 2 + w / 2 + 1) : 0.0f;
                    CHECK_MSG(r[h * 4 + w] == want, "%s: dx[%d][%d] = %g, want %g", be ? "cpu" : "ref", h, w,
                              r[h * 4 + w], want);
                }
        } else {
            CHECK(0);
        }
    }
}

static void test_pool_kernels(void)
{
    const int MX = MGE_OP_MAXPOOL2D_GRAD, AV = MGE_OP_AVGPOOL2D_GRAD;
    const pool_case cases[] = {
        {MX, 2, 3, 12, 12, 2, 2, 2, 2, 0, 0, 1, 1, 0, 1, 1},
        {MX, 2, 3, 13, 11, 2, 2, 2, 2, 0, 0, 1, 1, 0, 1, 1},   /* 2x2/2, odd sizes: uncovered row and column */
        {MX, 2, 3, 28, 71, 2, 2, 2, 2, 0, 0, 1, 1, 0, 1, 1},   /* 2x2/2, 35 windows a row: 16 at a time, then 3 */
        {MX, 1, 2, 13, 11, 2, 2, 2, 2, 0, 0, 1, 1, 1, 1, 1},   /* 2x2/2 with ceil_mode: the general path */
        {MX, 2, 5, 15, 13, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0},
        {MX, 1, 3, 16, 15, 3, 2, 1, 3, 1, 1, 2, 2, 1, 1, 0},
        {MX, 4, 8, 9, 9, 3, 3, 1, 1, 1, 1, 1, 1, 0, 1, 0},
        {AV, 2, 3, 12, 12, 2, 2, 2, 2, 0, 0, 1, 1, 0, 1, 1},
        {AV, 2, 5, 15, 13, 3, 3, 2, 2, 1, 1, 1, 1, 1, 0, 0},
        {AV, 1, 3, 16, 15, 3, 2, 1, 3, 1, 1, 1, 1, 1, 1, 0},
        {AV, 4, 8, 9, 9, 3, 3, 1, 1, 1, 1, 1, 1, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const pool_case *c = &cases[i];
        int mx = c->op == MX;
        int64_t sh = c->nostride ? c->kh : c->sh, sw = c->nostride ? c->kw : c->sw;
        int64_t OH = odim(c->H, c->kh, sh, c->ph, mx ? c->dh : 1, c->ceil_mode);
        int64_t OW = odim(c->W, c->kw, sw, c->pw, mx ? c->dw : 1, c->ceil_mode);
        mge_attr at[6];
        int na = 0;
        at[na++] = A2(MGE_KEY_kernel, c->kh, c->kw);
        if (!c->nostride)
            at[na++] = A2(MGE_KEY_stride, c->sh, c->sw);
        at[na++] = A2(MGE_KEY_pad, c->ph, c->pw);
        at[na++] = A(MGE_KEY_ceil_mode, c->ceil_mode);
        at[na++] = mx ? A2(MGE_KEY_dilation, c->dh, c->dw) : A(MGE_KEY_count_include_pad, c->incl);
        int nds[2] = {4, 4};
        const int64_t d[2][4] = {{c->N, c->C, OH, OW}, {c->N, c->C, c->H, c->W}};
        kernel_check(mge_op_info(c->op)->name, c->op, 2, nds, d, na, at);
    }
    int nds[2] = {4, 4};
    const int64_t d[2][4] = {{3, 70, 1, 1}, {3, 70, 7, 9}};
    kernel_check("global_avgpool_grad", MGE_OP_GLOBAL_AVGPOOL_GRAD, 2, nds, d, 0, NULL);
}

/* ---------------------------------------------------------------- shape checks */

static void test_infer_errors(void)
{
    mge_graph *g = mge_graph_new();
    int dy = input(g, "dy", 4, (const int64_t[]){1, 4, 5, 5});
    int w = input(g, "w", 4, (const int64_t[]){4, 3, 3, 3});
    int x = input(g, "x", 4, (const int64_t[]){1, 3, 5, 5});
    mge_attr at[2] = {A(MGE_KEY_kernel, 3), A(MGE_KEY_pad, 1)};
    const char *on[1] = {"o"};
    /* fits */
    CHECK(mge_graph_add_node(g, "gi", MGE_OP_CONV2D_GRAD_INPUT, 3, (const int[]){dy, w, x}, 2, at, 1,
                             (const char *[]){"gi"}, &gc_err) >= 0);
    CHECK(mge_graph_add_node(g, "gw", MGE_OP_CONV2D_GRAD_WEIGHT, 3, (const int[]){dy, x, w}, 2, at, 1,
                             (const char *[]){"gw"}, &gc_err) >= 0);
    /* dy of the wrong spatial size (no pad: output 3x3) */
    CHECK(mge_graph_add_node(g, "bad", MGE_OP_CONV2D_GRAD_INPUT, 3, (const int[]){dy, w, x}, 1, at, 1, on, &gc_err) <
          0);
    CHECK(strstr(gc_err.msg, "dy") != NULL);
    /* weight and x swapped */
    CHECK(mge_graph_add_node(g, "bad", MGE_OP_CONV2D_GRAD_WEIGHT, 3, (const int[]){dy, w, x}, 2, at, 1, on, &gc_err) <
          0);
    /* linear */
    int d2 = input(g, "d2", 2, (const int64_t[]){6, 4}), w2 = input(g, "w2", 2, (const int64_t[]){4, 9});
    int x2 = input(g, "x2", 2, (const int64_t[]){6, 9}), x3 = input(g, "x3", 2, (const int64_t[]){5, 9});
    CHECK(mge_graph_add_node(g, "li", MGE_OP_LINEAR_GRAD_INPUT, 2, (const int[]){d2, w2}, 0, NULL, 1,
                             (const char *[]){"li"}, &gc_err) >= 0);
    CHECK(g->values[mge_graph_find(g, "li")].dims[1] == 9);
    CHECK(mge_graph_add_node(g, "lw", MGE_OP_LINEAR_GRAD_WEIGHT, 2, (const int[]){d2, x2}, 0, NULL, 1,
                             (const char *[]){"lw"}, &gc_err) >= 0);
    CHECK(g->values[mge_graph_find(g, "lw")].dims[0] == 4 && g->values[mge_graph_find(g, "lw")].dims[1] == 9);
    CHECK(mge_graph_add_node(g, "bad", MGE_OP_LINEAR_GRAD_WEIGHT, 2, (const int[]){d2, x3}, 0, NULL, 1, on, &gc_err) <
          0);
    CHECK(mge_graph_add_node(g, "bad", MGE_OP_LINEAR_GRAD_INPUT, 2, (const int[]){d2, x2}, 0, NULL, 1, on, &gc_err) <
          0);
    /* pool: dy must be the forward output */
    mge_attr pk = A(MGE_KEY_kernel, 2);
    int px = input(g, "px", 4, (const int64_t[]){1, 2, 6, 6}), pd = input(g, "pd", 4, (const int64_t[]){1, 2, 3, 3});
    CHECK(mge_graph_add_node(g, "mp", MGE_OP_MAXPOOL2D_GRAD, 2, (const int[]){pd, px}, 1, &pk, 1,
                             (const char *[]){"mp"}, &gc_err) >= 0);
    CHECK(mge_graph_add_node(g, "bad", MGE_OP_AVGPOOL2D_GRAD, 2, (const int[]){px, px}, 1, &pk, 1, on, &gc_err) < 0);
    CHECK(mge_graph_add_node(g, "bad", MGE_OP_GLOBAL_AVGPOOL_GRAD, 2, (const int[]){pd, px}, 0, NULL, 1, on,
                             &gc_err) < 0);
    mge_graph_free(g);
}

/* Only the wanted gradients are emitted: x as a graph input with no
 * gradient requested gets no conv2d_grad_input. */
static void test_only_wanted(void)
{
    mge_graph *g = mge_graph_new();
    int x = input(g, "x", 4, (const int64_t[]){1, 2, 5, 5});
    mge_attr at[3] = {A(MGE_KEY_out, 3), A(MGE_KEY_kernel, 3), A(MGE_KEY_bias, 0)};
    int y = layer(g, "conv", MGE_OP_CONV2D, x, 3, at);
    int s = un(g, "s", MGE_OP_SUM, y);
    int wv = mge_graph_find(g, "conv.weight"), gr = -1;
    CHECK_OK(mge_grad_build(g, s, 1, &wv, &gr, &gc_err), gc_err);
    CHECK(gr >= 0);
    int ngi = 0, ngw = 0;
    for (int i = 0; i < g->nnodes; i++) {
        ngi += g->nodes[i].op == MGE_OP_CONV2D_GRAD_INPUT;
        ngw += g->nodes[i].op == MGE_OP_CONV2D_GRAD_WEIGHT;
    }
    CHECK(ngi == 0 && ngw == 1);
    mge_graph_free(g);
}

/* FLOPs: each conv gradient does the forward's multiply-adds (no bias);
 * linear gradients 2*M*in*out; pool gradients count their windows. */
static void test_flops(void)
{
    mge_graph *g = mge_graph_new();
    int x = input(g, "x", 4, (const int64_t[]){2, 4, 9, 9});
    mge_attr at[4] = {A(MGE_KEY_out, 6), A(MGE_KEY_kernel, 3), A(MGE_KEY_bias, 0), A(MGE_KEY_groups, 2)};
    int y = layer(g, "conv", MGE_OP_CONV2D, x, 4, at);
    int wv = mge_graph_find(g, "conv.weight");
    int gi = node(g, "gi", MGE_OP_CONV2D_GRAD_INPUT, 3, (const int[]){y, wv, x}, 2,
                  (mge_attr[]){A(MGE_KEY_kernel, 3), A(MGE_KEY_groups, 2)});
    int gw = node(g, "gw", MGE_OP_CONV2D_GRAD_WEIGHT, 3, (const int[]){y, x, wv}, 2,
                  (mge_attr[]){A(MGE_KEY_kernel, 3), A(MGE_KEY_groups, 2)});
    CHECK(gi >= 0 && gw >= 0);
    double f = 2.0 * 2 * 6 * 7 * 7 * 2 * 9;
    CHECK_NEAR(unit_flops(g, g->values[y].producer, 1), f, 0);
    CHECK_NEAR(unit_flops(g, g->values[gi].producer, 1), f, 0);
    CHECK_NEAR(unit_flops(g, g->values[gw].producer, 1), f, 0);
    int d2 = input(g, "d2", 2, (const int64_t[]){5, 3}), w2 = input(g, "w2", 2, (const int64_t[]){3, 7});
    int x2 = input(g, "x2", 2, (const int64_t[]){5, 7});
    int li = bin(g, "li", MGE_OP_LINEAR_GRAD_INPUT, d2, w2), lw = bin(g, "lw", MGE_OP_LINEAR_GRAD_WEIGHT, d2, x2);
    CHECK_NEAR(unit_flops(g, g->values[li].producer, 1), 2.0 * 5 * 3 * 7, 0);
    CHECK_NEAR(unit_flops(g, g->values[lw].producer, 1), 2.0 * 5 * 3 * 7, 0);
    mge_graph_free(g);
}

int main(void)
{
    RUN(test_conv_fd_cases);
    RUN(test_conv_fd_random);
    RUN(test_linear_fd);
    RUN(test_matmul_fd);
    RUN(test_matmul_fd_broadcast);
    RUN(test_matmul_fd_vector);
    RUN(test_pool_fd);
    RUN(test_maxpool_ties);
    RUN(test_conv_kernels);
    RUN(test_linear_kernels);
    RUN(test_pool_kernels);
    RUN(test_maxpool2_ties);
    RUN(test_infer_errors);
    RUN(test_only_wanted);
    RUN(test_flops);
    return unit_done();
}
