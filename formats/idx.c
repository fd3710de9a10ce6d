/* idx.c — IDX files (the MNIST format), raw or gzipped, and the in-memory
 * gunzip the dataset loader shares.
 *
 * Layout: 0x00 0x00, a dtype byte, an ndim byte, ndim big-endian u32 dims,
 * then the elements big-endian in C order. The header's claims are checked
 * against the bytes present before anything is allocated from them; a
 * gzipped file inflates to no more than its header claims, and that claim
 * must be within mge_unpack_limit of the compressed size (unpack.h). */
#include "internal.h"
#include "unpack.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

enum { IDX_U8 = 0x08, IDX_I8 = 0x09, IDX_I16 = 0x0B, IDX_I32 = 0x0C, IDX_F32 = 0x0D, IDX_F64 = 0x0E };

static int idx_elsize(int code)
{
    switch (code) {
    case IDX_U8:
    case IDX_I8: return 1;
    case IDX_I16: return 2;
    case IDX_I32:
    case IDX_F32: return 4;
    case IDX_F64: return 8;
    default: return 0;
    }
}

int mge_is_gzip(const void *buf, size_t n)
{
    const unsigned char *p = buf;
    return n >= 2 && p[0] == 0x1f && p[1] == 0x8b;
}

int mge_idx_is_idx(const void *buf, size_t n)
{
    const unsigned char *p = buf;
    return n >= 4 && p[0] == 0 && p[1] == 0 && idx_elsize(p[2]) && p[3] >= 1;
}

/* Inflates at most limit bytes (limit >= 1); *over says the stream held more. */
static mge_status gunzip(const void *buf, size_t n, size_t limit, void **out, size_t *outn, int *over,
                         mge_error *err)
{
    *out = NULL;
    *outn = 0;
    *over = 0;
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 15 + 16) != Z_OK)
        return mge_error_set(err, MGE_ERR_NOMEM, "gzip: out of memory");
    const unsigned char *in = buf;
    size_t left = n, cap = 0, len = 0;
    unsigned char *p = NULL;
    /* the trailer holds the size mod 2^32: a good first guess for one member */
    if (n >= 18) {
        const unsigned char *t = in + n - 4;
        cap = (size_t)t[0] | (size_t)t[1] << 8 | (size_t)t[2] << 16 | (size_t)t[3] << 24;
        /* a corrupt trailer must not cause a huge allocation: deflate expands at most ~1032:1 */
        if (n < SIZE_MAX / 1100 && cap > n * 1100)
            cap = n * 1100;
        if (cap > limit)
            cap = limit;
    }
    if (cap < 4096)
        cap = 4096;
    mge_status s = MGE_OK;
    int r = Z_OK;
    for (;;) {
        if (len == cap || !p) {
            size_t ncap = !p ? cap : cap * 2;
            if (ncap < cap || len > limit) {
                *over = 1;
                s = MGE_ERR_FORMAT;
                break;
            }
            if (ncap > limit + 1)
                ncap = limit + 1; /* one byte more tells "over the limit" from "exactly" */
            unsigned char *np = realloc(p, ncap);
            if (!np) {
                s = mge_error_set(err, MGE_ERR_NOMEM, "gzip: out of memory (%zu bytes)", ncap);
                break;
            }
            p = np;
            cap = ncap;
        }
        /* zlib counts in uInt: feed and drain in chunks below 4 GiB */
        uInt ain = left > (1u << 30) ? 1u << 30 : (uInt)left;
        uInt aout = cap - len > (1u << 30) ? 1u << 30 : (uInt)(cap - len);
        z.next_in = (unsigned char *)in;
        z.avail_in = ain;
        z.next_out = p + len;
        z.avail_out = aout;
        r = inflate(&z, Z_NO_FLUSH);
        in += ain - z.avail_in;
        left -= ain - z.avail_in;
        len += aout - z.avail_out;
        if (r == Z_STREAM_END) {
            /* concatenated members (gzip a b > c.gz) are one stream to gunzip */
            if (left >= 2 && in[0] == 0x1f && in[1] == 0x8b) {
                inflateReset(&z);
                continue;
            }
            break; /* trailing garbage after the last member is ignored, as gzip -d does with a warning */
        }
        if (r == Z_BUF_ERROR && z.avail_out != 0 && left == 0) {
            s = mge_error_set(err, MGE_ERR_FORMAT, "gzip: truncated stream");
            break;
        }
        if (r != Z_OK && r != Z_BUF_ERROR) {
            s = mge_error_set(err, r == Z_MEM_ERROR ? MGE_ERR_NOMEM : MGE_ERR_FORMAT, "gzip: %s",
                              z.msg ? z.msg : "corrupt data");
            break;
        }
    }
    inflateEnd(&z);
    if (!s && len > limit) {
        *over = 1;
        s = MGE_ERR_FORMAT;
    }
    if (s) {
        free(p);
        return s;
    }
    *out = p;
    *outn = len;
    return MGE_OK;
}

