/* pass_layout.c — convert conv-heavy regions to the blocked layout NCHWc.
 *
 * A region is a connected set of nodes that run on blocked tensors
 * [N, C/c, H, W, c] (ops.def): conv2d and fused_conv2d become conv2d_nchwc
 * with their weight packed once, here, into the layout the kernel streams
 * (NODE.weight_nchwc); elementwise ops that map zeros to zeros (relu,
 * relu6, add, ... on operands of one shape) run on blocked tensors as they
 * are, since lanes past the real channels stay zero, and maxpool2d becomes
 * maxpool2d_nchwc. to_nchwc goes in once
 * per plain value a region reads, from_nchwc once per region value that a
 * plain node, a graph output or the loss reads; graph outputs keep their
 * names and shapes. A residual add and an activation that only read a
 * converted conv go into the conv's epilogue (plan_absorb).
 *
 * c is the vector width: 16 with AVX-512, 8 with AVX2 and FMA, else the
 * pass changes nothing (see layout_block). Which convs convert is a rule
 * on shapes alone, so mge-opt's output depends on the model and the ISA
 * only:
 *   - groups=1, or depthwise (groups = in = out channels); stride 1 or 2;
 *   - in and out channels padded to c waste at most half; a dense conv
 *     on at most c/2 input channels (an image stem) reads them plain, as
 *     blocks of one channel (a reshape), and writes blocks;
 *   - a region converts only with at least two convs, so its transposes
 *     are paid back; at c = 8 only with a depthwise conv too (see
 *     layout_block).
 * At c = 16 a dense 3x3 stride-1 conv on a large plane becomes
 * conv2d_winograd_nchwc instead, its weight transformed at load time by a
 * winograd_weight_nchwc node (see wino_tile).
 * The measured gain is in the report of the change (resnet18/mobilenet_v2).
 * Graphs with a loss are left alone (the blocked ops have no gradient). */
#include "backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIN_CONVS 2

/* The block: 16 with AVX-512, 8 with AVX2 and FMA, else 0 (no change).
 * At c = 8 (measured with MGE_CPU_ISA=avx2 and OpenBLAS as Haswell, 2
 * threads, batch 1, p50) the AVX2 depthwise rows make mobilenet_v2 -O2
 * 20% faster than without layout (8.0 vs 10.0 ms), but the dense AVX2
 * tiles lose to winograd + BLAS (resnet18 33.0 vs 23.4 ms), so at c = 8
 * only regions with a depthwise conv convert (plan_round). */
static int layout_block(void)
{
    /* the cpu backend's answer (from the ISA its kernels use), so
     * MGE_CPU_ISA caps both alike */
    const mge_backend_iface *cpu = mge_backend_cpu_iface();
    return cpu->nchwc_block ? cpu->nchwc_block() : 0;
}

static int has_f32_data(const mge_value *v)
{
    return v->data && v->data->data && v->dtype == MGE_F32 && v->data->dtype == MGE_F32;
}

/* Padding C up to a multiple of c wastes at most half. */
static int channels_ok(int64_t C, int64_t c)
{
    return C > 0 && (C + c - 1) / c * c * 2 <= 3 * C;
}

static int is_plain4(const mge_value *v)
{
    return v->dtype == MGE_F32 && v->ndim == 4 && v->dims[1] > 0;
}

/* A dense conv on so few channels that it reads plain NCHW x (block 1)
 * and writes blocks: the 3-channel stem of an image network. */
static int stem_channels(int64_t C, int64_t c)
{
    return C > 0 && C * 2 <= c;
}

