/* test_pool3d.c — maxpool3d, avgpool3d, max_unpool and the rnn layer
 * additions (rnn, gru linear_before_reset=false, lstm peephole=true): shapes and the errors
 * bad attributes give, hand-computed values on ref and cpu (ONNX's
 * indices in both storage orders, both average divisors, a dilated and an
 * asymmetric window), max_unpool undoing maxpool3d's indices, the pool
 * gradients against finite differences (gc_check), and the inference-only
 * ops refusing a gradient. */
#include "internal.h"
#include "unit.h"
#include "unit_attr.h"
#include "unit_graph.h"
#include "unit_grad.h"

#include <math.h>
#include <string.h>

static mge_error err;

static void shape_is(const mge_graph *g, const char *name, int nd, const int64_t *want)
{
    int v = mge_graph_find(g, name);
    CHECK_MSG(v >= 0, "no value %s", name);
    if (v < 0)
        return;
    int ok = g->values[v].ndim == nd;
    for (int i = 0; ok && i < nd; i++)
        ok = g->values[v].dims[i] == want[i];
    CHECK_MSG(ok, "%s: wrong shape (rank %d, dim 2 %lld)", name, g->values[v].ndim,
              (long long)(g->values[v].ndim > 2 ? g->values[v].dims[2] : -1));
}

static void test_shapes(void)
{
    mge_graph *g = ug_parse("input x : f32[1,2,4,5,6]\n"
                            "a = maxpool3d(x, kernel=2)\n"
                            "b = avgpool3d(x, kernel=[1,2,3], stride=1, pad=[0,1,1])\n"
                            "c = maxpool3d(x, kernel=3, stride=2, ceil_mode=true)\n"
                            "d = avgpool3d(x, kernel=2, stride=1, dilation=[1,2,2], pad=[0,0,1,1,1,0])\n"
                            "e, ei = maxpool3d(x, kernel=2, stride=2)\n"
                            "u = max_unpool(e, ei, kernel=2, stride=2)\n"
                            "output a, b, c, d, u\n");
    if (!g)
        return;
    shape_is(g, "a", 5, (int64_t[]){1, 2, 2, 2, 3});
    /* h: 5 + 2 - 2 + 1 = 6; w: 6 + 2 - 3 + 1 = 6 */
    shape_is(g, "b", 5, (int64_t[]){1, 2, 4, 6, 6});
    /* ceil((4-3)/2)+1 = 2, ceil((5-3)/2)+1 = 2, ceil((6-3)/2)+1 = 3 */
    shape_is(g, "c", 5, (int64_t[]){1, 2, 2, 2, 3});
    /* pads begin (0,0,1), end (1,1,0); windows 2, 3, 3: d 4+1-2+1 = 4, h 5+1-3+1 = 4, w 6+1-3+1 = 5 */
    shape_is(g, "d", 5, (int64_t[]){1, 2, 4, 4, 5});
    shape_is(g, "ei", 5, (int64_t[]){1, 2, 2, 2, 3});
    CHECK(g->values[mge_graph_find(g, "ei")].dtype == MGE_I64);
    /* (2-1)*2 + 2 = 4, 4, (3-1)*2 + 2 = 6: x's dims back */
    shape_is(g, "u", 5, (int64_t[]){1, 2, 4, 4, 6});
    mge_graph_free(g);
}

static void parse_fails(const char *body, const char *want)
{
    char src[512];
    snprintf(src, sizeof src, "input x : f32[1,2,3,4,4]\ninput v : f32[1,2,4,4]\ninput i : i64[1,2,2,2,2]\n%s\n"
             "output y\n", body);
    mge_graph *g = NULL;
    mge_error e;
    mge_error_clear(&e);
    mge_status s = mge_text_parse(src, strlen(src), ".", &g, &e);
    CHECK_MSG(s != MGE_OK, "'%s' parsed", body);
    CHECK_MSG(strstr(e.msg, want), "'%s': got '%s', expected '%s'", body, e.msg, want);
    mge_graph_free(g);
}

