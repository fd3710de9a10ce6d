/* test_rnn.c — lstm and gru: parameter names and shapes (PyTorch's),
 * shapes at symbolic S and N, a prefix property over sequence lengths,
 * hand-computed one-unit results, the clear messages for bad parameters,
 * state and attributes, the gradients of x, h0, c0 and every param
 * against central differences (ref), with cpu against ref, the gradient
 * graph on symbolic S and N, and cpu bit for bit at 1 and 2 threads.
 * PyTorch checks the numbers at scale in tests/oracle/test_rnn.py. */
#include "internal.h"
#include "unit.h"
#include "unit_graph.h"
#include "unit_grad.h"

static mge_error err;

static int64_t sym(const char *s)
{
    int64_t c = 0;
    CHECK_OK(mge_dim_symbol(s, strlen(s), &c, &err), err);
    return c;
}

static void shape_is(const mge_graph *g, const char *name, const char *want)
{
    int v = mge_graph_find(g, name);
    CHECK_MSG(v >= 0, "no value %s", name);
    if (v < 0)
        return;
    char b[128];
    size_t k = (size_t)snprintf(b, sizeof b, "[");
    for (int d = 0; d < g->values[v].ndim; d++) {
        char db[32];
        k += (size_t)snprintf(b + k, sizeof b - k, "%s%s", d ? "," : "",
                              mge_dim_str(g->values[v].dims[d], db, sizeof db));
    }
    snprintf(b + k, sizeof b - k, "]");
    CHECK_MSG(strcmp(b, want) == 0, "%s: %s, expected %s", name, b, want);
}

static void test_params(void)
{
    mge_graph *g = ug_parse("input x : f32[5,3,8]\n"
                            "y, h, c = lstm(x, hidden_size=16, num_layers=2, bidirectional=true)\n"
                            "g1, g2 = gru(x, hidden_size=6, bias=false, batch_first=true)\n"
                            "output y\n");
    if (!g)
        return;
    shape_is(g, "y", "[5,3,32]");
    shape_is(g, "h", "[4,3,16]");
    shape_is(g, "c", "[4,3,16]");
    shape_is(g, "y.weight_ih_l0", "[64,8]");
    shape_is(g, "y.weight_hh_l0", "[64,16]");
    shape_is(g, "y.bias_ih_l0", "[64]");
    shape_is(g, "y.bias_hh_l0_reverse", "[64]");
    shape_is(g, "y.weight_ih_l1", "[64,32]");
    shape_is(g, "y.weight_ih_l1_reverse", "[64,32]");
    shape_is(g, "y.weight_hh_l1_reverse", "[64,16]");
    /* batch_first: x is [N=5, S=3, 8] */
    shape_is(g, "g1", "[5,3,6]");
    shape_is(g, "g2", "[1,5,6]");
    shape_is(g, "g1.weight_ih_l0", "[18,8]");
    CHECK(mge_graph_find(g, "g1.bias_ih_l0") < 0);
    const mge_node *n = ug_producer(g, "y");
    CHECK(n && n->nin == 17);
    /* PyTorch's order: l0, l0_reverse, l1, l1_reverse; weight_ih, weight_hh, bias_ih, bias_hh */
    if (n && n->nin == 17) {
        CHECK(strcmp(g->values[n->in[5]].name, "y.weight_ih_l0_reverse") == 0);
        CHECK(strcmp(g->values[n->in[16]].name, "y.bias_hh_l1_reverse") == 0);
        /* uniform(1/sqrt(16)) */
        CHECK(g->values[n->in[1]].init && strstr(g->values[n->in[1]].init, "0.25"));
    }
    mge_graph_free(g);
    /* state given: the params are still created */
    g = ug_parse("input x : f32[5,3,8]\ninput h0 : f32[1,3,4]\ninput c0 : f32[1,3,4]\n"
                 "y = lstm(x, h0, c0, hidden_size=4)\noutput y\n");
    if (g) {
        shape_is(g, "y.weight_hh_l0", "[16,4]");
        mge_graph_free(g);
    }
}

