/* run_data.h — mge-run over a dataset (--data): batches in, results to the
 * sink, with the labels the data carries for --metrics. */
#ifndef MGE_RUN_DATA_H
#define MGE_RUN_DATA_H

#include "cli.h"
#include "run_sink.h"

/* The logits and labels of a cross_entropy loss, or -1 when the model's
 * loss is something else (or it has none: -O2 strips it). */
void run_data_classifier(const mge_graph *g, int *logits, int *labels);

typedef struct run_data_opts {
    const char *spec;          /* --data */
    int64_t batch;
    const mge_data_opts *dopts;   /* --normalize; may be NULL */
    int want_labels;           /* --metrics: find the labels */
    const char *target;        /* --target NAME (array or CSV column), or NULL */
    int loss_labels;           /* the labels input of the model's loss, or -1 */
    const char *columns;       /* --columns (CSV), or NULL */
    int header;                /* CSV: MGE_CSV_HEADER_* */
} run_data_opts;

/* True when spec is read as CSV (its name ends in .csv or .csv.gz). */
int run_data_is_csv(const char *spec);

/* Runs e over every batch of the dataset, in order, passing the outputs
 * and (with want_labels) each batch's labels to sink. The labels are, in
 * this order: the array or CSV column --target names; the labels input of
 * the model's loss, by name; an array or column called label, labels,
 * target, targets or y; for positional data (IDX pairs, NPY streams), the
 * array after the model's inputs. A CSV's features are --columns, or
 * every column but the labels'. Returns 0, or -1 after printing. */
int run_data(const run_data_opts *o, mge_graph *g, mge_exec *e, run_sink *sink);

/* Why a file that is not an NPY stream was handed over as one, for the
 * "bad magic" error: "it is a .npz archive: give datasets with --data",
 * ... head: its first n bytes (n may be 0: unknown), path its name. NULL
 * when nothing better than the error can be said. */
const char *run_data_hint(const unsigned char *head, size_t n, const char *path);

#endif
