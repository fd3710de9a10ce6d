/* ref_emath.c — det, eye_like, lrn and dft (group emath), in double.
 *
 * det: LU with partial pivoting per matrix (a zero pivot column gives 0).
 * lrn: the window of channels [c - (size-1)/2, c + ceil((size-1)/2)]
 *   clipped to [0, C), as nn.LocalResponseNorm and ONNX LRN.
 * dft: the plain O(n^2) sum, the twiddles from the exact angle 2 pi j k / n
 *   reduced mod n first (so large k keep their accuracy); real input is
 *   [..., 1], complex [..., 2]; the signal is zero-padded or cut to
 *   length; inverse divides by length. */
#include "ref.h"

#include <math.h>
#include <stdlib.h>

static mge_status float_x(const mge_kctx *ctx, const mge_node *n, const mge_tensor *x, mge_error *err)
{
    if (!mge_dtype_is_float(x->dtype))
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: no reference kernel for %s", ref_opname(ctx, n),
                             mge_dtype_name(x->dtype));
    return ref_check_data(ctx, n, "x", x, err);
}

static mge_status det_run(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                          mge_error *err)
{
    const mge_tensor *x = in[0];
    mge_dtype dt = x->dtype;
    mge_status st = float_x(ctx, n, x, err);
    if (st)
        return st;
    if (x->ndim < 2 || x->dims[x->ndim - 1] != x->dims[x->ndim - 2])
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is not [..., n, n]", ref_opname(ctx, n));
    if ((st = ref_check(ctx, n, "output", out[0], dt, x->ndim - 2, x->dims, err)))
        return st;
    int64_t k = x->dims[x->ndim - 1], nb = ref_numel(out[0]);
    double *a = malloc(sizeof(double) * (size_t)(k * k + 1));
    if (!a)
        return mge_error_set(err, MGE_ERR_NOMEM, "%s: out of memory", ref_opname(ctx, n));
    for (int64_t b = 0; b < nb; b++) {
        for (int64_t i = 0; i < k * k; i++)
            a[i] = ref_ld(dt, x->data, b * k * k + i);
        double det = 1;
        for (int64_t c = 0; c < k && det != 0; c++) {
            int64_t p = c;
            for (int64_t r = c + 1; r < k; r++)
                if (fabs(a[r * k + c]) > fabs(a[p * k + c]))
                    p = r;
            if (a[p * k + c] == 0) {
                det = 0;
                break;
            }
            if (p != c) {
                for (int64_t j = 0; j < k; j++) {
                    double t = a[c * k + j];
                    a[c * k + j] = a[p * k + j];
                    a[p * k + j] = t;
                }
                det = -det;
            }
            double piv = a[c * k + c];
            det *= piv;
            for (int64_t r = c + 1; r < k; r++) {
                double f = a[r * k + c] / piv;
                for (int64_t j = c + 1; j < k; j++)
                    a[r * k + j] -= f * a[c * k + j];
            }
        }
        ref_st(dt, out[0]->data, b, det);
    }
    free(a);
    return MGE_OK;
}

static mge_status eye_run(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                          mge_error *err)
{
    const mge_tensor *x = in[0];
    mge_tensor *y = out[0];
    if (x->ndim != 2)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x has rank %d: expected 2", ref_opname(ctx, n), x->ndim);
    mge_status st = ref_check(ctx, n, "output", y, y->dtype, 2, x->dims, err);
    if (st)
        return st;
    mge_dtype dt = y->dtype;
    int fl = mge_dtype_is_float(dt);
    if (!fl && dt != MGE_BOOL && dt != MGE_I8 && dt != MGE_U8 && dt != MGE_I32 && dt != MGE_I64)
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: no reference kernel for %s output", ref_opname(ctx, n),
                             mge_dtype_name(dt));
    int64_t r = x->dims[0], c = x->dims[1], k = mge_node_int(n, MGE_KEY_k, 0);
    for (int64_t i = 0; i < r; i++)
        for (int64_t j = 0; j < c; j++) {
            int one = j - i == k;
            if (fl)
                ref_st(dt, y->data, i * c + j, one);
            else
                ref_ist(dt, y->data, i * c + j, one);
        }
    return MGE_OK;
}

