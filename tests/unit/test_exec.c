/* test_exec.c — the executor: results against hand computations, batch
 * changes between runs, input checks and their messages, output subsets
 * that need fewer inputs, outputs that are inputs/params/views, hooks,
 * training mode and kernel error messages. */
#include "internal.h"
#include "unit.h"
#include "unit_graph.h"

static mge_error err;
static const char *backends[2] = {"ref", "cpu"};

/* ---------------------------------------------------------------- graph building */

static int linear(mge_graph *g, const char *name, int x, int out)
{
    mge_attr a = A(MGE_KEY_out, out);
    return layer(g, name, MGE_OP_LINEAR, x, 1, &a);
}

/* Binds every param without data to small deterministic values. */
static void fill_params(mge_graph *g)
{
    for (int v = 0; v < g->nvalues; v++) {
        mge_value *val = &g->values[v];
        if (val->kind != MGE_VAL_PARAM || val->data)
            continue;
        val->data = calloc(1, sizeof *val->data);
        CHECK_OK(mge_tensor_alloc(val->data, val->dtype, val->ndim, val->dims, &err), err);
        float *p = val->data->data;
        for (int64_t i = 0; i < mge_tensor_numel(val->data); i++)
            p[i] = (float)(((i * 7 + v * 3) % 11) - 5) / 8.0f;
    }
}

static float *param(mge_graph *g, const char *name)
{
    int v = mge_graph_find(g, name);
    return v >= 0 && g->values[v].data ? g->values[v].data->data : NULL;
}

/* x[N,4] -> fc1(8) -> relu -> fc2(3) = y */
static mge_graph *mlp(void)
{
    mge_graph *g = mge_graph_new();
    int64_t xd[2] = {MGE_DIM_N, 4};
    int x = mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 2, xd, &err);
    int y = linear(g, "fc2", un(g, "act", MGE_OP_RELU, linear(g, "fc1", x, 8)), 3);
    CHECK_OK(mge_graph_add_output(g, y, &err), err);
    fill_params(g);
    return g;
}

/* The MLP by hand, in double. */
static void mlp_hand(mge_graph *g, const float *x, int64_t n, double *y)
{
    const float *w1 = param(g, "fc1.weight"), *b1 = param(g, "fc1.bias");
    const float *w2 = param(g, "fc2.weight"), *b2 = param(g, "fc2.bias");
    for (int64_t r = 0; r < n; r++) {
        double h[8];
        for (int o = 0; o < 8; o++) {
            h[o] = b1[o];
            for (int k = 0; k < 4; k++)
                h[o] += (double)w1[o * 4 + k] * x[r * 4 + k];
            if (h[o] < 0)
                h[o] = 0;
        }
        for (int o = 0; o < 3; o++) {
            y[r * 3 + o] = b2[o];
            for (int k = 0; k < 8; k++)
                y[r * 3 + o] += (double)w2[o * 8 + k] * h[k];
        }
    }
}

static mge_tensor make_input(int ndim, const int64_t *dims, mge_dtype dt, int seed)
{
    mge_tensor t;
    CHECK_OK(mge_tensor_alloc(&t, dt, ndim, dims, &err), err);
    for (int64_t i = 0; i < mge_tensor_numel(&t); i++) {
        float v = (float)(((i * 13 + seed * 5) % 17) - 8) / 4.0f;
        if (dt == MGE_F32)
            ((float *)t.data)[i] = v;
        else if (dt == MGE_I32)
            ((int32_t *)t.data)[i] = (int32_t)((i + seed) % 10);
    }
    return t;
}

/* ---------------------------------------------------------------- tests */

