/* text_print.c — a graph in the canonical text form (mge-text(5)).
 *
 * The output is a function of the graph alone: every node written with all
 * its inputs explicit, params/state/consts declared just before their first
 * use, attributes only where they differ from the schema default, numbers in
 * the shortest form that reads back to the same bits. So print -> parse ->
 * print gives the same bytes, and parsing the print gives the same graph. */
#include "text.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Shortest %g text that strtod reads back as v (1 <= precision <= 17). */
static void fmt_double(char *b, size_t n, double v)
{
    if (isnan(v)) {
        snprintf(b, n, "nan");
        return;
    }
    if (isinf(v)) {
        snprintf(b, n, v < 0 ? "-inf" : "inf");
        return;
    }
    for (int p = 1; p <= 17; p++) {
        snprintf(b, n, "%.*g", p, v);
        if (strtod(b, NULL) == v)
            return;
    }
}

/* The same for a float as the parser reads it ((float)strtod): at most 9 digits. */
static void fmt_float(char *b, size_t n, float v)
{
    if (isnan(v) || isinf(v)) {
        fmt_double(b, n, v);
        return;
    }
    for (int p = 1; p <= 12; p++) {
        snprintf(b, n, "%.*g", p, (double)v);
        float r = (float)strtod(b, NULL);
        if (memcmp(&r, &v, sizeof r) == 0)
            return;
    }
}

static void put_string(mge_buf *o, const char *s)
{
    mge_buf_put(o, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': mge_buf_put(o, "\\\"", 2); break;
        case '\\': mge_buf_put(o, "\\\\", 2); break;
        case '\n': mge_buf_put(o, "\\n", 2); break;
        case '\t': mge_buf_put(o, "\\t", 2); break;
        case '\r': mge_buf_put(o, "\\r", 2); break;
        default:
            if (*p < 0x20 || *p == 0x7f)
                mge_buf_printf(o, "\\x%02x", *p);
            else
                mge_buf_put(o, p, 1);
        }
    }
    mge_buf_put(o, "\"", 1);
}

static mge_status put_name(mge_buf *o, const char *name, mge_error *err)
{
    if (!mge_text_is_name(name))
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "the name '%s' cannot be written in the text form",
                             name ? name : "");
    mge_buf_put(o, name, strlen(name));
    return MGE_OK;
}

static void put_type(mge_buf *o, const mge_value *v)
{
    mge_buf_printf(o, "%s[", mge_dtype_name(v->dtype));
    for (int i = 0; i < v->ndim; i++) {
        char d[96];
        mge_buf_printf(o, "%s%s", i ? "," : "", mge_dim_str(v->dims[i], d, sizeof d));
    }
    mge_buf_put(o, "]", 1);
}

/* Element i of a const tensor as text. */
static void put_elem(mge_buf *o, const mge_tensor *t, int64_t i)
{
    char b[64];
    switch (t->dtype) {
    case MGE_F32: fmt_float(b, sizeof b, ((const float *)t->data)[i]); break;
    case MGE_F16: fmt_float(b, sizeof b, mge_f16_to_f32(((const uint16_t *)t->data)[i])); break;
    case MGE_BF16: fmt_float(b, sizeof b, mge_bf16_to_f32(((const uint16_t *)t->data)[i])); break;
    case MGE_I8: case MGE_QS8: snprintf(b, sizeof b, "%d", ((const int8_t *)t->data)[i]); break;
    case MGE_U8: case MGE_BOOL: snprintf(b, sizeof b, "%u", ((const uint8_t *)t->data)[i]); break;
    case MGE_I32: case MGE_QS32: snprintf(b, sizeof b, "%d", (int)((const int32_t *)t->data)[i]); break;
    case MGE_I64: snprintf(b, sizeof b, "%lld", (long long)((const int64_t *)t->data)[i]); break;
    case MGE_F64: fmt_double(b, sizeof b, ((const double *)t->data)[i]); break;
    case MGE_I16: snprintf(b, sizeof b, "%d", ((const int16_t *)t->data)[i]); break;
    case MGE_U16: snprintf(b, sizeof b, "%u", ((const uint16_t *)t->data)[i]); break;
    case MGE_U32: snprintf(b, sizeof b, "%lu", (unsigned long)((const uint32_t *)t->data)[i]); break;
    case MGE_U64: snprintf(b, sizeof b, "%llu", (unsigned long long)((const uint64_t *)t->data)[i]); break;
    default: snprintf(b, sizeof b, "0"); break;
    }
    mge_buf_put(o, b, strlen(b));
}

