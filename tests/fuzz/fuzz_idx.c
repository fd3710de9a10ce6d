/* fuzz_idx.c — libFuzzer target for the IDX reader and the gunzip under it.
 *
 * The input is read as an IDX file (raw or gzip). A tensor that parses must
 * have the element count its bytes allow, and re-encoding it as a raw IDX
 * file of the same dtype must read back identical. The input is also
 * gunzipped with a small output limit, which must be respected. */
#include "mge.h"

#include <stdlib.h>
#include <string.h>

/* Writes t as raw IDX (u8, i8, i32 or f32) into a malloc'ed buffer. */
static unsigned char *encode(const mge_tensor *t, size_t *n)
{
    int code = t->dtype == MGE_U8 ? 0x08 : t->dtype == MGE_I8 ? 0x09 : t->dtype == MGE_I32 ? 0x0C : 0x0D;
    size_t es = mge_dtype_size(t->dtype), hdr = 4 + 4 * (size_t)t->ndim;
    *n = hdr + t->nbytes;
    unsigned char *p = malloc(*n ? *n : 1);
    if (!p)
        abort();
    p[0] = 0, p[1] = 0, p[2] = (unsigned char)code, p[3] = (unsigned char)t->ndim;
    for (int i = 0; i < t->ndim; i++)
        for (int k = 0; k < 4; k++)
            p[4 + 4 * i + k] = (unsigned char)((uint64_t)t->dims[i] >> (24 - 8 * k));
    const unsigned char *d = t->data;
    for (size_t i = 0; i < t->nbytes; i += es)
        for (size_t k = 0; k < es; k++)
            p[hdr + i + k] = d[i + es - 1 - k]; /* big-endian; the host is little-endian */
    return p;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mge_tensor t, u;
    mge_error err;
    if (mge_idx_read_mem(data, size, &t, &err) == MGE_OK) {
        if (t.ndim < 1 || t.ndim > MGE_MAX_DIMS || (size_t)mge_tensor_numel(&t) * mge_dtype_size(t.dtype) != t.nbytes)
            abort();
        if (!mge_is_gzip(data, size) && data[2] != 0x0B && data[2] != 0x0E) {
            size_t n;
            unsigned char *p = encode(&t, &n);
            if (n != size || memcmp(p, data, n) != 0)
                abort(); /* lossless dtypes re-encode to the same bytes */
            free(p);
        }
        size_t n;
        unsigned char *p = encode(&t, &n);
        if (mge_idx_read_mem(p, n, &u, &err) != MGE_OK || u.dtype != t.dtype || !mge_tensor_same_shape(&u, &t) ||
            (t.nbytes && memcmp(u.data, t.data, t.nbytes) != 0))
            abort();
        mge_tensor_free(&u);
        free(p);
        mge_tensor_free(&t);
    }
    void *out;
    size_t outn;
    if (mge_gunzip_mem(data, size, 1 << 16, &out, &outn, &err) == MGE_OK) {
        if (outn > (1 << 16))
            abort();
        free(out);
    }
    return 0;
}
