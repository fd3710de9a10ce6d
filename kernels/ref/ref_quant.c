/* ref_quant.c — the oracle of the int8 ops (lib/ops.def, arithmetic in
 * lib/quant_math.h): quantize, dequantize, qconv2d, qlinear, qadd, and
 * avgpool2d / global_avgpool on qs8. Plain loops over the helpers of
 * quant_math.h, so the fast kernels must agree to the bit.
 *
 * qconv2d and qlinear accumulate (x - x_zero) * w and the bias in int64 and
 * then keep the low 32 bits: that is exactly the int32 (wrapping) sum of
 * the definition, whatever the order, and never wraps for real models
 * (|x - x_zero| * |w| <= 255 * 128 per tap, so 2^31 needs over 65,000 taps
 * at full scale).
 *
 * Pooling on qs8 works on the integers and keeps the input's scale: an
 * average commutes with q -> scale * (q - zero) as long as every tap is a
 * real input, so no zero point is needed. Padded taps stand for the real 0,
 * i.e. q = zero, which these ops do not know: count_include_pad=false skips
 * them (as the f32 kernel), count_include_pad=true with padding is refused. */
#include "ref.h"

#include "quant_math.h"

#include <stdlib.h>

static mge_status quantize_f32(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                               mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *x = in[0];
    mge_status st;
    if ((st = ref_check_dtype(ctx, n, "x", x, MGE_F32, err)) ||
        (st = ref_check(ctx, n, "output", out[0], MGE_QS8, x->ndim, x->dims, err)))
        return st;
    float inv = 1.0f / (float)mge_node_float(n, MGE_KEY_scale, 1.0);
    int32_t zero = (int32_t)mge_node_int(n, MGE_KEY_zero, 0);
    const float *xp = x->data;
    int8_t *yp = out[0]->data;
    for (int64_t i = 0, k = ref_numel(x); i < k; i++)
        yp[i] = mge_q_quantize(xp[i], inv, zero);
    return MGE_OK;
}

static mge_status dequantize_qs8(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                 mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *x = in[0];
    mge_status st;
    if ((st = ref_check_dtype(ctx, n, "x", x, MGE_QS8, err)) ||
        (st = ref_check(ctx, n, "output", out[0], MGE_F32, x->ndim, x->dims, err)))
        return st;
    float scale = (float)mge_node_float(n, MGE_KEY_scale, 1.0);
    int32_t zero = (int32_t)mge_node_int(n, MGE_KEY_zero, 0);
    const int8_t *xp = x->data;
    float *yp = out[0]->data;
    for (int64_t i = 0, k = ref_numel(x); i < k; i++)
        yp[i] = mge_q_dequantize(xp[i], scale, zero);
    return MGE_OK;
}

/* The requantization of qconv2d / qlinear: one multiplier per output
 * channel (weight->q per channel along axis 0, or one per tensor), the
 * output clamp, and the zero points. qm is malloc'ed (O entries). */
typedef struct requant {
    mge_qmul *qm;
    int32_t x_zero, y_zero, lo, hi;
} requant;

static mge_status requant_setup(const mge_kctx *ctx, const mge_node *n, const mge_tensor *w, int64_t O, requant *r,
                                mge_error *err)
{
    const char *name = ref_opname(ctx, n), *node = n->name ? n->name : "?";
    const mge_quant *q = &w->q;
    int per_channel = q->axis == 0 && q->nscale == O;
    if (!q->scale || !(per_channel || (q->axis == -1 && q->nscale == 1)))
        return mge_error_set(err, MGE_ERR_INVALID,
                             "%s %s: weight has %d scales along axis %d: expected %lld along axis 0 or one "
                             "(axis -1)",
                             name, node, q->scale ? q->nscale : 0, q->axis, (long long)O);
    double xs = mge_node_float(n, MGE_KEY_x_scale, NAN), ys = mge_node_float(n, MGE_KEY_y_scale, NAN);
    r->x_zero = (int32_t)mge_node_int(n, MGE_KEY_x_zero, 0);
    r->y_zero = (int32_t)mge_node_int(n, MGE_KEY_y_zero, 0);
    mge_q_act_bounds(mge_node_int(n, MGE_KEY_act, -1), ys, r->y_zero, &r->lo, &r->hi);
    r->qm = malloc(sizeof(mge_qmul) * (size_t)(O > 0 ? O : 1));
    if (!r->qm)
        return mge_error_set(err, MGE_ERR_NOMEM, "%s %s: out of memory", name, node);
    for (int64_t o = 0; o < O; o++) {
        double m = xs * (double)q->scale[per_channel ? o : 0] / ys;
        if (!mge_qmul_make(m, &r->qm[o])) {
            free(r->qm);
            r->qm = NULL;
            return mge_error_set(err, MGE_ERR_INVALID,
                                 "%s %s: requantization multiplier %g for channel %lld is not below 1: y_scale "
                                 "too small",
                                 name, node, m, (long long)o);
        }
    }
    return MGE_OK;
}

