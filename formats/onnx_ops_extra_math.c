/* onnx_ops_extra_math.c — ONNX converters for the inverse and hyperbolic
 * trigonometric functions, Shrink, the bitwise ops and BitShift, Det,
 * LRN, DFT, STFT, the window functions (Hann, Hamming, Blackman) and
 * MelWeightMatrix. (EyeLike is
 * onnx_ops_shape.c's, a mask over dims known at plan time; mge's eye_like
 * op is for the text form.)
 *
 * Most map onto one mge op (ops.def's extra math block). The windows have
 * no op: their one input is a size, so with a constant size the window is
 * a constant made here (computed in double, stored in the output dtype);
 * a size computed at run time is refused. MelWeightMatrix likewise. DFT's dft_length and (opset 20)
 * axis inputs must be known at import too: they decide the output shape. */
#include "onnx.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- helpers */

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
    return mge_onnx_unsupported(c, n, "%s over %s (mge computes it in f32, f16 and bf16 only)", n->op_type,
                                mge_dtype_name(dt));
}

/* The one integer of a constant (or import-time known) scalar input. */
static mge_status known_int(mge_onnx_ctx *c, mge_onnx_node *n, int v, const char *what, int64_t *out)
{
    int64_t vals[2];
    int cnt;
    mge_status s = mge_onnx_known_ints(c, n, v, what, vals, 2, &cnt);
    if (s)
        return s;
    if (cnt != 1)
        return mge_onnx_fail(c, n, "its %s has %d elements: expected one", what, cnt);
    *out = vals[0];
    return MGE_OK;
}

/* ---------------------------------------------------------------- one float op */

static const struct {
    const char *type;
    int op;
} float_ops[] = {
    {"Acos", MGE_OP_ACOS}, {"Acosh", MGE_OP_ACOSH}, {"Asin", MGE_OP_ASIN}, {"Asinh", MGE_OP_ASINH},
    {"Atan", MGE_OP_ATAN}, {"Atanh", MGE_OP_ATANH}, {"Cosh", MGE_OP_COSH}, {"Sinh", MGE_OP_SINH},
    {"Det", MGE_OP_DET},
};

static mge_status conv_float1(mge_onnx_ctx *c, mge_onnx_node *n)
{
    for (size_t i = 0; i < sizeof float_ops / sizeof float_ops[0]; i++) {
        if (strcmp(float_ops[i].type, n->op_type) != 0)
            continue;
        int x;
        mge_status s;
        if (mge_onnx_nin(n) != 1)
            return mge_onnx_fail(c, n, "%d inputs: expected 1", mge_onnx_nin(n));
        if ((s = need_in(c, n, 0, &x)) || (s = need_float(c, n, x)))
            return s;
        if (float_ops[i].op == MGE_OP_DET) {
            const mge_value *xv = mge_onnx_value(c, x);
            if (xv->ndim < 2)
                return mge_onnx_fail(c, n, "input of rank %d: expected [..., M, M]", xv->ndim);
        }
        return mge_onnx_finish(c, n, float_ops[i].op, 1, &x, 0, NULL);
    }
    return mge_onnx_fail(c, n, "no mapping");
}

/* Shrink (opset 9): lambd, bias -> shrink(lambd, shift=bias). */
static mge_status conv_shrink(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x;
    mge_status s;
    if ((s = need_in(c, n, 0, &x)))
        return s;
    if (!mge_dtype_is_float(dtype_of(c, x)))
        return mge_onnx_unsupported(c, n, "Shrink over %s (mge's shrink takes f32, f16 and bf16)",
                                    mge_dtype_name(dtype_of(c, x)));
    double l = mge_onnx_attr_f(n, "lambd", 0.5), b = mge_onnx_attr_f(n, "bias", 0.0);
    if (l != l || b != b)
        return mge_onnx_fail(c, n, "lambd or bias is NaN");
    mge_attr at[2] = {mge_onnx_af(MGE_KEY_lambd, l), mge_onnx_af(MGE_KEY_shift, b)};
    return mge_onnx_finish(c, n, MGE_OP_SHRINK, 1, &x, 2, at);
}

