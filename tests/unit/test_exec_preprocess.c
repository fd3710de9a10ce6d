/* test_exec_preprocess.c — mge_exec_opts.preprocess: the nodes that depend
 * on params, state and consts alone run once, on the first run; every run
 * gives the same bits as without preprocessing, at any batch; hooks and
 * plans see only the per-run nodes; training ignores the option. */
#include "internal.h"
#include "unit.h"
#include "unit_graph.h"

static mge_error err;

/* f16 weights cast to f32 and squared (two preprocessed nodes), a linear
 * layer and a relu per run; s, a preprocessed value, is also an output. */
static const char *src = "input x : f32[N,4]\n"
                         "const wh : f16[3,4] = [0.5, -1, 2, 0.25, 1.5, -0.75, 3, 1, -2, 0.125, 0.5, -1.5]\n"
                         "const b : f32[3] = [0.5, -1, 2]\n"
                         "w = cast(wh, dtype=f32)\n"
                         "s = mul(w, w)\n"
                         "y = linear(x, s, b, out=3)\n"
                         "r = relu(y)\n"
                         "output r, s\n";

typedef struct counter {
    int calls;
} counter;

static void count_hook(void *ud, int node, int end)
{
    (void)node;
    (void)end;
    ((counter *)ud)->calls++;
}

/* Runs g at each batch of bs (in order) with preprocess pre and training
 * tr; outputs of the last run go to res; hook calls are counted. */
static void run(const mge_graph *g, int pre, int tr, const int64_t *bs, int nb, ug_outs *res, int *calls)
{
    mge_exec_opts o = {.threads = 2, .preprocess = pre, .training = tr};
    mge_exec *e = NULL;
    counter c = {0};
    res->n = 0;
    CHECK_OK(mge_exec_create(g, &o, &e, &err), err);
    if (!e)
        return;
    mge_exec_set_hook(e, count_hook, &c);
    for (int k = 0; k < nb; k++) {
        int64_t dims[2] = {bs[k], 4};
        mge_tensor x;
        CHECK_OK(mge_tensor_alloc(&x, MGE_F32, 2, dims, &err), err);
        for (int64_t i = 0; i < bs[k] * 4; i++)
            ((float *)x.data)[i] = (float)((i * 5) % 7) - 3.0f;
        const mge_tensor *ins[1] = {&x};
        CHECK_OK(mge_exec_run(e, ins, &err), err);
        if (k == nb - 1)
            for (int i = 0; i < mge_exec_noutputs(e) && i < 4; i++) {
                CHECK_OK(mge_tensor_copy(&res->t[i], mge_exec_result(e, i), &err), err);
                res->n++;
            }
        mge_tensor_free(&x);
    }
    *calls = c.calls;
    mge_exec_free(e);
}

static int same_bits(const mge_tensor *a, const mge_tensor *b)
{
    return a->dtype == b->dtype && a->nbytes == b->nbytes && a->ndim == b->ndim &&
           memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->ndim) == 0 && memcmp(a->data, b->data, a->nbytes) == 0;
}

static void test_same_results(void)
{
    mge_graph *g = ug_parse(src);
    if (!g)
        return;
    /* batch changes after the preprocessing: new plans, same kept results */
    static const int64_t bs[] = {2, 5, 1, 5};
    for (int nb = 1; nb <= 4; nb++) {
        ug_outs a = {0}, b = {0};
        int ca = 0, cb = 0;
        run(g, 0, 0, bs, nb, &a, &ca);
        run(g, 1, 0, bs, nb, &b, &cb);
        CHECK(a.n == 2 && b.n == 2);
        for (int i = 0; i < a.n && i < b.n; i++)
            CHECK_MSG(same_bits(&a.t[i], &b.t[i]), "output %d differs after %d runs", i, nb);
        /* 4 nodes per run without, 2 with (cast and mul ran once, unhooked) */
        CHECK_MSG(ca == 2 * 4 * nb && cb == 2 * 2 * nb, "hook calls %d and %d after %d runs", ca, cb, nb);
        if (b.n == 2) {
            const float *s = b.t[1].data;
            CHECK(s[0] == 0.25f && s[1] == 1.0f && s[11] == 2.25f);   /* the squares of wh */
        }
        ug_outs_free(&a);
        ug_outs_free(&b);
    }
    mge_graph_free(g);
}

/* The per-run plan leaves the preprocessed values out of the arena. */
static void test_plan(void)
{
    mge_graph *g = ug_parse(src);
    if (!g)
        return;
    mge_plan_stats sa, sb;
    for (int pre = 0; pre < 2; pre++) {
        mge_exec_opts o = {.preprocess = pre};
        mge_exec *e = NULL;
        CHECK_OK(mge_exec_create(g, &o, &e, &err), err);
        if (!e)
            continue;
        CHECK_OK(mge_exec_stats(e, MGE_BATCH(3), pre ? &sb : &sa, &err), err);
        mge_exec_free(e);
    }
    /* without: w (s in place on it) and y (r in place); with: y alone */
    CHECK_MSG(sa.nbuffers == 2 && sb.nbuffers == 1, "buffers %d without, %d with", sa.nbuffers, sb.nbuffers);
    CHECK(sb.arena_bytes < sa.arena_bytes);
    mge_graph_free(g);
}

/* Training runs every node every time: params change between steps. */
static void test_training_ignores_it(void)
{
    mge_graph *g = ug_parse(src);
    if (!g)
        return;
    static const int64_t bs[] = {2, 2};
    ug_outs a = {0};
    int calls = 0;
    run(g, 1, 1, bs, 2, &a, &calls);
    CHECK_MSG(calls == 2 * 4 * 2, "hook calls %d", calls);
    ug_outs_free(&a);
    mge_graph_free(g);
}

int main(void)
{
    RUN(test_same_results);
    RUN(test_plan);
    RUN(test_training_ignores_it);
    return unit_done();
}
