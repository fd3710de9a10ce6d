/* onnx_tensor.c — ONNX TensorProtos as mge tensors, and the dtype tables.
 *
 * raw_data is borrowed where the reader's allocator made it 64-byte
 * aligned and its dtype is one mge stores the same way; typed fields
 * (float_data, int32_data holding f16/bool/int8, ...) and external data
 * are converted into owned tensors. Every length is checked against the
 * shape before any byte is read. */
#include "onnx.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int mge_onnx_dtype(int t)
{
    switch (t) {
    case MGE_ONNX_FLOAT: return MGE_F32;
    case MGE_ONNX_UINT8: return MGE_U8;
    case MGE_ONNX_INT8: return MGE_I8;
    case MGE_ONNX_INT32: return MGE_I32;
    case MGE_ONNX_INT64: return MGE_I64;
    case MGE_ONNX_BOOL: return MGE_BOOL;
    case MGE_ONNX_FLOAT16: return MGE_F16;
    case MGE_ONNX_BFLOAT16: return MGE_BF16;
    case MGE_ONNX_DOUBLE: return MGE_F64;
    case MGE_ONNX_INT16: return MGE_I16;
    case MGE_ONNX_UINT16: return MGE_U16;
    case MGE_ONNX_UINT32: return MGE_U32;
    case MGE_ONNX_UINT64: return MGE_U64;
    default: return -1;
    }
}

int mge_onnx_dtype_to(int dt)
{
    switch (dt) {
    case MGE_F32: return MGE_ONNX_FLOAT;
    case MGE_U8: return MGE_ONNX_UINT8;
    case MGE_I8: return MGE_ONNX_INT8;
    case MGE_I32: return MGE_ONNX_INT32;
    case MGE_I64: return MGE_ONNX_INT64;
    case MGE_BOOL: return MGE_ONNX_BOOL;
    case MGE_F16: return MGE_ONNX_FLOAT16;
    case MGE_BF16: return MGE_ONNX_BFLOAT16;
    case MGE_F64: return MGE_ONNX_DOUBLE;
    case MGE_I16: return MGE_ONNX_INT16;
    case MGE_U16: return MGE_ONNX_UINT16;
    case MGE_U32: return MGE_ONNX_UINT32;
    case MGE_U64: return MGE_ONNX_UINT64;
    default: return 0;
    }
}

const char *mge_onnx_dtype_name(int t)
{
    static const char *names[] = {"undefined", "float", "uint8", "int8", "uint16", "int16", "int32", "int64",
                                  "string", "bool", "float16", "double", "uint32", "uint64", "complex64",
                                  "complex128", "bfloat16", "float8e4m3fn", "float8e4m3fnuz", "float8e5m2",
                                  "float8e5m2fnuz", "uint4", "int4"};
    if (t >= 0 && t < (int)(sizeof names / sizeof names[0]))
        return names[t];
    return "unknown";
}

/* "a/b" stays inside dir: not absolute, no ".." component; and after
 * symlinks the file is still under dir. */
static mge_status external_path(const char *dir, const char *loc, char *out, size_t n, mge_error *err)
{
    if (!loc || !*loc)
        return mge_error_set(err, MGE_ERR_FORMAT, "external data without a location");
    if (loc[0] == '/')
        return mge_error_set(err, MGE_ERR_FORMAT, "external data '%s': an absolute path (it must be relative to the model's folder)", loc);
    for (const char *p = loc; *p;) {
        const char *e = strchr(p, '/');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == 2 && p[0] == '.' && p[1] == '.')
            return mge_error_set(err, MGE_ERR_FORMAT, "external data '%s' leaves the model's folder", loc);
        p += len + (e ? 1 : 0);
    }
    if ((size_t)snprintf(out, n, "%s/%s", dir, loc) >= n)
        return mge_error_set(err, MGE_ERR_FORMAT, "external data '%s': path too long", loc);
    char rd[PATH_MAX], rf[PATH_MAX];
    if (!realpath(dir, rd))
        return mge_error_set(err, MGE_ERR_IO, "%s: %s", dir, strerror(errno));
    if (!realpath(out, rf))
        return mge_error_set(err, MGE_ERR_IO, "external data '%s': %s", out, strerror(errno));
    size_t k = strlen(rd);
    if (strncmp(rf, rd, k) != 0 || (rf[k] != '/' && !(k == 1 && rd[0] == '/')))
        return mge_error_set(err, MGE_ERR_FORMAT, "external data '%s' leaves the model's folder (it resolves to %s)",
                             loc, rf);
    return MGE_OK;
}

