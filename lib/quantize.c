/* quantize.c — mge-quant's graph rewrite: an f32 inference graph plus the
 * calibrated range of each value becomes an int8 graph (see ops.def for the
 * ops and lib/quant_math.h for their arithmetic).
 *
 * Plan, on the input graph's values:
 *  - conv2d and linear with f32 weights (and bias) become qconv2d/qlinear;
 *    a relu or relu6 that is the only reader of their output folds into
 *    the output clamp (add likewise becomes qadd when both operands have
 *    the same shape);
 *  - maxpool2d, avgpool2d (padding not counted), global_avgpool, flatten,
 *    reshape and concat run on qs8 when their inputs already are, keeping
 *    the scale: their inputs and output form one "scale group" (union-find)
 *    whose range is the union of its members' ranges;
 *  - everything else stays f32; quantize and dequantize nodes go where an
 *    f32 value meets an int8 reader and back (one per value), and each is
 *    logged for -v.
 * Activations are asymmetric per tensor: [lo, hi] (containing 0) maps onto
 * [-128, 127] with scale (hi - lo) / 255 and the zero point that puts 0 on
 * an integer, so a ReLU output uses all 256 levels. Weights are symmetric
 * (per output channel unless per_tensor), |q| <= 127 so the AVX2 kernels
 * cannot saturate; biases are int32 at x_scale * wscale[o]. A layer whose
 * requantization multiplier x_scale * wscale / y_scale would reach 1 (a
 * near-constant output) gets its output scale raised until it is below 1. */
#include "internal.h"
#include "quant_math.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { R_F32 = 0, R_LAYER, R_ADD, R_PASS, R_FOLDED };

typedef struct qplan {
    const mge_graph *g;
    int *role;        /* per node */
    int *act;         /* per layer/add node: the folded act node, or -1 */
    int *qout;        /* per node: the value holding its (quantized) result in g's terms */
    int *uses;        /* per value */
    int *reader;      /* per value: the first node that reads it, or -1 (plan); reused by the rewrite */
    int *parent;      /* per value: union-find of scale groups */
    char *isq;        /* per value: quantized (qs8) in the result */
    double *glo, *ghi;/* per value (group roots): range */
    double *gscale;   /* per value (group roots) */
    int *gzero;
} qplan;

static int find(int *p, int v)
{
    while (p[v] != v) {
        p[v] = p[p[v]];
        v = p[v];
    }
    return v;
}

static void unite(int *p, int a, int b)
{
    a = find(p, a);
    b = find(p, b);
    if (a != b)
        p[b] = a;
}

static int has_data_f32(const mge_graph *g, int v)
{
    const mge_value *x = &g->values[v];
    return x->kind != MGE_VAL_NODE && x->kind != MGE_VAL_INPUT && x->data && x->data->dtype == MGE_F32 &&
           x->dtype == MGE_F32;
}

static int skipped(const mge_quant_opts *o, const char *name)
{
    for (int i = 0; o && i < o->nskip; i++)
        if (strcmp(o->skip[i], name) == 0)
            return 1;
    return 0;
}

/* [lo, hi] widened to contain 0 -> scale and zero point; a range of width
 * 0 (a constant-zero tensor) gets scale 1, zero 0. The scale is rounded to
 * f32 (the kernels use it as f32) so the text and .mge forms are exact. */
static void range_params(double lo, double hi, double *scale, int *zero)
{
    lo = lo < 0 ? lo : 0;
    hi = hi > 0 ? hi : 0;
    double s = (hi - lo) / 255.0;
    if (!(s > 1e-30) || !isfinite(s)) {
        *scale = 1;
        *zero = 0;
        return;
    }
    s = (double)(float)s;
    double z = nearbyint(-128.0 - lo / s);
    *scale = s;
    *zero = (int)(z < -128 ? -128 : z > 127 ? 127 : z);
}

static int single_act_reader(const qplan *P, int v)
{
    if (P->uses[v] != 1 || mge_pass_is_root(P->g, v))
        return -1;
    int i = P->reader[v];
    if (i < 0)
        return -1;
    int op = P->g->nodes[i].op;
    return op == MGE_OP_RELU || op == MGE_OP_RELU6 ? i : -1;
}

