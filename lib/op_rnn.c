/* op_rnn.c — the recurrent layers lstm, gru and rnn over a whole sequence and
 * their gradient ops: shape inference, FLOPs and the parameters (PyTorch's
 * nn.LSTM / nn.GRU names, shapes, order and init). See lib/ops.def and
 * mge-ops(7).
 *
 * FLOPs per layer and direction: the input and hidden products, 2*S*N*G*H
 * *(in + H), plus the gate math (about 10 per hidden unit and step). The
 * gradient ops count three times that: they recompute the forward and the
 * backward has twice its products. */
#include "internal.h"
#include "krnn.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *opname(const mge_node *n)
{
    return mge_op_info(n->op)->name;
}

const char *mge_rnn_param_name(int64_t l, int64_t d, int k)
{
    return krnn_param_name(l, d, k);
}

/* The shape param k of layer l, direction d must have (in: x's last dim). */
static int rnn_param_dims(const krnn *r, int64_t l, int k, int64_t in, int64_t *dims)
{
    k = krnn_kind(r, k);
    dims[0] = k == 4 ? 3 * r->H : r->G * r->H;
    if (k >= 2)
        return 1;
    dims[1] = k == 0 ? krnn_in(r, l, in) : r->H;
    return 2;
}

static mge_status check_attrs(const mge_node *n, const krnn *r, mge_error *err)
{
    if (r->H < 1)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: hidden_size=%lld: expected at least 1", opname(n),
                             (long long)r->H);
    if (r->L < 1 || r->L * r->D > KRNN_MAX_LD)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: num_layers=%lld: expected 1 to %d%s", opname(n),
                             (long long)r->L, (int)(KRNN_MAX_LD / r->D),
                             r->D == 2 ? " with bidirectional=true (a node takes at most 64 inputs)"
                                       : " (a node takes at most 64 inputs)");
    return MGE_OK;
}

/* x's sequence length, batch and input size. */
static mge_status rnn_x(const mge_node *n, const krnn *r, const mge_tdesc *x, int64_t *S, int64_t *N, int64_t *I,
                        mge_error *err)
{
    char b[96];
    if (x->ndim != 3 || !mge_dtype_is_float(x->dtype))
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is %s: expected a float tensor %s", opname(n),
                             mge_tdesc_str(x, b, sizeof b), r->bf ? "[N,S,input] (batch_first)" : "[S,N,input]");
    *S = x->dims[r->bf ? 1 : 0];
    *N = x->dims[r->bf ? 0 : 1];
    *I = x->dims[2];
    if (*I < 1)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is %s: expected an input size of at least 1", opname(n),
                             mge_tdesc_str(x, b, sizeof b));
    return MGE_OK;
}

static mge_status check_like(const mge_node *n, const char *what, const mge_tdesc *t, mge_dtype dt, int nd,
                             const int64_t *dims, const char *hint, mge_error *err)
{
    int ok = t->dtype == dt && t->ndim == nd;
    for (int i = 0; ok && i < nd; i++)
        ok = t->dims[i] == dims[i];
    if (ok)
        return MGE_OK;
    char bt[96], be[96];
    return mge_error_set(err, MGE_ERR_SHAPE, "%s: %s is %s: expected %s%s", opname(n), what,
                         mge_tdesc_str(t, bt, sizeof bt), mge_shape_str(dt, nd, dims, be, sizeof be), hint);
}

/* The checks forward and gradient ops share: counts, x, state, params. */
static mge_status rnn_common(const mge_node *n, const mge_tdesc *in, krnn *r, int64_t *S, int64_t *N, int64_t *I,
                             mge_error *err)
{
    int bad = krnn_setup(n, r);
    mge_status s = check_attrs(n, r, err);
    if (s)
        return s;
    if (bad) {
        const char *state = r->gru ? "[, h0]" : "[, h0, c0]";
        const char *lead = !r->grad ? "" : r->gru ? "dy, dh_n, " : "dy, dh_n, dc_n, ";
        return mge_error_set(err, MGE_ERR_INVALID,
                             "%s: %d inputs: expected %sx%s and %d params (num_layers=%lld, bidirectional=%s, "
                             "bias=%s)",
                             opname(n), n->nin, lead, state, r->nparams, (long long)r->L, r->D == 2 ? "true" : "false",
                             r->bias ? "true" : "false");
    }
    const mge_tdesc *x = &in[r->xi];
    if ((s = rnn_x(n, r, x, S, N, I, err)))
        return s;
    int64_t sd[3] = {r->D * r->L, *N, r->H};
    for (int k = 0; r->has_state && k < r->nstate; k++)
        if ((s = check_like(n, k ? "c0" : "h0", &in[r->xi + 1 + k], x->dtype, 3, sd,
                            " ([D*num_layers, N, hidden_size])", err)))
            return s;
    for (int64_t l = 0; l < r->L; l++)
        for (int64_t d = 0; d < r->D; d++)
            for (int k = 0; k < r->np; k++) {
                const mge_tdesc *p = &in[krnn_param(r, l, d, k)];
                int64_t pd[2];
                int nd = rnn_param_dims(r, l, k, *I, pd);
                int ok = p->dtype == x->dtype && p->ndim == nd && p->dims[0] == pd[0] && (nd == 1 || p->dims[1] == pd[1]);
                if (ok)
                    continue;
                char bp[96], be[96], extra[64] = "";
                if (k == 0)
                    snprintf(extra, sizeof extra, " and input size %lld", (long long)pd[1]);
                return mge_error_set(err, MGE_ERR_SHAPE, "%s.%s: expected %s for hidden_size=%lld%s, got %s", n->name,
                                     mge_rnn_param_name(l, d, krnn_kind(r, k)), mge_shape_str(x->dtype, nd, pd, be, sizeof be),
                                     (long long)r->H, extra, mge_tdesc_str(p, bp, sizeof bp));
            }
    return MGE_OK;
}

