/* train.c — the trainer: model + gradients + optimizer as one graph, run by
 * two executors (training and eval mode) that share its tensors.
 *
 * The guard (mge_train_opts.guard) keeps only finite steps. The update
 * nodes already output the squared norm of the update they applied, computed
 * from the stored new value minus the old one; with finite old values that
 * norm is finite only if every new value is, so a finite norm clears a
 * param without reading it, and only a non-finite one (a real NaN or inf,
 * or a norm too big for f32) costs a scan. The running statistics are
 * scanned every step (they are small); the optimizer moments are checked
 * when exported.
 *
 * Undoing a step restores a snapshot of everything a step writes. Copying
 * params and moments every step would cost about as much as the optimizer
 * update itself, a large part of the step for dense layers at small
 * batches, so a snapshot is taken only when the steps since the last one
 * took GUARD_RATIO times as long as copying it (or every guard_every
 * steps): the copies stay near 1/GUARD_RATIO of the training time, and a
 * caller that needs the step just before a failure runs the few steps since
 * the snapshot again, which gives the same bits (steps are deterministic). */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GUARD_RATIO 200

struct mge_trainer {
    mge_graph *g;            /* the training graph (owned) */
    mge_exec *train, *eval;
    uint64_t seed;
    int hyper;               /* value index of "__opt.hyper" */
    int loss, logits, labels;/* values; logits/labels -1 unless the loss is cross_entropy */
    int nin, *ins;           /* model inputs */
    int tr_logits, ev_logits;/* result index of the logits in each executor, or -1 */
    /* per executor: position of each executor input in ins[] */
    int *tr_map, *ev_map;
    const mge_tensor **argv; /* scratch for exec inputs */
    int nupd, *upd;          /* updated params (value indices), in update order */
    int upd_res;             /* train executor result index of upd[0]'s update norm */
    int guard;
    int64_t guard_every;     /* > 0: a snapshot every that many steps; 0: by time */
    int nsnap, *snap_v;      /* guard: values a step writes (updated params, state, hyper) */
    size_t *snap_off;
    unsigned char *snap;     /* their bytes after step snap_step */
    int have_snap;
    int64_t snap_step, since;/* steps kept since the snapshot */
    double t_copy, t_since;  /* seconds: the last snapshot's copy, the steps kept since */
    int nscan, *scan_v;      /* guard: state values scanned after each step (not the moments) */
    mge_comm *comm;          /* data parallel: the ranks (size > 1), else NULL */
    mge_dist *dist;          /* its gradient buckets (lib/dist.c) */
    int nscan_stats;         /* state values other than the optimizer's (running statistics) */
};

void mge_trainer_free(mge_trainer *t)
{
    if (!t)
        return;
    mge_exec_free(t->eval);   /* it shares the training executor's device */
    mge_exec_free(t->train);
    mge_graph_free(t->g);
    mge_dist_free(t->dist);
    free(t->ins);
    free(t->tr_map);
    free(t->ev_map);
    free(t->argv);
    free(t->upd);
    free(t->snap_v);
    free(t->snap_off);
    free(t->snap);
    free(t->scan_v);
    free(t);
}

/* ---------------------------------------------------------------- finite checks */

/* Index of the first NaN or inf in a float tensor; -1 when there is none
 * (and for integer dtypes). Exponent bits all set is NaN or inf. */
static int64_t first_nonfinite(const mge_tensor *x)
{
    if (!x || !x->data)
        return -1;
    int64_t n = mge_tensor_numel(x);
    if (x->dtype == MGE_F32) {
        const uint32_t *u = x->data;
        for (int64_t i = 0; i < n; i++)
            if ((u[i] & 0x7f800000u) == 0x7f800000u)
                return i;
    } else if (x->dtype == MGE_F16 || x->dtype == MGE_BF16) {
        const uint16_t *u = x->data;
        uint16_t m = x->dtype == MGE_F16 ? 0x7c00 : 0x7f80;
        for (int64_t i = 0; i < n; i++)
            if ((u[i] & m) == m)
                return i;
    } else if (x->dtype == MGE_F64) {
        const double *d = x->data;
        for (int64_t i = 0; i < n; i++)
            if (!isfinite(d[i]))
                return i;
    }
    return -1;
}

static const char *value_what(const mge_value *v)
{
    return v->kind == MGE_VAL_PARAM ? "parameter" : mge_value_is_opt_state(v) ? "optimizer state" : "state";
}

