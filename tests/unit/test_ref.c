/* test_ref.c — the reference kernels against answers worked out by hand or
 * by an independent computation written differently here. Nodes are made
 * by hand (attributes completed from the schema), so these tests need no
 * shape inference: each output shape below is the expected one. */
#include "internal.h"
#include "unit.h"
#include "unit_attr.h"

#include <stdarg.h>

/* ---------------------------------------------------------------- helpers */

typedef struct tnode {
    mge_node n;
    mge_attr attrs[16];
} tnode;

static mge_attr A_list(int key, int n, ...)
{
    mge_attr a;
    memset(&a, 0, sizeof a);
    a.key = key;
    a.n = n;
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++)
        a.i[i] = va_arg(ap, int);
    va_end(ap);
    return a;
}

/* A node of op with nin inputs and the given attributes plus defaults. */
static mge_node *mk(tnode *t, int op, int nin, int nattr, const mge_attr *attrs)
{
    mge_error err = {0};
    memset(t, 0, sizeof *t);
    t->n.name = "t";
    t->n.op = op;
    t->n.nin = nin;
    t->n.nout = 1;
    t->n.attrs = t->attrs;
    CHECK_OK(mge_attrs_complete(op, nattr, attrs, t->attrs, &t->n.nattr, &err), err);
    return &t->n;
}

static void tens(mge_tensor *t, mge_dtype dt, int nd, const int64_t *dims)
{
    mge_error err = {0};
    CHECK_OK(mge_tensor_alloc(t, dt, nd, dims, &err), err);
}

static float *F(mge_tensor *t)
{
    return (float *)t->data;
}

static mge_kctx ctx0 = {.threads = 1};

/* Runs the ref kernel of n (dtype of in[0]); the status, err filled. */
static mge_status runk(const mge_kctx *ctx, mge_node *n, mge_tensor **in, mge_tensor **out, mge_error *err)
{
    const mge_kernel *k = mge_backend_kernel(mge_backend_ref(), n->op, in[0]->dtype);
    CHECK_MSG(k != NULL, "no ref kernel for %s/%s", mge_op_info(n->op)->name, mge_dtype_name(in[0]->dtype));
    if (!k)
        return MGE_ERR_UNSUPPORTED;
    mge_kctx c = ctx ? *ctx : ctx0;
    c.opname = mge_op_info(n->op)->name;   /* as the executor passes it */
    return k->run(&c, n, in, out, err);
}

/* Runs and expects success. */
static void run_ok(mge_node *n, mge_tensor **in, mge_tensor **out)
{
    mge_error err = {0};
    CHECK_OK(runk(NULL, n, in, out, &err), err);
}

static void fill_rand(mge_tensor *t, uint64_t seed)
{
    mge_rng r;
    mge_rng_seed(&r, seed);
    for (int64_t i = 0; i < mge_tensor_numel(t); i++)
        F(t)[i] = mge_rng_uniform(&r) * 2 - 1;
}

/* ---------------------------------------------------------------- conv, linear */

/* 3x3 all-ones kernel on x = 1..16 (4x4): each output is the sum of a 3x3
 * window; with pad=1 the corner sees only 4 values. A kernel with a single
 * 1 at (0,0) must pick x[oh][ow] (cross-correlation, no flip). */
static void test_conv_hand(void)
{
    mge_tensor x, w, b, y, y2, w2;
    tens(&x, MGE_F32, 4, (int64_t[]){1, 1, 4, 4});
    tens(&w, MGE_F32, 4, (int64_t[]){1, 1, 3, 3});
    tens(&b, MGE_F32, 1, (int64_t[]){1});
    tens(&y, MGE_F32, 4, (int64_t[]){1, 1, 2, 2});
    for (int i = 0; i < 16; i++)
        F(&x)[i] = (float)(i + 1);
    for (int i = 0; i < 9; i++)
        F(&w)[i] = 1;
    F(&b)[0] = 0.5f;
    tnode t;
    mge_attr a[] = {A(MGE_KEY_out, 1), A_list(MGE_KEY_kernel, 1, 3)};
    mge_node *n = mk(&t, MGE_OP_CONV2D, 3, 2, a);
    run_ok(n, (mge_tensor *[]){&x, &w, &b}, (mge_tensor *[]){&y});
    /* 1+2+3+5+6+7+9+10+11 = 54, then +9 per step right, +36 per step down */
    CHECK_NEAR(F(&y)[0], 54.5, 1e-5);
    CHECK_NEAR(F(&y)[1], 63.5, 1e-5);
    CHECK_NEAR(F(&y)[2], 90.5, 1e-5);
    CHECK_NEAR(F(&y)[3], 99.5, 1e-5);

    /* pad=1, no bias: corner = 1+2+5+6 = 14, centre-ish (1,1) = 54 */
    tens(&y2, MGE_F32, 4, (int64_t[]){1, 1, 4, 4});
    mge_attr a2[] = {A(MGE_KEY_out, 1), A_list(MGE_KEY_kernel, 1, 3), A_list(MGE_KEY_pad, 1, 1),
                     A(MGE_KEY_bias, 0)};
    n = mk(&t, MGE_OP_CONV2D, 2, 4, a2);
    run_ok(n, (mge_tensor *[]){&x, &w}, (mge_tensor *[]){&y2});
    CHECK_NEAR(F(&y2)[0], 14, 1e-5);
    CHECK_NEAR(F(&y2)[5], 54, 1e-5);
    CHECK_NEAR(F(&y2)[15], 11 + 12 + 15 + 16, 1e-5);

    tens(&w2, MGE_F32, 4, (int64_t[]){1, 1, 3, 3});
    F(&w2)[0] = 1;
    n = mk(&t, MGE_OP_CONV2D, 2, 2, (mge_attr[]){A(MGE_KEY_out, 1), A_list(MGE_KEY_kernel, 1, 3)});
    run_ok(n, (mge_tensor *[]){&x, &w2}, (mge_tensor *[]){&y});
    CHECK_NEAR(F(&y)[0], 1, 0);
    CHECK_NEAR(F(&y)[1], 2, 0);
    CHECK_NEAR(F(&y)[2], 5, 0);
    CHECK_NEAR(F(&y)[3], 6, 0);

    /* a wrong output shape is refused, not written */
    mge_tensor bad;
    tens(&bad, MGE_F32, 4, (int64_t[]){1, 1, 3, 3});
    mge_error err = {0};
    CHECK(runk(NULL, n, (mge_tensor *[]){&x, &w2}, (mge_tensor *[]){&bad}, &err) == MGE_ERR_SHAPE);
    mge_tensor_free(&bad);
    mge_tensor_free(&x);
    mge_tensor_free(&w);
    mge_tensor_free(&w2);
    mge_tensor_free(&b);
    mge_tensor_free(&y);
    mge_tensor_free(&y2);
}

/* Grouped, strided, padded, dilated conv against an independent version:
 * explicit zero-padded copy of x, then accumulation over kernel taps in
 * the outer loops (scatter order), per group. */
static void test_conv_grouped(void)
{
    enum { N = 2, C = 4, G = 2, O = 6, H = 7, W = 6, KH = 3, KW = 2 };
    const int sh = 2, sw = 1, ph = 1, pw = 2, dh = 2, dw = 1;
    const int OH = (H + 2 * ph - dh * (KH - 1) - 1) / sh + 1, OW = (W + 2 * pw - dw * (KW - 1) - 1) / sw + 1;
    mge_tensor x, w, b, y;
    tens(&x, MGE_F32, 4, (int64_t[]){N, C, H, W});
    tens(&w, MGE_F32, 4, (int64_t[]){O, C / G, KH, KW});
    tens(&b, MGE_F32, 1, (int64_t[]){O});
    tens(&y, MGE_F32, 4, (int64_t[]){N, O, OH, OW});
    fill_rand(&x, 1);
    fill_rand(&w, 2);
    fill_rand(&b, 3);
    tnode t;
    mge_attr a[] = {A(MGE_KEY_out, O),           A_list(MGE_KEY_kernel, 2, KH, KW),
                    A_list(MGE_KEY_stride, 2, sh, sw), A_list(MGE_KEY_pad, 2, ph, pw),
                    A_list(MGE_KEY_dilation, 2, dh, dw), A(MGE_KEY_groups, G)};
    run_ok(mk(&t, MGE_OP_CONV2D, 3, 6, a), (mge_tensor *[]){&x, &w, &b}, (mge_tensor *[]){&y});

    enum { PH = H + 2 * 1, PW = W + 2 * 2 };
    static double xp[N][C][PH][PW], ref[N][O][16][16];
    memset(xp, 0, sizeof xp);
    memset(ref, 0, sizeof ref);
    for (int i = 0; i < N * C * H * W; i++) {
        int ww = i % W, hh = i / W % H, c = i / (W * H) % C, nn = i / (W * H * C);
        xp[nn][c][hh + ph][ww + pw] = F(&x)[i];
    }
    for (int kh = 0; kh < KH; kh++)
        for (int kw = 0; kw < KW; kw++)
            for (int nn = 0; nn < N; nn++)
                for (int g = 0; g < G; g++)
                    for (int oc = 0; oc < O / G; oc++)
                        for (int ic = 0; ic < C / G; ic++) {
                            int o = g * (O / G) + oc, c = g * (C / G) + ic;
                            double wv = F(&w)[((o * (C / G) + ic) * KH + kh) * KW + kw];
                            for (int oh = 0; oh < OH; oh++)
                                for (int ow = 0; ow < OW; ow++)
                                    ref[nn][o][oh][ow] += wv * xp[nn][c][oh * sh + kh * dh][ow * sw + kw * dw];
                        }
    double maxerr = 0;
    for (int nn = 0; nn < N; nn++)
        for (int o = 0; o < O; o++)
            for (int oh = 0; oh < OH; oh++)
                for (int ow = 0; ow < OW; ow++) {
                    double e = fabs(ref[nn][o][oh][ow] + F(&b)[o] - F(&y)[((nn * O + o) * OH + oh) * OW + ow]);
                    maxerr = e > maxerr ? e : maxerr;
                }
    CHECK(OH == 3 && OW == 9);
    CHECK_NEAR(maxerr, 0, 1e-5);
    mge_tensor_free(&x);
    mge_tensor_free(&w);
    mge_tensor_free(&b);
    mge_tensor_free(&y);
}

