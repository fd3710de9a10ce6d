/* mge-opt — read a model (text or .mge), bind weights, run graph passes,
 * write .mge (or the text form with -S, or ONNX with --emit onnx). With no passes it is the assembler.
 *
 * The passes run one at a time (for --time-passes, --print-after-all and the
 * -v no-op notes); --verify runs the model before and after on the same
 * inputs and compares every output by name. */
#include "cli.h"
#include "inputs.h"
#include "weights.h"

#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void help(void)
{
    printf("Usage: %s [options] [FILE|-]\n"
           "Read a model (text form or .mge), optionally bind weights and run graph\n"
           "passes, and write it as .mge (or as text with -S, or as ONNX).\n"
           "\n"
           "  -o FILE             write to FILE (default: stdout); FILE.onnx implies --emit onnx\n"
           "  -S, --text          write the text form instead of .mge (--emit text)\n"
           "      --emit FMT      what to write: mge (default), text, or onnx (opset 17:\n"
           "                      the inference graph; a model with a loss loses it)\n"
           "      --weights W.npz bind parameter values by name (all must match)\n"
           "      --bind NAME=FILE.npy  an ONNX model: specialize it on input NAME's value\n"
           "                      (shape-like operands computed from it fold; repeat)\n"
           "      --allow-unused  entries of --weights the model has no value for are\n"
           "                      listed as a warning, not an error\n"
           "      --seed S        seed for parameters without values and random\n"
           "                      --verify inputs (default 0)\n"
           "  -O0 -O1 -O2 -O3     pass presets (-O0: none; -O3 adds bf16 where the CPU has AMX)\n"
           "      --precision P   f32 or bf16: dense convolutions, linear, matmul and attention\n"
           "                      compute in P (bf16: bf16 products, f32 sums, f32 in and out;\n"
           "                      on AMX or AVX512-BF16, else in f32), before the passes run\n"
           "      --keep-f32 A,B  with --precision bf16: these nodes stay f32\n"
           "      --passes=A,B    run these passes, in order\n"
           "      --list-passes   list the passes and presets, then exit\n"
           "      --verify        run the model before and after the passes and fail\n"
           "                      when an output differs beyond the tolerances\n"
           "      --atol A        absolute tolerance for --verify (default 1e-5)\n"
           "      --rtol R        relative tolerance for --verify (default 1e-4)\n"
           "                      (with bf16 layers: atol 2e-2 x max|output|, rtol 2e-2)\n"
           "      --batch B       batch of the random --verify inputs (default 2)\n"
           "      --shape NAME=D  shape of a random --verify input (e.g. x=2x3x32x32), and the\n"
           "                      shape the passes optimize for (metadata opt.shape)\n"
           "      --input FILE    --verify on these inputs (NPY stream, one record each)\n"
           "      --time-passes   print each pass's time and node counts on stderr\n"
           "      --print-after-all  print the text form after each pass on stderr\n"
           "  -f, --force         write binary output to a terminal\n"
           "  -q, --quiet         only errors\n"
           "  -v, --verbose       more detail on stderr (passes that change nothing)\n"
           "      --threads N     worker threads for --verify (1..256)\n"
           "      --device DEV    run the optimized model of --verify on DEV: cpu, sim, cuda[:N]\n"
           "  -h, --help          show this help and exit\n"
           "      --version       show the version and exit\n"
           "\n"
           "Exit status: 0 success, 1 failure (also a failed --verify), 2 usage error.\n"
           "\n"
           "Examples:\n"
           "  mge-opt net.mgt -o net.mge                     # assemble text into .mge\n"
           "  mge-opt net.mgt --weights w.npz -O2 --precision bf16 --keep-f32 fc2 --verify -o net.mge  # bf16 but fc2\n"
           "  mge-opt -O2 net.mge -o net.onnx                # optimize, then export to ONNX\n", cli_prog);
}

static void list_passes(void)
{
    for (int i = 0; i < mge_pass_count(); i++) {
        const mge_pass *p = mge_pass_get(i);
        printf("%-16s %s\n", p->name, p->summary);
    }
    for (int l = 0; l <= 3; l++) {
        const char *pre = mge_pass_preset(l);
        printf("-O%d%*s %s\n", l, 13, "", pre && *pre ? pre : "(no passes)");
    }
}

