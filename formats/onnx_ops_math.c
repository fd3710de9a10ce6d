/* onnx_ops_math.c — ONNX converters for elementwise math: unary functions
 * and activations, the broadcasting arithmetic and comparisons, the
 * boolean ops, Where, the variadic Max/Min/Sum/Mean, Pow, Mod, Clip and
 * Cast. Reductions, softmax and the ops along an axis are onnx_ops_reduce.c.
 *
 * An ONNX op maps onto one mge op where the semantics are the same; where
 * mge has no op of its own (ThresholdedRelu, Celu, Mod, Tan, Gelu's tanh
 * form, HardSigmoid's other slopes, PRelu's general broadcast) it becomes a
 * few elementary mge nodes. ONNX broadcasting is numpy's, like mge's, from
 * opset 7; before it, broadcast=1 with axis places B over A from that axis
 * (a reshape of B with trailing 1s makes that numpy's too). */
#include "onnx.h"

#include <math.h>
#include <string.h>
#include <strings.h>

/* ---------------------------------------------------------------- helpers (shared with onnx_ops_reduce.c) */

/* A 0-d constant of dtype dt holding v (bool: v != 0). */
int mge_onnx_scalar(mge_onnx_ctx *c, mge_onnx_node *n, mge_dtype dt, double v)
{
    mge_tensor t;
    if (mge_tensor_alloc(&t, dt, 0, NULL, c->err))
        return -1;
    switch (dt) {
    case MGE_F32: *(float *)t.data = (float)v; break;
    case MGE_F16: *(uint16_t *)t.data = mge_f32_to_f16((float)v); break;
    case MGE_BF16: *(uint16_t *)t.data = mge_f32_to_bf16((float)v); break;
    case MGE_I8: *(int8_t *)t.data = (int8_t)v; break;
    case MGE_U8: *(uint8_t *)t.data = (uint8_t)v; break;
    case MGE_BOOL: *(uint8_t *)t.data = v != 0; break;
    case MGE_I32: *(int32_t *)t.data = v >= INT32_MAX ? INT32_MAX : v <= INT32_MIN ? INT32_MIN : (int32_t)v; break;
    case MGE_I64: /* saturating: 2^63 does not convert */
        *(int64_t *)t.data = v >= 0x1p63 ? INT64_MAX : v <= -0x1p63 ? INT64_MIN : (int64_t)v;
        break;
    case MGE_F64: case MGE_I16: case MGE_U16: case MGE_U32: case MGE_U64:
        mge_dtype_set(dt, t.data, 0, v); /* saturating, NaN 0 */
        break;
    default:
        mge_tensor_free(&t);
        mge_onnx_fail(c, n, "a constant of dtype %s", mge_dtype_name(dt));
        return -1;
    }
    return mge_onnx_const(c, n, &t);
}

static int step1(mge_onnx_ctx *c, mge_onnx_node *n, int op, int a)
{
    return mge_onnx_emit_tmp(c, n, op, 1, &a, 0, NULL);
}

static mge_status fin1(mge_onnx_ctx *c, mge_onnx_node *n, int op, int a)
{
    return mge_onnx_finish(c, n, op, 1, &a, 0, NULL);
}

static mge_status fin2(mge_onnx_ctx *c, mge_onnx_node *n, int op, int a, int b)
{
    int in[2] = {a, b};
    return mge_onnx_finish(c, n, op, 2, in, 0, NULL);
}

/* Input i, which the op requires. */
static mge_status need_in(mge_onnx_ctx *c, mge_onnx_node *n, int i, int *v)
{
    if ((*v = mge_onnx_in(c, n, i)) < 0)
        return mge_onnx_fail(c, n, "input %d is missing", i);
    return MGE_OK;
}

static mge_dtype dtype_of(mge_onnx_ctx *c, int v)
{
    return mge_onnx_value(c, v)->dtype;
}

static mge_status need_float(mge_onnx_ctx *c, mge_onnx_node *n, int v)
{
    mge_dtype dt = dtype_of(c, v);
    if (mge_dtype_is_float(dt))
        return MGE_OK;
    return mge_onnx_unsupported(c, n, "%s over %s (mge computes it in f32, f16, bf16 and f64 only)", n->op_type,
                                mge_dtype_name(dt));
}

/* The one element of a constant input, when v is constant data. */
static int const_scalar(mge_onnx_ctx *c, mge_onnx_node *n, int v, const char *what, double *out, mge_status *st)
{
    *st = MGE_OK;
    if (v < 0 || !mge_onnx_data(c, v))
        return 0;
    double d[2];
    int cnt;
    if ((*st = mge_onnx_known(c, n, v, what, d, 1, &cnt)))
        return 0;
    if (cnt != 1) {
        *st = mge_onnx_fail(c, n, "%s has %d elements: expected one", what, cnt);
        return 0;
    }
    *out = d[0];
    return 1;
}