static void test_errors(void)
{
    parse_fails("y = maxpool3d(v, kernel=2)", "maxpool3d: x is f32[1,2,4,4]: expected rank 5 [N,C,D,H,W]");
    parse_fails("y = avgpool3d(x, kernel=[2,2])", "avgpool3d: 'kernel' has 2 values: expected 1 or 3 (d, h, w)");
    parse_fails("y = avgpool3d(x, kernel=2, pad=[1,1,1,1])", "or 6 (begin d, h, w, end d, h, w)");
    parse_fails("y = maxpool3d(x, kernel=4)", "maxpool3d: spatial dim 0 of size 3 is too small for a window of 4");
    parse_fails("y = maxpool3d(x, kernel=2, dilation=0)", "maxpool3d: dilation=0: expected values in [1,");
    parse_fails("y = max_unpool(x, i, kernel=2)", "max_unpool: indices are i64[1,2,2,2,2]: expected i32 or i64 of x's");
    parse_fails("y = max_unpool(v, v, kernel=2)", "max_unpool: indices are f32[1,2,4,4]");
    parse_fails("y = maxpool3d(x, kernel=1, stride=1, pad=1073741824)", "shape too large");
}

/* Runs g on backend be with ins for the graph inputs; outputs into res. */
static mge_status run_on(const mge_graph *g, const char *be, const mge_tensor *const *ins, ug_outs *res)
{
    mge_exec *e = NULL;
    mge_exec_opts o = {0};
    o.threads = 2;
    o.backend = be;
    res->n = 0;
    mge_status s = mge_exec_create(g, &o, &e, &err);
    if (!s)
        s = mge_exec_run(e, ins, &err);
    for (int i = 0; !s && i < mge_exec_noutputs(e) && i < 4; i++) {
        CHECK_OK(mge_tensor_copy(&res->t[i], mge_exec_result(e, i), &err), err);
        res->n++;
    }
    mge_exec_free(e);
    return s;
}

static double elem(const mge_tensor *t, int64_t i)
{
    return t->dtype == MGE_I64 ? (double)((const int64_t *)t->data)[i] : ((const float *)t->data)[i];
}

static void expect(const char *what, const mge_tensor *t, int n, const double *v)
{
    CHECK_MSG(mge_tensor_numel(t) == n, "%s: %lld elements, expected %d", what, (long long)mge_tensor_numel(t), n);
    for (int i = 0; i < n && i < mge_tensor_numel(t); i++)
        CHECK_MSG(fabs(elem(t, i) - v[i]) < 1e-5, "%s[%d] = %g, expected %g", what, i, elem(t, i), v[i]);
}

