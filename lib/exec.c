/* exec.c — the executor: runs the nodes a set of outputs needs, in graph
 * order, on one backend, with node outputs in one planned arena.
 *
 * Per run: check the inputs against their templates (and find the batch),
 * fetch or build the plan for that batch, bind every value to memory
 * (inputs, params, state and consts to their own data; node outputs to the
 * arena; views to their root) and call each kernel. Plans are cached per
 * batch (the last few); the arena only grows. Outputs that live outside the
 * arena and come from a caller's input are copied, so every result stays
 * valid until the next run whatever the caller does with its inputs.
 *
 * With opts.preprocess, the nodes that read only params, state, consts and
 * each other (f16-weights' casts, any weight transform left in a model) run
 * once, on the first run, with their own plan and a persistent arena; the
 * per-run plan leaves them out and binds their results as if they were
 * params. A deployed model pays for them at load, not per inference. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define PLAN_CACHE 4

struct mge_exec {
    const mge_graph *g;
    const mge_backend *be;
    mge_pool *pool;
    int threads;
    int training;
    mge_rng rng;
    int nout, *outs;
    int nin, *ins;             /* needed graph inputs, value indices */
    char *need;                /* per node */
    char *vneed;               /* per value: read or written by a needed node, or requested */
    char *qowned;              /* per value: t[v].q.scale was set by a kernel and is ours to free */
    mge_tensor *t;             /* per value: bound tensor (borrowed data) */
    mge_tensor *copies;        /* per output: owned copy when the result lives outside the arena */
    const mge_tensor **res;    /* per output */
    mge_plan plans[PLAN_CACHE];
    int nplans;                /* filled entries; plans[0] is the most recent */
    void *arena;
    size_t arena_cap;
    void *ws;
    size_t ws_cap;
    int64_t last_batch;        /* -1 before the first run */
    char *run;                 /* per node: needed and not preprocessed (what each run executes) */
    char *pre;                 /* per node: preprocessed once, or NULL when nothing is */
    int pre_done;
    mge_tensor *pret;          /* per value: a preprocessed result, bound like a param */
    void *pre_arena;
    char *preq;                /* per value: pret[v].q.scale is ours to free */
    mge_exec_hook hook;
    void *hook_ud;
};

/* ---------------------------------------------------------------- life cycle */

void mge_exec_free(mge_exec *e)
{
    if (!e)
        return;
    if (e->t && e->qowned)
        for (int v = 0; v < e->g->nvalues; v++)
            if (e->qowned[v])
                free(e->t[v].q.scale);
    if (e->copies)
        for (int i = 0; i < e->nout; i++)
            mge_tensor_free(&e->copies[i]);
    for (int i = 0; i < e->nplans; i++)
        mge_plan_free(&e->plans[i]);
    mge_pool_free(e->pool);
    mge_aligned_free(e->arena);
    mge_aligned_free(e->ws);
    mge_aligned_free(e->pre_arena);
    if (e->run != e->need)
        free(e->run);
    if (e->pret && e->preq)
        for (int v = 0; v < e->g->nvalues; v++)
            if (e->preq[v])
                free(e->pret[v].q.scale);
    free(e->pre);
    free(e->pret);
    free(e->preq);
    free(e->outs);
    free(e->ins);
    free(e->need);
    free(e->vneed);
    free(e->qowned);
    free(e->t);
    free(e->copies);
    free(e->res);
    free(e);
}

static uint64_t seed_of(const mge_graph *g)
{
    const char *s = mge_graph_get_meta(g, "seed");
    if (!s)
        return 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 0);
    return end != s ? (uint64_t)v : 0;
}

/* The needed nodes whose inputs are all params, state or consts with data,
 * or results of such nodes: e->pre, and e->run without them. Nothing to
 * preprocess leaves e->pre NULL and e->run == e->need. */
