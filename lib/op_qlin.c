/* op_qlin.c — the ONNX linear quantization ops (group quant-onnx, see
 * ops.def): shape inference and operation counts of quantize_linear,
 * dequantize_linear, requantize, matmul_integer and conv_integer.
 *
 * The scale and zero point of quantize_linear, dequantize_linear and
 * requantize are inputs (ONNX has them as tensors, often graph inputs), so
 * their shapes are checked here: per tensor (one element), per axis (1-D,
 * x's dim at axis) or blocked (block > 0: x's rank, ceil(dim / block) at
 * axis, x's dims elsewhere); the zero point has the scale's shape.
 * "FLOPs" count integer operations as elementary ones (a multiply-add is 2),
 * as mge's qs8 ops do. */
#include "internal.h"

#include <stdio.h>
#include <string.h>

static int float_dt(mge_dtype dt)
{
    return dt == MGE_F32 || dt == MGE_F16 || dt == MGE_BF16;
}

/* The operand dtypes of matmul_integer and conv_integer (ONNX's: 8-bit only). */
static int q8_dt(mge_dtype dt)
{
    return dt == MGE_U8 || dt == MGE_I8;
}

/* The quantized dtypes of quantize_linear, dequantize_linear and requantize:
 * where int16 and uint16 join (with ref_qlin.c's qrange) once mge has them. */
static int qtype(mge_dtype dt)
{
    return dt == MGE_U8 || dt == MGE_I8;
}

static mge_status bad(const char *op, const char *what, const mge_tdesc *t, const char *want, mge_error *err)
{
    char b[96];
    return mge_error_set(err, MGE_ERR_SHAPE, "%s: %s is %s: expected %s", op, what, mge_tdesc_str(t, b, sizeof b),
                         want);
}

static int64_t count(const mge_tdesc *t)
{
    int64_t k = 1;
    for (int i = 0; i < t->ndim; i++)
        k *= t->dims[i];
    return k;
}

/* A zero point z fits scale s: the same shape, or one element each ([] and [1] alike). */
static int zero_fits(const mge_tdesc *z, const mge_tdesc *s)
{
    return (z->ndim == s->ndim && !memcmp(z->dims, s->dims, sizeof(int64_t) * (size_t)z->ndim)) ||
           (count(z) == 1 && count(s) == 1);
}

/* The layout of scale s over x (axis, block from n): 0 per tensor, 1 per
 * axis, 2 blocked; the normalized axis in *ax. */
static mge_status scale_layout(const mge_node *n, const char *op, const mge_tdesc *x, const mge_tdesc *s, int *ax,
                               int *layout, mge_error *err)
{
    int64_t a = mge_node_int(n, MGE_KEY_axis, 1), block = mge_node_int(n, MGE_KEY_block, 0);
    if (block < 0)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: block=%lld: expected >= 0", op, (long long)block);
    *ax = -1;
    if (count(s) == 1 && block == 0) {
        *layout = 0;
        return MGE_OK;
    }
    char bx[96];
    mge_tdesc_str(x, bx, sizeof bx);
    if ((*ax = mge_axis(a, x->ndim)) < 0)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: axis=%lld is out of range for x %s", op, (long long)a, bx);
    if (block == 0) {
        if (s->ndim != 1 || s->dims[0] != x->dims[*ax])
            return mge_error_set(err, MGE_ERR_SHAPE,
                                 "%s: the scale has %lld elements: expected one, or a 1-D [%lld] along axis %d of "
                                 "x %s",
                                 op, (long long)count(s), (long long)x->dims[*ax], *ax, bx);
        *layout = 1;
        return MGE_OK;
    }
    int ok = s->ndim == x->ndim;
    for (int i = 0; ok && i < x->ndim; i++)
        ok = s->dims[i] == (i == *ax ? (x->dims[i] + block - 1) / block : x->dims[i]);
    if (!ok) {
        char bs[96];
        return mge_error_set(err, MGE_ERR_SHAPE,
                             "%s: blocked scale %s over x %s: expected x's shape with ceil(%lld / %lld) at axis %d",
                             op, mge_tdesc_str(s, bs, sizeof bs), bx, (long long)x->dims[*ax], (long long)block,
                             *ax);
    }
    *layout = 2;
    return MGE_OK;
}

