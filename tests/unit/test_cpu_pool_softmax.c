/* test_cpu_pool_softmax.c — the cpu maxpool2d, avgpool2d, global_avgpool,
 * softmax and log_softmax kernels against the ref ones: odd plane sizes
 * and every pooling geometry (kernel, stride, pad, dilation, ceil_mode,
 * count_include_pad), -inf and NaN inputs, softmax rows that overflow
 * without the max subtracted; 1, 2 and 3 threads must give the same bits.
 * The binary runs itself again at MGE_CPU_ISA=avx2 (when the CPU has
 * AVX-512) and baseline, since each ISA has its own loops.
 *
 * NaN rule (ref's and PyTorch's): a max window holding a NaN gives NaN;
 * a softmax row holding a NaN is NaN throughout. Which NaN (its payload)
 * is not specified, so NaN matches any NaN. */
#include "unit_graph.h"

#include <sys/wait.h>
#include <unistd.h>

static mge_rng rng;
static mge_pool *pools[3];   /* NULL (serial), 2 and 3 threads */

static int64_t rnd(int64_t lo, int64_t hi)   /* inclusive */
{
    return lo + (int64_t)(mge_rng_next(&rng) % (uint64_t)(hi - lo + 1));
}

static mge_attr a_ints(int key, int64_t v0, int64_t v1)
{
    mge_attr a = {key, 2, {v0, v1}, 0};
    return a;
}

static mge_attr a_int(int key, int64_t v)
{
    mge_attr a = {key, 1, {v}, 0};
    return a;
}

/* A graph with one input x of the given shape (uniform in [lo, hi]) and
 * op on it; 0 when the graph refuses the attributes. */
static int kcase(ug_kcase *t, int op, int nd, const int64_t *dims, int na, const mge_attr *at, float lo, float hi)
{
    mge_error err = {0};
    memset(t, 0, sizeof *t);
    t->g = mge_graph_new();
    int id = mge_graph_add_value(t->g, "x", MGE_VAL_INPUT, MGE_F32, nd, dims, &err);
    CHECK_MSG(id >= 0, "%s", err.msg);
    const char *outn[1] = {"y"};
    t->node = mge_graph_add_node(t->g, "node", op, 1, &id, na, at, 1, outn, &err);
    if (t->node < 0) {
        mge_graph_free(t->g);
        t->g = NULL;
        return 0;
    }
    t->nin = 1;
    CHECK_OK(mge_tensor_alloc(&t->in[0], MGE_F32, nd, dims, &err), err);
    float *p = t->in[0].data;
    for (int64_t k = 0; k < mge_tensor_numel(&t->in[0]); k++)
        p[k] = lo + (hi - lo) * mge_rng_uniform(&rng);
    const mge_value *y = &t->g->values[t->g->nodes[t->node].out[0]];
    CHECK_OK(mge_tensor_alloc(&t->out, y->dtype, y->ndim, y->dims, &err), err);
    return 1;
}

/* Same value, or both NaN. */
static int same_or_nan(float a, float b)
{
    return (isnan(a) && isnan(b)) || a == b;
}

/* cpu (1, 2, 3 threads) against ref within rtol; exact: every element
 * equal (maxpool picks one of its inputs). The three cpu runs must agree
 * bit for bit. The result of the serial cpu run is left in t->out. */
