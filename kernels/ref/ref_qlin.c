/* ref_qlin.c — the oracle of the ONNX linear quantization ops (lib/ops.def,
 * group quant-onnx): quantize_linear, dequantize_linear, requantize,
 * matmul_integer and conv_integer (the cpu backend runs the first three as
 * they are; kernels/cpu/cpu_qlin.c has its own matmul_integer and
 * conv_integer).
 *
 * The arithmetic follows ONNX's definitions (and its reference
 * implementation where they leave the precision open):
 *   quantize_linear: x / scale rounded to x's dtype (f32 for f32, f16 for f16:
 *     one division in f32 then one rounding to f16 equals the f16 division),
 *     in double for i32 x; then rint (half to even), + zero, saturated.
 *   dequantize_linear: ((float)x - (float)zero) * scale in f32.
 *   requantize: rint((double)acc * mult) + zero, saturated (the reference
 *     multiplies the int32 accumulator by the float scale ratio in double).
 *   matmul_integer, conv_integer: products of int32 differences summed in
 *     int64 and kept to the low 32 bits: ONNX's int32 sum, wrapping, in any
 *     order.
 * Every scale, zero point and operand is checked against the shapes before
 * it is read. */
#include "ref.h"

#include <stdlib.h>

/* Where scale and zero elements sit for x viewed as [outer, A, inner] around
 * axis: per tensor (layout 0), per axis (1) or blocked by block (2, nb blocks). */
typedef struct qmap {
    int layout;
    int64_t outer, A, inner, block, nb;
    int zero_one;   /* the zero point has one element (requantize's per-axis mult may take one) */
} qmap;

static mge_status qmap_setup(const mge_kctx *ctx, const mge_node *n, const mge_tensor *x, const mge_tensor *s,
                             const mge_tensor *z, qmap *m, mge_error *err)
{
    const char *op = ref_opname(ctx, n);
    int64_t block = mge_node_int(n, MGE_KEY_block, 0), ns = ref_numel(s);
    memset(m, 0, sizeof *m);
    m->outer = m->A = m->inner = 1;
    m->block = block;
    if (ns == 1 && block == 0) {
        m->layout = 0;
        m->inner = ref_numel(x);
    } else {
        int ax = mge_axis(mge_node_int(n, MGE_KEY_axis, 1), x->ndim);
        if (ax < 0 || block < 0)
            return mge_error_set(err, MGE_ERR_INVALID, "%s: axis or block out of range for x of rank %d", op,
                                 x->ndim);
        for (int i = 0; i < ax; i++)
            m->outer *= x->dims[i];
        m->A = x->dims[ax];
        for (int i = ax + 1; i < x->ndim; i++)
            m->inner *= x->dims[i];
        m->layout = block ? 2 : 1;
        m->nb = block ? (m->A + block - 1) / block : 0;
        int64_t want = block ? m->outer * m->nb * m->inner : m->A;
        if (ns != want)
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: the scale has %lld elements: expected %lld", op,
                                 (long long)ns, (long long)want);
    }
    if (z) {
        int64_t nz = ref_numel(z);
        m->zero_one = nz == 1;
        if (nz != ns && !(nz == 1 && (ns == 1 || n->op == MGE_OP_REQUANTIZE)))
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: the zero point has %lld elements, the scale %lld", op,
                                 (long long)nz, (long long)ns);
    }
    return MGE_OK;
}

/* The scale index of x's element (o, a, i). */
static inline int64_t qmap_at(const qmap *m, int64_t o, int64_t a, int64_t i)
{
    switch (m->layout) {
    case 0: return 0;
    case 1: return a;
    default: return (o * m->nb + a / m->block) * m->inner + i;
    }
}

/* The range of a quantized output dtype; 0 for a dtype that is none (the
 * place int16 and uint16 join). */
static int qrange(mge_dtype dt, double *lo, double *hi)
{
    switch (dt) {
    case MGE_U8: *lo = 0, *hi = 255; return 1;
    case MGE_I8: *lo = -128, *hi = 127; return 1;
    default: return 0;
    }
}

/* rint(q) + zero saturated to [lo, hi]; NaN gives lo. */
static inline int64_t qsat(double q, double zero, double lo, double hi)
{
    if (q != q)
        return (int64_t)lo;
    double v = rint(q) + zero;
    return (int64_t)(v < lo ? lo : v > hi ? hi : v);
}

/* f rounded to dt (f16 or bf16) and back */
static inline double round_to(mge_dtype dt, float f)
{
    return dt == MGE_F16 ? mge_f16_to_f32(mge_f32_to_f16(f)) : mge_bf16_to_f32(mge_f32_to_bf16(f));
}

/* The checks all three scaled ops share: x, the scale and the zero point
 * hold their data, the output has x's shape in dtype odt. */
