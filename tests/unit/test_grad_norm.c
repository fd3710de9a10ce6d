/* test_grad_norm.c — gradient rules of batchnorm (training mode) and
 * layernorm against central differences, and the fast cpu batchnorm
 * kernels (forward in both modes, batchnorm_grad) against ref, bit-identical
 * between thread counts. */
#include "internal.h"
#include "unit.h"
#include "unit_grad.h"
#include "unit_graph.h"

static mge_rng trng;

static int64_t rdim(int lo, int hi)
{
    return lo + (int64_t)(mge_rng_next(&trng) % (uint64_t)(hi - lo + 1));
}

static void fd_layer(int op, int nd, const int64_t *d, int nattr, const mge_attr *at, int training)
{
    mge_graph *g = mge_graph_new();
    int x = mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, nd, d, &gc_err);
    int y = layer(g, "y", op, x, nattr, at);
    CHECK(y >= 0);
    if (y >= 0) {
        double w = gc_check(g, y, NULL, 1e-2, training);
        CHECK_MSG(w < 1e-2, "%s rank %d: worst %g", mge_op_info(op)->name, nd, w);
    }
    mge_graph_free(g);
}

static void test_batchnorm_fd(void)
{
    for (int rep = 0; rep < 3; rep++) {
        int64_t d4[4] = {rdim(2, 4), rdim(1, 4), rdim(1, 4), rdim(2, 5)};
        fd_layer(MGE_OP_BATCHNORM, 4, d4, 0, NULL, 1);
        int64_t d2[2] = {rdim(3, 8), rdim(1, 6)};
        fd_layer(MGE_OP_BATCHNORM, 2, d2, 0, NULL, 1);
        int64_t d3[3] = {rdim(2, 3), rdim(2, 4), rdim(2, 6)};
        mge_attr eps = A_f(MGE_KEY_eps, 1e-3);
        fd_layer(MGE_OP_BATCHNORM, 3, d3, 1, &eps, 1);
    }
}

/* batchnorm then a nonlinear op: dy is not constant per channel */
static void test_batchnorm_chain(void)
{
    mge_graph *g = mge_graph_new();
    int64_t d[4] = {3, 2, 3, 3};
    int x = mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 4, d, &gc_err);
    int y = layer(g, "bn", MGE_OP_BATCHNORM, x, 0, NULL);
    /* over channels: along the last axis the bias gradient would vanish */
    mge_attr a1 = A(MGE_KEY_axis, 1);
    int t = node(g, "t", MGE_OP_SOFTMAX, 1, &y, 1, &a1);
    CHECK(t >= 0);
    CHECK(gc_check(g, t, NULL, 1e-2, 1) < 1e-2);
    mge_graph_free(g);
}

static void test_layernorm_fd(void)
{
    for (int rep = 0; rep < 2; rep++) {
        int64_t d[3] = {rdim(1, 3), rdim(2, 4), rdim(2, 6)};
        for (int ax = -3; ax < 3; ax++) {
            mge_attr a = A(MGE_KEY_axis, ax);
            fd_layer(MGE_OP_LAYERNORM, 3, d, 1, &a, 0);
        }
        int64_t d2[2] = {rdim(2, 5), rdim(3, 9)};
        fd_layer(MGE_OP_LAYERNORM, 2, d2, 0, NULL, 0);
    }
}

/* Rules emit one node; only the wanted outputs are used. A frozen weight
 * (a const) still gets dx right. */
static void test_batchnorm_partial(void)
{
    mge_graph *g = mge_graph_new();
    int64_t d[2] = {5, 3}, c[1] = {3};
    int x = mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 2, d, &gc_err);
    int in[5] = {x};
    static const char *const nm[4] = {"w", "b", "rm", "rv"};
    for (int k = 0; k < 4; k++) {
        in[1 + k] = mge_graph_add_value(g, nm[k], k < 2 ? MGE_VAL_CONST : MGE_VAL_STATE, MGE_F32, 1, c, &gc_err);
        mge_tensor *t = calloc(1, sizeof *t);
        CHECK_OK(mge_tensor_alloc(t, MGE_F32, 1, c, &gc_err), gc_err);
        for (int i = 0; i < 3; i++)
            ((float *)t->data)[i] = k == 1 ? 0.1f * (float)i : 0.5f + 0.25f * (float)i;
        g->values[in[1 + k]].data = t;
    }
    int y = node(g, "bn", MGE_OP_BATCHNORM, 5, in, 0, NULL);
    CHECK(y >= 0);
    CHECK(gc_check(g, y, NULL, 1e-2, 1) < 1e-2);
    mge_graph_free(g);
}

