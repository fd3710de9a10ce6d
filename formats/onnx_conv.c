/* onnx_conv.c — the helpers ONNX op converters use: attributes, known
 * input values, emitting mge nodes under the ONNX output names, and the
 * unsupported list. The name map itself is the reader's (onnx_read.c). */
#include "onnx.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* onnx_read.c */
mge_status mge_onnx_define(mge_onnx_ctx *c, const char *name, int v);
mge_status mge_onnx_fresh_name(mge_onnx_ctx *c, const char *base, char *out, size_t n);

const char *mge_onnx_node_label(mge_onnx_node *n, char *b, size_t bn)
{
    if (n->name && *n->name)
        snprintf(b, bn, "'%s' (%s)", n->name, n->op_type ? n->op_type : "?");
    else if (n->n_output && n->output[0] && *n->output[0])
        snprintf(b, bn, "%s -> '%s'", n->op_type ? n->op_type : "?", n->output[0]);
    else
        snprintf(b, bn, "%s", n->op_type ? n->op_type : "?");
    return b;
}

/* ---------------------------------------------------------------- inputs */

int mge_onnx_nin(mge_onnx_node *n)
{
    int k = (int)n->n_input;
    while (k > 0 && (!n->input[k - 1] || !*n->input[k - 1]))
        k--;
    return k;
}

int mge_onnx_in(mge_onnx_ctx *c, mge_onnx_node *n, int i)
{
    if (i < 0 || i >= (int)n->n_input || !n->input[i] || !*n->input[i])
        return -1;
    return mge_onnx_lookup(c, n->input[i]);
}

const mge_value *mge_onnx_value(mge_onnx_ctx *c, int v)
{
    return v >= 0 && v < c->g->nvalues ? &c->g->values[v] : NULL;
}

const mge_tensor *mge_onnx_data(mge_onnx_ctx *c, int v)
{
    const mge_value *x = mge_onnx_value(c, v);
    if (!x || x->kind == MGE_VAL_INPUT)
        return NULL;
    if (x->kind == MGE_VAL_NODE)
        return mge_onnx_fold(c, v);
    return x->data;
}

void mge_onnx_make_param(mge_onnx_ctx *c, int v, int state)
{
    mge_value *x = (mge_value *)mge_onnx_value(c, v);
    if (x && (x->kind == MGE_VAL_CONST || x->kind == MGE_VAL_PARAM) && x->data && mge_dtype_is_float(x->dtype))
        x->kind = state ? MGE_VAL_STATE : MGE_VAL_PARAM;
}

static double elem(const mge_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case MGE_F32: return ((const float *)t->data)[i];
    case MGE_F16: return mge_f16_to_f32(((const uint16_t *)t->data)[i]);
    case MGE_BF16: return mge_bf16_to_f32(((const uint16_t *)t->data)[i]);
    case MGE_I8: return ((const int8_t *)t->data)[i];
    case MGE_U8: case MGE_BOOL: return ((const uint8_t *)t->data)[i];
    case MGE_I32: return ((const int32_t *)t->data)[i];
    case MGE_I64: return (double)((const int64_t *)t->data)[i];
    case MGE_F64: case MGE_I16: case MGE_U16: case MGE_U32: case MGE_U64: return mge_dtype_get(t->dtype, t->data, i);
    default: return NAN;
    }
}

