/* pass_f16_weights.c — store conv2d/linear weights as f16 (f16-weights) or
 * bf16 (bf16-weights, wider range, fewer mantissa bits), compute in f32.
 *
 * Every f32 param with data that a conv2d or linear node (or a fused,
 * winograd or blocked form of one) reads as its weight (input 1) or bias
 * (input 2) is converted to f16 or bf16 (round to nearest
 * even) under its own name, so mge-dump --params lists it, and one cast
 * node (dtype=f32) named "<param>.f32" is inserted before the first node
 * that reads it; every reader then takes the cast's output. The model file
 * shrinks by about half of those weights' bytes. The casts depend on
 * params alone, so mge-run, mge-bench and mge-prof run them once, when the
 * model is first run (mge_exec_opts.preprocess), not per inference. Params that are graph outputs or
 * the loss, have no data, or are not f32 are left alone, so a second run
 * changes nothing. The result is for inference: the optimizer trains f32
 * params only. With nothing to convert, *g is left untouched.
 *
 * Weights already stored in the other half type (an -O3 model, whose
 * weights are f16, given to bf16-weights) are converted to this one in
 * place, through f32: read only by such casts, their readers do not change.
 * bf16 to f16 fails on a value beyond f16's range (65504) rather than store
 * an infinity. */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* ---------------------------------------------------------------- the pass */

/* Ops whose input 1 is a weight and input 2 (if any) a bias or residual:
 * the layers and what the fuse, winograd and layout passes make of them;
 * and winograd_weight[_nchwc], whose input 0 is the 3x3 weight it transforms. */
static int weighted(int op)
{
    switch (op) {
    case MGE_OP_CONV2D:
    case MGE_OP_LINEAR:
    case MGE_OP_FUSED_CONV2D:
    case MGE_OP_FUSED_LINEAR:
    case MGE_OP_CONV2D_WINOGRAD:
    case MGE_OP_CONV2D_NCHWC:
    case MGE_OP_CONV2D_WINOGRAD_NCHWC:
    case MGE_OP_WINOGRAD_WEIGHT:
    case MGE_OP_WINOGRAD_WEIGHT_NCHWC: return 1;
    }
    return 0;
}

/* A fresh f16/bf16 copy of the f32 tensor t (never written in place: t may
 * point into a read-only mapping). */
static mge_status to_half(const mge_tensor *t, mge_dtype dt, mge_tensor **out, mge_error *err)
{
    mge_tensor *h = calloc(1, sizeof *h);
    if (!h)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    mge_status s = mge_tensor_alloc(h, dt, t->ndim, t->dims, err);
    if (s) {
        free(h);
        return s;
    }
    int64_t n = mge_tensor_numel(t);
    const float *src = t->data;
    uint16_t *dst = h->data;
    for (int64_t i = 0; i < n; i++)
        dst[i] = dt == MGE_F16 ? mge_f32_to_f16(src[i]) : mge_f32_to_bf16(src[i]);
    *out = h;
    return MGE_OK;
}

/* Params in the other half type that only casts to f32 read: re-stored as dt.
 * All are converted before any is replaced, so a failure changes nothing. */
static mge_status rehalf(mge_graph *g, mge_dtype dt, const char *pinned, int *changed, mge_error *err)
{
    mge_dtype from = dt == MGE_F16 ? MGE_BF16 : MGE_F16;
    size_t nv = (size_t)g->nvalues + 1;
    char *ok = calloc(nv, 1);   /* 1: read, and only by casts to f32 */
    mge_tensor **nt = calloc(nv, sizeof *nt);
    mge_status s = MGE_OK;
    if (!ok || !nt) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < g->nnodes; i++)
        for (int k = 0; k < g->nodes[i].nin; k++) {
            int v = g->nodes[i].in[k];
            int cast32 = g->nodes[i].op == MGE_OP_CAST && mge_node_int(&g->nodes[i], MGE_KEY_dtype, -1) == MGE_F32;
            ok[v] = cast32 && ok[v] != 2 ? 1 : 2;
        }
    for (int v = 0; v < g->nvalues && !s; v++) {
        const mge_value *val = &g->values[v];
        if (ok[v] != 1 || pinned[v] || val->kind != MGE_VAL_PARAM || val->dtype != from || !val->data ||
            val->data->dtype != from)
            continue;
        if (!(nt[v] = calloc(1, sizeof *nt[v]))) {
            s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
            break;
        }
        if ((s = mge_tensor_alloc(nt[v], dt, val->ndim, val->dims, err)))
            break;
        int64_t n = mge_tensor_numel(nt[v]);
        const uint16_t *src = val->data->data;
        uint16_t *dst = nt[v]->data;
        for (int64_t i = 0; i < n && !s; i++) {
            float f = from == MGE_F16 ? mge_f16_to_f32(src[i]) : mge_bf16_to_f32(src[i]);
            dst[i] = dt == MGE_F16 ? mge_f32_to_f16(f) : mge_f32_to_bf16(f);
            if (dt == MGE_F16 && isfinite(f) && isinf(mge_f16_to_f32(dst[i])))
                s = mge_error_set(err, MGE_ERR_INVALID,
                                  "'%s' holds %g, beyond f16's range (65504): store the f32 model's weights as f16 "
                                  "instead",
                                  val->name, (double)f);
        }
    }
    for (int v = 0; v < g->nvalues && !s; v++)
        if (nt[v]) {
            mge_value *val = &g->values[v];
            mge_tensor_free(val->data);
            free(val->data);
            val->data = nt[v];
            val->dtype = dt;
            nt[v] = NULL;
            *changed = 1;
        }
