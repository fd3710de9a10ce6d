/* test_pass_fold.c — strip-training, fold-bn and fold-scale: the graph
 * change on small models, the numerics (the model before and after on the
 * same random inputs, eval mode), no-ops that leave the file bytes as they
 * were, and resnet18 / mobilenet_v2 losing every batchnorm and dropout. */
#include "unit_graph.h"

#include <stdint.h>

/* Params from seed, then batchnorm statistics and affine terms far from
 * their identity defaults so that folding them is visible in the numbers. */
static void init_model(mge_graph *g, uint64_t seed)
{
    mge_error err;
    mge_error_clear(&err);
    CHECK_OK(mge_graph_init_params(g, seed, &err), err);
    mge_rng r;
    mge_rng_seed(&r, seed + 99);
    static const float lo[4] = {0.5f, -0.5f, -0.5f, 0.5f}, hi[4] = {1.5f, 0.5f, 0.5f, 2.0f};
    for (int i = 0; i < g->nnodes; i++) {
        const mge_node *n = &g->nodes[i];
        if (n->op != MGE_OP_BATCHNORM)
            continue;
        for (int k = 1; k <= 4; k++) {
            mge_value *v = &g->values[n->in[k]];
            if (v->data && v->dtype == MGE_F32)
                ug_uniform(v->data, &r, lo[k - 1], hi[k - 1]);
        }
    }
}

/* Runs pass `name` over g and checks the numbers stay; returns *changed. */
static int apply(mge_graph **g, const char *names, int64_t batch)
{
    mge_error err;
    mge_error_clear(&err);
    ug_fill normal = {1, 0, 0, 0};   /* normal(0, 1), seeded from the input names */
    ug_outs before = {0}, after = {0};
    ug_run(*g, NULL, 1, batch, normal, &before);
    int changed = -1;
    CHECK_OK(mge_passes_run_list(g, names, &changed, &err), err);
    CHECK_OK(mge_graph_validate(*g, &err), err);
    ug_run(*g, NULL, 1, batch, normal, &after);
    ug_check_close(&before, &after, 1e-4);
    ug_outs_free(&before);
    ug_outs_free(&after);
    return changed;
}

static int has(const mge_graph *g, const char *name)
{
    return mge_graph_find(g, name) >= 0;
}

static int output_named(const mge_graph *g, int i, const char *name)
{
    return i < g->noutputs && strcmp(g->values[g->outputs[i]].name, name) == 0;
}

/* The text form of g parses back with as many nodes. */
static void check_text_roundtrip(const mge_graph *g)
{
    mge_buf t = {0};
    mge_error err;
    mge_error_clear(&err);
    CHECK_OK(mge_text_print(g, &t, &err), err);
    mge_graph *back = NULL;
    if (t.p)
        CHECK_OK(mge_text_parse(t.p, t.n, ".", &back, &err), err);
    CHECK(back && back->nnodes == g->nnodes && back->ninputs == g->ninputs && back->noutputs == g->noutputs);
    mge_graph_free(back);
    mge_buf_free(&t);
}

/* The pass changes nothing: *changed = 0 and the same file bytes. */
static void check_noop(const char *src, const char *pass)
{
    mge_graph *g = ug_parse(src);
    if (!g)
        return;
    init_model(g, 5);
    ug_check_noop(g, pass, src);
}

/* ------------------------------------------------------------ fold-bn */