/* linear: y = x W^T + b on [2,2,3] x; matmul with a broadcast batch and a
 * transposed, 1-D right operand. */
static void test_linear_matmul(void)
{
    mge_tensor x, w, b, y;
    tens(&x, MGE_F32, 3, (int64_t[]){2, 2, 3});
    tens(&w, MGE_F32, 2, (int64_t[]){2, 3});
    tens(&b, MGE_F32, 1, (int64_t[]){2});
    tens(&y, MGE_F32, 3, (int64_t[]){2, 2, 2});
    for (int i = 0; i < 12; i++)
        F(&x)[i] = (float)i;
    float wv[6] = {1, 0, 0, 0, 1, -1};
    memcpy(w.data, wv, sizeof wv);
    F(&b)[0] = 10;
    F(&b)[1] = 20;
    tnode t;
    run_ok(mk(&t, MGE_OP_LINEAR, 3, 1, (mge_attr[]){A(MGE_KEY_out, 2)}), (mge_tensor *[]){&x, &w, &b},
           (mge_tensor *[]){&y});
    for (int r = 0; r < 4; r++) {
        CHECK_NEAR(F(&y)[r * 2], F(&x)[r * 3] + 10, 1e-6);
        CHECK_NEAR(F(&y)[r * 2 + 1], F(&x)[r * 3 + 1] - F(&x)[r * 3 + 2] + 20, 1e-6);
    }

    /* a [3,1,2,4] @ b^T where b is [2,5,4] -> [3,2,2,5] */
    mge_tensor ta, tb, ty;
    tens(&ta, MGE_F32, 4, (int64_t[]){3, 1, 2, 4});
    tens(&tb, MGE_F32, 3, (int64_t[]){2, 5, 4});
    tens(&ty, MGE_F32, 4, (int64_t[]){3, 2, 2, 5});
    fill_rand(&ta, 4);
    fill_rand(&tb, 5);
    run_ok(mk(&t, MGE_OP_MATMUL, 2, 1, (mge_attr[]){A(MGE_KEY_transpose_b, 1)}), (mge_tensor *[]){&ta, &tb},
           (mge_tensor *[]){&ty});
    double maxerr = 0;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++)
            for (int m = 0; m < 2; m++)
                for (int nn = 0; nn < 5; nn++) {
                    double s = 0;
                    for (int k = 0; k < 4; k++)
                        s += (double)F(&ta)[(i * 2 + m) * 4 + k] * F(&tb)[(j * 5 + nn) * 4 + k];
                    double e = fabs(s - F(&ty)[((i * 2 + j) * 2 + m) * 5 + nn]);
                    maxerr = e > maxerr ? e : maxerr;
                }
    CHECK_NEAR(maxerr, 0, 1e-5);

    /* 1-D on both sides: a dot product, rank 0 */
    mge_tensor v, u, d;
    tens(&v, MGE_F32, 1, (int64_t[]){3});
    tens(&u, MGE_F32, 1, (int64_t[]){3});
    tens(&d, MGE_F32, 0, NULL);
    for (int i = 0; i < 3; i++) {
        F(&v)[i] = (float)(i + 1);
        F(&u)[i] = (float)(2 * i - 1);
    }
    run_ok(mk(&t, MGE_OP_MATMUL, 2, 0, NULL), (mge_tensor *[]){&v, &u}, (mge_tensor *[]){&d});
    CHECK_NEAR(F(&d)[0], 1 * -1 + 2 * 1 + 3 * 3, 1e-6);

    /* i32: [[1,2],[3,4]] @ [[5,6],[7,8]] = [[19,22],[43,50]]; products wrap */
    mge_tensor ia, ib, iy;
    int64_t d22[2] = {2, 2};
    tens(&ia, MGE_I32, 2, d22);
    tens(&ib, MGE_I32, 2, d22);
    tens(&iy, MGE_I32, 2, d22);
    int32_t av[4] = {1, 2, 3, 4}, bv[4] = {5, 6, 7, 8};
    memcpy(ia.data, av, sizeof av);
    memcpy(ib.data, bv, sizeof bv);
    run_ok(mk(&t, MGE_OP_MATMUL, 2, 0, NULL), (mge_tensor *[]){&ia, &ib}, (mge_tensor *[]){&iy});
    int32_t *yv = iy.data;
    CHECK(yv[0] == 19 && yv[1] == 22 && yv[2] == 43 && yv[3] == 50);
    ((int32_t *)ia.data)[0] = INT32_MAX;
    run_ok(mk(&t, MGE_OP_MATMUL, 2, 0, NULL), (mge_tensor *[]){&ia, &ib}, (mge_tensor *[]){&iy});
    CHECK(yv[0] == (int32_t)(uint32_t)(5u * (uint32_t)INT32_MAX + 14u));
    mge_tensor_free(&ia);
    mge_tensor_free(&ib);
    mge_tensor_free(&iy);
    mge_tensor *all[] = {&x, &w, &b, &y, &ta, &tb, &ty, &v, &u, &d};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        mge_tensor_free(all[i]);
}

/* ---------------------------------------------------------------- norm */

/* Training batchnorm on x[4,1,1,1] = 1,2,3,6: mean 3, biased var 3.5,
 * unbiased 14/3; running stats move by momentum; counter increments. */
static void test_batchnorm(void)
{
    mge_tensor x, w, b, rm, rv, nbt, y;
    int64_t c1[1] = {1};
    tens(&x, MGE_F32, 4, (int64_t[]){4, 1, 1, 1});
    tens(&w, MGE_F32, 1, c1);
    tens(&b, MGE_F32, 1, c1);
    tens(&rm, MGE_F32, 1, c1);
    tens(&rv, MGE_F32, 1, c1);
    tens(&nbt, MGE_I64, 0, NULL);
    tens(&y, MGE_F32, 4, (int64_t[]){4, 1, 1, 1});
    float xv[4] = {1, 2, 3, 6};
    memcpy(x.data, xv, sizeof xv);
    F(&w)[0] = 2;
    F(&b)[0] = 1;
    F(&rv)[0] = 1;
    ((int64_t *)nbt.data)[0] = 7;
    tnode t;
    mge_node *n = mk(&t, MGE_OP_BATCHNORM, 6, 0, NULL);
    mge_kctx ctx = ctx0;
    ctx.training = 1;
    mge_error err = {0};
    CHECK_OK(runk(&ctx, n, (mge_tensor *[]){&x, &w, &b, &rm, &rv, &nbt}, (mge_tensor *[]){&y}, &err), err);
    for (int i = 0; i < 4; i++)
        CHECK_NEAR(F(&y)[i], (xv[i] - 3) / sqrt(3.5 + 1e-5) * 2 + 1, 1e-5);
    CHECK_NEAR(F(&rm)[0], 0.1 * 3, 1e-6);
    CHECK_NEAR(F(&rv)[0], 0.9 + 0.1 * 14.0 / 3.0, 1e-6);
    CHECK(((int64_t *)nbt.data)[0] == 8);

    /* eval uses the running statistics and leaves them alone */
    CHECK_OK(runk(NULL, n, (mge_tensor *[]){&x, &w, &b, &rm, &rv, &nbt}, (mge_tensor *[]){&y}, &err), err);
    double m = F(&rm)[0], v = F(&rv)[0];
    for (int i = 0; i < 4; i++)
        CHECK_NEAR(F(&y)[i], (xv[i] - m) / sqrt(v + 1e-5) * 2 + 1, 1e-5);
    CHECK(((int64_t *)nbt.data)[0] == 8);

    /* layernorm over the last dim of [2,4] */
    mge_tensor lx, lw, lb, ly;
    tens(&lx, MGE_F32, 2, (int64_t[]){2, 4});
    tens(&lw, MGE_F32, 1, (int64_t[]){4});
    tens(&lb, MGE_F32, 1, (int64_t[]){4});
    tens(&ly, MGE_F32, 2, (int64_t[]){2, 4});
    float lxv[8] = {1, 2, 3, 4, 10, 10, 10, 14};
    memcpy(lx.data, lxv, sizeof lxv);
    for (int i = 0; i < 4; i++) {
        F(&lw)[i] = 1;
        F(&lb)[i] = (float)i;
    }
    run_ok(mk(&t, MGE_OP_LAYERNORM, 3, 0, NULL), (mge_tensor *[]){&lx, &lw, &lb}, (mge_tensor *[]){&ly});
    /* row 0: mean 2.5, var 1.25; row 1: mean 11, var 3 */
    CHECK_NEAR(F(&ly)[0], (1 - 2.5) / sqrt(1.25 + 1e-5), 1e-5);
    CHECK_NEAR(F(&ly)[3], (4 - 2.5) / sqrt(1.25 + 1e-5) + 3, 1e-5);
    CHECK_NEAR(F(&ly)[7], (14 - 11) / sqrt(3 + 1e-5) + 3, 1e-5);
    mge_tensor *all[] = {&x, &w, &b, &rm, &rv, &nbt, &y, &lx, &lw, &lb, &ly};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        mge_tensor_free(all[i]);
}