/* acc: the int64 sum, wrapped to int32 as the definition (see the top). */
static inline int8_t requant_one(const requant *r, int64_t o, int64_t acc)
{
    int32_t a = (int32_t)(uint32_t)(uint64_t)acc;
    return (int8_t)mge_q_clamp(mge_qmul_apply(a, r->qm[o]) + r->y_zero, r->lo, r->hi);
}

static mge_status qconv2d_qs8(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                              mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *x = in[0], *w = in[1], *b = n->nin >= 3 ? in[2] : NULL, *y = out[0];
    ref_conv_geom g;
    mge_status st = mge_ref_conv_geom(ctx, n, x, w, &g, err);
    if (st)
        return st;
    int64_t ex[4] = {g.N, g.C, g.H, g.W}, ew[4] = {g.O, g.C / g.g, g.KH, g.KW}, eb[1] = {g.O};
    int64_t ey[4] = {g.N, g.O, g.OH, g.OW};
    if ((st = ref_check(ctx, n, "x", x, MGE_QS8, 4, ex, err)) ||
        (st = ref_check(ctx, n, "weight", w, MGE_QS8, 4, ew, err)) ||
        (b && (st = ref_check(ctx, n, "bias", b, MGE_QS32, 1, eb, err))) ||
        (st = ref_check(ctx, n, "output", y, MGE_QS8, 4, ey, err)))
        return st;
    requant r;
    if ((st = requant_setup(ctx, n, w, g.O, &r, err)))
        return st;
    const int8_t *xp = x->data, *wp = w->data;
    const int32_t *bp = b ? b->data : NULL;
    int8_t *yp = y->data;
    int64_t cg = g.C / g.g, og = g.O / g.g;
    for (int64_t ni = 0; ni < g.N; ni++)
        for (int64_t o = 0; o < g.O; o++)
            for (int64_t oh = 0; oh < g.OH; oh++)
                for (int64_t ow = 0; ow < g.OW; ow++) {
                    int64_t acc = bp ? bp[o] : 0;
                    for (int64_t c = 0; c < cg; c++) {
                        int64_t ci = (o / og) * cg + c;
                        for (int64_t kh = 0; kh < g.KH; kh++) {
                            int64_t ih = oh * g.s[0] - g.p[0] + kh * g.d[0];
                            if (ih < 0 || ih >= g.H)
                                continue; /* padding: x = x_zero, contributes 0 */
                            for (int64_t kw = 0; kw < g.KW; kw++) {
                                int64_t iw = ow * g.s[1] - g.p[1] + kw * g.d[1];
                                if (iw < 0 || iw >= g.W)
                                    continue;
                                acc += (int64_t)(xp[((ni * g.C + ci) * g.H + ih) * g.W + iw] - r.x_zero) *
                                       wp[((o * cg + c) * g.KH + kh) * g.KW + kw];
                            }
                        }
                    }
                    yp[((ni * g.O + o) * g.OH + oh) * g.OW + ow] = requant_one(&r, o, acc);
                }
    free(r.qm);
    return MGE_OK;
}

