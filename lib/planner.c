/* planner.c — static memory planning of a scheduled graph at one batch size.
 *
 * Steps are the needed nodes in graph order. Every node-output value gets a
 * liveness interval [def step, last use step]; requested outputs live one
 * step past the end so the next run is the first thing that may reuse them.
 * Views (MGE_OPF_ALIAS) share their input's buffer and stretch its interval;
 * a view of an input, param, state or const stays outside the arena.
 * In-place ops (MGE_OPF_INPLACE) take over input 0's buffer when that buffer
 * dies at this node and has exactly the output's byte size.
 * What remains are buffers with intervals; offsets in one arena come from
 * greedy placement (first-fit and best-fit over several orders, the smallest
 * arena wins; one that reaches the lower bound ends the search), each
 * placement asking an index of the buffers placed so far (see "occupancy"
 * below) so that the cost stays near linear in the number of buffers.
 * Intervals are inclusive, so a node's inputs and outputs never
 * share memory unless the planner chose in-place. Sizes are counted rounded
 * up to the 64-byte alignment everywhere (arena, lower bound, no reuse), so
 * the arena is never below the lower bound it is compared with. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define ALIGN 64

typedef struct pbuf {
    size_t size;     /* aligned bytes */
    int start, end;  /* inclusive steps */
    int root;        /* the value that created the buffer */
    int64_t off;
} pbuf;

static size_t align_up(size_t n)
{
    return (n + (ALIGN - 1)) & ~(size_t)(ALIGN - 1);
}

/* ---------------------------------------------------------------- placement */

/* A sort key: qsort has no context argument, so the keys travel with the index. */
typedef struct skey {
    double k1, k2, k3;
    int idx;
} skey;

static int cmp_key(const void *pa, const void *pb)
{
    const skey *x = pa, *y = pb;
    if (x->k1 != y->k1)
        return x->k1 < y->k1 ? -1 : 1;
    if (x->k2 != y->k2)
        return x->k2 < y->k2 ? -1 : 1;
    if (x->k3 != y->k3)
        return x->k3 < y->k3 ? -1 : 1;
    return x->idx - y->idx;
}

/* Order `key` of the buffers into order[] (keys[] is scratch). */
static void sort_order(const pbuf *b, int nb, int key, skey *keys, int *order)
{
    for (int i = 0; i < nb; i++) {
        double size = (double)b[i].size, len = b[i].end - b[i].start + 1;
        skey *k = &keys[i];
        k->idx = i;
        k->k3 = b[i].start;
        switch (key) {
        case 0: k->k1 = -size, k->k2 = b[i].start; break;       /* largest first */
        case 1: k->k1 = b[i].start, k->k2 = -size; break;       /* first use, then largest */
        case 2: k->k1 = -len, k->k2 = -size; break;             /* longest lifetime, then largest */
        default: k->k1 = -size * len, k->k2 = -size; break;     /* largest area (bytes x steps) */
        }
    }
    qsort(keys, (size_t)nb, sizeof *keys, cmp_key);
    for (int i = 0; i < nb; i++)
        order[i] = keys[i].idx;
}

/* ---------------------------------------------------------------- occupancy
 * Where the placed buffers are, so that "the lowest offset p with
 * [p, p + size) free during steps [s, e]" costs O(log steps) set lookups
 * instead of a scan of every placed buffer (quadratic on long graphs). A
 * segment tree over the steps; tree node v keeps two sets of byte ranges,
 * each the union of its buffers' [off, off + size), merged, so a set is a
 * few disjoint ranges (a treap keyed by start):
 *   cover(v): buffers whose steps span all of v's (v is one of the
 *             canonical nodes of the buffer's step interval);
 *   sub(v):   buffers with a canonical node at v or below it.
 * The buffers live somewhere in [s, e] are those of sub(c) for the
 * canonical nodes c of [s, e] and of cover(a) for their ancestors a. The
 * answers are those of a scan over all placed buffers: the lowest free
 * offset is the first gap of the union that fits, and the gaps come out in
 * offset order for best-fit (which looks at BEST_GAPS of them at most). */

