/* mge-prof — where the time of an inference (or training step) goes: per
 * node time, FLOP rate against the machine's GEMM peak, bytes moved,
 * arithmetic intensity; optionally a Chrome trace of the runs.
 *
 * Timing: after warm-up, profiled runs (node hook, monotonic clock) and
 * unprofiled runs (no hook) alternate, so drift hits both alike; the footer
 * compares the sum of node times with the unprofiled run time. */
#include "cli.h"
#include "inputs.h"
#include "bench_sets.h"
#include "prof_flops.h"
#include "prof_peak.h"
#include "prof_trace.h"
#include "train_dist.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#define WARMUP 3

/* --train under an MPI launcher: the gradient buckets' communication (the
 * figures lib/dist.c keeps, as mge-train -v prints them), per step over all
 * steps run (warm-up included). Text, or JSON members appended to o. */
static void comm_report(const mge_trainer *tr, int ranks, int json, mge_buf *o)
{
    mge_comm_stats st;
    if (!tr || !mge_trainer_comm_stats(tr, &st) || st.steps <= 0)
        return;
    double c = 0, w = 0, n = (double)st.steps;
    int64_t bytes = 0;
    for (int i = 0; i < st.nbuckets; i++) {
        c += st.comm_s[i];
        w += st.wait_s[i];
        bytes += st.bytes[i];
    }
    /* hidden: the part of the time in flight the step did not wait for */
    double overlap = c > 0 ? 1 - w / c : 0;
    if (json) {
        mge_buf_printf(o, ", \"comm\": {\"ranks\": %d, \"steps\": %lld, \"bytes\": %lld, \"in_flight_ms\": %.6f, "
                       "\"waited_ms\": %.6f, \"overlap\": %.6f, \"buckets\": [", ranks, (long long)st.steps,
                       (long long)bytes, 1e3 * c / n, 1e3 * w / n, overlap);
        for (int i = 0; i < st.nbuckets; i++)
            mge_buf_printf(o, "%s{\"bucket\": %d, \"gradients\": %d, \"bytes\": %lld, \"in_flight_ms\": %.6f, "
                           "\"waited_ms\": %.6f}", i ? ", " : "", i, st.members[i], (long long)st.bytes[i],
                           1e3 * st.comm_s[i] / n, 1e3 * st.wait_s[i] / n);
        mge_buf_printf(o, "]}");
        return;
    }
    printf("\nallreduce over %d ranks, per step (%lld steps):\n", ranks, (long long)st.steps);
    printf("%8s %10s %14s %14s %12s\n", "bucket", "gradients", "bytes", "in flight ms", "waited ms");
    for (int i = 0; i < st.nbuckets; i++)
        printf("%8d %10d %14lld %14.3f %12.3f\n", i, st.members[i], (long long)st.bytes[i], 1e3 * st.comm_s[i] / n,
               1e3 * st.wait_s[i] / n);
    printf("%8s %10s %14lld %14.3f %12.3f\n", "total", "", (long long)bytes, 1e3 * c / n, 1e3 * w / n);
    printf("overlapped with the backward pass: %.1f%% of the communication time\n", 100.0 * overlap);
}

static void help(void)
{
    printf("Usage: %s [options] MODEL\n"
           "Profile a model (text form or .mge): per node time, share, cumulative share,\n"
           "GFLOP/s, percent of the machine's GEMM peak, bytes read and written and\n"
           "arithmetic intensity, averaged over timed runs after warm-up. GFLOP/s count\n"
           "the model's FLOPs (a Winograd convolution as the direct one); %%peak counts\n"
           "what the kernel executes (rows where the two differ are marked 'w').\n"
           "\n"
           "      --shape NAME=DIMS  shape of input NAME (e.g. x=64x1x28x28; repeatable; naming an\n"
           "                         input again starts a new set: a row per set, see below)\n"
           "      --batch B[,B...]   the batch N for inputs without --shape (default 1); a list\n"
           "                         profiles the first and adds a time row per batch\n"
           "      --input FILE       real inputs: an NPY stream, one record per input\n"
           "      --seed S           seed of the random inputs and of parameters\n"
           "                         without values (default 0)\n"
           "      --iters N          profiled runs (default 20), after %d warm-up runs\n"
           "      --train            profile a training step (forward, backward, SGD update); under\n"
           "                         mpirun, a data-parallel one: rank 0 adds the allreduce buckets\n"
           "                         (bytes, time in flight, time waited) and the share overlapped\n"
           "                         with the backward pass\n"
           "      --by-op            aggregate the nodes by op\n"
           "      --top N            show the first N rows only\n"
           "      --sort KEY         time (default), flops or name\n"
           "      --trace OUT.json   write a Chrome trace (Perfetto, chrome://tracing)\n"
           "      --json             the report as JSON (keys in mge-prof(1))\n"
           "  -q, --quiet            only errors: no report on stdout (--json and --trace\n"
           "                         are still written)\n"
           "  -v, --verbose          more detail on stderr\n"
           "      --threads N        worker threads (1..256; default: all CPUs)\n"
           "      --device DEV       cpu (default), sim (simulated device), cuda[:N] (plugin)\n"
           "  -h, --help             show this help and exit\n"
           "      --version          show the version and exit\n"
           "\n"
           "Exit status: 0 success, 1 failure, 2 usage error.\n"
           "\n"
           "Examples:\n"
           "  mge-prof net.mge --batch 8                    # time per node, GFLOP/s, bytes moved\n"
           "  mge-prof net.mge --batch 8 --by-op --top 5    # the five most expensive ops\n"
           "  mge-prof net.mge --batch 8 --train --trace step.json   # a training step, for ui.perfetto.dev\n",
           cli_prog, WARMUP);
}

