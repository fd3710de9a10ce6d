/* onnx_write.c — an inference graph as an ONNX ModelProto (opset 17, IR 8).
 *
 * The messages are protobuf-c's generated structs (onnx.pb-c.h), built in an
 * arena and packed once; nothing here encodes protobuf by hand. The graph
 * is prepared on a clone first: strip-training (a model with a loss exports
 * its inference part: the loss, label inputs and optimizer state go,
 * dropout becomes the identity) and unfuse (mge-opt -O2/-O3's fused,
 * Winograd and blocked ops back to plain ones), so every op that reaches
 * onnx_write_ops.c is an ordinary one. Only the nodes the outputs need are
 * written. Ops without an ONNX form are listed all at once and nothing is
 * written.
 *
 * Names: ONNX value names are the mge value names (params, state and consts
 * become initializers under their own names), but for the interface names
 * an ONNX import changed, which come back from onnx.name.*; helper values
 * are "<node>/<what>_<k>". Inputs keep their dtypes and shapes, a symbol (the
 * batch N among them) becoming a dim_param of its name. The bytes depend on
 * the graph alone: the same model gives the same file. Tensor data is
 * written as raw_data in host byte order, which is ONNX's little-endian on
 * every platform mge builds for. */
#include "onnx_write.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- arena */

typedef struct blk {
    struct blk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} blk;

void *mge_onnx_w_alloc(mge_onnx_w *w, size_t n)
{
    if (w->nomem)
        return NULL;
    n = (n + 15) & ~(size_t)15;
    blk *b = w->arena;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        blk *nb = calloc(1, sizeof *nb + cap);
        if (!nb) {
            w->nomem = 1;
            return NULL;
        }
        nb->cap = cap;
        nb->next = b;
        w->arena = b = nb;
    }
    void *p = b->data + b->used;
    b->used += n;
    return p;
}

static void arena_free(mge_onnx_w *w)
{
    for (blk *b = w->arena, *nx; b; b = nx) {
        nx = b->next;
        free(b);
    }
    w->arena = NULL;
}

char *mge_onnx_w_strdup(mge_onnx_w *w, const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = mge_onnx_w_alloc(w, n);
    if (p)
        memcpy(p, s, n);
    return p;
}

/* Appends p to a growable array of pointers in the arena. */
static int push(mge_onnx_w *w, void ***arr, size_t *n, size_t *cap, void *p)
{
    if (!p)
        return 0;
    if (*n == *cap) {
        size_t nc = *cap ? 2 * *cap : 64;
        void **na = mge_onnx_w_alloc(w, nc * sizeof *na);
        if (!na)
            return 0;
        if (*n)
            memcpy(na, *arr, *n * sizeof *na);
        *arr = na;
        *cap = nc;
    }
    (*arr)[(*n)++] = p;
    return 1;
}

/* ---------------------------------------------------------------- names */

const char *mge_onnx_w_name(mge_onnx_w *w, int v)
{
    return w->names && w->names[v] ? w->names[v] : w->g->values[v].name;
}

/* An imported ONNX model's interface names come back: the reader renamed
 * what the text form cannot spell ("/conv1/Conv_output_0") and kept the
 * original as onnx.name.NEW = "OLD". Taken only where it is unambiguous:
 * not for a value that is both an input and an output (the key then says
 * the output's name, which an ONNX input cannot also have), and not when
 * another value has, or already took, the name. */
static int restore_names(mge_onnx_w *w)
{
    const mge_graph *g = w->g;
    w->names = mge_onnx_w_alloc(w, (size_t)(g->nvalues + 1) * sizeof *w->names);
    if (!w->names)
        return 0;
    char *io = calloc((size_t)g->nvalues + 1, 1);
    if (!io)
        return 0;
    for (int i = 0; i < g->ninputs; i++)
        io[g->inputs[i]] |= 1;
    for (int i = 0; i < g->noutputs; i++)
        io[g->outputs[i]] |= 2;
    for (int m = 0; m < g->nmeta; m++) {
        const char *k = g->meta[m].key;
        if (strncmp(k, "onnx.name.", 10) != 0 || !g->meta[m].value || !*g->meta[m].value)
            continue;
        int v = mge_graph_find(g, k + 10);
        const char *old = g->meta[m].value;
        if (v < 0 || io[v] == 3 || mge_graph_find(g, old) >= 0)
            continue;
        int taken = 0;
        for (int u = 0; u < g->nvalues && !taken; u++)
            taken = w->names[u] && strcmp(w->names[u], old) == 0;
        if (!taken)
            w->names[v] = mge_onnx_w_strdup(w, old);
    }
    free(io);
    return !w->nomem;
}