typedef struct rnode {
    int64_t lo, hi; /* [lo, hi) */
    int l, r;       /* children; 0 is the empty tree */
} rnode;

typedef struct occ {
    int nsteps;
    int *cover, *sub; /* treap root per tree node (heap order from 1) */
    rnode *pool;      /* pool[0] unused */
    int npool, cap, freel;
    int nsets;
    int sets[4 * 33]; /* the sets of one query: at most 4 per tree level */
} occ;

/* Heap priority of node i: a hash of the index, so no state to keep. */
static uint32_t prio(int i)
{
    uint32_t x = (uint32_t)i * 2654435761u;
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    return x;
}

/* a: the ranges starting below key; b: the rest. */
static void tsplit(rnode *P, int t, int64_t key, int *a, int *b)
{
    if (!t) {
        *a = *b = 0;
    } else if (P[t].lo < key) {
        *a = t;
        tsplit(P, P[t].r, key, &P[t].r, b);
    } else {
        *b = t;
        tsplit(P, P[t].l, key, a, &P[t].l);
    }
}

/* Every range of a starts below every range of b. */
static int tmerge(rnode *P, int a, int b)
{
    if (!a || !b)
        return a ? a : b;
    if (prio(a) > prio(b)) {
        P[a].r = tmerge(P, P[a].r, b);
        return a;
    }
    P[b].l = tmerge(P, a, P[b].l);
    return b;
}

static int trightmost(const rnode *P, int t)
{
    while (P[t].r)
        t = P[t].r;
    return t;
}

static void trelease(occ *o, int t)
{
    if (!t)
        return;
    trelease(o, o->pool[t].l);
    trelease(o, o->pool[t].r);
    o->pool[t].l = o->freel;
    o->freel = t;
}

/* Adds [lo, hi) to the set at *root, merged with the ranges it meets or touches. */
static int tinsert(occ *o, int *root, int64_t lo, int64_t hi)
{
    int n = o->freel;
    if (n) {
        o->freel = o->pool[n].l;
    } else {
        if (o->npool == o->cap) {
            int cap = o->cap * 2;
            rnode *np = realloc(o->pool, sizeof *np * (size_t)cap);
            if (!np)
                return 0;
            o->pool = np;
            o->cap = cap;
        }
        n = o->npool++;
    }
    rnode *P = o->pool;
    int a, b, c, d;
    tsplit(P, *root, lo, &a, &b);
    if (a) {
        int m = trightmost(P, a);
        if (P[m].hi >= lo) {
            int mm;
            lo = P[m].lo;
            if (P[m].hi > hi)
                hi = P[m].hi;
            tsplit(P, a, P[m].lo, &a, &mm);
            trelease(o, mm);
        }
    }
    tsplit(P, b, hi + 1, &c, &d);
    if (c) {
        int m = trightmost(P, c);
        if (P[m].hi > hi)
            hi = P[m].hi;
        trelease(o, c);
    }
    P[n].lo = lo;
    P[n].hi = hi;
    P[n].l = P[n].r = 0;
    *root = tmerge(P, tmerge(P, a, n), d);
    return 1;
}

/* p when [p, p + size) misses every range of t, else the end of the last
 * range that starts below p + size (the lowest start worth trying next). */
static int64_t tblock(const rnode *P, int t, int64_t p, int64_t size)
{
    int best = 0;
    while (t) {
        if (P[t].lo < p + size) {
            best = t;
            t = P[t].r;
        } else {
            t = P[t].l;
        }
    }
    return best && P[best].hi > p ? P[best].hi : p;
}

/* The first start at or after p, INT64_MAX when none. */
static int64_t tnext(const rnode *P, int t, int64_t p)
{
    int64_t q = INT64_MAX;
    while (t) {
        if (P[t].lo >= p) {
            q = P[t].lo;
            t = P[t].l;
        } else {
            t = P[t].r;
        }
    }
    return q;
}