/* "nan" or "inf" / "-inf" for element i of float tensor x. */
static const char *elem_word(const mge_tensor *x, int64_t i)
{
    double v = mge_dtype_get(x->dtype, x->data, i);
    return isnan(v) ? "nan" : v > 0 ? "inf" : "-inf";
}

/* MGE_ERR_NONFINITE for the first param or state value of g that holds NaN or
 * inf (optimizer state only with opt); the message ends with tail. */
static mge_status check_values(const mge_graph *g, int opt, const char *tail, mge_error *err)
{
    for (int v = 0; v < g->nvalues; v++) {
        const mge_value *val = &g->values[v];
        if ((val->kind != MGE_VAL_PARAM && val->kind != MGE_VAL_STATE) || (!opt && mge_value_is_opt_state(val)))
            continue;
        int64_t i = first_nonfinite(val->data);
        if (i >= 0)
            return mge_error_set(err, MGE_ERR_NONFINITE, "%s %s holds non-finite values (element %lld is %s)%s",
                                 value_what(val), val->name, (long long)i, elem_word(val->data, i), tail);
    }
    return MGE_OK;
}

/* The guard's lists and the snapshot buffer (sizes fixed: params and state
 * never change shape). */
static mge_status guard_init(mge_trainer *t, mge_error *err)
{
    const mge_graph *g = t->g;
    size_t nv = (size_t)(g->nvalues ? g->nvalues : 1);
    t->snap_v = malloc(sizeof(int) * nv);
    t->snap_off = malloc(sizeof(size_t) * (nv + 1));
    t->scan_v = malloc(sizeof(int) * nv);
    if (!t->snap_v || !t->snap_off || !t->scan_v)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    size_t off = 0;
    for (int k = 0; k < t->nupd; k++) {
        t->snap_v[t->nsnap] = t->upd[k];
        t->snap_off[t->nsnap++] = off;
        off += g->values[t->upd[k]].data->nbytes;
    }
    for (int v = 0; v < g->nvalues; v++) {
        const mge_value *val = &g->values[v];
        if (val->kind != MGE_VAL_STATE || !val->data || !val->data->data)
            continue;
        t->snap_v[t->nsnap] = v;
        t->snap_off[t->nsnap++] = off;
        off += val->data->nbytes;
        if (!mge_value_is_opt_state(val))
            t->scan_v[t->nscan++] = v;
    }
    t->snap_off[t->nsnap] = off;
    if (!(t->snap = malloc(off ? off : 1)))
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory: %zu bytes to keep the last good step (guard)", off);
    /* touched now, so the first copy's time (which spaces the snapshots)
     * is not that of faulting the pages in */
    memset(t->snap, 0, off);
    return MGE_OK;
}

static mge_status guard_save(mge_trainer *t, mge_error *err)
{
    /* on a device the values live there: their host copies first */
    mge_status s = mge_exec_sync_params(t->train, err);
    if (s)
        return s;
    for (int k = 0; k < t->nsnap; k++) {
        const mge_tensor *x = t->g->values[t->snap_v[k]].data;
        if (x->nbytes)
            memcpy(t->snap + t->snap_off[k], x->data, x->nbytes);
    }
    return MGE_OK;
}

static void guard_restore(mge_trainer *t)
{
    for (int k = 0; k < t->nsnap; k++) {
        mge_tensor *x = t->g->values[t->snap_v[k]].data;
        if (x->nbytes)
            memcpy(x->data, t->snap + t->snap_off[k], x->nbytes);
        mge_exec_mark_changed(t->train, t->snap_v[k]);   /* a device takes them up again */
    }
}

/* After a step: the loss, the update norms (a scan only behind a non-finite
 * one), the running statistics. */
static mge_status guard_check(const mge_trainer *t, int64_t step, const mge_train_result *r, mge_error *err)
{
    if (!isfinite(r->loss))
        return mge_error_set(err, MGE_ERR_NONFINITE, "step %lld: the loss is %s", (long long)step,
                             isnan(r->loss) ? "NaN" : "infinite");
    for (int k = 0; k < t->nupd; k++) {
        const mge_tensor *nt = mge_exec_result(t->train, t->upd_res + k);
        if (nt && nt->data && isfinite(*(const float *)nt->data))
            continue;
        const mge_value *pv = &t->g->values[t->upd[k]];
        mge_status s = mge_exec_sync_value(t->train, t->upd[k], err);
        if (s)
            return s;
        int64_t i = first_nonfinite(pv->data);
        if (i >= 0)
            return mge_error_set(err, MGE_ERR_NONFINITE,
                                 "step %lld: the update made parameter %s non-finite (element %lld is %s)",
                                 (long long)step, pv->name, (long long)i, elem_word(pv->data, i));
    }
    for (int k = 0; k < t->nscan; k++) {
        const mge_value *sv = &t->g->values[t->scan_v[k]];
        mge_status s = mge_exec_sync_value(t->train, t->scan_v[k], err);
        if (s)
            return s;
        int64_t i = first_nonfinite(sv->data);
        if (i >= 0)
            return mge_error_set(err, MGE_ERR_NONFINITE, "step %lld: the step made state %s non-finite (element %lld is %s)",
                                 (long long)step, sv->name, (long long)i, elem_word(sv->data, i));
    }
    return MGE_OK;
}

