/* test_ops_infer.c — op families: shape inference through the graph
 * (including the symbolic batch), layer parameters, FLOPs and the errors
 * bad shapes must give. Expected shapes were worked out from PyTorch's and
 * numpy's rules (see man/man7/mge-ops.7). */
#include "internal.h"
#include "unit.h"
#include "unit_attr.h"

#define N MGE_DIM_N

static int input(mge_graph *g, const char *name, mge_dtype dt, int nd, const int64_t *dims)
{
    mge_error err;
    int v = mge_graph_add_value(g, name, MGE_VAL_INPUT, dt, nd, dims, &err);
    CHECK_MSG(v >= 0, "%s", err.msg);
    return v;
}

static int param(mge_graph *g, const char *name, mge_dtype dt, int nd, const int64_t *dims)
{
    mge_error err;
    int v = mge_graph_add_value(g, name, MGE_VAL_PARAM, dt, nd, dims, &err);
    CHECK_MSG(v >= 0, "%s", err.msg);
    return v;
}

/* Adds node `name` with output value `name`; returns the output value or -1. */
static int node(mge_graph *g, const char *name, int op, int nin, const int *in, int nattr, const mge_attr *attrs,
                mge_error *err)
{
    const char *outs[1] = {name};
    int k = mge_graph_add_node(g, name, op, nin, in, nattr, attrs, 1, outs, err);
    return k < 0 ? -1 : g->nodes[k].out[0];
}

static int ok_node(mge_graph *g, const char *name, int op, int nin, const int *in, int nattr, const mge_attr *attrs)
{
    mge_error err;
    memset(&err, 0, sizeof err);
    int v = node(g, name, op, nin, in, nattr, attrs, &err);
    CHECK_MSG(v >= 0, "%s: %s", name, err.msg);
    return v;
}

/* A layer with its parameters created as NODE.weight etc. */
static int layer(mge_graph *g, const char *name, int op, int x, int nattr, const mge_attr *attrs)
{
    mge_error err;
    int in[8], np = 0;
    in[0] = x;
    memset(&err, 0, sizeof err);
    mge_status s = mge_graph_layer_params(g, name, op, x, nattr, attrs, in + 1, &np, &err);
    CHECK_MSG(s == MGE_OK, "%s: %s", name, err.msg);
    if (s)
        return -1;
    return ok_node(g, name, op, 1 + np, in, nattr, attrs);
}

/* Value v has dtype dt and template shape dims[0..nd). */
static int has_shape(const mge_graph *g, int v, mge_dtype dt, int nd, const int64_t *dims)
{
    if (v < 0)
        return 0;
    const mge_value *val = &g->values[v];
    int ok = val->dtype == dt && val->ndim == nd;
    for (int i = 0; ok && i < nd; i++)
        ok = val->dims[i] == dims[i];
    if (!ok) {
        char b1[128], b2[128];
        fprintf(stderr, "  %s is %s, expected %s\n", val->name, mge_shape_str(val->dtype, val->ndim, val->dims, b1, sizeof b1),
                mge_shape_str(dt, nd, dims, b2, sizeof b2));
    }
    return ok;
}
#define SHAPE(g, v, dt, ...) \
    CHECK(has_shape(g, v, dt, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}))
#define SCALAR(g, v, dt) CHECK(has_shape(g, v, dt, 0, NULL))

/* The op fails with code and a message containing `frag`. */
static void expect_fail(mge_graph *g, const char *name, int op, int nin, const int *in, int nattr,
                        const mge_attr *attrs, mge_status code, const char *frag)
{
    mge_error err;
    memset(&err, 0, sizeof err);
    int v = node(g, name, op, nin, in, nattr, attrs, &err);
    CHECK_MSG(v < 0, "%s: expected a failure", name);
    if (v >= 0)
        return;
    CHECK_MSG(err.code == code, "%s: code %s, expected %s (%s)", name, mge_status_name(err.code),
              mge_status_name(code), err.msg);
    CHECK_MSG(strstr(err.msg, frag) != NULL, "%s: message '%s' lacks '%s'", name, err.msg, frag);
}

/* ------------------------------------------------------------------ lenet */