static mge_status qlinear_qs8(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                              mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *x = in[0], *w = in[1], *b = n->nin >= 3 ? in[2] : NULL, *y = out[0];
    if (x->ndim < 1 || x->ndim > MGE_MAX_DIMS || w->ndim != 2)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x rank %d, weight rank %d: expected >= 1 and 2",
                             ref_opname(ctx, n), x->ndim, w->ndim);
    int64_t K = x->dims[x->ndim - 1], O = w->dims[0];
    int64_t ew[2] = {O, K}, eb[1] = {O}, ey[MGE_MAX_DIMS];
    memcpy(ey, x->dims, sizeof ey);
    ey[x->ndim - 1] = O;
    mge_status st;
    if ((st = ref_check(ctx, n, "x", x, MGE_QS8, x->ndim, x->dims, err)) ||
        (st = ref_check(ctx, n, "weight", w, MGE_QS8, 2, ew, err)) ||
        (b && (st = ref_check(ctx, n, "bias", b, MGE_QS32, 1, eb, err))) ||
        (st = ref_check(ctx, n, "output", y, MGE_QS8, x->ndim, ey, err)))
        return st;
    requant r;
    if ((st = requant_setup(ctx, n, w, O, &r, err)))
        return st;
    int64_t M = ref_numel(x) / (K > 0 ? K : 1);
    if (K == 0)
        M = ref_numel(y) / (O > 0 ? O : 1);
    const int8_t *xp = x->data, *wp = w->data;
    const int32_t *bp = b ? b->data : NULL;
    int8_t *yp = y->data;
    for (int64_t m = 0; m < M; m++)
        for (int64_t o = 0; o < O; o++) {
            int64_t acc = bp ? bp[o] : 0;
            for (int64_t k = 0; k < K; k++)
                acc += (int64_t)(xp[m * K + k] - r.x_zero) * wp[o * K + k];
            yp[m * O + o] = requant_one(&r, o, acc);
        }
    free(r.qm);
    return MGE_OK;
}

static mge_status qadd_qs8(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                           mge_error *err)
{
    const mge_tensor *a = in[0], *b = in[1];
    mge_status st;
    if ((st = ref_check_dtype(ctx, n, "a", a, MGE_QS8, err)) ||
        (st = ref_check(ctx, n, "b", b, MGE_QS8, a->ndim, a->dims, err)) ||
        (st = ref_check(ctx, n, "output", out[0], MGE_QS8, a->ndim, a->dims, err)))
        return st;
    double xs = mge_node_float(n, MGE_KEY_x_scale, NAN), x2s = mge_node_float(n, MGE_KEY_x2_scale, NAN);
    double ys = mge_node_float(n, MGE_KEY_y_scale, NAN);
    int32_t za = (int32_t)mge_node_int(n, MGE_KEY_x_zero, 0), zb = (int32_t)mge_node_int(n, MGE_KEY_x2_zero, 0);
    int32_t zy = (int32_t)mge_node_int(n, MGE_KEY_y_zero, 0), lo, hi;
    mge_qadd q;
    if (!mge_qadd_make(xs / ys, x2s / ys, &q))
        return mge_error_set(err, MGE_ERR_INVALID,
                             "%s %s: multipliers x_scale/y_scale = %g, x2_scale/y_scale = %g: expected both "
                             "finite, >= 0 and below 2^22",
                             ref_opname(ctx, n), n->name ? n->name : "?", xs / ys, x2s / ys);
    mge_q_act_bounds(mge_node_int(n, MGE_KEY_act, -1), ys, zy, &lo, &hi);
    const int8_t *ap = a->data, *bp = b->data;
    int8_t *yp = out[0]->data;
    for (int64_t i = 0, k = ref_numel(a); i < k; i++)
        yp[i] = (int8_t)mge_q_clamp(mge_qadd_apply(ap[i] - za, bp[i] - zb, &q) + zy, lo, hi);
    return MGE_OK;
}

/* avgpool2d on qs8: the f32 kernel's windows (ref_avg_window), integer sum,
 * mge_q_div_round. A window with no input position (only with pad >=
 * kernel) has no value; it gives 0 (the f32 kernel gives NaN). */