static void set3(mge_tdesc *o, mge_dtype dt, int64_t a, int64_t b, int64_t c)
{
    o->dtype = dt;
    o->ndim = 3;
    o->dims[0] = a;
    o->dims[1] = b;
    o->dims[2] = c;
}

/* A gradient input that may be a scalar (zeros) or of the given shape. */
static mge_status check_dgrad(const mge_node *n, const char *what, const mge_tdesc *t, mge_dtype dt,
                              const mge_tdesc *like, mge_error *err)
{
    if (t->ndim == 0 && mge_dtype_is_float(t->dtype))
        return MGE_OK;
    return check_like(n, what, t, dt, like->ndim, like->dims, " (or a scalar for zeros)", err);
}

mge_status mge_rnn_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    krnn r;
    int64_t S, N, I;
    mge_status s = rnn_common(n, in, &r, &S, &N, &I, err);
    if (s)
        return s;
    mge_dtype dt = in[r.xi].dtype;
    mge_tdesc y, hn;
    memset(&y, 0, sizeof y);
    memset(&hn, 0, sizeof hn);
    if (r.bf)
        set3(&y, dt, N, S, r.D * r.H);
    else
        set3(&y, dt, S, N, r.D * r.H);
    set3(&hn, dt, r.D * r.L, N, r.H);
    if (!r.grad) {
        int nout = n->nout < 1 ? 1 : n->nout > (r.gru ? 2 : 3) ? (r.gru ? 2 : 3) : n->nout;
        for (int o = 0; o < nout; o++)
            out[o] = o == 0 ? y : hn;
        return MGE_OK;
    }
    if ((s = check_dgrad(n, "dy", &in[0], dt, &y, err)) || (s = check_dgrad(n, "dh_n", &in[1], dt, &hn, err)) ||
        (!r.gru && (s = check_dgrad(n, "dc_n", &in[2], dt, &hn, err))))
        return s;
    int64_t total = 0;
    for (int k = r.pi; k < n->nin; k++)
        total += mge_tdesc_numel(&in[k]);
    out[0] = in[r.xi];
    out[0].known = 0;
    out[1] = hn;
    int o = 2;
    if (!r.gru)
        out[o++] = hn;
    memset(&out[o], 0, sizeof out[o]);
    out[o].dtype = dt;
    out[o].ndim = 1;
    out[o].dims[0] = total;
    return MGE_OK;
}

double mge_rnn_flops(const mge_node *n, const mge_tdesc *in, const mge_tdesc *out)
{
    (void)out;
    krnn r;
    if (krnn_setup(n, &r) || in[r.xi].ndim != 3)
        return 0;
    double S = (double)in[r.xi].dims[0], N = (double)in[r.xi].dims[1], I = (double)in[r.xi].dims[2];
    double f = 0;
    for (int64_t l = 0; l < r.L; l++) {
        double w = (double)krnn_in(&r, l, (int64_t)I);
        f += (double)r.D * S * N * ((double)r.G * (double)r.H * 2.0 * (w + (double)r.H) + 10.0 * (double)r.H);
    }
    return r.grad ? 3 * f : f;
}

mge_status mge_rnn_params(int op, int nattr, const mge_attr *attrs, const mge_tdesc *x, mge_param_spec *specs,
                          int *nspecs, mge_error *err)
{
    if (op != MGE_OP_LSTM && op != MGE_OP_GRU && op != MGE_OP_RNN)
        return mge_error_set(err, MGE_ERR_INVALID, "%s creates no parameters", mge_op_info(op)->name);
    mge_attr full[16];
    int nfull;
    mge_status s = mge_attrs_complete(op, nattr, attrs, full, &nfull, err);
    if (s)
        return s;
    mge_node fake = {.op = op, .nattr = nfull, .attrs = full, .nin = 1, .name = ""};
    krnn r;
    krnn_setup(&fake, &r);
    if ((s = check_attrs(&fake, &r, err)))
        return s;
    int64_t S, N, I;
    if ((s = rnn_x(&fake, &r, x, &S, &N, &I, err)))
        return s;
    /* PyTorch: every weight and bias uniform(-1/sqrt(H), 1/sqrt(H)) */
    char init[64];
    snprintf(init, sizeof init, "uniform(%.9g)", 1.0 / sqrt((double)r.H));
    mge_dtype dt = x->dtype;
    int k = 0;
    for (int64_t l = 0; l < r.L; l++)
        for (int64_t d = 0; d < r.D; d++)
            for (int j = 0; j < r.np; j++) {
                int64_t pd[2];
                int nd = rnn_param_dims(&r, l, j, I, pd);
                mge_param_spec_set(&specs[k++], mge_rnn_param_name(l, d, krnn_kind(&r, j)), MGE_VAL_PARAM, dt, nd,
                                   pd, init);
            }
    *nspecs = k;
    return MGE_OK;
}
