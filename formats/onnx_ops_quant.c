/* onnx_ops_quant.c — ONNX converters for the linear quantization ops onto
 * mge's quantize_linear, dequantize_linear, requantize, matmul_integer and
 * conv_integer (lib/ops.def, group quant-onnx):
 *
 *   QuantizeLinear, DequantizeLinear   one node each (per tensor, per axis,
 *                                      opset 21's blocks)
 *   DynamicQuantizeLinear              min/max reductions and scalar steps,
 *                                      then quantize_linear (u8)
 *   MatMulInteger, ConvInteger         one node each (i32 out)
 *   QLinearMatMul, QLinearConv         the integer op, then requantize by
 *                                      a_scale * b_scale / y_scale (computed
 *                                      in the scales' dtype, as ONNX's
 *                                      reference does, then multiplied in
 *                                      double): bit-exact with the reference
 *
 * The quantized dtypes are u8 and i8 (qtype_ok: where int16/uint16 join
 * QuantizeLinear and DequantizeLinear once mge has them; the integer ops
 * are 8-bit in ONNX too); int4 and float8 types are refused by the reader
 * before a converter sees them (mge has no such dtypes). */
#include "onnx.h"

#include <string.h>

int mge_onnx_scalar(mge_onnx_ctx *c, mge_onnx_node *n, mge_dtype dt, double v);   /* onnx_ops_math.c */

/* The operand dtypes of the integer ops (MatMulInteger, ConvInteger, QLinear*). */
static int q8_ok(mge_dtype dt)
{
    return dt == MGE_U8 || dt == MGE_I8;
}

/* The quantized dtypes of QuantizeLinear and DequantizeLinear (the line to
 * change for int16/uint16, with lib/op_qlin.c's qtype). */
static int qtype_ok(mge_dtype dt)
{
    return dt == MGE_U8 || dt == MGE_I8;
}

static int float_ok(mge_dtype dt)
{
    return dt == MGE_F32 || dt == MGE_F16 || dt == MGE_BF16;
}

/* The element count of value v, or -1 when a dim is symbolic. */
static int64_t count_of(mge_onnx_ctx *c, int v)
{
    const mge_value *vv = mge_onnx_value(c, v);
    int64_t k = 1;
    for (int i = 0; i < vv->ndim; i++) {
        if (mge_dim_is_symbol(vv->dims[i]))
            return -1;
        k *= vv->dims[i];
    }
    return k;
}

/* A scale read from a float initializer of several elements (which the
 * reader makes a trainable parameter) is a constant: quantization scales
 * are not trained, and mge-opt folds the arithmetic on constants. */
static void scale_const(mge_onnx_ctx *c, int v)
{
    mge_value *x = v >= 0 ? (mge_value *)mge_onnx_value(c, v) : NULL;
    if (x && x->kind == MGE_VAL_PARAM && x->data)
        x->kind = MGE_VAL_CONST;
}

static const char *dtn(mge_onnx_ctx *c, int v)
{
    return mge_dtype_name(mge_onnx_value(c, v)->dtype);
}

/* A per-tensor, per-row or per-column operand (zero point, scale) of a
 * matrix op as one element or a 1-D [len]: ONNX also writes [..., len, 1]
 * (rows) or [..., 1, len] (columns), reshaped here. -1 with a reason set
 * through *why when it is neither. */
static int as_vector(mge_onnx_ctx *c, mge_onnx_node *n, int v, int64_t len, int rows, const char **why)
{
    const mge_value *vv = mge_onnx_value(c, v);
    int64_t k = count_of(c, v);
    *why = NULL;
    if (k == 1 || (vv->ndim == 1 && vv->dims[0] == len))
        return v;
    int ok = k == len && vv->ndim >= 2 && vv->dims[vv->ndim - (rows ? 2 : 1)] == len;
    for (int i = 0; ok && i < vv->ndim; i++)
        ok = vv->dims[i] == 1 || i == vv->ndim - (rows ? 2 : 1);
    if (!ok || len < 1) {
        *why = rows ? "expected one element or one per row of a" : "expected one element or one per column of b";
        return -1;
    }
    return mge_onnx_reshape_tmp(c, n, v, 1, &len);
}

