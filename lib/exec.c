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
 * params. A deployed model pays for them at load, not per inference.
 *
 * Devices: every kernel runs through a backend (kernels/backend.h). On the
 * cpu that is the cpu backend alone and the graph is the caller's. On
 * another device, placement (lib/place.c) gives a graph with copy nodes
 * between host and device; host nodes run on the caller's thread, device
 * nodes and copies are queued on the device, and a host node that reads a
 * value copied down first waits for that copy's event. Each device has its
 * own arena; params, state and consts the device reads live in device
 * buffers of their own, kept in a store that an executor made with
 * mge_exec_create_shared shares (the trainer's eval executor reads the
 * params its training executor updates there). */
#include "backend.h"
#include "place.h"

#include <stdlib.h>
#include <string.h>

#define PLAN_CACHE_DEFAULT 16
#define PLAN_CACHE_MAX 4096

/* A device and the persistent values kept on it, shared by executors. */
typedef struct devctx {
    const mge_backend_iface *be;
    mge_device *dev;
    int refs;
    int nvalues;             /* of the source graph */
    void **buf;              /* per source value: its device buffer, or NULL */
    size_t *bytes;
    char *valid;             /* the buffer holds the value */
    char *home;              /* the value's home is this device (updated there) */
    size_t persistent;       /* bytes in buf */
    char name[48];
    mge_devinfo info;
} devctx;

struct mge_exec {
    const mge_graph *g;      /* what runs: src, or placed.g */
    const mge_graph *src;
    const mge_backend *be;
    const mge_backend_iface *hif;   /* the host (cpu) backend */
    mge_device *host;
    devctx *dc;              /* the device, or NULL on the cpu */
    mge_placed placed;
    int is_placed;
    mge_event **ev;          /* per value: a pending copy down, or NULL */
    void **prep;             /* per node: the device's prepared state, or NULL */
    char *cst;               /* per value: it keeps its value between runs (params fixed), or NULL */
    void **hprep;            /* per host node: its cpu kernel's prepared state, or NULL */
    const mge_kernel **hprep_k;   /* the kernel that made it (to release it) */
    char *hprep_done;
    int prep_done;
    mge_devinfo hinfo;
    int threads;
    int training;
    mge_rng rng;
    mge_rng srng;             /* the per-run seed of mge_kctx.seed */
    uint64_t step_seed;
    int nout, *outs;         /* outs: values of g holding the results (on the host) */
    int *api_outs;           /* the requested values, as the caller numbered them */
    int nin, *ins;             /* needed graph inputs, value indices */
    char *need;                /* per node */
    char *vneed;               /* per value: read or written by a needed node, or requested */
    char *qowned;              /* per value: t[v].q.scale was set by a kernel and is ours to free */
    mge_tensor *t;             /* per value: bound tensor (borrowed data) */
    mge_tensor *copies;        /* per output: owned copy when the result lives outside the arena */
    const mge_tensor **res;    /* per output */
    mge_plan *plans;           /* cached plans by binding, plans[0] the most recent (LRU) */
    int nplans, plan_cap;
    int64_t plan_hits, plan_misses;
    int nsyms;                 /* the symbols of the needed inputs, in first-seen order */
    int64_t syms[MGE_MAX_SYMS];
    void *arena[2];          /* per device: 0 host, 1 the device */
    size_t arena_cap[2];
    void *ws[2];
    size_t ws_cap[2];
    mge_binding last_bind;     /* the last run's binding */
    int ran;                   /* a run has set last_bind */
    char *run;                 /* per node: needed and not preprocessed (what each run executes) */
    char *pre;                 /* per node: preprocessed once, or NULL when nothing is */
    int pre_done;
    mge_tensor *pret;          /* per value: a preprocessed result, bound like a param */
    void *pre_arena[2];
    char *preq;                /* per value: pret[v].q.scale is ours to free */
    mge_exec_hook hook;
    void *hook_ud;
    const mge_kcomm *comm;     /* distributed training: what allreduce kernels call */
};

/* ---------------------------------------------------------------- devices */

static int is_persistent(const mge_value *v)
{
    return v->kind == MGE_VAL_PARAM || v->kind == MGE_VAL_STATE || v->kind == MGE_VAL_CONST;
}

static void devctx_unref(devctx *dc)
{
    if (!dc || --dc->refs > 0)
        return;
    if (dc->dev) {
        dc->be->sync(dc->dev, NULL);
        for (int v = 0; v < dc->nvalues; v++)
            if (dc->buf && dc->buf[v])
                dc->be->free(dc->dev, dc->buf[v]);
        dc->be->close(dc->dev);
    }
    free(dc->buf);
    free(dc->bytes);
    free(dc->valid);
    free(dc->home);
    free(dc);
}

