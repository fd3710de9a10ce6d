/* ref_emath.c — det, eye_like, lrn and dft (group emath) and the
 * gradients of det, lrn and dft, in double.
 *
 * det: LU with partial pivoting per matrix (a zero pivot column gives 0).
 * lrn: the window of channels [c - (size-1)/2, c + ceil((size-1)/2)]
 *   clipped to [0, C), as nn.LocalResponseNorm and ONNX LRN.
 * dft: a radix-2 FFT when the length is a power of two, else the plain
 *   O(n^2) sum, the twiddles from the exact angle 2 pi j k / n reduced mod
 *   n first (so large k keep their accuracy); real input is
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

/* The determinant of the k x k matrix a (row-major), destroyed: LU with
 * partial pivoting; a zero pivot column gives 0. k = 0 gives 1. */
static double lu_det(double *a, int64_t k)
{
    double det = 1;
    for (int64_t c = 0; c < k; c++) {
        int64_t p = c;
        for (int64_t r = c + 1; r < k; r++)
            if (fabs(a[r * k + c]) > fabs(a[p * k + c]))
                p = r;
        if (a[p * k + c] == 0)
            return 0;
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
    return det;
}

/* x [..., k, k] float; *k and the matrix count nb. */
static mge_status square_x(const mge_kctx *ctx, const mge_node *n, const mge_tensor *x, int64_t *k, int64_t *nb,
                           mge_error *err)
{
    mge_status st = float_x(ctx, n, x, err);
    if (st)
        return st;
    if (x->ndim < 2 || x->dims[x->ndim - 1] != x->dims[x->ndim - 2])
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is not [..., n, n]", ref_opname(ctx, n));
    *k = x->dims[x->ndim - 1];
    *nb = 1;
    for (int d = 0; d < x->ndim - 2; d++)
        *nb *= x->dims[d];
    return MGE_OK;
}

static mge_status det_run(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                          mge_error *err)
{
    const mge_tensor *x = in[0];
    mge_dtype dt = x->dtype;
    int64_t k, nb;
    mge_status st = square_x(ctx, n, x, &k, &nb, err);
    if (st || (st = ref_check(ctx, n, "output", out[0], dt, x->ndim - 2, x->dims, err)))
        return st;
    double *a = malloc(sizeof(double) * (size_t)(k * k + 1));
    if (!a)
        return mge_error_set(err, MGE_ERR_NOMEM, "%s: out of memory", ref_opname(ctx, n));
    for (int64_t b = 0; b < nb; b++) {
        for (int64_t i = 0; i < k * k; i++)
            a[i] = ref_ld(dt, x->data, b * k * k + i);
        ref_st(dt, out[0]->data, b, lu_det(a, k));
    }
    free(a);
    return MGE_OK;
}

/* det_grad(dy, x): dy times the cofactors, each the determinant of a minor
 * (O(k^5) per matrix: exact for singular x too, where det inv^T is not
 * defined; the ref kernel is for correctness, not speed). */
static mge_status det_grad_run(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                               mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *dy = in[0], *x = in[1];
    mge_dtype dt = x->dtype;
    int64_t k, nb;
    mge_status st = square_x(ctx, n, x, &k, &nb, err);
    if (st || (st = ref_check(ctx, n, "dy", dy, dt, x->ndim - 2, x->dims, err)) ||
        (st = ref_check(ctx, n, "output", out[0], dt, x->ndim, x->dims, err)))
        return st;
    double *m = malloc(sizeof(double) * (size_t)(k * k + 1));
    if (!m)
        return mge_error_set(err, MGE_ERR_NOMEM, "%s: out of memory", ref_opname(ctx, n));
    for (int64_t b = 0; b < nb; b++) {
        double g = ref_ld(dt, dy->data, b);
        const int64_t base = b * k * k;
        for (int64_t i = 0; i < k; i++)
            for (int64_t j = 0; j < k; j++) {
                int64_t q = 0;
                for (int64_t r = 0; r < k; r++)
                    for (int64_t cc = 0; r != i && cc < k; cc++)
                        if (cc != j)
                            m[q++] = ref_ld(dt, x->data, base + r * k + cc);
                double cof = lu_det(m, k - 1) * ((i + j) % 2 ? -1.0 : 1.0);
                ref_st(dt, out[0]->data, base + i * k + j, g * cof);
            }
    }
    free(m);
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

typedef struct lrn_geom {
    int64_t N, C, S, size, lo, hi;   /* the window of c: channels c - lo .. c + hi */
    double alpha, beta, bias;
} lrn_geom;

static mge_status lrn_check(const mge_kctx *ctx, const mge_node *n, const mge_tensor *x, lrn_geom *q, mge_error *err)
{
    mge_status st = float_x(ctx, n, x, err);
    if (st)
        return st;
    if (x->ndim < 2)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x has rank %d: expected [N, C, ...]", ref_opname(ctx, n),
                             x->ndim);
    q->size = mge_node_ints(n, MGE_KEY_size, 0, 0);
    if (q->size < 1)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: size=%lld: expected >= 1", ref_opname(ctx, n),
                             (long long)q->size);
    q->alpha = mge_node_float(n, MGE_KEY_alpha, 1e-4);
    q->beta = mge_node_float(n, MGE_KEY_beta, 0.75);
    q->bias = mge_node_float(n, MGE_KEY_shift, 1.0);
    q->N = x->dims[0], q->C = x->dims[1];
    q->S = q->N * q->C > 0 ? ref_numel(x) / (q->N * q->C) : 0;
    q->lo = (q->size - 1) / 2, q->hi = q->size / 2; /* floor and ceil of (size - 1) / 2 */
    return MGE_OK;
}