static int occ_init(occ *o, int nsteps)
{
    memset(o, 0, sizeof *o);
    o->nsteps = nsteps > 0 ? nsteps : 1;
    o->cover = malloc(sizeof(int) * 4 * (size_t)o->nsteps);
    o->sub = malloc(sizeof(int) * 4 * (size_t)o->nsteps);
    o->cap = 1024;
    o->pool = malloc(sizeof *o->pool * (size_t)o->cap);
    return o->cover && o->sub && o->pool;
}

static void occ_free(occ *o)
{
    free(o->cover);
    free(o->sub);
    free(o->pool);
}

static void occ_reset(occ *o)
{
    memset(o->cover, 0, sizeof(int) * 4 * (size_t)o->nsteps);
    memset(o->sub, 0, sizeof(int) * 4 * (size_t)o->nsteps);
    o->npool = 1;
    o->freel = 0;
}

/* Records [lo, hi) as taken during steps [s, e]; v spans [L, R]. */
static int occ_add(occ *o, int v, int L, int R, int s, int e, int64_t lo, int64_t hi)
{
    if (e < L || R < s)
        return 1;
    if (!tinsert(o, &o->sub[v], lo, hi))
        return 0;
    if (s <= L && R <= e)
        return tinsert(o, &o->cover[v], lo, hi);
    int M = L + (R - L) / 2;
    return occ_add(o, 2 * v, L, M, s, e, lo, hi) && occ_add(o, 2 * v + 1, M + 1, R, s, e, lo, hi);
}

/* The sets holding every buffer live somewhere in [s, e], into o->sets. */
static void occ_sets(occ *o, int v, int L, int R, int s, int e)
{
    if (e < L || R < s || !o->sub[v])
        return;
    if (s <= L && R <= e) {
        o->sets[o->nsets++] = o->sub[v];
        return;
    }
    if (o->cover[v])
        o->sets[o->nsets++] = o->cover[v];
    int M = L + (R - L) / 2;
    occ_sets(o, 2 * v, L, M, s, e);
    occ_sets(o, 2 * v + 1, M + 1, R, s, e);
}

/* The lowest q >= p with [q, q + size) free in every set of the query:
 * each bump moves past a range that is in the way, and the loop ends when
 * a whole round of the sets moves nothing. */
static int64_t occ_lowest(const occ *o, int64_t p, int64_t size)
{
    int n = o->nsets, quiet = 0, i = 0;
    while (quiet < n) {
        int64_t q = tblock(o->pool, o->sets[i], p, size);
        if (q > p) {
            p = q;
            quiet = 0;
            continue; /* the same set may have the next range in the way */
        }
        quiet++;
        i = i + 1 == n ? 0 : i + 1;
    }
    return p;
}

/* Best-fit looks at this many gaps that fit before it settles for the
 * smallest seen (an exact fit ends the search at once). */
#define BEST_GAPS 64

/* The smallest gap of the query's union that fits (the lowest of equal
 * ones), else the top of the union. */
static int64_t occ_best(const occ *o, int64_t size)
{
    int64_t p = occ_lowest(o, 0, size), best = -1, best_gap = INT64_MAX;
    for (int k = 0; k < BEST_GAPS; k++) {
        int64_t q = INT64_MAX;
        for (int i = 0; i < o->nsets; i++) {
            int64_t t = tnext(o->pool, o->sets[i], p);
            if (t < q)
                q = t;
        }
        if (q == INT64_MAX)
            break; /* p is the top */
        if (q - p < best_gap) {
            best_gap = q - p;
            best = p;
            if (best_gap == size)
                break;
        }
        p = occ_lowest(o, q, size);
    }
    return best >= 0 ? best : p;
}

