/* test_dataset.c — dataset loading (IDX, npz, NPY streams, tar/zip archives),
 * binding to model inputs, splits and the batch loader. Expected IDX values
 * come from the file bytes as /usr/bin/python3 + gzip read them. */
#include "mge.h"
#include "unit.h"
#include "unit_tmp.h"

#include <archive.h>
#include <archive_entry.h>
#include <ftw.h>
#include <stdint.h>
#include <unistd.h>

#define SAMPLE "samples/data/fashion-mnist"

static mge_tensor make(mge_dtype dt, int ndim, const int64_t *dims, int start)
{
    mge_tensor t;
    mge_error err;
    mge_tensor_alloc(&t, dt, ndim, dims, &err);
    int64_t n = mge_tensor_numel(&t);
    for (int64_t i = 0; i < n; i++) {
        switch (dt) {
        case MGE_F32: ((float *)t.data)[i] = (float)(start + i) * 0.5f; break;
        case MGE_U8: ((uint8_t *)t.data)[i] = (uint8_t)(start + i); break;
        case MGE_I32: ((int32_t *)t.data)[i] = (int32_t)(start + i); break;
        case MGE_I64: ((int64_t *)t.data)[i] = start + i; break;
        default: break;
        }
    }
    return t;
}

/* A graph with inputs x : xdt[N, xdims...] and label : ldt[N]. */
static mge_graph *model(mge_dtype xdt, int xnd, const int64_t *xdims, mge_dtype ldt, int *in)
{
    mge_error err;
    mge_graph *g = mge_graph_new();
    int64_t d[MGE_MAX_DIMS] = {MGE_DIM_N};
    memcpy(d + 1, xdims, sizeof(int64_t) * (size_t)xnd);
    in[0] = mge_graph_add_value(g, "x", MGE_VAL_INPUT, xdt, xnd + 1, d, &err);
    in[1] = mge_graph_add_value(g, "label", MGE_VAL_INPUT, ldt, 1, d, &err);
    CHECK(in[0] >= 0 && in[1] >= 0);
    return g;
}

/* ---------------------------------------------------------------- IDX */

/* count, dims, first labels and the image byte sum, read by python. */
typedef struct ref_idx {
    long count, rows, cols, sum, labels[8];
    int ok;
} ref_idx;

static ref_idx python_ref(const char *prefix)
{
    ref_idx r;
    memset(&r, 0, sizeof r);
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import gzip,struct,sys\n"
             "p=sys.argv[1]\n"
             "im=gzip.open(p+'-images-idx3-ubyte.gz').read(); lb=gzip.open(p+'-labels-idx1-ubyte.gz').read()\n"
             "n,h,w=struct.unpack('>III',im[4:16])\n"
             "print(n,h,w,sum(im[16:]),*lb[8:16])\" %s 2>/dev/null", prefix);
    FILE *f = popen(cmd, "r");
    if (!f)
        return r;
    r.ok = fscanf(f, "%ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld", &r.count, &r.rows, &r.cols, &r.sum,
                  &r.labels[0], &r.labels[1], &r.labels[2], &r.labels[3], &r.labels[4], &r.labels[5], &r.labels[6],
                  &r.labels[7]) == 12;
    pclose(f);
    return r;
}

static void check_against(const mge_dataset *ds, const ref_idx *r)
{
    CHECK(ds->n == 2 && ds->positional && !ds->stream);
    if (ds->n != 2)
        return;
    CHECK(ds->count == r->count);
    CHECK(ds->t[0].dtype == MGE_U8 && ds->t[0].ndim == 3 && ds->t[0].dims[1] == r->rows && ds->t[0].dims[2] == r->cols);
    CHECK(ds->t[1].dtype == MGE_U8 && ds->t[1].ndim == 1 && ds->t[1].dims[0] == r->count);
    CHECK(ds->names && strcmp(ds->names[0], "images") == 0 && strcmp(ds->names[1], "labels") == 0);
    long sum = 0;
    for (size_t i = 0; i < ds->t[0].nbytes; i++)
        sum += ((const uint8_t *)ds->t[0].data)[i];
    CHECK(sum == r->sum);
    for (int i = 0; i < 8; i++)
        CHECK(((const uint8_t *)ds->t[1].data)[i] == r->labels[i]);
}

