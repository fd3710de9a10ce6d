/* dist.c — data-parallel training's gradient sum, as part of the training
 * graph. mge_dist_insert adds, per gradient, an allreduce node right after
 * the node that produces it and an allreduce_wait node before the update
 * reads it. The gradients are grouped in buckets (about bucket_bytes each,
 * in the order the backward pass makes them): an allreduce copies its
 * gradient, times this rank's share of the global batch, into its bucket's
 * slot, and the bucket's last one starts the sum over the ranks
 * (comm->iallreduce), so the communication of a bucket overlaps the rest
 * of the backward pass; every later allreduce tests the started buckets,
 * which lets an engine without a progress thread (MPI's usual case) move
 * them on. allreduce_wait waits for its bucket and copies the sum back.
 * The time from a bucket's start to its completion and the time a wait
 * blocked (what the backward pass did not hide) are kept per bucket. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct bucket {
    float *buf;
    int64_t n;               /* elements */
    int members, arrived, waited;
    int started, done;
    void *req;
    double t0;
} bucket;

struct mge_dist {
    mge_comm *comm;
    int nb;
    bucket *b;
    double share;
    mge_kcomm k;
    int64_t steps;
    int64_t *bytes;
    double *comm_s, *wait_s;
    int *members;
};

void mge_dist_free(mge_dist *d)
{
    if (!d)
        return;
    for (int i = 0; i < d->nb; i++)
        free(d->b[i].buf);
    free(d->b);
    free(d->bytes);
    free(d->comm_s);
    free(d->wait_s);
    free(d->members);
    free(d);
}

/* Moves the started buckets on; records the ones that completed. */
static mge_status progress(mge_dist *d, mge_error *err)
{
    for (int i = 0; i < d->nb; i++) {
        bucket *b = &d->b[i];
        if (!b->started || b->done)
            continue;
        int done = 0;
        mge_status s = d->comm->test(d->comm, b->req, &done, err);
        if (s)
            return s;
        if (done) {
            b->done = 1;
            d->comm_s[i] += mge_now() - b->t0;
        }
    }
    return MGE_OK;
}

static mge_status slot(mge_dist *d, int64_t bi, int64_t off, int64_t n, const char *what, mge_error *err)
{
    if (bi < 0 || bi >= d->nb)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: bucket %lld: the trainer has %d", what, (long long)bi, d->nb);
    if (off < 0 || n < 0 || off > d->b[bi].n || n > d->b[bi].n - off)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: elements [%lld, %lld) outside bucket %lld of %lld", what,
                             (long long)off, (long long)(off + n), (long long)bi, (long long)d->b[bi].n);
    return MGE_OK;
}

static mge_status put(void *ud, int64_t bi, int64_t off, const float *x, int64_t n, mge_error *err)
{
    mge_dist *d = ud;
    mge_status s = slot(d, bi, off, n, "allreduce", err);
    if (s)
        return s;
    bucket *b = &d->b[bi];
    if (b->started)
        return mge_error_set(err, MGE_ERR_INVALID, "allreduce: bucket %lld was started twice in one step", (long long)bi);
    float w = (float)d->share, *y = b->buf + off;
    for (int64_t i = 0; i < n; i++)
        y[i] = x[i] * w;
    if (++b->arrived == b->members) {
        b->t0 = mge_now();
        if ((s = d->comm->iallreduce(d->comm, b->buf, b->n, &b->req, err)))
            return s;
        b->started = 1;
        d->bytes[bi] = b->n * 4;
    }
    return progress(d, err);
}

static mge_status bucket_wait(mge_dist *d, int i, mge_error *err)
{
    bucket *b = &d->b[i];
    if (b->done)
        return MGE_OK;
    double t = mge_now();
    mge_status s = d->comm->wait(d->comm, b->req, err);
    double now = mge_now();
    d->wait_s[i] += now - t;
    d->comm_s[i] += now - b->t0;
    b->done = 1;
    return s;
}

static void bucket_reset(bucket *b)
{
    b->arrived = b->waited = 0;
    b->started = b->done = 0;
    b->req = NULL;
}

