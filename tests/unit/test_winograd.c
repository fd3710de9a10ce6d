/* test_winograd.c — conv2d_winograd: the weight transform and the ref
 * kernel against conv2d's ref kernel, the cpu kernel against the ref one
 * (odd shapes, N > 1, pad 0/1/2, partial tiles, every activation, bias and
 * residual, 1 and 2 threads, bit-identical across thread counts), shape
 * inference refusing bad nodes; winograd_weight: its shape, its ref and
 * cpu kernels against mge_winograd_weight_transform; and the winograd
 * pass: which nodes it rewrites (a winograd_weight node on the kept 3x3
 * weight per conv), what it carries over from fused_conv2d, the numbers of
 * the model before and after through the executor (with and without
 * preprocessing), fold-constants leaving winograd_weight alone, and the
 * cases it leaves alone. */
#include "internal.h"
#include "unit.h"
#include "unit_graph.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static mge_rng rng;
static mge_pool *pool2;

/* max |a - b| / max |b| */
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

/* One geometry: conv2d (ref) of x with W, versus conv2d_winograd with the
 * transformed W on the ref and cpu backends. */
typedef struct wcase {
    int64_t N, C, H, W, O, pad;
    int tile, bias, res, act;
} wcase;

static void check_case(const wcase *c)
{
    mge_error err;
    mge_error_clear(&err);
    int a = c->tile + 2;
    int64_t OH = c->H + 2 * c->pad - 2, OW = c->W + 2 * c->pad - 2;
    int64_t dims[4][MGE_MAX_DIMS] = {{c->N, c->C, c->H, c->W}, {c->O, c->C, 3, 3}, {c->O}, {c->N, c->O, OH, OW}};
    int nd[4] = {4, 4, 1, 4};
    mge_tensor x, w, b, r, wt;
    CHECK_OK(mge_tensor_alloc(&x, MGE_F32, 4, dims[0], &err), err);
    CHECK_OK(mge_tensor_alloc(&w, MGE_F32, 4, dims[1], &err), err);
    CHECK_OK(mge_tensor_alloc(&b, MGE_F32, 1, dims[2], &err), err);
    CHECK_OK(mge_tensor_alloc(&r, MGE_F32, 4, dims[3], &err), err);
    int64_t wtd[3] = {(int64_t)a * a, c->O, c->C};
    CHECK_OK(mge_tensor_alloc(&wt, MGE_F32, 3, wtd, &err), err);
    ug_uniform(&x, &rng, -1, 1);
    ug_uniform(&w, &rng, -0.5f, 0.5f);
    ug_uniform(&b, &rng, -1, 1);
    ug_uniform(&r, &rng, -1, 1);
    mge_winograd_weight_transform(w.data, c->O, c->C, c->tile, wt.data);

    /* the plain conv2d (ref), then bias, residual and act by hand */
    mge_attr ca[4] = {A(MGE_KEY_out, c->O), A(MGE_KEY_kernel, 3), A(MGE_KEY_pad, c->pad),
                      A(MGE_KEY_bias, c->bias)};
    mge_graph *gc = ug_one_node(MGE_OP_CONV2D, 2 + c->bias, nd, dims, 4, ca, &err);
    CHECK_MSG(gc != NULL, "%s", err.msg);
    mge_tensor *cin[3] = {&x, &w, &b}, want = {0}, got_ref = {0}, got_cpu = {0}, got_cpu1 = {0};
    if (gc)
        CHECK_OK(ug_run_node(mge_backend_ref(), NULL, gc, cin, &want, &err), err);
    mge_graph_free(gc);
    const double alpha = 0.2;
    ug_ref_epilogue(&want, &r, c->res, c->act, alpha);

    int nin = 2 + c->bias + c->res;
    int64_t wdims[4][MGE_MAX_DIMS] = {
        {c->N, c->C, c->H, c->W}, {(int64_t)a * a, c->O, c->C}, {c->O}, {c->N, c->O, OH, OW}};
    int wnd[4] = {4, 3, 1, 4};
    if (!c->bias) {
        memcpy(wdims[2], wdims[3], sizeof wdims[2]);
        wnd[2] = 4;
    }
    mge_attr wa[7] = {A(MGE_KEY_out, c->O),       A(MGE_KEY_tile, c->tile),
                      A(MGE_KEY_pad, c->pad),     A(MGE_KEY_bias, c->bias),
                      A(MGE_KEY_residual, c->res), A(MGE_KEY_act, c->act),
                      A_f(MGE_KEY_alpha, alpha)};
    mge_graph *gw = ug_one_node(MGE_OP_CONV2D_WINOGRAD, nin, wnd, wdims, 7, wa, &err);
    CHECK_MSG(gw != NULL, "%s", err.msg);
    mge_tensor *win[4] = {&x, &wt, c->bias ? &b : &r, &r};
    if (gw) {
        CHECK_OK(ug_run_node(mge_backend_ref(), NULL, gw, win, &got_ref, &err), err);
        CHECK_OK(ug_run_node(mge_backend_cpu(), pool2, gw, win, &got_cpu, &err), err);
        CHECK_OK(ug_run_node(mge_backend_cpu(), NULL, gw, win, &got_cpu1, &err), err);
    }
    mge_graph_free(gw);
    char what[160];
    snprintf(what, sizeof what, "N=%lld C=%lld H=%lld W=%lld O=%lld pad=%lld tile=%d bias=%d res=%d act=%s",
             (long long)c->N, (long long)c->C, (long long)c->H, (long long)c->W, (long long)c->O, (long long)c->pad,
             c->tile, c->bias, c->res, mge_attr_op_name(c->act));
    if (want.data && got_ref.data && got_cpu.data && got_cpu1.data) {
        double e_ref = rel_err(&got_ref, &want), e_cpu = rel_err(&got_cpu, &got_ref);
        /* the ref works in double: only the f32 weight_t and output round */
        CHECK_MSG(e_ref <= 2e-6, "%s: ref vs conv2d: rel err %g", what, e_ref);
        CHECK_MSG(e_cpu <= (c->tile == 4 ? 5e-5 : 2e-5), "%s: cpu vs ref: rel err %g", what, e_cpu);
        CHECK_MSG(memcmp(got_cpu.data, got_cpu1.data, got_cpu.nbytes) == 0, "%s: 1 and 2 threads differ", what);
    }
    mge_tensor_free(&x);
    mge_tensor_free(&w);
    mge_tensor_free(&b);
    mge_tensor_free(&r);
    mge_tensor_free(&wt);
    mge_tensor_free(&want);
    mge_tensor_free(&got_ref);
    mge_tensor_free(&got_cpu);
    mge_tensor_free(&got_cpu1);
}

