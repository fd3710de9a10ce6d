/* mge-run — inference over NPY streams: per step one record per needed
 * input in, one record per output out, until the inputs end. Memory stays
 * constant over any number of steps. Also: datasets and CSV (--data, with
 * --metrics), images (--image), top-k classes (run_data.c, run_image.c,
 * run_sink.c), text from a language model (--generate, run_generate.c). */
#include "cli.h"
#include "csv.h"
#include "image.h"
#include "run_data.h"
#include "run_generate.h"
#include "run_image.h"
#include "run_sink.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void help(void)
{
    printf("Usage: %s [options] [MODEL|-]\n"
           "       %s [options] MODEL --image FILE [FILE...]\n"
           "Run a model (text form or .mge) on NPY tensor streams. Each step reads one\n"
           "record per needed input, in the model's input order, from stdin (or the\n"
           "files given with --input), and writes one record per output, until the\n"
           "input ends. Datasets, CSV tables and images are read with --data and --image.\n"
           "An ONNX model whose shape-like operands (axes, sizes, ...) are inputs is\n"
           "specialized on each step's values of them (again when they change; -v says so).\n"
           "\n"
           "Inputs:\n"
           "  -i, --input NAME=FILE  read input NAME from FILE (a stream of records)\n"
           "  -i, --input FILE       read the inputs not named elsewhere from FILE, not stdin\n"
           "      --data D           read batches from a dataset instead (IDX, .npz, archive,\n"
           "                         NPY stream, FILE.csv; see mge-train(1)), in order\n"
           "      --batch B          batch size for --data and --image (default 256)\n"
           "      --normalize M,S    with --data: u8 images become (x/255 - M) / S, as in training\n"
           "      --columns LIST     CSV: the feature columns (names or numbers from 1, ranges 2-5;\n"
           "                         default: all but the labels)\n"
           "      --header WHEN      CSV: the first row is a header: auto (default), yes, no\n"
           "      --target NAME      with --data: the labels for --metrics (an array, a CSV column)\n"
           "      --image FILE       a PNG or JPEG for an NCHW image input (repeat, or list more\n"
           "                         files after the model: one batch)\n"
           "      --resize HxW       resize images (bilinear, as torchvision); one size S: the\n"
           "                         shorter side becomes S\n"
           "      --crop HxW         center crop after --resize\n"
           "      --mean LIST        subtract per channel after x/255 (1 or 3 values)\n"
           "      --std LIST         then divide per channel (1 or 3 values)\n"
           "      --seed S           seed for parameters without values (default 0; warned about)\n"
           "      --plan-cache K     plans kept, one per input shape binding (default 16, 1..4096)\n"
           "\n"
           "Outputs:\n"
           "      --output NAMES     comma-separated values to output (default: the model's)\n"
           "  -o FILE                write output records to FILE (default: stdout); FILE.npz:\n"
           "                         one array per output, keyed by name\n"
           "      --concat           one record per output, all steps joined along axis 0\n"
           "                         (always so with --data and --image)\n"
           "      --metrics LIST     with --data: score the first output against the labels:\n"
           "                         accuracy, top5 (any topK), mse, rmse, mae, r2\n"
           "      --accuracy         the same as --metrics accuracy\n"
           "      --top-k K          print the K best classes of each sample and their scores\n"
           "      --labels FILE      class names for --top-k, one per line\n"
           "      --softmax          --top-k scores as softmax probabilities\n"
           "      --json             --metrics and --top-k as one JSON object on stdout\n"
           "      --check REF.npy    compare outputs with reference records; exit 1 on mismatch\n"
           "      --atol A           absolute tolerance for --check (default 1e-5)\n"
           "      --rtol R           relative tolerance for --check (default 1e-4)\n"
           "\n"
           "Text generation (a byte-level language model: tokens i32[N,S] in, logits [N,S,V] out):\n"
           "      --generate N       print the prompt and N sampled bytes to stdout\n"
           "      --prompt TEXT      the bytes to start from (default: a newline)\n"
           "      --temperature T    divide the logits by T > 0 before sampling (default 1)\n"
           "      --top-k K          sample from the K best bytes only (default: all)\n"
           "      --greedy           take the best byte instead of sampling\n"
           "      --context P        tokens fed back (default: the position table's rows)\n"
           "                         (--seed S seeds the sampling; --output NAME: the logits)\n"
           "\n"
           "  -f, --force            allow NPY records to or from a terminal\n"
           "  -q, --quiet            only errors\n"
           "  -v, --verbose          more detail on stderr\n"
           "      --threads N        worker threads (1..256; default: all CPUs)\n"
           "      --device DEV       cpu (default), sim (simulated device), cuda[:N] (plugin)\n"
           "  -h, --help             show this help and exit\n"
           "      --version          show the version and exit\n"
           "\n"
           "Exit status: 0 success, 1 failure, 2 usage error.\n"
           "\n"
           "Examples:\n"
           "  mge-run net.mge < x.npy > y.npy                # NPY records in, one per input; records out\n"
           "  mge-run net.mge --input x.npy --check y.npy   # exit 1 when an output differs\n"
           "  mge-run net.mge --data d.npz --metrics accuracy --json   # a labelled dataset, scored\n",
           cli_prog, cli_prog);
}

typedef struct stream {
    const char *path;    /* "-" for stdin */
    FILE *f;
    int64_t reads;       /* records read so far */
} stream;

typedef struct check {
    const char *path;
    FILE *f;
    double atol, rtol;
    double max_abs, max_rel, worst;  /* worst: |a-b| / (atol + rtol*|b|) */
    int worst_out, worst_step;
    int64_t worst_elem;
    double worst_a, worst_b;
    int64_t compared, bad;
} check;

/* Compares output o of step s with the next reference record. Returns -1 on
 * a stream error (printed), else 0; mismatches are counted in c->bad. */
