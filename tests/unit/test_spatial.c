/* test_spatial.c — the spatial ops (resize, pad, group_norm,
 * instance_norm, rms_norm) and enum attributes: the enum and float-list
 * attributes through the text form and .mge files (by word), symbolic
 * templates at two bindings, every refused attribute with its message,
 * hand-computed results on ref and cpu, layernorm over the last k dims,
 * and every gradient rule against finite differences. PyTorch checks the
 * numbers at scale in tests/oracle/test_spatial.py. */
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

static char *print(const mge_graph *g)
{
    mge_buf b = {0};
    CHECK_OK(mge_text_print(g, &b, &err), err);
    mge_buf_put(&b, "", 1);
    return (char *)b.p;
}

/* ---------------------------------------------------------------- enum and float-list attributes */

static void test_enum_words(void)
{
    static const char *const words[] = {"nearest", "bilinear", "constant", "reflect", "replicate", "bicubic"};
    static const int ids[] = {MGE_MODE_NEAREST, MGE_MODE_BILINEAR, MGE_MODE_CONSTANT, MGE_MODE_REFLECT,
                              MGE_MODE_REPLICATE, MGE_MODE_BICUBIC};
    CHECK(mge_key_type(MGE_KEY_mode) == MGE_ATTR_ENUM);
    CHECK(mge_key_type(MGE_KEY_scales) == MGE_ATTR_FLOATS);
    for (int i = 0; i < 6; i++) {
        CHECK_MSG(mge_key_enum_lookup(MGE_KEY_mode, words[i], strlen(words[i])) == ids[i], "%s", words[i]);
        const char *w = mge_key_enum_word(MGE_KEY_mode, ids[i]);
        CHECK_MSG(w && strcmp(w, words[i]) == 0, "%d: %s", ids[i], w ? w : "NULL");
    }
    CHECK(mge_key_enum_word(MGE_KEY_mode, 6) == NULL);
    CHECK(mge_key_enum_word(MGE_KEY_mode, -1) == NULL);
    CHECK(mge_key_enum_word(MGE_KEY_axis, 0) == NULL);
    CHECK(mge_key_enum_lookup(MGE_KEY_mode, "near", 4) == -1);
    CHECK(mge_key_enum_lookup(MGE_KEY_axis, "nearest", 7) == -1);
    CHECK(strcmp(mge_key_enum_words(MGE_KEY_mode), "nearest bilinear constant reflect replicate bicubic") == 0);
    /* through the API: an index past the words is refused */
    mge_graph *g = mge_graph_new();
    int64_t d[4] = {1, 1, 2, 2};
    int x = mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 4, d, &err);
    mge_attr at[2] = {A(MGE_KEY_mode, 6), A(MGE_KEY_size, 3)};
    const char *yn[1] = {"y"};
    at[1].n = 2, at[1].i[1] = 3;
    CHECK(mge_graph_add_node(g, "y", MGE_OP_RESIZE, 1, &x, 2, at, 1, yn, &err) < 0);
    CHECK_MSG(strstr(err.msg, "attribute 'mode': 6 is none of its words (nearest bilinear"), "%s", err.msg);
    at[0] = A(MGE_KEY_mode, MGE_MODE_BILINEAR);
    CHECK_MSG(mge_graph_add_node(g, "y", MGE_OP_RESIZE, 1, &x, 2, at, 1, yn, &err) >= 0, "%s", err.msg);
    mge_graph_free(g);
}

static const char *rt_src = "input x : f32[1,2,5,6]\n"
                            "a = resize(x, mode=bilinear, align_corners=true, scales=[2, 1.5])\n"
                            "b = upsample(x, size=[3, 4])\n"
                            "c = pad(a, pads=[1, 2, 0, -1], mode=constant, value=0.25)\n"
                            "d = pad(b, pads=[2, 1], mode=reflect)\n"
                            "output c, d\n";

