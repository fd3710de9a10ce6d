/* test_symdim.c — symbolic dims: the expression table, fitting, templates
 * of real layers, bindings, the plan cache and the errors users see. */
#include "internal.h"
#include "unit.h"

static mge_error err;

static int64_t sym(const char *n)
{
    int64_t c = 0;
    CHECK_OK(mge_dim_symbol(n, strlen(n), &c, &err), err);
    return c;
}

static const char *str(int64_t c)
{
    static char b[4][128];
    static int k;
    k = (k + 1) % 4;
    return mge_dim_str(c, b[k], sizeof b[k]);
}

static void test_table(void)
{
    int64_t H = sym("H"), W = sym("W");
    CHECK(sym("N") == MGE_DIM_N);
    CHECK(sym("H") == H && H != W && mge_dim_is_symbol(H));
    CHECK(strcmp(mge_dim_name(W), "W") == 0);
    CHECK(mge_dim_add(3, 4) == 7 && mge_dim_mul(3, 4) == 12 && mge_dim_div(9, 2) == 4);
    /* interning: the same expression is the same code, whatever the order */
    CHECK(mge_dim_add(H, W) == mge_dim_add(W, H));
    CHECK(mge_dim_mul(H, W) == mge_dim_mul(W, H));
    CHECK(mge_dim_add(mge_dim_add(H, 1), 2) == mge_dim_add(H, 3));
    CHECK(mge_dim_div(mge_dim_div(H, 2), 2) == mge_dim_div(H, 4));
    CHECK(mge_dim_mul(mge_dim_mul(H, 2), 3) == mge_dim_mul(H, 6));
    CHECK_MSG(strcmp(str(mge_dim_div(mge_dim_add(H, 1), 2)), "(H+1)/2") == 0, "%s",
              str(mge_dim_div(mge_dim_add(H, 1), 2)));
    CHECK_MSG(strcmp(str(mge_dim_mul(mge_dim_mul(H, W), 64)), "64*H*W") == 0 ||
                  strcmp(str(mge_dim_mul(mge_dim_mul(H, W), 64)), "64*W*H") == 0,
              "%s", str(mge_dim_mul(mge_dim_mul(H, W), 64)));
    CHECK(strcmp(str(MGE_DIM_DYN), "?") == 0);
    /* evaluation, floor division, overflow */
    mge_binding b = {0};
    CHECK_OK(mge_binding_set(&b, H, 7, &err), err);
    CHECK_OK(mge_binding_set(&b, W, 10, &err), err);
    int64_t v = 0;
    CHECK_OK(mge_dim_eval(mge_dim_div(mge_dim_add(H, 1), 2), &b, &v, &err), err);
    CHECK(v == 4);
    CHECK(mge_dim_eval(mge_dim_add(H, MGE_DIM_N), &b, &v, &err) == MGE_ERR_SHAPE && strstr(err.msg, "symbol N"));
    CHECK_OK(mge_binding_set(&b, H, INT64_MAX / 4, &err), err);
    CHECK(mge_dim_eval(mge_dim_mul(mge_dim_mul(H, W), 64), &b, &v, &err) == MGE_ERR_SHAPE &&
          strstr(err.msg, "overflows int64"));
    CHECK(mge_dim_symbol("3x", 2, &v, &err) == MGE_ERR_SHAPE);
    /* bindings compare by content, in any order */
    mge_binding p = {0}, q = {0};
    mge_binding_set(&p, H, 2, NULL);
    mge_binding_set(&p, W, 3, NULL);
    mge_binding_set(&q, W, 3, NULL);
    mge_binding_set(&q, H, 2, NULL);
    CHECK(mge_binding_equal(&p, &q));
    mge_binding_set(&q, H, 3, NULL);
    CHECK(!mge_binding_equal(&p, &q));
}

static mge_graph *parse(const char *text)
{
    mge_graph *g = NULL;
    mge_error e;
    mge_status s = mge_text_parse(text, strlen(text), NULL, &g, &e);
    CHECK_MSG(s == MGE_OK, "%s", e.msg);
    return g;
}

static const char *tshape(const mge_graph *g, const char *name)
{
    static char b[4][256];
    static int k;
    k = (k + 1) % 4;
    int v = mge_graph_find(g, name);
    if (v < 0)
        return "(none)";
    return mge_shape_str(g->values[v].dtype, g->values[v].ndim, g->values[v].dims, b[k], sizeof b[k]);
}

