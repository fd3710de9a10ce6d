/* test_index.c — the indexing ops (gather, index_select, gather_elements,
 * scatter, scatter_nd, one_hot) and the logic ops (where, comparisons,
 * not/and/or/xor): symbolic templates and concrete shapes at two
 * bindings, values known at plan time (through them and integer binary
 * arithmetic, ONNX's truncating div), hand-computed results on ref and
 * cpu, every out-of-range index refused with its value, position and
 * bound, and the gradients against finite differences. numpy and PyTorch
 * check the numbers at scale in tests/oracle/test_index.py. */
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

/* The template of value name, as "[N,K,4]". */
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

/* Concrete shape of value name at binding b, as "[2,3,4]". */
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

static const char *sym_src =
    "input x : f32[N,S,4]\n"
    "input idx : i64[K]\n"
    "input ie : i64[N,K,4]\n"
    "input u : f32[N,K,4]\n"
    "input ind : i32[K,2]\n"
    "input un : f32[K,4]\n"
    "input y : f32[S,1]\n"
    "const zero : f32[] = [0]\n"
    "g = gather(x, idx, axis=1)\n"
    "g2 = gather(x, ie, axis=-1)\n"
    "s = index_select(x, idx, axis=1)\n"
    "ge = gather_elements(x, ie, axis=1)\n"
    "sc = scatter(x, ie, u, axis=1)\n"
    "snd = scatter_nd(x, ind, un)\n"
    "oh = one_hot(idx, depth=5)\n"
    "oh0 = one_hot(ind, depth=3, axis=0)\n"
    "m = less(x, zero)\n"
    "w = where(m, x, y)\n"
    "e = equal(x, y)\n"
    "gt = greater(y, x)\n"
    "le = less_equal(x, zero)\n"
    "ge2 = greater_equal(x, y)\n"
    "n = not(m)\n"
    "a = and(m, e)\n"
    "o = or(m, gt)\n"
    "xo = xor(le, ge2)\n"
    "output w\n";

static void test_symbolic(void)
{
    mge_graph *g = ug_parse(sym_src);
    if (!g)
        return;
    TMPL(g, "g", "[N,K,4]");
    TMPL(g, "g2", "[N,S,N,K,4]");
    TMPL(g, "s", "[N,K,4]");
    TMPL(g, "ge", "[N,K,4]");
    TMPL(g, "sc", "[N,S,4]");
    TMPL(g, "snd", "[N,S,4]");
    TMPL(g, "oh", "[K,5]");
    TMPL(g, "oh0", "[3,K,2]");
    TMPL(g, "w", "[N,S,4]");
    const char *bools[] = {"m", "e", "gt", "le", "ge2", "n", "a", "o", "xo"};
    for (size_t i = 0; i < sizeof bools / sizeof bools[0]; i++) {
        TMPL(g, bools[i], "[N,S,4]");
        CHECK(g->values[mge_graph_find(g, bools[i])].dtype == MGE_BOOL);
    }
    mge_binding b1 = {0}, b2 = {0};
    CHECK_OK(mge_binding_set(&b1, MGE_DIM_N, 2, &err), err);
    CHECK_OK(mge_binding_set(&b1, sym("S"), 5, &err), err);
    CHECK_OK(mge_binding_set(&b1, sym("K"), 3, &err), err);
    CHECK_OK(mge_binding_set(&b2, MGE_DIM_N, 1, &err), err);
    CHECK_OK(mge_binding_set(&b2, sym("S"), 9, &err), err);
    CHECK_OK(mge_binding_set(&b2, sym("K"), 7, &err), err);
    concrete(g, &b1, "g", "[2,3,4]");
    concrete(g, &b2, "g", "[1,7,4]");
    concrete(g, &b1, "g2", "[2,5,2,3,4]");
    concrete(g, &b1, "s", "[2,3,4]");
    concrete(g, &b2, "ge", "[1,7,4]");
    concrete(g, &b2, "sc", "[1,9,4]");
    concrete(g, &b1, "snd", "[2,5,4]");
    concrete(g, &b2, "oh", "[7,5]");
    concrete(g, &b1, "oh0", "[3,3,2]");
    concrete(g, &b1, "w", "[2,5,4]");
    concrete(g, &b2, "xo", "[1,9,4]");
    mge_graph_free(g);
}

