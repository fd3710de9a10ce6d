/* test_pass_misc.c — the cse, fold-constants and f16-weights passes: the
 * graph change on small models, numerics before/after, and no-op runs that
 * leave the model byte-identical. */
#include "mge.h"
#include "unit.h"

static mge_graph *parse(const char *src)
{
    mge_graph *g = NULL;
    mge_error err;
    mge_error_clear(&err);
    CHECK_OK(mge_text_parse(src, strlen(src), ".", &g, &err), err);
    if (g)
        CHECK_OK(mge_graph_init_params(g, 7, &err), err);
    return g;
}

/* The .mge bytes of g (deterministic writer). */
static mge_buf bytes_of(const mge_graph *g)
{
    mge_buf b = {0};
    mge_error err;
    mge_error_clear(&err);
    CHECK_OK(mge_file_write(g, NULL, &b, &err), err);
    return b;
}

static int count_op(const mge_graph *g, int op)
{
    int n = 0;
    for (int i = 0; i < g->nnodes; i++)
        n += g->nodes[i].op == op;
    return n;
}

static mge_status run_pass(mge_graph **g, const char *name, int *changed, mge_error *err)
{
    return mge_passes_run_list(g, name, changed, err);
}

/* Runs the pass on a clone of g and checks it changes nothing, byte for byte. */
static void check_noop(const mge_graph *g, const char *pass)
{
    mge_error err;
    mge_error_clear(&err);
    mge_graph *c = mge_graph_clone(g, &err);
    CHECK(c != NULL);
    if (!c)
        return;
    mge_graph *before = c;
    int changed = 1;
    CHECK_OK(run_pass(&c, pass, &changed, &err), err);
    CHECK_MSG(changed == 0, "%s changed the graph", pass);
    CHECK(c == before);
    mge_buf a = bytes_of(g), b = bytes_of(c);
    CHECK(a.n > 0 && a.n == b.n && memcmp(a.p, b.p, a.n) == 0);
    mge_buf_free(&a);
    mge_buf_free(&b);
    mge_graph_free(c);
}

/* Outputs of g on seeded random inputs at batch 3 (one f32 array per output). */
typedef struct outs {
    int n;
    float *v[4];
    int64_t cnt[4];
} outs;

static void outs_free(outs *o)
{
    for (int i = 0; i < o->n; i++)
        free(o->v[i]);
    o->n = 0;
}

static outs run_graph(const mge_graph *g)
{
    outs o = {0};
    mge_error err;
    mge_error_clear(&err);
    mge_exec *e = NULL;
    CHECK_OK(mge_exec_create(g, NULL, &e, &err), err);
    if (!e)
        return o;
    int nin = mge_exec_ninputs(e);
    mge_tensor in[4];
    const mge_tensor *inp[4];
    mge_rng r;
    mge_rng_seed(&r, 42);
    CHECK(nin <= 4);
    for (int i = 0; i < nin && i < 4; i++) {
        const mge_value *v = &g->values[mge_exec_input(e, i)];
        int64_t dims[MGE_MAX_DIMS];
        for (int k = 0; k < v->ndim; k++)
            dims[k] = v->dims[k] == MGE_DIM_N ? 3 : v->dims[k];
        CHECK_OK(mge_tensor_alloc(&in[i], MGE_F32, v->ndim, dims, &err), err);
        float *p = in[i].data;
        for (int64_t k = 0; k < mge_tensor_numel(&in[i]); k++)
            p[k] = mge_rng_uniform(&r) * 2 - 1;
        inp[i] = &in[i];
    }
    CHECK_OK(mge_exec_run(e, inp, &err), err);
    for (int i = 0; i < mge_exec_noutputs(e) && i < 4; i++) {
        const mge_tensor *t = mge_exec_result(e, i);
        CHECK(t && t->dtype == MGE_F32);
        if (!t || t->dtype != MGE_F32)
            break;
        o.cnt[i] = mge_tensor_numel(t);
        o.v[i] = malloc(sizeof(float) * (size_t)(o.cnt[i] + 1));
        memcpy(o.v[i], t->data, sizeof(float) * (size_t)o.cnt[i]);
        o.n = i + 1;
    }
    for (int i = 0; i < nin && i < 4; i++)
        mge_tensor_free(&in[i]);
    mge_exec_free(e);
    return o;
}