/* Templates of a small conv net: conv/pool arithmetic and flatten products. */
static void test_templates(void)
{
    mge_graph *g = parse("input x : f32[N,3,H,W]\n"
                         "c1 = conv2d(x, out=8, kernel=3, stride=2, pad=1)\n"
                         "p1 = maxpool2d(c1, kernel=2, stride=2)\n"
                         "c2 = conv2d(p1, out=4, kernel=3)\n"
                         "f = flatten(c2)\n"
                         "t = transpose(x, perm=[0,2,3,1])\n"
                         "cat = concat(x, x, axis=2)\n"
                         "g = global_avgpool(c2)\n"
                         "output f\noutput t\noutput cat\noutput g\n");
    if (!g)
        return;
    CHECK_MSG(strcmp(tshape(g, "c1"), "f32[N,8,(H+1)/2,(W+1)/2]") == 0, "%s", tshape(g, "c1"));
    CHECK_MSG(strcmp(tshape(g, "p1"), "f32[N,8,(H+1)/4,(W+1)/4]") == 0, "%s", tshape(g, "p1"));
    CHECK_MSG(strcmp(tshape(g, "c2"), "f32[N,4,(H+1)/4-2,(W+1)/4-2]") == 0, "%s", tshape(g, "c2"));
    CHECK_MSG(strcmp(tshape(g, "t"), "f32[N,H,W,3]") == 0, "%s", tshape(g, "t"));
    CHECK_MSG(strcmp(tshape(g, "cat"), "f32[N,3,2*H,W]") == 0, "%s", tshape(g, "cat"));
    CHECK_MSG(strcmp(tshape(g, "g"), "f32[N,4,1,1]") == 0, "%s", tshape(g, "g"));
    int f = mge_graph_find(g, "f");
    CHECK(f >= 0 && g->values[f].dims[1] < 0 && g->values[f].dims[1] != MGE_DIM_DYN);
    /* the templates agree with plan-time inference at several bindings */
    int64_t H = sym("H"), W = sym("W");
    int *nd = calloc((size_t)g->nvalues, sizeof *nd);
    int64_t *dims = calloc((size_t)g->nvalues * MGE_MAX_DIMS, sizeof *dims);
    const int64_t hw[][2] = {{32, 32}, {17, 40}, {224, 224}, {12, 13}};
    for (int i = 0; i < 4; i++) {
        mge_binding b = {0};
        mge_binding_set(&b, MGE_DIM_N, 2, NULL);
        mge_binding_set(&b, H, hw[i][0], NULL);
        mge_binding_set(&b, W, hw[i][1], NULL);
        CHECK_OK(mge_graph_shapes(g, &b, nd, dims, &err), err);
        for (int v = 0; v < g->nvalues; v++)
            for (int k = 0; k < g->values[v].ndim; k++) {
                int64_t e;
                if (g->values[v].dims[k] == MGE_DIM_DYN)
                    continue;
                CHECK_OK(mge_dim_eval(g->values[v].dims[k], &b, &e, &err), err);
                CHECK_MSG(e == dims[(size_t)v * MGE_MAX_DIMS + (size_t)k], "%s dim %d: %lld vs %lld at H=%lld",
                          g->values[v].name, k, (long long)e, (long long)dims[(size_t)v * MGE_MAX_DIMS + (size_t)k],
                          (long long)hw[i][0]);
            }
    }
    /* an unbound symbol is named */
    CHECK(mge_graph_shapes(g, MGE_BATCH(2), nd, dims, &err) == MGE_ERR_SHAPE && strstr(err.msg, "symbol H"));
    free(nd);
    free(dims);
    mge_graph_free(g);
}

static void test_bad_text(void)
{
    mge_graph *g = NULL;
    mge_error e;
    const char *t = "param w : f32[H,3]\n";
    CHECK(mge_text_parse(t, strlen(t), NULL, &g, &e) != MGE_OK && strstr(e.msg, "only inputs may have symbolic"));
    /* parameters may not follow a symbol (a linear over a symbolic feature dim) */
    t = "input x : f32[N,F]\ny = linear(x, out=4)\noutput y\n";
    CHECK(mge_text_parse(t, strlen(t), NULL, &g, &e) != MGE_OK && strstr(e.msg, "would depend on a symbolic dim"));
    /* shapes that cannot agree: the message names the binding it was checked at */
    t = "input a : f32[N,S]\ninput b : f32[N,T]\ny = add(a, b)\noutput y\n";
    CHECK(mge_text_parse(t, strlen(t), NULL, &g, &e) != MGE_OK && strstr(e.msg, "S=") && strstr(e.msg, "T="));
}

static void fill(mge_tensor *t, float v)
{
    for (int64_t i = 0; i < mge_tensor_numel(t); i++)
        ((float *)t->data)[i] = v;
}

