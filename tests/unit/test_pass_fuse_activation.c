/* test_pass_fuse_activation.c — the fuse-activation pass and the fused
 * kernels: (a) the graph change on small models (what fuses, what must
 * not), (b) the numbers of each model before and after the pass through
 * the executor, on the cpu and ref backends, and resnet18 / mobilenet_v2
 * after -O2's folding, (c) the cpu fused_conv2d / fused_linear kernels
 * against the ref ones over odd shapes, every activation, with and
 * without bias and residual, on every conv and linear path, at 1 and 2
 * threads (and the same bits at 1, 2 and 3 threads). */
#include "internal.h"
#include "unit.h"
#include "unit_graph.h"

#include <stdint.h>

static mge_rng rng;
static mge_pool *pool2;

/* Params from seed; batchnorm statistics away from the identity. */
static void init_model(mge_graph *g, uint64_t seed)
{
    mge_error err;
    mge_error_clear(&err);
    CHECK_OK(mge_graph_init_params(g, seed, &err), err);
    static const float lo[4] = {0.5f, -0.5f, -0.5f, 0.5f}, hi[4] = {1.5f, 0.5f, 0.5f, 2.0f};
    for (int i = 0; i < g->nnodes; i++) {
        const mge_node *n = &g->nodes[i];
        if (n->op != MGE_OP_BATCHNORM)
            continue;
        for (int k = 1; k <= 4; k++) {
            mge_value *v = &g->values[n->in[k]];
            if (v->data && v->dtype == MGE_F32)
                ug_uniform(v->data, &rng, lo[k - 1], hi[k - 1]);
        }
    }
}

static int has(const mge_graph *g, const char *name)
{
    return mge_graph_find(g, name) >= 0;
}

static int64_t act_of(const mge_node *n)
{
    const mge_attr *a = mge_node_attr(n, MGE_KEY_act);
    return a && a->n == 1 ? a->i[0] : -2;
}

static int input_named(const mge_graph *g, const mge_node *n, int k, const char *name)
{
    return n && k < n->nin && strcmp(g->values[n->in[k]].name, name) == 0;
}

/* ---------------------------------------------------------------- running models */

/* Inputs 2 * N(0, 1), drawn from their names. */
static const ug_fill in_fill = {2.0f, 0, 0, 0};

/* Runs fuse-activation over g (after `pre`, when given) and checks the
 * numbers stay, on cpu at 1 and 2 threads and on ref; returns *changed.
 * *maxdiff (may be NULL) gets the largest cpu difference at 1 thread. */
static int apply(mge_graph **g, const char *pre, int64_t batch, double *maxdiff)
{
    mge_error err;
    mge_error_clear(&err);
    int changed = -1;
    if (pre)
        CHECK_OK(mge_passes_run_list(g, pre, &changed, &err), err);
    ug_outs before[3] = {{0}}, after[3] = {{0}};
    static const char *const be[3] = {"cpu", "cpu", "ref"};
    static const int th[3] = {1, 2, 1};
    for (int k = 0; k < 3; k++)
        ug_run(*g, be[k], th[k], batch, in_fill, &before[k]);
    CHECK_OK(mge_passes_run_list(g, "fuse-activation", &changed, &err), err);
    CHECK_OK(mge_graph_validate(*g, &err), err);
    for (int k = 0; k < 3; k++) {
        ug_run(*g, be[k], th[k], batch, in_fill, &after[k]);
        double d = ug_check_close(&before[k], &after[k], 1e-5);
        if (k == 0 && maxdiff)
            *maxdiff = d;
        ug_outs_free(&before[k]);
        ug_outs_free(&after[k]);
    }
    return changed;
}

/* The text form of g parses back to a graph that prints the same. */
static void check_roundtrip(const mge_graph *g)
{
    mge_buf t = {0}, t2 = {0};
    mge_error err;
    mge_error_clear(&err);
    CHECK_OK(mge_text_print(g, &t, &err), err);
    mge_graph *back = NULL;
    if (t.p)
        CHECK_OK(mge_text_parse(t.p, t.n, ".", &back, &err), err);
    CHECK(back && back->nnodes == g->nnodes && back->noutputs == g->noutputs);
    if (back) {
        CHECK_OK(mge_text_print(back, &t2, &err), err);
        CHECK_MSG(t.n == t2.n && t.p && t2.p && memcmp(t.p, t2.p, t.n) == 0, "text differs:\n%.*s\n---\n%.*s",
                  (int)t.n, t.p ? t.p : "", (int)t2.n, t2.p ? t2.p : "");
    }
    mge_graph_free(back);
    mge_buf_free(&t);
    mge_buf_free(&t2);
}

