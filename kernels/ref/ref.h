/* ref.h — checks shared by the reference kernels (kernels/ref).
 *
 * The ref kernels are the oracle: plain loops, double accumulation, and a
 * check of every shape they touch, so that a kernel called with shapes the
 * inference did not produce fails with a message instead of reading or
 * writing out of bounds. */
#ifndef MGE_REF_H
#define MGE_REF_H

#include "internal.h"

static inline const char *ref_opname(const mge_node *n)
{
    const mge_opinfo *oi = mge_op_info(n->op);
    return oi ? oi->name : "?";
}

/* t must hold its data: non-NULL when it has elements, and nbytes enough
 * for its dims. */
static inline mge_status ref_check_data(const mge_node *n, const char *what, const mge_tensor *t, mge_error *err)
{
    if (t->ndim < 0 || t->ndim > MGE_MAX_DIMS)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: %s has rank %d", ref_opname(n), what, t->ndim);
    int64_t numel;
    size_t nbytes;
    mge_status s = mge_shape_numel(t->ndim, t->dims, t->dtype, &numel, &nbytes, err);
    if (s)
        return s;
    if (numel > 0 && (!t->data || t->nbytes < nbytes))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: %s has %zu bytes of data for %lld elements", ref_opname(n),
                             what, t->data ? t->nbytes : (size_t)0, (long long)numel);
    return MGE_OK;
}

/* t must be dtype dt with shape dims[0..nd) and hold its data. */
static inline mge_status ref_check(const mge_node *n, const char *what, const mge_tensor *t, mge_dtype dt, int nd,
                                   const int64_t *dims, mge_error *err)
{
    int ok = t->dtype == dt && t->ndim == nd;
    for (int i = 0; ok && i < nd; i++)
        ok = t->dims[i] == dims[i];
    if (!ok) {
        char bt[96], be[96];
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: %s is %s: expected %s", ref_opname(n), what,
                             mge_shape_str(t->dtype, t->ndim, t->dims, bt, sizeof bt),
                             mge_shape_str(dt, nd, dims, be, sizeof be));
    }
    return ref_check_data(n, what, t, err);
}

/* t must be dtype dt, of any shape, and hold its data. */
static inline mge_status ref_check_dtype(const mge_node *n, const char *what, const mge_tensor *t, mge_dtype dt,
                                         mge_error *err)
{
    if (t->dtype != dt) {
        char bt[96];
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: %s is %s: expected dtype %s", ref_opname(n), what,
                             mge_shape_str(t->dtype, t->ndim, t->dims, bt, sizeof bt), mge_dtype_name(dt));
    }
    return ref_check_data(n, what, t, err);
}

/* Element count of a tensor whose shape ref_check_data accepted. */
static inline int64_t ref_numel(const mge_tensor *t)
{
    int64_t k = 1;
    for (int i = 0; i < t->ndim; i++)
        k *= t->dims[i];
    return k;
}

/* Advances a row-major multi-index idx over dims[0..nd); 0 when it wrapped. */
static inline int ref_next(int nd, const int64_t *dims, int64_t *idx)
{
    for (int d = nd - 1; d >= 0; d--) {
        if (++idx[d] < dims[d])
            return 1;
        idx[d] = 0;
    }
    return 0;
}

/* Element i of a float tensor (f32, f16, bf16) as a double, and the
 * store back (rounded to the dtype). The kernels compute in double and
 * touch memory only through these, so one loop serves every float dtype. */
static inline double ref_ld(mge_dtype dt, const void *p, int64_t i)
{
    switch (dt) {
    case MGE_F32: return ((const float *)p)[i];
    case MGE_F16: return mge_f16_to_f32(((const uint16_t *)p)[i]);
    case MGE_BF16: return mge_bf16_to_f32(((const uint16_t *)p)[i]);
    default: return 0;
    }
}

static inline void ref_st(mge_dtype dt, void *p, int64_t i, double v)
{
    switch (dt) {
    case MGE_F32: ((float *)p)[i] = (float)v; break;
    case MGE_F16: ((uint16_t *)p)[i] = mge_f32_to_f16((float)v); break;
    case MGE_BF16: ((uint16_t *)p)[i] = mge_f32_to_bf16((float)v); break;
    default: break;
    }
}

/* Element i of an integer tensor (i8, u8, i32, i64, bool) as an int64,
 * and the store back keeping the low bits (two's complement wrap). */
static inline int64_t ref_ild(mge_dtype dt, const void *p, int64_t i)
{
    switch (dt) {
    case MGE_I8: return ((const int8_t *)p)[i];
    case MGE_U8: return ((const uint8_t *)p)[i];
    case MGE_I32: return ((const int32_t *)p)[i];
    case MGE_I64: return ((const int64_t *)p)[i];
    case MGE_BOOL: return ((const uint8_t *)p)[i] != 0;
    default: return 0;
    }
}

static inline void ref_ist(mge_dtype dt, void *p, int64_t i, int64_t v)
{
    uint64_t u = (uint64_t)v;
    switch (dt) {
    case MGE_I8: ((int8_t *)p)[i] = (int8_t)(uint8_t)u; break;
    case MGE_U8: ((uint8_t *)p)[i] = (uint8_t)u; break;
    case MGE_I32: ((int32_t *)p)[i] = (int32_t)(uint32_t)u; break;
    case MGE_I64: ((int64_t *)p)[i] = v; break;
    case MGE_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    default: break;
    }
}

/* Loops dt over the float dtypes (f32, f16, bf16: the first three of mge_dtype). */
#define REF_EACH_FLOAT(dt) for (int dt = MGE_F32; dt <= MGE_BF16; dt++)

#endif
