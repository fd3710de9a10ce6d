/* cpu_qlin.c — cpu kernels of matmul_integer and conv_integer (the ONNX
 * integer ops, group quant-onnx; the oracle is kernels/ref/ref_qlin.c).
 *
 * Both subtract the zero points once into int16 copies of the operands
 * (|u8 - u8| and |i8 - i8| fit), then run a row-times-matrix loop whose
 * inner loop (int16 x int16 added into 32 bits) the compiler vectorizes.
 * The 32-bit sums are unsigned, so they wrap exactly as ref's int64 sums
 * kept to their low 32 bits: the results are bit-identical, in any order.
 * conv_integer lowers each (image, group) to im2col (padded taps 0, i.e.
 * x_zero - x_zero), runs four output channels per pass over the columns
 * (in chunks that keep the four rows in L1) and splits them over the pool;
 * matmul_integer splits the output rows. */
#include "cpu.h"

#include <string.h>

static int q8(mge_dtype dt)
{
    return dt == MGE_U8 || dt == MGE_I8;
}

static inline int32_t ld8(mge_dtype dt, const void *p, int64_t i)
{
    return dt == MGE_U8 ? ((const uint8_t *)p)[i] : ((const int8_t *)p)[i];
}

static int64_t numel(const mge_tensor *t)
{
    int64_t k = 1;
    for (int i = 0; i < t->ndim; i++)
        k *= t->dims[i];
    return k;
}

/* t holds numel(t) elements of dtype dt (u8/i8: one byte each, i32: four). */
static mge_status has(const mge_kctx *ctx, const mge_node *n, const char *what, const mge_tensor *t, mge_dtype dt,
                      mge_error *err)
{
    int64_t k = numel(t);
    size_t es = dt == MGE_I32 ? 4 : 1;
    if (t->dtype != dt || (k > 0 && (!t->data || t->nbytes < (size_t)k * es)))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: %s is %s with %zu bytes: expected %s data",
                             mge_kctx_opname(ctx, n), what, mge_dtype_name(t->dtype), t->data ? t->nbytes : 0,
                             mge_dtype_name(dt));
    return MGE_OK;
}

/* A zero point of one element or len; its value at j (0 without one). */
static mge_status zero_ok(const mge_kctx *ctx, const mge_node *n, const char *what, const mge_tensor *z,
                          mge_dtype dt, int64_t len, mge_error *err)
{
    mge_status st = has(ctx, n, what, z, dt, err);
    if (!st && numel(z) != 1 && numel(z) != len)
        st = mge_error_set(err, MGE_ERR_SHAPE, "%s: %s has %lld elements: expected 1 or %lld", mge_kctx_opname(ctx, n),
                           what, (long long)numel(z), (long long)len);
    return st;
}

static inline int32_t zero_at(const mge_tensor *z, int64_t j)
{
    return z ? ld8(z->dtype, z->data, numel(z) == 1 ? 0 : j) : 0;
}

/* y[0..P) = sum over k of w[k] * col[k][0..P), 32-bit wrapping. */
static void dot_rows(uint32_t *restrict y, const int16_t *restrict w, const int16_t *restrict col, int64_t K,
                     int64_t P)
{
    memset(y, 0, sizeof(uint32_t) * (size_t)P);
    for (int64_t k = 0; k < K; k++) {
        int32_t wv = w[k];
        if (!wv)
            continue;
        const int16_t *c = col + k * P;
        for (int64_t p = 0; p < P; p++)
            y[p] += (uint32_t)(wv * (int32_t)c[p]);
    }
}

/* ---------------------------------------------------------------- conv_integer */

typedef struct cgeom {
    int64_t N, C, H, W, O, Cg, kh, kw, g, sh, sw, dh, dw, pt, pl, OH, OW, K, P;
} cgeom;

