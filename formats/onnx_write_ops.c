/* onnx_write_ops.c — one mge node as ONNX opset-17 nodes.
 *
 * Ops with a one-to-one ONNX form map directly; the others are written as
 * their composition in ops opset 17 has (gelu as the erf form, silu as
 * x * Sigmoid(x), group_norm through InstanceNormalization, attention as
 * MatMul/Softmax, the int8 layers as DequantizeLinear -> float op ->
 * QuantizeLinear with mge's scales and zero points, which onnxruntime fuses
 * back into its QLinear kernels; a float op mge runs on int8 values, such
 * as global_avgpool after the last qconv2d, becomes DQ -> op -> Q at the
 * values' scale). What ONNX cannot express, or needs a
 * shape mge knows only when it runs, is reported with the reason. Training,
 * gradient, optimizer and communication ops have no inference meaning and
 * are reported too (a graph with a loss has lost them to strip-training
 * before this runs). */
#include "onnx_write.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>

#define IN(i) ((i) < 64 && w->ovin[i] ? w->ovin[i] : mge_onnx_w_name(w, n->in[i]))
#define OUT(k) ((k) < 4 && w->ovout[k] ? w->ovout[k] : mge_onnx_w_name(w, n->out[k]))
#define NOMEM() mge_error_set(w->err, MGE_ERR_NOMEM, "out of memory")

static const mge_value *val(mge_onnx_w *w, int v)
{
    return &w->g->values[v];
}

/* One ONNX node with inputs in... (nin of them, NULL for an absent one):
 * writes out, or a fresh value when out is NULL; returns the output's name
 * (NULL on allocation failure) and the node in *np when np is given. */
static const char *op(mge_onnx_w *w, Onnx__NodeProto **np, const char *type, const char *out, int nin, ...)
{
    const char *in[8];
    va_list ap;
    va_start(ap, nin);
    for (int i = 0; i < nin && i < 8; i++)
        in[i] = va_arg(ap, const char *);
    va_end(ap);
    if (!out && !(out = mge_onnx_w_tmp(w, type)))
        return NULL;
    Onnx__NodeProto *nd = mge_onnx_w_node(w, type, nin, in, 1, &out);
    if (np)
        *np = nd;
    return nd ? out : NULL;
}

static int64_t ints_at(const mge_node *n, int key, int i, int64_t def)
{
    return mge_node_ints(n, key, i, def);
}

/* ---------------------------------------------------------------- activations */

/* act (an OPS attribute: none, relu, relu6, ...) applied to x, written to
 * out (fresh when NULL). */
static const char *apply_act(mge_onnx_w *w, int act, const char *x, const char *out, mge_dtype dt, double alpha)
{
    Onnx__NodeProto *nd = NULL;
    switch (act) {
    case -1: return op(w, NULL, "Identity", out, 1, x);
    case MGE_OP_RELU: return op(w, NULL, "Relu", out, 1, x);
    case MGE_OP_RELU6:
        return op(w, NULL, "Clip", out, 3, x, mge_onnx_w_scalar(w, dt, 0), mge_onnx_w_scalar(w, dt, 6));
    case MGE_OP_LEAKY_RELU: {
        const char *r = op(w, &nd, "LeakyRelu", out, 1, x);
        mge_onnx_w_attr_f(w, nd, "alpha", alpha);
        return r;
    }
    case MGE_OP_SIGMOID: return op(w, NULL, "Sigmoid", out, 1, x);
    case MGE_OP_TANH: return op(w, NULL, "Tanh", out, 1, x);
    case MGE_OP_HSWISH: return op(w, NULL, "HardSwish", out, 1, x);
    case MGE_OP_ELU: {
        const char *r = op(w, &nd, "Elu", out, 1, x);
        mge_onnx_w_attr_f(w, nd, "alpha", alpha);
        return r;
    }
    case MGE_OP_SELU: return op(w, NULL, "Selu", out, 1, x);
    case MGE_OP_SOFTSIGN: return op(w, NULL, "Softsign", out, 1, x);
    case MGE_OP_GELU: {
        /* opset 17 has no Gelu: 0.5 * x * (1 + erf(x / sqrt 2)), mge's exact form */
        const char *e = op(w, NULL, "Erf", NULL, 1, op(w, NULL, "Mul", NULL, 2, x, mge_onnx_w_scalar(w, dt, M_SQRT1_2)));
        const char *a = op(w, NULL, "Add", NULL, 2, e, mge_onnx_w_scalar(w, dt, 1));
        return op(w, NULL, "Mul", out, 2, op(w, NULL, "Mul", NULL, 2, x, mge_onnx_w_scalar(w, dt, 0.5)), a);
    }
    case MGE_OP_SILU: return op(w, NULL, "Mul", out, 2, x, op(w, NULL, "Sigmoid", NULL, 1, x));
    case MGE_OP_HSIGMOID: {
        /* PyTorch's hardsigmoid: relu6(x + 3) / 6 */
        const char *r = op(w, &nd, "HardSigmoid", out, 1, x);
        mge_onnx_w_attr_f(w, nd, "alpha", 1.0 / 6);
        mge_onnx_w_attr_f(w, nd, "beta", 0.5);
        return r;
    }
    case MGE_OP_MISH:
        /* Mish is opset 18 */
        return op(w, NULL, "Mul", out, 2, x, op(w, NULL, "Tanh", NULL, 1, op(w, NULL, "Softplus", NULL, 1, x)));
    default: return NULL;
    }
}

static int act_ok(int act)
{
    switch (act) {
    case -1: case MGE_OP_RELU: case MGE_OP_RELU6: case MGE_OP_LEAKY_RELU: case MGE_OP_SIGMOID: case MGE_OP_TANH:
    case MGE_OP_HSWISH: case MGE_OP_ELU: case MGE_OP_SELU: case MGE_OP_SOFTSIGN: case MGE_OP_GELU: case MGE_OP_SILU:
    case MGE_OP_HSIGMOID: case MGE_OP_MISH:
        return 1;
    default: return 0;
    }
}

/* ---------------------------------------------------------------- helpers */

/* An integer input as int64 (ONNX wants int64 shapes, axes and bounds). */
static const char *as_i64(mge_onnx_w *w, int v)
{
    if (val(w, v)->dtype == MGE_I64)
        return mge_onnx_w_name(w, v);
    Onnx__NodeProto *nd = NULL;
    const char *r = op(w, &nd, "Cast", NULL, 1, mge_onnx_w_name(w, v));
    mge_onnx_w_attr_i(w, nd, "to", MGE_ONNX_INT64);
    return r;
}

/* x with its last two dims swapped (rank r >= 2). */
static const char *swap_last2(mge_onnx_w *w, const char *x, int r)
{
    int64_t perm[MGE_MAX_DIMS];
    for (int i = 0; i < r; i++)
        perm[i] = i;
    perm[r - 2] = r - 1;
    perm[r - 1] = r - 2;
    Onnx__NodeProto *nd = NULL;
    const char *t = op(w, &nd, "Transpose", NULL, 1, x);
    mge_onnx_w_attr_ints(w, nd, "perm", r, perm);
    return t;
}

/* A per-channel vector [C] reshaped to [C, 1, ...] to broadcast over
 * x[N, C, ...] of rank r. */
static const char *chan_view(mge_onnx_w *w, const char *v, int r)
{
    int64_t s[MGE_MAX_DIMS] = {-1};
    for (int i = 1; i < r - 1; i++)
        s[i] = 1;
    return op(w, NULL, "Reshape", NULL, 2, v, mge_onnx_w_i64s(w, r - 1, s));
}

/* The Conv / ConvTranspose / pool attributes of an nsp-d window. */
static void window_attrs(mge_onnx_w *w, Onnx__NodeProto *nd, const mge_node *n, int nsp, int kernel, int dil,
                         int pads)
{
    int64_t k[3], s[3], p[6], d[3];
    for (int i = 0; i < nsp; i++) {
        k[i] = ints_at(n, MGE_KEY_kernel, i, 1);
        s[i] = mge_node_attr(n, MGE_KEY_stride) ? ints_at(n, MGE_KEY_stride, i, 1) : k[i];
        p[i] = p[nsp + i] = ints_at(n, MGE_KEY_pad, i, 0);
        d[i] = ints_at(n, MGE_KEY_dilation, i, 1);
    }
    if (kernel)
        mge_onnx_w_attr_ints(w, nd, "kernel_shape", nsp, k);
    mge_onnx_w_attr_ints(w, nd, "strides", nsp, s);
    if (pads)
        mge_onnx_w_attr_ints(w, nd, "pads", 2 * nsp, p);
    if (dil)
        mge_onnx_w_attr_ints(w, nd, "dilations", nsp, d);
}

/* conv stride defaults to 1, not the kernel (pools' default). */
static void conv_attrs(mge_onnx_w *w, Onnx__NodeProto *nd, const mge_node *n, int nsp)
{
    int64_t k[3], s[3], p[6], d[3];
    for (int i = 0; i < nsp; i++) {
        k[i] = ints_at(n, MGE_KEY_kernel, i, 1);
        s[i] = ints_at(n, MGE_KEY_stride, i, 1);
        p[i] = p[nsp + i] = ints_at(n, MGE_KEY_pad, i, 0);
        d[i] = ints_at(n, MGE_KEY_dilation, i, 1);
    }
    mge_onnx_w_attr_ints(w, nd, "kernel_shape", nsp, k);
    mge_onnx_w_attr_ints(w, nd, "strides", nsp, s);
    mge_onnx_w_attr_ints(w, nd, "pads", 2 * nsp, p);
    mge_onnx_w_attr_ints(w, nd, "dilations", nsp, d);
    mge_onnx_w_attr_i(w, nd, "group", mge_node_int(n, MGE_KEY_groups, 1));
}

/* linear's y = x W^T (+ b) into out: Gemm for a matrix x, else MatMul (+ Add). */
static const char *linear_body(mge_onnx_w *w, const char *x, int xrank, const char *wt, const char *b,
                               const char *out)
{
    if (xrank == 2) {
        Onnx__NodeProto *nd = NULL;
        const char *r = b ? op(w, &nd, "Gemm", out, 3, x, wt, b) : op(w, &nd, "Gemm", out, 2, x, wt);
        mge_onnx_w_attr_i(w, nd, "transB", 1);
        return r;
    }
    const char *mm = op(w, NULL, "MatMul", b ? NULL : out, 2, x, swap_last2(w, wt, 2));
    return b ? op(w, NULL, "Add", out, 2, mm, b) : mm;
}

