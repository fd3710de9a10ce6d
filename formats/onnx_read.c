/* onnx_read.c — an ONNX ModelProto into an mge graph.
 *
 * protobuf-c decodes the bytes (wire types, truncation and declared sizes
 * are its checks); this file checks what the schema cannot: the opset,
 * unique names, definition before use, tensor sizes against shapes. Graph
 * inputs become mge inputs (dim_param names become symbols; the first
 * symbolic dim 0 becomes the batch N), initializers become params (float
 * weights) or consts, created when a node first reads them so unused ones
 * cost nothing. Nodes go through the converters of onnx_ops*.c in order;
 * nodes without one, or with attributes mge cannot express, are collected
 * and reported together, and nothing is returned. Names the text form cannot
 * spell are changed ("/conv1/Conv_output_0" -> "conv1_Conv_output_0"); for
 * inputs, outputs and initializers the original is kept in the metadata
 * (onnx.name.NEW = "OLD"), which mge-dump prints.
 *
 * The unpacked message stays alive as the graph's host buffer: the
 * initializers' raw_data, allocated 64-byte aligned by the allocator below,
 * is borrowed by the tensors instead of being copied a second time. */
#include "onnx.h"
#include "text.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- allocator */

static void *al_alloc(void *ud, size_t n)
{
    (void)ud;
    size_t m = (n + 63) & ~(size_t)63;
    return aligned_alloc(64, m ? m : 64);
}

static void al_free(void *ud, void *p)
{
    (void)ud;
    free(p);
}

static ProtobufCAllocator allocator = {al_alloc, al_free, NULL};

static void release_message(mge_hostbuf *b)
{
    onnx__model_proto__free_unpacked(b->p, &allocator);
    free(b);
}

/* ---------------------------------------------------------------- the name map */

/* NM_POISON: made by an unsupported node (reported there); NM_UNCOMP: an
 * optional output a converted node does not compute, an error only when
 * something reads it (a node or the graph's outputs). */
enum { NM_DEF = 0, NM_INIT, NM_POISON, NM_LATER, NM_UNCOMP };

typedef struct nm_ent {
    const char *name;              /* in the message (outlives the map) */
    int v;                         /* value index (NM_DEF) */
    int state;
    const Onnx__TensorProto *init; /* NM_INIT: made a value on first use */
    const Onnx__NodeProto *node;   /* NM_UNCOMP: the node that does not compute it */
} nm_ent;

typedef struct namemap {
    nm_ent *e;
    size_t cap, n;
} namemap;

static uint64_t hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    while (*s)
        h = (h ^ (unsigned char)*s++) * 1099511628211ull;
    return h;
}

static nm_ent *nm_find(namemap *m, const char *name)
{
    if (!m->cap)
        return NULL;
    for (size_t i = hash(name) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->e[i].name)
            return NULL;
        if (strcmp(m->e[i].name, name) == 0)
            return &m->e[i];
    }
}

/* The entry for name, made (state NM_LATER) when new; NULL on OOM. */
static nm_ent *nm_get(namemap *m, const char *name)
{
    nm_ent *e = nm_find(m, name);
    if (e)
        return e;
    if ((m->n + 1) * 2 > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 256;
        nm_ent *ne = calloc(cap, sizeof *ne);
        if (!ne)
            return NULL;
        for (size_t i = 0; i < m->cap; i++)
            if (m->e[i].name) {
                size_t j = hash(m->e[i].name) & (cap - 1);
                while (ne[j].name)
                    j = (j + 1) & (cap - 1);
                ne[j] = m->e[i];
            }
        free(m->e);
        m->e = ne;
        m->cap = cap;
    }
    size_t i = hash(name) & (m->cap - 1);
    while (m->e[i].name)
        i = (i + 1) & (m->cap - 1);
    m->e[i].name = name;
    m->e[i].v = -1;
    m->e[i].state = NM_LATER;
    m->n++;
    return &m->e[i];
}

/* ---------------------------------------------------------------- names */

/* name with every character the text form cannot spell made '_', starting
 * with a letter or '_'. */