static int check_one(check *c, const mge_graph *g, int vo, int o, int step, const mge_tensor *out)
{
    mge_tensor ref = {0};
    mge_error err;
    mge_error_clear(&err);
    const char *name = g->values[vo].name;
    mge_status s = mge_npy_read(c->f, &ref, &err);
    if (s == MGE_ERR_EOF) {
        cli_error(c->path, "the reference ends before output '%s' of step %d", name, step);
        return -1;
    }
    if (s) {
        cli_error(c->path, "record for output '%s' of step %d: %s", name, step, err.msg);
        return -1;
    }
    char es[128], gs[128];
    if (ref.ndim != out->ndim || memcmp(ref.dims, out->dims, sizeof(int64_t) * (size_t)out->ndim) != 0) {
        cli_error(c->path, "output '%s' of step %d: the reference is %s, the output %s", name, step,
                  mge_shape_str(ref.dtype, ref.ndim, ref.dims, es, sizeof es),
                  mge_shape_str(out->dtype, out->ndim, out->dims, gs, sizeof gs));
        mge_tensor_free(&ref);
        c->bad++;
        return 0;
    }
    int64_t n = mge_tensor_numel(out);
    for (int64_t i = 0; i < n; i++) {
        double a = cli_tensor_value(out, i), b = cli_tensor_value(&ref, i);
        double d = fabs(a - b);
        double tol = c->atol + c->rtol * fabs(b);
        int ok = d <= tol;
        if (isnan(a) || isnan(b)) {
            d = INFINITY;
            ok = 0;
        }
        if (d > c->max_abs || isnan(c->max_abs))
            c->max_abs = d;
        if (b != 0 && d / fabs(b) > c->max_rel)
            c->max_rel = d / fabs(b);
        double ratio = !ok && !(d > tol) ? INFINITY : tol > 0 ? d / tol : d > 0 ? INFINITY : 0;
        if (ratio > c->worst) {
            c->worst = ratio;
            c->worst_out = o;
            c->worst_step = step;
            c->worst_elem = i;
            c->worst_a = a;
            c->worst_b = b;
        }
        c->bad += !ok;
        c->compared++;
    }
    mge_tensor_free(&ref);
    return 0;
}

/* True when f has no more bytes. */
static int at_eof(FILE *f)
{
    int ch = getc(f);
    if (ch == EOF)
        return 1;
    ungetc(ch, f);
    return 0;
}

/* What the first bytes of a stream that is not NPY say it is, for the
 * "bad magic" error (a regular file is read again from its start). */
static const char *stream_hint(FILE *f, const char *path)
{
    unsigned char head[512];
    size_t n = 0;
    if (fseek(f, 0, SEEK_SET) == 0)
        n = fread(head, 1, sizeof head, f);
    const char *h = run_data_hint(head, n, strcmp(path, "-") ? path : NULL);
    return h ? h : "not NPY records? datasets (.npz, IDX, archives, CSV) go with --data, images with --image";
}

/* True when the file at path starts like an image (a model operand that is
 * really an image: the model must come first). */
static int looks_like_image(const char *path)
{
    unsigned char head[8];
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : NULL;
    size_t n = f ? fread(head, 1, sizeof head, f) : 0;
    if (f)
        fclose(f);
    return mge_image_kind(head, n) != NULL;
}

/* ---------------------------------------------------------------- inputs bound at import
 *
 * An ONNX model whose shape-like operands (axes, sizes, pads, ...) come
 * from graph inputs is specialized on their values (mge plans static
 * shapes): the records of each step are read first, the model imported with
 * those inputs bound, and imported again whenever a later record's values
 * differ. Each step reads one record per input the ONNX outputs depend on
 * (the import's reads list), in input order, as the unspecialized model
 * would; the bound ones are checked, the others fed. */

typedef struct bound_run {
    const char *model, *where, *outputs;
    mge_exec_opts eo;
    char **slot;             /* the inputs read per step (mge names) */
    int nslot;
    char *bound;             /* per slot: the import needs its value */
    mge_tlist vals;          /* the values the current graph is specialized on */
    int imports;
} bound_run;

static void bound_free(bound_run *b)
{
    for (int i = 0; i < b->nslot; i++)
        free(b->slot[i]);
    free(b->slot);
    free(b->bound);
    mge_tlist_free(&b->vals);
}

/* Lines of a buffer into b->slot. */
static int bound_slots(bound_run *b, const mge_buf *reads)
{
    int cnt = 0;
    for (size_t i = 0; i < reads->n; i++)
        cnt += reads->p[i] == '\n';
    b->slot = calloc((size_t)cnt + 1, sizeof *b->slot);
    b->bound = calloc((size_t)cnt + 1, 1);
    if (!b->slot || !b->bound)
        return -1;
    for (size_t i = 0; i < reads->n;) {
        const char *p = reads->p + i, *e = memchr(p, '\n', reads->n - i);
        size_t len = e ? (size_t)(e - p) : reads->n - i;
        if (!(b->slot[b->nslot++] = strndup(p, len)))
            return -1;
        i += len + 1;
    }
    return 0;
}

static int slot_of(const bound_run *b, const char *name, size_t len)
{
    for (int i = 0; i < b->nslot; i++)
        if (strlen(b->slot[i]) == len && strncmp(b->slot[i], name, len) == 0)
            return i;
    return -1;
}

/* Marks the slots named in needs as bound; -1 (printed) when one is not read. */
static int bound_mark(bound_run *b, const mge_buf *needs, const mge_error *why)
{
    int added = 0;
    for (size_t i = 0; i < needs->n;) {
        const char *p = needs->p + i, *e = memchr(p, '\n', needs->n - i);
        size_t len = e ? (size_t)(e - p) : needs->n - i;
        int k = slot_of(b, p, len);
        if (k < 0) {
            cli_error(b->where, "%s", why->msg);
            return -1;
        }
        added += !b->bound[k];
        b->bound[k] = 1;
        i += len + 1;
    }
    return added;
}

static int same_tensor(const mge_tensor *a, const mge_tensor *b)
{
    return a->dtype == b->dtype && mge_tensor_same_shape(a, b) && a->nbytes == b->nbytes &&
           (a->nbytes == 0 || memcmp(a->data, b->data, a->nbytes) == 0);
}