mge_status mge_onnx_known(mge_onnx_ctx *c, mge_onnx_node *n, int v, const char *what, double *vals, int max,
                          int *cnt)
{
    *cnt = 0;
    const mge_tensor *t = mge_onnx_data(c, v);
    if (t) {
        int64_t m = mge_tensor_numel(t);
        if (m > max)
            return mge_onnx_fail(c, n, "its %s has %lld elements (at most %d expected)", what, (long long)m, max);
        if (m && !t->data)
            return mge_onnx_fail(c, n, "its %s has no data", what);
        for (int64_t i = 0; i < m; i++)
            vals[i] = elem(t, i);
        *cnt = (int)m;
        return MGE_OK;
    }
    if (v < 0)
        return mge_onnx_fail(c, n, "its %s is missing", what);
    /* shape arithmetic: known at every probe binding, and the same at each */
    mge_tdesc d0;
    memset(&d0, 0, sizeof d0);
    for (int p = 0; p < 5; p++) {
        mge_tdesc d;
        memset(&d, 0, sizeof d);
        if (mge_graph_probe_desc(c->g, v, p, &d, NULL) || !d.known)
            goto unknown;
        if (p == 0)
            d0 = d;
        else if (d.ndim != d0.ndim || memcmp(d.dims, d0.dims, sizeof(int64_t) * (size_t)d.ndim) ||
                 memcmp(d.val, d0.val, sizeof d.val))
            goto unknown;
    }
    int64_t m = 1;
    for (int k = 0; k < d0.ndim; k++)
        m *= d0.dims[k];
    if (m > max || m > MGE_TDESC_NVAL)
        return mge_onnx_fail(c, n, "its %s has %lld elements (at most %d expected)", what, (long long)m, max);
    for (int64_t i = 0; i < m; i++)
        vals[i] = d0.val[i];
    *cnt = (int)m;
    return MGE_OK;
unknown:
    mge_onnx_note_needs(c, v);
    mge_onnx_unsupported(c, n, "its %s ('%s') is not a constant: mge needs it known at import", what,
                         c->g->values[v].name);
    return MGE_ERR_UNSUPPORTED;
}

mge_status mge_onnx_known_ints(mge_onnx_ctx *c, mge_onnx_node *n, int v, const char *what, int64_t *vals, int max,
                               int *cnt)
{
    double d[64];
    if (max > 64)
        max = 64;
    mge_status s = mge_onnx_known(c, n, v, what, d, max, cnt);
    if (s)
        return s;
    for (int i = 0; i < *cnt; i++) {
        if (d[i] != d[i] || d[i] > 9.2e18 || d[i] < -9.2e18)
            vals[i] = d[i] > 0 ? INT64_MAX : INT64_MIN;
        else
            vals[i] = (int64_t)d[i];
    }
    /* int64 extremes (INT64_MAX as "to the end") lose exactness as doubles */
    const mge_tensor *t = mge_onnx_data(c, v);
    if (t && t->dtype == MGE_I64)
        for (int i = 0; i < *cnt; i++)
            vals[i] = ((const int64_t *)t->data)[i];
    return MGE_OK;
}

/* ---------------------------------------------------------------- attributes */

const Onnx__AttributeProto *mge_onnx_attr(mge_onnx_node *n, const char *name)
{
    for (size_t i = 0; i < n->n_attribute; i++)
        if (n->attribute[i]->name && strcmp(n->attribute[i]->name, name) == 0)
            return n->attribute[i];
    return NULL;
}

int64_t mge_onnx_attr_i(mge_onnx_node *n, const char *name, int64_t def)
{
    const Onnx__AttributeProto *a = mge_onnx_attr(n, name);
    if (!a)
        return def;
    if (a->has_i)
        return a->i;
    if (a->n_ints == 1)
        return a->ints[0];
    /* an integer written as a float (old exporters): only when it is one;
     * a float past int64's range would make the cast undefined */
    if (a->has_f && a->f == floorf(a->f) && fabsf(a->f) < 9.0e15f)
        return (int64_t)a->f;
    return def;
}

double mge_onnx_attr_f(mge_onnx_node *n, const char *name, double def)
{
    const Onnx__AttributeProto *a = mge_onnx_attr(n, name);
    if (!a)
        return def;
    if (a->has_f)
        return a->f;
    if (a->n_floats == 1)
        return a->floats[0];
    if (a->has_i)
        return (double)a->i;
    return def;
}

int mge_onnx_attr_ints(mge_onnx_node *n, const char *name, int64_t *v, int max)
{
    const Onnx__AttributeProto *a = mge_onnx_attr(n, name);
    if (!a)
        return -1;
    if (a->n_ints) {
        int k = (int)a->n_ints < max ? (int)a->n_ints : max;
        memcpy(v, a->ints, sizeof(int64_t) * (size_t)k);
        return (int)a->n_ints;
    }
    if (a->has_i) {
        if (max > 0)
            v[0] = a->i;
        return 1;
    }
    /* an empty INTS attribute */
    return a->has_type && a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS ? 0 : -1;
}