/* A conv2d or fused_conv2d the blocked kernel runs. */
static int conv_ok(const mge_graph *g, const mge_node *n, int64_t c)
{
    if ((n->op != MGE_OP_CONV2D && n->op != MGE_OP_FUSED_CONV2D) || n->nout != 1)
        return 0;
    const mge_value *x = &g->values[n->in[0]], *w = &g->values[n->in[1]], *y = &g->values[n->out[0]];
    int bias = (int)mge_node_int(n, MGE_KEY_bias, 1);
    int res = n->op == MGE_OP_FUSED_CONV2D ? (int)mge_node_int(n, MGE_KEY_residual, 0) : 0;
    if (n->nin != 2 + bias + res || !is_plain4(x) || !is_plain4(y) || !has_f32_data(w) || w->ndim != 4)
        return 0;
    if (bias && (!has_f32_data(&g->values[n->in[2]]) || g->values[n->in[2]].ndim != 1))
        return 0;
    if (res && !is_plain4(&g->values[n->in[2 + bias]]))
        return 0;
    int64_t C = x->dims[1], O = w->dims[0], G = mge_node_int(n, MGE_KEY_groups, 1);
    if (y->dims[1] != O || !channels_ok(O, c) || !(channels_ok(C, c) || (G == 1 && stem_channels(C, c))))
        return 0;
    if (G != 1 && !(G == C && G == O && w->dims[1] == 1))
        return 0;
    for (int i = 0; i < 2; i++) {
        int64_t s = mge_node_ints(n, MGE_KEY_stride, i, 1);
        if (s < 1 || s > 2)
            return 0;
    }
    return 1;
}

/* An elementwise op that maps zero to zero (so padded lanes stay zero):
 * what may run on blocked tensors (the LAYOUT and ZERO traits, as a
 * fused_elemwise entry could be). pass_unfuse.c undoes exactly these. */
int mge_layout_zero_op(int64_t op)
{
    unsigned need = MGE_OPF_ELEMWISE | MGE_OPF_LAYOUT | MGE_OPF_ZERO;
    return (mge_op_flags(op) & need) == need && (mge_fused_unary_ok(op) || mge_fused_binary_ok(op));
}

/* An elementwise node that maps zero lanes to zero, all operands of the
 * output's (4-D f32) shape. */
static int elem_ok(const mge_graph *g, const mge_node *n)
{
    if (n->nout != 1)
        return 0;
    if (n->op == MGE_OP_FUSED_ELEMWISE) {
        const mge_attr *ops = mge_node_attr(n, MGE_KEY_ops);
        if (!ops)
            return 0;
        for (int k = 0; k < ops->n; k++)
            if (!mge_layout_zero_op(ops->i[k]))
                return 0;
    } else if (!mge_layout_zero_op(n->op)) {
        return 0;
    }
    const mge_value *y = &g->values[n->out[0]];
    if (!is_plain4(y))
        return 0;
    for (int k = 0; k < n->nin; k++) {
        const mge_value *v = &g->values[n->in[k]];
        if (v->dtype != MGE_F32 || v->ndim != 4 || memcmp(v->dims, y->dims, sizeof(int64_t) * 4) != 0)
            return 0;
    }
    return 1;
}

/* A maxpool2d whose every window has a real position (so zero lanes stay
 * zero): no dilation or ceil_mode, pad at most half the kernel. */
static int pool_ok(const mge_graph *g, const mge_node *n)
{
    if (n->op != MGE_OP_MAXPOOL2D || n->nin != 1 || n->nout != 1 || !is_plain4(&g->values[n->in[0]]) ||
        mge_node_int(n, MGE_KEY_ceil_mode, 0))
        return 0;
    for (int i = 0; i < 2; i++) {
        int64_t k = mge_node_ints(n, MGE_KEY_kernel, i, 1), p = mge_node_ints(n, MGE_KEY_pad, i, 0);
        if (mge_node_ints(n, MGE_KEY_dilation, i, 1) != 1 || k < 1 || p < 0 || 2 * p > k)
            return 0;
    }
    return 1;
}

static int uf_find(int *p, int i)
{
    while (p[i] != i)
        i = p[i] = p[p[i]];
    return i;
}

/* The per-node plan: kind[i] 1 conv, 2 elementwise, 3 activation done by
 * its conv (plan_absorb), 0 stays plain;
 * blocked[v] for values the region makes. */