static mge_status mark_preprocess(mge_exec *e, mge_error *err)
{
    const mge_graph *g = e->g;
    size_t nv = (size_t)(g->nvalues ? g->nvalues : 1), nn = (size_t)(g->nnodes ? g->nnodes : 1);
    char *cst = calloc(nv, 1);
    char *pre = calloc(nn, 1);
    int any = 0;
    if (!cst || !pre) {
        free(cst);
        free(pre);
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    }
    for (int v = 0; v < g->nvalues; v++) {
        const mge_value *val = &g->values[v];
        cst[v] = val->kind != MGE_VAL_INPUT && val->kind != MGE_VAL_NODE && val->data;
    }
    for (int i = 0; i < g->nnodes; i++) {
        const mge_node *n = &g->nodes[i];
        int c = e->need[i] && n->nin > 0;
        for (int k = 0; c && k < n->nin; k++)
            c = cst[n->in[k]];
        if (!c)
            continue;
        pre[i] = 1;
        any = 1;
        for (int k = 0; k < n->nout; k++)
            cst[n->out[k]] = 1;
    }
    free(cst);
    if (!any) {
        free(pre);
        return MGE_OK;
    }
    e->pre = pre;
    e->run = malloc(nn);
    e->pret = calloc(nv, sizeof *e->pret);
    e->preq = calloc(nv, 1);
    if (!e->run || !e->pret || !e->preq) {
        if (!e->run)
            e->run = e->need;
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < nn; i++)
        e->run[i] = e->need[i] && !pre[i];
    return MGE_OK;
}

mge_status mge_exec_create(const mge_graph *g, const mge_exec_opts *o, mge_exec **out, mge_error *err)
{
    static const mge_exec_opts defaults;
    mge_status s;
    *out = NULL;
    if (!o)
        o = &defaults;
    if (!g)
        return mge_error_set(err, MGE_ERR_INVALID, "no graph");
    if ((s = mge_graph_validate(g, err)))
        return s;
    const char *bname = o->backend ? o->backend : "cpu";
    const mge_backend *be = mge_backend_get(bname);
    if (!be)
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "unknown backend '%s' (known: cpu, ref)", bname);
    if (o->threads < 0 || o->threads > 1024)
        return mge_error_set(err, MGE_ERR_INVALID, "threads=%d: expected 1 to 1024 (0 means 1)", o->threads);
    int nout = o->noutputs > 0 ? o->noutputs : g->noutputs;
    const int *outs = o->noutputs > 0 ? o->outputs : g->outputs;
    if (nout <= 0 || !outs)
        return mge_error_set(err, MGE_ERR_INVALID, "nothing to compute: the graph has no outputs");
    for (int i = 0; i < nout; i++)
        if (outs[i] < 0 || outs[i] >= g->nvalues)
            return mge_error_set(err, MGE_ERR_INVALID, "requested output %d refers to no value", i);

    mge_exec *e = calloc(1, sizeof *e);
    if (!e)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    e->g = g;
    e->be = be;
    e->threads = o->threads > 0 ? o->threads : 1;
    e->training = o->training != 0;
    e->last_batch = -1;
    mge_rng_seed(&e->rng, seed_of(g));
    size_t nv = (size_t)(g->nvalues ? g->nvalues : 1), nn = (size_t)(g->nnodes ? g->nnodes : 1);
    size_t ni = (size_t)(g->ninputs ? g->ninputs : 1);
    char *in_need = calloc(ni, 1);
    e->nout = nout;
    e->outs = malloc(sizeof(int) * (size_t)nout);
    e->ins = malloc(sizeof(int) * ni);
    e->need = calloc(nn, 1);
    e->vneed = calloc(nv, 1);
    e->qowned = calloc(nv, 1);
    e->t = calloc(nv, sizeof *e->t);
    e->copies = calloc((size_t)nout, sizeof *e->copies);
    e->res = calloc((size_t)nout, sizeof *e->res);
    if (!in_need || !e->outs || !e->ins || !e->need || !e->vneed || !e->qowned || !e->t || !e->copies || !e->res) {
        free(in_need);
        mge_exec_free(e);
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    }
    memcpy(e->outs, outs, sizeof(int) * (size_t)nout);
    mge_graph_needed(g, nout, outs, e->need, in_need);
    /* A requested output that is itself an input needs that input too. */
    for (int i = 0; i < g->ninputs; i++)
        for (int k = 0; k < nout; k++)
            if (outs[k] == g->inputs[i])
                in_need[i] = 1;
    for (int i = 0; i < g->ninputs; i++)
        if (in_need[i])
            e->ins[e->nin++] = g->inputs[i];
    free(in_need);
    for (int i = 0; i < g->nnodes; i++) {
        if (!e->need[i])
            continue;
        const mge_node *n = &g->nodes[i];
        for (int k = 0; k < n->nin; k++)
            e->vneed[n->in[k]] = 1;
        for (int k = 0; k < n->nout; k++)
            e->vneed[n->out[k]] = 1;
    }
    for (int k = 0; k < nout; k++)
        e->vneed[outs[k]] = 1;
    e->run = e->need;
    if (o->preprocess && !e->training && (s = mark_preprocess(e, err))) {
        mge_exec_free(e);
        return s;
    }
    if (e->threads > 1 && !(e->pool = mge_pool_create(e->threads))) {
        mge_exec_free(e);
        return mge_error_set(err, MGE_ERR_NOMEM, "cannot create a pool of %d threads", o->threads);
    }
    *out = e;
    return MGE_OK;
}

