/* ref_unary.c — elementwise unary ops (the activation table, kact.h),
 * their generic gradient unary_grad, isnan/isinf, prelu and its
 * gradient, dropout and cast.
 *
 * Every loop reads element i before it writes element i, so the output may
 * be the input's buffer (MGE_OPF_INPLACE). Float ops (f32, f16, bf16, f64) are
 * computed in double.
 * cast: float -> int truncates toward zero (numpy's astype); values beyond
 * i64 (u64 for u64) saturate and NaN gives 0, then narrower integers keep
 * the low bits (the wrap numpy shows on common platforms); -> bool is != 0;
 * every conversion to a float rounds once to nearest even (f64 -> f16 too). */
#include "ref.h"
#include "kact.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Input and output: same dtype dt, same shape, data present. */
static mge_status same(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                       mge_dtype dt, mge_error *err)
{
    mge_status st = ref_check_dtype(ctx, n, "x", in[0], dt, err);
    if (st)
        return st;
    return ref_check(ctx, n, "output", out[0], dt, in[0]->ndim, in[0]->dims, err);
}

/* f(v) for the table ops (kernels/kact.h, in double); alpha is leaky_relu's
 * or elu's. NaN passes through relu and friends as in PyTorch
 * (comparisons with NaN are false). The fused ops' ref kernels apply
 * their activations with it too. */
double mge_ref_unary(int op, double v, double alpha)
{
    kact_par p = kact_par_default(op, alpha);
    return kact_ref_f(op, v, &p);
}

static mge_status unary_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                              mge_tensor *const *out, mge_error *err)
{
    mge_dtype dt = in[0]->dtype;
    mge_status st = same(ctx, n, in, out, dt, err);
    if (st)
        return st;
    const void *x = in[0]->data;
    void *y = out[0]->data;
    int64_t cnt = ref_numel(in[0]);
    kact_par p = kact_par_node(n, n->op);
    for (int64_t i = 0; i < cnt; i++)
        ref_st(dt, y, i, kact_ref_f(n->op, ref_ld(dt, x, i), &p));
    return MGE_OK;
}

/* unary_grad(dy, t; act): dx = dy * f'(t), 0 where f'(t) is 0; like dy. */
static mge_status unary_grad_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                   mge_tensor *const *out, mge_error *err)
{
    mge_dtype dt = in[0]->dtype;
    int op = (int)mge_node_int(n, MGE_KEY_act, -1);
    if (!kact_has(op))
        return mge_error_set(err, MGE_ERR_INVALID, "%s: act (op %d) is not an op of the activation table",
                             ref_opname(ctx, n), op);
    mge_status st = ref_check_dtype(ctx, n, "dy", in[0], dt, err);
    if (st || (st = ref_check(ctx, n, "t", in[1], dt, in[0]->ndim, in[0]->dims, err)) ||
        (st = ref_check(ctx, n, "output", out[0], dt, in[0]->ndim, in[0]->dims, err)))
        return st;
    int64_t cnt = ref_numel(in[0]);
    kact_par p = kact_par_node(n, op);
    for (int64_t i = 0; i < cnt; i++) {
        double d = kact_ref_d(op, ref_ld(dt, in[1]->data, i), &p);
        ref_st(dt, out[0]->data, i, d == 0 ? 0.0 : ref_ld(dt, in[0]->data, i) * d);
    }
    return MGE_OK;
}

/* isnan, isinf: float -> bool. */
static mge_status isclass(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                          mge_error *err)
{
    mge_dtype dt = in[0]->dtype;
    mge_status st = ref_check_dtype(ctx, n, "x", in[0], dt, err);
    if (st || (st = ref_check(ctx, n, "output", out[0], MGE_BOOL, in[0]->ndim, in[0]->dims, err)))
        return st;
    int64_t cnt = ref_numel(in[0]);
    uint8_t *y = out[0]->data;
    for (int64_t i = 0; i < cnt; i++) {
        double v = ref_ld(dt, in[0]->data, i);
        y[i] = n->op == MGE_OP_ISNAN ? isnan(v) != 0 : isinf(v) != 0;
    }
    return MGE_OK;
}

/* The channel of element i of x for prelu's weight of length num: dim 1
 * when num > 1 (inference checked num against it), else 0. */
static int64_t prelu_chan(const mge_tensor *x, int64_t num, int64_t i)
{
    if (num <= 1 || x->ndim < 2)
        return 0;
    int64_t inner = 1;
    for (int d = 2; d < x->ndim; d++)
        inner *= x->dims[d];
    return (i / inner) % x->dims[1];
}