static void test_enum_round_trip(void)
{
    mge_graph *g = ug_parse(rt_src);
    if (!g)
        return;
    char *t1 = print(g);
    /* words, not numbers; defaults (nearest, constant) left out; upsample prints as resize */
    CHECK_MSG(strstr(t1, "a = resize(x, mode=bilinear, align_corners=true, scales=[2, 1.5])"), "%s", t1);
    CHECK_MSG(strstr(t1, "b = resize(x, size=[3, 4])"), "%s", t1);
    CHECK_MSG(strstr(t1, "c = pad(a, pads=[1, 2, 0, -1], value=0.25)"), "%s", t1);
    CHECK_MSG(strstr(t1, "d = pad(b, pads=[2, 1], mode=reflect)"), "%s", t1);
    const mge_node *a = ug_producer(g, "a");
    CHECK(a && mge_node_int(a, MGE_KEY_mode, -1) == MGE_MODE_BILINEAR);
    CHECK(a && mge_resize_factor(a, 0) == 2 && mge_resize_factor(a, 1) == 1.5);
    /* .mge: the word is stored, and it reads back the same graph */
    mge_buf b;
    ug_file_bytes(g, &b);
    int has_word = 0;
    for (size_t i = 0; i + 8 <= b.n; i++)
        has_word |= memcmp(b.p + i, "bilinear", 8) == 0;
    CHECK_MSG(has_word, "the .mge file does not hold the word 'bilinear'");
    mge_graph *h = NULL;
    CHECK_OK(mge_file_read(b.p, b.n, 0, &h, &err), err);
    if (h) {
        char *t2 = print(h);
        CHECK_MSG(strcmp(t1, t2) == 0, "text after .mge:\n%s\nbefore:\n%s", t2, t1);
        free(t2);
        mge_graph_free(h);
    }
    mge_buf_free(&b);
    free(t1);
    mge_graph_free(g);
}

/* ---------------------------------------------------------------- shapes */

static void test_symbolic(void)
{
    mge_graph *g = ug_parse("input x : f32[N,4,H,W]\n"
                            "input s : f32[N,S,8]\n"
                            "r = resize(x, scales=[2, 2])\n"
                            "rb = resize(x, mode=bilinear, size=[5, 7])\n"
                            "p = pad(x, pads=[1, 2, 1, 0])\n"
                            "q = pad(x, pads=[2, 2, 1, 1, 0, 0, 1, 0], value=-1)\n"
                            "pr = pad(s, pads=[1, 1, 3, 0], mode=replicate)\n"
                            "gn = group_norm(x, num_groups=2)\n"
                            "in1 = instance_norm(x)\n"
                            "in2 = instance_norm(x, affine=true)\n"
                            "rms = rms_norm(s)\n"
                            "ln = layernorm(s, axis=-1)\n"
                            "input z : f32[N,2,A,B]\n"
                            "zs = shape(z, start=2)\n"
                            "rz = resize(x, zs, mode=bilinear)\n"
                            "za = shape(x, end=2)\n"
                            "zo = concat(za, zs)\n"
                            "ro = resize(x, zo)\n"
                            "output r, rb, p, q, pr, gn, in1, in2, rms, ln, rz, ro\n");
    if (!g)
        return;
    TMPL(g, "r", "[N,4,2*H,2*W]");
    TMPL(g, "rb", "[N,4,5,7]");
    TMPL(g, "p", "[N,4,H+1,W+3]");
    TMPL(g, "q", "[N+1,4,H+2,W+4]");
    TMPL(g, "pr", "[N,S+3,10]");
    TMPL(g, "gn", "[N,4,H,W]");
    TMPL(g, "in1", "[N,4,H,W]");
    TMPL(g, "in2", "[N,4,H,W]");
    TMPL(g, "rms", "[N,S,8]");
    TMPL(g, "gn.weight", "[4]");
    TMPL(g, "in2.bias", "[4]");
    TMPL(g, "rms.weight", "[8]");
    CHECK(mge_graph_find(g, "in1.weight") < 0);
    mge_binding b1 = {0}, b2 = {0};
    CHECK_OK(mge_binding_set(&b1, MGE_DIM_N, 2, &err), err);
    CHECK_OK(mge_binding_set(&b1, sym("H"), 5, &err), err);
    CHECK_OK(mge_binding_set(&b1, sym("W"), 7, &err), err);
    CHECK_OK(mge_binding_set(&b1, sym("S"), 3, &err), err);
    CHECK_OK(mge_binding_set(&b2, MGE_DIM_N, 1, &err), err);
    CHECK_OK(mge_binding_set(&b2, sym("H"), 16, &err), err);
    CHECK_OK(mge_binding_set(&b2, sym("W"), 9, &err), err);
    CHECK_OK(mge_binding_set(&b2, sym("S"), 11, &err), err);
    CHECK_OK(mge_binding_set(&b1, sym("A"), 6, &err), err);
    CHECK_OK(mge_binding_set(&b1, sym("B"), 2, &err), err);
    CHECK_OK(mge_binding_set(&b2, sym("A"), 1, &err), err);
    CHECK_OK(mge_binding_set(&b2, sym("B"), 30, &err), err);
    concrete(g, &b1, "r", "[2,4,10,14]");
    concrete(g, &b2, "r", "[1,4,32,18]");
    concrete(g, &b1, "rb", "[2,4,5,7]");
    concrete(g, &b1, "p", "[2,4,6,10]");
    concrete(g, &b2, "p", "[1,4,17,12]");
    concrete(g, &b2, "q", "[2,4,18,13]");
    concrete(g, &b1, "pr", "[2,6,10]");
    concrete(g, &b2, "gn", "[1,4,16,9]");
    concrete(g, &b1, "rms", "[2,3,8]");
    /* a size input from shapes: ONNX's Resize to another tensor's H, W */
    TMPL(g, "rz", "[N,4,A,B]");
    TMPL(g, "ro", "[N,4,A,B]");
    concrete(g, &b1, "rz", "[2,4,6,2]");
    concrete(g, &b1, "ro", "[2,4,6,2]");
    concrete(g, &b2, "rz", "[1,4,1,30]");
    mge_graph_free(g);
}