static void test_lenet(void)
{
    mge_graph *g = mge_graph_new();
    int x = input(g, "x", MGE_F32, 4, (int64_t[]){N, 1, 28, 28});
    int label = input(g, "label", MGE_I32, 1, (int64_t[]){N});
    mge_attr c1[3] = {A(MGE_KEY_out, 32), A(MGE_KEY_kernel, 3), A(MGE_KEY_pad, 1)};
    int conv1 = layer(g, "conv1", MGE_OP_CONV2D, x, 3, c1);
    SHAPE(g, conv1, MGE_F32, N, 32, 28, 28);
    int w = mge_graph_find(g, "conv1.weight"), b = mge_graph_find(g, "conv1.bias");
    SHAPE(g, w, MGE_F32, 32, 1, 3, 3);
    SHAPE(g, b, MGE_F32, 32);
    CHECK(w >= 0 && g->values[w].kind == MGE_VAL_PARAM);
    /* PyTorch's bound 1/sqrt(fan_in) with fan_in = 1*3*3 */
    if (w >= 0 && b >= 0) {
        double bw = 0, bb = 0;
        CHECK(g->values[w].init && sscanf(g->values[w].init, "uniform(%lf)", &bw) == 1);
        CHECK(g->values[b].init && sscanf(g->values[b].init, "uniform(%lf)", &bb) == 1);
        CHECK_NEAR(bw, 1.0 / 3.0, 1e-8);
        CHECK_NEAR(bb, 1.0 / 3.0, 1e-8);
    }
    int r1 = ok_node(g, "relu1", MGE_OP_RELU, 1, &conv1, 0, NULL);
    mge_attr pk = A(MGE_KEY_kernel, 2);
    int p1 = ok_node(g, "pool1", MGE_OP_MAXPOOL2D, 1, &r1, 1, &pk);
    SHAPE(g, p1, MGE_F32, N, 32, 14, 14);
    mge_attr c2[3] = {A(MGE_KEY_out, 64), A(MGE_KEY_kernel, 3), A(MGE_KEY_pad, 1)};
    int conv2 = layer(g, "conv2", MGE_OP_CONV2D, p1, 3, c2);
    SHAPE(g, mge_graph_find(g, "conv2.weight"), MGE_F32, 64, 32, 3, 3);
    int r2 = ok_node(g, "relu2", MGE_OP_RELU, 1, &conv2, 0, NULL);
    int p2 = ok_node(g, "pool2", MGE_OP_MAXPOOL2D, 1, &r2, 1, &pk);
    SHAPE(g, p2, MGE_F32, N, 64, 7, 7);
    int flat = ok_node(g, "flat", MGE_OP_FLATTEN, 1, &p2, 0, NULL);
    SHAPE(g, flat, MGE_F32, N, 3136);
    mge_attr l1 = A(MGE_KEY_out, 128);
    int fc1 = layer(g, "fc1", MGE_OP_LINEAR, flat, 1, &l1);
    SHAPE(g, fc1, MGE_F32, N, 128);
    SHAPE(g, mge_graph_find(g, "fc1.weight"), MGE_F32, 128, 3136);
    SHAPE(g, mge_graph_find(g, "fc1.bias"), MGE_F32, 128);
    int fb = mge_graph_find(g, "fc1.bias");
    if (fb >= 0) {
        double bd = 0;
        CHECK(g->values[fb].init && sscanf(g->values[fb].init, "uniform(%lf)", &bd) == 1);
        CHECK_NEAR(bd, 1.0 / sqrt(3136.0), 1e-8);
    }
    int a1 = ok_node(g, "act1", MGE_OP_RELU, 1, &fc1, 0, NULL);
    mge_attr l2 = A(MGE_KEY_out, 10);
    int fc2 = layer(g, "fc2", MGE_OP_LINEAR, a1, 1, &l2);
    SHAPE(g, fc2, MGE_F32, N, 10);
    int li[2] = {fc2, label};
    int loss = ok_node(g, "loss", MGE_OP_CROSS_ENTROPY, 2, li, 0, NULL);
    SCALAR(g, loss, MGE_F32);

    /* concrete shapes at batch 3 */
    int *nd = calloc((size_t)g->nvalues, sizeof *nd);
    int64_t *dims = calloc((size_t)g->nvalues * MGE_MAX_DIMS, sizeof *dims);
    mge_error err;
    CHECK_OK(mge_graph_shapes(g, MGE_BATCH(3), nd, dims, &err), err);
    CHECK(nd[fc2] == 2 && dims[fc2 * MGE_MAX_DIMS] == 3 && dims[fc2 * MGE_MAX_DIMS + 1] == 10);
    CHECK(nd[flat] == 2 && dims[flat * MGE_MAX_DIMS] == 3 && dims[flat * MGE_MAX_DIMS + 1] == 3136);
    free(nd);
    free(dims);
    CHECK_OK(mge_graph_validate(g, &err), err);
    CHECK_OK(mge_graph_infer(g, &err), err);
    SHAPE(g, fc2, MGE_F32, N, 10);

    /* FLOPs at batch 2: conv1 = 2*N*out*OH*OW*C*kh*kw + N*out*OH*OW (bias) */
    double oc = 2.0 * 32 * 28 * 28;
    CHECK_NEAR(unit_flops(g, g->values[conv1].producer, 2), 2.0 * oc * 1 * 3 * 3 + oc, 0.5);
    double oc2 = 2.0 * 64 * 14 * 14;
    CHECK_NEAR(unit_flops(g, g->values[conv2].producer, 2), 2.0 * oc2 * 32 * 3 * 3 + oc2, 0.5);
    /* fc1 = 2*M*in*out + M*out */
    CHECK_NEAR(unit_flops(g, g->values[fc1].producer, 2), 2.0 * 2 * 3136 * 128 + 2.0 * 128, 0.5);
    CHECK_NEAR(unit_flops(g, g->values[flat].producer, 2), 0, 0);
    CHECK_NEAR(unit_flops(g, g->values[r1].producer, 2), oc, 0.5);
    mge_graph_free(g);
}

/* ------------------------------------------------------------------ conv */

