/* pass_unfuse.c — undo what fuse-activation, fuse-elemwise, winograd and
 * layout write, back to a plain NCHW graph of ordinary ops, so every
 * intermediate tensor is a named value again (mge-quant calibrates on
 * them, and -O2 output is what users hand it).
 *
 *   fused_conv2d / fused_linear / conv2d_winograd / conv2d_nchwc /
 *   conv2d_winograd_nchwc
 *       -> conv2d or linear [-> add(., residual)] [-> act (leaky_relu: alpha)]
 *   fused_elemwise(x, a1, ...) ops=[...] -> the chain of plain ops in order,
 *       the chain value as the first operand of each binary op
 *   winograd_weight(w) feeding conv2d_winograd, winograd_weight_nchwc(w)
 *       feeding conv2d_winograd_nchwc -> w itself (kernel 3, stride 1)
 *   conv2d_nchwc's packed weight -> [O, C/groups, kh, kw] f32, padded lanes
 *       dropped (the inverse of pack_weight in pass_layout.c)
 *   maxpool2d_nchwc -> maxpool2d; elementwise ops on blocked tensors run on
 *       the plain ones; to_nchwc, from_nchwc and the stem's reshape to
 *       [N,C,H,W,1] go (their readers read the plain tensor)
 *
 * The last op of an expansion writes the fused node's output value and takes
 * its name; new intermediates are <output>.conv, <output>.add, <output>.e<k>
 * (numbered when taken); a blocked value that nothing reads plain becomes
 * its name without ".nchwc" (the name layout took it from). Unpacked weights
 * are <node>.weight. Everything is checked before the graph is rebuilt: a
 * construct this pass cannot undo (a conv2d_winograd whose weight is not made
 * by winograd_weight, a blocked value read by an op it does not know) fails
 * with MGE_ERR_UNSUPPORTED and *g unchanged. A graph without these ops is
 * left untouched, *changed = 0. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* blk[v]: how an old value is laid out */
enum { PLAIN = 0, BLOCKED = 1, STEM = 2 /* plain x viewed as [N,C,H,W,1] */ };

typedef struct unf {
    const mge_graph *g;
    mge_graph *c;
    int *remap;         /* old value -> c value (rb_values) */
    int *cv;            /* old value -> the plain c value that stands for it */
    char *blk;
    int64_t *chan;      /* blocked value: its plain channel count */
    int *pre;           /* blocked value: the from_nchwc output that names it, or -1 */
    int *wnew;          /* unpacked weights: value in c, and tensors */
    mge_tensor **wdata;
    int nw;
} unf;

static int target_op(int op)
{
    switch (op) {
    case MGE_OP_FUSED_CONV2D:
    case MGE_OP_FUSED_LINEAR:
    case MGE_OP_FUSED_ELEMWISE:
    case MGE_OP_CONV2D_WINOGRAD:
    case MGE_OP_CONV2D_WINOGRAD_NCHWC:
    case MGE_OP_TO_NCHWC:
    case MGE_OP_FROM_NCHWC:
    case MGE_OP_CONV2D_NCHWC:
    case MGE_OP_MAXPOOL2D_NCHWC: return 1;
    }
    return 0;
}

/* The ops layout lets run on blocked tensors (zero lanes stay zero). */
static int blocked_elem_op(int64_t op)
{
    return op == MGE_OP_FUSED_ELEMWISE || mge_layout_zero_op(op);
}

static const char *node_name(const mge_graph *g, const mge_node *n)
{
    return n->name ? n->name : g->values[n->out[0]].name;
}

/* A reshape of a 4-D value to [N,C,H,W,1] read only as conv2d_nchwc's x:
 * the stem view layout makes (plain1_of). */
static int stem_view(const mge_graph *g, int i)
{
    const mge_node *n = &g->nodes[i];
    if (n->op != MGE_OP_RESHAPE || n->nin != 1 || n->nout != 1)
        return 0;
    const mge_value *x = &g->values[n->in[0]], *y = &g->values[n->out[0]];
    if (x->ndim != 4 || y->ndim != 5 || y->dims[4] != 1 || memcmp(x->dims, y->dims, sizeof(int64_t) * 4) != 0 ||
        mge_pass_is_root(g, n->out[0]))
        return 0;
    int readers = 0;
    for (int j = i + 1; j < g->nnodes; j++)
        for (int k = 0; k < g->nodes[j].nin; k++)
            if (g->nodes[j].in[k] == n->out[0]) {
                if (g->nodes[j].op != MGE_OP_CONV2D_NCHWC || k != 0)
                    return 0;
                readers++;
            }
    return readers > 0;
}