/* Largest |a-b| / max(|b|, 1e-3 * max|b|) over every element. */
static double max_rel(const outs *a, const outs *b)
{
    double worst = 0;
    CHECK(a->n == b->n && a->n > 0);
    for (int i = 0; i < a->n && i < b->n; i++) {
        CHECK(a->cnt[i] == b->cnt[i]);
        double scale = 0;
        for (int64_t k = 0; k < b->cnt[i]; k++)
            scale = fmax(scale, fabs(b->v[i][k]));
        for (int64_t k = 0; k < a->cnt[i] && k < b->cnt[i]; k++) {
            double d = fabs((double)a->v[i][k] - b->v[i][k]) / fmax(fabs(b->v[i][k]), 1e-3 * scale + 1e-30);
            worst = fmax(worst, d);
        }
    }
    return worst;
}

/* ---------------------------------------------------------------- cse */

static const char *cse_net =
    "input x : f32[N,4]\n"
    "fc = linear(x, out=6)\n"
    "a1 = relu(fc)\n"
    "a2 = relu(fc)\n"            /* duplicate of a1 */
    "s1 = sigmoid(a1)\n"
    "s2 = sigmoid(a2)\n"         /* duplicate once a2 is a1: chains merge */
    "l1 = leaky_relu(s1, alpha=0.1)\n"
    "l2 = leaky_relu(s2, alpha=0.2)\n"   /* different attribute: stays */
    "m = mul(s2, l1)\n"
    "m2 = mul(l1, s1)\n"         /* operands swapped: not the same inputs in order */
    "d1 = dropout(m, p=0.5)\n"
    "d2 = dropout(m, p=0.5)\n"   /* randomness: never merged */
    "t = add(d1, d2)\n"
    "u = add(t, l2)\n"
    "v = add(u, m2)\n"
    "output v\n";

static void test_cse(void)
{
    mge_graph *g = parse(cse_net);
    if (!g)
        return;
    mge_error err;
    mge_error_clear(&err);
    outs before = run_graph(g);
    int nnodes = g->nnodes, changed = 0;
    CHECK_OK(run_pass(&g, "cse", &changed, &err), err);
    CHECK(changed == 1);
    CHECK(g->nnodes == nnodes - 2);
    CHECK(mge_graph_find(g, "a2") < 0);
    CHECK(mge_graph_find(g, "s2") < 0);
    CHECK(mge_graph_find(g, "a1") >= 0 && mge_graph_find(g, "s1") >= 0);
    CHECK(mge_graph_find(g, "l2") >= 0 && mge_graph_find(g, "m2") >= 0);
    CHECK(count_op(g, MGE_OP_DROPOUT) == 2);
    CHECK(count_op(g, MGE_OP_LEAKY_RELU) == 2);
    /* m now reads s1 for s2 */
    int m = mge_graph_find(g, "m"), s1 = mge_graph_find(g, "s1");
    CHECK(m >= 0 && g->values[m].producer >= 0 && g->nodes[g->values[m].producer].in[0] == s1);
    CHECK_OK(mge_graph_validate(g, &err), err);
    outs after = run_graph(g);
    CHECK(max_rel(&after, &before) <= 1e-6);
    outs_free(&before);
    outs_free(&after);
    /* a second run has nothing left to merge */
    check_noop(g, "cse");
    mge_graph_free(g);
}

