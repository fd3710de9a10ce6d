/* graph.c — building, querying and validating the graph IR (template
 * shapes: lib/graph_shapes.c). */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- name hash */

typedef struct names {
    int cap;      /* power of two */
    int *slot;    /* value index + 1, 0 = empty */
    /* node names, indexed on demand: nodes are only ever appended to a
     * graph (passes build a new one), so [0, nindexed) stays valid */
    int ncap;     /* power of two, 0 = not built */
    int *nslot;   /* node index + 1, 0 = empty */
    int nindexed;
} names;

/* Puts index v (of a value or node named name) in the first free slot of its probe chain. */
static void names_insert(int *slot, int cap, const char *name, int v)
{
    uint64_t h = mge_hash_str(name) & (uint64_t)(cap - 1);
    while (slot[h])
        h = (h + 1) & (uint64_t)(cap - 1);
    slot[h] = v + 1;
}

static int names_rehash(mge_graph *g, int cap)
{
    names *nm = g->names;
    int *slot = calloc((size_t)cap, sizeof *slot);
    if (!slot)
        return 0;
    for (int v = 0; v < g->nvalues; v++)
        names_insert(slot, cap, g->values[v].name, v);
    free(nm->slot);
    nm->slot = slot;
    nm->cap = cap;
    return 1;
}

int mge_graph_find(const mge_graph *g, const char *name)
{
    const names *nm = g->names;
    if (!nm || !nm->cap || !name)
        return -1;
    uint64_t h = mge_hash_str(name) & (uint64_t)(nm->cap - 1);
    while (nm->slot[h]) {
        int v = nm->slot[h] - 1;
        if (strcmp(g->values[v].name, name) == 0)
            return v;
        h = (h + 1) & (uint64_t)(nm->cap - 1);
    }
    return -1;
}

/* Brings the node-name index up to g->nnodes; 0 when out of memory. */
static int nodes_index(mge_graph *g)
{
    names *nm = g->names;
    if (nm->nindexed > g->nnodes) { /* cannot happen through the API; start over */
        free(nm->nslot);
        nm->nslot = NULL;
        nm->ncap = nm->nindexed = 0;
    }
    if (g->nnodes * 2 > nm->ncap || !nm->nslot) { /* also before the first node */
        int cap = nm->ncap ? nm->ncap : 64;
        while (g->nnodes * 2 > cap)
            cap *= 2;
        int *slot = calloc((size_t)cap, sizeof *slot);
        if (!slot)
            return 0;
        free(nm->nslot);
        nm->nslot = slot;
        nm->ncap = cap;
        nm->nindexed = 0;
    }
    for (; nm->nindexed < g->nnodes; nm->nindexed++)
        names_insert(nm->nslot, nm->ncap, g->nodes[nm->nindexed].name, nm->nindexed);
    return 1;
}

int mge_graph_find_node(mge_graph *g, const char *name)
{
    if (!g->names || !name)
        return -1;
    if (!nodes_index(g)) { /* no memory for the index: look the slow way */
        for (int i = 0; i < g->nnodes; i++)
            if (strcmp(g->nodes[i].name, name) == 0)
                return i;
        return -1;
    }
    const names *nm = g->names;
    uint64_t h = mge_hash_str(name) & (uint64_t)(nm->ncap - 1);
    int found = -1;
    /* names need not be unique among nodes: the first node wins */
    for (; nm->nslot[h]; h = (h + 1) & (uint64_t)(nm->ncap - 1)) {
        int i = nm->nslot[h] - 1;
        if ((found < 0 || i < found) && strcmp(g->nodes[i].name, name) == 0)
            found = i;
    }
    return found;
}

/* ---------------------------------------------------------------- life cycle */

mge_graph *mge_graph_new(void)
{
    mge_graph *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->loss = -1;
    g->names = calloc(1, sizeof(names));
    if (!g->names || !names_rehash(g, 64)) {
        free(g->names);
        free(g);
        return NULL;
    }
    return g;
}