static void test_mlp_batches(void)
{
    mge_graph *g = mlp();
    for (int bi = 0; bi < 2; bi++) {
        mge_exec_opts o = {.backend = backends[bi], .threads = bi + 1};
        mge_exec *e;
        CHECK_OK(mge_exec_create(g, &o, &e, &err), err);
        if (!e)
            continue;
        CHECK(mge_exec_ninputs(e) == 1 && mge_exec_input(e, 0) == mge_graph_find(g, "x"));
        CHECK(mge_exec_noutputs(e) == 1 && mge_exec_output(e, 0) == mge_graph_find(g, "fc2"));
        CHECK(mge_exec_input(e, 1) == -1 && mge_exec_result(e, 0) == NULL);
        int64_t batches[5] = {2, 5, 0, 2, 1};
        for (int r = 0; r < 5; r++) {
            int64_t n = batches[r], xd[2] = {n, 4};
            mge_tensor x = make_input(2, xd, MGE_F32, r);
            const mge_tensor *ins[1] = {&x};
            CHECK_OK(mge_exec_run(e, ins, &err), err);
            const mge_tensor *y = mge_exec_result(e, 0);
            CHECK(y && y->dtype == MGE_F32 && y->ndim == 2 && y->dims[0] == n && y->dims[1] == 3);
            if (y && y->ndim == 2 && y->dims[0] == n) {
                double want[5 * 3];
                mlp_hand(g, x.data, n, want);
                for (int64_t i = 0; i < n * 3; i++)
                    CHECK_NEAR(((const float *)y->data)[i], want[i], 1e-4);
            }
            mge_tensor_free(&x);
        }
        mge_plan_stats s1, s5, s0;
        CHECK_OK(mge_exec_stats(e, MGE_BATCH(1), &s1, &err), err);
        CHECK_OK(mge_exec_stats(e, MGE_BATCH(5), &s5, &err), err);
        CHECK_OK(mge_exec_stats(e, NULL, &s0, &err), err); /* the last run's batch: 1 */
        CHECK(s5.arena_bytes > s1.arena_bytes && s0.arena_bytes == s1.arena_bytes);
        CHECK(s1.ninplace == 1);  /* act over fc1 */
        CHECK(s1.lower_bound <= s1.arena_bytes);
        mge_exec_free(e);
    }
    mge_graph_free(g);
}

/* Plans at more batch sizes than the cache holds, then back. */
static void test_plan_cache(void)
{
    mge_graph *g = mlp();
    mge_exec *e;
    CHECK_OK(mge_exec_create(g, NULL, &e, &err), err);
    if (!e)
        goto done;
    for (int r = 0; r < 12; r++) {
        int64_t n = 1 + (r * 5) % 7, xd[2] = {n, 4};
        mge_tensor x = make_input(2, xd, MGE_F32, r);
        const mge_tensor *ins[1] = {&x};
        CHECK_OK(mge_exec_run(e, ins, &err), err);
        const mge_tensor *y = mge_exec_result(e, 0);
        double want[7 * 3];
        mlp_hand(g, x.data, n, want);
        CHECK(y && y->dims[0] == n);
        for (int64_t i = 0; y && i < n * 3; i++)
            CHECK_NEAR(((const float *)y->data)[i], want[i], 1e-4);
        mge_tensor_free(&x);
    }
    mge_exec_free(e);
done:
    mge_graph_free(g);
}

static void expect_msg(mge_exec *e, const mge_tensor *const *ins, const char *want)
{
    mge_error_clear(&err);
    mge_status s = mge_exec_run(e, ins, &err);
    CHECK(s == MGE_ERR_SHAPE || s == MGE_ERR_INVALID);
    CHECK_MSG(strcmp(err.msg, want) == 0, "got \"%s\", want \"%s\"", err.msg, want);
    CHECK(mge_exec_result(e, 0) == NULL);
}