static void test_symbolic(void)
{
    mge_graph *g = ug_parse("input x : f32[S,N,8]\n"
                            "input xb : f32[N,S,8]\n"
                            "y, h, c = lstm(x, hidden_size=4, num_layers=2, bidirectional=true)\n"
                            "gy, gh = gru(xb, hidden_size=5, batch_first=true)\n"
                            "output y\n");
    if (!g)
        return;
    shape_is(g, "y", "[S,N,8]");
    shape_is(g, "h", "[4,N,4]");
    shape_is(g, "c", "[4,N,4]");
    shape_is(g, "gy", "[N,S,5]");
    shape_is(g, "gh", "[1,N,5]");
    mge_binding b[2] = {{0}, {0}};
    int64_t sv[2] = {5, 9}, nv[2] = {2, 1};
    for (int k = 0; k < 2; k++) {
        CHECK_OK(mge_binding_set(&b[k], MGE_DIM_N, nv[k], &err), err);
        CHECK_OK(mge_binding_set(&b[k], sym("S"), sv[k], &err), err);
        int *nd = calloc((size_t)g->nvalues, sizeof *nd);
        int64_t *dims = calloc((size_t)g->nvalues * MGE_MAX_DIMS, sizeof *dims);
        CHECK_OK(mge_graph_shapes(g, &b[k], nd, dims, &err), err);
        int y = mge_graph_find(g, "y"), h = mge_graph_find(g, "h"), gy = mge_graph_find(g, "gy");
        CHECK(nd[y] == 3 && dims[y * MGE_MAX_DIMS] == sv[k] && dims[y * MGE_MAX_DIMS + 1] == nv[k]);
        CHECK(nd[h] == 3 && dims[h * MGE_MAX_DIMS] == 4 && dims[h * MGE_MAX_DIMS + 1] == nv[k]);
        CHECK(dims[gy * MGE_MAX_DIMS] == nv[k] && dims[gy * MGE_MAX_DIMS + 1] == sv[k]);
        free(nd);
        free(dims);
    }
    mge_graph_free(g);
}

/* Runs the one-input graph g (params already filled) on x, result 0 into y. */
static void run1(const mge_graph *g, const char *backend, const mge_tensor *x, mge_tensor *y)
{
    mge_exec *e = NULL;
    mge_exec_opts o = {.backend = backend, .threads = 2};
    CHECK_OK(mge_exec_create(g, &o, &e, &err), err);
    if (!e)
        return;
    const mge_tensor *ins[1] = {x};
    CHECK_OK(mge_exec_run(e, ins, &err), err);
    if (!err.code)
        CHECK_OK(mge_tensor_copy(y, mge_exec_result(e, 0), &err), err);
    mge_exec_free(e);
}

static void fill_params(mge_graph *g, uint64_t seed)
{
    mge_rng r;
    mge_rng_seed(&r, seed);
    for (int v = 0; v < g->nvalues; v++)
        if (g->values[v].kind == MGE_VAL_PARAM && !g->values[v].data) {
            mge_value *val = &g->values[v];
            val->data = calloc(1, sizeof *val->data);
            CHECK_OK(mge_tensor_alloc(val->data, val->dtype, val->ndim, val->dims, &err), err);
            ug_uniform(val->data, &r, -0.5f, 0.5f);
        }
}

/* Records of different lengths through one symbolic graph: a forward
 * (unidirectional) lstm or gru at step t sees only steps 0..t, so the
 * outputs of the shorter sequence are the longer one's first steps. */