static mge_status devctx_open(const mge_backend_iface *be, int index, const char *spec, int threads,
                              const mge_backend *kt, int nvalues, devctx **out, mge_error *err)
{
    devctx *dc = calloc(1, sizeof *dc);
    size_t n = (size_t)(nvalues ? nvalues : 1);
    if (!dc || !(dc->buf = calloc(n, sizeof *dc->buf)) || !(dc->bytes = calloc(n, sizeof *dc->bytes)) ||
        !(dc->valid = calloc(n, 1)) || !(dc->home = calloc(n, 1))) {
        if (dc) {
            free(dc->buf);
            free(dc->bytes);
            free(dc->valid);
        }
        free(dc);
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    }
    dc->be = be;
    dc->refs = 1;
    dc->nvalues = nvalues;
    snprintf(dc->name, sizeof dc->name, "%s", spec);
    mge_status s = be->open(index, threads, kt, &dc->dev, err);
    if (s) {
        dc->dev = NULL;
        devctx_unref(dc);
        mge_error_prefix(err, "device '%s'", spec);
        return s;
    }
    if (be->info)
        be->info(dc->dev, &dc->info);
    *out = dc;
    return MGE_OK;
}

/* The device buffer of source value v, uploaded when it does not hold v. */
static mge_status store_get(mge_exec *e, int v, void **p, mge_error *err)
{
    devctx *dc = e->dc;
    const mge_value *val = &e->src->values[v];
    const mge_tensor *d = val->data;
    if (!d || (!d->data && d->nbytes))
        return mge_error_set(err, MGE_ERR_INVALID, "%s '%s' has no data (load weights or initialize it)",
                             val->kind == MGE_VAL_PARAM ? "param" : val->kind == MGE_VAL_STATE ? "state" : "const",
                             val->name);
    if (!dc->buf[v]) {
        if (!(dc->buf[v] = dc->be->alloc(dc->dev, d->nbytes)))
            return mge_error_set(err, MGE_ERR_NOMEM, "%s: cannot allocate %zu bytes on %s for '%s'", dc->name,
                                 d->nbytes, dc->name, val->name);
        dc->bytes[v] = d->nbytes;
        dc->persistent += d->nbytes;
        dc->valid[v] = 0;
    }
    if (!dc->valid[v]) {
        mge_status s = dc->be->upload(dc->dev, dc->buf[v], d->data, d->nbytes, err);
        if (s)
            return s;
        dc->valid[v] = 1;
    }
    *p = dc->buf[v];
    return MGE_OK;
}

static int place_query(void *ud, const mge_node *n, int nin, const mge_tdesc *in, int nout, const mge_tdesc *out)
{
    devctx *dc = ud;
    return dc->be->kernel(dc->dev, n, nin, in, nout, out) != NULL;
}

/* The backend and device node i runs on. */
static int node_dev(const mge_exec *e, int i)
{
    return e->is_placed ? e->placed.ndev[i] : 0;
}

static int value_dev(const mge_exec *e, int v)
{
    return e->is_placed ? e->placed.vdev[v] : 0;
}

/* ---------------------------------------------------------------- life cycle */