static void check(ug_kcase *t, const char *desc, double rtol, int exact)
{
    const mge_node *n = &t->g->nodes[t->node];
    const mge_kernel *kr = mge_backend_kernel(mge_backend_ref(), n->op, MGE_F32);
    const mge_kernel *kc = mge_backend_kernel(mge_backend_cpu(), n->op, MGE_F32);
    CHECK(kr && kc && kc->run != kr->run);
    if (!kr || !kc)
        return;
    mge_error err = {0};
    mge_tensor *in[1] = {&t->in[0]};
    mge_tensor want, got[3];
    CHECK_OK(mge_tensor_copy(&want, &t->out, &err), err);
    CHECK_OK(ug_run_kernel(kr, NULL, n, in, &want, &err), err);
    for (int p = 0; p < 3; p++) {
        CHECK_OK(mge_tensor_copy(&got[p], &t->out, &err), err);
        float *g = got[p].data;
        for (int64_t i = 0; i < mge_tensor_numel(&got[p]); i++)
            g[i] = 12345.0f;   /* poison: every element must be written */
        mge_status s = ug_run_kernel(kc, pools[p], n, in, &got[p], &err);
        CHECK_MSG(s == MGE_OK, "%s: %s", desc, err.msg);
    }
    CHECK_MSG(ug_compare(desc, &got[0], &want, rtol), "%s: cpu against ref", desc);
    if (exact) {
        const float *a = got[0].data, *b = want.data;
        int64_t bad = -1;
        for (int64_t i = 0; i < mge_tensor_numel(&want) && bad < 0; i++)
            if (!same_or_nan(a[i], b[i]))
                bad = i;
        CHECK_MSG(bad < 0, "%s: element %lld: cpu %.9g, ref %.9g (expected equal)", desc, (long long)bad,
                  bad < 0 ? 0.0 : a[bad], bad < 0 ? 0.0 : b[bad]);
    }
    CHECK_MSG(memcmp(got[0].data, got[1].data, got[0].nbytes) == 0, "%s: 2 threads differ from 1", desc);
    CHECK_MSG(memcmp(got[0].data, got[2].data, got[0].nbytes) == 0, "%s: 3 threads differ from 1", desc);
    memcpy(t->out.data, got[0].data, t->out.nbytes);
    for (int p = 0; p < 3; p++)
        mge_tensor_free(&got[p]);
    mge_tensor_free(&want);
}

/* ---------------------------------------------------------------- pooling */

/* Random geometries on odd planes: H, W in 1..37, kernel 1..5 (square or
 * not), stride 1..3, pad 0..k/2, dilation 1..2 (max), both ceil modes,
 * both divisors (average). Some inputs carry -inf and NaN. */
static void test_pool_random(void)
{
    int done[2] = {0, 0}, fast = 0;
    for (int tries = 0; tries < 2000 && done[0] + done[1] < 700; tries++) {
        int mx = rnd(0, 1), op = mx ? MGE_OP_MAXPOOL2D : MGE_OP_AVGPOOL2D;
        int64_t kh = rnd(1, 5), kw = rnd(0, 2) ? kh : rnd(1, 5);
        if (rnd(0, 2) == 0)   /* lenet's and resnet's windows often */
            kh = kw = rnd(2, 3);
        int64_t sh = rnd(1, 3), sw = rnd(0, 2) ? sh : rnd(1, 3);
        int64_t ph = rnd(0, kh / 2), pw = rnd(0, kw / 2);
        int64_t dims[4] = {rnd(1, 2), rnd(1, 4), rnd(1, 37), rnd(1, 37)};
        mge_attr at[6];
        int na = 0;
        at[na++] = a_ints(MGE_KEY_kernel, kh, kw);
        at[na++] = a_ints(MGE_KEY_stride, sh, sw);
        at[na++] = a_ints(MGE_KEY_pad, ph, pw);
        at[na++] = a_int(MGE_KEY_ceil_mode, rnd(0, 1));
        int64_t dh = 1, dw = 1;
        if (mx) {
            dh = rnd(1, 2), dw = rnd(0, 1) ? dh : rnd(1, 2);
            at[na++] = a_ints(MGE_KEY_dilation, dh, dw);
        } else {
            at[na++] = a_int(MGE_KEY_count_include_pad, rnd(0, 1));
        }
        ug_kcase t;
        if (!kcase(&t, op, 4, dims, na, at, -3, 3))
            continue;
        float *x = t.in[0].data;
        int64_t nx = mge_tensor_numel(&t.in[0]);
        int special = (int)rnd(0, 3);
        if (special == 1)   /* scattered -inf */
            for (int64_t i = 0; i < nx; i++)
                x[i] = rnd(0, 3) == 0 ? -INFINITY : x[i];
        else if (special == 2)   /* a few NaN and +-inf */
            for (int k = 0; k < 3; k++) {
                x[rnd(0, nx - 1)] = NAN;
                x[rnd(0, nx - 1)] = mx ? -INFINITY : INFINITY;
            }
        char desc[200];
        snprintf(desc, sizeof desc, "%s x[%lld,%lld,%lld,%lld] k=%lldx%lld s=%lldx%lld p=%lldx%lld d=%lldx%lld",
                 mge_op_info(op)->name, (long long)dims[0], (long long)dims[1], (long long)dims[2],
                 (long long)dims[3], (long long)kh, (long long)kw, (long long)sh, (long long)sw, (long long)ph,
                 (long long)pw, (long long)dh, (long long)dw);
        check(&t, desc, 1e-5, mx);
        fast += kh == kw && (kh == 2 || kh == 3) && (sw == 1 || sw == 2) && dh == 1 && dw == 1;
        ug_kcase_free(&t);
        done[mx]++;
    }
    CHECK(done[0] >= 200 && done[1] >= 200);
    CHECK(fast >= 100);
}

