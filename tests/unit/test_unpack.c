/* test_unpack.c — compressed and archived input a user may be handed:
 * gzip (IDX, NPY streams), zip and tar members, npz entries inflate no
 * further than their headers declare and than formats/unpack.h allows for
 * their compressed size, with both sizes in the message; members whose
 * names climb out or that are not regular files are refused by name. */
#include "mge.h"
#include "unit.h"
#include "unit_tmp.h"

#include <archive.h>
#include <archive_entry.h>
#include <ftw.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define MIB ((size_t)1 << 20)

static void put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* gzip of head[0..hn) followed by zeros zero bytes, into a malloc'ed buffer. */
static unsigned char *gz_zeros(const void *head, size_t hn, size_t zeros, size_t *outn)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    CHECK(deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY) == Z_OK);
    size_t cap = 65536, len = 0, left = zeros;
    unsigned char *out = malloc(cap), *zero = calloc(1, MIB);
    z.next_in = (unsigned char *)head;
    z.avail_in = (uInt)hn;
    for (;;) {
        if (z.avail_in == 0 && left) {
            size_t k = left < MIB ? left : MIB;
            z.next_in = zero;
            z.avail_in = (uInt)k;
            left -= k;
        }
        if (cap - len < 65536)
            out = realloc(out, cap *= 2);
        z.next_out = out + len;
        z.avail_out = (uInt)(cap - len);
        int r = deflate(&z, left ? Z_NO_FLUSH : Z_FINISH);
        len = cap - z.avail_out;
        if (r == Z_STREAM_END || r == Z_STREAM_ERROR)
            break;
    }
    deflateEnd(&z);
    free(zero);
    *outn = len;
    return out;
}

/* An NPY 1.0 header for f32[n] (the data follows). */
static size_t npy_head(unsigned char *h, uint64_t n)
{
    char d[128];
    int k = snprintf(d, sizeof d, "{'descr': '<f4', 'fortran_order': False, 'shape': (%llu,), }",
                     (unsigned long long)n);
    size_t total = (10 + (size_t)k + 1 + 63) / 64 * 64;
    memcpy(h, "\x93NUMPY\x01\x00", 8);
    h[8] = (unsigned char)((total - 10) & 0xff);
    h[9] = (unsigned char)((total - 10) >> 8);
    memcpy(h + 10, d, (size_t)k);
    memset(h + 10 + k, ' ', total - 10 - (size_t)k - 1);
    h[total - 1] = '\n';
    return total;
}

/* ---------------------------------------------------------------- gzip */

static void test_idx_claim(void)
{
    mge_error err;
    mge_tensor t;
    /* the case: a header for 2^32-1 images of 28x28 and 1 MiB of
     * zeros: refused from the header, before anything is inflated */
    unsigned char h[16] = {0, 0, 0x08, 3};
    put_be32(h + 4, 0xffffffffu);
    put_be32(h + 8, 28);
    put_be32(h + 12, 28);
    size_t n;
    unsigned char *gz = gz_zeros(h, sizeof h, MIB, &n);
    CHECK(mge_idx_read_mem(gz, n, &t, &err) == MGE_ERR_FORMAT);
    char want[200];
    snprintf(want, sizeof want, "the header claims u8[4294967295,28,28], %llu bytes, more than the 268435456 bytes "
             "that %zu compressed bytes may inflate to", 16 + 4294967295ull * 784, n);
    CHECK_MSG(strstr(err.msg, want), "%s", err.msg);
    /* the same through the dataset loader, which names the file */
    write_file(tmp("bomb-images-idx3-ubyte.gz"), gz, n);
    mge_dataset ds;
    CHECK(mge_dataset_load(tmp("bomb-images-idx3-ubyte.gz"), &ds, &err) == MGE_ERR_FORMAT);
    CHECK_MSG(strstr(err.msg, "bomb-images-idx3-ubyte.gz") && strstr(err.msg, want), "%s", err.msg);
    free(gz);
    /* a header for 4 bytes, then 1 MiB: inflated no further than claimed */
    unsigned char s[12] = {0, 0, 0x08, 2};
    put_be32(s + 4, 2);
    put_be32(s + 8, 2);
    gz = gz_zeros(s, sizeof s, MIB, &n);
    CHECK(mge_idx_read_mem(gz, n, &t, &err) == MGE_ERR_FORMAT);
    CHECK_MSG(strstr(err.msg, "the data inflates to more than the 16 bytes its header claims (u8[2,2])"), "%s",
              err.msg);
    free(gz);
    /* and a genuine one still reads */
    gz = gz_zeros(s, sizeof s, 4, &n);
    CHECK_OK(mge_idx_read_mem(gz, n, &t, &err), err);
    CHECK(t.ndim == 2 && t.dims[0] == 2 && t.nbytes == 4);
    mge_tensor_free(&t);
    free(gz);
}