/* ---------------------------------------------------------------- QuantizeLinear, DequantizeLinear */

/* axis and block (opset 21's block_size) of a (De)QuantizeLinear node. */
static int scale_attrs(mge_onnx_ctx *c, mge_onnx_node *n, mge_attr *at)
{
    int64_t axis = mge_onnx_attr_i(n, "axis", 1), block = c->opset >= 21 ? mge_onnx_attr_i(n, "block_size", 0) : 0;
    at[0] = mge_onnx_ais(MGE_KEY_axis, 1, &axis);
    at[1] = mge_onnx_ai(MGE_KEY_block, block);
    return 2;
}

static mge_status conv_quantize(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x = mge_onnx_in(c, n, 0), s = mge_onnx_in(c, n, 1), z = mge_onnx_in(c, n, 2);
    if (x < 0 || s < 0)
        return mge_onnx_fail(c, n, "expected inputs x and y_scale");
    mge_dtype xd = mge_onnx_value(c, x)->dtype, sd = mge_onnx_value(c, s)->dtype;
    if (!float_ok(xd) && xd != MGE_I32)
        return mge_onnx_unsupported(c, n, "x of %s (mge quantizes f32, f16, bf16 and int32)", mge_dtype_name(xd));
    if (sd != (xd == MGE_I32 ? MGE_F32 : xd))
        return mge_onnx_unsupported(c, n, "x of %s with a y_scale of %s (mge takes the scale in x's float dtype, f32 "
                                    "for int32 x)",
                                    mge_dtype_name(xd), mge_dtype_name(sd));
    int64_t odt = -1;
    if (c->opset >= 21 && mge_onnx_attr(n, "output_dtype") && mge_onnx_attr_i(n, "output_dtype", 0) != 0) {
        int64_t ot = mge_onnx_attr_i(n, "output_dtype", 0);
        odt = mge_onnx_dtype((int)ot);
        if (odt < 0 || !qtype_ok((mge_dtype)odt))
            return mge_onnx_unsupported(c, n, "output_dtype %s (mge quantizes to uint8 and int8)",
                                        mge_onnx_dtype_name((int)ot));
    }
    if (z >= 0) {
        mge_dtype zd = mge_onnx_value(c, z)->dtype;
        if (!qtype_ok(zd))
            return mge_onnx_unsupported(c, n, "a y_zero_point of %s (mge quantizes to uint8 and int8)",
                                        mge_dtype_name(zd));
        if (odt >= 0 && odt != (int64_t)zd)
            return mge_onnx_fail(c, n, "output_dtype %s but y_zero_point is %s", mge_dtype_name((mge_dtype)odt),
                                 mge_dtype_name(zd));
    }
    scale_const(c, s);
    mge_attr at[3];
    int na = scale_attrs(c, n, at);
    if (z < 0)
        at[na++] = mge_onnx_ai(MGE_KEY_dtype, odt >= 0 ? odt : MGE_U8);
    int in[3] = {x, s, z};
    return mge_onnx_finish(c, n, MGE_OP_QUANTIZE_LINEAR, z >= 0 ? 3 : 2, in, na, at);
}

static mge_status conv_dequantize(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x = mge_onnx_in(c, n, 0), s = mge_onnx_in(c, n, 1), z = mge_onnx_in(c, n, 2);
    if (x < 0 || s < 0)
        return mge_onnx_fail(c, n, "expected inputs x and x_scale");
    mge_dtype xd = mge_onnx_value(c, x)->dtype, sd = mge_onnx_value(c, s)->dtype;
    if (!qtype_ok(xd) && xd != MGE_I32)
        return mge_onnx_unsupported(c, n, "x of %s (mge dequantizes uint8, int8 and int32)", mge_dtype_name(xd));
    if (!float_ok(sd))
        return mge_onnx_fail(c, n, "x_scale is %s: expected a float type", mge_dtype_name(sd));
    if (z >= 0 && mge_onnx_value(c, z)->dtype != xd)
        return mge_onnx_fail(c, n, "x is %s but x_zero_point %s: expected the same type", mge_dtype_name(xd),
                             dtn(c, z));
    scale_const(c, s);
    mge_attr at[2];
    int na = scale_attrs(c, n, at);
    int in[3] = {x, s, z};
    return mge_onnx_finish(c, n, MGE_OP_DEQUANTIZE_LINEAR, z >= 0 ? 3 : 2, in, na, at);
}