void mge_exec_free(mge_exec *e)
{
    if (!e)
        return;
    if (e->dc && e->dc->dev)
        e->dc->be->sync(e->dc->dev, NULL);
    if (e->t && e->qowned)
        for (int v = 0; v < e->g->nvalues; v++)
            if (e->qowned[v])
                free(e->t[v].q.scale);
    if (e->copies)
        for (int i = 0; i < e->nout; i++)
            mge_tensor_free(&e->copies[i]);
    for (int i = 0; i < e->nplans; i++)
        mge_plan_free(&e->plans[i]);
    free(e->plans);
    if (e->ev && e->dc)
        for (int v = 0; v < e->g->nvalues; v++)
            if (e->ev[v])
                e->dc->be->event_free(e->dc->dev, e->ev[v]);
    free(e->ev);
    if (e->prep && e->dc && e->dc->be->release)
        for (int i = 0; i < e->g->nnodes; i++)
            if (e->prep[i])
                e->dc->be->release(e->dc->dev, e->prep[i]);
    free(e->prep);
    if (e->hprep)
        for (int i = 0; i < e->g->nnodes; i++)
            if (e->hprep[i] && e->hprep_k[i]->release)
                e->hprep_k[i]->release(e->hprep[i]);
    free(e->hprep);
    free(e->hprep_k);
    free(e->hprep_done);
    free(e->cst);
    for (int d = 0; d < 2; d++) {
        const mge_backend_iface *be = d ? (e->dc ? e->dc->be : NULL) : e->hif;
        mge_device *dev = d ? (e->dc ? e->dc->dev : NULL) : e->host;
        if (!be || !dev)
            continue;
        be->free(dev, e->arena[d]);
        be->free(dev, e->ws[d]);
        be->free(dev, e->pre_arena[d]);
    }
    if (e->run != e->need)
        free(e->run);
    if (e->pret && e->preq)
        for (int v = 0; v < e->g->nvalues; v++)
            if (e->preq[v])
                free(e->pret[v].q.scale);
    if (e->host)
        e->hif->close(e->host);
    devctx_unref(e->dc);
    if (e->is_placed)
        mge_placed_free(&e->placed);
    free(e->pre);
    free(e->pret);
    free(e->preq);
    free(e->outs);
    free(e->api_outs);
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
 * preprocess leaves e->pre NULL and e->run == e->need. Device shadows
 * count as params with data. */
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
        int shadow = e->is_placed && e->placed.shadow_of[v] >= 0;
        cst[v] = val->kind != MGE_VAL_INPUT && val->kind != MGE_VAL_NODE && (val->data || shadow);
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
    /* kept: which inputs a kernel's prepare may pack (host_prepare) */
    e->cst = cst;
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

static mge_status exec_create(const mge_graph *g, const mge_exec_opts *o, mge_exec *share, mge_exec **out,
                              mge_error *err)
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
    const mge_backend_iface *dbe = NULL;
    int dindex = 0;
    const char *dspec = share && share->dc ? share->dc->name : o->device ? o->device : "cpu";
    if ((s = mge_device_backend(dspec, &dbe, &dindex, err)))
        return s;
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
    e->g = e->src = g;
    e->be = be;
    e->hif = mge_backend_cpu_iface();
    e->threads = o->threads > 0 ? o->threads : 1;
    e->training = o->training != 0;
    if (o->plan_cache < 0 || o->plan_cache > PLAN_CACHE_MAX) {
        free(e);
        return mge_error_set(err, MGE_ERR_INVALID, "plan cache bound %d: expected 1 to %d (0: %d)", o->plan_cache,
                             PLAN_CACHE_MAX, PLAN_CACHE_DEFAULT);
    }
    e->plan_cap = o->plan_cache ? o->plan_cache : PLAN_CACHE_DEFAULT;
    if (!(e->plans = calloc((size_t)e->plan_cap, sizeof *e->plans))) {
        free(e);
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    }
    mge_rng_seed(&e->rng, seed_of(g));
    mge_rng_seed(&e->srng, ~seed_of(g));
    size_t nv = (size_t)(g->nvalues ? g->nvalues : 1), nn = (size_t)(g->nnodes ? g->nnodes : 1);
    size_t ni = (size_t)(g->ninputs ? g->ninputs : 1);
    char *in_need = calloc(ni, 1);
    e->nout = nout;
    e->outs = malloc(sizeof(int) * (size_t)nout);
    e->api_outs = malloc(sizeof(int) * (size_t)nout);
    e->ins = malloc(sizeof(int) * ni);
    e->need = calloc(nn, 1);
    if (!in_need || !e->outs || !e->api_outs || !e->ins || !e->need) {
        free(in_need);
        mge_exec_free(e);
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    }
    if ((s = e->hif->open(0, e->threads, be, &e->host, err))) {
        e->host = NULL;
        free(in_need);
        mge_exec_free(e);
        return s;
    }
    e->hif->info(e->host, &e->hinfo);
    memcpy(e->outs, outs, sizeof(int) * (size_t)nout);
    memcpy(e->api_outs, outs, sizeof(int) * (size_t)nout);
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
    /* all the graph's symbols: plans infer every value; those no needed input has get 1 */
    if ((e->nsyms = mge_graph_symbols(g, e->syms, MGE_MAX_SYMS)) > MGE_MAX_SYMS) {
        mge_exec_free(e);
        return mge_error_set(err, MGE_ERR_SHAPE, "more than %d symbols in the graph's inputs", MGE_MAX_SYMS);
    }

    if (dbe != mge_backend_cpu_iface()) {
        if (share && share->dc) {
            e->dc = share->dc;
            e->dc->refs++;
        } else if ((s = devctx_open(dbe, dindex, dspec, e->threads, be, g->nvalues, &e->dc, err))) {
            mge_exec_free(e);
            return s;
        }
        if ((s = mge_place(g, e->need, nout, outs, e->training, place_query, e->dc, e->dc->home, &e->placed, err))) {
            mge_exec_free(e);
            return s;
        }
        e->is_placed = 1;
        e->g = &e->placed.g;
        memcpy(e->outs, e->placed.outs, sizeof(int) * (size_t)nout);
        for (int v = 0; v < g->nvalues; v++)
            if (is_persistent(&g->values[v]) && e->placed.vdev[v])
                e->dc->home[v] = 1;
        /* the placed graph holds only needed nodes */
        free(e->need);
        nn = (size_t)(e->g->nnodes ? e->g->nnodes : 1);
        nv = (size_t)(e->g->nvalues ? e->g->nvalues : 1);
        if (!(e->need = malloc(nn)) || !(e->ev = calloc(nv, sizeof *e->ev))) {
            mge_exec_free(e);
            return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        }
        memset(e->need, 1, nn);
    }
    const mge_graph *rg = e->g;
    e->vneed = calloc(nv, 1);
    e->qowned = calloc(nv, 1);
    e->t = calloc(nv, sizeof *e->t);
    e->copies = calloc((size_t)nout, sizeof *e->copies);
    e->res = calloc((size_t)nout, sizeof *e->res);
    if (!e->vneed || !e->qowned || !e->t || !e->copies || !e->res) {
        mge_exec_free(e);
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < rg->nnodes; i++) {
        if (!e->need[i])
            continue;
        const mge_node *n = &rg->nodes[i];
        for (int k = 0; k < n->nin; k++)
            e->vneed[n->in[k]] = 1;
        for (int k = 0; k < n->nout; k++)
            e->vneed[n->out[k]] = 1;
    }
    for (int k = 0; k < nout; k++)
        e->vneed[e->outs[k]] = 1;
    e->run = e->need;
    if (o->preprocess && !e->training && (s = mark_preprocess(e, err))) {
        mge_exec_free(e);
        return s;
    }
    *out = e;
    return MGE_OK;
}

