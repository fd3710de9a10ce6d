/* loader.c — batches over a bound dataset: a per-epoch permutation that
 * depends only on (seed, epoch), row gathers with memcpy, and an optional
 * background thread that gathers batch b+1 while the caller uses batch b.
 *
 * Two slots of batch buffers alternate. The worker only ever writes the slot
 * the caller is not holding, and it reads the permutation, which changes only
 * in start() after the worker is idle; so the bytes of a batch are the same
 * with and without prefetch. */
#include "internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct mge_loader {
    const mge_dataset *ds;
    int64_t batch, nbatches;
    int shuffle, drop_last, prefetch;
    uint64_t seed;
    int64_t *perm;             /* sample order of the current epoch */
    size_t *row;               /* bytes per sample, per array */
    mge_tensor *slot[2];       /* per slot, per array: full-batch buffers */
    const mge_tensor **view[2];/* per slot: what next() hands out */
    int64_t next;              /* next batch index of the epoch */
    int started;
    int cur;                   /* slot of the batch the caller holds */
    /* worker: gathers job_batch into job_slot while busy */
    pthread_t th;
    int have_thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int busy, quit;
    int64_t job_batch;
    int job_slot;
    int64_t ready_batch;       /* batch sitting complete in ready_slot, or -1 */
    int ready_slot;
    int part, parts;           /* gather only part's rows of each batch (1 part: all) */
    int64_t last_rows;         /* rows of the whole batch next() handed out last */
};

static int64_t rows_of(const mge_loader *l, int64_t b)
{
    int64_t lo = b * l->batch, hi = lo + l->batch;
    return (hi > l->ds->count ? l->ds->count : hi) - lo;
}

static void gather(mge_loader *l, int64_t b, int slot)
{
    int64_t lo = b * l->batch, rows = rows_of(l, b), longest = 0;
    const mge_dataset *ds = l->ds;
    /* a part: rows [M*part/parts, M*(part+1)/parts) of the batch's M, the
     * only ones read; the padded length stays the whole batch's */
    int64_t plo = rows * l->part / l->parts, phi = rows * (l->part + 1) / l->parts;
    if (ds->lengths) /* variable-length sequences: the batch is as long as its longest */
        for (int64_t i = 0; i < rows; i++) {
            int64_t x = ((const int64_t *)ds->t[ds->n - 1].data)[l->perm[lo + i]];
            longest = x > longest ? x : longest;
        }
    for (int a = 0; a < ds->n; a++) {
        mge_tensor *t = &l->slot[slot][a];
        const char *src = ds->t[a].data;
        char *dst = t->data;
        size_t row = l->row[a], cut = row;
        if (ds->lengths && a < ds->n - 1 && a < 32 && (ds->trim >> a & 1u) && ds->t[a].dims[1] > 0) {
            /* dim 1 is outermost in a sample: its first entries are one prefix */
            cut = row / (size_t)ds->t[a].dims[1] * (size_t)longest;
            t->dims[1] = longest;
        }
        for (int64_t i = plo; i < phi; i++)
            memcpy(dst + (size_t)(i - plo) * cut, src + (size_t)l->perm[lo + i] * row, cut);
        t->dims[0] = phi - plo;
        t->nbytes = (size_t)(phi - plo) * cut;
    }
}

static void *worker(void *arg)
{
    mge_loader *l = arg;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (!l->busy && !l->quit)
            pthread_cond_wait(&l->cv, &l->mu);
        if (l->quit)
            break;
        int64_t b = l->job_batch;
        int slot = l->job_slot;
        pthread_mutex_unlock(&l->mu);
        gather(l, b, slot);
        pthread_mutex_lock(&l->mu);
        l->ready_batch = b;
        l->ready_slot = slot;
        l->busy = 0;
        pthread_cond_broadcast(&l->cv);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

/* Waits until the worker has nothing in flight (caller holds mu). */
static void wait_idle(mge_loader *l)
{
    while (l->busy)
        pthread_cond_wait(&l->cv, &l->mu);
}

static void post(mge_loader *l, int64_t b, int slot)
{
    l->job_batch = b;
    l->job_slot = slot;
    l->busy = 1;
    pthread_cond_broadcast(&l->cv);
}

mge_status mge_loader_create(const mge_dataset *ds, int64_t batch, int shuffle, int drop_last, uint64_t seed,
                             int prefetch, mge_loader **out, mge_error *err)
{
    *out = NULL;
    const char *what = ds && ds->source ? ds->source : "dataset";
    if (!ds || ds->n <= 0 || ds->stream || ds->count < 0)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: bind the dataset before loading batches", what);
    if (ds->count == 0)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: empty dataset (0 samples)", what);
    if (batch <= 0)
        return mge_error_set(err, MGE_ERR_INVALID, "batch size %lld: must be at least 1", (long long)batch);
    if (drop_last && batch > ds->count)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: batch size %lld is larger than the dataset (%lld samples) "
                             "and the last partial batch is dropped: no batches", what, (long long)batch,
                             (long long)ds->count);
    mge_loader *l = calloc(1, sizeof *l);
    if (!l)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    l->ds = ds;
    l->batch = batch; /* rows_of clamps the last batch; buffers hold at most count rows */
    l->nbatches = drop_last ? ds->count / batch : (ds->count + batch - 1) / batch;
    l->shuffle = shuffle;
    l->drop_last = drop_last;
    l->prefetch = prefetch;
    l->seed = seed;
    l->ready_batch = -1;
    l->parts = 1;
    mge_status s = MGE_OK;
    l->perm = malloc(sizeof *l->perm * (size_t)ds->count);
    l->row = calloc((size_t)ds->n, sizeof *l->row);
    if (!l->perm || !l->row) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto fail;
    }
    int64_t cap = batch > ds->count ? ds->count : batch;
    for (int k = 0; k < (prefetch ? 2 : 1); k++) {
        l->slot[k] = calloc((size_t)ds->n, sizeof *l->slot[k]);
        l->view[k] = calloc((size_t)ds->n, sizeof *l->view[k]);
        if (!l->slot[k] || !l->view[k]) {
            s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
            goto fail;
        }
        for (int a = 0; a < ds->n; a++) {
            const mge_tensor *t = &ds->t[a];
            int64_t dims[MGE_MAX_DIMS];
            memcpy(dims, t->dims, sizeof dims);
            dims[0] = cap;
            if ((s = mge_tensor_alloc(&l->slot[k][a], t->dtype, t->ndim, dims, err)))
                goto fail;
            l->view[k][a] = &l->slot[k][a];
            l->row[a] = t->nbytes / (size_t)ds->count;
        }
    }
    if (prefetch) {
        if (pthread_mutex_init(&l->mu, NULL) || pthread_cond_init(&l->cv, NULL)) {
            s = mge_error_set(err, MGE_ERR_NOMEM, "cannot create the prefetch thread's lock");
            goto fail;
        }
        if (pthread_create(&l->th, NULL, worker, l)) {
            pthread_cond_destroy(&l->cv);
            pthread_mutex_destroy(&l->mu);
            s = mge_error_set(err, MGE_ERR_NOMEM, "cannot create the prefetch thread");
            goto fail;
        }
        l->have_thread = 1;
    }
    *out = l;
    return MGE_OK;