static mge_status check_scaled(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                               int nin, mge_dtype odt, mge_error *err)
{
    mge_status st;
    if ((st = ref_check_data(ctx, n, "x", in[0], err)) || (st = ref_check_data(ctx, n, "the scale", in[1], err)) ||
        (nin > 2 && (st = ref_check_data(ctx, n, "the zero point", in[2], err))))
        return st;
    return ref_check(ctx, n, "output", out[0], odt, in[0]->ndim, in[0]->dims, err);
}

static mge_status quantize_linear(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                  mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *x = in[0], *s = in[1], *z = n->nin > 2 ? in[2] : NULL;
    mge_dtype odt = out[0]->dtype;
    mge_status st;
    qmap m;
    double lo, hi;
    if (!qrange(odt, &lo, &hi))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: the output is %s: expected u8 or i8", ref_opname(ctx, n),
                             mge_dtype_name(odt));
    if ((st = check_scaled(ctx, n, in, out, n->nin, odt, err)) || (st = qmap_setup(ctx, n, x, s, z, &m, err)))
        return st;
    mge_dtype sdt = x->dtype == MGE_I32 ? MGE_F32 : x->dtype;
    if (s->dtype != sdt || (sdt != MGE_F32 && sdt != MGE_F16 && sdt != MGE_BF16))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is %s and the scale %s", ref_opname(ctx, n),
                             mge_dtype_name(x->dtype), mge_dtype_name(s->dtype));
    if (z && z->dtype != odt)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: the zero point is %s, the output %s", ref_opname(ctx, n),
                             mge_dtype_name(z->dtype), mge_dtype_name(odt));
    for (int64_t o = 0, k = 0; o < m.outer; o++)
        for (int64_t a = 0; a < m.A; a++)
            for (int64_t i = 0; i < m.inner; i++, k++) {
                int64_t si = qmap_at(&m, o, a, i);
                double zero = z ? (double)ref_ild(z->dtype, z->data, m.zero_one ? 0 : si) : 0, q;
                if (x->dtype == MGE_I32)
                    q = (double)ref_ild(MGE_I32, x->data, k) / (double)((const float *)s->data)[si];
                else if (x->dtype == MGE_F32)
                    q = ((const float *)x->data)[k] / ((const float *)s->data)[si];
                else /* f16, bf16: the quotient rounded to x's dtype */
                    q = round_to(x->dtype, (float)ref_ld(x->dtype, x->data, k) / (float)ref_ld(s->dtype, s->data, si));
                ref_ist(odt, out[0]->data, k, qsat(q, zero, lo, hi));
            }
    return MGE_OK;
}

static mge_status requantize(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                             mge_error *err)
{
    const mge_tensor *x = in[0], *s = in[1], *z = n->nin > 2 ? in[2] : NULL;
    mge_dtype odt = out[0]->dtype;
    mge_status st;
    qmap m;
    double lo, hi;
    if (!qrange(odt, &lo, &hi))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: the output is %s: expected u8 or i8", ref_opname(ctx, n),
                             mge_dtype_name(odt));
    if ((st = ref_check_dtype(ctx, n, "x", x, MGE_I32, err)) ||
        (st = ref_check_dtype(ctx, n, "the multiplier", s, MGE_F32, err)) ||
        (st = check_scaled(ctx, n, in, out, n->nin, odt, err)) || (st = qmap_setup(ctx, n, x, s, z, &m, err)))
        return st;
    const int32_t *xp = x->data;
    for (int64_t o = 0, k = 0; o < m.outer; o++)
        for (int64_t a = 0; a < m.A; a++)
            for (int64_t i = 0; i < m.inner; i++, k++) {
                int64_t si = qmap_at(&m, o, a, i);
                double zero = z ? (double)ref_ild(z->dtype, z->data, m.zero_one ? 0 : si) : 0;
                ref_ist(odt, out[0]->data, k, qsat((double)xp[k] * (double)((const float *)s->data)[si], zero, lo, hi));
            }
    return MGE_OK;
}

static mge_status dequantize_linear(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                    mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *x = in[0], *s = in[1], *z = n->nin > 2 ? in[2] : NULL;
    mge_status st;
    qmap m;
    if ((st = check_scaled(ctx, n, in, out, n->nin, s->dtype, err)) || (st = qmap_setup(ctx, n, x, s, z, &m, err)))
        return st;
    if (z && z->dtype != x->dtype)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: the zero point is %s, x %s", ref_opname(ctx, n),
                             mge_dtype_name(z->dtype), mge_dtype_name(x->dtype));
    for (int64_t o = 0, k = 0; o < m.outer; o++)
        for (int64_t a = 0; a < m.A; a++)
            for (int64_t i = 0; i < m.inner; i++, k++) {
                int64_t si = qmap_at(&m, o, a, i);
                float zero = z ? (float)ref_ild(z->dtype, z->data, m.zero_one ? 0 : si) : 0.0f;
                float d = (float)ref_ild(x->dtype, x->data, k) - zero;
                ref_st(s->dtype, out[0]->data, k, (double)(d * (float)ref_ld(s->dtype, s->data, si)));
            }
    return MGE_OK;
}

