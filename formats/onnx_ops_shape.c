/* onnx_ops_shape.c — ONNX converters for shape and indexing ops: Shape,
 * Size, Gather(Elements, ND), Scatter(Elements, ND), (Un)Squeeze, Concat,
 * Split, Slice, Transpose, Expand, Tile, Range, ConstantOfShape, OneHot,
 * Trilu, EyeLike, Compress, ReverseSequence; NonZero is refused (its
 * output's shape depends on the data).
 *
 * Integer inputs that give a shape, axes, bounds or repeats must be known
 * when mge plans (constants, or shape arithmetic such as Shape -> Gather ->
 * Concat: the mge ops compute those values from the binding); one computed
 * from tensor data at run time makes the node unsupported at import. A
 * constant one becomes the mge attribute, so the graph reads plainly.
 * Lowerings: Trilu is a where() over a column-minus-row mask, EyeLike a
 * constant (or that mask cast), ReverseSequence a gather_elements of
 * reversed time indices, Compress with a constant condition an
 * index_select, GatherND a gather over data with its indexed dims flattened,
 * ScatterElements/ScatterND reduction= scatter's reduction attribute,
 * Split past mge's 4 outputs one slice each.
 * OneHot before opset 11 makes a negative index all off, as that spec
 * says (onnxruntime counts it from the end at every opset). */
#include "onnx.h"

#include <string.h>

/* ---------------------------------------------------------------- helpers */

static mge_status err_code(mge_onnx_ctx *c)
{
    return c->err->code ? c->err->code : MGE_ERR_INVALID;
}

static mge_status emit1(mge_onnx_ctx *c, mge_onnx_node *n, int op, int nin, const int *in, int na,
                        const mge_attr *a)
{
    return mge_onnx_emit(c, n, op, nin, in, na, a, 1) < 0 ? err_code(c) : MGE_OK;
}

/* Value v's elements known when mge plans (a constant, or computed from
 * shapes and constants at every binding). */
static int plan_known(mge_onnx_ctx *c, int v)
{
    if (mge_onnx_data(c, v))
        return 1;
    mge_tdesc d;
    memset(&d, 0, sizeof d);
    return mge_graph_probe_desc(c->g, v, 0, &d, NULL) == MGE_OK && d.known;
}

static mge_status need_plan_known(mge_onnx_ctx *c, mge_onnx_node *n, int v, const char *what)
{
    if (plan_known(c, v))
        return MGE_OK;
    mge_onnx_note_needs(c, v);
    return mge_onnx_unsupported(c, n,
                                "its %s ('%s') is computed from tensor data at run time: mge needs it from shapes "
                                "and constants (dynamic output shapes)",
                                what, c->g->values[v].name);
}

/* An integer vector (or scalar) value's elements when it is constant data:
 * 1 and up to max of them into out[*cnt]; 0 when it is not constant. */