static mge_status cannot(const mge_graph *g, const mge_node *n, const char *why, mge_error *err)
{
    return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s (%s): %s", node_name(g, n), mge_op_info(n->op)->name,
                         why);
}

/* Walks g in order: which values are blocked, their plain channel counts,
 * and every check, so a failure leaves the graph as it was. */
static mge_status analyse(unf *u, mge_error *err)
{
    const mge_graph *g = u->g;
    for (int i = 0; i < g->nnodes; i++) {
        const mge_node *n = &g->nodes[i];
        int nb = 0;
        for (int k = 0; k < n->nin; k++)
            nb += u->blk[n->in[k]] != PLAIN;
        switch (n->op) {
        case MGE_OP_TO_NCHWC:
            if (nb || n->nin != 1 || n->nout != 1 || g->values[n->in[0]].ndim != 4)
                return cannot(g, n, "expected one plain 4-D input", err);
            u->blk[n->out[0]] = BLOCKED;
            u->chan[n->out[0]] = g->values[n->in[0]].dims[1];
            continue;
        case MGE_OP_FROM_NCHWC: {
            int b = n->in[0];
            if (n->nin != 1 || n->nout != 1 || u->blk[b] != BLOCKED)
                return cannot(g, n, "its input is not a blocked tensor", err);
            if (mge_node_int(n, MGE_KEY_channels, -1) != u->chan[b])
                return cannot(g, n, "channels disagree with the blocked tensor's", err);
            if (u->pre[b] < 0)
                u->pre[b] = n->out[0];
            else if (mge_pass_is_root(g, n->out[0]))
                return cannot(g, n, "a second plain copy that is a graph output", err);
            continue;
        }
        case MGE_OP_CONV2D_NCHWC: {
            int bias = (int)mge_node_int(n, MGE_KEY_bias, 1), res = (int)mge_node_int(n, MGE_KEY_residual, 0);
            if (n->nout != 1 || n->nin != 2 + bias + res || u->blk[n->in[0]] == PLAIN ||
                (res && u->blk[n->in[2 + bias]] != BLOCKED) || u->blk[n->in[1]] || (bias && u->blk[n->in[2]]))
                return cannot(g, n, "inputs are not the blocked x [, bias] [, residual] layout writes", err);
            const mge_value *w = &g->values[n->in[1]];
            if (!w->data || !w->data->data || w->dtype != MGE_F32 || w->data->dtype != MGE_F32)
                return cannot(g, n, "the packed weight has no f32 data (f16-weights of -O3? unfuse takes -O2 output)", err);
            u->blk[n->out[0]] = BLOCKED;
            u->chan[n->out[0]] = mge_node_int(n, MGE_KEY_out, -1);
            continue;
        }
        case MGE_OP_MAXPOOL2D_NCHWC:
            if (n->nin != 1 || n->nout != 1 || u->blk[n->in[0]] != BLOCKED)
                return cannot(g, n, "its input is not a blocked tensor", err);
            u->blk[n->out[0]] = BLOCKED;
            u->chan[n->out[0]] = u->chan[n->in[0]];
            continue;
        case MGE_OP_RESHAPE:
            if (!nb && stem_view(g, i)) {
                u->blk[n->out[0]] = STEM;
                u->chan[n->out[0]] = g->values[n->in[0]].dims[1];
                continue;
            }
            break;
        case MGE_OP_CONV2D_WINOGRAD_NCHWC: {
            int bias = (int)mge_node_int(n, MGE_KEY_bias, 1), res = (int)mge_node_int(n, MGE_KEY_residual, 0);
            if (n->nout != 1 || n->nin != 2 + bias + res || u->blk[n->in[0]] != BLOCKED ||
                (res && u->blk[n->in[2 + bias]] != BLOCKED) || u->blk[n->in[1]] || (bias && u->blk[n->in[2]]))
                return cannot(g, n, "inputs are not the blocked x [, bias] [, residual] layout writes", err);
            const mge_value *v = &g->values[n->in[1]];
            if (v->kind != MGE_VAL_NODE || v->producer < 0 ||
                g->nodes[v->producer].op != MGE_OP_WINOGRAD_WEIGHT_NCHWC)
                return cannot(g, n,
                              "weight_t is not made by a winograd_weight_nchwc node (a pre-transformed weight); "
                              "the 3x3 weight cannot be recovered",
                              err);
            u->blk[n->out[0]] = BLOCKED;
            u->chan[n->out[0]] = mge_node_int(n, MGE_KEY_out, -1);
            continue;
        }
        case MGE_OP_CONV2D_WINOGRAD: {
            int wt = n->nin >= 2 ? n->in[1] : -1;
            const mge_value *v = wt >= 0 ? &g->values[wt] : NULL;
            if (!v || v->kind != MGE_VAL_NODE || v->producer < 0 ||
                g->nodes[v->producer].op != MGE_OP_WINOGRAD_WEIGHT)
                return cannot(g, n,
                              "weight_t is not made by a winograd_weight node (a pre-transformed weight); "
                              "the 3x3 weight cannot be recovered",
                              err);
            break;
        }
        }
        if (!nb)
            continue;
        /* an elementwise op layout ran on blocked tensors */
        if (!blocked_elem_op(n->op) || n->nout != 1 || nb != n->nin)
            return cannot(g, n, "reads a blocked (NCHWc) tensor in a way unfuse cannot undo", err);
        for (int k = 0; k < n->nin; k++)
            if (u->blk[n->in[k]] != BLOCKED || u->chan[n->in[k]] != u->chan[n->in[0]])
                return cannot(g, n, "operands are not blocked tensors of one shape", err);
        u->blk[n->out[0]] = BLOCKED;
        u->chan[n->out[0]] = u->chan[n->in[0]];
    }
    for (int i = 0; i < g->noutputs; i++)
        if (u->blk[g->outputs[i]])
            return mge_error_set(err, MGE_ERR_UNSUPPORTED, "graph output '%s' is a blocked tensor",
                                 g->values[g->outputs[i]].name);
    return MGE_OK;
}

