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

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Node names, then value names, are each unique in g. */
static int names_unique(const mge_graph *g)
{
    int ok = 1;
    for (int pass = 0; pass < 2; pass++) {
        int n = pass ? g->nvalues : g->nnodes;
        char **v = malloc(sizeof(char *) * (size_t)(n + 1));
        for (int i = 0; i < n; i++)
            v[i] = pass ? g->values[i].name : g->nodes[i].name;
        qsort(v, (size_t)n, sizeof *v, cmp_str);
        for (int i = 1; i < n; i++)
            if (strcmp(v[i - 1], v[i]) == 0) {
                fprintf(stderr, "two %s named '%s'\n", pass ? "values" : "nodes", v[i]);
                ok = 0;
            }
        free(v);
    }
    return ok;
}

/* Gradient nodes get names no node has, also where only a node (not a
 * value) holds the name the emitter tries first: here nodes named s.dK
 * and y.dK, for the K that the walk starts at, write values named
 * otherwise. */
static void test_unique_names(void)
{
    mge_graph *g = mge_graph_new();
    mge_error err;
    int64_t d[1] = {3};
    int x = mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 1, d, &err);
    const int m = 10, n0 = 2 + 2 * m; /* node count when the walk starts */
    for (int j = 0; j < 2 * m; j++) {
        char nm[32], out[32];
        snprintf(nm, sizeof nm, "%s.d%d", j < m ? "s" : "y", n0 + j % m);
        snprintf(out, sizeof out, "decoy%d", j);
        const char *on = out;
        CHECK(mge_graph_add_node(g, nm, MGE_OP_RELU, 1, &x, 0, NULL, 1, &on, &err) >= 0);
    }
    CHECK(mge_graph_find_node(g, "s.d22") == 0 && mge_graph_find_node(g, "y.d22") == m);
    CHECK(mge_graph_find_node(g, "s.d21") < 0 && mge_graph_find_node(g, "decoy0") < 0);
    int y = un(g, "y", MGE_OP_RELU, x);
    int sm = un(g, "s", MGE_OP_SUM, y);
    CHECK(g->nnodes == n0);
    CHECK(mge_graph_find_node(g, "s") == n0 - 1); /* appended after the index was built */
    int gr = -1;
    CHECK_OK(mge_grad_build(g, sm, 1, &x, &gr, &err), err);
    CHECK(gr >= 0 && g->nnodes > n0);
    CHECK(names_unique(g));
    mge_graph_free(g);

    /* a long chain: every gradient node's name is new */
    g = mge_graph_new();
    x = mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 1, d, &err);
    int v = x;
    for (int i = 0; i < 3000; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "r%d", i);
        v = un(g, nm, i % 2 ? MGE_OP_RELU : MGE_OP_TANH, v);
    }
    v = un(g, "s", MGE_OP_SUM, v);
    CHECK_OK(mge_grad_build(g, v, 1, &x, &gr, &err), err);
    CHECK(gr >= 0 && g->nnodes > 6000);
    CHECK(names_unique(g));
    mge_graph_free(g);
}

int main(void)
{
    RUN(test_identity_fd);
    RUN(test_bad_args);
    RUN(test_unique_names);
    return unit_done();
}