fail:
    mge_loader_free(l);
    return s;
}

int64_t mge_loader_batches(const mge_loader *l)
{
    return l ? l->nbatches : 0;
}

mge_status mge_loader_start(mge_loader *l, int64_t epoch, int64_t first_batch, mge_error *err)
{
    if (epoch < 0)
        return mge_error_set(err, MGE_ERR_INVALID, "epoch %lld: must be >= 0", (long long)epoch);
    if (first_batch < 0 || first_batch > l->nbatches)
        return mge_error_set(err, MGE_ERR_INVALID, "batch %lld: an epoch has %lld batches", (long long)first_batch,
                             (long long)l->nbatches);
    if (l->have_thread) {
        pthread_mutex_lock(&l->mu);
        wait_idle(l);
        l->ready_batch = -1;
    }
    int64_t n = l->ds->count;
    for (int64_t i = 0; i < n; i++)
        l->perm[i] = i;
    if (l->shuffle) {
        /* the generator depends only on (seed, epoch): resuming reproduces it */
        mge_rng r;
        mge_rng_seed(&r, l->seed ^ ((uint64_t)epoch + 1) * 0x9e3779b97f4a7c15ull);
        for (int64_t i = n - 1; i > 0; i--) {
            int64_t j = (int64_t)(((unsigned __int128)mge_rng_next(&r) * (uint64_t)(i + 1)) >> 64);
            int64_t x = l->perm[i];
            l->perm[i] = l->perm[j];
            l->perm[j] = x;
        }
    }
    l->next = first_batch;
    l->started = 1;
    if (l->have_thread) {
        if (first_batch < l->nbatches)
            post(l, first_batch, l->cur ^ 1);
        pthread_mutex_unlock(&l->mu);
    }
    return MGE_OK;
}

mge_status mge_loader_next(mge_loader *l, const mge_tensor *const **batch, mge_error *err)
{
    if (!l->started) {
        mge_status s = mge_loader_start(l, 0, 0, err);
        if (s)
            return s;
    }
    if (l->next >= l->nbatches)
        return mge_error_set(err, MGE_ERR_EOF, "end of epoch");
    int64_t b = l->next++;
    l->last_rows = rows_of(l, b);
    if (!l->have_thread) {
        gather(l, b, 0);
        *batch = l->view[0];
        return MGE_OK;
    }
    pthread_mutex_lock(&l->mu);
    wait_idle(l);
    if (l->ready_batch != b) /* cannot happen: start and next always post b */
        gather(l, b, l->cur ^ 1), l->ready_slot = l->cur ^ 1;
    l->cur = l->ready_slot;
    l->ready_batch = -1;
    if (b + 1 < l->nbatches)
        post(l, b + 1, l->cur ^ 1);
    pthread_mutex_unlock(&l->mu);
    *batch = l->view[l->cur];
    return MGE_OK;
}

mge_status mge_loader_set_part(mge_loader *l, int part, int parts, mge_error *err)
{
    if (parts < 1 || part < 0 || part >= parts)
        return mge_error_set(err, MGE_ERR_INVALID, "loader part %d of %d", part, parts);
    if (l->started)
        return mge_error_set(err, MGE_ERR_INVALID, "loader part: set before the first start or next");
    l->part = part;
    l->parts = parts;
    return MGE_OK;
}

int64_t mge_loader_batch_rows(const mge_loader *l)
{
    return l->last_rows;
}

void mge_loader_free(mge_loader *l)
{
    if (!l)
        return;
    if (l->have_thread) {
        pthread_mutex_lock(&l->mu);
        l->quit = 1;
        pthread_cond_broadcast(&l->cv);
        pthread_mutex_unlock(&l->mu);
        pthread_join(l->th, NULL);
        pthread_cond_destroy(&l->cv);
        pthread_mutex_destroy(&l->mu);
    }
    for (int k = 0; k < 2; k++) {
        for (int a = 0; l->slot[k] && a < l->ds->n; a++)
            mge_tensor_free(&l->slot[k][a]);
        free(l->slot[k]);
        free(l->view[k]);
    }
    free(l->perm);
    free(l->row);
    free(l);
}
