/* test_sort.c — topk, sort, argsort, cumsum and the prod, min, argmin
 * reductions: symbolic templates and concrete shapes at two bindings,
 * hand-computed results on ref and cpu (ties in index order, NaN the
 * largest, i32 data, cumsum's exclusive and reverse), prod's gradient at
 * zeros as PyTorch gives it, the attribute errors (k larger than the dim,
 * axis out of range, a missing cumsum axis), and every gradient rule
 * against finite differences. PyTorch checks the numbers at scale in
 * tests/oracle/test_sort.py; test_parity runs ref against cpu. */
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

static void tmpl_is(const mge_graph *g, const char *name, const char *want)
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
    CHECK_MSG(strcmp(b, want) == 0, "%s: template %s, expected %s", name, b, want);
}

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

static void test_symbolic(void)
{
    mge_graph *g = ug_parse("input x : f32[N,S,8]\n"
                            "v, i = topk(x, k=3, axis=1)\n"
                            "s, si = sort(x, axis=1, descending=true)\n"
                            "a = argsort(x, axis=-1)\n"
                            "c = cumsum(x, axis=1, exclusive=true)\n"
                            "p = prod(x, axis=1)\n"
                            "m = min(x, axis=[0, 1], keepdim=true)\n"
                            "am = argmin(x, axis=1)\n"
                            "output v, i, s, si, a, c, p, m, am\n");
    if (!g)
        return;
    tmpl_is(g, "v", "[N,3,8]");
    tmpl_is(g, "i", "[N,3,8]");
    CHECK(g->values[mge_graph_find(g, "i")].dtype == MGE_I64);
    tmpl_is(g, "s", "[N,S,8]");
    tmpl_is(g, "si", "[N,S,8]");
    tmpl_is(g, "a", "[N,S,8]");
    tmpl_is(g, "c", "[N,S,8]");
    tmpl_is(g, "p", "[N,8]");
    tmpl_is(g, "m", "[1,1,8]");
    tmpl_is(g, "am", "[N,8]");
    CHECK(g->values[mge_graph_find(g, "am")].dtype == MGE_I64);
    mge_binding b1 = {0}, b2 = {0};
    CHECK_OK(mge_binding_set(&b1, MGE_DIM_N, 2, &err), err);
    CHECK_OK(mge_binding_set(&b1, sym("S"), 5, &err), err);
    CHECK_OK(mge_binding_set(&b2, MGE_DIM_N, 1, &err), err);
    CHECK_OK(mge_binding_set(&b2, sym("S"), 9, &err), err);
    concrete(g, &b1, "v", "[2,3,8]");
    concrete(g, &b2, "v", "[1,3,8]");
    concrete(g, &b1, "si", "[2,5,8]");
    concrete(g, &b2, "a", "[1,9,8]");
    concrete(g, &b2, "c", "[1,9,8]");
    concrete(g, &b1, "p", "[2,8]");
    concrete(g, &b2, "am", "[1,8]");
    mge_graph_free(g);
}

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
        default: break;
        }
}

static double elem(const mge_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case MGE_F32: return ((const float *)t->data)[i];
    case MGE_I32: return ((const int32_t *)t->data)[i];
    case MGE_I64: return (double)((const int64_t *)t->data)[i];
    default: return -12345;
    }
}

static void expect(const char *be, const char *what, const mge_tensor *t, int n, const double *v)
{
    CHECK_MSG(mge_tensor_numel(t) == n, "%s %s: %lld elements, expected %d", be, what,
              (long long)mge_tensor_numel(t), n);
    for (int i = 0; i < n && i < mge_tensor_numel(t); i++) {
        double g = elem(t, i);
        CHECK_MSG(g == v[i] || (isnan(g) && isnan(v[i])), "%s %s[%d] = %g, expected %g", be, what, i, g, v[i]);
    }
}

/* Runs src (outputs in order) on x and checks each output against want. */
static void check_outs(const char *be, const char *src, const mge_tensor *x, int nout, const char *const *names,
                       const int *counts, const double *const *want)
{
    mge_graph *g = ug_parse(src);
    if (!g)
        return;
    const mge_tensor *ins[1] = {x};
    ug_outs r = {0};
    CHECK_OK(run_on(g, be, ins, &r), err);
    CHECK_MSG(r.n == nout, "%s: %d outputs", be, r.n);
    for (int k = 0; k < nout && k < r.n; k++)
        expect(be, names[k], &r.t[k], counts[k], want[k]);
    ug_outs_free(&r);
    mge_graph_free(g);
}

