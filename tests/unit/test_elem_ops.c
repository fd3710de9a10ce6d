/* test_elem_ops.c — the elementwise math ops of ops.def's group elem
 * (clamp ... sign, isnan/isinf, prelu; lib/op_unary.c, kernels/kact.h):
 * values at the edges PyTorch defines (round half to even, sign(0) and
 * sign(NaN) 0, clamp with min > max, softplus's threshold, ...) on the
 * ref and cpu backends, short and long (the vector loops); integer
 * inputs; shape inference and its errors; symbolic shapes at two
 * bindings; gradients against central differences (unary_grad, prelu_grad,
 * the weight's gradient summed over the broadcast dims). */
#include "internal.h"
#include "unit.h"
#include "unit_grad.h"
#include "unit_graph.h"

#include <math.h>

static mge_error err;
static mge_rng rng;

/* Runs op(x; attrs) on backend over n copies of the k values xs (a long
 * run reaches the vectorized loops and the pool) and checks every copy
 * against want (NaN matches NaN; rel 0 means bit for bit up to the sign
 * of zero, else |got - want| <= rel * max(1, |want|)). */
static void check_values(const char *backend, int op, int nattr, const mge_attr *at, int k, const float *xs,
                         const float *want, int64_t copies, double rel)
{
    mge_graph *g = mge_graph_new();
    int64_t n = k * copies;
    int x = mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 1, &n, &err);
    int y = node(g, "y", op, 1, &x, nattr, at);
    CHECK(y >= 0);
    if (y < 0) {
        mge_graph_free(g);
        return;
    }
    CHECK_OK(mge_graph_add_output(g, y, &err), err);
    mge_exec *e = NULL;
    mge_exec_opts o = {0};
    o.backend = backend;
    o.threads = 2;
    CHECK_OK(mge_exec_create(g, &o, &e, &err), err);
    mge_tensor in;
    CHECK_OK(mge_tensor_alloc(&in, MGE_F32, 1, &n, &err), err);
    for (int64_t i = 0; i < n; i++)
        ((float *)in.data)[i] = xs[i % k];
    const mge_tensor *ins[1] = {&in};
    if (e && mge_exec_run(e, ins, &err) == MGE_OK) {
        const mge_tensor *r = mge_exec_result(e, 0);
        int bad = 0;
        for (int64_t i = 0; i < n && bad < 3; i++) {
            double got = r->dtype == MGE_BOOL ? ((const uint8_t *)r->data)[i] : ((const float *)r->data)[i];
            double w = want[i % k];
            int ok = isnan(w) ? isnan(got) : got == w || (rel > 0 && fabs(got - w) <= rel * fmax(1.0, fabs(w)));
            if (!ok) {
                bad++;
                CHECK_MSG(0, "%s %s(%g) = %.9g, expected %.9g (element %lld of %lld)", backend,
                          mge_op_info(op)->name, (double)xs[i % k], got, w, (long long)i, (long long)n);
            }
        }
    } else {
        CHECK_MSG(0, "%s %s: %s", backend, mge_op_info(op)->name, err.msg);
    }
    mge_tensor_free(&in);
    mge_exec_free(e);
    mge_graph_free(g);
}

typedef struct vcase {
    int op;
    int nattr;
    mge_attr at[2];
    int k;
    float x[10], y[10];
    double rel;
} vcase;