static mge_status conv_geom(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                            cgeom *q, mge_error *err)
{
    const mge_tensor *x = in[0], *w = in[1], *y = out[0];
    const char *op = mge_kctx_opname(ctx, n);
    mge_status st;
    if (x->ndim != 4 || w->ndim != 4 || y->ndim != 4 || !q8(x->dtype) || !q8(w->dtype))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x and the weight must be 4-D u8/i8", op);
    q->N = x->dims[0], q->C = x->dims[1], q->H = x->dims[2], q->W = x->dims[3];
    q->O = w->dims[0], q->Cg = w->dims[1], q->kh = w->dims[2], q->kw = w->dims[3];
    q->g = mge_node_int(n, MGE_KEY_groups, 1);
    q->sh = mge_node_ints(n, MGE_KEY_stride, 0, 1), q->sw = mge_node_ints(n, MGE_KEY_stride, 1, q->sh);
    q->dh = mge_node_ints(n, MGE_KEY_dilation, 0, 1), q->dw = mge_node_ints(n, MGE_KEY_dilation, 1, q->dh);
    const mge_attr *pa = mge_node_attr(n, MGE_KEY_pad);
    q->pt = pa && pa->n ? pa->i[0] : 0, q->pl = pa && pa->n > 1 ? pa->i[1] : q->pt;
    q->OH = y->dims[2], q->OW = y->dims[3];
    if (q->g < 1 || q->C % q->g || q->O % q->g || q->Cg != q->C / q->g || q->sh < 1 || q->sw < 1 || q->dh < 1 ||
        q->dw < 1 || y->dims[0] != q->N || y->dims[1] != q->O)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x, weight, groups and the output do not fit", op);
    if ((st = has(ctx, n, "x", x, x->dtype, err)) || (st = has(ctx, n, "the weight", w, w->dtype, err)) ||
        (st = has(ctx, n, "output", y, MGE_I32, err)) ||
        (n->nin > 2 && (st = zero_ok(ctx, n, "x_zero", in[2], x->dtype, 1, err))) ||
        (n->nin > 3 && (st = zero_ok(ctx, n, "w_zero", in[3], w->dtype, q->O, err))))
        return st;
    q->K = q->Cg * q->kh * q->kw;
    q->P = q->OH * q->OW;
    return MGE_OK;
}

static size_t conv_ws(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, int threads)
{
    (void)n, (void)threads;
    if (in[1]->ndim != 4 || out[0]->ndim != 4)
        return 0;
    int64_t K = in[1]->dims[1] * in[1]->dims[2] * in[1]->dims[3], P = out[0]->dims[2] * out[0]->dims[3];
    return sizeof(int16_t) * (size_t)(K * P + in[1]->dims[0] * K);
}

typedef struct conv_job {
    const cgeom *q;
    const int16_t *wq, *col;
    uint32_t *y;   /* the (image, group)'s first output plane */
    int64_t og;    /* its output channels */
} conv_job;

/* Four output channels o..o+3 over columns [p0, p1): each column row read
 * once for the four, the four partial rows in L1. */
static void dot4(uint32_t *restrict y, const int16_t *restrict w, const int16_t *restrict col, int64_t K, int64_t P,
                 int64_t p0, int64_t p1)
{
    uint32_t *y0 = y + p0, *y1 = y0 + P, *y2 = y1 + P, *y3 = y2 + P;
    int64_t np = p1 - p0;
    memset(y0, 0, sizeof(uint32_t) * (size_t)np);
    memset(y1, 0, sizeof(uint32_t) * (size_t)np);
    memset(y2, 0, sizeof(uint32_t) * (size_t)np);
    memset(y3, 0, sizeof(uint32_t) * (size_t)np);
    for (int64_t k = 0; k < K; k++) {
        int32_t w0 = w[k], w1 = w[K + k], w2 = w[2 * K + k], w3 = w[3 * K + k];
        const int16_t *c = col + k * P + p0;
        for (int64_t p = 0; p < np; p++) {
            int32_t v = c[p];
            y0[p] += (uint32_t)(w0 * v);
            y1[p] += (uint32_t)(w1 * v);
            y2[p] += (uint32_t)(w2 * v);
            y3[p] += (uint32_t)(w3 * v);
        }
    }
}