/* Places b[] in order[] (offsets into b[].off), the arena size in *arena.
 * best: the smallest gap that fits; else the lowest one. 0 when out of memory. */
static int place(occ *o, pbuf *b, int nb, const int *order, int best, size_t *arena)
{
    size_t top = 0;
    occ_reset(o);
    for (int oi = 0; oi < nb; oi++) {
        pbuf *x = &b[order[oi]];
        if (!x->size) {
            x->off = 0;
            continue;
        }
        o->nsets = 0;
        occ_sets(o, 1, 0, o->nsteps - 1, x->start, x->end);
        int64_t pick = best ? occ_best(o, (int64_t)x->size) : occ_lowest(o, 0, (int64_t)x->size);
        x->off = pick;
        if ((size_t)pick + x->size > top)
            top = (size_t)pick + x->size;
        if (!occ_add(o, 1, 0, o->nsteps - 1, x->start, x->end, pick, pick + (int64_t)x->size))
            return 0;
    }
    *arena = top;
    return 1;
}

/* Tries every order with first-fit and best-fit; leaves the best offsets in
 * b[]. The first placement to reach the lower bound wins at once: none
 * after it could be smaller. */
static int place_all(pbuf *b, int nb, size_t lower, size_t *arena)
{
    size_t na = (size_t)(nb ? nb : 1);
    int nsteps = 1;
    for (int i = 0; i < nb; i++)
        if (b[i].end + 1 > nsteps)
            nsteps = b[i].end + 1;
    occ o;
    int *order = malloc(sizeof(int) * na);
    skey *keys = malloc(sizeof(skey) * na);
    int64_t *best_off = malloc(sizeof(int64_t) * na);
    int ok = occ_init(&o, nsteps) && order && keys && best_off;
    size_t best = SIZE_MAX;
    for (int key = 0; ok && key < 4 && best > lower; key++) {
        sort_order(b, nb, key, keys, order);
        for (int fit = 0; ok && fit < 2 && best > lower; fit++) {
            size_t a;
            if (!(ok = place(&o, b, nb, order, fit, &a)))
                break;
            if (a < best) {
                best = a;
                for (int i = 0; i < nb; i++)
                    best_off[i] = b[i].off;
            }
        }
    }
    if (ok) {
        for (int i = 0; i < nb; i++)
            b[i].off = best_off[i];
        *arena = nb ? best : 0;
    }
    occ_free(&o);
    free(order);
    free(keys);
    free(best_off);
    return ok;
}

mge_status mge_plan_place(int nb, const size_t *size, const int *start, const int *end, int64_t *off,
                          size_t *arena, mge_error *err)
{
    int nsteps = 0;
    for (int i = 0; i < nb; i++) {
        if (start[i] < 0 || end[i] < start[i] || size[i] % ALIGN)
            return mge_error_set(err, MGE_ERR_INVALID, "buffer %d: steps [%d, %d], %zu bytes", i, start[i], end[i],
                                 size[i]);
        if (end[i] + 1 > nsteps)
            nsteps = end[i] + 1;
    }
    pbuf *b = malloc(sizeof *b * (size_t)(nb ? nb : 1));
    int64_t *live = calloc((size_t)nsteps + 1, sizeof *live);
    if (!b || !live) {
        free(b);
        free(live);
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < nb; i++) {
        b[i] = (pbuf){.size = size[i], .start = start[i], .end = end[i], .root = i};
        live[start[i]] += (int64_t)size[i];
        live[end[i] + 1] -= (int64_t)size[i];
    }
    int64_t run = 0, peak = 0;
    for (int t = 0; t < nsteps; t++)
        if ((run += live[t]) > peak)
            peak = run;
    int ok = place_all(b, nb, (size_t)peak, arena);
    for (int i = 0; ok && i < nb; i++)
        off[i] = b[i].off;
    free(b);
    free(live);
    return ok ? MGE_OK : mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
}

/* ---------------------------------------------------------------- planning */

