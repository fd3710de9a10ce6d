/* unit_graph.h — graph helpers shared by the unit tests: building graphs
 * node by node (node, un, bin, layer: the new node's output value, or -1
 * after printing why, so the test's later CHECKs fail), from text, running
 * them through the executor and comparing outputs (ug_*), and one kernel
 * of the cpu backend against the ref one (ug_kcase, ug_run_kernel,
 * ug_compare). */
#ifndef MGE_UNIT_GRAPH_H
#define MGE_UNIT_GRAPH_H
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "ref/ref.h"
#include "unit.h"
#include "unit_attr.h"

static mge_error ug_err;

/* A node with one output named `name`. */
static inline int node(mge_graph *g, const char *name, int op, int nin, const int *in, int nattr,
                       const mge_attr *at)
{
    const char *outs[1] = {name};
    int n = mge_graph_add_node(g, name, op, nin, in, nattr, at, 1, outs, &ug_err);
    if (n < 0) {
        fprintf(stderr, "add %s: %s\n", name, ug_err.msg);
        return -1;
    }
    return g->nodes[n].out[0];
}

static inline int un(mge_graph *g, const char *name, int op, int x)
{
    return node(g, name, op, 1, &x, 0, NULL);
}

static inline int bin(mge_graph *g, const char *name, int op, int a, int b)
{
    int in[2] = {a, b};
    return node(g, name, op, 2, in, 0, NULL);
}

/* A layer op (conv2d, linear, batchnorm, layernorm) with its parameters created. */
static inline int layer(mge_graph *g, const char *name, int op, int x, int nattr, const mge_attr *at)
{
    int in[8] = {x}, np = 0;
    if (mge_graph_layer_params(g, name, op, x, nattr, at, in + 1, &np, &ug_err)) {
        fprintf(stderr, "params %s: %s\n", name, ug_err.msg);
        return -1;
    }
    return node(g, name, op, 1 + np, in, nattr, at);
}
/* ---------------------------------------------------------------- graphs from text, run through the executor */

/* f32 t uniform in [lo, hi) from r. */
static inline void ug_uniform(mge_tensor *t, mge_rng *r, float lo, float hi)
{
    float *p = t->data;
    for (int64_t i = 0; i < mge_tensor_numel(t); i++)
        p[i] = lo + (hi - lo) * mge_rng_uniform(r);
}

static inline mge_graph *ug_parse(const char *src)
{
    mge_graph *g = NULL;
    mge_error err;
    mge_error_clear(&err);
    CHECK_OK(mge_text_parse(src, strlen(src), ".", &g, &err), err);
    return g;
}

static inline int ug_count_op(const mge_graph *g, int op)
{
    int c = 0;
    for (int i = 0; i < g->nnodes; i++)
        c += g->nodes[i].op == op;
    return c;
}

/* The node that produces value `name`, or NULL. */
static inline const mge_node *ug_producer(const mge_graph *g, const char *name)
{
    int v = mge_graph_find(g, name);
    if (v < 0 || g->values[v].kind != MGE_VAL_NODE || g->values[v].producer < 0)
        return NULL;
    return &g->nodes[g->values[v].producer];
}