typedef struct plan {
    char *kind, *cand, *banned, *blocked;
    char *stem;    /* per conv: reads plain x as block 1 */
    int *parent, *nconv;
    int *ndw;      /* per region root: its depthwise convs */
    int need_dw;   /* only regions with a depthwise conv convert (c = 8) */
    int *absorb;   /* per conv: the activation node it takes into its epilogue, or -1 */
    int *resadd;   /* per conv: the add it takes as its residual, or -1 */
    int *owner;    /* per absorbed node: its conv */
} plan;

/* Marks nodes in order: convs that qualify and are not banned, and
 * elementwise nodes reading a blocked value. Then bans the convs of regions
 * with fewer than MIN_CONVS convs; returns how many it banned. */
static int plan_round(const mge_graph *g, plan *p)
{
    memset(p->blocked, 0, (size_t)g->nvalues);
    for (int i = 0; i < g->nnodes; i++) {
        const mge_node *n = &g->nodes[i];
        p->kind[i] = 0;
        p->parent[i] = i;
        p->nconv[i] = 0;
        p->ndw[i] = 0;
        if (p->cand[i] == 1 && !p->banned[i] && !(p->stem[i] && p->blocked[n->in[0]])) {
            p->kind[i] = 1;
        } else if (p->cand[i] == 2) {
            for (int k = 0; k < n->nin; k++)
                if (p->blocked[n->in[k]])
                    p->kind[i] = 2;
        }
        if (!p->kind[i])
            continue;
        p->blocked[n->out[0]] = 1;
        for (int k = 0; k < n->nin; k++) {
            const mge_value *v = &g->values[n->in[k]];
            if (p->blocked[n->in[k]] && v->kind == MGE_VAL_NODE) {
                int a = uf_find(p->parent, i), b = uf_find(p->parent, v->producer);
                if (a != b)
                    p->parent[a] = b;
            }
        }
    }
    for (int i = 0; i < g->nnodes; i++)
        if (p->kind[i] == 1) {
            int root = uf_find(p->parent, i);
            p->nconv[root]++;
            p->ndw[root] += mge_node_int(&g->nodes[i], MGE_KEY_groups, 1) != 1;
        }
    int banned = 0;
    for (int i = 0; i < g->nnodes; i++)
        if (p->kind[i] == 1 && (p->nconv[uf_find(p->parent, i)] < MIN_CONVS ||
                                (p->need_dw && !p->ndw[uf_find(p->parent, i)]))) {
            p->banned[i] = 1;
            banned++;
        }
    return banned;
}

/* The conv kernel's epilogue takes what the fuse-activation pass would
 * fuse, where it finds it in a region (kind 3: no node of its own):
 *   - add(y, r) with y a converted conv's output read only there becomes
 *     the conv's residual r, when r exists before the conv runs;
 *   - a unary activation read only by nobody else after such a conv (or
 *     its add) becomes the conv's act.
 * An activation or add on a blocked tensor is a pass over memory that the
 * conv does while the block is in registers. */
static void plan_absorb(const mge_graph *g, plan *p, const int *uses)
{
    for (int i = 0; i < g->nnodes; i++)
        p->absorb[i] = p->resadd[i] = p->owner[i] = -1;
    for (int i = 0; i < g->nnodes; i++) {
        const mge_node *n = &g->nodes[i];
        if (p->kind[i] != 2 || n->op == MGE_OP_FUSED_ELEMWISE)
            continue;
        if (n->op == MGE_OP_ADD && n->nin == 2) {
            for (int k = 0; k < 2; k++) {
                const mge_value *v = &g->values[n->in[k]], *o = &g->values[n->in[1 - k]];
                if (v->kind != MGE_VAL_NODE || uses[n->in[k]] != 1 || n->in[0] == n->in[1])
                    continue;
                int q = v->producer;
                if (p->kind[q] != 1 || p->absorb[q] >= 0 || p->resadd[q] >= 0 ||
                    mge_node_int(&g->nodes[q], MGE_KEY_act, -1) != -1 ||
                    mge_node_int(&g->nodes[q], MGE_KEY_residual, 0))
                    continue;
                if (o->kind == MGE_VAL_NODE && o->producer >= q)
                    continue; /* the residual must exist before the conv runs */
                p->resadd[q] = i;
                p->owner[i] = q;
                p->kind[i] = 3;
                break;
            }
            continue;
        }
        if (n->nin != 1 || !mge_fused_act_ok(n->op))
            continue;
        const mge_value *v = &g->values[n->in[0]];
        if (v->kind != MGE_VAL_NODE || uses[n->in[0]] != 1)
            continue;
        int q = v->producer;
        if (p->kind[q] == 3)
            q = p->owner[q];
        else if (p->kind[q] != 1 || p->resadd[q] >= 0)
            continue;
        if (p->absorb[q] >= 0 || mge_node_int(&g->nodes[q], MGE_KEY_act, -1) != -1)
            continue;
        p->absorb[q] = i;
        p->owner[i] = q;
        p->kind[i] = 3;
    }
}

