/* graph_shapes.c — template and concrete shapes of a graph's values.
 *
 * Ops infer concrete shapes only (and, for small integer tensors computed
 * from shapes and constants, their values: see mge_tdesc.known). The
 * template of a node output is found by inferring at a few probe bindings
 * of the graph's symbols and fitting each output dim to an expression over
 * the inputs' dims (mge_dim_fit); a dim that fits none is MGE_DIM_DYN,
 * computed at plan time. The concrete descs at the probes are kept per
 * value (the probe cache), so a node after a DYN dim still infers from
 * real probe shapes. Plans never use the templates of node outputs: they
 * infer every node at the run's binding (mge_graph_shapes). */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define NPROBE 8
#define NSETS 2

typedef struct pent {
    mge_dtype dt;                  /* what the entry was computed for */
    int ndim;
    int64_t codes[MGE_MAX_DIMS];
    mge_tdesc d[NPROBE];
} pent;

typedef struct probes {
    mge_tdesc *in, *o;  /* scratch: 64 inputs and 4 outputs per probe */
    int *hint_nd;       /* mge_pass_value_dim: concrete shapes at the passes' binding, */
    int64_t *hint_dims; /* for a graph of hint_nv values and hint_nn nodes */
    int hint_nv, hint_nn, hint_failed;
    int set;        /* probe set in use */
    int nsym;       /* symbols in pb */
    mge_binding pb[NPROBE];
    int cap;
    pent **e;       /* per value; NULL: the value's codes say all */
} probes;

static int64_t probe_value(int set, int p, int64_t sym)
{
    /* set 0: widely spread values (a stride-32 network still shows eight
     * sizes at its last layer), probe p = p mod 8 for every symbol, so a
     * floor division by up to 8 fits exactly; symbols differ in magnitude.
     * set 1 (when set 0 fails, e.g. a reshape that must divide): multiples of 64. */
    static const int64_t base0[NPROBE] = {8, 16, 28, 44, 64, 88, 112, 128};
    static const int64_t base1[NPROBE] = {2, 4, 6, 8, 10, 12, 14, 16};
    uint64_t h = (uint64_t)(-sym) * 0x9E3779B97F4A7C15ull + (uint64_t)(p + 1) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    h *= 0x94D049BB133111EBull;
    h ^= h >> 32;
    return set == 0 ? 8 * (base0[p] + (int64_t)(h % 10)) + p : 64 * (base1[p] + (int64_t)(h % 2));
}

static probes *probes_get(mge_graph *g)
{
    if (!g->probes) {
        probes *pr = calloc(1, sizeof(probes));
        if (pr && (!(pr->in = malloc(sizeof(mge_tdesc) * 64 * NPROBE)) ||
                   !(pr->o = malloc(sizeof(mge_tdesc) * 4 * NPROBE)))) {
            free(pr->in);
            free(pr);
            pr = NULL;
        }
        g->probes = pr;
    }
    return g->probes;
}

static void pent_clear(probes *pr)
{
    for (int v = 0; v < pr->cap; v++) {
        free(pr->e[v]);
        pr->e[v] = NULL;
    }
}

void mge_graph_probes_free(mge_graph *g)
{
    probes *pr = g->probes;
    if (!pr)
        return;
    pent_clear(pr);
    free(pr->e);
    free(pr->in);
    free(pr->o);
    free(pr->hint_nd);
    free(pr->hint_dims);
    free(pr);
    g->probes = NULL;
}

/* (Re)builds the probe bindings when the graph gained symbols. */
static mge_status probe_bindings(mge_graph *g, probes *pr, mge_error *err)
{
    int64_t syms[MGE_MAX_SYMS + 1];
    int n = mge_graph_symbols(g, syms, MGE_MAX_SYMS + 1);
    if (n > MGE_MAX_SYMS)
        return mge_error_set(err, MGE_ERR_SHAPE, "more than %d symbols in the graph's inputs", MGE_MAX_SYMS);
    if (n == pr->nsym)
        return MGE_OK;
    for (int p = 0; p < NPROBE; p++) {
        pr->pb[p].n = 0;
        for (int i = 0; i < n; i++)
            mge_binding_set(&pr->pb[p], syms[i], probe_value(pr->set, p, syms[i]), NULL);
    }
    pr->nsym = n;
    return MGE_OK;
}

