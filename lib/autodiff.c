/* autodiff.c — reverse-mode differentiation as a graph transformation.
 *
 * mge_grad_build walks the nodes between the wanted values and the loss
 * backwards and asks each op family's rule (lib/grad_<family>.c) for the
 * nodes that compute its input gradients. The result is more graph: the
 * planner, executor, passes and profiler treat the backward pass like any
 * other nodes, so its memory is planned and its time is profiled. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int mge_grad_emit(mge_graph *g, const char *base, int op, int nin, const int *in, int nattr, const mge_attr *attrs,
                  int nout, int *outs, mge_error *err)
{
    char name[256], onames[4][272];
    const char *on[4];
    if (nout < 1 || nout > 4)
        return mge_error_set(err, MGE_ERR_INVALID, "grad: %d outputs", nout), -1;
    /* g->nnodes makes the name unique unless the user's graph already has
     * one like it; then try a few more. */
    for (int attempt = 0; attempt < 100; attempt++) {
        if (attempt == 0)
            snprintf(name, sizeof name, "%s.d%d", base, g->nnodes);
        else
            snprintf(name, sizeof name, "%s.d%d_%d", base, g->nnodes, attempt);
        int clash = mge_graph_find(g, name) >= 0;
        for (int k = 0; k < nout; k++) {
            if (nout == 1)
                snprintf(onames[k], sizeof onames[k], "%s", name);
            else
                snprintf(onames[k], sizeof onames[k], "%s_%d", name, k);
            on[k] = onames[k];
            clash |= mge_graph_find(g, onames[k]) >= 0;
        }
        clash |= mge_graph_find_node(g, name) >= 0;
        if (clash)
            continue;
        int ni = mge_graph_add_node(g, name, op, nin, in, nattr, attrs, nout, on, err);
        if (ni < 0)
            return -1;
        if (outs)
            for (int k = 0; k < nout; k++)
                outs[k] = g->nodes[ni].out[k];
        return g->nodes[ni].out[0];
    }
    mge_error_set(err, MGE_ERR_INVALID, "grad: no free name for a gradient of '%s'", base);
    return -1;
}

int mge_grad_const(mge_graph *g, float v, mge_error *err)
{
    char name[64];
    for (int k = 0;; k++) {
        snprintf(name, sizeof name, "grad.const%d_%d", g->nvalues, k);
        if (mge_graph_find(g, name) < 0)
            break;
    }
    mge_tensor *t = calloc(1, sizeof *t);
    if (!t)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory"), -1;
    if (mge_tensor_alloc(t, MGE_F32, 0, NULL, err)) {
        free(t);
        return -1;
    }
    *(float *)t->data = v;
    int idx = mge_graph_add_value(g, name, MGE_VAL_CONST, MGE_F32, 0, NULL, err);
    if (idx < 0) {
        mge_tensor_free(t);
        free(t);
        return -1;
    }
    g->values[idx].data = t;
    return idx;
}

int mge_grad_attrs(const mge_node *n, int target_op, mge_attr *out)
{
    const mge_opinfo *oi = mge_op_info(target_op);
    int k = 0;
    for (int i = 0; oi && i < n->nattr; i++)
        for (int s = 0; s < oi->nschema; s++)
            if (oi->sch[s].key == n->attrs[i].key) {
                out[k++] = n->attrs[i];
                break;
            }
    return k;
}

/* ---------------------------------------------------------------- the walk */

static int is_float_value(const mge_value *v)
{
    return mge_dtype_is_float(v->dtype);
}

/* Adds the contribution d to the gradient accumulated for value v. */
static mge_status accumulate(mge_graph *g, int *grad, int v, int d, mge_error *err)
{
    if (grad[v] < 0) {
        grad[v] = d;
        return MGE_OK;
    }
    char base[200];
    snprintf(base, sizeof base, "%s.acc", g->values[v].name);
    int in[2] = {grad[v], d};
    int s = mge_grad_emit(g, base, MGE_OP_ADD, 2, in, 0, NULL, 1, NULL, err);
    if (s < 0)
        return err ? err->code : MGE_ERR_INVALID;
    grad[v] = s;
    return MGE_OK;
}

mge_status mge_grad_build(mge_graph *g, int loss, int nwrt, const int *wrt, int *grads, mge_error *err)
{
    if (!g || loss < 0 || loss >= g->nvalues)
        return mge_error_set(err, MGE_ERR_INVALID, "grad: no loss value");
    const mge_value *lv = &g->values[loss];
    if (lv->dtype != MGE_F32 || lv->ndim != 0)
        return mge_error_set(err, MGE_ERR_SHAPE, "grad: the loss '%s' must be a scalar f32, not %s", lv->name,
                             mge_shape_str(lv->dtype, lv->ndim, lv->dims, (char[96]){0}, 96));
    return mge_grad_build_from(g, loss, -1, nwrt, wrt, grads, err);
}

