/* test_shape_ops.c — the dynamic shape ops (shape, size, reshape and slice
 * with runtime inputs, expand, tile, squeeze, unsqueeze, split, range,
 * constant_of_shape) and known values through concat and cast: templates
 * on symbolic inputs, results at two bindings on cpu and ref, the error
 * messages of bad shapes, and the gradients against finite differences. */
#include "unit_grad.h"
#include "unit_graph.h"

#include <math.h>
#include <stdlib.h>

/* Parses src, which must fail with a message containing want. */
static void parse_fails(const char *src, const char *want)
{
    mge_graph *g = NULL;
    mge_error err;
    mge_error_clear(&err);
    mge_status s = mge_text_parse(src, strlen(src), ".", &g, &err);
    CHECK_MSG(s != MGE_OK, "parsed: %s", src);
    CHECK_MSG(strstr(err.msg, want) != NULL, "message '%s' lacks '%s'", err.msg, want);
    mge_graph_free(g);
}

/* The template of value name's dim d, as text ("S", "2*S", "?" for DYN). */
static const char *tmpl(const mge_graph *g, const char *name, int d, char *b, size_t n)
{
    int v = mge_graph_find(g, name);
    CHECK_MSG(v >= 0, "no value %s", name);
    if (v < 0 || d >= g->values[v].ndim)
        return "(none)";
    if (g->values[v].dims[d] == MGE_DIM_DYN)
        return "?";
    return mge_dim_str(g->values[v].dims[d], b, n);
}

#define CHECK_TMPL(g, name, d, want) do { char b_[64]; const char *t_ = tmpl(g, name, d, b_, sizeof b_); \
    CHECK_MSG(strcmp(t_, want) == 0, "%s dim %d: template %s, expected %s", name, d, t_, want); } while (0)

/* Runs g on backend with f32 inputs of the given shapes (ramps 0, 1, 2, ...
 * per input); the outputs into o. */
static int run_at(const mge_graph *g, const char *backend, int nin, const int *nds, const int64_t (*dims)[4],
                  ug_outs *o)
{
    mge_error err;
    mge_error_clear(&err);
    mge_exec *e = NULL;
    mge_exec_opts opt = {0};
    opt.threads = 2;
    opt.backend = backend;
    o->n = 0;
    CHECK_OK(mge_exec_create(g, &opt, &e, &err), err);
    if (!e)
        return 0;
    mge_tensor in[4];
    const mge_tensor *ins[4];
    for (int i = 0; i < nin; i++) {
        CHECK_OK(mge_tensor_alloc(&in[i], MGE_F32, nds[i], dims[i], &err), err);
        for (int64_t k = 0; k < mge_tensor_numel(&in[i]); k++)
            ((float *)in[i].data)[k] = (float)k;
        ins[i] = &in[i];
    }
    CHECK_OK(mge_exec_run(e, ins, &err), err);
    int ok = err.code == MGE_OK;
    for (int i = 0; ok && i < mge_exec_noutputs(e) && i < 4; i++) {
        CHECK_OK(mge_tensor_copy(&o->t[i], mge_exec_result(e, i), &err), err);
        o->n++;
    }
    for (int i = 0; i < nin; i++)
        mge_tensor_free(&in[i]);
    mge_exec_free(e);
    return ok;
}

static int same_dims(const mge_tensor *t, int nd, const int64_t *d)
{
    if (t->ndim != nd)
        return 0;
    for (int i = 0; i < nd; i++)
        if (t->dims[i] != d[i])
            return 0;
    return 1;
}

/* g's outputs at one input shape, on cpu and ref alike; o gets cpu's. */
static int run_both(const mge_graph *g, int nin, const int *nds, const int64_t (*dims)[4], ug_outs *o)
{
    ug_outs r;
    int ok = run_at(g, NULL, nin, nds, dims, o) && run_at(g, "ref", nin, nds, dims, &r);
    if (ok)
        ug_check_close(o, &r, 0);
    ug_outs_free(&r);
    return ok;
}

static float f32_at(const mge_tensor *t, int64_t i)
{
    return ((const float *)t->data)[i];
}

/* The ONNX export pattern: s = shape(x); new shape from slices and
 * constants; reshape(x, s), at two different S. */
