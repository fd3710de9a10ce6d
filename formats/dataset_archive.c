/* dataset_archive.c — datasets as tar or zip archives of NPY members, read
 * through libarchive from memory (the loader has already undone gzip).
 *
 * NAME.npy is array NAME; DIR/ANY.npy are shards of array DIR, joined along
 * axis 0 in sorted member-name order so that 000.npy, 001.npy, ... (and tar
 * files written in any order) give one well-defined array. Names that
 * climb out ("..", absolute, "C:") and members that are not regular files
 * or directories (links, devices, FIFOs) are refused by name, hidden or
 * not; the members' bytes are bounded (unpack.h). */
#include "internal.h"
#include "unpack.h"

#include <archive.h>
#include <archive_entry.h>
#include <stdlib.h>
#include <string.h>

typedef struct member {
    char *name;      /* array name */
    char *path;      /* member path, for sorting and messages */
    int shard;       /* came from DIR/ANY.npy */
    mge_tensor t;
} member;

typedef struct members {
    int n, cap;
    member *m;
} members;

static void members_free(members *ms)
{
    for (int i = 0; i < ms->n; i++) {
        free(ms->m[i].name);
        free(ms->m[i].path);
        mge_tensor_free(&ms->m[i].t);
    }
    free(ms->m);
    memset(ms, 0, sizeof *ms);
}

static int member_cmp(const void *a, const void *b)
{
    const member *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : strcmp(x->path, y->path);
}

/* Reads one member into ms, or skips it (directories, hidden files). */
static mge_status read_member(mge_unpack *u, struct archive_entry *e, const char *what, members *ms,
                              mge_error *err)
{
    const char *path = archive_entry_pathname(e);
    if (!path)
        path = "";
    const char *why = mge_unpack_bad_name(path);
    if (why)
        return mge_error_set(err, MGE_ERR_FORMAT, "%s: member '%.200s' is refused: its name is %s", what, path, why);
    char kind[256];
    if ((why = mge_unpack_bad_type(e, kind, sizeof kind)))
        return mge_error_set(err, MGE_ERR_FORMAT, "%s: member '%.200s' is refused: it is %s, not a regular file",
                             what, path, why);
    while (path[0] == '.' && path[1] == '/')
        path += 2;
    if (archive_entry_filetype(e) == AE_IFDIR || !*path)
        return MGE_OK;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    /* macOS archivers add resource forks: not data */
    if (base[0] == '.' || strncmp(path, "__MACOSX/", 9) == 0)
        return MGE_OK;
    size_t pl = strlen(path);
    if (pl <= 4 || strcmp(path + pl - 4, ".npy") != 0 || base[0] == '.' || strcmp(base, ".npy") == 0)
        return mge_error_set(err, MGE_ERR_FORMAT, "%s: member '%.200s' is not an .npy array", what, path);
    const char *slash = strrchr(path, '/');
    member m;
    memset(&m, 0, sizeof m);
    m.shard = slash != NULL;
    m.name = mge_strndup(path, slash ? (size_t)(slash - path) : pl - 4);
    m.path = mge_strdup(path);
    if (!m.name || !m.path) {
        free(m.name);
        free(m.path);
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    }
    unsigned char *data = NULL;
    size_t n = 0, used = 0;
    mge_status s = mge_unpack_read(u, e, path, &data, &n, err);
    if (s)
        mge_error_prefix(err, "%s", what);
    if (!s) {
        s = mge_npy_read_mem(data, n, &used, &m.t, err);
        if (s == MGE_ERR_EOF)
            s = mge_error_set(err, MGE_ERR_FORMAT, "empty member");
        else if (!s && used != n)
            s = mge_error_set(err, MGE_ERR_FORMAT, "%zu bytes after the array", n - used);
        if (s)
            mge_error_prefix(err, "%s: member '%.200s'", what, path);
    }
    free(data);
    if (!s && ms->n == ms->cap) {
        int cap = ms->cap ? ms->cap * 2 : 16;
        member *nm = realloc(ms->m, sizeof *nm * (size_t)cap);
        if (!nm)
            s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        else {
            ms->m = nm;
            ms->cap = cap;
        }
    }
    if (s) {
        free(m.name);
        free(m.path);
        mge_tensor_free(&m.t);
        return s;
    }
    ms->m[ms->n++] = m;
    return MGE_OK;
}