/* A new f32 value of c named <base><suffix> (numbered when taken). */
static mge_status new_value(unf *u, const char *base, const char *suffix, mge_valkind kind, int ndim,
                            const int64_t *dims, int *idx, mge_error *err)
{
    return mge_pass_rb_new_value(u->g, u->c, base, suffix, kind, MGE_F32, ndim, dims, idx, err);
}

/* The plain c value for the output of node n (old value y, maybe blocked). */
static mge_status plain_out(unf *u, int y, mge_error *err)
{
    const mge_value *v = &u->g->values[y];
    if (u->blk[y] == PLAIN) {
        u->cv[y] = u->remap[y];
        return MGE_OK;
    }
    if (u->pre[y] >= 0) {
        u->cv[y] = u->remap[u->pre[y]];
        return MGE_OK;
    }
    /* nobody read it plain: the name layout derived ".nchwc" from */
    char base[512];
    snprintf(base, sizeof base, "%s", v->name);
    size_t len = strlen(base), sl = strlen(".nchwc");
    if (len > sl && strcmp(base + len - sl, ".nchwc") == 0)
        base[len - sl] = 0;
    int64_t d[4] = {v->dims[0], u->chan[y], v->dims[2], v->dims[3]};
    return new_value(u, base, "", MGE_VAL_NODE, 4, d, &u->cv[y], err);
}

static mge_status emit(unf *u, const char *name, int op, int nin, const int *in, int out, int nattr,
                       const mge_attr *attrs, mge_error *err)
{
    mge_attr full[32];
    int nfull = 0;
    mge_status s = mge_attrs_complete(op, nattr, attrs, full, &nfull, err);
    if (s)
        return s;
    return mge_pass_rb_node(u->c, name, op, nin, in, 1, &out, nfull, full, err);
}

/* One elementwise op; alpha only for the ops that have one (leaky_relu, elu). */
static mge_status emit_elem(unf *u, const char *name, int op, int nin, const int *in, int out, double alpha,
                            mge_error *err)
{
    mge_attr a;
    memset(&a, 0, sizeof a);
    a.key = MGE_KEY_alpha;
    a.n = 1;
    a.f = alpha;
    return emit(u, name, op, nin, in, out, !mge_op_alpha_only(op) ? 0 : mge_op_info(op)->schema[0] != 0, &a, err);
}

