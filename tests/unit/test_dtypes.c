/* test_dtypes.c — the dtypes f64, i16, u16, u32, u64: names, sizes and
 * the text form; cast between every pair with ONNX's (numpy's) semantics
 * (float -> int truncates toward zero, NaN 0, beyond i64 saturates then
 * wraps; each conversion to a float rounds once, f64 -> f16 and
 * i64 -> f32 included); f64 arithmetic, reductions, cumsum and matmul
 * computed in double (results f32 could not hold); the integers in their
 * own width with wraparound, u64 compared and divided unsigned; the cpu
 * backend running them through ref's kernels. */
#include "internal.h"
#include "unit.h"
#include "unit_graph.h"

#include <math.h>

static mge_error err;

/* Runs the text-form graph src (inputs x[, y] of the given tensors) on
 * backend; returns a copy of output k's result in *out (caller frees), or
 * a nonzero status. */
static mge_status run_src(const char *backend, const char *src, int nin, const mge_tensor *const *ins, int k,
                          mge_tensor *out)
{
    mge_graph *g = ug_parse(src);
    if (!g)
        return MGE_ERR_INVALID;
    mge_exec *e = NULL;
    mge_exec_opts o = {0};
    o.backend = backend;
    o.threads = 1;
    mge_status s = mge_exec_create(g, &o, &e, &err);
    if (!s && g->ninputs != nin)
        s = MGE_ERR_INVALID;
    if (!s)
        s = mge_exec_run(e, ins, &err);
    if (!s) {
        const mge_tensor *r = mge_exec_result(e, k);
        s = mge_tensor_alloc(out, r->dtype, r->ndim, r->dims, &err);
        if (!s && r->nbytes)
            memcpy(out->data, r->data, r->nbytes);
    }
    mge_exec_free(e);
    mge_graph_free(g);
    return s;
}

/* A 1-D tensor of dtype dt holding the n bytes-per-element values at p. */
static void vec(mge_tensor *t, mge_dtype dt, int64_t n, const void *p)
{
    CHECK_OK(mge_tensor_alloc(t, dt, 1, &n, &err), err);
    memcpy(t->data, p, (size_t)n * mge_dtype_size(dt));
}

/* cast x (dtype from, values p) to `to` on backend; the result in *y. */
static int cast_run(const char *backend, mge_dtype from, mge_dtype to, int64_t n, const void *p, mge_tensor *y)
{
    char src[256];
    snprintf(src, sizeof src, "input x : %s[%lld]\ny = cast(x, dtype=%s)\noutput y\n", mge_dtype_name(from),
             (long long)n, mge_dtype_name(to));
    mge_tensor x;
    vec(&x, from, n, p);
    const mge_tensor *ins[1] = {&x};
    mge_status s = run_src(backend, src, 1, ins, 0, y);
    CHECK_MSG(s == MGE_OK, "cast %s -> %s on %s: %s", mge_dtype_name(from), mge_dtype_name(to), backend, err.msg);
    mge_tensor_free(&x);
    return s == MGE_OK;
}