static int observed(const double *lo, const double *hi, int v)
{
    return !isnan(lo[v]) && !isnan(hi[v]);
}

/* Roles, folded acts and scale groups. */
static mge_status plan(qplan *P, const double *lo, const double *hi, const mge_quant_opts *o, mge_quant_result *r,
                       mge_error *err)
{
    const mge_graph *g = P->g;
    for (int v = 0; v < g->nvalues; v++)
        P->parent[v] = v;
    for (int i = 0; i < g->nnodes; i++) {
        const mge_node *n = &g->nodes[i];
        P->act[i] = -1;
        P->qout[i] = n->nout ? n->out[0] : -1;
        if (P->role[i] == R_FOLDED)
            continue;
        if (skipped(o, n->name)) {
            if (r)
                mge_buf_printf(&r->log, "%s: %s stays f32 (--skip)\n", n->name, mge_op_info(n->op)->name);
            continue;
        }
        int y = n->nout == 1 ? n->out[0] : -1;
        if (y < 0 || g->values[y].dtype != MGE_F32)
            continue;
        int role = R_F32;
        switch (n->op) {
        case MGE_OP_CONV2D:
        case MGE_OP_LINEAR:
            if (g->values[n->in[0]].dtype == MGE_F32 && has_data_f32(g, n->in[1]) &&
                (n->nin < 3 || has_data_f32(g, n->in[2])) &&
                (n->op == MGE_OP_LINEAR || g->values[n->in[0]].ndim == 4))
                role = R_LAYER;
            break;
        case MGE_OP_ADD: {
            const mge_value *a = &g->values[n->in[0]], *b = &g->values[n->in[1]];
            if (a->kind == MGE_VAL_NODE && b->kind == MGE_VAL_NODE && a->dtype == MGE_F32 && b->dtype == MGE_F32 &&
                a->ndim == b->ndim && !memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->ndim))
                role = R_ADD;
            break;
        }
        case MGE_OP_AVGPOOL2D:
            if (mge_node_int(n, MGE_KEY_count_include_pad, 1) && (mge_node_ints(n, MGE_KEY_pad, 0, 0) ||
                                                                   mge_node_ints(n, MGE_KEY_pad, 1, 0)))
                break;
            /* fall through */
        case MGE_OP_MAXPOOL2D:
        case MGE_OP_GLOBAL_AVGPOOL:
        case MGE_OP_FLATTEN:
        case MGE_OP_RESHAPE:
            if (P->isq[n->in[0]])
                role = R_PASS;
            break;
        case MGE_OP_CONCAT: {
            int all = 1;
            for (int k = 0; k < n->nin; k++)
                all &= P->isq[n->in[k]];
            if (all)
                role = R_PASS;
            break;
        }
        default: break;
        }
        if (role == R_LAYER || role == R_ADD) {
            int a = single_act_reader(P, y);
            /* the int8 node takes the act's name, so skipping that name keeps the layer f32 too */
            if (a >= 0 && skipped(o, g->nodes[a].name)) {
                if (r)
                    mge_buf_printf(&r->log, "%s: %s stays f32 (--skip %s)\n", n->name, mge_op_info(n->op)->name,
                                   g->nodes[a].name);
                continue;
            }
            if (a >= 0 && g->nodes[a].nout == 1) {
                P->act[i] = a;
                P->role[a] = R_FOLDED;
                y = g->nodes[a].out[0];
                P->qout[i] = y;
            }
        }
        /* every value it reads and writes must have been observed */
        if (role != R_F32) {
            int ok = observed(lo, hi, y);
            for (int k = 0; ok && k < (role == R_LAYER ? 1 : n->nin); k++)
                ok = observed(lo, hi, n->in[k]);
            if (!ok) {
                if (P->act[i] >= 0)
                    P->role[P->act[i]] = R_F32;
                P->act[i] = -1;
                P->qout[i] = n->out[0];
                if (r)
                    mge_buf_printf(&r->log, "%s: %s stays f32 (no calibration range)\n", n->name,
                                   mge_op_info(n->op)->name);
                role = R_F32;
            }
        }
        P->role[i] = role;
        if (role == R_F32)
            continue;
        P->isq[y] = 1;
        if (role == R_PASS)
            for (int k = 0; k < n->nin; k++)
                unite(P->parent, n->in[k], y);
    }
    /* group ranges, then parameters */
    for (int v = 0; v < g->nvalues; v++) {
        P->glo[v] = 0;
        P->ghi[v] = 0;
    }
    for (int v = 0; v < g->nvalues; v++) {
        if (!observed(lo, hi, v))
            continue;
        int rt = find(P->parent, v);
        if (lo[v] < P->glo[rt])
            P->glo[rt] = lo[v];
        if (hi[v] > P->ghi[rt])
            P->ghi[rt] = hi[v];
    }
    for (int v = 0; v < g->nvalues; v++)
        if (find(P->parent, v) == v)
            range_params(P->glo[v], P->ghi[v], &P->gscale[v], &P->gzero[v]);
    (void)err;
    return MGE_OK;
}

