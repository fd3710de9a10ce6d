/* pass_fold_scale.c — fold a per-channel multiplication or addition by
 * constants into the conv2d/linear before it.
 *
 * y * k, k * y, y / k fold into the weight and bias (W * k, b * k), y + k,
 * k + y, y - k into the bias (b + k), where y is the output of a conv2d or
 * linear read by this node alone (and no graph output), and k is a const or
 * param with f32 data whose shape broadcasts along the layer's channels
 * only: a scalar, [C,1,1] or [1,C,1,1] for conv2d (channels at dim 1), [C]
 * or [1,C] for linear (channels last). The product or sum keeps the shape
 * of y. Chains fold one after another (conv, mul, add). */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* The per-channel values of k against layer output y with c channels at
 * dim ch, or 0 when k does not broadcast along the channels only. */
static int channel_values(const mge_value *k, const mge_value *y, int ch, int64_t c, double *out)
{
    if ((k->kind != MGE_VAL_CONST && k->kind != MGE_VAL_PARAM) || k->dtype != MGE_F32 || !k->data ||
        !k->data->data || k->data->dtype != MGE_F32 || k->ndim > y->ndim)
        return 0;
    int per_channel = 0;
    for (int j = 0; j < k->ndim; j++) {
        int a = y->ndim - k->ndim + j;
        if (k->dims[j] == 1)
            continue;
        if (a != ch || k->dims[j] != c)
            return 0;
        per_channel = 1;
    }
    const float *d = k->data->data;
    for (int64_t o = 0; o < c; o++)
        out[o] = per_channel ? d[o] : d[0];
    return 1;
}

static int same_shape(const mge_value *a, const mge_value *b)
{
    return a->ndim == b->ndim && memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->ndim) == 0;
}

mge_status mge_pass_fold_scale(mge_graph **gp, int *changed, mge_error *err)
{
    mge_graph *g = *gp;
    *changed = 0;
    int *uses = malloc(sizeof(int) * ((size_t)g->nvalues + 1));
    char **rename = calloc((size_t)g->nvalues + 1, sizeof *rename);
    int *to = malloc(sizeof(int) * ((size_t)g->nvalues + 1));
    double *vals = NULL;
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
        const mge_node *n = &g->nodes[i];
        int op = n->op;
        if ((op != MGE_OP_MUL && op != MGE_OP_ADD && op != MGE_OP_SUB && op != MGE_OP_DIV) || n->nin != 2)
            continue;
        int in[2]; /* what the inputs read once earlier folds are rewired */
        for (int k = 0; k < 2; k++)
            in[k] = to[n->in[k]] >= 0 ? to[n->in[k]] : n->in[k];
        /* which operand is the layer output: either for mul/add, the first for sub/div */
        int side = -1;
        for (int k = 0; k < 2 && side < 0; k++) {
            if (k == 1 && (op == MGE_OP_SUB || op == MGE_OP_DIV))
                break;
            const mge_value *v = &g->values[in[k]];
            if (v->kind == MGE_VAL_NODE && uses[in[k]] == 1 && in[0] != in[1])
                side = k;
        }
        if (side < 0)
            continue;
        int y = in[side], kv = in[1 - side], out = n->out[0];
        const mge_value *yv = &g->values[y];
        int layer = yv->producer;
        int64_t c = mge_pass_layer_channels(g, layer, uses);
        if (c <= 0 || !same_shape(yv, &g->values[out]) || g->values[out].dtype != MGE_F32)
            continue;
        int ch = g->nodes[layer].op == MGE_OP_CONV2D ? 1 : yv->ndim - 1;
        double *nv = realloc(vals, sizeof(double) * (size_t)c);
        if (!nv) {
            s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
            goto done;
        }
        vals = nv;
        if (!channel_values(&g->values[kv], yv, ch, c, vals))
            continue;
        int ok = 1;
        for (int64_t o = 0; o < c; o++) {
            if (op == MGE_OP_DIV) {
                ok &= vals[o] != 0.0;
                vals[o] = 1.0 / vals[o];
            } else if (op == MGE_OP_SUB) {
                vals[o] = -vals[o];
            }
        }
        if (!ok)
            continue; /* y / 0 is not a scale */
        int mulop = op == MGE_OP_MUL || op == MGE_OP_DIV;
        if ((s = mge_pass_fold_into(g, layer, mulop ? vals : NULL, mulop ? NULL : vals, out, y, &uses, &rename, &to,
                                    err)))
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
    free(vals);
    return s;
}