static void test_names(void)
{
    static const struct {
        mge_dtype dt;
        const char *name;
        size_t size;
        int fl;
    } t[] = {{MGE_F64, "f64", 8, 1}, {MGE_I16, "i16", 2, 0}, {MGE_U16, "u16", 2, 0},
             {MGE_U32, "u32", 4, 0}, {MGE_U64, "u64", 8, 0}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        mge_dtype back = MGE_F32;
        CHECK(strcmp(mge_dtype_name(t[i].dt), t[i].name) == 0);
        CHECK(mge_dtype_size(t[i].dt) == t[i].size);
        CHECK(mge_dtype_parse(t[i].name, strlen(t[i].name), &back) && back == t[i].dt);
        CHECK(mge_dtype_is_float(t[i].dt) == t[i].fl);
    }
    /* double -> f16/bf16 rounded once: just above a tie goes up, the tie to even */
    CHECK(mge_f64_to_f16(1.0 + 0x1p-11 + 0x1p-40) == 0x3c01 && mge_f64_to_f16(1.0 + 0x1p-11) == 0x3c00);
    CHECK(mge_f64_to_bf16(1.0 + 0x1p-8 + 0x1p-40) == 0x3f81 && mge_f64_to_bf16(1.0 + 0x1p-8) == 0x3f80);
    CHECK(mge_f64_to_f16(-1e300) == 0xfc00 && (mge_f64_to_f16(NAN) & 0x7c00) == 0x7c00 && mge_f64_to_f16(1e-30) == 0);
    /* the old dtypes keep their numbers (files store them) */
    CHECK(MGE_QS32 == 9 && MGE_F64 == 10 && MGE_U64 == 14 && MGE_NDTYPES == 15);
    /* consts of the new dtypes go through the text form and back */
    const char *src = "const a : f64[2] = [0.1, -1e+300]\nconst b : u64[2] = [18446744073709551615, 3]\n"
                      "const c : i16[2] = [-32768, 7]\nc2 = cast(c, dtype=u16)\noutput a, b, c2\n";
    mge_graph *g = ug_parse(src);
    CHECK(g != NULL);
    if (g) {
        mge_buf b = {0};
        CHECK_OK(mge_text_print(g, &b, &err), err);
        mge_buf_put(&b, "", 1);
        CHECK_MSG(strstr(b.p, "const a : f64[2] = [0.1, -1e+300]") && strstr(b.p, "[18446744073709551615, 3]") &&
                      strstr(b.p, "i16[2] = [-32768, 7]") && strstr(b.p, "dtype=u16"),
                  "%s", b.p);
        mge_buf_free(&b);
        mge_graph_free(g);
    }
    /* out of a dtype's range in the text form: an error naming it */
    mge_graph *bad = NULL;
    const char *s2 = "const c : u16[1] = [70000]\noutput c\n";
    CHECK(mge_text_parse(s2, strlen(s2), ".", &bad, &err) != MGE_OK && strstr(err.msg, "u16"));
    mge_graph_free(bad);
    bad = NULL;
    const char *s3 = "const c : u64[1] = [18446744073709551616]\noutput c\n";
    CHECK(mge_text_parse(s3, strlen(s3), ".", &bad, &err) != MGE_OK &&
          strstr(err.msg, "out of range (0..18446744073709551615)"));
    mge_graph_free(bad);
}

