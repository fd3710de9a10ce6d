/* npy.c — NPY records (numpy format 1.0, 2.0 and 3.0), one tensor each.
 *
 * A record is: "\x93NUMPY", major, minor, a little-endian header length (u16
 * in 1.0, u32 in 2.0/3.0), then a Python dict literal with 'descr',
 * 'fortran_order' and 'shape', padded with spaces and a newline so the data
 * starts on a 64-byte boundary, then the raw data. Records are read back to
 * back from a stream, so the reader never reads past the end of one.
 *
 * Dtypes: f32 '<f4', f16 '<f2', f64 '<f8', i8 '|i1', u8 '|u1', i16 '<i2',
 * u16 '<u2', i32 '<i4', u32 '<u4', i64 '<i8', u64 '<u8', bool '|b1'. numpy has no bfloat16, so bf16 tensors are written as float32;
 * qs8 is written as '|i1' and qs32 as '<i4' (the scales do not travel).
 * Big-endian and Fortran-order records are converted to native C order.
 *
 * The header comes from whoever handed us the file: every token is checked,
 * the header length is bounded, and the data size goes through
 * mge_shape_numel. On a pipe the data buffer grows only as bytes arrive, so
 * a header that claims 100 GB on a short stream fails without allocating it. */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const unsigned char npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

/* Headers our dtypes need are a few hundred bytes; numpy itself refuses
 * headers over 10,000 bytes by default. This bound keeps hostile 2.0
 * headers (u32 length) from asking for gigabytes. */
#define NPY_MAX_HEADER (1u << 20)
/* First allocation for data of unknown availability (pipes). */
#define NPY_FIRST_CHUNK ((size_t)1 << 20)

typedef struct npy_hdr {
    mge_dtype dtype;
    int swap;          /* record byte order differs from the host's */
    int fortran;
    int ndim;
    int64_t dims[MGE_MAX_DIMS];
    size_t nbytes;
} npy_hdr;

static int host_is_little(void)
{
    const uint16_t one = 1;
    unsigned char c;
    memcpy(&c, &one, 1);
    return c == 1;
}

/* ---------------------------------------------------------------- header parsing */

typedef struct lex {
    const char *p, *end;
} lex;

static void skip_ws(lex *x)
{
    while (x->p < x->end && (*x->p == ' ' || *x->p == '\t' || *x->p == '\n' || *x->p == '\r'))
        x->p++;
}

/* Reads a quoted string (no escapes) into out[0..cap). */
static mge_status lex_string(lex *x, char *out, size_t cap, const char *what, mge_error *err)
{
    skip_ws(x);
    if (x->p >= x->end || (*x->p != '\'' && *x->p != '"'))
        return mge_error_set(err, MGE_ERR_FORMAT, "NPY header: expected a quoted %s", what);
    char q = *x->p++;
    size_t n = 0;
    while (x->p < x->end && *x->p != q) {
        unsigned char c = (unsigned char)*x->p;
        if (c == '\\' || c < 0x20 || c >= 0x7f)
            return mge_error_set(err, MGE_ERR_FORMAT, "NPY header: unexpected character 0x%02x in %s", c, what);
        if (n + 1 >= cap)
            return mge_error_set(err, MGE_ERR_FORMAT, "NPY header: %s too long", what);
        out[n++] = (char)c;
        x->p++;
    }
    if (x->p >= x->end)
        return mge_error_set(err, MGE_ERR_FORMAT, "NPY header: unterminated %s", what);
    x->p++;
    out[n] = 0;
    return MGE_OK;
}

static int lex_char(lex *x, char c)
{
    skip_ws(x);
    if (x->p < x->end && *x->p == c) {
        x->p++;
        return 1;
    }
    return 0;
}

static int lex_word(lex *x, const char *w)
{
    skip_ws(x);
    size_t n = strlen(w);
    if ((size_t)(x->end - x->p) >= n && memcmp(x->p, w, n) == 0) {
        x->p += n;
        return 1;
    }
    return 0;
}

