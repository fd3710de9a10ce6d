/* pass_fuse_elemwise.c — chains of f32 elementwise ops become one
 * fused_elemwise node (one pass over memory instead of one per op).
 *
 * A chain is a run of nodes n1 -> n2 -> ... where each is a float unary op
 * (mge_fused_unary_ok) or an elementwise binary op (mge_fused_binary_ok)
 * on f32, and the value flowing along it is the FIRST operand of every
 * binary op after the first node (either operand for add, mul, maximum and
 * minimum, which commute; x - t, x / t, x ^ t end the chain). The first
 * node may be binary with both operands from elsewhere: its first operand
 * is x (for a commuting op, the operand with the output's shape, so the
 * fused node can run in place). Every value inside the chain has exactly
 * one read and is no graph output or loss, so nothing else needs it. At
 * most 8 ops per fused node (the OPS attribute's capacity); ops with
 * different alphas (leaky_relu, elu) split a chain (the node has one alpha). Chains of
 * two or more nodes become fused_elemwise(x, extra operands in chain order,
 * ops=[...], alpha=...) at the place of the chain's last node, with its
 * name and output value (so the output's name stays); every operand is
 * defined before that place, because each chain node's is.
 *
 * fused_elemwise has no gradient, so a graph with a loss (training) is
 * left alone; strip-training first. With no chain, *g is left untouched. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define FE_MAXOPS MGE_MAX_DIMS

typedef struct fe_chain {
    int tail;                   /* the last node: the fused node takes its place and name */
    int nops, ops[FE_MAXOPS];
    int nin, in[FE_MAXOPS + 1]; /* x, then one extra operand per binary op */
    double alpha;
    int has_alpha;              /* an op with alpha (leaky_relu, elu) set it */
} fe_chain;

static int f32_value(const mge_graph *g, int v)
{
    return g->values[v].dtype == MGE_F32;
}

/* Node i may be part of a chain: a fusable op on f32 with one f32 output. */
static int fusable(const mge_graph *g, int i)
{
    const mge_node *n = &g->nodes[i];
    if (n->nout != 1 || !f32_value(g, n->out[0]))
        return 0;
    if (mge_fused_unary_ok(n->op))
        return n->nin == 1 && f32_value(g, n->in[0]);
    if (mge_fused_binary_ok(n->op))
        return n->nin == 2 && f32_value(g, n->in[0]) && f32_value(g, n->in[1]);
    return 0;
}

static int commutes(int op)
{
    return op == MGE_OP_ADD || op == MGE_OP_MUL || op == MGE_OP_MAXIMUM || op == MGE_OP_MINIMUM;
}

static int same_dims(const mge_value *a, const mge_value *b)
{
    return a->ndim == b->ndim && memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->ndim) == 0;
}

/* Appends node i to chain c, the chain value being operand `side` (-1: i
 * starts the chain); 0 when its alpha (leaky_relu, elu) disagrees with the chain's. */
static int chain_add(const mge_graph *g, fe_chain *c, int i, int side)
{
    const mge_node *n = &g->nodes[i];
    if (mge_op_flags(n->op) & MGE_OPF_TABLE && mge_node_attr(n, MGE_KEY_alpha)) {
        double a = mge_node_float(n, MGE_KEY_alpha, 0.01);
        if (c->has_alpha && a != c->alpha)
            return 0;
        c->alpha = a;
        c->has_alpha = 1;
    }
    if (side < 0) {
        int x = 0;
        /* x as the operand of the output's shape, so the planner may run the node in place */
        if (n->nin == 2 && commutes(n->op) && !same_dims(&g->values[n->in[0]], &g->values[n->out[0]]) &&
            same_dims(&g->values[n->in[1]], &g->values[n->out[0]]))
            x = 1;
        c->in[c->nin++] = n->in[x];
        if (n->nin == 2)
            c->in[c->nin++] = n->in[1 - x];
    } else if (n->nin == 2) {
        c->in[c->nin++] = n->in[1 - side];
    }
    c->ops[c->nops++] = n->op;
    c->tail = i;
    return 1;
}

/* Which operand of node i the chain value v is, when the chain may go on
 * through it; -1 when not. */
static int chain_side(const mge_graph *g, int i, int v)
{
    const mge_node *n = &g->nodes[i];
    if (n->nin == 1)
        return n->in[0] == v ? 0 : -1;
    if (n->in[0] == v && n->in[1] != v)
        return 0;
    if (n->in[1] == v && n->in[0] != v && commutes(n->op))
        return 1;
    return -1;
}