static void test_input_checks(void)
{
    mge_graph *g = mge_graph_new();
    int64_t xd[4] = {MGE_DIM_N, 1, 28, 28}, yd[2] = {MGE_DIM_N, 784};
    int x = mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 4, xd, &err);
    int y = mge_graph_add_value(g, "y", MGE_VAL_INPUT, MGE_F32, 2, yd, &err);
    int f = un(g, "f", MGE_OP_FLATTEN, x);
    int in[2] = {f, y};
    int s = node(g, "s", MGE_OP_ADD, 2, in, 0, NULL);
    CHECK_OK(mge_graph_add_output(g, s, &err), err);
    mge_exec *e;
    CHECK_OK(mge_exec_create(g, NULL, &e, &err), err);
    if (!e)
        goto done;
    CHECK(mge_exec_ninputs(e) == 2);
    int64_t bad1[4] = {4, 3, 28, 28}, good4[4] = {4, 1, 28, 28}, y4[2] = {4, 784}, y3[2] = {3, 784};
    int64_t y5[2] = {4, 785}, flat[1] = {784};
    mge_tensor tb = make_input(4, bad1, MGE_F32, 0), tx = make_input(4, good4, MGE_F32, 1);
    mge_tensor ty = make_input(2, y4, MGE_F32, 2), ty3 = make_input(2, y3, MGE_F32, 3);
    mge_tensor ty5 = make_input(2, y5, MGE_F32, 3), ti = make_input(4, good4, MGE_I32, 0);
    mge_tensor tr = make_input(1, flat, MGE_F32, 0);
    const mge_tensor *a1[2] = {&tb, &ty};
    expect_msg(e, a1, "input 'x': expected f32[N,1,28,28], got f32[4,3,28,28]");
    const mge_tensor *a2[2] = {&ti, &ty};
    expect_msg(e, a2, "input 'x': expected f32[N,1,28,28], got i32[4,1,28,28]");
    const mge_tensor *a3[2] = {&tx, &tr};
    expect_msg(e, a3, "input 'y': expected f32[N,784], got f32[784]");
    const mge_tensor *a4[2] = {&tx, &ty5};
    expect_msg(e, a4, "input 'y': expected f32[N,784], got f32[4,785]");
    const mge_tensor *a5[2] = {&tx, &ty3};
    expect_msg(e, a5, "N is 4 from x but 3 from y (got f32[3,784])");
    const mge_tensor *a6[2] = {&tx, NULL};
    expect_msg(e, a6, "input 'y': missing");
    expect_msg(e, NULL, "2 inputs expected, none given");
    mge_tensor nodata = tx;
    nodata.data = NULL;
    const mge_tensor *a7[2] = {&nodata, &ty};
    expect_msg(e, a7, "input 'x': f32[4,1,28,28] holds 0 bytes of data, needs 12544");
    /* and a good run after the failures */
    const mge_tensor *ok[2] = {&tx, &ty};
    CHECK_OK(mge_exec_run(e, ok, &err), err);
    const mge_tensor *r = mge_exec_result(e, 0);
    CHECK(r && r->dims[0] == 4 && r->dims[1] == 784);
    if (r)
        for (int i = 0; i < 4 * 784; i += 97)
            CHECK_NEAR(((float *)r->data)[i], ((float *)tx.data)[i] + ((float *)ty.data)[i], 1e-6);
    expect_msg(e, a5, "N is 4 from x but 3 from y (got f32[3,784])");
    mge_tensor_free(&tb), mge_tensor_free(&tx), mge_tensor_free(&ty), mge_tensor_free(&ty3);
    mge_tensor_free(&ty5), mge_tensor_free(&ti), mge_tensor_free(&tr);
    mge_exec_free(e);
done:
    mge_graph_free(g);
}

static void test_create_errors(void)
{
    mge_graph *g = mlp();
    mge_exec *e = (mge_exec *)1;
    mge_exec_opts o = {.backend = "tpu"};
    CHECK(mge_exec_create(g, &o, &e, &err) == MGE_ERR_UNSUPPORTED && e == NULL);
    CHECK(strstr(err.msg, "tpu") != NULL);
    int bad = g->nvalues + 3;
    mge_exec_opts o2 = {.noutputs = 1, .outputs = &bad};
    CHECK(mge_exec_create(g, &o2, &e, &err) == MGE_ERR_INVALID);
    mge_graph *empty = mge_graph_new();
    CHECK(mge_exec_create(empty, NULL, &e, &err) == MGE_ERR_INVALID);
    mge_graph_free(empty);
    /* a param without data fails at run, naming it */
    mge_tensor_free(g->values[mge_graph_find(g, "fc2.bias")].data);
    free(g->values[mge_graph_find(g, "fc2.bias")].data);
    g->values[mge_graph_find(g, "fc2.bias")].data = NULL;
    CHECK_OK(mge_exec_create(g, NULL, &e, &err), err);
    if (e) {
        int64_t xd[2] = {2, 4};
        mge_tensor x = make_input(2, xd, MGE_F32, 0);
        const mge_tensor *ins[1] = {&x};
        CHECK(mge_exec_run(e, ins, &err) == MGE_ERR_INVALID);
        CHECK_MSG(strstr(err.msg, "param 'fc2.bias' has no data") != NULL, "%s", err.msg);
        /* random init then it runs */
        mge_exec_free(e);
        CHECK_OK(mge_graph_init_params(g, 1, &err), err);
        CHECK_OK(mge_exec_create(g, NULL, &e, &err), err);
        CHECK_OK(mge_exec_run(e, ins, &err), err);
        mge_exec_free(e);
        mge_tensor_free(&x);
    }
    mge_graph_free(g);
}