const char *mge_onnx_w_tmp(mge_onnx_w *w, const char *what)
{
    const char *base = w->cur ? w->cur->name : "mge";
    char buf[512];
    /* "_<k>" with a k never used before ends every helper name, so two of
     * them never clash; only a graph value's name (or restored ONNX name)
     * could, and is skipped. */
    for (;;) {
        snprintf(buf, sizeof buf, "%s/%s_%d", base, what, w->fresh++);
        int taken = mge_graph_find(w->g, buf) >= 0;
        for (int v = 0; v < w->g->nvalues && !taken && w->names; v++)
            taken = w->names[v] && strcmp(w->names[v], buf) == 0;
        if (!taken)
            break;
    }
    return mge_onnx_w_strdup(w, buf);
}

/* ---------------------------------------------------------------- nodes and attributes */

Onnx__NodeProto *mge_onnx_w_node(mge_onnx_w *w, const char *op_type, int nin, const char *const *in, int nout,
                                 const char *const *out)
{
    Onnx__NodeProto *n = mge_onnx_w_alloc(w, sizeof *n);
    char **ins = mge_onnx_w_alloc(w, (size_t)(nin + 1) * sizeof *ins);
    char **outs = mge_onnx_w_alloc(w, (size_t)(nout + 1) * sizeof *outs);
    if (!n || !ins || !outs)
        return NULL;
    *n = (Onnx__NodeProto)ONNX__NODE_PROTO__INIT;
    for (int i = 0; i < nin; i++)
        ins[i] = mge_onnx_w_strdup(w, in[i] ? in[i] : "");
    for (int i = 0; i < nout; i++)
        outs[i] = mge_onnx_w_strdup(w, out[i]);
    n->n_input = (size_t)nin;
    n->input = ins;
    n->n_output = (size_t)nout;
    n->output = outs;
    n->op_type = mge_onnx_w_strdup(w, op_type);
    char nm[512];
    const char *base = w->cur ? w->cur->name : "mge";
    if (w->ncur++ == 0)
        snprintf(nm, sizeof nm, "%s", base);
    else
        snprintf(nm, sizeof nm, "%s/%s_%d", base, op_type, w->ncur - 1);
    n->name = mge_onnx_w_strdup(w, nm);
    if (!push(w, (void ***)&w->nodes, &w->nnodes, &w->capnodes, n))
        return NULL;
    return n;
}

const char *mge_onnx_w_tmpnode(mge_onnx_w *w, const char *op_type, int nin, const char *const *in)
{
    const char *o = mge_onnx_w_tmp(w, op_type);
    if (!o || !mge_onnx_w_node(w, op_type, nin, in, 1, &o))
        return NULL;
    return o;
}

static Onnx__AttributeProto *attr_new(mge_onnx_w *w, Onnx__NodeProto *n, const char *name,
                                      Onnx__AttributeProto__AttributeType t)
{
    if (!n)
        return NULL;
    Onnx__AttributeProto *a = mge_onnx_w_alloc(w, sizeof *a);
    Onnx__AttributeProto **na = mge_onnx_w_alloc(w, (n->n_attribute + 1) * sizeof *na);
    if (!a || !na)
        return NULL;
    *a = (Onnx__AttributeProto)ONNX__ATTRIBUTE_PROTO__INIT;
    a->name = mge_onnx_w_strdup(w, name);
    a->has_type = 1;
    a->type = t;
    if (n->n_attribute)
        memcpy(na, n->attribute, n->n_attribute * sizeof *na);
    na[n->n_attribute++] = a;
    n->attribute = na;
    return a;
}