static void test_values(void)
{
    const float inf = INFINITY, nan = NAN;
    const double e1 = exp(-1.0);
    vcase cs[] = {
        {MGE_OP_ROUND, 0, {{0}}, 10, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 2.4f, -2.6f, inf, nan},
         {0, 2, 2, -0.0f, -2, -2, 2, -3, inf, nan}, 0},
        {MGE_OP_FLOOR, 0, {{0}}, 6, {-0.5f, 0.5f, -2.0f, 3.7f, -inf, nan}, {-1, 0, -2, 3, -inf, nan}, 0},
        {MGE_OP_CEIL, 0, {{0}}, 6, {-0.5f, 0.5f, -2.0f, 3.2f, inf, nan}, {-0.0f, 1, -2, 4, inf, nan}, 0},
        {MGE_OP_SIGN, 0, {{0}}, 7, {-3, 0.0f, -0.0f, 2, nan, inf, -inf}, {-1, 0, 0, 1, 0, 1, -1}, 0},
        {MGE_OP_CLAMP, 2, {A_f(MGE_KEY_min, -1), A_f(MGE_KEY_max, 2)}, 6, {-5, -1, 0.5f, 2, 7, nan},
         {-1, -1, 0.5f, 2, 2, nan}, 0},
        {MGE_OP_CLAMP, 1, {A_f(MGE_KEY_min, 0.5)}, 4, {-5, 0.25f, 9, -inf}, {0.5f, 0.5f, 9, 0.5f}, 0},
        {MGE_OP_CLAMP, 1, {A_f(MGE_KEY_max, 0.5)}, 4, {-5, 0.25f, 9, inf}, {-5, 0.25f, 0.5f, 0.5f}, 0},
        /* min > max: every element is max (torch.clamp) */
        {MGE_OP_CLAMP, 2, {A_f(MGE_KEY_min, 3), A_f(MGE_KEY_max, 1)}, 3, {-5, 2, 9}, {1, 1, 1}, 0},
        {MGE_OP_HARDTANH, 0, {{0}}, 5, {-5, -0.5f, 0.5f, 5, nan}, {-1, -0.5f, 0.5f, 1, nan}, 0},
        {MGE_OP_SOFTPLUS, 0, {{0}}, 5, {0, 30, -200, inf, nan}, {(float)log(2.0), 30, 0, inf, nan}, 1e-6},
        {MGE_OP_SOFTPLUS, 2, {A_f(MGE_KEY_beta, 2), A_f(MGE_KEY_threshold, 1)}, 3, {0.6f, 0.4f, -1},
         {0.6f, (float)(log1p(exp(0.8)) / 2), (float)(log1p(exp(-2.0)) / 2)}, 1e-6},
        {MGE_OP_ELU, 0, {{0}}, 5, {-1, 0, 2, -inf, nan}, {(float)(e1 - 1), 0, 2, -1, nan}, 1e-6},
        {MGE_OP_ELU, 1, {A_f(MGE_KEY_alpha, 0.5)}, 2, {-1, -inf}, {(float)(0.5 * (e1 - 1)), -0.5f}, 1e-6},
        {MGE_OP_SELU, 0, {{0}}, 3, {-1, 0, 2},
         {(float)(1.7580993408473768 * (e1 - 1)), 0, (float)(2 * 1.0507009873554805)}, 1e-6},
        {MGE_OP_MISH, 0, {{0}}, 5, {0, 1, 100, -100, nan},
         {0, (float)tanh(log1p(exp(1.0))), 100, (float)(-100 * tanh(log1p(exp(-100.0)))), nan}, 1e-6},
        {MGE_OP_SOFTSIGN, 0, {{0}}, 4, {0, 1, -3, nan}, {0, 0.5f, -0.75f, nan}, 1e-7},
        {MGE_OP_ERF, 0, {{0}}, 4, {0, 1, -inf, nan}, {0, (float)erf(1.0), -1, nan}, 1e-6},
        {MGE_OP_RSQRT, 0, {{0}}, 5, {4, 0.0f, -0.0f, -1, inf}, {0.5f, inf, -inf, nan, 0}, 1e-7},
        {MGE_OP_RECIPROCAL, 0, {{0}}, 4, {4, 0.0f, -0.0f, inf}, {0.25f, inf, -inf, 0}, 1e-7},
        {MGE_OP_SQUARE, 0, {{0}}, 4, {3, -0.5f, 1e20f, nan}, {9, 0.25f, inf, nan}, 1e-7},
        {MGE_OP_SIN, 0, {{0}}, 3, {0, 1, inf}, {0, (float)sin(1.0), nan}, 1e-6},
        {MGE_OP_COS, 0, {{0}}, 3, {0, 1, -inf}, {1, (float)cos(1.0), nan}, 1e-6},
        {MGE_OP_ISNAN, 0, {{0}}, 5, {0, nan, inf, -inf, 1}, {0, 1, 0, 0, 0}, 0},
        {MGE_OP_ISINF, 0, {{0}}, 5, {0, nan, inf, -inf, 1}, {0, 0, 1, 1, 0}, 0},
        /* extra math: values at the domain's ends and past them (NaN, as numpy) */
        {MGE_OP_ACOS, 0, {{0}}, 5, {0, 1, -1, 2, nan}, {(float)(M_PI / 2), 0, (float)M_PI, nan, nan}, 1e-6},
        {MGE_OP_ACOSH, 0, {{0}}, 4, {1, 2, 0.5f, inf}, {0, (float)acosh(2.0), nan, inf}, 1e-6},
        {MGE_OP_ASIN, 0, {{0}}, 4, {0, 1, 0.5f, -2}, {0, (float)(M_PI / 2), (float)asin(0.5), nan}, 1e-6},
        {MGE_OP_ASINH, 0, {{0}}, 3, {0, 1, -inf}, {0, (float)asinh(1.0), -inf}, 1e-6},
        {MGE_OP_ATAN, 0, {{0}}, 4, {0, 1, inf, -inf}, {0, (float)(M_PI / 4), (float)(M_PI / 2), (float)(-M_PI / 2)}, 1e-6},
        {MGE_OP_ATANH, 0, {{0}}, 5, {0, 0.5f, 1, -1, 2}, {0, (float)atanh(0.5), inf, -inf, nan}, 1e-6},
        {MGE_OP_COSH, 0, {{0}}, 4, {0, 1, -inf, 100}, {1, (float)cosh(1.0), inf, inf}, 1e-6},
        {MGE_OP_SINH, 0, {{0}}, 4, {0, 1, -inf, -100}, {0, (float)sinh(1.0), -inf, -inf}, 1e-6},
        /* shrink: hardshrink by default (lambd 0.5, shift 0); NaN falls in the middle (0, as ONNX's where) */
        {MGE_OP_SHRINK, 0, {{0}}, 6, {-1, -0.5f, 0.2f, 0.5f, 0.7f, nan}, {-1, 0, 0, 0, 0.7f, 0}, 0},
        {MGE_OP_SHRINK, 2, {A_f(MGE_KEY_lambd, 1), A_f(MGE_KEY_shift, 1)}, 4, {-3, 0.5f, 2, -inf}, {-2, 0, 1, -inf}, 0},
    };
    const char *backends[] = {"ref", "cpu"};
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++)
        for (int b = 0; b < 2; b++)
            for (int64_t copies = 1; copies <= 9001; copies += 9000)
                check_values(backends[b], cs[c].op, cs[c].nattr, cs[c].at, cs[c].k, cs[c].x, cs[c].y, copies,
                             cs[c].rel);
}

