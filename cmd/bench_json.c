/* bench_json.c — the JSON reader of bench_json.h (RFC 8259, recursive
 * descent with a depth limit). */
#include "bench_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BJ_MAX_DEPTH = 64 };

typedef struct rd {
    const char *p, *end, *start;
    char *msg;
    size_t msgn;
    int failed;
} rd;

static int line_of(const rd *r)
{
    int line = 1;
    for (const char *q = r->start; q < r->p && q < r->end; q++)
        line += *q == '\n';
    return line;
}

static int fail(rd *r, const char *what)
{
    if (!r->failed)
        snprintf(r->msg, r->msgn, "line %d: %s", line_of(r), what);
    r->failed = 1;
    return -1;
}

static void skip_ws(rd *r)
{
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
        r->p++;
}

static int lit(rd *r, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(r->end - r->p) < n || memcmp(r->p, word, n) != 0)
        return fail(r, "unexpected character");
    r->p += n;
    return 0;
}

static int hex4(rd *r, unsigned *u)
{
    *u = 0;
    if (r->end - r->p < 4)
        return fail(r, "truncated \\u escape");
    for (int i = 0; i < 4; i++) {
        char c = *r->p++;
        unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0')
                   : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                   : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                          : 99u;
        if (d == 99u)
            return fail(r, "bad \\u escape");
        *u = *u * 16 + d;
    }
    return 0;
}

/* Appends code point u as UTF-8 to buf (room for 4 bytes is guaranteed). */
static size_t put_utf8(char *buf, unsigned u)
{
    if (u < 0x80) {
        buf[0] = (char)u;
        return 1;
    }
    if (u < 0x800) {
        buf[0] = (char)(0xC0 | (u >> 6));
        buf[1] = (char)(0x80 | (u & 0x3F));
        return 2;
    }
    if (u < 0x10000) {
        buf[0] = (char)(0xE0 | (u >> 12));
        buf[1] = (char)(0x80 | ((u >> 6) & 0x3F));
        buf[2] = (char)(0x80 | (u & 0x3F));
        return 3;
    }
    buf[0] = (char)(0xF0 | (u >> 18));
    buf[1] = (char)(0x80 | ((u >> 12) & 0x3F));
    buf[2] = (char)(0x80 | ((u >> 6) & 0x3F));
    buf[3] = (char)(0x80 | (u & 0x3F));
    return 4;
}

/* A string at r->p (on the opening quote); *out is malloc'ed. An escape
 * never grows the text (\uXXXX: 6 bytes -> at most 4; a pair: 12 -> 4),
 * so the raw length bounds the result. */
static int string(rd *r, char **out)
{
    *out = NULL;
    r->p++;
    const char *q = r->p;
    while (q < r->end && *q != '"')
        q += *q == '\\' && q + 1 < r->end ? 2 : 1;
    if (q >= r->end)
        return fail(r, "unterminated string");
    char *s = malloc((size_t)(q - r->p) + 1);
    if (!s)
        return fail(r, "out of memory");
    size_t k = 0;
    while (*r->p != '"') {
        unsigned char c = (unsigned char)*r->p++;
        if (c < 0x20) {
            free(s);
            return fail(r, "control character in a string");
        }
        if (c != '\\') {
            s[k++] = (char)c;
            continue;
        }
        char e = *r->p++;
        switch (e) {
        case '"': s[k++] = '"'; break;
        case '\\': s[k++] = '\\'; break;
        case '/': s[k++] = '/'; break;
        case 'b': s[k++] = '\b'; break;
        case 'f': s[k++] = '\f'; break;
        case 'n': s[k++] = '\n'; break;
        case 'r': s[k++] = '\r'; break;
        case 't': s[k++] = '\t'; break;
        case 'u': {
            unsigned u, lo;
            if (hex4(r, &u)) {
                free(s);
                return -1;
            }
            if (u >= 0xD800 && u < 0xDC00) {
                if (r->end - r->p < 6 || r->p[0] != '\\' || r->p[1] != 'u') {
                    free(s);
                    return fail(r, "unpaired surrogate in \\u escape");
                }
                r->p += 2;
                if (hex4(r, &lo)) {
                    free(s);
                    return -1;
                }
                if (lo < 0xDC00 || lo > 0xDFFF) {
                    free(s);
                    return fail(r, "unpaired surrogate in \\u escape");
                }
                u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
            } else if ((u >= 0xDC00 && u <= 0xDFFF) || u == 0) {
                free(s);
                return fail(r, u ? "unpaired surrogate in \\u escape" : "\\u0000 in a string");
            }
            k += put_utf8(s + k, u);
            break;
        }
        default:
            free(s);
            return fail(r, "bad escape in a string");
        }
    }
    r->p++;
    s[k] = 0;
    *out = s;
    return 0;
}

