/* dataset.c — datasets: resolving a spec to files, loading every source
 * kind (IDX pairs, single files by content, streams, npz; archives in
 * dataset_archive.c), binding arrays to model inputs, validation splits.
 * The loader (batches, shuffling, prefetch) is lib/loader.c. */
#include "internal.h"

#include "unpack.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

/* Where the Debian package dataset-fashion-mnist installs the files. */
#define FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"
#define FASHION_MNIST_PKG "dataset-fashion-mnist"

void mge_dataset_free(mge_dataset *ds)
{
    if (!ds)
        return;
    for (int i = 0; i < ds->n; i++) {
        if (ds->names)
            free(ds->names[i]);
        if (ds->t)
            mge_tensor_free(&ds->t[i]);
    }
    free(ds->names);
    free(ds->t);
    free(ds->source);
    mge_file_unslurp(ds->map, ds->map_n, 1);
    memset(ds, 0, sizeof *ds);
}

/* "'images'", or "array 0" / "record 3" for positional data. */
static const char *aname(const mge_dataset *ds, int i, char *b, size_t n)
{
    if (ds->names && ds->names[i])
        snprintf(b, n, "'%.200s'", ds->names[i]);
    else
        snprintf(b, n, "%s %d", ds->stream ? "record" : "array", i);
    return b;
}

mge_status mge_dataset_check(mge_dataset *ds, const char *what, mge_error *err)
{
    char a[256], b[256], sa[128], sb[128];
    if (ds->n <= 0)
        return mge_error_set(err, MGE_ERR_FORMAT, "%s: empty dataset: no arrays", what);
    for (int i = 0; i < ds->n; i++)
        if (ds->t[i].ndim < 1)
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: %s is a scalar: arrays need a sample dimension", what,
                                 aname(ds, i, a, sizeof a));
    if (ds->stream) {
        ds->count = -1;
        return MGE_OK;
    }
    for (int i = 1; i < ds->n; i++)
        if (ds->t[i].dims[0] != ds->t[0].dims[0])
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: arrays with different sample counts: %s is %s, %s is %s",
                                 what, aname(ds, 0, a, sizeof a),
                                 mge_shape_str(ds->t[0].dtype, ds->t[0].ndim, ds->t[0].dims, sa, sizeof sa),
                                 aname(ds, i, b, sizeof b),
                                 mge_shape_str(ds->t[i].dtype, ds->t[i].ndim, ds->t[i].dims, sb, sizeof sb));
    ds->count = ds->t[0].dims[0];
    if (ds->count == 0)
        return mge_error_set(err, MGE_ERR_FORMAT, "%s: empty dataset (0 samples)", what);
    return MGE_OK;
}

/* Grows ds by one array (name may be NULL; copied), taking *t. */
static mge_status ds_add(mge_dataset *ds, const char *name, mge_tensor *t, mge_error *err)
{
    char **nn = realloc(ds->names, sizeof *nn * (size_t)(ds->n + 1));
    if (!nn)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    ds->names = nn;
    mge_tensor *nt = realloc(ds->t, sizeof *nt * (size_t)(ds->n + 1));
    if (!nt)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    ds->t = nt;
    ds->names[ds->n] = NULL;
    if (name && !(ds->names[ds->n] = mge_strdup(name)))
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    ds->t[ds->n] = *t;
    memset(t, 0, sizeof *t);
    ds->n++;
    return MGE_OK;
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* ---------------------------------------------------------------- IDX pairs */

typedef struct idx_pair {
    char *prefix;
    char *images, *labels;   /* file names in the directory */
} idx_pair;

/* NAME = PREFIX-(images|labels)-idxD-ubyte[.gz]: the kind (1 images, 2
 * labels, 0 neither) and the prefix length. */
static int idx_name_kind(const char *name, size_t *plen)
{
    const char *kinds[2] = {"-images-idx", "-labels-idx"};
    for (int k = 0; k < 2; k++) {
        const char *p = strstr(name, kinds[k]);
        if (!p || p == name)
            continue;
        const char *q = p + strlen(kinds[k]);
        if (*q < '0' || *q > '9' || strncmp(q + 1, "-ubyte", 6) != 0)
            continue;
        q += 7;
        if (*q && strcmp(q, ".gz") != 0)
            continue;
        *plen = (size_t)(p - name);
        return k + 1;
    }
    return 0;
}

static void pairs_free(idx_pair *p, int n)
{
    for (int i = 0; i < n; i++) {
        free(p[i].prefix);
        free(p[i].images);
        free(p[i].labels);
    }
    free(p);
}

static int pair_cmp(const void *a, const void *b)
{
    return strcmp(((const idx_pair *)a)->prefix, ((const idx_pair *)b)->prefix);
}

/* All PREFIX entries of dir, sorted by prefix (complete or not). */
static mge_status scan_pairs(const char *dir, idx_pair **out, int *nout, mge_error *err)
{
    *out = NULL;
    *nout = 0;
    DIR *d = opendir(dir);
    if (!d)
        return mge_error_set(err, MGE_ERR_IO, "%s: %s", dir, strerror(errno));
    idx_pair *p = NULL;
    int n = 0;
    mge_status s = MGE_OK;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t pl;
        int k = idx_name_kind(e->d_name, &pl);
        if (!k)
            continue;
        int i;
        for (i = 0; i < n; i++)
            if (strlen(p[i].prefix) == pl && strncmp(p[i].prefix, e->d_name, pl) == 0)
                break;
        if (i == n) {
            idx_pair *np = realloc(p, sizeof *np * (size_t)(n + 1));
            if (!np) {
                s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
                break;
            }
            p = np;
            memset(&p[n], 0, sizeof p[n]);
            if (!(p[n].prefix = mge_strndup(e->d_name, pl))) {
                s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
                break;
            }
            n++;
        }
        char **slot = k == 1 ? &p[i].images : &p[i].labels;
        /* both FILE and FILE.gz: take the uncompressed one (faster, same data) */
        if (*slot && !ends_with(*slot, ".gz"))
            continue;
        char *dup = mge_strdup(e->d_name);
        if (!dup) {
            s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
            break;
        }
        free(*slot);
        *slot = dup;
    }
    closedir(d);
    if (s) {
        pairs_free(p, n);
        return s;
    }
    if (n)
        qsort(p, (size_t)n, sizeof *p, pair_cmp);
    *out = p;
    *nout = n;
    return MGE_OK;
}

