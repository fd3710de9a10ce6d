/* run_data.h — mge-run over a dataset (--data): batches in, outputs out,
 * and the classification accuracy (--accuracy). */
#ifndef MGE_RUN_DATA_H
#define MGE_RUN_DATA_H

#include "cli.h"

/* The logits and labels of a cross_entropy loss, or -1 when the model's
 * loss is something else. */
void run_data_classifier(const mge_graph *g, int *logits, int *labels);

/* Runs e over every batch of spec (u8 images scaled, then normalized per dopts, which may be NULL) (bound to the executor's inputs, plus
 * labels when labels >= 0). Outputs go to out (when out->f); with labels >= 0
 * the accuracy of argmax(logits) is printed on stdout. logits_k is the
 * executor output holding the logits. Returns 0, or -1 after printing. */
int run_data(const char *spec, int64_t batch, const mge_data_opts *dopts, mge_graph *g, mge_exec *e, cli_out *out,
             const char *out_name, int labels, int logits_k);

#endif
