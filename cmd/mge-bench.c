/* mge-bench — how fast is a model? Load time, first run, then timed runs
 * (interleaved across models and thread counts so that drift of the
 * machine hits every configuration alike), as a table, CSV or JSON, and a
 * comparison with an earlier JSON result for CI. */
#include "bench_base.h"
#include "bench_sets.h"
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
           "first run, then min, percentiles and throughput over the timed runs. Several\n"
           "models, batches, shape sets or thread counts run interleaved, one row each,\n"
           "with the mean time relative to the first row.\n"
           "\n"
           "  -s, --shape NAME=DIMS  shape of input NAME (e.g. x=8x1x28x28); repeatable; naming\n"
           "                         an input again starts a new set (one row per set)\n"
           "  -b, --batch B[,B...]   batch size: the value of N in the inputs (default 1);\n"
           "                         a list gives one row per batch\n"
           "  -i, --input FILE       real inputs: NPY records, one per input in input order\n"
           "                         (default: random data from --seed)\n"
           "      --seed S           seed for random inputs and uninitialized parameters (default 0)\n"
           "      --warmup N         untimed runs after the first (default 5)\n"
           "  -n, --iters N          timed runs per row (default 50), split into --rounds\n"
           "      --duration S       instead of --iters: timed runs until S seconds have passed\n"
           "      --rounds R         interleaved rounds of the timed runs (default 5); the\n"
           "                         gate statistic is the median of the rounds' fastest runs\n"
           "      --train            time a training step (forward, backward, SGD update)\n"
           "      --wide             the table with every statistic (load, first run, mean,\n"
           "                         p90, max, stddev, peak RSS, gate)\n"
           "      --md               a markdown table\n"
           "      --csv              CSV with a header line (every statistic)\n"
           "      --json             one JSON object (keys: see mge-bench(1))\n"
           "  -o FILE                write the report to FILE (default: stdout)\n"
           "      --baseline OLD.json  compare each row's gate statistic with an earlier --json\n"
           "                         result (rows match by file basename, input shapes and\n"
           "                         threads; without --threads, the baseline's thread counts\n"
           "                         run); exit 1 when one is slower than allowed\n"
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
    OPT_MAXREG, OPT_ROUNDS, OPT_WIDE
};
enum { FMT_TEXT, FMT_MD, FMT_CSV, FMT_JSON };

typedef struct model_ent {
    const char *path;
    mge_graph *g;
    double load_ms;
} model_ent;

typedef struct stats {
    double min, mean, p50, p90, p99, max, stddev, total;
    double gate;           /* the median of the rounds' fastest runs */
} stats;

typedef struct config {
    int m;                 /* models[] index */
    int var;               /* batch or shape set (bench_sets) */
    int threads;
    mge_exec *e;
    mge_trainer *t;
    double lr;
    int64_t step;
    bench_inputs in;
    char *shapes;          /* "x=1x1x28x28 label=1": the inputs' shapes (the baseline key) */
    double first_ms;
    size_t arena;
    size_t dev_arena, dev_persistent, dev_peak;   /* on the device; 0 on the cpu */
    double *ms;            /* timed runs */
    int n, cap;
    int *round_end;        /* runs after each round */
    double *round_min;     /* the fastest run of each round */
    stats st;
} config;