/* Opset < 7: B over A from axis when broadcast = 1 (B gets trailing 1s). */
static mge_status legacy_bcast(mge_onnx_ctx *c, mge_onnx_node *n, int a, int *b)
{
    if (c->opset >= 7 || !mge_onnx_attr_i(n, "broadcast", 0) || !mge_onnx_attr(n, "axis"))
        return MGE_OK;
    int ra = mge_onnx_value(c, a)->ndim, rb = mge_onnx_value(c, *b)->ndim;
    int64_t ax = mge_onnx_attr_i(n, "axis", 0);
    int axis = mge_onnx_axis(ax, ra);
    if (axis < 0 || axis + rb > ra)
        return mge_onnx_fail(c, n, "broadcast axis %lld does not place B (rank %d) inside A (rank %d)",
                             (long long)ax, rb, ra);
    if (axis + rb == ra)
        return MGE_OK;
    int64_t sh[MGE_MAX_DIMS];
    for (int i = 0; i < ra - axis; i++)
        sh[i] = i < rb ? 0 : 1; /* 0: copy B's dim */
    mge_attr at[1] = {mge_onnx_ais(MGE_KEY_shape, ra - axis, sh)};
    if ((*b = mge_onnx_emit_tmp(c, n, MGE_OP_RESHAPE, 1, b, 1, at)) < 0)
        return c->err->code;
    return MGE_OK;
}

/* ---------------------------------------------------------------- one to one */

enum { ANY = 0, FLT = 1, SINT = 2 }; /* the dtypes mge's op takes: any, float, float and i8/i32/i64 */

static const struct {
    const char *type;
    int op, dts;
} direct_ops[] = {
    {"Relu", MGE_OP_RELU, SINT},          {"Sigmoid", MGE_OP_SIGMOID, FLT},     {"Tanh", MGE_OP_TANH, FLT},
    {"Exp", MGE_OP_EXP, FLT},             {"Log", MGE_OP_LOG, FLT},             {"Sqrt", MGE_OP_SQRT, FLT},
    {"Neg", MGE_OP_NEG, SINT},            {"Abs", MGE_OP_ABS, SINT},            {"Erf", MGE_OP_ERF, FLT},
    {"Reciprocal", MGE_OP_RECIPROCAL, FLT}, {"Sign", MGE_OP_SIGN, SINT},        {"Floor", MGE_OP_FLOOR, FLT},
    {"Ceil", MGE_OP_CEIL, FLT},           {"Round", MGE_OP_ROUND, FLT},         {"Sin", MGE_OP_SIN, FLT},
    {"Cos", MGE_OP_COS, FLT},             {"Softsign", MGE_OP_SOFTSIGN, FLT},   {"Mish", MGE_OP_MISH, FLT},
    {"HardSwish", MGE_OP_HSWISH, FLT},    {"Softplus", MGE_OP_SOFTPLUS, FLT},   {"IsNaN", MGE_OP_ISNAN, FLT},
    {"Not", MGE_OP_NOT, ANY},             {"Add", MGE_OP_ADD, ANY},             {"Sub", MGE_OP_SUB, ANY},
    {"Mul", MGE_OP_MUL, ANY},             {"Div", MGE_OP_DIV, ANY},             {"And", MGE_OP_AND, ANY},
    {"Or", MGE_OP_OR, ANY},               {"Xor", MGE_OP_XOR, ANY},             {"Equal", MGE_OP_EQUAL, ANY},
    {"Less", MGE_OP_LESS, ANY},           {"Greater", MGE_OP_GREATER, ANY},     {"LessOrEqual", MGE_OP_LESS_EQUAL, ANY},
    {"GreaterOrEqual", MGE_OP_GREATER_EQUAL, ANY}, {"Where", MGE_OP_WHERE, ANY},
};