/* Splits a comma-separated pass list (already checked: no empty items) into
 * names pointing into *copy. Returns the count, or -1 when out of memory. */
static int split_passes(const char *list, char **copy, const char ***names)
{
    *copy = strdup(list);
    int cap = 1;
    for (const char *p = list; *p; p++)
        cap += *p == ',';
    *names = malloc(sizeof **names * (size_t)cap);
    if (!*copy || !*names)
        return -1;
    int n = 0;
    for (char *tok = *copy, *save = NULL;; tok = NULL) {
        char *name = strtok_r(tok, ",", &save);
        if (!name)
            break;
        (*names)[n++] = name;
    }
    return n;
}

/* ---------------------------------------------------------------- --verify */

typedef struct verify_opts {
    double atol, rtol;
    int scale_atol;         /* atol is relative to each output's max |ref| (bf16 defaults) */
    int64_t batch;          /* 0: not given */
    bench_shapes shapes;
    const char *input;      /* NPY stream, or NULL for random inputs */
    uint64_t seed;
    int threads;
    const char *device;     /* where --verify runs the optimized model */
} verify_opts;

/* What the model computed before the passes, by name: the graph may be
 * replaced by the passes, so nothing here points into it. */
typedef struct verify_ref {
    bench_inputs in;
    char **in_names;
    int nout;
    char **out_names;
    mge_tensor *out;
} verify_ref;

static void verify_ref_free(verify_ref *r)
{
    for (int i = 0; r->in_names && i < r->in.n; i++)
        free(r->in_names[i]);
    free(r->in_names);
    bench_inputs_free(&r->in);
    for (int i = 0; i < r->nout; i++) {
        if (r->out_names)
            free(r->out_names[i]);
        if (r->out)
            mge_tensor_free(&r->out[i]);
    }
    free(r->out_names);
    free(r->out);
    memset(r, 0, sizeof *r);
}

static int has_n(const mge_value *v)
{
    for (int k = 0; k < v->ndim; k++)
        if (v->dims[k] == MGE_DIM_N)
            return 1;
    return 0;
}

/* Records the binding --shape gives as the metadata opt.shape ("N=1,H=224"):
 * passes that choose by size (winograd, layout) evaluate symbolic dims there. */
static int set_opt_shape(mge_graph *g, const char *where, const bench_shapes *sh)
{
    mge_binding b = {0};
    const char *src[MGE_MAX_SYMS];
    for (int i = 0; i < sh->n; i++) {
        int v = mge_graph_find(g, sh->s[i].name);
        if (v < 0 || g->values[v].kind != MGE_VAL_INPUT) {
            cli_error(where, "--shape %s: the model has no input named '%s'", sh->s[i].arg, sh->s[i].name);
            return -1;
        }
        const mge_value *val = &g->values[v];
        char want[160], why[256];
        if (bench_bind_dims(val, sh->s[i].ndim, sh->s[i].dims, &b, src, sh->s[i].arg, why, sizeof why)) {
            cli_error(where, "--shape %s does not fit input '%s' %s: %s", sh->s[i].arg, val->name,
                      mge_shape_str(val->dtype, val->ndim, val->dims, want, sizeof want), why);
            return -1;
        }
    }
    char bs[512];
    mge_error err;
    if (b.n && mge_graph_set_meta(g, "opt.shape", mge_binding_str(&b, bs, sizeof bs), &err)) {
        cli_mge_error(where, &err);
        return -1;
    }
    return 0;
}