/* ---------------------------------------------------------------- recording */

typedef struct prof {
    int nn;
    double *t0;              /* per node: start of the current call */
    double *sum;             /* per node: seconds over profiled runs */
    int64_t *calls;
    int cur;                 /* node running now; pool threads read it after the run starts */
    int tracing;
    prof_spans nodes;        /* trace: node spans */
    prof_spans *pool;        /* trace: per pool thread */
    int nthreads;
} prof;

static void node_hook(void *ud, int node, int phase)
{
    double now = mge_now();
    prof *p = ud;
    if (phase == 0) {
        p->cur = node;
        p->t0[node] = now;
        return;
    }
    p->sum[node] += now - p->t0[node];
    p->calls[node]++;
    if (p->tracing)
        prof_spans_add(&p->nodes, p->t0[node], now, node);
}

/* Pool threads: each touches only its own prof_spans. */
static void task_hook(void *ud, int thread, int phase)
{
    double now = mge_now();
    prof *p = ud;
    if (thread < 0 || thread >= p->nthreads)
        return;
    prof_spans *l = &p->pool[thread];
    if (phase == 0) {
        l->open = now;
        l->open_node = p->cur;
    } else {
        prof_spans_add(l, l->open, now, l->open_node);
    }
}

/* ---------------------------------------------------------------- rows */

typedef struct row {
    int index;               /* node, or op id with --by-op */
    const char *name, *op;
    const char *dev;         /* where it ran */
    char shape[128];
    int count;               /* nodes in the row */
    double sec, flops, bread, bwritten;
    double kflops;           /* what the kernel executes (prof_flops.h) */
} row;

enum { SORT_TIME, SORT_FLOPS, SORT_NAME };
static int sort_key;

static int cmp_row(const void *pa, const void *pb)
{
    const row *a = pa, *b = pb;
    if (sort_key == SORT_TIME && a->sec != b->sec)
        return a->sec > b->sec ? -1 : 1;
    if (sort_key == SORT_FLOPS && a->flops != b->flops)
        return a->flops > b->flops ? -1 : 1;
    if (sort_key == SORT_NAME) {
        int c = strcmp(a->name, b->name);
        if (c)
            return c;
    }
    return a->index - b->index;
}

/* ---------------------------------------------------------------- report */

typedef struct report {
    const char *model;
    int64_t batch;
    int iters, threads, train, by_op, top;
    double peak, peak1;
    int peak_cached;
    double prof_ms, unprof_ms;
    int nnodes;              /* profiled nodes */
    const char *device;      /* the executor's device: "cpu", "sim", ... */
    double host_sec, dev_sec, copy_sec;   /* node time by where it ran; copies apart */
    int copies_up, copies_down;           /* copy nodes per run */
    double bytes_up, bytes_down;          /* their bytes per run */
    double dev_uploads, dev_downloads;    /* the device's own counters per profiled run */
    double dev_upload_bytes, dev_download_bytes;
    size_t dev_arena, dev_persistent;
} report;

/* The time and copies by device, when the model ran on one. */
static void print_devices(const report *r)
{
    if (strcmp(r->device, "cpu") == 0)
        return;
    char a[32], b[32], c[32], d[32];
    printf("by device: cpu %.3f ms, %s %.3f ms, copies %.3f ms\n", r->host_sec * 1e3 / r->iters, r->device,
           r->dev_sec * 1e3 / r->iters, r->copy_sec * 1e3 / r->iters);
    printf("copies per run: %d up (%s), %d down (%s); the device counted %.0f uploads (%s), %.0f downloads (%s)\n",
           r->copies_up, cli_human_bytes(r->bytes_up, a, sizeof a), r->copies_down, cli_human_bytes(r->bytes_down, b, sizeof b),
           r->dev_uploads, cli_human_bytes(r->dev_upload_bytes, c, sizeof c), r->dev_downloads,
           cli_human_bytes(r->dev_download_bytes, d, sizeof d));
}