mge_status mge_gunzip_mem(const void *buf, size_t n, size_t limit, void **out, size_t *outn, mge_error *err)
{
    uint64_t lim = mge_unpack_limit(n);
    if (lim > SIZE_MAX - 1)
        lim = SIZE_MAX - 1;
    int asked = limit && limit < lim;
    if (asked)
        lim = limit;
    int over;
    mge_status s = gunzip(buf, n, (size_t)lim, out, outn, &over, err);
    if (over)
        mge_error_set(err, MGE_ERR_FORMAT, "gzip: %zu compressed bytes inflate to more than %llu bytes (%s)", n,
                      (unsigned long long)lim, asked ? "the limit given" : MGE_UNPACK_RULE);
    return s;
}

/* The first up to cap inflated bytes of a gzip stream into p (no error for
 * a stream that is longer or damaged further on: the full read says so). */
static size_t gunzip_head(const void *buf, size_t n, unsigned char *p, size_t cap)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 15 + 16) != Z_OK)
        return 0;
    z.next_in = (unsigned char *)buf;
    z.avail_in = n > (1u << 30) ? 1u << 30 : (uInt)n;
    z.next_out = p;
    z.avail_out = (uInt)cap;
    while (z.avail_out && inflate(&z, Z_NO_FLUSH) == Z_OK)
        ;
    size_t got = cap - z.avail_out;
    inflateEnd(&z);
    return got;
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Raw IDX bytes (no gzip) into t. */
static mge_status idx_parse(const unsigned char *p, size_t n, mge_tensor *t, mge_error *err)
{
    if (n < 4)
        return mge_error_set(err, MGE_ERR_FORMAT, "IDX: %zu bytes, too short for the 4-byte magic", n);
    if (p[0] != 0 || p[1] != 0)
        return mge_error_set(err, MGE_ERR_FORMAT, "not an IDX file (magic %02x %02x, expected 00 00)", p[0], p[1]);
    int code = p[2], ndim = p[3];
    int es = idx_elsize(code);
    if (!es)
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "IDX: unknown dtype code 0x%02x", code);
    if (ndim == 0)
        return mge_error_set(err, MGE_ERR_FORMAT, "IDX: 0 dimensions (a dataset needs a sample dimension)");
    if (ndim > MGE_MAX_DIMS)
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "IDX: %d dimensions (at most %d)", ndim, MGE_MAX_DIMS);
    size_t hdr = 4 + 4 * (size_t)ndim;
    if (n < hdr)
        return mge_error_set(err, MGE_ERR_FORMAT, "IDX: truncated header (%zu bytes, %d dims need %zu)", n, ndim, hdr);
    int64_t dims[MGE_MAX_DIMS];
    for (int i = 0; i < ndim; i++)
        dims[i] = be32(p + 4 + 4 * (size_t)i);
    mge_dtype dt = code == IDX_U8 ? MGE_U8 : code == IDX_I8 ? MGE_I8 : code == IDX_F32 || code == IDX_F64 ? MGE_F32 : MGE_I32;
    int64_t numel;
    size_t outbytes;
    char sh[128];
    if (mge_shape_numel(ndim, dims, dt, &numel, &outbytes, err) != MGE_OK)
        return mge_error_set(err, MGE_ERR_FORMAT, "IDX: shape %s is too large",
                             mge_shape_str(dt, ndim, dims, sh, sizeof sh));
    size_t avail = n - hdr;
    /* numel <= 2^48 and es <= 8: the product fits in 64 bits */
    uint64_t need = (uint64_t)numel * (uint64_t)es;
    if (need != avail) {
        mge_shape_str(dt, ndim, dims, sh, sizeof sh);
        if (need > avail)
            return mge_error_set(err, MGE_ERR_FORMAT, "IDX: truncated: %s needs %llu data bytes, the file has %zu", sh,
                                 (unsigned long long)need, avail);
        return mge_error_set(err, MGE_ERR_FORMAT, "IDX: %llu bytes after the data of %s",
                             (unsigned long long)(avail - need), sh);
    }
    mge_status s = mge_tensor_alloc(t, dt, ndim, dims, err);
    if (s)
        return s;
    const unsigned char *d = p + hdr;
    int64_t k = numel;
    switch (code) {
    case IDX_U8:
    case IDX_I8:
        if (k)
            memcpy(t->data, d, (size_t)k);
        break;
    case IDX_I16: {
        int32_t *o = t->data;
        for (int64_t i = 0; i < k; i++)
            o[i] = (int16_t)(uint16_t)((unsigned)d[2 * i] << 8 | d[2 * i + 1]);
        break;
    }
    case IDX_I32: {
        int32_t *o = t->data;
        for (int64_t i = 0; i < k; i++)
            o[i] = (int32_t)be32(d + 4 * i);
        break;
    }
    case IDX_F32: {
        float *o = t->data;
        for (int64_t i = 0; i < k; i++) {
            uint32_t u = be32(d + 4 * i);
            memcpy(&o[i], &u, 4);
        }
        break;
    }
    case IDX_F64: {
        float *o = t->data;
        for (int64_t i = 0; i < k; i++) {
            uint64_t u = (uint64_t)be32(d + 8 * i) << 32 | be32(d + 8 * i + 4);
            double v;
            memcpy(&v, &u, 8);
            o[i] = (float)v;
        }
        break;
    }
    }
    return MGE_OK;
}