static char *join_path(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (p) {
        memcpy(p, dir, a);
        p[a] = '/';
        memcpy(p + a + 1, name, b + 1);
    }
    return p;
}

static mge_status load_pair(const char *dir, const idx_pair *pr, const char *what, mge_dataset *ds, mge_error *err)
{
    const char *files[2] = {pr->images, pr->labels};
    const char *names[2] = {"images", "labels"};
    for (int k = 0; k < 2; k++) {
        char *path = join_path(dir, files[k]);
        if (!path)
            return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        mge_tensor t;
        mge_status s = mge_idx_read_path(path, &t, err);
        free(path);
        if (!s)
            s = ds_add(ds, names[k], &t, err);
        mge_tensor_free(&t);
        if (s)
            return s;
    }
    ds->positional = 1;
    return mge_dataset_check(ds, what, err);
}

/* Picks the pair for split (NULL, "train", "test") in dir; want (may be
 * NULL) is an exact prefix asked for. */
static mge_status load_dir(const char *dir, const char *split, const char *want, const char *label, mge_dataset *ds,
                           mge_error *err)
{
    idx_pair *p;
    int n;
    mge_status s = scan_pairs(dir, &p, &n, err);
    if (s)
        return s;
    int complete = 0, pick = -1;
    for (int i = 0; i < n; i++)
        complete += p[i].images && p[i].labels;
    const char *cands[3] = {NULL, NULL, NULL};
    if (want)
        cands[0] = want;
    else if (split && strcmp(split, "test") == 0)
        cands[0] = "t10k", cands[1] = "test";
    else
        cands[0] = "train";
    for (int c = 0; c < 3 && cands[c] && pick < 0; c++)
        for (int i = 0; i < n; i++)
            if (p[i].images && p[i].labels && strcmp(p[i].prefix, cands[c]) == 0)
                pick = i;
    /* a lone pair serves a plain DIR whatever its name, and DIR:train unless it is the test pair */
    if (pick < 0 && !want && complete == 1 && !(split && strcmp(split, "test") == 0))
        for (int i = 0; i < n; i++)
            if (p[i].images && p[i].labels &&
                (!split || (strcmp(p[i].prefix, "t10k") && strcmp(p[i].prefix, "test"))))
                pick = i;
    if (pick < 0) {
        mge_buf b = {0};
        for (int i = 0; i < n; i++)
            mge_buf_printf(&b, "%s%s%s", i ? ", " : "", p[i].prefix,
                           p[i].images && p[i].labels ? "" : p[i].images ? " (no labels)" : " (no images)");
        mge_buf_put(&b, "", 1);
        if (want)
            s = mge_error_set(err, MGE_ERR_IO, "%s: no %s-images-idx*-ubyte[.gz] and %s-labels-idx*-ubyte[.gz] pair%s%s",
                              dir, want, want, n ? "; pairs there: " : "", n && b.p ? b.p : "");
        else if (n == 0)
            s = mge_error_set(err, MGE_ERR_IO, "%s: no IDX files (PREFIX-images-idx3-ubyte[.gz], "
                              "PREFIX-labels-idx1-ubyte[.gz])", dir);
        else
            s = mge_error_set(err, MGE_ERR_INVALID, "%s: %s IDX pair%s (%s): none is %s; name one as DIR/PREFIX", dir,
                              complete > 1 ? "several" : "no usable", complete > 1 ? "s" : "", b.p ? b.p : "",
                              split && strcmp(split, "test") == 0 ? "t10k- or test-" : "train-");
        mge_buf_free(&b);
        pairs_free(p, n);
        return s;
    }
    mge_buf src = {0};
    mge_buf_printf(&src, "%s %s", label, p[pick].prefix);
    mge_buf_put(&src, "", 1);
    if (src.failed) {
        pairs_free(p, n);
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    }
    s = load_pair(dir, &p[pick], src.p, ds, err);
    ds->source = src.p;
    pairs_free(p, n);
    return s;
}

/* ---------------------------------------------------------------- single files */

/* borrow: the records may keep pointing into p (a mapped file) */
static mge_status load_stream(const unsigned char *p, size_t n, int borrow, const char *what, mge_dataset *ds,
                              mge_error *err)
{
    size_t off = 0;
    while (off < n) {
        mge_tensor t;
        size_t used = 0;
        mge_status s = borrow ? mge_npy_view_mem(p + off, n - off, &used, &t, err)
                              : mge_npy_read_mem(p + off, n - off, &used, &t, err);
        if (!s)
            s = ds_add(ds, NULL, &t, err);
        mge_tensor_free(&t);
        if (s) {
            mge_error_prefix(err, "%s: record %d", what, ds->n);
            return s;
        }
        off += used;
    }
    ds->positional = 1;
    ds->stream = 1;
    return mge_dataset_check(ds, what, err);
}