static void print_text(const report *r, row *rows, int nrows, const row *tot)
{
    int nshow = r->top > 0 && r->top < nrows ? r->top : nrows;
    int wn = r->by_op ? 2 : 4, wo = 2, ws = 6;
    for (int i = 0; i < nshow; i++) {
        int l = (int)strlen(rows[i].name);
        wn = l > wn ? l : wn;
        l = (int)strlen(rows[i].op);
        wo = l > wo ? l : wo;
        l = (int)strlen(rows[i].shape);
        ws = l > ws ? l : ws;
    }
    if (wn < 5)
        wn = 5;
    printf("%s: batch %lld, %s, %d iterations after %d warm-up, %d thread%s\n", r->model, (long long)r->batch,
           r->train ? "training step (forward, backward, sgd)" : "inference", r->iters, WARMUP, r->threads,
           r->threads == 1 ? "" : "s");
    if (r->peak > 0) {
        printf("peak: %.1f GFLOP/s", r->peak);
        if (r->threads > 1)
            printf(" with %d threads, %.1f with 1", r->threads, r->peak1);
        printf(" (GEMM probe%s)\n", r->peak_cached ? ", cached" : "");
    } else {
        printf("peak: unknown (the GEMM probe failed)\n");
    }
    putchar('\n');
    int devcol = strcmp(r->device, "cpu") != 0 && !r->by_op;
    if (r->by_op)
        printf("%-*s %5s", wn, "op", "nodes");
    else
        printf("%-*s %-*s %-*s", wn, "node", wo, "op", ws, "output");
    if (devcol)
        printf(" %-4s", "dev");
    printf(" %9s %6s %6s %8s %6s  %10s %10s %7s\n", "ms", "%", "cum%", "GFLOP/s", "%peak", "read", "written",
           "FLOP/B");
    double cum = 0, total = tot->sec > 0 ? tot->sec : 1e-30;
    int marked_w = 0, marked_over = 0;
    for (int i = 0; i < nshow + 1; i++) {
        const row *w = i < nshow ? &rows[i] : tot;
        char rb[32], wb[32];
        double gf = w->sec > 0 ? w->flops / w->sec / 1e9 : 0, bytes = w->bread + w->bwritten;
        if (i == nshow)
            printf("\n");
        if (r->by_op)
            printf("%-*s %5d", wn, w->name, w->count);
        else if (i < nshow)
            printf("%-*s %-*s %-*s", wn, w->name, wo, w->op, ws, w->shape);
        else
            printf("%-*s %-*s %-*s", wn, "total", wo, "", ws, "");
        if (devcol)
            printf(" %-4s", i < nshow ? w->dev : "");
        cum += i < nshow ? w->sec : 0;
        printf(" %9.3f %6.1f", w->sec * 1e3 / r->iters, 100 * w->sec / total);
        if (i < nshow)
            printf(" %6.1f", 100 * cum / total);
        else
            printf(" %6s", "");
        if (w->flops > 0) {
            /* %peak from what the kernel executes; 'w' where that is not the model's count */
            double pk = r->peak > 0 && w->sec > 0 ? 100 * w->kflops / w->sec / 1e9 / r->peak : 0;
            char mark = w->kflops != w->flops ? 'w' : pk > 100 ? '!' : ' ';
            marked_w |= mark == 'w';
            marked_over |= mark == '!';
            printf(" %8.2f %6.1f%c", gf, pk, mark);
        } else {
            printf(" %8s %6s ", "-", "-");
        }
        printf(" %10s %10s", cli_human_bytes(w->bread / r->iters, rb, sizeof rb), cli_human_bytes(w->bwritten / r->iters, wb, sizeof wb));
        if (w->flops > 0 && bytes > 0)
            printf(" %7.2f\n", w->flops / bytes);
        else
            printf(" %7s\n", "-");
    }
    if (nshow < nrows)
        printf("(%d of %d rows shown)\n", nshow, nrows);
    if (marked_w)
        printf("w: %%peak from the kernel's multiply-adds (Winograd: fewer than the direct convolution's FLOPs in GFLOP/s)\n");
    if (marked_over)
        printf("!: above the peak: the kernel outruns the %s matmul the peak is measured with\n", "512x512x512");
    print_devices(r);
    printf("profiled total %.4f ms, unprofiled %.4f ms, overhead %.1f%%\n", r->prof_ms, r->unprof_ms,
           r->unprof_ms > 0 ? 100 * (r->prof_ms - r->unprof_ms) / r->unprof_ms : 0);
}

