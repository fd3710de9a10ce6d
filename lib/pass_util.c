/* pass_util.c — graph rewriting shared by the passes: use counts, rewiring,
 * new tensors for folded weights, and a dce-like rebuild that can also drop
 * inputs, rename values and filter metadata. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void mge_pass_count_uses(const mge_graph *g, int *uses)
{
    memset(uses, 0, sizeof(int) * (size_t)g->nvalues);
    for (int i = 0; i < g->nnodes; i++)
        for (int k = 0; k < g->nodes[i].nin; k++)
            uses[g->nodes[i].in[k]]++;
    for (int i = 0; i < g->noutputs; i++)
        uses[g->outputs[i]]++;
    if (g->loss >= 0)
        uses[g->loss]++;
}

void mge_pass_redirect(mge_graph *g, int *to, int from, int target)
{
    to[from] = target;
    for (int i = 0; i < g->noutputs; i++)
        if (g->outputs[i] == from)
            g->outputs[i] = target;
    if (g->loss == from)
        g->loss = target;
}

void mge_pass_rewire(mge_graph *g, const int *to)
{
    for (int i = 0; i < g->nnodes; i++)
        for (int k = 0; k < g->nodes[i].nin; k++)
            if (to[g->nodes[i].in[k]] >= 0)
                g->nodes[i].in[k] = to[g->nodes[i].in[k]];
}

int mge_pass_is_root(const mge_graph *g, int v)
{
    for (int i = 0; i < g->noutputs; i++)
        if (g->outputs[i] == v)
            return 1;
    return g->loss == v;
}

mge_status mge_pass_new_f32(const mge_value *v, mge_tensor **out, mge_error *err)
{
    mge_tensor *t = calloc(1, sizeof *t);
    if (!t)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    mge_status s = mge_tensor_alloc(t, MGE_F32, v->ndim, v->dims, err);
    if (s) {
        free(t);
        return s;
    }
    *out = t;
    return MGE_OK;
}

void mge_pass_set_data(mge_graph *g, int v, mge_tensor *t)
{
    mge_value *val = &g->values[v];
    if (val->data) {
        mge_tensor_free(val->data); /* frees owned bytes only: borrowed ones stay untouched */
        free(val->data);
    }
    val->data = t;
}

mge_status mge_pass_prune(mge_graph **gp, const mge_prune_opts *o, int *changed, mge_error *err)
{
    mge_graph *g = *gp;
    *changed = 0;
    int nroots = g->noutputs + (g->loss >= 0);
    int *roots = malloc(sizeof(int) * ((size_t)nroots + 1));
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
    if (nroots)
        mge_graph_needed(g, nroots, roots, need, NULL);
    else
        memset(need, 1, (size_t)g->nnodes); /* nothing marks anything live: keep every node */

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
        if (!o || !o->drop_input || !o->drop_input[i])
            keep[g->inputs[i]] = 1;
    for (int i = 0; i < nroots; i++)
        keep[roots[i]] = 1;
    int edits = dead_nodes;
    for (int v = 0; v < g->nvalues; v++) {
        edits += !keep[v];
        edits += keep[v] && o && o->rename && o->rename[v] && strcmp(o->rename[v], g->values[v].name) != 0;
    }
    for (int i = 0; i < g->nmeta; i++)
        edits += o && o->keep_meta && !o->keep_meta(g->meta[i].key);
    if (edits == 0)
        goto done;

    c = mge_graph_new();
    if (!c) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto done;
    }
    /* Renamed values take names of values that are dropped; the kept ones
     * go in the old order so that the file keeps its layout. */
    if ((s = mge_pass_rb_values(g, keep, o ? o->rename : NULL, c, remap, err)))
        goto done;
    for (int i = 0; i < g->nnodes; i++) {
        if (!need[i])
            continue;
        const mge_node *src = &g->nodes[i];
        int in[64], out[4];
        if (src->nin > 64 || src->nout > 4) {
            s = mge_error_set(err, MGE_ERR_INVALID, "%s: too many inputs or outputs", src->name);
            goto done;
        }
        for (int k = 0; k < src->nin; k++)
            in[k] = remap[src->in[k]];
        for (int k = 0; k < src->nout; k++)
            out[k] = remap[src->out[k]];
        if ((s = mge_pass_rb_node(c, src->name, src->op, src->nin, in, src->nout, out, src->nattr, src->attrs, err)))
            goto done;
    }
    s = mge_pass_rb_end(gp, &c, remap, o ? o->keep_meta : NULL, changed, err);
