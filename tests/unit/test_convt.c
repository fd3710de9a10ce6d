/* test_convt.c — conv_transpose2d, conv1d, conv3d and adaptive pooling: concrete
 * shapes, symbolic templates at two bindings, the attribute and shape
 * errors (with the values they name), hand-computed results on ref and
 * cpu, conv_transpose2d against conv2d_grad_input (the same map written
 * independently in ref_grad_conv.c), PyTorch's init bound, max pooling's
 * tie rule, and every gradient rule against finite differences (gc_check
 * also holds the cpu gradients to the ref ones). PyTorch checks the
 * numbers at scale in tests/oracle/test_convt.py. */
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

/* The template (or shape) of value name, as "[N,4,2*H,2*W]". */
static const char *tmpl(const mge_graph *g, const char *name, char *b, size_t n)
{
    int v = mge_graph_find(g, name);
    CHECK_MSG(v >= 0, "no value %s", name);
    if (v < 0)
        return "";
    size_t k = (size_t)snprintf(b, n, "[");
    for (int d = 0; d < g->values[v].ndim; d++) {
        char db[32];
        k += (size_t)snprintf(b + k, n - k, "%s%s", d ? "," : "", mge_dim_str(g->values[v].dims[d], db, sizeof db));
    }
    snprintf(b + k, n - k, "]");
    return b;
}

#define TMPL(g, name, want)                                                                \
    do {                                                                                   \
        char b_[128];                                                                      \
        const char *t_ = tmpl(g, name, b_, sizeof b_);                                     \
        CHECK_MSG(strcmp(t_, want) == 0, "%s: template %s, expected %s", name, t_, want); \
    } while (0)

static void concrete(const mge_graph *g, const mge_binding *b, const char *name, const char *want)
{
    int *nd = calloc((size_t)g->nvalues, sizeof *nd);
    int64_t *dims = calloc((size_t)g->nvalues * MGE_MAX_DIMS, sizeof *dims);
    CHECK_OK(mge_graph_shapes(g, b, nd, dims, &err), err);
    int v = mge_graph_find(g, name);
    char s[128];
    size_t k = (size_t)snprintf(s, sizeof s, "[");
    for (int d = 0; v >= 0 && d < nd[v]; d++)
        k += (size_t)snprintf(s + k, sizeof s - k, "%s%lld", d ? "," : "", (long long)dims[v * MGE_MAX_DIMS + d]);
    snprintf(s + k, sizeof s - k, "]");
    CHECK_MSG(strcmp(s, want) == 0, "%s: %s, expected %s", name, s, want);
    free(nd);
    free(dims);
}

/* ---------------------------------------------------------------- shapes */

static void test_shapes(void)
{
    mge_graph *g = ug_parse("input x : f32[2,4,5,7]\n"
                            "input s : f32[3,6,11]\n"
                            "a = conv_transpose2d(x, out=6, kernel=2, stride=2)\n"
                            "b = conv_transpose2d(x, out=3, kernel=4, stride=2, pad=1)\n"
                            "c = conv_transpose2d(x, out=4, kernel=[3,2], stride=[2,3], pad=[1,0], "
                            "output_padding=[1,2], dilation=[1,2], groups=2, bias=false)\n"
                            "d = conv1d(s, out=4, kernel=3)\n"
                            "e = conv1d(s, out=6, kernel=3, stride=2, pad=2, dilation=2, groups=3)\n"
                            "f = adaptive_avgpool2d(x, output_size=3)\n"
                            "h = adaptive_maxpool2d(x, output_size=[9,1])\n"
                            "i = adaptive_avgpool1d(s, output_size=20)\n"
                            "j = adaptive_maxpool1d(s, output_size=4)\n"
                            "input v : f32[2,4,5,6,7]\n"
                            "k = conv3d(v, out=6, kernel=3, pad=1)\n"
                            "l = conv3d(v, out=2, kernel=[1,3,2], stride=[1,2,3], pad=[0,1,2], dilation=[2,1,2], "
                            "groups=2, bias=false)\n"
                            "output a\n");
    if (!g)
        return;
    TMPL(g, "a", "[2,6,10,14]");
    TMPL(g, "b", "[2,3,10,14]");
    /* (5-1)*2 - 2 + 1*2 + 1 + 1 = 10; (7-1)*3 - 0 + 2*1 + 2 + 1 = 23 */
    TMPL(g, "c", "[2,4,10,23]");
    TMPL(g, "d", "[3,4,9]");
    /* floor((11 + 4 - 2*2 - 1)/2) + 1 = 6 */
    TMPL(g, "e", "[3,6,6]");
    TMPL(g, "f", "[2,4,3,3]");
    TMPL(g, "h", "[2,4,9,1]");
    TMPL(g, "i", "[3,6,20]");
    TMPL(g, "j", "[3,6,4]");
    /* parameter layouts: ConvTranspose2d [in, out/groups, kh, kw], Conv1d [out, in/groups, k] */
    TMPL(g, "a.weight", "[4,6,2,2]");
    TMPL(g, "a.bias", "[6]");
    TMPL(g, "c.weight", "[4,2,3,2]");
    CHECK(mge_graph_find(g, "c.bias") < 0);
    TMPL(g, "e.weight", "[6,2,3]");
    TMPL(g, "k", "[2,6,5,6,7]");
    /* d: 5 - 1 + 1 = 5; h: floor((6 + 2 - 3)/2) + 1 = 3; w: floor((7 + 4 - 3)/3) + 1 = 3 */
    TMPL(g, "l", "[2,2,5,3,3]");
    TMPL(g, "k.weight", "[6,4,3,3,3]");
    TMPL(g, "l.weight", "[2,2,1,3,2]");
    mge_graph_free(g);
}