/* A non-negative decimal dimension; Python 2 long suffix 'L' accepted. */
static mge_status lex_dim(lex *x, int64_t *out, mge_error *err)
{
    skip_ws(x);
    if (x->p < x->end && *x->p == '-')
        return mge_error_set(err, MGE_ERR_FORMAT, "NPY header: negative dimension in 'shape'");
    if (x->p >= x->end || *x->p < '0' || *x->p > '9')
        return mge_error_set(err, MGE_ERR_FORMAT, "NPY header: expected a dimension in 'shape'");
    int64_t v = 0;
    while (x->p < x->end && *x->p >= '0' && *x->p <= '9') {
        if (v > (INT64_MAX - 9) / 10)
            return mge_error_set(err, MGE_ERR_SHAPE, "NPY header: dimension too large");
        v = v * 10 + (*x->p - '0');
        x->p++;
    }
    if (x->p < x->end && *x->p == 'L')
        x->p++;
    *out = v;
    return MGE_OK;
}

static mge_status parse_shape(lex *x, npy_hdr *h, mge_error *err)
{
    if (!lex_char(x, '('))
        return mge_error_set(err, MGE_ERR_FORMAT, "NPY header: 'shape' is not a tuple");
    h->ndim = 0;
    if (lex_char(x, ')'))
        return MGE_OK;
    for (;;) {
        int64_t d = 0;
        mge_status s = lex_dim(x, &d, err);
        if (s)
            return s;
        if (h->ndim == MGE_MAX_DIMS)
            return mge_error_set(err, MGE_ERR_UNSUPPORTED, "NPY header: more than %d dimensions", MGE_MAX_DIMS);
        h->dims[h->ndim++] = d;
        if (lex_char(x, ')'))
            return MGE_OK;
        if (!lex_char(x, ','))
            return mge_error_set(err, MGE_ERR_FORMAT, "NPY header: expected ',' or ')' in 'shape'");
        if (lex_char(x, ')'))
            return MGE_OK;
    }
}

/* numpy's name for a descr we refuse, and what to save instead. */
static void descr_hint(char kind, int size, const char **name, const char **hint)
{
    static const struct {
        char kind;
        int size;
        const char *name, *hint;
    } tab[] = {
        {'f', 16, "longdouble", ": save float64"}, {'f', 12, "longdouble", ": save float64"},
        {'c', 8, "complex64", ""},                 {'c', 16, "complex128", ""},
    };
    *name = NULL;
    *hint = "";
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (tab[i].kind == kind && tab[i].size == size) {
            *name = tab[i].name;
            *hint = tab[i].hint;
        }
}

static mge_status parse_descr(const char *d, npy_hdr *h, mge_error *err)
{
    const char *p = d;
    char order = '=';
    if (*p == '<' || *p == '>' || *p == '=' || *p == '|')
        order = *p++;
    char kind = *p ? *p++ : 0;
    int size = 0, digits = 0;
    while (*p >= '0' && *p <= '9' && digits < 4) {
        size = size * 10 + (*p++ - '0');
        digits++;
    }
    int ok = *p == 0 && digits > 0;
    mge_dtype dt = MGE_NDTYPES;
    if (ok && kind == 'f' && size == 4)
        dt = MGE_F32;
    else if (ok && kind == 'f' && size == 2)
        dt = MGE_F16;
    else if (ok && kind == 'i' && size == 1)
        dt = MGE_I8;
    else if (ok && kind == 'u' && size == 1)
        dt = MGE_U8;
    else if (ok && kind == 'b' && size == 1)
        dt = MGE_BOOL;
    else if (ok && kind == 'i' && size == 4)
        dt = MGE_I32;
    else if (ok && kind == 'i' && size == 8)
        dt = MGE_I64;
    else if (ok && kind == 'f' && size == 8)
        dt = MGE_F64;
    else if (ok && kind == 'i' && size == 2)
        dt = MGE_I16;
    else if (ok && kind == 'u' && size == 2)
        dt = MGE_U16;
    else if (ok && kind == 'u' && size == 4)
        dt = MGE_U32;
    else if (ok && kind == 'u' && size == 8)
        dt = MGE_U64;
    else if (strcmp(d, "?") == 0 || strcmp(d, "|?") == 0)
        dt = MGE_BOOL;
    if (dt == MGE_NDTYPES) {
        const char *name, *hint;
        descr_hint(kind, ok ? size : 0, &name, &hint);
        if (name)
            return mge_error_set(err, MGE_ERR_UNSUPPORTED, "dtype %s ('%s') is not supported%s", name, d, hint);
        return mge_error_set(err, MGE_ERR_UNSUPPORTED,
                             "dtype '%s' is not supported (float32, float16, float64, int8, uint8, int16, uint16, "
                             "int32, uint32, int64, uint64 and bool are)",
                             d);
    }
    size_t isz = mge_dtype_size(dt);
    if (order == '|' && isz > 1)
        return mge_error_set(err, MGE_ERR_FORMAT, "NPY header: dtype '%s' needs a byte order", d);
    h->dtype = dt;
    h->swap = isz > 1 && ((order == '>' && host_is_little()) || (order == '<' && !host_is_little()));
    return MGE_OK;
}