/* x [1,1,2,2,3] = 0..11 with a few reordered so the maxima are not all last. */
static void test_values(void)
{
    static const char *backends[] = {"ref", "cpu"};
    static const float xv[12] = {0, 9, 2, 3, 4, 5, 6, 7, 8, 1, 10, 11};
    for (int b = 0; b < 2; b++) {
        mge_graph *g = ug_parse("input x : f32[1,1,2,2,3]\n"
                                "m, mi = maxpool3d(x, kernel=[2,2,2], stride=1)\n"
                                "c, ci = maxpool3d(x, kernel=[2,2,2], stride=1, storage_order=1)\n"
                                "a = avgpool3d(x, kernel=[1,2,2], stride=[1,2,2], pad=[0,1,1])\n"
                                "n = avgpool3d(x, kernel=[1,2,2], stride=[1,2,2], pad=[0,1,1], count_include_pad=false)\n"
                                "output m, mi, ci, a\n");
        if (!g)
            continue;
        mge_tensor x;
        CHECK_OK(mge_tensor_alloc(&x, MGE_F32, 5, (int64_t[]){1, 1, 2, 2, 3}, &err), err);
        memcpy(x.data, xv, sizeof xv);
        const mge_tensor *ins[1] = {&x};
        ug_outs r = {0};
        CHECK_OK(run_on(g, backends[b], ins, &r), err);
        if (r.n == 4) {
            /* windows w 0..1 and 1..2 over all of d, h: max 10 (at 10) and 11 (at 11) */
            expect("maxpool3d", &r.t[0], 2, (double[]){10, 11});
            expect("indices", &r.t[1], 2, (double[]){10, 11});
            /* column-major, w*H*D + h*D + d: (1,1,1) -> 7; (2,1,1) -> 11 */
            expect("storage_order=1", &r.t[2], 2, (double[]){7, 11});
            /* pad 1 before h, w (none after): output [1,1,2,2,2]; d = 0 windows:
             * (h,w) 0: {0} / 4; 1: {9, 2} / 4; h 1: {3} / 4, {4, 5} / 4 */
            expect("avgpool3d", &r.t[3], 8, (double[]){0, 11 / 4.0, 3 / 4.0, 9 / 4.0, 6 / 4.0, 15 / 4.0, 1 / 4.0, 21 / 4.0});
        }
        ug_outs_free(&r);
        mge_graph_free(g);
        g = ug_parse("input x : f32[1,1,2,2,3]\n"
                     "n = avgpool3d(x, kernel=[1,2,2], stride=[1,2,2], pad=[0,1,1], count_include_pad=false)\n"
                     "d = avgpool3d(x, kernel=[1,1,2], stride=1, dilation=[1,1,2], pad=[0,0,0,0,0,1])\n"
                     "output n, d\n");
        if (g && !run_on(g, backends[b], ins, &r) && r.n == 2) {
            /* the same sums over the real elements only */
            expect("count_include_pad=false", &r.t[0], 8, (double[]){0, 5.5, 3, 4.5, 6, 7.5, 1, 10.5});
            /* w windows {0, 2} and {1, end pad}, divisor 2 (count_include_pad) */
            expect("dilated", &r.t[1], 8, (double[]){1, 4.5, 4, 2, 7, 3.5, 6, 5});
        } else {
            CHECK_MSG(0, "%s: %s", backends[b], err.msg);
        }
        ug_outs_free(&r);
        mge_graph_free(g);
        mge_tensor_free(&x);
    }
}

/* A window of a million taps over 2 input positions costs those 2 (the
 * taps inside the input are computed, not searched), on ref and cpu. */
static void test_huge_window(void)
{
    static const char *backends[] = {"ref", "cpu"};
    for (int b = 0; b < 2; b++) {
        mge_graph *g = ug_parse("input x : f32[1,1,1,1,2]\n"
                                "a = avgpool3d(x, kernel=[1,1,1000001], stride=1, pad=[0,0,500000])\n"
                                "n = avgpool3d(x, kernel=[1,1,1000001], stride=1, pad=[0,0,500000], "
                                "count_include_pad=false)\n"
                                "m = maxpool3d(x, kernel=[1,1,1000001], stride=1, pad=[0,0,500000])\n"
                                "output a, n, m\n");
        if (!g)
            continue;
        mge_tensor x;
        CHECK_OK(mge_tensor_alloc(&x, MGE_F32, 5, (int64_t[]){1, 1, 1, 1, 2}, &err), err);
        ((float *)x.data)[0] = 3, ((float *)x.data)[1] = 5;
        const mge_tensor *ins[1] = {&x};
        ug_outs r = {0};
        CHECK_OK(run_on(g, backends[b], ins, &r), err);
        if (r.n == 3) {
            /* both windows hold both positions; the padded count is the whole window */
            expect("huge cip", &r.t[0], 2, (double[]){8 / 1000001.0, 8 / 1000001.0});
            expect("huge", &r.t[1], 2, (double[]){4, 4});
            expect("huge max", &r.t[2], 2, (double[]){5, 5});
        }
        ug_outs_free(&r);
        mge_graph_free(g);
        mge_tensor_free(&x);
    }
}