/* A transposed k2 s2 conv doubles symbolic H and W; k4 s2 p1 too;
 * adaptive pooling's output is fixed whatever the input. */
static void test_symbolic(void)
{
    mge_graph *g = ug_parse("input x : f32[N,8,H,W]\n"
                            "input s : f32[N,4,L]\n"
                            "a = conv_transpose2d(x, out=4, kernel=2, stride=2)\n"
                            "b = conv_transpose2d(x, out=4, kernel=4, stride=2, pad=1)\n"
                            "c = conv_transpose2d(x, out=2, kernel=3)\n"
                            "p = adaptive_avgpool2d(a, output_size=[3,5])\n"
                            "q = adaptive_maxpool2d(x, output_size=2)\n"
                            "d = conv1d(s, out=2, kernel=3)\n"
                            "e = adaptive_avgpool1d(d, output_size=7)\n"
                            "input v : f32[N,2,D,H,W]\n"
                            "f = conv3d(v, out=3, kernel=3, stride=2, pad=1)\n"
                            "output p\n");
    if (!g)
        return;
    TMPL(g, "a", "[N,4,2*H,2*W]");
    TMPL(g, "b", "[N,4,2*H,2*W]");
    TMPL(g, "c", "[N,2,H+2,W+2]");
    TMPL(g, "p", "[N,4,3,5]");
    TMPL(g, "q", "[N,8,2,2]");
    TMPL(g, "d", "[N,2,L-2]");
    TMPL(g, "e", "[N,2,7]");
    TMPL(g, "f", "[N,3,(D+1)/2,(H+1)/2,(W+1)/2]");
    mge_binding b1 = {0}, b2 = {0};
    CHECK_OK(mge_binding_set(&b1, MGE_DIM_N, 2, &err), err);
    CHECK_OK(mge_binding_set(&b1, sym("H"), 5, &err), err);
    CHECK_OK(mge_binding_set(&b1, sym("W"), 3, &err), err);
    CHECK_OK(mge_binding_set(&b1, sym("L"), 9, &err), err);
    CHECK_OK(mge_binding_set(&b2, MGE_DIM_N, 1, &err), err);
    CHECK_OK(mge_binding_set(&b2, sym("H"), 16, &err), err);
    CHECK_OK(mge_binding_set(&b2, sym("W"), 1, &err), err);
    CHECK_OK(mge_binding_set(&b2, sym("L"), 3, &err), err);
    CHECK_OK(mge_binding_set(&b1, sym("D"), 4, &err), err);
    CHECK_OK(mge_binding_set(&b2, sym("D"), 9, &err), err);
    concrete(g, &b1, "a", "[2,4,10,6]");
    concrete(g, &b2, "a", "[1,4,32,2]");
    concrete(g, &b1, "b", "[2,4,10,6]");
    concrete(g, &b2, "c", "[1,2,18,3]");
    concrete(g, &b1, "p", "[2,4,3,5]");
    concrete(g, &b2, "p", "[1,4,3,5]");
    concrete(g, &b2, "q", "[1,8,2,2]");
    concrete(g, &b1, "d", "[2,2,7]");
    concrete(g, &b2, "d", "[1,2,1]");
    concrete(g, &b2, "e", "[1,2,7]");
    concrete(g, &b1, "f", "[2,3,2,3,2]");
    concrete(g, &b2, "f", "[1,3,5,8,1]");
    mge_graph_free(g);
}

/* ---------------------------------------------------------------- errors */

static void parse_fails(const char *body, const char *want)
{
    char src[1024];
    snprintf(src, sizeof src, "input x : f32[1,4,6,6]\ninput s : f32[1,4,5]\ninput v : f32[1,2,3,4,3]\n%s\noutput y\n",
             body);
    mge_graph *g = NULL;
    mge_error e;
    mge_error_clear(&e);
    mge_status st = mge_text_parse(src, strlen(src), ".", &g, &e);
    CHECK_MSG(st != MGE_OK, "%s: accepted", body);
    CHECK_MSG(strstr(e.msg, want) != NULL, "%s: message '%s', expected '%s'", body, e.msg, want);
    mge_graph_free(g);
}