/* ---------------------------------------------------------------- int8 */

/* The scale and zero-point initializers of a quantized constant (its
 * tensor's mge_quant): per tensor, or per channel along q.axis. */
static mge_status qparams(mge_onnx_w *w, int v, const char **scale, const char **zero, int *axis, mge_dtype zdt)
{
    const mge_tensor *t = val(w, v)->data;
    if (!t || t->q.nscale < 1 || !t->q.scale)
        return mge_onnx_w_unsupported(w, "%s: a quantized input that is not a constant with scales",
                                      val(w, v)->name);
    double s[4096], z[4096];
    int ns = t->q.nscale;
    if (ns > 4096)
        return mge_onnx_w_unsupported(w, "%s: %d channel scales (at most 4096)", val(w, v)->name, ns);
    for (int i = 0; i < ns; i++) {
        s[i] = t->q.scale[i];
        z[i] = t->q.axis < 0 ? t->q.zero : 0;
    }
    if (t->q.axis >= 0 && t->q.zero != 0)
        return mge_onnx_w_unsupported(w, "%s: per-channel scales with zero point %d", val(w, v)->name,
                                      (int)t->q.zero);
    int per = t->q.axis >= 0 && ns > 1;
    *axis = per ? t->q.axis : -1;
    *scale = per ? mge_onnx_w_vec(w, MGE_F32, ns, s, 1) : mge_onnx_w_scalar(w, MGE_F32, s[0]);
    *zero = per ? mge_onnx_w_vec(w, zdt, ns, z, 1) : mge_onnx_w_scalar(w, zdt, z[0]);
    return MGE_OK;
}

static const char *dq(mge_onnx_w *w, const char *x, const char *s, const char *z, int axis, const char *out)
{
    Onnx__NodeProto *nd = NULL;
    const char *r = op(w, &nd, "DequantizeLinear", out, 3, x, s, z);
    if (axis >= 0)
        mge_onnx_w_attr_i(w, nd, "axis", axis);
    return r;
}

/* x_scale/x_zero style attributes as scalar initializers and a DQ of x. */
static const char *dq_attr(mge_onnx_w *w, const char *x, double scale, int64_t zero, const char *out)
{
    return dq(w, x, mge_onnx_w_scalar(w, MGE_F32, scale), mge_onnx_w_scalar(w, MGE_I8, (double)zero), -1, out);
}

static const char *q_attr(mge_onnx_w *w, const char *x, double scale, int64_t zero, const char *out)
{
    return op(w, NULL, "QuantizeLinear", out, 3, x, mge_onnx_w_scalar(w, MGE_F32, scale),
              mge_onnx_w_scalar(w, MGE_I8, (double)zero));
}

static mge_status ex_quant(mge_onnx_w *w, const mge_node *n)
{
    int act = -1;
    const mge_attr *a = mge_node_attr(n, MGE_KEY_act);
    if (a && a->n >= 1)
        act = (int)a->i[0];
    if (a && a->n > 1)
        return mge_onnx_w_unsupported(w, "act with %d ops", a->n);
    if (!act_ok(act))
        return mge_onnx_w_unsupported(w, "act=%s", mge_attr_op_name(act));
    double xs = mge_node_float(n, MGE_KEY_x_scale, 1), ys = mge_node_float(n, MGE_KEY_y_scale, 1);
    int64_t xz = mge_node_int(n, MGE_KEY_x_zero, 0), yz = mge_node_int(n, MGE_KEY_y_zero, 0);
    const char *xf = dq_attr(w, IN(0), xs, xz, NULL), *yf;
    if (n->op == MGE_OP_QADD) {
        const char *bf = dq_attr(w, IN(1), mge_node_float(n, MGE_KEY_x2_scale, 1), mge_node_int(n, MGE_KEY_x2_zero, 0), NULL);
        yf = op(w, NULL, "Add", NULL, 2, xf, bf);
    } else {
        const char *ws, *wz, *bs, *bz;
        int wax, bax;
        mge_status s = qparams(w, n->in[1], &ws, &wz, &wax, MGE_I8);
        if (s)
            return s;
        const char *wf = dq(w, IN(1), ws, wz, wax, NULL), *bf = NULL;
        if (n->nin > 2) {
            if ((s = qparams(w, n->in[2], &bs, &bz, &bax, MGE_I32)))
                return s;
            bf = dq(w, IN(2), bs, bz, bax, NULL);
        }
        if (n->op == MGE_OP_QCONV2D) {
            Onnx__NodeProto *nd = NULL;
            yf = bf ? op(w, &nd, "Conv", NULL, 3, xf, wf, bf) : op(w, &nd, "Conv", NULL, 2, xf, wf);
            conv_attrs(w, nd, n, 2);
        } else {
            yf = linear_body(w, xf, val(w, n->in[0])->ndim, wf, bf, NULL);
        }
    }
    if (act != -1)
        yf = apply_act(w, act, yf, NULL, MGE_F32, mge_node_float(n, MGE_KEY_alpha, 0.01));
    return q_attr(w, yf, ys, yz, OUT(0)) ? MGE_OK : NOMEM();
}

/* ---------------------------------------------------------------- attention */

static mge_status ex_sdpa(mge_onnx_w *w, const mge_node *n)
{
    const mge_value *q = val(w, n->in[0]), *k = val(w, n->in[1]);
    mge_dtype dt = q->dtype;
    if (q->ndim < 2 || k->ndim < 2)
        return mge_onnx_w_unsupported(w, "q and k need rank >= 2");
    const mge_attr *sa = mge_node_attr(n, MGE_KEY_scale);
    double scale;
    if (sa)
        scale = sa->f;
    else if (q->dims[q->ndim - 1] > 0)
        scale = 1.0 / sqrt((double)q->dims[q->ndim - 1]);
    else
        return mge_onnx_w_unsupported(w, "the default scale needs q's last dim, which is not a number");
    const char *s = op(w, NULL, "MatMul", NULL, 2, IN(0), swap_last2(w, IN(1), k->ndim));
    s = op(w, NULL, "Mul", NULL, 2, s, mge_onnx_w_scalar(w, dt, scale));
    const char *ninf = NULL;
    if (n->nin > 3) {
        if (val(w, n->in[3])->dtype == MGE_BOOL) {
            ninf = mge_onnx_w_scalar(w, dt, -INFINITY);
            s = op(w, NULL, "Where", NULL, 3, IN(3), s, ninf);
        } else {
            s = op(w, NULL, "Add", NULL, 2, s, IN(3));
        }
    }
    if (mge_node_int(n, MGE_KEY_causal, 0)) {
        /* key j > query i masked: lower-triangular ones of the scores' last
         * two dims, built at run time (they may be symbols) */
        Onnx__NodeProto *nd = NULL;
        const char *sh = op(w, &nd, "Shape", NULL, 1, s);
        mge_onnx_w_attr_i(w, nd, "start", -2);
        const char *ones = op(w, &nd, "ConstantOfShape", NULL, 1, sh);
        mge_onnx_w_attr_scalar(w, nd, "value", MGE_ONNX_FLOAT, 1);
        const char *tri = op(w, &nd, "Trilu", NULL, 1, ones);
        mge_onnx_w_attr_i(w, nd, "upper", 0);
        const char *m = op(w, &nd, "Cast", NULL, 1, tri);
        mge_onnx_w_attr_i(w, nd, "to", MGE_ONNX_BOOL);
        if (!ninf)
            ninf = mge_onnx_w_scalar(w, dt, -INFINITY);
        s = op(w, NULL, "Where", NULL, 3, m, s, ninf);
    }
    Onnx__NodeProto *nd = NULL;
    const char *p = op(w, &nd, "Softmax", NULL, 1, s);
    mge_onnx_w_attr_i(w, nd, "axis", -1);
    return op(w, NULL, "MatMul", OUT(0), 2, p, IN(2)) ? MGE_OK : NOMEM();
}

/* ---------------------------------------------------------------- normalization */

static mge_status ex_norm(mge_onnx_w *w, const mge_node *n)
{
    Onnx__NodeProto *nd = NULL;
    const mge_value *x = val(w, n->in[0]);
    int r = x->ndim;
    double eps = mge_node_float(n, MGE_KEY_eps, 1e-5);
    switch (n->op) {
    case MGE_OP_BATCHNORM:
        op(w, &nd, "BatchNormalization", OUT(0), 5, IN(0), IN(1), IN(2), IN(3), IN(4));
        mge_onnx_w_attr_f(w, nd, "epsilon", eps);
        return nd ? MGE_OK : NOMEM();
    case MGE_OP_LAYERNORM:
        op(w, &nd, "LayerNormalization", OUT(0), 3, IN(0), IN(1), IN(2));
        mge_onnx_w_attr_i(w, nd, "axis", ints_at(n, MGE_KEY_axis, 0, -1));
        mge_onnx_w_attr_f(w, nd, "epsilon", eps);
        return nd ? MGE_OK : NOMEM();
    case MGE_OP_INSTANCE_NORM: {
        const char *sc, *bi;
        if (n->nin >= 3) {
            sc = IN(1);
            bi = IN(2);
        } else {
            int64_t C = r >= 2 ? x->dims[1] : -1;
            if (C < 1 || C > 65536)
                return mge_onnx_w_unsupported(w, "affine=false needs a number of channels, not a symbol");
            double *v = mge_onnx_w_alloc(w, (size_t)C * sizeof *v);
            if (!v)
                return NOMEM();
            for (int64_t i = 0; i < C; i++)
                v[i] = 1;
            sc = mge_onnx_w_vec(w, x->dtype, (int)C, v, 1);
            for (int64_t i = 0; i < C; i++)
                v[i] = 0;
            bi = mge_onnx_w_vec(w, x->dtype, (int)C, v, 1);
        }
        op(w, &nd, "InstanceNormalization", OUT(0), 3, IN(0), sc, bi);
        mge_onnx_w_attr_f(w, nd, "epsilon", eps);
        return nd ? MGE_OK : NOMEM();
    }
    case MGE_OP_GROUP_NORM: {
        /* GroupNormalization is opset 18 (and changed in 21): the groups as
         * instances of x viewed [N, G, -1], then the per-channel affine */
        int64_t G = mge_node_int(n, MGE_KEY_num_groups, 1);
        if (G < 1 || G > 65536)
            return mge_onnx_w_unsupported(w, "num_groups=%lld", (long long)G);
        double *v = mge_onnx_w_alloc(w, (size_t)G * sizeof *v);
        if (!v)
            return NOMEM();
        for (int64_t i = 0; i < G; i++)
            v[i] = 1;
        const char *ones = mge_onnx_w_vec(w, x->dtype, (int)G, v, 1);
        for (int64_t i = 0; i < G; i++)
            v[i] = 0;
        const char *zeros = mge_onnx_w_vec(w, x->dtype, (int)G, v, 1);
        int64_t s3[3] = {0, G, -1};
        const char *xr = op(w, NULL, "Reshape", NULL, 2, IN(0), mge_onnx_w_i64s(w, 3, s3));
        const char *xi = op(w, &nd, "InstanceNormalization", NULL, 3, xr, ones, zeros);
        mge_onnx_w_attr_f(w, nd, "epsilon", eps);
        const char *y = op(w, NULL, "Reshape", NULL, 2, xi, op(w, NULL, "Shape", NULL, 1, IN(0)));
        y = op(w, NULL, "Mul", NULL, 2, y, chan_view(w, IN(1), r));
        return op(w, NULL, "Add", OUT(0), 2, y, chan_view(w, IN(2), r)) ? MGE_OK : NOMEM();
    }
    case MGE_OP_RMS_NORM: {
        int64_t ax = ints_at(n, MGE_KEY_axis, 0, -1);
        if (ax < 0)
            ax += r;
        if (ax < 0 || ax >= r)
            return mge_onnx_w_unsupported(w, "axis out of range");
        int64_t axes[MGE_MAX_DIMS];
        int na = 0;
        for (int64_t i = ax; i < r; i++)
            axes[na++] = i;
        const char *ms = op(w, &nd, "ReduceMean", NULL, 1, op(w, NULL, "Mul", NULL, 2, IN(0), IN(0)));
        mge_onnx_w_attr_ints(w, nd, "axes", na, axes);
        mge_onnx_w_attr_i(w, nd, "keepdims", 1);
        const char *rs = op(w, NULL, "Reciprocal", NULL, 1,
                            op(w, NULL, "Sqrt", NULL, 1,
                               op(w, NULL, "Add", NULL, 2, ms, mge_onnx_w_scalar(w, x->dtype, mge_rms_eps(n, x->dtype)))));
        return op(w, NULL, "Mul", OUT(0), 2, op(w, NULL, "Mul", NULL, 2, IN(0), rs), IN(1)) ? MGE_OK : NOMEM();
    }
    default: return mge_onnx_w_unsupported(w, "internal: not a norm");
    }
}

