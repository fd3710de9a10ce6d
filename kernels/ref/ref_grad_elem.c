/* ref_grad_elem.c — reference kernels of the elementwise and loss gradient
 * ops (ops.def, "gradients"): the activations' grads, dropout_grad, sum_to,
 * maximum_grad/minimum_grad, cross_entropy_grad and mse_grad.
 *
 * Float dtypes (f32, f16, bf16, f64) compute in double. The activation grads
 * read element i of both inputs before writing element i, so the output
 * may be dy's buffer (MGE_OPF_INPLACE).
 *
 * dropout_grad(dy, y): outside training (or p = 0) the identity, as the
 * forward; in training the kept elements are recovered from y != 0 and get
 * dy / (1 - p); p = 1 gives 0. An element that was kept but whose input was
 * exactly 0 has y = 0 and gets gradient 0 instead of dy / (1 - p); that
 * loses nothing after a relu (whose gradient there is 0 anyway) and is a
 * measure-zero event for other inputs. */
#include "ref.h"

#include <math.h>
#include <string.h>

/* ---------------------------------------------------------------- activations */

/* d(loss)/d(x) given g = dy and t = the forward's y or x (ops.def). */
static double gop(int op, double g, double t, double alpha)
{
    switch (op) {
    case MGE_OP_RELU_GRAD: return t > 0 ? g : 0;
    case MGE_OP_RELU6_GRAD: return t > 0 && t < 6 ? g : 0;
    case MGE_OP_LEAKY_RELU_GRAD: return t > 0 ? g : g * alpha;
    case MGE_OP_SIGMOID_GRAD: return g * t * (1 - t);
    case MGE_OP_TANH_GRAD: return g * (1 - t * t);
    case MGE_OP_GELU_GRAD: {
        /* exact (erf) gelu, as the forward: Phi(x) + x phi(x) */
        double cdf = 0.5 * (1 + erf(t / sqrt(2.0)));
        double pdf = exp(-0.5 * t * t) / sqrt(2 * M_PI);
        return g * (cdf + t * pdf);
    }
    case MGE_OP_SILU_GRAD: {
        double s = 1 / (1 + exp(-t));
        return g * s * (1 + t * (1 - s));
    }
    case MGE_OP_HSWISH_GRAD: return t < -3 ? 0 : t <= 3 ? g * (t / 3 + 0.5) : g;
    case MGE_OP_HSIGMOID_GRAD: return t > -3 && t < 3 ? g / 6 : 0;
    case MGE_OP_ABS_GRAD: return t > 0 ? g : t < 0 ? -g : 0;
    }
    return NAN;
}

/* dy, the second input and the output: dtype dt, one shape. */
static mge_status act_check(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                            mge_error *err)
{
    mge_dtype dt = in[0]->dtype;
    mge_status st = ref_check_dtype(ctx, n, "dy", in[0], dt, err);
    if (st || (st = ref_check(ctx, n, "y/x", in[1], dt, in[0]->ndim, in[0]->dims, err)) ||
        (st = ref_check(ctx, n, "output", out[0], dt, in[0]->ndim, in[0]->dims, err)))
        return st;
    if (!mge_dtype_is_float(dt))
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: no reference kernel for %s", ref_opname(ctx, n),
                             mge_dtype_name(dt));
    return MGE_OK;
}

static mge_status act_grad(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                           mge_error *err)
{
    mge_status st = act_check(ctx, n, in, out, err);
    if (st)
        return st;
    mge_dtype dt = in[0]->dtype;
    int64_t cnt = ref_numel(in[0]);
    double alpha = mge_node_float(n, MGE_KEY_alpha, 0.01);
    for (int64_t i = 0; i < cnt; i++)
        ref_st(dt, out[0]->data, i, gop(n->op, ref_ld(dt, in[0]->data, i), ref_ld(dt, in[1]->data, i), alpha));
    return MGE_OK;
}