/* Nothing to fuse: *changed = 0, the same graph object, the same bytes. */
static void check_noop(const char *src)
{
    mge_graph *g = ug_parse(src);
    if (!g)
        return;
    init_model(g, 5);
    ug_check_noop(g, "fuse-activation", src);
}

/* ---------------------------------------------------------------- (a, b) graph change and numbers */

static void test_conv_relu(void)
{
    mge_graph *g = ug_parse("input x : f32[N,3,9,7]\n"
                         "conv1 = conv2d(x, out=5, kernel=3, pad=1)\n"
                         "r1 = relu(conv1)\n"
                         "output r1\n");
    if (!g)
        return;
    init_model(g, 1);
    double d = -1;
    CHECK(apply(&g, NULL, 2, &d) == 1);
    CHECK(d == 0);   /* the same cpu kernels, the same bits */
    CHECK(g->nnodes == 1 && ug_count_op(g, MGE_OP_FUSED_CONV2D) == 1);
    const mge_node *n = ug_producer(g, "r1");
    CHECK(n && n->op == MGE_OP_FUSED_CONV2D && strcmp(n->name, "r1") == 0);
    CHECK(n && act_of(n) == MGE_OP_RELU && mge_node_int(n, MGE_KEY_bias, 0) == 1 &&
          mge_node_int(n, MGE_KEY_residual, 1) == 0 && mge_node_int(n, MGE_KEY_out, 0) == 5);
    CHECK(n && n->nin == 3 && input_named(g, n, 0, "x") && input_named(g, n, 1, "conv1.weight") &&
          input_named(g, n, 2, "conv1.bias"));
    CHECK(!has(g, "conv1") && g->noutputs == 1 && strcmp(g->values[g->outputs[0]].name, "r1") == 0);
    check_roundtrip(g);
    /* a second run has nothing left */
    mge_error err;
    mge_error_clear(&err);
    int changed = -1;
    CHECK_OK(mge_passes_run_list(&g, "fuse-activation", &changed, &err), err);
    CHECK(changed == 0);
    mge_graph_free(g);
}

/* conv + add + relu with the residual on either side of the add. */
static void residual_case(int conv_first)
{
    char src[512];
    snprintf(src, sizeof src,
             "input x : f32[N,4,6,5]\n"
             "conv1 = conv2d(x, out=4, kernel=3, pad=1, bias=false)\n"
             "s = add(%s)\n"
             "r = relu(s)\n"
             "output r\n",
             conv_first ? "conv1, x" : "x, conv1");
    mge_graph *g = ug_parse(src);
    if (!g)
        return;
    init_model(g, 2);
    double d = -1;
    CHECK(apply(&g, NULL, 3, &d) == 1);
    CHECK(d == 0);
    CHECK(g->nnodes == 1);
    const mge_node *n = ug_producer(g, "r");
    CHECK(n && n->op == MGE_OP_FUSED_CONV2D && strcmp(n->name, "r") == 0 && act_of(n) == MGE_OP_RELU);
    CHECK(n && mge_node_int(n, MGE_KEY_bias, 1) == 0 && mge_node_int(n, MGE_KEY_residual, 0) == 1);
    CHECK(n && n->nin == 3 && input_named(g, n, 2, "x"));
    CHECK(!has(g, "conv1") && !has(g, "s"));
    check_roundtrip(g);
    mge_graph_free(g);
}

static void test_conv_add_relu(void)
{
    residual_case(1);
    residual_case(0);
}

static void test_linear_gelu(void)
{
    mge_graph *g = ug_parse("input x : f32[N,7,13]\n"
                         "fc = linear(x, out=9)\n"
                         "act = gelu(fc)\n"
                         "fc2 = linear(act, out=9, bias=false)\n"
                         "y = add(act, fc2)\n"
                         "output y\n");
    if (!g)
        return;
    init_model(g, 3);
    CHECK(apply(&g, NULL, 3, NULL) == 1);
    CHECK(g->nnodes == 2 && ug_count_op(g, MGE_OP_FUSED_LINEAR) == 2);
    const mge_node *a = ug_producer(g, "act"), *y = ug_producer(g, "y");
    CHECK(a && a->op == MGE_OP_FUSED_LINEAR && act_of(a) == MGE_OP_GELU && a->nin == 3);
    /* residual only, no activation; the residual is the first fused node's output */
    CHECK(y && y->op == MGE_OP_FUSED_LINEAR && act_of(y) == -1 && mge_node_int(y, MGE_KEY_residual, 0) == 1);
    CHECK(y && y->nin == 3 && input_named(g, y, 0, "act") && input_named(g, y, 2, "act"));
    check_roundtrip(g);
    mge_graph_free(g);
}