static void test_idx_sample(void)
{
    ref_idx tr = python_ref(SAMPLE "/train"), te = python_ref(SAMPLE "/t10k");
    CHECK_MSG(tr.ok && te.ok, "python3 could not read the sample");
    if (!tr.ok || !te.ok)
        return;
    CHECK(tr.count == 4000 && te.count == 1000);
    mge_dataset ds;
    mge_error err;
    /* the directory (train preferred), DIR:test, a prefix, PREFIX:test */
    CHECK_OK(mge_dataset_load(SAMPLE, &ds, &err), err);
    check_against(&ds, &tr);
    CHECK(ds.source && strstr(ds.source, "train"));
    mge_dataset_free(&ds);
    CHECK_OK(mge_dataset_load(SAMPLE ":test", &ds, &err), err);
    check_against(&ds, &te);
    mge_dataset_free(&ds);
    CHECK_OK(mge_dataset_load(SAMPLE "/train", &ds, &err), err);
    check_against(&ds, &tr);
    mge_dataset_free(&ds);
    CHECK_OK(mge_dataset_load(SAMPLE "/train:test", &ds, &err), err);
    check_against(&ds, &te);
    mge_dataset_free(&ds);
    CHECK_OK(mge_dataset_load(SAMPLE "/t10k", &ds, &err), err);
    check_against(&ds, &te);
    mge_dataset_free(&ds);

    /* gz and plain give the same arrays: an ungzipped copy of the pair */
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "mkdir -p %s/plain && gzip -dc " SAMPLE "/t10k-images-idx3-ubyte.gz > %s/plain/t10k-images-idx3-ubyte"
             " && gzip -dc " SAMPLE "/t10k-labels-idx1-ubyte.gz > %s/plain/t10k-labels-idx1-ubyte", tmpdir, tmpdir, tmpdir);
    CHECK(system(cmd) == 0);
    CHECK_OK(mge_dataset_load(tmp("plain"), &ds, &err), err); /* a lone pair, whatever its name */
    check_against(&ds, &te);
    mge_dataset_free(&ds);
    /* a single IDX file: one positional array */
    CHECK_OK(mge_dataset_load(tmp("plain/t10k-labels-idx1-ubyte"), &ds, &err), err);
    CHECK(ds.n == 1 && ds.count == 1000 && ds.names[0] == NULL && ds.positional);
    mge_dataset_free(&ds);
    CHECK_OK(mge_dataset_load(SAMPLE "/t10k-labels-idx1-ubyte.gz", &ds, &err), err);
    CHECK(ds.n == 1 && ds.count == 1000 && ds.t[0].dtype == MGE_U8);
    mge_dataset_free(&ds);
}

static void test_fashion_mnist(void)
{
    mge_dataset ds;
    mge_error err;
    mge_status s = mge_dataset_load("fashion-mnist:test", &ds, &err);
    if (access("/usr/share/datasets/fashion-mnist", F_OK) != 0) {
        CHECK(s == MGE_ERR_IO && strstr(err.msg, "dataset-fashion-mnist"));
        return;
    }
    CHECK_OK(s, err);
    CHECK(ds.count == 10000 && ds.n == 2 && ds.t[0].dims[1] == 28 && ds.t[0].dims[2] == 28);
    CHECK(ds.source && strcmp(ds.source, "fashion-mnist test") == 0);
    mge_dataset_free(&ds);
}

static void put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16), p[2] = (unsigned char)(v >> 8), p[3] = (unsigned char)v;
}

static void test_idx_reader(void)
{
    mge_tensor t;
    mge_error err;
    /* i16 [2,3] big-endian -> i32 */
    unsigned char b[64] = {0, 0, 0x0B, 2};
    put_be32(b + 4, 2);
    put_be32(b + 8, 3);
    for (int i = 0; i < 6; i++) {
        int16_t v = (int16_t)(i * 1000 - 2500);
        b[12 + 2 * i] = (unsigned char)((uint16_t)v >> 8);
        b[13 + 2 * i] = (unsigned char)v;
    }
    CHECK_OK(mge_idx_read_mem(b, 24, &t, &err), err);
    CHECK(t.dtype == MGE_I32 && t.ndim == 2 && t.dims[0] == 2 && t.dims[1] == 3);
    if (t.data)
        CHECK(((int32_t *)t.data)[0] == -2500 && ((int32_t *)t.data)[5] == 2500);
    mge_tensor_free(&t);
    /* f64 [1] -> f32 */
    unsigned char d[16] = {0, 0, 0x0E, 1, 0, 0, 0, 1, 0x40, 0x09, 0x21, 0xfb, 0x54, 0x44, 0x2d, 0x18}; /* pi */
    CHECK_OK(mge_idx_read_mem(d, 16, &t, &err), err);
    CHECK(t.dtype == MGE_F32 && t.data && fabsf(((float *)t.data)[0] - 3.14159265f) < 1e-6f);
    mge_tensor_free(&t);
    /* truncated data, trailing bytes, ndim 0, huge dims, short header, bad dtype */
    CHECK(mge_idx_read_mem(b, 23, &t, &err) == MGE_ERR_FORMAT && strstr(err.msg, "truncated"));
    CHECK(mge_idx_read_mem(b, 25, &t, &err) == MGE_ERR_FORMAT && strstr(err.msg, "after"));
    unsigned char z[4] = {0, 0, 8, 0};
    CHECK(mge_idx_read_mem(z, 4, &t, &err) == MGE_ERR_FORMAT);
    unsigned char h[20] = {0, 0, 0x0E, 4};
    for (int i = 0; i < 4; i++)
        put_be32(h + 4 + 4 * i, 0xffffffffu);
    CHECK(mge_idx_read_mem(h, 20, &t, &err) == MGE_ERR_FORMAT);
    CHECK(mge_idx_read_mem(h, 10, &t, &err) == MGE_ERR_FORMAT && strstr(err.msg, "header"));
    unsigned char bad[8] = {0, 0, 0x0A, 1, 0, 0, 0, 0};
    CHECK(mge_idx_read_mem(bad, 8, &t, &err) != MGE_OK);
    /* a truncated gzip file through the dataset loader names the file */
    FILE *f = fopen(SAMPLE "/t10k-labels-idx1-ubyte.gz", "rb");
    unsigned char gz[4096];
    size_t n = f ? fread(gz, 1, sizeof gz, f) : 0;
    if (f)
        fclose(f);
    CHECK(n > 100);
    write_file(tmp("cut-labels-idx1-ubyte.gz"), gz, n - 30);
    mge_dataset ds;
    CHECK(mge_dataset_load(tmp("cut-labels-idx1-ubyte.gz"), &ds, &err) == MGE_ERR_FORMAT &&
          strstr(err.msg, "cut-labels"));
    CHECK(ds.n == 0 && ds.t == NULL);
}