/* packed: the file's size before a gzip layer was undone (unpack.h's limit is relative to it) */
static mge_status load_content(const char *path, const unsigned char *p, size_t n, uint64_t packed, int borrow,
                               const char *what, mge_dataset *ds, mge_error *err)
{
    mge_status s;
    if (n == 0)
        return mge_error_set(err, MGE_ERR_FORMAT, "%s: empty dataset: the file is empty", what);
    /* a model, a torch.save file, an image: named, not fed to the archive reader */
    if ((s = mge_sniff_check(p, n < MGE_SNIFF_BYTES ? n : MGE_SNIFF_BYTES, MGE_SNIFF_DATA, path, err))) {
        mge_error_prefix(err, "%s", what);
        return s;
    }
    if (mge_idx_is_idx(p, n)) {
        mge_tensor t;
        if (!(s = mge_idx_read_mem(p, n, &t, err)))
            s = ds_add(ds, NULL, &t, err);
        else
            mge_error_prefix(err, "%s", what);
        mge_tensor_free(&t);
        ds->positional = 1;
        return s ? s : mge_dataset_check(ds, what, err);
    }
    if (mge_npy_is_npy(p, n))
        return load_stream(p, n, borrow, what, ds, err);
    if (mge_npz_is_zip(p, n) && ends_with(path, ".npz")) {
        mge_tlist l = {0};
        s = mge_npz_read_packed(p, n, packed, &l, err);
        if (s)
            mge_error_prefix(err, "%s", what);
        for (int i = 0; i < l.n && !s; i++)
            s = ds_add(ds, l.names[i], &l.t[i], err);
        mge_tlist_free(&l);
        return s ? s : mge_dataset_check(ds, what, err);
    }
    return mge_dataset_load_archive_packed(p, n, packed, what, ds, err);
}

static mge_status load_file(const char *path, mge_dataset *ds, mge_error *err)
{
    void *buf, *raw = NULL;
    size_t fn, n, rn;
    int mapped;
    const char *what = strcmp(path, "-") ? path : "<stdin>";
    mge_status s = mge_file_slurp(path, &buf, &fn, &mapped, err);
    if (s)
        return s;
    const unsigned char *p = buf;
    n = fn;
    if (mge_is_gzip(buf, n)) {
        s = mge_gunzip_data(buf, n, &raw, &rn, err);
        if (s)
            mge_error_prefix(err, "%s", what);
        p = raw;
        n = rn;
    }
    if (!s) {
        /* name the npz rule after the gzip layer: data.npz.gz is still npz */
        char *inner = NULL;
        if (raw && ends_with(path, ".gz"))
            inner = mge_strndup(path, strlen(path) - 3);
        /* an uncompressed NPY file stays mapped: each process of a
         * data-parallel job then reads only the samples its batches use */
        int borrow = mapped && !raw && mge_npy_is_npy(p, n);
        s = load_content(inner ? inner : path, p, n, fn, borrow, what, ds, err);
        free(inner);
        if (!s && borrow) {
            /* samples are read in shuffled order: readahead would read other ranks' */
            madvise(buf, fn, MADV_RANDOM);
            ds->map = buf;
            ds->map_n = fn;
            buf = NULL;
        }
    }
    free(raw);
    mge_file_unslurp(buf, fn, mapped);
    if (!s && !ds->source && !(ds->source = mge_strdup(what)))
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    return s;
}

/* ---------------------------------------------------------------- specs */

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* PREFIX[:split]: the pair named by the last component in its directory;
 * :test maps a last component "train" to t10k (then test). */
static mge_status load_prefix(const char *prefix, const char *split, const char *spec, mge_dataset *ds,
                              mge_error *err)
{
    const char *slash = strrchr(prefix, '/');
    char *dir = slash ? mge_strndup(prefix, slash == prefix ? 1 : (size_t)(slash - prefix)) : mge_strdup(".");
    const char *base = slash ? slash + 1 : prefix;
    if (!dir)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    mge_status s;
    if (!*base || !is_dir(dir)) {
        s = mge_error_set(err, MGE_ERR_IO, "%s: no such file, directory or IDX prefix", spec);
    } else if (split && strcmp(split, "test") == 0 && strcmp(base, "train") == 0) {
        s = load_dir(dir, "test", NULL, dir, ds, err);
    } else {
        s = load_dir(dir, NULL, base, dir, ds, err);
        if (s == MGE_ERR_IO)
            mge_error_set(err, MGE_ERR_IO, "%s: no such file or directory, and no IDX pair %s-images-idx*-ubyte[.gz] "
                          "+ %s-labels-idx*-ubyte[.gz] in %s", spec, base, base, dir);
    }
    free(dir);
    return s;
}

