/* ref_optim.c — reference kernels of the optimizer ops (PyTorch's
 * single-tensor SGD, Adam/AdamW and clip_grad_norm_).
 *
 * Per element the rules run in double on the f32 values and round once per
 * stored tensor (param, momentum buffer, moments), as PyTorch rounds each
 * stored tensor; later uses of a stored value read the rounded one, as
 * PyTorch reads its tensors. The scalars (bias corrections, step size) are
 * doubles as in PyTorch, where they are Python floats.
 *
 * Sums of squares (sumsq, and the update norm the update ops output) follow
 * one fixed order, shared with the cpu kernels so both give the same bits:
 * each tensor is cut into blocks of OPTIM_BLOCK elements; in a block, element
 * j goes to lane j % 8 of eight double accumulators, combined pairwise
 * ((0+1)+(2+3))+((4+5)+(6+7)); blocks, then tensors, add up in order. */
#include "ref.h"

#include <math.h>

#define OPTIM_BLOCK 8192

static double lanes_sum(const double *a)
{
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

/* hyper {lr, step} and scale (1 when absent) as doubles, checked. */
static mge_status read_hyper(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, int ih, double *lr,
                             double *step, double *sc, mge_error *err)
{
    static const int64_t two = 2;
    mge_status s;
    if ((s = ref_check(ctx, n, "hyper", in[ih], MGE_F32, 1, &two, err)))
        return s;
    const float *h = in[ih]->data;
    *lr = h[0];
    *step = h[1];
    if (!(isfinite(*lr) && *lr >= 0))
        return mge_error_set(err, MGE_ERR_INVALID, "%s: hyper lr=%g: expected a finite lr >= 0", ref_opname(ctx, n),
                             *lr);
    if (!(*step >= 1 && *step <= 16777216.0 && *step == floor(*step)))
        return mge_error_set(err, MGE_ERR_INVALID,
                             "%s: hyper step=%g: expected a whole number >= 1 (the 1-based update count; set it "
                             "with mge_optim_set_hyper)",
                             ref_opname(ctx, n), *step);
    *sc = 1.0;
    if (n->nin > ih + 1) {
        if ((s = ref_check(ctx, n, "scale", in[ih + 1], MGE_F32, 0, NULL, err)))
            return s;
        *sc = ((const float *)in[ih + 1]->data)[0];
    }
    return MGE_OK;
}

static mge_status sgd_f32(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                          mge_error *err)
{
    mge_tensor *pt = in[0];
    mge_status s;
    if ((s = ref_check_dtype(ctx, n, "param", pt, MGE_F32, err)) ||
        (s = ref_check(ctx, n, "grad", in[1], MGE_F32, pt->ndim, pt->dims, err)) ||
        (s = ref_check(ctx, n, "output", out[0], MGE_F32, 0, NULL, err)))
        return s;
    double mom = mge_node_float(n, MGE_KEY_momentum, 0), damp = mge_node_float(n, MGE_KEY_dampening, 0);
    double wd = mge_node_float(n, MGE_KEY_weight_decay, 0);
    int nesterov = (int)mge_node_int(n, MGE_KEY_nesterov, 0);
    if (mom != 0 && (s = ref_check(ctx, n, "momentum_buffer", in[2], MGE_F32, pt->ndim, pt->dims, err)))
        return s;
    double lr, step, sc;
    if ((s = read_hyper(ctx, n, in, 3, &lr, &step, &sc, err)))
        return s;
    float *p = pt->data, *buf = mom != 0 ? in[2]->data : NULL;
    const float *g = in[1]->data;
    int first = step == 1;
    double c1 = 1 - damp, total = 0;
    int64_t numel = ref_numel(pt);
    for (int64_t b0 = 0; b0 < numel; b0 += OPTIM_BLOCK) {
        double acc[8] = {0};
        int64_t len = numel - b0 < OPTIM_BLOCK ? numel - b0 : OPTIM_BLOCK;
        for (int64_t j = 0; j < len; j++) {
            int64_t i = b0 + j;
            double pv = p[i], gr = (double)g[i] * sc;
            if (wd != 0)
                gr = gr + wd * pv;
            if (mom != 0) {
                /* the first step copies the gradient, as PyTorch's buffer
                 * starts as a clone of it */
                float bf = (float)(first ? gr : mom * (double)buf[i] + c1 * gr);
                buf[i] = bf;
                gr = nesterov ? gr + mom * (double)bf : (double)bf;
            }
            float pn = (float)(pv - lr * gr);
            double d = (double)pn - pv;
            p[i] = pn;
            acc[j % 8] += d * d;
        }
        total += lanes_sum(acc);
    }
    *(float *)out[0]->data = (float)total;
    return MGE_OK;
}

static mge_status adam_f32(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                           mge_error *err)
{
    mge_tensor *pt = in[0];
    mge_status s;
    if ((s = ref_check_dtype(ctx, n, "param", pt, MGE_F32, err)) ||
        (s = ref_check(ctx, n, "grad", in[1], MGE_F32, pt->ndim, pt->dims, err)) ||
        (s = ref_check(ctx, n, "exp_avg", in[2], MGE_F32, pt->ndim, pt->dims, err)) ||
        (s = ref_check(ctx, n, "exp_avg_sq", in[3], MGE_F32, pt->ndim, pt->dims, err)) ||
        (s = ref_check(ctx, n, "output", out[0], MGE_F32, 0, NULL, err)))
        return s;
    double lr, step, sc;
    if ((s = read_hyper(ctx, n, in, 4, &lr, &step, &sc, err)))
        return s;
    double b1 = mge_node_float(n, MGE_KEY_beta1, 0.9), b2 = mge_node_float(n, MGE_KEY_beta2, 0.999);
    double eps = mge_node_float(n, MGE_KEY_eps, 1e-8), wd = mge_node_float(n, MGE_KEY_weight_decay, 0);
    int decoupled = (int)mge_node_int(n, MGE_KEY_decoupled, 0);
    /* PyTorch: decoupled decay multiplies the param by 1 - lr*wd first;
     * Adam adds wd*param to the gradient. */
    double decay = decoupled ? 1 - lr * wd : 1, wdg = decoupled ? 0 : wd;
    double w1 = 1 - b1, c2 = 1 - b2;
    double bc1 = 1 - pow(b1, step), bc2s = sqrt(1 - pow(b2, step)), step_size = lr / bc1;
    float *p = pt->data, *m = in[2]->data, *v = in[3]->data;
    const float *g = in[1]->data;
    double total = 0;
    int64_t numel = ref_numel(pt);
    for (int64_t b0 = 0; b0 < numel; b0 += OPTIM_BLOCK) {
        double acc[8] = {0};
        int64_t len = numel - b0 < OPTIM_BLOCK ? numel - b0 : OPTIM_BLOCK;
        for (int64_t j = 0; j < len; j++) {
            int64_t i = b0 + j;
            double p0 = p[i], gr = (double)g[i] * sc;
            if (wdg != 0)
                gr = gr + wdg * p0;
            double pv = p0 * decay, mv = m[i];
            /* m.lerp_(g, 1 - beta1), in torch.lerp's two forms */
            float mf = (float)(w1 < 0.5 ? mv + w1 * (gr - mv) : gr - (gr - mv) * b1);
            float vf = (float)(b2 * (double)v[i] + c2 * (gr * gr));
            m[i] = mf;
            v[i] = vf;
            double denom = sqrt((double)vf) / bc2s + eps;
            float pn = (float)(pv - step_size * ((double)mf / denom));
            double d = (double)pn - p0;
            p[i] = pn;
            acc[j % 8] += d * d;
        }
        total += lanes_sum(acc);
    }
    *(float *)out[0]->data = (float)total;
    return MGE_OK;
}

/* Input k of sumsq and clip_coef: a float tensor holding its data. */
static mge_status float_input(const mge_kctx *ctx, const mge_node *n, int k, const mge_tensor *t, mge_error *err)
{
    if (!mge_dtype_is_float(t->dtype))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: input %d is %s: expected a float dtype", ref_opname(ctx, n), k,
                             mge_dtype_name(t->dtype));
    return ref_check_data(ctx, n, "input", t, err);
}