static void test_errors(void)
{
    parse_fails("y = conv_transpose2d(x, out=2, kernel=3, stride=2, output_padding=2)",
                "conv_transpose2d: output_padding=[2,2] must be smaller than stride=[2,2] or dilation=[1,1]");
    parse_fails("y = conv_transpose2d(x, out=2, kernel=3, stride=[2,1], output_padding=[1,1])",
                "(axis w: 1 against stride 1, dilation 1)");
    parse_fails("y = conv_transpose2d(x, out=2, kernel=3, pad=-1)",
                "conv_transpose2d: pad=[-1,-1]: expected values in [0, 1073741824]");
    parse_fails("y = conv_transpose2d(x, out=2, kernel=3, stride=0)", "conv_transpose2d: stride=[0,0]");
    parse_fails("y = conv_transpose2d(x, out=2, kernel=1, pad=4)",
                "conv_transpose2d: x f32[1,4,6,6] with stride=1 pad=4 dilation=1 kernel=1 output_padding=0 "
                "gives output height -2: expected at least 1");
    parse_fails("y = conv_transpose2d(x, out=3, kernel=2, groups=2)", "out=3 is not divisible by groups=2");
    parse_fails("y = conv_transpose2d(x, out=2, kernel=1, stride=1073741824)",
                "conv_transpose2d: output f32[1,2,5368709121,5368709121] of x f32[1,4,6,6] is too large");
    parse_fails("y = conv_transpose2d(x, out=3, kernel=2, groups=3)", "channels 4 not divisible by groups=3");
    parse_fails("y = conv_transpose2d(s, out=2, kernel=2)", "conv_transpose2d: x is f32[1,4,5]: expected rank 4");
    parse_fails("y = conv1d(s, out=2, kernel=5, dilation=2)",
                "conv1d: kernel=5 with dilation=2 spans 9, larger than the padded input length 5");
    parse_fails("y = conv1d(s, out=2, kernel=[3,3])", "conv1d: 'kernel' has 2 values: expected 1");
    parse_fails("y = conv1d(s, out=2, kernel=3, pad=-2)", "conv1d: pad=-2: expected values in [0,");
    parse_fails("y = conv1d(x, out=2, kernel=3)", "conv1d: x is f32[1,4,6,6]: expected rank 3 [N,C,L]");
    parse_fails("y = conv3d(x, out=2, kernel=3)", "conv3d: x is f32[1,4,6,6]: expected rank 5 [N,C,D,H,W]");
    parse_fails("y = conv3d(v, out=2, kernel=[3,3])", "conv3d: 'kernel' has 2 values: expected 1 or 3 (d, h, w)");
    parse_fails("y = conv3d(v, out=2, kernel=[1,1,4], pad=[0,0,-1])", "conv3d: pad=[0,0,-1]: expected values in [0,");
    parse_fails("y = conv3d(v, out=2, kernel=[1,1,4])",
                "conv3d: axis w: kernel=4 with dilation=1 spans 4, larger than the padded input length 3");
    parse_fails("y = adaptive_avgpool2d(x, output_size=[0,2])",
                "adaptive_avgpool2d: output_size=[0,2]: expected values in [1, 1073741824]");
    parse_fails("y = adaptive_maxpool1d(s, output_size=-1)", "adaptive_maxpool1d: output_size=-1");
    parse_fails("y = adaptive_maxpool1d(s, output_size=[2,2])", "output_size has 2 values: expected 1");
    parse_fails("y = adaptive_avgpool2d(s)", "output_size");
    parse_fails("y = adaptive_maxpool2d(x, output_size=1073741824)",
                "adaptive_maxpool2d: output f32[1,4,1073741824,1073741824] of x f32[1,4,6,6] is too large");
    parse_fails("y = adaptive_avgpool1d(x, output_size=2)", "expected rank 2 or 3 ([N,C,L] or [C,L])");
}

