/* ref.h — checks shared by the reference kernels (kernels/ref).
 *
 * The ref kernels are the oracle: plain loops, double accumulation, and a
 * check of every shape they touch, so that a kernel called with shapes the
 * inference did not produce fails with a message instead of reading or
 * writing out of bounds. */
#ifndef MGE_REF_H
#define MGE_REF_H

#include "internal.h"
#include "kindex.h"

#include <math.h>
#include <string.h>

/* ref_unary.c: a float unary op (relu ... abs, not cast or dropout) of v, in
 * double; alpha is leaky_relu's slope. */
double mge_ref_unary(int op, double v, double alpha);
/* ref_binary.c: a float elementwise binary op (add ... minimum) of a and b,
 * in double; NaN propagates through maximum and minimum, as numpy. */
double mge_ref_binary(int op, double a, double b);

/* The op's name for messages, from the kernel context (mge_kctx_opname). */
static inline const char *ref_opname(const mge_kctx *ctx, const mge_node *n)
{
    return mge_kctx_opname(ctx, n);
}

/* t must hold its data: non-NULL when it has elements, and nbytes enough
 * for its dims. */
static inline mge_status ref_check_data(const mge_kctx *ctx, const mge_node *n, const char *what, const mge_tensor *t,
                                        mge_error *err)
{
    if (t->ndim < 0 || t->ndim > MGE_MAX_DIMS)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: %s has rank %d", ref_opname(ctx, n), what, t->ndim);
    int64_t numel;
    size_t nbytes;
    mge_status s = mge_shape_numel(t->ndim, t->dims, t->dtype, &numel, &nbytes, err);
    if (s)
        return s;
    if (numel > 0 && (!t->data || t->nbytes < nbytes))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: %s has %zu bytes of data for %lld elements", ref_opname(ctx, n),
                             what, t->data ? t->nbytes : (size_t)0, (long long)numel);
    return MGE_OK;
}

/* t must be dtype dt with shape dims[0..nd) and hold its data. */
static inline mge_status ref_check(const mge_kctx *ctx, const mge_node *n, const char *what, const mge_tensor *t,
                                   mge_dtype dt, int nd, const int64_t *dims, mge_error *err)
{
    int ok = t->dtype == dt && t->ndim == nd;
    for (int i = 0; ok && i < nd; i++)
        ok = t->dims[i] == dims[i];
    if (!ok) {
        char bt[96], be[96];
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: %s is %s: expected %s", ref_opname(ctx, n), what,
                             mge_shape_str(t->dtype, t->ndim, t->dims, bt, sizeof bt),
                             mge_shape_str(dt, nd, dims, be, sizeof be));
    }
    return ref_check_data(ctx, n, what, t, err);
}

/* t must be dtype dt, of any shape, and hold its data. */
static inline mge_status ref_check_dtype(const mge_kctx *ctx, const mge_node *n, const char *what, const mge_tensor *t,
                                         mge_dtype dt, mge_error *err)
{
    if (t->dtype != dt) {
        char bt[96];
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: %s is %s: expected dtype %s", ref_opname(ctx, n), what,
                             mge_shape_str(t->dtype, t->ndim, t->dims, bt, sizeof bt), mge_dtype_name(dt));
    }
    return ref_check_data(ctx, n, what, t, err);
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

/* Element i of a float tensor (f32, f16, bf16, f64) as a double, and the
 * store back (rounded to the dtype). The kernels compute in double and
 * touch memory only through these, so one loop serves every float dtype. */
static inline double ref_ld(mge_dtype dt, const void *p, int64_t i)
{
    switch (dt) {
    case MGE_F32: return ((const float *)p)[i];
    case MGE_F64: return ((const double *)p)[i];
    case MGE_F16: return mge_f16_to_f32(((const uint16_t *)p)[i]);
    case MGE_BF16: return mge_bf16_to_f32(((const uint16_t *)p)[i]);
    default: return 0;
    }
}