static mge_status lrn_run(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                          mge_error *err)
{
    const mge_tensor *x = in[0];
    mge_dtype dt = x->dtype;
    mge_status st = float_x(ctx, n, x, err);
    if (st)
        return st;
    if (x->ndim < 2)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x has rank %d: expected [N, C, ...]", ref_opname(ctx, n),
                             x->ndim);
    if ((st = ref_check(ctx, n, "output", out[0], dt, x->ndim, x->dims, err)))
        return st;
    int64_t size = mge_node_ints(n, MGE_KEY_size, 0, 0);
    if (size < 1)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: size=%lld: expected >= 1", ref_opname(ctx, n),
                             (long long)size);
    double alpha = mge_node_float(n, MGE_KEY_alpha, 1e-4), beta = mge_node_float(n, MGE_KEY_beta, 0.75),
           bias = mge_node_float(n, MGE_KEY_shift, 1.0);
    int64_t N = x->dims[0], C = x->dims[1], S = ref_numel(x) / (N * C > 0 ? N * C : 1);
    int64_t lo = (size - 1) / 2, hi = size / 2; /* floor and ceil of (size - 1) / 2 */
    double *sq = malloc(sizeof(double) * (size_t)(C + 1));
    if (!sq)
        return mge_error_set(err, MGE_ERR_NOMEM, "%s: out of memory", ref_opname(ctx, n));
    for (int64_t b = 0; b < N; b++)
        for (int64_t s = 0; s < S; s++) {
            for (int64_t c = 0; c < C; c++) {
                double v = ref_ld(dt, x->data, (b * C + c) * S + s);
                sq[c] = v * v;
            }
            for (int64_t c = 0; c < C; c++) {
                double acc = 0;
                for (int64_t j = c - lo < 0 ? 0 : c - lo; j <= c + hi && j < C; j++)
                    acc += sq[j];
                double v = ref_ld(dt, x->data, (b * C + c) * S + s);
                ref_st(dt, out[0]->data, (b * C + c) * S + s, v / pow(bias + alpha / (double)size * acc, beta));
            }
        }
    free(sq);
    return MGE_OK;
}

static mge_status dft_run(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                          mge_error *err)
{
    const mge_tensor *x = in[0];
    mge_dtype dt = x->dtype;
    mge_status st = float_x(ctx, n, x, err);
    if (st)
        return st;
    int r = x->ndim;
    if (r < 2 || (x->dims[r - 1] != 1 && x->dims[r - 1] != 2))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is not [..., 1] or [..., 2]", ref_opname(ctx, n));
    int ax;
    if ((st = ref_axis(ctx, n, x, 1, &ax, err)))
        return st;
    if (ax == r - 1)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: axis is the complex dim", ref_opname(ctx, n));
    int64_t nin = x->dims[ax], len = mge_node_int(n, MGE_KEY_length, nin);
    int onesided = mge_node_int(n, MGE_KEY_onesided, 0) != 0, inv = mge_node_int(n, MGE_KEY_inverse, 0) != 0;
    if (len < 1)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: length=%lld: expected >= 1", ref_opname(ctx, n),
                             (long long)len);
    int64_t nout = onesided ? len / 2 + 1 : len, yd[MGE_MAX_DIMS];
    for (int d = 0; d < r; d++)
        yd[d] = x->dims[d];
    yd[ax] = nout;
    yd[r - 1] = 2;
    if ((st = ref_check(ctx, n, "output", out[0], dt, r, yd, err)))
        return st;
    int64_t outer = 1, inner = 1, cx = x->dims[r - 1];
    for (int d = 0; d < ax; d++)
        outer *= x->dims[d];
    for (int d = ax + 1; d < r - 1; d++)
        inner *= x->dims[d];
    int64_t m = nin < len ? nin : len; /* the terms the signal has (past them: zero padding) */
    double *tw = malloc(sizeof(double) * (size_t)(2 * len + 2)), *acc = malloc(sizeof(double) * (size_t)(2 * nout * inner + 2));
    if (!tw || !acc) {
        free(tw), free(acc);
        return mge_error_set(err, MGE_ERR_NOMEM, "%s: out of memory", ref_opname(ctx, n));
    }
    double sgn = inv ? 1.0 : -1.0;
    for (int64_t q = 0; q < len; q++) {
        double ang = 2.0 * M_PI * (double)q / (double)len;
        tw[2 * q] = cos(ang), tw[2 * q + 1] = sgn * sin(ang);
    }
    /* the output may not alias x (no INPLACE), so x is read while acc fills */
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t i = 0; i < 2 * nout * inner; i++)
            acc[i] = 0;
        for (int64_t j = 0; j < m; j++)
            for (int64_t in_ = 0; in_ < inner; in_++) {
                int64_t base = ((o * nin + j) * inner + in_) * cx;
                double re = ref_ld(dt, x->data, base), im = cx == 2 ? ref_ld(dt, x->data, base + 1) : 0;
                for (int64_t k = 0; k < nout; k++) {
                    int64_t q = (int64_t)(((unsigned long long)j * (unsigned long long)k) % (unsigned long long)len);
                    double c = tw[2 * q], s = tw[2 * q + 1];
                    acc[2 * (k * inner + in_)] += re * c - im * s;
                    acc[2 * (k * inner + in_) + 1] += re * s + im * c;
                }
            }
        double scale = inv ? 1.0 / (double)len : 1.0;
        for (int64_t i = 0; i < 2 * nout * inner; i++)
            ref_st(dt, out[0]->data, o * 2 * nout * inner + i, acc[i] * scale);
    }
    free(tw), free(acc);
    return MGE_OK;
}

void mge_ref_register_emath(mge_backend *b)
{
    REF_EACH_FLOAT(dt) {
        b->k[MGE_OP_DET][dt].run = det_run;
        b->k[MGE_OP_LRN][dt].run = lrn_run;
        b->k[MGE_OP_DFT][dt].run = dft_run;
    }
    static const mge_dtype any[] = {MGE_F32, MGE_F16, MGE_BF16, MGE_I8, MGE_U8, MGE_I32, MGE_I64, MGE_BOOL};
    for (size_t i = 0; i < sizeof any / sizeof any[0]; i++)
        b->k[MGE_OP_EYE_LIKE][any[i]].run = eye_run;
}