/* The gradient ops check dy against the forward output. */
static void test_grad_op_shapes(void)
{
    mge_graph *g = mge_graph_new();
    int64_t xd[4] = {1, 4, 3, 3}, wd[4] = {4, 2, 2, 2}, yd[4] = {1, 2, 6, 6}, bad[4] = {1, 2, 5, 6};
    int x = mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 4, xd, &err);
    int w = mge_graph_add_value(g, "w", MGE_VAL_INPUT, MGE_F32, 4, wd, &err);
    int dy = mge_graph_add_value(g, "dy", MGE_VAL_INPUT, MGE_F32, 4, yd, &err);
    int db = mge_graph_add_value(g, "db", MGE_VAL_INPUT, MGE_F32, 4, bad, &err);
    mge_attr at[2] = {A(MGE_KEY_kernel, 2), A(MGE_KEY_stride, 2)};
    CHECK(mge_graph_add_node(g, "gi", MGE_OP_CONV_TRANSPOSE2D_GRAD_INPUT, 3, (const int[]){dy, w, x}, 2, at, 1,
                             (const char *[]){"gi"}, &err) >= 0);
    TMPL(g, "gi", "[1,4,3,3]");
    CHECK(mge_graph_add_node(g, "gw", MGE_OP_CONV_TRANSPOSE2D_GRAD_WEIGHT, 3, (const int[]){dy, x, w}, 2, at, 1,
                             (const char *[]){"gw"}, &err) >= 0);
    TMPL(g, "gw", "[4,2,2,2]");
    CHECK(mge_graph_add_node(g, "bad", MGE_OP_CONV_TRANSPOSE2D_GRAD_INPUT, 3, (const int[]){db, w, x}, 2, at, 1,
                             (const char *[]){"bad"}, &err) < 0);
    CHECK_MSG(strstr(err.msg, "dy is f32[1,2,5,6]: expected f32[1,2,6,6] (the forward output)"), "%s", err.msg);
    mge_attr os = A(MGE_KEY_output_size, 3);
    CHECK(mge_graph_add_node(g, "ap", MGE_OP_ADAPTIVE_AVGPOOL2D_GRAD, 2, (const int[]){dy, x}, 1, &os, 1,
                             (const char *[]){"ap"}, &err) < 0);
    CHECK_MSG(strstr(err.msg, "adaptive_avgpool2d_grad: dy is f32[1,2,6,6]: expected f32[1,4,3,3]"), "%s", err.msg);
    mge_graph_free(g);
}

/* ---------------------------------------------------------------- values */

static float *run1(const char *src, const char *backend, ug_outs *o)
{
    mge_graph *g = ug_parse(src);
    if (!g)
        return NULL;
    int ok = ug_run(g, backend, 2, 1, (ug_fill){0, -1, 1, 0}, o);
    mge_graph_free(g);
    return ok && o->n ? o->t[0].data : NULL;
}

static void test_values(void)
{
    static const char *backends[] = {"ref", "cpu"};
    for (int b = 0; b < 2; b++) {
        ug_outs o;
        /* each input element becomes a 2x2 block (weight all ones, bias 0.5) */
        float *y = run1("const x : f32[1,1,2,2] = [1, 2, 3, 4]\n"
                        "const w : f32[1,1,2,2] = [1, 1, 1, 1]\n"
                        "const bb : f32[1] = [0.5]\n"
                        "y = conv_transpose2d(x, w, bb, out=1, kernel=2, stride=2)\n"
                        "output y\n",
                        backends[b], &o);
        static const float want[16] = {1.5, 1.5, 2.5, 2.5, 1.5, 1.5, 2.5, 2.5, 3.5, 3.5, 4.5, 4.5, 3.5, 3.5, 4.5, 4.5};
        CHECK_MSG(y && memcmp(y, want, sizeof want) == 0, "%s: conv_transpose2d k2 s2", backends[b]);
        ug_outs_free(&o);
        /* stride 1, 2x2 taps [1,2;3,4] over a single 1: the taps; over
         * [1,1]: overlapping sums */
        y = run1("const x : f32[1,1,1,2] = [1, 1]\n"
                 "const w : f32[1,1,2,2] = [1, 2, 3, 4]\n"
                 "y = conv_transpose2d(x, w, out=1, kernel=2, bias=false)\n"
                 "output y\n",
                 backends[b], &o);
        static const float want2[6] = {1, 3, 2, 3, 7, 4};
        CHECK_MSG(y && memcmp(y, want2, sizeof want2) == 0, "%s: conv_transpose2d overlap", backends[b]);
        ug_outs_free(&o);
        /* conv1d: a moving sum of 3 */
        y = run1("const s : f32[1,1,5] = [1, 2, 3, 4, 5]\n"
                 "const w : f32[1,1,3] = [1, 1, 1]\n"
                 "y = conv1d(s, w, out=1, kernel=3, bias=false, pad=1)\n"
                 "output y\n",
                 backends[b], &o);
        static const float want3[5] = {3, 6, 9, 12, 9};
        CHECK_MSG(y && memcmp(y, want3, sizeof want3) == 0, "%s: conv1d", backends[b]);
        ug_outs_free(&o);
        /* bins of 5 into 3: [0,2) [1,4) [3,5); into 7: starts 0 0 1 2 2 3 4, ends 1 2 3 3 4 5 5 */
        y = run1("const s : f32[1,1,5] = [1, 2, 3, 4, 5]\ny = adaptive_avgpool1d(s, output_size=3)\noutput y\n",
                 backends[b], &o);
        CHECK_MSG(y && y[0] == 1.5f && y[1] == 3.0f && y[2] == 4.5f, "%s: adaptive_avgpool1d 3", backends[b]);
        ug_outs_free(&o);
        y = run1("const s : f32[1,1,5] = [1, 2, 3, 4, 5]\ny = adaptive_avgpool1d(s, output_size=7)\noutput y\n",
                 backends[b], &o);
        static const float want7[7] = {1, 1.5, 2.5, 3, 3.5, 4.5, 5};
        CHECK_MSG(y && memcmp(y, want7, sizeof want7) == 0, "%s: adaptive_avgpool1d 7", backends[b]);
        ug_outs_free(&o);
        y = run1("const s : f32[1,1,5] = [5, 1, 4, 2, 3]\ny = adaptive_maxpool1d(s, output_size=3)\noutput y\n",
                 backends[b], &o);
        CHECK_MSG(y && y[0] == 5 && y[1] == 4 && y[2] == 3, "%s: adaptive_maxpool1d", backends[b]);
        ug_outs_free(&o);
        /* 2-D: 4x4 into 2x2 is a 2x2 mean / max */
        y = run1("const x : f32[1,1,4,4] = [1,2,3,4, 5,6,7,8, 9,10,11,12, 13,14,15,16]\n"
                 "a = adaptive_avgpool2d(x, output_size=2)\nm = adaptive_maxpool2d(x, output_size=[2,1])\n"
                 "output a\noutput m\n",
                 backends[b], &o);
        CHECK_MSG(y && y[0] == 3.5f && y[1] == 5.5f && y[2] == 11.5f && y[3] == 13.5f, "%s: adaptive_avgpool2d",
                  backends[b]);
        float *m = o.n > 1 ? o.t[1].data : NULL;
        CHECK_MSG(m && m[0] == 8 && m[1] == 16, "%s: adaptive_maxpool2d", backends[b]);
        ug_outs_free(&o);
    }
}

