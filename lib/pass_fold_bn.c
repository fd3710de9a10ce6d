/* pass_fold_bn.c — fold inference batchnorm into the conv2d/linear before it.
 *
 * Outside training, batchnorm(y) = (y - mean) * gamma / sqrt(var + eps) + beta
 * per channel, an affine map per output channel of the conv2d or linear that
 * made y: W' = W * s, b' = (b - mean) * s + beta with s = gamma / sqrt(var + eps).
 * It folds when y is read by this batchnorm alone (and is no graph output),
 * the layer's weight and bias are read by that layer alone, and every tensor
 * involved is f32 with data. The batchnorm goes; its readers read the layer's
 * output, which takes the batchnorm output's name when that is a graph output.
 * Parameters keep their names with new data; the batchnorm's are dropped. */
#include "internal.h"

#include <math.h>
#include <stdlib.h>

static const float *vec(const mge_graph *g, int v, int64_t c)
{
    const mge_value *val = &g->values[v];
    if (!val->data || !val->data->data || val->dtype != MGE_F32 || val->data->dtype != MGE_F32 || val->ndim != 1 ||
        val->dims[0] != c)
        return NULL;
    return val->data->data;
}

mge_status mge_pass_fold_bn(mge_graph **gp, int *changed, mge_error *err)
{
    mge_graph *g = *gp;
    *changed = 0;
    int *uses = malloc(sizeof(int) * ((size_t)g->nvalues + 1));
    char **rename = calloc((size_t)g->nvalues + 1, sizeof *rename);
    int *to = malloc(sizeof(int) * ((size_t)g->nvalues + 1));
    double *scale = NULL, *shift = NULL;
    mge_status s = MGE_OK;
    int folded = 0, rewired = 0;
    if (!uses || !rename || !to) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto done;
    }
    mge_pass_count_uses(g, uses);
    for (int v = 0; v < g->nvalues; v++)
        to[v] = -1;
    for (int i = 0; i < g->nnodes; i++) {
        const mge_node *bn = &g->nodes[i];
        if (bn->op != MGE_OP_BATCHNORM || bn->nin < 5)
            continue;
        int y = to[bn->in[0]] >= 0 ? to[bn->in[0]] : bn->in[0], out = bn->out[0];
        const mge_value *yv = &g->values[y];
        if (yv->kind != MGE_VAL_NODE || uses[y] != 1 || yv->ndim < 2)
            continue;
        int layer = yv->producer;
        int64_t c = mge_pass_layer_channels(g, layer, uses);
        if (c <= 0 || yv->dims[1] != c)
            continue; /* batchnorm normalizes dim 1: it must be the layer's channels */
        if (g->nodes[layer].op == MGE_OP_LINEAR && yv->ndim != 2)
            continue;
        const float *gamma = vec(g, bn->in[1], c), *beta = vec(g, bn->in[2], c);
        const float *mean = vec(g, bn->in[3], c), *var = vec(g, bn->in[4], c);
        if (!gamma || !beta || !mean || !var)
            continue;
        double eps = mge_node_float(bn, MGE_KEY_eps, 1e-5);
        double *ns = realloc(scale, sizeof(double) * (size_t)c), *nt;
        if (ns)
            scale = ns;
        nt = ns ? realloc(shift, sizeof(double) * (size_t)c) : NULL;
        if (nt)
            shift = nt;
        if (!ns || !nt) {
            s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
            goto done;
        }
        for (int64_t o = 0; o < c; o++) {
            scale[o] = (double)gamma[o] / sqrt((double)var[o] + eps);
            shift[o] = (double)beta[o] - (double)mean[o] * scale[o];
        }
        if ((s = mge_pass_fold_into(g, layer, scale, shift, out, y, &uses, &rename, &to, err)))
            goto done;
        folded = 1;
    }
    if (folded) {
        mge_pass_rewire(g, to);
        rewired = 1;
        mge_prune_opts o = {NULL, rename, NULL};
        int ch = 0;
        s = mge_pass_prune(gp, &o, &ch, err);
    }
done:
    if (folded && !rewired)
        mge_pass_rewire(g, to); /* a fold failed: the ones before it stand */
    *changed = folded;
    free(uses);
    free(rename);
    free(to);
    free(scale);
    free(shift);
    return s;
}
