/* test_device.c — the device layer: the sim backend's queue really runs
 * apart from the host (a kernel waits for the host to go on), its memory
 * starts as NaN, asynchronous failures surface at sync, events order a
 * download; placement and copies in an executor on sim; device-resident
 * params and mark_changed; prepared state made once per node; the plugin
 * loader's errors. */
#include "backend.h"
#include "place.h"
#include "unit_graph.h"

#include <stdatomic.h>
#include <time.h>

static atomic_int host_went_on, kernel_saw_host;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Waits (up to 5 s) for the host to pass the launch: only an asynchronous
 * queue lets it. */
static mge_status wait_kernel(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                              mge_error *err)
{
    double t0 = now_s();
    while (!atomic_load(&host_went_on) && now_s() - t0 < 5)
        ;
    atomic_store(&kernel_saw_host, atomic_load(&host_went_on));
    float *y = out[0]->data;
    const float *x = in[0]->data;
    for (int64_t i = 0; i < mge_tensor_numel(out[0]); i++)
        y[i] = x[i] * 2;
    return MGE_OK;
}

static mge_status fail_kernel(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                              mge_error *err)
{
    return mge_error_set(err, MGE_ERR_INVALID, "deliberate failure");
}

static void test_sim_queue(void)
{
    const mge_backend_iface *be = mge_backend_sim_iface();
    mge_error err = {0};
    mge_device *d;
    CHECK_OK(be->open(0, 1, mge_backend_cpu(), &d, &err), err);
    const size_t n = 1000;
    float *dx = be->alloc(d, n * 4), *dy = be->alloc(d, n * 4);
    CHECK(dx && dy);
    /* fresh device memory reads as NaN */
    float probe[4];
    CHECK_OK(be->download(d, probe, dx, sizeof probe, &err), err);
    CHECK_OK(be->sync(d, &err), err);
    CHECK(isnan(probe[0]) && isnan(probe[3]));
    float hx[1000], hy[1000];
    for (size_t i = 0; i < n; i++)
        hx[i] = (float)i;
    CHECK_OK(be->upload(d, dx, hx, sizeof hx, &err), err);
    memset(hx, 0, sizeof hx);   /* the upload staged its source */

    mge_graph *g = mge_graph_new();
    int64_t dims[1] = {1000};
    int x = mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 1, dims, &ug_err);
    int yv = un(g, "y", MGE_OP_RELU, x);
    CHECK(yv >= 0);
    mge_tensor tx, ty;
    CHECK_OK(mge_tensor_init(&tx, MGE_F32, 1, dims, &err), err);
    CHECK_OK(mge_tensor_init(&ty, MGE_F32, 1, dims, &err), err);
    tx.data = dx;
    ty.data = dy;
    mge_tensor *in[1] = {&tx}, *out[1] = {&ty};
    mge_kernel k = {.run = wait_kernel};
    mge_kctx ctx = {0};
    ctx.threads = 1;
    ctx.opname = mge_op_info(g->nodes[0].op)->name;
    atomic_store(&host_went_on, 0);
    CHECK_OK(be->launch(d, &k, &ctx, &g->nodes[0], in, out, &err), err);
    atomic_store(&host_went_on, 1);
    CHECK_OK(be->download(d, hy, dy, sizeof hy, &err), err);
    mge_event *ev = be->event_record(d);
    CHECK(ev != NULL);
    CHECK_OK(be->event_wait(d, ev, &err), err);
    be->event_free(d, ev);
    CHECK_MSG(atomic_load(&kernel_saw_host), "the launch waited for the kernel: the queue is not asynchronous");
    int ok = 1;
    for (size_t i = 0; i < n; i++)
        ok &= hy[i] == 2.0f * (float)i;
    CHECK_MSG(ok, "the download after the event does not hold the kernel's result");

    /* a failure on the queue surfaces at the next sync, naming the node */
    mge_kernel kf = {.run = fail_kernel};
    CHECK_OK(be->launch(d, &kf, &ctx, &g->nodes[0], in, out, &err), err);
    mge_error e2 = {0};
    CHECK(be->sync(d, &e2) == MGE_ERR_INVALID);
    CHECK_MSG(strstr(e2.msg, "y: deliberate failure") != NULL, "%s", e2.msg);
    CHECK_OK(be->sync(d, &err), err);   /* reported once */

    mge_devstats st;
    be->stats(d, &st);
    CHECK(st.uploads == 1 && st.upload_bytes == 4000 && st.downloads == 2 && st.launches == 2);
    CHECK(st.mem_in_use == 2 * 4032 && st.mem_peak == 2 * 4032);   /* rounded to 64 bytes */
    be->free(d, dx);
    be->free(d, dy);
    be->stats(d, &st);
    CHECK(st.mem_in_use == 0);
    be->close(d);
    mge_graph_free(g);
}