static void sanitize(const char *name, char *out, size_t n)
{
    size_t k = 0;
    const char *p = name;
    while (*p == '/' || *p == ':')
        p++; /* "/layer1/Conv" -> "layer1_Conv" */
    if (!*p || !((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_'))
        out[k++] = 'v';
    for (; *p && k + 1 < n; p++) {
        char ch = *p;
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
                 ch == '.';
        out[k++] = ok ? ch : '_';
    }
    out[k] = 0;
}

mge_status mge_onnx_fresh_name(mge_onnx_ctx *c, const char *base, char *out, size_t n)
{
    char b[256];
    sanitize(base, b, sizeof b - 16);
    if (mge_graph_find(c->g, b) < 0 && mge_graph_find_node(c->g, b) < 0) {
        snprintf(out, n, "%s", b);
        return MGE_OK;
    }
    for (int k = 2;; k++) {
        snprintf(out, n, "%s_%d", b, k);
        if (mge_graph_find(c->g, out) < 0 && mge_graph_find_node(c->g, out) < 0)
            return MGE_OK;
    }
}

/* Keeps the ONNX name of an interface value whose mge name differs. */
static mge_status keep_name(mge_onnx_ctx *c, const char *onnx, int v)
{
    const char *mine = c->g->values[v].name;
    if (strcmp(mine, onnx) == 0)
        return MGE_OK;
    char key[300];
    snprintf(key, sizeof key, "onnx.name.%s", mine);
    return mge_graph_set_meta(c->g, key, onnx, c->err);
}

/* ---------------------------------------------------------------- lookups for converters */

typedef struct reader {
    mge_onnx_ctx c;
    namemap map;
    const char *dir;
    const mge_load_opts *o;
    char *bound_used;      /* per binding: an input took it */
    const char **in_names; /* the ONNX names of c.g's inputs, in order */
    int64_t batch_sym_set;
    char batch_name[160];
} reader;

static mge_status materialize(reader *r, nm_ent *e)
{
    mge_onnx_ctx *c = &r->c;
    const Onnx__TensorProto *tp = e->init;
    mge_tensor t;
    mge_status s = mge_onnx_tensor(tp, r->dir, &t, c->err);
    if (s) {
        mge_error_prefix(c->err, "initializer '%s'", e->name);
        return s;
    }
    char name[256];
    mge_onnx_fresh_name(c, e->name, name, sizeof name);
    /* Float weights are trainable; what an exporter made up ("onnx::Mul_12",
     * scalars) is a constant. Layer converters promote their weights. */
    int64_t numel = mge_tensor_numel(&t);
    mge_valkind kind = MGE_VAL_CONST;
    if (mge_dtype_is_float(t.dtype) && numel > 1 && strncmp(e->name, "onnx::", 6) != 0 && e->name[0] != '/')
        kind = MGE_VAL_PARAM;
    int v = mge_graph_add_value(c->g, name, kind, t.dtype, t.ndim, t.dims, c->err);
    if (v < 0) {
        mge_tensor_free(&t);
        return c->err->code ? c->err->code : MGE_ERR_INVALID;
    }
    mge_tensor *d = malloc(sizeof *d);
    if (!d) {
        mge_tensor_free(&t);
        return mge_error_set(c->err, MGE_ERR_NOMEM, "out of memory");
    }
    *d = t;
    c->g->values[v].data = d;
    e->v = v;
    e->state = NM_DEF;
    return keep_name(c, e->name, v);
}

int mge_onnx_lookup(mge_onnx_ctx *c, const char *name)
{
    reader *r = (reader *)c;
    nm_ent *e = name ? nm_find(&r->map, name) : NULL;
    if (!e)
        return -1;
    if (e->state == NM_INIT && materialize(r, e))
        return -1;
    return e->state == NM_DEF ? e->v : -1;
}

mge_status mge_onnx_define(mge_onnx_ctx *c, const char *name, int v)
{
    reader *r = (reader *)c;
    nm_ent *e = nm_get(&r->map, name);
    if (!e)
        return mge_error_set(c->err, MGE_ERR_NOMEM, "out of memory");
    if (e->state == NM_DEF || e->state == NM_INIT)
        return mge_error_set(c->err, MGE_ERR_FORMAT, "'%s' is defined twice", name);
    e->state = NM_DEF;
    e->v = v;
    return MGE_OK;
}

/* ---------------------------------------------------------------- graph inputs */

static int symbol_name(const char *p, char *out, size_t n)
{
    size_t k = 0;
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_'))
        out[k++] = 's';
    for (; *p && k + 1 < n; p++)
        out[k++] = ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')) ? *p : '_';
    out[k] = 0;
    return (int)k;
}

static mge_status input_dim(reader *r, const char *input, int axis, const Onnx__TensorShapeProto__Dimension *d,
                            int64_t *out)
{
    mge_onnx_ctx *c = &r->c;
    char sym[128];
    if (d && d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
        if (d->dim_value < 0)
            return mge_error_set(c->err, MGE_ERR_FORMAT, "input '%s': dim %d is negative (%lld)", input, axis,
                                 (long long)d->dim_value);
        *out = d->dim_value;
        return MGE_OK;
    }
    const char *pname = d && d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && d->dim_param &&
                                *d->dim_param
                            ? d->dim_param
                            : NULL;
    char anon[160];
    if (!pname) {
        snprintf(anon, sizeof anon, "%s_d%d", input, axis);
        pname = anon;
    }
    /* the batch: the first symbolic leading dim, and every dim of that name */
    if ((axis == 0 && !r->batch_sym_set) || (r->batch_sym_set && strcmp(pname, r->batch_name) == 0)) {
        if (!r->batch_sym_set) {
            r->batch_sym_set = 1;
            snprintf(r->batch_name, sizeof r->batch_name, "%s", pname);
            if (strcmp(pname, "N") != 0 && mge_graph_set_meta(c->g, "onnx.dim.N", pname, c->err))
                return c->err->code;
        }
        *out = MGE_DIM_N;
        return MGE_OK;
    }
    symbol_name(pname, sym, sizeof sym);
    if (strcmp(sym, "N") == 0)
        snprintf(sym, sizeof sym, "N_");
    mge_status s = mge_dim_symbol(sym, strlen(sym), out, c->err);
    if (s)
        return s;
    if (strcmp(sym, pname) != 0) {
        char key[160];
        snprintf(key, sizeof key, "onnx.dim.%s", sym);
        if (!mge_graph_get_meta(c->g, key) && mge_graph_set_meta(c->g, key, pname, c->err))
            return c->err->code;
    }
    return MGE_OK;
}

static mge_status add_input(reader *r, const Onnx__ValueInfoProto *vi)
{
    mge_onnx_ctx *c = &r->c;
    const char *name = vi->name;
    if (!vi->type || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !vi->type->tensor_type)
        return mge_error_set(c->err, MGE_ERR_UNSUPPORTED, "input '%s' is not a tensor (sequences, maps and optionals "
                             "are not supported)", name);
    const Onnx__TypeProto__Tensor *tt = vi->type->tensor_type;
    int ot = tt->has_elem_type ? tt->elem_type : 0;
    int dt = mge_onnx_dtype(ot);
    if (dt < 0)
        return mge_error_set(c->err, MGE_ERR_UNSUPPORTED, "input '%s' is %s: mge has no such dtype", name,
                             mge_onnx_dtype_name(ot));
    int64_t dims[MGE_MAX_DIMS];
    int nd = 0;
    if (!tt->shape)
        return mge_error_set(c->err, MGE_ERR_UNSUPPORTED, "input '%s' has no shape (mge needs the rank)", name);
    if (tt->shape->n_dim > MGE_MAX_DIMS)
        return mge_error_set(c->err, MGE_ERR_UNSUPPORTED, "input '%s' has rank %zu (mge has at most %d)", name,
                             tt->shape->n_dim, MGE_MAX_DIMS);
    nd = (int)tt->shape->n_dim;
    for (int k = 0; k < nd; k++) {
        mge_status s = input_dim(r, name, k, tt->shape->dim[k], &dims[k]);
        if (s)
            return s;
    }
    char mine[256];
    mge_onnx_fresh_name(c, name, mine, sizeof mine);
    int v = mge_graph_add_value(c->g, mine, MGE_VAL_INPUT, (mge_dtype)dt, nd, dims, c->err);
    if (v < 0)
        return c->err->code ? c->err->code : MGE_ERR_INVALID;
    nm_ent *e = nm_get(&r->map, name);
    if (!e)
        return mge_error_set(c->err, MGE_ERR_NOMEM, "out of memory");
    e->state = NM_DEF;
    e->v = v;
    mge_status s = keep_name(c, name, v);
    if (s)
        return s;
    if (r->in_names && c->g->ninputs > 0 && c->g->inputs[c->g->ninputs - 1] == v)
        r->in_names[c->g->ninputs - 1] = name;
    int b = r->o && r->o->bind ? mge_tlist_find(r->o->bind, name) : -1;
    if (b < 0 && r->o && r->o->bind)
        b = mge_tlist_find(r->o->bind, mine);
    if (b < 0)
        return MGE_OK;
    /* a bound input: the nodes read a const holding its value; the input
     * itself stays declared (records keep their layout) */
    r->bound_used[b] = 1;
    const mge_tensor *bt = &r->o->bind->t[b];
    char want[128], got[128];
    int fits = bt->dtype == (mge_dtype)dt && bt->ndim == nd;
    for (int k = 0; fits && k < nd; k++)
        fits = dims[k] < 0 || dims[k] == bt->dims[k];
    if (!fits)
        return mge_error_set(c->err, MGE_ERR_SHAPE, "input '%s' is %s: its bound value is %s", name,
                             mge_shape_str((mge_dtype)dt, nd, dims, want, sizeof want),
                             mge_shape_str(bt->dtype, bt->ndim, bt->dims, got, sizeof got));
    mge_tensor t;
    if ((s = mge_tensor_copy(&t, bt, c->err)))
        return s;
    char base[300];
    snprintf(base, sizeof base, "%s.bound", mine);
    int k = mge_onnx_const_named(c, base, &t);
    if (k < 0)
        return c->err->code ? c->err->code : MGE_ERR_INVALID;
    e->v = k;
    /* what it was bound to, for mge-dump: "i64[2] 0 2" (16 values at most) */
    mge_buf d = {0};
    mge_buf_printf(&d, "%s", mge_shape_str(bt->dtype, bt->ndim, bt->dims, got, sizeof got));
    int64_t m = mge_tensor_numel(bt);
    for (int64_t i = 0; i < m && i < 16; i++) {
        double x = bt->dtype == MGE_I64 ? (double)((const int64_t *)bt->data)[i]
                   : bt->dtype == MGE_I32 ? ((const int32_t *)bt->data)[i]
                   : bt->dtype == MGE_F32 ? ((const float *)bt->data)[i]
                   : bt->dtype == MGE_BOOL || bt->dtype == MGE_U8 ? ((const uint8_t *)bt->data)[i]
                   : bt->dtype == MGE_I8 ? ((const int8_t *)bt->data)[i] : NAN;
        mge_buf_printf(&d, " %.9g", x);
    }
    if (m > 16)
        mge_buf_printf(&d, " ...");
    char key[300];
    snprintf(key, sizeof key, "onnx.bound.%s", mine);
    s = d.p ? mge_graph_set_meta(c->g, key, d.p, c->err) : mge_error_set(c->err, MGE_ERR_NOMEM, "out of memory");
    mge_buf_free(&d);
    return s;
}

/* ---------------------------------------------------------------- nodes */

static void poison(reader *r, const Onnx__NodeProto *n)
{
    for (size_t o = 0; o < n->n_output; o++) {
        if (!n->output[o] || !*n->output[o])
            continue;
        nm_ent *e = nm_get(&r->map, n->output[o]);
        if (e && e->state != NM_DEF)
            e->state = NM_POISON;
    }
}

static int default_domain(const char *d)
{
    return !d || !*d || strcmp(d, "ai.onnx") == 0;
}

mge_status mge_onnx_nodes(mge_onnx_ctx *c, size_t nn, Onnx__NodeProto *const *nodes);

static mge_status convert_node(reader *r, const Onnx__NodeProto *n)
{
    mge_onnx_ctx *c = &r->c;
    char b[300];
    if (!n->op_type || !*n->op_type)
        return mge_error_set(c->err, MGE_ERR_FORMAT, "node %s%s%s has no op_type", *n->name ? "'" : "making '",
                             *n->name ? n->name : n->n_output ? n->output[0] : "", "'");
    if (n->n_output == 0) /* every op of the default domain has one at least */
        return mge_error_set(c->err, MGE_ERR_FORMAT, "node %s has no outputs", mge_onnx_node_label(n, b, sizeof b));
    /* inputs: defined before, or poisoned by an unsupported node */
    int poisoned = 0;
    for (size_t i = 0; i < n->n_input; i++) {
        const char *in = n->input[i];
        if (!in || !*in)
            continue;
        nm_ent *e = nm_find(&r->map, in);
        if (!e)
            return mge_error_set(c->err, MGE_ERR_FORMAT, "node %s reads '%s', which nothing defines",
                                 mge_onnx_node_label(n, b, sizeof b), in);
        if (e->state == NM_LATER)
            return mge_error_set(c->err, MGE_ERR_FORMAT,
                                 "node %s reads '%s' before it is defined (the nodes are not in topological order, or "
                                 "the graph has a cycle)",
                                 mge_onnx_node_label(n, b, sizeof b), in);
        if (e->state == NM_UNCOMP) {
            /* reported on the node that does not compute it, once */
            mge_onnx_unsupported(c, e->node, "mge does not compute its output '%s', which node %s reads", in,
                                 mge_onnx_node_label(n, b, sizeof b));
            e->state = NM_POISON;
        }
        if (e->state == NM_POISON)
            poisoned = 1;
        else if (e->state == NM_INIT && materialize(r, e))
            return c->err->code ? c->err->code : MGE_ERR_FORMAT;
    }
    if (poisoned) {
        poison(r, n);
        return MGE_OK;
    }
    if (default_domain(n->domain) && c->opset == 0)
        return mge_error_set(c->err, MGE_ERR_FORMAT, "node %s is of the default ONNX domain, but the model imports "
                             "no opset of it (opset_import names only other domains)", mge_onnx_node_label(n, b, sizeof b));
    const mge_onnx_op *op = default_domain(n->domain) ? mge_onnx_find_op(n->op_type) : NULL;
    mge_status s;
    if (!op) {
        if (!default_domain(n->domain))
            s = mge_onnx_unsupported(c, n, "the domain is not supported (mge reads the default ONNX domain only)");
        else
            s = mge_onnx_unsupported(c, n, "no such op in mge");
    } else if (c->opset < op->since) {
        s = mge_onnx_unsupported(c, n, "the opset %lld version of %s (mge reads it from opset %d)", (long long)c->opset,
                                 n->op_type, op->since);
    } else {
        int before = c->nunsupported;
        s = op->fn(c, n);
        if (s == MGE_ERR_UNSUPPORTED && c->nunsupported == before)
            mge_onnx_unsupported(c, n, "%s", c->err->msg);
    }
    if (s == MGE_ERR_UNSUPPORTED) {
        mge_error_clear(c->err);
        poison(r, n);
        return MGE_OK;
    }
    if (s)
        return s;
    for (size_t o = 0; o < n->n_output; o++) {
        if (!n->output[o] || !*n->output[o])
            continue;
        nm_ent *e = nm_find(&r->map, n->output[o]);
        if (!e || e->state != NM_DEF) {
            /* an optional output mge does not compute (e.g. BatchNormalization's
             * opset 9-13 training outputs): usable by nothing */
            nm_ent *x = nm_get(&r->map, n->output[o]);
            if (!x)
                return mge_error_set(c->err, MGE_ERR_NOMEM, "out of memory");
            x->state = NM_UNCOMP;
            x->node = n;
        }
    }
    return MGE_OK;
}

/* Registers every name a node list defines (NM_LATER), refusing duplicates. */
static mge_status declare_outputs(reader *r, size_t nn, Onnx__NodeProto *const *nodes)
{
    mge_onnx_ctx *c = &r->c;
    char b[300];
    for (size_t i = 0; i < nn; i++)
        for (size_t o = 0; o < nodes[i]->n_output; o++) {
            const char *on = nodes[i]->output[o];
            if (!on || !*on)
                continue;
            nm_ent *e = nm_find(&r->map, on);
            if (e)
                return mge_error_set(c->err, MGE_ERR_FORMAT, "'%s' is defined twice (by node %s%s)", on,
                                     mge_onnx_node_label(nodes[i], b, sizeof b),
                                     e->state == NM_INIT  ? " and as an initializer"
                                     : e->state == NM_DEF ? " and as an input"
                                                          : " and another node");
            if (!nm_get(&r->map, on))
                return mge_error_set(c->err, MGE_ERR_NOMEM, "out of memory");
        }
    return MGE_OK;
}

mge_status mge_onnx_nodes(mge_onnx_ctx *c, size_t nn, Onnx__NodeProto *const *nodes)
{
    reader *r = (reader *)c;
    mge_status s = declare_outputs(r, nn, nodes);
    for (size_t i = 0; i < nn && !s; i++)
        s = convert_node(r, nodes[i]);
    return s;
}

/* A subgraph's initializers, for If branches that fold. */
mge_status mge_onnx_add_initializers(mge_onnx_ctx *c, size_t ni, Onnx__TensorProto *const *init)
{
    reader *r = (reader *)c;
    for (size_t i = 0; i < ni; i++) {
        const char *nm = init[i]->name;
        if (!nm || !*nm)
            return mge_error_set(c->err, MGE_ERR_FORMAT, "initializer %zu has no name", i);
        nm_ent *e = nm_find(&r->map, nm);
        if (e && e->state == NM_INIT)
            return mge_error_set(c->err, MGE_ERR_FORMAT, "initializer '%s' is given twice", nm);
        if (e && e->state == NM_DEF)
            continue; /* IR < 4: an input's default value; the input wins */
        if (!(e = nm_get(&r->map, nm)))
            return mge_error_set(c->err, MGE_ERR_NOMEM, "out of memory");
        e->state = NM_INIT;
        e->init = init[i];
    }
    return MGE_OK;
}

/* The subgraph value name, for converters (If) that alias outputs. */
int mge_onnx_state_ok(mge_onnx_ctx *c, const char *name)
{
    reader *r = (reader *)c;
    nm_ent *e = nm_find(&r->map, name);
    return e && (e->state == NM_DEF || e->state == NM_INIT);
}

/* ---------------------------------------------------------------- outputs */

static mge_status add_output(reader *r, const Onnx__ValueInfoProto *vi)
{
    mge_onnx_ctx *c = &r->c;
    int v = mge_onnx_lookup(c, vi->name);
    if (v < 0) {
        nm_ent *e = nm_find(&r->map, vi->name);
        if (e && e->state == NM_POISON)
            return MGE_OK; /* made by an unsupported node: reported there */
        if (e && e->state == NM_UNCOMP) {
            mge_onnx_unsupported(c, e->node, "mge does not compute its output '%s', a graph output", vi->name);
            e->state = NM_POISON;
            return MGE_OK;
        }
        if (c->err->code)
            return c->err->code;
        return mge_error_set(c->err, MGE_ERR_FORMAT, "output '%s' is not defined by any node, input or initializer",
                             vi->name);
    }
    /* declared type and shape against inference: warn, use the inferred */
    const mge_value *x = &c->g->values[v];
    if (vi->type && vi->type->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && vi->type->tensor_type) {
        const Onnx__TypeProto__Tensor *tt = vi->type->tensor_type;
        if (tt->has_elem_type && tt->elem_type && mge_onnx_dtype(tt->elem_type) != (int)x->dtype)
            mge_onnx_warn(c, "output '%s' is declared %s, but mge computes %s", vi->name,
                          mge_onnx_dtype_name(tt->elem_type), mge_dtype_name(x->dtype));
        else if (tt->shape) {
            int bad = (int)tt->shape->n_dim != x->ndim;
            for (int k = 0; !bad && k < x->ndim; k++) {
                const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[k];
                if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && !mge_dim_is_symbol(x->dims[k]) &&
                    x->dims[k] >= 0 && d->dim_value != x->dims[k])
                    bad = 1;
            }
            if (bad) {
                char b[128], d[160];
                size_t k = (size_t)snprintf(d, sizeof d, "[");
                for (size_t i = 0; i < tt->shape->n_dim && k < sizeof d; i++) {
                    const Onnx__TensorShapeProto__Dimension *di = tt->shape->dim[i];
                    const char *sep = i ? "," : "";
                    if (di->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
                        k += (size_t)snprintf(d + k, sizeof d - k, "%s%lld", sep, (long long)di->dim_value);
                    else if (di->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && di->dim_param)
                        k += (size_t)snprintf(d + k, sizeof d - k, "%s%.32s", sep, di->dim_param);
                    else
                        k += (size_t)snprintf(d + k, sizeof d - k, "%s?", sep);
                }
                if (k < sizeof d)
                    snprintf(d + k, sizeof d - k, "]");
                mge_onnx_warn(c, "output '%s' is declared %s, but mge infers %s; using the inferred shape", vi->name, d,
                              mge_shape_str(x->dtype, x->ndim, x->dims, b, sizeof b));
            }
        }
    }
    /* An output that is a value under another ONNX name (an input, an
     * initializer, or what Identity passed on) or already an output gets a
     * copy under its own name: mge outputs are values, and each has one name. */
    char want[256];
    sanitize(vi->name, want, sizeof want - 16);
    int again = 0;
    for (int i = 0; i < c->g->noutputs; i++)
        again |= c->g->outputs[i] == v;
    if (again || strcmp(c->g->values[v].name, want) != 0) {
        char name[256];
        mge_status s = mge_onnx_fresh_name(c, vi->name, name, sizeof name);
        if (s)
            return s;
        const char *np[1] = {name};
        int k = mge_graph_add_node(c->g, name, MGE_OP_COPY, 1, &v, 0, NULL, 1, np, c->err);
        if (k < 0)
            return c->err->code ? c->err->code : MGE_ERR_INVALID;
        v = c->g->nodes[k].out[0];
    }
    mge_status s = mge_graph_add_output(c->g, v, c->err);
    return s ? s : keep_name(c, vi->name, v);
}

/* ---------------------------------------------------------------- the model */

static mge_status check_opset(reader *r, const Onnx__ModelProto *m)
{
    mge_onnx_ctx *c = &r->c;
    int64_t v = -1;
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = m->opset_import[i];
        if (default_domain(o->domain))
            v = o->has_version ? o->version : 1;
    }
    if (v < 0 && m->n_opset_import) {
        /* only other domains (ai.onnx.ml, training): their nodes are listed
         * as unsupported; a default-domain node is an error (convert_node) */
        c->opset = 0;
        return MGE_OK;
    }
    if (v < 0)
        v = 1; /* IR version 3 models without opset_import: opset 1 */
    if (v < MGE_ONNX_OPSET_MIN)
        return mge_error_set(c->err, MGE_ERR_UNSUPPORTED, "opset %lld is older than mge reads (%d to %d): upgrade it "
                             "with onnx.version_converter", (long long)v, MGE_ONNX_OPSET_MIN, MGE_ONNX_OPSET_MAX);
    if (v > MGE_ONNX_OPSET_MAX)
        return mge_error_set(c->err, MGE_ERR_UNSUPPORTED, "opset %lld is newer than mge knows (%d to %d)", (long long)v,
                             MGE_ONNX_OPSET_MIN, MGE_ONNX_OPSET_MAX);
    c->opset = v;
    return MGE_OK;
}

static mge_status read_model(reader *r, const Onnx__ModelProto *m)
{
    mge_onnx_ctx *c = &r->c;
    const Onnx__GraphProto *gp = m->graph;
    if (!gp)
        return mge_error_set(c->err, MGE_ERR_FORMAT, "the model has no graph (is the file cut short?)");
    mge_status s = check_opset(r, m);
    if (s)
        return s;
    if (gp->n_sparse_initializer)
        return mge_error_set(c->err, MGE_ERR_UNSUPPORTED, "sparse initializers are not supported");
    char b[64];
    snprintf(b, sizeof b, "%lld", (long long)c->opset);
    if (c->opset && (s = mge_graph_set_meta(c->g, "onnx.opset", b, c->err)))
        return s;
    if (m->producer_name && *m->producer_name) {
        char p[256];
        snprintf(p, sizeof p, "%s%s%s", m->producer_name, m->producer_version && *m->producer_version ? " " : "",
                 m->producer_version ? m->producer_version : "");
        if ((s = mge_graph_set_meta(c->g, "onnx.producer", p, c->err)))
            return s;
    }
    /* initializers first (an input may name one: its default, IR < 4) */
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const char *nm = gp->initializer[i]->name;
        if (!nm || !*nm)
            return mge_error_set(c->err, MGE_ERR_FORMAT, "initializer %zu has no name", i);
        nm_ent *e = nm_find(&r->map, nm);
        if (e)
            return mge_error_set(c->err, MGE_ERR_FORMAT, "initializer '%s' is given twice", nm);
        if (!(e = nm_get(&r->map, nm)))
            return mge_error_set(c->err, MGE_ERR_NOMEM, "out of memory");
        e->state = NM_INIT;
        e->init = gp->initializer[i];
    }
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        if (!vi->name || !*vi->name)
            return mge_error_set(c->err, MGE_ERR_FORMAT, "graph input %zu has no name", i);
        nm_ent *e = nm_find(&r->map, vi->name);
        if (e && e->state == NM_INIT)
            continue; /* an initializer listed as an input (IR < 4): a weight, not a model input */
        if (e)
            return mge_error_set(c->err, MGE_ERR_FORMAT, "graph input '%s' is listed twice", vi->name);
        if ((s = add_input(r, vi)))
            return s;
    }
    if ((s = mge_onnx_nodes(c, gp->n_node, gp->node)))
        return s;
    if (gp->n_output == 0)
        return mge_error_set(c->err, MGE_ERR_FORMAT, "the graph has no outputs");
    for (size_t i = 0; i < gp->n_output && !s; i++) {
        if (!gp->output[i]->name || !*gp->output[i]->name)
            return mge_error_set(c->err, MGE_ERR_FORMAT, "graph output %zu has no name", i);
        for (size_t j = 0; j < i; j++)
            if (strcmp(gp->output[j]->name, gp->output[i]->name) == 0)
                return mge_error_set(c->err, MGE_ERR_FORMAT, "graph output '%s' is listed twice",
                                     gp->output[i]->name);
        s = add_output(r, gp->output[i]);
    }
    return s;
}