mge_status mge_exec_create(const mge_graph *g, const mge_exec_opts *o, mge_exec **out, mge_error *err)
{
    return exec_create(g, o, NULL, out, err);
}

mge_status mge_exec_create_shared(const mge_graph *g, const mge_exec_opts *o, mge_exec *with, mge_exec **out,
                                  mge_error *err)
{
    return exec_create(g, o, with, out, err);
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
    return i >= 0 && i < e->nout ? e->api_outs[i] : -1;
}

const mge_graph *mge_exec_graph(const mge_exec *e)
{
    return e->g;
}

const char *mge_exec_node_device(const mge_exec *e, int node)
{
    if (node < 0 || node >= e->g->nnodes)
        return NULL;
    return node_dev(e, node) ? e->dc->be->name : "cpu";
}

int mge_exec_value_on_device(const mge_exec *e, int v)
{
    return v >= 0 && v < e->g->nvalues && value_dev(e, v);
}

const char *mge_exec_device(const mge_exec *e)
{
    return e->dc ? e->dc->name : "cpu";
}

const char *mge_exec_device_info(const mge_exec *e)
{
    return e->dc ? e->dc->info.name : e->hinfo.name;
}

void mge_exec_set_hook(mge_exec *e, mge_exec_hook fn, void *ud)
{
    e->hook = fn;
    e->hook_ud = ud;
}

void mge_exec_set_task_hook(mge_exec *e, mge_exec_task_hook fn, void *ud)
{
    if (e->hif->set_task_hook)
        e->hif->set_task_hook(e->host, fn, ud);
}

void mge_exec_set_seed(mge_exec *e, uint64_t seed)
{
    mge_rng_seed(&e->rng, seed);
    mge_rng_seed(&e->srng, ~seed);
}

void mge_exec_mark_changed(mge_exec *e, int value)
{
    if (e->dc && value >= 0 && value < e->dc->nvalues)
        e->dc->valid[value] = 0;
}

const mge_tensor *mge_exec_result(const mge_exec *e, int i)
{
    if (!e || i < 0 || i >= e->nout)
        return NULL;
    return e->res[i];
}

/* ---------------------------------------------------------------- plans */

/* *buf holds at least need bytes of device d's memory (allocated even for
 * 0, so it is never NULL after a success); what it held is dropped. */
static mge_status grow(mge_exec *e, int d, void **buf, size_t *cap, size_t need, const char *what, mge_error *err)
{
    if (*buf && need <= *cap)
        return MGE_OK;
    const mge_backend_iface *be = d ? e->dc->be : e->hif;
    mge_device *dev = d ? e->dc->dev : e->host;
    mge_status s;
    /* queued kernels may still use the old buffer */
    if (d && *buf && (s = be->sync(dev, err)))
        return s;
    be->free(dev, *buf);
    *cap = 0;
    if (!(*buf = be->alloc(dev, need ? need : 64)))
        return mge_error_set(err, MGE_ERR_NOMEM, "cannot allocate %zu bytes of %s on %s", need, what,
                             d ? e->dc->name : "cpu");
    *cap = need;
    return MGE_OK;
}

/* Node output v laid out by plan p: shape from the plan, data at its
 * offset in its device's arena (views outside the arena get theirs when
 * their node runs). */
static void plan_tensor(mge_tensor *t, const mge_graph *g, const mge_plan *p, int v, void *const *arena, int d)
{
    memset(t, 0, sizeof *t);
    t->q.axis = -1;
    t->dtype = g->values[v].dtype;
    t->ndim = p->ndims[v];
    memcpy(t->dims, &p->dims[(size_t)v * MGE_MAX_DIMS], sizeof t->dims);
    t->nbytes = p->nbytes[v];
    if (p->offset[v] >= 0)
        t->data = (char *)arena[d] + p->offset[v];
}

static mge_status build_plan(mge_exec *e, const char *need, const mge_binding *b, int nout, const int *outs,
                             mge_plan *p, mge_error *err)
{
    return mge_plan_build(e->g, need, b, nout, outs, e->be, e->threads,
                          e->is_placed ? e->placed.vdev : NULL, p, err);
}