static void json_row(mge_buf *b, const report *r, const row *w, double total, double cum)
{
    double gf = w->sec > 0 ? w->flops / w->sec / 1e9 : 0, bytes = w->bread + w->bwritten;
    mge_buf_printf(b, "\"ms\": %.6f, \"pct\": %.3f, ", w->sec * 1e3 / r->iters, 100 * w->sec / total);
    if (cum >= 0)
        mge_buf_printf(b, "\"cum_pct\": %.3f, ", 100 * cum / total);
    double kgf = w->sec > 0 ? w->kflops / w->sec / 1e9 : 0;
    mge_buf_printf(b,
                   "\"flops\": %.0f, \"gflops\": %.4f, \"kernel_flops\": %.0f, \"kernel_gflops\": %.4f, "
                   "\"peak_pct\": %.3f, \"bytes_read\": %.0f, \"bytes_written\": %.0f, \"intensity\": %.4f}",
                   w->flops / r->iters, gf, w->kflops / r->iters, kgf, r->peak > 0 ? 100 * kgf / r->peak : 0,
                   w->bread / r->iters, w->bwritten / r->iters, bytes > 0 ? w->flops / bytes : 0);
}

static void print_json(const report *r, row *rows, int nrows, const row *tot, mge_buf *b)
{
    int nshow = r->top > 0 && r->top < nrows ? r->top : nrows;
    double total = tot->sec > 0 ? tot->sec : 1e-30, cum = 0;
    mge_buf_printf(b, "{\"tool\": \"mge-prof\", \"version\": \"%s\", \"model\": ", MGE_VERSION_STRING);
    prof_json_str(b, r->model);
    mge_buf_printf(b,
                   ", \"batch\": %lld, \"iters\": %d, \"warmup\": %d, \"threads\": %d, \"train\": %s, "
                   "\"cpu\": ",
                   (long long)r->batch, r->iters, WARMUP, r->threads, r->train ? "true" : "false");
    prof_json_str(b, prof_cpu_model());
    mge_buf_printf(b, ", \"peak_gflops\": %.3f, \"peak_gflops_1thread\": %.3f, \"nnodes\": %d,\n", r->peak, r->peak1,
                   r->nnodes);
    mge_buf_printf(b, "\"%s\": [", r->by_op ? "ops" : "nodes");
    for (int i = 0; i < nshow; i++) {
        const row *w = &rows[i];
        cum += w->sec;
        mge_buf_printf(b, "%s\n  {", i ? "," : "");
        if (r->by_op) {
            mge_buf_printf(b, "\"op\": ");
            prof_json_str(b, w->name);
            mge_buf_printf(b, ", \"count\": %d, ", w->count);
        } else {
            mge_buf_printf(b, "\"index\": %d, \"name\": ", w->index);
            prof_json_str(b, w->name);
            mge_buf_printf(b, ", \"op\": ");
            prof_json_str(b, w->op);
            mge_buf_printf(b, ", \"shape\": ");
            prof_json_str(b, w->shape);
            mge_buf_printf(b, ", \"device\": ");
            prof_json_str(b, w->dev);
            mge_buf_printf(b, ", ");
        }
        json_row(b, r, w, total, cum);
    }
    mge_buf_printf(b, "\n],\n\"device\": ");
    prof_json_str(b, r->device);
    mge_buf_printf(b,
                   ", \"by_device_ms\": {\"cpu\": %.6f, \"device\": %.6f, \"copies\": %.6f},\n"
                   "\"copies\": {\"up\": %d, \"down\": %d, \"bytes_up\": %.0f, \"bytes_down\": %.0f, "
                   "\"device_uploads\": %.3f, \"device_downloads\": %.3f, \"device_upload_bytes\": %.0f, "
                   "\"device_download_bytes\": %.0f},\n",
                   r->host_sec * 1e3 / r->iters, r->dev_sec * 1e3 / r->iters, r->copy_sec * 1e3 / r->iters,
                   r->copies_up, r->copies_down, r->bytes_up, r->bytes_down, r->dev_uploads, r->dev_downloads,
                   r->dev_upload_bytes, r->dev_download_bytes);
    mge_buf_printf(b, "\"total\": {");
    json_row(b, r, tot, total, -1);
    mge_buf_printf(b, ",\n\"profiled_ms\": %.6f, \"unprofiled_ms\": %.6f, \"overhead_pct\": %.3f}\n", r->prof_ms,
                   r->unprof_ms, r->unprof_ms > 0 ? 100 * (r->prof_ms - r->unprof_ms) / r->unprof_ms : 0);
}

/* ---------------------------------------------------------------- main */

enum {
    OPT_SHAPE = CLI_OPT_FIRST_TOOL, OPT_BATCH, OPT_INPUT, OPT_SEED, OPT_ITERS, OPT_TRAIN, OPT_BYOP, OPT_TOP,
    OPT_SORT, OPT_TRACE, OPT_JSON
};

/* One row per binding of the --batch list or shape sets: the mean time of
 * iters runs (after two untimed) and the model's FLOPs at that binding. */