static void test_leaky_grouped(void)
{
    /* leaky_relu keeps its alpha; grouped and depthwise convs fuse too */
    mge_graph *g = ug_parse("input x : f32[N,6,8,8]\n"
                         "c1 = conv2d(x, out=6, kernel=3, pad=1, groups=6)\n"
                         "a1 = leaky_relu(c1, alpha=0.2)\n"
                         "c2 = conv2d(a1, out=4, kernel=1, groups=2, bias=false)\n"
                         "a2 = hswish(c2)\n"
                         "c3 = conv2d(a2, out=4, kernel=3, stride=2, pad=1, groups=4)\n"
                         "a3 = sigmoid(c3)\n"
                         "output a3\n");
    if (!g)
        return;
    init_model(g, 4);
    CHECK(apply(&g, NULL, 2, NULL) == 1);
    CHECK(g->nnodes == 3 && ug_count_op(g, MGE_OP_FUSED_CONV2D) == 3);
    const mge_node *n1 = ug_producer(g, "a1"), *n2 = ug_producer(g, "a2"), *n3 = ug_producer(g, "a3");
    CHECK(n1 && act_of(n1) == MGE_OP_LEAKY_RELU && mge_node_float(n1, MGE_KEY_alpha, 0) == 0.2);
    CHECK(n1 && mge_node_int(n1, MGE_KEY_groups, 0) == 6);
    CHECK(n2 && act_of(n2) == MGE_OP_HSWISH && mge_node_int(n2, MGE_KEY_groups, 0) == 2);
    CHECK(n3 && act_of(n3) == MGE_OP_SIGMOID && mge_node_ints(n3, MGE_KEY_stride, 0, 0) == 2);
    check_roundtrip(g);
    mge_graph_free(g);
}

static void test_every_act(void)
{
    static const char *const acts[] = {"relu", "relu6", "leaky_relu", "sigmoid", "tanh",
                                       "gelu", "silu",  "hswish",     "hsigmoid"};
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++) {
        char src[512];
        snprintf(src, sizeof src,
                 "input x : f32[N,3,5,6]\n"
                 "input y : f32[N,4,5,6]\n"
                 "c = conv2d(x, out=4, kernel=3, pad=1)\n"
                 "s = add(y, c)\n"
                 "a = %s(s)\n"
                 "output a\n",
                 acts[i]);
        mge_graph *g = ug_parse(src);
        if (!g)
            continue;
        init_model(g, 10 + i);
        double d = -1;
        CHECK(apply(&g, NULL, 2, &d) == 1);
        CHECK_MSG(d == 0, "%s: fused and unfused cpu results differ by %g", acts[i], d);   /* cpu_act.h */
        const mge_node *n = ug_producer(g, "a");
        int op = mge_op_lookup(acts[i], strlen(acts[i]));
        CHECK_MSG(g->nnodes == 1 && n && n->op == MGE_OP_FUSED_CONV2D && act_of(n) == op && n->nin == 4 &&
                      input_named(g, n, 3, "y"),
                  "%s", acts[i]);
        mge_graph_free(g);
    }
}

