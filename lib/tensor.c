/* tensor.c — tensors, aligned memory, named tensor lists. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

/* Buffers from this size up get huge pages (mge_aligned_alloc). */
#define MGE_HUGE_MIN ((size_t)4 << 20)

/* Beyond this many elements a shape is refused as absurd, whatever the RAM. */
#define MGE_MAX_NUMEL (INT64_C(1) << 48)

void *mge_aligned_alloc(size_t n)
{
    if (n == 0)
        n = 64;
    if (n > SIZE_MAX - 63)
        return NULL;
    size_t r = (n + 63) & ~(size_t)63;
    void *p = NULL;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    /* Big buffers (arenas, large weights) start on a 2 MiB boundary and ask
     * for transparent huge pages (where THP is "madvise", as on Debian):
     * GEMMs over many megabytes walk rows 4-8 KiB apart, one 4 KiB page each,
     * and every TLB miss is a nested page walk in a VM. Zeroing below
     * faults the pages in as huge ones. */
    if (r >= MGE_HUGE_MIN) {
        if (posix_memalign(&p, (size_t)2 << 20, r) != 0)
            p = NULL;
        else
            (void)madvise(p, r, MADV_HUGEPAGE);   /* a hint: refused is fine */
    }
#endif
    if (!p)
        p = aligned_alloc(64, r);
    if (p)
        memset(p, 0, r);
    return p;
}

void mge_aligned_free(void *p)
{
    free(p);
}

mge_status mge_shape_numel(int ndim, const int64_t *dims, mge_dtype dt, int64_t *numel, size_t *nbytes,
                           mge_error *err)
{
    if (ndim < 0 || ndim > MGE_MAX_DIMS)
        return mge_error_set(err, MGE_ERR_SHAPE, "rank %d out of range (0..%d)", ndim, MGE_MAX_DIMS);
    if ((unsigned)dt >= MGE_NDTYPES)
        return mge_error_set(err, MGE_ERR_SHAPE, "unknown dtype %d", (int)dt);
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (dims[i] < 0)
            return mge_error_set(err, MGE_ERR_SHAPE, "negative dimension %lld", (long long)dims[i]);
        if (dims[i] > 0 && n > MGE_MAX_NUMEL / dims[i])
            return mge_error_set(err, MGE_ERR_SHAPE, "shape too large (more than 2^48 elements)");
        n *= dims[i];
    }
    if (n > MGE_MAX_NUMEL)
        return mge_error_set(err, MGE_ERR_SHAPE, "shape too large (more than 2^48 elements)");
    if (numel)
        *numel = n;
    if (nbytes)
        *nbytes = (size_t)n * mge_dtype_size(dt);
    return MGE_OK;
}

int64_t mge_tensor_numel(const mge_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->dims[i];
    return n;
}

mge_status mge_tensor_init(mge_tensor *t, mge_dtype dt, int ndim, const int64_t *dims, mge_error *err)
{
    size_t nb;
    mge_status s = mge_shape_numel(ndim, dims, dt, NULL, &nb, err);
    if (s)
        return s;
    memset(t, 0, sizeof *t);
    t->q.axis = -1;
    t->dtype = dt;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++)
        t->dims[i] = dims[i];
    t->nbytes = nb;
    return MGE_OK;
}

mge_status mge_tensor_alloc(mge_tensor *t, mge_dtype dt, int ndim, const int64_t *dims, mge_error *err)
{
    mge_status s = mge_tensor_init(t, dt, ndim, dims, err);
    if (s)
        return s;
    t->data = mge_aligned_alloc(t->nbytes);
    if (!t->data)
        return mge_error_set(err, MGE_ERR_NOMEM, "cannot allocate %zu bytes", t->nbytes);
    t->flags |= MGE_TENSOR_OWNED;
    return MGE_OK;
}

mge_status mge_tensor_copy(mge_tensor *dst, const mge_tensor *src, mge_error *err)
{
    mge_status s = mge_tensor_alloc(dst, src->dtype, src->ndim, src->dims, err);
    if (s)
        return s;
    dst->layout = src->layout;
    if (src->nbytes)
        memcpy(dst->data, src->data, src->nbytes);
    dst->q.axis = src->q.axis;
    dst->q.zero = src->q.zero;
    if (src->q.nscale > 0) {
        dst->q.scale = malloc(sizeof(float) * (size_t)src->q.nscale);
        if (!dst->q.scale) {
            mge_tensor_free(dst);
            return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        }
        memcpy(dst->q.scale, src->q.scale, sizeof(float) * (size_t)src->q.nscale);
        dst->q.nscale = src->q.nscale;
    }
    return MGE_OK;
}

void mge_tensor_free(mge_tensor *t)
{
    if (!t)
        return;
    if (t->flags & MGE_TENSOR_OWNED)
        mge_aligned_free(t->data);
    free(t->q.scale);
    memset(t, 0, sizeof *t);
    t->q.axis = -1;
}

int mge_tensor_same_shape(const mge_tensor *a, const mge_tensor *b)
{
    if (a->ndim != b->ndim)
        return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->dims[i] != b->dims[i])
            return 0;
    return 1;
}

char *mge_shape_str(mge_dtype dt, int ndim, const int64_t *dims, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "%s[", mge_dtype_name(dt));
    for (int i = 0; i < ndim && k < n; i++) {
        char d[96];
        k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? "," : "", mge_dim_str(dims[i], d, sizeof d));
    }
    if (k < n)
        snprintf(buf + k, n - k, "]");
    return buf;
}

mge_status mge_tlist_add(mge_tlist *l, const char *name, mge_tensor *t, mge_error *err)
{
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 16;
        char **nn = realloc(l->names, sizeof *nn * (size_t)cap);
        if (!nn)
            return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        l->names = nn;
        mge_tensor *nt = realloc(l->t, sizeof *nt * (size_t)cap);
        if (!nt)
            return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        l->t = nt;
        l->cap = cap;
    }
    char *nm = mge_strdup(name);
    if (!nm)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    l->names[l->n] = nm;
    l->t[l->n] = *t;
    memset(t, 0, sizeof *t);
    t->q.axis = -1;
    l->n++;
    return MGE_OK;
}

int mge_tlist_find(const mge_tlist *l, const char *name)
{
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->names[i], name) == 0)
            return i;
    return -1;
}

void mge_tlist_free(mge_tlist *l)
{
    for (int i = 0; i < l->n; i++) {
        free(l->names[i]);
        mge_tensor_free(&l->t[i]);
    }
    free(l->names);
    free(l->t);
    memset(l, 0, sizeof *l);
}