/* A name not used in g nor c: base, else base_2, base_3, ... */
static char *fresh_name(const mge_graph *g, const mge_graph *c, const char *base)
{
    size_t n = strlen(base) + 16;
    char *s = malloc(n);
    if (!s)
        return NULL;
    snprintf(s, n, "%s", base);
    for (int k = 2; mge_graph_find(g, s) >= 0 || mge_graph_find(c, s) >= 0; k++)
        snprintf(s, n, "%s_%d", base, k);
    return s;
}

/* The packed weight (see ops.def) of a conv with weight w as a new tensor:
 * input blocks of ci lanes, output blocks of c. */
static mge_status pack_weight(const mge_value *w, int64_t G, int64_t Cb, int64_t ci, int64_t c, mge_value *tmpl,
                              mge_tensor **out, mge_error *err)
{
    int64_t O = w->dims[0], Ci = w->dims[1], KH = w->dims[2], KW = w->dims[3], Ob = (O + c - 1) / c;
    memset(tmpl, 0, sizeof *tmpl);
    if (G == 1) {
        int64_t d[6] = {Ob, Cb, KH, KW, ci, c};
        tmpl->ndim = 6;
        memcpy(tmpl->dims, d, sizeof d);
    } else {
        int64_t d[4] = {Ob, KH, KW, c};
        tmpl->ndim = 4;
        memcpy(tmpl->dims, d, sizeof d);
    }
    mge_status s = mge_pass_new_f32(tmpl, out, err);
    if (s)
        return s;
    const float *src = w->data->data;
    float *dst = (*out)->data;
    memset(dst, 0, (*out)->nbytes);
    for (int64_t o = 0; o < O; o++)
        for (int64_t i = 0; i < Ci; i++)
            for (int64_t kh = 0; kh < KH; kh++)
                for (int64_t kw = 0; kw < KW; kw++) {
                    int64_t at = mge_nchwc_weight_at(G, o, i, kh, kw, Cb, ci, c, KH, KW);
                    dst[at] = src[((o * Ci + i) * KH + kh) * KW + kw];
                }
    return MGE_OK;
}

typedef struct rebuild {
    const mge_graph *g;
    mge_graph *c;
    const plan *p;
    int64_t blk;
    int *remap;   /* old value -> plain value in c (or -1) */
    int *bval;    /* old value -> blocked value in c (or -1) */
    int *b1val;   /* old value -> its block-1 view (a reshape) in c (or -1) */
    int *wnew;    /* new packed weights: value in c, and their tensors */
    mge_tensor **wdata;
    int nw;
} rebuild;

/* A new f32 value of c named <base><suffix> (fresh_name's numbering). */
static mge_status new_value(rebuild *r, const char *base, const char *suffix, mge_valkind kind, int ndim,
                            const int64_t *dims, int *idx, mge_error *err)
{
    char full[512];
    snprintf(full, sizeof full, "%s%s", base, suffix);
    char *name = fresh_name(r->g, r->c, full);
    if (!name)
        return mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    *idx = mge_graph_add_value(r->c, name, kind, MGE_F32, ndim, dims, err);
    free(name);
    return *idx < 0 ? (err ? err->code : MGE_ERR_INVALID) : MGE_OK;
}

