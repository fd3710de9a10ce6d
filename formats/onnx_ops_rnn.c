/* onnx_ops_rnn.c — ONNX converters for the recurrent layers: LSTM and GRU
 * become one-layer mge lstm / gru nodes (PyTorch's nn.LSTM / nn.GRU).
 *
 * ONNX stacks the gates of W [D, G*H, I], R [D, G*H, H] and B [D, 2*G*H]
 * in another order than PyTorch: LSTM i,o,f,c (PyTorch i,f,g,o), GRU z,r,h
 * (PyTorch r,z,n). The weights must be constants: they are reordered at
 * import into new constants, one per mge param (weight_ih, weight_hh,
 * bias_ih, bias_hh of each direction). A reverse-only layer runs forward
 * over the time-reversed sequence (an index_select) and reverses Y back.
 * Outputs: mge gives y [S, N, D*H] and h_n, c_n [D, N, H]; ONNX wants
 * Y [S, D, N, H] (layout 1: [N, S, D, H]) and Y_h, Y_c [D, N, H] (layout
 * 1: [N, D, H]): reshapes and transposes. */
#include "onnx.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* onnx_read.c: a fresh value name (the multi-output tmp node needs it) */
mge_status mge_onnx_fresh_name(mge_onnx_ctx *c, const char *base, char *out, size_t n);

/* A node with nout outputs under fresh names; their values into out[]. */
static mge_status emit_multi(mge_onnx_ctx *c, mge_onnx_node *n, int op, int nin, const int *in, int nattr,
                             const mge_attr *attrs, int nout, int *out)
{
    char names[4][256];
    const char *np[4];
    const char *base = n->n_output && n->output[0] && *n->output[0] ? n->output[0] : "rnn";
    for (int o = 0; o < nout && o < 4; o++) {
        char b[200];
        snprintf(b, sizeof b, "%s_%s_%d", base, mge_op_info(op)->name, o);
        if (mge_onnx_fresh_name(c, b, names[o], sizeof names[o]))
            return c->err->code ? c->err->code : MGE_ERR_INVALID;
        np[o] = names[o];
    }
    mge_error e;
    mge_error_clear(&e);
    int k = mge_graph_add_node(c->g, np[0], op, nin, in, nattr, attrs, nout, np, &e);
    if (k < 0)
        return mge_onnx_fail(c, n, "%s", e.msg);
    for (int o = 0; o < nout; o++)
        out[o] = c->g->nodes[k].out[o];
    return MGE_OK;
}

/* x reversed along axis (an index_select with S-1..0; S known). */
static int reverse_tmp(mge_onnx_ctx *c, mge_onnx_node *n, int x, int axis, int64_t S)
{
    int64_t idx[4096];
    if (mge_dim_is_symbol(S) || S < 1 || S > 4096) {
        mge_onnx_unsupported(c, n, "direction reverse over %lld steps (mge reverses up to 4096 known steps)",
                             (long long)S);
        return -1;
    }
    for (int64_t i = 0; i < S; i++)
        idx[i] = S - 1 - i;
    int iv = mge_onnx_const_i64(c, n, (int)S, idx);
    if (iv < 0)
        return -1;
    int in[2] = {x, iv};
    mge_attr a[1] = {mge_onnx_ai(MGE_KEY_axis, axis)};
    return mge_onnx_emit_tmp(c, n, MGE_OP_INDEX_SELECT, 2, in, 1, a);
}

/* Checks input i (f32, of the given shape); *data: its values when it is
 * a constant, else NULL (a graph input: reordered at run time). */
static mge_status weight_in(mge_onnx_ctx *c, mge_onnx_node *n, int i, const char *what, int nd,
                            const int64_t *dims, const float **data)
{
    int v = mge_onnx_in(c, n, i);
    const mge_value *val = mge_onnx_value(c, v);
    const mge_tensor *t = mge_onnx_data(c, v);
    *data = NULL;
    if (val->dtype != MGE_F32)
        return mge_onnx_unsupported(c, n, "%s is %s (mge's recurrent layers take f32)", what,
                                    mge_dtype_name(val->dtype));
    int ok = val->ndim == nd;
    for (int k = 0; ok && k < nd; k++)
        ok = val->dims[k] == dims[k];
    if (!ok) {
        char b[128];
        int p = 0;
        for (int k = 0; k < nd && p < (int)sizeof b - 24; k++)
            p += snprintf(b + p, sizeof b - (size_t)p, "%s%lld", k ? ", " : "", (long long)dims[k]);
        return mge_onnx_fail(c, n, "%s has the wrong shape: expected [%s]", what, b);
    }
    if (t && t->dtype == MGE_F32 && t->ndim == nd)
        *data = (const float *)t->data;
    return MGE_OK;
}

