/* test_kernels.c — the fast cpu kernels against the ref kernels, on random
 * inputs and shapes (odd sizes, broadcasting, conv geometry), with the
 * pool at 1 and 2 threads and in place where the op allows; and the thread
 * pool itself. */
#include "unit_graph.h"

#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

static mge_rng rng;
static mge_pool *pools[2];   /* NULL (serial) and 2 threads */

static int64_t rnd(int64_t lo, int64_t hi)   /* inclusive */
{
    return lo + (int64_t)(mge_rng_next(&rng) % (uint64_t)(hi - lo + 1));
}

/* ---------------------------------------------------------------- attributes */

static mge_attr a_ints(int key, int64_t v0, int64_t v1)
{
    mge_attr a = {key, 2, {v0, v1}, 0};
    return a;
}

/* ---------------------------------------------------------------- one case */

typedef struct tcase {
    mge_graph *g;
    int node;
    int nin;
    mge_tensor in[8];
    mge_tensor out;
} tcase;

typedef struct tin {
    int ndim;
    int64_t dims[MGE_MAX_DIMS];
    float lo, hi;   /* uniform range of the random values */
} tin;

/* Builds the graph for op on inputs of the given shapes and fills them.
 * Returns 0 when the graph refuses the node (the caller picked an invalid
 * random geometry), 1 when the case is ready. */
static int tcase_make(tcase *t, int op, int nin, const tin *ins, int nattr, const mge_attr *attrs)
{
    mge_error err = {0};
    memset(t, 0, sizeof *t);
    t->g = mge_graph_new();
    int ids[8];
    for (int i = 0; i < nin; i++) {
        char name[16];
        snprintf(name, sizeof name, "in%d", i);
        ids[i] = mge_graph_add_value(t->g, name, i ? MGE_VAL_PARAM : MGE_VAL_INPUT, MGE_F32, ins[i].ndim,
                                     ins[i].dims, &err);
        CHECK_MSG(ids[i] >= 0, "%s", err.msg);
    }
    const char *outn[1] = {"y"};
    t->node = mge_graph_add_node(t->g, "node", op, nin, ids, nattr, attrs, 1, outn, &err);
    if (t->node < 0) {
        mge_graph_free(t->g);
        t->g = NULL;
        return 0;
    }
    t->nin = nin;
    for (int i = 0; i < nin; i++) {
        CHECK_OK(mge_tensor_alloc(&t->in[i], MGE_F32, ins[i].ndim, ins[i].dims, &err), err);
        float *p = t->in[i].data;
        for (int64_t k = 0; k < mge_tensor_numel(&t->in[i]); k++)
            p[k] = ins[i].lo + (ins[i].hi - ins[i].lo) * mge_rng_uniform(&rng);
    }
    const mge_value *y = &t->g->values[t->g->nodes[t->node].out[0]];
    CHECK_OK(mge_tensor_alloc(&t->out, y->dtype, y->ndim, y->dims, &err), err);
    return 1;
}

static void tcase_free(tcase *t)
{
    for (int i = 0; i < t->nin; i++)
        mge_tensor_free(&t->in[i]);
    mge_tensor_free(&t->out);
    mge_graph_free(t->g);
}

/* ug_compare with the tighter absolute floor (1e-7) these op cases have
 * always been held to. */
static int compare(const char *what, const mge_tensor *got, const mge_tensor *want, double rtol)
{
    return ug_compare_floor(what, got, want, rtol, 1e-7);
}

static int ncompared[MGE_NOPS];

/* cpu against ref on a prepared case, at 1 and 2 threads, and in place
 * (output = copy of input 0) when the op allows it. */
static void check_case(tcase *t, const char *desc, double rtol)
{
    const mge_node *n = &t->g->nodes[t->node];
    const mge_kernel *kr = mge_backend_kernel(mge_backend_ref(), n->op, MGE_F32);
    const mge_kernel *kc = mge_backend_kernel(mge_backend_cpu(), n->op, MGE_F32);
    CHECK(kr && kc);
    if (!kr || !kc)
        return;
    CHECK_MSG(kc->run != kr->run, "%s: the cpu backend has no kernel of its own", desc);
    mge_error err = {0};
    mge_tensor *in[8];
    for (int i = 0; i < t->nin; i++)
        in[i] = &t->in[i];
    mge_tensor want, got;
    CHECK_OK(mge_tensor_copy(&want, &t->out, &err), err);
    CHECK_OK(ug_run_kernel(kr, NULL, n, in, &want, &err), err);
    int inplace = (mge_op_info(n->op)->flags & MGE_OPF_INPLACE) && mge_tensor_same_shape(&t->in[0], &t->out);
    for (int p = 0; p < 2; p++) {
        for (int ip = 0; ip <= inplace; ip++) {
            char what[256];
            snprintf(what, sizeof what, "%s threads=%d%s", desc, mge_pool_size(pools[p]), ip ? " in place" : "");
            mge_tensor x0;
            if (ip) {   /* the output is a copy of input 0, passed as both */
                CHECK_OK(mge_tensor_copy(&got, &t->in[0], &err), err);
                CHECK_OK(mge_tensor_copy(&x0, &t->in[0], &err), err);
                in[0] = &got;
            } else {
                CHECK_OK(mge_tensor_copy(&got, &t->out, &err), err);
                /* poison: every output element must be written */
                float *g = got.data;
                for (int64_t i = 0; i < mge_tensor_numel(&got); i++)
                    g[i] = 12345.0f;
            }
            mge_status s = ug_run_kernel(kc, pools[p], n, in, &got, &err);
            CHECK_MSG(s == MGE_OK, "%s: %s", what, err.msg);
            CHECK_MSG(compare(what, &got, &want, rtol), "%s", what);
            if (ip) {
                in[0] = &t->in[0];
                mge_tensor_free(&x0);
            }
            mge_tensor_free(&got);
        }
    }
    mge_tensor_free(&want);
    ncompared[n->op]++;
}

