/* test_qlin.c — the ONNX linear quantization ops (lib/op_qlin.c,
 * kernels/ref/ref_qlin.c) on values worked out by hand: rounding half to
 * even, saturation, NaN, zero points, per-axis and blocked scales, f16,
 * requantize's double product, matmul_integer's broadcasting and per-row /
 * per-column zero points, conv_integer's asymmetric padding; the errors for
 * shapes and dtypes that do not fit; the text form round trip. */
#include "unit_graph.h"

#include <math.h>

static mge_error err;

static void tensor_of(mge_tensor *t, mge_dtype dt, int nd, const int64_t *d, const double *v)
{
    CHECK_OK(mge_tensor_alloc(t, dt, nd, d, &err), err);
    for (int64_t i = 0; i < mge_tensor_numel(t); i++)
        switch (dt) {
        case MGE_F32: ((float *)t->data)[i] = (float)v[i]; break;
        case MGE_F16: ((uint16_t *)t->data)[i] = mge_f32_to_f16((float)v[i]); break;
        case MGE_I32: ((int32_t *)t->data)[i] = (int32_t)v[i]; break;
        case MGE_U8: ((uint8_t *)t->data)[i] = (uint8_t)v[i]; break;
        case MGE_I8: ((int8_t *)t->data)[i] = (int8_t)v[i]; break;
        default: break;
        }
}

static double elem(const mge_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case MGE_F32: return ((const float *)t->data)[i];
    case MGE_F16: return mge_f16_to_f32(((const uint16_t *)t->data)[i]);
    case MGE_I32: return ((const int32_t *)t->data)[i];
    case MGE_U8: return ((const uint8_t *)t->data)[i];
    case MGE_I8: return ((const int8_t *)t->data)[i];
    default: return -12345;
    }
}

/* One input of a case: dtype, shape, values. */
typedef struct qin {
    mge_dtype dt;
    int nd;
    int64_t d[4];
    const double *v;
} qin;

/* Runs src (its inputs in order) on ref and cpu; the one output must be
 * dtype want_dt with values want[0..n). */
static void check(const char *src, int nin, const qin *in, mge_dtype want_dt, int n, const double *want)
{
    static const char *const bes[2] = {"ref", "cpu"};
    mge_graph *g = ug_parse(src);
    if (!g)
        return;
    mge_tensor ts[4];
    const mge_tensor *ins[4];
    for (int i = 0; i < nin; i++) {
        tensor_of(&ts[i], in[i].dt, in[i].nd, in[i].d, in[i].v);
        ins[i] = &ts[i];
    }
    for (int b = 0; b < 2; b++) {
        mge_exec *e = NULL;
        mge_exec_opts o = {0};
        o.backend = bes[b];
        mge_status st = mge_exec_create(g, &o, &e, &err);
        if (!st)
            st = mge_exec_run(e, ins, &err);
        CHECK_MSG(st == MGE_OK, "%s: %s in\n%s", bes[b], err.msg, src);
        if (st) {
            mge_exec_free(e);
            continue;
        }
        const mge_tensor *y = mge_exec_result(e, 0);
        CHECK_MSG(y->dtype == want_dt, "%s: output %s, expected %s", bes[b], mge_dtype_name(y->dtype),
                  mge_dtype_name(want_dt));
        CHECK_MSG(mge_tensor_numel(y) == n, "%s: %lld elements, expected %d", bes[b], (long long)mge_tensor_numel(y),
                  n);
        for (int i = 0; i < n && i < mge_tensor_numel(y); i++) {
            double v = elem(y, i);
            CHECK_MSG(v == want[i], "%s: y[%d] = %g, expected %g in\n%s", bes[b], i, v, want[i], src);
        }
        mge_exec_free(e);
    }
    for (int i = 0; i < nin; i++)
        mge_tensor_free(&ts[i]);
    mge_graph_free(g);
}

