/* pass_fold_constants.c — constant folding.
 *
 * A node is folded when it is not an MGE_OPF_TRAINING op nor a cast to a
 * wider dtype (f16-weights stores weights narrow on purpose; folding its
 * casts would undo that) nor a winograd_weight (likewise, see
 * load_time_transform), its output shapes do not involve the batch N, and
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

/* winograd_weight (and layout's winograd_weight_nchwc) is left for load
 * time on purpose (the winograd pass): its result is 1.78-4x the 3x3
 * weight it reads, and the executor's preprocessing computes it once
 * anyway; folding would store it again. */
static int load_time_transform(const mge_node *n)
{
    return n->op == MGE_OP_WINOGRAD_WEIGHT || n->op == MGE_OP_WINOGRAD_WEIGHT_NCHWC;
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
    char *keep = NULL;
    int *remap = NULL;
    int *front = malloc(sizeof(int) * nv);
    mge_tensor **res = calloc(nv, sizeof *res);  /* new data per frontier value */
    int nfront = 0;
    mge_exec *e = NULL;
    mge_graph *c = NULL;
    mge_status s = MGE_OK;
    if (!fv || !fold || !used || !read || !front || !res) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int v = 0; v < g->nvalues; v++)
        fv[v] = (char)leaf_foldable(g, &g->values[v]);
    int nfold = 0;
    for (int i = 0; i < g->nnodes; i++) {
        const mge_node *n = &g->nodes[i];
        const mge_opinfo *oi = mge_op_info(n->op);
        int ok = oi && !(oi->flags & MGE_OPF_TRAINING) && !widening_cast(g, n) && !load_time_transform(n);
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
    if ((s = mge_pass_rb_alloc(g, &keep, &remap, &c, err)))
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

    if ((s = mge_pass_rb_values(g, keep, NULL, c, remap, err)))
        goto done;
    for (int i = 0; i < g->nnodes; i++)
        if (!fold[i] && (s = mge_pass_rb_copy(c, &g->nodes[i], remap, err)))
            goto done;
    for (int i = 0; i < nfront; i++) {
        mge_value *d = &c->values[remap[front[i]]];
        d->kind = MGE_VAL_CONST;
        d->producer = -1;
        d->out_index = 0;
    }
    if ((s = mge_pass_rb_end(gp, &c, remap, NULL, changed, err)))
        goto done;
    /* after rb_finish (which moves data only to values that had some) */
    for (int i = 0; i < nfront; i++) {
        (*gp)->values[remap[front[i]]].data = res[front[i]];
        res[front[i]] = NULL;
    }
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