void mge_graph_free(mge_graph *g)
{
    if (!g)
        return;
    for (int i = 0; i < g->nvalues; i++) {
        mge_value *v = &g->values[i];
        free(v->name);
        free(v->init);
        if (v->data) {
            mge_tensor_free(v->data);
            free(v->data);
        }
    }
    for (int i = 0; i < g->nnodes; i++) {
        free(g->nodes[i].name);
        free(g->nodes[i].in);
        free(g->nodes[i].out);
        free(g->nodes[i].attrs);
    }
    for (int i = 0; i < g->nmeta; i++) {
        free(g->meta[i].key);
        free(g->meta[i].value);
    }
    free(g->values);
    free(g->nodes);
    free(g->inputs);
    free(g->outputs);
    free(g->meta);
    if (g->names) {
        free(((names *)g->names)->slot);
        free(((names *)g->names)->nslot);
    }
    free(g->names);
    mge_graph_probes_free(g);
    if (g->mapping)
        g->mapping->release(g->mapping);
    free(g);
}

static int valid_name(const char *s)
{
    if (!s || !*s)
        return 0;
    for (const char *p = s; *p; p++) {
        char c = *p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '.' || (c >= '0' && c <= '9')))
            return 0;
    }
    return 1;
}

int mge_graph_add_value(mge_graph *g, const char *name, mge_valkind kind, mge_dtype dt, int ndim,
                        const int64_t *dims, mge_error *err)
{
    if (!valid_name(name)) {
        mge_error_set(err, MGE_ERR_INVALID, "invalid name '%s'", name ? name : "");
        return -1;
    }
    if (mge_graph_find(g, name) >= 0) {
        mge_error_set(err, MGE_ERR_INVALID, "'%s' is already defined", name);
        return -1;
    }
    if ((unsigned)dt >= MGE_NDTYPES || ndim < 0 || ndim > MGE_MAX_DIMS) {
        mge_error_set(err, MGE_ERR_INVALID, "'%s': bad dtype or rank", name);
        return -1;
    }
    for (int i = 0; i < ndim; i++) {
        if (dims[i] >= 0 || kind == MGE_VAL_NODE)
            continue;
        if (kind == MGE_VAL_INPUT && mge_dim_is_symbol(dims[i]))
            continue;
        char db[96];
        mge_error_set(err, MGE_ERR_SHAPE, "'%s': %s", name,
                      kind == MGE_VAL_INPUT ? "input dims must be numbers or symbols"
                      : mge_dim_is_symbol(dims[i]) ? "only inputs may have symbolic dims"
                                                   : "negative dimension");
        if (kind != MGE_VAL_INPUT && mge_dim_is_symbol(dims[i]))
            mge_error_set(err, MGE_ERR_SHAPE, "'%s': only inputs may have symbolic dims (%s)", name,
                          mge_dim_str(dims[i], db, sizeof db));
        return -1;
    }
    if (g->nvalues == g->cap_values) {
        int cap = g->cap_values ? g->cap_values * 2 : 64;
        mge_value *nv = realloc(g->values, sizeof *nv * (size_t)cap);
        if (!nv) {
            mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
            return -1;
        }
        g->values = nv;
        g->cap_values = cap;
    }
    names *nm = g->names;
    if ((g->nvalues + 1) * 2 > nm->cap && !names_rehash(g, nm->cap * 2)) {
        mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        return -1;
    }
    mge_value *v = &g->values[g->nvalues];
    memset(v, 0, sizeof *v);
    v->name = mge_strdup(name);
    if (!v->name) {
        mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        return -1;
    }
    v->kind = kind;
    v->dtype = dt;
    v->ndim = ndim;
    for (int i = 0; i < ndim; i++)
        v->dims[i] = dims[i];
    v->producer = -1;
    int idx = g->nvalues++;
    names_insert(nm->slot, nm->cap, name, idx);
    if (kind == MGE_VAL_INPUT) {
        int *ni = realloc(g->inputs, sizeof *ni * (size_t)(g->ninputs + 1));
        if (!ni) {
            mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
            return -1;
        }
        g->inputs = ni;
        g->inputs[g->ninputs++] = idx;
    }
    return idx;
}