static inline void ref_st(mge_dtype dt, void *p, int64_t i, double v)
{
    switch (dt) {
    case MGE_F32: ((float *)p)[i] = (float)v; break;
    case MGE_F64: ((double *)p)[i] = v; break;
    /* through f32 first: a double rounds twice on the way to f16 (a value
     * just off a tie can land on the other side), within the kernels'
     * tolerance for a narrow dtype */
    case MGE_F16: ((uint16_t *)p)[i] = mge_f32_to_f16((float)v); break;
    case MGE_BF16: ((uint16_t *)p)[i] = mge_f32_to_bf16((float)v); break;
    default: break;
    }
}

/* Element i of an integer tensor (i8, u8, i16, u16, i32, u32, i64, u64,
 * bool) as an int64, and the store back keeping the low bits (two's
 * complement wrap). u64 values from 2^63 come back negative: the bits are
 * kept, and ops whose result depends on the sign (compare, divide,
 * convert to float) ask ref_iunsigned. */
static inline int64_t ref_ild(mge_dtype dt, const void *p, int64_t i)
{
    switch (dt) {
    case MGE_I8: return ((const int8_t *)p)[i];
    case MGE_U8: return ((const uint8_t *)p)[i];
    case MGE_I16: return ((const int16_t *)p)[i];
    case MGE_U16: return ((const uint16_t *)p)[i];
    case MGE_I32: return ((const int32_t *)p)[i];
    case MGE_U32: return ((const uint32_t *)p)[i];
    case MGE_I64: return ((const int64_t *)p)[i];
    case MGE_U64: return (int64_t)((const uint64_t *)p)[i];
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
    case MGE_I16: ((int16_t *)p)[i] = (int16_t)(uint16_t)u; break;
    case MGE_U16: ((uint16_t *)p)[i] = (uint16_t)u; break;
    case MGE_I32: ((int32_t *)p)[i] = (int32_t)(uint32_t)u; break;
    case MGE_U32: ((uint32_t *)p)[i] = (uint32_t)u; break;
    case MGE_I64: ((int64_t *)p)[i] = v; break;
    case MGE_U64: ((uint64_t *)p)[i] = u; break;
    case MGE_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    default: break;
    }
}

/* The unsigned integer dtypes (and bool): their ref_ild values compare,
 * divide and convert as uint64 (the same order as int64 but for u64). */
static inline int ref_iunsigned(mge_dtype dt)
{
    return dt == MGE_U8 || dt == MGE_U16 || dt == MGE_U32 || dt == MGE_U64 || dt == MGE_BOOL;
}

/* The integer dtypes ref_ild reads (not bool or the quantized ones). */
static inline int ref_isint(mge_dtype dt)
{
    return dt == MGE_I8 || dt == MGE_U8 || dt == MGE_I16 || dt == MGE_U16 || dt == MGE_I32 || dt == MGE_U32 ||
           dt == MGE_I64 || dt == MGE_U64;
}

/* a < b for two ref_ild values of dt. */
static inline int ref_ilt(mge_dtype dt, int64_t a, int64_t b)
{
    return ref_iunsigned(dt) ? (uint64_t)a < (uint64_t)b : a < b;
}

/* The node's axis attribute (def when absent) resolved against x's rank
 * into *ax; an error when out of range. */
static inline mge_status ref_axis(const mge_kctx *ctx, const mge_node *n, const mge_tensor *x, int64_t def, int *ax,
                                  mge_error *err)
{
    int64_t av = mge_node_ints(n, MGE_KEY_axis, 0, def);
    *ax = mge_axis(av, x->ndim);
    if (*ax < 0)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: axis=%lld is out of range for rank %d", ref_opname(ctx, n),
                             (long long)av, x->ndim);
    return MGE_OK;
}

/* cross_entropy and its gradient: logits x [N,C,d...] (float) with labels
 * [N,d...] (i32 or i64, each in [0, C) or equal to ignore); S is the
 * product of d..., *cnt the positions not ignored. */