/* Whether the step's records of the bound slots differ from the values the
 * graph is specialized on (the first name that differs into *which). */
static int bound_changed(const bound_run *b, const mge_tensor *tin, const char **which)
{
    for (int i = 0; i < b->nslot; i++) {
        if (!b->bound[i])
            continue;
        int k = mge_tlist_find(&b->vals, b->slot[i]);
        if (k < 0 || !same_tensor(&b->vals.t[k], &tin[i])) {
            *which = b->slot[i];
            return 1;
        }
    }
    return 0;
}

/* Imports the model specialized on this step's values of the bound slots
 * (more of them when the import then needs more) and makes its executor. */
static int bound_import(bound_run *b, const mge_tensor *tin, mge_graph **g, mge_exec **e, int step)
{
    mge_exec_free(*e);
    *e = NULL;
    mge_graph_free(*g);
    *g = NULL;
    for (int round = 0; round <= b->nslot; round++) {
        mge_tlist_free(&b->vals);
        memset(&b->vals, 0, sizeof b->vals);
        mge_error err;
        mge_error_clear(&err);
        for (int i = 0; i < b->nslot; i++) {
            mge_tensor t;
            if (!b->bound[i])
                continue;
            if (mge_tensor_copy(&t, &tin[i], &err) || mge_tlist_add(&b->vals, b->slot[i], &t, &err)) {
                cli_mge_error(b->where, &err);
                return -1;
            }
        }
        mge_buf needs = {0};
        mge_load_opts lo = {0};
        lo.bind = &b->vals;
        lo.needs = &needs;
        int r = cli_model_load_opts(b->model, &lo, g, NULL, &err);
        if (r == 1) {
            int added = bound_mark(b, &needs, &err);
            mge_buf_free(&needs);
            if (added < 0)
                return -1;
            if (added == 0) {
                cli_error(b->where, "%s", err.msg);
                return -1;
            }
            continue;
        }
        mge_buf_free(&needs);
        if (r) {
            /* the import said why; say on which values */
            mge_buf d = {0};
            for (int i = 0; i < b->vals.n; i++) {
                const mge_tensor *t = &b->vals.t[i];
                char sh[128];
                mge_buf_printf(&d, "%s%s = %s", i ? ", " : "", b->vals.names[i],
                               mge_shape_str(t->dtype, t->ndim, t->dims, sh, sizeof sh));
                for (int64_t k = 0; k < mge_tensor_numel(t) && k < 8; k++)
                    mge_buf_printf(&d, " %.9g", cli_tensor_value(t, k));
                if (mge_tensor_numel(t) > 8)
                    mge_buf_printf(&d, " ...");
            }
            cli_error(b->where, "step %d: the model does not import specialized on %.*s", step, (int)d.n,
                      d.p ? d.p : "");
            mge_buf_free(&d);
            return -1;
        }
        b->imports++;
        if (cli_verbose > 0) {
            mge_buf d = {0};
            for (int i = 0; i < b->nslot; i++)
                if (b->bound[i]) {
                    char key[300];
                    snprintf(key, sizeof key, "onnx.bound.%s", b->slot[i]);
                    const char *m = mge_graph_get_meta(*g, key);
                    mge_buf_printf(&d, "%s%s = %s", d.n ? ", " : "", b->slot[i], m ? m : "?");
                }
            cli_note(b->where, "step %d: %s the model on %.*s", step, b->imports == 1 ? "specialized" : "re-specialized",
                     (int)d.n, d.p ? d.p : "");
            mge_buf_free(&d);
        }
        int *outs = NULL, nouts = 0;
        if (b->outputs) {
            outs = malloc(sizeof(int) * (strlen(b->outputs) + 2));
            char *copy = strdup(b->outputs);
            if (!outs || !copy) {
                free(outs);
                free(copy);
                cli_error(NULL, "out of memory");
                return -1;
            }
            for (char *tok = copy, *save = NULL;; tok = NULL) {
                char *name = strtok_r(tok, ",", &save);
                if (!name)
                    break;
                int v = mge_graph_find(*g, name);
                if (v < 0) {
                    cli_error(b->where, "--output: the model has no value named '%s'", name);
                    free(copy);
                    free(outs);
                    return -1;
                }
                outs[nouts++] = v;
            }
            free(copy);
        }
        mge_exec_opts eo = b->eo;
        eo.noutputs = nouts;
        eo.outputs = outs;
        mge_status s = mge_exec_create(*g, &eo, e, &err);
        free(outs);
        if (s) {
            cli_mge_error(b->where, &err);
            return -1;
        }
        if (mge_exec_noutputs(*e) == 0) {
            cli_error(b->where, "the model has no outputs");
            return -1;
        }
        return 0;
    }
    cli_error(b->where, "the import keeps needing more input values");
    return -1;
}

/* The step loop of a model specialized on bound inputs: streams as main's
 * (stdin or a plain --input FILE, and --input NAME=FILE), one record per
 * slot. Leaves the last graph and executor in *g and *e. */
