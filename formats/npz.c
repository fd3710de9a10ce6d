/* npz.c — named tensors as .npz: a zip of NAME.npy entries (np.savez and
 * np.savez_compressed; stored and deflated entries) through libarchive.
 *
 * Files and memory are read with the seekable zip reader (the central
 * directory is authoritative); stdin and other non-seekable inputs with the
 * streaming one, which walks the local headers. Entry names lose their .npy
 * suffix; a name that appears twice is an error, as is an entry that is not
 * .npy, and so are names that climb out ("..", absolute, "C:") and entries
 * that are links, devices or FIFOs; the entries' bytes are bounded
 * (unpack.h). The writer stores entries uncompressed (like np.savez), in the
 * list's order, with a fixed timestamp, so the same list gives the same bytes. */
#include "internal.h"
#include "unpack.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A fixed modification time for written entries: 2000-01-01 12:00 UTC.
 * libarchive writes the DOS time field in the local time zone, so the writer
 * patches it afterwards to the same instant as UTC (date, time below). */
#define NPZ_MTIME 946728000
#define NPZ_DOS_DATE ((20u << 9) | (1u << 5) | 1u)
#define NPZ_DOS_TIME (12u << 11)

/* packed: the input's compressed size, 0 for a pipe */
static mge_status read_archive(struct archive *a, uint64_t packed, mge_tlist *out, mge_error *err)
{
    mge_unpack u = {a, packed, 0};
    mge_tlist l = {0};
    mge_status s = MGE_OK;
    struct archive_entry *e;
    for (;;) {
        int r = archive_read_next_header(a, &e);
        if (r == ARCHIVE_EOF)
            break;
        if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
            s = mge_error_set(err, MGE_ERR_FORMAT, "npz: %s",
                              archive_error_string(a) ? archive_error_string(a) : "not a zip archive");
            goto done;
        }
        const char *path = archive_entry_pathname(e);
        const char *why = path ? mge_unpack_bad_name(path) : NULL;
        char kind[256];
        if (why || (why = mge_unpack_bad_type(e, kind, sizeof kind))) {
            s = mge_error_set(err, MGE_ERR_FORMAT, "npz entry '%.200s' is refused: %s %s", path ? path : "",
                              why == kind ? "it is" : "its name is", why);
            goto done;
        }
        if (archive_entry_filetype(e) == AE_IFDIR)
            continue;
        size_t pl = path ? strlen(path) : 0;
        /* torch.save's zip, met in a stream or memory (paths are sniffed before) */
        if (pl >= 8 && strcmp(path + pl - 8, "data.pkl") == 0 && (pl == 8 || path[pl - 9] == '/')) {
            s = mge_sniff_refuse(MGE_KIND_TORCH, MGE_SNIFF_WEIGHTS, NULL, err);
            goto done;
        }
        if (pl <= 4 || strcmp(path + pl - 4, ".npy") != 0) {
            s = mge_error_set(err, MGE_ERR_FORMAT, "npz entry '%.200s' is not an .npy array", path ? path : "");
            goto done;
        }
        char *name = mge_strndup(path, pl - 4);
        if (!name) {
            s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
            goto done;
        }
        if (mge_tlist_find(&l, name) >= 0) {
            s = mge_error_set(err, MGE_ERR_FORMAT, "npz: '%.200s' appears twice", name);
            free(name);
            goto done;
        }
        unsigned char *data = NULL;
        size_t n = 0, used = 0;
        mge_tensor t;
        memset(&t, 0, sizeof t);
        if ((s = mge_unpack_read(&u, e, path, &data, &n, err))) {
            mge_error_prefix(err, "npz");
            free(name);
            goto done;
        }
        s = mge_npy_read_mem(data, n, &used, &t, err);
        free(data);
        if (s == MGE_ERR_EOF)
            s = mge_error_set(err, MGE_ERR_FORMAT, "empty entry");
        else if (!s && used != n)
            s = mge_error_set(err, MGE_ERR_FORMAT, "%zu bytes after the array", n - used);
        if (!s)
            s = mge_tlist_add(&l, name, &t, err);
        if (s) {
            mge_tensor_free(&t);
            mge_error_prefix(err, "npz entry '%.200s'", name);
            free(name);
            goto done;
        }
        free(name);
    }
    /* Hand the entries over only when the whole archive read cleanly. */
    for (int i = 0; i < l.n && !s; i++)
        s = mge_tlist_add(out, l.names[i], &l.t[i], err);
done:
    mge_tlist_free(&l);
    return s;
}

/* libarchive does not recognise a zip with no entries (np.savez() with no
 * arrays writes one): just the 22-byte end record, "PK\5\6", 0 entries. */
