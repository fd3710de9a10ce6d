/* test_conv_bf16.c — conv2d_nchwc with precision=bf16 (kernels/cpu/
 * cpu_blocked_bf16.c) at every bf16 level the machine has (AMX,
 * AVX512-BF16, called with the level directly since the process picks its
 * own once): against a double-precision sum of the bf16-rounded operands
 * within the f32-summation bound, against the exact f32 ref within a
 * bf16 bound derived from K = C*kh*kw, lanes past O zero, prepared weights
 * vs packed per call, and 1 vs 2 threads, bit for bit; input blocks of 16
 * and plain NCHW stems (block 1). */
#include "unit_graph.h"

mge_status mge_cpu_conv_nchwc_bf16(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                   mge_tensor *const *out, int level, mge_error *err);
size_t mge_cpu_conv_nchwc_bf16_ws(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, int threads);
mge_status mge_cpu_conv_nchwc_bf16_prepare(const mge_node *n, mge_tensor *const *in, void **state, mge_error *err);
void mge_cpu_conv_nchwc_bf16_release(void *state);
int mge_cpu_conv_nchwc_bf16_level(const mge_node *n, const mge_tensor *x, const mge_tensor *w, const mge_tensor *y);

static mge_rng rng;
static mge_pool *pool2;

typedef struct bcase {
    int64_t N, C, H, W, O, k, s, p, d;
    int bias, res, act;   /* act: an op, or -1 */
    int64_t ci;           /* x's block: 16, or 1 (a plain NCHW stem) */
} bcase;

static float bf(float v)
{
    return mge_bf16_to_f32(mge_f32_to_bf16(v));
}

/* uniform in [-1, 1) with lanes (the last dim, block 16) past `valid` of each block zero */
static void fill_blocked(mge_tensor *t, int64_t valid, int blkdim)
{
    float *p = t->data;
    int64_t lanes = t->dims[t->ndim - 1], inner = 1;
    for (int i = blkdim + 1; i < t->ndim; i++)
        inner *= t->dims[i];
    for (int64_t i = 0; i < mge_tensor_numel(t); i++) {
        int64_t blk = (i / inner) % t->dims[blkdim], lane = i % lanes;
        p[i] = blk * lanes + lane < valid ? 2 * mge_rng_uniform(&rng) - 1 : 0.0f;
    }
}

/* Runs the bf16 kernel at `level` (pool: NULL serial), with prepared state or not. */
static mge_status run_bf16(const mge_node *n, mge_tensor **in, mge_tensor *y, int level, mge_pool *pool,
                           void *prep, mge_error *err)
{
    mge_tensor *ys[1] = {y};
    int threads = mge_pool_size(pool);
    size_t ws = mge_cpu_conv_nchwc_bf16_ws(n, in, ys, threads);
    void *wsp = mge_aligned_alloc(ws);
    memset(y->data, 0x7f, y->nbytes);   /* every output must be written */
    mge_kctx ctx = {.pool = pool, .threads = threads, .ws = wsp, .ws_size = ws, .prepared = prep,
                    .opname = "conv2d_nchwc"};
    mge_status s = mge_cpu_conv_nchwc_bf16(&ctx, n, in, ys, level, err);
    mge_aligned_free(wsp);
    return s;
}

