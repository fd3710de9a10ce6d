/* train_dist.h — mge-train's data-parallel side: the job's communicator
 * (MPI in cmd/train_mpi.c, built when the Makefile finds MPI; a stub that
 * refuses a distributed launch otherwise) and the checks every rank makes
 * at start. */
#ifndef MGE_TRAIN_DIST_H
#define MGE_TRAIN_DIST_H

#include "mge.h"

/* The number of ranks an MPI launcher (mpirun, mpiexec, srun) says this
 * process is one of, from its environment; 1 when not launched by one. */
int train_mpi_launched(void);
/* Opens the communicator when launched as one of several ranks: *out is
 * NULL when running as one process. Waits give up after timeout_s seconds.
 * Prints and returns -1 on failure (also when built without MPI). */
int train_mpi_open(int *argc, char ***argv, double timeout_s, mge_comm **out);
/* Ends the job's MPI: normally, or (failed) aborting the other ranks,
 * which may be waiting in a collective. */
void train_mpi_close(mge_comm *c, int failed);
/* "OpenMPI 4.1.4" or "none". */
const char *train_mpi_name(void);

/* cmd/train_dist.c: the rank's view of the job. */
typedef struct train_dist {
    mge_comm *comm;          /* NULL: one process */
    int rank, size;
    int check_sync;          /* --check-sync: compare a hash of the params after every step */
    int sync_bn;             /* --sync-bn (else rank 0's running statistics go to all after each step) */
    int all_failed;          /* the failure is known to every rank (no abort needed) */
    int nin;
    int64_t whole;           /* > 0: the batch handed to train_dist_shard is already this rank's
                              * rows of a global batch of that many */
    mge_tensor *view;        /* per input: this rank's rows of the global batch */
    const mge_tensor **vp;
} train_dist;

/* This rank's rows of a global batch (rows [M*r/N, M*(r+1)/N) of its M):
 * *out the views (batch itself as one process), *rows M, *share its rows / M. */
mge_status train_dist_shard(train_dist *d, const mge_tensor *const *batch, int nin, const mge_tensor *const **out,
                            int64_t *rows, double *share, mge_error *err);
/* Each rank's k hashes of what must agree (names[i] says what h[i] is a hash
 * of, values[i] this rank's value or NULL): prints, on rank 0, the first
 * one some rank differs in, and returns -1 on every rank then. */
int train_dist_agree(train_dist *d, int k, const char *const *names, const char *const *values, const uint64_t *h);
/* Hashes for train_dist_agree: a graph's structure (values, nodes and
 * attributes; not data), a dataset's arrays, bytes, a string. */
uint64_t train_hash_graph(const mge_graph *g);
uint64_t train_hash_dataset(const mge_dataset *ds);
uint64_t train_hash_bytes(uint64_t h, const void *p, size_t n);
/* After a step with --check-sync: -1 (printed) when the ranks' params differ. */
int train_dist_check_sync(train_dist *d, mge_trainer *t, int64_t step);
void train_dist_free(train_dist *d);

#endif