static void test_conv(void)
{
    mge_graph *g = mge_graph_new();
    mge_error err;
    /* grouped, strided, padded, dilated, no bias; per-dim attributes */
    int x = input(g, "x", MGE_F32, 4, (int64_t[]){1, 4, 10, 9});
    mge_attr a[7] = {A(MGE_KEY_out, 8), A_ints(MGE_KEY_kernel, 2, (int64_t[]){3, 2}),
                     A_ints(MGE_KEY_stride, 2, (int64_t[]){2, 1}), A_ints(MGE_KEY_pad, 2, (int64_t[]){1, 0}),
                     A_ints(MGE_KEY_dilation, 2, (int64_t[]){1, 2}), A(MGE_KEY_groups, 2),
                     A(MGE_KEY_bias, 0)};
    int y = layer(g, "c", MGE_OP_CONV2D, x, 7, a);
    SHAPE(g, y, MGE_F32, 1, 8, 5, 7); /* torch: F.conv2d(...) -> [1,8,5,7] */
    SHAPE(g, mge_graph_find(g, "c.weight"), MGE_F32, 8, 2, 3, 2);
    CHECK(mge_graph_find(g, "c.bias") < 0);
    if (y >= 0)
        CHECK_NEAR(unit_flops(g, g->values[y].producer, 1), 2.0 * 8 * 5 * 7 * 2 * 3 * 2, 0.5);

    /* groups not dividing C */
    mge_attr bad[3] = {A(MGE_KEY_out, 6), A(MGE_KEY_kernel, 3), A(MGE_KEY_groups, 3)};
    int np;
    int pv[4];
    CHECK(mge_graph_layer_params(g, "bad", MGE_OP_CONV2D, x, 3, bad, pv, &np, &err) == MGE_ERR_SHAPE);
    CHECK(strstr(err.msg, "groups") != NULL);
    int wg = param(g, "wg", MGE_F32, 4, (int64_t[]){6, 1, 3, 3});
    int bg = param(g, "bg", MGE_F32, 1, (int64_t[]){6});
    expect_fail(g, "bad_groups", MGE_OP_CONV2D, 3, (int[]){x, wg, bg}, 3, bad, MGE_ERR_SHAPE, "groups=3");

    /* wrong weight shape: message names expected */
    int w = param(g, "w", MGE_F32, 4, (int64_t[]){32, 3, 3, 3});
    int b = param(g, "b", MGE_F32, 1, (int64_t[]){32});
    mge_attr c[2] = {A(MGE_KEY_out, 32), A(MGE_KEY_kernel, 3)};
    expect_fail(g, "bad_w", MGE_OP_CONV2D, 3, (int[]){x, w, b}, 2, c, MGE_ERR_SHAPE, "expected f32[32,4,3,3]");
    /* bias attribute disagrees with the inputs */
    int w4 = param(g, "w4", MGE_F32, 4, (int64_t[]){32, 4, 3, 3});
    expect_fail(g, "no_bias", MGE_OP_CONV2D, 2, (int[]){x, w4}, 2, c, MGE_ERR_INVALID, "bias");
    /* bias of the wrong size */
    int b5 = param(g, "b5", MGE_F32, 1, (int64_t[]){5});
    expect_fail(g, "bad_b", MGE_OP_CONV2D, 3, (int[]){x, w4, b5}, 2, c, MGE_ERR_SHAPE, "f32[32]");
    /* the right ones work */
    int ok = ok_node(g, "good", MGE_OP_CONV2D, 3, (int[]){x, w4, b}, 2, c);
    SHAPE(g, ok, MGE_F32, 1, 32, 8, 7);
    /* kernel larger than the input */
    mge_attr big[3] = {A(MGE_KEY_out, 32), A(MGE_KEY_kernel, 11), A(MGE_KEY_bias, 0)};
    int w11 = param(g, "w11", MGE_F32, 4, (int64_t[]){32, 4, 11, 11});
    expect_fail(g, "too_small", MGE_OP_CONV2D, 2, (int[]){x, w11}, 3, big, MGE_ERR_SHAPE, "too small");
    /* rank-3 x */
    int x3 = input(g, "x3", MGE_F32, 3, (int64_t[]){4, 10, 9});
    expect_fail(g, "rank3", MGE_OP_CONV2D, 3, (int[]){x3, w4, b}, 2, c, MGE_ERR_SHAPE, "rank 4");
    /* three kernel values */
    mge_attr k3[2] = {A(MGE_KEY_out, 32), A_ints(MGE_KEY_kernel, 3, (int64_t[]){3, 3, 3})};
    expect_fail(g, "k3", MGE_OP_CONV2D, 3, (int[]){x, w4, b}, 2, k3, MGE_ERR_INVALID, "1 or 2");
    /* stride 0 */
    mge_attr s0[3] = {A(MGE_KEY_out, 32), A(MGE_KEY_kernel, 3), A(MGE_KEY_stride, 0)};
    expect_fail(g, "s0", MGE_OP_CONV2D, 3, (int[]){x, w4, b}, 3, s0, MGE_ERR_INVALID, "stride");
    mge_graph_free(g);
}

/* ------------------------------------------------------------------ linear, matmul */

