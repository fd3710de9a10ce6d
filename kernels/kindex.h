/* kindex.h — index tensors for the indexing kernels (ref_index.c and
 * cpu_index.c): loading i32/i64 indices and checking every one against its
 * bound before any element moves, so bad data gives a message naming the
 * index, where it sits and the bound, never a read or write out of bounds. */
#ifndef MGE_KINDEX_H
#define MGE_KINDEX_H

#include "internal.h"

#include <stdio.h>

/* scatter's and scatter_nd's reduction attribute (lib/ops.def's word order). */
enum { MGE_SCATTER_NONE, MGE_SCATTER_ADD, MGE_SCATTER_MUL, MGE_SCATTER_MAX, MGE_SCATTER_MIN };

/* Element i of an index tensor (i32 or i64). */
static inline int64_t kidx_ld(mge_dtype dt, const void *p, int64_t i)
{
    return dt == MGE_I64 ? ((const int64_t *)p)[i] : ((const int32_t *)p)[i];
}

/* "[0,3]": the multi-index of flat position i in dims[0..nd). */
static inline const char *kidx_pos(int nd, const int64_t *dims, int64_t i, char *b, size_t n)
{
    int64_t at[MGE_MAX_DIMS];
    for (int d = nd - 1; d >= 0; d--) {
        at[d] = dims[d] > 0 ? i % dims[d] : 0;
        i = dims[d] > 0 ? i / dims[d] : 0;
    }
    size_t k = (size_t)snprintf(b, n, "[");
    for (int d = 0; d < nd && k < n; d++)
        k += (size_t)snprintf(b + k, n - k, "%s%lld", d ? "," : "", (long long)at[d]);
    if (k < n)
        snprintf(b + k, n - k, "]");
    return b;
}

/* idx must be i32 or i64 holding its data; every index in [-bound, bound)
 * (negative ones count from the end); axis names the axis for the message. */
static inline mge_status kidx_check(const char *op, const mge_tensor *idx, int axis, int64_t bound, mge_error *err)
{
    if (idx->dtype != MGE_I32 && idx->dtype != MGE_I64)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: indices are %s: expected i32 or i64", op,
                             mge_dtype_name(idx->dtype));
    int64_t cnt = mge_tensor_numel(idx);
    if (cnt > 0 && (!idx->data || idx->nbytes < (size_t)cnt * mge_dtype_size(idx->dtype)))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: indices have %zu bytes of data for %lld elements", op,
                             idx->data ? idx->nbytes : (size_t)0, (long long)cnt);
    for (int64_t i = 0; i < cnt; i++) {
        int64_t v = kidx_ld(idx->dtype, idx->data, i);
        if (v < -bound || v >= bound) {
            char b[160];
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: index %lld at %s is out of range for axis %d of size %lld",
                                 op, (long long)v, kidx_pos(idx->ndim, idx->dims, i, b, sizeof b), axis,
                                 (long long)bound);
        }
    }
    return MGE_OK;
}

/* scatter_nd's indices [m, k] (idx already passed kidx_check): component
 * c of each row in [-dims[c], dims[c]); the message names the axis. */
static inline mge_status kidx_check_nd(const char *op, const mge_tensor *idx, int k, const int64_t *dims,
                                       mge_error *err)
{
    int64_t cnt = mge_tensor_numel(idx);
    for (int64_t i = 0; i < cnt; i++) {
        int64_t v = kidx_ld(idx->dtype, idx->data, i), b = dims[i % k];
        if (v < -b || v >= b) {
            char bp[160];
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: index %lld at %s is out of range for axis %d of size %lld",
                                 op, (long long)v, kidx_pos(idx->ndim, idx->dims, i, bp, sizeof bp), (int)(i % k),
                                 (long long)b);
        }
    }
    return MGE_OK;
}

/* An index kidx_check accepted, made non-negative. */
static inline int64_t kidx_at(const mge_tensor *idx, int64_t i, int64_t bound)
{
    int64_t v = kidx_ld(idx->dtype, idx->data, i);
    return v < 0 ? v + bound : v;
}

#endif
