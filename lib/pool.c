/* pool.c — the one thread pool: persistent workers, the caller is thread 0.
 *
 * A run publishes (fn, arg, ntasks) under a new generation number; workers
 * and the caller take task indices from an atomic counter until it passes
 * ntasks. Idle workers spin briefly on the generation (runs come in bursts,
 * one per kernel) and then sleep on a condition variable, so an idle pool
 * costs no CPU. The caller waits until every worker has left the run before
 * returning, so the next run may reuse the same fields.
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
    pthread_cond_t done;        /* the caller waits here for workers to finish */
    _Atomic uint64_t gen;       /* bumped once per run (and on shutdown) */
    _Atomic int64_t next;       /* next task index to hand out */
    _Atomic int busy;           /* workers still inside the current run */
    _Atomic int stop;
    int sleepers;               /* workers blocked on wake (under mu) */
    int64_t ntasks;
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

static void pool_drain(mge_pool *p, int thread)
{
    int64_t t = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
    if (t >= p->ntasks)
        return;
    /* The hook brackets only threads that got work, so a timeline shows
     * who did what; read once (it changes only between runs). */
    mge_exec_task_hook hook = p->hook;
    if (hook)
        hook(p->hook_ud, thread, 0);
    do
        p->fn(p->arg, t, thread);
    while ((t = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed)) < p->ntasks);
    if (hook)
        hook(p->hook_ud, thread, 1);
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
        /* The last one out tells the caller (which may be sleeping). */
        if (atomic_fetch_sub_explicit(&p->busy, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
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
    pthread_cond_init(&p->done, NULL);
    atomic_init(&p->gen, 0);
    atomic_init(&p->next, 0);
    atomic_init(&p->busy, 0);
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
    pthread_cond_destroy(&p->done);
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
    if (!p || p->n <= 1 || ntasks == 1 || pool_inside) {
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
    p->fn = fn;
    p->arg = arg;
    p->ntasks = ntasks;
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
    atomic_store_explicit(&p->busy, p->n - 1, memory_order_relaxed);
    /* The release on gen publishes the fields above to the workers. */
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_acq_rel);
    if (p->sleepers)
        pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);

    pool_inside = 1;
    pool_drain(p, 0);
    pool_inside = 0;

    for (int i = 0; i < POOL_SPIN && atomic_load_explicit(&p->busy, memory_order_acquire) > 0; i++)
        pool_relax();
    if (atomic_load_explicit(&p->busy, memory_order_acquire) > 0) {
        pthread_mutex_lock(&p->mu);
        while (atomic_load_explicit(&p->busy, memory_order_acquire) > 0)
            pthread_cond_wait(&p->done, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
}
