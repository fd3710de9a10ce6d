/* mge-quant — post-training quantization: calibrate an f32 model on real
 * data and rewrite it to int8 (lib/quantize.c), or store its weights as
 * f16/bf16.
 *
 * int8: the model is first brought back to plain ops (strip-training,
 * fold-bn, fold-scale, unfuse: an -O2 model works), then run over the
 * calibration batches twice (ranges, then histograms for percentile and
 * entropy) with every intermediate value kept, then rewritten; the report
 * runs both models on the calibration batches and compares every int8
 * node's output with the f32 value it stands for. */
#include "cli.h"

#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void help(void)
{
    printf("Usage: %s [options] --calib DATA [MODEL|-]\n"
           "Quantize an f32 model (text form or .mge, e.g. the output of mge-opt -O2)\n"
           "to int8 after calibrating it on DATA, and write the .mge.\n"
           "\n"
           "  -o, --output FILE   write to FILE (default: stdout)\n"
           "      --calib DATA    calibration data: an NPY tensor stream, .npz, a tar/zip of\n"
           "                      NPY files, an IDX file, fashion-mnist[:test] or an IDX directory\n"
           "      --method M      activation ranges: minmax, percentile or entropy\n"
           "                      (KL divergence, as TensorRT's calibrator; default percentile)\n"
           "      --percentile P  percentile for --method percentile (default 99.99)\n"
           "      --per-tensor    one weight scale per tensor (default: per output channel)\n"
           "      --batches N     calibrate on the first N batches (default: all)\n"
           "      --batch-size B  calibration batch size (default 32)\n"
           "      --normalize M,S u8 images: (x/255 - M) / S, as given to mge-train\n"
           "      --dtype T       int8 (default), or f16/bf16: weights stored in that type\n"
           "                      and computed in f32 (no calibration needed)\n"
           "      --skip A,B      keep these nodes in f32\n"
           "      --int8-outputs  keep model outputs that int8 nodes write in qs8\n"
           "      --report FILE   write per-node scales and errors (SQNR, cosine) as JSON\n"
           "  -f, --force         write binary output to a terminal\n"
           "  -q, --quiet         only errors\n"
           "  -v, --verbose       decisions (nodes kept f32, quantize/dequantize inserted)\n"
           "                      and the per-node error table on stderr\n"
           "      --threads N     worker threads (1..256)\n"
           "      --device DEV    calibrate on DEV: cpu (default), sim, cuda[:N]\n"
           "  -h, --help          show this help and exit\n"
           "      --version       show the version and exit\n"
           "\n"
           "Exit status: 0 success, 1 failure, 2 usage error.\n"
           "\n"
           "Examples:\n"
           "  mge-quant net.mge --calib x.npy -o net.int8.mge   # int8, calibrated on NPY records\n"
           "  mge-quant net.mge --calib x.npy --method entropy --report r.json -o net.int8.mge\n"
           "  mge-quant net.mge --dtype f16 -o net.f16.mge     # f16 weights, no calibration\n",
           cli_prog);
}

enum {
    OPT_CALIB = CLI_OPT_FIRST_TOOL,
    OPT_METHOD,
    OPT_PERCENTILE,
    OPT_PER_TENSOR,
    OPT_BATCHES,
    OPT_BATCH_SIZE,
    OPT_NORMALIZE,
    OPT_DTYPE,
    OPT_SKIP,
    OPT_REPORT,
    OPT_INT8_OUT,
};

typedef struct qopts {
    const char *calib, *report, *out;
    mge_calib_method method;
    double percentile;
    int64_t batches, batch_size;
    mge_data_opts dopts;
    mge_dtype dtype;
    int threads, force;
    const char *device;
    mge_quant_opts q;
    char *skip_copy;
    const char **skip;
} qopts;

/* ---------------------------------------------------------------- calibration */

typedef struct calib {
    mge_dataset ds;
    mge_loader *loader;
    int nin;
    int *inputs;        /* graph inputs, executor order */
    int nobs;
    int *obs_value;     /* observed value per observer */
    int *obs_out;       /* executor output index, or -(input index) - 1 */
    mge_qobs **obs;
    int64_t nbatches;   /* used */
    int64_t samples;
} calib;

static void calib_free(calib *c)
{
    mge_loader_free(c->loader);
    mge_dataset_free(&c->ds);
    for (int i = 0; i < c->nobs; i++)
        mge_qobs_free(c->obs[i]);
    free(c->obs);
    free(c->obs_value);
    free(c->obs_out);
    free(c->inputs);
    memset(c, 0, sizeof *c);
}

static int progress_on(void)
{
    return cli_verbose >= 0 && isatty(2);
}

/* The calibration batches from the start: calib_start, then calib_next
 * until it returns 0 (no more) or -1 (an error, reported). */
