/* onnx_fold.c — values of small tensors computed from constants, folded
 * when a converter asks for them (mge_onnx_data), and the graph inputs an
 * import needs the values of.
 *
 * Shape-like operands (axes, pads, sizes, a Range's limit, ...) are often
 * computed from constants by ops the plan-time value propagation does not
 * evaluate (Neg, float arithmetic, Cast): the `*_expanded` function bodies
 * of the ONNX suite are full of them. Such a value is evaluated here: the
 * mge nodes that compute it are copied into a small graph whose leaves are
 * consts (constant data, or values known from shapes alone), which the
 * executor runs once, as the fold-constants pass does. Only small tensors
 * fold (every value on the way at most FOLD_MAX elements, at most
 * FOLD_NODES nodes), and nothing whose shape involves a symbol: shape
 * arithmetic on symbols stays as it is.
 *
 * Folded data is kept beside the graph (c->g's values are not touched, so
 * converters may hold value pointers across mge_onnx_data); the emit
 * helpers (onnx_conv.c) substitute a const for a folded input. */
#include "onnx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FOLD_MAX 4096   /* elements of each value on the way */
#define FOLD_NODES 256  /* nodes of one folded value */

/* per value: 0 untried, 1 folded (fold_t), 2 not foldable */
enum { F_UNTRIED = 0, F_DONE, F_NO };

typedef struct foldtab {
    int cap;
    signed char *st;
    mge_tensor **t;      /* F_DONE: the value's data */
    int *cv;             /* the const standing for it in c->g, or -1 */
} foldtab;

static foldtab *tab(mge_onnx_ctx *c)
{
    foldtab *f = c->fold;
    if (!f) {
        f = calloc(1, sizeof *f);
        if (!f)
            return NULL;
        c->fold = f;
    }
    if (f->cap < c->g->nvalues) {
        int cap = f->cap ? f->cap : 256;
        while (cap < c->g->nvalues)
            cap *= 2;
        signed char *st = realloc(f->st, (size_t)cap);
        mge_tensor **t = st ? realloc(f->t, sizeof *t * (size_t)cap) : NULL;
        int *cv = t ? realloc(f->cv, sizeof *cv * (size_t)cap) : NULL;
        if (st)
            f->st = st;
        if (t)
            f->t = t;
        if (!cv)
            return NULL;
        f->cv = cv;
        memset(f->st + f->cap, 0, (size_t)(cap - f->cap));
        memset(f->t + f->cap, 0, sizeof *t * (size_t)(cap - f->cap));
        for (int i = f->cap; i < cap; i++)
            f->cv[i] = -1;
        f->cap = cap;
    }
    return f;
}

void mge_onnx_fold_free(mge_onnx_ctx *c)
{
    foldtab *f = c->fold;
    if (!f)
        return;
    for (int i = 0; i < f->cap; i++)
        if (f->t[i]) {
            mge_tensor_free(f->t[i]);
            free(f->t[i]);
        }
    free(f->st);
    free(f->t);
    free(f->cv);
    free(f);
    c->fold = NULL;
}

/* Element count of a value's template shape; -1 when a dim is symbolic. */
static int64_t concrete_numel(const mge_value *x)
{
    int64_t m = 1;
    for (int d = 0; d < x->ndim; d++) {
        if (x->dims[d] < 0)
            return -1;
        m *= x->dims[d];
        if (m > FOLD_MAX)
            return m;
    }
    return m;
}

/* 1 when v's elements are known from shapes and constants and the same at
 * every probe binding (so not a function of a symbol); its desc into *d. */
static int probe_const(mge_onnx_ctx *c, int v, mge_tdesc *d)
{
    mge_tdesc d0;
    memset(&d0, 0, sizeof d0);
    for (int p = 0; p < 5; p++) {
        mge_tdesc e;
        memset(&e, 0, sizeof e);
        if (mge_graph_probe_desc(c->g, v, p, &e, NULL) || !e.known)
            return 0;
        if (p == 0)
            d0 = e;
        else if (e.ndim != d0.ndim || memcmp(e.dims, d0.dims, sizeof(int64_t) * (size_t)e.ndim) ||
                 memcmp(e.val, d0.val, sizeof e.val))
            return 0;
    }
    *d = d0;
    return 1;
}

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
    default: break;
    }
}

/* ---------------------------------------------------------------- collecting */

typedef struct sub {
    int nodes[FOLD_NODES];
    int nn;
    int vals[4 * FOLD_NODES + 64];     /* values of c->g in the small graph */
    int nv;
    int leaf[4 * FOLD_NODES + 64];     /* 1: a const there */
} sub;

static int in_sub(const sub *s, int v)
{
    for (int i = 0; i < s->nv; i++)
        if (s->vals[i] == v)
            return 1;
    return 0;
}

static int add_val(sub *s, int v, int leaf)
{
    if (s->nv >= (int)(sizeof s->vals / sizeof s->vals[0]))
        return 0;
    s->vals[s->nv] = v;
    s->leaf[s->nv++] = leaf;
    return 1;
}