static mge_status add_blocked_value(rebuild *r, int v, int *out, mge_error *err)
{
    const mge_value *src = &r->g->values[v];
    int64_t d[5] = {src->dims[0], (src->dims[1] + r->blk - 1) / r->blk, src->dims[2], src->dims[3], r->blk};
    return new_value(r, src->name, ".nchwc", MGE_VAL_NODE, 5, d, out, err);
}

static mge_status attr_node(rebuild *r, const char *name, int op, int nin, const int *in, int out, int key,
                            int64_t val, mge_error *err)
{
    mge_attr a;
    memset(&a, 0, sizeof a);
    a.key = key;
    a.n = 1;
    a.i[0] = val;
    return mge_pass_rb_node(r->c, name, op, nin, in, 1, &out, 1, &a, err);
}

/* The blocked value of old value v, adding to_nchwc when it is plain. */
static mge_status blocked_of(rebuild *r, int v, int *out, mge_error *err)
{
    if (r->bval[v] < 0) {
        mge_status s = add_blocked_value(r, v, &r->bval[v], err);
        if (s)
            return s;
        int in = r->remap[v];
        if ((s = attr_node(r, r->c->values[r->bval[v]].name, MGE_OP_TO_NCHWC, 1, &in, r->bval[v], MGE_KEY_block,
                           r->blk, err)))
            return s;
    }
    *out = r->bval[v];
    return MGE_OK;
}

/* Plain value v seen as [N,C,H,W,1] (a reshape: a view, no copy). */
static mge_status plain1_of(rebuild *r, int v, int *out, mge_error *err)
{
    if (r->b1val[v] < 0) {
        const mge_value *src = &r->g->values[v];
        int64_t d[5] = {src->dims[0], src->dims[1], src->dims[2], src->dims[3], 1};
        int idx;
        mge_status s = new_value(r, src->name, ".c1", MGE_VAL_NODE, 5, d, &idx, err);
        if (s)
            return s;
        mge_attr a;
        memset(&a, 0, sizeof a);
        a.key = MGE_KEY_shape;
        a.n = 5;
        a.i[4] = 1; /* 0: the input's dim */
        int in = r->remap[v];
        s = mge_pass_rb_node(r->c, r->c->values[idx].name, MGE_OP_RESHAPE, 1, &in, 1, &idx, 1, &a, err);
        if (s)
            return s;
        r->b1val[v] = idx;
    }
    *out = r->b1val[v];
    return MGE_OK;
}

/* The Winograd tile for a converted conv, or 0 (direct conv2d_nchwc): a
 * dense 3x3, stride 1, dilation 1, pad 1 conv at c = 16 on whole blocks
 * (no padded lanes to transform) becomes conv2d_winograd_nchwc, F(4,3) on
 * planes of at least WINO4_PLANE rows and columns, F(2,3) down to
 * WINO2_PLANE. Measured on resnet18's shapes (AVX-512, batch 1, 1 thread,
 * min of 60 runs of four stacked convs): 56x56x64 direct 5.8 ms, F(4,3)
 * 2.8, F(2,3) 4.4; 28x28x128 5.7, 2.7, 3.5; 14x14x256 6.1, 4.9 (its
 * weight_t is 9 MiB), 4.2. At 7x7x512 the direct conv is bound by reading
 * its weights already, and F(2,3)'s are 1.8x larger: it stays direct. */
#define WINO4_PLANE 28
#define WINO2_PLANE 14