/* sign, square and clamp on integers (square wraps, as PyTorch). */
static void test_integers(void)
{
    mge_graph *g = ug_parse("input x : i32[4]\ns = sign(x)\nq = square(x)\nn = cast(q, dtype=i64)\n"
                            "input z : i8[2]\nz2 = square(z)\nc = clamp(x, min=-2, max=6)\n"
                            "output s\noutput q\noutput z2\noutput c\n");
    if (!g)
        return;
    mge_exec *e = NULL;
    CHECK_OK(mge_exec_create(g, NULL, &e, &err), err);
    int64_t d4 = 4, d2 = 2;
    mge_tensor x, z;
    CHECK_OK(mge_tensor_alloc(&x, MGE_I32, 1, &d4, &err), err);
    CHECK_OK(mge_tensor_alloc(&z, MGE_I8, 1, &d2, &err), err);
    int32_t xv[4] = {-7, 0, 5, 65536};
    int8_t zv[2] = {-12, 3};
    memcpy(x.data, xv, sizeof xv);
    memcpy(z.data, zv, sizeof zv);
    const mge_tensor *ins[2];
    for (int i = 0; e && i < mge_exec_ninputs(e); i++)
        ins[i] = strcmp(g->values[mge_exec_input(e, i)].name, "x") == 0 ? &x : &z;
    if (e && mge_exec_run(e, ins, &err) == MGE_OK) {
        const int32_t *s = mge_exec_result(e, 0)->data, *q = mge_exec_result(e, 1)->data;
        const int8_t *z2 = mge_exec_result(e, 2)->data;
        CHECK(s[0] == -1 && s[1] == 0 && s[2] == 1 && s[3] == 1);
        CHECK(q[0] == 49 && q[1] == 0 && q[2] == 25 && q[3] == 0);   /* 2^32 wraps to 0 */
        CHECK_MSG(z2[0] == (int8_t)144 && z2[1] == 9, "%d %d", z2[0], z2[1]);
        const int32_t *cl = mge_exec_result(e, 3)->data;
        CHECK(mge_exec_result(e, 3)->dtype == MGE_I32);
        CHECK_MSG(cl[0] == -2 && cl[1] == 0 && cl[2] == 5 && cl[3] == 6, "%d %d %d %d", cl[0], cl[1], cl[2], cl[3]);
    } else {
        CHECK_MSG(0, "%s", err.msg);
    }
    mge_tensor_free(&x);
    mge_tensor_free(&z);
    mge_exec_free(e);
    mge_graph_free(g);
}