static mge_status dropout_grad(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                               mge_tensor *const *out, mge_error *err)
{
    mge_status st = act_check(ctx, n, in, out, err);
    if (st)
        return st;
    mge_dtype dt = in[0]->dtype;
    int64_t cnt = ref_numel(in[0]);
    double p = mge_node_float(n, MGE_KEY_p, 0.5);
    if (!(p >= 0 && p <= 1))
        return mge_error_set(err, MGE_ERR_INVALID, "dropout_grad: p=%g: expected a probability in [0, 1]", p);
    if (!ctx->training || p == 0) {
        if (out[0]->data != in[0]->data && cnt > 0)
            memmove(out[0]->data, in[0]->data, (size_t)cnt * mge_dtype_size(dt));
        return MGE_OK;
    }
    double scale = p < 1 ? 1.0 / (1.0 - p) : 0.0;
    for (int64_t i = 0; i < cnt; i++)
        ref_st(dt, out[0]->data, i, ref_ld(dt, in[1]->data, i) != 0 ? ref_ld(dt, in[0]->data, i) * scale : 0.0);
    return MGE_OK;
}

/* ---------------------------------------------------------------- sum_to */

/* sum_to(x, like): for each output element (like's shape, padded to x's
 * rank), the sum over the x elements that broadcast from it. */
static mge_status sum_to(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                         mge_error *err)
{
    const mge_tensor *x = in[0], *like = in[1];
    mge_tensor *y = out[0];
    mge_status st = ref_check_data(ctx, n, "x", x, err);
    if (st || (st = ref_check(ctx, n, "output", y, like->dtype, like->ndim, like->dims, err)))
        return st;
    if (!mge_dtype_is_float(x->dtype) || !mge_dtype_is_float(y->dtype))
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "sum_to: no reference kernel for %s to %s",
                             mge_dtype_name(x->dtype), mge_dtype_name(y->dtype));
    int nd = x->ndim, off = x->ndim - like->ndim;
    /* kept dims (ko: like's dim = x's) and reduced dims (like's dim 1) */
    int64_t kdims[MGE_MAX_DIMS], rdims[MGE_MAX_DIMS], kstr[MGE_MAX_DIMS], rstr[MGE_MAX_DIMS], xs[MGE_MAX_DIMS];
    int nk = 0, nr = 0;
    int good = off >= 0;
    int64_t s = 1;
    for (int i = nd - 1; good && i >= 0; i--) {
        xs[i] = s;
        s *= x->dims[i];
    }
    for (int i = 0; good && i < nd; i++) {
        int64_t ld = i < off ? 1 : like->dims[i - off];
        if (ld == x->dims[i] && ld != 1) {
            kdims[nk] = ld;
            kstr[nk++] = xs[i];
        } else if (ld == 1) {
            rdims[nr] = x->dims[i];
            rstr[nr++] = xs[i];
        } else {
            good = 0;
        }
    }
    if (!good) {
        char bx[96], bl[96];
        return mge_error_set(err, MGE_ERR_SHAPE, "sum_to: like %s does not broadcast to x %s",
                             mge_shape_str(like->dtype, like->ndim, like->dims, bl, sizeof bl),
                             mge_shape_str(x->dtype, x->ndim, x->dims, bx, sizeof bx));
    }
    int64_t ki[MGE_MAX_DIMS] = {0}, ri[MGE_MAX_DIMS];
    int64_t ny = ref_numel(y), o = 0;
    if (ny == 0)
        return MGE_OK;
    int any = 1;
    for (int i = 0; i < nr; i++)
        any &= rdims[i] > 0;
    do {
        int64_t base = 0;
        for (int i = 0; i < nk; i++)
            base += ki[i] * kstr[i];
        double acc = 0;
        if (any) {
            memset(ri, 0, sizeof ri);
            do {
                int64_t at = base;
                for (int i = 0; i < nr; i++)
                    at += ri[i] * rstr[i];
                acc += ref_ld(x->dtype, x->data, at);
            } while (ref_next(nr, rdims, ri));
        }
        ref_st(y->dtype, y->data, o++, acc);
    } while (ref_next(nk, kdims, ki));
    return MGE_OK;
}

