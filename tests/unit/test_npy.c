/* test_npy.c — NPY tensor streams, NPZ archives and parameter binding.
 *
 * Round trips of every dtype at ranks 0..8 through FILE streams and memory,
 * records back to back then EOF, truncation at every byte, absurd headers,
 * hand-built big-endian / Fortran-order / version 2.0 and 3.0 records,
 * NPZ write and read (memory, file, FIFO), and params bind/export with the
 * unknown/missing/mismatch messages. With numpy installed, files written by
 * numpy are read and files we write are loaded by numpy (a visible SKIP
 * line otherwise).
 *
 * Also a small driver for tests/oracle/test_npy.py:
 *   test_npy --copy IN OUT          every NPY record of IN written to OUT
 *   test_npy --npz-copy IN OUT      an .npz read and written again
 *   test_npy --bind SPEC NPZ OUT    graph from SPEC, bind NPZ, export to OUT */
#include "internal.h"
#include "unit.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------- helpers */

/* The value element i of a test tensor of dtype dt holds. */
static void put_val(mge_dtype dt, void *p, int64_t i)
{
    switch (dt) {
    case MGE_F32: ((float *)p)[i] = (float)i * 0.5f - 3.0f; break;
    case MGE_F16: ((uint16_t *)p)[i] = mge_f32_to_f16((float)(i % 200) * 0.25f - 2.0f); break;
    case MGE_BF16: ((uint16_t *)p)[i] = mge_f32_to_bf16((float)i - 5.0f); break;
    case MGE_I8: case MGE_QS8: ((int8_t *)p)[i] = (int8_t)(i * 7 - 100); break;
    case MGE_U8: ((uint8_t *)p)[i] = (uint8_t)(i * 3 + 1); break;
    case MGE_I32: case MGE_QS32: ((int32_t *)p)[i] = (int32_t)(i * 1000 - 7); break;
    case MGE_I64: ((int64_t *)p)[i] = i * INT64_C(10000000000) - 5; break;
    case MGE_BOOL: ((uint8_t *)p)[i] = i % 3 == 0; break;
    /* beyond f32's precision, past i16's halfway, above u32's 2^31, u64's 2^63 */
    case MGE_F64: ((double *)p)[i] = (double)i * 0.1 - 1e300 * (i % 2); break;
    case MGE_I16: ((int16_t *)p)[i] = (int16_t)(i * 3001 - 30000); break;
    case MGE_U16: ((uint16_t *)p)[i] = (uint16_t)(i * 4001 + 60000); break;
    case MGE_U32: ((uint32_t *)p)[i] = (uint32_t)(i * 70001 + UINT32_C(4000000000)); break;
    case MGE_U64: ((uint64_t *)p)[i] = (uint64_t)i * UINT64_C(10000000000) + UINT64_C(18000000000000000000); break;
    default: break;
    }
}

/* The dtype a tensor of dtype dt comes back as from NPY. */
static mge_dtype npy_as(mge_dtype dt)
{
    return dt == MGE_BF16 ? MGE_F32 : dt == MGE_QS8 ? MGE_I8 : dt == MGE_QS32 ? MGE_I32 : dt;
}

static void make_tensor(mge_tensor *t, mge_dtype dt, int ndim, const int64_t *dims)
{
    mge_error err;
    CHECK_OK(mge_tensor_alloc(t, dt, ndim, dims, &err), err);
    int64_t n = mge_tensor_numel(t);
    for (int64_t i = 0; i < n; i++)
        put_val(dt, t->data, i);
}

/* Whether t (read back) equals the pattern a tensor of dtype orig was filled with. */
static int same_values(const mge_tensor *t, mge_dtype orig, int ndim, const int64_t *dims)
{
    if (t->dtype != npy_as(orig) || t->ndim != ndim)
        return 0;
    for (int i = 0; i < ndim; i++)
        if (t->dims[i] != dims[i])
            return 0;
    int64_t n = mge_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        int ok;
        switch (orig) {
        case MGE_F32: ok = ((float *)t->data)[i] == (float)i * 0.5f - 3.0f; break;
        case MGE_F16: ok = ((uint16_t *)t->data)[i] == mge_f32_to_f16((float)(i % 200) * 0.25f - 2.0f); break;
        case MGE_BF16: ok = ((float *)t->data)[i] == mge_bf16_to_f32(mge_f32_to_bf16((float)i - 5.0f)); break;
        case MGE_I8: case MGE_QS8: ok = ((int8_t *)t->data)[i] == (int8_t)(i * 7 - 100); break;
        case MGE_U8: ok = ((uint8_t *)t->data)[i] == (uint8_t)(i * 3 + 1); break;
        case MGE_I32: case MGE_QS32: ok = ((int32_t *)t->data)[i] == (int32_t)(i * 1000 - 7); break;
        case MGE_I64: ok = ((int64_t *)t->data)[i] == i * INT64_C(10000000000) - 5; break;
        case MGE_BOOL: ok = ((uint8_t *)t->data)[i] == (i % 3 == 0); break;
        case MGE_F64: ok = ((double *)t->data)[i] == (double)i * 0.1 - 1e300 * (i % 2); break;
        case MGE_I16: ok = ((int16_t *)t->data)[i] == (int16_t)(i * 3001 - 30000); break;
        case MGE_U16: ok = ((uint16_t *)t->data)[i] == (uint16_t)(i * 4001 + 60000); break;
        case MGE_U32: ok = ((uint32_t *)t->data)[i] == (uint32_t)(i * 70001 + UINT32_C(4000000000)); break;
        case MGE_U64:
            ok = ((uint64_t *)t->data)[i] == (uint64_t)i * UINT64_C(10000000000) + UINT64_C(18000000000000000000);
            break;
        default: ok = 0;
        }
        if (!ok)
            return 0;
    }
    return 1;
}

/* Shape of test rank r: small dims so rank 8 stays small. */
static void rank_dims(int r, int64_t *dims)
{
    for (int i = 0; i < r; i++)
        dims[i] = 1 + (i + r) % 3;
}

/* A hand-made record: preamble of the given version, dict padded to 64. */
static void hand_record(mge_buf *b, int major, const char *dict, const void *data, size_t n)
{
    size_t pre = major == 1 ? 10 : 12, dl = strlen(dict);
    size_t total = (pre + dl + 1 + 63) / 64 * 64, hlen = total - pre;
    unsigned char p[12] = {0x93, 'N', 'U', 'M', 'P', 'Y', (unsigned char)major, 0,
                           (unsigned char)(hlen & 0xff), (unsigned char)(hlen >> 8), 0, 0};
    mge_buf_put(b, p, pre);
    mge_buf_put(b, dict, dl);
    for (size_t i = 0; i < hlen - dl - 1; i++)
        mge_buf_put(b, " ", 1);
    mge_buf_put(b, "\n", 1);
    mge_buf_put(b, data, n);
}

static FILE *file_of(const void *p, size_t n)
{
    FILE *f = tmpfile();
    if (f) {
        if (n)
            fwrite(p, 1, n, f);
        rewind(f);
    }
    return f;
}

/* Reads one record from a hand-made buffer through both readers; the two
 * must agree. Returns the status; t holds the FILE reader's tensor. */
