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
 * arena wins). Intervals are inclusive, so a node's inputs and outputs never
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

/* Places b[] in order[] (offsets into b[].off) and returns the arena size.
 * best: the smallest gap that fits; else the lowest one. placed[] holds the
 * placed buffers sorted by offset, so one scan finds the gaps. */
static size_t place(pbuf *b, int nb, const int *order, int best, int *placed)
{
    size_t arena = 0;
    int np = 0;
    for (int oi = 0; oi < nb; oi++) {
        pbuf *x = &b[order[oi]];
        size_t cur = 0, pick = SIZE_MAX, pick_gap = SIZE_MAX;
        for (int k = 0; k < np && x->size; k++) {
            const pbuf *y = &b[placed[k]];
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

/* Tries every order with first-fit and best-fit; leaves the best offsets in b[]. */
static int place_all(pbuf *b, int nb, size_t *arena)
{
    size_t na = (size_t)(nb ? nb : 1);
    int *order = malloc(sizeof(int) * na);
    int *placed = malloc(sizeof(int) * na);
    skey *keys = malloc(sizeof(skey) * na);
    int64_t *best_off = malloc(sizeof(int64_t) * na);
    int ok = order && placed && keys && best_off;
    size_t best = SIZE_MAX;
    for (int key = 0; ok && key < 4; key++) {
        sort_order(b, nb, key, keys, order);
        for (int fit = 0; fit < 2; fit++) {
            size_t a = place(b, nb, order, fit, placed);
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
    free(order);
    free(placed);
    free(keys);
    free(best_off);
    return ok;
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

mge_status mge_plan_build(const mge_graph *g, const char *need, int64_t batch, int nout, const int *outs,
                          const mge_backend *be, int threads, const signed char *vdev, mge_plan *p, mge_error *err)
{
    const int nv = g->nvalues, nn = g->nnodes;
    const size_t nva = (size_t)(nv ? nv : 1), nna = (size_t)(nn ? nn : 1);
    mge_status s = MGE_OK;
    memset(p, 0, sizeof *p);
    p->batch = batch;
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
    if ((s = mge_graph_shapes(g, batch, p->ndims, p->dims, err)))
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
                s = mge_error_set(err, MGE_ERR_SHAPE, "batch %lld: buffers beyond the address space",
                                  (long long)batch);
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
        if (!place_all(db, nd, &arena)) {
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

mge_status mge_plan_graph(const mge_graph *g, int64_t batch, int nout, const int *outs, mge_plan_stats *st,
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
    mge_status s = mge_plan_build(g, need, batch, nout, outs, mge_backend_cpu(), 1, NULL, &p, err);
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
