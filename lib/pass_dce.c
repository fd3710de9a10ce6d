/* pass_dce.c — dead code elimination.
 *
 * Keeps the nodes the graph outputs and the loss need, every declared input
 * (they are the model's interface: removing one would shift the record order
 * mge-run expects) and the params, state and consts a kept node reads or
 * that are outputs themselves. The graph is rebuilt into a fresh one; tensor
 * data and the file mapping move over without copying. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

mge_status mge_pass_dce(mge_graph **gp, int *changed, mge_error *err)
{
    mge_graph *g = *gp;
    *changed = 0;
    int nroots = g->noutputs + (g->loss >= 0);
    if (nroots == 0)
        return MGE_OK; /* nothing marks anything live: keep the graph as it is */
    int *roots = malloc(sizeof(int) * (size_t)nroots);
    char *need = malloc((size_t)g->nnodes + 1);
    char *keep = calloc((size_t)g->nvalues + 1, 1);
    int *remap = malloc(sizeof(int) * ((size_t)g->nvalues + 1));
    mge_graph *c = NULL;
    mge_status s = MGE_OK;
    if (!roots || !need || !keep || !remap) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto done;
    }
    memcpy(roots, g->outputs, sizeof(int) * (size_t)g->noutputs);
    if (g->loss >= 0)
        roots[g->noutputs] = g->loss;
    mge_graph_needed(g, nroots, roots, need, NULL);

    int dead_nodes = 0;
    for (int i = 0; i < g->nnodes; i++) {
        if (!need[i]) {
            dead_nodes++;
            continue;
        }
        const mge_node *n = &g->nodes[i];
        for (int k = 0; k < n->nin; k++)
            keep[n->in[k]] = 1;
        for (int k = 0; k < n->nout; k++)
            keep[n->out[k]] = 1;
    }
    for (int i = 0; i < g->ninputs; i++)
        keep[g->inputs[i]] = 1;
    for (int i = 0; i < nroots; i++)
        keep[roots[i]] = 1;
    int dead_values = 0;
    for (int v = 0; v < g->nvalues; v++)
        dead_values += !keep[v];
    if (dead_nodes == 0 && dead_values == 0)
        goto done;

    c = mge_graph_new();
    if (!c) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto done;
    }
    /* Values first, in the old order; producers are fixed up with the nodes. */
    for (int v = 0; v < g->nvalues; v++) {
        remap[v] = -1;
        if (!keep[v])
            continue;
        const mge_value *src = &g->values[v];
        int idx = mge_graph_add_value(c, src->name, src->kind, src->dtype, src->ndim, src->dims, err);
        if (idx < 0) {
            s = err ? err->code : MGE_ERR_INVALID;
            goto done;
        }
        remap[v] = idx;
        c->values[idx].out_index = src->out_index;
    }
    /* add_value appended inputs in value order; keep declaration order */
    for (int i = 0; i < g->ninputs; i++)
        c->inputs[i] = remap[g->inputs[i]];
    c->nodes = calloc((size_t)(g->nnodes - dead_nodes + 1), sizeof *c->nodes);
    if (!c->nodes) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto done;
    }
    c->cap_nodes = g->nnodes - dead_nodes + 1;
    for (int i = 0; i < g->nnodes; i++) {
        if (!need[i])
            continue;
        const mge_node *src = &g->nodes[i];
        int ni = c->nnodes++;
        mge_node *d = &c->nodes[ni];
        d->op = src->op;
        d->nin = src->nin;
        d->nout = src->nout;
        d->nattr = src->nattr;
        d->name = mge_strdup(src->name);
        d->in = malloc(sizeof(int) * (size_t)(src->nin + 1));
        d->out = malloc(sizeof(int) * (size_t)(src->nout + 1));
        d->attrs = calloc((size_t)src->nattr + 16, sizeof *d->attrs);
        if (!d->name || !d->in || !d->out || !d->attrs) {
            s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
            goto done;
        }
        for (int k = 0; k < src->nin; k++)
            d->in[k] = remap[src->in[k]];
        for (int k = 0; k < src->nout; k++) {
            d->out[k] = remap[src->out[k]];
            c->values[d->out[k]].producer = ni;
        }
        memcpy(d->attrs, src->attrs, sizeof(mge_attr) * (size_t)src->nattr);
    }
    if (g->noutputs) {
        c->outputs = malloc(sizeof(int) * (size_t)g->noutputs);
        if (!c->outputs) {
            s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
            goto done;
        }
        for (int i = 0; i < g->noutputs; i++)
            c->outputs[i] = remap[g->outputs[i]];
        c->noutputs = g->noutputs;
    }
    c->loss = g->loss >= 0 ? remap[g->loss] : -1;
    for (int i = 0; i < g->nmeta; i++)
        if ((s = mge_graph_set_meta(c, g->meta[i].key, g->meta[i].value, err)))
            goto done;
    /* Nothing can fail from here on: move data, init specs and the mapping. */
    for (int v = 0; v < g->nvalues; v++) {
        if (remap[v] < 0)
            continue;
        mge_value *src = &g->values[v], *dst = &c->values[remap[v]];
        dst->data = src->data;
        dst->init = src->init;
        src->data = NULL;
        src->init = NULL;
    }
    c->mapping = g->mapping;
    c->mapping_size = g->mapping_size;
    g->mapping = NULL;
    g->mapping_size = 0;
    mge_graph_free(g);
    *gp = c;
    c = NULL;
    *changed = 1;
done:
    mge_graph_free(c);
    free(roots);
    free(need);
    free(keep);
    free(remap);
    return s;
}