/* A one_hot whose depth is computed from consts: known at plan time
 * through gather, the integer binary ops and where/equal. */
static void test_known_values(void)
{
    mge_graph *g = ug_parse("input x : i64[K]\n"
                            "const s : i64[3] = [2, 3, 4]\n"
                            "const i : i64[2] = [-1, 0]\n"
                            "const two : i64[] = [2]\n"
                            "const m3 : i64[] = [-3]\n"
                            "const three : i64[] = [3]\n"
                            "const one : i64[1] = [1]\n"
                            "g = gather(s, i)\n"           /* [4, 2] */
                            "m = mul(g, two)\n"            /* [8, 4] */
                            "d = div(m, m3)\n"             /* trunc: [-2, -1] */
                            "mn = minimum(g, three)\n"    /* [3, 2] */
                            "mx = maximum(d, mn)\n"       /* [3, 2] */
                            "t = sub(mx, d)\n"            /* [5, 3] */
                            "q = equal(s, three)\n"        /* [0, 1, 0] */
                            "w = where(q, s, two)\n"       /* [2, 3, 2] */
                            "dep = gather(t, one)\n"       /* [3] */
                            "oh = one_hot(x, dep)\n"
                            "ge = gather_elements(s, one)\n" /* [3] */
                            "output oh\n");
    if (!g)
        return;
    static const struct {
        const char *name;
        int n;
        double v[4];
    } want[] = {
        {"g", 2, {4, 2}}, {"m", 2, {8, 4}}, {"d", 2, {-2, -1}}, {"t", 2, {5, 3}},
        {"q", 3, {0, 1, 0}}, {"w", 3, {2, 3, 2}}, {"dep", 1, {3}}, {"ge", 1, {3}},
    };
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        mge_tdesc d;
        int v = mge_graph_find(g, want[k].name);
        CHECK_OK(mge_graph_probe_desc(g, v, 0, &d, &err), err);
        CHECK_MSG(d.known, "%s not known", want[k].name);
        for (int i = 0; d.known && i < want[k].n; i++)
            CHECK_MSG(d.val[i] == want[k].v[i], "%s[%d] = %g, expected %g", want[k].name, i, d.val[i], want[k].v[i]);
    }
    TMPL(g, "oh", "[K,3]");
    mge_graph_free(g);
    /* a depth known only at run time is refused at plan time, saying so */
    mge_graph *h = NULL;
    const char *src = "input x : i64[K]\ninput d : i64[]\noh = one_hot(x, d)\noutput oh\n";
    CHECK(mge_text_parse(src, strlen(src), ".", &h, &err) != MGE_OK);
    CHECK_MSG(strstr(err.msg, "not known at plan time"), "%s", err.msg);
    mge_graph_free(h);
    /* a const index out of range is refused when the node is added */
    src = "input x : f32[2,5]\nconst i : i64[2] = [1, 5]\ny = gather(x, i, axis=1)\noutput y\n";
    CHECK(mge_text_parse(src, strlen(src), ".", &h, &err) != MGE_OK);
    CHECK_MSG(strstr(err.msg, "index 5 at position 1 is out of range for axis 1 of size 5"), "%s", err.msg);
    mge_graph_free(h);
}

/* Runs g on backend be with ins[k] for graph input k (those the outputs
 * need); the outputs into res; the status. */
static mge_status run_on(const mge_graph *g, const char *be, const mge_tensor *const *ins, ug_outs *res)
{
    mge_exec *e = NULL;
    mge_exec_opts o = {0};
    o.threads = 2;
    o.backend = be;
    res->n = 0;
    mge_status s = mge_exec_create(g, &o, &e, &err);
    const mge_tensor *need[8] = {0};
    for (int i = 0; !s && i < mge_exec_ninputs(e) && i < 8; i++)
        for (int k = 0; k < g->ninputs; k++)
            if (g->inputs[k] == mge_exec_input(e, i))
                need[i] = ins[k];
    if (!s)
        s = mge_exec_run(e, need, &err);
    for (int i = 0; !s && i < mge_exec_noutputs(e) && i < 4; i++) {
        CHECK_OK(mge_tensor_copy(&res->t[i], mge_exec_result(e, i), &err), err);
        res->n++;
    }
    mge_exec_free(e);
    return s;
}