/* No header to go by (an NPY stream): the ratio bounds what is inflated. */
static void test_gzip_ratio(void)
{
    mge_error err;
    unsigned char h[128];
    uint64_t count = 300 * MIB / 4;
    size_t hn = npy_head(h, count), n;
    unsigned char *gz = gz_zeros(h, hn, (size_t)count * 4, &n);
    CHECK(n < 2 * MIB);
    write_file(tmp("big.npy.gz"), gz, n);
    free(gz);
    mge_dataset ds;
    CHECK(mge_dataset_load(tmp("big.npy.gz"), &ds, &err) == MGE_ERR_FORMAT);
    char want[160];
    snprintf(want, sizeof want, "gzip: %zu compressed bytes inflate to more than 268435456 bytes (at most 100 times", n);
    CHECK_MSG(strstr(err.msg, "big.npy.gz") && strstr(err.msg, want), "%s", err.msg);
    CHECK(ds.n == 0);
}

/* ---------------------------------------------------------------- archive members */

typedef struct entry {
    const char *path;
    int type;                /* AE_IFREG, AE_IFLNK, AE_IFIFO, AE_IFCHR, or 0: a hard link to link */
    const char *link;
    const void *data;
    size_t n, zeros;         /* data, then that many zero bytes */
} entry;

static void write_entries(const char *path, int zip, const entry *es, int ne)
{
    struct archive *a = archive_write_new();
    if (zip)
        archive_write_set_format_zip(a);
    else
        archive_write_set_format_pax_restricted(a);
    CHECK(archive_write_open_filename(a, path) == ARCHIVE_OK);
    struct archive_entry *e = archive_entry_new();
    unsigned char *zero = calloc(1, MIB);
    for (int i = 0; i < ne; i++) {
        archive_entry_clear(e);
        archive_entry_set_pathname(e, es[i].path);
        archive_entry_set_perm(e, 0644);
        archive_entry_set_filetype(e, es[i].type ? (unsigned)es[i].type : AE_IFREG);
        if (es[i].type == AE_IFLNK)
            archive_entry_set_symlink(e, es[i].link);
        if (!es[i].type)
            archive_entry_set_hardlink(e, es[i].link);
        if (es[i].type == AE_IFCHR)
            archive_entry_set_rdev(e, 0x0103);
        archive_entry_set_size(e, (la_int64_t)(es[i].n + es[i].zeros));
        CHECK(archive_write_header(a, e) == ARCHIVE_OK);
        if (es[i].n)
            CHECK(archive_write_data(a, es[i].data, es[i].n) == (la_ssize_t)es[i].n);
        for (size_t left = es[i].zeros; left;) {
            size_t k = left < MIB ? left : MIB;
            CHECK(archive_write_data(a, zero, k) == (la_ssize_t)k);
            left -= k;
        }
    }
    free(zero);
    archive_entry_free(e);
    CHECK(archive_write_close(a) == ARCHIVE_OK);
    archive_write_free(a);
}

/* A valid f32[4] NPY member. */
static unsigned char small_npy[256];
static size_t small_n;

static void expect_refused(const char *file, int zip, const entry *e, const char *want)
{
    entry es[2] = {{"x.npy", AE_IFREG, NULL, small_npy, small_n, 0}, *e};
    write_entries(tmp(file), zip, es, 2);
    mge_error err;
    mge_dataset ds;
    mge_status s = mge_dataset_load(tmp(file), &ds, &err);
    CHECK_MSG(s == MGE_ERR_FORMAT && strstr(err.msg, want), "%s: %s (want '%s')", file, err.msg, want);
    CHECK(ds.n == 0);
}