/* ---------------------------------------------------------------- unary, cast */

static void test_unary(void)
{
    float xv[6] = {-4, -1, -0.5f, 0, 0.5f, 7};
    mge_tensor x, y;
    tens(&x, MGE_F32, 1, (int64_t[]){6});
    tens(&y, MGE_F32, 1, (int64_t[]){6});
    tnode t;
    struct {
        int op;
        double (*f)(double);
    } cases[] = {{MGE_OP_TANH, tanh}, {MGE_OP_EXP, exp}, {MGE_OP_ABS, fabs}};
    for (size_t c = 0; c < 3; c++) {
        memcpy(x.data, xv, sizeof xv);
        run_ok(mk(&t, cases[c].op, 1, 0, NULL), (mge_tensor *[]){&x}, (mge_tensor *[]){&y});
        for (int i = 0; i < 6; i++)
            CHECK_NEAR(F(&y)[i], cases[c].f(xv[i]), 1e-5 * fabs(cases[c].f(xv[i])) + 1e-7);
    }
    /* in place: output is the input's buffer */
    memcpy(x.data, xv, sizeof xv);
    run_ok(mk(&t, MGE_OP_RELU6, 1, 0, NULL), (mge_tensor *[]){&x}, (mge_tensor *[]){&x});
    CHECK(F(&x)[0] == 0 && F(&x)[4] == 0.5f && F(&x)[5] == 6);
    memcpy(x.data, xv, sizeof xv);
    run_ok(mk(&t, MGE_OP_LEAKY_RELU, 1, 1, (mge_attr[]){A_f(MGE_KEY_alpha, 0.1)}), (mge_tensor *[]){&x},
           (mge_tensor *[]){&y});
    CHECK_NEAR(F(&y)[0], -0.4, 1e-6);
    CHECK_NEAR(F(&y)[5], 7, 0);
    run_ok(mk(&t, MGE_OP_GELU, 1, 0, NULL), (mge_tensor *[]){&x}, (mge_tensor *[]){&y});
    CHECK_NEAR(F(&y)[1], -0.15865525393145707, 1e-6); /* -1 * Phi(-1) */
    run_ok(mk(&t, MGE_OP_HSWISH, 1, 0, NULL), (mge_tensor *[]){&x}, (mge_tensor *[]){&y});
    CHECK_NEAR(F(&y)[1], -1 * 2 / 6.0, 1e-6);
    CHECK_NEAR(F(&y)[0], 0, 0);
    CHECK_NEAR(F(&y)[5], 7, 1e-6);
    run_ok(mk(&t, MGE_OP_SILU, 1, 0, NULL), (mge_tensor *[]){&x}, (mge_tensor *[]){&y});
    CHECK_NEAR(F(&y)[4], 0.5 / (1 + exp(-0.5)), 1e-6);

    /* integer neg/abs wrap at the minimum, relu6 clamps */
    mge_tensor xi, yi;
    tens(&xi, MGE_I8, 1, (int64_t[]){4});
    tens(&yi, MGE_I8, 1, (int64_t[]){4});
    int8_t iv[4] = {-128, -3, 5, 100};
    memcpy(xi.data, iv, 4);
    run_ok(mk(&t, MGE_OP_ABS, 1, 0, NULL), (mge_tensor *[]){&xi}, (mge_tensor *[]){&yi});
    CHECK(((int8_t *)yi.data)[0] == -128 && ((int8_t *)yi.data)[1] == 3);
    run_ok(mk(&t, MGE_OP_RELU6, 1, 0, NULL), (mge_tensor *[]){&xi}, (mge_tensor *[]){&yi});
    CHECK(((int8_t *)yi.data)[1] == 0 && ((int8_t *)yi.data)[2] == 5 && ((int8_t *)yi.data)[3] == 6);
    mge_tensor_free(&x);
    mge_tensor_free(&y);
    mge_tensor_free(&xi);
    mge_tensor_free(&yi);
}

/* Dropout: identity in eval; in training the kept fraction is near 1-p and
 * kept values are scaled by 1/(1-p). */
static void test_dropout(void)
{
    enum { K = 20000 };
    mge_tensor x, y;
    tens(&x, MGE_F32, 1, (int64_t[]){K});
    tens(&y, MGE_F32, 1, (int64_t[]){K});
    for (int i = 0; i < K; i++)
        F(&x)[i] = 1.5f;
    tnode t;
    mge_node *n = mk(&t, MGE_OP_DROPOUT, 1, 1, (mge_attr[]){A_f(MGE_KEY_p, 0.25)});
    run_ok(n, (mge_tensor *[]){&x}, (mge_tensor *[]){&y});
    CHECK(F(&y)[0] == 1.5f && F(&y)[K - 1] == 1.5f);
    mge_rng r;
    mge_rng_seed(&r, 42);
    mge_kctx ctx = ctx0;
    ctx.training = 1;
    ctx.rng = &r;
    mge_error err = {0};
    CHECK_OK(runk(&ctx, n, (mge_tensor *[]){&x}, (mge_tensor *[]){&y}, &err), err);
    int kept = 0, bad = 0;
    for (int i = 0; i < K; i++) {
        if (F(&y)[i] != 0)
            kept++;
        bad += F(&y)[i] != 0 && fabsf(F(&y)[i] - 2.0f) > 1e-6f;
    }
    CHECK(bad == 0);
    CHECK_MSG(fabs(kept / (double)K - 0.75) < 0.02, "kept %d of %d", kept, K);
    /* training without a generator is an error, not a crash */
    ctx.rng = NULL;
    CHECK(runk(&ctx, n, (mge_tensor *[]){&x}, (mge_tensor *[]){&y}, &err) == MGE_ERR_INVALID);
    mge_tensor_free(&x);
    mge_tensor_free(&y);
}

static mge_node *cast_node(tnode *t, mge_dtype to)
{
    mge_attr a;
    memset(&a, 0, sizeof a);
    a.key = MGE_KEY_dtype;
    a.n = 1;
    a.i[0] = to;
    return mk(t, MGE_OP_CAST, 1, 1, &a);
}

static void test_cast(void)
{
    float xv[6] = {0.5f, -2, 65504, 0.1f, -2.7f, 0};
    mge_tensor x, h, back, i32, bl;
    int64_t d6[1] = {6};
    tens(&x, MGE_F32, 1, d6);
    tens(&h, MGE_F16, 1, d6);
    tens(&back, MGE_F32, 1, d6);
    tens(&i32, MGE_I32, 1, d6);
    tens(&bl, MGE_BOOL, 1, d6);
    memcpy(x.data, xv, sizeof xv);
    tnode t;
    run_ok(cast_node(&t, MGE_F16), (mge_tensor *[]){&x}, (mge_tensor *[]){&h});
    CHECK(((uint16_t *)h.data)[0] == 0x3800); /* 0.5 in binary16 */
    run_ok(cast_node(&t, MGE_F32), (mge_tensor *[]){&h}, (mge_tensor *[]){&back});
    for (int i = 0; i < 6; i++)
        CHECK_NEAR(F(&back)[i], xv[i], i == 3 || i == 4 ? 1e-3 * fabs(xv[i]) : 0);
    CHECK(F(&back)[3] != xv[3]); /* 0.1 is not exact in f16 */
    run_ok(cast_node(&t, MGE_I32), (mge_tensor *[]){&x}, (mge_tensor *[]){&i32});
    int32_t *ip = i32.data;
    CHECK(ip[0] == 0 && ip[1] == -2 && ip[2] == 65504 && ip[4] == -2);
    run_ok(cast_node(&t, MGE_BOOL), (mge_tensor *[]){&x}, (mge_tensor *[]){&bl});
    uint8_t *bp = bl.data;
    CHECK(bp[0] == 1 && bp[3] == 1 && bp[5] == 0);
    /* i32 -> u8 keeps the low byte; bool -> f32 is 0/1 */
    mge_tensor u8, f;
    tens(&u8, MGE_U8, 1, d6);
    tens(&f, MGE_F32, 1, d6);
    ip[0] = 257;
    ip[1] = -1;
    run_ok(cast_node(&t, MGE_U8), (mge_tensor *[]){&i32}, (mge_tensor *[]){&u8});
    CHECK(((uint8_t *)u8.data)[0] == 1 && ((uint8_t *)u8.data)[1] == 255);
    run_ok(cast_node(&t, MGE_F32), (mge_tensor *[]){&bl}, (mge_tensor *[]){&f});
    CHECK(F(&f)[0] == 1 && F(&f)[5] == 0);
    /* every pair of the eight plain dtypes has a kernel */
    const mge_dtype dts[] = {MGE_F32, MGE_F16, MGE_BF16, MGE_I8, MGE_U8, MGE_I32, MGE_I64, MGE_BOOL};
    for (int a = 0; a < 8; a++)
        for (int b = 0; b < 8; b++) {
            mge_tensor s, dd;
            tens(&s, dts[a], 1, d6);
            tens(&dd, dts[b], 1, d6);
            mge_error err = {0};
            CHECK_OK(runk(NULL, cast_node(&t, dts[b]), (mge_tensor *[]){&s}, (mge_tensor *[]){&dd}, &err), err);
            mge_tensor_free(&s);
            mge_tensor_free(&dd);
        }
    mge_tensor *all[] = {&x, &h, &back, &i32, &bl, &u8, &f};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        mge_tensor_free(all[i]);
}