static inline uint64_t ug_fnv(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

typedef struct ug_outs {
    int n;
    mge_tensor t[4];
} ug_outs;

static inline void ug_outs_free(ug_outs *o)
{
    for (int i = 0; i < o->n; i++)
        mge_tensor_free(&o->t[i]);
    o->n = 0;
}

/* How ug_run draws the inputs: f32 normal * sd when sd > 0, else uniform
 * in [lo, hi); i32 in [-5, 5]. seed 0 seeds each input from its name, so
 * two graphs with the same input names see the same data. */
typedef struct ug_fill {
    float sd, lo, hi;
    uint64_t seed;
} ug_fill;

/* Runs g on backend (NULL: the default) with `threads` at batch; the first
 * 4 outputs go to res. Returns whether the run succeeded. */
static inline int ug_run(const mge_graph *g, const char *backend, int threads, int64_t batch, ug_fill f, ug_outs *res)
{
    mge_error err;
    mge_error_clear(&err);
    mge_exec *e = NULL;
    mge_exec_opts o = {0};
    o.threads = threads;
    o.backend = backend;
    res->n = 0;
    CHECK_OK(mge_exec_create(g, &o, &e, &err), err);
    if (!e)
        return 0;
    int nin = mge_exec_ninputs(e);
    mge_tensor in[8];
    const mge_tensor *ins[8];
    CHECK(nin <= 8);
    for (int i = 0; i < nin && i < 8; i++) {
        const mge_value *v = &g->values[mge_exec_input(e, i)];
        int64_t dims[MGE_MAX_DIMS];
        for (int d = 0; d < v->ndim; d++)
            dims[d] = v->dims[d] == MGE_DIM_N ? batch : v->dims[d];
        CHECK_OK(mge_tensor_alloc(&in[i], v->dtype, v->ndim, dims, &err), err);
        mge_rng r;
        mge_rng_seed(&r, f.seed ? f.seed : ug_fnv(v->name));
        for (int64_t k = 0; k < mge_tensor_numel(&in[i]); k++) {
            if (v->dtype == MGE_F32)
                ((float *)in[i].data)[k] = f.sd > 0 ? f.sd * mge_rng_normal(&r) : f.lo + (f.hi - f.lo) * mge_rng_uniform(&r);
            else if (v->dtype == MGE_I32)
                ((int32_t *)in[i].data)[k] = (int32_t)(mge_rng_next(&r) % 11) - 5;
        }
        ins[i] = &in[i];
    }
    CHECK_OK(mge_exec_run(e, ins, &err), err);
    int ok = err.code == MGE_OK;
    for (int i = 0; ok && i < mge_exec_noutputs(e) && i < 4; i++) {
        CHECK_OK(mge_tensor_copy(&res->t[i], mge_exec_result(e, i), &err), err);
        res->n++;
    }
    for (int i = 0; i < nin && i < 8; i++)
        mge_tensor_free(&in[i]);
    mge_exec_free(e);
    return ok;
}

/* f32 outputs agree within rel of the largest reference magnitude (rel 0
 * and other dtypes: bit for bit); returns the largest f32 difference. */
static inline double ug_check_close(const ug_outs *a, const ug_outs *b, double rel)
{
    double worst = 0;
    CHECK(a->n == b->n && a->n > 0);
    for (int i = 0; i < a->n && i < b->n; i++) {
        CHECK(mge_tensor_same_shape(&a->t[i], &b->t[i]) && a->t[i].dtype == b->t[i].dtype);
        if (!mge_tensor_same_shape(&a->t[i], &b->t[i]) || a->t[i].dtype != b->t[i].dtype)
            continue;
        if (rel == 0 || a->t[i].dtype != MGE_F32) {
            CHECK_MSG(memcmp(a->t[i].data, b->t[i].data, a->t[i].nbytes) == 0, "output %d differs", i);
            continue;
        }
        const float *x = a->t[i].data, *y = b->t[i].data;
        double maxref = 0, maxdiff = 0;
        for (int64_t k = 0; k < mge_tensor_numel(&a->t[i]); k++) {
            maxref = fmax(maxref, fabs(x[k]));
            maxdiff = fmax(maxdiff, fabs((double)x[k] - y[k]));
        }
        CHECK(maxref > 0);
        CHECK_MSG(maxdiff <= rel * maxref, "output %d: max diff %g, max |ref| %g", i, maxdiff, maxref);
        worst = fmax(worst, maxdiff);
    }
    return worst;
}

static inline void ug_file_bytes(const mge_graph *g, mge_buf *b)
{
    mge_error err;
    mge_error_clear(&err);
    mge_write_opts o = {0};
    memset(b, 0, sizeof *b);
    CHECK_OK(mge_file_write(g, &o, b, &err), err);
}

/* `pass` changes nothing in g (src is its text, for the message): *changed
 * = 0, the same graph object, the same file bytes. Frees g. */
static inline void ug_check_noop(mge_graph *g, const char *pass, const char *src)
{
    mge_buf a, b;
    ug_file_bytes(g, &a);
    mge_graph *before = g;
    mge_error err;
    mge_error_clear(&err);
    int changed = -1;
    CHECK_OK(mge_passes_run_list(&g, pass, &changed, &err), err);
    CHECK_MSG(changed == 0, "%s changed:\n%s", pass, src);
    CHECK(g == before);
    ug_file_bytes(g, &b);
    CHECK(a.n > 0 && a.n == b.n && memcmp(a.p, b.p, a.n) == 0);
    mge_buf_free(&a);
    mge_buf_free(&b);
    mge_graph_free(g);
}

/* ---------------------------------------------------------------- one kernel, cpu against ref */

/* One node "node" with output "y" in a graph of its own, with tensors for
 * its inputs and its output. */
typedef struct ug_kcase {
    mge_graph *g;
    int node, nin;
    mge_tensor in[9], out;
} ug_kcase;

/* Adds the node on values ids of t->g and allocates t->out; 0 (and t->g
 * freed) when the graph refuses the node. */
static inline int ug_kcase_node(ug_kcase *t, int op, int nin, const int *ids, int nattr, const mge_attr *at)
{
    mge_error err;
    mge_error_clear(&err);
    const char *outn[1] = {"y"};
    t->node = mge_graph_add_node(t->g, "node", op, nin, ids, nattr, at, 1, outn, &err);
    CHECK_MSG(t->node >= 0, "%s", err.msg);
    if (t->node < 0) {
        mge_graph_free(t->g);
        t->g = NULL;
        return 0;
    }
    t->nin = nin;
    const mge_value *y = &t->g->values[t->g->nodes[t->node].out[0]];
    CHECK_OK(mge_tensor_alloc(&t->out, y->dtype, y->ndim, y->dims, &err), err);
    return 1;
}

static inline void ug_kcase_free(ug_kcase *t)
{
    for (int i = 0; i < t->nin; i++)
        mge_tensor_free(&t->in[i]);
    mge_tensor_free(&t->out);
    mge_graph_free(t->g);
}

/* Runs kernel k of node n into y with the given pool (NULL: serial). */
static inline mge_status ug_run_kernel(const mge_kernel *k, mge_pool *pool, const mge_node *n, mge_tensor **in,
                                       mge_tensor *y, mge_error *err)
{
    mge_tensor *ys[1] = {y};
    int threads = mge_pool_size(pool);
    size_t ws = k->ws ? k->ws(n, in, ys, threads) : 0;
    void *wsp = ws ? mge_aligned_alloc(ws) : NULL;
    /* the op's name as the executor passes it */
    mge_kctx ctx = {.pool = pool, .threads = threads, .ws = wsp, .ws_size = ws, .opname = mge_op_info(n->op)->name};
    mge_blas_set_threads(1);   /* as the executor does */
    mge_status s = k->run(&ctx, n, in, ys, err);
    mge_aligned_free(wsp);
    return s;
}

/* A one-node graph (node "node", output "y") over values in0.. of the
 * given shapes (in0 an input, the rest params); NULL when the node is
 * refused (err says why). */
static inline mge_graph *ug_one_node(int op, int nin, const int *nd, int64_t (*dims)[MGE_MAX_DIMS], int nattr,
                                     const mge_attr *at, mge_error *err)
{
    mge_graph *g = mge_graph_new();
    int ids[8];
    for (int i = 0; i < nin && i < 8; i++) {
        char name[16];
        snprintf(name, sizeof name, "in%d", i);
        ids[i] = mge_graph_add_value(g, name, i ? MGE_VAL_PARAM : MGE_VAL_INPUT, MGE_F32, nd[i], dims[i], err);
    }
    const char *outn[1] = {"y"};
    if (mge_graph_add_node(g, "node", op, nin, ids, nattr, at, 1, outn, err) < 0) {
        mge_graph_free(g);
        return NULL;
    }
    return g;
}

/* Node 0 of g (an f32 op) on backend be into y, allocated here with the
 * node's output shape; pool NULL: serial. */
static inline mge_status ug_run_node(const mge_backend *be, mge_pool *pool, const mge_graph *g, mge_tensor **in,
                                     mge_tensor *y, mge_error *err)
{
    const mge_node *n = &g->nodes[0];
    const mge_value *yv = &g->values[n->out[0]];
    mge_status s = mge_tensor_alloc(y, MGE_F32, yv->ndim, yv->dims, err);
    if (s)
        return s;
    const mge_kernel *k = mge_backend_kernel(be, n->op, MGE_F32);
    if (!k)
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "no kernel");
    return ug_run_kernel(k, pool, n, in, y, err);
}