static mge_status conv_direct(mge_onnx_ctx *c, mge_onnx_node *n)
{
    for (size_t i = 0; i < sizeof direct_ops / sizeof direct_ops[0]; i++) {
        if (strcmp(direct_ops[i].type, n->op_type) != 0)
            continue;
        int op = direct_ops[i].op;
        const mge_opinfo *oi = mge_op_info(op);
        int nin = mge_onnx_nin(n), in[3];
        if (nin != oi->min_in)
            return mge_onnx_fail(c, n, "%d inputs: expected %d", nin, oi->min_in);
        for (int k = 0; k < nin; k++)
            if ((in[k] = mge_onnx_in(c, n, k)) < 0)
                return mge_onnx_fail(c, n, "input %d is missing", k);
        mge_dtype dt = dtype_of(c, in[0]);
        if (direct_ops[i].dts == FLT && !mge_dtype_is_float(dt))
            return need_float(c, n, in[0]);
        if (dt == MGE_U8 && (op == MGE_OP_ABS || op == MGE_OP_RELU)) /* unsigned: the identity */
            return mge_onnx_alias(c, n, 0, in[0]);
        if (dt == MGE_U8 && op == MGE_OP_SIGN) {
            mge_attr at[1] = {mge_onnx_ai(MGE_KEY_dtype, MGE_U8)};
            int g = mge_onnx_emit2(c, n, MGE_OP_GREATER, in[0], mge_onnx_scalar(c, n, dt, 0));
            return mge_onnx_finish(c, n, MGE_OP_CAST, 1, &g, 1, at);
        }
        if (direct_ops[i].dts == SINT && !mge_dtype_is_float(dt) && dt != MGE_I8 && dt != MGE_I32 && dt != MGE_I64)
            return mge_onnx_unsupported(c, n, "%s over %s (mge takes floats, i8, i32 and i64)", n->op_type,
                                        mge_dtype_name(dt));
        if (op == MGE_OP_ADD || op == MGE_OP_SUB || op == MGE_OP_MUL || op == MGE_OP_DIV) {
            if (dt == MGE_BOOL)
                return mge_onnx_fail(c, n, "%s of bool tensors", n->op_type);
        }
        /* x * Sigmoid(x) (how exporters spell SiLU/Swish): mge's silu,
         * which the fuse passes fold into the layer before it */
        if (op == MGE_OP_MUL && mge_dtype_is_float(dt))
            for (int k = 0; k < 2; k++) {
                const mge_value *sv = mge_onnx_value(c, in[k]);
                if (sv->kind == MGE_VAL_NODE && sv->producer >= 0 &&
                    c->g->nodes[sv->producer].op == MGE_OP_SIGMOID && c->g->nodes[sv->producer].in[0] == in[1 - k])
                    return mge_onnx_finish(c, n, MGE_OP_SILU, 1, &in[1 - k], 0, NULL);
            }
        if (nin == 2) {
            mge_status s = legacy_bcast(c, n, in[0], &in[1]);
            if (s)
                return s;
            if (dtype_of(c, in[1]) != dt)
                return mge_onnx_fail(c, n, "inputs of two dtypes (%s and %s)", mge_dtype_name(dt),
                                     mge_dtype_name(dtype_of(c, in[1])));
        }
        return mge_onnx_finish(c, n, op, nin, in, 0, NULL);
    }
    return mge_onnx_fail(c, n, "no mapping");
}

/* ---------------------------------------------------------------- activations with parameters */

static mge_status conv_leaky_relu(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x;
    mge_status s;
    if ((s = need_in(c, n, 0, &x)) || (s = need_float(c, n, x)))
        return s;
    mge_attr at[1] = {mge_onnx_af(MGE_KEY_alpha, (float)mge_onnx_attr_f(n, "alpha", 0.01))};
    return mge_onnx_finish(c, n, MGE_OP_LEAKY_RELU, 1, &x, 1, at);
}

static mge_status conv_elu(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x;
    mge_status s;
    if ((s = need_in(c, n, 0, &x)) || (s = need_float(c, n, x)))
        return s;
    mge_attr at[1] = {mge_onnx_af(MGE_KEY_alpha, (float)mge_onnx_attr_f(n, "alpha", 1.0))};
    return mge_onnx_finish(c, n, MGE_OP_ELU, 1, &x, 1, at);
}

/* Selu: mge's selu has the defaults; other alpha/gamma are gamma * elu(x, alpha). */
static mge_status conv_selu(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x;
    mge_status s;
    if ((s = need_in(c, n, 0, &x)) || (s = need_float(c, n, x)))
        return s;
    float alpha = (float)mge_onnx_attr_f(n, "alpha", 1.67326319217681884765625);
    float gamma = (float)mge_onnx_attr_f(n, "gamma", 1.05070102214813232421875);
    if (alpha == 1.67326319217681884765625f && gamma == 1.05070102214813232421875f)
        return fin1(c, n, MGE_OP_SELU, x);
    mge_attr at[1] = {mge_onnx_af(MGE_KEY_alpha, alpha)};
    int e = mge_onnx_emit_tmp(c, n, MGE_OP_ELU, 1, &x, 1, at);
    return fin2(c, n, MGE_OP_MUL, e, mge_onnx_scalar(c, n, dtype_of(c, x), gamma));
}

