/* grad_linear.c — gradient rules of linear and matmul.
 *
 * linear(x[..., in], weight[out, in][, bias]):
 *   dx = linear_grad_input(dy, weight), dweight = linear_grad_weight(dy, x),
 *   dbias = sum of dy over all leading dims.
 * matmul(a, b) with C = op(a) op(b) (op: the transpose flags): 1-D operands
 * are first promoted as the forward does ([k] -> [1,k] on the left, [k,1]
 * on the right, the result gets the removed dim back) with reshape, so one
 * set of formulas serves every case:
 *   d op(a) = dC op(b)^T,  d op(b) = op(a)^T dC,
 * written as matmuls with transpose flags on the stored operands. Batch
 * dims an operand broadcast are summed away with sum_to; a promoted
 * operand's gradient is reshaped back to 1-D. The gradients compute in the
 * forward's precision (bf16 training keeps f32 master weights; only the
 * products round). */
#include "internal.h"

#include <stdio.h>
#include <string.h>

typedef struct rule_ctx {
    mge_graph *g;
    char base[256];
    mge_error *err;
    int64_t prec;            /* the forward's precision attribute */
} rule_ctx;

static int emit(rule_ctx *r, int op, int nin, const int *in, int nattr, const mge_attr *at)
{
    return mge_grad_emit(r->g, r->base, op, nin, in, nattr, at, 1, NULL, r->err);
}

static int reshape(rule_ctx *r, int v, int nd, const int64_t *shape)
{
    mge_attr a = {.key = MGE_KEY_shape, .n = nd};
    memcpy(a.i, shape, sizeof(int64_t) * (size_t)nd);
    return emit(r, MGE_OP_RESHAPE, 1, &v, 1, &a);
}

static int mm(rule_ctx *r, int a, int b, int ta, int tb)
{
    mge_attr at[3] = {{.key = MGE_KEY_transpose_a, .n = 1, .i = {ta}},
                      {.key = MGE_KEY_transpose_b, .n = 1, .i = {tb}},
                      {.key = MGE_KEY_precision, .n = 1, .i = {r->prec}}};
    int in[2] = {a, b};
    return emit(r, MGE_OP_MATMUL, 2, in, 3, at);
}

static int same_shape(const mge_graph *g, int a, int b)
{
    const mge_value *x = &g->values[a], *y = &g->values[b];
    if (x->ndim != y->ndim)
        return 0;
    for (int i = 0; i < x->ndim; i++)
        if (x->dims[i] != y->dims[i])
            return 0;
    return 1;
}

/* v summed to the shape of like (broadcast batch dims), when they differ. */
static int sum_to(rule_ctx *r, int v, int like)
{
    if (v < 0 || same_shape(r->g, v, like))
        return v;
    int in[2] = {v, like};
    return emit(r, MGE_OP_SUM_TO, 2, in, 0, NULL);
}

static mge_status fail(rule_ctx *r)
{
    return r->err && r->err->code ? r->err->code : MGE_ERR_INVALID;
}

static mge_status linear_rule(rule_ctx *r, int x, int w, int nin, const int *dy, const char *want, int *dx)
{
    mge_graph *g = r->g;
    mge_attr pa = {.key = MGE_KEY_precision, .n = 1, .i = {r->prec}};
    if (want[0] && (dx[0] = emit(r, MGE_OP_LINEAR_GRAD_INPUT, 2, (int[]){dy[0], w}, 1, &pa)) < 0)
        return fail(r);
    if (want[1] && (dx[1] = emit(r, MGE_OP_LINEAR_GRAD_WEIGHT, 2, (int[]){dy[0], x}, 1, &pa)) < 0)
        return fail(r);
    if (nin > 2 && want[2]) {
        int nd = g->values[dy[0]].ndim;
        if (nd <= 1) {
            dx[2] = dy[0];   /* no leading dims: dy is the bias gradient */
        } else {
            mge_attr ax = {.key = MGE_KEY_axis, .n = nd - 1};
            for (int i = 0; i < nd - 1; i++)
                ax.i[i] = i;
            if ((dx[2] = emit(r, MGE_OP_SUM, 1, &dy[0], 1, &ax)) < 0)
                return fail(r);
        }
    }
    return MGE_OK;
}