/* A duplicate whose output is a graph output keeps its name; two outputs both stay. */
static void test_cse_outputs(void)
{
    mge_graph *g = parse("input x : f32[N,4]\n"
                         "a = tanh(x)\n"
                         "b = tanh(x)\n"
                         "c = exp(a)\n"
                         "p = neg(x)\n"
                         "q = neg(x)\n"
                         "output b, c, p, q\n");
    if (!g)
        return;
    mge_error err;
    mge_error_clear(&err);
    outs before = run_graph(g);
    int changed = 0;
    CHECK_OK(run_pass(&g, "cse", &changed, &err), err);
    CHECK(changed == 1);
    CHECK(g->nnodes == 4);
    CHECK(mge_graph_find(g, "a") < 0);      /* a went, b (an output) took its place */
    int b = mge_graph_find(g, "b"), c = mge_graph_find(g, "c");
    CHECK(b >= 0 && c >= 0);
    CHECK(b >= 0 && g->values[b].producer == 0);  /* computed where a was, before c */
    CHECK(c >= 0 && g->nodes[g->values[c].producer].in[0] == b);
    CHECK(count_op(g, MGE_OP_NEG) == 2);    /* both outputs: both stay */
    CHECK(g->noutputs == 4 && strcmp(g->values[g->outputs[0]].name, "b") == 0);
    outs after = run_graph(g);
    CHECK(max_rel(&after, &before) <= 1e-6);
    outs_free(&before);
    outs_free(&after);
    mge_graph_free(g);
}

static void test_cse_noop(void)
{
    mge_graph *g = parse("input x : f32[N,4]\ninput y : i32[N]\nfc = linear(x, out=3)\n"
                         "d1 = dropout(fc)\nd2 = dropout(fc)\ns = add(d1, d2)\n"
                         "loss = cross_entropy(s, y)\noutput s\nminimize loss\n");
    if (!g)
        return;
    check_noop(g, "cse");
    mge_graph_free(g);
}

/* ---------------------------------------------------------------- fold-constants */

static const char *fold_net =
    "input x : f32[N,3]\n"
    "input y : i32[N]\n"
    "const a : f32[3] = [1, 2, 3]\n"
    "const b : f32[3] = [0.5, -1, 4]\n"
    "const k : f32[] = 2\n"
    "ab = add(a, b)\n"
    "abk = mul(ab, k)\n"
    "e = exp(b)\n"
    "h = mul(x, abk)\n"
    "h2 = add(h, e)\n"
    "fc = linear(h2, out=4)\n"
    "w2 = neg(fc.weight)\n"      /* over a param in a training graph: stays */
    "loss = cross_entropy(fc, y)\n"
    "output fc, w2\n"
    "minimize loss\n";

static void test_fold_constants(void)
{
    mge_graph *g = parse(fold_net);
    if (!g)
        return;
    mge_error err;
    mge_error_clear(&err);
    outs before = run_graph(g);
    int nnodes = g->nnodes, changed = 0;
    CHECK_OK(run_pass(&g, "fold-constants", &changed, &err), err);
    CHECK(changed == 1);
    CHECK(g->nnodes == nnodes - 3);          /* ab, abk, e */
    CHECK(mge_graph_find(g, "ab") < 0);      /* read only by folded nodes: gone */
    CHECK(mge_graph_find(g, "a") < 0);       /* consts only folded nodes read: gone */
    CHECK(mge_graph_find(g, "b") < 0);
    int abk = mge_graph_find(g, "abk"), e = mge_graph_find(g, "e");
    CHECK(abk >= 0 && g->values[abk].kind == MGE_VAL_CONST && g->values[abk].data);
    CHECK(e >= 0 && g->values[e].kind == MGE_VAL_CONST && g->values[e].data);
    if (abk >= 0 && g->values[abk].data) {
        const float *p = g->values[abk].data->data;
        CHECK_NEAR(p[0], 3.0, 1e-6);
        CHECK_NEAR(p[1], 2.0, 1e-6);
        CHECK_NEAR(p[2], 14.0, 1e-6);
    }
    int w2 = mge_graph_find(g, "w2");
    CHECK(w2 >= 0 && g->values[w2].kind == MGE_VAL_NODE);   /* params are trained: not folded */
    CHECK(g->loss >= 0 && strcmp(g->values[g->loss].name, "loss") == 0);
    CHECK_OK(mge_graph_validate(g, &err), err);
    outs after = run_graph(g);
    CHECK(max_rel(&after, &before) <= 1e-6);
    outs_free(&before);
    outs_free(&after);
    check_noop(g, "fold-constants");
    /* the result survives a write and read */
    mge_buf buf = bytes_of(g);
    mge_graph *r = NULL;
    CHECK_OK(mge_file_read(buf.p, buf.n, 0, &r, &err), err);
    CHECK(r && mge_graph_find(r, "abk") >= 0);
    mge_graph_free(r);
    mge_buf_free(&buf);
    mge_graph_free(g);
}

