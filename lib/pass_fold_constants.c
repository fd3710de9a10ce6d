/* pass_fold_constants.c — constant folding.
 *
 * A node is folded when it is not an MGE_OPF_TRAINING op nor a cast to a
 * wider dtype (f16-weights stores weights narrow on purpose; folding its
 * casts would undo that), its output shapes do not involve the batch N, and
 * every input is a folded value: a const with data, the output of a folded
 * node, or — only in an inference graph (no loss: g->loss < 0) — a param or
 * state value with data. In a graph with a loss the params are trained, so
 * a node over a param is not a constant and stays; turning it into a const
 * would freeze the weights.
 *
 * The folded values that something else still reads (a node that is not
 * folded, a graph output, the loss) are computed once with the executor
 * (cpu backend, eval mode) and become consts with the node output's name;
 * the folded nodes go, and so do the other values they produced and the
 * consts/params/state only folded nodes read (their information lives in
 * the new consts now). Values nothing read before stay: that is dce's job.
 * With nothing to fold, *g is left untouched. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- rebuild helpers */

/* Adds the values with keep[v] to c in the old order; remap[v] gets the new
 * index or -1. Declaration order of inputs is kept. */
static mge_status rb_values(const mge_graph *g, const char *keep, mge_graph *c, int *remap, mge_error *err)
{
    for (int v = 0; v < g->nvalues; v++) {
        remap[v] = -1;
        if (!keep[v])
            continue;
        const mge_value *src = &g->values[v];
        int idx = mge_graph_add_value(c, src->name, src->kind, src->dtype, src->ndim, src->dims, err);
        if (idx < 0)
            return err ? err->code : MGE_ERR_INVALID;
        remap[v] = idx;
        c->values[idx].out_index = src->out_index;
    }
    for (int i = 0; i < g->ninputs; i++)
        c->inputs[i] = remap[g->inputs[i]];
    return MGE_OK;
}

/* Appends a node whose outputs are existing values of c. */
static mge_status rb_node(mge_graph *c, const char *name, int op, int nin, const int *in, int nout, const int *out,
                          int nattr, const mge_attr *attrs, mge_error *err)
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

/* Outputs, loss and metadata, then (nothing can fail after that) tensor
 * data, init specs and the mapping move from g to c, and g is freed. */
static mge_status rb_finish(mge_graph *g, mge_graph *c, const int *remap, mge_error *err)
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
        if ((s = mge_graph_set_meta(c, g->meta[i].key, g->meta[i].value, err)))
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
    c->mapping_size = g->mapping_size;
    g->mapping = NULL;
    g->mapping_size = 0;
    mge_graph_free(g);
    return MGE_OK;
}

/* ---------------------------------------------------------------- the pass */

static int leaf_foldable(const mge_graph *g, const mge_value *v)
{
    if (!v->data)
        return 0;
    if (v->kind == MGE_VAL_CONST)
        return 1;
    return g->loss < 0 && (v->kind == MGE_VAL_PARAM || v->kind == MGE_VAL_STATE);
}

/* A cast to a wider dtype (f16 -> f32: what f16-weights inserts) is storage
 * compression by design; folding it would undo that and grow the model. */
static int widening_cast(const mge_graph *g, const mge_node *n)
{
    if (n->op != MGE_OP_CAST || n->nin != 1 || n->nout != 1)
        return 0;
    return mge_dtype_size(g->values[n->out[0]].dtype) > mge_dtype_size(g->values[n->in[0]].dtype);
}