done:
    for (size_t v = 0; nt && v < nv; v++)
        if (nt[v]) {
            mge_tensor_free(nt[v]);
            free(nt[v]);
        }
    free(nt);
    free(ok);
    return s;
}

static mge_status half_weights(mge_graph **gp, mge_dtype dt, int *changed, mge_error *err)
{
    mge_graph *g = *gp;
    *changed = 0;
    size_t nv = (size_t)g->nvalues + 1;
    char *conv = calloc(nv, 1);     /* param to convert */
    char *pinned = calloc(nv, 1);
    char *keep = NULL;
    int *remap = NULL;
    int *castv = malloc(sizeof(int) * nv);   /* new graph: the cast output for a converted param, or -1 */
    mge_tensor **half = calloc(nv, sizeof *half);
    mge_graph *c = NULL;
    mge_status s = MGE_OK;
    if (!conv || !pinned || !castv || !half) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < g->noutputs; i++)
        pinned[g->outputs[i]] = 1;
    if (g->loss >= 0)
        pinned[g->loss] = 1;
    if ((s = rehalf(g, dt, pinned, changed, err)))
        goto done;
    int nconv = 0;
    for (int i = 0; i < g->nnodes; i++) {
        const mge_node *n = &g->nodes[i];
        if (!weighted(n->op))
            continue;
        /* weight, and bias when present (a fused op's next input may be
         * its residual: a node output, skipped by the kind test below) */
        int wt = n->op == MGE_OP_WINOGRAD_WEIGHT || n->op == MGE_OP_WINOGRAD_WEIGHT_NCHWC;
        for (int k = wt ? 0 : 1; k < n->nin && k <= (wt ? 0 : 2); k++) {
            int v = n->in[k];
            const mge_value *val = &g->values[v];
            if (conv[v] || val->kind != MGE_VAL_PARAM || val->dtype != MGE_F32 || !val->data || pinned[v] ||
                val->data->dtype != MGE_F32)
                continue;
            conv[v] = 1;
            nconv++;
        }
    }
    if (!nconv)
        goto done;

    for (int v = 0; v < g->nvalues; v++) {
        castv[v] = -1;
        if (conv[v] && (s = to_half(g->values[v].data, dt, &half[v], err)))
            goto done;
    }
    if ((s = mge_pass_rb_alloc(g, &keep, &remap, &c, err)))
        goto done;
    if ((s = mge_pass_rb_values(g, keep, NULL, c, remap, err)))
        goto done;
    /* names of the cast outputs: "<param>.f32", made unique if taken */
    for (int v = 0; v < g->nvalues; v++) {
        if (!conv[v])
            continue;
        const mge_value *p = &g->values[v];
        c->values[remap[v]].dtype = dt;
        if ((s = mge_pass_rb_new_value(g, c, p->name, ".f32", MGE_VAL_NODE, MGE_F32, p->ndim, p->dims, &castv[v],
                                       err)))
            goto done;
    }
    mge_attr cast_attr[4];
    int ncast_attr = 0;
    {
        mge_attr a;
        memset(&a, 0, sizeof a);
        a.key = MGE_KEY_dtype;
        a.n = 1;
        a.i[0] = MGE_F32;
        if ((s = mge_attrs_complete(MGE_OP_CAST, 1, &a, cast_attr, &ncast_attr, err)))
            goto done;
    }
    char *emitted = calloc(nv, 1);
    if (!emitted) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < g->nnodes && !s; i++) {
        const mge_node *n = &g->nodes[i];
        int in[64], out[8];
        if (n->nin > 64 || n->nout > 8) {
            s = mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: too many inputs or outputs", n->name);
            break;
        }
        /* the casts this node needs, right before it */
        for (int k = 0; k < n->nin && !s; k++) {
            int v = n->in[k];
            if (!conv[v] || emitted[v])
                continue;
            emitted[v] = 1;
            int pin = remap[v], pout = castv[v];
            s = mge_pass_rb_node(c, c->values[pout].name, MGE_OP_CAST, 1, &pin, 1, &pout, ncast_attr, cast_attr, err);
        }
        for (int k = 0; k < n->nin; k++)
            in[k] = conv[n->in[k]] ? castv[n->in[k]] : remap[n->in[k]];
        for (int k = 0; k < n->nout; k++)
            out[k] = remap[n->out[k]];
        if (!s)
            s = mge_pass_rb_node(c, n->name, n->op, n->nin, in, n->nout, out, n->nattr, n->attrs, err);
    }
    free(emitted);
    if (s || (s = mge_pass_rb_end(gp, &c, remap, NULL, changed, err)))
        goto done;
    /* the f32 data moved over with the rest; the f16 copies take its place */
    for (int v = 0; v < (int)nv - 1; v++)
        if (half[v]) {
            mge_value *d = &(*gp)->values[remap[v]];
            if (d->data) {
                mge_tensor_free(d->data);
                free(d->data);
            }
            d->data = half[v];
            half[v] = NULL;
        }
done:
    mge_graph_free(c);
    if (half)
        for (size_t v = 0; v < nv; v++)
            if (half[v]) {
                mge_tensor_free(half[v]);
                free(half[v]);
            }
    free(half);
    free(conv);
    free(pinned);
    free(keep);
    free(remap);
    free(castv);
    return s;
}

mge_status mge_pass_f16_weights(mge_graph **gp, int *changed, mge_error *err)
{
    return half_weights(gp, MGE_F16, changed, err);
}

mge_status mge_pass_bf16_weights(mge_graph **gp, int *changed, mge_error *err)
{
    return half_weights(gp, MGE_BF16, changed, err);
}
