/* pass_cse.c — common subexpression elimination.
 *
 * Two nodes with the same op, the same inputs (value indices, in order,
 * after earlier merges) and the same materialized attributes (floats
 * compared bit for bit) compute the same values: the later one goes and its
 * consumers read the earlier one's outputs. Nodes are visited in
 * topological order with a hash of (op, inputs, attributes), so chains of
 * duplicates merge in one pass.
 *
 * Never merged: MGE_OPF_TRAINING ops (dropout draws a mask per node,
 * batchnorm in training and the optimizer updates change state in place).
 *
 * Names are the interface: a graph output or the loss keeps its name. When
 * the later node produces one and the earlier does not, the earlier node's
 * place keeps the later node's name and outputs (its inputs are defined
 * there already), so the output's name survives. When both produce outputs,
 * neither goes. The graph is rebuilt like dce does; tensor data and the
 * file mapping move over. With nothing to merge, *g is left untouched. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>


/* ---------------------------------------------------------------- keys */

static int attr_equal(const mge_attr *a, const mge_attr *b)
{
    if (a->key != b->key)
        return 0;
    switch (mge_key_type(a->key)) {
    case MGE_ATTR_INTS:
    case MGE_ATTR_OPS:
    case MGE_ATTR_FLOATS:
        if (a->n != b->n || a->n < 0 || a->n > MGE_MAX_DIMS)
            return 0;
        return memcmp(a->i, b->i, sizeof(int64_t) * (size_t)a->n) == 0;
    case MGE_ATTR_FLOAT:
        return memcmp(&a->f, &b->f, sizeof a->f) == 0; /* bitwise: -0.0 and NaN payloads differ */
    default:
        return a->i[0] == b->i[0];
    }
}

static uint64_t mix(uint64_t h, uint64_t x)
{
    h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0x100000001b3ull;
}

static uint64_t node_hash(const mge_node *n, const int *in)
{
    uint64_t h = mix(1469598103934665603ull, (uint64_t)n->op);
    for (int k = 0; k < n->nin; k++)
        h = mix(h, (uint64_t)(uint32_t)in[k]);
    for (int a = 0; a < n->nattr; a++) {
        const mge_attr *at = &n->attrs[a];
        h = mix(h, (uint64_t)at->key);
        if (mge_key_type(at->key) == MGE_ATTR_INTS || mge_key_type(at->key) == MGE_ATTR_OPS ||
            mge_key_type(at->key) == MGE_ATTR_FLOATS) {
            for (int k = 0; k < at->n && k < MGE_MAX_DIMS; k++)
                h = mix(h, (uint64_t)at->i[k]);
        } else if (mge_key_type(at->key) == MGE_ATTR_FLOAT) {
            uint64_t bits;
            memcpy(&bits, &at->f, sizeof bits);
            h = mix(h, bits);
        } else {
            h = mix(h, (uint64_t)at->i[0]);
        }
    }
    return h;
}

/* The value v resolves to after merges (alias chains are short). */
static int resolve(const int *alias, int v)
{
    while (alias[v] >= 0)
        v = alias[v];
    return v;
}

/* Nodes a and b (a earlier) compute the same thing; in holds b's resolved inputs. */
static int same_node(const mge_graph *g, const int *alias, int a, int b)
{
    const mge_node *na = &g->nodes[a], *nb = &g->nodes[b];
    if (na->op != nb->op || na->nin != nb->nin || na->nout != nb->nout || na->nattr != nb->nattr)
        return 0;
    for (int k = 0; k < na->nin; k++)
        if (resolve(alias, na->in[k]) != resolve(alias, nb->in[k]))
            return 0;
    for (int k = 0; k < na->nattr; k++)
        if (!attr_equal(&na->attrs[k], &nb->attrs[k]))
            return 0;
    return 1;
}

/* ---------------------------------------------------------------- the pass */