static void run_case(const bcase *q, int level)
{
    mge_error err = {0};
    const int64_t ci = q->ci ? q->ci : 16, Cb = (q->C + ci - 1) / ci, Ob = (q->O + 15) / 16, k = q->k;
    const int64_t OH = mge_conv_out_dim(q->H, k, q->s, q->p, q->d, 0), OW = mge_conv_out_dim(q->W, k, q->s, q->p, q->d, 0);
    int64_t xd[5] = {q->N, Cb, q->H, q->W, ci}, wd[6] = {Ob, Cb, k, k, ci, 16}, yd[5] = {q->N, Ob, OH, OW, 16};
    mge_tensor x = {0}, w = {0}, b = {0}, r = {0}, yref = {0}, y1 = {0}, y2 = {0}, y3 = {0};
    CHECK_OK(mge_tensor_alloc(&x, MGE_F32, 5, xd, &err), err);
    CHECK_OK(mge_tensor_alloc(&w, MGE_F32, 6, wd, &err), err);
    CHECK_OK(mge_tensor_alloc(&b, MGE_F32, 1, &q->O, &err), err);
    CHECK_OK(mge_tensor_alloc(&r, MGE_F32, 5, yd, &err), err);
    fill_blocked(&x, q->C, 1);
    fill_blocked(&r, q->O, 1);
    ug_uniform(&b, &rng, -1, 1);
    /* weights: zero past C (input lane, dim 4 with its block dim 1) and past O */
    {
        float *wp = w.data;
        for (int64_t i = 0; i < mge_tensor_numel(&w); i++) {
            int64_t lo = i % 16, li = i / 16 % ci, cb = i / (16 * ci * k * k) % Cb, ob = i / (16 * ci * k * k * Cb);
            wp[i] = cb * ci + li < q->C && ob * 16 + lo < q->O ? mge_rng_uniform(&rng) - 0.5f : 0.0f;
        }
    }
    mge_graph *g = mge_graph_new();
    int ids[4], nin = 0;
    mge_tensor *ins[4];
    ids[nin] = mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 5, xd, &err), ins[nin++] = &x;
    ids[nin] = mge_graph_add_value(g, "w", MGE_VAL_PARAM, MGE_F32, 6, wd, &err), ins[nin++] = &w;
    if (q->bias)
        ids[nin] = mge_graph_add_value(g, "b", MGE_VAL_PARAM, MGE_F32, 1, &q->O, &err), ins[nin++] = &b;
    if (q->res)
        ids[nin] = mge_graph_add_value(g, "r", MGE_VAL_INPUT, MGE_F32, 5, yd, &err), ins[nin++] = &r;
    mge_attr at[11] = {A(MGE_KEY_out, q->O),      A(MGE_KEY_kernel, k),       A(MGE_KEY_stride, q->s),
                       A(MGE_KEY_pad, q->p),      A(MGE_KEY_dilation, q->d),  A(MGE_KEY_groups, 1),
                       A(MGE_KEY_bias, q->bias),  A(MGE_KEY_residual, q->res), A(MGE_KEY_act, q->act),
                       A_f(MGE_KEY_alpha, 0.1),   A(MGE_KEY_precision, 1)};
    const char *on[1] = {"y"};
    int ni = mge_graph_add_node(g, "conv", MGE_OP_CONV2D_NCHWC, nin, ids, 11, at, 1, on, &err);
    CHECK_MSG(ni >= 0, "%s", err.msg);
    if (ni < 0)
        goto done;
    const mge_node *n = &g->nodes[ni];
    CHECK(mge_node_int(n, MGE_KEY_precision, 0) == 1);
    CHECK_OK(mge_tensor_alloc(&y1, MGE_F32, 5, yd, &err), err);
    CHECK_OK(mge_tensor_alloc(&y2, MGE_F32, 5, yd, &err), err);
    CHECK_OK(mge_tensor_alloc(&y3, MGE_F32, 5, yd, &err), err);
    CHECK_OK(mge_tensor_alloc(&yref, MGE_F32, 5, yd, &err), err);
    char what[200];
    snprintf(what, sizeof what, "%s: ci%lld N%lld C%lld %lldx%lld O%lld k%lld s%lld p%lld d%lld b%d r%d act %s",
             mge_cpu_bf16_name(level), (long long)ci, (long long)q->N, (long long)q->C, (long long)q->H, (long long)q->W,
             (long long)q->O, (long long)k, (long long)q->s, (long long)q->p, (long long)q->d, q->bias, q->res,
             q->act < 0 ? "none" : mge_attr_op_name(q->act));

    /* unprepared serial, unprepared 2 threads, prepared 2 threads */
    CHECK_OK(run_bf16(n, ins, &y1, level, NULL, NULL, &err), err);
    CHECK_OK(run_bf16(n, ins, &y2, level, pool2, NULL, &err), err);
    void *prep = NULL;
    mge_tensor *pins[4] = {NULL, &w, q->bias ? &b : NULL, NULL};
    CHECK_OK(mge_cpu_conv_nchwc_bf16_prepare(n, pins, &prep, &err), err);
    CHECK_MSG(prep != NULL, "%s: prepare made no state", what);
    CHECK_OK(run_bf16(n, ins, &y3, level, pool2, prep, &err), err);
    mge_cpu_conv_nchwc_bf16_release(prep);
    CHECK_MSG(memcmp(y1.data, y2.data, y1.nbytes) == 0, "%s: 1 vs 2 threads", what);
    CHECK_MSG(memcmp(y1.data, y3.data, y1.nbytes) == 0, "%s: prepared vs per call", what);

    /* the exact f32 oracle: ref's conv2d_nchwc (it ignores precision) */
    CHECK_OK(ug_run_kernel(mge_backend_kernel(mge_backend_ref(), MGE_OP_CONV2D_NCHWC, MGE_F32), NULL, n, ins, &yref,
                           &err),
             err);

    /* the double oracle of the bf16-rounded operands */
    const float *xv = x.data, *wv = w.data, *bv = b.data, *rv = r.data, *got = y1.data, *fr = yref.data;
    const double K = (double)q->C * k * k;
    /* |x| < 1, |w| <= 0.5: a product's bf16 error is below 2^-8 of 0.5 (both rounded) */
    const double tol32 = 0x1p-7 * sqrt(K) * 0.5 + 1e-5;
    int64_t bad = -1, badf = -1, lanes = 0;
    double bad_want = 0, bad_tol = 0, worst = 0;
    for (int64_t img = 0; img < q->N; img++)
        for (int64_t o = 0; o < Ob * 16; o++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    int64_t yi = (((img * Ob + o / 16) * OH + oh) * OW + ow) * 16 + o % 16;
                    if (o >= q->O) {
                        lanes += got[yi] != 0.0f;
                        continue;
                    }
                    double s = q->bias ? bv[o] : 0.0, sabs = fabs(s);
                    for (int64_t c = 0; c < q->C; c++)
                        for (int64_t i = 0; i < k; i++)
                            for (int64_t j = 0; j < k; j++) {
                                int64_t ih = oh * q->s - q->p + i * q->d, iw = ow * q->s - q->p + j * q->d;
                                if (ih < 0 || ih >= q->H || iw < 0 || iw >= q->W)
                                    continue;
                                double xx = bf(xv[(((img * Cb + c / ci) * q->H + ih) * q->W + iw) * ci + c % ci]);
                                double ww = bf(wv[((((o / 16) * Cb + c / ci) * k + i) * k + j) * ci * 16 +
                                                  (c % ci) * 16 + o % 16]);
                                s += xx * ww;
                                sabs += fabs(xx * ww);
                            }
                    if (q->res) {
                        s += rv[yi];
                        sabs += fabs(rv[yi]);
                    }
                    double v = s;
                    if (q->act == MGE_OP_RELU)
                        v = v > 0 ? v : 0;
                    else if (q->act == MGE_OP_RELU6)
                        v = v < 0 ? 0 : v > 6 ? 6 : v;
                    else if (q->act == MGE_OP_SIGMOID)
                        v = 1 / (1 + exp(-v));
                    /* f32 summation of K + 2 terms; the activation is 1-Lipschitz */
                    double tol = (K + 4) * 0x1p-23 * sabs + 1e-6;
                    double e = fabs(got[yi] - v);
                    if (e > worst)
                        worst = e;
                    if (!(e <= tol) && bad < 0)
                        bad = yi, bad_want = v, bad_tol = tol;
                    if (!(fabs(got[yi] - fr[yi]) <= tol32) && badf < 0)
                        badf = yi;
                }
    CHECK_MSG(bad < 0, "%s: element %lld: %.9g, bf16 oracle %.9g (tol %g)", what, (long long)bad,
              bad >= 0 ? got[bad] : 0.0, bad_want, bad_tol);
    CHECK_MSG(badf < 0, "%s: element %lld: %.9g, f32 ref %.9g (tol %g)", what, (long long)badf,
              badf >= 0 ? got[badf] : 0.0, badf >= 0 ? fr[badf] : 0.0, tol32);
    CHECK_MSG(lanes == 0, "%s: %lld lanes past O nonzero", what, (long long)lanes);
    if (getenv("TEST_VERBOSE"))
        printf("%s: max |err| vs bf16 oracle %.3g\n", what, worst);