static void test_reshape_from_shape(void)
{
    mge_graph *g = ug_parse("input x : f32[N,S,8]\n"
                            "const two : i64[1] = [2]\n"
                            "const neg : i64[1] = [-1]\n"
                            "s = shape(x)\n"
                            "lead = slice(s, axis=0, start=0, end=2)\n"
                            "s32 = cast(lead, dtype=i32)\n"
                            "s64 = cast(s32, dtype=i64)\n"
                            "t = concat(s64, two, neg, axis=0)\n"
                            "y = reshape(x, t)\n"
                            "output y\n");
    if (!g)
        return;
    CHECK_TMPL(g, "s", 0, "3");
    CHECK_TMPL(g, "y", 0, "N");
    CHECK_TMPL(g, "y", 1, "S");
    CHECK_TMPL(g, "y", 2, "2");
    CHECK_TMPL(g, "y", 3, "4");
    const int nd[1] = {3};
    const int64_t d1[1][4] = {{2, 3, 8}}, d2[1][4] = {{1, 5, 8}};
    for (int k = 0; k < 2; k++) {
        const int64_t(*d)[4] = k ? d2 : d1;
        ug_outs o;
        if (!run_both(g, 1, nd, d, &o))
            continue;
        int64_t want[4] = {d[0][0], d[0][1], 2, 4};
        CHECK(same_dims(&o.t[0], 4, want));
        for (int64_t i = 0; i < mge_tensor_numel(&o.t[0]); i++)
            CHECK(f32_at(&o.t[0], i) == (float)i);
        ug_outs_free(&o);
    }
    mge_graph_free(g);
}

static void test_reshape_errors(void)
{
    parse_fails("input x : f32[2,3,4]\nconst s : i64[2] = [5,5]\ny = reshape(x, s)\noutput y\n",
                "reshape: x has 24 elements (f32[2,3,4]) but the shape [5,5] holds 25");
    parse_fails("input x : f32[2,3,4]\ny = reshape(x, shape=[5,5])\noutput y\n",
                "x has 24 elements (f32[2,3,4]) but the shape [5,5] holds 25");
    parse_fails("input x : f32[2,3,4]\ninput q : i64[2]\ny = reshape(x, q)\noutput y\n",
                "depends on data, not only on shapes and constants");
    parse_fails("input x : f32[2,3,4]\nconst s : i64[2] = [5,-1]\ny = reshape(x, s)\noutput y\n",
                "24 is not a multiple of 5");
    /* symbolic: the binding a user would see in the message */
    parse_fails("input x : f32[N,3]\nconst s : i64[2] = [2,2]\ny = reshape(x, s)\noutput y\n", "holds 4");
}

static void test_shape_size(void)
{
    mge_graph *g = ug_parse("input x : f32[N,S,4]\n"
                            "a = shape(x, start=1)\n"
                            "b = shape(x, start=-1)\n"
                            "n = size(x)\n"
                            "output a\noutput b\noutput n\n");
    if (!g)
        return;
    CHECK_TMPL(g, "a", 0, "2");
    CHECK_TMPL(g, "b", 0, "1");
    CHECK(g->values[mge_graph_find(g, "n")].ndim == 0);
    const int nd[1] = {3};
    const int64_t d[2][1][4] = {{{2, 7, 4}}, {{3, 1, 4}}};
    for (int k = 0; k < 2; k++) {
        ug_outs o;
        if (!run_both(g, 1, nd, d[k], &o))
            continue;
        const int64_t *a = o.t[0].data, *b = o.t[1].data, *n = o.t[2].data;
        CHECK(o.t[0].dtype == MGE_I64 && a[0] == d[k][0][1] && a[1] == 4);
        CHECK(b[0] == 4);
        CHECK(*n == d[k][0][0] * d[k][0][1] * 4);
        ug_outs_free(&o);
    }
    mge_graph_free(g);
}

