/* run_sink.h — where mge-run's results go, the same for every kind of input
 * (NPY streams, --data, --image): output records (one per output and step,
 * or gathered: --concat, .npz), --top-k lines, --metrics, --json. */
#ifndef MGE_RUN_SINK_H
#define MGE_RUN_SINK_H

#include "cli.h"
#include "run_metrics.h"
#include "run_topk.h"

typedef struct run_gather run_gather;

typedef struct run_sink {
    /* set by the caller before the first step */
    cli_out *out;            /* records go to out->f; NULL or out->f NULL: none */
    const char *out_name;    /* for messages */
    int concat;              /* gather each output over the steps: one record per output */
    int npz;                 /* write the gathered outputs as one .npz keyed by output name */
    int score_k;             /* the executor output --metrics and --top-k read */
    run_metrics *metrics;    /* NULL: none */
    run_topk *topk;          /* NULL: none */
    int json;                /* one JSON object on stdout at the end */
    /* state */
    int steps;
    run_gather *gather;
} run_sink;

/* One step's results: the outputs of e, the labels of its samples (for
 * --metrics; NULL otherwise, labels_name says where they come from), and
 * the file of each sample (--image; NULL otherwise). Prints and returns -1
 * on failure. */
int run_sink_step(run_sink *s, const mge_graph *g, mge_exec *e, const mge_tensor *labels, const char *labels_name,
                  const char *const *files);
/* After the last step: the gathered records, the metrics, the JSON object.
 * Prints and returns -1 on failure. */
int run_sink_finish(run_sink *s, const mge_graph *g, mge_exec *e);
void run_sink_free(run_sink *s);

#endif