/* ---------------------------------------------------------------- bitwise */

static mge_status need_bits(mge_onnx_ctx *c, mge_onnx_node *n, int v, int unsigned_only)
{
    mge_dtype dt = dtype_of(c, v);
    int uns = dt == MGE_U8 || dt == MGE_U16 || dt == MGE_U32 || dt == MGE_U64;
    if (uns || (!unsigned_only && (dt == MGE_I8 || dt == MGE_I16 || dt == MGE_I32 || dt == MGE_I64)))
        return MGE_OK;
    return mge_onnx_unsupported(c, n, "%s over %s (mge takes %s)", n->op_type, mge_dtype_name(dt),
                                unsigned_only ? "u8, u16, u32 and u64 (ONNX's BitShift is for unsigned types)"
                                              : "the integer dtypes");
}

static mge_status conv_bitwise(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int op = strcmp(n->op_type, "BitwiseAnd") == 0   ? MGE_OP_BITWISE_AND
             : strcmp(n->op_type, "BitwiseOr") == 0  ? MGE_OP_BITWISE_OR
             : strcmp(n->op_type, "BitwiseXor") == 0 ? MGE_OP_BITWISE_XOR
             : strcmp(n->op_type, "BitwiseNot") == 0 ? MGE_OP_BITWISE_NOT
                                                     : -1;
    int shift = strcmp(n->op_type, "BitShift") == 0;
    if (shift) {
        char dir[16];
        mge_onnx_attr_s(n, "direction", "", dir, sizeof dir);
        if (strcmp(dir, "LEFT") == 0)
            op = MGE_OP_SHIFT_LEFT;
        else if (strcmp(dir, "RIGHT") == 0)
            op = MGE_OP_SHIFT_RIGHT;
        else
            return mge_onnx_fail(c, n, "direction '%s': expected LEFT or RIGHT", dir);
    }
    if (op < 0)
        return mge_onnx_fail(c, n, "no mapping");
    int nin = mge_op_info(op)->min_in, in[2];
    if (mge_onnx_nin(n) != nin)
        return mge_onnx_fail(c, n, "%d inputs: expected %d", mge_onnx_nin(n), nin);
    mge_status s;
    for (int k = 0; k < nin; k++)
        if ((s = need_in(c, n, k, &in[k])) || (s = need_bits(c, n, in[k], shift)))
            return s;
    if (nin == 2 && dtype_of(c, in[0]) != dtype_of(c, in[1]))
        return mge_onnx_fail(c, n, "inputs of two dtypes (%s and %s)", mge_dtype_name(dtype_of(c, in[0])),
                             mge_dtype_name(dtype_of(c, in[1])));
    return mge_onnx_finish(c, n, op, nin, in, 0, NULL);
}

/* ---------------------------------------------------------------- LRN */

static mge_status conv_lrn(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x;
    mge_status s;
    if ((s = need_in(c, n, 0, &x)) || (s = need_float(c, n, x)))
        return s;
    if (!mge_onnx_attr(n, "size"))
        return mge_onnx_fail(c, n, "no size attribute (required)");
    int64_t size = mge_onnx_attr_i(n, "size", 0);
    if (size < 1)
        return mge_onnx_fail(c, n, "size %lld: expected >= 1", (long long)size);
    if (mge_onnx_value(c, x)->ndim < 2)
        return mge_onnx_fail(c, n, "input of rank %d: expected [N, C, ...]", mge_onnx_value(c, x)->ndim);
    mge_attr at[4] = {mge_onnx_ais(MGE_KEY_size, 1, &size), mge_onnx_af(MGE_KEY_alpha, mge_onnx_attr_f(n, "alpha", 1e-4)),
                      mge_onnx_af(MGE_KEY_beta, mge_onnx_attr_f(n, "beta", 0.75)),
                      mge_onnx_af(MGE_KEY_shift, mge_onnx_attr_f(n, "bias", 1.0))};
    return mge_onnx_finish(c, n, MGE_OP_LRN, 1, &x, 4, at);
}

