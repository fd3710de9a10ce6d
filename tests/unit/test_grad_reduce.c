/* test_grad_reduce.c — gradient rules of the reduce and shape families
 * (lib/grad_reduce.c, lib/grad_shape.c) against central differences, their
 * kernels (ref, and cpu against ref via gc_check), max_grad's tie rule, the
 * fast cpu sum against ref, and the shape checks of the new ops. */
#include "internal.h"
#include "unit.h"
#include "unit_grad.h"
#include "unit_graph.h"

static mge_rng trng;

static int64_t rdim(int lo, int hi)
{
    return lo + (int64_t)(mge_rng_next(&trng) % (uint64_t)(hi - lo + 1));
}

/* key = [v0, v1, ...] */
/* A graph with one input x of the given shape; returns x. */
static int one_input(mge_graph **g, int nd, const int64_t *d)
{
    *g = mge_graph_new();
    return mge_graph_add_value(*g, "x", MGE_VAL_INPUT, MGE_F32, nd, d, &gc_err);
}

/* gc_check of op(x, attrs) on a fresh graph. */
static void fd_unary(int op, int nd, const int64_t *d, int nattr, const mge_attr *at)
{
    mge_graph *g;
    int x = one_input(&g, nd, d);
    int y = node(g, "y", op, 1, &x, nattr, at);
    CHECK(y >= 0);
    /* max: distinct values at least 0.01 apart, so the differences'
     * steps never change which element is the maximum */
    mge_tensor tx;
    const mge_tensor *given[1] = {NULL};
    memset(&tx, 0, sizeof tx);
    if (op == MGE_OP_MAX) {
        CHECK_OK(mge_tensor_alloc(&tx, MGE_F32, nd, d, &gc_err), gc_err);
        int64_t n = mge_tensor_numel(&tx);
        float *p = tx.data;
        for (int64_t i = 0; i < n; i++)
            p[i] = -1.0f + 0.01f * (float)i;
        for (int64_t i = n - 1; i > 0; i--) {
            int64_t j = (int64_t)(mge_rng_next(&trng) % (uint64_t)(i + 1));
            float t = p[i];
            p[i] = p[j], p[j] = t;
        }
        given[0] = &tx;
    }
    if (y >= 0) {
        double w = gc_check(g, y, given, 1e-2, 0);
        CHECK_MSG(w < 1e-2, "%s: worst %g", mge_op_info(op)->name, w);
    }
    mge_tensor_free(&tx);
    mge_graph_free(g);
}

static void test_sum_mean_max(void)
{
    static const int ops[3] = {MGE_OP_SUM, MGE_OP_MEAN, MGE_OP_MAX};
    for (int rep = 0; rep < 3; rep++) {
        int64_t d[4] = {rdim(1, 3), rdim(2, 4), rdim(1, 3), rdim(2, 5)};
        static const int64_t axes[][3] = {{0, 2, 3}, {0, 0, 0}, {-1, 1, 0}, {1, -2, 0}, {3, 0, 0}};
        static const int nax[] = {3, 1, 2, 2, 1};
        for (int o = 0; o < 3; o++) {
            for (int a = 0; a < 5; a++)
                for (int keep = 0; keep < 2; keep++) {
                    mge_attr at[2] = {A_ints(MGE_KEY_axis, nax[a], axes[a]), A(MGE_KEY_keepdim, keep)};
                    fd_unary(ops[o], 4, d, 2, at);
                }
            /* all axes, both ways */
            mge_attr k1 = A(MGE_KEY_keepdim, 1);
            fd_unary(ops[o], 4, d, 0, NULL);
            fd_unary(ops[o], 4, d, 1, &k1);
        }
    }
    /* rank 1 and 2 */
    int64_t d1[1] = {7}, d2[2] = {5, 6};
    fd_unary(MGE_OP_SUM, 1, d1, 0, NULL);
    mge_attr a0 = A(MGE_KEY_axis, 0);
    fd_unary(MGE_OP_SUM, 2, d2, 1, &a0);
    fd_unary(MGE_OP_MEAN, 2, d2, 1, &a0);
    fd_unary(MGE_OP_MAX, 2, d2, 1, &a0);
}