static int codes_symbolic(int ndim, const int64_t *d)
{
    for (int k = 0; k < ndim; k++)
        if (d[k] < 0)
            return 1;
    return 0;
}

/* A const's values, for ops that read shapes or bounds from one. */
static void const_vals(const mge_value *v, mge_tdesc *d)
{
    const mge_tensor *t = v->data;
    if (!t || !t->data || v->kind != MGE_VAL_CONST)
        return;
    int64_t n = mge_tensor_numel(t);
    if (n < 0 || n > MGE_TDESC_NVAL)
        return;
    for (int64_t i = 0; i < n; i++) {
        double x;
        switch (t->dtype) {
        case MGE_I64: x = (double)((const int64_t *)t->data)[i]; break;
        case MGE_I32: x = ((const int32_t *)t->data)[i]; break;
        case MGE_I8: x = ((const int8_t *)t->data)[i]; break;
        case MGE_U8: case MGE_BOOL: x = ((const uint8_t *)t->data)[i]; break;
        case MGE_F32: x = ((const float *)t->data)[i]; break;
        case MGE_F64: case MGE_I16: case MGE_U16: case MGE_U32: case MGE_U64:
            x = mge_dtype_get(t->dtype, t->data, i);
            break;
        default: return;
        }
        d->val[i] = x;
    }
    d->known = 1;
}

/* The desc of a non-node value (or a node output whose codes are all
 * numbers or symbols) under binding b. */
static mge_status desc_from_codes(const mge_value *v, const mge_binding *b, mge_tdesc *d, mge_error *err)
{
    memset(d, 0, sizeof *d);
    d->dtype = v->dtype;
    d->ndim = v->ndim;
    for (int k = 0; k < v->ndim; k++) {
        mge_status s = mge_dim_eval(v->dims[k], b, &d->dims[k], err);
        if (s) {
            mge_error_prefix(err, "'%s'", v->name);
            return s;
        }
    }
    const_vals(v, d);
    return MGE_OK;
}

static int pent_fresh(const pent *e, const mge_value *v)
{
    return e && e->dt == v->dtype && e->ndim == v->ndim &&
           memcmp(e->codes, v->dims, sizeof(int64_t) * (size_t)v->ndim) == 0;
}

/* The desc of value v at probe p: 0 ok, 1 stale (rebuild), <0 error. */
static int desc_at(mge_graph *g, probes *pr, int v, int p, mge_tdesc *d, mge_error *err)
{
    const mge_value *val = &g->values[v];
    if (v < pr->cap && pent_fresh(pr->e[v], val)) {
        *d = pr->e[v]->d[p];
        return 0;
    }
    for (int k = 0; k < val->ndim; k++)
        if (val->dims[k] == MGE_DIM_DYN)
            return 1;
    if (val->kind == MGE_VAL_NODE && v < pr->cap && pr->e[v])
        return 1; /* had known values: recompute them */
    return desc_from_codes(val, &pr->pb[p], d, err) ? -1 : 0;
}