/* ---------------------------------------------------------------- maximum/minimum */

/* maximum_grad: a's share w = 1 where a > b (or a is NaN), 1/2 where a == b,
 * else 0; b gets 1 - w. minimum_grad with a < b. */
static mge_status minmax_grad(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                              mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *dy = in[0], *a = in[1], *b = in[2];
    mge_dtype dt = dy->dtype;
    mge_status st = ref_check_dtype(ctx, n, "dy", dy, dt, err);
    if (st || (st = ref_check_dtype(ctx, n, "a", a, dt, err)) || (st = ref_check_dtype(ctx, n, "b", b, dt, err)) ||
        (st = ref_check(ctx, n, "da", out[0], dt, dy->ndim, dy->dims, err)) ||
        (st = ref_check(ctx, n, "db", out[1], dt, dy->ndim, dy->dims, err)))
        return st;
    if (!mge_dtype_is_float(dt))
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: no reference kernel for %s", ref_opname(ctx, n),
                             mge_dtype_name(dt));
    int nd = dy->ndim;
    int64_t sa[MGE_MAX_DIMS], sb[MGE_MAX_DIMS], ta = 1, tb = 1;
    for (int i = nd - 1; i >= 0; i--) {
        int ia = a->ndim - nd + i, ib = b->ndim - nd + i;
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if ((da != 1 && da != dy->dims[i]) || (db != 1 && db != dy->dims[i]) || a->ndim > nd || b->ndim > nd)
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: a and b do not broadcast to dy", ref_opname(ctx, n));
        sa[i] = da == 1 ? 0 : ta;
        sb[i] = db == 1 ? 0 : tb;
        ta *= da;
        tb *= db;
    }
    int64_t cnt = ref_numel(dy), idx[MGE_MAX_DIMS] = {0};
    int mx = n->op == MGE_OP_MAXIMUM_GRAD;
    for (int64_t i = 0; i < cnt; i++) {
        int64_t ia = 0, ib = 0;
        for (int d = 0; d < nd; d++) {
            ia += idx[d] * sa[d];
            ib += idx[d] * sb[d];
        }
        double u = ref_ld(dt, a->data, ia), v = ref_ld(dt, b->data, ib), g = ref_ld(dt, dy->data, i);
        double w = (mx ? u > v : u < v) || isnan(u) ? 1 : u == v ? 0.5 : 0;
        ref_st(dt, out[0]->data, i, g * w);
        ref_st(dt, out[1]->data, i, g * (1 - w));
        ref_next(nd, dy->dims, idx);
    }
    return MGE_OK;
}

/* ---------------------------------------------------------------- losses */

/* The loss's gradient: one f32. */
static mge_status scalar_dy(const mge_kctx *ctx, const mge_node *n, const mge_tensor *dy, double *g, mge_error *err)
{
    mge_status st = ref_check_dtype(ctx, n, "dy", dy, MGE_F32, err);
    if (st)
        return st;
    if (ref_numel(dy) != 1)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: dy has %lld elements: expected the loss's scalar gradient",
                             ref_opname(ctx, n), (long long)ref_numel(dy));
    *g = ((const float *)dy->data)[0];
    return MGE_OK;
}

/* (softmax(logits) - (1 - eps) onehot(label) - eps / C) / count * dy, with
 * the forward's layouts: logits [N,C] with labels [N], or [N,C,d...] with
 * [N,d...]; zero at positions labelled ignore_index, count the others. */