/* max_unpool puts each value back where maxpool3d's index says, zeros elsewhere. */
static void test_unpool(void)
{
    mge_graph *g = ug_parse("input x : f32[2,3,2,4,4]\n"
                            "m, mi = maxpool3d(x, kernel=2)\n"
                            "u = max_unpool(m, mi, kernel=2)\n"
                            "output u, m\n");
    if (!g)
        return;
    mge_tensor x;
    CHECK_OK(mge_tensor_alloc(&x, MGE_F32, 5, (int64_t[]){2, 3, 2, 4, 4}, &err), err);
    mge_rng rng;
    mge_rng_seed(&rng, 7);
    ug_uniform(&x, &rng, -1, 1);
    const mge_tensor *ins[1] = {&x};
    ug_outs r = {0};
    CHECK_OK(run_on(g, "cpu", ins, &r), err);
    if (r.n == 2) {
        const float *u = r.t[0].data, *xs = x.data;
        int64_t kept = 0;
        for (int64_t i = 0; i < mge_tensor_numel(&x); i++) {
            CHECK_MSG(u[i] == 0 || u[i] == xs[i], "u[%lld] = %g, x %g", (long long)i, u[i], xs[i]);
            kept += u[i] != 0;
        }
        CHECK_MSG(kept == mge_tensor_numel(&r.t[1]), "%lld values back, expected %lld", (long long)kept,
                  (long long)mge_tensor_numel(&r.t[1]));
    }
    ug_outs_free(&r);
    mge_graph_free(g);
    mge_tensor_free(&x);
    /* an index past the output is an error, not a write */
    g = ug_parse("input x : f32[1,1,1,1,2]\nconst i : i64[1,1,1,1,2] = [0, 99]\n"
                 "u = max_unpool(x, i, kernel=2, stride=2)\noutput u\n");
    if (g) {
        mge_tensor t;
        CHECK_OK(mge_tensor_alloc(&t, MGE_F32, 5, (int64_t[]){1, 1, 1, 1, 2}, &err), err);
        const mge_tensor *in1[1] = {&t};
        CHECK(run_on(g, "ref", in1, &r) != MGE_OK);
        CHECK_MSG(strstr(err.msg, "index 99 at [0,0,0,0,1] is out of range for an output of 16"), "%s", err.msg);
        mge_tensor_free(&t);
        mge_graph_free(g);
    }
}

static void pool_fd(int op, int nattr, const mge_attr *at)
{
    mge_graph *g = mge_graph_new();
    int64_t xd[5] = {2, 2, 3, 4, 5};
    int x = mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 5, xd, &err);
    int y = node(g, "p", op, 1, &x, nattr, at);
    CHECK(y >= 0);
    if (y >= 0) {
        double e = gc_check(g, y, NULL, 1e-2, 0);
        CHECK_MSG(e < 1e-2, "%s: gradient error %g", mge_op_info(op)->name, e);
    }
    mge_graph_free(g);
}

static void test_grads(void)
{
    int64_t k[3] = {2, 2, 3}, s[3] = {1, 2, 2}, p6[6] = {1, 0, 1, 0, 1, 1}, d[3] = {1, 2, 1};
    mge_attr a1[4] = {A_ints(MGE_KEY_kernel, 3, k), A_ints(MGE_KEY_stride, 3, s), A_ints(MGE_KEY_pad, 6, p6),
                      A_ints(MGE_KEY_dilation, 3, d)};
    pool_fd(MGE_OP_MAXPOOL3D, 4, a1);
    pool_fd(MGE_OP_AVGPOOL3D, 4, a1);
    mge_attr a2[4] = {A_ints(MGE_KEY_kernel, 3, k), A_ints(MGE_KEY_stride, 3, s), A_ints(MGE_KEY_pad, 6, p6),
                      A(MGE_KEY_count_include_pad, 0)};
    pool_fd(MGE_OP_AVGPOOL3D, 4, a2);
    mge_attr a3[2] = {A(MGE_KEY_kernel, 2), A(MGE_KEY_ceil_mode, 1)};
    pool_fd(MGE_OP_AVGPOOL3D, 2, a3);
    pool_fd(MGE_OP_MAXPOOL3D, 2, a3);
}