/* b restricted to the executor's symbols, in their order (the cache key). */
static mge_status bind_norm(const mge_exec *e, const mge_binding *b, mge_binding *out, mge_error *err)
{
    out->n = 0;
    for (int i = 0; i < e->nsyms; i++) {
        int64_t v;
        if (!mge_binding_get(b, e->syms[i], &v))
            return mge_error_set(err, MGE_ERR_SHAPE, "no value for the symbol %s", mge_dim_name(e->syms[i]));
        if (v < 0)
            return mge_error_set(err, MGE_ERR_SHAPE, "%s = %lld is negative", mge_dim_name(e->syms[i]), (long long)v);
        out->sym[out->n] = e->syms[i];
        out->val[out->n++] = v;
    }
    return MGE_OK;
}

/* The plan for binding b (normalized), from the cache or built (then
 * cached as most recent, the least recent dropped when full). */
static mge_status get_plan(mge_exec *e, const mge_binding *b, mge_plan **pp, mge_error *err)
{
    for (int i = 0; i < e->nplans; i++)
        if (memcmp(e->plans[i].bind.val, b->val, sizeof(int64_t) * (size_t)b->n) == 0) {
            mge_plan hit = e->plans[i];
            memmove(&e->plans[1], &e->plans[0], sizeof(mge_plan) * (size_t)i);
            e->plans[0] = hit;
            *pp = &e->plans[0];
            e->plan_hits++;
            return MGE_OK;
        }
    mge_plan p;
    mge_status s = build_plan(e, e->run, b, e->nout, e->outs, &p, err);
    if (s)
        return s;
    e->plan_misses++;
    if (e->nplans == e->plan_cap)
        mge_plan_free(&e->plans[--e->nplans]);
    memmove(&e->plans[1], &e->plans[0], sizeof(mge_plan) * (size_t)e->nplans);
    e->plans[0] = p;
    e->nplans++;
    *pp = &e->plans[0];
    return MGE_OK;
}

/* The plan for b, or for the last run's binding when b is NULL (before any
 * run: N = 1 and the graph's probe values for other symbols). */
static mge_status plan_for(mge_exec *e, const mge_binding *b, mge_plan **pp, mge_error *err)
{
    mge_binding nb, pb;
    if (!b) {
        if (e->ran) {
            b = &e->last_bind;
        } else {
            mge_graph_probe_binding(e->g, &pb);
            b = &pb;
        }
    }
    mge_status s = bind_norm(e, b, &nb, err);
    return s ? s : get_plan(e, &nb, pp, err);
}

void mge_exec_plan_cache(const mge_exec *e, int64_t *hits, int64_t *misses, int *cached, int *cap)
{
    if (hits)
        *hits = e->plan_hits;
    if (misses)
        *misses = e->plan_misses;
    if (cached)
        *cached = e->nplans;
    if (cap)
        *cap = e->plan_cap;
}

mge_status mge_exec_stats(mge_exec *e, const mge_binding *b, mge_plan_stats *st, mge_error *err)
{
    mge_plan *p;
    mge_status s = plan_for(e, b, &p, err);
    if (s)
        return s;
    *st = p->st;
    return MGE_OK;
}

mge_status mge_exec_live_bytes(mge_exec *e, const mge_binding *b, size_t *live, mge_error *err)
{
    mge_plan *p;
    mge_status s = plan_for(e, b, &p, err);
    if (s)
        return s;
    return mge_plan_live(e->g, e->run, e->nout, e->outs, p, live, err);
}

mge_status mge_exec_device_stats(mge_exec *e, mge_devstats *st, size_t *arena, size_t *lower_bound,
                                 size_t *persistent, mge_error *err)
{
    mge_devstats z;
    memset(&z, 0, sizeof z);
    if (st)
        *st = z;
    if (arena)
        *arena = 0;
    if (lower_bound)
        *lower_bound = 0;
    if (persistent)
        *persistent = 0;
    if (!e->dc)
        return MGE_OK;
    if (st && e->dc->be->stats)
        e->dc->be->stats(e->dc->dev, st);
    if (persistent)
        *persistent = e->dc->persistent;
    if (arena || lower_bound) {
        mge_plan *p;
        mge_status s = plan_for(e, NULL, &p, err);
        if (s)
            return s;
        if (arena)
            *arena = p->dev_arena[1];
        if (lower_bound)
            *lower_bound = p->dev_lower[1];
    }
    return MGE_OK;
}

/* Queues the download of source value v into its host tensor when the
 * device holds it and is its home (nothing to do otherwise); the queue
 * orders it after the kernels that updated it. */
static mge_status queue_home_download(mge_exec *e, int v, mge_error *err)
{
    devctx *dc = e->dc;
    if (v < 0 || v >= dc->nvalues || !dc->home[v] || !dc->valid[v] || !dc->buf[v])
        return MGE_OK;
    mge_tensor *d = e->src->values[v].data;
    if (!d || !d->data || d->nbytes != dc->bytes[v])
        return MGE_OK;
    return dc->be->download(dc->dev, d->data, dc->buf[v], d->nbytes, err);
}