int mge_exec_ninputs(const mge_exec *e)
{
    return e->nin;
}

int mge_exec_input(const mge_exec *e, int i)
{
    return i >= 0 && i < e->nin ? e->ins[i] : -1;
}

int mge_exec_noutputs(const mge_exec *e)
{
    return e->nout;
}

int mge_exec_output(const mge_exec *e, int i)
{
    return i >= 0 && i < e->nout ? e->outs[i] : -1;
}

void mge_exec_set_hook(mge_exec *e, mge_exec_hook fn, void *ud)
{
    e->hook = fn;
    e->hook_ud = ud;
}

void mge_exec_set_task_hook(mge_exec *e, mge_exec_task_hook fn, void *ud)
{
    mge_pool_set_hook(e->pool, fn, ud);
}

void mge_exec_set_seed(mge_exec *e, uint64_t seed)
{
    mge_rng_seed(&e->rng, seed);
}

const mge_tensor *mge_exec_result(const mge_exec *e, int i)
{
    if (!e || i < 0 || i >= e->nout)
        return NULL;
    return e->res[i];
}

/* ---------------------------------------------------------------- plans */

/* *buf holds at least need bytes (allocated even for 0, so it is never
 * NULL after a success); what it held is dropped. */
static mge_status grow(void **buf, size_t *cap, size_t need, const char *what, mge_error *err)
{
    if (*buf && need <= *cap)
        return MGE_OK;
    mge_aligned_free(*buf);
    *cap = 0;
    if (!(*buf = mge_aligned_alloc(need ? need : 64)))
        return mge_error_set(err, MGE_ERR_NOMEM, "cannot allocate %zu bytes of %s", need, what);
    *cap = need;
    return MGE_OK;
}

/* Node output v laid out by plan p: shape from the plan, data at its
 * offset in arena (views outside the arena get theirs when their node
 * runs). */
static void plan_tensor(mge_tensor *t, const mge_graph *g, const mge_plan *p, int v, void *arena)
{
    memset(t, 0, sizeof *t);
    t->q.axis = -1;
    t->dtype = g->values[v].dtype;
    t->ndim = p->ndims[v];
    memcpy(t->dims, &p->dims[(size_t)v * MGE_MAX_DIMS], sizeof t->dims);
    t->nbytes = p->nbytes[v];
    if (p->offset[v] >= 0)
        t->data = (char *)arena + p->offset[v];
}

/* The plan for batch, from the cache or built (then cached as most recent). */
static mge_status get_plan(mge_exec *e, int64_t batch, mge_plan **pp, mge_error *err)
{
    for (int i = 0; i < e->nplans; i++)
        if (e->plans[i].batch == batch) {
            mge_plan hit = e->plans[i];
            memmove(&e->plans[1], &e->plans[0], sizeof(mge_plan) * (size_t)i);
            e->plans[0] = hit;
            *pp = &e->plans[0];
            return MGE_OK;
        }
    mge_plan p;
    mge_status s = mge_plan_build(e->g, e->run, batch, e->nout, e->outs, e->be, e->threads, &p, err);
    if (s)
        return s;
    if (e->nplans == PLAN_CACHE)
        mge_plan_free(&e->plans[--e->nplans]);
    memmove(&e->plans[1], &e->plans[0], sizeof(mge_plan) * (size_t)e->nplans);
    e->plans[0] = p;
    e->nplans++;
    *pp = &e->plans[0];
    return MGE_OK;
}