/* Parses the dict literal in hdr[0..n). */
static mge_status parse_header(const char *hdr, size_t n, npy_hdr *h, mge_error *err)
{
    lex x = {hdr, hdr + n};
    int have_descr = 0, have_fortran = 0, have_shape = 0;
    char descr[32];
    mge_status s;
    memset(h, 0, sizeof *h);
    if (!lex_char(&x, '{'))
        return mge_error_set(err, MGE_ERR_FORMAT, "NPY header: not a dictionary");
    for (;;) {
        if (lex_char(&x, '}'))
            break;
        char key[32];
        if ((s = lex_string(&x, key, sizeof key, "key", err)))
            return s;
        if (!lex_char(&x, ':'))
            return mge_error_set(err, MGE_ERR_FORMAT, "NPY header: expected ':' after '%s'", key);
        if (strcmp(key, "descr") == 0 && !have_descr) {
            skip_ws(&x);
            if (x.p < x.end && *x.p == '[')
                return mge_error_set(err, MGE_ERR_UNSUPPORTED, "structured dtypes are not supported");
            if ((s = lex_string(&x, descr, sizeof descr, "'descr'", err)))
                return s;
            have_descr = 1;
        } else if (strcmp(key, "fortran_order") == 0 && !have_fortran) {
            if (lex_word(&x, "True"))
                h->fortran = 1;
            else if (lex_word(&x, "False"))
                h->fortran = 0;
            else
                return mge_error_set(err, MGE_ERR_FORMAT, "NPY header: 'fortran_order' is not True or False");
            have_fortran = 1;
        } else if (strcmp(key, "shape") == 0 && !have_shape) {
            if ((s = parse_shape(&x, h, err)))
                return s;
            have_shape = 1;
        } else {
            return mge_error_set(err, MGE_ERR_FORMAT, "NPY header: unexpected or repeated key '%s'", key);
        }
        if (lex_char(&x, '}'))
            break;
        if (!lex_char(&x, ','))
            return mge_error_set(err, MGE_ERR_FORMAT, "NPY header: expected ',' or '}'");
    }
    skip_ws(&x);
    if (x.p != x.end)
        return mge_error_set(err, MGE_ERR_FORMAT, "NPY header: unexpected bytes after the dictionary");
    if (!have_descr || !have_fortran || !have_shape)
        return mge_error_set(err, MGE_ERR_FORMAT, "NPY header: missing '%s'",
                             !have_descr ? "descr" : !have_fortran ? "fortran_order" : "shape");
    if ((s = parse_descr(descr, h, err)))
        return s;
    if ((s = mge_shape_numel(h->ndim, h->dims, h->dtype, NULL, &h->nbytes, err))) {
        mge_error_prefix(err, "NPY header");
        return s;
    }
    return MGE_OK;
}

/* Bytes that are not NPY: named when they are a known kind of file (a
 * model or an image fed as input, say). */
static mge_status bad_magic(const unsigned char *p, size_t n, mge_error *err)
{
    mge_file_kind k = mge_sniff_kind(p, n);
    if (k == MGE_KIND_UNKNOWN || k == MGE_KIND_EMPTY)
        return mge_error_set(err, MGE_ERR_FORMAT, "not an NPY record (bad magic)");
    return mge_error_set(err, MGE_ERR_FORMAT, "not an NPY record (bad magic): this is %s%s", mge_sniff_name(k),
                         k == MGE_KIND_MGE ? " (the model is the tool's argument; its inputs come as NPY records)"
                         : k == MGE_KIND_PNG || k == MGE_KIND_JPEG ? " (convert images to NPY with numpy: np.save)"
                                                                  : "");
}

/* Checks the fixed preamble p[0..8): magic and version; *lenbytes is the
 * width of the header length field that follows. */
