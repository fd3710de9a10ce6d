/* test_cpu_parallel.c — kernels/cpu/cpu.h's range splitters over the pool:
 * cpu_parallel (dynamic chunks, a count the threads share evenly) and
 * cpu_parallel_aff (each thread its own share first, then the others'):
 * every index of [0, n) in exactly one range, ranges inside [0, n) and
 * at least `grain` long but for the last of a share, on 1-4 threads, with
 * a thread that stalls (the others must finish its share). */
#include "unit.h"

#include "cpu/cpu.h"

#include <time.h>

#define MAXN 4096

typedef struct seen {
    _Atomic int hits[MAXN];
    _Atomic int bad;   /* a range out of [0, n), empty, or a bad thread index */
    _Atomic int short_ranges;
    int64_t n, grain;
    int threads, stall;
} seen;

static void spin_us(long us)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do
        clock_gettime(CLOCK_MONOTONIC, &b);
    while ((b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000 < us);
}

static void visit(void *arg, int64_t b, int64_t e, int thread)
{
    seen *s = arg;
    if (b < 0 || e > s->n || b >= e || thread < 0 || thread >= s->threads) {
        atomic_fetch_add(&s->bad, 1);
        return;
    }
    if (e - b < s->grain)
        atomic_fetch_add(&s->short_ranges, 1);
    if (s->stall && thread == s->threads - 1)
        spin_us(200);   /* the last thread is slow: the others take over its share */
    for (int64_t i = b; i < e; i++)
        atomic_fetch_add(&s->hits[i], 1);
}

/* runs one splitter over n with grain; 1 when every index was hit once */
static int run(mge_pool *p, int threads, int aff, int64_t n, int64_t grain, int stall, int *shorts)
{
    static seen s;
    for (int64_t i = 0; i < MAXN; i++)
        atomic_init(&s.hits[i], 0);
    atomic_init(&s.bad, 0);
    atomic_init(&s.short_ranges, 0);
    s.n = n, s.grain = grain, s.threads = threads, s.stall = stall;
    mge_kctx ctx = {.pool = p, .threads = threads};
    if (aff)
        cpu_parallel_aff(&ctx, n, grain, visit, &s);
    else
        cpu_parallel(&ctx, n, grain, visit, &s);
    int ok = atomic_load(&s.bad) == 0;
    for (int64_t i = 0; i < n; i++)
        ok &= atomic_load(&s.hits[i]) == 1;
    *shorts = atomic_load(&s.short_ranges);
    return ok;
}

static void test_cover(void)
{
    static const int64_t ns[] = {0, 1, 2, 3, 7, 8, 14, 80, 97, 336, 1000, 4096};
    static const int64_t grains[] = {1, 3, 17, 100};
    for (int threads = 1; threads <= 4; threads++) {
        mge_pool *p = mge_pool_create(threads);
        CHECK(p != NULL);
        for (int aff = 0; aff < 2; aff++)
            for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
                for (size_t g = 0; g < sizeof grains / sizeof grains[0]; g++)
                    for (int stall = 0; stall < 2; stall++) {
                        int shorts = 0;
                        int ok = run(p, threads, aff, ns[a], grains[g], stall, &shorts);
                        CHECK_MSG(ok, "%s: %d threads, n %lld, grain %lld%s: an index missed, hit twice, or a bad "
                                  "range", aff ? "cpu_parallel_aff" : "cpu_parallel", threads, (long long)ns[a],
                                  (long long)grains[g], stall ? ", a slow thread" : "");
                        /* only the last range of each share may be short */
                        CHECK_MSG(shorts <= threads, "%s: %d ranges under grain %lld (n %lld, %d threads)",
                                  aff ? "cpu_parallel_aff" : "cpu_parallel", shorts, (long long)grains[g],
                                  (long long)ns[a], threads);
                    }
        mge_pool_free(p);
    }
}

/* cpu_parallel: equal chunks in a count the threads share evenly (3
 * chunks of 27 on 2 threads would leave one thread a third of the work
 * alone; 2 of 40 do not) */
typedef struct count {
    _Atomic int ranges;
} count;

static void count_range(void *arg, int64_t b, int64_t e, int thread)
{
    (void)b, (void)e, (void)thread;
    count *c = arg;
    atomic_fetch_add(&c->ranges, 1);
}

static void test_even(void)
{
    mge_pool *p = mge_pool_create(2);
    mge_kctx ctx = {.pool = p, .threads = 2};
    static const int64_t ns[] = {80, 81, 63, 56, 100, 1000};   /* all >= 2 x grain: split */
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        count c;
        atomic_init(&c.ranges, 0);
        cpu_parallel(&ctx, ns[i], 21, count_range, &c);
        int r = atomic_load(&c.ranges);
        CHECK_MSG(r % 2 == 0, "n %lld, grain 21, 2 threads: %d chunks", (long long)ns[i], r);
    }
    mge_pool_free(p);
}

int main(void)
{
    RUN(test_cover);
    RUN(test_even);
    return unit_done();
}
