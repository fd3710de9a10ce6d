/* op_winograd.c — conv2d_winograd and winograd_weight (see ops.def): shape
 * inference and FLOPs. The Winograd F(m,3) matrices and weight transform
 * that the mge-opt pass, the kernels and the tests share are in
 * kernels/kshared.h.
 *
 * winograd_weight(w[O,C,3,3]) -> [(m+2)^2,O,C], m = tile; FLOPs those of
 * G g G^T per (o, c): 6 per entry of the a x 3 and the a x a products.
 *
 * conv2d_winograd(x[N,C,H,W], weight_t[(m+2)^2,out,C], bias[out]?,
 * residual[N,out,OH,OW]?) -> [N,out,OH,OW], OH = H + 2*pad_h - 2, with
 * m = tile. FLOPs are the direct 3x3 conv's (2*N*out*OH*OW*C*9, plus one
 * per output for each of bias, residual and act), not the fewer the
 * Winograd kernels do: the profile then compares with conv2d's FLOP/s.
 *
 * conv2d_winograd_nchwc and winograd_weight_nchwc: the same on blocked
 * tensors (see ops.def): shape inference and FLOPs.
 */
#include "internal.h"

#include <string.h>

static mge_status weight_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    const char *name = "winograd_weight";
    int64_t m = mge_node_int(n, MGE_KEY_tile, 4);
    if (!mge_winograd_matrices((int)m, NULL, NULL, NULL) || m != (int)m)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: tile=%lld: expected 2 or 4", name, (long long)m);
    if (n->nin != 1)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: %d inputs: expected 1", name, n->nin);
    const mge_tdesc *w = &in[0];
    if (w->dtype != MGE_F32 || w->ndim != 4 || w->dims[0] < 1 || w->dims[1] < 1 || w->dims[2] != 3 ||
        w->dims[3] != 3) {
        char bw[96];
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: w is %s: expected f32 [out,in,3,3]", name,
                             mge_tdesc_str(w, bw, sizeof bw));
    }
    int64_t a = m + 2;
    memset(out, 0, sizeof *out);
    out->dtype = MGE_F32;
    out->ndim = 3;
    out->dims[0] = a * a;
    out->dims[1] = w->dims[0];
    out->dims[2] = w->dims[1];
    return mge_shape_numel(out->ndim, out->dims, out->dtype, NULL, NULL, err);
}

/* winograd_weight_nchwc: winograd_weight's checks, then the blocked shape. */
static mge_status weight_nchwc_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    int64_t c = mge_node_int(n, MGE_KEY_block, 0);
    if (c < 1 || c > 64)
        return mge_error_set(err, MGE_ERR_INVALID, "winograd_weight_nchwc: block=%lld: expected 1 to 64",
                             (long long)c);
    mge_status s = weight_infer(n, in, out, err);
    if (s)
        return s;
    int64_t aa = out->dims[0], O = out->dims[1], C = out->dims[2];
    out->ndim = 5;
    out->dims[0] = aa;
    out->dims[1] = (O + c - 1) / c;
    out->dims[2] = (C + c - 1) / c;
    out->dims[3] = c;
    out->dims[4] = c;
    return mge_shape_numel(out->ndim, out->dims, out->dtype, NULL, NULL, err);
}

/* The attributes conv2d_winograd and conv2d_winograd_nchwc share: bias
 * and residual against the inputs, act, tile, pad and out. */