/* layernorm over the last k dims: params are the trailing shape */
static void test_layernorm_last_k(void)
{
    mge_graph *g = ug_parse("input x : f32[N,3,4,5]\n"
                            "a = layernorm(x, axis=-2)\n"
                            "b = layernorm(x, axis=-3)\n"
                            "c = layernorm(x, axis=1)\n"
                            "output a, b, c\n");
    if (!g)
        return;
    TMPL(g, "a.weight", "[4,5]");
    TMPL(g, "a.bias", "[4,5]");
    TMPL(g, "b.weight", "[3,4,5]");
    TMPL(g, "c.bias", "[3,4,5]");
    TMPL(g, "b", "[N,3,4,5]");
    mge_graph_free(g);
}

/* Each model fails to load with msg in the error. */
static void refused(const char *src, const char *msg)
{
    mge_graph *g = NULL;
    CHECK_MSG(mge_text_parse(src, strlen(src), ".", &g, &err) != MGE_OK, "accepted: %s", src);
    CHECK_MSG(strstr(err.msg, msg), "%s\n  got: %s\n  expected: %s", src, err.msg, msg);
    mge_graph_free(g);
}

static void test_errors(void)
{
    const char *x = "input x : f32[2,4,5,6]\n";
    char src[512];
#define BAD(line, msg)                                                \
    do {                                                              \
        snprintf(src, sizeof src, "%s%s\noutput y\n", x, line);       \
        refused(src, msg);                                            \
    } while (0)
    BAD("y = resize(x, mode=cubic, scales=[2, 2])",
        "resize attribute 'mode': expected one of nearest bilinear constant reflect replicate bicubic, found 'cubic'");
    BAD("y = resize(x, mode=3, scales=[2, 2])", "expected one of nearest bilinear");
    BAD("y = resize(x, mode=reflect, scales=[2, 2])", "resize: mode=reflect: expected nearest, bilinear or bicubic");
    BAD("y = resize(x, mode=bilinear, cubic_a=-0.5, scales=[2, 2])", "resize: cubic_a and exclude_outside need mode=bicubic");
    BAD("y = resize(x, exclude_outside=true, scales=[2, 2])", "resize: cubic_a and exclude_outside need mode=bicubic");
    BAD("y = resize(x, scales=[0, 2])", "resize: scales=[0,2]: expected scales > 0");
    BAD("y = resize(x, scales=[2, -1.5])", "resize: scales=[2,-1.5]: expected scales > 0");
    BAD("y = resize(x, scales=[2])", "resize: scales has 1 values: expected 2 [sh,sw]");
    BAD("y = resize(x, scales=[0.1, 1])", "resize: scales=[0.1,1] make an empty output from x f32[2,4,5,6]");
    BAD("y = resize(x, size=[0, 3])", "resize: size=[0,3]: expected sizes >= 1");
    BAD("y = resize(x)", "resize: needs exactly one of scales=[sh,sw], size=[oh,ow] and a size input");
    BAD("y = resize(x, scales=[2, 2], size=[3, 3])", "needs exactly one of scales=[sh,sw], size=[oh,ow] and a size input, found more than one");
    BAD("y = resize(x, align_corners=true, scales=[2, 2])", "resize: align_corners=true needs mode=bilinear or bicubic");
    refused("input x : f32[2,5,6]\ny = resize(x, scales=[2, 2])\noutput y\n",
            "resize: x is f32[2,5,6]: expected rank 4 [N,C,H,W]");
    refused("input x : i32[1,1,5,6]\ny = resize(x, scales=[2, 2])\noutput y\n", "expected a float dtype");
    BAD("y = pad(x, pads=[1, 2, 3])", "pad: pads has 3 values: expected (begin, end) pairs");
    refused("input x : f32[3,4]\ny = pad(x, pads=[1, 1, 1, 1, 1, 1])\noutput y\n",
            "pad: pads has 3 pairs for x f32[3,4] of rank 2");
    BAD("y = pad(x, pads=[-1, 0], mode=reflect)", "pad: pads=[-1,0] for dim 3: mode=reflect needs pads >= 0");
    BAD("y = pad(x, pads=[0, 0, 0, -2], mode=replicate)", "pad: pads=[0,-2] for dim 2: mode=replicate needs pads >= 0");
    BAD("y = pad(x, pads=[6, 0], mode=reflect)", "pad: pads=[6,0] for dim 3 of size 6: mode=reflect needs pads < 6");
    BAD("y = pad(x, pads=[0, 0, 1, 5], mode=reflect)",
        "pad: pads=[1,5] for dim 2 of size 5: mode=reflect needs pads < 5");
    BAD("y = pad(x, pads=[1, 1, 1, 1, 1, 1, 1, 1], mode=replicate)",
        "pad: mode=replicate pads the trailing 1 to 3 dims, pads has 4 pairs");
    BAD("y = pad(x, pads=[-3, -3])", "pad: pads=[-3,-3] crop dim 3 of size 6 to 0: expected >= 1");
    BAD("y = pad(x, pads=[1, 1], mode=bilinear)", "pad: mode=bilinear: expected constant, reflect or replicate");
    BAD("y = pad(x)", "pad needs attribute 'pads'");
    BAD("y = group_norm(x, num_groups=3)", "group_norm: num_groups=3 does not divide the 4 channels");
    BAD("y = group_norm(x, num_groups=0)", "group_norm: num_groups=0 does not divide the 4 channels");
    BAD("y = group_norm(x, num_groups=2, eps=0)", "group_norm: eps=0: expected > 0");
    BAD("y = group_norm(x)", "group_norm needs attribute 'num_groups'");
    BAD("y = rms_norm(x, axis=4)", "rms_norm: axis=4 is out of range for x f32[2,4,5,6]");
    BAD("y = rms_norm(x, axis=-5)", "rms_norm: axis=-5 is out of range");
    BAD("y = rms_norm(x, eps=-1)", "rms_norm: eps=-1: expected > 0");
    refused("input x : f32[2,4,5,6]\ninput w : f32[4]\ninput b : f32[4]\ny = instance_norm(x, w, b)\noutput y\n",
            "instance_norm: 3 inputs: expected x alone (affine=false)");
    refused("input x : f32[2,4,5,6]\ny = instance_norm(x, x, x, affine=true)\noutput y\n",
            "instance_norm: weight is f32[2,4,5,6]: expected f32[4]");
    refused("input x : f32[2,4,5,6]\ninput w : f32[5,6]\ny = rms_norm(x, w, axis=-3)\noutput y\n",
            "rms_norm: weight is f32[5,6]: expected f32[4,5,6]");
    refused("input x : f32[4]\ny = group_norm(x, num_groups=1)\noutput y\n", "group_norm: x is f32[4]: expected rank >= 2");
    refused("input x : f32[2,4,5,6]\ninput s : i64[2]\ny = resize(x, s)\noutput y\n",
            "resize: the size input depends on data, not only on shapes and constants: not supported");
    refused("input x : f32[2,4,5,6]\nconst s : i64[3] = [1, 2, 3]\ny = resize(x, s)\noutput y\n",
            "resize: the size input is i64[3]: expected i64[2] [oh,ow] or i64[4] [N,C,oh,ow]");
    refused("input x : f32[2,4,5,6]\nconst s : i64[4] = [2, 3, 7, 7]\ny = resize(x, s)\noutput y\n",
            "resize: the size input [2,3,...] changes N or C of x f32[2,4,5,6]");
    refused("input x : f32[2,4,5,6]\nconst s : i64[2] = [7, 0]\ny = resize(x, s)\noutput y\n",
            "resize: the size input gives [7,0]: expected sizes >= 1");
    refused("input x : f32[2,4,5,6]\nconst s : i64[2] = [7, 7]\ny = resize(x, s, size=[7, 7])\noutput y\n",
            "found more than one");
#undef BAD
}