static mge_status prelu_check(const mge_kctx *ctx, const mge_node *n, const mge_tensor *x, const mge_tensor *w,
                              mge_error *err)
{
    mge_dtype dt = x->dtype;
    mge_status st = ref_check_dtype(ctx, n, "x", x, dt, err);
    if (st || (st = ref_check_dtype(ctx, n, "weight", w, dt, err)))
        return st;
    int64_t num = ref_numel(w);
    if (w->ndim != 1 || !(num == 1 || (x->ndim >= 2 && num == x->dims[1])))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: weight has %lld values: expected 1 or the channels (dim 1)",
                             ref_opname(ctx, n), (long long)num);
    return MGE_OK;
}

/* prelu(x, weight): x < 0 ? w[c] * x : x (PyTorch: NaN stays NaN). */
static mge_status prelu_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                              mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *x = in[0], *w = in[1];
    mge_status st = prelu_check(ctx, n, x, w, err);
    if (st || (st = ref_check(ctx, n, "output", out[0], x->dtype, x->ndim, x->dims, err)))
        return st;
    mge_dtype dt = x->dtype;
    int64_t cnt = ref_numel(x), num = ref_numel(w);
    for (int64_t i = 0; i < cnt; i++) {
        double v = ref_ld(dt, x->data, i);
        ref_st(dt, out[0]->data, i, v < 0 ? ref_ld(dt, w->data, prelu_chan(x, num, i)) * v : v);
    }
    return MGE_OK;
}

/* prelu_grad(dy, x, weight) -> dx = x > 0 ? dy : w[c] dy (PyTorch's: x == 0
 * takes the weight), dweight[c] = sum over x <= 0 of dy * x. */
static mge_status prelu_grad_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                   mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *dy = in[0], *x = in[1], *w = in[2];
    mge_status st = prelu_check(ctx, n, x, w, err);
    mge_dtype dt = x->dtype;
    if (st || (st = ref_check(ctx, n, "dy", dy, dt, x->ndim, x->dims, err)) ||
        (st = ref_check(ctx, n, "dx", out[0], dt, x->ndim, x->dims, err)) ||
        (st = ref_check(ctx, n, "dweight", out[1], dt, w->ndim, w->dims, err)))
        return st;
    int64_t cnt = ref_numel(x), num = ref_numel(w);
    double *dw = calloc((size_t)(num > 0 ? num : 1), sizeof *dw);
    if (!dw)
        return mge_error_set(err, MGE_ERR_NOMEM, "%s: out of memory", ref_opname(ctx, n));
    for (int64_t i = 0; i < cnt; i++) {
        double v = ref_ld(dt, x->data, i), g = ref_ld(dt, dy->data, i);
        int64_t c = prelu_chan(x, num, i);
        ref_st(dt, out[0]->data, i, v > 0 ? g : ref_ld(dt, w->data, c) * g);
        if (v <= 0)
            dw[c] += g * v;
    }
    for (int64_t c = 0; c < num; c++)
        ref_st(dt, out[1]->data, c, dw[c]);
    free(dw);
    return MGE_OK;
}

/* relu, relu6, neg, abs, sign, square and clamp on integers, computed on 64 bits
 * and stored keeping the low bits: neg/abs of the minimum value wrap back
 * to it, and square wraps, as numpy and PyTorch give. */
static mge_status unary_int(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                            mge_error *err)
{
    mge_dtype dt = in[0]->dtype;
    mge_status st = same(ctx, n, in, out, dt, err);
    if (st)
        return st;
    if (!ref_isint(dt))
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: no reference kernel for %s", ref_opname(ctx, n),
                             mge_dtype_name(dt));
    int uns = ref_iunsigned(dt);
    int64_t cnt = ref_numel(in[0]);
    /* clamp: inference checked the bounds are integers in dt's range */
    const mge_attr *amin = mge_node_attr(n, MGE_KEY_min), *amax = mge_node_attr(n, MGE_KEY_max);
    int64_t lo = amin ? (int64_t)amin->f : INT64_MIN, hi = amax ? (int64_t)amax->f : INT64_MAX;
    for (int64_t i = 0; i < cnt; i++) {
        int64_t v = ref_ild(dt, in[0]->data, i), r;
        switch (n->op) {
        case MGE_OP_RELU: r = !uns && v < 0 ? 0 : v; break;
        case MGE_OP_RELU6: r = !uns && v < 0 ? 0 : ref_ilt(dt, 6, v) ? 6 : v; break;
        case MGE_OP_NEG: r = (int64_t)(0u - (uint64_t)v); break;
        case MGE_OP_ABS: r = !uns && v < 0 ? (int64_t)(0u - (uint64_t)v) : v; break;
        case MGE_OP_SIGN: r = uns ? v != 0 : (v > 0) - (v < 0); break;
        case MGE_OP_SQUARE: r = (int64_t)((uint64_t)v * (uint64_t)v); break;
        case MGE_OP_CLAMP:
            r = v < lo ? lo : v;
            r = r > hi ? hi : r;   /* min > max gives max, as torch.clamp */
            break;
        default: return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: no integer kernel", ref_opname(ctx, n));
        }
        ref_ist(dt, out[0]->data, i, r);
    }
    return MGE_OK;
}