/* Each line must fail to parse or plan with an error naming `want`. */
static void test_infer_errors(void)
{
    static const struct {
        const char *src, *want;
    } cs[] = {
        {"input x : f32[3]\ny = clamp(x)\noutput y\n", "clamp: needs min, max or both"},
        {"input x : f32[3]\ny = hardtanh(x, min=2, max=1)\noutput y\n", "hardtanh: min=2 > max=1"},
        {"input x : f32[3]\ny = softplus(x, beta=0)\noutput y\n", "softplus: beta=0"},
        {"input x : i32[3]\ny = isnan(x)\noutput y\n", "isnan: x is i32[3]: expected a float dtype"},
        {"input x : i32[3]\ny = elu(x)\noutput y\n", "elu: x is i32[3]: expected a float dtype"},
        {"input x : u8[3]\ny = sign(x)\noutput y\n", "sign: x is u8[3]"},
        {"input x : i32[3]\ny = clamp(x, min=0.5)\noutput y\n", "clamp: min=0.5 on i32: expected an integer"},
        {"input x : i8[3]\ny = clamp(x, max=300)\noutput y\n", "clamp: max=300 on i8: expected an integer"},
        {"input x : u8[3]\ny = clamp(x, max=3)\noutput y\n", "clamp: x is u8[3]: expected a float dtype"},
        {"input x : f32[2,4,3]\ny = prelu(x, num=3)\noutput y\n", "prelu: num=3 but x is f32[2,4,3]"},
        {"input x : f32[4]\ny = prelu(x, num=4)\noutput y\n", "expected num 1 or x's dim 1"},
        {"input x : f32[2,4]\ny = prelu(x, num=0)\noutput y\n", "prelu: num=0"},
        {"input x : f32[2,4]\nparam w : f32[3]\ny = prelu(x, w, num=4)\noutput y\n",
         "prelu: weight is f32[3]: expected f32[4] (num=4)"},
        {"input x : f32[2,4]\ny = fused_elemwise(x, ops=[softplus])\noutput y\n", "ops entry 0 is softplus"},
        {"input x : f32[2,4]\ny = fused_elemwise(x, ops=[isnan])\noutput y\n", "ops entry 0 is isnan"},
        {"input x : f32[2,4]\ninput t : f32[2,4]\ny = unary_grad(x, t, act=add)\noutput y\n",
         "unary_grad: act=add: expected an op of the activation table"},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        mge_graph *g = NULL;
        mge_error e;
        mge_error_clear(&e);
        mge_status s = mge_text_parse(cs[i].src, strlen(cs[i].src), ".", &g, &e);
        CHECK_MSG(s != MGE_OK && strstr(e.msg, cs[i].want) != NULL, "case %zu: status %d, '%s', expected '%s'", i,
                  (int)s, e.msg, cs[i].want);
        mge_graph_free(g);
    }
}