static void test_prefix(void)
{
    const char *ops[2] = {"lstm", "gru"};
    for (int k = 0; k < 2; k++) {
        char src[256];
        snprintf(src, sizeof src, "input x : f32[S,N,3]\ny = %s(x, hidden_size=4, num_layers=2)\noutput y\n", ops[k]);
        mge_graph *g = ug_parse(src);
        if (!g)
            continue;
        fill_params(g, 7 + (uint64_t)k);
        const char *bes[2] = {"ref", "cpu"};
        for (int bi = 0; bi < 2; bi++) {
            mge_tensor xl, xs, yl = {0}, ys = {0};
            int64_t dl[3] = {7, 2, 3}, ds[3] = {4, 2, 3};
            CHECK_OK(mge_tensor_alloc(&xl, MGE_F32, 3, dl, &err), err);
            CHECK_OK(mge_tensor_alloc(&xs, MGE_F32, 3, ds, &err), err);
            mge_rng r;
            mge_rng_seed(&r, 3);
            ug_uniform(&xl, &r, -1, 1);
            memcpy(xs.data, xl.data, sizeof(float) * 4 * 2 * 3);
            run1(g, bes[bi], &xl, &yl);
            run1(g, bes[bi], &xs, &ys);
            CHECK(yl.ndim == 3 && yl.dims[0] == 7 && ys.ndim == 3 && ys.dims[0] == 4 && ys.dims[2] == 4);
            if (yl.data && ys.data) {
                double worst = 0;
                for (int64_t i = 0; i < 4 * 2 * 4; i++)
                    worst = fmax(worst, fabs((double)((float *)yl.data)[i] - ((float *)ys.data)[i]));
                CHECK_MSG(worst < 1e-6, "%s on %s: prefix differs by %g", ops[k], bes[bi], worst);
            }
            mge_tensor_free(&xl);
            mge_tensor_free(&xs);
            mge_tensor_free(&yl);
            mge_tensor_free(&ys);
        }
        mge_graph_free(g);
    }
}

static double sg(double v)
{
    return 1 / (1 + exp(-v));
}

static void set_param(mge_graph *g, const char *name, int n, const float *v)
{
    int p = mge_graph_find(g, name);
    CHECK_MSG(p >= 0, "no %s", name);
    if (p < 0)
        return;
    mge_value *val = &g->values[p];
    CHECK(mge_shape_numel(val->ndim, val->dims, val->dtype, &(int64_t){0}, &(size_t){0}, &err) == MGE_OK);
    val->data = calloc(1, sizeof *val->data);
    CHECK_OK(mge_tensor_alloc(val->data, val->dtype, val->ndim, val->dims, &err), err);
    CHECK(mge_tensor_numel(val->data) == n);
    memcpy(val->data->data, v, sizeof(float) * (size_t)n);
}

/* One hidden unit, one input, two steps: PyTorch's equations by hand. */
static void test_hand(void)
{
    const float wi[4] = {0.5f, -0.3f, 0.8f, 0.2f}, wh[4] = {0.1f, 0.4f, -0.6f, 0.7f};
    const float bi[4] = {0.05f, 0.1f, -0.2f, 0.3f}, bh[4] = {-0.1f, 0.2f, 0.15f, -0.05f};
    const double x[2] = {0.9, -0.4};
    const char *bes[2] = {"ref", "cpu"};
    for (int gru = 0; gru < 2; gru++) {
        mge_graph *g = ug_parse(gru ? "input x : f32[2,1,1]\ny = gru(x, hidden_size=1)\noutput y\n"
                                    : "input x : f32[2,1,1]\ny = lstm(x, hidden_size=1)\noutput y\n");
        if (!g)
            continue;
        int G = gru ? 3 : 4;
        set_param(g, "y.weight_ih_l0", G, wi);
        set_param(g, "y.weight_hh_l0", G, wh);
        set_param(g, "y.bias_ih_l0", G, bi);
        set_param(g, "y.bias_hh_l0", G, bh);
        double h = 0, c = 0, want[2];
        for (int t = 0; t < 2; t++) {
            double a[4], b[4];
            for (int k = 0; k < G; k++)
                a[k] = wi[k] * x[t] + bi[k], b[k] = wh[k] * h + bh[k];
            if (!gru) {
                c = sg(a[1] + b[1]) * c + sg(a[0] + b[0]) * tanh(a[2] + b[2]);
                h = sg(a[3] + b[3]) * tanh(c);
            } else {
                double rr = sg(a[0] + b[0]), z = sg(a[1] + b[1]), nn = tanh(a[2] + rr * b[2]);
                h = (1 - z) * nn + z * h;
            }
            want[t] = h;
        }
        for (int bi2 = 0; bi2 < 2; bi2++) {
            mge_tensor xt, y = {0};
            int64_t d[3] = {2, 1, 1};
            CHECK_OK(mge_tensor_alloc(&xt, MGE_F32, 3, d, &err), err);
            ((float *)xt.data)[0] = (float)x[0];
            ((float *)xt.data)[1] = (float)x[1];
            run1(g, bes[bi2], &xt, &y);
            if (y.data)
                for (int t = 0; t < 2; t++)
                    CHECK_MSG(fabs(((float *)y.data)[t] - want[t]) < 1e-6, "%s %s step %d: %g, expected %g",
                              gru ? "gru" : "lstm", bes[bi2], t, ((float *)y.data)[t], want[t]);
            mge_tensor_free(&xt);
            mge_tensor_free(&y);
        }
        mge_graph_free(g);
    }
}