static mge_status pent_put(probes *pr, int v, const mge_value *val, const mge_tdesc *d, int stride)
{
    if (v >= pr->cap) {
        int cap = pr->cap ? pr->cap : 64;
        while (cap <= v)
            cap *= 2;
        pent **ne = realloc(pr->e, sizeof *ne * (size_t)cap);
        if (!ne)
            return MGE_ERR_NOMEM;
        memset(ne + pr->cap, 0, sizeof *ne * (size_t)(cap - pr->cap));
        pr->e = ne;
        pr->cap = cap;
    }
    free(pr->e[v]);
    pr->e[v] = NULL;
    int need = codes_symbolic(val->ndim, val->dims);
    for (int p = 0; p < NPROBE && !need; p++)
        need = d[(size_t)p * (size_t)stride].known;
    if (!need)
        return MGE_OK;
    pent *e = malloc(sizeof *e);
    if (!e)
        return MGE_ERR_NOMEM;
    e->dt = val->dtype;
    e->ndim = val->ndim;
    memcpy(e->codes, val->dims, sizeof e->codes);
    for (int p = 0; p < NPROBE; p++)
        e->d[p] = d[(size_t)p * (size_t)stride];
    pr->e[v] = e;
    return MGE_OK;
}

/* Known values come only from the families that compute them: other ops
 * copy an input's desc for their output's shape and would carry its values. */
static int keeps_values(int op)
{
    static const char *const fam[] = {"shape", "index", "logic", "unary", "binary"};
    const mge_opinfo *oi = mge_op_info(op);
    for (size_t i = 0; oi && i < sizeof fam / sizeof fam[0]; i++)
        if (strcmp(oi->family, fam[i]) == 0)
            return 1;
    return 0;
}

static mge_status infer_one(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    memset(out, 0, sizeof(mge_tdesc) * 4);
    mge_status s = mge_op_infer_fn(n->op)(n, in, out, err);
    if (!s && !keeps_values(n->op))
        for (int o = 0; o < n->nout && o < 4; o++)
            out[o].known = 0;
    return s;
}

/* ---------------------------------------------------------------- concrete */

/* Per-value concrete descs with known values kept compactly. */
typedef struct cshapes {
    int *ndims;
    int64_t *dims;
    int *vidx;            /* per value: index into vals, -1 unknown */
    double (*vals)[MGE_TDESC_NVAL];
    int nv, capv;
} cshapes;

static mge_status cs_desc(const mge_graph *g, const cshapes *c, int v, mge_tdesc *d)
{
    memset(d, 0, sizeof *d);
    d->dtype = g->values[v].dtype;
    d->ndim = c->ndims[v];
    memcpy(d->dims, &c->dims[(size_t)v * MGE_MAX_DIMS], sizeof d->dims);
    if (c->vidx[v] >= 0) {
        d->known = 1;
        memcpy(d->val, c->vals[c->vidx[v]], sizeof d->val);
    }
    return MGE_OK;
}

static mge_status cs_set(const mge_graph *g, cshapes *c, int v, const mge_tdesc *d)
{
    (void)g;
    c->ndims[v] = d->ndim;
    memcpy(&c->dims[(size_t)v * MGE_MAX_DIMS], d->dims, sizeof d->dims);
    c->vidx[v] = -1;
    if (!d->known)
        return MGE_OK;
    if (c->nv == c->capv) {
        int cap = c->capv ? 2 * c->capv : 16;
        void *nv = realloc(c->vals, sizeof *c->vals * (size_t)cap);
        if (!nv)
            return MGE_ERR_NOMEM;
        c->vals = nv;
        c->capv = cap;
    }
    memcpy(c->vals[c->nv], d->val, sizeof d->val);
    c->vidx[v] = c->nv++;
    return MGE_OK;
}

