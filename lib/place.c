/* place.c — placement: which device runs each node of an executor on a
 * device other than the cpu, and the graph it then runs.
 *
 * A node goes to the device when the device's backend has a kernel for it
 * (the kernel query, with the concrete shapes at batch 1), else to the
 * host; a view goes where its input lives. A value lives where its
 * producer runs. Every edge between the two becomes an explicit copy node
 * (op copy, to=1 up, to=0 down), made once per value and direction and
 * read by every later reader there; requested outputs on the device get a
 * copy down at the end.
 *
 * Persistent values (params, state, consts) have a home. One that a node
 * updates in place (an optimizer's param and moments, batchnorm's running
 * statistics in training) lives where that node runs: on the device it is
 * a device buffer, uploaded once and authoritative until synced back; a
 * host reader of it gets a copy down per run. One nobody updates, or that
 * the host updates, lives on the host; device readers read a shadow (a
 * value of its own, bound to a device buffer uploaded once, again when the
 * caller marks it changed) — or, when a host node updates it during the
 * run, a copy up per run.
 *
 * The placed graph shares names, attributes and tensor data with the
 * source graph; value indices of the source are kept (new values are
 * appended), so callers keep addressing inputs and outputs as before.
 * Only nodes the outputs need are in it. */
#include "internal.h"
#include "place.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Inputs an op updates in place (see ops.def: optimizers, batchnorm). */
int mge_place_updates_input(int op, int k, int training)
{
    switch (op) {
    case MGE_OP_SGD: return k == 0 || k == 2;
    case MGE_OP_ADAM: return k == 0 || k == 2 || k == 3;
    case MGE_OP_BATCHNORM: return training && k >= 3;
    case MGE_OP_SYNC_BATCHNORM: return training && k >= 3;
    default: return 0;
    }
}

void mge_placed_free(mge_placed *p)
{
    if (!p)
        return;
    mge_graph *g = &p->g;
    for (int i = 0; i < g->nnodes; i++) {
        free(g->nodes[i].in);
        if (p->src_node && p->src_node[i] < 0) {
            free(g->nodes[i].name);
            free(g->nodes[i].out);
            free(g->nodes[i].attrs);
        }
    }
    for (int v = p->nsrc; v < g->nvalues; v++)
        free(g->values[v].name);
    free(g->values);
    free(g->nodes);
    free(g->outputs);
    free(p->ndev);
    free(p->vdev);
    free(p->src_node);
    free(p->shadow_of);
    free(p->outs);
    memset(p, 0, sizeof *p);
}

typedef struct builder {
    mge_placed *p;
    const mge_graph *src;
    int cap_nodes, cap_values;
    int *up, *down;   /* per source value: its copy/shadow on the device, its copy on the host; -1 */
} builder;

static int new_value(builder *b, int like, const char *suffix, mge_valkind kind, int dev, mge_error *err)
{
    mge_placed *p = b->p;
    mge_graph *g = &p->g;
    if (g->nvalues == b->cap_values) {
        int cap = b->cap_values * 2 + 16;
        mge_value *nv = realloc(g->values, sizeof *nv * (size_t)cap);
        signed char *vd = realloc(p->vdev, (size_t)cap);
        int *sh = realloc(p->shadow_of, sizeof(int) * (size_t)cap);
        if (nv)
            g->values = nv;
        if (vd)
            p->vdev = vd;
        if (sh)
            p->shadow_of = sh;
        if (!nv || !vd || !sh) {
            mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
            return -1;
        }
        b->cap_values = cap;
    }
    const mge_value *l = &g->values[like];
    size_t n = strlen(l->name) + strlen(suffix) + 1;
    char *name = malloc(n);
    if (!name) {
        mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        return -1;
    }
    snprintf(name, n, "%s%s", l->name, suffix);
    int v = g->nvalues++;
    mge_value *nv = &g->values[v];
    *nv = *l;
    nv->name = name;
    nv->kind = kind;
    nv->producer = -1;
    nv->out_index = 0;
    /* borrowed (mge_placed_free leaves it): plan-time values of small consts
     * (a reshape's shape) stay known on the device; the executor uploads
     * from the source graph */
    nv->data = kind == MGE_VAL_NODE ? NULL : l->data;
    nv->init = NULL;
    p->vdev[v] = (signed char)dev;
    p->shadow_of[v] = -1;
    return v;
}