mge_status mge_dataset_load(const char *spec, mge_dataset *ds, mge_error *err)
{
    memset(ds, 0, sizeof *ds);
    if (!spec || !*spec)
        return mge_error_set(err, MGE_ERR_INVALID, "no dataset given");
    /* NAME:train / NAME:test, unless a file is really called that */
    const char *split = NULL;
    char *base = NULL;
    struct stat st;
    if (stat(spec, &st) != 0) {
        const char *c = strrchr(spec, ':');
        if (c && (strcmp(c, ":train") == 0 || strcmp(c, ":test") == 0)) {
            split = c + 1;
            base = mge_strndup(spec, (size_t)(c - spec));
            if (!base)
                return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        }
    }
    const char *b = base ? base : spec;
    mge_status s;
    if (strcmp(b, "fashion-mnist") == 0 && stat(b, &st) != 0) {
        if (!is_dir(FASHION_MNIST_DIR))
            s = mge_error_set(err, MGE_ERR_IO, "fashion-mnist: %s not found; install the Debian package %s "
                              "(apt install %s)", FASHION_MNIST_DIR, FASHION_MNIST_PKG, FASHION_MNIST_PKG);
        else
            s = load_dir(FASHION_MNIST_DIR, split ? split : "train", NULL, "fashion-mnist", ds, err);
        if (!s && ds->source) {
            /* "fashion-mnist t10k" reads better as the split asked for */
            free(ds->source);
            ds->source = mge_strdup(split && strcmp(split, "test") == 0 ? "fashion-mnist test" : "fashion-mnist train");
            if (!ds->source)
                s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        }
    } else if (strcmp(b, "-") == 0 && !split) {
        s = load_file(b, ds, err);
    } else if (is_dir(b)) {
        s = load_dir(b, split, NULL, b, ds, err);
    } else if (stat(b, &st) == 0) {
        if (split)
            s = mge_error_set(err, MGE_ERR_INVALID, "%s: ':%s' selects a split of an IDX directory or prefix, "
                              "not of a file", spec, split);
        else
            s = load_file(b, ds, err);
    } else {
        s = load_prefix(b, split, spec, ds, err);
    }
    free(base);
    if (s)
        mge_dataset_free(ds);
    return s;
}

/* ---------------------------------------------------------------- binding */

static int is_int_dtype(mge_dtype d)
{
    return d == MGE_U8 || d == MGE_I8 || d == MGE_I16 || d == MGE_U16 || d == MGE_I32 || d == MGE_U32 ||
           d == MGE_I64 || d == MGE_U64 || d == MGE_BOOL;
}

static int is_float_dtype(mge_dtype d)
{
    return d == MGE_F32 || d == MGE_F16 || d == MGE_BF16 || d == MGE_F64;
}

/* u64 values from 2^63 come back as their bits (negative): convert checks
 * the source dtype before it trusts the sign. */
static int64_t get_i(const void *p, mge_dtype d, int64_t i)
{
    switch (d) {
    case MGE_U8: return ((const uint8_t *)p)[i];
    case MGE_BOOL: return ((const uint8_t *)p)[i] != 0;
    case MGE_I8: return ((const int8_t *)p)[i];
    case MGE_I16: return ((const int16_t *)p)[i];
    case MGE_U16: return ((const uint16_t *)p)[i];
    case MGE_I32: return ((const int32_t *)p)[i];
    case MGE_U32: return ((const uint32_t *)p)[i];
    case MGE_U64: return (int64_t)((const uint64_t *)p)[i];
    default: return ((const int64_t *)p)[i];
    }
}

static double get_f(const void *p, mge_dtype d, int64_t i)
{
    switch (d) {
    case MGE_F16: return mge_f16_to_f32(((const uint16_t *)p)[i]);
    case MGE_BF16: return mge_bf16_to_f32(((const uint16_t *)p)[i]);
    case MGE_F64: return ((const double *)p)[i];
    default: return ((const float *)p)[i];
    }
}

static void put_f(void *p, mge_dtype d, int64_t i, double v)
{
    if (d == MGE_F16)
        ((uint16_t *)p)[i] = mge_f32_to_f16((float)v);
    else if (d == MGE_BF16)
        ((uint16_t *)p)[i] = mge_f32_to_bf16((float)v);
    else if (d == MGE_F64)
        ((double *)p)[i] = v;
    else
        ((float *)p)[i] = (float)v;
}

static void int_limits(mge_dtype dd, int64_t *lo, int64_t *hi)
{
    switch (dd) {
    case MGE_U8: *lo = 0, *hi = UINT8_MAX; break;
    case MGE_BOOL: *lo = 0, *hi = 1; break;
    case MGE_I8: *lo = INT8_MIN, *hi = INT8_MAX; break;
    case MGE_I16: *lo = INT16_MIN, *hi = INT16_MAX; break;
    case MGE_U16: *lo = 0, *hi = UINT16_MAX; break;
    case MGE_I32: *lo = INT32_MIN, *hi = INT32_MAX; break;
    case MGE_U32: *lo = 0, *hi = UINT32_MAX; break;
    case MGE_U64: *lo = 0, *hi = INT64_MAX; break; /* and u64 sources beyond, below */
    default: *lo = INT64_MIN, *hi = INT64_MAX; break;
    }
}

/* Converts all of src into dst (numel elements of dtype dd). 0 or the index
 * of the first integer that does not fit, plus one, in *bad. */