/* ---------------------------------------------------------------- the table of direct ops */

static const char *direct(int o)
{
    switch (o) {
    case MGE_OP_RELU: return "Relu";
    case MGE_OP_SIGMOID: return "Sigmoid";
    case MGE_OP_TANH: return "Tanh";
    case MGE_OP_EXP: return "Exp";
    case MGE_OP_LOG: return "Log";
    case MGE_OP_SQRT: return "Sqrt";
    case MGE_OP_NEG: return "Neg";
    case MGE_OP_ABS: return "Abs";
    case MGE_OP_ERF: return "Erf";
    case MGE_OP_RECIPROCAL: return "Reciprocal";
    case MGE_OP_SIN: return "Sin";
    case MGE_OP_COS: return "Cos";
    case MGE_OP_FLOOR: return "Floor";
    case MGE_OP_CEIL: return "Ceil";
    case MGE_OP_ROUND: return "Round";
    case MGE_OP_SIGN: return "Sign";
    case MGE_OP_ISNAN: return "IsNaN";
    case MGE_OP_ISINF: return "IsInf";
    case MGE_OP_SOFTSIGN: return "Softsign";
    case MGE_OP_SELU: return "Selu";
    case MGE_OP_HSWISH: return "HardSwish";
    case MGE_OP_NOT: return "Not";
    case MGE_OP_DROPOUT: return "Identity";
    case MGE_OP_COPY: return "Identity";
    case MGE_OP_ADD: return "Add";
    case MGE_OP_SUB: return "Sub";
    case MGE_OP_MUL: return "Mul";
    case MGE_OP_DIV: return "Div";
    case MGE_OP_POW: return "Pow";
    case MGE_OP_MAXIMUM: return "Max";
    case MGE_OP_MINIMUM: return "Min";
    case MGE_OP_EQUAL: return "Equal";
    case MGE_OP_LESS: return "Less";
    case MGE_OP_GREATER: return "Greater";
    case MGE_OP_LESS_EQUAL: return "LessOrEqual";
    case MGE_OP_GREATER_EQUAL: return "GreaterOrEqual";
    case MGE_OP_AND: return "And";
    case MGE_OP_OR: return "Or";
    case MGE_OP_XOR: return "Xor";
    case MGE_OP_WHERE: return "Where";
    case MGE_OP_GLOBAL_AVGPOOL: return "GlobalAveragePool";
    case MGE_OP_SIZE: return "Size";
    default: return NULL;
    }
}

/* ---------------------------------------------------------------- shape ops */

static mge_status ex_reduce(mge_onnx_w *w, const mge_node *n)
{
    static const struct { int op; const char *onnx; } t[] = {
        {MGE_OP_SUM, "ReduceSum"}, {MGE_OP_MEAN, "ReduceMean"}, {MGE_OP_MAX, "ReduceMax"},
        {MGE_OP_MIN, "ReduceMin"}, {MGE_OP_PROD, "ReduceProd"}};
    const char *name = NULL;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (t[i].op == n->op)
            name = t[i].onnx;
    const mge_attr *a = mge_node_attr(n, MGE_KEY_axis);
    Onnx__NodeProto *nd = NULL;
    /* in 17 ReduceSum alone takes its axes as an input; absent axes reduce all */
    if (n->op == MGE_OP_SUM && a)
        op(w, &nd, name, OUT(0), 2, IN(0), mge_onnx_w_i64s(w, a->n, a->i));
    else
        op(w, &nd, name, OUT(0), 1, IN(0));
    if (n->op != MGE_OP_SUM && a)
        mge_onnx_w_attr_ints(w, nd, "axes", a->n, a->i);
    mge_onnx_w_attr_i(w, nd, "keepdims", mge_node_int(n, MGE_KEY_keepdim, 0));
    return nd ? MGE_OK : NOMEM();
}

/* resize's output sizes [N, C, oh, ow]: x's leading dims and the two given. */
static const char *sizes_of(mge_onnx_w *w, const char *x, const char *hw)
{
    Onnx__NodeProto *nd = NULL;
    const char *nc = op(w, &nd, "Shape", NULL, 1, x);
    mge_onnx_w_attr_i(w, nd, "end", 2);
    const char *r = op(w, &nd, "Concat", NULL, 2, nc, hw);
    mge_onnx_w_attr_i(w, nd, "axis", 0);
    return r;
}

static mge_status ex_resize(mge_onnx_w *w, const mge_node *n)
{
    const char *mode = mge_key_enum_word(MGE_KEY_mode, mge_node_int(n, MGE_KEY_mode, 0));
    int bil = mode && strcmp(mode, "bilinear") == 0, cub = mode && strcmp(mode, "bicubic") == 0;
    if (!mode || (!bil && !cub && strcmp(mode, "nearest") != 0))
        return mge_onnx_w_unsupported(w, "mode=%s", mode ? mode : "?");
    const mge_attr *sc = mge_node_attr(n, MGE_KEY_scales), *sz = mge_node_attr(n, MGE_KEY_size);
    const char *scales = "", *sizes = "";
    if (n->nin > 1) {
        const mge_value *s = val(w, n->in[1]);
        if (s->ndim != 1 || (s->dims[0] != 2 && s->dims[0] != 4))
            return mge_onnx_w_unsupported(w, "the size input must hold 2 or 4 values");
        sizes = s->dims[0] == 4 ? as_i64(w, n->in[1]) : sizes_of(w, IN(0), as_i64(w, n->in[1]));
    } else if (sc) {
        double v[4] = {1, 1, mge_attr_float_at(sc, 0), mge_attr_float_at(sc, sc->n > 1 ? 1 : 0)};
        scales = mge_onnx_w_vec(w, MGE_F32, 4, v, 1);
    } else if (sz) {
        int64_t hw[2] = {sz->i[0], sz->n > 1 ? sz->i[1] : sz->i[0]};
        sizes = sizes_of(w, IN(0), mge_onnx_w_i64s(w, 2, hw));
    } else {
        return mge_onnx_w_unsupported(w, "neither scales nor size");
    }
    Onnx__NodeProto *nd = NULL;
    op(w, &nd, "Resize", OUT(0), 4, IN(0), "", scales, sizes);
    if (cub) {
        /* mge's bicubic source coordinate is half_pixel unclamped (PyTorch's) */
        mge_onnx_w_attr_s(w, nd, "mode", "cubic");
        mge_onnx_w_attr_s(w, nd, "coordinate_transformation_mode",
                          mge_node_int(n, MGE_KEY_align_corners, 0) ? "align_corners" : "half_pixel");
        mge_onnx_w_attr_f(w, nd, "cubic_coeff_a", mge_node_float(n, MGE_KEY_cubic_a, -0.75));
        mge_onnx_w_attr_i(w, nd, "exclude_outside", mge_node_int(n, MGE_KEY_exclude_outside, 0));
    } else if (bil) {
        mge_onnx_w_attr_s(w, nd, "mode", "linear");
        mge_onnx_w_attr_s(w, nd, "coordinate_transformation_mode",
                          mge_node_int(n, MGE_KEY_align_corners, 0) ? "align_corners" : "pytorch_half_pixel");
    } else {
        /* PyTorch's nearest: src = floor(dst / scale) */
        mge_onnx_w_attr_s(w, nd, "mode", "nearest");
        mge_onnx_w_attr_s(w, nd, "coordinate_transformation_mode", "asymmetric");
        mge_onnx_w_attr_s(w, nd, "nearest_mode", "floor");
    }
    return nd ? MGE_OK : NOMEM();
}