/* Joins members [lo, hi) (one array's shards, sorted) along axis 0 into out. */
static mge_status join(member *m, int lo, int hi, const char *what, mge_tensor *out, mge_error *err)
{
    const mge_tensor *f = &m[lo].t;
    char a[128], b[128];
    if (hi - lo == 1 && !m[lo].shard) {
        *out = m[lo].t;
        memset(&m[lo].t, 0, sizeof m[lo].t);
        return MGE_OK;
    }
    int64_t total = 0;
    for (int i = lo; i < hi; i++) {
        const mge_tensor *t = &m[i].t;
        if (t->ndim < 1)
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: shard '%.200s' is a scalar: a shard needs a sample dimension",
                                 what, m[i].path);
        if (t->dtype != f->dtype || t->ndim != f->ndim || memcmp(t->dims + 1, f->dims + 1, sizeof(int64_t) * (size_t)(f->ndim - 1)))
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: shard '%.200s' is %s, shard '%.200s' is %s: shards of one "
                                 "array must agree but for the first dimension", what, m[lo].path,
                                 mge_shape_str(f->dtype, f->ndim, f->dims, a, sizeof a), m[i].path,
                                 mge_shape_str(t->dtype, t->ndim, t->dims, b, sizeof b));
        total += t->dims[0];
    }
    int64_t dims[MGE_MAX_DIMS];
    memcpy(dims, f->dims, sizeof dims);
    dims[0] = total;
    mge_status s = mge_tensor_alloc(out, f->dtype, f->ndim, dims, err);
    if (s)
        return s;
    size_t off = 0;
    for (int i = lo; i < hi; i++) {
        if (m[i].t.nbytes)
            memcpy((char *)out->data + off, m[i].t.data, m[i].t.nbytes);
        off += m[i].t.nbytes;
        mge_tensor_free(&m[i].t);
    }
    return MGE_OK;
}

static mge_status build(members *ms, const char *what, mge_dataset *ds, mge_error *err)
{
    if (ms->n == 0)
        return mge_error_set(err, MGE_ERR_FORMAT, "%s: empty dataset: the archive holds no .npy members", what);
    qsort(ms->m, (size_t)ms->n, sizeof *ms->m, member_cmp);
    int narr = 0;
    for (int i = 0; i < ms->n; i++)
        if (i == 0 || strcmp(ms->m[i].name, ms->m[i - 1].name))
            narr++;
    ds->names = calloc((size_t)narr, sizeof *ds->names);
    ds->t = calloc((size_t)narr, sizeof *ds->t);
    if (!ds->names || !ds->t)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    for (int lo = 0, hi; lo < ms->n; lo = hi) {
        for (hi = lo + 1; hi < ms->n && strcmp(ms->m[hi].name, ms->m[lo].name) == 0; hi++) {
            if (!ms->m[hi].shard || !ms->m[lo].shard)
                return mge_error_set(err, MGE_ERR_FORMAT, "%s: array '%.200s' appears twice ('%.200s', '%.200s')", what,
                                     ms->m[lo].name, ms->m[lo].path, ms->m[hi].path);
        }
        mge_status s = join(ms->m, lo, hi, what, &ds->t[ds->n], err);
        if (s)
            return s;
        ds->names[ds->n] = ms->m[lo].name;
        ms->m[lo].name = NULL;
        ds->n++;
    }
    return MGE_OK;
}

mge_status mge_dataset_load_archive_mem(const void *buf, size_t n, const char *what, mge_dataset *ds, mge_error *err)
{
    return mge_dataset_load_archive_packed(buf, n, n, what, ds, err);
}

mge_status mge_dataset_load_archive_packed(const void *buf, size_t n, uint64_t packed, const char *what,
                                           mge_dataset *ds, mge_error *err)
{
    memset(ds, 0, sizeof *ds);
    struct archive *a = archive_read_new();
    if (!a)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    archive_read_support_format_tar(a);
    archive_read_support_format_zip_seekable(a);
    archive_read_support_filter_all(a);
    members ms = {0};
    mge_unpack u = {a, packed ? packed : 1, 0};
    mge_status s = MGE_OK;
    if (archive_read_open_memory(a, buf, n) != ARCHIVE_OK) {
        const char *m = archive_error_string(a);
        s = mge_error_set(err, MGE_ERR_FORMAT, "%s: unknown format (not IDX, NPY, npz, tar or zip: %s)", what,
                          m ? m : "unrecognized");
        goto done;
    }
    for (;;) {
        struct archive_entry *e;
        int r = archive_read_next_header(a, &e);
        if (r == ARCHIVE_EOF)
            break;
        if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
            const char *m = archive_error_string(a);
            s = mge_error_set(err, MGE_ERR_FORMAT, "%s: %s", what, m ? m : "corrupt archive");
            goto done;
        }
        if ((s = read_member(&u, e, what, &ms, err)))
            goto done;
    }
    if (!(s = build(&ms, what, ds, err)))
        s = mge_dataset_check(ds, what, err);
done:
    members_free(&ms);
    archive_read_free(a);
    if (s)
        mge_dataset_free(ds);
    return s;
}