static void test_quantize(void)
{
    /* half to even, saturation, the zero point; NaN gives the least value */
    static const double x[8] = {5, 7, -5, 3, 1000, -1000, NAN, 0.4}, s[1] = {2}, z[1] = {128};
    static const double yu[8] = {130, 132, 126, 130, 255, 0, 0, 128};
    qin in[3] = {{MGE_F32, 1, {8}, x}, {MGE_F32, 0, {0}, s}, {MGE_U8, 0, {0}, z}};
    check("input x : f32[8]\ninput s : f32[]\ninput z : u8[]\ny = quantize_linear(x, s, z)\noutput y\n", 3, in,
          MGE_U8, 8, yu);
    static const double z8[1] = {-1}, yi[8] = {1, 3, -3, 1, 127, -128, -128, -1};
    in[2] = (qin){MGE_I8, 1, {1}, z8};
    check("input x : f32[8]\ninput s : f32[]\ninput z : i8[1]\ny = quantize_linear(x, s, z)\noutput y\n", 3, in,
          MGE_I8, 8, yi);
    /* no zero point: dtype says i8 */
    static const double yn[8] = {2, 4, -2, 2, 127, -128, -128, 0};
    check("input x : f32[8]\ninput s : f32[]\ny = quantize_linear(x, s, dtype=i8)\noutput y\n", 2, in, MGE_I8, 8, yn);
    /* per axis 0 of [2, 3], and blocked: axis 1 in blocks of 2 ([2, 2] scales) */
    static const double xa[6] = {1, 2, 3, 4, 5, 6}, sa[2] = {1, 2}, za[2] = {10, 20};
    static const double ya[6] = {11, 12, 13, 22, 22, 23};
    qin ia[3] = {{MGE_F32, 2, {2, 3}, xa}, {MGE_F32, 1, {2}, sa}, {MGE_U8, 1, {2}, za}};
    check("input x : f32[2,3]\ninput s : f32[2]\ninput z : u8[2]\ny = quantize_linear(x, s, z, axis=0)\noutput y\n",
          3, ia, MGE_U8, 6, ya);
    static const double sb[4] = {1, 2, 4, 0.5}, zb[4] = {0, 0, 100, 0}, yb[6] = {1, 2, 2, 101, 101, 12};
    qin ib[3] = {{MGE_F32, 2, {2, 3}, xa}, {MGE_F32, 2, {2, 2}, sb}, {MGE_U8, 2, {2, 2}, zb}};
    check("input x : f32[2,3]\ninput s : f32[2,2]\ninput z : u8[2,2]\n"
          "y = quantize_linear(x, s, z, axis=1, block=2)\noutput y\n",
          3, ib, MGE_U8, 6, yb);
    /* f16 x and scale: 2049 is 2048 in f16, / 16 = 128 saturates; -3.5 / 16 rounds to 0 */
    static const double xh[2] = {2049, -3.5}, sh[1] = {16};
    static const double yh[2] = {127, -0};
    qin ih[2] = {{MGE_F16, 1, {2}, xh}, {MGE_F16, 0, {0}, sh}};
    check("input x : f16[2]\ninput s : f16[]\ny = quantize_linear(x, s, dtype=i8)\noutput y\n", 2, ih, MGE_I8, 2, yh);
    /* i32 x in double: 7 / 2 = 3.5 -> 4 */
    static const double xi[2] = {7, -9};
    static const double yii[2] = {4, 0};
    qin ii[2] = {{MGE_I32, 1, {2}, xi}, {MGE_F32, 0, {0}, s}};
    check("input x : i32[2]\ninput s : f32[]\ny = quantize_linear(x, s)\noutput y\n", 2, ii, MGE_U8, 2, yii);
}