/* A new constant [G*H, cols] (cols 0: 1-D [G*H]) whose gate block g is
 * block order[g] of src (G blocks of H rows of cols). */
static int gates_const(mge_onnx_ctx *c, mge_onnx_node *n, const float *src, int G, int64_t H, int64_t cols,
                       const int *order)
{
    int64_t w = cols ? cols : 1;
    int64_t dims[2] = {G * H, cols};
    mge_tensor t;
    memset(&t, 0, sizeof t);
    if (mge_tensor_alloc(&t, MGE_F32, cols ? 2 : 1, dims, c->err))
        return -1;
    float *d = t.data;
    for (int g = 0; g < G; g++)
        memcpy(d + (size_t)(g * H * w), src + (size_t)(order[g] * H * w), sizeof(float) * (size_t)(H * w));
    return mge_onnx_const(c, n, &t);
}

static int slice_tmp(mge_onnx_ctx *c, mge_onnx_node *n, int x, int axis, int64_t start, int64_t end)
{
    mge_attr a[3] = {mge_onnx_ais(MGE_KEY_axis, 1, (int64_t[]){axis}), mge_onnx_ai(MGE_KEY_start, start),
                     mge_onnx_ai(MGE_KEY_end, end)};
    return mge_onnx_emit_tmp(c, n, MGE_OP_SLICE, 1, &x, 3, a);
}

/* gates_const's reordering at run time, for weights that are graph inputs:
 * direction d of v ([D, rows, cols], or [D, rows] when cols is 0), gate
 * blocks from row off on, sliced and concatenated, as [G*H(, cols)]. */
static int gates_rt(mge_onnx_ctx *c, mge_onnx_node *n, int v, int64_t d, int G, int64_t H, int64_t cols,
                    int64_t off, const int *order)
{
    int x = slice_tmp(c, n, v, 0, d, d + 1);
    if (x < 0)
        return -1;
    int parts[4];
    for (int g = 0; g < G; g++)
        if ((parts[g] = slice_tmp(c, n, x, 1, off + order[g] * H, off + (order[g] + 1) * H)) < 0)
            return -1;
    mge_attr a[1] = {mge_onnx_ai(MGE_KEY_axis, 1)};
    int y = mge_onnx_emit_tmp(c, n, MGE_OP_CONCAT, G, parts, 1, a);
    if (y < 0)
        return -1;
    int64_t sh[2] = {G * H, cols};
    return mge_onnx_reshape_tmp(c, n, y, cols ? 2 : 1, sh);
}

/* activations: absent, or the defaults (case as the spec spells them, or
 * any case) for each direction; RNN's one per direction Tanh or Relu (the
 * same for both), into *act (0 tanh, 1 relu). kind: 0 lstm, 1 gru, 2 rnn. */
static int act_is(const ProtobufCBinaryData *b, const char *w)
{
    size_t len = strlen(w);
    return b->len == len && strncasecmp((const char *)b->data, w, len) == 0;
}