/* ---------------------------------------------------------------- DFT */

/* DFT: opset 17 (axis attribute, default 1) and 20 (axis input, default
 * -2); dft_length optional; inverse, onesided. */
static mge_status conv_dft(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x;
    mge_status s;
    if ((s = need_in(c, n, 0, &x)) || (s = need_float(c, n, x)))
        return s;
    const mge_value *xv = mge_onnx_value(c, x);
    int r = xv->ndim;
    if (r < 2 || (xv->dims[r - 1] != 1 && xv->dims[r - 1] != 2))
        return mge_onnx_fail(c, n, "input of rank %d with last dim %lld: expected [..., 1] (real) or [..., 2] (complex)",
                             r, r ? (long long)xv->dims[r - 1] : 0LL);
    int64_t axis = c->opset >= 20 ? -2 : mge_onnx_attr_i(n, "axis", 1);
    if (c->opset >= 20 && mge_onnx_in(c, n, 2) >= 0 && (s = known_int(c, n, mge_onnx_in(c, n, 2), "axis", &axis)))
        return s;
    int ax = mge_onnx_axis(axis, r);
    if (ax < 0 || ax == r - 1)
        return mge_onnx_fail(c, n, "axis %lld on rank %d: expected a signal axis (not the last)", (long long)axis, r);
    mge_attr at[4];
    int na = 0;
    int64_t a64 = ax;
    at[na++] = mge_onnx_ais(MGE_KEY_axis, 1, &a64);
    at[na++] = mge_onnx_ab(MGE_KEY_inverse, mge_onnx_attr_i(n, "inverse", 0) != 0);
    at[na++] = mge_onnx_ab(MGE_KEY_onesided, mge_onnx_attr_i(n, "onesided", 0) != 0);
    int lv = mge_onnx_in(c, n, 1);
    if (lv >= 0) {
        int64_t len;
        if ((s = known_int(c, n, lv, "dft_length", &len)))
            return s;
        if (len < 1)
            return mge_onnx_fail(c, n, "dft_length %lld: expected >= 1", (long long)len);
        at[na++] = mge_onnx_ai(MGE_KEY_length, len);
    }
    return mge_onnx_finish(c, n, MGE_OP_DFT, 1, &x, na, at);
}

/* STFT (opset 17): signal [B, L, 1 or 2], frame_step, window [W]?,
 * frame_length?; onesided (default 1). Lowered to a gather of the frames
 * (a constant index [frames, frame_length] along L), times the window,
 * and a dft along the frame: [B, frames, bins, 2]. */