/* With no loss (inference), nodes over params fold too. */
static void test_fold_inference(void)
{
    mge_graph *g = parse("input x : f32[N,3]\n"
                         "param w : f32[3,5] init=uniform(1)\n"
                         "param bias : f32[5] init=uniform(1)\n"
                         "wt = transpose(w, perm=[1,0])\n"
                         "y = matmul(x, w)\n"
                         "z = linear(x, wt, bias, out=5)\n"
                         "s = sub(y, z)\n"
                         "output s, wt\n");
    if (!g)
        return;
    mge_error err;
    mge_error_clear(&err);
    outs before = run_graph(g);
    int changed = 0;
    CHECK_OK(run_pass(&g, "fold-constants", &changed, &err), err);
    CHECK(changed == 1);
    CHECK(count_op(g, MGE_OP_TRANSPOSE) == 0);
    int wt = mge_graph_find(g, "wt");
    CHECK(wt >= 0 && g->values[wt].kind == MGE_VAL_CONST);
    CHECK(wt >= 0 && g->values[wt].ndim == 2 && g->values[wt].dims[0] == 5 && g->values[wt].dims[1] == 3);
    CHECK(g->noutputs == 2 && g->outputs[1] == wt);          /* a folded output keeps its place and name */
    CHECK(mge_graph_find(g, "w") >= 0);                      /* still read by matmul */
    CHECK(mge_graph_find(g, "bias") >= 0 && g->values[mge_graph_find(g, "bias")].kind == MGE_VAL_PARAM);
    outs after = run_graph(g);
    CHECK(max_rel(&after, &before) <= 1e-6);
    outs_free(&before);
    outs_free(&after);
    check_noop(g, "fold-constants");
    mge_graph_free(g);
}

static void test_fold_noop(void)
{
    /* nothing constant: a param-only node in a training graph, and a dropout of a const */
    mge_graph *g = parse("input x : f32[N,3]\ninput y : i32[N]\nconst c : f32[3] = [1, 2, 3]\n"
                         "dc = dropout(c)\nh = mul(x, dc)\nfc = linear(h, out=2)\n"
                         "loss = cross_entropy(fc, y)\noutput fc\nminimize loss\n");
    if (!g)
        return;
    check_noop(g, "fold-constants");
    mge_graph_free(g);
}

/* ---------------------------------------------------------------- f16-weights */

static const char *f16_net =
    "input x : f32[N,3,8,8]\n"
    "conv1 = conv2d(x, out=16, kernel=3, pad=1)\n"
    "act = relu(conv1)\n"
    "flat = flatten(act)\n"
    "fc = linear(flat, out=10)\n"
    "output fc\n";

