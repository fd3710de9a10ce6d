/* test_shard.c — a data-parallel rank reads only its samples: an
 * uncompressed NPY dataset stays mapped (bind borrows it when the dtypes
 * match) and a loader part gathers only its rows of each batch. What the
 * process reads of the file is recorded page by page (the mapping is
 * protected after bind; each first touch traps), so a read of another
 * rank's sample, or of the whole file at load or bind, fails the test. */
#include "mge.h"
#include "unit.h"
#include "unit_tmp.h"

#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define ROWS 128
#define COLS 65536   /* 256 KiB per sample */
#define BATCH 16

/* x : f32[ROWS, COLS] with every element of sample i equal to i, then label : i64[ROWS] = i */
static void write_data(const char *path)
{
    mge_error err;
    mge_tensor x, y;
    int64_t dx[2] = {ROWS, COLS}, dy[1] = {ROWS};
    CHECK_OK(mge_tensor_alloc(&x, MGE_F32, 2, dx, &err), err);
    CHECK_OK(mge_tensor_alloc(&y, MGE_I64, 1, dy, &err), err);
    for (int64_t i = 0; i < ROWS; i++) {
        for (int64_t j = 0; j < COLS; j++)
            ((float *)x.data)[i * COLS + j] = (float)i;
        ((int64_t *)y.data)[i] = i;
    }
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    CHECK_OK(mge_npy_write(f, &x, &err), err);
    CHECK_OK(mge_npy_write(f, &y, &err), err);
    CHECK(fclose(f) == 0);
    mge_tensor_free(&x);
    mge_tensor_free(&y);
}

/* Which pages of the mapping this process reads: after load and bind the
 * mapping is made inaccessible, and the first touch of each page traps
 * here, is recorded and opens that page. */
static char *map_lo;
static size_t map_n, page;
static volatile unsigned char touched[(ROWS * COLS * 4 + (1 << 20)) / 4096 + 16];

static void on_fault(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    char *a = si->si_addr;
    if (!map_lo || a < map_lo || a >= map_lo + map_n) {
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    size_t k = (size_t)(a - map_lo) / page;
    touched[k] = 1;
    mprotect(map_lo + k * page, page, PROT_READ | PROT_WRITE);
}

static void watch(const mge_dataset *ds)
{
    page = (size_t)sysconf(_SC_PAGESIZE);
    map_lo = ds->map;
    map_n = ds->map_n;
    memset((void *)touched, 0, sizeof touched);
    CHECK(map_n / page < sizeof touched);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, NULL);
    CHECK(mprotect(map_lo, map_n, PROT_NONE) == 0);
}

/* Pages touched outside the given samples' bytes and the labels, and the
 * pages of those samples left untouched. */
static void count_pages(const mge_dataset *ds, const int64_t *rows, int64_t n, long *outside, long *missed)
{
    size_t np = (map_n + page - 1) / page;
    unsigned char *mine = calloc(np, 1);
    size_t x0 = (size_t)((char *)ds->t[0].data - map_lo), rb = (size_t)COLS * 4;
    size_t l0 = (size_t)((char *)ds->t[1].data - map_lo), lb = (size_t)ROWS * 8;
    for (int64_t i = 0; i < n; i++)
        for (size_t k = (x0 + (size_t)rows[i] * rb) / page; k <= (x0 + (size_t)rows[i] * rb + rb - 1) / page; k++)
            mine[k] = 1;
    *missed = 0;
    for (size_t k = 0; k < np; k++)
        *missed += mine[k] && !touched[k];
    for (size_t k = l0 / page; k <= (l0 + lb - 1) / page; k++)
        mine[k] = 1;
    *outside = 0;
    for (size_t k = 0; k < np; k++)
        *outside += touched[k] && !mine[k];
    free(mine);
}

static mge_graph *model(int *in)
{
    mge_error err;
    mge_graph *g = mge_graph_new();
    int64_t d[2] = {MGE_DIM_N, COLS};
    in[0] = mge_graph_add_value(g, "x", MGE_VAL_INPUT, MGE_F32, 2, d, &err);
    in[1] = mge_graph_add_value(g, "label", MGE_VAL_INPUT, MGE_I64, 1, d, &err);
    CHECK(in[0] >= 0 && in[1] >= 0);
    return g;
}

/* One epoch (shuffled, seed 5) of part/parts; labels[] gets the labels in
 * order; every sample's x must be its label. Returns the rows seen. */
static int64_t epoch(const mge_dataset *ds, int part, int parts, int64_t *labels, int64_t *wholes)
{
    mge_error err;
    mge_loader *l;
    CHECK_OK(mge_loader_create(ds, BATCH, 1, 0, 5, 1, &l, &err), err);
    if (parts > 1)
        CHECK_OK(mge_loader_set_part(l, part, parts, &err), err);
    const mge_tensor *const *b;
    int64_t n = 0, bad = 0;
    *wholes = 0;
    while (mge_loader_next(l, &b, &err) == MGE_OK) {
        int64_t m = b[0]->dims[0];
        CHECK(b[1]->dims[0] == m);
        *wholes += mge_loader_batch_rows(l);
        for (int64_t i = 0; i < m; i++) {
            int64_t lab = ((const int64_t *)b[1]->data)[i];
            const float *xr = (const float *)b[0]->data + i * COLS;
            bad += xr[0] != (float)lab || xr[COLS - 1] != (float)lab;
            labels[n++] = lab;
        }
    }
    CHECK(bad == 0);
    mge_loader_free(l);
    return n;
}