static mge_status conv_attrs(const mge_node *n, const char *name, int *bias, int *res, int64_t *m, int64_t *ph,
                             int64_t *pw, int64_t *O, mge_error *err)
{
    mge_status s = mge_fused_check_io(n, name, bias, res, err);
    if (s)
        return s;
    *m = mge_node_int(n, MGE_KEY_tile, 4);
    if (!mge_winograd_matrices((int)*m, NULL, NULL, NULL) || *m != (int)*m)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: tile=%lld: expected 2 or 4", name, (long long)*m);
    const mge_attr *pa = mge_node_attr(n, MGE_KEY_pad);
    if (pa && (pa->n < 1 || pa->n > 2))
        return mge_error_set(err, MGE_ERR_INVALID, "%s: 'pad' has %d values: expected 1 or 2 (h, w)", name, pa->n);
    *ph = mge_node_ints(n, MGE_KEY_pad, 0, 0), *pw = mge_node_ints(n, MGE_KEY_pad, 1, 0);
    *O = mge_node_int(n, MGE_KEY_out, 0);
    if (*ph < 0 || *pw < 0 || *ph > (1 << 30) || *pw > (1 << 30))
        return mge_error_set(err, MGE_ERR_INVALID, "%s: pad=[%lld,%lld]: expected values in [0, %d]", name,
                             (long long)*ph, (long long)*pw, 1 << 30);
    if (*O < 1)
        return mge_error_set(err, MGE_ERR_INVALID, "%s: out=%lld: expected at least 1", name, (long long)*O);
    return MGE_OK;
}

/* The output of either conv from x = in[0] (checked): [N,O,OH,OW], or
 * [N,ceil(O/c),OH,OW,c] for block c > 0; then the bias and residual. */
static mge_status conv_out(const char *name, const mge_tdesc *in, int bias, int res, int64_t ph, int64_t pw,
                           int64_t O, int64_t c, mge_tdesc *out, mge_error *err)
{
    const mge_tdesc *x = &in[0];
    char bx[96];
    mge_tdesc_str(x, bx, sizeof bx);
    int64_t OH = x->dims[2] + 2 * ph - 2, OW = x->dims[3] + 2 * pw - 2;
    if (OH < 1 || OW < 1)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x %s with pad=[%lld,%lld] is smaller than the 3x3 kernel",
                             name, bx, (long long)ph, (long long)pw);
    if (bias) {
        const mge_tdesc *b = &in[2];
        if (b->dtype != MGE_F32 || b->ndim != 1 || b->dims[0] != O) {
            char bb[96];
            return mge_error_set(err, MGE_ERR_SHAPE, "%s: bias %s: expected f32[%lld]", name,
                                 mge_tdesc_str(b, bb, sizeof bb), (long long)O);
        }
    }
    memset(out, 0, sizeof *out);
    out->dtype = MGE_F32;
    out->ndim = c ? 5 : 4;
    out->dims[0] = x->dims[0];
    out->dims[1] = c ? (O + c - 1) / c : O;
    out->dims[2] = OH;
    out->dims[3] = OW;
    out->dims[4] = c;
    mge_status s = mge_shape_numel(out->ndim, out->dims, out->dtype, NULL, NULL, err);
    if (s)
        return s;
    return res ? mge_fused_check_residual(name, &in[2 + bias], out, err) : MGE_OK;
}

static mge_status nchwc_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    const char *name = "conv2d_winograd_nchwc";
    int bias, res;
    int64_t m, ph, pw, O;
    mge_status s = conv_attrs(n, name, &bias, &res, &m, &ph, &pw, &O, err);
    if (s)
        return s;
    const mge_tdesc *x = &in[0], *w = &in[1];
    char bx[96], bw[96];
    mge_tdesc_str(x, bx, sizeof bx);
    mge_tdesc_str(w, bw, sizeof bw);
    if (x->ndim != 5 || x->dtype != MGE_F32 || x->dims[4] < 1 || x->dims[4] > 64)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is %s: expected f32 [N,Cb,H,W,c], c at most 64", name, bx);
    if ((s = mge_shape_numel(x->ndim, x->dims, x->dtype, NULL, NULL, err)))
        return s;
    int64_t a = m + 2, c = x->dims[4], Ob = (O + c - 1) / c;
    if (w->dtype != MGE_F32 || w->ndim != 5 || w->dims[0] != a * a || w->dims[1] != Ob || w->dims[2] != x->dims[1] ||
        w->dims[3] != c || w->dims[4] != c)
        return mge_error_set(err, MGE_ERR_SHAPE,
                             "%s: weight_t %s does not fit x %s with out=%lld tile=%lld: expected "
                             "f32[%lld,%lld,%lld,%lld,%lld]",
                             name, bw, bx, (long long)O, (long long)m, (long long)(a * a), (long long)Ob,
                             (long long)x->dims[1], (long long)c, (long long)c);
    return conv_out(name, in, bias, res, ph, pw, O, c, out, err);
}