/* max_grad splits dy among ties: x = [1,3,3,2 ; 5,0,5,5] over axis 1. */
static void test_max_ties(void)
{
    mge_graph *g;
    int64_t d[2] = {2, 4};
    int x = one_input(&g, 2, d);
    mge_attr a1 = A(MGE_KEY_axis, 1);
    int y = node(g, "y", MGE_OP_MAX, 1, &x, 1, &a1);
    int64_t yd[1] = {2};
    int dy = mge_graph_add_value(g, "dy", MGE_VAL_INPUT, MGE_F32, 1, yd, &gc_err);
    int gr = -1;
    CHECK_OK(mge_grad_build_from(g, y, dy, 1, &x, &gr, &gc_err), gc_err);
    CHECK(gr >= 0);
    mge_tensor tx, tdy;
    CHECK_OK(mge_tensor_alloc(&tx, MGE_F32, 2, d, &gc_err), gc_err);
    CHECK_OK(mge_tensor_alloc(&tdy, MGE_F32, 1, yd, &gc_err), gc_err);
    static const float xv[8] = {1, 3, 3, 2, 5, 0, 5, 5};
    memcpy(tx.data, xv, sizeof xv);
    ((float *)tdy.data)[0] = 2;
    ((float *)tdy.data)[1] = 3;
    const mge_tensor *ins[2] = {&tx, &tdy};
    static const float want[8] = {0, 1, 1, 0, 1, 0, 1, 1};
    for (int be = 0; be < 2; be++) {
        mge_exec *e = NULL;
        mge_exec_opts o = {.backend = be ? "cpu" : "ref", .noutputs = 1, .outputs = &gr};
        CHECK_OK(mge_exec_create(g, &o, &e, &gc_err), gc_err);
        if (!e)
            continue;
        CHECK_OK(mge_exec_run(e, ins, &gc_err), gc_err);
        const mge_tensor *r = mge_exec_result(e, 0);
        for (int i = 0; r && i < 8; i++)
            CHECK_NEAR(((const float *)r->data)[i], want[i], 1e-6);
        mge_exec_free(e);
    }
    mge_tensor_free(&tx);
    mge_tensor_free(&tdy);
    mge_graph_free(g);
}

static void test_softmax(void)
{
    for (int rep = 0; rep < 2; rep++) {
        int64_t d[3] = {rdim(1, 3), rdim(2, 5), rdim(2, 4)};
        for (int ax = -3; ax < 3; ax++) {
            mge_attr a = A(MGE_KEY_axis, ax);
            fd_unary(MGE_OP_SOFTMAX, 3, d, 1, &a);
            fd_unary(MGE_OP_LOG_SOFTMAX, 3, d, 1, &a);
        }
    }
    int64_t d2[2] = {4, 10};
    fd_unary(MGE_OP_SOFTMAX, 2, d2, 0, NULL);
    fd_unary(MGE_OP_LOG_SOFTMAX, 2, d2, 0, NULL);
}

static void test_reshape_flatten(void)
{
    int64_t d[4] = {2, 3, 4, 5};
    mge_attr f1 = A(MGE_KEY_start, 1), f2 = A(MGE_KEY_start, -2), f0 = A(MGE_KEY_start, 0);
    fd_unary(MGE_OP_FLATTEN, 4, d, 1, &f1);
    fd_unary(MGE_OP_FLATTEN, 4, d, 1, &f2);
    fd_unary(MGE_OP_FLATTEN, 4, d, 1, &f0);
    static const int64_t s1[3] = {6, -1, 2}, s2[2] = {0, 60}, s3[1] = {120};
    mge_attr r1 = A_ints(MGE_KEY_shape, 3, s1), r2 = A_ints(MGE_KEY_shape, 2, s2), r3 = A_ints(MGE_KEY_shape, 1, s3);
    fd_unary(MGE_OP_RESHAPE, 4, d, 1, &r1);
    fd_unary(MGE_OP_RESHAPE, 4, d, 1, &r2);
    fd_unary(MGE_OP_RESHAPE, 4, d, 1, &r3);
    /* a view of a view, then an op that reads it: the gradient flows through two reshape_as */
    mge_graph *g;
    int x = one_input(&g, 4, d);
    int fl = node(g, "fl", MGE_OP_FLATTEN, 1, &x, 1, &f1);
    int rs = node(g, "rs", MGE_OP_RESHAPE, 1, &fl, 1, &r1);
    int sm = node(g, "sm", MGE_OP_SOFTMAX, 1, &rs, 0, NULL);
    CHECK(sm >= 0);
    double w = gc_check(g, sm, NULL, 1e-2, 0);
    CHECK(w < 1e-2);
    mge_graph_free(g);
}