static void test_linear(void)
{
    mge_graph *g = mge_graph_new();
    int x = input(g, "x", MGE_F32, 3, (int64_t[]){N, 5, 16});
    mge_attr o = A(MGE_KEY_out, 4);
    int y = layer(g, "fc", MGE_OP_LINEAR, x, 1, &o);
    SHAPE(g, y, MGE_F32, N, 5, 4);
    SHAPE(g, mge_graph_find(g, "fc.weight"), MGE_F32, 4, 16);
    if (y >= 0)
        CHECK_NEAR(unit_flops(g, g->values[y].producer, 3), 2.0 * 15 * 16 * 4 + 15 * 4, 0.5);
    /* wrong weight */
    int w = param(g, "w", MGE_F32, 2, (int64_t[]){4, 15});
    int b = param(g, "b", MGE_F32, 1, (int64_t[]){4});
    expect_fail(g, "bad_w", MGE_OP_LINEAR, 3, (int[]){x, w, b}, 1, &o, MGE_ERR_SHAPE, "expected f32[4,16]");
    int wt = param(g, "wt", MGE_F32, 2, (int64_t[]){16, 4});
    expect_fail(g, "bad_wt", MGE_OP_LINEAR, 3, (int[]){x, wt, b}, 1, &o, MGE_ERR_SHAPE, "expected f32[4,16]");
    /* no bias */
    mge_attr nb[2] = {A(MGE_KEY_out, 4), A(MGE_KEY_bias, 0)};
    int w16 = param(g, "w16", MGE_F32, 2, (int64_t[]){4, 16});
    int y2 = ok_node(g, "nb", MGE_OP_LINEAR, 2, (int[]){x, w16}, 2, nb);
    SHAPE(g, y2, MGE_F32, N, 5, 4);
    if (y2 >= 0)
        CHECK_NEAR(unit_flops(g, g->values[y2].producer, 1), 2.0 * 5 * 16 * 4, 0.5);
    expect_fail(g, "nb3", MGE_OP_LINEAR, 3, (int[]){x, w16, b}, 2, nb, MGE_ERR_INVALID, "bias=false");
    /* attributes are checked against the schema before parameters are made */
    mge_error err;
    int pv[4], np = 0;
    mge_attr k = A(MGE_KEY_kernel, 3);
    CHECK(mge_graph_layer_params(g, "p1", MGE_OP_LINEAR, x, 1, &k, pv, &np, &err) == MGE_ERR_INVALID);
    CHECK(mge_graph_layer_params(g, "p2", MGE_OP_LINEAR, x, 0, NULL, pv, &np, &err) == MGE_ERR_INVALID);
    CHECK(strstr(err.msg, "out") != NULL);
    CHECK(mge_graph_find(g, "p1.weight") < 0 && mge_graph_find(g, "p2.weight") < 0);
    /* a weight of another dtype */
    int wi = param(g, "wi", MGE_I32, 2, (int64_t[]){4, 16});
    expect_fail(g, "lin_wi", MGE_OP_LINEAR, 3, (int[]){x, wi, b}, 1, &o, MGE_ERR_SHAPE, "weight i32[4,16]");
    mge_graph_free(g);
}

static void check_matmul(const int64_t *ad, int an, const int64_t *bd, int bn, int ta, int tb, int expect_ok,
                         const int64_t *od, int on)
{
    mge_graph *g = mge_graph_new();
    int a = input(g, "a", MGE_F32, an, ad);
    int b = input(g, "b", MGE_F32, bn, bd);
    mge_attr t[2] = {A(MGE_KEY_transpose_a, ta), A(MGE_KEY_transpose_b, tb)};
    mge_error err;
    memset(&err, 0, sizeof err);
    int y = node(g, "y", MGE_OP_MATMUL, 2, (int[]){a, b}, 2, t, &err);
    if (expect_ok) {
        CHECK_MSG(y >= 0, "%s", err.msg);
        CHECK(has_shape(g, y, MGE_F32, on, od));
    } else {
        CHECK(y < 0 && err.code == MGE_ERR_SHAPE);
    }
    mge_graph_free(g);
}

static void test_matmul(void)
{
    /* numpy.matmul cases */
    check_matmul((int64_t[]){3}, 1, (int64_t[]){3}, 1, 0, 0, 1, NULL, 0);
    check_matmul((int64_t[]){2, 3}, 2, (int64_t[]){3}, 1, 0, 0, 1, (int64_t[]){2}, 1);
    check_matmul((int64_t[]){3}, 1, (int64_t[]){5, 3, 4}, 3, 0, 0, 1, (int64_t[]){5, 4}, 2);
    check_matmul((int64_t[]){2, 1, 3, 4}, 4, (int64_t[]){5, 4, 6}, 3, 0, 0, 1, (int64_t[]){2, 5, 3, 6}, 4);
    check_matmul((int64_t[]){4, 3}, 2, (int64_t[]){6, 4}, 2, 1, 1, 1, (int64_t[]){3, 6}, 2);
    check_matmul((int64_t[]){N, 7, 3}, 3, (int64_t[]){5, 3}, 2, 0, 1, 1, (int64_t[]){N, 7, 5}, 3);
    check_matmul((int64_t[]){2, 3}, 2, (int64_t[]){4, 5}, 2, 0, 0, 0, NULL, 0);
    check_matmul((int64_t[]){2, 2, 3}, 3, (int64_t[]){3, 3, 5}, 3, 0, 0, 0, NULL, 0);
    /* flops: 2*batch*M*K*N */
    mge_graph *g = mge_graph_new();
    int a = input(g, "a", MGE_F32, 3, (int64_t[]){2, 3, 4});
    int b = input(g, "b", MGE_F32, 2, (int64_t[]){4, 5});
    int y = ok_node(g, "y", MGE_OP_MATMUL, 2, (int[]){a, b}, 0, NULL);
    if (y >= 0)
        CHECK_NEAR(unit_flops(g, g->values[y].producer, 1), 2.0 * 2 * 3 * 4 * 5, 0.5);
    mge_attr ta = A(MGE_KEY_transpose_a, 1);
    int at = input(g, "at", MGE_F32, 2, (int64_t[]){4, 3});
    int y2 = ok_node(g, "y2", MGE_OP_MATMUL, 2, (int[]){at, b}, 1, &ta);
    SHAPE(g, y2, MGE_F32, 3, 5);
    if (y2 >= 0)
        CHECK_NEAR(unit_flops(g, g->values[y2].producer, 1), 2.0 * 3 * 4 * 5, 0.5);
    int bi = input(g, "bi", MGE_I32, 2, (int64_t[]){4, 5});
    expect_fail(g, "mixed", MGE_OP_MATMUL, 2, (int[]){a, bi}, 0, NULL, MGE_ERR_SHAPE, "dtypes differ");
    mge_graph_free(g);
}

/* ------------------------------------------------------------------ norm */

