/* onnx_ops_nn.c — ONNX converters for layers: ConvTranspose, the
 * normalizations (Layer, Group, Instance, Lp, MeanVariance), Pad, Resize and
 * Upsample, DepthToSpace / SpaceToDepth, 1-D MaxPool/AveragePool (for core;
 * Indices, integers and dilated averages on onnx_ops_pool3d.c's),
 * LpPool and GlobalLpPool (via average pooling and sums of |x|^p).
 *
 * Each maps onto mge ops only where the result is the same: Resize's
 * modes are compared with what mge's resize computes (PyTorch's
 * interpolate: nearest = floor(o * in/out), bilinear half_pixel or
 * align_corners), the rest is unsupported with the reason. */
#include "onnx.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------- small emitters */

static int binary_tmp(mge_onnx_ctx *c, mge_onnx_node *n, int op, int a, int b)
{
    int in[2] = {a, b};
    return mge_onnx_emit_tmp(c, n, op, 2, in, 0, NULL);
}

static int scalar_f32(mge_onnx_ctx *c, mge_onnx_node *n, double v)
{
    float f = (float)v;
    return mge_onnx_const_f32(c, n, 0, NULL, &f);
}

/* A reduction (mean, sum) over axes, dims kept. */
static int reduce_tmp(mge_onnx_ctx *c, mge_onnx_node *n, int op, int x, int nax, const int64_t *ax)
{
    mge_attr a[2] = {mge_onnx_ais(MGE_KEY_axis, nax, ax), mge_onnx_ab(MGE_KEY_keepdim, 1)};
    return mge_onnx_emit_tmp(c, n, op, 1, &x, 2, a);
}

static int known_dim(int64_t d)
{
    return d >= 0 && !mge_dim_is_symbol(d);
}

/* A new f32 constant of the given shape filled with v. */
static int fill_f32(mge_onnx_ctx *c, mge_onnx_node *n, int nd, const int64_t *dims, float v)
{
    mge_tensor t;
    memset(&t, 0, sizeof t);
    if (mge_tensor_alloc(&t, MGE_F32, nd, dims, c->err))
        return -1;
    float *p = t.data;
    for (int64_t i = 0, cnt = mge_tensor_numel(&t); i < cnt; i++)
        p[i] = v;
    return mge_onnx_const(c, n, &t);
}

static mge_status done(mge_onnx_ctx *c, int k)
{
    return k < 0 ? (c->err->code ? c->err->code : MGE_ERR_INVALID) : MGE_OK;
}

/* Whether output k is wanted (named). */
static int wants(mge_onnx_node *n, int k)
{
    return k < (int)n->n_output && n->output[k] && *n->output[k];
}

static mge_status need_f32(mge_onnx_ctx *c, mge_onnx_node *n, int x)
{
    const mge_value *v = mge_onnx_value(c, x);
    if (v->dtype != MGE_F32)
        return mge_onnx_unsupported(c, n, "%s over %s (mge computes it in f32)", n->op_type, mge_dtype_name(v->dtype));
    return MGE_OK;
}

/* ---------------------------------------------------------------- ConvTranspose */

/* ONNX's output per spatial dim: stride*(in-1) + output_padding +
 * (k-1)*dilation + 1 - pad_begin - pad_end. mge's conv_transpose2d takes
 * symmetric pads and output_padding below the stride or dilation; other
 * pads become a crop (or zero extension) of the full output by a pad node
 * before the bias is added. 1-D runs as 2-D over a unit height. */
