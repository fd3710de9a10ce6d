/* mge-bench — how fast is a model? Load time, first run, then timed runs
 * (interleaved across models and thread counts so that drift of the
 * machine hits every configuration alike), as a table, CSV or JSON, and a
 * comparison with an earlier JSON result for CI. */
#include "bench_json.h"
#include "cli.h"
#include "inputs.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static void help(void)
{
    printf("Usage: %s [options] MODEL...\n"
           "Time inference (or, with --train, a training step) of each MODEL: load time,\n"
           "first run, then min, mean, percentiles, max, standard deviation and throughput\n"
           "over the timed runs. Several models or thread counts run interleaved, one\n"
           "row each, with the mean time relative to the first row.\n"
           "\n"
           "  -s, --shape NAME=DIMS  shape of input NAME (e.g. x=8x1x28x28); repeatable\n"
           "  -b, --batch B          batch size: the value of N in the inputs (default 1)\n"
           "  -i, --input FILE       real inputs: NPY records, one per input in input order\n"
           "                         (default: random data from --seed)\n"
           "      --seed S           seed for random inputs and uninitialized parameters (default 0)\n"
           "      --warmup N         untimed runs after the first (default 5)\n"
           "  -n, --iters N          timed runs per row (default 50)\n"
           "      --duration S       instead of --iters: timed runs until S seconds have passed\n"
           "      --train            time a training step (forward, backward, SGD update)\n"
           "      --md               a markdown table\n"
           "      --csv              CSV with a header line\n"
           "      --json             one JSON object (keys: see mge-bench(1))\n"
           "  -o FILE                write the report to FILE (default: stdout)\n"
           "      --baseline OLD.json  compare the p50 of each row with an earlier --json result;\n"
           "                         exit 1 when one is slower than allowed\n"
           "      --max-regression PCT  allowed slowdown against --baseline in percent (default 10)\n"
           "  -f, --force            (accepted for symmetry; the report is text)\n"
           "  -q, --quiet            only errors\n"
           "  -v, --verbose          progress and details on stderr, also when it is not a terminal\n"
           "      --threads N[,N...] worker threads, or a list to compare (default: all CPUs)\n"
           "      --device DEV       cpu (default), sim (simulated device), cuda[:N] (plugin)\n"
           "  -h, --help             show this help and exit\n"
           "      --version          show the version and exit\n"
           "\n"
           "Exit status: 0 success, 1 failure or regression, 2 usage error.\n"
           "\n"
           "Examples:\n"
           "  mge-bench net.mge --batch 8                   # latency percentiles and throughput\n"
           "  mge-bench net.mge net.O2.mge --threads 1,2 --md   # models and thread counts side by side\n"
           "  mge-bench net.mge --train --batch 8 --csv       # a training step, as CSV\n",
           cli_prog);
}

enum {
    OPT_SEED = CLI_OPT_FIRST_TOOL, OPT_WARMUP, OPT_DURATION, OPT_TRAIN, OPT_MD, OPT_CSV, OPT_JSON, OPT_BASELINE,
    OPT_MAXREG
};
enum { FMT_TEXT, FMT_MD, FMT_CSV, FMT_JSON };

typedef struct model_ent {
    const char *path;
    mge_graph *g;
    double load_ms;
} model_ent;

typedef struct stats {
    double min, mean, p50, p90, p99, max, stddev, total;
} stats;

typedef struct config {
    int m;                 /* models[] index */
    int threads;
    mge_exec *e;
    mge_trainer *t;
    double lr;
    int64_t step;
    bench_inputs in;
    double first_ms;
    size_t arena;
    size_t dev_arena, dev_persistent, dev_peak;   /* on the device; 0 on the cpu */
    double *ms;            /* timed runs */
    int n, cap;
    stats st;
} config;

typedef struct opts {
    bench_shapes shapes;
    int64_t batch;         /* 0: not given */
    const char *input, *out, *baseline;
    uint64_t seed;
    long warmup, iters;
    double duration;       /* > 0: instead of iters */
    int train, fmt;
    double max_reg;
    int maxreg_given;
    int nthreads, threads[64];
    cli_common co;
} opts;

