/* run_generate.c — mge-run --generate (see run_generate.h). */
#include "run_generate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The value the logits come from: --output NAME or the first output. */
static int logits_value(const mge_graph *g, const char *where, const char *name)
{
    if (name) {
        if (strchr(name, ',')) {
            cli_error(where, "--generate: --output %s: name one value, the logits", name);
            return -1;
        }
        int v = mge_graph_find(g, name);
        if (v < 0)
            cli_error(where, "--output: the model has no value named '%s'", name);
        return v;
    }
    if (g->noutputs < 1) {
        cli_error(where, "the model has no outputs: --generate needs the logits (declare them with 'output', or "
                         "use --output)");
        return -1;
    }
    return g->outputs[0];
}

/* The position table: the rank-2 parameter whose name has "pos" in it. */
static const mge_value *pos_table(const mge_graph *g)
{
    for (int v = 0; v < g->nvalues; v++) {
        const mge_value *p = &g->values[v];
        if (p->kind == MGE_VAL_PARAM && p->ndim == 2 && p->name && strstr(p->name, "pos") && p->dims[0] > 0)
            return p;
    }
    return NULL;
}

/* P from the model: the token input's dim 1, else the position table's rows. */
static long model_context(const mge_graph *g, const mge_value *tok)
{
    if (tok->dims[1] > 0)
        return (long)tok->dims[1];
    const mge_value *p = pos_table(g);
    return p ? (long)p->dims[0] : 0;
}

/* The next byte from the scores s[0..V): argmax, or a sample of
 * softmax(s / T) over the top k. */
static int sample(const float *s, int V, const run_gen_opts *o, mge_rng *r)
{
    int best = 0;
    for (int c = 1; c < V; c++)
        if (s[c] > s[best])
            best = c;
    if (o->greedy)
        return best;
    /* the k-th largest score is the cut: classes below it drop out (ties at
     * the cut stay, so the draw does not depend on the class order) */
    double cut = -INFINITY;
    if (o->top_k > 0 && o->top_k < V) {
        float sorted[256];
        memcpy(sorted, s, sizeof(float) * (size_t)V);
        for (int i = 0; i < o->top_k; i++) /* selection: V is at most 256 */
            for (int j = i + 1; j < V; j++)
                if (sorted[j] > sorted[i]) {
                    float t = sorted[i];
                    sorted[i] = sorted[j];
                    sorted[j] = t;
                }
        cut = sorted[o->top_k - 1];
    }
    double p[256], sum = 0;
    for (int c = 0; c < V; c++) {
        p[c] = s[c] >= cut ? exp(((double)s[c] - s[best]) / o->temperature) : 0;
        sum += p[c];
    }
    double u = (double)mge_rng_uniform(r) * sum, acc = 0;
    for (int c = 0; c < V; c++) {
        acc += p[c];
        if (u < acc && p[c] > 0)
            return c;
    }
    return best;
}