/* rnn over S = 2 steps with H = I = 1: h1 = act(0.5 x1 + 0.3), h2 = act(0.5 x2 - h1 + 0.3). */
static void test_rnn(void)
{
    static const char *backends[] = {"ref", "cpu"};
    for (int relu = 0; relu < 2; relu++)
        for (int b = 0; b < 2; b++) {
            char src[600];
            snprintf(src, sizeof src,
                     "input x : f32[2,1,1]\n"
                     "const wi : f32[1,1] = [0.5]\nconst wh : f32[1,1] = [-1]\n"
                     "const bi : f32[1] = [0.1]\nconst bh : f32[1] = [0.2]\n"
                     "y, hn = rnn(x, wi, wh, bi, bh, hidden_size=1, nonlinearity=%s)\noutput y, hn\n",
                     relu ? "relu" : "tanh");
            mge_graph *g = ug_parse(src);
            if (!g)
                continue;
            mge_tensor x;
            CHECK_OK(mge_tensor_alloc(&x, MGE_F32, 3, (int64_t[]){2, 1, 1}, &err), err);
            ((float *)x.data)[0] = 0.8f;
            ((float *)x.data)[1] = -0.4f;
            double a1 = 0.5 * 0.8 + 0.3, h1 = relu ? (a1 > 0 ? a1 : 0) : tanh(a1);
            double a2 = 0.5 * -0.4f - h1 + 0.3, h2 = relu ? (a2 > 0 ? a2 : 0) : tanh(a2);
            const mge_tensor *ins[1] = {&x};
            ug_outs r = {0};
            CHECK_OK(run_on(g, backends[b], ins, &r), err);
            if (r.n == 2) {
                expect(relu ? "rnn relu" : "rnn tanh", &r.t[0], 2, (double[]){h1, h2});
                expect("rnn h_n", &r.t[1], 1, (double[]){h2});
            }
            ug_outs_free(&r);
            int xi = mge_graph_find(g, "x"), gx = -1;
            CHECK(mge_grad_build_from(g, mge_graph_find(g, "y"), -1, 1, &xi, &gx, &err) == MGE_ERR_UNSUPPORTED);
            CHECK_MSG(strstr(err.msg, "rnn has no gradient rule (inference only)"), "%s", err.msg);
            mge_graph_free(g);
            mge_tensor_free(&x);
        }
}

/* gru with H = I = 1, one step from h0 = 0.6: the two reset placements differ
 * only in the n gate's hidden part, r (w h + b) against w (r h) + b. */
static void test_gru_lbr(void)
{
    static const char *backends[] = {"ref", "cpu"};
    for (int lbr = 0; lbr < 2; lbr++)
        for (int b = 0; b < 2; b++) {
            char src[700];
            snprintf(src, sizeof src,
                     "input x : f32[1,1,1]\nconst h0 : f32[1,1,1] = [0.6]\n"
                     "const wi : f32[3,1] = [0.3, -0.2, 0.7]\nconst wh : f32[3,1] = [0.5, 0.4, -0.9]\n"
                     "const bi : f32[3] = [0.1, 0.0, -0.1]\nconst bh : f32[3] = [0.05, 0.2, 0.3]\n"
                     "y = gru(x, h0, wi, wh, bi, bh, hidden_size=1, linear_before_reset=%s)\noutput y\n",
                     lbr ? "true" : "false");
            mge_graph *g = ug_parse(src);
            if (!g)
                continue;
            mge_tensor x;
            CHECK_OK(mge_tensor_alloc(&x, MGE_F32, 3, (int64_t[]){1, 1, 1}, &err), err);
            double xv = 1.5, h = 0.6;
            ((float *)x.data)[0] = (float)xv;
            double rg = 1 / (1 + exp(-(0.3 * xv + 0.1 + 0.5 * h + 0.05)));
            double zg = 1 / (1 + exp(-(-0.2 * xv + 0.4 * h + 0.2)));
            double hid = lbr ? rg * (-0.9 * h + 0.3) : -0.9 * (rg * h) + 0.3;
            double ng = tanh(0.7 * xv - 0.1 + hid), want = (1 - zg) * ng + zg * h;
            const mge_tensor *ins[1] = {&x};
            ug_outs r = {0};
            CHECK_OK(run_on(g, backends[b], ins, &r), err);
            if (r.n == 1)
                expect(lbr ? "gru lbr=true" : "gru lbr=false", &r.t[0], 1, &want);
            ug_outs_free(&r);
            if (!lbr) {
                int xi = mge_graph_find(g, "x"), gx = -1;
                CHECK(mge_grad_build_from(g, mge_graph_find(g, "y"), -1, 1, &xi, &gx, &err) == MGE_ERR_UNSUPPORTED);
                CHECK_MSG(strstr(err.msg, "linear_before_reset=false has no gradient rule"), "%s", err.msg);
            }
            mge_graph_free(g);
            mge_tensor_free(&x);
        }
}