static void convert(const mge_tensor *src, mge_dtype dd, void *dst, const mge_data_opts *o, int64_t *bad)
{
    int64_t n = mge_tensor_numel(src);
    mge_dtype sd = src->dtype;
    *bad = 0;
    if (sd == dd) {
        if (src->nbytes)
            memcpy(dst, src->data, src->nbytes);
        return;
    }
    if (sd == MGE_U8 && is_float_dtype(dd)) {
        float lut[256];
        for (int v = 0; v < 256; v++) {
            float x = (float)v / 255.0f;
            lut[v] = o && o->normalize ? (x - o->mean) / o->std : x;
        }
        const uint8_t *s = src->data;
        if (dd == MGE_F32)
            for (int64_t i = 0; i < n; i++)
                ((float *)dst)[i] = lut[s[i]];
        else
            for (int64_t i = 0; i < n; i++)
                put_f(dst, dd, i, lut[s[i]]);
        return;
    }
    if (is_float_dtype(dd)) {
        for (int64_t i = 0; i < n; i++) {
            double v;
            if (!is_int_dtype(sd))
                v = get_f(src->data, sd, i);
            else if (dd == MGE_F32) /* one rounding, not two through double */
                v = sd == MGE_U64 ? (float)(uint64_t)get_i(src->data, sd, i) : (float)get_i(src->data, sd, i);
            else
                v = sd == MGE_U64 ? (double)(uint64_t)get_i(src->data, sd, i) : (double)get_i(src->data, sd, i);
            put_f(dst, dd, i, v);
        }
        return;
    }
    int64_t lo, hi;
    int_limits(dd, &lo, &hi);
    for (int64_t i = 0; i < n; i++) {
        int64_t v = get_i(src->data, sd, i);
        int big = sd == MGE_U64 && v < 0; /* >= 2^63: only u64 holds it */
        if (big ? dd != MGE_U64 : v < lo || v > hi) {
            *bad = i + 1;
            return;
        }
        switch (dd) {
        case MGE_U8:
        case MGE_BOOL: ((uint8_t *)dst)[i] = (uint8_t)v; break;
        case MGE_I8: ((int8_t *)dst)[i] = (int8_t)v; break;
        case MGE_I16: ((int16_t *)dst)[i] = (int16_t)v; break;
        case MGE_U16: ((uint16_t *)dst)[i] = (uint16_t)v; break;
        case MGE_I32: ((int32_t *)dst)[i] = (int32_t)v; break;
        case MGE_U32: ((uint32_t *)dst)[i] = (uint32_t)v; break;
        case MGE_U64: ((uint64_t *)dst)[i] = (uint64_t)v; break;
        default: ((int64_t *)dst)[i] = v; break;
        }
    }
}

/* Per-sample dims equal after dropping size-1 dims. */
static int has_syms(const mge_value *v)
{
    for (int i = 1; i < v->ndim; i++)
        if (v->dims[i] < 0)
            return 1;
    return 0;
}

static int fits(const mge_tensor *t, const mge_value *v)
{
    if (has_syms(v)) { /* symbols take the array's sizes: the same rank, numbers equal */
        if (t->ndim != v->ndim)
            return 0;
        for (int i = 1; i < v->ndim; i++)
            if (v->dims[i] >= 0 && v->dims[i] != t->dims[i])
                return 0;
        return 1;
    }
    int64_t a[MGE_MAX_DIMS], b[MGE_MAX_DIMS];
    int na = 0, nb = 0;
    for (int i = 1; i < t->ndim; i++)
        if (t->dims[i] != 1)
            a[na++] = t->dims[i];
    for (int i = 1; i < v->ndim; i++)
        if (v->dims[i] != 1)
            b[nb++] = v->dims[i];
    return na == nb && memcmp(a, b, sizeof(int64_t) * (size_t)na) == 0;
}

/* Names of the inputs, for messages. */
static void list_inputs(const mge_graph *g, int nin, const int *inputs, mge_buf *b)
{
    for (int j = 0; j < nin; j++)
        mge_buf_printf(b, "%s%s", j ? ", " : "", g->values[inputs[j]].name);
    mge_buf_put(b, "", 1);
}

static void list_arrays(const mge_dataset *ds, mge_buf *b)
{
    char a[256];
    for (int i = 0; i < ds->n; i++)
        mge_buf_printf(b, "%s%s", i ? ", " : "", aname(ds, i, a, sizeof a));
    mge_buf_put(b, "", 1);
}