/* ---------------------------------------------------------------- conv2d */

static int conv_case(int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t kh, int64_t kw, int64_t s,
                     int64_t p, int64_t d, int64_t groups, int bias)
{
    tin ins[3] = {{4, {N, C, H, W}, -1, 1}, {4, {O, C / groups, kh, kw}, -1, 1}, {1, {O}, -1, 1}};
    mge_attr at[7] = {A(MGE_KEY_out, O), a_ints(MGE_KEY_kernel, kh, kw), A(MGE_KEY_stride, s),
                      a_ints(MGE_KEY_pad, p, p), A(MGE_KEY_dilation, d), A(MGE_KEY_groups, groups),
                      A(MGE_KEY_bias, bias)};
    tcase t;
    if (!tcase_make(&t, MGE_OP_CONV2D, bias ? 3 : 2, ins, 7, at))
        return 0;
    char desc[200];
    snprintf(desc, sizeof desc, "conv2d x[%lld,%lld,%lld,%lld] out=%lld k=%lldx%lld s=%lld p=%lld d=%lld g=%lld b=%d",
             (long long)N, (long long)C, (long long)H, (long long)W, (long long)O, (long long)kh, (long long)kw,
             (long long)s, (long long)p, (long long)d, (long long)groups, bias);
    check_case(&t, desc, 1e-4);
    tcase_free(&t);
    return 1;
}

static void test_conv2d(void)
{
    /* the three paths on typical shapes */
    CHECK(conv_case(1, 16, 14, 14, 32, 1, 1, 1, 0, 1, 1, 1));     /* 1x1 direct sgemm */
    CHECK(conv_case(2, 8, 7, 9, 12, 1, 1, 1, 0, 1, 2, 0));        /* grouped 1x1 */
    CHECK(conv_case(1, 3, 33, 31, 16, 7, 7, 2, 3, 1, 1, 1));      /* resnet stem */
    CHECK(conv_case(2, 8, 13, 13, 8, 3, 3, 1, 1, 1, 1, 1));       /* im2col */
    CHECK(conv_case(1, 16, 15, 15, 16, 3, 3, 1, 1, 1, 16, 1));    /* depthwise */
    CHECK(conv_case(1, 16, 15, 15, 16, 3, 3, 2, 1, 1, 16, 0));    /* depthwise stride 2 */
    CHECK(conv_case(2, 6, 9, 11, 12, 5, 5, 1, 2, 1, 6, 1));       /* depthwise, multiplier 2 */
    CHECK(conv_case(1, 4, 10, 10, 4, 3, 3, 3, 2, 2, 4, 1));       /* depthwise stride 3, dilation 2 */
    CHECK(conv_case(1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1));         /* all ones */
    CHECK(conv_case(1, 2, 1, 1, 3, 3, 3, 1, 1, 1, 1, 1));         /* 1x1 image, padded 3x3 */
    CHECK(conv_case(1, 4, 9, 9, 6, 1, 1, 2, 0, 1, 2, 1));         /* 1x1 strided: im2col */
    CHECK(conv_case(1, 3, 8, 8, 5, 1, 3, 1, 1, 1, 1, 1));         /* 1x3 kernel */
    /* stride 1 on shifted rows of the padded image (cpu_conv_rows.c) */
    CHECK(conv_case(4, 1, 28, 28, 32, 3, 3, 1, 1, 1, 1, 1));      /* one input channel */
    CHECK(conv_case(2, 4, 11, 60, 6, 3, 5, 1, 2, 2, 2, 1));       /* groups, dilation 2, 3x5 */
    CHECK(conv_case(2, 2, 8, 300, 64, 3, 3, 1, 1, 1, 1, 1));      /* several blocks of output rows */
    /* random geometry */
    int done = 0;
    for (int tries = 0; tries < 400 && done < 120; tries++) {
        int64_t groups = rnd(1, 3), mode = rnd(0, 3);
        int64_t cg = rnd(1, 5), og = rnd(1, 4);
        if (mode == 0) {   /* depthwise, with a channel multiplier sometimes */
            groups = rnd(1, 9);
            cg = 1;
        }
        int64_t k = rnd(1, 5), kw = rnd(0, 3) ? k : rnd(1, 5);
        int64_t s = rnd(1, 3), p = rnd(0, 2), d = rnd(1, 2);
        if (mode == 1)   /* 1x1 direct */
            k = kw = 1, s = 1, p = 0;
        done += conv_case(rnd(1, 2), cg * groups, rnd(1, 13), rnd(1, 13), og * groups, k, kw, s, p, d, groups,
                          (int)rnd(0, 1));
    }
    CHECK(done >= 100);
}