mge_status mge_pass_cse(mge_graph **gp, int *changed, mge_error *err)
{
    mge_graph *g = *gp;
    *changed = 0;
    if (g->nnodes < 2)
        return MGE_OK;
    size_t nv = (size_t)g->nvalues + 1, nn = (size_t)g->nnodes;
    size_t cap = 16;
    while (cap < nn * 2)
        cap *= 2;
    int *alias = malloc(sizeof(int) * nv);
    char *pinned_v = calloc(nv, 1);
    char *pinned = calloc(nn, 1);   /* node produces a graph output or the loss */
    char *dead = calloc(nn, 1);
    int *ident = malloc(sizeof(int) * nn);  /* whose name and outputs node slot i carries */
    int *table = malloc(sizeof(int) * cap);
    char *keep = NULL;
    int *remap = NULL;
    mge_graph *c = NULL;
    mge_status s = MGE_OK;
    if (!alias || !pinned_v || !pinned || !dead || !ident || !table) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t v = 0; v < nv; v++)
        alias[v] = -1;
    for (int i = 0; i < g->noutputs; i++)
        pinned_v[g->outputs[i]] = 1;
    if (g->loss >= 0)
        pinned_v[g->loss] = 1;
    for (size_t i = 0; i < cap; i++)
        table[i] = -1;

    int merged = 0;
    for (int i = 0; i < g->nnodes; i++) {
        const mge_node *n = &g->nodes[i];
        ident[i] = i;
        for (int k = 0; k < n->nout; k++)
            pinned[i] |= pinned_v[n->out[k]];
        const mge_opinfo *oi = mge_op_info(n->op);
        if (!oi || (oi->flags & MGE_OPF_TRAINING))
            continue;
        int rin[64];
        if (n->nin > 64)
            continue;
        for (int k = 0; k < n->nin; k++)
            rin[k] = resolve(alias, n->in[k]);
        size_t h = (size_t)node_hash(n, rin) & (cap - 1);
        int j = -1;
        for (; table[h] >= 0; h = (h + 1) & (cap - 1))
            if (same_node(g, alias, table[h], i)) {
                j = table[h];
                break;
            }
        if (j < 0) {
            table[h] = i;
            continue;
        }
        /* slot j keeps computing; whose identity it carries decides which values go */
        int jid = ident[j];
        if (pinned[i] && pinned[jid])
            continue;  /* both names must stay: leave the duplicate */
        int keep_id = pinned[i] ? i : jid, drop_id = pinned[i] ? jid : i;
        const mge_node *kn = &g->nodes[keep_id], *dn = &g->nodes[drop_id];
        for (int k = 0; k < dn->nout; k++)
            alias[dn->out[k]] = kn->out[k];
        ident[j] = keep_id;
        pinned[j] = pinned[keep_id];
        dead[i] = 1;
        merged++;
    }
    if (!merged)
        goto done;

    if ((s = mge_pass_rb_alloc(g, &keep, &remap, &c, err)))
        goto done;
    for (int v = 0; v < g->nvalues; v++)
        keep[v] = alias[v] < 0;
    if ((s = mge_pass_rb_values(g, keep, NULL, c, remap, err)))
        goto done;
    for (int i = 0; i < g->nnodes; i++) {
        if (dead[i])
            continue;
        const mge_node *n = &g->nodes[i], *id = &g->nodes[ident[i]];
        int in[64], out[8];
        if (n->nin > 64 || id->nout > 8) {
            s = mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: too many inputs or outputs", n->name);
            goto done;
        }
        for (int k = 0; k < n->nin; k++)
            in[k] = remap[resolve(alias, n->in[k])];
        for (int k = 0; k < id->nout; k++)
            out[k] = remap[id->out[k]];
        if ((s = mge_pass_rb_node(c, id->name, n->op, n->nin, in, id->nout, out, n->nattr, n->attrs, err)))
            goto done;
    }
    s = mge_pass_rb_end(gp, &c, remap, NULL, changed, err);
done:
    mge_graph_free(c);
    free(alias);
    free(pinned_v);
    free(pinned);
    free(dead);
    free(ident);
    free(table);
    free(keep);
    free(remap);
    return s;
}