static mge_status sumsq_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                              mge_error *err)
{
    mge_status s;
    if ((s = ref_check(ctx, n, "output", out[0], MGE_F32, 0, NULL, err)))
        return s;
    double total = 0;
    for (int k = 0; k < n->nin; k++) {
        const mge_tensor *t = in[k];
        if ((s = float_input(ctx, n, k, t, err)))
            return s;
        int64_t numel = ref_numel(t);
        for (int64_t b0 = 0; b0 < numel; b0 += OPTIM_BLOCK) {
            double acc[8] = {0};
            int64_t len = numel - b0 < OPTIM_BLOCK ? numel - b0 : OPTIM_BLOCK;
            for (int64_t j = 0; j < len; j++) {
                double x = ref_ld(t->dtype, t->data, b0 + j);
                acc[j % 8] += x * x;
            }
            total += lanes_sum(acc);
        }
    }
    *(float *)out[0]->data = (float)total;
    return MGE_OK;
}

/* min(1, max_norm / (sqrt(sum) + 1e-6)); a non-finite norm (inf or NaN
 * gradients) gives NaN, so the updates it scales turn NaN and the NaN check
 * of the training loop stops there. PyTorch 1.13 (error_if_nonfinite=False)
 * gives 0 for an infinite norm, which zeroes finite gradients and still
 * turns the infinite ones into NaN. */
static mge_status clip_coef_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                  mge_tensor *const *out, mge_error *err)
{
    mge_status s;
    if ((s = ref_check(ctx, n, "output", out[0], MGE_F32, 0, NULL, err)))
        return s;
    double total = 0, mx = mge_node_float(n, MGE_KEY_max_norm, 1);
    for (int k = 0; k < n->nin; k++) {
        const mge_tensor *t = in[k];
        if ((s = float_input(ctx, n, k, t, err)))
            return s;
        int64_t numel = ref_numel(t);
        for (int64_t i = 0; i < numel; i++)
            total += ref_ld(t->dtype, t->data, i);
    }
    double norm = sqrt(total), coef;
    if (!isfinite(norm))
        coef = NAN;
    else {
        coef = mx / (norm + 1e-6);
        if (coef > 1)
            coef = 1;
    }
    *(float *)out[0]->data = (float)coef;
    return MGE_OK;
}

void mge_ref_register_optim(mge_backend *b)
{
    b->k[MGE_OP_SGD][MGE_F32].run = sgd_f32;
    b->k[MGE_OP_ADAM][MGE_F32].run = adam_f32;
    REF_EACH_FLOAT(dt) {
        b->k[MGE_OP_SUMSQ][dt].run = sumsq_float;
        b->k[MGE_OP_CLIP_COEF][dt].run = clip_coef_float;
    }
}
