/* test_pool.c — kernels/cpu/cpu_pool_threads.c under load: every task of every run runs
 * exactly once and on a valid thread, runs come back to back (a worker
 * still draining or arriving late for one run must not take or skip a
 * task of the next), tasks of uneven length and tasks that stall, nested
 * runs (serial), the profiler hook bracketed in pairs, and many pools
 * created and freed. Also built with -fsanitize=thread by hand:
 *   clang -std=c11 -O1 -g -fsanitize=thread -Ilib tests/unit/test_pool.c \
 *         kernels/cpu/cpu_pool_threads.c -lpthread -o /tmp/test_pool_tsan */
#include "unit.h"

#include "internal.h"

#include <stdatomic.h>
#include <time.h>

#define MAXT 64

typedef struct job {
    _Atomic int hits[MAXT];
    _Atomic int bad_thread;
    int nthreads, stall;
    mge_pool *pool;   /* for nested runs */
} job;

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint32_t rnd32(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)rng;
}

static void spin_ns(long ns)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do
        clock_gettime(CLOCK_MONOTONIC, &b);
    while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < ns);
}

static void nested_task(void *arg, int64_t t, int thread)
{
    job *j = arg;
    (void)thread;
    atomic_fetch_add(&j->hits[t], 1);
}

static void task(void *arg, int64_t t, int thread)
{
    job *j = arg;
    if (thread < 0 || thread >= j->nthreads)
        atomic_store(&j->bad_thread, 1);
    if (j->stall && t == 0)
        spin_ns(200000);   /* one task holds a thread while the rest finish */
    else if (t % 7 == 3)
        spin_ns(2000);
    atomic_fetch_add(&j->hits[t], 1);
}

static int check_hits(job *j, int64_t n)
{
    for (int64_t t = 0; t < MAXT; t++) {
        int h = atomic_load(&j->hits[t]);
        if (h != (t < n ? 1 : 0))
            return 0;
    }
    return 1;
}

static void test_back_to_back(void)
{
    for (int nt = 2; nt <= 4; nt++) {
        mge_pool *p = mge_pool_create(nt);
        CHECK(p != NULL);
        if (!p)
            continue;
        int bad = 0;
        for (int r = 0; r < 20000 && !bad; r++) {
            job j;
            memset(&j, 0, sizeof j);
            j.nthreads = nt;
            j.stall = r % 997 == 5;
            int64_t n = 1 + rnd32() % MAXT;
            mge_pool_run(p, n, task, &j);
            if (!check_hits(&j, n) || atomic_load(&j.bad_thread)) {
                fprintf(stderr, "pool of %d, run %d, %lld tasks: a task ran other than once\n", nt, r, (long long)n);
                bad = 1;
            }
            if (r % 1000 == 999)
                spin_ns(300000);   /* long enough for the workers to go to sleep */
        }
        CHECK(!bad);
        mge_pool_free(p);
    }
}

static void nesting_task(void *arg, int64_t t, int thread)
{
    job *j = arg;
    (void)t, (void)thread;
    job inner;
    memset(&inner, 0, sizeof inner);
    inner.nthreads = j->nthreads;
    mge_pool_run(j->pool, 5, nested_task, &inner);   /* serial inside a task */
    if (check_hits(&inner, 5))
        atomic_fetch_add(&j->hits[t], 1);
}

static void test_nested(void)
{
    mge_pool *p = mge_pool_create(3);
    job j;
    memset(&j, 0, sizeof j);
    j.nthreads = 3;
    j.pool = p;
    mge_pool_run(p, 16, nesting_task, &j);
    CHECK(check_hits(&j, 16));
    mge_pool_free(p);
}

static _Atomic int hook_depth[MAXT], hook_bad;

static void hook(void *ud, int thread, int stop)
{
    (void)ud;
    int d = atomic_fetch_add(&hook_depth[thread], stop ? -1 : 1) + (stop ? -1 : 1);
    if (d < 0 || d > 1)
        atomic_store(&hook_bad, 1);
}

static void test_hook(void)
{
    mge_pool *p = mge_pool_create(3);
    mge_pool_set_hook(p, hook, NULL);
    for (int r = 0; r < 2000; r++) {
        job j;
        memset(&j, 0, sizeof j);
        j.nthreads = 3;
        int64_t n = 1 + r % 40;
        mge_pool_run(p, n, task, &j);
        CHECK(check_hits(&j, n));
    }
    for (int t = 0; t < 3; t++)
        CHECK(atomic_load(&hook_depth[t]) == 0);
    CHECK(!atomic_load(&hook_bad));
    mge_pool_free(p);
}

static void test_create_free(void)
{
    for (int i = 0; i < 200; i++) {
        mge_pool *p = mge_pool_create(1 + i % 4);
        CHECK(p != NULL);
        if (i % 2) {
            job j;
            memset(&j, 0, sizeof j);
            j.nthreads = 1 + i % 4;
            mge_pool_run(p, 9, task, &j);
            CHECK(check_hits(&j, 9));
        }
        mge_pool_free(p);
    }
    CHECK(mge_pool_size(NULL) == 1);
}

int main(void)
{
    RUN(test_back_to_back);
    RUN(test_nested);
    RUN(test_hook);
    RUN(test_create_free);
    return unit_done();
}