static mge_status matmul_rule(rule_ctx *r, int a, int b, int ta, int tb, int dc, const char *want, int *dx)
{
    mge_graph *g = r->g;
    if (!want[0] && !want[1])
        return MGE_OK;
    int a1 = g->values[a].ndim == 1, b1 = g->values[b].ndim == 1, rc = g->values[dc].ndim;
    /* a 1-D operand is not transposed (numpy) */
    if (a1)
        ta = 0;
    if (b1)
        tb = 0;
    int A = a, B = b, D = dc;
    if (a1 && (A = reshape(r, a, 2, (const int64_t[]){1, -1})) < 0)
        return fail(r);
    if (b1 && (B = reshape(r, b, 2, (const int64_t[]){-1, 1})) < 0)
        return fail(r);
    if (a1 || b1) {
        /* dC with the removed dims put back: 0 copies dC's dim */
        int64_t sh[MGE_MAX_DIMS];
        int nd = 0;
        if (a1 && b1) {
            sh[nd++] = 1, sh[nd++] = 1;
        } else if (a1) {
            for (int i = 0; i < rc - 1; i++)
                sh[nd++] = 0;
            sh[nd++] = 1, sh[nd++] = -1;
        } else {
            for (int i = 0; i < rc; i++)
                sh[nd++] = 0;
            sh[nd++] = 1;
        }
        if (nd > MGE_MAX_DIMS)
            return mge_error_set(r->err, MGE_ERR_UNSUPPORTED, "%s: matmul gradient: rank too large", r->base);
        if ((D = reshape(r, dc, nd, sh)) < 0)
            return fail(r);
    }
    if (want[0]) {
        int d = ta ? (tb ? mm(r, B, D, 1, 1) : mm(r, B, D, 0, 1)) : mm(r, D, B, 0, !tb);
        if ((d = sum_to(r, d, A)) < 0 || (a1 && (d = reshape(r, d, 1, (const int64_t[]){-1})) < 0))
            return fail(r);
        dx[0] = d;
    }
    if (want[1]) {
        int d = tb ? (ta ? mm(r, D, A, 1, 1) : mm(r, D, A, 1, 0)) : mm(r, A, D, !ta, 0);
        if ((d = sum_to(r, d, B)) < 0 || (b1 && (d = reshape(r, d, 1, (const int64_t[]){-1})) < 0))
            return fail(r);
        dx[1] = d;
    }
    return MGE_OK;
}

mge_status mge_linear_grad(mge_graph *g, int node, const int *dy, const char *want, int *dx, mge_error *err)
{
    const mge_node *n = &g->nodes[node];
    if (n->op != MGE_OP_LINEAR && n->op != MGE_OP_MATMUL)
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: no gradient rule", mge_op_info(n->op)->name);
    if (dy[0] < 0)
        return MGE_OK;
    rule_ctx r = {g, "", err, mge_node_int(n, MGE_KEY_precision, 0)};
    snprintf(r.base, sizeof r.base, "%s", n->name);
    /* copies: emitting nodes may move g->nodes */
    int op = n->op, nin = n->nin, a = n->in[0], b = n->in[1];
    if (op == MGE_OP_LINEAR)
        return linear_rule(&r, a, b, nin, dy, want, dx);
    int ta = (int)mge_node_int(n, MGE_KEY_transpose_a, 0), tb = (int)mge_node_int(n, MGE_KEY_transpose_b, 0);
    return matmul_rule(&r, a, b, ta, tb, dy[0], want, dx);
}