static void tensor_of(mge_tensor *t, mge_dtype dt, int nd, const int64_t *d, const double *v)
{
    CHECK_OK(mge_tensor_alloc(t, dt, nd, d, &err), err);
    for (int64_t i = 0; i < mge_tensor_numel(t); i++)
        switch (dt) {
        case MGE_F32: ((float *)t->data)[i] = (float)v[i]; break;
        case MGE_I32: ((int32_t *)t->data)[i] = (int32_t)v[i]; break;
        case MGE_I64: ((int64_t *)t->data)[i] = (int64_t)v[i]; break;
        case MGE_BOOL: ((uint8_t *)t->data)[i] = v[i] != 0; break;
        default: break;
        }
}

static double elem(const mge_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case MGE_F32: return ((const float *)t->data)[i];
    case MGE_I32: return ((const int32_t *)t->data)[i];
    case MGE_I64: return (double)((const int64_t *)t->data)[i];
    case MGE_BOOL: return ((const uint8_t *)t->data)[i];
    default: return NAN;
    }
}

static void expect(const char *what, const mge_tensor *t, int n, const double *v)
{
    CHECK_MSG(mge_tensor_numel(t) == n, "%s: %lld elements, expected %d", what, (long long)mge_tensor_numel(t), n);
    for (int i = 0; i < n && i < mge_tensor_numel(t); i++)
        CHECK_MSG(elem(t, i) == v[i], "%s[%d] = %g, expected %g", what, i, elem(t, i), v[i]);
}

/* Hand-computed results on ref and cpu, i32 and i64 indices. */
static void test_values(void)
{
    static const char *backends[] = {"ref", "cpu"};
    for (int b = 0; b < 2; b++)
        for (int it = 0; it < 2; it++) {
            const char *idt = it ? "i64" : "i32";
            char src[1600];
            snprintf(src, sizeof src,
                     "input x : f32[2,3]\n"
                     "input i : %s[2]\n"
                     "input ie : %s[2,2]\n"
                     "const u : f32[2,2] = [10, 20, 30, 40]\n"
                     "const ind : %s[2,1] = [1, -2]\n"
                     "const un : f32[2,3] = [7, 8, 9, 4, 5, 6]\n"
                     "const vals : f32[2] = [-1, 5]\n"
                     "const half : f32[] = [0.5]\n"
                     "g = gather(x, i, axis=1)\n"
                     "ge = gather_elements(x, ie, axis=1)\n"
                     "sc = scatter(x, ie, u, axis=1)\n"
                     "snd = scatter_nd(x, ind, un)\n"
                     "oh = one_hot(i, vals, depth=3)\n"
                     "lt = less(x, half)\n"
                     "w = where(lt, x, half)\n"
                     "output g, ge, sc, snd\n",
                     idt, idt, idt);
            mge_graph *g = ug_parse(src);
            if (!g)
                continue;
            mge_tensor x, i, ie;
            int64_t dx[2] = {2, 3}, di[1] = {2}, de[2] = {2, 2};
            double xv[6] = {0, 1, 2, 3, 4, 5}, iv[2] = {2, -3}, ev[4] = {0, 2, -1, 1};
            tensor_of(&x, MGE_F32, 2, dx, xv);
            tensor_of(&i, it ? MGE_I64 : MGE_I32, 1, di, iv);
            tensor_of(&ie, it ? MGE_I64 : MGE_I32, 2, de, ev);
            const mge_tensor *ins[3] = {&x, &i, &ie};
            ug_outs r = {0};
            CHECK_OK(run_on(g, backends[b], ins, &r), err);
            if (r.n == 4) {
                expect("gather", &r.t[0], 4, (double[]){2, 0, 5, 3});
                expect("gather_elements", &r.t[1], 4, (double[]){0, 2, 5, 4});
                /* row 0: [0,1,2] with [0]=10, [2]=20; row 1: [2]=30, [1]=40 */
                expect("scatter", &r.t[2], 6, (double[]){10, 1, 20, 3, 40, 30});
                /* rows 1 and -2 (= 0) replaced */
                expect("scatter_nd", &r.t[3], 6, (double[]){4, 5, 6, 7, 8, 9});
            }
            ug_outs_free(&r);
            /* the other outputs, through the same graph */
            mge_graph_free(g);
            snprintf(src + strlen(src) - strlen("output g, ge, sc, snd\n"), 64, "output oh, w\n");
            g = ug_parse(src);
            if (g && !run_on(g, backends[b], ins, &r) && r.n == 2) {
                expect("one_hot", &r.t[0], 6, (double[]){-1, -1, 5, 5, -1, -1});
                expect("where", &r.t[1], 6, (double[]){0, 0.5, 0.5, 0.5, 0.5, 0.5});
            } else {
                CHECK_MSG(0, "%s: %s", backends[b], err.msg);
            }
            ug_outs_free(&r);
            mge_graph_free(g);
            mge_tensor_free(&x);
            mge_tensor_free(&i);
            mge_tensor_free(&ie);
        }
}

