/* prof_trace.h — what mge-prof records during profiled runs and how it
 * writes it as a Chrome trace (Perfetto, chrome://tracing).
 *
 * The executor's node hook and the pool's task hook fill a prof_rec; the
 * writer turns it into {"traceEvents": [...], "displayTimeUnit": "ms"}:
 *  - one complete event ("ph": "X") per node per iteration on tid 0, named
 *    after the node, args {op, shape, flops};
 *  - complete events "task" per pool thread i (tid i + 1) for the stretches
 *    in which that thread took tasks of a parallel kernel call, args {node};
 *  - a counter "arena" ("ph": "C", args {bytes}) at every node start: the
 *    planned arena bytes live while the node runs;
 *  - metadata events naming the process and the threads.
 * Times are microseconds from the first profiled run. */
#ifndef MGE_CMD_PROF_TRACE_H
#define MGE_CMD_PROF_TRACE_H

#include "cli.h"

typedef struct prof_span {
    double t0, t1;           /* seconds (mge_now) */
    int node;
} prof_span;

typedef struct prof_spans {
    prof_span *s;
    int n, cap;
    int failed;              /* out of memory: later spans dropped */
    double open;             /* start of the span in progress */
    int open_node;
} prof_spans;

/* Appends (t0, t1, node); sets failed when out of memory. */
void prof_spans_add(prof_spans *l, double t0, double t1, int node);
void prof_spans_free(prof_spans *l);

typedef struct prof_trace {
    const mge_graph *g;
    const int *ndims;        /* concrete shapes at the batch (mge_graph_shapes) */
    const int64_t *dims;
    int64_t batch;
    const size_t *live;      /* per node: arena bytes live while it runs */
    const prof_spans *nodes; /* the main thread's node spans, all iterations */
    const prof_spans *pool;  /* per pool thread */
    int nthreads;            /* pool threads (0: no pool) */
    double base;             /* time origin (seconds) */
    const char *title;       /* process name */
} prof_trace;

/* The trace as JSON into b. */
void prof_trace_json(const prof_trace *t, mge_buf *b);
/* s as a JSON string (quoted, escaped). */
void prof_json_str(mge_buf *b, const char *s);

#endif
