/* test_emath.c — the emath ops (ops.def's extra math block) on ref and cpu
 * against values worked out by hand or by a direct formula here: the
 * bitwise ops and shifts at the dtype edges, det (singular, 0x0, batched),
 * eye_like, lrn, dft (real, complex, padded, cut, onesided, inverse); the
 * gradients of det, lrn and dft against central differences; and the
 * shape and dtype errors. */
#include "internal.h"
#include "unit.h"
#include "unit_grad.h"
#include "unit_graph.h"

#include <math.h>
#include <string.h>

static mge_error err;

/* Runs the one-output graph src on backend with inputs ins (in the graph's
 * input order) into *y (a copy). 0 on failure (checked). */
static int run1(const char *src, const char *backend, const mge_tensor *const *ins, mge_tensor *y)
{
    mge_graph *g = ug_parse(src);
    if (!g)
        return 0;
    mge_exec *e = NULL;
    mge_exec_opts o = {0};
    o.backend = backend;
    int ok = 0;
    if (mge_exec_create(g, &o, &e, &err) == MGE_OK && mge_exec_run(e, ins, &err) == MGE_OK) {
        CHECK_OK(mge_tensor_copy(y, mge_exec_result(e, 0), &err), err);
        ok = 1;
    } else {
        CHECK_MSG(0, "%s: %s", backend, err.msg);
    }
    mge_exec_free(e);
    mge_graph_free(g);
    return ok;
}

static void tensor(mge_tensor *t, mge_dtype dt, int nd, const int64_t *d, const void *data)
{
    CHECK_OK(mge_tensor_alloc(t, dt, nd, d, &err), err);
    memcpy(t->data, data, mge_tensor_numel(t) * mge_dtype_size(dt));
}

static const char *const backends[2] = {"ref", "cpu"};

