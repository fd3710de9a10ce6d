/* test_prof_hooks.c — what profilers observe through the executor: the pool
 * task hook (valid thread ids, balanced phases, off when unset) and the
 * arena occupancy per node (never above the arena, its maximum the plan's
 * lower bound, zero for nodes that do not run). */
#include <stdatomic.h>

#include "mge.h"
#include "unit.h"

static mge_error err;

static mge_graph *parse(const char *src)
{
    mge_graph *g = NULL;
    CHECK_OK(mge_text_parse(src, strlen(src), ".", &g, &err), err);
    if (g)
        CHECK_OK(mge_graph_init_params(g, 1, &err), err);
    return g;
}

static const char *CONV_NET = "input x : f32[N,3,16,16]\n"
                              "input label : i32[N]\n"
                              "conv1 = conv2d(x, out=16, kernel=3, pad=1)\n"
                              "relu1 = relu(conv1)\n"
                              "pool1 = maxpool2d(relu1, kernel=2)\n"
                              "dead = sigmoid(pool1)\n"
                              "conv2 = conv2d(pool1, out=32, kernel=3, pad=1)\n"
                              "relu2 = relu(conv2)\n"
                              "flat = flatten(relu2)\n"
                              "fc = linear(flat, out=10)\n"
                              "loss = cross_entropy(fc, label)\n"
                              "output fc\n"
                              "minimize loss\n";

static mge_tensor input(mge_dtype dt, int ndim, const int64_t *dims)
{
    mge_tensor t;
    CHECK_OK(mge_tensor_alloc(&t, dt, ndim, dims, &err), err);
    int64_t n = mge_tensor_numel(&t);
    for (int64_t i = 0; i < n && t.data; i++) {
        if (dt == MGE_F32)
            ((float *)t.data)[i] = (float)((i * 37) % 19) / 19.0f - 0.5f;
        else
            ((int32_t *)t.data)[i] = (int32_t)(i % 10);
    }
    return t;
}

/* ---------------------------------------------------------------- task hook */

#define NT 3
typedef struct task_log {
    atomic_int starts[NT], ends[NT];
    int open[NT];            /* per thread: written by that thread only */
    atomic_int bad;
} task_log;

static void task_hook(void *ud, int thread, int phase)
{
    task_log *l = ud;
    if (thread < 0 || thread >= NT || (phase != 0 && phase != 1)) {
        atomic_fetch_add(&l->bad, 1);
        return;
    }
    if (phase == 0) {
        if (l->open[thread])
            atomic_fetch_add(&l->bad, 1);
        l->open[thread] = 1;
        atomic_fetch_add(&l->starts[thread], 1);
    } else {
        if (!l->open[thread])
            atomic_fetch_add(&l->bad, 1);
        l->open[thread] = 0;
        atomic_fetch_add(&l->ends[thread], 1);
    }
}

static int total(atomic_int *a)
{
    int s = 0;
    for (int i = 0; i < NT; i++)
        s += atomic_load(&a[i]);
    return s;
}

static void test_task_hook(void)
{
    mge_graph *g = parse(CONV_NET);
    if (!g)
        return;
    mge_exec_opts o = {.threads = NT};
    mge_exec *e = NULL;
    CHECK_OK(mge_exec_create(g, &o, &e, &err), err);
    if (!e) {
        mge_graph_free(g);
        return;
    }
    int64_t xd[4] = {8, 3, 16, 16};
    mge_tensor x = input(MGE_F32, 4, xd);
    const mge_tensor *in[1] = {&x};
    static task_log l;
    mge_exec_set_task_hook(e, task_hook, &l);
    for (int r = 0; r < 3; r++)
        CHECK_OK(mge_exec_run(e, in, &err), err);
    CHECK(atomic_load(&l.bad) == 0);
    CHECK(total(l.starts) > 0);
    CHECK(atomic_load(&l.starts[0]) > 0); /* the caller takes part in every run */
    for (int i = 0; i < NT; i++) {
        CHECK(atomic_load(&l.starts[i]) == atomic_load(&l.ends[i]));
        CHECK(!l.open[i]);
    }
    int before = total(l.starts);
    mge_exec_set_task_hook(e, NULL, NULL);
    CHECK_OK(mge_exec_run(e, in, &err), err);
    CHECK(total(l.starts) == before);
    mge_exec_free(e);

    /* one thread: no pool, so no calls (and setting the hook is harmless) */
    o.threads = 1;
    CHECK_OK(mge_exec_create(g, &o, &e, &err), err);
    if (e) {
        mge_exec_set_task_hook(e, task_hook, &l);
        CHECK_OK(mge_exec_run(e, in, &err), err);
        CHECK(total(l.starts) == before);
        mge_exec_free(e);
    }
    mge_tensor_free(&x);
    mge_graph_free(g);
}

