/* run_topk.h — mge-run --top-k K [--labels FILE] [--softmax]: the K best
 * classes of each sample of a score output [N,C] (trailing dims of 1 allowed).
 *
 * Text: one line per sample and rank, tab-separated,
 *     SAMPLE  RANK  CLASS  SCORE  [NAME]
 * SAMPLE being the image file (--image) or the sample's index from 0.
 * JSON: objects {"sample", ["file",] "classes", "scores"[, "names"]}
 * collected for one array. Ties go to the lower class index. */
#ifndef MGE_RUN_TOPK_H
#define MGE_RUN_TOPK_H

#include "cli.h"

typedef struct run_topk {
    int k;
    int softmax;         /* scores as softmax probabilities over the classes */
    int json;            /* collect into js instead of printing */
    char **names;        /* class names from --labels, or NULL */
    int64_t nnames;
    const char *names_path;
    mge_buf js;          /* JSON objects, comma-separated */
    int64_t seen;        /* samples so far */
} run_topk;

/* Reads class names, one per line (a final newline optional, \r\n fine).
 * Prints and returns -1 on failure (missing file, no lines). */
int run_topk_labels(run_topk *t, const char *path);

/* The top K of each row of out (called oname); files names the rows (one
 * per row) or is NULL. Prints and returns -1 when out is not [N,C], has
 * fewer than K classes, or more classes than the labels file has names. */
int run_topk_add(run_topk *t, const mge_tensor *out, const char *oname, const char *const *files);

void run_topk_free(run_topk *t);

#endif