/* ---------------------------------------------------------------- npz, streams, archives */

static void test_npz_and_stream(void)
{
    mge_error err;
    int64_t xd[3] = {5, 2, 3}, ld[1] = {5};
    mge_tlist l = {0};
    mge_tensor x = make(MGE_F32, 3, xd, 0), lab = make(MGE_I64, 1, ld, 0);
    mge_tlist_add(&l, "label", &lab, &err);
    mge_tlist_add(&l, "x", &x, &err);
    mge_buf b = {0};
    CHECK_OK(mge_npz_write(&l, &b, &err), err);
    write_file(tmp("d.npz"), b.p, b.n);
    mge_buf_free(&b);
    mge_tlist_free(&l);

    int in[2];
    int64_t per[2] = {2, 3};
    mge_graph *g = model(MGE_F32, 2, per, MGE_I32, in);
    mge_dataset ds;
    CHECK_OK(mge_dataset_load(tmp("d.npz"), &ds, &err), err);
    CHECK(ds.n == 2 && ds.count == 5 && !ds.positional);
    CHECK_OK(mge_dataset_bind(&ds, g, 2, in, NULL, &err), err); /* by name, whatever the order */
    CHECK(ds.n == 2 && strcmp(ds.names[0], "x") == 0 && ds.t[0].dtype == MGE_F32 && ds.t[1].dtype == MGE_I32);
    CHECK(((float *)ds.t[0].data)[7] == 3.5f && ((int32_t *)ds.t[1].data)[4] == 4);
    int64_t lo, hi;
    CHECK(mge_dataset_label_range(&ds, 1, &lo, &hi) == MGE_OK && lo == 0 && hi == 4);
    CHECK(mge_dataset_label_range(&ds, 0, &lo, &hi) == MGE_ERR_INVALID);
    mge_dataset_free(&ds);

    /* a stream: (x, label) groups of 3 and 2 samples; record i -> input i % 2 */
    int64_t a[3] = {3, 2, 3}, c[3] = {2, 2, 3}, la[1] = {3}, lc[1] = {2};
    mge_tensor r[4] = {make(MGE_F32, 3, a, 0), make(MGE_I64, 1, la, 0), make(MGE_F32, 3, c, 100), make(MGE_I64, 1, lc, 7)};
    for (int i = 0; i < 4; i++) {
        CHECK_OK(mge_npy_write_buf(&b, &r[i], &err), err);
        mge_tensor_free(&r[i]);
    }
    write_file(tmp("s.npy"), b.p, b.n);
    mge_buf_free(&b);
    CHECK_OK(mge_dataset_load(tmp("s.npy"), &ds, &err), err);
    CHECK(ds.n == 4 && ds.stream && ds.count == -1 && ds.names[0] == NULL);
    CHECK_OK(mge_dataset_bind(&ds, g, 2, in, NULL, &err), err);
    CHECK(ds.count == 5 && ds.t[0].dims[0] == 5 && !ds.stream);
    CHECK(((float *)ds.t[0].data)[18] == 50.0f && ((float *)ds.t[0].data)[17] == 8.5f && ((int32_t *)ds.t[1].data)[3] == 7);
    mge_dataset_free(&ds);
    /* 3 records for 2 inputs */
    CHECK_OK(mge_dataset_load(tmp("s.npy"), &ds, &err), err);
    mge_tensor_free(&ds.t[3]);
    ds.n = 3;
    CHECK(mge_dataset_bind(&ds, g, 2, in, NULL, &err) == MGE_ERR_INVALID && strstr(err.msg, "multiple"));
    CHECK(ds.n == 3 && ds.stream); /* unchanged */
    mge_dataset_free(&ds);
    mge_graph_free(g);
}

