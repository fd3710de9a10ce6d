/* status.c — error messages, growable buffers, small string helpers. */
#include "internal.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static mge_status verr(mge_error *err, mge_status code, int line, int col, const char *fmt, va_list ap)
{
    if (!err)
        return code;
    err->code = code;
    err->line = line;
    err->col = col;
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    return code;
}

mge_status mge_error_set(mge_error *err, mge_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    verr(err, code, 0, 0, fmt, ap);
    va_end(ap);
    return code;
}

mge_status mge_error_at(mge_error *err, mge_status code, int line, int col, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    verr(err, code, line, col, fmt, ap);
    va_end(ap);
    return code;
}

void mge_error_prefix(mge_error *err, const char *fmt, ...)
{
    if (!err)
        return;
    char pre[512], old[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    snprintf(err->msg, sizeof err->msg, "%.400s: %.600s", pre, old);
}

void mge_error_clear(mge_error *err)
{
    if (err)
        memset(err, 0, sizeof *err);
}

const char *mge_status_name(mge_status s)
{
    switch (s) {
    case MGE_OK: return "ok";
    case MGE_ERR_INVALID: return "invalid";
    case MGE_ERR_FORMAT: return "format";
    case MGE_ERR_IO: return "io";
    case MGE_ERR_NOMEM: return "out of memory";
    case MGE_ERR_SHAPE: return "shape";
    case MGE_ERR_UNSUPPORTED: return "unsupported";
    case MGE_ERR_EOF: return "end of stream";
    case MGE_ERR_MISMATCH: return "mismatch";
    case MGE_ERR_NONFINITE: return "non-finite";
    }
    return "unknown";
}

static int buf_reserve(mge_buf *b, size_t extra)
{
    if (b->failed)
        return 0;
    if (b->n + extra < b->n) {
        b->failed = 1;
        return 0;
    }
    if (b->n + extra <= b->cap)
        return 1;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + extra) {
        if (cap > SIZE_MAX / 2) {
            b->failed = 1;
            return 0;
        }
        cap *= 2;
    }
    char *p = realloc(b->p, cap);
    if (!p) {
        b->failed = 1;
        return 0;
    }
    b->p = p;
    b->cap = cap;
    return 1;
}

int mge_buf_put(mge_buf *b, const void *p, size_t n)
{
    if (!buf_reserve(b, n + 1))
        return 0;
    if (n)
        memcpy(b->p + b->n, p, n);
    b->n += n;
    b->p[b->n] = 0; /* text users may treat the buffer as a C string */
    return 1;
}

int mge_buf_printf(mge_buf *b, const char *fmt, ...)
{
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (k < 0) {
        b->failed = 1;
        return 0;
    }
    if ((size_t)k < sizeof small)
        return mge_buf_put(b, small, (size_t)k);
    if (!buf_reserve(b, (size_t)k + 1))
        return 0;
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)k + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)k;
    return 1;
}

void mge_buf_free(mge_buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

char *mge_strdup(const char *s)
{
    return s ? mge_strndup(s, strlen(s)) : NULL;
}

char *mge_strndup(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (!p)
        return NULL;
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

uint64_t mge_hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    while (*s)
        h = (h ^ (unsigned char)*s++) * 1099511628211ull;
    return h;
}
