/* cpu_pool_threads.c — the one thread pool: persistent workers, the caller is thread 0.
 *
 * A run publishes (fn, arg, ntasks), then opens a claim word holding its
 * run number and the next task index, and bumps a generation number to
 * wake the workers. Workers and the caller take task indices by a
 * compare-and-swap on the claim word, which only succeeds while the run it
 * read is still open; each thread adds the tasks it ran to `done` when it
 * has no more to take. The caller returns once every task is counted, and closes the run first (index all
 * ones), so a worker that comes late, after a later run has replaced the
 * fields, claims nothing and never reads them. The caller does not wait
 * for workers that took no task: on a VM whose second vCPU is away for a
 * while, a run then costs the serial time instead of stalling until the
 * vCPU comes back (each worker used to have to check out of every run).
 * Idle workers spin briefly on the generation (runs come in bursts, one
 * per kernel) and then sleep on a condition variable, so an idle pool
 * costs no CPU.
 *
 * One caller at a time per pool (each executor owns its pool). A run
 * started from inside a task (a kernel calling a helper that is itself
 * parallel) runs serially on that thread instead of deadlocking. */
#include "internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

/* Pause iterations before sleeping (about 100 us at 25 ns a pause on the
 * EPYC we measure on): long enough to bridge back-to-back kernels, short
 * enough not to hold a core long while the caller runs serial work
 * between two of our runs. */
#define POOL_SPIN 4000

struct mge_pool {
    int n;                      /* threads including the caller */
    pthread_t *th;
    pthread_mutex_t mu;
    pthread_cond_t wake;        /* workers wait here for a new generation */
    pthread_cond_t done_cv;     /* the caller waits here for the last tasks */
    _Atomic uint64_t gen;       /* bumped once per run (and on shutdown) */
    _Atomic uint64_t claim;     /* run number << 32 | next task index (POOL_CLOSED: none) */
    _Atomic int64_t done;       /* tasks of the current run finished */
    uint32_t run;               /* the current run's number (the caller's) */
    int waiting;                /* the caller sleeps on `done` (under mu) */
    _Atomic int stop;
    int sleepers;               /* workers blocked on wake (under mu) */
    _Atomic int64_t ntasks;     /* atomic: a late worker may read it as the next run sets it */
    mge_task_fn fn;
    void *arg;
    mge_exec_task_hook hook;    /* profilers: a thread starts/stops taking tasks */
    void *hook_ud;
};

/* Set while this thread runs pool tasks: nested runs go serial. */
static _Thread_local int pool_inside;

typedef struct pool_worker {
    mge_pool *p;
    int id;
} pool_worker;

static inline void pool_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

#define POOL_CLOSED UINT32_MAX

/* The next task of the open run: its index, or -1 when the run is closed,
 * has no task left, or is not run *run (when *run >= 0; else any open run,
 * whose number is stored in *run). A late worker may read the next run's ntasks;
 * its CAS then fails, as the claim word no longer holds the run it read. */
static int64_t pool_claim(mge_pool *p, int64_t *run)
{
    uint64_t c = atomic_load_explicit(&p->claim, memory_order_acquire);
    for (;;) {
        uint32_t idx = (uint32_t)c;
        if (idx == POOL_CLOSED || (*run >= 0 && (c >> 32) != (uint64_t)*run))
            return -1;
        int64_t n = atomic_load_explicit(&p->ntasks, memory_order_relaxed);
        if ((int64_t)idx >= n)
            return -1;
        if (atomic_compare_exchange_weak_explicit(&p->claim, &c, c + 1, memory_order_acq_rel,
                                                  memory_order_acquire)) {
            *run = (int64_t)(c >> 32);
            return idx;
        }
    }
}

static void pool_drain(mge_pool *p, int thread)
{
    int64_t run = -1, t = pool_claim(p, &run);
    if (t < 0)
        return;
    /* Fields of the run read after the first claim: the run cannot close
     * before this task is counted done, and later claims are of this run
     * only. The hook brackets only threads that got work, so a timeline
     * shows who did what. */
    mge_exec_task_hook hook = p->hook;
    mge_task_fn fn = p->fn;
    void *arg = p->arg;
    int64_t n = atomic_load_explicit(&p->ntasks, memory_order_relaxed);
    if (hook)
        hook(p->hook_ud, thread, 0);
    int64_t ran = 0;
    do {
        fn(arg, t, thread);
        ran++;
    } while ((t = pool_claim(p, &run)) >= 0);
    if (hook)
        hook(p->hook_ud, thread, 1);
    /* Counted last, after the hook: once `done` reaches ntasks no thread
     * touches anything of this run any more. The one that completes the
     * count wakes the caller if it sleeps. */
    if (atomic_fetch_add_explicit(&p->done, ran, memory_order_acq_rel) + ran == n && thread != 0) {
        pthread_mutex_lock(&p->mu);
        if (p->waiting)
            pthread_cond_signal(&p->done_cv);
        pthread_mutex_unlock(&p->mu);
    }
}