static int wino_tile(const mge_graph *g, const mge_node *n, int64_t blk, int stem)
{
    const mge_value *x = &g->values[n->in[0]], *y = &g->values[n->out[0]];
    if (blk != 16 || stem || mge_node_int(n, MGE_KEY_groups, 1) != 1 || mge_node_bf16(n))
        return 0;
    for (int d = 0; d < 2; d++)
        if (mge_node_ints(n, MGE_KEY_kernel, d, 1) != 3 || mge_node_ints(n, MGE_KEY_stride, d, 1) != 1 ||
            mge_node_ints(n, MGE_KEY_dilation, d, 1) != 1 || mge_node_ints(n, MGE_KEY_pad, d, 0) != 1)
            return 0;
    if (x->dims[1] % blk || y->dims[1] % blk)
        return 0;
    int64_t yh = mge_pass_value_dim(g, n->out[0], 2), yw = mge_pass_value_dim(g, n->out[0], 3);
    int64_t plane = yh < yw ? yh : yw;
    return plane >= WINO4_PLANE ? 4 : plane >= WINO2_PLANE ? 2 : 0;
}

static mge_status emit_conv(rebuild *r, int node, mge_error *err)
{
    const mge_graph *g = r->g;
    const mge_node *n = &g->nodes[node];
    mge_status s;
    int in[4], nin = 0, xb;
    int stem = r->p->stem[node];
    if ((s = stem ? plain1_of(r, n->in[0], &xb, err) : blocked_of(r, n->in[0], &xb, err)))
        return s;
    in[nin++] = xb;
    const mge_value *w = &g->values[n->in[1]];
    int64_t G = mge_node_int(n, MGE_KEY_groups, 1);
    int64_t Cb = r->c->values[xb].dims[1];
    const char *nname = n->name ? n->name : g->values[n->out[0]].name;
    int tile = wino_tile(g, n, r->blk, stem);
    int op = tile ? MGE_OP_CONV2D_WINOGRAD_NCHWC : MGE_OP_CONV2D_NCHWC;
    int wv;
    if (tile) {
        /* weight_t = winograd_weight_nchwc(w), computed at load time */
        int64_t a = tile + 2, d[5] = {a * a, (w->dims[0] + r->blk - 1) / r->blk, Cb, r->blk, r->blk};
        mge_attr wa[2];
        memset(wa, 0, sizeof wa);
        wa[0].key = MGE_KEY_tile, wa[0].n = 1, wa[0].i[0] = tile;
        wa[1].key = MGE_KEY_block, wa[1].n = 1, wa[1].i[0] = r->blk;
        int win = r->remap[n->in[1]];
        if ((s = new_value(r, nname, ".weight_wino", MGE_VAL_NODE, 5, d, &wv, err)) ||
            (s = mge_pass_rb_node(r->c, r->c->values[wv].name, MGE_OP_WINOGRAD_WEIGHT_NCHWC, 1, &win, 1, &wv, 2,
                                  wa, err)))
            return s;
    } else {
        mge_value tmpl;
        mge_tensor *t = NULL;
        if ((s = pack_weight(w, G, Cb, stem ? 1 : r->blk, r->blk, &tmpl, &t, err)))
            return s;
        if ((s = new_value(r, nname, ".weight_nchwc", w->kind == MGE_VAL_CONST ? MGE_VAL_CONST : MGE_VAL_PARAM,
                           tmpl.ndim, tmpl.dims, &wv, err))) {
            mge_tensor_free(t);
            free(t);
            return s;
        }
        r->wnew[r->nw] = wv;
        r->wdata[r->nw++] = t;
    }
    in[nin++] = wv;
    int bias = (int)mge_node_int(n, MGE_KEY_bias, 1);
    int res = n->op == MGE_OP_FUSED_CONV2D ? (int)mge_node_int(n, MGE_KEY_residual, 0) : 0;
    int ri = r->p->resadd[node], rv = -1;
    if (res)
        rv = n->in[2 + bias];
    else if (ri >= 0) /* the add's other operand */
        rv = g->nodes[ri].in[g->nodes[ri].in[0] == n->out[0] ? 1 : 0];
    if (bias)
        in[nin++] = r->remap[n->in[2]];
    if (rv >= 0) {
        int rb;
        if ((s = blocked_of(r, rv, &rb, err)))
            return s;
        in[nin++] = rb;
    }
    mge_attr kept[16], full[16];
    int nk = mge_grad_attrs(n, op, kept), nfull = 0;
    if (tile) {
        memset(&kept[nk], 0, sizeof kept[nk]);
        kept[nk].key = MGE_KEY_tile, kept[nk].n = 1, kept[nk++].i[0] = tile;
    }
    if ((s = mge_attrs_complete(op, nk, kept, full, &nfull, err)))
        return s;
    /* with absorbed nodes the conv makes the last one's value */
    int ai = r->p->absorb[node];
    int y = ai >= 0 ? g->nodes[ai].out[0] : ri >= 0 ? g->nodes[ri].out[0] : n->out[0];
    for (int k = 0; k < nfull; k++) {
        if (full[k].key == MGE_KEY_act && ai >= 0)
            full[k].i[0] = g->nodes[ai].op;
        else if (full[k].key == MGE_KEY_alpha && ai >= 0)
            full[k].f = mge_node_float(&g->nodes[ai], MGE_KEY_alpha, 0.01);
        else if (full[k].key == MGE_KEY_residual && rv >= 0)
            full[k].i[0] = 1;
    }
    int yb;
    if ((s = add_blocked_value(r, y, &yb, err)))
        return s;
    r->bval[y] = yb;
    return mge_pass_rb_node(r->c, nname, op, nin, in, 1, &yb, nfull, full, err);
}