done:
    mge_graph_free(c);
    free(roots);
    free(need);
    free(keep);
    free(remap);
    return s;
}

static int f32_data(const mge_value *v)
{
    return v->data && v->data->data && v->dtype == MGE_F32 && v->data->dtype == MGE_F32;
}

int mge_pass_layer_channels(const mge_graph *g, int node, const int *uses)
{
    const mge_node *n = &g->nodes[node];
    if ((n->op != MGE_OP_CONV2D && n->op != MGE_OP_LINEAR) || n->nin < 2 || n->nin > 3 || n->nout != 1)
        return 0;
    const mge_value *y = &g->values[n->out[0]], *w = &g->values[n->in[1]];
    if (y->dtype != MGE_F32 || !f32_data(w) || w->ndim < 2 || w->dims[0] <= 0 || uses[n->in[1]] != 1)
        return 0;
    int64_t c = w->dims[0];
    int ch = n->op == MGE_OP_CONV2D ? 1 : y->ndim - 1;
    if (ch < 0 || ch >= y->ndim || y->dims[ch] != c)
        return 0;
    if (n->nin == 3) {
        const mge_value *b = &g->values[n->in[2]];
        if (!f32_data(b) || b->ndim != 1 || b->dims[0] != c || uses[n->in[2]] != 1)
            return 0;
    } else if (!mge_node_attr(n, MGE_KEY_bias)) {
        return 0; /* no attribute to switch the new bias on with */
    }
    return c > INT32_MAX ? 0 : (int)c;
}

/* A name not in g: base, else base.1, base.2, ... */
static char *free_name(const mge_graph *g, const char *base)
{
    size_t n = strlen(base) + 24;
    char *s = malloc(n);
    if (!s)
        return NULL;
    snprintf(s, n, "%s", base);
    for (int i = 1; mge_graph_find(g, s) >= 0; i++)
        snprintf(s, n, "%s.%d", base, i);
    return s;
}

mge_status mge_pass_fold_affine(mge_graph *g, int node, const double *scale, const double *shift, mge_error *err)
{
    mge_node *n = &g->nodes[node];
    int wv = n->in[1], bv = n->nin == 3 ? n->in[2] : -1;
    const mge_value *w = &g->values[wv];
    int64_t c = w->dims[0], inner = mge_tensor_numel(w->data) / c;
    int need_bias = 0;
    if (bv < 0 && shift)
        for (int64_t o = 0; o < c; o++)
            need_bias |= shift[o] != 0.0;
    mge_tensor *nw = NULL, *nb = NULL;
    char *bname = NULL;
    mge_status s = MGE_OK;
    if (scale) {
        if ((s = mge_pass_new_f32(w, &nw, err)))
            goto fail;
        const float *src = w->data->data;
        float *dst = nw->data;
        for (int64_t o = 0; o < c; o++)
            for (int64_t k = 0; k < inner; k++)
                dst[o * inner + k] = (float)((double)src[o * inner + k] * scale[o]);
    }
    if (bv >= 0 || need_bias) {
        mge_value tmpl = {0};
        tmpl.ndim = 1;
        tmpl.dims[0] = c;
        if ((s = mge_pass_new_f32(&tmpl, &nb, err)))
            goto fail;
        const float *src = bv >= 0 ? g->values[bv].data->data : NULL;
        float *dst = nb->data;
        for (int64_t o = 0; o < c; o++) {
            double b = src ? src[o] : 0.0;
            dst[o] = (float)(b * (scale ? scale[o] : 1.0) + (shift ? shift[o] : 0.0));
        }
    }
    if (need_bias) {
        int *in = realloc(n->in, sizeof(int) * 3);
        if (!in) {
            s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
            goto fail;
        }
        n->in = in;
        char base[512];
        snprintf(base, sizeof base, "%s.bias", n->name ? n->name : g->values[n->out[0]].name);
        if (!(bname = free_name(g, base))) {
            s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
            goto fail;
        }
        bv = mge_graph_add_value(g, bname, MGE_VAL_PARAM, MGE_F32, 1, &c, err);
        if (bv < 0) {
            s = err ? err->code : MGE_ERR_INVALID;
            goto fail;
        }
        n = &g->nodes[node];
        n->in[2] = bv;
        n->nin = 3;
        for (int i = 0; i < n->nattr; i++)
            if (n->attrs[i].key == MGE_KEY_bias)
                n->attrs[i].i[0] = 1;
    }
    /* Commit: nothing fails from here on. */
    if (nw)
        mge_pass_set_data(g, wv, nw);
    if (nb)
        mge_pass_set_data(g, bv, nb);
    free(bname);
    return MGE_OK;
fail:
    if (nw) {
        mge_tensor_free(nw);
        free(nw);
    }
    if (nb) {
        mge_tensor_free(nb);
        free(nb);
    }
    free(bname);
    return s;
}