/* grid_sample as GridSample-16 (4-D only: N-D came with opset 20). */
static mge_status ex_grid_sample(mge_onnx_w *w, const mge_node *n)
{
    if (val(w, n->in[0])->ndim != 4)
        return mge_onnx_w_unsupported(w, "a 5-D grid_sample (GridSample takes N-D from opset 20; mge writes 17)");
    const char *mode = mge_key_enum_word(MGE_KEY_mode, mge_node_int(n, MGE_KEY_mode, MGE_MODE_BILINEAR));
    const char *pad = mge_key_enum_word(MGE_KEY_padding_mode, mge_node_int(n, MGE_KEY_padding_mode, 0));
    Onnx__NodeProto *nd = NULL;
    op(w, &nd, "GridSample", OUT(0), 2, IN(0), IN(1));
    mge_onnx_w_attr_s(w, nd, "mode", mode ? mode : "bilinear");
    mge_onnx_w_attr_s(w, nd, "padding_mode", pad ? pad : "zeros");
    mge_onnx_w_attr_i(w, nd, "align_corners", mge_node_int(n, MGE_KEY_align_corners, 0));
    return nd ? MGE_OK : NOMEM();
}

/* roi_align as RoiAlign-16 (batch_indices int64). */
static mge_status ex_roi_align(mge_onnx_w *w, const mge_node *n)
{
    Onnx__NodeProto *nd = NULL;
    op(w, &nd, "RoiAlign", OUT(0), 3, IN(0), IN(1), as_i64(w, n->in[2]));
    mge_onnx_w_attr_s(w, nd, "mode", mge_node_int(n, MGE_KEY_pooling, 0) ? "max" : "avg");
    mge_onnx_w_attr_i(w, nd, "output_height", ints_at(n, MGE_KEY_output_size, 0, 1));
    mge_onnx_w_attr_i(w, nd, "output_width", ints_at(n, MGE_KEY_output_size, 1, 1));
    mge_onnx_w_attr_i(w, nd, "sampling_ratio", mge_node_int(n, MGE_KEY_sampling_ratio, 0));
    mge_onnx_w_attr_f(w, nd, "spatial_scale", mge_node_float(n, MGE_KEY_spatial_scale, 1));
    mge_onnx_w_attr_s(w, nd, "coordinate_transformation_mode",
                      mge_node_int(n, MGE_KEY_aligned, 0) ? "half_pixel" : "output_half_pixel");
    return nd ? MGE_OK : NOMEM();
}

static mge_status ex_pad(mge_onnx_w *w, const mge_node *n)
{
    const mge_value *x = val(w, n->in[0]);
    int r = x->ndim;
    const mge_attr *p = mge_node_attr(n, MGE_KEY_pads);
    if (!p || p->n % 2 || p->n / 2 > r)
        return mge_onnx_w_unsupported(w, "pads do not fit the rank");
    /* mge: (begin, end) pairs from the last dim; ONNX: all begins, all ends */
    int64_t o[2 * MGE_MAX_DIMS] = {0};
    for (int j = 0; j < p->n / 2; j++) {
        int d = r - 1 - j;
        o[d] = p->i[2 * j];
        o[r + d] = p->i[2 * j + 1];
    }
    const char *mode = mge_key_enum_word(MGE_KEY_mode, mge_node_int(n, MGE_KEY_mode, 2));
    const char *om = !mode ? NULL : strcmp(mode, "constant") == 0 ? "constant" : strcmp(mode, "reflect") == 0 ? "reflect"
                                   : strcmp(mode, "replicate") == 0 ? "edge" : NULL;
    if (!om)
        return mge_onnx_w_unsupported(w, "mode=%s", mode ? mode : "?");
    Onnx__NodeProto *nd = NULL;
    const char *pads = mge_onnx_w_i64s(w, 2 * r, o);
    if (strcmp(om, "constant") == 0)
        op(w, &nd, "Pad", OUT(0), 3, IN(0), pads, mge_onnx_w_scalar(w, x->dtype, mge_node_float(n, MGE_KEY_value, 0)));
    else
        op(w, &nd, "Pad", OUT(0), 2, IN(0), pads);
    mge_onnx_w_attr_s(w, nd, "mode", om);
    return nd ? MGE_OK : NOMEM();
}

/* TopK-based sort/argsort: k = the axis's size, read at run time. */
static mge_status ex_sort(mge_onnx_w *w, const mge_node *n)
{
    int r = val(w, n->in[0])->ndim;
    int64_t ax = ints_at(n, MGE_KEY_axis, 0, -1);
    if (ax < 0)
        ax += r;
    if (ax < 0 || ax >= r)
        return mge_onnx_w_unsupported(w, "axis out of range");
    Onnx__NodeProto *nd = NULL;
    const char *k = op(w, &nd, "Shape", NULL, 1, IN(0));
    mge_onnx_w_attr_i(w, nd, "start", ax);
    mge_onnx_w_attr_i(w, nd, "end", ax + 1);
    const char *vals = n->op == MGE_OP_SORT ? OUT(0) : mge_onnx_w_tmp(w, "values");
    int io = n->op == MGE_OP_SORT ? 1 : 0;
    int i64 = val(w, n->out[io])->dtype == MGE_I64;
    const char *idx = i64 ? OUT(io) : mge_onnx_w_tmp(w, "indices");
    const char *in[2] = {IN(0), k}, *outs[2] = {vals, idx};
    nd = mge_onnx_w_node(w, "TopK", 2, in, 2, outs);
    mge_onnx_w_attr_i(w, nd, "axis", ax);
    mge_onnx_w_attr_i(w, nd, "largest", mge_node_int(n, MGE_KEY_descending, 0));
    mge_onnx_w_attr_i(w, nd, "sorted", 1);
    if (!i64) {
        op(w, &nd, "Cast", OUT(io), 1, idx);
        mge_onnx_w_attr_i(w, nd, "to", mge_onnx_dtype_to(val(w, n->out[io])->dtype));
    }
    return nd ? MGE_OK : NOMEM();
}

/* An op whose integer vector (shape, axes, repeats) is the attribute key or
 * the input 1: ONNX takes it as an int64 input. */
static const char *vec_input(mge_onnx_w *w, const mge_node *n, int key)
{
    if (n->nin > 1)
        return as_i64(w, n->in[1]);
    const mge_attr *a = mge_node_attr(n, key);
    return a ? mge_onnx_w_i64s(w, a->n, a->i) : NULL;
}

/* ---------------------------------------------------------------- recurrent layers */

/* The gates of a PyTorch weight's G blocks of H rows in ONNX's order:
 * LSTM i,f,g,o -> i,o,f,c; GRU r,z,n -> z,r,h. */
static const int lstm_gates[4] = {0, 3, 1, 2}, gru_gates[3] = {1, 0, 2}, rnn_gates[1] = {0};
/* lstm's peepholes i, f, o -> ONNX's P i, o, f */
static const int peep_gates[3] = {0, 2, 1};

/* Copies the rows of an f32 [G*H, cols] param into dst in ONNX's gate order. */
static int gate_rows(const mge_value *p, int G, int64_t H, int64_t cols, const int *order, double *dst)
{
    const mge_tensor *t = p->data;
    if (!t || !t->data || t->dtype != MGE_F32 || mge_tensor_numel(t) != G * H * cols)
        return 0;
    const float *f = t->data;
    for (int g = 0; g < G; g++)
        for (int64_t r = 0; r < H * cols; r++)
            dst[(int64_t)g * H * cols + r] = f[(int64_t)order[g] * H * cols + r];
    return 1;
}

/* A [G*H, ...] value's gate blocks in ONNX's order, computed by the graph
 * (weights that are inputs, as in an imported ONNX model), as [1, G*H, ...]. */
static const char *gate_blocks(mge_onnx_w *w, const char *v, int G, const int *order)
{
    const char *parts[4], *sorted[4];
    for (int g = 0; g < G; g++)
        parts[g] = mge_onnx_w_tmp(w, "gate");
    Onnx__NodeProto *nd = mge_onnx_w_node(w, "Split", 1, &v, G, parts);
    mge_onnx_w_attr_i(w, nd, "axis", 0);
    for (int g = 0; g < G; g++)
        sorted[g] = parts[order[g]];
    const char *cat = mge_onnx_w_tmp(w, "gates");
    nd = mge_onnx_w_node(w, "Concat", G, sorted, 1, &cat);
    mge_onnx_w_attr_i(w, nd, "axis", 0);
    int64_t zero = 0;
    return op(w, NULL, "Unsqueeze", NULL, 2, cat, mge_onnx_w_i64s(w, 1, &zero));
}

/* Concat along axis of k (1 or 2) values; the value itself for one. */
static const char *cat_dirs(mge_onnx_w *w, int k, const char *const *v, int64_t axis)
{
    if (k == 1)
        return v[0];
    const char *o = mge_onnx_w_tmp(w, "dirs");
    Onnx__NodeProto *nd = mge_onnx_w_node(w, "Concat", k, v, 1, &o);
    mge_onnx_w_attr_i(w, nd, "axis", axis);
    return nd ? o : NULL;
}

/* How many of x's companions (h0, c0) the node has: its inputs less x and
 * the params the attributes call for; -1 when they do not add up. */
static int rnn_extra(const mge_node *n)
{
    int64_t L = mge_node_int(n, MGE_KEY_num_layers, 1);
    int D = mge_node_int(n, MGE_KEY_bidirectional, 0) ? 2 : 1, per = mge_node_int(n, MGE_KEY_bias, 1) ? 4 : 2;
    per += n->op == MGE_OP_LSTM && mge_node_int(n, MGE_KEY_peephole, 0);
    if (L < 1 || L > 14)
        return -1;
    int e = n->nin - 1 - (int)(L * D) * per;
    return e < 0 || e > (n->op == MGE_OP_LSTM ? 2 : 1) ? -1 : e;
}

/* Whether every weight of the node (the inputs after x and its e
 * companions) is f32 data: then they are written reordered, as initializers. */
static int rnn_all_const(const mge_onnx_w *w, const mge_node *n, int e)
{
    for (int k = 1 + e; k < n->nin; k++) {
        const mge_value *v = &w->g->values[n->in[k]];
        if (v->kind == MGE_VAL_NODE || v->kind == MGE_VAL_INPUT || !v->data || v->data->dtype != MGE_F32)
            return 0;
    }
    return 1;
}

int mge_onnx_w_reads_input(const mge_onnx_w *w, const mge_node *n, int k)
{
    if (n->op != MGE_OP_LSTM && n->op != MGE_OP_GRU && n->op != MGE_OP_RNN)
        return 1;
    int e = rnn_extra(n);
    if (e < 0 || k <= e)
        return 1;
    /* constant weights are written reordered, others read in the graph */
    return !rnn_all_const(w, n, e);
}