static void test_dequantize_requantize(void)
{
    static const double x[4] = {0, 128, 255, 3}, s[1] = {0.5}, z[1] = {128}, y[4] = {-64, 0, 63.5, -62.5};
    qin in[3] = {{MGE_U8, 1, {4}, x}, {MGE_F32, 0, {0}, s}, {MGE_U8, 0, {0}, z}};
    check("input x : u8[4]\ninput s : f32[]\ninput z : u8[]\ny = dequantize_linear(x, s, z)\noutput y\n", 3, in,
          MGE_F32, 4, y);
    /* f16 scale: f16 out */
    static const double sh[1] = {0.25}, yh[4] = {0, 32, 63.75, 0.75};
    qin ih[2] = {{MGE_U8, 1, {4}, x}, {MGE_F16, 0, {0}, sh}};
    check("input x : u8[4]\ninput s : f16[]\ny = dequantize_linear(x, s)\noutput y\n", 2, ih, MGE_F16, 4, yh);
    /* requantize: ties to even, per axis -1, saturation, the zero point */
    static const double acc[4] = {5, 7, -5, 100000}, m[2] = {0.5, 0.25}, zr[1] = {-3};
    static const double yr[4] = {-1, -1, -5, 127};
    qin ir[3] = {{MGE_I32, 2, {2, 2}, acc}, {MGE_F32, 1, {2}, m}, {MGE_I8, 0, {0}, zr}};
    check("input a : i32[2,2]\ninput m : f32[2]\ninput z : i8[]\ny = requantize(a, m, z, axis=-1)\noutput y\n", 3,
          ir, MGE_I8, 4, yr);
}

static void test_integer_ops(void)
{
    /* a [2, 3] - per-row zeros [1, 2]; b [3, 2] - per-column zeros [0, 1] */
    static const double a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {1, 2, 3, 4, 5, 6}, za[2] = {1, 2}, zb[2] = {0, 1};
    /* A' = [[0,1,2],[2,3,4]], B' = [[1,1],[3,3],[5,5]] */
    static const double y[4] = {13, 13, 31, 31};
    qin in[4] = {{MGE_U8, 2, {2, 3}, a}, {MGE_I8, 2, {3, 2}, b}, {MGE_U8, 1, {2}, za}, {MGE_I8, 1, {2}, zb}};
    check("input a : u8[2,3]\ninput b : i8[3,2]\ninput za : u8[2]\ninput zb : i8[2]\n"
          "y = matmul_integer(a, b, za, zb)\noutput y\n",
          4, in, MGE_I32, 4, y);
    /* batch dims: a [2, 1, 3] against b [3, 2] (no zeros) -> [2, 1, 2] */
    static const double y2[4] = {22, 28, 49, 64};
    qin i2[2] = {{MGE_U8, 3, {2, 1, 3}, a}, {MGE_U8, 2, {3, 2}, b}};
    check("input a : u8[2,1,3]\ninput b : u8[3,2]\ny = matmul_integer(a, b)\noutput y\n", 2, i2, MGE_I32, 4, y2);
    /* 1-D a: [3] x [3, 2] -> [2] */
    static const double y3[2] = {22, 28};
    qin i3[2] = {{MGE_U8, 1, {3}, a}, {MGE_U8, 2, {3, 2}, b}};
    check("input a : u8[3]\ninput b : u8[3,2]\ny = matmul_integer(a, b)\noutput y\n", 2, i3, MGE_I32, 2, y3);
    /* conv_integer: x [1,1,2,2] = [[1,2],[3,4]], x_zero 1, w [1,1,1,1] = 2;
     * pad top 1, left 0, bottom 0, right 1: out [1,1,3,3] */
    static const double x[4] = {1, 2, 3, 4}, w[1] = {2}, zx[1] = {1};
    static const double yc[9] = {0, 0, 0, 0, 2, 0, 4, 6, 0};
    qin ic[3] = {{MGE_U8, 4, {1, 1, 2, 2}, x}, {MGE_U8, 4, {1, 1, 1, 1}, w}, {MGE_U8, 0, {0}, zx}};
    check("input x : u8[1,1,2,2]\ninput w : u8[1,1,1,1]\ninput z : u8[]\n"
          "y = conv_integer(x, w, z, kernel=1, pad=[1,0,0,1])\noutput y\n",
          3, ic, MGE_I32, 9, yc);
}