/* The new ops check their shapes. */
static void test_infer_errors(void)
{
    mge_graph *g = mge_graph_new();
    int64_t d[4] = {2, 3, 4, 4}, c[1] = {3}, c4[1] = {4};
    int x = mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 4, d, &gc_err);
    int w = mge_graph_add_value(g, "w", MGE_VAL_INPUT, MGE_F32, 1, c, &gc_err);
    int w4 = mge_graph_add_value(g, "w4", MGE_VAL_INPUT, MGE_F32, 1, c4, &gc_err);
    const char *on[3] = {"a", "b", "c"};
    CHECK(mge_graph_add_node(g, "n1", MGE_OP_BATCHNORM_GRAD, 3, (int[]){x, x, w4}, 0, NULL, 3, on, &gc_err) < 0);
    CHECK(strstr(gc_err.msg, "weight") != NULL);
    int ni = mge_graph_add_node(g, "n2", MGE_OP_BATCHNORM_GRAD, 3, (int[]){x, x, w}, 0, NULL, 3, on, &gc_err);
    CHECK(ni >= 0);
    if (ni >= 0) {
        CHECK(g->values[g->nodes[ni].out[1]].ndim == 1 && g->values[g->nodes[ni].out[1]].dims[0] == 3);
        CHECK(g->values[g->nodes[ni].out[0]].ndim == 4);
    }
    const char *on2[3] = {"a2", "b2", "c2"};
    CHECK(mge_graph_add_node(g, "n3", MGE_OP_LAYERNORM_GRAD, 3, (int[]){x, x, w}, 0, NULL, 3, on2, &gc_err) < 0);
    CHECK(mge_graph_add_node(g, "n4", MGE_OP_LAYERNORM_GRAD, 3, (int[]){x, x, w4}, 0, NULL, 3, on2, &gc_err) >= 0);
    mge_graph_free(g);
}

/* Runs outs of g on backend/threads and copies the results into res[]. */
static void run_copy(mge_graph *g, const char *be, int threads, int training, int nout, const int *outs,
                     const mge_tensor *const *ins, mge_tensor *res)
{
    mge_exec *e = NULL;
    mge_exec_opts o = {.backend = be, .threads = threads, .noutputs = nout, .outputs = outs, .training = training};
    CHECK_OK(mge_exec_create(g, &o, &e, &gc_err), gc_err);
    if (!e) {
        for (int k = 0; k < nout; k++)
            memset(&res[k], 0, sizeof res[k]);
        return;
    }
    CHECK_OK(mge_exec_run(e, ins, &gc_err), gc_err);
    for (int k = 0; k < nout; k++)
        CHECK_OK(mge_tensor_copy(&res[k], mge_exec_result(e, k), &gc_err), gc_err);
    mge_exec_free(e);
}

static void close_to(const mge_tensor *a, const mge_tensor *b, double tol, const char *what)
{
    int64_t n = mge_tensor_numel(a);
    CHECK(n == mge_tensor_numel(b));
    double mx = 0, worst = 0;
    for (int64_t i = 0; i < n; i++)
        mx = fmax(mx, fabs(((const float *)a->data)[i]));
    for (int64_t i = 0; i < n && n == mge_tensor_numel(b); i++)
        worst = fmax(worst, fabs(((const float *)a->data)[i] - ((const float *)b->data)[i]) / (mx + 1e-6));
    CHECK_MSG(worst <= tol, "%s: cpu differs from ref by %g", what, worst);
}

static int same_bits(const mge_tensor *a, const mge_tensor *b)
{
    return a->nbytes == b->nbytes && (!a->nbytes || memcmp(a->data, b->data, a->nbytes) == 0);
}

/* cpu batchnorm forward (training and eval, with the running statistics it
 * updates) and batchnorm_grad against ref, threads 1 and 3 bit-identical. */