/* ---------------------------------------------------------------- binary */

static void test_broadcast(void)
{
    mge_tensor a, b, y;
    tens(&a, MGE_F32, 3, (int64_t[]){2, 1, 3});
    tens(&b, MGE_F32, 2, (int64_t[]){4, 1});
    tens(&y, MGE_F32, 3, (int64_t[]){2, 4, 3});
    for (int i = 0; i < 6; i++)
        F(&a)[i] = (float)(i * 10);
    for (int i = 0; i < 4; i++)
        F(&b)[i] = (float)(i + 1);
    tnode t;
    run_ok(mk(&t, MGE_OP_ADD, 2, 0, NULL), (mge_tensor *[]){&a, &b}, (mge_tensor *[]){&y});
    int bad = 0;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++)
            for (int k = 0; k < 3; k++)
                bad += F(&y)[(i * 4 + j) * 3 + k] != F(&a)[i * 3 + k] + F(&b)[j];
    CHECK(bad == 0);
    run_ok(mk(&t, MGE_OP_SUB, 2, 0, NULL), (mge_tensor *[]){&b, &a}, (mge_tensor *[]){&y});
    CHECK(F(&y)[(1 * 4 + 2) * 3 + 1] == F(&b)[2] - F(&a)[4]);

    /* incompatible shapes are an error */
    mge_tensor c;
    tens(&c, MGE_F32, 1, (int64_t[]){2});
    mge_error err = {0};
    CHECK(runk(NULL, &t.n, (mge_tensor *[]){&a, &c}, (mge_tensor *[]){&y}, &err) == MGE_ERR_SHAPE);

    /* i32 maximum, and pow with a scalar (rank 0) exponent */
    mge_tensor ia, ib, iy, e, p;
    tens(&ia, MGE_I32, 1, (int64_t[]){3});
    tens(&ib, MGE_I32, 1, (int64_t[]){1});
    tens(&iy, MGE_I32, 1, (int64_t[]){3});
    ((int32_t *)ia.data)[0] = -5;
    ((int32_t *)ia.data)[1] = 2;
    ((int32_t *)ia.data)[2] = 9;
    ((int32_t *)ib.data)[0] = 1;
    run_ok(mk(&t, MGE_OP_MAXIMUM, 2, 0, NULL), (mge_tensor *[]){&ia, &ib}, (mge_tensor *[]){&iy});
    CHECK(((int32_t *)iy.data)[0] == 1 && ((int32_t *)iy.data)[1] == 2 && ((int32_t *)iy.data)[2] == 9);
    tens(&e, MGE_F32, 0, NULL);
    tens(&p, MGE_F32, 1, (int64_t[]){2});
    F(&e)[0] = 3;
    mge_tensor *pin[] = {&c, &e};
    F(&c)[0] = 2;
    F(&c)[1] = -1.5f;
    run_ok(mk(&t, MGE_OP_POW, 2, 0, NULL), pin, (mge_tensor *[]){&p});
    CHECK_NEAR(F(&p)[0], 8, 0);
    CHECK_NEAR(F(&p)[1], -3.375, 1e-6);
    mge_tensor *all[] = {&a, &b, &y, &c, &ia, &ib, &iy, &e, &p};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        mge_tensor_free(all[i]);
}

/* ---------------------------------------------------------------- pooling */

static void test_pool(void)
{
    mge_tensor x, y;
    tens(&x, MGE_F32, 4, (int64_t[]){1, 1, 5, 5});
    tens(&y, MGE_F32, 4, (int64_t[]){1, 1, 3, 3});
    for (int i = 0; i < 25; i++)
        F(&x)[i] = (float)i;
    tnode t;
    /* kernel 2, stride 2, ceil_mode: the last row/column window holds one
     * real row/column: out[i][j] = x[min(2i+1,4)][min(2j+1,4)] */
    mge_attr a[] = {A_list(MGE_KEY_kernel, 1, 2), A(MGE_KEY_ceil_mode, 1)};
    run_ok(mk(&t, MGE_OP_MAXPOOL2D, 1, 2, a), (mge_tensor *[]){&x}, (mge_tensor *[]){&y});
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            int r = 2 * i + 1 > 4 ? 4 : 2 * i + 1, c = 2 * j + 1 > 4 ? 4 : 2 * j + 1;
            CHECK_NEAR(F(&y)[i * 3 + j], r * 5 + c, 0);
        }
    /* kernel 3, stride 2, pad 1: padding never wins even for negative input */
    for (int i = 0; i < 25; i++)
        F(&x)[i] = (float)(-100 + i);
    mge_attr a2[] = {A_list(MGE_KEY_kernel, 1, 3), A_list(MGE_KEY_stride, 1, 2), A_list(MGE_KEY_pad, 1, 1)};
    run_ok(mk(&t, MGE_OP_MAXPOOL2D, 1, 3, a2), (mge_tensor *[]){&x}, (mge_tensor *[]){&y});
    CHECK_NEAR(F(&y)[0], -100 + 6, 0);
    CHECK_NEAR(F(&y)[8], -100 + 24, 0);
    /* avgpool, same geometry: corner window has 4 real of 9 */
    for (int i = 0; i < 25; i++)
        F(&x)[i] = (float)i;
    run_ok(mk(&t, MGE_OP_AVGPOOL2D, 1, 3, a2), (mge_tensor *[]){&x}, (mge_tensor *[]){&y});
    CHECK_NEAR(F(&y)[0], (0 + 1 + 5 + 6) / 9.0, 1e-6);
    mge_attr a3[] = {A_list(MGE_KEY_kernel, 1, 3), A_list(MGE_KEY_stride, 1, 2), A_list(MGE_KEY_pad, 1, 1),
                     A(MGE_KEY_count_include_pad, 0)};
    run_ok(mk(&t, MGE_OP_AVGPOOL2D, 1, 4, a3), (mge_tensor *[]){&x}, (mge_tensor *[]){&y});
    CHECK_NEAR(F(&y)[0], (0 + 1 + 5 + 6) / 4.0, 1e-6);

    /* ceil_mode avgpool on a row 1..6, kernel [1,3], stride [1,2], pad [0,1]:
     * four windows; the last starts in the input and is clipped to
     * input+pad (2 wide) for the divisor with count_include_pad, to the
     * input (1 wide) without. PyTorch: [1,3,5,3] and [1.5,3,5,6]. */
    mge_tensor r, ry;
    tens(&r, MGE_F32, 4, (int64_t[]){1, 1, 1, 6});
    tens(&ry, MGE_F32, 4, (int64_t[]){1, 1, 1, 4});
    for (int i = 0; i < 6; i++)
        F(&r)[i] = (float)(i + 1);
    const double incl[4] = {1, 3, 5, 3}, excl[4] = {1.5, 3, 5, 6};
    for (int cip = 0; cip < 2; cip++) {
        mge_attr a4[] = {A_list(MGE_KEY_kernel, 2, 1, 3), A_list(MGE_KEY_stride, 2, 1, 2),
                         A_list(MGE_KEY_pad, 2, 0, 1), A(MGE_KEY_ceil_mode, 1),
                         A(MGE_KEY_count_include_pad, !cip)};
        run_ok(mk(&t, MGE_OP_AVGPOOL2D, 1, 5, a4), (mge_tensor *[]){&r}, (mge_tensor *[]){&ry});
        for (int i = 0; i < 4; i++)
            CHECK_NEAR(F(&ry)[i], cip ? excl[i] : incl[i], 1e-6);
    }
    /* NaN wins a max window, as in PyTorch */
    F(&x)[6] = NAN;
    run_ok(mk(&t, MGE_OP_MAXPOOL2D, 1, 3, a2), (mge_tensor *[]){&x}, (mge_tensor *[]){&y});
    CHECK(isnan(F(&y)[0]) && isnan(F(&y)[1]) && !isnan(F(&y)[2]) && F(&y)[8] == 24);
    F(&x)[6] = 6;
    /* global average */
    mge_tensor g;
    tens(&g, MGE_F32, 4, (int64_t[]){1, 1, 1, 1});
    run_ok(mk(&t, MGE_OP_GLOBAL_AVGPOOL, 1, 0, NULL), (mge_tensor *[]){&x}, (mge_tensor *[]){&g});
    CHECK_NEAR(F(&g)[0], 12, 1e-6);
    mge_tensor *all[] = {&x, &y, &r, &ry, &g};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        mge_tensor_free(all[i]);
}