done:
    mge_graph_free(g);
    mge_tensor *all[] = {&x, &w, &b, &r, &yref, &y1, &y2, &y3};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        mge_tensor_free(all[i]);
}

static const int R = MGE_OP_RELU, R6 = MGE_OP_RELU6, SG = MGE_OP_SIGMOID;

static void run_all(int level)
{
    /* N, C, H, W, O, k, s, p, d, bias, res, act */
    const bcase cases[] = {
        {1, 24, 9, 11, 24, 3, 1, 1, 1, 1, 1, MGE_OP_RELU, 16},
        {1, 48, 14, 14, 72, 3, 1, 1, 1, 1, 0, -1, 16},
        {1, 72, 7, 7, 48, 1, 1, 0, 1, 1, 1, MGE_OP_RELU, 16},
        {1, 64, 56, 57, 64, 3, 1, 1, 1, 1, 1, MGE_OP_RELU, 16},
        {2, 32, 13, 15, 40, 3, 2, 1, 1, 0, 1, MGE_OP_RELU6, 16},
        {1, 40, 9, 9, 24, 1, 2, 0, 1, 1, 0, -1, 16},
        {1, 16, 17, 19, 16, 5, 1, 2, 1, 1, 0, MGE_OP_SIGMOID, 16},
        {1, 24, 13, 13, 20, 7, 2, 3, 1, 1, 0, -1, 16},
        {1, 24, 12, 12, 32, 3, 1, 2, 2, 1, 1, MGE_OP_RELU, 16},      /* dilation 2 */
        {1, 20, 1, 1, 36, 1, 1, 0, 1, 1, 1, -1, 16},                 /* 1x1 plane */
        {1, 20, 1, 1, 36, 3, 1, 1, 1, 1, 0, MGE_OP_RELU, 16},
        {1, 8, 3, 5, 8, 3, 1, 3, 1, 0, 0, -1, 16},                   /* pad 3 > kernel reach */
        {1, 36, 5, 3, 24, 3, 2, 1, 1, 1, 1, MGE_OP_RELU, 16},        /* widths < 16 */
        {1, 48, 28, 28, 96, 3, 2, 1, 1, 1, 0, MGE_OP_RELU, 16},
        {1, 96, 15, 41, 17, 1, 1, 0, 1, 1, 1, MGE_OP_RELU6, 16},
        {1, 16, 11, 9, 16, 3, 3, 1, 1, 1, 0, -1, 16},                /* stride 3 */
        {1, 24, 6, 8, 24, 2, 1, 0, 1, 1, 0, -1, 16},                 /* even kernel */
        /* plain NCHW stems (block 1): taps x channels in one pixel's 32 */
        {1, 3, 37, 45, 64, 7, 2, 3, 1, 0, 0, MGE_OP_RELU, 1},
        {2, 4, 15, 16, 24, 5, 2, 1, 1, 1, 1, MGE_OP_RELU6, 1},
        {1, 4, 9, 11, 20, 5, 1, 2, 1, 1, 0, -1, 1},
        {1, 8, 12, 12, 16, 4, 1, 3, 2, 1, 0, MGE_OP_SIGMOID, 1},
    };
    (void)R, (void)R6, (void)SG;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i], level);
}