typedef struct member_spec {
    const char *path;
    mge_tensor t;
} member_spec;

static void write_archive(const char *path, int zip, int gz, member_spec *m, int n)
{
    struct archive *a = archive_write_new();
    if (zip)
        archive_write_set_format_zip(a);
    else
        archive_write_set_format_pax_restricted(a);
    if (gz)
        archive_write_add_filter_gzip(a);
    CHECK(archive_write_open_filename(a, path) == ARCHIVE_OK);
    struct archive_entry *e = archive_entry_new();
    for (int i = 0; i < n; i++) {
        mge_buf b = {0};
        mge_error err;
        CHECK_OK(mge_npy_write_buf(&b, &m[i].t, &err), err);
        archive_entry_clear(e);
        archive_entry_set_pathname(e, m[i].path);
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, 0644);
        archive_entry_set_size(e, (la_int64_t)b.n);
        CHECK(archive_write_header(a, e) == ARCHIVE_OK);
        CHECK(archive_write_data(a, b.p, b.n) == (la_ssize_t)b.n);
        mge_buf_free(&b);
    }
    archive_entry_free(e);
    CHECK(archive_write_close(a) == ARCHIVE_OK);
    archive_write_free(a);
}

static void test_archives(void)
{
    mge_error err;
    int64_t s1[2] = {2, 4}, s2[2] = {3, 4}, ld[1] = {5}, per[1] = {4};
    int in[2];
    mge_graph *g = model(MGE_F32, 1, per, MGE_I32, in);
    for (int kind = 0; kind < 3; kind++) { /* tar, tar.gz, zip */
        /* shards written out of order: joined in member-name order */
        member_spec m[3] = {{"./x/001.npy", make(MGE_F32, 2, s2, 100)},
                            {"label.npy", make(MGE_I64, 1, ld, 0)},
                            {"./x/000.npy", make(MGE_F32, 2, s1, 0)}};
        const char *path = tmp(kind == 0 ? "a.tar" : kind == 1 ? "a.tar.gz" : "a.zip");
        write_archive(path, kind == 2, kind == 1, m, 3);
        for (int i = 0; i < 3; i++)
            mge_tensor_free(&m[i].t);
        mge_dataset ds;
        CHECK_OK(mge_dataset_load(path, &ds, &err), err);
        CHECK(ds.n == 2 && ds.count == 5);
        CHECK_OK(mge_dataset_bind(&ds, g, 2, in, NULL, &err), err);
        if (ds.n == 2 && ds.count == 5) {
            const float *x = ds.t[0].data;
            CHECK(x[0] == 0.0f && x[7] == 3.5f && x[8] == 50.0f && x[19] == 55.5f);
        }
        mge_dataset_free(&ds);
    }
    /* shards that disagree, a name given twice, a non-.npy member */
    member_spec bad[2] = {{"x/0.npy", make(MGE_F32, 2, s1, 0)}, {"x/1.npy", make(MGE_I32, 2, s1, 0)}};
    write_archive(tmp("bad.tar"), 0, 0, bad, 2);
    mge_dataset ds;
    CHECK(mge_dataset_load(tmp("bad.tar"), &ds, &err) == MGE_ERR_SHAPE && strstr(err.msg, "x/1.npy"));
    member_spec twice[2] = {{"x/0.npy", bad[0].t}, {"x.npy", bad[1].t}};
    write_archive(tmp("twice.tar"), 0, 0, twice, 2);
    CHECK(mge_dataset_load(tmp("twice.tar"), &ds, &err) == MGE_ERR_FORMAT && strstr(err.msg, "twice"));
    member_spec other[1] = {{"README", bad[0].t}};
    write_archive(tmp("other.zip"), 1, 0, other, 1);
    CHECK(mge_dataset_load(tmp("other.zip"), &ds, &err) == MGE_ERR_FORMAT && strstr(err.msg, "README"));
    mge_tensor_free(&bad[0].t);
    mge_tensor_free(&bad[1].t);
    mge_graph_free(g);
}

/* ---------------------------------------------------------------- bind, errors */