static double vscale(qplan *P, int v)
{
    return P->gscale[find(P->parent, v)];
}

static int vzero(qplan *P, int v)
{
    return P->gzero[find(P->parent, v)];
}

/* Symmetric weight scales: max |w| / 127 per output channel (axis 0), or
 * the tensor's for all; ws gets O entries either way. An all-zero channel
 * (its q are 0 whatever the scale) takes the tensor's scale, so it cannot
 * raise the largest scale, which bounds the output scale (fix_multipliers);
 * an all-zero tensor takes 1/127. Returns the largest scale. */
static float weight_scales(const mge_tensor *w, int per_tensor, float *ws, int64_t O)
{
    const float *d = w->data;
    int64_t K = mge_tensor_numel(w) / O;
    double all = 0;
    for (int64_t o = 0; o < O; o++) {
        double m = 0;
        for (int64_t k = 0; k < K; k++) {
            double a = fabs((double)d[o * K + k]);
            if (a > m)
                m = a;
        }
        ws[o] = (float)(m / 127.0);
        if (m > all)
            all = m;
    }
    float top = (float)((all > 0 ? all : 1.0) / 127.0);
    for (int64_t o = 0; o < O; o++)
        if (per_tensor || !(ws[o] > 0))
            ws[o] = top;
    return top;
}

/* Raises output scales until every layer's multiplier is below 1. Groups
 * only grow, so this ends; a few rounds settle chains through concat. */
static void fix_multipliers(qplan *P, const mge_quant_opts *o)
{
    const mge_graph *g = P->g;
    /* each layer's largest weight scale, once */
    double *wmax = calloc((size_t)g->nnodes + 1, sizeof(double));
    if (!wmax)
        return;
    for (int i = 0; i < g->nnodes; i++) {
        if (P->role[i] != R_LAYER)
            continue;
        const mge_tensor *w = g->values[g->nodes[i].in[1]].data;
        float *ws = malloc(sizeof(float) * (size_t)w->dims[0]);
        if (!ws) {
            free(wmax);
            return;
        }
        wmax[i] = weight_scales(w, o && o->per_tensor, ws, w->dims[0]);
        free(ws);
    }
    for (int round = 0; round < 64; round++) {
        int changed = 0;
        for (int i = 0; i < g->nnodes; i++) {
            if (P->role[i] != R_LAYER && P->role[i] != R_ADD)
                continue;
            const mge_node *n = &g->nodes[i];
            double need = P->role[i] == R_LAYER ? vscale(P, n->in[0]) * wmax[i]
                                                : fmax(vscale(P, n->in[0]), vscale(P, n->in[1])) / 4194000.0;
            int rt = find(P->parent, P->qout[i]);
            if (P->gscale[rt] <= need * 1.00001) {
                /* same zero point, larger scale: the covered range grows
                 * around the same integer 0, so it still holds the old one */
                P->gscale[rt] = (double)nextafterf((float)(need * 1.0001), INFINITY);
                changed = 1;
            }
        }
        if (!changed)
            break;
    }
    free(wmax);
}

/* ---------------------------------------------------------------- building */