/* ---------------------------------------------------------------- DynamicQuantizeLinear */

/* ONNX's definition (and reference): over x (f32), with qmin 0, qmax 255,
 *   maxx = max(0, max(x)), minx = min(0, min(x)),
 *   y_scale = (maxx == minx ? 1 : maxx - minx) / 255,
 *   y_zero_point = rint(clamp(0 - minx / y_scale, 0, 255)) as uint8,
 *   y = saturate(rint(x / y_scale) + y_zero_point). */
static mge_status conv_dynamic_quantize(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x = mge_onnx_in(c, n, 0);
    if (x < 0)
        return mge_onnx_fail(c, n, "expected input x");
    if (mge_onnx_value(c, x)->dtype != MGE_F32)
        return mge_onnx_unsupported(c, n, "x of %s (DynamicQuantizeLinear takes float)", dtn(c, x));
    int zero = mge_onnx_scalar(c, n, MGE_F32, 0);
    int mx = mge_onnx_emit_tmp(c, n, MGE_OP_MAX, 1, &x, 0, NULL);
    int mn = mge_onnx_emit_tmp(c, n, MGE_OP_MIN, 1, &x, 0, NULL);
    int maxx = mge_onnx_emit2(c, n, MGE_OP_MAXIMUM, mx, zero);
    int minx = mge_onnx_emit2(c, n, MGE_OP_MINIMUM, mn, zero);
    int range = mge_onnx_emit2(c, n, MGE_OP_SUB, maxx, minx);
    /* maxx == minx (x all zeros) takes 1 for the range: range + (range == 0) */
    int empty = mge_onnx_emit2(c, n, MGE_OP_EQUAL, range, zero);
    mge_attr ca[1] = {mge_onnx_ai(MGE_KEY_dtype, MGE_F32)};
    int emptyf = empty < 0 ? -1 : mge_onnx_emit_tmp(c, n, MGE_OP_CAST, 1, &empty, 1, ca);
    int range1 = mge_onnx_emit2(c, n, MGE_OP_ADD, range, emptyf);
    int scale = mge_onnx_emit2(c, n, MGE_OP_DIV, range1, mge_onnx_scalar(c, n, MGE_F32, 255));
    int zpf = mge_onnx_emit2(c, n, MGE_OP_SUB, zero, mge_onnx_emit2(c, n, MGE_OP_DIV, minx, scale));
    mge_attr cl[2] = {mge_onnx_af(MGE_KEY_min, 0), mge_onnx_af(MGE_KEY_max, 255)};
    int zpc = zpf < 0 ? -1 : mge_onnx_emit_tmp(c, n, MGE_OP_CLAMP, 1, &zpf, 2, cl);
    int zpr = zpc < 0 ? -1 : mge_onnx_emit_tmp(c, n, MGE_OP_ROUND, 1, &zpc, 0, NULL);
    mge_attr cu[1] = {mge_onnx_ai(MGE_KEY_dtype, MGE_U8)};
    int zp = zpr < 0 ? -1 : mge_onnx_emit_tmp(c, n, MGE_OP_CAST, 1, &zpr, 1, cu);
    if (zp < 0 || scale < 0)
        return c->err->code ? c->err->code : MGE_ERR_INVALID;
    mge_status s;
    if ((n->n_output > 1 && n->output[1] && *n->output[1] && (s = mge_onnx_alias(c, n, 1, scale))) ||
        (n->n_output > 2 && n->output[2] && *n->output[2] && (s = mge_onnx_alias(c, n, 2, zp))))
        return s;
    int64_t axis = 1;
    mge_attr qa[2] = {mge_onnx_ais(MGE_KEY_axis, 1, &axis), mge_onnx_ai(MGE_KEY_block, 0)};
    int in[3] = {x, scale, zp};
    return mge_onnx_finish(c, n, MGE_OP_QUANTIZE_LINEAR, 3, in, 2, qa);
}