/* layer(x, w[, b]) [+ r] [-> act], the last step writing y (a c value) and
 * named `name`. lattr: the layer's attributes (bias is set here). */
static mge_status emit_layer(unf *u, const char *name, int lop, mge_attr *lattr, int nl, int x, int w, int b, int r,
                             int64_t act, double alpha, int y, mge_error *err)
{
    mge_status s;
    const mge_value *yv = &u->c->values[y];
    int64_t dims[MGE_MAX_DIMS];
    int ndim = yv->ndim;
    memcpy(dims, yv->dims, sizeof dims);
    char ybase[512];
    snprintf(ybase, sizeof ybase, "%s", yv->name); /* c->values may move as values are added */
    int bias_set = 0;
    for (int k = 0; k < nl; k++)
        if (lattr[k].key == MGE_KEY_bias) {
            lattr[k].n = 1;
            lattr[k].i[0] = b >= 0;
            bias_set = 1;
        }
    if (!bias_set) {
        memset(&lattr[nl], 0, sizeof lattr[nl]);
        lattr[nl].key = MGE_KEY_bias;
        lattr[nl].n = 1;
        lattr[nl++].i[0] = b >= 0;
    }
    int in[3] = {x, w, b};
    int t = y;
    if (r >= 0 || act >= 0) {
        if ((s = new_value(u, ybase, lop == MGE_OP_CONV2D ? ".conv" : ".linear", MGE_VAL_NODE, ndim, dims, &t, err)))
            return s;
    }
    if ((s = emit(u, t == y ? name : u->c->values[t].name, lop, b >= 0 ? 3 : 2, in, t, nl, lattr, err)))
        return s;
    if (r >= 0) {
        int a = y;
        if (act >= 0 && (s = new_value(u, ybase, ".add", MGE_VAL_NODE, ndim, dims, &a, err)))
            return s;
        int ain[2] = {t, r};
        if ((s = emit_elem(u, a == y ? name : u->c->values[a].name, MGE_OP_ADD, 2, ain, a, 0, err)))
            return s;
        t = a;
    }
    if (act >= 0 && (s = emit_elem(u, name, (int)act, 1, &t, y, alpha, err)))
        return s;
    return MGE_OK;
}

/* fused_conv2d, fused_linear, conv2d_winograd: the inputs after x and the
 * weight are [bias][residual] by the attributes. */
static mge_status unfuse_layer(unf *u, const mge_node *n, mge_error *err)
{
    const mge_graph *g = u->g;
    int bias = (int)mge_node_int(n, MGE_KEY_bias, 1), res = (int)mge_node_int(n, MGE_KEY_residual, 0);
    if (n->nin != 2 + bias + res || n->nout != 1)
        return cannot(g, n, "inputs disagree with its bias and residual attributes", err);
    int lop = n->op == MGE_OP_FUSED_LINEAR ? MGE_OP_LINEAR : MGE_OP_CONV2D;
    mge_attr la[40];
    int nl = mge_grad_attrs(n, lop, la);
    int w = u->cv[n->in[1]];
    if (n->op == MGE_OP_CONV2D_WINOGRAD || n->op == MGE_OP_CONV2D_WINOGRAD_NCHWC) {
        /* weight_t = winograd_weight[_nchwc](w) (checked in analyse); x,
         * residual and output of the _nchwc op stand for plain values */
        w = u->cv[g->nodes[g->values[n->in[1]].producer].in[0]];
        memset(&la[nl], 0, sizeof la[nl]);
        la[nl].key = MGE_KEY_kernel;
        la[nl].n = 2;
        la[nl].i[0] = la[nl].i[1] = 3;
        nl++;
    }
    mge_status s = plain_out(u, n->out[0], err);
    if (s)
        return s;
    return emit_layer(u, node_name(g, n), lop, la, nl, u->cv[n->in[0]], w, bias ? u->cv[n->in[2]] : -1,
                      res ? u->cv[n->in[2 + bias]] : -1, mge_node_int(n, MGE_KEY_act, -1),
                      mge_node_float(n, MGE_KEY_alpha, 0.01), u->cv[n->out[0]], err);
}