/* ---------------------------------------------------------------- linear, matmul */

static void test_linear(void)
{
    static const int64_t shapes[][4] = {{2, 1, 5, 3},   {2, 7, 13, 1},    {3, 2, 3, 4}, {2, 1, 512, 10},
                                        {2, 3, 1, 1},   {2, 32, 784, 64}, {3, 9, 7, 20}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int bias = 0; bias <= 1; bias++) {
            int nd = (int)shapes[i][0];
            tin ins[3] = {{nd, {0}, -1, 1}, {2, {shapes[i][3], 0}, -1, 1}, {1, {shapes[i][3]}, -1, 1}};
            if (nd == 2)
                ins[0].dims[0] = shapes[i][1], ins[0].dims[1] = shapes[i][2];
            else
                ins[0].dims[0] = shapes[i][1], ins[0].dims[1] = 2, ins[0].dims[2] = shapes[i][2];
            ins[1].dims[1] = shapes[i][2];
            mge_attr at[2] = {A(MGE_KEY_out, shapes[i][3]), A(MGE_KEY_bias, bias)};
            tcase t;
            CHECK(tcase_make(&t, MGE_OP_LINEAR, bias ? 3 : 2, ins, 2, at));
            if (!t.g)
                continue;
            char desc[64];
            snprintf(desc, sizeof desc, "linear case %zu bias=%d", i, bias);
            check_case(&t, desc, 1e-4);
            tcase_free(&t);
        }
}

static void test_matmul(void)
{
    /* a dims, b dims (before transposes), ta, tb */
    static const struct {
        int na, nb;
        int64_t a[4], b[4];
        int ta, tb;
    } cs[] = {
        {2, 2, {3, 5}, {5, 7}, 0, 0},
        {2, 2, {5, 3}, {5, 7}, 1, 0},
        {2, 2, {3, 5}, {7, 5}, 0, 1},
        {2, 2, {5, 3}, {7, 5}, 1, 1},
        {3, 2, {4, 3, 5}, {5, 2}, 0, 0},         /* shared b: one tall sgemm */
        {3, 3, {4, 3, 5}, {4, 5, 2}, 0, 0},      /* batched */
        {4, 3, {2, 1, 3, 5}, {3, 5, 6}, 0, 0},   /* broadcast batch dims */
        {3, 4, {1, 6, 5}, {2, 3, 4, 6}, 1, 1},   /* broadcast a, transposes */
        {3, 2, {2, 5, 3}, {5, 1}, 1, 0},         /* transposed a with shared b */
        {1, 2, {5}, {5, 3}, 0, 0},               /* 1-D: falls back to ref */
        {2, 1, {3, 5}, {5}, 0, 0},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        tin ins[2] = {{cs[i].na, {0}, -1, 1}, {cs[i].nb, {0}, -1, 1}};
        memcpy(ins[0].dims, cs[i].a, sizeof cs[i].a);
        memcpy(ins[1].dims, cs[i].b, sizeof cs[i].b);
        mge_attr at[2] = {A(MGE_KEY_transpose_a, cs[i].ta), A(MGE_KEY_transpose_b, cs[i].tb)};
        tcase t;
        CHECK_MSG(tcase_make(&t, MGE_OP_MATMUL, 2, ins, 2, at), "matmul case %zu refused", i);
        if (!t.g)
            continue;
        char desc[64];
        snprintf(desc, sizeof desc, "matmul case %zu", i);
        check_case(&t, desc, 1e-4);
        tcase_free(&t);
    }
}

/* ---------------------------------------------------------------- bit-identical over threads */

/* The BLAS-backed kernels cut each call into blocks from the shape alone,
 * so 1, 2 and 3 threads must give the same bits (OpenBLAS itself does not
 * compute an element the same way at every place in a call, so a cut that
 * followed the thread count would not). Shapes big enough to be cut (the
 * several-MFLOP ones), along columns and along rows, with block edges in
 * the middle of output rows; checked against ref as well. */