static void test_cast_float(void)
{
    const char *bes[2] = {"ref", "cpu"};
    for (int b = 0; b < 2; b++) {
        mge_tensor y;
        /* f64 -> f32: nearest; overflow to inf */
        const double d[5] = {0.1, 1.0 + 0x1p-30, 1e300, -1e-300, NAN};
        if (cast_run(bes[b], MGE_F64, MGE_F32, 5, d, &y)) {
            const float *f = y.data;
            CHECK(f[0] == 0.1f && f[1] == 1.0f && isinf(f[2]) && f[3] == 0 && signbit(f[3]) && isnan(f[4]));
            mge_tensor_free(&y);
        }
        /* f64 -> f16 rounds once: 1 + 2^-11 + 2^-40 is above the tie
         * (via f32 it would become the tie and round to even, down) */
        const double h[3] = {1.0 + 0x1p-11 + 0x1p-40, 1.0 + 0x1p-11, 65520.0};
        if (cast_run(bes[b], MGE_F64, MGE_F16, 3, h, &y)) {
            const uint16_t *u = y.data;
            CHECK_MSG(u[0] == 0x3c01, "%#x", u[0]);
            CHECK_MSG(u[1] == 0x3c00, "%#x", u[1]);   /* the tie itself: to even */
            CHECK_MSG(u[2] == 0x7c00, "%#x", u[2]);   /* rounds to inf */
            mge_tensor_free(&y);
        }
        /* f32 -> f64 exact */
        const float f[2] = {0.1f, -3.0e38f};
        if (cast_run(bes[b], MGE_F32, MGE_F64, 2, f, &y)) {
            CHECK(((double *)y.data)[0] == (double)0.1f && ((double *)y.data)[1] == (double)-3.0e38f);
            mge_tensor_free(&y);
        }
        /* i64 -> f32 rounds once: 2^60 + 2^36 + 1 is above the f32 tie */
        const int64_t i[2] = {(INT64_C(1) << 60) + (INT64_C(1) << 36) + 1, -(INT64_C(1) << 60) - (INT64_C(1) << 36)};
        if (cast_run(bes[b], MGE_I64, MGE_F32, 2, i, &y)) {
            CHECK(((float *)y.data)[0] == 0x1p60f + 0x1p37f);
            CHECK(((float *)y.data)[1] == -0x1p60f);   /* an exact tie: to even */
            mge_tensor_free(&y);
        }
        /* i64 -> bf16 rounds once: 2^60 + 2^52 + 1 is just above the
         * bf16 tie (through a double it would be the tie, then down) */
        const int64_t j[3] = {(INT64_C(1) << 60) + (INT64_C(1) << 52) + 1, (INT64_C(1) << 60) + (INT64_C(1) << 52),
                              -(INT64_C(1) << 60) - (INT64_C(1) << 52) - 1};
        if (cast_run(bes[b], MGE_I64, MGE_BF16, 3, j, &y)) {
            const uint16_t *h16 = y.data;
            CHECK_MSG(h16[0] == 0x5d81, "%#x", h16[0]);
            CHECK_MSG(h16[1] == 0x5d80, "%#x", h16[1]);   /* the tie: to even */
            CHECK_MSG(h16[2] == 0xdd81, "%#x", h16[2]);
            mge_tensor_free(&y);
        }
        const uint16_t k16[2] = {2049, 65535};   /* -> f16: 2049 is a tie (to 2048), 65535 rounds to inf */
        if (cast_run(bes[b], MGE_U16, MGE_F16, 2, k16, &y)) {
            CHECK(((uint16_t *)y.data)[0] == 0x6800 && ((uint16_t *)y.data)[1] == 0x7c00);
            mge_tensor_free(&y);
        }
        /* u64 -> f64: from the unsigned value, not its bits as i64 */
        const uint64_t u[2] = {UINT64_MAX, UINT64_C(1) << 63};
        if (cast_run(bes[b], MGE_U64, MGE_F64, 2, u, &y)) {
            CHECK(((double *)y.data)[0] == 0x1p64 && ((double *)y.data)[1] == 0x1p63);
            mge_tensor_free(&y);
        }
    }
}