void mge_onnx_w_attr_i(mge_onnx_w *w, Onnx__NodeProto *n, const char *name, int64_t v)
{
    Onnx__AttributeProto *a = attr_new(w, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    if (a) {
        a->has_i = 1;
        a->i = v;
    }
}

void mge_onnx_w_attr_f(mge_onnx_w *w, Onnx__NodeProto *n, const char *name, double v)
{
    Onnx__AttributeProto *a = attr_new(w, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    if (a) {
        a->has_f = 1;
        a->f = (float)v;
    }
}

void mge_onnx_w_attr_ints(mge_onnx_w *w, Onnx__NodeProto *n, const char *name, int cnt, const int64_t *v)
{
    Onnx__AttributeProto *a = attr_new(w, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    int64_t *p = mge_onnx_w_alloc(w, (size_t)(cnt + 1) * sizeof *p);
    if (a && p) {
        memcpy(p, v, (size_t)cnt * sizeof *p);
        a->n_ints = (size_t)cnt;
        a->ints = p;
    }
}

void mge_onnx_w_attr_s(mge_onnx_w *w, Onnx__NodeProto *n, const char *name, const char *s)
{
    Onnx__AttributeProto *a = attr_new(w, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    char *p = mge_onnx_w_strdup(w, s);
    if (a && p) {
        a->has_s = 1;
        a->s.len = strlen(s);
        a->s.data = (uint8_t *)p;
    }
}

void mge_onnx_w_attr_strs(mge_onnx_w *w, Onnx__NodeProto *n, const char *name, int cnt, const char *const *s)
{
    Onnx__AttributeProto *a = attr_new(w, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS);
    ProtobufCBinaryData *v = mge_onnx_w_alloc(w, (size_t)(cnt > 0 ? cnt : 1) * sizeof *v);
    if (!a || !v)
        return;
    for (int i = 0; i < cnt; i++) {
        v[i].data = (uint8_t *)mge_onnx_w_strdup(w, s[i]);
        v[i].len = v[i].data ? strlen(s[i]) : 0;
    }
    a->strings = v;
    a->n_strings = (size_t)cnt;
}

/* ---------------------------------------------------------------- tensors */

/* A TensorProto of an mge dtype whose elements are v[0..cnt) (converted). */
static Onnx__TensorProto *tensor_of(mge_onnx_w *w, mge_dtype dt, int ndim, const int64_t *dims, int64_t cnt,
                                    const double *v)
{
    int ot = mge_onnx_dtype_to(dt);
    size_t es = mge_dtype_size(dt);
    Onnx__TensorProto *t = mge_onnx_w_alloc(w, sizeof *t);
    int64_t *d = mge_onnx_w_alloc(w, (size_t)(ndim + 1) * sizeof *d);
    unsigned char *raw = mge_onnx_w_alloc(w, (size_t)cnt * es + 1);
    if (!t || !d || !raw || !ot)
        return NULL;
    *t = (Onnx__TensorProto)ONNX__TENSOR_PROTO__INIT;
    for (int64_t i = 0; i < cnt; i++) {
        unsigned char *p = raw + (size_t)i * es;
        double x = v[i];
        switch (dt) {
        case MGE_F32: { float f = (float)x; memcpy(p, &f, 4); break; }
        case MGE_F16: { uint16_t h = mge_f32_to_f16((float)x); memcpy(p, &h, 2); break; }
        case MGE_BF16: { uint16_t h = mge_f32_to_bf16((float)x); memcpy(p, &h, 2); break; }
        case MGE_I8: case MGE_QS8: { int8_t q = (int8_t)x; memcpy(p, &q, 1); break; }
        case MGE_U8: { uint8_t q = (uint8_t)x; memcpy(p, &q, 1); break; }
        case MGE_BOOL: { uint8_t q = x != 0; memcpy(p, &q, 1); break; }
        case MGE_I32: case MGE_QS32: { int32_t q = (int32_t)x; memcpy(p, &q, 4); break; }
        case MGE_I64: { int64_t q = (int64_t)x; memcpy(p, &q, 8); break; }
        case MGE_F64: case MGE_I16: case MGE_U16: case MGE_U32: case MGE_U64: {
            unsigned char q[8];
            mge_dtype_set(dt, q, 0, x);
            memcpy(p, q, es);
            break;
        }
        default: return NULL;
        }
    }
    if (ndim > 0)
        memcpy(d, dims, (size_t)ndim * sizeof *d);
    t->n_dims = (size_t)ndim;
    t->dims = d;
    t->has_data_type = 1;
    t->data_type = ot;
    t->has_raw_data = 1;
    t->raw_data.len = (size_t)cnt * es;
    t->raw_data.data = raw;
    return t;
}

static const char *add_init(mge_onnx_w *w, Onnx__TensorProto *t, const char *what)
{
    if (!t)
        return NULL;
    const char *nm = mge_onnx_w_tmp(w, what);
    if (!nm)
        return NULL;
    t->name = (char *)nm;
    if (!push(w, (void ***)&w->inits, &w->ninits, &w->capinits, t))
        return NULL;
    return nm;
}

const char *mge_onnx_w_i64s(mge_onnx_w *w, int cnt, const int64_t *v)
{
    double *d = mge_onnx_w_alloc(w, (size_t)(cnt + 1) * sizeof *d);
    if (!d)
        return NULL;
    for (int i = 0; i < cnt; i++)
        d[i] = (double)v[i];
    int64_t dim = cnt;
    Onnx__TensorProto *t = tensor_of(w, MGE_I64, 1, &dim, cnt, d);
    /* int64 values beyond 2^53 (INT64_MAX as Slice's "to the end") do not
     * survive the double: write them exactly */
    if (t && cnt > 0)
        memcpy(t->raw_data.data, v, (size_t)cnt * 8);
    return add_init(w, t, "c");
}

const char *mge_onnx_w_scalar(mge_onnx_w *w, mge_dtype dt, double v)
{
    return add_init(w, tensor_of(w, dt, 0, NULL, 1, &v), "c");
}

const char *mge_onnx_w_vec(mge_onnx_w *w, mge_dtype dt, int cnt, const double *v, int as_1d)
{
    int64_t dim = cnt;
    return add_init(w, tensor_of(w, dt, as_1d || cnt != 1 ? 1 : 0, &dim, cnt, v), "c");
}

const char *mge_onnx_w_const(mge_onnx_w *w, mge_dtype dt, int ndim, const int64_t *dims, int64_t cnt,
                             const double *v)
{
    return add_init(w, tensor_of(w, dt, ndim, dims, cnt, v), "c");
}

void mge_onnx_w_attr_scalar(mge_onnx_w *w, Onnx__NodeProto *n, const char *name, int onnx_type, double v)
{
    int dt = mge_onnx_dtype(onnx_type);
    int64_t one = 1;
    Onnx__TensorProto *t = dt >= 0 ? tensor_of(w, (mge_dtype)dt, 1, &one, 1, &v) : NULL;
    Onnx__AttributeProto *a = attr_new(w, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
    if (a && t)
        a->t = t;
}

mge_status mge_onnx_w_tensor(mge_onnx_w *w, const char *name, const mge_tensor *src)
{
    int ot = src->dtype == MGE_QS8 ? MGE_ONNX_INT8 : src->dtype == MGE_QS32 ? MGE_ONNX_INT32
                                                                              : mge_onnx_dtype_to(src->dtype);
    if (!ot)
        return mge_error_set(w->err, MGE_ERR_UNSUPPORTED, "%s: ONNX has no %s tensors", name,
                             mge_dtype_name(src->dtype));
    if (src->layout != MGE_LAYOUT_DEFAULT)
        return mge_error_set(w->err, MGE_ERR_UNSUPPORTED, "%s: a blocked (NCHWc/NHWC) tensor; export the model "
                             "before the layout pass", name);
    Onnx__TensorProto *t = mge_onnx_w_alloc(w, sizeof *t);
    int64_t *d = mge_onnx_w_alloc(w, (size_t)(src->ndim + 1) * sizeof *d);
    if (!t || !d)
        return mge_error_set(w->err, MGE_ERR_NOMEM, "out of memory");
    *t = (Onnx__TensorProto)ONNX__TENSOR_PROTO__INIT;
    memcpy(d, src->dims, (size_t)src->ndim * sizeof *d);
    t->n_dims = (size_t)src->ndim;
    t->dims = d;
    t->has_data_type = 1;
    t->data_type = ot;
    t->name = mge_onnx_w_strdup(w, name);
    t->has_raw_data = 1;
    t->raw_data.len = src->nbytes;
    t->raw_data.data = src->data;   /* borrowed until packed */
    if (!push(w, (void ***)&w->inits, &w->ninits, &w->capinits, t))
        return mge_error_set(w->err, MGE_ERR_NOMEM, "out of memory");
    return MGE_OK;
}

mge_status mge_onnx_w_unsupported(mge_onnx_w *w, const char *fmt, ...)
{
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    const mge_node *n = w->cur;
    mge_buf_printf(&w->unsupported, "%s  node '%s' (%s): %s", w->nunsupported ? "\n" : "", n ? n->name : "?",
                   n ? mge_op_info(n->op)->name : "?", why);
    w->nunsupported++;
    return MGE_ERR_UNSUPPORTED;
}

/* ---------------------------------------------------------------- value infos */

static Onnx__ValueInfoProto *value_info(mge_onnx_w *w, int v, mge_error *err)
{
    const mge_value *val = &w->g->values[v];
    int ot = val->dtype == MGE_QS8 ? MGE_ONNX_INT8 : val->dtype == MGE_QS32 ? MGE_ONNX_INT32
                                                                              : mge_onnx_dtype_to(val->dtype);
    if (!ot) {
        mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: ONNX has no %s tensors", val->name, mge_dtype_name(val->dtype));
        return NULL;
    }
    Onnx__ValueInfoProto *vi = mge_onnx_w_alloc(w, sizeof *vi);
    Onnx__TypeProto *tp = mge_onnx_w_alloc(w, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = mge_onnx_w_alloc(w, sizeof *tt);
    Onnx__TensorShapeProto *sh = mge_onnx_w_alloc(w, sizeof *sh);
    Onnx__TensorShapeProto__Dimension **dims = mge_onnx_w_alloc(w, (size_t)(val->ndim + 1) * sizeof *dims);
    if (!vi || !tp || !tt || !sh || !dims) {
        mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        return NULL;
    }
    *vi = (Onnx__ValueInfoProto)ONNX__VALUE_INFO_PROTO__INIT;
    *tp = (Onnx__TypeProto)ONNX__TYPE_PROTO__INIT;
    *tt = (Onnx__TypeProto__Tensor)ONNX__TYPE_PROTO__TENSOR__INIT;
    *sh = (Onnx__TensorShapeProto)ONNX__TENSOR_SHAPE_PROTO__INIT;
    for (int i = 0; i < val->ndim; i++) {
        Onnx__TensorShapeProto__Dimension *d = mge_onnx_w_alloc(w, sizeof *d);
        if (!d) {
            mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
            return NULL;
        }
        *d = (Onnx__TensorShapeProto__Dimension)ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
        int64_t c = val->dims[i];
        const char *sym = c < 0 ? mge_dim_name(c) : NULL;
        if (c >= 0) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = c;
        } else if (sym) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d->dim_param = mge_onnx_w_strdup(w, sym);
        }   /* an expression over symbols, or known at plan time only: left unknown */
        dims[i] = d;
    }
    sh->n_dim = (size_t)val->ndim;
    sh->dim = dims;
    tt->has_elem_type = 1;
    tt->elem_type = ot;
    tt->shape = sh;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    vi->name = mge_onnx_w_strdup(w, mge_onnx_w_name(w, v));
    vi->type = tp;
    return vi;
}

/* ---------------------------------------------------------------- the model */

static mge_status build(mge_onnx_w *w, mge_buf *out, mge_error *err)
{
    const mge_graph *g = w->g;
    mge_status s = MGE_OK;
    char *need = calloc((size_t)g->nnodes + 1, 1), *in_need = calloc((size_t)g->ninputs + 1, 1);
    char *init = calloc((size_t)g->nvalues + 1, 1);
    if (!need || !in_need || !init) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (!restore_names(w)) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto out;
    }
    mge_graph_needed(g, g->noutputs, g->outputs, need, in_need);
    for (int i = 0; i < g->nnodes; i++)
        if (need[i])
            for (int k = 0; k < g->nodes[i].nin; k++)
                if (mge_onnx_w_reads_input(w, &g->nodes[i], k))
                    init[g->nodes[i].in[k]] = 1;
    for (int i = 0; i < g->noutputs; i++)
        init[g->outputs[i]] = 1;
    /* params, state and consts that some needed node reads: initializers,
     * in value order */
    for (int v = 0; v < g->nvalues && !s; v++) {
        const mge_value *val = &g->values[v];
        if (!init[v] || val->kind == MGE_VAL_INPUT || val->kind == MGE_VAL_NODE)
            continue;
        if (!val->data)
            s = mge_error_set(err, MGE_ERR_INVALID, "%s has no value (bind weights or initialize the parameters "
                              "first: mge-opt --weights, or mge-opt without it)", val->name);
        else
            s = mge_onnx_w_tensor(w, mge_onnx_w_name(w, v), val->data);
    }
    for (int i = 0; i < g->nnodes && !s; i++) {
        if (!need[i])
            continue;
        w->cur = &g->nodes[i];
        w->ncur = 0;
        mge_status e = mge_onnx_w_export_node(w, &g->nodes[i]);
        if (e && e != MGE_ERR_UNSUPPORTED)
            s = e;
        else if (!e && w->nomem)
            s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    }
    w->cur = NULL;
    if (s)
        goto out;
    if (w->nunsupported) {
        s = mge_error_set(err, MGE_ERR_UNSUPPORTED, "%d node%s cannot be written as ONNX (nothing written):\n%s",
                          w->nunsupported, w->nunsupported == 1 ? "" : "s",
                          w->unsupported.p ? w->unsupported.p : "");
        goto out;
    }

    Onnx__GraphProto *gp = mge_onnx_w_alloc(w, sizeof *gp);
    Onnx__ModelProto *m = mge_onnx_w_alloc(w, sizeof *m);
    Onnx__OperatorSetIdProto *ops = mge_onnx_w_alloc(w, sizeof *ops);
    Onnx__OperatorSetIdProto **opsv = mge_onnx_w_alloc(w, sizeof *opsv);
    Onnx__ValueInfoProto **ins = mge_onnx_w_alloc(w, (size_t)(g->ninputs + 1) * sizeof *ins);
    Onnx__ValueInfoProto **outs = mge_onnx_w_alloc(w, (size_t)(g->noutputs + 1) * sizeof *outs);
    if (!gp || !m || !ops || !opsv || !ins || !outs) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < g->ninputs; i++)
        if (!(ins[i] = value_info(w, g->inputs[i], err))) {
            s = err ? err->code : MGE_ERR_INVALID;
            goto out;
        }
    for (int i = 0; i < g->noutputs; i++)
        if (!(outs[i] = value_info(w, g->outputs[i], err))) {
            s = err ? err->code : MGE_ERR_INVALID;
            goto out;
        }
    *gp = (Onnx__GraphProto)ONNX__GRAPH_PROTO__INIT;
    const char *gname = mge_graph_get_meta(g, "name");
    gp->name = mge_onnx_w_strdup(w, gname && *gname ? gname : "mge");
    gp->n_node = w->nnodes;
    gp->node = w->nodes;
    gp->n_initializer = w->ninits;
    gp->initializer = w->inits;
    gp->n_input = (size_t)g->ninputs;
    gp->input = ins;
    gp->n_output = (size_t)g->noutputs;
    gp->output = outs;
    *ops = (Onnx__OperatorSetIdProto)ONNX__OPERATOR_SET_ID_PROTO__INIT;
    ops->domain = mge_onnx_w_strdup(w, "");
    ops->has_version = 1;
    ops->version = MGE_ONNX_WRITE_OPSET;
    opsv[0] = ops;
    *m = (Onnx__ModelProto)ONNX__MODEL_PROTO__INIT;
    m->has_ir_version = 1;
    m->ir_version = MGE_ONNX_WRITE_IR;
    m->n_opset_import = 1;
    m->opset_import = opsv;
    m->producer_name = mge_onnx_w_strdup(w, "mge");
    m->producer_version = mge_onnx_w_strdup(w, MGE_VERSION_STRING);
    m->graph = gp;
    if (w->nomem) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto out;
    }
    size_t n = onnx__model_proto__get_packed_size(m);
    if (n > (size_t)INT32_MAX) {
        /* protobuf's own limit: larger models need external data */
        s = mge_error_set(err, MGE_ERR_UNSUPPORTED, "the model is %zu bytes: beyond protobuf's 2 GiB limit", n);
        goto out;
    }
    uint8_t *bytes = malloc(n ? n : 1);
    if (!bytes) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto out;
    }
    size_t got = onnx__model_proto__pack(m, bytes);
    if (got != n || !mge_buf_put(out, bytes, n))
        s = mge_error_set(err, MGE_ERR_NOMEM, got != n ? "protobuf packing wrote %zu of %zu bytes" : "out of memory",
                          got, n);
    free(bytes);
out:
    free(need);
    free(in_need);
    free(init);
    return s;
}