static mge_status read_both(const mge_buf *b, mge_tensor *t, mge_error *err)
{
    mge_tensor m;
    mge_error e2;
    size_t used;
    memset(t, 0, sizeof *t);
    memset(&m, 0, sizeof m);
    FILE *f = file_of(b->p, b->n);
    CHECK(f != NULL);
    if (!f)
        return MGE_ERR_IO;
    mge_status s = mge_npy_read(f, t, err);
    fclose(f);
    mge_status s2 = mge_npy_read_mem(b->p, b->n, &used, &m, &e2);
    CHECK_MSG(s == s2, "FILE reader %s (%s), memory reader %s (%s)", mge_status_name(s), s ? err->msg : "",
              mge_status_name(s2), s2 ? e2.msg : "");
    if (!s && !s2) {
        CHECK(used == b->n);
        CHECK(m.dtype == t->dtype && mge_tensor_same_shape(&m, t) && m.nbytes == t->nbytes);
        CHECK(t->nbytes == 0 || memcmp(m.data, t->data, t->nbytes) == 0);
    }
    mge_tensor_free(&m);
    return s;
}

/* ---------------------------------------------------------------- NPY */

static void test_roundtrip_file(void)
{
    mge_error err;
    FILE *f = tmpfile();
    CHECK(f != NULL);
    if (!f)
        return;
    int64_t dims[MGE_MAX_DIMS];
    int count = 0;
    for (int dt = 0; dt < MGE_NDTYPES; dt++)
        for (int r = 0; r <= MGE_MAX_DIMS; r++) {
            mge_tensor t;
            rank_dims(r, dims);
            make_tensor(&t, (mge_dtype)dt, r, dims);
            CHECK_OK(mge_npy_write(f, &t, &err), err);
            mge_tensor_free(&t);
            count++;
        }
    /* an empty tensor too */
    int64_t zdims[2] = {3, 0};
    mge_tensor z;
    make_tensor(&z, MGE_F32, 2, zdims);
    CHECK_OK(mge_npy_write(f, &z, &err), err);
    mge_tensor_free(&z);
    rewind(f);
    for (int dt = 0; dt < MGE_NDTYPES; dt++)
        for (int r = 0; r <= MGE_MAX_DIMS; r++) {
            mge_tensor t;
            memset(&t, 0, sizeof t);
            rank_dims(r, dims);
            CHECK_OK(mge_npy_read(f, &t, &err), err);
            CHECK_MSG(same_values(&t, (mge_dtype)dt, r, dims), "dtype %s rank %d", mge_dtype_name((mge_dtype)dt), r);
            CHECK(((uintptr_t)t.data & 63) == 0 && (t.flags & MGE_TENSOR_OWNED));
            mge_tensor_free(&t);
        }
    CHECK_OK(mge_npy_read(f, &z, &err), err);
    CHECK(z.ndim == 2 && z.dims[0] == 3 && z.dims[1] == 0 && z.nbytes == 0);
    mge_tensor_free(&z);
    CHECK(mge_npy_read(f, &z, &err) == MGE_ERR_EOF);
    CHECK(mge_npy_read(f, &z, &err) == MGE_ERR_EOF);
    CHECK(count == MGE_NDTYPES * (MGE_MAX_DIMS + 1));
    fclose(f);
}

static void test_roundtrip_mem(void)
{
    mge_error err;
    mge_buf b = {0};
    int64_t dims[MGE_MAX_DIMS];
    size_t ends[MGE_NDTYPES];
    for (int dt = 0; dt < MGE_NDTYPES; dt++) {
        mge_tensor t;
        rank_dims(3, dims);
        make_tensor(&t, (mge_dtype)dt, 3, dims);
        CHECK_OK(mge_npy_write_buf(&b, &t, &err), err);
        ends[dt] = b.n;
        mge_tensor_free(&t);
    }
    size_t off = 0;
    for (int dt = 0; dt < MGE_NDTYPES; dt++) {
        mge_tensor t;
        size_t used = 0;
        CHECK_OK(mge_npy_read_mem(b.p + off, b.n - off, &used, &t, &err), err);
        off += used;
        CHECK(off == ends[dt]);
        CHECK(same_values(&t, (mge_dtype)dt, 3, dims));
        mge_tensor_free(&t);
    }
    mge_tensor t;
    CHECK(mge_npy_read_mem(b.p + off, b.n - off, NULL, &t, &err) == MGE_ERR_EOF);
    mge_buf_free(&b);
}

static void test_header_text(void)
{
    mge_error err;
    mge_buf b = {0};
    mge_tensor t;
    int64_t d2[2] = {2, 3}, d1[1] = {3};
    make_tensor(&t, MGE_F32, 2, d2);
    CHECK_OK(mge_npy_write_buf(&b, &t, &err), err);
    mge_tensor_free(&t);
    const char *want = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    /* byte for byte what numpy 1.24 writes for np.zeros((2, 3), np.float32) */
    CHECK(b.n == 128 + 24);
    CHECK(b.p[6] == 1 && b.p[7] == 0 && (unsigned char)b.p[8] == 118 && b.p[9] == 0);
    CHECK(memcmp(b.p + 10, want, strlen(want)) == 0);
    CHECK(b.p[127] == '\n' && b.p[126] == ' ' && b.p[10 + strlen(want)] == ' ');
    CHECK(mge_npy_is_npy(b.p, b.n));
    b.n = 0;
    make_tensor(&t, MGE_BOOL, 1, d1);
    CHECK_OK(mge_npy_write_buf(&b, &t, &err), err);
    mge_tensor_free(&t);
    CHECK(strstr(b.p + 10, "'descr': '|b1'") && strstr(b.p + 10, "'shape': (3,), }"));
    b.n = 0;
    make_tensor(&t, MGE_I64, 0, d1);
    CHECK_OK(mge_npy_write_buf(&b, &t, &err), err);
    mge_tensor_free(&t);
    CHECK(strstr(b.p + 10, "'descr': '<i8'") && strstr(b.p + 10, "'shape': (), }"));
    CHECK(b.n == 128 + 8);
    CHECK(!mge_npy_is_npy("PK\3\4", 4) && !mge_npy_is_npy("\x93NUMPY\x07\x00", 8));
    mge_buf_free(&b);
}

static void test_truncated(void)
{
    mge_error err;
    mge_buf b = {0};
    mge_tensor t;
    int64_t d[2] = {4, 5};
    make_tensor(&t, MGE_I32, 2, d);
    CHECK_OK(mge_npy_write_buf(&b, &t, &err), err);
    mge_tensor_free(&t);
    size_t rec = b.n; /* 128 header + 80 data */
    CHECK(rec == 208);
    int bad = 0;
    for (size_t k = 1; k < rec; k++) {
        mge_buf cut = {0};
        mge_buf_put(&cut, b.p, k);
        mge_status s = read_both(&cut, &t, &err);
        if (s != MGE_ERR_FORMAT)
            bad++;
        if (k >= 128 && (s != MGE_ERR_FORMAT || !strstr(err.msg, "stream ends inside a record: got")))
            bad++;
        if (k == 164) {
            CHECK_MSG(strstr(err.msg, "got 36 of 80 data bytes") != NULL, "%s", err.msg);
        }
        mge_tensor_free(&t);
        mge_buf_free(&cut);
    }
    CHECK(bad == 0);
    /* two records, the second cut short: the first still reads */
    char first[164];
    memcpy(first, b.p, sizeof first); /* mge_buf_put may move b.p */
    mge_buf_put(&b, first, sizeof first);
    FILE *f = file_of(b.p, b.n);
    CHECK_OK(mge_npy_read(f, &t, &err), err);
    mge_tensor_free(&t);
    CHECK(mge_npy_read(f, &t, &err) == MGE_ERR_FORMAT);
    fclose(f);
    mge_buf_free(&b);
}