static void test_member_names_and_types(void)
{
    small_n = npy_head(small_npy, 4);
    memset(small_npy + small_n, 0, 16);
    small_n += 16;
    static const struct {
        const char *path, *why;
    } names[] = {
        {"../../x.npy", "member '../../x.npy' is refused: its name is a '..' component"},
        {"d/../../y.npy", "member 'd/../../y.npy' is refused: its name is a '..' component"},
        {"..\\y.npy", "its name is a '..' component"},
        {"../.hidden", "member '../.hidden' is refused: its name is a '..' component"},
        {"/etc/x.npy", "member '/etc/x.npy' is refused: its name is an absolute path"},
        {"C:x.npy", "member 'C:x.npy' is refused: its name is a drive or device name"},
        {"\\\\.\\x.npy", "its name is an absolute path"},
    };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        entry e = {names[i].path, AE_IFREG, NULL, small_npy, small_n, 0};
        expect_refused("names.tar", 0, &e, names[i].why);
    }
    entry sym = {"s.npy", AE_IFLNK, "x.npy", NULL, 0, 0};
    expect_refused("sym.tar", 0, &sym, "member 's.npy' is refused: it is a symbolic link to 'x.npy', not a regular file");
    entry hid = {".s", AE_IFLNK, "/etc/passwd", NULL, 0, 0};
    expect_refused("hidden.tar", 0, &hid, "member '.s' is refused: it is a symbolic link to '/etc/passwd'");
    entry hard = {"h.npy", 0, "x.npy", NULL, 0, 0};
    expect_refused("hard.tar", 0, &hard, "member 'h.npy' is refused: it is a hard link to 'x.npy'");
    entry fifo = {"f.npy", AE_IFIFO, NULL, NULL, 0, 0};
    expect_refused("fifo.tar", 0, &fifo, "member 'f.npy' is refused: it is a FIFO");
    entry dev = {"null.npy", AE_IFCHR, NULL, NULL, 0, 0};
    expect_refused("dev.tar", 0, &dev, "member 'null.npy' is refused: it is a device");
    entry zsym = {"s.npy", AE_IFLNK, "x.npy", NULL, 0, 0};
    expect_refused("sym.zip", 1, &zsym, "it is a symbolic link to 'x.npy'");
    entry zdots = {"../w.npy", AE_IFREG, NULL, small_npy, small_n, 0};
    expect_refused("dots.zip", 1, &zdots, "member '../w.npy' is refused: its name is a '..' component");

    /* npz (parameters, named tensors) refuses the same */
    entry np[2] = {{"w.npy", AE_IFREG, NULL, small_npy, small_n, 0}, {"../w2.npy", AE_IFREG, NULL, small_npy, small_n, 0}};
    write_entries(tmp("dots.npz"), 1, np, 2);
    mge_tlist l = {0};
    mge_error err;
    CHECK(mge_npz_read_path(tmp("dots.npz"), &l, &err) == MGE_ERR_FORMAT);
    CHECK_MSG(strstr(err.msg, "npz entry '../w2.npy' is refused: its name is a '..' component"), "%s", err.msg);
    CHECK(l.n == 0);
    np[1] = (entry){"l.npy", AE_IFLNK, "w.npy", NULL, 0, 0};
    write_entries(tmp("sym.npz"), 1, np, 2);
    CHECK(mge_npz_read_path(tmp("sym.npz"), &l, &err) == MGE_ERR_FORMAT);
    CHECK_MSG(strstr(err.msg, "npz entry 'l.npy' is refused: it is a symbolic link to 'w.npy'"), "%s", err.msg);
    mge_tlist_free(&l);

    /* what stays fine: "./" prefixes, dots inside names, hidden regular files skipped */
    entry ok[3] = {{"./x/0.npy", AE_IFREG, NULL, small_npy, small_n, 0},
                   {"a..b.npy", AE_IFREG, NULL, small_npy, small_n, 0},
                   {".DS_Store", AE_IFREG, NULL, "junk", 4, 0}};
    write_entries(tmp("ok.tar"), 0, ok, 3);
    mge_dataset ds;
    CHECK_OK(mge_dataset_load(tmp("ok.tar"), &ds, &err), err);
    CHECK(ds.n == 2);
    mge_dataset_free(&ds);
}

/* 300 MiB of zeros in one deflated zip member (about 300 KiB): more than
 * the archive may inflate to, in a dataset and in an npz. */
static void test_member_ratio(void)
{
    unsigned char h[128];
    uint64_t count = 300 * MIB / 4;
    size_t hn = npy_head(h, count);
    entry e = {"x.npy", AE_IFREG, NULL, h, hn, (size_t)count * 4};
    write_entries(tmp("big.zip"), 1, &e, 1);
    struct stat st;
    CHECK(stat(tmp("big.zip"), &st) == 0 && st.st_size < (off_t)(2 * MIB));
    mge_error err;
    mge_dataset ds;
    CHECK(mge_dataset_load(tmp("big.zip"), &ds, &err) == MGE_ERR_FORMAT);
    char want[200];
    snprintf(want, sizeof want, "%s: member 'x.npy': the members declare %zu bytes, more than the 268435456 bytes "
             "that the archive's %lld compressed bytes may inflate to", tmp("big.zip"), hn + (size_t)count * 4,
             (long long)st.st_size);
    CHECK_MSG(strstr(err.msg, want), "%s", err.msg);
    CHECK(rename(tmp("big.zip"), tmp("big.npz")) == 0);
    mge_tlist l = {0};
    CHECK(mge_npz_read_path(tmp("big.npz"), &l, &err) == MGE_ERR_FORMAT);
    CHECK_MSG(strstr(err.msg, "npz: member 'x.npy': the members declare") && strstr(err.msg, "268435456 bytes"),
              "%s", err.msg);
    CHECK(l.n == 0);
    /* an npz on standard input: no size to go by up front, bounded as it is read */
    CHECK(freopen(tmp("big.npz"), "rb", stdin) != NULL);
    CHECK(mge_npz_read_path("-", &l, &err) == MGE_ERR_FORMAT);
    CHECK_MSG(strstr(err.msg, "member 'x.npy'") && strstr(err.msg, "268435456 bytes that the ") &&
              strstr(err.msg, "compressed bytes may inflate to"), "%s", err.msg);
    mge_tlist_free(&l);
}

int main(void)
{
    if (unit_tmp_make("unpack"))
        return 1;
    RUN(test_idx_claim);
    RUN(test_gzip_ratio);
    RUN(test_member_names_and_types);
    RUN(test_member_ratio);
    unit_tmp_remove();
    return unit_done();
}