/* ---------------------------------------------------------------- MatMulInteger, QLinearMatMul */

/* A 0-d zero of dtype dt where a zero point is absent but a later one is not. */
static int zero_or(mge_onnx_ctx *c, mge_onnx_node *n, int z, mge_dtype dt)
{
    return z >= 0 ? z : mge_onnx_scalar(c, n, dt, 0);
}

/* The i32 product of matmul_integer(a, b, az, bz) as a value (final: the
 * node's output instead). */
static int matmul_int(mge_onnx_ctx *c, mge_onnx_node *n, int a, int b, int az, int bz, int final, mge_status *st)
{
    const mge_value *av = mge_onnx_value(c, a), *bv = mge_onnx_value(c, b);
    *st = MGE_OK;
    if (!q8_ok(av->dtype) || !q8_ok(bv->dtype)) {
        *st = mge_onnx_unsupported(c, n, "A of %s and B of %s (mge multiplies uint8 and int8)",
                                   mge_dtype_name(av->dtype), mge_dtype_name(bv->dtype));
        return -1;
    }
    const char *why;
    int64_t M = av->ndim >= 2 ? av->dims[av->ndim - 2] : 1, N = bv->ndim >= 2 ? bv->dims[bv->ndim - 1] : 1;
    if ((az >= 0 && mge_onnx_value(c, az)->dtype != av->dtype) ||
        (bz >= 0 && mge_onnx_value(c, bz)->dtype != bv->dtype)) {
        *st = mge_onnx_fail(c, n, "A is %s and B %s, their zero points %s and %s: expected each operand's type",
                            mge_dtype_name(av->dtype), mge_dtype_name(bv->dtype), az >= 0 ? dtn(c, az) : "absent",
                            bz >= 0 ? dtn(c, bz) : "absent");
        return -1;
    }
    if ((az >= 0 && (az = as_vector(c, n, az, M, 1, &why)) < 0) ||
        (bz >= 0 && (bz = as_vector(c, n, bz, N, 0, &why)) < 0)) {
        *st = c->err->code ? c->err->code : mge_onnx_fail(c, n, "a zero point: %s", why);
        return -1;
    }
    if (bz >= 0)
        az = zero_or(c, n, az, av->dtype);
    int in[4] = {a, b, az, bz}, nin = bz >= 0 ? 4 : az >= 0 ? 3 : 2;
    int v = final ? mge_onnx_emit(c, n, MGE_OP_MATMUL_INTEGER, nin, in, 0, NULL, 1)
                  : mge_onnx_emit_tmp(c, n, MGE_OP_MATMUL_INTEGER, nin, in, 0, NULL);
    if (v < 0)
        *st = c->err->code ? c->err->code : MGE_ERR_INVALID;
    return v;
}

static mge_status conv_matmul_integer(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int a = mge_onnx_in(c, n, 0), b = mge_onnx_in(c, n, 1);
    if (a < 0 || b < 0)
        return mge_onnx_fail(c, n, "expected inputs A and B");
    mge_status st;
    matmul_int(c, n, a, b, mge_onnx_in(c, n, 2), mge_onnx_in(c, n, 3), 1, &st);
    return st;
}

/* saturate(rint(acc * (xs * ws / ys)) + yz) into the node's output: the
 * multiplier in the scales' dtype (all three alike), per tensor or along
 * axis (ws's elements); squeeze >= 0: that dim of the result dropped. */