static mge_status check_activations(mge_onnx_ctx *c, mge_onnx_node *n, int kind, int64_t D, int *act)
{
    const Onnx__AttributeProto *a = mge_onnx_attr(n, "activations");
    *act = 0;
    if (!a)
        return MGE_OK;
    const char *def[3] = {"Sigmoid", "Tanh", "Tanh"};
    size_t per = kind == 2 ? 1 : kind ? 2 : 3;
    if (a->n_strings != per * (size_t)D)
        return mge_onnx_fail(c, n, "activations has %zu names: expected %zu", a->n_strings, per * (size_t)D);
    if (kind == 2) {
        *act = act_is(&a->strings[0], "Relu");
        for (size_t k = 0; k < a->n_strings; k++)
            if (!act_is(&a->strings[k], *act ? "Relu" : "Tanh"))
                return mge_onnx_unsupported(c, n, "activations other than Tanh or Relu, the same in both directions "
                                            "(mge's rnn has those)");
        return MGE_OK;
    }
    for (size_t k = 0; k < a->n_strings; k++)
        if (!act_is(&a->strings[k], def[k % per]))
            return mge_onnx_unsupported(c, n, "activations other than %s (mge's %s uses those)",
                                        kind ? "Sigmoid, Tanh" : "Sigmoid, Tanh, Tanh", kind ? "gru" : "lstm");
    return MGE_OK;
}

