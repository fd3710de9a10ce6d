/* quant_check.c — the scales of an int8 graph agree: every reader of a qs8
 * value (qconv2d, qlinear, qadd, dequantize, concat) states the scale and
 * zero point of its input as attributes, and they must equal what the
 * writer (quantize, qconv2d, qlinear, qadd; through maxpool2d, avgpool2d,
 * global_avgpool, reshape, flatten and concat, which keep them) states
 * for its output. A hand-edited text form that breaks this would compute
 * silently wrong numbers; mge_graph_validate calls this so it fails with a
 * message instead. qs8 graph inputs have no stated scale and are not checked. */
#include "internal.h"

#include <math.h>

typedef struct qparam {
    int known;
    double scale;
    int64_t zero;
    int node;        /* the writer that states it */
} qparam;

/* What the writer of qs8 value v states, following scale-keeping ops. */
static qparam written(const mge_graph *g, int v)
{
    qparam p = {0, 0, 0, -1};
    for (int depth = 0; depth < 4096; depth++) {
        const mge_value *x = &g->values[v];
        if (x->kind != MGE_VAL_NODE || x->producer < 0 || x->producer >= g->nnodes)
            return p;
        const mge_node *n = &g->nodes[x->producer];
        switch (n->op) {
        case MGE_OP_QUANTIZE:
            p = (qparam){1, mge_node_float(n, MGE_KEY_scale, 0), mge_node_int(n, MGE_KEY_zero, 0), x->producer};
            return p;
        case MGE_OP_QCONV2D:
        case MGE_OP_QLINEAR:
        case MGE_OP_QADD:
            p = (qparam){1, mge_node_float(n, MGE_KEY_y_scale, 0), mge_node_int(n, MGE_KEY_y_zero, 0), x->producer};
            return p;
        case MGE_OP_MAXPOOL2D:
        case MGE_OP_AVGPOOL2D:
        case MGE_OP_GLOBAL_AVGPOOL:
        case MGE_OP_RESHAPE:
        case MGE_OP_FLATTEN:
        case MGE_OP_CONCAT:
            if (n->nin < 1)
                return p;
            v = n->in[0];
            break;
        default: return p;
        }
    }
    return p;
}

static int same(double a, double b)
{
    return fabs(a - b) <= 1e-6 * fmax(fabs(a), fabs(b));
}

static mge_status expect(const mge_graph *g, const mge_node *n, int in, int ks, int kz, mge_error *err)
{
    int v = n->in[in];
    if (g->values[v].dtype != MGE_QS8)
        return MGE_OK;
    qparam p = written(g, v);
    double s = mge_node_float(n, ks, 0);
    int64_t z = mge_node_int(n, kz, 0);
    if (!p.known || (same(p.scale, s) && p.zero == z))
        return MGE_OK;
    return mge_error_set(err, MGE_ERR_INVALID,
                         "%s (%s): %s=%.9g %s=%lld but its input '%s' has scale %.9g zero %lld (from '%s')", n->name,
                         mge_op_info(n->op)->name, mge_key_name(ks), s, mge_key_name(kz), (long long)z,
                         g->values[v].name, p.scale, (long long)p.zero, g->nodes[p.node].name);
}

mge_status mge_quant_check(const mge_graph *g, int *bad_node, mge_error *err)
{
    mge_status s = MGE_OK;
    int i = 0;
    for (; i < g->nnodes && !s; i++) {
        const mge_node *n = &g->nodes[i];
        switch (n->op) {
        case MGE_OP_QCONV2D:
        case MGE_OP_QLINEAR: s = expect(g, n, 0, MGE_KEY_x_scale, MGE_KEY_x_zero, err); break;
        case MGE_OP_QADD:
            if (!(s = expect(g, n, 0, MGE_KEY_x_scale, MGE_KEY_x_zero, err)))
                s = expect(g, n, 1, MGE_KEY_x2_scale, MGE_KEY_x2_zero, err);
            break;
        case MGE_OP_DEQUANTIZE: s = expect(g, n, 0, MGE_KEY_scale, MGE_KEY_zero, err); break;
        case MGE_OP_CONCAT: {
            if (n->nin < 2 || g->values[n->in[0]].dtype != MGE_QS8)
                break;
            qparam a = written(g, n->in[0]);
            for (int k = 1; k < n->nin && a.known && !s; k++) {
                qparam b = written(g, n->in[k]);
                if (b.known && !(same(a.scale, b.scale) && a.zero == b.zero))
                    s = mge_error_set(err, MGE_ERR_INVALID,
                                      "%s (concat): qs8 inputs '%s' (scale %.9g zero %lld) and '%s' (scale %.9g zero "
                                      "%lld) must share one scale and zero point",
                                      n->name, g->values[n->in[0]].name, a.scale, (long long)a.zero,
                                      g->values[n->in[k]].name, b.scale, (long long)b.zero);
            }
            break;
        }
        default: break;
        }
    }
    if (s && bad_node)
        *bad_node = i - 1;
    return s;
}