/* label[N], x[N,1,12,12] -> conv -> relu -> maxpool -> flatten -> fc1 -> relu -> fc2; loss = cross_entropy */
static mge_graph *lenet(int *fc2, int *loss)
{
    mge_graph *g = mge_graph_new();
    int64_t ld[1] = {MGE_DIM_N}, xd[4] = {MGE_DIM_N, 1, 12, 12};
    int label = mge_graph_add_value(g, "label", MGE_VAL_INPUT, MGE_I32, 1, ld, &err);
    int x = mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 4, xd, &err);
    mge_attr ca[3] = {A(MGE_KEY_out, 4), A(MGE_KEY_kernel, 3), A(MGE_KEY_pad, 1)};
    int h = un(g, "relu1", MGE_OP_RELU, layer(g, "conv1", MGE_OP_CONV2D, x, 3, ca));
    mge_attr pa = A(MGE_KEY_kernel, 2);
    h = node(g, "pool1", MGE_OP_MAXPOOL2D, 1, &h, 1, &pa);
    h = un(g, "flat", MGE_OP_FLATTEN, h);
    h = un(g, "act1", MGE_OP_RELU, linear(g, "fc1", h, 16));
    *fc2 = linear(g, "fc2", h, 5);
    int in[2] = {*fc2, label};
    *loss = node(g, "loss", MGE_OP_CROSS_ENTROPY, 2, in, 0, NULL);
    CHECK_OK(mge_graph_add_output(g, *fc2, &err), err);
    CHECK_OK(mge_graph_add_output(g, *loss, &err), err);
    fill_params(g);
    return g;
}

static void test_output_subsets(void)
{
    int fc2, loss;
    mge_graph *g = lenet(&fc2, &loss);
    int label = mge_graph_find(g, "label"), x = mge_graph_find(g, "x");
    int64_t xd[4] = {3, 1, 12, 12}, ld[1] = {3};
    mge_tensor tx = make_input(4, xd, MGE_F32, 1), tl = make_input(1, ld, MGE_I32, 2);
    float logits[2][15];
    for (int bi = 0; bi < 2; bi++) {
        mge_exec_opts o = {.backend = backends[bi], .noutputs = 1, .outputs = &fc2};
        mge_exec *e;
        CHECK_OK(mge_exec_create(g, &o, &e, &err), err);
        if (!e)
            continue;
        CHECK(mge_exec_ninputs(e) == 1 && mge_exec_input(e, 0) == x);
        const mge_tensor *ins[1] = {&tx};
        CHECK_OK(mge_exec_run(e, ins, &err), err);
        const mge_tensor *r = mge_exec_result(e, 0);
        CHECK(r && r->ndim == 2 && r->dims[0] == 3 && r->dims[1] == 5);
        if (r)
            memcpy(logits[bi], r->data, sizeof logits[bi]);
        mge_exec_free(e);
    }
    for (int i = 0; i < 15; i++)
        CHECK_NEAR(logits[0][i], logits[1][i], 1e-4 * (1 + fabs(logits[0][i])));
    /* all outputs: both inputs, in graph input order (label was declared first) */
    mge_exec *e;
    CHECK_OK(mge_exec_create(g, NULL, &e, &err), err);
    if (e) {
        CHECK(mge_exec_ninputs(e) == 2 && mge_exec_input(e, 0) == label && mge_exec_input(e, 1) == x);
        CHECK(mge_exec_noutputs(e) == 2);
        const mge_tensor *ins[2] = {&tl, &tx};
        CHECK_OK(mge_exec_run(e, ins, &err), err);
        const mge_tensor *r = mge_exec_result(e, 0), *l = mge_exec_result(e, 1);
        CHECK(r && l && l->dtype == MGE_F32 && mge_tensor_numel(l) == 1);
        if (r && l) {
            double want = 0;
            const float *z = r->data;
            for (int i = 0; i < 3; i++) {
                CHECK_NEAR(z[i * 5], logits[0][i * 5], 1e-4 * (1 + fabs(logits[0][i * 5])));
                double m = z[i * 5], s = 0;
                for (int j = 1; j < 5; j++)
                    m = z[i * 5 + j] > m ? z[i * 5 + j] : m;
                for (int j = 0; j < 5; j++)
                    s += exp(z[i * 5 + j] - m);
                want += -(z[i * 5 + ((int32_t *)tl.data)[i]] - m - log(s));
            }
            CHECK_NEAR(*(const float *)l->data, want / 3, 1e-4);
        }
        /* a label out of range: the kernel's message, prefixed with the node name */
        ((int32_t *)tl.data)[1] = 9;
        CHECK(mge_exec_run(e, ins, &err) != MGE_OK);
        CHECK_MSG(strncmp(err.msg, "loss: ", 6) == 0 && strstr(err.msg, "9"), "%s", err.msg);
        mge_exec_free(e);
    }
    /* only the loss: still both inputs */
    mge_exec_opts o = {.noutputs = 1, .outputs = &loss};
    CHECK_OK(mge_exec_create(g, &o, &e, &err), err);
    if (e)
        CHECK(mge_exec_ninputs(e) == 2);
    mge_exec_free(e);
    mge_tensor_free(&tx);
    mge_tensor_free(&tl);
    mge_graph_free(g);
}

