/* test_winograd_nchwc.c — conv2d_winograd_nchwc and winograd_weight_nchwc:
 * the weight op (ref and cpu, against winograd_weight's numbers in the
 * blocked order, zero past out/in), the conv's ref kernel against the plain
 * conv2d (ref) plus bias, residual and act, the cpu kernel against the ref
 * one on odd shapes (H, W not multiples of the tile, partial channel
 * blocks, blocks 16 and 8) with 1, 2 and 3 threads bit-identical; shape
 * inference refusing bad nodes; and the layout pass writing the op
 * (F(4,3) on large planes, F(2,3) on mid ones, direct below) with the
 * model's numbers kept, undone by unfuse. main runs it all again with
 * MGE_CPU_ISA=baseline (the portable loops). */
#include "internal.h"
#include "unit.h"
#include "unit_graph.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static mge_rng rng;
static mge_pool *pool2, *pool3;

/* Plain [N,C,H,W] as blocked [N,ceil(C/c),H,W,c], lanes past C zero. */
static void block_of(const mge_tensor *t, int64_t c, mge_tensor *out)
{
    mge_error err = {0};
    int64_t N = t->dims[0], C = t->dims[1], H = t->dims[2], W = t->dims[3], Cb = (C + c - 1) / c;
    int64_t d[5] = {N, Cb, H, W, c};
    CHECK_OK(mge_tensor_alloc(out, MGE_F32, 5, d, &err), err);
    const float *s = t->data;
    float *o = out->data;
    memset(o, 0, out->nbytes);
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < C; k++)
            for (int64_t p = 0; p < H * W; p++)
                o[((n * Cb + k / c) * H * W + p) * c + k % c] = s[(n * C + k) * H * W + p];
}

/* max |a - b| / max |b| over the elements of b */
static double rel_err(const mge_tensor *a, const mge_tensor *b)
{
    const float *x = a->data, *y = b->data;
    double md = 0, mb = 0;
    for (int64_t i = 0; i < mge_tensor_numel(b); i++) {
        md = fmax(md, fabs((double)x[i] - y[i]));
        mb = fmax(mb, fabs((double)y[i]));
    }
    return mb > 0 ? md / mb : md;
}

/* ---------------------------------------------------------------- the weight op */

/* winograd_weight_nchwc(w) on ref and cpu: winograd_weight's numbers in
 * the blocked order, zero past out and in; returns the cpu one in *u. */
static void weight_case(int64_t O, int64_t C, int tile, int64_t c, const mge_tensor *w, mge_tensor *u)
{
    mge_error err = {0};
    int a = tile + 2;
    int64_t dims[1][MGE_MAX_DIMS] = {{O, C, 3, 3}};
    int nd[1] = {4};
    mge_attr at[2] = {A(MGE_KEY_tile, tile), A(MGE_KEY_block, c)};
    mge_graph *g = ug_one_node(MGE_OP_WINOGRAD_WEIGHT_NCHWC, 1, nd, dims, 2, at, &err);
    CHECK_MSG(g != NULL, "%s", err.msg);
    if (!g)
        return;
    int64_t Ob = (O + c - 1) / c, Cb = (C + c - 1) / c;
    const mge_value *yv = &g->values[g->nodes[0].out[0]];
    CHECK(yv->ndim == 5 && yv->dims[0] == a * a && yv->dims[1] == Ob && yv->dims[2] == Cb && yv->dims[3] == c &&
          yv->dims[4] == c);
    mge_tensor *in[1] = {(mge_tensor *)w}, ref = {0};
    CHECK_OK(ug_run_node(mge_backend_ref(), NULL, g, in, &ref, &err), err);
    CHECK_OK(ug_run_node(mge_backend_cpu(), pool2, g, in, u, &err), err);
    mge_graph_free(g);
    float *plain = malloc(sizeof(float) * (size_t)(a * a * O * C));
    CHECK(plain != NULL);
    if (plain && ref.data && u->data) {
        mge_winograd_weight_transform(w->data, O, C, tile, plain);
        const float *r = ref.data, *q = u->data;
        int bad = 0;
        for (int64_t p = 0; p < a * a; p++)
            for (int64_t ob = 0; ob < Ob; ob++)
                for (int64_t cb = 0; cb < Cb; cb++)
                    for (int64_t i = 0; i < c; i++)
                        for (int64_t l = 0; l < c; l++) {
                            int64_t o = ob * c + l, k = cb * c + i;
                            int64_t at5 = (((p * Ob + ob) * Cb + cb) * c + i) * c + l;
                            float want = o < O && k < C ? plain[(p * O + o) * C + k] : 0.0f;
                            bad += q[at5] != want || fabsf(r[at5] - want) > 1e-6f * (1 + fabsf(want));
                        }
        CHECK_MSG(bad == 0, "O=%lld C=%lld tile=%d c=%lld: %d entries differ", (long long)O, (long long)C, tile,
                  (long long)c, bad);
    }
    free(plain);
    mge_tensor_free(&ref);
}