static void test_bind_idx(void)
{
    mge_error err;
    mge_dataset ds;
    int in[2];
    int64_t chw[3] = {1, 28, 28};
    mge_graph *g = model(MGE_F32, 3, chw, MGE_I32, in);
    CHECK_OK(mge_dataset_load(SAMPLE ":test", &ds, &err), err);
    uint8_t px = 0, lb = 0;
    int64_t at = 0;
    if (ds.n == 2) {
        for (at = 0; at < 784 && !((uint8_t *)ds.t[0].data)[at]; at++)
            ;
        px = ((uint8_t *)ds.t[0].data)[at];
        lb = ((uint8_t *)ds.t[1].data)[999];
    }
    mge_data_opts o = {1, 0.2860f, 0.3530f};
    CHECK_OK(mge_dataset_bind(&ds, g, 2, in, &o, &err), err);
    CHECK(ds.n == 2 && ds.count == 1000 && ds.t[0].ndim == 4 && ds.t[0].dims[1] == 1 && ds.t[0].dims[3] == 28);
    CHECK(ds.t[0].dtype == MGE_F32 && ds.t[1].dtype == MGE_I32 && strcmp(ds.names[1], "label") == 0);
    if (ds.n == 2) {
        CHECK_NEAR(((float *)ds.t[0].data)[at], (px / 255.0 - 0.2860) / 0.3530, 1e-5);
        CHECK_NEAR(((float *)ds.t[0].data)[0], (0 - 0.2860) / 0.3530, 1e-5);
        CHECK(((int32_t *)ds.t[1].data)[999] == lb);
    }
    mge_dataset_free(&ds);
    /* without normalization: [0, 1] */
    CHECK_OK(mge_dataset_load(SAMPLE ":test", &ds, &err), err);
    CHECK_OK(mge_dataset_bind(&ds, g, 2, in, NULL, &err), err);
    if (ds.n == 2)
        CHECK_NEAR(((float *)ds.t[0].data)[at], px / 255.0, 1e-6);
    mge_dataset_free(&ds);
    mge_graph_free(g);

    /* wrong shape names both sides */
    int64_t cifar[3] = {3, 32, 32};
    g = model(MGE_F32, 3, cifar, MGE_I32, in);
    CHECK_OK(mge_dataset_load(SAMPLE ":test", &ds, &err), err);
    CHECK(mge_dataset_bind(&ds, g, 2, in, NULL, &err) == MGE_ERR_SHAPE);
    CHECK_MSG(strstr(err.msg, "'images' is u8[1000,28,28]: does not fit input 'x' f32[N,3,32,32]"), "%s", err.msg);
    CHECK(ds.n == 2 && ds.t[0].dtype == MGE_U8); /* unchanged */
    mge_dataset_free(&ds);
    mge_graph_free(g);
    /* one input for a pair: images bind, labels are dropped; three inputs: too few arrays */
    g = model(MGE_F32, 3, chw, MGE_I32, in);
    int in3[3] = {in[0], in[1], in[1]};
    CHECK_OK(mge_dataset_load(SAMPLE ":test", &ds, &err), err);
    CHECK(mge_dataset_bind(&ds, g, 3, in3, NULL, &err) == MGE_ERR_INVALID && strstr(err.msg, "position"));
    CHECK_OK(mge_dataset_bind(&ds, g, 1, in, NULL, &err), err);
    CHECK(ds.n == 1 && ds.count == 1000 && ds.t[0].dtype == MGE_F32 && strcmp(ds.names[0], "x") == 0);
    mge_dataset_free(&ds);
    mge_graph_free(g);
}