static void test_transpose(void)
{
    static const int64_t perms[][4] = {{0, 1, 2, 3}, {3, 2, 1, 0}, {0, 2, 3, 1}, {1, 3, 0, 2}, {-1, 0, -2, 1}};
    for (int p = 0; p < 5; p++) {
        int64_t d[4] = {rdim(1, 3), rdim(2, 4), rdim(1, 3), rdim(2, 4)};
        mge_attr a = A_ints(MGE_KEY_perm, 4, perms[p]);
        fd_unary(MGE_OP_TRANSPOSE, 4, d, 1, &a);
    }
    int64_t d2[2] = {3, 5};
    static const int64_t p2[2] = {1, 0};
    mge_attr a2 = A_ints(MGE_KEY_perm, 2, p2);
    fd_unary(MGE_OP_TRANSPOSE, 2, d2, 1, &a2);
}

static void test_concat(void)
{
    for (int ax = -3; ax < 3; ax++) {
        mge_graph *g = mge_graph_new();
        int in[3];
        int a = ax < 0 ? ax + 3 : ax;
        for (int k = 0; k < 3; k++) {
            int64_t d[3] = {2, 3, 2};
            d[a] = rdim(1, 4);
            char nm[8] = {'x', (char)('0' + k), 0};
            in[k] = mge_graph_add_value(g, nm, MGE_VAL_INPUT, MGE_F32, 3, d, &gc_err);
        }
        mge_attr at = A(MGE_KEY_axis, ax);
        int y = node(g, "y", MGE_OP_CONCAT, 3, in, 1, &at);
        CHECK(y >= 0);
        if (y >= 0) {
            double w = gc_check(g, y, NULL, 1e-2, 0);
            CHECK_MSG(w < 1e-2, "concat axis %d: worst %g", ax, w);
        }
        mge_graph_free(g);
    }
    /* the same input twice: contributions add */
    mge_graph *g = mge_graph_new();
    int64_t d[2] = {3, 4};
    int x = mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 2, d, &gc_err);
    int in[2] = {x, x};
    mge_attr at = A(MGE_KEY_axis, 1);
    int y = node(g, "y", MGE_OP_CONCAT, 2, in, 1, &at);
    CHECK(gc_check(g, y, NULL, 1e-2, 0) < 1e-2);
    mge_graph_free(g);
}

static void test_slice(void)
{
    int64_t d[3] = {3, 10, 4};
    /* (axis, start, end or 99 for absent, step) */
    static const int64_t cases[][4] = {{1, 0, 99, 1}, {1, 1, 8, 3}, {1, -7, -1, 2}, {1, 2, 99, 4},
                                       {0, -2, 99, 1}, {-1, 1, 3, 1}, {2, 0, 100, 3}, {1, 8, 2, 1}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        mge_attr at[4];
        int na = 0;
        at[na++] = A(MGE_KEY_axis, cases[c][0]);
        at[na++] = A(MGE_KEY_start, cases[c][1]);
        if (cases[c][2] != 99)
            at[na++] = A(MGE_KEY_end, cases[c][2]);
        at[na++] = A(MGE_KEY_step, cases[c][3]);
        if (cases[c][0] == 1 && cases[c][1] == 8 && cases[c][2] == 2) {
            /* an empty slice: no gradient reaches x through it, but the rule still builds */
            mge_graph *g;
            int x = one_input(&g, 3, d);
            int y = node(g, "y", MGE_OP_SLICE, 1, &x, na, at);
            int s = node(g, "s", MGE_OP_SUM, 1, &y, 0, NULL);
            int gr = -1;
            CHECK_OK(mge_grad_build(g, s, 1, &x, &gr, &gc_err), gc_err);
            CHECK(gr >= 0);
            mge_graph_free(g);
            continue;
        }
        fd_unary(MGE_OP_SLICE, 3, d, na, at);
    }
}