static mge_status requant(mge_onnx_ctx *c, mge_onnx_node *n, int acc, int xs, int ws, int ys, int yz, int axis,
                          int squeeze)
{
    mge_dtype sd = mge_onnx_value(c, xs)->dtype;
    if (!float_ok(sd) || mge_onnx_value(c, ws)->dtype != sd || mge_onnx_value(c, ys)->dtype != sd)
        return mge_onnx_fail(c, n, "the scales are %s, %s and %s: expected one float type", dtn(c, xs), dtn(c, ws),
                             dtn(c, ys));
    if (count_of(c, xs) != 1 || count_of(c, ys) != 1)
        return mge_onnx_unsupported(c, n, "a per-row or per-channel scale of the input or the output (mge "
                                    "requantizes with the weight's scales only)");
    if (yz >= 0 && (!q8_ok(mge_onnx_value(c, yz)->dtype) || count_of(c, yz) != 1))
        return mge_onnx_unsupported(c, n, "a y_zero_point of %s with %lld elements (mge takes one uint8 or int8)",
                                    dtn(c, yz), (long long)count_of(c, yz));
    scale_const(c, xs);
    scale_const(c, ws);
    scale_const(c, ys);
    int m = mge_onnx_emit2(c, n, MGE_OP_DIV, mge_onnx_emit2(c, n, MGE_OP_MUL, xs, ws), ys);
    if (m >= 0 && sd != MGE_F32) {
        mge_attr ca[1] = {mge_onnx_ai(MGE_KEY_dtype, MGE_F32)};
        m = mge_onnx_emit_tmp(c, n, MGE_OP_CAST, 1, &m, 1, ca);
    }
    if (m < 0)
        return c->err->code ? c->err->code : MGE_ERR_INVALID;
    int64_t ax = axis;
    mge_attr at[2] = {mge_onnx_ais(MGE_KEY_axis, 1, &ax),
                      mge_onnx_ai(MGE_KEY_dtype, yz >= 0 ? mge_onnx_value(c, yz)->dtype : MGE_U8)};
    int in[3] = {acc, m, yz};
    if (squeeze < 0)
        return mge_onnx_finish(c, n, MGE_OP_REQUANTIZE, yz >= 0 ? 3 : 2, in, 2, at);
    int y = mge_onnx_emit_tmp(c, n, MGE_OP_REQUANTIZE, yz >= 0 ? 3 : 2, in, 2, at);
    int64_t sq = squeeze;
    mge_attr sa[1] = {mge_onnx_ais(MGE_KEY_axis, 1, &sq)};
    return y < 0 ? c->err->code : mge_onnx_finish(c, n, MGE_OP_SQUEEZE, 1, &y, 1, sa);
}

static mge_status conv_qlinear_matmul(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int in[8];
    for (int i = 0; i < 8; i++)
        in[i] = mge_onnx_in(c, n, i);
    if (in[0] < 0 || in[1] < 0 || in[3] < 0 || in[4] < 0 || in[6] < 0)
        return mge_onnx_fail(c, n, "expected inputs a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, "
                             "y_zero_point");
    const mge_value *bv = mge_onnx_value(c, in[3]);
    const char *why;
    int ws = in[4];
    if (bv->ndim < 2 && count_of(c, ws) != 1)
        return mge_onnx_unsupported(c, n, "per-column scales of a 1-D b");
    int64_t N = bv->ndim >= 2 ? bv->dims[bv->ndim - 1] : 1;
    if ((ws = as_vector(c, n, ws, N, 0, &why)) < 0)
        return c->err->code ? c->err->code : mge_onnx_fail(c, n, "b_scale: %s", why);
    mge_status st;
    int acc = matmul_int(c, n, in[0], in[3], in[2], in[5], 0, &st);
    if (acc < 0)
        return st;
    return requant(c, n, acc, in[1], ws, in[6], in[7], -1, -1);
}

/* ---------------------------------------------------------------- ConvInteger, QLinearConv */

/* conv_integer(x, w, xz, wz) with the node's window attributes, as a value
 * (final: the node's output). A 1-D convolution ([N, C, L]) runs as a 2-D
 * one over [N, C, 1, L]; *one_d says so, and then the value is 4-D and
 * the caller squeezes dim 2 (final does it here). */