static void parse_fails(const char *src, const char *want)
{
    mge_graph *g = NULL;
    mge_error e;
    mge_error_clear(&e);
    mge_status s = mge_text_parse(src, strlen(src), ".", &g, &e);
    CHECK_MSG(s != MGE_OK, "parsed: %s", src);
    CHECK_MSG(strstr(e.msg, want) != NULL, "message '%s', expected '%s'", e.msg, want);
    if (g)
        mge_graph_free(g);
}

static void test_errors(void)
{
    parse_fails("input x : f32[5,2,8]\n"
                "param lstm1.weight_ih_l0 : f32[64,8]\nparam lstm1.weight_hh_l0 : f32[64,32]\n"
                "param lstm1.bias_ih_l0 : f32[64]\nparam lstm1.bias_hh_l0 : f32[64]\n"
                "lstm1 = lstm(x, lstm1.weight_ih_l0, lstm1.weight_hh_l0, lstm1.bias_ih_l0, lstm1.bias_hh_l0, "
                "hidden_size=16)\n",
                "lstm1.weight_hh_l0: expected f32[64,16] for hidden_size=16, got f32[64,32]");
    parse_fails("input x : f32[5,2,8]\n"
                "param r.weight_ih_l0 : f32[12,9]\nparam r.weight_hh_l0 : f32[12,4]\n"
                "r = gru(x, r.weight_ih_l0, r.weight_hh_l0, hidden_size=4, bias=false)\n",
                "r.weight_ih_l0: expected f32[12,8] for hidden_size=4 and input size 8, got f32[12,9]");
    parse_fails("input x : f32[5,2,8]\ninput h0 : f32[1,2,4]\ninput c0 : f32[2,2,4]\n"
                "y = lstm(x, h0, c0, hidden_size=4, bidirectional=true)\n",
                "lstm: h0 is f32[1,2,4]: expected f32[2,2,4] ([D*num_layers, N, hidden_size])");
    parse_fails("input x : f32[5,2,8]\ninput h0 : f32[1,2,4]\ny = lstm(x, h0, hidden_size=4)\n",
                "lstm: 6 inputs: expected x[, h0, c0] and 4 params (num_layers=1, bidirectional=false, bias=true)");
    parse_fails("input x : f32[5,2,8]\ny = lstm(x, hidden_size=0)\n", "lstm: hidden_size=0: expected at least 1");
    parse_fails("input x : f32[5,2,8]\ny = gru(x, hidden_size=2, num_layers=8, bidirectional=true)\n",
                "gru: num_layers=8: expected 1 to 7 with bidirectional=true");
    parse_fails("input x : f32[5,8]\ny = gru(x, hidden_size=2)\n", "gru: x is f32[5,8]: expected a float tensor [S,N,input]");
    parse_fails("input x : f32[5,2,8]\nparam w : f32[8,8]\ny = gru(x, w, w, w, hidden_size=2)\n",
                "gru: 4 inputs: expected x[, h0] and 4 params (num_layers=1, bidirectional=false, bias=true)");
}

/* Central differences of sum(out * R) for x, the state and every param.
 * tol: 1e-2, but 3e-2 through two layers, where the gradients of the
 * first layer's params are small (about 1e-3) and the f32 rounding of the
 * outputs summed into the loss leaves about 1e-4 of noise in a difference
 * at h = 1e-3 (tests/oracle/test_rnn.py compares with PyTorch's autograd
 * at 1e-4). */
