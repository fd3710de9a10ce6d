/* pass_fuse_activation.c — fold the residual add and the activation that
 * follow a conv2d or linear into one fused_conv2d / fused_linear node,
 * whose kernel applies them to each output block while it is in cache.
 *
 * The chain is an f32 conv2d or linear (any groups, with or without bias),
 * then optionally add(y, r) or add(r, y) where r has exactly y's shape (a
 * resnet shortcut), then optionally one activation: an op with the ACT
 * trait (ops.def: relu, relu6, leaky_relu and elu with their alpha,
 * sigmoid, tanh, gelu, silu, hswish, hsigmoid, selu, mish, softsign).
 * At least one of the two must be there. Every value inside the chain must
 * be read once, by the next node of the chain, and be no graph output; the
 * chain's last value keeps its name and the fused node takes the last
 * node's name and place (r is defined before the add, so before that
 * place). When both operands of an add are single-use layer outputs, the
 * layer first in graph order takes the add and the other's output is the
 * residual.
 *
 * A graph with a loss is left alone: the fused ops have no gradient, and
 * a model that is still to be trained keeps its plain ops (strip-training,
 * in -O2, drops the loss of a model meant for inference). With nothing to
 * fuse, *g is left untouched and *changed = 0. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static int same_shape(const mge_value *a, const mge_value *b)
{
    return a->dtype == b->dtype && a->ndim == b->ndim &&
           memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->ndim) == 0;
}

static int is_act(int op)
{
    return op != -1 && mge_fused_act_ok(op);
}

/* One fused chain, kept at the index of its last node. */
typedef struct chain {
    int layer;    /* the conv2d/linear node */
    int res;      /* residual value, or -1 */
    int act;      /* activation op, or -1 */
    double alpha;
} chain;

/* The node that alone reads value v (v no graph output), or -1. */
static int sole_reader(const mge_graph *g, const int *uses, const int *reader, int v)
{
    if (uses[v] != 1 || mge_pass_is_root(g, v))
        return -1;
    return reader[v];
}

/* Builds the fused node's attributes from the layer's: the layer's own
 * (bias set by its input count), then residual, act and alpha, in the
 * fused op's schema order with its defaults. */
static mge_status fused_attrs(const mge_node *layer, int fop, const chain *ch, mge_attr *out, int *nout,
                              mge_error *err)
{
    mge_attr a[32];
    int na = 0;
    for (int k = 0; k < layer->nattr && na < 28; k++)
        if (layer->attrs[k].key != MGE_KEY_bias)
            a[na++] = layer->attrs[k];
    a[na++] = (mge_attr){.key = MGE_KEY_bias, .n = 1, .i = {layer->nin == 3}};
    a[na++] = (mge_attr){.key = MGE_KEY_residual, .n = 1, .i = {ch->res >= 0}};
    a[na++] = (mge_attr){.key = MGE_KEY_act, .n = 1, .i = {ch->act}};
    a[na++] = (mge_attr){.key = MGE_KEY_alpha, .n = 1, .f = ch->alpha};
    return mge_attrs_complete(fop, na, a, out, nout, err);
}