/* Celu: max(0, x) + min(0, alpha (exp(x / alpha) - 1)) = alpha elu(x / alpha) for alpha > 0. */
static mge_status conv_celu(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x;
    mge_status s;
    if ((s = need_in(c, n, 0, &x)) || (s = need_float(c, n, x)))
        return s;
    float alpha = (float)mge_onnx_attr_f(n, "alpha", 1.0);
    if (!(alpha > 0))
        return mge_onnx_unsupported(c, n, "alpha = %g (mge lowers Celu for alpha > 0)", alpha);
    if (alpha == 1.0f)
        return fin1(c, n, MGE_OP_ELU, x);
    mge_dtype dt = dtype_of(c, x);
    int q = mge_onnx_emit2(c, n, MGE_OP_DIV, x, mge_onnx_scalar(c, n, dt, alpha));
    int e = step1(c, n, MGE_OP_ELU, q);
    return fin2(c, n, MGE_OP_MUL, e, mge_onnx_scalar(c, n, dt, alpha));
}

/* ThresholdedRelu: x where x > alpha, else 0. */
static mge_status conv_thresholded_relu(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x;
    mge_status s;
    if ((s = need_in(c, n, 0, &x)) || (s = need_float(c, n, x)))
        return s;
    mge_dtype dt = dtype_of(c, x);
    int m = mge_onnx_emit2(c, n, MGE_OP_GREATER, x, mge_onnx_scalar(c, n, dt, (float)mge_onnx_attr_f(n, "alpha", 1.0)));
    int in[3] = {m, x, mge_onnx_scalar(c, n, dt, 0)};
    return mge_onnx_finish(c, n, MGE_OP_WHERE, 3, in, 0, NULL);
}

/* HardSigmoid: max(0, min(1, alpha x + beta)); mge's hsigmoid is alpha 1/6, beta 1/2. */
static mge_status conv_hard_sigmoid(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x;
    mge_status s;
    if ((s = need_in(c, n, 0, &x)) || (s = need_float(c, n, x)))
        return s;
    float alpha = (float)mge_onnx_attr_f(n, "alpha", 0.2), beta = (float)mge_onnx_attr_f(n, "beta", 0.5);
    if (alpha == (float)(1.0 / 6.0) && beta == 0.5f)
        return fin1(c, n, MGE_OP_HSIGMOID, x);
    mge_dtype dt = dtype_of(c, x);
    int y = mge_onnx_emit2(c, n, MGE_OP_MUL, x, mge_onnx_scalar(c, n, dt, alpha));
    y = mge_onnx_emit2(c, n, MGE_OP_ADD, y, mge_onnx_scalar(c, n, dt, beta));
    mge_attr at[2] = {mge_onnx_af(MGE_KEY_min, 0.0), mge_onnx_af(MGE_KEY_max, 1.0)};
    return mge_onnx_finish(c, n, MGE_OP_CLAMP, 1, &y, 2, at);
}

/* PRelu: mge's prelu when the slope is one value per channel (dim 1) or a
 * single value; any other broadcast is where(x < 0, x * slope, x). */
static mge_status conv_prelu(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x, w;
    mge_status s;
    if ((s = need_in(c, n, 0, &x)) || (s = need_in(c, n, 1, &w)))
        return s;
    const mge_value *xv = mge_onnx_value(c, x), *wv = mge_onnx_value(c, w);
    if (wv->dtype != xv->dtype)
        return mge_onnx_fail(c, n, "X is %s, slope %s", mge_dtype_name(xv->dtype), mge_dtype_name(wv->dtype));
    if (wv->ndim > xv->ndim)
        return mge_onnx_fail(c, n, "slope has rank %d > X's %d", wv->ndim, xv->ndim);
    /* which dim of X the slope's values run along (-1: one value, -2: other) */
    int along = -1;
    int64_t num = 1;
    for (int i = 0; i < wv->ndim; i++) {
        int64_t d = wv->dims[i];
        if (d == 1)
            continue;
        if (d < 0 || mge_dim_is_symbol(d) || along != -1) {
            along = -2;
            break;
        }
        along = xv->ndim - wv->ndim + i;
        num = d;
    }
    if (mge_dtype_is_float(xv->dtype) && (along == -1 || (along == 1 && xv->dims[1] == num))) {
        int wi = w;
        if (wv->ndim != 1) {
            int64_t sh[1] = {num};
            mge_attr at[1] = {mge_onnx_ais(MGE_KEY_shape, 1, sh)};
            wi = mge_onnx_emit_tmp(c, n, MGE_OP_RESHAPE, 1, &w, 1, at);
        } else {
            mge_onnx_make_param(c, w, 0);
        }
        mge_attr at[1] = {mge_onnx_ai(MGE_KEY_num, num)};
        int in[2] = {x, wi};
        return mge_onnx_finish(c, n, MGE_OP_PRELU, 2, in, 1, at);
    }
    if (xv->dtype == MGE_BOOL || xv->dtype == MGE_U8)
        return mge_onnx_unsupported(c, n, "PRelu over %s", mge_dtype_name(xv->dtype));
    int neg = mge_onnx_emit2(c, n, MGE_OP_LESS, x, mge_onnx_scalar(c, n, xv->dtype, 0));
    int in[3] = {neg, mge_onnx_emit2(c, n, MGE_OP_MUL, x, w), x};
    return mge_onnx_finish(c, n, MGE_OP_WHERE, 3, in, 0, NULL);
}

