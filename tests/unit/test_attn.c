/* test_attn.c — group "attn": embedding, scaled_dot_product_attention and
 * cross_entropy over trailing dims. Symbolic templates and concrete shapes
 * at two bindings, the inference errors bad attributes and shapes give,
 * hand-computed results on ref and cpu (causal, bool and float masks, a
 * fully masked row giving NaN as PyTorch, ignore_index, label_smoothing),
 * the run-time errors (an index out of range, NaN in a float mask, a label
 * outside the classes) with their exact messages, dropout (cpu and ref
 * draw the same weights; identity outside training), and every gradient
 * against finite differences. PyTorch checks the numbers at scale in
 * tests/oracle/test_attn.py. */
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

/* Runs g on backend be (training: with seed 42) with ins[k] for graph
 * input k; the outputs into res; the status. */
static mge_status run_on(const mge_graph *g, const char *be, int training, const mge_tensor *const *ins, ug_outs *res)
{
    mge_exec *e = NULL;
    mge_exec_opts o = {0};
    o.threads = 2;
    o.backend = be;
    o.training = training;
    res->n = 0;
    mge_status s = mge_exec_create(g, &o, &e, &err);
    if (!s && training)
        mge_exec_set_seed(e, 42);
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

/* f32 t against v within tol (NaN expects NaN). */
static void expect_near(const char *what, const mge_tensor *t, int n, const double *v, double tol)
{
    CHECK_MSG(mge_tensor_numel(t) == n, "%s: %lld elements, expected %d", what, (long long)mge_tensor_numel(t), n);
    for (int i = 0; i < n && i < mge_tensor_numel(t); i++) {
        double x = ((const float *)t->data)[i];
        CHECK_MSG(isnan(v[i]) ? isnan(x) : fabs(x - v[i]) <= tol, "%s[%d] = %.9g, expected %.9g", what, i, x, v[i]);
    }
}

static const char *sym_src =
    "input tokens : i32[N,S]\n"
    "input q : f32[N,4,S,8]\n"
    "input k : f32[N,4,T,8]\n"
    "input v : f32[N,4,T,6]\n"
    "input m : bool[S,T]\n"
    "input lg : f32[N,5,S]\n"
    "input lab : i64[N,S]\n"
    "input dy : f32[N,4,S,6]\n"
    "input de : f32[N,S,8]\n"
    "e = embedding(tokens, num=100, dim=8)\n"
    "y = scaled_dot_product_attention(q, k, v, m, causal=true)\n"
    "ce = cross_entropy(lg, lab, ignore_index=0, label_smoothing=0.1)\n"
    "output e, y, ce\n";

static void test_symbolic(void)
{
    mge_graph *g = ug_parse(sym_src);
    if (!g)
        return;
    tmpl_is(g, "e", "[N,S,8]");
    tmpl_is(g, "e.weight", "[100,8]");
    tmpl_is(g, "y", "[N,4,S,6]");
    tmpl_is(g, "ce", "[]");
    mge_binding b1 = {0}, b2 = {0};
    CHECK_OK(mge_binding_set(&b1, MGE_DIM_N, 2, &err), err);
    CHECK_OK(mge_binding_set(&b1, sym("S"), 5, &err), err);
    CHECK_OK(mge_binding_set(&b1, sym("T"), 3, &err), err);
    CHECK_OK(mge_binding_set(&b2, MGE_DIM_N, 1, &err), err);
    CHECK_OK(mge_binding_set(&b2, sym("S"), 9, &err), err);
    CHECK_OK(mge_binding_set(&b2, sym("T"), 70, &err), err);
    concrete(g, &b1, "e", "[2,5,8]");
    concrete(g, &b2, "e", "[1,9,8]");
    concrete(g, &b1, "y", "[2,4,5,6]");
    concrete(g, &b2, "y", "[1,4,9,6]");
    /* the gradient ops follow the symbols too */
    int q = mge_graph_find(g, "q"), w = mge_graph_find(g, "e.weight"), lg = mge_graph_find(g, "lg");
    int gq = -1, gw = -1, gl = -1;
    CHECK_OK(mge_grad_build_from(g, mge_graph_find(g, "y"), mge_graph_find(g, "dy"), 1, &q, &gq, &err), err);
    CHECK(ug_count_op(g, MGE_OP_SDPA_GRAD) == 1);
    if (gq >= 0) {
        tmpl_is(g, g->values[gq].name, "[N,4,S,8]");
        concrete(g, &b2, g->values[gq].name, "[1,4,9,8]");
    }
    CHECK_OK(mge_grad_build_from(g, mge_graph_find(g, "e"), mge_graph_find(g, "de"), 1, &w, &gw, &err), err);
    if (gw >= 0)
        concrete(g, &b1, g->values[gw].name, "[100,8]");
    CHECK_OK(mge_grad_build_from(g, mge_graph_find(g, "ce"), -1, 1, &lg, &gl, &err), err);
    if (gl >= 0)
        concrete(g, &b2, g->values[gl].name, "[1,5,9]");
    mge_graph_free(g);
}

/* Inference errors: each source fails to parse with the message. */
static void test_infer_errors(void)
{
    static const struct {
        const char *src, *msg;
    } cases[] = {
        {"input t : i32[4]\ne = embedding(t, num=0, dim=8)\noutput e\n", "num=0 dim=8: expected both at least 1"},
        {"input t : f32[4]\ne = embedding(t, num=10, dim=8)\noutput e\n", "indices f32[4]: expected dtype i32 or i64"},
        {"input t : i32[4]\nparam w : f32[10,7]\ne = embedding(t, w, num=10, dim=8)\noutput e\n",
         "weight f32[10,7]: expected a float [10,8] (num, dim)"},
        {"input q : f32[2,5,8]\ninput k : f32[2,6,4]\ninput v : f32[2,6,4]\n"
         "y = scaled_dot_product_attention(q, k, v)\noutput y\n",
         "q f32[2,5,8] and k f32[2,6,4]: expected the same D (last dim)"},
        {"input q : f32[2,5,8]\ninput k : f32[3,6,8]\ninput v : f32[3,6,4]\n"
         "y = scaled_dot_product_attention(q, k, v)\noutput y\n", "expected equal leading dims"},
        {"input q : f32[2,5,8]\ninput k : f32[2,6,8]\ninput v : f32[2,7,4]\n"
         "y = scaled_dot_product_attention(q, k, v)\noutput y\n", "expected the same Sk (dim 1)"},
        {"input q : f32[2,5,8]\ninput k : f32[2,0,8]\ninput v : f32[2,0,4]\n"
         "y = scaled_dot_product_attention(q, k, v)\noutput y\n", "k f32[2,0,8]: expected at least one key"},
        {"input q : f32[2,5,8]\ninput k : f32[2,6,8]\ninput v : f32[2,6,4]\ninput m : bool[5,5]\n"
         "y = scaled_dot_product_attention(q, k, v, m)\noutput y\n",
         "mask bool[5,5] does not broadcast to the scores [..., 5, 6]"},
        {"input q : f32[2,5,8]\ninput k : f32[2,6,8]\ninput v : f32[2,6,4]\ninput m : i32[5,6]\n"
         "y = scaled_dot_product_attention(q, k, v, m)\noutput y\n", "mask i32[5,6]: expected bool or f32"},
        {"input q : f32[2,5,8]\ninput k : f32[2,6,8]\ninput v : f32[2,6,4]\n"
         "y = scaled_dot_product_attention(q, k, v, dropout=1)\noutput y\n",
         "dropout=1: expected a probability in [0, 1)"},
        {"input q : f32[2,5,8]\ninput k : f32[2,6,8]\ninput v : f32[2,6,4]\n"
         "y = scaled_dot_product_attention(q, k, v, scale=inf)\noutput y\n", "scale=inf: expected a finite number"},
        {"input x : f32[4,3,5]\ninput l : i64[4,6]\nc = cross_entropy(x, l)\noutput c\n",
         "label i64[4,6] does not fit logits f32[4,3,5]: expected i64[4,5] (or i32) class indices"},
        {"input x : f32[4,3]\ninput l : i64[4]\nc = cross_entropy(x, l, label_smoothing=1.5)\noutput c\n",
         "label_smoothing=1.5: expected a value in [0, 1]"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        mge_graph *g = NULL;
        mge_error_clear(&err);
        mge_status s = mge_text_parse(cases[c].src, strlen(cases[c].src), ".", &g, &err);
        CHECK_MSG(s != MGE_OK && strstr(err.msg, cases[c].msg), "case %zu: status %d, '%s'", c, (int)s, err.msg);
        mge_graph_free(g);
    }
}

/* softmax([a, b]) . [va, vb] in double. */
static double mix2(double a, double b, double va, double vb)
{
    double m = a > b ? a : b, ea = exp(a - m), eb = exp(b - m);
    return (ea * va + eb * vb) / (ea + eb);
}

/* Hand-computed attention: q [2,2] against k [2,2], v [2,2], scale 1. */
static void test_sdpa_values(void)
{
    static const char *backends[] = {"ref", "cpu"};
    static const char *bodies[] = {
        "y = scaled_dot_product_attention(q, k, v, scale=1)\n",
        "y = scaled_dot_product_attention(q, k, v, scale=1, causal=true)\n",
        "y = scaled_dot_product_attention(q, k, v, mb, scale=1)\n",
        "y = scaled_dot_product_attention(q, k, v, mf, scale=1)\n",
        "y = scaled_dot_product_attention(q, k, v)\n",
    };
    /* q0 = [1,0], q1 = [0,2]; k0 = [1,0], k1 = [0,1]; v0 = [1,2], v1 = [3,4]:
     * scores row 0 = [1, 0], row 1 = [0, 2] */
    double s0[2] = {1, 0}, s1[2] = {0, 2};
    double want[5][4] = {
        {mix2(1, 0, 1, 3), mix2(1, 0, 2, 4), mix2(0, 2, 1, 3), mix2(0, 2, 2, 4)},
        {1, 2, mix2(0, 2, 1, 3), mix2(0, 2, 2, 4)},
        /* bool mask [[1,0],[0,0]]: row 1 fully masked, NaN as PyTorch */
        {1, 2, NAN, NAN},
        /* float mask [[0,-1],[0.5,-inf]] */
        {mix2(1, -1, 1, 3), mix2(1, -1, 2, 4), 1, 2},
        {mix2(s0[0] / sqrt(2), s0[1] / sqrt(2), 1, 3), mix2(s0[0] / sqrt(2), s0[1] / sqrt(2), 2, 4),
         mix2(s1[0] / sqrt(2), s1[1] / sqrt(2), 1, 3), mix2(s1[0] / sqrt(2), s1[1] / sqrt(2), 2, 4)},
    };
    for (int b = 0; b < 2; b++)
        for (int c = 0; c < 5; c++) {
            char src[512];
            snprintf(src, sizeof src,
                     "input q : f32[2,2]\ninput k : f32[2,2]\ninput v : f32[2,2]\n"
                     "const mb : bool[2,2] = [1, 0, 0, 0]\nconst mf : f32[2,2] = [0, -1, 0.5, -inf]\n%soutput y\n",
                     bodies[c]);
            mge_graph *g = ug_parse(src);
            if (!g)
                continue;
            mge_tensor q, k, v;
            int64_t d[2] = {2, 2};
            tensor_of(&q, MGE_F32, 2, d, (double[]){1, 0, 0, 2});
            tensor_of(&k, MGE_F32, 2, d, (double[]){1, 0, 0, 1});
            tensor_of(&v, MGE_F32, 2, d, (double[]){1, 2, 3, 4});
            const mge_tensor *ins[3] = {&q, &k, &v};
            ug_outs r = {0};
            CHECK_OK(run_on(g, backends[b], 0, ins, &r), err);
            char what[64];
            snprintf(what, sizeof what, "%s case %d", backends[b], c);
            if (r.n == 1)
                expect_near(what, &r.t[0], 4, want[c], 1e-6);
            ug_outs_free(&r);
            mge_tensor_free(&q);
            mge_tensor_free(&k);
            mge_tensor_free(&v);
            mge_graph_free(g);
        }
}

/* Run-time errors with their messages, on ref and cpu. */
static void test_runtime_errors(void)
{
    static const char *backends[] = {"ref", "cpu"};
    for (int b = 0; b < 2; b++) {
        /* embedding: too large and negative indices */
        mge_graph *g = ug_parse("input t : i64[2,6]\ne = embedding(t, num=256, dim=4)\noutput e\n");
        if (g && mge_graph_init_params(g, 1, &err) == MGE_OK) {
            mge_tensor t;
            int64_t d[2] = {2, 6};
            double tv[12] = {1, 2, 3, 4, 5, 255, 0, 0, 0, 0, 0, 0};
            tensor_of(&t, MGE_I64, 2, d, tv);
            const mge_tensor *ins[1] = {&t};
            ug_outs r = {0};
            CHECK_OK(run_on(g, backends[b], 0, ins, &r), err);
            ug_outs_free(&r);
            ((int64_t *)t.data)[5] = 300;
            CHECK(run_on(g, backends[b], 0, ins, &r) != MGE_OK);
            CHECK_MSG(strstr(err.msg, "embedding: index 300 at [0,5] is out of range for a table of 256 rows"), "%s",
                      err.msg);
            ug_outs_free(&r);
            ((int64_t *)t.data)[5] = 0;
            ((int64_t *)t.data)[7] = -1;
            CHECK(run_on(g, backends[b], 0, ins, &r) != MGE_OK);
            CHECK_MSG(strstr(err.msg, "embedding: index -1 at [1,1] is out of range for a table of 256 rows"), "%s",
                      err.msg);
            ug_outs_free(&r);
            mge_tensor_free(&t);
            mge_graph_free(g);
        }
        /* NaN in a float mask, named by its position in the mask */
        g = ug_parse("input q : f32[1,3,4]\ninput k : f32[1,5,4]\ninput v : f32[1,5,4]\ninput m : f32[3,5]\n"
                     "y = scaled_dot_product_attention(q, k, v, m)\noutput y\n");
        if (g) {
            mge_tensor q, k, v, m;
            double z[20] = {0}, mv[15] = {0};
            mv[7] = NAN;
            tensor_of(&q, MGE_F32, 3, (int64_t[]){1, 3, 4}, z);
            tensor_of(&k, MGE_F32, 3, (int64_t[]){1, 5, 4}, z);
            tensor_of(&v, MGE_F32, 3, (int64_t[]){1, 5, 4}, z);
            tensor_of(&m, MGE_F32, 2, (int64_t[]){3, 5}, mv);
            const mge_tensor *ins[4] = {&q, &k, &v, &m};
            ug_outs r = {0};
            CHECK(run_on(g, backends[b], 0, ins, &r) != MGE_OK);
            CHECK_MSG(strstr(err.msg, "scaled_dot_product_attention: the mask holds NaN at [1,2]"), "%s", err.msg);
            ug_outs_free(&r);
            mge_tensor_free(&q);
            mge_tensor_free(&k);
            mge_tensor_free(&v);
            mge_tensor_free(&m);
            mge_graph_free(g);
        }
        /* a label outside the classes, named with its position */
        g = ug_parse("input x : f32[2,3,4]\ninput l : i32[2,4]\nc = cross_entropy(x, l, ignore_index=-1)\noutput c\n");
        if (g) {
            mge_tensor x, l;
            double z[24] = {0}, lv[8] = {0, 1, 2, -1, 0, 1, 3, 0};
            tensor_of(&x, MGE_F32, 3, (int64_t[]){2, 3, 4}, z);
            tensor_of(&l, MGE_I32, 2, (int64_t[]){2, 4}, lv);
            const mge_tensor *ins[2] = {&x, &l};
            ug_outs r = {0};
            CHECK(run_on(g, backends[b], 0, ins, &r) != MGE_OK);
            CHECK_MSG(strstr(err.msg, "cross_entropy: label[1,2] = 3 is outside the classes [0, 3)"), "%s", err.msg);
            ug_outs_free(&r);
            mge_tensor_free(&x);
            mge_tensor_free(&l);
            mge_graph_free(g);
        }
    }
}

/* cross_entropy by hand: [N,C,d] with ignore_index, smoothing, all ignored. */
static void test_ce_values(void)
{
    static const char *backends[] = {"ref", "cpu"};
    /* x [1,3,2]: position 0 logits [0,1,2], position 1 [3,0,0] */
    double xv[6] = {0, 3, 1, 0, 2, 0};
    double lse0 = log(exp(0) + exp(1) + exp(2)), lse1 = log(exp(3) + 2);
    double nll0 = lse0 - 2, nll1 = lse1 - 0;   /* labels [2, 1]: logit 2 at position 0, 0 at position 1 */
    double sm0 = (3 * lse0 - 3) / 3, sm1 = (3 * lse1 - 3) / 3;   /* mean of -log p over the classes */
    static const char *attrs[] = {"", ", label_smoothing=0.2", ", ignore_index=1", ", ignore_index=1, label_smoothing=0.2"};
    double want[4] = {(nll0 + nll1) / 2, (0.8 * nll0 + 0.2 * sm0 + 0.8 * nll1 + 0.2 * sm1) / 2, nll0,
                      0.8 * nll0 + 0.2 * sm0};
    for (int b = 0; b < 2; b++)
        for (int c = 0; c < 5; c++) {
            char src[256];
            snprintf(src, sizeof src, "input x : f32[1,3,2]\ninput l : i64[1,2]\ny = cross_entropy(x, l%s)\noutput y\n",
                     c < 4 ? attrs[c] : ", ignore_index=2");
            mge_graph *g = ug_parse(src);
            if (!g)
                continue;
            mge_tensor x, l;
            tensor_of(&x, MGE_F32, 3, (int64_t[]){1, 3, 2}, xv);
            tensor_of(&l, MGE_I64, 2, (int64_t[]){1, 2}, c < 4 ? (double[]){2, 1} : (double[]){2, 2});
            const mge_tensor *ins[2] = {&x, &l};
            ug_outs r = {0};
            CHECK_OK(run_on(g, backends[b], 0, ins, &r), err);
            char what[64];
            snprintf(what, sizeof what, "%s ce %d", backends[b], c);
            double w = c < 4 ? want[c] : NAN;   /* every position ignored: NaN as PyTorch */
            if (r.n == 1)
                expect_near(what, &r.t[0], 1, &w, 1e-6);
            ug_outs_free(&r);
            mge_tensor_free(&x);
            mge_tensor_free(&l);
            mge_graph_free(g);
        }
}

/* Attention dropout: in training ref and cpu draw the same weights (one
 * seed, hashed per score); outside training it is the identity. */
static void test_dropout(void)
{
    mge_graph *g = ug_parse("input q : f32[2,70,8]\ninput k : f32[2,300,8]\ninput v : f32[2,300,5]\n"
                            "y = scaled_dot_product_attention(q, k, v, dropout=0.3)\noutput y\n");
    mge_graph *g0 = ug_parse("input q : f32[2,70,8]\ninput k : f32[2,300,8]\ninput v : f32[2,300,5]\n"
                             "y = scaled_dot_product_attention(q, k, v)\noutput y\n");
    if (!g || !g0)
        return;
    mge_rng r;
    mge_rng_seed(&r, 7);
    mge_tensor q, k, v;
    CHECK_OK(mge_tensor_alloc(&q, MGE_F32, 3, (int64_t[]){2, 70, 8}, &err), err);
    CHECK_OK(mge_tensor_alloc(&k, MGE_F32, 3, (int64_t[]){2, 300, 8}, &err), err);
    CHECK_OK(mge_tensor_alloc(&v, MGE_F32, 3, (int64_t[]){2, 300, 5}, &err), err);
    ug_uniform(&q, &r, -1, 1);
    ug_uniform(&k, &r, -1, 1);
    ug_uniform(&v, &r, -1, 1);
    const mge_tensor *ins[3] = {&q, &k, &v};
    ug_outs tr = {0}, tc = {0}, ir = {0}, nd = {0};
    CHECK_OK(run_on(g, "ref", 1, ins, &tr), err);
    CHECK_OK(run_on(g, "cpu", 1, ins, &tc), err);
    CHECK_OK(run_on(g, "cpu", 0, ins, &ir), err);
    CHECK_OK(run_on(g0, "ref", 0, ins, &nd), err);
    if (tr.n == 1 && tc.n == 1 && ir.n == 1 && nd.n == 1) {
        double dmax = 0, imax = 0, dif = 0;
        for (int64_t i = 0; i < mge_tensor_numel(&tr.t[0]); i++) {
            float a = ((float *)tr.t[0].data)[i], b = ((float *)tc.t[0].data)[i];
            float c = ((float *)ir.t[0].data)[i], d = ((float *)nd.t[0].data)[i];
            dmax = fmax(dmax, fabs(a - b));
            imax = fmax(imax, fabs(c - d));
            dif = fmax(dif, fabs(a - d));
        }
        CHECK_MSG(dmax < 1e-5, "dropout: cpu and ref differ by %g", dmax);
        CHECK_MSG(imax < 1e-5, "inference: dropout is not the identity (%g)", imax);
        CHECK_MSG(dif > 1e-3, "training: dropout changed nothing (%g)", dif);
    }
    ug_outs_free(&tr);
    ug_outs_free(&tc);
    ug_outs_free(&ir);
    ug_outs_free(&nd);
    mge_tensor_free(&q);
    mge_tensor_free(&k);
    mge_tensor_free(&v);
    mge_graph_free(g);
    mge_graph_free(g0);
}

/* Gradients against finite differences (and cpu against ref). */
static void test_grads(void)
{
    static const char *srcs[] = {
        "input q : f32[2,5,4]\ninput k : f32[2,7,4]\ninput v : f32[2,7,3]\n"
        "y = scaled_dot_product_attention(q, k, v)\noutput y\n",
        "input q : f32[2,3,6,4]\ninput k : f32[2,3,6,4]\ninput v : f32[2,3,6,5]\n"
        "y = scaled_dot_product_attention(q, k, v, causal=true, scale=0.7)\noutput y\n",
        "input q : f32[3,5,4]\ninput k : f32[3,6,4]\ninput v : f32[3,6,2]\n"
        "const m : bool[5,6] = [1,0,1,1,0,1, 1,1,0,0,1,1, 1,0,0,0,0,0, 1,1,1,1,1,0, 0,1,0,1,0,1]\n"
        "y = scaled_dot_product_attention(q, k, v, m)\noutput y\n",
        "input q : f32[2,4,3]\ninput k : f32[2,5,3]\ninput v : f32[2,5,3]\n"
        "const m : f32[2,1,5] = [0, -1, 0.5, -inf, 2, 1, 0, -inf, 0, -0.5]\n"
        "y = scaled_dot_product_attention(q, k, v, m, causal=true)\noutput y\n",
        /* several query and key tiles of the fused cpu kernel */
        "input q : f32[1,70,4]\ninput k : f32[1,300,4]\ninput v : f32[1,300,3]\n"
        "y = scaled_dot_product_attention(q, k, v, causal=true)\noutput y\n",
        /* the cpu kernel's small path (widths of 16, every key in one tile):
         * two query tiles, a partial last score block, masks, causal */
        "input q : f32[1,2,70,16]\ninput k : f32[1,2,70,16]\ninput v : f32[1,2,70,32]\n"
        "y = scaled_dot_product_attention(q, k, v, causal=true)\noutput y\n",
        "input q : f32[2,9,32]\ninput k : f32[2,37,32]\ninput v : f32[2,37,16]\n"
        "y = scaled_dot_product_attention(q, k, v, scale=0.3)\noutput y\n",
        "input q : f32[3,5,16]\ninput k : f32[3,6,16]\ninput v : f32[3,6,16]\n"
        "const m : bool[5,6] = [1,0,1,1,0,1, 1,1,0,0,1,1, 1,0,0,0,0,0, 1,1,1,1,1,0, 0,1,0,1,0,1]\n"
        "y = scaled_dot_product_attention(q, k, v, m)\noutput y\n",
        "input q : f32[2,4,16]\ninput k : f32[2,5,16]\ninput v : f32[2,5,16]\n"
        "const m : f32[2,1,5] = [0, -1, 0.5, -inf, 2, 1, 0, -inf, 0, -0.5]\n"
        "y = scaled_dot_product_attention(q, k, v, m, causal=true)\noutput y\n",
        "input q : f32[1,3,16]\ninput k : f32[1,256,16]\ninput v : f32[1,256,16]\n"
        "y = scaled_dot_product_attention(q, k, v)\noutput y\n",
        "const t : i32[2,4] = [1, 3, 1, 0, 4, 1, 1, 2]\ne = embedding(t, num=5, dim=3)\noutput e\n",
        "input x : f32[3,4,2,3]\nconst l : i64[3,2,3] = [0,1,2,3,0,1, 2,2,2,1,1,1, 3,0,3,0,3,0]\n"
        "c = cross_entropy(x, l, ignore_index=1, label_smoothing=0.15)\noutput c\n",
        "input x : f32[1,3,5,7]\nconst l : i64[1,5,7] = [0,1,2,0,1,2,0, 1,2,0,1,2,0,1, 2,0,1,2,0,1,2, 0,0,1,1,2,2,0, 1,1,1,2,2,2,0]\n"
        "c = cross_entropy(x, l, ignore_index=0, label_smoothing=0.1)\noutput c\n",
    };
    for (size_t k = 0; k < sizeof srcs / sizeof srcs[0]; k++) {
        mge_graph *g = ug_parse(srcs[k]);
        if (!g)
            continue;
        const char *out = strstr(srcs[k], "output ") + 7;
        char nm[8] = {out[0], 0};
        double w = gc_check(g, mge_graph_find(g, nm), NULL, 1e-2, 0);
        CHECK_MSG(w <= 1e-2, "case %zu: worst %g", k, w);
        mge_graph_free(g);
    }
}

/* Attention dropout in training: the grad node replays the forward's draws
 * (same run seed, drop_key naming the forward), so with the seed fixed the
 * forward is a function of q, k, v whose finite differences the gradient
 * matches, on ref and cpu alike (gc_check reseeds each run). */
static void test_dropout_grads(void)
{
    static const char *srcs[] = {
        "input q : f32[2,5,4]\ninput k : f32[2,7,4]\ninput v : f32[2,7,3]\n"
        "y = scaled_dot_product_attention(q, k, v, dropout=0.3)\noutput y\n",
        "input q : f32[2,3,6,4]\ninput k : f32[2,3,6,4]\ninput v : f32[2,3,6,5]\n"
        "y = scaled_dot_product_attention(q, k, v, causal=true, scale=0.7, dropout=0.5)\noutput y\n",
        "input q : f32[2,4,3]\ninput k : f32[2,5,3]\ninput v : f32[2,5,3]\n"
        "const m : f32[2,1,5] = [0, -1, 0.5, -inf, 2, 1, 0, -inf, 0, -0.5]\n"
        "y = scaled_dot_product_attention(q, k, v, m, causal=true, dropout=0.2)\noutput y\n",
        /* several tiles of the fused cpu kernel, and two attention nodes that
         * must draw apart yet each replay its own */
        "input q : f32[1,40,4]\ninput k : f32[1,70,4]\ninput v : f32[1,70,3]\n"
        "a = scaled_dot_product_attention(q, k, v, dropout=0.25)\n"
        "b = scaled_dot_product_attention(q, k, v, dropout=0.25)\ny = sub(a, b)\noutput y\n",
        /* widths of 16: the cpu forward's small path with dropout (its
         * gradient then takes the tiled path) */
        "input q : f32[1,2,21,16]\ninput k : f32[1,2,30,16]\ninput v : f32[1,2,30,16]\n"
        "y = scaled_dot_product_attention(q, k, v, causal=true, dropout=0.3)\noutput y\n",
    };
    for (size_t k = 0; k < sizeof srcs / sizeof srcs[0]; k++) {
        mge_graph *g = ug_parse(srcs[k]);
        if (!g)
            continue;
        double w = gc_check(g, mge_graph_find(g, "y"), NULL, 1e-2, 1);
        CHECK_MSG(w <= 1e-2, "case %zu: worst %g", k, w);
        mge_graph_free(g);
    }
}

/* The explicit mask: with v the identity the training forward gives its
 * dropped weights W = P D; the same run seed and node name with another v
 * give W v (the draws depend only on position), on ref and cpu. */
static void test_dropout_explicit(void)
{
    const char *src = "input q : f32[2,5,4]\ninput k : f32[2,7,4]\ninput v : f32[2,7,%d]\n"
                      "y = scaled_dot_product_attention(q, k, v, dropout=0.4)\noutput y\n";
    char s1[300], s2[300];
    snprintf(s1, sizeof s1, src, 7);
    snprintf(s2, sizeof s2, src, 3);
    mge_graph *gi = ug_parse(s1), *gv = ug_parse(s2);
    if (!gi || !gv)
        return;
    mge_rng r;
    mge_rng_seed(&r, 9);
    mge_tensor q, k, eye, v;
    CHECK_OK(mge_tensor_alloc(&q, MGE_F32, 3, (int64_t[]){2, 5, 4}, &err), err);
    CHECK_OK(mge_tensor_alloc(&k, MGE_F32, 3, (int64_t[]){2, 7, 4}, &err), err);
    CHECK_OK(mge_tensor_alloc(&eye, MGE_F32, 3, (int64_t[]){2, 7, 7}, &err), err);
    CHECK_OK(mge_tensor_alloc(&v, MGE_F32, 3, (int64_t[]){2, 7, 3}, &err), err);
    ug_uniform(&q, &r, -1, 1);
    ug_uniform(&k, &r, -1, 1);
    ug_uniform(&v, &r, -1, 1);
    for (int64_t i = 0; i < 2 * 7 * 7; i++)
        ((float *)eye.data)[i] = i % 7 == i / 7 % 7;
    static const char *bes[] = {"ref", "cpu"};
    for (int bi = 0; bi < 2; bi++) {
        ug_outs w = {0}, y = {0};
        const mge_tensor *ia[3] = {&q, &k, &eye}, *ib[3] = {&q, &k, &v};
        CHECK_OK(run_on(gi, bes[bi], 1, ia, &w), err);
        CHECK_OK(run_on(gv, bes[bi], 1, ib, &y), err);
        if (w.n == 1 && y.n == 1) {
            const float *W = w.t[0].data, *Y = y.t[0].data, *V = v.data;
            double worst = 0;
            int zeros = 0;
            for (int b = 0; b < 2; b++)
                for (int i = 0; i < 5; i++) {
                    for (int j = 0; j < 7; j++)
                        zeros += W[(b * 5 + i) * 7 + j] == 0;
                    for (int e = 0; e < 3; e++) {
                        double acc = 0;
                        for (int j = 0; j < 7; j++)
                            acc += (double)W[(b * 5 + i) * 7 + j] * V[(b * 7 + j) * 3 + e];
                        worst = fmax(worst, fabs(acc - Y[(b * 5 + i) * 3 + e]));
                    }
                }
            CHECK_MSG(worst < 1e-5, "%s: y differs from W v by %g", bes[bi], worst);
            CHECK_MSG(zeros > 0 && zeros < 70, "%s: %d of 70 weights dropped", bes[bi], zeros);
        }
        ug_outs_free(&w);
        ug_outs_free(&y);
    }
    mge_tensor_free(&q);
    mge_tensor_free(&k);
    mge_tensor_free(&eye);
    mge_tensor_free(&v);
    mge_graph_free(gi);
    mge_graph_free(gv);
}

/* The gradient against the explicit mask: one training run gives the
 * dropped weights W = P D (v the identity), P (no dropout) and the grad
 * node's dq, dv for another v with drop_key naming the forward "w"; they
 * equal the formulas over that explicit D (ref and cpu). */
static void test_dropout_grad_explicit(void)
{
    uint64_t h = 0xcbf29ce484222325ull;   /* FNV-1a of "w", the forward's name */
    h = (h ^ (unsigned char)'w') * 0x100000001b3ull;
    char src[800];
    snprintf(src, sizeof src,
             "input q : f32[2,5,4]\ninput k : f32[2,7,4]\ninput eye : f32[2,7,7]\ninput v : f32[2,7,3]\n"
             "input dy : f32[2,5,3]\n"
             "w = scaled_dot_product_attention(q, k, eye, dropout=0.4)\n"
             "p = scaled_dot_product_attention(q, k, eye)\n"
             "dq, dk, dv = scaled_dot_product_attention_grad(dy, q, k, v, dropout=0.4, drop_key=%lld)\n"
             "output w\noutput p\noutput dq\noutput dv\n",
             (long long)(int64_t)h);
    mge_graph *g = ug_parse(src);
    if (!g)
        return;
    mge_rng r;
    mge_rng_seed(&r, 11);
    mge_tensor q, k, eye, v, dy;
    CHECK_OK(mge_tensor_alloc(&q, MGE_F32, 3, (int64_t[]){2, 5, 4}, &err), err);
    CHECK_OK(mge_tensor_alloc(&k, MGE_F32, 3, (int64_t[]){2, 7, 4}, &err), err);
    CHECK_OK(mge_tensor_alloc(&eye, MGE_F32, 3, (int64_t[]){2, 7, 7}, &err), err);
    CHECK_OK(mge_tensor_alloc(&v, MGE_F32, 3, (int64_t[]){2, 7, 3}, &err), err);
    CHECK_OK(mge_tensor_alloc(&dy, MGE_F32, 3, (int64_t[]){2, 5, 3}, &err), err);
    ug_uniform(&q, &r, -1, 1);
    ug_uniform(&k, &r, -1, 1);
    ug_uniform(&v, &r, -1, 1);
    ug_uniform(&dy, &r, -1, 1);
    for (int64_t i = 0; i < 2 * 7 * 7; i++)
        ((float *)eye.data)[i] = i % 7 == i / 7 % 7;
    static const char *bes[] = {"ref", "cpu"};
    const double scale = 0.5;   /* 1/sqrt(4) */
    for (int bi = 0; bi < 2; bi++) {
        ug_outs o = {0};
        const mge_tensor *ins[5] = {&q, &k, &eye, &v, &dy};
        CHECK_OK(run_on(g, bes[bi], 1, ins, &o), err);
        if (o.n != 4) {
            ug_outs_free(&o);
            continue;
        }
        const float *W = o.t[0].data, *P = o.t[1].data, *DQ = o.t[2].data, *DV = o.t[3].data;
        const float *K = k.data, *V = v.data, *G = dy.data;
        double wq = 0, wv = 0;
        int dropped = 0;
        for (int b = 0; b < 2; b++) {
            double dvx[7][3] = {{0}};
            for (int i = 0; i < 5; i++) {
                double ds[7], dp[7], delta = 0;
                for (int j = 0; j < 7; j++) {
                    double pw = P[(b * 5 + i) * 7 + j], ww = W[(b * 5 + i) * 7 + j];
                    double d = pw > 0 ? ww / pw : 0;   /* the explicit mask: 0 or 1/(1-p) */
                    dropped += ww == 0;
                    double acc = 0;
                    for (int e = 0; e < 3; e++) {
                        acc += (double)G[(b * 5 + i) * 3 + e] * V[(b * 7 + j) * 3 + e];
                        dvx[j][e] += ww * G[(b * 5 + i) * 3 + e];
                    }
                    dp[j] = acc * d;
                    delta += pw * dp[j];
                }
                for (int j = 0; j < 7; j++)
                    ds[j] = P[(b * 5 + i) * 7 + j] * (dp[j] - delta) * scale;
                for (int d = 0; d < 4; d++) {
                    double acc = 0;
                    for (int j = 0; j < 7; j++)
                        acc += ds[j] * K[(b * 7 + j) * 4 + d];
                    wq = fmax(wq, fabs(acc - DQ[(b * 5 + i) * 4 + d]));
                }
            }
            for (int j = 0; j < 7; j++)
                for (int e = 0; e < 3; e++)
                    wv = fmax(wv, fabs(dvx[j][e] - DV[(b * 7 + j) * 3 + e]));
        }
        CHECK_MSG(wq < 1e-5 && wv < 1e-5, "%s: dq off by %g, dv by %g from the explicit mask", bes[bi], wq, wv);
        CHECK_MSG(dropped > 0 && dropped < 70, "%s: %d of 70 weights dropped", bes[bi], dropped);
        ug_outs_free(&o);
    }
    mge_tensor_free(&q);
    mge_tensor_free(&k);
    mge_tensor_free(&eye);
    mge_tensor_free(&v);
    mge_tensor_free(&dy);
    mge_graph_free(g);
}

int main(void)
{
    RUN(test_symbolic);
    RUN(test_infer_errors);
    RUN(test_sdpa_values);
    RUN(test_runtime_errors);
    RUN(test_ce_values);
    RUN(test_dropout);
    RUN(test_grads);
    RUN(test_dropout_grads);
    RUN(test_dropout_explicit);
    RUN(test_dropout_grad_explicit);
    return unit_done();
}