static int extra_rows(const mge_graph *g, const mge_graph *pg, mge_exec *e, mge_trainer *tr, const char *where,
                      const bench_sets *sets, int nin, const int *ins, uint64_t seed, int iters, int json,
                      mge_buf *b)
{
    mge_error err;
    int nv = bench_sets_count(sets), rc = -1;
    int *nd = calloc((size_t)pg->nvalues + 1, sizeof *nd);
    int64_t *dims = calloc(((size_t)pg->nvalues + 1) * MGE_MAX_DIMS, sizeof *dims);
    if (!nd || !dims) {
        cli_error(NULL, "out of memory");
        goto out;
    }
    if (!json)
        mge_buf_printf(b, "\nper binding (%d runs each, unprofiled):\n  %-28s %10s %10s\n", iters, "binding",
                       "ms/run", "GFLOP/s");
    for (int v = 0; v < nv; v++) {
        bench_inputs in;
        if (bench_inputs_make(g, where, nin, ins, bench_sets_shapes(sets, v), bench_sets_batch_of(sets, v), NULL,
                              seed, &in))
            goto out;
        double sec = 0, flops = 0;
        mge_train_result tres;
        for (int it = -2; it < iters; it++) {
            double t0 = mge_now();
            mge_status s = tr ? mge_trainer_step(tr, in.ptr, 0.01, it + 3, &tres, &err) : mge_exec_run(e, in.ptr, &err);
            if (s) {
                cli_error(where, "%s", err.msg);
                bench_inputs_free(&in);
                goto out;
            }
            if (it >= 0)
                sec += mge_now() - t0;
        }
        if (mge_graph_shapes(pg, &in.bind, nd, dims, &err)) {
            cli_mge_error(where, &err);
            bench_inputs_free(&in);
            goto out;
        }
        for (int i = 0; i < pg->nnodes; i++)
            flops += mge_graph_node_flops(pg, i, nd, dims);
        char bs[256];
        mge_binding_str(&in.bind, bs, sizeof bs);
        double ms = sec * 1e3 / iters;
        if (json)
            mge_buf_printf(b, "%s{\"binding\":\"%s\",\"ms_per_run\":%.6f,\"flops\":%.0f}", v ? "," : "", bs, ms,
                           flops);
        else
            mge_buf_printf(b, "  %-28s %10.3f %10.2f\n", bs, ms, ms > 0 ? flops / (ms * 1e6) : 0.0);
        bench_inputs_free(&in);
    }
    (void)e;
    rc = 0;
out:
    free(nd);
    free(dims);
    return rc;
}