static void test_absurd_sizes(void)
{
    mge_error err;
    mge_tensor t;
    mge_buf b = {0};
    /* 2^60 elements: refused by the header check, nothing allocated */
    hand_record(&b, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1073741824, 1073741824), }", "abcd", 4);
    CHECK(read_both(&b, &t, &err) == MGE_ERR_SHAPE);
    CHECK_MSG(strstr(err.msg, "too large") != NULL, "%s", err.msg);
    b.n = 0;
    hand_record(&b, 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (99999999999999999999,), }", "", 0);
    CHECK(read_both(&b, &t, &err) == MGE_ERR_SHAPE);
    /* 100 GB claimed, 4 KB present: fails as truncated, through a pipe and a file */
    b.n = 0;
    char pad[4096];
    memset(pad, 1, sizeof pad);
    hand_record(&b, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (25000000000,), }", pad, sizeof pad);
    CHECK(read_both(&b, &t, &err) == MGE_ERR_FORMAT);
    CHECK_MSG(strstr(err.msg, "got 4096 of 100000000000 data bytes") != NULL, "%s", err.msg);
    int fds[2];
    CHECK(pipe(fds) == 0);
    CHECK(write(fds[1], b.p, b.n) == (ssize_t)b.n);
    close(fds[1]);
    FILE *f = fdopen(fds[0], "rb");
    CHECK(mge_npy_read(f, &t, &err) == MGE_ERR_FORMAT);
    CHECK_MSG(strstr(err.msg, "got 4096 of 100000000000 data bytes") != NULL, "%s", err.msg);
    fclose(f);
    /* a 2.0 header length of 4 GB */
    b.n = 0;
    mge_buf_put(&b, "\x93NUMPY\x02\x00\xff\xff\xff\xff{", 13);
    CHECK(read_both(&b, &t, &err) == MGE_ERR_FORMAT);
    CHECK(strstr(err.msg, "too long") != NULL);
    mge_buf_free(&b);
}

static void test_big_endian(void)
{
    mge_error err;
    mge_tensor t;
    mge_buf b = {0};
    /* >f4 [2,3]: 1.5 * i, bytes written most significant first */
    unsigned char be[24];
    for (int i = 0; i < 6; i++) {
        float v = 1.5f * (float)i;
        uint32_t u;
        memcpy(&u, &v, 4);
        for (int k = 0; k < 4; k++)
            be[i * 4 + k] = (unsigned char)(u >> (24 - 8 * k));
    }
    hand_record(&b, 1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", be, sizeof be);
    CHECK_OK(read_both(&b, &t, &err), err);
    CHECK(t.dtype == MGE_F32 && t.ndim == 2 && t.dims[0] == 2 && t.dims[1] == 3);
    for (int i = 0; i < 6 && t.data; i++)
        CHECK(((float *)t.data)[i] == 1.5f * (float)i);
    mge_tensor_free(&t);
    /* >i8 scalar */
    unsigned char v8[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe, 0x0c}; /* -500 */
    b.n = 0;
    hand_record(&b, 1, "{'descr': '>i8', 'fortran_order': False, 'shape': (), }", v8, 8);
    CHECK_OK(read_both(&b, &t, &err), err);
    CHECK(t.dtype == MGE_I64 && t.ndim == 0 && t.data && *(int64_t *)t.data == -500);
    mge_tensor_free(&t);
    /* >f2 [2]: 1.0 (0x3c00), -2.0 (0xc000) */
    unsigned char h2[4] = {0x3c, 0x00, 0xc0, 0x00};
    b.n = 0;
    hand_record(&b, 1, "{'descr': '>f2', 'fortran_order': False, 'shape': (2,), }", h2, 4);
    CHECK_OK(read_both(&b, &t, &err), err);
    CHECK(t.dtype == MGE_F16 && t.data && ((uint16_t *)t.data)[0] == 0x3c00 && ((uint16_t *)t.data)[1] == 0xc000);
    mge_tensor_free(&t);
    /* >i4 with keys in another order and double quotes */
    unsigned char i4[4] = {0x00, 0x01, 0x00, 0x02};
    b.n = 0;
    hand_record(&b, 1, "{\"shape\": (1,), \"fortran_order\": False, \"descr\": \">i4\"}", i4, 4);
    CHECK_OK(read_both(&b, &t, &err), err);
    CHECK(t.dtype == MGE_I32 && t.data && *(int32_t *)t.data == 65538);
    mge_tensor_free(&t);
    /* one-byte spellings; bool bytes other than 0/1 become 1 */
    const char *one[] = {"<i1", "|i1", ">i1", "<u1", "|u1", "|b1", "<b1", "|?"};
    const mge_dtype as[] = {MGE_I8, MGE_I8, MGE_I8, MGE_U8, MGE_U8, MGE_BOOL, MGE_BOOL, MGE_BOOL};
    for (size_t k = 0; k < sizeof one / sizeof one[0]; k++) {
        char dict[128];
        unsigned char d3[3] = {0, 2, 255};
        snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (3,), }", one[k]);
        b.n = 0;
        hand_record(&b, 1, dict, d3, 3);
        CHECK_OK(read_both(&b, &t, &err), err);
        CHECK_MSG(t.dtype == as[k], "%s", one[k]);
        if (t.data && as[k] == MGE_BOOL)
            CHECK(((uint8_t *)t.data)[0] == 0 && ((uint8_t *)t.data)[1] == 1 && ((uint8_t *)t.data)[2] == 1);
        if (t.data && as[k] != MGE_BOOL)
            CHECK(((uint8_t *)t.data)[1] == 2 && ((uint8_t *)t.data)[2] == 255);
        mge_tensor_free(&t);
    }
    mge_buf_free(&b);
}

/* Fortran-order data of shape dims holding C index i at position i. */
static void test_fortran(void)
{
    mge_error err;
    mge_buf b = {0};
    mge_tensor t;
    const int64_t shapes[][4] = {{2, 3, 0, 0}, {2, 3, 4, 0}, {3, 1, 2, 5}};
    const int ranks[] = {2, 3, 4};
    for (int s = 0; s < 3; s++) {
        int r = ranks[s];
        int64_t n = 1;
        for (int k = 0; k < r; k++)
            n *= shapes[s][k];
        int32_t *fd = malloc(sizeof(int32_t) * (size_t)n);
        unsigned char *fbe = malloc(4 * (size_t)n);
        /* C index c <-> multi-index; Fortran offset = sum idx[k] * prod(dims[<k]) */
        for (int64_t c = 0; c < n; c++) {
            int64_t rem = c, idx[4], off = 0, st = 1;
            for (int k = r - 1; k >= 0; k--) {
                idx[k] = rem % shapes[s][k];
                rem /= shapes[s][k];
            }
            for (int k = 0; k < r; k++) {
                off += idx[k] * st;
                st *= shapes[s][k];
            }
            fd[off] = (int32_t)c * 3 + 1;
            for (int q = 0; q < 4; q++)
                fbe[off * 4 + q] = (unsigned char)((uint32_t)fd[off] >> (24 - 8 * q));
        }
        char dict[160], sh[64] = "";
        for (int k = 0; k < r; k++)
            snprintf(sh + strlen(sh), sizeof sh - strlen(sh), "%lld, ", (long long)shapes[s][k]);
        for (int be = 0; be < 2; be++) {
            snprintf(dict, sizeof dict, "{'descr': '%ci4', 'fortran_order': True, 'shape': (%s), }", be ? '>' : '<', sh);
            b.n = 0;
            hand_record(&b, 1, dict, be ? (void *)fbe : (void *)fd, 4 * (size_t)n);
            CHECK_OK(read_both(&b, &t, &err), err);
            CHECK(t.dtype == MGE_I32 && t.ndim == r);
            int ok = t.data != NULL;
            for (int64_t c = 0; ok && c < n; c++)
                ok = ((int32_t *)t.data)[c] == (int32_t)c * 3 + 1;
            CHECK_MSG(ok, "rank %d big-endian %d", r, be);
            mge_tensor_free(&t);
        }
        free(fd);
        free(fbe);
    }
    mge_buf_free(&b);
}