/* Dropout: identity outside training; in training each element is kept
 * with probability 1-p (one uniform draw per element, in order) and scaled
 * by 1/(1-p). p = 1 drops everything. */
static mge_status dropout_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                mge_tensor *const *out, mge_error *err)
{
    mge_dtype dt = in[0]->dtype;
    mge_status st = same(ctx, n, in, out, dt, err);
    if (st)
        return st;
    const void *x = in[0]->data;
    void *y = out[0]->data;
    int64_t cnt = ref_numel(in[0]);
    double p = mge_node_float(n, MGE_KEY_p, 0.5);
    if (!(p >= 0 && p <= 1))
        return mge_error_set(err, MGE_ERR_INVALID, "dropout: p=%g: expected a probability in [0, 1]", p);
    if (!ctx->training || p == 0) {
        if (y != x && cnt > 0)
            memcpy(y, x, (size_t)cnt * mge_dtype_size(dt));
        return MGE_OK;
    }
    if (!ctx->rng)
        return mge_error_set(err, MGE_ERR_INVALID, "dropout: training needs a random generator");
    double scale = p < 1 ? 1.0 / (1.0 - p) : 0.0;
    for (int64_t i = 0; i < cnt; i++) {
        float u = mge_rng_uniform(ctx->rng);
        ref_st(dt, y, i, (double)u >= p ? ref_ld(dt, x, i) * scale : 0.0);
    }
    return MGE_OK;
}

/* ---------------------------------------------------------------- cast */

static double load_float(mge_dtype dt, const void *p, int64_t i)
{
    return ref_ld(dt, p, i);
}

static void store_float(mge_dtype dt, void *p, int64_t i, double v)
{
    switch (dt) {
    case MGE_F32: ((float *)p)[i] = (float)v; break;
    case MGE_F64: ((double *)p)[i] = v; break;
    case MGE_F16: ((uint16_t *)p)[i] = mge_f64_to_f16(v); break;   /* rounded once */
    case MGE_BF16: ((uint16_t *)p)[i] = mge_f64_to_bf16(v); break;
    default: break;
    }
}

/* An integer of magnitude m (negative when neg) as a float rounded to
 * odd: its top 24 bits, the last one set when any bit below was. (Through
 * a double would round to nearest first, beyond 2^53, and lose that.) */
static float i2f_odd(uint64_t m, int neg)
{
    int s = 0;
    while ((m >> s) >= (UINT64_C(1) << 24))
        s++;
    uint64_t t = m >> s;
    if (s && (m & ((UINT64_C(1) << s) - 1)))
        t |= 1;
    float f = ldexpf((float)t, s); /* t < 2^24: exact */
    return neg ? -f : f;
}

/* An integer (ref_ild's value of dt) into a float dtype, rounded once:
 * straight to f32 or f64, through round-to-odd for f16 and bf16. */
static void store_int_float(mge_dtype ddt, void *p, int64_t i, mge_dtype sdt, int64_t v)
{
    int u = sdt == MGE_U64, neg = !u && v < 0;
    uint64_t m = neg ? 0 - (uint64_t)v : (uint64_t)v;
    switch (ddt) {
    case MGE_F32: ((float *)p)[i] = u ? (float)(uint64_t)v : (float)v; break;
    case MGE_F64: ((double *)p)[i] = u ? (double)(uint64_t)v : (double)v; break;
    case MGE_F16: ((uint16_t *)p)[i] = mge_f32_to_f16(i2f_odd(m, neg)); break;
    case MGE_BF16: ((uint16_t *)p)[i] = mge_f32_to_bf16(i2f_odd(m, neg)); break;
    default: break;
    }
}

