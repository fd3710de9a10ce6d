/* fuzz_mge.c — libFuzzer target for the .mge reader.
 *
 * Any input must be refused with a message or read into a valid graph; a
 * graph that was read must write, the bytes written must read back, and
 * writing that again must give the same bytes (the writer's fixed point).
 * The fuzz build defines FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION, so the
 * reader skips CRC comparisons and mutations reach the parser.
 * Seeds: tests/fuzz/seeds/mge (written by tests/unit/test_mgefile with
 * MGE_FUZZ_SEEDS=DIR). */
#include "mge.h"

#include <stdlib.h>
#include <string.h>

static void must(int cond)
{
    if (!cond)
        abort();
}

static void roundtrip(const mge_graph *g, int compress)
{
    mge_error err;
    mge_write_opts o = {compress, 0};
    mge_buf b1 = {0}, b2 = {0};
    must(mge_file_write(g, &o, &b1, &err) == MGE_OK);
    mge_graph *g2 = NULL;
    must(mge_file_read(b1.p, b1.n, 0, &g2, &err) == MGE_OK);
    must(mge_file_write(g2, &o, &b2, &err) == MGE_OK);
    must(b1.n == b2.n && memcmp(b1.p, b2.p, b1.n) == 0);
    mge_graph_free(g2);
    mge_buf_free(&b1);
    mge_buf_free(&b2);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    mge_error err;
    memset(&err, 0, sizeof err);
    mge_graph *g = NULL;
    mge_status s = mge_file_read(data, size, 0, &g, &err);
    if (s != MGE_OK) {
        must(g == NULL && err.msg[0] != 0);
        return 0;
    }
    must(g != NULL && mge_graph_validate(g, &err) == MGE_OK);
    roundtrip(g, 0);
    roundtrip(g, 1);
    mge_graph_free(g);

    /* the borrowing path, from a 64-byte aligned copy */
    void *al = mge_aligned_alloc(size);
    must(al != NULL);
    memcpy(al, data, size);
    g = NULL;
    must(mge_file_read(al, size, 1, &g, &err) == MGE_OK);
    mge_buf b = {0};
    mge_write_opts o = {0, 1};
    must(mge_file_write(g, &o, &b, &err) == MGE_OK);
    mge_buf_free(&b);
    mge_graph_free(g);
    mge_aligned_free(al);
    return 0;
}