static int calib_start(calib *c, const char *where)
{
    mge_error err;
    mge_error_clear(&err);
    if (mge_loader_start(c->loader, 0, 0, &err)) {
        cli_mge_error(where, &err);
        return -1;
    }
    return 0;
}

static int calib_next(calib *c, const mge_tensor *const **batch, const char *where)
{
    mge_error err;
    mge_error_clear(&err);
    mge_status s = mge_loader_next(c->loader, batch, &err);
    if (s == MGE_ERR_EOF)
        return 0;
    if (s) {
        cli_mge_error(where, &err);
        return -1;
    }
    return 1;
}

/* One pass over the batches: hist = 0 ranges, 1 histograms. */
static int calib_pass(calib *c, mge_exec *e, int hist, int npass, const char *where)
{
    mge_error err;
    mge_error_clear(&err);
    if (calib_start(c, where))
        return -1;
    int64_t total = mge_loader_batches(c->loader);
    if (c->nbatches && total > c->nbatches)
        total = c->nbatches;
    int64_t b = 0;
    const mge_tensor **argv = calloc((size_t)c->nin + 1, sizeof *argv);
    if (!argv) {
        cli_error(NULL, "out of memory");
        return -1;
    }
    for (; b < total; b++) {
        const mge_tensor *const *batch;
        int got = calib_next(c, &batch, where);
        if (got < 0) {
            free(argv);
            return -1;
        }
        if (!got)
            break;
        for (int i = 0; i < c->nin; i++)
            argv[i] = batch[i];
        if (mge_exec_run(e, argv, &err)) {
            cli_error(where, "calibration batch %lld: %s", (long long)b, err.msg);
            free(argv);
            return -1;
        }
        if (!hist)
            c->samples += batch[0]->ndim ? batch[0]->dims[0] : 1;
        for (int k = 0; k < c->nobs; k++) {
            const mge_tensor *t = c->obs_out[k] >= 0 ? mge_exec_result(e, c->obs_out[k]) : argv[-c->obs_out[k] - 1];
            int64_t n = mge_tensor_numel(t);
            if (hist)
                mge_qobs_hist(c->obs[k], t->data, n);
            else
                mge_qobs_range(c->obs[k], t->data, n);
        }
        if (progress_on())
            fprintf(stderr, "\r%s: calibrating: pass %d/%d, batch %lld/%lld", cli_prog, hist + 1, npass,
                    (long long)(b + 1), (long long)total);
    }
    if (progress_on())
        fprintf(stderr, "\r%*s\r", 60, "");
    free(argv);
    c->nbatches = b;
    return 0;
}