/* Gelu (opset 20): approximate "none" is mge's gelu; "tanh" is
 * 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))). */
static mge_status conv_gelu(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x;
    mge_status s;
    if ((s = need_in(c, n, 0, &x)) || (s = need_float(c, n, x)))
        return s;
    char ap[16];
    mge_onnx_attr_s(n, "approximate", "none", ap, sizeof ap);
    if (strcmp(ap, "none") == 0)
        return fin1(c, n, MGE_OP_GELU, x);
    if (strcmp(ap, "tanh") != 0)
        return mge_onnx_fail(c, n, "approximate '%s': expected none or tanh", ap);
    mge_dtype dt = dtype_of(c, x);
    int x3 = mge_onnx_emit2(c, n, MGE_OP_MUL, step1(c, n, MGE_OP_SQUARE, x), x);
    int in = mge_onnx_emit2(c, n, MGE_OP_ADD, x, mge_onnx_emit2(c, n, MGE_OP_MUL, x3, mge_onnx_scalar(c, n, dt, 0.044715)));
    int t = step1(c, n, MGE_OP_TANH, mge_onnx_emit2(c, n, MGE_OP_MUL, in, mge_onnx_scalar(c, n, dt, sqrt(2.0 / M_PI))));
    int h = mge_onnx_emit2(c, n, MGE_OP_MUL, x, mge_onnx_scalar(c, n, dt, 0.5));
    return fin2(c, n, MGE_OP_MUL, h, mge_onnx_emit2(c, n, MGE_OP_ADD, t, mge_onnx_scalar(c, n, dt, 1.0)));
}

/* Tan: sin / cos. */
static mge_status conv_tan(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x;
    mge_status s;
    if ((s = need_in(c, n, 0, &x)) || (s = need_float(c, n, x)))
        return s;
    return fin2(c, n, MGE_OP_DIV, step1(c, n, MGE_OP_SIN, x), step1(c, n, MGE_OP_COS, x));
}

/* IsInf: isinf, or x == +inf / -inf when one sign is not detected. */
static mge_status conv_isinf(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x;
    mge_status s;
    if ((s = need_in(c, n, 0, &x)) || (s = need_float(c, n, x)))
        return s;
    int pos = mge_onnx_attr_i(n, "detect_positive", 1) != 0, neg = mge_onnx_attr_i(n, "detect_negative", 1) != 0;
    if (pos && neg)
        return fin1(c, n, MGE_OP_ISINF, x);
    /* NaN equals nothing: neither sign detected gives all false */
    double v = pos ? INFINITY : neg ? -INFINITY : NAN;
    return fin2(c, n, MGE_OP_EQUAL, x, mge_onnx_scalar(c, n, dtype_of(c, x), v));
}

/* ---------------------------------------------------------------- Pow, Mod */

/* Pow: computed in the base's float dtype, or f32 when the exponent is f32
 * (and the base a narrower float) or the base an integer, f64 when either
 * is f64; an integer base
 * is computed in f32 and cast back (exact while |result| < 2^24): rounded
 * for an integer exponent (powf may land just below), truncated for a
 * float one (as ONNX Runtime). */