static mge_status conv_convtranspose(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x = mge_onnx_in(c, n, 0), w = mge_onnx_in(c, n, 1), b = mge_onnx_in(c, n, 2);
    if (x < 0 || w < 0)
        return mge_onnx_fail(c, n, "expected inputs X and W");
    const mge_value *xv = mge_onnx_value(c, x), *wv = mge_onnx_value(c, w);
    int rank = xv->ndim, nsp = rank - 2;
    if (nsp < 1)
        return mge_onnx_fail(c, n, "X has rank %d: expected at least 3", rank);
    if (nsp > 3)
        return mge_onnx_unsupported(c, n, "a %d-D transposed convolution (mge has 1-D to 3-D)", nsp);
    if (wv->ndim != rank)
        return mge_onnx_fail(c, n, "W has rank %d, X rank %d", wv->ndim, rank);
    for (int i = 0; i < rank; i++)
        if (!known_dim(wv->dims[i]) || wv->dims[i] < 1)
            return mge_onnx_unsupported(c, n, "W's shape is not known at import");
    mge_status st;
    if ((st = need_f32(c, n, x)))
        return st;
    int64_t group = mge_onnx_attr_i(n, "group", 1);
    if (group < 1 || wv->dims[0] % group)
        return mge_onnx_fail(c, n, "group %lld does not divide W's %lld input channels", (long long)group,
                             (long long)wv->dims[0]);
    if (known_dim(xv->dims[1]) && xv->dims[1] != wv->dims[0])
        return mge_onnx_fail(c, n, "X has %lld channels, W %lld", (long long)xv->dims[1], (long long)wv->dims[0]);
    int64_t M = wv->dims[1] * group;
    int64_t k[3], s[3], d[3], op[3], pb[3], pe[3], t[6];
    for (int i = 0; i < nsp; i++) {
        k[i] = wv->dims[2 + i];
        s[i] = d[i] = 1;
        op[i] = pb[i] = pe[i] = 0;
    }
    int cnt;
    if ((cnt = mge_onnx_attr_ints(n, "kernel_shape", t, 6)) >= 0) {
        if (cnt != nsp)
            return mge_onnx_fail(c, n, "kernel_shape has %d values: expected %d", cnt, nsp);
        for (int i = 0; i < nsp; i++)
            if (t[i] != k[i])
                return mge_onnx_fail(c, n, "kernel_shape disagrees with W's shape");
    }
    static const char *const names[3] = {"strides", "dilations", "output_padding"};
    int64_t *dst[3] = {s, d, op};
    for (int a = 0; a < 3; a++)
        if ((cnt = mge_onnx_attr_ints(n, names[a], t, 6)) >= 0) {
            if (cnt != nsp)
                return mge_onnx_fail(c, n, "%s has %d values: expected %d", names[a], cnt, nsp);
            for (int i = 0; i < nsp; i++)
                dst[a][i] = t[i];
        }
    for (int i = 0; i < nsp; i++)
        if (s[i] < 1 || d[i] < 1 || op[i] < 0 || s[i] > (1 << 20) || d[i] > (1 << 20) || op[i] > (1 << 20))
            return mge_onnx_fail(c, n, "stride %lld, dilation %lld, output_padding %lld of dim %d", (long long)s[i],
                                 (long long)d[i], (long long)op[i], i);
    char ap[32];
    mge_onnx_attr_s(n, "auto_pad", "NOTSET", ap, sizeof ap);
    int64_t oshape[3];
    int have_os = mge_onnx_attr_ints(n, "output_shape", t, 6);
    if (have_os >= 0) {
        /* output_shape may list the spatial dims or all of them */
        if (have_os != nsp && have_os != rank)
            return mge_onnx_fail(c, n, "output_shape has %d values: expected %d", have_os, nsp);
        for (int i = 0; i < nsp; i++)
            oshape[i] = t[have_os - nsp + i];
    }
    int same = strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0;
    if (have_os >= 0 || same) {
        for (int i = 0; i < nsp; i++) {
            int64_t in = xv->dims[2 + i];
            if (!known_dim(in))
                return mge_onnx_unsupported(c, n, "%s over a spatial dim not known at import",
                                            have_os >= 0 ? "output_shape" : "auto_pad SAME");
            int64_t want = have_os >= 0 ? oshape[i] : in * s[i];
            int64_t tot = s[i] * (in - 1) + op[i] + (k[i] - 1) * d[i] + 1 - want;
            if (tot < 0 && have_os < 0)
                return mge_onnx_unsupported(c, n, "auto_pad %s where the output would exceed the full transposed "
                                            "convolution (runtimes differ: zeros added or not)", ap);
            /* SAME_UPPER puts the smaller half first; halves floor (as the
             * reference: a negative total extends the output) */
            int64_t half = tot >= 0 ? tot / 2 : -((-tot + 1) / 2);
            if (strcmp(ap, "SAME_UPPER") == 0) {
                pb[i] = half;
                pe[i] = tot - half;
            } else {
                pb[i] = tot - half;
                pe[i] = half;
            }
        }
    } else if (strcmp(ap, "NOTSET") == 0) {
        if ((cnt = mge_onnx_attr_ints(n, "pads", t, 6)) >= 0) {
            if (cnt != 2 * nsp)
                return mge_onnx_fail(c, n, "pads has %d values: expected %d", cnt, 2 * nsp);
            for (int i = 0; i < nsp; i++) {
                pb[i] = t[i];
                pe[i] = t[nsp + i];
                if (pb[i] < 0 || pe[i] < 0)
                    return mge_onnx_fail(c, n, "negative pads");
            }
        }
    } else if (strcmp(ap, "VALID") != 0)
        return mge_onnx_fail(c, n, "auto_pad '%s': expected NOTSET, SAME_UPPER, SAME_LOWER or VALID", ap);

    if (nsp == 3) {
        mge_onnx_make_param(c, w, 0);
        if (b >= 0)
            mge_onnx_make_param(c, b, 0);
        return mge_onnx_convtranspose3d(c, n, x, w, b, M, group, k, s, d, op, pb, pe);
    }
    /* the direct form: symmetric pads, output_padding below stride or dilation */
    int direct = 1;
    for (int i = 0; i < nsp; i++)
        direct &= pb[i] == pe[i] && pb[i] >= 0 && (op[i] == 0 || op[i] < s[i] || op[i] < d[i]);
    int xin = x, win = w;
    mge_onnx_make_param(c, w, 0);
    if (b >= 0)
        mge_onnx_make_param(c, b, 0);
    if (nsp == 1) {
        /* [N,C,L] -> [N,C,1,L]; W [C,M/g,k] -> [C,M/g,1,k] */
        int64_t xs[4] = {0, 0, 1, -1}, ws[4] = {wv->dims[0], wv->dims[1], 1, wv->dims[2]};
        if ((xin = mge_onnx_reshape_tmp(c, n, x, 4, xs)) < 0 || (win = mge_onnx_reshape_tmp(c, n, w, 4, ws)) < 0)
            return done(c, -1);
    }
    int64_t k2[2], s2[2], d2[2], op2[2], p2[2];
    for (int i = 0; i < 2; i++) {
        int j = nsp == 1 ? i - 1 : i;
        k2[i] = j < 0 ? 1 : k[j];
        s2[i] = j < 0 ? 1 : s[j];
        d2[i] = j < 0 ? 1 : d[j];
        op2[i] = j < 0 || !direct ? 0 : op[j];
        p2[i] = j < 0 || !direct ? 0 : pb[j];
    }
    int bias_in = direct && b >= 0;
    mge_attr a[8] = {mge_onnx_ai(MGE_KEY_out, M),           mge_onnx_ais(MGE_KEY_kernel, 2, k2),
                     mge_onnx_ais(MGE_KEY_stride, 2, s2),   mge_onnx_ais(MGE_KEY_pad, 2, p2),
                     mge_onnx_ais(MGE_KEY_output_padding, 2, op2), mge_onnx_ais(MGE_KEY_dilation, 2, d2),
                     mge_onnx_ai(MGE_KEY_groups, group),    mge_onnx_ab(MGE_KEY_bias, bias_in)};
    int in[3] = {xin, win, b};
    int last = nsp == 1 || !direct || (b >= 0 && !bias_in);
    if (!last)
        return done(c, mge_onnx_emit(c, n, MGE_OP_CONV_TRANSPOSE2D, bias_in ? 3 : 2, in, 8, a, 1));
    int y = mge_onnx_emit_tmp(c, n, MGE_OP_CONV_TRANSPOSE2D, bias_in ? 3 : 2, in, 8, a);
    if (y < 0)
        return done(c, -1);
    if (!direct) {
        /* crop pb at the start, pe - output_padding at the end (negative: zeros added) */
        int64_t nb[2], ne[2];
        for (int i = 0; i < 2; i++) {
            int j = nsp == 1 ? i - 1 : i;
            nb[i] = j < 0 ? 0 : -pb[j];
            ne[i] = j < 0 ? 0 : op[j] - pe[j];
        }
        if ((y = mge_onnx_pad_input(c, n, y, 2, nb, ne, 0.0)) < 0)
            return done(c, -1);
        if (b >= 0) {
            int64_t bs[3] = {M, 1, 1};
            int bb = mge_onnx_reshape_tmp(c, n, b, 3, bs);
            if (bb < 0 || (y = binary_tmp(c, n, MGE_OP_ADD, y, bb)) < 0)
                return done(c, -1);
        }
    }
    if (nsp == 1) {
        int64_t ys[3] = {0, 0, -1};
        mge_attr ra[1] = {mge_onnx_ais(MGE_KEY_shape, 3, ys)};
        return done(c, mge_onnx_emit(c, n, MGE_OP_RESHAPE, 1, &y, 1, ra, 1));
    }
    return mge_onnx_alias(c, n, 0, y);
}

/* ---------------------------------------------------------------- normalizations */

/* Mean and InvStdDev of LayerNormalization over axes ax.. (dims kept). */
static mge_status layernorm_stats(mge_onnx_ctx *c, mge_onnx_node *n, int x, int rank, int ax, double eps)
{
    int64_t axes[MGE_MAX_DIMS];
    for (int i = ax; i < rank; i++)
        axes[i - ax] = i;
    int m = reduce_tmp(c, n, MGE_OP_MEAN, x, rank - ax, axes);
    if (m < 0)
        return done(c, -1);
    mge_status st;
    if (wants(n, 1) && (st = mge_onnx_alias(c, n, 1, m)))
        return st;
    if (!wants(n, 2))
        return MGE_OK;
    int dd = binary_tmp(c, n, MGE_OP_SUB, x, m), sq, var, e, r;
    if (dd < 0 || (sq = binary_tmp(c, n, MGE_OP_MUL, dd, dd)) < 0 ||
        (var = reduce_tmp(c, n, MGE_OP_MEAN, sq, rank - ax, axes)) < 0 || (e = scalar_f32(c, n, eps)) < 0 ||
        (var = binary_tmp(c, n, MGE_OP_ADD, var, e)) < 0 ||
        (r = mge_onnx_emit_tmp(c, n, MGE_OP_RSQRT, 1, &var, 0, NULL)) < 0)
        return done(c, -1);
    return mge_onnx_alias(c, n, 2, r);
}