/* Which arrays feed input j: src[j*per .. j*per+per). */
static mge_status bind_map(const mge_dataset *ds, const mge_graph *g, int nin, const int *inputs, int *src, int *per,
                           mge_error *err)
{
    const char *what = ds->source ? ds->source : "dataset";
    mge_buf b = {0}, c = {0};
    mge_status s = MGE_OK;
    if (!ds->positional) {
        int missing = 0;
        for (int j = 0; j < nin; j++) {
            const char *name = g->values[inputs[j]].name;
            src[j] = -1;
            for (int i = 0; i < ds->n; i++)
                if (ds->names && ds->names[i] && strcmp(ds->names[i], name) == 0)
                    src[j] = i;
            if (src[j] < 0)
                mge_buf_printf(&b, "%s'%s'", missing++ ? ", " : "", name);
        }
        mge_buf_put(&b, "", 1);
        /* arrays no input asked for are dropped: every input got the array of
         * its own name, so nothing is trained on the wrong data, and a tool
         * may bind a subset of a model's inputs (inference without labels) */
        if (missing) {
            list_arrays(ds, &c);
            s = mge_error_set(err, MGE_ERR_INVALID, "%s: no array for input%s %s (the dataset has %s)", what,
                              missing > 1 ? "s" : "", b.p ? b.p : "", c.p ? c.p : "");
        }
        *per = 1;
    } else if (!ds->stream) {
        /* images, labels -> x alone is inference: trailing arrays are dropped */
        if (ds->n < nin) {
            list_arrays(ds, &c);
            list_inputs(g, nin, inputs, &b);
            s = mge_error_set(err, MGE_ERR_INVALID, "%s: %d array%s (%s) bind by position, but the model has %d "
                              "inputs (%s)", what, ds->n, ds->n > 1 ? "s" : "", c.p ? c.p : "", nin,
                              b.p ? b.p : "");
        }
        for (int j = 0; j < nin; j++)
            src[j] = j;
        *per = 1;
    } else {
        if (ds->n % nin != 0) {
            list_inputs(g, nin, inputs, &b);
            s = mge_error_set(err, MGE_ERR_INVALID, "%s: %d records, not a multiple of the model's %d input%s (%s): "
                              "a stream holds one record per input per group", what, ds->n, nin, nin > 1 ? "s" : "",
                              b.p ? b.p : "");
        }
        *per = ds->n / nin;
        for (int j = 0; j < nin; j++)
            for (int k = 0; k < *per; k++)
                src[j * *per + k] = k * nin + j;
    }
    mge_buf_free(&b);
    mge_buf_free(&c);
    return s;
}

/* Variable-length sequences: a named dataset's array "lengths" (integers,
 * one per sample, 1..S) goes along as nt[nin] (i64) when an input has a
 * symbol at dim 1; the loader cuts those inputs' dim 1 to each batch's
 * longest sample. Without such an array nothing is cut. */
static mge_status bind_lengths(const mge_dataset *ds, const mge_graph *g, int nin, const int *inputs, int per,
                               mge_tensor *nt, int64_t count, char ***nn, mge_tensor **lens, unsigned *trim,
                               mge_error *err)
{
    const char *what = ds->source ? ds->source : "dataset";
    *lens = NULL;
    *trim = 0;
    int la = -1;
    for (int i = 0; !ds->positional && ds->names && i < ds->n; i++)
        if (ds->names[i] && strcmp(ds->names[i], "lengths") == 0)
            la = i;
    int64_t maxlen = -1;
    for (int j = 0; j < nin && j < 32; j++) {
        const mge_value *v = &g->values[inputs[j]];
        if (v->ndim >= 2 && v->dims[1] < 0 && strcmp(v->name, "lengths") != 0) {
            *trim |= 1u << j;
            if (maxlen < 0 || nt[j].dims[1] < maxlen)
                maxlen = nt[j].dims[1];
        }
    }
    if (la < 0 || !*trim || per != 1) {
        *trim = 0;
        return MGE_OK;
    }
    const mge_tensor *t = &ds->t[la];
    if (!is_int_dtype(t->dtype) || t->ndim != 1 || t->dims[0] != count)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: array 'lengths' must be integers, one per sample (%lld), not %s",
                             what, (long long)count, mge_dtype_name(t->dtype));
    int64_t d[1] = {count};
    mge_status s = mge_tensor_alloc(&nt[nin], MGE_I64, 1, d, err);
    if (s)
        return s;
    for (int64_t i = 0; i < count; i++) {
        int64_t x = get_i(t->data, t->dtype, i);
        if (x < 1 || x > maxlen)
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: lengths[%lld] is %lld: must be 1 to %lld (the arrays' "
                                 "dimension 1)", what, (long long)i, (long long)x, (long long)maxlen);
        ((int64_t *)nt[nin].data)[i] = x;
    }
    if (!((*nn)[nin] = mge_strdup("lengths")))
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    *lens = &nt[nin];
    return MGE_OK;
}