static void parse_threads(opts *o, const char *arg)
{
    o->nthreads = 0;
    const char *p = arg;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        char tok[32];
        if (n == 0 || n >= sizeof tok)
            cli_usage("--threads %s: expected N or a list N,N,...", arg);
        memcpy(tok, p, n);
        tok[n] = 0;
        if (o->nthreads == (int)(sizeof o->threads / sizeof o->threads[0]))
            cli_usage("--threads %s: more than %d values", arg, (int)(sizeof o->threads / sizeof o->threads[0]));
        o->threads[o->nthreads++] = (int)cli_long("--threads", tok, 1, 256);
        if (!comma)
            break;
        p = comma + 1;
    }
}

static void parse_args(int argc, char **argv, opts *o)
{
    static const struct option longs[] = {
        CLI_LONG_COMMON,
        {"shape", 1, 0, 's'},
        {"batch", 1, 0, 'b'},
        {"input", 1, 0, 'i'},
        {"iters", 1, 0, 'n'},
        {"output", 1, 0, 'o'},
        {"seed", 1, 0, OPT_SEED},
        {"warmup", 1, 0, OPT_WARMUP},
        {"duration", 1, 0, OPT_DURATION},
        {"train", 0, 0, OPT_TRAIN},
        {"md", 0, 0, OPT_MD},
        {"csv", 0, 0, OPT_CSV},
        {"json", 0, 0, OPT_JSON},
        {"baseline", 1, 0, OPT_BASELINE},
        {"max-regression", 1, 0, OPT_MAXREG},
        {0, 0, 0, 0},
    };
    memset(o, 0, sizeof *o);
    o->warmup = 5;
    o->iters = 50;
    o->max_reg = 10;
    int iters_given = 0, nfmt = 0;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":s:b:i:n:o:fqvh", longs, NULL)) != -1) {
        switch (c) {
        case 's':
            if (bench_shape_parse(&o->shapes, optarg))
                exit(1);
            break;
        case 'b': o->batch = cli_long("--batch", optarg, 1, 1L << 24); break;
        case 'i': o->input = optarg; break;
        case 'n':
            o->iters = cli_long("--iters", optarg, 1, 1L << 30);
            iters_given = 1;
            break;
        case 'o': o->out = optarg; break;
        case OPT_SEED: o->seed = cli_u64("--seed", optarg); break;
        case OPT_WARMUP: o->warmup = cli_long("--warmup", optarg, 0, 1L << 30); break;
        case OPT_DURATION:
            o->duration = cli_double("--duration", optarg, 0);
            if (!(o->duration > 0) || o->duration > 1e6)
                cli_usage("--duration %s: expected seconds in (0, 1e6]", optarg);
            break;
        case OPT_TRAIN: o->train = 1; break;
        case OPT_MD: o->fmt = FMT_MD; nfmt++; break;
        case OPT_CSV: o->fmt = FMT_CSV; nfmt++; break;
        case OPT_JSON: o->fmt = FMT_JSON; nfmt++; break;
        case OPT_BASELINE: o->baseline = optarg; break;
        case OPT_MAXREG:
            o->max_reg = cli_double("--max-regression", optarg, 0);
            o->maxreg_given = 1;
            break;
        case CLI_OPT_THREADS: parse_threads(o, optarg); break;
        default:
            if (!cli_common_opt(c, optarg, &o->co, help))
                cli_usage("unhandled option");
        }
    }
    if (nfmt > 1)
        cli_usage("--md, --csv and --json exclude each other");
    if (iters_given && o->duration > 0)
        cli_usage("--iters and --duration exclude each other");
    if (o->maxreg_given && !o->baseline)
        cli_usage("--max-regression needs --baseline");
    if (o->input && o->shapes.n)
        cli_usage("--shape and --input exclude each other (the records carry their shapes)");
    cli_check_device(o->co.device);
    if (optind >= argc)
        cli_usage("no model given");
    if (!o->nthreads)
        o->threads[o->nthreads++] = cli_threads(&o->co);
}

/* ---------------------------------------------------------------- statistics */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Percentile as ONNX Runtime's perf_test takes it: sorted[floor(n * p)]. */
static double pct(const double *sorted, int n, double p)
{
    long i = (long)floor((double)n * p);
    if (i > n - 1)
        i = n - 1;
    if (i < 0)
        i = 0;
    return sorted[i];
}