static int same_dims(const mge_value *v, int nd, const int64_t *dims)
{
    if (v->ndim != nd)
        return 0;
    for (int i = 0; i < nd; i++)
        if (v->dims[i] != dims[i])
            return 0;
    return 1;
}

static mge_status conv_layernorm(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x = mge_onnx_in(c, n, 0), sc = mge_onnx_in(c, n, 1), b = mge_onnx_in(c, n, 2);
    if (x < 0 || sc < 0)
        return mge_onnx_fail(c, n, "expected inputs X and Scale");
    mge_status st;
    if ((st = need_f32(c, n, x)))
        return st;
    const mge_value *xv = mge_onnx_value(c, x);
    int rank = xv->ndim;
    int ax = mge_onnx_axis(mge_onnx_attr_i(n, "axis", -1), rank);
    if (ax < 0)
        return mge_onnx_fail(c, n, "axis %lld is out of range for rank %d", (long long)mge_onnx_attr_i(n, "axis", -1),
                             rank);
    double eps = mge_onnx_attr_f(n, "epsilon", 1e-5);
    int nd = rank - ax;
    const int64_t *nshape = xv->dims + ax;
    int known = 1;
    for (int i = 0; i < nd; i++)
        known &= known_dim(nshape[i]);
    const mge_value *sv = mge_onnx_value(c, sc), *bv = b >= 0 ? mge_onnx_value(c, b) : NULL;
    if (sv->dtype != MGE_F32 || (bv && bv->dtype != MGE_F32))
        return mge_onnx_unsupported(c, n, "Scale or B not f32");
    /* the layer takes weight and bias of the normalized shape exactly; a
     * broadcasting Scale or B is applied after, by mul and add */
    int wexact = same_dims(sv, nd, nshape), bexact = !bv || same_dims(bv, nd, nshape);
    int w = sc, bb = b;
    if (!wexact || !bexact || b < 0) {
        if (!known)
            return mge_onnx_unsupported(c, n, "a broadcasting Scale or an absent B over dims not known at import");
        if (!wexact && (w = fill_f32(c, n, nd, nshape, 1.0f)) < 0)
            return done(c, -1);
        if ((!bexact || b < 0) && (bb = fill_f32(c, n, nd, nshape, 0.0f)) < 0)
            return done(c, -1);
    }
    if (wexact)
        mge_onnx_make_param(c, sc, 0);
    if (b >= 0 && bexact)
        mge_onnx_make_param(c, b, 0);
    int in[3] = {x, w, bb};
    mge_attr a[2] = {mge_onnx_ais(MGE_KEY_axis, 1, (int64_t[]){ax}), mge_onnx_af(MGE_KEY_eps, eps)};
    if (wexact && bexact) {
        if (mge_onnx_emit(c, n, MGE_OP_LAYERNORM, 3, in, 2, a, 1) < 0)
            return done(c, -1);
    } else {
        int y = mge_onnx_emit_tmp(c, n, MGE_OP_LAYERNORM, 3, in, 2, a);
        if (y < 0 || (!wexact && (y = binary_tmp(c, n, MGE_OP_MUL, y, sc)) < 0) ||
            (!bexact && (y = binary_tmp(c, n, MGE_OP_ADD, y, b)) < 0))
            return done(c, -1);
        if ((st = mge_onnx_alias(c, n, 0, y)))
            return st;
    }
    if (wants(n, 1) || wants(n, 2))
        return layernorm_stats(c, n, x, rank, ax, eps);
    return MGE_OK;
}

/* opset 18: scale and bias per group, made per channel when constant;
 * opset 21: per channel. */
static mge_status conv_groupnorm(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x = mge_onnx_in(c, n, 0), sc = mge_onnx_in(c, n, 1), b = mge_onnx_in(c, n, 2);
    if (x < 0 || sc < 0 || b < 0)
        return mge_onnx_fail(c, n, "expected inputs X, scale and bias");
    mge_status st;
    if ((st = need_f32(c, n, x)))
        return st;
    const mge_value *xv = mge_onnx_value(c, x);
    if (xv->ndim < 3)
        return mge_onnx_fail(c, n, "X has rank %d: expected at least 3", xv->ndim);
    int64_t G = mge_onnx_attr_i(n, "num_groups", 0), C = xv->dims[1];
    if (G < 1)
        return mge_onnx_fail(c, n, "num_groups %lld: expected >= 1", (long long)G);
    if (!known_dim(C))
        return mge_onnx_unsupported(c, n, "the channel count is not known at import");
    if (C % G)
        return mge_onnx_fail(c, n, "num_groups %lld does not divide %lld channels", (long long)G, (long long)C);
    int in[3] = {x, sc, b};
    if (c->opset < 21 && G != C) {
        /* per group: repeat each group's value over its channels */
        for (int k = 1; k < 3; k++) {
            const mge_tensor *t = mge_onnx_data(c, in[k]);
            if (!t) {
                /* at run time: [G] -> [G, 1] -> [G, C/G] -> [C] */
                const mge_value *v = mge_onnx_value(c, in[k]);
                if (v->ndim != 1 || v->dims[0] != G || v->dtype != MGE_F32)
                    return mge_onnx_fail(c, n, "%s must be f32[%lld]", k == 1 ? "scale" : "bias", (long long)G);
                int64_t s1[2] = {G, 1}, s2[2] = {G, C / G};
                mge_attr ea[1] = {mge_onnx_ais(MGE_KEY_shape, 2, s2)};
                int y = mge_onnx_reshape_tmp(c, n, in[k], 2, s1);
                if (y < 0 || (y = mge_onnx_emit_tmp(c, n, MGE_OP_EXPAND, 1, &y, 1, ea)) < 0 ||
                    (in[k] = mge_onnx_reshape_tmp(c, n, y, 1, &C)) < 0)
                    return done(c, -1);
                continue;
            }
            if (t->dtype != MGE_F32 || mge_tensor_numel(t) != G)
                return mge_onnx_fail(c, n, "%s must be f32[%lld]", k == 1 ? "scale" : "bias", (long long)G);
            float v[4096];
            if (C > 4096)
                return mge_onnx_unsupported(c, n, "more than 4096 channels");
            for (int64_t ch = 0; ch < C; ch++)
                v[ch] = ((const float *)t->data)[ch / (C / G)];
            if ((in[k] = mge_onnx_const_f32(c, n, 1, &C, v)) < 0)
                return done(c, -1);
        }
    } else {
        mge_onnx_make_param(c, sc, 0);
        mge_onnx_make_param(c, b, 0);
    }
    mge_attr a[2] = {mge_onnx_ai(MGE_KEY_num_groups, G), mge_onnx_af(MGE_KEY_eps, mge_onnx_attr_f(n, "epsilon", 1e-5))};
    return done(c, mge_onnx_emit(c, n, MGE_OP_GROUP_NORM, 3, in, 2, a, 1));
}