static const char *sym_src = "input x : f32[N,S,8]\n"
                             "a = clamp(x, min=-1)\n"
                             "b = softplus(a, beta=2)\n"
                             "c = mish(b)\n"
                             "d = round(c)\n"
                             "m = isinf(d)\n"
                             "p = prelu(x, num=1)\n"
                             "e = elu(p, alpha=0.5)\n"
                             "output e\noutput m\n";

static void test_symbolic(void)
{
    mge_graph *g = ug_parse(sym_src);
    if (!g)
        return;
    const char *names[] = {"a", "b", "c", "d", "m", "p", "e"};
    int64_t S = 0;
    CHECK_OK(mge_dim_symbol("S", 1, &S, &err), err);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const mge_value *v = &g->values[mge_graph_find(g, names[i])];
        char b0[32], b1[32];
        CHECK_MSG(v->ndim == 3 && v->dims[0] == MGE_DIM_N && v->dims[1] == S && v->dims[2] == 8,
                  "%s: [%s,%s,...]", names[i], mge_dim_str(v->dims[0], b0, sizeof b0),
                  mge_dim_str(v->dims[1], b1, sizeof b1));
        CHECK(v->dtype == (strcmp(names[i], "m") == 0 ? MGE_BOOL : MGE_F32));
    }
    for (int k = 0; k < 2; k++) {
        mge_binding b = {0};
        CHECK_OK(mge_binding_set(&b, MGE_DIM_N, k ? 1 : 3, &err), err);
        CHECK_OK(mge_binding_set(&b, S, k ? 7 : 2, &err), err);
        int *nd = calloc((size_t)g->nvalues, sizeof *nd);
        int64_t *dims = calloc((size_t)g->nvalues * MGE_MAX_DIMS, sizeof *dims);
        CHECK_OK(mge_graph_shapes(g, &b, nd, dims, &err), err);
        int v = mge_graph_find(g, "e");
        CHECK(nd[v] == 3 && dims[v * MGE_MAX_DIMS] == (k ? 1 : 3) && dims[v * MGE_MAX_DIMS + 1] == (k ? 7 : 2) &&
              dims[v * MGE_MAX_DIMS + 2] == 8);
        free(nd);
        free(dims);
    }
    mge_graph_free(g);
}

/* ---------------------------------------------------------------- gradients */

static float urand(float lo, float hi)
{
    return lo + (hi - lo) * mge_rng_uniform(&rng);
}

/* A param f32 of dims with values in [lo, hi], 0.02 away from the kinks. */
static int fd_param(mge_graph *g, const char *name, int nd, const int64_t *dims, float lo, float hi,
                    const float *kinks, int nk)
{
    mge_tensor *t = calloc(1, sizeof *t);
    CHECK_OK(mge_tensor_alloc(t, MGE_F32, nd, dims, &err), err);
    for (int64_t i = 0; i < mge_tensor_numel(t); i++) {
        float v;
        int ok;
        do {
            v = urand(lo, hi);
            ok = 1;
            for (int k = 0; k < nk; k++)
                ok &= fabsf(v - kinks[k]) >= 0.02f;
        } while (!ok);
        ((float *)t->data)[i] = v;
    }
    int id = mge_graph_add_value(g, name, MGE_VAL_PARAM, MGE_F32, nd, dims, &err);
    CHECK_MSG(id >= 0, "%s", err.msg);
    if (id >= 0)
        g->values[id].data = t;
    return id;
}

