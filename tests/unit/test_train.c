/* test_train.c — the trainer (lib/train.c): the training step as one graph,
 * loss going down on a learnable problem, the memory plan of the step,
 * thread-count independence, and export + resume continuing exactly. */
#include <math.h>

#include "internal.h"
#include "unit.h"
#include "unit_graph.h"

static mge_error err;

/* x f32[N,6] -> conv-free MLP with batchnorm and dropout -> 3 classes */
static mge_graph *small_net(void)
{
    static const char *src =
        "input x : f32[N,6]\n"
        "input label : i32[N]\n"
        "fc1 = linear(x, out=16)\n"
        "bn1 = batchnorm(fc1)\n"
        "act1 = relu(bn1)\n"
        "drop = dropout(act1, p=0.2)\n"
        "fc2 = linear(drop, out=3)\n"
        "loss = cross_entropy(fc2, label)\n"
        "output fc2\n"
        "minimize loss\n";
    mge_graph *g = NULL;
    if (mge_text_parse(src, strlen(src), ".", &g, &err)) {
        fprintf(stderr, "parse: %s\n", err.msg);
        return NULL;
    }
    if (mge_graph_init_params(g, 7, &err)) {
        fprintf(stderr, "init: %s\n", err.msg);
        mge_graph_free(g);
        return NULL;
    }
    return g;
}

/* batch k of a learnable rule: label = argmax(x[:, 0..2]) */
static void make_batch(int k, int64_t n, mge_tensor *x, mge_tensor *y)
{
    int64_t dx[2] = {n, 6}, dy[1] = {n};
    mge_tensor_alloc(x, MGE_F32, 2, dx, &err);
    mge_tensor_alloc(y, MGE_I32, 1, dy, &err);
    mge_rng r;
    mge_rng_seed(&r, 100 + (uint64_t)k);
    for (int64_t i = 0; i < n; i++) {
        float *row = (float *)x->data + i * 6;
        for (int j = 0; j < 6; j++)
            row[j] = mge_rng_normal(&r);
        int best = 0;
        for (int j = 1; j < 3; j++)
            if (row[j] > row[best])
                best = j;
        ((int32_t *)y->data)[i] = best;
    }
}

static mge_trainer *make_trainer(const mge_graph *g, mge_optim_kind kind, int threads)
{
    mge_train_opts o;
    memset(&o, 0, sizeof o);
    mge_optim_defaults(kind, &o.optim);
    if (kind == MGE_OPTIM_SGD) {
        o.optim.lr = 0.1;
        o.optim.momentum = 0.9;
    } else {
        o.optim.lr = 0.01;
    }
    o.threads = threads;
    o.seed = 3;
    mge_trainer *t = NULL;
    CHECK_OK(mge_trainer_create(g, &o, &t, &err), err);
    return t;
}

static double run_steps(mge_trainer *t, double lr, int from, int to, double *first)
{
    double last = 0;
    for (int k = from; k < to; k++) {
        mge_tensor x, y;
        make_batch(k % 8, 32, &x, &y);
        const mge_tensor *b[2] = {&x, &y};
        mge_train_result r;
        CHECK_OK(mge_trainer_step(t, b, lr, k + 1, &r, &err), err);
        if (k == from && first)
            *first = r.loss;
        last = r.loss;
        mge_tensor_free(&x);
        mge_tensor_free(&y);
    }
    return last;
}

/* the parameters of a trained model, concatenated, for comparisons */
static int same_params(const mge_graph *a, const mge_graph *b)
{
    for (int v = 0; v < a->nvalues; v++) {
        const mge_value *va = &a->values[v];
        if (va->kind != MGE_VAL_PARAM && va->kind != MGE_VAL_STATE)
            continue;
        int w = mge_graph_find(b, va->name);
        if (w < 0 || !va->data || !b->values[w].data || va->data->nbytes != b->values[w].data->nbytes ||
            memcmp(va->data->data, b->values[w].data->data, va->data->nbytes) != 0) {
            fprintf(stderr, "differs: %s\n", va->name);
            return 0;
        }
    }
    return 1;
}

static void test_loss_falls(void)
{
    mge_graph *g = small_net();
    CHECK(g != NULL);
    if (!g)
        return;
    for (int kind = 0; kind < 3; kind++) {
        mge_trainer *t = make_trainer(g, (mge_optim_kind)kind, 2);
        if (!t)
            continue;
        double first = 0, last = run_steps(t, kind == 0 ? 0.1 : 0.01, 0, 120, &first);
        CHECK_MSG(last < 0.5 * first, "optimizer %d: loss %g -> %g", kind, first, last);
        /* eval mode: accuracy on a fresh batch */
        mge_tensor x, y;
        make_batch(50, 256, &x, &y);
        const mge_tensor *b[2] = {&x, &y};
        mge_train_result r;
        CHECK_OK(mge_trainer_eval(t, b, &r, &err), err);
        CHECK_MSG(r.correct > 200, "optimizer %d: %lld of 256 correct", kind, (long long)r.correct);
        CHECK(r.count == 256);
        mge_tensor_free(&x);
        mge_tensor_free(&y);
        mge_trainer_free(t);
    }
    mge_graph_free(g);
}