/* Concrete shapes of every value under b, nodes [0, upto) inferred. */
static mge_status concrete(const mge_graph *g, const mge_binding *b, int upto, cshapes *c, mge_error *err)
{
    c->vidx = malloc(sizeof(int) * (size_t)(g->nvalues ? g->nvalues : 1));
    if (!c->vidx)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    for (int v = 0; v < g->nvalues; v++) {
        const mge_value *val = &g->values[v];
        c->vidx[v] = -1;
        c->ndims[v] = val->ndim;
        if (val->kind == MGE_VAL_NODE)
            continue;
        mge_tdesc d;
        mge_status s = desc_from_codes(val, b, &d, err);
        if (s)
            return s;
        if (cs_set(g, c, v, &d))
            return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    }
    mge_tdesc *in = malloc(sizeof *in * 64), od[4];
    if (!in)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    mge_status s = MGE_OK;
    for (int i = 0; i < upto && !s; i++) {
        const mge_node *n = &g->nodes[i];
        if (n->nin > 64 || n->nout > 4) {
            s = mge_error_set(err, MGE_ERR_INVALID, "%s: too many inputs", n->name);
            break;
        }
        for (int k = 0; k < n->nin; k++)
            cs_desc(g, c, n->in[k], &in[k]);
        if ((s = infer_one(n, in, od, err))) {
            mge_error_prefix(err, "%s", n->name);
            break;
        }
        for (int o = 0; o < n->nout && !s; o++)
            if (cs_set(g, c, n->out[o], &od[o]))
                s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    }
    free(in);
    return s;
}

mge_status mge_graph_shapes(const mge_graph *g, const mge_binding *b, int *ndims, int64_t *dims, mge_error *err)
{
    cshapes c = {ndims, dims, NULL, NULL, 0, 0};
    mge_status s = concrete(g, b, g->nnodes, &c, err);
    free(c.vidx);
    free(c.vals);
    return s;
}

double mge_graph_node_flops(const mge_graph *g, int node, const int *ndims, const int64_t *dims)
{
    const mge_node *n = &g->nodes[node];
    mge_tdesc in[64], od[4];
    if (n->nin > 64 || n->nout > 4)
        return 0;
    for (int k = 0; k < n->nin; k++) {
        memset(&in[k], 0, sizeof in[k]);
        in[k].dtype = g->values[n->in[k]].dtype;
        in[k].ndim = ndims[n->in[k]];
        memcpy(in[k].dims, &dims[(size_t)n->in[k] * MGE_MAX_DIMS], sizeof in[k].dims);
    }
    for (int o = 0; o < n->nout; o++) {
        memset(&od[o], 0, sizeof od[o]);
        od[o].dtype = g->values[n->out[o]].dtype;
        od[o].ndim = ndims[n->out[o]];
        memcpy(od[o].dims, &dims[(size_t)n->out[o] * MGE_MAX_DIMS], sizeof od[o].dims);
    }
    return mge_op_flops_fn(n->op)(n, in, od);
}

/* The binding errors are reported at: N = 1 (as a user would run it), the
 * other symbols at typical image sizes, distinct per symbol (224, 256, ...). */
static void friendly_binding(const mge_graph *g, mge_binding *b)
{
    int64_t syms[MGE_MAX_SYMS];
    int n = mge_graph_symbols(g, syms, MGE_MAX_SYMS);
    b->n = 0;
    for (int i = 0, k = 0; i < n && i < MGE_MAX_SYMS; i++)
        mge_binding_set(b, syms[i], syms[i] == MGE_DIM_N ? 1 : 224 + 32 * k++, NULL);
}

/* The error node n (not yet in g) gives at the friendly binding. */
static mge_status friendly_error(mge_graph *g, const mge_node *n, mge_status code, const char *fallback,
                                 mge_error *err)
{
    mge_binding b;
    friendly_binding(g, &b);
    cshapes c = {malloc(sizeof(int) * (size_t)(g->nvalues ? g->nvalues : 1)),
                 malloc(sizeof(int64_t) * MGE_MAX_DIMS * (size_t)(g->nvalues ? g->nvalues : 1)), NULL, NULL, 0, 0};
    mge_error e;
    mge_status s = c.ndims && c.dims ? concrete(g, &b, g->nnodes, &c, &e) : MGE_ERR_NOMEM;
    if (!s) {
        mge_tdesc in[64], od[4];
        for (int k = 0; k < n->nin && k < 64; k++)
            cs_desc(g, &c, n->in[k], &in[k]);
        s = infer_one(n, in, od, &e);
        if (s) {
            char bs[256] = "";
            int other = 0;
            for (int i = 0; i < b.n; i++)
                other |= b.sym[i] != MGE_DIM_N;
            if (other)
                mge_binding_str(&b, bs, sizeof bs);
            mge_error_set(err, s, "%s%s%s%s", e.msg, other ? " (at " : "", bs, other ? ")" : "");
        } else {
            mge_error_set(err, code, "%s", fallback);
        }
    }
    else
        mge_error_set(err, code, "%s", fallback);
    free(c.ndims);
    free(c.dims);
    free(c.vidx);
    free(c.vals);
    return s ? s : code;
}

