/* model.c — loading a model by content (.mge signature or text form) and
 * the whole-file helpers the tools share.
 *
 * Regular files are mmapped privately (copy-on-write: the file itself is
 * never written); a .mge loaded from a mapping borrows its uncompressed
 * weights from it, and the graph takes the mapping over (g->mapping,
 * released by mge_graph_free). Stdin and pipes are read into memory, and
 * their weights are copied. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Reads fd to its end into a malloc'd buffer. */
static mge_status read_all(int fd, const char *path, void **buf, size_t *n, mge_error *err)
{
    size_t cap = 1 << 16, len = 0;
    char *p = malloc(cap);
    if (!p)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    for (;;) {
        if (len == cap) {
            if (cap > SIZE_MAX / 2) {
                free(p);
                return mge_error_set(err, MGE_ERR_NOMEM, "%s: input too large", path);
            }
            char *q = realloc(p, cap * 2);
            if (!q) {
                free(p);
                return mge_error_set(err, MGE_ERR_NOMEM, "%s: out of memory after %zu bytes", path, len);
            }
            p = q;
            cap *= 2;
        }
        ssize_t k = read(fd, p + len, cap - len);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            free(p);
            return mge_error_set(err, MGE_ERR_IO, "%s: %s", path, strerror(e));
        }
        if (k == 0)
            break;
        len += (size_t)k;
    }
    *buf = p;
    *n = len;
    return MGE_OK;
}

mge_status mge_file_slurp(const char *path, void **buf, size_t *n, int *mapped, mge_error *err)
{
    *buf = NULL;
    *n = 0;
    *mapped = 0;
    if (!path)
        return mge_error_set(err, MGE_ERR_INVALID, "no path");
    if (strcmp(path, "-") == 0)
        return read_all(STDIN_FILENO, "<stdin>", buf, n, err);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return mge_error_set(err, MGE_ERR_IO, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return mge_error_set(err, MGE_ERR_IO, "%s: %s", path, strerror(e));
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return mge_error_set(err, MGE_ERR_IO, "%s: %s", path, strerror(EISDIR));
    }
    mge_status s = MGE_OK;
    if (S_ISREG(st.st_mode) && st.st_size > 0) {
        if ((uint64_t)st.st_size > SIZE_MAX) {
            close(fd);
            return mge_error_set(err, MGE_ERR_NOMEM, "%s: file too large", path);
        }
        /* private and writable: the file is never changed, and code that
         * updates borrowed weights in place (training) gets copy-on-write
         * pages instead of a fault */
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
        if (p != MAP_FAILED) {
            *buf = p;
            *n = (size_t)st.st_size;
            *mapped = 1;
        } else {
            s = read_all(fd, path, buf, n, err); /* e.g. a file system without mmap */
        }
    } else {
        s = read_all(fd, path, buf, n, err); /* pipes, character devices, empty files */
    }
    close(fd);
    return s;
}

static void release_mapping(mge_hostbuf *b);

void mge_file_unslurp(void *buf, size_t n, int mapped)
{
    if (!buf)
        return;
    if (mapped)
        munmap(buf, n);
    else
        free(buf);
}

static void release_mapping(mge_hostbuf *b)
{
    mge_file_unslurp(b->p, b->n, 1);
    free(b);
}

/* name: the file, for the advice of a refused kind (formats/sniff.c) */
static mge_status load_mem(const void *buf, size_t n, const char *base_dir, int borrow, const char *name,
                           const mge_load_opts *o, mge_graph **g, mge_error *err)
{
    *g = NULL;
    if (!mge_file_is_mge(buf, n) && mge_sniff_kind(buf, n) == MGE_KIND_ONNX)
        return mge_onnx_read_opts(buf, n, base_dir, o, g, err);
    if (o && o->bind && o->bind->n)
        return mge_error_set(err, MGE_ERR_INVALID, "input values are bound at the import of an ONNX model; this "
                             "model is %s, whose shapes do not depend on input values",
                             mge_file_is_mge(buf, n) ? "a .mge file" : "in the text form");
    if (mge_file_is_mge(buf, n))
        return mge_file_read(buf, n, borrow, g, err);
    /* bytes that are clearly some other kind of file get a message saying
     * so instead of a text-form syntax error about their first byte */
    mge_status s = mge_sniff_check(buf, n, MGE_SNIFF_MODEL, name, err);
    if (s)
        return s;
    return mge_text_parse(buf, n, base_dir ? base_dir : ".", g, err);
}

mge_status mge_model_load_mem(const void *buf, size_t n, const char *base_dir, mge_graph **g, mge_error *err)
{
    return load_mem(buf, n, base_dir, 0, NULL, NULL, g, err);
}

mge_status mge_model_load_mem_opts(const void *buf, size_t n, const char *base_dir, const mge_load_opts *o,
                                   mge_graph **g, mge_error *err)
{
    return load_mem(buf, n, base_dir, 0, NULL, o, g, err);
}

mge_status mge_model_load(const char *path, mge_graph **g, mge_error *err)
{
    return mge_model_load_opts(path, NULL, g, err);
}

mge_status mge_model_load_opts(const char *path, const mge_load_opts *o, mge_graph **g, mge_error *err)
{
    void *buf;
    size_t n;
    int mapped;
    *g = NULL;
    mge_status s = mge_file_slurp(path, &buf, &n, &mapped, err);
    if (s)
        return s;
    /* `weights "FILE"` in a text model is relative to the model's directory */
    char *dir = NULL;
    const char *slash = strcmp(path, "-") ? strrchr(path, '/') : NULL;
    if (slash) {
        dir = mge_strndup(path, slash == path ? 1 : (size_t)(slash - path));
        if (!dir) {
            mge_file_unslurp(buf, n, mapped);
            return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        }
    }
    /* stdin: an ONNX model's external data has no folder to come from */
    s = load_mem(buf, n, strcmp(path, "-") == 0 ? NULL : dir ? dir : ".", mapped, path, o, g, err);
    free(dir);
    if (s == MGE_OK && mapped && mge_file_is_mge(buf, n)) {
        /* the weights may point into it */
        mge_hostbuf *hb = malloc(sizeof *hb);
        if (!hb) {
            mge_graph_free(*g);
            *g = NULL;
            mge_file_unslurp(buf, n, mapped);
            return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        }
        hb->p = buf;
        hb->n = n;
        hb->release = release_mapping;
        (*g)->mapping = hb;
        return MGE_OK;
    }
    mge_file_unslurp(buf, n, mapped);
    return s;
}