static mge_status conv_instancenorm(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int in[3] = {mge_onnx_in(c, n, 0), mge_onnx_in(c, n, 1), mge_onnx_in(c, n, 2)};
    if (in[0] < 0 || in[1] < 0 || in[2] < 0)
        return mge_onnx_fail(c, n, "expected inputs input, scale and B");
    mge_status st;
    if ((st = need_f32(c, n, in[0])))
        return st;
    if (mge_onnx_value(c, in[0])->ndim < 3)
        return mge_onnx_fail(c, n, "input has rank %d: expected at least 3", mge_onnx_value(c, in[0])->ndim);
    mge_onnx_make_param(c, in[1], 0);
    mge_onnx_make_param(c, in[2], 0);
    mge_attr a[2] = {mge_onnx_af(MGE_KEY_eps, mge_onnx_attr_f(n, "epsilon", 1e-5)), mge_onnx_ab(MGE_KEY_affine, 1)};
    return done(c, mge_onnx_emit(c, n, MGE_OP_INSTANCE_NORM, 3, in, 2, a, 1));
}

/* x / ||x||_p along axis (p 1 or 2). */
static mge_status conv_lpnorm(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x = mge_onnx_in(c, n, 0);
    if (x < 0)
        return mge_onnx_fail(c, n, "no input");
    mge_status st;
    if ((st = need_f32(c, n, x)))
        return st;
    int rank = mge_onnx_value(c, x)->ndim;
    int ax = mge_onnx_axis(mge_onnx_attr_i(n, "axis", -1), rank);
    int64_t p = mge_onnx_attr_i(n, "p", 2);
    if (ax < 0)
        return mge_onnx_fail(c, n, "axis out of range for rank %d", rank);
    if (p != 1 && p != 2)
        return mge_onnx_fail(c, n, "p %lld: expected 1 or 2", (long long)p);
    int64_t axes[1] = {ax};
    int t = p == 1 ? mge_onnx_emit_tmp(c, n, MGE_OP_ABS, 1, &x, 0, NULL) : binary_tmp(c, n, MGE_OP_MUL, x, x);
    if (t < 0 || (t = reduce_tmp(c, n, MGE_OP_SUM, t, 1, axes)) < 0 ||
        (p == 2 && (t = mge_onnx_emit_tmp(c, n, MGE_OP_SQRT, 1, &t, 0, NULL)) < 0))
        return done(c, -1);
    int in[2] = {x, t};
    return done(c, mge_onnx_emit(c, n, MGE_OP_DIV, 2, in, 0, NULL, 1));
}

/* (X - E[X]) / (sqrt(E[(X - E[X])^2]) + 1e-9) over axes (the function's
 * epsilon). */
static mge_status conv_mvn(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x = mge_onnx_in(c, n, 0);
    if (x < 0)
        return mge_onnx_fail(c, n, "no input");
    mge_status st;
    if ((st = need_f32(c, n, x)))
        return st;
    int rank = mge_onnx_value(c, x)->ndim;
    int64_t axes[MGE_MAX_DIMS] = {0, 2, 3};
    int nax = mge_onnx_attr_ints(n, "axes", axes, MGE_MAX_DIMS);
    if (nax < 0)
        nax = 3;
    if (nax == 0 || nax > rank)
        return mge_onnx_fail(c, n, "%d axes for rank %d", nax, rank);
    for (int i = 0; i < nax; i++)
        if ((axes[i] = mge_onnx_axis(axes[i], rank)) < 0)
            return mge_onnx_fail(c, n, "axis out of range for rank %d", rank);
    int m = reduce_tmp(c, n, MGE_OP_MEAN, x, nax, axes), dd, sq, var, sd, e;
    if (m < 0 || (dd = binary_tmp(c, n, MGE_OP_SUB, x, m)) < 0 || (sq = binary_tmp(c, n, MGE_OP_MUL, dd, dd)) < 0 ||
        (var = reduce_tmp(c, n, MGE_OP_MEAN, sq, nax, axes)) < 0 ||
        (sd = mge_onnx_emit_tmp(c, n, MGE_OP_SQRT, 1, &var, 0, NULL)) < 0 || (e = scalar_f32(c, n, 1e-9)) < 0 ||
        (sd = binary_tmp(c, n, MGE_OP_ADD, sd, e)) < 0)
        return done(c, -1);
    int in[2] = {dd, sd};
    return done(c, mge_onnx_emit(c, n, MGE_OP_DIV, 2, in, 0, NULL, 1));
}

/* ---------------------------------------------------------------- Pad */

static mge_status conv_pad(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x = mge_onnx_in(c, n, 0);
    if (x < 0)
        return mge_onnx_fail(c, n, "no input");
    const mge_value *xv = mge_onnx_value(c, x);
    int rank = xv->ndim;
    char mode[32];
    mge_onnx_attr_s(n, "mode", "constant", mode, sizeof mode);
    int64_t p[2 * MGE_MAX_DIMS], full[2 * MGE_MAX_DIMS];
    int np;
    double value = 0;
    mge_status st;
    int64_t axes[MGE_MAX_DIMS];
    int nax = -1;
    if (c->opset < 11) {
        if ((np = mge_onnx_attr_ints(n, "pads", p, 2 * MGE_MAX_DIMS)) < 0)
            return mge_onnx_fail(c, n, "pads is required");
        value = mge_onnx_attr_f(n, "value", 0.0);
    } else {
        int pv = mge_onnx_in(c, n, 1), cv = mge_onnx_in(c, n, 2), av = mge_onnx_in(c, n, 3);
        if (pv < 0)
            return mge_onnx_fail(c, n, "the pads input is required");
        if ((st = mge_onnx_known_ints(c, n, pv, "pads", p, 2 * MGE_MAX_DIMS, &np)))
            return st;
        if (cv >= 0) {
            double v[2];
            int cnt;
            if ((st = mge_onnx_known(c, n, cv, "constant_value", v, 2, &cnt)))
                return st;
            if (cnt > 1)
                return mge_onnx_fail(c, n, "constant_value has %d elements: expected a scalar", cnt);
            if (cnt == 1)
                value = v[0];
        }
        if (av >= 0) {
            if ((st = mge_onnx_known_ints(c, n, av, "axes", axes, MGE_MAX_DIMS, &nax)))
                return st;
            for (int i = 0; i < nax; i++)
                if ((axes[i] = mge_onnx_axis(axes[i], rank)) < 0)
                    return mge_onnx_fail(c, n, "axes out of range for rank %d", rank);
        }
    }
    int naxes = nax >= 0 ? nax : rank;
    if (np != 2 * naxes)
        return mge_onnx_fail(c, n, "pads has %d values: expected %d", np, 2 * naxes);
    for (int i = 0; i < 2 * rank; i++)
        full[i] = 0;
    for (int i = 0; i < naxes; i++) {
        int a = nax >= 0 ? (int)axes[i] : i;
        full[a] = p[i];
        full[rank + a] = p[naxes + i];
    }
    int mm;
    if (strcmp(mode, "constant") == 0)
        mm = mge_key_enum_lookup(MGE_KEY_mode, "constant", 8);
    else if (strcmp(mode, "reflect") == 0)
        mm = mge_key_enum_lookup(MGE_KEY_mode, "reflect", 7);
    else if (strcmp(mode, "edge") == 0)
        mm = mge_key_enum_lookup(MGE_KEY_mode, "replicate", 9);
    else if (strcmp(mode, "wrap") == 0)
        return mge_onnx_unsupported(c, n, "mode wrap (mge pads constant, reflect or replicate)");
    else
        return mge_onnx_fail(c, n, "mode '%s': expected constant, reflect, edge or wrap", mode);
    /* the padded dims from the first with a pad on: mge's pads name the trailing k */
    int first = rank;
    for (int i = 0; i < rank; i++)
        if (full[i] || full[rank + i]) {
            first = i;
            break;
        }
    if (first == rank)
        return mge_onnx_alias(c, n, 0, x);
    int k = rank - first;
    if (2 * k > MGE_MAX_DIMS)
        return mge_onnx_unsupported(c, n, "padding %d trailing dims (mge pads up to %d)", k, MGE_MAX_DIMS / 2);
    if (strcmp(mode, "constant") != 0) {
        if (k > 3)
            return mge_onnx_unsupported(c, n, "mode %s over %d trailing dims (mge: 1 to 3)", mode, k);
        for (int i = first; i < rank; i++)
            if (full[i] < 0 || full[rank + i] < 0)
                return mge_onnx_unsupported(c, n, "negative pads with mode %s", mode);
    }
    int64_t fp[2 * MGE_MAX_DIMS];
    for (int j = 0; j < k; j++) {
        fp[2 * j] = full[rank - 1 - j];
        fp[2 * j + 1] = full[2 * rank - 1 - j];
    }
    mge_attr a[3] = {mge_onnx_ais(MGE_KEY_pads, 2 * k, fp), mge_onnx_ai(MGE_KEY_mode, mm), mge_onnx_af(MGE_KEY_value, value)};
    return done(c, mge_onnx_emit(c, n, MGE_OP_PAD, 1, &x, 3, a, 1));
}

