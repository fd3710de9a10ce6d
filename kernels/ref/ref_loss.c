/* ref_loss.c — cross_entropy(logits, integer labels) and mse, each the
 * mean as a scalar f32 (PyTorch's reduction='mean'). cross_entropy takes
 * logits [N,C] with labels [N], or [N,C,d...] with labels [N,d...] (class
 * along dim 1, as PyTorch); positions labelled ignore_index are left out
 * of the sum and the count; label_smoothing eps mixes in the uniform
 * target: (1 - eps) * -log p[label] + eps / C * sum_j -log p[j]. Float
 * inputs of any float dtype; the loss is always f32 (op_loss's rule). */
#include "ref.h"

#include <math.h>

/* The output: one f32 (rank 0 or any shape of one element). */
static mge_status scalar_out(const mge_kctx *ctx, const mge_node *n, const mge_tensor *y, mge_error *err)
{
    mge_status st = ref_check_dtype(ctx, n, "output", y, MGE_F32, err);
    if (st)
        return st;
    if (ref_numel(y) != 1)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: output has %lld elements: expected a scalar", ref_opname(ctx, n),
                             (long long)ref_numel(y));
    return MGE_OK;
}

static mge_status cross_entropy_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                    mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *x = in[0], *lab = in[1];
    mge_dtype dt = x->dtype;
    mge_status st = ref_check_data(ctx, n, "logits", x, err);
    if (st || (st = ref_check_data(ctx, n, "label", lab, err)) || (st = scalar_out(ctx, n, out[0], err)))
        return st;
    int64_t N = 0, C = 0, S = 0, cnt = 0, ignore = mge_node_int(n, MGE_KEY_ignore_index, -100);
    double eps = mge_node_float(n, MGE_KEY_label_smoothing, 0);
    if ((st = ref_ce_check(ctx, n, x, lab, ignore, &N, &C, &S, &cnt, err)))
        return st;
    const void *xp = x->data;
    double total = 0;
    for (int64_t i = 0; i < N; i++)
        for (int64_t s = 0; s < S; s++) {
            int64_t c = ref_ild(lab->dtype, lab->data, i * S + s);
            if (c == ignore)
                continue;
            int64_t row = i * C * S + s; /* class j at row + j * S */
            double m, sum;
            ref_ce_row(dt, xp, row, C, S, &m, &sum);
            double lse = m + log(sum), loss = -(1 - eps) * (ref_ld(dt, xp, row + c * S) - lse);
            if (eps != 0) {
                double all = 0;   /* sum of the log-probabilities */
                for (int64_t j = 0; j < C; j++)
                    all += ref_ld(dt, xp, row + j * S) - lse;
                loss -= eps / (double)C * all;
            }
            total += loss;
        }
    /* every position ignored: 0/0, NaN as PyTorch */
    ((float *)out[0]->data)[0] = (float)(cnt ? total / (double)cnt : NAN);
    return MGE_OK;
}

static mge_status mse_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                            mge_error *err)
{
    const mge_tensor *a = in[0], *b = in[1];
    mge_dtype dt = a->dtype;
    mge_status st = ref_check_data(ctx, n, "a", a, err);
    if (st || (st = ref_check(ctx, n, "b", b, dt, a->ndim, a->dims, err)) || (st = scalar_out(ctx, n, out[0], err)))
        return st;
    if (!mge_dtype_is_float(dt))
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "mse: no reference kernel for %s", mge_dtype_name(dt));
    int64_t cnt = ref_numel(a);
    double sum = 0;
    for (int64_t i = 0; i < cnt; i++) {
        double d = ref_ld(dt, a->data, i) - ref_ld(dt, b->data, i);
        sum += d * d;
    }
    ((float *)out[0]->data)[0] = (float)(cnt ? sum / (double)cnt : NAN);
    return MGE_OK;
}

void mge_ref_register_loss(mge_backend *b)
{
    REF_EACH_FLOAT(dt) {
        b->k[MGE_OP_CROSS_ENTROPY][dt].run = cross_entropy_float;
        b->k[MGE_OP_MSE][dt].run = mse_float;
    }
}