/* The output dtype of quantize_linear / requantize: the zero point's, else
 * dtype (u8 when absent); they must agree when both are given. */
static mge_status out_dtype(const mge_node *n, const char *op, const mge_tdesc *zero, mge_dtype *dt,
                            mge_error *err)
{
    const mge_attr *a = mge_node_attr(n, MGE_KEY_dtype);
    mge_dtype want = a ? (mge_dtype)a->i[0] : MGE_U8;
    if (a && !qtype(want))
        return mge_error_set(err, MGE_ERR_INVALID, "%s: dtype=%s: expected u8 or i8", op, mge_dtype_name(want));
    if (zero) {
        if (!qtype(zero->dtype))
            return bad(op, "the zero point", zero, "u8 or i8", err);
        if (a && zero->dtype != want)
            return mge_error_set(err, MGE_ERR_INVALID, "%s: dtype=%s but the zero point is %s", op,
                                 mge_dtype_name(want), mge_dtype_name(zero->dtype));
        want = zero->dtype;
    }
    *dt = want;
    return MGE_OK;
}

/* numpy matmul's shape of a [.., M, K] and b [.., K, N] (1-D operands
 * promoted and the added dim dropped), M, K, N given back. */
static mge_status matmul_shape(const char *op, const mge_tdesc *a, const mge_tdesc *b, mge_tdesc *out, int64_t *M,
                               int64_t *N, mge_error *err)
{
    char ba[96], bb[96];
    if (a->ndim < 1 || b->ndim < 1)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: a is %s and b %s: expected ranks >= 1", op,
                             mge_tdesc_str(a, ba, sizeof ba), mge_tdesc_str(b, bb, sizeof bb));
    int64_t K = a->dims[a->ndim - 1], Kb = b->ndim == 1 ? b->dims[0] : b->dims[b->ndim - 2];
    *M = a->ndim == 1 ? 1 : a->dims[a->ndim - 2];
    *N = b->ndim == 1 ? 1 : b->dims[b->ndim - 1];
    if (K != Kb)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: a is %s and b %s: inner dims %lld and %lld differ", op,
                             mge_tdesc_str(a, ba, sizeof ba), mge_tdesc_str(b, bb, sizeof bb), (long long)K,
                             (long long)Kb);
    mge_tdesc ab = *a, bbd = *b, o;
    ab.ndim = a->ndim > 2 ? a->ndim - 2 : 0;
    bbd.ndim = b->ndim > 2 ? b->ndim - 2 : 0;
    ab.known = bbd.known = 0;
    if (!mge_broadcast(&ab, &bbd, &o))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: a is %s and b %s: the batch dims do not broadcast", op,
                             mge_tdesc_str(a, ba, sizeof ba), mge_tdesc_str(b, bb, sizeof bb));
    if (o.ndim + 2 > MGE_MAX_DIMS)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: the result has rank > %d", op, MGE_MAX_DIMS);
    *out = o;
    out->known = 0;
    out->dtype = MGE_I32;
    if (a->ndim > 1)
        out->dims[out->ndim++] = *M;
    if (b->ndim > 1)
        out->dims[out->ndim++] = *N;
    return MGE_OK;
}

/* A zero point of matmul_integer / conv_integer: dtype dt, one element or
 * a 1-D [len] (len < 0: one element only). */
static mge_status int_zero(const char *op, const char *what, const mge_tdesc *z, mge_dtype dt, int64_t len,
                           mge_error *err)
{
    char want[64];
    if (z->dtype != dt)
        return bad(op, what, z, mge_dtype_name(dt), err);
    if (count(z) == 1 || (len >= 0 && z->ndim == 1 && z->dims[0] == len))
        return MGE_OK;
    if (len >= 0)
        snprintf(want, sizeof want, "one element or a 1-D [%lld]", (long long)len);
    else
        snprintf(want, sizeof want, "one element");
    return bad(op, what, z, want, err);
}

/* conv_integer's window: kernel, stride, dilation (1 or 2 values), pad (1,
 * 2 or 4: top, left, bottom, right). */
typedef struct qwin {
    int64_t k[2], s[2], d[2], p[4], g;
} qwin;

