/* test_planner_place.c — the planner's placement (mge_plan_place) on its
 * own: random interval sets against the scan over all placed buffers that
 * it replaced (kept here as the oracle), and long sets of the shapes long
 * graphs make (everything live to the end, nested lifetimes). */
#include "internal.h"
#include "unit.h"

static mge_error err;

static uint64_t rng_state = 88172645463325252ull;

static uint64_t next_rand(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static int rand_below(int n)
{
    return (int)(next_rand() % (uint64_t)n);
}

/* ---------------------------------------------------------------- the oracle
 * The quadratic placement the planner used to run: orders by size, first
 * use, lifetime and area; per order first-fit and best-fit over a list of
 * the placed buffers sorted by offset; the smallest arena wins, the first
 * on ties. */

typedef struct obuf {
    size_t size;
    int start, end;
    int64_t off;
} obuf;

typedef struct okey {
    double k1, k2, k3;
    int idx;
} okey;

static int cmp_okey(const void *pa, const void *pb)
{
    const okey *x = pa, *y = pb;
    if (x->k1 != y->k1)
        return x->k1 < y->k1 ? -1 : 1;
    if (x->k2 != y->k2)
        return x->k2 < y->k2 ? -1 : 1;
    if (x->k3 != y->k3)
        return x->k3 < y->k3 ? -1 : 1;
    return x->idx - y->idx;
}

static void oracle_order(const obuf *b, int nb, int key, okey *keys, int *order)
{
    for (int i = 0; i < nb; i++) {
        double size = (double)b[i].size, len = b[i].end - b[i].start + 1;
        okey *k = &keys[i];
        k->idx = i;
        k->k3 = b[i].start;
        switch (key) {
        case 0: k->k1 = -size, k->k2 = b[i].start; break;
        case 1: k->k1 = b[i].start, k->k2 = -size; break;
        case 2: k->k1 = -len, k->k2 = -size; break;
        default: k->k1 = -size * len, k->k2 = -size; break;
        }
    }
    qsort(keys, (size_t)nb, sizeof *keys, cmp_okey);
    for (int i = 0; i < nb; i++)
        order[i] = keys[i].idx;
}

static size_t oracle_fit(obuf *b, int nb, const int *order, int best, int *placed)
{
    size_t arena = 0;
    int np = 0;
    for (int oi = 0; oi < nb; oi++) {
        obuf *x = &b[order[oi]];
        size_t cur = 0, pick = SIZE_MAX, pick_gap = SIZE_MAX;
        for (int k = 0; k < np && x->size; k++) {
            const obuf *y = &b[placed[k]];
            if (!y->size || y->start > x->end || x->start > y->end)
                continue;
            size_t yo = (size_t)y->off;
            if (yo >= cur && yo - cur >= x->size) {
                if (!best) {
                    pick = cur;
                    break;
                }
                if (yo - cur < pick_gap) {
                    pick_gap = yo - cur;
                    pick = cur;
                }
            }
            if (yo + y->size > cur)
                cur = yo + y->size;
        }
        if (pick == SIZE_MAX)
            pick = cur;
        x->off = (int64_t)pick;
        if (pick + x->size > arena)
            arena = pick + x->size;
        int k = np++;
        while (k > 0 && b[placed[k - 1]].off > x->off) {
            placed[k] = placed[k - 1];
            k--;
        }
        placed[k] = order[oi];
    }
    return arena;
}

static size_t oracle(obuf *b, int nb, int64_t *off)
{
    int *order = malloc(sizeof(int) * (size_t)(nb + 1)), *placed = malloc(sizeof(int) * (size_t)(nb + 1));
    okey *keys = malloc(sizeof(okey) * (size_t)(nb + 1));
    size_t best = SIZE_MAX;
    for (int key = 0; key < 4; key++) {
        oracle_order(b, nb, key, keys, order);
        for (int fit = 0; fit < 2; fit++) {
            size_t a = oracle_fit(b, nb, order, fit, placed);
            if (a < best) {
                best = a;
                for (int i = 0; i < nb; i++)
                    off[i] = b[i].off;
            }
        }
    }
    free(order);
    free(placed);
    free(keys);
    return nb ? best : 0;
}

/* ---------------------------------------------------------------- checks */

typedef struct set {
    int n;
    size_t *size;
    int *start, *end;
    int64_t *off;
} set;

static set set_new(int n)
{
    set s = {n, calloc((size_t)n + 1, sizeof(size_t)), calloc((size_t)n + 1, sizeof(int)),
             calloc((size_t)n + 1, sizeof(int)), calloc((size_t)n + 1, sizeof(int64_t))};
    return s;
}

static void set_free(set *s)
{
    free(s->size);
    free(s->start);
    free(s->end);
    free(s->off);
}

/* The most bytes live at one step. */
static size_t lower_bound(const set *s)
{
    int T = 0;
    for (int i = 0; i < s->n; i++)
        if (s->end[i] + 1 > T)
            T = s->end[i] + 1;
    int64_t *d = calloc((size_t)T + 2, sizeof *d), run = 0, peak = 0;
    for (int i = 0; i < s->n; i++) {
        d[s->start[i]] += (int64_t)s->size[i];
        d[s->end[i] + 1] -= (int64_t)s->size[i];
    }
    for (int t = 0; t <= T; t++)
        if ((run += d[t]) > peak)
            peak = run;
    free(d);
    return (size_t)peak;
}

/* Coverage counts over 64-byte units of the arena: range add, maximum. */
typedef struct cover {
    int n;
    int *mx, *add;
} cover;

static void cover_add(cover *c, int v, int L, int R, int lo, int hi, int d)
{
    if (hi < L || R < lo)
        return;
    if (lo <= L && R <= hi) {
        c->mx[v] += d;
        c->add[v] += d;
        return;
    }
    int M = (L + R) / 2;
    cover_add(c, 2 * v, L, M, lo, hi, d);
    cover_add(c, 2 * v + 1, M + 1, R, lo, hi, d);
    int a = c->mx[2 * v], b = c->mx[2 * v + 1];
    c->mx[v] = (a > b ? a : b) + c->add[v];
}

static const int *sort_key; /* qsort has no context argument */
static int cmp_by_key(const void *pa, const void *pb)
{
    int a = *(const int *)pa, b = *(const int *)pb;
    return sort_key[a] != sort_key[b] ? (sort_key[a] < sort_key[b] ? -1 : 1) : a - b;
}

/* No two buffers live at a common step share a byte, and all lie in the
 * arena: a sweep over the steps that counts, per 64-byte unit, the live
 * buffers covering it (independent of the planner's structures). */
static int no_overlap(const set *s, size_t arena)
{
    for (int i = 0; i < s->n; i++)
        if (s->off[i] < 0 || s->off[i] % 64 || (size_t)s->off[i] + s->size[i] > arena)
            return 0;
    if (arena == 0)
        return 1;
    cover c = {(int)(arena / 64), NULL, NULL};
    c.mx = calloc(4 * (size_t)c.n, sizeof(int));
    c.add = calloc(4 * (size_t)c.n, sizeof(int));
    int *bys = malloc(sizeof(int) * (size_t)s->n), *bye = malloc(sizeof(int) * (size_t)s->n);
    for (int i = 0; i < s->n; i++)
        bys[i] = bye[i] = i;
    sort_key = s->start;
    qsort(bys, (size_t)s->n, sizeof(int), cmp_by_key);
    sort_key = s->end;
    qsort(bye, (size_t)s->n, sizeof(int), cmp_by_key);
    int ok = 1;
    for (int a = 0, e = 0; ok && a < s->n;) {
        int t = s->start[bys[a]];
        for (; e < s->n && s->end[bye[e]] < t; e++) /* ended before step t */
            if (s->size[bye[e]])
                cover_add(&c, 1, 0, c.n - 1, (int)(s->off[bye[e]] / 64),
                          (int)((s->off[bye[e]] + (int64_t)s->size[bye[e]]) / 64) - 1, -1);
        for (; a < s->n && s->start[bys[a]] == t; a++)
            if (s->size[bys[a]])
                cover_add(&c, 1, 0, c.n - 1, (int)(s->off[bys[a]] / 64),
                          (int)((s->off[bys[a]] + (int64_t)s->size[bys[a]]) / 64) - 1, 1);
        ok = c.mx[1] <= 1;
    }
    free(c.mx);
    free(c.add);
    free(bys);
    free(bye);
    return ok;
}

/* Random sets: short and long lifetimes, a few sizes that repeat (exact
 * fits) and odd ones, some zero-size buffers; the offsets must be the
 * oracle's, buffer for buffer. */
static void test_random_sets(void)
{
    for (int trial = 0; trial < 300; trial++) {
        int n = 1 + rand_below(trial < 280 ? 120 : 2500);
        int steps = 1 + rand_below(2 * n);
        set s = set_new(n);
        obuf *ob = calloc((size_t)n, sizeof *ob);
        int64_t *want = calloc((size_t)n, sizeof *want);
        for (int i = 0; i < n; i++) {
            int kind = rand_below(10);
            s.size[i] = kind == 0 ? 0 : 64 * (size_t)(kind < 6 ? 1 << rand_below(5) : 1 + rand_below(40));
            s.start[i] = rand_below(steps);
            int len = rand_below(4) == 0 ? rand_below(steps) : rand_below(4);
            s.end[i] = s.start[i] + len < steps ? s.start[i] + len : steps - 1;
            ob[i] = (obuf){s.size[i], s.start[i], s.end[i], 0};
        }
        size_t arena = 0, want_arena = oracle(ob, n, want);
        CHECK_OK(mge_plan_place(n, s.size, s.start, s.end, s.off, &arena, &err), err);
        CHECK_MSG(arena == want_arena, "trial %d (%d buffers): arena %zu, the scan gives %zu", trial, n, arena,
                  want_arena);
        int same = 1;
        for (int i = 0; i < n; i++)
            same &= s.off[i] == want[i];
        CHECK_MSG(same, "trial %d (%d buffers): offsets differ from the scan's", trial, n);
        CHECK_MSG(no_overlap(&s, arena), "trial %d: live buffers overlap", trial);
        CHECK(arena >= lower_bound(&s));
        free(ob);
        free(want);
        set_free(&s);
    }
}

/* The shapes of long graphs, at sizes the scan took minutes over:
 * everything live to the end (calibration keeps every value), nested
 * lifetimes (a training chain's activations) with short-lived gradients
 * between them. Both have an arena equal to the lower bound. */
static void test_long_sets(void)
{
    const int n = 200000;
    set s = set_new(n);
    for (int i = 0; i < n; i++) {
        s.size[i] = 64 * (size_t)(1 + i % 3);
        s.start[i] = i;
        s.end[i] = n;
    }
    size_t arena = 0;
    CHECK_OK(mge_plan_place(n, s.size, s.start, s.end, s.off, &arena, &err), err);
    CHECK(no_overlap(&s, arena));
    CHECK_MSG(arena == lower_bound(&s), "all live to the end: arena %zu, lower bound %zu", arena, lower_bound(&s));
    /* half forward (nested), half backward (two steps each, inside the nest) */
    const int h = n / 2;
    for (int i = 0; i < h; i++) {
        s.size[i] = 256;
        s.start[i] = i;
        s.end[i] = 2 * h - i;
        s.size[h + i] = 256;
        s.start[h + i] = 2 * h - i - 1;
        s.end[h + i] = 2 * h - i;
    }
    CHECK_OK(mge_plan_place(n, s.size, s.start, s.end, s.off, &arena, &err), err);
    CHECK(no_overlap(&s, arena));
    CHECK_MSG(arena == lower_bound(&s), "nested: arena %zu, lower bound %zu", arena, lower_bound(&s));
    set_free(&s);
}

static void test_edges(void)
{
    size_t arena = 1;
    CHECK_OK(mge_plan_place(0, NULL, NULL, NULL, NULL, &arena, &err), err);
    CHECK(arena == 0);
    size_t size[2] = {0, 128};
    int start[2] = {0, 0}, end[2] = {3, 0};
    int64_t off[2] = {-1, -1};
    CHECK_OK(mge_plan_place(2, size, start, end, off, &arena, &err), err);
    CHECK(arena == 128 && off[0] == 0 && off[1] == 0);
    /* the checker sees an overlap when there is one */
    set s = {2, size, start, end, off};
    off[1] = 0;
    size[0] = 128;
    CHECK(!no_overlap(&s, 128));
    off[1] = 128;
    CHECK(no_overlap(&s, 256));
    size[0] = 100; /* not a multiple of the alignment */
    CHECK(mge_plan_place(2, size, start, end, off, &arena, &err) == MGE_ERR_INVALID);
    size[0] = 64;
    end[0] = -1;
    CHECK(mge_plan_place(2, size, start, end, off, &arena, &err) == MGE_ERR_INVALID);
}

int main(void)
{
    RUN(test_random_sets);
    RUN(test_long_sets);
    RUN(test_edges);
    return unit_done();
}