static int conv_int(mge_onnx_ctx *c, mge_onnx_node *n, int x, int w, int xz, int wz, int final, int *one_d,
                    mge_status *st)
{
    const mge_value *xv = mge_onnx_value(c, x), *wv = mge_onnx_value(c, w);
    *st = MGE_OK;
    if (!q8_ok(xv->dtype) || !q8_ok(wv->dtype)) {
        *st = mge_onnx_unsupported(c, n, "x of %s and w of %s (mge convolves uint8 and int8)",
                                   mge_dtype_name(xv->dtype), mge_dtype_name(wv->dtype));
        return -1;
    }
    int nsp = xv->ndim - 2;
    if (nsp != 1 && nsp != 2) {
        *st = mge_onnx_unsupported(c, n, "a %d-D integer convolution (mge has 1-D and 2-D)", nsp);
        return -1;
    }
    if (wv->ndim != xv->ndim) {
        *st = mge_onnx_fail(c, n, "w has rank %d, x rank %d", wv->ndim, xv->ndim);
        return -1;
    }
    for (int i = 0; i < wv->ndim; i++)
        if (wv->dims[i] < 1 || mge_dim_is_symbol(wv->dims[i])) {
            *st = mge_onnx_unsupported(c, n, "w's shape is not known at import");
            return -1;
        }
    int64_t k[2], s[2] = {1, 1}, d[2] = {1, 1}, pb[2], pe[2], ks[2];
    for (int i = 0; i < nsp; i++)
        k[i] = wv->dims[2 + i];
    int nk = mge_onnx_attr_ints(n, "kernel_shape", ks, 2);
    if (nk >= 0 && (nk != nsp || ks[0] != k[0] || (nsp == 2 && ks[1] != k[1]))) {
        *st = mge_onnx_fail(c, n, "kernel_shape does not match w's spatial dims");
        return -1;
    }
    int ns = mge_onnx_attr_ints(n, "strides", s, 2), nd = mge_onnx_attr_ints(n, "dilations", d, 2);
    int ok = (ns < 0 || ns == nsp) && (nd < 0 || nd == nsp);
    for (int i = 0; i < nsp; i++)
        ok &= s[i] >= 1 && d[i] >= 1;
    if (!ok) {
        *st = mge_onnx_fail(c, n, "strides and dilations: expected %d values >= 1 each", nsp);
        return -1;
    }
    if ((*st = mge_onnx_pads(c, n, nsp, xv->dims + 2, k, s, d, pb, pe)))
        return -1;
    int64_t group = mge_onnx_attr_i(n, "group", 1);
    if (group < 1) {
        *st = mge_onnx_fail(c, n, "group %lld: expected >= 1", (long long)group);
        return -1;
    }
    if (xz >= 0 && (mge_onnx_value(c, xz)->dtype != xv->dtype || count_of(c, xz) != 1)) {
        *st = mge_onnx_fail(c, n, "x_zero_point is %s with %lld elements: expected one of x's type", dtn(c, xz),
                            (long long)count_of(c, xz));
        return -1;
    }
    int64_t O = wv->dims[0];
    if (wz >= 0 && (mge_onnx_value(c, wz)->dtype != wv->dtype || (count_of(c, wz) != 1 && count_of(c, wz) != O))) {
        *st = mge_onnx_fail(c, n, "w_zero_point is %s with %lld elements: expected w's type, one or %lld", dtn(c, wz),
                            (long long)count_of(c, wz), (long long)O);
        return -1;
    }
    if (wz >= 0 && mge_onnx_value(c, wz)->ndim != 1 && count_of(c, wz) != 1 &&
        (wz = mge_onnx_reshape_tmp(c, n, wz, 1, &O)) < 0) {
        *st = c->err->code;
        return -1;
    }
    if (wz >= 0)
        xz = zero_or(c, n, xz, xv->dtype);
    *one_d = nsp == 1;
    if (*one_d) {   /* [N, C, L] -> [N, C, 1, L]: the window's h is 1, unpadded */
        int64_t two = 2;
        mge_attr ua[1] = {mge_onnx_ais(MGE_KEY_axis, 1, &two)};
        x = mge_onnx_emit_tmp(c, n, MGE_OP_UNSQUEEZE, 1, &x, 1, ua);
        w = x < 0 ? -1 : mge_onnx_emit_tmp(c, n, MGE_OP_UNSQUEEZE, 1, &w, 1, ua);
        if (w < 0) {
            *st = c->err->code;
            return -1;
        }
        k[1] = k[0], s[1] = s[0], d[1] = d[0], pb[1] = pb[0], pe[1] = pe[0];
        k[0] = s[0] = d[0] = 1, pb[0] = pe[0] = 0;
    }
    int64_t pad[4] = {pb[0], pb[1], pe[0], pe[1]};
    mge_attr at[5] = {mge_onnx_ais(MGE_KEY_kernel, 2, k), mge_onnx_ais(MGE_KEY_stride, 2, s),
                      mge_onnx_ais(MGE_KEY_pad, 4, pad), mge_onnx_ais(MGE_KEY_dilation, 2, d),
                      mge_onnx_ai(MGE_KEY_groups, group)};
    int in[4] = {x, w, xz, wz}, nin = wz >= 0 ? 4 : xz >= 0 ? 3 : 2;
    int v = final && !*one_d ? mge_onnx_emit(c, n, MGE_OP_CONV_INTEGER, nin, in, 5, at, 1)
                             : mge_onnx_emit_tmp(c, n, MGE_OP_CONV_INTEGER, nin, in, 5, at);
    if (v >= 0 && final && *one_d) {
        int64_t two = 2;
        mge_attr sa[1] = {mge_onnx_ais(MGE_KEY_axis, 1, &two)};
        v = mge_onnx_emit(c, n, MGE_OP_SQUEEZE, 1, &v, 1, sa, 1);
    }
    if (v < 0)
        *st = c->err->code ? c->err->code : MGE_ERR_INVALID;
    return v;
}