/* The file size an IDX header claims (header and data), in sh its shape;
 * 0 when the header is incomplete or malformed (the parse says why). */
static uint64_t idx_claim(const unsigned char *p, size_t n, char *sh, size_t shn)
{
    if (!mge_idx_is_idx(p, n) || p[3] > MGE_MAX_DIMS || n < 4 + 4 * (size_t)p[3])
        return 0;
    int ndim = p[3];
    int64_t dims[MGE_MAX_DIMS];
    for (int i = 0; i < ndim; i++)
        dims[i] = be32(p + 4 + 4 * (size_t)i);
    mge_dtype dt = p[2] == IDX_U8 ? MGE_U8 : p[2] == IDX_I8 ? MGE_I8 : p[2] == IDX_I16 || p[2] == IDX_I32 ? MGE_I32
                                                                                                          : MGE_F32;
    mge_shape_str(dt, ndim, dims, sh, shn);
    int64_t numel;
    mge_error e;
    if (mge_shape_numel(ndim, dims, dt, &numel, NULL, &e) != MGE_OK)
        return UINT64_MAX;
    /* numel <= 2^48 and at most 8 bytes an element: no overflow */
    return 4 + 4 * (uint64_t)ndim + (uint64_t)numel * (uint64_t)idx_elsize(p[2]);
}

mge_status mge_gunzip_data(const void *buf, size_t n, void **out, size_t *outn, mge_error *err)
{
    unsigned char head[4 + 4 * MGE_MAX_DIMS];
    char sh[128];
    uint64_t claim = idx_claim(head, gunzip_head(buf, n, head, sizeof head), sh, sizeof sh);
    if (!claim)
        return mge_gunzip_mem(buf, n, 0, out, outn, err);
    uint64_t lim = mge_unpack_limit(n);
    if (claim > lim || claim > SIZE_MAX - 1) {
        *out = NULL;
        *outn = 0;
        if (claim == UINT64_MAX)
            return mge_error_set(err, MGE_ERR_FORMAT, "IDX: shape %s is too large", sh);
        return mge_error_set(err, MGE_ERR_FORMAT,
                             "IDX: the header claims %s, %llu bytes, more than the %llu bytes that %zu compressed "
                             "bytes may inflate to (%s; gunzip a genuine file first)",
                             sh, (unsigned long long)claim, (unsigned long long)lim, n, MGE_UNPACK_RULE);
    }
    int over;
    mge_status s = gunzip(buf, n, (size_t)claim, out, outn, &over, err);
    if (over)
        mge_error_set(err, MGE_ERR_FORMAT, "IDX: the data inflates to more than the %llu bytes its header claims (%s)",
                      (unsigned long long)claim, sh);
    return s;
}

mge_status mge_idx_read_mem(const void *buf, size_t n, mge_tensor *t, mge_error *err)
{
    memset(t, 0, sizeof *t);
    if (!mge_is_gzip(buf, n))
        return idx_parse(buf, n, t, err);
    void *raw;
    size_t rn;
    mge_status s = mge_gunzip_data(buf, n, &raw, &rn, err);
    if (!s)
        s = idx_parse(raw, rn, t, err);
    free(raw);
    return s;
}

mge_status mge_idx_read_path(const char *path, mge_tensor *t, mge_error *err)
{
    void *buf;
    size_t n;
    int mapped;
    memset(t, 0, sizeof *t);
    mge_status s = mge_file_slurp(path, &buf, &n, &mapped, err);
    if (s)
        return s; /* the message names the path */
    s = mge_idx_read_mem(buf, n, t, err);
    mge_file_unslurp(buf, n, mapped);
    if (s)
        mge_error_prefix(err, "%s", strcmp(path, "-") ? path : "<stdin>");
    return s;
}