static void test_bitwise(void)
{
    int64_t d3 = 3, d1 = 1;
    uint8_t ua[3] = {0xF0, 0x0F, 0xFF}, ub[1] = {0x3C};
    int8_t sa[3] = {-128, -1, 127}, sb[3] = {1, 7, 9};
    mge_tensor a, b, c, e, y;
    tensor(&a, MGE_U8, 1, &d3, ua);
    tensor(&b, MGE_U8, 1, &d1, ub);
    tensor(&c, MGE_I8, 1, &d3, sa);
    tensor(&e, MGE_I8, 1, &d3, sb);
    static const struct {
        const char *src;
        int i8;
        int8_t want[3];
    } cs[] = {
        {"input a : u8[3]\ninput b : u8[1]\ny = bitwise_and(a, b)\noutput y\n", 0, {0x30, 0x0C, 0x3C}},
        {"input a : u8[3]\ninput b : u8[1]\ny = bitwise_or(a, b)\noutput y\n", 0, {(int8_t)0xFC, 0x3F, (int8_t)0xFF}},
        {"input a : u8[3]\ninput b : u8[1]\ny = bitwise_xor(b, a)\noutput y\n", 0, {(int8_t)0xCC, 0x33, (int8_t)0xC3}},
        {"input a : u8[3]\ny = bitwise_not(a)\noutput y\n", 0, {0x0F, (int8_t)0xF0, 0}},
        /* 0x3C << 0xF0 (240 >= 8 bits): every bit out */
        {"input a : u8[3]\ninput b : u8[1]\ny = shift_left(b, a)\noutput y\n", 0, {0, 0, 0}},
        {"input a : u8[3]\ninput b : u8[1]\ny = shift_right(a, b)\noutput y\n", 0, {0, 0, 0}},
        /* signed: << wraps in the width, >> is arithmetic; 9 >= 8 bits shifts everything out */
        {"input a : i8[3]\ninput b : i8[3]\ny = shift_left(a, b)\noutput y\n", 1, {0, -128, 0}},
        {"input a : i8[3]\ninput b : i8[3]\ny = shift_right(a, b)\noutput y\n", 1, {-64, -1, 0}},
        {"input a : i8[3]\ny = bitwise_not(a)\noutput y\n", 1, {127, 0, -128}},
    };
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++)
        for (int be = 0; be < 2; be++) {
            const mge_tensor *ins[2] = {cs[k].i8 ? &c : &a, cs[k].i8 ? &e : &b};   /* declaration order */
            if (!run1(cs[k].src, backends[be], ins, &y))
                continue;
            for (int i = 0; i < 3; i++)
                CHECK_MSG(((int8_t *)y.data)[i] == cs[k].want[i], "case %zu %s [%d]: got %d, want %d", k,
                          backends[be], i, ((int8_t *)y.data)[i], cs[k].want[i]);
            mge_tensor_free(&y);
        }
    /* u8 shift right: logical; a shift right by 3 of 0xF0 is 0x1E */
    uint8_t cnt[1] = {3};
    mge_tensor s3;
    tensor(&s3, MGE_U8, 1, &d1, cnt);
    const mge_tensor *ins[2] = {&a, &s3};
    if (run1("input a : u8[3]\ninput b : u8[1]\ny = shift_right(a, b)\noutput y\n", "ref", ins, &y)) {
        CHECK(((uint8_t *)y.data)[0] == 0x1E && ((uint8_t *)y.data)[1] == 0x01 && ((uint8_t *)y.data)[2] == 0x1F);
        mge_tensor_free(&y);
    }
    /* i64: the top bit */
    int64_t la[2] = {1, INT64_MIN}, lb[2] = {63, 63};
    int64_t d2 = 2;
    mge_tensor l1, l2;
    tensor(&l1, MGE_I64, 1, &d2, la);
    tensor(&l2, MGE_I64, 1, &d2, lb);
    const mge_tensor *lins[2] = {&l1, &l2};
    if (run1("input a : i64[2]\ninput b : i64[2]\ny = shift_left(a, b)\noutput y\n", "cpu", lins, &y)) {
        CHECK(((int64_t *)y.data)[0] == INT64_MIN && ((int64_t *)y.data)[1] == 0);
        mge_tensor_free(&y);
    }
    if (run1("input a : i64[2]\ninput b : i64[2]\ny = shift_right(a, b)\noutput y\n", "cpu", lins, &y)) {
        CHECK(((int64_t *)y.data)[0] == 0 && ((int64_t *)y.data)[1] == -1);
        mge_tensor_free(&y);
    }
    mge_tensor_free(&a), mge_tensor_free(&b), mge_tensor_free(&c), mge_tensor_free(&e), mge_tensor_free(&s3);
    mge_tensor_free(&l1), mge_tensor_free(&l2);
}

static void test_det_eye(void)
{
    /* [2, 3, 3]: a permutation-heavy one (det -3 by expansion) and a singular one */
    float m[18] = {0, 2, 1, 1, 0, 0, 0, 1, 3,   /* det = -(2*3 - 1*1) = -5 */
                   1, 2, 3, 2, 4, 6, 0, 1, 1};  /* row 2 = 2 * row 1 */
    int64_t d[3] = {2, 3, 3};
    mge_tensor x, y;
    tensor(&x, MGE_F32, 3, d, m);
    const mge_tensor *ins[1] = {&x};
    for (int be = 0; be < 2; be++)
        if (run1("input x : f32[2,3,3]\ny = det(x)\noutput y\n", backends[be], ins, &y)) {
            CHECK(y.ndim == 1 && y.dims[0] == 2);
            CHECK_MSG(fabsf(((float *)y.data)[0] + 5) < 1e-6f && ((float *)y.data)[1] == 0, "%g %g",
                      ((float *)y.data)[0], ((float *)y.data)[1]);
            mge_tensor_free(&y);
        }
    mge_tensor_free(&x);
    /* 0x0: the empty product */
    int64_t d0[2] = {0, 0};
    CHECK_OK(mge_tensor_alloc(&x, MGE_F32, 2, d0, &err), err);
    if (run1("input x : f32[0,0]\ny = det(x)\noutput y\n", "ref", ins, &y)) {
        CHECK(y.ndim == 0 && ((float *)y.data)[0] == 1);
        mge_tensor_free(&y);
    }
    mge_tensor_free(&x);
    /* eye_like: k above and below, a dtype of its own */
    int64_t de[2] = {3, 4};
    CHECK_OK(mge_tensor_alloc(&x, MGE_F32, 2, de, &err), err);
    if (run1("input x : f32[3,4]\ny = eye_like(x, k=1, dtype=i64)\noutput y\n", "cpu", ins, &y)) {
        CHECK(y.dtype == MGE_I64);
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++)
                CHECK(((int64_t *)y.data)[i * 4 + j] == (j == i + 1));
        mge_tensor_free(&y);
    }
    if (run1("input x : f32[3,4]\ny = eye_like(x, k=-2)\noutput y\n", "ref", ins, &y)) {
        CHECK(y.dtype == MGE_F32);
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++)
                CHECK(((float *)y.data)[i * 4 + j] == (j == i - 2));
        mge_tensor_free(&y);
    }
    mge_tensor_free(&x);
}