static mge_status emit_elem(rebuild *r, const mge_node *n, mge_error *err)
{
    int in[64];
    mge_status s;
    if (n->nin > 64)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: too many inputs", n->name);
    for (int k = 0; k < n->nin; k++)
        if ((s = blocked_of(r, n->in[k], &in[k], err)))
            return s;
    int yb;
    if ((s = add_blocked_value(r, n->out[0], &yb, err)))
        return s;
    r->bval[n->out[0]] = yb;
    /* maxpool2d_nchwc has maxpool2d's attributes, in the same order */
    int op = n->op == MGE_OP_MAXPOOL2D ? MGE_OP_MAXPOOL2D_NCHWC : n->op;
    return mge_pass_rb_node(r->c, n->name ? n->name : r->g->values[n->out[0]].name, op, n->nin, in, 1, &yb,
                            n->nattr, n->attrs, err);
}

static mge_status rebuild_graph(mge_graph **gp, const plan *p, int64_t blk, int *changed, mge_error *err)
{
    mge_graph *g = *gp;
    int nv = g->nvalues;
    int *uses_plain = calloc((size_t)nv + 1, sizeof(int));
    int *bval = malloc(sizeof(int) * ((size_t)nv + 1)), *b1val = malloc(sizeof(int) * ((size_t)nv + 1));
    int *wnew = malloc(sizeof(int) * ((size_t)g->nnodes + 1));
    mge_tensor **wdata = calloc((size_t)g->nnodes + 1, sizeof *wdata);
    char *keep = NULL;
    int *remap = NULL;
    mge_graph *c = NULL;
    mge_status s = mge_pass_rb_alloc(g, &keep, &remap, &c, err);
    rebuild r = {g, c, p, blk, remap, bval, b1val, wnew, wdata, 0};
    if (!s && (!uses_plain || !bval || !b1val || !wnew || !wdata))
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
    if (s)
        goto done;
    /* a blocked value stays plain too (via from_nchwc) only when a plain
     * node, an output or the loss reads it */
    for (int i = 0; i < g->nnodes; i++)
        if (!p->kind[i])
            for (int k = 0; k < g->nodes[i].nin; k++)
                uses_plain[g->nodes[i].in[k]]++;
    for (int v = 0; v < nv; v++) {
        keep[v] = !p->blocked[v] || uses_plain[v] || mge_pass_is_root(g, v);
        bval[v] = b1val[v] = -1;
    }
    if ((s = mge_pass_rb_values(g, keep, NULL, c, remap, err)))
        goto done;
    for (int i = 0; i < g->nnodes && !s; i++) {
        const mge_node *n = &g->nodes[i];
        if (p->kind[i] == 1)
            s = emit_conv(&r, i, err);
        else if (p->kind[i] == 3)
            ; /* made by its conv */
        else if (p->kind[i] == 2)
            s = emit_elem(&r, n, err);
        else {
            s = mge_pass_rb_copy(c, n, remap, err);
            continue;
        }
        int y = n->out[0];
        if (!s && keep[y]) {
            char base[512];
            snprintf(base, sizeof base, "%s.from_nchwc", g->values[y].name);
            char *nm = fresh_name(g, c, base);
            if (!nm) {
                s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
                break;
            }
            s = attr_node(&r, nm, MGE_OP_FROM_NCHWC, 1, &bval[y], remap[y], MGE_KEY_channels, g->values[y].dims[1],
                          err);
            free(nm);
        }
    }
    if (s || (s = mge_pass_rb_end(gp, &c, remap, NULL, changed, err)))
        goto done;
    /* g is gone: *gp holds the model; nothing below can leave it half made */
    for (int k = 0; k < r.nw; k++) {
        mge_pass_set_data(*gp, wnew[k], wdata[k]);
        wdata[k] = NULL;
    }
    s = mge_graph_infer(*gp, err);
done:
    mge_graph_free(c);
    for (int k = 0; wdata && k < r.nw; k++)
        if (wdata[k]) {
            mge_tensor_free(wdata[k]);
            free(wdata[k]);
        }
    free(uses_plain);
    free(keep);
    free(remap);
    free(bval);
    free(b1val);
    free(wnew);
    free(wdata);
    return s;
}

