/* optim.c — the optimizer part of a training graph (declared in lib/mge.h).
 *
 * After the forward and gradient nodes come, in this order: the clipping
 * nodes (sumsq over groups of at most 64 gradients, a balanced tree of add
 * nodes while more than 64 partial sums remain, one clip_coef), then one
 * update node per parameter. The update nodes read every gradient and
 * write the parameters in place, so they must run after everything else
 * reads the parameters; being appended last gives that in graph order.
 * The state values (hyper, moments) are ordinary MGE_VAL_STATE values with
 * ".__opt." in their names, owned by the graph like any bound tensor. */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OPTIM_GROUP 64   /* inputs per sumsq/clip_coef node (ops.def's max_in) */

void mge_optim_defaults(mge_optim_kind kind, mge_optim_opts *o)
{
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->lr = kind == MGE_OPTIM_SGD ? 0.01 : 0.001;
    o->beta1 = 0.9;
    o->beta2 = 0.999;
    o->eps = 1e-8;
    o->weight_decay = kind == MGE_OPTIM_ADAMW ? 0.01 : 0;
}

static mge_status nonneg(const char *what, double v, mge_error *err)
{
    if (isfinite(v) && v >= 0)
        return MGE_OK;
    return mge_error_set(err, MGE_ERR_INVALID, "optimizer: %s=%g: expected a finite number >= 0", what, v);
}

mge_status mge_optim_check(const mge_optim_opts *o, mge_error *err)
{
    mge_status s;
    if (!o)
        return mge_error_set(err, MGE_ERR_INVALID, "optimizer: no options");
    if (o->kind != MGE_OPTIM_SGD && o->kind != MGE_OPTIM_ADAM && o->kind != MGE_OPTIM_ADAMW)
        return mge_error_set(err, MGE_ERR_INVALID, "optimizer: unknown kind %d (sgd, adam, adamw)", (int)o->kind);
    if ((s = nonneg("lr", o->lr, err)) || (s = nonneg("weight_decay", o->weight_decay, err)) ||
        (s = nonneg("clip_norm", o->clip_norm, err)))
        return s;
    if (o->kind == MGE_OPTIM_SGD) {
        if ((s = nonneg("momentum", o->momentum, err)))
            return s;
        if (!isfinite(o->dampening))
            return mge_error_set(err, MGE_ERR_INVALID, "optimizer: dampening=%g: expected a finite number",
                                 o->dampening);
        if (o->nesterov && (o->momentum <= 0 || o->dampening != 0))
            return mge_error_set(err, MGE_ERR_INVALID,
                                 "optimizer: nesterov momentum needs momentum > 0 and dampening = 0 (got "
                                 "momentum=%g, dampening=%g), as in PyTorch",
                                 o->momentum, o->dampening);
        return MGE_OK;
    }
    if (!(isfinite(o->beta1) && o->beta1 >= 0 && o->beta1 < 1))
        return mge_error_set(err, MGE_ERR_INVALID, "optimizer: beta1=%g: expected in [0, 1)", o->beta1);
    if (!(isfinite(o->beta2) && o->beta2 >= 0 && o->beta2 < 1))
        return mge_error_set(err, MGE_ERR_INVALID, "optimizer: beta2=%g: expected in [0, 1)", o->beta2);
    return nonneg("eps", o->eps, err);
}

/* "<prefix>.__opt.<what>" or "__opt.<what>" (prefix NULL); NULL on OOM. */
static char *state_name(const char *prefix, const char *what)
{
    size_t n = (prefix ? strlen(prefix) : 0) + strlen(what) + 16;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s%s__opt.%s", prefix ? prefix : "", prefix ? "." : "", what);
    return s;
}

/* The state value `name` shaped f32[dims]: reused when it exists and fits
 * (zeroed data added if it has none), else created with zeroed data.
 * Returns its index or -1 (err set). */