/* expand to a shape made of a constant and x's symbolic dim; tile */
static void test_expand_tile(void)
{
    mge_graph *g = ug_parse("input x : f32[S,1]\n"
                            "const three : i64[1] = [3]\n"
                            "const four : i64[1] = [4]\n"
                            "s = shape(x, end=1)\n"
                            "t = concat(three, s, four, axis=0)\n"
                            "e = expand(x, t)\n"
                            "r = tile(x, repeats=[2,3])\n"
                            "output e\noutput r\n");
    if (!g)
        return;
    CHECK_TMPL(g, "e", 0, "3");
    CHECK_TMPL(g, "e", 1, "S");
    CHECK_TMPL(g, "e", 2, "4");
    CHECK_TMPL(g, "r", 0, "2*S");
    CHECK_TMPL(g, "r", 1, "3");
    const int nd[1] = {2};
    const int64_t d[2][1][4] = {{{2, 1}}, {{5, 1}}};
    for (int k = 0; k < 2; k++) {
        ug_outs o;
        int64_t S = d[k][0][0];
        if (!run_both(g, 1, nd, d[k], &o))
            continue;
        int64_t we[3] = {3, S, 4}, wr[2] = {2 * S, 3};
        CHECK(same_dims(&o.t[0], 3, we) && same_dims(&o.t[1], 2, wr));
        for (int64_t i = 0; i < 3 * S * 4; i++)
            CHECK(f32_at(&o.t[0], i) == (float)((i / 4) % S));
        for (int64_t i = 0; i < 2 * S * 3; i++)
            CHECK(f32_at(&o.t[1], i) == (float)((i / 3) % S));
        ug_outs_free(&o);
    }
    mge_graph_free(g);
    parse_fails("input x : f32[2,3]\ny = expand(x, shape=[4,4])\noutput y\n",
                "expand: x f32[2,3] does not broadcast to the shape [4,4]");
    parse_fails("input x : f32[2,3]\ny = tile(x, repeats=[2])\noutput y\n", "has 1 entries but x f32[2,3] has rank 2");
}

static void test_squeeze_unsqueeze(void)
{
    mge_graph *g = ug_parse("input x : f32[N,1,S]\n"
                            "const ax : i64[1] = [-2]\n"
                            "a = squeeze(x, ax)\n"
                            "b = unsqueeze(a, axis=[0,-1])\n"
                            "c = squeeze(b)\n"
                            "output a\noutput b\noutput c\n");
    if (!g)
        return;
    CHECK_TMPL(g, "a", 0, "N");
    CHECK_TMPL(g, "a", 1, "S");
    CHECK_TMPL(g, "b", 0, "1");
    CHECK_TMPL(g, "b", 1, "N");
    CHECK_TMPL(g, "b", 2, "S");
    CHECK_TMPL(g, "b", 3, "1");
    /* squeeze without axes drops every 1: at the probes N and S are not 1 */
    CHECK(g->values[mge_graph_find(g, "c")].ndim == 2);
    const int nd[1] = {3};
    const int64_t d[2][1][4] = {{{2, 1, 3}}, {{4, 1, 6}}};
    for (int k = 0; k < 2; k++) {
        ug_outs o;
        if (!run_both(g, 1, nd, d[k], &o))
            continue;
        int64_t wa[2] = {d[k][0][0], d[k][0][2]}, wb[4] = {1, d[k][0][0], d[k][0][2], 1};
        CHECK(same_dims(&o.t[0], 2, wa) && same_dims(&o.t[1], 4, wb) && same_dims(&o.t[2], 2, wa));
        for (int64_t i = 0; i < wa[0] * wa[1]; i++)
            CHECK(f32_at(&o.t[1], i) == (float)i);
        ug_outs_free(&o);
    }
    mge_graph_free(g);
    parse_fails("input x : f32[2,3,1]\ny = squeeze(x, axis=[1])\noutput y\n",
                "squeeze: axis 1 of x f32[2,3,1] has size 3: expected 1");
    parse_fails("input x : f32[2,3]\ny = unsqueeze(x, axis=[5])\noutput y\n", "out of range for rank 3");
}