static int empty_zip(const unsigned char *p, size_t n)
{
    return n >= 22 && p[0] == 'P' && p[1] == 'K' && p[2] == 5 && p[3] == 6 && p[8] == 0 && p[9] == 0 &&
           p[10] == 0 && p[11] == 0;
}

static int empty_zip_file(const char *path)
{
    unsigned char p[22];
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    size_t n = fread(p, 1, sizeof p, f);
    fclose(f);
    return empty_zip(p, n);
}

static mge_status open_fail(struct archive *a, const char *what, mge_error *err)
{
    const char *m = archive_error_string(a);
    return mge_error_set(err, archive_errno(a) == ENOENT || archive_errno(a) == EACCES ? MGE_ERR_IO : MGE_ERR_FORMAT,
                         "%s: %s", what, m ? m : "cannot open");
}

mge_status mge_npz_read_path(const char *path, mge_tlist *out, mge_error *err)
{
    struct archive *a = archive_read_new();
    if (!a)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    int is_stdin = strcmp(path, "-") == 0;
    struct stat st;
    int seekable = !is_stdin && stat(path, &st) == 0 && S_ISREG(st.st_mode);
    /* a torch.save file, an ONNX model, ...: say what it is, not libarchive's complaint */
    mge_status ks = seekable ? mge_sniff_path(path, MGE_SNIFF_WEIGHTS, err) : MGE_OK;
    if (ks) {
        archive_read_free(a);
        return ks;
    }
    if (seekable && empty_zip_file(path)) {
        archive_read_free(a);
        return MGE_OK;
    }
    if (seekable)
        archive_read_support_format_zip_seekable(a);
    else
        archive_read_support_format_zip_streamable(a);
    archive_read_support_filter_none(a);
    int r = is_stdin ? archive_read_open_FILE(a, stdin) : archive_read_open_filename(a, path, 65536);
    mge_status s;
    if (r != ARCHIVE_OK)
        s = open_fail(a, is_stdin ? "stdin" : path, err);
    else
        s = read_archive(a, seekable ? (uint64_t)st.st_size : 0, out, err);
    archive_read_free(a);
    return s;
}

mge_status mge_npz_read_mem(const void *buf, size_t n, mge_tlist *out, mge_error *err)
{
    return mge_npz_read_packed(buf, n, n, out, err);
}

mge_status mge_npz_read_packed(const void *buf, size_t n, uint64_t packed, mge_tlist *out, mge_error *err)
{
    if (empty_zip(buf, n))
        return MGE_OK;
    struct archive *a = archive_read_new();
    if (!a)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    archive_read_support_format_zip_seekable(a);
    archive_read_support_filter_none(a);
    mge_status s;
    if (archive_read_open_memory(a, buf, n) != ARCHIVE_OK)
        s = open_fail(a, "npz", err);
    else
        s = read_archive(a, packed ? packed : 1, out, err);
    archive_read_free(a);
    return s;
}

int mge_npz_is_zip(const void *buf, size_t n)
{
    const unsigned char *p = buf;
    /* a local file header, or the end record of an empty archive */
    return n >= 4 && p[0] == 'P' && p[1] == 'K' &&
           ((p[2] == 3 && p[3] == 4) || (p[2] == 5 && p[3] == 6));
}

/* ---------------------------------------------------------------- writing */

static la_ssize_t write_cb(struct archive *a, void *ud, const void *p, size_t n)
{
    mge_buf *b = ud;
    if (!mge_buf_put(b, p, n)) {
        archive_set_error(a, ENOMEM, "out of memory");
        return -1;
    }
    return (la_ssize_t)n;
}

static uint64_t le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void put_dos_time(unsigned char *p)
{
    p[0] = NPZ_DOS_TIME & 0xff;
    p[1] = NPZ_DOS_TIME >> 8;
    p[2] = NPZ_DOS_DATE & 0xff;
    p[3] = NPZ_DOS_DATE >> 8;
}

/* Rewrites the DOS time of every entry of the archive we just wrote into
 * z[0..n), in the central directory and the local headers. Returns 0 when
 * the layout is not what libarchive writes (then nothing is trusted). */
