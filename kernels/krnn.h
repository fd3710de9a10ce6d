/* krnn.h — the geometry of the recurrent layers (lstm, gru and their
 * gradient ops), shared by lib/op_rnn.c, lib/grad_rnn.c and the kernels
 * (header only): which input is x, h0, c0 and each parameter, from the
 * node's op, attributes and input count. */
#ifndef MGE_KRNN_H
#define MGE_KRNN_H

#include "mge.h"

/* A node takes at most 64 inputs: lstm_grad has 6 besides 4 params per
 * layer and direction. */
#define KRNN_MAX_LD 14

typedef struct krnn {
    int gru;          /* 0: lstm, 1: gru or rnn (one state, h) */
    int rnn;          /* the plain rnn: one gate, h' = act(W_ih x + b_ih + W_hh h + b_hh) */
    int act;          /* rnn's nonlinearity: 0 tanh, 1 relu */
    int lbr;          /* gru's linear_before_reset: 1 PyTorch's r (W_hn h + b_hn), 0 W_hn (r h) + b_hn */
    int peep;         /* lstm's peephole weights (ONNX's P): one more param [3H] per layer and direction */
    int grad;         /* the gradient op */
    int64_t G;        /* gates: 4 (i,f,g,o) or 3 (r,z,n) */
    int64_t L, D, H;  /* num_layers, directions, hidden_size */
    int bias, bf;     /* bias, batch_first */
    int np;           /* params per layer and direction: 4 with bias, else 2 */
    int nparams;      /* L * D * np */
    int nstate;       /* state inputs the op takes when given: 2 (h0, c0) or 1 (h0) */
    int has_state;    /* whether they are given */
    int xi;           /* input index of x */
    int pi;           /* input index of the first param */
} krnn;

/* From the op and attributes; 0, or -1 when the input count does not fit
 * (has_state then is not set). Attribute ranges are the infer's to check. */
static inline int krnn_setup(const mge_node *n, krnn *r)
{
    r->rnn = n->op == MGE_OP_RNN;
    r->gru = n->op == MGE_OP_GRU || n->op == MGE_OP_GRU_GRAD || r->rnn;
    r->grad = n->op == MGE_OP_LSTM_GRAD || n->op == MGE_OP_GRU_GRAD;
    r->G = r->rnn ? 1 : r->gru ? 3 : 4;
    r->act = r->rnn ? (int)mge_node_int(n, MGE_KEY_nonlinearity, 0) : 0;
    r->lbr = mge_node_int(n, MGE_KEY_linear_before_reset, 1) != 0;
    r->peep = n->op == MGE_OP_LSTM && mge_node_int(n, MGE_KEY_peephole, 0) != 0;
    r->H = mge_node_int(n, MGE_KEY_hidden_size, 0);
    r->L = mge_node_int(n, MGE_KEY_num_layers, 1);
    r->D = mge_node_int(n, MGE_KEY_bidirectional, 0) ? 2 : 1;
    r->bias = mge_node_int(n, MGE_KEY_bias, 1) != 0;
    r->bf = mge_node_int(n, MGE_KEY_batch_first, 0) != 0;
    r->np = (r->bias ? 4 : 2) + r->peep;
    r->nstate = r->gru ? 1 : 2;
    r->xi = r->grad ? (r->gru ? 2 : 3) : 0;
    r->has_state = 0;
    r->pi = r->xi + 1;
    r->nparams = 0;
    if (r->L < 1 || r->L * r->D > KRNN_MAX_LD || r->xi + 1 + r->nstate + r->L * r->D * r->np > 64)
        return -1;
    r->nparams = (int)(r->L * r->D) * r->np;
    int extra = n->nin - r->xi - 1 - r->nparams;
    if (extra != 0 && extra != r->nstate)
        return -1;
    r->has_state = extra != 0;
    r->pi = r->xi + 1 + extra;
    return 0;
}

/* Input index of param k (in input order: weight_ih, weight_hh, with bias
 * bias_ih, bias_hh, with peephole weight_p) of layer l, direction d. */
static inline int krnn_param(const krnn *r, int64_t l, int64_t d, int k)
{
    return r->pi + (int)((l * r->D + d) * r->np) + k;
}

/* What param k (input order) is: 0 weight_ih, 1 weight_hh, 2 bias_ih,
 * 3 bias_hh, 4 weight_p (lstm's peepholes i, f, o: [3H]). */
static inline int krnn_kind(const krnn *r, int k)
{
    return k < 2 || (r->bias && k < 4) ? k : 4;
}

/* The input width of layer l. */
static inline int64_t krnn_in(const krnn *r, int64_t l, int64_t I)
{
    return l == 0 ? I : r->D * r->H;
}

/* PyTorch's name of param kind k (weight_ih, weight_hh, bias_ih, bias_hh;
 * 4 the peepholes, weight_p, mge's) of layer l, direction d
 * ("weight_hh_l1_reverse"), with static storage
 * (mge_param_spec keeps the pointer); "?" out of range. */
#define KRNN_DIR(l, s) "weight_ih_l" #l s, "weight_hh_l" #l s, "bias_ih_l" #l s, "bias_hh_l" #l s
#define KRNN_LAYER(l) KRNN_DIR(l, ""), KRNN_DIR(l, "_reverse")
#define KRNN_PEEP(l) "weight_p_l" #l, "weight_p_l" #l "_reverse"
static inline const char *krnn_param_name(int64_t l, int64_t d, int k)
{
    static const char *const names[KRNN_MAX_LD * 8] = {
        KRNN_LAYER(0), KRNN_LAYER(1), KRNN_LAYER(2),  KRNN_LAYER(3),  KRNN_LAYER(4),  KRNN_LAYER(5),  KRNN_LAYER(6),
        KRNN_LAYER(7), KRNN_LAYER(8), KRNN_LAYER(9), KRNN_LAYER(10), KRNN_LAYER(11), KRNN_LAYER(12), KRNN_LAYER(13),
    };
    static const char *const peeps[KRNN_MAX_LD * 2] = {
        KRNN_PEEP(0), KRNN_PEEP(1), KRNN_PEEP(2),  KRNN_PEEP(3),  KRNN_PEEP(4),  KRNN_PEEP(5),  KRNN_PEEP(6),
        KRNN_PEEP(7), KRNN_PEEP(8), KRNN_PEEP(9), KRNN_PEEP(10), KRNN_PEEP(11), KRNN_PEEP(12), KRNN_PEEP(13),
    };
    if (l < 0 || l >= KRNN_MAX_LD || d < 0 || d > 1 || k < 0 || k > 4)
        return "?";
    return k == 4 ? peeps[l * 2 + d] : names[l * 8 + d * 4 + k];
}
#undef KRNN_LAYER
#undef KRNN_PEEP
#undef KRNN_DIR

#endif