static void test_cast_int(void)
{
    mge_tensor y;
    /* float -> int: toward zero, NaN 0; beyond i64 saturates, then the
     * low bits (numpy's astype on x86) */
    const double d[6] = {-2.7, 2.7, NAN, 1e20, -1e20, 40000.5};
    if (cast_run("cpu", MGE_F64, MGE_I16, 6, d, &y)) {
        const int16_t *v = y.data;
        CHECK(v[0] == -2 && v[1] == 2 && v[2] == 0 && v[3] == -1 && v[4] == 0 && v[5] == (int16_t)40000);
        mge_tensor_free(&y);
    }
    if (cast_run("cpu", MGE_F64, MGE_I64, 6, d, &y)) {
        const int64_t *v = y.data;
        CHECK(v[0] == -2 && v[3] == INT64_MAX && v[4] == INT64_MIN && v[5] == 40000);
        mge_tensor_free(&y);
    }
    /* to u64: [2^63, 2^64) converts, negatives wrap, beyond saturates */
    const double e[4] = {1.8e19, -1.0, 1e30, 9.5};
    if (cast_run("cpu", MGE_F64, MGE_U64, 4, e, &y)) {
        const uint64_t *v = y.data;
        CHECK(v[0] == UINT64_C(18000000000000000000) && v[1] == UINT64_MAX && v[2] == UINT64_MAX && v[3] == 9);
        mge_tensor_free(&y);
    }
    /* int -> int keeps the low bits */
    const uint16_t u[3] = {65535, 32768, 7};
    if (cast_run("cpu", MGE_U16, MGE_I16, 3, u, &y)) {
        CHECK(((int16_t *)y.data)[0] == -1 && ((int16_t *)y.data)[1] == -32768 && ((int16_t *)y.data)[2] == 7);
        mge_tensor_free(&y);
    }
    const int16_t s[2] = {-1, 300};
    if (cast_run("cpu", MGE_I16, MGE_U32, 2, s, &y)) {
        CHECK(((uint32_t *)y.data)[0] == UINT32_MAX && ((uint32_t *)y.data)[1] == 300);
        mge_tensor_free(&y);
    }
    if (cast_run("cpu", MGE_I16, MGE_U8, 2, s, &y)) {
        CHECK(((uint8_t *)y.data)[0] == 255 && ((uint8_t *)y.data)[1] == 44);
        mge_tensor_free(&y);
    }
    const uint64_t w[2] = {UINT64_MAX, 0x100000001u};
    if (cast_run("cpu", MGE_U64, MGE_U32, 2, w, &y)) {
        CHECK(((uint32_t *)y.data)[0] == UINT32_MAX && ((uint32_t *)y.data)[1] == 1);
        mge_tensor_free(&y);
    }
    /* to bool: != 0 (NaN true) */
    const double b[3] = {0.0, -0.0, NAN};
    if (cast_run("cpu", MGE_F64, MGE_BOOL, 3, b, &y)) {
        CHECK(((uint8_t *)y.data)[0] == 0 && ((uint8_t *)y.data)[1] == 0 && ((uint8_t *)y.data)[2] == 1);
        mge_tensor_free(&y);
    }
}

/* Binary op (text form name) of two 1-D operands of dtype dt on cpu. */
static int bin_run(const char *op, mge_dtype dt, int64_t n, const void *a, const void *b, mge_tensor *y)
{
    char src[256];
    snprintf(src, sizeof src, "input x : %s[%lld]\ninput y : %s[%lld]\nz = %s(x, y)\noutput z\n",
             mge_dtype_name(dt), (long long)n, mge_dtype_name(dt), (long long)n, op);
    mge_tensor x, t;
    vec(&x, dt, n, a);
    vec(&t, dt, n, b);
    const mge_tensor *ins[2] = {&x, &t};
    mge_status s = run_src("cpu", src, 2, ins, 0, y);
    CHECK_MSG(s == MGE_OK, "%s %s: %s", op, mge_dtype_name(dt), err.msg);
    mge_tensor_free(&x);
    mge_tensor_free(&t);
    return s == MGE_OK;
}