static inline mge_status ref_ce_check(const mge_kctx *ctx, const mge_node *n, const mge_tensor *x,
                                      const mge_tensor *lab, int64_t ignore, int64_t *N, int64_t *C, int64_t *S,
                                      int64_t *cnt, mge_error *err)
{
    if (!mge_dtype_is_float(x->dtype))
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: no reference kernel for %s logits", ref_opname(ctx, n),
                             mge_dtype_name(x->dtype));
    if (lab->dtype != MGE_I32 && lab->dtype != MGE_I64)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: label is %s: expected i32 or i64", ref_opname(ctx, n),
                             mge_dtype_name(lab->dtype));
    if (x->ndim < 2)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: logits have rank %d: expected [N,C,...]", ref_opname(ctx, n),
                             x->ndim);
    int64_t ld[MGE_MAX_DIMS];
    *N = ld[0] = x->dims[0];
    *C = x->dims[1];
    *S = 1;
    for (int d = 2; d < x->ndim; d++) {
        ld[d - 1] = x->dims[d];
        *S *= x->dims[d];
    }
    mge_status st = ref_check(ctx, n, "label", lab, lab->dtype, x->ndim - 1, ld, err);
    *cnt = 0;
    for (int64_t at = 0; !st && at < *N * *S; at++) {
        int64_t c = ref_ild(lab->dtype, lab->data, at);
        if (c == ignore)
            continue;
        ++*cnt;
        if (c < 0 || c >= *C) {
            char b[160];
            st = mge_error_set(err, MGE_ERR_INVALID, "%s: label%s = %lld is outside the classes [0, %lld)",
                               ref_opname(ctx, n), kidx_pos(lab->ndim, lab->dims, at, b, sizeof b), (long long)c,
                               (long long)*C);
        }
    }
    return st;
}

/* Max m (NaN wins) and sum of exp(v - m) over the C classes of one
 * position, class j at row + j * S. */
static inline void ref_ce_row(mge_dtype dt, const void *x, int64_t row, int64_t C, int64_t S, double *m, double *sum)
{
    double mx = -INFINITY, s = 0;
    for (int64_t j = 0; j < C; j++) {
        double v = ref_ld(dt, x, row + j * S);
        if (v > mx || isnan(v))
            mx = v;
    }
    for (int64_t j = 0; j < C; j++)
        s += exp(ref_ld(dt, x, row + j * S) - mx);
    *m = mx;
    *sum = s;
}

/* Mean and 1 / sqrt(biased variance + eps) of D contiguous values at o. */
static inline void ref_row_moments(mge_dtype dt, const void *x, int64_t o, int64_t D, double eps, double *mean,
                                   double *inv)
{
    double sum = 0, sq = 0;
    for (int64_t j = 0; j < D; j++)
        sum += ref_ld(dt, x, o + j);
    double m = sum / (double)D;
    for (int64_t j = 0; j < D; j++) {
        double d = ref_ld(dt, x, o + j) - m;
        sq += d * d;
    }
    *mean = m;
    *inv = 1.0 / sqrt(sq / (double)D + eps);
}

/* pool2d geometry (NCHW); d is 1 but for maxpool. */
typedef struct ref_pool_geom {
    int64_t N, C, H, W, OH, OW, k[2], s[2], p[2], d[2];
} ref_pool_geom;

/* kernel, stride (default: kernel), pad, and dilation when dil. */
static inline mge_status ref_pool_attrs(const mge_kctx *ctx, const mge_node *n, int dil, ref_pool_geom *g,
                                        mge_error *err)
{
    for (int i = 0; i < 2; i++) {
        g->k[i] = mge_node_ints(n, MGE_KEY_kernel, i, 1);
        g->s[i] = mge_node_ints(n, MGE_KEY_stride, i, g->k[i]);
        g->p[i] = mge_node_ints(n, MGE_KEY_pad, i, 0);
        g->d[i] = dil ? mge_node_ints(n, MGE_KEY_dilation, i, 1) : 1;
        if (g->k[i] < 1 || g->s[i] < 1 || g->p[i] < 0 || g->d[i] < 1)
            return mge_error_set(err, MGE_ERR_INVALID, "%s: invalid kernel, stride, pad or dilation",
                                 ref_opname(ctx, n));
    }
    return MGE_OK;
}