/* lstm with peepholes, H = I = 1, one step from h0 = 0.2, c0 = -0.7:
 * i, f see c0, o sees the new cell. */
static void test_lstm_peephole(void)
{
    static const char *backends[] = {"ref", "cpu"};
    for (int b = 0; b < 2; b++) {
        mge_graph *g = ug_parse("input x : f32[1,1,1]\nconst h0 : f32[1,1,1] = [0.2]\nconst c0 : f32[1,1,1] = [-0.7]\n"
                                "const wi : f32[4,1] = [0.3, -0.2, 0.7, 0.5]\n"
                                "const wh : f32[4,1] = [0.5, 0.4, -0.9, 0.1]\n"
                                "const p : f32[3] = [0.8, -0.6, 1.5]\n"
                                "y, hn, cn = lstm(x, h0, c0, wi, wh, p, hidden_size=1, bias=false, peephole=true)\n"
                                "output y, cn\n");
        if (!g)
            continue;
        mge_tensor x;
        CHECK_OK(mge_tensor_alloc(&x, MGE_F32, 3, (int64_t[]){1, 1, 1}, &err), err);
        double xv = -1.25, h = 0.2, c = -0.7;
        ((float *)x.data)[0] = (float)xv;
        double ig = 1 / (1 + exp(-(0.3 * xv + 0.5 * h + 0.8 * c)));
        double fg = 1 / (1 + exp(-(-0.2 * xv + 0.4 * h - 0.6 * c)));
        double gg = tanh(0.7 * xv - 0.9 * h), c1 = fg * c + ig * gg;
        double og = 1 / (1 + exp(-(0.5 * xv + 0.1 * h + 1.5 * c1))), h1 = og * tanh(c1);
        const mge_tensor *ins[1] = {&x};
        ug_outs r = {0};
        CHECK_OK(run_on(g, backends[b], ins, &r), err);
        if (r.n == 2) {
            expect("lstm peephole h", &r.t[0], 1, &h1);
            expect("lstm peephole c", &r.t[1], 1, &c1);
        }
        ug_outs_free(&r);
        int xi = mge_graph_find(g, "x"), gx = -1;
        CHECK(mge_grad_build_from(g, mge_graph_find(g, "y"), -1, 1, &xi, &gx, &err) == MGE_ERR_UNSUPPORTED);
        CHECK_MSG(strstr(err.msg, "peephole=true has no gradient rule"), "%s", err.msg);
        mge_graph_free(g);
        mge_tensor_free(&x);
    }
}

int main(void)
{
    RUN(test_shapes);
    RUN(test_errors);
    RUN(test_values);
    RUN(test_huge_window);
    RUN(test_unpool);
    RUN(test_grads);
    RUN(test_rnn);
    RUN(test_gru_lbr);
    RUN(test_lstm_peephole);
    return unit_done();
}