static void test_partial_chains(void)
{
    /* the add's output is read twice: conv + add fuse, the relu stays;
     * the second add has a broadcast operand: only its relu-less conv stays */
    mge_graph *g = ug_parse("input x : f32[N,4,5,5]\n"
                         "const k : f32[4,1,1] = [1, 2, 3, 4]\n"
                         "c1 = conv2d(x, out=4, kernel=1)\n"
                         "s1 = add(c1, x)\n"
                         "r1 = relu(s1)\n"
                         "c2 = conv2d(s1, out=4, kernel=1)\n"
                         "s2 = add(c2, k)\n"
                         "r2 = relu(s2)\n"
                         "output r1, r2\n");
    if (!g)
        return;
    init_model(g, 5);
    CHECK(apply(&g, NULL, 2, NULL) == 1);
    const mge_node *s1 = ug_producer(g, "s1");
    CHECK(s1 && s1->op == MGE_OP_FUSED_CONV2D && act_of(s1) == -1 && mge_node_int(s1, MGE_KEY_residual, 0) == 1);
    CHECK(ug_count_op(g, MGE_OP_RELU) == 2 && ug_count_op(g, MGE_OP_CONV2D) == 1 && ug_count_op(g, MGE_OP_ADD) == 1);
    CHECK(g->nnodes == 5);
    mge_graph_free(g);

    /* add(conv, conv): the first conv takes the add, the second is its residual */
    g = ug_parse("input x : f32[N,4,5,5]\n"
              "ca = conv2d(x, out=8, kernel=3, pad=1)\n"
              "cb = conv2d(x, out=8, kernel=1)\n"
              "s = add(cb, ca)\n"
              "r = relu(s)\n"
              "output r\n");
    if (!g)
        return;
    init_model(g, 6);
    CHECK(apply(&g, NULL, 2, NULL) == 1);
    const mge_node *r = ug_producer(g, "r");
    CHECK(g->nnodes == 2 && ug_count_op(g, MGE_OP_CONV2D) == 1 && r && r->op == MGE_OP_FUSED_CONV2D);
    CHECK(r && input_named(g, r, 1, "ca.weight") && input_named(g, r, 3, "cb"));
    mge_graph_free(g);

    /* the conv output is a graph output: the relu alone cannot fuse, the
     * next conv's can */
    g = ug_parse("input x : f32[N,2,4,4]\n"
              "c1 = conv2d(x, out=3, kernel=3, pad=1)\n"
              "r1 = tanh(c1)\n"
              "c2 = conv2d(r1, out=3, kernel=1)\n"
              "r2 = silu(c2)\n"
              "output c1, r2\n");
    if (!g)
        return;
    init_model(g, 7);
    CHECK(apply(&g, NULL, 2, NULL) == 1);
    CHECK(ug_count_op(g, MGE_OP_TANH) == 1 && ug_count_op(g, MGE_OP_CONV2D) == 1 && ug_count_op(g, MGE_OP_FUSED_CONV2D) == 1);
    CHECK(has(g, "c1") && !has(g, "c2") && ug_producer(g, "r2") && act_of(ug_producer(g, "r2")) == MGE_OP_SILU);
    mge_graph_free(g);
}

static void test_noop(void)
{
    /* the conv output has two uses */
    check_noop("input x : f32[N,3,6,6]\n"
               "c = conv2d(x, out=4, kernel=3, pad=1)\n"
               "a = relu6(c)\n"
               "b = neg(c)\n"
               "output a, b\n");
    /* a graph with a loss is left to training */
    check_noop("input x : f32[N,6]\n"
               "input label : i32[N]\n"
               "fc = linear(x, out=4)\n"
               "act = relu(fc)\n"
               "loss = cross_entropy(act, label)\n"
               "output act\n"
               "minimize loss\n");
    /* nothing after the layer; an activation fusion does not cover (exp);
     * a broadcast add; matmul is no layer */
    check_noop("input x : f32[N,3,6,6]\n"
               "input m : f32[N,8]\n"
               "const k : f32[4,1,1] = [1, 2, 3, 4]\n"
               "c = conv2d(x, out=4, kernel=3, pad=1)\n"
               "d = conv2d(x, out=4, kernel=3, pad=1)\n"
               "e = exp(d)\n"
               "f = conv2d(x, out=4, kernel=3, pad=1)\n"
               "h = add(f, k)\n"
               "mm = matmul(m, m, transpose_b=true)\n"
               "r = relu(mm)\n"
               "output c, e, h, r\n");
}

/* ---------------------------------------------------------------- real nets */

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    CHECK_MSG(f != NULL, "cannot open %s", path);
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)len + 1);
    *n = b ? fread(b, 1, (size_t)len, f) : 0;
    if (b)
        b[*n] = 0;
    fclose(f);
    return b;
}

/* -O2's folding then fuse-activation: no `act` op is left, the layers are
 * fused (but the few whose output is some add's residual). */