static mge_status conv_stft(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x, sv;
    mge_status s;
    if ((s = need_in(c, n, 0, &x)) || (s = need_float(c, n, x)) || (s = need_in(c, n, 1, &sv)))
        return s;
    const mge_value *xv = mge_onnx_value(c, x);
    if (xv->ndim != 3 || (xv->dims[2] != 1 && xv->dims[2] != 2))
        return mge_onnx_fail(c, n, "signal of rank %d: expected [batch, length, 1 or 2]", xv->ndim);
    int64_t L = xv->dims[1], step, fl = -1;
    if (L < 0)
        return mge_onnx_unsupported(c, n, "a signal length not known at import (mge makes the frames then)");
    if ((s = known_int(c, n, sv, "frame_step", &step)))
        return s;
    int w = mge_onnx_in(c, n, 2), lv = mge_onnx_in(c, n, 3);
    if (lv >= 0 && (s = known_int(c, n, lv, "frame_length", &fl)))
        return s;
    if (w >= 0) {
        const mge_value *wv = mge_onnx_value(c, w);
        if (wv->ndim != 1 || wv->dims[0] < 0)
            return mge_onnx_fail(c, n, "window of rank %d: expected [window_length] known at import", wv->ndim);
        if (wv->dtype != xv->dtype)
            return mge_onnx_fail(c, n, "window is %s, the signal %s: expected one dtype", mge_dtype_name(wv->dtype),
                                 mge_dtype_name(xv->dtype));
        if (fl >= 0 && fl != wv->dims[0])
            return mge_onnx_fail(c, n, "frame_length %lld but a window of %lld", (long long)fl,
                                 (long long)wv->dims[0]);
        fl = wv->dims[0];
    }
    if (fl < 0)
        fl = L;
    if (step < 1 || fl < 1 || fl > L)
        return mge_onnx_fail(c, n, "frame_step %lld, frame_length %lld over a signal of %lld: expected a step >= 1 "
                             "and 1 <= frame_length <= length",
                             (long long)step, (long long)fl, (long long)L);
    int64_t nf = 1 + (L - fl) / step, id[2] = {nf, fl};
    if (nf * fl > (1 << 24))
        return mge_onnx_unsupported(c, n, "%lld frames of %lld: too many to index", (long long)nf, (long long)fl);
    mge_tensor t;
    if (mge_tensor_alloc(&t, MGE_I64, 2, id, c->err))
        return c->err->code;
    for (int64_t f = 0; f < nf; f++)
        for (int64_t j = 0; j < fl; j++)
            ((int64_t *)t.data)[f * fl + j] = f * step + j;
    int64_t one = 1;
    int gin[2] = {x, mge_onnx_const(c, n, &t)};
    if (gin[1] < 0)
        return c->err->code;
    mge_attr ga[1] = {mge_onnx_ais(MGE_KEY_axis, 1, &one)};
    int fr = mge_onnx_emit_tmp(c, n, MGE_OP_GATHER, 2, gin, 1, ga);   /* [B, frames, fl, C] */
    if (w >= 0) {
        int64_t ws[2] = {fl, 1};
        fr = mge_onnx_emit2(c, n, MGE_OP_MUL, fr, mge_onnx_reshape_tmp(c, n, w, 2, ws));
    }
    if (fr < 0)
        return c->err->code;
    int64_t two = 2;
    mge_attr at[3] = {mge_onnx_ais(MGE_KEY_axis, 1, &two),
                      mge_onnx_ab(MGE_KEY_onesided, mge_onnx_attr_i(n, "onesided", 1) != 0),
                      mge_onnx_ai(MGE_KEY_length, fl)};
    return mge_onnx_finish(c, n, MGE_OP_DFT, 1, &fr, 3, at);
}

/* ---------------------------------------------------------------- windows */

/* Hann, Hamming, Blackman (opset 17): size (a scalar) -> [size] in
 * output_datatype; periodic (default 1) divides by size, else size - 1. */