/* "the import needs the values of inputs 'a', 'b' (...)" or "" */
static void needs_line(const mge_onnx_ctx *c, char *b, size_t bn)
{
    b[0] = 0;
    if (!c->needs.n)
        return;
    const char *p = c->needs.p, *end = p + c->needs.n;
    int cnt = 0;
    for (const char *q = p; q < end; q++)
        cnt += *q == '\n';
    size_t k = (size_t)snprintf(b, bn, "\n  the import needs the value%s of input%s ", cnt == 1 ? "" : "s",
                                cnt == 1 ? "" : "s");
    for (int i = 0; p < end && k < bn; i++) {
        const char *e = memchr(p, '\n', (size_t)(end - p));
        int len = e ? (int)(e - p) : (int)(end - p);
        k += (size_t)snprintf(b + k, bn - k, "%s'%.*s'", i ? ", " : "", len, p);
        p += len + 1;
    }
    if (k < bn)
        snprintf(b + k, bn - k, " (mge plans static shapes: mge-run binds %s from its first record; mge-opt --bind "
                 "NAME=FILE.npy makes a .mge specialized on a value)", cnt == 1 ? "it" : "them");
}

/* "3 unsupported nodes: LINE; LINE; ..." with as many lines as fit. */
static mge_status report_unsupported(reader *r)
{
    mge_onnx_ctx *c = &r->c;
    char msg[sizeof c->err->msg], need[600];
    needs_line(c, need, sizeof need);
    size_t k = (size_t)snprintf(msg, sizeof msg, "%d unsupported node%s (nothing was converted):", c->nunsupported,
                                c->nunsupported == 1 ? "" : "s");
    const char *p = c->unsupported.p ? c->unsupported.p : "";
    int shown = 0;
    while (*p) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (k + len + 48 + strlen(need) >= sizeof msg)
            break;
        k += (size_t)snprintf(msg + k, sizeof msg - k, "\n  %.*s", (int)len, p);
        shown++;
        p += len + (e ? 1 : 0);
    }
    if (shown < c->nunsupported)
        k += (size_t)snprintf(msg + k, sizeof msg - k, "\n  ... and %d more", c->nunsupported - shown);
    if (k < sizeof msg)
        snprintf(msg + k, sizeof msg - k, "%s", need);
    return mge_error_set(c->err, MGE_ERR_UNSUPPORTED, "%s", msg);
}