static void test_lrn_dft(void)
{
    /* lrn over 4 channels at one position, size 2: the window of c is c .. c+1 */
    float xv[4] = {1, 2, -3, 0.5f};
    int64_t d[4] = {1, 4, 1, 1};
    mge_tensor x, y;
    tensor(&x, MGE_F32, 4, d, xv);
    const mge_tensor *ins[1] = {&x};
    if (run1("input x : f32[1,4,1,1]\ny = lrn(x, size=2, alpha=0.5, beta=0.75, shift=2)\noutput y\n", "cpu", ins,
             &y)) {
        for (int c = 0; c < 4; c++) {
            double s = xv[c] * xv[c] + (c + 1 < 4 ? xv[c + 1] * xv[c + 1] : 0);
            double want = xv[c] / pow(2 + 0.5 / 2 * s, 0.75);
            CHECK_MSG(fabs(((float *)y.data)[c] - want) < 1e-6, "lrn c %d: %g vs %g", c, ((float *)y.data)[c], want);
        }
        mge_tensor_free(&y);
    }
    mge_tensor_free(&x);
    /* dft of a complex [1, 5, 2] signal padded to 8, onesided, and inverse: the sums written out */
    float sv[10] = {1, 0, 0.5f, -1, -2, 0.25f, 0, 3, 1.5f, 1};
    int64_t ds[3] = {1, 5, 2};
    tensor(&x, MGE_F32, 3, ds, sv);
    static const char *srcs[3] = {
        "input x : f32[1,5,2]\ny = dft(x, axis=1, length=8)\noutput y\n",
        "input x : f32[1,5,2]\ny = dft(x, axis=1, length=3, onesided=true)\noutput y\n",
        "input x : f32[1,5,2]\ny = dft(x, axis=1, inverse=true)\noutput y\n",
    };
    static const int64_t lens[3] = {8, 3, 5}, nouts[3] = {8, 2, 5};
    for (int k = 0; k < 3; k++)
        for (int be = 0; be < 2; be++) {
            if (!run1(srcs[k], backends[be], ins, &y))
                continue;
            CHECK(y.ndim == 3 && y.dims[1] == nouts[k] && y.dims[2] == 2);
            double sg = k == 2 ? 1 : -1, sc = k == 2 ? 1.0 / 5 : 1;
            for (int64_t f = 0; f < nouts[k] && y.ndim == 3 && y.dims[1] == nouts[k]; f++) {
                double re = 0, im = 0;
                for (int64_t j = 0; j < 5 && j < lens[k]; j++) {
                    double a = sg * 2 * M_PI * (double)(j * f) / (double)lens[k];
                    re += sv[2 * j] * cos(a) - sv[2 * j + 1] * sin(a);
                    im += sv[2 * j] * sin(a) + sv[2 * j + 1] * cos(a);
                }
                const float *o = (const float *)y.data + 2 * f;
                CHECK_MSG(fabs(o[0] - re * sc) < 1e-5 && fabs(o[1] - im * sc) < 1e-5, "dft case %d bin %lld: %g %g vs %g %g",
                          k, (long long)f, o[0], o[1], re * sc, im * sc);
            }
            mge_tensor_free(&y);
        }
    mge_tensor_free(&x);
}