mge_status mge_exec_sync_value(mge_exec *e, int v, mge_error *err)
{
    if (!e->dc)
        return MGE_OK;
    mge_status s = queue_home_download(e, v, err);
    return s ? s : e->dc->be->sync(e->dc->dev, err);
}

mge_status mge_exec_sync_params(mge_exec *e, mge_error *err)
{
    if (!e->dc)
        return MGE_OK;
    mge_status s = MGE_OK;
    for (int v = 0; v < e->dc->nvalues && !s; v++)
        s = queue_home_download(e, v, err);
    return s ? s : e->dc->be->sync(e->dc->dev, err);
}

/* ---------------------------------------------------------------- running */
/* Checks inputs against their templates; the binding gives each symbol
 * the value its first input has there (in the executor's symbol order). */
static mge_status check_inputs(const mge_exec *e, const mge_tensor *const *inputs, mge_binding *bind, mge_error *err)
{
    const mge_graph *g = e->g;
    int from[MGE_MAX_SYMS];   /* the input each symbol's value came from */
    bind->n = e->nsyms;
    for (int i = 0; i < e->nsyms; i++) {
        bind->sym[i] = e->syms[i];
        bind->val[i] = -1;
        from[i] = -1;
    }
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
            ok = v->dims[k] < 0 ? t->dims[k] >= 0 : t->dims[k] == v->dims[k];
        if (!ok)
            /* numpy's default float64 meeting an f32 input is the common case: say what to do */
            return mge_error_set(err, MGE_ERR_SHAPE, "input '%s': expected %s, got %s%s", v->name,
                                 mge_shape_str(v->dtype, v->ndim, v->dims, want, sizeof want),
                                 mge_shape_str(t->dtype, t->ndim, t->dims, got, sizeof got),
                                 t->dtype == MGE_F64 && v->dtype == MGE_F32 ? " (save float32: x.astype(np.float32))"
                                                                             : "");
        for (int k = 0; k < v->ndim; k++) {
            if (v->dims[k] >= 0)
                continue;
            int j = 0;
            while (j < e->nsyms && e->syms[j] != v->dims[k])
                j++;
            if (j == e->nsyms)
                return mge_error_set(err, MGE_ERR_SHAPE, "input '%s': dim %d is not a symbol", v->name, k);
            if (from[j] < 0) {
                bind->val[j] = t->dims[k];
                from[j] = i;
            } else if (t->dims[k] != bind->val[j]) {
                const char *sn = mge_dim_name(e->syms[j]);
                if (from[j] == i)
                    return mge_error_set(err, MGE_ERR_SHAPE,
                                         "input '%s': expected %s with one value of %s, got %s (%s is %lld and %lld)",
                                         v->name, mge_shape_str(v->dtype, v->ndim, v->dims, want, sizeof want), sn,
                                         mge_shape_str(t->dtype, t->ndim, t->dims, got, sizeof got), sn,
                                         (long long)bind->val[j], (long long)t->dims[k]);
                return mge_error_set(err, MGE_ERR_SHAPE, "%s is %lld from %s but %lld from %s (got %s)", sn,
                                     (long long)bind->val[j], g->values[e->ins[from[j]]].name,
                                     (long long)t->dims[k], v->name,
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
    /* symbols only unneeded inputs carry: N defaults to 1 as before */
    for (int i = 0; i < e->nsyms; i++)
        if (from[i] < 0)
            bind->val[i] = 1;
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
            int sv = e->is_placed && e->placed.shadow_of[v] >= 0 ? e->placed.shadow_of[v] : v;
            const mge_tensor *d = e->src->values[sv].data;
            if (!d || (!d->data && d->nbytes))
                return mge_error_set(err, MGE_ERR_INVALID, "%s '%s' has no data (load weights or initialize it)",
                                     val->kind == MGE_VAL_PARAM ? "param" : val->kind == MGE_VAL_STATE ? "state"
                                                                                                       : "const",
                                     val->name);
            borrow(t, d);
            if (value_dev(e, v)) {
                mge_status s = store_get(e, sv, &t->data, err);
                if (s)
                    return s;
            }
            continue;
        }
        plan_tensor(t, g, p, v, e->arena, value_dev(e, v));
    }
    for (int i = 0; i < e->nin; i++)
        borrow(&e->t[e->ins[i]], inputs[i]);
    return MGE_OK;
}

/* A copy node: queued on the device; a copy down gets an event the host
 * readers wait for. */
static mge_status run_copy(mge_exec *e, const mge_node *n, mge_tensor *x, mge_tensor *y, mge_error *err)
{
    devctx *dc = e->dc;
    if (y->nbytes != x->nbytes)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: copy of %zu bytes into %zu", n->name, x->nbytes, y->nbytes);
    y->layout = x->layout;
    y->q = x->q;
    y->q.scale = NULL;
    y->q.nscale = 0;
    if (!dc)
        return MGE_OK;
    int to = (int)mge_node_int(n, MGE_KEY_to, 0);
    if (to)
        return dc->be->upload(dc->dev, y->data, x->data, x->nbytes, err);
    mge_status s = dc->be->download(dc->dev, y->data, x->data, x->nbytes, err);
    if (s)
        return s;
    int v = n->out[0];
    if (e->ev[v])
        dc->be->event_free(dc->dev, e->ev[v]);
    if (!(e->ev[v] = dc->be->event_record(dc->dev)))
        return mge_error_set(err, MGE_ERR_NOMEM, "%s: cannot record an event", n->name);
    return MGE_OK;
}

/* Node i's cpu kernel state, made on its first run (the persistent inputs
 * have their data by then); inputs that change between runs are hidden. */
static mge_status host_prepare(mge_exec *e, int i, const mge_kernel *k, mge_tensor *const *in, mge_error *err)
{
    size_t nn = (size_t)(e->g->nnodes ? e->g->nnodes : 1);
    if (!e->hprep && (!(e->hprep = calloc(nn, sizeof *e->hprep)) || !(e->hprep_k = calloc(nn, sizeof *e->hprep_k)) ||
                      !(e->hprep_done = calloc(nn, 1)))) {
        free(e->hprep);
        free(e->hprep_k);
        e->hprep = NULL;
        e->hprep_k = NULL;
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    }
    if (e->hprep_done[i])
        return MGE_OK;
    const mge_node *n = &e->g->nodes[i];
    mge_tensor *pin[64];
    for (int j = 0; j < n->nin; j++)
        pin[j] = e->cst[n->in[j]] ? in[j] : NULL;
    mge_status s = k->prepare(n, pin, &e->hprep[i], err);
    if (s)
        return s;
    e->hprep_k[i] = k;
    e->hprep_done[i] = 1;
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
    int d = node_dev(e, i);
    /* the copies placement made; a copy node of the caller's graph is an op like any other */
    if (e->is_placed && e->placed.src_node[i] < 0) {
        mge_status s = run_copy(e, n, in[0], out[0], err);
        if (s)
            mge_error_prefix(err, "%s", n->name);
        return s;
    }
    if (e->ev && !d)
        for (int k = 0; k < n->nin; k++) {
            mge_event **ev = &e->ev[n->in[k]];
            if (!*ev)
                continue;
            mge_status s = e->dc->be->event_wait(e->dc->dev, *ev, err);
            e->dc->be->event_free(e->dc->dev, *ev);
            *ev = NULL;
            if (s)
                return s;
        }
    mge_dtype dt = n->nin > 0 ? in[0]->dtype : MGE_F32;
    const mge_kernel *k;
    if (d) {
        mge_tdesc tin[64], tout[4];
        for (int j = 0; j < n->nin; j++) {
            tin[j].dtype = in[j]->dtype;
            tin[j].ndim = in[j]->ndim;
            memcpy(tin[j].dims, in[j]->dims, sizeof tin[j].dims);
        }
        for (int j = 0; j < n->nout; j++) {
            tout[j].dtype = out[j]->dtype;
            tout[j].ndim = out[j]->ndim;
            memcpy(tout[j].dims, out[j]->dims, sizeof tout[j].dims);
        }
        k = e->dc->be->kernel(e->dc->dev, n, n->nin, tin, n->nout, tout);
    } else {
        k = mge_backend_kernel(e->be, n->op, dt);
    }
    if (!k || !k->run)
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: no %s kernel for %s on %s", n->name, oi->name,
                             mge_dtype_name(dt), d ? e->dc->name : e->be->name);
    mge_status ps = !d && k->prepare && e->cst ? host_prepare(e, i, k, in, err) : MGE_OK;
    if (ps) {
        mge_error_prefix(err, "%s", n->name);
        return ps;
    }
    mge_kctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.threads = e->threads;
    ctx.ws = p->ws[i] ? e->ws[d] : NULL;
    ctx.ws_size = p->ws[i];
    ctx.training = e->training;
    ctx.rng = &e->rng;
    ctx.seed = e->step_seed;
    ctx.prepared = d ? (e->prep ? e->prep[i] : NULL) : (e->hprep ? e->hprep[i] : NULL);
    ctx.opname = oi->name;
    ctx.comm = e->comm;
    mge_status s = d ? e->dc->be->launch(e->dc->dev, k, &ctx, n, in, out, err)
                     : e->hif->launch(e->host, k, &ctx, n, in, out, err);
    if (!d)
        for (int o = 0; o < n->nout; o++)
            if (out[o]->q.scale)
                e->qowned[n->out[o]] = 1;
    if (s)
        mge_error_prefix(err, "%s", n->name);
    return s;
}