/* x -> conv -> relu -> maxpool -> flatten -> linear: pooling falls back to the host */
static mge_graph *small_net(void)
{
    mge_graph *g = ug_parse("input x : f32[N,2,6,6]\n"
                            "c = conv2d(x, out=3, kernel=3, pad=1)\n"
                            "r = relu(c)\n"
                            "p = maxpool2d(r, kernel=2)\n"
                            "f = flatten(p)\n"
                            "y = linear(f, out=4)\n"
                            "output y\n");
    mge_error err = {0};
    CHECK_OK(mge_graph_init_params(g, 7, &err), err);
    return g;
}

static void run_one(mge_exec *e, const mge_tensor *x, mge_tensor *y)
{
    mge_error err = {0};
    const mge_tensor *in[1] = {x};
    CHECK_OK(mge_exec_run(e, in, &err), err);
    const mge_tensor *r = mge_exec_result(e, 0);
    CHECK(r != NULL);
    if (r)
        CHECK_OK(mge_tensor_copy(y, r, &err), err);
}

static void test_exec_on_sim(void)
{
    setenv("MGE_SIM_OPS", "default", 1);
    mge_graph *g = small_net();
    mge_error err = {0};
    mge_rng rng;
    mge_rng_seed(&rng, 3);
    mge_tensor x, ycpu = {0}, ysim = {0}, y2 = {0};
    int64_t dims[4] = {2, 2, 6, 6};
    CHECK_OK(mge_tensor_alloc(&x, MGE_F32, 4, dims, &err), err);
    ug_uniform(&x, &rng, -1, 1);
    mge_exec *ec, *es;
    mge_exec_opts o = {0};
    CHECK_OK(mge_exec_create(g, &o, &ec, &err), err);
    o.device = "sim";
    CHECK_OK(mge_exec_create(g, &o, &es, &err), err);
    CHECK(mge_exec_graph(ec) == g);
    const mge_graph *pg = mge_exec_graph(es);
    CHECK(pg != g);
    CHECK(strcmp(mge_exec_device(es), "sim") == 0);
    /* the caller's value numbers still hold */
    CHECK(mge_exec_input(es, 0) == mge_graph_find(g, "x"));
    CHECK(mge_exec_output(es, 0) == mge_graph_find(g, "y"));
    int copies = 0, pool_host = 0, conv_sim = 0;
    for (int i = 0; i < pg->nnodes; i++) {
        const mge_node *n = &pg->nodes[i];
        copies += n->op == MGE_OP_COPY;
        if (n->op == MGE_OP_MAXPOOL2D)
            pool_host = strcmp(mge_exec_node_device(es, i), "cpu") == 0;
        if (n->op == MGE_OP_CONV2D)
            conv_sim = strcmp(mge_exec_node_device(es, i), "sim") == 0;
    }
    /* x up; r down to the pool; the view f up to linear; y down */
    CHECK_MSG(copies == 4, "%d copies", copies);
    CHECK(pool_host && conv_sim);
    run_one(ec, &x, &ycpu);
    run_one(es, &x, &ysim);
    CHECK(ycpu.nbytes == ysim.nbytes && ycpu.nbytes && memcmp(ycpu.data, ysim.data, ycpu.nbytes) == 0);
    mge_devstats st;
    size_t arena, lower, persistent;
    CHECK_OK(mge_exec_device_stats(es, &st, &arena, &lower, &persistent, &err), err);
    /* conv and linear weights and biases, uploaded once */
    CHECK_MSG(persistent == (3 * 2 * 9 + 3 + 4 * 27 + 4) * 4, "%zu", persistent);
    CHECK(st.uploads == 4 + 2 && st.downloads == 2);
    CHECK(st.mem_peak >= persistent + arena && arena >= lower && lower > 0);
    run_one(es, &x, &y2);
    CHECK_OK(mge_exec_device_stats(es, &st, NULL, NULL, NULL, &err), err);
    CHECK_MSG(st.uploads == 4 + 2 + 2, "weights went up again: %lld uploads", (long long)st.uploads);
    /* conv and linear were prepared once (sim checks each launch gets its state) */
    CHECK_MSG(st.prepared == 2, "%lld prepared", (long long)st.prepared);
    CHECK(memcmp(y2.data, ysim.data, y2.nbytes) == 0);
    mge_tensor_free(&y2);

    /* a changed weight reaches the device only when marked */
    int w = mge_graph_find(g, "y.weight");
    float *wd = g->values[w].data->data;
    for (int i = 0; i < 4 * 27; i++)
        wd[i] *= 2;
    run_one(es, &x, &y2);
    CHECK(memcmp(y2.data, ysim.data, y2.nbytes) == 0);
    mge_tensor_free(&y2);
    mge_exec_mark_changed(es, w);
    run_one(es, &x, &y2);
    mge_tensor_free(&ycpu);
    run_one(ec, &x, &ycpu);
    CHECK(memcmp(y2.data, ysim.data, y2.nbytes) != 0);
    CHECK(memcmp(y2.data, ycpu.data, y2.nbytes) == 0);
    mge_exec_free(ec);
    mge_exec_free(es);

    /* nothing claimed: no copies, the same result */
    setenv("MGE_SIM_OPS", "none", 1);
    mge_tensor_free(&ysim);
    CHECK_OK(mge_exec_create(g, &o, &es, &err), err);
    CHECK(ug_count_op(mge_exec_graph(es), MGE_OP_COPY) == 0);
    run_one(es, &x, &ysim);
    CHECK(memcmp(ysim.data, ycpu.data, ysim.nbytes) == 0);
    CHECK_OK(mge_exec_device_stats(es, &st, NULL, NULL, &persistent, &err), err);
    CHECK(st.uploads == 0 && st.downloads == 0 && persistent == 0);
    mge_exec_free(es);
    setenv("MGE_SIM_OPS", "default", 1);
    mge_tensor_free(&x);
    mge_tensor_free(&ycpu);
    mge_tensor_free(&ysim);
    mge_tensor_free(&y2);
    mge_graph_free(g);
}