typedef struct fdcase {
    int op;
    float lo, hi;
    float kinks[2];
    int nk;
    int nattr;
    mge_attr at[2];
} fdcase;

static void test_fd(void)
{
    const fdcase cs[] = {
        {MGE_OP_CLAMP, -2, 2, {-0.5f, 1}, 2, 2, {A_f(MGE_KEY_min, -0.5), A_f(MGE_KEY_max, 1)}},
        {MGE_OP_CLAMP, -2, 2, {0.3f}, 1, 1, {A_f(MGE_KEY_max, 0.3)}},
        {MGE_OP_HARDTANH, -2, 2, {-1, 1}, 2, 0, {{0}}},
        {MGE_OP_SOFTPLUS, -3, 3, {0}, 0, 0, {{0}}},
        {MGE_OP_SOFTPLUS, -3, 3, {1.5f}, 1, 2, {A_f(MGE_KEY_beta, 2), A_f(MGE_KEY_threshold, 3)}},
        {MGE_OP_ELU, -3, 3, {0}, 1, 1, {A_f(MGE_KEY_alpha, 0.7)}},
        {MGE_OP_SELU, -3, 3, {0}, 1, 0, {{0}}},
        {MGE_OP_MISH, -4, 4, {0}, 0, 0, {{0}}},
        {MGE_OP_SOFTSIGN, -3, 3, {0}, 1, 0, {{0}}},
        {MGE_OP_ERF, -2, 2, {0}, 0, 0, {{0}}},
        {MGE_OP_RSQRT, 0.3f, 3, {0}, 0, 0, {{0}}},
        {MGE_OP_RECIPROCAL, 0.3f, 3, {0}, 0, 0, {{0}}},
        {MGE_OP_SQUARE, -2, 2, {0}, 0, 0, {{0}}},
        {MGE_OP_SIN, -3, 3, {0}, 0, 0, {{0}}},
        {MGE_OP_COS, -3, 3, {0}, 0, 0, {{0}}},
        /* zero gradients (PyTorch's), away from the jumps */
        {MGE_OP_FLOOR, -3, 3, {-2, -1}, 2, 0, {{0}}},
        {MGE_OP_CEIL, -0.9f, 0.9f, {0}, 1, 0, {{0}}},
        {MGE_OP_ROUND, -0.4f, 0.4f, {0}, 0, 0, {{0}}},
        {MGE_OP_SIGN, -2, 2, {0}, 1, 0, {{0}}},
        /* extra math, inside the domains */
        {MGE_OP_ACOS, -0.9f, 0.9f, {0}, 0, 0, {{0}}},
        {MGE_OP_ACOSH, 1.2f, 3, {0}, 0, 0, {{0}}},
        {MGE_OP_ASIN, -0.9f, 0.9f, {0}, 0, 0, {{0}}},
        {MGE_OP_ASINH, -3, 3, {0}, 0, 0, {{0}}},
        {MGE_OP_ATAN, -3, 3, {0}, 0, 0, {{0}}},
        {MGE_OP_ATANH, -0.9f, 0.9f, {0}, 0, 0, {{0}}},
        {MGE_OP_COSH, -2, 2, {0}, 0, 0, {{0}}},
        {MGE_OP_SINH, -2, 2, {0}, 0, 0, {{0}}},
        {MGE_OP_SHRINK, -2, 2, {-0.5f, 0.5f}, 2, 2, {A_f(MGE_KEY_lambd, 0.5), A_f(MGE_KEY_shift, 0.3)}},
    };
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++)
        for (int rep = 0; rep < 2; rep++) {
            int64_t dims[3] = {1 + (int64_t)(mge_rng_next(&rng) % 4), 1 + (int64_t)(mge_rng_next(&rng) % 5), 3};
            mge_graph *g = mge_graph_new();
            int x = fd_param(g, "x", 3, dims, cs[c].lo, cs[c].hi, cs[c].kinks, cs[c].nk);
            int y = node(g, "y", cs[c].op, 1, &x, cs[c].nattr, cs[c].at);
            double w = gc_check(g, y, NULL, 1e-2, 0);
            CHECK_MSG(w <= 1e-2, "%s rep %d: worst %g", mge_op_info(cs[c].op)->name, rep, w);
            /* the rule emits the generic unary_grad */
            int R = mge_graph_add_value(g, "R", MGE_VAL_INPUT, MGE_F32, 3, dims, &err), gx = -1;
            CHECK_OK(mge_grad_build_from(g, y, R, 1, &x, &gx, &err), err);
            CHECK(gx >= 0 && g->nodes[g->values[gx].producer].op == MGE_OP_UNARY_GRAD);
            mge_graph_free(g);
        }
    /* prelu: one weight and one per channel, into x and into the weight */
    for (int rep = 0; rep < 4; rep++) {
        int64_t dims[4] = {2, 1 + (int64_t)(mge_rng_next(&rng) % 4), 3, 2};
        int64_t num = rep & 1 ? dims[1] : 1;
        mge_graph *g = mge_graph_new();
        int in[2] = {fd_param(g, "x", 4, dims, -2, 2, (const float[]){0}, 1),
                     fd_param(g, "w", 1, &num, -1, 1, NULL, 0)};
        mge_attr at = A(MGE_KEY_num, num);
        int y = node(g, "y", MGE_OP_PRELU, 2, in, 1, &at);
        double w = gc_check(g, y, NULL, 1e-2, 0);
        CHECK_MSG(w <= 1e-2, "prelu num=%lld: worst %g", (long long)num, w);
        mge_graph_free(g);
    }
}