static void test_split(void)
{
    mge_graph *g;
    parse_fails("input x : f32[2,6]\np, q, r = split(x, axis=1, sizes=[1,2,2])\noutput p\n",
                "split: sizes [1,2,2] add up to 5 but axis 1 of x f32[2,6] has 6");
    parse_fails("input x : f32[2,5]\np, q, r, s = split(x, axis=1)\noutput p\n", "too few for 4 parts of 2");
    g = ug_parse("input x : f32[N,S]\n"
                 "a, b = split(x, axis=1)\n"
                 "const sz : i64[2] = [1,2]\n"
                 "y = slice(x, axis=1, start=0, end=3)\n"
                 "c, d = split(y, sz, axis=1)\n"
                 "output a\noutput b\n");
    if (!g)
        return;
    CHECK_TMPL(g, "a", 0, "N");
    CHECK_TMPL(g, "a", 1, "(S+1)/2"); /* ceil(S/2) */
    CHECK_TMPL(g, "d", 0, "N");
    CHECK_TMPL(g, "d", 1, "2");
    mge_graph_free(g);
    g = ug_parse("input x : f32[N,S]\n"
                 "a, b = split(x, axis=1)\n"
                 "output a\noutput b\n");
    if (!g)
        return;
    const int nd[1] = {2};
    const int64_t d[2][1][4] = {{{2, 5}}, {{3, 8}}};
    for (int k = 0; k < 2; k++) {
        ug_outs o;
        int64_t N = d[k][0][0], S = d[k][0][1], h = (S + 1) / 2;
        if (!run_both(g, 1, nd, d[k], &o))
            continue;
        int64_t wa[2] = {N, h}, wb[2] = {N, S - h};
        CHECK(same_dims(&o.t[0], 2, wa) && same_dims(&o.t[1], 2, wb));
        for (int64_t i = 0; i < N; i++)
            for (int64_t j = 0; j < S; j++)
                CHECK(f32_at(j < h ? &o.t[0] : &o.t[1], i * (j < h ? h : S - h) + (j < h ? j : j - h)) ==
                      (float)(i * S + j));
        ug_outs_free(&o);
    }
    mge_graph_free(g);
}

/* slice with runtime bounds: negative steps, clamping, INT64 sentinels */
static void test_slice_inputs(void)
{
    mge_graph *g = ug_parse("input x : f32[N,S]\n"
                            "const st : i64[1] = [-1]\n"
                            "const en : i64[1] = [-9223372036854775807]\n"
                            "const ax : i64[1] = [1]\n"
                            "const sp : i64[1] = [-1]\n"
                            "rev = slice(x, st, en, ax, sp)\n"
                            "const st2 : i64[2] = [1, 0]\n"
                            "const en2 : i64[2] = [100, -1]\n"
                            "const sp2 : i64[2] = [2, 1]\n"
                            "const ax2 : i64[2] = [0, 1]\n"
                            "sub = slice(x, st2, en2, ax2, sp2)\n"
                            "back = slice(x, axis=1, start=-2, step=-2)\n"
                            "output rev\noutput sub\noutput back\n");
    if (!g)
        return;
    CHECK_TMPL(g, "rev", 0, "N");
    CHECK_TMPL(g, "rev", 1, "S");
    CHECK_TMPL(g, "sub", 1, "S-1");
    const int nd[1] = {2};
    const int64_t d[2][1][4] = {{{3, 4}}, {{5, 7}}};
    for (int k = 0; k < 2; k++) {
        ug_outs o;
        int64_t N = d[k][0][0], S = d[k][0][1];
        if (!run_both(g, 1, nd, d[k], &o))
            continue;
        int64_t wr[2] = {N, S}, ws[2] = {N / 2, S - 1}, wb[2] = {N, S / 2};
        CHECK(same_dims(&o.t[0], 2, wr) && same_dims(&o.t[1], 2, ws) && same_dims(&o.t[2], 2, wb));
        for (int64_t i = 0; i < N; i++)
            for (int64_t j = 0; j < S; j++)
                CHECK(f32_at(&o.t[0], i * S + j) == (float)(i * S + S - 1 - j));
        for (int64_t i = 0; i < N / 2; i++)
            for (int64_t j = 0; j < S - 1; j++)
                CHECK(f32_at(&o.t[1], i * (S - 1) + j) == (float)((1 + 2 * i) * S + j));
        for (int64_t j = 0; j < S / 2; j++)
            CHECK(f32_at(&o.t[2], j) == (float)(S - 2 - 2 * j));
        ug_outs_free(&o);
    }
    mge_graph_free(g);
    parse_fails("input x : f32[2,3]\nconst a : i64[1] = [0]\nconst z : i64[1] = [0]\ny = slice(x, a, a, a, z)\n"
                "output y\n",
                "expected a nonzero step");
    parse_fails("input x : f32[2,3]\ninput a : i64[1]\ny = slice(x, a, a)\noutput y\n", "depends on data");
}