/* ---------------------------------------------------------------- the inputs the outputs read */

#define MAX_NESTING_READS 100 /* as the nesting check's limit */

/* Every name the nodes of g (and of their subgraphs) read. */
static int need_all(namemap *need, const Onnx__GraphProto *g, int depth)
{
    if (depth > MAX_NESTING_READS)
        return 1;
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        for (size_t k = 0; k < n->n_input; k++)
            if (*n->input[k] && !nm_get(need, n->input[k]))
                return 0;
        for (size_t a = 0; a < n->n_attribute; a++) {
            const Onnx__AttributeProto *at = n->attribute[a];
            if (at->g && !need_all(need, at->g, depth + 1))
                return 0;
            for (size_t k = 0; k < at->n_graphs; k++)
                if (!need_all(need, at->graphs[k], depth + 1))
                    return 0;
        }
    }
    return 1;
}

/* The graph inputs the outputs depend on, at the ONNX level (what mge-run
 * reads for a model specialized on input values: known before the import
 * succeeds), as their mge names, in input order. */
static mge_status reads_list(reader *r, const Onnx__GraphProto *gp, mge_buf *out)
{
    mge_onnx_ctx *c = &r->c;
    namemap need = {0};
    mge_status s = MGE_OK;
    for (size_t i = 0; i < gp->n_output && !s; i++)
        if (!nm_get(&need, gp->output[i]->name))
            s = MGE_ERR_NOMEM;
    for (size_t i = gp->n_node; i-- > 0 && !s;) {
        const Onnx__NodeProto *n = gp->node[i];
        int used = 0;
        for (size_t o = 0; o < n->n_output; o++)
            used |= *n->output[o] && nm_find(&need, n->output[o]) != NULL;
        if (!used)
            continue;
        for (size_t k = 0; k < n->n_input && !s; k++)
            if (*n->input[k] && !nm_get(&need, n->input[k]))
                s = MGE_ERR_NOMEM;
        for (size_t a = 0; a < n->n_attribute && !s; a++) {
            const Onnx__AttributeProto *at = n->attribute[a];
            if (at->g && !need_all(&need, at->g, 1))
                s = MGE_ERR_NOMEM;
            for (size_t k = 0; k < at->n_graphs && !s; k++)
                if (!need_all(&need, at->graphs[k], 1))
                    s = MGE_ERR_NOMEM;
        }
    }
    for (int k = 0; k < c->g->ninputs && r->in_names && !s; k++) {
        int v = c->g->inputs[k];
        if (r->in_names[k] && nm_find(&need, r->in_names[k]) && !mge_buf_printf(out, "%s\n", c->g->values[v].name))
            s = MGE_ERR_NOMEM;
    }
    free(need.e);
    return s ? mge_error_set(c->err, MGE_ERR_NOMEM, "out of memory") : MGE_OK;
}