/* Collects what computes v (post-order: a node after its inputs' nodes).
 * 1 ok; 0 v is not foldable (remembered); -1 over the budget. */
static int collect(mge_onnx_ctx *c, foldtab *f, sub *s, int v, int depth)
{
    if (in_sub(s, v))
        return 1;
    const mge_value *x = &c->g->values[v];
    int64_t m = concrete_numel(x);
    if (m < 0 || m > FOLD_MAX)
        return 0;
    if (x->kind != MGE_VAL_NODE) {
        if (x->kind == MGE_VAL_INPUT || !x->data || (m && !x->data->data))
            return 0;
        return add_val(s, v, 1) ? 1 : -1;
    }
    if (f->st[v] == F_DONE)
        return add_val(s, v, 1) ? 1 : -1;
    if (f->st[v] == F_NO)
        return 0;
    mge_tdesc d;
    if (m <= MGE_TDESC_NVAL && probe_const(c, v, &d))
        return add_val(s, v, 1) ? 1 : -1;
    if (depth > 64 || s->nn >= FOLD_NODES)
        return -1;
    const mge_node *n = &c->g->nodes[x->producer];
    const mge_opinfo *oi = mge_op_info(n->op);
    if (!oi || (oi->flags & MGE_OPF_TRAINING)) {
        f->st[v] = F_NO;
        return 0;
    }
    for (int o = 0; o < n->nout; o++) {
        int64_t mo = concrete_numel(&c->g->values[n->out[o]]);
        if (mo < 0 || mo > FOLD_MAX) {
            f->st[v] = F_NO;
            return 0;
        }
    }
    for (int k = 0; k < n->nin; k++) {
        int r = collect(c, f, s, n->in[k], depth + 1);
        if (r <= 0) {
            if (r == 0)
                f->st[v] = F_NO;
            return r;
        }
    }
    /* inputs collected: the node's outputs are in the small graph now */
    if (s->nn >= FOLD_NODES)
        return -1;
    s->nodes[s->nn++] = x->producer;
    for (int o = 0; o < n->nout; o++)
        if (!in_sub(s, n->out[o]) && !add_val(s, n->out[o], 0))
            return -1;
    return 1;
}

/* The small graph's const for leaf v: constant data, folded data or the
 * values known from shapes. */
static mge_status leaf_data(mge_onnx_ctx *c, foldtab *f, int v, mge_tensor *t, mge_error *err)
{
    const mge_value *x = &c->g->values[v];
    if (x->kind != MGE_VAL_NODE)
        return mge_tensor_copy(t, x->data, err);
    if (f->st[v] == F_DONE)
        return mge_tensor_copy(t, f->t[v], err);
    mge_tdesc d;
    if (!probe_const(c, v, &d))
        return mge_error_set(err, MGE_ERR_INVALID, "'%s' is not known", x->name);
    mge_status s = mge_tensor_alloc(t, x->dtype, d.ndim, d.dims, err);
    if (s)
        return s;
    int64_t m = mge_tensor_numel(t);
    for (int64_t i = 0; i < m; i++)
        put(t, i, d.val[i]);
    return MGE_OK;
}

static int sub_index(const mge_graph *sg, const mge_graph *g, int v)
{
    return mge_graph_find(sg, g->values[v].name);
}

/* Runs the collected nodes; v's value into *out. */
static mge_status evaluate(mge_onnx_ctx *c, foldtab *f, const sub *s, int v, mge_tensor *out, mge_error *err)
{
    mge_graph *sg = mge_graph_new();
    mge_exec *e = NULL;
    mge_status st = MGE_OK;
    if (!sg)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    for (int i = 0; i < s->nv && !st; i++) {
        if (!s->leaf[i])
            continue;
        int u = s->vals[i];
        mge_tensor t;
        memset(&t, 0, sizeof t);
        if ((st = leaf_data(c, f, u, &t, err)))
            break;
        int k = mge_graph_add_value(sg, c->g->values[u].name, MGE_VAL_CONST, t.dtype, t.ndim, t.dims, err);
        mge_tensor *d = k >= 0 ? malloc(sizeof *d) : NULL;
        if (!d) {
            mge_tensor_free(&t);
            st = k < 0 ? (err->code ? err->code : MGE_ERR_INVALID) : mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
            break;
        }
        *d = t;
        sg->values[k].data = d;
    }
    for (int i = 0; i < s->nn && !st; i++) {
        const mge_node *n = &c->g->nodes[s->nodes[i]];
        int in[64];
        const char *on[8];
        if (n->nin > 64 || n->nout > 8) {
            st = mge_error_set(err, MGE_ERR_INVALID, "node '%s' is too wide to fold", n->name);
            break;
        }
        for (int k = 0; k < n->nin; k++)
            in[k] = sub_index(sg, c->g, n->in[k]);
        for (int o = 0; o < n->nout; o++)
            on[o] = c->g->values[n->out[o]].name;
        if (mge_graph_add_node(sg, n->name, n->op, n->nin, in, n->nattr, n->attrs, n->nout, on, err) < 0)
            st = err->code ? err->code : MGE_ERR_INVALID;
    }
    int sv = st ? -1 : sub_index(sg, c->g, v);
    if (!st && sv < 0)
        st = mge_error_set(err, MGE_ERR_INVALID, "'%s' is not in the folded graph", c->g->values[v].name);
    if (!st) {
        mge_exec_opts eo = {0};
        eo.noutputs = 1;
        eo.outputs = &sv;
        if (!(st = mge_exec_create(sg, &eo, &e, err)) && !(st = mge_exec_run(e, NULL, err)))
            st = mge_tensor_copy(out, mge_exec_result(e, 0), err);
    }
    mge_exec_free(e);
    mge_graph_free(sg);
    return st;
}