mge_status mge_winograd_infer(const mge_node *n, const mge_tdesc *in, mge_tdesc *out, mge_error *err)
{
    if (n->op == MGE_OP_WINOGRAD_WEIGHT)
        return weight_infer(n, in, out, err);
    if (n->op == MGE_OP_WINOGRAD_WEIGHT_NCHWC)
        return weight_nchwc_infer(n, in, out, err);
    if (n->op == MGE_OP_CONV2D_WINOGRAD_NCHWC)
        return nchwc_infer(n, in, out, err);
    const char *name = "conv2d_winograd";
    int bias, res;
    int64_t m, ph, pw, O;
    mge_status s = conv_attrs(n, name, &bias, &res, &m, &ph, &pw, &O, err);
    if (s)
        return s;
    const mge_tdesc *x = &in[0], *w = &in[1];
    char bx[96], bw[96];
    mge_tdesc_str(x, bx, sizeof bx);
    mge_tdesc_str(w, bw, sizeof bw);
    if (x->ndim != 4 || x->dtype != MGE_F32)
        return mge_error_set(err, MGE_ERR_SHAPE, "%s: x is %s: expected f32 [N,C,H,W]", name, bx);
    s = mge_shape_numel(x->ndim, x->dims, x->dtype, NULL, NULL, err);
    if (s)
        return s;
    int64_t a = m + 2;
    if (w->dtype != MGE_F32 || w->ndim != 3 || w->dims[0] != a * a || w->dims[1] != O || w->dims[2] != x->dims[1])
        return mge_error_set(err, MGE_ERR_SHAPE,
                             "%s: weight_t %s does not fit x %s with out=%lld tile=%lld: expected f32[%lld,%lld,%lld]",
                             name, bw, bx, (long long)O, (long long)m, (long long)(a * a), (long long)O,
                             (long long)x->dims[1]);
    return conv_out(name, in, bias, res, ph, pw, O, 0, out, err);
}

double mge_winograd_flops(const mge_node *n, const mge_tdesc *in, const mge_tdesc *out)
{
    if (n->op == MGE_OP_WINOGRAD_WEIGHT || n->op == MGE_OP_WINOGRAD_WEIGHT_NCHWC) {
        if (in[0].ndim != 4)
            return 0;
        double a = (double)mge_node_int(n, MGE_KEY_tile, 4) + 2;
        return (double)in[0].dims[0] * (double)in[0].dims[1] * 6.0 * (a * 3 + a * a);
    }
    double outs, cin;
    if (n->op == MGE_OP_CONV2D_WINOGRAD_NCHWC) {
        /* the real channels: out, and x's blocks at full lanes */
        if (in[0].ndim != 5 || out[0].ndim != 5)
            return 0;
        outs = (double)out[0].dims[0] * (double)mge_node_int(n, MGE_KEY_out, 0) * (double)out[0].dims[2] *
               (double)out[0].dims[3];
        cin = (double)in[0].dims[1] * (double)in[0].dims[4];
    } else {
        if (in[0].ndim != 4 || out[0].ndim != 4)
            return 0;
        outs = mge_tdesc_count(&out[0]);
        cin = (double)in[0].dims[1];
    }
    int bias = (int)mge_node_int(n, MGE_KEY_bias, 1), res = (int)mge_node_int(n, MGE_KEY_residual, 0);
    const mge_attr *act = mge_node_attr(n, MGE_KEY_act);
    int has_act = act && act->n == 1 && act->i[0] != -1;
    return 2.0 * outs * cin * 9.0 + outs * (bias + res + has_act);
}