/* ---------------------------------------------------------------- Resize, Upsample */

/* The mge resize of x [N,C,H,W] to scales sc[4] or sizes sz[4] (one NULL)
 * in mge's mode (nearest 0, bilinear 1, bicubic 2: with the node's
 * cubic_coeff_a and exclude_outside) with align_corners. */
static mge_status emit_resize(mge_onnx_ctx *c, mge_onnx_node *n, int x, const double *sc, const int64_t *sz,
                              int bilinear, int align)
{
    static const char *const modes[3] = {"nearest", "bilinear", "bicubic"};
    mge_attr a[5];
    int na = 3;
    a[0] = mge_onnx_ai(MGE_KEY_mode, mge_key_enum_lookup(MGE_KEY_mode, modes[bilinear], strlen(modes[bilinear])));
    a[1] = mge_onnx_ab(MGE_KEY_align_corners, align);
    if (bilinear == 2) {
        a[3] = mge_onnx_af(MGE_KEY_cubic_a, mge_onnx_attr_f(n, "cubic_coeff_a", -0.75));
        a[4] = mge_onnx_ab(MGE_KEY_exclude_outside, mge_onnx_attr_i(n, "exclude_outside", 0) != 0);
        na = 5;
    }
    if (sc) {
        memset(&a[2], 0, sizeof a[2]);
        a[2].key = MGE_KEY_scales;
        a[2].n = 2;
        mge_attr_float_set(&a[2], 0, sc[2]);
        mge_attr_float_set(&a[2], 1, sc[3]);
    } else {
        a[2] = mge_onnx_ais(MGE_KEY_size, 2, sz + 2);
    }
    return done(c, mge_onnx_emit(c, n, MGE_OP_RESIZE, 1, &x, na, a, 1));
}

/* Scales (or sizes) of the 4 dims: N and C unscaled. */
static mge_status check_nc(mge_onnx_ctx *c, mge_onnx_node *n, const mge_value *xv, const double *sc,
                           const int64_t *sz)
{
    for (int i = 0; i < 2; i++)
        if (sc ? sc[i] != 1.0 : !(sz[i] == xv->dims[i]))
            return mge_onnx_unsupported(c, n, "resizing dim %d (mge resizes H and W of NCHW)", i);
    return MGE_OK;
}

static int is_int(double v)
{
    return v >= 1 && v == floor(v);
}