const mge_tensor *mge_onnx_fold(mge_onnx_ctx *c, int v)
{
    if (v < 0 || v >= c->g->nvalues || c->g->values[v].kind != MGE_VAL_NODE)
        return NULL;
    foldtab *f = tab(c);
    if (!f)
        return NULL;
    if (f->st[v] == F_DONE)
        return f->t[v];
    if (f->st[v] == F_NO)
        return NULL;
    sub *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    int r = collect(c, f, s, v, 0);
    mge_tensor *t = NULL;
    if (r > 0 && (t = calloc(1, sizeof *t))) {
        mge_error e;
        mge_error_clear(&e);
        /* what cannot be evaluated is simply not folded: the converter then
         * says why it needs the value. Known from shapes alone: no node runs. */
        if (s->nn == 0 ? leaf_data(c, f, v, t, &e) : evaluate(c, f, s, v, t, &e)) {
            mge_tensor_free(t);
            free(t);
            t = NULL;
        }
    }
    free(s);
    if (!t) {
        f->st[v] = F_NO; /* the same walk would fail the same way */
        return NULL;
    }
    f->st[v] = F_DONE;
    f->t[v] = t;
    return t;
}

int mge_onnx_fold_const(mge_onnx_ctx *c, mge_onnx_node *n, int v)
{
    foldtab *f = c->fold;
    if (v < 0 || !f || v >= f->cap || f->st[v] != F_DONE)
        return v;
    if (f->cv[v] >= 0)
        return f->cv[v];
    mge_tensor t;
    mge_error e;
    mge_error_clear(&e);
    if (mge_tensor_copy(&t, f->t[v], &e))
        return v;
    (void)n;
    char base[200];
    snprintf(base, sizeof base, "%s_folded", c->g->values[v].name);
    int k = mge_onnx_const_named(c, base, &t);
    if (k < 0) {
        mge_error_clear(c->err);
        return v;
    }
    f = tab(c); /* the const may have grown the table's range */
    if (!f)
        return k;
    f->cv[v] = k;
    return k;
}

/* ---------------------------------------------------------------- needed inputs */

static void note_input(mge_onnx_ctx *c, int v)
{
    const char *name = c->g->values[v].name;
    size_t len = strlen(name), i = 0;
    while (i < c->needs.n) {
        const char *p = c->needs.p + i;
        const char *e = memchr(p, '\n', c->needs.n - i);
        size_t l = e ? (size_t)(e - p) : c->needs.n - i;
        if (l == len && memcmp(p, name, len) == 0)
            return;
        i += l + 1;
    }
    mge_buf_printf(&c->needs, "%s\n", name);
}

static void walk_needs(mge_onnx_ctx *c, int v, char *seen, int *budget)
{
    if (v < 0 || v >= c->g->nvalues || seen[v] || --*budget < 0)
        return;
    seen[v] = 1;
    const mge_value *x = &c->g->values[v];
    if (x->kind == MGE_VAL_INPUT) {
        /* an input as small as what folds (symbols counted as 1: a
         * vector of a symbolic length is still a shape operand) */
        int64_t m = 1;
        for (int d = 0; d < x->ndim; d++)
            m *= x->dims[d] < 0 ? 1 : x->dims[d];
        if (m <= FOLD_MAX)
            note_input(c, v);
        return;
    }
    if (x->kind != MGE_VAL_NODE || x->data)
        return;
    mge_tdesc d;
    memset(&d, 0, sizeof d);
    if (mge_graph_probe_desc(c->g, v, 0, &d, NULL) == MGE_OK && d.known)
        return; /* from shapes: its inputs' values do not matter */
    const mge_node *n = &c->g->nodes[x->producer];
    for (int k = 0; k < n->nin; k++)
        walk_needs(c, n->in[k], seen, budget);
}

void mge_onnx_note_needs(mge_onnx_ctx *c, int v)
{
    if (v < 0 || v >= c->g->nvalues)
        return;
    char *seen = calloc((size_t)c->g->nvalues, 1);
    if (!seen)
        return;
    int budget = 4096;
    walk_needs(c, v, seen, &budget);
    free(seen);
}
