/* train_dist.c — mge-train's data-parallel side that does not touch MPI:
 * the shard of each global batch a rank trains on, and the checks that
 * the ranks agree (at start: model, params, data, options; with
 * --check-sync: the params after every step). */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "train_dist.h"

mge_status train_dist_shard(train_dist *d, const mge_tensor *const *batch, int nin, const mge_tensor *const **out,
                            int64_t *rows, double *share, mge_error *err)
{
    int64_t m = nin > 0 && batch[0]->ndim > 0 ? batch[0]->dims[0] : 0;
    *rows = m;
    *share = 1;
    if (!d->comm) {
        *out = batch;
        return MGE_OK;
    }
    if (d->whole > 0) {
        *rows = d->whole;
        *share = (double)m / (double)d->whole;
        *out = batch;
        return MGE_OK;
    }
    if (!d->view || d->nin != nin) {
        free(d->view);
        free(d->vp);
        d->view = calloc((size_t)(nin ? nin : 1), sizeof *d->view);
        d->vp = calloc((size_t)(nin ? nin : 1), sizeof *d->vp);
        d->nin = nin;
        if (!d->view || !d->vp)
            return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    }
    int64_t lo = m * d->rank / d->size, hi = m * (d->rank + 1) / d->size;
    for (int i = 0; i < nin; i++) {
        const mge_tensor *b = batch[i];
        mge_tensor *v = &d->view[i];
        *v = *b;
        if (b->ndim == 0 || b->dims[0] != m)
            return mge_error_set(err, MGE_ERR_SHAPE, "batch input %d has %lld rows, input 0 %lld: cannot shard it",
                                 i, (long long)(b->ndim ? b->dims[0] : 0), (long long)m);
        size_t row = m ? b->nbytes / (size_t)m : 0;
        v->dims[0] = hi - lo;
        v->data = (char *)b->data + row * (size_t)lo;
        v->nbytes = row * (size_t)(hi - lo);
        d->vp[i] = v;
    }
    *share = m ? (double)(hi - lo) / (double)m : 0;
    *out = d->vp;
    return MGE_OK;
}

int train_dist_agree(train_dist *d, int k, const char *const *names, const char *const *values, const uint64_t *h)
{
    if (!d->comm)
        return 0;
    uint64_t *all = malloc(sizeof *all * (size_t)k * (size_t)d->size);
    if (!all) {
        cli_error(NULL, "out of memory");
        return -1;
    }
    mge_error err;
    mge_error_clear(&err);
    if (d->comm->allgather_u64(d->comm, h, k, all, &err)) {
        cli_mge_error(NULL, &err);
        free(all);
        return -1;
    }
    for (int i = 0; i < k; i++)
        for (int r = 1; r < d->size; r++)
            if (all[(size_t)r * (size_t)k + i] != all[i]) {
                /* rank 0 speaks for the job (one line, not one per rank) */
                if (d->rank == 0)
                    cli_error(NULL, "rank %d differs from rank 0 in %s%s%s%s: every rank needs the same model, data "
                              "and options", r, names[i], values && values[i] ? " (" : "",
                              values && values[i] ? values[i] : "", values && values[i] ? " on rank 0)" : "");
                free(all);
                return -1;
            }
    free(all);
    return 0;
}

uint64_t train_hash_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    /* 8 bytes at a time (FNV-1a over words): datasets are tens of MB */
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, c + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
    }
    for (; i < n; i++)
        h = (h ^ c[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t hash_str(uint64_t h, const char *s)
{
    return train_hash_bytes(h, s ? s : "", s ? strlen(s) + 1 : 1);
}

uint64_t train_hash_graph(const mge_graph *g)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int v = 0; v < g->nvalues; v++) {
        const mge_value *val = &g->values[v];
        h = hash_str(h, val->name);
        int64_t w[3 + MGE_MAX_DIMS] = {val->kind, val->dtype, val->ndim};
        for (int k = 0; k < val->ndim && k < MGE_MAX_DIMS; k++)
            w[3 + k] = val->dims[k];
        h = train_hash_bytes(h, w, sizeof w);
    }
    for (int i = 0; i < g->nnodes; i++) {
        const mge_node *n = &g->nodes[i];
        h = hash_str(h, n->name);
        h = train_hash_bytes(h, &n->op, sizeof n->op);
        h = train_hash_bytes(h, n->in, sizeof(int) * (size_t)n->nin);
        h = train_hash_bytes(h, n->out, sizeof(int) * (size_t)n->nout);
        for (int a = 0; a < n->nattr; a++) {
            const mge_attr *at = &n->attrs[a];
            h = train_hash_bytes(h, &at->key, sizeof at->key);
            h = train_hash_bytes(h, &at->n, sizeof at->n);
            h = train_hash_bytes(h, at->i, sizeof at->i);
            h = train_hash_bytes(h, &at->f, sizeof at->f);
        }
    }
    h = train_hash_bytes(h, &g->loss, sizeof g->loss);
    return h;
}

uint64_t train_hash_dataset(const mge_dataset *ds)
{
    uint64_t h = 0xcbf29ce484222325ull;
    h = train_hash_bytes(h, &ds->count, sizeof ds->count);
    for (int a = 0; a < ds->n; a++) {
        const mge_tensor *t = &ds->t[a];
        h = train_hash_bytes(h, &t->dtype, sizeof t->dtype);
        h = train_hash_bytes(h, t->dims, sizeof(int64_t) * (size_t)t->ndim);
        if (t->data && !(t->flags & MGE_TENSOR_OWNED) && ds->map && t->nbytes && ds->count > 64) {
            /* borrowed from the mapped file: hashing it all would read the
             * whole file on every rank; 64 spread samples catch a different file */
            size_t row = t->nbytes / (size_t)ds->count;
            for (int64_t k = 0; k < 64; k++)
                h = train_hash_bytes(h, (const char *)t->data + row * (size_t)(k * (ds->count - 1) / 63), row);
        } else if (t->data) {
            h = train_hash_bytes(h, t->data, t->nbytes);
        }
    }
    return h;
}

int train_dist_check_sync(train_dist *d, mge_trainer *t, int64_t step)
{
    if (!d->comm || !d->check_sync)
        return 0;
    mge_error err;
    mge_error_clear(&err);
    uint64_t h, *all = malloc(sizeof *all * (size_t)d->size);
    if (!all) {
        cli_error(NULL, "out of memory");
        return -1;
    }
    if (mge_trainer_hash(t, &h, &err) || d->comm->allgather_u64(d->comm, &h, 1, all, &err)) {
        cli_mge_error(NULL, &err);
        free(all);
        return -1;
    }
    for (int r = 1; r < d->size; r++)
        if (all[r] != all[0]) {
            if (d->rank == 0)
                cli_error(NULL, "--check-sync: after step %lld the parameters of rank %d differ from rank 0's "
                          "(hash %016llx, rank 0 %016llx)", (long long)step, r, (unsigned long long)all[r],
                          (unsigned long long)all[0]);
            d->all_failed = 1;
            free(all);
            return -1;
        }
    free(all);
    return 0;
}

void train_dist_free(train_dist *d)
{
    free(d->view);
    free(d->vp);
    d->view = NULL;
    d->vp = NULL;
}