static int grow_nodes(builder *b, mge_error *err)
{
    mge_graph *g = &b->p->g;
    if (g->nnodes < b->cap_nodes)
        return 1;
    int cap = b->cap_nodes * 2 + 16;
    mge_node *nn = realloc(g->nodes, sizeof *nn * (size_t)cap);
    signed char *nd = realloc(b->p->ndev, (size_t)cap);
    int *sn = realloc(b->p->src_node, sizeof(int) * (size_t)cap);
    if (nn)
        g->nodes = nn;
    if (nd)
        b->p->ndev = nd;
    if (sn)
        b->p->src_node = sn;
    if (!nn || !nd || !sn) {
        mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        return 0;
    }
    b->cap_nodes = cap;
    return 1;
}

/* A copy node of value v to device `to`; returns the copy's value. */
static int add_copy(builder *b, int v, int to, mge_error *err)
{
    mge_placed *p = b->p;
    int c = new_value(b, v, to ? ".to_dev" : ".to_host", MGE_VAL_NODE, to, err);
    if (c < 0 || !grow_nodes(b, err))
        return -1;
    mge_graph *g = &p->g;
    int i = g->nnodes;
    mge_node *n = &g->nodes[i];
    memset(n, 0, sizeof *n);
    n->op = MGE_OP_COPY;
    n->nin = n->nout = 1;
    n->nattr = 1;
    n->name = mge_strdup(g->values[c].name);
    n->in = malloc(sizeof(int));
    n->out = malloc(sizeof(int));
    n->attrs = calloc(1, sizeof(mge_attr));
    if (!n->name || !n->in || !n->out || !n->attrs) {
        free(n->name);
        free(n->in);
        free(n->out);
        free(n->attrs);
        mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        return -1;
    }
    n->in[0] = v;
    n->out[0] = c;
    n->attrs[0].key = MGE_KEY_to;
    n->attrs[0].n = 1;
    n->attrs[0].i[0] = to;
    g->values[c].producer = i;
    p->ndev[i] = (signed char)to;
    p->src_node[i] = -1;
    g->nnodes++;
    return c;
}