/* Runs g (inference) on random or --input inputs and keeps inputs and outputs. */
static int verify_before(const mge_graph *g, const char *where, const verify_opts *o, verify_ref *r)
{
    mge_error err;
    mge_error_clear(&err);
    memset(r, 0, sizeof *r);
    mge_exec_opts eo = {0};
    eo.threads = o->threads;
    mge_exec *e = NULL;
    int rc = -1;
    if (mge_exec_create(g, &eo, &e, &err)) {
        cli_error(where, "--verify: the model before the passes: %s", err.msg);
        return -1;
    }
    int nin = mge_exec_ninputs(e);
    int *ins = malloc(sizeof(int) * (size_t)(nin + 1));
    if (!ins) {
        cli_error(NULL, "out of memory");
        goto done;
    }
    for (int i = 0; i < nin; i++)
        ins[i] = mge_exec_input(e, i);
    /* Random inputs default to batch 2 (a batch of 1 hides mixed-up batch
     * rows), unless a --shape of a batched input sets it. */
    int64_t batch = o->batch;
    if (!batch && !o->input) {
        batch = 2;
        for (int i = 0; i < o->shapes.n; i++) {
            int v = mge_graph_find(g, o->shapes.s[i].name);
            if (v >= 0 && g->values[v].kind == MGE_VAL_INPUT && has_n(&g->values[v]))
                batch = 0;
        }
    }
    if (bench_inputs_make(g, where, nin, ins, &o->shapes, batch, o->input, o->seed, &r->in))
        goto done;
    r->in_names = calloc((size_t)nin + 1, sizeof *r->in_names);
    if (!r->in_names) {
        cli_error(NULL, "out of memory");
        goto done;
    }
    for (int i = 0; i < nin; i++)
        if (!(r->in_names[i] = strdup(g->values[ins[i]].name))) {
            cli_error(NULL, "out of memory");
            goto done;
        }
    if (mge_exec_run(e, r->in.ptr, &err)) {
        cli_error(o->input ? cli_name(o->input) : where, "--verify: the model before the passes: %s", err.msg);
        goto done;
    }
    int nout = mge_exec_noutputs(e);
    r->out_names = calloc((size_t)nout + 1, sizeof *r->out_names);
    r->out = calloc((size_t)nout + 1, sizeof *r->out);
    if (!r->out_names || !r->out) {
        cli_error(NULL, "out of memory");
        goto done;
    }
    for (int i = 0; i < nout; i++) {
        r->nout = i + 1;
        if (!(r->out_names[i] = strdup(g->values[mge_exec_output(e, i)].name))) {
            cli_error(NULL, "out of memory");
            goto done;
        }
        if (mge_tensor_copy(&r->out[i], mge_exec_result(e, i), &err)) {
            cli_error(where, "--verify: output '%s': %s", r->out_names[i], err.msg);
            goto done;
        }
    }
    rc = 0;
done:
    free(ins);
    mge_exec_free(e);
    if (rc)
        verify_ref_free(r);
    return rc;
}

/* "[1,7]": the multi-index of flat element i of t. */
static char *index_str(const mge_tensor *t, int64_t i, char *buf, size_t n)
{
    int64_t idx[MGE_MAX_DIMS];
    for (int k = t->ndim - 1; k >= 0; k--) {
        idx[k] = t->dims[k] > 0 ? i % t->dims[k] : 0;
        i = t->dims[k] > 0 ? i / t->dims[k] : 0;
    }
    size_t w = 0;
    buf[0] = 0;
    w += (size_t)snprintf(buf, n, "[");
    for (int k = 0; k < t->ndim && w < n; k++)
        w += (size_t)snprintf(buf + w, n - w, "%s%lld", k ? "," : "", (long long)idx[k]);
    if (w < n)
        snprintf(buf + w, n - w, "]");
    return buf;
}

/* Runs the optimized g on the same inputs (by name) and compares every
 * output of the reference (by name). Prints and returns -1 on a mismatch. */
