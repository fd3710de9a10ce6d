/* bench_json.h — a small JSON reader for mge-bench --baseline (its own
 * --json output read back). The whole text becomes a tree; bad input of
 * any kind is an error with a line number, never a crash: nesting is
 * limited and every read is bounds-checked. */
#ifndef MGE_BENCH_JSON_H
#define MGE_BENCH_JSON_H

#include <stddef.h>

typedef enum bj_type { BJ_NULL, BJ_BOOL, BJ_NUM, BJ_STR, BJ_ARR, BJ_OBJ } bj_type;

typedef struct bj {
    bj_type type;
    double num;          /* BJ_NUM; BJ_BOOL: 0 or 1 */
    char *str;           /* BJ_STR (UTF-8, no NUL inside) */
    int n;               /* BJ_ARR, BJ_OBJ: items */
    char **keys;         /* BJ_OBJ: key of each item */
    struct bj *items;
} bj;

/* Parses text[0..n) (one value, whitespace around it). Returns 0, or -1 with
 * "line L: what" in msg; out is then empty. */
int bj_parse(const char *text, size_t n, bj *out, char *msg, size_t msgn);
/* The member key of an object (the last one when repeated), or NULL. */
const bj *bj_get(const bj *obj, const char *key);
void bj_free(bj *v);

#endif