/* ---------------------------------------------------------------- the conv */

typedef struct ncase {
    int64_t N, C, H, W, O, c;
    int tile, bias, res, act;
    int nonfinite;   /* bias +inf (channel 0) and -inf (channel 1): checked by value */
} ncase;

static void conv_case(const ncase *q)
{
    mge_error err = {0};
    const int64_t c = q->c, OH = q->H, OW = q->W;   /* pad 1 */
    int64_t dims[4][MGE_MAX_DIMS] = {{q->N, q->C, q->H, q->W}, {q->O, q->C, 3, 3}, {q->O}, {q->N, q->O, OH, OW}};
    mge_tensor x = {0}, w = {0}, b = {0}, r = {0}, want = {0}, wantb = {0}, xb = {0}, rb = {0}, u = {0};
    CHECK_OK(mge_tensor_alloc(&x, MGE_F32, 4, dims[0], &err), err);
    CHECK_OK(mge_tensor_alloc(&w, MGE_F32, 4, dims[1], &err), err);
    CHECK_OK(mge_tensor_alloc(&b, MGE_F32, 1, dims[2], &err), err);
    CHECK_OK(mge_tensor_alloc(&r, MGE_F32, 4, dims[3], &err), err);
    ug_uniform(&x, &rng, -1, 1);
    ug_uniform(&w, &rng, -0.3f, 0.3f);
    ug_uniform(&b, &rng, -1, 1);
    ug_uniform(&r, &rng, -1, 1);
    if (q->nonfinite && b.data) {
        ((float *)b.data)[0] = INFINITY;
        ((float *)b.data)[1] = -INFINITY;
    }

    /* the plain conv2d (ref), bias, residual and act by hand, then blocked */
    int nd4[3] = {4, 4, 1};
    mge_attr ca[4] = {A(MGE_KEY_out, q->O), A(MGE_KEY_kernel, 3), A(MGE_KEY_pad, 1), A(MGE_KEY_bias, q->bias)};
    mge_graph *gc = ug_one_node(MGE_OP_CONV2D, 2 + q->bias, nd4, dims, 4, ca, &err);
    CHECK_MSG(gc != NULL, "%s", err.msg);
    mge_tensor *cin[3] = {&x, &w, &b};
    if (gc)
        CHECK_OK(ug_run_node(mge_backend_ref(), NULL, gc, cin, &want, &err), err);
    mge_graph_free(gc);
    const double alpha = 0.2;
    if (want.data) {
        ug_ref_epilogue(&want, &r, q->res, q->act, alpha);
        block_of(&want, c, &wantb);
    }
    block_of(&x, c, &xb);
    block_of(&r, c, &rb);
    weight_case(q->O, q->C, q->tile, c, &w, &u);

    int64_t a = q->tile + 2, Ob = (q->O + c - 1) / c, Cb = (q->C + c - 1) / c;
    int64_t nd_dims[4][MGE_MAX_DIMS] = {
        {q->N, Cb, q->H, q->W, c}, {a * a, Ob, Cb, c, c}, {q->O}, {q->N, Ob, OH, OW, c}};
    int nd[4] = {5, 5, 1, 5};
    if (!q->bias) {
        memcpy(nd_dims[2], nd_dims[3], sizeof nd_dims[2]);
        nd[2] = 5;
    }
    mge_attr wa[7] = {A(MGE_KEY_out, q->O),         A(MGE_KEY_tile, q->tile),   A(MGE_KEY_pad, 1),
                      A(MGE_KEY_bias, q->bias),     A(MGE_KEY_residual, q->res), A(MGE_KEY_act, q->act),
                      A_f(MGE_KEY_alpha, alpha)};
    int nin = 2 + q->bias + q->res;
    mge_graph *gw = ug_one_node(MGE_OP_CONV2D_WINOGRAD_NCHWC, nin, nd, nd_dims, 7, wa, &err);
    CHECK_MSG(gw != NULL, "%s", err.msg);
    mge_tensor ref = {0}, cpu1 = {0}, cpu2 = {0}, cpu3 = {0};
    mge_tensor *win[4] = {&xb, &u, q->bias ? &b : &rb, &rb};
    if (gw && u.data) {
        CHECK_OK(ug_run_node(mge_backend_ref(), NULL, gw, win, &ref, &err), err);
        CHECK_OK(ug_run_node(mge_backend_cpu(), NULL, gw, win, &cpu1, &err), err);
        CHECK_OK(ug_run_node(mge_backend_cpu(), pool2, gw, win, &cpu2, &err), err);
        CHECK_OK(ug_run_node(mge_backend_cpu(), pool3, gw, win, &cpu3, &err), err);
    }
    mge_graph_free(gw);
    char what[160];
    snprintf(what, sizeof what, "N=%lld C=%lld H=%lld W=%lld O=%lld c=%lld tile=%d bias=%d res=%d act=%s",
             (long long)q->N, (long long)q->C, (long long)q->H, (long long)q->W, (long long)q->O, (long long)c,
             q->tile, q->bias, q->res, mge_attr_op_name(q->act));
    if (q->nonfinite && ref.data && cpu1.data && cpu2.data) {
        /* relu6: +inf gives 6 (the vector clamp gave NaN), -inf 0; relu: +inf stays */
        const float *t[3] = {ref.data, cpu1.data, cpu2.data};
        float want0 = q->act == MGE_OP_RELU6 ? 6.0f : INFINITY;
        int bad = 0;
        for (int k = 0; k < 3; k++)
            for (int64_t p = 0; p < q->N * OH * OW; p++) {
                int64_t img = p / (OH * OW), px = p % (OH * OW);
                const float *v = t[k] + (img * Ob * OH * OW + px) * c;
                bad += v[0] != want0 || v[1] != 0.0f;
            }
        CHECK_MSG(bad == 0, "%s: %d outputs of the +inf and -inf channels wrong", what, bad);
    } else if (wantb.data && ref.data && cpu1.data && cpu2.data && cpu3.data) {
        double e_ref = rel_err(&ref, &wantb), e_cpu = rel_err(&cpu1, &ref);
        /* the ref works in double: only the f32 weight_t and output round */
        CHECK_MSG(e_ref <= 2e-6, "%s: ref vs conv2d: rel err %g", what, e_ref);
        CHECK_MSG(e_cpu <= (q->tile == 4 ? 5e-5 : 2e-5), "%s: cpu vs ref: rel err %g", what, e_cpu);
        CHECK_MSG(memcmp(cpu1.data, cpu2.data, cpu1.nbytes) == 0, "%s: 1 and 2 threads differ", what);
        CHECK_MSG(memcmp(cpu1.data, cpu3.data, cpu1.nbytes) == 0, "%s: 1 and 3 threads differ", what);
        /* lanes past out are zero, whatever the activation made of them */
        const float *y = cpu2.data;
        int nz = 0;
        for (int64_t i = 0; i < mge_tensor_numel(&cpu2); i++)
            nz += (Ob - 1) * c + (i % c) >= q->O && ((i / (c * OH * OW)) % Ob) == Ob - 1 && y[i] != 0.0f;
        CHECK_MSG(nz == 0, "%s: %d padded lanes nonzero", what, nz);
    }
    mge_tensor *all[] = {&x, &w, &b, &r, &want, &wantb, &xb, &rb, &u, &ref, &cpu1, &cpu2, &cpu3};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        mge_tensor_free(all[i]);
}