static mge_status conv_window(const mge_node *n, qwin *w, mge_error *err)
{
    static const int keys[3] = {MGE_KEY_kernel, MGE_KEY_stride, MGE_KEY_dilation};
    int64_t *dst[3] = {w->k, w->s, w->d};
    for (int k = 0; k < 3; k++) {
        const mge_attr *a = mge_node_attr(n, keys[k]);
        if (!a && k == 0)
            return mge_error_set(err, MGE_ERR_INVALID, "conv_integer: needs attribute 'kernel'");
        if (a && (a->n < 1 || a->n > 2))
            return mge_error_set(err, MGE_ERR_INVALID, "conv_integer: %s has %d values: expected 1 or 2 (h, w)",
                                 mge_key_name(keys[k]), a->n);
        for (int i = 0; i < 2; i++) {
            dst[k][i] = a ? a->i[a->n == 1 ? 0 : i] : 1;
            if (dst[k][i] < 1 || dst[k][i] > (1 << 30))
                return mge_error_set(err, MGE_ERR_INVALID, "conv_integer: %s=%lld: expected values in [1, 2^30]",
                                     mge_key_name(keys[k]), (long long)dst[k][i]);
        }
    }
    const mge_attr *a = mge_node_attr(n, MGE_KEY_pad);
    if (a && a->n != 1 && a->n != 2 && a->n != 4)
        return mge_error_set(err, MGE_ERR_INVALID,
                             "conv_integer: pad has %d values: expected 1, 2 (h, w) or 4 (top, left, bottom, right)",
                             a->n);
    for (int i = 0; i < 4; i++) {
        w->p[i] = !a ? 0 : a->n == 1 ? a->i[0] : a->n == 2 ? a->i[i % 2] : a->i[i];
        if (w->p[i] < 0 || w->p[i] > (1 << 30))
            return mge_error_set(err, MGE_ERR_INVALID, "conv_integer: pad=%lld: expected values in [0, 2^30]",
                                 (long long)w->p[i]);
    }
    w->g = mge_node_int(n, MGE_KEY_groups, 1);
    if (w->g < 1)
        return mge_error_set(err, MGE_ERR_INVALID, "conv_integer: groups=%lld: expected >= 1", (long long)w->g);
    return MGE_OK;
}

static mge_status conv_integer_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    const char *op = "conv_integer";
    const mge_tdesc *x = &in[0], *w = &in[1];
    qwin q;
    mge_status s;
    if ((s = conv_window(n, &q, err)))
        return s;
    if (!q8_dt(x->dtype) || x->ndim != 4)
        return bad(op, "x", x, "u8 or i8 [N, C, H, W]", err);
    if (!q8_dt(w->dtype) || w->ndim != 4)
        return bad(op, "the weight", w, "u8 or i8 [O, C/groups, kh, kw]", err);
    char bx[96], bw[96];
    mge_tdesc_str(x, bx, sizeof bx);
    mge_tdesc_str(w, bw, sizeof bw);
    if (x->dims[1] % q.g || w->dims[0] % q.g || w->dims[1] != x->dims[1] / q.g)
        return mge_error_set(err, MGE_ERR_SHAPE,
                             "conv_integer: x %s, weight %s, groups %lld: expected C and O divisible by groups and "
                             "the weight's dim 1 C/groups",
                             bx, bw, (long long)q.g);
    if (w->dims[2] != q.k[0] || w->dims[3] != q.k[1])
        return mge_error_set(err, MGE_ERR_SHAPE, "conv_integer: weight %s but kernel [%lld,%lld]", bw,
                             (long long)q.k[0], (long long)q.k[1]);
    if (n->nin > 2 && (s = int_zero(op, "x_zero", &in[2], x->dtype, -1, err)))
        return s;
    if (n->nin > 3 && (s = int_zero(op, "w_zero", &in[3], w->dtype, w->dims[0], err)))
        return s;
    *out = *x;
    out->known = 0;
    out->dtype = MGE_I32;
    out->dims[1] = w->dims[0];
    for (int i = 0; i < 2; i++) {
        int64_t span = q.d[i] * (q.k[i] - 1) + 1, padded = x->dims[2 + i] + q.p[i] + q.p[i + 2];
        if (padded < span)
            return mge_error_set(err, MGE_ERR_SHAPE,
                                 "conv_integer: x %s padded to %lld along dim %d is smaller than the dilated kernel "
                                 "(%lld)",
                                 bx, (long long)padded, 2 + i, (long long)span);
        out->dims[2 + i] = (padded - span) / q.s[i] + 1;
    }
    return mge_shape_numel(out->ndim, out->dims, out->dtype, NULL, NULL, err);
}