/* conv_transpose2d(x, w) is conv2d_grad_input(x, w, like y): two
 * independent kernels of one map, on ref and cpu, odd shapes. */
static void test_against_conv2d_grad(void)
{
    static const char *cases[] = {
        "input x : f32[2,4,5,6]\ninput w : f32[4,3,3,3]\ninput like : f32[2,3,11,13]\n"
        "a = conv_transpose2d(x, w, out=3, kernel=3, stride=2, pad=0, bias=false)\n"
        "b = conv2d_grad_input(x, w, like, kernel=3, stride=2)\noutput a\noutput b\n",
        "input x : f32[1,6,4,3]\ninput w : f32[6,2,2,3]\ninput like : f32[1,6,8,7]\n"
        "a = conv_transpose2d(x, w, out=6, kernel=[2,3], stride=[2,3], pad=[1,1], dilation=[2,1], groups=3, "
        "output_padding=[1,0], bias=false)\n"
        "b = conv2d_grad_input(x, w, like, kernel=[2,3], stride=[2,3], pad=[1,1], dilation=[2,1], groups=3)\n"
        "output a\noutput b\n",
        "input x : f32[1,5,7,7]\ninput w : f32[5,1,3,3]\ninput like : f32[1,5,7,7]\n"
        "a = conv_transpose2d(x, w, out=5, kernel=3, pad=1, groups=5, bias=false)\n"
        "b = conv2d_grad_input(x, w, like, kernel=3, pad=1, groups=5)\noutput a\noutput b\n",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int be = 0; be < 2; be++) {
            mge_graph *g = ug_parse(cases[i]);
            if (!g)
                continue;
            ug_outs o;
            if (ug_run(g, be ? "cpu" : "ref", 3, 1, (ug_fill){0, -1, 1, 0}, &o) && o.n == 2) {
                ug_outs a = {1, {o.t[0]}}, b = {1, {o.t[1]}};
                ug_check_close(&b, &a, 1e-5);
            } else {
                CHECK_MSG(0, "case %zu on %s did not run", i, be ? "cpu" : "ref");
            }
            ug_outs_free(&o);
            mge_graph_free(g);
        }
}