static void test_kernels(void)
{
    static const ncase cases[] = {
        /* N, C, H, W, O, c, tile, bias, res, act, nonfinite */
        {1, 16, 13, 11, 16, 16, 4, 1, 0, -1, 0},             /* H, W not multiples of the tile */
        {1, 16, 13, 11, 16, 16, 2, 1, 1, MGE_OP_RELU, 0},
        {2, 32, 9, 15, 48, 16, 4, 1, 1, MGE_OP_RELU, 0},     /* N > 1, 3 output blocks (4 + remainder kernels) */
        {1, 48, 10, 7, 80, 16, 2, 0, 1, MGE_OP_RELU6, 0},    /* 5 output blocks */
        {1, 32, 30, 29, 64, 16, 4, 1, 1, MGE_OP_RELU, 0},    /* more tiles than one strip */
        {1, 16, 17, 17, 32, 16, 2, 1, 0, MGE_OP_SIGMOID, 0}, /* activations in the epilogue loops */
        {1, 16, 6, 9, 16, 16, 4, 0, 1, MGE_OP_LEAKY_RELU, 0},
        {1, 16, 5, 5, 16, 16, 2, 1, 1, MGE_OP_SILU, 0},
        {1, 16, 3, 3, 16, 16, 4, 1, 0, MGE_OP_HSWISH, 0},    /* one partial tile */
        {1, 24, 11, 12, 20, 16, 4, 1, 1, MGE_OP_HSIGMOID, 0},/* partial channel blocks in and out */
        {1, 20, 9, 10, 12, 8, 2, 1, 1, MGE_OP_TANH, 0},      /* block 8: the portable loops */
        {2, 8, 8, 8, 24, 8, 4, 1, 0, MGE_OP_GELU, 0},
        {5, 32, 14, 14, 64, 16, 2, 1, 1, MGE_OP_RELU, 0},    /* small images: one task per image */
        {1, 16, 9, 9, 32, 16, 4, 1, 0, MGE_OP_RELU6, 1},  /* non-finite sums in the clamp */
        {1, 16, 6, 6, 16, 16, 2, 1, 0, MGE_OP_RELU, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        conv_case(&cases[i]);
}

static void test_infer_errors(void)
{
    mge_error err = {0};
    int nd[3] = {5, 5, 1};
    mge_attr at[2] = {A(MGE_KEY_out, 16), A(MGE_KEY_pad, 1)};
    /* a weight_t of the wrong tile, of the wrong block, a plain x */
    int64_t bad[3][2][MGE_MAX_DIMS] = {{{1, 1, 8, 8, 16}, {16, 1, 1, 16, 16}},
                            {{1, 1, 8, 8, 16}, {36, 2, 1, 8, 8}},
                            {{1, 16, 8, 8}, {36, 1, 1, 16, 16}}};
    for (int k = 0; k < 3; k++) {
        int ndk[2] = {k == 2 ? 4 : 5, 5};
        mge_attr b0[3] = {at[0], at[1], A(MGE_KEY_bias, 0)};
        mge_graph *g = ug_one_node(MGE_OP_CONV2D_WINOGRAD_NCHWC, 2, ndk, bad[k], 3, b0, &err);
        CHECK_MSG(g == NULL, "case %d accepted", k);
        mge_graph_free(g);
    }
    /* bias true but no bias input */
    int64_t good[2][MGE_MAX_DIMS] = {{1, 1, 8, 8, 16}, {36, 1, 1, 16, 16}};
    mge_graph *g = ug_one_node(MGE_OP_CONV2D_WINOGRAD_NCHWC, 2, nd, good, 2, at, &err);
    CHECK(g == NULL);
    mge_graph_free(g);
    mge_attr b0[3] = {at[0], at[1], A(MGE_KEY_bias, 0)};
    g = ug_one_node(MGE_OP_CONV2D_WINOGRAD_NCHWC, 2, nd, good, 3, b0, &err);
    CHECK_MSG(g != NULL, "%s", err.msg);
    if (g) {
        const mge_value *y = &g->values[g->nodes[0].out[0]];
        CHECK(y->ndim == 5 && y->dims[1] == 1 && y->dims[2] == 8 && y->dims[3] == 8 && y->dims[4] == 16);
    }
    mge_graph_free(g);
    /* the weight op needs its block */
    int64_t wd[1][MGE_MAX_DIMS] = {{16, 16, 3, 3}};
    int nw[1] = {4};
    g = ug_one_node(MGE_OP_WINOGRAD_WEIGHT_NCHWC, 1, nw, wd, 0, NULL, &err);
    CHECK(g == NULL);
    mge_graph_free(g);
}

/* ---------------------------------------------------------------- the pass */

/* 32x32 planes (F(4,3)), then 16x16 (F(2,3)), then 8x8 (direct), with a
 * residual and activations; channels whole blocks of 16. */
static const char *net = "input x : f32[N,16,32,32]\n"
                         "c1 = conv2d(x, out=32, kernel=3, pad=1)\n"
                         "r1 = relu(c1)\n"
                         "c2 = conv2d(r1, out=32, kernel=3, pad=1)\n"
                         "a2 = add(c2, r1)\n"
                         "r2 = relu(a2)\n"
                         "c3 = conv2d(r2, out=32, kernel=3, stride=2, pad=1)\n"
                         "c4 = conv2d(c3, out=32, kernel=3, pad=1)\n"
                         "r4 = relu6(c4)\n"
                         "c5 = conv2d(r4, out=16, kernel=3, stride=2, pad=1)\n"
                         "c6 = conv2d(c5, out=16, kernel=3, pad=1)\n"
                         "p = global_avgpool(c6)\n"
                         "output p, r2\n";

static void run_graph(const mge_graph *g, int threads, ug_outs *res)
{
    ug_fill normal = {1, 0, 0, 0};
    ug_run(g, NULL, threads, 2, normal, res);
}

static void test_pass(void)
{
    mge_graph *g = ug_parse(net);
    if (!g)
        return;
    mge_error err = {0};
    CHECK_OK(mge_graph_init_params(g, 11, &err), err);
    ug_outs before = {0}, after = {0}, after2 = {0}, after3 = {0}, undone = {0};
    run_graph(g, 1, &before);
    int changed = -1;
    CHECK_OK(mge_passes_run_list(&g, "fuse-activation,layout", &changed, &err), err);
    CHECK_OK(mge_graph_validate(g, &err), err);
    int wino = mge_cpu_isa() >= MGE_ISA_AVX512;   /* layout blocks by 16 only there */
    CHECK(ug_count_op(g, MGE_OP_CONV2D_WINOGRAD_NCHWC) == (wino ? 3 : 0));
    CHECK(ug_count_op(g, MGE_OP_WINOGRAD_WEIGHT_NCHWC) == (wino ? 3 : 0));
    if (wino) {
        const mge_node *n1 = ug_producer(g, "r1.nchwc"), *n2 = ug_producer(g, "r2.nchwc"),
                       *n4 = ug_producer(g, "r4.nchwc"), *n6 = ug_producer(g, "c6.nchwc");
        CHECK(n1 && n1->op == MGE_OP_CONV2D_WINOGRAD_NCHWC && mge_node_int(n1, MGE_KEY_tile, 0) == 4);
        CHECK(n2 && n2->op == MGE_OP_CONV2D_WINOGRAD_NCHWC && mge_node_int(n2, MGE_KEY_residual, 0) == 1 &&
              mge_node_int(n2, MGE_KEY_act, -1) == MGE_OP_RELU);
        CHECK(n4 && n4->op == MGE_OP_CONV2D_WINOGRAD_NCHWC && mge_node_int(n4, MGE_KEY_tile, 0) == 2 &&
              mge_node_int(n4, MGE_KEY_act, -1) == MGE_OP_RELU6);
        CHECK(n6 && n6->op == MGE_OP_CONV2D_NCHWC);   /* 8x8: direct */
        /* the file keeps the 3x3 weight; the transform is a node */
        const mge_node *wn = ug_producer(g, "r1.weight_wino");
        CHECK(wn && wn->op == MGE_OP_WINOGRAD_WEIGHT_NCHWC && mge_node_int(wn, MGE_KEY_block, 0) == 16);
        CHECK(mge_graph_find(g, "c1.weight") >= 0);
    }
    run_graph(g, 1, &after);
    run_graph(g, 2, &after2);
    run_graph(g, 3, &after3);
    ug_check_close(&before, &after, 1e-5);
    ug_check_close(&after, &after2, 0);
    ug_check_close(&after, &after3, 0);
    /* fold-constants leaves the weight transform for load time */
    CHECK_OK(mge_passes_run_list(&g, "fold-constants", NULL, &err), err);
    CHECK(ug_count_op(g, MGE_OP_WINOGRAD_WEIGHT_NCHWC) == (wino ? 3 : 0));
    /* unfuse gives the plain graph back */
    CHECK_OK(mge_passes_run_list(&g, "unfuse", NULL, &err), err);
    CHECK(ug_count_op(g, MGE_OP_CONV2D_WINOGRAD_NCHWC) == 0 && ug_count_op(g, MGE_OP_WINOGRAD_WEIGHT_NCHWC) == 0 &&
          ug_count_op(g, MGE_OP_CONV2D_NCHWC) == 0 && ug_count_op(g, MGE_OP_CONV2D) == 6);
    run_graph(g, 1, &undone);
    ug_check_close(&before, &undone, 1e-6);
    ug_outs *all[] = {&before, &after, &after2, &after3, &undone};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        ug_outs_free(all[i]);
    mge_graph_free(g);
}

int main(int argc, char **argv)
{
    (void)argc;
    mge_rng_seed(&rng, 20261201);
    pool2 = mge_pool_create(2);
    pool3 = mge_pool_create(3);
    RUN(test_kernels);
    RUN(test_infer_errors);
    RUN(test_pass);
    mge_pool_free(pool2);
    mge_pool_free(pool3);
    return unit_rerun_baseline(argv, "test_winograd_nchwc", unit_done());
}