/* Outputs that are an input, a param, a view of an input, a node and a view of it. */
static void test_output_kinds(void)
{
    mge_graph *g = mge_graph_new();
    int64_t xd[3] = {MGE_DIM_N, 2, 2};
    int x = mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 3, xd, &err);
    int xf = un(g, "xf", MGE_OP_FLATTEN, x);
    int h = linear(g, "fc", xf, 3);
    int hf = un(g, "hf", MGE_OP_FLATTEN, h);
    fill_params(g);
    int w = mge_graph_find(g, "fc.weight");
    int outs[5] = {x, w, xf, h, hf};
    mge_exec_opts o = {.noutputs = 5, .outputs = outs};
    mge_exec *e;
    CHECK_OK(mge_exec_create(g, &o, &e, &err), err);
    if (!e)
        goto done;
    CHECK(mge_exec_ninputs(e) == 1);
    int64_t d[3] = {2, 2, 2};
    mge_tensor tx = make_input(3, d, MGE_F32, 4);
    float orig[8];
    memcpy(orig, tx.data, sizeof orig);
    const mge_tensor *ins[1] = {&tx};
    CHECK_OK(mge_exec_run(e, ins, &err), err);
    const mge_tensor *r[5];
    for (int i = 0; i < 5; i++)
        r[i] = mge_exec_result(e, i);
    CHECK(r[0] && r[1] && r[2] && r[3] && r[4]);
    if (!r[0] || !r[1] || !r[2] || !r[3] || !r[4])
        goto out;
    memset(tx.data, 0, tx.nbytes); /* the caller reuses its input buffer */
    CHECK(r[0]->ndim == 3 && r[0]->dims[0] == 2 && memcmp(r[0]->data, orig, sizeof orig) == 0);
    CHECK(r[2]->ndim == 2 && r[2]->dims[1] == 4 && memcmp(r[2]->data, orig, sizeof orig) == 0);
    CHECK(r[1]->data == g->values[w].data->data);
    CHECK(r[3]->data == r[4]->data && r[4]->ndim == 2 && r[4]->dims[1] == 3);
    const float *wp = g->values[w].data->data, *bp = param(g, "fc.bias");
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) {
            double acc = bp[j];
            for (int k = 0; k < 4; k++)
                acc += (double)wp[j * 4 + k] * orig[i * 4 + k];
            CHECK_NEAR(((const float *)r[3]->data)[i * 3 + j], acc, 1e-5);
        }
out:
    mge_tensor_free(&tx);
    mge_exec_free(e);
done:
    mge_graph_free(g);
}

typedef struct hook_log {
    int calls, bad, last_node, last_phase;
} hook_log;

static void hook(void *ud, int nd, int phase)
{
    hook_log *h = ud;
    if (phase == 0 && (h->last_phase != 1 || nd <= h->last_node))
        h->bad++;
    if (phase == 1 && (h->last_phase != 0 || nd != h->last_node))
        h->bad++;
    h->calls++;
    h->last_node = nd;
    h->last_phase = phase;
}

static void test_hook(void)
{
    int fc2, loss;
    mge_graph *g = lenet(&fc2, &loss);
    mge_exec_opts o = {.noutputs = 1, .outputs = &fc2};
    mge_exec *e;
    CHECK_OK(mge_exec_create(g, &o, &e, &err), err);
    if (!e)
        goto done;
    hook_log h = {0, 0, -1, 1};
    mge_exec_set_hook(e, hook, &h);
    int64_t xd[4] = {2, 1, 12, 12};
    mge_tensor tx = make_input(4, xd, MGE_F32, 1);
    const mge_tensor *ins[1] = {&tx};
    CHECK_OK(mge_exec_run(e, ins, &err), err);
    CHECK(h.calls == 2 * (g->nnodes - 1)); /* every node but the loss, twice */
    CHECK(h.bad == 0);
    mge_exec_set_hook(e, NULL, NULL);
    CHECK_OK(mge_exec_run(e, ins, &err), err);
    CHECK(h.calls == 2 * (g->nnodes - 1));
    mge_tensor_free(&tx);
    mge_exec_free(e);
done:
    mge_graph_free(g);
}