static void compute_stats(config *c)
{
    stats *s = &c->st;
    memset(s, 0, sizeof *s);
    if (c->n == 0)
        return;
    qsort(c->ms, (size_t)c->n, sizeof *c->ms, cmp_double);
    for (int i = 0; i < c->n; i++)
        s->total += c->ms[i];
    s->mean = s->total / c->n;
    double ss = 0;
    for (int i = 0; i < c->n; i++)
        ss += (c->ms[i] - s->mean) * (c->ms[i] - s->mean);
    s->stddev = c->n > 1 ? sqrt(ss / (c->n - 1)) : 0;
    s->min = c->ms[0];
    s->max = c->ms[c->n - 1];
    s->p50 = pct(c->ms, c->n, 0.50);
    s->p90 = pct(c->ms, c->n, 0.90);
    s->p99 = pct(c->ms, c->n, 0.99);
}

static double samples_per_s(const config *c)
{
    return c->st.total > 0 ? (double)c->in.batch * c->n / (c->st.total / 1e3) : 0;
}

/* ---------------------------------------------------------------- running */

static int run_once(config *c, double *ms, mge_error *err)
{
    double t0 = mge_now();
    mge_status s;
    if (c->t) {
        mge_train_result r;
        s = mge_trainer_step(c->t, (const mge_tensor *const *)c->in.ptr, c->lr, ++c->step, &r, err);
    } else {
        s = mge_exec_run(c->e, (const mge_tensor *const *)c->in.ptr, err);
    }
    *ms = (mge_now() - t0) * 1e3;
    return s == MGE_OK ? 0 : -1;
}

static int push(config *c, double ms)
{
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 64;
        double *p = realloc(c->ms, sizeof *p * (size_t)cap);
        if (!p) {
            cli_error(NULL, "out of memory");
            return -1;
        }
        c->ms = p;
        c->cap = cap;
    }
    c->ms[c->n++] = ms;
    return 0;
}

/* Progress: on a terminal (unless -q), or with -v; at most 10 updates a second. */
static int show_progress;
static double last_progress;

static void progress(const char *phase, long done, long total, int force)
{
    if (!show_progress)
        return;
    double now = mge_now();
    if (!force && now - last_progress < 0.1)
        return;
    last_progress = now;
    if (isatty(STDERR_FILENO)) {
        if (total > 0)
            fprintf(stderr, "\r%s: %s %ld/%ld   ", cli_prog, phase, done, total);
        else
            fprintf(stderr, "\r%s: %s %ld   ", cli_prog, phase, done);
    } else if (force) {
        if (total > 0)
            fprintf(stderr, "%s: %s %ld/%ld\n", cli_prog, phase, done, total);
        else
            fprintf(stderr, "%s: %s\n", cli_prog, phase);
    }
}

static void progress_end(void)
{
    if (show_progress && isatty(STDERR_FILENO))
        fprintf(stderr, "\r%60s\r", "");
}

/* Loads a model (timed), initializes parameters without values. */
static int load_model(model_ent *me, uint64_t seed)
{
    const char *where = cli_name(me->path);
    double t0 = mge_now();
    if (cli_model_load(me->path, &me->g))
        return -1;
    me->load_ms = (mge_now() - t0) * 1e3;
    mge_error err;
    mge_error_clear(&err);
    int uninit = 0;
    for (int v = 0; v < me->g->nvalues; v++)
        uninit += (me->g->values[v].kind == MGE_VAL_PARAM || me->g->values[v].kind == MGE_VAL_STATE) &&
                  !me->g->values[v].data;
    if (uninit && mge_graph_init_params(me->g, seed, &err)) {
        cli_mge_error(where, &err);
        return -1;
    }
    cli_note(where, "loaded in %.3f ms%s", me->load_ms, uninit ? " (parameters initialized from --seed)" : "");
    return 0;
}