/* ---------------------------------------------------------------- values */

/* Runs a model without inputs on ref and cpu; output k's values must be want[k]. */
static void values(const char *src, int nout, const float *const *want, const int *nwant)
{
    mge_graph *g = ug_parse(src);
    if (!g)
        return;
    static const char *const be[2] = {"ref", "cpu"};
    for (int b = 0; b < 2; b++)
        for (int threads = 1; threads <= 2; threads++) {
            ug_outs o = {0};
            ug_fill f = {0};
            if (!ug_run(g, be[b], threads, 1, f, &o))
                continue;
            CHECK(o.n == nout);
            for (int k = 0; k < o.n && k < nout; k++) {
                CHECK_MSG(mge_tensor_numel(&o.t[k]) == nwant[k], "%s output %d: %lld values", be[b], k,
                          (long long)mge_tensor_numel(&o.t[k]));
                for (int i = 0; i < nwant[k] && i < mge_tensor_numel(&o.t[k]); i++)
                    CHECK_MSG(fabs(((float *)o.t[k].data)[i] - want[k][i]) < 1e-6, "%s output %d [%d]: %g, expected %g",
                              be[b], k, i, ((float *)o.t[k].data)[i], want[k][i]);
            }
            ug_outs_free(&o);
        }
    mge_graph_free(g);
}