static void bitwise_case(tcase *t, const char *desc, mge_pool *p3)
{
    const mge_node *n = &t->g->nodes[t->node];
    const mge_kernel *kc = mge_backend_kernel(mge_backend_cpu(), n->op, MGE_F32);
    const mge_kernel *kr = mge_backend_kernel(mge_backend_ref(), n->op, MGE_F32);
    mge_error err = {0};
    mge_tensor *in[8];
    for (int i = 0; i < t->nin; i++)
        in[i] = &t->in[i];
    mge_tensor got[3], want;
    mge_pool *ps[3] = {NULL, pools[1], p3};
    for (int k = 0; k < 3; k++) {
        CHECK_OK(mge_tensor_copy(&got[k], &t->out, &err), err);
        CHECK_OK(ug_run_kernel(kc, ps[k], n, in, &got[k], &err), err);
    }
    CHECK_OK(mge_tensor_copy(&want, &t->out, &err), err);
    CHECK_OK(ug_run_kernel(kr, NULL, n, in, &want, &err), err);
    CHECK_MSG(compare(desc, &got[0], &want, 1e-4), "%s: cpu against ref", desc);
    CHECK_MSG(memcmp(got[0].data, got[1].data, got[0].nbytes) == 0, "%s: 2 threads differ from 1", desc);
    CHECK_MSG(memcmp(got[0].data, got[2].data, got[0].nbytes) == 0, "%s: 3 threads differ from 1", desc);
    for (int k = 0; k < 3; k++)
        mge_tensor_free(&got[k]);
    mge_tensor_free(&want);
}

static void test_bitwise_threads(void)
{
    mge_pool *p3 = mge_pool_create(3);
    CHECK(p3 != NULL);
    static const int64_t convs[][10] = {
        /* N, C, H, W, O, k, s, p, d, groups */
        {1, 32, 28, 28, 64, 3, 1, 1, 1, 1},    /* im2col, column blocks */
        {1, 16, 45, 45, 96, 3, 2, 1, 1, 1},    /* strided, block edge mid-row */
        {1, 8, 60, 50, 64, 5, 1, 2, 2, 1},     /* dilated, 8 column blocks */
        {1, 128, 7, 7, 256, 3, 1, 1, 1, 1},    /* 7x7 output: row blocks, shared im2col */
        {2, 64, 28, 28, 128, 1, 1, 0, 1, 1},   /* 1x1 direct, two images */
        {2, 320, 7, 7, 1280, 1, 1, 0, 1, 1},   /* 1x1 direct, row blocks */
        {2, 64, 24, 24, 128, 3, 1, 1, 1, 2},   /* grouped, column blocks */
        {1, 256, 7, 7, 512, 3, 1, 1, 1, 2},    /* grouped, row blocks */
    };
    for (size_t i = 0; i < sizeof convs / sizeof convs[0]; i++) {
        const int64_t *c = convs[i];
        tin ins[3] = {{4, {c[0], c[1], c[2], c[3]}, -1, 1},
                      {4, {c[4], c[1] / c[9], c[5], c[5]}, -1, 1},
                      {1, {c[4]}, -1, 1}};
        mge_attr at[7] = {A(MGE_KEY_out, c[4]), a_ints(MGE_KEY_kernel, c[5], c[5]),
                          A(MGE_KEY_stride, c[6]), a_ints(MGE_KEY_pad, c[7], c[7]),
                          A(MGE_KEY_dilation, c[8]), A(MGE_KEY_groups, c[9]),
                          A(MGE_KEY_bias, 1)};
        tcase t;
        CHECK_MSG(tcase_make(&t, MGE_OP_CONV2D, 3, ins, 7, at), "conv case %zu refused", i);
        if (!t.g)
            continue;
        char desc[64];
        snprintf(desc, sizeof desc, "bitwise conv2d case %zu", i);
        bitwise_case(&t, desc, p3);
        tcase_free(&t);
    }
    static const int64_t lins[][3] = {
        /* rows, in, out */
        {64, 512, 1024},   /* column blocks */
        {256, 512, 64},    /* row blocks */
        {2, 4096, 2048},   /* sgemv, blocks of output features */
        {32, 784, 256},    /* small batch, transposed onto our sgemm */
    };
    for (size_t i = 0; i < sizeof lins / sizeof lins[0]; i++) {
        tin ins[3] = {{2, {lins[i][0], lins[i][1]}, -1, 1},
                      {2, {lins[i][2], lins[i][1]}, -1, 1},
                      {1, {lins[i][2]}, -1, 1}};
        mge_attr at[2] = {A(MGE_KEY_out, lins[i][2]), A(MGE_KEY_bias, 1)};
        tcase t;
        CHECK_MSG(tcase_make(&t, MGE_OP_LINEAR, 3, ins, 2, at), "linear case %zu refused", i);
        if (!t.g)
            continue;
        char desc[64];
        snprintf(desc, sizeof desc, "bitwise linear case %zu", i);
        bitwise_case(&t, desc, p3);
        tcase_free(&t);
    }
    /* matmul: tall (shared b) and batched with a transposed b */
    tin mi[2][2] = {{{3, {8, 64, 256}, -1, 1}, {2, {256, 256}, -1, 1}},
                    {{3, {3, 200, 300}, -1, 1}, {3, {3, 160, 300}, -1, 1}}};
    for (int i = 0; i < 2; i++) {
        mge_attr at[2] = {A(MGE_KEY_transpose_a, 0), A(MGE_KEY_transpose_b, i)};
        tcase t;
        CHECK_MSG(tcase_make(&t, MGE_OP_MATMUL, 2, mi[i], 2, at), "matmul case %d refused", i);
        if (!t.g)
            continue;
        char desc[64];
        snprintf(desc, sizeof desc, "bitwise matmul case %d", i);
        bitwise_case(&t, desc, p3);
        tcase_free(&t);
    }
    /* the activation table's loops: odd sizes cut mid-vector, so every
     * element must take one code path wherever the split puts it */
    static const int acts[] = {MGE_OP_GELU, MGE_OP_SILU, MGE_OP_ERF, MGE_OP_SIGMOID, MGE_OP_MISH, MGE_OP_ELU};
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++) {
        tin in = {1, {70001}, -6, 6};
        tcase t;
        CHECK_MSG(tcase_make(&t, acts[i], 1, &in, 0, NULL), "%s refused", mge_op_info(acts[i])->name);
        if (!t.g)
            continue;
        char desc[64];
        snprintf(desc, sizeof desc, "bitwise %s n=70001", mge_op_info(acts[i])->name);
        bitwise_case(&t, desc, p3);
        tcase_free(&t);
    }
    mge_pool_free(p3);
}