static void test_conv_bn(void)
{
    mge_graph *g = ug_parse("input x : f32[N,3,8,8]\n"
                            "conv1 = conv2d(x, out=4, kernel=3, pad=1)\n"
                            "bn1 = batchnorm(conv1)\n"
                            "act = relu(bn1)\n"
                            "output act\n");
    if (!g)
        return;
    init_model(g, 1);
    int w = mge_graph_find(g, "conv1.weight");
    const mge_tensor *old_w = w >= 0 ? g->values[w].data : NULL;
    float w0 = old_w ? ((const float *)old_w->data)[0] : 0;
    CHECK(ug_count_op(g, MGE_OP_BATCHNORM) == 1 && g->nnodes == 3);
    CHECK(apply(&g, "fold-bn", 2) == 1);
    CHECK(ug_count_op(g, MGE_OP_BATCHNORM) == 0 && g->nnodes == 2);
    CHECK(ug_count_op(g, MGE_OP_CONV2D) == 1 && ug_count_op(g, MGE_OP_RELU) == 1);
    CHECK(has(g, "conv1.weight") && has(g, "conv1.bias"));
    CHECK(!has(g, "bn1") && !has(g, "bn1.weight") && !has(g, "bn1.running_mean") && !has(g, "bn1.running_var"));
    CHECK(!has(g, "bn1.num_batches_tracked"));
    w = mge_graph_find(g, "conv1.weight");
    CHECK(w >= 0 && g->values[w].data && ((const float *)g->values[w].data->data)[0] != w0);
    CHECK(output_named(g, 0, "act"));
    /* nothing left to fold */
    mge_error err;
    mge_error_clear(&err);
    int changed = -1;
    CHECK_OK(mge_passes_run_list(&g, "fold-bn", &changed, &err), err);
    CHECK(changed == 0);
    mge_graph_free(g);
}

static void test_conv_nobias_bn_output(void)
{
    /* the batchnorm output is the graph output: the folded conv takes its name */
    mge_graph *g = ug_parse("input x : f32[N,2,6,6]\n"
                            "conv1 = conv2d(x, out=5, kernel=3, stride=2, bias=false)\n"
                            "bn1 = batchnorm(conv1)\n"
                            "output bn1\n");
    if (!g)
        return;
    init_model(g, 2);
    CHECK(!has(g, "conv1.bias"));
    CHECK(apply(&g, "fold-bn", 3) == 1);
    CHECK(g->nnodes == 1 && g->nodes[0].op == MGE_OP_CONV2D);
    CHECK(g->nnodes == 1 && g->nodes[0].nin == 3);
    CHECK(g->nnodes == 1 && mge_node_int(&g->nodes[0], MGE_KEY_bias, 0) == 1);
    int b = mge_graph_find(g, "conv1.bias");
    CHECK(b >= 0 && g->values[b].kind == MGE_VAL_PARAM && g->values[b].data && g->values[b].ndim == 1 &&
          g->values[b].dims[0] == 5);
    CHECK(output_named(g, 0, "bn1"));
    CHECK(!has(g, "conv1")); /* renamed, not duplicated */
    check_text_roundtrip(g);
    mge_graph_free(g);
}

static void test_linear_bn(void)
{
    mge_graph *g = ug_parse("input x : f32[N,6]\n"
                            "fc = linear(x, out=5)\n"
                            "bn = batchnorm(fc, eps=0.001)\n"
                            "act = sigmoid(bn)\n"
                            "output act\n");
    if (!g)
        return;
    init_model(g, 3);
    CHECK(apply(&g, "fold-bn", 4) == 1);
    CHECK(ug_count_op(g, MGE_OP_BATCHNORM) == 0 && ug_count_op(g, MGE_OP_LINEAR) == 1 && g->nnodes == 2);
    CHECK(has(g, "fc.weight") && has(g, "fc.bias") && !has(g, "bn.running_var"));
    mge_graph_free(g);
}

static void test_bn_borrowed_weights(void)
{
    /* weights borrowed from a .mge buffer are read, never written */
    mge_graph *g = ug_parse("input x : f32[N,3,5,5]\n"
                            "conv1 = conv2d(x, out=4, kernel=3)\n"
                            "bn1 = batchnorm(conv1)\n"
                            "output bn1\n");
    if (!g)
        return;
    init_model(g, 9);
    mge_buf file;
    ug_file_bytes(g, &file);
    mge_graph_free(g);
    char *copy = malloc(file.n);
    if (!copy || !file.p) {
        CHECK(0);
        free(copy);
        mge_buf_free(&file);
        return;
    }
    memcpy(copy, file.p, file.n);
    mge_error err;
    mge_error_clear(&err);
    g = NULL;
    /* borrowing needs the bytes 64-byte aligned in memory (as an mmap is) */
    char *buf = mge_aligned_alloc(file.n);
    if (buf)
        memcpy(buf, file.p, file.n);
    CHECK_OK(mge_file_read(buf, file.n, 1, &g, &err), err);
    if (g) {
        int w = mge_graph_find(g, "conv1.weight");
        const char *wd = w >= 0 && g->values[w].data ? g->values[w].data->data : NULL;
        CHECK(wd && wd >= buf && wd < buf + file.n); /* borrowed, so the test means something */
        CHECK(apply(&g, "fold-bn", 2) == 1);
        CHECK(ug_count_op(g, MGE_OP_BATCHNORM) == 0);
        CHECK(memcmp(copy, buf, file.n) == 0);
        mge_graph_free(g);
    }
    mge_aligned_free(buf);
    free(copy);
    mge_buf_free(&file);
}