static int run_bound(bound_run *b, const char **inputs, int ninputs_arg, check *ck, run_sink *sink, mge_graph **g,
                     mge_exec **e, int *steps_out)
{
    int rc = -1, nst = 1, steps = 0;
    stream *st = calloc((size_t)ninputs_arg + 2, sizeof *st);
    int *in_stream = calloc((size_t)b->nslot + 1, sizeof *in_stream);
    mge_tensor *tin = calloc((size_t)b->nslot + 1, sizeof *tin);
    const mge_tensor **tptr = calloc((size_t)b->nslot + 1, sizeof *tptr);
    mge_error err;
    mge_error_clear(&err);
    if (!st || !in_stream || !tin || !tptr) {
        cli_error(NULL, "out of memory");
        goto done;
    }
    st[0].path = "-";
    int plain = 0;
    for (int a = 0; a < ninputs_arg; a++) {
        const char *arg = inputs[a], *eq = strchr(arg, '=');
        const char *slash = strchr(arg, '/');
        if (!eq || (slash && slash < eq)) {
            if (plain++)
                cli_usage("--input FILE given twice (name the inputs: --input NAME=FILE)");
            st[0].path = arg;
            continue;
        }
        if (!eq[1] || eq == arg)
            cli_usage("--input %s: expected NAME=FILE", arg);
        int k = slot_of(b, arg, (size_t)(eq - arg));
        if (k < 0) {
            cli_error(b->where, "--input %s: the model has no input named '%.*s' that its outputs need", arg,
                      (int)(eq - arg), arg);
            goto done;
        }
        if (in_stream[k])
            cli_usage("--input: input '%s' given twice", b->slot[k]);
        int sidx = -1;
        for (int s = 1; s < nst; s++)
            if (strcmp(st[s].path, eq + 1) == 0)
                sidx = s;
        if (sidx < 0) {
            sidx = nst++;
            st[sidx].path = eq + 1;
        }
        in_stream[k] = sidx;
    }
    int use_default = 0;
    for (int i = 0; i < b->nslot; i++)
        use_default |= in_stream[i] == 0;
    if (use_default && cli_stdin_ready(st[0].path, "NPY records", "redirect stdin or use --input FILE"))
        goto done;
    for (int s = 0; s < nst; s++) {
        if ((s == 0 && !use_default) || (s > 0 && cli_stdin_ready(st[s].path, "NPY records", NULL)))
            continue;
        if (strcmp(st[s].path, "-") == 0) {
            st[s].f = stdin;
        } else if (!(st[s].f = fopen(st[s].path, "rb"))) {
            cli_error(st[s].path, "%s", strerror(errno));
            goto done;
        }
    }
    if (ck->path && !(ck->f = strcmp(ck->path, "-") == 0 ? stdin : fopen(ck->path, "rb"))) {
        cli_error(ck->path, "%s", strerror(errno));
        goto done;
    }
    if (ck->f == stdin && use_default && st[0].f == stdin) {
        cli_error(NULL, "--check -: stdin already carries the inputs");
        goto done;
    }
    for (;; steps++) {
        int end = 0;
        for (int i = 0; i < b->nslot; i++) {
            stream *s = &st[in_stream[i]];
            if (!s->f)
                goto done;
            mge_status r = mge_npy_read(s->f, &tin[i], &err);
            if (r == MGE_ERR_EOF && i == 0) {
                end = 1;
                break;
            }
            if (r == MGE_ERR_EOF) {
                cli_error(cli_name(s->path), "the input ends in the middle of step %d: no record for input '%s'",
                          steps, b->slot[i]);
                goto done;
            }
            if (r) {
                cli_error(cli_name(s->path), "step %d, input '%s': %s", steps, b->slot[i], err.msg);
                goto done;
            }
            s->reads++;
        }
        if (end) {
            for (int i = 1; i < b->nslot; i++) {
                stream *s = &st[in_stream[i]];
                if (s->f && !at_eof(s->f)) {
                    cli_error(cli_name(s->path), "input '%s' has more records than input '%s' (%d steps)",
                              b->slot[i], b->slot[0], steps);
                    goto done;
                }
            }
            break;
        }
        const char *which = NULL;
        if (!*g || bound_changed(b, tin, &which)) {
            if (which && cli_verbose > 0)
                cli_note(b->where, "step %d: input '%s' has another value", steps, which);
            if (bound_import(b, tin, g, e, steps))
                goto done;
        }
        int nin = mge_exec_ninputs(*e);
        for (int i = 0; i < nin; i++) {
            const char *name = (*g)->values[mge_exec_input(*e, i)].name;
            int k = slot_of(b, name, strlen(name));
            if (k < 0) {
                cli_error(b->where, "input '%s' is needed, but the model's outputs do not read it", name);
                goto done;
            }
            tptr[i] = &tin[k];
        }
        mge_status r = mge_exec_run(*e, (const mge_tensor *const *)tptr, &err);
        for (int i = 0; i < b->nslot; i++)
            mge_tensor_free(&tin[i]);
        if (r) {
            cli_error(b->where, "step %d: %s", steps, err.msg);
            goto done;
        }
        if (run_sink_step(sink, *g, *e, NULL, NULL, NULL))
            goto done;
        for (int k = 0; ck->f && k < mge_exec_noutputs(*e); k++)
            if (check_one(ck, *g, mge_exec_output(*e, k), k, steps, mge_exec_result(*e, k)))
                goto done;
    }
    *steps_out = steps;
    rc = 0;
done:
    for (int i = 0; tin && i < b->nslot; i++)
        mge_tensor_free(&tin[i]);
    for (int s = 0; st && s < nst; s++)
        if (st[s].f && st[s].f != stdin)
            fclose(st[s].f);
    free(st);
    free(in_stream);
    free(tin);
    free(tptr);
    return rc;
}

enum {
    OPT_OUTPUT = CLI_OPT_FIRST_TOOL, OPT_SEED, OPT_CHECK, OPT_ATOL, OPT_RTOL, OPT_DATA, OPT_BATCH, OPT_ACCURACY,
    OPT_NORMALIZE, OPT_CONCAT, OPT_METRICS, OPT_JSON, OPT_TOPK, OPT_LABELS, OPT_SOFTMAX, OPT_TARGET, OPT_COLUMNS,
    OPT_HEADER, OPT_IMAGE, OPT_RESIZE, OPT_CROP, OPT_MEAN, OPT_STD, OPT_PLAN_CACHE,
    OPT_GENERATE, OPT_PROMPT, OPT_TEMPERATURE, OPT_GREEDY, OPT_CONTEXT
};

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