/* Calibrates g: lo/hi per value (NaN where not observed). */
static int calibrate(mge_graph *g, const qopts *o, const char *where, double *lo, double *hi, calib *c)
{
    mge_error err;
    mge_error_clear(&err);
    mge_exec *e = NULL;
    int rc = -1;
    int *outs = malloc(sizeof(int) * ((size_t)g->nvalues + 1));
    c->obs_value = malloc(sizeof(int) * ((size_t)g->nvalues + 1));
    c->obs_out = malloc(sizeof(int) * ((size_t)g->nvalues + 1));
    c->obs = calloc((size_t)g->nvalues + 1, sizeof *c->obs);
    if (!outs || !c->obs_value || !c->obs_out || !c->obs) {
        cli_error(NULL, "out of memory");
        goto done;
    }
    /* every f32 value a node writes is an output, so the executor keeps it */
    int nouts = 0;
    for (int v = 0; v < g->nvalues; v++)
        if (g->values[v].kind == MGE_VAL_NODE && g->values[v].dtype == MGE_F32)
            outs[nouts++] = v;
    mge_exec_opts eo = {0};
    eo.threads = o->threads;
    eo.device = o->device;
    eo.noutputs = nouts;
    eo.outputs = outs;
    if (!nouts) {
        cli_error(where, "the model computes nothing to quantize (no f32 node outputs)");
        goto done;
    }
    if (mge_exec_create(g, &eo, &e, &err)) {
        cli_mge_error(where, &err);
        goto done;
    }
    c->nin = mge_exec_ninputs(e);
    c->inputs = malloc(sizeof(int) * ((size_t)c->nin + 1));
    if (!c->inputs) {
        cli_error(NULL, "out of memory");
        goto done;
    }
    for (int i = 0; i < c->nin; i++)
        c->inputs[i] = mge_exec_input(e, i);
    const char *cw = cli_name(o->calib);
    if (cli_stdin_ready(o->calib, "calibration data", "give --calib FILE or redirect stdin"))
        goto done;
    if (mge_dataset_load(o->calib, &c->ds, &err)) {
        cli_mge_error(cw, &err);
        goto done;
    }
    /* before bind, which turns u8 into the inputs' float dtype */
    if (o->dopts.normalize) {
        int u8 = 0;
        for (int i = 0; i < c->ds.n; i++)
            u8 += c->ds.t[i].dtype == MGE_U8;
        if (!u8)
            cli_warn(cw, "--normalize has no effect: the calibration data has no u8 images (float data is used as "
                         "it is)");
    }
    if (mge_dataset_bind(&c->ds, g, c->nin, c->inputs, &o->dopts, &err)) {
        cli_mge_error(cw, &err);
        goto done;
    }
    if (c->ds.count <= 0) {
        cli_error(cw, "empty calibration set");
        goto done;
    }
    if (mge_loader_create(&c->ds, o->batch_size, 0, 0, 0, 1, &c->loader, &err)) {
        cli_mge_error(cw, &err);
        goto done;
    }
    for (int i = 0; i < c->nin; i++)
        if (g->values[c->inputs[i]].dtype == MGE_F32) {
            c->obs_value[c->nobs] = c->inputs[i];
            c->obs_out[c->nobs++] = -i - 1;
        }
    for (int k = 0; k < nouts; k++) {
        c->obs_value[c->nobs] = outs[k];
        c->obs_out[c->nobs++] = k;
    }
    for (int k = 0; k < c->nobs; k++)
        if (!(c->obs[k] = mge_qobs_new())) {
            cli_error(NULL, "out of memory");
            goto done;
        }
    c->nbatches = o->batches;
    int npass = mge_calib_needs_hist(o->method) ? 2 : 1;
    if (calib_pass(c, e, 0, npass, cw) || (npass == 2 && calib_pass(c, e, 1, npass, cw)))
        goto done;
    if (c->nbatches == 0) {
        cli_error(cw, "empty calibration set");
        goto done;
    }
    if (o->batches > c->nbatches)
        cli_warn(cw, "--batches %lld: the data has only %lld batch%s (%lld samples at --batch-size %lld), all used",
                 (long long)o->batches, (long long)c->nbatches, c->nbatches == 1 ? "" : "es", (long long)c->samples,
                 (long long)o->batch_size);
    for (int v = 0; v < g->nvalues; v++)
        lo[v] = hi[v] = NAN;
    for (int k = 0; k < c->nobs; k++) {
        int v = c->obs_value[k];
        double a, b;
        if (mge_qobs_count(c->obs[k]) == 0)
            continue;
        if (mge_qobs_nonfinite(c->obs[k]))
            cli_warn(cw, "'%s' had %lld non-finite values during calibration", g->values[v].name,
                     (long long)mge_qobs_nonfinite(c->obs[k]));
        if (mge_qobs_choose(c->obs[k], o->method, o->percentile, &a, &b, &err)) {
            cli_error(cw, "'%s': %s", g->values[v].name, err.msg);
            goto done;
        }
        lo[v] = a;
        hi[v] = b;
    }
    cli_note(cw, "calibrated on %lld samples in %lld batches", (long long)c->samples, (long long)c->nbatches);
    rc = 0;
done:
    mge_exec_free(e);
    free(outs);
    return rc;
}

/* ---------------------------------------------------------------- report */

typedef struct errsum {
    double ss_ref, ss_err, dot, ss_q;
} errsum;

static double sqnr_db(const errsum *s)
{
    if (s->ss_err <= 0)
        return INFINITY;
    return 10.0 * log10(s->ss_ref / s->ss_err);
}

static double cosine(const errsum *s)
{
    if (s->ss_ref <= 0 || s->ss_q <= 0)
        return s->ss_ref == s->ss_q ? 1.0 : 0.0;
    return s->dot / sqrt(s->ss_ref * s->ss_q);
}

static void accumulate(errsum *s, const mge_tensor *ref, const mge_tensor *q, double scale, int zero)
{
    int64_t n = mge_tensor_numel(ref);
    if (mge_tensor_numel(q) != n)
        return;
    const float *r = ref->data;
    for (int64_t i = 0; i < n; i++) {
        double d = q->dtype == MGE_QS8 ? ((double)((const int8_t *)q->data)[i] - zero) * scale
                                       : (double)((const float *)q->data)[i];
        double f = r[i];
        s->ss_ref += f * f;
        s->ss_q += d * d;
        s->dot += f * d;
        s->ss_err += (f - d) * (f - d);
    }
}

static void json_num(mge_buf *b, double v)
{
    if (isfinite(v))
        mge_buf_printf(b, "%.6g", v);
    else
        mge_buf_printf(b, "null");
}