/* D[c] = bias + alpha / size * (sum of x^2 over the window of c), for one
 * column (sample b, position s) of x. */
static void lrn_denoms(const lrn_geom *q, mge_dtype dt, const void *x, int64_t b, int64_t s, double *sq, double *D)
{
    for (int64_t c = 0; c < q->C; c++) {
        double v = ref_ld(dt, x, (b * q->C + c) * q->S + s);
        sq[c] = v * v;
    }
    for (int64_t c = 0; c < q->C; c++) {
        double acc = 0;
        for (int64_t j = c - q->lo < 0 ? 0 : c - q->lo; j <= c + q->hi && j < q->C; j++)
            acc += sq[j];
        D[c] = q->bias + q->alpha / (double)q->size * acc;
    }
}

static mge_status lrn_run(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                          mge_error *err)
{
    const mge_tensor *x = in[0];
    mge_dtype dt = x->dtype;
    lrn_geom q;
    mge_status st = lrn_check(ctx, n, x, &q, err);
    if (st || (st = ref_check(ctx, n, "output", out[0], dt, x->ndim, x->dims, err)))
        return st;
    double *sq = malloc(sizeof(double) * (size_t)(2 * q.C + 1)), *D = sq ? sq + q.C : NULL;
    if (!sq)
        return mge_error_set(err, MGE_ERR_NOMEM, "%s: out of memory", ref_opname(ctx, n));
    for (int64_t b = 0; b < q.N; b++)
        for (int64_t s = 0; s < q.S; s++) {
            lrn_denoms(&q, dt, x->data, b, s, sq, D);
            for (int64_t c = 0; c < q.C; c++) {
                int64_t i = (b * q.C + c) * q.S + s;
                ref_st(dt, out[0]->data, i, ref_ld(dt, x->data, i) / pow(D[c], q.beta));
            }
        }
    free(sq);
    return MGE_OK;
}

/* lrn_grad(dy, x): y_c = x_c D_c^-beta, so
 * dx_j = dy_j D_j^-beta - 2 beta alpha / size x_j sum over the c whose
 * window holds j (c in j - hi .. j + lo) of dy_c x_c D_c^(-beta-1). */
