/* ksort.h — the ordering the sort kernels share (ref_sort.c, cpu_sort.c):
 * keys loaded from any numeric dtype, PyTorch's total order (NaN above
 * +inf, NaNs equal to each other), a stable merge sort and the partial
 * selection topk uses for small k. Both produce exactly the order of a
 * stable sort, so ties keep the lower index first whichever path runs. */
#ifndef MGE_KSORT_H
#define MGE_KSORT_H

#include "internal.h"

#include <math.h>
#include <string.h>

typedef struct ksort_item {
    double f;      /* float key */
    int64_t v;     /* integer key (exact for i64) */
    int64_t i;     /* position along the axis */
} ksort_item;

/* Element at of x (dtype dt) into it's key. */
static inline void ksort_load(mge_dtype dt, const void *p, int64_t at, ksort_item *it)
{
    switch (dt) {
    case MGE_F32: it->f = ((const float *)p)[at]; break;
    case MGE_F16: it->f = mge_f16_to_f32(((const uint16_t *)p)[at]); break;
    case MGE_BF16: it->f = mge_bf16_to_f32(((const uint16_t *)p)[at]); break;
    case MGE_I8: it->v = ((const int8_t *)p)[at]; break;
    case MGE_U8: it->v = ((const uint8_t *)p)[at]; break;
    case MGE_I32: it->v = ((const int32_t *)p)[at]; break;
    case MGE_I64: it->v = ((const int64_t *)p)[at]; break;
    case MGE_F64: it->f = ((const double *)p)[at]; break;
    case MGE_I16: it->v = ((const int16_t *)p)[at]; break;
    case MGE_U16: it->v = ((const uint16_t *)p)[at]; break;
    case MGE_U32: it->v = ((const uint32_t *)p)[at]; break;
    /* the top bit flipped: unsigned order as signed (a key, not the value) */
    case MGE_U64: it->v = (int64_t)(((const uint64_t *)p)[at] ^ 0x8000000000000000u); break;
    default: it->v = 0; break;
    }
}

/* The dtypes the sort family takes: numeric, not bool or quantized. */
static inline int ksort_dtype_ok(mge_dtype dt)
{
    return dt == MGE_F32 || dt == MGE_F16 || dt == MGE_BF16 || dt == MGE_F64 || dt == MGE_I8 || dt == MGE_U8 ||
           dt == MGE_I16 || dt == MGE_U16 || dt == MGE_I32 || dt == MGE_U32 || dt == MGE_I64 || dt == MGE_U64;
}

/* a < b in the total order (NaN largest). */
static inline int ksort_lt(const ksort_item *a, const ksort_item *b, int isf)
{
    if (!isf)
        return a->v < b->v;
    if (isnan(a->f))
        return 0;
    return isnan(b->f) || a->f < b->f;
}

/* a goes strictly before b: ascending, or descending with desc. */
static inline int ksort_before(const ksort_item *a, const ksort_item *b, int isf, int desc)
{
    return desc ? ksort_lt(b, a, isf) : ksort_lt(a, b, isf);
}

/* Stable bottom-up merge sort of a[0..n) with scratch tmp[0..n); the
 * result ends in a. */
static inline void ksort_sort(ksort_item *a, ksort_item *tmp, int64_t n, int isf, int desc)
{
    ksort_item *src = a, *dst = tmp;
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                dst[k++] = ksort_before(&src[j], &src[i], isf, desc) ? src[j++] : src[i++];
            while (i < mid)
                dst[k++] = src[i++];
            while (j < hi)
                dst[k++] = src[j++];
        }
        ksort_item *t = src;
        src = dst;
        dst = t;
    }
    if (src != a)
        memcpy(a, src, (size_t)n * sizeof *a);
}

/* The first k of the stable sort of a[0..n) into best[0..k) by insertion
 * (k small): an element enters only when strictly before the last kept,
 * after every kept element it does not go before, so equal keys stay in
 * index order. */
static inline void ksort_select(const ksort_item *a, int64_t n, int64_t k, ksort_item *best, int isf, int desc)
{
    int64_t cnt = 0;
    for (int64_t j = 0; j < n && k > 0; j++) {
        if (cnt == k && !ksort_before(&a[j], &best[k - 1], isf, desc))
            continue;
        int64_t p = cnt < k ? cnt : k - 1;
        while (p > 0 && ksort_before(&a[j], &best[p - 1], isf, desc)) {
            best[p] = best[p - 1];
            p--;
        }
        best[p] = a[j];
        if (cnt < k)
            cnt++;
    }
}

#endif
