/* unpack.c — limits on inflating untrusted input, and the checks every
 * archive member passes before its bytes are read (see unpack.h). */
#include "unpack.h"

#include "internal.h"

#include <archive.h>
#include <archive_entry.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t mge_unpack_limit(uint64_t packed)
{
    uint64_t r = packed > UINT64_MAX / MGE_UNPACK_RATIO ? UINT64_MAX : packed * MGE_UNPACK_RATIO;
    return r > MGE_UNPACK_FLOOR ? r : MGE_UNPACK_FLOOR;
}

static int is_sep(char c)
{
    return c == '/' || c == '\\';
}

const char *mge_unpack_bad_name(const char *path)
{
    if (is_sep(path[0]))
        return "an absolute path";
    if (((path[0] >= 'A' && path[0] <= 'Z') || (path[0] >= 'a' && path[0] <= 'z')) && path[1] == ':')
        return "a drive or device name";
    for (const char *p = path; *p;) {
        size_t k = 0;
        while (p[k] && !is_sep(p[k]))
            k++;
        if (k == 2 && p[0] == '.' && p[1] == '.')
            return "a '..' component";
        p += k;
        while (is_sep(*p))
            p++;
    }
    return NULL;
}

const char *mge_unpack_bad_type(struct archive_entry *e, char *buf, size_t n)
{
    const char *hl = archive_entry_hardlink(e);
    if (hl) {
        snprintf(buf, n, "a hard link to '%.200s'", hl);
        return buf;
    }
    switch (archive_entry_filetype(e)) {
    case AE_IFREG:
    case AE_IFDIR: return NULL;
    case AE_IFLNK: {
        const char *t = archive_entry_symlink(e);
        snprintf(buf, n, "a symbolic link to '%.200s'", t ? t : "");
        return buf;
    }
    case AE_IFCHR:
    case AE_IFBLK: snprintf(buf, n, "a device"); return buf;
    case AE_IFIFO: snprintf(buf, n, "a FIFO"); return buf;
    case AE_IFSOCK: snprintf(buf, n, "a socket"); return buf;
    default: snprintf(buf, n, "not a regular file"); return buf;
    }
}

/* The compressed bytes the limit is relative to: the whole input, or what
 * has been read of a pipe. */
static uint64_t packed_now(const mge_unpack *u)
{
    if (u->packed)
        return u->packed;
    la_int64_t r = archive_filter_bytes(u->a, -1);
    return r > 0 ? (uint64_t)r : 0;
}

/* total: what the members come to; declared: it is a header's claim, not bytes read */
static mge_status too_much(const mge_unpack *u, const char *path, uint64_t total, int declared, mge_error *err)
{
    uint64_t p = packed_now(u);
    return mge_error_set(err, MGE_ERR_FORMAT,
                         "member '%.200s': %s %llu bytes%s, more than the %llu bytes that %s%llu compressed bytes may "
                         "inflate to (%s)",
                         path, declared ? "the members declare" : "the members inflate to", (unsigned long long)total,
                         declared ? "" : " so far", (unsigned long long)mge_unpack_limit(p),
                         u->packed ? "the archive's " : "the ", (unsigned long long)p, MGE_UNPACK_RULE);
}

mge_status mge_unpack_read(mge_unpack *u, struct archive_entry *e, const char *path, unsigned char **out,
                           size_t *n, mge_error *err)
{
    *out = NULL;
    *n = 0;
    int64_t decl = archive_entry_size_is_set(e) ? archive_entry_size(e) : -1;
    /* a size declared up front is checked before any memory is taken (not
     * for a pipe: its limit grows as it is read) */
    if (decl >= 0 && u->packed && (uint64_t)decl > mge_unpack_limit(u->packed) - u->out)
        return too_much(u, path, u->out + (uint64_t)decl, 1, err);
    if (decl >= 0 && (uint64_t)decl >= SIZE_MAX)
        return mge_error_set(err, MGE_ERR_NOMEM, "member '%.200s': %lld bytes do not fit in memory", path,
                             (long long)decl);
    size_t cap = 0, len = 0;
    unsigned char *p = NULL;
    for (;;) {
        if (len == cap) {
            size_t ncap = cap ? cap * 2 : 65536;
            /* one byte past the declared size tells "more than declared" */
            if (decl >= 0 && ncap > (size_t)decl + 1)
                ncap = (size_t)decl + 1;
            if (ncap <= cap) {
                free(p);
                return mge_error_set(err, MGE_ERR_NOMEM, "member '%.200s' is too large", path);
            }
            unsigned char *np = realloc(p, ncap);
            if (!np) {
                free(p);
                return mge_error_set(err, MGE_ERR_NOMEM, "member '%.200s': out of memory (%zu bytes)", path, ncap);
            }
            p = np;
            cap = ncap;
        }
        la_ssize_t k = archive_read_data(u->a, p + len, cap - len);
        if (k < 0) {
            const char *m = archive_error_string(u->a);
            free(p);
            return mge_error_set(err, MGE_ERR_FORMAT, "member '%.200s': %s", path, m ? m : "read error");
        }
        if (k == 0)
            break;
        len += (size_t)k;
        if (decl >= 0 && len > (size_t)decl) {
            free(p);
            return mge_error_set(err, MGE_ERR_FORMAT, "member '%.200s' holds more than the %lld bytes its header "
                                 "declares", path, (long long)decl);
        }
        if (u->out + len > mge_unpack_limit(packed_now(u))) {
            free(p);
            return too_much(u, path, u->out + len, 0, err);
        }
    }
    u->out += len;
    *out = p;
    *n = len;
    return MGE_OK;
}