static mge_status lrn_grad_run(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                               mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *dy = in[0], *x = in[1];
    mge_dtype dt = x->dtype;
    lrn_geom q;
    mge_status st = lrn_check(ctx, n, x, &q, err);
    if (st || (st = ref_check(ctx, n, "dy", dy, dt, x->ndim, x->dims, err)) ||
        (st = ref_check(ctx, n, "output", out[0], dt, x->ndim, x->dims, err)))
        return st;
    double *sq = malloc(sizeof(double) * (size_t)(3 * q.C + 1)), *D = sq ? sq + q.C : NULL, *t = D ? D + q.C : NULL;
    if (!sq)
        return mge_error_set(err, MGE_ERR_NOMEM, "%s: out of memory", ref_opname(ctx, n));
    for (int64_t b = 0; b < q.N; b++)
        for (int64_t s = 0; s < q.S; s++) {
            lrn_denoms(&q, dt, x->data, b, s, sq, D);
            for (int64_t c = 0; c < q.C; c++) {
                int64_t i = (b * q.C + c) * q.S + s;
                t[c] = ref_ld(dt, dy->data, i) * ref_ld(dt, x->data, i) * pow(D[c], -q.beta - 1);
            }
            for (int64_t j = 0; j < q.C; j++) {
                int64_t i = (b * q.C + j) * q.S + s;
                double acc = 0;
                for (int64_t c = j - q.hi < 0 ? 0 : j - q.hi; c <= j + q.lo && c < q.C; c++)
                    acc += t[c];
                double xj = ref_ld(dt, x->data, i);
                ref_st(dt, out[0]->data, i,
                       ref_ld(dt, dy->data, i) * pow(D[j], -q.beta) - 2.0 * q.beta * q.alpha / (double)q.size * xj * acc);
            }
        }
    free(sq);
    return MGE_OK;
}

typedef struct dft_geom {
    int64_t outer, inner, nin, len, nout, cx, m;   /* m: the signal's terms inside len */
    int inv;
} dft_geom;

/* x's geometry under the node's attributes; yd the output's dims. */
static mge_status dft_check(const mge_kctx *ctx, const mge_node *n, const mge_tensor *x, dft_geom *q, int64_t *yd,
                            mge_error *err)
{
    mge_status st = float_x(ctx, n, x, err);
    if (st)
        return st;
    int r = x->ndim, ax;
    if (r < 2 || (x->dims[r - 1] != 1 && x->dims[r - 1] != 2))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is not [..., 1] or [..., 2]", ref_opname(ctx, n));
    if ((st = ref_axis(ctx, n, x, 1, &ax, err)))
        return st;
    if (ax == r - 1)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: axis is the complex dim", ref_opname(ctx, n));
    q->nin = x->dims[ax];
    q->len = mge_node_int(n, MGE_KEY_length, q->nin);
    q->inv = mge_node_int(n, MGE_KEY_inverse, 0) != 0;
    if (q->len < 1)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: length=%lld: expected >= 1", ref_opname(ctx, n),
                             (long long)q->len);
    q->nout = mge_node_int(n, MGE_KEY_onesided, 0) ? q->len / 2 + 1 : q->len;
    q->cx = x->dims[r - 1];
    q->m = q->nin < q->len ? q->nin : q->len;
    q->outer = q->inner = 1;
    for (int d = 0; d < ax; d++)
        q->outer *= x->dims[d];
    for (int d = ax + 1; d < r - 1; d++)
        q->inner *= x->dims[d];
    for (int d = 0; d < r; d++)
        yd[d] = x->dims[d];
    yd[ax] = q->nout;
    yd[r - 1] = 2;
    return MGE_OK;
}

/* cos and sin of 2 pi q / len for q in [0, len), sin's sign flipped for
 * the forward transform (e^{-i...}); the angle j k is reduced mod len
 * before the lookup, so large j k keep their accuracy. */
static double *dft_twiddles(const dft_geom *q, double sgn)
{
    double *tw = malloc(sizeof(double) * (size_t)(2 * q->len + 2));
    for (int64_t k = 0; tw && k < q->len; k++) {
        double ang = 2.0 * M_PI * (double)k / (double)q->len;
        tw[2 * k] = cos(ang), tw[2 * k + 1] = sgn * sin(ang);
    }
    return tw;
}

/* In-place radix-2 FFT of z (n complex values interleaved, n a power of
 * two): z_k <- sum_j z_j w^{jk}, w from tw (dft_twiddles of length n). */
static void fft_pow2(double *z, int64_t n, const double *tw)
{
    for (int64_t i = 1, j = 0; i < n; i++) {   /* bit-reversed order */
        int64_t bit = n >> 1;
        for (; j & bit; bit >>= 1)
            j ^= bit;
        j ^= bit;
        if (i < j)
            for (int c = 0; c < 2; c++) {
                double t = z[2 * i + c];
                z[2 * i + c] = z[2 * j + c];
                z[2 * j + c] = t;
            }
    }
    for (int64_t len = 2; len <= n; len <<= 1) {
        int64_t half = len / 2, step = n / len;
        for (int64_t i = 0; i < n; i += len)
            for (int64_t k = 0; k < half; k++) {
                double wr = tw[2 * k * step], wi = tw[2 * k * step + 1];
                double *a = z + 2 * (i + k), *b = z + 2 * (i + k + half);
                double tr = b[0] * wr - b[1] * wi, ti = b[0] * wi + b[1] * wr;
                b[0] = a[0] - tr, b[1] = a[1] - ti;
                a[0] += tr, a[1] += ti;
            }
    }
}