/* A zero point of an integer op: one element, or per row / column / channel
 * (len elements); its value at j. */
static mge_status int_zero(const mge_kctx *ctx, const mge_node *n, const char *what, const mge_tensor *z,
                           mge_dtype dt, int64_t len, mge_error *err)
{
    mge_status st;
    if ((st = ref_check_dtype(ctx, n, what, z, dt, err)))
        return st;
    int64_t k = ref_numel(z);
    if (k != 1 && k != len)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: %s has %lld elements: expected 1 or %lld", ref_opname(ctx, n),
                             what, (long long)k, (long long)len);
    return MGE_OK;
}

static inline int32_t zero_at(const mge_tensor *z, int64_t j)
{
    if (!z)
        return 0;
    return (int32_t)ref_ild(z->dtype, z->data, ref_numel(z) == 1 ? 0 : j);
}

static mge_status matmul_integer(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                 mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *a = in[0], *b = in[1], *za = n->nin > 2 ? in[2] : NULL, *zb = n->nin > 3 ? in[3] : NULL;
    mge_tensor *y = out[0];
    mge_status st;
    if ((st = ref_check_data(ctx, n, "a", a, err)) || (st = ref_check_data(ctx, n, "b", b, err)))
        return st;
    if (a->ndim < 1 || b->ndim < 1 || y->ndim < 0)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: a and b need ranks >= 1", ref_opname(ctx, n));
    int64_t K = a->dims[a->ndim - 1], M = a->ndim > 1 ? a->dims[a->ndim - 2] : 1;
    int64_t N = b->ndim > 1 ? b->dims[b->ndim - 1] : 1, Kb = b->ndim > 1 ? b->dims[b->ndim - 2] : b->dims[0];
    if (K != Kb)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: inner dims %lld and %lld differ", ref_opname(ctx, n),
                             (long long)K, (long long)Kb);
    if ((za && (st = int_zero(ctx, n, "a_zero", za, a->dtype, M, err))) ||
        (zb && (st = int_zero(ctx, n, "b_zero", zb, b->dtype, N, err))))
        return st;
    /* the batch dims: y's leading ones, broadcast from a's and b's */
    int ya = a->ndim > 1, yb = b->ndim > 1, nbd = y->ndim - ya - yb;
    int abd = a->ndim > 2 ? a->ndim - 2 : 0, bbd = b->ndim > 2 ? b->ndim - 2 : 0;
    if (nbd < 0 || nbd < abd || nbd < bbd || y->dtype != MGE_I32 || (ya && y->dims[nbd] != M) ||
        (yb && y->dims[y->ndim - 1] != N))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: the output's shape does not fit a and b", ref_opname(ctx, n));
    int64_t sa[MGE_MAX_DIMS] = {0}, sb[MGE_MAX_DIMS] = {0}, nbatch = 1, pa = M * K, pb = K * N;
    for (int d = nbd - 1; d >= 0; d--) {
        int da = d - (nbd - abd), db = d - (nbd - bbd);
        int64_t ea = da >= 0 ? a->dims[da] : 1, eb = db >= 0 ? b->dims[db] : 1;
        if ((ea != 1 && ea != y->dims[d]) || (eb != 1 && eb != y->dims[d]))
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: batch dim %d does not broadcast", ref_opname(ctx, n), d);
        sa[d] = ea == 1 ? 0 : pa;
        sb[d] = eb == 1 ? 0 : pb;
        pa *= ea;
        pb *= eb;
        nbatch *= y->dims[d];
    }
    if ((st = ref_check(ctx, n, "output", y, MGE_I32, y->ndim, y->dims, err)))
        return st;
    int64_t idx[MGE_MAX_DIMS] = {0};
    int32_t *yp = y->data;
    for (int64_t t = 0; t < nbatch; t++) {
        int64_t oa = 0, ob = 0;
        for (int d = 0; d < nbd; d++)
            oa += idx[d] * sa[d], ob += idx[d] * sb[d];
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                int64_t acc = 0;
                int32_t zai = zero_at(za, i), zbj = zero_at(zb, j);
                for (int64_t k = 0; k < K; k++)
                    acc += (int64_t)((int32_t)ref_ild(a->dtype, a->data, oa + i * K + k) - zai) *
                           ((int32_t)ref_ild(b->dtype, b->data, ob + k * N + j) - zbj);
                yp[(t * M + i) * N + j] = (int32_t)(uint32_t)(uint64_t)acc;
            }
        ref_next(nbd, y->dims, idx);
    }
    return MGE_OK;
}