mge_status mge_pass_fuse_activation(mge_graph **gp, int *changed, mge_error *err)
{
    mge_graph *g = *gp;
    *changed = 0;
    if (g->loss >= 0 || g->nnodes < 2)
        return MGE_OK;
    size_t nv = (size_t)g->nvalues + 1, nn = (size_t)g->nnodes;
    int *uses = malloc(sizeof(int) * nv);
    int *reader = malloc(sizeof(int) * nv);
    char *role = calloc(nn, 1);            /* 0 copied, 1 absorbed, 2 last of a chain */
    chain *chains = malloc(sizeof(chain) * nn);
    char *keep = NULL;
    int *remap = NULL;
    mge_graph *c = NULL;
    mge_status s = MGE_OK;
    if (!uses || !reader || !role || !chains) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto done;
    }
    mge_pass_count_uses(g, uses);
    for (size_t v = 0; v < nv; v++)
        reader[v] = -1;
    for (int i = 0; i < g->nnodes; i++)
        for (int k = 0; k < g->nodes[i].nin; k++)
            reader[g->nodes[i].in[k]] = i;

    int fused = 0;
    for (int i = 0; i < g->nnodes; i++) {
        const mge_node *n = &g->nodes[i];
        if ((n->op != MGE_OP_CONV2D && n->op != MGE_OP_LINEAR) || n->nin < 2 || n->nin > 3 || n->nout != 1)
            continue;
        int y = n->out[0], cur = y, last = i, mid = -1;
        if (g->values[y].dtype != MGE_F32)
            continue;
        chain ch = {i, -1, -1, 0.01};
        int j = sole_reader(g, uses, reader, cur);
        if (j >= 0 && !role[j] && g->nodes[j].op == MGE_OP_ADD && g->nodes[j].nin == 2 && g->nodes[j].nout == 1) {
            const mge_node *a = &g->nodes[j];
            int r = a->in[0] == cur ? a->in[1] : a->in[0];
            if (r != cur && same_shape(&g->values[r], &g->values[y]) &&
                same_shape(&g->values[a->out[0]], &g->values[y])) {
                ch.res = r;
                mid = j;
                cur = a->out[0];
                last = j;
            }
        }
        int k = sole_reader(g, uses, reader, cur);
        if (k >= 0 && !role[k] && is_act(g->nodes[k].op) && g->nodes[k].nin == 1 && g->nodes[k].nout == 1 &&
            same_shape(&g->values[g->nodes[k].out[0]], &g->values[y])) {
            ch.act = g->nodes[k].op;
            if (mge_node_attr(&g->nodes[k], MGE_KEY_alpha))   /* leaky_relu, elu */
                ch.alpha = mge_node_float(&g->nodes[k], MGE_KEY_alpha, 0.01);
            last = k;
        }
        if (last == i)
            continue;
        role[i] = 1;
        if (mid >= 0 && mid != last)
            role[mid] = 1;
        role[last] = 2;
        chains[last] = ch;
        fused++;
    }
    if (!fused)
        goto done;

    /* Rebuild: the values inside the chains go, each chain's last node
     * becomes its fused node, the rest is copied in order. */
    if ((s = mge_pass_rb_alloc(g, &keep, &remap, &c, err)))
        goto done;
    for (int i = 0; i < g->nnodes; i++)
        if (role[i] == 1)
            keep[g->nodes[i].out[0]] = 0;
    if ((s = mge_pass_rb_values(g, keep, NULL, c, remap, err)))
        goto done;
    for (int i = 0; i < g->nnodes; i++) {
        const mge_node *n = &g->nodes[i];
        if (role[i] == 1)
            continue;
        if (role[i] == 2) {
            const chain *ch = &chains[i];
            const mge_node *l = &g->nodes[ch->layer];
            int fop = l->op == MGE_OP_CONV2D ? MGE_OP_FUSED_CONV2D : MGE_OP_FUSED_LINEAR;
            mge_attr attrs[32];
            int nattr = 0, in[4], nin = 0, out = remap[n->out[0]];
            if ((s = fused_attrs(l, fop, ch, attrs, &nattr, err)))
                goto done;
            for (int k = 0; k < l->nin; k++)
                in[nin++] = remap[l->in[k]];
            if (ch->res >= 0)
                in[nin++] = remap[ch->res];
            if ((s = mge_pass_rb_node(c, n->name, fop, nin, in, 1, &out, nattr, attrs, err)))
                goto done;
            continue;
        }
        if ((s = mge_pass_rb_copy(c, n, remap, err)))
            goto done;
    }
    s = mge_pass_rb_end(gp, &c, remap, NULL, changed, err);
done:
    mge_graph_free(c);
    free(uses);
    free(reader);
    free(role);
    free(chains);
    free(keep);
    free(remap);
    return s;
}