static void fd_tol(const char *src, const char *out, double tol)
{
    mge_graph *g = ug_parse(src);
    if (!g)
        return;
    int v = mge_graph_find(g, out);
    CHECK(v >= 0);
    if (v >= 0) {
        double w = gc_check(g, v, NULL, tol, 0);
        CHECK_MSG(w < tol, "%s / %s: worst %g", src, out, w);
    }
    mge_graph_free(g);
}

static void fd(const char *src, const char *out)
{
    fd_tol(src, out, 1e-2);
}

static void test_grad(void)
{
    const char *lstm2 = "input x : f32[4,2,3]\ny, h, c = lstm(x, hidden_size=3, num_layers=2, bidirectional=true)\n"
                        "output y\n";
    fd_tol(lstm2, "y", 3e-2);
    fd_tol(lstm2, "h", 3e-2);
    fd_tol(lstm2, "c", 3e-2);
    const char *lstm_state = "input x : f32[2,3,2]\ninput h0 : f32[1,2,3]\ninput c0 : f32[1,2,3]\n"
                             "y, h, c = lstm(x, h0, c0, hidden_size=3, batch_first=true)\noutput y\n";
    fd(lstm_state, "y");
    fd(lstm_state, "c");
    fd("input x : f32[3,2,2]\ny = lstm(x, hidden_size=2, bias=false)\noutput y\n", "y");
    const char *gru2 = "input x : f32[4,2,3]\ny, h = gru(x, hidden_size=3, num_layers=2, bidirectional=true)\n"
                       "output y\n";
    fd_tol(gru2, "y", 3e-2);
    fd_tol(gru2, "h", 3e-2);
    const char *gru_state = "input x : f32[2,3,2]\ninput h0 : f32[2,2,3]\n"
                            "y, h = gru(x, h0, hidden_size=3, batch_first=true, bidirectional=true)\noutput y\n";
    fd(gru_state, "y");
    fd(gru_state, "h");
    fd_tol("input x : f32[3,1,2]\ny = gru(x, hidden_size=2, bias=false, num_layers=2)\noutput y\n", "y", 3e-2);
}

/* The gradient graph on symbolic S and N: dx, dh0 and the param
 * gradients keep their templates, and it runs at two bindings. */