/* ---------------------------------------------------------------- rebuilding a graph
 * (cse, fold-constants, f16-weights: values first, then nodes, then finish) */

/* Adds the values with keep[v] to c in the old order; remap[v] gets the new
 * index or -1. Declaration order of inputs is kept. */
mge_status mge_pass_rb_values(const mge_graph *g, const char *keep, char *const *rename, mge_graph *c, int *remap,
                              mge_error *err)
{
    for (int v = 0; v < g->nvalues; v++) {
        remap[v] = -1;
        if (!keep[v])
            continue;
        const mge_value *src = &g->values[v];
        const char *name = rename && rename[v] ? rename[v] : src->name;
        int idx = mge_graph_add_value(c, name, src->kind, src->dtype, src->ndim, src->dims, err);
        if (idx < 0)
            return err ? err->code : MGE_ERR_INVALID;
        remap[v] = idx;
        c->values[idx].out_index = src->out_index;
    }
    /* add_value appended inputs in value order; keep declaration order */
    c->ninputs = 0;
    for (int i = 0; i < g->ninputs; i++)
        if (remap[g->inputs[i]] >= 0)
            c->inputs[c->ninputs++] = remap[g->inputs[i]];
    return MGE_OK;
}

/* Appends a node whose outputs are existing values of c. */
mge_status mge_pass_rb_node(mge_graph *c, const char *name, int op, int nin, const int *in, int nout,
                            const int *out, int nattr, const mge_attr *attrs, mge_error *err)
{
    if (c->nnodes == c->cap_nodes) {
        int cap = c->cap_nodes ? c->cap_nodes * 2 : 16;
        mge_node *nn = realloc(c->nodes, sizeof *nn * (size_t)cap);
        if (!nn)
            return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        c->nodes = nn;
        c->cap_nodes = cap;
    }
    int ni = c->nnodes;
    mge_node *d = &c->nodes[ni];
    memset(d, 0, sizeof *d);
    d->name = mge_strdup(name);
    d->in = malloc(sizeof(int) * (size_t)(nin + 1));
    d->out = malloc(sizeof(int) * (size_t)(nout + 1));
    d->attrs = calloc((size_t)nattr + 16, sizeof *d->attrs);
    if (!d->name || !d->in || !d->out || !d->attrs) {
        free(d->name);
        free(d->in);
        free(d->out);
        free(d->attrs);
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    }
    c->nnodes++;
    d->op = op;
    d->nin = nin;
    d->nout = nout;
    d->nattr = nattr;
    memcpy(d->in, in, sizeof(int) * (size_t)nin);
    memcpy(d->out, out, sizeof(int) * (size_t)nout);
    if (nattr)
        memcpy(d->attrs, attrs, sizeof(mge_attr) * (size_t)nattr);
    for (int k = 0; k < nout; k++) {
        c->values[out[k]].producer = ni;
        c->values[out[k]].out_index = k;
    }
    return MGE_OK;
}

/* What a rebuild starts from: keep (all 1) and remap for g's values plus
 * one, and the empty graph c; on failure nothing is left allocated. */
mge_status mge_pass_rb_alloc(const mge_graph *g, char **keep, int **remap, mge_graph **c, mge_error *err)
{
    size_t nv = (size_t)g->nvalues + 1;
    *keep = malloc(nv);
    *remap = malloc(sizeof(int) * nv);
    *c = mge_graph_new();
    if (!*keep || !*remap || !*c) {
        free(*keep);
        free(*remap);
        mge_graph_free(*c);
        *keep = NULL;
        *remap = NULL;
        *c = NULL;
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    }
    memset(*keep, 1, nv);
    return MGE_OK;
}

/* The last step of a rebuild: mge_pass_rb_finish, then c replaces *gp
 * (*c becomes NULL, so the caller's cleanup frees nothing of it). */
mge_status mge_pass_rb_end(mge_graph **gp, mge_graph **c, const int *remap, int (*keep_meta)(const char *key),
                           int *changed, mge_error *err)
{
    mge_status s = mge_pass_rb_finish(*gp, *c, remap, keep_meta, err);
    if (s)
        return s;
    *gp = *c;
    *c = NULL;
    *changed = 1;
    return MGE_OK;
}