static void test_values(void)
{
    /* x = [[1, 2], [3, 4]] */
    static const float near[] = {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4};
    /* align_corners: out 3x3 interpolates the corners exactly */
    static const float alc[] = {1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4};
    /* align_corners=false, 2x: src = (o + 0.5) / 2 - 0.5 clamped at 0 */
    static const float bil[] = {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4};
    /* pad [1, 2] of row [1, 2, 3]: reflect, replicate, constant 9, crop */
    static const float refl[] = {2, 1, 2, 3, 2, 1}, repl[] = {1, 1, 2, 3, 3, 3}, cons[] = {9, 1, 2, 3, 9, 9};
    static const float crop[] = {2};
    const float *w[] = {near, alc, bil, refl, repl, cons, crop};
    int nw[] = {16, 9, 16, 6, 6, 6, 1};
    values("const x : f32[1,1,2,2] = [1, 2, 3, 4]\n"
           "const r : f32[1,3] = [1, 2, 3]\n"
           "a = resize(x, scales=[2, 2])\n"
           "b = resize(x, mode=bilinear, align_corners=true, size=[3, 3])\n"
           "c = resize(x, mode=bilinear, scales=[2, 2])\n"
           "d = pad(r, pads=[1, 2], mode=reflect)\n"
           "e = pad(r, pads=[1, 2], mode=replicate)\n"
           "f = pad(r, pads=[1, 2], value=9)\n"
           "g = pad(r, pads=[-1, -1])\n"
           "output a, b, c, d\n",
           4, w, nw);
    values("const r : f32[1,3] = [1, 2, 3]\n"
           "e = pad(r, pads=[1, 2], mode=replicate)\n"
           "f = pad(r, pads=[1, 2], value=9)\n"
           "g = pad(r, pads=[-1, -1])\n"
           "output e, f, g\n",
           3, w + 4, nw + 4);
    /* group_norm of one group [1, 3] (mean 2, var 1): -1, 1, scaled and shifted */
    static const float gn[] = {-1 * 2 + 0.5f, 1 * 2 + 0.5f};
    static const float rms[] = {1 / 2.2360680f, 3 / 2.2360680f}; /* sqrt(mean(1, 9)) = sqrt(5) */
    const float *w2[] = {gn, rms};
    int nw2[] = {2, 2};
    values("const x : f32[1,2,1] = [1, 3]\n"
           "const w : f32[2] = [2, 2]\n"
           "const b : f32[2] = [0.5, 0.5]\n"
           "const x2 : f32[1,2] = [1, 3]\n"
           "const w2 : f32[2] = [1, 1]\n"
           "y = group_norm(x, w, b, num_groups=1, eps=1e-30)\n"
           "z = rms_norm(x2, w2, eps=1e-30)\n"
           "output y, z\n",
           2, w2, nw2);
}