mge_status mge_place(const mge_graph *src, const char *need, int nout, const int *outs, int training,
                     mge_place_query query, void *qud, const char *dev_home, mge_placed *p, mge_error *err)
{
    memset(p, 0, sizeof *p);
    mge_status s = MGE_OK;
    builder b = {p, src, 0, 0, NULL, NULL};
    int nv = src->nvalues;
    size_t nvs = (size_t)(nv ? nv : 1);
    int *ndims = malloc(sizeof(int) * nvs);
    int64_t *dims = malloc(sizeof(int64_t) * MGE_MAX_DIMS * nvs);
    signed char *home = malloc(nvs);        /* persistent values: 1 on the device */
    char *host_written = calloc(nvs, 1);    /* updated by a host node */
    b.up = malloc(sizeof(int) * nvs);
    b.down = malloc(sizeof(int) * nvs);
    b.cap_values = nv + 16;
    p->g.values = malloc(sizeof(mge_value) * (size_t)b.cap_values);
    p->vdev = malloc((size_t)b.cap_values);
    p->shadow_of = malloc(sizeof(int) * (size_t)b.cap_values);
    p->outs = malloc(sizeof(int) * (size_t)(nout > 0 ? nout : 1));
    p->g.outputs = malloc(sizeof(int) * (size_t)(nout > 0 ? nout : 1));
    signed char *sdev = malloc((size_t)(src->nnodes ? src->nnodes : 1));   /* per source node */
    if (!ndims || !dims || !home || !host_written || !b.up || !b.down || !p->g.values || !p->vdev ||
        !p->shadow_of || !p->outs || !p->g.outputs || !sdev) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto out;
    }
    p->nsrc = nv;
    mge_binding pb;
    mge_graph_probe_binding(src, &pb);
    if ((s = mge_graph_shapes(src, &pb, ndims, dims, err)))
        goto out;
    /* the nodes' devices, in order (views follow their input) */
    for (int v = 0; v < nv; v++) {
        const mge_value *val = &src->values[v];
        p->vdev[v] = 0;
        p->shadow_of[v] = -1;
        home[v] = (signed char)(val->kind != MGE_VAL_NODE && val->kind != MGE_VAL_INPUT && dev_home && dev_home[v]);
        b.up[v] = b.down[v] = -1;
    }
    /* the nodes' devices: kernels first; then the homes their in-place
     * updates give; then views, in order, where their input lives */
    for (int i = 0; i < src->nnodes; i++) {
        sdev[i] = 0;
        const mge_node *n = &src->nodes[i];
        if (!need[i] || (mge_op_info(n->op)->flags & MGE_OPF_ALIAS) || n->nin > 64 || n->nout > 4)
            continue;
        mge_tdesc in[64], od[4];
        memset(in, 0, sizeof(mge_tdesc) * (size_t)n->nin);
        memset(od, 0, sizeof od);
        for (int k = 0; k < n->nin; k++) {
            in[k].dtype = src->values[n->in[k]].dtype;
            in[k].ndim = ndims[n->in[k]];
            memcpy(in[k].dims, &dims[(size_t)n->in[k] * MGE_MAX_DIMS], sizeof in[k].dims);
        }
        for (int k = 0; k < n->nout; k++) {
            od[k].dtype = src->values[n->out[k]].dtype;
            od[k].ndim = ndims[n->out[k]];
            memcpy(od[k].dims, &dims[(size_t)n->out[k] * MGE_MAX_DIMS], sizeof od[k].dims);
        }
        sdev[i] = (signed char)(query(qud, n, n->nin, in, n->nout, od) != 0);
        for (int k = 0; k < n->nout; k++)
            p->vdev[n->out[k]] = sdev[i];
        for (int k = 0; k < n->nin; k++) {
            int v = n->in[k];
            if (!mge_place_updates_input(n->op, k, training) || src->values[v].kind == MGE_VAL_NODE ||
                src->values[v].kind == MGE_VAL_INPUT)
                continue;
            if (sdev[i])
                home[v] = 1;
            else
                host_written[v] = 1;
        }
    }
    for (int i = 0; i < src->nnodes; i++) {
        const mge_node *n = &src->nodes[i];
        if (!need[i] || !(mge_op_info(n->op)->flags & MGE_OPF_ALIAS))
            continue;
        const mge_value *x = &src->values[n->in[0]];
        sdev[i] = x->kind == MGE_VAL_NODE ? p->vdev[n->in[0]] : x->kind == MGE_VAL_INPUT ? 0 : home[n->in[0]];
        for (int k = 0; k < n->nout; k++)
            p->vdev[n->out[k]] = sdev[i];
    }
    for (int v = 0; v < nv; v++) {
        p->g.values[v] = src->values[v];
        if (src->values[v].kind != MGE_VAL_NODE)
            p->vdev[v] = home[v];
    }
    p->g.nvalues = nv;
    p->g.inputs = src->inputs;
    p->g.ninputs = src->ninputs;
    p->g.loss = src->loss;
    p->g.meta = src->meta;
    p->g.nmeta = src->nmeta;
    /* the nodes, with copies in front of the readers that need them */
    for (int i = 0; i < src->nnodes; i++) {
        if (!need[i])
            continue;
        const mge_node *n = &src->nodes[i];
        int dev = sdev[i];
        int *in = malloc(sizeof(int) * (size_t)(n->nin ? n->nin : 1));
        if (!in) {
            s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
            goto out;
        }
        for (int k = 0; k < n->nin; k++) {
            int v = n->in[k], at = p->vdev[v];
            in[k] = v;
            if (at == dev)
                continue;
            const mge_value *val = &src->values[v];
            int persistent = val->kind != MGE_VAL_NODE && val->kind != MGE_VAL_INPUT;
            int *have = dev ? &b.up[v] : &b.down[v];
            if (*have < 0) {
                if (persistent && dev && !host_written[v]) {
                    /* a shadow, uploaded once */
                    *have = new_value(&b, v, ".on_dev", val->kind, 1, err);
                    if (*have >= 0)
                        p->shadow_of[*have] = v;
                    /* a const's shadow shares its host data: the shape
                     * ops read small consts' values when planning */
                    if (*have >= 0 && val->kind == MGE_VAL_CONST)
                        p->g.values[*have].data = val->data;
                } else {
                    *have = add_copy(&b, v, dev, err);
                }
                if (*have < 0) {
                    free(in);
                    s = err ? err->code : MGE_ERR_NOMEM;
                    goto out;
                }
            }
            in[k] = *have;
        }
        if (!grow_nodes(&b, err)) {
            free(in);
            s = MGE_ERR_NOMEM;
            goto out;
        }
        int j = p->g.nnodes++;
        p->g.nodes[j] = *n;
        p->g.nodes[j].in = in;
        p->ndev[j] = (signed char)dev;
        p->src_node[j] = i;
        for (int k = 0; k < n->nout; k++)
            p->g.values[n->out[k]].producer = j;
    }
    /* results come back to the host */
    for (int i = 0; i < nout; i++) {
        int v = outs[i];
        p->outs[i] = v;
        if (p->vdev[v]) {
            if (b.down[v] < 0 && (b.down[v] = add_copy(&b, v, 0, err)) < 0) {
                s = err ? err->code : MGE_ERR_NOMEM;
                goto out;
            }
            p->outs[i] = b.down[v];
        }
        p->g.outputs[i] = p->outs[i];
    }
    p->g.noutputs = nout;
out:
    free(ndims);
    free(dims);
    free(home);
    free(host_written);
    free(b.up);
    free(b.down);
    free(sdev);
    if (s)
        mge_placed_free(p);
    return s;
}