static mge_status parse_preamble(const unsigned char *p, int *lenbytes, mge_error *err)
{
    if (memcmp(p, npy_magic, 6) != 0)
        return mge_error_set(err, MGE_ERR_FORMAT, "not an NPY record (bad magic)");
    if (p[6] < 1 || p[6] > 3 || p[7] != 0)
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "NPY format version %d.%d is not supported (1.0 to 3.0 are)",
                             p[6], p[7]);
    *lenbytes = p[6] == 1 ? 2 : 4;
    return MGE_OK;
}

static size_t get_len(const unsigned char *p, int lenbytes)
{
    size_t v = (size_t)p[0] | (size_t)p[1] << 8;
    if (lenbytes == 4)
        v |= (size_t)p[2] << 16 | (size_t)p[3] << 24;
    return v;
}

/* The first n bytes of a record that ended early: say whether it looked like NPY. */
static mge_status short_preamble(const unsigned char *p, size_t n, mge_error *err)
{
    size_t k = n < 6 ? n : 6;
    if (memcmp(p, npy_magic, k) != 0)
        return mge_error_set(err, MGE_ERR_FORMAT, "not an NPY record (bad magic)");
    return mge_error_set(err, MGE_ERR_FORMAT, "stream ends inside an NPY header (%zu bytes)", n);
}

/* ---------------------------------------------------------------- conversion */

static void swap_bytes(unsigned char *p, size_t nbytes, size_t isz)
{
    for (size_t i = 0; i + isz <= nbytes; i += isz)
        for (size_t a = 0, b = isz - 1; a < b; a++, b--) {
            unsigned char c = p[i + a];
            p[i + a] = p[i + b];
            p[i + b] = c;
        }
}

/* Column-major src to row-major dst: walk dst in order while tracking the
 * source offset with an odometer over the dims. */
static void fortran_to_c(const unsigned char *src, unsigned char *dst, int ndim, const int64_t *dims, size_t isz)
{
    int64_t numel = 1, fstride[MGE_MAX_DIMS], idx[MGE_MAX_DIMS] = {0};
    for (int k = 0; k < ndim; k++) {
        fstride[k] = numel;
        numel *= dims[k];
    }
    int64_t off = 0;
    for (int64_t i = 0; i < numel; i++) {
        memcpy(dst + (size_t)i * isz, src + (size_t)off * isz, isz);
        for (int k = ndim - 1; k >= 0; k--) {
            if (++idx[k] < dims[k]) {
                off += fstride[k];
                break;
            }
            off -= fstride[k] * (dims[k] - 1);
            idx[k] = 0;
        }
    }
}

/* Turns raw record data (owned, aligned, h->nbytes long) into the tensor. */
static mge_status finish(const npy_hdr *h, unsigned char *data, mge_tensor *t, mge_error *err)
{
    size_t isz = mge_dtype_size(h->dtype);
    if (h->swap)
        swap_bytes(data, h->nbytes, isz);
    if (h->dtype == MGE_BOOL)
        for (size_t i = 0; i < h->nbytes; i++)
            data[i] = data[i] != 0;
    if (h->fortran && h->ndim > 1 && h->nbytes > 0) {
        unsigned char *c = mge_aligned_alloc(h->nbytes);
        if (!c) {
            mge_aligned_free(data);
            return mge_error_set(err, MGE_ERR_NOMEM, "cannot allocate %zu bytes", h->nbytes);
        }
        fortran_to_c(data, c, h->ndim, h->dims, isz);
        mge_aligned_free(data);
        data = c;
    }
    mge_status s = mge_tensor_init(t, h->dtype, h->ndim, h->dims, err);
    if (s) {
        mge_aligned_free(data);
        return s;
    }
    t->data = data;
    t->flags |= MGE_TENSOR_OWNED;
    return MGE_OK;
}

/* ---------------------------------------------------------------- reading */

/* Readers leave t empty on failure, so mge_tensor_free on it is always safe. */
static void clear(mge_tensor *t)
{
    memset(t, 0, sizeof *t);
    t->q.axis = -1;
}

static mge_status read_mem(const void *buf, size_t n, size_t *used, mge_tensor *t, int borrow, mge_error *err);

mge_status mge_npy_read_mem(const void *buf, size_t n, size_t *used, mge_tensor *t, mge_error *err)
{
    return read_mem(buf, n, used, t, 0, err);
}

mge_status mge_npy_view_mem(const void *buf, size_t n, size_t *used, mge_tensor *t, mge_error *err)
{
    return read_mem(buf, n, used, t, 1, err);
}

