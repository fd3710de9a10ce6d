/* grad_rnn.c — gradient rules of lstm and gru: one lstm_grad / gru_grad
 * node computes the gradients of x, h0, c0 and every parameter by
 * backpropagation through time.
 *
 * The gradient op recomputes the forward from the same inputs rather than
 * reading activations the forward saved: the forward node keeps PyTorch's
 * outputs (1 to 3, of which a model may use fewer), so inference pays
 * nothing for training, and the recompute costs one forward pass (about a
 * third of a training step's work on these layers). The parameter
 * gradients come out as one flat vector in input order; the rule slices
 * it back into one value per parameter (slice + reshape_as, a view). */
#include "internal.h"
#include "krnn.h"

#include <stdio.h>
#include <string.h>

static mge_status emit_fail(mge_error *err)
{
    return err && err->code ? err->code : MGE_ERR_INVALID;
}

mge_status mge_rnn_grad(mge_graph *g, int node, const int *dy, const char *want, int *dx, mge_error *err)
{
    /* copies first: emitting may move g->nodes */
    const mge_node *n0 = &g->nodes[node];
    char base[200];
    snprintf(base, sizeof base, "%s", n0->name);
    int op = n0->op, nin = n0->nin, nout = n0->nout;
    if (op != MGE_OP_LSTM && op != MGE_OP_GRU)
        return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: %s has no gradient rule%s", base, mge_op_info(op)->name,
                             op == MGE_OP_RNN ? " (inference only)" : "");
    if (op == MGE_OP_LSTM && mge_node_int(n0, MGE_KEY_peephole, 0))
        return mge_error_set(err, MGE_ERR_UNSUPPORTED,
                             "%s: lstm with peephole=true has no gradient rule (inference only)", base);
    if (op == MGE_OP_GRU && !mge_node_int(n0, MGE_KEY_linear_before_reset, 1))
        return mge_error_set(err, MGE_ERR_UNSUPPORTED,
                             "%s: gru with linear_before_reset=false has no gradient rule (inference only)", base);
    krnn r;
    if (krnn_setup(n0, &r))
        return mge_error_set(err, MGE_ERR_INVALID, "%s: %s: bad input count %d", base, mge_op_info(op)->name, nin);
    int in[64];
    memcpy(in, n0->in, sizeof(int) * (size_t)nin);
    int gop = op == MGE_OP_LSTM ? MGE_OP_LSTM_GRAD : MGE_OP_GRU_GRAD;
    mge_attr ga[16];
    int ng = mge_grad_attrs(n0, gop, ga);
    int any_dy = 0, any_want = 0;
    for (int o = 0; o < nout; o++)
        any_dy |= dy[o] >= 0;
    for (int k = 0; k < nin; k++)
        any_want |= want[k];
    if (!any_dy || !any_want)
        return MGE_OK;
    int ndy = r.gru ? 2 : 3, a[64], zero = -1;
    for (int o = 0; o < ndy; o++) {
        if (o < nout && dy[o] >= 0) {
            a[o] = dy[o];
            continue;
        }
        if (zero < 0 && (zero = mge_grad_const(g, 0.0f, err)) < 0)
            return emit_fail(err);
        a[o] = zero;
    }
    if (ndy + nin > 64)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: too many inputs for %s", base, mge_op_info(gop)->name);
    memcpy(a + ndy, in, sizeof(int) * (size_t)nin);
    int outs[4];
    if (mge_grad_emit(g, base, gop, ndy + nin, a, ng, ga, r.gru ? 3 : 4, outs, err) < 0)
        return emit_fail(err);
    if (want[0])
        dx[0] = outs[0];
    for (int k = 0; r.has_state && k < r.nstate; k++)
        if (want[1 + k])
            dx[1 + k] = outs[1 + k];
    int flat = outs[r.gru ? 2 : 3];
    int64_t off = 0;
    for (int k = r.pi - r.xi; k < nin; k++) {
        int64_t len = 1;
        const mge_value *pv = &g->values[in[k]];
        for (int d = 0; d < pv->ndim; d++)
            len *= pv->dims[d];
        if (want[k]) {
            mge_attr sa[4];
            memset(sa, 0, sizeof sa);
            sa[0].key = MGE_KEY_axis, sa[0].n = 1, sa[0].i[0] = 0;
            sa[1].key = MGE_KEY_start, sa[1].n = 1, sa[1].i[0] = off;
            sa[2].key = MGE_KEY_end, sa[2].n = 1, sa[2].i[0] = off + len;
            sa[3].key = MGE_KEY_step, sa[3].n = 1, sa[3].i[0] = 1;
            int s = mge_grad_emit(g, base, MGE_OP_SLICE, 1, &flat, 4, sa, 1, NULL, err);
            if (s < 0)
                return emit_fail(err);
            int ra[2] = {s, in[k]};
            if ((dx[k] = mge_grad_emit(g, base, MGE_OP_RESHAPE_AS, 2, ra, 0, NULL, 1, NULL, err)) < 0)
                return emit_fail(err);
        }
        off += len;
    }
    return MGE_OK;
}