/* ---------------------------------------------------------------- templates */

/* Recomputes the probe cache of every node in order at the current set. */
static mge_status probes_rebuild(mge_graph *g, probes *pr, mge_error *err);

/* Infers node n (its outputs not yet in g) at every probe into o[p * 4 + out]. */
static mge_status infer_probes(mge_graph *g, probes *pr, const mge_node *n, mge_tdesc *in, mge_tdesc *o,
                               mge_error *err)
{
    int np = pr->nsym ? NPROBE : 1, rebuilt = 0;
    for (int p = 0; p < np; p++) {
        for (int k = 0; k < n->nin; k++) {
            int r = desc_at(g, pr, n->in[k], p, &in[(size_t)p * 64 + (size_t)k], err);
            if (r < 0)
                return err ? err->code : MGE_ERR_SHAPE;
            if (r > 0 && rebuilt)
                return mge_error_set(err, MGE_ERR_SHAPE, "'%s': no probe shapes for its plan-time dims",
                                     g->values[n->in[k]].name);
            if (r > 0) {
                rebuilt = 1;
                mge_status s = probes_rebuild(g, pr, err);
                if (s)
                    return s;
                p = -1; /* start over with fresh entries */
                break;
            }
        }
    }
    for (int p = 0; p < np; p++) {
        mge_status s = infer_one(n, &in[(size_t)p * 64], &o[(size_t)p * 4], err);
        if (s)
            return s;
    }
    for (int p = np; p < NPROBE; p++) /* static graphs: one probe stands for all */
        memcpy(&o[(size_t)p * 4], o, sizeof(mge_tdesc) * 4);
    return MGE_OK;
}

/* Fits out's template dims from the probes. */
#define NDENSE 64

/* A dim the probes left open (a division by more than 8): infer node n
 * alone at 64 consecutive values of each symbol, its inputs evaluated from
 * their templates (so only when every input dim is an expression and no
 * input carries computed values), and fit again over the probes and these. */
static int64_t refine_dim(const mge_graph *g, const probes *pr, const mge_node *n, int q, int d, const mge_tdesc *o)
{
    for (int k = 0; k < n->nin; k++) {
        const mge_value *v = &g->values[n->in[k]];
        if (v->kind == MGE_VAL_NODE && v->producer >= 0 && pr->e && n->in[k] < pr->cap && pr->e[n->in[k]] &&
            pr->e[n->in[k]]->d[0].known)
            return MGE_DIM_DYN;
        for (int j = 0; j < v->ndim; j++)
            if (v->dims[j] == MGE_DIM_DYN)
                return MGE_DIM_DYN;
    }
    int64_t y[NPROBE + NDENSE], x[NPROBE + NDENSE];
    mge_tdesc in[64], od[4];
    for (int i = 0; i < pr->nsym; i++) {
        int64_t sym = pr->pb[0].sym[i];
        for (int p = 0; p < NPROBE; p++) {
            x[p] = pr->pb[p].val[i];
            y[p] = o[(size_t)p * 4 + (size_t)q].dims[d];
        }
        int ok = 1;
        for (int t = 0; t < NDENSE && ok; t++) {
            mge_binding b = pr->pb[0];
            x[NPROBE + t] = pr->pb[0].val[i] + t;
            mge_binding_set(&b, sym, x[NPROBE + t], NULL);
            for (int k = 0; k < n->nin && ok; k++)
                ok = desc_from_codes(&g->values[n->in[k]], &b, &in[k], NULL) == MGE_OK;
            ok = ok && infer_one(n, in, od, NULL) == MGE_OK && od[q].ndim == o[q].ndim;
            if (ok)
                y[NPROBE + t] = od[q].dims[d];
        }
        if (!ok)
            continue;
        int64_t c = mge_dim_fit(NPROBE + NDENSE, y, 1, &sym, x);
        if (c != MGE_DIM_DYN)
            return c;
    }
    return MGE_DIM_DYN;
}