/* argmax has no gradient: the walk goes on with dx = -1 */
static void test_argmax(void)
{
    mge_graph *g;
    int64_t d[2] = {3, 4};
    int x = one_input(&g, 2, d);
    int am = node(g, "am", MGE_OP_ARGMAX, 1, &x, 0, NULL);
    int c = node(g, "c", MGE_OP_CAST, 1, &am, 1, (mge_attr[]){A(MGE_KEY_dtype, MGE_F32)});
    int s = node(g, "s", MGE_OP_SUM, 1, &c, 0, NULL);
    int gr = 5;
    mge_status st = mge_grad_build(g, s, 1, &x, &gr, &gc_err);
    /* cast's rule belongs to another family: only check that argmax itself does not fail the walk */
    if (st == MGE_OK)
        CHECK(gr == -1);
    mge_graph_free(g);
}

/* mean over the symbolic batch: the divisor comes from the run's shapes. */
static void test_mean_batch(void)
{
    mge_graph *g = mge_graph_new();
    int64_t d[2] = {MGE_DIM_N, 3};
    int x = mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 2, d, &gc_err);
    int y = node(g, "y", MGE_OP_MEAN, 1, &x, 0, NULL);
    int gr = -1;
    CHECK_OK(mge_grad_build(g, y, 1, &x, &gr, &gc_err), gc_err);
    CHECK(gr >= 0 && g->values[gr].dims[0] == MGE_DIM_N);
    for (int be = 0; be < 2 && gr >= 0; be++) {
        mge_exec *e = NULL;
        mge_exec_opts o = {.backend = be ? "cpu" : "ref", .noutputs = 1, .outputs = &gr};
        CHECK_OK(mge_exec_create(g, &o, &e, &gc_err), gc_err);
        for (int64_t b = 2; e && b <= 5; b += 3) {
            mge_tensor tx;
            int64_t dd[2] = {b, 3};
            CHECK_OK(mge_tensor_alloc(&tx, MGE_F32, 2, dd, &gc_err), gc_err);
            const mge_tensor *ins[1] = {&tx};
            CHECK_OK(mge_exec_run(e, ins, &gc_err), gc_err);
            const mge_tensor *r = mge_exec_result(e, 0);
            CHECK(r && mge_tensor_numel(r) == b * 3);
            for (int64_t i = 0; r && i < b * 3; i++)
                CHECK_NEAR(((const float *)r->data)[i], 1.0 / (double)(b * 3), 1e-7);
            mge_tensor_free(&tx);
        }
        mge_exec_free(e);
    }
    mge_graph_free(g);
}

/* The new ops refuse shapes that do not fit. */
static void test_infer_errors(void)
{
    mge_graph *g = mge_graph_new();
    int64_t dx[2] = {3, 4}, dbad[1] = {5}, dy3[1] = {3};
    int x = mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 2, dx, &gc_err);
    int b = mge_graph_add_value(g, "b", MGE_VAL_INPUT, MGE_F32, 1, dbad, &gc_err);
    int y3 = mge_graph_add_value(g, "y3", MGE_VAL_INPUT, MGE_F32, 1, dy3, &gc_err);
    const char *on[1] = {"o"};
    int in[2] = {b, x};
    mge_attr a1 = A(MGE_KEY_axis, 1);
    CHECK(mge_graph_add_node(g, "n1", MGE_OP_SUM_GRAD, 2, in, 1, &a1, 1, on, &gc_err) < 0);
    CHECK(strstr(gc_err.msg, "dy") != NULL);
    in[0] = y3;
    int ok = mge_graph_add_node(g, "n2", MGE_OP_SUM_GRAD, 2, in, 1, &a1, 1, on, &gc_err);
    CHECK(ok >= 0);
    const char *on2[1] = {"o2"};
    CHECK(mge_graph_add_node(g, "n3", MGE_OP_RESHAPE_AS, 2, (int[]){b, x}, 0, NULL, 1, on2, &gc_err) < 0);
    CHECK(strstr(gc_err.msg, "element count") != NULL);
    mge_attr sa[2] = {A(MGE_KEY_axis, 1), A(MGE_KEY_step, 2)};
    CHECK(mge_graph_add_node(g, "n4", MGE_OP_SLICE_GRAD, 2, (int[]){x, x}, 2, sa, 1, on2, &gc_err) < 0);
    CHECK(strstr(gc_err.msg, "slice") != NULL);
    mge_graph_free(g);
}