/* An index out of range fails at run time with its value, position and
 * bound, on ref and cpu, for every indexing op; -size is still in range. */
static void test_out_of_range(void)
{
    static const struct {
        const char *body, *msg;
    } cases[] = {
        {"y = gather(x, i, axis=1)\n", "gather: index 7 at [1,0] is out of range for axis 1 of size 5"},
        {"y = gather(x, i, axis=0)\n", "gather: index -6 at [0,1] is out of range for axis 0 of size 2"},
        {"y = index_select(x, j, axis=1)\n", "index_select: index 5 at [2] is out of range for axis 1 of size 5"},
        {"y = gather_elements(x, i, axis=1)\n", "gather_elements: index 7 at [1,0] is out of range for axis 1 of size 5"},
        {"y = scatter(x, i, u, axis=1)\n", "scatter: index 7 at [1,0] is out of range for axis 1 of size 5"},
        {"y = scatter_nd(x, i, v)\n", "scatter_nd: index 7 at [1,0] is out of range for axis 0 of size 2"},
    };
    static const char *backends[] = {"ref", "cpu"};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int b = 0; b < 2; b++) {
            char src[512];
            snprintf(src, sizeof src,
                     "input x : f32[2,5]\ninput i : i64[2,2]\ninput j : i32[3]\n"
                     "const u : f32[2,2] = [1, 2, 3, 4]\nconst v : f32[2] = [1, 2]\n%soutput y\n",
                     cases[c].body);
            mge_graph *g = ug_parse(src);
            if (!g)
                continue;
            mge_tensor x, i, j;
            int64_t dx[2] = {2, 5}, di[2] = {2, 2}, dj[1] = {3};
            double xv[10] = {0}, iv[4] = {1, 1, 7, 0}, jv[3] = {0, -5, 5};
            if (strstr(cases[c].body, "axis=0"))
                iv[1] = -6, iv[2] = 1;
            tensor_of(&x, MGE_F32, 2, dx, xv);
            tensor_of(&i, MGE_I64, 2, di, iv);
            tensor_of(&j, MGE_I32, 1, dj, jv);
            const mge_tensor *ins[3] = {&x, &i, &j};
            ug_outs r = {0};
            mge_status s = run_on(g, backends[b], ins, &r);
            CHECK_MSG(s != MGE_OK && strstr(err.msg, cases[c].msg), "%s on %s: status %d, '%s'", cases[c].body,
                      backends[b], (int)s, err.msg);
            ug_outs_free(&r);
            mge_tensor_free(&x);
            mge_tensor_free(&i);
            mge_tensor_free(&j);
            mge_graph_free(g);
        }
}

/* ONNX integer Div: truncation toward zero, INT64_MIN / -1 wraps, a zero
 * divisor is an error (never SIGFPE). */