/* ---------------------------------------------------------------- live bytes */

/* live[] of e at batch against its plan; ran[i]: node i runs. */
static void check_live(mge_exec *e, const mge_graph *g, int64_t batch, const char *ran)
{
    mge_plan_stats st;
    const mge_binding *b = batch > 0 ? MGE_BATCH(batch) : NULL; /* 0: the last run's */
    CHECK_OK(mge_exec_stats(e, b, &st, &err), err);
    size_t *live = calloc((size_t)g->nnodes, sizeof *live);
    CHECK_OK(mge_exec_live_bytes(e, b, live, &err), err);
    size_t max = 0;
    for (int i = 0; i < g->nnodes; i++) {
        CHECK_MSG(live[i] <= st.arena_bytes, "node %s: %zu live > arena %zu", g->nodes[i].name, live[i],
                  st.arena_bytes);
        if (ran && !ran[i])
            CHECK_MSG(live[i] == 0, "node %s does not run but has %zu live", g->nodes[i].name, live[i]);
        if (live[i] > max)
            max = live[i];
    }
    CHECK_MSG(max == st.lower_bound, "max live %zu, lower bound %zu", max, st.lower_bound);
    CHECK(max > 0);
    free(live);
}

static int64_t calls[64];
static void node_hook(void *ud, int node, int phase)
{
    (void)ud;
    if (phase == 1 && node >= 0 && node < 64)
        calls[node]++;
}

static void test_live_inference(void)
{
    mge_graph *g = parse(CONV_NET);
    if (!g)
        return;
    mge_exec *e = NULL;
    CHECK_OK(mge_exec_create(g, NULL, &e, &err), err);
    if (!e) {
        mge_graph_free(g);
        return;
    }
    int64_t xd[4] = {4, 3, 16, 16};
    mge_tensor x = input(MGE_F32, 4, xd);
    const mge_tensor *in[1] = {&x};
    memset(calls, 0, sizeof calls);
    mge_exec_set_hook(e, node_hook, NULL);
    CHECK_OK(mge_exec_run(e, in, &err), err);
    char ran[64] = {0};
    for (int i = 0; i < g->nnodes && i < 64; i++)
        ran[i] = calls[i] > 0;
    int dead = mge_graph_find(g, "dead");
    CHECK(dead >= 0 && !ran[g->values[dead].producer]);
    check_live(e, g, 4, ran);
    check_live(e, g, 1, ran);    /* another batch: its own plan */
    check_live(e, g, 0, ran);    /* the last run's batch */
    /* the first node's output is live while it runs */
    size_t live[64];
    CHECK_OK(mge_exec_live_bytes(e, MGE_BATCH(4), live, &err), err);
    CHECK(live[0] >= (size_t)4 * 16 * 16 * 16 * 4);
    mge_tensor_free(&x);
    mge_exec_free(e);
    mge_graph_free(g);
}

static void test_live_training(void)
{
    mge_graph *g = parse(CONV_NET);
    if (!g)
        return;
    mge_train_opts o;
    memset(&o, 0, sizeof o);
    mge_optim_defaults(MGE_OPTIM_SGD, &o.optim);
    mge_trainer *t = NULL;
    CHECK_OK(mge_trainer_create(g, &o, &t, &err), err);
    if (!t) {
        mge_graph_free(g);
        return;
    }
    int64_t xd[4] = {2, 3, 16, 16}, ld[1] = {2};
    mge_tensor x = input(MGE_F32, 4, xd), y = input(MGE_I32, 1, ld);
    const mge_tensor *in[2] = {&x, &y};
    mge_train_result r;
    CHECK_OK(mge_trainer_step(t, in, 0.01, 1, &r, &err), err);
    const mge_graph *tg = mge_trainer_graph(t);
    check_live(mge_trainer_exec(t), tg, 2, NULL);
    mge_tensor_free(&x);
    mge_tensor_free(&y);
    mge_trainer_free(t);
    mge_graph_free(g);
}

int main(void)
{
    RUN(test_task_hook);
    RUN(test_live_inference);
    RUN(test_live_training);
    return unit_done();
}