static void test_norm(void)
{
    mge_graph *g = mge_graph_new();
    int x = input(g, "x", MGE_F32, 4, (int64_t[]){N, 6, 5, 5});
    int y = layer(g, "bn", MGE_OP_BATCHNORM, x, 0, NULL);
    SHAPE(g, y, MGE_F32, N, 6, 5, 5);
    static const char *const names[5] = {"bn.weight", "bn.bias", "bn.running_mean", "bn.running_var",
                                         "bn.num_batches_tracked"};
    static const char *const inits[5] = {"ones", "zeros", "zeros", "ones", "zeros"};
    int prev = -1;
    for (int i = 0; i < 5; i++) {
        int v = mge_graph_find(g, names[i]);
        CHECK_MSG(v > prev, "%s missing or out of order", names[i]);
        if (v < 0)
            continue;
        prev = v;
        CHECK(g->values[v].kind == (i < 2 ? MGE_VAL_PARAM : MGE_VAL_STATE));
        CHECK(g->values[v].init && strcmp(g->values[v].init, inits[i]) == 0);
        if (i < 4)
            SHAPE(g, v, MGE_F32, 6);
        else
            SCALAR(g, v, MGE_I64);
    }
    if (y >= 0)
        CHECK_NEAR(unit_flops(g, g->values[y].producer, 2), 2.0 * 2 * 6 * 25, 0.5);
    /* wrong channel count in the running stats */
    int w = param(g, "w", MGE_F32, 1, (int64_t[]){6});
    int bad = param(g, "bad", MGE_F32, 1, (int64_t[]){5});
    expect_fail(g, "bn2", MGE_OP_BATCHNORM, 5, (int[]){x, w, w, bad, w}, 0, NULL, MGE_ERR_SHAPE, "running_mean");
    int nbt = param(g, "nbt", MGE_F32, 0, NULL);
    expect_fail(g, "bn3", MGE_OP_BATCHNORM, 6, (int[]){x, w, w, w, w, nbt}, 0, NULL, MGE_ERR_SHAPE,
                "num_batches_tracked");
    int y5 = ok_node(g, "bn5", MGE_OP_BATCHNORM, 5, (int[]){x, w, w, w, w}, 0, NULL);
    SHAPE(g, y5, MGE_F32, N, 6, 5, 5);

    /* layernorm over the last two dims */
    int t = input(g, "t", MGE_F32, 3, (int64_t[]){N, 7, 12});
    mge_attr ax = A(MGE_KEY_axis, -2);
    int ln = layer(g, "ln", MGE_OP_LAYERNORM, t, 1, &ax);
    SHAPE(g, ln, MGE_F32, N, 7, 12);
    SHAPE(g, mge_graph_find(g, "ln.weight"), MGE_F32, 7, 12);
    SHAPE(g, mge_graph_find(g, "ln.bias"), MGE_F32, 7, 12);
    int ln2 = layer(g, "ln2", MGE_OP_LAYERNORM, t, 0, NULL);
    SHAPE(g, mge_graph_find(g, "ln2.weight"), MGE_F32, 12);
    SHAPE(g, ln2, MGE_F32, N, 7, 12);
    int w12 = param(g, "w12", MGE_F32, 1, (int64_t[]){12});
    expect_fail(g, "ln3", MGE_OP_LAYERNORM, 3, (int[]){t, w12, w12}, 1, &ax, MGE_ERR_SHAPE, "expected f32[7,12]");
    mge_attr ax9 = A(MGE_KEY_axis, 3);
    expect_fail(g, "ln4", MGE_OP_LAYERNORM, 3, (int[]){t, w12, w12}, 1, &ax9, MGE_ERR_INVALID, "out of range");
    /* integer x */
    int xi = input(g, "xi", MGE_I32, 2, (int64_t[]){3, 12});
    mge_error err;
    int pv[8], np;
    CHECK(mge_graph_layer_params(g, "lni", MGE_OP_LAYERNORM, xi, 0, NULL, pv, &np, &err) == MGE_ERR_SHAPE);
    mge_graph_free(g);
}

/* ------------------------------------------------------------------ elementwise */