static void test_plan_of_step(void)
{
    mge_graph *g = small_net();
    mge_trainer *t = g ? make_trainer(g, MGE_OPTIM_ADAM, 1) : NULL;
    CHECK(t != NULL);
    if (t) {
        mge_plan_stats st;
        CHECK_OK(mge_trainer_stats(t, MGE_BATCH(32), &st, &err), err);
        CHECK(st.arena_bytes > 0 && st.lower_bound > 0);
        CHECK(st.arena_bytes <= st.no_reuse_bytes);
        CHECK_MSG((double)st.arena_bytes <= 1.10 * (double)st.lower_bound, "arena %zu, lower bound %zu",
                  st.arena_bytes, st.lower_bound);
        /* the step graph holds gradient and update nodes beyond the model */
        CHECK(mge_trainer_graph(t)->nnodes > g->nnodes * 2);
    }
    mge_trainer_free(t);
    mge_graph_free(g);
}

static void test_threads_identical(void)
{
    mge_graph *g = small_net();
    if (!g) {
        CHECK(0);
        return;
    }
    mge_graph *out[2] = {NULL, NULL};
    int threads[2] = {1, 3};
    for (int i = 0; i < 2; i++) {
        mge_trainer *t = make_trainer(g, MGE_OPTIM_ADAM, threads[i]);
        if (!t)
            continue;
        run_steps(t, 0.01, 0, 20, NULL);
        CHECK_OK(mge_trainer_export(t, g, 1, &out[i], &err), err);
        mge_trainer_free(t);
    }
    CHECK(out[0] && out[1] && same_params(out[0], out[1]));
    mge_graph_free(out[0]);
    mge_graph_free(out[1]);
    mge_graph_free(g);
}

static void test_export_resume(void)
{
    mge_graph *g = small_net();
    if (!g) {
        CHECK(0);
        return;
    }
    for (int kind = 0; kind < 3; kind++) {
        double lr = kind == 0 ? 0.1 : 0.01;
        /* uninterrupted: 30 steps */
        mge_trainer *a = make_trainer(g, (mge_optim_kind)kind, 2);
        run_steps(a, lr, 0, 30, NULL);
        mge_graph *ga = NULL;
        CHECK_OK(mge_trainer_export(a, g, 1, &ga, &err), err);
        /* 12 steps, export through the file format, 18 more */
        mge_trainer *b = make_trainer(g, (mge_optim_kind)kind, 2);
        run_steps(b, lr, 0, 12, NULL);
        mge_graph *gb = NULL, *gr = NULL;
        CHECK_OK(mge_trainer_export(b, g, 1, &gb, &err), err);
        mge_buf buf = {0};
        CHECK_OK(mge_file_write(gb, NULL, &buf, &err), err);
        CHECK_OK(mge_file_read(buf.p, buf.n, 0, &gr, &err), err);
        mge_trainer *c = gr ? make_trainer(gr, (mge_optim_kind)kind, 2) : NULL;
        CHECK(c != NULL);
        if (c) {
            run_steps(c, lr, 12, 30, NULL);
            mge_graph *gc = NULL;
            CHECK_OK(mge_trainer_export(c, gr, 1, &gc, &err), err);
            CHECK_MSG(gc && ga && same_params(ga, gc), "optimizer %d: resumed run differs", kind);
            mge_graph_free(gc);
        }
        /* without the optimizer state the moments are lost: no exact resume for momentum methods */
        mge_trainer_free(a);
        mge_trainer_free(b);
        mge_trainer_free(c);
        mge_graph_free(ga);
        mge_graph_free(gb);
        mge_graph_free(gr);
        mge_buf_free(&buf);
    }
    mge_graph_free(g);
}

static void test_errors(void)
{
    static const char *src = "input x : f32[N,4]\nfc = linear(x, out=2)\noutput fc\n";
    mge_graph *g = NULL;
    CHECK_OK(mge_text_parse(src, strlen(src), ".", &g, &err), err);
    if (!g)
        return;
    CHECK_OK(mge_graph_init_params(g, 1, &err), err);
    mge_train_opts o;
    memset(&o, 0, sizeof o);
    mge_optim_defaults(MGE_OPTIM_SGD, &o.optim);
    mge_trainer *t = NULL;
    CHECK(mge_trainer_create(g, &o, &t, &err) == MGE_ERR_INVALID);
    CHECK(strstr(err.msg, "minimize") != NULL);
    CHECK(t == NULL);
    mge_graph_free(g);
}

int main(void)
{
    RUN(test_loss_falls);
    RUN(test_plan_of_step);
    RUN(test_threads_identical);
    RUN(test_export_resume);
    RUN(test_errors);
    return unit_done();
}