/* 2x2 max at stride 2 without padding (cpu_pool.c's AVX-512 path): planes
 * of one output chunk, several, and odd sizes with a column or row left
 * over; NaN and -inf in both rows and both columns of windows. */
static void test_pool_max2(void)
{
    static const int64_t hw[][2] = {{2, 2}, {5, 7}, {28, 28}, {14, 14}, {9, 33}, {3, 65}, {6, 64}};
    mge_attr at[2] = {a_ints(MGE_KEY_kernel, 2, 2), a_ints(MGE_KEY_stride, 2, 2)};
    for (size_t k = 0; k < sizeof hw / sizeof hw[0]; k++)
        for (int special = 0; special < 2; special++) {
            int64_t dims[4] = {2, 3, hw[k][0], hw[k][1]};
            ug_kcase t;
            if (!kcase(&t, MGE_OP_MAXPOOL2D, 4, dims, 2, at, -3, 3))
                continue;
            float *x = t.in[0].data;
            int64_t nx = mge_tensor_numel(&t.in[0]);
            if (special)
                for (int i = 0; i < 12; i++) {
                    x[rnd(0, nx - 1)] = NAN;
                    x[rnd(0, nx - 1)] = -INFINITY;
                }
            char desc[120];
            snprintf(desc, sizeof desc, "maxpool 2x2/s2 x[2,3,%lld,%lld]%s", (long long)hw[k][0],
                     (long long)hw[k][1], special ? " with NaN/-inf" : "");
            check(&t, desc, 0, 1);
            ug_kcase_free(&t);
        }
}

/* Values worked out by hand, so the comparison does not rest on ref alone. */
static void test_pool_known(void)
{
    /* 4x4 ramp 0..15, 2x2 max: 5 7 13 15; average: 2.5 4.5 10.5 12.5 */
    int64_t d4[4] = {1, 1, 4, 4};
    mge_attr at[1] = {a_ints(MGE_KEY_kernel, 2, 2)};
    static const float wmax[4] = {5, 7, 13, 15}, wavg[4] = {2.5f, 4.5f, 10.5f, 12.5f};
    for (int mx = 0; mx < 2; mx++) {
        ug_kcase t;
        CHECK(kcase(&t, mx ? MGE_OP_MAXPOOL2D : MGE_OP_AVGPOOL2D, 4, d4, 1, at, 0, 0));
        if (!t.g)
            continue;
        float *x = t.in[0].data;
        for (int i = 0; i < 16; i++)
            x[i] = (float)i;
        check(&t, mx ? "maxpool ramp" : "avgpool ramp", 1e-6, mx);
        const float *y = t.out.data;
        for (int i = 0; i < 4; i++)
            CHECK_NEAR(y[i], mx ? wmax[i] : wavg[i], 1e-6);
        ug_kcase_free(&t);
    }
    /* 3x3/s2/p1 max on 5x5 (outputs 3x3, windows on rows and columns
     * 2o-1 .. 2o+1) with a NaN at (2,2): only the centre window holds it;
     * a plane of -inf gives -inf */
    int64_t d5[4] = {1, 2, 5, 5};
    mge_attr a3[3] = {a_ints(MGE_KEY_kernel, 3, 3), a_ints(MGE_KEY_stride, 2, 2), a_ints(MGE_KEY_pad, 1, 1)};
    ug_kcase t;
    CHECK(kcase(&t, MGE_OP_MAXPOOL2D, 4, d5, 3, a3, -1, 1));
    if (t.g) {
        float *x = t.in[0].data;
        x[12] = NAN;
        for (int i = 25; i < 50; i++)
            x[i] = -INFINITY;
        check(&t, "maxpool NaN centre", 0, 1);
        const float *y = t.out.data;
        for (int i = 0; i < 9; i++)
            CHECK_MSG(isnan(y[i]) == (i == 4), "output %d: %g", i, y[i]);
        for (int i = 9; i < 18; i++)
            CHECK(y[i] == -INFINITY);
        ug_kcase_free(&t);
    }
    /* ceil_mode: 5 wide, 2x2/s2 gives 3 columns, the last from one input column */
    int64_t d1[4] = {1, 1, 1, 5};
    mge_attr ac1[2] = {a_ints(MGE_KEY_kernel, 1, 2), a_int(MGE_KEY_ceil_mode, 1)};
    CHECK(kcase(&t, MGE_OP_AVGPOOL2D, 4, d1, 2, ac1, 0, 0));
    if (t.g) {
        float *x = t.in[0].data;
        for (int i = 0; i < 5; i++)
            x[i] = (float)(i + 1);
        check(&t, "avgpool ceil", 1e-6, 0);
        const float *y = t.out.data;
        CHECK(t.out.dims[3] == 3);
        CHECK_NEAR(y[0], 1.5, 1e-6);
        CHECK_NEAR(y[1], 3.5, 1e-6);
        CHECK_NEAR(y[2], 5.0, 1e-6);   /* the window past the input counts only its input column */
        ug_kcase_free(&t);
    }
}