static void *pool_main(void *argp)
{
    pool_worker *w = argp;
    mge_pool *p = w->p;
    int id = w->id;
    free(w);
    pool_inside = 1;
    uint64_t seen = 0;
    for (;;) {
        uint64_t g = atomic_load_explicit(&p->gen, memory_order_acquire);
        for (int i = 0; g == seen && i < POOL_SPIN; i++) {
            pool_relax();
            g = atomic_load_explicit(&p->gen, memory_order_acquire);
        }
        if (g == seen) {
            pthread_mutex_lock(&p->mu);
            p->sleepers++;
            while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen)
                pthread_cond_wait(&p->wake, &p->mu);
            p->sleepers--;
            pthread_mutex_unlock(&p->mu);
        }
        seen = g;
        if (atomic_load_explicit(&p->stop, memory_order_acquire))
            return NULL;
        pool_drain(p, id);
    }
}

mge_pool *mge_pool_create(int nthreads)
{
    if (nthreads < 1)
        nthreads = 1;
    mge_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->n = nthreads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done_cv, NULL);
    atomic_init(&p->gen, 0);
    atomic_init(&p->claim, (uint64_t)POOL_CLOSED);
    atomic_init(&p->done, 0);
    atomic_init(&p->ntasks, 0);
    atomic_init(&p->stop, 0);
    if (nthreads > 1) {
        p->th = calloc((size_t)nthreads - 1, sizeof *p->th);
        if (!p->th) {
            mge_pool_free(p);
            return NULL;
        }
        for (int i = 1; i < nthreads; i++) {
            pool_worker *w = malloc(sizeof *w);
            if (!w || pthread_create(&p->th[i - 1], NULL, pool_main, (w->p = p, w->id = i, w)) != 0) {
                free(w);
                p->n = i;   /* only threads 1..i-1 exist; free joins those */
                mge_pool_free(p);
                return NULL;
            }
        }
    }
    return p;
}

void mge_pool_free(mge_pool *p)
{
    if (!p)
        return;
    if (p->th) {
        pthread_mutex_lock(&p->mu);
        atomic_store_explicit(&p->stop, 1, memory_order_release);
        atomic_fetch_add_explicit(&p->gen, 1, memory_order_acq_rel);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
        for (int i = 1; i < p->n; i++)
            pthread_join(p->th[i - 1], NULL);
        free(p->th);
    }
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done_cv);
    free(p);
}

int mge_pool_size(const mge_pool *p)
{
    return p ? p->n : 1;
}

void mge_pool_set_hook(mge_pool *p, mge_exec_task_hook fn, void *ud)
{
    if (!p)
        return;
    p->hook = fn;
    p->hook_ud = ud;
}

void mge_pool_run(mge_pool *p, int64_t ntasks, mge_task_fn fn, void *arg)
{
    if (ntasks <= 0)
        return;
    if (!p || p->n <= 1 || ntasks == 1 || pool_inside || ntasks >= (int64_t)POOL_CLOSED) {
        /* serial on the caller; a nested run is inside a bracketed task already */
        int hooked = p && p->hook && !pool_inside;
        if (hooked)
            p->hook(p->hook_ud, 0, 0);
        for (int64_t t = 0; t < ntasks; t++)
            fn(arg, t, 0);
        if (hooked)
            p->hook(p->hook_ud, 0, 1);
        return;
    }
    /* The previous run is closed (claim index all ones), so no worker reads
     * these while they change; the release store of the claim word
     * publishes them with the run. */
    p->fn = fn;
    p->arg = arg;
    atomic_store_explicit(&p->ntasks, ntasks, memory_order_relaxed);
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    p->run++;   /* wraps after 2^32 runs: a claim read that long ago could only then match again */
    atomic_store_explicit(&p->claim, (uint64_t)p->run << 32, memory_order_release);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_acq_rel);
    if (p->sleepers)
        pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);

    pool_inside = 1;
    pool_drain(p, 0);
    pool_inside = 0;

    for (int i = 0; i < POOL_SPIN && atomic_load_explicit(&p->done, memory_order_acquire) < ntasks; i++)
        pool_relax();
    if (atomic_load_explicit(&p->done, memory_order_acquire) < ntasks) {
        pthread_mutex_lock(&p->mu);
        p->waiting = 1;
        while (atomic_load_explicit(&p->done, memory_order_acquire) < ntasks)
            pthread_cond_wait(&p->done_cv, &p->mu);
        p->waiting = 0;
        pthread_mutex_unlock(&p->mu);
    }
    /* Close the run: a late worker's claim fails from here on. */
    atomic_store_explicit(&p->claim, (uint64_t)p->run << 32 | POOL_CLOSED, memory_order_release);
}
