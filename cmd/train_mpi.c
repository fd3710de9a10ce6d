/* train_mpi.c — mge_comm over MPI for mge-train and mge-prof --train (compiled with MGE_HAVE_MPI
 * when the Makefile finds mpicc or pkg-config's ompi-c; without it, the
 * stubs at the end refuse a distributed launch clearly). Only this file
 * includes mpi.h, and only those two link it.
 *
 * Every wait is MPI_Test in a loop with a deadline, so a rank that died (or
 * never called the collective) makes the others fail with a message after
 * the timeout instead of hanging, whatever the launcher does about it;
 * errors are returned (MPI_ERRORS_RETURN), not fatal. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "train_dist.h"

int train_mpi_launched(void)
{
    /* OpenMPI, MPICH / Intel MPI (hydra), MVAPICH, PMIx launchers */
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE", "PMIX_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) {
            long n = strtol(v, NULL, 10);
            return n > 1 ? (int)n : 1;
        }
    }
    return 1;
}

#ifdef MGE_HAVE_MPI
#include <mpi.h>
#include <sched.h>

typedef struct mpi_ud {
    double timeout;
    char name[64];
} mpi_ud;

static mge_status mpi_fail(int rc, const char *what, mge_error *err)
{
    char b[MPI_MAX_ERROR_STRING];
    int n = 0;
    if (MPI_Error_string(rc, b, &n) != MPI_SUCCESS)
        snprintf(b, sizeof b, "MPI error %d", rc);
    return mge_error_set(err, MGE_ERR_IO, "%s: %s", what, b);
}

/* Waits for req until the deadline; what names the operation. */
static mge_status timed_wait(mge_comm *c, MPI_Request *req, const char *what, mge_error *err)
{
    const mpi_ud *u = c->ud;
    double t0 = MPI_Wtime();
    for (long spins = 0;; spins++) {
        int done = 0, rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
            return mpi_fail(rc, what, err);
        if (done)
            return MGE_OK;
        if ((spins & 255) == 255) {
            if (MPI_Wtime() - t0 > u->timeout)
                return mge_error_set(err, MGE_ERR_IO,
                                     "%s: no answer from the other ranks in %g s (a rank died or stopped; "
                                     "--comm-timeout sets the limit)", what, u->timeout);
            sched_yield();   /* oversubscribed: let the rank we wait for run */
        }
    }
}

static mge_status c_iallreduce(mge_comm *c, float *buf, int64_t n, void **req, mge_error *err)
{
    MPI_Request *r = malloc(sizeof *r);
    if (!r)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    if (n > 0x7fffffff) {
        free(r);
        return mge_error_set(err, MGE_ERR_INVALID, "gradient bucket of %lld elements: more than MPI counts (use a smaller --bucket-mb)",
                             (long long)n);
    }
    int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, r);
    if (rc != MPI_SUCCESS) {
        free(r);
        return mpi_fail(rc, "gradient allreduce", err);
    }
    *req = r;
    return MGE_OK;
}

static mge_status c_test(mge_comm *c, void *req, int *done, mge_error *err)
{
    (void)c;
    int rc = MPI_Test(req, done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS)
        return mpi_fail(rc, "gradient allreduce", err);
    if (*done)
        free(req);
    return MGE_OK;
}

static mge_status c_wait(mge_comm *c, void *req, mge_error *err)
{
    mge_status s = timed_wait(c, req, "gradient allreduce", err);
    if (!s)
        free(req);
    return s;
}

static mge_status c_allreduce_f64(mge_comm *c, double *buf, int64_t n, mge_error *err)
{
    MPI_Request r;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &r);
    return rc != MPI_SUCCESS ? mpi_fail(rc, "allreduce", err) : timed_wait(c, &r, "allreduce", err);
}

static mge_status c_bcast(mge_comm *c, void *buf, size_t n, int root, mge_error *err)
{
    /* in pieces: MPI counts are ints */
    for (size_t off = 0; off < n || (n == 0 && off == 0);) {
        size_t k = n - off > (1u << 30) ? (1u << 30) : n - off;
        MPI_Request r;
        int rc = MPI_Ibcast((char *)buf + off, (int)k, MPI_BYTE, root, MPI_COMM_WORLD, &r);
        mge_status s = rc != MPI_SUCCESS ? mpi_fail(rc, "broadcast", err) : timed_wait(c, &r, "broadcast", err);
        if (s)
            return s;
        off += k;
        if (n == 0)
            break;
    }
    return MGE_OK;
}

static mge_status c_allgather_u64(mge_comm *c, const uint64_t *mine, int k, uint64_t *all, mge_error *err)
{
    MPI_Request r;
    int rc = MPI_Iallgather(mine, k, MPI_UINT64_T, all, k, MPI_UINT64_T, MPI_COMM_WORLD, &r);
    return rc != MPI_SUCCESS ? mpi_fail(rc, "allgather", err) : timed_wait(c, &r, "allgather", err);
}

static mge_comm the_comm;
static mpi_ud the_ud;

int train_mpi_open(int *argc, char ***argv, double timeout_s, mge_comm **out)
{
    *out = NULL;
    if (train_mpi_launched() <= 1)
        return 0;
    int have = 0, rc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &have);
    if (rc != MPI_SUCCESS) {
        cli_error(NULL, "MPI_Init failed (error %d)", rc);
        return -1;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &the_comm.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &the_comm.size);
    the_ud.timeout = timeout_s;
    the_comm.ud = &the_ud;
    the_comm.iallreduce = c_iallreduce;
    the_comm.test = c_test;
    the_comm.wait = c_wait;
    the_comm.allreduce_f64 = c_allreduce_f64;
    the_comm.bcast = c_bcast;
    the_comm.allgather_u64 = c_allgather_u64;
    if (the_comm.size <= 1) {
        MPI_Finalize();
        return 0;
    }
    *out = &the_comm;
    return 0;
}

void train_mpi_close(mge_comm *c, int failed)
{
    if (!c)
        return;
    fflush(stderr);
    if (failed)
        MPI_Abort(MPI_COMM_WORLD, 1);   /* the others may be waiting in a collective */
    else
        MPI_Finalize();
}

const char *train_mpi_name(void)
{
    static char b[MPI_MAX_LIBRARY_VERSION_STRING];
    int n = 0;
    if (MPI_Get_library_version(b, &n) != MPI_SUCCESS)
        return "MPI";
    char *nl = strpbrk(b, ",\n");
    if (nl)
        *nl = 0;
    return b;
}

#else /* no MPI */

int train_mpi_open(int *argc, char ***argv, double timeout_s, mge_comm **out)
{
    (void)argc, (void)argv, (void)timeout_s;
    *out = NULL;
    int n = train_mpi_launched();
    if (n <= 1)
        return 0;
    cli_error(NULL, "started by an MPI launcher as one of %d ranks, but this %s was built without MPI "
              "(install libopenmpi-dev, rebuild with make)", n, cli_prog);
    return -1;
}

void train_mpi_close(mge_comm *c, int failed)
{
    (void)c, (void)failed;
}

const char *train_mpi_name(void)
{
    return "none";
}
#endif