/* Executor or trainer, inputs, the first run and the arena of one row. */
static int setup(config *c, const model_ent *me, const opts *o)
{
    const char *where = cli_name(me->path);
    mge_error err;
    mge_error_clear(&err);
    int nin;
    int *ins = NULL;
    if (o->train) {
        if (me->g->loss < 0) {
            cli_error(where, "--train: the model has no loss (add a 'minimize' line)");
            return -1;
        }
        mge_train_opts to;
        memset(&to, 0, sizeof to);
        mge_optim_defaults(MGE_OPTIM_SGD, &to.optim);
        to.threads = c->threads;
        to.device = o->co.device;
        to.seed = o->seed;
        c->lr = to.optim.lr;
        if (mge_trainer_create(me->g, &to, &c->t, &err)) {
            cli_mge_error(where, &err);
            return -1;
        }
        nin = mge_trainer_ninputs(c->t);
        ins = malloc(sizeof(int) * (size_t)(nin + 1));
        for (int i = 0; ins && i < nin; i++)
            ins[i] = mge_trainer_input(c->t, i);
    } else {
        mge_exec_opts eo;
        memset(&eo, 0, sizeof eo);
        eo.threads = c->threads;
        eo.device = o->co.device;
        eo.preprocess = 1;   /* as mge-run: weight preprocessing is load time, not latency */
        if (mge_exec_create(me->g, &eo, &c->e, &err)) {
            cli_mge_error(where, &err);
            return -1;
        }
        if (mge_exec_noutputs(c->e) == 0) {
            cli_error(where, "the model has no outputs (declare them with 'output')");
            return -1;
        }
        nin = mge_exec_ninputs(c->e);
        ins = malloc(sizeof(int) * (size_t)(nin + 1));
        for (int i = 0; ins && i < nin; i++)
            ins[i] = mge_exec_input(c->e, i);
    }
    if (!ins) {
        cli_error(NULL, "out of memory");
        return -1;
    }
    int rc = bench_inputs_make(me->g, where, nin, ins, &o->shapes, o->batch, o->input, o->seed, &c->in);
    free(ins);
    if (rc)
        return -1;
    if (run_once(c, &c->first_ms, &err)) {
        cli_error(o->input ? cli_name(o->input) : where, "first run: %s", err.msg);
        return -1;
    }
    mge_plan_stats ps;
    memset(&ps, 0, sizeof ps);
    mge_status s = c->t ? mge_trainer_stats(c->t, &c->in.bind, &ps, &err) : mge_exec_stats(c->e, &c->in.bind, &ps, &err);
    if (s) {
        cli_mge_error(where, &err);
        return -1;
    }
    c->arena = ps.arena_bytes;
    mge_devstats ds;
    if (mge_exec_device_stats(c->t ? mge_trainer_exec(c->t) : c->e, &ds, &c->dev_arena, NULL, &c->dev_persistent,
                              &err)) {
        cli_mge_error(where, &err);
        return -1;
    }
    c->dev_peak = ds.mem_peak;
    cli_note(where, "threads %d, batch %lld: first run %.3f ms, arena %zu bytes", c->threads, (long long)c->in.batch,
             c->first_ms, c->arena);
    return 0;
}

/* ---------------------------------------------------------------- baseline */

typedef struct base_row {
    const char *model;
    int threads;
    int64_t batch;
    double p50;
} base_row;

typedef struct baseline {
    bj root;
    int train;
    int n;
    base_row *rows;
} baseline;

static int number_field(const bj *o, const char *key, double *v)
{
    const bj *x = bj_get(o, key);
    if (!x || x->type != BJ_NUM || !isfinite(x->num))
        return -1;
    *v = x->num;
    return 0;
}