/* ---------------------------------------------------------------- gradients */

static void fd(const char *src, double tol)
{
    mge_graph *g = ug_parse(src);
    if (!g)
        return;
    double w = gc_check(g, mge_graph_find(g, "y"), NULL, tol, 0);
    CHECK_MSG(w < tol, "worst %g: %s", w, src);
    mge_graph_free(g);
}

static void test_grads(void)
{
    static const char *const rs[] = {"scales=[2, 2]", "mode=bilinear, scales=[1.5, 0.75]",
                                     "mode=bilinear, align_corners=true, size=[4, 7]", "size=[3, 8]",
                                     "mode=bilinear, size=[2, 2]", "scales=[0.5, 1.7]"};
    char src[256];
    for (size_t i = 0; i < sizeof rs / sizeof rs[0]; i++) {
        snprintf(src, sizeof src, "input x : f32[2,3,5,4]\ny = resize(x, %s)\noutput y\n", rs[i]);
        fd(src, 1e-2);
    }
    fd("input x : f32[2,3,5,4]\nconst s : i64[2] = [7, 3]\ny = resize(x, s, mode=bilinear)\noutput y\n", 1e-2);
    fd("input x : f32[1,2,5,4]\nconst s : i32[4] = [1, 2, 2, 9]\ny = resize(x, s)\noutput y\n", 1e-2);
    static const char *const ps[] = {"pads=[1, 2, 0, 3]", "pads=[-1, 2, 1, -2], value=3", "pads=[2, 3], mode=reflect",
                                     "pads=[1, 0, 2, 3], mode=reflect", "pads=[1, 3, 2, 0, 0, 1], mode=replicate",
                                     "pads=[4, 4], mode=replicate"};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
        snprintf(src, sizeof src, "input x : f32[2,3,4,5]\ny = pad(x, %s)\noutput y\n", ps[i]);
        fd(src, 1e-2);
    }
    fd("input x : f32[2,6,3,4]\ny = group_norm(x, num_groups=3)\noutput y\n", 1e-2);
    fd("input x : f32[3,4,7]\ny = group_norm(x, num_groups=1, eps=1e-3)\noutput y\n", 1e-2);
    fd("input x : f32[2,3,3,4]\ny = instance_norm(x)\noutput y\n", 1e-2);
    fd("input x : f32[2,3,9]\ny = instance_norm(x, affine=true)\noutput y\n", 1e-2);
    fd("input x : f32[3,8]\ny = rms_norm(x)\noutput y\n", 1e-2);
    fd("input x : f32[2,3,4]\ny = rms_norm(x, axis=1, eps=1e-3)\noutput y\n", 1e-2);
    fd("input x : f32[2,3,4,5]\ny = layernorm(x, axis=-3)\noutput y\n", 1e-2);
    /* through a chain: dy is not constant per group */
    fd("input x : f32[2,4,3,3]\nn = group_norm(x, num_groups=2)\nr = resize(n, mode=bilinear, scales=[2, 2])\n"
       "p = pad(r, pads=[1, 1, 1, 1], mode=reflect)\ny = tanh(p)\noutput y\n",
       1e-2);
    /* the gradient ops have none */
    mge_graph *g = ug_parse("input dy : f32[1,1,4,4]\ninput x : f32[1,1,2,2]\n"
                            "y = resize_grad(dy, x, scales=[2, 2])\noutput y\n");
    if (g) {
        int x = mge_graph_find(g, "dy"), gx = -1;
        CHECK(mge_grad_build_from(g, mge_graph_find(g, "y"), -1, 1, &x, &gx, &err) == MGE_ERR_UNSUPPORTED);
        CHECK_MSG(strstr(err.msg, "resize_grad has no gradient rule"), "%s", err.msg);
        mge_graph_free(g);
    }
}

int main(void)
{
    RUN(test_enum_words);
    RUN(test_enum_round_trip);
    RUN(test_symbolic);
    RUN(test_layernorm_last_k);
    RUN(test_errors);
    RUN(test_values);
    RUN(test_grads);
    return unit_done();
}