static void test_bind_errors(void)
{
    mge_error err;
    int in[2];
    int64_t per[1] = {2}, xd[2] = {4, 2}, ld[1] = {4}, l3[1] = {3};
    mge_graph *g = model(MGE_F32, 1, per, MGE_I32, in);
    mge_tlist l = {0};
    mge_buf b = {0};
    mge_dataset ds;
    /* float labels into an integer input */
    mge_tensor x = make(MGE_F32, 2, xd, 0), lab = make(MGE_F32, 1, ld, 0);
    mge_tlist_add(&l, "x", &x, &err);
    mge_tlist_add(&l, "label", &lab, &err);
    mge_npz_write(&l, &b, &err);
    write_file(tmp("f.npz"), b.p, b.n);
    CHECK_OK(mge_dataset_load(tmp("f.npz"), &ds, &err), err);
    CHECK(mge_dataset_bind(&ds, g, 2, in, NULL, &err) != MGE_OK && strstr(err.msg, "'label'") &&
          strstr(err.msg, "integer"));
    mge_dataset_free(&ds);
    mge_tlist_free(&l);
    b.n = 0;
    /* i64 label that does not fit i32 */
    x = make(MGE_F32, 2, xd, 0);
    lab = make(MGE_I64, 1, ld, 0);
    ((int64_t *)lab.data)[2] = (int64_t)1 << 40;
    mge_tlist_add(&l, "x", &x, &err);
    mge_tlist_add(&l, "label", &lab, &err);
    mge_npz_write(&l, &b, &err);
    write_file(tmp("big.npz"), b.p, b.n);
    CHECK_OK(mge_dataset_load(tmp("big.npz"), &ds, &err), err);
    CHECK(mge_dataset_bind(&ds, g, 2, in, NULL, &err) == MGE_ERR_SHAPE && strstr(err.msg, "1099511627776"));
    mge_dataset_free(&ds);
    mge_tlist_free(&l);
    b.n = 0;
    /* f64 data converts into the f32 input; a u64 label beyond 2^63 does
     * not fit i32, named by its unsigned value */
    CHECK_OK(mge_tensor_alloc(&x, MGE_F64, 2, xd, &err), err);
    for (int i = 0; i < 8; i++)
        ((double *)x.data)[i] = 0.1 * i;
    CHECK_OK(mge_tensor_alloc(&lab, MGE_U64, 1, ld, &err), err);
    for (int i = 0; i < 4; i++)
        ((uint64_t *)lab.data)[i] = (uint64_t)i;
    mge_tlist_add(&l, "x", &x, &err);
    mge_tlist_add(&l, "label", &lab, &err);
    mge_npz_write(&l, &b, &err);
    write_file(tmp("wide.npz"), b.p, b.n);
    CHECK_OK(mge_dataset_load(tmp("wide.npz"), &ds, &err), err);
    CHECK_OK(mge_dataset_bind(&ds, g, 2, in, NULL, &err), err);
    CHECK(ds.t[0].dtype == MGE_F32 && ((float *)ds.t[0].data)[3] == 0.3f);
    CHECK(ds.t[1].dtype == MGE_I32 && ((int32_t *)ds.t[1].data)[3] == 3);
    mge_dataset_free(&ds);
    mge_tlist_free(&l);
    b.n = 0;
    x = make(MGE_F32, 2, xd, 0);
    CHECK_OK(mge_tensor_alloc(&lab, MGE_U64, 1, ld, &err), err);
    memset(lab.data, 0, lab.nbytes);
    ((uint64_t *)lab.data)[1] = UINT64_MAX;
    mge_tlist_add(&l, "x", &x, &err);
    mge_tlist_add(&l, "label", &lab, &err);
    mge_npz_write(&l, &b, &err);
    write_file(tmp("u64.npz"), b.p, b.n);
    CHECK_OK(mge_dataset_load(tmp("u64.npz"), &ds, &err), err);
    CHECK_MSG(mge_dataset_bind(&ds, g, 2, in, NULL, &err) == MGE_ERR_SHAPE && strstr(err.msg, "18446744073709551615"),
              "%s", err.msg);
    mge_dataset_free(&ds);
    mge_tlist_free(&l);
    b.n = 0;
    /* missing input, extra array */
    x = make(MGE_F32, 2, xd, 0);
    lab = make(MGE_I32, 1, ld, 0);
    mge_tensor extra = make(MGE_I32, 1, ld, 0);
    mge_tlist_add(&l, "x", &x, &err);
    mge_tlist_add(&l, "labels", &lab, &err);
    mge_tlist_add(&l, "weight", &extra, &err);
    mge_npz_write(&l, &b, &err);
    write_file(tmp("names.npz"), b.p, b.n);
    CHECK_OK(mge_dataset_load(tmp("names.npz"), &ds, &err), err);
    CHECK(mge_dataset_bind(&ds, g, 2, in, NULL, &err) == MGE_ERR_INVALID && strstr(err.msg, "'label'") &&
          strstr(err.msg, "'labels'"));
    mge_dataset_free(&ds);
    /* x alone: 'labels' and 'weight' are dropped */
    CHECK_OK(mge_dataset_load(tmp("names.npz"), &ds, &err), err);
    CHECK_OK(mge_dataset_bind(&ds, g, 1, in, NULL, &err), err);
    CHECK(ds.n == 1 && strcmp(ds.names[0], "x") == 0 && ds.count == 4);
    mge_dataset_free(&ds);
    mge_tlist_free(&l);
    b.n = 0;
    /* mismatched sample counts at load time */
    x = make(MGE_F32, 2, xd, 0);
    lab = make(MGE_I32, 1, l3, 0);
    mge_tlist_add(&l, "x", &x, &err);
    mge_tlist_add(&l, "label", &lab, &err);
    mge_npz_write(&l, &b, &err);
    write_file(tmp("counts.npz"), b.p, b.n);
    CHECK(mge_dataset_load(tmp("counts.npz"), &ds, &err) == MGE_ERR_SHAPE && strstr(err.msg, "different sample counts") &&
          strstr(err.msg, "counts.npz"));
    mge_tlist_free(&l);
    b.n = 0;
    /* empty: 0 samples, and an empty stream file */
    int64_t e2[2] = {0, 2}, e1[1] = {0};
    x = make(MGE_F32, 2, e2, 0);
    lab = make(MGE_I32, 1, e1, 0);
    mge_tlist_add(&l, "x", &x, &err);
    mge_tlist_add(&l, "label", &lab, &err);
    mge_npz_write(&l, &b, &err);
    write_file(tmp("empty.npz"), b.p, b.n);
    CHECK(mge_dataset_load(tmp("empty.npz"), &ds, &err) == MGE_ERR_FORMAT && strstr(err.msg, "empty dataset"));
    mge_tlist_free(&l);
    b.n = 0;
    x = make(MGE_F32, 2, e2, 0);
    lab = make(MGE_I32, 1, e1, 0);
    b.n = 0;
    mge_npy_write_buf(&b, &x, &err);
    mge_npy_write_buf(&b, &lab, &err);
    write_file(tmp("empty.npy"), b.p, b.n);
    CHECK_OK(mge_dataset_load(tmp("empty.npy"), &ds, &err), err);
    CHECK(mge_dataset_bind(&ds, g, 2, in, NULL, &err) == MGE_ERR_FORMAT && strstr(err.msg, "empty dataset"));
    mge_dataset_free(&ds);
    mge_tensor_free(&x);
    mge_tensor_free(&lab);
    write_file(tmp("zero"), "", 0);
    CHECK(mge_dataset_load(tmp("zero"), &ds, &err) == MGE_ERR_FORMAT && strstr(err.msg, "empty"));
    /* missing file, unknown format, complex64 */
    CHECK(mge_dataset_load(tmp("nope.npz"), &ds, &err) == MGE_ERR_IO && strstr(err.msg, "nope.npz"));
    write_file(tmp("junk.bin"), "hello, this is not a dataset at all\n", 36);
    CHECK(mge_dataset_load(tmp("junk.bin"), &ds, &err) == MGE_ERR_FORMAT && strstr(err.msg, "junk.bin") &&
          strstr(err.msg, "unknown format"));
    const char c8[] = "\x93NUMPY\x01\x00\x76\x00{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }";
    char rec[128 + 8];
    memset(rec, ' ', sizeof rec);
    memcpy(rec, c8, sizeof c8 - 1);
    rec[127] = '\n';
    memset(rec + 128, 0, 8);
    write_file(tmp("c8.npy"), rec, sizeof rec);
    CHECK(mge_dataset_load(tmp("c8.npy"), &ds, &err) == MGE_ERR_UNSUPPORTED && strstr(err.msg, "complex64"));
    mge_buf_free(&b);
    mge_graph_free(g);
}