typedef struct opts {
    bench_sets sets;
    const char *input, *out, *baseline;
    uint64_t seed;
    long warmup, iters;
    double duration;       /* > 0: instead of iters */
    int rounds;
    int train, fmt, wide;
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
        {"rounds", 1, 0, OPT_ROUNDS},
        {"train", 0, 0, OPT_TRAIN},
        {"wide", 0, 0, OPT_WIDE},
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
    o->rounds = 5;
    o->max_reg = 10;
    int iters_given = 0, nfmt = 0;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":s:b:i:n:o:fqvh", longs, NULL)) != -1) {
        switch (c) {
        case 's':
            if (bench_sets_add_shape(&o->sets, optarg))
                exit(1);
            break;
        case 'b': bench_sets_batch(&o->sets, optarg); break;
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
        case OPT_ROUNDS: o->rounds = (int)cli_long("--rounds", optarg, 1, 1000); break;
        case OPT_TRAIN: o->train = 1; break;
        case OPT_WIDE: o->wide = 1; break;
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
    if (o->wide && (o->fmt == FMT_CSV || o->fmt == FMT_JSON))
        cli_usage("--wide applies to the table (--csv and --json have every statistic)");
    if (iters_given && o->duration > 0)
        cli_usage("--iters and --duration exclude each other");
    if (o->maxreg_given && !o->baseline)
        cli_usage("--max-regression needs --baseline");
    if (o->input && o->sets.n)
        cli_usage("--shape and --input exclude each other (the records carry their shapes)");
    if (o->input && o->sets.nbatch > 1)
        cli_usage("several --batch values and --input exclude each other (the records carry their batch)");
    bench_sets_check(&o->sets);
    cli_check_device(o->co.device);
    if (optind >= argc)
        cli_usage("no model given");
    /* the thread counts default later: --baseline may supply them */
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

/* The fastest run of each round (runs round_end[r-1]..round_end[r]), and
 * the gate statistic: the median of those. Other processes only ever add
 * time to a run, so a round's fastest run is the one they disturbed least,
 * and the median over rounds ignores one round whose best run was a fluke
 * (either way). On a shared two-core machine, over 8 back-to-back runs of
 * LeNet, it varied by 4-10% where the median of all runs varied by 19%. */
static void round_minima(config *c, int rounds)
{
    double *tmp = malloc(sizeof *tmp * (size_t)rounds + 1);
    int k = 0;
    for (int r = 0, lo = 0; r < rounds; lo = c->round_end[r++]) {
        c->round_min[r] = NAN;
        for (int i = lo; i < c->round_end[r]; i++)
            if (!(c->ms[i] >= c->round_min[r]))
                c->round_min[r] = c->ms[i];
        if (tmp && c->round_end[r] > lo)
            tmp[k++] = c->round_min[r];
    }
    c->st.gate = NAN;
    if (k) {
        qsort(tmp, (size_t)k, sizeof *tmp, cmp_double);
        /* an even count: the mean of the middle two */
        c->st.gate = k % 2 ? tmp[k / 2] : (tmp[k / 2 - 1] + tmp[k / 2]) / 2;
    }
    free(tmp);
}

static void compute_stats(config *c, int rounds)
{
    stats *s = &c->st;
    memset(s, 0, sizeof *s);
    if (c->n == 0)
        return;
    round_minima(c, rounds);
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
    if (!isfinite(s->gate))   /* no round had runs, or out of memory */
        s->gate = s->p50;
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
    int rc = bench_inputs_make(me->g, where, nin, ins, bench_sets_shapes(&o->sets, c->var),
                               bench_sets_batch_of(&o->sets, c->var), o->input, o->seed, &c->in);
    free(ins);
    if (rc)
        return -1;
    /* the key of the row: each input's name and dims, in input order */
    mge_buf key = {0};
    for (int i = 0; i < c->in.n; i++) {
        const mge_tensor *t = c->in.ptr[i];
        mge_buf_printf(&key, "%s%s=", i ? " " : "", me->g->values[c->in.values[i]].name);
        for (int k = 0; k < t->ndim; k++)
            mge_buf_printf(&key, "%s%lld", k ? "x" : "", (long long)t->dims[k]);
        if (t->ndim == 0)
            mge_buf_printf(&key, "scalar");
    }
    mge_buf_put(&key, "", 1);
    if (key.failed) {
        mge_buf_free(&key);
        cli_error(NULL, "out of memory");
        return -1;
    }
    c->shapes = key.p;   /* owned now */
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
    mge_buf_printf(b, "\"rounds\": %d, \"seed\": %llu, \"input\": ", o->rounds, (unsigned long long)o->seed);
    if (o->input)
        cli_json_str(b, o->input);
    else
        mge_buf_printf(b, "null");
    mge_buf_printf(b, ", \"shapes\": [");
    for (int k = 0, j = 0; k < o->sets.n; k++)
        for (int i = 0; i < o->sets.set[k].n; i++) {
            if (j++)
                mge_buf_printf(b, ", ");
            cli_json_str(b, o->sets.set[k].s[i].arg);
        }
    mge_buf_printf(b, "]},\n  \"results\": [");
    for (int i = 0; i < nc; i++) {
        const config *c = &cs[i];
        mge_buf_printf(b, "%s\n    {\"model\": ", i ? "," : "");
        cli_json_str(b, ms[c->m].path);
        mge_buf_printf(b, ", \"name\": ");
        cli_json_str(b, bench_key_name(ms[c->m].path));
        mge_buf_printf(b, ", \"shapes\": ");
        cli_json_str(b, c->shapes);
        mge_buf_printf(b, ", \"threads\": %d, \"batch\": %lld, \"load_ms\": ", c->threads, (long long)c->in.batch);
        const double v[] = {ms[c->m].load_ms, c->first_ms, c->st.min,    c->st.mean,      c->st.p50, c->st.p90,
                            c->st.p99,        c->st.max,   c->st.stddev, samples_per_s(c), c->st.mean / cs[0].st.mean,
                            c->st.gate};
        const char *k[] = {NULL,      "first_ms", "min_ms",    "mean_ms",       "p50_ms", "p90_ms",
                           "p99_ms", "max_ms",   "stddev_ms", "samples_per_s", "ratio",  "gate_ms"};
        for (int j = 0; j < (int)(sizeof v / sizeof v[0]); j++) {
            if (k[j])
                mge_buf_printf(b, ", \"%s\": ", k[j]);
            json_num(b, v[j]);
        }
        mge_buf_printf(b, ", \"round_min_ms\": [");
        for (int r = 0; r < o->rounds; r++) {
            mge_buf_printf(b, "%s", r ? ", " : "");
            json_num(b, c->round_min[r]);
        }
        mge_buf_printf(b,
                       "], \"peak_rss_bytes\": %zu, \"arena_bytes\": %zu, \"device_arena_bytes\": %zu, "
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
    /* columns after "ratio" came later: appended, so older readers keep working */
    mge_buf_printf(b, "model,threads,batch,train,load_ms,first_ms,min_ms,mean_ms,p50_ms,p90_ms,p99_ms,max_ms,"
                      "stddev_ms,samples_per_s,peak_rss_bytes,arena_bytes,runs,ratio,gate_ms,shapes\n");
    for (int i = 0; i < nc; i++) {
        const config *c = &cs[i];
        csv_field(b, ms[c->m].path);
        mge_buf_printf(b, ",%d,%lld,%d,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.2f,%zu,%zu,%d,%.3f,%.4f,", c->threads,
                       (long long)c->in.batch, o->train, ms[c->m].load_ms, c->first_ms, c->st.min, c->st.mean,
                       c->st.p50, c->st.p90, c->st.p99, c->st.max, c->st.stddev, samples_per_s(c), rss, c->arena, c->n,
                       c->st.mean / cs[0].st.mean, c->st.gate);
        csv_field(b, c->shapes);
        mge_buf_printf(b, "\n");
    }
}

/* Columns of the text table and --md; the narrow default shows the ones
 * marked 1, --wide all of them. */
enum {
    C_MODEL, C_SHAPES, C_THREADS, C_BATCH, C_LOAD, C_FIRST, C_MIN, C_MEAN, C_P50, C_P90, C_P99, C_MAX, C_STDDEV,
    C_GATE, C_SPS, C_RSS, C_ARENA, C_RATIO, C_DEVPEAK, NCOL
};
static const struct {
    const char *head;
    int narrow;
} cols[NCOL] = {
    {"model", 1},   {"inputs", 1},  {"threads", 1},   {"batch", 1},    {"load ms", 0}, {"first ms", 0}, {"min ms", 1},
    {"mean ms", 0}, {"p50 ms", 1},  {"p90 ms", 0},    {"p99 ms", 1},   {"max ms", 0},  {"stddev ms", 0},
    {"gate ms", 0}, {"samples/s", 1}, {"peak RSS", 0}, {"arena", 1},   {"ratio", 1},   {"device peak", 1},
};

static void report_table(mge_buf *b, const opts *o, const config *cs, int nc, const model_ent *ms, size_t rss)
{
    int show[NCOL];
    for (int j = 0; j < NCOL; j++)
        show[j] = o->wide || cols[j].narrow;
    show[C_SHAPES] = o->sets.n > 0;   /* the shapes when --shape chose them */
    /* the device's own memory, when there is one */
    show[C_DEVPEAK] = o->co.device && strcmp(o->co.device, "cpu") != 0;
    char(*cell)[NCOL][160] = calloc((size_t)nc + 1, sizeof *cell);
    if (!cell) {
        b->failed = 1;
        return;
    }
    int width[NCOL];
    for (int j = 0; j < NCOL; j++) {
        snprintf(cell[0][j], sizeof cell[0][j], "%s", cols[j].head);
        width[j] = (int)strlen(cols[j].head);
    }
    for (int i = 0; i < nc; i++) {
        const config *c = &cs[i];
        char(*r)[160] = cell[i + 1];
        snprintf(r[C_MODEL], 160, "%s", cli_name(ms[c->m].path));
        snprintf(r[C_SHAPES], 160, "%s", c->shapes);
        snprintf(r[C_THREADS], 160, "%d", c->threads);
        snprintf(r[C_BATCH], 160, "%lld", (long long)c->in.batch);
        const double v[] = {ms[c->m].load_ms, c->first_ms, c->st.min, c->st.mean,   c->st.p50,
                            c->st.p90,        c->st.p99,   c->st.max, c->st.stddev, c->st.gate};
        for (int j = 0; j < 10; j++)
            snprintf(r[C_LOAD + j], 160, "%.3f", v[j]);
        snprintf(r[C_SPS], 160, "%.1f", samples_per_s(c));
        cli_human_bytes((double)rss, r[C_RSS], 160);
        cli_human_bytes((double)c->arena, r[C_ARENA], 160);
        snprintf(r[C_RATIO], 160, "%.2fx", c->st.mean / cs[0].st.mean);
        cli_human_bytes((double)c->dev_peak, r[C_DEVPEAK], 160);
        for (int j = 0; j < NCOL; j++)
            if ((int)strlen(r[j]) > width[j])
                width[j] = (int)strlen(r[j]);
    }
    for (int i = 0; i <= nc; i++) {
        for (int j = 0, k = 0; j < NCOL; j++) {
            if (!show[j])
                continue;
            /* the model name and shapes left-aligned, numbers right-aligned */
            int w = j <= C_SHAPES ? -width[j] : width[j];
            if (o->fmt == FMT_MD)
                mge_buf_printf(b, "| %*s ", w, cell[i][j]);
            else
                mge_buf_printf(b, "%s%*s", k++ ? "  " : "", w, cell[i][j]);
        }
        mge_buf_printf(b, o->fmt == FMT_MD ? "|\n" : "\n");
        if (i == 0 && o->fmt == FMT_MD) {
            for (int j = 0; j < NCOL; j++) {
                if (!show[j])
                    continue;
                int right = j > C_SHAPES;
                mge_buf_printf(b, "| ");
                for (int k = 0; k < width[j] - right; k++)
                    mge_buf_put(b, "-", 1);
                mge_buf_printf(b, "%s ", right ? ":" : "");
            }
            mge_buf_printf(b, "|\n");
        }
    }
    free(cell);
}

/* ---------------------------------------------------------------- main */

/* The rows as bench_base sees them. Returns NULL when out of memory (printed). */
static bench_key *keys_of(const config *cs, int nc, const model_ent *ms)
{
    bench_key *k = calloc((size_t)nc + 1, sizeof *k);
    if (!k) {
        cli_error(NULL, "out of memory");
        return NULL;
    }
    for (int i = 0; i < nc; i++)
        k[i] = (bench_key){ms[cs[i].m].path, bench_key_name(ms[cs[i].m].path), cs[i].shapes, cs[i].threads,
                           cs[i].in.batch, cs[i].st.gate};
    return k;
}

int main(int argc, char **argv)
{
    cli_init("mge-bench", argv);
    opts o;
    parse_args(argc, argv, &o);
    show_progress = cli_verbose > 0 || (cli_verbose >= 0 && isatty(STDERR_FILENO));

    int nm = argc - optind, nv = bench_sets_count(&o.sets), nc = 0, rc = 1;
    model_ent *ms = calloc((size_t)nm, sizeof *ms);
    config *cs = NULL;
    bench_key *keys = NULL;
    bench_base base;
    memset(&base, 0, sizeof base);
    mge_buf rep = {0};
    mge_error err;
    mge_error_clear(&err);
    char cpu[256];
    long cores;
    machine(cpu, sizeof cpu, &cores);
    if (!ms) {
        cli_error(NULL, "out of memory");
        goto done;
    }
    /* A bad baseline fails before any timing. */
    if (o.baseline) {
        if (bench_base_load(o.baseline, &base))
            goto done;
        bench_base_machine_check(&base, cpu, cores);
        /* without --threads, the thread counts the baseline was recorded
         * with: "all CPUs" differs between machines */
        if (!o.nthreads) {
            o.nthreads = bench_base_threads(&base, o.threads, (int)(sizeof o.threads / sizeof o.threads[0]));
            if (o.nthreads)
                cli_note(cli_name(o.baseline), "threads from the baseline");
        }
    }
    if (!o.nthreads)
        o.threads[o.nthreads++] = cli_threads(&o.co);
    nc = nm * nv * o.nthreads;
    cs = calloc((size_t)nc, sizeof *cs);
    if (!cs) {
        cli_error(NULL, "out of memory");
        goto done;
    }

    for (int m = 0; m < nm; m++) {
        ms[m].path = argv[optind + m];
        if (load_model(&ms[m], o.seed))
            goto done;
    }
    /* rows: model, then batch or shape set, then threads */
    for (int i = 0; i < nc; i++) {
        config *c = &cs[i];
        c->m = i / (nv * o.nthreads);
        c->var = i / o.nthreads % nv;
        c->threads = o.threads[i % o.nthreads];
        progress("first runs", i + 1, nc, 1);
        if (setup(c, &ms[c->m], &o))
            goto done;
    }
    if (o.baseline) {
        if (!(keys = keys_of(cs, nc, ms)) || bench_base_match(&base, o.train, keys, nc))
            goto done;
    }

    /* Warm-up, then the timed runs in rounds: one run of each row in turn,
     * each round starting at the next row, so drift of the machine hits
     * every row alike. */
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
    if (o.duration <= 0 && o.rounds > o.iters)
        o.rounds = (int)o.iters;
    for (int i = 0; i < nc; i++) {
        cs[i].round_end = calloc((size_t)o.rounds, sizeof *cs[i].round_end);
        cs[i].round_min = calloc((size_t)o.rounds, sizeof *cs[i].round_min);
        if (!cs[i].round_end || !cs[i].round_min) {
            cli_error(NULL, "out of memory");
            goto done;
        }
    }
    double t_start = mge_now();
    long done_runs = 0;
    for (int r = 0; r < o.rounds; r++) {
        long nrun = o.iters / o.rounds + (r < o.iters % o.rounds);
        double t_end = t_start + o.duration * (r + 1) / o.rounds;
        for (long k = 0;; k++, done_runs++) {
            if (o.duration > 0 ? k > 0 && mge_now() >= t_end : k >= nrun)
                break;
            progress("timed runs", done_runs + 1, o.duration > 0 ? 0 : o.iters, done_runs == 0);
            for (int j = 0; j < nc; j++) {
                config *c = &cs[(j + r) % nc];
                double t;
                if (run_once(c, &t, &err)) {
                    cli_error(cli_name(ms[c->m].path), "timed run %ld: %s", done_runs + 1, err.msg);
                    goto done;
                }
                if (push(c, t))
                    goto done;
            }
        }
        for (int i = 0; i < nc; i++)
            cs[i].round_end[r] = cs[i].n;
    }
    progress_end();
    for (int i = 0; i < nc; i++) {
        compute_stats(&cs[i], o.rounds);
        /* each row has its own executor: one plan per binding, then hits */
        int64_t hits, misses;
        int held, cap;
        mge_exec_plan_cache(cs[i].t ? mge_trainer_exec(cs[i].t) : cs[i].e, &hits, &misses, &held, &cap);
        cli_note(cli_name(ms[cs[i].m].path), "row %d: plan cache %lld hits, %lld misses, %d of %d plans held", i + 1,
                 (long long)hits, (long long)misses, held, cap);
    }

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
    if (o.baseline) {
        for (int i = 0; i < nc; i++)
            keys[i].gate_ms = cs[i].st.gate;
        if (bench_base_compare(&base, o.max_reg, keys, nc))
            goto done;
    }
    rc = 0;
done:
    progress_end();
    mge_buf_free(&rep);
    bench_base_free(&base);
    free(keys);
    for (int i = 0; cs && i < nc; i++) {
        mge_exec_free(cs[i].e);
        mge_trainer_free(cs[i].t);
        bench_inputs_free(&cs[i].in);
        free(cs[i].ms);
        free(cs[i].shapes);
        free(cs[i].round_end);
        free(cs[i].round_min);
    }
    for (int m = 0; ms && m < nm; m++)
        mge_graph_free(ms[m].g);
    free(cs);
    free(ms);
    bench_sets_free(&o.sets);
    return rc;
}