static void test_device_names(void)
{
    const mge_backend_iface *be;
    int idx;
    mge_error err = {0};
    CHECK_OK(mge_device_backend("sim:0", &be, &idx, &err), err);
    CHECK(be == mge_backend_sim_iface() && idx == 0);
    CHECK_OK(mge_device_backend(NULL, &be, &idx, &err), err);
    CHECK(be == mge_backend_cpu_iface());
    CHECK(mge_device_backend("sim:1", &be, &idx, &err) == MGE_ERR_INVALID);
    CHECK(mge_device_backend("sim:", &be, &idx, &err) == MGE_ERR_INVALID);
    CHECK(mge_device_backend("../x", &be, &idx, &err) == MGE_ERR_INVALID);
    CHECK(mge_device_backend("nosuchdev", &be, &idx, &err) == MGE_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "no plugin libmge-nosuchdev.so (looked in ") != NULL, "%s", err.msg);
    CHECK(mge_device_known("cuda:3") && mge_device_known("sim") && !mge_device_known("tpu"));
    const char *plugins = getenv("MGE_TEST_PLUGINS");
    if (!plugins) {
        printf("test_device: plugin checks skipped: MGE_TEST_PLUGINS unset (make check sets it)\n");
        return;
    }
    setenv("MGE_BACKEND_PATH", plugins, 1);
    CHECK(mge_device_backend("badabi", &be, &idx, &err) == MGE_ERR_UNSUPPORTED);
    char want_abi[128];
    snprintf(want_abi, sizeof want_abi, "libmge-badabi.so is built for backend ABI version %u; this libmge needs %u",
             MGE_BACKEND_ABI + 100, MGE_BACKEND_ABI);
    CHECK_MSG(strstr(err.msg, want_abi) != NULL, "%s", err.msg);
    CHECK_OK(mge_device_backend("testnull", &be, &idx, &err), err);
    CHECK(be && strcmp(be->name, "testnull") == 0);
    unsetenv("MGE_BACKEND_PATH");
}

int main(void)
{
    RUN(test_sim_queue);
    RUN(test_exec_on_sim);
    RUN(test_device_names);
    return unit_done();
}