static void test_int_div(void)
{
    static const char *backends[] = {"ref", "cpu"};
    for (int b = 0; b < 2; b++) {
        mge_graph *g = ug_parse("input a : i64[5]\ninput d : i64[5]\ny = div(a, d)\noutput y\n");
        if (!g)
            continue;
        mge_tensor a, d;
        int64_t n[1] = {5};
        tensor_of(&a, MGE_I64, 1, n, (double[]){7, -7, 7, -7, 6});
        tensor_of(&d, MGE_I64, 1, n, (double[]){2, 2, -2, -2, -1});
        ((int64_t *)a.data)[4] = INT64_MIN;
        const mge_tensor *ins[2] = {&a, &d};
        ug_outs r = {0};
        CHECK_OK(run_on(g, backends[b], ins, &r), err);
        if (r.n == 1) {
            expect("div", &r.t[0], 5, (double[]){3, -3, -3, 3, (double)INT64_MIN});
            CHECK(((const int64_t *)r.t[0].data)[4] == INT64_MIN);
        }
        ug_outs_free(&r);
        ((int64_t *)d.data)[2] = 0;
        CHECK(run_on(g, backends[b], ins, &r) != MGE_OK);
        CHECK_MSG(strstr(err.msg, "division by zero"), "%s", err.msg);
        ug_outs_free(&r);
        mge_tensor_free(&a);
        mge_tensor_free(&d);
        mge_graph_free(g);
    }
}

/* Gradients against finite differences: gather with repeated and negative
 * indices (the repeats sum), index_select, gather_elements, and where with
 * a broadcast operand (summed back to its shape). */
static void test_grads(void)
{
    static const char *srcs[] = {
        "input x : f32[3,5,2]\nconst i : i64[2,2] = [1, 4, -4, 0]\ny = gather(x, i, axis=1)\noutput y\n",
        "input x : f32[4,3]\nconst i : i32[5] = [3, 0, 3, -1, 2]\ny = index_select(x, i, axis=0)\noutput y\n",
        "input x : f32[3,4]\nconst i : i64[2,4] = [0, 1, 2, 0, 2, 2, 1, -3]\ny = gather_elements(x, i, axis=0)\n"
        "output y\n",
        "input a : f32[3,4]\ninput b : f32[4]\nconst c : bool[3,1] = [1, 0, 1]\ny = where(c, a, b)\noutput y\n",
        "input a : f32[3,1]\ninput b : f32[3,4]\ninput z : f32[3,4]\nconst zero : f32[] = [0]\n"
        "lt = less(z, zero)\ny = where(lt, a, b)\noutput y\n",
    };
    for (size_t k = 0; k < sizeof srcs / sizeof srcs[0]; k++) {
        mge_graph *g = ug_parse(srcs[k]);
        if (!g)
            continue;
        double w = gc_check(g, mge_graph_find(g, "y"), NULL, 1e-2, 0);
        CHECK_MSG(w <= 1e-2, "case %zu: worst %g", k, w);
        mge_graph_free(g);
    }
    /* the gradient ops on symbolic dims: like x, at any binding */
    mge_graph *sg = ug_parse("input x : f32[N,S,4]\ninput idx : i64[K]\ninput ie : i64[N,K,4]\n"
                             "input dy : f32[N,K,4]\na = gather(x, idx, axis=1)\nb = gather_elements(x, ie, axis=1)\n"
                             "y = add(a, b)\noutput y\n");
    if (sg) {
        int x = mge_graph_find(sg, "x"), gx = -1;
        CHECK_OK(mge_grad_build_from(sg, mge_graph_find(sg, "y"), mge_graph_find(sg, "dy"), 1, &x, &gx,
                                     &err), err);
        CHECK(ug_count_op(sg, MGE_OP_GATHER_GRAD) == 1 && ug_count_op(sg, MGE_OP_GATHER_ELEMENTS_GRAD) == 1);
        for (int i = 0; i < sg->nnodes; i++)
            if (sg->nodes[i].op == MGE_OP_GATHER_GRAD || sg->nodes[i].op == MGE_OP_GATHER_ELEMENTS_GRAD) {
                const char *nm = sg->values[sg->nodes[i].out[0]].name;
                TMPL(sg, nm, "[N,S,4]");
                mge_binding b1 = {0}, b2 = {0};
                CHECK_OK(mge_binding_set(&b1, MGE_DIM_N, 2, &err), err);
                CHECK_OK(mge_binding_set(&b1, sym("S"), 5, &err), err);
                CHECK_OK(mge_binding_set(&b1, sym("K"), 3, &err), err);
                CHECK_OK(mge_binding_set(&b2, MGE_DIM_N, 1, &err), err);
                CHECK_OK(mge_binding_set(&b2, sym("S"), 8, &err), err);
                CHECK_OK(mge_binding_set(&b2, sym("K"), 6, &err), err);
                concrete(sg, &b1, nm, "[2,5,4]");
                concrete(sg, &b2, nm, "[1,8,4]");
            }
        mge_graph_free(sg);
    }
    /* the ops without a rule say so */
    mge_graph *g = ug_parse("input x : f32[3]\nconst i : i64[1] = [1]\nconst u : f32[1] = [2]\n"
                            "y = scatter(x, i, u)\noutput y\n");
    if (g) {
        int x = mge_graph_find(g, "x"), gx = -1;
        CHECK(mge_grad_build_from(g, mge_graph_find(g, "y"), -1, 1, &x, &gx, &err) == MGE_ERR_UNSUPPORTED);
        CHECK_MSG(strstr(err.msg, "scatter has no gradient rule"), "%s", err.msg);
        mge_graph_free(g);
    }
}