/* ---------------------------------------------------------------- elementwise */

static void test_unary(void)
{
    static const int ops[] = {MGE_OP_RELU, MGE_OP_RELU6,    MGE_OP_LEAKY_RELU, MGE_OP_SIGMOID, MGE_OP_TANH,
                              MGE_OP_GELU, MGE_OP_SILU,     MGE_OP_HSWISH,     MGE_OP_HSIGMOID, MGE_OP_EXP,
                              MGE_OP_LOG,  MGE_OP_SQRT,     MGE_OP_NEG,        MGE_OP_ABS,     MGE_OP_DROPOUT};
    static const int64_t sizes[] = {1, 3, 7, 13, 64, 1000, 40000};
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            int pos = ops[o] == MGE_OP_LOG || ops[o] == MGE_OP_SQRT;
            float range = ops[o] == MGE_OP_EXP ? 80.0f : 10.0f;
            tin in = {2, {sizes[s] > 13 ? 4 : 1, sizes[s] > 13 ? sizes[s] / 4 : sizes[s]}, pos ? 0.001f : -range,
                      range};
            mge_attr at[1] = {A_f(ops[o] == MGE_OP_DROPOUT ? MGE_KEY_p : MGE_KEY_alpha, 0.2)};
            int nattr = ops[o] == MGE_OP_LEAKY_RELU || ops[o] == MGE_OP_DROPOUT;
            tcase t;
            CHECK(tcase_make(&t, ops[o], 1, &in, nattr, at));
            if (!t.g)
                continue;
            /* a few special values ride along */
            float *x = t.in[0].data;
            int64_t n = mge_tensor_numel(&t.in[0]);
            if (n > 13 && !pos) {
                x[0] = 0.0f, x[1] = -0.0f, x[2] = 3.0f, x[3] = -3.0f, x[4] = 6.0f;
                x[5] = ops[o] == MGE_OP_EXP ? 89.0f : 100.0f;
                x[6] = ops[o] == MGE_OP_EXP ? -110.0f : -100.0f;
                x[7] = NAN;
                x[8] = ops[o] == MGE_OP_EXP ? 88.5f : 50.0f;   /* near FLT_MAX */
                x[9] = ops[o] == MGE_OP_EXP ? -87.0f : -50.0f;  /* near FLT_MIN */
            }
            char desc[64];
            snprintf(desc, sizeof desc, "%s n=%lld", mge_op_info(ops[o])->name, (long long)n);
            check_case(&t, desc, 1e-5);
            tcase_free(&t);
        }
}