int mge_trainer_ninputs(const mge_trainer *t)
{
    return t->nin;
}

int mge_trainer_input(const mge_trainer *t, int i)
{
    return i >= 0 && i < t->nin ? t->ins[i] : -1;
}

int64_t mge_trainer_classes(const mge_trainer *t)
{
    if (t->logits < 0)
        return 0;
    const mge_value *v = &t->g->values[t->logits];
    return v->ndim >= 2 && v->dims[1] > 0 ? v->dims[1] : 0;   /* [N,C] or [N,C,d...] */
}

void mge_trainer_set_hook(mge_trainer *t, mge_exec_hook fn, void *ud)
{
    mge_exec_set_hook(t->train, fn, ud);
}

mge_exec *mge_trainer_exec(mge_trainer *t)
{
    return t->train;
}

const mge_graph *mge_trainer_graph(const mge_trainer *t)
{
    return t->g;
}

/* exec input i -> index into t->ins */
static mge_status map_inputs(mge_trainer *t, const mge_exec *e, int **map, mge_error *err)
{
    int n = mge_exec_ninputs(e);
    *map = malloc(sizeof(int) * (size_t)(n ? n : 1));
    if (!*map)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        int v = mge_exec_input(e, i), k = 0;
        while (k < t->nin && t->ins[k] != v)
            k++;
        if (k == t->nin)
            return mge_error_set(err, MGE_ERR_INVALID, "training step input '%s' is not a model input",
                                 t->g->values[v].name);
        (*map)[i] = k;
    }
    return MGE_OK;
}