static mge_status read_mem(const void *buf, size_t n, size_t *used, mge_tensor *t, int borrow, mge_error *err)
{
    const unsigned char *p = buf;
    int lb;
    mge_status s;
    clear(t);
    if (used)
        *used = 0;
    if (n == 0)
        return mge_error_set(err, MGE_ERR_EOF, "end of stream");
    if (memcmp(p, npy_magic, n < 6 ? n : 6) != 0)
        return bad_magic(p, n < MGE_SNIFF_BYTES ? n : MGE_SNIFF_BYTES, err);
    if (n < 8)
        return short_preamble(p, n, err);
    if ((s = parse_preamble(p, &lb, err)))
        return s;
    if (n < 8 + (size_t)lb)
        return short_preamble(p, n, err);
    size_t hlen = get_len(p + 8, lb), off = 8 + (size_t)lb;
    if (hlen > NPY_MAX_HEADER)
        return mge_error_set(err, MGE_ERR_FORMAT, "NPY header of %zu bytes is too long", hlen);
    if (n - off < hlen)
        return mge_error_set(err, MGE_ERR_FORMAT, "stream ends inside an NPY header: got %zu of %zu bytes",
                             n - off, hlen);
    npy_hdr h;
    if ((s = parse_header((const char *)p + off, hlen, &h, err)))
        return s;
    off += hlen;
    if (n - off < h.nbytes)
        return mge_error_set(err, MGE_ERR_FORMAT, "stream ends inside a record: got %zu of %zu data bytes",
                             n - off, h.nbytes);
    size_t isz = mge_dtype_size(h.dtype);
    if (borrow && !h.swap && h.dtype != MGE_BOOL && !(h.fortran && h.ndim > 1) && isz &&
        (uintptr_t)(p + off) % isz == 0) {
        /* the bytes as they are in buf: nothing is read until used */
        if ((s = mge_tensor_init(t, h.dtype, h.ndim, h.dims, err)))
            return s;
        t->data = (void *)(p + off);
        if (used)
            *used = off + h.nbytes;
        return MGE_OK;
    }
    unsigned char *data = mge_aligned_alloc(h.nbytes);
    if (!data)
        return mge_error_set(err, MGE_ERR_NOMEM, "cannot allocate %zu bytes", h.nbytes);
    if (h.nbytes)
        memcpy(data, p + off, h.nbytes);
    if ((s = finish(&h, data, t, err)))
        return s;
    if (used)
        *used = off + h.nbytes;
    return MGE_OK;
}

static mge_status read_fail(FILE *f, mge_error *err, const char *what, size_t got, size_t want)
{
    if (ferror(f))
        return mge_error_set(err, MGE_ERR_IO, "read error: %s", strerror(errno));
    return mge_error_set(err, MGE_ERR_FORMAT, "stream ends inside %s: got %zu of %zu bytes", what, got, want);
}

/* Bytes left in f when it is a regular file, else -1. */
static int64_t bytes_left(FILE *f)
{
    struct stat st;
    int fd = fileno(f);
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        return -1;
    off_t pos = ftello(f);
    if (pos < 0 || pos > st.st_size)
        return -1;
    return (int64_t)(st.st_size - pos);
}

/* Reads h->nbytes of data, growing the buffer as bytes actually arrive. */
static mge_status read_data(FILE *f, const npy_hdr *h, unsigned char **out, mge_error *err)
{
    size_t want = h->nbytes, cap = want < NPY_FIRST_CHUNK ? want : NPY_FIRST_CHUNK, got = 0;
    int64_t left = bytes_left(f);
    if (left >= 0 && (uint64_t)left >= want)
        cap = want; /* a regular file that holds it all: one allocation */
    unsigned char *data = mge_aligned_alloc(cap);
    if (!data)
        return mge_error_set(err, MGE_ERR_NOMEM, "cannot allocate %zu bytes", cap);
    while (got < want) {
        if (got == cap) {
            size_t ncap = cap > want / 2 ? want : cap * 2;
            unsigned char *nd = mge_aligned_alloc(ncap);
            if (!nd) {
                mge_aligned_free(data);
                return mge_error_set(err, MGE_ERR_NOMEM, "cannot allocate %zu bytes", ncap);
            }
            memcpy(nd, data, got);
            mge_aligned_free(data);
            data = nd;
            cap = ncap;
        }
        got += fread(data + got, 1, cap - got, f);
        if (got < cap) { /* fread stops short only at end of file or on error */
            mge_aligned_free(data);
            if (ferror(f))
                return mge_error_set(err, MGE_ERR_IO, "read error: %s", strerror(errno));
            return mge_error_set(err, MGE_ERR_FORMAT, "stream ends inside a record: got %zu of %zu data bytes",
                                 got, want);
        }
    }
    *out = data;
    return MGE_OK;
}