static void test_f64_kernels(void)
{
    mge_tensor y;
    /* 1 + 1e-12 survives in double (f32 would give 1) */
    const double a[3] = {1.0, 1e16, 0.1}, b[3] = {1e-12, 1.0, 0.2};
    if (bin_run("add", MGE_F64, 3, a, b, &y)) {
        const double *v = y.data;
        CHECK(v[0] == 1.0 + 1e-12 && v[1] == 1e16 + 1.0 && v[2] == 0.1 + 0.2);
        mge_tensor_free(&y);
    }
    if (bin_run("div", MGE_F64, 3, a, b, &y)) {
        CHECK(((double *)y.data)[0] == 1.0 / 1e-12 && ((double *)y.data)[2] == 0.1 / 0.2);
        mge_tensor_free(&y);
    }
    if (bin_run("pow", MGE_F64, 3, b, a, &y)) {
        CHECK(((double *)y.data)[0] == pow(1e-12, 1.0) && ((double *)y.data)[2] == pow(0.2, 0.1));
        mge_tensor_free(&y);
    }
    /* exp, log, sum, max in double: log-sum-exp of values f32 cannot
     * tell apart */
    const char *lse = "input x : f64[4]\nm = max(x, keepdim=true)\nd = sub(x, m)\ne = exp(d)\n"
                      "s = sum(e, keepdim=true)\nl = log(s)\nr = add(l, m)\noutput r\n";
    const double xs[4] = {700.0, 700.0 + 1e-9, 699.0, -1e300};
    mge_tensor x;
    vec(&x, MGE_F64, 4, xs);
    const mge_tensor *ins[1] = {&x};
    if (run_src("cpu", lse, 1, ins, 0, &y) == MGE_OK) {
        double m = xs[1], want = log(exp(xs[0] - m) + exp(0.0) + exp(xs[2] - m) + exp(xs[3] - m)) + m;
        CHECK(y.dtype == MGE_F64);
        CHECK_MSG(((double *)y.data)[0] == want, "%.17g vs %.17g", ((double *)y.data)[0], want);
        mge_tensor_free(&y);
    } else {
        CHECK_MSG(0, "log-sum-exp: %s", err.msg);
    }
    /* cumsum keeps the small terms a running f32 sum drops */
    const char *cs = "input x : f64[4]\ny = cumsum(x, axis=0)\noutput y\n";
    const double cx[4] = {1e10, 1e-6, 1e-6, -1e10};
    mge_tensor_free(&x);
    vec(&x, MGE_F64, 4, cx);
    if (run_src("cpu", cs, 1, ins, 0, &y) == MGE_OK) {
        const double *v = y.data;
        CHECK(v[1] == 1e10 + 1e-6 && v[3] == ((1e10 + 1e-6) + 1e-6) - 1e10);
        mge_tensor_free(&y);
    } else {
        CHECK_MSG(0, "cumsum: %s", err.msg);
    }
    mge_tensor_free(&x);
    /* matmul in double: [1, 1e-10] . [1, 1]^T exactly 1 + 1e-10 */
    const char *mm = "input x : f64[1,2]\ninput y : f64[2,1]\nz = matmul(x, y)\noutput z\n";
    const double ma[2] = {1.0, 1e-10}, mb[2] = {1.0, 1.0};
    int64_t d12[2] = {1, 2}, d21[2] = {2, 1};
    mge_tensor A, B;
    CHECK_OK(mge_tensor_alloc(&A, MGE_F64, 2, d12, &err), err);
    CHECK_OK(mge_tensor_alloc(&B, MGE_F64, 2, d21, &err), err);
    memcpy(A.data, ma, sizeof ma);
    memcpy(B.data, mb, sizeof mb);
    const mge_tensor *mins[2] = {&A, &B};
    if (run_src("cpu", mm, 2, mins, 0, &y) == MGE_OK) {
        CHECK(((double *)y.data)[0] == 1.0 + 1e-10);
        mge_tensor_free(&y);
    } else {
        CHECK_MSG(0, "matmul: %s", err.msg);
    }
    mge_tensor_free(&A);
    mge_tensor_free(&B);
    /* comparisons in double */
    const double ca[2] = {1.0, 1.0 + 0x1p-40}, cb[2] = {1.0 + 0x1p-40, 1.0};
    if (bin_run("less", MGE_F64, 2, ca, cb, &y)) {
        CHECK(((uint8_t *)y.data)[0] == 1 && ((uint8_t *)y.data)[1] == 0);
        mge_tensor_free(&y);
    }
}