int mge_graph_add_node(mge_graph *g, const char *name, int op, int nin, const int *in, int nattr,
                       const mge_attr *attrs, int nout, const char *const *outnames, mge_error *err)
{
    const mge_opinfo *oi = mge_op_info(op);
    if (!oi) {
        mge_error_set(err, MGE_ERR_INVALID, "unknown op %d", op);
        return -1;
    }
    if (nin < oi->min_in || nin > oi->max_in) {
        if (oi->min_in == oi->max_in)
            mge_error_set(err, MGE_ERR_INVALID, "%s takes %d input%s, got %d", oi->name, oi->min_in,
                          oi->min_in == 1 ? "" : "s", nin);
        else
            mge_error_set(err, MGE_ERR_INVALID, "%s takes %d to %d inputs, got %d", oi->name, oi->min_in,
                          oi->max_in, nin);
        return -1;
    }
    if (!mge_op_nout_ok(op, nout)) {
        mge_error_set(err, MGE_ERR_INVALID, "%s has %s%d output%s, got %d names", oi->name,
                      oi->flags & MGE_OPF_VAROUT ? "1 to " : "", oi->nout, oi->nout == 1 ? "" : "s", nout);
        return -1;
    }
    for (int i = 0; i < nin; i++)
        if (in[i] < 0 || in[i] >= g->nvalues) {
            mge_error_set(err, MGE_ERR_INVALID, "%s: input %d refers to no value", name, i);
            return -1;
        }
    for (int o = 0; o < nout; o++)
        if (mge_graph_find(g, outnames[o]) >= 0) {
            mge_error_set(err, MGE_ERR_INVALID, "'%s' is already defined", outnames[o]);
            return -1;
        }
    mge_node n;
    memset(&n, 0, sizeof n);
    n.op = op;
    n.nin = nin;
    n.nout = nout;
    n.attrs = calloc(16, sizeof *n.attrs);
    n.in = malloc(sizeof(int) * (size_t)(nin ? nin : 1));
    n.out = malloc(sizeof(int) * (size_t)nout);
    n.name = mge_strdup(name);
    if (!n.attrs || !n.in || !n.out || !n.name) {
        mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto fail;
    }
    memcpy(n.in, in, sizeof(int) * (size_t)nin);
    if (mge_attrs_complete(op, nattr, attrs, n.attrs, &n.nattr, err))
        goto fail;
    mge_tdesc od[4], *pend = NULL;
    if (mge_graph_infer_node(g, &n, od, &pend, err))
        goto fail;
    if (g->nnodes == g->cap_nodes) {
        int cap = g->cap_nodes ? g->cap_nodes * 2 : 64;
        mge_node *nn = realloc(g->nodes, sizeof *nn * (size_t)cap);
        if (!nn) {
            mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
            goto fail;
        }
        g->nodes = nn;
        g->cap_nodes = cap;
    }
    for (int o = 0; o < nout; o++) {
        int v = mge_graph_add_value(g, outnames[o], MGE_VAL_NODE, od[o].dtype, od[o].ndim, od[o].dims, err);
        if (v < 0) {
            free(pend);
            goto fail; /* values added before stay as orphans; only on OOM/bad names */
        }
        g->values[v].producer = g->nnodes;
        g->values[v].out_index = o;
        n.out[o] = v;
    }
    g->nodes[g->nnodes] = n;
    if (mge_graph_probes_commit(g, &g->nodes[g->nnodes], pend)) {
        mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        return -1;
    }
    return g->nnodes++;
fail:
    free(n.attrs);
    free(n.in);
    free(n.out);
    free(n.name);
    return -1;
}

mge_status mge_graph_layer_params(mge_graph *g, const char *node, int op, int x, int nattr, const mge_attr *attrs,
                                  int *params, int *nparams, mge_error *err)
{
    mge_params_fn fn = mge_op_params_fn(op);
    if (!fn)
        return mge_error_set(err, MGE_ERR_INVALID, "%s creates no parameters", mge_op_info(op)->name);
    if (x < 0 || x >= g->nvalues)
        return mge_error_set(err, MGE_ERR_INVALID, "bad input value");
    mge_tdesc xd, xd2;
    mge_param_spec specs[64], specs2[64]; /* lstm and gru: up to 56 */
    int ns = 0, ns2 = 0;
    mge_status s;
    if ((s = mge_graph_probe_desc(g, x, 0, &xd, err)))
        return s;
    if ((s = fn(op, nattr, attrs, &xd, specs, &ns, err))) {
        /* say it at N = 1: a message about a probe size would puzzle */
        if (!mge_graph_friendly_desc(g, x, &xd, NULL))
            fn(op, nattr, attrs, &xd, specs, &ns, err);
        return s;
    }
    /* parameters are fixed: their shapes must not follow a symbol */
    if (!mge_graph_probe_desc(g, x, 1, &xd2, NULL) && !fn(op, nattr, attrs, &xd2, specs2, &ns2, NULL))
        for (int i = 0; i < ns && i < ns2; i++)
            if (specs[i].ndim != specs2[i].ndim ||
                memcmp(specs[i].dims, specs2[i].dims, sizeof(int64_t) * (size_t)specs[i].ndim) != 0)
                return mge_error_set(err, MGE_ERR_SHAPE, "%s.%s: the parameter's shape would depend on a symbolic dim of the input",
                                     node, specs[i].suffix);
    for (int i = 0; i < ns; i++) {
        char nm[512];
        if ((size_t)snprintf(nm, sizeof nm, "%s.%s", node, specs[i].suffix) >= sizeof nm)
            return mge_error_set(err, MGE_ERR_INVALID, "node name too long for its parameter names (%zu bytes)",
                                 strlen(node));
        int v = mge_graph_add_value(g, nm, specs[i].kind, specs[i].dtype, specs[i].ndim, specs[i].dims, err);
        if (v < 0)
            return err ? err->code : MGE_ERR_INVALID;
        if (specs[i].init[0] && !(g->values[v].init = mge_strdup(specs[i].init)))
            return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        params[i] = v;
    }
    *nparams = ns;
    return MGE_OK;
}