/* The fast cpu sum and mean (per-channel and leading-dims patterns) equal
 * ref and do not depend on the thread count; other patterns fall back. */
static void test_cpu_sum(void)
{
    static const int64_t shapes[][4] = {{2, 3, 5, 7}, {8, 16, 14, 14}, {1, 5, 1, 3}, {33, 130, 1, 1}, {37, 300, 0, 0}};
    static const int nds[] = {4, 4, 4, 4, 2};
    static const int64_t ax023[3] = {0, 2, 3}, ax0[1] = {0}, ax01[2] = {0, 1}, ax1[1] = {1};
    for (int s = 0; s < 5; s++)
        for (int pat = 0; pat < 5; pat++)
            for (int op = MGE_OP_SUM; op <= MGE_OP_MEAN; op++) {
                int nd = nds[s];
                if (nd == 2 && (pat == 0 || pat == 2))
                    continue;
                mge_graph *g;
                int x = one_input(&g, nd, shapes[s]);
                mge_attr at[2] = {pat == 0   ? A_ints(MGE_KEY_axis, 3, ax023)
                                  : pat == 1 ? A_ints(MGE_KEY_axis, 1, ax0)
                                  : pat == 4 ? A_ints(MGE_KEY_axis, 1, ax1)
                                             : A_ints(MGE_KEY_axis, 2, ax01),
                                  A(MGE_KEY_keepdim, pat == 3)};
                int y = node(g, "y", op, 1, &x, 2, at);
                mge_tensor tx;
                CHECK_OK(mge_tensor_alloc(&tx, MGE_F32, nd, shapes[s], &gc_err), gc_err);
                gc_fill(&tx, &trng, -1, 1);
                const mge_tensor *ins[1] = {&tx};
                mge_tensor res[3];
                static const char *const bes[3] = {"ref", "cpu", "cpu"};
                static const int th[3] = {1, 1, 3};
                for (int k = 0; k < 3; k++) {
                    mge_exec *e = NULL;
                    mge_exec_opts o = {.backend = bes[k], .threads = th[k], .noutputs = 1, .outputs = &y};
                    CHECK_OK(mge_exec_create(g, &o, &e, &gc_err), gc_err);
                    CHECK_OK(mge_exec_run(e, ins, &gc_err), gc_err);
                    CHECK_OK(mge_tensor_copy(&res[k], mge_exec_result(e, 0), &gc_err), gc_err);
                    mge_exec_free(e);
                }
                int64_t ny = mge_tensor_numel(&res[0]);
                for (int64_t i = 0; i < ny; i++) {
                    float r = ((float *)res[0].data)[i];
                    CHECK_NEAR(((float *)res[1].data)[i], r, 1e-5 * (1 + fabs(r)));
                }
                CHECK(memcmp(res[1].data, res[2].data, (size_t)ny * sizeof(float)) == 0);
                for (int k = 0; k < 3; k++)
                    mge_tensor_free(&res[k]);
                mge_tensor_free(&tx);
                mge_graph_free(g);
            }
}

int main(void)
{
    mge_rng_seed(&trng, 99);
    RUN(test_reshape_flatten);
    RUN(test_sum_mean_max);
    RUN(test_max_ties);
    RUN(test_softmax);
    RUN(test_transpose);
    RUN(test_concat);
    RUN(test_slice);
    RUN(test_argmax);
    RUN(test_mean_batch);
    RUN(test_infer_errors);
    RUN(test_cpu_sum);
    return unit_done();
}