static mge_status ex_rnn(mge_onnx_w *w, const mge_node *n)
{
    int lstm = n->op == MGE_OP_LSTM, rnn = n->op == MGE_OP_RNN, G = lstm ? 4 : rnn ? 1 : 3;
    const int *order = lstm ? lstm_gates : rnn ? rnn_gates : gru_gates;
    int64_t H = mge_node_int(n, MGE_KEY_hidden_size, 1), L = mge_node_int(n, MGE_KEY_num_layers, 1);
    int D = mge_node_int(n, MGE_KEY_bidirectional, 0) ? 2 : 1, bias = (int)mge_node_int(n, MGE_KEY_bias, 1);
    int bf = (int)mge_node_int(n, MGE_KEY_batch_first, 0);
    int peep = lstm && mge_node_int(n, MGE_KEY_peephole, 0), per = (bias ? 4 : 2) + peep, extra = rnn_extra(n);
    if (H < 1 || extra < 0 || (lstm && extra == 1))
        return mge_onnx_w_unsupported(w, "%d inputs do not fit the attributes", n->nin);
    const mge_value *x = val(w, n->in[0]);
    if (x->ndim != 3 || x->dtype != MGE_F32)
        return mge_onnx_w_unsupported(w, "x must be f32 of rank 3");
    Onnx__NodeProto *nd = NULL;
    int64_t p021[3] = {1, 0, 2};
    const char *cur = IN(0);
    if (bf) {
        cur = op(w, &nd, "Transpose", NULL, 1, cur);
        mge_onnx_w_attr_ints(w, nd, "perm", 3, p021);
    }
    const char *hn[14], *cn[14];
    for (int64_t l = 0; l < L; l++) {
        const mge_value *wih = val(w, n->in[1 + extra + (int)(l * D) * per]);
        int64_t in = wih->ndim == 2 ? wih->dims[1] : -1;
        if (in < 1)
            return mge_onnx_w_unsupported(w, "layer %lld's input weight is not [G*H, in]", (long long)l);
        double *W = mge_onnx_w_alloc(w, (size_t)(D * G * H * in) * sizeof *W);
        double *R = mge_onnx_w_alloc(w, (size_t)(D * G * H * H) * sizeof *R);
        double *B = mge_onnx_w_alloc(w, (size_t)(D * 2 * G * H) * sizeof *B);
        double *P = mge_onnx_w_alloc(w, (size_t)(D * 3 * H) * sizeof *P);
        if (!W || !R || !B || !P)
            return NOMEM();
        int consts = rnn_all_const(w, n, extra);
        for (int d = 0; d < D && consts; d++) {
            int base = 1 + extra + (int)(l * D + d) * per;
            consts = gate_rows(val(w, n->in[base]), G, H, in, order, W + d * G * H * in) &&
                     gate_rows(val(w, n->in[base + 1]), G, H, H, order, R + d * G * H * H) &&
                     (!bias || (gate_rows(val(w, n->in[base + 2]), G, H, 1, order, B + d * 2 * G * H) &&
                                gate_rows(val(w, n->in[base + 3]), G, H, 1, order, B + d * 2 * G * H + G * H))) &&
                     (!peep || gate_rows(val(w, n->in[base + per - 1]), 3, H, 1, peep_gates, P + d * 3 * H));
            if (!consts)
                return mge_onnx_w_unsupported(w, "the weights of layer %lld do not have PyTorch's shapes", (long long)l);
        }
        const char *Wn, *Rn, *Bn = "", *Pn = "";
        if (consts) {
            int64_t wd[3] = {D, G * H, in}, rd[3] = {D, G * H, H}, bd[2] = {D, 2 * G * H}, pd[2] = {D, 3 * H};
            Wn = mge_onnx_w_const(w, MGE_F32, 3, wd, D * G * H * in, W);
            Rn = mge_onnx_w_const(w, MGE_F32, 3, rd, D * G * H * H, R);
            if (bias)
                Bn = mge_onnx_w_const(w, MGE_F32, 2, bd, D * 2 * G * H, B);
            if (peep)
                Pn = mge_onnx_w_const(w, MGE_F32, 2, pd, D * 3 * H, P);
        } else {
            /* weights the graph computes or takes as inputs: reorder them in it */
            const char *wv[2], *rv[2], *bv[2], *pv2[2];
            for (int d = 0; d < D; d++) {
                int base = 1 + extra + (int)(l * D + d) * per;
                for (int k = 0; k < per; k++) {
                    const mge_value *pv = val(w, n->in[base + k]);
                    int64_t rows = pv->ndim >= 1 ? pv->dims[0] : -1;
                    if (peep && k == per - 1) {
                        if (pv->dtype != MGE_F32 || rows != 3 * H || pv->ndim != 1)
                            return mge_onnx_w_unsupported(w, "%s: expected f32 [%lld]", pv->name, (long long)(3 * H));
                        continue;
                    }
                    if (pv->dtype != MGE_F32 || rows != G * H || pv->ndim != (k < 2 ? 2 : 1))
                        return mge_onnx_w_unsupported(w, "%s: expected f32 [%lld%s]", pv->name,
                                                      (long long)(G * H), k < 2 ? ", cols" : "");
                }
                wv[d] = gate_blocks(w, IN(base), G, order);
                rv[d] = gate_blocks(w, IN(base + 1), G, order);
                if (bias) {
                    const char *bb[2] = {gate_blocks(w, IN(base + 2), G, order), gate_blocks(w, IN(base + 3), G, order)};
                    bv[d] = cat_dirs(w, 2, bb, 1);
                }
                if (peep)
                    pv2[d] = gate_blocks(w, IN(base + per - 1), 3, peep_gates);
            }
            if (peep)
                Pn = cat_dirs(w, D, pv2, 0);
            Wn = cat_dirs(w, D, wv, 0);
            Rn = cat_dirs(w, D, rv, 0);
            if (bias)
                Bn = cat_dirs(w, D, bv, 0);
        }
        const char *h0 = "", *c0 = "";
        if (extra) {
            int64_t s = l * D, e = l * D + D, ax = 0;
            const char *ss = mge_onnx_w_i64s(w, 1, &s), *es = mge_onnx_w_i64s(w, 1, &e), *as = mge_onnx_w_i64s(w, 1, &ax);
            h0 = op(w, NULL, "Slice", NULL, 4, IN(1), ss, es, as);
            if (lstm)
                c0 = op(w, NULL, "Slice", NULL, 4, IN(2), ss, es, as);
        }
        const char *y = mge_onnx_w_tmp(w, "Y"), *yh = mge_onnx_w_tmp(w, "Y_h"), *yc = lstm ? mge_onnx_w_tmp(w, "Y_c") : NULL;
        const char *ins[8] = {cur, Wn, Rn, Bn, "", h0, c0, Pn}, *outs[3] = {y, yh, yc};
        nd = mge_onnx_w_node(w, lstm ? "LSTM" : rnn ? "RNN" : "GRU", lstm ? 7 + peep : 6, ins, lstm ? 3 : 2, outs);
        mge_onnx_w_attr_i(w, nd, "hidden_size", H);
        mge_onnx_w_attr_s(w, nd, "direction", D == 2 ? "bidirectional" : "forward");
        if (rnn) {
            const char *act = mge_node_int(n, MGE_KEY_nonlinearity, 0) ? "Relu" : "Tanh", *acts[2] = {act, act};
            mge_onnx_w_attr_strs(w, nd, "activations", D, acts);
        } else if (!lstm)   /* 1: PyTorch's n gate, mge's default */
            mge_onnx_w_attr_i(w, nd, "linear_before_reset", mge_node_int(n, MGE_KEY_linear_before_reset, 1) != 0);
        hn[l] = yh;
        cn[l] = yc;
        /* Y [S, D, N, H] -> [S, N, D*H] */
        int64_t p0213[4] = {0, 2, 1, 3}, s3[3] = {0, 0, -1};
        const char *t = op(w, &nd, "Transpose", NULL, 1, y);
        mge_onnx_w_attr_ints(w, nd, "perm", 4, p0213);
        int last = l == L - 1;
        cur = op(w, NULL, "Reshape", last && !bf ? OUT(0) : NULL, 2, t, mge_onnx_w_i64s(w, 3, s3));
    }
    if (bf) {
        op(w, &nd, "Transpose", OUT(0), 1, cur);
        mge_onnx_w_attr_ints(w, nd, "perm", 3, p021);
    }
    for (int k = 1; k < n->nout && k < 3; k++) {
        const char **parts = k == 1 ? hn : cn;
        if (L == 1) {
            op(w, NULL, "Identity", OUT(k), 1, parts[0]);
            continue;
        }
        const char *out = OUT(k);
        nd = mge_onnx_w_node(w, "Concat", (int)L, parts, 1, &out);
        mge_onnx_w_attr_i(w, nd, "axis", 0);
    }
    return w->nomem ? NOMEM() : MGE_OK;
}

/* ---------------------------------------------------------------- plain ops on int8 values */

/* The scale and zero point of a qs8 value: the y_scale of the int8 op
 * that made it, or of the first input of an op that passes values through
 * (pools, reshapes: mge runs them on the int8 values at their scale). */
static int qscale_of(mge_onnx_w *w, int v, double *s, int64_t *z)
{
    for (int guard = 0; guard < 100000; guard++) {
        const mge_value *vv = val(w, v);
        if (vv->kind != MGE_VAL_NODE) {
            if (!vv->data || vv->data->q.nscale != 1)
                return 0;
            *s = vv->data->q.scale[0];
            *z = vv->data->q.zero;
            return 1;
        }
        const mge_node *p = &w->g->nodes[vv->producer];
        switch (p->op) {
        case MGE_OP_QUANTIZE:
            *s = mge_node_float(p, MGE_KEY_scale, 1);
            *z = mge_node_int(p, MGE_KEY_zero, 0);
            return 1;
        case MGE_OP_QCONV2D: case MGE_OP_QLINEAR: case MGE_OP_QADD:
            *s = mge_node_float(p, MGE_KEY_y_scale, 1);
            *z = mge_node_int(p, MGE_KEY_y_zero, 0);
            return 1;
        default:
            if (p->nin < 1)
                return 0;
            v = p->in[0];
        }
    }
    return 0;
}

/* Data movement that ONNX runs on int8 as mge does. */
static int int8_safe(int o)
{
    switch (o) {
    case MGE_OP_MAXPOOL2D: case MGE_OP_FLATTEN: case MGE_OP_RESHAPE: case MGE_OP_TRANSPOSE: case MGE_OP_SLICE:
    case MGE_OP_SQUEEZE: case MGE_OP_UNSQUEEZE: case MGE_OP_DROPOUT: case MGE_OP_COPY: case MGE_OP_GATHER:
    case MGE_OP_EXPAND: case MGE_OP_TILE:
        return 1;
    default: return 0;
    }
}