static int verify_after(const mge_graph *g, const char *where, const verify_opts *o, const verify_ref *r)
{
    mge_error err;
    mge_error_clear(&err);
    mge_exec_opts eo = {0};
    eo.threads = o->threads;
    eo.device = o->device;
    mge_exec *e = NULL;
    const mge_tensor **ptr = NULL;
    int *map = NULL, rc = -1;
    if (mge_exec_create(g, &eo, &e, &err)) {
        cli_error(where, "--verify: the model after the passes: %s", err.msg);
        return -1;
    }
    int nin = mge_exec_ninputs(e), nout = mge_exec_noutputs(e);
    ptr = calloc((size_t)nin + 1, sizeof *ptr);
    map = calloc((size_t)r->nout + 1, sizeof *map);
    if (!ptr || !map) {
        cli_error(NULL, "out of memory");
        goto done;
    }
    /* Passes may drop inputs (labels); they must not need new ones. */
    for (int i = 0; i < nin; i++) {
        const char *name = g->values[mge_exec_input(e, i)].name;
        for (int j = 0; j < r->in.n && !ptr[i]; j++)
            if (strcmp(r->in_names[j], name) == 0)
                ptr[i] = r->in.ptr[j];
        if (!ptr[i]) {
            cli_error(where, "--verify: after the passes the model needs input '%s', which it did not need before",
                      name);
            goto done;
        }
    }
    for (int j = 0; j < r->nout; j++) {
        map[j] = -1;
        for (int i = 0; i < nout && map[j] < 0; i++)
            if (strcmp(g->values[mge_exec_output(e, i)].name, r->out_names[j]) == 0)
                map[j] = i;
        if (map[j] < 0) {
            cli_error(where, "--verify: the model has no output '%s' after the passes (a pass dropped or renamed it)",
                      r->out_names[j]);
            goto done;
        }
    }
    if (mge_exec_run(e, ptr, &err)) {
        cli_error(where, "--verify: the model after the passes: %s", err.msg);
        goto done;
    }
    double max_abs = 0, max_rel = 0;
    int64_t bad = 0, compared = 0;
    for (int j = 0; j < r->nout; j++) {
        const mge_tensor *ref = &r->out[j], *t = mge_exec_result(e, map[j]);
        char rs[160], ts[160], is[160];
        if (ref->ndim != t->ndim || memcmp(ref->dims, t->dims, sizeof(int64_t) * (size_t)t->ndim) != 0) {
            cli_error(where, "--verify: output '%s' is %s after the passes, %s before", r->out_names[j],
                      mge_shape_str(t->dtype, t->ndim, t->dims, ts, sizeof ts),
                      mge_shape_str(ref->dtype, ref->ndim, ref->dims, rs, sizeof rs));
            bad++;
            continue;
        }
        int64_t n = mge_tensor_numel(t), obad = 0, worst_i = -1;
        double worst = 0, atol = o->atol;
        if (o->scale_atol) {
            double m = 0;
            for (int64_t i = 0; i < n; i++) {
                double b = fabs(cli_tensor_value(ref, i));
                m = b > m && isfinite(b) ? b : m;
            }
            atol *= m;
        }
        for (int64_t i = 0; i < n; i++) {
            double a = cli_tensor_value(t, i), b = cli_tensor_value(ref, i), d = fabs(a - b);
            double tol = atol + o->rtol * fabs(b);
            /* the same non-finite value on both sides is a match */
            int ok = d <= tol || (a == b) || (isnan(a) && isnan(b));
            if (!ok && (isnan(a) || isnan(b)))
                d = INFINITY;
            if (!(a == b) && d > max_abs)
                max_abs = d;
            if (b != 0 && !(a == b) && d / fabs(b) > max_rel)
                max_rel = d / fabs(b);
            double ratio = ok ? 0 : tol > 0 ? d / tol : INFINITY;
            if (!ok && (worst_i < 0 || ratio > worst)) {
                worst = ratio;
                worst_i = i;
            }
            obad += !ok;
        }
        compared += n;
        bad += obad;
        if (obad)
            cli_error(where,
                      "--verify: output '%s' element %s is %.9g after the passes, %.9g before "
                      "(|diff| %.3g; %lld of %lld values of this output differ)",
                      r->out_names[j], index_str(t, worst_i, is, sizeof is), cli_tensor_value(t, worst_i), cli_tensor_value(ref, worst_i),
                      fabs(cli_tensor_value(t, worst_i) - cli_tensor_value(ref, worst_i)), (long long)obad, (long long)n);
    }
    if (bad) {
        cli_error(where, "--verify failed: max abs err %.6g, max rel err %.6g (atol %g%s + rtol %g * |ref|)", max_abs,
                  max_rel, o->atol, o->scale_atol ? " * max|ref|" : "", o->rtol);
        goto done;
    }
    cli_note(where, "--verify: %d output%s (%lld values, batch %lld) match: max abs err %.6g, max rel err %.6g",
             r->nout, r->nout == 1 ? "" : "s", (long long)compared, (long long)r->in.batch, max_abs, max_rel);
    rc = 0;
done:
    free(ptr);
    free(map);
    mge_exec_free(e);
    return rc;
}