/* The fused-conv oracle's epilogue on a reference conv output y, in
 * double: y = act(y + r), r (laid out like y) when res, act -1 for none. */
static inline void ug_ref_epilogue(mge_tensor *y, const mge_tensor *r, int res, int act, double alpha)
{
    float *p = y->data;
    const float *rp = r ? r->data : NULL;
    if (!p)
        return;
    for (int64_t i = 0; i < mge_tensor_numel(y); i++) {
        double v = p[i] + (res && rp ? rp[i] : 0.0);
        p[i] = (float)(act == -1 ? v : mge_ref_unary(act, v, alpha));
    }
}

/* got within rtol of want's element plus a small part of its largest
 * finite magnitude plus floor; NaN matches NaN and inf the same inf. */
static inline int ug_compare_floor(const char *what, const mge_tensor *got, const mge_tensor *want, double rtol,
                                   double floor)
{
    const float *a = got->data, *b = want->data;
    int64_t n = mge_tensor_numel(want);
    double maxabs = 0;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(b[i]) && fabs(b[i]) > maxabs)
            maxabs = fabs(b[i]);
    for (int64_t i = 0; i < n; i++) {
        if (isnan(b[i]) && isnan(a[i]))
            continue;
        if (isinf(b[i]) && a[i] == b[i])
            continue;
        double tol = rtol * fabs(b[i]) + rtol * 0.1 * maxabs + floor;
        if (!(fabs((double)a[i] - b[i]) <= tol)) {
            fprintf(stderr, "%s: element %lld of %lld: cpu %.9g, ref %.9g\n", what, (long long)i, (long long)n,
                    a[i], b[i]);
            return 0;
        }
    }
    return 1;
}

static inline int ug_compare(const char *what, const mge_tensor *got, const mge_tensor *want, double rtol)
{
    return ug_compare_floor(what, got, want, rtol, 1e-6);
}
#endif