/* isnan/isinf have no gradient: autodiff says so, naming the op. */
static void test_no_grad(void)
{
    mge_graph *g = mge_graph_new();
    int64_t d = 3;
    int x = mge_graph_add_value(g, "x", MGE_VAL_PARAM, MGE_F32, 1, &d, &err);
    int y = un(g, "y", MGE_OP_ISNAN, x);
    int dy = y, dx = -1;
    char want = 1;
    mge_error_clear(&err);
    CHECK(mge_op_grad_fn(MGE_OP_ISNAN)(g, g->values[y].producer, &dy, &want, &dx, &err) == MGE_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "isnan (its output is bool)") != NULL, "%s", err.msg);
    mge_graph_free(g);
}

/* prelu creates NODE.weight f32[num] = 0.25 when not given. */
static void test_prelu_layer(void)
{
    mge_graph *g = ug_parse("input x : f32[N,3,4]\ny = prelu(x, num=3)\noutput y\n");
    if (!g)
        return;
    int w = mge_graph_find(g, "y.weight");
    CHECK_MSG(w >= 0, "no y.weight");
    if (w >= 0) {
        const mge_value *v = &g->values[w];
        CHECK(v->kind == MGE_VAL_PARAM && v->ndim == 1 && v->dims[0] == 3);
        CHECK_OK(mge_graph_init_params(g, 1, &err), err);
        const float *p = v->data ? v->data->data : NULL;
        CHECK(p && p[0] == 0.25f && p[2] == 0.25f);
    }
    mge_graph_free(g);
}

int main(int argc, char **argv)
{
    (void)argc;
    mge_rng_seed(&rng, 20261202);
    RUN(test_values);
    RUN(test_integers);
    RUN(test_infer_errors);
    RUN(test_symbolic);
    RUN(test_fd);
    RUN(test_no_grad);
    RUN(test_prelu_layer);
    return unit_rerun_baseline(argv, "test_elem_ops", unit_done());
}