static void test_f16_weights(void)
{
    mge_graph *g = parse(f16_net);
    if (!g)
        return;
    mge_error err;
    mge_error_clear(&err);
    outs before = run_graph(g);
    mge_buf b0 = bytes_of(g);
    int64_t wbytes = 0;
    for (int v = 0; v < g->nvalues; v++)
        if (g->values[v].kind == MGE_VAL_PARAM && g->values[v].data)
            wbytes += (int64_t)g->values[v].data->nbytes;
    int w = mge_graph_find(g, "conv1.weight");
    float w0 = w >= 0 ? ((const float *)g->values[w].data->data)[5] : 0;
    int nnodes = g->nnodes, changed = 0;
    CHECK_OK(run_pass(&g, "f16-weights", &changed, &err), err);
    CHECK(changed == 1);
    CHECK(g->nnodes == nnodes + 4);
    CHECK(count_op(g, MGE_OP_CAST) == 4);
    const char *names[] = {"conv1.weight", "conv1.bias", "fc.weight", "fc.bias"};
    for (int i = 0; i < 4; i++) {
        int p = mge_graph_find(g, names[i]);
        CHECK(p >= 0 && g->values[p].kind == MGE_VAL_PARAM && g->values[p].dtype == MGE_F16);
        CHECK(p >= 0 && g->values[p].data && g->values[p].data->dtype == MGE_F16);
        char cn[64];
        snprintf(cn, sizeof cn, "%s.f32", names[i]);
        int cv = mge_graph_find(g, cn);
        CHECK_MSG(cv >= 0 && g->values[cv].dtype == MGE_F32, "%s", cn);
        if (cv < 0)
            continue;
        const mge_node *cast = &g->nodes[g->values[cv].producer];
        CHECK(cast->op == MGE_OP_CAST && cast->in[0] == p);
        CHECK(mge_node_int(cast, MGE_KEY_dtype, -1) == MGE_F32);
    }
    /* the conv reads the cast, which comes right before it */
    int conv = -1;
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i].op == MGE_OP_CONV2D)
            conv = i;
    CHECK(conv >= 2 && g->nodes[conv].in[1] == mge_graph_find(g, "conv1.weight.f32"));
    CHECK(conv >= 2 && g->nodes[conv - 1].op == MGE_OP_CAST);
    w = mge_graph_find(g, "conv1.weight");
    if (w >= 0)   /* round to nearest even, as mge_f32_to_f16 does */
        CHECK(((const uint16_t *)g->values[w].data->data)[5] == mge_f32_to_f16(w0));
    CHECK_OK(mge_graph_validate(g, &err), err);
    outs after = run_graph(g);
    CHECK(max_rel(&after, &before) <= 1e-2);
    CHECK(max_rel(&after, &before) > 0);   /* the weights really changed */
    mge_buf b1 = bytes_of(g);
    /* about half the weights' bytes go (the cast nodes and 64-byte alignment cost a little) */
    CHECK_MSG((int64_t)b0.n - (int64_t)b1.n > wbytes / 2 - 1024 && (int64_t)b0.n - (int64_t)b1.n <= wbytes / 2,
              "before %zu, after %zu, weights %lld", b0.n, b1.n, (long long)wbytes);
    outs_free(&before);
    outs_free(&after);
    mge_buf_free(&b0);
    mge_buf_free(&b1);
    /* a second run converts nothing, and fold-constants leaves the casts (no loss: it may fold params) */
    check_noop(g, "f16-weights");
    check_noop(g, "fold-constants");
    mge_graph_free(g);
}

/* Shared weights get one cast; params without data and non-weight params are left alone. */
static void test_f16_shared_and_skipped(void)
{
    mge_graph *g = parse("input x : f32[N,4]\n"
                         "param w : f32[4,4] init=uniform(0.5)\n"
                         "param s : f32[4] init=ones\n"
                         "a = linear(x, w, out=4, bias=false)\n"
                         "b = linear(a, w, out=4, bias=false)\n"
                         "c = mul(b, s)\n"
                         "output c\n");
    if (!g)
        return;
    mge_error err;
    mge_error_clear(&err);
    int changed = 0;
    CHECK_OK(run_pass(&g, "f16-weights", &changed, &err), err);
    CHECK(changed == 1);
    CHECK(count_op(g, MGE_OP_CAST) == 1);
    int wc = mge_graph_find(g, "w.f32");
    CHECK(wc >= 0);
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i].op == MGE_OP_LINEAR)
            CHECK(g->nodes[i].in[1] == wc);
    int s = mge_graph_find(g, "s");
    CHECK(s >= 0 && g->values[s].dtype == MGE_F32);
    mge_graph_free(g);

    /* no data (not initialized): nothing to convert */
    const char *src = "input x : f32[N,4]\nfc = linear(x, out=2)\noutput fc\n";
    g = NULL;
    CHECK_OK(mge_text_parse(src, strlen(src), ".", &g, &err), err);
    if (g) {
        check_noop(g, "f16-weights");
        mge_graph_free(g);
    }
}

/* Weights already in the other half type are converted in place, through
 * f32; bf16 beyond f16's range is refused and leaves the graph as it was. */