/* The chain of fused_elemwise(x, a1, ...) ops=[...], its inputs already
 * plain c values in `in`. */
static mge_status unfuse_elemwise(unf *u, const mge_node *n, const int *in, int y, mge_error *err)
{
    const mge_attr *ops = mge_node_attr(n, MGE_KEY_ops);
    double alpha = mge_node_float(n, MGE_KEY_alpha, 0.01);
    if (!ops || ops->n < 1)
        return cannot(u->g, n, "no ops", err);
    int nbin = 0;
    for (int k = 0; k < ops->n; k++) {
        if (mge_fused_binary_ok(ops->i[k]))
            nbin++;
        else if (!mge_fused_unary_ok(ops->i[k]))
            return cannot(u->g, n, "an op that is neither a fusable unary nor binary op", err);
    }
    if (n->nin != 1 + nbin)
        return cannot(u->g, n, "operand count disagrees with its ops", err);
    char ybase[512];
    snprintf(ybase, sizeof ybase, "%s", u->c->values[y].name);
    int64_t dims[MGE_MAX_DIMS];
    int ndim = u->c->values[y].ndim;
    memcpy(dims, u->c->values[y].dims, sizeof dims);
    int t = in[0], extra = 1;
    mge_status s;
    for (int k = 0; k < ops->n; k++) {
        int op = (int)ops->i[k], o = y;
        char suf[16];
        snprintf(suf, sizeof suf, ".e%d", k + 1);
        /* dims are fixed by mge_graph_infer after the rebuild (broadcasts) */
        if (k + 1 < ops->n && (s = new_value(u, ybase, suf, MGE_VAL_NODE, ndim, dims, &o, err)))
            return s;
        int bin[2] = {t, mge_fused_binary_ok(op) ? in[extra++] : -1};
        const char *nm = o == y ? node_name(u->g, n) : u->c->values[o].name;
        if ((s = emit_elem(u, nm, op, mge_fused_binary_ok(op) ? 2 : 1, bin, o, alpha, err)))
            return s;
        t = o;
    }
    return MGE_OK;
}

/* The inverse of pass_layout.c's pack_weight: w [O, C/G, KH, KW] from the
 * packed [Ob, Cb, KH, KW, ci, c] (G = 1) or [Ob, KH, KW, c] (depthwise). */
static mge_status unpack_weight(const mge_graph *g, const mge_node *n, const mge_value *pw, int64_t C,
                                mge_value *tmpl, mge_tensor **out, mge_error *err)
{
    int64_t G = mge_node_int(n, MGE_KEY_groups, 1), O = mge_node_int(n, MGE_KEY_out, -1);
    int64_t KH, KW, Cb = 1, ci = 1, c, Ci;
    if (G == 1 && pw->ndim == 6) {
        KH = pw->dims[2];
        KW = pw->dims[3];
        Cb = pw->dims[1];
        ci = pw->dims[4];
        c = pw->dims[5];
        Ci = C;
        if (ci < 1 || Cb != (C + ci - 1) / ci)
            return cannot(g, n, "the packed weight's input blocks do not match x", err);
    } else if (G > 1 && G == O && G == C && pw->ndim == 4) {
        KH = pw->dims[1];
        KW = pw->dims[2];
        c = pw->dims[3];
        Ci = 1;
    } else {
        return cannot(g, n, "a packed weight layout unfuse does not know (grouped, not depthwise?)", err);
    }
    if (O < 1 || c < 1 || pw->dims[0] != (O + c - 1) / c || KH != mge_node_ints(n, MGE_KEY_kernel, 0, -1) ||
        KW != mge_node_ints(n, MGE_KEY_kernel, 1, -1) ||
        mge_tensor_numel(pw->data) != (G == 1 ? pw->dims[0] * Cb * KH * KW * ci * c : pw->dims[0] * KH * KW * c))
        return cannot(g, n, "the packed weight's shape does not match the node", err);
    memset(tmpl, 0, sizeof *tmpl);
    int64_t d[4] = {O, Ci, KH, KW};
    tmpl->ndim = 4;
    memcpy(tmpl->dims, d, sizeof d);
    mge_status s = mge_pass_new_f32(tmpl, out, err);
    if (s)
        return s;
    const float *src = pw->data->data;
    float *dst = (*out)->data;
    for (int64_t o = 0; o < O; o++)
        for (int64_t i = 0; i < Ci; i++)
            for (int64_t kh = 0; kh < KH; kh++)
                for (int64_t kw = 0; kw < KW; kw++) {
                    int64_t at = mge_nchwc_weight_at(G, o, i, kh, kw, Cb, ci, c, KH, KW);
                    dst[((o * Ci + i) * KH + kh) * KW + kw] = src[at];
                }
    return MGE_OK;
}

