/* bench_sets.h — mge-bench's lists of input configurations, one table row
 * each: --batch B[,B...] and --shape given as several sets.
 *
 * Shape sets: --shape NAME=DIMS is repeatable; a --shape naming an input
 * the current set already has starts a new set, so
 *   --shape x=1x1x28x28 --shape x=8x1x28x28
 * is two sets (two rows) and
 *   --shape a=1x3 --shape b=1x3 --shape a=8x3 --shape b=8x3
 * is two sets of two inputs. Every set must name the same inputs. No
 * separator to quote in the shell, which is why this and not "a;b". */
#ifndef MGE_CMD_BENCH_SETS_H
#define MGE_CMD_BENCH_SETS_H

#include "inputs.h"

enum { BENCH_MAX_BATCHES = 64 };

typedef struct bench_sets {
    int n;                              /* shape sets (0: no --shape) */
    bench_shapes *set;
    int nbatch;                         /* --batch values (0: not given) */
    int64_t batch[BENCH_MAX_BATCHES];
} bench_sets;

/* One --shape argument (usage errors exit 2). Returns 0, or -1 when out of
 * memory (printed). */
int bench_sets_add_shape(bench_sets *s, const char *arg);
/* --batch B or B,B,...: each 1..2^24 (usage errors exit 2). */
void bench_sets_batch(bench_sets *s, const char *arg);
/* After all options: every set names the same inputs, and a --batch list
 * and several shape sets are not both given (usage errors exit 2). */
void bench_sets_check(const bench_sets *s);
/* Rows per model and thread count: the number of sets or batches, at least 1. */
int bench_sets_count(const bench_sets *s);
/* The shapes (NULL: none) and the batch (0: not given) of row v. */
const bench_shapes *bench_sets_shapes(const bench_sets *s, int v);
int64_t bench_sets_batch_of(const bench_sets *s, int v);
void bench_sets_free(bench_sets *s);

#endif