int mge_onnx_attr_floats(mge_onnx_node *n, const char *name, double *v, int max)
{
    const Onnx__AttributeProto *a = mge_onnx_attr(n, name);
    if (!a)
        return -1;
    if (a->n_floats) {
        int k = (int)a->n_floats < max ? (int)a->n_floats : max;
        for (int i = 0; i < k; i++)
            v[i] = a->floats[i];
        return (int)a->n_floats;
    }
    if (a->has_f) {
        if (max > 0)
            v[0] = a->f;
        return 1;
    }
    return a->has_type && a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS ? 0 : -1;
}

const char *mge_onnx_attr_s(mge_onnx_node *n, const char *name, const char *def, char *buf, size_t bn)
{
    const Onnx__AttributeProto *a = mge_onnx_attr(n, name);
    const char *src = def ? def : "";
    size_t len = strlen(src);
    if (a && a->has_s) {
        src = (const char *)a->s.data;
        len = a->s.len;
    }
    size_t k = len < bn - 1 ? len : bn - 1;
    if (k)
        memcpy(buf, src, k);
    buf[k] = 0;
    return buf;
}

/* ---------------------------------------------------------------- mge attributes */

mge_attr mge_onnx_ai(int key, int64_t v)
{
    mge_attr a;
    memset(&a, 0, sizeof a);
    a.key = key;
    a.n = 1;
    a.i[0] = v;
    return a;
}

mge_attr mge_onnx_ais(int key, int cnt, const int64_t *v)
{
    mge_attr a;
    memset(&a, 0, sizeof a);
    a.key = key;
    a.n = cnt < 0 ? 0 : cnt > MGE_MAX_DIMS ? MGE_MAX_DIMS : cnt;
    memcpy(a.i, v, sizeof(int64_t) * (size_t)a.n);
    return a;
}

mge_attr mge_onnx_af(int key, double v)
{
    mge_attr a;
    memset(&a, 0, sizeof a);
    a.key = key;
    a.f = v;
    return a;
}

mge_attr mge_onnx_ab(int key, int v)
{
    return mge_onnx_ai(key, v != 0);
}

mge_attr mge_onnx_aop(int key, int op)
{
    return mge_onnx_ai(key, op);
}

int mge_onnx_axis(int64_t a, int rank)
{
    if (a < -rank || a >= rank)
        return -1;
    return (int)(a < 0 ? a + rank : a);
}

/* ---------------------------------------------------------------- emitting */

/* An input < 0 is a step of the lowering that failed (its error is set). */
static int failed_input(mge_onnx_ctx *c, mge_onnx_node *n, int nin, const int *in)
{
    for (int i = 0; i < nin; i++)
        if (in[i] < 0) {
            if (!c->err->code)
                mge_onnx_fail(c, n, "input %d of a lowering step is missing", i);
            return 1;
        }
    return 0;
}

/* Adds the node with folded inputs as consts. A shape-like input the op
 * needs known (MGE_ERR_UNSUPPORTED from its inference) is folded when it
 * can be and the node tried again; else the inputs it depends on are noted
 * (mge_onnx_note_needs). */
static int add_node(mge_onnx_ctx *c, mge_onnx_node *n, const char *name, int op, int nin, const int *in, int nattr,
                    const mge_attr *attrs, int nout, const char *const *np, mge_error *e)
{
    int sub[64];
    if (nin > 64)
        return mge_graph_add_node(c->g, name, op, nin, in, nattr, attrs, nout, np, e);
    for (int i = 0; i < nin; i++)
        sub[i] = mge_onnx_fold_const(c, n, in[i]);
    int k = mge_graph_add_node(c->g, name, op, nin, sub, nattr, attrs, nout, np, e);
    if (k >= 0 || e->code != MGE_ERR_UNSUPPORTED)
        return k;
    int again = 0;
    for (int i = 0; i < nin; i++)
        if (sub[i] == in[i] && mge_onnx_value(c, in[i])->kind == MGE_VAL_NODE && mge_onnx_fold(c, in[i])) {
            sub[i] = mge_onnx_fold_const(c, n, in[i]);
            again |= sub[i] != in[i];
        }
    if (again) {
        mge_error_clear(e);
        k = mge_graph_add_node(c->g, name, op, nin, sub, nattr, attrs, nout, np, e);
        if (k >= 0 || e->code != MGE_ERR_UNSUPPORTED)
            return k;
    }
    /* the op names the input it needs known as "(input K)" */
    const char *p = strstr(e->msg, "(input ");
    int which = p ? atoi(p + 7) : -1;
    for (int i = 0; i < nin; i++) {
        const mge_value *x = mge_onnx_value(c, sub[i]);
        int shape_like = x->ndim <= 1 && !mge_dtype_is_float(x->dtype);
        if (which >= 0 ? i == which : shape_like)
            mge_onnx_note_needs(c, sub[i]);
    }
    return k;
}