/* ---------------------------------------------------------------- split, loader */

static mge_dataset small(int64_t n)
{
    mge_dataset ds;
    memset(&ds, 0, sizeof ds);
    int64_t xd[2] = {n, 3}, ld[1] = {n};
    ds.n = 2;
    ds.names = calloc(2, sizeof *ds.names);
    ds.t = calloc(2, sizeof *ds.t);
    ds.names[0] = strdup("x");
    ds.names[1] = strdup("label");
    ds.t[0] = make(MGE_F32, 2, xd, 0);
    ds.t[1] = make(MGE_I32, 1, ld, 0);
    ds.count = n;
    return ds;
}

static void test_split(void)
{
    mge_error err;
    mge_dataset ds = small(100), val, ds2 = small(100), val2;
    CHECK_OK(mge_dataset_split(&ds, 0.1, 42, &val, &err), err);
    CHECK(ds.count == 90 && val.count == 10 && ds.t[1].dims[0] == 90 && val.t[0].dims[0] == 10);
    CHECK(val.names && strcmp(val.names[1], "label") == 0);
    /* each sample once, each part in original order, rows intact */
    char seen[100] = {0};
    int ok = 1;
    for (int part = 0; part < 2; part++) {
        const mge_dataset *d = part ? &val : &ds;
        for (int64_t i = 0; i < d->count; i++) {
            int32_t id = ((int32_t *)d->t[1].data)[i];
            ok &= id >= 0 && id < 100 && !seen[id];
            if (id >= 0 && id < 100)
                seen[id] = 1;
            ok &= ((float *)d->t[0].data)[3 * i] == (float)(3 * id) * 0.5f;
            if (i)
                ok &= id > ((int32_t *)d->t[1].data)[i - 1];
        }
    }
    CHECK(ok);
    /* same seed, same split; another seed, another split */
    CHECK_OK(mge_dataset_split(&ds2, 0.1, 42, &val2, &err), err);
    CHECK(memcmp(val.t[1].data, val2.t[1].data, 40) == 0);
    mge_dataset_free(&val2);
    mge_dataset_free(&ds2);
    ds2 = small(100);
    CHECK_OK(mge_dataset_split(&ds2, 0.1, 43, &val2, &err), err);
    CHECK(memcmp(val.t[1].data, val2.t[1].data, 40) != 0);
    mge_dataset_free(&val);
    CHECK(mge_dataset_split(&ds2, 1.5, 1, &val, &err) == MGE_ERR_INVALID && val.n == 0 && ds2.count == 90);
    mge_dataset_free(&val2);
    mge_dataset_free(&ds2);
    mge_dataset_free(&ds);
}