static void test_elementwise(void)
{
    mge_graph *g = mge_graph_new();
    int x = input(g, "x", MGE_F32, 3, (int64_t[]){N, 1, 5});
    int xi = input(g, "xi", MGE_I32, 2, (int64_t[]){4, 5});
    static const int fl[] = {MGE_OP_SIGMOID, MGE_OP_TANH, MGE_OP_GELU, MGE_OP_SILU, MGE_OP_HSWISH,
                             MGE_OP_HSIGMOID, MGE_OP_EXP, MGE_OP_LOG, MGE_OP_SQRT, MGE_OP_LEAKY_RELU,
                             MGE_OP_DROPOUT};
    char nm[32];
    for (size_t i = 0; i < sizeof fl / sizeof fl[0]; i++) {
        snprintf(nm, sizeof nm, "f%zu", i);
        int y = ok_node(g, nm, fl[i], 1, &x, 0, NULL);
        SHAPE(g, y, MGE_F32, N, 1, 5);
        snprintf(nm, sizeof nm, "fi%zu", i);
        expect_fail(g, nm, fl[i], 1, &xi, 0, NULL, MGE_ERR_SHAPE, "float");
    }
    static const int any[] = {MGE_OP_RELU, MGE_OP_RELU6, MGE_OP_NEG, MGE_OP_ABS};
    for (size_t i = 0; i < sizeof any / sizeof any[0]; i++) {
        snprintf(nm, sizeof nm, "a%zu", i);
        SHAPE(g, ok_node(g, nm, any[i], 1, &xi, 0, NULL), MGE_I32, 4, 5);
    }
    int xb = input(g, "xb", MGE_BOOL, 1, (int64_t[]){4});
    expect_fail(g, "rb", MGE_OP_RELU, 1, &xb, 0, NULL, MGE_ERR_SHAPE, "bool");
    mge_attr dt = A(MGE_KEY_dtype, MGE_I64);
    SHAPE(g, ok_node(g, "c", MGE_OP_CAST, 1, &x, 1, &dt), MGE_I64, N, 1, 5);
    mge_attr p = A_f(MGE_KEY_p, 1.5);
    expect_fail(g, "dp", MGE_OP_DROPOUT, 1, &x, 1, &p, MGE_ERR_INVALID, "p=1.5");

    /* binary: numpy broadcasting */
    int y = input(g, "y", MGE_F32, 2, (int64_t[]){4, 1});
    int s = ok_node(g, "s", MGE_OP_ADD, 2, (int[]){x, y}, 0, NULL);
    SHAPE(g, s, MGE_F32, N, 4, 5);
    if (s >= 0)
        CHECK_NEAR(unit_flops(g, g->values[s].producer, 2), 2.0 * 4 * 5, 0.5);
    int sc = input(g, "sc", MGE_F32, 0, NULL);
    SHAPE(g, ok_node(g, "m", MGE_OP_MUL, 2, (int[]){sc, x}, 0, NULL), MGE_F32, N, 1, 5);
    int z = input(g, "z", MGE_F32, 1, (int64_t[]){3});
    expect_fail(g, "bz", MGE_OP_SUB, 2, (int[]){x, z}, 0, NULL, MGE_ERR_SHAPE, "do not broadcast");
    int xi5 = input(g, "xi5", MGE_I32, 1, (int64_t[]){5});
    expect_fail(g, "bd", MGE_OP_DIV, 2, (int[]){x, xi5}, 0, NULL, MGE_ERR_SHAPE, "dtypes differ");
    SHAPE(g, ok_node(g, "mx", MGE_OP_MAXIMUM, 2, (int[]){xi, xi5}, 0, NULL), MGE_I32, 4, 5);
    SHAPE(g, ok_node(g, "ia", MGE_OP_SUB, 2, (int[]){xi, xi5}, 0, NULL), MGE_I32, 4, 5);
    /* integer div truncates (ONNX Div); pow stays float only */
    SHAPE(g, ok_node(g, "idv", MGE_OP_DIV, 2, (int[]){xi, xi5}, 0, NULL), MGE_I32, 4, 5);
    expect_fail(g, "ipw", MGE_OP_POW, 2, (int[]){xi, xi5}, 0, NULL, MGE_ERR_SHAPE, "float");
    mge_graph_free(g);
}

/* ------------------------------------------------------------------ pooling */

static int pool_dim(mge_graph *g, const char *nm, int op, int x, int k, int s, int p, int ceil, int dil)
{
    mge_attr a[5];
    int na = 0;
    a[na++] = A(MGE_KEY_kernel, k);
    if (s)
        a[na++] = A(MGE_KEY_stride, s);
    a[na++] = A(MGE_KEY_pad, p);
    a[na++] = A(MGE_KEY_ceil_mode, ceil);
    if (dil)
        a[na++] = A(MGE_KEY_dilation, dil);
    int v = ok_node(g, nm, op, 1, &x, na, a);
    return v >= 0 && g->values[v].ndim == 4 ? (int)g->values[v].dims[2] : -1;
}

static void test_pool(void)
{
    mge_graph *g = mge_graph_new();
    int x7 = input(g, "x7", MGE_F32, 4, (int64_t[]){N, 3, 7, 7});
    int x5 = input(g, "x5", MGE_F32, 4, (int64_t[]){1, 1, 5, 5});
    int x10 = input(g, "x10", MGE_F32, 4, (int64_t[]){1, 1, 10, 10});
    /* expected sizes from PyTorch's F.max_pool2d / F.avg_pool2d */
    CHECK(pool_dim(g, "p1", MGE_OP_MAXPOOL2D, x7, 3, 2, 1, 1, 0) == 4);
    CHECK(pool_dim(g, "p2", MGE_OP_MAXPOOL2D, x5, 2, 0, 0, 1, 0) == 3);
    CHECK(pool_dim(g, "p3", MGE_OP_MAXPOOL2D, x5, 2, 0, 0, 0, 0) == 2);
    CHECK(pool_dim(g, "p4", MGE_OP_AVGPOOL2D, x5, 2, 2, 1, 1, 0) == 3);
    CHECK(pool_dim(g, "p5", MGE_OP_MAXPOOL2D, x10, 3, 1, 1, 0, 2) == 8);
    SHAPE(g, mge_graph_find(g, "p1"), MGE_F32, N, 3, 4, 4);
    int p3 = mge_graph_find(g, "p3");
    if (p3 >= 0) /* 2x2 windows over 2x2 outputs */
        CHECK_NEAR(unit_flops(g, g->values[p3].producer, 1), 2.0 * 2 * 4, 0.5);
    mge_attr bad[2] = {A(MGE_KEY_kernel, 2), A(MGE_KEY_pad, 2)};
    expect_fail(g, "bp", MGE_OP_MAXPOOL2D, 1, &x10, 2, bad, MGE_ERR_INVALID, "half the kernel");
    mge_attr k = A(MGE_KEY_kernel, 6);
    expect_fail(g, "big", MGE_OP_AVGPOOL2D, 1, &x5, 1, &k, MGE_ERR_SHAPE, "too small");
    int x3 = input(g, "x3", MGE_F32, 3, (int64_t[]){1, 5, 5});
    expect_fail(g, "r3", MGE_OP_MAXPOOL2D, 1, &x3, 1, &k, MGE_ERR_SHAPE, "rank 4");
    int gp = ok_node(g, "gap", MGE_OP_GLOBAL_AVGPOOL, 1, &x7, 0, NULL);
    SHAPE(g, gp, MGE_F32, N, 3, 1, 1);
    mge_graph_free(g);
}