/* PyTorch's bounds: ConvTranspose2d fan_in = weight.size(1) * kh * kw = out/groups * kh * kw */
static void test_init(void)
{
    mge_tdesc x = {.dtype = MGE_F32, .ndim = 4, .dims = {1, 8, 4, 4}};
    mge_param_spec sp[2];
    int ns = 0;
    mge_attr at[4] = {A(MGE_KEY_out, 6), A(MGE_KEY_kernel, 3), A(MGE_KEY_groups, 2)};
    CHECK_OK(mge_convt_params(MGE_OP_CONV_TRANSPOSE2D, 3, at, &x, sp, &ns, &err), err);
    CHECK(ns == 2);
    char want[64];
    snprintf(want, sizeof want, "uniform(%.9g)", 1.0 / sqrt(3.0 * 9.0));
    CHECK_MSG(strcmp(sp[0].init, want) == 0 && strcmp(sp[1].init, want) == 0, "%s, expected %s", sp[0].init, want);
    CHECK(sp[0].ndim == 4 && sp[0].dims[0] == 8 && sp[0].dims[1] == 3 && sp[0].dims[2] == 3);
    mge_tdesc s = {.dtype = MGE_F32, .ndim = 3, .dims = {1, 8, 10}};
    CHECK_OK(mge_convt_params(MGE_OP_CONV1D, 3, at, &s, sp, &ns, &err), err);
    snprintf(want, sizeof want, "uniform(%.9g)", 1.0 / sqrt(4.0 * 3.0));
    CHECK_MSG(strcmp(sp[0].init, want) == 0, "%s, expected %s", sp[0].init, want);
    CHECK(sp[0].ndim == 3 && sp[0].dims[0] == 6 && sp[0].dims[1] == 4 && sp[0].dims[2] == 3);
    mge_tdesc v = {.dtype = MGE_F32, .ndim = 5, .dims = {1, 8, 4, 4, 4}};
    CHECK_OK(mge_convt_params(MGE_OP_CONV3D, 3, at, &v, sp, &ns, &err), err);
    snprintf(want, sizeof want, "uniform(%.9g)", 1.0 / sqrt(4.0 * 27.0));
    CHECK_MSG(strcmp(sp[0].init, want) == 0, "%s, expected %s", sp[0].init, want);
    CHECK(sp[0].ndim == 5 && sp[0].dims[0] == 6 && sp[0].dims[1] == 4 && sp[0].dims[4] == 3);
}

/* adaptive max pooling's gradient goes to the first maximum of a bin (PyTorch) */
static void test_max_ties(void)
{
    for (int be = 0; be < 2; be++) {
        /* bins [0,2)x[0,2) and [0,2)x[2,4): each has 3 in several places */
        mge_graph *g = ug_parse("const x : f32[1,1,2,4] = [1, 3, 3, 0, 3, 3, 2, 3]\n"
                                "input dy : f32[1,1,1,2]\n"
                                "m = adaptive_maxpool2d(x, output_size=[1,2])\n"
                                "d = adaptive_maxpool2d_grad(dy, x, output_size=[1,2])\n"
                                "output m\noutput d\n");
        if (!g)
            continue;
        ug_outs o;
        if (ug_run(g, be ? "cpu" : "ref", 1, 1, (ug_fill){0, 1, 1, 0}, &o) && o.n == 2) {
            const float *m = o.t[0].data, *d = o.t[1].data;
            static const float want[8] = {0, 1, 1, 0, 0, 0, 0, 0};
            CHECK(m[0] == 3 && m[1] == 3);
            CHECK_MSG(memcmp(d, want, sizeof want) == 0, "%s: %g %g %g %g / %g %g %g %g", be ? "cpu" : "ref", d[0], d[1],
                      d[2], d[3], d[4], d[5], d[6], d[7]);
        } else {
            CHECK(0);
        }
        ug_outs_free(&o);
        mge_graph_free(g);
    }
}

/* The cpu kernels cut work by shape alone: 1 and 3 threads give the same bits. */
static void test_threads(void)
{
    mge_graph *g = ug_parse("input x : f32[2,24,17,19]\n"
                            "input w : f32[24,8,4,4]\n"
                            "input dy : f32[2,8,34,38]\n"
                            "input v : f32[2,6,9,10,11]\n"
                            "input w3 : f32[12,6,3,3,3]\n"
                            "a = conv_transpose2d(x, w, out=8, kernel=4, stride=2, pad=1, bias=false)\n"
                            "b = conv_transpose2d_grad_input(dy, w, x, kernel=4, stride=2, pad=1)\n"
                            "c = conv_transpose2d_grad_weight(dy, x, w, kernel=4, stride=2, pad=1)\n"
                            "d = conv3d(v, w3, out=12, kernel=3, pad=1, bias=false)\n"
                            "output a, b, c, d\n");
    mge_graph *g3 = ug_parse("input v : f32[2,6,9,10,11]\n"
                             "input w3 : f32[12,6,3,3,3]\n"
                             "input d3 : f32[2,12,9,10,11]\n"
                             "e = conv3d_grad_input(d3, w3, v, kernel=3, pad=1)\n"
                             "f = conv3d_grad_weight(d3, v, w3, kernel=3, pad=1)\n"
                             "input z : f32[3,5,33,29]\n"
                             "input dz : f32[3,5,5,7]\n"
                             "p = adaptive_avgpool2d_grad(dz, z, output_size=[5,7])\n"
                             "q = adaptive_maxpool2d_grad(dz, z, output_size=[5,7])\n"
                             "output e, f, p, q\n");
    mge_graph *gs[2] = {g, g3};
    for (int i = 0; i < 2; i++) {
        if (!gs[i])
            continue;
        ug_outs o1, o3;
        if (ug_run(gs[i], "cpu", 1, 1, (ug_fill){0, -1, 1, 0}, &o1) && ug_run(gs[i], "cpu", 3, 1, (ug_fill){0, -1, 1, 0}, &o3))
            ug_check_close(&o1, &o3, 0);
        else
            CHECK(0);
        ug_outs_free(&o1);
        ug_outs_free(&o3);
        mge_graph_free(gs[i]);
    }
}