/* Per-device arenas of plan p (the scratch too). */
static mge_status grow_all(mge_exec *e, const mge_plan *p, void **arenas, size_t *caps, mge_error *err)
{
    for (int d = 0; d < (e->dc ? 2 : 1); d++) {
        mge_status s;
        if ((s = grow(e, d, &arenas[d], &caps[d], p->dev_arena[d], "arena", err)) ||
            (s = grow(e, d, &e->ws[d], &e->ws_cap[d], p->dev_ws[d], "kernel scratch", err)))
            return s;
    }
    return MGE_OK;
}

/* Runs the preprocessed nodes once (see the top of the file): a plan of
 * their own at batch 1 (they do not depend on the batch) whose outputs are
 * the results the per-run nodes or the caller read, in arenas that live
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
    mge_binding pb;   /* any binding: these nodes read no input */
    mge_graph_probe_binding(e->g, &pb);
    if ((s = build_plan(e, e->pre, &pb, nf, front, &pp, err)))
        goto out;
    built = 1;
    size_t pre_cap[2] = {0, 0};   /* drops what an earlier, failed attempt left */
    if ((s = grow_all(e, &pp, e->pre_arena, pre_cap, err)))
        goto out;
    for (int i = 0; i < g->nnodes; i++) {
        if (!e->pre[i])
            continue;
        const mge_node *n = &g->nodes[i];
        for (int k = 0; k < n->nout; k++)
            plan_tensor(&e->t[n->out[k]], g, &pp, n->out[k], e->pre_arena, value_dev(e, n->out[k]));
        if ((s = run_node(e, &pp, i, err)))
            goto out;
        for (int k = 0; k < n->nout; k++) {
            int v = n->out[k];
            e->pret[v] = e->t[v];
            e->preq[v] = e->qowned[v];   /* the scale moves to pret */
            e->qowned[v] = 0;
        }
    }
    /* the scratch is shared with the per-run nodes */
    if (e->dc && (s = e->dc->be->sync(e->dc->dev, err)))
        goto out;
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