/* Runs the f32 and int8 models over the calibration batches and compares. */
static int report(const mge_graph *g, const mge_graph *qg, const mge_quant_result *res, calib *c, const qopts *o,
                  const char *where, double fsize, double qsize)
{
    mge_error err;
    mge_error_clear(&err);
    int rc = -1, n = res->n, nout = g->noutputs;
    mge_exec *ef = NULL, *eq = NULL;
    int *fo = malloc(sizeof(int) * (size_t)(n + nout + 1)), *qo = malloc(sizeof(int) * (size_t)(n + nout + 1));
    errsum *es = calloc((size_t)(n + nout + 1), sizeof *es);
    const mge_tensor **fin = calloc((size_t)c->nin + 1, sizeof *fin), **qin = calloc((size_t)c->nin + 1, sizeof *qin);
    int *qmap = malloc(sizeof(int) * ((size_t)c->nin + 1));
    mge_buf b = {0};
    if (!fo || !qo || !es || !fin || !qin || !qmap) {
        cli_error(NULL, "out of memory");
        goto done;
    }
    for (int i = 0; i < n; i++) {
        fo[i] = res->e[i].ref_value;
        qo[i] = mge_graph_find(qg, res->e[i].value);
    }
    for (int i = 0; i < nout; i++) {
        fo[n + i] = g->outputs[i];
        qo[n + i] = mge_graph_find(qg, g->values[g->outputs[i]].name);
        if (qo[n + i] < 0) {
            cli_error(where, "the int8 model lost output '%s'", g->values[g->outputs[i]].name);
            goto done;
        }
    }
    mge_exec_opts eo = {0};
    eo.threads = o->threads;
    eo.noutputs = n + nout;
    eo.outputs = fo;
    if (mge_exec_create(g, &eo, &ef, &err)) {
        cli_mge_error(where, &err);
        goto done;
    }
    eo.outputs = qo;
    eo.preprocess = 1;
    if (mge_exec_create(qg, &eo, &eq, &err)) {
        cli_mge_error(where, &err);
        goto done;
    }
    /* the int8 model's inputs by name among the calibration inputs */
    for (int i = 0; i < mge_exec_ninputs(eq); i++) {
        qmap[i] = -1;
        const char *nm = qg->values[mge_exec_input(eq, i)].name;
        for (int k = 0; k < c->nin; k++)
            if (strcmp(g->values[c->inputs[k]].name, nm) == 0)
                qmap[i] = k;
        if (qmap[i] < 0) {
            cli_error(where, "the int8 model needs input '%s' that the f32 model did not", nm);
            goto done;
        }
    }
    if (calib_start(c, where))
        goto done;
    for (int64_t bi = 0; bi < c->nbatches; bi++) {
        const mge_tensor *const *batch;
        int got = calib_next(c, &batch, where);
        if (got < 0)
            goto done;
        if (!got)
            break;
        for (int i = 0; i < c->nin; i++)
            fin[i] = batch[i];
        for (int i = 0; i < mge_exec_ninputs(eq); i++)
            qin[i] = batch[qmap[i]];
        if (mge_exec_run(ef, fin, &err) || mge_exec_run(eq, qin, &err)) {
            cli_error(where, "report: batch %lld: %s", (long long)bi, err.msg);
            goto done;
        }
        for (int i = 0; i < n + nout; i++)
            accumulate(&es[i], mge_exec_result(ef, i), mge_exec_result(eq, i), i < n ? res->e[i].scale : 1,
                       i < n ? res->e[i].zero : 0);
    }
    if (cli_verbose > 0) {
        fprintf(stderr, "%-28s %-15s %11s %5s %23s %9s %8s\n", "node", "op", "scale", "zero", "weight scales",
                "SQNR dB", "cosine");
        for (int i = 0; i < n; i++) {
            const mge_quant_entry *e = &res->e[i];
            char ws[48] = "";
            if (e->wscale_max > 0)
                snprintf(ws, sizeof ws, "%.3g..%.3g", e->wscale_min, e->wscale_max);
            fprintf(stderr, "%-28s %-15s %11.4g %5d %23s %9.2f %8.5f\n", e->node, mge_op_info(e->op)->name, e->scale,
                    e->zero, ws, sqnr_db(&es[i]), cosine(&es[i]));
        }
        for (int i = 0; i < nout; i++)
            fprintf(stderr, "output %-21s %-15s %11s %5s %23s %9.2f %8.5f\n", g->values[g->outputs[i]].name, "", "",
                    "", "", sqnr_db(&es[n + i]), cosine(&es[n + i]));
        fprintf(stderr, "size: %.0f bytes f32 -> %.0f bytes int8 (%.3fx)\n", fsize, qsize, qsize / fsize);
    }
    if (o->report) {
        mge_buf_printf(&b, "{\n  \"method\": ");
        cli_json_str(&b, o->method == MGE_CALIB_MINMAX ? "minmax" : o->method == MGE_CALIB_ENTROPY ? "entropy"
                                                                                                     : "percentile");
        mge_buf_printf(&b, ",\n  \"percentile\": %g,\n  \"per_tensor\": %s,\n  \"batches\": %lld,\n  \"samples\": %lld,\n",
                       o->percentile, o->q.per_tensor ? "true" : "false", (long long)c->nbatches,
                       (long long)c->samples);
        mge_buf_printf(&b, "  \"size_f32\": %.0f,\n  \"size_int8\": %.0f,\n  \"nodes\": [", fsize, qsize);
        for (int i = 0; i < n; i++) {
            const mge_quant_entry *e = &res->e[i];
            mge_buf_printf(&b, "%s\n    {\"name\": ", i ? "," : "");
            cli_json_str(&b, e->node);
            mge_buf_printf(&b, ", \"op\": ");
            cli_json_str(&b, mge_op_info(e->op)->name);
            mge_buf_printf(&b, ", \"value\": ");
            cli_json_str(&b, e->value);
            mge_buf_printf(&b, ", \"scale\": %.9g, \"zero\": %d", e->scale, e->zero);
            if (e->wscale_max > 0)
                mge_buf_printf(&b, ", \"weight_scale_min\": %.9g, \"weight_scale_max\": %.9g", e->wscale_min,
                               e->wscale_max);
            mge_buf_printf(&b, ", \"sqnr_db\": ");
            json_num(&b, sqnr_db(&es[i]));
            mge_buf_printf(&b, ", \"cosine\": ");
            json_num(&b, cosine(&es[i]));
            mge_buf_printf(&b, "}");
        }
        mge_buf_printf(&b, "\n  ],\n  \"outputs\": [");
        for (int i = 0; i < nout; i++) {
            mge_buf_printf(&b, "%s\n    {\"name\": ", i ? "," : "");
            cli_json_str(&b, g->values[g->outputs[i]].name);
            mge_buf_printf(&b, ", \"sqnr_db\": ");
            json_num(&b, sqnr_db(&es[n + i]));
            mge_buf_printf(&b, ", \"cosine\": ");
            json_num(&b, cosine(&es[n + i]));
            mge_buf_printf(&b, "}");
        }
        mge_buf_printf(&b, "\n  ]\n}\n");
        if (b.failed) {
            cli_error(NULL, "out of memory");
            goto done;
        }
        if (cli_write_buf(o->report, &b, 0, 1))
            goto done;
    }
    rc = 0;
done:
    mge_buf_free(&b);
    mge_exec_free(ef);
    mge_exec_free(eq);
    free(fo);
    free(qo);
    free(es);
    free(fin);
    free(qin);
    free(qmap);
    return rc;
}