static mge_status conv_resize(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x = mge_onnx_in(c, n, 0);
    if (x < 0)
        return mge_onnx_fail(c, n, "no input");
    mge_status st;
    if ((st = need_f32(c, n, x)))
        return st;
    const mge_value *xv = mge_onnx_value(c, x);
    int rank = xv->ndim;
    if (rank != 4)
        return mge_onnx_unsupported(c, n, "a rank-%d input (mge resizes NCHW)", rank);
    char mode[32], ctm[40], nm[40], kar[32];
    mge_onnx_attr_s(n, "mode", "nearest", mode, sizeof mode);
    mge_onnx_attr_s(n, "coordinate_transformation_mode", "half_pixel", ctm, sizeof ctm);
    mge_onnx_attr_s(n, "nearest_mode", "round_prefer_floor", nm, sizeof nm);
    mge_onnx_attr_s(n, "keep_aspect_ratio_policy", "stretch", kar, sizeof kar);
    int isnear = strcmp(mode, "nearest") == 0, islin = strcmp(mode, "linear") == 0, iscub = strcmp(mode, "cubic") == 0;
    if (!isnear && !islin && !iscub)
        return mge_onnx_fail(c, n, "mode '%s': expected nearest, linear or cubic", mode);
    double sc[4] = {1, 1, 1, 1};
    int64_t sz[4];
    int have_sc = 0, have_sz = 0;
    int si = c->opset < 11 ? 1 : 2, zi = c->opset < 11 ? -1 : 3;
    int sv = mge_onnx_in(c, n, si), zv = zi >= 0 ? mge_onnx_in(c, n, zi) : -1;
    int64_t axes[4] = {0, 1, 2, 3};
    int nax = mge_onnx_attr_ints(n, "axes", axes, 4);
    if (nax < 0)
        nax = 4;
    if (nax < 1 || nax > 4)
        return mge_onnx_fail(c, n, "axes has %d values for rank 4", nax);
    for (int i = 0; i < nax; i++)
        if ((axes[i] = mge_onnx_axis(axes[i], rank)) < 0)
            return mge_onnx_fail(c, n, "axes out of range");
    for (int i = 0; i < 4; i++)
        sz[i] = xv->dims[i];
    if (sv >= 0) {
        double v[4];
        int cnt;
        if ((st = mge_onnx_known(c, n, sv, "scales", v, 4, &cnt)))
            return st;
        if (cnt) {
            if (cnt != nax)
                return mge_onnx_fail(c, n, "scales has %d values: expected %d", cnt, nax);
            for (int i = 0; i < nax; i++)
                if (!(v[i] > 0))
                    return mge_onnx_fail(c, n, "scales must be positive");
                else
                    sc[axes[i]] = v[i];
            have_sc = 1;
        }
    }
    if (zv >= 0) {
        int64_t v[4];
        int cnt;
        if ((st = mge_onnx_known_ints(c, n, zv, "sizes", v, 4, &cnt)))
            return st;
        if (cnt) {
            if (cnt != nax)
                return mge_onnx_fail(c, n, "sizes has %d values: expected %d", cnt, nax);
            for (int i = 0; i < nax; i++)
                if (v[i] < 1)
                    return mge_onnx_fail(c, n, "sizes must be positive");
                else
                    sz[axes[i]] = v[i];
            have_sz = 1;
        }
    }
    if (have_sc == have_sz)
        return mge_onnx_fail(c, n, "needs exactly one of scales and sizes");
    if ((st = check_nc(c, n, xv, have_sc ? sc : NULL, have_sz ? sz : NULL)))
        return st;
    if (have_sz && strcmp(kar, "stretch") != 0)
        return mge_onnx_unsupported(c, n, "keep_aspect_ratio_policy %s", kar);
    /* the scales as ONNX's coordinate formulas use them */
    double f[2];
    int up = 1, integer = 1, known = 1;
    for (int i = 0; i < 2; i++) {
        int64_t in = xv->dims[2 + i];
        if (have_sc)
            f[i] = sc[2 + i];
        else if (known_dim(in) && in > 0)
            f[i] = (double)sz[2 + i] / (double)in;
        else
            known = 0, f[i] = 0;
        /* with scales these need no input dims */
        up &= (have_sc || known) && f[i] >= 1;
        integer &= have_sc ? is_int(f[i]) : known && sz[2 + i] % in == 0;
    }
    if (mge_onnx_attr_i(n, "antialias", 0) && !up)
        return mge_onnx_unsupported(c, n, "antialias = 1 when downscaling");
    if (c->opset < 11) {
        /* Resize-10: asymmetric; nearest picks floor when enlarging */
        if (isnear && up)
            return emit_resize(c, n, x, have_sc ? sc : NULL, sz, 0, 0);
        return mge_onnx_unsupported(c, n, "opset 10 %s %s (asymmetric coordinates: mge's match nearest enlarging "
                                    "only)", mode, up ? "enlarging" : "shrinking");
    }
    if (strcmp(ctm, "tf_crop_and_resize") == 0)
        return mge_onnx_unsupported(c, n, "coordinate_transformation_mode tf_crop_and_resize");
    int half = strcmp(ctm, "half_pixel") == 0, phalf = strcmp(ctm, "pytorch_half_pixel") == 0,
        align = strcmp(ctm, "align_corners") == 0, asym = strcmp(ctm, "asymmetric") == 0;
    /* pytorch_half_pixel is half_pixel except where an output dim is 1:
     * mapped when every output dim is known to exceed 1 */
    if (phalf) {
        for (int i = 0; i < 2; i++) {
            int64_t in = xv->dims[2 + i];
            int big = have_sz ? sz[2 + i] > 1
                              : sc[2 + i] >= 2 || (known_dim(in) && floor((double)in * sc[2 + i]) > 1);
            if (!big)
                return mge_onnx_unsupported(c, n, "pytorch_half_pixel where an output dim may be 1 (it maps "
                                            "that dim to 0, half_pixel to the middle)");
        }
        half = 1;
    }
    const double *scp = have_sc ? sc : NULL;
    if (islin || iscub) {
        /* align_corners with scales divides by in*scale - 1 unrounded: mge by out - 1 */
        for (int i = 0; align && have_sc && i < 2; i++)
            if (!known_dim(xv->dims[2 + i]) ||
                (double)xv->dims[2 + i] * sc[2 + i] != floor((double)xv->dims[2 + i] * sc[2 + i]))
                return mge_onnx_unsupported(c, n, "align_corners with scales that do not give a whole output "
                                            "size (ONNX then maps by the unrounded size)");
        if (half || align)
            return emit_resize(c, n, x, scp, sz, iscub ? 2 : 1, align);
        return mge_onnx_unsupported(c, n, "%s with coordinate_transformation_mode %s (mge's %s is "
                                    "half_pixel or align_corners)", mode, ctm, iscub ? "bicubic" : "bilinear");
    }
    /* nearest: mge picks floor(o * in/out); ONNX's asymmetric floor is that,
     * and half_pixel rounding is too when the scale is a whole number */
    int rounding = strcmp(nm, "round_prefer_floor") == 0 || strcmp(nm, "round_prefer_ceil") == 0;
    if ((asym && strcmp(nm, "floor") == 0) || (half && rounding && integer))
        return emit_resize(c, n, x, scp, sz, 0, 0);
    return mge_onnx_unsupported(c, n, "nearest with %s and nearest_mode %s%s (mge picks floor(o * in/out))", ctm, nm,
                                half && rounding ? " at a fractional scale" : "");
}

/* Upsample (7: scales attribute, 9: input): asymmetric; mge's nearest is
 * its nearest (floor). */
static mge_status conv_upsample(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x = mge_onnx_in(c, n, 0);
    if (x < 0)
        return mge_onnx_fail(c, n, "no input");
    mge_status st;
    if ((st = need_f32(c, n, x)))
        return st;
    const mge_value *xv = mge_onnx_value(c, x);
    if (xv->ndim != 4)
        return mge_onnx_unsupported(c, n, "a rank-%d input (mge resizes NCHW)", xv->ndim);
    double sc[4];
    int cnt;
    if (c->opset < 9) {
        if ((cnt = mge_onnx_attr_floats(n, "scales", sc, 4)) < 0)
            return mge_onnx_fail(c, n, "scales is required");
    } else {
        int sv = mge_onnx_in(c, n, 1);
        if (sv < 0)
            return mge_onnx_fail(c, n, "the scales input is required");
        if ((st = mge_onnx_known(c, n, sv, "scales", sc, 4, &cnt)))
            return st;
    }
    if (cnt != 4)
        return mge_onnx_fail(c, n, "scales has %d values: expected 4", cnt);
    for (int i = 0; i < 4; i++)
        if (!(sc[i] >= 1))
            return mge_onnx_fail(c, n, "scales must be >= 1");
    if ((st = check_nc(c, n, xv, sc, NULL)))
        return st;
    char mode[32];
    mge_onnx_attr_s(n, "mode", "nearest", mode, sizeof mode);
    if (strcmp(mode, "nearest") != 0)
        return mge_onnx_unsupported(c, n, "mode %s (asymmetric coordinates: mge's bilinear is half_pixel or "
                                    "align_corners)", mode);
    return emit_resize(c, n, x, sc, NULL, 0, 0);
}

/* ---------------------------------------------------------------- DepthToSpace, SpaceToDepth */