static mge_status ce_grad(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                          mge_error *err)
{
    const mge_tensor *x = in[1], *lab = in[2];
    mge_tensor *y = out[0];
    double g;
    mge_dtype dt = x->dtype;
    mge_status st = scalar_dy(ctx, n, in[0], &g, err);
    if (st || (st = ref_check_data(ctx, n, "logits", x, err)) || (st = ref_check_data(ctx, n, "label", lab, err)) ||
        (st = ref_check(ctx, n, "output", y, dt, x->ndim, x->dims, err)))
        return st;
    /* labels checked first, so a bad one leaves the output untouched */
    int64_t N = 0, C = 0, S = 0, cnt = 0, ignore = mge_node_int(n, MGE_KEY_ignore_index, -100);
    double eps = mge_node_float(n, MGE_KEY_label_smoothing, 0);
    if ((st = ref_ce_check(ctx, n, x, lab, ignore, &N, &C, &S, &cnt, err)))
        return st;
    double scale = cnt != 0 ? g / (double)cnt : 0;
    for (int64_t i = 0; i < N; i++)
        for (int64_t s = 0; s < S; s++) {
            int64_t at = i * S + s, c = ref_ild(lab->dtype, lab->data, at);
            int64_t row = i * C * S + s;
            if (c == ignore) {
                for (int64_t j = 0; j < C; j++)
                    ref_st(dt, y->data, row + j * S, 0);
                continue;
            }
            double m, sum;
            ref_ce_row(dt, x->data, row, C, S, &m, &sum);
            for (int64_t j = 0; j < C; j++) {
                double p = exp(ref_ld(dt, x->data, row + j * S) - m) / sum;
                ref_st(dt, y->data, row + j * S, (p - (1 - eps) * (j == c) - eps / (double)C) * scale);
            }
        }
    return MGE_OK;
}

static mge_status mse_grad(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                           mge_error *err)
{
    const mge_tensor *a = in[1], *b = in[2];
    double g;
    mge_dtype dt = a->dtype;
    mge_status st = scalar_dy(ctx, n, in[0], &g, err);
    if (st || (st = ref_check_data(ctx, n, "a", a, err)) ||
        (st = ref_check(ctx, n, "b", b, dt, a->ndim, a->dims, err)) ||
        (st = ref_check(ctx, n, "output", out[0], dt, a->ndim, a->dims, err)))
        return st;
    if (!mge_dtype_is_float(dt))
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "mse_grad: no reference kernel for %s", mge_dtype_name(dt));
    int64_t cnt = ref_numel(a);
    double scale = cnt ? 2.0 * g / (double)cnt : 0;
    for (int64_t i = 0; i < cnt; i++)
        ref_st(dt, out[0]->data, i, (ref_ld(dt, a->data, i) - ref_ld(dt, b->data, i)) * scale);
    return MGE_OK;
}

void mge_ref_register_grad_elem(mge_backend *b)
{
    static const int acts[] = {MGE_OP_RELU_GRAD,   MGE_OP_RELU6_GRAD,  MGE_OP_LEAKY_RELU_GRAD, MGE_OP_SIGMOID_GRAD,
                               MGE_OP_TANH_GRAD,   MGE_OP_GELU_GRAD,   MGE_OP_SILU_GRAD,       MGE_OP_HSWISH_GRAD,
                               MGE_OP_HSIGMOID_GRAD, MGE_OP_ABS_GRAD};
    REF_EACH_FLOAT(dt) {
        for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++)
            b->k[acts[i]][dt].run = act_grad;
        b->k[MGE_OP_DROPOUT_GRAD][dt].run = dropout_grad;
        b->k[MGE_OP_SUM_TO][dt].run = sum_to;
        b->k[MGE_OP_MAXIMUM_GRAD][dt].run = minmax_grad;
        b->k[MGE_OP_MINIMUM_GRAD][dt].run = minmax_grad;
        b->k[MGE_OP_MSE_GRAD][dt].run = mse_grad;
        b->k[MGE_OP_CROSS_ENTROPY_GRAD][dt].run = ce_grad;
    }
}