/* ---------------------------------------------------------------- reductions */

static void test_softmax(void)
{
    mge_tensor x, y, l;
    tens(&x, MGE_F32, 2, (int64_t[]){3, 4});
    tens(&y, MGE_F32, 2, (int64_t[]){3, 4});
    tens(&l, MGE_F32, 2, (int64_t[]){3, 4});
    float xv[12] = {1, 2, 3, 4, 1000, 1001, 1002, 1003, -5, 0, 5, 0};
    memcpy(x.data, xv, sizeof xv);
    tnode t;
    run_ok(mk(&t, MGE_OP_SOFTMAX, 1, 0, NULL), (mge_tensor *[]){&x}, (mge_tensor *[]){&y});
    run_ok(mk(&t, MGE_OP_LOG_SOFTMAX, 1, 0, NULL), (mge_tensor *[]){&x}, (mge_tensor *[]){&l});
    for (int r = 0; r < 3; r++) {
        double s = 0;
        for (int c = 0; c < 4; c++) {
            s += F(&y)[r * 4 + c];
            CHECK_NEAR(F(&l)[r * 4 + c], log(F(&y)[r * 4 + c]), 1e-5);
        }
        CHECK_NEAR(s, 1, 1e-6);
    }
    /* shift invariance: rows 0 and 1 differ by a constant */
    for (int c = 0; c < 4; c++)
        CHECK_NEAR(F(&y)[c], F(&y)[4 + c], 1e-6);
    /* along axis 0 the columns sum to 1 */
    run_ok(mk(&t, MGE_OP_SOFTMAX, 1, 1, (mge_attr[]){A_list(MGE_KEY_axis, 1, 0)}), (mge_tensor *[]){&x},
           (mge_tensor *[]){&y});
    for (int c = 0; c < 4; c++)
        CHECK_NEAR(F(&y)[c] + F(&y)[4 + c] + F(&y)[8 + c], 1, 1e-6);
    mge_tensor_free(&x);
    mge_tensor_free(&y);
    mge_tensor_free(&l);
}

static void test_reduce(void)
{
    mge_tensor x, s, m, mx, all1, am;
    tens(&x, MGE_F32, 3, (int64_t[]){2, 3, 4});
    for (int i = 0; i < 24; i++)
        F(&x)[i] = (float)((i * 7) % 11);
    tnode t;
    /* sum over axes (0, 2) keepdim -> [1,3,1] */
    tens(&s, MGE_F32, 3, (int64_t[]){1, 3, 1});
    run_ok(mk(&t, MGE_OP_SUM, 1, 2, (mge_attr[]){A_list(MGE_KEY_axis, 2, 0, -1), A(MGE_KEY_keepdim, 1)}),
           (mge_tensor *[]){&x}, (mge_tensor *[]){&s});
    for (int j = 0; j < 3; j++) {
        double e = 0;
        for (int i = 0; i < 2; i++)
            for (int k = 0; k < 4; k++)
                e += F(&x)[(i * 3 + j) * 4 + k];
        CHECK_NEAR(F(&s)[j], e, 1e-5);
    }
    /* mean over axis 1 -> [2,4]; max over axis 1 */
    tens(&m, MGE_F32, 2, (int64_t[]){2, 4});
    tens(&mx, MGE_F32, 2, (int64_t[]){2, 4});
    run_ok(mk(&t, MGE_OP_MEAN, 1, 1, (mge_attr[]){A_list(MGE_KEY_axis, 1, 1)}), (mge_tensor *[]){&x},
           (mge_tensor *[]){&m});
    run_ok(mk(&t, MGE_OP_MAX, 1, 1, (mge_attr[]){A_list(MGE_KEY_axis, 1, 1)}), (mge_tensor *[]){&x},
           (mge_tensor *[]){&mx});
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 4; k++) {
            double e = 0, mm = -1;
            for (int j = 0; j < 3; j++) {
                double v = F(&x)[(i * 3 + j) * 4 + k];
                e += v;
                mm = v > mm ? v : mm;
            }
            CHECK_NEAR(F(&m)[i * 4 + k], e / 3, 1e-5);
            CHECK_NEAR(F(&mx)[i * 4 + k], mm, 0);
        }
    /* no axis: everything, rank 0 */
    tens(&all1, MGE_F32, 0, NULL);
    run_ok(mk(&t, MGE_OP_SUM, 1, 0, NULL), (mge_tensor *[]){&x}, (mge_tensor *[]){&all1});
    double tot = 0;
    for (int i = 0; i < 24; i++)
        tot += F(&x)[i];
    CHECK_NEAR(F(&all1)[0], tot, 1e-4);
    /* argmax: first maximum wins */
    mge_tensor ax, ay;
    tens(&ax, MGE_F32, 2, (int64_t[]){2, 4});
    tens(&am, MGE_I64, 1, (int64_t[]){2});
    float av[8] = {1, 5, 5, 2, -3, -1, -2, -1};
    memcpy(ax.data, av, sizeof av);
    run_ok(mk(&t, MGE_OP_ARGMAX, 1, 0, NULL), (mge_tensor *[]){&ax}, (mge_tensor *[]){&am});
    CHECK(((int64_t *)am.data)[0] == 1 && ((int64_t *)am.data)[1] == 1);
    tens(&ay, MGE_I64, 2, (int64_t[]){1, 4});
    run_ok(mk(&t, MGE_OP_ARGMAX, 1, 2, (mge_attr[]){A_list(MGE_KEY_axis, 1, 0), A(MGE_KEY_keepdim, 1)}),
           (mge_tensor *[]){&ax}, (mge_tensor *[]){&ay});
    int64_t *ap = ay.data;
    CHECK(ap[0] == 0 && ap[1] == 0 && ap[2] == 0 && ap[3] == 0);
    mge_tensor *all[] = {&x, &s, &m, &mx, &all1, &am, &ax, &ay};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        mge_tensor_free(all[i]);
}

/* ---------------------------------------------------------------- shape ops */

static void test_shape_ops(void)
{
    mge_tensor x, y, z, bad, c1, c2, cy;
    tens(&x, MGE_I32, 2, (int64_t[]){2, 7});
    for (int i = 0; i < 14; i++)
        ((int32_t *)x.data)[i] = i;
    tnode t;
    /* slice axis 1, start 1, end -1, step 2 -> columns 1, 3, 5 */
    tens(&y, MGE_I32, 2, (int64_t[]){2, 3});
    mge_attr a[] = {A(MGE_KEY_axis, 1), A(MGE_KEY_start, 1), A(MGE_KEY_end, -1),
                    A(MGE_KEY_step, 2)};
    run_ok(mk(&t, MGE_OP_SLICE, 1, 4, a), (mge_tensor *[]){&x}, (mge_tensor *[]){&y});
    int32_t *yp = y.data;
    CHECK(yp[0] == 1 && yp[1] == 3 && yp[2] == 5 && yp[3] == 8 && yp[4] == 10 && yp[5] == 12);
    /* a zero step is rejected (negative steps walk backwards: test_shape_ops.c) */
    mge_attr an[] = {A(MGE_KEY_axis, 1), A(MGE_KEY_step, 0)};
    mge_error err = {0};
    CHECK(runk(NULL, mk(&t, MGE_OP_SLICE, 1, 2, an), (mge_tensor *[]){&x}, (mge_tensor *[]){&y}, &err) ==
          MGE_ERR_INVALID);
    CHECK(strstr(err.msg, "step") != NULL);
    /* start beyond the end clamps to an empty slice */
    tens(&bad, MGE_I32, 2, (int64_t[]){2, 0});
    mge_attr ae[] = {A(MGE_KEY_axis, -1), A(MGE_KEY_start, 50)};
    run_ok(mk(&t, MGE_OP_SLICE, 1, 2, ae), (mge_tensor *[]){&x}, (mge_tensor *[]){&bad});

    /* transpose [2,7] -> [7,2] */
    tens(&z, MGE_I32, 2, (int64_t[]){7, 2});
    run_ok(mk(&t, MGE_OP_TRANSPOSE, 1, 1, (mge_attr[]){A_list(MGE_KEY_perm, 2, 1, 0)}), (mge_tensor *[]){&x},
           (mge_tensor *[]){&z});
    int badt = 0;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 7; j++)
            badt += ((int32_t *)z.data)[j * 2 + i] != ((int32_t *)x.data)[i * 7 + j];
    CHECK(badt == 0);

    /* concat along axis 1: [2,7] and [2,2] -> [2,9] */
    tens(&c1, MGE_I32, 2, (int64_t[]){2, 2});
    tens(&cy, MGE_I32, 2, (int64_t[]){2, 9});
    for (int i = 0; i < 4; i++)
        ((int32_t *)c1.data)[i] = 100 + i;
    run_ok(mk(&t, MGE_OP_CONCAT, 2, 1, (mge_attr[]){A_list(MGE_KEY_axis, 1, 1)}), (mge_tensor *[]){&x, &c1},
           (mge_tensor *[]){&cy});
    int32_t *cp = cy.data;
    CHECK(cp[0] == 0 && cp[6] == 6 && cp[7] == 100 && cp[8] == 101 && cp[9] == 7 && cp[17] == 103);

    /* reshape copies when not aliased */
    tens(&c2, MGE_I32, 3, (int64_t[]){7, 1, 2});
    run_ok(mk(&t, MGE_OP_RESHAPE, 1, 1, (mge_attr[]){A_list(MGE_KEY_shape, 3, 7, 1, 2)}), (mge_tensor *[]){&x},
           (mge_tensor *[]){&c2});
    CHECK(memcmp(c2.data, x.data, 14 * 4) == 0);
    mge_tensor *all[] = {&x, &y, &z, &bad, &c1, &c2, &cy};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        mge_tensor_free(all[i]);
}