mge_status mge_trainer_create(const mge_graph *model, const mge_train_opts *o, mge_trainer **out, mge_error *err)
{
    mge_status s;
    *out = NULL;
    if (model->loss < 0)
        return mge_error_set(err, MGE_ERR_INVALID, "the model has no loss to minimize (add a `minimize` line)");
    for (int v = 0; v < model->nvalues; v++) {
        const mge_value *val = &model->values[v];
        if ((val->kind == MGE_VAL_PARAM || val->kind == MGE_VAL_STATE) && !val->data)
            return mge_error_set(err, MGE_ERR_INVALID, "%s '%s' has no data (initialize or load weights first)",
                                 val->kind == MGE_VAL_PARAM ? "param" : "state", val->name);
    }
    mge_trainer *t = calloc(1, sizeof *t);
    if (!t)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    t->seed = o->seed;
    t->guard = o->guard;
    t->guard_every = o->guard_every > 0 ? o->guard_every : 0;
    t->snap_step = -1;
    t->logits = t->labels = -1;
    t->tr_logits = t->ev_logits = -1;
    if (!(t->g = mge_graph_clone(model, err))) {
        mge_trainer_free(t);
        return err ? err->code : MGE_ERR_NOMEM;
    }
    mge_graph *g = t->g;
    /* a model that is already non-finite would blame the first update */
    if (o->guard && (s = check_values(g, 1, " before training", err))) {
        mge_trainer_free(t);
        return s;
    }
    t->loss = g->loss;
    t->nin = g->ninputs;
    t->ins = malloc(sizeof(int) * (size_t)(g->ninputs ? g->ninputs : 1));
    t->argv = calloc((size_t)(g->ninputs ? g->ninputs : 1), sizeof *t->argv);
    int *params = malloc(sizeof(int) * (size_t)g->nvalues), *grads = malloc(sizeof(int) * (size_t)g->nvalues);
    int *updates = malloc(sizeof(int) * (size_t)g->nvalues), *outs = malloc(sizeof(int) * (size_t)(g->nvalues + 2));
    if (!t->ins || !t->argv || !params || !grads || !updates || !outs) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto fail;
    }
    memcpy(t->ins, g->inputs, sizeof(int) * (size_t)g->ninputs);
    /* classification: the loss is cross_entropy(logits, labels) */
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i].out[0] == t->loss && g->nodes[i].op == MGE_OP_CROSS_ENTROPY) {
            t->logits = g->nodes[i].in[0];
            t->labels = g->nodes[i].in[1];
        }
    if (o->comm && o->comm->size > 1 && o->sync_bn)
        for (int i = 0; i < g->nnodes; i++)
            if (g->nodes[i].op == MGE_OP_BATCHNORM)
                g->nodes[i].op = MGE_OP_SYNC_BATCHNORM;   /* same inputs and attributes */
    int np = 0;
    for (int v = 0; v < g->nvalues; v++)
        if (g->values[v].kind == MGE_VAL_PARAM && mge_dtype_is_float(g->values[v].dtype))
            params[np++] = v;
    if (np == 0) {
        s = mge_error_set(err, MGE_ERR_INVALID, "the model has no trainable parameters");
        goto fail;
    }
    if ((s = mge_grad_build(g, t->loss, np, params, grads, err)))
        goto fail;
    /* params that do not influence the loss are left alone */
    int nu = 0;
    for (int i = 0; i < np; i++)
        if (grads[i] >= 0) {
            params[nu] = params[i];
            grads[nu++] = grads[i];
        }
    if (nu == 0) {
        s = mge_error_set(err, MGE_ERR_INVALID, "no parameter influences the loss '%s'", g->values[t->loss].name);
        goto fail;
    }
    if (o->comm && o->comm->size > 1) {
        /* the gradients are summed over the ranks before the update sees them */
        if (o->device && strcmp(o->device, "cpu") != 0 && strncmp(o->device, "cpu:", 4) != 0) {
            s = mge_error_set(err, MGE_ERR_UNSUPPORTED, "distributed training runs on the cpu device, not %s",
                              o->device);
            goto fail;
        }
        t->comm = o->comm;
        double mb = o->bucket_mb > 0 ? o->bucket_mb : 25;
        if ((s = mge_dist_insert(g, o->comm, mb * 1048576.0, nu, grads, &t->dist, err)))
            goto fail;
    }
    if ((s = mge_optim_build(g, &o->optim, nu, params, grads, updates, &t->hyper, err)))
        goto fail;
    if ((s = mge_graph_validate(g, err)))
        goto fail;

    int no = 0;
    outs[no++] = t->loss;
    if (t->logits >= 0) {
        t->tr_logits = no;
        outs[no++] = t->logits;
    }
    memcpy(outs + no, updates, sizeof(int) * (size_t)nu);
    t->upd_res = no;
    t->nupd = nu;
    if (!(t->upd = malloc(sizeof(int) * (size_t)nu))) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto fail;
    }
    memcpy(t->upd, params, sizeof(int) * (size_t)nu);
    mge_exec_opts to = {.threads = o->threads, .backend = o->backend, .noutputs = no + nu, .outputs = outs,
                        .training = 1, .device = o->device};
    if ((s = mge_exec_create(g, &to, &t->train, err)))
        goto fail;
    mge_exec_opts eo = {.threads = o->threads, .backend = o->backend, .noutputs = no, .outputs = outs,
                        .device = o->device};
    t->ev_logits = t->tr_logits;
    /* on a device, eval reads the params training keeps there */
    if ((s = mge_exec_create_shared(g, &eo, t->train, &t->eval, err)))
        goto fail;
    if (t->dist)
        mge_exec_set_comm(t->train, mge_dist_kcomm(t->dist));
    for (int v = 0; v < g->nvalues; v++)
        t->nscan_stats += g->values[v].kind == MGE_VAL_STATE && !mge_value_is_opt_state(&g->values[v]) &&
                          g->values[v].data;
    if ((s = map_inputs(t, t->train, &t->tr_map, err)) || (s = map_inputs(t, t->eval, &t->ev_map, err)))
        goto fail;
    if (t->guard && (s = guard_init(t, err)))
        goto fail;
    free(params);
    free(grads);
    free(updates);
    free(outs);
    *out = t;
    return MGE_OK;
fail:
    free(params);
    free(grads);
    free(updates);
    free(outs);
    mge_trainer_free(t);
    return s;
}

