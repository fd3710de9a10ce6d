/* run_metrics.h — mge-run --metrics: scores of a model's output against the
 * labels of the data, accumulated over batches.
 *
 * Classification (accuracy, topK): the output holds class scores [N,C] (any
 * trailing dims of 1 allowed) and the labels class indices [N] in [0, C): a
 * sample is right when its label is among the K highest scores (ties go to
 * the lower class index, as argmax's first maximum). Regression (mse, rmse,
 * mae, r2): the output and the labels hold the same number of values per
 * sample; r2 is computed per output value and averaged (scikit-learn's
 * r2_score), 1 for a constant target predicted exactly, 0 otherwise. */
#ifndef MGE_RUN_METRICS_H
#define MGE_RUN_METRICS_H

#include "cli.h"

typedef struct run_metrics run_metrics;

/* Parses a comma-separated list (accuracy, top1..topK, mse, rmse, mae, r2);
 * an unknown or repeated name is a usage error (exits 2). opt names the
 * option in messages. NULL when out of memory (printed). */
run_metrics *run_metrics_parse(const char *opt, const char *list);
void run_metrics_free(run_metrics *m);

/* Adds one batch: out (the scored output, called oname) against labels
 * (lname: where they come from). Prints an error naming both and returns -1
 * when they do not fit or a label is not a class of the output. */
int run_metrics_add(run_metrics *m, const mge_tensor *out, const char *oname, const mge_tensor *labels,
                    const char *lname);

/* "accuracy 0.8120 (812 of 1000)", "mse 0.0123", ... one line each, on stdout. */
void run_metrics_print(const run_metrics *m);
/* The same as JSON members ("samples": N, "accuracy": A, "accuracy_correct": K, ...), no braces. */
void run_metrics_json(const run_metrics *m, mge_buf *b);

#endif