/* ---------------------------------------------------------------- absent names */

/* protobuf-c leaves an absent string NULL; converters compare, hash and
 * print names (a branch output without a name crashed If), so every name in
 * every graph is made "" when absent, allocated as free_unpacked frees it.
 * Recursion is bounded by the nesting check. 0 when out of memory. */
static int fill(char **p)
{
    if (*p)
        return 1;
    char *e = al_alloc(NULL, 1);
    if (!e)
        return 0;
    e[0] = 0;
    *p = e;
    return 1;
}

static int fill_graph(Onnx__GraphProto *g);

static int fill_tensor(Onnx__TensorProto *t)
{
    return fill(&t->name);
}

static int fill_node(Onnx__NodeProto *n)
{
    if (!fill(&n->name) || !fill(&n->op_type) || !fill(&n->domain))
        return 0;
    for (size_t i = 0; i < n->n_attribute; i++) {
        Onnx__AttributeProto *a = n->attribute[i];
        if (!fill(&a->name) || (a->g && !fill_graph(a->g)) || (a->t && !fill_tensor(a->t)))
            return 0;
        for (size_t k = 0; k < a->n_graphs; k++)
            if (!fill_graph(a->graphs[k]))
                return 0;
        for (size_t k = 0; k < a->n_tensors; k++)
            if (!fill_tensor(a->tensors[k]))
                return 0;
    }
    return 1;
}