static mge_status unfuse_nchwc(unf *u, const mge_node *n, mge_error *err)
{
    const mge_graph *g = u->g;
    int x = n->in[0];
    /* the stem's reshape view: C from its plain input */
    int64_t C = u->blk[x] == STEM ? g->values[g->nodes[g->values[x].producer].in[0]].dims[1] : u->chan[x];
    const mge_value *pw = &g->values[n->in[1]];
    mge_value tmpl;
    mge_tensor *t = NULL;
    mge_status s = unpack_weight(g, n, pw, C, &tmpl, &t, err);
    if (s)
        return s;
    int wv;
    if ((s = new_value(u, node_name(g, n), ".weight", pw->kind == MGE_VAL_CONST ? MGE_VAL_CONST : MGE_VAL_PARAM,
                       tmpl.ndim, tmpl.dims, &wv, err))) {
        mge_tensor_free(t);
        free(t);
        return s;
    }
    u->wnew[u->nw] = wv;
    u->wdata[u->nw++] = t;
    int bias = (int)mge_node_int(n, MGE_KEY_bias, 1), res = (int)mge_node_int(n, MGE_KEY_residual, 0);
    mge_attr la[40];
    int nl = mge_grad_attrs(n, MGE_OP_CONV2D, la);
    if ((s = plain_out(u, n->out[0], err)))
        return s;
    return emit_layer(u, node_name(g, n), MGE_OP_CONV2D, la, nl, u->cv[x], wv, bias ? u->cv[n->in[2]] : -1,
                      res ? u->cv[n->in[2 + bias]] : -1, mge_node_int(n, MGE_KEY_act, -1),
                      mge_node_float(n, MGE_KEY_alpha, 0.01), u->cv[n->out[0]], err);
}

static mge_status unfuse_node(unf *u, int i, mge_error *err)
{
    const mge_graph *g = u->g;
    const mge_node *n = &g->nodes[i];
    int nb = 0;
    for (int k = 0; k < n->nin; k++)
        nb += u->blk[n->in[k]] != PLAIN;
    switch (n->op) {
    case MGE_OP_TO_NCHWC:
    case MGE_OP_FROM_NCHWC:
        u->cv[n->out[0]] = u->cv[n->in[0]];
        return MGE_OK;
    case MGE_OP_RESHAPE:
        if (u->blk[n->out[0]] == STEM) {
            u->cv[n->out[0]] = u->cv[n->in[0]];
            return MGE_OK;
        }
        break;
    case MGE_OP_FUSED_CONV2D:
    case MGE_OP_FUSED_LINEAR:
    case MGE_OP_CONV2D_WINOGRAD:
    case MGE_OP_CONV2D_WINOGRAD_NCHWC: return unfuse_layer(u, n, err);
    case MGE_OP_CONV2D_NCHWC: return unfuse_nchwc(u, n, err);
    }
    if (n->op != MGE_OP_FUSED_ELEMWISE && n->op != MGE_OP_MAXPOOL2D_NCHWC && !nb) {
        for (int k = 0; k < n->nout; k++)
            u->cv[n->out[k]] = u->remap[n->out[k]];
        /* inputs through cv: a reader of a from_nchwc or winograd_weight output
         * that was not rewritten reads what it stands for */
        int in[64], out[8];
        if (n->nin > 64 || n->nout > 8)
            return cannot(g, n, "too many inputs or outputs", err);
        for (int k = 0; k < n->nin; k++)
            in[k] = u->cv[n->in[k]];
        for (int k = 0; k < n->nout; k++)
            out[k] = u->cv[n->out[k]];
        return mge_pass_rb_node(u->c, n->name, n->op, n->nin, in, n->nout, out, n->nattr, n->attrs, err);
    }
    /* fused_elemwise, maxpool2d_nchwc, or an elementwise op on blocked tensors */
    int in[16];
    if (n->nin > 16)
        return cannot(g, n, "too many inputs", err);
    for (int k = 0; k < n->nin; k++)
        in[k] = u->cv[n->in[k]];
    mge_status s = plain_out(u, n->out[0], err);
    if (s)
        return s;
    int y = u->cv[n->out[0]];
    if (n->op == MGE_OP_FUSED_ELEMWISE)
        return unfuse_elemwise(u, n, in, y, err);
    /* maxpool2d_nchwc has maxpool2d's attributes, in the same order */
    int op = n->op == MGE_OP_MAXPOOL2D_NCHWC ? MGE_OP_MAXPOOL2D : n->op;
    return mge_pass_rb_node(u->c, node_name(g, n), op, n->nin, in, 1, &y, n->nattr, n->attrs, err);
}

