/* grad_attn.c — gradient rules of group "attn".
 *
 * embedding(idx, weight): gather_grad(dy, idx, weight; axis=0) for the
 *   table: dy's rows added where the lookup read (repeated indices sum);
 *   the integer indices get none.
 * scaled_dot_product_attention(q, k, v[, mask]): one
 *   scaled_dot_product_attention_grad(dy, q, k, v[, mask]) node giving dq,
 *   dk and dv; it recomputes the softmax rather than taking it from the
 *   forward, so the forward stays one output and inference graphs carry
 *   nothing for training. With attention dropout the grad node replays the
 *   forward's draws: its drop_key is the forward name's key (kattn_seed),
 *   and both hash it with the run's seed. No gradient into the mask: that
 *   fails naming the node. */
#include "internal.h"

#include <stdio.h>

static mge_status emitted(int r, mge_error *err)
{
    return r < 0 ? (err && err->code ? err->code : MGE_ERR_INVALID) : MGE_OK;
}

mge_status mge_attn_grad(mge_graph *g, int node, const int *dy, const char *want, int *dx, mge_error *err)
{
    /* copies first: emitting may move g->nodes */
    const mge_node *n = &g->nodes[node];
    char base[200];
    snprintf(base, sizeof base, "%s", n->name);
    int op = n->op, nin = n->nin, in[5] = {-1, -1, -1, -1, -1};
    for (int i = 0; i < nin && i < 4; i++)
        in[i] = n->in[i];
    mge_attr at[9];
    int nat = mge_grad_attrs(n, MGE_OP_SDPA_GRAD, at);
    double p = mge_node_float(n, MGE_KEY_dropout, 0);
    if (dy[0] < 0)
        return MGE_OK;
    if (op == MGE_OP_EMBEDDING) {
        if (nin < 2 || !want[1])
            return MGE_OK;
        mge_attr ax = {.key = MGE_KEY_axis, .n = 1, .i = {0}};
        int a[3] = {dy[0], in[0], in[1]};
        dx[1] = mge_grad_emit(g, base, MGE_OP_GATHER_GRAD, 3, a, 1, &ax, 1, NULL, err);
        return emitted(dx[1], err);
    }
    if (op == MGE_OP_SDPA) {
        if (nin > 3 && want[3])
            return mge_error_set(err, MGE_ERR_UNSUPPORTED,
                                 "%s: scaled_dot_product_attention has no gradient for its mask (input 4)", base);
        if (!want[0] && !want[1] && !want[2])
            return MGE_OK;
        if (p > 0) {
            /* FNV-1a of the forward's name, as kattn_name_key computes it */
            uint64_t h = 0xcbf29ce484222325ull;
            for (const char *s = base; *s; s++)
                h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
            at[nat++] = (mge_attr){.key = MGE_KEY_drop_key, .n = 1, .i = {(int64_t)h}};
        }
        int a[5] = {dy[0], in[0], in[1], in[2], in[3]}, outs[3];
        int r = mge_grad_emit(g, base, MGE_OP_SDPA_GRAD, nin + 1, a, nat, at, 3, outs, err);
        if (r < 0)
            return emitted(r, err);
        for (int i = 0; i < 3; i++)
            dx[i] = want[i] ? outs[i] : -1;
        return MGE_OK;
    }
    return mge_error_set(err, MGE_ERR_UNSUPPORTED, "%s: no gradient rule for %s", base, mge_op_info(op)->name);
}
