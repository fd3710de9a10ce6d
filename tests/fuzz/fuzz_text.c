/* fuzz_text.c — libFuzzer target for the text form.
 *
 * Any input: parse (file access off, so `weights` cannot reach the disk).
 * Whatever parses must print, the print must parse, and printing that must
 * give the same bytes: the printer's round-trip promise, checked on
 * everything the fuzzer finds. */
#include "text.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mge_graph *g = NULL, *g2 = NULL;
    mge_error e;
    if (mge_text_parse_ex((const char *)data, size, NULL, MGE_TEXT_NO_FILES, &g, &e) != MGE_OK) {
        if (g || e.line <= 0 || e.col <= 0 || !e.msg[0])
            abort(); /* failures leave no graph and always say where */
        return 0;
    }
    mge_buf a = {0}, b = {0};
    if (mge_text_print(g, &a, &e) != MGE_OK)
        abort();
    if (mge_text_parse_ex(a.p, a.n, NULL, MGE_TEXT_NO_FILES, &g2, &e) != MGE_OK)
        abort();
    if (mge_text_print(g2, &b, &e) != MGE_OK)
        abort();
    if (a.n != b.n || memcmp(a.p, b.p, a.n) != 0)
        abort();
    mge_buf_free(&a);
    mge_buf_free(&b);
    mge_graph_free(g);
    mge_graph_free(g2);
    return 0;
}