static int get_state(mge_graph *g, const char *name, int ndim, const int64_t *dims, int *created, mge_error *err)
{
    char b1[96], b2[96];
    int v = mge_graph_find(g, name);
    *created = 0;
    if (v >= 0) {
        const mge_value *val = &g->values[v];
        if (val->kind != MGE_VAL_STATE || val->dtype != MGE_F32 || val->ndim != ndim ||
            memcmp(val->dims, dims, sizeof(int64_t) * (size_t)ndim) != 0) {
            mge_error_set(err, MGE_ERR_SHAPE, "optimizer state '%s' exists as %s %s: expected state %s", name,
                          val->kind == MGE_VAL_STATE ? "state" : "a non-state value",
                          mge_shape_str(val->dtype, val->ndim, val->dims, b1, sizeof b1),
                          mge_shape_str(MGE_F32, ndim, dims, b2, sizeof b2));
            return -1;
        }
        if (val->data)
            return v;
    } else {
        v = mge_graph_add_value(g, name, MGE_VAL_STATE, MGE_F32, ndim, dims, err);
        if (v < 0)
            return -1;
        *created = 1;
    }
    mge_tensor *t = calloc(1, sizeof *t);
    if (!t) {
        mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        return -1;
    }
    if (mge_tensor_alloc(t, MGE_F32, ndim, dims, err)) {
        free(t);
        mge_error_prefix(err, "optimizer state '%s'", name);
        return -1;
    }
    g->values[v].data = t;
    return v;
}

static int add_node1(mge_graph *g, const char *name, int op, int nin, const int *in, int nattr, const mge_attr *at,
                     mge_error *err)
{
    const char *outs[1] = {name};
    int k = mge_graph_add_node(g, name, op, nin, in, nattr, at, 1, outs, err);
    return k < 0 ? -1 : g->nodes[k].out[0];
}

static mge_attr fattr(int key, double v)
{
    mge_attr a;
    memset(&a, 0, sizeof a);
    a.key = key;
    a.f = v;
    return a;
}

static mge_attr battr(int key, int v)
{
    mge_attr a;
    memset(&a, 0, sizeof a);
    a.key = key;
    a.n = 1;
    a.i[0] = v != 0;
    return a;
}

/* The clipping nodes over the gradients gv[0..ng); *coef gets the scale. */
static mge_status build_clip(mge_graph *g, double max_norm, int ng, const int *gv, int *coef, mge_error *err)
{
    int np = (ng + OPTIM_GROUP - 1) / OPTIM_GROUP;
    int *part = malloc(sizeof(int) * (size_t)(np ? np : 1));
    char name[64];
    if (!part)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    for (int k = 0; k < np; k++) {
        int cnt = ng - k * OPTIM_GROUP < OPTIM_GROUP ? ng - k * OPTIM_GROUP : OPTIM_GROUP;
        snprintf(name, sizeof name, "__opt.sumsq.%d", k);
        if ((part[k] = add_node1(g, name, MGE_OP_SUMSQ, cnt, gv + k * OPTIM_GROUP, 0, NULL, err)) < 0)
            goto fail;
    }
    /* more than 64 partial sums: add neighbours pairwise, only as many
     * pairs as it takes to come down to 64 (np - 64 add nodes in all) */
    for (int id = 0; np > OPTIM_GROUP;) {
        int pairs = np - OPTIM_GROUP < np / 2 ? np - OPTIM_GROUP : np / 2, m = 0;
        for (int k = 0; k < 2 * pairs; k += 2) {
            snprintf(name, sizeof name, "__opt.sumsq_add.%d", id++);
            int in[2] = {part[k], part[k + 1]};
            if ((part[m++] = add_node1(g, name, MGE_OP_ADD, 2, in, 0, NULL, err)) < 0)
                goto fail;
        }
        for (int k = 2 * pairs; k < np; k++)
            part[m++] = part[k];
        np = m;
    }
    mge_attr a = fattr(MGE_KEY_max_norm, max_norm);
    if ((*coef = add_node1(g, "__opt.clip_coef", MGE_OP_CLIP_COEF, np, part, 1, &a, err)) < 0)
        goto fail;
    free(part);
    return MGE_OK;
fail:
    free(part);
    return err ? err->code : MGE_ERR_INVALID;
}