static mge_status conv_window(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int sv;
    mge_status s;
    if ((s = need_in(c, n, 0, &sv)))
        return s;
    int64_t size;
    if ((s = known_int(c, n, sv, "size", &size)))
        return s;
    if (size < 0 || size > (1 << 26))
        return mge_onnx_fail(c, n, "size %lld: expected 0 to 2^26", (long long)size);
    int64_t ot = mge_onnx_attr_i(n, "output_datatype", MGE_ONNX_FLOAT);
    int dt = mge_onnx_dtype((int)ot);
    if (dt < 0 || dt == MGE_QS8 || dt == MGE_QS32)
        return mge_onnx_unsupported(c, n, "output_datatype %s (mge has no such dtype)", mge_onnx_dtype_name((int)ot));
    if (dt == MGE_BOOL)
        return mge_onnx_fail(c, n, "output_datatype bool: expected a numeric type");
    int periodic = mge_onnx_attr_i(n, "periodic", 1) != 0;
    double N = (double)(periodic ? size : size - 1);
    mge_tensor t;
    if (mge_tensor_alloc(&t, (mge_dtype)dt, 1, &size, c->err))
        return c->err->code;
    for (int64_t i = 0; i < size; i++) {
        double x = (double)i, w;
        if (strcmp(n->op_type, "HannWindow") == 0)
            w = sin(M_PI * x / N) * sin(M_PI * x / N);
        else if (strcmp(n->op_type, "HammingWindow") == 0)
            w = 25.0 / 46.0 - (21.0 / 46.0) * cos(2.0 * M_PI * x / N);
        else
            w = 0.42 - 0.5 * cos(2.0 * M_PI * x / N) + 0.08 * cos(4.0 * M_PI * x / N);
        switch (dt) {
        case MGE_F32: ((float *)t.data)[i] = (float)w; break;
        case MGE_F16: ((uint16_t *)t.data)[i] = mge_f32_to_f16((float)w); break;
        case MGE_BF16: ((uint16_t *)t.data)[i] = mge_f32_to_bf16((float)w); break;
        case MGE_I8: ((int8_t *)t.data)[i] = (int8_t)w; break; /* truncation, as numpy's astype */
        case MGE_U8: ((uint8_t *)t.data)[i] = (uint8_t)(w < 0 ? 0 : w); break;
        case MGE_I32: ((int32_t *)t.data)[i] = (int32_t)w; break;
        case MGE_I64: ((int64_t *)t.data)[i] = (int64_t)w; break;
        default:
            mge_tensor_free(&t);
            return mge_onnx_unsupported(c, n, "output_datatype %s", mge_onnx_dtype_name((int)ot));
        }
    }
    int v = mge_onnx_const(c, n, &t);
    if (v < 0)
        return c->err->code;
    return mge_onnx_alias(c, n, 0, v);
}

/* The one number of a constant scalar input (floats too). */
static mge_status known_num(mge_onnx_ctx *c, mge_onnx_node *n, int v, const char *what, double *out)
{
    double vals[2];
    int cnt;
    mge_status s = mge_onnx_known(c, n, v, what, vals, 2, &cnt);
    if (s)
        return s;
    if (cnt != 1)
        return mge_onnx_fail(c, n, "its %s has %d elements: expected one", what, cnt);
    *out = vals[0];
    return MGE_OK;
}

/* MelWeightMatrix (opset 17): [dft_length/2 + 1, num_mel_bins] triangular
 * filters between mel-spaced edges, as ONNX's reference computes them (the
 * edges floored to spectrogram bins); a constant, so its five inputs must be
 * known at import. */