static int fix_dos_times(unsigned char *z, size_t n)
{
    if (n < 22 || le(z + n - 22, 4) != 0x06054b50u)
        return 0;
    uint64_t count = le(z + n - 22 + 10, 2), cd = le(z + n - 22 + 16, 4);
    if (count == 0xffff || cd == 0xffffffffu) { /* zip64: the locator sits before the end record */
        if (n < 42 || le(z + n - 42, 4) != 0x07064b50u)
            return 0;
        uint64_t e64 = le(z + n - 42 + 8, 8);
        if (e64 > n - 42 || n - 42 - e64 < 56 || le(z + e64, 4) != 0x06064b50u)
            return 0;
        count = le(z + e64 + 32, 8);
        cd = le(z + e64 + 48, 8);
    }
    for (uint64_t i = 0; i < count; i++) {
        if (cd > n || n - cd < 46 || le(z + cd, 4) != 0x02014b50u)
            return 0;
        unsigned char *c = z + cd;
        uint64_t nl = le(c + 28, 2), xl = le(c + 30, 2), cl = le(c + 32, 2), off = le(c + 42, 4);
        if (n - cd - 46 < nl + xl + cl)
            return 0;
        if (off == 0xffffffffu) { /* the zip64 extra holds it after any saturated sizes */
            const unsigned char *x = c + 46 + nl, *xe = x + xl;
            int found = 0;
            while (!found && xe - x >= 4) {
                uint64_t id = le(x, 2), sz = le(x + 2, 2);
                if ((uint64_t)(xe - x - 4) < sz)
                    return 0;
                if (id == 1) {
                    uint64_t k = (le(c + 24, 4) == 0xffffffffu ? 8 : 0) + (le(c + 20, 4) == 0xffffffffu ? 8 : 0);
                    if (k + 8 > sz)
                        return 0;
                    off = le(x + 4 + k, 8);
                    found = 1;
                }
                x += 4 + sz;
            }
            if (!found)
                return 0;
        }
        if (off > n || n - off < 30 || le(z + off, 4) != 0x04034b50u)
            return 0;
        put_dos_time(c + 12);
        put_dos_time(z + off + 10);
        cd += 46 + nl + xl + cl;
    }
    return 1;
}

mge_status mge_npz_write(const mge_tlist *l, mge_buf *out, mge_error *err)
{
    for (int i = 0; i < l->n; i++) {
        if (!l->names[i] || !*l->names[i])
            return mge_error_set(err, MGE_ERR_INVALID, "npz: tensor %d has no name", i);
        for (int j = 0; j < i; j++)
            if (strcmp(l->names[i], l->names[j]) == 0)
                return mge_error_set(err, MGE_ERR_INVALID, "npz: '%.200s' appears twice", l->names[i]);
    }
    size_t start = out->n; /* a failed write leaves out as it was */
    struct archive *a = archive_write_new();
    struct archive_entry *e = archive_entry_new();
    mge_buf rec = {0};
    mge_status s = MGE_OK;
    char *path = NULL;
    if (!a || !e) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (archive_write_set_format_zip(a) != ARCHIVE_OK ||
        archive_write_set_format_option(a, "zip", "compression", "store") != ARCHIVE_OK ||
        archive_write_set_bytes_per_block(a, 0) != ARCHIVE_OK ||
        archive_write_open(a, out, NULL, write_cb, NULL) != ARCHIVE_OK) {
        s = mge_error_set(err, MGE_ERR_IO, "npz: %s", archive_error_string(a) ? archive_error_string(a) : "setup failed");
        goto done;
    }
    for (int i = 0; i < l->n; i++) {
        rec.n = 0;
        if ((s = mge_npy_write_buf(&rec, &l->t[i], err))) {
            mge_error_prefix(err, "'%.200s'", l->names[i]);
            goto done;
        }
        size_t nl = strlen(l->names[i]);
        free(path);
        path = malloc(nl + 5);
        if (!path) {
            s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
            goto done;
        }
        memcpy(path, l->names[i], nl);
        memcpy(path + nl, ".npy", 5);
        archive_entry_clear(e);
        archive_entry_set_pathname(e, path);
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, 0644);
        archive_entry_set_size(e, (la_int64_t)rec.n);
        archive_entry_set_mtime(e, NPZ_MTIME, 0);
        if (archive_write_header(a, e) != ARCHIVE_OK) {
            s = mge_error_set(err, MGE_ERR_IO, "npz: '%.200s': %s", l->names[i], archive_error_string(a));
            goto done;
        }
        size_t off = 0;
        while (off < rec.n) {
            la_ssize_t k = archive_write_data(a, rec.p + off, rec.n - off);
            if (k <= 0) {
                s = mge_error_set(err, MGE_ERR_IO, "npz: '%.200s': %s", l->names[i],
                                  archive_error_string(a) ? archive_error_string(a) : "write failed");
                goto done;
            }
            off += (size_t)k;
        }
    }
    if (archive_write_close(a) != ARCHIVE_OK)
        s = mge_error_set(err, MGE_ERR_IO, "npz: %s", archive_error_string(a) ? archive_error_string(a) : "close failed");
    else if (out->failed)
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    else if (!fix_dos_times((unsigned char *)out->p + start, out->n - start))
        s = mge_error_set(err, MGE_ERR_IO, "npz: unexpected zip layout from libarchive");
done:
    free(path);
    mge_buf_free(&rec);
    if (e)
        archive_entry_free(e);
    if (a)
        archive_write_free(a);
    if (s && out->n > start)
        out->n = start;
    return s;
}