/* kind: 0 LSTM, 1 GRU, 2 RNN. */
static mge_status conv_rnn_layer(mge_onnx_ctx *c, mge_onnx_node *n, int kind)
{
    const int gru = kind != 0, G = kind == 2 ? 1 : gru ? 3 : 4;
    /* PyTorch's gate k is ONNX's block order[k] */
    static const int lstm_order[4] = {0, 2, 3, 1}, gru_order[3] = {1, 0, 2}, rnn_order[1] = {0};
    const int *order = kind == 2 ? rnn_order : gru ? gru_order : lstm_order;
    int x = mge_onnx_in(c, n, 0);
    if (x < 0 || mge_onnx_in(c, n, 1) < 0 || mge_onnx_in(c, n, 2) < 0)
        return mge_onnx_fail(c, n, "expected inputs X, W and R");
    const mge_value *xv = mge_onnx_value(c, x);
    if (xv->ndim != 3)
        return mge_onnx_fail(c, n, "X has rank %d: expected 3", xv->ndim);
    if (xv->dtype != MGE_F32)
        return mge_onnx_unsupported(c, n, "X is %s (mge's recurrent layers take f32)", mge_dtype_name(xv->dtype));
    int64_t layout = mge_onnx_attr_i(n, "layout", 0);
    if (layout != 0 && layout != 1)
        return mge_onnx_fail(c, n, "layout %lld: expected 0 or 1", (long long)layout);
    char dir[32];
    mge_onnx_attr_s(n, "direction", "forward", dir, sizeof dir);
    int reverse = strcmp(dir, "reverse") == 0, bidi = strcmp(dir, "bidirectional") == 0;
    if (!reverse && !bidi && strcmp(dir, "forward") != 0)
        return mge_onnx_fail(c, n, "direction '%s': expected forward, reverse or bidirectional", dir);
    int64_t D = bidi ? 2 : 1;
    mge_status st;
    int act;
    if ((st = check_activations(c, n, kind, D, &act)))
        return st;
    if (mge_onnx_attr(n, "clip"))
        return mge_onnx_unsupported(c, n, "clip (mge's %s does not clip the cell input)",
                                    kind == 2 ? "rnn" : gru ? "gru" : "lstm");
    if (!gru && mge_onnx_attr_i(n, "input_forget", 0))
        return mge_onnx_unsupported(c, n, "input_forget = 1 (coupled input and forget gates)");
    /* ONNX's default 0 applies the reset gate before the hidden product */
    int lbr = kind == 1 && mge_onnx_attr_i(n, "linear_before_reset", 0) != 0;
    int peep = 0;
    if (!gru && mge_onnx_in(c, n, 7) >= 0) {
        /* zero peepholes (exporters write them so) are none; others lstm's peephole=true */
        const mge_tensor *pt = mge_onnx_data(c, mge_onnx_in(c, n, 7));
        int zero = pt && pt->dtype == MGE_F32;
        for (int64_t i = 0, cnt = zero ? mge_tensor_numel(pt) : 0; zero && i < cnt; i++)
            zero = ((const float *)pt->data)[i] == 0.0f;
        peep = !zero;
    }
    int64_t I = xv->dims[2];
    int wv = mge_onnx_in(c, n, 1);
    const mge_value *wval = mge_onnx_value(c, wv);
    if (wval->ndim != 3 || wval->dims[0] != D || wval->dims[1] % G)
        return mge_onnx_fail(c, n, "W must be [%lld, %d*hidden_size, input_size]", (long long)D, G);
    int64_t H = mge_onnx_attr_i(n, "hidden_size", wval->dims[1] / G);
    if (H < 1 || wval->dims[1] != G * H)
        return mge_onnx_fail(c, n, "hidden_size %lld disagrees with W's %lld rows", (long long)H,
                             (long long)wval->dims[1]);
    if (I < 1 || mge_dim_is_symbol(I))
        return mge_onnx_unsupported(c, n, "X's input size is not known at import");
    int64_t S = xv->dims[layout ? 1 : 0];
    /* sequence_lens: every sequence full length only */
    int sl = mge_onnx_in(c, n, 4);
    if (sl >= 0) {
        const mge_tensor *lt = mge_onnx_data(c, sl);
        if (!lt)
            return mge_onnx_unsupported(c, n, "sequence_lens computed at run time (mge runs every sequence to the "
                                        "full length)");
        if (lt->dtype != MGE_I32 && lt->dtype != MGE_I64)
            return mge_onnx_fail(c, n, "sequence_lens must be int32");
        for (int64_t k = 0, cnt = mge_tensor_numel(lt); k < cnt; k++) {
            int64_t len = lt->dtype == MGE_I32 ? ((const int32_t *)lt->data)[k] : ((const int64_t *)lt->data)[k];
            if (mge_dim_is_symbol(S) || S < 0 || len != S)
                return mge_onnx_unsupported(c, n, "sequence_lens other than the full length (variable-length "
                                            "sequences)");
        }
    }
    int64_t wd[3] = {D, G * H, I}, rd[3] = {D, G * H, H}, bd[2] = {D, 2 * G * H}, pd[2] = {D, 3 * H};
    const float *W, *R, *B = NULL, *P = NULL;
    int wi = mge_onnx_in(c, n, 1), ri = mge_onnx_in(c, n, 2), bi = mge_onnx_in(c, n, 3), pi = mge_onnx_in(c, n, 7);
    if ((st = weight_in(c, n, 1, "W", 3, wd, &W)) || (st = weight_in(c, n, 2, "R", 3, rd, &R)) ||
        (bi >= 0 && (st = weight_in(c, n, 3, "B", 2, bd, &B))) || (peep && (st = weight_in(c, n, 7, "P", 2, pd, &P))))
        return st;
    /* mge's peepholes are i, f, o; ONNX's P is i, o, f */
    static const int peep_order[3] = {0, 2, 1};

    /* inputs: x [, h0, c0], then per direction weight_ih, weight_hh[, bias_ih, bias_hh] */
    int in[3 + 10], nin = 0;
    int xin = x;
    if (reverse && (xin = reverse_tmp(c, n, x, layout ? 1 : 0, S)) < 0)
        return c->err->code ? c->err->code : MGE_ERR_UNSUPPORTED;
    in[nin++] = xin;
    int h0 = mge_onnx_in(c, n, 5), c0 = gru ? -1 : mge_onnx_in(c, n, 6);
    if (h0 >= 0 || c0 >= 0) {
        /* mge takes both states or neither: a missing one is zeros like the other */
        int st0[2] = {h0, c0};
        for (int k = 0; k < (gru ? 1 : 2); k++) {
            if (st0[k] >= 0 && layout) {
                static const int64_t p[3] = {1, 0, 2};
                if ((st0[k] = mge_onnx_transpose_tmp(c, n, st0[k], 3, p)) < 0)
                    return c->err->code;
            }
        }
        for (int k = 0; k < (gru ? 1 : 2); k++)
            if (st0[k] < 0) {
                float z = 0;
                int zv = mge_onnx_const_f32(c, n, 0, NULL, &z);
                int mi[2] = {st0[1 - k], zv};
                if (zv < 0 || (st0[k] = mge_onnx_emit_tmp(c, n, MGE_OP_MUL, 2, mi, 0, NULL)) < 0)
                    return c->err->code;
            }
        in[nin++] = st0[0];
        if (!gru)
            in[nin++] = st0[1];
    }
    for (int64_t d = 0; d < D; d++) {
        int p[5];
        p[0] = W ? gates_const(c, n, W + d * G * H * I, G, H, I, order) : gates_rt(c, n, wi, d, G, H, I, 0, order);
        p[1] = R ? gates_const(c, n, R + d * G * H * H, G, H, H, order) : gates_rt(c, n, ri, d, G, H, H, 0, order);
        int np = 2;
        if (bi >= 0) {
            p[2] = B ? gates_const(c, n, B + d * 2 * G * H, G, H, 0, order) : gates_rt(c, n, bi, d, G, H, 0, 0, order);
            p[3] = B ? gates_const(c, n, B + d * 2 * G * H + G * H, G, H, 0, order)
                     : gates_rt(c, n, bi, d, G, H, 0, G * H, order);
            np = 4;
        }
        if (peep)
            p[np++] = P ? gates_const(c, n, P + d * 3 * H, 3, H, 0, peep_order)
                        : gates_rt(c, n, pi, d, 3, H, 0, 0, peep_order);
        for (int k = 0; k < np; k++) {
            if (p[k] < 0)
                return c->err->code ? c->err->code : MGE_ERR_INVALID;
            in[nin++] = p[k];
        }
    }
    mge_attr a[5] = {mge_onnx_ai(MGE_KEY_hidden_size, H), mge_onnx_ab(MGE_KEY_bidirectional, bidi),
                     mge_onnx_ab(MGE_KEY_batch_first, (int)layout), mge_onnx_ab(MGE_KEY_bias, bi >= 0),
                     kind == 2 ? mge_onnx_ai(MGE_KEY_nonlinearity, act)
                     : kind ? mge_onnx_ab(MGE_KEY_linear_before_reset, lbr) : mge_onnx_ab(MGE_KEY_peephole, peep)};
    int out[3];
    int nout = gru ? 2 : 3;
    if ((st = emit_multi(c, n, kind == 2 ? MGE_OP_RNN : gru ? MGE_OP_GRU : MGE_OP_LSTM, nin, in, kind || peep ? 5 : 4,
                         a, nout, out)))
        return st;

    /* Y: [S, N, D*H] -> [S, N, D, H] -> [S, D, N, H]; layout 1: [N, S, D, H] */
    if (n->n_output > 0 && n->output[0] && *n->output[0]) {
        int y = out[0];
        if (reverse && (y = reverse_tmp(c, n, y, layout ? 1 : 0, S)) < 0)
            return c->err->code ? c->err->code : MGE_ERR_UNSUPPORTED;
        int64_t sh[4] = {0, 0, D, H};
        if ((y = mge_onnx_reshape_tmp(c, n, y, 4, sh)) < 0)
            return c->err->code;
        if (!layout) {
            static const int64_t p[4] = {0, 2, 1, 3};
            if ((y = mge_onnx_transpose_tmp(c, n, y, 4, p)) < 0)
                return c->err->code;
        }
        if ((st = mge_onnx_alias(c, n, 0, y)))
            return st;
    }
    /* Y_h, Y_c: [D, N, H]; layout 1: [N, D, H] */
    for (int k = 1; k < nout && k < (int)n->n_output; k++) {
        if (!n->output[k] || !*n->output[k])
            continue;
        int v = out[k];
        if (layout) {
            static const int64_t p[3] = {1, 0, 2};
            if ((v = mge_onnx_transpose_tmp(c, n, v, 3, p)) < 0)
                return c->err->code;
        }
        if ((st = mge_onnx_alias(c, n, k, v)))
            return st;
    }
    return MGE_OK;
}

static mge_status conv_lstm(mge_onnx_ctx *c, mge_onnx_node *n)
{
    return conv_rnn_layer(c, n, 0);
}

static mge_status conv_gru(mge_onnx_ctx *c, mge_onnx_node *n)
{
    return conv_rnn_layer(c, n, 1);
}

static mge_status conv_rnn(mge_onnx_ctx *c, mge_onnx_node *n)
{
    return conv_rnn_layer(c, n, 2);
}

const mge_onnx_op mge_onnx_ops_rnn[] = {
    {"LSTM", conv_lstm, 7},
    {"GRU", conv_gru, 7},
    {"RNN", conv_rnn, 7},
    {NULL, NULL, 0},
};