static mge_status wait(void *ud, int64_t bi, int64_t off, float *y, int64_t n, mge_error *err)
{
    mge_dist *d = ud;
    mge_status s = slot(d, bi, off, n, "allreduce_wait", err);
    if (s)
        return s;
    bucket *b = &d->b[bi];
    if (!b->started)
        return mge_error_set(err, MGE_ERR_INVALID, "allreduce_wait: bucket %lld was not started (%d of %d gradients)",
                             (long long)bi, b->arrived, b->members);
    if ((s = bucket_wait(d, (int)bi, err)))
        return s;
    memcpy(y, b->buf + off, sizeof(float) * (size_t)n);
    if (++b->waited == b->members)
        bucket_reset(b);
    return MGE_OK;
}

mge_status mge_dist_end_step(mge_dist *d, mge_error *err)
{
    mge_status s = MGE_OK;
    for (int i = 0; i < d->nb; i++) {
        bucket *b = &d->b[i];
        /* a failed step: what was started still has to finish here */
        if (b->started && !b->done) {
            mge_status s2 = bucket_wait(d, i, err);
            if (!s)
                s = s2;
        }
        if (b->arrived || b->waited)
            bucket_reset(b);
    }
    d->steps++;
    return s;
}

static mge_status sum(void *ud, double *v, int64_t n, mge_error *err)
{
    mge_dist *d = ud;
    return d->comm->allreduce_f64(d->comm, v, n, err);
}

static double share(void *ud)
{
    return ((mge_dist *)ud)->share;
}

const mge_kcomm *mge_dist_kcomm(mge_dist *d)
{
    return &d->k;
}

void mge_dist_set_share(mge_dist *d, double share)
{
    d->share = share;
}

int mge_dist_stats(const mge_dist *d, mge_comm_stats *st)
{
    memset(st, 0, sizeof *st);
    if (!d)
        return 0;
    st->nbuckets = d->nb;
    st->steps = d->steps;
    st->bytes = d->bytes;
    st->comm_s = d->comm_s;
    st->wait_s = d->wait_s;
    st->members = d->members;
    return 1;
}

/* ---------------------------------------------------------------- graph */

typedef struct gitem {
    int grad, producer, idx;
} gitem;