static mge_status read_external(const Onnx__TensorProto *tp, const char *dir, mge_tensor *t, mge_error *err)
{
    const char *loc = NULL;
    int64_t off = 0, len = -1;
    for (size_t i = 0; i < tp->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = tp->external_data[i];
        if (!e->key || !e->value)
            continue;
        char *end;
        if (strcmp(e->key, "location") == 0)
            loc = e->value;
        else if (strcmp(e->key, "offset") == 0 || strcmp(e->key, "length") == 0) {
            errno = 0;
            long long v = strtoll(e->value, &end, 10);
            if (errno || *end || v < 0)
                return mge_error_set(err, MGE_ERR_FORMAT, "external data: bad %s '%s'", e->key, e->value);
            if (e->key[0] == 'o')
                off = v;
            else
                len = v;
        }
    }
    if (!dir)
        return mge_error_set(err, MGE_ERR_FORMAT, "external data '%s' cannot be resolved here (the model came from a "
                             "stream: give its path)", loc ? loc : "");
    char path[PATH_MAX];
    mge_status s = external_path(dir, loc, path, sizeof path, err);
    if (s)
        return s;
    if (len >= 0 && (size_t)len != t->nbytes)
        return mge_error_set(err, MGE_ERR_FORMAT, "external data '%s': length %lld, but the shape needs %zu bytes", loc,
                             (long long)len, t->nbytes);
    /* O_NONBLOCK: a FIFO named as the data must not hang the open (it is
     * refused below; reads of regular files ignore the flag) */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return mge_error_set(err, MGE_ERR_IO, "external data '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return mge_error_set(err, MGE_ERR_IO, "external data '%s': not a regular file", path);
    }
    if ((uint64_t)st.st_size < (uint64_t)off + t->nbytes) {
        close(fd);
        return mge_error_set(err, MGE_ERR_FORMAT,
                             "external data '%s' is shorter than declared: %lld bytes, needs %zu at offset %lld", loc,
                             (long long)st.st_size, t->nbytes, (long long)off);
    }
    t->data = mge_aligned_alloc(t->nbytes);
    if (!t->data) {
        close(fd);
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    }
    t->flags |= MGE_TENSOR_OWNED;
    size_t got = 0;
    while (got < t->nbytes) {
        ssize_t k = pread(fd, (char *)t->data + got, t->nbytes - got, off + (off_t)got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            close(fd);
            return mge_error_set(err, MGE_ERR_IO, "external data '%s': %s", path, k < 0 ? strerror(errno) : "short read");
        }
        got += (size_t)k;
    }
    close(fd);
    if (t->dtype == MGE_BOOL) /* any nonzero byte is true */
        for (size_t i = 0; i < t->nbytes; i++)
            ((uint8_t *)t->data)[i] = ((uint8_t *)t->data)[i] != 0;
    return MGE_OK;
}