static mge_status space_depth(mge_onnx_ctx *c, mge_onnx_node *n, int to_space)
{
    int x = mge_onnx_in(c, n, 0);
    if (x < 0)
        return mge_onnx_fail(c, n, "no input");
    const mge_value *xv = mge_onnx_value(c, x);
    if (xv->ndim != 4)
        return mge_onnx_fail(c, n, "input has rank %d: expected 4", xv->ndim);
    int64_t b = mge_onnx_attr_i(n, "blocksize", 0), C = xv->dims[1], H = xv->dims[2], W = xv->dims[3];
    if (b < 1 || b > 65536)
        return mge_onnx_fail(c, n, "blocksize %lld: expected 1 to 65536", (long long)b);
    if (!known_dim(C) || !known_dim(H) || !known_dim(W))
        return mge_onnx_unsupported(c, n, "C, H and W not known at import");
    char mode[8];
    mge_onnx_attr_s(n, "mode", "DCR", mode, sizeof mode);
    int crd = strcmp(mode, "CRD") == 0;
    if (!crd && strcmp(mode, "DCR") != 0)
        return mge_onnx_fail(c, n, "mode '%s': expected DCR or CRD", mode);
    int y;
    if (to_space) {
        if (C % (b * b))
            return mge_onnx_fail(c, n, "%lld channels are not a multiple of blocksize^2", (long long)C);
        int64_t c2 = C / (b * b);
        int64_t s1[6] = {0, b, b, c2, H, W}, s1c[6] = {0, c2, b, b, H, W};
        static const int64_t p[6] = {0, 3, 4, 1, 5, 2}, pc[6] = {0, 1, 4, 2, 5, 3};
        int64_t s2[4] = {0, c2, H * b, W * b};
        if ((y = mge_onnx_reshape_tmp(c, n, x, 6, crd ? s1c : s1)) < 0 || (y = mge_onnx_transpose_tmp(c, n, y, 6, crd ? pc : p)) < 0)
            return done(c, -1);
        mge_attr a[1] = {mge_onnx_ais(MGE_KEY_shape, 4, s2)};
        return done(c, mge_onnx_emit(c, n, MGE_OP_RESHAPE, 1, &y, 1, a, 1));
    }
    if (H % b || W % b)
        return mge_onnx_fail(c, n, "H and W must be multiples of blocksize");
    int64_t s1[6] = {0, C, H / b, b, W / b, b};
    static const int64_t p[6] = {0, 3, 5, 1, 2, 4};
    int64_t s2[4] = {0, C * b * b, H / b, W / b};
    if ((y = mge_onnx_reshape_tmp(c, n, x, 6, s1)) < 0 || (y = mge_onnx_transpose_tmp(c, n, y, 6, p)) < 0)
        return done(c, -1);
    mge_attr a[1] = {mge_onnx_ais(MGE_KEY_shape, 4, s2)};
    return done(c, mge_onnx_emit(c, n, MGE_OP_RESHAPE, 1, &y, 1, a, 1));
}

static mge_status conv_d2s(mge_onnx_ctx *c, mge_onnx_node *n)
{
    if (c->opset < 11) {
        char mode[8];
        if (strcmp(mge_onnx_attr_s(n, "mode", "DCR", mode, sizeof mode), "DCR") != 0)
            return mge_onnx_fail(c, n, "mode before opset 11");
    }
    return space_depth(c, n, 1);
}

static mge_status conv_s2d(mge_onnx_ctx *c, mge_onnx_node *n)
{
    return space_depth(c, n, 0);
}

/* ---------------------------------------------------------------- 1-D pools */

/* MaxPool / AveragePool over [N,C,L] (core's pool2d hands them here):
 * the 2-D pools over [N,C,1,L] with a unit window height, pads as core's
 * (symmetric ones the layer's, others a pad node). */
mge_status mge_onnx_pool1d(mge_onnx_ctx *c, mge_onnx_node *n, int maxp)
{
    int x = mge_onnx_in(c, n, 0);
    if (x < 0)
        return mge_onnx_fail(c, n, "no input");
    mge_status st;
    const mge_value *xv = mge_onnx_value(c, x);
    if (xv->ndim != 3)
        return mge_onnx_fail(c, n, "X has rank %d: expected 3", xv->ndim);
    /* Indices and integer input: the 3-D pools over [N,C,1,1,L] */
    if (xv->dtype != MGE_F32 || (maxp && (wants(n, 1) || mge_onnx_attr_i(n, "storage_order", 0))))
        return mge_onnx_pool3d(c, n, maxp);
    int64_t t[4], k = 0, s = 1, d = 1;
    int cnt;
    if ((cnt = mge_onnx_attr_ints(n, "kernel_shape", t, 4)) != 1)
        return mge_onnx_fail(c, n, "kernel_shape must have 1 value for a 1-D pool");
    k = t[0];
    if ((cnt = mge_onnx_attr_ints(n, "strides", t, 4)) >= 0) {
        if (cnt != 1)
            return mge_onnx_fail(c, n, "strides has %d values: expected 1", cnt);
        s = t[0];
    }
    if ((cnt = mge_onnx_attr_ints(n, "dilations", t, 4)) >= 0) {
        if (cnt != 1)
            return mge_onnx_fail(c, n, "dilations has %d values: expected 1", cnt);
        d = t[0];
    }
    if (k < 1 || s < 1 || d < 1)
        return mge_onnx_fail(c, n, "kernel %lld, stride %lld, dilation %lld: expected >= 1", (long long)k,
                             (long long)s, (long long)d);
    if (!maxp && d != 1)
        return mge_onnx_pool3d(c, n, 0);
    int64_t pb, pe;
    if ((st = mge_onnx_pads(c, n, 1, xv->dims + 2, &k, &s, &d, &pb, &pe)))
        return st;
    int ceil_mode = (int)mge_onnx_attr_i(n, "ceil_mode", 0);
    int cip = (int)mge_onnx_attr_i(n, "count_include_pad", 0);
    int sym = pb == pe && 2 * pb <= k;
    int xin = x;
    if (!sym) {
        if (!maxp && !cip)
            return mge_onnx_pool3d(c, n, 0);
        if (ceil_mode)
            return mge_onnx_unsupported(c, n, "asymmetric pads with ceil_mode");
        if ((xin = mge_onnx_pad_input(c, n, x, 1, &pb, &pe, maxp ? -INFINITY : 0.0)) < 0)
            return done(c, -1);
    }
    int64_t s4[4] = {0, 0, 1, -1}, s3[3] = {0, 0, -1};
    if ((xin = mge_onnx_reshape_tmp(c, n, xin, 4, s4)) < 0)
        return done(c, -1);
    int64_t k2[2] = {1, k}, st2[2] = {1, s}, p2[2] = {0, sym ? pb : 0}, d2[2] = {1, d};
    mge_attr a[5];
    int na = 0;
    a[na++] = mge_onnx_ais(MGE_KEY_kernel, 2, k2);
    a[na++] = mge_onnx_ais(MGE_KEY_stride, 2, st2);
    a[na++] = mge_onnx_ais(MGE_KEY_pad, 2, p2);
    a[na++] = mge_onnx_ab(MGE_KEY_ceil_mode, ceil_mode);
    a[na++] = maxp ? mge_onnx_ais(MGE_KEY_dilation, 2, d2) : mge_onnx_ab(MGE_KEY_count_include_pad, cip);
    int y = mge_onnx_emit_tmp(c, n, maxp ? MGE_OP_MAXPOOL2D : MGE_OP_AVGPOOL2D, 1, &xin, na, a);
    if (y < 0)
        return done(c, -1);
    mge_attr ra[1] = {mge_onnx_ais(MGE_KEY_shape, 3, s3)};
    return done(c, mge_onnx_emit(c, n, MGE_OP_RESHAPE, 1, &y, 1, ra, 1));
}

/* ---------------------------------------------------------------- LpPool */

/* (sum over the window of |x|^p)^(1/p): an average pool of |x|^p counting
 * the zero padding, times the window size. 1-D and 2-D. */