static mge_status conv_conv_integer(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x = mge_onnx_in(c, n, 0), w = mge_onnx_in(c, n, 1);
    if (x < 0 || w < 0)
        return mge_onnx_fail(c, n, "expected inputs x and w");
    mge_status st;
    int one_d;
    conv_int(c, n, x, w, mge_onnx_in(c, n, 2), mge_onnx_in(c, n, 3), 1, &one_d, &st);
    return st;
}

static mge_status conv_qlinear_conv(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int in[9];
    for (int i = 0; i < 9; i++)
        in[i] = mge_onnx_in(c, n, i);
    if (in[0] < 0 || in[1] < 0 || in[3] < 0 || in[4] < 0 || in[6] < 0)
        return mge_onnx_fail(c, n, "expected inputs x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, "
                             "y_zero_point[, B]");
    const mge_value *wv = mge_onnx_value(c, in[3]);
    int64_t O = wv->ndim >= 1 ? wv->dims[0] : 0, ks = count_of(c, in[4]);
    int ws = in[4];
    if (ks != 1 && ks != O)
        return mge_onnx_fail(c, n, "w_scale has %lld elements: expected 1 or %lld (one per output channel)",
                             (long long)ks, (long long)O);
    if (ks != 1 && mge_onnx_value(c, ws)->ndim != 1 && (ws = mge_onnx_reshape_tmp(c, n, ws, 1, &O)) < 0)
        return c->err->code;
    mge_status st;
    int one_d = 0;
    int acc = conv_int(c, n, in[0], in[3], in[2], in[5], 0, &one_d, &st);
    if (acc < 0)
        return st;
    if (in[8] >= 0) {
        const mge_value *bv = mge_onnx_value(c, in[8]);
        if (bv->dtype != MGE_I32 || bv->ndim != 1 || bv->dims[0] != O)
            return mge_onnx_fail(c, n, "B is %s of rank %d: expected int32 [%lld]", mge_dtype_name(bv->dtype),
                                 bv->ndim, (long long)O);
        int64_t shape[4] = {1, O, 1, 1};
        int b4 = mge_onnx_reshape_tmp(c, n, in[8], 4, shape);
        if ((acc = mge_onnx_emit2(c, n, MGE_OP_ADD, acc, b4)) < 0)
            return c->err->code;
    }
    return requant(c, n, acc, in[1], ws, in[6], in[7], 1, one_d ? 2 : -1);
}

const mge_onnx_op mge_onnx_ops_quant[] = {
    {"QuantizeLinear", conv_quantize, 10},
    {"DequantizeLinear", conv_dequantize, 10},
    {"DynamicQuantizeLinear", conv_dynamic_quantize, 11},
    {"MatMulInteger", conv_matmul_integer, 10},
    {"ConvInteger", conv_conv_integer, 10},
    {"QLinearMatMul", conv_qlinear_matmul, 10},
    {"QLinearConv", conv_qlinear_conv, 10},
    {NULL, NULL, 0},
};
