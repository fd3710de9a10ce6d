/* ref_linear.c — linear (y = x W^T + b over all leading dims) and matmul
 * (numpy.matmul: 1-D operands promoted and the added dim dropped, batch
 * dims broadcast, transpose_a/transpose_b on the last two dims). linear:
 * float dtypes; matmul: float, i32, i64. */
#include "ref.h"

#include <string.h>

static mge_status linear_float(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in,
                               mge_tensor *const *out, mge_error *err)
{
    const mge_tensor *x = in[0], *w = in[1], *b = n->nin >= 3 ? in[2] : NULL;
    mge_tensor *y = out[0];
    mge_status st;
    if (x->ndim < 1 || w->ndim != 2)
        return mge_error_set(err, MGE_ERR_SHAPE, "linear: x rank %d, weight rank %d: expected >= 1 and 2", x->ndim,
                             w->ndim);
    int64_t K = x->dims[x->ndim - 1], O = w->dims[0];
    int64_t ew[2] = {O, K}, eb[1] = {O}, ey[MGE_MAX_DIMS];
    memcpy(ey, x->dims, sizeof ey);
    ey[x->ndim - 1] = O;
    mge_dtype dt = x->dtype;
    if (!mge_dtype_is_float(dt))
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "linear: no reference kernel for %s", mge_dtype_name(dt));
    if ((st = ref_check(ctx, n, "x", x, dt, x->ndim, x->dims, err)) ||
        (st = ref_check(ctx, n, "weight", w, dt, 2, ew, err)) ||
        (b && (st = ref_check(ctx, n, "bias", b, dt, 1, eb, err))) ||
        (st = ref_check(ctx, n, "output", y, dt, x->ndim, ey, err)))
        return st;
    int64_t M = 1;
    for (int i = 0; i < x->ndim - 1; i++)
        M *= x->dims[i];
    const void *xp = x->data, *wp = w->data, *bp = b ? b->data : NULL;
    void *yp = y->data;
    for (int64_t m = 0; m < M; m++)
        for (int64_t o = 0; o < O; o++) {
            double acc = bp ? ref_ld(dt, bp, o) : 0.0;
            for (int64_t k = 0; k < K; k++)
                acc += ref_ld(dt, xp, m * K + k) * ref_ld(dt, wp, o * K + k);
            ref_st(dt, yp, m * O + o, acc);
        }
    return MGE_OK;
}

/* One matmul operand seen as a batch of [rows, cols] matrices, with the
 * strides of its (maybe transposed) rows and columns. */
typedef struct operand {
    int nb;                        /* batch dims */
    int64_t bdims[MGE_MAX_DIMS];
    int64_t rows, cols, rs, cs;    /* logical shape and element strides */
    int64_t mat;                   /* elements per stored matrix */
} operand;

/* A 1-D operand is a row [1,k] on the left, a column [k,1] on the right;
 * transposing it changes nothing (numpy). */
static void make_operand(const mge_tensor *t, int transpose, int left, operand *o)
{
    if (t->ndim == 1) {
        o->nb = 0;
        o->rows = left ? 1 : t->dims[0];
        o->cols = left ? t->dims[0] : 1;
        o->rs = left ? 0 : 1;
        o->cs = left ? 1 : 0;
        o->mat = t->dims[0];
        return;
    }
    o->nb = t->ndim - 2;
    memcpy(o->bdims, t->dims, sizeof(int64_t) * (size_t)o->nb);
    int64_t r = t->dims[t->ndim - 2], c = t->dims[t->ndim - 1];
    o->mat = r * c;
    if (transpose) {
        o->rows = c;
        o->cols = r;
        o->rs = 1;
        o->cs = c;
    } else {
        o->rows = r;
        o->cols = c;
        o->rs = c;
        o->cs = 1;
    }
}

/* The output shape of numpy.matmul and the batch broadcast; 0 when the
 * operands do not fit. */