/* An op's refusal of a node is an unsupported node; other errors are hard. */
static int add_failed(mge_onnx_ctx *c, mge_onnx_node *n, const mge_error *e)
{
    if (e->code == MGE_ERR_UNSUPPORTED)
        mge_error_set(c->err, MGE_ERR_UNSUPPORTED, "%s", e->msg); /* the reader adds the node's label */
    else
        mge_onnx_fail(c, n, "%s", e->msg);
    return -1;
}

int mge_onnx_emit(mge_onnx_ctx *c, mge_onnx_node *n, int op, int nin, const int *in, int nattr,
                  const mge_attr *attrs, int nout)
{
    char names[4][256];
    const char *np[4];
    if (failed_input(c, n, nin, in))
        return -1;
    if (nout < 1 || nout > 4 || nout > (int)n->n_output) {
        mge_onnx_fail(c, n, "converter asked for %d outputs of %zu", nout, n->n_output);
        return -1;
    }
    for (int o = 0; o < nout; o++) {
        const char *on = n->output[o] && *n->output[o] ? n->output[o] : "unused";
        if (mge_onnx_fresh_name(c, on, names[o], sizeof names[o]))
            return -1;
        np[o] = names[o];
    }
    mge_error e;
    mge_error_clear(&e);
    int k = add_node(c, n, np[0], op, nin, in, nattr, attrs, nout, np, &e);
    if (k < 0)
        return add_failed(c, n, &e);
    for (int o = 0; o < nout; o++)
        if (n->output[o] && *n->output[o] && mge_onnx_define(c, n->output[o], c->g->nodes[k].out[o]))
            return -1;
    return k;
}

int mge_onnx_emit_tmp(mge_onnx_ctx *c, mge_onnx_node *n, int op, int nin, const int *in, int nattr,
                      const mge_attr *attrs)
{
    char name[256], base[200];
    if (failed_input(c, n, nin, in))
        return -1;
    snprintf(base, sizeof base, "%s_%s", n->n_output && n->output[0] && *n->output[0] ? n->output[0] : "tmp",
             mge_op_info(op) ? mge_op_info(op)->name : "op");
    if (mge_onnx_fresh_name(c, base, name, sizeof name))
        return -1;
    const char *np[1] = {name};
    mge_error e;
    mge_error_clear(&e);
    int k = add_node(c, n, name, op, nin, in, nattr, attrs, 1, np, &e);
    if (k < 0)
        return add_failed(c, n, &e);
    return c->g->nodes[k].out[0];
}

int mge_onnx_emit2(mge_onnx_ctx *c, mge_onnx_node *n, int op, int a, int b)
{
    int in[2] = {a, b};
    return mge_onnx_emit_tmp(c, n, op, 2, in, 0, NULL);
}

mge_status mge_onnx_finish(mge_onnx_ctx *c, mge_onnx_node *n, int op, int nin, const int *in, int nattr,
                           const mge_attr *attrs)
{
    return mge_onnx_emit(c, n, op, nin, in, nattr, attrs, 1) < 0 ? (c->err->code ? c->err->code : MGE_ERR_INVALID)
                                                                  : MGE_OK;
}

