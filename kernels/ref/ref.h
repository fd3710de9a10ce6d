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

#endif