static int const_ints(mge_onnx_ctx *c, int v, int64_t *out, int max, int *cnt)
{
    const mge_tensor *t = mge_onnx_data(c, v);
    if (!t || (t->dtype != MGE_I64 && t->dtype != MGE_I32) || t->ndim > 1)
        return 0;
    int64_t m = mge_tensor_numel(t);
    if (m > max || (m && !t->data))
        return 0;
    for (int64_t i = 0; i < m; i++)
        out[i] = t->dtype == MGE_I64 ? ((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i];
    *cnt = (int)m;
    return 1;
}

static int is_static(const mge_value *v, int from, int to)
{
    for (int d = from; d < to; d++)
        if (v->dims[d] < 0)
            return 0;
    return 1;
}

static int64_t numel_of(const mge_value *v)
{
    int64_t m = 1;
    for (int d = 0; d < v->ndim; d++)
        m *= v->dims[d] < 0 ? 1 : v->dims[d];
    return m;
}

/* Element i of t set to v, in t's dtype. */
static void put(mge_tensor *t, int64_t i, double v)
{
    switch (t->dtype) {
    case MGE_F32: ((float *)t->data)[i] = (float)v; break;
    case MGE_F16: ((uint16_t *)t->data)[i] = mge_f32_to_f16((float)v); break;
    case MGE_BF16: ((uint16_t *)t->data)[i] = mge_f32_to_bf16((float)v); break;
    case MGE_I8: ((int8_t *)t->data)[i] = (int8_t)v; break;
    case MGE_U8: ((uint8_t *)t->data)[i] = (uint8_t)v; break;
    case MGE_BOOL: ((uint8_t *)t->data)[i] = v != 0; break;
    case MGE_I32: ((int32_t *)t->data)[i] = (int32_t)v; break;
    case MGE_I64: ((int64_t *)t->data)[i] = (int64_t)v; break;
    default: mge_dtype_set(t->dtype, t->data, i, v); break;
    }
}

/* A const of dtype dt and shape dims filled by fill(i) (NULL: zeros);
 * returns the value index or -1. */
typedef double (*fill_fn)(const void *arg, int64_t i);
static int const_fill(mge_onnx_ctx *c, mge_onnx_node *n, mge_dtype dt, int ndim, const int64_t *dims, fill_fn fill,
                      const void *arg)
{
    mge_tensor t;
    if (mge_tensor_alloc(&t, dt, ndim, dims, c->err))
        return -1;
    int64_t m = mge_tensor_numel(&t);
    for (int64_t i = 0; i < m; i++)
        put(&t, i, fill ? fill(arg, i) : 0.0);
    return mge_onnx_const(c, n, &t);
}

static int const_scalar(mge_onnx_ctx *c, mge_onnx_node *n, mge_dtype dt, double v)
{
    mge_tensor t;
    if (mge_tensor_alloc(&t, dt, 0, NULL, c->err))
        return -1;
    put(&t, 0, v);
    return mge_onnx_const(c, n, &t);
}

static int tmp(mge_onnx_ctx *c, mge_onnx_node *n, int op, int a, int b)
{
    int in[2] = {a, b};
    return mge_onnx_emit_tmp(c, n, op, b < 0 ? 1 : 2, in, 0, NULL);
}

/* ---------------------------------------------------------------- Shape, Size */

static mge_status conv_shape(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x = mge_onnx_in(c, n, 0);
    if (x < 0)
        return mge_onnx_fail(c, n, "no input");
    mge_attr a[2];
    int na = 0;
    /* start/end: opset 15 */
    if (mge_onnx_attr(n, "start"))
        a[na++] = mge_onnx_ai(MGE_KEY_start, mge_onnx_attr_i(n, "start", 0));
    if (mge_onnx_attr(n, "end"))
        a[na++] = mge_onnx_ai(MGE_KEY_end, mge_onnx_attr_i(n, "end", 0));
    return emit1(c, n, MGE_OP_SHAPE, 1, &x, na, a);
}

static mge_status conv_size(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x = mge_onnx_in(c, n, 0);
    if (x < 0)
        return mge_onnx_fail(c, n, "no input");
    return emit1(c, n, MGE_OP_SIZE, 1, &x, 0, NULL);
}

/* ---------------------------------------------------------------- Gather, GatherElements */

static mge_status check_indices(mge_onnx_ctx *c, mge_onnx_node *n, int idx)
{
    mge_dtype dt = mge_onnx_value(c, idx)->dtype;
    if (dt != MGE_I32 && dt != MGE_I64)
        return mge_onnx_fail(c, n, "indices are %s: expected int32 or int64", mge_dtype_name(dt));
    return MGE_OK;
}

static mge_status gather_like(mge_onnx_ctx *c, mge_onnx_node *n, int op)
{
    int x = mge_onnx_in(c, n, 0), idx = mge_onnx_in(c, n, 1);
    if (x < 0 || idx < 0)
        return mge_onnx_fail(c, n, "expected inputs data and indices");
    mge_status s = check_indices(c, n, idx);
    if (s)
        return s;
    const mge_value *xv = mge_onnx_value(c, x);
    int64_t axis = mge_onnx_attr_i(n, "axis", 0);
    if (xv->ndim < 1 || mge_onnx_axis(axis, xv->ndim) < 0)
        return mge_onnx_fail(c, n, "axis %lld is out of range for rank %d", (long long)axis, xv->ndim);
    mge_attr a[1] = {mge_onnx_ai(MGE_KEY_axis, mge_onnx_axis(axis, xv->ndim))};
    int in[2] = {x, idx};
    return emit1(c, n, op, 2, in, 1, a);
}

static mge_status conv_gather(mge_onnx_ctx *c, mge_onnx_node *n)
{
    return gather_like(c, n, MGE_OP_GATHER);
}

static mge_status conv_gather_elements(mge_onnx_ctx *c, mge_onnx_node *n)
{
    return gather_like(c, n, MGE_OP_GATHER_ELEMENTS);
}

/* ---------------------------------------------------------------- GatherND, ScatterND */

typedef struct nd_plan {
    int64_t outer;      /* prod of data dims [0, b + k): the flattened leading dim */
    int flat;           /* data reshaped to [outer, dims b+k ...] */
    int lin;            /* per index tuple, the row of flat: shape indices.dims[:-1] */
} nd_plan;

typedef struct boff_arg {
    int64_t inner;
} boff_arg;

static double boff_fill(const void *arg, int64_t i)
{
    return (double)(i * ((const boff_arg *)arg)->inner);
}

/* nd_linear's rows for constant indices, checked here: a const. */
static int nd_const_rows(mge_onnx_ctx *c, mge_onnx_node *n, int idx, int b, int k, const int64_t *dk,
                         const int64_t *st, int64_t inner)
{
    const mge_tensor *t = mge_onnx_data(c, idx);
    mge_tensor o;
    int64_t m = mge_tensor_numel(t) / k, per = 1;
    if (mge_tensor_alloc(&o, MGE_I64, t->ndim - 1, t->dims, c->err))
        return -1;
    for (int d = b; d < t->ndim - 1; d++)
        per *= t->dims[d];
    const int64_t *iv = t->data;
    for (int64_t i = 0; i < m; i++) {
        int64_t row = (i / per) * inner;   /* the batch position's first row */
        for (int j = 0; j < k; j++) {
            int64_t v = iv[i * k + j];
            if (v < -dk[j] || v >= dk[j]) {
                mge_tensor_free(&o);
                mge_onnx_fail(c, n, "index %lld (tuple %lld, entry %d) is out of range for a dim of %lld",
                              (long long)v, (long long)i, j, (long long)dk[j]);
                return -1;
            }
            row += (v < 0 ? v + dk[j] : v) * st[j];
        }
        ((int64_t *)o.data)[i] = row;
    }
    return mge_onnx_const(c, n, &o);
}

/* nd_linear's rows for computed indices: negative entries + the dim (the
 * row's sum would hide them), and a tuple with an entry out of range made
 * row -1 - outer, so that the gather fails instead of reading elsewhere. */
static int nd_rows(mge_onnx_ctx *c, mge_onnx_node *n, int idx, int b, int k, const int64_t *dk, const int64_t *st,
                   int64_t inner)
{
    const mge_value *iv = mge_onnx_value(c, idx);
    int q = iv->ndim;
    int64_t outer = inner;
    for (int d = 0; d < b; d++)
        outer *= iv->dims[d];
    int vd = mge_onnx_const_i64(c, n, k, dk), vs = mge_onnx_const_i64(c, n, k, st);
    int zero = const_scalar(c, n, MGE_I64, 0), one = const_scalar(c, n, MGE_I64, 1);
    int bad_row = const_scalar(c, n, MGE_I64, (double)(-1 - outer));
    if (vd < 0 || vs < 0 || zero < 0 || one < 0 || bad_row < 0)
        return -1;
    int neg = tmp(c, n, MGE_OP_LESS, idx, zero), fix = neg < 0 ? -1 : tmp(c, n, MGE_OP_ADD, idx, vd);
    if (fix < 0)
        return -1;
    int win[3] = {neg, fix, idx};
    int norm = mge_onnx_emit_tmp(c, n, MGE_OP_WHERE, 3, win, 0, NULL);
    int lo = norm < 0 ? -1 : tmp(c, n, MGE_OP_LESS, norm, zero);
    int hi = lo < 0 ? -1 : tmp(c, n, MGE_OP_GREATER_EQUAL, norm, vd);
    int bad = hi < 0 ? -1 : tmp(c, n, MGE_OP_OR, lo, hi);
    int bin[3] = {bad, one, zero};
    int badn = bad < 0 ? -1 : mge_onnx_emit_tmp(c, n, MGE_OP_WHERE, 3, bin, 0, NULL);
    int prod = badn < 0 ? -1 : tmp(c, n, MGE_OP_MUL, norm, vs);
    if (prod < 0)
        return -1;
    int64_t last = -1;
    mge_attr sa[2] = {mge_onnx_ais(MGE_KEY_axis, 1, &last), mge_onnx_ab(MGE_KEY_keepdim, 0)};
    int lin = mge_onnx_emit_tmp(c, n, MGE_OP_SUM, 1, &prod, 2, sa);
    int nbad = lin < 0 ? -1 : mge_onnx_emit_tmp(c, n, MGE_OP_SUM, 1, &badn, 2, sa);
    int any = nbad < 0 ? -1 : tmp(c, n, MGE_OP_GREATER, nbad, zero);
    if (any < 0)
        return -1;
    if (b > 0) {
        /* + each batch position's first row: a const [B0..Bb-1, 1...] */
        int64_t od[MGE_MAX_DIMS];
        for (int d = 0; d < q - 1; d++)
            od[d] = d < b ? iv->dims[d] : 1;
        boff_arg ba = {inner};
        int off = const_fill(c, n, MGE_I64, q - 1, od, boff_fill, &ba);
        if (off < 0 || (lin = tmp(c, n, MGE_OP_ADD, lin, off)) < 0)
            return -1;
    }
    int sel[3] = {any, bad_row, lin};
    return mge_onnx_emit_tmp(c, n, MGE_OP_WHERE, 3, sel, 0, NULL);
}

/* The rows of data's first b + k dims (flattened) that indices [..., k]
 * name, with batch_dims b: negative indices count from the end. Needs
 * those dims known at import. */
static mge_status nd_linear(mge_onnx_ctx *c, mge_onnx_node *n, int data, int idx, int b, nd_plan *p)
{
    const mge_value *dv = mge_onnx_value(c, data), *iv = mge_onnx_value(c, idx);
    int r = dv->ndim, q = iv->ndim;
    if (iv->dtype != MGE_I64)
        return mge_onnx_fail(c, n, "indices are %s: expected int64", mge_dtype_name(iv->dtype));
    if (q < 1 || iv->dims[q - 1] < 0)
        return mge_onnx_unsupported(c, n, "indices whose last dim is not known at import");
    int k = (int)iv->dims[q - 1];
    if (b < 0 || b >= q || b >= r || k < 1 || b + k > r)
        return mge_onnx_fail(c, n, "batch_dims %d with indices of rank %d (last dim %d) and data of rank %d", b, q, k,
                             r);
    if (!is_static(dv, 0, b + k) || !is_static(iv, 0, b))
        return mge_onnx_unsupported(c, n, "the indexed dims of data are not known at import");
    for (int d = 0; d < b; d++)
        if (iv->dims[d] != dv->dims[d])
            return mge_onnx_fail(c, n, "batch dim %d is %lld in indices, %lld in data", d, (long long)iv->dims[d],
                                 (long long)dv->dims[d]);
    int64_t dk[MGE_MAX_DIMS], st[MGE_MAX_DIMS], inner = 1;
    for (int j = k - 1; j >= 0; j--) {
        dk[j] = dv->dims[b + j];
        st[j] = inner;
        inner *= dk[j];
    }
    int64_t batch = 1;
    for (int d = 0; d < b; d++)
        batch *= dv->dims[d];
    p->outer = batch * inner;
    int lin = (mge_onnx_data(c, idx) ? nd_const_rows : nd_rows)(c, n, idx, b, k, dk, st, inner);
    if (lin < 0)
        return err_code(c);
    p->lin = lin;
    /* data as [outer, trailing dims...]: the trailing dims from shape(data)
     * unless all known */
    int rest = r - b - k, flat;
    if (is_static(dv, b + k, r)) {
        int64_t sh[MGE_MAX_DIMS];
        sh[0] = p->outer;
        for (int d = 0; d < rest; d++)
            sh[1 + d] = dv->dims[b + k + d];
        mge_attr ra[1] = {mge_onnx_ais(MGE_KEY_shape, 1 + rest, sh)};
        flat = mge_onnx_emit_tmp(c, n, MGE_OP_RESHAPE, 1, &data, 1, ra);
    } else {
        mge_attr ha[1] = {mge_onnx_ai(MGE_KEY_start, b + k)};
        int tail = mge_onnx_emit_tmp(c, n, MGE_OP_SHAPE, 1, &data, 1, ha);
        int head = mge_onnx_const_i64(c, n, 1, &p->outer);
        int sh = tail < 0 || head < 0 ? -1 : tmp(c, n, MGE_OP_CONCAT, head, tail);
        flat = sh < 0 ? -1 : tmp(c, n, MGE_OP_RESHAPE, data, sh);
    }
    if (flat < 0)
        return err_code(c);
    p->flat = flat;
    return MGE_OK;
}

static mge_status conv_gather_nd(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x = mge_onnx_in(c, n, 0), idx = mge_onnx_in(c, n, 1);
    if (x < 0 || idx < 0)
        return mge_onnx_fail(c, n, "expected inputs data and indices");
    int64_t b = c->opset >= 12 ? mge_onnx_attr_i(n, "batch_dims", 0) : 0;
    if (b < 0 || b > MGE_MAX_DIMS)
        return mge_onnx_fail(c, n, "batch_dims %lld", (long long)b);
    nd_plan p;
    mge_status s = nd_linear(c, n, x, idx, (int)b, &p);
    if (s)
        return s;
    mge_attr a[1] = {mge_onnx_ai(MGE_KEY_axis, 0)};
    int in[2] = {p.flat, p.lin};
    return emit1(c, n, MGE_OP_GATHER, 2, in, 1, a);
}

/* ONNX's reduction word as scatter's reduction (kernels/kindex.h's order). */
static mge_status scatter_reduction(mge_onnx_ctx *c, mge_onnx_node *n, int *red)
{
    static const char *const words[] = {"none", "add", "mul", "max", "min"};
    char r[16];
    mge_onnx_attr_s(n, "reduction", "none", r, sizeof r);
    for (*red = 0; *red < 5; ++*red)
        if (strcmp(r, words[*red]) == 0)
            break;
    if (*red == 5)
        return mge_onnx_fail(c, n, "reduction '%s': expected none, add, mul, max or min", r);
    return MGE_OK;
}

static mge_status conv_scatter_nd(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x = mge_onnx_in(c, n, 0), idx = mge_onnx_in(c, n, 1), u = mge_onnx_in(c, n, 2);
    if (x < 0 || idx < 0 || u < 0)
        return mge_onnx_fail(c, n, "expected inputs data, indices and updates");
    int red;
    mge_status s = scatter_reduction(c, n, &red);
    if (s)
        return s;
    if (mge_onnx_value(c, idx)->dtype != MGE_I64)
        return mge_onnx_fail(c, n, "indices are %s: expected int64", mge_dtype_name(mge_onnx_value(c, idx)->dtype));
    int in[3] = {x, idx, u};
    mge_attr a[1] = {mge_onnx_ai(MGE_KEY_reduction, red)};
    return emit1(c, n, MGE_OP_SCATTER_ND, 3, in, red ? 1 : 0, a);
}

/* ScatterElements, and Scatter (opset 9-10, the same op). */
static mge_status conv_scatter_elements(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x = mge_onnx_in(c, n, 0), idx = mge_onnx_in(c, n, 1), u = mge_onnx_in(c, n, 2);
    if (x < 0 || idx < 0 || u < 0)
        return mge_onnx_fail(c, n, "expected inputs data, indices and updates");
    int red = 0;
    mge_status s = strcmp(n->op_type, "Scatter") ? scatter_reduction(c, n, &red) : MGE_OK;
    if (s || (s = check_indices(c, n, idx)))
        return s;
    const mge_value *xv = mge_onnx_value(c, x);
    int64_t axis = mge_onnx_attr_i(n, "axis", 0);
    int ax = mge_onnx_axis(axis, xv->ndim);
    if (ax < 0)
        return mge_onnx_fail(c, n, "axis %lld is out of range for rank %d", (long long)axis, xv->ndim);
    mge_attr a[2] = {mge_onnx_ai(MGE_KEY_axis, ax), mge_onnx_ai(MGE_KEY_reduction, red)};
    int in[3] = {x, idx, u};
    return emit1(c, n, MGE_OP_SCATTER, 3, in, red ? 2 : 1, a);
}

/* ---------------------------------------------------------------- Squeeze, Unsqueeze */

static mge_status squeeze_like(mge_onnx_ctx *c, mge_onnx_node *n, int unsq)
{
    int x = mge_onnx_in(c, n, 0);
    if (x < 0)
        return mge_onnx_fail(c, n, "no input");
    const mge_value *xv = mge_onnx_value(c, x);
    int op = unsq ? MGE_OP_UNSQUEEZE : MGE_OP_SQUEEZE;
    int64_t ax[MGE_MAX_DIMS];
    int na = -1;
    if (c->opset < 13) {
        int64_t t[MGE_MAX_DIMS + 1];
        na = mge_onnx_attr_ints(n, "axes", t, MGE_MAX_DIMS + 1);
        if (na > MGE_MAX_DIMS)
            return mge_onnx_fail(c, n, "axes has %d entries", na);
        memcpy(ax, t, sizeof(int64_t) * (size_t)(na > 0 ? na : 0));
    } else {
        int a = mge_onnx_in(c, n, 1);
        if (a >= 0) {
            const mge_value *av = mge_onnx_value(c, a);
            if ((av->dtype != MGE_I64 && av->dtype != MGE_I32) || av->ndim > 1)
                return mge_onnx_fail(c, n, "axes must be an int64 vector");
            if (!const_ints(c, a, ax, MGE_MAX_DIMS, &na)) {
                mge_status s = need_plan_known(c, n, a, "axes");
                if (s)
                    return s;
                int in[2] = {x, a};
                return emit1(c, n, op, 2, in, 0, NULL);
            }
        }
    }
    if (na < 0) {
        if (unsq)
            return mge_onnx_fail(c, n, "no axes");
        /* all 1-dims: which they are must not depend on the binding */
        if (!is_static(xv, 0, xv->ndim))
            return mge_onnx_unsupported(c, n, "no axes over dims not known at import (which are 1 is not known)");
        na = 0;
        for (int d = 0; d < xv->ndim; d++)
            if (xv->dims[d] == 1)
                ax[na++] = d;
    }
    mge_attr a[1] = {mge_onnx_ais(MGE_KEY_axis, na, ax)};
    if (na == 0)
        return mge_onnx_alias(c, n, 0, x);
    return emit1(c, n, op, 1, &x, 1, a);
}

static mge_status conv_squeeze(mge_onnx_ctx *c, mge_onnx_node *n)
{
    return squeeze_like(c, n, 0);
}

static mge_status conv_unsqueeze(mge_onnx_ctx *c, mge_onnx_node *n)
{
    return squeeze_like(c, n, 1);
}

/* ---------------------------------------------------------------- Concat */

static mge_status conv_concat(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int nin = (int)n->n_input, in[64], cnt = 0;
    if (nin < 1)
        return mge_onnx_fail(c, n, "no inputs");
    int x0 = mge_onnx_in(c, n, 0);
    if (x0 < 0)
        return mge_onnx_fail(c, n, "input 0 is missing");
    int rank = mge_onnx_value(c, x0)->ndim;
    /* opset 1-3: axis optional, default 1 */
    const Onnx__AttributeProto *aa = mge_onnx_attr(n, "axis");
    if (!aa && c->opset >= 4)
        return mge_onnx_fail(c, n, "no axis");
    int64_t axis = mge_onnx_attr_i(n, "axis", 1);
    int ax = mge_onnx_axis(axis, rank);
    if (ax < 0)
        return mge_onnx_fail(c, n, "axis %lld is out of range for rank %d", (long long)axis, rank);
    mge_attr a[1] = {mge_onnx_ai(MGE_KEY_axis, ax)};
    /* mge concat takes 64 inputs: more go in rounds */
    int acc = -1;
    for (int i = 0; i < nin; i++) {
        int v = mge_onnx_in(c, n, i);
        if (v < 0)
            return mge_onnx_fail(c, n, "input %d is missing", i);
        if (cnt == 64) {
            if ((acc = mge_onnx_emit_tmp(c, n, MGE_OP_CONCAT, cnt, in, 1, a)) < 0)
                return err_code(c);
            in[0] = acc;
            cnt = 1;
        }
        in[cnt++] = v;
    }
    if (cnt == 1)
        return mge_onnx_alias(c, n, 0, in[0]);
    return emit1(c, n, MGE_OP_CONCAT, cnt, in, 1, a);
}

/* ---------------------------------------------------------------- Split */

/* Output k of the node as slice [start, end) of x along ax. */
static mge_status split_slice(mge_onnx_ctx *c, mge_onnx_node *n, int x, int ax, int k, int64_t start, int64_t end)
{
    if (k >= (int)n->n_output || !n->output[k] || !*n->output[k])
        return MGE_OK;
    mge_attr a[3] = {mge_onnx_ai(MGE_KEY_axis, ax), mge_onnx_ai(MGE_KEY_start, start), mge_onnx_ai(MGE_KEY_end, end)};
    int v = mge_onnx_emit_tmp(c, n, MGE_OP_SLICE, 1, &x, 3, a);
    if (v < 0)
        return err_code(c);
    return mge_onnx_alias(c, n, k, v);
}

static mge_status conv_split(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x = mge_onnx_in(c, n, 0);
    if (x < 0)
        return mge_onnx_fail(c, n, "no input");
    const mge_value *xv = mge_onnx_value(c, x);
    int nout = (int)n->n_output;
    if (nout < 1)
        return mge_onnx_fail(c, n, "no outputs");
    int64_t axis = mge_onnx_attr_i(n, "axis", 0);
    int ax = mge_onnx_axis(axis, xv->ndim);
    if (ax < 0)
        return mge_onnx_fail(c, n, "axis %lld is out of range for rank %d", (long long)axis, xv->ndim);
    int64_t sz[64];
    int ns = -1, sin = -1;
    if (c->opset >= 18 && mge_onnx_attr(n, "num_outputs")) {
        int64_t k = mge_onnx_attr_i(n, "num_outputs", 0);
        if (k != nout)
            return mge_onnx_fail(c, n, "num_outputs %lld but %d outputs", (long long)k, nout);
        if (mge_onnx_in(c, n, 1) >= 0)
            return mge_onnx_fail(c, n, "both num_outputs and the split input");
    }
    if (c->opset >= 13 || (c->opset < 2 && mge_onnx_in(c, n, 1) >= 0)) {
        sin = mge_onnx_in(c, n, 1);
        if (sin >= 0) {
            const mge_value *sv = mge_onnx_value(c, sin);
            if ((sv->dtype != MGE_I64 && sv->dtype != MGE_I32) || sv->ndim != 1)
                return mge_onnx_fail(c, n, "split must be a 1-D int64 tensor");
            if (const_ints(c, sin, sz, 64, &ns))
                sin = -1;
            else if (need_plan_known(c, n, sin, "split"))
                return MGE_ERR_UNSUPPORTED;
            else if (nout > 4)
                return mge_onnx_unsupported(c, n, "%d outputs with split sizes computed at plan time (mge splits "
                                            "into at most 4)", nout);
        }
    } else {
        ns = mge_onnx_attr_ints(n, "split", sz, 64);
        if (ns > 64)
            return mge_onnx_unsupported(c, n, "%d outputs (at most 64)", ns);
    }
    if (ns >= 0 && ns != nout)
        return mge_onnx_fail(c, n, "split has %d sizes for %d outputs", ns, nout);
    if (nout == 1 && sin < 0 && (ns < 0 || sz[0] == xv->dims[ax]))
        return mge_onnx_alias(c, n, 0, x);
    if (nout <= 4) {
        mge_attr a[2] = {mge_onnx_ai(MGE_KEY_axis, ax), mge_onnx_ais(MGE_KEY_sizes, ns, sz)};
        int in[2] = {x, sin};
        return mge_onnx_emit(c, n, MGE_OP_SPLIT, sin >= 0 ? 2 : 1, in, ns >= 0 ? 2 : 1, a, nout) < 0 ? err_code(c)
                                                                                                   : MGE_OK;
    }
    /* more than mge split's 4 outputs: one slice each */
    if (ns < 0) {
        int64_t dim = xv->dims[ax];
        if (dim < 0)
            return mge_onnx_unsupported(c, n, "%d equal parts of a dim not known at import (mge splits into at most "
                                        "4)", nout);
        if (nout > 64)
            return mge_onnx_unsupported(c, n, "%d outputs (at most 64)", nout);
        int64_t ch = (dim + nout - 1) / nout;
        for (int i = 0; i < nout; i++) {
            int64_t s0 = ch * i;
            sz[i] = s0 >= dim ? 0 : s0 + ch > dim ? dim - s0 : ch;
        }
        ns = nout;
    }
    int64_t at = 0;
    for (int i = 0; i < ns; i++) {
        if (sz[i] < 0)
            return mge_onnx_fail(c, n, "split size %lld", (long long)sz[i]);
        mge_status s = split_slice(c, n, x, ax, i, at, at + sz[i]);
        if (s)
            return s;
        at += sz[i];
    }
    if (xv->dims[ax] >= 0 && at != xv->dims[ax])
        return mge_onnx_fail(c, n, "split sizes add up to %lld but the dim is %lld", (long long)at,
                             (long long)xv->dims[ax]);
    return MGE_OK;
}

/* ---------------------------------------------------------------- Slice */

static mge_status conv_slice(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x = mge_onnx_in(c, n, 0);
    if (x < 0)
        return mge_onnx_fail(c, n, "no input");
    const mge_value *xv = mge_onnx_value(c, x);
    int in[5] = {x, -1, -1, -1, -1};
    if (c->opset < 10) {
        int64_t s[MGE_MAX_DIMS + 1], e[MGE_MAX_DIMS + 1], a[MGE_MAX_DIMS + 1];
        int ns = mge_onnx_attr_ints(n, "starts", s, MGE_MAX_DIMS + 1);
        int ne = mge_onnx_attr_ints(n, "ends", e, MGE_MAX_DIMS + 1);
        int na = mge_onnx_attr_ints(n, "axes", a, MGE_MAX_DIMS + 1);
        if (ns < 0 || ne != ns || (na >= 0 && na != ns) || ns > xv->ndim)
            return mge_onnx_fail(c, n, "starts, ends (and axes) must be given with equal counts up to the rank");
        if (na < 0)
            for (int i = 0; i < ns; i++)
                a[i] = i;
        if ((in[1] = mge_onnx_const_i64(c, n, ns, s)) < 0 || (in[2] = mge_onnx_const_i64(c, n, ns, e)) < 0 ||
            (in[3] = mge_onnx_const_i64(c, n, ns, a)) < 0)
            return err_code(c);
        return emit1(c, n, MGE_OP_SLICE, 4, in, 0, NULL);
    }
    static const char *const what[4] = {"starts", "ends", "axes", "steps"};
    int64_t len = -1;
    for (int k = 0; k < 4; k++) {
        int v = mge_onnx_in(c, n, k + 1);
        if (v < 0) {
            if (k < 2)
                return mge_onnx_fail(c, n, "no %s", what[k]);
            continue;
        }
        const mge_value *bv = mge_onnx_value(c, v);
        if ((bv->dtype != MGE_I64 && bv->dtype != MGE_I32) || bv->ndim != 1)
            return mge_onnx_fail(c, n, "%s must be a 1-D int32 or int64 tensor", what[k]);
        if (k == 0)
            len = bv->dims[0];
        else if (bv->dims[0] >= 0 && len >= 0 && bv->dims[0] != len)
            return mge_onnx_fail(c, n, "%s has %lld entries, starts %lld", what[k], (long long)bv->dims[0],
                                 (long long)len);
        mge_status s = need_plan_known(c, n, v, what[k]);
        if (s)
            return s;
        in[k + 1] = v;
    }
    int nin = in[4] >= 0 ? 5 : in[3] >= 0 ? 4 : 3;
    if (in[4] >= 0 && in[3] < 0) {
        /* steps without axes: axes 0..len-1 made explicit (mge's inputs are positional) */
        if (len < 0 || len > MGE_MAX_DIMS)
            return mge_onnx_unsupported(c, n, "steps without axes, and the count of starts not known at import");
        int64_t a[MGE_MAX_DIMS];
        for (int i = 0; i < len; i++)
            a[i] = i;
        if ((in[3] = mge_onnx_const_i64(c, n, (int)len, a)) < 0)
            return err_code(c);
    }
    return emit1(c, n, MGE_OP_SLICE, nin, in, 0, NULL);
}

/* ---------------------------------------------------------------- Transpose */

static mge_status conv_transpose(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x = mge_onnx_in(c, n, 0);
    if (x < 0)
        return mge_onnx_fail(c, n, "no input");
    int rank = mge_onnx_value(c, x)->ndim;
    int64_t perm[MGE_MAX_DIMS + 1];
    int np = mge_onnx_attr_ints(n, "perm", perm, MGE_MAX_DIMS + 1);
    if (np < 0) {
        np = rank;
        for (int i = 0; i < rank; i++)
            perm[i] = rank - 1 - i;
    }
    if (np != rank)
        return mge_onnx_fail(c, n, "perm has %d entries for rank %d", np, rank);
    char seen[MGE_MAX_DIMS] = {0};
    int ident = 1;
    for (int i = 0; i < np; i++) {
        if (perm[i] < 0 || perm[i] >= rank || seen[perm[i]])
            return mge_onnx_fail(c, n, "perm is not a permutation of 0..%d", rank - 1);
        seen[perm[i]] = 1;
        ident &= perm[i] == i;
    }
    if (ident)
        return mge_onnx_alias(c, n, 0, x);
    mge_attr a[1] = {mge_onnx_ais(MGE_KEY_perm, np, perm)};
    return emit1(c, n, MGE_OP_TRANSPOSE, 1, &x, 1, a);
}

/* ---------------------------------------------------------------- Expand, Tile */

/* op(x, v) with v an integer vector known when mge plans: a constant one
 * as the attribute key. */
static mge_status vec_op(mge_onnx_ctx *c, mge_onnx_node *n, int op, int key, const char *what)
{
    int x = mge_onnx_in(c, n, 0), v = mge_onnx_in(c, n, 1);
    if (x < 0 || v < 0)
        return mge_onnx_fail(c, n, "expected inputs input and %s", what);
    const mge_value *vv = mge_onnx_value(c, v);
    if (vv->dtype != MGE_I64 || vv->ndim != 1)
        return mge_onnx_fail(c, n, "%s must be a 1-D int64 tensor", what);
    int64_t k[MGE_MAX_DIMS];
    int cnt;
    if (const_ints(c, v, k, MGE_MAX_DIMS, &cnt)) {
        mge_attr a[1] = {mge_onnx_ais(key, cnt, k)};
        return emit1(c, n, op, 1, &x, 1, a);
    }
    mge_status s = need_plan_known(c, n, v, what);
    if (s)
        return s;
    int in[2] = {x, v};
    return emit1(c, n, op, 2, in, 0, NULL);
}

static mge_status conv_expand(mge_onnx_ctx *c, mge_onnx_node *n)
{
    return vec_op(c, n, MGE_OP_EXPAND, MGE_KEY_shape, "shape");
}

static mge_status conv_tile(mge_onnx_ctx *c, mge_onnx_node *n)
{
    return vec_op(c, n, MGE_OP_TILE, MGE_KEY_repeats, "repeats");
}

/* ---------------------------------------------------------------- Range, ConstantOfShape */

static mge_status conv_range(mge_onnx_ctx *c, mge_onnx_node *n)
{
    static const char *const what[3] = {"start", "limit", "delta"};
    int in[3];
    for (int k = 0; k < 3; k++) {
        if ((in[k] = mge_onnx_in(c, n, k)) < 0)
            return mge_onnx_fail(c, n, "no %s", what[k]);
        mge_dtype dt = mge_onnx_value(c, in[k])->dtype;
        if (dt != MGE_F32 && dt != MGE_I32 && dt != MGE_I64)
            return mge_onnx_unsupported(c, n, "Range over %s (mge has f32, i32 and i64 ranges)", mge_dtype_name(dt));
        mge_status s = need_plan_known(c, n, in[k], what[k]);
        if (s)
            return s;
    }
    return emit1(c, n, MGE_OP_RANGE, 3, in, 0, NULL);
}

static mge_status conv_constant_of_shape(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int s = mge_onnx_in(c, n, 0);
    if (s < 0)
        return mge_onnx_fail(c, n, "no input");
    const mge_value *sv = mge_onnx_value(c, s);
    if (sv->dtype != MGE_I64 || sv->ndim != 1)
        return mge_onnx_fail(c, n, "the shape must be a 1-D int64 tensor");
    mge_status st = need_plan_known(c, n, s, "shape");
    if (st)
        return st;
    double value = 0;
    mge_dtype dt = MGE_F32;
    const Onnx__AttributeProto *a = mge_onnx_attr(n, "value");
    if (a) {
        if (!a->t)
            return mge_onnx_fail(c, n, "value is not a tensor");
        mge_tensor t;
        st = mge_onnx_tensor(a->t, NULL, &t, c->err);
        if (st == MGE_ERR_UNSUPPORTED)
            return mge_onnx_unsupported(c, n, "value: %s", c->err->msg);
        if (st)
            return mge_onnx_fail(c, n, "value: %s", c->err->msg);
        if (mge_tensor_numel(&t) != 1 || !t.data) {
            mge_tensor_free(&t);
            return mge_onnx_fail(c, n, "value must have one element");
        }
        dt = t.dtype;
        switch (dt) {
        case MGE_F32: value = *(const float *)t.data; break;
        case MGE_F16: value = mge_f16_to_f32(*(const uint16_t *)t.data); break;
        case MGE_BF16: value = mge_bf16_to_f32(*(const uint16_t *)t.data); break;
        case MGE_I8: value = *(const int8_t *)t.data; break;
        case MGE_U8: case MGE_BOOL: value = *(const uint8_t *)t.data; break;
        case MGE_I32: value = *(const int32_t *)t.data; break;
        case MGE_I64: value = (double)*(const int64_t *)t.data; break;
        default: value = mge_dtype_get(dt, t.data, 0); break;
        }
        mge_tensor_free(&t);
        if ((dt == MGE_I64 || dt == MGE_U64) && (value > 9007199254740992.0 || value < -9007199254740992.0))
            return mge_onnx_unsupported(c, n, "an %s value beyond 2^53 (mge holds the value as a double)",
                                         dt == MGE_I64 ? "int64" : "uint64");
    }
    mge_attr at[2] = {mge_onnx_af(MGE_KEY_value, value), mge_onnx_ai(MGE_KEY_dtype, dt)};
    return emit1(c, n, MGE_OP_CONSTANT_OF_SHAPE, 1, &s, 2, at);
}

/* ---------------------------------------------------------------- OneHot */

static mge_status conv_one_hot(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int idx = mge_onnx_in(c, n, 0), dep = mge_onnx_in(c, n, 1), vals = mge_onnx_in(c, n, 2);
    if (idx < 0 || dep < 0 || vals < 0)
        return mge_onnx_fail(c, n, "expected inputs indices, depth and values");
    const mge_value *iv = mge_onnx_value(c, idx), *vv = mge_onnx_value(c, vals);
    if (vv->ndim != 1 || vv->dims[0] != 2)
        return mge_onnx_fail(c, n, "values must be [off, on]");
    int64_t axis = mge_onnx_attr_i(n, "axis", -1);
    if (mge_onnx_axis(axis, iv->ndim + 1) < 0)
        return mge_onnx_fail(c, n, "axis %lld is out of range for rank %d", (long long)axis, iv->ndim + 1);
    /* depth: any numeric scalar; known at import it is the attribute */
    double d[1];
    int cnt = 0;
    int64_t depth = -1;
    if (mge_onnx_data(c, dep)) {
        mge_status s = mge_onnx_known(c, n, dep, "depth", d, 1, &cnt);
        if (s)
            return s;
        if (cnt != 1 || !(d[0] >= 1) || d[0] > 4e18)
            return mge_onnx_fail(c, n, "depth must be one number >= 1");
        depth = (int64_t)d[0];
    } else {
        mge_dtype dt = mge_onnx_value(c, dep)->dtype;
        mge_status s = need_plan_known(c, n, dep, "depth");
        if (s)
            return s;
        if (dt != MGE_I64 && dt != MGE_I32)
            return mge_onnx_unsupported(c, n, "a %s depth computed at plan time (mge takes int depths)",
                                        mge_dtype_name(dt));
    }
    /* indices of any numeric type: floats are cast (truncated) to int64 */
    int ix = idx;
    if (iv->dtype != MGE_I64 && iv->dtype != MGE_I32) {
        mge_attr ca[1] = {mge_onnx_ai(MGE_KEY_dtype, MGE_I64)};
        if ((ix = mge_onnx_emit_tmp(c, n, MGE_OP_CAST, 1, &idx, 1, ca)) < 0)
            return err_code(c);
    }
    if (c->opset < 11) {
        /* before opset 11 a negative index is out of range (all off): mge
         * counts it from the end, so it becomes depth */
        if (depth < 0)
            return mge_onnx_unsupported(c, n, "opset %lld negative indices with a depth not known at import",
                                        (long long)c->opset);
        mge_dtype it = mge_onnx_value(c, ix)->dtype;
        int zero = const_scalar(c, n, it, 0), dv = const_scalar(c, n, it, (double)depth);
        int neg = zero < 0 || dv < 0 ? -1 : tmp(c, n, MGE_OP_LESS, ix, zero);
        if (neg < 0)
            return err_code(c);
        int win[3] = {neg, dv, ix};
        if ((ix = mge_onnx_emit_tmp(c, n, MGE_OP_WHERE, 3, win, 0, NULL)) < 0)
            return err_code(c);
    }
    mge_attr a[2] = {mge_onnx_ai(MGE_KEY_axis, axis), mge_onnx_ai(MGE_KEY_depth, depth)};
    if (depth >= 0) {
        int in[2] = {ix, vals};
        return emit1(c, n, MGE_OP_ONE_HOT, 2, in, 2, a);
    }
    int in[3] = {ix, dep, vals};
    return emit1(c, n, MGE_OP_ONE_HOT, 3, in, 1, a);
}

/* ---------------------------------------------------------------- Trilu, EyeLike */

typedef struct diag_arg {
    int64_t cols, k;
    int mode;  /* 0: j - i (a difference), 1: j - i >= k, 2: j - i <= k, 3: j - i == k */
} diag_arg;

static double diag_fill(const void *arg, int64_t at)
{
    const diag_arg *a = arg;
    int64_t i = at / a->cols, j = at % a->cols, dj = j - i;
    switch (a->mode) {
    case 1: return dj >= a->k;
    case 2: return dj <= a->k;
    case 3: return dj == a->k;
    default: return (double)dj;
    }
}

/* j - i over x's last two dims [rows, cols] when they are known only at
 * plan time: range(cols) - range(rows)[:, None]. */
static int ramp_diff(mge_onnx_ctx *c, mge_onnx_node *n, int x, int r)
{
    int zero = const_scalar(c, n, MGE_I64, 0), one = const_scalar(c, n, MGE_I64, 1), ramp[2];
    if (zero < 0 || one < 0)
        return -1;
    for (int k = 0; k < 2; k++) {
        mge_attr a[2] = {mge_onnx_ai(MGE_KEY_start, r - 2 + k), mge_onnx_ai(MGE_KEY_end, r - 1 + k)};
        int d = mge_onnx_emit_tmp(c, n, MGE_OP_SHAPE, 1, &x, 2, a);
        int in[3] = {zero, d, one};
        if (d < 0 || (ramp[k] = mge_onnx_emit_tmp(c, n, MGE_OP_RANGE, 3, in, 0, NULL)) < 0)
            return -1;
    }
    int64_t ax = 1;
    mge_attr ua[1] = {mge_onnx_ais(MGE_KEY_axis, 1, &ax)};
    int rows = mge_onnx_emit_tmp(c, n, MGE_OP_UNSQUEEZE, 1, &ramp[0], 1, ua);
    return rows < 0 ? -1 : tmp(c, n, MGE_OP_SUB, ramp[1], rows);
}

/* Trilu: where(mask, x, 0), the mask over the last two dims (broadcast
 * over the rest): a constant when those dims and k are known at import,
 * else compared from a column-minus-row ramp at run time. */
static mge_status conv_trilu(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x = mge_onnx_in(c, n, 0), kv = mge_onnx_in(c, n, 1);
    if (x < 0)
        return mge_onnx_fail(c, n, "no input");
    const mge_value *xv = mge_onnx_value(c, x);
    int r = xv->ndim, upper = mge_onnx_attr_i(n, "upper", 1) != 0;
    if (r < 2)
        return mge_onnx_fail(c, n, "input of rank %d: expected at least 2", r);
    if (xv->dtype == MGE_QS8 || xv->dtype == MGE_QS32)
        return mge_onnx_unsupported(c, n, "Trilu over quantized data");
    int64_t rows = xv->dims[r - 2], cols = xv->dims[r - 1], k = 0, kk[1];
    if ((is_static(xv, 0, r) && numel_of(xv) == 0) || rows == 0 || cols == 0)
        return mge_onnx_alias(c, n, 0, x);   /* empty: nothing to mask */
    if (kv >= 0) {
        const mge_value *k1 = mge_onnx_value(c, kv);
        if (k1->ndim > 1 || (k1->ndim == 1 && k1->dims[0] != 1))
            return mge_onnx_fail(c, n, "k must be a scalar");
    }
    int kc = 1, kconst = kv < 0 || (const_ints(c, kv, kk, 1, &kc) && kc == 1);
    if (kv >= 0 && kconst)
        k = kk[0];
    if (kv >= 0 && !kconst && mge_onnx_value(c, kv)->dtype != MGE_I64)
        return mge_onnx_fail(c, n, "k must be an int64 scalar");
    int64_t md[2] = {rows, cols};
    int mask, zero = const_scalar(c, n, xv->dtype, 0);
    if (zero < 0)
        return err_code(c);
    if (kconst && rows >= 0 && cols >= 0) {
        diag_arg da = {cols, k, upper ? 1 : 2};
        mask = const_fill(c, n, MGE_BOOL, 2, md, diag_fill, &da);
    } else {
        int diff = rows >= 0 && cols >= 0 ? -1 : ramp_diff(c, n, x, r);
        if (rows >= 0 && cols >= 0) {
            diag_arg da = {cols, 0, 0};
            diff = const_fill(c, n, MGE_I64, 2, md, diag_fill, &da);
        }
        int kk2 = kconst ? const_scalar(c, n, MGE_I64, (double)k) : kv;
        mask = diff < 0 || kk2 < 0 ? -1 : tmp(c, n, upper ? MGE_OP_GREATER_EQUAL : MGE_OP_LESS_EQUAL, diff, kk2);
    }
    if (mask < 0)
        return err_code(c);
    int in[3] = {mask, x, zero};
    return emit1(c, n, MGE_OP_WHERE, 3, in, 0, NULL);
}

static mge_status conv_eye_like(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x = mge_onnx_in(c, n, 0);
    if (x < 0)
        return mge_onnx_fail(c, n, "no input");
    const mge_value *xv = mge_onnx_value(c, x);
    if (xv->ndim != 2)
        return mge_onnx_fail(c, n, "input of rank %d: expected 2", xv->ndim);
    mge_dtype dt = xv->dtype;
    if (mge_onnx_attr(n, "dtype")) {
        int64_t od = mge_onnx_attr_i(n, "dtype", 1);
        int m = mge_onnx_dtype((int)od);
        if (m < 0)
            return mge_onnx_unsupported(c, n, "dtype %s: mge has no such dtype", mge_onnx_dtype_name((int)od));
        dt = (mge_dtype)m;
    }
    int64_t k = mge_onnx_attr_i(n, "k", 0);
    if (!is_static(xv, 0, 2)) {
        /* cast(j - i == k) over a ramp of the dims known when mge plans */
        int diff = ramp_diff(c, n, x, 2), kc = const_scalar(c, n, MGE_I64, (double)k);
        int eq = diff < 0 || kc < 0 ? -1 : tmp(c, n, MGE_OP_EQUAL, diff, kc);
        if (eq < 0)
            return err_code(c);
        mge_attr ca[1] = {mge_onnx_ai(MGE_KEY_dtype, dt)};
        return emit1(c, n, MGE_OP_CAST, 1, &eq, 1, ca);
    }
    if (xv->dims[0] * xv->dims[1] == 0)
        return mge_onnx_unsupported(c, n, "an empty identity");
    diag_arg da = {xv->dims[1], k, 3};
    int v = const_fill(c, n, dt, 2, xv->dims, diag_fill, &da);
    if (v < 0)
        return err_code(c);
    return mge_onnx_alias(c, n, 0, v);
}

/* ---------------------------------------------------------------- Compress, NonZero, ReverseSequence */

/* Compress with a constant condition is an index_select of the kept
 * positions; a computed one gives a data-dependent shape. */
static mge_status conv_compress(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x = mge_onnx_in(c, n, 0), cond = mge_onnx_in(c, n, 1);
    if (x < 0 || cond < 0)
        return mge_onnx_fail(c, n, "expected inputs input and condition");
    const mge_tensor *ct = mge_onnx_data(c, cond);
    if (!ct) {
        mge_onnx_note_needs(c, cond);
        return mge_onnx_unsupported(c, n, "a condition computed at run time (the output's shape depends on data)");
    }
    if (ct->ndim != 1 || (ct->dtype != MGE_BOOL && ct->dtype != MGE_U8))
        return mge_onnx_fail(c, n, "condition must be a 1-D bool tensor");
    const mge_value *xv = mge_onnx_value(c, x);
    const Onnx__AttributeProto *aa = mge_onnx_attr(n, "axis");
    int src = x, ax = 0;
    int64_t dim;
    if (aa) {
        int64_t axis = mge_onnx_attr_i(n, "axis", 0);
        if ((ax = mge_onnx_axis(axis, xv->ndim)) < 0)
            return mge_onnx_fail(c, n, "axis %lld is out of range for rank %d", (long long)axis, xv->ndim);
        dim = xv->dims[ax];
    } else {
        int64_t flat[1] = {-1};
        mge_attr ra[1] = {mge_onnx_ais(MGE_KEY_shape, 1, flat)};
        if ((src = mge_onnx_emit_tmp(c, n, MGE_OP_RESHAPE, 1, &x, 1, ra)) < 0)
            return err_code(c);
        dim = is_static(xv, 0, xv->ndim) ? numel_of(xv) : -1;
    }
    if (dim < 0)
        return mge_onnx_unsupported(c, n, "the compressed dim is not known at import");
    int64_t m = mge_tensor_numel(ct), kept = 0;
    if (m > dim)
        m = dim;   /* a longer condition is cut to the dim */
    mge_tensor t;
    int64_t cnt = 0;
    for (int64_t i = 0; i < m; i++)
        cnt += ((const uint8_t *)ct->data)[i] != 0;
    if (cnt == 0)
        return mge_onnx_unsupported(c, n, "a condition that keeps nothing (an empty output)");
    int64_t d1[1] = {cnt};
    if (mge_tensor_alloc(&t, MGE_I64, 1, d1, c->err))
        return err_code(c);
    for (int64_t i = 0; i < m; i++)
        if (((const uint8_t *)ct->data)[i])
            ((int64_t *)t.data)[kept++] = i;
    int iv = mge_onnx_const(c, n, &t);
    if (iv < 0)
        return err_code(c);
    mge_attr a[1] = {mge_onnx_ai(MGE_KEY_axis, ax)};
    int in[2] = {src, iv};
    return emit1(c, n, MGE_OP_INDEX_SELECT, 2, in, 1, a);
}

static mge_status conv_nonzero(mge_onnx_ctx *c, mge_onnx_node *n)
{
    return mge_onnx_unsupported(c, n, "the output's shape depends on the data (mge plans static shapes)");
}

/* ReverseSequence: gather_elements along the time axis with index
 * t < len[b] ? len[b] - 1 - t : t, built over [T, B] (or [B, T]) and
 * expanded to x's shape. */
static mge_status conv_reverse_sequence(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x = mge_onnx_in(c, n, 0), lens = mge_onnx_in(c, n, 1);
    if (x < 0 || lens < 0)
        return mge_onnx_fail(c, n, "expected inputs input and sequence_lens");
    const mge_value *xv = mge_onnx_value(c, x), *lv = mge_onnx_value(c, lens);
    int64_t ba = mge_onnx_attr_i(n, "batch_axis", 1), ta = mge_onnx_attr_i(n, "time_axis", 0);
    int r = xv->ndim;
    if (r < 2 || !((ba == 0 && ta == 1) || (ba == 1 && ta == 0)))
        return mge_onnx_fail(c, n, "batch_axis %lld and time_axis %lld over rank %d: expected 0 and 1", (long long)ba,
                             (long long)ta, r);
    if (lv->dtype != MGE_I64 || lv->ndim != 1)
        return mge_onnx_fail(c, n, "sequence_lens must be a 1-D int64 tensor");
    int zero = const_scalar(c, n, MGE_I64, 0), one = const_scalar(c, n, MGE_I64, 1);
    if (zero < 0 || one < 0)
        return err_code(c);
    mge_attr sa[2] = {mge_onnx_ai(MGE_KEY_start, ta), mge_onnx_ai(MGE_KEY_end, ta + 1)};
    int tdim = mge_onnx_emit_tmp(c, n, MGE_OP_SHAPE, 1, &x, 2, sa);
    int rin[3] = {zero, tdim, one};
    int t = tdim < 0 ? -1 : mge_onnx_emit_tmp(c, n, MGE_OP_RANGE, 3, rin, 0, NULL);
    int64_t a1 = 1 - ta, a2 = ta;   /* t along dim ta of a 2-D index, lens along the other */
    mge_attr u1[1] = {mge_onnx_ais(MGE_KEY_axis, 1, &a1)}, u2[1] = {mge_onnx_ais(MGE_KEY_axis, 1, &a2)};
    int tc = t < 0 ? -1 : mge_onnx_emit_tmp(c, n, MGE_OP_UNSQUEEZE, 1, &t, 1, u1);
    int lc = tc < 0 ? -1 : mge_onnx_emit_tmp(c, n, MGE_OP_UNSQUEEZE, 1, &lens, 1, u2);
    int last = lc < 0 ? -1 : tmp(c, n, MGE_OP_SUB, lc, one);
    int rev = last < 0 ? -1 : tmp(c, n, MGE_OP_SUB, last, tc);
    int keep = rev < 0 ? -1 : tmp(c, n, MGE_OP_LESS, tc, lc);
    int win[3] = {keep, rev, tc};
    int idx = keep < 0 ? -1 : mge_onnx_emit_tmp(c, n, MGE_OP_WHERE, 3, win, 0, NULL);
    if (idx < 0)
        return err_code(c);
    if (r > 2) {
        int64_t ax[MGE_MAX_DIMS];
        for (int d = 2; d < r; d++)
            ax[d - 2] = d;
        mge_attr ua[1] = {mge_onnx_ais(MGE_KEY_axis, r - 2, ax)};
        int sh = mge_onnx_emit_tmp(c, n, MGE_OP_SHAPE, 1, &x, 0, NULL);
        int u = sh < 0 ? -1 : mge_onnx_emit_tmp(c, n, MGE_OP_UNSQUEEZE, 1, &idx, 1, ua);
        if (u < 0 || (idx = tmp(c, n, MGE_OP_EXPAND, u, sh)) < 0)
            return err_code(c);
    }
    mge_attr ga[1] = {mge_onnx_ai(MGE_KEY_axis, ta)};
    int in[2] = {x, idx};
    return emit1(c, n, MGE_OP_GATHER_ELEMENTS, 2, in, 1, ga);
}

const mge_onnx_op mge_onnx_ops_shape[] = {
    {"Shape", conv_shape, 1},
    {"Size", conv_size, 1},
    {"Gather", conv_gather, 1},
    {"GatherElements", conv_gather_elements, 11},
    {"GatherND", conv_gather_nd, 11},
    {"ScatterElements", conv_scatter_elements, 11},
    {"Scatter", conv_scatter_elements, 9},
    {"ScatterND", conv_scatter_nd, 11},
    {"Squeeze", conv_squeeze, 1},
    {"Unsqueeze", conv_unsqueeze, 1},
    {"Concat", conv_concat, 1},
    {"Split", conv_split, 1},
    {"Slice", conv_slice, 1},
    {"Transpose", conv_transpose, 1},
    {"Expand", conv_expand, 8},
    {"Tile", conv_tile, 6},
    {"Range", conv_range, 11},
    {"ConstantOfShape", conv_constant_of_shape, 9},
    {"OneHot", conv_one_hot, 9},
    {"Trilu", conv_trilu, 14},
    {"EyeLike", conv_eye_like, 9},
    {"Compress", conv_compress, 9},
    {"NonZero", conv_nonzero, 9},
    {"ReverseSequence", conv_reverse_sequence, 10},
    {NULL, NULL, 0},
};