static void test_grad_symbolic(void)
{
    mge_graph *g = ug_parse("input x : f32[N,S,3]\ninput h0 : f32[2,N,4]\ninput t : f32[N,S,8]\n"
                            "y, h = gru(x, h0, hidden_size=4, batch_first=true, bidirectional=true)\n"
                            "loss = mse(y, t)\noutput y\nminimize loss\n");
    if (!g)
        return;
    int wrt[3] = {mge_graph_find(g, "x"), mge_graph_find(g, "h0"), mge_graph_find(g, "y.weight_hh_l0_reverse")};
    int grads[3] = {-1, -1, -1};
    CHECK_OK(mge_grad_build(g, mge_graph_find(g, "loss"), 3, wrt, grads, &err), err);
    if (grads[0] < 0 || grads[1] < 0 || grads[2] < 0) {
        CHECK(0);
        mge_graph_free(g);
        return;
    }
    char b[3][128];
    for (int k = 0; k < 3; k++) {
        snprintf(b[k], sizeof b[k], "%s", g->values[grads[k]].name);
    }
    shape_is(g, b[0], "[N,S,3]");
    shape_is(g, b[1], "[2,N,4]");
    shape_is(g, b[2], "[12,4]");
    int64_t sv[2] = {3, 6}, nv[2] = {2, 1};
    for (int k = 0; k < 2; k++) {
        mge_binding bd = {0};
        CHECK_OK(mge_binding_set(&bd, MGE_DIM_N, nv[k], &err), err);
        CHECK_OK(mge_binding_set(&bd, sym("S"), sv[k], &err), err);
        int *nd = calloc((size_t)g->nvalues, sizeof *nd);
        int64_t *dims = calloc((size_t)g->nvalues * MGE_MAX_DIMS, sizeof *dims);
        CHECK_OK(mge_graph_shapes(g, &bd, nd, dims, &err), err);
        int v = grads[0];
        CHECK(nd[v] == 3 && dims[v * MGE_MAX_DIMS] == nv[k] && dims[v * MGE_MAX_DIMS + 1] == sv[k]);
        free(nd);
        free(dims);
    }
    fill_params(g, 11);
    mge_exec *e = NULL;
    mge_exec_opts o = {.backend = "cpu", .threads = 2, .noutputs = 3, .outputs = grads, .training = 1};
    CHECK_OK(mge_exec_create(g, &o, &e, &err), err);
    for (int k = 0; e && k < 2; k++) {
        mge_tensor x, h0, t;
        int64_t xd[3] = {nv[k], sv[k], 3}, hd[3] = {2, nv[k], 4}, td[3] = {nv[k], sv[k], 8};
        CHECK_OK(mge_tensor_alloc(&x, MGE_F32, 3, xd, &err), err);
        CHECK_OK(mge_tensor_alloc(&h0, MGE_F32, 3, hd, &err), err);
        CHECK_OK(mge_tensor_alloc(&t, MGE_F32, 3, td, &err), err);
        mge_rng r;
        mge_rng_seed(&r, 5 + (uint64_t)k);
        ug_uniform(&x, &r, -1, 1);
        ug_uniform(&h0, &r, -1, 1);
        ug_uniform(&t, &r, -1, 1);
        const mge_tensor *ins[3];
        for (int i = 0; i < mge_exec_ninputs(e); i++) {
            const char *nm = g->values[mge_exec_input(e, i)].name;
            ins[i] = !strcmp(nm, "x") ? &x : !strcmp(nm, "h0") ? &h0 : &t;
        }
        CHECK_OK(mge_exec_run(e, ins, &err), err);
        const mge_tensor *dx = mge_exec_result(e, 0);
        CHECK(dx && dx->ndim == 3 && dx->dims[0] == nv[k] && dx->dims[1] == sv[k]);
        double s2 = 0;
        for (int64_t i = 0; dx && i < mge_tensor_numel(dx); i++)
            s2 += fabs(((const float *)dx->data)[i]);
        CHECK_MSG(s2 > 0 && isfinite(s2), "dx at S=%lld: sum |dx| %g", (long long)sv[k], s2);
        mge_tensor_free(&x);
        mge_tensor_free(&h0);
        mge_tensor_free(&t);
    }
    mge_exec_free(e);
    mge_graph_free(g);
}

/* cpu at 1 and 2 threads, bit for bit: forward outputs and the gradients
 * of x and a param (the directions run in parallel on the pool; mge_sgemm
 * is bit-identical at any thread count). */
static void test_threads(void)
{
    const char *ops[2] = {"lstm", "gru"};
    for (int k = 0; k < 2; k++) {
        char src[512];
        snprintf(src, sizeof src,
                 "input x : f32[6,3,5]\ninput t : f32[6,3,8]\n"
                 "y, h = %s(x, hidden_size=4, num_layers=2, bidirectional=true)\n"
                 "loss = mse(y, t)\noutput y\noutput h\nminimize loss\n",
                 ops[k]);
        mge_graph *g = ug_parse(src);
        if (!g)
            continue;
        int wrt[2] = {mge_graph_find(g, "x"), mge_graph_find(g, "y.weight_hh_l0")}, grads[2] = {-1, -1};
        CHECK_OK(mge_grad_build(g, mge_graph_find(g, "loss"), 2, wrt, grads, &err), err);
        for (int i = 0; i < 2; i++)
            if (grads[i] >= 0)
                CHECK_OK(mge_graph_add_output(g, grads[i], &err), err);
        fill_params(g, 21 + (uint64_t)k);
        ug_outs a = {0}, b = {0};
        ug_fill f = {.lo = -1, .hi = 1};
        if (ug_run(g, "cpu", 1, 1, f, &a) && ug_run(g, "cpu", 2, 1, f, &b)) {
            CHECK(a.n == 4);
            ug_check_close(&a, &b, 0);
        }
        ug_outs_free(&a);
        ug_outs_free(&b);
        mge_graph_free(g);
    }
}

int main(void)
{
    RUN(test_params);
    RUN(test_symbolic);
    RUN(test_prefix);
    RUN(test_hand);
    RUN(test_errors);
    RUN(test_grad);
    RUN(test_grad_symbolic);
    RUN(test_threads);
    return unit_done();
}