mge_status mge_grad_build_from(mge_graph *g, int loss, int dloss, int nwrt, const int *wrt, int *grads,
                               mge_error *err)
{
    if (!g || loss < 0 || loss >= g->nvalues)
        return mge_error_set(err, MGE_ERR_INVALID, "grad: no output value");
    for (int i = 0; i < nwrt; i++) {
        if (wrt[i] < 0 || wrt[i] >= g->nvalues)
            return mge_error_set(err, MGE_ERR_INVALID, "grad: wrt[%d] refers to no value", i);
        if (!is_float_value(&g->values[wrt[i]]))
            return mge_error_set(err, MGE_ERR_INVALID, "grad: '%s' is %s: only float values have gradients",
                                 g->values[wrt[i]].name, mge_dtype_name(g->values[wrt[i]].dtype));
    }
    int nn = g->nnodes;
    /* The sets below only cover the graph as it was: emitted nodes are appended. */
    size_t nv0 = (size_t)g->nvalues;
    char *dep = calloc(nv0 ? nv0 : 1, 1);   /* depends on some wrt */
    char *inf = calloc(nv0 ? nv0 : 1, 1);   /* influences the loss */
    int *grad = NULL;
    mge_status s = MGE_OK;
    if (!dep || !inf) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < nwrt; i++)
        dep[wrt[i]] = 1;
    for (int i = 0; i < nn; i++) {
        const mge_node *n = &g->nodes[i];
        int d = 0;
        for (int k = 0; k < n->nin; k++)
            d |= dep[n->in[k]];
        for (int k = 0; k < n->nout && d; k++)
            dep[n->out[k]] = 1;
    }
    inf[loss] = 1;
    for (int i = nn - 1; i >= 0; i--) {
        const mge_node *n = &g->nodes[i];
        int f = 0;
        for (int k = 0; k < n->nout; k++)
            f |= inf[n->out[k]];
        for (int k = 0; k < n->nin && f; k++)
            inf[n->in[k]] = 1;
    }

    /* grad[] grows with the graph: every emitted value may be looked up */
    size_t gcap = nv0 + 1;
    grad = malloc(sizeof(int) * gcap);
    if (!grad) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t v = 0; v < gcap; v++)
        grad[v] = -1;
    if (dep[loss] && dloss >= 0) {
        grad[loss] = dloss;
    } else if (dep[loss]) {
        int one = mge_grad_const(g, 1.0f, err);
        if (one < 0) {
            s = err ? err->code : MGE_ERR_INVALID;
            goto done;
        }
        grad[loss] = one;
    }
    for (int i = nn - 1; i >= 0 && dep[loss]; i--) {
        const mge_node *n = &g->nodes[i];
        int active = 0;
        for (int k = 0; k < n->nout; k++)
            active |= inf[n->out[k]] && dep[n->out[k]];
        if (!active)
            continue;
        int dy[4] = {-1, -1, -1, -1}, dx[64];
        char want[64];
        int any = 0, nin = n->nin, op = n->op;
        if (nin > 64 || n->nout > 4) {
            s = mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: too many inputs or outputs to differentiate", n->name);
            goto done;
        }
        int in[64];
        for (int k = 0; k < n->nout; k++)
            any |= (dy[k] = grad[n->out[k]]) >= 0;
        if (!any)
            continue;
        for (int k = 0; k < nin; k++) {
            in[k] = n->in[k];
            want[k] = dep[in[k]] && is_float_value(&g->values[in[k]]);
            dx[k] = -1;
        }
        mge_grad_fn fn = mge_op_grad_fn(op);
        if (!fn) {
            s = mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: op %d has no gradient rule", n->name, op);
            goto done;
        }
        if ((s = fn(g, i, dy, want, dx, err))) {
            goto done;
        }
        /* emitted nodes may have moved g->nodes: n is stale from here */
        if ((size_t)g->nvalues > gcap) {
            size_t ncap = (size_t)g->nvalues * 2;
            int *ng = realloc(grad, sizeof(int) * ncap);
            if (!ng) {
                s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
                goto done;
            }
            for (size_t v = gcap; v < ncap; v++)
                ng[v] = -1;
            grad = ng;
            gcap = ncap;
        }
        for (int k = 0; k < nin; k++) {
            if (dx[k] < 0 || !want[k])
                continue;
            const mge_value *a = &g->values[in[k]], *b = &g->values[dx[k]];
            int same = a->dtype == b->dtype && a->ndim == b->ndim;
            for (int d = 0; same && d < a->ndim; d++)
                same = a->dims[d] == b->dims[d];
            if (!same && a->dtype == b->dtype && a->ndim == b->ndim && mge_graph_probes_agree(g, in[k], dx[k])) {
                /* equal wherever the graph is valid: keep the input's spelling */
                memcpy(g->values[dx[k]].dims, a->dims, sizeof(int64_t) * (size_t)a->ndim);
                same = 1;
            }
            if (!same) {
                char ba[96], bb[96];
                s = mge_error_set(err, MGE_ERR_SHAPE,
                                  "%s: gradient rule of %s gave %s for input '%s' of %s (a bug in the rule)",
                                  g->nodes[i].name, mge_op_info(op)->name,
                                  mge_shape_str(b->dtype, b->ndim, b->dims, bb, sizeof bb), a->name,
                                  mge_shape_str(a->dtype, a->ndim, a->dims, ba, sizeof ba));
                goto done;
            }
            if ((s = accumulate(g, grad, in[k], dx[k], err)))
                goto done;
        }
    }
    for (int i = 0; i < nwrt; i++)
        grads[i] = dep[loss] ? grad[wrt[i]] : -1;
done:
    free(dep);
    free(inf);
    free(grad);
    return s;
}