void mge_plan_free(mge_plan *p)
{
    if (!p)
        return;
    free(p->ndims);
    free(p->dims);
    free(p->nbytes);
    free(p->offset);
    free(p->alias);
    free(p->ws);
    memset(p, 0, sizeof *p);
}

/* Scratch bytes of node n's kernel at the planned shapes (0 without one). */
static size_t node_ws(const mge_graph *g, const mge_node *n, const mge_plan *p, const mge_backend *be,
                      int threads)
{
    if (!be || n->nin < 1 || n->nin > 64 || n->nout > 4)
        return 0;
    const mge_kernel *k = mge_backend_kernel(be, n->op, g->values[n->in[0]].dtype);
    if (!k || !k->ws)
        return 0;
    mge_tensor tin[64], tout[4];
    mge_tensor *pin[64], *pout[4];
    for (int i = 0; i < n->nin + n->nout; i++) {
        int v = i < n->nin ? n->in[i] : n->out[i - n->nin];
        mge_tensor *t = i < n->nin ? &tin[i] : &tout[i - n->nin];
        memset(t, 0, sizeof *t);
        t->q.axis = -1;
        t->dtype = g->values[v].dtype;
        t->ndim = p->ndims[v];
        memcpy(t->dims, &p->dims[(size_t)v * MGE_MAX_DIMS], sizeof(int64_t) * MGE_MAX_DIMS);
        t->nbytes = p->nbytes[v];
        if (i < n->nin)
            pin[i] = t;
        else
            pout[i - n->nin] = t;
    }
    return k->ws(n, pin, pout, threads < 1 ? 1 : threads);
}