static void load(const char *path, mge_dataset *ds)
{
    mge_error err;
    int in[2];
    mge_graph *g = model(in);
    CHECK_OK(mge_dataset_load(path, ds, &err), err);
    CHECK_OK(mge_dataset_bind(ds, g, 2, in, NULL, &err), err);
    mge_graph_free(g);
}

static void test_part_reads_its_rows(void)
{
    const char *path = tmp("d.npy");
    write_data(path);
    mge_dataset ds;
    int64_t all[ROWS], p0[ROWS], p1[ROWS], w0, w1, wa;

    /* the whole epoch as one process: every sample's pages */
    long outside, missed;
    load(path, &ds);
    CHECK(ds.map != NULL && ds.count == ROWS);
    CHECK(!(ds.t[0].flags & MGE_TENSOR_OWNED));   /* x borrows the mapping */
    watch(&ds);
    CHECK(epoch(&ds, 0, 1, all, &wa) == ROWS && wa == ROWS);
    count_pages(&ds, all, ROWS, &outside, &missed);
    CHECK(outside == 0 && missed == 0);
    long seen = 0;
    for (size_t k = 0; k < sizeof touched; k++)
        seen += touched[k];
    printf("  one process: %ld of %zu pages read\n", seen, (map_n + page - 1) / page);
    CHECK(seen * (long)page >= (long)ROWS * COLS * 4);
    map_lo = NULL;
    mge_dataset_free(&ds);

    /* part 0 of 2 in a fresh load: the pages of its samples (and the
     * labels), none of the others' */
    load(path, &ds);
    watch(&ds);
    CHECK(epoch(&ds, 0, 2, p0, &w0) == ROWS / 2 && w0 == ROWS);
    count_pages(&ds, p0, ROWS / 2, &outside, &missed);
    seen = 0;
    for (size_t k = 0; k < sizeof touched; k++)
        seen += touched[k];
    printf("  part 0 of 2: %ld pages read, %ld outside its samples and the labels, %ld of its own missed\n", seen,
           outside, missed);
    CHECK(outside == 0 && missed == 0);
    CHECK(seen * (long)page < (long)ROWS * COLS * 4 * 6 / 10);
    map_lo = NULL;
    mge_dataset_free(&ds);

    /* the two parts are the halves of each batch of the whole */
    load(path, &ds);
    CHECK(epoch(&ds, 1, 2, p1, &w1) == ROWS / 2 && w1 == ROWS);
    mge_dataset_free(&ds);
    int ok = 1;
    for (int b = 0; b < ROWS / BATCH; b++)
        for (int i = 0; i < BATCH / 2; i++) {
            ok &= p0[b * BATCH / 2 + i] == all[b * BATCH + i];
            ok &= p1[b * BATCH / 2 + i] == all[b * BATCH + BATCH / 2 + i];
        }
    CHECK(ok);
}

static void test_part_errors(void)
{
    mge_error err;
    mge_dataset ds;
    load(tmp("d.npy"), &ds);
    mge_loader *l;
    CHECK_OK(mge_loader_create(&ds, BATCH, 0, 0, 0, 0, &l, &err), err);
    CHECK(mge_loader_set_part(l, 2, 2, &err) == MGE_ERR_INVALID);
    CHECK(mge_loader_set_part(l, 0, 0, &err) == MGE_ERR_INVALID);
    const mge_tensor *const *b;
    CHECK_OK(mge_loader_next(l, &b, &err), err);
    CHECK(mge_loader_set_part(l, 0, 2, &err) == MGE_ERR_INVALID);   /* after the first next */
    mge_loader_free(l);
    mge_dataset_free(&ds);
}

/* a gzipped or otherwise unmappable file is read whole, as before */
static void test_copy_paths(void)
{
    mge_error err;
    mge_dataset ds;
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "gzip -c '%s' > '%s'", tmp("d.npy"), tmp("d.npy.gz"));
    CHECK(system(cmd) == 0);
    load(tmp("d.npy.gz"), &ds);
    CHECK(ds.map == NULL && (ds.t[0].flags & MGE_TENSOR_OWNED));
    int64_t lab[ROWS], w;
    CHECK(epoch(&ds, 1, 2, lab, &w) == ROWS / 2);
    mge_dataset_free(&ds);
    (void)err;
}

int main(void)
{
    (void)write_file;   /* unit_tmp.h's; this test writes with mge_npy_write */
    if (unit_tmp_make("shard"))
        return 1;
    RUN(test_part_reads_its_rows);
    RUN(test_part_errors);
    RUN(test_copy_paths);
    unit_tmp_remove();
    return unit_done();
}