/* ---------------------------------------------------------------- passes */

typedef struct pass_row {
    const char *name;
    double ms;
    int changed, before, after;   /* changed -1: the pass failed */
} pass_row;

static void time_table(const pass_row *rows, int n)
{
    double total = 0;
    fprintf(stderr, "%-16s %10s  %-7s  %12s  %11s\n", "pass", "ms", "changed", "nodes before", "nodes after");
    for (int i = 0; i < n; i++) {
        fprintf(stderr, "%-16s %10.3f  %-7s  %12d  %11d\n", rows[i].name, rows[i].ms,
                rows[i].changed < 0 ? "failed" : rows[i].changed ? "yes" : "no", rows[i].before, rows[i].after);
        total += rows[i].ms;
    }
    if (n)
        fprintf(stderr, "%-16s %10.3f  %-7s  %12d  %11d\n", "total", total, "", rows[0].before, rows[n - 1].after);
}

/* Runs the passes one at a time (each validated by mge_passes_run); rows
 * gets one entry per pass that finished. */
static int run_passes(mge_graph **g, int n, const char *const *names, const char *where, int print_after,
                      pass_row *rows, int *nrows, int *changed)
{
    mge_error err;
    mge_error_clear(&err);
    *changed = 0;
    *nrows = 0;
    for (int i = 0; i < n; i++) {
        int ch = 0, before = (*g)->nnodes;
        double t0 = mge_now();
        mge_status s = mge_passes_run(g, 1, &names[i], &ch, &err);
        /* a failed pass leaves *g valid, so its row still has a node count */
        rows[i] = (pass_row){names[i], 1e3 * (mge_now() - t0), s ? -1 : ch, before, (*g)->nnodes};
        *nrows = i + 1;
        if (s) {
            cli_mge_error(where, &err);
            return -1;
        }
        *changed |= ch;
        if (!ch)
            cli_note(where, "%s: no change (does not apply)", names[i]);
        if (print_after) {
            mge_buf b = {0};
            if (mge_text_print(*g, &b, &err)) {
                cli_mge_error(where, &err);
                mge_buf_free(&b);
                return -1;
            }
            fprintf(stderr, "; after %s (%s)\n", names[i], ch ? "changed" : "unchanged");
            fwrite(b.p, 1, b.n, stderr);
            mge_buf_free(&b);
        }
    }
    return 0;
}

enum {
    OPT_WEIGHTS = CLI_OPT_FIRST_TOOL, OPT_BIND, OPT_SEED, OPT_PASSES, OPT_LIST, OPT_VERIFY, OPT_ATOL, OPT_RTOL, OPT_BATCH,
    OPT_SHAPE, OPT_INPUT, OPT_TIME, OPT_PRINT_AFTER, OPT_ALLOW_UNUSED, OPT_EMIT, OPT_PRECISION, OPT_KEEP_F32
};

/* Splits "a,b,c" in place into at most cap names; -1 on an empty name. */
static int split_names(char *s, char **out, int cap)
{
    int n = 0;
    for (char *p = s; n <= cap;) {
        char *c = strchr(p, ',');
        if (c)
            *c = 0;
        if (!*p || n == cap)
            return -1;
        out[n++] = p;
        if (!c)
            break;
        p = c + 1;
    }
    return n;
}

/* --precision: the layers' arithmetic, set before the passes run, and what
 * this CPU will make of it. */