static void test_bn_not_after_layer(void)
{
    check_noop("input x : f32[N,3,4,4]\n"
               "a = relu(x)\n"
               "bn = batchnorm(a)\n"
               "output bn\n",
               "fold-bn");
}

static void test_bn_conv_used_twice(void)
{
    check_noop("input x : f32[N,3,4,4]\n"
               "conv1 = conv2d(x, out=4, kernel=1)\n"
               "bn1 = batchnorm(conv1)\n"
               "other = relu(conv1)\n"
               "output bn1, other\n",
               "fold-bn");
    /* the conv output is itself a graph output */
    check_noop("input x : f32[N,3,4,4]\n"
               "conv1 = conv2d(x, out=4, kernel=1)\n"
               "bn1 = batchnorm(conv1)\n"
               "output bn1, conv1\n",
               "fold-bn");
}

static void test_bn_shared_weight(void)
{
    /* a weight two convs read cannot change for one of them */
    check_noop("input x : f32[N,4,4,4]\n"
               "param w : f32[4,4,1,1] init=uniform(0.5)\n"
               "c1 = conv2d(x, w, out=4, kernel=1, bias=false)\n"
               "b1 = batchnorm(c1)\n"
               "c2 = conv2d(b1, w, out=4, kernel=1, bias=false)\n"
               "output c2\n",
               "fold-bn");
}

/* ------------------------------------------------------------ strip-training */

static void test_strip_dropout(void)
{
    mge_graph *g = ug_parse("input x : f32[N,6]\n"
                            "fc = linear(x, out=5)\n"
                            "d1 = dropout(fc, p=0.5)\n"
                            "act = relu(d1)\n"
                            "d2 = dropout(act, p=0.2)\n"
                            "output d2\n");
    if (!g)
        return;
    init_model(g, 4);
    CHECK(ug_count_op(g, MGE_OP_DROPOUT) == 2);
    CHECK(apply(&g, "strip-training", 3) == 1);
    CHECK(ug_count_op(g, MGE_OP_DROPOUT) == 0 && g->nnodes == 2);
    CHECK(output_named(g, 0, "d2")); /* the output keeps its name */
    check_text_roundtrip(g);
    CHECK(!has(g, "d1") && !has(g, "act"));
    mge_graph_free(g);
}