/* -O3's conv2d_nchwc reads its packed weight through a cast of f16 (or
 * bf16) data, which unfuse does not unpack: give such weights back their
 * f32 values (exact) and let the conv read them directly. Returns the
 * number of weights changed. */
static int upcast_packed_weights(mge_graph *g, mge_error *err)
{
    int changed = 0;
    for (int i = 0; i < g->nnodes; i++) {
        mge_node *n = &g->nodes[i];
        if (n->op != MGE_OP_CONV2D_NCHWC || n->nin < 2)
            continue;
        const mge_value *cv = &g->values[n->in[1]];
        if (cv->kind != MGE_VAL_NODE || cv->producer < 0 || g->nodes[cv->producer].op != MGE_OP_CAST)
            continue;
        int p = g->nodes[cv->producer].in[0];
        mge_value *pv = &g->values[p];
        if (pv->kind != MGE_VAL_PARAM || !pv->data || (pv->data->dtype != MGE_F16 && pv->data->dtype != MGE_BF16))
            continue;
        mge_tensor *t = calloc(1, sizeof *t);
        if (!t || mge_tensor_alloc(t, MGE_F32, pv->data->ndim, pv->data->dims, err)) {
            free(t);
            return -1;
        }
        const uint16_t *h = pv->data->data;
        float *f = t->data;
        int64_t cnt = mge_tensor_numel(t);
        for (int64_t k = 0; k < cnt; k++)
            f[k] = pv->data->dtype == MGE_F16 ? mge_f16_to_f32(h[k]) : mge_bf16_to_f32(h[k]);
        mge_tensor_free(pv->data);
        free(pv->data);
        pv->data = t;
        pv->dtype = MGE_F32;
        n->in[1] = p;   /* the cast, now f32 to f32, is read by no one here */
        changed++;
    }
    if (changed && mge_graph_infer(g, err))
        return -1;
    return changed;
}

mge_status mge_onnx_write(const mge_graph *g0, mge_buf *out, mge_error *err)
{
    if (!g0 || !out)
        return mge_error_set(err, MGE_ERR_INVALID, "mge_onnx_write: NULL argument");
    mge_graph *g = mge_graph_clone(g0, err);
    if (!g)
        return err ? err->code : MGE_ERR_NOMEM;
    int changed = 0;
    mge_status s = mge_passes_run_list(&g, "strip-training", &changed, err);
    int up = s ? 0 : upcast_packed_weights(g, err);
    if (up < 0)
        s = err ? err->code : MGE_ERR_INVALID;
    if (!s)
        s = mge_passes_run_list(&g, "unfuse", &changed, err);
    if (s) {
        mge_error_prefix(err, "preparing the graph for ONNX");
        mge_graph_free(g);
        return s;
    }
    mge_onnx_w w;
    memset(&w, 0, sizeof w);
    w.g = g;
    w.err = err;
    s = build(&w, out, err);
    arena_free(&w);
    mge_buf_free(&w.unsupported);
    mge_graph_free(g);
    return s;
}