static mge_status fit_outputs(const mge_graph *g, probes *pr, const mge_node *n, const mge_tdesc *in,
                              const mge_tdesc *o, mge_tdesc *out, mge_error *err)
{
    int np = pr->nsym ? NPROBE : 1;
    /* candidates: the inputs' symbolic dims, then the graph's symbols */
    int64_t cand[24], cv[24 * NPROBE];
    int nc = 0;
    for (int k = 0; k < n->nin; k++) {
        const mge_value *v = &g->values[n->in[k]];
        for (int d = 0; d < v->ndim && nc < 16; d++) {
            int64_t c = v->dims[d];
            if (c >= 0 || c == MGE_DIM_DYN)
                continue;
            int seen = 0;
            for (int j = 0; j < nc; j++)
                seen |= cand[j] == c;
            if (seen)
                continue;
            for (int p = 0; p < np; p++)
                cv[nc * NPROBE + p] = in[(size_t)p * 64 + (size_t)k].dims[d];
            cand[nc++] = c;
        }
    }
    for (int i = 0; i < pr->nsym && nc < 24; i++) {
        int seen = 0;
        for (int j = 0; j < nc; j++)
            seen |= cand[j] == pr->pb[0].sym[i];
        if (seen)
            continue;
        for (int p = 0; p < np; p++)
            cv[nc * NPROBE + p] = pr->pb[p].val[i];
        cand[nc++] = pr->pb[0].sym[i];
    }
    for (int q = 0; q < n->nout; q++) {
        out[q] = o[q];
        for (int p = 1; p < np; p++) {
            const mge_tdesc *x = &o[(size_t)p * 4 + (size_t)q];
            if (x->ndim != o[q].ndim || x->dtype != o[q].dtype)
                return mge_error_set(err, MGE_ERR_SHAPE, "output %d's rank depends on the values of the symbols", q);
        }
        for (int d = 0; d < o[q].ndim; d++) {
            int64_t y[NPROBE];
            for (int p = 0; p < np; p++)
                y[p] = o[(size_t)p * 4 + (size_t)q].dims[d];
            out[q].dims[d] = np == 1 ? y[0] : mge_dim_fit(np, y, nc, cand, cv);
            if (out[q].dims[d] == MGE_DIM_DYN && np > 1)
                out[q].dims[d] = refine_dim(g, pr, n, q, d, o);
        }
    }
    return MGE_OK;
}

/* The template of node n (not yet in g) into out[]; *pend gets the probe
 * descs of its outputs (NPROBE * 4), for mge_graph_probes_commit. */
mge_status mge_graph_infer_node(mge_graph *g, const mge_node *n, mge_tdesc *out, mge_tdesc **pend, mge_error *err)
{
    *pend = NULL;
    if (n->nin > 64 || n->nout > 4)
        return mge_error_set(err, MGE_ERR_INVALID, "too many inputs or outputs");
    probes *pr = probes_get(g);
    if (!pr)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    mge_status s = probe_bindings(g, pr, err);
    if (s)
        return s;
    mge_tdesc *in = pr->in;
    mge_tdesc *o = malloc(sizeof *o * 4 * NPROBE);
    if (!o)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    mge_error e1;
    s = infer_probes(g, pr, n, in, o, &e1);
    if (s && pr->nsym && pr->set + 1 < NSETS && s != MGE_ERR_NOMEM) {
        /* another probe set may suit the graph (sizes a reshape must divide) */
        pr->set++;
        pr->nsym = 0;
        mge_error e2;
        if (!probe_bindings(g, pr, &e2) && !probes_rebuild(g, pr, &e2) && !infer_probes(g, pr, n, in, o, &e2))
            s = MGE_OK;
    }
    if (s) {
        if (s == MGE_ERR_NOMEM || !pr->nsym)
            mge_error_set(err, s, "%s", e1.msg);
        else
            s = friendly_error(g, n, s, e1.msg, err);
    } else if (!(s = fit_outputs(g, pr, n, in, o, out, err))) {
        *pend = o;
        o = NULL;
    }
    free(o);
    return s;
}