static void test_versions(void)
{
    mge_error err;
    mge_buf b = {0};
    mge_tensor t;
    float v[3] = {1, 2, 3};
    for (int major = 2; major <= 3; major++) {
        b.n = 0;
        hand_record(&b, major, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", v, sizeof v);
        CHECK(b.n == 128 + 12);
        CHECK_OK(read_both(&b, &t, &err), err);
        CHECK(t.data && ((float *)t.data)[2] == 3.0f);
        mge_tensor_free(&t);
    }
    b.n = 0;
    hand_record(&b, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", v, sizeof v);
    b.p[6] = 4;
    CHECK(read_both(&b, &t, &err) == MGE_ERR_UNSUPPORTED);
    CHECK(strstr(err.msg, "version 4.0") != NULL);
    b.p[6] = 1;
    b.p[7] = 1;
    CHECK(read_both(&b, &t, &err) == MGE_ERR_UNSUPPORTED);
    mge_buf_free(&b);
}

static void test_hostile_headers(void)
{
    static const char *bad[] = {
        "",
        "{",
        "}",
        "{'descr': '<f4', 'fortran_order': False}",
        "{'descr': '<f4', 'shape': (3,)}",
        "{'fortran_order': False, 'shape': (3,)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (-3,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2 3), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': 3, }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'shape': (3,)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'extra': 1}",
        "{'descr': '<f4, 'fortran_order': False, 'shape': (3,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), } x",
        "{'descr': '<f4', 'fortran_order': 0, 'shape': (3,), }",
        "{'descr': '<f4' 'fortran_order': False, 'shape': (3,), }",
        "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3,), }",
        "{'descr': '|f4', 'fortran_order': False, 'shape': (3,), }",
        "{'descr': '<f', 'fortran_order': False, 'shape': (3,), }",
        "{'descr': '<f4x', 'fortran_order': False, 'shape': (3,), }",
        "{'descr': '<\\x66\\x34', 'fortran_order': False, 'shape': (3,), }",
        "{'descr': '<U3', 'fortran_order': False, 'shape': (3,), }",
        "{'descr': '|O', 'fortran_order': False, 'shape': (3,), }",
        "[1, 2]",
    };
    mge_error err;
    mge_buf b = {0};
    mge_tensor t;
    char data[64] = {0};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        b.n = 0;
        hand_record(&b, 1, bad[i], data, 12);
        mge_status s = read_both(&b, &t, &err);
        CHECK_MSG(s != MGE_OK && s != MGE_ERR_EOF, "accepted: %s", bad[i]);
        CHECK_MSG(err.msg[0] != 0, "no message for %s", bad[i]);
        mge_tensor_free(&t);
    }
    /* refused dtypes name themselves and what to do */
    b.n = 0;
    hand_record(&b, 1, "{'descr': '<f16', 'fortran_order': False, 'shape': (1,), }", data, 16);
    CHECK(read_both(&b, &t, &err) == MGE_ERR_UNSUPPORTED);
    CHECK_MSG(strcmp(err.msg, "dtype longdouble ('<f16') is not supported: save float64") == 0, "%s", err.msg);
    b.n = 0;
    hand_record(&b, 1, "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", data, 8);
    CHECK(read_both(&b, &t, &err) == MGE_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "complex64") && strstr(err.msg, "'<c8'"), "%s", err.msg);
    /* the wider dtypes read, in either byte order (big-endian swapped) */
    b.n = 0;
    {
        const unsigned char be[8] = {0xbf, 0xf8, 0, 0, 0, 0, 0, 0}; /* -1.5 */
        hand_record(&b, 1, "{'descr': '>f8', 'fortran_order': False, 'shape': (1,), }", be, 8);
        CHECK(read_both(&b, &t, &err) == MGE_OK && t.dtype == MGE_F64 && ((double *)t.data)[0] == -1.5);
        mge_tensor_free(&t);
        b.n = 0;
        const unsigned char le[2] = {0xfe, 0xff}; /* 65534 / -2 */
        hand_record(&b, 1, "{'descr': '<u2', 'fortran_order': False, 'shape': (), }", le, 2);
        CHECK(read_both(&b, &t, &err) == MGE_OK && t.dtype == MGE_U16 && ((uint16_t *)t.data)[0] == 65534);
        mge_tensor_free(&t);
        b.n = 0;
        hand_record(&b, 1, "{'descr': '<i2', 'fortran_order': False, 'shape': (), }", le, 2);
        CHECK(read_both(&b, &t, &err) == MGE_OK && t.dtype == MGE_I16 && ((int16_t *)t.data)[0] == -2);
        mge_tensor_free(&t);
        b.n = 0;
        const unsigned char u8be[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe};
        hand_record(&b, 1, "{'descr': '>u8', 'fortran_order': False, 'shape': (), }", u8be, 8);
        CHECK(read_both(&b, &t, &err) == MGE_OK && t.dtype == MGE_U64 &&
              ((uint64_t *)t.data)[0] == UINT64_MAX - 1);
        mge_tensor_free(&t);
        b.n = 0;
        hand_record(&b, 1, "{'descr': '|u4', 'fortran_order': False, 'shape': (), }", u8be, 4);
        CHECK(read_both(&b, &t, &err) == MGE_ERR_FORMAT && strstr(err.msg, "byte order"));
    }
    /* header length beyond the bytes present */
    b.n = 0;
    hand_record(&b, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", data, 4);
    b.p[9] = 2; /* 512 + 54 */
    CHECK(read_both(&b, &t, &err) == MGE_ERR_FORMAT);
    /* not NPY at all */
    b.n = 0;
    mge_buf_put(&b, "hello, world\n", 13);
    CHECK(read_both(&b, &t, &err) == MGE_ERR_FORMAT);
    CHECK(strstr(err.msg, "not an NPY record") != NULL);
    b.n = 0;
    mge_buf_put(&b, "\x93NUM", 4);
    CHECK(read_both(&b, &t, &err) == MGE_ERR_FORMAT);
    CHECK(strstr(err.msg, "stream ends inside") != NULL);
    /* Python 2 long suffixes and spaces are fine */
    b.n = 0;
    hand_record(&b, 1, "{ 'descr' : '<f4' , 'fortran_order' : False , 'shape' : ( 1L , 2L ) }", data, 8);
    CHECK_OK(read_both(&b, &t, &err), err);
    CHECK(t.ndim == 2 && t.dims[1] == 2);
    mge_tensor_free(&t);
    mge_buf_free(&b);
}

static void test_write_errors(void)
{
    mge_error err;
    mge_buf b = {0};
    mge_tensor t;
    int64_t d[4] = {1, 8, 2, 2};
    make_tensor(&t, MGE_F32, 4, d);
    t.layout = MGE_LAYOUT_NCHW8C;
    CHECK(mge_npy_write_buf(&b, &t, &err) == MGE_ERR_UNSUPPORTED);
    t.layout = MGE_LAYOUT_DEFAULT;
    void *keep = t.data;
    t.data = NULL;
    CHECK(mge_npy_write_buf(&b, &t, &err) == MGE_ERR_INVALID);
    t.data = keep;
    mge_tensor_free(&t);
    /* a full disk */
    FILE *f = fopen("/dev/full", "wb");
    if (f) {
        make_tensor(&t, MGE_F32, 4, d);
        setvbuf(f, NULL, _IONBF, 0);
        CHECK(mge_npy_write(f, &t, &err) == MGE_ERR_IO);
        fclose(f);
        mge_tensor_free(&t);
    }
    mge_buf_free(&b);
}

/* ---------------------------------------------------------------- NPZ */

static void fill_list(mge_tlist *l)
{
    mge_error err;
    mge_tensor t;
    int64_t d2[2] = {3, 4}, d1[1] = {5};
    make_tensor(&t, MGE_F32, 2, d2);
    CHECK_OK(mge_tlist_add(l, "layer1.0.conv1.weight", &t, &err), err);
    make_tensor(&t, MGE_I64, 0, d1);
    CHECK_OK(mge_tlist_add(l, "bn1.num_batches_tracked", &t, &err), err);
    make_tensor(&t, MGE_BF16, 1, d1);
    CHECK_OK(mge_tlist_add(l, "half", &t, &err), err);
    make_tensor(&t, MGE_BOOL, 2, d2);
    CHECK_OK(mge_tlist_add(l, "mask", &t, &err), err);
}

static void check_list(const mge_tlist *l)
{
    int64_t d2[2] = {3, 4}, d1[1] = {5};
    CHECK(l->n == 4);
    if (l->n != 4)
        return;
    CHECK(strcmp(l->names[0], "layer1.0.conv1.weight") == 0 && same_values(&l->t[0], MGE_F32, 2, d2));
    CHECK(strcmp(l->names[1], "bn1.num_batches_tracked") == 0 && same_values(&l->t[1], MGE_I64, 0, d1));
    CHECK(strcmp(l->names[2], "half") == 0 && same_values(&l->t[2], MGE_BF16, 1, d1));
    CHECK(strcmp(l->names[3], "mask") == 0 && same_values(&l->t[3], MGE_BOOL, 2, d2));
}

static void test_npz_roundtrip(void)
{
    mge_error err;
    mge_tlist l = {0}, back = {0};
    mge_buf z = {0}, z2 = {0};
    fill_list(&l);
    CHECK_OK(mge_npz_write(&l, &z, &err), err);
    CHECK(mge_npz_is_zip(z.p, z.n) && !mge_npy_is_npy(z.p, z.n));
    CHECK_OK(mge_npz_write(&l, &z2, &err), err);
    CHECK(z.n == z2.n && memcmp(z.p, z2.p, z.n) == 0); /* deterministic */
    /* ... in every time zone (zip's DOS time is local time) */
    const char *old_tz = getenv("TZ");
    char *keep_tz = old_tz ? strdup(old_tz) : NULL;
    const char *zones[] = {"UTC0", "XYZ-14", "ABC+12"};
    for (int i = 0; i < 3; i++) {
        setenv("TZ", zones[i], 1);
        tzset();
        z2.n = 0;
        CHECK_OK(mge_npz_write(&l, &z2, &err), err);
        CHECK_MSG(z.n == z2.n && memcmp(z.p, z2.p, z.n) == 0, "TZ=%s", zones[i]);
    }
    if (keep_tz)
        setenv("TZ", keep_tz, 1);
    else
        unsetenv("TZ");
    tzset();
    free(keep_tz);
    /* the fixed time, as zip readers show it: 2000-01-01 12:00:00 (offsets 10..13 of the first local header) */
    CHECK(z.n > 14 && (unsigned char)z.p[10] == 0x00 && (unsigned char)z.p[11] == 0x60 &&
          (unsigned char)z.p[12] == 0x21 && (unsigned char)z.p[13] == 0x28);
    CHECK_OK(mge_npz_read_mem(z.p, z.n, &back, &err), err);
    check_list(&back);
    mge_tlist_free(&back);

    char dir[] = "/tmp/mge-npz-XXXXXX", path[64], fifo[64];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/a.npz", dir);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(z.p, 1, z.n, f) == z.n);
    if (f)
        fclose(f);
    CHECK_OK(mge_npz_read_path(path, &back, &err), err);
    check_list(&back);
    mge_tlist_free(&back);
    CHECK(mge_npz_read_path("/nonexistent/x.npz", &back, &err) != MGE_OK && back.n == 0);

    /* a FIFO is not seekable: the streaming reader walks the local headers */
    snprintf(fifo, sizeof fifo, "%s/pipe", dir);
    CHECK(mkfifo(fifo, 0600) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        FILE *w = fopen(fifo, "wb");
        size_t k = w ? fwrite(z.p, 1, z.n, w) : 0;
        if (w)
            fclose(w);
        _exit(k == z.n ? 0 : 1);
    }
    CHECK(pid > 0);
    CHECK_OK(mge_npz_read_path(fifo, &back, &err), err);
    check_list(&back);
    mge_tlist_free(&back);
    int st = 0;
    if (pid > 0)
        waitpid(pid, &st, 0);
    unlink(fifo);
    unlink(path);
    rmdir(dir);

    mge_tlist_free(&l);
    mge_buf_free(&z);
    mge_buf_free(&z2);
}

/* A zip with the given entries (name, bytes) written straight with libarchive. */
static void raw_zip(mge_buf *out, int n, const char *const *names, const mge_buf *data, int deflate)
{
    struct archive *a = archive_write_new();
    archive_write_set_format_zip(a);
    if (deflate)
        archive_write_set_format_option(a, "zip", "compression", "deflate");
    size_t used = 0;
    static char space[1 << 16];
    CHECK(archive_write_open_memory(a, space, sizeof space, &used) == ARCHIVE_OK);
    struct archive_entry *e = archive_entry_new();
    for (int i = 0; i < n; i++) {
        archive_entry_clear(e);
        archive_entry_set_pathname(e, names[i]);
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, 0644);
        archive_entry_set_size(e, (la_int64_t)data[i].n);
        CHECK(archive_write_header(a, e) == ARCHIVE_OK);
        CHECK(archive_write_data(a, data[i].p, data[i].n) == (la_ssize_t)data[i].n);
    }
    archive_entry_free(e);
    archive_write_close(a);
    archive_write_free(a);
    out->n = 0;
    mge_buf_put(out, space, used);
}