static int by_producer(const void *a, const void *b)
{
    const gitem *x = a, *y = b;
    if (x->producer != y->producer)
        return x->producer < y->producer ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

mge_status mge_dist_insert(mge_graph *g, mge_comm *comm, double bucket_bytes, int ngrads, int *grads,
                           mge_dist **out, mge_error *err)
{
    *out = NULL;
    mge_status s = MGE_OK;
    int nold = g->nnodes;
    int *prod = malloc(sizeof(int) * (size_t)(g->nvalues ? g->nvalues : 1));
    gitem *it = malloc(sizeof *it * (size_t)(ngrads ? ngrads : 1));
    int *put_node = malloc(sizeof(int) * (size_t)(ngrads ? ngrads : 1));
    mge_dist *d = calloc(1, sizeof *d);
    int *order = NULL;
    if (!prod || !it || !put_node || !d) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto done;
    }
    d->comm = comm;
    d->share = 1.0 / comm->size;
    d->k.ud = d;
    d->k.put = put;
    d->k.wait = wait;
    d->k.sum = sum;
    d->k.share = share;
    for (int v = 0; v < g->nvalues; v++)
        prod[v] = -1;
    for (int i = 0; i < g->nnodes; i++)
        for (int k = 0; k < g->nodes[i].nout; k++)
            prod[g->nodes[i].out[k]] = i;
    for (int i = 0; i < ngrads; i++) {
        const mge_value *gv = &g->values[grads[i]];
        if (gv->dtype != MGE_F32) {
            s = mge_error_set(err, MGE_ERR_UNSUPPORTED, "distributed training sums f32 gradients; %s is %s", gv->name,
                              mge_dtype_name(gv->dtype));
            goto done;
        }
        for (int k = 0; k < gv->ndim; k++)
            if (gv->dims[k] < 0) {
                s = mge_error_set(err, MGE_ERR_SHAPE, "distributed training: gradient %s has a symbolic shape", gv->name);
                goto done;
            }
        it[i] = (gitem){grads[i], prod[grads[i]], i};
    }
    /* buckets in the order the backward pass makes the gradients */
    qsort(it, (size_t)ngrads, sizeof *it, by_producer);
    int *bof = malloc(sizeof(int) * (size_t)(ngrads ? ngrads : 1));
    int64_t *boff = malloc(sizeof(int64_t) * (size_t)(ngrads ? ngrads : 1));
    if (!bof || !boff || !(d->b = calloc((size_t)(ngrads ? ngrads : 1), sizeof *d->b))) {
        free(bof);
        free(boff);
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto done;
    }
    double in_bucket = 0;
    for (int j = 0; j < ngrads; j++) {
        const mge_value *gv = &g->values[it[j].grad];
        int64_t n = 1;
        for (int k = 0; k < gv->ndim; k++)
            n *= gv->dims[k];
        /* the first bucket is small (1 MiB at most, as PyTorch's DDP does):
         * the last layers' gradients start moving early */
        if (d->nb == 0 || in_bucket >= (d->nb == 1 && bucket_bytes > 1048576 ? 1048576 : bucket_bytes)) {
            d->nb++;
            in_bucket = 0;
        }
        bucket *b = &d->b[d->nb - 1];
        bof[j] = d->nb - 1;
        boff[j] = b->n;
        b->n += n;
        b->members++;
        in_bucket += 4.0 * (double)n;
    }
    d->bytes = calloc((size_t)d->nb, sizeof *d->bytes);
    d->comm_s = calloc((size_t)d->nb, sizeof *d->comm_s);
    d->wait_s = calloc((size_t)d->nb, sizeof *d->wait_s);
    d->members = calloc((size_t)d->nb, sizeof *d->members);
    if (!d->bytes || !d->comm_s || !d->wait_s || !d->members)
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    for (int i = 0; i < d->nb && !s; i++) {
        d->members[i] = d->b[i].members;
        d->bytes[i] = d->b[i].n * 4;
        if (!(d->b[i].buf = calloc((size_t)(d->b[i].n ? d->b[i].n : 1), sizeof(float))))
            s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory: %lld bytes for gradient bucket %d",
                              (long long)d->b[i].n * 4, i);
    }
    /* the nodes: all allreduces, then the waits in bucket order */
    char name[512], vname[512];
    for (int j = 0; j < ngrads && !s; j++) {
        mge_attr at[2] = {{.key = MGE_KEY_bucket, .i = {bof[j]}}, {.key = MGE_KEY_offset, .i = {boff[j]}}};
        const char *gname = g->values[it[j].grad].name;
        snprintf(name, sizeof name, "%s.allreduce", gname);
        const char *on = vname;
        snprintf(vname, sizeof vname, "%s.allreduce", gname);
        int x = it[j].grad;
        int nd = mge_graph_add_node(g, name, MGE_OP_ALLREDUCE, 1, &x, 2, at, 1, &on, err);
        if (nd < 0) {
            s = err && err->code ? err->code : MGE_ERR_INVALID;
            break;
        }
        put_node[j] = nd;
    }
    for (int j = 0; j < ngrads && !s; j++) {
        mge_attr at[2] = {{.key = MGE_KEY_bucket, .i = {bof[j]}}, {.key = MGE_KEY_offset, .i = {boff[j]}}};
        const char *gname = g->values[it[j].grad].name;
        snprintf(name, sizeof name, "%s.allreduce_wait", gname);
        const char *on = vname;
        snprintf(vname, sizeof vname, "%s.sum", gname);
        int x = g->nodes[put_node[j]].out[0];
        int nd = mge_graph_add_node(g, name, MGE_OP_ALLREDUCE_WAIT, 1, &x, 2, at, 1, &on, err);
        if (nd < 0) {
            s = err && err->code ? err->code : MGE_ERR_INVALID;
            break;
        }
        grads[it[j].idx] = g->nodes[nd].out[0];
    }
    free(bof);
    free(boff);
    if (s)
        goto done;
    /* each allreduce right after its gradient's producer */
    if (!(order = malloc(sizeof(int) * (size_t)g->nnodes))) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto done;
    }
    int no = 0, j = 0;
    while (j < ngrads && it[j].producer < 0)
        order[no++] = put_node[j++];
    for (int i = 0; i < nold; i++) {
        order[no++] = i;
        while (j < ngrads && it[j].producer == i)
            order[no++] = put_node[j++];
    }
    for (int i = nold + ngrads; i < g->nnodes; i++)
        order[no++] = i;
    s = mge_graph_reorder_nodes(g, order, err);
done:
    free(prod);
    free(it);
    free(put_node);
    free(order);
    if (s)
        mge_dist_free(d);
    else
        *out = d;
    return s;
}