mge_status mge_graph_probes_commit(mge_graph *g, const mge_node *n, mge_tdesc *pend)
{
    probes *pr = g->probes;
    mge_status s = MGE_OK;
    for (int q = 0; q < n->nout && pr && pend && !s; q++)
        s = pent_put(pr, n->out[q], &g->values[n->out[q]], &pend[q], 4);
    free(pend);
    return s;
}

static mge_status probes_rebuild(mge_graph *g, probes *pr, mge_error *err)
{
    pent_clear(pr);
    /* not pr->in: a caller may be holding descs there */
    mge_tdesc *in = malloc(sizeof *in * 64 * NPROBE), *o = malloc(sizeof *o * 4 * NPROBE);
    mge_status s = in && o ? MGE_OK : mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    int np = pr->nsym ? NPROBE : 1;
    for (int i = 0; i < g->nnodes && !s; i++) {
        const mge_node *n = &g->nodes[i];
        for (int p = 0; p < np && !s; p++) {
            for (int k = 0; k < n->nin && !s; k++)
                if (desc_at(g, pr, n->in[k], p, &in[(size_t)p * 64 + (size_t)k], err))
                    s = err ? err->code : MGE_ERR_SHAPE;
            if (!s && (s = infer_one(n, &in[(size_t)p * 64], &o[(size_t)p * 4], err)))
                mge_error_prefix(err, "%s", n->name);
        }
        for (int p = np; p < NPROBE && !s; p++)
            memcpy(&o[(size_t)p * 4], o, sizeof(mge_tdesc) * 4);
        for (int q = 0; q < n->nout && !s; q++)
            if (pent_put(pr, n->out[q], &g->values[n->out[q]], &o[q], 4))
                s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    }
    free(in);
    free(o);
    return s;
}

mge_status mge_graph_infer(mge_graph *g, mge_error *err)
{
    probes *pr = probes_get(g);
    if (!pr)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    pent_clear(pr);
    pr->nsym = 0;
    pr->set = 0;
    for (int i = 0; i < g->nnodes; i++) {
        mge_node *n = &g->nodes[i];
        mge_tdesc od[4], *pend;
        mge_status s = mge_graph_infer_node(g, n, od, &pend, err);
        if (s) {
            mge_error_prefix(err, "%s", n->name);
            return s;
        }
        for (int o = 0; o < n->nout; o++) {
            mge_value *v = &g->values[n->out[o]];
            v->dtype = od[o].dtype;
            v->ndim = od[o].ndim;
            memcpy(v->dims, od[o].dims, sizeof v->dims);
        }
        if (mge_graph_probes_commit(g, n, pend))
            return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    }
    return MGE_OK;
}

mge_status mge_graph_probe_desc(mge_graph *g, int v, int p, mge_tdesc *d, mge_error *err)
{
    probes *pr = probes_get(g);
    if (!pr)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    mge_status s = probe_bindings(g, pr, err);
    if (s)
        return s;
    int r = desc_at(g, pr, v, p, d, err);
    if (r > 0) {
        if ((s = probes_rebuild(g, pr, err)))
            return s;
        r = desc_at(g, pr, v, p, d, err);
    }
    return r ? (err ? err->code : MGE_ERR_SHAPE) : MGE_OK;
}