mge_status mge_plan_build(const mge_graph *g, const char *need, const mge_binding *bind, int nout, const int *outs,
                          const mge_backend *be, int threads, const signed char *vdev, mge_plan *p, mge_error *err)
{
    const int nv = g->nvalues, nn = g->nnodes;
    const size_t nva = (size_t)(nv ? nv : 1), nna = (size_t)(nn ? nn : 1);
    mge_status s = MGE_OK;
    memset(p, 0, sizeof *p);
    p->bind = *bind;
    p->nvalues = nv;
    p->ndims = calloc(nva, sizeof *p->ndims);
    p->dims = calloc(nva * MGE_MAX_DIMS, sizeof *p->dims);
    p->nbytes = calloc(nva, sizeof *p->nbytes);
    p->offset = malloc(nva * sizeof *p->offset);
    p->alias = malloc(nva * sizeof *p->alias);
    p->ws = calloc(nna, sizeof *p->ws);
    int *last = malloc(nva * sizeof *last);   /* last use step per value */
    int *bufof = malloc(nva * sizeof *bufof); /* buffer index per value, -1 outside the arena */
    int *root = malloc(nva * sizeof *root);
    pbuf *b = malloc(nva * sizeof *b);
    int64_t *live = NULL;
    pbuf *db = NULL;
    if (!p->ndims || !p->dims || !p->nbytes || !p->offset || !p->alias || !p->ws || !last || !bufof || !root || !b) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto out;
    }
    if ((s = mge_graph_shapes(g, bind, p->ndims, p->dims, err)))
        goto out;
    for (int v = 0; v < nv; v++) {
        if ((s = mge_shape_numel(p->ndims[v], &p->dims[(size_t)v * MGE_MAX_DIMS], g->values[v].dtype, NULL,
                                 &p->nbytes[v], err))) {
            mge_error_prefix(err, "%s", g->values[v].name);
            goto out;
        }
        p->offset[v] = -1;
        p->alias[v] = -1;
        last[v] = -1;
        bufof[v] = -1;
        root[v] = v;
    }

    /* Liveness: last use step of every value; requested outputs outlive the run. */
    int nsteps = 0;
    for (int i = 0; i < nn; i++) {
        if (!need[i])
            continue;
        const mge_node *n = &g->nodes[i];
        for (int k = 0; k < n->nin; k++)
            last[n->in[k]] = nsteps;
        nsteps++;
    }
    const int end_step = nsteps; /* virtual step after the last node */
    for (int i = 0; i < nout; i++)
        if (outs[i] >= 0 && outs[i] < nv)
            last[outs[i]] = end_step;

    /* Buffers, in-place reuse and views, in schedule order. */
    int nb = 0, step = 0;
    for (int i = 0; i < nn; i++) {
        if (!need[i])
            continue;
        const mge_node *n = &g->nodes[i];
        unsigned flags = mge_op_info(n->op)->flags;
        for (int o = 0; o < n->nout; o++) {
            int v = n->out[o];
            int lu = last[v] > step ? last[v] : step;
            int in0 = n->nin > 0 ? n->in[0] : -1;
            if (o == 0 && in0 >= 0 && (flags & MGE_OPF_ALIAS)) {
                root[v] = root[in0];
                p->alias[v] = root[v];
                int bi = bufof[in0];
                bufof[v] = bi;
                if (bi >= 0 && b[bi].end < lu)
                    b[bi].end = lu;
                continue;
            }
            if (o == 0 && in0 >= 0 && (flags & MGE_OPF_INPLACE) && bufof[in0] >= 0 &&
                b[bufof[in0]].end == step && p->nbytes[root[in0]] == p->nbytes[v]) {
                int bi = bufof[in0];
                root[v] = root[in0];
                p->alias[v] = root[v];
                bufof[v] = bi;
                b[bi].end = lu;
                p->st.ninplace++;
                continue;
            }
            b[nb].size = align_up(p->nbytes[v]);
            b[nb].start = step;
            b[nb].end = lu;
            b[nb].root = v;
            b[nb].off = 0;
            bufof[v] = nb++;
        }
        p->ws[i] = (flags & MGE_OPF_ALIAS) ? 0 : node_ws(g, n, p, be, threads);
        if (p->ws[i] > p->st.workspace_bytes)
            p->st.workspace_bytes = p->ws[i];
        int nd = vdev && n->nout > 0 ? vdev[n->out[0]] : 0;
        if (p->ws[i] > p->dev_ws[nd])
            p->dev_ws[nd] = p->ws[i];
        step++;
    }

    /* Per device (one arena each; all on the host without vdev): the lower
     * bound (the most bytes live at one step), then the offsets. */
    live = calloc((size_t)end_step + 2, sizeof *live);
    db = malloc(sizeof *db * (size_t)(nb ? nb : 1));
    if (!live || !db) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto out;
    }
    size_t total = 0;
    for (int d = 0; d < 2; d++) {
        memset(live, 0, sizeof *live * ((size_t)end_step + 2));
        int nd = 0;
        for (int k = 0; k < nb; k++) {
            if ((vdev ? vdev[b[k].root] : 0) != d)
                continue;
            if (b[k].size > (size_t)INT64_MAX - total) {
                char bs[256];
                s = mge_error_set(err, MGE_ERR_SHAPE, "%s: buffers beyond the address space",
                                  mge_binding_str(bind, bs, sizeof bs));
                goto out;
            }
            live[b[k].start] += (int64_t)b[k].size;
            live[b[k].end + 1] -= (int64_t)b[k].size;
            total += b[k].size;
            db[nd++] = b[k];
        }
        int64_t run = 0, peak = 0;
        for (int t = 0; t <= end_step; t++) {
            run += live[t];
            if (run > peak)
                peak = run;
        }
        size_t arena;
        if (!place_all(db, nd, (size_t)peak, &arena)) {
            s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
            goto out;
        }
        for (int k = 0, j = 0; k < nb; k++)
            if ((vdev ? vdev[b[k].root] : 0) == d)
                b[k].off = db[j++].off;
        p->dev_arena[d] = arena;
        p->dev_lower[d] = (size_t)peak;
    }
    for (int v = 0; v < nv; v++)
        if (bufof[v] >= 0)
            p->offset[v] = b[bufof[v]].off;
    p->st.arena_bytes = p->dev_arena[0] + p->dev_arena[1];
    p->st.lower_bound = p->dev_lower[0] + p->dev_lower[1];
    p->st.no_reuse_bytes = total;
    p->st.nbuffers = nb;