/* Lengths the FFT takes (powers of two); others take the direct sum. */
static int dft_pow2(int64_t len)
{
    return len >= 2 && (len & (len - 1)) == 0;
}

static int64_t dft_phase(int64_t j, int64_t k, int64_t len)
{
    return (int64_t)(((unsigned long long)j * (unsigned long long)k) % (unsigned long long)len);
}

static mge_status dft_run(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                          mge_error *err)
{
    const mge_tensor *x = in[0];
    mge_dtype dt = x->dtype;
    dft_geom q;
    int64_t yd[MGE_MAX_DIMS];
    mge_status st = dft_check(ctx, n, x, &q, yd, err);
    if (st || (st = ref_check(ctx, n, "output", out[0], dt, x->ndim, yd, err)))
        return st;
    int64_t row = 2 * q.nout * q.inner;
    double *tw = dft_twiddles(&q, q.inv ? 1.0 : -1.0), *acc = malloc(sizeof(double) * (size_t)(row + 2));
    if (!tw || !acc) {
        free(tw), free(acc);
        return mge_error_set(err, MGE_ERR_NOMEM, "%s: out of memory", ref_opname(ctx, n));
    }
    double scale = q.inv ? 1.0 / (double)q.len : 1.0;
    if (dft_pow2(q.len)) {   /* one line (o, in_) at a time through the FFT */
        double *z = malloc(sizeof(double) * (size_t)(2 * q.len));
        if (!z) {
            free(tw), free(acc);
            return mge_error_set(err, MGE_ERR_NOMEM, "%s: out of memory", ref_opname(ctx, n));
        }
        for (int64_t o = 0; o < q.outer; o++)
            for (int64_t in_ = 0; in_ < q.inner; in_++) {
                for (int64_t j = 0; j < q.len; j++) {
                    int64_t base = ((o * q.nin + j) * q.inner + in_) * q.cx;
                    z[2 * j] = j < q.m ? ref_ld(dt, x->data, base) : 0;
                    z[2 * j + 1] = j < q.m && q.cx == 2 ? ref_ld(dt, x->data, base + 1) : 0;
                }
                fft_pow2(z, q.len, tw);
                for (int64_t k = 0; k < q.nout; k++) {
                    int64_t yi = ((o * q.nout + k) * q.inner + in_) * 2;
                    ref_st(dt, out[0]->data, yi, z[2 * k] * scale);
                    ref_st(dt, out[0]->data, yi + 1, z[2 * k + 1] * scale);
                }
            }
        free(z), free(tw), free(acc);
        return MGE_OK;
    }
    /* the output may not alias x (no INPLACE), so x is read while acc fills */
    for (int64_t o = 0; o < q.outer; o++) {
        for (int64_t i = 0; i < row; i++)
            acc[i] = 0;
        for (int64_t j = 0; j < q.m; j++)
            for (int64_t in_ = 0; in_ < q.inner; in_++) {
                int64_t base = ((o * q.nin + j) * q.inner + in_) * q.cx;
                double re = ref_ld(dt, x->data, base), im = q.cx == 2 ? ref_ld(dt, x->data, base + 1) : 0;
                for (int64_t k = 0; k < q.nout; k++) {
                    int64_t p = dft_phase(j, k, q.len);
                    double c = tw[2 * p], s = tw[2 * p + 1];
                    acc[2 * (k * q.inner + in_)] += re * c - im * s;
                    acc[2 * (k * q.inner + in_) + 1] += re * s + im * c;
                }
            }
        for (int64_t i = 0; i < row; i++)
            ref_st(dt, out[0]->data, o * row + i, acc[i] * scale);
    }
    free(tw), free(acc);
    return MGE_OK;
}

/* dft_grad(dy, x): dx_j = scale * sum over the output bins k of
 * dy_k conj(w^{jk}) for the terms j < min(nin, len) the forward read,
 * 0 for the ones it cut; only the real part for a real x. */