static void test_int_kernels(void)
{
    mge_tensor y;
    /* i16 wraps in its width */
    const int16_t a16[3] = {32767, -32768, 200}, b16[3] = {1, -1, 200};
    if (bin_run("add", MGE_I16, 3, a16, b16, &y)) {
        CHECK(((int16_t *)y.data)[0] == -32768 && ((int16_t *)y.data)[1] == 32767 && ((int16_t *)y.data)[2] == 400);
        mge_tensor_free(&y);
    }
    if (bin_run("mul", MGE_I16, 3, a16, b16, &y)) {
        CHECK(((int16_t *)y.data)[0] == 32767 && ((int16_t *)y.data)[1] == -32768 &&
              ((int16_t *)y.data)[2] == (int16_t)40000);
        mge_tensor_free(&y);
    }
    const uint16_t a1[2] = {300, 0}, b1[2] = {300, 1};
    if (bin_run("mul", MGE_U16, 2, a1, b1, &y)) {
        CHECK(((uint16_t *)y.data)[0] == (uint16_t)90000 && ((uint16_t *)y.data)[1] == 0);
        mge_tensor_free(&y);
    }
    if (bin_run("sub", MGE_U16, 2, a1, b1, &y)) {
        CHECK(((uint16_t *)y.data)[1] == 65535);
        mge_tensor_free(&y);
    }
    const uint32_t a32[2] = {0, 4000000000u}, b32[2] = {1, 3};
    if (bin_run("sub", MGE_U32, 2, a32, b32, &y)) {
        CHECK(((uint32_t *)y.data)[0] == UINT32_MAX && ((uint32_t *)y.data)[1] == 3999999997u);
        mge_tensor_free(&y);
    }
    if (bin_run("div", MGE_U32, 2, a32, b32, &y)) {
        CHECK(((uint32_t *)y.data)[1] == 1333333333u);
        mge_tensor_free(&y);
    }
    /* u64: divide, compare, max and min as unsigned */
    const uint64_t a64[3] = {UINT64_MAX - 1, UINT64_C(1) << 63, 5}, b64[3] = {2, 1, UINT64_C(1) << 63};
    if (bin_run("div", MGE_U64, 3, a64, b64, &y)) {
        const uint64_t *v = y.data;
        CHECK(v[0] == (UINT64_MAX >> 1) && v[1] == UINT64_C(1) << 63 && v[2] == 0);
        mge_tensor_free(&y);
    }
    if (bin_run("maximum", MGE_U64, 3, a64, b64, &y)) {
        const uint64_t *v = y.data;
        CHECK(v[0] == UINT64_MAX - 1 && v[1] == UINT64_C(1) << 63 && v[2] == UINT64_C(1) << 63);
        mge_tensor_free(&y);
    }
    if (bin_run("minimum", MGE_U64, 3, a64, b64, &y)) {
        const uint64_t *v = y.data;
        CHECK(v[0] == 2 && v[1] == 1 && v[2] == 5);
        mge_tensor_free(&y);
    }
    if (bin_run("less", MGE_U64, 3, a64, b64, &y)) {
        const uint8_t *v = y.data;
        CHECK(v[0] == 0 && v[1] == 0 && v[2] == 1);
        mge_tensor_free(&y);
    }
    /* integer division by zero: an error, not a trap */
    const uint64_t z[3] = {0, 0, 0};
    mge_tensor x, t;
    vec(&x, MGE_U64, 3, a64);
    vec(&t, MGE_U64, 3, z);
    const mge_tensor *ins[2] = {&x, &t};
    const char *dz = "input x : u64[3]\ninput y : u64[3]\nz = div(x, y)\noutput z\n";
    CHECK(run_src("cpu", dz, 2, ins, 0, &y) == MGE_ERR_INVALID && strstr(err.msg, "division by zero"));
    mge_tensor_free(&t);
    /* reductions: u64 max/min/argmax unsigned, sum wraps */
    const char *rd = "input x : u64[3]\na = max(x)\nb = min(x)\nc = argmax(x, axis=0)\nd = sum(x)\noutput a, b, c, d\n";
    mge_tensor r;
    const uint64_t want_max = UINT64_MAX - 1, want_min = 5, want_sum = (UINT64_MAX - 1) + (UINT64_C(1) << 63) + 5;
    if (run_src("cpu", rd, 1, ins, 0, &r) == MGE_OK) {
        CHECK(*(uint64_t *)r.data == want_max);
        mge_tensor_free(&r);
    }
    if (run_src("cpu", rd, 1, ins, 1, &r) == MGE_OK) {
        CHECK(*(uint64_t *)r.data == want_min);
        mge_tensor_free(&r);
    }
    if (run_src("cpu", rd, 1, ins, 2, &r) == MGE_OK) {
        CHECK(*(int64_t *)r.data == 0);
        mge_tensor_free(&r);
    }
    if (run_src("cpu", rd, 1, ins, 3, &r) == MGE_OK) {
        CHECK(*(uint64_t *)r.data == want_sum);
        mge_tensor_free(&r);
    }
    mge_tensor_free(&x);
    /* data movement by element size: transpose and concat of u16 */
    const uint16_t m[6] = {1, 2, 3, 4, 5, 65535};
    int64_t d23[2] = {2, 3};
    CHECK_OK(mge_tensor_alloc(&x, MGE_U16, 2, d23, &err), err);
    memcpy(x.data, m, sizeof m);
    const mge_tensor *one[1] = {&x};
    const char *tr = "input x : u16[2,3]\nt = transpose(x, perm=[1,0])\nc = concat(t, t, axis=0)\noutput c\n";
    if (run_src("cpu", tr, 1, one, 0, &r) == MGE_OK) {
        const uint16_t *v = r.data;
        CHECK(r.dims[0] == 6 && r.dims[1] == 2 && v[0] == 1 && v[1] == 4 && v[5] == 65535 && v[11] == 65535);
        mge_tensor_free(&r);
    } else {
        CHECK_MSG(0, "transpose/concat u16: %s", err.msg);
    }
    mge_tensor_free(&x);
}