mge_status mge_pass_fuse_elemwise(mge_graph **gp, int *changed, mge_error *err)
{
    mge_graph *g = *gp;
    *changed = 0;
    if (g->loss >= 0 || g->nnodes < 2)
        return MGE_OK;   /* fused ops have no gradient: training graphs stay as they are */
    size_t nv = (size_t)g->nvalues + 1, nn = (size_t)g->nnodes + 1;
    int *uses = malloc(sizeof(int) * nv);
    int *reader = malloc(sizeof(int) * nv);   /* a node reading the value (the only one when uses is 1) */
    int *chain_of = malloc(sizeof(int) * nn); /* per node: its chain, or -1 */
    fe_chain *chains = malloc(sizeof *chains * nn);
    char *keep = NULL;
    int *remap = NULL;
    mge_graph *c = NULL;
    mge_status s = MGE_OK;
    int nchains = 0;
    if (!uses || !reader || !chain_of || !chains) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto done;
    }
    mge_pass_count_uses(g, uses);
    for (int v = 0; v < g->nvalues; v++)
        reader[v] = -1;
    for (int i = 0; i < g->nnodes; i++) {
        chain_of[i] = -1;
        for (int k = 0; k < g->nodes[i].nin; k++)
            reader[g->nodes[i].in[k]] = i;
    }

    /* Chains grow from their first node, in topological order: a node that
     * could continue an earlier chain has been taken by it already, so the
     * chains are maximal (up to the op limit and alpha splits). */
    for (int h = 0; h < g->nnodes; h++) {
        if (chain_of[h] >= 0 || !fusable(g, h))
            continue;
        fe_chain *ch = &chains[nchains];
        memset(ch, 0, sizeof *ch);
        ch->alpha = 0.01;
        chain_add(g, ch, h, -1);
        int len = 1;
        chain_of[h] = nchains;
        for (int cur = h; ch->nops < FE_MAXOPS;) {
            int v = g->nodes[cur].out[0], nxt = reader[v], side;
            if (uses[v] != 1 || mge_pass_is_root(g, v) || nxt < 0 || chain_of[nxt] >= 0 || !fusable(g, nxt) ||
                (side = chain_side(g, nxt, v)) < 0 || !chain_add(g, ch, nxt, side))
                break;
            chain_of[nxt] = nchains;
            cur = nxt;
            len++;
        }
        if (len >= 2)
            nchains++;
        else
            chain_of[h] = -1;
    }
    if (!nchains)
        goto done;

    /* Rebuild: the values inside chains go, each chain's last node becomes
     * the fused node, the other nodes of chains go. */
    if ((s = mge_pass_rb_alloc(g, &keep, &remap, &c, err)))
        goto done;
    for (int i = 0; i < g->nnodes; i++)
        if (chain_of[i] >= 0 && chains[chain_of[i]].tail != i)
            keep[g->nodes[i].out[0]] = 0;
    if ((s = mge_pass_rb_values(g, keep, NULL, c, remap, err)))
        goto done;
    for (int i = 0; i < g->nnodes; i++) {
        const mge_node *n = &g->nodes[i];
        if (chain_of[i] < 0) {
            if ((s = mge_pass_rb_copy(c, n, remap, err)))
                goto done;
            continue;
        }
        const fe_chain *ch = &chains[chain_of[i]];
        if (ch->tail != i)
            continue;
        int in[FE_MAXOPS + 1], out = remap[n->out[0]];
        for (int k = 0; k < ch->nin; k++)
            in[k] = remap[ch->in[k]];
        mge_attr at[2];
        memset(at, 0, sizeof at);
        at[0].key = MGE_KEY_ops;
        at[0].n = ch->nops;
        for (int k = 0; k < ch->nops; k++)
            at[0].i[k] = ch->ops[k];
        at[1].key = MGE_KEY_alpha;
        at[1].n = 1;
        at[1].f = ch->alpha;
        if ((s = mge_pass_rb_node(c, n->name, MGE_OP_FUSED_ELEMWISE, ch->nin, in, 1, &out, 2, at, err)))
            goto done;
    }
    s = mge_pass_rb_end(gp, &c, remap, NULL, changed, err);
done:
    mge_graph_free(c);
    free(uses);
    free(reader);
    free(chain_of);
    free(chains);
    free(keep);
    free(remap);
    return s;
}