/* ---------------------------------------------------------------- messages */

/* Kernels name the op their context names (the executor passes the op's
 * name: kernels do not look it up in the registry), else the node. */
static void test_opname(void)
{
    mge_tensor x, y, lab, l;
    tens(&x, MGE_F32, 2, (int64_t[]){2, 7});
    tens(&y, MGE_F32, 2, (int64_t[]){2, 7});
    tens(&lab, MGE_I64, 1, (int64_t[]){2});
    tens(&l, MGE_F32, 0, NULL);
    memset(x.data, 0, x.nbytes);
    ((int64_t *)lab.data)[0] = 0;
    ((int64_t *)lab.data)[1] = 9;   /* outside the 7 classes */
    tnode t, tc;
    mge_node *sl = mk(&t, MGE_OP_SLICE, 1, 2, (mge_attr[]){A(MGE_KEY_axis, 1), A(MGE_KEY_step, 0)});
    mge_node *ce = mk(&tc, MGE_OP_CROSS_ENTROPY, 2, 0, NULL);
    /* a ref kernel, and a cpu one that checks the labels itself */
    const mge_kernel *ks = mge_backend_kernel(mge_backend_ref(), MGE_OP_SLICE, MGE_F32);
    const mge_kernel *kc = mge_backend_kernel(mge_backend_cpu(), MGE_OP_CROSS_ENTROPY, MGE_F32);
    const char *names[2] = {"slice", NULL}, *want[2][2] = {{"slice: ", "cross_entropy: "}, {"t: ", "t: "}};
    for (int i = 0; i < 2; i++) {
        mge_kctx c = ctx0;
        mge_error err = {0};
        c.opname = names[i];
        CHECK(ks->run(&c, sl, (mge_tensor *[]){&x}, (mge_tensor *[]){&y}, &err) == MGE_ERR_INVALID);
        CHECK_MSG(strncmp(err.msg, want[i][0], strlen(want[i][0])) == 0, "message: %s", err.msg);
        c.opname = i ? NULL : "cross_entropy";
        CHECK(kc->run(&c, ce, (mge_tensor *[]){&x, &lab}, (mge_tensor *[]){&l}, &err) == MGE_ERR_INVALID);
        CHECK_MSG(strncmp(err.msg, want[i][1], strlen(want[i][1])) == 0, "message: %s", err.msg);
    }
    mge_tensor *all[] = {&x, &y, &lab, &l};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        mge_tensor_free(all[i]);
}

/* ---------------------------------------------------------------- losses */

static void test_losses(void)
{
    enum { N = 3, C = 5 };
    mge_tensor x, lab, y;
    tens(&x, MGE_F32, 2, (int64_t[]){N, C});
    tens(&lab, MGE_I64, 1, (int64_t[]){N});
    tens(&y, MGE_F32, 0, NULL);
    for (int i = 0; i < N * C; i++)
        F(&x)[i] = 0.25f;
    int64_t *lp = lab.data;
    lp[0] = 0;
    lp[1] = 4;
    lp[2] = 2;
    tnode t;
    mge_node *n = mk(&t, MGE_OP_CROSS_ENTROPY, 2, 0, NULL);
    run_ok(n, (mge_tensor *[]){&x, &lab}, (mge_tensor *[]){&y});
    CHECK_NEAR(F(&y)[0], log((double)C), 1e-6);
    /* a confident right answer costs about nothing */
    F(&x)[0] = 100;
    F(&x)[C + 4] = 100;
    F(&x)[2 * C + 2] = 100;
    run_ok(n, (mge_tensor *[]){&x, &lab}, (mge_tensor *[]){&y});
    CHECK_NEAR(F(&y)[0], 0, 1e-6);
    /* out of range: error naming index and value */
    lp[1] = 5;
    mge_error err = {0};
    CHECK(runk(NULL, n, (mge_tensor *[]){&x, &lab}, (mge_tensor *[]){&y}, &err) == MGE_ERR_INVALID);
    CHECK_MSG(strstr(err.msg, "[1]") && strstr(err.msg, "5"), "message: %s", err.msg);
    mge_tensor li;
    tens(&li, MGE_I32, 1, (int64_t[]){N});
    ((int32_t *)li.data)[2] = -1;
    CHECK(runk(NULL, n, (mge_tensor *[]){&x, &li}, (mge_tensor *[]){&y}, &err) == MGE_ERR_INVALID);
    CHECK_MSG(strstr(err.msg, "[2]") && strstr(err.msg, "-1"), "message: %s", err.msg);

    /* mse */
    mge_tensor a, b;
    tens(&a, MGE_F32, 1, (int64_t[]){4});
    tens(&b, MGE_F32, 1, (int64_t[]){4});
    for (int i = 0; i < 4; i++) {
        F(&a)[i] = (float)i;
        F(&b)[i] = (float)(2 * i);
    }
    run_ok(mk(&t, MGE_OP_MSE, 2, 0, NULL), (mge_tensor *[]){&a, &b}, (mge_tensor *[]){&y});
    CHECK_NEAR(F(&y)[0], (0 + 1 + 4 + 9) / 4.0, 1e-6);
    mge_tensor *all[] = {&x, &lab, &y, &li, &a, &b};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        mge_tensor_free(all[i]);
}

/* ---------------------------------------------------------------- f16, bf16 */

/* Casts t (f32) to dt into a new tensor. */
static void to_dtype(mge_tensor *t, mge_dtype dt, mge_tensor *out)
{
    tnode c;
    tens(out, dt, t->ndim, t->dims);
    run_ok(cast_node(&c, dt), (mge_tensor *[]){t}, (mge_tensor *[]){out});
}

/* Runs op on f32 inputs, then on the same inputs cast to f16 and bf16; the
 * low-precision results, cast back, stay within tol (relative to the
 * largest f32 output) of the f32 ones. Integer inputs are passed as they are. */
static void half_case(mge_node *n, int nin, mge_tensor **in, mge_tensor *y32, double tol)
{
    run_ok(n, in, (mge_tensor *[]){y32});
    double big = 1e-3;
    for (int64_t i = 0; i < mge_tensor_numel(y32); i++)
        big = fabs(F(y32)[i]) > big ? fabs(F(y32)[i]) : big;
    const mge_dtype dts[2] = {MGE_F16, MGE_BF16};
    for (int k = 0; k < 2; k++) {
        mge_tensor hin[8], hy, back;
        mge_tensor *hp[8];
        for (int i = 0; i < nin; i++) {
            if (in[i]->dtype == MGE_F32)
                to_dtype(in[i], dts[k], &hin[i]);
            else
                mge_tensor_copy(&hin[i], in[i], NULL);
            hp[i] = &hin[i];
        }
        mge_dtype ydt = y32->dtype == MGE_F32 && n->op != MGE_OP_CROSS_ENTROPY ? dts[k] : y32->dtype;
        tens(&hy, ydt, y32->ndim, y32->dims);
        run_ok(n, hp, (mge_tensor *[]){&hy});
        if (ydt != MGE_F32)
            to_dtype(&hy, MGE_F32, &back);
        else
            mge_tensor_copy(&back, &hy, NULL);
        double maxerr = 0;
        for (int64_t i = 0; i < mge_tensor_numel(y32); i++) {
            double e = fabs(F(&back)[i] - F(y32)[i]);
            maxerr = e > maxerr ? e : maxerr;
        }
        CHECK_MSG(maxerr <= tol * big, "%s in %s: max error %g (scale %g)", mge_op_info(n->op)->name,
                  mge_dtype_name(dts[k]), maxerr, big);
        for (int i = 0; i < nin; i++)
            mge_tensor_free(&hin[i]);
        mge_tensor_free(&hy);
        mge_tensor_free(&back);
    }
}