/* scatter and scatter_nd with each reduction, repeated indices combining
 * in order, on ref and cpu (cpu falls back to ref's loop), f32 and i32. */
static void test_reductions(void)
{
    static const char *backends[] = {"ref", "cpu"};
    static const char *const reds[] = {"add", "mul", "max", "min"};
    /* x row [1, 5, -2]; updates 3, 4 both at column 0, 7 at column 2 (scatter),
     * and rows 0, 0 of [2,3] data (scatter_nd) */
    static const double want_sc[4][3] = {{8, 5, 5}, {12, 5, -14}, {4, 5, 7}, {1, 5, -2}};
    static const double want_nd[4][6] = {{1 + 3 + 7, 5 + 4 + 8, -2 + 5 + 9, 0, 0, 0},
                                         {1 * 3 * 7, 5 * 4 * 8, -2 * 5 * 9, 0, 0, 0},
                                         {7, 8, 9, 0, 0, 0},
                                         {1, 4, -2, 0, 0, 0}};
    for (int b = 0; b < 2; b++)
        for (int r = 0; r < 4; r++)
            for (int it = 0; it < 2; it++) {
                const char *dt = it ? "i32" : "f32";
                char src[800];
                snprintf(src, sizeof src,
                         "input x : %s[1,3]\ninput d : %s[2,3]\n"
                         "const i : i64[1,3] = [0, 0, 2]\nconst u : %s[1,3] = [3, 4, 7]\n"
                         "const j : i64[2,1] = [0, 0]\nconst v : %s[2,3] = [3, 4, 5, 7, 8, 9]\n"
                         "sc = scatter(x, i, u, axis=1, reduction=%s)\n"
                         "snd = scatter_nd(d, j, v, reduction=%s)\noutput sc, snd\n",
                         dt, dt, dt, dt, reds[r], reds[r]);
                mge_graph *g = ug_parse(src);
                CHECK_MSG(g != NULL, "%s", src);
                if (!g)
                    continue;
                mge_tensor x, d;
                tensor_of(&x, it ? MGE_I32 : MGE_F32, 2, (int64_t[]){1, 3}, (double[]){1, 5, -2});
                tensor_of(&d, it ? MGE_I32 : MGE_F32, 2, (int64_t[]){2, 3}, (double[]){1, 5, -2, 0, 0, 0});
                const mge_tensor *ins[2] = {&x, &d};
                ug_outs o = {0};
                CHECK_OK(run_on(g, backends[b], ins, &o), err);
                if (o.n == 2) {
                    expect(reds[r], &o.t[0], 3, want_sc[r]);
                    expect(reds[r], &o.t[1], 6, want_nd[r]);
                }
                ug_outs_free(&o);
                mge_graph_free(g);
                mge_tensor_free(&x);
                mge_tensor_free(&d);
            }
}

int main(void)
{
    RUN(test_symbolic);
    RUN(test_known_values);
    RUN(test_values);
    RUN(test_out_of_range);
    RUN(test_reductions);
    RUN(test_int_div);
    RUN(test_grads);
    return unit_done();
}