static mge_status conv_mel(mge_onnx_ctx *c, mge_onnx_node *n)
{
    static const char *names[5] = {"num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz",
                                   "upper_edge_hertz"};
    double a[5];
    mge_status s;
    for (int k = 0; k < 5; k++) {
        int v;
        if ((s = need_in(c, n, k, &v)) || (s = known_num(c, n, v, names[k], &a[k])))
            return s;
    }
    int64_t nmel = (int64_t)a[0], dftl = (int64_t)a[1], rate = (int64_t)a[2];
    if (nmel < 1 || nmel > 4096 || dftl < 1 || dftl > (1 << 20) || rate < 1 || !(a[3] >= 0) || !(a[4] > a[3]))
        return mge_onnx_fail(c, n, "num_mel_bins %lld, dft_length %lld, sample_rate %lld, edges %g to %g Hz: expected "
                             "positive counts and 0 <= lower < upper",
                             (long long)nmel, (long long)dftl, (long long)rate, a[3], a[4]);
    int64_t nspec = dftl / 2 + 1, dims[2] = {nspec, nmel};
    if (nspec * nmel > (1 << 24))
        return mge_onnx_unsupported(c, n, "a %lld x %lld filter bank (mge folds up to 2^24 elements)", (long long)nspec,
                                    (long long)nmel);
    int64_t ot = mge_onnx_attr_i(n, "output_datatype", MGE_ONNX_FLOAT);
    int dt = mge_onnx_dtype((int)ot);
    if (dt != MGE_F32 && dt != MGE_F16 && dt != MGE_BF16)
        return mge_onnx_unsupported(c, n, "output_datatype %s (mge makes f32, f16 or bf16 filters)",
                                    mge_onnx_dtype_name((int)ot));
    int64_t *edge = malloc(sizeof(int64_t) * (size_t)(nmel + 2));
    double *w = calloc((size_t)(nspec * nmel), sizeof(double));
    if (!edge || !w) {
        free(edge), free(w);
        return mge_error_set(c->err, MGE_ERR_NOMEM, "out of memory");
    }
    double lo = 2595.0 * log10(1.0 + a[3] / 700.0), hi = 2595.0 * log10(1.0 + a[4] / 700.0);
    double step = (hi - lo) / (double)(nmel + 2);
    for (int64_t i = 0; i < nmel + 2; i++) {
        double hz = 700.0 * (pow(10.0, ((double)i * step + lo) / 2595.0) - 1.0);
        edge[i] = (int64_t)floor((double)(dftl + 1) * hz / (double)rate);
    }
    s = MGE_OK;
    for (int64_t i = 0; i < nmel && !s; i++) {
        int64_t l = edge[i], m = edge[i + 1], r = edge[i + 2];
        if (l < 0 || r > nspec || m >= nspec)
            s = mge_onnx_fail(c, n, "mel bin %lld spans spectrogram bins %lld to %lld: past the %lld bins of "
                              "dft_length %lld (upper_edge_hertz above the Nyquist frequency?)",
                              (long long)i, (long long)l, (long long)r, (long long)nspec, (long long)dftl);
        else if (m == l)
            w[m * nmel + i] = 1;
        else
            for (int64_t j = l; j <= m; j++)
                w[j * nmel + i] = (double)(j - l) / (double)(m - l);
        for (int64_t j = m; !s && r > m && j < r; j++)
            w[j * nmel + i] = (double)(r - j) / (double)(r - m);
    }
    mge_tensor t;
    if (!s && !mge_tensor_alloc(&t, (mge_dtype)dt, 2, dims, c->err)) {
        for (int64_t i = 0; i < nspec * nmel; i++) {
            float f = (float)w[i];
            if (dt == MGE_F32)
                ((float *)t.data)[i] = f;
            else
                ((uint16_t *)t.data)[i] = dt == MGE_F16 ? mge_f32_to_f16(f) : mge_f32_to_bf16(f);
        }
        int v = mge_onnx_const(c, n, &t);
        s = v < 0 ? c->err->code : mge_onnx_alias(c, n, 0, v);
    } else if (!s) {
        s = c->err->code;
    }
    free(edge), free(w);
    return s;
}

const mge_onnx_op mge_onnx_ops_extra_math[] = {
    {"Acos", conv_float1, 7},
    {"Acosh", conv_float1, 9},
    {"Asin", conv_float1, 7},
    {"Asinh", conv_float1, 9},
    {"Atan", conv_float1, 7},
    {"Atanh", conv_float1, 9},
    {"Cosh", conv_float1, 9},
    {"Sinh", conv_float1, 9},
    {"Det", conv_float1, 11},
    {"Shrink", conv_shrink, 9},
    {"BitwiseAnd", conv_bitwise, 18},
    {"BitwiseOr", conv_bitwise, 18},
    {"BitwiseXor", conv_bitwise, 18},
    {"BitwiseNot", conv_bitwise, 18},
    {"BitShift", conv_bitwise, 11},
    {"LRN", conv_lrn, 1},
    {"DFT", conv_dft, 17},
    {"STFT", conv_stft, 17},
    {"HannWindow", conv_window, 17},
    {"HammingWindow", conv_window, 17},
    {"BlackmanWindow", conv_window, 17},
    {"MelWeightMatrix", conv_mel, 17},
    {NULL, NULL, 0},
};