static int matmul_shape(const mge_tensor *a, const mge_tensor *b, const operand *oa, const operand *ob, int *nb,
                        int64_t *bdims, int *ndim, int64_t *dims)
{
    if (oa->cols != ob->rows)
        return 0;
    *nb = oa->nb > ob->nb ? oa->nb : ob->nb;
    for (int i = 0; i < *nb; i++) {
        int ia = oa->nb - *nb + i, ib = ob->nb - *nb + i;
        int64_t da = ia >= 0 ? oa->bdims[ia] : 1, db = ib >= 0 ? ob->bdims[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return 0;
        bdims[i] = da == 1 ? db : da;
    }
    int k = 0;
    for (int i = 0; i < *nb; i++)
        dims[k++] = bdims[i];
    if (a->ndim > 1)
        dims[k++] = oa->rows;
    if (b->ndim > 1)
        dims[k++] = ob->cols;
    *ndim = k;
    return 1;
}

/* Offset (in matrices) of the operand's matrix for output batch index idx. */
static int64_t batch_offset(const operand *o, int nb, const int64_t *idx)
{
    int64_t off = 0;
    for (int i = 0; i < o->nb; i++) {
        int64_t v = o->bdims[i] == 1 ? 0 : idx[nb - o->nb + i];
        off = off * o->bdims[i] + v;
    }
    return off;
}

/* Floats accumulate in double; integers in 64-bit unsigned arithmetic,
 * whose low bits are the wrapped result of the narrower type. */
static mge_status matmul_any(const mge_kctx *ctx, const mge_node *n, mge_tensor *const *in, mge_tensor *const *out,
                             mge_error *err)
{
    const mge_tensor *a = in[0], *b = in[1];
    mge_tensor *y = out[0];
    mge_dtype dt = a->dtype;
    int isf = mge_dtype_is_float(dt);
    mge_status st;
    if ((st = ref_check_data(ctx, n, "a", a, err)) || (st = ref_check_dtype(ctx, n, "b", b, dt, err)))
        return st;
    if (!isf && dt != MGE_I32 && dt != MGE_I64)
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "matmul: no reference kernel for %s", mge_dtype_name(dt));
    if (a->ndim < 1 || b->ndim < 1)
        return mge_error_set(err, MGE_ERR_SHAPE, "matmul: operands of rank %d and %d: expected >= 1", a->ndim,
                             b->ndim);
    operand oa, ob;
    make_operand(a, (int)mge_node_int(n, MGE_KEY_transpose_a, 0), 1, &oa);
    make_operand(b, (int)mge_node_int(n, MGE_KEY_transpose_b, 0), 0, &ob);
    int nb, nd;
    int64_t bdims[MGE_MAX_DIMS], dims[MGE_MAX_DIMS + 2];
    if (!matmul_shape(a, b, &oa, &ob, &nb, bdims, &nd, dims) || nd > MGE_MAX_DIMS)
        return mge_error_set(err, MGE_ERR_SHAPE, "matmul: operands of rank %d and %d do not fit", a->ndim, b->ndim);
    if ((st = ref_check(ctx, n, "output", y, dt, nd, dims, err)))
        return st;
    int64_t M = oa.rows, K = oa.cols, N = ob.cols, idx[MGE_MAX_DIMS] = {0}, nbatch = 1;
    for (int i = 0; i < nb; i++)
        nbatch *= bdims[i];
    for (int64_t t = 0; t < nbatch; t++) {
        int64_t am = batch_offset(&oa, nb, idx) * oa.mat, bm = batch_offset(&ob, nb, idx) * ob.mat;
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double acc = 0;
                uint64_t iacc = 0;
                for (int64_t k = 0; k < K; k++) {
                    int64_t ia = am + i * oa.rs + k * oa.cs, ib = bm + k * ob.rs + j * ob.cs;
                    if (isf)
                        acc += ref_ld(dt, a->data, ia) * ref_ld(dt, b->data, ib);
                    else
                        iacc += (uint64_t)ref_ild(dt, a->data, ia) * (uint64_t)ref_ild(dt, b->data, ib);
                }
                if (isf)
                    ref_st(dt, y->data, (t * M + i) * N + j, acc);
                else
                    ref_ist(dt, y->data, (t * M + i) * N + j, (int64_t)iacc);
            }
        ref_next(nb, bdims, idx);
    }
    return MGE_OK;
}

void mge_ref_register_linear(mge_backend *b)
{
    REF_EACH_FLOAT(dt) {
        b->k[MGE_OP_LINEAR][dt].run = linear_float;
        b->k[MGE_OP_MATMUL][dt].run = matmul_any;
    }
    b->k[MGE_OP_MATMUL][MGE_I32].run = matmul_any;
    b->k[MGE_OP_MATMUL][MGE_I64].run = matmul_any;
}