/* Reads and checks an earlier --json result. Prints and returns -1 when it is not one. */
static int baseline_load(const char *path, baseline *b)
{
    memset(b, 0, sizeof *b);
    const char *fn = cli_name(path);
    void *buf = NULL;
    size_t n = 0;
    int mapped = 0;
    if (cli_slurp(path, &buf, &n, &mapped))
        return -1;
    char msg[256];
    int rc = bj_parse(buf, n, &b->root, msg, sizeof msg);
    mge_file_unslurp(buf, n, mapped);
    if (rc) {
        cli_error(fn, "malformed baseline (not JSON): %s", msg);
        return -1;
    }
    const bj *tool = bj_get(&b->root, "tool");
    if (b->root.type != BJ_OBJ || !tool || tool->type != BJ_STR || strcmp(tool->str, "mge-bench") != 0) {
        cli_error(fn, "malformed baseline: not an mge-bench --json result (no \"tool\": \"mge-bench\")");
        return -1;
    }
    const bj *cfg = bj_get(&b->root, "config"), *train = bj_get(cfg, "train");
    if (train && train->type != BJ_BOOL) {
        cli_error(fn, "malformed baseline: config.train is not true or false");
        return -1;
    }
    b->train = train && train->num != 0;
    const bj *res = bj_get(&b->root, "results");
    if (!res || res->type != BJ_ARR) {
        cli_error(fn, "malformed baseline: no \"results\" array");
        return -1;
    }
    b->rows = calloc((size_t)res->n + 1, sizeof *b->rows);
    if (!b->rows) {
        cli_error(NULL, "out of memory");
        return -1;
    }
    for (int i = 0; i < res->n; i++) {
        const bj *r = &res->items[i], *m = bj_get(r, "model");
        double th, ba, p50;
        const char *bad = !m || m->type != BJ_STR                               ? "a \"model\" string"
                          : number_field(r, "threads", &th) || th < 1 || th > 256 ? "\"threads\" (1..256)"
                          : number_field(r, "batch", &ba) || ba < 1 || ba > 1e15  ? "\"batch\" (a positive number)"
                          : number_field(r, "p50_ms", &p50) || p50 < 0             ? "\"p50_ms\" (a number >= 0)"
                                                                                  : NULL;
        if (bad) {
            cli_error(fn, "malformed baseline: results[%d] lacks %s", i, bad);
            return -1;
        }
        b->rows[b->n++] = (base_row){m->str, (int)th, (int64_t)ba, p50};
    }
    return 0;
}

static void baseline_free(baseline *b)
{
    bj_free(&b->root);
    free(b->rows);
    memset(b, 0, sizeof *b);
}

static const base_row *baseline_find(const baseline *b, const char *model, int threads, int64_t batch)
{
    for (int i = 0; i < b->n; i++)
        if (strcmp(b->rows[i].model, model) == 0 && b->rows[i].threads == threads && b->rows[i].batch == batch)
            return &b->rows[i];
    return NULL;
}

/* Every row must have a counterpart in the baseline. */
static int baseline_match(const baseline *b, const char *path, const opts *o, const config *cs, int nc,
                          const model_ent *ms)
{
    const char *fn = cli_name(path);
    for (int i = 0; i < nc; i++) {
        const char *model = ms[cs[i].m].path;
        if (b->train == o->train && baseline_find(b, model, cs[i].threads, cs[i].in.batch))
            continue;
        char list[512];
        size_t k = 0;
        list[0] = 0;
        for (int j = 0; j < b->n && k < sizeof list; j++) {
            int w = snprintf(list + k, sizeof list - k, "%s%s (threads %d, batch %lld)", j ? ", " : "",
                             b->rows[j].model, b->rows[j].threads, (long long)b->rows[j].batch);
            if (w < 0)
                break;
            k += (size_t)w;
        }
        if (b->train != o->train)
            cli_error(fn, "baseline from another configuration: it times %s, this run %s", b->train ? "training" : "inference",
                      o->train ? "training (--train)" : "inference");
        else
            cli_error(fn, "baseline from another model or configuration: no result for %s (threads %d, batch %lld); it has %s",
                      model, cs[i].threads, (long long)cs[i].in.batch, b->n ? list : "no results");
        return -1;
    }
    return 0;
}

/* Returns the number of rows slower than allowed (each printed). */
static int baseline_compare(const baseline *b, const char *path, const opts *o, const config *cs, int nc,
                            const model_ent *ms)
{
    int bad = 0;
    for (int i = 0; i < nc; i++) {
        const char *model = ms[cs[i].m].path;
        const base_row *r = baseline_find(b, model, cs[i].threads, cs[i].in.batch);
        if (!r)
            continue;
        double cur = cs[i].st.p50, limit = r->p50 * (1 + o->max_reg / 100);
        double change = r->p50 > 0 ? (cur / r->p50 - 1) * 100 : INFINITY;
        if (cur > limit) {
            cli_error(NULL, "%s (threads %d, batch %lld): p50 %.4g ms against %.4g ms in %s (%+.1f%%, more than the allowed %g%%)",
                      model, cs[i].threads, (long long)cs[i].in.batch, cur, r->p50, cli_name(path), change, o->max_reg);
            bad++;
        } else if (cli_verbose >= 0) {
            fprintf(stderr, "%s: %s (threads %d, batch %lld): p50 %.4g ms against %.4g ms in %s (%+.1f%%, within %g%%)\n",
                    cli_prog, model, cs[i].threads, (long long)cs[i].in.batch, cur, r->p50, cli_name(path), change,
                    o->max_reg);
        }
    }
    return bad;
}