static void test_half_dtypes(void)
{
    tnode t;
    mge_tensor x, w, b, y, a2, lab;
    tens(&x, MGE_F32, 4, (int64_t[]){2, 3, 6, 5});
    tens(&w, MGE_F32, 4, (int64_t[]){4, 3, 3, 3});
    tens(&b, MGE_F32, 1, (int64_t[]){4});
    fill_rand(&x, 11);
    fill_rand(&w, 12);
    fill_rand(&b, 13);
    tens(&y, MGE_F32, 4, (int64_t[]){2, 4, 6, 5});
    mge_attr ca[] = {A(MGE_KEY_out, 4), A_list(MGE_KEY_kernel, 1, 3), A_list(MGE_KEY_pad, 1, 1)};
    half_case(mk(&t, MGE_OP_CONV2D, 3, 3, ca), 3, (mge_tensor *[]){&x, &w, &b}, &y, 0.02);
    mge_tensor_free(&y);
    tens(&y, MGE_F32, 4, (int64_t[]){2, 3, 6, 5});
    half_case(mk(&t, MGE_OP_SOFTMAX, 1, 1, (mge_attr[]){A_list(MGE_KEY_axis, 1, 1)}), 1, (mge_tensor *[]){&x}, &y,
              0.01);
    half_case(mk(&t, MGE_OP_GELU, 1, 0, NULL), 1, (mge_tensor *[]){&x}, &y, 0.01);
    tens(&a2, MGE_F32, 2, (int64_t[]){6, 1});
    fill_rand(&a2, 14);
    half_case(mk(&t, MGE_OP_MUL, 2, 0, NULL), 2, (mge_tensor *[]){&x, &a2}, &y, 0.01);
    mge_tensor_free(&y);
    tens(&y, MGE_F32, 4, (int64_t[]){2, 3, 3, 3});
    half_case(mk(&t, MGE_OP_MAXPOOL2D, 1, 2, (mge_attr[]){A_list(MGE_KEY_kernel, 1, 2), A(MGE_KEY_ceil_mode, 1)}),
              1, (mge_tensor *[]){&x}, &y, 0.01);
    half_case(mk(&t, MGE_OP_AVGPOOL2D, 1, 2, (mge_attr[]){A_list(MGE_KEY_kernel, 1, 2), A(MGE_KEY_ceil_mode, 1)}),
              1, (mge_tensor *[]){&x}, &y, 0.01);
    mge_tensor_free(&y);
    /* cross_entropy: f16 logits, i32 labels, an f32 loss */
    mge_tensor lg;
    tens(&lg, MGE_F32, 2, (int64_t[]){4, 5});
    fill_rand(&lg, 15);
    tens(&lab, MGE_I32, 1, (int64_t[]){4});
    for (int i = 0; i < 4; i++)
        ((int32_t *)lab.data)[i] = i;
    tens(&y, MGE_F32, 0, NULL);
    half_case(mk(&t, MGE_OP_CROSS_ENTROPY, 2, 0, NULL), 2, (mge_tensor *[]){&lg, &lab}, &y, 0.01);
    mge_tensor *all[] = {&x, &w, &b, &y, &a2, &lab, &lg};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        mge_tensor_free(all[i]);
}

/* Integer sum wraps like the dtype; max and argmax of integers. */
static void test_int_reduce(void)
{
    mge_tensor x, s, m, am;
    tens(&x, MGE_I8, 2, (int64_t[]){2, 3});
    int8_t xv[6] = {100, 100, -5, -128, 7, 7};
    memcpy(x.data, xv, 6);
    tens(&s, MGE_I8, 1, (int64_t[]){2});
    tens(&m, MGE_I8, 1, (int64_t[]){2});
    tens(&am, MGE_I64, 1, (int64_t[]){2});
    tnode t;
    mge_attr ax[] = {A_list(MGE_KEY_axis, 1, 1)};
    run_ok(mk(&t, MGE_OP_SUM, 1, 1, ax), (mge_tensor *[]){&x}, (mge_tensor *[]){&s});
    CHECK(((int8_t *)s.data)[0] == (int8_t)(uint8_t)195 && ((int8_t *)s.data)[1] == -114);
    run_ok(mk(&t, MGE_OP_MAX, 1, 1, ax), (mge_tensor *[]){&x}, (mge_tensor *[]){&m});
    CHECK(((int8_t *)m.data)[0] == 100 && ((int8_t *)m.data)[1] == 7);
    run_ok(mk(&t, MGE_OP_ARGMAX, 1, 0, NULL), (mge_tensor *[]){&x}, (mge_tensor *[]){&am});
    CHECK(((int64_t *)am.data)[0] == 0 && ((int64_t *)am.data)[1] == 1);
    mge_tensor *all[] = {&x, &s, &m, &am};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        mge_tensor_free(all[i]);
}

/* ---------------------------------------------------------------- agreement with inference */

#define AI1(k, v) {.key = MGE_KEY_##k, .n = 1, .i = {v}}
#define AIN(k, n_, ...) {.key = MGE_KEY_##k, .n = n_, .i = {__VA_ARGS__}}
#define AFL(k, v) {.key = MGE_KEY_##k, .n = 1, .f = v}

typedef struct icase {
    int op, nin;
    mge_dtype dt[6];
    int nd[6];
    int64_t d[6][5];
    int nattr;
    mge_attr a[6];
} icase;

/* Valid configurations: the shape inference (lib/op_*.c) sizes the output
 * and the ref kernel must accept it, in eval and in training mode. */
static const icase icases[] = {
    {MGE_OP_CONV2D, 3, {MGE_F32, MGE_F32, MGE_F32}, {4, 4, 1}, {{2, 4, 9, 7}, {6, 2, 3, 2}, {6}}, 6,
     {AI1(out, 6), AIN(kernel, 2, 3, 2), AIN(stride, 2, 2, 1), AIN(pad, 2, 1, 0), AI1(dilation, 2), AI1(groups, 2)}},
    {MGE_OP_CONV2D, 2, {MGE_F32, MGE_F32}, {4, 4}, {{1, 3, 5, 5}, {2, 3, 1, 1}}, 3,
     {AI1(out, 2), AI1(kernel, 1), AI1(bias, 0)}},
    {MGE_OP_LINEAR, 3, {MGE_F32, MGE_F32, MGE_F32}, {3, 2, 1}, {{2, 3, 5}, {4, 5}, {4}}, 1, {AI1(out, 4)}},
    {MGE_OP_MATMUL, 2, {MGE_F32, MGE_F32}, {3, 2}, {{2, 3, 4}, {5, 4}}, 1, {AI1(transpose_b, 1)}},
    {MGE_OP_MATMUL, 2, {MGE_F32, MGE_F32}, {1, 3}, {{4}, {2, 4, 3}}, 0, {{0}}},
    {MGE_OP_MATMUL, 2, {MGE_I32, MGE_I32}, {2, 1}, {{3, 4}, {4}}, 0, {{0}}},
    {MGE_OP_BATCHNORM, 5, {MGE_F32, MGE_F32, MGE_F32, MGE_F32, MGE_F32}, {4, 1, 1, 1, 1},
     {{2, 3, 2, 2}, {3}, {3}, {3}, {3}}, 0, {{0}}},
    {MGE_OP_BATCHNORM, 6, {MGE_F32, MGE_F32, MGE_F32, MGE_F32, MGE_F32, MGE_I64}, {2, 1, 1, 1, 1, 0},
     {{5, 2}, {2}, {2}, {2}, {2}, {0}}, 1, {AFL(momentum, 0.3)}},
    {MGE_OP_LAYERNORM, 3, {MGE_F32, MGE_F32, MGE_F32}, {3, 2, 2}, {{2, 3, 4}, {3, 4}, {3, 4}}, 1, {AI1(axis, -2)}},
    {MGE_OP_LEAKY_RELU, 1, {MGE_F32}, {2}, {{3, 4}}, 1, {AFL(alpha, 0.2)}},
    {MGE_OP_DROPOUT, 1, {MGE_F32}, {2}, {{3, 4}}, 1, {AFL(p, 0.3)}},
    {MGE_OP_RELU, 1, {MGE_I64}, {1}, {{5}}, 0, {{0}}},
    {MGE_OP_CAST, 1, {MGE_F32}, {2}, {{2, 3}}, 1, {AI1(dtype, MGE_BF16)}},
    {MGE_OP_CAST, 1, {MGE_I64}, {2}, {{2, 3}}, 1, {AI1(dtype, MGE_U8)}},
    {MGE_OP_ADD, 2, {MGE_F32, MGE_F32}, {3, 2}, {{2, 1, 3}, {4, 1}}, 0, {{0}}},
    {MGE_OP_POW, 2, {MGE_F32, MGE_F32}, {1, 0}, {{3}, {0}}, 0, {{0}}},
    {MGE_OP_MINIMUM, 2, {MGE_I32, MGE_I32}, {2, 2}, {{1, 3}, {2, 1}}, 0, {{0}}},
    {MGE_OP_MAXPOOL2D, 1, {MGE_F32}, {4}, {{1, 2, 7, 6}}, 5,
     {AI1(kernel, 3), AI1(stride, 2), AI1(pad, 1), AI1(dilation, 2), AI1(ceil_mode, 1)}},
    {MGE_OP_AVGPOOL2D, 1, {MGE_F32}, {4}, {{1, 2, 7, 6}}, 4,
     {AI1(kernel, 3), AI1(stride, 2), AI1(pad, 1), AI1(ceil_mode, 1)}},
    {MGE_OP_GLOBAL_AVGPOOL, 1, {MGE_F32}, {4}, {{2, 3, 4, 4}}, 0, {{0}}},
    {MGE_OP_LOG_SOFTMAX, 1, {MGE_F32}, {3}, {{2, 3, 4}}, 1, {AI1(axis, 1)}},
    {MGE_OP_SUM, 1, {MGE_F32}, {3}, {{2, 3, 4}}, 2, {AIN(axis, 2, 0, 2), AI1(keepdim, 1)}},
    {MGE_OP_MEAN, 1, {MGE_F32}, {3}, {{2, 3, 4}}, 0, {{0}}},
    {MGE_OP_MAX, 1, {MGE_I32}, {3}, {{2, 3, 4}}, 1, {AI1(axis, -1)}},
    {MGE_OP_ARGMAX, 1, {MGE_F32}, {3}, {{2, 3, 4}}, 2, {AI1(axis, 1), AI1(keepdim, 1)}},
    {MGE_OP_RESHAPE, 1, {MGE_F32}, {3}, {{2, 3, 4}}, 1, {AIN(shape, 2, -1, 6)}},
    {MGE_OP_FLATTEN, 1, {MGE_U8}, {3}, {{2, 3, 4}}, 0, {{0}}},
    {MGE_OP_TRANSPOSE, 1, {MGE_BOOL}, {3}, {{2, 3, 4}}, 1, {AIN(perm, 3, 2, 0, 1)}},
    {MGE_OP_CONCAT, 3, {MGE_F16, MGE_F16, MGE_F16}, {2, 2, 2}, {{2, 3}, {2, 1}, {2, 4}}, 1, {AI1(axis, 1)}},
    {MGE_OP_SLICE, 1, {MGE_I64}, {2}, {{3, 10}}, 4, {AI1(axis, 1), AI1(start, -8), AI1(end, 9), AI1(step, 3)}},
    {MGE_OP_SLICE, 1, {MGE_F32}, {2}, {{3, 10}}, 1, {AI1(axis, 0)}},
    {MGE_OP_CROSS_ENTROPY, 2, {MGE_F32, MGE_I64}, {2, 1}, {{4, 3}, {4}}, 0, {{0}}},
    {MGE_OP_MSE, 2, {MGE_F32, MGE_F32}, {2, 2}, {{4, 3}, {4, 3}}, 0, {{0}}},
};