mge_status mge_dataset_bind(mge_dataset *ds, const mge_graph *g, int nin, const int *inputs, const mge_data_opts *o,
                            mge_error *err)
{
    const char *what = ds->source ? ds->source : "dataset";
    char a[256], sa[128], sb[128];
    if (nin <= 0)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: the model has no inputs to bind", what);
    if (ds->n <= 0)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: empty dataset: no arrays", what);
    if (o && o->normalize && !(o->std > 0))
        return mge_error_set(err, MGE_ERR_INVALID, "normalization std must be > 0");
    for (int j = 0; j < nin; j++) {
        if (inputs[j] < 0 || inputs[j] >= g->nvalues)
            return mge_error_set(err, MGE_ERR_INVALID, "input %d: value index %d out of range", j, inputs[j]);
        const mge_value *v = &g->values[inputs[j]];
        if (v->ndim < 1 || v->dims[0] != MGE_DIM_N)
            return mge_error_set(err, MGE_ERR_SHAPE, "input '%s' %s has no batch dimension N first: cannot feed it "
                                 "from a dataset", v->name, mge_shape_str(v->dtype, v->ndim, v->dims, sb, sizeof sb));
        for (int i = 1; i < v->ndim; i++)
            if (v->dims[i] == MGE_DIM_N || (v->dims[i] < 0 && !mge_dim_is_symbol(v->dims[i])))
                return mge_error_set(err, MGE_ERR_SHAPE, "input '%s' %s: only the first dimension may be N (other "
                                     "dimensions: numbers or other symbols)", v->name,
                                     mge_shape_str(v->dtype, v->ndim, v->dims, sb, sizeof sb));
    }
    int *src = malloc(sizeof *src * ((size_t)ds->n + (size_t)nin));
    mge_tensor *nt = calloc((size_t)nin + 1, sizeof *nt);   /* + the lengths array */
    char **nn = calloc((size_t)nin + 1, sizeof *nn);
    mge_tensor *lens = NULL;
    unsigned trim = 0;
    int per = 1;
    int64_t count = -1;
    mge_status s = MGE_OK;
    if (!src || !nt || !nn) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if ((s = bind_map(ds, g, nin, inputs, src, &per, err)))
        goto fail;
    /* check everything before converting anything */
    int jc = 0;
    for (int j = 0; j < nin; j++) {
        const mge_value *v = &g->values[inputs[j]];
        int64_t cj = 0;
        for (int k = 0; k < per; k++) {
            int i = src[j * per + k];
            const mge_tensor *t = &ds->t[i];
            mge_shape_str(t->dtype, t->ndim, t->dims, sa, sizeof sa);
            mge_shape_str(v->dtype, v->ndim, v->dims, sb, sizeof sb);
            if (t->ndim < 1 || !fits(t, v)) {
                s = mge_error_set(err, MGE_ERR_SHAPE, "%s: dataset array %s is %s: does not fit input '%s' %s", what,
                                  aname(ds, i, a, sizeof a), sa, v->name, sb);
                goto fail;
            }
            int ok = (is_int_dtype(t->dtype) && (is_int_dtype(v->dtype) || is_float_dtype(v->dtype))) ||
                     (is_float_dtype(t->dtype) && is_float_dtype(v->dtype));
            if (!ok) {
                s = mge_error_set(err, is_float_dtype(t->dtype) && is_int_dtype(v->dtype) ? MGE_ERR_SHAPE
                                                                                           : MGE_ERR_UNSUPPORTED,
                                  "%s: dataset array %s is %s: cannot convert %s data to input '%s' %s%s", what,
                                  aname(ds, i, a, sizeof a), sa, mge_dtype_name(t->dtype), v->name, sb,
                                  is_float_dtype(t->dtype) ? " (float data into an integer input)" : "");
                goto fail;
            }
            cj += t->dims[0];
        }
        if (count >= 0 && cj != count) {
            s = mge_error_set(err, MGE_ERR_SHAPE, "%s: arrays with different sample counts: input '%s' gets %lld, "
                              "input '%s' gets %lld", what, g->values[inputs[jc]].name, (long long)count, v->name,
                              (long long)cj);
            goto fail;
        }
        count = cj;
        jc = j;
    }
    if (count == 0) {
        s = mge_error_set(err, MGE_ERR_FORMAT, "%s: empty dataset (0 samples)", what);
        goto fail;
    }
    for (int j = 0; j < nin; j++) {
        const mge_value *v = &g->values[inputs[j]];
        int64_t dims[MGE_MAX_DIMS];
        memcpy(dims, v->dims, sizeof dims);
        dims[0] = count;
        for (int i = 1; i < v->ndim; i++)
            if (dims[i] < 0) {
                /* the records of a stream must agree where the model has a symbol */
                for (int k = 1; k < per; k++)
                    if (ds->t[src[j * per + k]].dims[i] != ds->t[src[j * per]].dims[i]) {
                        s = mge_error_set(err, MGE_ERR_SHAPE, "%s: input '%s': records %d and %d differ in dimension "
                                          "%d (%lld and %lld): a dataset holds one size per array", what, v->name,
                                          src[j * per], src[j * per + k], i, (long long)ds->t[src[j * per]].dims[i],
                                          (long long)ds->t[src[j * per + k]].dims[i]);
                        goto fail;
                    }
                dims[i] = ds->t[src[j * per]].dims[i];
            }
        if (!(nn[j] = mge_strdup(v->name))) {
            s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
            goto fail;
        }
        const mge_tensor *t0 = &ds->t[src[j * per]];
        if (per == 1 && t0->dtype == v->dtype && !(t0->flags & MGE_TENSOR_OWNED) && t0->data) {
            /* borrowed from the mapped file and already the input's dtype:
             * keep borrowing, so only the rows a batch gathers are read */
            if ((s = mge_tensor_init(&nt[j], v->dtype, v->ndim, dims, err))) {
                mge_error_prefix(err, "%s: input '%s'", what, v->name);
                goto fail;
            }
            nt[j].data = t0->data;
            continue;
        }
        if ((s = mge_tensor_alloc(&nt[j], v->dtype, v->ndim, dims, err))) {
            mge_error_prefix(err, "%s: input '%s'", what, v->name);
            goto fail;
        }
        size_t off = 0, es = mge_dtype_size(v->dtype);
        for (int k = 0; k < per; k++) {
            int i = src[j * per + k];
            const mge_tensor *t = &ds->t[i];
            int64_t bad;
            convert(t, v->dtype, (char *)nt[j].data + off, o, &bad);
            if (bad) {
                char vb[32];
                int64_t bv = get_i(t->data, t->dtype, bad - 1);
                if (t->dtype == MGE_U64)
                    snprintf(vb, sizeof vb, "%llu", (unsigned long long)(uint64_t)bv);
                else
                    snprintf(vb, sizeof vb, "%lld", (long long)bv);
                s = mge_error_set(err, MGE_ERR_SHAPE, "%s: dataset array %s: value %s (element %lld) does not fit "
                                  "input '%s' %s", what, aname(ds, i, a, sizeof a), vb, (long long)(bad - 1), v->name,
                                  mge_dtype_name(v->dtype));
                goto fail;
            }
            off += (size_t)mge_tensor_numel(t) * es;
        }
    }
    if ((s = bind_lengths(ds, g, nin, inputs, per, nt, count, &nn, &lens, &trim, err)))
        goto fail;
    /* commit */
    for (int i = 0; i < ds->n; i++) {
        if (ds->names)
            free(ds->names[i]);
        mge_tensor_free(&ds->t[i]);
    }
    free(ds->names);
    free(ds->t);
    ds->names = nn;
    ds->t = nt;
    ds->n = nin + (lens != NULL);
    ds->lengths = lens != NULL;
    ds->trim = trim;
    ds->count = count;
    ds->positional = 0;
    ds->stream = 0;
    free(src);
    return MGE_OK;
fail:
    for (int j = 0; nt && j <= nin; j++)
        mge_tensor_free(&nt[j]);
    for (int j = 0; nn && j <= nin; j++)
        free(nn[j]);
    free(nt);
    free(nn);
    free(src);
    return s;
}