/* The plan for batch, or for the last run's batch (1 before any) when batch <= 0. */
static mge_status plan_for(mge_exec *e, int64_t batch, mge_plan **pp, mge_error *err)
{
    if (batch <= 0)
        batch = e->last_batch >= 0 ? e->last_batch : 1;
    return get_plan(e, batch, pp, err);
}

mge_status mge_exec_stats(mge_exec *e, int64_t batch, mge_plan_stats *st, mge_error *err)
{
    mge_plan *p;
    mge_status s = plan_for(e, batch, &p, err);
    if (s)
        return s;
    *st = p->st;
    return MGE_OK;
}

mge_status mge_exec_live_bytes(mge_exec *e, int64_t batch, size_t *live, mge_error *err)
{
    mge_plan *p;
    mge_status s = plan_for(e, batch, &p, err);
    if (s)
        return s;
    return mge_plan_live(e->g, e->run, e->nout, e->outs, p, live, err);
}

/* ---------------------------------------------------------------- running */

/* Checks inputs against their templates; the batch is what N stands for
 * (1 when no needed input has N). */
static mge_status check_inputs(const mge_exec *e, const mge_tensor *const *inputs, int64_t *batch, mge_error *err)
{
    const mge_graph *g = e->g;
    int64_t b = -1;
    int bfrom = -1;
    if (e->nin > 0 && !inputs)
        return mge_error_set(err, MGE_ERR_INVALID, "%d input%s expected, none given", e->nin, e->nin == 1 ? "" : "s");
    for (int i = 0; i < e->nin; i++) {
        const mge_value *v = &g->values[e->ins[i]];
        const mge_tensor *t = inputs[i];
        char want[160], got[160];
        if (!t)
            return mge_error_set(err, MGE_ERR_INVALID, "input '%s': missing", v->name);
        if (t->ndim < 0 || t->ndim > MGE_MAX_DIMS || (unsigned)t->dtype >= MGE_NDTYPES)
            return mge_error_set(err, MGE_ERR_SHAPE, "input '%s': expected %s, got a tensor of rank %d, dtype %d",
                                 v->name, mge_shape_str(v->dtype, v->ndim, v->dims, want, sizeof want), t->ndim,
                                 (int)t->dtype);
        int ok = t->dtype == v->dtype && t->ndim == v->ndim;
        for (int k = 0; ok && k < v->ndim; k++)
            ok = v->dims[k] == MGE_DIM_N ? t->dims[k] >= 0 : t->dims[k] == v->dims[k];
        if (!ok)
            return mge_error_set(err, MGE_ERR_SHAPE, "input '%s': expected %s, got %s", v->name,
                                 mge_shape_str(v->dtype, v->ndim, v->dims, want, sizeof want),
                                 mge_shape_str(t->dtype, t->ndim, t->dims, got, sizeof got));
        for (int k = 0; k < v->ndim; k++) {
            if (v->dims[k] != MGE_DIM_N)
                continue;
            if (b < 0) {
                b = t->dims[k];
                bfrom = i;
            } else if (t->dims[k] != b) {
                if (bfrom == i)
                    return mge_error_set(err, MGE_ERR_SHAPE,
                                         "input '%s': expected %s with one batch size N, got %s", v->name,
                                         mge_shape_str(v->dtype, v->ndim, v->dims, want, sizeof want),
                                         mge_shape_str(t->dtype, t->ndim, t->dims, got, sizeof got));
                return mge_error_set(err, MGE_ERR_SHAPE,
                                     "input '%s': batch %lld does not match batch %lld of input '%s' (got %s)",
                                     v->name, (long long)t->dims[k], (long long)b, g->values[e->ins[bfrom]].name,
                                     mge_shape_str(t->dtype, t->ndim, t->dims, got, sizeof got));
            }
        }
        size_t nbytes;
        mge_status s = mge_shape_numel(t->ndim, t->dims, t->dtype, NULL, &nbytes, err);
        if (s) {
            mge_error_prefix(err, "input '%s'", v->name);
            return s;
        }
        if (nbytes && (!t->data || t->nbytes < nbytes))
            return mge_error_set(err, MGE_ERR_INVALID, "input '%s': %s holds %zu bytes of data, needs %zu", v->name,
                                 mge_shape_str(t->dtype, t->ndim, t->dims, got, sizeof got),
                                 t->data ? t->nbytes : (size_t)0, nbytes);
    }
    *batch = b >= 0 ? b : 1;
    return MGE_OK;
}