static mge_status avgpool_qs8(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                              mge_error *err)
{
    const mge_tensor *x = in[0];
    ref_pool_geom g;
    mge_status st = ref_pool_attrs(ctx, n, 0, &g, err);
    if (st || (st = ref_check_dtype(ctx, n, "x", x, MGE_QS8, err)))
        return st;
    if (x->ndim != 4)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x has rank %d: expected 4 [N,C,H,W]", ref_opname(ctx, n),
                             x->ndim);
    int incl = (int)mge_node_int(n, MGE_KEY_count_include_pad, 1);
    if (incl && (g.p[0] > 0 || g.p[1] > 0))
        return mge_error_set(err, MGE_ERR_UNSUPPORTED,
                             "avgpool2d %s: avgpool2d on qs8 with padding counted needs a zero point",
                             n->name ? n->name : "?");
    int ceil_mode = (int)mge_node_int(n, MGE_KEY_ceil_mode, 0);
    g.N = x->dims[0], g.C = x->dims[1], g.H = x->dims[2], g.W = x->dims[3];
    g.OH = mge_conv_out_dim(g.H, g.k[0], g.s[0], g.p[0], 1, ceil_mode);
    g.OW = mge_conv_out_dim(g.W, g.k[1], g.s[1], g.p[1], 1, ceil_mode);
    int64_t ey[4] = {g.N, g.C, g.OH, g.OW};
    if ((st = ref_check(ctx, n, "output", out[0], MGE_QS8, 4, ey, err)))
        return st;
    const int8_t *xp = x->data;
    int8_t *yp = out[0]->data;
    for (int64_t nc = 0; nc < g.N * g.C; nc++)
        for (int64_t oh = 0; oh < g.OH; oh++)
            for (int64_t ow = 0; ow < g.OW; ow++) {
                int64_t h0, h1, w0, w1, div = ref_avg_window(&g, oh, ow, incl, &h0, &h1, &w0, &w1);
                int64_t sum = 0;
                for (int64_t ih = h0; ih < h1; ih++)
                    for (int64_t iw = w0; iw < w1; iw++)
                        sum += xp[(nc * g.H + ih) * g.W + iw];
                /* |sum| <= 128 * div; windows are far below 2^24 taps */
                yp[(nc * g.OH + oh) * g.OW + ow] = div > 0 ? (int8_t)mge_q_div_round((int32_t)sum, (int32_t)div) : 0;
            }
    return MGE_OK;
}

static mge_status global_avgpool_qs8(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                     mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *x = in[0];
    mge_status st = ref_check_dtype(ctx, n, "x", x, MGE_QS8, err);
    if (st)
        return st;
    if (x->ndim != 4)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x has rank %d: expected 4 [N,C,H,W]", ref_opname(ctx, n),
                             x->ndim);
    int64_t ey[4] = {x->dims[0], x->dims[1], 1, 1}, S = x->dims[2] * x->dims[3];
    if ((st = ref_check(ctx, n, "output", out[0], MGE_QS8, 4, ey, err)))
        return st;
    if (S >= (1LL << 24))
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: %lld positions: the int32 sum could overflow",
                             ref_opname(ctx, n), (long long)S);
    const int8_t *xp = x->data;
    int8_t *yp = out[0]->data;
    for (int64_t nc = 0; nc < x->dims[0] * x->dims[1]; nc++) {
        int32_t sum = 0;
        for (int64_t j = 0; j < S; j++)
            sum += xp[nc * S + j];
        yp[nc] = S > 0 ? (int8_t)mge_q_div_round(sum, (int32_t)S) : 0;
    }
    return MGE_OK;
}

void mge_ref_register_quant(mge_backend *b)
{
    b->k[MGE_OP_QUANTIZE][MGE_F32].run = quantize_f32;
    b->k[MGE_OP_DEQUANTIZE][MGE_QS8].run = dequantize_qs8;
    b->k[MGE_OP_QCONV2D][MGE_QS8].run = qconv2d_qs8;
    b->k[MGE_OP_QLINEAR][MGE_QS8].run = qlinear_qs8;
    b->k[MGE_OP_QADD][MGE_QS8].run = qadd_qs8;
    b->k[MGE_OP_AVGPOOL2D][MGE_QS8].run = avgpool_qs8;
    b->k[MGE_OP_GLOBAL_AVGPOOL][MGE_QS8].run = global_avgpool_qs8;
}
