/* train_loss.c — mge-train --loss cross_entropy|mse: an exported model
 * holds only its forward pass (ONNX has no loss), so the loss node and its
 * label input are added here, as the text form's `loss = cross_entropy(out,
 * label)` plus `minimize loss` would. The checkpoint then carries them; the
 * label input is not needed by the outputs, so mge-run does not ask for it. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "train_loss.h"

/* The value a user's name means: the mge name, else the ONNX name the
 * reader kept (onnx.name.MINE = "ORIGINAL"), so "onnx::Gemm_5" works. */
static int find_value(const mge_graph *g, const char *name)
{
    int v = mge_graph_find(g, name);
    if (v >= 0)
        return v;
    for (int i = 0; i < g->nmeta; i++)
        if (strncmp(g->meta[i].key, "onnx.name.", 10) == 0 && strcmp(g->meta[i].value, name) == 0)
            return mge_graph_find(g, g->meta[i].key + 10);
    return -1;
}

static void list_outputs(const mge_graph *g, char *b, size_t n)
{
    size_t k = 0;
    b[0] = 0;
    for (int i = 0; i < g->noutputs && k + 1 < n; i++)
        k += (size_t)snprintf(b + k, n - k, "%s'%s'", i ? ", " : "", g->values[g->outputs[i]].name);
    if (k >= n && n > 4)
        strcpy(b + n - 4, "...");
}

static int node_named(const mge_graph *g, const char *name)
{
    for (int i = 0; i < g->nnodes; i++)
        if (strcmp(g->nodes[i].name, name) == 0)
            return 1;
    return 0;
}

/* "loss", or "loss_2", ... when the model uses that name already. */
static void fresh_name(const mge_graph *g, char *out, size_t n)
{
    snprintf(out, n, "loss");
    for (int k = 2; mge_graph_find(g, out) >= 0 || node_named(g, out); k++)
        snprintf(out, n, "loss_%d", k);
}

/* Whether input v is read by any node (an unused input may serve as the label). */
static int is_read(const mge_graph *g, int v)
{
    for (int i = 0; i < g->nnodes; i++)
        for (int j = 0; j < g->nodes[i].nin; j++)
            if (g->nodes[i].in[j] == v)
                return 1;
    return 0;
}

int train_loss_attach(mge_graph *g, tl_kind kind, const char *output, const char *label, const char *where)
{
    const char *kn = kind == TL_MSE ? "mse" : "cross_entropy";
    char b[512];
    if (g->loss >= 0) {
        /* two losses would be a choice mge-train cannot make for the user */
        cli_error(where, "the model already minimizes '%s': drop --loss to train with it, or give a model without one",
                  g->values[g->loss].name);
        return -1;
    }
    if (g->noutputs == 0) {
        cli_error(where, "the model has no outputs to put --loss %s on", kn);
        return -1;
    }
    int out = g->outputs[0];
    if (output) {
        int v = find_value(g, output);
        int k = -1;
        for (int i = 0; v >= 0 && i < g->noutputs; i++)
            if (g->outputs[i] == v)
                k = i;
        if (k < 0) {
            list_outputs(g, b, sizeof b);
            cli_error(where, "--loss-output %s: %s; the model's outputs are %s", output,
                      v >= 0 ? "not an output of the model" : "no such value", b);
            return -1;
        }
        out = v;
    }
    const mge_value *o = &g->values[out];
    char so[128];
    mge_shape_str(o->dtype, o->ndim, o->dims, so, sizeof so);
    if (!mge_dtype_is_float(o->dtype)) {
        cli_error(where, "--loss %s: output '%s' is %s: a loss needs a float output", kn, o->name, so);
        return -1;
    }
    /* the label's template: class indices [N, d...] for logits [N, C, d...]
     * (PyTorch's F.cross_entropy), or the output's own type for mse */
    mge_dtype ldt = o->dtype;
    int lnd = o->ndim;
    int64_t ldims[MGE_MAX_DIMS];
    memcpy(ldims, o->dims, sizeof ldims);
    if (kind == TL_CROSS_ENTROPY) {
        if (o->ndim < 2) {
            cli_error(where, "--loss cross_entropy: output '%s' is %s: expected logits [N,C] or [N,C,d...] (use "
                      "--loss mse for a regression)", o->name, so);
            return -1;
        }
        ldt = MGE_I32;
        lnd = o->ndim - 1;
        for (int d = 2; d < o->ndim; d++)
            ldims[d - 1] = o->dims[d];
    }
    char sl[128];
    mge_shape_str(ldt, lnd, ldims, sl, sizeof sl);
    int lab = find_value(g, label);
    if (lab >= 0) {
        const mge_value *l = &g->values[lab];
        int fits = l->kind == MGE_VAL_INPUT && l->ndim == lnd && !is_read(g, lab) &&
                   (l->dtype == ldt || (kind == TL_CROSS_ENTROPY && l->dtype == MGE_I64));
        for (int d = 0; fits && d < lnd; d++)
            fits = l->dims[d] == ldims[d];
        if (!fits) {
            char sv[128];
            mge_shape_str(l->dtype, l->ndim, l->dims, sv, sizeof sv);
            cli_error(where, "--label-input %s: the model already has %s '%s' %s%s; the label for --loss %s over '%s' "
                      "must be a new input %s: name another with --label-input",
                      label, l->kind == MGE_VAL_INPUT ? "an input" : "a value", l->name, sv,
                      l->kind == MGE_VAL_INPUT && is_read(g, lab) ? " that the model reads" : "", kn, o->name, sl);
            return -1;
        }
    } else {
        mge_error err;
        mge_error_clear(&err);
        if (node_named(g, label)) {
            cli_error(where, "--label-input %s: a node of the model has that name: name another", label);
            return -1;
        }
        lab = mge_graph_add_value(g, label, MGE_VAL_INPUT, ldt, lnd, ldims, &err);
        if (lab < 0) {
            mge_error_prefix(&err, "--label-input %s", label);
            cli_mge_error(where, &err);
            return -1;
        }
    }
    char name[64];
    fresh_name(g, name, sizeof name);
    mge_error err;
    mge_error_clear(&err);
    int in[2] = {out, lab};
    const char *outs[1] = {name};
    int n = mge_graph_add_node(g, name, kind == TL_MSE ? MGE_OP_MSE : MGE_OP_CROSS_ENTROPY, 2, in, 0, NULL, 1, outs,
                               &err);
    if (n < 0) {
        mge_error_prefix(&err, "--loss %s", kn);
        cli_mge_error(where, &err);
        return -1;
    }
    g->loss = g->nodes[n].out[0];
    snprintf(b, sizeof b, "%s(%s, %s)", kn, o->name, label);
    if (mge_graph_set_meta(g, "train.loss", b, &err)) {
        cli_mge_error(where, &err);
        return -1;
    }
    return 0;
}