/* A borrowed view of src: same data, quant scales not ours. */
static void borrow(mge_tensor *dst, const mge_tensor *src)
{
    *dst = *src;
    dst->flags &= ~(unsigned)MGE_TENSOR_OWNED;
}

/* Binds every needed value to its memory for plan p. */
static mge_status bind(mge_exec *e, const mge_plan *p, const mge_tensor *const *inputs, mge_error *err)
{
    const mge_graph *g = e->g;
    for (int v = 0; v < g->nvalues; v++) {
        if (e->qowned[v]) {
            free(e->t[v].q.scale);
            e->qowned[v] = 0;
        }
        if (!e->vneed[v])
            continue;
        const mge_value *val = &g->values[v];
        mge_tensor *t = &e->t[v];
        if (val->kind == MGE_VAL_INPUT)
            continue; /* below */
        if (e->pre_done && val->kind == MGE_VAL_NODE && e->pre[val->producer]) {
            borrow(t, &e->pret[v]);
            continue;
        }
        if (val->kind != MGE_VAL_NODE) {
            const mge_tensor *d = val->data;
            if (!d || (!d->data && d->nbytes))
                return mge_error_set(err, MGE_ERR_INVALID, "%s '%s' has no data (load weights or initialize it)",
                                     val->kind == MGE_VAL_PARAM ? "param" : val->kind == MGE_VAL_STATE ? "state"
                                                                                                       : "const",
                                     val->name);
            borrow(t, d);
            continue;
        }
        plan_tensor(t, g, p, v, e->arena);
    }
    for (int i = 0; i < e->nin; i++)
        borrow(&e->t[e->ins[i]], inputs[i]);
    return MGE_OK;
}

static mge_status run_node(mge_exec *e, const mge_plan *p, int i, mge_error *err)
{
    const mge_node *n = &e->g->nodes[i];
    const mge_opinfo *oi = mge_op_info(n->op);
    mge_tensor *in[64], *out[4];
    if (n->nin > 64 || n->nout > 4)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: too many inputs or outputs", n->name);
    for (int k = 0; k < n->nin; k++)
        in[k] = &e->t[n->in[k]];
    for (int k = 0; k < n->nout; k++)
        out[k] = &e->t[n->out[k]];
    if (oi->flags & MGE_OPF_ALIAS) {
        /* a view: the input's bytes under the output's shape */
        mge_tensor *o = out[0];
        o->data = in[0]->data;
        o->layout = in[0]->layout;
        o->q = in[0]->q;
        if (o->nbytes > in[0]->nbytes)
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: view of %zu bytes over %zu", n->name, o->nbytes,
                                 in[0]->nbytes);
        return MGE_OK;
    }
    mge_dtype dt = n->nin > 0 ? in[0]->dtype : MGE_F32;
    const mge_kernel *k = mge_backend_kernel(e->be, n->op, dt);
    if (!k || !k->run)
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: no %s kernel for %s on backend %s", n->name, oi->name,
                             mge_dtype_name(dt), e->be->name);
    mge_kctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.pool = e->pool;
    ctx.threads = e->threads;
    ctx.ws = p->ws[i] ? e->ws : NULL;
    ctx.ws_size = p->ws[i];
    ctx.training = e->training;
    ctx.rng = &e->rng;
    mge_status s = k->run(&ctx, n, in, out, err);
    for (int o = 0; o < n->nout; o++)
        if (out[o]->q.scale)
            e->qowned[n->out[o]] = 1;
    if (s)
        mge_error_prefix(err, "%s", n->name);
    return s;
}

/* Runs the preprocessed nodes once (see the top of the file): a plan of
 * their own at batch 1 (they do not depend on the batch) whose outputs are
 * the results the per-run nodes or the caller read, in an arena that lives
 * as long as e. bind() has bound the params, state and consts they read. */