/* ---------------------------------------------------------------- the loss */

/* The f32 model's loss node (e.g. cross_entropy(logits, label)), remembered
 * before strip-training drops it, so the int8 model gets it back and
 * `mge-run --accuracy` and mge-train's evaluation work on it as on the
 * f32 model. Calibration never needs the labels. */
typedef struct saved_loss {
    int have;
    char *node, *out;
    int op, nin, nattr;
    mge_attr attrs[16];
    char *in[8];
    int in_input[8];            /* 1: a graph input (the labels) */
    mge_dtype in_dt[8];
    int in_ndim[8];
    int64_t in_dims[8][MGE_MAX_DIMS];
} saved_loss;

static void loss_save(const mge_graph *g, saved_loss *l)
{
    memset(l, 0, sizeof *l);
    if (g->loss < 0 || g->values[g->loss].kind != MGE_VAL_NODE)
        return;
    const mge_node *n = &g->nodes[g->values[g->loss].producer];
    if (n->nin > 8 || n->nattr > 16 || n->nout != 1)
        return;
    l->node = strdup(n->name);
    l->out = strdup(g->values[g->loss].name);
    l->op = n->op;
    l->nin = n->nin;
    l->nattr = n->nattr;
    memcpy(l->attrs, n->attrs, sizeof(mge_attr) * (size_t)n->nattr);
    for (int k = 0; k < n->nin; k++) {
        const mge_value *v = &g->values[n->in[k]];
        l->in[k] = strdup(v->name);
        l->in_input[k] = v->kind == MGE_VAL_INPUT;
        l->in_dt[k] = v->dtype;
        l->in_ndim[k] = v->ndim;
        memcpy(l->in_dims[k], v->dims, sizeof(int64_t) * (size_t)v->ndim);
    }
    l->have = 1;
}

static void loss_free(saved_loss *l)
{
    free(l->node);
    free(l->out);
    for (int k = 0; k < 8; k++)
        free(l->in[k]);
    memset(l, 0, sizeof *l);
}