/* A new value of c named <base><suffix>, or <base><suffix>.<k> (k = 1, 2,
 * ...) where g or c has that name already; its index in *idx. */
mge_status mge_pass_rb_new_value(const mge_graph *g, mge_graph *c, const char *base, const char *suffix,
                                 mge_valkind kind, mge_dtype dt, int ndim, const int64_t *dims, int *idx,
                                 mge_error *err)
{
    size_t len = strlen(base) + strlen(suffix) + 24;
    char *name = malloc(len);
    if (!name)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    snprintf(name, len, "%s%s", base, suffix);
    for (int k = 1; mge_graph_find(g, name) >= 0 || mge_graph_find(c, name) >= 0; k++)
        snprintf(name, len, "%s%s.%d", base, suffix, k);
    *idx = mge_graph_add_value(c, name, kind, dt, ndim, dims, err);
    free(name);
    return *idx < 0 ? (err ? err->code : MGE_ERR_INVALID) : MGE_OK;
}

/* Appends g's node n unchanged, its values mapped through remap. */
mge_status mge_pass_rb_copy(mge_graph *c, const mge_node *n, const int *remap, mge_error *err)
{
    int in[64], out[8];
    if (n->nin > 64 || n->nout > 8)
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: too many inputs or outputs", n->name);
    for (int k = 0; k < n->nin; k++)
        in[k] = remap[n->in[k]];
    for (int k = 0; k < n->nout; k++)
        out[k] = remap[n->out[k]];
    return mge_pass_rb_node(c, n->name, n->op, n->nin, in, n->nout, out, n->nattr, n->attrs, err);
}

/* Outputs, loss and metadata, then (nothing can fail after that) tensor
 * data, init specs and the mapping move from g to c, and g is freed. */
mge_status mge_pass_rb_finish(mge_graph *g, mge_graph *c, const int *remap, int (*keep_meta)(const char *key),
                              mge_error *err)
{
    mge_status s;
    if (g->noutputs) {
        c->outputs = malloc(sizeof(int) * (size_t)g->noutputs);
        if (!c->outputs)
            return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        for (int i = 0; i < g->noutputs; i++)
            c->outputs[i] = remap[g->outputs[i]];
        c->noutputs = g->noutputs;
    }
    c->loss = g->loss >= 0 ? remap[g->loss] : -1;
    for (int i = 0; i < g->nmeta; i++)
        if ((!keep_meta || keep_meta(g->meta[i].key)) &&
            (s = mge_graph_set_meta(c, g->meta[i].key, g->meta[i].value, err)))
            return s;
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
    g->mapping = NULL;
    mge_graph_free(g);
    return MGE_OK;
}

/* Extends the per-value maps to n values: new ones are read once, not renamed, not redirected. */
static mge_status grow_maps(int **uses, char ***rename, int **to, int old, int n, mge_error *err)
{
    int *nu = realloc(*uses, sizeof(int) * ((size_t)n + 1));
    if (nu)
        *uses = nu;
    char **nr = nu ? realloc(*rename, sizeof(char *) * ((size_t)n + 1)) : NULL;
    if (nr)
        *rename = nr;
    int *nt = nr ? realloc(*to, sizeof(int) * ((size_t)n + 1)) : NULL;
    if (nt)
        *to = nt;
    if (!nu || !nr || !nt)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    for (int v = old; v < n; v++) {
        nu[v] = 1;
        nr[v] = NULL;
        nt[v] = -1;
    }
    return MGE_OK;
}

mge_status mge_pass_fold_into(mge_graph *g, int layer, const double *scale, const double *shift, int out, int y,
                              int **uses, char ***rename, int **to, mge_error *err)
{
    int nv = g->nvalues;
    mge_status s = mge_pass_fold_affine(g, layer, scale, shift, err);
    if (s)
        return s;
    if (g->nvalues > nv && (s = grow_maps(uses, rename, to, nv, g->nvalues, err)))
        return s; /* the layer gained a bias value */
    if (mge_pass_is_root(g, out))
        (*rename)[y] = g->values[out].name; /* out is dropped by the prune, so its name is free */
    mge_pass_redirect(g, *to, out, y);
    (*uses)[y] += (*uses)[out] - 1; /* the folded node is dead: its read goes */
    (*uses)[out] = 0;
    return MGE_OK;
}