mge_status mge_qlin_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    const char *op = mge_op_info(n->op)->name;
    const mge_tdesc *x = &in[0];
    mge_status s;
    int ax, layout;
    switch (n->op) {
    case MGE_OP_QUANTIZE_LINEAR:
    case MGE_OP_REQUANTIZE: {
        int rq = n->op == MGE_OP_REQUANTIZE;
        if (rq ? x->dtype != MGE_I32 : !float_dt(x->dtype) && x->dtype != MGE_I32)
            return bad(op, "x", x, rq ? "i32" : "f32, f16, bf16 or i32", err);
        mge_dtype sdt = x->dtype == MGE_I32 ? MGE_F32 : x->dtype;
        if (in[1].dtype != sdt)
            return bad(op, rq ? "the multiplier" : "the scale", &in[1], mge_dtype_name(sdt), err);
        if ((s = scale_layout(n, op, x, &in[1], &ax, &layout, err)))
            return s;
        if (rq && layout == 2)
            return mge_error_set(err, MGE_ERR_INVALID, "requantize: block=%lld: expected 0 (per tensor or axis)",
                                 (long long)mge_node_int(n, MGE_KEY_block, 0));
        if (n->nin > 2 && !zero_fits(&in[2], &in[1]) && !(rq && count(&in[2]) == 1))
            return bad(op, "the zero point", &in[2], "the scale's shape", err);
        mge_dtype dt = MGE_U8;
        if ((s = out_dtype(n, op, n->nin > 2 ? &in[2] : NULL, &dt, err)))
            return s;
        *out = *x;
        out->known = 0;
        out->dtype = dt;
        return MGE_OK;
    }
    case MGE_OP_DEQUANTIZE_LINEAR:
        if (!qtype(x->dtype) && x->dtype != MGE_I32)
            return bad(op, "x", x, "u8, i8 or i32", err);
        if (!float_dt(in[1].dtype))
            return bad(op, "the scale", &in[1], "f32, f16 or bf16", err);
        if ((s = scale_layout(n, op, x, &in[1], &ax, &layout, err)))
            return s;
        if (n->nin > 2) {
            if (in[2].dtype != x->dtype)
                return bad(op, "the zero point", &in[2], mge_dtype_name(x->dtype), err);
            if (!zero_fits(&in[2], &in[1]))
                return bad(op, "the zero point", &in[2], "the scale's shape", err);
        }
        *out = *x;
        out->known = 0;
        out->dtype = in[1].dtype;
        return MGE_OK;
    case MGE_OP_MATMUL_INTEGER: {
        if (!q8_dt(x->dtype))
            return bad(op, "a", x, "u8 or i8", err);
        if (!q8_dt(in[1].dtype))
            return bad(op, "b", &in[1], "u8 or i8", err);
        int64_t M, N;
        if ((s = matmul_shape(op, x, &in[1], out, &M, &N, err)))
            return s;
        if (n->nin > 2 && (s = int_zero(op, "a_zero", &in[2], x->dtype, x->ndim > 1 ? M : -1, err)))
            return s;
        if (n->nin > 3 && (s = int_zero(op, "b_zero", &in[3], in[1].dtype, in[1].ndim > 1 ? N : -1, err)))
            return s;
        return mge_shape_numel(out->ndim, out->dims, out->dtype, NULL, NULL, err);
    }
    default: return conv_integer_infer(n, in, out, err);
    }
}

double mge_qlin_flops(const mge_node *n, const mge_tdesc *in, const mge_tdesc *out)
{
    double cnt = (double)count(&out[0]);
    switch (n->op) {
    case MGE_OP_MATMUL_INTEGER:
        return 2 * cnt * (double)in[0].dims[in[0].ndim - 1];
    case MGE_OP_CONV_INTEGER:
        return 2 * cnt * (double)(in[1].dims[1] * in[1].dims[2] * in[1].dims[3]);
    default: return 2 * cnt;
    }
}