/* Dropout: identity in eval; in training a mask that depends on the seed only. */
static void dropout_run(mge_graph *g, int training, int runs, float *out)
{
    mge_exec_opts o = {.training = training};
    mge_exec *e;
    CHECK_OK(mge_exec_create(g, &o, &e, &err), err);
    if (!e)
        return;
    int64_t xd[2] = {4, 16};
    mge_tensor tx;
    CHECK_OK(mge_tensor_alloc(&tx, MGE_F32, 2, xd, &err), err);
    for (int i = 0; i < 64; i++)
        ((float *)tx.data)[i] = 1.0f + (float)i;
    const mge_tensor *ins[1] = {&tx};
    for (int r = 0; r < runs; r++)
        CHECK_OK(mge_exec_run(e, ins, &err), err);
    const mge_tensor *y = mge_exec_result(e, 0);
    CHECK(y != NULL);
    if (y)
        memcpy(out, y->data, 64 * sizeof(float));
    mge_tensor_free(&tx);
    mge_exec_free(e);
}

static void test_training(void)
{
    mge_graph *g = mge_graph_new();
    int64_t xd[2] = {MGE_DIM_N, 16};
    int x = mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 2, xd, &err);
    mge_attr p;
    memset(&p, 0, sizeof p);
    p.key = MGE_KEY_p;
    p.f = 0.5;
    int d = node(g, "drop", MGE_OP_DROPOUT, 1, &x, 1, &p);
    CHECK_OK(mge_graph_add_output(g, d, &err), err);
    float ev[64], t1[64], t2[64], t3[64], t4[64];
    dropout_run(g, 0, 1, ev);
    dropout_run(g, 1, 1, t1);
    dropout_run(g, 1, 1, t2);
    dropout_run(g, 1, 2, t3); /* the second run draws a new mask */
    CHECK_OK(mge_graph_set_meta(g, "seed", "7", &err), err);
    dropout_run(g, 1, 1, t4);
    int zeros = 0;
    for (int i = 0; i < 64; i++) {
        CHECK(ev[i] == 1.0f + (float)i);
        CHECK(t1[i] == 0.0f || t1[i] == 2.0f * (1.0f + (float)i));
        zeros += t1[i] == 0.0f;
    }
    CHECK(zeros > 8 && zeros < 56);
    CHECK(memcmp(t1, t2, sizeof t1) == 0);
    CHECK(memcmp(t1, t3, sizeof t1) != 0);
    CHECK(memcmp(t1, t4, sizeof t1) != 0);
    mge_graph_free(g);
}

/* A small residual net: conv/batchnorm/relu, maxpool, blocks with and
 * without downsampling, global average pooling, flatten, linear. */
static int conv(mge_graph *g, const char *name, int x, int out, int k, int stride, int pad)
{
    mge_attr a[5] = {A(MGE_KEY_out, out), A(MGE_KEY_kernel, k), A(MGE_KEY_stride, stride), A(MGE_KEY_pad, pad),
                     A(MGE_KEY_bias, 0)};
    return layer(g, name, MGE_OP_CONV2D, x, 5, a);
}

static int block(mge_graph *g, const char *pre, int x, int out, int stride, int down)
{
    char n[64];
#define NM(s) (snprintf(n, sizeof n, "%s.%s", pre, s), n)
    /* one NM() per statement: n is one buffer, and the order in which a
     * call's arguments are evaluated is unspecified (clang -fsanitize=thread
     * named bn1 "relu1") */
    int h = conv(g, NM("conv1"), x, out, 3, stride, 1);
    h = layer(g, NM("bn1"), MGE_OP_BATCHNORM, h, 0, NULL);
    h = un(g, NM("relu1"), MGE_OP_RELU, h);
    h = conv(g, NM("conv2"), h, out, 3, 1, 1);
    h = layer(g, NM("bn2"), MGE_OP_BATCHNORM, h, 0, NULL);
    int id = x;
    if (down) {
        id = conv(g, NM("down.0"), x, out, 1, stride, 0);
        id = layer(g, NM("down.1"), MGE_OP_BATCHNORM, id, 0, NULL);
    }
    int in[2] = {h, id};
    h = node(g, NM("add"), MGE_OP_ADD, 2, in, 0, NULL);
    return un(g, NM("relu2"), MGE_OP_RELU, h);
#undef NM
}