static void test_values(void)
{
    static const char *backends[] = {"ref", "cpu"};
    const double N_ = NAN;
    for (int b = 0; b < 2; b++) {
        const char *be = backends[b];
        mge_tensor x, xi;
        int64_t d[2] = {2, 5};
        tensor_of(&x, MGE_F32, 2, d, (double[]){3, 1, N_, 2, 1, 0, -1, 4, 4, 2});
        tensor_of(&xi, MGE_I32, 2, d, (double[]){3, 1, 7, 2, 1, 0, -1, 4, 4, 2});
        /* NaN is the largest; ties keep the lower index first */
        check_outs(be,
                   "input x : f32[2,5]\n"
                   "v, i = topk(x, k=2)\n"
                   "sv, si = topk(x, k=2, largest=false)\n"
                   "output v, i, sv, si\n",
                   &x, 4, (const char *[]){"topk", "topk idx", "topk smallest", "topk smallest idx"},
                   (int[]){4, 4, 4, 4},
                   (const double *[]){(double[]){N_, 3, 4, 4}, (double[]){2, 0, 2, 3}, (double[]){1, 1, -1, 0},
                                      (double[]){1, 4, 1, 0}});
        check_outs(be,
                   "input x : f32[2,5]\n"
                   "s, si = sort(x, axis=1)\n"
                   "a = argsort(x, descending=true)\n"
                   "c = cumsum(x, axis=1)\n"
                   "output s, si, a, c\n",
                   &x, 4, (const char *[]){"sort", "sort idx", "argsort desc", "cumsum"}, (int[]){10, 10, 10, 10},
                   (const double *[]){(double[]){1, 1, 2, 3, N_, -1, 0, 2, 4, 4},
                                      (double[]){1, 4, 3, 0, 2, 1, 0, 4, 2, 3},
                                      (double[]){2, 0, 3, 1, 4, 2, 3, 4, 0, 1},
                                      (double[]){3, 4, N_, N_, N_, 0, -1, 3, 7, 9}});
        check_outs(be,
                   "input x : f32[2,5]\n"
                   "p = prod(x, axis=1)\n"
                   "m = min(x, axis=1, keepdim=true)\n"
                   "am = argmin(x, axis=1)\n"
                   "t, ti = topk(x, k=1, axis=0)\n"
                   "output p, m, am, ti\n",
                   &x, 4, (const char *[]){"prod", "min", "argmin", "topk axis 0"}, (int[]){2, 2, 2, 5},
                   (const double *[]){(double[]){N_, 0}, (double[]){N_, -1}, (double[]){2, 1},
                                      (double[]){0, 0, 0, 1, 1}});
        /* integers: exact, cumsum exclusive and reverse */
        check_outs(be,
                   "input x : i32[2,5]\n"
                   "c = cumsum(x, axis=-1, exclusive=true, reverse=true)\n"
                   "c2 = cumsum(x, axis=0, reverse=true)\n"
                   "s, si = sort(x, descending=true)\n"
                   "p = prod(x, axis=0)\n"
                   "output c, c2, s, p\n",
                   &xi, 4, (const char *[]){"cumsum excl rev", "cumsum axis 0", "sort i32", "prod i32"},
                   (int[]){10, 10, 10, 5},
                   (const double *[]){(double[]){11, 10, 3, 1, 0, 9, 10, 6, 2, 0},
                                      (double[]){3, 0, 11, 6, 3, 0, -1, 4, 4, 2},
                                      (double[]){7, 3, 2, 1, 1, 4, 4, 2, 0, -1}, (double[]){0, -1, 28, 8, 2}});
        mge_tensor_free(&x);
        mge_tensor_free(&xi);
    }
}