/* The executor: records of different shapes, the plan cache (LRU, exact
 * binding keys: [2,3] and [3,2] differ), and binding conflicts. */
static void test_exec_cache(void)
{
    mge_graph *g = parse("input a : f32[S,T]\ninput m : f32[S,T]\ny = mul(a, m)\ns = sum(y)\noutput s\n");
    if (!g)
        return;
    mge_exec_opts o = {0};
    o.plan_cache = 2;
    mge_exec *e = NULL;
    CHECK_OK(mge_exec_create(g, &o, &e, &err), err);
    const int64_t shp[][2] = {{2, 3}, {3, 2}, {2, 3}, {4, 4}, {3, 2}, {2, 3}};
    int64_t hits = 0, misses = 0;
    int cached = 0, cap = 0;
    for (int i = 0; i < 6; i++) {
        mge_tensor a, m;
        CHECK_OK(mge_tensor_alloc(&a, MGE_F32, 2, shp[i], &err), err);
        CHECK_OK(mge_tensor_alloc(&m, MGE_F32, 2, shp[i], &err), err);
        fill(&a, 2);
        fill(&m, 0.5f);
        const mge_tensor *in[2] = {&a, &m};
        CHECK_OK(mge_exec_run(e, in, &err), err);
        const mge_tensor *r = mge_exec_result(e, 0);
        CHECK(r && fabsf(((const float *)r->data)[0] - (float)(shp[i][0] * shp[i][1])) < 1e-5f);
        mge_tensor_free(&a);
        mge_tensor_free(&m);
    }
    mge_exec_plan_cache(e, &hits, &misses, &cached, &cap);
    /* [2,3] [3,2] hit(2,3) [4,4] (evicts 3,2) [3,2] again (evicts 2,3) [2,3] again */
    CHECK_MSG(hits == 1 && misses == 5 && cached == 2 && cap == 2, "hits %lld misses %lld cached %d", (long long)hits,
              (long long)misses, cached);
    /* a symbol bound two ways names both inputs and values */
    int64_t d1[2] = {2, 3}, d2[2] = {2, 4};
    mge_tensor a, m;
    mge_tensor_alloc(&a, MGE_F32, 2, d1, NULL);
    mge_tensor_alloc(&m, MGE_F32, 2, d2, NULL);
    const mge_tensor *in[2] = {&a, &m};
    CHECK(mge_exec_run(e, in, &err) == MGE_ERR_SHAPE);
    CHECK_MSG(strcmp(err.msg, "T is 3 from a but 4 from m (got f32[2,4])") == 0, "%s", err.msg);
    mge_tensor_free(&a);
    mge_tensor_free(&m);
    mge_exec_free(e);
    o.plan_cache = 5000;
    CHECK(mge_exec_create(g, &o, &e, &err) == MGE_ERR_INVALID && strstr(err.msg, "plan cache"));
    o.plan_cache = -1;
    CHECK(mge_exec_create(g, &o, &e, &err) == MGE_ERR_INVALID);
    mge_graph_free(g);
}

/* .mge files keep the symbols (version 2), and batch-only graphs stay version 1. */
static void test_file(void)
{
    mge_graph *g = parse("input x : f32[B,S,4]\ny = relu(x)\nz = concat(y, y, axis=1)\noutput z\n");
    if (!g)
        return;
    mge_buf b = {0};
    CHECK_OK(mge_file_write(g, NULL, &b, &err), err);
    CHECK(b.n > 12 && b.p[8] == 2);
    mge_graph *h = NULL;
    CHECK_OK(mge_file_read(b.p, b.n, 0, &h, &err), err);
    if (h) {
        CHECK_MSG(strcmp(tshape(h, "x"), "f32[B,S,4]") == 0, "%s", tshape(h, "x"));
        CHECK_MSG(strcmp(tshape(h, "z"), "f32[B,2*S,4]") == 0, "%s", tshape(h, "z"));
        mge_graph_free(h);
    }
    mge_buf_free(&b);
    mge_graph_free(g);
    g = parse("input x : f32[N,4]\ny = relu(x)\noutput y\n");
    if (!g)
        return;
    CHECK_OK(mge_file_write(g, NULL, &b, &err), err);
    CHECK(b.n > 12 && b.p[8] == 1);
    mge_buf_free(&b);
    mge_graph_free(g);
}

int main(void)
{
    RUN(test_table);
    RUN(test_templates);
    RUN(test_bad_text);
    RUN(test_exec_cache);
    RUN(test_file);
    return unit_done();
}
