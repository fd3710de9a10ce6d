/* fuzz_onnx.c — libFuzzer target for the ONNX reader (formats/onnx_read.c).
 *
 * Any input must be refused with a message (and no graph) or read into a
 * graph that validates and that the .mge writer and reader take back. The
 * model comes "from a stream" (dir NULL), so external data is refused and
 * no mutation reaches the disk. Each input is read twice: from a 64-byte
 * aligned copy (raw_data borrowed) and from an odd address (raw_data
 * copied), and both must agree. What mge-dump prints of the graph must
 * parse back as the text form (the names the reader makes up are spellable).
 * Seeds: tests/fuzz/seeds/onnx (tiny models, tests/fuzz/make-onnx-seeds);
 * `make fuzz` adds small node-test models from the ONNX cache. */
#include "mge.h"
#include "text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void must(int cond)
{
    if (!cond)
        abort();
}

static mge_status read_at(const unsigned char *data, size_t size, size_t shift, mge_graph **g, mge_error *err)
{
    unsigned char *buf = mge_aligned_alloc(size + 64);
    must(buf != NULL);
    memcpy(buf + shift, data, size);
    memset(err, 0, sizeof *err);
    *g = NULL;
    mge_status s = mge_onnx_read(buf + shift, size, NULL, g, err);
    mge_aligned_free(buf); /* the graph must not borrow the caller's bytes */
    return s;
}

/* UBSan only prints by default, and the run goes on: undefined behaviour
 * (a float cast past int64's range, a NULL name) is a finding like a crash */
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void)
{
    return "halt_on_error=1:print_stacktrace=1";
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    mge_error err, err2;
    mge_graph *g = NULL, *g2 = NULL;
    mge_status s = read_at(data, size, 0, &g, &err);
    mge_status s2 = read_at(data, size, 1, &g2, &err2);
    must(s == s2);
    if (s != MGE_OK) {
        must(g == NULL && g2 == NULL && err.msg[0] != 0 && strcmp(err.msg, err2.msg) == 0);
        return 0;
    }
    must(g != NULL && g2 != NULL);
    must(mge_graph_validate(g, &err) == MGE_OK);
    mge_buf b1 = {0}, b2 = {0};
    mge_write_opts o = {0, 0};
    must(mge_file_write(g, &o, &b1, &err) == MGE_OK);
    must(mge_file_write(g2, &o, &b2, &err) == MGE_OK);
    must(b1.n == b2.n && memcmp(b1.p, b2.p, b1.n) == 0);
    mge_graph *g3 = NULL;
    must(mge_file_read(b1.p, b1.n, 0, &g3, &err) == MGE_OK);
    mge_graph_free(g3);
    mge_buf t = {0};
    must(mge_text_print(g, &t, &err) == MGE_OK);
    g3 = NULL;
    if (mge_text_parse_ex(t.p, t.n, NULL, MGE_TEXT_NO_FILES, &g3, &err) != MGE_OK) {
        fprintf(stderr, "fuzz_onnx: the printed graph does not parse: %s\n%.*s\n", err.msg, (int)t.n, t.p);
        abort();
    }
    mge_graph_free(g3);
    mge_buf_free(&t);
    mge_buf_free(&b1);
    mge_buf_free(&b2);
    mge_graph_free(g);
    mge_graph_free(g2);
    return 0;
}