/* Broadcast patterns: shape of a, shape of b (ndim 0 = scalar []). */
static void test_binary(void)
{
    static const int ops[] = {MGE_OP_ADD, MGE_OP_SUB, MGE_OP_MUL, MGE_OP_DIV, MGE_OP_POW, MGE_OP_MAXIMUM,
                              MGE_OP_MINIMUM};
    static const struct {
        int na, nb;
        int64_t a[4], b[4];
    } pat[] = {
        {4, 4, {2, 3, 5, 7}, {2, 3, 5, 7}},        /* same shape */
        {1, 1, {1}, {1}},
        {2, 2, {64, 1000}, {64, 1000}},            /* large: parallel */
        {4, 0, {2, 3, 5, 7}, {0}},                 /* scalar b */
        {0, 4, {0}, {2, 3, 5, 7}},                 /* scalar a */
        {4, 1, {2, 3, 5, 7}, {1}},                 /* [1] */
        {4, 4, {2, 13, 5, 7}, {1, 13, 1, 1}},      /* per channel */
        {4, 3, {2, 13, 5, 7}, {13, 1, 1}},
        {4, 4, {1, 13, 1, 1}, {2, 13, 5, 7}},      /* per channel on the left */
        {4, 1, {2, 3, 5, 7}, {7}},                 /* per row */
        {1, 3, {7}, {3, 5, 7}},                    /* per row on the left */
        {4, 2, {2, 3, 5, 7}, {5, 7}},              /* trailing block */
        {4, 4, {2, 3, 5, 7}, {2, 3, 1, 1}},        /* leading block */
        {4, 4, {2, 3, 5, 7}, {2, 1, 1, 1}},
        {4, 4, {2, 1, 5, 1}, {2, 1, 5, 1}},
        {4, 4, {2, 3, 5, 7}, {1, 3, 1, 7}},        /* gap: ref fallback */
        {2, 2, {5, 1}, {1, 6}},                    /* both broadcast: ref fallback */
        {4, 4, {4, 64, 28, 28}, {1, 64, 1, 1}},    /* large per channel */
    };
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
        for (size_t i = 0; i < sizeof pat / sizeof pat[0]; i++) {
            int ispow = ops[o] == MGE_OP_POW;
            tin ins[2] = {{pat[i].na, {0}, ispow ? 0.1f : -2, 2}, {pat[i].nb, {0}, ispow ? -2.0f : 0.5f, 2}};
            memcpy(ins[0].dims, pat[i].a, sizeof pat[i].a);
            memcpy(ins[1].dims, pat[i].b, sizeof pat[i].b);
            tcase t;
            CHECK_MSG(tcase_make(&t, ops[o], 2, ins, 0, NULL), "pattern %zu refused", i);
            if (!t.g)
                continue;
            if (!ispow && ops[o] != MGE_OP_DIV && mge_tensor_numel(&t.in[0]) > 3)
                ((float *)t.in[0].data)[1] = NAN;
            char desc[64];
            snprintf(desc, sizeof desc, "%s pattern %zu", mge_op_info(ops[o])->name, i);
            check_case(&t, desc, 1e-5);
            tcase_free(&t);
        }
}

/* ---------------------------------------------------------------- pooling */

static void test_pool(void)
{
    int done = 0;
    for (int tries = 0; tries < 600 && done < 150; tries++) {
        int op = rnd(0, 1) ? MGE_OP_MAXPOOL2D : MGE_OP_AVGPOOL2D;
        int64_t k = rnd(1, 4), kw = rnd(0, 2) ? k : rnd(1, 4);
        int64_t s = rnd(1, 3), p = rnd(0, 2);
        mge_attr at[6];
        int na = 0;
        at[na++] = a_ints(MGE_KEY_kernel, k, kw);
        if (rnd(0, 3))
            at[na++] = A(MGE_KEY_stride, s);
        at[na++] = A(MGE_KEY_pad, p);
        at[na++] = A(MGE_KEY_ceil_mode, rnd(0, 1));
        if (op == MGE_OP_MAXPOOL2D)
            at[na++] = A(MGE_KEY_dilation, rnd(1, 2));
        else
            at[na++] = A(MGE_KEY_count_include_pad, rnd(0, 1));
        tin in = {4, {rnd(1, 2), rnd(1, 5), rnd(1, 13), rnd(1, 13)}, -3, 3};
        tcase t;
        if (!tcase_make(&t, op, 1, &in, na, at))
            continue;
        if (rnd(0, 4) == 0)
            ((float *)t.in[0].data)[rnd(0, mge_tensor_numel(&t.in[0]) - 1)] = NAN;
        char desc[160];
        snprintf(desc, sizeof desc, "%s x[%lld,%lld,%lld,%lld] k=%lldx%lld", mge_op_info(op)->name,
                 (long long)in.dims[0], (long long)in.dims[1], (long long)in.dims[2], (long long)in.dims[3],
                 (long long)k, (long long)kw);
        check_case(&t, desc, 1e-5);
        tcase_free(&t);
        done++;
    }
    CHECK(done >= 100);
    /* resnet's maxpool and a large plane count */
    mge_attr at[3] = {A(MGE_KEY_kernel, 3), A(MGE_KEY_stride, 2), A(MGE_KEY_pad, 1)};
    tin in = {4, {1, 64, 56, 56}, -3, 3};
    tcase t;
    CHECK(tcase_make(&t, MGE_OP_MAXPOOL2D, 1, &in, 3, at));
    if (t.g) {
        check_case(&t, "maxpool2d resnet", 1e-6);
        tcase_free(&t);
    }
    static const int64_t gs[][4] = {{1, 1, 1, 1}, {2, 3, 7, 7}, {1, 512, 7, 7}, {2, 5, 13, 1}, {1, 3, 64, 65}};
    for (size_t i = 0; i < sizeof gs / sizeof gs[0]; i++) {
        tin g = {4, {gs[i][0], gs[i][1], gs[i][2], gs[i][3]}, -1, 3};
        CHECK(tcase_make(&t, MGE_OP_GLOBAL_AVGPOOL, 1, &g, 0, NULL));
        if (!t.g)
            continue;
        check_case(&t, "global_avgpool", 1e-5);
        tcase_free(&t);
    }
}