typedef struct qbuild {
    qplan *P;
    mge_graph *g;     /* the clone being rebuilt (values of the old graph) */
    mge_graph *c;
    int *remap;       /* old value -> its kept value in c (f32 values, quantized ones keep names) */
    int *qv, *fv;     /* old value -> qs8 / f32 version in c, or -1 */
    mge_quant_result *r;
    int int8_outputs;
} qbuild;

static mge_attr fattr(int key, double f)
{
    mge_attr a = {.key = key, .n = 1};
    a.f = f;
    return a;
}

static mge_attr iattr(int key, int64_t i)
{
    mge_attr a = {.key = key, .n = 1};
    a.i[0] = i;
    return a;
}

static mge_status add_node(qbuild *B, const char *name, int op, int nin, const int *in, int out, int nat,
                           const mge_attr *at, mge_error *err)
{
    mge_attr full[16];
    int nfull = 0;
    mge_status s = mge_attrs_complete(op, nat, at, full, &nfull, err);
    if (s)
        return s;
    return mge_pass_rb_node(B->c, name, op, nin, in, 1, &out, nfull, full, err);
}

/* The qs8 version of old value v (quantizing an f32 value once). */
static mge_status need_q(qbuild *B, int v, int *out, mge_error *err)
{
    if (B->qv[v] >= 0) {
        *out = B->qv[v];
        return MGE_OK;
    }
    const mge_value *x = &B->g->values[v];
    int idx;
    mge_status s = mge_pass_rb_new_value(B->g, B->c, x->name, ".q", MGE_VAL_NODE, MGE_QS8, x->ndim, x->dims, &idx,
                                         err);
    if (s)
        return s;
    double sc = vscale(B->P, v);
    int z = vzero(B->P, v);
    mge_attr at[2] = {fattr(MGE_KEY_scale, sc), iattr(MGE_KEY_zero, z)};
    int in = B->fv[v];
    if ((s = add_node(B, B->c->values[idx].name, MGE_OP_QUANTIZE, 1, &in, idx, 2, at, err)))
        return s;
    if (B->r) {
        char b[64];
        snprintf(b, sizeof b, "%.6g, zero %d", sc, z);
        mge_buf_printf(&B->r->log, "quantize %s -> %s (scale %s)\n", x->name, B->c->values[idx].name, b);
    }
    B->qv[v] = idx;
    *out = idx;
    return MGE_OK;
}

/* The f32 version of old value v (dequantizing once). */
static mge_status need_f(qbuild *B, int v, int *out, mge_error *err)
{
    if (B->fv[v] >= 0) {
        *out = B->fv[v];
        return MGE_OK;
    }
    const mge_value *x = &B->g->values[v];
    int idx = B->remap[v];
    mge_status s = MGE_OK;
    /* a model output keeps its name for the f32 value (its qs8 one is NAME.q) */
    if (!(mge_pass_is_root(B->g, v) && !B->int8_outputs) &&
        (s = mge_pass_rb_new_value(B->g, B->c, x->name, ".dq", MGE_VAL_NODE, MGE_F32, x->ndim, x->dims, &idx, err)))
        return s;
    mge_attr at[2] = {fattr(MGE_KEY_scale, vscale(B->P, v)), iattr(MGE_KEY_zero, vzero(B->P, v))};
    int in = B->qv[v];
    if ((s = add_node(B, B->c->values[idx].name, MGE_OP_DEQUANTIZE, 1, &in, idx, 2, at, err)))
        return s;
    if (B->r)
        mge_buf_printf(&B->r->log, "dequantize %s -> %s\n", B->c->values[in].name, B->c->values[idx].name);
    B->fv[v] = idx;
    *out = idx;
    return MGE_OK;
}

/* A new qs8/qs32 const value in c holding t (taken). The old value's name
 * is reused when the old value is gone from c. */
static mge_status new_const(qbuild *B, int oldv, const char *suffix, mge_tensor *t, int *out, mge_error *err)
{
    const mge_value *x = &B->g->values[oldv];
    int idx;
    mge_status s;
    if (B->remap[oldv] < 0 && mge_graph_find(B->c, x->name) < 0) {
        idx = mge_graph_add_value(B->c, x->name, x->kind, t->dtype, t->ndim, t->dims, err);
        s = idx < 0 ? (err ? err->code : MGE_ERR_INVALID) : MGE_OK;
    } else {
        s = mge_pass_rb_new_value(B->g, B->c, x->name, suffix, x->kind, t->dtype, t->ndim, t->dims, &idx, err);
    }
    if (s) {
        mge_tensor_free(t);
        free(t);
        return s;
    }
    B->c->values[idx].data = t;
    *out = idx;
    return MGE_OK;
}

