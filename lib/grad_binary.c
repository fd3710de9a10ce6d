/* grad_binary.c — gradient rules of the binary family (numpy broadcasting).
 *
 * Each operand's gradient is computed in the output's (broadcast) shape,
 * then summed back to the operand's shape with sum_to when the two differ:
 *   add: da = dy, db = dy             sub: da = dy, db = -dy
 *   mul: da = dy*b, db = dy*a         div: da = dy/b, db = -(dy*out)/b
 *   pow: da = dy*b*a^(b-1), db = dy*out*log(a)
 *   maximum/minimum: maximum_grad/minimum_grad (ties split evenly).
 * Negations are applied after sum_to, on the smaller tensor.
 * pow, unlike PyTorch, masks nothing: PyTorch gives da = 0 where b == 0 and
 * db = 0 where a == 0 and b >= 0; here the same elements agree except where
 * a == 0, which gives NaN (0 * inf, 0 * log 0) or inf. The rule is meant
 * for a > 0, as log's is; negative a with integral b gives NaN in db, as
 * log(a) does in PyTorch. */
#include "internal.h"

typedef struct ctx {
    mge_graph *g;
    char base[256];
    mge_error *err;
} ctx;

static int e1(ctx *c, int op, int a)
{
    return a < 0 ? -1 : mge_grad_emit(c->g, c->base, op, 1, &a, 0, NULL, 1, NULL, c->err);
}

static int e2(ctx *c, int op, int a, int b)
{
    int in[2] = {a, b};
    return a < 0 || b < 0 ? -1 : mge_grad_emit(c->g, c->base, op, 2, in, 0, NULL, 1, NULL, c->err);
}

static int same_shape(const mge_value *a, const mge_value *b)
{
    int same = a->ndim == b->ndim;
    for (int i = 0; same && i < a->ndim; i++)
        same = a->dims[i] == b->dims[i];
    return same;
}

/* t (in the output's shape) reduced to operand v's shape when they differ. */
static int to_operand(ctx *c, int t, int v)
{
    if (t < 0)
        return -1;
    if (same_shape(&c->g->values[t], &c->g->values[v]) && c->g->values[t].dtype == c->g->values[v].dtype)
        return t;
    return e2(c, MGE_OP_SUM_TO, t, v);
}

/* A scalar const v in dtype dt (consts are f32; cast for f16/bf16). */
static int const_as(ctx *c, float v, mge_dtype dt)
{
    int k = mge_grad_const(c->g, v, c->err);
    if (k < 0 || dt == MGE_F32)
        return k;
    mge_attr a = {0};
    a.key = MGE_KEY_dtype;
    a.n = 1;
    a.i[0] = dt;
    return mge_grad_emit(c->g, c->base, MGE_OP_CAST, 1, &k, 1, &a, 1, NULL, c->err);
}

mge_status mge_binary_grad(mge_graph *g, int node, const int *dy, const char *want, int *dx, mge_error *err)
{
    const mge_node *n = &g->nodes[node];
    int op = n->op, a = n->in[0], b = n->in[1], out = n->out[0], d = dy[0];
    ctx c = {g, "", err};
    snprintf(c.base, sizeof c.base, "%s", n->name);
    if (d < 0 || (!want[0] && !want[1]))
        return MGE_OK;
    int ga = -1, gb = -1;
    switch (op) {
    case MGE_OP_ADD:
        if (want[0])
            ga = to_operand(&c, d, a);
        if (want[1])
            gb = to_operand(&c, d, b);
        break;
    case MGE_OP_SUB:
        if (want[0])
            ga = to_operand(&c, d, a);
        if (want[1])
            gb = e1(&c, MGE_OP_NEG, to_operand(&c, d, b));
        break;
    case MGE_OP_MUL:
        if (want[0])
            ga = to_operand(&c, e2(&c, MGE_OP_MUL, d, b), a);
        if (want[1])
            gb = to_operand(&c, e2(&c, MGE_OP_MUL, d, a), b);
        break;
    case MGE_OP_DIV:
        if (want[0])
            ga = to_operand(&c, e2(&c, MGE_OP_DIV, d, b), a);
        if (want[1])
            gb = e1(&c, MGE_OP_NEG, to_operand(&c, e2(&c, MGE_OP_DIV, e2(&c, MGE_OP_MUL, d, out), b), b));
        break;
    case MGE_OP_POW:
        if (want[0]) {
            int one = const_as(&c, 1.0f, g->values[b].dtype);
            int p = e2(&c, MGE_OP_POW, a, e2(&c, MGE_OP_SUB, b, one));
            ga = to_operand(&c, e2(&c, MGE_OP_MUL, d, e2(&c, MGE_OP_MUL, p, b)), a);
        }
        if (want[1])
            gb = to_operand(&c, e2(&c, MGE_OP_MUL, e2(&c, MGE_OP_MUL, d, out), e1(&c, MGE_OP_LOG, a)), b);
        break;
    case MGE_OP_MAXIMUM:
    case MGE_OP_MINIMUM: {
        int in[3] = {d, a, b}, o[2];
        int gop = op == MGE_OP_MAXIMUM ? MGE_OP_MAXIMUM_GRAD : MGE_OP_MINIMUM_GRAD;
        if (mge_grad_emit(g, c.base, gop, 3, in, 0, NULL, 2, o, err) < 0)
            return err ? err->code : MGE_ERR_INVALID;
        if (want[0])
            ga = to_operand(&c, o[0], a);
        if (want[1])
            gb = to_operand(&c, o[1], b);
        break;
    }
    default:
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: no gradient rule for %s", c.base,
                             mge_op_info(op)->name);
    }
    if ((want[0] && ga < 0) || (want[1] && gb < 0))
        return err && err->code ? err->code : MGE_ERR_INVALID;
    if (want[0])
        dx[0] = ga;
    if (want[1])
        dx[1] = gb;
    return MGE_OK;
}