mge_status mge_pass_layout(mge_graph **gp, int *changed, mge_error *err)
{
    mge_graph *g = *gp;
    *changed = 0;
    int64_t blk = layout_block();
    if (g->loss >= 0 || !blk || !g->nnodes)
        return MGE_OK;
    size_t nn = (size_t)g->nnodes, nv = (size_t)g->nvalues;
    size_t ni = sizeof(int) * nn;
    plan p = {.kind = calloc(nn, 1), .cand = calloc(nn, 1), .banned = calloc(nn, 1), .blocked = calloc(nv + 1, 1),
              .stem = calloc(nn, 1), .parent = malloc(ni), .nconv = malloc(ni), .ndw = malloc(ni),
              .need_dw = blk == 8, .absorb = malloc(ni), .resadd = malloc(ni), .owner = malloc(ni)};
    mge_status s = MGE_OK;
    if (!p.kind || !p.cand || !p.banned || !p.blocked || !p.stem || !p.parent || !p.nconv || !p.ndw || !p.absorb ||
        !p.resadd || !p.owner) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < g->nnodes; i++) {
        const mge_node *n = &g->nodes[i];
        p.cand[i] = conv_ok(g, n, blk) ? 1 : elem_ok(g, n) || pool_ok(g, n) ? 2 : 0;
        p.stem[i] = p.cand[i] == 1 && !channels_ok(g->values[n->in[0]].dims[1], blk);
    }
    while (plan_round(g, &p) > 0)
        ;
    int *uses = malloc(sizeof(int) * (nv + 1));
    if (!uses) {
        s = mge_error_set(err, MGE_ERR_NOMEM, "out of memory");
        goto done;
    }
    mge_pass_count_uses(g, uses);
    plan_absorb(g, &p, uses);
    free(uses);
    int any = 0;
    for (int i = 0; i < g->nnodes; i++)
        any |= p.kind[i] == 1;
    if (!any)
        goto done;
    if ((s = rebuild_graph(gp, &p, blk, changed, err)))   /* *changed = 1 */
        goto done;
    /* the plain weights of converted convs are read by nobody now */
    mge_prune_opts o = {NULL, NULL, NULL};
    int ch = 0;
    s = mge_pass_prune(gp, &o, &ch, err);
done:
    free(p.kind);
    free(p.cand);
    free(p.banned);
    free(p.blocked);
    free(p.stem);
    free(p.parent);
    free(p.nconv);
    free(p.ndw);
    free(p.absorb);
    free(p.resadd);
    free(p.owner);
    return s;
}