static mge_status quant_weights(qbuild *B, const mge_node *n, double xs, int *win, int *bin, float *wsmin,
                                float *wsmax, const mge_quant_opts *o, mge_error *err)
{
    const mge_tensor *w = B->g->values[n->in[1]].data;
    int64_t O = w->dims[0], K = mge_tensor_numel(w) / O;
    mge_tensor *qw = calloc(1, sizeof *qw), *qb = NULL;
    float *ws = malloc(sizeof(float) * (size_t)O);
    mge_status s = MGE_ERR_NOMEM;
    if (!qw || !ws || (s = mge_tensor_alloc(qw, MGE_QS8, w->ndim, w->dims, err))) {
        free(qw);
        free(ws);
        return s ? s : mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    }
    weight_scales(w, o && o->per_tensor, ws, O);
    const float *wd = w->data;
    int8_t *q = qw->data;
    *wsmin = INFINITY;
    *wsmax = 0;
    for (int64_t oc = 0; oc < O; oc++) {
        float inv = 1.0f / ws[oc];
        for (int64_t k = 0; k < K; k++) {
            float v = nearbyintf(wd[oc * K + k] * inv);
            q[oc * K + k] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
        }
        *wsmin = ws[oc] < *wsmin ? ws[oc] : *wsmin;
        *wsmax = ws[oc] > *wsmax ? ws[oc] : *wsmax;
    }
    int per_tensor = o && o->per_tensor;
    qw->q.axis = per_tensor ? -1 : 0;
    qw->q.nscale = per_tensor ? 1 : (int)O;
    qw->q.scale = malloc(sizeof(float) * (size_t)qw->q.nscale);
    if (!qw->q.scale) {
        mge_tensor_free(qw);
        free(qw);
        free(ws);
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    }
    memcpy(qw->q.scale, ws, sizeof(float) * (size_t)qw->q.nscale);
    if ((s = new_const(B, n->in[1], ".q", qw, win, err))) {
        free(ws);
        return s;
    }
    *bin = -1;
    if (n->nin >= 3) {
        const mge_tensor *b = B->g->values[n->in[2]].data;
        qb = calloc(1, sizeof *qb);
        if (!qb || (s = mge_tensor_alloc(qb, MGE_QS32, 1, &O, err))) {
            free(qb);
            free(ws);
            return s ? s : mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        }
        qb->q.axis = 0;
        qb->q.nscale = (int)O;
        qb->q.scale = malloc(sizeof(float) * (size_t)O);
        if (!qb->q.scale) {
            mge_tensor_free(qb);
            free(qb);
            free(ws);
            return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        }
        const float *bd = b->data;
        int32_t *bq = qb->data;
        for (int64_t oc = 0; oc < O; oc++) {
            double bs = xs * (double)ws[oc];
            double v = nearbyint((double)bd[oc] / bs);
            bq[oc] = (int32_t)(v > 2147483647.0 ? 2147483647.0 : v < -2147483647.0 ? -2147483647.0 : v);
            qb->q.scale[oc] = (float)bs;
        }
        if ((s = new_const(B, n->in[2], ".q", qb, bin, err))) {
            free(ws);
            return s;
        }
    }
    free(ws);
    return MGE_OK;
}