int main(int argc, char **argv)
{
    cli_init("mge-run", argv);
    static const struct option longs[] = {
        CLI_LONG_COMMON,
        {"input", 1, 0, 'i'},
        {"output", 1, 0, OPT_OUTPUT},
        {"seed", 1, 0, OPT_SEED},
        {"check", 1, 0, OPT_CHECK},
        {"atol", 1, 0, OPT_ATOL},
        {"rtol", 1, 0, OPT_RTOL},
        {"data", 1, 0, OPT_DATA},
        {"batch", 1, 0, OPT_BATCH},
        {"plan-cache", 1, 0, OPT_PLAN_CACHE},
        {"accuracy", 0, 0, OPT_ACCURACY},
        {"normalize", 1, 0, OPT_NORMALIZE},
        {"concat", 0, 0, OPT_CONCAT},
        {"metrics", 1, 0, OPT_METRICS},
        {"json", 0, 0, OPT_JSON},
        {"top-k", 1, 0, OPT_TOPK},
        {"labels", 1, 0, OPT_LABELS},
        {"softmax", 0, 0, OPT_SOFTMAX},
        {"target", 1, 0, OPT_TARGET},
        {"columns", 1, 0, OPT_COLUMNS},
        {"header", 1, 0, OPT_HEADER},
        {"image", 1, 0, OPT_IMAGE},
        {"resize", 1, 0, OPT_RESIZE},
        {"crop", 1, 0, OPT_CROP},
        {"mean", 1, 0, OPT_MEAN},
        {"std", 1, 0, OPT_STD},
        {"generate", 1, 0, OPT_GENERATE},
        {"prompt", 1, 0, OPT_PROMPT},
        {"temperature", 1, 0, OPT_TEMPERATURE},
        {"greedy", 0, 0, OPT_GREEDY},
        {"context", 1, 0, OPT_CONTEXT},
        {0, 0, 0, 0},
    };
    cli_common co = {0};
    const char *out = NULL, *outputs = NULL, *data = NULL, *metrics_arg = NULL, *labels_file = NULL;
    int64_t data_batch = 256;
    int plan_cache = 0;   /* 0: the library default */
    int accuracy = 0, concat = 0, json = 0, topk_k = 0, softmax = 0;
    mge_data_opts dopts = {0};
    run_data_opts ro = {0};
    ro.header = MGE_CSV_HEADER_AUTO;
    run_image_opts io = {0};
    const char **inputs = calloc((size_t)argc + 1, sizeof *inputs);
    io.files = calloc((size_t)argc + 1, sizeof *io.files);
    if (!inputs || !io.files)
        return 1;
    int ninputs_arg = 0, header_set = 0, temp_set = 0;
    run_gen_opts gen = {0};
    gen.temperature = 1.0;
    uint64_t seed = 0;
    check ck = {0};
    ck.atol = 1e-5;
    ck.rtol = 1e-4;
    ck.worst = -1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":i:o:fqvh", longs, NULL)) != -1) {
        switch (c) {
        case 'i': inputs[ninputs_arg++] = optarg; break;
        case 'o': out = optarg; break;
        case OPT_OUTPUT: outputs = optarg; break;
        case OPT_SEED: seed = cli_u64("--seed", optarg); break;
        case OPT_CHECK: ck.path = optarg; break;
        case OPT_ATOL: ck.atol = cli_double("--atol", optarg, 0); break;
        case OPT_RTOL: ck.rtol = cli_double("--rtol", optarg, 0); break;
        case OPT_DATA: data = optarg; break;
        case OPT_BATCH: data_batch = cli_long("--batch", optarg, 1, 1L << 24); break;
        case OPT_PLAN_CACHE: plan_cache = (int)cli_long("--plan-cache", optarg, 1, 4096); break;
        case OPT_ACCURACY: accuracy = 1; break;
        case OPT_NORMALIZE: {
            double m, sd;
            cli_double_pair("--normalize", optarg, &m, &sd);
            if (!(sd > 0))
                cli_usage("--normalize %s: the standard deviation must be positive", optarg);
            dopts.normalize = 1;
            dopts.mean = (float)m;
            dopts.std = (float)sd;
            break;
        }
        case OPT_CONCAT: concat = 1; break;
        case OPT_METRICS: metrics_arg = optarg; break;
        case OPT_JSON: json = 1; break;
        case OPT_TOPK: topk_k = (int)cli_long("--top-k", optarg, 1, 1000000); break;
        case OPT_LABELS: labels_file = optarg; break;
        case OPT_SOFTMAX: softmax = 1; break;
        case OPT_TARGET: ro.target = optarg; break;
        case OPT_COLUMNS: ro.columns = optarg; break;
        case OPT_HEADER:
            header_set = 1;
            if (strcmp(optarg, "auto") == 0)
                ro.header = MGE_CSV_HEADER_AUTO;
            else if (strcmp(optarg, "yes") == 0)
                ro.header = MGE_CSV_HEADER_YES;
            else if (strcmp(optarg, "no") == 0)
                ro.header = MGE_CSV_HEADER_NO;
            else
                cli_usage("--header %s: expected auto, yes or no", optarg);
            break;
        case OPT_IMAGE: io.files[io.nfiles++] = optarg; break;
        case OPT_RESIZE: run_image_size("--resize", optarg, 1, &io.resize_h, &io.resize_w); break;
        case OPT_CROP: run_image_size("--crop", optarg, 0, &io.crop_h, &io.crop_w); break;
        case OPT_MEAN: io.nmean = run_image_floats("--mean", optarg, 0, io.mean); break;
        case OPT_STD: io.nstd = run_image_floats("--std", optarg, 1, io.std); break;
        case OPT_GENERATE: gen.n = cli_long("--generate", optarg, 1, 1L << 24); break;
        case OPT_PROMPT: gen.prompt = optarg; break;
        case OPT_TEMPERATURE:
            gen.temperature = cli_double("--temperature", optarg, 0);
            if (!(gen.temperature > 0))
                cli_usage("--temperature %s: must be greater than 0 (--greedy takes the best byte)", optarg);
            temp_set = 1;
            break;
        case OPT_GREEDY: gen.greedy = 1; break;
        case OPT_CONTEXT: gen.context = cli_long("--context", optarg, 1, 1L << 20); break;
        default:
            if (!cli_common_opt(c, optarg, &co, help))
                cli_usage("unhandled option");
        }
    }
    if (!gen.n && (gen.prompt || temp_set || gen.greedy || gen.context))
        cli_usage("%s needs --generate N", gen.prompt ? "--prompt" : temp_set ? "--temperature" : gen.greedy ? "--greedy"
                                                                                                 : "--context");
    if (gen.n) {
        if (data || io.nfiles || ninputs_arg || ck.path || out || metrics_arg || accuracy || json || labels_file ||
            softmax)
            cli_usage("--generate prints text to stdout from its own inputs: it takes --prompt, --temperature, "
                      "--top-k, --greedy, --context, --seed and --output, not %s",
                      data ? "--data" : io.nfiles ? "--image" : ninputs_arg ? "--input" : ck.path ? "--check"
                      : out ? "-o" : "--metrics, --json, --labels or --softmax");
        if (gen.greedy && (temp_set || topk_k))
            cli_usage("--greedy takes the best byte: --temperature and --top-k do not apply");
        if (argc - optind > 1)
            cli_usage("too many arguments (one model at most)");
        cli_check_device(co.device);
        gen.top_k = topk_k;
        gen.seed = seed;
        gen.output = outputs;
        gen.threads = cli_threads(&co);
        gen.device = co.device;
        gen.plan_cache = plan_cache;
        int grc = run_generate(optind < argc ? argv[optind] : "-", &gen);
        free(inputs);
        free(io.files);
        return grc;
    }
    int images = io.nfiles > 0;
    if (images) {
        /* with --image, the operands after the model are images too (a shell glob) */
        for (int a = optind + 1; a < argc; a++)
            io.files[io.nfiles++] = argv[a];
        if (optind < argc && looks_like_image(argv[optind]))
            cli_usage("%s is an image: the model comes first (- for a model on stdin): %s MODEL --image FILE...",
                      argv[optind], cli_prog);
    } else if (argc - optind > 1) {
        cli_usage("too many arguments (one model at most)");
    }
    if (data && (ninputs_arg || ck.path))
        cli_usage("--data cannot be combined with --input or --check");
    if (images && (data || ninputs_arg || ck.path))
        cli_usage("--image cannot be combined with --data, --input or --check");
    if (accuracy && metrics_arg)
        cli_usage("--accuracy is --metrics accuracy: give one of them");
    if ((accuracy || metrics_arg) && !data)
        cli_usage("%s needs --data (the labels come from the dataset)", accuracy ? "--accuracy" : "--metrics");
    if (dopts.normalize && !data)
        cli_usage("--normalize needs --data (NPY inputs are used as they are; images take --mean and --std)");
    if ((ro.target || ro.columns || header_set) && !data)
        cli_usage("%s needs --data", ro.target ? "--target" : ro.columns ? "--columns" : "--header");
    if (header_set && !run_data_is_csv(data))
        cli_usage("--header is for CSV files (names ending in .csv)");
    if ((io.resize_h || io.crop_h || io.nmean || io.nstd) && !images)
        cli_usage("%s needs --image", io.resize_h ? "--resize" : io.crop_h ? "--crop" : io.nmean ? "--mean" : "--std");
    if ((labels_file || softmax) && !topk_k)
        cli_usage("%s needs --top-k K", labels_file ? "--labels" : "--softmax");
    if (json && !(accuracy || metrics_arg || topk_k))
        cli_usage("--json needs --metrics, --accuracy or --top-k (output records are NPY)");
    if (outputs && (!*outputs || strstr(outputs, ",,") || outputs[0] == ',' || outputs[strlen(outputs) - 1] == ','))
        cli_usage("--output: empty name in '%s'", outputs);
    int npz = out && ends_with(out, ".npz");
    /* datasets and images come in batches of our choosing: their outputs are
     * one record each, which np.load reads whole */
    concat |= npz || data || images;
    run_metrics *metrics = NULL;
    if (accuracy || metrics_arg)
        metrics = run_metrics_parse("--metrics", accuracy ? "accuracy" : metrics_arg);
    cli_check_device(co.device);
    const char *model = optind < argc ? argv[optind] : "-";
    const char *where = cli_name(model);
    if (accuracy || metrics_arg)
        if (!metrics)
            return 1;

    /* Refuse a terminal before doing any work. With --check, --metrics or
     * --top-k, stdout carries text and records are written only when -o says where. */
    cli_out o = {0};
    int text_out = ck.path || metrics || topk_k;
    int want_out = !text_out || out;
    if (want_out && cli_out_open(&o, out, 1, co.force)) {
        run_metrics_free(metrics);
        return 1;
    }

    mge_error err;
    mge_error_clear(&err);
    mge_graph *g = NULL;
    mge_exec *e = NULL;
    stream *st = NULL;
    int nst = 0, *in_stream = NULL, *outs = NULL, nouts = 0;
    mge_tensor *tin = NULL;
    const mge_tensor **tptr = NULL;
    int rc = 1, steps = 0, nin = 0, nout = 0;
    run_topk topk = {0};
    topk.k = topk_k;
    topk.softmax = softmax;
    topk.json = json;
    run_sink sink = {0};
    sink.out = &o;
    sink.out_name = out ? out : "<stdout>";
    sink.concat = concat;
    sink.npz = npz;
    sink.metrics = metrics;
    sink.topk = topk_k ? &topk : NULL;
    sink.json = json;
    sink.score_k = -1;

    if (labels_file && run_topk_labels(&topk, labels_file))
        goto done;
    int printed = 0;
    mge_buf needs = {0}, reads = {0};
    mge_load_opts lo = {0};
    lo.needs = &needs;
    lo.reads = &reads;
    mge_error nerr;
    int lr = cli_model_load_opts(model, &lo, &g, &printed, &nerr);
    if (lr == 1) {
        /* shape-like operands from inputs: specialize on each step's values */
        bound_run br = {0};
        br.model = model;
        br.where = where;
        br.outputs = outputs;
        br.eo.threads = cli_threads(&co);
        br.eo.device = co.device;
        br.eo.preprocess = 1;
        br.eo.plan_cache = plan_cache;
        int brc = -1;
        if (data || images || metrics)
            cli_error(where, "%s; with %s the values cannot come from the records: make a specialized model with "
                      "mge-opt --bind NAME=FILE.npy", nerr.msg, data ? "--data" : images ? "--image" : "--metrics");
        else if (strcmp(model, "-") == 0)
            cli_error(where, "%s; a model read from stdin cannot be imported again: give it as a file", nerr.msg);
        else if (bound_slots(&br, &reads))
            cli_error(NULL, "out of memory");
        else if (bound_mark(&br, &needs, &nerr) >= 0) {
            if (topk_k)
                sink.score_k = 0;
            brc = run_bound(&br, inputs, ninputs_arg, &ck, &sink, &g, &e, &steps);
        }
        bound_free(&br);
        mge_buf_free(&needs);
        mge_buf_free(&reads);
        if (brc)
            goto done;
        if (!g) {
            /* no records to take the values from: the import's error (it may
             * list other unsupported nodes too) */
            cli_error(where, "%s", nerr.msg);
            goto done;
        }
        goto finish;
    }
    mge_buf_free(&needs);
    mge_buf_free(&reads);
    if (lr) {
        goto done;
    }
    int uninit = 0;
    for (int v = 0; v < g->nvalues; v++)
        uninit += (g->values[v].kind == MGE_VAL_PARAM || g->values[v].kind == MGE_VAL_STATE) && !g->values[v].data;
    if (uninit) {
        if (mge_graph_init_params(g, seed, &err)) {
            cli_mge_error(where, &err);
            goto done;
        }
        if (printed)
            cli_warn_printed(where, uninit, seed);
        else /* a text model without weights runs, but its outputs mean nothing: say so */
            cli_warn(where, "%d parameter%s no values: running with random weights from seed %llu (train the model "
                     "with mge-train, or bind weights with mge-opt --weights)", uninit, uninit == 1 ? " has" : "s have",
                     (unsigned long long)seed);
    }

    if (outputs) {
        outs = malloc(sizeof(int) * (strlen(outputs) + 2));
        char *copy = strdup(outputs);
        if (!outs || !copy) {
            free(copy);
            cli_error(NULL, "out of memory");
            goto done;
        }
        int bad = 0;
        for (char *tok = copy, *save = NULL;; tok = NULL) {
            char *name = strtok_r(tok, ",", &save);
            if (!name)
                break;
            int v = mge_graph_find(g, name);
            if (v < 0) {
                cli_error(where, "--output: the model has no value named '%s'", name);
                bad = 1;
                break;
            }
            outs[nouts++] = v;
        }
        free(copy);
        if (bad)
            goto done;
    }
    int logits = -1;
    run_data_classifier(g, &logits, &ro.loss_labels);
    if ((metrics || topk_k) && !outputs) {
        /* scored: the logits of a cross_entropy loss, else the first output */
        outs = malloc(sizeof(int) * (size_t)(g->noutputs + 1));
        if (!outs) {
            cli_error(NULL, "out of memory");
            goto done;
        }
        memcpy(outs, g->outputs, sizeof(int) * (size_t)g->noutputs);
        nouts = g->noutputs;
        sink.score_k = 0;
        if (logits >= 0) {
            sink.score_k = -1;
            for (int k = 0; k < nouts; k++)
                if (outs[k] == logits && sink.score_k < 0)
                    sink.score_k = k;
            if (sink.score_k < 0) {
                sink.score_k = nouts;
                outs[nouts++] = logits;
            }
        }
    } else if (metrics || topk_k) {
        sink.score_k = 0;
    }
    mge_exec_opts eo = {0};
    eo.threads = cli_threads(&co);
    eo.device = co.device;
    eo.noutputs = nouts;
    eo.outputs = outs;
    eo.preprocess = 1;   /* the model does not change while it runs */
    eo.plan_cache = plan_cache;
    if (mge_exec_create(g, &eo, &e, &err)) {
        cli_mge_error(where, &err);
        goto done;
    }
    nin = mge_exec_ninputs(e);
    nout = mge_exec_noutputs(e);
    if (nout == 0) {
        cli_error(where, "the model has no outputs (declare them with 'output', or use --output)");
        goto done;
    }

    if (data || images) {
        ro.spec = data;
        ro.batch = data_batch;
        ro.dopts = &dopts;
        ro.want_labels = metrics != NULL;
        io.batch = data_batch;
        if (data ? run_data(&ro, g, e, &sink) : run_images(&io, g, e, &sink, where))
            goto done;
        if (run_sink_finish(&sink, g, e))
            goto done;
        rc = 0;
        goto done;
    }

    /* Streams: 0 is the default (stdin or a plain --input FILE); named ones follow. */
    st = calloc((size_t)ninputs_arg + 2, sizeof *st);
    in_stream = calloc((size_t)nin + 1, sizeof *in_stream);
    tin = calloc((size_t)nin + 1, sizeof *tin);
    tptr = calloc((size_t)nin + 1, sizeof *tptr);
    if (!st || !in_stream || !tin || !tptr) {
        cli_error(NULL, "out of memory");
        goto done;
    }
    st[0].path = "-";
    nst = 1;
    int plain = 0;
    for (int a = 0; a < ninputs_arg; a++) {
        const char *arg = inputs[a], *eq = strchr(arg, '=');
        const char *slash = strchr(arg, '/');
        if (!eq || (slash && slash < eq)) {
            if (plain++)
                cli_usage("--input FILE given twice (name the inputs: --input NAME=FILE)");
            st[0].path = arg;
            continue;
        }
        if (!eq[1] || eq == arg)
            cli_usage("--input %s: expected NAME=FILE", arg);
        char *name = strndup(arg, (size_t)(eq - arg));
        int v = name ? mge_graph_find(g, name) : -1;
        if (v < 0 || g->values[v].kind != MGE_VAL_INPUT) {
            cli_error(where, "--input %s: the model has no input named '%s'", arg, name ? name : "");
            free(name);
            goto done;
        }
        free(name);
        int k = -1;
        for (int i = 0; i < nin; i++)
            if (mge_exec_input(e, i) == v)
                k = i;
        if (k < 0) {
            cli_warn(where, "--input %s: input '%s' is not needed for the requested outputs", arg,
                     g->values[v].name);
            continue;
        }
        if (in_stream[k])
            cli_usage("--input: input '%s' given twice", g->values[v].name);
        /* Inputs read from the same file share one stream, in input order. */
        int sidx = -1;
        for (int s = 1; s < nst; s++)
            if (strcmp(st[s].path, eq + 1) == 0)
                sidx = s;
        if (sidx < 0) {
            sidx = nst++;
            st[sidx].path = eq + 1;
        }
        in_stream[k] = sidx;
    }
    int use_default = 0;
    for (int i = 0; i < nin; i++)
        use_default |= in_stream[i] == 0;
    if (use_default && strcmp(st[0].path, "-") == 0 && strcmp(model, "-") == 0) {
        cli_error(NULL, "the model was read from stdin: give the input tensors with --input");
        goto done;
    }
    if (use_default && cli_stdin_ready(st[0].path, "NPY records", "redirect stdin or use --input FILE"))
        goto done;
    for (int k = 1; k < nst; k++)
        if (cli_stdin_ready(st[k].path, "NPY records", "redirect stdin or use --input NAME=FILE"))
            goto done;
    if (ck.path && cli_stdin_ready(ck.path, "--check records", "give --check FILE or redirect stdin"))
        goto done;
    for (int s = 0; s < nst; s++) {
        if (s == 0 && !use_default)
            continue;
        if (strcmp(st[s].path, "-") == 0) {
            st[s].f = stdin;
        } else if (!(st[s].f = fopen(st[s].path, "rb"))) {
            cli_error(st[s].path, "%s", strerror(errno));
            goto done;
        }
    }
    if (ck.path && !(ck.f = strcmp(ck.path, "-") == 0 ? stdin : fopen(ck.path, "rb"))) {
        cli_error(ck.path, "%s", strerror(errno));
        goto done;
    }
    if (ck.path && ck.f == stdin && use_default && st[0].f == stdin) {
        cli_error(NULL, "--check -: stdin already carries the inputs");
        goto done;
    }

    for (;; steps++) {
        int end = 0;
        for (int i = 0; i < nin; i++) {
            stream *s = &st[in_stream[i]];
            const char *iname = g->values[mge_exec_input(e, i)].name;
            mge_status r = mge_npy_read(s->f, &tin[i], &err);
            if (r == MGE_ERR_EOF && i == 0) {
                end = 1;
                break;
            }
            if (r == MGE_ERR_EOF) {
                cli_error(cli_name(s->path), "the input ends in the middle of step %d: no record for input '%s'",
                          steps, iname);
                goto done;
            }
            if (r) {
                const char *hint = r == MGE_ERR_FORMAT && s->reads == 0 && strstr(err.msg, "bad magic")
                                       ? stream_hint(s->f, s->path) : NULL;
                /* the reader already named the kind ("this is a zip archive"): only what to do */
                if (hint && strstr(err.msg, "this is") && strstr(hint, ": "))
                    hint = strstr(hint, ": ") + 2;
                cli_error(cli_name(s->path), "step %d, input '%s': %s%s%s", steps, iname, err.msg,
                          hint ? "; " : "", hint ? hint : "");
                goto done;
            }
            s->reads++;
            tptr[i] = &tin[i];
        }
        if (end) {
            /* Every other stream must end here too. */
            for (int i = 1; i < nin; i++) {
                stream *s = &st[in_stream[i]];
                if (s->f && !at_eof(s->f)) {
                    cli_error(cli_name(s->path), "input '%s' has more records than input '%s' (%d steps)",
                              g->values[mge_exec_input(e, i)].name, g->values[mge_exec_input(e, 0)].name, steps);
                    goto done;
                }
            }
            break;
        }
        mge_status r = mge_exec_run(e, (const mge_tensor *const *)tptr, &err);
        for (int i = 0; i < nin; i++)
            mge_tensor_free(&tin[i]);
        if (r) {
            cli_error(nin ? cli_name(st[in_stream[0]].path) : where, "step %d: %s", steps, err.msg);
            goto done;
        }
        if (run_sink_step(&sink, g, e, NULL, NULL, NULL))
            goto done;
        for (int k = 0; ck.f && k < nout; k++)
            if (check_one(&ck, g, mge_exec_output(e, k), k, steps, mge_exec_result(e, k)))
                goto done;
        if (nin == 0) { /* nothing to read: one step */
            steps++;
            break;
        }
    }