static mge_status conv_pow(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int a, b;
    mge_status s;
    if ((s = need_in(c, n, 0, &a)) || (s = need_in(c, n, 1, &b)) || (s = legacy_bcast(c, n, a, &b)))
        return s;
    mge_dtype da = dtype_of(c, a), db = dtype_of(c, b);
    if (da == MGE_BOOL || db == MGE_BOOL)
        return mge_onnx_fail(c, n, "Pow of bool tensors");
    /* an f64 operand makes it f64 (a narrower base is cast back) */
    mge_dtype w = da == MGE_F64 || db == MGE_F64                                        ? MGE_F64
                  : mge_dtype_is_float(da) && (db == da || !mge_dtype_is_float(db)) ? da
                                                                                   : MGE_F32;
    if (!mge_dtype_is_float(da))
        mge_onnx_warn(c, "node %s: integer Pow is computed in %s (exact while results stay below 2^%d)",
                      n->n_output && n->output[0] ? n->output[0] : n->op_type, mge_dtype_name(w),
                      w == MGE_F64 ? 53 : 24);
    mge_attr at[1] = {mge_onnx_ai(MGE_KEY_dtype, w)};
    if (da != w)
        a = mge_onnx_emit_tmp(c, n, MGE_OP_CAST, 1, &a, 1, at);
    if (db != w)
        b = mge_onnx_emit_tmp(c, n, MGE_OP_CAST, 1, &b, 1, at);
    if (da == w)
        return fin2(c, n, MGE_OP_POW, a, b);
    int p = mge_onnx_emit2(c, n, MGE_OP_POW, a, b);
    if (!mge_dtype_is_float(da) && !mge_dtype_is_float(db))
        p = step1(c, n, MGE_OP_ROUND, p);
    mge_attr back[1] = {mge_onnx_ai(MGE_KEY_dtype, da)};
    return mge_onnx_finish(c, n, MGE_OP_CAST, 1, &p, 1, back);
}

/* trunc(q) of a float tensor: where(q < 0, ceil(q), floor(q)). */
static int trunc_of(mge_onnx_ctx *c, mge_onnx_node *n, int q)
{
    if (q < 0)
        return -1; /* the division failed (its error is set); dtype_of needs a value */
    int in[3] = {mge_onnx_emit2(c, n, MGE_OP_LESS, q, mge_onnx_scalar(c, n, dtype_of(c, q), 0)), step1(c, n, MGE_OP_CEIL, q),
                 step1(c, n, MGE_OP_FLOOR, q)};
    return mge_onnx_emit_tmp(c, n, MGE_OP_WHERE, 3, in, 0, NULL);
}

/* Mod: fmod = 1 is C's fmod (the sign of a): a - b trunc(a / b); fmod = 0
 * is Python's % (the sign of b): that remainder plus b where it is nonzero
 * and its sign differs from b's. Integer division truncates already. */
static mge_status conv_mod(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int a, b;
    mge_status s;
    if ((s = need_in(c, n, 0, &a)) || (s = need_in(c, n, 1, &b)))
        return s;
    mge_dtype dt = dtype_of(c, a);
    if (dtype_of(c, b) != dt)
        return mge_onnx_fail(c, n, "inputs of two dtypes (%s and %s)", mge_dtype_name(dt),
                             mge_dtype_name(dtype_of(c, b)));
    if (dt == MGE_BOOL)
        return mge_onnx_fail(c, n, "Mod of bool tensors");
    int fmod = mge_onnx_attr_i(n, "fmod", 0) != 0;
    int flt = mge_dtype_is_float(dt);
    int q = mge_onnx_emit2(c, n, MGE_OP_DIV, a, b);
    if (flt)
        q = fmod ? trunc_of(c, n, q) : step1(c, n, MGE_OP_FLOOR, q);
    if (fmod || flt || dt == MGE_U8 || dt == MGE_U16 || dt == MGE_U32 || dt == MGE_U64) /* unsigned: no signs to fix */
        return fin2(c, n, MGE_OP_SUB, a, mge_onnx_emit2(c, n, MGE_OP_MUL, b, q));
    int r = mge_onnx_emit2(c, n, MGE_OP_SUB, a, mge_onnx_emit2(c, n, MGE_OP_MUL, b, q));
    int zero = mge_onnx_scalar(c, n, dt, 0);
    int nz = step1(c, n, MGE_OP_NOT, mge_onnx_emit2(c, n, MGE_OP_EQUAL, r, zero));
    int diff = mge_onnx_emit2(c, n, MGE_OP_XOR, mge_onnx_emit2(c, n, MGE_OP_LESS, r, zero), mge_onnx_emit2(c, n, MGE_OP_LESS, b, zero));
    int in[3] = {mge_onnx_emit2(c, n, MGE_OP_AND, nz, diff), mge_onnx_emit2(c, n, MGE_OP_ADD, r, b), r};
    return mge_onnx_finish(c, n, MGE_OP_WHERE, 3, in, 0, NULL);
}

/* ---------------------------------------------------------------- variadic */