static mge_status dft_grad_run(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                               mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *dy = in[0], *x = in[1];
    mge_dtype dt = x->dtype;
    dft_geom q;
    int64_t yd[MGE_MAX_DIMS];
    mge_status st = dft_check(ctx, n, x, &q, yd, err);
    if (st || (st = ref_check(ctx, n, "dy", dy, dt, x->ndim, yd, err)) ||
        (st = ref_check(ctx, n, "output", out[0], dt, x->ndim, x->dims, err)))
        return st;
    double *tw = dft_twiddles(&q, q.inv ? 1.0 : -1.0);
    if (!tw)
        return mge_error_set(err, MGE_ERR_NOMEM, "%s: out of memory", ref_opname(ctx, n));
    double scale = q.inv ? 1.0 / (double)q.len : 1.0;
    if (dft_pow2(q.len)) {   /* the conjugate transform of dy zero-extended to len, through the FFT */
        double *z = malloc(sizeof(double) * (size_t)(2 * q.len)), *ctw = dft_twiddles(&q, q.inv ? -1.0 : 1.0);
        if (!z || !ctw) {
            free(z), free(ctw), free(tw);
            return mge_error_set(err, MGE_ERR_NOMEM, "%s: out of memory", ref_opname(ctx, n));
        }
        for (int64_t o = 0; o < q.outer; o++)
            for (int64_t in_ = 0; in_ < q.inner; in_++) {
                for (int64_t k = 0; k < q.len; k++) {
                    int64_t yi = ((o * q.nout + k) * q.inner + in_) * 2;
                    z[2 * k] = k < q.nout ? ref_ld(dt, dy->data, yi) : 0;
                    z[2 * k + 1] = k < q.nout ? ref_ld(dt, dy->data, yi + 1) : 0;
                }
                fft_pow2(z, q.len, ctw);
                for (int64_t j = 0; j < q.nin; j++) {
                    int64_t xi = ((o * q.nin + j) * q.inner + in_) * q.cx;
                    ref_st(dt, out[0]->data, xi, j < q.m ? z[2 * j] * scale : 0);
                    if (q.cx == 2)
                        ref_st(dt, out[0]->data, xi + 1, j < q.m ? z[2 * j + 1] * scale : 0);
                }
            }
        free(z), free(ctw), free(tw);
        return MGE_OK;
    }
    for (int64_t o = 0; o < q.outer; o++)
        for (int64_t j = 0; j < q.nin; j++)
            for (int64_t in_ = 0; in_ < q.inner; in_++) {
                double gr = 0, gi = 0;
                for (int64_t k = 0; j < q.m && k < q.nout; k++) {
                    int64_t p = dft_phase(j, k, q.len), yi = ((o * q.nout + k) * q.inner + in_) * 2;
                    double c = tw[2 * p], s = tw[2 * p + 1];
                    double dr = ref_ld(dt, dy->data, yi), di = ref_ld(dt, dy->data, yi + 1);
                    gr += dr * c + di * s;
                    gi += di * c - dr * s;
                }
                int64_t xi = ((o * q.nin + j) * q.inner + in_) * q.cx;
                ref_st(dt, out[0]->data, xi, gr * scale);
                if (q.cx == 2)
                    ref_st(dt, out[0]->data, xi + 1, gi * scale);
            }
    free(tw);
    return MGE_OK;
}

void mge_ref_register_emath(mge_backend *b)
{
    REF_EACH_FLOAT(dt) {
        b->k[MGE_OP_DET][dt].run = det_run;
        b->k[MGE_OP_LRN][dt].run = lrn_run;
        b->k[MGE_OP_DFT][dt].run = dft_run;
        b->k[MGE_OP_DET_GRAD][dt].run = det_grad_run;
        b->k[MGE_OP_LRN_GRAD][dt].run = lrn_grad_run;
        b->k[MGE_OP_DFT_GRAD][dt].run = dft_grad_run;
    }
    static const mge_dtype any[] = {MGE_F32, MGE_F16, MGE_BF16, MGE_I8, MGE_U8, MGE_I32, MGE_I64, MGE_BOOL};
    for (size_t i = 0; i < sizeof any / sizeof any[0]; i++)
        b->k[MGE_OP_EYE_LIKE][any[i]].run = eye_run;
}
