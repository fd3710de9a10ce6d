/* kshared.h — the arithmetic the core and the kernels both need, header
 * only: one definition that lib/ (shape inference, passes) and kernels/
 * (which recheck the shapes they touch) share without kernels linking to
 * lib/'s registry or inference code (see tests/layers). Pure functions of
 * numbers and op ids; nothing here reads the graph, the registry or any
 * state. lib/internal.h includes it, so lib code calls these by the same
 * names. mge_window_geom reads the node's attributes, which kernels may;
 * mge_op_flags and mge_op_alpha_only read ops.def's columns as compiled-in
 * constants (the traits), not the registry. */
#ifndef MGE_KSHARED_H
#define MGE_KSHARED_H

#include "mge.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Normalizes a possibly negative axis; -1 when out of range. */
static inline int mge_axis(int64_t axis, int ndim)
{
    if (axis < 0)
        axis += ndim;
    return axis >= 0 && axis < ndim ? (int)axis : -1;
}

/* A conv or pool window from the node's attributes (kernel, stride, pad,
 * dilation; stride defaults to 1, or to the kernel with stride_is_kernel,
 * as pools do); 0 when a value is out of range. */
static inline int mge_window_geom(const mge_node *n, int stride_is_kernel, int64_t k[2], int64_t s[2], int64_t p[2],
                                  int64_t d[2])
{
    for (int i = 0; i < 2; i++) {
        k[i] = mge_node_ints(n, MGE_KEY_kernel, i, 0);
        s[i] = mge_node_ints(n, MGE_KEY_stride, i, stride_is_kernel ? k[i] : 1);
        p[i] = mge_node_ints(n, MGE_KEY_pad, i, 0);
        d[i] = mge_node_ints(n, MGE_KEY_dilation, i, 1);
        if (k[i] < 1 || s[i] < 1 || p[i] < 0 || d[i] < 1)
            return 0;
    }
    return 1;
}

/* Conv/pool output size along one dim (PyTorch formula); <= 0 when invalid. */
static inline int64_t mge_conv_out_dim(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, int ceil_mode)
{
    if (k <= 0 || s <= 0 || p < 0 || d <= 0)
        return 0;
    int64_t span = d * (k - 1) + 1;
    int64_t num = in + 2 * p - span;
    if (ceil_mode)
        num += s - 1; /* PyTorch: a window may hang over the padded end */
    if (num < 0)
        return 0;
    int64_t o = num / s + 1;
    /* ceil mode: the last window must start inside the input or left padding */
    if (ceil_mode && (o - 1) * s >= in + p)
        o--;
    return o;
}

/* ops.def's flags column (MGE_OPF_*), header only: kernels read the
 * traits without linking to the registry. One small table per file that
 * calls it. */
static inline unsigned mge_op_flags(int64_t op)
{
    static const unsigned f[MGE_NOPS] = {
#define MGE_KEY(name, type)
#define MGE_OP(id, name, family, min_in, max_in, nout, flags, schema) flags,
#include "ops.def"
#undef MGE_KEY
#undef MGE_OP
    };
    return op >= 0 && op < MGE_NOPS ? f[op] : 0u;
}

/* 1 when op's only attribute, if any, is alpha: all a fused op can carry. */
static inline int mge_op_alpha_only(int64_t op)
{
    static const char *const s[MGE_NOPS] = {
#define MGE_KEY(name, type)
#define MGE_OP(id, name, family, min_in, max_in, nout, flags, schema) schema,
#include "ops.def"
#undef MGE_KEY
#undef MGE_OP
    };
    if (op < 0 || op >= MGE_NOPS)
        return 0;
    const char *p = s[op];
    if (!p[0])
        return 1;
    if (p[0] != 'a' || p[1] != 'l' || p[2] != 'p' || p[3] != 'h' || p[4] != 'a' || p[5] != '=')
        return 0;
    for (p += 6; *p; p++)
        if (*p == ' ')
            return 0;
    return 1;
}

/* What a fused op's act may be (incl. -1, none: the ACT trait), a
 * fused_elemwise unary entry (a TABLE op with at most alpha) and a binary
 * entry (lib/op_fused.c's inference and the fused kernels must agree). */
static inline int mge_fused_act_ok(int64_t op)
{
    return op == -1 || (mge_op_flags(op) & MGE_OPF_ACT);
}

static inline int mge_fused_unary_ok(int64_t op)
{
    return (mge_op_flags(op) & MGE_OPF_TABLE) && mge_op_alpha_only(op);
}

static inline int mge_fused_binary_ok(int64_t op)
{
    switch (op) {
    case MGE_OP_ADD:
    case MGE_OP_SUB:
    case MGE_OP_MUL:
    case MGE_OP_DIV:
    case MGE_OP_POW:
    case MGE_OP_MAXIMUM:
    case MGE_OP_MINIMUM: return 1;
    }
    return 0;
}