/* Tasks over blocks of four output channels (the last block may be shorter). */
static void conv_task(void *arg, int64_t b, int64_t e, int thread)
{
    (void)thread;
    const conv_job *j = arg;
    const cgeom *q = j->q;
    for (int64_t blk = b; blk < e; blk++) {
        int64_t o = blk * 4;
        if (o + 4 > j->og) {
            for (; o < j->og; o++)
                dot_rows(j->y + o * q->P, j->wq + o * q->K, j->col, q->K, q->P);
            continue;
        }
        for (int64_t p0 = 0; p0 < q->P; p0 += 512)
            dot4(j->y + o * q->P, j->wq + o * q->K, j->col, q->K, q->P, p0, p0 + 512 < q->P ? p0 + 512 : q->P);
    }
}

static mge_status conv_integer(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                               mge_tensor *const *out, mge_error *err)
{
    cgeom q;
    mge_status st = conv_geom(ctx, n, in, out, &q, err);
    if (st)
        return st;
    size_t need = sizeof(int16_t) * (size_t)(q.K * q.P + q.O * q.K);
    if (!ctx->ws || ctx->ws_size < need)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: scratch of %zu bytes, %zu needed", mge_kctx_opname(ctx, n),
                             ctx->ws_size, need);
    const mge_tensor *x = in[0], *w = in[1], *zx = n->nin > 2 ? in[2] : NULL, *zw = n->nin > 3 ? in[3] : NULL;
    int16_t *col = ctx->ws, *wq = col + q.K * q.P;
    for (int64_t o = 0; o < q.O; o++) {
        int32_t wz = zero_at(zw, o);
        for (int64_t k = 0; k < q.K; k++)
            wq[o * q.K + k] = (int16_t)(ld8(w->dtype, w->data, o * q.K + k) - wz);
    }
    int32_t xz = zero_at(zx, 0);
    int64_t Og = q.O / q.g;
    for (int64_t b = 0; b < q.N; b++)
        for (int64_t gi = 0; gi < q.g; gi++) {
            for (int64_t c = 0; c < q.Cg; c++)
                for (int64_t i = 0; i < q.kh; i++)
                    for (int64_t jw = 0; jw < q.kw; jw++) {
                        int16_t *row = col + ((c * q.kh + i) * q.kw + jw) * q.P;
                        int64_t plane = (b * q.C + gi * q.Cg + c) * q.H * q.W;
                        for (int64_t oh = 0; oh < q.OH; oh++) {
                            int64_t ih = oh * q.sh - q.pt + i * q.dh;
                            int16_t *r = row + oh * q.OW;
                            if (ih < 0 || ih >= q.H) {
                                memset(r, 0, sizeof(int16_t) * (size_t)q.OW);
                                continue;
                            }
                            for (int64_t ow = 0; ow < q.OW; ow++) {
                                int64_t iw = ow * q.sw - q.pl + jw * q.dw;
                                r[ow] = iw < 0 || iw >= q.W
                                            ? 0
                                            : (int16_t)(ld8(x->dtype, x->data, plane + ih * q.W + iw) - xz);
                            }
                        }
                    }
            conv_job j = {&q, wq + gi * Og * q.K, col, (uint32_t *)out[0]->data + (b * q.O + gi * Og) * q.P, Og};
            cpu_parallel(ctx, (Og + 3) / 4, 1, conv_task, &j);
        }
    return MGE_OK;
}

/* ---------------------------------------------------------------- matmul_integer */

static size_t matmul_ws(const mge_node *n, mge_tensor *const *in, mge_tensor *const *out, int threads)
{
    (void)n, (void)out, (void)threads;
    return sizeof(int16_t) * (size_t)numel(in[1]);
}

typedef struct mm_job {
    const mge_tensor *a, *za;
    const int16_t *bq;
    uint32_t *y;
    int64_t M, K, N, nbd;
    const int64_t *sa, *sb, *ydims;   /* batch strides (elements) of a and bq; y's batch dims */
} mm_job;