static mge_status add_entry(mge_quant_result *r, const char *node, int op, const char *value, int ref, double scale,
                            int zero, double wmin, double wmax)
{
    if (!r)
        return MGE_OK;
    mge_quant_entry *e;
    if ((r->n & (r->n - 1)) == 0) { /* the capacity is n rounded up to a power of two */
        e = realloc(r->e, sizeof *e * (size_t)(r->n ? 2 * r->n : 1));
        if (!e)
            return MGE_ERR_NOMEM;
        r->e = e;
    }
    e = &r->e[r->n];
    memset(e, 0, sizeof *e);
    e->node = mge_strdup(node);
    e->value = mge_strdup(value);
    if (!e->node || !e->value) {
        free(e->node);
        free(e->value);
        return MGE_ERR_NOMEM;
    }
    e->op = op;
    e->ref_value = ref;
    e->scale = scale;
    e->zero = zero;
    e->wscale_min = wmin;
    e->wscale_max = wmax;
    r->n++;
    return MGE_OK;
}

static mge_status build_node(qbuild *B, int i, const mge_quant_opts *o, mge_error *err)
{
    qplan *P = B->P;
    const mge_node *n = &B->g->nodes[i];
    int role = P->role[i];
    mge_status s;
    int in[64];
    if (role == R_FOLDED)
        return MGE_OK;
    if (role == R_F32) {
        for (int k = 0; k < n->nin && k < 64; k++) {
            int v = n->in[k];
            if (B->fv[v] < 0 && B->qv[v] >= 0 && (s = need_f(B, v, &in[k], err)))
                return s;
            in[k] = B->fv[v] >= 0 ? B->fv[v] : B->remap[v];
        }
        int out[16];
        for (int k = 0; k < n->nout && k < 16; k++) {
            out[k] = B->remap[n->out[k]];
            B->fv[n->out[k]] = out[k];
        }
        return mge_pass_rb_node(B->c, n->name, n->op, n->nin, in, n->nout, out, n->nattr, n->attrs, err);
    }
    int y = P->qout[i];
    int yq;
    /* a graph output keeps its name for the f32 result: the qs8 value is y.q */
    if (mge_pass_is_root(B->g, y) && !(o && o->int8_outputs)) {
        const mge_value *x = &B->g->values[y];
        if ((s = mge_pass_rb_new_value(B->g, B->c, x->name, ".q", MGE_VAL_NODE, MGE_QS8, x->ndim, x->dims, &yq,
                                       err)))
            return s;
    } else {
        yq = B->remap[y];
    }
    double ys = vscale(P, y);
    int yz = vzero(P, y);
    const char *name = P->act[i] >= 0 ? B->g->nodes[P->act[i]].name : n->name;
    if (yq != B->remap[y]) /* NAME.q: the node is named like its output, as the text form names it */
        name = B->c->values[yq].name;
    if (role == R_PASS) {
        for (int k = 0; k < n->nin; k++)
            in[k] = B->qv[n->in[k]];
        if ((s = mge_pass_rb_node(B->c, name, n->op, n->nin, in, 1, &yq, n->nattr, n->attrs, err)))
            return s;
        B->qv[y] = yq;
        return add_entry(B->r, name, n->op, B->c->values[yq].name, y, ys, yz, 0, 0) ? mge_error_set(err, MGE_ERR_NOMEM, "out of memory") : MGE_OK;
    }
    int64_t act = P->act[i] >= 0 ? B->g->nodes[P->act[i]].op : -1;
    mge_attr at[16];
    int nat = 0;
    mge_attr a_act = {.key = MGE_KEY_act, .n = 1};
    a_act.i[0] = act;
    float wmin = 0, wmax = 0;
    if (role == R_ADD) {
        if ((s = need_q(B, n->in[0], &in[0], err)) || (s = need_q(B, n->in[1], &in[1], err)))
            return s;
        at[nat++] = a_act;
        at[nat++] = fattr(MGE_KEY_x_scale, vscale(P, n->in[0]));
        at[nat++] = iattr(MGE_KEY_x_zero, vzero(P, n->in[0]));
        at[nat++] = fattr(MGE_KEY_x2_scale, vscale(P, n->in[1]));
        at[nat++] = iattr(MGE_KEY_x2_zero, vzero(P, n->in[1]));
        at[nat++] = fattr(MGE_KEY_y_scale, ys);
        at[nat++] = iattr(MGE_KEY_y_zero, yz);
        if ((s = add_node(B, name, MGE_OP_QADD, 2, in, yq, nat, at, err)))
            return s;
    } else {
        double xs = vscale(P, n->in[0]);
        int win, bin;
        if ((s = need_q(B, n->in[0], &in[0], err)) ||
            (s = quant_weights(B, n, xs, &win, &bin, &wmin, &wmax, o, err)))
            return s;
        in[1] = win;
        int nin = 2;
        if (bin >= 0)
            in[nin++] = bin;
        /* int8 replaces the layer's float precision */
        for (int k = 0; k < n->nattr; k++)
            if (n->attrs[k].key != MGE_KEY_precision)
                at[nat++] = n->attrs[k];
        at[nat++] = a_act;
        at[nat++] = fattr(MGE_KEY_x_scale, xs);
        at[nat++] = iattr(MGE_KEY_x_zero, vzero(P, n->in[0]));
        at[nat++] = fattr(MGE_KEY_y_scale, ys);
        at[nat++] = iattr(MGE_KEY_y_zero, yz);
        if ((s = add_node(B, name, n->op == MGE_OP_CONV2D ? MGE_OP_QCONV2D : MGE_OP_QLINEAR, nin, in, yq, nat, at,
                          err)))
            return s;
    }
    B->qv[y] = yq;
    if (add_entry(B->r, name, B->c->nodes[B->c->nnodes - 1].op, B->c->values[yq].name, y, ys, yz, wmin, wmax))
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    return MGE_OK;
}