/* The device's per-node state, made once from the bound inputs (the
 * weights are in device memory by now) and kept until the executor goes. */
static mge_status prepare_nodes(mge_exec *e, mge_error *err)
{
    const mge_backend_iface *be = e->dc->be;
    e->prep_done = 1;
    if (!be->prepare)
        return MGE_OK;
    if (!(e->prep = calloc((size_t)(e->g->nnodes ? e->g->nnodes : 1), sizeof *e->prep)))
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    for (int i = 0; i < e->g->nnodes; i++) {
        const mge_node *n = &e->g->nodes[i];
        if (!e->run[i] || !node_dev(e, i) || n->op == MGE_OP_COPY || n->nin > 64)
            continue;
        mge_tensor *in[64];
        for (int k = 0; k < n->nin; k++)
            in[k] = &e->t[n->in[k]];
        mge_status s = be->prepare(e->dc->dev, n, in, &e->prep[i], err);
        if (s) {
            mge_error_prefix(err, "%s", n->name);
            return s;
        }
    }
    return MGE_OK;
}

static mge_status run_all(mge_exec *e, mge_plan *p, mge_error *err)
{
    mge_status s;
    if (e->pre && !e->pre_done && (s = preprocess(e, err)))
        return s;
    if (e->dc && !e->prep_done && (s = prepare_nodes(e, err)))
        return s;
    for (int i = 0; i < e->g->nnodes; i++) {
        if (!e->run[i])
            continue;
        if (e->hook)
            e->hook(e->hook_ud, i, 0);
        s = run_node(e, p, i, err);
        /* a profiler times the node, not its launch */
        if (!s && e->hook && e->dc && node_dev(e, i))
            s = e->dc->be->sync(e->dc->dev, err);
        if (e->hook)
            e->hook(e->hook_ud, i, 1);
        if (s)
            return s;
    }
    return MGE_OK;
}

mge_status mge_exec_run(mge_exec *e, const mge_tensor *const *inputs, mge_error *err)
{
    mge_binding b;
    mge_plan *p;
    mge_status s;
    for (int i = 0; i < e->nout; i++)
        e->res[i] = NULL;
    if ((s = check_inputs(e, inputs, &b, err)) || (s = get_plan(e, &b, &p, err)))
        return s;
    if ((s = grow_all(e, p, e->arena, e->arena_cap, err)) || (s = bind(e, p, inputs, err)))
        return s;
    e->last_bind = b;
    e->ran = 1;
    /* its own generator, so dropout's sequence does not depend on it */
    if (e->training)
        e->step_seed = mge_rng_next(&e->srng);
    if (e->hif->begin)
        e->hif->begin(e->host);
    if (e->dc && e->dc->be->begin)
        e->dc->be->begin(e->dc->dev);
    s = run_all(e, p, err);
    if (e->dc) {
        /* the results are on the host only once the queue has run */
        mge_error serr;
        mge_status ss = e->dc->be->sync(e->dc->dev, s ? &serr : err);
        if (!s)
            s = ss;
        for (int v = 0; v < e->g->nvalues; v++)
            if (e->ev[v]) {
                e->dc->be->event_free(e->dc->dev, e->ev[v]);
                e->ev[v] = NULL;
            }
    }
    if (s)
        return s;
    return set_results(e, p, err);
}

void mge_exec_set_comm(mge_exec *e, const mge_kcomm *c)
{
    e->comm = c;
}