/* range from a size known at plan time; constant_of_shape of x's shape */
static void test_range_constant(void)
{
    mge_graph *g = ug_parse("input x : f32[S]\n"
                            "const zero : i64[] = [0]\n"
                            "const one : i64[] = [1]\n"
                            "n = size(x)\n"
                            "r = range(zero, n, one)\n"
                            "s = shape(x)\n"
                            "c = constant_of_shape(s, value=2.5)\n"
                            "const fs : f32[] = [1]\n"
                            "const fl : f32[] = [0]\n"
                            "const fd : f32[] = [-0.25]\n"
                            "f = range(fs, fl, fd)\n"
                            "output r\noutput c\noutput f\n");
    if (!g)
        return;
    CHECK_TMPL(g, "r", 0, "S");
    CHECK_TMPL(g, "c", 0, "S");
    CHECK_TMPL(g, "f", 0, "4");
    const int nd[1] = {1};
    const int64_t d[2][1][4] = {{{3}}, {{9}}};
    for (int k = 0; k < 2; k++) {
        ug_outs o;
        int64_t S = d[k][0][0];
        if (!run_both(g, 1, nd, d[k], &o))
            continue;
        CHECK(o.t[0].dtype == MGE_I64 && same_dims(&o.t[0], 1, &S) && same_dims(&o.t[1], 1, &S));
        for (int64_t i = 0; i < S; i++)
            CHECK(((int64_t *)o.t[0].data)[i] == i && f32_at(&o.t[1], i) == 2.5f);
        for (int i = 0; i < 4; i++)
            CHECK(f32_at(&o.t[2], i) == 1.0f - 0.25f * (float)i);
        ug_outs_free(&o);
    }
    mge_graph_free(g);
    parse_fails("const a : i64[] = [0]\nconst z : i64[] = [0]\ny = range(a, a, z)\noutput y\n",
                "expected a nonzero delta");
    parse_fails("input q : i64[]\nconst a : i64[] = [0]\ny = range(a, q, a)\noutput y\n", "depends on data");
}

/* the gradients of the rules in grad_shape.c, against finite differences */
static void test_gradients(void)
{
    static const char *const src[] = {
        "input x : f32[3,1,4]\ny = squeeze(x, axis=[1])\noutput y\n",
        "input x : f32[3,4]\ny = unsqueeze(x, axis=[1])\noutput y\n",
        "input x : f32[3,1]\ny = expand(x, shape=[2,3,4])\noutput y\n",
        "input x : f32[3,2]\nconst r : i64[2] = [2,3]\ny = tile(x, r)\noutput y\n",
        "input x : f32[4,5]\na, b, c = split(x, axis=1, sizes=[1,3,1])\nz = concat(c, a, axis=1)\noutput z\n",
        "input x : f32[4,5]\na, b = split(x, axis=0)\noutput b\n",
        "input x : f32[5,6]\ny = slice(x, axis=1, start=-1, step=-2)\noutput y\n",
        ("input x : f32[5,6]\nconst s : i64[2] = [4,1]\nconst e : i64[2] = [0,6]\nconst a : i64[2] = [0,1]\n"
         "const p : i64[2] = [-1,2]\ny = slice(x, s, e, a, p)\noutput y\n"),
    };
    for (size_t i = 0; i < sizeof src / sizeof src[0]; i++) {
        mge_graph *g = ug_parse(src[i]);
        if (!g)
            continue;
        double e = gc_check(g, g->outputs[0], NULL, 1e-2, 0);
        CHECK_MSG(e <= 1e-2, "case %zu: error %g", i, e);
        mge_graph_free(g);
    }
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(test_reshape_from_shape);
    RUN(test_reshape_errors);
    RUN(test_shape_size);
    RUN(test_expand_tile);
    RUN(test_squeeze_unsqueeze);
    RUN(test_split);
    RUN(test_slice_inputs);
    RUN(test_range_constant);
    RUN(test_gradients);
    return unit_rerun_baseline(argv, "test_shape_ops", unit_done());
}