static void mm_task(void *arg, int64_t b, int64_t e, int thread)
{
    (void)thread;
    const mm_job *j = arg;
    for (int64_t r = b; r < e; r++) {   /* r: batch t * M + row i */
        int64_t t = r / j->M, i = r % j->M, oa = 0, ob = 0, rem = t;
        for (int d = (int)j->nbd - 1; d >= 0; d--) {
            int64_t id = rem % j->ydims[d];
            rem /= j->ydims[d];
            oa += id * j->sa[d], ob += id * j->sb[d];
        }
        uint32_t *y = j->y + r * j->N;
        memset(y, 0, sizeof(uint32_t) * (size_t)j->N);
        int32_t za = zero_at(j->za, i);
        for (int64_t k = 0; k < j->K; k++) {
            int32_t av = ld8(j->a->dtype, j->a->data, oa + i * j->K + k) - za;
            if (!av)
                continue;
            const int16_t *brow = j->bq + ob + k * j->N;
            for (int64_t c = 0; c < j->N; c++)
                y[c] += (uint32_t)(av * (int32_t)brow[c]);
        }
    }
}

static mge_status matmul_integer(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                                 mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *a = in[0], *b = in[1], *za = n->nin > 2 ? in[2] : NULL, *zb = n->nin > 3 ? in[3] : NULL;
    mge_tensor *y = out[0];
    const char *op = mge_kctx_opname(ctx, n);
    mge_status st;
    if (a->ndim < 1 || b->ndim < 1 || !q8(a->dtype) || !q8(b->dtype))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: a and b must be u8/i8 of rank >= 1", op);
    int64_t K = a->dims[a->ndim - 1], M = a->ndim > 1 ? a->dims[a->ndim - 2] : 1;
    int64_t N = b->ndim > 1 ? b->dims[b->ndim - 1] : 1, Kb = b->ndim > 1 ? b->dims[b->ndim - 2] : b->dims[0];
    int ya = a->ndim > 1, yb = b->ndim > 1, nbd = y->ndim - ya - yb;
    int abd = a->ndim > 2 ? a->ndim - 2 : 0, bbd = b->ndim > 2 ? b->ndim - 2 : 0;
    if (K != Kb || nbd < abd || nbd < bbd || (ya && y->dims[nbd] != M) || (yb && y->dims[y->ndim - 1] != N))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: a, b and the output do not fit", op);
    if ((st = has(ctx, n, "a", a, a->dtype, err)) || (st = has(ctx, n, "b", b, b->dtype, err)) ||
        (st = has(ctx, n, "output", y, MGE_I32, err)) ||
        (za && (st = zero_ok(ctx, n, "a_zero", za, a->dtype, M, err))) ||
        (zb && (st = zero_ok(ctx, n, "b_zero", zb, b->dtype, N, err))))
        return st;
    int64_t sa[MGE_MAX_DIMS] = {0}, sb[MGE_MAX_DIMS] = {0}, nbatch = 1, pa = M * K, pb = K * N;
    for (int d = nbd - 1; d >= 0; d--) {
        int da = d - (nbd - abd), db = d - (nbd - bbd);
        int64_t ea = da >= 0 ? a->dims[da] : 1, eb = db >= 0 ? b->dims[db] : 1;
        if ((ea != 1 && ea != y->dims[d]) || (eb != 1 && eb != y->dims[d]))
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: batch dim %d does not broadcast", op, d);
        sa[d] = ea == 1 ? 0 : pa;
        sb[d] = eb == 1 ? 0 : pb;
        pa *= ea;
        pb *= eb;
        nbatch *= y->dims[d];
    }
    int64_t nb = numel(b);
    if (!ctx->ws || ctx->ws_size < sizeof(int16_t) * (size_t)nb)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: scratch too small", op);
    int16_t *bq = ctx->ws;
    for (int64_t e = 0; e < nb; e++)
        bq[e] = (int16_t)(ld8(b->dtype, b->data, e) - zero_at(zb, e % N));
    mm_job j = {a, za, bq, y->data, M, K, N, nbd, sa, sb, y->dims};
    cpu_parallel(ctx, nbatch * M, 1 + 4096 / (K * N + 1), mm_task, &j);
    return MGE_OK;
}

void mge_cpu_register_qlin(mge_backend *b)
{
    static const mge_dtype dts[2] = {MGE_U8, MGE_I8};
    for (int i = 0; i < 2; i++) {
        b->k[MGE_OP_CONV_INTEGER][dts[i]] = (mge_kernel){.run = conv_integer, .ws = conv_ws};
        b->k[MGE_OP_MATMUL_INTEGER][dts[i]] = (mge_kernel){.run = matmul_integer, .ws = matmul_ws};
    }
}