static mge_status put_const(mge_buf *o, const mge_value *v, mge_error *err)
{
    const mge_tensor *t = v->data;
    if (!t || (!t->data && t->nbytes))
        return mge_error_set(err, MGE_ERR_INVALID, "const '%s' has no data", v->name);
    int64_t n = mge_tensor_numel(t);
    if (t->dtype != v->dtype || (size_t)n * mge_dtype_size(t->dtype) > t->nbytes)
        return mge_error_set(err, MGE_ERR_INVALID, "const '%s': data does not match its shape", v->name);
    mge_buf_put(o, " = [", 4);
    /* long lists wrap, 8 values a line: newlines inside [ ] do not end the statement */
    int wrap = n > 16;
    for (int64_t i = 0; i < n; i++) {
        if (i)
            mge_buf_put(o, ",", 1);
        if (wrap && i % 8 == 0)
            mge_buf_put(o, "\n    ", 5);
        else if (i)
            mge_buf_put(o, " ", 1);
        put_elem(o, t, i);
    }
    mge_buf_put(o, wrap ? "\n]" : "]", wrap ? 2 : 1);
    if ((t->dtype == MGE_QS8 || t->dtype == MGE_QS32) && t->q.scale && t->q.nscale > 0) {
        char b[64];
        mge_buf_put(o, " scale=[", 8);
        for (int i = 0; i < t->q.nscale; i++) {
            fmt_float(b, sizeof b, t->q.scale[i]);
            mge_buf_printf(o, "%s%s", i ? ", " : "", b);
        }
        mge_buf_put(o, "]", 1);
    }
    if ((t->dtype == MGE_QS8 || t->dtype == MGE_QS32) && t->q.zero)
        mge_buf_printf(o, " zero=%d", (int)t->q.zero);
    if ((t->dtype == MGE_QS8 || t->dtype == MGE_QS32) && t->q.axis >= 0)
        mge_buf_printf(o, " axis=%d", t->q.axis);
    return MGE_OK;
}

/* input / param / state / const declaration line. */
static mge_status put_decl(mge_buf *o, const mge_value *v, mge_error *err)
{
    static const char *const kw[] = {"input", "param", "state", "const"};
    if ((unsigned)v->kind > MGE_VAL_CONST)
        return mge_error_set(err, MGE_ERR_INVALID, "'%s' is not a declared value", v->name);
    mge_buf_printf(o, "%s ", kw[v->kind]);
    mge_status s = put_name(o, v->name, err);
    if (s)
        return s;
    mge_buf_put(o, " : ", 3);
    put_type(o, v);
    if ((v->kind == MGE_VAL_PARAM || v->kind == MGE_VAL_STATE) && v->init) {
        mge_buf_put(o, " init=", 6);
        if (mge_text_is_bare_init(v->init))
            mge_buf_put(o, v->init, strlen(v->init));
        else
            put_string(o, v->init);
    }
    if (v->kind == MGE_VAL_CONST && (s = put_const(o, v, err)))
        return s;
    mge_buf_put(o, "\n", 1);
    return MGE_OK;
}

static int attr_equal(const mge_attr *a, const mge_attr *b, mge_attr_type type)
{
    switch (type) {
    case MGE_ATTR_FLOAT: return a->f == b->f;
    case MGE_ATTR_INTS:
    case MGE_ATTR_OPS:
    case MGE_ATTR_FLOATS:
        if (a->n != b->n)
            return 0;
        for (int i = 0; i < a->n && i < MGE_MAX_DIMS; i++)
            if (a->i[i] != b->i[i])
                return 0;
        return 1;
    default: return a->i[0] == b->i[0];
    }
}

static void put_attr(mge_buf *o, const mge_attr *a)
{
    char b[64];
    mge_buf_printf(o, ", %s=", mge_key_name(a->key));
    switch (mge_key_type(a->key)) {
    case MGE_ATTR_INT: mge_buf_printf(o, "%lld", (long long)a->i[0]); break;
    case MGE_ATTR_INTS:
        if (a->n == 1) {
            mge_buf_printf(o, "%lld", (long long)a->i[0]);
            break;
        }
        mge_buf_put(o, "[", 1);
        for (int i = 0; i < a->n && i < MGE_MAX_DIMS; i++)
            mge_buf_printf(o, "%s%lld", i ? ", " : "", (long long)a->i[i]);
        mge_buf_put(o, "]", 1);
        break;
    case MGE_ATTR_FLOAT:
        fmt_double(b, sizeof b, a->f);
        mge_buf_put(o, b, strlen(b));
        break;
    case MGE_ATTR_BOOL: mge_buf_printf(o, "%s", a->i[0] ? "true" : "false"); break;
    case MGE_ATTR_DTYPE: mge_buf_printf(o, "%s", mge_dtype_name((mge_dtype)a->i[0])); break;
    case MGE_ATTR_ENUM: {
        const char *w = mge_key_enum_word(a->key, a->i[0]);
        mge_buf_printf(o, "%s", w ? w : "?");
        break;
    }
    case MGE_ATTR_FLOATS:
        mge_buf_put(o, "[", 1);
        for (int i = 0; i < a->n && i < MGE_MAX_DIMS; i++) {
            fmt_double(b, sizeof b, mge_attr_float_at(a, i));
            if (i)
                mge_buf_put(o, ", ", 2);
            mge_buf_put(o, b, strlen(b));
        }
        mge_buf_put(o, "]", 1);
        break;
    case MGE_ATTR_OPS:
        if (a->n == 1) {
            mge_buf_printf(o, "%s", mge_attr_op_name(a->i[0]));
            break;
        }
        mge_buf_put(o, "[", 1);
        for (int i = 0; i < a->n && i < MGE_MAX_DIMS; i++)
            mge_buf_printf(o, "%s%s", i ? ", " : "", mge_attr_op_name(a->i[i]));
        mge_buf_put(o, "]", 1);
        break;
    }
}