static int fill_graph(Onnx__GraphProto *g)
{
    if (!fill(&g->name))
        return 0;
    for (size_t i = 0; i < g->n_node; i++)
        if (!fill_node(g->node[i]))
            return 0;
    for (size_t i = 0; i < g->n_initializer; i++)
        if (!fill_tensor(g->initializer[i]))
            return 0;
    for (size_t i = 0; i < g->n_input; i++)
        if (!fill(&g->input[i]->name))
            return 0;
    for (size_t i = 0; i < g->n_output; i++)
        if (!fill(&g->output[i]->name))
            return 0;
    for (size_t i = 0; i < g->n_value_info; i++)
        if (!fill(&g->value_info[i]->name))
            return 0;
    return 1;
}

/* ---------------------------------------------------------------- nesting */

/* protobuf-c unpacks nested messages by recursion, with no limit: If nodes
 * nested 10^4 deep (3 messages a level) overflow the stack. The wire format
 * is walked first with the schema's descriptors and deeper nesting is
 * refused; 100 is protobuf's own default limit. Bytes the walk cannot parse
 * end it: protobuf-c then says what is wrong with them. */
#define MAX_NESTING 100

static int wire_varint(const uint8_t *p, size_t n, size_t *i, uint64_t *v)
{
    uint64_t x = 0;
    for (int sh = 0; sh < 64 && *i < n; sh += 7) {
        uint8_t b = p[(*i)++];
        x |= (uint64_t)(b & 0x7f) << sh;
        if (!(b & 0x80)) {
            *v = x;
            return 1;
        }
    }
    return 0;
}