/* Max, Min, Sum, Mean: a chain of broadcasting binary ops (Mean divides). */
static mge_status conv_variadic(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int op = strcmp(n->op_type, "Max") == 0   ? MGE_OP_MAXIMUM
             : strcmp(n->op_type, "Min") == 0 ? MGE_OP_MINIMUM
                                              : MGE_OP_ADD;
    int mean = strcmp(n->op_type, "Mean") == 0;
    int nin = (int)n->n_input;
    if (nin < 1)
        return mge_onnx_fail(c, n, "no inputs");
    int acc;
    mge_status s;
    if ((s = need_in(c, n, 0, &acc)))
        return s;
    mge_dtype dt = dtype_of(c, acc);
    if (dt == MGE_BOOL)
        return mge_onnx_unsupported(c, n, "%s over bool", n->op_type);
    if (mean && (s = need_float(c, n, acc)))
        return s;
    if (nin == 1)
        return mge_onnx_alias(c, n, 0, acc);
    for (int i = 1; i < nin; i++) {
        int v;
        if ((s = need_in(c, n, i, &v)))
            return s;
        if (dtype_of(c, v) != dt)
            return mge_onnx_fail(c, n, "inputs of two dtypes (%s and %s)", mge_dtype_name(dt),
                                 mge_dtype_name(dtype_of(c, v)));
        if (i == nin - 1 && !mean)
            return fin2(c, n, op, acc, v);
        if ((acc = mge_onnx_emit2(c, n, op, acc, v)) < 0)
            return c->err->code;
    }
    return fin2(c, n, MGE_OP_DIV, acc, mge_onnx_scalar(c, n, dt, nin));
}

/* ---------------------------------------------------------------- Clip */

/* Clip: bounds as attributes (opset < 11) or optional inputs. Known bounds
 * make a clamp; bounds computed at run time (or dtypes clamp does not
 * take) become maximum and minimum. min > max gives max everywhere in
 * both, as ONNX says. */
static mge_status conv_clip(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x;
    mge_status s;
    if ((s = need_in(c, n, 0, &x)))
        return s;
    mge_dtype dt = dtype_of(c, x);
    if (dt == MGE_BOOL)
        return mge_onnx_fail(c, n, "Clip of bool");
    int has[2] = {0, 0}, kn[2] = {0, 0}, bv[2] = {-1, -1};
    double b[2] = {0, 0};
    if (c->opset < 11) {
        static const char *const names[2] = {"min", "max"};
        for (int k = 0; k < 2; k++)
            if (mge_onnx_attr(n, names[k])) {
                has[k] = kn[k] = 1;
                b[k] = (float)mge_onnx_attr_f(n, names[k], 0);
            }
    } else {
        for (int k = 0; k < 2; k++) {
            if ((bv[k] = mge_onnx_in(c, n, k + 1)) < 0)
                continue;
            const mge_value *v = mge_onnx_value(c, bv[k]);
            if (v->dtype != dt)
                return mge_onnx_fail(c, n, "%s is %s, input %s", k ? "max" : "min", mge_dtype_name(v->dtype),
                                     mge_dtype_name(dt));
            has[k] = 1;
            kn[k] = const_scalar(c, n, bv[k], k ? "max" : "min", &b[k], &s);
            if (s)
                return s;
        }
    }
    if (!has[0] && !has[1])
        return mge_onnx_alias(c, n, 0, x);
    int known = (!has[0] || kn[0]) && (!has[1] || kn[1]);
    int clamp_dt = mge_dtype_is_float(dt) || dt == MGE_I8 || dt == MGE_I16 || dt == MGE_I32 || dt == MGE_I64;
    if (known && clamp_dt && !(has[0] && b[0] != b[0]) && !(has[1] && b[1] != b[1])) {
        /* ReLU6 and ReLU as exported (Clip(0, 6), Clip(0)): the activations
         * the fuse passes fold into the layer before them */
        if (dt == MGE_F32 && has[0] && b[0] == 0 && has[1] && b[1] == 6)
            return mge_onnx_finish(c, n, MGE_OP_RELU6, 1, &x, 0, NULL);
        if (dt == MGE_F32 && has[0] && b[0] == 0 && (!has[1] || b[1] == INFINITY))
            return mge_onnx_finish(c, n, MGE_OP_RELU, 1, &x, 0, NULL);
        mge_attr at[2];
        int na = 0;
        if (has[0])
            at[na++] = mge_onnx_af(MGE_KEY_min, b[0]);
        if (has[1])
            at[na++] = mge_onnx_af(MGE_KEY_max, b[1]);
        return mge_onnx_finish(c, n, MGE_OP_CLAMP, 1, &x, na, at);
    }
    for (int k = 0; k < 2; k++)
        if (has[k] && bv[k] < 0 && (bv[k] = mge_onnx_scalar(c, n, dt, b[k])) < 0)
            return c->err->code;
    if (has[0] && has[1])
        return fin2(c, n, MGE_OP_MINIMUM, mge_onnx_emit2(c, n, MGE_OP_MAXIMUM, x, bv[0]), bv[1]);
    return fin2(c, n, has[0] ? MGE_OP_MAXIMUM : MGE_OP_MINIMUM, x, has[0] ? bv[0] : bv[1]);
}