mge_status mge_pass_fold_constants(mge_graph **gp, int *changed, mge_error *err)
{
    mge_graph *g = *gp;
    *changed = 0;
    if (g->nnodes == 0)
        return MGE_OK;
    size_t nv = (size_t)g->nvalues + 1, nn = (size_t)g->nnodes;
    char *fv = calloc(nv, 1);        /* value is constant */
    char *fold = calloc(nn, 1);      /* node is folded */
    char *used = calloc(nv, 1);      /* read by a node that stays, or an output/the loss */
    char *read = calloc(nv, 1);      /* read by any node */
    char *keep = malloc(nv);
    int *remap = malloc(sizeof(int) * nv);
    int *front = malloc(sizeof(int) * nv);
    mge_tensor **res = calloc(nv, sizeof *res);  /* new data per frontier value */
    int nfront = 0;
    mge_exec *e = NULL;
    mge_graph *c = NULL;
    mge_status s = MGE_OK;
    if (!fv || !fold || !used || !read || !keep || !remap || !front || !res) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int v = 0; v < g->nvalues; v++)
        fv[v] = (char)leaf_foldable(g, &g->values[v]);
    int nfold = 0;
    for (int i = 0; i < g->nnodes; i++) {
        const mge_node *n = &g->nodes[i];
        const mge_opinfo *oi = mge_op_info(n->op);
        int ok = oi && !(oi->flags & MGE_OPF_TRAINING) && !widening_cast(g, n);
        for (int k = 0; ok && k < n->nin; k++)
            ok = fv[n->in[k]];
        for (int k = 0; ok && k < n->nout; k++) {
            const mge_value *o = &g->values[n->out[k]];
            for (int d = 0; ok && d < o->ndim; d++)
                ok = o->dims[d] >= 0;
        }
        if (!ok)
            continue;
        fold[i] = 1;
        nfold++;
        for (int k = 0; k < n->nout; k++)
            fv[n->out[k]] = 1;
    }
    if (!nfold)
        goto done;

    for (int i = 0; i < g->nnodes; i++)
        for (int k = 0; k < g->nodes[i].nin; k++) {
            read[g->nodes[i].in[k]] = 1;
            if (!fold[i])
                used[g->nodes[i].in[k]] = 1;
        }
    for (int i = 0; i < g->noutputs; i++)
        used[g->outputs[i]] = 1;
    if (g->loss >= 0)
        used[g->loss] = 1;
    for (int i = 0; i < g->ninputs; i++)
        used[g->inputs[i]] = 1;
    for (int v = 0; v < g->nvalues; v++) {
        const mge_value *val = &g->values[v];
        int folded_out = val->kind == MGE_VAL_NODE && fold[val->producer];
        if (folded_out && used[v])
            front[nfront++] = v;
        /* goes: a folded node's output nobody else reads, or a leaf only folded nodes read */
        keep[v] = !(folded_out ? !used[v] : (fv[v] && read[v] && !used[v]));
    }

    if (nfront > 0) {
        mge_exec_opts eo = {0};
        eo.noutputs = nfront;
        eo.outputs = front;
        if ((s = mge_exec_create(g, &eo, &e, err)))
            goto fail;
        if (mge_exec_ninputs(e) != 0) {
            s = mge_error_set(err, MGE_ERR_INVALID, "folded values need a graph input");
            goto fail;
        }
        if ((s = mge_exec_run(e, NULL, err)))
            goto fail;
        for (int i = 0; i < nfront; i++) {
            const mge_tensor *t = mge_exec_result(e, i);
            res[front[i]] = calloc(1, sizeof(mge_tensor));
            if (!res[front[i]]) {
                s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
                goto fail;
            }
            if ((s = mge_tensor_copy(res[front[i]], t, err)))
                goto fail;
        }
        mge_exec_free(e);  /* it points into g, which goes below */
        e = NULL;
    }

    c = mge_graph_new();
    if (!c) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((s = rb_values(g, keep, c, remap, err)))
        goto done;
    for (int i = 0; i < g->nnodes; i++) {
        if (fold[i])
            continue;
        const mge_node *n = &g->nodes[i];
        int in[64], out[8];
        if (n->nin > 64 || n->nout > 8) {
            s = mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: too many inputs or outputs", n->name);
            goto done;
        }
        for (int k = 0; k < n->nin; k++)
            in[k] = remap[n->in[k]];
        for (int k = 0; k < n->nout; k++)
            out[k] = remap[n->out[k]];
        if ((s = rb_node(c, n->name, n->op, n->nin, in, n->nout, out, n->nattr, n->attrs, err)))
            goto done;
    }
    for (int i = 0; i < nfront; i++) {
        mge_value *d = &c->values[remap[front[i]]];
        d->kind = MGE_VAL_CONST;
        d->producer = -1;
        d->out_index = 0;
    }
    if ((s = rb_finish(g, c, remap, err)))
        goto done;
    /* after rb_finish (which moves data only to values that had some) */
    for (int i = 0; i < nfront; i++) {
        c->values[remap[front[i]]].data = res[front[i]];
        res[front[i]] = NULL;
    }
    *gp = c;
    c = NULL;
    *changed = 1;
    goto done;
fail:
    mge_error_prefix(err, "fold-constants");
done:
    mge_exec_free(e);
    mge_graph_free(c);
    if (res)
        for (size_t v = 0; v < nv; v++)
            if (res[v]) {
                mge_tensor_free(res[v]);
                free(res[v]);
            }
    free(res);
    free(fv);
    free(fold);
    free(used);
    free(read);
    free(keep);
    free(remap);
    free(front);
    return s;
}