/* Truncation toward zero without the undefined behaviour of converting an
 * out-of-range float: NaN gives 0; to u64, [2^63, 2^64) converts and
 * beyond saturates; otherwise the i64 limits saturate (a narrower integer
 * then keeps the low bits, as numpy shows on common platforms). */
static int64_t float_to_int(double f, mge_dtype to)
{
    if (isnan(f))
        return 0;
    if (to == MGE_U64 && f >= 9223372036854775808.0)
        return f >= 18446744073709551616.0 ? (int64_t)UINT64_MAX : (int64_t)(uint64_t)f;
    if (f >= 9223372036854775808.0)
        return INT64_MAX;
    if (f < -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)f;
}

static mge_status cast_any(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                           mge_error *err)
{
    const mge_tensor *x = in[0];
    mge_tensor *y = out[0];
    int64_t to = mge_node_int(n, MGE_KEY_dtype, -1);
    mge_dtype sdt = x->dtype;
    if (to < 0 || to >= MGE_NDTYPES || to == MGE_QS8 || to == MGE_QS32 || sdt == MGE_QS8 || sdt == MGE_QS32)
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "cast: %s to dtype %lld is not supported",
                             mge_dtype_name(sdt), (long long)to);
    mge_dtype ddt = (mge_dtype)to;
    mge_status st = ref_check_data(ctx, n, "x", x, err);
    if (st || (st = ref_check(ctx, n, "output", y, ddt, x->ndim, x->dims, err)))
        return st;
    int64_t cnt = ref_numel(x);
    if (sdt == ddt) {
        if (y->data != x->data && cnt > 0)
            memmove(y->data, x->data, (size_t)cnt * mge_dtype_size(sdt));
        return MGE_OK;
    }
    /* Sizes differ or the encoding does, so y never aliases x here except
     * for same-size pairs (i8/u8/bool, f16/bf16): element i is read before
     * it is written, which keeps that safe too. */
    int sf = mge_dtype_is_float(sdt), df = mge_dtype_is_float(ddt);
    /* f64 <-> i64/u64 are the only same-size pairs of different kinds:
     * element i is still read before it is written */
    for (int64_t i = 0; i < cnt; i++) {
        if (sf) {
            double v = load_float(sdt, x->data, i);
            if (df)
                store_float(ddt, y->data, i, v);
            else if (ddt == MGE_BOOL)
                ((uint8_t *)y->data)[i] = v != 0; /* NaN is true, as in numpy */
            else
                ref_ist(ddt, y->data, i, float_to_int(v, ddt));
        } else {
            int64_t v = ref_ild(sdt, x->data, i);
            if (df)
                store_int_float(ddt, y->data, i, sdt, v);
            else
                ref_ist(ddt, y->data, i, v);
        }
    }
    return MGE_OK;
}

void mge_ref_register_unary(mge_backend *b)
{
    REF_EACH_FLOAT(dt) {
#define UN_REG_(ID, F, W, D) b->k[MGE_OP_##ID][dt].run = unary_float;
        KACT_LIST(UN_REG_)
#undef UN_REG_
        b->k[MGE_OP_DROPOUT][dt].run = dropout_float;
        b->k[MGE_OP_UNARY_GRAD][dt].run = unary_grad_float;
        b->k[MGE_OP_ISNAN][dt].run = isclass;
        b->k[MGE_OP_ISINF][dt].run = isclass;
        b->k[MGE_OP_PRELU][dt].run = prelu_float;
        b->k[MGE_OP_PRELU_GRAD][dt].run = prelu_grad_float;
    }
    static const int iops[] = {MGE_OP_RELU, MGE_OP_RELU6, MGE_OP_NEG, MGE_OP_ABS,
                               MGE_OP_SIGN, MGE_OP_SQUARE, MGE_OP_CLAMP};
    for (size_t i = 0; i < sizeof iops / sizeof iops[0]; i++) {
        b->k[iops[i]][MGE_I8].run = unary_int;
        b->k[iops[i]][MGE_I16].run = unary_int;
        b->k[iops[i]][MGE_I32].run = unary_int;
        b->k[iops[i]][MGE_I64].run = unary_int;
    }
    REF_EACH_FLOAT(dt)
        b->k[MGE_OP_CAST][dt].run = cast_any;
    REF_EACH_INT(dt)
        b->k[MGE_OP_CAST][dt].run = cast_any;
    b->k[MGE_OP_CAST][MGE_BOOL].run = cast_any;
}