static mge_status preprocess(mge_exec *e, mge_error *err)
{
    const mge_graph *g = e->g;
    size_t nv = (size_t)(g->nvalues ? g->nvalues : 1);
    int *front = malloc(sizeof(int) * nv);
    char *isf = calloc(nv, 1);
    mge_plan pp;
    int built = 0, nf = 0;
    mge_status s = MGE_OK;
    if (!front || !isf) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < g->nnodes + 1; i++) {
        /* inputs of the per-run nodes, then (i == nnodes) the requested outputs */
        int cnt = i < g->nnodes ? (e->run[i] ? g->nodes[i].nin : 0) : e->nout;
        for (int k = 0; k < cnt; k++) {
            int v = i < g->nnodes ? g->nodes[i].in[k] : e->outs[k];
            const mge_value *val = &g->values[v];
            if (val->kind == MGE_VAL_NODE && e->pre[val->producer] && !isf[v]) {
                isf[v] = 1;
                front[nf++] = v;
            }
        }
    }
    if ((s = mge_plan_build(g, e->pre, 1, nf, front, e->be, e->threads, &pp, err)))
        goto out;
    built = 1;
    size_t pre_cap = 0;   /* drops what an earlier, failed attempt left */
    if ((s = grow(&e->pre_arena, &pre_cap, pp.st.arena_bytes, "preprocessed weights", err)) ||
        (s = grow(&e->ws, &e->ws_cap, pp.st.workspace_bytes, "kernel scratch", err)))
        goto out;
    for (int i = 0; i < g->nnodes; i++) {
        if (!e->pre[i])
            continue;
        const mge_node *n = &g->nodes[i];
        for (int k = 0; k < n->nout; k++)
            plan_tensor(&e->t[n->out[k]], g, &pp, n->out[k], e->pre_arena);
        if ((s = run_node(e, &pp, i, err)))
            goto out;
        for (int k = 0; k < n->nout; k++) {
            int v = n->out[k];
            e->pret[v] = e->t[v];
            e->preq[v] = e->qowned[v];   /* the scale moves to pret */
            e->qowned[v] = 0;
        }
    }
    e->pre_done = 1;
out:
    if (built)
        mge_plan_free(&pp);
    free(front);
    free(isf);
    return s;
}

/* Points result i at its tensor, copying those that borrow a caller's input. */
static mge_status set_results(mge_exec *e, const mge_plan *p, mge_error *err)
{
    const mge_graph *g = e->g;
    for (int i = 0; i < e->nout; i++) {
        int v = e->outs[i];
        int r = p->alias[v] >= 0 ? p->alias[v] : v;
        mge_tensor_free(&e->copies[i]);
        /* an input, or a view of one outside the arena */
        int borrows = g->values[v].kind == MGE_VAL_INPUT ||
                      (g->values[v].kind == MGE_VAL_NODE && p->offset[v] < 0 && g->values[r].kind == MGE_VAL_INPUT);
        if (borrows) {
            mge_status s = mge_tensor_copy(&e->copies[i], &e->t[v], err);
            if (s)
                return s;
            e->res[i] = &e->copies[i];
        } else {
            e->res[i] = &e->t[v];
        }
    }
    return MGE_OK;
}

mge_status mge_exec_run(mge_exec *e, const mge_tensor *const *inputs, mge_error *err)
{
    int64_t batch;
    mge_plan *p;
    mge_status s;
    for (int i = 0; i < e->nout; i++)
        e->res[i] = NULL;
    if ((s = check_inputs(e, inputs, &batch, err)) || (s = get_plan(e, batch, &p, err)))
        return s;
    if ((s = grow(&e->arena, &e->arena_cap, p->st.arena_bytes, "arena", err)) ||
        (s = grow(&e->ws, &e->ws_cap, p->st.workspace_bytes, "kernel scratch", err)) ||
        (s = bind(e, p, inputs, err)))
        return s;
    e->last_batch = batch;
    /* our pool splits BLAS calls (lib/blas.c); set on every run in case the
     * embedding program changed it since */
    mge_blas_set_threads(1);
    if (e->pre && !e->pre_done && (s = preprocess(e, err)))
        return s;
    for (int i = 0; i < e->g->nnodes; i++) {
        if (!e->run[i])
            continue;
        if (e->hook)
            e->hook(e->hook_ud, i, 0);
        s = run_node(e, p, i, err);
        if (e->hook)
            e->hook(e->hook_ud, i, 1);
        if (s)
            return s;
    }
    return set_results(e, p, err);
}