int run_generate(const char *model, const run_gen_opts *o)
{
    const char *where = cli_name(model);
    mge_error err;
    mge_error_clear(&err);
    mge_graph *g = NULL;
    mge_exec *e = NULL;
    mge_tensor in = {0};
    unsigned char *ctx = NULL;
    int rc = 1, printed = 0;
    if (cli_model_load_printed(model, &g, &printed))
        goto done;
    int uninit = 0;
    for (int v = 0; v < g->nvalues; v++)
        uninit += (g->values[v].kind == MGE_VAL_PARAM || g->values[v].kind == MGE_VAL_STATE) && !g->values[v].data;
    if (uninit) {
        if (mge_graph_init_params(g, o->seed, &err)) {
            cli_mge_error(where, &err);
            goto done;
        }
        if (printed)
            cli_warn_printed(where, uninit, o->seed);
        else
            cli_warn(where, "%d parameter%s no values: generating from random weights (seed %llu; train the "
                     "model with mge-train first)", uninit, uninit == 1 ? " has" : "s have",
                     (unsigned long long)o->seed);
    }
    int lv = logits_value(g, where, o->output);
    if (lv < 0)
        goto done;
    const char *lname = g->values[lv].name;
    mge_exec_opts eo = {0};
    eo.threads = o->threads;
    eo.device = o->device;
    eo.noutputs = 1;
    eo.outputs = &lv;
    eo.preprocess = 1;
    eo.plan_cache = o->plan_cache;
    if (mge_exec_create(g, &eo, &e, &err)) {
        cli_mge_error(where, &err);
        goto done;
    }
    int nin = mge_exec_ninputs(e);
    const mge_value *tok = nin == 1 ? &g->values[mge_exec_input(e, 0)] : NULL;
    if (!tok || (tok->dtype != MGE_I32 && tok->dtype != MGE_I64) || tok->ndim != 2) {
        char d[96] = "";
        if (tok)
            mge_shape_str(tok->dtype, tok->ndim, tok->dims, d, sizeof d);
        if (!tok)
            cli_error(where, "--generate needs a language model: '%s' should depend on one input, the tokens "
                      "(i32 or i64 [N,S]); it needs %d", lname, nin);
        else
            cli_error(where, "--generate needs a language model: its input '%s' is %s: expected the tokens, "
                      "i32 or i64 [N,S]", tok->name, d);
        goto done;
    }
    long P = o->context ? o->context : model_context(g, tok);
    if (P < 1) {
        cli_error(where, "--generate: the context length is not in the model (dim 1 of '%s' is symbolic and no "
                  "position table was found): give --context P", tok->name);
        goto done;
    }
    const mge_value *pt = pos_table(g);
    if (o->context && pt && P > pt->dims[0]) {   /* found now, not after printing P bytes */
        cli_error(where, "--context %ld: the position table '%s' has %lld rows", P, pt->name,
                  (long long)pt->dims[0]);
        goto done;
    }
    if (tok->dims[1] > 0 && P != tok->dims[1]) {
        cli_error(where, "--context %ld: the token input '%s' takes exactly %lld", P, tok->name,
                  (long long)tok->dims[1]);
        goto done;
    }
    const char *prompt = o->prompt ? o->prompt : "\n";
    size_t plen = strlen(prompt);
    if (plen == 0) {
        cli_error(NULL, "--prompt: empty: the model needs at least one byte of context");
        goto done;
    }
    ctx = malloc(plen + (size_t)o->n + 1);
    if (!ctx) {
        cli_error(NULL, "out of memory");
        goto done;
    }
    memcpy(ctx, prompt, plen);
    size_t len = plen;
    fwrite(prompt, 1, plen, stdout);
    mge_rng r;
    mge_rng_seed(&r, o->seed);
    for (long step = 0; step < o->n; step++) {
        int64_t t = (int64_t)len < P ? (int64_t)len : P, dims[2] = {1, t};
        if (tok->dims[1] > 0 && t < P) {   /* a fixed S takes exactly S tokens */
            cli_error(where, "--generate: the token input '%s' takes exactly %lld tokens: give a prompt of at "
                      "least that many bytes", tok->name, (long long)tok->dims[1]);
            goto done;
        }
        mge_tensor_free(&in);
        if (mge_tensor_alloc(&in, tok->dtype, 2, dims, &err)) {
            cli_mge_error(NULL, &err);
            goto done;
        }
        const unsigned char *src = ctx + len - (size_t)t;
        for (int64_t i = 0; i < t; i++) {
            if (tok->dtype == MGE_I32)
                ((int32_t *)in.data)[i] = src[i];
            else
                ((int64_t *)in.data)[i] = src[i];
        }
        const mge_tensor *ins[1] = {&in};
        if (mge_exec_run(e, ins, &err)) {
            cli_mge_error(where, &err);
            goto done;
        }
        const mge_tensor *y = mge_exec_result(e, 0);
        int ok = y->dtype == MGE_F32 && ((y->ndim == 3 && y->dims[0] == 1 && y->dims[1] == t) ||
                                         (y->ndim == 2 && y->dims[0] == t));
        int64_t V = ok ? y->dims[y->ndim - 1] : 0;
        if (!ok || V < 1 || V > 256) {
            char d[96];
            mge_shape_str(y->dtype, y->ndim, y->dims, d, sizeof d);
            cli_error(where, "--generate: the logits '%s' are %s for %lld tokens: expected f32 [1,%lld,V] (or "
                      "[%lld,V]) with V from 1 to 256 byte values", lname, d, (long long)t, (long long)t,
                      (long long)t);
            goto done;
        }
        const float *row = (const float *)y->data + (t - 1) * V;
        for (int64_t c = 0; c < V; c++)
            if (!isfinite(row[c])) {
                cli_error(where, "--generate: the logits '%s' hold %g (class %lld) at step %ld", lname,
                          (double)row[c], (long long)c, step);
                goto done;
            }
        int b = sample(row, (int)V, o, &r);
        ctx[len++] = (unsigned char)b;
        putchar(b);
        if (b == '\n')
            fflush(stdout);
    }
    if (cli_stdout_flush() == 0)
        rc = 0;
done:
    if (rc)
        fflush(stdout);
    free(ctx);
    mge_tensor_free(&in);
    mge_exec_free(e);
    mge_graph_free(g);
    return rc;
}