static void test_npz_errors(void)
{
    mge_error err;
    mge_tlist l = {0}, back = {0};
    mge_buf z = {0}, rec[3] = {{0}, {0}, {0}};
    mge_tensor t;
    int64_t d[1] = {7};
    for (int i = 0; i < 3; i++) {
        make_tensor(&t, MGE_F32, 1, d);
        CHECK_OK(mge_npy_write_buf(&rec[i], &t, &err), err);
        mge_tensor_free(&t);
    }
    /* deflated entries read too */
    const char *ok[] = {"a.npy", "b.npy"};
    raw_zip(&z, 2, ok, rec, 1);
    CHECK_OK(mge_npz_read_mem(z.p, z.n, &back, &err), err);
    CHECK(back.n == 2 && strcmp(back.names[1], "b") == 0 && same_values(&back.t[1], MGE_F32, 1, d));
    mge_tlist_free(&back);
    const char *dup[] = {"a.npy", "b.npy", "a.npy"};
    raw_zip(&z, 3, dup, rec, 0);
    CHECK(mge_npz_read_mem(z.p, z.n, &back, &err) == MGE_ERR_FORMAT);
    CHECK_MSG(strstr(err.msg, "'a' appears twice") != NULL, "%s", err.msg);
    CHECK(back.n == 0);
    const char *txt[] = {"a.npy", "readme.txt"};
    raw_zip(&z, 2, txt, rec, 0);
    CHECK(mge_npz_read_mem(z.p, z.n, &back, &err) == MGE_ERR_FORMAT);
    CHECK(strstr(err.msg, "readme.txt") != NULL && back.n == 0);
    /* an entry with a bad record names the entry */
    rec[1].p[20] = 'X';
    raw_zip(&z, 2, ok, rec, 0);
    CHECK(mge_npz_read_mem(z.p, z.n, &back, &err) != MGE_OK);
    CHECK_MSG(strstr(err.msg, "'b.npy'") || strstr(err.msg, "'b'"), "%s", err.msg);
    CHECK(back.n == 0);
    /* trailing bytes after the array */
    mge_buf_put(&rec[0], "xx", 2);
    raw_zip(&z, 1, ok, rec, 0);
    CHECK(mge_npz_read_mem(z.p, z.n, &back, &err) == MGE_ERR_FORMAT);
    CHECK(back.n == 0);
    /* garbage */
    CHECK(mge_npz_read_mem("PK\3\4 garbage here", 17, &back, &err) != MGE_OK);
    CHECK(mge_npz_read_mem("", 0, &back, &err) != MGE_OK);
    /* the writer refuses duplicate and empty names, leaving out unchanged */
    make_tensor(&t, MGE_F32, 1, d);
    CHECK_OK(mge_tlist_add(&l, "w", &t, &err), err);
    make_tensor(&t, MGE_F32, 1, d);
    CHECK_OK(mge_tlist_add(&l, "w", &t, &err), err);
    z.n = 0;
    CHECK(mge_npz_write(&l, &z, &err) == MGE_ERR_INVALID && z.n == 0);
    l.t[1].layout = MGE_LAYOUT_NCHW8C;
    l.names[1][0] = 'v';
    CHECK(mge_npz_write(&l, &z, &err) == MGE_ERR_UNSUPPORTED && z.n == 0);
    CHECK(strstr(err.msg, "'v'") != NULL);
    mge_tlist_free(&l);
    /* an empty list is an empty archive */
    CHECK_OK(mge_npz_write(&l, &z, &err), err);
    CHECK(mge_npz_is_zip(z.p, z.n));
    CHECK_OK(mge_npz_read_mem(z.p, z.n, &back, &err), err);
    CHECK(back.n == 0);
    for (int i = 0; i < 3; i++)
        mge_buf_free(&rec[i]);
    mge_buf_free(&z);
}