static int number(rd *r, double *out)
{
    const char *q = r->p;
    if (q < r->end && *q == '-')
        q++;
    if (q >= r->end || *q < '0' || *q > '9')
        return fail(r, "unexpected character");
    if (*q == '0')
        q++;
    else
        while (q < r->end && *q >= '0' && *q <= '9')
            q++;
    if (q < r->end && *q == '.') {
        q++;
        if (q >= r->end || *q < '0' || *q > '9')
            return fail(r, "bad number");
        while (q < r->end && *q >= '0' && *q <= '9')
            q++;
    }
    if (q < r->end && (*q == 'e' || *q == 'E')) {
        q++;
        if (q < r->end && (*q == '+' || *q == '-'))
            q++;
        if (q >= r->end || *q < '0' || *q > '9')
            return fail(r, "bad number");
        while (q < r->end && *q >= '0' && *q <= '9')
            q++;
    }
    char buf[64];
    size_t n = (size_t)(q - r->p);
    if (n >= sizeof buf)
        return fail(r, "number too long");
    memcpy(buf, r->p, n);
    buf[n] = 0;
    *out = strtod(buf, NULL);
    r->p = q;
    return 0;
}

static int value(rd *r, bj *v, int depth);

/* Appends an empty item to v (an array or object). */
static bj *grow(rd *r, bj *v, int *cap)
{
    if (v->n == *cap) {
        int nc = *cap ? 2 * *cap : 4;
        bj *ni = realloc(v->items, sizeof *ni * (size_t)nc);
        if (!ni) {
            fail(r, "out of memory");
            return NULL;
        }
        v->items = ni;
        if (v->type == BJ_OBJ) {
            char **nk = realloc(v->keys, sizeof *nk * (size_t)nc);
            if (!nk) {
                fail(r, "out of memory");
                return NULL;
            }
            v->keys = nk;
        }
        *cap = nc;
    }
    memset(&v->items[v->n], 0, sizeof v->items[0]);
    if (v->type == BJ_OBJ)
        v->keys[v->n] = NULL;
    return &v->items[v->n++];
}

static int container(rd *r, bj *v, int depth)
{
    int obj = *r->p == '{', cap = 0;
    char close = obj ? '}' : ']';
    v->type = obj ? BJ_OBJ : BJ_ARR;
    r->p++;
    skip_ws(r);
    if (r->p < r->end && *r->p == close) {
        r->p++;
        return 0;
    }
    for (;;) {
        skip_ws(r);
        char *key = NULL;
        if (obj) {
            if (r->p >= r->end || *r->p != '"')
                return fail(r, "expected a member name");
            if (string(r, &key))
                return -1;
            skip_ws(r);
            if (r->p >= r->end || *r->p != ':') {
                free(key);
                return fail(r, "expected ':'");
            }
            r->p++;
        }
        bj *it = grow(r, v, &cap);
        if (!it) {
            free(key);
            return -1;
        }
        if (obj)
            v->keys[v->n - 1] = key;
        if (value(r, it, depth + 1))
            return -1;
        skip_ws(r);
        if (r->p >= r->end)
            return fail(r, obj ? "unterminated object" : "unterminated array");
        if (*r->p == ',') {
            r->p++;
            continue;
        }
        if (*r->p == close) {
            r->p++;
            return 0;
        }
        return fail(r, obj ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static int value(rd *r, bj *v, int depth)
{
    if (depth > BJ_MAX_DEPTH)
        return fail(r, "nested too deeply");
    skip_ws(r);
    if (r->p >= r->end)
        return fail(r, "unexpected end of input");
    switch (*r->p) {
    case '{':
    case '[': return container(r, v, depth);
    case '"': v->type = BJ_STR; return string(r, &v->str);
    case 't': v->type = BJ_BOOL; v->num = 1; return lit(r, "true");
    case 'f': v->type = BJ_BOOL; v->num = 0; return lit(r, "false");
    case 'n': v->type = BJ_NULL; return lit(r, "null");
    default: v->type = BJ_NUM; return number(r, &v->num);
    }
}

int bj_parse(const char *text, size_t n, bj *out, char *msg, size_t msgn)
{
    rd r = {text, text + n, text, msg, msgn, 0};
    memset(out, 0, sizeof *out);
    if (msgn)
        msg[0] = 0;
    int rc = value(&r, out, 0);
    if (!rc) {
        skip_ws(&r);
        if (r.p < r.end)
            rc = fail(&r, "text after the JSON value");
    }
    if (rc) {
        bj_free(out);
        return -1;
    }
    return 0;
}

const bj *bj_get(const bj *obj, const char *key)
{
    const bj *found = NULL;
    if (!obj || obj->type != BJ_OBJ)
        return NULL;
    for (int i = 0; i < obj->n; i++)
        if (obj->keys[i] && strcmp(obj->keys[i], key) == 0)
            found = &obj->items[i];
    return found;
}

void bj_free(bj *v)
{
    if (!v)
        return;
    for (int i = 0; i < v->n; i++) {
        bj_free(&v->items[i]);
        if (v->keys)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->str);
    memset(v, 0, sizeof *v);
}