static mge_status conv_integer(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                               mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *x = in[0], *w = in[1], *zx = n->nin > 2 ? in[2] : NULL, *zw = n->nin > 3 ? in[3] : NULL;
    mge_tensor *y = out[0];
    mge_status st;
    if ((st = ref_check_data(ctx, n, "x", x, err)) || (st = ref_check_data(ctx, n, "the weight", w, err)))
        return st;
    if (x->ndim != 4 || w->ndim != 4)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x and the weight must be 4-D", ref_opname(ctx, n));
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
    int64_t O = w->dims[0], Cg = w->dims[1], kh = w->dims[2], kw = w->dims[3];
    int64_t g = mge_node_int(n, MGE_KEY_groups, 1);
    int64_t sh = mge_node_ints(n, MGE_KEY_stride, 0, 1), sw = mge_node_ints(n, MGE_KEY_stride, 1, sh);
    int64_t dh = mge_node_ints(n, MGE_KEY_dilation, 0, 1), dw = mge_node_ints(n, MGE_KEY_dilation, 1, dh);
    const mge_attr *pa = mge_node_attr(n, MGE_KEY_pad);
    int64_t pt = pa ? pa->i[0] : 0, pl = pa && pa->n > 1 ? pa->i[1] : pt;
    if (g < 1 || C % g || O % g || Cg != C / g || sh < 1 || sw < 1 || dh < 1 || dw < 1)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x, weight and groups do not fit", ref_opname(ctx, n));
    if ((zx && (st = int_zero(ctx, n, "x_zero", zx, x->dtype, 1, err))) ||
        (zw && (st = int_zero(ctx, n, "w_zero", zw, w->dtype, O, err))))
        return st;
    if (y->ndim != 4 || y->dims[0] != N || y->dims[1] != O)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: the output's shape does not fit", ref_opname(ctx, n));
    if ((st = ref_check(ctx, n, "output", y, MGE_I32, 4, y->dims, err)))
        return st;
    int64_t OH = y->dims[2], OW = y->dims[3], Og = O / g;
    int32_t xz = zero_at(zx, 0), *yp = y->data;
    for (int64_t b = 0; b < N; b++)
        for (int64_t o = 0; o < O; o++) {
            int32_t wz = zero_at(zw, o);
            int64_t gi = o / Og;
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    int64_t acc = 0;
                    for (int64_t c = 0; c < Cg; c++)
                        for (int64_t i = 0; i < kh; i++) {
                            int64_t ih = oh * sh - pt + i * dh;
                            if (ih < 0 || ih >= H)
                                continue;   /* a padded tap: x_zero - x_zero */
                            for (int64_t j = 0; j < kw; j++) {
                                int64_t iw = ow * sw - pl + j * dw;
                                if (iw < 0 || iw >= W)
                                    continue;
                                int32_t xv = (int32_t)ref_ild(x->dtype, x->data,
                                                              ((b * C + gi * Cg + c) * H + ih) * W + iw);
                                int32_t wv = (int32_t)ref_ild(w->dtype, w->data, ((o * Cg + c) * kh + i) * kw + j);
                                acc += (int64_t)(xv - xz) * (wv - wz);
                            }
                        }
                    yp[((b * O + o) * OH + oh) * OW + ow] = (int32_t)(uint32_t)(uint64_t)acc;
                }
        }
    return MGE_OK;
}

void mge_ref_register_qlin(mge_backend *b)
{
    static const mge_dtype qx[] = {MGE_F32, MGE_F16, MGE_BF16, MGE_I32};
    for (size_t i = 0; i < sizeof qx / sizeof qx[0]; i++)
        b->k[MGE_OP_QUANTIZE_LINEAR][qx[i]].run = quantize_linear;
    static const mge_dtype dx[] = {MGE_U8, MGE_I8, MGE_I32};
    for (size_t i = 0; i < sizeof dx / sizeof dx[0]; i++)
        b->k[MGE_OP_DEQUANTIZE_LINEAR][dx[i]].run = dequantize_linear;
    b->k[MGE_OP_REQUANTIZE][MGE_I32].run = requantize;
    b->k[MGE_OP_MATMUL_INTEGER][MGE_U8].run = matmul_integer;
    b->k[MGE_OP_MATMUL_INTEGER][MGE_I8].run = matmul_integer;
    b->k[MGE_OP_CONV_INTEGER][MGE_U8].run = conv_integer;
    b->k[MGE_OP_CONV_INTEGER][MGE_I8].run = conv_integer;
}