int mge_graph_probes_agree(mge_graph *g, int a, int b)
{
    for (int p = 0; p < NPROBE; p++) {
        mge_tdesc da, db;
        if (mge_graph_probe_desc(g, a, p, &da, NULL) || mge_graph_probe_desc(g, b, p, &db, NULL) ||
            da.ndim != db.ndim)
            return 0;
        for (int d = 0; d < da.ndim; d++)
            if (da.dims[d] != db.dims[d])
                return 0;
    }
    return 1;
}

mge_status mge_graph_friendly_desc(mge_graph *g, int v, mge_tdesc *d, mge_error *err)
{
    mge_binding b;
    friendly_binding(g, &b);
    size_t nv = (size_t)(g->nvalues ? g->nvalues : 1);
    cshapes c = {malloc(sizeof(int) * nv), malloc(sizeof(int64_t) * MGE_MAX_DIMS * nv), NULL, NULL, 0, 0};
    mge_status s = c.ndims && c.dims ? concrete(g, &b, g->nnodes, &c, err) : MGE_ERR_NOMEM;
    if (!s)
        cs_desc(g, &c, v, d);
    free(c.ndims);
    free(c.dims);
    free(c.vidx);
    free(c.vals);
    return s;
}

/* The binding passes choose sizes at: opt.shape over N = 1 and 224, 256, ... */
static void pass_binding(const mge_graph *g, mge_binding *b);

int64_t mge_pass_value_dim(const mge_graph *g, int v, int k)
{
    const mge_value *val = &g->values[v];
    if (k < 0 || k >= val->ndim)
        return -1;
    if (val->dims[k] != MGE_DIM_DYN)
        return mge_pass_dim(g, val->dims[k]);
    /* a plan-time dim: infer the whole graph once at the binding (passes
     * build new graphs, so the shapes of this one never change) */
    probes *pr = probes_get((mge_graph *)g);
    if (!pr)
        return -1;
    if (pr->hint_nv != g->nvalues || pr->hint_nn != g->nnodes) {
        free(pr->hint_nd);
        free(pr->hint_dims);
        pr->hint_nd = malloc(sizeof(int) * (size_t)(g->nvalues + 1));
        pr->hint_dims = malloc(sizeof(int64_t) * MGE_MAX_DIMS * (size_t)(g->nvalues + 1));
        pr->hint_nv = g->nvalues;
        pr->hint_nn = g->nnodes;
        mge_binding b;
        pass_binding(g, &b);
        pr->hint_failed = !pr->hint_nd || !pr->hint_dims || mge_graph_shapes(g, &b, pr->hint_nd, pr->hint_dims, NULL);
    }
    if (pr->hint_failed || k >= pr->hint_nd[v])
        return -1;
    return pr->hint_dims[(size_t)v * MGE_MAX_DIMS + (size_t)k];
}

int64_t mge_pass_dim(const mge_graph *g, int64_t code)
{
    if (code >= 0 || code == MGE_DIM_DYN)
        return code >= 0 ? code : -1;
    mge_binding b;
    pass_binding(g, &b);
    int64_t v;
    return mge_dim_eval(code, &b, &v, NULL) == MGE_OK ? v : -1;
}

static void pass_binding(const mge_graph *g, mge_binding *b)
{
    friendly_binding(g, b);
    const char *hint = mge_graph_get_meta(g, "opt.shape");
    while (hint && *hint) { /* "N=1,H=224": mge-opt --shape */
        const char *eq = strchr(hint, '='), *end = strchr(hint, ',');
        if (!eq || (end && end < eq))
            break;
        int64_t sym;
        if (mge_dim_symbol(hint, (size_t)(eq - hint), &sym, NULL) == MGE_OK)
            mge_binding_set(b, sym, strtoll(eq + 1, NULL, 10), NULL);
        hint = end ? end + 1 : NULL;
    }
}

void mge_graph_probe_binding(const mge_graph *g, mge_binding *b)
{
    friendly_binding(g, b);
}