/* ---------------------------------------------------------------- reports */

static void machine(char *cpu, size_t n, long *cores)
{
    snprintf(cpu, n, "%s", cli_cpu_model());
    *cores = sysconf(_SC_NPROCESSORS_ONLN);
}

static void json_num(mge_buf *b, double v)
{
    if (isfinite(v))
        mge_buf_printf(b, "%.6g", v);
    else
        mge_buf_printf(b, "null");
}

static void report_json(mge_buf *b, const opts *o, const config *cs, int nc, const model_ent *ms, size_t rss)
{
    char cpu[256];
    long cores;
    machine(cpu, sizeof cpu, &cores);
    mge_buf_printf(b, "{\n  \"tool\": \"mge-bench\",\n  \"version\": \"%s\",\n  \"machine\": {\"cpu\": ",
                   MGE_VERSION_STRING);
    cli_json_str(b, cpu);
    mge_buf_printf(b, ", \"cores\": %ld},\n  \"config\": {\"device\": ", cores);
    cli_json_str(b, o->co.device ? o->co.device : "cpu");
    mge_buf_printf(b, ", \"train\": %s, \"warmup\": %ld, ", o->train ? "true" : "false", o->warmup);
    if (o->duration > 0)
        mge_buf_printf(b, "\"iters\": null, \"duration_s\": %g, ", o->duration);
    else
        mge_buf_printf(b, "\"iters\": %ld, \"duration_s\": null, ", o->iters);
    mge_buf_printf(b, "\"seed\": %llu, \"input\": ", (unsigned long long)o->seed);
    if (o->input)
        cli_json_str(b, o->input);
    else
        mge_buf_printf(b, "null");
    mge_buf_printf(b, ", \"shapes\": [");
    for (int i = 0; i < o->shapes.n; i++) {
        if (i)
            mge_buf_printf(b, ", ");
        cli_json_str(b, o->shapes.s[i].arg);
    }
    mge_buf_printf(b, "]},\n  \"results\": [");
    for (int i = 0; i < nc; i++) {
        const config *c = &cs[i];
        mge_buf_printf(b, "%s\n    {\"model\": ", i ? "," : "");
        cli_json_str(b, ms[c->m].path);
        mge_buf_printf(b, ", \"threads\": %d, \"batch\": %lld, \"load_ms\": ", c->threads, (long long)c->in.batch);
        const double v[] = {ms[c->m].load_ms, c->first_ms, c->st.min,    c->st.mean,      c->st.p50, c->st.p90,
                            c->st.p99,        c->st.max,   c->st.stddev, samples_per_s(c), c->st.mean / cs[0].st.mean};
        const char *k[] = {NULL,      "first_ms", "min_ms",    "mean_ms",       "p50_ms", "p90_ms",
                           "p99_ms", "max_ms",   "stddev_ms", "samples_per_s", "ratio"};
        for (int j = 0; j < (int)(sizeof v / sizeof v[0]); j++) {
            if (k[j])
                mge_buf_printf(b, ", \"%s\": ", k[j]);
            json_num(b, v[j]);
        }
        mge_buf_printf(b,
                       ", \"peak_rss_bytes\": %zu, \"arena_bytes\": %zu, \"device_arena_bytes\": %zu, "
                       "\"device_persistent_bytes\": %zu, \"device_peak_bytes\": %zu, \"runs\": %d}",
                       rss, c->arena, c->dev_arena, c->dev_persistent, c->dev_peak, c->n);
    }
    mge_buf_printf(b, "\n  ]\n}\n");
}

static void csv_field(mge_buf *b, const char *s)
{
    if (!strpbrk(s, ",\"\n\r")) {
        mge_buf_printf(b, "%s", s);
        return;
    }
    mge_buf_put(b, "\"", 1);
    for (const char *p = s; *p; p++) {
        if (*p == '"')
            mge_buf_put(b, "\"", 1);
        mge_buf_put(b, p, 1);
    }
    mge_buf_put(b, "\"", 1);
}