/* avgpool window of output (oh, ow): clipped to the padded input, then to
 * the input ([h0,h1) x [w0,w1)); returns the divisor (count_include_pad:
 * the padded window's size), <= 0 when there is none. */
static inline int64_t ref_avg_window(const ref_pool_geom *g, int64_t oh, int64_t ow, int incl, int64_t *h0,
                                     int64_t *h1, int64_t *w0, int64_t *w1)
{
    int64_t a0 = oh * g->s[0] - g->p[0], b0 = ow * g->s[1] - g->p[1];
    int64_t a1 = a0 + g->k[0], b1 = b0 + g->k[1];
    if (a1 > g->H + g->p[0])
        a1 = g->H + g->p[0];
    if (b1 > g->W + g->p[1])
        b1 = g->W + g->p[1];
    int64_t padded = (a1 - a0) * (b1 - b0);
    a0 = a0 < 0 ? 0 : a0, b0 = b0 < 0 ? 0 : b0;
    a1 = a1 > g->H ? g->H : a1, b1 = b1 > g->W ? g->W : b1;
    *h0 = a0, *h1 = a1, *w0 = b0, *w1 = b1;
    return incl ? padded : (a1 > a0 && b1 > b0 ? (a1 - a0) * (b1 - b0) : 0);
}

/* conv2d and fused_conv2d geometry (NCHW, weight OIHW), from ref_conv.c. */
typedef struct ref_conv_geom {
    int64_t N, C, H, W, O, KH, KW, OH, OW, g, s[2], p[2], d[2];
} ref_conv_geom;

/* The stride, pad, dilation and groups of node n and the shapes of x and
 * weight w (ranks and groups checked, dtypes and data not) into *q. */
mge_status mge_ref_conv_geom(const mge_kctx *ctx, const mge_node *n, const mge_tensor *x, const mge_tensor *w,
                             ref_conv_geom *q, mge_error *err);
/* acc plus the sum over c in o's group, kh, kw of x[ni,c,ih,iw] * w[o,c,kh,kw]
 * (ih = oh*s-p+kh*d, iw likewise; taps in the padding skipped), in double. */
double mge_ref_conv_acc(mge_dtype dt, const ref_conv_geom *q, const void *x, const void *w, int64_t ni, int64_t o,
                        int64_t oh, int64_t ow, double acc);

/* The float dtypes in order: f32, f16, bf16 (the first three of
 * mge_dtype), then f64 (appended later); MGE_NDTYPES past the end. */
static inline int ref_float_at(int i)
{
    return i < 3 ? i : i == 3 ? MGE_F64 : MGE_NDTYPES;
}

/* The integer dtypes in order (i8 u8 i16 u16 i32 u32 i64 u64); MGE_NDTYPES past the end. */
static inline int ref_int_at(int i)
{
    static const int8_t t[] = {MGE_I8, MGE_U8, MGE_I16, MGE_U16, MGE_I32, MGE_U32, MGE_I64, MGE_U64};
    return i >= 0 && i < 8 ? t[i] : MGE_NDTYPES;
}

/* Loops dt over the float dtypes (f32, f16, bf16, f64). */
#define REF_EACH_FLOAT(dt) for (int dt##_i_ = 0, dt = MGE_F32; (dt = ref_float_at(dt##_i_)) < MGE_NDTYPES; dt##_i_++)
/* Loops dt over the integer dtypes (not bool). */
#define REF_EACH_INT(dt) for (int dt##_i_ = 0, dt = MGE_I8; (dt = ref_int_at(dt##_i_)) < MGE_NDTYPES; dt##_i_++)

#endif