/* Loss and accuracy from the executor's results. */
static mge_status collect(const mge_trainer *t, const mge_exec *e, int li, const mge_tensor *const *batch,
                          mge_train_result *r, mge_error *err)
{
    const mge_tensor *lt = mge_exec_result(e, 0);
    r->loss = lt ? *(const float *)lt->data : NAN;
    r->correct = -1;
    r->count = 0;
    for (int i = 0; i < t->nin; i++)
        if (batch[i]->ndim > 0) {
            r->count = batch[i]->dims[0];
            break;
        }
    if (li < 0 || t->labels < 0)
        return MGE_OK;
    int lab = -1;
    for (int i = 0; i < t->nin; i++)
        if (t->ins[i] == t->labels)
            lab = i;
    const mge_tensor *lg = mge_exec_result(e, li);
    if (lab < 0 || !lg || lg->ndim != 2 || lg->dtype != MGE_F32)
        return MGE_OK;
    int64_t ok = mge_count_correct(lg, batch[lab]);
    if (ok < 0)
        return mge_error_set(err, MGE_ERR_SHAPE, "labels do not match the logits");
    r->correct = ok;
    return MGE_OK;
}

int64_t mge_count_correct(const mge_tensor *logits, const mge_tensor *labels)
{
    const mge_tensor *lg = logits, *lb = labels;
    if (!lg || !lb || lg->dtype != MGE_F32 || lg->ndim != 2 || lb->ndim != 1 || lb->dims[0] != lg->dims[0] ||
        (lb->dtype != MGE_I64 && lb->dtype != MGE_I32))
        return -1;
    int64_t n = lg->dims[0], c = lg->dims[1], ok = 0;
    for (int64_t i = 0; i < n; i++) {
        const float *row = (const float *)lg->data + i * c;
        int64_t best = 0;
        for (int64_t k = 1; k < c; k++)
            if (row[k] > row[best])
                best = k;
        int64_t want = lb->dtype == MGE_I64 ? ((const int64_t *)lb->data)[i] : ((const int32_t *)lb->data)[i];
        ok += best == want;
    }
    return ok;
}

static mge_status run(mge_trainer *t, mge_exec *e, const int *map, const mge_tensor *const *batch, mge_error *err)
{
    int n = mge_exec_ninputs(e);
    for (int i = 0; i < n; i++)
        t->argv[i] = batch[map[i]];
    return mge_exec_run(e, t->argv, err);
}

mge_status mge_trainer_step(mge_trainer *t, const mge_tensor *const *batch, double lr, int64_t step,
                            mge_train_result *r, mge_error *err)
{
    double t0 = t->guard ? mge_now() : 0;
    if (t->guard && (!t->have_snap || (t->guard_every ? t->since >= t->guard_every
                                                       : t->t_since >= GUARD_RATIO * t->t_copy))) {
        mge_status gs = guard_save(t, err);
        if (gs)
            return gs;
        t->have_snap = 1;
        t->snap_step = step - 1;
        t->since = 0;
        t->t_since = 0;
        double t1 = mge_now();
        t->t_copy = t1 - t0;
        t0 = t1;
    }
    mge_status s = mge_optim_set_hyper(t->g, t->hyper, lr, step, err);
    if (s)
        return s;
    mge_exec_mark_changed(t->train, t->hyper);
    /* a generator per step: a resumed run draws the same dropout masks */
    uint64_t mix = t->seed ^ (0x9e3779b97f4a7c15ull * (uint64_t)(step + 1));
    mge_exec_set_seed(t->train, mix);
    s = run(t, t->train, t->tr_map, batch, err);
    if (t->dist) {
        mge_error e2;
        mge_error_clear(&e2);
        mge_status s2 = mge_dist_end_step(t->dist, s ? &e2 : err);
        if (!s)
            s = s2;
    }
    if (!s)
        s = collect(t, t->train, t->tr_logits, batch, r, err);
    if (!t->guard)
        return s;
    if (!s)
        s = guard_check(t, step, r, err);
    if (s) {
        guard_restore(t);
        t->since = 0;
        t->t_since = 0;
        return s;
    }
    t->since++;
    t->t_since += mge_now() - t0;
    return MGE_OK;
}

int64_t mge_trainer_good_step(const mge_trainer *t)
{
    return t->guard && t->have_snap ? t->snap_step : -1;
}

mge_status mge_trainer_eval(mge_trainer *t, const mge_tensor *const *batch, mge_train_result *r, mge_error *err)
{
    mge_status s = run(t, t->eval, t->ev_map, batch, err);
    if (s)
        return s;
    return collect(t, t->eval, t->ev_logits, batch, r, err);
}