/* ---------------------------------------------------------------- params */

static mge_graph *small_graph(void)
{
    mge_error err;
    mge_graph *g = mge_graph_new();
    int64_t x[4] = {MGE_DIM_N, 3, 8, 8}, w[4] = {4, 3, 3, 3}, c[1] = {4};
    CHECK(mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 4, x, &err) >= 0);
    CHECK(mge_graph_add_value(g, "conv1.weight", MGE_VAL_PARAM, MGE_F32, 4, w, &err) >= 0);
    CHECK(mge_graph_add_value(g, "conv1.bias", MGE_VAL_PARAM, MGE_F32, 1, c, &err) >= 0);
    CHECK(mge_graph_add_value(g, "bn1.weight", MGE_VAL_PARAM, MGE_BF16, 1, c, &err) >= 0);
    CHECK(mge_graph_add_value(g, "bn1.running_mean", MGE_VAL_STATE, MGE_F32, 1, c, &err) >= 0);
    CHECK(mge_graph_add_value(g, "bn1.num_batches_tracked", MGE_VAL_STATE, MGE_I64, 0, c, &err) >= 0);
    CHECK(mge_graph_add_value(g, "scale", MGE_VAL_CONST, MGE_F32, 1, c, &err) >= 0);
    return g;
}

static void add(mge_tlist *l, const char *name, mge_dtype dt, int ndim, const int64_t *dims)
{
    mge_error err;
    mge_tensor t;
    make_tensor(&t, dt, ndim, dims);
    CHECK_OK(mge_tlist_add(l, name, &t, &err), err);
}

static void full_list(mge_tlist *l)
{
    int64_t w[4] = {4, 3, 3, 3}, c[1] = {4};
    add(l, "bn1.num_batches_tracked", MGE_I64, 0, c); /* any order */
    add(l, "conv1.weight", MGE_F32, 4, w);
    add(l, "conv1.bias", MGE_F32, 1, c);
    add(l, "bn1.weight", MGE_F32, 1, c);          /* f32 binds to bf16 */
    add(l, "bn1.running_mean", MGE_F32, 1, c);
}

static int graph_has_data(const mge_graph *g)
{
    int n = 0;
    for (int v = 0; v < g->nvalues; v++)
        n += g->values[v].data != NULL;
    return n;
}

