/* mge-run — inference over NPY streams: per step one record per needed
 * input in, one record per output out, until the inputs end. Memory stays
 * constant over any number of steps. */
#include "cli.h"
#include "run_data.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void help(void)
{
    printf("Usage: %s [options] [MODEL|-]\n"
           "Run a model (text form or .mge) on NPY tensor streams. Each step reads one\n"
           "record per needed input, in the model's input order, from stdin (or the\n"
           "files given with --input), and writes one record per output, until the\n"
           "input ends.\n"
           "\n"
           "  -i, --input NAME=FILE  read input NAME from FILE (a stream of records)\n"
           "  -i, --input FILE       read the inputs not named elsewhere from FILE, not stdin\n"
           "      --output NAMES     comma-separated values to output (default: the model's)\n"
           "      --data D           read batches from a dataset instead (IDX, .npz, archive;\n"
           "                         see mge-train(1)), in order\n"
           "      --batch B          batch size for --data (default 256)\n"
           "      --normalize M,S    with --data: u8 images become (x/255 - M) / S, as in training\n"
           "      --accuracy         with --data: print the accuracy of argmax(logits) against\n"
           "                         the labels of the model's cross_entropy loss\n"
           "  -o FILE                write outputs to FILE (default: stdout)\n"
           "      --seed S           seed for parameters without values (default 0)\n"
           "      --check REF.npy    compare outputs with reference records; exit 1 on mismatch\n"
           "      --atol A           absolute tolerance for --check (default 1e-5)\n"
           "      --rtol R           relative tolerance for --check (default 1e-4)\n"
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
           "  mge-run net.mge --data d.npz --accuracy       # a labelled dataset through the model\n", cli_prog);
}

typedef struct stream {
    const char *path;    /* "-" for stdin */
    FILE *f;
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

enum { OPT_OUTPUT = CLI_OPT_FIRST_TOOL, OPT_SEED, OPT_CHECK, OPT_ATOL, OPT_RTOL, OPT_DATA, OPT_BATCH, OPT_ACCURACY, OPT_NORMALIZE };

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
        {"accuracy", 0, 0, OPT_ACCURACY},
        {"normalize", 1, 0, OPT_NORMALIZE},
        {0, 0, 0, 0},
    };
    cli_common co = {0};
    const char *out = NULL, *outputs = NULL, *data = NULL;
    int64_t data_batch = 256;
    int accuracy = 0;
    mge_data_opts dopts = {0};
    const char **inputs = calloc((size_t)argc + 1, sizeof *inputs);
    if (!inputs)
        return 1;
    int ninputs_arg = 0;
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
        default:
            if (!cli_common_opt(c, optarg, &co, help))
                cli_usage("unhandled option");
        }
    }
    if (argc - optind > 1)
        cli_usage("too many arguments (one model at most)");
    if (data && (ninputs_arg || ck.path))
        cli_usage("--data cannot be combined with --input or --check");
    if (accuracy && !data)
        cli_usage("--accuracy needs --data (the labels come from the dataset)");
    if (dopts.normalize && !data)
        cli_usage("--normalize needs --data (NPY inputs are used as they are)");
    if (outputs && (!*outputs || strstr(outputs, ",,") || outputs[0] == ',' || outputs[strlen(outputs) - 1] == ','))
        cli_usage("--output: empty name in '%s'", outputs);
    cli_check_device(co.device);
    const char *model = optind < argc ? argv[optind] : "-";
    const char *where = cli_name(model);

    /* Refuse a terminal before doing any work. With --check, outputs are
     * written only when -o says where. */
    cli_out o = {0};
    int want_out = (!ck.path && !accuracy) || out;
    if (want_out && cli_out_open(&o, out, 1, co.force))
        return 1;

    mge_error err;
    mge_error_clear(&err);
    mge_graph *g = NULL;
    mge_exec *e = NULL;
    stream *st = NULL;
    int nst = 0, *in_stream = NULL, *outs = NULL, nouts = 0;
    mge_tensor *tin = NULL;
    const mge_tensor **tptr = NULL;
    int rc = 1, steps = 0, nin = 0, nout = 0;

    int printed = 0;
    if (cli_model_load_printed(model, &g, &printed)) {
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
        else
            cli_note(where, "%d parameters have no values; initialized from seed %llu", uninit,
                     (unsigned long long)seed);
    }

    if (outputs) {
        outs = malloc(sizeof(int) * (strlen(outputs) + 1));
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
    int logits = -1, labels = -1, logits_k = -1;
    if (accuracy) {
        run_data_classifier(g, &logits, &labels);
        if (logits < 0) {
            cli_error(where, "--accuracy: the model's loss is not cross_entropy over class labels");
            goto done;
        }
        if (!outs) {
            outs = malloc(sizeof(int) * (size_t)(g->noutputs + 1));
            if (!outs) {
                cli_error(NULL, "out of memory");
                goto done;
            }
            memcpy(outs, g->outputs, sizeof(int) * (size_t)g->noutputs);
            nouts = g->noutputs;
        }
        for (int k = 0; k < nouts; k++)
            if (outs[k] == logits)
                logits_k = k;
        if (logits_k < 0) {
            logits_k = nouts;
            outs[nouts++] = logits;
        }
    }
    mge_exec_opts eo = {0};
    eo.threads = cli_threads(&co);
    eo.device = co.device;
    eo.noutputs = nouts;
    eo.outputs = outs;
    eo.preprocess = 1;   /* the model does not change while it runs */
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

    if (data) {
        if (run_data(data, data_batch, &dopts, g, e, &o, out ? out : "<stdout>", labels, logits_k))
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
                cli_error(cli_name(s->path), "step %d, input '%s': %s", steps, iname, err.msg);
                goto done;
            }
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
        for (int k = 0; k < nout; k++) {
            const mge_tensor *t = mge_exec_result(e, k);
            if (o.f && mge_npy_write(o.f, t, &err)) {
                cli_mge_error(out ? out : "<stdout>", &err);
                goto done;
            }
            if (ck.f && check_one(&ck, g, mge_exec_output(e, k), k, steps, t))
                goto done;
        }
        if (o.f && fflush(o.f)) {
            cli_error(out ? out : "<stdout>", "write failed: %s", strerror(errno));
            goto done;
        }
        if (nin == 0) { /* nothing to read: one step */
            steps++;
            break;
        }
    }
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
    free(st);
    free(in_stream);
    free(tin);
    free(tptr);
    free(outs);
    free(inputs);
    mge_exec_free(e);
    mge_graph_free(g);
    return rc;
}