static mge_status export_node(mge_onnx_w *w, const mge_node *n);

/* A float op reading qs8 values (global_avgpool after the last qconv2d):
 * DequantizeLinear of them, the op on floats, QuantizeLinear of its qs8
 * outputs at the same scale. */
static mge_status export_on_floats(mge_onnx_w *w, const mge_node *n)
{
    double s;
    int64_t z;
    for (int i = 0; i < n->nin && i < 64; i++) {
        if (val(w, n->in[i])->dtype != MGE_QS8)
            continue;
        if (!qscale_of(w, n->in[i], &s, &z))
            return mge_onnx_w_unsupported(w, "an int8 input whose scale is not known");
        w->ovin[i] = dq_attr(w, mge_onnx_w_name(w, n->in[i]), s, z, NULL);
    }
    if (n->nout > 4)
        return mge_onnx_w_unsupported(w, "%d outputs", n->nout);
    double os[4];
    int64_t oz[4];
    for (int k = 0; k < n->nout; k++) {
        if (val(w, n->out[k])->dtype != MGE_QS8)
            continue;
        if (!qscale_of(w, n->out[k], &os[k], &oz[k]))
            return mge_onnx_w_unsupported(w, "an int8 output whose scale is not known");
        w->ovout[k] = mge_onnx_w_tmp(w, "float");
    }
    w->float_ov = 1;
    mge_status st = export_node(w, n);
    w->float_ov = 0;
    for (int k = 0; k < n->nout && !st; k++)
        if (w->ovout[k] && !q_attr(w, w->ovout[k], os[k], oz[k], mge_onnx_w_name(w, n->out[k])))
            st = NOMEM();
    memset(w->ovin, 0, sizeof w->ovin);
    memset(w->ovout, 0, sizeof w->ovout);
    return st;
}

mge_status mge_onnx_w_export_node(mge_onnx_w *w, const mge_node *n)
{
    const mge_opinfo *oi = mge_op_info(n->op);
    int q8 = 0;
    for (int i = 0; i < n->nin; i++)
        q8 |= val(w, n->in[i])->dtype == MGE_QS8;
    if (q8 && oi && strcmp(oi->family, "quant") != 0 && !int8_safe(n->op))
        return export_on_floats(w, n);
    return export_node(w, n);
}

/* ---------------------------------------------------------------- the node */