static void report_csv(mge_buf *b, const opts *o, const config *cs, int nc, const model_ent *ms, size_t rss)
{
    mge_buf_printf(b, "model,threads,batch,train,load_ms,first_ms,min_ms,mean_ms,p50_ms,p90_ms,p99_ms,max_ms,"
                      "stddev_ms,samples_per_s,peak_rss_bytes,arena_bytes,runs,ratio\n");
    for (int i = 0; i < nc; i++) {
        const config *c = &cs[i];
        csv_field(b, ms[c->m].path);
        mge_buf_printf(b, ",%d,%lld,%d,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.2f,%zu,%zu,%d,%.3f\n", c->threads,
                       (long long)c->in.batch, o->train, ms[c->m].load_ms, c->first_ms, c->st.min, c->st.mean,
                       c->st.p50, c->st.p90, c->st.p99, c->st.max, c->st.stddev, samples_per_s(c), rss, c->arena, c->n,
                       c->st.mean / cs[0].st.mean);
    }
}

enum { NCOL = 17 };

/* The text table and --md: the same cells, aligned or between pipes. */
static void report_table(mge_buf *b, const opts *o, const config *cs, int nc, const model_ent *ms, size_t rss)
{
    static const char *head[NCOL] = {"model",  "threads", "batch",  "load ms",   "first ms",  "min ms",
                                      "mean ms", "p50 ms", "p90 ms", "p99 ms",    "max ms",    "stddev ms",
                                      "samples/s", "peak RSS", "arena", "ratio", "device peak"};
    /* the device's own memory, when there is one */
    int ncol = o->co.device && strcmp(o->co.device, "cpu") != 0 ? NCOL : NCOL - 1;
    char(*cell)[NCOL][96] = calloc((size_t)nc + 1, sizeof *cell);
    if (!cell) {
        b->failed = 1;
        return;
    }
    int width[NCOL];
    for (int j = 0; j < NCOL; j++) {
        snprintf(cell[0][j], sizeof cell[0][j], "%s", head[j]);
        width[j] = (int)strlen(head[j]);
    }
    for (int i = 0; i < nc; i++) {
        const config *c = &cs[i];
        char(*r)[96] = cell[i + 1];
        snprintf(r[0], 96, "%s", cli_name(ms[c->m].path));
        snprintf(r[1], 96, "%d", c->threads);
        snprintf(r[2], 96, "%lld", (long long)c->in.batch);
        const double v[] = {ms[c->m].load_ms, c->first_ms, c->st.min, c->st.mean, c->st.p50,
                            c->st.p90,        c->st.p99,   c->st.max, c->st.stddev};
        for (int j = 0; j < 9; j++)
            snprintf(r[3 + j], 96, "%.3f", v[j]);
        snprintf(r[12], 96, "%.1f", samples_per_s(c));
        cli_human_bytes((double)rss, r[13], 96);
        cli_human_bytes((double)c->arena, r[14], 96);
        snprintf(r[15], 96, "%.2fx", c->st.mean / cs[0].st.mean);
        cli_human_bytes((double)c->dev_peak, r[16], 96);
        for (int j = 0; j < ncol; j++)
            if ((int)strlen(r[j]) > width[j])
                width[j] = (int)strlen(r[j]);
    }
    for (int i = 0; i <= nc; i++) {
        for (int j = 0; j < ncol; j++) {
            /* the model name left-aligned, numbers right-aligned */
            int w = j == 0 ? -width[j] : width[j];
            if (o->fmt == FMT_MD)
                mge_buf_printf(b, "| %*s ", w, cell[i][j]);
            else
                mge_buf_printf(b, "%s%*s", j ? "  " : "", w, cell[i][j]);
        }
        mge_buf_printf(b, o->fmt == FMT_MD ? "|\n" : "\n");
        if (i == 0 && o->fmt == FMT_MD) {
            for (int j = 0; j < ncol; j++) {
                mge_buf_printf(b, "| ");
                for (int k = 0; k < width[j] - (j > 0); k++)
                    mge_buf_put(b, "-", 1);
                mge_buf_printf(b, "%s ", j > 0 ? ":" : "");
            }
            mge_buf_printf(b, "|\n");
        }
    }
    free(cell);
}