static void test_half_to_half(void)
{
    mge_graph *g = parse(f16_net);
    if (!g)
        return;
    mge_error err;
    mge_error_clear(&err);
    int changed = 0;
    CHECK_OK(run_pass(&g, "f16-weights", &changed, &err), err);
    int w = mge_graph_find(g, "conv1.weight");
    CHECK(w >= 0 && g->values[w].dtype == MGE_F16);
    if (w < 0) {
        mge_graph_free(g);
        return;
    }
    uint16_t h5 = ((const uint16_t *)g->values[w].data->data)[5];
    int nnodes = g->nnodes;
    outs half = run_graph(g);
    changed = 0;
    CHECK_OK(run_pass(&g, "bf16-weights", &changed, &err), err);
    CHECK(changed == 1);
    CHECK(g->nnodes == nnodes && count_op(g, MGE_OP_CAST) == 4);
    const char *names[] = {"conv1.weight", "conv1.bias", "fc.weight", "fc.bias"};
    for (int i = 0; i < 4; i++) {
        int p = mge_graph_find(g, names[i]);
        CHECK_MSG(p >= 0 && g->values[p].dtype == MGE_BF16 && g->values[p].data->dtype == MGE_BF16, "%s", names[i]);
    }
    w = mge_graph_find(g, "conv1.weight");
    CHECK(((const uint16_t *)g->values[w].data->data)[5] == mge_f32_to_bf16(mge_f16_to_f32(h5)));
    CHECK_OK(mge_graph_validate(g, &err), err);
    outs bf = run_graph(g);
    /* bf16's 8 bits: close in norm (elements near 0 may differ more) */
    double dd = 0, nn = 0;
    for (int i = 0; i < bf.n && i < half.n; i++)
        for (int64_t k = 0; k < bf.cnt[i] && k < half.cnt[i]; k++) {
            dd += (bf.v[i][k] - half.v[i][k]) * (bf.v[i][k] - half.v[i][k]);
            nn += half.v[i][k] * half.v[i][k];
        }
    CHECK_MSG(nn > 0 && sqrt(dd / nn) <= 1e-2 && dd > 0, "relative difference %g", nn > 0 ? sqrt(dd / nn) : -1.0);
    outs_free(&half);
    outs_free(&bf);
    check_noop(g, "bf16-weights");
    mge_graph_free(g);

    /* bf16 holding 1e6: no f16 can store it */
    g = parse("input x : f32[N,4]\n"
              "param w : bf16[4,4] init=uniform(0.5)\n"
              "wc = cast(w, dtype=f32)\n"
              "y = linear(x, wc, out=4, bias=false)\n"
              "output y\n");
    if (!g)
        return;
    w = mge_graph_find(g, "w");
    CHECK(w >= 0 && g->values[w].data);
    if (w < 0 || !g->values[w].data) {
        mge_graph_free(g);
        return;
    }
    ((uint16_t *)g->values[w].data->data)[3] = mge_f32_to_bf16(1e6f);
    mge_buf b0 = bytes_of(g);
    mge_graph *before = g;
    CHECK(run_pass(&g, "f16-weights", &changed, &err) == MGE_ERR_INVALID);
    CHECK_MSG(strstr(err.msg, "'w' holds") && strstr(err.msg, "beyond f16's range"), "%s", err.msg);
    CHECK(g == before && g->values[w].dtype == MGE_BF16);
    mge_buf b1 = bytes_of(g);
    CHECK(b0.n == b1.n && memcmp(b0.p, b1.p, b0.n) == 0);
    mge_buf_free(&b0);
    mge_buf_free(&b1);
    /* a half param that something other than a cast reads keeps its type */
    mge_graph_free(g);
    g = parse("input x : f16[N,4]\n"
              "param w : bf16[4] init=uniform(0.5)\n"
              "wc = cast(w, dtype=f16)\n"
              "y = add(x, wc)\n"
              "param v : f16[4] init=uniform(0.5)\n"
              "z = mul(y, v)\n"
              "output z\n");
    if (g) {
        check_noop(g, "bf16-weights");
        mge_graph_free(g);
    }
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(test_cse);
    RUN(test_cse_outputs);
    RUN(test_cse_noop);
    RUN(test_fold_constants);
    RUN(test_fold_inference);
    RUN(test_fold_noop);
    RUN(test_f16_weights);
    RUN(test_half_to_half);
    RUN(test_f16_shared_and_skipped);
    return unit_rerun_baseline(argv, "test_pass_misc", unit_done());
}