int mge_onnx_reshape_tmp(mge_onnx_ctx *c, mge_onnx_node *n, int x, int nd, const int64_t *shape)
{
    mge_attr a[1] = {mge_onnx_ais(MGE_KEY_shape, nd, shape)};
    return mge_onnx_emit_tmp(c, n, MGE_OP_RESHAPE, 1, &x, 1, a);
}

int mge_onnx_transpose_tmp(mge_onnx_ctx *c, mge_onnx_node *n, int x, int nd, const int64_t *perm)
{
    mge_attr a[1] = {mge_onnx_ais(MGE_KEY_perm, nd, perm)};
    return mge_onnx_emit_tmp(c, n, MGE_OP_TRANSPOSE, 1, &x, 1, a);
}

mge_status mge_onnx_alias(mge_onnx_ctx *c, mge_onnx_node *n, int k, int v)
{
    if (k >= (int)n->n_output || !n->output[k] || !*n->output[k])
        return MGE_OK;
    return mge_onnx_define(c, n->output[k], v);
}

int mge_onnx_const(mge_onnx_ctx *c, mge_onnx_node *n, mge_tensor *t)
{
    char base[200];
    snprintf(base, sizeof base, "%s_const", n && n->n_output && n->output[0] && *n->output[0] ? n->output[0] : "c");
    return mge_onnx_const_named(c, base, t);
}

int mge_onnx_const_named(mge_onnx_ctx *c, const char *base, mge_tensor *t)
{
    char name[256];
    if (mge_onnx_fresh_name(c, base, name, sizeof name)) {
        mge_tensor_free(t);
        return -1;
    }
    int v = mge_graph_add_value(c->g, name, MGE_VAL_CONST, t->dtype, t->ndim, t->dims, c->err);
    if (v < 0) {
        mge_tensor_free(t);
        return -1;
    }
    mge_tensor *d = malloc(sizeof *d);
    if (!d) {
        mge_tensor_free(t);
        mge_error_set(c->err, MGE_ERR_NOMEM, "out of memory");
        return -1;
    }
    *d = *t;
    memset(t, 0, sizeof *t);
    c->g->values[v].data = d;
    return v;
}

int mge_onnx_const_i64(mge_onnx_ctx *c, mge_onnx_node *n, int cnt, const int64_t *v)
{
    mge_tensor t;
    int64_t d[1] = {cnt};
    if (mge_tensor_alloc(&t, MGE_I64, 1, d, c->err))
        return -1;
    if (cnt)
        memcpy(t.data, v, sizeof(int64_t) * (size_t)cnt);
    return mge_onnx_const(c, n, &t);
}

int mge_onnx_const_f32(mge_onnx_ctx *c, mge_onnx_node *n, int ndim, const int64_t *dims, const float *v)
{
    mge_tensor t;
    if (mge_tensor_alloc(&t, MGE_F32, ndim, dims, c->err))
        return -1;
    memcpy(t.data, v, t.nbytes);
    return mge_onnx_const(c, n, &t);
}

mge_status mge_onnx_unsupported(mge_onnx_ctx *c, mge_onnx_node *n, const char *fmt, ...)
{
    char b[300], why[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    c->nunsupported++;
    /* "'conv1' (Conv), opset 13: why" or "Conv -> 'y', opset 13: why" */
    if (n->domain && *n->domain && strcmp(n->domain, "ai.onnx") != 0)
        mge_buf_printf(&c->unsupported, "%s, domain %s: %s\n", mge_onnx_node_label(n, b, sizeof b), n->domain, why);
    else
        mge_buf_printf(&c->unsupported, "%s, opset %lld: %s\n", mge_onnx_node_label(n, b, sizeof b), (long long)c->opset,
                       why);
    return MGE_ERR_UNSUPPORTED;
}

mge_status mge_onnx_fail(mge_onnx_ctx *c, mge_onnx_node *n, const char *fmt, ...)
{
    char b[300], why[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return mge_error_set(c->err, MGE_ERR_INVALID, "node %s: %s", mge_onnx_node_label(n, b, sizeof b), why);
}

void mge_onnx_warn(mge_onnx_ctx *c, const char *fmt, ...)
{
    char b[800];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b, sizeof b, fmt, ap);
    va_end(ap);
    mge_buf_printf(&c->warnings, "%s\n", b);
}