mge_status mge_npy_read(FILE *f, mge_tensor *t, mge_error *err)
{
    unsigned char pre[12];
    clear(t);
    int c = fgetc(f);
    if (c == EOF) {
        if (ferror(f))
            return mge_error_set(err, MGE_ERR_IO, "read error: %s", strerror(errno));
        return mge_error_set(err, MGE_ERR_EOF, "end of stream");
    }
    pre[0] = (unsigned char)c;
    /* The magic first, so a stray text file is called that, not "truncated". */
    size_t got = 1 + fread(pre + 1, 1, 5, f);
    if (got < 6 || memcmp(pre, npy_magic, 6) != 0) {
        if (memcmp(pre, npy_magic, got) == 0)
            return read_fail(f, err, "an NPY header", got, 8);
        if (got == 6) /* a few more bytes name more kinds (PNG's signature is 8) */
            got += fread(pre + 6, 1, sizeof pre - 6, f);
        return bad_magic(pre, got, err);
    }
    got += fread(pre + 6, 1, 2, f);
    if (got < 8)
        return read_fail(f, err, "an NPY header", got, 8);
    int lb;
    mge_status s = parse_preamble(pre, &lb, err);
    if (s)
        return s;
    if ((got += fread(pre + 8, 1, (size_t)lb, f)) < 8 + (size_t)lb)
        return read_fail(f, err, "an NPY header", got, 8 + (size_t)lb);
    size_t hlen = get_len(pre + 8, lb);
    if (hlen > NPY_MAX_HEADER)
        return mge_error_set(err, MGE_ERR_FORMAT, "NPY header of %zu bytes is too long", hlen);
    char *hdr = malloc(hlen + 1);
    if (!hdr)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    size_t hk = fread(hdr, 1, hlen, f);
    if (hk < hlen) {
        free(hdr);
        return read_fail(f, err, "an NPY header", hk, hlen);
    }
    npy_hdr h;
    s = parse_header(hdr, hlen, &h, err);
    free(hdr);
    if (s)
        return s;
    unsigned char *data = NULL;
    if ((s = read_data(f, &h, &data, err)))
        return s;
    return finish(&h, data, t, err);
}

int mge_npy_is_npy(const void *buf, size_t n)
{
    const unsigned char *p = buf;
    if (n < 6 || memcmp(p, npy_magic, 6) != 0)
        return 0;
    return n < 8 || (p[6] >= 1 && p[6] <= 3 && p[7] == 0);
}

/* ---------------------------------------------------------------- writing */

/* The dtype a tensor is written as; bf16 goes out as float32. */
static mge_status write_descr(const mge_tensor *t, char *descr, mge_dtype *as, mge_error *err)
{
    char e = host_is_little() ? '<' : '>';
    const char *code;
    mge_dtype d = t->dtype;
    switch (t->dtype) {
    case MGE_F32: code = "f4"; break;
    case MGE_BF16: code = "f4"; d = MGE_F32; break;
    case MGE_F16: code = "f2"; break;
    case MGE_I8: case MGE_QS8: code = "i1"; break;
    case MGE_U8: code = "u1"; break;
    case MGE_BOOL: code = "b1"; break;
    case MGE_I32: case MGE_QS32: code = "i4"; break;
    case MGE_I64: code = "i8"; break;
    case MGE_F64: code = "f8"; break;
    case MGE_I16: code = "i2"; break;
    case MGE_U16: code = "u2"; break;
    case MGE_U32: code = "u4"; break;
    case MGE_U64: code = "u8"; break;
    default:
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "cannot write dtype %d as NPY", (int)t->dtype);
    }
    snprintf(descr, 8, "%c%s", mge_dtype_size(d) == 1 ? '|' : e, code);
    *as = d;
    return MGE_OK;
}