static mge_status conv_lppool(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x = mge_onnx_in(c, n, 0);
    if (x < 0)
        return mge_onnx_fail(c, n, "no input");
    mge_status st;
    if ((st = need_f32(c, n, x)))
        return st;
    const mge_value *xv = mge_onnx_value(c, x);
    int nsp = xv->ndim - 2;
    if (nsp == 3)
        return mge_onnx_pool3d(c, n, 2);
    if (nsp < 1 || nsp > 2)
        return mge_onnx_unsupported(c, n, "%d-D LpPool (mge pools 1-D, 2-D and 3-D windows)", nsp);
    int64_t p = mge_onnx_attr_i(n, "p", 2);
    if (p < 1)
        return mge_onnx_fail(c, n, "p %lld: expected >= 1", (long long)p);
    if (mge_onnx_attr_i(n, "ceil_mode", 0))
        return mge_onnx_unsupported(c, n, "LpPool with ceil_mode = 1");
    int64_t k[2], s[2] = {1, 1}, d[2] = {1, 1}, pb[2], pe[2], t[4];
    int cnt;
    if ((cnt = mge_onnx_attr_ints(n, "kernel_shape", t, 4)) != nsp)
        return mge_onnx_fail(c, n, "kernel_shape must have %d values", nsp);
    for (int i = 0; i < nsp; i++)
        k[i] = t[i];
    if ((cnt = mge_onnx_attr_ints(n, "strides", t, 4)) >= 0) {
        if (cnt != nsp)
            return mge_onnx_fail(c, n, "strides has %d values: expected %d", cnt, nsp);
        for (int i = 0; i < nsp; i++)
            s[i] = t[i];
    }
    if ((cnt = mge_onnx_attr_ints(n, "dilations", t, 4)) >= 0)
        for (int i = 0; i < cnt && i < 4; i++)
            if (t[i] != 1)
                return mge_onnx_pool3d(c, n, 2);
    for (int i = 0; i < nsp; i++)
        if (k[i] < 1 || s[i] < 1)
            return mge_onnx_fail(c, n, "kernel and strides must be >= 1");
    if ((st = mge_onnx_pads(c, n, nsp, xv->dims + 2, k, s, d, pb, pe)))
        return st;
    int sym = 1;
    for (int i = 0; i < nsp; i++)
        sym &= pb[i] == pe[i] && 2 * pb[i] <= k[i];
    int y = p == 1 ? mge_onnx_emit_tmp(c, n, MGE_OP_ABS, 1, &x, 0, NULL)
          : p == 2 ? binary_tmp(c, n, MGE_OP_MUL, x, x) : -1;
    if (p > 2) {
        int a = mge_onnx_emit_tmp(c, n, MGE_OP_ABS, 1, &x, 0, NULL), e = scalar_f32(c, n, (double)p);
        y = a < 0 || e < 0 ? -1 : binary_tmp(c, n, MGE_OP_POW, a, e);
    }
    if (y < 0 || (!sym && (y = mge_onnx_pad_input(c, n, y, nsp, pb, pe, 0.0)) < 0))
        return done(c, -1);
    int64_t s4[4] = {0, 0, 1, -1};
    if (nsp == 1 && (y = mge_onnx_reshape_tmp(c, n, y, 4, s4)) < 0)
        return done(c, -1);
    int64_t k2[2] = {nsp == 1 ? 1 : k[0], k[nsp - 1]}, s2[2] = {nsp == 1 ? 1 : s[0], s[nsp - 1]};
    int64_t p2[2] = {nsp == 1 || !sym ? 0 : pb[0], sym ? pb[nsp - 1] : 0};
    mge_attr a[5] = {mge_onnx_ais(MGE_KEY_kernel, 2, k2), mge_onnx_ais(MGE_KEY_stride, 2, s2),
                     mge_onnx_ais(MGE_KEY_pad, 2, p2), mge_onnx_ab(MGE_KEY_ceil_mode, 0),
                     mge_onnx_ab(MGE_KEY_count_include_pad, 1)};
    int sc, r;
    if ((y = mge_onnx_emit_tmp(c, n, MGE_OP_AVGPOOL2D, 1, &y, 5, a)) < 0 ||
        (sc = scalar_f32(c, n, (double)(k2[0] * k2[1]))) < 0 || (y = binary_tmp(c, n, MGE_OP_MUL, y, sc)) < 0)
        return done(c, -1);
    if (nsp == 1) {
        int64_t s3[3] = {0, 0, -1};
        if ((y = mge_onnx_reshape_tmp(c, n, y, 3, s3)) < 0)
            return done(c, -1);
    }
    if (p == 1)
        return mge_onnx_alias(c, n, 0, y);
    if (p == 2)
        return done(c, mge_onnx_emit(c, n, MGE_OP_SQRT, 1, &y, 0, NULL, 1));
    if ((r = scalar_f32(c, n, 1.0 / (double)p)) < 0)
        return done(c, -1);
    int in[2] = {y, r};
    return done(c, mge_onnx_emit(c, n, MGE_OP_POW, 2, in, 0, NULL, 1));
}

/* (sum over dims 2.. of |x|^p)^(1/p), dims kept. */
static mge_status conv_globallppool(mge_onnx_ctx *c, mge_onnx_node *n)
{
    int x = mge_onnx_in(c, n, 0);
    if (x < 0)
        return mge_onnx_fail(c, n, "no input");
    mge_status st;
    if ((st = need_f32(c, n, x)))
        return st;
    int rank = mge_onnx_value(c, x)->ndim;
    if (rank < 3)
        return mge_onnx_fail(c, n, "X has rank %d: expected at least 3", rank);
    int64_t p = mge_onnx_attr_i(n, "p", 2), ax[MGE_MAX_DIMS];
    if (p < 1)
        return mge_onnx_fail(c, n, "p %lld: expected >= 1", (long long)p);
    for (int i = 2; i < rank; i++)
        ax[i - 2] = i;
    int y = mge_onnx_emit_tmp(c, n, MGE_OP_ABS, 1, &x, 0, NULL), e, r;
    if (y < 0 || (p > 1 && ((e = scalar_f32(c, n, (double)p)) < 0 || (y = binary_tmp(c, n, MGE_OP_POW, y, e)) < 0)) ||
        (y = reduce_tmp(c, n, MGE_OP_SUM, y, rank - 2, ax)) < 0)
        return done(c, -1);
    if (p == 1)
        return mge_onnx_alias(c, n, 0, y);
    if ((r = scalar_f32(c, n, 1.0 / (double)p)) < 0)
        return done(c, -1);
    int in[2] = {y, r};
    return done(c, mge_onnx_emit(c, n, MGE_OP_POW, 2, in, 0, NULL, 1));
}

const mge_onnx_op mge_onnx_ops_nn[] = {
    {"ConvTranspose", conv_convtranspose, 1},
    {"LayerNormalization", conv_layernorm, 17},
    {"GroupNormalization", conv_groupnorm, 18},
    {"InstanceNormalization", conv_instancenorm, 6},
    {"LpNormalization", conv_lpnorm, 1},
    {"MeanVarianceNormalization", conv_mvn, 9},
    {"Pad", conv_pad, 2},
    {"Resize", conv_resize, 10},
    {"Upsample", conv_upsample, 7},
    {"DepthToSpace", conv_d2s, 1},
    {"SpaceToDepth", conv_s2d, 1},
    {"LpPool", conv_lppool, 2},
    {"GlobalLpPool", conv_globallppool, 2},
    {NULL, NULL, 0},
};