/* Puts the loss back into qg: its inputs by name (labels as new inputs). */
static void loss_restore(mge_graph *qg, const saved_loss *l, const char *where)
{
    if (!l->have || !l->node || !l->out)
        return;
    mge_error err;
    mge_error_clear(&err);
    int in[8];
    for (int k = 0; k < l->nin; k++) {
        if (!l->in[k])
            return;
        in[k] = mge_graph_find(qg, l->in[k]);
        if (in[k] < 0 && l->in_input[k])
            in[k] = mge_graph_add_value(qg, l->in[k], MGE_VAL_INPUT, l->in_dt[k], l->in_ndim[k], l->in_dims[k], &err);
        if (in[k] < 0 || qg->values[in[k]].dtype == MGE_QS8) {
            cli_warn(where, "the int8 model has no loss (its input '%s' is not an f32 value there)", l->in[k]);
            return;
        }
    }
    const char *outs[1] = {l->out};
    int nd = mge_graph_add_node(qg, l->node, l->op, l->nin, in, l->nattr, l->attrs, 1, outs, &err);
    if (nd < 0) {
        cli_warn(where, "the int8 model has no loss: %s", err.msg);
        return;
    }
    qg->loss = qg->nodes[nd].out[0];
}

/* ---------------------------------------------------------------- main */

static int split_skip(qopts *o, const char *arg)
{
    if (!*arg || arg[0] == ',' || arg[strlen(arg) - 1] == ',' || strstr(arg, ",,"))
        cli_usage("--skip: empty node name in '%s'", arg);
    o->skip_copy = strdup(arg);
    int cap = 1;
    for (const char *p = arg; *p; p++)
        cap += *p == ',';
    o->skip = malloc(sizeof *o->skip * (size_t)cap);
    if (!o->skip_copy || !o->skip)
        return -1;
    int n = 0;
    for (char *tok = o->skip_copy, *save = NULL;; tok = NULL) {
        char *name = strtok_r(tok, ",", &save);
        if (!name)
            break;
        o->skip[n++] = name;
    }
    o->q.skip = o->skip;
    o->q.nskip = n;
    return 0;
}

/* Params with a value, by their dtype: what --dtype f16/bf16 converted. */
typedef struct wcount {
    int f32, f16, bf16;
} wcount;

static wcount count_weights(const mge_graph *g)
{
    wcount c = {0, 0, 0};
    for (int v = 0; v < g->nvalues; v++) {
        const mge_value *x = &g->values[v];
        if (x->kind != MGE_VAL_PARAM || !x->data)
            continue;
        c.f32 += x->dtype == MGE_F32;
        c.f16 += x->dtype == MGE_F16;
        c.bf16 += x->dtype == MGE_BF16;
    }
    return c;
}

/* Says what --dtype did, and warns when it could do nothing. */
static void half_report(const wcount *b, const wcount *a, mge_dtype dt, const char *where)
{
    const char *name = mge_dtype_name(dt), *other = dt == MGE_F16 ? "bf16" : "f16";
    int from32 = b->f32 - a->f32;
    int fromh = dt == MGE_F16 ? b->bf16 - a->bf16 : b->f16 - a->f16;
    int had = dt == MGE_F16 ? b->f16 : b->bf16;
    if (from32 + fromh == 0) {
        if (had)
            cli_warn(where, "--dtype %s: nothing to convert: the weights are already %s", name, name);
        else
            cli_warn(where, "--dtype %s: nothing to convert: no conv2d or linear weight is f32 or %s", name, other);
        return;
    }
    if (from32)
        cli_note(where, "%d f32 weights stored as %s", from32, name);
    if (fromh)
        cli_note(where, "%d %s weights converted to %s (through f32: %s)", fromh, other, name,
                 dt == MGE_BF16 ? "bf16 keeps 8 significant bits of f16's 11"
                                : "exact where f16 is normal, above 6.1e-5");
}

static double model_bytes(const mge_graph *g)
{
    mge_buf b = {0};
    mge_error err;
    mge_write_opts wo = {0};
    double n = mge_file_write(g, &wo, &b, &err) ? 0 : (double)b.n;
    mge_buf_free(&b);
    return n;
}