static void test_infer_agrees(void)
{
    for (size_t ci = 0; ci < sizeof icases / sizeof icases[0]; ci++) {
        const icase *c = &icases[ci];
        mge_error err = {0};
        mge_graph *g = mge_graph_new();
        int ins[6];
        mge_tensor t[6], y;
        mge_tensor *tp[6];
        int nin = c->nin;
        mge_rng r;
        mge_rng_seed(&r, ci + 100);
        for (int i = 0; i < nin; i++) {
            char name[16];
            snprintf(name, sizeof name, "in%d", i);
            ins[i] = mge_graph_add_value(g, name, MGE_VAL_INPUT, c->dt[i], c->nd[i], c->d[i], &err);
            CHECK_MSG(ins[i] >= 0, "%s", err.msg);
            tens(&t[i], c->dt[i], c->nd[i], c->d[i]);
            tp[i] = &t[i];
            for (int64_t j = 0; j < mge_tensor_numel(&t[i]); j++) {
                if (c->dt[i] == MGE_F32)
                    F(&t[i])[j] = c->op == MGE_OP_BATCHNORM && i == 4 ? 0.5f + mge_rng_uniform(&r)
                                                                        : mge_rng_normal(&r);
                else if (c->dt[i] == MGE_I64)
                    ((int64_t *)t[i].data)[j] = (int64_t)(mge_rng_next(&r) % 3);
                else if (c->dt[i] == MGE_I32)
                    ((int32_t *)t[i].data)[j] = (int32_t)(mge_rng_next(&r) % 7) - 3;
            }
        }
        const char *outname = "y";
        int node = mge_graph_add_node(g, "n", c->op, nin, ins, c->nattr, c->a, 1, &outname, &err);
        CHECK_MSG(node >= 0, "case %zu (%s): %s", ci, mge_op_info(c->op)->name, err.msg);
        if (node >= 0) {
            const mge_value *v = &g->values[g->nodes[node].out[0]];
            tens(&y, v->dtype, v->ndim, v->dims);
            for (int training = 0; training < 2; training++) {
                mge_kctx ctx = ctx0;
                ctx.training = training;
                ctx.rng = &r;
                mge_status st = runk(&ctx, &g->nodes[node], tp, (mge_tensor *[]){&y}, &err);
                CHECK_MSG(st == MGE_OK, "case %zu (%s)%s: %s", ci, mge_op_info(c->op)->name,
                          training ? " training" : "", err.msg);
            }
            mge_tensor_free(&y);
        }
        for (int i = 0; i < nin; i++)
            mge_tensor_free(&t[i]);
        mge_graph_free(g);
    }
}

/* ---------------------------------------------------------------- backends */

/* Every op has an f32 ref kernel (cast and cross_entropy under their
 * input dtype; where and the bool ops under bool, one_hot and embedding
 * under their indices', the bitwise ops under i32); cpu falls back to ref;
 * names resolve. */
static void test_backends(void)
{
    const mge_backend *ref = mge_backend_ref(), *cpu = mge_backend_cpu();
    CHECK(ref && cpu && strcmp(ref->name, "ref") == 0 && strcmp(cpu->name, "cpu") == 0);
    CHECK(mge_backend_get("ref") == ref && mge_backend_get("cpu") == cpu && mge_backend_get("tpu") == NULL);
    /* the int8 ops that read qs8 have their kernels under qs8 */
    for (int op = 0; op < MGE_NOPS; op++) {
        mge_dtype dt = op == MGE_OP_DEQUANTIZE || op == MGE_OP_QCONV2D || op == MGE_OP_QLINEAR || op == MGE_OP_QADD
                           ? MGE_QS8
                           : MGE_F32;
        if (op == MGE_OP_WHERE || op == MGE_OP_NOT || op == MGE_OP_AND || op == MGE_OP_OR || op == MGE_OP_XOR)
            dt = MGE_BOOL;
        if (op == MGE_OP_ONE_HOT || op == MGE_OP_EMBEDDING)
            dt = MGE_I64;
        if (op == MGE_OP_CONSTANT_OF_SHAPE)
            dt = MGE_I64; /* its input is the shape */
        /* the ONNX integer ops (group quant-onnx) read u8 (or i8), requantize an i32 sum */
        if (op == MGE_OP_DEQUANTIZE_LINEAR || op == MGE_OP_MATMUL_INTEGER || op == MGE_OP_CONV_INTEGER)
            dt = MGE_U8;
        if (op == MGE_OP_REQUANTIZE)
            dt = MGE_I32;
        if (op == MGE_OP_BITWISE_AND || op == MGE_OP_BITWISE_OR || op == MGE_OP_BITWISE_XOR ||
            op == MGE_OP_BITWISE_NOT || op == MGE_OP_SHIFT_LEFT || op == MGE_OP_SHIFT_RIGHT)
            dt = MGE_I32; /* integers only */
        CHECK_MSG(mge_backend_kernel(ref, op, dt) != NULL, "no %s ref kernel for %s", mge_dtype_name(dt),
                  mge_op_info(op)->name);
        CHECK_MSG(mge_backend_kernel(cpu, op, dt) != NULL, "no %s cpu kernel for %s", mge_dtype_name(dt),
                  mge_op_info(op)->name);
    }
    /* an empty slot of a backend falls back to ref */
    static mge_backend empty;
    CHECK(mge_backend_kernel(&empty, MGE_OP_RELU, MGE_F32) == &ref->k[MGE_OP_RELU][MGE_F32]);
    CHECK(mge_backend_kernel(ref, MGE_OP_POW, MGE_I32) == NULL);
    CHECK(mge_backend_kernel(ref, MGE_NOPS, MGE_F32) == NULL);
    CHECK(mge_backend_kernel(ref, MGE_OP_TRANSPOSE, MGE_BOOL) != NULL);
}

int main(void)
{
    RUN(test_conv_hand);
    RUN(test_conv_grouped);
    RUN(test_linear_matmul);
    RUN(test_batchnorm);
    RUN(test_unary);
    RUN(test_dropout);
    RUN(test_cast);
    RUN(test_broadcast);
    RUN(test_pool);
    RUN(test_softmax);
    RUN(test_reduce);
    RUN(test_shape_ops);
    RUN(test_losses);
    RUN(test_opname);
    RUN(test_half_dtypes);
    RUN(test_int_reduce);
    RUN(test_infer_agrees);
    RUN(test_backends);
    return unit_done();
}