mge_status mge_trainer_stats(mge_trainer *t, const mge_binding *b, mge_plan_stats *st, mge_error *err)
{
    return mge_exec_stats(t->train, b, st, err);
}

mge_status mge_trainer_export(const mge_trainer *t, const mge_graph *model, int with_opt, mge_graph **out,
                              mge_error *err)
{
    *out = NULL;
    /* what the device updated comes back to the host first */
    mge_status s0 = mge_exec_sync_params(t->train, err);
    if (s0 || (s0 = check_values(t->g, with_opt, "", err)))
        return s0;
    mge_graph *c = mge_graph_clone(model, err);
    if (!c)
        return err ? err->code : MGE_ERR_NOMEM;
    mge_status s = MGE_OK;
    for (int v = 0; v < c->nvalues && !s; v++) {
        mge_value *cv = &c->values[v];
        if (cv->kind != MGE_VAL_PARAM && cv->kind != MGE_VAL_STATE)
            continue;
        int tv = mge_graph_find(t->g, cv->name);
        if (tv < 0 || !t->g->values[tv].data)
            continue;
        mge_tensor copy;
        if ((s = mge_tensor_copy(&copy, t->g->values[tv].data, err)))
            break;
        if (!cv->data && !(cv->data = calloc(1, sizeof *cv->data))) {
            mge_tensor_free(&copy);
            s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
            break;
        }
        mge_tensor_free(cv->data);
        *cv->data = copy;
    }
    for (int v = 0; v < t->g->nvalues && !s && with_opt; v++) {
        const mge_value *tv = &t->g->values[v];
        if (!mge_value_is_opt_state(tv) || mge_graph_find(c, tv->name) >= 0 || !tv->data)
            continue;
        int nv = mge_graph_add_value(c, tv->name, MGE_VAL_STATE, tv->dtype, tv->ndim, tv->dims, err);
        if (nv < 0) {
            s = err ? err->code : MGE_ERR_INVALID;
            break;
        }
        mge_tensor *d = calloc(1, sizeof *d);
        if (!d) {
            s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
            break;
        }
        if ((s = mge_tensor_copy(d, tv->data, err))) {
            free(d);
            break;
        }
        c->values[nv].data = d;
    }
    if (s) {
        mge_graph_free(c);
        return s;
    }
    *out = c;
    return MGE_OK;
}

/* ---------------------------------------------------------------- distributed */

void mge_trainer_set_share(mge_trainer *t, double share)
{
    if (t->dist)
        mge_dist_set_share(t->dist, share);
}

static int is_kept(const mge_value *v)
{
    return (v->kind == MGE_VAL_PARAM || v->kind == MGE_VAL_STATE) && v->data && v->data->data;
}

static mge_status bcast(mge_trainer *t, int root, int stats_only, mge_error *err)
{
    if (!t->comm)
        return MGE_OK;
    mge_status s = mge_exec_sync_params(t->train, err);
    for (int v = 0; v < t->g->nvalues && !s; v++) {
        mge_value *val = &t->g->values[v];
        if (!is_kept(val) || !val->data->nbytes ||
            (stats_only && (val->kind != MGE_VAL_STATE || mge_value_is_opt_state(val))))
            continue;
        if ((s = t->comm->bcast(t->comm, val->data->data, val->data->nbytes, root, err)))
            break;
        mge_exec_mark_changed(t->train, v);
    }
    return s;
}

mge_status mge_trainer_bcast(mge_trainer *t, int root, mge_error *err)
{
    return bcast(t, root, 0, err);
}

mge_status mge_trainer_bcast_stats(mge_trainer *t, int root, mge_error *err)
{
    return t->nscan_stats ? bcast(t, root, 1, err) : MGE_OK;
}

mge_status mge_trainer_hash(mge_trainer *t, uint64_t *h, mge_error *err)
{
    mge_status s = mge_exec_sync_params(t->train, err);
    if (s)
        return s;
    uint64_t x = 0xcbf29ce484222325ull;
    for (int v = 0; v < t->g->nvalues; v++) {
        const mge_value *val = &t->g->values[v];
        if (!is_kept(val))
            continue;
        x ^= mge_hash_str(val->name);
        const unsigned char *p = val->data->data;
        for (size_t i = 0; i < val->data->nbytes; i++)
            x = (x ^ p[i]) * 0x100000001b3ull;
    }
    *h = x;
    return MGE_OK;
}

int mge_trainer_comm_stats(const mge_trainer *t, mge_comm_stats *st)
{
    return mge_dist_stats(t->dist, st);
}