mge_status mge_graph_add_output(mge_graph *g, int value, mge_error *err)
{
    if (value < 0 || value >= g->nvalues)
        return mge_error_set(err, MGE_ERR_INVALID, "output refers to no value");
    for (int i = 0; i < g->noutputs; i++)
        if (g->outputs[i] == value)
            return mge_error_set(err, MGE_ERR_INVALID, "'%s' is already an output", g->values[value].name);
    int *no = realloc(g->outputs, sizeof *no * (size_t)(g->noutputs + 1));
    if (!no)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    g->outputs = no;
    g->outputs[g->noutputs++] = value;
    return MGE_OK;
}

mge_status mge_graph_set_meta(mge_graph *g, const char *key, const char *value, mge_error *err)
{
    for (int i = 0; i < g->nmeta; i++)
        if (strcmp(g->meta[i].key, key) == 0) {
            char *v = mge_strdup(value);
            if (!v)
                return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
            free(g->meta[i].value);
            g->meta[i].value = v;
            return MGE_OK;
        }
    mge_meta *nm = realloc(g->meta, sizeof *nm * (size_t)(g->nmeta + 1));
    if (!nm)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    g->meta = nm;
    nm[g->nmeta].key = mge_strdup(key);
    nm[g->nmeta].value = mge_strdup(value);
    if (!nm[g->nmeta].key || !nm[g->nmeta].value) {
        free(nm[g->nmeta].key);
        free(nm[g->nmeta].value);
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    }
    g->nmeta++;
    return MGE_OK;
}

const char *mge_graph_get_meta(const mge_graph *g, const char *key)
{
    for (int i = 0; i < g->nmeta; i++)
        if (strcmp(g->meta[i].key, key) == 0)
            return g->meta[i].value;
    return NULL;
}

/* ---------------------------------------------------------------- attributes */

const mge_attr *mge_node_attr(const mge_node *n, int key)
{
    return mge_attrs_find(n->nattr, n->attrs, key);
}

int64_t mge_node_int(const mge_node *n, int key, int64_t def)
{
    const mge_attr *a = mge_node_attr(n, key);
    return a ? a->i[0] : def;
}

int64_t mge_node_ints(const mge_node *n, int key, int idx, int64_t def)
{
    const mge_attr *a = mge_node_attr(n, key);
    if (!a || a->n < 1)
        return def;
    return idx < a->n ? a->i[idx] : a->i[a->n - 1];
}

double mge_node_float(const mge_node *n, int key, double def)
{
    const mge_attr *a = mge_node_attr(n, key);
    return a ? a->f : def;
}

/* ---------------------------------------------------------------- whole-graph */