static int apply_precision(mge_graph *g, const char *where, int prec, char *keep_arg)
{
    char *keep[256], *names = keep_arg ? strdup(keep_arg) : NULL;
    int nkeep = 0;
    if (keep_arg && !names) {
        cli_error(NULL, "out of memory");
        return -1;
    }
    if (names && (nkeep = split_names(names, keep, 256)) < 0) {
        cli_error(where, "--keep-f32: an empty name or more than 256 names");
        free(names);
        return -1;
    }
    mge_error err;
    mge_error_clear(&err);
    char note[512];
    int nset = 0;
    mge_status s = mge_precision_set(g, prec, nkeep, (const char *const *)keep, &nset, note, sizeof note, &err);
    free(names);
    if (s) {
        cli_mge_error(where, &err);
        return -1;
    }
    if (note[0])
        cli_warn(where, "--keep-f32: %s", note);
    if (prec == MGE_PRECISION_BF16) {
        const char *why = "", *k = "";
        int level = mge_cpu_bf16_kernels(&k, &why);
        if (!nset)
            cli_warn(where, "--precision bf16: no layer it applies to (dense conv2d, linear, matmul, attention)");
        cli_note(where, "--precision bf16: %d layer%s in bf16%s%s", nset, nset == 1 ? "" : "s",
                 nkeep ? ", kept in f32: " : "", nkeep ? keep_arg : "");
        if (cli_verbose > 0)
            cli_note(where, "bf16 kernels here: %s%s%s", k, *why ? " (" : "", *why ? why : "");
        if (cli_verbose > 0 && !level)
            cli_note(where, "this CPU computes the bf16 layers in f32 (exact f32 results)");
    }
    return 0;
}

enum { EMIT_MGE = 0, EMIT_TEXT, EMIT_ONNX };

/* Whether path ends in ".onnx" (any case): -o net.onnx means --emit onnx. */
static int onnx_path(const char *path)
{
    size_t n = path ? strlen(path) : 0;
    return n > 5 && strcasecmp(path + n - 5, ".onnx") == 0;
}