/* ---------------------------------------------------------------- kernels */

static void test_matrices(void)
{
    const double *at, *g, *bt;
    CHECK(mge_winograd_matrices(2, &at, &g, &bt) && at && g && bt);
    CHECK(mge_winograd_matrices(4, &at, &g, &bt));
    CHECK(!mge_winograd_matrices(3, &at, &g, &bt) && !mge_winograd_matrices(6, NULL, NULL, NULL));
    /* a 1 at the kernel centre: U = G e G^T, known in closed form for F(2,3) */
    float k[9] = {0, 0, 0, 0, 1, 0, 0, 0, 0}, u[16];
    mge_winograd_weight_transform(k, 1, 1, 2, u);
    const float want[16] = {0, 0, 0, 0, 0, 0.25f, -0.25f, 0, 0, -0.25f, 0.25f, 0, 0, 0, 0, 0};
    CHECK(memcmp(u, want, sizeof u) == 0);
}

static void test_ref_and_cpu(void)
{
    static const wcase cases[] = {
        /* N, C, H, W, O, pad, tile, bias, res, act */
        {1, 1, 3, 3, 1, 0, 2, 0, 0, -1},                 /* one output, one partial tile */
        {2, 3, 7, 9, 5, 1, 2, 1, 0, -1},                 /* odd sizes, N > 1 */
        {2, 3, 7, 9, 5, 1, 4, 1, 0, -1},
        {1, 4, 6, 5, 3, 0, 4, 0, 0, -1},                 /* pad 0, partial tiles */
        {3, 2, 5, 11, 4, 2, 4, 1, 1, MGE_OP_RELU},       /* pad 2 */
        {1, 5, 20, 70, 6, 1, 2, 1, 1, MGE_OP_LEAKY_RELU},/* more than 8 tiles a row, remainder */
        {1, 5, 20, 70, 6, 1, 4, 0, 1, MGE_OP_RELU6},
        {2, 8, 14, 14, 16, 1, 4, 1, 1, MGE_OP_SIGMOID},
        {1, 3, 9, 9, 2, 1, 4, 1, 0, MGE_OP_TANH},
        {1, 3, 9, 9, 2, 1, 2, 1, 1, MGE_OP_GELU},
        {1, 3, 10, 8, 2, 1, 4, 1, 1, MGE_OP_SILU},
        {1, 3, 10, 8, 2, 0, 2, 1, 1, MGE_OP_HSWISH},
        {2, 3, 10, 8, 2, 1, 4, 0, 1, MGE_OP_HSIGMOID},
        {1, 16, 33, 35, 17, 1, 4, 1, 0, -1},             /* wider channels, odd tile counts */
        {1, 3, 14, 14, 5, 1, 2, 1, 1, MGE_OP_RELU},      /* 7 tiles a row: whole-row stores */
        {2, 4, 26, 27, 3, 1, 4, 1, 1, -1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_case(&cases[i]);
}

/* A batch large enough that the cpu kernel works in chunks of images (V
 * and M bounded): each image matches the same image run alone. */
static void test_chunks(void)
{
    mge_error err;
    mge_error_clear(&err);
    const int64_t N = 10, C = 64, H = 56, O = 64;   /* 9 images a chunk */
    int nd[4] = {4, 3, 1, 4};
    int64_t dims[4][MGE_MAX_DIMS] = {{N, C, H, H}, {36, O, C}, {O}, {N, O, H, H}};
    int64_t one[4][MGE_MAX_DIMS] = {{1, C, H, H}, {36, O, C}, {O}, {1, O, H, H}};
    mge_attr at[4] = {A(MGE_KEY_out, O), A(MGE_KEY_pad, 1), A(MGE_KEY_residual, 1),
                      A(MGE_KEY_act, MGE_OP_RELU)};
    mge_graph *gn = ug_one_node(MGE_OP_CONV2D_WINOGRAD, 4, nd, dims, 4, at, &err);
    mge_graph *g1 = ug_one_node(MGE_OP_CONV2D_WINOGRAD, 4, nd, one, 4, at, &err);
    CHECK(gn && g1);
    mge_tensor x, wt, b, r, y = {0};
    CHECK_OK(mge_tensor_alloc(&x, MGE_F32, 4, dims[0], &err), err);
    CHECK_OK(mge_tensor_alloc(&wt, MGE_F32, 3, dims[1], &err), err);
    CHECK_OK(mge_tensor_alloc(&b, MGE_F32, 1, dims[2], &err), err);
    CHECK_OK(mge_tensor_alloc(&r, MGE_F32, 4, dims[3], &err), err);
    ug_uniform(&x, &rng, -1, 1);
    ug_uniform(&wt, &rng, -0.05f, 0.05f);
    ug_uniform(&b, &rng, -1, 1);
    ug_uniform(&r, &rng, -1, 1);
    mge_tensor *in[4] = {&x, &wt, &b, &r};
    if (gn && g1)
        CHECK_OK(ug_run_node(mge_backend_cpu(), pool2, gn, in, &y, &err), err);
    const int64_t xs = C * H * H, ys = O * H * H;
    for (int64_t img = 0; y.data && img < N; img += N - 1) {
        mge_tensor xi = x, ri = r, yi = {0}, want = y;
        xi.dims[0] = ri.dims[0] = want.dims[0] = 1;
        xi.data = (float *)x.data + img * xs;
        ri.data = (float *)r.data + img * ys;
        want.data = (float *)y.data + img * ys;
        xi.nbytes = sizeof(float) * (size_t)xs;
        ri.nbytes = want.nbytes = sizeof(float) * (size_t)ys;
        xi.flags = ri.flags = want.flags = 0;   /* views: not owned */
        mge_tensor *in1[4] = {&xi, &wt, &b, &ri};
        CHECK_OK(ug_run_node(mge_backend_cpu(), pool2, g1, in1, &yi, &err), err);
        if (yi.data) {
            double e = rel_err(&yi, &want);
            CHECK_MSG(e <= 1e-5, "image %lld: rel err %g", (long long)img, e);
        }
        mge_tensor_free(&yi);
    }
    mge_graph_free(gn);
    mge_graph_free(g1);
    mge_tensor_free(&x);
    mge_tensor_free(&wt);
    mge_tensor_free(&b);
    mge_tensor_free(&r);
    mge_tensor_free(&y);
}

/* Shape inference refuses what the kernels cannot do. */
static void test_infer_errors(void)
{
    mge_error err;
    int nd[4] = {4, 3, 1, 4};
    int64_t dims[4][MGE_MAX_DIMS] = {{1, 3, 8, 8}, {36, 4, 3}, {4}, {1, 4, 8, 8}};
    mge_attr good[3] = {A(MGE_KEY_out, 4), A(MGE_KEY_pad, 1), A(MGE_KEY_bias, 1)};
    mge_error_clear(&err);
    mge_graph *g = ug_one_node(MGE_OP_CONV2D_WINOGRAD, 3, nd, dims, 3, good, &err);
    CHECK_MSG(g != NULL, "%s", err.msg);
    if (g) {
        const mge_value *y = &g->values[g->nodes[0].out[0]];
        CHECK(y->ndim == 4 && y->dims[1] == 4 && y->dims[2] == 8 && y->dims[3] == 8);
        CHECK(mge_node_int(&g->nodes[0], MGE_KEY_tile, 0) == 4);
    }
    mge_graph_free(g);
    mge_attr t3[4] = {A(MGE_KEY_out, 4), A(MGE_KEY_pad, 1), A(MGE_KEY_bias, 1),
                      A(MGE_KEY_tile, 3)};
    mge_error_clear(&err);
    CHECK(ug_one_node(MGE_OP_CONV2D_WINOGRAD, 3, nd, dims, 4, t3, &err) == NULL);
    CHECK_MSG(strstr(err.msg, "tile=3") != NULL, "%s", err.msg);
    mge_attr t2[4] = {A(MGE_KEY_out, 4), A(MGE_KEY_pad, 1), A(MGE_KEY_bias, 1),
                      A(MGE_KEY_tile, 2)};   /* weight_t is F(4,3)'s 36 */
    mge_error_clear(&err);
    CHECK(ug_one_node(MGE_OP_CONV2D_WINOGRAD, 3, nd, dims, 4, t2, &err) == NULL);
    CHECK_MSG(strstr(err.msg, "weight_t") != NULL, "%s", err.msg);
    mge_attr nob[3] = {A(MGE_KEY_out, 4), A(MGE_KEY_pad, 1), A(MGE_KEY_bias, 0)};
    mge_error_clear(&err);
    CHECK(ug_one_node(MGE_OP_CONV2D_WINOGRAD, 3, nd, dims, 3, nob, &err) == NULL);   /* 3 inputs, bias=false */
    mge_attr act[4] = {A(MGE_KEY_out, 4), A(MGE_KEY_pad, 1), A(MGE_KEY_bias, 1),
                       A(MGE_KEY_act, MGE_OP_EXP)};
    mge_error_clear(&err);
    CHECK(ug_one_node(MGE_OP_CONV2D_WINOGRAD, 3, nd, dims, 4, act, &err) == NULL);
    int64_t small[4][MGE_MAX_DIMS] = {{1, 3, 2, 8}, {36, 4, 3}, {4}};
    mge_attr p0[3] = {A(MGE_KEY_out, 4), A(MGE_KEY_pad, 0), A(MGE_KEY_bias, 1)};
    mge_error_clear(&err);
    CHECK(ug_one_node(MGE_OP_CONV2D_WINOGRAD, 3, nd, small, 3, p0, &err) == NULL);   /* 2 rows, no pad */
    /* no gradient */
    g = ug_one_node(MGE_OP_CONV2D_WINOGRAD, 3, nd, dims, 3, good, &err);
    if (g) {
        int dy = g->nodes[0].out[0], dx[3] = {-1, -1, -1};
        char want[3] = {1, 1, 1};
        mge_error_clear(&err);
        CHECK(mge_op_grad_fn(MGE_OP_CONV2D_WINOGRAD)(g, 0, &dy, want, dx, &err) == MGE_ERR_UNSUPPORTED);
    }
    mge_graph_free(g);
}

/* winograd_weight: [O,C,3,3] -> [(m+2)^2,O,C]; the ref kernel (double)
 * and the cpu one (per output channel over the pool) give the numbers of
 * mge_winograd_weight_transform, which the pass used to store. */
static void test_weight_op(void)
{
    static const int64_t shapes[][2] = {{1, 1}, {5, 3}, {17, 9}, {64, 32}};
    for (int tile = 2; tile <= 4; tile += 2)
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            mge_error err;
            mge_error_clear(&err);
            const int64_t O = shapes[si][0], C = shapes[si][1], a = tile + 2;
            int nd[1] = {4};
            int64_t dims[1][MGE_MAX_DIMS] = {{O, C, 3, 3}};
            mge_attr at[1] = {A(MGE_KEY_tile, tile)};
            mge_graph *g = ug_one_node(MGE_OP_WINOGRAD_WEIGHT, 1, nd, dims, 1, at, &err);
            CHECK_MSG(g != NULL, "%s", err.msg);
            if (!g)
                continue;
            const mge_value *y = &g->values[g->nodes[0].out[0]];
            CHECK(y->dtype == MGE_F32 && y->ndim == 3 && y->dims[0] == a * a && y->dims[1] == O && y->dims[2] == C);
            mge_tensor w, want, got_ref = {0}, got_cpu = {0}, got_cpu1 = {0};
            int64_t ud[3] = {a * a, O, C};
            CHECK_OK(mge_tensor_alloc(&w, MGE_F32, 4, dims[0], &err), err);
            CHECK_OK(mge_tensor_alloc(&want, MGE_F32, 3, ud, &err), err);
            ug_uniform(&w, &rng, -1, 1);
            mge_winograd_weight_transform(w.data, O, C, tile, want.data);
            mge_tensor *in[1] = {&w};
            CHECK_OK(ug_run_node(mge_backend_ref(), NULL, g, in, &got_ref, &err), err);
            CHECK_OK(ug_run_node(mge_backend_cpu(), pool2, g, in, &got_cpu, &err), err);
            CHECK_OK(ug_run_node(mge_backend_cpu(), NULL, g, in, &got_cpu1, &err), err);
            if (got_ref.data && got_cpu.data && got_cpu1.data) {
                double e = rel_err(&got_ref, &want);
                CHECK_MSG(e <= 1e-6, "tile=%d O=%lld C=%lld: ref vs transform: rel err %g", tile, (long long)O,
                          (long long)C, e);
                CHECK_MSG(memcmp(got_cpu.data, want.data, want.nbytes) == 0, "tile=%d O=%lld C=%lld: cpu differs",
                          tile, (long long)O, (long long)C);
                CHECK(memcmp(got_cpu1.data, want.data, want.nbytes) == 0);
            }
            /* FLOPs: the two small matrix products per (o, c) */
            mge_tdesc tin = {0}, tout = {0};
            tin.dtype = tout.dtype = MGE_F32;
            tin.ndim = 4, tout.ndim = 3;
            memcpy(tin.dims, dims[0], sizeof dims[0]);
            memcpy(tout.dims, ud, sizeof ud);
            double fl = mge_op_flops_fn(MGE_OP_WINOGRAD_WEIGHT)(&g->nodes[0], &tin, &tout);
            CHECK(fabs(fl - (double)(O * C) * 6.0 * (double)(3 * a + a * a)) < 0.5);
            mge_tensor_free(&w);
            mge_tensor_free(&want);
            mge_tensor_free(&got_ref);
            mge_tensor_free(&got_cpu);
            mge_tensor_free(&got_cpu1);
            mge_graph_free(g);
        }
    /* refused: tile 3, a 5x5 kernel, a flat weight; and no gradient */
    mge_error err;
    int nd[1] = {4}, nd2[1] = {2};
    int64_t good[1][MGE_MAX_DIMS] = {{4, 3, 3, 3}}, k5[1][MGE_MAX_DIMS] = {{4, 3, 5, 5}},
            flat[1][MGE_MAX_DIMS] = {{4, 27}};
    mge_attr t3[1] = {A(MGE_KEY_tile, 3)};
    mge_error_clear(&err);
    CHECK(ug_one_node(MGE_OP_WINOGRAD_WEIGHT, 1, nd, good, 1, t3, &err) == NULL);
    CHECK_MSG(strstr(err.msg, "tile=3") != NULL, "%s", err.msg);
    mge_error_clear(&err);
    CHECK(ug_one_node(MGE_OP_WINOGRAD_WEIGHT, 1, nd, k5, 0, NULL, &err) == NULL);
    CHECK_MSG(strstr(err.msg, "winograd_weight") != NULL, "%s", err.msg);
    mge_error_clear(&err);
    CHECK(ug_one_node(MGE_OP_WINOGRAD_WEIGHT, 1, nd2, flat, 0, NULL, &err) == NULL);
    mge_error_clear(&err);
    mge_graph *g = ug_one_node(MGE_OP_WINOGRAD_WEIGHT, 1, nd, good, 0, NULL, &err);
    CHECK_MSG(g != NULL, "%s", err.msg);
    if (g) {
        CHECK(mge_node_int(&g->nodes[0], MGE_KEY_tile, 0) == 4 && g->values[g->nodes[0].out[0]].dims[0] == 36);
        int dy = g->nodes[0].out[0], dx[1] = {-1};
        char want[1] = {1};
        mge_error_clear(&err);
        CHECK(mge_op_grad_fn(MGE_OP_WINOGRAD_WEIGHT)(g, 0, &dy, want, dx, &err) == MGE_ERR_UNSUPPORTED);
    }
    mge_graph_free(g);
}

/* ---------------------------------------------------------------- the pass */

static const mge_node *node_named(const mge_graph *g, const char *name)
{
    for (int i = 0; i < g->nnodes; i++)
        if (strcmp(g->nodes[i].name, name) == 0)
            return &g->nodes[i];
    return NULL;
}

/* Runs g (cpu, threads) on inputs N(0, 1) drawn from seed 77; the first output. */
static int run_graph(const mge_graph *g, int64_t batch, int threads, mge_tensor *res)
{
    static const ug_fill f = {1.0f, 0, 0, 77};
    ug_outs o = {0};
    int ok = ug_run(g, NULL, threads, batch, f, &o);
    CHECK(o.n > 0);
    memset(res, 0, sizeof *res);
    if (o.n > 0)
        *res = o.t[0];
    for (int i = 1; i < o.n; i++)
        mge_tensor_free(&o.t[i]);
    return ok;
}

/* Like run_graph (same input) with the executor's preprocessing on: run
 * twice, the second run on the kept winograd_weight results. */
static void run_graph_pre(const mge_graph *g, int64_t batch, int threads, mge_tensor *res)
{
    mge_error err;
    mge_error_clear(&err);
    memset(res, 0, sizeof *res);
    mge_exec *e = NULL;
    mge_exec_opts o = {0};
    o.threads = threads;
    o.preprocess = 1;
    CHECK_OK(mge_exec_create(g, &o, &e, &err), err);
    if (!e)
        return;
    CHECK(mge_exec_ninputs(e) == 1);
    const mge_value *v = &g->values[mge_exec_input(e, 0)];
    int64_t dims[MGE_MAX_DIMS];
    for (int d = 0; d < v->ndim; d++)
        dims[d] = v->dims[d] == MGE_DIM_N ? batch : v->dims[d];
    mge_tensor x;
    CHECK_OK(mge_tensor_alloc(&x, MGE_F32, v->ndim, dims, &err), err);
    mge_rng r;
    mge_rng_seed(&r, 77);
    for (int64_t k = 0; k < mge_tensor_numel(&x); k++)
        ((float *)x.data)[k] = mge_rng_normal(&r);
    const mge_tensor *ins[1] = {&x};
    mge_tensor first = {0};
    CHECK_OK(mge_exec_run(e, ins, &err), err);
    if (err.code == MGE_OK)
        CHECK_OK(mge_tensor_copy(&first, mge_exec_result(e, 0), &err), err);
    CHECK_OK(mge_exec_run(e, ins, &err), err);
    if (err.code == MGE_OK && first.data) {
        CHECK_OK(mge_tensor_copy(res, mge_exec_result(e, 0), &err), err);
        CHECK(res->data && memcmp(res->data, first.data, first.nbytes) == 0);
    }
    mge_tensor_free(&first);
    mge_tensor_free(&x);
    mge_exec_free(e);
}

/* The winograd_weight node that feeds conv2d_winograd node n, or NULL. */
static const mge_node *weight_node(const mge_graph *g, const mge_node *n)
{
    if (!n || n->nin < 2)
        return NULL;
    const mge_value *wt = &g->values[n->in[1]];
    if (wt->kind != MGE_VAL_NODE || wt->producer < 0)
        return NULL;
    const mge_node *p = &g->nodes[wt->producer];
    return p->op == MGE_OP_WINOGRAD_WEIGHT ? p : NULL;
}

/* layer1-like convs get rewritten; stride 2, 1x1, grouped and dilated ones
 * are left; the numbers stay within 1e-4 and the output keeps its name. */
static const char *small_net = "input x : f32[N,64,28,28]\n"
                               "c1 = conv2d(x, out=64, kernel=3, pad=1)\n"
                               "r1 = relu(c1)\n"
                               "c2 = conv2d(r1, out=64, kernel=3, pad=1, bias=false)\n"
                               "s2 = conv2d(r1, out=128, kernel=3, stride=2, pad=1)\n"
                               "c4 = conv2d(s2, out=128, kernel=3, pad=1)\n"
                               "p1 = conv2d(r1, out=64, kernel=1)\n"
                               "gr = conv2d(r1, out=64, kernel=3, pad=1, groups=2)\n"
                               "dl = conv2d(r1, out=64, kernel=3, pad=2, dilation=2)\n"
                               "sm = conv2d(r1, out=4, kernel=3, pad=1)\n"
                               "a1 = add(c2, p1)\n"
                               "a2 = add(a1, gr)\n"
                               "c3 = conv2d(a2, out=64, kernel=3, pad=1)\n"
                               "a3 = add(c3, dl)\n"
                               "output a3, c4, sm\n";

static void test_pass_rewrites(void)
{
    mge_graph *g = ug_parse(small_net);
    if (!g)
        return;
    mge_error err;
    mge_error_clear(&err);
    CHECK_OK(mge_graph_init_params(g, 3, &err), err);
    mge_tensor before = {0}, after = {0}, after2 = {0};
    run_graph(g, 2, 1, &before);
    int changed = -1;
    CHECK_OK(mge_passes_run_list(&g, "winograd", &changed, &err), err);
    CHECK(changed == 1);
    CHECK_OK(mge_graph_validate(g, &err), err);
    /* c1, c2, c3 (28x28: F(4,3)) and c4 (14x14: F(2,3)); sm is too small */
    CHECK(ug_count_op(g, MGE_OP_CONV2D_WINOGRAD) == 4);
    CHECK(ug_count_op(g, MGE_OP_CONV2D) == 5);
    const mge_node *c4 = node_named(g, "c4"), *c3 = node_named(g, "c3");
    CHECK(c4 && c4->op == MGE_OP_CONV2D_WINOGRAD && mge_node_int(c4, MGE_KEY_tile, 0) == 2);
    CHECK(c3 && c3->op == MGE_OP_CONV2D_WINOGRAD && mge_node_int(c3, MGE_KEY_tile, 0) == 4);
    const mge_node *c1 = node_named(g, "c1"), *c2 = node_named(g, "c2");
    CHECK(c1 && c1->op == MGE_OP_CONV2D_WINOGRAD && c1->nin == 3);
    CHECK(c2 && c2->op == MGE_OP_CONV2D_WINOGRAD && c2->nin == 2 && mge_node_int(c2, MGE_KEY_bias, 1) == 0);
    /* each one reads the output of its own winograd_weight node, on the
     * 3x3 weight the file keeps: no transformed weight is stored */
    CHECK(ug_count_op(g, MGE_OP_WINOGRAD_WEIGHT) == 4);
    const mge_node *w1 = weight_node(g, c1), *w4 = weight_node(g, c4);
    CHECK(w1 && w4 && weight_node(g, c2) && weight_node(g, c3));
    if (c1 && w1) {
        const mge_value *wt = &g->values[c1->in[1]], *w = &g->values[w1->in[0]];
        int64_t m = mge_node_int(c1, MGE_KEY_tile, 0);
        CHECK(strcmp(wt->name, "c1.weight_winograd") == 0 && strcmp(w1->name, "c1.weight_winograd") == 0);
        CHECK(!wt->data && mge_node_int(w1, MGE_KEY_tile, 0) == 4);
        CHECK(m == 4 && wt->ndim == 3 && wt->dims[0] == 36 && wt->dims[1] == 64 && wt->dims[2] == 64);
        CHECK(strcmp(w->name, "c1.weight") == 0 && w->kind == MGE_VAL_PARAM && w->data && w->ndim == 4);
        CHECK(strcmp(g->values[c1->in[2]].name, "c1.bias") == 0);
    }
    if (w4)
        CHECK(mge_node_int(w4, MGE_KEY_tile, 0) == 2 && g->values[w4->out[0]].dims[0] == 16);
    CHECK(mge_graph_find(g, "c1.weight") >= 0 && mge_graph_find(g, "c2.weight") >= 0);   /* kept */
    CHECK(mge_graph_find(g, "s2.weight") >= 0);
    for (int v = 0; v < g->nvalues; v++)
        CHECK_MSG(g->values[v].kind == MGE_VAL_NODE || g->values[v].kind == MGE_VAL_INPUT ||
                      g->values[v].ndim != 3,
                  "%s: a stored 3-d weight", g->values[v].name);
    CHECK(g->noutputs == 3 && strcmp(g->values[g->outputs[0]].name, "a3") == 0);
    mge_tensor pre = {0};
    run_graph(g, 2, 1, &after);
    run_graph(g, 2, 2, &after2);
    run_graph_pre(g, 2, 2, &pre);
    if (before.data && after.data && after2.data && pre.data) {
        double e = rel_err(&after, &before);
        CHECK_MSG(e <= 1e-4, "rel err %g", e);
        CHECK(memcmp(after.data, after2.data, after.nbytes) == 0);
        CHECK(memcmp(after.data, pre.data, after.nbytes) == 0);   /* the same weight_t either way */
    }
    mge_tensor_free(&pre);
    /* the .mge and text forms carry the ops */
    mge_buf t = {0};
    CHECK_OK(mge_text_print(g, &t, &err), err);
    CHECK(t.p && strstr(t.p, "conv2d_winograd(") != NULL);
    CHECK(t.p && strstr(t.p, "c1.weight_winograd = winograd_weight(c1.weight)") != NULL);
    CHECK(t.p && strstr(t.p, "c4.weight_winograd = winograd_weight(c4.weight, tile=2)") != NULL);
    mge_graph *back = NULL;
    if (t.p)
        CHECK_OK(mge_text_parse(t.p, t.n, ".", &back, &err), err);
    CHECK(back && ug_count_op(back, MGE_OP_CONV2D_WINOGRAD) == 4 && ug_count_op(back, MGE_OP_WINOGRAD_WEIGHT) == 4);
    mge_graph_free(back);
    mge_buf_free(&t);
    /* nothing left to do, and fold-constants does not store weight_t either */
    changed = -1;
    mge_graph *same = g;
    CHECK_OK(mge_passes_run_list(&g, "winograd", &changed, &err), err);
    CHECK(changed == 0 && g == same);
    changed = -1;
    CHECK_OK(mge_passes_run_list(&g, "cse,fold-constants,dce", &changed, &err), err);
    CHECK(changed == 0 && g == same && ug_count_op(g, MGE_OP_WINOGRAD_WEIGHT) == 4);
    mge_tensor_free(&before);
    mge_tensor_free(&after);
    mge_tensor_free(&after2);
    mge_graph_free(g);
}

/* fused_conv2d keeps its residual and activation: compared with the plain
 * conv2d + add + leaky_relu it stands for (the fused kernels are not
 * needed: the rewritten graph has no fused_conv2d left). */
static void test_pass_fused(void)
{
    const char *plain = "input x : f32[N,64,28,28]\n"
                        "param w : f32[64,64,3,3] init=uniform(0.05)\n"
                        "param b : f32[64] init=uniform(0.3)\n"
                        "c = conv2d(x, w, b, out=64, kernel=3, pad=1)\n"
                        "s = add(c, x)\n"
                        "y = leaky_relu(s, alpha=0.2)\n"
                        "output y\n";
    const char *fused = "input x : f32[N,64,28,28]\n"
                        "param w : f32[64,64,3,3] init=uniform(0.05)\n"
                        "param b : f32[64] init=uniform(0.3)\n"
                        "y = fused_conv2d(x, w, b, x, out=64, kernel=3, pad=1, residual=true, act=leaky_relu, "
                        "alpha=0.2)\n"
                        "output y\n";
    mge_graph *gp = ug_parse(plain), *gf = ug_parse(fused);
    mge_error err;
    mge_error_clear(&err);
    if (!gp || !gf)
        goto done;
    CHECK_OK(mge_graph_init_params(gp, 9, &err), err);
    CHECK_OK(mge_graph_init_params(gf, 9, &err), err);
    int changed = -1;
    CHECK_OK(mge_passes_run_list(&gf, "winograd", &changed, &err), err);
    CHECK(changed == 1 && gf->nnodes == 2);
    CHECK(gf->nnodes == 2 && gf->nodes[0].op == MGE_OP_WINOGRAD_WEIGHT &&
          strcmp(gf->values[gf->nodes[0].in[0]].name, "w") == 0);
    const mge_node *n = gf->nnodes == 2 ? &gf->nodes[1] : NULL;
    CHECK(n && n->op == MGE_OP_CONV2D_WINOGRAD && n->nin == 4 && strcmp(n->name, "y") == 0);
    if (n) {
        CHECK(mge_node_int(n, MGE_KEY_residual, 0) == 1 && mge_node_int(n, MGE_KEY_act, -1) == MGE_OP_LEAKY_RELU);
        CHECK(fabs(mge_node_float(n, MGE_KEY_alpha, 0) - 0.2) < 1e-12);
        CHECK(strcmp(gf->values[n->in[3]].name, "x") == 0);
    }
    mge_tensor a = {0}, b = {0};
    run_graph(gp, 3, 2, &a);
    run_graph(gf, 3, 2, &b);
    if (a.data && b.data) {
        double e = rel_err(&b, &a);
        CHECK_MSG(e <= 1e-4, "rel err %g", e);
    }
    mge_tensor_free(&a);
    mge_tensor_free(&b);
done:
    mge_graph_free(gp);
    mge_graph_free(gf);
}

/* Left alone: a graph with a loss, and one without candidates. */
static void test_pass_noop(void)
{
    const char *train = "input x : f32[N,64,28,28]\n"
                        "input label : i32[N]\n"
                        "c = conv2d(x, out=64, kernel=3, pad=1)\n"
                        "p = global_avgpool(c)\n"
                        "f = flatten(p)\n"
                        "loss = cross_entropy(f, label)\n"
                        "output f\n"
                        "minimize loss\n";
    const char *none = "input x : f32[N,4,28,28]\n"
                       "c = conv2d(x, out=4, kernel=3, stride=2, pad=1)\n"
                       "d = conv2d(c, out=4, kernel=1)\n"
                       "output d\n";
    const char *srcs[2] = {train, none};
    for (int i = 0; i < 2; i++) {
        mge_graph *g = ug_parse(srcs[i]);
        if (!g)
            continue;
        mge_error err;
        mge_error_clear(&err);
        CHECK_OK(mge_graph_init_params(g, 1, &err), err);
        mge_graph *same = g;
        int changed = -1;
        CHECK_OK(mge_passes_run_list(&g, "winograd", &changed, &err), err);
        CHECK(changed == 0 && g == same && ug_count_op(g, MGE_OP_CONV2D_WINOGRAD) == 0);
        mge_graph_free(g);
    }
}

int main(int argc, char **argv)
{
    (void)argc;
    mge_rng_seed(&rng, 12345);
    pool2 = mge_pool_create(2);
    RUN(test_matrices);
    RUN(test_ref_and_cpu);
    RUN(test_chunks);
    RUN(test_infer_errors);
    RUN(test_weight_op);
    RUN(test_pass_rewrites);
    RUN(test_pass_fused);
    RUN(test_pass_noop);
    mge_pool_free(pool2);
    /* the avx2 and the portable builds of the transforms */
    return unit_rerun_baseline(argv, "test_winograd", unit_done());
}