/* ------------------------------------------------------------------ reductions */

static void test_reduce(void)
{
    mge_graph *g = mge_graph_new();
    int x = input(g, "x", MGE_F32, 3, (int64_t[]){N, 4, 6});
    SHAPE(g, ok_node(g, "sm", MGE_OP_SOFTMAX, 1, &x, 0, NULL), MGE_F32, N, 4, 6);
    mge_attr a1 = A(MGE_KEY_axis, 1);
    SHAPE(g, ok_node(g, "lsm", MGE_OP_LOG_SOFTMAX, 1, &x, 1, &a1), MGE_F32, N, 4, 6);
    SCALAR(g, ok_node(g, "sall", MGE_OP_SUM, 1, &x, 0, NULL), MGE_F32);
    mge_attr two[2] = {A_ints(MGE_KEY_axis, 2, (int64_t[]){1, -1}), A(MGE_KEY_keepdim, 1)};
    SHAPE(g, ok_node(g, "mk", MGE_OP_MEAN, 1, &x, 2, two), MGE_F32, N, 1, 1);
    SHAPE(g, ok_node(g, "mx", MGE_OP_MAX, 1, &x, 1, two), MGE_F32, N);
    SHAPE(g, ok_node(g, "am", MGE_OP_ARGMAX, 1, &x, 0, NULL), MGE_I64, N, 4);
    mge_attr ak[2] = {A(MGE_KEY_axis, 0), A(MGE_KEY_keepdim, 1)};
    SHAPE(g, ok_node(g, "am0", MGE_OP_ARGMAX, 1, &x, 2, ak), MGE_I64, 1, 4, 6);
    int sall = mge_graph_find(g, "sall");
    if (sall >= 0)
        CHECK_NEAR(unit_flops(g, g->values[sall].producer, 2), 48, 0.5);
    mge_attr dup = A_ints(MGE_KEY_axis, 2, (int64_t[]){1, -2});
    expect_fail(g, "dup", MGE_OP_SUM, 1, &x, 1, &dup, MGE_ERR_INVALID, "twice");
    mge_attr oor = A(MGE_KEY_axis, 3);
    expect_fail(g, "oor", MGE_OP_SOFTMAX, 1, &x, 1, &oor, MGE_ERR_INVALID, "out of range");
    mge_attr many = A_ints(MGE_KEY_axis, 2, (int64_t[]){0, 1});
    expect_fail(g, "many", MGE_OP_ARGMAX, 1, &x, 1, &many, MGE_ERR_INVALID, "expected one");
    int xi = input(g, "xi", MGE_I32, 1, (int64_t[]){4});
    expect_fail(g, "mi", MGE_OP_MEAN, 1, &xi, 0, NULL, MGE_ERR_SHAPE, "float");
    SCALAR(g, ok_node(g, "si", MGE_OP_SUM, 1, &xi, 0, NULL), MGE_I32);
    mge_graph_free(g);
}

/* ------------------------------------------------------------------ data movement */

/* Python's len(range(n)[start:end:step]) by walking the indices. */
static int64_t py_slice_len(int64_t n, int64_t start, int has_end, int64_t end, int64_t step)
{
    int64_t c = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t s = start < 0 ? start + n : start, e = !has_end ? n : end < 0 ? end + n : end;
        if (i >= s && i < e && (i - s) % step == 0)
            c++;
    }
    return c;
}