static void test_cpu_batchnorm(void)
{
    static const int64_t shapes[][4] = {{2, 3, 5, 7}, {4, 16, 9, 9}, {3, 5, 1, 1}, {8, 40, 1, 1}, {2, 7, 33, 17}};
    static const int nds[] = {4, 4, 4, 2, 4};
    for (int s = 0; s < 5; s++) {
        for (int training = 0; training < 2; training++) {
            mge_graph *g = mge_graph_new();
            int x = mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, nds[s], shapes[s], &gc_err);
            int dy = mge_graph_add_value(g, "dy", MGE_VAL_INPUT, MGE_F32, nds[s], shapes[s], &gc_err);
            int y = layer(g, "bn", MGE_OP_BATCHNORM, x, 0, NULL);
            CHECK_OK(mge_graph_init_params(g, 7, &gc_err), gc_err);
            int n = g->nnodes - 1;
            int pw = g->nodes[n].in[1], rm = g->nodes[n].in[3], rv = g->nodes[n].in[4], nbt = g->nodes[n].in[5];
            /* non-trivial weight and running statistics */
            for (int k = 0; k < 3; k++) {
                mge_tensor *t = g->values[k == 0 ? pw : k == 1 ? rm : rv].data;
                for (int64_t i = 0; i < mge_tensor_numel(t); i++)
                    ((float *)t->data)[i] = (k == 1 ? 0 : 0.5f) + mge_rng_uniform(&trng);
            }
            int wrt[2] = {x, pw}, gr[3] = {-1, -1, -1};
            CHECK_OK(mge_grad_build_from(g, y, dy, 2, wrt, gr, &gc_err), gc_err);
            int bb = mge_graph_find(g, "bn.bias");
            CHECK_OK(mge_grad_build_from(g, y, dy, 1, &bb, &gr[2], &gc_err), gc_err);
            mge_tensor tx, tdy;
            CHECK_OK(mge_tensor_alloc(&tx, MGE_F32, nds[s], shapes[s], &gc_err), gc_err);
            CHECK_OK(mge_tensor_alloc(&tdy, MGE_F32, nds[s], shapes[s], &gc_err), gc_err);
            gc_fill(&tx, &trng, -2, 3);
            gc_fill(&tdy, &trng, -1, 1);
            const mge_tensor *ins[2] = {&tx, &tdy};
            /* outputs: y, the running stats after the step, nbt, and (training) the gradients */
            int outs[7] = {y, gr[0], gr[1], gr[2]};
            int nout = training ? 4 : 1;
            mge_tensor res[3][4], st0[3], st[3][3];
            for (int k = 0; k < 3; k++)
                CHECK_OK(mge_tensor_copy(&st0[k], g->values[k == 0 ? rm : k == 1 ? rv : nbt].data, &gc_err), gc_err);
            static const char *const bes[3] = {"ref", "cpu", "cpu"};
            static const int th[3] = {1, 1, 3};
            for (int b = 0; b < 3; b++) {
                /* each run starts from the same running statistics */
                for (int k = 0; k < 3; k++) {
                    mge_tensor *t = g->values[k == 0 ? rm : k == 1 ? rv : nbt].data;
                    memcpy(t->data, st0[k].data, st0[k].nbytes);
                }
                run_copy(g, bes[b], th[b], training, nout, outs, ins, res[b]);
                for (int k = 0; k < 3; k++)
                    CHECK_OK(mge_tensor_copy(&st[b][k], g->values[k == 0 ? rm : k == 1 ? rv : nbt].data, &gc_err),
                             gc_err);
            }
            static const char *const what[4] = {"y", "dx", "dweight", "dbias"};
            for (int k = 0; k < nout; k++) {
                close_to(&res[0][k], &res[1][k], 1e-5, what[k]);
                CHECK_MSG(same_bits(&res[1][k], &res[2][k]), "%s differs between 1 and 3 threads", what[k]);
            }
            for (int k = 0; k < 2; k++) {
                close_to(&st[0][k], &st[1][k], 1e-6, k ? "running_var" : "running_mean");
                CHECK(same_bits(&st[1][k], &st[2][k]));
            }
            for (int b = 0; b < 3; b++)
                CHECK(((int64_t *)st[b][2].data)[0] == ((int64_t *)st0[2].data)[0] + training);
            for (int b = 0; b < 3; b++) {
                for (int k = 0; k < nout; k++)
                    mge_tensor_free(&res[b][k]);
                for (int k = 0; k < 3; k++)
                    mge_tensor_free(&st[b][k]);
            }
            for (int k = 0; k < 3; k++)
                mge_tensor_free(&st0[k]);
            mge_tensor_free(&tx);
            mge_tensor_free(&tdy);
            mge_graph_free(g);
        }
    }
}

int main(void)
{
    mge_rng_seed(&trng, 5);
    RUN(test_batchnorm_fd);
    RUN(test_batchnorm_chain);
    RUN(test_batchnorm_partial);
    RUN(test_layernorm_fd);
    RUN(test_infer_errors);
    RUN(test_cpu_batchnorm);
    return unit_done();
}