static void test_avx512_bf16(void)
{
    run_all(MGE_BF16_AVX512);
}

static void test_amx(void)
{
    run_all(MGE_BF16_AMX);
}

/* Through the backend's kernel: a precision=bf16 node takes the bf16
 * path when the CPU has one (it differs from f32 then), and f32 nodes
 * stay exact (the ref's sums to 1e-5). */
static void test_dispatch(void)
{
    mge_error err = {0};
    int64_t xd[5] = {1, 2, 6, 7, 16}, wd[6] = {2, 2, 3, 3, 16, 16}, yd[5] = {1, 2, 6, 7, 16}, O = 32;
    mge_tensor x = {0}, w = {0}, b = {0}, yb = {0}, yf = {0}, yr = {0};
    CHECK_OK(mge_tensor_alloc(&x, MGE_F32, 5, xd, &err), err);
    CHECK_OK(mge_tensor_alloc(&w, MGE_F32, 6, wd, &err), err);
    CHECK_OK(mge_tensor_alloc(&b, MGE_F32, 1, &O, &err), err);
    ug_uniform(&x, &rng, -1, 1);
    ug_uniform(&w, &rng, -0.5f, 0.5f);
    ug_uniform(&b, &rng, -1, 1);
    for (int prec = 0; prec < 2; prec++) {
        mge_graph *g = mge_graph_new();
        int ids[3] = {mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 5, xd, &err),
                      mge_graph_add_value(g, "w", MGE_VAL_PARAM, MGE_F32, 6, wd, &err),
                      mge_graph_add_value(g, "b", MGE_VAL_PARAM, MGE_F32, 1, &O, &err)};
        mge_attr at[4] = {A(MGE_KEY_out, O), A(MGE_KEY_kernel, 3), A(MGE_KEY_pad, 1), A(MGE_KEY_precision, prec)};
        const char *on[1] = {"y"};
        int ni = mge_graph_add_node(g, "conv", MGE_OP_CONV2D_NCHWC, 3, ids, 4, at, 1, on, &err);
        CHECK_MSG(ni >= 0, "%s", err.msg);
        mge_tensor *in[3] = {&x, &w, &b};
        mge_tensor *y = prec ? &yb : &yf;
        CHECK_OK(mge_tensor_alloc(y, MGE_F32, 5, yd, &err), err);
        if (ni >= 0) {
            CHECK_OK(ug_run_kernel(mge_backend_kernel(mge_backend_cpu(), MGE_OP_CONV2D_NCHWC, MGE_F32), pool2,
                                   &g->nodes[ni], in, y, &err),
                     err);
            if (!prec) {
                CHECK_OK(mge_tensor_alloc(&yr, MGE_F32, 5, yd, &err), err);
                CHECK_OK(ug_run_kernel(mge_backend_kernel(mge_backend_ref(), MGE_OP_CONV2D_NCHWC, MGE_F32), NULL,
                                       &g->nodes[ni], in, &yr, &err),
                         err);
            }
        }
        mge_graph_free(g);
    }
    const float *pb = yb.data, *pf = yf.data, *pr = yr.data;
    double df = 0, db = 0;
    for (int64_t i = 0; i < mge_tensor_numel(&yf); i++) {
        df = fmax(df, fabs(pf[i] - pr[i]));
        db = fmax(db, fabs(pb[i] - pr[i]));
    }
    CHECK_MSG(df <= 1e-5, "f32 node: %g from ref", df);
    if (mge_cpu_bf16() != MGE_BF16_NONE)
        CHECK_MSG(db > 1e-5 && db <= 0x1p-7 * sqrt(32.0 * 9) * 0.5 + 1e-5, "bf16 node: %g from ref", db);
    else
        CHECK_MSG(db <= 1e-5, "bf16 node without bf16 hardware: %g from ref", db);
    /* which nodes take the bf16 kernel: precision=bf16, groups 1, blocks of 16 or a stem with K >= 96 */
    {
        mge_graph *g = mge_graph_new();
        int64_t sd[5] = {1, 3, 16, 16, 1}, s7[6] = {2, 3, 7, 7, 1, 16}, s3[6] = {2, 3, 3, 3, 1, 16};
        mge_tensor tx = {.dtype = MGE_F32, .ndim = 5}, t7 = {.dtype = MGE_F32, .ndim = 6}, t3 = t7;
        memcpy(tx.dims, sd, sizeof sd), memcpy(t7.dims, s7, sizeof s7), memcpy(t3.dims, s3, sizeof s3);
        int ids[2] = {mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 5, sd, &err),
                      mge_graph_add_value(g, "w7", MGE_VAL_PARAM, MGE_F32, 6, s7, &err)};
        int id3 = mge_graph_add_value(g, "w3", MGE_VAL_PARAM, MGE_F32, 6, s3, &err);
        mge_attr a7[5] = {A(MGE_KEY_out, 32), A(MGE_KEY_kernel, 7), A(MGE_KEY_pad, 3), A(MGE_KEY_bias, 0),
                          A(MGE_KEY_precision, 1)};
        mge_attr a3[5] = {A(MGE_KEY_out, 32), A(MGE_KEY_kernel, 3), A(MGE_KEY_pad, 1), A(MGE_KEY_bias, 0),
                          A(MGE_KEY_precision, 1)};
        const char *o7[1] = {"y7"}, *o3[1] = {"y3"};
        int n7 = mge_graph_add_node(g, "c7", MGE_OP_CONV2D_NCHWC, 2, ids, 5, a7, 1, o7, &err);
        int in3[2] = {ids[0], id3};
        int n3 = mge_graph_add_node(g, "c3", MGE_OP_CONV2D_NCHWC, 2, in3, 5, a3, 1, o3, &err);
        CHECK(n7 >= 0 && n3 >= 0);
        if (n7 >= 0 && n3 >= 0) {
            CHECK(mge_cpu_conv_nchwc_bf16_level(&g->nodes[n7], &tx, &t7, NULL) == mge_cpu_bf16());
            CHECK(mge_cpu_conv_nchwc_bf16_level(&g->nodes[n7], NULL, &t7, NULL) == mge_cpu_bf16());
            CHECK(mge_cpu_conv_nchwc_bf16_level(&g->nodes[n3], &tx, &t3, NULL) == MGE_BF16_NONE);
        }
        mge_graph_free(g);
    }
    mge_tensor *all[] = {&x, &w, &b, &yb, &yf, &yr};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        mge_tensor_free(all[i]);
}

int main(void)
{
    mge_rng_seed(&rng, 20261202);
    pool2 = mge_pool_create(2);
    int lvl = mge_cpu_bf16();
    printf("test_conv_bf16: bf16 level %s\n", mge_cpu_bf16_name(lvl));
    if (lvl >= MGE_BF16_AVX512)
        RUN(test_avx512_bf16);
    else
        printf("test_conv_bf16: skipped AVX512-BF16: %s\n", mge_cpu_bf16_note());
    if (lvl >= MGE_BF16_AMX)
        RUN(test_amx);
    else
        printf("test_conv_bf16: skipped AMX: %s\n", mge_cpu_bf16_note());
    RUN(test_dispatch);
    mge_pool_free(pool2);
    return unit_done();
}