void mge_quant_result_free(mge_quant_result *r)
{
    if (!r)
        return;
    for (int i = 0; i < r->n; i++) {
        free(r->e[i].node);
        free(r->e[i].value);
    }
    free(r->e);
    mge_buf_free(&r->log);
    memset(r, 0, sizeof *r);
}

int mge_quant_is_quantized(const mge_graph *g, const char **what)
{
    for (int i = 0; i < g->nnodes; i++) {
        int op = g->nodes[i].op;
        if (op == MGE_OP_QUANTIZE || op == MGE_OP_DEQUANTIZE || op == MGE_OP_QCONV2D || op == MGE_OP_QLINEAR ||
            op == MGE_OP_QADD) {
            if (what)
                *what = g->nodes[i].name;
            return 1;
        }
    }
    for (int v = 0; v < g->nvalues; v++)
        if (g->values[v].dtype == MGE_QS8 || g->values[v].dtype == MGE_QS32) {
            if (what)
                *what = g->values[v].name;
            return 1;
        }
    return 0;
}

mge_status mge_quant_rewrite(const mge_graph *g0, const double *lo, const double *hi, const mge_quant_opts *o,
                             mge_graph **out, mge_quant_result *res, mge_error *err)
{
    *out = NULL;
    if (res)
        memset(res, 0, sizeof *res);
    const char *what = NULL;
    if (mge_quant_is_quantized(g0, &what))
        return mge_error_set(err, MGE_ERR_INVALID, "the model is already quantized ('%s' is int8)", what);
    for (int i = 0; o && i < o->nskip; i++) {
        int found = 0;
        for (int k = 0; k < g0->nnodes && !found; k++)
            found = strcmp(g0->nodes[k].name, o->skip[i]) == 0;
        if (!found)
            return mge_error_set(err, MGE_ERR_INVALID, "--skip: no node named '%s' in the model", o->skip[i]);
    }
    mge_graph *g = mge_graph_clone(g0, err);
    if (!g)
        return err ? err->code : MGE_ERR_NOMEM;
    size_t nv = (size_t)g->nvalues + 1, nn = (size_t)g->nnodes + 1;
    qplan P = {.g = g};
    P.role = calloc(nn, sizeof(int));
    P.act = calloc(nn, sizeof(int));
    P.qout = calloc(nn, sizeof(int));
    P.uses = calloc(nv, sizeof(int));
    P.reader = malloc(nv * sizeof(int));
    P.parent = calloc(nv, sizeof(int));
    P.isq = calloc(nv, 1);
    P.glo = calloc(nv, sizeof(double));
    P.ghi = calloc(nv, sizeof(double));
    P.gscale = calloc(nv, sizeof(double));
    P.gzero = calloc(nv, sizeof(int));
    qbuild B = {.P = &P, .g = g, .r = res, .int8_outputs = o && o->int8_outputs};
    B.qv = malloc(sizeof(int) * nv);
    B.fv = malloc(sizeof(int) * nv);
    char *keep = NULL;
    mge_graph *c = NULL;
    mge_status s = MGE_ERR_NOMEM;
    if (!P.role || !P.act || !P.qout || !P.uses || !P.reader || !P.parent || !P.isq || !P.glo || !P.ghi || !P.gscale ||
        !P.gzero || !B.qv || !B.fv) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto done;
    }
    mge_pass_count_uses(g, P.uses);
    for (int v = 0; v < g->nvalues; v++)
        P.reader[v] = -1;
    for (int i = g->nnodes - 1; i >= 0; i--)
        for (int k = 0; k < g->nodes[i].nin; k++)
            P.reader[g->nodes[i].in[k]] = i;
    if ((s = plan(&P, lo, hi, o, res, err)))
        goto done;
    fix_multipliers(&P, o);
    /* which old values survive: not the outputs of folded layers (the act
     * writes the result), not weights that only quantized layers read */
    if ((s = mge_pass_rb_alloc(g, &keep, &B.remap, &c, err)))
        goto done;
    B.c = c;
    /* reads by nodes that stay f32-facing (not quantized layers), per value;
     * P.reader is reused for the count */
    for (int v = 0; v < g->nvalues; v++)
        P.reader[v] = 0;
    for (int j = 0; j < g->nnodes; j++)
        if (P.role[j] != R_LAYER)
            for (int q = 0; q < g->nodes[j].nin; q++)
                P.reader[g->nodes[j].in[q]]++;
    for (int i = 0; i < g->nnodes; i++) {
        const mge_node *n = &g->nodes[i];
        if (P.act[i] >= 0)
            keep[n->out[0]] = 0;
        if (P.role[i] != R_LAYER)
            continue;
        for (int k = 1; k < n->nin; k++) {
            int v = n->in[k];
            if (!P.reader[v] && !mge_pass_is_root(g, v))
                keep[v] = 0;
        }
    }
    if ((s = mge_pass_rb_values(g, keep, NULL, c, B.remap, err)))
        goto done;
    for (int v = 0; v < g->nvalues; v++) {
        B.qv[v] = B.fv[v] = -1;
        if (g->values[v].kind != MGE_VAL_NODE)
            B.fv[v] = B.remap[v];
    }
    for (int i = 0; i < g->nnodes; i++)
        if ((s = build_node(&B, i, o, err)))
            goto done;
    /* graph outputs written by int8 nodes: dequantize into the kept name */
    for (int i = 0; i < g->noutputs && !(o && o->int8_outputs); i++) {
        int v = g->outputs[i];
        if (B.qv[v] < 0 || B.fv[v] >= 0)
            continue;
        int in = B.qv[v];
        mge_attr at[2] = {fattr(MGE_KEY_scale, vscale(&P, v)), iattr(MGE_KEY_zero, vzero(&P, v))};
        if ((s = add_node(&B, g->values[v].name, MGE_OP_DEQUANTIZE, 1, &in, B.remap[v], 2, at, err)))
            goto done;
        if (res)
            mge_buf_printf(&res->log, "dequantize %s -> %s (model output)\n", c->values[in].name,
                           g->values[v].name);
        B.fv[v] = B.remap[v];
    }
    if ((s = mge_pass_rb_finish(g, c, B.remap, NULL, err)))
        goto done;
    g = NULL; /* freed by rb_finish */
    if ((s = mge_graph_infer(c, err)) || (s = mge_graph_validate(c, err)))
        goto done;
    {
        int changed = 0;
        if ((s = mge_passes_run_list(&c, "dce", &changed, err)))
            goto done;
    }
    *out = c;
    c = NULL;
done:
    if (g)
        mge_graph_free(g);
    mge_graph_free(c);
    free(keep);
    free(B.remap);
    free(B.qv);
    free(B.fv);
    free(P.role);
    free(P.act);
    free(P.qout);
    free(P.uses);
    free(P.reader);
    free(P.parent);
    free(P.isq);
    free(P.glo);
    free(P.ghi);
    free(P.gscale);
    free(P.gzero);
    if (s && res)
        mge_quant_result_free(res);
    return s;
}