int main(int argc, char **argv)
{
    cli_init("mge-quant", argv);
    static const struct option longs[] = {
        CLI_LONG_COMMON,
        {"output", 1, 0, 'o'},
        {"calib", 1, 0, OPT_CALIB},
        {"method", 1, 0, OPT_METHOD},
        {"percentile", 1, 0, OPT_PERCENTILE},
        {"per-tensor", 0, 0, OPT_PER_TENSOR},
        {"batches", 1, 0, OPT_BATCHES},
        {"batch-size", 1, 0, OPT_BATCH_SIZE},
        {"normalize", 1, 0, OPT_NORMALIZE},
        {"dtype", 1, 0, OPT_DTYPE},
        {"skip", 1, 0, OPT_SKIP},
        {"report", 1, 0, OPT_REPORT},
        {"int8-outputs", 0, 0, OPT_INT8_OUT},
        {0, 0, 0, 0},
    };
    cli_common co = {0};
    qopts o;
    memset(&o, 0, sizeof o);
    o.method = MGE_CALIB_PERCENTILE;
    o.percentile = 99.99;
    o.batch_size = 32;
    o.dtype = MGE_QS8;
    int method_given = 0, percentile_given = 0, batch_size_given = 0;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":o:fqvh", longs, NULL)) != -1) {
        switch (c) {
        case 'o': o.out = optarg; break;
        case OPT_CALIB: o.calib = optarg; break;
        case OPT_METHOD:
            if (!mge_calib_parse(optarg, &o.method))
                cli_usage("--method %s: expected minmax, percentile or entropy", optarg);
            method_given = 1;
            break;
        case OPT_PERCENTILE:
            o.percentile = cli_double("--percentile", optarg, 50);
            if (!(o.percentile > 50 && o.percentile <= 100))
                cli_usage("--percentile %s: expected a number in (50, 100]", optarg);
            percentile_given = 1;
            break;
        case OPT_PER_TENSOR: o.q.per_tensor = 1; break;
        case OPT_BATCHES: o.batches = cli_long("--batches", optarg, 1, 1L << 40); break;
        case OPT_BATCH_SIZE:
            o.batch_size = cli_long("--batch-size", optarg, 1, 1L << 20);
            batch_size_given = 1;
            break;
        case OPT_NORMALIZE: {
            double m, s;
            cli_double_pair("--normalize", optarg, &m, &s);
            if (!(s > 0))
                cli_usage("--normalize %s: the standard deviation must be positive", optarg);
            o.dopts.normalize = 1;
            o.dopts.mean = (float)m;
            o.dopts.std = (float)s;
            break;
        }
        case OPT_DTYPE:
            if (strcmp(optarg, "int8") == 0)
                o.dtype = MGE_QS8;
            else if (strcmp(optarg, "f16") == 0)
                o.dtype = MGE_F16;
            else if (strcmp(optarg, "bf16") == 0)
                o.dtype = MGE_BF16;
            else
                cli_usage("--dtype %s: expected int8, f16 or bf16", optarg);
            break;
        case OPT_SKIP:
            if (o.skip)
                cli_usage("--skip given twice: give one comma-separated list");
            if (split_skip(&o, optarg)) {
                cli_error(NULL, "out of memory");
                return 1;
            }
            break;
        case OPT_REPORT: o.report = optarg; break;
        case OPT_INT8_OUT: o.q.int8_outputs = 1; break;
        default:
            if (!cli_common_opt(c, optarg, &co, help))
                cli_usage("unhandled option");
        }
    }
    if (argc - optind > 1)
        cli_usage("too many arguments (one model at most)");
    cli_check_device(co.device);
    if (percentile_given && o.method != MGE_CALIB_PERCENTILE)
        cli_usage("--percentile only applies to --method percentile");
    if (o.dtype != MGE_QS8) {
        /* every option of calibration and the int8 rewrite, named when given */
        const char *int8_only = o.calib ? "--calib" : method_given ? "--method" : percentile_given ? "--percentile"
                              : o.skip ? "--skip" : o.report ? "--report" : o.q.per_tensor ? "--per-tensor"
                              : o.batches ? "--batches" : batch_size_given ? "--batch-size"
                              : o.dopts.normalize ? "--normalize" : o.q.int8_outputs ? "--int8-outputs" : NULL;
        if (int8_only)
            cli_usage("%s applies to int8 only: --dtype %s stores the weights without calibration", int8_only,
                      mge_dtype_name(o.dtype));
    }
    if (o.dtype == MGE_QS8 && !o.calib)
        cli_usage("no calibration data: give --calib DATA");
    const char *in = optind < argc ? argv[optind] : "-";
    if (o.calib && strcmp(o.calib, "-") == 0 && strcmp(in, "-") == 0)
        cli_usage("the model and --calib cannot both be standard input");
    if (o.report && o.out && strcmp(o.report, o.out) == 0)
        cli_usage("--report and -o name the same file");
    o.threads = cli_threads(&co);
    o.device = co.device;
    o.force = co.force;
    const char *where = cli_name(in);

    mge_error err;
    mge_error_clear(&err);
    mge_graph *g = NULL, *qg = NULL;
    double *lo = NULL, *hi = NULL;
    calib cal;
    memset(&cal, 0, sizeof cal);
    saved_loss loss;
    memset(&loss, 0, sizeof loss);
    mge_buf qbuf = {0};
    mge_quant_result res;
    memset(&res, 0, sizeof res);
    int rc = 1;
    if (cli_model_load(in, &g))
        goto done;
    const char *what = NULL;
    if (mge_quant_is_quantized(g, &what)) {
        cli_error(where, "the model is already quantized ('%s' is int8): quantize the f32 model", what);
        goto done;
    }
    for (int v = 0; v < g->nvalues; v++) {
        const mge_value *x = &g->values[v];
        if ((x->kind == MGE_VAL_PARAM || x->kind == MGE_VAL_STATE) && !x->data) {
            cli_error(where, "parameter '%s' has no value: quantize a trained model (.mge, or text with weights)",
                      x->name);
            goto done;
        }
    }
    loss_save(g, &loss);
    if (o.dtype != MGE_QS8) {
        /* the inference model, as for int8, with its weights in f16/bf16 */
        wcount before = count_weights(g);
        if (mge_passes_run_list(&g, o.dtype == MGE_F16 ? "strip-training,fold-bn,fold-scale,cse,fold-constants,dce,"
                                                         "f16-weights"
                                                       : "strip-training,fold-bn,fold-scale,cse,fold-constants,dce,"
                                                         "bf16-weights",
                                NULL, &err)) {
            cli_mge_error(where, &err);
            goto done;
        }
        qg = g;
        g = NULL;
        wcount after = count_weights(qg);
        half_report(&before, &after, o.dtype, where);
        loss_restore(qg, &loss, where);
    } else {
        /* plain ops, every intermediate a named value (an -O2 model works) */
        const char *canon = mge_pass_find("unfuse") ? "strip-training,fold-bn,fold-scale,unfuse,cse,fold-constants,dce"
                                                    : "strip-training,fold-bn,fold-scale,cse,fold-constants,dce";
        if (mge_passes_run_list(&g, canon, NULL, &err)) {
            cli_mge_error(where, &err);
            goto done;
        }
        int quantizable = 0;
        for (int i = 0; i < g->nnodes; i++) {
            int op = g->nodes[i].op;
            quantizable += op == MGE_OP_CONV2D || op == MGE_OP_LINEAR || op == MGE_OP_ADD;
        }
        /* still calibrated: the data is checked against the model, and --report compares the outputs */
        if (!quantizable)
            cli_warn(where, "nothing to quantize: the model has no conv2d, linear or add, so it stays f32 "
                            "(--dtype f16 or bf16 stores weights in half precision)");
        lo = malloc(sizeof(double) * ((size_t)g->nvalues + 1));
        hi = malloc(sizeof(double) * ((size_t)g->nvalues + 1));
        if (!lo || !hi) {
            cli_error(NULL, "out of memory");
            goto done;
        }
        if (calibrate(g, &o, where, lo, hi, &cal))
            goto done;
        if (mge_quant_rewrite(g, lo, hi, &o.q, &qg, &res, &err)) {
            cli_mge_error(where, &err);
            goto done;
        }
        if (cli_verbose > 0 && res.log.n) {
            char *s = res.log.p, *end = res.log.p + res.log.n;
            while (s < end) {
                char *nl = memchr(s, '\n', (size_t)(end - s));
                int len = (int)(nl ? nl - s : end - s);
                cli_note(where, "%.*s", len, s);
                s += len + 1;
            }
        }
        int nq = 0;
        for (int i = 0; i < qg->nnodes; i++) {
            int op = qg->nodes[i].op;
            nq += op == MGE_OP_QCONV2D || op == MGE_OP_QLINEAR || op == MGE_OP_QADD;
        }
        if (!nq && quantizable)
            cli_warn(where, "no node was quantized (each conv2d, linear and add is in --skip or was not reached "
                            "by calibration)");
        int nqw = 0, nqout = 0;
        for (int i = 0; i < qg->nnodes; i++)
            nqw += qg->nodes[i].op == MGE_OP_QCONV2D || qg->nodes[i].op == MGE_OP_QLINEAR;
        for (int i = 0; i < qg->noutputs; i++)
            nqout += qg->values[qg->outputs[i]].dtype == MGE_QS8;
        if (o.q.per_tensor && !nqw)
            cli_warn(where, "--per-tensor has no effect: no conv2d or linear weight was quantized");
        if (o.q.int8_outputs && !nqout)
            cli_warn(where, "--int8-outputs has no effect: no model output is written by an int8 node");
        loss_restore(qg, &loss, where);
    }
    /* serialized once: the report's size is the file's */
    mge_write_opts wo = {0};
    if (mge_file_write(qg, &wo, &qbuf, &err)) {
        cli_mge_error(where, &err);
        goto done;
    }
    if (g && (cli_verbose > 0 || o.report) &&
        report(g, qg, &res, &cal, &o, where, model_bytes(g), (double)qbuf.n))
        goto done;
    rc = cli_write_buf(o.out, &qbuf, 1, o.force) ? 1 : 0;
done:
    mge_buf_free(&qbuf);
    calib_free(&cal);
    loss_free(&loss);
    mge_quant_result_free(&res);
    free(lo);
    free(hi);
    free(o.skip);
    free(o.skip_copy);
    mge_graph_free(g);
    mge_graph_free(qg);
    return rc;
}