/* All label ids of an epoch's batches from batch `from`, into ids; returns count. */
static int64_t run_epoch(mge_loader *l, int64_t epoch, int64_t from, int32_t *ids, int64_t *nb)
{
    mge_error err;
    const mge_tensor *const *b;
    int64_t k = 0;
    *nb = 0;
    CHECK_OK(mge_loader_start(l, epoch, from, &err), err);
    mge_status s;
    while ((s = mge_loader_next(l, &b, &err)) == MGE_OK) {
        for (int64_t i = 0; i < b[1]->dims[0]; i++) {
            ids[k] = ((int32_t *)b[1]->data)[i];
            /* the row travels with its label */
            CHECK(((float *)b[0]->data)[3 * i + 2] == (float)(3 * ids[k] + 2) * 0.5f);
            k++;
        }
        (*nb)++;
    }
    CHECK(s == MGE_ERR_EOF);
    CHECK(mge_loader_next(l, &b, &err) == MGE_ERR_EOF);
    return k;
}

static void test_loader(void)
{
    mge_error err;
    mge_dataset ds = small(103);
    mge_loader *a, *b, *c, *d;
    int32_t x[103], y[103], z[103];
    int64_t nb;
    CHECK_OK(mge_loader_create(&ds, 10, 1, 0, 7, 0, &a, &err), err);
    CHECK_OK(mge_loader_create(&ds, 10, 1, 0, 7, 1, &b, &err), err);
    CHECK(mge_loader_batches(a) == 11);
    /* prefetch on/off identical, every sample once per epoch */
    for (int e = 0; e < 3; e++) {
        CHECK(run_epoch(a, e, 0, x, &nb) == 103 && nb == 11);
        CHECK(run_epoch(b, e, 0, y, &nb) == 103);
        CHECK(memcmp(x, y, sizeof x) == 0);
        char seen[103] = {0};
        int ok = 1;
        for (int i = 0; i < 103; i++)
            ok &= x[i] >= 0 && x[i] < 103 && !seen[x[i]]++;
        CHECK(ok);
    }
    /* epochs differ; resume at (epoch 1, batch 4) gives the rest of epoch 1 */
    run_epoch(a, 1, 0, x, &nb);
    run_epoch(a, 2, 0, y, &nb);
    CHECK(memcmp(x, y, sizeof x) != 0);
    CHECK(run_epoch(b, 1, 4, z, &nb) == 63 && nb == 7);
    CHECK(memcmp(z, x + 40, 63 * sizeof *z) == 0);
    /* a fresh loader with the same seed reproduces; another seed does not */
    CHECK_OK(mge_loader_create(&ds, 10, 1, 0, 7, 1, &c, &err), err);
    run_epoch(c, 1, 0, y, &nb);
    CHECK(memcmp(x, y, sizeof x) == 0);
    mge_loader_free(c);
    CHECK_OK(mge_loader_create(&ds, 10, 1, 0, 8, 0, &c, &err), err);
    run_epoch(c, 1, 0, y, &nb);
    CHECK(memcmp(x, y, sizeof x) != 0);
    mge_loader_free(c);
    /* drop_last, no shuffle: in order, 10 full batches */
    CHECK_OK(mge_loader_create(&ds, 10, 0, 1, 7, 1, &d, &err), err);
    CHECK(mge_loader_batches(d) == 10);
    CHECK(run_epoch(d, 0, 0, z, &nb) == 100 && nb == 10);
    int ok = 1;
    for (int i = 0; i < 100; i++)
        ok &= z[i] == i;
    CHECK(ok);
    /* freed mid-epoch, with a prefetch in flight */
    const mge_tensor *const *bt;
    CHECK_OK(mge_loader_start(d, 0, 0, &err), err);
    CHECK_OK(mge_loader_next(d, &bt, &err), err);
    mge_loader_free(d);
    CHECK(mge_loader_create(&ds, 200, 1, 1, 7, 0, &d, &err) == MGE_ERR_INVALID && d == NULL);
    mge_loader_free(a);
    mge_loader_free(b);
    mge_dataset_free(&ds);
}

int main(void)
{
    if (unit_tmp_make("dataset"))
        return 1;
    RUN(test_idx_sample);
    RUN(test_fashion_mnist);
    RUN(test_idx_reader);
    RUN(test_npz_and_stream);
    RUN(test_archives);
    RUN(test_bind_idx);
    RUN(test_bind_errors);
    RUN(test_split);
    RUN(test_loader);
    unit_tmp_remove();
    return unit_done();
}