/* Winograd F(m,3) for conv2d_winograd (m = tile, 2 or 4; a = m + 2):
 * A^T [m][a], G [a][3] and B^T [a][a] (row-major); 0 for an unsupported m.
 * Matrices of Lavin and Gray, "Fast Algorithms for Convolutional Neural
 * Networks", 2015: F(2,3) on the points 0, 1, -1 and infinity; F(4,3) on
 * 0, 1, -1, 2, -2 and infinity. Y = A^T [(G g G^T) .* (B^T d B)] A for an
 * a x a input tile d and a 3x3 kernel g (correlation, as conv2d). The
 * tables are static locals: one copy per file that calls this, which is
 * harmless for constants. */
static inline int mge_winograd_matrices(int m, const double **at, const double **g, const double **bt)
{
    static const double at2[2 * 4] = {1, 1, 1, 0, 0, 1, -1, -1};
    static const double g2[4 * 3] = {1, 0, 0, 0.5, 0.5, 0.5, 0.5, -0.5, 0.5, 0, 0, 1};
    static const double bt2[4 * 4] = {1, 0, -1, 0, 0, 1, 1, 0, 0, -1, 1, 0, 0, 1, 0, -1};
    static const double at4[4 * 6] = {1, 1, 1, 1, 1, 0, 0, 1, -1, 2, -2, 0, 0, 1, 1, 4, 4, 0, 0, 1, -1, 8, -8, 1};
    static const double g4[6 * 3] = {1.0 / 4,  0,         0,         -1.0 / 6, -1.0 / 6, -1.0 / 6,
                                     -1.0 / 6, 1.0 / 6,   -1.0 / 6,  1.0 / 24, 1.0 / 12, 1.0 / 6,
                                     1.0 / 24, -1.0 / 12, 1.0 / 6,   0,        0,        1};
    static const double bt4[6 * 6] = {4, 0, -5, 0,  1, 0, 0, -4, -4, 1, 1, 0, 0, 4, -4, -1, 1, 0,
                                      0, -2, -1, 2, 1, 0, 0, 2,  -1, -2, 1, 0, 0, 4, 0, -5, 0, 1};
    const double *a = NULL, *gg = NULL, *b = NULL;
    if (m == 2)
        a = at2, gg = g2, b = bt2;
    else if (m == 4)
        a = at4, gg = g4, b = bt4;
    else
        return 0;
    if (at)
        *at = a;
    if (g)
        *g = gg;
    if (bt)
        *bt = b;
    return 1;
}

/* The weight transform: u[p][o][c] = (G w[o][c] G^T)[p / a][p % a] for w
 * [O,C,3,3], computed in double (u holds a*a*O*C floats). The mge-opt pass
 * stores it, the winograd_weight kernels compute it, the tests check
 * kernels against it: all must give the same bits, so the sums stay
 * unfused (no FMA contraction wherever this is inlined). */
static inline void mge_winograd_weight_transform(const float *w, int64_t O, int64_t C, int m, float *u)
{
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF /* GCC in ISO C mode contracts nothing already */
#endif
    const double *G;
    if (!mge_winograd_matrices(m, NULL, &G, NULL))
        return;
    const int a = m + 2;
    for (int64_t o = 0; o < O; o++)
        for (int64_t c = 0; c < C; c++) {
            const float *k = w + (o * C + c) * 9;
            double t[6 * 3], r[6 * 6];   /* t = G k, r = t G^T */
            for (int i = 0; i < a; i++)
                for (int j = 0; j < 3; j++)
                    t[i * 3 + j] = G[i * 3] * k[j] + G[i * 3 + 1] * k[3 + j] + G[i * 3 + 2] * k[6 + j];
            for (int i = 0; i < a; i++)
                for (int j = 0; j < a; j++)
                    r[i * a + j] = t[i * 3] * G[j * 3] + t[i * 3 + 1] * G[j * 3 + 1] + t[i * 3 + 2] * G[j * 3 + 2];
            for (int p = 0; p < a * a; p++)
                u[((int64_t)p * O + o) * C + c] = (float)r[p];
        }
}

/* ---- spatial ops (resize, pad, rms_norm): what infer and the kernels share */

/* The words of the mode key, in ops.def's order. */
enum { MGE_MODE_NEAREST, MGE_MODE_BILINEAR, MGE_MODE_CONSTANT, MGE_MODE_REFLECT, MGE_MODE_REPLICATE, MGE_MODE_BICUBIC };
/* The words of grid_sample's padding_mode key, in ops.def's order. */
enum { MGE_PADMODE_ZEROS, MGE_PADMODE_BORDER, MGE_PADMODE_REFLECTION };

/* Keys' cubic convolution weights of the 4 taps at -1, 0, 1, 2 from the
 * floor, for the fraction t in [0, 1) (PyTorch's a = -0.75, ONNX's
 * cubic_coeff_a); d, when not NULL, gets their derivatives in t. */