/* Attribute errors at graph build time name the value and the bound. */
static void test_errors(void)
{
    static const struct {
        const char *src, *msg;
    } cases[] = {
        {"input x : f32[2,5]\nv, i = topk(x, k=6)\noutput v\n", "topk: k=6 is larger than dim 1 of x f32[2,5] (5)"},
        {"input x : f32[2,5]\nv, i = topk(x, k=-1)\noutput v\n", "topk: k=-1 is negative"},
        {"input x : f32[2,5]\nv, i = sort(x, axis=2)\noutput v\n", "sort: axis=2 is out of range for x f32[2,5]"},
        {"input x : f32[2,5]\nv = cumsum(x)\noutput v\n", "cumsum"},
        {"input x : bool[2,5]\nv = argsort(x)\noutput v\n", "argsort: x is bool[2,5]: expected a numeric dtype"},
        {"input x : f32[2,5]\nv = argmin(x, axis=[0, 1])\noutput v\n", "argmin: axis has 2 values"},
        {"input x : f32[2,0]\nv = min(x, axis=1)\noutput v\n", "min: x f32[2,0] is empty along axis 1"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        mge_graph *g = NULL;
        mge_error_clear(&err);
        CHECK_MSG(mge_text_parse(cases[k].src, strlen(cases[k].src), ".", &g, &err) != MGE_OK, "case %zu parsed",
                  k);
        CHECK_MSG(strstr(err.msg, cases[k].msg), "case %zu: %s", k, err.msg);
        mge_graph_free(g);
    }
}

/* prod's gradient at zeros (PyTorch): a lone zero gets the product of the
 * others, the rest 0; two zeros give 0 everywhere. */
static void test_prod_zeros(void)
{
    mge_graph *g = ug_parse("input dy : f32[3]\ninput x : f32[3,3]\ng = prod_grad(dy, x, axis=1)\noutput g\n");
    if (!g)
        return;
    mge_tensor dy, x;
    tensor_of(&dy, MGE_F32, 1, (int64_t[]){3}, (double[]){1, 2, 1});
    tensor_of(&x, MGE_F32, 2, (int64_t[]){3, 3}, (double[]){2, 0, 3, 0, 0, 2, 2, 4, -1});
    const mge_tensor *ins[2] = {&dy, &x};
    for (int b = 0; b < 2; b++) {
        ug_outs r = {0};
        const char *be = b ? "cpu" : "ref";
        CHECK_OK(run_on(g, be, ins, &r), err);
        if (r.n == 1)
            expect(be, "prod_grad", &r.t[0], 9, (double[]){0, 6, 0, 0, 0, 0, -4, -2, 8});
        ug_outs_free(&r);
    }
    mge_tensor_free(&dy);
    mge_tensor_free(&x);
    mge_graph_free(g);
}

/* Gradients against finite differences; the indices outputs and argmin,
 * argsort get none. */
static void test_grads(void)
{
    static const char *srcs[] = {
        "input x : f32[3,7]\ny, i = topk(x, k=3, axis=1)\noutput y\n",
        "input x : f32[5,4]\ny, i = topk(x, k=2, axis=0, largest=false)\noutput y\n",
        "input x : f32[3,6]\ny, i = sort(x, axis=-1, descending=true)\noutput y\n",
        "input x : f32[4,5]\ny = cumsum(x, axis=1)\noutput y\n",
        "input x : f32[4,5]\ny = cumsum(x, axis=0, exclusive=true, reverse=true)\noutput y\n",
        "input x : f32[3,4]\ny = prod(x, axis=1)\noutput y\n",
        "input x : f32[3,4]\ny = prod(x, keepdim=true)\noutput y\n",
        "input x : f32[3,5]\ny = min(x, axis=1)\noutput y\n",
    };
    for (size_t k = 0; k < sizeof srcs / sizeof srcs[0]; k++) {
        mge_graph *g = ug_parse(srcs[k]);
        if (!g)
            continue;
        double w = gc_check(g, mge_graph_find(g, "y"), NULL, 1e-2, 0);
        CHECK_MSG(w <= 1e-2, "case %zu: worst %g", k, w);
        mge_graph_free(g);
    }
    /* the gradients of symbolic inputs keep x's template */
    mge_graph *sg = ug_parse("input x : f32[N,S,4]\ninput dy : f32[N,2,4]\nv, i = topk(x, k=2, axis=1)\n"
                             "c = cumsum(v, axis=1)\noutput c\n");
    if (sg) {
        int x = mge_graph_find(sg, "x"), gx = -1;
        CHECK_OK(mge_grad_build_from(sg, mge_graph_find(sg, "c"), mge_graph_find(sg, "dy"), 1, &x, &gx, &err),
                 err);
        CHECK(ug_count_op(sg, MGE_OP_GATHER_ELEMENTS_GRAD) == 1 && ug_count_op(sg, MGE_OP_CUMSUM) == 2);
        if (gx >= 0) {
            tmpl_is(sg, sg->values[gx].name, "[N,S,4]");
            mge_binding b1 = {0};
            CHECK_OK(mge_binding_set(&b1, MGE_DIM_N, 3, &err), err);
            CHECK_OK(mge_binding_set(&b1, sym("S"), 6, &err), err);
            concrete(sg, &b1, sg->values[gx].name, "[3,6,4]");
        }
        mge_graph_free(sg);
    }
}

int main(void)
{
    RUN(test_symbolic);
    RUN(test_values);
    RUN(test_errors);
    RUN(test_prod_zeros);
    RUN(test_grads);
    return unit_done();
}