static void test_shape_ops(void)
{
    mge_graph *g = mge_graph_new();
    int x = input(g, "x", MGE_F32, 4, (int64_t[]){N, 2, 3, 4});
    mge_attr sh = A_ints(MGE_KEY_shape, 3, (int64_t[]){0, -1, 4});
    SHAPE(g, ok_node(g, "r1", MGE_OP_RESHAPE, 1, &x, 1, &sh), MGE_F32, N, 6, 4);
    mge_attr sh2 = A_ints(MGE_KEY_shape, 2, (int64_t[]){-1, 24});
    SHAPE(g, ok_node(g, "r2", MGE_OP_RESHAPE, 1, &x, 1, &sh2), MGE_F32, N, 24);
    mge_attr bad = A_ints(MGE_KEY_shape, 2, (int64_t[]){0, 25});
    expect_fail(g, "r3", MGE_OP_RESHAPE, 1, &x, 1, &bad, MGE_ERR_SHAPE, "elements");
    mge_attr bad2 = A_ints(MGE_KEY_shape, 3, (int64_t[]){0, -1, 5});
    expect_fail(g, "r4", MGE_OP_RESHAPE, 1, &x, 1, &bad2, MGE_ERR_SHAPE, "multiple");
    mge_attr two = A_ints(MGE_KEY_shape, 3, (int64_t[]){0, -1, -1});
    expect_fail(g, "r5", MGE_OP_RESHAPE, 1, &x, 1, &two, MGE_ERR_INVALID, "one -1");
    /* folding the batch into another dim gives a symbolic expression (24*N) */
    mge_attr fold = A_ints(MGE_KEY_shape, 1, (int64_t[]){-1});
    int r6 = ok_node(g, "r6", MGE_OP_RESHAPE, 1, &x, 1, &fold);
    CHECK(r6 >= 0 && g->values[r6].ndim == 1 && g->values[r6].dims[0] == mge_dim_mul(MGE_DIM_N, 24));

    mge_attr st = A(MGE_KEY_start, -2);
    SHAPE(g, ok_node(g, "f1", MGE_OP_FLATTEN, 1, &x, 1, &st), MGE_F32, N, 2, 12);
    mge_attr st9 = A(MGE_KEY_start, 4);
    expect_fail(g, "f2", MGE_OP_FLATTEN, 1, &x, 1, &st9, MGE_ERR_INVALID, "out of range");

    mge_attr perm = A_ints(MGE_KEY_perm, 4, (int64_t[]){0, 3, 1, 2});
    SHAPE(g, ok_node(g, "t1", MGE_OP_TRANSPOSE, 1, &x, 1, &perm), MGE_F32, N, 4, 2, 3);
    mge_attr bperm = A_ints(MGE_KEY_perm, 4, (int64_t[]){0, 3, 3, 2});
    expect_fail(g, "t2", MGE_OP_TRANSPOSE, 1, &x, 1, &bperm, MGE_ERR_INVALID, "permutation");
    mge_attr sperm = A_ints(MGE_KEY_perm, 3, (int64_t[]){0, 2, 1});
    expect_fail(g, "t3", MGE_OP_TRANSPOSE, 1, &x, 1, &sperm, MGE_ERR_INVALID, "rank 4");

    int y = input(g, "y", MGE_F32, 4, (int64_t[]){N, 5, 3, 4});
    mge_attr a1 = A(MGE_KEY_axis, 1);
    SHAPE(g, ok_node(g, "c1", MGE_OP_CONCAT, 3, (int[]){x, y, x}, 1, &a1), MGE_F32, N, 9, 3, 4);
    mge_attr a2 = A(MGE_KEY_axis, 2);
    expect_fail(g, "c2", MGE_OP_CONCAT, 2, (int[]){x, y}, 1, &a2, MGE_ERR_SHAPE, "input 1");
    int z = input(g, "z", MGE_I32, 4, (int64_t[]){N, 2, 3, 4});
    expect_fail(g, "c3", MGE_OP_CONCAT, 2, (int[]){x, z}, 1, &a1, MGE_ERR_SHAPE, "dtype");

    /* slices against Python's rules on a dim of 10 */
    int s10 = input(g, "s10", MGE_F32, 2, (int64_t[]){2, 10});
    static const int64_t cases[][4] = {{-3, 1, 100, 1}, {2, 1, -1, 3}, {-100, 1, 3, 1}, {5, 1, 2, 1},
                                       {0, 0, 0, 2},    {7, 0, 0, 1},  {-1, 0, 0, 4},  {3, 1, 9, 5}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mge_attr sa[4];
        int na = 0;
        sa[na++] = A(MGE_KEY_axis, -1);
        sa[na++] = A(MGE_KEY_start, cases[i][0]);
        if (cases[i][1])
            sa[na++] = A(MGE_KEY_end, cases[i][2]);
        sa[na++] = A(MGE_KEY_step, cases[i][3]);
        char nm[16];
        snprintf(nm, sizeof nm, "sl%zu", i);
        int v = ok_node(g, nm, MGE_OP_SLICE, 1, &s10, na, sa);
        int64_t want = py_slice_len(10, cases[i][0], (int)cases[i][1], cases[i][2], cases[i][3]);
        CHECK(has_shape(g, v, MGE_F32, 2, (int64_t[]){2, want}));
    }
    mge_attr s0[2] = {A(MGE_KEY_axis, 0), A(MGE_KEY_step, 0)};
    expect_fail(g, "sl_step", MGE_OP_SLICE, 1, &s10, 2, s0, MGE_ERR_INVALID, "step");
    /* the batch survives a slice along another axis */
    mge_attr sb[3] = {A(MGE_KEY_axis, 1), A(MGE_KEY_start, 1), A(MGE_KEY_end, 2)};
    SHAPE(g, ok_node(g, "slb", MGE_OP_SLICE, 1, &x, 3, sb), MGE_F32, N, 1, 3, 4);
    mge_graph_free(g);
}

/* ------------------------------------------------------------------ losses */

static void test_loss(void)
{
    mge_graph *g = mge_graph_new();
    int lg = input(g, "logits", MGE_F32, 2, (int64_t[]){N, 10});
    int l64 = input(g, "l64", MGE_I64, 1, (int64_t[]){N});
    int lf = input(g, "lf", MGE_F32, 1, (int64_t[]){N});
    int l3 = input(g, "l3", MGE_I32, 1, (int64_t[]){3});
    int ce = ok_node(g, "ce", MGE_OP_CROSS_ENTROPY, 2, (int[]){lg, l64}, 0, NULL);
    SCALAR(g, ce, MGE_F32);
    expect_fail(g, "cef", MGE_OP_CROSS_ENTROPY, 2, (int[]){lg, lf}, 0, NULL, MGE_ERR_SHAPE, "label f32[1]");
    expect_fail(g, "ce3", MGE_OP_CROSS_ENTROPY, 2, (int[]){lg, l3}, 0, NULL, MGE_ERR_SHAPE, "i32[3]");
    int t = input(g, "t", MGE_F32, 2, (int64_t[]){N, 10});
    SCALAR(g, ok_node(g, "mse", MGE_OP_MSE, 2, (int[]){lg, t}, 0, NULL), MGE_F32);
    int t9 = input(g, "t9", MGE_F32, 2, (int64_t[]){N, 9});
    expect_fail(g, "mse2", MGE_OP_MSE, 2, (int[]){lg, t9}, 0, NULL, MGE_ERR_SHAPE, "same dtype and shape");
    mge_graph_free(g);
}

int main(void)
{
    RUN(test_lenet);
    RUN(test_conv);
    RUN(test_linear);
    RUN(test_matmul);
    RUN(test_norm);
    RUN(test_elementwise);
    RUN(test_pool);
    RUN(test_reduce);
    RUN(test_shape_ops);
    RUN(test_loss);
    return unit_done();
}