mge_status mge_onnx_tensor(const Onnx__TensorProto *tp, const char *dir, mge_tensor *t, mge_error *err)
{
    memset(t, 0, sizeof *t);
    int ot = tp->has_data_type ? tp->data_type : 0;
    int dt = mge_onnx_dtype(ot);
    if (dt < 0)
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "tensor of type %s (mge has no such dtype)", mge_onnx_dtype_name(ot));
    if (tp->segment)
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "segmented tensor");
    if (tp->n_dims > MGE_MAX_DIMS)
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "tensor of rank %zu (mge has at most %d)", tp->n_dims, MGE_MAX_DIMS);
    for (size_t i = 0; i < tp->n_dims; i++)
        if (tp->dims[i] < 0)
            return mge_error_set(err, MGE_ERR_FORMAT, "tensor dim %zu is negative (%lld)", i, (long long)tp->dims[i]);
    mge_status s = mge_tensor_init(t, (mge_dtype)dt, (int)tp->n_dims, tp->dims, err);
    if (s)
        return s;
    int64_t numel = mge_tensor_numel(t);
    if (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return read_external(tp, dir, t, err);
    if (tp->has_raw_data) {
        if (tp->raw_data.len != t->nbytes)
            return mge_error_set(err, MGE_ERR_FORMAT, "raw_data holds %zu bytes, but %s needs %zu", tp->raw_data.len,
                                 mge_shape_str(t->dtype, t->ndim, t->dims, (char[96]){0}, 96), t->nbytes);
        if (t->nbytes == 0)
            return MGE_OK;
        if (ot == MGE_ONNX_BOOL) {
            /* any nonzero byte is true; mge's bools are 0 or 1 */
            t->data = mge_aligned_alloc(t->nbytes);
            if (!t->data)
                return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
            t->flags |= MGE_TENSOR_OWNED;
            for (size_t i = 0; i < t->nbytes; i++)
                ((uint8_t *)t->data)[i] = tp->raw_data.data[i] != 0;
            return MGE_OK;
        }
        if (((uintptr_t)tp->raw_data.data & 63) == 0) {
            t->data = tp->raw_data.data; /* borrowed: the message outlives the graph's use of it */
            return MGE_OK;
        }
        t->data = mge_aligned_alloc(t->nbytes);
        if (!t->data)
            return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        t->flags |= MGE_TENSOR_OWNED;
        memcpy(t->data, tp->raw_data.data, t->nbytes);
        return MGE_OK;
    }
    /* typed fields */
    size_t have;
    switch (ot) {
    case MGE_ONNX_FLOAT: have = tp->n_float_data; break;
    case MGE_ONNX_INT64: have = tp->n_int64_data; break;
    case MGE_ONNX_DOUBLE: have = tp->n_double_data; break;
    case MGE_ONNX_UINT32: case MGE_ONNX_UINT64: have = tp->n_uint64_data; break;
    default: have = tp->n_int32_data; break; /* int32, int16, uint16, int8, uint8, bool, f16, bf16 */
    }
    if ((int64_t)have != numel)
        return mge_error_set(err, MGE_ERR_FORMAT, "tensor holds %zu elements, but its shape has %lld", have,
                             (long long)numel);
    t->data = mge_aligned_alloc(t->nbytes ? t->nbytes : 1);
    if (!t->data)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    t->flags |= MGE_TENSOR_OWNED;
    for (int64_t i = 0; i < numel; i++) {
        switch (ot) {
        case MGE_ONNX_FLOAT: ((float *)t->data)[i] = tp->float_data[i]; break;
        case MGE_ONNX_INT64: ((int64_t *)t->data)[i] = tp->int64_data[i]; break;
        case MGE_ONNX_INT32: ((int32_t *)t->data)[i] = tp->int32_data[i]; break;
        case MGE_ONNX_INT8: ((int8_t *)t->data)[i] = (int8_t)tp->int32_data[i]; break;
        case MGE_ONNX_UINT8: ((uint8_t *)t->data)[i] = (uint8_t)tp->int32_data[i]; break;
        case MGE_ONNX_BOOL: ((uint8_t *)t->data)[i] = tp->int32_data[i] != 0; break;
        case MGE_ONNX_DOUBLE: ((double *)t->data)[i] = tp->double_data[i]; break;
        case MGE_ONNX_INT16: ((int16_t *)t->data)[i] = (int16_t)tp->int32_data[i]; break;
        case MGE_ONNX_UINT32: ((uint32_t *)t->data)[i] = (uint32_t)tp->uint64_data[i]; break;
        case MGE_ONNX_UINT64: ((uint64_t *)t->data)[i] = tp->uint64_data[i]; break;
        /* uint16, like f16/bf16, is the low 16 bits of int32_data */
        default: ((uint16_t *)t->data)[i] = (uint16_t)tp->int32_data[i]; break; /* f16/bf16 bits */
        }
    }
    return MGE_OK;
}