/* ---------------------------------------------------------------- norms, softmax */

static void test_norm(void)
{
    static const int64_t xs[][4] = {{2, 3, 5, 7}, {1, 64, 56, 56}, {3, 5, 1, 1}, {4, 6, 0, 0}};
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        int nd = xs[i][2] ? 4 : 2;
        int64_t C = xs[i][1];
        tin ins[5] = {{nd, {xs[i][0], C, xs[i][2], xs[i][3]}, -2, 2},
                      {1, {C}, 0.5f, 1.5f},
                      {1, {C}, -1, 1},
                      {1, {C}, -0.5f, 0.5f},
                      {1, {C}, 0.1f, 2}};
        mge_attr at[1] = {A_f(MGE_KEY_eps, 1e-3)};
        tcase t;
        CHECK(tcase_make(&t, MGE_OP_BATCHNORM, 5, ins, 1, at));
        if (!t.g)
            continue;
        check_case(&t, "batchnorm", 1e-5);
        tcase_free(&t);
    }
    static const struct {
        int nd;
        int64_t d[4];
        int ax;
    } ln[] = {{2, {3, 7}, -1}, {3, {2, 5, 13}, -1}, {3, {2, 5, 13}, 1}, {2, {4, 768}, -1}, {1, {1}, 0}};
    for (size_t i = 0; i < sizeof ln / sizeof ln[0]; i++) {
        int ax = ln[i].ax < 0 ? ln[i].nd + ln[i].ax : ln[i].ax;
        tin ins[3] = {{ln[i].nd, {0}, -3, 5}, {ln[i].nd - ax, {0}, 0.5f, 1.5f}, {ln[i].nd - ax, {0}, -1, 1}};
        memcpy(ins[0].dims, ln[i].d, sizeof ln[i].d);
        memcpy(ins[1].dims, ln[i].d + ax, sizeof(int64_t) * (size_t)(ln[i].nd - ax));
        memcpy(ins[2].dims, ln[i].d + ax, sizeof(int64_t) * (size_t)(ln[i].nd - ax));
        mge_attr at[1] = {A(MGE_KEY_axis, ln[i].ax)};
        tcase t;
        CHECK_MSG(tcase_make(&t, MGE_OP_LAYERNORM, 3, ins, 1, at), "layernorm case %zu refused", i);
        if (!t.g)
            continue;
        check_case(&t, "layernorm", 1e-4);
        tcase_free(&t);
    }
}

static void test_softmax(void)
{
    static const struct {
        int nd;
        int64_t d[4];
        int ax;
    } cs[] = {{2, {3, 10}, -1}, {2, {1, 1}, -1},   {2, {5, 1000}, 1},    {4, {2, 3, 5, 7}, 1},
              {3, {2, 13, 9}, 0}, {1, {13}, 0},    {2, {200, 17}, -1}, {3, {4, 3, 5}, -2}};
    for (int op = 0; op < 2; op++)
        for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
            tin in = {cs[i].nd, {0}, -20, 20};
            memcpy(in.dims, cs[i].d, sizeof cs[i].d);
            mge_attr at[1] = {A(MGE_KEY_axis, cs[i].ax)};
            tcase t;
            int o = op ? MGE_OP_LOG_SOFTMAX : MGE_OP_SOFTMAX;
            CHECK(tcase_make(&t, o, 1, &in, 1, at));
            if (!t.g)
                continue;
            float *x = t.in[0].data;
            if (i == 0) {   /* a row of -inf and a row with NaN */
                for (int j = 0; j < 10; j++)
                    x[j] = -INFINITY;
                x[15] = NAN;
            }
            char desc[64];
            snprintf(desc, sizeof desc, "%s case %zu", mge_op_info(o)->name, i);
            check_case(&t, desc, 1e-5);
            tcase_free(&t);
        }
}

/* concat and slice: cpu_shape.c's row copies against ref, small and past
 * the size where they go parallel (more cases in test_parity.c) */
static void test_concat_slice(void)
{
    static const struct { int nd; int64_t d[3]; int ax; } cs[] = {{2, {3, 5}, 1}, {3, {64, 33, 129}, 0}, {3, {2, 700, 260}, -1}};
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        tin in[2] = {{cs[i].nd, {0}, -5, 5}, {cs[i].nd, {0}, -5, 5}};
        memcpy(in[0].dims, cs[i].d, sizeof cs[i].d);
        memcpy(in[1].dims, cs[i].d, sizeof cs[i].d);
        char desc[64];
        tcase t;
        mge_attr ac[1] = {A(MGE_KEY_axis, cs[i].ax)};
        CHECK(tcase_make(&t, MGE_OP_CONCAT, 2, in, 1, ac));
        snprintf(desc, sizeof desc, "concat case %zu", i);
        if (t.g)
            check_case(&t, desc, 0);
        tcase_free(&t);
        mge_attr as[4] = {A(MGE_KEY_axis, cs[i].ax), A(MGE_KEY_start, -2), A(MGE_KEY_end, 0), A(MGE_KEY_step, -3)};
        CHECK(tcase_make(&t, MGE_OP_SLICE, 1, in, 4, as));
        snprintf(desc, sizeof desc, "slice case %zu", i);
        if (t.g)
            check_case(&t, desc, 0);
        tcase_free(&t);
    }
}

