/* unit_graph.h — graph-building shorthands shared by the unit tests.
 * Each helper returns the new node's output value, or -1 after printing
 * why (the test's later CHECKs then fail). */
#ifndef MGE_UNIT_GRAPH_H
#define MGE_UNIT_GRAPH_H
#include <stdio.h>
#include <string.h>

#include "mge.h"
#include "unit_attr.h"

static mge_error ug_err;

/* A node with one output named `name`. */
static inline int node(mge_graph *g, const char *name, int op, int nin, const int *in, int nattr,
                       const mge_attr *at)
{
    const char *outs[1] = {name};
    int n = mge_graph_add_node(g, name, op, nin, in, nattr, at, 1, outs, &ug_err);
    if (n < 0) {
        fprintf(stderr, "add %s: %s\n", name, ug_err.msg);
        return -1;
    }
    return g->nodes[n].out[0];
}

static inline int un(mge_graph *g, const char *name, int op, int x)
{
    return node(g, name, op, 1, &x, 0, NULL);
}

static inline int bin(mge_graph *g, const char *name, int op, int a, int b)
{
    int in[2] = {a, b};
    return node(g, name, op, 2, in, 0, NULL);
}

/* A layer op (conv2d, linear, batchnorm, layernorm) with its parameters created. */
static inline int layer(mge_graph *g, const char *name, int op, int x, int nattr, const mge_attr *at)
{
    int in[8] = {x}, np = 0;
    if (mge_graph_layer_params(g, name, op, x, nattr, at, in + 1, &np, &ug_err)) {
        fprintf(stderr, "params %s: %s\n", name, ug_err.msg);
        return -1;
    }
    return node(g, name, op, 1 + np, in, nattr, at);
}
#endif