static void test_strip_loss(void)
{
    mge_graph *g = ug_parse("input x : f32[N,4,3,3]\n"
                            "input label : i32[N]\n"
                            "input spare : f32[N,2]\n"
                            "conv = conv2d(x, out=3, kernel=3)\n"
                            "bn = batchnorm(conv)\n"
                            "flat = flatten(bn)\n"
                            "loss = cross_entropy(flat, label)\n"
                            "output flat\n"
                            "minimize loss\n");
    if (!g)
        return;
    init_model(g, 6);
    mge_error err;
    mge_error_clear(&err);
    CHECK_OK(mge_graph_set_meta(g, "train.step", "12", &err), err);
    CHECK_OK(mge_graph_set_meta(g, "author", "test", &err), err);
    int64_t dims[1] = {3};
    int m = mge_graph_add_value(g, "conv.bias.__opt.momentum_buffer", MGE_VAL_STATE, MGE_F32, 1, dims, &err);
    int h = mge_graph_add_value(g, "__opt.hyper", MGE_VAL_STATE, MGE_F32, 1, dims, &err);
    CHECK(m >= 0 && h >= 0);
    if (m >= 0 && h >= 0) {
        g->values[m].data = calloc(1, sizeof(mge_tensor));
        g->values[h].data = calloc(1, sizeof(mge_tensor));
        CHECK_OK(mge_tensor_alloc(g->values[m].data, MGE_F32, 1, dims, &err), err);
        CHECK_OK(mge_tensor_alloc(g->values[h].data, MGE_F32, 1, dims, &err), err);
    }
    CHECK(g->ninputs == 3 && g->loss >= 0);
    CHECK(g->nnodes == 4 && g->nodes[1].op == MGE_OP_BATCHNORM && g->nodes[1].nin == 6);
    CHECK(apply(&g, "strip-training", 2) == 1);
    CHECK(g->loss == -1);
    CHECK(ug_count_op(g, MGE_OP_CROSS_ENTROPY) == 0 && g->nnodes == 3);
    CHECK(g->ninputs == 2 && !has(g, "label") && has(g, "spare")); /* only the label goes */
    CHECK(!has(g, "loss"));
    CHECK(!has(g, "conv.bias.__opt.momentum_buffer") && !has(g, "__opt.hyper"));
    CHECK(mge_graph_get_meta(g, "train.step") == NULL);
    CHECK(mge_graph_get_meta(g, "author") && strcmp(mge_graph_get_meta(g, "author"), "test") == 0);
    /* batchnorm stays (fold-bn removes it), without its training counter */
    CHECK(ug_count_op(g, MGE_OP_BATCHNORM) == 1 && g->nodes[1].nin == 5 && !has(g, "bn.num_batches_tracked"));
    CHECK(has(g, "bn.running_mean"));
    check_text_roundtrip(g);
    /* then fold-bn: the same numbers still */
    CHECK(apply(&g, "fold-bn", 2) == 1);
    CHECK(ug_count_op(g, MGE_OP_BATCHNORM) == 0);
    int changed = -1;
    CHECK_OK(mge_passes_run_list(&g, "strip-training", &changed, &err), err);
    CHECK(changed == 0);
    mge_graph_free(g);
}

static void test_strip_noop(void)
{
    check_noop("input x : f32[N,6]\n"
               "fc = linear(x, out=5)\n"
               "act = relu(fc)\n"
               "output act\n",
               "strip-training");
    /* a loss with no outputs would leave nothing: an error, the graph unchanged */
    mge_graph *g = ug_parse("input x : f32[N,6]\ninput y : i32[N]\nfc = linear(x, out=3)\n"
                            "loss = cross_entropy(fc, y)\nminimize loss\n");
    if (!g)
        return;
    mge_error err;
    mge_error_clear(&err);
    mge_graph *before = g;
    int changed = -1;
    CHECK(mge_passes_run_list(&g, "strip-training", &changed, &err) == MGE_ERR_INVALID);
    CHECK(strstr(err.msg, "no outputs") != NULL);
    CHECK(g == before && g->loss >= 0 && changed == 0);
    mge_graph_free(g);
}

/* ------------------------------------------------------------ fold-scale */

static void test_scale_mul_channels(void)
{
    mge_graph *g = ug_parse("input x : f32[N,2,5,5]\n"
                            "const s : f32[4,1,1] = [0.5, 2, -1, 3]\n"
                            "const t : f32[] = 0.25\n"
                            "conv = conv2d(x, out=4, kernel=3, pad=1)\n"
                            "y = mul(conv, s)\n"
                            "z = add(t, y)\n"
                            "output z\n");
    if (!g)
        return;
    init_model(g, 7);
    CHECK(g->nnodes == 3);
    CHECK(apply(&g, "fold-scale", 2) == 1);
    CHECK(g->nnodes == 1 && g->nodes[0].op == MGE_OP_CONV2D);
    CHECK(output_named(g, 0, "z"));
    CHECK(!has(g, "s") && !has(g, "t") && has(g, "conv.weight") && has(g, "conv.bias"));
    mge_graph_free(g);
}