/* A graph src must be refused with a message containing want. */
static void refused(const char *src, const char *want)
{
    mge_graph *g = NULL;
    mge_error e;
    mge_error_clear(&e);
    mge_status s = mge_text_parse(src, strlen(src), ".", &g, &e);
    CHECK_MSG(s != MGE_OK && strstr(e.msg, want), "expected an error with '%s', got %s '%s' for\n%s", want,
              s ? "error" : "success", e.msg, src);
    mge_graph_free(g);
}

static void test_errors(void)
{
    refused("input x : f32[2,3]\ninput s : f32[4]\ny = quantize_linear(x, s)\noutput y\n",
            "expected one, or a 1-D [3] along axis 1");
    refused("input x : f32[2,3]\ninput s : f32[2,3]\ny = quantize_linear(x, s, block=2)\noutput y\n",
            "blocked scale");
    refused("input x : f32[3]\ninput s : f32[]\ninput z : u8[]\ny = quantize_linear(x, s, z, dtype=i8)\noutput y\n",
            "dtype=i8 but the zero point is u8");
    refused("input x : f32[3]\ninput s : f32[]\ny = quantize_linear(x, s, dtype=i32)\noutput y\n",
            "expected u8 or i8");
    refused("input x : f32[3]\ninput s : f16[]\ny = quantize_linear(x, s)\noutput y\n", "the scale is f16");
    refused("input x : u8[3]\ninput s : f32[]\ninput z : i8[]\ny = dequantize_linear(x, s, z)\noutput y\n",
            "the zero point is i8");
    refused("input x : f32[3]\ninput s : f32[]\ny = dequantize_linear(x, s)\noutput y\n", "expected u8, i8 or i32");
    refused("input a : u8[2,3]\ninput b : u8[4,2]\ny = matmul_integer(a, b)\noutput y\n", "inner dims 3 and 4");
    refused("input a : u8[2,3]\ninput b : u8[3,2]\ninput z : u8[3]\ny = matmul_integer(a, b, z)\noutput y\n",
            "a_zero");
    refused("input x : u8[1,2,4,4]\ninput w : u8[1,3,3,3]\ny = conv_integer(x, w, kernel=3)\noutput y\n",
            "groups 1");
    refused("input x : u8[1,1,2,2]\ninput w : u8[1,1,3,3]\ny = conv_integer(x, w, kernel=3)\noutput y\n",
            "smaller than the dilated kernel");
    refused("input x : u8[1,1,4,4]\ninput w : u8[1,1,3,3]\ny = conv_integer(x, w, kernel=3, pad=[1,1,1])\noutput y\n",
            "pad has 3 values");
    refused("input a : i32[2]\ninput m : f32[2]\ninput z : u8[3]\ny = requantize(a, m, z, axis=0)\noutput y\n",
            "the zero point");
}

/* The text form prints the ops and their attributes back as they parse. */
static void test_text_round_trip(void)
{
    const char *src = "input x : f32[2,4]\ninput s : f32[2,2]\ninput z : i8[2,2]\n"
                      "q = quantize_linear(x, s, z, axis=1, block=2)\nd = dequantize_linear(q, s, z, axis=1, block=2)\n"
                      "output d\n";
    mge_graph *g = ug_parse(src);
    if (!g)
        return;
    mge_buf b = {0};
    CHECK_OK(mge_text_print(g, &b, &err), err);
    mge_buf_put(&b, "", 1);
    mge_graph *g2 = b.p ? ug_parse(b.p) : NULL;
    CHECK(g2 && ug_count_op(g2, MGE_OP_QUANTIZE_LINEAR) == 1 && ug_count_op(g2, MGE_OP_DEQUANTIZE_LINEAR) == 1);
    if (g2) {
        const mge_node *n = ug_producer(g2, "q");
        CHECK(n && mge_node_int(n, MGE_KEY_block, 0) == 2 && mge_node_int(n, MGE_KEY_axis, 0) == 1);
    }
    mge_buf_free(&b);
    mge_graph_free(g2);
    mge_graph_free(g);
}

int main(void)
{
    RUN(test_quantize);
    RUN(test_dequantize_requantize);
    RUN(test_integer_ops);
    RUN(test_errors);
    RUN(test_text_round_trip);
    return unit_done();
}