static inline void mge_cubic_weights(double t, double a, double *w, double *d)
{
    double x1 = t + 1, x2 = 1 - t, x3 = 2 - t;
    w[0] = ((a * x1 - 5 * a) * x1 + 8 * a) * x1 - 4 * a;
    w[1] = ((a + 2) * t - (a + 3)) * t * t + 1;
    w[2] = ((a + 2) * x2 - (a + 3)) * x2 * x2 + 1;
    w[3] = ((a * x3 - 5 * a) * x3 + 8 * a) * x3 - 4 * a;
    if (d) {
        d[0] = (3 * a * x1 - 10 * a) * x1 + 8 * a;
        d[1] = (3 * (a + 2) * t - 2 * (a + 3)) * t;
        d[2] = -(3 * (a + 2) * x2 - 2 * (a + 3)) * x2;
        d[3] = -((3 * a * x3 - 10 * a) * x3 + 8 * a);
    }
}

/* resize's scale factor along spatial dim k (0 = H, 1 = W): the scales
 * attribute's value, or 0 when the output size was given by size. */
static inline double mge_resize_factor(const mge_node *n, int k)
{
    const mge_attr *a = mge_node_attr(n, MGE_KEY_scales);
    double v = 0;   /* mge_attr_float_at's decoding: kernels do not call into lib */
    if (a && k >= 0 && k < a->n && k < MGE_MAX_DIMS)
        memcpy(&v, &a->i[k], sizeof v);
    return v;
}

/* The source coordinate step along a dim of in -> out elements, in float
 * as PyTorch computes it (so nearest picks the same pixels): bilinear
 * with align_corners (in-1)/(out-1); else 1/factor when scales gave the
 * size (PyTorch with recompute_scale_factor unset), in/out otherwise. */
static inline float mge_resize_step(int64_t in, int64_t out, int align, double factor)
{
    if (align)
        return out > 1 ? (float)(in - 1) / (float)(out - 1) : 0.0f;
    return factor > 0 ? (float)(1.0 / factor) : (float)in / (float)out;
}

/* Nearest: the source index of output index o (PyTorch's legacy 'nearest'). */
static inline int64_t mge_resize_nearest(int64_t o, int64_t in, int64_t out, float step)
{
    if (out == in)
        return o;
    if (out == 2 * in)
        return o >> 1;
    int64_t i = (int64_t)floorf((float)o * step);
    return i < in - 1 ? i : in - 1;
}

/* Bilinear: the two source indices of output index o and the weight l1 of
 * the second (the first's is 1 - l1). */
static inline void mge_resize_linear(int64_t o, int64_t in, int align, float step, int64_t *i0, int64_t *i1,
                                     float *l1)
{
    float r = align ? step * (float)o : step * ((float)o + 0.5f) - 0.5f;
    if (r < 0)
        r = 0;
    int64_t a = (int64_t)r;
    if (a > in - 1)
        a = in - 1;
    *i0 = a;
    *i1 = a + (a < in - 1 ? 1 : 0);
    float l = r - (float)a;
    *l1 = l < 0 ? 0 : l > 1 ? 1 : l;
}

/* Bicubic: the four source indices of output index o (clamped to the
 * input, as PyTorch and ONNX's edge padding) and their weights; the
 * source coordinate is half_pixel (not clamped at 0, unlike bilinear) or
 * align_corners. exclude_outside gives taps outside the input weight 0
 * and renormalizes the rest (ONNX). */
static inline void mge_resize_cubic(int64_t o, int64_t in, int align, float step, double a, int exclude,
                                    int64_t *idx, double *w)
{
    float r = align ? step * (float)o : step * ((float)o + 0.5f) - 0.5f;
    double f = floor((double)r);
    mge_cubic_weights((double)r - f, a, w, NULL);
    double sum = 0;
    for (int k = 0; k < 4; k++) {
        int64_t i = (int64_t)f - 1 + k;
        if (exclude && (i < 0 || i > in - 1))
            w[k] = 0;
        sum += w[k];
        idx[k] = i < 0 ? 0 : i > in - 1 ? in - 1 : i;
    }
    if (exclude && sum != 0)
        for (int k = 0; k < 4; k++)
            w[k] /= sum;
}

/* rms_norm's eps: the attribute, or when absent the dtype's machine
 * epsilon (PyTorch's eps=None). */
static inline double mge_rms_eps(const mge_node *n, mge_dtype dt)
{
    const mge_attr *a = mge_node_attr(n, MGE_KEY_eps);
    if (a)
        return a->f;
    return dt == MGE_F16 ? 0.0009765625 : dt == MGE_BF16 ? 0.0078125 : 1.1920928955078125e-07;
}

/* pad: the source index along a dim of d elements for output index o with
 * b elements padded before (negative: cropped), or -1 for the constant. */
static inline int64_t mge_pad_source(int64_t o, int64_t d, int64_t b, int mode)
{
    int64_t i = o - b;
    if (i >= 0 && i < d)
        return i;
    if (mode == MGE_MODE_REFLECT)
        return i < 0 ? -i : 2 * (d - 1) - i;
    if (mode == MGE_MODE_REPLICATE)
        return i < 0 ? 0 : d - 1;
    return -1;
}

#endif