static void test_scale_add_scalar(void)
{
    /* linear without bias gains one; [1,C] also counts as per channel */
    mge_graph *g = ug_parse("input x : f32[N,3]\n"
                            "const a : f32[] = 1.5\n"
                            "const k : f32[1,4] = [1, -2, 0.5, 4]\n"
                            "fc = linear(x, out=4, bias=false)\n"
                            "y = add(fc, a)\n"
                            "z = relu(y)\n"
                            "fc2 = linear(z, out=4)\n"
                            "w = mul(k, fc2)\n"
                            "output w\n");
    if (!g)
        return;
    init_model(g, 8);
    CHECK(g->nnodes == 5 && !has(g, "fc.bias"));
    CHECK(apply(&g, "fold-scale", 3) == 1);
    CHECK(g->nnodes == 3 && ug_count_op(g, MGE_OP_ADD) == 0 && ug_count_op(g, MGE_OP_MUL) == 0);
    CHECK(has(g, "fc.bias") && g->nodes[0].nin == 3 && mge_node_int(&g->nodes[0], MGE_KEY_bias, 0) == 1);
    mge_graph_free(g);
}

static void test_scale_noop(void)
{
    /* spatial (not per channel) scale, scale by a graph input, a conv read twice */
    check_noop("input x : f32[N,2,4,4]\n"
               "input u : f32[N,4,1,1]\n"
               "const s : f32[1,4] = [1, 2, 3, 4]\n"
               "c1 = conv2d(x, out=4, kernel=1)\n"
               "y1 = mul(c1, s)\n"
               "c2 = conv2d(x, out=4, kernel=1)\n"
               "y2 = mul(c2, u)\n"
               "c3 = conv2d(x, out=4, kernel=1)\n"
               "y3 = add(c3, s)\n"
               "y4 = relu(c3)\n"
               "output y1, y2, y3, y4\n",
               "fold-scale");
}

/* ------------------------------------------------------------ real nets */

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

static void check_net(const char *path, uint64_t seed)
{
    size_t n = 0;
    char *src = slurp(path, &n);
    if (!src)
        return;
    /* 64x64 images instead of 224x224 keep the test fast; global pooling
     * makes both nets indifferent to the image size */
    char *p = strstr(src, "224,224]");
    CHECK(p != NULL);
    if (p)
        memcpy(p, " 64, 64]", 8);
    mge_graph *g = NULL;
    mge_error err;
    mge_error_clear(&err);
    CHECK_OK(mge_text_parse(src, n, "samples/nets", &g, &err), err);
    free(src);
    if (!g)
        return;
    init_model(g, seed);
    int nbn = ug_count_op(g, MGE_OP_BATCHNORM), nconv = ug_count_op(g, MGE_OP_CONV2D);
    CHECK(nbn > 0);
    CHECK(apply(&g, "strip-training,fold-bn", 1) == 1);
    CHECK_MSG(ug_count_op(g, MGE_OP_BATCHNORM) == 0, "%s: %d batchnorm left", path,
              ug_count_op(g, MGE_OP_BATCHNORM));
    CHECK(ug_count_op(g, MGE_OP_DROPOUT) == 0);
    CHECK(ug_count_op(g, MGE_OP_CONV2D) == nconv);
    for (int v = 0; v < g->nvalues; v++)
        CHECK(strstr(g->values[v].name, "running_") == NULL);
    mge_graph_free(g);
}

static void test_resnet18(void)
{
    check_net("samples/nets/resnet18.mgt", 11);
}

static void test_mobilenet_v2(void)
{
    check_net("samples/nets/mobilenet_v2.mgt", 12);
}

int main(void)
{
    RUN(test_conv_bn);
    RUN(test_conv_nobias_bn_output);
    RUN(test_linear_bn);
    RUN(test_bn_borrowed_weights);
    RUN(test_bn_not_after_layer);
    RUN(test_bn_conv_used_twice);
    RUN(test_bn_shared_weight);
    RUN(test_strip_dropout);
    RUN(test_strip_loss);
    RUN(test_strip_noop);
    RUN(test_scale_mul_channels);
    RUN(test_scale_add_scalar);
    RUN(test_scale_noop);
    RUN(test_resnet18);
    RUN(test_mobilenet_v2);
    return unit_done();
}