/* Builds the preamble and padded header into out[0..*len). */
static mge_status build_header(const mge_tensor *t, char *out, size_t cap, size_t *len, mge_dtype *as,
                               size_t *nbytes, mge_error *err)
{
    mge_status s;
    char descr[8], dict[512];
    if (t->layout != MGE_LAYOUT_DEFAULT)
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "cannot write a tensor in a blocked layout as NPY: "
                                                       "convert it to the default layout first");
    if ((s = write_descr(t, descr, as, err)))
        return s;
    size_t src_bytes;
    if ((s = mge_shape_numel(t->ndim, t->dims, t->dtype, NULL, &src_bytes, err)))
        return s;
    if (src_bytes && (!t->data || (t->nbytes && t->nbytes < src_bytes)))
        return mge_error_set(err, MGE_ERR_INVALID, "tensor %s", t->data ? "holds fewer bytes than its shape needs"
                                                                         : "has no data");
    mge_shape_numel(t->ndim, t->dims, *as, NULL, nbytes, NULL);
    int k = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int i = 0; i < t->ndim; i++)
        k += snprintf(dict + k, sizeof dict - (size_t)k, "%s%lld", i ? ", " : "", (long long)t->dims[i]);
    k += snprintf(dict + k, sizeof dict - (size_t)k, "%s), }", t->ndim == 1 ? "," : "");
    /* version 1.0 when the padded header fits a u16 length, else 2.0 */
    size_t pre = 10, total = (pre + (size_t)k + 1 + 63) / 64 * 64;
    if (total - pre > 65535) {
        pre = 12;
        total = (pre + (size_t)k + 1 + 63) / 64 * 64;
    }
    if (total > cap)
        return mge_error_set(err, MGE_ERR_INVALID, "NPY header too long");
    size_t hlen = total - pre;
    memcpy(out, npy_magic, 6);
    out[6] = pre == 10 ? 1 : 2;
    out[7] = 0;
    out[8] = (char)(hlen & 0xff);
    out[9] = (char)(hlen >> 8 & 0xff);
    if (pre == 12) {
        out[10] = (char)(hlen >> 16 & 0xff);
        out[11] = (char)(hlen >> 24 & 0xff);
    }
    memcpy(out + pre, dict, (size_t)k);
    memset(out + pre + (size_t)k, ' ', total - pre - (size_t)k - 1);
    out[total - 1] = '\n';
    *len = total;
    return MGE_OK;
}

/* Where a record goes: a FILE or an mge_buf. Returns 0 on failure. */
typedef int (*npy_sink)(void *to, const void *p, size_t n);

static int sink_file(void *to, const void *p, size_t n)
{
    return n == 0 || fwrite(p, 1, n, (FILE *)to) == n;
}

static int sink_buf(void *to, const void *p, size_t n)
{
    return mge_buf_put((mge_buf *)to, p, n);
}

/* Header then data; bf16 (which NPY lacks) goes out as f32 in pieces
 * through a small buffer. *ok = 0 when the sink fails. */
#define CONV_CHUNK 1024
static mge_status write_record(npy_sink sink, void *to, const mge_tensor *t, int *ok, mge_error *err)
{
    char hdr[1024];
    mge_dtype as = t->dtype;
    size_t nbytes = 0, hl = 0;
    *ok = 1;
    mge_status s = build_header(t, hdr, sizeof hdr, &hl, &as, &nbytes, err);
    if (s)
        return s;
    *ok = sink(to, hdr, hl);
    if (*ok && as == t->dtype) {
        *ok = sink(to, t->data, nbytes);
    } else if (*ok) {
        float tmp[CONV_CHUNK];
        const uint16_t *src = t->data;
        size_t n = nbytes / 4;
        for (size_t i = 0; *ok && i < n; i += CONV_CHUNK) {
            size_t m = n - i < CONV_CHUNK ? n - i : CONV_CHUNK;
            for (size_t j = 0; j < m; j++)
                tmp[j] = mge_bf16_to_f32(src[i + j]);
            *ok = sink(to, tmp, m * 4);
        }
    }
    return MGE_OK;
}

mge_status mge_npy_write_buf(mge_buf *b, const mge_tensor *t, mge_error *err)
{
    int ok;
    mge_status s = write_record(sink_buf, b, t, &ok, err);
    if (!s && (!ok || b->failed))
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    return s;
}

mge_status mge_npy_write(FILE *f, const mge_tensor *t, mge_error *err)
{
    int ok;
    mge_status s = write_record(sink_file, f, t, &ok, err);
    if (!s && !ok)
        return mge_error_set(err, MGE_ERR_IO, "write error: %s", strerror(errno));
    return s;
}