static mge_graph *small_resnet(void)
{
    mge_graph *g = mge_graph_new();
    int64_t xd[4] = {MGE_DIM_N, 3, 16, 16};
    int h = mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 4, xd, &err);
    h = conv(g, "conv1", h, 8, 3, 1, 1);
    h = un(g, "relu", MGE_OP_RELU, layer(g, "bn1", MGE_OP_BATCHNORM, h, 0, NULL));
    mge_attr pa[3] = {A(MGE_KEY_kernel, 3), A(MGE_KEY_stride, 2), A(MGE_KEY_pad, 1)};
    h = node(g, "maxpool", MGE_OP_MAXPOOL2D, 1, &h, 3, pa);
    h = block(g, "layer1.0", h, 8, 1, 0);
    h = block(g, "layer1.1", h, 8, 1, 0);
    h = block(g, "layer2.0", h, 16, 2, 1);
    h = block(g, "layer2.1", h, 16, 1, 0);
    h = un(g, "flatten", MGE_OP_FLATTEN, un(g, "avgpool", MGE_OP_GLOBAL_AVGPOOL, h));
    /* neg may not overwrite h in place (h is read again by mul); mul may overwrite its input */
    int in[2] = {un(g, "neg", MGE_OP_NEG, h), h};
    h = linear(g, "fc", node(g, "mul", MGE_OP_MUL, 2, in, 0, NULL), 10);
    CHECK(h >= 0);
    CHECK_OK(mge_graph_add_output(g, h, &err), err);
    CHECK_OK(mge_graph_init_params(g, 3, &err), err);
    return g;
}

/* Runs g at batch on backend; every node value requested (nothing reused)
 * or only the graph's outputs (full reuse). Returns the first graph
 * output's values (malloc'd) or NULL. */
static float *run_net(const mge_graph *g, const char *backend, int threads, int every, int64_t batch, size_t *n)
{
    int *outs = malloc(sizeof(int) * (size_t)g->nvalues), no = 0;
    outs[no++] = g->outputs[0];
    for (int v = 0; every && v < g->nvalues; v++)
        if (g->values[v].kind == MGE_VAL_NODE && v != g->outputs[0])
            outs[no++] = v;
    mge_exec_opts o = {.backend = backend, .threads = threads, .noutputs = no, .outputs = outs};
    mge_exec *e;
    float *res = NULL;
    mge_tensor in[4];
    const mge_tensor *ins[4];
    int nin = 0;
    CHECK_OK(mge_exec_create(g, &o, &e, &err), err);
    if (!e)
        goto done;
    nin = mge_exec_ninputs(e);
    CHECK(nin >= 1 && nin <= 4);
    for (int i = 0; i < nin && i < 4; i++) {
        const mge_value *v = &g->values[mge_exec_input(e, i)];
        int64_t d[MGE_MAX_DIMS];
        for (int k = 0; k < v->ndim; k++)
            d[k] = v->dims[k] == MGE_DIM_N ? batch : v->dims[k];
        in[i] = make_input(v->ndim, d, v->dtype, i + 7);
        ins[i] = &in[i];
    }
    mge_status s = mge_exec_run(e, ins, &err);
    CHECK_OK(s, err);
    const mge_tensor *r = mge_exec_result(e, 0);
    if (!s && r) {
        *n = r->nbytes / sizeof(float);
        res = malloc(r->nbytes);
        memcpy(res, r->data, r->nbytes);
    }
    for (int i = 0; i < nin && i < 4; i++)
        mge_tensor_free(&in[i]);
    mge_exec_free(e);
done:
    free(outs);
    return res;
}

/* An executor of its own, for comparison: every value in its own
 * allocation, ref kernels called directly, views copied. */