/* ---------------------------------------------------------------- split, labels */

mge_status mge_dataset_split(mge_dataset *ds, double frac, uint64_t seed, mge_dataset *val, mge_error *err)
{
    memset(val, 0, sizeof *val);
    const char *what = ds->source ? ds->source : "dataset";
    if (ds->stream || ds->count < 0)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: bind a tensor stream before splitting it", what);
    if (!(frac > 0 && frac < 1))
        return mge_error_set(err, MGE_ERR_INVALID, "validation fraction %g: must be between 0 and 1", frac);
    int64_t n = ds->count;
    int64_t nval = (int64_t)llround(frac * (double)n);
    if (nval < 1)
        nval = 1;
    if (nval > n - 1)
        nval = n - 1;
    if (n < 2)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: %lld sample%s cannot be split", what, (long long)n,
                             n == 1 ? "" : "s");
    int64_t *perm = malloc(sizeof *perm * (size_t)n);
    char *inval = calloc((size_t)n, 1);
    mge_tensor *tt = calloc((size_t)ds->n, sizeof *tt), *vt = calloc((size_t)ds->n, sizeof *vt);
    char **vn = calloc((size_t)ds->n, sizeof *vn);
    mge_status s = MGE_OK;
    if (!perm || !inval || !tt || !vt || !vn) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto done;
    }
    mge_rng r;
    mge_rng_seed(&r, seed ^ 0x5bd1e9955bd1e995ull); /* a different stream from the loader's epochs */
    for (int64_t i = 0; i < n; i++)
        perm[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(((unsigned __int128)mge_rng_next(&r) * (uint64_t)(i + 1)) >> 64);
        int64_t x = perm[i];
        perm[i] = perm[j];
        perm[j] = x;
    }
    for (int64_t i = n - nval; i < n; i++)
        inval[perm[i]] = 1;
    for (int a = 0; a < ds->n; a++) {
        const mge_tensor *t = &ds->t[a];
        int64_t dims[MGE_MAX_DIMS];
        memcpy(dims, t->dims, sizeof dims);
        dims[0] = n - nval;
        if ((s = mge_tensor_alloc(&tt[a], t->dtype, t->ndim, dims, err)))
            goto done;
        dims[0] = nval;
        if ((s = mge_tensor_alloc(&vt[a], t->dtype, t->ndim, dims, err)))
            goto done;
        if (ds->names && ds->names[a] && !(vn[a] = mge_strdup(ds->names[a]))) {
            s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
            goto done;
        }
        size_t row = t->nbytes / (size_t)n;
        char *pt = tt[a].data, *pv = vt[a].data;
        for (int64_t i = 0; i < n; i++) {
            char **dst = inval[i] ? &pv : &pt;
            memcpy(*dst, (const char *)t->data + (size_t)i * row, row);
            *dst += row;
        }
    }
    mge_buf src = {0};
    mge_buf_printf(&src, "%s (validation split)", what);
    mge_buf_put(&src, "", 1);
    if (src.failed) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto done;
    }
    val->source = src.p;
    val->n = ds->n;
    val->names = vn;
    val->t = vt;
    val->count = nval;
    val->positional = ds->positional;
    val->lengths = ds->lengths;
    val->trim = ds->trim;
    vn = NULL;
    vt = NULL;
    for (int a = 0; a < ds->n; a++) {
        mge_tensor_free(&ds->t[a]);
        ds->t[a] = tt[a];
    }
    ds->count = n - nval;
done:
    for (int a = 0; a < ds->n; a++) {
        if (s && tt)
            mge_tensor_free(&tt[a]);
        if (vt)
            mge_tensor_free(&vt[a]);
        if (vn)
            free(vn[a]);
    }
    free(tt);
    free(vt);
    free(vn);
    free(perm);
    free(inval);
    return s;
}

mge_status mge_dataset_label_range(const mge_dataset *ds, int i, int64_t *min, int64_t *max)
{
    if (!ds || i < 0 || i >= ds->n || !is_int_dtype(ds->t[i].dtype))
        return MGE_ERR_INVALID;
    int64_t n = mge_tensor_numel(&ds->t[i]);
    if (n <= 0)
        return MGE_ERR_INVALID;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (int64_t k = 0; k < n; k++) {
        int64_t v = get_i(ds->t[i].data, ds->t[i].dtype, k);
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    *min = lo;
    *max = hi;
    return MGE_OK;
}