mge_status mge_graph_validate(const mge_graph *g, mge_error *err)
{
    for (int v = 0; v < g->nvalues; v++) {
        const mge_value *val = &g->values[v];
        if (val->kind == MGE_VAL_NODE) {
            if (val->producer < 0 || val->producer >= g->nnodes)
                return mge_error_set(err, MGE_ERR_INVALID, "'%s' has no producer", val->name);
            const mge_node *p = &g->nodes[val->producer];
            if (val->out_index < 0 || val->out_index >= p->nout || p->out[val->out_index] != v)
                return mge_error_set(err, MGE_ERR_INVALID, "'%s': producer link broken", val->name);
        }
        if (val->data) {
            const mge_tensor *t = val->data;
            if (t->dtype != val->dtype || t->ndim != val->ndim ||
                memcmp(t->dims, val->dims, sizeof(int64_t) * (size_t)val->ndim) != 0)
                return mge_error_set(err, MGE_ERR_SHAPE, "'%s': data does not match its declared shape", val->name);
        }
    }
    for (int i = 0; i < g->nnodes; i++) {
        const mge_node *n = &g->nodes[i];
        const mge_opinfo *oi = mge_op_info(n->op);
        if (!oi)
            return mge_error_set(err, MGE_ERR_INVALID, "node %d: unknown op", i);
        if (n->nin < oi->min_in || n->nin > oi->max_in || !mge_op_nout_ok(n->op, n->nout))
            return mge_error_set(err, MGE_ERR_INVALID, "%s: wrong number of inputs or outputs for %s", n->name,
                                 oi->name);
        for (int k = 0; k < n->nin; k++) {
            int v = n->in[k];
            if (v < 0 || v >= g->nvalues)
                return mge_error_set(err, MGE_ERR_INVALID, "%s: input out of range", n->name);
            if (g->values[v].kind == MGE_VAL_NODE && g->values[v].producer >= i)
                return mge_error_set(err, MGE_ERR_INVALID, "%s: uses '%s' before it is defined", n->name,
                                     g->values[v].name);
        }
        for (int k = 0; k < n->nout; k++) {
            int v = n->out[k];
            if (v < 0 || v >= g->nvalues || g->values[v].producer != i)
                return mge_error_set(err, MGE_ERR_INVALID, "%s: output link broken", n->name);
        }
    }
    for (int i = 0; i < g->ninputs; i++)
        if (g->inputs[i] < 0 || g->inputs[i] >= g->nvalues || g->values[g->inputs[i]].kind != MGE_VAL_INPUT)
            return mge_error_set(err, MGE_ERR_INVALID, "input list broken");
    for (int i = 0; i < g->noutputs; i++)
        if (g->outputs[i] < 0 || g->outputs[i] >= g->nvalues)
            return mge_error_set(err, MGE_ERR_INVALID, "output list broken");
    if (g->loss >= g->nvalues)
        return mge_error_set(err, MGE_ERR_INVALID, "loss out of range");
    return mge_quant_check(g, NULL, err);
}

void mge_graph_needed(const mge_graph *g, int nout, const int *outs, char *need, char *in_need)
{
    char *live = calloc((size_t)g->nvalues + 1, 1);
    memset(need, 0, (size_t)g->nnodes);
    if (in_need)
        memset(in_need, 0, (size_t)g->ninputs);
    if (!live)
        return;
    for (int i = 0; i < nout; i++)
        if (outs[i] >= 0 && outs[i] < g->nvalues)
            live[outs[i]] = 1;
    for (int i = g->nnodes - 1; i >= 0; i--) {
        const mge_node *n = &g->nodes[i];
        int used = 0;
        for (int o = 0; o < n->nout; o++)
            used |= live[n->out[o]];
        if (!used)
            continue;
        need[i] = 1;
        for (int k = 0; k < n->nin; k++)
            live[n->in[k]] = 1;
    }
    if (in_need)
        for (int i = 0; i < g->ninputs; i++)
            in_need[i] = live[g->inputs[i]];
    free(live);
}