/* Checks params/grads before anything is added to g. */
static mge_status check_args(const mge_graph *g, int n, const int *params, const int *grads, mge_error *err)
{
    char b1[96], b2[96];
    if (n < 0 || (n > 0 && (!params || !grads)))
        return mge_error_set(err, MGE_ERR_INVALID, "optimizer: bad parameter list");
    char *seen = calloc((size_t)(g->nvalues ? g->nvalues : 1), 1);
    if (!seen)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    mge_status s = MGE_OK;
    for (int i = 0; i < n && !s; i++) {
        int p = params[i], gr = grads[i];
        if (p < 0 || p >= g->nvalues) {
            s = mge_error_set(err, MGE_ERR_INVALID, "optimizer: parameter %d refers to no value", i);
            break;
        }
        const mge_value *pv = &g->values[p];
        if (pv->kind != MGE_VAL_PARAM)
            s = mge_error_set(err, MGE_ERR_INVALID, "optimizer: '%s' is not a trainable param", pv->name);
        else if (seen[p])
            s = mge_error_set(err, MGE_ERR_INVALID, "optimizer: param '%s' is listed twice", pv->name);
        else if (pv->dtype != MGE_F32)
            s = mge_error_set(err, MGE_ERR_UNSUPPORTED, "optimizer: param '%s' is %s: only f32 params are supported",
                              pv->name, mge_shape_str(pv->dtype, pv->ndim, pv->dims, b1, sizeof b1));
        else if (gr < -1 || gr >= g->nvalues)
            s = mge_error_set(err, MGE_ERR_INVALID, "optimizer: gradient of '%s' refers to no value", pv->name);
        else if (gr >= 0) {
            const mge_value *gv = &g->values[gr];
            if (gv->dtype != pv->dtype || gv->ndim != pv->ndim ||
                memcmp(gv->dims, pv->dims, sizeof(int64_t) * (size_t)pv->ndim) != 0)
                s = mge_error_set(err, MGE_ERR_SHAPE, "optimizer: gradient '%s' is %s: expected %s like param '%s'",
                                  gv->name, mge_shape_str(gv->dtype, gv->ndim, gv->dims, b1, sizeof b1),
                                  mge_shape_str(pv->dtype, pv->ndim, pv->dims, b2, sizeof b2), pv->name);
        }
        seen[p] = 1;
    }
    free(seen);
    return s;
}