/* gc_check of op(x, attrs) over a fresh f32 x of dims. */
static void fd(int op, int nd, const int64_t *d, int nattr, const mge_attr *at, const char *what)
{
    mge_graph *g = mge_graph_new();
    int x = mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, nd, d, &err);
    int y = node(g, "y", op, 1, &x, nattr, at);
    CHECK_MSG(y >= 0, "%s", what);
    if (y >= 0) {
        double w = gc_check(g, y, NULL, 1e-2, 0);
        CHECK_MSG(w < 1e-2, "%s: worst %g", what, w);
    }
    mge_graph_free(g);
}

static void test_grads(void)
{
    for (int64_t k = 1; k <= 4; k++) {
        int64_t d[3] = {2, k, k};
        fd(MGE_OP_DET, 3, d, 0, NULL, "det");
    }
    static const int64_t sizes[] = {1, 2, 3, 5};
    for (size_t i = 0; i < 4; i++) {
        int64_t d[4] = {2, 5, 3, 2};
        mge_attr at[4] = {A_ints(MGE_KEY_size, 1, &sizes[i]), A_f(MGE_KEY_alpha, 0.4), A_f(MGE_KEY_beta, 0.75),
                          A_f(MGE_KEY_shift, 1.5)};
        fd(MGE_OP_LRN, 4, d, 4, at, "lrn");
    }
    for (int cx = 1; cx <= 2; cx++)
        for (int v = 0; v < 4; v++) {
            int64_t d[4] = {2, 6, 3, cx}, ax = v % 2 ? 2 : 1;
            mge_attr at[4] = {A_ints(MGE_KEY_axis, 1, &ax), A(MGE_KEY_inverse, v == 2), A(MGE_KEY_onesided, v == 1),
                              A(MGE_KEY_length, v == 3 ? 4 : 7)};
            fd(MGE_OP_DFT, 4, d, 4, at, cx == 1 ? "dft of a real signal" : "dft of a complex signal");
        }
}

/* Each line fails to parse or plan with an error naming `want`. */
static void test_errors(void)
{
    static const struct {
        const char *src, *want;
    } cs[] = {
        {"input a : u8[3]\ninput b : i8[3]\ny = bitwise_and(a, b)\noutput y\n", "expected one integer dtype"},
        {"input a : f32[3]\ny = bitwise_not(a)\noutput y\n", "expected an integer dtype"},
        {"input a : i32[3]\ninput b : i32[2]\ny = shift_left(a, b)\noutput y\n", "do not broadcast"},
        {"input a : f32[3,2]\ny = det(a)\noutput y\n", "expected [..., n, n]"},
        {"input a : i32[3,3]\ny = det(a)\noutput y\n", "expected a float dtype"},
        {"input a : f32[3]\ny = eye_like(a)\noutput y\n", "expected rank 2"},
        {"input a : f32[2,3]\ny = lrn(a, size=0)\noutput y\n", "expected a positive channel count"},
        {"input a : f32[2,3,3]\ny = dft(a, axis=1)\noutput y\n", "expected [..., 1] (real) or [..., 2] (complex)"},
        {"input a : f32[2,3,2]\ny = dft(a, axis=2)\noutput y\n", "expected a signal axis (not the last)"},
        {"input a : f32[2,3,2]\ny = dft(a, axis=1, length=0)\noutput y\n", "expected a positive length"},
        {"input a : f32[3]\ny = shrink(a, lambd=nan)\noutput y\n", "shrink"},
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

int main(void)
{
    RUN(test_bitwise);
    RUN(test_det_eye);
    RUN(test_lrn_dft);
    RUN(test_grads);
    RUN(test_errors);
    return unit_done();   /* the cpu backend runs the ref kernels: no baseline rerun */
}