static mge_status put_node(mge_buf *o, const mge_graph *g, const mge_node *n, mge_error *err)
{
    const mge_opinfo *oi = mge_op_info(n->op);
    mge_status s;
    for (int k = 0; k < n->nout; k++) {
        if (k)
            mge_buf_put(o, ", ", 2);
        if ((s = put_name(o, g->values[n->out[k]].name, err)))
            return s;
    }
    mge_buf_printf(o, " = %s(", oi->name);
    for (int k = 0; k < n->nin; k++) {
        if (k)
            mge_buf_put(o, ", ", 2);
        if ((s = put_name(o, g->values[n->in[k]].name, err)))
            return s;
    }
    /* ", key=val" after the inputs; a node has at least one input, so the comma always fits */
    for (int j = 0; j < oi->nschema; j++) {
        const mge_schema_entry *e = &oi->sch[j];
        const mge_attr *a = mge_attrs_find(n->nattr, n->attrs, e->key);
        if (!a)
            continue;
        if (e->required || e->optional || !attr_equal(a, &e->def, mge_key_type(e->key)))
            put_attr(o, a);
    }
    mge_buf_put(o, ")\n", 2);
    return MGE_OK;
}

static int declared_kind(mge_valkind k)
{
    return k == MGE_VAL_PARAM || k == MGE_VAL_STATE || k == MGE_VAL_CONST;
}

mge_status mge_text_print(const mge_graph *g, mge_buf *o, mge_error *err)
{
    mge_status s = mge_graph_validate(g, err);
    if (s)
        return s;
    char *done = calloc((size_t)g->nvalues + 1, 1);
    if (!done)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    mge_buf_printf(o, "# mge text form (mge-text(5))\n");
    for (int i = 0; i < g->nmeta; i++) {
        const char *k = g->meta[i].key, *v = g->meta[i].value;
        mge_buf_put(o, "meta ", 5);
        if (mge_text_is_name(k))
            mge_buf_put(o, k, strlen(k));
        else
            put_string(o, k);
        mge_buf_put(o, " = ", 3);
        if (mge_text_is_number(v))
            mge_buf_put(o, v, strlen(v));
        else
            put_string(o, v);
        mge_buf_put(o, "\n", 1);
    }
    for (int i = 0; i < g->ninputs && !s; i++) {
        s = put_decl(o, &g->values[g->inputs[i]], err);
        done[g->inputs[i]] = 1;
    }
    for (int i = 0; i < g->nnodes && !s; i++) {
        const mge_node *n = &g->nodes[i];
        for (int k = 0; k < n->nin && !s; k++) {
            int v = n->in[k];
            if (!done[v] && declared_kind(g->values[v].kind)) {
                s = put_decl(o, &g->values[v], err);
                done[v] = 1;
            }
        }
        if (!s)
            s = put_node(o, g, n, err);
    }
    for (int v = 0; v < g->nvalues && !s; v++)
        if (!done[v] && declared_kind(g->values[v].kind))
            s = put_decl(o, &g->values[v], err);
    if (!s && g->noutputs) {
        mge_buf_put(o, "output ", 7);
        for (int i = 0; i < g->noutputs && !s; i++) {
            if (i)
                mge_buf_put(o, ", ", 2);
            s = put_name(o, g->values[g->outputs[i]].name, err);
        }
        mge_buf_put(o, "\n", 1);
    }
    if (!s && g->loss >= 0) {
        mge_buf_put(o, "minimize ", 9);
        s = put_name(o, g->values[g->loss].name, err);
        mge_buf_put(o, "\n", 1);
    }
    free(done);
    if (!s && o->failed)
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    return s;
}