static void check_net(const char *path, int act, uint64_t seed)
{
    size_t n = 0;
    char *src = slurp(path, &n);
    if (!src)
        return;
    char *p = strstr(src, "224,224]");   /* 32x32 images keep the test fast */
    CHECK(p != NULL);
    if (p)
        memcpy(p, " 32, 32]", 8);
    mge_graph *g = NULL;
    mge_error err;
    mge_error_clear(&err);
    CHECK_OK(mge_text_parse(src, n, "samples/nets", &g, &err), err);
    free(src);
    if (!g)
        return;
    init_model(g, seed);
    int nlayers = ug_count_op(g, MGE_OP_CONV2D) + ug_count_op(g, MGE_OP_LINEAR);
    CHECK(ug_count_op(g, act) > 0);
    CHECK(apply(&g, "strip-training,fold-bn", 1, NULL) == 1);
    CHECK_MSG(ug_count_op(g, act) == 0, "%s: %d %s left", path, ug_count_op(g, act), mge_op_info(act)->name);
    int fused = ug_count_op(g, MGE_OP_FUSED_CONV2D);
    CHECK(fused > 0 && ug_count_op(g, MGE_OP_CONV2D) + ug_count_op(g, MGE_OP_LINEAR) + fused == nlayers);
    CHECK(ug_count_op(g, MGE_OP_ADD) == 0);
    mge_graph_free(g);
}

static void test_resnet18(void)
{
    check_net("samples/nets/resnet18.mgt", MGE_OP_RELU, 11);
}

static void test_mobilenet_v2(void)
{
    check_net("samples/nets/mobilenet_v2.mgt", MGE_OP_RELU6, 12);
}

/* ---------------------------------------------------------------- (c) kernels */

static const int all_acts[] = {-1,         MGE_OP_RELU, MGE_OP_RELU6, MGE_OP_LEAKY_RELU, MGE_OP_SIGMOID,
                               MGE_OP_TANH, MGE_OP_GELU, MGE_OP_SILU,  MGE_OP_HSWISH,     MGE_OP_HSIGMOID};
#define NACTS ((int)(sizeof all_acts / sizeof all_acts[0]))

/* Inputs x, weight[, bias][, residual] of the given shapes (the residual
 * takes the output's); 0 when the graph refuses the node. */
static int kcase_make(ug_kcase *t, int op, int nx, const int64_t *xd, int nw, const int64_t *wd, int bias, int res,
                      int nattr, const mge_attr *attrs)
{
    mge_error err = {0};
    memset(t, 0, sizeof *t);
    t->g = mge_graph_new();
    int ids[4], nin = 0;
    int64_t bd[1] = {wd[0]};
    ids[nin++] = mge_graph_add_value(t->g, "x", MGE_VAL_INPUT, MGE_F32, nx, xd, &err);
    ids[nin++] = mge_graph_add_value(t->g, "w", MGE_VAL_PARAM, MGE_F32, nw, wd, &err);
    if (bias)
        ids[nin++] = mge_graph_add_value(t->g, "b", MGE_VAL_PARAM, MGE_F32, 1, bd, &err);
    /* the output's shape: the plain layer infers it */
    mge_attr plain[16];
    int np = 0;
    for (int i = 0; i < nattr; i++)
        if (attrs[i].key != MGE_KEY_act && attrs[i].key != MGE_KEY_alpha && attrs[i].key != MGE_KEY_residual)
            plain[np++] = attrs[i];
    const char *pn[1] = {"plain"};
    int pl = mge_graph_add_node(t->g, "plain", op == MGE_OP_FUSED_CONV2D ? MGE_OP_CONV2D : MGE_OP_LINEAR, nin, ids,
                                np, plain, 1, pn, &err);
    if (pl < 0) {
        mge_graph_free(t->g);
        t->g = NULL;
        return 0;
    }
    const mge_value *pv = &t->g->values[t->g->nodes[pl].out[0]];
    if (res)
        ids[nin++] = mge_graph_add_value(t->g, "r", MGE_VAL_INPUT, MGE_F32, pv->ndim, pv->dims, &err);
    if (!ug_kcase_node(t, op, nin, ids, nattr, attrs))
        return 0;
    for (int i = 0; i < nin; i++) {
        const mge_value *v = &t->g->values[ids[i]];
        CHECK_OK(mge_tensor_alloc(&t->in[i], MGE_F32, v->ndim, v->dims, &err), err);
        float r = i == 3 || (i == 2 && !bias) ? 3.0f : 1.0f;   /* the residual spans the activations' kinks */
        ug_uniform(&t->in[i], &rng, -r, r);
    }
    return 1;
}