static void test_params(void)
{
    mge_error err;
    mge_graph *g = small_graph();
    mge_tlist l = {0}, ex = {0};
    int64_t w[4] = {4, 3, 3, 3}, c[1] = {4}, c5[1] = {5};

    CHECK_OK(mge_params_export(g, &ex, &err), err);
    CHECK(ex.n == 0);

    /* missing: everything, listed by name */
    CHECK(mge_params_bind(g, &l, 0, &err) == MGE_ERR_INVALID);
    CHECK_MSG(strstr(err.msg, "5 parameters without a value") && strstr(err.msg, "conv1.weight") &&
                  strstr(err.msg, "bn1.num_batches_tracked") && !strstr(err.msg, "scale"),
              "%s", err.msg);
    CHECK_OK(mge_params_bind(g, &l, 1, &err), err);

    full_list(&l);
    /* unknown names: 12 of them, listed up to 10 then "and 2 more"; input x is not bindable */
    mge_tlist u = {0};
    full_list(&u);
    for (int i = 0; i < 11; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "fc%d.weight", i);
        add(&u, nm, MGE_F32, 1, c);
    }
    add(&u, "x", MGE_F32, 1, c);
    CHECK(mge_params_bind(g, &u, 0, &err) == MGE_ERR_INVALID);
    CHECK_MSG(strstr(err.msg, "12 unknown names") && strstr(err.msg, "fc0.weight") && strstr(err.msg, "fc9.weight") &&
                  !strstr(err.msg, "fc10.weight") && strstr(err.msg, "and 2 more"),
              "%s", err.msg);
    CHECK(mge_params_bind(g, &u, 1, &err) == MGE_ERR_INVALID); /* partial still refuses unknown names */
    CHECK(graph_has_data(g) == 0);
    mge_tlist_free(&u);

    /* shape and dtype mismatches name the tensor, expected and got */
    add(&u, "conv1.bias", MGE_F32, 1, c5);
    CHECK(mge_params_bind(g, &u, 1, &err) == MGE_ERR_SHAPE);
    CHECK_MSG(strcmp(err.msg, "'conv1.bias': expected f32[4], got f32[5]") == 0, "%s", err.msg);
    mge_tlist_free(&u);
    add(&u, "bn1.num_batches_tracked", MGE_I32, 0, c);
    CHECK(mge_params_bind(g, &u, 1, &err) == MGE_ERR_SHAPE);
    CHECK_MSG(strstr(err.msg, "expected i64[]") && strstr(err.msg, "got i32[]"), "%s", err.msg);
    mge_tlist_free(&u);
    add(&u, "conv1.weight", MGE_F32, 2, w);
    CHECK(mge_params_bind(g, &u, 1, &err) == MGE_ERR_SHAPE);
    mge_tlist_free(&u);
    CHECK(graph_has_data(g) == 0);

    /* partial: one tensor, the rest reported missing unless allowed */
    add(&u, "conv1.bias", MGE_F32, 1, c);
    CHECK(mge_params_bind(g, &u, 0, &err) == MGE_ERR_INVALID);
    CHECK_MSG(strstr(err.msg, "4 parameters without a value") && !strstr(err.msg, "conv1.bias"), "%s", err.msg);
    CHECK(graph_has_data(g) == 0);
    CHECK_OK(mge_params_bind(g, &u, 1, &err), err);
    CHECK(graph_has_data(g) == 1);
    mge_tlist_free(&u);
    /* now the rest are missing, conv1.bias is not */
    add(&u, "conv1.weight", MGE_F32, 4, w);
    CHECK(mge_params_bind(g, &u, 0, &err) == MGE_ERR_INVALID);
    CHECK_MSG(strstr(err.msg, "3 parameters") && !strstr(err.msg, "conv1.bias"), "%s", err.msg);
    mge_tlist_free(&u);

    /* the full list binds; values take copies */
    CHECK_OK(mge_params_bind(g, &l, 0, &err), err);
    CHECK(graph_has_data(g) == 5);
    ((float *)l.t[1].data)[0] = 1234.0f;
    int wv = mge_graph_find(g, "conv1.weight");
    CHECK(wv >= 0 && g->values[wv].data && ((float *)g->values[wv].data->data)[0] == -3.0f);
    int bv = mge_graph_find(g, "bn1.weight");
    CHECK(bv >= 0 && g->values[bv].data && g->values[bv].data->dtype == MGE_BF16);
    /* a constant binds too, and is not exported */
    add(&u, "scale", MGE_F32, 1, c);
    CHECK_OK(mge_params_bind(g, &u, 0, &err), err);
    mge_tlist_free(&u);

    /* export: params and state in value order, by name, deep copies */
    CHECK_OK(mge_params_export(g, &ex, &err), err);
    const char *order[] = {"conv1.weight", "conv1.bias", "bn1.weight", "bn1.running_mean", "bn1.num_batches_tracked"};
    CHECK(ex.n == 5);
    for (int i = 0; i < ex.n && i < 5; i++)
        CHECK(strcmp(ex.names[i], order[i]) == 0);
    if (ex.n == 5) {
        CHECK(same_values(&ex.t[0], MGE_F32, 4, w));
        CHECK(ex.t[2].dtype == MGE_BF16);
        CHECK(ex.t[4].dtype == MGE_I64 && ex.t[4].ndim == 0);
        CHECK(ex.t[0].data != g->values[wv].data->data);
    }

    /* export -> npz -> read -> bind into a fresh graph (bf16 travels as f32) */
    mge_buf z = {0};
    mge_tlist back = {0};
    CHECK_OK(mge_npz_write(&ex, &z, &err), err);
    CHECK_OK(mge_npz_read_mem(z.p, z.n, &back, &err), err);
    CHECK(back.n == 5 && back.t[2].dtype == MGE_F32);
    mge_graph *g2 = small_graph();
    CHECK_OK(mge_params_bind(g2, &back, 0, &err), err);
    int bv2 = mge_graph_find(g2, "bn1.weight");
    CHECK(bv2 >= 0 && g2->values[bv2].data && g2->values[bv2].data->dtype == MGE_BF16 &&
          memcmp(g2->values[bv2].data->data, g->values[bv].data->data, 8) == 0);
    mge_graph_free(g2);
    mge_tlist_free(&back);
    mge_buf_free(&z);

    mge_tlist_free(&ex);
    mge_tlist_free(&l);
    mge_graph_free(g);
}

/* ---------------------------------------------------------------- numpy */

static const char *oracle_script(void)
{
    static const char *cands[] = {"tests/oracle/test_npy.py", "../tests/oracle/test_npy.py",
                                  "../../tests/oracle/test_npy.py"};
    for (size_t i = 0; i < sizeof cands / sizeof cands[0]; i++)
        if (access(cands[i], R_OK) == 0)
            return cands[i];
    return NULL;
}

/* numpy writes records (tests/oracle/test_npy.py gen), we read them; we
 * write records, numpy loads them (test_npy.py check). */