/* cpu has no kernels of its own for f64 add or u64 max: the lookup falls
 * back to ref's, and the executor on cpu gives ref's results. */
static void test_fallback(void)
{
    const mge_backend *cpu = mge_backend_cpu(), *ref = mge_backend_ref();
    static const struct {
        int op;
        mge_dtype dt;
    } t[] = {{MGE_OP_ADD, MGE_F64}, {MGE_OP_MAXIMUM, MGE_U64}, {MGE_OP_CAST, MGE_I16}, {MGE_OP_SUM, MGE_U32},
             {MGE_OP_CUMSUM, MGE_F64}, {MGE_OP_EXP, MGE_F64}, {MGE_OP_MATMUL, MGE_F64}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        const mge_kernel *k = mge_backend_kernel(cpu, t[i].op, t[i].dt);
        CHECK_MSG(k != NULL, "%s %s: no kernel on cpu", mge_op_info(t[i].op)->name, mge_dtype_name(t[i].dt));
        if (k && !cpu->k[t[i].op][t[i].dt].run)
            CHECK(k == &ref->k[t[i].op][t[i].dt]);
    }
    /* isnan of f64 on cpu (ref's kernel), cast back */
    const char *src = "input x : f64[2]\ny = isnan(x)\nz = cast(y, dtype=f64)\noutput z\n";
    const double v[2] = {NAN, 1};
    mge_tensor x, y;
    vec(&x, MGE_F64, 2, v);
    const mge_tensor *ins[1] = {&x};
    if (run_src("cpu", src, 1, ins, 0, &y) == MGE_OK) {
        CHECK(((double *)y.data)[0] == 1 && ((double *)y.data)[1] == 0);
        mge_tensor_free(&y);
    }
    mge_tensor_free(&x);
    /* shape inference that wants f32 says so, naming what came */
    mge_graph *g = NULL;
    const char *q = "input x : f64[2,4]\ny = fused_elemwise(x, ops=[relu])\noutput y\n";
    CHECK(mge_text_parse(q, strlen(q), ".", &g, &err) == MGE_ERR_SHAPE && strstr(err.msg, "f64[2,4]") &&
          strstr(err.msg, "expected f32"));
    mge_graph_free(g);
}

int main(void)
{
    RUN(test_names);
    RUN(test_cast_float);
    RUN(test_cast_int);
    RUN(test_f64_kernels);
    RUN(test_int_kernels);
    RUN(test_fallback);
    return unit_done();
}