static mge_status export_node(mge_onnx_w *w, const mge_node *n)
{
    const char *d = direct(n->op);
    Onnx__NodeProto *nd = NULL;
    const mge_value *x = n->nin ? val(w, n->in[0]) : NULL;
    mge_dtype dt = w->float_ov ? MGE_F32 : x ? x->dtype : MGE_F32;
    int r = x ? x->ndim : 0;
    if ((n->op == MGE_OP_ISINF || n->op == MGE_OP_ISNAN) && (dt == MGE_F16 || dt == MGE_BF16)) {
        /* onnxruntime has no half IsInf: the test is the same on f32 */
        const char *f = op(w, &nd, "Cast", NULL, 1, IN(0));
        mge_onnx_w_attr_i(w, nd, "to", MGE_ONNX_FLOAT);
        return op(w, NULL, d, OUT(0), 1, f) ? MGE_OK : NOMEM();
    }
    if (d) {
        const char *in[8];
        for (int i = 0; i < n->nin && i < 8; i++)
            in[i] = IN(i);
        const char *out = OUT(0);
        return mge_onnx_w_node(w, d, n->nin, in, 1, &out) ? MGE_OK : NOMEM();
    }
    switch (n->op) {
    case MGE_OP_RELU6: case MGE_OP_LEAKY_RELU: case MGE_OP_ELU: case MGE_OP_GELU: case MGE_OP_SILU:
    case MGE_OP_HSIGMOID: case MGE_OP_MISH:
        return apply_act(w, n->op, IN(0), OUT(0), dt, mge_node_float(n, MGE_KEY_alpha, n->op == MGE_OP_ELU ? 1 : 0.01))
                   ? MGE_OK : NOMEM();
    case MGE_OP_RSQRT:
        return op(w, NULL, "Reciprocal", OUT(0), 1, op(w, NULL, "Sqrt", NULL, 1, IN(0))) ? MGE_OK : NOMEM();
    case MGE_OP_SQUARE: return op(w, NULL, "Mul", OUT(0), 2, IN(0), IN(0)) ? MGE_OK : NOMEM();
    case MGE_OP_CLAMP: case MGE_OP_HARDTANH: {
        const mge_attr *lo = mge_node_attr(n, MGE_KEY_min), *hi = mge_node_attr(n, MGE_KEY_max);
        double l = lo ? lo->f : -1, h = hi ? hi->f : 1;
        int hl = lo || n->op == MGE_OP_HARDTANH, hh = hi || n->op == MGE_OP_HARDTANH;
        return op(w, NULL, "Clip", OUT(0), 3, IN(0), hl ? mge_onnx_w_scalar(w, dt, l) : "",
                  hh ? mge_onnx_w_scalar(w, dt, h) : "") ? MGE_OK : NOMEM();
    }
    case MGE_OP_SOFTPLUS: {
        /* PyTorch: x where beta * x > threshold, else log(1 + exp(beta x)) / beta */
        double beta = mge_node_float(n, MGE_KEY_beta, 1), th = mge_node_float(n, MGE_KEY_threshold, 20);
        const char *bx = beta == 1 ? IN(0) : op(w, NULL, "Mul", NULL, 2, IN(0), mge_onnx_w_scalar(w, dt, beta));
        const char *sp = op(w, NULL, "Softplus", NULL, 1, bx);
        if (beta != 1)
            sp = op(w, NULL, "Div", NULL, 2, sp, mge_onnx_w_scalar(w, dt, beta));
        const char *big = op(w, NULL, "Greater", NULL, 2, bx, mge_onnx_w_scalar(w, dt, th));
        return op(w, NULL, "Where", OUT(0), 3, big, IN(0), sp) ? MGE_OK : NOMEM();
    }
    case MGE_OP_PRELU: {
        const char *slope = r > 2 && val(w, n->in[1])->ndim == 1 && val(w, n->in[1])->dims[0] != 1
                                ? chan_view(w, IN(1), r) : IN(1);
        return op(w, NULL, "PRelu", OUT(0), 2, IN(0), slope) ? MGE_OK : NOMEM();
    }
    case MGE_OP_CAST: {
        mge_dtype to = (mge_dtype)mge_node_int(n, MGE_KEY_dtype, MGE_F32);
        int ot = mge_onnx_dtype_to(to);
        if (!ot)
            return mge_onnx_w_unsupported(w, "cast to %s", mge_dtype_name(to));
        op(w, &nd, "Cast", OUT(0), 1, IN(0));
        mge_onnx_w_attr_i(w, nd, "to", ot);
        return nd ? MGE_OK : NOMEM();
    }
    case MGE_OP_CONV2D: case MGE_OP_CONV1D: case MGE_OP_CONV3D: {
        int nsp = n->op == MGE_OP_CONV1D ? 1 : n->op == MGE_OP_CONV2D ? 2 : 3;
        if (n->nin > 2)
            op(w, &nd, "Conv", OUT(0), 3, IN(0), IN(1), IN(2));
        else
            op(w, &nd, "Conv", OUT(0), 2, IN(0), IN(1));
        conv_attrs(w, nd, n, nsp);
        return nd ? MGE_OK : NOMEM();
    }
    case MGE_OP_CONV_TRANSPOSE2D: {
        if (n->nin > 2)
            op(w, &nd, "ConvTranspose", OUT(0), 3, IN(0), IN(1), IN(2));
        else
            op(w, &nd, "ConvTranspose", OUT(0), 2, IN(0), IN(1));
        conv_attrs(w, nd, n, 2);
        int64_t opad[2] = {ints_at(n, MGE_KEY_output_padding, 0, 0), ints_at(n, MGE_KEY_output_padding, 1, 0)};
        if (opad[0] || opad[1])
            mge_onnx_w_attr_ints(w, nd, "output_padding", 2, opad);
        return nd ? MGE_OK : NOMEM();
    }
    case MGE_OP_LINEAR:
        return linear_body(w, IN(0), r, IN(1), n->nin > 2 ? IN(2) : NULL, OUT(0)) ? MGE_OK : NOMEM();
    case MGE_OP_MATMUL: {
        int ta = (int)mge_node_int(n, MGE_KEY_transpose_a, 0), tb = (int)mge_node_int(n, MGE_KEY_transpose_b, 0);
        int rb = val(w, n->in[1])->ndim;
        if ((ta && r < 2) || (tb && rb < 2))
            return mge_onnx_w_unsupported(w, "a transposed operand of rank < 2");
        const char *a = ta ? swap_last2(w, IN(0), r) : IN(0), *b = tb ? swap_last2(w, IN(1), rb) : IN(1);
        return op(w, NULL, "MatMul", OUT(0), 2, a, b) ? MGE_OK : NOMEM();
    }
    case MGE_OP_BATCHNORM: case MGE_OP_LAYERNORM: case MGE_OP_GROUP_NORM: case MGE_OP_INSTANCE_NORM:
    case MGE_OP_RMS_NORM:
        return ex_norm(w, n);
    case MGE_OP_MAXPOOL2D:
        op(w, &nd, "MaxPool", OUT(0), 1, IN(0));
        window_attrs(w, nd, n, 2, 1, 1, 1);
        mge_onnx_w_attr_i(w, nd, "ceil_mode", mge_node_int(n, MGE_KEY_ceil_mode, 0));
        return nd ? MGE_OK : NOMEM();
    case MGE_OP_AVGPOOL2D:
        op(w, &nd, "AveragePool", OUT(0), 1, IN(0));
        window_attrs(w, nd, n, 2, 1, 0, 1);
        mge_onnx_w_attr_i(w, nd, "ceil_mode", mge_node_int(n, MGE_KEY_ceil_mode, 0));
        mge_onnx_w_attr_i(w, nd, "count_include_pad", mge_node_int(n, MGE_KEY_count_include_pad, 1));
        return nd ? MGE_OK : NOMEM();
    case MGE_OP_ADAPTIVE_AVGPOOL2D: case MGE_OP_ADAPTIVE_MAXPOOL2D: case MGE_OP_ADAPTIVE_AVGPOOL1D:
    case MGE_OP_ADAPTIVE_MAXPOOL1D: {
        int nsp = n->op == MGE_OP_ADAPTIVE_AVGPOOL2D || n->op == MGE_OP_ADAPTIVE_MAXPOOL2D ? 2 : 1;
        int avg = n->op == MGE_OP_ADAPTIVE_AVGPOOL2D || n->op == MGE_OP_ADAPTIVE_AVGPOOL1D;
        int64_t k[2], os[2];
        int global = 1;
        if (r < nsp + 1)
            return mge_onnx_w_unsupported(w, "rank %d", r);
        for (int i = 0; i < nsp; i++) {
            os[i] = ints_at(n, MGE_KEY_output_size, i, 1);
            int64_t in = x->dims[r - nsp + i];
            global &= os[i] == 1;
            if (os[i] != 1 && in < 0)
                return mge_onnx_w_unsupported(w, "output size %lld of an input dim that is not a number: only "
                                              "global or evenly dividing adaptive pools have an ONNX form",
                                              (long long)os[i]);
            if (os[i] != 1 && (os[i] < 1 || in % os[i]))
                return mge_onnx_w_unsupported(w, "output size %lld does not divide the input's %lld: only global "
                                              "or evenly dividing adaptive pools have an ONNX form",
                                              (long long)os[i], (long long)in);
            k[i] = os[i] == 1 ? in : in / os[i];
        }
        if (global && r == nsp + 2)
            return op(w, NULL, avg ? "GlobalAveragePool" : "GlobalMaxPool", OUT(0), 1, IN(0)) ? MGE_OK : NOMEM();
        for (int i = 0; i < nsp; i++)
            if (k[i] < 1)
                return mge_onnx_w_unsupported(w, "an input dim that is not a number");
        if (r != nsp + 2)
            return mge_onnx_w_unsupported(w, "an unbatched input");
        op(w, &nd, avg ? "AveragePool" : "MaxPool", OUT(0), 1, IN(0));
        mge_onnx_w_attr_ints(w, nd, "kernel_shape", nsp, k);
        mge_onnx_w_attr_ints(w, nd, "strides", nsp, k);
        return nd ? MGE_OK : NOMEM();
    }
    case MGE_OP_SOFTMAX: case MGE_OP_LOG_SOFTMAX:
        op(w, &nd, n->op == MGE_OP_SOFTMAX ? "Softmax" : "LogSoftmax", OUT(0), 1, IN(0));
        mge_onnx_w_attr_i(w, nd, "axis", ints_at(n, MGE_KEY_axis, 0, -1));
        return nd ? MGE_OK : NOMEM();
    case MGE_OP_SUM: case MGE_OP_MEAN: case MGE_OP_MAX: case MGE_OP_MIN: case MGE_OP_PROD:
        return ex_reduce(w, n);
    case MGE_OP_ARGMAX: case MGE_OP_ARGMIN:
        op(w, &nd, n->op == MGE_OP_ARGMAX ? "ArgMax" : "ArgMin", OUT(0), 1, IN(0));
        mge_onnx_w_attr_i(w, nd, "axis", ints_at(n, MGE_KEY_axis, 0, -1));
        mge_onnx_w_attr_i(w, nd, "keepdims", mge_node_int(n, MGE_KEY_keepdim, 0));
        return nd ? MGE_OK : NOMEM();
    case MGE_OP_RESHAPE: {
        const char *s = vec_input(w, n, MGE_KEY_shape);
        if (!s)
            return mge_onnx_w_unsupported(w, "no shape");
        return op(w, NULL, "Reshape", OUT(0), 2, IN(0), s) ? MGE_OK : NOMEM();
    }
    case MGE_OP_FLATTEN: {
        int64_t st = mge_node_int(n, MGE_KEY_start, 1);
        if (st < 0)
            st += r;
        if (st < 0 || st > r)
            return mge_onnx_w_unsupported(w, "start out of range");
        if (st == 1) {
            op(w, &nd, "Flatten", OUT(0), 1, IN(0));
            mge_onnx_w_attr_i(w, nd, "axis", 1);
            return nd ? MGE_OK : NOMEM();
        }
        int64_t s[MGE_MAX_DIMS + 1] = {0};
        s[st] = -1;   /* dims before start kept (0: copy), the rest one */
        return op(w, NULL, "Reshape", OUT(0), 2, IN(0), mge_onnx_w_i64s(w, (int)st + 1, s)) ? MGE_OK : NOMEM();
    }
    case MGE_OP_TRANSPOSE: {
        const mge_attr *p = mge_node_attr(n, MGE_KEY_perm);
        op(w, &nd, "Transpose", OUT(0), 1, IN(0));
        if (p)
            mge_onnx_w_attr_ints(w, nd, "perm", p->n, p->i);
        return nd ? MGE_OK : NOMEM();
    }
    case MGE_OP_CONCAT: {
        const char *in[64];
        for (int i = 0; i < n->nin && i < 64; i++)
            in[i] = IN(i);
        const char *out = OUT(0);
        nd = mge_onnx_w_node(w, "Concat", n->nin, in, 1, &out);
        mge_onnx_w_attr_i(w, nd, "axis", ints_at(n, MGE_KEY_axis, 0, 0));
        return nd ? MGE_OK : NOMEM();
    }
    case MGE_OP_SLICE: {
        if (n->nin > 1) {
            const char *in[5] = {IN(0), "", "", "", ""};
            for (int i = 1; i < n->nin && i < 5; i++)
                in[i] = as_i64(w, n->in[i]);
            const char *out = OUT(0);
            return mge_onnx_w_node(w, "Slice", n->nin, in, 1, &out) ? MGE_OK : NOMEM();
        }
        int64_t ax = ints_at(n, MGE_KEY_axis, 0, 0), st = mge_node_int(n, MGE_KEY_start, 0);
        const mge_attr *e = mge_node_attr(n, MGE_KEY_end);
        int64_t en = e ? e->i[0] : INT64_MAX, step = mge_node_int(n, MGE_KEY_step, 1);
        return op(w, NULL, "Slice", OUT(0), 5, IN(0), mge_onnx_w_i64s(w, 1, &st), mge_onnx_w_i64s(w, 1, &en),
                  mge_onnx_w_i64s(w, 1, &ax), mge_onnx_w_i64s(w, 1, &step)) ? MGE_OK : NOMEM();
    }
    case MGE_OP_GATHER: case MGE_OP_INDEX_SELECT:
        op(w, &nd, "Gather", OUT(0), 2, IN(0), IN(1));
        mge_onnx_w_attr_i(w, nd, "axis", ints_at(n, MGE_KEY_axis, 0, 0));
        return nd ? MGE_OK : NOMEM();
    case MGE_OP_GATHER_ELEMENTS:
        op(w, &nd, "GatherElements", OUT(0), 2, IN(0), IN(1));
        mge_onnx_w_attr_i(w, nd, "axis", ints_at(n, MGE_KEY_axis, 0, 0));
        return nd ? MGE_OK : NOMEM();
    case MGE_OP_SCATTER: case MGE_OP_SCATTER_ND: {
        /* opset 17 scatters with none, add and mul; max and min came in 18 */
        int64_t red = mge_node_int(n, MGE_KEY_reduction, 0);
        if (red > 2)
            return mge_onnx_w_unsupported(w, "%s with reduction = %s (ONNX opset 17 has none, add and mul)",
                                          mge_op_info(n->op)->name, mge_key_enum_word(MGE_KEY_reduction, (int)red));
        op(w, &nd, n->op == MGE_OP_SCATTER ? "ScatterElements" : "ScatterND", OUT(0), 3, IN(0), IN(1), IN(2));
        if (n->op == MGE_OP_SCATTER)
            mge_onnx_w_attr_i(w, nd, "axis", ints_at(n, MGE_KEY_axis, 0, 0));
        if (red)
            mge_onnx_w_attr_s(w, nd, "reduction", mge_key_enum_word(MGE_KEY_reduction, (int)red));
        return nd ? MGE_OK : NOMEM();
    }
    case MGE_OP_ONE_HOT: {
        /* one_hot(indices[, depth][, values]): depth an attribute or input 1 */
        const mge_attr *da = mge_node_attr(n, MGE_KEY_depth);
        int vi = da ? 1 : 2;
        const char *depth = da ? mge_onnx_w_scalar(w, MGE_I64, (double)da->i[0]) : n->nin > 1 ? IN(1) : NULL;
        if (!depth)
            return mge_onnx_w_unsupported(w, "no depth");
        mge_dtype odt = val(w, n->out[0])->dtype;
        double ov[2] = {0, 1};
        const char *values = n->nin > vi ? IN(vi) : mge_onnx_w_vec(w, odt, 2, ov, 1);
        op(w, &nd, "OneHot", OUT(0), 3, IN(0), depth, values);
        mge_onnx_w_attr_i(w, nd, "axis", ints_at(n, MGE_KEY_axis, 0, -1));
        return nd ? MGE_OK : NOMEM();
    }
    case MGE_OP_RESHAPE_AS:
        /* dy's elements under x's shape (how the importer writes some
         * reductions; as a gradient op it never reaches an inference graph) */
        return op(w, NULL, "Reshape", OUT(0), 2, IN(0), op(w, NULL, "Shape", NULL, 1, IN(1))) ? MGE_OK : NOMEM();
    case MGE_OP_GATHER_ELEMENTS_GRAD: {
        /* (dy, idx, x): zeros like x with dy added where gather_elements
         * read: ScatterElements with reduction add (opset 16) */
        int ot = mge_onnx_dtype_to(val(w, n->in[2])->dtype);
        if (!ot)
            return mge_onnx_w_unsupported(w, "dtype %s", mge_dtype_name(val(w, n->in[2])->dtype));
        const char *z = op(w, &nd, "ConstantOfShape", NULL, 1, op(w, NULL, "Shape", NULL, 1, IN(2)));
        mge_onnx_w_attr_scalar(w, nd, "value", ot, 0);
        op(w, &nd, "ScatterElements", OUT(0), 3, z, IN(1), IN(0));
        mge_onnx_w_attr_i(w, nd, "axis", ints_at(n, MGE_KEY_axis, 0, 0));
        mge_onnx_w_attr_s(w, nd, "reduction", "add");
        return nd ? MGE_OK : NOMEM();
    }
    case MGE_OP_GATHER_GRAD: {
        /* (dy, idx, x; axis): zeros like x with dy's slices added where
         * gather read; along axis 0 that is ScatterND (reduction add) with
         * the indices as [..., 1] */
        int rx = val(w, n->in[2])->ndim;
        int64_t ax = ints_at(n, MGE_KEY_axis, 0, 0);
        if (ax < 0)
            ax += rx;
        if (ax != 0)
            return mge_onnx_w_unsupported(w, "axis %lld (only axis 0 has a ScatterND form)", (long long)ax);
        int ot = mge_onnx_dtype_to(val(w, n->in[2])->dtype);
        if (!ot)
            return mge_onnx_w_unsupported(w, "dtype %s", mge_dtype_name(val(w, n->in[2])->dtype));
        int64_t last = -1;
        const char *z = op(w, &nd, "ConstantOfShape", NULL, 1, op(w, NULL, "Shape", NULL, 1, IN(2)));
        mge_onnx_w_attr_scalar(w, nd, "value", ot, 0);
        const char *ix = op(w, NULL, "Unsqueeze", NULL, 2, as_i64(w, n->in[1]), mge_onnx_w_i64s(w, 1, &last));
        op(w, &nd, "ScatterND", OUT(0), 3, z, ix, IN(0));
        mge_onnx_w_attr_s(w, nd, "reduction", "add");
        return nd ? MGE_OK : NOMEM();
    }
    case MGE_OP_EMBEDDING:
        if (n->nin < 2)
            return mge_onnx_w_unsupported(w, "no weight input");
        return op(w, NULL, "Gather", OUT(0), 2, IN(1), IN(0)) ? MGE_OK : NOMEM();
    case MGE_OP_SDPA:
        return ex_sdpa(w, n);
    case MGE_OP_SHAPE: {
        const mge_attr *e = mge_node_attr(n, MGE_KEY_end);
        int64_t st = mge_node_int(n, MGE_KEY_start, 0);
        int i64 = val(w, n->out[0])->dtype == MGE_I64;
        const char *s = op(w, &nd, "Shape", i64 ? OUT(0) : NULL, 1, IN(0));
        if (st)
            mge_onnx_w_attr_i(w, nd, "start", st);
        if (e)
            mge_onnx_w_attr_i(w, nd, "end", e->i[0]);
        if (!i64) {
            op(w, &nd, "Cast", OUT(0), 1, s);
            mge_onnx_w_attr_i(w, nd, "to", mge_onnx_dtype_to(val(w, n->out[0])->dtype));
        }
        return nd ? MGE_OK : NOMEM();
    }
    case MGE_OP_EXPAND: case MGE_OP_TILE: {
        const char *s = vec_input(w, n, n->op == MGE_OP_EXPAND ? MGE_KEY_shape : MGE_KEY_repeats);
        if (!s)
            return mge_onnx_w_unsupported(w, "no %s", n->op == MGE_OP_EXPAND ? "shape" : "repeats");
        return op(w, NULL, n->op == MGE_OP_EXPAND ? "Expand" : "Tile", OUT(0), 2, IN(0), s) ? MGE_OK : NOMEM();
    }
    case MGE_OP_SQUEEZE: case MGE_OP_UNSQUEEZE: {
        const char *ax = vec_input(w, n, MGE_KEY_axis), *t = n->op == MGE_OP_SQUEEZE ? "Squeeze" : "Unsqueeze";
        if (!ax && n->op == MGE_OP_UNSQUEEZE)
            return mge_onnx_w_unsupported(w, "no axis");
        return (ax ? op(w, NULL, t, OUT(0), 2, IN(0), ax) : op(w, NULL, t, OUT(0), 1, IN(0))) ? MGE_OK : NOMEM();
    }
    case MGE_OP_SPLIT: {
        const char *in[2] = {IN(0), NULL}, *outs[4];
        int nin = 1;
        if (n->nin > 1 || mge_node_attr(n, MGE_KEY_sizes)) {
            in[1] = vec_input(w, n, MGE_KEY_sizes);
            nin = 2;
        } else {
            /* mge's parts are ceil(dim / k), the rest last; opset 17's Split
             * without sizes wants them even: give the sizes when dim is known */
            int64_t ax = ints_at(n, MGE_KEY_axis, 0, 0), k = n->nout;
            if (ax < 0)
                ax += r;
            int64_t dim = ax >= 0 && ax < r ? x->dims[ax] : -1;
            if (dim >= 0 && dim % k) {
                int64_t c = (dim + k - 1) / k, sz[4];
                for (int i = 0; i < k && i < 4; i++)
                    sz[i] = i + 1 < k ? c : dim - c * (k - 1);
                in[1] = mge_onnx_w_i64s(w, (int)k, sz);
                nin = 2;
            } else if (dim < 0) {
                return mge_onnx_w_unsupported(w, "equal parts of an axis that is not a number (give sizes)");
            }
        }
        for (int k = 0; k < n->nout && k < 4; k++)
            outs[k] = OUT(k);
        nd = mge_onnx_w_node(w, "Split", nin, in, n->nout, outs);
        mge_onnx_w_attr_i(w, nd, "axis", ints_at(n, MGE_KEY_axis, 0, 0));
        return nd ? MGE_OK : NOMEM();
    }
    case MGE_OP_RANGE: {
        /* Range takes scalars */
        const char *in[3];
        for (int i = 0; i < 3; i++)
            in[i] = val(w, n->in[i])->ndim == 0 ? IN(i) : op(w, NULL, "Reshape", NULL, 2, IN(i), mge_onnx_w_i64s(w, 0, NULL));
        return op(w, NULL, "Range", OUT(0), 3, in[0], in[1], in[2]) ? MGE_OK : NOMEM();
    }
    case MGE_OP_CONSTANT_OF_SHAPE: {
        mge_dtype to = val(w, n->out[0])->dtype;
        int ot = mge_onnx_dtype_to(to);
        if (!ot)
            return mge_onnx_w_unsupported(w, "dtype %s", mge_dtype_name(to));
        op(w, &nd, "ConstantOfShape", OUT(0), 1, as_i64(w, n->in[0]));
        mge_onnx_w_attr_scalar(w, nd, "value", ot, mge_node_float(n, MGE_KEY_value, 0));
        return nd ? MGE_OK : NOMEM();
    }
    case MGE_OP_CUMSUM: {
        int64_t ax = ints_at(n, MGE_KEY_axis, 0, 0);
        op(w, &nd, "CumSum", OUT(0), 2, IN(0), mge_onnx_w_scalar(w, MGE_I64, (double)ax));
        mge_onnx_w_attr_i(w, nd, "exclusive", mge_node_int(n, MGE_KEY_exclusive, 0));
        mge_onnx_w_attr_i(w, nd, "reverse", mge_node_int(n, MGE_KEY_reverse, 0));
        return nd ? MGE_OK : NOMEM();
    }
    case MGE_OP_TOPK: {
        int64_t k = mge_node_int(n, MGE_KEY_k, 1);
        int i64 = val(w, n->out[1])->dtype == MGE_I64;
        const char *idx = i64 ? OUT(1) : mge_onnx_w_tmp(w, "indices");
        const char *in[2] = {IN(0), mge_onnx_w_i64s(w, 1, &k)}, *outs[2] = {OUT(0), idx};
        nd = mge_onnx_w_node(w, "TopK", 2, in, 2, outs);
        mge_onnx_w_attr_i(w, nd, "axis", ints_at(n, MGE_KEY_axis, 0, -1));
        mge_onnx_w_attr_i(w, nd, "largest", mge_node_int(n, MGE_KEY_largest, 1));
        mge_onnx_w_attr_i(w, nd, "sorted", mge_node_int(n, MGE_KEY_sorted, 1));
        if (!i64) {
            op(w, &nd, "Cast", OUT(1), 1, idx);
            mge_onnx_w_attr_i(w, nd, "to", mge_onnx_dtype_to(val(w, n->out[1])->dtype));
        }
        return nd ? MGE_OK : NOMEM();
    }
    case MGE_OP_SORT: case MGE_OP_ARGSORT:
        return ex_sort(w, n);
    case MGE_OP_RESIZE:
        return ex_resize(w, n);
    case MGE_OP_PAD:
        return ex_pad(w, n);
    case MGE_OP_GRID_SAMPLE:
        return ex_grid_sample(w, n);
    case MGE_OP_ROI_ALIGN:
        return ex_roi_align(w, n);
    case MGE_OP_QUANTIZE:
        return q_attr(w, IN(0), mge_node_float(n, MGE_KEY_scale, 1), mge_node_int(n, MGE_KEY_zero, 0), OUT(0))
                   ? MGE_OK : NOMEM();
    case MGE_OP_DEQUANTIZE: {
        return dq_attr(w, IN(0), mge_node_float(n, MGE_KEY_scale, 1), mge_node_int(n, MGE_KEY_zero, 0), OUT(0))
                   ? MGE_OK : NOMEM();
    }
    case MGE_OP_QCONV2D: case MGE_OP_QLINEAR: case MGE_OP_QADD:
        return ex_quant(w, n);
    case MGE_OP_LSTM: case MGE_OP_GRU: case MGE_OP_RNN:
        return ex_rnn(w, n);
    case MGE_OP_QUANTIZE_LINEAR: case MGE_OP_DEQUANTIZE_LINEAR: case MGE_OP_REQUANTIZE:
    case MGE_OP_MATMUL_INTEGER: case MGE_OP_CONV_INTEGER:
        return mge_onnx_w_export_qlin(w, n);
    case MGE_OP_MAXPOOL3D: case MGE_OP_AVGPOOL3D: case MGE_OP_MAX_UNPOOL: case MGE_OP_CONV3D_GRAD_INPUT:
        return mge_onnx_w_pool3d(w, n);
    default: break;
    }
    int done;
    mge_status es = mge_onnx_w_export_extra_math(w, n, &done);
    if (done)
        return es;
    const mge_opinfo *oi = mge_op_info(n->op);
    const char *fam = oi ? oi->family : "";
    if (oi && (oi->flags & MGE_OPF_LOSS))
        return mge_onnx_w_unsupported(w, "a loss (export the model's outputs, not its loss)");
    if (strcmp(fam, "optim") == 0)
        return mge_onnx_w_unsupported(w, "an optimizer op (training only)");
    if (strcmp(fam, "comm") == 0)
        return mge_onnx_w_unsupported(w, "a distributed-training op");
    if (oi && strstr(oi->name, "_grad"))
        return mge_onnx_w_unsupported(w, "a gradient op (training only)");
    return mge_onnx_w_unsupported(w, "no ONNX equivalent");
}
