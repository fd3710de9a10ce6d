/* pass_strip_training.c — turn a training model into an inference model.
 *
 * Drops the loss and what only it needs (the loss nodes, the label inputs:
 * inputs the loss read that no output needs), makes dropout the identity
 * (its readers read its input; the node goes), drops batchnorm's
 * num_batches_tracked input (only training counts batches; the node itself
 * already runs on its running statistics outside training), optimizer state
 * ("<param>.__opt.*", "__opt.*") and the "train.*" metadata that only
 * resuming a training run needs. Inputs the loss never read stay: they are
 * the model's interface, as in dce. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static int is_train_meta(const char *key)
{
    return strncmp(key, "train.", 6) == 0;
}

static int keep_meta(const char *key)
{
    return !is_train_meta(key);
}

static int is_opt_state(const mge_value *v)
{
    return mge_value_is_opt_state(v);
}

mge_status mge_pass_strip_training(mge_graph **gp, int *changed, mge_error *err)
{
    mge_graph *g = *gp;
    *changed = 0;
    if (g->noutputs == 0 && g->loss >= 0)
        return mge_error_set(err, MGE_ERR_INVALID,
                             "the model has no outputs: without its loss nothing would be left");
    int *uses = malloc(sizeof(int) * ((size_t)g->nvalues + 1));
    int *to = malloc(sizeof(int) * ((size_t)g->nvalues + 1)); /* dropouts' readers read their input */
    char *rename_taken = calloc((size_t)g->nvalues + 1, 1);
    char **rename = calloc((size_t)g->nvalues + 1, sizeof *rename);
    char *need = malloc((size_t)g->nnodes + 1);
    char *in_loss = calloc((size_t)g->ninputs + 1, 1);
    char *in_out = calloc((size_t)g->ninputs + 1, 1);
    mge_status s = MGE_OK;
    if (!uses || !to || !rename_taken || !rename || !need || !in_loss || !in_out) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto done;
    }

    /* Decide everything before touching g, so a no-op leaves it as it was. */
    int work = g->loss >= 0, edited = 0;
    for (int i = 0; i < g->nnodes; i++) {
        const mge_node *n = &g->nodes[i];
        work |= n->op == MGE_OP_DROPOUT || (n->op == MGE_OP_BATCHNORM && n->nin == 6);
    }
    for (int v = 0; v < g->nvalues; v++)
        work |= is_opt_state(&g->values[v]);
    for (int i = 0; i < g->nmeta; i++)
        work |= is_train_meta(g->meta[i].key);
    if (!work)
        goto done;

    /* Label inputs: read for the loss, needed by no output. */
    if (g->loss >= 0) {
        mge_graph_needed(g, 1, &g->loss, need, in_loss);
        if (g->noutputs)
            mge_graph_needed(g, g->noutputs, g->outputs, need, in_out);
        for (int i = 0; i < g->ninputs; i++) {
            int v = g->inputs[i];
            in_loss[i] = in_loss[i] && !in_out[i] && !mge_pass_is_root(g, v) && g->loss != v;
        }
    }

    /* Dropout: readers of its output read its input. A dropout whose output
     * is a graph output hands its name to its input when that input is a
     * node output nothing else names; otherwise it stays (it is the
     * identity outside training anyway). */
    mge_pass_count_uses(g, uses);
    for (int v = 0; v < g->nvalues; v++)
        to[v] = -1;
    for (int i = 0; i < g->nnodes; i++) {
        mge_node *n = &g->nodes[i];
        if (n->op != MGE_OP_DROPOUT)
            continue;
        int x = to[n->in[0]] >= 0 ? to[n->in[0]] : n->in[0], y = n->out[0];
        if (mge_pass_is_root(g, y)) {
            const mge_value *xv = &g->values[x];
            if (xv->kind != MGE_VAL_NODE || mge_pass_is_root(g, x) || rename_taken[x])
                continue;
            rename_taken[x] = 1;
            rename[x] = g->values[y].name; /* y is dropped by the rebuild, so its name is free */
        }
        mge_pass_redirect(g, to, y, x);
        edited = 1;
    }
    mge_pass_rewire(g, to);
    for (int i = 0; i < g->nnodes; i++) {
        mge_node *n = &g->nodes[i];
        if (n->op == MGE_OP_BATCHNORM && n->nin == 6) {
            n->nin = 5; /* num_batches_tracked: counted in training only */
            edited = 1;
        }
    }
    edited |= g->loss >= 0;
    g->loss = -1;

    mge_prune_opts o = {in_loss, rename, keep_meta};
    int ch = 0;
    s = mge_pass_prune(gp, &o, &ch, err);
    /* even a failed rebuild leaves a valid graph (rewired, without the loss) */
    *changed = edited || ch;
done:
    free(uses);
    free(to);
    free(rename_taken);
    free(rename);
    free(need);
    free(in_loss);
    free(in_out);
    return s;
}