mge_status mge_optim_build(mge_graph *g, const mge_optim_opts *o, int n, const int *params, const int *grads,
                           int *updates, int *hyper, mge_error *err)
{
    mge_status s;
    if (!g || !hyper || (n > 0 && !updates))
        return mge_error_set(err, MGE_ERR_INVALID, "optimizer: missing graph or result arrays");
    if ((s = mge_optim_check(o, err)) || (s = check_args(g, n, params, grads, err)))
        return s;
    int sgd = o->kind == MGE_OPTIM_SGD, hasmom = sgd && o->momentum != 0;
    static const int64_t two = 2;
    int created, h = get_state(g, "__opt.hyper", 1, &two, &created, err);
    if (h < 0)
        return err ? err->code : MGE_ERR_INVALID;
    if (created) {
        /* ready for a first run at the base lr; the trainer rewrites it per step */
        float *hp = g->values[h].data->data;
        hp[0] = (float)o->lr;
        hp[1] = 1;
    }
    *hyper = h;

    /* gradients that exist, for clipping */
    int ng = 0, coef = -1;
    int *gv = malloc(sizeof(int) * (size_t)(n ? n : 1));
    if (!gv)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        updates[i] = -1;
        if (grads[i] >= 0)
            gv[ng++] = grads[i];
    }
    if (o->clip_norm > 0 && ng > 0 && (s = build_clip(g, o->clip_norm, ng, gv, &coef, err))) {
        free(gv);
        return s;
    }
    free(gv);

    mge_attr at[5];
    int nat;
    if (sgd) {
        at[0] = fattr(MGE_KEY_momentum, o->momentum);
        at[1] = fattr(MGE_KEY_dampening, o->dampening);
        at[2] = battr(MGE_KEY_nesterov, o->nesterov);
        at[3] = fattr(MGE_KEY_weight_decay, o->weight_decay);
        nat = 4;
    } else {
        at[0] = fattr(MGE_KEY_beta1, o->beta1);
        at[1] = fattr(MGE_KEY_beta2, o->beta2);
        at[2] = fattr(MGE_KEY_eps, o->eps);
        at[3] = fattr(MGE_KEY_weight_decay, o->weight_decay);
        at[4] = battr(MGE_KEY_decoupled, o->kind == MGE_OPTIM_ADAMW);
        nat = 5;
    }
    for (int i = 0; i < n; i++) {
        if (grads[i] < 0)
            continue;
        int p = params[i];
        /* copy what we need: adding values may move g->values */
        int ndim = g->values[p].ndim;
        int64_t dims[MGE_MAX_DIMS];
        memcpy(dims, g->values[p].dims, sizeof dims);
        char *pname = mge_strdup(g->values[p].name);
        char *n1 = NULL, *n2 = NULL, *nn = NULL;
        int in[6], nin = 0, v1 = p, v2 = -1;
        if (!pname)
            return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        if (sgd) {
            n1 = state_name(pname, "momentum_buffer");
            nn = state_name(pname, "sgd");
        } else {
            n1 = state_name(pname, "exp_avg");
            n2 = state_name(pname, "exp_avg_sq");
            nn = state_name(pname, "adam");
        }
        s = !n1 || !nn || (!sgd && !n2) ? mge_error_set(err, MGE_ERR_NOMEM, "out of memory") : MGE_OK;
        /* plain SGD reads no buffer: the param stands in for it */
        if (!s && (hasmom || !sgd) && (v1 = get_state(g, n1, ndim, dims, &created, err)) < 0)
            s = err ? err->code : MGE_ERR_INVALID;
        if (!s && !sgd && (v2 = get_state(g, n2, ndim, dims, &created, err)) < 0)
            s = err ? err->code : MGE_ERR_INVALID;
        if (!s) {
            in[nin++] = p;
            in[nin++] = grads[i];
            in[nin++] = v1;
            if (!sgd)
                in[nin++] = v2;
            in[nin++] = h;
            if (coef >= 0)
                in[nin++] = coef;
            if ((updates[i] = add_node1(g, nn, sgd ? MGE_OP_SGD : MGE_OP_ADAM, nin, in, nat, at, err)) < 0)
                s = err ? err->code : MGE_ERR_INVALID;
        }
        free(pname);
        free(n1);
        free(n2);
        free(nn);
        if (s)
            return s;
    }
    return MGE_OK;
}

mge_status mge_optim_set_hyper(mge_graph *g, int hyper, double lr, int64_t step, mge_error *err)
{
    if (!g || hyper < 0 || hyper >= g->nvalues)
        return mge_error_set(err, MGE_ERR_INVALID, "optimizer: hyper refers to no value");
    const mge_value *v = &g->values[hyper];
    const mge_tensor *t = v->data;
    if (v->kind != MGE_VAL_STATE || !t || !t->data || t->dtype != MGE_F32 || t->ndim != 1 || t->dims[0] != 2)
        return mge_error_set(err, MGE_ERR_INVALID, "optimizer: '%s' is not an f32[2] hyper state with data", v->name);
    if (!(isfinite(lr) && lr >= 0))
        return mge_error_set(err, MGE_ERR_INVALID, "optimizer: lr=%g: expected a finite number >= 0", lr);
    if (step < 1 || step > ((int64_t)1 << 24))
        return mge_error_set(err, MGE_ERR_INVALID, "optimizer: step %lld: expected 1 to 16777216 (exact as f32)",
                             (long long)step);
    float *h = t->data;
    h[0] = (float)lr;
    h[1] = (float)step;
    return MGE_OK;
}