/* ---------------------------------------------------------------- gradients */

typedef struct ct_case {
    int64_t N, C, H, W, O, kh, kw, sh, sw, ph, pw, oph, opw, dh, dw, groups;
    int bias;
} ct_case;

static mge_attr A2(int key, int64_t a, int64_t b)
{
    int64_t v[2] = {a, b};
    return A_ints(key, 2, v);
}

static void convt_fd(const ct_case *c)
{
    mge_graph *g = mge_graph_new();
    int64_t xd[4] = {c->N, c->C, c->H, c->W};
    int x = mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 4, xd, &err);
    mge_attr at[8] = {A(MGE_KEY_out, c->O),          A2(MGE_KEY_kernel, c->kh, c->kw),
                      A2(MGE_KEY_stride, c->sh, c->sw), A2(MGE_KEY_pad, c->ph, c->pw),
                      A2(MGE_KEY_output_padding, c->oph, c->opw), A2(MGE_KEY_dilation, c->dh, c->dw),
                      A(MGE_KEY_groups, c->groups), A(MGE_KEY_bias, c->bias)};
    int y = layer(g, "ct", MGE_OP_CONV_TRANSPOSE2D, x, 8, at);
    CHECK(y >= 0);
    if (y >= 0) {
        double e = gc_check(g, y, NULL, 1e-2, 0);
        CHECK_MSG(e < 1e-2, "convt N%lld C%lld %lldx%lld O%lld k%lldx%lld s%lldx%lld p%lldx%lld op%lldx%lld d%lldx%lld "
                  "g%lld: %g",
                  (long long)c->N, (long long)c->C, (long long)c->H, (long long)c->W, (long long)c->O,
                  (long long)c->kh, (long long)c->kw, (long long)c->sh, (long long)c->sw, (long long)c->ph,
                  (long long)c->pw, (long long)c->oph, (long long)c->opw, (long long)c->dh, (long long)c->dw,
                  (long long)c->groups, e);
    }
    mge_graph_free(g);
}

static void test_convt_fd(void)
{
    static const ct_case cases[] = {
        /* N  C  H  W  O  kh kw sh sw ph pw oph opw dh dw g bias */
        {2, 3, 3, 4, 2, 2, 2, 2, 2, 0, 0, 0, 0, 1, 1, 1, 1},   /* U-Net upsampling k2 s2 */
        {1, 2, 4, 3, 3, 4, 4, 2, 2, 1, 1, 0, 0, 1, 1, 1, 1},   /* k4 s2 p1 (DCGAN) */
        {1, 2, 3, 3, 2, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 0},   /* output_padding 1 */
        {2, 4, 3, 4, 6, 3, 2, 1, 2, 0, 1, 0, 1, 2, 1, 2, 1},   /* groups, dilation, mixed */
        {1, 3, 4, 4, 3, 3, 3, 1, 1, 1, 1, 0, 0, 1, 1, 3, 1},   /* depthwise */
        {1, 2, 3, 3, 2, 2, 2, 1, 1, 0, 0, 1, 1, 2, 2, 1, 1},   /* output_padding >= stride < dilation: ref path */
        {1, 2, 2, 3, 4, 1, 1, 3, 2, 0, 0, 2, 1, 1, 1, 1, 0},   /* 1x1 stride 3 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        convt_fd(&cases[i]);
}

static void conv1d_fd(int64_t N, int64_t C, int64_t L, int64_t O, int64_t k, int64_t s, int64_t p, int64_t d,
                      int64_t groups, int bias)
{
    mge_graph *g = mge_graph_new();
    int64_t xd[3] = {N, C, L};
    int x = mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 3, xd, &err);
    mge_attr at[7] = {A(MGE_KEY_out, O), A(MGE_KEY_kernel, k), A(MGE_KEY_stride, s), A(MGE_KEY_pad, p),
                      A(MGE_KEY_dilation, d), A(MGE_KEY_groups, groups), A(MGE_KEY_bias, bias)};
    int y = layer(g, "c1", MGE_OP_CONV1D, x, 7, at);
    CHECK(y >= 0);
    if (y >= 0) {
        double e = gc_check(g, y, NULL, 1e-2, 0);
        CHECK_MSG(e < 1e-2, "conv1d C%lld L%lld O%lld k%lld s%lld p%lld d%lld g%lld: %g", (long long)C, (long long)L,
                  (long long)O, (long long)k, (long long)s, (long long)p, (long long)d, (long long)groups, e);
    }
    mge_graph_free(g);
}

static void test_conv1d_fd(void)
{
    conv1d_fd(2, 3, 9, 4, 3, 1, 1, 1, 1, 1);
    conv1d_fd(1, 4, 11, 6, 3, 2, 2, 2, 2, 0);
    conv1d_fd(2, 4, 7, 4, 5, 1, 0, 1, 4, 1);   /* depthwise */
    conv1d_fd(1, 2, 6, 3, 1, 3, 0, 1, 1, 1);   /* 1x1 stride 3 */
}

static void conv3d_fd(const int64_t *xd, int64_t O, const int64_t *k, const int64_t *st, const int64_t *p,
                      const int64_t *d, int64_t groups, int bias)
{
    mge_graph *g = mge_graph_new();
    int x = mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 5, xd, &err);
    mge_attr at[7] = {A(MGE_KEY_out, O),         A_ints(MGE_KEY_kernel, 3, k), A_ints(MGE_KEY_stride, 3, st),
                      A_ints(MGE_KEY_pad, 3, p), A_ints(MGE_KEY_dilation, 3, d), A(MGE_KEY_groups, groups),
                      A(MGE_KEY_bias, bias)};
    int y = layer(g, "c3", MGE_OP_CONV3D, x, 7, at);
    CHECK(y >= 0);
    if (y >= 0) {
        double e = gc_check(g, y, NULL, 1e-2, 0);
        CHECK_MSG(e < 1e-2, "conv3d C%lld O%lld k%lldx%lldx%lld g%lld: %g", (long long)xd[1], (long long)O,
                  (long long)k[0], (long long)k[1], (long long)k[2], (long long)groups, e);
    }
    mge_graph_free(g);
}