out:
    free(last);
    free(bufof);
    free(root);
    free(b);
    free(db);
    free(live);
    if (s)
        mge_plan_free(p);
    return s;
}

mge_status mge_plan_graph(const mge_graph *g, const mge_binding *b, int nout, const int *outs, mge_plan_stats *st,
                          mge_error *err)
{
    if (nout <= 0) {
        nout = g->noutputs;
        outs = g->outputs;
    }
    for (int i = 0; i < nout; i++)
        if (outs[i] < 0 || outs[i] >= g->nvalues)
            return mge_error_set(err, MGE_ERR_INVALID, "output %d refers to no value", i);
    char *need = calloc((size_t)(g->nnodes ? g->nnodes : 1), 1);
    if (!need)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    mge_graph_needed(g, nout, outs, need, NULL);
    mge_plan p;
    mge_status s = mge_plan_build(g, need, b, nout, outs, mge_backend_cpu(), 1, NULL, &p, err);
    free(need);
    if (s)
        return s;
    *st = p.st;
    mge_plan_free(&p);
    return MGE_OK;
}

/* Bytes live at each step, recomputed from a finished plan: a buffer is a
 * root value (alias -1) in the arena; it lives from its producer's step to
 * the last use of any value sharing it (requested outputs: one step past
 * the end), as in mge_plan_build, so the largest step is the lower bound. */
mge_status mge_plan_live(const mge_graph *g, const char *need, int nout, const int *outs, const mge_plan *p,
                         size_t *live, mge_error *err)
{
    const int nv = g->nvalues, nn = g->nnodes;
    int *start = malloc(sizeof(int) * (size_t)(nv ? nv : 1));
    int *end = malloc(sizeof(int) * (size_t)(nv ? nv : 1));
    int *stepof = malloc(sizeof(int) * (size_t)(nn ? nn : 1));
    int64_t *diff = calloc((size_t)nn + 2, sizeof *diff);
    if (!start || !end || !stepof || !diff) {
        free(start);
        free(end);
        free(stepof);
        free(diff);
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    }
    for (int v = 0; v < nv; v++)
        start[v] = end[v] = -1;
    int step = 0;
    for (int i = 0; i < nn; i++) {
        stepof[i] = -1;
        if (!need[i])
            continue;
        const mge_node *n = &g->nodes[i];
        for (int k = 0; k < n->nin + n->nout; k++) {
            int v = k < n->nin ? n->in[k] : n->out[k - n->nin];
            if (p->offset[v] < 0)
                continue;
            int r = p->alias[v] >= 0 ? p->alias[v] : v;
            if (k >= n->nin && start[r] < 0)
                start[r] = step;
            if (end[r] < step)
                end[r] = step;
        }
        stepof[i] = step++;
    }
    for (int i = 0; i < nout; i++) {
        int v = outs[i];
        if (v >= 0 && v < nv && p->offset[v] >= 0)
            end[p->alias[v] >= 0 ? p->alias[v] : v] = step;
    }
    for (int v = 0; v < nv; v++)
        if (start[v] >= 0) {
            diff[start[v]] += (int64_t)align_up(p->nbytes[v]);
            diff[end[v] + 1] -= (int64_t)align_up(p->nbytes[v]);
        }
    for (int t = 1; t <= step; t++)
        diff[t] += diff[t - 1];
    for (int i = 0; i < nn; i++)
        live[i] = stepof[i] >= 0 ? (size_t)diff[stepof[i]] : 0;
    free(start);
    free(end);
    free(stepof);
    free(diff);
    return MGE_OK;
}