static void test_numpy(void)
{
    const char *py = getenv("PYTHON") ? getenv("PYTHON") : "/usr/bin/python3";
    char cmd[1024], path[512];
    const char *script = oracle_script();
    CHECK_MSG(script != NULL, "tests/oracle/test_npy.py not found (run from the repository root)");
    if (!script)
        return;
    snprintf(cmd, sizeof cmd, "%s -c 'import numpy' 2>/dev/null", py);
    if (system(cmd) != 0) {
        printf("test_npy: SKIP numpy round trips: numpy is not installed for %s\n", py);
        return;
    }
    char dir[] = "/tmp/mge-npy-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    snprintf(cmd, sizeof cmd, "%s %s gen %s", py, script, dir);
    CHECK(system(cmd) == 0);

    /* stream.npy: the records listed in manifest.txt as "descr ndim dims..."
     * holding arange(n) in C order (bool: n % 3 == 0) */
    snprintf(path, sizeof path, "%s/manifest.txt", dir);
    FILE *man = fopen(path, "r");
    snprintf(path, sizeof path, "%s/stream.npy", dir);
    FILE *f = fopen(path, "rb");
    CHECK(man && f);
    int nrec = 0;
    char line[256];
    while (man && f && fgets(line, sizeof line, man)) {
        char kind[16];
        int ndim, pos;
        int64_t dims[MGE_MAX_DIMS];
        if (sscanf(line, "%15s %d%n", kind, &ndim, &pos) != 2 || ndim < 0 || ndim > MGE_MAX_DIMS)
            break;
        for (int k = 0; k < ndim; k++) {
            long long d;
            int adv;
            sscanf(line + pos, "%lld%n", &d, &adv);
            dims[k] = d;
            pos += adv;
        }
        mge_tensor t;
        mge_error err;
        memset(&t, 0, sizeof t);
        CHECK_OK(mge_npy_read(f, &t, &err), err);
        nrec++;
        CHECK_MSG(t.ndim == ndim, "record %d (%s)", nrec, kind);
        int ok = t.ndim == ndim;
        for (int k = 0; ok && k < ndim; k++)
            ok = t.dims[k] == dims[k];
        int64_t n = ok ? mge_tensor_numel(&t) : 0;
        for (int64_t i = 0; ok && i < n; i++) {
            switch (t.dtype) {
            case MGE_F32: ok = ((float *)t.data)[i] == (float)i; break;
            case MGE_F16: ok = mge_f16_to_f32(((uint16_t *)t.data)[i]) == (float)i; break;
            case MGE_I8: ok = ((int8_t *)t.data)[i] == (int8_t)i; break;
            case MGE_U8: ok = ((uint8_t *)t.data)[i] == (uint8_t)i; break;
            case MGE_I32: ok = ((int32_t *)t.data)[i] == (int32_t)i; break;
            case MGE_I64: ok = ((int64_t *)t.data)[i] == i; break;
            case MGE_BOOL: ok = ((uint8_t *)t.data)[i] == (i % 3 == 0); break;
            case MGE_F64: ok = ((double *)t.data)[i] == (double)i; break;
            case MGE_I16: ok = ((int16_t *)t.data)[i] == (int16_t)i; break;
            case MGE_U16: ok = ((uint16_t *)t.data)[i] == (uint16_t)i; break;
            case MGE_U32: ok = ((uint32_t *)t.data)[i] == (uint32_t)i; break;
            case MGE_U64: ok = ((uint64_t *)t.data)[i] == (uint64_t)i; break;
            default: ok = 0;
            }
        }
        CHECK_MSG(ok, "record %d (%s) differs from numpy's", nrec, kind);
        mge_tensor_free(&t);
    }
    CHECK(nrec >= 10);
    if (f) {
        mge_tensor t;
        mge_error err;
        CHECK(mge_npy_read(f, &t, &err) == MGE_ERR_EOF);
        fclose(f);
    }
    if (man)
        fclose(man);
    /* refused: complex128 */
    snprintf(path, sizeof path, "%s/c16.npy", dir);
    f = fopen(path, "rb");
    CHECK(f != NULL);
    if (f) {
        mge_tensor t;
        mge_error err;
        CHECK(mge_npy_read(f, &t, &err) == MGE_ERR_UNSUPPORTED && strstr(err.msg, "complex128"));
        fclose(f);
    }
    /* savez and savez_compressed */
    for (int c = 0; c < 2; c++) {
        mge_tlist l = {0};
        mge_error err;
        snprintf(path, sizeof path, "%s/%s.npz", dir, c ? "compressed" : "plain");
        CHECK_OK(mge_npz_read_path(path, &l, &err), err);
        CHECK(l.n == 3 && mge_tlist_find(&l, "a.b.weight") >= 0 && mge_tlist_find(&l, "count") >= 0);
        int k = mge_tlist_find(&l, "count");
        CHECK(k >= 0 && l.t[k].dtype == MGE_I64 && l.t[k].ndim == 0 && *(int64_t *)l.t[k].data == 7);
        mge_tlist_free(&l);
    }

    /* we write, numpy checks */
    snprintf(path, sizeof path, "%s/ours.npy", dir);
    f = fopen(path, "wb");
    CHECK(f != NULL);
    int64_t dims[MGE_MAX_DIMS];
    for (int dt = 0; f && dt < MGE_NDTYPES; dt++)
        for (int r = 0; r <= 3; r++) {
            mge_tensor t;
            mge_error err;
            rank_dims(r, dims);
            make_tensor(&t, (mge_dtype)dt, r, dims);
            CHECK_OK(mge_npy_write(f, &t, &err), err);
            mge_tensor_free(&t);
        }
    if (f)
        fclose(f);
    mge_tlist l = {0};
    mge_buf z = {0};
    mge_error err;
    fill_list(&l);
    CHECK_OK(mge_npz_write(&l, &z, &err), err);
    snprintf(path, sizeof path, "%s/ours.npz", dir);
    f = fopen(path, "wb");
    CHECK(f && fwrite(z.p, 1, z.n, f) == z.n);
    if (f)
        fclose(f);
    mge_tlist_free(&l);
    mge_buf_free(&z);
    snprintf(cmd, sizeof cmd, "%s %s check %s", py, script, dir);
    CHECK(system(cmd) == 0);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

/* ---------------------------------------------------------------- driver */

static int die(const char *what, const mge_error *err)
{
    fprintf(stderr, "test_npy: %s: %s\n", what, err->msg);
    return 1;
}

static int drive_copy(const char *in, const char *out)
{
    FILE *f = strcmp(in, "-") ? fopen(in, "rb") : stdin;
    FILE *o = strcmp(out, "-") ? fopen(out, "wb") : stdout;
    mge_error err;
    if (!f || !o) {
        fprintf(stderr, "test_npy: cannot open %s\n", f ? out : in);
        return 1;
    }
    for (;;) {
        mge_tensor t;
        mge_status s = mge_npy_read(f, &t, &err);
        if (s == MGE_ERR_EOF)
            break;
        if (s)
            return die(in, &err);
        s = mge_npy_write(o, &t, &err);
        mge_tensor_free(&t);
        if (s)
            return die(out, &err);
    }
    return fclose(o) != 0;
}

static int write_npz(const mge_tlist *l, const char *out)
{
    mge_buf z = {0};
    mge_error err;
    if (mge_npz_write(l, &z, &err))
        return die(out, &err);
    FILE *o = fopen(out, "wb");
    int bad = !o || fwrite(z.p, 1, z.n, o) != z.n;
    if (o)
        bad |= fclose(o) != 0;
    mge_buf_free(&z);
    return bad;
}

static int drive_npz_copy(const char *in, const char *out)
{
    mge_tlist l = {0};
    mge_error err;
    if (mge_npz_read_path(in, &l, &err))
        return die(in, &err);
    int r = write_npz(&l, out);
    mge_tlist_free(&l);
    return r;
}

/* SPEC lines: "param|state NAME DTYPE D0 D1 ..." */
static int drive_bind(const char *spec, const char *npz, const char *out)
{
    FILE *f = fopen(spec, "r");
    mge_graph *g = mge_graph_new();
    mge_error err;
    char line[512];
    if (!f || !g)
        return 1;
    while (fgets(line, sizeof line, f)) {
        char kind[16], name[256], dt[16];
        int pos, ndim = 0;
        int64_t dims[MGE_MAX_DIMS];
        mge_dtype d;
        if (sscanf(line, "%15s %255s %15s%n", kind, name, dt, &pos) != 3 || !mge_dtype_parse(dt, strlen(dt), &d))
            return 1;
        long long v;
        int adv;
        while (ndim < MGE_MAX_DIMS && sscanf(line + pos, "%lld%n", &v, &adv) == 1) {
            dims[ndim++] = v;
            pos += adv;
        }
        if (mge_graph_add_value(g, name, strcmp(kind, "param") ? MGE_VAL_STATE : MGE_VAL_PARAM, d, ndim, dims,
                                &err) < 0)
            return die(spec, &err);
    }
    fclose(f);
    mge_tlist l = {0}, ex = {0};
    if (mge_npz_read_path(npz, &l, &err))
        return die(npz, &err);
    if (mge_params_bind(g, &l, 0, &err))
        return die("bind", &err);
    if (mge_params_export(g, &ex, &err))
        return die("export", &err);
    int r = write_npz(&ex, out);
    mge_tlist_free(&l);
    mge_tlist_free(&ex);
    mge_graph_free(g);
    return r;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--copy") == 0)
        return drive_copy(argv[2], argv[3]);
    if (argc == 4 && strcmp(argv[1], "--npz-copy") == 0)
        return drive_npz_copy(argv[2], argv[3]);
    if (argc == 5 && strcmp(argv[1], "--bind") == 0)
        return drive_bind(argv[2], argv[3], argv[4]);
    signal(SIGPIPE, SIG_IGN);
    RUN(test_roundtrip_file);
    RUN(test_roundtrip_mem);
    RUN(test_header_text);
    RUN(test_truncated);
    RUN(test_absurd_sizes);
    RUN(test_big_endian);
    RUN(test_fortran);
    RUN(test_versions);
    RUN(test_hostile_headers);
    RUN(test_write_errors);
    RUN(test_npz_roundtrip);
    RUN(test_npz_errors);
    RUN(test_params);
    RUN(test_numpy);
    return unit_done();
}
