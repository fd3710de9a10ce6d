/* bench_base.h — mge-bench --baseline: an earlier --json result read back,
 * its rows matched with this run's, and the CI verdict.
 *
 * A row's key is the model file's basename, the shapes of the inputs it ran
 * with ("x=1x1x28x28 label=1") and the thread count, plus inference or
 * training for the whole file: so ./lenet.mge matches a baseline recorded
 * as lenet.mge or ci/lenet.mge, and a retrained model (new weights, same
 * file name and shapes) still matches, which a content hash would not.
 * Baselines without "shapes" (older mge-bench) match by basename, threads
 * and batch.
 *
 * The gate compares gate_ms: the median of the interleaved rounds' fastest
 * runs (see mge-bench(1)); baselines without it give p50_ms. */
#ifndef MGE_CMD_BENCH_BASE_H
#define MGE_CMD_BENCH_BASE_H

#include "bench_json.h"
#include "cli.h"

/* One row of this run, as the baseline code sees it. */
typedef struct bench_key {
    const char *model;     /* the path as given (messages) */
    const char *name;      /* key: the basename */
    const char *shapes;    /* key: the input shapes */
    int threads;           /* key */
    int64_t batch;         /* key of older baselines */
    double gate_ms;        /* this run's statistic */
} bench_key;

typedef struct base_row {
    const char *name, *shapes;   /* shapes: NULL in older baselines */
    int threads;
    int64_t batch;
    double gate_ms;
} base_row;

typedef struct bench_base {
    bj root;
    const char *path;
    int train;
    const char *cpu;       /* machine.cpu, or NULL */
    double cores;          /* machine.cores, or 0 */
    int n;
    base_row *rows;
} bench_base;

/* The basename of a model path ("<stdin>" for "-"). */
const char *bench_key_name(const char *path);

/* Reads and checks an earlier --json result. Prints and returns -1 when it is not one. */
int bench_base_load(const char *path, bench_base *b);
void bench_base_free(bench_base *b);
/* The distinct thread counts of the baseline's rows, in order (at most max). */
int bench_base_threads(const bench_base *b, int *threads, int max);
/* Warns (stderr) when the baseline was recorded on another CPU model or
 * core count. Returns 1 when it was. */
int bench_base_machine_check(const bench_base *b, const char *cpu, long cores);
/* Every row must have a counterpart (and two rows of this run must not
 * share a key). Prints and returns -1 otherwise. */
int bench_base_match(const bench_base *b, int train, const bench_key *rows, int n);
/* Prints each row's verdict; returns the number slower than max_reg percent. */
int bench_base_compare(const bench_base *b, double max_reg, const bench_key *rows, int n);

#endif
