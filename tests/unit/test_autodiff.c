/* test_autodiff.c — the autodiff walk itself (lib/autodiff.c): argument
 * checks, values that do not reach the loss, and the finite-difference
 * harness on the identity (no rule involved). Per-op rules are tested in
 * test_grad_*.c. */
#include "internal.h"
#include "unit.h"
#include "unit_grad.h"
#include "unit_graph.h"

static void test_identity_fd(void)
{
    mge_graph *g = mge_graph_new();
    int64_t d[2] = {3, 4};
    int x = mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 2, d, &gc_err);
    CHECK(x >= 0);
    double w = gc_check(g, x, NULL, 1e-2, 0);
    CHECK(w < 1e-2);
    mge_graph_free(g);
}

static void test_bad_args(void)
{
    mge_graph *g = mge_graph_new();
    mge_error err;
    int64_t d[1] = {3};
    int x = mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 1, d, &err);
    int l = mge_graph_add_value(g, "lab", MGE_VAL_INPUT, MGE_I32, 1, d, &err);
    int gr = 7;
    /* a non-scalar loss */
    CHECK(mge_grad_build(g, x, 1, &x, &gr, &err) == MGE_ERR_SHAPE);
    CHECK(strstr(err.msg, "scalar") != NULL);
    /* integer wrt */
    int s = un(g, "s", MGE_OP_SUM, x);
    CHECK(mge_grad_build(g, s, 1, &l, &gr, &err) == MGE_ERR_INVALID);
    CHECK(strstr(err.msg, "lab") != NULL);
    /* a value that does not reach the loss gets -1 */
    int y = mge_graph_add_value(g, "y", MGE_VAL_INPUT, MGE_F32, 1, d, &err);
    gr = 7;
    CHECK_OK(mge_grad_build(g, s, 1, &y, &gr, &err), err);
    CHECK(gr == -1);
    mge_graph_free(g);
}

int main(void)
{
    RUN(test_identity_fd);
    RUN(test_bad_args);
    return unit_done();
}