mge_status mge_pass_unfuse(mge_graph **gp, int *changed, mge_error *err)
{
    mge_graph *g = *gp;
    *changed = 0;
    int any = 0;
    for (int i = 0; i < g->nnodes && !any; i++)
        any = target_op(g->nodes[i].op);
    if (!any)
        return MGE_OK;
    size_t nv = (size_t)g->nvalues + 1, nn = (size_t)g->nnodes + 1;
    unf u = {.g = g,
             .cv = malloc(sizeof(int) * nv),
             .blk = calloc(nv, 1),
             .chan = calloc(nv, sizeof(int64_t)),
             .pre = malloc(sizeof(int) * nv),
             .wnew = malloc(sizeof(int) * nn),
             .wdata = calloc(nn, sizeof(mge_tensor *))};
    char *keep = NULL;
    mge_status s = MGE_OK;
    if (!u.cv || !u.blk || !u.chan || !u.pre || !u.wnew || !u.wdata) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t v = 0; v < nv; v++)
        u.cv[v] = u.pre[v] = -1;
    if ((s = analyse(&u, err)))
        goto done;
    if ((s = mge_pass_rb_alloc(g, &keep, &u.remap, &u.c, err)))
        goto done;
    /* blocked values go; every other value is kept and the prune below drops
     * what nothing reads any more (packed and winograd weights, ...) */
    for (int v = 0; v < g->nvalues; v++)
        keep[v] = u.blk[v] == PLAIN;
    if ((s = mge_pass_rb_values(g, keep, NULL, u.c, u.remap, err)))
        goto done;
    for (int v = 0; v < g->nvalues; v++)
        if (u.blk[v] == PLAIN)
            u.cv[v] = u.remap[v];
    for (int i = 0; i < g->nnodes && !s; i++)
        s = unfuse_node(&u, i, err);
    if (s)
        goto done;
    /* a from_nchwc output that is a graph output keeps its name: its
     * blocked input was given that value (pre) */
    for (int i = 0; i < g->noutputs; i++)
        if (u.cv[g->outputs[i]] != u.remap[g->outputs[i]]) {
            s = mge_error_set(err, MGE_ERR_UNSUPPORTED, "graph output '%s' would lose its name",
                              g->values[g->outputs[i]].name);
            goto done;
        }
    if ((s = mge_pass_rb_end(gp, &u.c, u.remap, NULL, changed, err)))
        goto done;
    /* g is gone; *gp is the plain model */
    for (int k = 0; k < u.nw; k++) {
        mge_pass_set_data(*gp, u.wnew[k], u.wdata[k]);
        u.wdata[k] = NULL;
    }
    if ((s = mge_graph_infer(*gp, err)))
        goto done;
    mge_prune_opts po = {0};
    int pruned = 0;
    s = mge_pass_prune(gp, &po, &pruned, err);
done:
    mge_graph_free(u.c);
    for (int k = 0; u.wdata && k < u.nw; k++)
        if (u.wdata[k]) {
            mge_tensor_free(u.wdata[k]);
            free(u.wdata[k]);
        }
    free(u.cv);
    free(u.blk);
    free(u.chan);
    free(u.pre);
    free(u.wnew);
    free(u.wdata);
    free(keep);
    free(u.remap);
    return s;
}