/* 0 when a message below p[0..n) is nested deeper than MAX_NESTING */
static int nesting_ok(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t n, int depth)
{
    if (depth > MAX_NESTING)
        return 0;
    size_t i = 0;
    while (i < n) {
        uint64_t tag, len;
        if (!wire_varint(p, n, &i, &tag))
            return 1;
        switch (tag & 7) {
        case 0:
            if (!wire_varint(p, n, &i, &len))
                return 1;
            break;
        case 1:
            if (n - i < 8)
                return 1;
            i += 8;
            break;
        case 5:
            if (n - i < 4)
                return 1;
            i += 4;
            break;
        case 2: {
            if (!wire_varint(p, n, &i, &len) || len > n - i || (tag >> 3) > 0x1fffffff)
                return 1;
            const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(d, (unsigned)(tag >> 3));
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE && !nesting_ok(f->descriptor, p + i, (size_t)len, depth + 1))
                return 0;
            i += (size_t)len;
            break;
        }
        default: return 1; /* groups and invalid wire types */
        }
    }
    return 1;
}

mge_status mge_onnx_read(const void *buf, size_t n, const char *dir, mge_graph **out, mge_error *err)
{
    return mge_onnx_read_opts(buf, n, dir, NULL, out, err);
}

mge_status mge_onnx_read_opts(const void *buf, size_t n, const char *dir, const mge_load_opts *o, mge_graph **out,
                              mge_error *err)
{
    *out = NULL;
    if (!nesting_ok(&onnx__model_proto__descriptor, buf, n, 0))
        return mge_error_set(err, MGE_ERR_FORMAT, "not a valid ONNX model: messages nested more than %d deep",
                             MAX_NESTING);
    Onnx__ModelProto *m = onnx__model_proto__unpack(&allocator, n, buf);
    if (!m)
        return mge_error_set(err, MGE_ERR_FORMAT, "not a valid ONNX model: the protobuf is truncated or corrupted");
    if (m->graph && !fill_graph(m->graph)) {
        onnx__model_proto__free_unpacked(m, &allocator);
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    }
    reader r;
    memset(&r, 0, sizeof r);
    mge_error_clear(err);
    r.c.err = err;
    r.dir = dir;
    r.o = o;
    r.c.g = mge_graph_new();
    mge_hostbuf *hb = malloc(sizeof *hb);
    r.bound_used = calloc(o && o->bind ? (size_t)o->bind->n + 1 : 1, 1);
    r.in_names = calloc(m->graph ? m->graph->n_input + 1 : 1, sizeof *r.in_names);
    if (!r.c.g || !hb || !r.bound_used || !r.in_names) {
        free(r.in_names);
        free(r.bound_used);
        free(hb);
        mge_graph_free(r.c.g);
        onnx__model_proto__free_unpacked(m, &allocator);
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    }
    hb->p = m;
    hb->n = n;
    hb->release = release_message;
    r.c.g->mapping = hb;
    mge_status s = read_model(&r, m);
    for (int b = 0; !s && o && o->bind && b < o->bind->n; b++)
        if (!r.bound_used[b])
            s = mge_error_set(err, MGE_ERR_INVALID, "a value is bound to '%s', which is not an input of the model",
                              o->bind->names[b]);
    if (!s && r.c.nunsupported)
        s = report_unsupported(&r);
    if (o && o->reads && m->graph) {
        mge_error e2;
        mge_error_clear(&e2);
        mge_error *keep = r.c.err;
        r.c.err = &e2; /* the import's own error stays */
        mge_status s2 = reads_list(&r, m->graph, o->reads);
        r.c.err = keep;
        if (s2 && !s)
            s = mge_error_set(err, e2.code, "%s", e2.msg);
    }
    if (s == MGE_ERR_UNSUPPORTED && o && o->needs && r.c.needs.n)
        mge_buf_put(o->needs, r.c.needs.p, r.c.needs.n);
    if (!s && r.c.warnings.n) {
        mge_buf_put(&r.c.warnings, "", 1);
        s = mge_graph_set_meta(r.c.g, "onnx.warnings", r.c.warnings.p, err);
    }
    if (!s) {
        int changed;
        s = mge_pass_prune(&r.c.g, NULL, &changed, err);
    }
    if (!s)
        s = mge_graph_validate(r.c.g, err);
    free(r.map.e);
    free(r.bound_used);
    free(r.in_names);
    mge_onnx_fold_free(&r.c);
    mge_buf_free(&r.c.needs);
    mge_buf_free(&r.c.unsupported);
    mge_buf_free(&r.c.warnings);
    if (s) {
        mge_graph_free(r.c.g);
        return s;
    }
    *out = r.c.g;
    return MGE_OK;
}