/* ---------------------------------------------------------------- main */

int main(int argc, char **argv)
{
    cli_init("mge-bench", argv);
    opts o;
    parse_args(argc, argv, &o);
    show_progress = cli_verbose > 0 || (cli_verbose >= 0 && isatty(STDERR_FILENO));

    int nm = argc - optind, nc = nm * o.nthreads, rc = 1;
    model_ent *ms = calloc((size_t)nm, sizeof *ms);
    config *cs = calloc((size_t)nc, sizeof *cs);
    baseline base;
    memset(&base, 0, sizeof base);
    mge_buf rep = {0};
    mge_error err;
    mge_error_clear(&err);
    if (!ms || !cs) {
        cli_error(NULL, "out of memory");
        goto done;
    }
    /* A bad baseline fails before any timing. */
    if (o.baseline && baseline_load(o.baseline, &base))
        goto done;

    for (int m = 0; m < nm; m++) {
        ms[m].path = argv[optind + m];
        if (load_model(&ms[m], o.seed))
            goto done;
    }
    for (int m = 0; m < nm; m++)
        for (int t = 0; t < o.nthreads; t++) {
            config *c = &cs[m * o.nthreads + t];
            c->m = m;
            c->threads = o.threads[t];
            progress("first runs", m * o.nthreads + t + 1, nc, 1);
            if (setup(c, &ms[m], &o))
                goto done;
        }
    if (o.baseline && baseline_match(&base, o.baseline, &o, cs, nc, ms))
        goto done;

    /* Warm-up, then the timed rounds: one run of each row in turn. */
    for (long w = 0; w < o.warmup; w++) {
        progress("warmup", w + 1, o.warmup, w == 0);
        for (int i = 0; i < nc; i++) {
            double ms_;
            if (run_once(&cs[i], &ms_, &err)) {
                cli_error(cli_name(ms[cs[i].m].path), "warmup run %ld: %s", w + 1, err.msg);
                goto done;
            }
        }
    }
    double t_start = mge_now();
    for (long round = 0;; round++) {
        if (o.duration > 0 ? round > 0 && mge_now() - t_start >= o.duration : round >= o.iters)
            break;
        progress("timed runs", round + 1, o.duration > 0 ? 0 : o.iters, round == 0);
        for (int i = 0; i < nc; i++) {
            double t;
            if (run_once(&cs[i], &t, &err)) {
                cli_error(cli_name(ms[cs[i].m].path), "timed run %ld: %s", round + 1, err.msg);
                goto done;
            }
            if (push(&cs[i], t))
                goto done;
        }
    }
    progress_end();
    for (int i = 0; i < nc; i++)
        compute_stats(&cs[i]);

    /* Peak RSS of the whole process (ru_maxrss is KiB on Linux): with several
     * rows it covers all of them, which is why every row shows the same figure. */
    struct rusage ru;
    size_t rss = getrusage(RUSAGE_SELF, &ru) == 0 ? (size_t)ru.ru_maxrss * 1024 : 0;
    switch (o.fmt) {
    case FMT_JSON: report_json(&rep, &o, cs, nc, ms, rss); break;
    case FMT_CSV: report_csv(&rep, &o, cs, nc, ms, rss); break;
    default: report_table(&rep, &o, cs, nc, ms, rss); break;
    }
    if (rep.failed) {
        cli_error(NULL, "out of memory");
        goto done;
    }
    if (cli_write_buf(o.out, &rep, 0, 1))
        goto done;
    if (o.baseline && baseline_compare(&base, o.baseline, &o, cs, nc, ms))
        goto done;
    rc = 0;
done:
    progress_end();
    mge_buf_free(&rep);
    baseline_free(&base);
    for (int i = 0; cs && i < nc; i++) {
        mge_exec_free(cs[i].e);
        mge_trainer_free(cs[i].t);
        bench_inputs_free(&cs[i].in);
        free(cs[i].ms);
    }
    for (int m = 0; ms && m < nm; m++)
        mge_graph_free(ms[m].g);
    free(cs);
    free(ms);
    bench_shapes_free(&o.shapes);
    return rc;
}