static int ncases[2];   /* conv, linear cases compared */

/* cpu against ref, with 1 and 2 threads (and 3 when p3), which must give
 * the same bits; every output element is written. */
static void check_kcase(ug_kcase *t, const char *desc, mge_pool *p3)
{
    const mge_node *n = &t->g->nodes[t->node];
    const mge_kernel *kr = mge_backend_kernel(mge_backend_ref(), n->op, MGE_F32);
    const mge_kernel *kc = mge_backend_kernel(mge_backend_cpu(), n->op, MGE_F32);
    CHECK(kr && kc && kr->run);
    if (!kr || !kc || !kr->run)
        return;
    CHECK_MSG(kc->run != kr->run, "%s: the cpu backend has no kernel of its own", desc);
    mge_error err = {0};
    mge_tensor *in[4];
    for (int i = 0; i < t->nin; i++)
        in[i] = &t->in[i];
    mge_tensor want, got[3];
    CHECK_OK(mge_tensor_copy(&want, &t->out, &err), err);
    CHECK_OK(ug_run_kernel(kr, NULL, n, in, &want, &err), err);
    mge_pool *ps[3] = {NULL, pool2, p3};
    int np = p3 ? 3 : 2;
    for (int p = 0; p < np; p++) {
        CHECK_OK(mge_tensor_copy(&got[p], &t->out, &err), err);
        float *gd = got[p].data;
        for (int64_t i = 0; i < mge_tensor_numel(&got[p]); i++)
            gd[i] = 12345.0f;   /* poison */
        mge_status s = ug_run_kernel(kc, ps[p], n, in, &got[p], &err);
        CHECK_MSG(s == MGE_OK, "%s: %s", desc, err.msg);
        char what[300];
        snprintf(what, sizeof what, "%s threads=%d", desc, mge_pool_size(ps[p]));
        CHECK_MSG(ug_compare(what, &got[p], &want, 1e-4), "%s", what);
        if (p)
            CHECK_MSG(memcmp(got[0].data, got[p].data, got[0].nbytes) == 0, "%s: differs from 1 thread", what);
    }
    for (int p = 0; p < np; p++)
        mge_tensor_free(&got[p]);
    mge_tensor_free(&want);
    ncases[n->op == MGE_OP_FUSED_LINEAR]++;
}

static mge_attr a_ints(int key, int64_t v0, int64_t v1)
{
    mge_attr a = {key, 2, {v0, v1}, 0};
    return a;
}

/* N, C, H, W, O, k, s, p, d, groups */
static int conv_kcase(const int64_t *c, int bias, int res, int act, mge_pool *p3)
{
    int64_t xd[4] = {c[0], c[1], c[2], c[3]}, wd[4] = {c[4], c[1] / c[9], c[5], c[5]};
    mge_attr at[10] = {A(MGE_KEY_out, c[4]),      a_ints(MGE_KEY_kernel, c[5], c[5]),
                       A(MGE_KEY_stride, c[6]),   a_ints(MGE_KEY_pad, c[7], c[7]),
                       A(MGE_KEY_dilation, c[8]), A(MGE_KEY_groups, c[9]),
                       A(MGE_KEY_bias, bias),     A(MGE_KEY_residual, res),
                       A(MGE_KEY_act, act),       {MGE_KEY_alpha, 1, {0}, 0.15}};
    ug_kcase t;
    if (!kcase_make(&t, MGE_OP_FUSED_CONV2D, 4, xd, 4, wd, bias, res, 10, at))
        return 0;
    char desc[256];
    snprintf(desc, sizeof desc, "fused_conv2d x[%lld,%lld,%lld,%lld] out=%lld k=%lld s=%lld p=%lld d=%lld g=%lld "
             "bias=%d residual=%d act=%s",
             (long long)c[0], (long long)c[1], (long long)c[2], (long long)c[3], (long long)c[4], (long long)c[5],
             (long long)c[6], (long long)c[7], (long long)c[8], (long long)c[9], bias, res, mge_attr_op_name(act));
    check_kcase(&t, desc, p3);
    ug_kcase_free(&t);
    return 1;
}