int main(int argc, char **argv)
{
    cli_init("mge-prof", argv);
    static const struct option longs[] = {
        CLI_LONG_COMMON,
        {"shape", 1, 0, OPT_SHAPE},
        {"batch", 1, 0, OPT_BATCH},
        {"input", 1, 0, OPT_INPUT},
        {"seed", 1, 0, OPT_SEED},
        {"iters", 1, 0, OPT_ITERS},
        {"train", 0, 0, OPT_TRAIN},
        {"by-op", 0, 0, OPT_BYOP},
        {"top", 1, 0, OPT_TOP},
        {"sort", 1, 0, OPT_SORT},
        {"trace", 1, 0, OPT_TRACE},
        {"json", 0, 0, OPT_JSON},
        {0, 0, 0, 0},
    };
    cli_common co = {0};
    bench_sets sets = {0};
    const char *input = NULL, *trace = NULL;
    int64_t batch = 0;
    uint64_t seed = 0;
    int iters = 20, train = 0, by_op = 0, top = 0, json = 0;
    sort_key = SORT_TIME;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":fqvh", longs, NULL)) != -1) {
        switch (c) {
        case OPT_SHAPE:
            if (bench_sets_add_shape(&sets, optarg))
                return 1;
            break;
        case OPT_BATCH: bench_sets_batch(&sets, optarg); break;
        case OPT_INPUT: input = optarg; break;
        case OPT_SEED: seed = cli_u64("--seed", optarg); break;
        case OPT_ITERS: iters = (int)cli_long("--iters", optarg, 1, 1000000); break;
        case OPT_TRAIN: train = 1; break;
        case OPT_BYOP: by_op = 1; break;
        case OPT_TOP: top = (int)cli_long("--top", optarg, 1, 1L << 30); break;
        case OPT_SORT:
            if (strcmp(optarg, "time") == 0)
                sort_key = SORT_TIME;
            else if (strcmp(optarg, "flops") == 0)
                sort_key = SORT_FLOPS;
            else if (strcmp(optarg, "name") == 0)
                sort_key = SORT_NAME;
            else
                cli_usage("--sort %s: expected time, flops or name", optarg);
            break;
        case OPT_TRACE: trace = optarg; break;
        case OPT_JSON: json = 1; break;
        default:
            if (!cli_common_opt(c, optarg, &co, help))
                cli_usage("unhandled option");
        }
    }
    cli_check_device(co.device);   /* first: --device cuda fails the same with or without a model */
    if (optind >= argc)
        cli_usage("no model given");
    if (argc - optind > 1)
        cli_usage("too many arguments (one model)");
    bench_sets_check(&sets);
    if (input && sets.n)
        cli_usage("--input and --shape cannot be combined (the records carry the shapes)");
    if (input && bench_sets_count(&sets) > 1)
        cli_usage("--input and a --batch list cannot be combined (the records carry the shapes)");
    if (trace && !*trace)
        cli_usage("--trace: empty file name");
    const char *model = argv[optind];
    const char *where = cli_name(model);
    /* under an MPI launcher, --train profiles a data-parallel step: every
     * rank steps on its own inputs, rank 0 reports */
    mge_comm *comm = NULL;
    if (train && train_mpi_open(&argc, &argv, 300, &comm))
        return 1;
    if (!train && train_mpi_launched() > 1)
        cli_warn(NULL, "started as one of %d ranks without --train: each rank profiles on its own",
                 train_mpi_launched());
    if (comm) {
        static char prog[48];
        setvbuf(stderr, NULL, _IOLBF, 1 << 12);
        if (comm->rank > 0) {
            snprintf(prog, sizeof prog, "mge-prof: rank %d", comm->rank);
            cli_prog = prog;
            cli_verbose = -1;
            json = 0;
            trace = NULL;
        }
    }
    if (input && strcmp(input, "-") == 0 && strcmp(model, "-") == 0)
        cli_usage("the model and --input cannot both come from stdin");

    mge_error err;
    mge_error_clear(&err);
    mge_graph *g = NULL;
    mge_exec *e = NULL;
    mge_trainer *tr = NULL;
    bench_inputs in = {0};
    prof p = {0};
    int *ndims = NULL, *ins = NULL;
    int64_t *dims = NULL;
    size_t *live = NULL;
    row *rows = NULL;
    mge_buf out = {0};
    int rc = 1, threads = cli_threads(&co);

    if (cli_model_load(model, &g))
        goto done;
    if (mge_graph_init_params(g, seed, &err)) {
        cli_mge_error(where, &err);
        goto done;
    }
    const mge_graph *pg;   /* the graph whose nodes run */
    int nin;
    if (train) {
        if (g->loss < 0) {
            cli_error(where, "--train needs a loss to minimize (the model has no 'minimize' line)");
            goto done;
        }
        mge_train_opts to;
        memset(&to, 0, sizeof to);
        mge_optim_defaults(MGE_OPTIM_SGD, &to.optim);
        to.threads = threads;
        to.device = co.device;
        to.seed = seed;
        to.comm = comm;
        if (comm && !co.threads) {
            /* the ranks on this machine share its CPUs (as mge-train) */
            const char *ls = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
            if (!ls)
                ls = getenv("MPI_LOCALNRANKS");
            long local = ls ? strtol(ls, NULL, 10) : 1;
            if (local > 1)
                to.threads = threads = threads / (int)local > 1 ? threads / (int)local : 1;
        }
        if (mge_trainer_create(g, &to, &tr, &err)) {
            cli_mge_error(where, &err);
            goto done;
        }
        e = mge_trainer_exec(tr);
        pg = mge_exec_graph(e);
        nin = mge_trainer_ninputs(tr);
        ins = malloc(sizeof(int) * (size_t)(nin + 1));
        for (int i = 0; ins && i < nin; i++)
            ins[i] = mge_trainer_input(tr, i);
    } else {
        mge_exec_opts eo = {0};
        eo.threads = threads;
        eo.device = co.device;
        eo.preprocess = 1;   /* as mge-run: preprocessed nodes run once, before the timed runs */
        if (mge_exec_create(g, &eo, &e, &err)) {
            cli_mge_error(where, &err);
            goto done;
        }
        pg = mge_exec_graph(e);
        nin = mge_exec_ninputs(e);
        ins = malloc(sizeof(int) * (size_t)(nin + 1));
        for (int i = 0; ins && i < nin; i++)
            ins[i] = mge_exec_input(e, i);
    }
    if (!ins) {
        cli_error(NULL, "out of memory");
        goto done;
    }
    batch = bench_sets_batch_of(&sets, 0);
    if (bench_inputs_make(g, where, nin, ins, bench_sets_shapes(&sets, 0), batch, input, seed, &in))
        goto done;
    const int64_t B = in.batch;

    /* the peak first: its probe must not run while the model's pool spins */
    report r;
    memset(&r, 0, sizeof r);
    int cached1 = 1;
    r.peak = prof_peak(threads, &r.peak_cached);
    r.peak1 = threads > 1 ? prof_peak(1, &cached1) : r.peak;
    r.peak_cached = r.peak_cached && cached1;
    cli_note(NULL, "peak cache: %s (CPU: %s)", prof_peak_path() ? prof_peak_path() : "none", prof_cpu_model());

    const int nn = pg->nnodes;
    p.nn = nn;
    p.nthreads = threads > 1 ? threads : 0;
    p.tracing = trace != NULL;
    p.t0 = calloc((size_t)nn + 1, sizeof *p.t0);
    p.sum = calloc((size_t)nn + 1, sizeof *p.sum);
    p.calls = calloc((size_t)nn + 1, sizeof *p.calls);
    p.pool = calloc((size_t)p.nthreads + 1, sizeof *p.pool);
    ndims = calloc((size_t)pg->nvalues + 1, sizeof *ndims);
    dims = calloc(((size_t)pg->nvalues + 1) * MGE_MAX_DIMS, sizeof *dims);
    live = calloc((size_t)nn + 1, sizeof *live);
    rows = calloc((size_t)nn + 1, sizeof *rows);
    if (!p.t0 || !p.sum || !p.calls || !p.pool || !ndims || !dims || !live || !rows) {
        cli_error(NULL, "out of memory");
        goto done;
    }
    if (mge_graph_shapes(pg, &in.bind, ndims, dims, &err)) {
        cli_mge_error(where, &err);
        goto done;
    }

    /* warm-up, then alternate unprofiled and profiled runs */
    mge_train_result tres;
    int64_t step = 1;
    double lr = 0.01, unprof = 0, base = 0;
    mge_devstats ds0, ds1;
    memset(&ds0, 0, sizeof ds0);
    memset(&ds1, 0, sizeof ds1);
    for (int it = -WARMUP; it < iters; it++) {
        for (int profiled = 0; profiled < 2; profiled++) {
            if (it < 0 && profiled)
                break;
            if (profiled) {
                if (!base) {
                    base = mge_now();
                    mge_exec_device_stats(e, &ds0, NULL, NULL, NULL, NULL);
                }
                mge_exec_set_hook(e, node_hook, &p);
                if (trace)
                    mge_exec_set_task_hook(e, task_hook, &p);
            }
            double t0 = mge_now();
            mge_status s = train ? mge_trainer_step(tr, in.ptr, lr, step++, &tres, &err)
                                 : mge_exec_run(e, in.ptr, &err);
            double dt = mge_now() - t0;
            mge_exec_set_hook(e, NULL, NULL);
            mge_exec_set_task_hook(e, NULL, NULL);
            if (s) {
                cli_error(input ? cli_name(input) : where, "%s", err.msg);
                goto done;
            }
            if (it >= 0 && !profiled)
                unprof += dt;
        }
    }

    mge_exec_device_stats(e, &ds1, NULL, NULL, NULL, NULL);
    /* what the device counted over the runs after the first profiled one
     * (unprofiled ones included: both kinds run the same copies) */
    double nruns = 2.0 * iters - 1;
    r.device = mge_exec_device(e);
    r.dev_uploads = (double)(ds1.uploads - ds0.uploads) / nruns;
    r.dev_downloads = (double)(ds1.downloads - ds0.downloads) / nruns;
    r.dev_upload_bytes = (double)(ds1.upload_bytes - ds0.upload_bytes) / nruns;
    r.dev_download_bytes = (double)(ds1.download_bytes - ds0.download_bytes) / nruns;

    /* rows: the nodes the hook saw */
    int nrows = 0;
    row tot;
    memset(&tot, 0, sizeof tot);
    tot.name = "total";
    for (int i = 0; i < nn; i++) {
        if (!p.calls[i])
            continue;
        const mge_node *n = &pg->nodes[i];
        const mge_opinfo *oi = mge_op_info(n->op);
        row *w = &rows[nrows++];
        w->index = i;
        w->name = n->name;
        w->op = oi->name;
        w->count = 1;
        w->sec = p.sum[i];
        w->dev = mge_exec_node_device(e, i);
        if (n->op == MGE_OP_COPY) {
            int up = mge_node_int(n, MGE_KEY_to, 0) != 0;
            double nb = cli_value_bytes(pg, ndims, dims, n->out[0]);
            r.copy_sec += w->sec;
            if (up) {
                r.copies_up++;
                r.bytes_up += nb;
            } else {
                r.copies_down++;
                r.bytes_down += nb;
            }
            w->dev = up ? r.device : "cpu";
        } else if (strcmp(w->dev, "cpu") == 0) {
            r.host_sec += w->sec;
        } else {
            r.dev_sec += w->sec;
        }
        double f1 = mge_graph_node_flops(pg, i, ndims, dims);
        w->flops = f1 * (double)p.calls[i];
        w->kflops = prof_kernel_flops(pg, i, ndims, dims, f1) * (double)p.calls[i];
        if (n->nout > 0)
            mge_shape_str(pg->values[n->out[0]].dtype, ndims[n->out[0]], &dims[(size_t)n->out[0] * MGE_MAX_DIMS],
                          w->shape, sizeof w->shape);
        /* views move no bytes */
        if (!(oi->flags & MGE_OPF_ALIAS)) {
            for (int k = 0; k < n->nin; k++)
                w->bread += cli_value_bytes(pg, ndims, dims, n->in[k]) * (double)p.calls[i];
            for (int k = 0; k < n->nout; k++)
                w->bwritten += cli_value_bytes(pg, ndims, dims, n->out[k]) * (double)p.calls[i];
        }
        tot.sec += w->sec;
        tot.flops += w->flops;
        tot.kflops += w->kflops;
        tot.bread += w->bread;
        tot.bwritten += w->bwritten;
    }
    r.nnodes = nrows;
    tot.count = nrows;
    if (by_op) {
        int nops = 0;
        for (int i = 0; i < nrows; i++) {
            int k = 0;
            while (k < nops && strcmp(rows[k].name, rows[i].op) != 0)
                k++;
            row w = rows[i];
            if (k == nops) {
                rows[nops] = w;
                rows[nops].name = w.op;
                rows[nops].index = pg->nodes[w.index].op;
                rows[nops].shape[0] = 0;
                nops++;
            } else {
                rows[k].count++;
                rows[k].sec += w.sec;
                rows[k].flops += w.flops;
                rows[k].kflops += w.kflops;
                rows[k].bread += w.bread;
                rows[k].bwritten += w.bwritten;
            }
        }
        nrows = nops;
    }
    qsort(rows, (size_t)nrows, sizeof *rows, cmp_row);

    r.model = where;
    r.batch = B;
    r.iters = iters;
    r.threads = threads;
    r.train = train;
    r.by_op = by_op;
    r.top = top;
    r.prof_ms = tot.sec * 1e3 / iters;
    r.unprof_ms = unprof * 1e3 / iters;

    if (trace) {
        mge_buf tb = {0};
        if (mge_exec_live_bytes(e, &in.bind, live, &err)) {
            cli_mge_error(where, &err);
            goto done;
        }
        int lost = p.nodes.failed;
        for (int i = 0; i < p.nthreads; i++)
            lost |= p.pool[i].failed;
        if (lost) {
            cli_error(trace, "out of memory while recording the trace");
            goto done;
        }
        char title[512];
        snprintf(title, sizeof title, "mge-prof %s", where);
        prof_trace t = {pg, ndims, dims, B, live, &p.nodes, p.pool, p.nthreads, base, title};
        prof_trace_json(&t, &tb);
        int w = cli_write_buf(trace, &tb, 0, 1);
        mge_buf_free(&tb);
        if (w)
            goto done;
    }
    /* --batch lists and shape sets: the first binding is profiled above;
     * each binding gets a row of its time per run (no hooks) and FLOPs */
    mge_buf more = {0};
    if (bench_sets_count(&sets) > 1 && extra_rows(g, pg, e, tr, where, &sets, nin, ins, seed, iters, json, &more))
        goto done;
    if (json) {
        print_json(&r, rows, nrows, &tot, &out);
        if (more.n) {
            while (out.n && (out.p[out.n - 1] == '\n' || out.p[out.n - 1] == '}'))
                if (out.p[--out.n] == '}')
                    break;
            mge_buf_printf(&out, ",\"bindings\":[%.*s]}\n", (int)more.n, more.p);
        }
        if (comm) {
            while (out.n && (out.p[out.n - 1] == '\n' || out.p[out.n - 1] == '}'))
                if (out.p[--out.n] == '}')
                    break;
            comm_report(tr, comm->size, 1, &out);
            mge_buf_printf(&out, "}\n");
        }
        if (cli_write_buf(NULL, &out, 0, 1))
            goto done;
    } else if (cli_verbose >= 0) {
        /* -q: the report is for people; the trace (or --json) is the data */
        print_text(&r, rows, nrows, &tot);
        if (more.n)
            fwrite(more.p, 1, more.n, stdout);
        if (comm)
            comm_report(tr, comm->size, 0, NULL);
        if (cli_stdout_flush())
            goto done;
    }
    rc = 0;
    mge_buf_free(&more);
done:
    mge_buf_free(&out);
    prof_spans_free(&p.nodes);
    for (int i = 0; p.pool && i < p.nthreads; i++)
        prof_spans_free(&p.pool[i]);
    free(p.pool);
    free(p.t0);
    free(p.sum);
    free(p.calls);
    free(ndims);
    free(dims);
    free(live);
    free(rows);
    free(ins);
    bench_inputs_free(&in);
    bench_sets_free(&sets);
    if (tr)
        mge_trainer_free(tr);
    else
        mge_exec_free(e);
    mge_graph_free(g);
    train_mpi_close(comm, rc != 0);
    return rc;
}