static float *run_naive(const mge_graph *g, int64_t batch, size_t *n)
{
    int nv = g->nvalues;
    int *ndims = calloc((size_t)nv, sizeof *ndims);
    int64_t *dims = calloc((size_t)nv * MGE_MAX_DIMS, sizeof *dims);
    mge_tensor *t = calloc((size_t)nv, sizeof *t);
    float *res = NULL;
    CHECK_OK(mge_graph_shapes(g, MGE_BATCH(batch), ndims, dims, &err), err);
    for (int i = 0; i < g->ninputs; i++) {
        int v = g->inputs[i];
        t[v] = make_input(ndims[v], &dims[v * MGE_MAX_DIMS], g->values[v].dtype, i + 7);
    }
    for (int v = 0; v < nv; v++)
        if (g->values[v].data)
            CHECK_OK(mge_tensor_copy(&t[v], g->values[v].data, &err), err);
    mge_rng rng;
    mge_rng_seed(&rng, 0);
    mge_kctx ctx = {.threads = 1, .rng = &rng};
    for (int i = 0; i < g->nnodes; i++) {
        const mge_node *nd = &g->nodes[i];
        mge_tensor *in[64], *out[4];
        for (int k = 0; k < nd->nin; k++)
            in[k] = &t[nd->in[k]];
        for (int k = 0; k < nd->nout; k++) {
            int v = nd->out[k];
            out[k] = &t[v];
            CHECK_OK(mge_tensor_alloc(out[k], g->values[v].dtype, ndims[v], &dims[v * MGE_MAX_DIMS], &err), err);
        }
        if (mge_op_info(nd->op)->flags & MGE_OPF_ALIAS) {
            memcpy(out[0]->data, in[0]->data, out[0]->nbytes);
            continue;
        }
        const mge_kernel *k = mge_backend_kernel(mge_backend_ref(), nd->op, in[0]->dtype);
        CHECK(k && k->run);
        size_t ws = k && k->ws ? k->ws(nd, in, out, 1) : 0;
        ctx.ws = ws ? malloc(ws) : NULL;
        ctx.ws_size = ws;
        ctx.opname = mge_op_info(nd->op)->name;
        if (k && k->run)
            CHECK_OK(k->run(&ctx, nd, in, out, &err), err);
        free(ctx.ws);
    }
    const mge_tensor *r = &t[g->outputs[0]];
    *n = r->nbytes / sizeof(float);
    res = malloc(r->nbytes);
    memcpy(res, r->data, r->nbytes);
    for (int v = 0; v < nv; v++)
        mge_tensor_free(&t[v]);
    free(t);
    free(ndims);
    free(dims);
    return res;
}

/* Reuse must not change a single bit: the ref backend through the executor,
 * with every value requested (so kept) and with only the outputs (in-place,
 * views, shared offsets), against the naive executor above, at two batch
 * sizes; and the cpu backend, threaded, nearly equal. */
static void test_reuse_equivalence(void)
{
    mge_graph *nets[2] = {small_resnet(), NULL};
    CHECK_OK(mge_model_load("samples/nets/lenet.mgt", &nets[1], &err), err);
    if (nets[1])
        CHECK_OK(mge_graph_init_params(nets[1], 5, &err), err);
    for (int k = 0; k < 2; k++) {
        if (!nets[k])
            continue;
        mge_plan_stats st;
        CHECK_OK(mge_plan_graph(nets[k], MGE_BATCH(2), 0, NULL, &st, &err), err);
        CHECK(st.ninplace > 0 && st.arena_bytes < st.no_reuse_bytes);
        for (int64_t batch = 2; batch <= 3; batch++) {
            size_t n0 = 0, n1 = 0, n2 = 0, n3 = 0;
            float *all = run_net(nets[k], "ref", 1, 1, batch, &n0);
            float *naive = run_naive(nets[k], batch, &n3);
            CHECK(naive && n3 == n0);
            if (all && naive && n0 == n3)
                CHECK(memcmp(all, naive, n0 * sizeof(float)) == 0);
            free(naive);
            float *reuse = run_net(nets[k], "ref", 1, 0, batch, &n1);
            float *cpu = run_net(nets[k], "cpu", 2, 0, batch, &n2);
            CHECK(all && reuse && cpu && n0 == n1 && n0 == n2 && n0 == (size_t)batch * 10);
            if (all && reuse && n0 == n1)
                CHECK(memcmp(all, reuse, n0 * sizeof(float)) == 0);
            for (size_t i = 0; all && cpu && n0 == n2 && i < n0; i++)
                CHECK_NEAR(cpu[i], all[i], 1e-4 * (1 + fabs(all[i])));
            free(all);
            free(reuse);
            free(cpu);
        }
        mge_graph_free(nets[k]);
    }
}

int main(void)
{
    RUN(test_mlp_batches);
    RUN(test_plan_cache);
    RUN(test_input_checks);
    RUN(test_create_errors);
    RUN(test_output_subsets);
    RUN(test_output_kinds);
    RUN(test_hook);
    RUN(test_training);
    RUN(test_reuse_equivalence);
    return unit_done();
}