/* Shapes of the nets (lenet, resnet18) and wide planes, several planes per
 * thread; global average pooling on odd planes. */
static void test_pool_nets(void)
{
    static const int64_t cs[][8] = {
        /* N, C, H, W, k, s, p, max */
        {4, 32, 28, 28, 2, 2, 0, 1}, {4, 64, 14, 14, 2, 2, 0, 1}, {1, 64, 112, 112, 3, 2, 1, 1},
        {2, 8, 57, 61, 3, 1, 1, 1},  {2, 8, 33, 35, 3, 2, 1, 0},  {3, 5, 28, 28, 2, 2, 0, 0},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        const int64_t *c = cs[i];
        mge_attr at[3] = {a_ints(MGE_KEY_kernel, c[4], c[4]), a_ints(MGE_KEY_stride, c[5], c[5]),
                          a_ints(MGE_KEY_pad, c[6], c[6])};
        ug_kcase t;
        CHECK(kcase(&t, c[7] ? MGE_OP_MAXPOOL2D : MGE_OP_AVGPOOL2D, 4, c, 3, at, -2, 2));
        if (!t.g)
            continue;
        char desc[64];
        snprintf(desc, sizeof desc, "pool net case %zu", i);
        check(&t, desc, 1e-5, (int)c[7]);
        ug_kcase_free(&t);
    }
    static const int64_t gs[][4] = {{1, 1, 1, 1}, {2, 3, 7, 7}, {1, 512, 7, 7}, {2, 5, 13, 1}, {1, 3, 37, 35}};
    for (size_t i = 0; i < sizeof gs / sizeof gs[0]; i++) {
        ug_kcase t;
        CHECK(kcase(&t, MGE_OP_GLOBAL_AVGPOOL, 4, gs[i], 0, NULL, -1, 3));
        if (!t.g)
            continue;
        check(&t, "global_avgpool", 1e-5, 0);
        ug_kcase_free(&t);
    }
}

/* ---------------------------------------------------------------- softmax */

/* Rows of length 1, 7, 16, 17 and 1000 over the last axis (and a middle
 * axis), with values that overflow exp without the max subtracted, tiny
 * values, -inf entries, a row of -inf and a row with a NaN. */
static void test_softmax_rows(void)
{
    static const int64_t lens[] = {1, 7, 16, 17, 1000};
    static const float scale[] = {1, 20, 1000, 1e-30f};
    for (int op = 0; op < 2; op++) {
        int o = op ? MGE_OP_LOG_SOFTMAX : MGE_OP_SOFTMAX;
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
            for (size_t si = 0; si < sizeof scale / sizeof scale[0]; si++)
                for (int axis = 0; axis < 2; axis++) {
                    const int64_t len = lens[li];
                    /* axis 0: [6, len] over -1; axis 1: [2, len, 3] over 1 */
                    int64_t d2[2] = {6, len}, d3[3] = {2, len, 3};
                    mge_attr at[1] = {a_int(MGE_KEY_axis, axis ? 1 : -1)};
                    ug_kcase t;
                    CHECK(kcase(&t, o, axis ? 3 : 2, axis ? d3 : d2, 1, at, -scale[si], scale[si]));
                    if (!t.g)
                        continue;
                    float *x = t.in[0].data;
                    int64_t nx = mge_tensor_numel(&t.in[0]);
                    if (axis == 0) {
                        for (int64_t j = 0; j < len; j++) {
                            x[j] = -INFINITY;   /* row 0: all -inf */
                            if (j % 3 == 1)
                                x[2 * len + j] = -INFINITY;   /* row 2: some -inf */
                        }
                        x[3 * len + len / 2] = NAN;   /* row 3: one NaN */
                        x[4 * len] = 88.0f + (float)len;   /* row 4: one large value */
                    } else {
                        x[rnd(0, nx - 1)] = -INFINITY;
                        x[rnd(0, nx - 1)] = NAN;
                    }
                    char desc[96];
                    snprintf(desc, sizeof desc, "%s len=%lld scale=%g axis=%d", mge_op_info(o)->name,
                             (long long)len, (double)scale[si], axis ? 1 : -1);
                    check(&t, desc, 1e-5, 0);
                    ug_kcase_free(&t);
                }
    }
}