/* ---------------------------------------------------------------- Cast, CastLike */

static mge_status cast_to(mge_onnx_ctx *c, mge_onnx_node *n, int x, int onnx_to)
{
    if (onnx_to <= 0 || strcmp(mge_onnx_dtype_name(onnx_to), "unknown") == 0)
        return mge_onnx_fail(c, n, "to = %d: not an ONNX data type", onnx_to);
    int dt = mge_onnx_dtype(onnx_to);
    if (dt < 0)
        return mge_onnx_unsupported(c, n, "a cast to %s (mge has no such dtype)", mge_onnx_dtype_name(onnx_to));
    if (dtype_of(c, x) == (mge_dtype)dt)
        return mge_onnx_alias(c, n, 0, x);
    mge_attr at[1] = {mge_onnx_ai(MGE_KEY_dtype, dt)};
    return mge_onnx_finish(c, n, MGE_OP_CAST, 1, &x, 1, at);
}

static mge_status conv_cast(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x;
    mge_status s;
    if ((s = need_in(c, n, 0, &x)))
        return s;
    const Onnx__AttributeProto *a = mge_onnx_attr(n, "to");
    if (!a)
        return mge_onnx_fail(c, n, "no 'to' attribute");
    if (a->has_s) { /* opset 1: the type's name */
        char name[32];
        mge_onnx_attr_s(n, "to", "", name, sizeof name);
        for (int t = 1; t <= 22; t++)
            if (strcasecmp(mge_onnx_dtype_name(t), name) == 0)
                return cast_to(c, n, x, t);
        return mge_onnx_fail(c, n, "to = '%s': not an ONNX type", name);
    }
    int64_t to = mge_onnx_attr_i(n, "to", 0);
    return cast_to(c, n, x, to > 0 && to < 1000 ? (int)to : -1);
}

static mge_status conv_castlike(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x, like;
    mge_status s;
    if ((s = need_in(c, n, 0, &x)) || (s = need_in(c, n, 1, &like)))
        return s;
    return cast_to(c, n, x, mge_onnx_dtype_to(dtype_of(c, like)));
}

const mge_onnx_op mge_onnx_ops_math[] = {
    {"Relu", conv_direct, 1},
    {"Sigmoid", conv_direct, 1},
    {"Tanh", conv_direct, 1},
    {"Exp", conv_direct, 1},
    {"Log", conv_direct, 1},
    {"Sqrt", conv_direct, 1},
    {"Neg", conv_direct, 1},
    {"Abs", conv_direct, 1},
    {"Erf", conv_direct, 9},
    {"Reciprocal", conv_direct, 1},
    {"Sign", conv_direct, 9},
    {"Floor", conv_direct, 1},
    {"Ceil", conv_direct, 1},
    {"Round", conv_direct, 11},
    {"Sin", conv_direct, 7},
    {"Cos", conv_direct, 7},
    {"Tan", conv_tan, 7},
    {"Softsign", conv_direct, 1},
    {"Softplus", conv_direct, 1},
    {"Mish", conv_direct, 18},
    {"HardSwish", conv_direct, 14},
    {"IsNaN", conv_direct, 9},
    {"IsInf", conv_isinf, 10},
    {"Not", conv_direct, 1},
    {"And", conv_direct, 1},
    {"Or", conv_direct, 1},
    {"Xor", conv_direct, 1},
    {"Equal", conv_direct, 1},
    {"Less", conv_direct, 1},
    {"Greater", conv_direct, 1},
    {"LessOrEqual", conv_direct, 12},
    {"GreaterOrEqual", conv_direct, 12},
    {"Where", conv_direct, 9},
    {"Add", conv_direct, 1},
    {"Sub", conv_direct, 1},
    {"Mul", conv_direct, 1},
    {"Div", conv_direct, 1},
    {"Pow", conv_pow, 1},
    {"Mod", conv_mod, 10},
    {"Max", conv_variadic, 1},
    {"Min", conv_variadic, 1},
    {"Sum", conv_variadic, 1},
    {"Mean", conv_variadic, 1},
    {"LeakyRelu", conv_leaky_relu, 1},
    {"Elu", conv_elu, 1},
    {"Selu", conv_selu, 1},
    {"Celu", conv_celu, 12},
    {"ThresholdedRelu", conv_thresholded_relu, 10},
    {"HardSigmoid", conv_hard_sigmoid, 1},
    {"PRelu", conv_prelu, 1},
    {"Gelu", conv_gelu, 20},
    {"Clip", conv_clip, 1},
    {"Cast", conv_cast, 1},
    {"CastLike", conv_castlike, 15},
    {NULL, NULL, 0},
};