static void test_conv3d_fd(void)
{
    conv3d_fd((const int64_t[]){2, 3, 4, 5, 4}, 4, (const int64_t[]){3, 3, 3}, (const int64_t[]){1, 1, 1},
              (const int64_t[]){1, 1, 1}, (const int64_t[]){1, 1, 1}, 1, 1);
    conv3d_fd((const int64_t[]){1, 4, 5, 6, 7}, 2, (const int64_t[]){2, 3, 1}, (const int64_t[]){2, 1, 3},
              (const int64_t[]){0, 2, 1}, (const int64_t[]){1, 2, 1}, 2, 0);
    conv3d_fd((const int64_t[]){1, 3, 3, 4, 3}, 3, (const int64_t[]){1, 1, 1}, (const int64_t[]){1, 2, 1},
              (const int64_t[]){0, 0, 0}, (const int64_t[]){1, 1, 1}, 3, 1);   /* depthwise 1x1x1 */
}

static void apool_fd(int op, int nd, const int64_t *xd, int64_t oh, int64_t ow)
{
    mge_graph *g = mge_graph_new();
    int x = mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, nd, xd, &err);
    int64_t os[2] = {oh, ow};
    int is2d = op == MGE_OP_ADAPTIVE_AVGPOOL2D || op == MGE_OP_ADAPTIVE_MAXPOOL2D;
    mge_attr at = A_ints(MGE_KEY_output_size, is2d ? 2 : 1, is2d ? os : os + 1);
    int y = node(g, "p", op, 1, &x, 1, &at);
    CHECK(y >= 0);
    if (y >= 0) {
        double e = gc_check(g, y, NULL, 1e-2, 0);
        CHECK_MSG(e < 1e-2, "%s to %lldx%lld: %g", mge_op_info(op)->name, (long long)oh, (long long)ow, e);
    }
    mge_graph_free(g);
}

static void test_apool_fd(void)
{
    static const int ops2[] = {MGE_OP_ADAPTIVE_AVGPOOL2D, MGE_OP_ADAPTIVE_MAXPOOL2D};
    static const int ops1[] = {MGE_OP_ADAPTIVE_AVGPOOL1D, MGE_OP_ADAPTIVE_MAXPOOL1D};
    for (int i = 0; i < 2; i++) {
        apool_fd(ops2[i], 4, (const int64_t[]){2, 3, 7, 5}, 3, 2);   /* overlapping bins */
        apool_fd(ops2[i], 4, (const int64_t[]){1, 2, 3, 4}, 5, 7);   /* larger than the input */
        apool_fd(ops2[i], 3, (const int64_t[]){2, 6, 6}, 1, 1);      /* [C,H,W], global */
        apool_fd(ops1[i], 3, (const int64_t[]){2, 3, 10}, 1, 4);
        apool_fd(ops1[i], 2, (const int64_t[]){3, 4}, 1, 9);
    }
}

int main(void)
{
    RUN(test_shapes);
    RUN(test_symbolic);
    RUN(test_errors);
    RUN(test_grad_op_shapes);
    RUN(test_values);
    RUN(test_against_conv2d_grad);
    RUN(test_init);
    RUN(test_max_ties);
    RUN(test_threads);
    RUN(test_convt_fd);
    RUN(test_conv1d_fd);
    RUN(test_conv3d_fd);
    RUN(test_apool_fd);
    return unit_done();
}