static void test_kernel_conv(void)
{
    static const int64_t shapes[][10] = {
        /* N, C, H, W, O, k, s, p, d, groups */
        {2, 5, 9, 7, 6, 3, 1, 1, 1, 1},      /* im2col, one column block */
        {1, 6, 11, 9, 4, 3, 2, 1, 1, 2},     /* grouped, strided */
        {2, 7, 5, 13, 5, 1, 1, 0, 1, 1},     /* 1x1 direct */
        {1, 4, 9, 9, 6, 1, 1, 0, 1, 2},      /* grouped 1x1 */
        {1, 8, 13, 11, 8, 3, 1, 1, 1, 8},    /* depthwise 3x3, stride 1 */
        {2, 8, 13, 11, 8, 3, 2, 1, 1, 8},    /* depthwise 3x3, stride 2 */
        {1, 5, 10, 9, 5, 5, 1, 2, 1, 5},     /* depthwise 5x5 */
        {1, 5, 12, 11, 5, 3, 2, 2, 2, 5},    /* depthwise, dilated, stride 2 */
        {1, 3, 8, 8, 6, 3, 3, 1, 1, 3},      /* depthwise multiplier 2, stride 3 */
        {1, 3, 17, 15, 7, 7, 2, 3, 1, 1},    /* stem-like 7x7 */
        {1, 1, 1, 1, 1, 1, 1, 0, 1, 1},      /* all ones */
    };
    int ns = (int)(sizeof shapes / sizeof shapes[0]);
    for (int s = 0; s < ns; s++) {
        /* every act on every shape, the bias and residual in turn */
        for (int a = 0; a < NACTS; a++)
            CHECK(conv_kcase(shapes[s], (a + s) % 2, (a / 2 + s) % 2, all_acts[a], NULL));
        for (int br = 0; br < 4; br++)
            CHECK(conv_kcase(shapes[s], br & 1, br >> 1, MGE_OP_RELU6, NULL));
    }
}

static void test_kernel_conv_blocks(void)
{
    /* shapes the gemm cuts into blocks (columns, rows): the epilogue on
     * each block, the same bits at 1, 2 and 3 threads */
    mge_pool *p3 = mge_pool_create(3);
    static const int64_t shapes[][10] = {
        {1, 32, 28, 28, 64, 3, 1, 1, 1, 1},    /* im2col, column blocks */
        {1, 16, 45, 45, 96, 3, 2, 1, 1, 1},    /* strided, block edge mid-row */
        {1, 128, 7, 7, 256, 3, 1, 1, 1, 1},    /* 7x7 output: row blocks */
        {2, 64, 28, 28, 128, 1, 1, 0, 1, 1},   /* 1x1 direct, column blocks */
        {2, 320, 7, 7, 640, 1, 1, 0, 1, 1},    /* 1x1 direct, row blocks */
        {1, 96, 56, 56, 96, 3, 1, 1, 1, 96},   /* depthwise, many planes */
    };
    static const int acts[] = {MGE_OP_RELU, MGE_OP_SILU, -1, MGE_OP_GELU, MGE_OP_HSWISH, MGE_OP_SIGMOID};
    for (int s = 0; s < (int)(sizeof shapes / sizeof shapes[0]); s++)
        CHECK(conv_kcase(shapes[s], s % 2, 1, acts[s], p3));
    mge_pool_free(p3);
}

/* rows (leading dims of x), in, out */
static int linear_kcase(int nx, const int64_t *lead, int64_t K, int64_t O, int bias, int res, int act, mge_pool *p3)
{
    int64_t xd[4], wd[2] = {O, K};
    for (int i = 0; i < nx - 1; i++)
        xd[i] = lead[i];
    xd[nx - 1] = K;
    mge_attr at[5] = {A(MGE_KEY_out, O), A(MGE_KEY_bias, bias), A(MGE_KEY_residual, res),
                      A(MGE_KEY_act, act), {MGE_KEY_alpha, 1, {0}, 0.3}};
    ug_kcase t;
    if (!kcase_make(&t, MGE_OP_FUSED_LINEAR, nx, xd, 2, wd, bias, res, 5, at))
        return 0;
    int64_t M = 1;
    for (int i = 0; i < nx - 1; i++)
        M *= lead[i];
    char desc[200];
    snprintf(desc, sizeof desc, "fused_linear M=%lld (rank %d) K=%lld O=%lld bias=%d residual=%d act=%s",
             (long long)M, nx, (long long)K, (long long)O, bias, res, mge_attr_op_name(act));
    check_kcase(&t, desc, p3);
    ug_kcase_free(&t);
    return 1;
}