/* Results worked out by hand: no overflow at 1000, the -inf rules. */
static void test_softmax_known(void)
{
    int64_t d[2] = {3, 2};
    mge_attr at[1] = {a_int(MGE_KEY_axis, -1)};
    static const float in[6] = {1000, 1000, 0, -INFINITY, -1000, -999};
    for (int op = 0; op < 2; op++) {
        ug_kcase t;
        CHECK(kcase(&t, op ? MGE_OP_LOG_SOFTMAX : MGE_OP_SOFTMAX, 2, d, 1, at, 0, 0));
        if (!t.g)
            continue;
        memcpy(t.in[0].data, in, sizeof in);
        check(&t, op ? "log_softmax known" : "softmax known", 1e-6, 0);
        const float *y = t.out.data;
        double e = 1 / (1 + exp(1.0));   /* softmax of (-1000, -999) */
        if (op) {
            CHECK_NEAR(y[0], -log(2.0), 1e-6);
            CHECK_NEAR(y[1], -log(2.0), 1e-6);
            CHECK(y[2] == 0 && y[3] == -INFINITY);
            CHECK_NEAR(y[4], log(e), 1e-5);
            CHECK_NEAR(y[5], log(1 - e), 1e-5);
        } else {
            CHECK_NEAR(y[0], 0.5, 1e-6);
            CHECK_NEAR(y[1], 0.5, 1e-6);
            CHECK(y[2] == 1 && y[3] == 0);
            CHECK_NEAR(y[4], e, 1e-6);
            CHECK_NEAR(y[5], 1 - e, 1e-6);
        }
        ug_kcase_free(&t);
    }
}

/* Many rows at once, enough for the pool to split them; bits must not
 * depend on the split. */
static void test_softmax_many(void)
{
    static const int64_t cs[][3] = {{512, 1000, 1}, {300, 17, 1}, {64, 10, 49}, {8, 1000, 5}};
    for (int op = 0; op < 2; op++)
        for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
            int64_t d3[3] = {cs[i][0], cs[i][1], cs[i][2]};
            mge_attr at[1] = {a_int(MGE_KEY_axis, 1)};
            ug_kcase t;
            int o = op ? MGE_OP_LOG_SOFTMAX : MGE_OP_SOFTMAX;
            CHECK(kcase(&t, o, 3, d3, 1, at, -30, 30));
            if (!t.g)
                continue;
            char desc[64];
            snprintf(desc, sizeof desc, "%s many %zu", mge_op_info(o)->name, i);
            check(&t, desc, 1e-5, 0);
            ug_kcase_free(&t);
        }
}

/* Runs this binary again with MGE_CPU_ISA=isa in a child; rc, or 1 when
 * the child failed. */
static int rerun(char **argv, const char *isa, int rc)
{
    printf("test_cpu_pool_softmax: again with MGE_CPU_ISA=%s\n", isa);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("MGE_CPU_ISA", isa, 1);
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "test_cpu_pool_softmax: the run with MGE_CPU_ISA=%s failed\n", isa);
        return 1;
    }
    return rc;
}

int main(int argc, char **argv)
{
    (void)argc;
    mge_rng_seed(&rng, 20261207);
    pools[0] = NULL;
    pools[1] = mge_pool_create(2);
    pools[2] = mge_pool_create(3);
    CHECK(pools[1] && pools[2]);
    RUN(test_pool_known);
    RUN(test_pool_random);
    RUN(test_pool_max2);
    RUN(test_pool_nets);
    RUN(test_softmax_known);
    RUN(test_softmax_rows);
    RUN(test_softmax_many);
    mge_pool_free(pools[1]);
    mge_pool_free(pools[2]);
    int rc = unit_done();
    if (getenv("MGE_CPU_ISA"))
        return rc;
    if (mge_cpu_isa() >= MGE_ISA_AVX512)
        rc = rerun(argv, "avx2", rc);
    if (mge_cpu_isa() >= MGE_ISA_AVX2)
        rc = rerun(argv, "baseline", rc);
    return rc;
}