finish:
    cli_note(where, "%d steps", steps);
    if (ck.f) {
        if (!at_eof(ck.f)) {
            cli_error(ck.path, "the reference has more records than the %d steps produced", steps);
            goto done;
        }
        if (cli_verbose >= 0 || ck.bad) {
            fprintf(stderr, "%s: max abs err %.6g, max rel err %.6g", cli_prog, ck.max_abs, ck.max_rel);
            if (ck.compared)
                fprintf(stderr, " (worst: output '%s', step %d, element %lld: %.9g vs %.9g)",
                        g->values[mge_exec_output(e, ck.worst_out)].name, ck.worst_step,
                        (long long)ck.worst_elem, ck.worst_a, ck.worst_b);
            fputc('\n', stderr);
        }
        if (ck.bad) {
            cli_error(ck.path, "%lld of %lld values differ beyond atol %g + rtol %g * |ref|",
                      (long long)ck.bad, (long long)ck.compared, ck.atol, ck.rtol);
            goto done;
        }
    }
    if (run_sink_finish(&sink, g, e))
        goto done;
    rc = 0;
done:
    if (o.f) {
        if (rc == 0)
            rc = cli_out_commit(&o) ? 1 : 0;
        else
            cli_out_abort(&o);
    }
    for (int i = 0; tin && i < nin; i++)
        mge_tensor_free(&tin[i]);
    for (int s = 0; st && s < nst; s++)
        if (st[s].f && st[s].f != stdin)
            fclose(st[s].f);
    if (ck.f && ck.f != stdin)
        fclose(ck.f);
    run_sink_free(&sink);
    run_topk_free(&topk);
    run_metrics_free(metrics);
    free(st);
    free(in_stream);
    free(tin);
    free(tptr);
    free(outs);
    free(inputs);
    free(io.files);
    mge_exec_free(e);
    mge_graph_free(g);
    return rc;
}