/* Every op the cpu backend overrides was compared at least once. */
static void test_coverage(void)
{
    const mge_backend *c = mge_backend_cpu(), *r = mge_backend_ref();
    for (int op = 0; op < MGE_NOPS; op++) {
        /* training kernels are compared with ref where they are written:
         * gradients and optimizers in test_grad_*.c and test_optim.c, the
         * forward ops training made fast (loss, bias reductions) likewise;
         * test_parity.c compares every op x dtype with a cpu kernel, these
         * and the ones after them in ops.def included */
        if (op >= MGE_OP_CONV2D_GRAD_INPUT || op == MGE_OP_CROSS_ENTROPY || op == MGE_OP_SUM || op == MGE_OP_MEAN ||
            op == MGE_OP_TRANSPOSE)   /* transpose: tests/unit/test_permute.c */
            continue;
        if (c->k[op][MGE_F32].run && c->k[op][MGE_F32].run != r->k[op][MGE_F32].run)
            CHECK_MSG(ncompared[op] > 0, "op %s has a cpu kernel but no test", mge_op_info(op)->name);
    }
}

/* ---------------------------------------------------------------- pool */

typedef struct pool_probe {
    _Atomic int *hits;
    _Atomic int bad_thread;
    int size;
} pool_probe;

static void probe_task(void *a, int64_t task, int thread)
{
    pool_probe *p = a;
    atomic_fetch_add(&p->hits[task], 1);
    if (thread < 0 || thread >= p->size)
        atomic_store(&p->bad_thread, 1);
}

static void probe(mge_pool *pool, int64_t ntasks)
{
    static _Atomic int hits[5000];
    pool_probe p = {hits, 0, mge_pool_size(pool)};
    for (int64_t i = 0; i < ntasks; i++)
        atomic_store(&hits[i], 0);
    mge_pool_run(pool, ntasks, probe_task, &p);
    int ok = 1;
    for (int64_t i = 0; i < ntasks; i++)
        ok &= atomic_load(&hits[i]) == 1;
    CHECK_MSG(ok, "pool of %d, %lld tasks: a task did not run exactly once", mge_pool_size(pool),
              (long long)ntasks);
    CHECK(!atomic_load(&p.bad_thread));
}

/* A task that runs the pool again (nested): must not deadlock. */
typedef struct nest_probe {
    mge_pool *pool;
    _Atomic int inner;
} nest_probe;

static void nest_inner(void *a, int64_t task, int thread)
{
    atomic_fetch_add(&((nest_probe *)a)->inner, 1);
}

static void nest_outer(void *a, int64_t task, int thread)
{
    nest_probe *p = a;
    mge_pool_run(p->pool, 5, nest_inner, p);
}

static void test_thread_pool(void)
{
    CHECK(mge_pool_size(NULL) == 1);
    probe(NULL, 17);
    for (int n = 1; n <= 4; n++) {
        mge_pool *p = mge_pool_create(n);
        CHECK(p != NULL);
        if (!p)
            continue;
        CHECK(mge_pool_size(p) == n);
        for (int r = 0; r < 300; r++)
            probe(p, (int64_t)(r * 37 % 5000));
        mge_pool_free(p);
    }
    /* create/free loops, some with runs, some idle (workers asleep or not) */
    for (int r = 0; r < 200; r++) {
        mge_pool *p = mge_pool_create(1 + r % 3);
        CHECK(p != NULL);
        if (r % 2)
            probe(p, 1 + r);
        mge_pool_free(p);
    }
    mge_pool_free(NULL);
    mge_pool *p = mge_pool_create(2);
    nest_probe np = {p, 0};
    mge_pool_run(p, 7, nest_outer, &np);
    CHECK(atomic_load(&np.inner) == 35);
    mge_pool_free(p);
}

int main(int argc, char **argv)
{
    (void)argc;
    mge_rng_seed(&rng, 20261129);
    pools[0] = NULL;
    pools[1] = mge_pool_create(2);
    RUN(test_thread_pool);
    RUN(test_conv2d);
    RUN(test_linear);
    RUN(test_matmul);
    RUN(test_bitwise_threads);
    RUN(test_unary);
    RUN(test_binary);
    RUN(test_pool);
    RUN(test_norm);
    RUN(test_softmax);
    RUN(test_concat_slice);
    RUN(test_coverage);
    mge_pool_free(pools[1]);
    return unit_rerun_baseline(argv, "test_kernels", unit_done());
}