int main(int argc, char **argv)
{
    cli_init("mge-opt", argv);
    static const struct option longs[] = {
        CLI_LONG_COMMON,
        {"output", 1, 0, 'o'},
        {"text", 0, 0, 'S'},
        {"emit", 1, 0, OPT_EMIT},
        {"weights", 1, 0, OPT_WEIGHTS},
        {"bind", 1, 0, OPT_BIND},
        {"allow-unused", 0, 0, OPT_ALLOW_UNUSED},
        {"seed", 1, 0, OPT_SEED},
        {"passes", 1, 0, OPT_PASSES},
        {"list-passes", 0, 0, OPT_LIST},
        {"verify", 0, 0, OPT_VERIFY},
        {"atol", 1, 0, OPT_ATOL},
        {"rtol", 1, 0, OPT_RTOL},
        {"batch", 1, 0, OPT_BATCH},
        {"shape", 1, 0, OPT_SHAPE},
        {"input", 1, 0, OPT_INPUT},
        {"time-passes", 0, 0, OPT_TIME},
        {"print-after-all", 0, 0, OPT_PRINT_AFTER},
        {"precision", 1, 0, OPT_PRECISION},
        {"keep-f32", 1, 0, OPT_KEEP_F32},
        {0, 0, 0, 0},
    };
    cli_common co = {0};
    const char *out = NULL, *weights = NULL, *passes = NULL, *verify_only = NULL;
    mge_tlist bind = {0};   /* --bind: input values the ONNX import specializes on */
    char *keep_f32 = NULL;
    int precision = -1, tol_given = 0;
    int text = 0, emit = -1, level = -1, list = 0, verify = 0, time_passes = 0, print_after = 0, allow_unused = 0;
    verify_opts vo;
    memset(&vo, 0, sizeof vo);
    vo.atol = 1e-5;
    vo.rtol = 1e-4;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":o:SO:fqvh", longs, NULL)) != -1) {
        switch (c) {
        case 'o': out = optarg; break;
        case 'S': text = 1; break;
        case OPT_EMIT:
            if (strcmp(optarg, "mge") == 0)
                emit = EMIT_MGE;
            else if (strcmp(optarg, "text") == 0)
                emit = EMIT_TEXT;
            else if (strcmp(optarg, "onnx") == 0)
                emit = EMIT_ONNX;
            else
                cli_usage("--emit %s: expected mge, text or onnx", optarg);
            break;
        case 'O':
            if (strlen(optarg) != 1 || optarg[0] < '0' || optarg[0] > '3')
                cli_usage("-O%s: expected -O0, -O1, -O2 or -O3", optarg);
            level = optarg[0] - '0';
            break;
        case OPT_WEIGHTS: weights = optarg; break;
        case OPT_BIND:
            if (cli_bind_arg(&bind, "--bind", optarg))
                return 1;
            break;
        case OPT_ALLOW_UNUSED: allow_unused = 1; break;
        case OPT_SEED: vo.seed = cli_u64("--seed", optarg); break;
        case OPT_PASSES: passes = optarg; break;
        case OPT_LIST: list = 1; break;
        case OPT_VERIFY: verify = 1; break;
        case OPT_ATOL: vo.atol = cli_double("--atol", optarg, 0); verify_only = "--atol"; tol_given = 1; break;
        case OPT_RTOL: vo.rtol = cli_double("--rtol", optarg, 0); verify_only = "--rtol"; tol_given = 1; break;
        case OPT_PRECISION:
            if (strcmp(optarg, "f32") == 0)
                precision = MGE_PRECISION_F32;
            else if (strcmp(optarg, "bf16") == 0)
                precision = MGE_PRECISION_BF16;
            else
                cli_usage("--precision %s: expected f32 or bf16", optarg);
            break;
        case OPT_KEEP_F32: keep_f32 = optarg; break;
        case OPT_BATCH: vo.batch = cli_long("--batch", optarg, 1, 1L << 24); verify_only = "--batch"; break;
        case OPT_SHAPE:
            /* also the shape the passes optimize for (opt.shape) */
            if (bench_shape_parse(&vo.shapes, optarg))
                return 1;
            break;
        case OPT_INPUT: vo.input = optarg; verify_only = "--input"; break;
        case OPT_TIME: time_passes = 1; break;
        case OPT_PRINT_AFTER: print_after = 1; break;
        default:
            if (!cli_common_opt(c, optarg, &co, help))
                cli_usage("unhandled option");
        }
    }
    if (level >= 0 && passes)
        cli_usage("-O%d and --passes cannot be combined", level);
    if (text && emit >= 0 && emit != EMIT_TEXT)
        cli_usage("-S and --emit %s cannot be combined", emit == EMIT_ONNX ? "onnx" : "mge");
    if (text)
        emit = EMIT_TEXT;
    if (emit < 0)
        emit = onnx_path(out) ? EMIT_ONNX : EMIT_MGE;
    text = emit == EMIT_TEXT;
    if (argc - optind > 1)
        cli_usage("too many arguments (one model at most)");
    if (allow_unused && !weights)
        cli_usage("--allow-unused only applies to --weights");
    if (verify_only && !verify)
        cli_usage("%s only applies to --verify", verify_only);
    if (keep_f32 && precision != MGE_PRECISION_BF16)
        cli_usage("--keep-f32 only applies to --precision bf16");
    if (vo.input && vo.shapes.n)
        cli_usage("--shape and --input cannot be combined (the records give the shapes)");
    cli_check_device(co.device);
    if (list) {
        list_passes();
        return cli_stdout_flush() ? 1 : 0;
    }
    if (passes && (!*passes || passes[0] == ',' || passes[strlen(passes) - 1] == ',' || strstr(passes, ",,")))
        cli_usage("--passes: empty pass name in '%s'", passes);
    const char *list_str = passes ? passes : level >= 0 ? mge_pass_preset(level) : "";
    char *names_copy = NULL;
    const char **names = NULL;
    int npasses = 0;
    if (*list_str && (npasses = split_passes(list_str, &names_copy, &names)) < 0) {
        cli_error(NULL, "out of memory");
        return 1;
    }
    /* Check the names now so a typo is a usage error before any work. */
    for (int i = 0; i < npasses; i++) {
        if (!mge_pass_find(names[i])) {
            char known[512] = "";
            size_t k = 0;
            for (int j = 0; j < mge_pass_count() && k < sizeof known; j++)
                k += (size_t)snprintf(known + k, sizeof known - k, "%s%s", j ? ", " : "", mge_pass_get(j)->name);
            cli_usage("--passes: unknown pass '%s' (known passes: %s)", names[i], known);
        }
    }
    const char *in = optind < argc ? argv[optind] : "-";
    if (vo.input && strcmp(vo.input, "-") == 0 && strcmp(in, "-") == 0)
        cli_usage("the model and --input cannot both be standard input");
    const char *where = cli_name(in);
    vo.threads = cli_threads(&co);
    vo.device = co.device;

    mge_error err;
    mge_error_clear(&err);
    mge_graph *g = NULL;
    verify_ref ref;
    memset(&ref, 0, sizeof ref);
    pass_row *rows = calloc((size_t)npasses + 1, sizeof *rows);
    int nrows = 0, rc = 1;
    if (!rows) {
        cli_error(NULL, "out of memory");
        goto done;
    }
    int printed = 0;
    mge_load_opts lo = {0};
    lo.bind = &bind;
    if (cli_model_load_opts(in, &lo, &g, &printed, NULL))
        goto done;
    if (weights && cli_weights_bind(g, weights, 0, allow_unused) < 0)
        goto done;
    int uninit = 0, valued = 0;
    for (int v = 0; v < g->nvalues; v++) {
        int p = g->values[v].kind == MGE_VAL_PARAM || g->values[v].kind == MGE_VAL_STATE;
        uninit += p && !g->values[v].data;
        valued += p && g->values[v].data;
    }
    if (uninit) {
        if (mge_graph_init_params(g, vo.seed, &err)) {
            cli_mge_error(where, &err);
            goto done;
        }
        if (printed)
            cli_warn_printed(where, uninit, vo.seed);
        else
            cli_note(where, "%d parameters without values initialized (seed %llu)", uninit,
                     (unsigned long long)vo.seed);
    }
    if (vo.shapes.n && set_opt_shape(g, where, &vo.shapes))
        goto done;
    if (verify && verify_before(g, where, &vo, &ref))
        goto done;
    if (precision >= 0 && apply_precision(g, where, precision, keep_f32))
        goto done;
    int changed = 0;
    int prc = run_passes(&g, npasses, names, where, print_after, rows, &nrows, &changed);
    if (time_passes)
        time_table(rows, nrows);
    if (prc)
        goto done;
    if (*list_str)
        cli_note(where, "passes %s: %s", list_str, changed ? "graph changed" : "no change");
    if (verify && !tol_given) {
        /* bf16 rounds every product's operands: about 2^-8 relative each */
        if (mge_graph_bf16_count(g)) {
            vo.atol = 2e-2, vo.rtol = 2e-2, vo.scale_atol = 1;
            cli_note(where, "--verify: bf16 layers: tolerances atol 2e-2 x max|output|, rtol 2e-2");
        }
    }
    if (verify && verify_after(g, where, &vo, &ref))
        goto done;

    mge_buf b = {0};
    mge_status s;
    if (text) {
        /* values that came from a file or --weights would be lost silently */
        if (valued)
            cli_warn(weights ? cli_name(weights) : where,
                     "the text form does not carry parameter values: %d tensors not written "
                     "(write .mge, or keep them with mge-dump --params W.npz and a weights \"W.npz\" line)",
                     valued);
        s = mge_text_print(g, &b, &err);
    } else if (emit == EMIT_ONNX) {
        /* ONNX has no per-node compute precision: the layers go out as f32 ops */
        int nbf = mge_graph_bf16_count(g);
        if (nbf)
            cli_warn(where, "%d bf16 layer%s written as f32 ONNX ops (ONNX has no compute precision per node; "
                     "a runtime computes them in its own precision)", nbf, nbf == 1 ? "" : "s");
        s = mge_onnx_write(g, &b, &err);
    } else {
        mge_write_opts wo = {0};
        s = mge_file_write(g, &wo, &b, &err);
    }
    if (s)
        cli_mge_error(where, &err);
    else
        rc = cli_write_buf(out, &b, !text, co.force) ? 1 : 0;
    mge_buf_free(&b);
done:
    verify_ref_free(&ref);
    bench_shapes_free(&vo.shapes);
    mge_tlist_free(&bind);
    free(rows);
    free(names);
    free(names_copy);
    mge_graph_free(g);
    return rc;
}