static void test_kernel_linear(void)
{
    static const struct {
        int nx;
        int64_t lead[2], K, O;
    } shapes[] = {
        {2, {1}, 13, 7},        /* gemv */
        {2, {3}, 37, 33},       /* gemv, 3 rows */
        {2, {4}, 64, 10},       /* gemv, 4 rows */
        {1, {0}, 9, 5},         /* 1-D x: one row */
        {2, {5}, 13, 7},        /* sgemm */
        {3, {2, 3}, 11, 17},    /* sgemm over leading dims */
        {2, {37}, 29, 3},       /* sgemm, few outputs */
        {2, {32}, 50, 20},      /* small batch on our sgemm, transposed (cpu_gemm.c lin_t) */
        {3, {4, 6}, 19, 16},    /* the same over leading dims, 24 rows */
    };
    int ns = (int)(sizeof shapes / sizeof shapes[0]);
    for (int s = 0; s < ns; s++) {
        for (int a = 0; a < NACTS; a++)
            CHECK(linear_kcase(shapes[s].nx, shapes[s].lead, shapes[s].K, shapes[s].O, (a + s) % 2, (a / 2 + s) % 2,
                               all_acts[a], NULL));
        for (int br = 0; br < 4; br++)
            CHECK(linear_kcase(shapes[s].nx, shapes[s].lead, shapes[s].K, shapes[s].O, br & 1, br >> 1,
                               MGE_OP_LEAKY_RELU, NULL));
    }
    mge_pool *p3 = mge_pool_create(3);
    static const int64_t big[][3] = {
        /* rows, in, out */
        {64, 512, 1024},   /* column blocks */
        {256, 512, 64},    /* row blocks */
        {2, 4096, 2048},   /* sgemv, blocks of output features */
    };
    static const int acts[] = {MGE_OP_RELU, MGE_OP_TANH, MGE_OP_HSIGMOID};
    for (int i = 0; i < 3; i++)
        CHECK(linear_kcase(2, big[i], big[i][1], big[i][2], 1, 1, acts[i], p3));
    mge_pool_free(p3);
}

static void test_kernel_errors(void)
{
    /* inputs that do not match bias/residual: an error, not a read past them */
    int64_t xd[2] = {2, 3}, wd[2] = {4, 3};
    mge_attr at[4] = {A(MGE_KEY_out, 4), A(MGE_KEY_bias, 1), A(MGE_KEY_residual, 1),
                      A(MGE_KEY_act, MGE_OP_RELU)};
    ug_kcase t;
    CHECK(kcase_make(&t, MGE_OP_FUSED_LINEAR, 2, xd, 2, wd, 1, 1, 4, at));
    if (!t.g)
        return;
    mge_node n = t.g->nodes[t.node];
    n.nin = 3;   /* residual=true but no residual */
    mge_tensor *in[4] = {&t.in[0], &t.in[1], &t.in[2], &t.in[3]};
    mge_error err = {0};
    const mge_backend *bes[2] = {mge_backend_ref(), mge_backend_cpu()};
    for (int b = 0; b < 2; b++) {
        const mge_kernel *k = mge_backend_kernel(bes[b], MGE_OP_FUSED_LINEAR, MGE_F32);
        CHECK(k && ug_run_kernel(k, NULL, &n, in, &t.out, &err) == MGE_ERR_INVALID);
    }
    ug_kcase_free(&t);
}

static void test_kernel_coverage(void)
{
    CHECK(ncases[0] >= 100 && ncases[1] >= 90);
}

int main(int argc, char **argv)
{
    mge_rng_seed(&rng, 20261201);
    pool2 = mge_pool_create(2);
    RUN(test_conv_relu);
    RUN(test_conv_add_relu);
    RUN(test_linear_gelu);
    RUN(test_leaky_grouped);
    RUN(test_every_act);
    RUN(test_partial_chains);
    RUN(test_noop);
    RUN(test_resnet18);
    RUN(test_mobilenet_v2);
    RUN(test_kernel_conv);
    RUN(test_kernel_conv_blocks);
    RUN(test_kernel_linear);
    RUN(test_kernel_errors);
    RUN(test_kernel_coverage);
    mge_pool_free(pool2);
    return unit_rerun_baseline(argv, "test_pass_fuse_activation", unit_done());
}