mge_graph *mge_graph_clone(const mge_graph *g, mge_error *err)
{
    mge_graph *c = mge_graph_new();
    if (!c) {
        mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (int v = 0; v < g->nvalues; v++) {
        const mge_value *s = &g->values[v];
        int idx = mge_graph_add_value(c, s->name, s->kind, s->dtype, s->ndim, s->dims, err);
        if (idx < 0)
            goto fail;
        mge_value *d = &c->values[idx];
        d->producer = s->producer;
        d->out_index = s->out_index;
        if (s->init && !(d->init = mge_strdup(s->init)))
            goto oom;
        if (s->data) {
            d->data = calloc(1, sizeof *d->data);
            if (!d->data || mge_tensor_copy(d->data, s->data, err))
                goto fail;
        }
    }
    /* inputs were re-added in value order; restore declaration order */
    if (g->ninputs) /* a graph of consts alone has no inputs array */
        memcpy(c->inputs, g->inputs, sizeof(int) * (size_t)g->ninputs);
    c->nodes = calloc((size_t)(g->nnodes ? g->nnodes : 1), sizeof *c->nodes);
    if (!c->nodes)
        goto oom;
    c->cap_nodes = g->nnodes ? g->nnodes : 1;
    for (int i = 0; i < g->nnodes; i++) {
        const mge_node *s = &g->nodes[i];
        mge_node *d = &c->nodes[i];
        c->nnodes = i + 1;
        d->op = s->op;
        d->nin = s->nin;
        d->nout = s->nout;
        d->nattr = s->nattr;
        d->name = mge_strdup(s->name);
        d->in = malloc(sizeof(int) * (size_t)(s->nin ? s->nin : 1));
        d->out = malloc(sizeof(int) * (size_t)(s->nout ? s->nout : 1));
        d->attrs = calloc(16, sizeof *d->attrs);
        if (!d->name || !d->in || !d->out || !d->attrs)
            goto oom;
        memcpy(d->in, s->in, sizeof(int) * (size_t)s->nin);
        memcpy(d->out, s->out, sizeof(int) * (size_t)s->nout);
        memcpy(d->attrs, s->attrs, sizeof(mge_attr) * (size_t)s->nattr);
    }
    if (g->noutputs) {
        c->outputs = malloc(sizeof(int) * (size_t)g->noutputs);
        if (!c->outputs)
            goto oom;
        memcpy(c->outputs, g->outputs, sizeof(int) * (size_t)g->noutputs);
        c->noutputs = g->noutputs;
    }
    c->loss = g->loss;
    for (int i = 0; i < g->nmeta; i++)
        if (mge_graph_set_meta(c, g->meta[i].key, g->meta[i].value, err))
            goto fail;
    return c;
oom:
    mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
fail:
    mge_graph_free(c);
    return NULL;
}

int mge_value_is_opt_state(const mge_value *v)
{
    return v->kind == MGE_VAL_STATE && v->name &&
           (strncmp(v->name, "__opt.", 6) == 0 || strstr(v->name, ".__opt.") != NULL);
}

void mge_graph_param_stats(const mge_graph *g, int64_t *count, int64_t *bytes)
{
    int64_t c = 0, b = 0;
    for (int v = 0; v < g->nvalues; v++) {
        const mge_value *val = &g->values[v];
        if (val->kind != MGE_VAL_PARAM && val->kind != MGE_VAL_STATE && val->kind != MGE_VAL_CONST)
            continue;
        /* optimizer moments ride along in checkpoints but are not the model */
        if (mge_value_is_opt_state(val))
            continue;
        int64_t n = 1;
        for (int k = 0; k < val->ndim; k++)
            n *= val->dims[k];
        c += n;
        b += n * (int64_t)mge_dtype_size(val->dtype);
    }
    if (count)
        *count = c;
    if (bytes)
        *bytes = b;
}

mge_status mge_graph_reorder_nodes(mge_graph *g, const int *order, mge_error *err)
{
    mge_node *nn = malloc(sizeof *nn * (size_t)(g->nnodes ? g->nnodes : 1));
    char *seen = calloc((size_t)(g->nnodes ? g->nnodes : 1), 1);
    if (!nn || !seen) {
        free(nn);
        free(seen);
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < g->nnodes; i++) {
        if (order[i] < 0 || order[i] >= g->nnodes || seen[order[i]]) {
            free(nn);
            free(seen);
            return mge_error_set(err, MGE_ERR_INVALID, "node order: not a permutation at %d", i);
        }
        seen[order[i]] = 1;
        nn[i] = g->nodes[order[i]];
    }
    memcpy(g->nodes, nn, sizeof *nn * (size_t)g->nnodes);
    free(nn);
    free(seen);
    for (int i = 0; i < g->nnodes; i++)
        for (int k = 0; k < g->nodes[i].nout; k++)
            g->values[g->nodes[i].out[k]].producer = i;
    names *nm = g->names;
    if (nm) {   /* the node index is rebuilt on the next lookup */
        free(nm->nslot);
        nm->nslot = NULL;
        nm->ncap = nm->nindexed = 0;
    }
    return MGE_OK;
}
